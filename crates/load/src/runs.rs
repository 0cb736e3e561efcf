//! Sorted runs of (key → ascending entry IDs) with a memory budget, compressed spills and a k-way merge.
//!
//! A loader thread owns one [`PostingRun`]: it appends `(key, id)` pairs (keys already carry their target
//! DB number as a prefix). Short keys are packed with their ID into one `u128` in a flat buffer that
//! is sorted and grouped per key whenever it fills (a hash map of millions of keys spent most of its
//! time in cache misses), so 50M pairs collapse into a few million posting lists in sorted runs.
//! When the run's estimated size passes its budget everything in memory is merged and spilled to a
//! temp file as an lz4 frame of `varint key length, key, varint id count, delta-varint ids`. At the end
//! [`MergedRuns`] merges every spilled run plus the in-memory remainders in key order, merging each key's
//! ID lists (runs of different threads interleave IDs, so lists are merged, not concatenated).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes a new key costs in the in-memory map beyond its own bytes (box, vec header, table slot, slack).
const KEY_OVERHEAD_BYTES: usize = 88;
/// Keys longer than this are a bug in key generation, not data: refuse them clearly.
pub const KEY_BYTES_MAX: usize = 4096;
/// Buffered I/O size for spill files.
const SPILL_BUFFER_BYTES: usize = 256 * 1024;

/// A small multiplicative hasher: run keys are mostly 8-byte xxh3 hashes already, so SipHash's DoS
/// resistance buys nothing and costs a lot in the hottest loop of the loader.
#[derive(Default, Clone, Copy)]
pub struct WordHasher {
    state: u64,
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // Final avalanche so the table's low bits depend on every input byte.
        let mut value = self.state;
        value ^= value >> 33;
        value = value.wrapping_mul(0xff51_afd7_ed55_8ccd);
        value ^= value >> 33;
        value
    }

    fn write(&mut self, bytes: &[u8]) {
        const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().expect("chunks_exact gives 8 bytes"));
            self.state = (self.state.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
        }
        let mut tail = 0u64;
        for (shift, byte) in chunks.remainder().iter().enumerate() {
            tail |= u64::from(*byte) << (shift * 8);
        }
        self.state =
            (self.state.rotate_left(5) ^ tail ^ (bytes.len() as u64)).wrapping_mul(MULTIPLIER);
    }
}

pub type WordHashMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// Keys up to this long live inside the map slot: index keys are 2 + 1 + 8 = 11 bytes, so the
/// common case needs no heap allocation per distinct key.
const INLINE_KEY_BYTES_MAX: usize = 22;

/// A run key: inline when short, boxed otherwise. Hashes and compares as its byte slice, so the
/// map can be probed with a plain `&[u8]`.
#[derive(Clone)]
pub enum RunKey {
    Inline {
        length: u8,
        bytes: [u8; INLINE_KEY_BYTES_MAX],
    },
    Heap(Box<[u8]>),
}

impl RunKey {
    fn new(key: &[u8]) -> RunKey {
        if key.len() <= INLINE_KEY_BYTES_MAX {
            let mut bytes = [0u8; INLINE_KEY_BYTES_MAX];
            bytes[..key.len()].copy_from_slice(key);
            RunKey::Inline {
                length: key.len() as u8,
                bytes,
            }
        } else {
            RunKey::Heap(key.into())
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            RunKey::Inline { length, bytes } => &bytes[..*length as usize],
            RunKey::Heap(bytes) => bytes,
        }
    }
}

impl std::borrow::Borrow<[u8]> for RunKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::hash::Hash for RunKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must equal `[u8]`'s hash for `Borrow` lookups.
        self.as_slice().hash(state);
    }
}

impl PartialEq for RunKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for RunKey {}

