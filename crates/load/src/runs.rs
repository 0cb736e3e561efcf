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
use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
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
    /// The message names the I/O error itself, so it is no `source()` (the chain would repeat it).
    #[error("spill file {path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error("spill file {path}: corrupt run ({what})")]
    Corrupt { path: PathBuf, what: &'static str },
    #[error("index key of {length} bytes exceeds the {KEY_BYTES_MAX}-byte limit")]
    KeyTooLong { length: usize },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |error| RunError::Io {
        path: path.to_path_buf(),
        error,
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
/// Long keys' IDs held before the run spills, whatever the budget (their offsets are u32).
const LONG_KEY_IDS_MAX: usize = 1 << 30;

/// Packs the key `prefix ‖ key` (at most `PACKED_KEY_BYTES_MAX` bytes together) with `id`.
fn pack(prefix: &[u8], key: &[u8], id: u32) -> u128 {
    let length = prefix.len() + key.len();
    debug_assert!(length <= PACKED_KEY_BYTES_MAX);
    let mut bytes = [0u8; 16];
    bytes[..prefix.len()].copy_from_slice(prefix);
    bytes[prefix.len()..length].copy_from_slice(key);
    bytes[PACKED_LENGTH_BYTE] = length as u8;
    bytes[12..].copy_from_slice(&id.to_be_bytes());
    u128::from_be_bytes(bytes)
}

/// `pack` of a slot and a hashed key (kind + 8 bytes): nearly every key the loader pushes,
/// built from two big-endian words instead of byte copies.
#[inline]
fn pack_hashed(prefix: [u8; 2], key: &[u8; 9], id: u32) -> u128 {
    let [k0, k1, k2, k3, k4, k5, k6, k7, k8] = *key;
    let high = u64::from_be_bytes([prefix[0], prefix[1], k0, k1, k2, k3, k4, k5]);
    let low = u32::from_be_bytes([k6, k7, k8, PACKED_KEY_BYTES_MAX as u8]);
    (u128::from(high) << 64) | (u128::from(low) << 32) | u128::from(id)
}

/// Below this many pairs a comparison sort is cheaper than another radix pass (16 and 64
/// measured worse).
const RADIX_SORT_PAIRS_MIN: usize = 32;
/// A radix pass buckets by at most this many bits (65,536 buckets).
const DIGIT_BITS_MAX: u32 = 16;
/// ... and at least this many.
const DIGIT_BITS_MIN: u32 = 4;
/// A pass over `n` pairs makes about `n / 2^DIGIT_PAIRS_PER_BUCKET_LOG2` buckets: as many
/// buckets as pairs (their counts cost a few instructions per pair) measured cheaper than 2
/// or 8 pairs a bucket, whose small comparison sorts cost more (most buckets hold several
/// rare keys, not one hot one).
const DIGIT_PAIRS_PER_BUCKET_LOG2: u32 = 0;

/// Sorts packed pairs ascending: a most-significant-digit radix sort. Each pass first finds
/// the first bit where the bucket's pairs differ (one OR of XORs, instead of a counting pass
/// per constant byte such as the slot's high byte), then buckets by the digit starting there,
/// as wide as the bucket is large (16 bits over a full buffer: the slot and the kind), into
/// the other buffer; each bucket goes on from there, so the buffers take turns and nothing is
/// copied back. Buckets of fewer than `RADIX_SORT_PAIRS_MIN` pairs are finished by a
/// comparison sort. Pairs are pushed in ascending ID order by each worker, so when the IDs
/// are already ascending a bucket whose keys are all equal is done: the passes are stable.
/// For index keys (a slot, a kind, a hash) two passes leave buckets of a few keys.
fn sort_packed(pairs: &mut Vec<u128>, scratch: &mut Vec<u128>) {
    if pairs.len() < RADIX_SORT_PAIRS_MIN {
        pairs.sort_unstable();
        return;
    }
    assert!(pairs.len() <= u32::MAX as usize, "bucket offsets are u32");
    let ids_ascending = pairs.windows(2).all(|two| two[0] as u32 <= two[1] as u32);
    if scratch.len() < pairs.len() {
        // Zeroed once (an allocation of fresh, already zero pages), then reused as it is:
        // clearing and refilling it zeroed 16 bytes a pair before every sort.
        *scratch = vec![0; pairs.capacity().max(pairs.len())];
    }
    let length = pairs.len();
    radix_sort(
        RadixBuffers {
            data: pairs,
            other: &mut scratch[..length],
            result_in_other: false,
        },
        ids_ascending,
        &mut Vec::new(),
    );
}

/// A bucket being sorted: its pairs are in `data`; `other` is as long and free; the sorted
/// pairs must end in `other` when `result_in_other`, else in `data`.
struct RadixBuffers<'a> {
    data: &'a mut [u128],
    other: &'a mut [u128],
    result_in_other: bool,
}

impl RadixBuffers<'_> {
    /// Sorted by a comparison sort where the result belongs.
    fn finish_by_comparison(self) {
        if self.result_in_other {
            self.other.copy_from_slice(self.data);
            self.other.sort_unstable();
        } else {
            self.data.sort_unstable();
        }
    }

    /// Already sorted: moved where the result belongs.
    fn finish_sorted(self) {
        if self.result_in_other {
            self.other.copy_from_slice(self.data);
        }
    }
}

