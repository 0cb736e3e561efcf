//! The DN tree side of the sequencer: duplicate detection, parents before children (a child that
//! arrives before its parent is held back until the parent is placed), `dn2id` pairs, and the
//! `id2node` rows with subtree sizes and child counts computed at the end.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use lmdir_schema::DN_RDN_COUNT_MAX;
use xxhash_rust::xxh3::xxh3_64;

use crate::prepare::{PreparedEntry, RecordError};
use crate::runs::{PostingRun, RunError, WordHashMap};

/// Sentinel in `parents` for IDs that are not (yet) in the tree.
const NOT_PLACED: u32 = u32::MAX;

struct DnSlot {
    id: u32,
    line: u64,
    placed: bool,
    /// Where the entry's normalized DN is in `DnSlots::names`.
    name: NameRange,
}

/// A normalized DN's place in the name arena.
#[derive(Clone, Copy)]
struct NameRange {
    start: usize,
    length: usize,
}

/// Which slot of a hash: the first one, or one of the (rare) colliding ones after it.
#[derive(Clone, Copy)]
enum SlotRef {
    First(u64),
    Collided(u64, usize),
}

impl SlotRef {
    fn hash(self) -> u64 {
        match self {
            SlotRef::First(hash) | SlotRef::Collided(hash, _) => hash,
        }
    }
}

/// Every arrived DN, found by its 64-bit hash and confirmed by its normalized bytes: two DNs
/// whose hashes collide are still two entries (the hash is the fast path, never the identity).
struct DnSlots {
    hash: fn(&[u8]) -> u64,
    first: WordHashMap<u64, DnSlot>,
    collided: WordHashMap<u64, Vec<DnSlot>>,
    /// The normalized DNs back to back (one allocation, not one per entry).
    names: Vec<u8>,
}

impl DnSlots {
    fn new(hash: fn(&[u8]) -> u64) -> Self {
        DnSlots {
            hash,
            first: WordHashMap::default(),
            collided: WordHashMap::default(),
            names: Vec::new(),
        }
    }

    /// About what the slots hold: the names, and the tables at their capacity (a slot is the
    /// key, the value and a control byte; colliding hashes are too rare to count their lists).
    fn held_bytes(&self) -> usize {
        let slot_bytes = size_of::<u64>() + size_of::<DnSlot>() + 1;
        let collided_slot_bytes = size_of::<u64>() + size_of::<Vec<DnSlot>>() + 1;
        self.names.capacity()
            + self.first.capacity() * slot_bytes
            + self.collided.capacity() * collided_slot_bytes
    }

    fn name(&self, range: NameRange) -> &[u8] {
        &self.names[range.start..range.start + range.length]
    }

    fn find(&self, hash: u64, dn: &[u8]) -> Option<SlotRef> {
        let first = self.first.get(&hash)?;
        if self.name(first.name) == dn {
            return Some(SlotRef::First(hash));
        }
        let others = self.collided.get(&hash)?;
        let index = others.iter().position(|slot| self.name(slot.name) == dn)?;
        Some(SlotRef::Collided(hash, index))
    }

    fn get(&self, at: SlotRef) -> &DnSlot {
        match at {
            SlotRef::First(hash) => &self.first[&hash],
            SlotRef::Collided(hash, index) => &self.collided[&hash][index],
        }
    }

    fn get_mut(&mut self, at: SlotRef) -> &mut DnSlot {
        match at {
            SlotRef::First(hash) => self.first.get_mut(&hash).expect("found before"),
            SlotRef::Collided(hash, index) => {
                &mut self.collided.get_mut(&hash).expect("found before")[index]
            }
        }
    }