/// Errors of the run machinery; they name the spill file.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("spill file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("spill file {path}: corrupt run ({what})")]
    Corrupt { path: PathBuf, what: &'static str },
    #[error("index key of {length} bytes exceeds the {KEY_BYTES_MAX}-byte limit")]
    KeyTooLong { length: usize },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One spilled run on disk; the file is deleted when this is dropped.
pub struct SpilledRun {
    file: tempfile::NamedTempFile,
    pub key_count: u64,
}

impl SpilledRun {
    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

/// Keys up to this long are packed with their ID into one `u128` (key bytes zero-padded, then
/// the key length, then the ID, all big-endian), so a push is an append to a flat buffer and
/// grouping is a sort of integers: index keys are 2 + 1 + 8 = 11 bytes. The packed order is
/// the keys' byte order (padding plus the length byte order a key before its extensions),
/// then ID order.
pub const PACKED_KEY_BYTES_MAX: usize = 11;
const PACKED_LENGTH_BYTE: usize = 11;
/// Buffer bytes per packed pair.
const PACKED_PAIR_BYTES: usize = 16;
/// Pairs buffered before they are sorted and grouped into a sorted in-memory run (32 MiB): large
/// enough that hot keys collapse well, small enough to sort while the buffer is warm.
const PAIRS_PER_SORT_MAX: usize = 1 << 21;
/// Bytes a grouped key costs in a sorted run beyond its key bytes and IDs (two offsets).
const SORTED_KEY_OVERHEAD_BYTES: usize = 16;

/// Packs the key `prefix ‖ key` (at most `PACKED_KEY_BYTES_MAX` bytes together) with `id`.
fn pack(prefix: &[u8], key: &[u8], id: u32) -> u128 {
    let length = prefix.len() + key.len();
    debug_assert!(length <= PACKED_KEY_BYTES_MAX);
    let mut bytes = [0u8; 16];
    bytes[..prefix.len()].copy_from_slice(prefix);
    // A slot and a hashed key (kind + 8 bytes) are nearly every key: a fixed-size copy
    // instead of a call to memcpy.
    match <&[u8; 9]>::try_from(key) {
        Ok(hashed) if prefix.len() == 2 => bytes[2..11].copy_from_slice(hashed),
        _ => bytes[prefix.len()..length].copy_from_slice(key),
    }
    bytes[PACKED_LENGTH_BYTE] = length as u8;
    bytes[12..].copy_from_slice(&id.to_be_bytes());
    u128::from_be_bytes(bytes)
}

/// Below this many pairs a comparison sort is cheaper than another radix pass.
const RADIX_SORT_PAIRS_MIN: usize = 256;

/// Sorts packed pairs ascending: a most-significant-digit radix sort. Each pass counts one
/// byte of a bucket and, unless every pair has the same byte there (the slot's high byte, a
/// hot key's hash), moves the pairs into per-byte buckets (stable, through `scratch`); buckets
/// of fewer than `RADIX_SORT_PAIRS_MIN` pairs are finished by a comparison sort. Index keys
/// are a slot, a kind and a hash, so after three passes the buckets are small: ~150
/// instructions per pair where `sort_unstable` spent ~280 on 2M pairs (the largest cost per
/// entry on the standard profile; an LSD radix sort, one pass per varying byte, also spent
/// ~280). Pairs are pushed in ascending ID order by each worker, so when the IDs are already
/// ascending a bucket whose key bytes are all equal is done: the stable passes kept its IDs
/// in order.
fn sort_packed(pairs: &mut Vec<u128>, scratch: &mut Vec<u128>) {
    if pairs.len() < RADIX_SORT_PAIRS_MIN {
        pairs.sort_unstable();
        return;
    }
    let ids_ascending = pairs.windows(2).all(|two| two[0] as u32 <= two[1] as u32);
    scratch.clear();
    scratch.reserve_exact(pairs.capacity());
    scratch.resize(pairs.len(), 0);
    radix_sort_from(pairs, scratch, 15, ids_ascending);
}

/// Sorts `pairs` whose bytes above `digit` (counted from the least significant byte) are all
/// equal; `scratch` is as long as `pairs`.
fn radix_sort_from(
    pairs: &mut [u128],
    scratch: &mut [u128],
    mut digit: usize,
    ids_ascending: bool,
) {
    loop {
        if pairs.len() < RADIX_SORT_PAIRS_MIN {
            pairs.sort_unstable();
            return;
        }
        if ids_ascending && digit < 4 {
            return; // equal keys, IDs in pushed (ascending) order
        }
        let (in_high_word, shift) = (digit >= 8, (digit % 8) * 8);
        let byte_of = |pair: u128| {
            let word = if in_high_word {
                (pair >> 64) as u64
            } else {
                pair as u64
            };
            usize::from((word >> shift) as u8)
        };
        let mut counts = [0usize; 256];
        for pair in pairs.iter() {
            counts[byte_of(*pair)] += 1;
        }
        if counts.contains(&pairs.len()) {
            // Every pair has the same byte here: on to the next without moving anything.
            if digit == 0 {
                return;
            }
            digit -= 1;
            continue;
        }
        let mut offsets = [0usize; 256];
        let mut total = 0;
        for (offset, count) in offsets.iter_mut().zip(&counts) {
            *offset = total;
            total += count;
        }
        for pair in pairs.iter() {
            let offset = &mut offsets[byte_of(*pair)];
            scratch[*offset] = *pair;
            *offset += 1;
        }
        pairs.copy_from_slice(scratch);
        if digit == 0 {
            return;
        }
        let mut start = 0;
        for count in counts {
            if count > 1 {
                let range = start..start + count;
                radix_sort_from(
                    &mut pairs[range.clone()],
                    &mut scratch[range],
                    digit - 1,
                    ids_ascending,
                );
            }
            start += count;
        }
        return;
    }
}

/// Keys sorted ascending, each with its ascending distinct IDs, in three flat arrays.
#[derive(Default)]
pub struct SortedRun {
    key_bytes: Vec<u8>,
    /// Per key: where its bytes start in `key_bytes` and its IDs start in `ids`.
    starts: Vec<(usize, usize)>,
    ids: Vec<u32>,
}

impl SortedRun {
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The `index`-th key and its IDs.
    pub fn get(&self, index: usize) -> (&[u8], &[u32]) {
        let (key_start, ids_start) = self.starts[index];
        let (key_end, ids_end) = self
            .starts
            .get(index + 1)
            .copied()
            .unwrap_or((self.key_bytes.len(), self.ids.len()));
        (
            &self.key_bytes[key_start..key_end],
            &self.ids[ids_start..ids_end],
        )
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u32])> {
        (0..self.len()).map(|index| self.get(index))
    }

    /// Appends a key greater than every key so far, with its first ID.
    fn push_key(&mut self, key: &[u8], id: u32) {
        debug_assert!(self.last_key().is_none_or(|last| last < key));
        self.starts.push((self.key_bytes.len(), self.ids.len()));
        self.key_bytes.extend_from_slice(key);
        self.ids.push(id);
    }

    /// The index of the first key at or above `key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = (low + high) / 2;
            if self.get(middle).0 < key {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
    }

    fn last_key(&self) -> Option<&[u8]> {
        self.starts
            .last()
            .map(|(key_start, _)| &self.key_bytes[*key_start..])
    }

    fn estimated_bytes(&self) -> usize {
        self.key_bytes.len() + self.ids.len() * 4 + self.starts.len() * SORTED_KEY_OVERHEAD_BYTES
    }
}

/// An in-memory, per-thread run: key → ascending IDs. Short keys are packed pairs in a flat
/// buffer, sorted and grouped into a [`SortedRun`] whenever the buffer fills; longer keys
/// (ordering-index and dn2id keys) are grouped in a hash map.
pub struct PostingRun {
    pairs: Vec<u128>,
    /// The radix sort's second buffer, as large as `pairs` once the first full buffer is
    /// sorted (both together a quarter of the budget at most).
    sort_scratch: Vec<u128>,
    pairs_per_sort: usize,
    sorted: Vec<SortedRun>,
    long_keys: WordHashMap<RunKey, Vec<u32>>,
    estimated_bytes: usize,
    budget_bytes: usize,
    spill_directory: PathBuf,
    spilled: Vec<SpilledRun>,
}

impl PostingRun {
    pub fn new(budget_bytes: usize, spill_directory: &Path) -> Self {
        let budget_bytes = budget_bytes.max(1);
        PostingRun {
            pairs: Vec::new(),
            sort_scratch: Vec::new(),
            // The buffer and the radix sort's scratch (as large) a quarter of the budget at
            // most, so grouped runs have room beside them.
            pairs_per_sort: (budget_bytes / 8 / PACKED_PAIR_BYTES).clamp(1, PAIRS_PER_SORT_MAX),
            sorted: Vec::new(),
            long_keys: WordHashMap::default(),
            estimated_bytes: 0,
            budget_bytes,
            spill_directory: spill_directory.to_path_buf(),
            spilled: Vec::new(),
        }
    }

    /// Adds `id` to `key`'s list. A repeat of an ID for a key (two values giving the same key)
    /// is kept once. IDs may arrive in any order; the merge sorts lists that need it.
    pub fn push(&mut self, key: &[u8], id: u32) -> Result<(), RunError> {
        if key.len() <= PACKED_KEY_BYTES_MAX {
            self.push_packed(pack(&[], key, id))
        } else {
            self.push_long(key, id)?;
            self.spill_if_full()
        }
    }

    /// `push` of the key `prefix ‖ key` without building it first (the loader's index keys:
    /// a slot and a hashed key), the common case packed straight from its parts.
    pub fn push_prefixed(&mut self, prefix: [u8; 2], key: &[u8], id: u32) -> Result<(), RunError> {
        if prefix.len() + key.len() <= PACKED_KEY_BYTES_MAX {
            return self.push_packed(pack(&prefix, key, id));
        }
        let mut whole = Vec::with_capacity(prefix.len() + key.len());
        whole.extend_from_slice(&prefix);
        whole.extend_from_slice(key);
        self.push_long(&whole, id)?;
        self.spill_if_full()
    }

    fn push_packed(&mut self, pair: u128) -> Result<(), RunError> {
        if self.pairs.capacity() == 0 {
            // Reserved whole: growing by doubling copied the buffer and faulted it in twice.
            self.pairs.reserve_exact(self.pairs_per_sort);
        }
        self.pairs.push(pair);
        self.estimated_bytes += PACKED_PAIR_BYTES;
        if self.pairs.len() >= self.pairs_per_sort {
            self.sort_pairs();
        }
        self.spill_if_full()
    }

    fn spill_if_full(&mut self) -> Result<(), RunError> {
        if self.estimated_bytes >= self.budget_bytes {
            self.spill()?;
        }
        Ok(())
    }

    fn push_long(&mut self, key: &[u8], id: u32) -> Result<(), RunError> {
        if let Some(ids) = self.long_keys.get_mut(key) {
            if ids.last() == Some(&id) {
                return Ok(());
            }
            if ids.len() == ids.capacity() {
                self.estimated_bytes += ids.capacity().max(4) * 4;
            }
            ids.push(id);
        } else {
            if key.len() > KEY_BYTES_MAX {
                return Err(RunError::KeyTooLong { length: key.len() });
            }
            let mut ids = Vec::with_capacity(2);
            ids.push(id);
            self.long_keys.insert(RunKey::new(key), ids);
            self.estimated_bytes += KEY_OVERHEAD_BYTES
                + if key.len() > INLINE_KEY_BYTES_MAX {
                    key.len()
                } else {
                    0
                };
        }
        Ok(())
    }

    pub fn estimated_bytes(&self) -> usize {
        self.estimated_bytes
    }

    pub fn spill_count(&self) -> usize {
        self.spilled.len()
    }

    /// Sorts the packed pair buffer and groups it into one more sorted run.
    fn sort_pairs(&mut self) {
        if self.pairs.is_empty() {
            return;
        }
        sort_packed(&mut self.pairs, &mut self.sort_scratch);
        let mut run = SortedRun {
            key_bytes: Vec::with_capacity(self.pairs.len() / 4 * PACKED_KEY_BYTES_MAX),
            starts: Vec::with_capacity(self.pairs.len() / 4),
            ids: Vec::with_capacity(self.pairs.len()),
        };
        let mut previous_key_part = None;
        let mut previous_id = 0u32;
        for pair in &self.pairs {
            let key_part = pair >> 32;
            let id = *pair as u32;
            if previous_key_part == Some(key_part) {
                if id != previous_id {
                    run.ids.push(id);
                }
            } else {
                let bytes = pair.to_be_bytes();
                let length = bytes[PACKED_LENGTH_BYTE] as usize;
                run.push_key(&bytes[..length], id);
                previous_key_part = Some(key_part);
            }
            previous_id = id;
        }
        self.estimated_bytes = self
            .estimated_bytes
            .saturating_sub(self.pairs.len() * PACKED_PAIR_BYTES)
            + run.estimated_bytes();
        self.pairs.clear();
        self.sorted.push(run);
    }

    /// Everything in memory as sorted runs (the pair buffer grouped, the long keys sorted);
    /// the run is empty in memory afterwards.
    fn take_sorted(&mut self) -> Vec<SortedRun> {
        self.sort_pairs();
        self.pairs = Vec::new();
        self.sort_scratch = Vec::new();
        let mut runs = std::mem::take(&mut self.sorted);
        if !self.long_keys.is_empty() {
            let mut entries: Vec<(RunKey, Vec<u32>)> = self.long_keys.drain().collect();
            entries.sort_unstable_by(|left, right| left.0.as_slice().cmp(right.0.as_slice()));
            let mut run = SortedRun::default();
            for (key, mut ids) in entries {
                ids.sort_unstable();
                ids.dedup();
                run.starts.push((run.key_bytes.len(), run.ids.len()));
                run.key_bytes.extend_from_slice(key.as_slice());
                run.ids.extend_from_slice(&ids);
            }
            runs.push(run);
        }
        self.estimated_bytes = 0;
        runs
    }

    /// Sorts everything in memory and writes it as one compressed run file.
    pub fn spill(&mut self) -> Result<(), RunError> {
        let runs = self.take_sorted();
        if runs.is_empty() {
            return Ok(());
        }
        let file = tempfile::Builder::new()
            .prefix("lmdir-load-run-")
            .tempfile_in(&self.spill_directory)
            .map_err(io_error(&self.spill_directory))?;
        let path = file.path().to_path_buf();
        let handle = file.as_file().try_clone().map_err(io_error(&path))?;
        let mut encoder = lz4_flex::frame::FrameEncoder::new(BufWriter::with_capacity(
            SPILL_BUFFER_BYTES,
            handle,
        ));
        let mut scratch = Vec::with_capacity(1024);
        let mut key_count = 0u64;
        let mut merged = MergedRuns::from_sorted(runs);
        let (mut key, mut ids) = (Vec::new(), Vec::new());
        while merged.next_into(&mut key, &mut ids)? {
            scratch.clear();
            encode_record(&mut scratch, &key, &ids);
            encoder.write_all(&scratch).map_err(io_error(&path))?;
            key_count += 1;
        }
        let mut writer = encoder.finish().map_err(|error| RunError::Io {
            path: path.clone(),
            source: error.into(),
        })?;
        writer.flush().map_err(io_error(&path))?;
        self.spilled.push(SpilledRun { file, key_count });
        Ok(())
    }

    /// Finishes the run: its spilled files plus the in-memory remainder as sorted runs (left
    /// separate: combining them here would hold every ID twice at the load's memory peak).
    pub fn finish(mut self) -> Result<FinishedRun, RunError> {
        let runs = self.take_sorted();
        Ok(FinishedRun {
            spilled: std::mem::take(&mut self.spilled),
            memory: runs,
        })
    }
}

/// What a thread hands to the merger.
pub struct FinishedRun {
    pub spilled: Vec<SpilledRun>,
    pub memory: Vec<SortedRun>,
}

fn write_varint(buffer: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buffer.push((value as u8) | 0x80);
        value >>= 7;
    }
    buffer.push(value as u8);
}

