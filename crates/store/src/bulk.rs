//! The narrow append-only writer the bulk loader and reindex drive: whole DBs written in key
//! order with LMDB's APPEND (entries, nodes, `dn2id`, index chunks), then the descriptions and
//! `next_id`. The rows themselves come from the same code single-entry writes use
//! (`rows.rs`, `layout.rs`); this writer only places them. It holds the store's writer lock for
//! its life, like a `WriteTxn`.

use std::fs::File;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::MutexGuard;
use std::thread::JoinHandle;

use heed::RwTxn;
use lmdir_schema::{AttrId, LdapError, ResultCode};

use crate::env::Appender;
use crate::error::{lmdb_to_ldap, RawDatabase, StoreError};
use crate::layout::{self, EntryId, Node};
use crate::rows::RowScratch;
use crate::store::{Inner, Store};
use crate::write::WorkingAttribute;

/// A bulk load commits after this many bytes written, so LMDB's dirty page list stays bounded:
/// small enough that the pages one txn frees serve the next (128 MiB windows made the writer
/// fault in fresh memory for every page; 16 MiB: peak RSS 630-660 -> 510 MB at 200k entries).
pub const BULK_COMMIT_EVERY_BYTES: usize = 16 << 20;

/// `meta` key present while a bulk load into a live store is under way (`mark_live_load`).
pub const META_LIVE_LOAD: &[u8] = b"live_load_under_way";

/// What a bulk writer fills.
enum Mode {
    /// An empty store, written from scratch; committed every `BULK_COMMIT_EVERY_BYTES` (the
    /// loader builds it in a staging directory nobody reads).
    Load,
    /// Rebuilt index DBs of a live store, in one txn, so readers never see them half built.
    Reindex,
}

/// The bulk writer (see the module comment). Dropping it without `finish` aborts the current
/// txn (earlier periodic commits of a load stay: the loader deletes its staging directory).
pub struct BulkWriter<'s> {
    // Field order: the LMDB txn ends before the writer lock is released.
    txn: Option<RwTxn<'s>>,
    pub(crate) inner: &'s Inner,
    mode: Mode,
    /// A live load (`bulk_load_live`): `finish` removes the live-load mark.
    live: bool,
    bytes_since_commit: usize,
    /// The last index key appended, per slot, so keys out of order fall back to a plain put.
    last_index: (u16, Vec<u8>),
    /// A load's background writeback of committed pages (None for a reindex).
    write_back: Option<WriteBack>,
    _writer: MutexGuard<'s, ()>,
}

