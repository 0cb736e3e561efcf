//! Whole-store operations: export (LDIF), stat, check.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::Write;
use std::path::Path;

use lmdir_schema::{AttrId, LdapError};
use roaring::RoaringBitmap;

use crate::codec::EncodedEntry;
use crate::error::{lmdb_to_ldap, RawDatabase, StoreError};
use crate::layout::{self, EntryId, IndexKinds, DATA_FILE_MODE, ROOT_PARENT_ID};
use crate::read::{children_of, corrupt, ReadTxn, TREE_DEPTH_MAX};
use crate::store::Store;
use crate::write::WorkingAttribute;

/// Problems listed in a `CheckReport` before the rest are only counted.
pub const CHECK_PROBLEMS_LISTED_MAX: usize = 1000;

impl ReadTxn {
    /// Every entry ID in DN-tree depth-first order (parents before children, siblings by ID).
    pub fn ids_parents_first(&self) -> Result<Vec<EntryId>, LdapError> {
        let mut order = Vec::new();
        let mut roots = children_of(&self.inner, self.txn(), ROOT_PARENT_ID)?;
        roots.sort_unstable();
        let mut stack: Vec<(EntryId, usize)> = roots.into_iter().rev().map(|id| (id, 0)).collect();
        while let Some((id, depth)) = stack.pop() {
            if depth > TREE_DEPTH_MAX {
                return Err(corrupt(format!(
                    "DN tree deeper than {TREE_DEPTH_MAX} at entry {id}"
                )));
            }
            order.push(id);
            let mut children = children_of(&self.inner, self.txn(), id)?;
            children.sort_unstable();
            stack.extend(children.into_iter().rev().map(|child| (child, depth + 1)));
        }
        Ok(order)
    }

    /// Writes every entry as LDIF, parents before children, from this one snapshot.
    pub fn export(&self, output: &mut dyn Write) -> Result<u64, StoreError> {
        let mut writer = lmdir_ldif::LdifWriter::new(output);
        writer.write_version()?;
        let mut count = 0;
        for id in self.ids_parents_first()? {
            let entry = self
                .entry(id)?
                .ok_or_else(|| corrupt(format!("entry {id} is in the tree but not in id2entry")))?;
            let dn = self.dn_of(id)?;
            writer.write_entry(
                &dn,
                entry.attributes().flat_map(|attribute| {
                    attribute
                        .values()
                        .map(move |(original, _)| (attribute.description_text(), original))
                }),
            )?;
            count += 1;
        }
        writer.flush()?;
        Ok(count)
    }

    pub(crate) fn working_attributes(
        &self,
        id: EntryId,
    ) -> Result<Option<Vec<WorkingAttribute>>, LdapError> {
        Ok(self.entry(id)?.map(|entry| {
            entry
                .attributes()
                .map(|attribute| WorkingAttribute {
                    text: attribute.description.text.clone(),
                    attr: attribute.attr(),
                    options: attribute.options().to_vec(),
                    values: attribute
                        .values()
                        .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
                        .collect(),
                })
                .collect()
        }))
    }
}

impl Store {
    /// Exports all entries as LDIF under one read txn (consistent while writers run).
    pub fn export(&self, output: &mut dyn Write) -> Result<u64, StoreError> {
        self.read()?.export(output)
    }

    /// Writes a consistent, compacted copy of the store to the new file `path` (LMDB's
    /// `mdb_env_copy2` with `MDB_CP_COMPACT`): one read txn sees a single commit while writers,
    /// in this process or a running server, go on; free pages are left out. The copy is synced
    /// before returning. It is a complete `data.mdb`: a directory holding it opens as a store.
    /// It holds every password hash, so it is created 0600 like the live file, whatever the
    /// umask (never readable by others, not even while it is written); `path` must not exist.
    pub fn copy_compacted(&self, path: &Path) -> Result<u64, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(DATA_FILE_MODE)
            .open(path)?;
        let copied = self
            .inner
            .env
            .copy_to_file(&mut file, heed::CompactionOption::Enabled)
            .map_err(StoreError::from)
            .and_then(|()| Ok(file.sync_all()?));
        if let Err(error) = copied {
            let _ = std::fs::remove_file(path);
            return Err(error);
        }
        Ok(file.metadata()?.len())
    }
}

/// Size facts of one LMDB DB.
#[derive(Clone, Debug, Default)]
pub struct DatabaseStat {
    pub name: String,
    pub rows: u64,
    pub depth: u32,
    pub branch_pages: u64,
    pub leaf_pages: u64,
    pub overflow_pages: u64,
    pub size_bytes: u64,
}

