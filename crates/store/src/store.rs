//! `Store`: the opened LMDB environment, its DB handles, the description table and the index
//! configuration.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, WithoutTls};
use lmdir_schema::{AttrId, Schema};

use crate::layout::{self, IndexKinds};
use crate::lock::DirectoryLock;

pub use crate::error::{RawDatabase, StoreError};

/// Default virtual map size: 1 TiB of address space. Without WRITE_MAP the data file grows
/// only as pages are written, so this costs nothing and users never size the map.
pub const MAP_SIZE_DEFAULT_BYTES: usize = 1 << 40;
/// Upper bound of named DBs (4 core DBs + one per indexed attribute).
pub const DATABASE_COUNT_MAX: u32 = 1024;
/// Named DBs besides the indexes an environment is opened for: the 4 core DBs and room for
/// more. LMDB allocates and zeroes a slot per possible DB (~50 bytes) in every read txn, so
/// the environment is opened for what this configuration opens, not for
/// `DATABASE_COUNT_MAX`: at 1024 slots that zeroing (a 50 KiB calloc) was a third of the
/// instructions of an equality search.
const NON_INDEX_DATABASES_MAX: u32 = 8;
/// Index DBs a running store can add beyond its configuration (`Store::add_indexes`, a
/// reload adding an index on a new attribute); more need a restart.
pub const LIVE_INDEX_DATABASES_MAX: u32 = 8;

pub use lmdir_config::IndexKind;

#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The naming context, e.g. `dc=example,dc=com`; the only top-level entry. Empty: any
    /// single-RDN entry may be top level.
    pub suffix: String,
    /// Attribute name → index kinds.
    pub indexes: BTreeMap<String, Vec<IndexKind>>,
    /// fsync on every commit; false sets NO_SYNC.
    pub sync: bool,
    /// Maintain memberOf on members of groupOfNames / groupOfUniqueNames.
    pub memberof: bool,
    pub map_size_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            suffix: String::new(),
            indexes: BTreeMap::new(),
            sync: true,
            memberof: false,
            map_size_bytes: MAP_SIZE_DEFAULT_BYTES,
        }
    }
}

/// One attribute description known to this DB (`meta` description table row).
#[derive(Clone, Debug)]
pub struct DescriptionInfo {
    /// Canonical text: primary name plus sorted lowercased options (`cn;lang-en`).
    pub text: String,
    pub attr: AttrId,
    pub options: Vec<String>,
}

/// Description number ↔ description. Numbers are dense and never reused.
#[derive(Clone, Debug, Default)]
pub struct DescriptionTable {
    pub(crate) entries: Vec<DescriptionInfo>,
    pub(crate) by_text: HashMap<String, u32>,
}

impl DescriptionTable {
    pub fn get(&self, number: u32) -> Option<&DescriptionInfo> {
        self.entries.get(number as usize)
    }
    pub fn number_of(&self, text: &str) -> Option<u32> {
        self.by_text.get(text).copied()
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What changed between the index configuration the stored indexes were built for and the
/// configured one. New kinds are maintained on writes but not used by searches until a
/// `reindex` rebuilds them and calls `WriteTxn::mark_indexes_built`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexConfigChange {
    /// `attr:kinds` lines configured but not built.
    pub added: Vec<String>,
    /// `attr:kinds` lines built but no longer configured.
    pub removed: Vec<String>,
}

/// `not built: cn:sub; no longer configured: ou:eq`, naming only the non-empty sides.
impl std::fmt::Display for IndexConfigChange {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sides = [
            ("not built", &self.added),
            ("no longer configured", &self.removed),
        ];
        let parts: Vec<String> = sides
            .iter()
            .filter(|(_, lines)| !lines.is_empty())
            .map(|(name, lines)| format!("{name}: {}", lines.join(" ")))
            .collect();
        if parts.is_empty() {
            return formatter.write_str("the index settings changed");
        }
        formatter.write_str(&parts.join("; "))
    }
}

pub(crate) struct Databases {
    pub meta: RawDatabase,
    pub id2entry: RawDatabase,
    pub id2node: RawDatabase,
    pub dn2id: RawDatabase,
    /// The session log; None only in a read-only open of a store made before it existed.
    pub session_log: Option<RawDatabase>,
    /// Out-of-line attribute values (`layout::encode_value_row`); None only in a read-only
    /// open of a store made before it existed (which then has no out-of-line attribute).
    pub values: Option<RawDatabase>,
    /// The audit trail; None only in a read-only open of a store made before it existed.
    pub accesslog: Option<RawDatabase>,
}

/// The indexes as they are now: what writes maintain, their DBs, and what searches may use.
/// Replaced whole, under the writer lock, when a commit marks indexes built or indexes are
/// added to a running store (`Store::add_indexes`); a read txn takes it before its snapshot.
#[derive(Clone)]
pub(crate) struct IndexSet {
    /// Index kinds maintained by writes.
    pub configured: HashMap<AttrId, IndexKinds>,
    /// One DB per configured attribute (a read-only open may lack some).
    pub databases: HashMap<AttrId, RawDatabase>,
    /// The configured indexes that have a DB, numbered: what writes emit keys for.
    pub plan: Arc<crate::index_plan::IndexPlan>,
    /// Index kinds usable by searches (configured and built).
    pub usable: HashMap<AttrId, IndexKinds>,
}