/// A digit of a packed pair: `mask` of the high or low 64-bit word shifted right by `shift`.
#[derive(Clone, Copy)]
struct Digit {
    high_word: bool,
    shift: u32,
    mask: u64,
}

impl Digit {
    /// The digit of up to `bits` bits starting `start` bits from the most significant,
    /// narrowed so that it does not straddle the two words.
    fn at(start: u32, bits: u32) -> Digit {
        let high_word = start < 64;
        let start_in_word = start % 64;
        let bits = bits.min(64 - start_in_word);
        Digit {
            high_word,
            shift: 64 - start_in_word - bits,
            mask: (1u64 << bits) - 1,
        }
    }

    fn buckets(self) -> usize {
        self.mask as usize + 1
    }
}

/// Counts each digit value of `pairs` into `counts` (zeroed by the caller).
fn count_digits(pairs: &[u128], digit: Digit, counts: &mut [u32]) {
    // Two loops so the word choice is not tested per pair.
    if digit.high_word {
        for pair in pairs {
            counts[(((*pair >> 64) as u64 >> digit.shift) & digit.mask) as usize] += 1;
        }
    } else {
        for pair in pairs {
            counts[((*pair as u64 >> digit.shift) & digit.mask) as usize] += 1;
        }
    }
}

/// Moves `from` into `to` by digit, stably; `offsets` are the buckets' starts and end as
/// their ends.
fn scatter_digits(from: &[u128], to: &mut [u128], digit: Digit, offsets: &mut [u32]) {
    if digit.high_word {
        for pair in from {
            let offset =
                &mut offsets[(((*pair >> 64) as u64 >> digit.shift) & digit.mask) as usize];
            to[*offset as usize] = *pair;
            *offset += 1;
        }
    } else {
        for pair in from {
            let offset = &mut offsets[((*pair as u64 >> digit.shift) & digit.mask) as usize];
            to[*offset as usize] = *pair;
            *offset += 1;
        }
    }
}

/// Sorts one bucket. `spare_offsets` holds bucket-offset arrays for reuse (one per level).
fn radix_sort(buffers: RadixBuffers<'_>, ids_ascending: bool, spare_offsets: &mut Vec<Vec<u32>>) {
    let length = buffers.data.len();
    if length < RADIX_SORT_PAIRS_MIN {
        return buffers.finish_by_comparison();
    }
    let first = buffers.data[0];
    let differing = buffers
        .data
        .iter()
        .fold(0u128, |bits, pair| bits | (pair ^ first));
    // With ascending IDs only the key part (above the ID) is left to sort.
    let to_sort = if ids_ascending {
        differing >> 32
    } else {
        differing
    };
    if to_sort == 0 {
        return buffers.finish_sorted(); // equal keys, IDs in pushed (ascending) order
    }
    let bits = (length.ilog2().saturating_sub(DIGIT_PAIRS_PER_BUCKET_LOG2))
        .clamp(DIGIT_BITS_MIN, DIGIT_BITS_MAX);
    let digit = Digit::at(differing.leading_zeros(), bits);
    let mut offsets = spare_offsets.pop().unwrap_or_default();
    offsets.clear();
    offsets.resize(digit.buckets(), 0);
    count_digits(buffers.data, digit, &mut offsets);
    let mut total = 0u32;
    for offset in offsets.iter_mut() {
        let count = *offset;
        *offset = total;
        total += count;
    }
    scatter_digits(buffers.data, buffers.other, digit, &mut offsets);
    // The pairs are in `other` now: each bucket continues from there.
    let mut start = 0usize;
    for end in offsets.iter() {
        let end = *end as usize;
        if end > start {
            radix_sort(
                RadixBuffers {
                    data: &mut buffers.other[start..end],
                    other: &mut buffers.data[start..end],
                    result_in_other: !buffers.result_in_other,
                },
                ids_ascending,
                spare_offsets,
            );
        }
        start = end;
    }
    spare_offsets.push(offsets);
}