/// Facts of one index DB.
#[derive(Clone, Debug, Default)]
pub struct IndexStat {
    pub attribute: String,
    pub kinds: Vec<&'static str>,
    /// Distinct keys (a key spans one or more chunks).
    pub key_count: u64,
    /// Sum of all posting list lengths.
    pub posting_count: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Stat {
    pub entries: u64,
    pub databases: Vec<DatabaseStat>,
    pub indexes: Vec<IndexStat>,
}

impl fmt::Display for Stat {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(formatter, "entries: {}", self.entries)?;
        writeln!(
            formatter,
            "{:<24} {:>12} {:>6} {:>10} {:>10} {:>10} {:>14}",
            "db", "rows", "depth", "branch", "leaf", "overflow", "bytes"
        )?;
        for database in &self.databases {
            writeln!(
                formatter,
                "{:<24} {:>12} {:>6} {:>10} {:>10} {:>10} {:>14}",
                database.name,
                database.rows,
                database.depth,
                database.branch_pages,
                database.leaf_pages,
                database.overflow_pages,
                database.size_bytes
            )?;
        }
        for index in &self.indexes {
            writeln!(
                formatter,
                "index {} ({}): {} keys, {} postings",
                index.attribute,
                index.kinds.join(","),
                index.key_count,
                index.posting_count
            )?;
        }
        Ok(())
    }
}

fn database_stat(
    name: &str,
    database: RawDatabase,
    read: &ReadTxn,
) -> Result<DatabaseStat, StoreError> {
    let stat = database.stat(read.txn())?;
    let pages = (stat.branch_pages + stat.leaf_pages + stat.overflow_pages) as u64;
    Ok(DatabaseStat {
        name: name.to_string(),
        rows: stat.entries as u64,
        depth: stat.depth,
        branch_pages: stat.branch_pages as u64,
        leaf_pages: stat.leaf_pages as u64,
        overflow_pages: stat.overflow_pages as u64,
        size_bytes: pages * stat.page_size as u64,
    })
}

fn kind_name(kind: u8) -> &'static str {
    match kind {
        layout::KIND_EQUALITY => "eq",
        layout::KIND_PRESENCE => "pres",
        layout::KIND_INITIAL => "sub-initial",
        layout::KIND_ANY => "sub-any",
        layout::KIND_FINAL => "sub-final",
        layout::KIND_ORDERED => "ord",
        _ => "unknown-kind",
    }
}

/// Reads a whole index DB as key (without chunk) → IDs.
fn read_index(
    database: RawDatabase,
    read: &ReadTxn,
    problems: &mut Problems,
    attribute: &str,
) -> Result<BTreeMap<Vec<u8>, RoaringBitmap>, StoreError> {
    let mut keys: BTreeMap<Vec<u8>, RoaringBitmap> = BTreeMap::new();
    for row in database.iter(read.txn())? {
        let (full_key, value) = row?;
        let Some((key, chunk)) = layout::split_index_key(full_key) else {
            problems.push(format!(
                "index {attribute}: key {} is too short",
                hex(full_key)
            ));
            continue;
        };
        let ids = keys.entry(key.to_vec()).or_default();
        if let Err(error) = layout::decode_posting_chunk_into(value, chunk, ids) {
            problems.push(format!(
                "index {attribute}: key {} chunk {chunk}: {error}",
                hex(key)
            ));
        }
    }
    Ok(keys)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

impl Store {
    pub fn stat(&self) -> Result<Stat, StoreError> {
        let read = self.read()?;
        let databases = &self.inner.databases;
        let mut stat = Stat {
            entries: read.entry_count()?,
            ..Stat::default()
        };
        for (name, database) in [
            (layout::DB_META, databases.meta),
            (layout::DB_ID2ENTRY, databases.id2entry),
            (layout::DB_ID2NODE, databases.id2node),
            (layout::DB_DN2ID, databases.dn2id),
        ] {
            stat.databases.push(database_stat(name, database, &read)?);
        }
        if let Some(database) = databases.session_log {
            stat.databases
                .push(database_stat(layout::DB_SESSION_LOG, database, &read)?);
        }
        if let Some(database) = databases.values {
            stat.databases
                .push(database_stat(layout::DB_ID2VALUE, database, &read)?);
        }
        let index_set = self.inner.index_set();
        let mut attrs: Vec<(&AttrId, &RawDatabase)> = index_set.databases.iter().collect();
        attrs.sort_by_key(|(attr, _)| {
            self.inner
                .schema()
                .attribute_type(**attr)
                .name()
                .to_ascii_lowercase()
        });
        for (attr, database) in attrs {
            let name = self
                .inner
                .schema()
                .attribute_type(*attr)
                .name()
                .to_ascii_lowercase();
            stat.databases.push(database_stat(
                &format!("{}{name}", layout::INDEX_DB_PREFIX),
                *database,
                &read,
            )?);
            let mut ignored = Problems::default();
            let keys = read_index(*database, &read, &mut ignored, &name)?;
            stat.indexes.push(IndexStat {
                attribute: name,
                kinds: self.configured_kinds(*attr).names(),
                key_count: keys.len() as u64,
                posting_count: keys.values().map(RoaringBitmap::len).sum(),
            });
        }
        Ok(stat)
    }
}

#[derive(Default)]
struct Problems {
    listed: Vec<String>,
    more: u64,
}

impl Problems {
    fn push(&mut self, problem: String) {
        if self.listed.len() < CHECK_PROBLEMS_LISTED_MAX {
            self.listed.push(problem);
        } else {
            self.more += 1;
        }
    }
}

/// The result of `Store::check`.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub entries_checked: u64,
    pub postings_checked: u64,
    /// One line per problem (at most `CHECK_PROBLEMS_LISTED_MAX`).
    pub problems: Vec<String>,
    /// Problems beyond the listed ones.
    pub problems_not_listed: u64,
    /// Not damage: index kinds that could not be verified because the index configuration
    /// changed since they were built, each naming the reindex that settles it.
    pub notes: Vec<String>,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty() && self.problems_not_listed == 0
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for note in &self.notes {
            writeln!(formatter, "{note}")?;
        }
        for problem in &self.problems {
            writeln!(formatter, "{problem}")?;
        }
        if self.problems_not_listed > 0 {
            writeln!(
                formatter,
                "... and {} more problems",
                self.problems_not_listed
            )?;
        }
        write!(
            formatter,
            "{} entries, {} postings checked: {}",
            self.entries_checked,
            self.postings_checked,
            if self.is_clean() {
                "clean".to_string()
            } else {
                format!(
                    "{} problems",
                    self.problems.len() as u64 + self.problems_not_listed
                )
            }
        )
    }
}