    /// Adds a DN not present yet.
    fn insert(&mut self, hash: u64, dn: &[u8], id: u32, line: u64) -> SlotRef {
        let name = NameRange {
            start: self.names.len(),
            length: dn.len(),
        };
        self.names.extend_from_slice(dn);
        let slot = DnSlot {
            id,
            line,
            placed: false,
            name,
        };
        if let std::collections::hash_map::Entry::Vacant(vacant) = self.first.entry(hash) {
            vacant.insert(slot);
            return SlotRef::First(hash);
        }
        let others = self.collided.entry(hash).or_default();
        others.push(slot);
        SlotRef::Collided(hash, others.len() - 1)
    }
}

/// An entry waiting for its parent.
struct PendingNode {
    id: u32,
    line: u64,
    dn: String,
    slot: SlotRef,
    normalized_parent: String,
    rdn_original: String,
    rdn_normalized: String,
}

impl PendingNode {
    /// What a node waiting in `pending` holds.
    fn held_bytes(&self) -> usize {
        size_of::<PendingNode>()
            + self.dn.capacity()
            + self.normalized_parent.capacity()
            + self.rdn_original.capacity()
            + self.rdn_normalized.capacity()
    }
}

/// Where an entry ended up.
pub enum Arrival {
    Placed,
    /// Its parent has not been placed yet; it will be when the parent arrives.
    Waiting,
}

pub struct TreeBuilder {
    slots: DnSlots,
    /// Entries waiting for their parent, by the parent's DN hash (each node keeps its parent's
    /// DN, which is compared when a DN of that hash is placed).
    pending: WordHashMap<u64, Vec<PendingNode>>,
    pending_count: usize,
    /// What the nodes in `pending` hold (`PendingNode::held_bytes`).
    pending_bytes: usize,
    /// Parent ID per entry ID (index = ID), NOT_PLACED for holes.
    parents: Vec<u32>,
    depths: Vec<u16>,
    dn2id: PostingRun,
    nodes: lz4_flex::frame::FrameEncoder<BufWriter<File>>,
    nodes_file: tempfile::NamedTempFile,
    nodes_in_id_order: bool,
    last_node_id: u32,
    node_count: u64,
    scratch: Vec<u8>,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |error| RunError::Io {
        path: path.to_path_buf(),
        error,
    }
}

impl TreeBuilder {
    pub fn new(budget_bytes: usize, spill_directory: &Path) -> Result<Self, RunError> {
        Self::with_hash(budget_bytes, spill_directory, xxh3_64)
    }

    /// A builder finding DNs by `hash` (tests force collisions with a weak one).
    fn with_hash(
        budget_bytes: usize,
        spill_directory: &Path,
        hash: fn(&[u8]) -> u64,
    ) -> Result<Self, RunError> {
        let nodes_file = tempfile::Builder::new()
            .prefix("lmdir-load-nodes-")
            .tempfile_in(spill_directory)
            .map_err(io_error(spill_directory))?;
        let handle = nodes_file
            .as_file()
            .try_clone()
            .map_err(io_error(nodes_file.path()))?;
        Ok(TreeBuilder {
            slots: DnSlots::new(hash),
            pending: WordHashMap::default(),
            pending_count: 0,
            pending_bytes: 0,
            parents: vec![NOT_PLACED],
            depths: vec![0],
            dn2id: PostingRun::new(budget_bytes, spill_directory),
            nodes: lz4_flex::frame::FrameEncoder::new(BufWriter::with_capacity(256 * 1024, handle)),
            nodes_file,
            nodes_in_id_order: true,
            last_node_id: 0,
            node_count: 0,
            scratch: Vec::with_capacity(256),
        })
    }

