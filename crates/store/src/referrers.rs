//! The entries holding a value, found inside the write transaction (so a batch's earlier
//! writes count): the server's referential integrity (entries naming a deleted or renamed DN)
//! and attribute uniqueness (entries already holding a value) decide with it.

use heed::types::Bytes;
use lmdir_schema::{AttrId, LdapError};

use crate::error::lmdb_to_ldap;
use crate::layout::{self, EntryId, IndexKinds};
use crate::read::corrupt;
use crate::write::WriteTxn;

impl WriteTxn<'_> {
    /// The entries (ascending IDs) whose `attr` values (any options, not subtypes) include
    /// one normalized to `normalized` by the attribute's equality rule. With an equality index
    /// on `attr` its posting list gives the candidates; without, every entry is one. Each
    /// candidate is confirmed on its stored values (index keys are hashes). Checks the write's
    /// deadline every candidate.
    pub fn entries_with_value(
        &self,
        attr: AttrId,
        normalized: &[u8],
    ) -> Result<Vec<EntryId>, LdapError> {
        let candidates = match self.equality_postings(attr, normalized)? {
            Some(candidates) => candidates,
            None => self.every_entry_id()?,
        };
        let mut found = Vec::new();
        for id in candidates {
            self.check_deadline()?;
            let holds = self.stored_attributes(id)?.iter().any(|attribute| {
                attribute.attr == attr
                    && attribute
                        .values
                        .iter()
                        .any(|(_, value)| value.as_slice() == normalized)
            });
            if holds {
                found.push(id);
            }
        }
        Ok(found)
    }

    /// The IDs of the entry `id` and every entry below it, as this transaction sees them.
    pub fn subtree_ids(&self, id: EntryId) -> Result<Vec<EntryId>, LdapError> {
        Ok(crate::read::subtree_ids(self.inner, &self.txn, id)?
            .iter()
            .collect())
    }

    /// Whether `attr` has a usable equality index (built for it, not only configured).
    pub fn has_equality_index(&self, attr: AttrId) -> bool {
        self.inner.has_equality_index(attr)
    }

    /// The IDs posted under `normalized`'s equality key of `attr` (None: no usable index).
    pub(crate) fn equality_postings(
        &self,
        attr: AttrId,
        normalized: &[u8],
    ) -> Result<Option<Vec<EntryId>>, LdapError> {
        if !self.has_equality_index(attr) {
            return Ok(None);
        }
        let Some(database) = self.inner.index_set().databases.get(&attr).copied() else {
            return Ok(None);
        };
        let key = layout::equality_key(normalized);
        let mut ids = roaring::RoaringBitmap::new();
        for row in database
            .prefix_iter(&self.txn, &key)
            .map_err(lmdb_to_ldap)?
        {
            let (full_key, value) = row.map_err(lmdb_to_ldap)?;
            if full_key.len() != key.len() + 2 {
                continue;
            }
            let (_, chunk) =
                layout::split_index_key(full_key).ok_or_else(|| corrupt("short index key"))?;
            layout::decode_posting_chunk_into(value, chunk, &mut ids)
                .map_err(|error| corrupt(error.to_string()))?;
        }
        Ok(Some(ids.iter().collect()))
    }

    /// Every entry's ID, in ID order.
    fn every_entry_id(&self) -> Result<Vec<EntryId>, LdapError> {
        let mut ids = Vec::new();
        let rows = self
            .inner
            .databases
            .id2entry
            .remap_data_type::<Bytes>()
            .iter(&self.txn)
            .map_err(lmdb_to_ldap)?;
        for row in rows {
            let (key, _) = row.map_err(lmdb_to_ldap)?;
            if let Some(id) = layout::decode_id(key) {
                ids.push(id);
            }
        }
        Ok(ids)
    }
}