pub(crate) struct Inner {
    pub env: Env<WithoutTls>,
    pub databases: Databases,
    /// The schema now: a reload may extend it (`Store::extend_schema`, under the writer lock,
    /// only additions, so an `AttrId` keeps its meaning); read through `Inner::schema`.
    pub schema_live: RwLock<Arc<Schema>>,
    pub options: StoreOptions,
    /// The suffix's normalized RDNs, leaf first (as in the DN string).
    pub suffix_rdns_normalized: Vec<String>,
    /// The suffix DN as configured.
    pub suffix_original: String,
    /// The current index set (see [`IndexSet`]).
    pub indexes: RwLock<Arc<IndexSet>>,
    /// Index DBs open when the store was (the environment has room for
    /// `LIVE_INDEX_DATABASES_MAX` more).
    pub index_databases_at_open: usize,
    /// Attribute types whose values always live out of line (`layout::OUT_OF_LINE_ALWAYS`
    /// that the schema knows).
    pub out_of_line_always: Vec<AttrId>,
    pub index_config_change: RwLock<Option<IndexConfigChange>>,
    pub descriptions: RwLock<Arc<DescriptionTable>>,
    /// Descriptions whose `meta` rows are committed: numbers below this.
    pub descriptions_persisted: Mutex<usize>,
    /// LMDB allows one writer; this keeps a second `write()` in this process from blocking
    /// inside LMDB while holding other locks.
    pub writer: Mutex<()>,
    /// This server's ID and CSN generator (`context_csn`).
    pub csns: Mutex<crate::csn_state::CsnState>,
    /// Counts live read txns so the map can be grown when none is open.
    pub(crate) reader_gate: crate::reader_gate::ReaderGate,
    /// `Change::before` images built since the store opened (`Store::prior_entries_built`).
    pub(crate) prior_entries_built: std::sync::atomic::AtomicU64,
    /// This store's key in the per-thread DN caches (`dn_cache`); 0 for a read-only store,
    /// which another process writes unseen: no cache.
    pub(crate) cache_id: u64,
    /// The LMDB txn ID of the latest write txn that removed or renamed a DN, raised before
    /// it commits (`dn_cache`'s validity rule).
    pub(crate) tree_changed_at: std::sync::atomic::AtomicU64,
    /// `ReadTxn::has_inverted_links` of the latest snapshot that asked.
    pub inverted_links_known: crate::inversions::SnapshotAnswer,
    /// `ReadTxn::may_hold_glue` of the latest snapshot that asked.
    pub glue_known: crate::inversions::SnapshotAnswer,
    /// `ReadTxn::may_hold_aliases` of the latest snapshot that asked.
    pub aliases_known: crate::inversions::SnapshotAnswer,
    /// `ReadTxn::may_hold_subentries` of the latest snapshot that asked.
    pub subentries_known: crate::inversions::SnapshotAnswer,
    /// The directory's writer lock; None for a read-only store. Last: released after the
    /// environment is closed.
    pub directory_lock: Option<DirectoryLock>,
}

/// How long a map growth waits for open read txns to end before giving up this time (the
/// write proceeds in the current map; growth is retried by the next write).
pub const MAP_GROWTH_WAIT: Duration = Duration::from_secs(10);

/// The next `Inner::cache_id`.
static NEXT_CACHE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Held by every `ReadTxn`; releases its reader slot in the gate on drop.
pub(crate) struct ReaderTicket {
    pub inner: Arc<Inner>,
}

impl Drop for ReaderTicket {
    fn drop(&mut self) {
        self.inner.reader_gate.leave();
    }
}

impl Inner {
    /// The schema now. A write txn sees one schema throughout (an extension waits for the
    /// writer lock); a read sees the one of its start or a later extension of it.
    pub(crate) fn schema(&self) -> Arc<Schema> {
        crate::lock::read(&self.schema_live).clone()
    }

    /// The current index set.
    pub(crate) fn index_set(&self) -> Arc<IndexSet> {
        crate::lock::read(&self.indexes).clone()
    }

    /// Switches searches to `usable` (after the commit that recorded it).
    pub(crate) fn set_usable_indexes(&self, usable: HashMap<AttrId, IndexKinds>) {
        let mut current = crate::lock::write(&self.indexes);
        let mut next = IndexSet::clone(&current);
        next.usable = usable;
        *current = Arc::new(next);
    }

    /// Records that the write txn `txn_id` removes or renames a DN: called before it commits,
    /// so that every snapshot holding the change knows it (`dn_cache`).
    pub(crate) fn tree_changes_in(&self, txn_id: u64) {
        self.tree_changed_at
            .fetch_max(txn_id, std::sync::atomic::Ordering::SeqCst);
    }

    /// Registers a reader, waiting while the map is being resized.
    pub(crate) fn enter_reader(self: &Arc<Inner>) -> ReaderTicket {
        self.reader_gate.enter();
        ReaderTicket {
            inner: self.clone(),
        }
    }

    /// Whether more than half of the map is used: the next write txn first grows the map,
    /// waiting for every read txn to end.
    pub(crate) fn map_growth_due(&self) -> bool {
        let info = self.env.info();
        let page_size_bytes = self.env.unnamed_database_stat().page_size as usize;
        let used_bytes = (info.last_page_number + 1).saturating_mul(page_size_bytes);
        used_bytes.saturating_mul(2) > info.map_size
    }