    /// Registers an arriving entry: a duplicate DN is an error naming both lines.
    pub fn arrive(&mut self, entry: &PreparedEntry) -> Result<Arrival, TreeError> {
        let dn = entry.normalized_dn.as_bytes();
        let hash = (self.slots.hash)(dn);
        if let Some(existing) = self.slots.find(hash, dn) {
            return Err(TreeError::Record(RecordError {
                line: entry.line,
                dn: Some(entry.dn.clone()),
                message: format!(
                    "duplicate entry: the same DN is already at line {}",
                    self.slots.get(existing).line
                ),
            }));
        }
        let slot = self.slots.insert(hash, dn, entry.id, entry.line);
        let node = PendingNode {
            id: entry.id,
            line: entry.line,
            dn: entry.dn.clone(),
            slot,
            normalized_parent: entry.normalized_parent.clone(),
            rdn_original: entry.rdn_original.clone(),
            rdn_normalized: entry.rdn_normalized.clone(),
        };
        if entry.normalized_parent.is_empty() {
            self.place(node, 0)?;
            return Ok(Arrival::Placed);
        }
        let parent_dn = entry.normalized_parent.as_bytes();
        let parent_hash = (self.slots.hash)(parent_dn);
        let parent = self
            .slots
            .find(parent_hash, parent_dn)
            .map(|at| self.slots.get(at));
        match parent {
            Some(parent) if parent.placed => {
                let parent_id = parent.id;
                self.place(node, parent_id)?;
                Ok(Arrival::Placed)
            }
            _ => {
                self.pending_bytes += node.held_bytes();
                self.pending.entry(parent_hash).or_default().push(node);
                self.pending_count += 1;
                Ok(Arrival::Waiting)
            }
        }
    }

    /// Places a node and, transitively, every node that was waiting for it.
    fn place(&mut self, first: PendingNode, first_parent: u32) -> Result<(), TreeError> {
        let mut stack = vec![(first, first_parent)];
        while let Some((node, parent)) = stack.pop() {
            let depth = if parent == 0 {
                1
            } else {
                self.depths[parent as usize] + 1
            };
            if usize::from(depth) > DN_RDN_COUNT_MAX {
                return Err(TreeError::Record(RecordError {
                    line: node.line,
                    dn: Some(node.dn),
                    message: format!("DN deeper than {DN_RDN_COUNT_MAX} RDNs"),
                }));
            }
            let index = node.id as usize;
            if self.parents.len() <= index {
                self.parents.resize(index + 1, NOT_PLACED);
                self.depths.resize(index + 1, 0);
            }
            self.parents[index] = parent;
            self.depths[index] = depth;
            lmdir_store::layout::encode_dn2id_key(
                parent,
                node.rdn_normalized.as_bytes(),
                &mut self.scratch,
            );
            self.dn2id
                .push(&self.scratch, node.id)
                .map_err(TreeError::Run)?;
            self.write_node(&node, parent).map_err(TreeError::Run)?;
            self.slots.get_mut(node.slot).placed = true;
            for child in self.take_children(node.slot) {
                self.pending_count -= 1;
                self.pending_bytes -= child.held_bytes();
                stack.push((child, node.id));
            }
        }
        Ok(())
    }

    /// The pending nodes whose parent is the DN of `slot` (not those of another DN that only
    /// shares its hash: they stay pending).
    fn take_children(&mut self, slot: SlotRef) -> Vec<PendingNode> {
        let hash = slot.hash();
        let dn = self.slots.name(self.slots.get(slot).name);
        let Some(waiting) = self.pending.get_mut(&hash) else {
            return Vec::new();
        };
        let (children, others): (Vec<_>, Vec<_>) = std::mem::take(waiting)
            .into_iter()
            .partition(|node| node.normalized_parent.as_bytes() == dn);
        if others.is_empty() {
            self.pending.remove(&hash);
        } else {
            *waiting = others;
        }
        children
    }

    fn write_node(&mut self, node: &PendingNode, parent: u32) -> Result<(), RunError> {
        if node.id <= self.last_node_id {
            self.nodes_in_id_order = false;
        }
        self.last_node_id = self.last_node_id.max(node.id);
        self.node_count += 1;
        let mut record =
            Vec::with_capacity(16 + node.rdn_original.len() + node.rdn_normalized.len());
        record.extend_from_slice(&node.id.to_be_bytes());
        record.extend_from_slice(&parent.to_be_bytes());
        record.extend_from_slice(&(node.rdn_original.len() as u32).to_be_bytes());
        record.extend_from_slice(node.rdn_original.as_bytes());
        record.extend_from_slice(&(node.rdn_normalized.len() as u32).to_be_bytes());
        record.extend_from_slice(node.rdn_normalized.as_bytes());
        let path = self.nodes_file.path().to_path_buf();
        self.nodes.write_all(&record).map_err(io_error(&path))
    }

