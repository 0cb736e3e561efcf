//! The store's part in being an RFC 4533 consumer: finding an entry by its entryUUID, listing a
//! replicated subtree for the present phase, replacing an entry as a provider sent it, and the
//! consumer's cookie, kept in `meta` so it commits in the same transaction as the changes it
//! covers (a crash can never leave the cookie ahead of or behind the data).

use crate::error::lmdb_to_ldap;
use crate::layout::{self, EntryId};
use crate::read::{children_of, corrupt, read_entry, TREE_DEPTH_MAX};
use crate::store::Inner;
use crate::write::{WriteContext, WriteTxn};
use crate::ReadTxn;
use heed::RoTxn;
use lmdir_schema::{Dn, Entry, LdapError, ModOp, Modification, ResultCode};
use roaring::RoaringBitmap;

/// `meta` key of a consumer's cookie: this prefix ‖ rid (u16 BE).
const META_SYNC_COOKIE_PREFIX: &[u8] = b"sync_cookie:";

fn cookie_key(rid: u16) -> Vec<u8> {
    let mut key = META_SYNC_COOKIE_PREFIX.to_vec();
    key.extend_from_slice(&rid.to_be_bytes());
    key
}

/// One value as (original, normalized).
type ValuePair = (Vec<u8>, Vec<u8>);

/// One entry of a replicated subtree: its ID, depth below the base and normalized entryUUID
/// (None when it has none, e.g. an entry made before replication).
pub type SubtreeMember = (EntryId, usize, Option<Vec<u8>>);

impl ReadTxn {
    /// The entry whose entryUUID is `uuid` (its text form), through the entryUUID equality
    /// index (unwillingToPerform without it).
    pub fn entry_id_by_uuid(&self, uuid: &str) -> Result<Option<EntryId>, LdapError> {
        entry_id_by_uuid(&self.inner, self.txn(), uuid)
    }

    /// The cookie consumer `rid` stored with the last changes it applied.
    pub fn sync_cookie(&self, rid: u16) -> Result<Option<Vec<u8>>, LdapError> {
        Ok(self
            .inner
            .databases
            .meta
            .get(self.txn(), &cookie_key(rid))
            .map_err(lmdb_to_ldap)?
            .map(<[u8]>::to_vec))
    }
}