/// Bytes of a key's packed form: the key zero-padded to `PACKED_KEY_BYTES_MAX` bytes, then
/// its length (a packed pair without its ID).
const PACKED_FORM_BYTES: usize = PACKED_KEY_BYTES_MAX + 1;

/// Keys sorted ascending, each with its ascending distinct IDs, in flat arrays. A run holds
/// either packed keys (a grouped pair buffer: 12 bytes a key, no offsets) or long keys.
#[derive(Default)]
pub struct SortedRun {
    packed_keys: Vec<[u8; PACKED_FORM_BYTES]>,
    long_key_bytes: Vec<u8>,
    /// Where each long key starts in `long_key_bytes`.
    long_key_starts: Vec<usize>,
    /// Where each key's IDs start in `ids`.
    id_starts: Vec<u32>,
    ids: Vec<u32>,
}

/// A key's merge word: its first `PACKED_KEY_BYTES_MAX` bytes zero-padded, then its length
/// (`PACKED_KEY_BYTES_MAX + 1` for any longer key). Words order as the keys' bytes do, except
/// that two long keys with the same first bytes have equal words.
fn merge_word(key: &[u8]) -> u128 {
    let mut form = [0u8; 16];
    let prefix = key.len().min(PACKED_KEY_BYTES_MAX);
    form[4..4 + prefix].copy_from_slice(&key[..prefix]);
    form[15] = key.len().min(PACKED_FORM_BYTES) as u8;
    u128::from_be_bytes(form)
}

/// The merge word of a packed form (the same as `merge_word` of its key).
fn packed_word(form: &[u8; PACKED_FORM_BYTES]) -> u128 {
    let mut bytes = [0u8; 16];
    bytes[4..].copy_from_slice(form);
    u128::from_be_bytes(bytes)
}

/// A word above every key's: an exhausted merge source.
const EXHAUSTED_WORD: u128 = u128::MAX;

impl SortedRun {
    pub fn len(&self) -> usize {
        self.id_starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.id_starts.is_empty()
    }

    /// The `index`-th key.
    pub fn key(&self, index: usize) -> &[u8] {
        if self.packed_keys.is_empty() {
            let start = self.long_key_starts[index];
            let end = self
                .long_key_starts
                .get(index + 1)
                .copied()
                .unwrap_or(self.long_key_bytes.len());
            &self.long_key_bytes[start..end]
        } else {
            let form = &self.packed_keys[index];
            &form[..form[PACKED_KEY_BYTES_MAX] as usize]
        }
    }

    /// The `index`-th key's merge word.
    fn word(&self, index: usize) -> u128 {
        match self.packed_keys.get(index) {
            Some(form) => packed_word(form),
            None => merge_word(self.key(index)),
        }
    }

    /// The `index`-th key's IDs.
    pub fn ids(&self, index: usize) -> &[u32] {
        let start = self.id_starts[index] as usize;
        let end = self
            .id_starts
            .get(index + 1)
            .map_or(self.ids.len(), |end| *end as usize);
        &self.ids[start..end]
    }

    /// The index of the first key at or above `key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        first_index_not_below(0, self.len(), |index| self.key(index) < key)
    }

    /// The IDs of the keys before the `index`-th.
    fn ids_below(&self, index: usize) -> usize {
        self.id_starts
            .get(index)
            .map_or(self.ids.len(), |start| *start as usize)
    }

    /// The `index`-th key and its IDs.
    pub fn get(&self, index: usize) -> (&[u8], &[u32]) {
        (self.key(index), self.ids(index))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u32])> {
        (0..self.len()).map(|index| self.get(index))
    }

    /// The ID count so far as an offset (a run holds fewer than 2^32 IDs: a pair buffer
    /// holds at most `PAIRS_PER_SORT_MAX`, the long keys spill before `LONG_KEY_IDS_MAX`).
    fn id_offset(&self) -> u32 {
        u32::try_from(self.ids.len()).expect("a sorted run holds fewer than 2^32 IDs")
    }

    fn estimated_bytes(&self) -> usize {
        self.packed_keys.len() * PACKED_FORM_BYTES
            + self.long_key_bytes.len()
            + self.long_key_starts.len() * size_of::<usize>()
            + (self.id_starts.len() + self.ids.len()) * size_of::<u32>()
    }
}