    /// About what the builder holds in memory besides its dn2id run (which has a budget of
    /// its own): the DN slots with their names, a parent and a depth per ID, and the nodes
    /// still waiting for their parent. It grows with the entries, so the load charges it to
    /// the workers' runs (`SharedCharge`).
    pub fn held_bytes(&self) -> usize {
        self.slots.held_bytes()
            + self.parents.capacity() * size_of::<u32>()
            + self.depths.capacity() * size_of::<u16>()
            + self.pending_bytes
    }

    #[cfg(test)]
    pub fn pending_count(&self) -> usize {
        self.pending_count
    }

    /// Entries whose parent never arrived, in line order: (ID, error).
    pub fn orphans(&self) -> Vec<(u32, RecordError)> {
        let mut orphans: Vec<(u32, RecordError)> = self
            .pending
            .values()
            .flatten()
            .map(|node| {
                (
                    node.id,
                    RecordError {
                        line: node.line,
                        dn: Some(node.dn.clone()),
                        message: format!(
                            "parent entry '{}' does not exist in the input",
                            node.normalized_parent
                        ),
                    },
                )
            })
            .collect();
        orphans.sort_by_key(|(_, error)| error.line);
        orphans
    }

    /// Finishes the tree: the dn2id run and a reader of `id2node` rows in ID order with subtree
    /// sizes and child counts filled in.
    pub fn finish(self) -> Result<(crate::runs::FinishedRun, NodeRows), RunError> {
        let TreeBuilder {
            parents,
            depths,
            dn2id,
            nodes,
            nodes_file,
            nodes_in_id_order,
            node_count,
            ..
        } = self;
        let path = nodes_file.path().to_path_buf();
        let mut writer = nodes.finish().map_err(|error| RunError::Io {
            path: path.clone(),
            error: error.into(),
        })?;
        writer.flush().map_err(io_error(&path))?;
        drop(writer);

        // Subtree sizes: children before parents, i.e. deepest first (IDs need not be ordered
        // by depth when the input had children before parents).
        let mut subtree_sizes = vec![0u32; parents.len()];
        let mut child_counts = vec![0u32; parents.len()];
        let depth_max = depths.iter().copied().max().unwrap_or(0) as usize;
        let mut by_depth: Vec<Vec<u32>> = vec![Vec::new(); depth_max + 1];
        for (id, parent) in parents.iter().enumerate().skip(1) {
            if *parent != NOT_PLACED {
                by_depth[depths[id] as usize].push(id as u32);
                subtree_sizes[id] = 1;
            }
        }
        for level in by_depth.iter().rev() {
            for id in level {
                let parent = parents[*id as usize];
                if parent != 0 {
                    subtree_sizes[parent as usize] += subtree_sizes[*id as usize];
                    child_counts[parent as usize] += 1;
                }
            }
        }
        let file = File::open(&path).map_err(io_error(&path))?;
        let mut reader = NodeFileReader {
            decoder: lz4_flex::frame::FrameDecoder::new(BufReader::with_capacity(256 * 1024, file)),
            path,
        };
        let sorted = if nodes_in_id_order {
            None
        } else {
            let mut all = Vec::with_capacity(node_count as usize);
            while let Some(record) = reader.next_record()? {
                all.push(record);
            }
            all.sort_unstable_by_key(|record| record.id);
            Some(all.into_iter())
        };
        Ok((
            dn2id.finish()?,
            NodeRows {
                reader,
                sorted,
                subtree_sizes,
                child_counts,
                _file: nodes_file,
            },
        ))
    }
}

pub enum TreeError {
    Record(RecordError),
    Run(RunError),
}