/// Writes a load's committed pages to disk while the load goes on, so the final fsync waits
/// only for the last ones instead of the whole DB (a load runs with NO_SYNC; the kernel would
/// otherwise start writing only when the final fsync asks). One thread calls fdatasync on the
/// data file after each periodic commit; a commit made while one runs is covered by the next.
struct WriteBack {
    requests: Option<SyncSender<()>>,
    /// Ends with the first fdatasync error, which `finish` reports.
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl WriteBack {
    fn start(data_file: &std::path::Path) -> Result<WriteBack, StoreError> {
        let file = File::open(data_file)?;
        let (requests, received) = sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("lmdir-writeback".into())
            .spawn(move || {
                while received.recv().is_ok() {
                    file.sync_data()?;
                }
                Ok(())
            })?;
        Ok(WriteBack {
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Asks for a writeback of what is committed now (merged with one already asked for).
    fn request(&self) {
        if let Some(requests) = &self.requests {
            // Full: a writeback is already asked for and covers this commit. Disconnected: the
            // thread stopped on an error, which `finish` reports.
            let _ = requests.try_send(());
        }
    }

    /// Waits for the thread; its first error, if any.
    fn stop(&mut self) -> std::io::Result<()> {
        self.requests = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(std::io::Error::other("the writeback thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for WriteBack {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::Ldap(LdapError::new(ResultCode::UnwillingToPerform, message))
}

impl Store {
    /// A bulk writer into this store, which must hold no entry (a fresh load).
    pub fn bulk_load(&self) -> Result<BulkWriter<'_>, StoreError> {
        let writer = self.bulk_writer(Mode::Load)?;
        let txn = writer.txn.as_ref().expect("a txn is open");
        if self.inner.databases.id2entry.len(txn)? > 0 {
            return Err(invalid("a bulk load needs an empty store"));
        }
        Ok(writer)
    }

    /// As `bulk_load`, into a store others read (a fresh replica's first refresh): the live-load
    /// mark goes into the load's first txn, so it is committed with the first periodic commit
    /// and never without it, and `finish` removes it in the last one. A load cut off after a
    /// periodic commit leaves the mark (`live_load_interrupted`: `discard_failed_load` undoes
    /// it); one cut off before left nothing; one refused (the store holds entries) writes none.
    pub fn bulk_load_live(&self) -> Result<BulkWriter<'_>, StoreError> {
        let mut writer = self.bulk_load()?;
        let meta = self.inner.databases.meta;
        meta.put(writer.txn(), META_LIVE_LOAD, &[])?;
        writer.live = true;
        Ok(writer)
    }

    /// Marks (or unmarks) a bulk load into this live store as under way, in its own committed
    /// txn: set before the load starts, cleared after it finished. A process killed in between
    /// leaves the mark, and whoever opens the store next undoes the half load
    /// (`live_load_interrupted`, `discard_failed_load`) instead of serving it.
    pub fn mark_live_load(&self, under_way: bool) -> Result<(), StoreError> {
        let _writer = crate::lock::lock(&self.inner.writer);
        let mut txn = self.inner.env.write_txn()?;
        let meta = self.inner.databases.meta;
        if under_way {
            meta.put(&mut txn, META_LIVE_LOAD, &[])?;
        } else {
            meta.delete(&mut txn, META_LIVE_LOAD)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Whether a bulk load into this live store was marked under way and never finished.
    pub fn live_load_interrupted(&self) -> Result<bool, StoreError> {
        let read = self.inner.env.read_txn()?;
        Ok(self
            .inner
            .databases
            .meta
            .get(&read, META_LIVE_LOAD)?
            .is_some())
    }

    /// Undoes a `bulk_load` into a live store that failed before `finish`: its periodic
    /// commits left `id2entry` rows without their tree and index rows. Clears every entry DB
    /// and the tree-order rows in one txn, so the store is empty again (its description
    /// numbers, index configuration and `next_id` stay: `finish` writes `next_id` last).
    pub fn discard_failed_load(&self) -> Result<(), StoreError> {
        let _writer = crate::lock::lock(&self.inner.writer);
        let databases = &self.inner.databases;
        let index_set = self.inner.index_set();
        let mut txn = self.inner.env.write_txn()?;
        databases.meta.delete(&mut txn, META_LIVE_LOAD)?;
        for database in [databases.id2entry, databases.id2node, databases.dn2id]
            .into_iter()
            .chain(databases.session_log)
            .chain(databases.values)
            .chain(index_set.databases.values().copied())
        {
            database.clear(&mut txn)?;
        }
        let tree_rows: Vec<Vec<u8>> = databases
            .meta
            .prefix_iter(&txn, crate::inversions::META_INVERSION_PREFIX)?
            .map(|row| row.map(|(key, _)| key.to_vec()))
            .collect::<Result<_, _>>()?;
        for key in tree_rows
            .iter()
            .map(Vec::as_slice)
            .chain([crate::inversions::META_INVERSIONS_TRACKED])
        {
            databases.meta.delete(&mut txn, key)?;
        }
        self.inner.tree_changes_in(txn.id() as u64);
        txn.commit()?;
        Ok(())
    }

    /// A bulk writer that rebuilds the index DBs of `attributes` (cleared first), in one txn.
    pub fn bulk_reindex(&self, attributes: &[AttrId]) -> Result<BulkWriter<'_>, StoreError> {
        let mut writer = self.bulk_writer(Mode::Reindex)?;
        for attr in attributes {
            let database = self
                .inner
                .index_set()
                .databases
                .get(attr)
                .copied()
                .ok_or_else(|| invalid(format!("attribute {attr:?} has no index DB to rebuild")))?;
            database.clear(writer.txn.as_mut().expect("a txn is open"))?;
        }
        Ok(writer)
    }

    fn bulk_writer(&self, mode: Mode) -> Result<BulkWriter<'_>, StoreError> {
        if self.is_read_only() {
            return Err(StoreError::ReadOnly);
        }
        let writer = crate::lock::lock(&self.inner.writer);
        self.inner.grow_map_if_needed()?;
        let txn = self.inner.env.write_txn()?;
        let write_back = match mode {
            Mode::Load => Some(WriteBack::start(&crate::files::data_file_path(
                self.inner.env.path(),
            ))?),
            Mode::Reindex => None,
        };
        Ok(BulkWriter {
            txn: Some(txn),
            inner: &self.inner,
            mode,
            live: false,
            bytes_since_commit: 0,
            last_index: (u16::MAX, Vec::new()),
            write_back,
            _writer: writer,
        })
    }

    /// The most bytes an LMDB key may have (RDN limits derive from it).
    pub fn key_size_max(&self) -> usize {
        self.inner.env.max_key_size()
    }
}

impl<'s> BulkWriter<'s> {
    pub(crate) fn txn(&mut self) -> &mut RwTxn<'s> {
        self.txn.as_mut().expect("a txn is open until finish")
    }

    /// Counts written bytes; a load commits when the window is full.
    fn wrote(&mut self, bytes: usize) -> Result<(), StoreError> {
        self.bytes_since_commit += bytes;
        if matches!(self.mode, Mode::Load) && self.bytes_since_commit >= BULK_COMMIT_EVERY_BYTES {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Commits what is written so far and goes on in a new txn (a load only: then the store's
    /// read txns see it, as the memberOf pass needs).
    pub fn checkpoint(&mut self) -> Result<(), StoreError> {
        if matches!(self.mode, Mode::Reindex) {
            return Ok(());
        }
        self.bytes_since_commit = 0;
        let mut txn = self.txn.take().expect("a txn is open until finish");
        let (mut persisted, described) = self.inner.persist_descriptions(&mut txn)?;
        self.inner.tree_changes_in(txn.id() as u64);
        txn.commit()?;
        *persisted = described;
        drop(persisted);
        if let Some(write_back) = &self.write_back {
            write_back.request();
        }
        self.txn = Some(self.inner.env.write_txn()?);
        Ok(())
    }

    /// Writes `rows` (append?, key, value) into `database` through one long-lived cursor
    /// (`env::Appender`: each APPEND a leaf append instead of a walk from the root). A load
    /// commits every `BULK_COMMIT_EVERY_BYTES` (keys and values counted): the cursor is
    /// dropped, the txn committed, and a new cursor opened in the next txn.
    fn put_rows<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        database: RawDatabase,
        rows: &mut impl Iterator<Item = (bool, K, V)>,
    ) -> Result<(), StoreError> {
        loop {
            let window_left = match self.mode {
                Mode::Load => BULK_COMMIT_EVERY_BYTES.saturating_sub(self.bytes_since_commit),
                Mode::Reindex => usize::MAX,
            };
            let mut written = 0usize;
            let mut window_full = false;
            {
                let txn = self.txn.as_mut().expect("a txn is open until finish");
                let mut appender = Appender::open(database, txn)?;
                for (append, key, value) in rows.by_ref() {
                    let (key, value) = (key.as_ref(), value.as_ref());
                    appender.put(append, key, value)?;
                    written += key.len() + value.len();
                    if written >= window_left {
                        window_full = true;
                        break;
                    }
                }
            }
            self.wrote(written)?;
            if !window_full {
                return Ok(());
            }
        }
    }

    /// Appends `id2entry` values (IDs ascending, above every ID written).
    pub fn append_entries<'e>(
        &mut self,
        entries: impl IntoIterator<Item = (EntryId, &'e [u8])>,
    ) -> Result<(), StoreError> {
        let database = self.inner.databases.id2entry;
        let mut rows = entries
            .into_iter()
            .map(|(id, encoded)| (true, layout::encode_id(id), encoded));
        self.put_rows(database, &mut rows)
    }

    /// Appends the `id2value` blocks of framed per-value rows (`layout::push_framed_row`, what
    /// `EntryRows::encode` gives; `layout::value_blocks_of_framed`), keys ascending above every
    /// key written (entries in ID order).
    pub fn append_value_rows<'r>(
        &mut self,
        framed: impl IntoIterator<Item = &'r [u8]>,
    ) -> Result<(), StoreError> {
        let database = self
            .inner
            .databases
            .values
            .ok_or_else(|| invalid("the store has no id2value DB".to_string()))?;
        let mut rows = framed
            .into_iter()
            .flat_map(layout::value_blocks_of_framed)
            .map(|(key, value)| (true, key, value));
        self.put_rows(database, &mut rows)
    }

    /// Removes an appended entry (a record the tree rejected after its entry was written),
    /// with its `id2value` rows.
    pub fn remove_entry(&mut self, id: EntryId) -> Result<(), StoreError> {
        let database = self.inner.databases.id2entry;
        database.delete(self.txn(), &layout::encode_id(id))?;
        let inner = self.inner;
        inner.replace_value_rows(self.txn(), id, &[])?;
        Ok(())
    }

    /// Appends node rows (IDs ascending, above every ID written).
    pub fn append_nodes<'n>(
        &mut self,
        nodes: impl IntoIterator<Item = (EntryId, Node<'n>)>,
    ) -> Result<(), StoreError> {
        let database = self.inner.databases.id2node;
        // A child listed before its parent has the lower ID: recorded for parents-first
        // output once the cursor is closed (`meta` is another DB of the same txn).
        let mut inverted = Vec::new();
        let mut rows = nodes.into_iter().map(|(id, node)| {
            if node.parent > id {
                inverted.push((id, node.parent));
            }
            let mut value = Vec::with_capacity(16 + node.rdn_original.len() * 2);
            layout::encode_node(&node, &mut value);
            (true, layout::encode_id(id), value)
        });
        self.put_rows(database, &mut rows)?;
        let meta = self.inner.databases.meta;
        for (id, parent) in inverted {
            crate::inversions::record_parent_change(meta, self.txn(), id, None, Some(parent))?;
        }
        Ok(())
    }

    /// Appends `dn2id` rows; each key is `layout::encode_dn2id_key`'s (keys ascending, above
    /// every key written).
    pub fn append_dn2ids<'k>(
        &mut self,
        rows: impl IntoIterator<Item = (&'k [u8], EntryId)>,
    ) -> Result<(), StoreError> {
        let database = self.inner.databases.dn2id;
        let mut rows = rows
            .into_iter()
            .map(|(key, id)| (true, key, layout::encode_id(id)));
        self.put_rows(database, &mut rows)
    }

    /// Writes posting chunks: (slot in `IndexPlan` numbering, key with its chunk number,
    /// encoded chunk). Keys arrive ascending per slot and the slots one after another, so
    /// APPEND through one cursor per run of a slot; a key not above the slot's last (impossible
    /// with the layout's prefix-free keys) is put.
    // Out of line so an instruction profile names it (bench/load-instructions.sh).
    #[inline(never)]
    pub fn append_index_chunks<'c>(
        &mut self,
        chunks: impl IntoIterator<Item = (u16, &'c [u8], &'c [u8])>,
    ) -> Result<(), StoreError> {
        let mut chunks = chunks.into_iter().peekable();
        while let Some(&(slot, _, _)) = chunks.peek() {
            let database = self.index_database(slot)?;
            let mut last = std::mem::take(&mut self.last_index.1);
            if self.last_index.0 != slot {
                self.last_index.0 = slot;
                last.clear();
            }
            let mut rows = std::iter::from_fn(|| chunks.next_if(|chunk| chunk.0 == slot)).map(
                |(_, key, value)| {
                    let in_order = key > last.as_slice();
                    last.clear();
                    last.extend_from_slice(key);
                    (in_order, key, value)
                },
            );
            let written = self.put_rows(database, &mut rows);
            drop(rows);
            self.last_index.1 = last;
            written?;
        }
        Ok(())
    }

    fn index_database(&self, slot: u16) -> Result<RawDatabase, StoreError> {
        let index_set = self.inner.index_set();
        let attr = index_set.plan.attrs().get(slot as usize).copied();
        attr.and_then(|attr| index_set.databases.get(&attr).copied())
            .ok_or_else(|| invalid(format!("no index DB in slot {slot}")))
    }

    /// Adds `memberOf: <group DN>` values to an appended entry (after the tree is written: the
    /// loader's memberOf pass), appending to its option-less memberOf attribute or adding one.
    /// Returns the normalized values that are new (their index keys are the caller's to
    /// emit, through `IndexPlan::value_keys`).
    pub fn add_memberof<S: std::hash::BuildHasher>(
        &mut self,
        member: EntryId,
        group_dns: &[String],
        scratch: &mut RowScratch<S>,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let inner = self.inner;
        let schema = &*inner.schema();
        let Some(memberof) = schema.attribute("memberOf") else {
            return Ok(Vec::new());
        };
        let mut attributes = inner.stored_attributes(self.txn(), member)?;
        let position = attributes
            .iter()
            .position(|attribute| attribute.attr == memberof && attribute.options.is_empty());
        let position = position.unwrap_or_else(|| {
            attributes.push(WorkingAttribute {
                text: schema.attribute_type(memberof).name().to_string(),
                attr: memberof,
                options: Vec::new(),
                values: Vec::new(),
            });
            attributes.len() - 1
        });
        let mut added = Vec::new();
        for group_dn in group_dns {
            let normalized = schema.normalize_value(memberof, group_dn.as_bytes())?;
            let values = &mut attributes[position].values;
            if values.iter().any(|(_, value)| *value == normalized) {
                continue;
            }
            values.push((group_dn.as_bytes().to_vec(), normalized.clone()));
            added.push(normalized);
        }
        let (mut encoded, mut value_rows) = (Vec::new(), Vec::new());
        crate::rows::encode_attributes(
            inner,
            member,
            &attributes,
            scratch,
            &mut encoded,
            &mut value_rows,
        )?;
        let database = inner.databases.id2entry;
        database.put(self.txn(), &layout::encode_id(member), &encoded)?;
        let values_written = inner.replace_value_rows(self.txn(), member, &value_rows)?;
        self.wrote(encoded.len() + values_written)?;
        Ok(added)
    }

    /// Ends the bulk write: a load records `next_id` (one above the highest ID written);
    /// descriptions numbered meanwhile get their `meta` rows; all is committed and, for a load,
    /// flushed to disk.
    pub fn finish(mut self, next_id: Option<EntryId>) -> Result<(), StoreError> {
        let inner = self.inner;
        let mut txn = self.txn.take().expect("a txn is open until finish");
        if let Some(next_id) = next_id {
            inner.databases.meta.put(
                &mut txn,
                layout::META_NEXT_ID,
                &layout::encode_id(next_id),
            )?;
        }
        if self.live {
            inner.databases.meta.delete(&mut txn, META_LIVE_LOAD)?;
        }
        let (mut persisted, described) = inner.persist_descriptions(&mut txn)?;
        inner.tree_changes_in(txn.id() as u64);
        txn.commit().map_err(lmdb_to_ldap)?;
        *persisted = described;
        if let Some(mut write_back) = self.write_back.take() {
            write_back.stop()?;
        }
        if matches!(self.mode, Mode::Load) {
            inner.env.force_sync()?;
        }
        Ok(())
    }
}
