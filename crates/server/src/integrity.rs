//! `[integrity]` applied by the writer inside its transaction, after the client's change and
//! before the commit, so the batch sees one consistent state:
//!
//! - Referential integrity (OpenLDAP's refint overlay): a delete removes the deleted DN from
//!   the configured attributes of every entry naming it; a rename (or move) rewrites the old
//!   DNs of the entry and of everything below it to the new ones. Referrers are found over the
//!   attributes' equality indexes (`WriteTxn::entries_with_value`) and changed as internal
//!   modifies (no access check, modifiersName `referential_modifiers_name`). An attribute whose
//!   last value a delete removes takes `referential_nothing` when set; without it, where the
//!   schema requires the attribute, the value stays (slapd's dependent modify fails there and
//!   the delete still succeeds), logged.
//! - Attribute uniqueness (OpenLDAP's unique overlay): see `check_unique`.

use lmdir_schema::{
    normalized_dn_is_within, AttrId, LdapError, ModOp, Modification, NormalizedDn, ResultCode,
    Schema,
};
use lmdir_store::{EntryId, StoredEntry, WriteContext, WriteTxn};
use std::collections::BTreeMap;

/// A client's change as the rules see it (the writer's request, without its other kinds),
/// with its DNs as the writer normalized them.
pub(crate) enum Change<'r> {
    Add(&'r lmdir_schema::Entry, &'r NormalizedDn),
    Delete(&'r NormalizedDn),
    Modify(&'r NormalizedDn, &'r [Modification]),
    Rename {
        dn: &'r NormalizedDn,
        new_rdn: &'r str,
        new_superior: Option<&'r NormalizedDn>,
    },
}

/// Entries naming a DN, with the referential attributes (and normalized value) that do.
type Referrers = BTreeMap<EntryId, Vec<(AttrId, Vec<u8>)>>;

/// `[integrity]` compiled against the schema.
#[derive(Debug, Default)]
pub(crate) struct Integrity {
    referential: Vec<AttrId>,
    nothing: Option<String>,
    modifiers_name: String,
    unique: Vec<UniqueScope>,
}

/// One unique rule: values of each of `attributes` are unique at or below `base`.
#[derive(Debug)]
struct UniqueScope {
    base_normalized: String,
    attributes: Vec<AttrId>,
}

impl Integrity {
    /// Resolves the configured names: an unknown attribute, a referential one whose values are
    /// not DNs or a unique one without an equality rule is an error naming it.
    pub(crate) fn compile(
        config: &lmdir_config::IntegrityConfig,
        schema: &Schema,
        suffix: &str,
    ) -> Result<Integrity, String> {
        let resolve = |name: &str, key: &str| {
            schema
                .attribute(name)
                .ok_or_else(|| format!("[integrity] {key}: unknown attribute {name:?}"))
        };
        let mut referential = Vec::new();
        for name in &config.referential_attributes {
            let attr = resolve(name, "referential_attributes")?;
            if !is_dn_valued(schema, attr) {
                return Err(format!(
                    "[integrity] referential_attributes: {name:?} does not hold DNs"
                ));
            }
            referential.push(attr);
        }
        let mut unique = Vec::new();
        for rule in &config.unique {
            let base = if rule.base.is_empty() {
                suffix
            } else {
                &rule.base
            };
            let base_normalized = schema
                .normalize_dn_str(base)
                .map_err(|error| format!("[integrity] unique base {base:?}: {}", error.message))?;
            let mut attributes = Vec::new();
            for name in &rule.attributes {
                let attr = resolve(name, "unique attributes")?;
                if schema.attribute_type(attr).equality.is_none() {
                    return Err(format!(
                        "[integrity] unique attributes: {name:?} has no equality rule"
                    ));
                }
                attributes.push(attr);
            }
            unique.push(UniqueScope {
                base_normalized,
                attributes,
            });
        }
        Ok(Integrity {
            referential,
            nothing: (!config.referential_nothing.is_empty())
                .then(|| config.referential_nothing.clone()),
            modifiers_name: config.referential_modifiers_name.clone(),
            unique,
        })
    }