/// Memory a load holds outside the sorted runs that grows with the input (the sequencer's DN
/// tree and group member lists), charged to the workers' runs: each run's budget is lowered by
/// its share of it, so the load stays within `--memory` as the tree grows. A run never drops
/// below a quarter of its budget (its pair buffer and the sort's scratch fill that quarter:
/// below it, it would spill at every fill).
#[derive(Clone, Debug)]
pub struct SharedCharge {
    held_bytes: Arc<AtomicUsize>,
    /// How many runs share the charge.
    shares: usize,
}

impl SharedCharge {
    pub fn new(shares: usize) -> SharedCharge {
        SharedCharge {
            held_bytes: Arc::new(AtomicUsize::new(0)),
            shares: shares.max(1),
        }
    }

    /// What is held now (the sequencer sets it after each batch).
    pub fn set(&self, held_bytes: usize) {
        self.held_bytes.store(held_bytes, AtomicOrdering::Relaxed);
    }

    /// The most of it a run of `budget_bytes` can take on (three quarters of that budget).
    pub fn absorbable_bytes(budget_bytes: usize) -> usize {
        budget_bytes - budget_bytes / 4
    }

    /// `budget_bytes` lowered by one run's share of what is held.
    fn lowered(&self, budget_bytes: usize) -> usize {
        let share = self.held_bytes.load(AtomicOrdering::Relaxed) / self.shares;
        budget_bytes - share.min(Self::absorbable_bytes(budget_bytes))
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
    /// IDs held in `long_keys`.
    long_key_ids: usize,
    estimated_bytes: usize,
    budget_bytes: usize,
    spill_directory: PathBuf,
    spilled: Vec<SpilledRun>,
    /// What else the load holds, taken off `budget_bytes` (the loader's workers only).
    charge: Option<SharedCharge>,
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
            long_key_ids: 0,
            estimated_bytes: 0,
            budget_bytes,
            spill_directory: spill_directory.to_path_buf(),
            spilled: Vec::new(),
            charge: None,
        }
    }

    /// This run with its budget lowered by its share of `charge` (see [`SharedCharge`]).
    pub fn charged(mut self, charge: SharedCharge) -> Self {
        self.charge = Some(charge);
        self
    }

    /// The budget now: `budget_bytes` less this run's share of the charge.
    fn budget_now(&self) -> usize {
        match &self.charge {
            None => self.budget_bytes,
            Some(charge) => charge.lowered(self.budget_bytes),
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
    /// a slot and a hashed key), the common case packed straight from its parts. Inlined into
    /// the key callback: a call with its register saves cost as much as the push itself.
    #[inline]
    pub fn push_prefixed(&mut self, prefix: [u8; 2], key: &[u8], id: u32) -> Result<(), RunError> {
        if let Ok(hashed) = <&[u8; 9]>::try_from(key) {
            return self.push_packed(pack_hashed(prefix, hashed, id));
        }
        self.push_prefixed_other(prefix, key, id)
    }

    #[inline(never)]
    fn push_prefixed_other(
        &mut self,
        prefix: [u8; 2],
        key: &[u8],
        id: u32,
    ) -> Result<(), RunError> {
        if prefix.len() + key.len() <= PACKED_KEY_BYTES_MAX {
            return self.push_packed(pack(&prefix, key, id));
        }
        let mut whole = Vec::with_capacity(prefix.len() + key.len());
        whole.extend_from_slice(&prefix);
        whole.extend_from_slice(key);
        self.push_long(&whole, id)?;
        self.spill_if_full()
    }

    /// An append while the buffer has room; the budget is checked when it fills.
    #[inline]
    fn push_packed(&mut self, pair: u128) -> Result<(), RunError> {
        if self.pairs.len() + 1 < self.pairs.capacity() {
            self.pairs.push(pair);
            return Ok(());
        }
        self.push_packed_and_sort(pair)
    }

    #[inline(never)]
    fn push_packed_and_sort(&mut self, pair: u128) -> Result<(), RunError> {
        if self.pairs.capacity() == 0 {
            // Reserved whole: growing by doubling copied the buffer and faulted it in twice.
            self.pairs.reserve_exact(self.pairs_per_sort);
        }
        self.pairs.push(pair);
        if self.pairs.len() >= self.pairs_per_sort {
            self.sort_pairs();
        }
        self.spill_if_full()
    }

    /// Spills when the sorted runs, the long keys and the pair buffer reach the budget.
    fn spill_if_full(&mut self) -> Result<(), RunError> {
        if self.estimated_bytes() >= self.budget_now() || self.long_key_ids >= LONG_KEY_IDS_MAX {
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
            self.long_key_ids += 1;
        } else {
            if key.len() > KEY_BYTES_MAX {
                return Err(RunError::KeyTooLong { length: key.len() });
            }
            let mut ids = Vec::with_capacity(2);
            ids.push(id);
            self.long_keys.insert(RunKey::new(key), ids);
            self.long_key_ids += 1;
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
        self.estimated_bytes + self.pairs.len() * PACKED_PAIR_BYTES
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
            // Index keys average ~25 pairs each; a quarter is room enough for most buffers.
            packed_keys: Vec::with_capacity(self.pairs.len() / 4),
            id_starts: Vec::with_capacity(self.pairs.len() / 4),
            ids: Vec::with_capacity(self.pairs.len()),
            ..SortedRun::default()
        };
        // No key part reaches this (they are 96 bits): the first pair starts a key.
        let mut previous_key_part = u128::MAX;
        let mut previous_id = 0u32;
        for pair in &self.pairs {
            let key_part = pair >> 32;
            let id = *pair as u32;
            if key_part != previous_key_part {
                let bytes = pair.to_be_bytes();
                let mut form = [0u8; PACKED_FORM_BYTES];
                form.copy_from_slice(&bytes[..PACKED_FORM_BYTES]);
                run.id_starts.push(run.ids.len() as u32);
                run.packed_keys.push(form);
                run.ids.push(id);
                previous_key_part = key_part;
            } else if id != previous_id {
                run.ids.push(id);
            }
            previous_id = id;
        }
        self.estimated_bytes += run.estimated_bytes();
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
                run.id_starts.push(run.id_offset());
                run.long_key_starts.push(run.long_key_bytes.len());
                run.long_key_bytes.extend_from_slice(key.as_slice());
                run.ids.extend_from_slice(&ids);
            }
            runs.push(run);
        }
        self.long_key_ids = 0;
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
            error: error.into(),
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
                        error,
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

/// One run being merged, positioned at its current key; a part of a split merge
/// (`MergedRuns::split`) sees only the keys of its range.
enum Source {
    Spilled {
        reader: Box<RunReader>,
        key: Vec<u8>,
        ids: Vec<u32>,
        /// The range's first key: the reader skips the records below it at the start.
        start: Option<Vec<u8>>,
        /// The first key past the range.
        end: Option<Vec<u8>>,
    },
    /// A sorted in-memory run (shared by the parts of a split merge), the index of its current
    /// key and the index past its range.
    Memory {
        run: Arc<SortedRun>,
        position: usize,
        end: usize,
    },
}

impl Source {
    fn key(&self) -> &[u8] {
        match self {
            Source::Spilled { key, .. } => key,
            Source::Memory { run, position, .. } => run.key(*position),
        }
    }

    fn ids(&self) -> &[u32] {
        match self {
            Source::Spilled { ids, .. } => ids,
            Source::Memory { run, position, .. } => run.ids(*position),
        }
    }

    /// The current key's merge word, reading the next key first unless `at_start`;
    /// `EXHAUSTED_WORD` at the end.
    fn advance(&mut self, at_start: bool) -> Result<u128, RunError> {
        match self {
            Source::Spilled {
                reader,
                key,
                ids,
                start,
                end,
            } => {
                let mut more = reader.next_into(key, ids)?;
                if let (true, Some(start)) = (at_start, start.as_deref()) {
                    // Records below the range are decoded and dropped.
                    while more && key.as_slice() < start {
                        more = reader.next_into(key, ids)?;
                    }
                }
                let within = end.as_deref().is_none_or(|end| key.as_slice() < end);
                Ok(if more && within {
                    merge_word(key)
                } else {
                    EXHAUSTED_WORD
                })
            }
            Source::Memory { run, position, end } => {
                if !at_start {
                    *position += 1;
                }
                Ok(if *position < *end {
                    run.word(*position)
                } else {
                    EXHAUSTED_WORD
                })
            }
        }
    }
}

/// k-way merge of finished runs in key order; each key's IDs come out merged and ascending.
/// A winner tree over the sources' merge words: taking a key replays one path of log2(k)
/// integer comparisons (long keys with equal first bytes compare their bytes).
pub struct MergedRuns {
    /// The sources, padded with empty runs to a power of two.
    sources: Vec<Source>,
    /// Each source's current merge word.
    words: Vec<u128>,
    /// `tree[1]` is the source with the smallest key; node n's children are 2n and 2n + 1;
    /// the leaves (from `sources.len()`) are the sources in order.
    tree: Vec<usize>,
    merge_scratch: Vec<u32>,
    /// Whether the sources stand at their first keys: a part positions them at its first
    /// `next_into`, so spill readers skip below its range on its own merge thread.
    started: bool,
    // Keeps the spill files alive (and deletes them) until every part's merge is gone.
    _spilled: Arc<Vec<SpilledRun>>,
}

/// What merging one key costs against one of its IDs (a tree replay, copies and the chunk
/// encoding per key; copies, merge and encoding per ID), measured on the merge thread: it
/// places the cuts of `MergedRuns::split`.
const MERGE_KEY_WEIGHT_IDS: usize = 7;

/// Up to `parts - 1` ascending cut keys that split the in-memory runs' merge work evenly,
/// taken at keys of the largest run; none without in-memory runs.
fn split_cuts(memory: &[Arc<SortedRun>], parts: usize) -> Vec<Vec<u8>> {
    let weight =
        |run: &SortedRun, index: usize| index * MERGE_KEY_WEIGHT_IDS + run.ids_below(index);
    let work_below = |key: &[u8]| -> usize {
        memory
            .iter()
            .map(|run| weight(run, run.lower_bound(key)))
            .sum()
    };
    let total: usize = memory.iter().map(|run| weight(run, run.len())).sum();
    let mut cuts: Vec<Vec<u8>> = Vec::new();
    let Some(largest) = memory.iter().max_by_key(|run| run.len()) else {
        return cuts;
    };
    let mut low = 0;
    for part in 1..parts.max(1) {
        let target = total * part / parts;
        // The first key of the largest run with at least `target` work below it.
        low = first_index_not_below(low, largest.len(), |index| {
            work_below(largest.key(index)) < target
        });
        if low < largest.len() && low > 0 {
            let cut = largest.key(low);
            if cuts.last().is_none_or(|last| last.as_slice() < cut) {
                cuts.push(cut.to_vec());
            }
        }
    }
    cuts
}

/// The first index of `low..high` where `below` turns false (`below` is true, then false).
fn first_index_not_below(mut low: usize, mut high: usize, below: impl Fn(usize) -> bool) -> usize {
    while low < high {
        let middle = low + (high - low) / 2;
        if below(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

/// The finished runs' in-memory runs (shared) and spill files.
fn run_parts(runs: Vec<FinishedRun>) -> (Vec<Arc<SortedRun>>, Vec<SpilledRun>) {
    let mut memory = Vec::new();
    let mut spilled = Vec::new();
    for run in runs {
        spilled.extend(run.spilled);
        memory.extend(
            run.memory
                .into_iter()
                .filter(|run| !run.is_empty())
                .map(Arc::new),
        );
    }
    (memory, spilled)
}

impl MergedRuns {
    pub fn new(runs: Vec<FinishedRun>) -> Result<Self, RunError> {
        let (memory, spilled) = run_parts(runs);
        Self::part(&memory, Arc::new(spilled), None, None)
    }

    /// A merge of in-memory runs only (reading them cannot fail).
    fn from_sorted(runs: Vec<SortedRun>) -> Self {
        let memory: Vec<Arc<SortedRun>> = runs
            .into_iter()
            .filter(|run| !run.is_empty())
            .map(Arc::new)
            .collect();
        Self::part(&memory, Arc::new(Vec::new()), None, None)
            .expect("in-memory sources do not fail")
    }

    /// The merge of `runs` cut into up to `parts` merges over disjoint key ranges, ascending:
    /// one after another they yield exactly what `MergedRuns::new(runs)` yields, and each can
    /// run on its own thread. The cuts balance the merge's work over the in-memory runs (each
    /// key of a run costs `MERGE_KEY_WEIGHT_IDS` IDs' worth), taken at keys of the largest run.
    /// In-memory runs are shared; each part opens its own reader of every spill file and skips
    /// the keys below its range. Without in-memory runs there is no estimate and the merge
    /// stays whole.
    pub fn split(runs: Vec<FinishedRun>, parts: usize) -> Result<Vec<MergedRuns>, RunError> {
        let (memory, spilled) = run_parts(runs);
        let spilled = Arc::new(spilled);
        let cuts = split_cuts(&memory, parts);
        let mut merges = Vec::with_capacity(cuts.len() + 1);
        let mut start: Option<&[u8]> = None;
        for end in cuts.iter().map(|cut| Some(cut.as_slice())).chain([None]) {
            merges.push(Self::part(&memory, spilled.clone(), start, end)?);
            start = end;
        }
        Ok(merges)
    }

    /// The merge of the keys from `start` (inclusive) to `end` (exclusive) of the runs.
    fn part(
        memory: &[Arc<SortedRun>],
        spilled: Arc<Vec<SpilledRun>>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<Self, RunError> {
        let mut sources = Vec::with_capacity(spilled.len() + memory.len());
        for file in spilled.iter() {
            sources.push(Source::Spilled {
                reader: Box::new(RunReader::open(file.path())?),
                key: Vec::new(),
                ids: Vec::new(),
                start: start.map(<[u8]>::to_vec),
                end: end.map(<[u8]>::to_vec),
            });
        }
        for run in memory {
            sources.push(Source::Memory {
                run: run.clone(),
                position: start.map_or(0, |start| run.lower_bound(start)),
                end: end.map_or(run.len(), |end| run.lower_bound(end)),
            });
        }
        Self::from_sources(sources, spilled)
    }

    fn from_sources(
        mut sources: Vec<Source>,
        spilled: Arc<Vec<SpilledRun>>,
    ) -> Result<Self, RunError> {
        let leaves = sources.len().max(1).next_power_of_two();
        sources.resize_with(leaves, || Source::Memory {
            run: Arc::new(SortedRun::default()),
            position: 0,
            end: 0,
        });
        Ok(MergedRuns {
            words: vec![EXHAUSTED_WORD; leaves],
            sources,
            tree: vec![0; 2 * leaves],
            merge_scratch: Vec::new(),
            started: false,
            _spilled: spilled,
        })
    }

    /// Positions every source at its first key in range and builds the tree.
    fn start(&mut self) -> Result<(), RunError> {
        let leaves = self.sources.len();
        for (word, source) in self.words.iter_mut().zip(&mut self.sources) {
            *word = source.advance(true)?;
        }
        for leaf in 0..leaves {
            self.tree[leaves + leaf] = leaf;
        }
        for node in (1..leaves).rev() {
            self.tree[node] = self.winner(self.tree[2 * node], self.tree[2 * node + 1]);
        }
        self.started = true;
        Ok(())
    }

    /// Of two sources, the one whose key comes first (the lower index on a tie).
    fn winner(&self, left: usize, right: usize) -> usize {
        let (left_word, right_word) = (self.words[left], self.words[right]);
        let left_first = if left_word != right_word {
            left_word < right_word
        } else if is_long_word(left_word) {
            match self.sources[left].key().cmp(self.sources[right].key()) {
                Ordering::Less => true,
                Ordering::Greater => false,
                Ordering::Equal => left < right,
            }
        } else {
            left < right
        };
        if left_first {
            left
        } else {
            right
        }
    }

    /// Moves `source` to its next key and replays its path to the root.
    fn advance(&mut self, source: usize) -> Result<(), RunError> {
        self.words[source] = self.sources[source].advance(false)?;
        let mut node = (self.sources.len() + source) / 2;
        while node >= 1 {
            self.tree[node] = self.winner(self.tree[2 * node], self.tree[2 * node + 1]);
            node /= 2;
        }
        Ok(())
    }

    /// The next key and its merged ascending IDs, written into the caller's buffers; false at the end.
    pub fn next_into(&mut self, key: &mut Vec<u8>, ids: &mut Vec<u32>) -> Result<bool, RunError> {
        if !self.started {
            self.start()?;
        }
        let first = self.tree[1];
        let word = self.words[first];
        if word == EXHAUSTED_WORD {
            return Ok(false);
        }
        key.clear();
        key.extend_from_slice(self.sources[first].key());
        ids.clear();
        ids.extend_from_slice(self.sources[first].ids());
        self.advance(first)?;
        loop {
            let next = self.tree[1];
            if self.words[next] != word
                || (is_long_word(word) && self.sources[next].key() != key.as_slice())
            {
                return Ok(true);
            }
            merge_ids(ids, self.sources[next].ids(), &mut self.merge_scratch);
            self.advance(next)?;
        }
    }
}

/// Whether a merge word is a long key's (its bytes decide between equal words).
fn is_long_word(word: u128) -> bool {
    word as u8 == PACKED_FORM_BYTES as u8
}

/// Merges the ascending distinct IDs `more` into the ascending distinct `out`. Runs of
/// different workers interleave whole record batches, so blocks are copied whole, found by
/// an exponential search.
fn merge_ids(out: &mut Vec<u32>, more: &[u32], scratch: &mut Vec<u32>) {
    match (out.last(), more.first()) {
        (Some(last), Some(first)) if first <= last => {}
        _ => return out.extend_from_slice(more),
    }
    scratch.clear();
    scratch.reserve(out.len() + more.len());
    let (mut left, mut right) = (&out[..], more);
    while let (Some(&left_id), Some(&right_id)) = (left.first(), right.first()) {
        if left_id < right_id {
            let block = count_below(left, right_id);
            scratch.extend_from_slice(&left[..block]);
            left = &left[block..];
        } else if right_id < left_id {
            let block = count_below(right, left_id);
            scratch.extend_from_slice(&right[..block]);
            right = &right[block..];
        } else {
            scratch.push(left_id);
            left = &left[1..];
            right = &right[1..];
        }
    }
    scratch.extend_from_slice(left);
    scratch.extend_from_slice(right);
    std::mem::swap(out, scratch);
}

/// How many of the ascending `ids` (the first below `bound`) are below `bound`: an exponential
/// then a binary search, so a short block costs little.
fn count_below(ids: &[u32], bound: u32) -> usize {
    let mut high = 1;
    while high < ids.len() && ids[high] < bound {
        high *= 2;
    }
    let low = high / 2;
    let high = high.min(ids.len());
    low + ids[low..high].partition_point(|id| *id < bound)
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
            (200_000, true, 256),
            (100_000, false, 4),
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

    /// Merging ID lists equals sorting their union: interleaved single IDs, whole blocks,
    /// shared IDs (kept once) and lists that do not overlap at all.
    #[test]
    fn merged_id_lists_equal_their_sorted_union() {
        let cases: Vec<(Vec<u32>, Vec<u32>)> = vec![
            ((0..100).step_by(2).collect(), (1..100).step_by(2).collect()),
            (
                (0..1000).chain(3000..4000).collect(),
                (1000..3000).chain(4000..4100).collect(),
            ),
            ((0..50).collect(), (25..75).collect()),
            ((10..20).collect(), (0..10).collect()),
            ((0..10).collect(), (10..20).collect()),
            (vec![5], vec![5]),
            (vec![], vec![1, 2]),
            (vec![1, 2], vec![]),
        ];
        let mut scratch = Vec::new();
        for (left, right) in cases {
            let mut expected: Vec<u32> = left.iter().chain(&right).copied().collect();
            expected.sort_unstable();
            expected.dedup();
            let mut merged = left.clone();
            merge_ids(&mut merged, &right, &mut scratch);
            assert_eq!(merged, expected, "{left:?} + {right:?}");
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

    /// A run charged with what the load holds elsewhere spills sooner, and never gives up
    /// more than three quarters of its budget.
    #[test]
    fn a_charge_lowers_the_budget_down_to_a_quarter() {
        let directory = tempfile::tempdir().unwrap();
        let budget_bytes = 20_000;
        let push_long_keys = |run: &mut PostingRun| {
            for id in 1..=100u32 {
                let key = format!("{id:040}");
                run.push(key.as_bytes(), id).unwrap();
            }
        };
        let charge = SharedCharge::new(1);
        let mut run = PostingRun::new(budget_bytes, directory.path()).charged(charge.clone());
        push_long_keys(&mut run);
        assert_eq!(run.spill_count(), 0, "100 long keys fit in 20 kB");
        charge.set(15_000);
        assert_eq!(run.budget_now(), 5_000);
        push_long_keys(&mut run);
        assert!(run.spill_count() > 0, "the charged run spills");
        charge.set(usize::MAX);
        assert_eq!(run.budget_now(), budget_bytes / 4);
        // Two runs share a charge half each.
        let shared = SharedCharge::new(2);
        let halves = PostingRun::new(budget_bytes, directory.path()).charged(shared.clone());
        shared.set(10_000);
        assert_eq!(halves.budget_now(), 15_000);
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
