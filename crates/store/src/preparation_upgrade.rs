//! Store format 4: string preparation as slapd 2.5 does it (`lmdir_schema::prepare_string`)
//! instead of RFC 4518's (full case folding, characters mapped to nothing, every whitespace a
//! space), which stores of formats 2 and 3 were written with. Their stored normalized values,
//! index keys and dn2id keys are the old preparation's.
//!
//! A read-write open of such a store scans it. Only values that may prepare differently are
//! prepared again (`may_prepare_differently_than_rfc4518`: a non-ASCII byte or an ASCII control
//! character; for telephoneNumber, which slapd does not case fold, also an ASCII letter; for a
//! DN, also an escape); every other value prepares the same under both. When none changed, the
//! keys are the new preparation's too: the format number is raised in place. Otherwise the
//! open is refused, naming the count and the first entry: the remedy is `lmdir export` (a
//! read-only open, which walks the tree by entry IDs and original RDNs and needs no
//! preparation) and `lmdir load` into an empty directory. Read-only opens of such a store go
//! on (export, search, check); a search for a changed value may miss it until the reload.

use lmdir_schema::{
    may_prepare_differently_than_rfc4518, AttrId, Dn, LdapError, MatchingRule, NormalizationFamily,
    Schema,
};

use crate::error::StoreError;
use crate::layout::{self, EntryId, ROOT_PARENT_ID};
use crate::read::{require_node, ReadTxn};
use crate::store::Store;

/// What a scan found: how many entries hold a value (or have a name) that prepares
/// differently now, and the first one's DN and attribute (`DN` for the entry's name).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PreparationChanges {
    pub entries: u64,
    pub first: Option<(String, String)>,
}

/// Whether a value of `family` is prepared by `prep.rs` (directly or inside a DN).
fn is_string_prepared(family: NormalizationFamily) -> bool {
    matches!(
        family,
        NormalizationFamily::CaseIgnore
            | NormalizationFamily::CaseExact
            | NormalizationFamily::CaseIgnoreIa5
            | NormalizationFamily::CaseExactIa5
            | NormalizationFamily::TelephoneNumber
            | NormalizationFamily::CaseIgnoreList
            | NormalizationFamily::DistinguishedName
            | NormalizationFamily::UniqueMember
    )
}

/// Whether `value` of `family` must be prepared again to know it kept its normalized form.
fn needs_check(family: NormalizationFamily, value: &[u8]) -> bool {
    may_prepare_differently_than_rfc4518(value)
        || match family {
            NormalizationFamily::TelephoneNumber => value.iter().any(u8::is_ascii_alphabetic),
            NormalizationFamily::DistinguishedName | NormalizationFamily::UniqueMember => {
                value.iter().any(|byte| matches!(byte, b'\\' | b'#'))
            }
            _ => false,
        }
}

/// The family whose form the store keeps for the attribute's values (the equality rule's),
/// and whether a substrings or ordering rule of another string-prepared family makes index
/// keys of a form the store does not keep (those cannot be checked: a value that may prepare
/// differently then counts as changed).
fn families(schema: &Schema, attr: AttrId) -> (Option<NormalizationFamily>, bool) {
    let attribute_type = schema.attribute_type(attr);
    let equality = attribute_type.equality.map(MatchingRule::family);
    let other_form = [attribute_type.substring, attribute_type.ordering]
        .into_iter()
        .flatten()
        .map(MatchingRule::family)
        .any(|family| Some(family) != equality && is_string_prepared(family));
    (
        equality.filter(|family| is_string_prepared(*family)),
        other_form,
    )
}

/// The first attribute of entry `id` one of whose values prepares differently now.
fn changed_attribute(read: &ReadTxn, id: EntryId) -> Result<Option<String>, LdapError> {
    let schema = read.schema();
    let Some(entry) = read.entry(id)? else {
        return Ok(None);
    };
    for attribute in entry.attributes() {
        let (equality, other_form) = families(schema, attribute.attr());
        let Some(family) = equality.or(other_form.then_some(NormalizationFamily::CaseIgnore))
        else {
            continue;
        };
        for (original, normalized) in attribute.values() {
            if !needs_check(family, original) {
                continue;
            }
            let same = !other_form
                && equality.is_some()
                && schema
                    .normalize_value(attribute.attr(), original)
                    .is_ok_and(|now| now == normalized.to_cow().as_ref());
            if !same {
                return Ok(Some(attribute.description_text().to_string()));
            }
        }
    }
    Ok(None)
}