impl WriteTxn<'_> {
    /// The cookie consumer `rid` stored, as this transaction sees it.
    pub fn sync_cookie(&self, rid: u16) -> Result<Option<Vec<u8>>, LdapError> {
        Ok(self
            .inner
            .databases
            .meta
            .get(&self.txn, &cookie_key(rid))
            .map_err(lmdb_to_ldap)?
            .map(<[u8]>::to_vec))
    }

    /// Stores (or with None forgets) consumer `rid`'s cookie in this transaction.
    pub fn set_sync_cookie(&mut self, rid: u16, cookie: Option<&[u8]>) -> Result<(), LdapError> {
        let meta = self.inner.databases.meta;
        match cookie {
            Some(cookie) => meta.put(&mut self.txn, &cookie_key(rid), cookie),
            None => meta.delete(&mut self.txn, &cookie_key(rid)).map(drop),
        }
        .map_err(lmdb_to_ldap)
    }

    /// The normalized entryUUID of an entry, if it has one.
    pub(crate) fn entry_uuid_of(&self, id: EntryId) -> Result<Option<Vec<u8>>, LdapError> {
        Ok(self
            .first_value_of(id, "entryUUID")?
            .map(|(_, normalized)| normalized))
    }

    /// The schema this store writes with (the same throughout this txn: an extension waits
    /// for the writer lock).
    pub fn schema(&self) -> std::sync::Arc<lmdir_schema::Schema> {
        self.inner.schema()
    }

    /// The stored entry `id`, owned (its DN and every stored attribute).
    pub fn owned_entry(&self, id: EntryId) -> Result<Entry, LdapError> {
        let dn = Dn::parse(&self.dn_of(id)?)?;
        Ok(crate::write::to_owned_entry(
            dn,
            &self.stored_attributes(id)?,
        ))
    }

    /// The entryCSN of an entry; None when it has none or it is not a CSN (an entry made
    /// before CSNs were kept): multi-provider conflict resolution compares it with a
    /// provider's.
    pub fn entry_csn_of(&self, id: EntryId) -> Result<Option<lmdir_sync::Csn>, LdapError> {
        Ok(self
            .first_value_of(id, "entryCSN")?
            .and_then(|(original, _)| lmdir_sync::Csn::parse(&original).ok()))
    }

    /// The entry whose entryUUID is `uuid` (its text form), through the entryUUID equality
    /// index, which replication requires (unwillingToPerform without it: a scan per change
    /// would make every replicated write cost the whole directory).
    pub fn entry_id_by_uuid(&self, uuid: &str) -> Result<Option<EntryId>, LdapError> {
        entry_id_by_uuid(self.inner, &self.txn, uuid)
    }

    fn first_value_of(&self, id: EntryId, name: &str) -> Result<Option<ValuePair>, LdapError> {
        first_value(self.inner, &self.txn, id, name)
    }

    /// Every entry of the subtree at `base` (itself included) with its depth and entryUUID;
    /// empty when `base` does not exist. For the present phase: what the provider did not
    /// mention is deleted, deepest first.
    pub fn subtree_members<T: crate::target_dn::TargetDn + ?Sized>(
        &self,
        base: &T,
    ) -> Result<Vec<SubtreeMember>, LdapError> {
        let lookup = self.lookup(&*self.target(base)?)?;
        let Some(top) = lookup.found else {
            return Ok(Vec::new());
        };
        let mut members = Vec::new();
        let mut stack = vec![(top, 0usize)];
        while let Some((id, depth)) = stack.pop() {
            if depth > TREE_DEPTH_MAX {
                return Err(corrupt(format!("DN tree below entry {top} is too deep")));
            }
            self.check_deadline()?;
            members.push((id, depth, self.entry_uuid_of(id)?));
            for child in children_of(self.inner, &self.txn, id)? {
                stack.push((child, depth + 1));
            }
        }
        Ok(members)
    }

    /// Makes entry `id` hold exactly the attributes of `entry` (its DN is unchanged: a rename
    /// is a separate modrdn). With a `replicated` context the provider's entryCSN,
    /// modifyTimestamp and modifiersName are kept as given.
    pub fn replace_entry(
        &mut self,
        id: EntryId,
        entry: &Entry,
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        // The stored DN as written, normalized once for the modify below.
        let dn = self.normalized_dn(&self.dn_of(id)?)?;
        // Every stored description emptied first, then every given one set: spellings that
        // differ ("CN" and "cn") still end as the given values. An out-of-line description the
        // provider sends again changes by the values that differ (point writes, its stored
        // values streamed, never all in memory).
        // memberOf kept up by this store (`memberof`) is this store's fact, not the provider's:
        // neither emptied nor replaced by the provider's values, which only name groups to
        // check (`memberof_settle`, after the write).
        let kept = self.memberof_kept();
        let mut sent_memberof = std::collections::BTreeSet::new();
        let outside = self.out_of_line_descriptions(id)?;
        let mut modifications = Vec::new();
        let mut given = Vec::new();
        for attribute in &entry.attributes {
            let described = self
                .inner
                .schema()
                .parse_description(&attribute.description);
            if let (Some(kept), Ok(description)) = (kept, &described) {
                if description.attr == kept {
                    self.collect_normalized(kept, &attribute.values, &mut sent_memberof);
                    continue;
                }
            }
            let stored = described.ok().and_then(|description| {
                outside.iter().find(|(_, attr, options, _)| {
                    *attr == description.attr && *options == description.options
                })
            });
            let difference = match stored {
                Some((number, attr, _, text)) if !attribute.values.is_empty() => {
                    self.point_difference(id, (*number, *attr, text), &attribute.values)?
                }
                _ => None,
            };
            match difference {
                Some(changes) => given.extend(changes),
                None => given.push(Modification {
                    op: ModOp::Replace,
                    description: attribute.description.clone(),
                    values: attribute.values.clone(),
                }),
            }
        }
        let sent_again = |text: &str, attr| {
            entry.attributes.iter().any(|attribute| {
                self.inner
                    .schema()
                    .parse_description(&attribute.description)
                    .is_ok_and(|description| {
                        description.attr == attr
                            && self.inner.schema().description_string(&description) == text
                    })
            })
        };
        let stored_texts = self
            .inner
            .stored_attributes_inline(&self.txn, id)?
            .into_iter()
            .map(|attribute| (attribute.attr, attribute.text))
            .chain(
                outside
                    .iter()
                    .filter(|(_, attr, _, text)| !sent_again(text, *attr))
                    .map(|(_, attr, _, text)| (*attr, text.clone())),
            );
        for (attr, text) in stored_texts {
            if Some(attr) != kept {
                modifications.push(Modification {
                    op: ModOp::Replace,
                    description: text,
                    values: Vec::new(),
                });
            }
        }
        modifications.extend(given);
        let id = self.modify(&dn, &modifications, context)?;
        self.memberof_settle(id, &sent_memberof)?;
        Ok(id)
    }

    /// Adds the normalized forms of `values` of `attr` to `into` (a value that does not
    /// normalize names nothing).
    fn collect_normalized(
        &self,
        attr: lmdir_schema::AttrId,
        values: &[Vec<u8>],
        into: &mut std::collections::BTreeSet<Vec<u8>>,
    ) {
        let schema = self.inner.schema();
        into.extend(
            values
                .iter()
                .filter_map(|value| schema.normalize_value(attr, value).ok()),
        );
    }
}

