//! memberOf for a fresh load (`StoreOptions::memberof`): after all entries and the DN tree are
//! written, each member entry gets `memberOf: <group DN>` exactly as single-entry adds of the
//! same LDIF would give it. A group's add touches the members that already exist (a member
//! whose ID, file order, is not above the group's; a group naming itself counts), and a
//! member's add finds the groups before it that list its DN over the member equality indexes
//! (`GroupMembers::unfound_later` lists the values it would not find them by); members absent
//! from the DB get nothing. A replica's first refresh (`Memberships::EveryGroup`)
//! counts every group listing a member, whatever the order: memberOf there is what the
//! replica's groups say, as for the writer's replicated adds. The new values' index keys go
//! into one more run that joins the final merge.

use std::collections::BTreeMap;
use std::path::Path;

use lmdir_schema::{LdapError, ResultCode};
use lmdir_store::{BulkWriter, RowScratch, Store};
use roaring::RoaringBitmap;

use crate::prepare::WorkerScratch;
use crate::runs::{FinishedRun, PostingRun};
use crate::LoadError;

/// A group entry (by ID, ascending) and the normalized DNs its member values name.
pub(crate) struct GroupMembers {
    pub id: u32,
    pub members: Vec<String>,
    /// Members a single add of that DN, after the group's, would not find the group by (see
    /// `Memberships::AddedBefore`): sorted.
    pub unfound_later: Vec<String>,
}

fn ldap_failure(what: String) -> impl FnOnce(LdapError) -> LoadError {
    move |error| LoadError::Invalid(format!("memberOf: {what}: {}", error.message))
}

/// Which groups a member entry joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memberships {
    /// As single-entry adds of the file in order (an import): the groups added after it (or
    /// itself), and those added before it that its own add finds listing its DN (over the
    /// member equality indexes: `memberof_of_added_entry` in the store).
    AddedBefore,
    /// Every group listing it: a replica's first refresh, memberOf as the replica's own groups
    /// say (never the provider's values, which the refresh leaves out).
    EveryGroup,
}

/// Which groups each member entry joins: member ID → the DNs of its groups, in group (add)
/// order. Read through the store's read txns (the tree must be committed).
fn memberships(
    store: &Store,
    (groups, rule): (&[GroupMembers], Memberships),
    rejected: &RoaringBitmap,
) -> Result<BTreeMap<u32, Vec<String>>, LoadError> {
    assert!(
        groups.windows(2).all(|pair| pair[0].id < pair[1].id),
        "groups arrive in ID order"
    );
    let mut memberships: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let read = store.read()?;
    for group in groups {
        let group_id = group.id;
        if rejected.contains(group_id) {
            continue;
        }
        let group_dn = read
            .dn_of(group_id)
            .map_err(ldap_failure(format!("group entry {group_id}")))?;
        for member in &group.members {
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
            let joins = rule == Memberships::EveryGroup
                || member_id <= group_id
                || group.unfound_later.binary_search(member).is_err();
            if joins && !rejected.contains(member_id) {
                memberships
                    .entry(member_id)
                    .or_default()
                    .push(group_dn.clone());
            }
        }
    }
    Ok(memberships)
}

/// Adds the memberOf values through the bulk writer (the store appends them to each member
/// entry) and returns the run of their index keys.
pub(crate) fn add_memberof(
    store: &Store,
    bulk: &mut BulkWriter<'_>,
    groups: (&[GroupMembers], Memberships),
    rejected: &RoaringBitmap,
    run_budget_bytes: usize,
    spill_directory: &Path,
) -> Result<Option<FinishedRun>, LoadError> {
    let Some(memberof) = store.schema().attribute("memberOf") else {
        return Ok(None);
    };
    let memberships = memberships(store, groups, rejected)?;
    if memberships.is_empty() {
        return Ok(None);
    }
    let plan_now = store.index_plan();
    let plan = &*plan_now;
    let mut run = PostingRun::new(run_budget_bytes, spill_directory);
    let mut scratch = WorkerScratch::default();
    let mut rows = RowScratch::new();
    for (member_id, group_dns) in &memberships {
        let added = bulk.add_memberof(*member_id, group_dns, &mut rows)?;
        for normalized in &added {
            // Keys the entry already had (presence, say) merge away as duplicates.
            plan.value_keys(memberof, normalized, &mut |slot, key| {
                scratch.push_key(&mut run, slot, key, *member_id)
            })?;
        }
    }
    Ok(Some(run.finish()?))
}