fn encode_record(buffer: &mut Vec<u8>, key: &[u8], ids: &[u32]) {
    write_varint(buffer, key.len() as u64);
    buffer.extend_from_slice(key);
    write_varint(buffer, ids.len() as u64);
    let mut previous = 0u32;
    for (position, id) in ids.iter().enumerate() {
        let delta = if position == 0 { *id } else { id - previous };
        write_varint(buffer, u64::from(delta));
        previous = *id;
    }
}

/// Reads one spilled run back record by record.
struct RunReader {
    path: PathBuf,
    decoder: lz4_flex::frame::FrameDecoder<BufReader<File>>,
}

impl RunReader {
    fn open(path: &Path) -> Result<Self, RunError> {
        let path = path.to_path_buf();
        let file = File::open(&path).map_err(io_error(&path))?;
        Ok(RunReader {
            decoder: lz4_flex::frame::FrameDecoder::new(BufReader::with_capacity(
                SPILL_BUFFER_BYTES,
                file,
            )),
            path,
        })
    }

    fn read_varint(&mut self, at_record_start: bool) -> Result<Option<u64>, RunError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let mut byte = [0u8; 1];
            match self.decoder.read(&mut byte) {
                Ok(0) if shift == 0 && at_record_start => return Ok(None),
                Ok(0) => {
                    return Err(RunError::Corrupt {
                        path: self.path.clone(),
                        what: "truncated varint",
                    })
                }
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    return Err(RunError::Io {
                        path: self.path.clone(),
                        source: error,
                    })
                }
            }
            value |= u64::from(byte[0] & 0x7f) << shift;
            if byte[0] & 0x80 == 0 {
                return Ok(Some(value));
            }
        }
        Err(RunError::Corrupt {
            path: self.path.clone(),
            what: "varint too long",
        })
    }

    /// Reads the next record into `key`/`ids`; false at the end of the run.
    fn next_into(&mut self, key: &mut Vec<u8>, ids: &mut Vec<u32>) -> Result<bool, RunError> {
        let Some(key_length) = self.read_varint(true)? else {
            return Ok(false);
        };
        if key_length as usize > KEY_BYTES_MAX {
            return Err(RunError::Corrupt {
                path: self.path.clone(),
                what: "key length over limit",
            });
        }
        key.resize(key_length as usize, 0);
        self.decoder.read_exact(key).map_err(io_error(&self.path))?;
        let count = self.read_varint(false)?.expect("not at record start");
        if count == 0 || count > u64::from(u32::MAX) {
            return Err(RunError::Corrupt {
                path: self.path.clone(),
                what: "bad id count",
            });
        }
        ids.clear();
        let mut previous = 0u64;
        for position in 0..count {
            let delta = self.read_varint(false)?.expect("not at record start");
            let id = if position == 0 {
                delta
            } else {
                previous + delta
            };
            if id > u64::from(u32::MAX) || (position > 0 && delta == 0) {
                return Err(RunError::Corrupt {
                    path: self.path.clone(),
                    what: "bad id delta",
                });
            }
            ids.push(id as u32);
            previous = id;
        }
        Ok(true)
    }
}