impl Store {
    /// Verifies every id2entry / id2node / dn2id link, subtree sizes and child counts, and
    /// every index posting against postings recomputed from the stored entries.
    pub fn check(&self) -> Result<CheckReport, StoreError> {
        let read = self.read()?;
        let databases = &self.inner.databases;
        let mut problems = Problems::default();
        let (parents, mut max_id) = self.check_tree(&read, &mut problems)?;

        let descriptions = check_description_table(&read, &self.inner.schema(), &mut problems)?;
        let entries = self.check_entries(&read, &descriptions, &parents, &mut problems)?;
        check_value_rows(&read, &entries.markers, &mut problems)?;
        max_id = max_id.max(entries.max_id);
        let (expected, entries_checked) = (entries.expected, entries.checked);
        let next_id = databases
            .meta
            .get(read.txn(), layout::META_NEXT_ID)?
            .and_then(layout::decode_id)
            .unwrap_or(0);
        if next_id <= max_id {
            problems.push(format!(
                "meta: next_id {next_id} is not above the largest ID {max_id}"
            ));
        }

        if databases
            .meta
            .get(read.txn(), crate::bulk::META_LIVE_LOAD)?
            .is_some()
        {
            problems.push(
                "meta: a replica's bulk refresh into this store was cut off (live_load_under_way); \
                 the replica discards it and starts over when it next runs"
                    .to_string(),
            );
        }
        for problem in crate::treeorder::check_inversions(&read)? {
            problems.push(problem);
        }
        for problem in crate::session_log::check_session_log(&read)? {
            problems.push(problem);
        }

        let (postings_checked, notes) =
            self.check_indexes(&read, expected, &entries.undecodable, &mut problems)?;
        Ok(CheckReport {
            entries_checked,
            postings_checked,
            problems: problems.listed,
            problems_not_listed: problems.more,
            notes,
        })
    }
}

impl Store {
    /// Checks the DN tree: parent links, dn2id rows both ways, subtree sizes and child counts.
    /// Returns each node's parent and the largest node ID.
    fn check_tree(
        &self,
        read: &ReadTxn,
        problems: &mut Problems,
    ) -> Result<(HashMap<EntryId, EntryId>, EntryId), StoreError> {
        let (parents, stored_sizes, max_id) = self.check_nodes(read, problems)?;
        let computed = counted_sizes(read, &parents, problems);
        compare_sizes(read, &computed, &stored_sizes, problems);
        self.check_dn2id_rows(read, &parents, problems)?;
        Ok((parents, max_id))
    }

    /// Reads every node: its parent, its stored (subtree size, child count) and the largest
    /// node ID; each node's dn2id row and entry are checked on the way.
    fn check_nodes(
        &self,
        read: &ReadTxn,
        problems: &mut Problems,
    ) -> Result<(HashMap<EntryId, EntryId>, NodeSizes, EntryId), StoreError> {
        let mut parents: HashMap<EntryId, EntryId> = HashMap::new();
        let mut stored_sizes: NodeSizes = HashMap::new();
        let mut max_id = 0;
        for row in self.inner.databases.id2node.iter(read.txn())? {
            let (key, value) = row?;
            let Some(id) = layout::decode_id(key).filter(|_| key.len() == 4) else {
                problems.push(format!("id2node: bad key {}", hex(key)));
                continue;
            };
            max_id = max_id.max(id);
            let Some(node) = layout::decode_node(value) else {
                problems.push(format!("id2node: {}: undecodable node", describe(read, id)));
                continue;
            };
            parents.insert(id, node.parent);
            stored_sizes.insert(id, (node.subtree_size, node.child_count));
            self.check_node_rows(read, (key, id), &node, problems)?;
        }
        Ok((parents, stored_sizes, max_id))
    }