    /// Doubles the map when more than half of it is used. Called by the writer before it
    /// opens its txn (so no write txn is open). Returns whether the map grew.
    pub(crate) fn grow_map_if_needed(&self) -> Result<bool, StoreError> {
        if !self.map_growth_due() {
            return Ok(false);
        }
        let info = self.env.info();
        let new_size = info.map_size.checked_mul(2).ok_or_else(|| {
            StoreError::Config(format!(
                "map of {} bytes is full and cannot double",
                info.map_size
            ))
        })?;
        let resized = self.reader_gate.with_no_readers(MAP_GROWTH_WAIT, || {
            crate::env::resize_environment(&self.env, new_size)
        });
        let Some(result) = resized else {
            return Ok(false);
        };
        result?;
        Ok(true)
    }
}

/// The LMDB store. Cheap to clone; Send + Sync.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) fn index_config_text(
    indexes: &HashMap<AttrId, IndexKinds>,
    schema: &Schema,
) -> Vec<String> {
    let mut lines: Vec<String> = indexes
        .iter()
        .filter(|(_, kinds)| !kinds.is_empty())
        .map(|(attr, kinds)| {
            format!(
                "{}:{}",
                schema.attribute_type(*attr).name().to_ascii_lowercase(),
                kinds.names().join(",")
            )
        })
        .collect();
    lines.sort();
    lines
}

/// From the configured indexes and `meta`'s record of the built ones: the kinds searches may
/// use (configured and built), and the difference to report, if any.
pub(crate) fn index_state(
    configured: &HashMap<AttrId, IndexKinds>,
    stored: &str,
    schema: &Schema,
) -> (HashMap<AttrId, IndexKinds>, Option<IndexConfigChange>) {
    let built = parse_index_config_text(stored, schema);
    let mut usable = HashMap::new();
    for (attr, kinds) in configured {
        let both = kinds.intersection(built.get(attr).copied().unwrap_or_default());
        if !both.is_empty() {
            usable.insert(*attr, both);
        }
    }
    let configured_text = index_config_text(configured, schema);
    let stored_lines: Vec<String> = stored.lines().map(str::to_string).collect();
    let added: Vec<String> = configured_text
        .iter()
        .filter(|line| !stored_lines.contains(line))
        .cloned()
        .collect();
    let removed: Vec<String> = stored_lines
        .iter()
        .filter(|line| !line.is_empty() && !configured_text.contains(line))
        .cloned()
        .collect();
    let change =
        (!added.is_empty() || !removed.is_empty()).then_some(IndexConfigChange { added, removed });
    (usable, change)
}

fn parse_index_config_text(text: &str, schema: &Schema) -> HashMap<AttrId, IndexKinds> {
    let mut indexes = HashMap::new();
    for line in text.lines() {
        let Some((name, kinds)) = line.split_once(':') else {
            continue;
        };
        let Some(attr) = schema.attribute(name) else {
            continue;
        };
        let mut flags = IndexKinds::default();
        for kind in kinds.split(',') {
            if let Some(flag) = IndexKinds::from_name(kind) {
                flags = flags.union(flag);
            }
        }
        indexes.insert(attr, flags);
    }
    indexes
}

/// Reads `meta`'s description table (numbers must be dense from 0).
pub(crate) fn load_description_table(
    meta: RawDatabase,
    txn: &heed::RoTxn,
    schema: &Schema,
) -> Result<DescriptionTable, StoreError> {
    let mut table = DescriptionTable::default();
    for row in meta.prefix_iter(txn, layout::META_DESCRIPTION_PREFIX)? {
        let (key, value) = row?;
        let number = layout::decode_id(&key[layout::META_DESCRIPTION_PREFIX.len()..])
            .ok_or_else(|| StoreError::Format("bad description row key".into()))?;
        if number as usize != table.entries.len() {
            return Err(StoreError::Format(format!(
                "description table has a gap at {number}"
            )));
        }
        let text = std::str::from_utf8(value)
            .map_err(|_| StoreError::Format(format!("description {number} is not UTF-8")))?;
        let description = schema.parse_description(text).map_err(|error| {
            StoreError::Format(format!(
                "stored attribute description '{text}' is unknown to the schema: {}",
                error.message
            ))
        })?;
        table.by_text.insert(text.to_string(), number);
        table.entries.push(DescriptionInfo {
            text: text.to_string(),
            attr: description.attr,
            options: description.options,
        });
    }
    Ok(table)
}

impl Inner {
    /// For a read-only store: when `txn` sees more `meta` description rows than `table`
    /// holds (another process committed new ones), the table reloaded from `txn`, also kept
    /// for later reads; else `table`. One cursor step per read txn.
    pub(crate) fn refresh_descriptions(
        &self,
        txn: &heed::RoTxn,
        table: Arc<DescriptionTable>,
    ) -> Result<Arc<DescriptionTable>, StoreError> {
        let meta = self.databases.meta;
        let last = match meta
            .rev_prefix_iter(txn, layout::META_DESCRIPTION_PREFIX)?
            .next()
        {
            None => return Ok(table),
            Some(row) => row?.0,
        };
        let last_number = layout::decode_id(&last[layout::META_DESCRIPTION_PREFIX.len()..]);
        if last_number.is_some_and(|number| (number as usize) < table.len()) {
            return Ok(table);
        }
        let fresh = Arc::new(load_description_table(meta, txn, &self.schema())?);
        let mut current = crate::lock::write(&self.descriptions);
        if fresh.len() > current.len() {
            *current = fresh.clone();
        }
        Ok(fresh)
    }
}