/// Whether the name of entry `id` (its RDN; the whole DN of a top-level entry) normalizes
/// differently now from the dn2id key part stored for it.
fn name_changed(read: &ReadTxn, id: EntryId) -> Result<bool, LdapError> {
    let node = require_node(&read.inner, read.txn(), id)?;
    if !needs_check(NormalizationFamily::DistinguishedName, node.rdn_original) {
        return Ok(false);
    }
    let original = std::str::from_utf8(node.rdn_original).unwrap_or_default();
    // A name that no longer parses or normalizes counts as changed.
    let now = Dn::parse(original).ok().and_then(|dn| {
        if node.parent == ROOT_PARENT_ID {
            read.schema().normalize_dn(&dn).ok()
        } else {
            match dn.rdns.as_slice() {
                [rdn] => read.schema().normalize_rdn(rdn).ok(),
                _ => None,
            }
        }
    });
    Ok(now.is_none_or(|now| now.as_bytes() != node.rdn_normalized))
}

impl ReadTxn {
    /// Scans every entry for values and names that prepare differently under slapd's string
    /// preparation than under RFC 4518's (see the module documentation).
    pub fn preparation_changes(&self) -> Result<PreparationChanges, LdapError> {
        let mut changes = PreparationChanges::default();
        for id in self.ids_parents_first()? {
            let attribute = if name_changed(self, id)? {
                Some("DN".to_string())
            } else {
                changed_attribute(self, id)?
            };
            if let Some(attribute) = attribute {
                changes.entries += 1;
                if changes.first.is_none() {
                    changes.first = Some((self.dn_of(id)?, attribute));
                }
            }
        }
        Ok(changes)
    }
}

impl Store {
    /// A read-write open's step for a store of a format written with RFC 4518 preparation:
    /// raises the number to `FORMAT_VERSION` when nothing prepares differently now, else
    /// refuses the open, saying what to do.
    pub(crate) fn upgrade_string_preparation(&self) -> Result<(), StoreError> {
        let databases = &self.inner.databases;
        let stored = {
            let txn = self.inner.env.read_txn()?;
            databases
                .meta
                .get(&txn, layout::META_FORMAT_VERSION)?
                .map(<[u8]>::to_vec)
        };
        let previous = layout::FORMAT_VERSION_RFC4518_PREPARATION.to_be_bytes();
        if stored.as_deref() != Some(&previous[..]) {
            return Ok(());
        }
        let changes = self.read()?.preparation_changes()?;
        if let Some((dn, attribute)) = changes.first {
            return Err(StoreError::Format(refusal(
                changes.entries,
                &dn,
                &attribute,
            )));
        }
        let mut write_txn = self.inner.env.write_txn()?;
        databases.meta.put(
            &mut write_txn,
            layout::META_FORMAT_VERSION,
            &layout::FORMAT_VERSION.to_be_bytes(),
        )?;
        write_txn.commit()?;
        tracing::info!(
            "store format {} upgraded to {}: no value or DN prepares differently under slapd's \
             string preparation",
            layout::FORMAT_VERSION_RFC4518_PREPARATION,
            layout::FORMAT_VERSION
        );
        Ok(())
    }
}

fn refusal(entries: u64, dn: &str, attribute: &str) -> String {
    format!(
        "this store (format {}) was written with RFC 4518 string preparation; this build \
         prepares strings as OpenLDAP slapd 2.5 does (format {}), and {entries} entries hold \
         values that now normalize differently (the first: '{dn}', {attribute}), so its stored \
         normalized values and index keys no longer match. Export it with this build (`lmdir \
         export`, which opens the store read-only, as `lmdir search` and `lmdir check` do: \
         searches for those values may miss them until the reload) and load the LDIF into an \
         empty directory with `lmdir load`",
        layout::FORMAT_VERSION_RFC4518_PREPARATION,
        layout::FORMAT_VERSION
    )
}