    /// A node's dn2id row maps back to it and its entry exists (`key`: its id2node key).
    fn check_node_rows(
        &self,
        read: &ReadTxn,
        (key, id): (&[u8], EntryId),
        node: &layout::Node<'_>,
        problems: &mut Problems,
    ) -> Result<(), StoreError> {
        let databases = &self.inner.databases;
        let mut dn2id_key = Vec::new();
        layout::encode_dn2id_key(node.parent, node.rdn_normalized, &mut dn2id_key);
        match databases.dn2id.get(read.txn(), &dn2id_key)? {
            Some(bytes) if layout::decode_id(bytes) == Some(id) => {}
            Some(bytes) => problems.push(format!(
                "dn2id: {}: its key maps to entry {:?} instead",
                describe(read, id),
                layout::decode_id(bytes)
            )),
            None => problems.push(format!(
                "dn2id: {}: no row under parent {}",
                describe(read, id),
                node.parent
            )),
        }
        if databases.id2entry.get(read.txn(), key)?.is_none() {
            problems.push(format!(
                "id2entry: {}: node without entry",
                describe(read, id)
            ));
        }
        Ok(())
    }

    /// Every dn2id row names a node with that parent.
    fn check_dn2id_rows(
        &self,
        read: &ReadTxn,
        parents: &HashMap<EntryId, EntryId>,
        problems: &mut Problems,
    ) -> Result<(), StoreError> {
        for row in self.inner.databases.dn2id.iter(read.txn())? {
            let (key, value) = row?;
            match (layout::decode_dn2id_key(key), layout::decode_id(value)) {
                (Some((parent, _)), Some(id)) if parents.get(&id) == Some(&parent) => {}
                _ => problems.push(format!(
                    "dn2id: row {} → {} has no matching node",
                    hex(key),
                    hex(value)
                )),
            }
        }
        Ok(())
    }
}

/// Each node's (subtree size, child count), as stored or as counted (`check_tree`).
type NodeSizes = HashMap<EntryId, (u32, u32)>;

/// Each node's (subtree size, child count) counted from the parent links; a missing parent
/// and a cyclic or too deep parent chain are problems.
fn counted_sizes(
    read: &ReadTxn,
    parents: &HashMap<EntryId, EntryId>,
    problems: &mut Problems,
) -> NodeSizes {
    let mut computed: NodeSizes = parents.keys().map(|id| (*id, (0, 0))).collect();
    for (&id, &parent) in parents {
        if parent != ROOT_PARENT_ID {
            match computed.get_mut(&parent) {
                Some(counts) => counts.1 += 1,
                None => problems.push(format!(
                    "id2node: {}: parent {parent} does not exist",
                    describe(read, id)
                )),
            }
        }
        let mut current = id;
        let mut depth = 0;
        while current != ROOT_PARENT_ID {
            match computed.get_mut(&current) {
                Some(counts) => counts.0 += 1,
                None => break,
            }
            current = parents.get(&current).copied().unwrap_or(ROOT_PARENT_ID);
            depth += 1;
            if depth > TREE_DEPTH_MAX {
                problems.push(format!(
                    "id2node: {}: parent chain is cyclic or too deep",
                    describe(read, id)
                ));
                break;
            }
        }
    }
    computed
}

/// The stored subtree sizes and child counts match the counted ones.
fn compare_sizes(
    read: &ReadTxn,
    computed: &NodeSizes,
    stored_sizes: &NodeSizes,
    problems: &mut Problems,
) {
    for (id, (size, children)) in computed {
        let (stored_size, stored_children) = stored_sizes[id];
        if *size != stored_size {
            problems.push(format!(
                "id2node: {}: subtree size {stored_size}, counted {size}",
                describe(read, *id)
            ));
        }
        if *children != stored_children {
            problems.push(format!(
                "id2node: {}: child count {stored_children}, counted {children}",
                describe(read, *id)
            ));
        }
    }
}