/// The first value of attribute `name` (by its schema name) of entry `id`, as
/// (original, normalized).
fn first_value(
    inner: &Inner,
    txn: &RoTxn,
    id: EntryId,
    name: &str,
) -> Result<Option<ValuePair>, LdapError> {
    let Some(attr) = inner.schema().attribute(name) else {
        return Ok(None);
    };
    let encoded = read_entry(inner, txn, id)?
        .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
    let descriptions = crate::lock::read(&inner.descriptions).clone();
    for attribute in encoded.attributes() {
        let matches = descriptions
            .get(attribute.description_number)
            .is_some_and(|info| info.attr == attr);
        if matches {
            return Ok(attribute
                .values()
                .next()
                .map(|(original, normalized)| (original.to_vec(), normalized.to_vec())));
        }
    }
    Ok(None)
}

/// The entry whose entryUUID is `uuid` (text form), by the entryUUID equality index.
fn entry_id_by_uuid(inner: &Inner, txn: &RoTxn, uuid: &str) -> Result<Option<EntryId>, LdapError> {
    let schema = &inner.schema();
    let attr = schema.attribute("entryUUID").ok_or_else(|| {
        LdapError::new(ResultCode::UnwillingToPerform, "no entryUUID in the schema")
    })?;
    let index_set = inner.index_set();
    let database = index_set
        .configured
        .get(&attr)
        .filter(|kinds| kinds.contains(layout::IndexKinds::EQUALITY))
        .and_then(|_| index_set.databases.get(&attr).copied())
        .ok_or_else(|| {
            LdapError::new(
                ResultCode::UnwillingToPerform,
                "replication needs an equality index on entryUUID ([database.index])",
            )
        })?;
    let normalized = schema.normalize_value(attr, uuid.as_bytes())?;
    let key = layout::equality_key(&normalized);
    let mut candidates = RoaringBitmap::new();
    for row in database.prefix_iter(txn, &key).map_err(lmdb_to_ldap)? {
        let (full_key, value) = row.map_err(lmdb_to_ldap)?;
        let Some((_, chunk)) = layout::split_index_key(full_key) else {
            continue;
        };
        if full_key.len() == key.len() + 2 {
            layout::decode_posting_chunk_into(value, chunk, &mut candidates)
                .map_err(|error| corrupt(error.to_string()))?;
        }
    }
    // Keys are hashes: a candidate is the entry only if its value really matches.
    for id in candidates {
        if first_value(inner, txn, id, "entryUUID")?
            .map(|(_, normalized)| normalized)
            .as_deref()
            == Some(normalized.as_slice())
        {
            return Ok(Some(id));
        }
    }
    Ok(None)
}