pub struct NodeRecord {
    pub id: u32,
    pub parent: u32,
    pub rdn_original: Vec<u8>,
    pub rdn_normalized: Vec<u8>,
}

struct NodeFileReader {
    decoder: lz4_flex::frame::FrameDecoder<BufReader<File>>,
    path: PathBuf,
}

impl NodeFileReader {
    fn read_u32(&mut self, at_start: bool) -> Result<Option<u32>, RunError> {
        let mut bytes = [0u8; 4];
        let mut filled = 0;
        while filled < 4 {
            match self.decoder.read(&mut bytes[filled..]) {
                Ok(0) if filled == 0 && at_start => return Ok(None),
                Ok(0) => {
                    return Err(RunError::Corrupt {
                        path: self.path.clone(),
                        what: "truncated node record",
                    })
                }
                Ok(count) => filled += count,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    return Err(RunError::Io {
                        path: self.path.clone(),
                        error,
                    })
                }
            }
        }
        Ok(Some(u32::from_be_bytes(bytes)))
    }

    fn read_bytes(&mut self) -> Result<Vec<u8>, RunError> {
        let length = self.read_u32(false)?.expect("not at start") as usize;
        if length > lmdir_schema::DN_SIZE_BYTES_MAX {
            return Err(RunError::Corrupt {
                path: self.path.clone(),
                what: "RDN length over limit",
            });
        }
        let mut bytes = vec![0u8; length];
        self.decoder
            .read_exact(&mut bytes)
            .map_err(io_error(&self.path))?;
        Ok(bytes)
    }

    fn next_record(&mut self) -> Result<Option<NodeRecord>, RunError> {
        let Some(id) = self.read_u32(true)? else {
            return Ok(None);
        };
        let parent = self.read_u32(false)?.expect("not at start");
        let rdn_original = self.read_bytes()?;
        let rdn_normalized = self.read_bytes()?;
        Ok(Some(NodeRecord {
            id,
            parent,
            rdn_original,
            rdn_normalized,
        }))
    }
}

/// `id2node` rows in ID order.
pub struct NodeRows {
    reader: NodeFileReader,
    sorted: Option<std::vec::IntoIter<NodeRecord>>,
    subtree_sizes: Vec<u32>,
    child_counts: Vec<u32>,
    _file: tempfile::NamedTempFile,
}