impl Store {
    /// Re-reads the description table from `meta` (after a bulk loader wrote descriptions
    /// directly). Call with no write txn of this `Store` open.
    pub fn reload_descriptions(&self) -> Result<(), StoreError> {
        let read = self.read()?;
        let table =
            load_description_table(self.inner.databases.meta, read.txn(), &self.inner.schema())?;
        let count = table.len();
        // Same lock order as `WriteTxn::commit`: the persisted count, then the table.
        let mut persisted = crate::lock::lock(&self.inner.descriptions_persisted);
        *crate::lock::write(&self.inner.descriptions) = Arc::new(table);
        *persisted = count;
        Ok(())
    }
}

/// The configuration resolved against the schema (errors name the attribute or suffix).
struct Resolved {
    configured_indexes: HashMap<AttrId, IndexKinds>,
    suffix_rdns_normalized: Vec<String>,
}

impl Resolved {
    /// The named DBs the environment is opened for (within `DATABASE_COUNT_MAX`, checked
    /// by `resolve_options`).
    fn database_count(&self) -> u32 {
        u32::try_from(self.configured_indexes.len()).unwrap_or(DATABASE_COUNT_MAX)
            + NON_INDEX_DATABASES_MAX
            + LIVE_INDEX_DATABASES_MAX
    }
}

fn resolve_options(options: &StoreOptions, schema: &Schema) -> Result<Resolved, StoreError> {
    let configured_indexes = resolve_indexes(&options.indexes, schema)?;
    let suffix_dn = lmdir_schema::Dn::parse(&options.suffix).map_err(|error| {
        StoreError::Config(format!("suffix '{}': {}", options.suffix, error.message))
    })?;
    let mut suffix_rdns_normalized = Vec::with_capacity(suffix_dn.rdns.len());
    for rdn in &suffix_dn.rdns {
        suffix_rdns_normalized.push(schema.normalize_rdn(rdn).map_err(|error| {
            StoreError::Config(format!("suffix '{}': {}", options.suffix, error.message))
        })?);
    }
    Ok(Resolved {
        configured_indexes,
        suffix_rdns_normalized,
    })
}

/// `[database.index]` resolved against the schema (errors name the attribute).
pub(crate) fn resolve_indexes(
    indexes: &BTreeMap<String, Vec<IndexKind>>,
    schema: &Schema,
) -> Result<HashMap<AttrId, IndexKinds>, StoreError> {
    let mut configured_indexes: HashMap<AttrId, IndexKinds> = HashMap::new();
    for (name, kinds) in indexes {
        let attr = schema.attribute(name).ok_or_else(|| {
            StoreError::Config(format!("index on unknown attribute type '{name}'"))
        })?;
        let flags = kinds.iter().fold(IndexKinds::default(), |flags, kind| {
            flags.union(IndexKinds::of(*kind))
        });
        let attribute_type = schema.attribute_type(attr);
        if flags.contains(IndexKinds::ORDERED) && attribute_type.ordering.is_none() {
            return Err(StoreError::Config(format!(
                "index '{name}': ordered index needs an ORDERING matching rule"
            )));
        }
        let entry = configured_indexes.entry(attr).or_default();
        *entry = entry.union(flags);
    }
    if configured_indexes.len() + NON_INDEX_DATABASES_MAX as usize > DATABASE_COUNT_MAX as usize {
        return Err(StoreError::Config(format!(
            "{} indexed attributes exceed the limit of {}",
            configured_indexes.len(),
            DATABASE_COUNT_MAX - NON_INDEX_DATABASES_MAX
        )));
    }
    Ok(configured_indexes)
}

pub(crate) fn index_database_name(schema: &Schema, attr: AttrId) -> String {
    format!(
        "{}{}",
        layout::INDEX_DB_PREFIX,
        schema.attribute_type(attr).name().to_ascii_lowercase()
    )
}

/// Creates (when absent) and opens the core DBs and one DB per configured index.
fn create_databases(
    env: &Env<WithoutTls>,
    configured_indexes: &HashMap<AttrId, IndexKinds>,
    schema: &Schema,
) -> Result<(Databases, HashMap<AttrId, RawDatabase>), StoreError> {
    let write_txn = env.write_txn()?;
    let (meta, id2entry, id2node, dn2id, (session_log, values, accesslog)) = env
        .create_databases_and_commit(write_txn, |opener, txn| -> heed::Result<_> {
            let meta: Database<Bytes, Bytes> =
                opener.create_database(txn, Some(layout::DB_META))?;
            let id2entry: Database<Bytes, Bytes> =
                opener.create_database(txn, Some(layout::DB_ID2ENTRY))?;
            let id2node: Database<Bytes, Bytes> =
                opener.create_database(txn, Some(layout::DB_ID2NODE))?;
            let dn2id: Database<Bytes, Bytes> =
                opener.create_database(txn, Some(layout::DB_DN2ID))?;
            let session_log: Database<Bytes, Bytes> =
                opener.create_database(txn, Some(layout::DB_SESSION_LOG))?;
            let values: Database<Bytes, Bytes> =
                opener.create_database(txn, Some(layout::DB_ID2VALUE))?;
            let accesslog: Database<Bytes, Bytes> =
                opener.create_database(txn, Some(layout::DB_ACCESSLOG))?;
            Ok(CommitOrAbort::<_, ()>::Commit((
                meta,
                id2entry,
                id2node,
                dn2id,
                (session_log, values, accesslog),
            )))
        })?
        .commit()
        .expect("the closure always commits");
    let mut indexes = HashMap::with_capacity(configured_indexes.len());
    for attr in configured_indexes.keys() {
        let name = index_database_name(schema, *attr);
        let write_txn = env.write_txn()?;
        let database = env
            .create_databases_and_commit(write_txn, |opener, txn| -> heed::Result<_> {
                let database: Database<Bytes, Bytes> = opener.create_database(txn, Some(&name))?;
                Ok(CommitOrAbort::<_, ()>::Commit(database))
            })?
            .commit()
            .expect("the closure always commits");
        indexes.insert(*attr, database);
    }
    Ok((
        Databases {
            meta,
            id2entry,
            id2node,
            dn2id,
            session_log: Some(session_log),
            values: Some(values),
            accesslog: Some(accesslog),
        },
        indexes,
    ))
}