impl Store {
    /// Compares every stored posting with the postings recomputed from the entries; returns
    /// the number of stored postings and notes on indexes not built yet (or no longer
    /// configured), which are a reindex to run, not damage.
    fn check_indexes(
        &self,
        read: &ReadTxn,
        mut expected: HashMap<AttrId, BTreeMap<Vec<u8>, RoaringBitmap>>,
        undecodable: &RoaringBitmap,
        problems: &mut Problems,
    ) -> Result<(u64, Vec<String>), StoreError> {
        let mut postings_checked = 0;
        let mut notes = Vec::new();
        let mut unbuilt: Vec<(AttrId, String, IndexKinds)> = Vec::new();
        let index_set = self.inner.index_set();
        let mut attrs: Vec<AttrId> = index_set.databases.keys().copied().collect();
        attrs.sort_unstable();
        for attr in attrs {
            let database = index_set.databases[&attr];
            let name = self
                .inner
                .schema()
                .attribute_type(attr)
                .name()
                .to_ascii_lowercase();
            let mut stored = read_index(database, read, problems, &name)?;
            let mut wanted = expected.remove(&attr).unwrap_or_default();
            let not_built =
                self.drop_unverifiable_kinds(attr, &name, &mut stored, &mut wanted, &mut notes);
            if !not_built.is_empty() {
                unbuilt.push((attr, name.clone(), not_built));
            }
            let wanted = &wanted;
            for (key, ids) in &stored {
                postings_checked += ids.len();
                let kind = kind_name(key[0]);
                let expected_ids = wanted.get(key).cloned().unwrap_or_default();
                // An undecodable entry's postings are stale by nature: the entry is reported.
                for id in &(ids - &expected_ids) - undecodable {
                    problems.push(format!(
                        "index {name} {kind}: {} posted under key {} without a value producing it",
                        describe(read, id),
                        hex(key)
                    ));
                }
                for id in &expected_ids - ids {
                    problems.push(format!(
                        "index {name} {kind}: {} missing from key {}",
                        describe(read, id),
                        hex(key)
                    ));
                }
            }
            for (key, ids) in wanted {
                if !stored.contains_key(key) {
                    for id in ids {
                        problems.push(format!(
                            "index {name} {}: {} missing from key {} (key absent)",
                            kind_name(key[0]),
                            describe(read, id),
                            hex(key)
                        ));
                    }
                }
            }
        }
        // A configured index a read-only open found no DB for: nothing of it is built.
        let index_set = self.inner.index_set();
        let schema = self.inner.schema();
        for (attr, kinds) in &index_set.configured {
            if !kinds.is_empty() && !index_set.databases.contains_key(attr) {
                let name = schema.attribute_type(*attr).name();
                unbuilt.push((*attr, name.to_ascii_lowercase(), *kinds));
            }
        }
        if !unbuilt.is_empty() {
            unbuilt.sort_unstable_by_key(|(attr, _, _)| *attr);
            let unbuilt: Vec<(String, IndexKinds)> = unbuilt
                .into_iter()
                .map(|(_, name, kinds)| (name, kinds))
                .collect();
            notes.push(unbuilt_note(&unbuilt));
        }
        Ok((postings_checked, notes))
    }
}

/// An entry as named in check problems: ID and DN when the tree gives one.
fn describe(read: &ReadTxn, id: EntryId) -> String {
    match read.dn_of(id) {
        Ok(dn) => format!("entry {id} '{dn}'"),
        Err(_) => format!("entry {id}"),
    }
}

/// What `check_entries` learned from id2entry.
struct EntriesChecked {
    checked: u64,
    max_id: EntryId,
    /// Postings recomputed from the stored values, per indexed attribute.
    expected: HashMap<AttrId, BTreeMap<Vec<u8>, RoaringBitmap>>,
    undecodable: RoaringBitmap,
    /// Out-of-line markers: (entry, description number) → value count.
    markers: HashMap<(EntryId, u32), usize>,
}

/// Checks `meta`'s description rows: well-formed keys, dense numbers, UTF-8 text known to the
/// schema, no text under two numbers. Returns the numbers that are present.
fn check_description_table(
    read: &ReadTxn,
    schema: &lmdir_schema::Schema,
    problems: &mut Problems,
) -> Result<HashSet<u32>, StoreError> {
    let mut numbers = HashSet::new();
    let mut by_text: HashMap<String, u32> = HashMap::new();
    let mut expected_number = 0u32;
    let prefix = layout::META_DESCRIPTION_PREFIX;
    for row in read.inner.databases.meta.prefix_iter(read.txn(), prefix)? {
        let (key, value) = row?;
        let Some(number) =
            layout::decode_id(&key[prefix.len()..]).filter(|_| key.len() == prefix.len() + 4)
        else {
            problems.push(format!("meta: bad description key {}", hex(key)));
            continue;
        };
        if number != expected_number {
            problems.push(format!(
                "meta: description table has a gap: {number} follows {}",
                expected_number.wrapping_sub(1)
            ));
        }
        expected_number = number.saturating_add(1);
        numbers.insert(number);
        let Ok(text) = std::str::from_utf8(value) else {
            problems.push(format!("meta: description {number} is not UTF-8"));
            continue;
        };
        if let Err(error) = schema.parse_description(text) {
            problems.push(format!(
                "meta: description {number} '{text}' is unknown to the schema: {}",
                error.message
            ));
        }
        if let Some(first) = by_text.insert(text.to_ascii_lowercase(), number) {
            problems.push(format!(
                "meta: description '{text}' is stored twice, as {first} and {number}"
            ));
        }
    }
    Ok(numbers)
}