    /// Before the client's change (as slapd's unique overlay, ahead of the store's own
    /// checks): attribute uniqueness; and what `after_change` needs, a rename's entry and old
    /// DN (a missing target fails the change itself).
    /// `may_name(holder)`: whether the subject may learn of an entry holding a value (it is
    /// named in the answer only then).
    pub(crate) fn before_change(
        &self,
        txn: &WriteTxn<'_>,
        request: &Change<'_>,
        may_name: &dyn Fn(&StoredEntry) -> bool,
    ) -> Result<Option<(EntryId, String)>, LdapError> {
        if !self.unique.is_empty() {
            self.check_unique(txn, request, may_name)?;
        }
        match request {
            Change::Rename { dn, .. } if !self.referential.is_empty() => match txn.dn_to_id(*dn) {
                Ok(id) => Ok(Some((id, txn.dn_of(id)?))),
                Err(_) => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// Applies referential integrity to what the client's change did, in the same txn.
    pub(crate) fn after_change(
        &self,
        txn: &mut WriteTxn<'_>,
        request: &Change<'_>,
        renamed: Option<(EntryId, String)>,
    ) -> Result<(), LdapError> {
        match (request, renamed) {
            (Change::Delete(dn), _) if !self.referential.is_empty() => {
                self.deleted(txn, &dn.dn().to_string())
            }
            (Change::Rename { .. }, Some((id, old_dn))) => {
                let new_dn = txn.dn_of(id)?;
                self.renamed(txn, id, &old_dn, &new_dn)
            }
            _ => Ok(()),
        }
    }

    /// Attribute uniqueness (OpenLDAP's unique overlay): the values a write brings (an add's
    /// values, a modify's added and replacing values, a rename's new RDN values) of a rule's
    /// attributes, when the entry is (or will be) at or below the rule's base, must be held by
    /// no other entry there, else constraintViolation (19) with slapd's text and the holder.
    fn check_unique(
        &self,
        txn: &WriteTxn<'_>,
        request: &Change<'_>,
        may_name: &dyn Fn(&StoredEntry) -> bool,
    ) -> Result<(), LdapError> {
        let schema = txn.schema();
        let Some(written) = WrittenValues::of(&schema, request) else {
            return Ok(());
        };
        let target = written.current_dn.and_then(|dn| txn.dn_to_id(dn).ok());
        for rule in &self.unique {
            let base = rule.base_normalized.as_str();
            if !normalized_dn_is_within(&written.normalized_dn, base) {
                continue;
            }
            let values: Vec<&(AttrId, Vec<u8>)> = written
                .values
                .iter()
                .filter(|(attr, _)| rule.attributes.contains(attr))
                .collect();
            for (attr, original) in &values {
                let Ok(normalized) = schema.normalize_value(*attr, original) else {
                    continue;
                };
                if let Some(holder) = unique_holder(txn, target, *attr, &normalized, base)? {
                    let named = may_name(&holder)
                        .then(|| txn.dn_of(holder.id))
                        .transpose()?;
                    return Err(not_unique(&schema, &values, named.as_deref()));
                }
            }
        }
        Ok(())
    }

    /// The attributes the rules look values up in (referential, then unique ones).
    pub(crate) fn looked_up_attributes(&self) -> impl Iterator<Item = AttrId> + '_ {
        self.referential.iter().copied().chain(
            self.unique
                .iter()
                .flat_map(|rule| rule.attributes.iter().copied()),
        )
    }

    fn internal_context(&self) -> WriteContext {
        WriteContext {
            permissive_modify: true,
            ..WriteContext::new(self.modifiers_name.clone())
        }
    }

    /// The entries naming `dn` in a referential attribute, with those attributes (one modify
    /// per referrer, as slapd's refint: all or nothing for the entry).
    fn referrers(&self, txn: &WriteTxn<'_>, dn: &str) -> Result<Referrers, LdapError> {
        let mut referrers = Referrers::new();
        for attr in &self.referential {
            let normalized = txn.schema().normalize_value(*attr, dn.as_bytes())?;
            for referrer in txn.entries_with_value(*attr, &normalized)? {
                referrers
                    .entry(referrer)
                    .or_default()
                    .push((*attr, normalized.clone()));
            }
        }
        Ok(referrers)
    }

    /// After the delete of the entry at `old_dn`: its DN leaves every referential attribute.
    pub(crate) fn deleted(&self, txn: &mut WriteTxn<'_>, old_dn: &str) -> Result<(), LdapError> {
        for (referrer, attributes) in self.referrers(txn, old_dn)? {
            self.remove_values(txn, referrer, &attributes, old_dn)?;
        }
        Ok(())
    }

    /// Removes `old_dn` from `attributes` of `referrer` in one modify, `nothing` in its place
    /// where it was the last value; a modify the schema refuses (a required attribute
    /// emptied) leaves the entry as it was.
    fn remove_values(
        &self,
        txn: &mut WriteTxn<'_>,
        referrer: EntryId,
        attributes: &[(AttrId, Vec<u8>)],
        old_dn: &str,
    ) -> Result<(), LdapError> {
        let Some(entry) = txn.entry_by_id(referrer)? else {
            return Ok(());
        };
        let mut modifications = Vec::new();
        for (attr, normalized) in attributes {
            let name = txn.schema().attribute_type(*attr).name().to_string();
            let last = entry.values_of(*attr).all(|(_, value)| value == normalized);
            if let (true, Some(nothing)) = (last, &self.nothing) {
                modifications.push(change(ModOp::Add, &name, nothing));
            }
            modifications.push(change(ModOp::Delete, &name, old_dn));
        }
        let dn = txn.dn_of(referrer)?;
        match txn.modify(&dn, &modifications, &self.internal_context()) {
            Ok(_) => Ok(()),
            Err(error) if error.code == ResultCode::ObjectClassViolation => {
                tracing::warn!(
                    "referential integrity: '{dn}' keeps '{old_dn}' (a required value): {}",
                    error.message
                );
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// After the entry `id` (and its subtree) was renamed from `old_dn` to `new_dn`: the old
    /// DN of each of them is rewritten to its new one in every referential attribute. The old
    /// value goes before the new one comes (as slapd's refint): when both are equal as DNs (a
    /// case- or spacing-only rename) the delete removes the value and the add puts it back
    /// in the new spelling, where the other order would add nothing (the value is there, a
    /// permissive modify) and then delete it.
    pub(crate) fn renamed(
        &self,
        txn: &mut WriteTxn<'_>,
        id: EntryId,
        old_dn: &str,
        new_dn: &str,
    ) -> Result<(), LdapError> {
        for moved in txn.subtree_ids(id)? {
            let moved_new = txn.dn_of(moved)?;
            let Some(prefix) = moved_new.strip_suffix(new_dn) else {
                continue;
            };
            let moved_old = format!("{prefix}{old_dn}");
            for (referrer, attributes) in self.referrers(txn, &moved_old)? {
                let mut modifications = Vec::new();
                for (attr, _) in attributes {
                    let name = txn.schema().attribute_type(attr).name().to_string();
                    modifications.push(change(ModOp::Delete, &name, &moved_old));
                    modifications.push(change(ModOp::Add, &name, &moved_new));
                }
                let dn = txn.dn_of(referrer)?;
                txn.modify(&dn, &modifications, &self.internal_context())?;
            }
        }
        Ok(())
    }
}

fn change(op: ModOp, description: &str, value: &str) -> Modification {
    Modification {
        op,
        description: description.to_string(),
        values: vec![value.as_bytes().to_vec()],
    }
}

/// The entry other than `target` at or below `base` holding `normalized` in `attr`.
fn unique_holder<'t>(
    txn: &'t WriteTxn<'_>,
    target: Option<EntryId>,
    attr: AttrId,
    normalized: &[u8],
    base: &str,
) -> Result<Option<StoredEntry<'t>>, LdapError> {
    for other in txn.entries_with_value(attr, normalized)? {
        if Some(other) == target {
            continue;
        }
        let Some(holder) = txn.entry_by_id(other)? else {
            continue;
        };
        if normalized_dn_is_within(&holder.normalized_dn, base) {
            return Ok(Some(holder));
        }
    }
    Ok(None)
}

/// slapd's answer (`non-unique attributes found with (|(uid=x)(mail=y))`, every value of the
/// rule's attributes the write brings), then the entry holding one when it may be named.
fn not_unique(schema: &Schema, values: &[&(AttrId, Vec<u8>)], holder: Option<&str>) -> LdapError {
    let mut filter = String::from("(|");
    for (attr, original) in values {
        filter.push('(');
        filter.push_str(schema.attribute_type(*attr).name());
        filter.push('=');
        let mut escaped = Vec::with_capacity(original.len());
        for byte in original {
            match byte {
                b'*' | b'(' | b')' | b'\\' | 0 => {
                    escaped.extend_from_slice(format!("\\{byte:02x}").as_bytes())
                }
                _ => escaped.push(*byte),
            }
        }
        filter.push_str(&String::from_utf8_lossy(&escaped));
        filter.push(')');
    }
    filter.push(')');
    LdapError::new(
        ResultCode::ConstraintViolation,
        match holder {
            Some(holder) => {
                format!("non-unique attributes found with {filter} (held by '{holder}')")
            }
            None => format!("non-unique attributes found with {filter}"),
        },
    )
}

/// The values one write request brings, with the DN the entry will have.
struct WrittenValues<'r> {
    /// (attribute, value as the client wrote it), in request order.
    values: Vec<(AttrId, Vec<u8>)>,
    /// The entry's DN after the write, normalized.
    normalized_dn: String,
    /// The entry's DN now (None for an add).
    current_dn: Option<&'r NormalizedDn>,
}

impl<'r> WrittenValues<'r> {
    fn of(schema: &Schema, request: &Change<'r>) -> Option<WrittenValues<'r>> {
        let attribute = |description: &str| {
            schema
                .parse_description(description)
                .ok()
                .map(|parsed| parsed.attr)
        };
        let mut values = Vec::new();
        let (normalized_dn, current_dn) = match request {
            Change::Add(entry, dn) => {
                for item in &entry.attributes {
                    let Some(attr) = attribute(&item.description) else {
                        continue;
                    };
                    values.extend(item.values.iter().map(|value| (attr, value.clone())));
                }
                (dn.as_str().to_string(), None)
            }
            Change::Modify(dn, modifications) => {
                for modification in modifications.iter() {
                    let adds = matches!(modification.op, ModOp::Add | ModOp::Replace);
                    let Some(attr) = attribute(&modification.description).filter(|_| adds) else {
                        continue;
                    };
                    values.extend(
                        modification
                            .values
                            .iter()
                            .map(|value| (attr, value.clone())),
                    );
                }
                (dn.as_str().to_string(), Some(*dn))
            }
            Change::Rename {
                dn,
                new_rdn,
                new_superior,
            } => {
                let rdn = lmdir_schema::Rdn::parse(new_rdn).ok()?;
                for ava in &rdn.avas {
                    if let Some(attr) = attribute(&ava.attr) {
                        values.push((attr, ava.value.clone()));
                    }
                }
                let parent = match new_superior {
                    Some(superior) => *superior,
                    None => &dn.parent()?,
                };
                let new_dn = schema.normalized_child(parent, &rdn).ok()?;
                (new_dn.as_str().to_string(), Some(*dn))
            }
            Change::Delete(_) => return None,
        };
        Some(WrittenValues {
            values,
            normalized_dn,
            current_dn,
        })
    }
}

/// Whether the attribute's values are DNs (distinguishedNameMatch, or uniqueMemberMatch,
/// whose values without the optional `#'...'B` UID are DNs: those are the ones followed).
fn is_dn_valued(schema: &Schema, attr: AttrId) -> bool {
    use lmdir_schema::NormalizationFamily::{DistinguishedName, UniqueMember};
    schema
        .attribute_type(attr)
        .equality
        .is_some_and(|rule| matches!(rule.family(), DistinguishedName | UniqueMember))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(referential: &[&str], unique: &[&str]) -> Result<Integrity, String> {
        let config = lmdir_config::IntegrityConfig {
            referential_attributes: referential.iter().map(|name| name.to_string()).collect(),
            unique: vec![lmdir_config::UniqueRule {
                base: String::new(),
                attributes: unique.iter().map(|name| name.to_string()).collect(),
            }],
            ..lmdir_config::IntegrityConfig::default()
        };
        Integrity::compile(&config, &Schema::builtin(), "dc=example,dc=com")
    }

    #[test]
    fn configured_names_are_checked_against_the_schema() {
        assert!(compiled(
            &["member", "uniqueMember", "manager", "seeAlso", "owner"],
            &["uid"]
        )
        .is_ok());
        let unknown = compiled(&["nosuchAttribute"], &["uid"]).unwrap_err();
        assert!(unknown.contains("unknown attribute"), "{unknown}");
        let not_dn = compiled(&["cn"], &["uid"]).unwrap_err();
        assert!(not_dn.contains("does not hold DNs"), "{not_dn}");
        let no_equality = compiled(&[], &["userCertificate"]).unwrap_err();
        assert!(no_equality.contains("no equality rule"), "{no_equality}");
    }
}