impl NodeRows {
    /// The next row with its subtree size and child count.
    pub fn next_row(&mut self) -> Result<Option<(NodeRecord, u32, u32)>, RunError> {
        let record = match &mut self.sorted {
            Some(sorted) => sorted.next(),
            None => self.reader.next_record()?,
        };
        Ok(record.map(|record| {
            let index = record.id as usize;
            let size = self.subtree_sizes[index];
            let children = self.child_counts[index];
            (record, size, children)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u32, normalized_dn: &str) -> PreparedEntry {
        let parent = lmdir_schema::normalized_dn_parent(normalized_dn).unwrap_or("");
        let parent = if normalized_dn == "dc=example,dc=com" {
            ""
        } else {
            parent
        };
        PreparedEntry {
            id,
            line: u64::from(id) * 10,
            dn: normalized_dn.to_string(),
            normalized_dn: normalized_dn.to_string(),
            normalized_parent: parent.to_string(),
            rdn_original: normalized_dn.split(',').next().unwrap().to_string(),
            rdn_normalized: normalized_dn.split(',').next().unwrap().to_string(),
            encoded: 0..0,
            value_rows: 0..0,
            group_members: Vec::new(),
            group_members_unfound_later: Vec::new(),
            repeated_values: 0,
            csn: None,
            more_csns: Vec::new(),
        }
    }

    fn rows(tree: TreeBuilder) -> Vec<(u32, u32, u32, u32)> {
        let (_, mut rows) = tree.finish().unwrap();
        let mut result = Vec::new();
        while let Some((record, size, children)) = rows.next_row().unwrap() {
            result.push((record.id, record.parent, size, children));
        }
        result
    }

    #[test]
    fn children_before_parents_wait_and_sizes_add_up() {
        let directory = tempfile::tempdir().unwrap();
        let mut tree = TreeBuilder::new(1 << 20, directory.path()).unwrap();
        let entries = [
            entry(1, "dc=example,dc=com"),
            entry(2, "uid=a,ou=people,dc=example,dc=com"),
            entry(3, "cn=x,uid=a,ou=people,dc=example,dc=com"),
            entry(4, "ou=people,dc=example,dc=com"),
            entry(5, "ou=groups,dc=example,dc=com"),
        ];
        let mut waiting = 0;
        for entry in &entries {
            if let Ok(Arrival::Waiting) = tree.arrive(entry) {
                waiting += 1;
            }
        }
        assert_eq!(waiting, 2);
        assert_eq!(tree.pending_count(), 0);
        assert_eq!(
            rows(tree),
            vec![
                (1, 0, 5, 2),
                (2, 4, 2, 1),
                (3, 2, 1, 0),
                (4, 1, 3, 1),
                (5, 1, 1, 0)
            ]
        );
    }

    /// Every DN has the same hash: identity must come from the DN bytes alone.
    fn colliding_hash(_: &[u8]) -> u64 {
        7
    }

    #[test]
    fn colliding_hashes_still_tell_dns_and_parents_apart() {
        let directory = tempfile::tempdir().unwrap();
        let mut tree = TreeBuilder::with_hash(1 << 20, directory.path(), colliding_hash).unwrap();
        let entries = [
            entry(1, "dc=example,dc=com"),
            entry(2, "uid=a,ou=people,dc=example,dc=com"),
            entry(3, "cn=x,uid=a,ou=people,dc=example,dc=com"),
            entry(4, "ou=people,dc=example,dc=com"),
            entry(5, "ou=groups,dc=example,dc=com"),
            entry(6, "cn=g,ou=groups,dc=example,dc=com"),
        ];
        for entry in &entries {
            assert!(tree.arrive(entry).is_ok(), "{} refused", entry.dn);
        }
        let Err(TreeError::Record(error)) =
            tree.arrive(&entry(7, "uid=a,ou=people,dc=example,dc=com"))
        else {
            panic!("a true duplicate must still fail");
        };
        assert!(error.message.contains("line 20"), "{}", error.message);
        assert!(matches!(
            tree.arrive(&entry(8, "uid=b,ou=missing,dc=example,dc=com")),
            Ok(Arrival::Waiting)
        ));
        assert_eq!(tree.orphans().len(), 1);
        assert_eq!(tree.orphans()[0].0, 8);
        assert_eq!(
            rows(tree),
            vec![
                (1, 0, 6, 2),
                (2, 4, 2, 1),
                (3, 2, 1, 0),
                (4, 1, 3, 1),
                (5, 1, 2, 1),
                (6, 5, 1, 0)
            ]
        );
    }

    #[test]
    fn duplicate_names_both_lines_and_orphans_are_reported() {
        let directory = tempfile::tempdir().unwrap();
        let mut tree = TreeBuilder::new(1 << 20, directory.path()).unwrap();
        assert!(tree.arrive(&entry(1, "dc=example,dc=com")).is_ok());
        let Err(TreeError::Record(error)) = tree.arrive(&entry(2, "dc=example,dc=com")) else {
            panic!("duplicate must fail");
        };
        assert_eq!(error.line, 20);
        assert!(error.message.contains("line 10"), "{}", error.message);
        assert!(matches!(
            tree.arrive(&entry(3, "uid=b,ou=missing,dc=example,dc=com")),
            Ok(Arrival::Waiting)
        ));
        let orphans = tree.orphans();
        assert_eq!(orphans.len(), 1);
        assert_eq!(orphans[0].0, 3);
        assert!(orphans[0]
            .1
            .message
            .contains("ou=missing,dc=example,dc=com"));
    }
}
