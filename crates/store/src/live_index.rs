//! Indexes added to a running store (a configuration reload): the new kinds are built from
//! every stored entry in one write txn, and searches use them only from that commit on.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use heed::types::Bytes;
use heed::{CommitOrAbort, Database};
use lmdir_schema::AttrId;
use roaring::RoaringBitmap;

use crate::error::RawDatabase;
use crate::layout::{self, IndexKinds};
use crate::store::{
    index_config_text, index_database_name, index_state, IndexSet, Inner, LIVE_INDEX_DATABASES_MAX,
};
use crate::{IndexKind, Store, StoreError};

/// What [`Store::add_indexes`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IndexesAdded {
    /// `attr:kinds` lines built and now used by searches (the kinds added only).
    pub built: Vec<String>,
    /// `attr:kinds` lines configured before but no longer: still maintained and used until
    /// a restart (dropping an index is not done live).
    pub kept: Vec<String>,
    /// Entries read to build them.
    pub entries: u64,
}

impl Store {
    /// Adds the index kinds of `wanted` (the whole configured `[database.index]`) that writes
    /// do not maintain yet: creates the DBs of newly indexed attributes, computes the new
    /// kinds' keys of every stored entry and writes them in one write txn (writes wait for it;
    /// searches go on, on the indexes they had), records them as built in `meta`, and only
    /// after that commit lets searches use them. Kinds no longer wanted are reported, kept.
    pub fn add_indexes(
        &self,
        wanted: &BTreeMap<String, Vec<IndexKind>>,
    ) -> Result<IndexesAdded, StoreError> {
        if self.is_read_only() {
            return Err(StoreError::ReadOnly);
        }
        let _writer = crate::lock::lock(&self.inner.writer);
        let (mut report, plan) = self.index_additions_planned(wanted, &self.inner.schema())?;
        let Some((current, added)) = plan else {
            return Ok(report);
        };
        let schema = &self.inner.schema();
        let mut next = IndexSet::clone(&current);
        for attr in added.keys() {
            if !next.databases.contains_key(attr) {
                let name = index_database_name(schema, *attr);
                let database = self.inner.create_index_database(&name)?;
                next.databases.insert(*attr, database);
            }
        }
        for (attr, kinds) in &added {
            let entry = next.configured.entry(*attr).or_default();
            *entry = entry.union(*kinds);
        }
        report.entries = self.inner.build_and_switch(next, &added)?;
        Ok(report)
    }

    /// What `add_indexes(wanted)` would build and keep now, checked (attributes known, ordered
    /// kinds where the attribute has an ordering rule, room for the new DBs), building nothing.
    /// `schema` names the attributes: the store's, or the one a reload is about to install
    /// with `extend_schema` (so a new index may be on a new attribute).
    pub fn index_additions(
        &self,
        wanted: &BTreeMap<String, Vec<IndexKind>>,
        schema: &lmdir_schema::Schema,
    ) -> Result<IndexesAdded, StoreError> {
        Ok(self.index_additions_planned(wanted, schema)?.0)
    }

    /// The report, and when anything is to be built, the index set it starts from and the
    /// kinds to add per attribute.
    #[allow(clippy::type_complexity)]
    fn index_additions_planned(
        &self,
        wanted: &BTreeMap<String, Vec<IndexKind>>,
        schema: &lmdir_schema::Schema,
    ) -> Result<
        (
            IndexesAdded,
            Option<(Arc<IndexSet>, HashMap<AttrId, IndexKinds>)>,
        ),
        StoreError,
    > {
        let wanted = crate::store::resolve_indexes(wanted, schema)?;
        let current = self.inner.index_set();
        let difference = |from: &HashMap<AttrId, IndexKinds>,
                          less: &HashMap<AttrId, IndexKinds>| {
            let mut left: HashMap<AttrId, IndexKinds> = HashMap::new();
            for (attr, kinds) in from {
                let other = less.get(attr).copied().unwrap_or_default();
                let only = IndexKinds(kinds.0 & !other.0);
                if !only.is_empty() {
                    left.insert(*attr, only);
                }
            }
            left
        };
        let added = difference(&wanted, &current.configured);
        let kept = difference(&current.configured, &wanted);
        let report = IndexesAdded {
            built: index_config_text(&added, schema),
            kept: index_config_text(&kept, schema),
            entries: 0,
        };
        let new_databases = added
            .keys()
            .filter(|attr| !current.databases.contains_key(attr))
            .count();
        let room = self.inner.live_index_databases_left(&current);
        if new_databases > room {
            return Err(StoreError::Config(format!(
                "{new_databases} new index DBs wanted, room for {room} until a restart \
                 (a running store adds at most {LIVE_INDEX_DATABASES_MAX})"
            )));
        }
        Ok(match added.is_empty() {
            true => (report, None),
            false => (report, Some((current, added))),
        })
    }
}

impl Inner {
    /// Index DBs this environment can still open (it was opened with room for
    /// `LIVE_INDEX_DATABASES_MAX` beyond its configuration).
    fn live_index_databases_left(&self, current: &IndexSet) -> usize {
        let limit = self.index_databases_at_open + LIVE_INDEX_DATABASES_MAX as usize;
        limit.saturating_sub(current.databases.len())
    }

