//! Index maintenance of a write transaction: key diffs and posting updates (back-mdb's index.c).

use std::collections::{BTreeMap, BTreeSet};

use lmdir_schema::{AttrId, LdapError};
use roaring::RoaringBitmap;

use crate::error::lmdb_to_ldap;
use crate::index_plan::IndexPlan;
use crate::layout::{self, EntryId};
use crate::read::corrupt;
use crate::store::Inner;
use crate::write::{WorkingAttribute, WriteTxn};

impl Inner {
    /// Every index key (without chunk) of an entry's values, per indexed attribute.
    pub(crate) fn index_keys(&self, attributes: &[WorkingAttribute]) -> IndexKeys {
        keys_of(&self.index_set().plan, attributes)
    }

    /// The index keys, per indexed attribute type, of the types whose normalized values differ
    /// between `old` and `new` (all of a type's descriptions when any of them changed). A
    /// type's keys come from its own values only (`IndexPlan::value_keys`), so a type whose
    /// values are unchanged keeps its postings as they are, and its keys need not be computed:
    /// a memberOf change on a person with 19 indexed attributes computed them all, twice.
    fn changed_index_keys(
        &self,
        old: &[WorkingAttribute],
        new: &[WorkingAttribute],
    ) -> (IndexKeys, IndexKeys) {
        let index_set = self.index_set();
        let plan = &index_set.plan;
        fn values_of(
            attributes: &[WorkingAttribute],
            attr: AttrId,
        ) -> impl Iterator<Item = &Vec<u8>> {
            attributes
                .iter()
                .filter(move |attribute| attribute.attr == attr)
                .flat_map(|attribute| attribute.values.iter().map(|(_, normalized)| normalized))
        }
        let mut changed: Vec<AttrId> = Vec::new();
        for attribute in old.iter().chain(new) {
            let attr = attribute.attr;
            if plan.get(attr).is_none() || changed.contains(&attr) {
                continue;
            }
            if !values_of(old, attr).eq(values_of(new, attr)) {
                changed.push(attr);
            }
        }
        let of_changed = |attributes: &'_ [WorkingAttribute]| {
            keys_of(
                plan,
                attributes
                    .iter()
                    .filter(|attribute| changed.contains(&attribute.attr)),
            )
        };
        (of_changed(old), of_changed(new))
    }
}

/// The index keys of `attributes`' values, per indexed attribute type.
fn keys_of<'a>(
    plan: &IndexPlan,
    attributes: impl IntoIterator<Item = &'a WorkingAttribute>,
) -> IndexKeys {
    let mut keys = IndexKeys::new();
    let _ = plan.attribute_keys(attributes, &mut |slot, key| -> Result<(), ()> {
        let attr = plan.attrs()[slot as usize];
        keys.entry(attr).or_default().insert(key.to_vec());
        Ok(())
    });
    keys
}

/// Index keys (without chunk) per indexed attribute type.
pub(crate) type IndexKeys = BTreeMap<AttrId, BTreeSet<Vec<u8>>>;

impl WriteTxn<'_> {
    /// Brings the postings of entry `id` from its attributes `old` to `new`: only the keys of
    /// the attribute types whose values changed are computed and diffed.
    pub(crate) fn reindex_changed(
        &mut self,
        id: EntryId,
        old: &[WorkingAttribute],
        new: &[WorkingAttribute],
    ) -> Result<(), LdapError> {
        let (old_keys, new_keys) = self.inner.changed_index_keys(old, new);
        self.update_indexes(id, &old_keys, &new_keys)
    }

    pub(crate) fn posting_change(
        &mut self,
        attr: AttrId,
        key: &[u8],
        id: EntryId,
        add: bool,
    ) -> Result<(), LdapError> {
        let database = *self
            .index_databases
            .databases
            .get(&attr)
            .expect("an index DB exists for every configured attribute");
        let mut full_key = Vec::with_capacity(key.len() + 2);
        layout::index_key_with_chunk(key, layout::chunk_of(id), &mut full_key);
        let existing = database.get(&self.txn, &full_key).map_err(lmdb_to_ldap)?;
        let mut bytes = Vec::new();
        match layout::change_posting_chunk(existing, layout::low_half(id), add, &mut bytes)
            .map_err(|error| corrupt(format!("index key {full_key:?}: {error}")))?
        {
            layout::ChunkChange::Unchanged => {}
            layout::ChunkChange::Empty => {
                database
                    .delete(&mut self.txn, &full_key)
                    .map_err(lmdb_to_ldap)?;
            }
            layout::ChunkChange::Written => {
                database
                    .put(&mut self.txn, &full_key, &bytes)
                    .map_err(lmdb_to_ldap)?;
            }
        }
        Ok(())
    }

    /// Applies the difference between an entry's old and new index keys.
    pub(crate) fn update_indexes(
        &mut self,
        id: EntryId,
        old: &IndexKeys,
        new: &IndexKeys,
    ) -> Result<(), LdapError> {
        let empty = BTreeSet::new();
        for (attr, old_keys) in old {
            let new_keys = new.get(attr).unwrap_or(&empty);
            for key in old_keys.difference(new_keys) {
                self.check_deadline()?;
                self.posting_change(*attr, key, id, false)?;
            }
        }
        for (attr, new_keys) in new {
            let old_keys = old.get(attr).unwrap_or(&empty);
            for key in new_keys.difference(old_keys) {
                self.check_deadline()?;
                self.posting_change(*attr, key, id, true)?;
            }
        }
        Ok(())
    }

    /// Removes `id` from every posting of every index DB, found by scanning them: the keys
    /// an undecodable entry produced cannot be recomputed. A repair's cost, paid once.
    pub(crate) fn remove_from_every_index(&mut self, id: EntryId) -> Result<(), LdapError> {
        let chunk = layout::chunk_of(id);
        let index_set = self.inner.index_set();
        let attrs: Vec<AttrId> = index_set.databases.keys().copied().collect();
        for attr in attrs {
            let database = index_set.databases[&attr];
            let mut keys = Vec::new();
            for row in database.iter(&self.txn).map_err(lmdb_to_ldap)? {
                let (full_key, value) = row.map_err(lmdb_to_ldap)?;
                let Some((key, key_chunk)) = layout::split_index_key(full_key) else {
                    continue;
                };
                let mut ids = RoaringBitmap::new();
                if key_chunk == chunk
                    && layout::decode_posting_chunk_into(value, chunk, &mut ids).is_ok()
                    && ids.contains(id)
                {
                    keys.push(key.to_vec());
                }
            }
            for key in keys {
                self.posting_change(attr, &key, id, false)?;
            }
        }
        Ok(())
    }
}