impl Store {
    /// Decodes every entry against the stored description table (names each undecodable
    /// one by ID and DN) and recomputes the postings the decodable ones produce.
    /// An entry lacking a value of its own RDN (a glue entry excepted, as in the schema
    /// check): every write refuses one, a `--quick` load before it added the value let one
    /// in.
    fn naming_problem(
        &self,
        read: &ReadTxn,
        id: EntryId,
        attributes: &[WorkingAttribute],
    ) -> Result<Option<String>, StoreError> {
        let schema = self.inner.schema();
        let object_class = schema.object_class_attribute();
        let is_glue = attributes
            .iter()
            .filter(|attribute| attribute.attr == object_class)
            .flat_map(|attribute| attribute.values.iter())
            .any(|(_, normalized)| lmdir_schema::is_glue_class_value(normalized));
        if is_glue {
            return Ok(None);
        }
        let Some(node) = crate::read::read_node(&self.inner, read.txn(), id)? else {
            return Ok(None);
        };
        let rdn = String::from_utf8_lossy(node.rdn_normalized);
        for (attr, normalized) in schema.rdn_values(&rdn) {
            let present = attributes.iter().any(|attribute| {
                attribute.attr == attr
                    && attribute
                        .values
                        .iter()
                        .any(|(_, value)| *value == normalized)
            });
            if !present {
                let dn = read.dn_of(id).unwrap_or_else(|_| "DN unknown".to_string());
                return Ok(Some(format!(
                    "id2entry: entry {id} '{dn}' lacks its RDN's value of '{}' \
                     (namingViolation); the rootdn can add it",
                    schema.attribute_type(attr).name()
                )));
            }
        }
        Ok(None)
    }

    fn check_entries(
        &self,
        read: &ReadTxn,
        descriptions: &HashSet<u32>,
        parents: &HashMap<EntryId, EntryId>,
        problems: &mut Problems,
    ) -> Result<EntriesChecked, StoreError> {
        let mut checked = EntriesChecked {
            checked: 0,
            max_id: 0,
            expected: HashMap::new(),
            undecodable: RoaringBitmap::new(),
            markers: HashMap::new(),
        };
        for row in self.inner.databases.id2entry.iter(read.txn())? {
            let (key, value) = row?;
            let Some(id) = layout::decode_id(key).filter(|_| key.len() == 4) else {
                problems.push(format!("id2entry: bad key {}", hex(key)));
                continue;
            };
            checked.max_id = checked.max_id.max(id);
            checked.checked += 1;
            if !parents.contains_key(&id) {
                problems.push(format!("id2node: entry {id}: entry without node"));
            }
            let fault = match EncodedEntry::parse(value) {
                Err(error) => Some(error.to_string()),
                Ok(encoded) => {
                    for attribute in encoded
                        .attributes()
                        .filter(|attribute| attribute.out_of_line)
                    {
                        checked
                            .markers
                            .insert((id, attribute.description_number), attribute.value_count);
                    }
                    encoded
                    .attributes()
                    .map(|attribute| attribute.description_number)
                    .find(|number| !descriptions.contains(number))
                    .map(|number| {
                        format!("uses attribute description {number} missing from the description table")
                    })
                }
            };
            let attributes = match fault {
                None => read.working_attributes(id).map_err(|error| error.message),
                Some(fault) => Err(fault),
            };
            match attributes {
                Ok(Some(attributes)) => {
                    if let Some(problem) = self.naming_problem(read, id, &attributes)? {
                        problems.push(problem);
                    }
                    for (attr, keys) in self.inner.index_keys(&attributes) {
                        let per_attr = checked.expected.entry(attr).or_default();
                        for key in keys {
                            per_attr.entry(key).or_default().insert(id);
                        }
                    }
                }
                Ok(None) => {}
                Err(message) => {
                    checked.undecodable.insert(id);
                    let dn = read.dn_of(id).unwrap_or_else(|_| "DN unknown".to_string());
                    problems.push(format!(
                        "id2entry: entry {id} '{dn}' cannot be decoded ({message}); the rootdn can delete it"
                    ));
                }
            }
        }
        Ok(checked)
    }

    /// Removes the keys of `attr`'s index kinds that cannot be compared with the entries and
    /// returns the kinds configured but not built yet (writes since the change posted only the
    /// entries they touched, so every older entry would read as "missing"). Kinds no longer
    /// configured (writes stopped maintaining them) are removed too, with a note. Both are
    /// settled by a reindex, not damage.
    fn drop_unverifiable_kinds(
        &self,
        attr: AttrId,
        name: &str,
        stored: &mut BTreeMap<Vec<u8>, RoaringBitmap>,
        wanted: &mut BTreeMap<Vec<u8>, RoaringBitmap>,
        notes: &mut Vec<String>,
    ) -> IndexKinds {
        let index_set = self.inner.index_set();
        let configured = index_set.configured.get(&attr).copied().unwrap_or_default();
        let usable = index_set.usable.get(&attr).copied().unwrap_or_default();
        let not_built = IndexKinds(configured.0 & !usable.0);
        wanted.retain(|key, _| !not_built.contains(key_kind(key)));
        stored.retain(|key, _| !not_built.contains(key_kind(key)));
        let mut dropped = IndexKinds::default();
        stored.retain(|key, _| {
            let kind = key_kind(key);
            // Keys of an unknown kind stay, to be reported as the damage they are.
            let keep = kind.is_empty() || configured.contains(kind);
            if !keep {
                dropped = dropped.union(kind);
            }
            keep
        });
        if !dropped.is_empty() {
            notes.push(format!(
                "index {name} {} no longer configured: run `lmdir reindex {name}` to drop its keys",
                dropped.names().join(",")
            ));
        }
        not_built
    }
}