enum Source {
    Spilled(Box<RunReader>),
    /// A sorted in-memory run (shared by the parts of a split merge) and the index of its next key.
    Memory(Arc<SortedRun>, usize),
}

struct Head {
    key: Vec<u8>,
    ids: Vec<u32>,
    source: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    // Reversed: BinaryHeap is a max-heap and the merge wants the smallest key first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .key
            .cmp(&self.key)
            .then_with(|| other.source.cmp(&self.source))
    }
}

/// What merging one key costs against one of its IDs (heap, copies and the chunk encoding per
/// key; copies, sort and encoding per ID), measured on the merge thread: it places the cuts of
/// `MergedRuns::split`.
const MERGE_KEY_WEIGHT_IDS: usize = 7;

/// k-way merge of finished runs in key order; each key's IDs come out merged and ascending.
pub struct MergedRuns {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    /// Keys from here on belong to the next part of a split merge (`MergedRuns::split`).
    end: Option<Vec<u8>>,
    /// A split part's first key: its spill readers skip what lies below it at the first
    /// `next_into`, on the thread that merges the part (decoding is the part's work).
    start: Option<Vec<u8>>,
    // Keeps the spill files alive (and deletes them) for the merge's lifetime.
    _spilled: Arc<Vec<SpilledRun>>,
}