    /// Creates one empty index DB in a txn of its own (LMDB names a new DB only at a commit).
    fn create_index_database(&self, name: &str) -> Result<RawDatabase, StoreError> {
        let write_txn = self.env.write_txn()?;
        let database = self
            .env
            .create_databases_and_commit(write_txn, |opener, txn| -> heed::Result<_> {
                let database: Database<Bytes, Bytes> = opener.create_database(txn, Some(name))?;
                Ok(CommitOrAbort::<_, ()>::Commit(database))
            })?
            .commit()
            .expect("the closure always commits");
        Ok(database)
    }

    /// Writes the keys of the `added` kinds of every stored entry, records the new built
    /// configuration in `meta`, commits, then makes `next` (with those kinds usable) the
    /// current index set. Called under the writer lock. Returns the entries read.
    fn build_and_switch(
        &self,
        mut next: IndexSet,
        added: &HashMap<AttrId, IndexKinds>,
    ) -> Result<u64, StoreError> {
        let plan = crate::index_plan::IndexPlan::new(&self.schema(), added);
        let descriptions = crate::lock::read(&self.descriptions).clone();
        let mut txn = self.env.write_txn()?;
        clear_kinds(&mut txn, &next, added)?;
        let mut postings: BTreeMap<(u16, Vec<u8>), RoaringBitmap> = BTreeMap::new();
        let mut entries = 0u64;
        for row in self.databases.id2entry.iter(&txn)? {
            let (key, value) = row?;
            let id = layout::decode_id(key)
                .ok_or_else(|| StoreError::Format(format!("id2entry key {key:?}")))?;
            entries += 1;
            plan.stored_entry_keys(value, &descriptions, &|_| true, &mut |slot,
                                                                          key|
             -> Result<
                (),
                StoreError,
            > {
                postings.entry((slot, key.to_vec())).or_default().insert(id);
                Ok(())
            })?;
        }
        let mut full_key = Vec::new();
        let mut chunk_bytes = Vec::new();
        for ((slot, key), ids) in &postings {
            let attr = plan.attrs()[*slot as usize];
            let database = next.databases[&attr];
            for (chunk, low_halves) in chunks_of(ids) {
                full_key.clear();
                layout::index_key_with_chunk(key, chunk, &mut full_key);
                chunk_bytes.clear();
                layout::encode_posting_chunk(&low_halves, &mut chunk_bytes);
                database.put(&mut txn, &full_key, &chunk_bytes)?;
            }
        }
        let mut built = next.usable.clone();
        for (attr, kinds) in added {
            let entry = built.entry(*attr).or_default();
            *entry = entry.union(*kinds);
        }
        let text = index_config_text(&built, &self.schema()).join("\n");
        self.databases
            .meta
            .put(&mut txn, layout::META_INDEX_CONFIG, text.as_bytes())?;
        let (usable, change) = index_state(&next.configured, &text, &self.schema());
        let mut planned = next.configured.clone();
        planned.retain(|attr, _| next.databases.contains_key(attr));
        next.plan = Arc::new(crate::index_plan::IndexPlan::new(&self.schema(), &planned));
        next.usable = usable;
        txn.commit()?;
        *crate::lock::write(&self.indexes) = Arc::new(next);
        *crate::lock::write(&self.index_config_change) = change;
        Ok(entries)
    }
}

/// Deletes every key of the `added` kinds from their attributes' DBs: keys a kind left when
/// it was dropped earlier (writes stopped maintaining them) must not survive its rebuild.
fn clear_kinds(
    txn: &mut heed::RwTxn,
    next: &IndexSet,
    added: &HashMap<AttrId, IndexKinds>,
) -> Result<(), StoreError> {
    let kind_bytes = [
        (IndexKinds::EQUALITY, &[layout::KIND_EQUALITY][..]),
        (IndexKinds::PRESENCE, &[layout::KIND_PRESENCE][..]),
        (
            IndexKinds::SUBSTRING,
            &[layout::KIND_INITIAL, layout::KIND_ANY, layout::KIND_FINAL][..],
        ),
        (IndexKinds::ORDERED, &[layout::KIND_ORDERED][..]),
    ];
    for (attr, kinds) in added {
        let Some(database) = next.databases.get(attr) else {
            continue;
        };
        for (kind, bytes) in kind_bytes {
            if !kinds.contains(kind) {
                continue;
            }
            for byte in bytes {
                use std::ops::Bound::{Excluded, Included};
                let (from, to) = ([*byte], [*byte + 1]);
                database.delete_range(txn, &(Included(&from[..]), Excluded(&to[..])))?;
            }
        }
    }
    Ok(())
}

/// A posting set split by chunk (ID >> 16), each chunk's low halves.
fn chunks_of(ids: &RoaringBitmap) -> BTreeMap<u16, RoaringBitmap> {
    let mut chunks: BTreeMap<u16, RoaringBitmap> = BTreeMap::new();
    for id in ids {
        chunks
            .entry(layout::chunk_of(id))
            .or_default()
            .insert(u32::from(layout::low_half(id)));
    }
    chunks
}
