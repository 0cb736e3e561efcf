//! Attribute uniqueness of a load (`[[integrity.unique]]`, OpenLDAP's unique overlay, which
//! slapadd ignores): every value held by more than one entry within a rule's subtree is
//! reported, each holder with its record number, line and DN, and the load fails (nothing is
//! installed). A fresh load checks once its indexes are written (keys posting two or more IDs);
//! a load into an existing directory checks each added entry in its transaction.

use lmdir_schema::{normalized_dn_is_within, AttrId, Schema};
use lmdir_store::{EntryId, ReadTxn, Store, WriteTxn};

use crate::{LoadError, LoadOptions, UniqueScope};

/// Most duplicates listed in the error (all are counted).
const DUPLICATES_REPORTED_MAX: usize = 10_000;

/// A rule resolved against the schema.
pub(crate) struct CompiledRule {
    base_normalized: String,
    attributes: Vec<(AttrId, String)>,
}

pub(crate) fn compile(options: &LoadOptions) -> Result<Vec<CompiledRule>, LoadError> {
    let schema: &Schema = &options.schema;
    options
        .unique
        .iter()
        .map(|UniqueScope { base, attributes }| {
            let base = if base.is_empty() {
                &options.store.suffix
            } else {
                base
            };
            let base_normalized = schema
                .normalize_dn_str(base)
                .map_err(|error| LoadError::Invalid(format!("unique base {base:?}: {error}")))?;
            let attributes = attributes
                .iter()
                .map(|name| match schema.attribute(name) {
                    Some(attr) => Ok((attr, schema.attribute_type(attr).name().to_string())),
                    None => Err(LoadError::Invalid(format!(
                        "unique rule: unknown attribute {name:?}"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(CompiledRule {
                base_normalized,
                attributes,
            })
        })
        .collect()
}

/// After a fresh load: every duplicate, `lines` giving each accepted entry's (ID, line) in ID
/// order.
pub(crate) fn check_fresh(
    store: &Store,
    options: &LoadOptions,
    lines: &[(u32, u64)],
) -> Result<(), LoadError> {
    let rules = compile(options)?;
    if rules.is_empty() {
        return Ok(());
    }
    let read = store.read()?;
    let mut reports = Vec::new();
    for rule in &rules {
        let Ok(base) = read.normalized_dn_to_id(&rule.base_normalized) else {
            continue;
        };
        for (attr, name) in &rule.attributes {
            for duplicate in read.duplicate_values(*attr, base)? {
                let holders: Vec<String> = duplicate
                    .ids
                    .iter()
                    .map(|id| holder(&read, lines, *id))
                    .collect();
                reports.push(format!(
                    "{name}: {:?} is held by {}",
                    String::from_utf8_lossy(&duplicate.value),
                    holders.join(", ")
                ));
            }
        }
    }
    failure(reports)
}

fn holder(read: &ReadTxn, lines: &[(u32, u64)], id: EntryId) -> String {
    let dn = read.dn_of(id).unwrap_or_default();
    match lines.binary_search_by_key(&id, |(entry, _)| *entry) {
        Ok(index) => format!("record {id} (line {}, {dn})", lines[index].1),
        Err(_) => format!("record {id} ({dn})"),
    }
}

/// The duplicates the entry `id` (from `line`) brings into a directory, in the load's txn.
pub(crate) fn conflicts_of_added(
    txn: &WriteTxn<'_>,
    rules: &[CompiledRule],
    id: EntryId,
    line: u64,
) -> Result<Vec<String>, LoadError> {
    let mut reports = Vec::new();
    let Some(entry) = txn.entry_by_id(id).map_err(invalid)? else {
        return Ok(reports);
    };
    for rule in rules {
        if !normalized_dn_is_within(&entry.normalized_dn, &rule.base_normalized) {
            continue;
        }
        for (attr, name) in &rule.attributes {
            for (original, normalized) in entry.values_of(*attr) {
                for other in txn.entries_with_value(*attr, normalized).map_err(invalid)? {
                    let Some(holder) = txn.entry_by_id(other).map_err(invalid)? else {
                        continue;
                    };
                    if other == id
                        || !normalized_dn_is_within(&holder.normalized_dn, &rule.base_normalized)
                    {
                        continue;
                    }
                    reports.push(format!(
                        "{name}: {:?} of the entry at line {line} ({}) is held by {}",
                        String::from_utf8_lossy(original),
                        txn.dn_of(id).map_err(invalid)?,
                        txn.dn_of(other).map_err(invalid)?
                    ));
                }
            }
        }
    }
    Ok(reports)
}

fn invalid(error: lmdir_schema::LdapError) -> LoadError {
    LoadError::Invalid(error.to_string())
}

/// Ok when nothing is duplicated, else the error listing the duplicates.
pub(crate) fn failure(reports: Vec<String>) -> Result<(), LoadError> {
    if reports.is_empty() {
        return Ok(());
    }
    let count = reports.len();
    // Each report quotes values and DNs of the input: control bytes shown escaped.
    let mut listed: Vec<String> = reports
        .into_iter()
        .take(DUPLICATES_REPORTED_MAX)
        .map(|report| lmdir_ldif::escape_control(&report).into_owned())
        .collect();
    if count > listed.len() {
        listed.push(format!("... and {} more", count - listed.len()));
    }
    Err(LoadError::Invalid(format!(
        "{count} values are not unique ([[integrity.unique]]); nothing was loaded:\n{}",
        listed.join("\n")
    )))
}