impl MergedRuns {
    pub fn new(runs: Vec<FinishedRun>) -> Result<Self, RunError> {
        let mut sources = Vec::new();
        let mut spilled_files = Vec::new();
        for run in runs {
            for spilled in run.spilled {
                sources.push(Source::Spilled(Box::new(RunReader::open(spilled.path())?)));
                spilled_files.push(spilled);
            }
            for memory in run.memory {
                if !memory.is_empty() {
                    sources.push(Source::Memory(Arc::new(memory), 0));
                }
            }
        }
        let mut merged = MergedRuns {
            sources,
            heap: BinaryHeap::new(),
            end: None,
            start: None,
            _spilled: Arc::new(spilled_files),
        };
        for source in 0..merged.sources.len() {
            merged.refill(source, Vec::new(), Vec::new())?;
        }
        Ok(merged)
    }

    /// A merge of in-memory runs only (reading them cannot fail).
    fn from_sorted(runs: Vec<SortedRun>) -> Self {
        let mut merged = MergedRuns {
            sources: runs
                .into_iter()
                .filter(|run| !run.is_empty())
                .map(|run| Source::Memory(Arc::new(run), 0))
                .collect(),
            heap: BinaryHeap::new(),
            end: None,
            start: None,
            _spilled: Arc::new(Vec::new()),
        };
        for source in 0..merged.sources.len() {
            merged
                .refill(source, Vec::new(), Vec::new())
                .expect("in-memory sources do not fail");
        }
        merged
    }