/// Opens the existing DBs without creating any: the core DBs must exist; a configured index
/// whose DB was never created is simply absent (searches on it are unindexed).
fn open_existing_databases(
    env: &Env<WithoutTls>,
    configured_indexes: &HashMap<AttrId, IndexKinds>,
    schema: &Schema,
) -> Result<(Databases, HashMap<AttrId, RawDatabase>), StoreError> {
    let open = |name: &str| -> Result<Option<RawDatabase>, StoreError> {
        let txn = env.read_txn()?;
        let opened = env
            .open_databases_and_commit(txn, |opener, txn| -> heed::Result<_> {
                let database: Option<Database<Bytes, Bytes>> =
                    opener.open_database(txn, Some(name))?;
                Ok(CommitOrAbort::<_, ()>::Commit(database))
            })?
            .commit()
            .expect("the closure always commits");
        Ok(opened)
    };
    let core = |name: &str| -> Result<RawDatabase, StoreError> {
        open(name)?.ok_or_else(|| StoreError::Format(format!("the store has no '{name}' DB")))
    };
    let mut indexes = HashMap::new();
    for attr in configured_indexes.keys() {
        if let Some(database) = open(&index_database_name(schema, *attr))? {
            indexes.insert(*attr, database);
        }
    }
    let databases = Databases {
        meta: core(layout::DB_META)?,
        id2entry: core(layout::DB_ID2ENTRY)?,
        id2node: core(layout::DB_ID2NODE)?,
        dn2id: core(layout::DB_DN2ID)?,
        session_log: open(layout::DB_SESSION_LOG)?,
        values: open(layout::DB_ID2VALUE)?,
        accesslog: open(layout::DB_ACCESSLOG)?,
    };
    Ok((databases, indexes))
}

fn check_format_version(stored: Option<&[u8]>) -> Result<(), StoreError> {
    match stored {
        Some(bytes)
            if bytes == layout::FORMAT_VERSION.to_be_bytes()
                || bytes == layout::FORMAT_VERSION_RFC4518_PREPARATION.to_be_bytes()
                || bytes == layout::FORMAT_VERSION_UPGRADED.to_be_bytes() =>
        {
            Ok(())
        }
        Some(bytes) => Err(StoreError::Format(match <[u8; 4]>::try_from(bytes) {
            Ok(number) => format!(
                "unsupported store format version {} (this build reads version {} and upgrades \
                 versions {} and {} in place; version 1 stores kept one id2value row per \
                 out-of-line value): export the directory with the build that wrote it and load \
                 the LDIF with this one",
                u32::from_be_bytes(number),
                layout::FORMAT_VERSION,
                layout::FORMAT_VERSION_UPGRADED,
                layout::FORMAT_VERSION_RFC4518_PREPARATION
            ),
            Err(_) => format!("malformed store format version {bytes:02x?}"),
        })),
        None => Err(StoreError::Format("the store has no format version".into())),
    }
}

/// A read-write open of a format-2 store marks it format 3 before anything is written: its
/// records stay readable, the ones written from now on are entry version 4. Format 3 is then
/// upgraded by `Store::upgrade_string_preparation` (`preparation_upgrade.rs`).
fn upgrade_format_version(
    meta: RawDatabase,
    write_txn: &mut heed::RwTxn,
) -> Result<(), StoreError> {
    let stored = meta.get(write_txn, layout::META_FORMAT_VERSION)?;
    if stored == Some(&layout::FORMAT_VERSION_UPGRADED.to_be_bytes()[..]) {
        meta.put(
            write_txn,
            layout::META_FORMAT_VERSION,
            &layout::FORMAT_VERSION_RFC4518_PREPARATION.to_be_bytes(),
        )?;
        tracing::info!(
            "store format {} upgraded to {}: existing records are read as they are",
            layout::FORMAT_VERSION_UPGRADED,
            layout::FORMAT_VERSION_RFC4518_PREPARATION
        );
    }
    Ok(())
}

/// A read-only open of a store written with RFC 4518 string preparation reads it as it is
/// (export needs no preparation); searches for values that prepare differently now may miss.
fn warn_of_rfc4518_preparation(stored: Option<&[u8]>) {
    let previous = [
        layout::FORMAT_VERSION_RFC4518_PREPARATION,
        layout::FORMAT_VERSION_UPGRADED,
    ];
    if previous
        .iter()
        .any(|version| stored == Some(&version.to_be_bytes()[..]))
    {
        tracing::warn!(
            "store written with RFC 4518 string preparation, read as it is: searches for \
             non-ASCII values may miss until a read-write open upgrades it (or says to export \
             and load it)"
        );
    }
}