/// Checks `id2value` against the entries' out-of-line markers: every block decodes, its values
/// sorted, keyed by its first value, below the next block of its description, and belongs to a
/// marker; the values of a marker are as many as its count.
fn check_value_rows(
    read: &ReadTxn,
    markers: &HashMap<(EntryId, u32), usize>,
    problems: &mut Problems,
) -> Result<(), StoreError> {
    let Some(database) = read.inner.databases.values else {
        if !markers.is_empty() {
            problems.push(
                "id2value: entries have out-of-line values but there is no id2value DB".into(),
            );
        }
        return Ok(());
    };
    let mut counted: HashMap<(EntryId, u32), usize> = HashMap::new();
    let mut previous: Option<((EntryId, u32), Vec<u8>)> = None;
    for row in database.iter(read.txn())? {
        let (key, block) = row?;
        let Some((marker, count, last)) = check_value_block(key, block) else {
            problems.push(format!("id2value: malformed block {}", hex(key)));
            continue;
        };
        if !markers.contains_key(&marker) {
            problems.push(format!(
                "id2value: {}: a value of description {} without an out-of-line marker",
                describe(read, marker.0),
                marker.1
            ));
            continue;
        }
        let tail = &key[layout::VALUE_KEY_PREFIX_BYTES..];
        if previous
            .as_ref()
            .is_some_and(|(at, before)| *at == marker && before.as_slice() >= tail)
        {
            problems.push(format!(
                "id2value: {}: block {} overlaps the block before it",
                describe(read, marker.0),
                hex(key)
            ));
        }
        previous = Some((marker, last));
        *counted.entry(marker).or_default() += count;
    }
    let mut markers: Vec<_> = markers.iter().collect();
    markers.sort();
    for (marker, count) in markers {
        let found = counted.get(marker).copied().unwrap_or_default();
        if found != *count {
            problems.push(format!(
                "id2value: {}: description {} marks {count} values, id2value holds {found}",
                describe(read, marker.0),
                marker.1
            ));
        }
    }
    Ok(())
}

/// One `id2value` block's (entry, description), value count and last tail when it decodes,
/// is sorted, is not empty and is keyed by its first value.
fn check_value_block(key: &[u8], block: &[u8]) -> Option<((EntryId, u32), usize, Vec<u8>)> {
    let id = layout::decode_id(key.get(..4)?)?;
    let number = u32::from_be_bytes(
        key.get(4..layout::VALUE_KEY_PREFIX_BYTES)?
            .try_into()
            .ok()?,
    );
    let count = layout::check_value_block(block).ok()?;
    let (first, last) = layout::block_tail_bounds(block).ok()??;
    (first == &key[layout::VALUE_KEY_PREFIX_BYTES..]).then(|| ((id, number), count, last.to_vec()))
}

/// One line naming every index kind not built yet and the one reindex that builds them all.
fn unbuilt_note(unbuilt: &[(String, IndexKinds)]) -> String {
    let kinds: Vec<String> = unbuilt
        .iter()
        .map(|(name, kinds)| format!("{name} {}", kinds.names().join(",")))
        .collect();
    let names: Vec<&str> = unbuilt.iter().map(|(name, _)| name.as_str()).collect();
    format!(
        "index {} not built yet: run `lmdir reindex {}`",
        kinds.join(", "),
        names.join(" ")
    )
}

/// The configurable index kind an index key (its first byte) belongs to; empty if unknown.
fn key_kind(key: &[u8]) -> IndexKinds {
    match key.first().copied().unwrap_or_default() {
        layout::KIND_EQUALITY => IndexKinds::EQUALITY,
        layout::KIND_PRESENCE => IndexKinds::PRESENCE,
        layout::KIND_INITIAL | layout::KIND_ANY | layout::KIND_FINAL => IndexKinds::SUBSTRING,
        layout::KIND_ORDERED => IndexKinds::ORDERED,
        _ => IndexKinds::default(),
    }
}

impl Store {
    /// The names of this store's DBs: `meta`, `id2entry`, `id2node`, `dn2id`, then one
    /// `idx.<attribute>` per index DB, sorted.
    pub fn database_names(&self) -> Vec<String> {
        let mut names: Vec<String> = [
            layout::DB_META,
            layout::DB_ID2ENTRY,
            layout::DB_ID2NODE,
            layout::DB_DN2ID,
        ]
        .iter()
        .map(|name| name.to_string())
        .collect();
        if self.inner.databases.values.is_some() {
            names.push(layout::DB_ID2VALUE.to_string());
        }
        let schema = &self.inner.schema();
        let mut indexes: Vec<String> = self
            .inner
            .index_set()
            .databases
            .keys()
            .map(|attr| crate::store::index_database_name(schema, *attr))
            .collect();
        indexes.sort();
        names.extend(indexes);
        names
    }
}