    fn refill(
        &mut self,
        source: usize,
        mut key: Vec<u8>,
        mut ids: Vec<u32>,
    ) -> Result<(), RunError> {
        let more = match &mut self.sources[source] {
            Source::Spilled(reader) => reader.next_into(&mut key, &mut ids)?,
            Source::Memory(run, next) => {
                if *next < run.len() {
                    let (next_key, next_ids) = run.get(*next);
                    *next += 1;
                    key.clear();
                    key.extend_from_slice(next_key);
                    ids.clear();
                    ids.extend_from_slice(next_ids);
                    true
                } else {
                    false
                }
            }
        };
        if more && self.end.as_ref().is_none_or(|end| key < *end) {
            self.heap.push(Head { key, ids, source });
        }
        Ok(())
    }

    /// The merge of `runs` cut into up to `parts` merges over disjoint key ranges, ascending:
    /// one after another they yield exactly what `MergedRuns::new(runs)` yields, and each can
    /// run on its own thread. The cuts balance the merge's work over the in-memory runs (each
    /// key of a run costs a heap step and copies, `MERGE_KEY_WEIGHT_IDS` IDs' worth), taken at
    /// keys of the largest run. In-memory runs are shared; each part opens its own reader of
    /// every spill file and skips the keys below its range. Without in-memory runs there is
    /// no estimate and the merge stays whole.
    pub fn split(runs: Vec<FinishedRun>, parts: usize) -> Result<Vec<MergedRuns>, RunError> {
        let whole = MergedRuns::new(runs)?;
        let memory: Vec<&SortedRun> = whole
            .sources
            .iter()
            .filter_map(|source| match source {
                Source::Memory(run, _) => Some(&**run),
                Source::Spilled(_) => None,
            })
            .collect();
        let weight = |run: &SortedRun, index: usize| {
            let ids_below = run.starts.get(index).map_or(run.ids.len(), |start| start.1);
            index * MERGE_KEY_WEIGHT_IDS + ids_below
        };
        let work_below = |key: &[u8]| -> usize {
            memory
                .iter()
                .map(|run| weight(run, run.lower_bound(key)))
                .sum()
        };
        let total: usize = memory.iter().map(|run| weight(run, run.len())).sum();
        let mut cuts: Vec<Vec<u8>> = Vec::new();
        if let Some(largest) = memory.iter().max_by_key(|run| run.len()) {
            let mut low = 0;
            for part in 1..parts.max(1) {
                let target = total * part / parts;
                // The first key of the largest run with at least `target` work below it.
                let mut high = largest.len();
                while low < high {
                    let middle = (low + high) / 2;
                    if work_below(largest.get(middle).0) < target {
                        low = middle + 1;
                    } else {
                        high = middle;
                    }
                }
                if low < largest.len() && low > 0 {
                    let cut = largest.get(low).0;
                    if cuts.last().is_none_or(|last| last.as_slice() < cut) {
                        cuts.push(cut.to_vec());
                    }
                }
            }
        }
        if cuts.is_empty() {
            return Ok(vec![whole]);
        }
        let mut merges = Vec::with_capacity(cuts.len() + 1);
        let mut start: Option<Vec<u8>> = None;
        for end in cuts.into_iter().map(Some).chain([None]) {
            merges.push(whole.part(start.as_deref(), end.clone())?);
            start = end;
        }
        Ok(merges)
    }

    /// The keys of this (unstarted) merge's runs from `start` (inclusive) to `end` (exclusive).
    /// In-memory runs are positioned here; spill readers at the part's first `next_into`.
    fn part(&self, start: Option<&[u8]>, end: Option<Vec<u8>>) -> Result<MergedRuns, RunError> {
        let mut part = MergedRuns {
            sources: Vec::with_capacity(self.sources.len()),
            heap: BinaryHeap::new(),
            end,
            start: start.map(<[u8]>::to_vec),
            _spilled: Arc::clone(&self._spilled),
        };
        for source in &self.sources {
            let source = match source {
                Source::Memory(run, _) => Source::Memory(
                    Arc::clone(run),
                    start.map_or(0, |start| run.lower_bound(start)),
                ),
                Source::Spilled(reader) => {
                    Source::Spilled(Box::new(RunReader::open(&reader.path)?))
                }
            };
            part.sources.push(source);
            let index = part.sources.len() - 1;
            if start.is_none() || matches!(part.sources[index], Source::Memory(..)) {
                part.refill(index, Vec::new(), Vec::new())?;
            }
        }
        Ok(part)
    }

    /// Reads each spill reader up to the part's first key (the records below are decoded and
    /// dropped) and makes the first record in range the source's head.
    fn skip_spilled_below(&mut self, start: &[u8]) -> Result<(), RunError> {
        for index in 0..self.sources.len() {
            let Source::Spilled(reader) = &mut self.sources[index] else {
                continue;
            };
            let (mut key, mut ids) = (Vec::new(), Vec::new());
            while reader.next_into(&mut key, &mut ids)? {
                if key.as_slice() >= start {
                    if self.end.as_ref().is_none_or(|end| key < *end) {
                        self.heap.push(Head {
                            key,
                            ids,
                            source: index,
                        });
                    }
                    break;
                }
            }
        }
        Ok(())
    }