/// A read-write open's record of the built index kinds (`meta`'s `index_config`). Empty:
/// the indexes are exact for the configuration as it is now. Else the writes of this
/// `Store` maintain the configured kinds only, so the record keeps just those (recorded and
/// still configured): a kind dropped now and configured again at a later open is then new
/// (unused until a reindex or `add_indexes` builds it), never taken as built with postings
/// that miss every entry written meanwhile. Its keys stay until then (`check` notes them, a
/// reindex drops them).
fn record_built_kinds_at_open(
    databases: &Databases,
    write_txn: &mut heed::RwTxn,
    configured_indexes: &HashMap<AttrId, IndexKinds>,
    schema: &Schema,
) -> Result<(), StoreError> {
    let meta = databases.meta;
    if databases.id2entry.len(write_txn)? == 0 {
        let text = index_config_text(configured_indexes, schema).join("\n");
        meta.put(write_txn, layout::META_INDEX_CONFIG, text.as_bytes())?;
        return Ok(());
    }
    let Some(stored) = meta.get(write_txn, layout::META_INDEX_CONFIG)? else {
        return Ok(());
    };
    let stored = String::from_utf8_lossy(stored).into_owned();
    let mut maintained = parse_index_config_text(&stored, schema);
    for (attr, kinds) in maintained.iter_mut() {
        let configured = configured_indexes.get(attr).copied().unwrap_or_default();
        *kinds = kinds.intersection(configured);
    }
    let text = index_config_text(&maintained, schema).join("\n");
    if text != stored {
        tracing::info!(
            "index kinds no longer configured are no longer maintained; recorded as built \
             now: {:?} (was {:?})",
            text,
            stored
        );
        meta.put(write_txn, layout::META_INDEX_CONFIG, text.as_bytes())?;
    }
    Ok(())
}

/// The index kinds searches may use, and what differs from the built configuration.
fn usable_indexes(
    configured_indexes: &HashMap<AttrId, IndexKinds>,
    configured_text: &[String],
    stored_text: Option<String>,
    entry_count: u64,
    schema: &Schema,
) -> (HashMap<AttrId, IndexKinds>, Option<IndexConfigChange>) {
    match stored_text {
        // A new or empty store: the indexes are trivially exact for any configuration.
        _ if entry_count == 0 => (configured_indexes.clone(), None),
        Some(stored) => index_state(configured_indexes, &stored, schema),
        None => (
            HashMap::new(),
            Some(IndexConfigChange {
                added: configured_text.to_vec(),
                removed: Vec::new(),
            }),
        ),
    }
}

/// What an open reads from `meta`: the description table and the index usability.
struct MetaState {
    table: DescriptionTable,
    usable_indexes: HashMap<AttrId, IndexKinds>,
    change: Option<IndexConfigChange>,
}

fn read_meta_state(
    databases: &Databases,
    index_databases: &HashMap<AttrId, RawDatabase>,
    txn: &heed::RoTxn,
    configured_indexes: &HashMap<AttrId, IndexKinds>,
    schema: &Schema,
) -> Result<MetaState, StoreError> {
    check_format_version(databases.meta.get(txn, layout::META_FORMAT_VERSION)?)?;
    let table = load_description_table(databases.meta, txn, schema)?;
    let configured_text = index_config_text(configured_indexes, schema);
    let entry_count = databases.id2entry.len(txn)?;
    let stored_text = databases
        .meta
        .get(txn, layout::META_INDEX_CONFIG)?
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned());
    let (mut usable_indexes, change) = usable_indexes(
        configured_indexes,
        &configured_text,
        stored_text,
        entry_count,
        schema,
    );
    // A read-only open may lack a configured index's DB: nothing to search through.
    usable_indexes.retain(|attr, _| index_databases.contains_key(attr));
    Ok(MetaState {
        table,
        usable_indexes,
        change,
    })
}

impl Store {
    /// Opens (creating when absent) the store in `directory` for reading and writing. Takes
    /// the directory's writer lock for the life of the `Store`: a second read-write open, in
    /// this or another process, is refused with `StoreError::Locked`.
    pub fn open(
        directory: &Path,
        options: StoreOptions,
        schema: Arc<Schema>,
    ) -> Result<Store, StoreError> {
        let resolved = resolve_options(&options, &schema)?;
        std::fs::create_dir_all(directory)?;
        let lock = DirectoryLock::acquire(directory)?;
        let env = crate::env::open_environment(
            directory,
            options.map_size_bytes,
            resolved.database_count(),
            options.sync,
            false,
        )?;
        let (databases, index_databases) =
            create_databases(&env, &resolved.configured_indexes, &schema)?;
        let mut write_txn = env.write_txn()?;
        if databases
            .meta
            .get(&write_txn, layout::META_FORMAT_VERSION)?
            .is_none()
        {
            let meta = databases.meta;
            meta.put(
                &mut write_txn,
                layout::META_FORMAT_VERSION,
                &layout::FORMAT_VERSION.to_be_bytes(),
            )?;
            meta.put(&mut write_txn, layout::META_NEXT_ID, &1u32.to_be_bytes())?;
        }
        upgrade_format_version(databases.meta, &mut write_txn)?;
        // Searches order parents first from the inverted-link record (`treeorder`).
        crate::inversions::track_inversions_once(
            databases.meta,
            databases.id2node,
            &mut write_txn,
        )?;
        let state = read_meta_state(
            &databases,
            &index_databases,
            &write_txn,
            &resolved.configured_indexes,
            &schema,
        )?;
        record_built_kinds_at_open(
            &databases,
            &mut write_txn,
            &resolved.configured_indexes,
            &schema,
        )?;
        write_txn.commit()?;
        let store = Store::assemble(
            env,
            (databases, index_databases),
            schema,
            options,
            resolved,
            state,
            Some(lock),
        );
        store.upgrade_string_preparation()?;
        Ok(store)
    }