impl ReadTxn {
    /// Visits every row of the DB named `name` (see `Store::database_names`) in key order.
    pub(crate) fn for_each_row(
        &self,
        name: &str,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), LdapError> {
        let databases = &self.inner.databases;
        let database = match name {
            layout::DB_META => Some(databases.meta),
            layout::DB_ID2ENTRY => Some(databases.id2entry),
            layout::DB_ID2NODE => Some(databases.id2node),
            layout::DB_DN2ID => Some(databases.dn2id),
            layout::DB_ID2VALUE => databases.values,
            _ => name
                .strip_prefix(layout::INDEX_DB_PREFIX)
                .and_then(|attribute| self.inner.schema().attribute(attribute))
                .and_then(|attr| self.inner.index_set().databases.get(&attr).copied()),
        }
        .ok_or_else(|| {
            LdapError::new(
                lmdir_schema::ResultCode::NoSuchObject,
                format!("no DB '{name}'"),
            )
        })?;
        for row in database.iter(self.txn()).map_err(lmdb_to_ldap)? {
            let (key, value) = row.map_err(lmdb_to_ldap)?;
            visit(key, value);
        }
        Ok(())
    }
}

/// One DB's digest (see `Store::database_digests`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseDigest {
    pub name: String,
    pub rows: u64,
    pub digest: u64,
}

impl Store {
    /// A digest of every DB, to compare two stores built from the same input (the bulk loader
    /// against single-entry adds). Every row counts byte for byte, except: descriptions count
    /// by their text, not their number (threads number them in the order they meet them), and
    /// the `id2entry` values of the attribute types named in `per_run` (entryUUID, timestamps,
    /// entryCSN: they differ per run) and the contextCSN values are left out; `id2value` counts
    /// per value, not per block (by entry, description text, value key tail and row value),
    /// summed whatever their order (which follows the description numbers).
    pub fn database_digests(&self, per_run: &[&str]) -> Result<Vec<DatabaseDigest>, StoreError> {
        use xxhash_rust::xxh3::Xxh3;
        let read = self.read()?;
        let descriptions = read.descriptions().clone();
        let per_run: Vec<AttrId> = per_run
            .iter()
            .filter_map(|name| self.inner.schema().attribute(name))
            .collect();
        let mut digests = Vec::new();
        for name in self.database_names() {
            let mut digest = Xxh3::new();
            let mut rows = 0u64;
            let mut description_texts: Vec<Vec<u8>> = Vec::new();
            let mut value_rows_sum = 0u64;
            let mut problem = None;
            let add = |digest: &mut Xxh3, bytes: &[u8]| {
                digest.update(&(bytes.len() as u64).to_le_bytes());
                digest.update(bytes);
            };
            read.for_each_row(&name, &mut |key, value| {
                rows += 1;
                if name == layout::DB_META && key.starts_with(layout::META_DESCRIPTION_PREFIX) {
                    description_texts.push(value.to_vec());
                    return;
                }
                if name == layout::DB_ID2VALUE {
                    let Some(info) = key.get(4..8).and_then(|number| {
                        descriptions.get(u32::from_be_bytes(number.try_into().ok()?))
                    }) else {
                        problem = Some(corrupt("id2value row of an unknown description"));
                        return;
                    };
                    // Per value, whatever the blocks: a load and point writes cut them apart
                    // differently.
                    let mut values = layout::BlockValues::new(value);
                    rows -= 1;
                    while let Ok(Some((tail, row_value))) = values.next_value() {
                        rows += 1;
                        let mut row = Xxh3::new();
                        add(&mut row, &key[..4]);
                        add(&mut row, info.text.as_bytes());
                        add(&mut row, tail);
                        add(&mut row, row_value);
                        value_rows_sum = value_rows_sum.wrapping_add(row.digest());
                    }
                    if values.next_value().is_err() {
                        problem = Some(corrupt("malformed id2value block"));
                    }
                    return;
                }
                add(&mut digest, key);
                if name == layout::DB_META && crate::context_csn::is_context_csn_key(key) {
                    // The contextCSN is a CSN: it differs per run, like entryCSN.
                    return;
                }
                if name != layout::DB_ID2ENTRY {
                    add(&mut digest, value);
                    return;
                }
                let entry = match EncodedEntry::parse(value) {
                    Ok(entry) => entry,
                    Err(error) => {
                        problem = Some(corrupt(format!("entry {key:02x?}: {error}")));
                        return;
                    }
                };
                for attribute in entry.attributes() {
                    let Some(info) = descriptions.get(attribute.description_number) else {
                        problem = Some(corrupt("unknown description number"));
                        return;
                    };
                    if per_run.contains(&info.attr) {
                        continue;
                    }
                    add(&mut digest, info.text.as_bytes());
                    if attribute.out_of_line {
                        add(&mut digest, &(attribute.value_count as u64).to_le_bytes());
                    }
                    for (original, normalized) in attribute.values() {
                        add(&mut digest, original);
                        add(&mut digest, &normalized.to_cow());
                    }
                }
            })?;
            if let Some(problem) = problem {
                return Err(problem.into());
            }
            description_texts.sort();
            for text in &description_texts {
                add(&mut digest, text);
            }
            digest.update(&value_rows_sum.to_le_bytes());
            digests.push(DatabaseDigest {
                name,
                rows,
                digest: digest.digest(),
            });
        }
        Ok(digests)
    }
}