    /// The next key and its merged ascending IDs, written into the caller's buffers; false at the end.
    pub fn next_into(&mut self, key: &mut Vec<u8>, ids: &mut Vec<u32>) -> Result<bool, RunError> {
        if let Some(start) = self.start.take() {
            self.skip_spilled_below(&start)?;
        }
        let Some(first) = self.heap.pop() else {
            return Ok(false);
        };
        key.clear();
        key.extend_from_slice(&first.key);
        ids.clear();
        ids.extend_from_slice(&first.ids);
        let mut needs_sort = false;
        self.refill(first.source, first.key, first.ids)?;
        while let Some(head) = self.heap.peek() {
            if head.key != *key {
                break;
            }
            let head = self.heap.pop().expect("peeked");
            if let (Some(last), Some(next_first)) = (ids.last(), head.ids.first()) {
                needs_sort |= next_first <= last;
            }
            ids.extend_from_slice(&head.ids);
            self.refill(head.source, head.key, head.ids)?;
        }
        if needs_sort {
            // The lists are ascending runs (one per source): the stable sort merges natural
            // runs in O(n log runs) where an unstable sort would start from scratch.
            ids.sort();
            ids.dedup();
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn run_scenario(
        pairs_per_thread: &[Vec<(Vec<u8>, u32)>],
        budget_bytes: usize,
        parts: usize,
    ) -> BTreeMap<Vec<u8>, Vec<u32>> {
        let directory = tempfile::tempdir().unwrap();
        let mut finished = Vec::new();
        for pairs in pairs_per_thread {
            let mut run = PostingRun::new(budget_bytes, directory.path());
            for (key, id) in pairs {
                run.push(key, *id).unwrap();
            }
            finished.push(run.finish().unwrap());
        }
        // A split merge's parts, one after another, are the whole merge.
        let merges = MergedRuns::split(finished, parts).unwrap();
        assert!(!merges.is_empty() && merges.len() <= parts);
        let mut result = BTreeMap::new();
        let (mut key, mut ids) = (Vec::new(), Vec::new());
        let mut previous_key: Option<Vec<u8>> = None;
        for mut merged in merges {
            while merged.next_into(&mut key, &mut ids).unwrap() {
                if let Some(previous) = &previous_key {
                    assert!(previous < &key, "merge must emit strictly ascending keys");
                }
                previous_key = Some(key.clone());
                result.insert(key.clone(), ids.clone());
            }
        }
        result
    }

    fn expected(pairs_per_thread: &[Vec<(Vec<u8>, u32)>]) -> BTreeMap<Vec<u8>, Vec<u32>> {
        let mut expected: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
        for pairs in pairs_per_thread {
            for (key, id) in pairs {
                expected.entry(key.clone()).or_default().push(*id);
            }
        }
        for ids in expected.values_mut() {
            ids.sort_unstable();
            ids.dedup();
        }
        expected
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn merge_equals_naive_grouping(
            // Keys of 0..14 bytes over a tiny alphabet (zero included): packed and long keys,
            // prefixes of each other, and equal-after-padding keys all meet in one merge.
            keys_per_id in proptest::collection::vec(proptest::collection::vec(proptest::collection::vec(0u8..4, 0..14), 0..6), 1..300),
            thread_count in 1usize..4,
            budget_bytes in proptest::prop_oneof![proptest::strategy::Just(1usize), 200usize..2000, proptest::strategy::Just(1usize << 30)],
            parts in 1usize..4,
        ) {
            // IDs are dealt to threads in batches of 7, like the loader deals record batches to workers.
            let mut pairs_per_thread = vec![Vec::new(); thread_count];
            for (index, keys) in keys_per_id.iter().enumerate() {
                let id = index as u32 * 3 + 1;
                let thread = (index / 7) % thread_count;
                for key in keys {
                    pairs_per_thread[thread].push((key.clone(), id));
                }
            }
            proptest::prop_assert_eq!(run_scenario(&pairs_per_thread, budget_bytes, parts), expected(&pairs_per_thread));
        }
    }

    /// A split over spilled and in-memory runs really cuts (every part non-empty, the spill
    /// readers of later parts skipping what earlier parts merge) and loses or repeats nothing.
    #[test]
    fn split_merge_with_spills_cuts_and_equals_the_whole() {
        let mut pairs_per_thread = vec![Vec::new(), Vec::new()];
        for id in 1..=3000u32 {
            let key = (id % 997).to_be_bytes().to_vec();
            pairs_per_thread[(id as usize / 50) % 2].push((key, id));
        }
        let directory = tempfile::tempdir().unwrap();
        let mut finished = Vec::new();
        for pairs in &pairs_per_thread {
            let mut run = PostingRun::new(1 << 20, directory.path());
            for (index, (key, id)) in pairs.iter().enumerate() {
                run.push(key, *id).unwrap();
                if index == pairs.len() / 2 {
                    run.spill().unwrap();
                }
            }
            finished.push(run.finish().unwrap());
        }
        assert!(finished
            .iter()
            .all(|run| !run.spilled.is_empty() && !run.memory.is_empty()));
        let merges = MergedRuns::split(finished, 3).unwrap();
        assert_eq!(merges.len(), 3);
        let mut result = BTreeMap::new();
        let (mut key, mut ids) = (Vec::new(), Vec::new());
        for mut merged in merges {
            let mut keys_in_part = 0;
            while merged.next_into(&mut key, &mut ids).unwrap() {
                assert!(
                    result.insert(key.clone(), ids.clone()).is_none(),
                    "a key in two parts"
                );
                keys_in_part += 1;
            }
            assert!(keys_in_part > 0);
        }
        assert_eq!(result, expected(&pairs_per_thread));
    }

    /// The radix sort equals a comparison sort: IDs pushed ascending (the ID bytes skipped)
    /// and in any order, keys of every packed length, few and many distinct bytes per digit.
    #[test]
    fn radix_sort_equals_comparison_sort() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            // SplitMix64: deterministic, no dependency.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut value = state;
            value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            value ^ (value >> 31)
        };
        for (count, ids_ascending, key_alphabet) in [
            (RADIX_SORT_PAIRS_MIN * 16, true, 256u64),
            (50_000, true, 3),
            (50_000, false, 256),
            (20_000, false, 2),
        ] {
            let mut pairs: Vec<u128> = (0..count)
                .map(|index| {
                    let length = (next() % (PACKED_KEY_BYTES_MAX as u64 + 1)) as usize;
                    let key: Vec<u8> = (0..length).map(|_| (next() % key_alphabet) as u8).collect();
                    let id = if ids_ascending {
                        index as u32 / 3
                    } else {
                        next() as u32
                    };
                    pack(&[], &key, id)
                })
                .collect();
            let mut expected = pairs.clone();
            expected.sort_unstable();
            sort_packed(&mut pairs, &mut Vec::new());
            assert!(
                pairs == expected,
                "{count} pairs, ids ascending {ids_ascending}"
            );
        }
    }