    /// Opens an existing store for reading only (export, stat, check, offline search): takes
    /// no writer lock, so it works beside a running server or loader, creates nothing, and
    /// `write()` is refused. Descriptions another process commits later are picked up by
    /// each new `read()`.
    pub fn open_read_only(
        directory: &Path,
        options: StoreOptions,
        schema: Arc<Schema>,
    ) -> Result<Store, StoreError> {
        let resolved = resolve_options(&options, &schema)?;
        if !crate::files::data_file_path(directory).is_file() {
            return Err(StoreError::Config(format!(
                "{}: no database here",
                directory.display()
            )));
        }
        let env = crate::env::open_environment(
            directory,
            options.map_size_bytes,
            resolved.database_count(),
            options.sync,
            true,
        )?;
        let (databases, index_databases) =
            open_existing_databases(&env, &resolved.configured_indexes, &schema)?;
        let txn = env.read_txn()?;
        let state = read_meta_state(
            &databases,
            &index_databases,
            &txn,
            &resolved.configured_indexes,
            &schema,
        )?;
        warn_of_rfc4518_preparation(databases.meta.get(&txn, layout::META_FORMAT_VERSION)?);
        drop(txn);
        Ok(Store::assemble(
            env,
            (databases, index_databases),
            schema,
            options,
            resolved,
            state,
            None,
        ))
    }

    fn assemble(
        env: Env<WithoutTls>,
        (databases, index_databases): (Databases, HashMap<AttrId, RawDatabase>),
        schema: Arc<Schema>,
        options: StoreOptions,
        resolved: Resolved,
        state: MetaState,
        lock: Option<DirectoryLock>,
    ) -> Store {
        let persisted = state.table.entries.len();
        let mut planned = resolved.configured_indexes.clone();
        planned.retain(|attr, _| index_databases.contains_key(attr));
        let index_databases_at_open = index_databases.len();
        let index_set = IndexSet {
            plan: Arc::new(crate::index_plan::IndexPlan::new(&schema, &planned)),
            configured: resolved.configured_indexes,
            databases: index_databases,
            usable: state.usable_indexes,
        };
        let out_of_line_always = layout::OUT_OF_LINE_ALWAYS
            .iter()
            .filter_map(|name| schema.attribute(name))
            .collect();
        Store {
            inner: Arc::new(Inner {
                env,
                databases,
                schema_live: RwLock::new(schema),
                suffix_original: options.suffix.clone(),
                options,
                suffix_rdns_normalized: resolved.suffix_rdns_normalized,
                indexes: RwLock::new(Arc::new(index_set)),
                index_databases_at_open,
                out_of_line_always,
                index_config_change: RwLock::new(state.change),
                descriptions: RwLock::new(Arc::new(state.table)),
                descriptions_persisted: Mutex::new(persisted),
                writer: Mutex::new(()),
                csns: Mutex::new(Default::default()),
                reader_gate: Default::default(),
                prior_entries_built: Default::default(),
                // Unique in the process, never 0, for a store that writes its own tree.
                cache_id: if lock.is_some() {
                    NEXT_CACHE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                } else {
                    0
                },
                tree_changed_at: Default::default(),
                inverted_links_known: Default::default(),
                glue_known: Default::default(),
                aliases_known: Default::default(),
                subentries_known: Default::default(),
                directory_lock: lock,
            }),
        }
    }

    /// Whether this store was opened with `open_read_only`.
    pub fn is_read_only(&self) -> bool {
        self.inner.directory_lock.is_none()
    }

    /// The schema now (see `extend_schema`).
    pub fn schema(&self) -> Arc<Schema> {
        self.inner.schema()
    }