/// Entries sharing one value of an attribute (`ReadTxn::duplicate_values`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateValue {
    /// The value as the first of them holds it.
    pub value: Vec<u8>,
    /// Two or more entry IDs, ascending.
    pub ids: Vec<EntryId>,
}

impl crate::read::ReadTxn {
    /// Every value of `attr` (any options) held by more than one entry at or below `base`
    /// (uniqueness of a bulk load). With an equality index, only keys posting two or more
    /// IDs are read (then confirmed on the entries' values, keys being hashes); without, every
    /// entry is read.
    pub fn duplicate_values(
        &self,
        attr: AttrId,
        base: EntryId,
    ) -> Result<Vec<DuplicateValue>, LdapError> {
        let within = crate::read::subtree_ids(&self.inner, self.txn(), base)?;
        let groups = match self.shared_equality_keys(attr)? {
            Some(groups) => groups,
            None => vec![within.iter().collect()],
        };
        let mut duplicates = Vec::new();
        for ids in groups {
            let mut by_value: std::collections::BTreeMap<Vec<u8>, DuplicateValue> =
                std::collections::BTreeMap::new();
            for id in ids.into_iter().filter(|id| within.contains(*id)) {
                let Some(entry) = self.entry(id)? else {
                    continue;
                };
                let mut seen = std::collections::BTreeSet::new();
                for (original, normalized) in entry.values_of(attr) {
                    if !seen.insert(normalized.to_vec()) {
                        continue;
                    }
                    let duplicate =
                        by_value
                            .entry(normalized.into_owned())
                            .or_insert_with(|| DuplicateValue {
                                value: original.to_vec(),
                                ids: Vec::new(),
                            });
                    duplicate.ids.push(id);
                }
            }
            duplicates.extend(by_value.into_values().filter(|value| value.ids.len() > 1));
        }
        Ok(duplicates)
    }

    /// The ID lists of `attr`'s equality keys posting two or more IDs (None: no usable index).
    fn shared_equality_keys(&self, attr: AttrId) -> Result<Option<Vec<Vec<EntryId>>>, LdapError> {
        let index_set = self.inner.index_set();
        let usable = index_set
            .usable
            .get(&attr)
            .is_some_and(|kinds| kinds.contains(IndexKinds::EQUALITY));
        let Some(database) = index_set.databases.get(&attr).copied() else {
            return Ok(None);
        };
        if !usable {
            return Ok(None);
        }
        let mut groups = Vec::new();
        let mut current: Option<(Vec<u8>, roaring::RoaringBitmap)> = None;
        let prefix = [layout::KIND_EQUALITY];
        for row in database
            .prefix_iter(self.txn(), &prefix)
            .map_err(lmdb_to_ldap)?
        {
            let (full_key, value) = row.map_err(lmdb_to_ldap)?;
            let (body, chunk) =
                layout::split_index_key(full_key).ok_or_else(|| corrupt("short index key"))?;
            if current
                .as_ref()
                .is_none_or(|(key, _)| key.as_slice() != body)
            {
                if let Some((_, ids)) = current.take().filter(|(_, ids)| ids.len() > 1) {
                    groups.push(ids.iter().collect());
                }
                current = Some((body.to_vec(), roaring::RoaringBitmap::new()));
            }
            if let Some((_, ids)) = current.as_mut() {
                layout::decode_posting_chunk_into(value, chunk, ids)
                    .map_err(|error| corrupt(error.to_string()))?;
            }
        }
        if let Some((_, ids)) = current.filter(|(_, ids)| ids.len() > 1) {
            groups.push(ids.iter().collect());
        }
        Ok(Some(groups))
    }
}

impl crate::store::Inner {
    /// Whether `attr` has a usable equality index (built for it, not only configured).
    pub(crate) fn has_equality_index(&self, attr: AttrId) -> bool {
        (self.index_set().usable.get(&attr))
            .is_some_and(|kinds| kinds.contains(IndexKinds::EQUALITY))
    }
}