    /// `push_prefixed` is `push` of the joined key, packed (9-byte hashed keys and others) or not.
    #[test]
    fn prefixed_push_equals_push_of_the_joined_key() {
        let directory = tempfile::tempdir().unwrap();
        let (mut joined, mut prefixed) = (
            PostingRun::new(1 << 20, directory.path()),
            PostingRun::new(1 << 20, directory.path()),
        );
        for id in 1..=200u32 {
            let length = (id % 13) as usize;
            let key: Vec<u8> = (0..length)
                .map(|index| (id as usize * 7 + index) as u8 % 5)
                .collect();
            let prefix = [0, (id % 3) as u8];
            prefixed.push_prefixed(prefix, &key, id).unwrap();
            joined.push(&[&prefix[..], &key].concat(), id).unwrap();
        }
        let collect = |run: PostingRun| {
            let mut merged = MergedRuns::new(vec![run.finish().unwrap()]).unwrap();
            let (mut key, mut ids, mut all) = (Vec::new(), Vec::new(), Vec::new());
            while merged.next_into(&mut key, &mut ids).unwrap() {
                all.push((key.clone(), ids.clone()));
            }
            all
        };
        assert_eq!(collect(prefixed), collect(joined));
    }

    #[test]
    fn tiny_budget_spills_every_key() {
        let directory = tempfile::tempdir().unwrap();
        let mut run = PostingRun::new(1, directory.path());
        for id in 1..=50u32 {
            run.push(&[(id % 5) as u8], id).unwrap();
        }
        assert_eq!(run.spill_count(), 50);
        let finished = run.finish().unwrap();
        let mut merged = MergedRuns::new(vec![finished]).unwrap();
        let (mut key, mut ids) = (Vec::new(), Vec::new());
        let mut count = 0;
        while merged.next_into(&mut key, &mut ids).unwrap() {
            assert_eq!(ids.len(), 10);
            assert!(ids.iter().all(|id| id % 5 == u32::from(key[0])));
            count += 1;
        }
        assert_eq!(count, 5);
    }

    #[test]
    fn overlong_key_is_an_error() {
        let directory = tempfile::tempdir().unwrap();
        let mut run = PostingRun::new(1 << 20, directory.path());
        let error = run.push(&vec![0u8; KEY_BYTES_MAX + 1], 1).unwrap_err();
        assert!(error.to_string().contains("exceeds"), "{error}");
    }

    #[test]
    fn large_ids_round_trip_through_spill() {
        let directory = tempfile::tempdir().unwrap();
        let mut run = PostingRun::new(1, directory.path());
        run.push(b"k", 1).unwrap();
        run.push(b"k", u32::MAX).unwrap();
        let mut merged = MergedRuns::new(vec![run.finish().unwrap()]).unwrap();
        let (mut key, mut ids) = (Vec::new(), Vec::new());
        assert!(merged.next_into(&mut key, &mut ids).unwrap());
        assert_eq!(ids, vec![1, u32::MAX]);
    }
}