    /// Makes `extended` the store's schema (a configuration reload that adds attribute types,
    /// object classes or syntaxes): refused, changing nothing, unless it keeps every current
    /// definition under the same ID and meaning (`Schema::extended_by` builds such a one). It
    /// waits for the write txn in progress; later writes, and reads from then on, use it. The
    /// stored descriptions map to the same IDs; a new attribute gets its description number
    /// in the first write txn that stores it, as at any time.
    pub fn extend_schema(&self, extended: Arc<Schema>) -> Result<(), StoreError> {
        let _writer = crate::lock::lock(&self.inner.writer);
        let current = self.inner.schema();
        let mut problems = current.changes_in(&extended);
        for (id, attribute_type) in current.attribute_types() {
            if id as usize >= extended.attribute_type_count()
                || extended.attribute_type(id) != attribute_type
            {
                problems.push(format!(
                    "attribute type '{}' would change its ID",
                    attribute_type.name()
                ));
            }
        }
        for (id, object_class) in current.object_classes() {
            let same = extended
                .object_classes()
                .nth(id as usize)
                .is_some_and(|(_, now)| now == object_class);
            if !same {
                problems.push(format!(
                    "object class '{}' would change its ID",
                    object_class.name()
                ));
            }
        }
        if !problems.is_empty() {
            return Err(StoreError::Config(format!(
                "schema not extended: {}",
                problems.join("; ")
            )));
        }
        *crate::lock::write(&self.inner.schema_live) = extended;
        Ok(())
    }

    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Whether the next write txn will first grow the map, which waits (up to
    /// `MAP_GROWTH_WAIT`) for every read txn of this process to end.
    pub fn map_growth_due(&self) -> bool {
        self.inner.map_growth_due()
    }

    /// The index kinds searches use for `attr` (configured and built).
    pub fn indexed_kinds(&self, attr: AttrId) -> IndexKinds {
        self.inner
            .index_set()
            .usable
            .get(&attr)
            .copied()
            .unwrap_or_default()
    }

    /// The index kinds writes maintain for `attr`.
    pub fn configured_kinds(&self, attr: AttrId) -> IndexKinds {
        self.inner
            .index_set()
            .configured
            .get(&attr)
            .copied()
            .unwrap_or_default()
    }

    /// Set when the configured indexes differ from the built ones: suggest `lmdir reindex`.
    pub fn index_config_change(&self) -> Option<IndexConfigChange> {
        crate::lock::read(&self.inner.index_config_change).clone()
    }

    /// The raw LMDB environment, for tests that damage a store on purpose (feature
    /// `raw-access`, never enabled by a production crate: every write goes through `WriteTxn`
    /// or `BulkWriter`).
    #[cfg(feature = "raw-access")]
    pub fn env(&self) -> &Env<WithoutTls> {
        &self.inner.env
    }
    #[cfg(feature = "raw-access")]
    pub fn meta_database(&self) -> RawDatabase {
        self.inner.databases.meta
    }
    #[cfg(feature = "raw-access")]
    pub fn id2entry_database(&self) -> RawDatabase {
        self.inner.databases.id2entry
    }
    #[cfg(feature = "raw-access")]
    pub fn id2node_database(&self) -> RawDatabase {
        self.inner.databases.id2node
    }
    #[cfg(feature = "raw-access")]
    pub fn dn2id_database(&self) -> RawDatabase {
        self.inner.databases.dn2id
    }
    #[cfg(feature = "raw-access")]
    pub fn id2value_database(&self) -> Option<RawDatabase> {
        self.inner.databases.values
    }
    #[cfg(feature = "raw-access")]
    pub fn index_database(&self, attr: AttrId) -> Option<RawDatabase> {
        self.inner.index_set().databases.get(&attr).copied()
    }

    /// The description table as of now.
    pub fn descriptions(&self) -> Arc<DescriptionTable> {
        crate::lock::read(&self.inner.descriptions).clone()
    }

    /// Read txns open right now in this process. Each pins an LMDB snapshot (pages freed after
    /// it cannot be reused), so servers and tests watch that none is held by a gone client.
    pub fn open_read_txns(&self) -> usize {
        self.inner.reader_gate.readers()
    }

    /// How many entries as they were before a change (`Change::before`) the writes recorded
    /// since the store opened: each is a copy of an entry's values, made only while someone
    /// reads them (monitoring and tests).
    pub fn prior_entries_built(&self) -> u64 {
        self.inner
            .prior_entries_built
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Flushes to disk (useful with `sync: false`).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.inner.env.force_sync()?;
        Ok(())
    }
}

impl Inner {
    /// The description numbers of an entry's attributes, allocating the new ones. New numbers
    /// become visible to readers at once (harmless: unused until an entry using them commits)
    /// and their `meta` rows are written by the committing write txn. The table is copied (for
    /// readers holding the old one) at most once per call, not once per new description: an
    /// entry bringing thousands of new descriptions was quadratic.
    pub(crate) fn description_numbers(
        &self,
        attributes: &[crate::working::WorkingAttribute],
    ) -> Vec<u32> {
        {
            let table = crate::lock::read(&self.descriptions);
            let known: Option<Vec<u32>> = attributes
                .iter()
                .map(|attribute| table.number_of(&attribute.text))
                .collect();
            if let Some(numbers) = known {
                return numbers;
            }
        }
        let mut guard = crate::lock::write(&self.descriptions);
        let mut table = DescriptionTable::clone(&guard);
        let numbers = attributes
            .iter()
            .map(|attribute| {
                if let Some(number) = table.number_of(&attribute.text) {
                    return number;
                }
                let number = u32::try_from(table.entries.len())
                    .expect("fewer than 2^32 attribute descriptions");
                table.entries.push(DescriptionInfo {
                    text: attribute.text.clone(),
                    attr: attribute.attr,
                    options: attribute.options.clone(),
                });
                table.by_text.insert(attribute.text.clone(), number);
                number
            })
            .collect();
        *guard = Arc::new(table);
        numbers
    }
}

impl StoreOptions {
    /// The store options a configuration asks for: the one mapping of `[database]` for the
    /// server and every CLI command (load, reindex, export, ...).
    pub fn from_config(config: &lmdir_config::Config) -> StoreOptions {
        let indexes = config
            .database
            .index
            .iter()
            .map(|(attribute, kinds)| (attribute.clone(), kinds.clone()))
            .collect();
        StoreOptions {
            suffix: config.database.suffix.clone(),
            indexes,
            sync: config.database.sync,
            memberof: config.database.memberof,
            map_size_bytes: usize::try_from(config.database.map_size_bytes)
                .unwrap_or(MAP_SIZE_DEFAULT_BYTES),
        }
    }
}
