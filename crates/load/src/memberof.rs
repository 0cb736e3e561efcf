//! memberOf for a fresh load (`StoreOptions::memberof`): after all entries and the DN tree are
//! written, each member entry gets `memberOf: <group DN>` exactly as single-entry adds of the
//! same LDIF would give it. A group's add touches only members that already exist, so a member
//! counts only when its ID (file order) is not above the group's (a group naming itself counts);
//! members absent from the DB get nothing. The new values' index keys go into one more run that
//! joins the final merge.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use heed::RwTxn;
use lmdir_schema::{LdapError, ResultCode};
use lmdir_store::codec::{encode_entry, AttributeToEncode, EncodedEntry};
use lmdir_store::Store;
use roaring::RoaringBitmap;

use crate::prepare::{push_value_keys, PrepareContext, WorkerScratch};
use crate::runs::{FinishedRun, PostingRun};
use crate::LoadError;

/// A group entry (by ID, ascending) and the normalized DNs its member values name.
pub(crate) type GroupMembers = (u32, Vec<String>);

type Values = Vec<(Vec<u8>, Vec<u8>)>;

fn ldap_failure(what: String) -> impl FnOnce(LdapError) -> LoadError {
    move |error| LoadError::Invalid(format!("memberOf: {what}: {}", error.message))
}

/// Adds the memberOf values in `write_txn` (ordinary puts, committed every
/// `commit_every_bytes` of rewritten entries) and returns the run of their index keys.
#[allow(clippy::too_many_arguments)]
pub(crate) fn add_memberof<'e>(
    store: &'e Store,
    write_txn: &mut Option<RwTxn<'e>>,
    commit_every_bytes: usize,
    context: &PrepareContext,
    groups: &[GroupMembers],
    rejected: &RoaringBitmap,
    run_budget_bytes: usize,
    spill_directory: &Path,
) -> Result<Option<FinishedRun>, LoadError> {
    let schema = &*context.schema;
    let Some(memberof) = schema.attribute("memberOf") else {
        return Ok(None);
    };
    assert!(
        groups.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "groups arrive in ID order"
    );
    // Member ID → the DNs of its groups, in group (add) order.
    let mut memberships: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    {
        let read = store.read()?;
        for (group_id, members) in groups {
            if rejected.contains(*group_id) {
                continue;
            }
            let group_dn = read
                .dn_of(*group_id)
                .map_err(ldap_failure(format!("group entry {group_id}")))?;
            for member in members {
                let member_id = match read.dn_to_id(member) {
                    Ok(id) => id,
                    Err(error)
                        if matches!(
                            error.code,
                            ResultCode::NoSuchObject | ResultCode::InvalidDnSyntax
                        ) =>
                    {
                        continue
                    }
                    Err(error) => {
                        return Err(ldap_failure(format!("member '{member}' of '{group_dn}'"))(
                            error,
                        ))
                    }
                };
                if member_id <= *group_id && !rejected.contains(member_id) {
                    memberships
                        .entry(member_id)
                        .or_default()
                        .push(group_dn.clone());
                }
            }
        }
    }
    if memberships.is_empty() {
        return Ok(None);
    }

    let memberof_description = schema
        .parse_description(schema.attribute_type(memberof).name())
        .map_err(ldap_failure("the memberOf description".into()))?;
    let memberof_text = schema.description_string(&memberof_description);
    // An entry may already hold memberOf (option-less) from the LDIF, under any spelling the
    // loader numbered; the store appends to that attribute.
    let existing_numbers: HashSet<u32> = context
        .descriptions
        .texts()
        .iter()
        .enumerate()
        .filter(|(_, text)| {
            schema.parse_description(text).is_ok_and(|description| {
                description.attr == memberof && description.options.is_empty()
            })
        })
        .map(|(number, _)| number as u32)
        .collect();
    let memberof_number = context.descriptions.number_of(&memberof_text);
    let index = context.indexes.get(&memberof).copied();
    let ordering = schema.attribute_type(memberof).ordering;
    let mut run = PostingRun::new(run_budget_bytes, spill_directory);
    let mut scratch = WorkerScratch::default();
    let id2entry = store.id2entry_database();
    let mut encoded = Vec::new();
    let mut bytes_since_commit = 0usize;
    for (member_id, group_dns) in &memberships {
        let key = member_id.to_be_bytes();
        let txn = write_txn.as_mut().expect("a txn is open");
        let stored = id2entry
            .get(txn, &key)?
            .ok_or_else(|| LoadError::Invalid(format!("memberOf: entry {member_id} is missing")))?
            .to_vec();
        let parsed = EncodedEntry::parse(&stored).map_err(|error| {
            LoadError::Invalid(format!("memberOf: entry {member_id}: {error:?}"))
        })?;
        let mut attributes: Vec<(u32, Values)> = parsed
            .attributes()
            .map(|attribute| {
                (
                    attribute.description_number,
                    attribute
                        .values()
                        .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
                        .collect(),
                )
            })
            .collect();
        let mut position = attributes
            .iter()
            .position(|(number, _)| existing_numbers.contains(number));
        for group_dn in group_dns {
            let normalized = schema
                .normalize_value(memberof, group_dn.as_bytes())
                .map_err(ldap_failure(format!("group DN '{group_dn}'")))?;
            let values = match position {
                Some(index) => &mut attributes[index].1,
                None => {
                    attributes.push((memberof_number, Vec::new()));
                    position = Some(attributes.len() - 1);
                    &mut attributes.last_mut().expect("just pushed").1
                }
            };
            if values.iter().any(|(_, value)| *value == normalized) {
                continue;
            }
            if let Some((database, kinds)) = index {
                // Keys the entry already had (presence, say) merge away as duplicates.
                push_value_keys(
                    &database.to_be_bytes(),
                    kinds,
                    &normalized,
                    ordering,
                    *member_id,
                    &mut run,
                    &mut scratch,
                )?;
            }
            values.push((group_dn.as_bytes().to_vec(), normalized));
        }
        let to_encode: Vec<AttributeToEncode<'_>> = attributes
            .iter()
            .map(|(number, values)| AttributeToEncode {
                description_number: *number,
                values,
            })
            .collect();
        encode_entry(&to_encode, &mut encoded).map_err(|error| {
            LoadError::Invalid(format!("an entry with its memberOf values: {error}"))
        })?;
        id2entry.put(txn, &key, &encoded)?;
        bytes_since_commit += encoded.len();
        if bytes_since_commit >= commit_every_bytes {
            bytes_since_commit = 0;
            write_txn.take().expect("a txn is open").commit()?;
            *write_txn = Some(store.env().write_txn()?);
        }
    }
    Ok(Some(run.finish()?))
}
