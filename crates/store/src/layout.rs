//! The on-disk layout: DB names and the pure key/value encoders and decoders.
//!
//! Everything here is a pure function so the bulk loader can produce byte-identical keys and
//! values in parallel and write them with APPEND. All integers inside keys are big-endian so
//! LMDB's default memcmp order is numeric order.

use roaring::RoaringBitmap;
use xxhash_rust::xxh3::xxh3_64;

/// Entry IDs: 1-based, assigned in insertion order; 0 means "no entry" (the virtual root).
pub type EntryId = u32;

/// The parent ID of the top-level (suffix) entry.
pub const ROOT_PARENT_ID: EntryId = 0;

/// LMDB's data file in a store directory.
pub const DATA_FILE_NAME: &str = "data.mdb";
/// The mode LMDB creates `data.mdb` with (heed opens environments 0600); copies of it
/// (`Store::copy_compacted`) get the same, since they hold every password hash.
pub const DATA_FILE_MODE: u32 = 0o600;
/// LMDB's own lock file (its reader table) in a store directory.
pub const LMDB_LOCK_FILE_NAME: &str = "lock.mdb";
pub const DB_META: &str = "meta";
pub const DB_ID2ENTRY: &str = "id2entry";
pub const DB_ID2NODE: &str = "id2node";
pub const DB_DN2ID: &str = "dn2id";
/// The provider's session log (`session_log.rs`): sequence (u64 BE) → logged delete/rename.
pub const DB_SESSION_LOG: &str = "sessionlog";
/// Out-of-line attribute values (see [`encode_value_row`]): entry ID (u32 BE) ‖ description
/// number (u32 BE) ‖ normalized value (key form) → original value.
pub const DB_ID2VALUE: &str = "id2value";
/// The audit trail (`accesslog.rs`): reqStart in microseconds (u64 BE) → encoded record.
pub const DB_ACCESSLOG: &str = "accesslog";
/// Index DBs are named `idx.<lowercased primary attribute name>`.
pub const INDEX_DB_PREFIX: &str = "idx.";

/// `meta` keys.
pub const META_FORMAT_VERSION: &[u8] = b"format_version";
pub const META_NEXT_ID: &[u8] = b"next_id";
pub const META_INDEX_CONFIG: &[u8] = b"index_config";
/// Description table rows: `desc:` ‖ number (u32 BE) → description string (e.g. `cn;lang-en`).
pub const META_DESCRIPTION_PREFIX: &[u8] = b"desc:";
/// The store's on-disk format. 4: format 3 with normalized values, index keys and dn2id keys
/// of slapd's string preparation (`lmdir_schema::prepare_string`, `preparation_upgrade.rs`);
/// 3: entry records of version 4 (each attribute's values byte length, `codec.rs`), strings
/// prepared by RFC 4518; 2: out-of-line values in blocks (`id2value` rows of many values
/// each); 1 had one `id2value` row per value.
pub const FORMAT_VERSION: u32 = 4;
/// The format before slapd's string preparation: read as it is; a read-write open raises it
/// to `FORMAT_VERSION` when no value or DN prepares differently now, else refuses
/// (`preparation_upgrade.rs`).
pub const FORMAT_VERSION_RFC4518_PREPARATION: u32 = 3;
/// The oldest format this build opens: its records are still read, and a read-write open
/// first raises its number to `FORMAT_VERSION_RFC4518_PREPARATION` (records written from then
/// on are version 4, which a build that reads only format 2 cannot read: it refuses the store
/// by number instead), then upgrades that.
pub const FORMAT_VERSION_UPGRADED: u32 = 2;

/// Index kinds (first byte of every index key).
pub const KIND_EQUALITY: u8 = b'=';
pub const KIND_PRESENCE: u8 = b'*';
pub const KIND_INITIAL: u8 = b'^';
pub const KIND_ANY: u8 = b'~';
pub const KIND_FINAL: u8 = b'$';
pub const KIND_ORDERED: u8 = b'<';

/// Substring grams are 2..=4 characters for initial/final and exactly 4 characters for "any".
pub const GRAM_LENGTH_MIN_CHARS: usize = 2;
pub const GRAM_LENGTH_MAX_CHARS: usize = 4;
/// Ordering keys longer than this are truncated before escaping; truncation is monotone so
/// range scans still return a superset, which the exact filter test then narrows.
pub const ORDERED_KEY_SIZE_MAX_BYTES: usize = 200;

/// Which index kinds an attribute has, as bit flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IndexKinds(pub u8);

impl IndexKinds {
    pub const EQUALITY: IndexKinds = IndexKinds(1);
    pub const PRESENCE: IndexKinds = IndexKinds(2);
    pub const SUBSTRING: IndexKinds = IndexKinds(4);
    pub const ORDERED: IndexKinds = IndexKinds(8);

    pub fn contains(self, other: IndexKinds) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }
    pub fn union(self, other: IndexKinds) -> IndexKinds {
        IndexKinds(self.0 | other.0)
    }
    pub fn intersection(self, other: IndexKinds) -> IndexKinds {
        IndexKinds(self.0 & other.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Stable text form used in `meta` and reports: a subset of "eq,pres,sub,ord".
    pub fn names(self) -> Vec<&'static str> {
        let mut names = Vec::new();
        for (flag, name) in [
            (Self::EQUALITY, "eq"),
            (Self::PRESENCE, "pres"),
            (Self::SUBSTRING, "sub"),
            (Self::ORDERED, "ord"),
        ] {
            if self.contains(flag) {
                names.push(name);
            }
        }
        names
    }
    /// The flag an index kind sets; approximate matching is served by the equality index.
    pub fn of(kind: lmdir_config::IndexKind) -> IndexKinds {
        match kind {
            lmdir_config::IndexKind::Equality | lmdir_config::IndexKind::Approx => Self::EQUALITY,
            lmdir_config::IndexKind::Presence => Self::PRESENCE,
            lmdir_config::IndexKind::Substring => Self::SUBSTRING,
            lmdir_config::IndexKind::Ordered => Self::ORDERED,
        }
    }

    /// The flag a config word names (`IndexKind::from_name`).
    pub fn from_name(name: &str) -> Option<IndexKinds> {
        lmdir_config::IndexKind::from_name(name).map(Self::of)
    }
}

// ---------------------------------------------------------------- IDs

#[inline]
pub fn encode_id(id: EntryId) -> [u8; 4] {
    id.to_be_bytes()
}

#[inline]
pub fn decode_id(bytes: &[u8]) -> Option<EntryId> {
    Some(u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?))
}

// ---------------------------------------------------------------- id2node

/// A DN-tree node: the value of `id2node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node<'a> {
    pub parent: EntryId,
    /// Entries in this node's subtree, itself included.
    pub subtree_size: u32,
    /// Direct children (numSubordinates).
    pub child_count: u32,
    /// The RDN as given (for the suffix entry: the whole suffix DN).
    pub rdn_original: &'a [u8],
    /// The normalized RDN (the dn2id key part).
    pub rdn_normalized: &'a [u8],
}

const NODE_HEADER_BYTES: usize = 4 + 4 + 4 + 2;

/// The longest original RDN a node can hold (its length is a u16).
pub const RDN_ORIGINAL_BYTES_MAX: usize = u16::MAX as usize;

/// Why an RDN cannot be stored, if it cannot: the original must fit the node's u16 length,
/// and the dn2id key (4-byte parent ID + normalized RDN) must fit LMDB's key size
/// (`Env::max_key_size`, 511 bytes by default). Writers check this before `encode_node`.
pub fn rdn_size_problem(
    original_bytes: usize,
    normalized_bytes: usize,
    key_size_max: usize,
) -> Option<String> {
    if original_bytes > RDN_ORIGINAL_BYTES_MAX {
        return Some(format!(
            "RDN of {original_bytes} bytes exceeds the limit of {RDN_ORIGINAL_BYTES_MAX} bytes"
        ));
    }
    if 4 + normalized_bytes > key_size_max {
        return Some(format!(
            "normalized RDN of {normalized_bytes} bytes exceeds the limit of {} bytes",
            key_size_max.saturating_sub(4)
        ));
    }
    None
}

/// Encodes a node into `out` (cleared first).
/// Layout: parent u32 BE, subtree size u32 BE, child count u32 BE, original RDN length u16 BE,
/// original RDN bytes, normalized RDN bytes (the rest).
pub fn encode_node(node: &Node<'_>, out: &mut Vec<u8>) {
    assert!(
        node.rdn_original.len() <= RDN_ORIGINAL_BYTES_MAX,
        "RDN longer than 65535 bytes must be rejected before encoding"
    );
    out.clear();
    out.reserve(NODE_HEADER_BYTES + node.rdn_original.len() + node.rdn_normalized.len());
    out.extend_from_slice(&node.parent.to_be_bytes());
    out.extend_from_slice(&node.subtree_size.to_be_bytes());
    out.extend_from_slice(&node.child_count.to_be_bytes());
    out.extend_from_slice(&(node.rdn_original.len() as u16).to_be_bytes());
    out.extend_from_slice(node.rdn_original);
    out.extend_from_slice(node.rdn_normalized);
}

pub fn decode_node(bytes: &[u8]) -> Option<Node<'_>> {
    if bytes.len() < NODE_HEADER_BYTES {
        return None;
    }
    let parent = u32::from_be_bytes(bytes[0..4].try_into().ok()?);
    let subtree_size = u32::from_be_bytes(bytes[4..8].try_into().ok()?);
    let child_count = u32::from_be_bytes(bytes[8..12].try_into().ok()?);
    let original_length = u16::from_be_bytes(bytes[12..14].try_into().ok()?) as usize;
    let rest = &bytes[NODE_HEADER_BYTES..];
    if rest.len() < original_length {
        return None;
    }
    Some(Node {
        parent,
        subtree_size,
        child_count,
        rdn_original: &rest[..original_length],
        rdn_normalized: &rest[original_length..],
    })
}

// ---------------------------------------------------------------- dn2id

/// `dn2id` key: parent ID (u32 BE) ‖ normalized RDN.
pub fn encode_dn2id_key(parent: EntryId, rdn_normalized: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&parent.to_be_bytes());
    out.extend_from_slice(rdn_normalized);
}

/// Splits a `dn2id` key into (parent, normalized RDN).
pub fn decode_dn2id_key(key: &[u8]) -> Option<(EntryId, &[u8])> {
    Some((decode_id(key)?, &key[4..]))
}

// ---------------------------------------------------------------- index keys

/// The chunk number of an ID: each posting chunk holds one 65,536-ID range.
#[inline]
pub fn chunk_of(id: EntryId) -> u16 {
    (id >> 16) as u16
}

#[inline]
pub fn low_half(id: EntryId) -> u16 {
    id as u16
}

#[inline]
pub fn hash_bytes(bytes: &[u8]) -> [u8; 8] {
    xxh3_64(bytes).to_be_bytes()
}

/// A full index key: kind ‖ key body ‖ chunk (u16 BE).
pub fn index_key_with_chunk(key_without_chunk: &[u8], chunk: u16, out: &mut Vec<u8>) {
    out.clear();
    push_index_key_with_chunk(key_without_chunk, chunk, out);
}

/// Appends a full index key to `out` (an arena of keys, as the bulk loader's batches are).
pub fn push_index_key_with_chunk(key_without_chunk: &[u8], chunk: u16, out: &mut Vec<u8>) {
    out.extend_from_slice(key_without_chunk);
    out.extend_from_slice(&chunk.to_be_bytes());
}

/// Splits a full index key into (key without chunk, chunk).
pub fn split_index_key(key: &[u8]) -> Option<(&[u8], u16)> {
    if key.len() < 3 {
        return None;
    }
    let (body, chunk) = key.split_at(key.len() - 2);
    Some((body, u16::from_be_bytes(chunk.try_into().ok()?)))
}

pub fn equality_key(normalized: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(KIND_EQUALITY);
    key.extend_from_slice(&hash_bytes(normalized));
    key
}

pub fn presence_key() -> Vec<u8> {
    vec![KIND_PRESENCE]
}

pub fn gram_key(kind: u8, gram: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(kind);
    key.extend_from_slice(&hash_bytes(gram));
    key
}

/// Order-preserving, prefix-free encoding of an ordering key: 0x00 → 0x00 0xFF, terminated by
/// 0x00 0x00, so a following chunk number cannot disturb the order between different keys.
pub fn ordered_key(ordering_key: &[u8]) -> Vec<u8> {
    let truncated = &ordering_key[..ordering_key.len().min(ORDERED_KEY_SIZE_MAX_BYTES)];
    let mut key = Vec::with_capacity(truncated.len() + 3);
    key.push(KIND_ORDERED);
    for &byte in truncated {
        key.push(byte);
        if byte == 0 {
            key.push(0xFF);
        }
    }
    key.extend_from_slice(&[0, 0]);
    key
}

/// Byte offsets of every character start in a UTF-8 string, plus its length at the end.
/// Invalid UTF-8 is treated byte-wise (each byte one character).
fn character_boundaries(value: &[u8]) -> Vec<usize> {
    match std::str::from_utf8(value) {
        Ok(text) => text
            .char_indices()
            .map(|(offset, _)| offset)
            .chain(std::iter::once(value.len()))
            .collect(),
        Err(_) => (0..=value.len()).collect(),
    }
}

/// Calls `emit(kind, gram)` for every substring gram of a normalized value: initial and final
/// grams of 2..=4 characters and every 4-character window as "any".
pub fn for_each_gram(normalized: &[u8], emit: &mut dyn FnMut(u8, &[u8])) {
    let _ = try_for_each_gram(normalized, &mut |kind, gram| -> Result<(), ()> {
        emit(kind, gram);
        Ok(())
    });
}

/// Where grams go: `(kind, gram)`; an error stops the walk.
type GramSink<'a, E> = dyn FnMut(u8, &[u8]) -> Result<(), E> + 'a;

/// `for_each_gram` whose `emit` may fail (the first failure stops the walk). ASCII values,
/// nearly all of them, take byte windows directly: the character boundaries are the bytes,
/// and computing them cost an allocation per value.
fn try_for_each_gram<E>(normalized: &[u8], emit: &mut GramSink<'_, E>) -> Result<(), E> {
    if normalized.is_ascii() {
        let length = normalized.len();
        for gram_length in GRAM_LENGTH_MIN_CHARS..=GRAM_LENGTH_MAX_CHARS.min(length) {
            emit(KIND_INITIAL, &normalized[..gram_length])?;
            emit(KIND_FINAL, &normalized[length - gram_length..])?;
        }
        if length >= GRAM_LENGTH_MAX_CHARS {
            for window in normalized.windows(GRAM_LENGTH_MAX_CHARS) {
                emit(KIND_ANY, window)?;
            }
        }
        return Ok(());
    }
    try_grams_by_characters(normalized, emit)
}

/// The grams of any value, walking character boundaries (invalid UTF-8: bytes).
fn try_grams_by_characters<E>(normalized: &[u8], emit: &mut GramSink<'_, E>) -> Result<(), E> {
    let boundaries = character_boundaries(normalized);
    let char_count = boundaries.len() - 1;
    for length in GRAM_LENGTH_MIN_CHARS..=GRAM_LENGTH_MAX_CHARS.min(char_count) {
        emit(KIND_INITIAL, &normalized[..boundaries[length]])?;
        emit(KIND_FINAL, &normalized[boundaries[char_count - length]..])?;
    }
    if char_count >= GRAM_LENGTH_MAX_CHARS {
        for start in 0..=char_count - GRAM_LENGTH_MAX_CHARS {
            emit(
                KIND_ANY,
                &normalized[boundaries[start]..boundaries[start + GRAM_LENGTH_MAX_CHARS]],
            )?;
        }
    }
    Ok(())
}

/// Bytes of one assertion piece that keys are taken from (about 30 windows): any gram of a
/// part of a piece must also be in a matching value, so fewer keys only widen the candidates,
/// and a 16 MiB piece costs no more than a short one.
const ASSERTION_PIECE_BYTES_MAX: usize = 64;
/// Most index keys of one substring assertion (each costs a posting lookup).
pub const SUBSTRING_ASSERTION_KEYS_MAX: usize = 64;

/// At most `ASSERTION_PIECE_BYTES_MAX` bytes of a piece, from its start or its end, cut on a
/// character boundary when the piece is UTF-8 (grams are characters then).
fn bounded_piece(piece: &[u8], keep_end: bool) -> &[u8] {
    if piece.len() <= ASSERTION_PIECE_BYTES_MAX {
        return piece;
    }
    let text = std::str::from_utf8(piece).ok();
    let is_boundary = |at: usize| text.is_none_or(|text| text.is_char_boundary(at));
    if keep_end {
        let mut start = piece.len() - ASSERTION_PIECE_BYTES_MAX;
        while !is_boundary(start) {
            start += 1;
        }
        &piece[start..]
    } else {
        let mut end = ASSERTION_PIECE_BYTES_MAX;
        while !is_boundary(end) {
            end -= 1;
        }
        &piece[..end]
    }
}

/// The index keys (without chunk) that one substring assertion must all hit: the longest
/// usable initial / final gram, and "any" windows of 4 characters at step 2 over each piece
/// (plus the last window), from a bounded part of each piece and at most
/// `SUBSTRING_ASSERTION_KEYS_MAX` in all. The window an initial (final) gram of 4 characters
/// already pins to the start (end) is left out: every value with that gram has the window,
/// so its list is a superset and only costs a lookup. Pieces too short to form a gram add
/// no key; if no key at all can be formed the assertion is unindexed (`None`).
pub fn substring_assertion_keys(
    initial: Option<&[u8]>,
    any: &[&[u8]],
    final_: Option<&[u8]>,
) -> Option<Vec<Vec<u8>>> {
    let mut keys = Vec::new();
    if let Some(piece) = initial.map(|piece| bounded_piece(piece, false)) {
        let boundaries = character_boundaries(piece);
        let char_count = boundaries.len() - 1;
        if char_count >= GRAM_LENGTH_MIN_CHARS {
            let length = char_count.min(GRAM_LENGTH_MAX_CHARS);
            keys.push(gram_key(KIND_INITIAL, &piece[..boundaries[length]]));
        }
        push_any_windows(piece, &boundaries, Pinned::First, &mut keys);
    }
    if let Some(piece) = final_.map(|piece| bounded_piece(piece, true)) {
        let boundaries = character_boundaries(piece);
        let char_count = boundaries.len() - 1;
        if char_count >= GRAM_LENGTH_MIN_CHARS {
            let length = char_count.min(GRAM_LENGTH_MAX_CHARS);
            keys.push(gram_key(
                KIND_FINAL,
                &piece[boundaries[char_count - length]..],
            ));
        }
        push_any_windows(piece, &boundaries, Pinned::Last, &mut keys);
    }
    for piece in any {
        if keys.len() >= SUBSTRING_ASSERTION_KEYS_MAX {
            break;
        }
        let piece = bounded_piece(piece, false);
        let boundaries = character_boundaries(piece);
        push_any_windows(piece, &boundaries, Pinned::None, &mut keys);
    }
    keys.truncate(SUBSTRING_ASSERTION_KEYS_MAX);
    keys.sort();
    keys.dedup();
    if keys.is_empty() {
        None
    } else {
        Some(keys)
    }
}

/// Which window of a piece an initial or final gram already stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pinned {
    None,
    /// The piece is an initial one: its first window is its initial gram.
    First,
    /// The piece is a final one: its last window is its final gram.
    Last,
}

fn push_any_windows(piece: &[u8], boundaries: &[usize], pinned: Pinned, keys: &mut Vec<Vec<u8>>) {
    let char_count = boundaries.len() - 1;
    if char_count < GRAM_LENGTH_MAX_CHARS {
        return;
    }
    let last_start = char_count - GRAM_LENGTH_MAX_CHARS;
    let mut start = 0;
    loop {
        let pinned_here = (pinned == Pinned::First && start == 0)
            || (pinned == Pinned::Last && start == last_start);
        if !pinned_here {
            keys.push(gram_key(
                KIND_ANY,
                &piece[boundaries[start]..boundaries[start + GRAM_LENGTH_MAX_CHARS]],
            ));
        }
        if start == last_start {
            break;
        }
        start = (start + 2).min(last_start);
    }
}

/// Every index key (without chunk) that one stored normalized value produces for the given
/// kinds, handed to `emit` one at a time (built in a stack buffer: no allocation per key but
/// the ordered one). `ordering_key` is the attribute's ordering rule key of the value, when it
/// has one. Keys may repeat across values: callers dedupe per entry. The only place index keys
/// of stored values are made: single-entry writes, the bulk loader and reindex all call it.
pub fn index_keys_for_value<E>(
    kinds: IndexKinds,
    normalized: &[u8],
    ordering_key: Option<&[u8]>,
    emit: &mut dyn FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    if kinds.contains(IndexKinds::PRESENCE) {
        emit(&[KIND_PRESENCE])?;
    }
    let hashed_key = |kind: u8, bytes: &[u8]| -> [u8; 9] {
        let mut key = [kind; 9];
        key[1..].copy_from_slice(&hash_bytes(bytes));
        key
    };
    if kinds.contains(IndexKinds::EQUALITY) {
        emit(&hashed_key(KIND_EQUALITY, normalized))?;
    }
    if kinds.contains(IndexKinds::SUBSTRING) {
        try_for_each_gram(normalized, &mut |kind, gram| emit(&hashed_key(kind, gram)))?;
    }
    if kinds.contains(IndexKinds::ORDERED) {
        if let Some(key) = ordering_key {
            emit(&ordered_key(key))?;
        }
    }
    Ok(())
}

/// `index_keys_for_value` collected (for tests and small callers).
pub fn index_keys_of_value(
    kinds: IndexKinds,
    normalized: &[u8],
    ordering_key: Option<&[u8]>,
) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let _ = index_keys_for_value(
        kinds,
        normalized,
        ordering_key,
        &mut |key| -> Result<(), ()> {
            keys.push(key.to_vec());
            Ok(())
        },
    );
    keys
}

// ---------------------------------------------------------------- posting chunks

/// Chunks with at most this many IDs use the sorted-list form; larger ones a roaring bitmap.
pub const POSTING_LIST_FORM_MAX_IDS: usize = 1024;
const CHUNK_TAG_LIST: u8 = 0;
const CHUNK_TAG_ROARING: u8 = 1;

/// Encodes the low halves of one chunk's IDs (sorted, distinct) into `out` (cleared first).
pub fn encode_posting_chunk(low_halves: &RoaringBitmap, out: &mut Vec<u8>) {
    debug_assert!(low_halves.max().is_none_or(|max| max <= u16::MAX as u32));
    out.clear();
    let count = low_halves.len() as usize;
    if count <= POSTING_LIST_FORM_MAX_IDS {
        out.reserve(1 + 2 * count);
        out.push(CHUNK_TAG_LIST);
        for low in low_halves {
            out.extend_from_slice(&(low as u16).to_be_bytes());
        }
    } else {
        out.push(CHUNK_TAG_ROARING);
        low_halves
            .serialize_into(&mut *out)
            .expect("writing into a Vec cannot fail");
    }
}

/// Encodes sorted distinct low halves given as a slice (the loader's fast path).
pub fn encode_posting_chunk_sorted(low_halves: &[u16], out: &mut Vec<u8>) {
    debug_assert!(low_halves.windows(2).all(|pair| pair[0] < pair[1]));
    if low_halves.len() <= POSTING_LIST_FORM_MAX_IDS {
        out.clear();
        out.reserve(1 + 2 * low_halves.len());
        out.push(CHUNK_TAG_LIST);
        for low in low_halves {
            out.extend_from_slice(&low.to_be_bytes());
        }
    } else {
        let bitmap: RoaringBitmap = low_halves.iter().map(|&low| low as u32).collect();
        encode_posting_chunk(&bitmap, out);
    }
}

#[derive(Debug, thiserror::Error)]
#[error("corrupt posting chunk: {0}")]
pub struct CorruptChunk(pub &'static str);

/// Decodes a chunk's low halves, adding `(chunk << 16) | low` for each to `into`.
pub fn decode_posting_chunk_into(
    bytes: &[u8],
    chunk: u16,
    into: &mut RoaringBitmap,
) -> Result<(), CorruptChunk> {
    let base = (chunk as u32) << 16;
    match bytes.first() {
        Some(&CHUNK_TAG_LIST) => {
            let body = &bytes[1..];
            if !body.len().is_multiple_of(2) {
                return Err(CorruptChunk("odd list length"));
            }
            // IDs are sorted, so push via append when possible (fast path).
            let ids = body
                .chunks_exact(2)
                .map(|pair| base | u16::from_be_bytes([pair[0], pair[1]]) as u32);
            if into.is_empty() || into.max().is_some_and(|max| max < base) {
                into.append(ids)
                    .map_err(|_| CorruptChunk("list not sorted"))?;
            } else {
                into.extend(ids);
            }
            Ok(())
        }
        Some(&CHUNK_TAG_ROARING) => {
            let low_halves = RoaringBitmap::deserialize_from(&bytes[1..])
                .map_err(|_| CorruptChunk("bad roaring bytes"))?;
            if low_halves.max().is_some_and(|max| max > u16::MAX as u32) {
                return Err(CorruptChunk("low half above 65535"));
            }
            if base == 0 && into.is_empty() {
                *into = low_halves;
                return Ok(());
            }
            // The stored bitmap holds low halves: one container, keyed 0. The full IDs are the
            // same container keyed by the chunk number, so patch that key in a copy of the
            // serialized bytes instead of re-inserting up to 65,536 IDs one by one.
            let mut shifted_bytes = bytes[1..].to_vec();
            let key_offset = roaring_single_container_key_offset(&shifted_bytes)?;
            shifted_bytes[key_offset..key_offset + 2].copy_from_slice(&chunk.to_le_bytes());
            let shifted = RoaringBitmap::deserialize_from(&shifted_bytes[..])
                .map_err(|_| CorruptChunk("bad roaring bytes"))?;
            if into.is_empty() {
                *into = shifted;
            } else {
                *into |= shifted;
            }
            Ok(())
        }
        _ => Err(CorruptChunk("unknown tag")),
    }
}

/// Roaring's portable format (little-endian): a cookie, then per container a (key u16,
/// cardinality−1 u16) pair. Low halves always form exactly one container, keyed 0; this
/// returns the byte offset of that key in the serialized bitmap.
fn roaring_single_container_key_offset(serialized: &[u8]) -> Result<usize, CorruptChunk> {
    const SERIAL_COOKIE_NO_RUN_CONTAINER: u32 = 12346;
    const SERIAL_COOKIE: u32 = 12347;
    let word = |offset: usize| -> Result<u32, CorruptChunk> {
        serialized
            .get(offset..offset + 4)
            .map(|bytes| u32::from_le_bytes(bytes.try_into().expect("four bytes")))
            .ok_or(CorruptChunk("short roaring header"))
    };
    let cookie = word(0)?;
    let key_offset = if cookie == SERIAL_COOKIE_NO_RUN_CONTAINER {
        if word(4)? != 1 {
            return Err(CorruptChunk("roaring chunk is not one container"));
        }
        8
    } else if cookie & 0xFFFF == SERIAL_COOKIE {
        if (cookie >> 16) + 1 != 1 {
            return Err(CorruptChunk("roaring chunk is not one container"));
        }
        // One run-flag byte follows the cookie.
        5
    } else {
        return Err(CorruptChunk("unknown roaring cookie"));
    };
    if serialized.get(key_offset..key_offset + 4).is_none() {
        return Err(CorruptChunk("short roaring header"));
    }
    Ok(key_offset)
}

/// How many IDs an encoded chunk holds, read from its header without decoding it (the
/// search planner uses it to intersect the smallest posting lists first).
pub fn posting_chunk_id_count(bytes: &[u8]) -> Result<u32, CorruptChunk> {
    match bytes.first() {
        Some(&CHUNK_TAG_LIST) => Ok(((bytes.len() - 1) / 2) as u32),
        Some(&CHUNK_TAG_ROARING) => {
            let serialized = &bytes[1..];
            let key_offset = roaring_single_container_key_offset(serialized)?;
            let cardinality_minus_one =
                u16::from_le_bytes([serialized[key_offset + 2], serialized[key_offset + 3]]);
            Ok(cardinality_minus_one as u32 + 1)
        }
        _ => Err(CorruptChunk("unknown tag")),
    }
}

/// What `change_posting_chunk` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkChange {
    /// The ID was already present (add) or absent (remove): nothing to write.
    Unchanged,
    /// The chunk became empty: delete its row.
    Empty,
    /// `out` holds the new chunk bytes.
    Written,
}

/// Adds or removes one low half in an encoded chunk. The list form is edited in place
/// (binary search + splice), so a write costs one copy of the chunk, not a decode/encode.
pub fn change_posting_chunk(
    existing: Option<&[u8]>,
    low: u16,
    add: bool,
    out: &mut Vec<u8>,
) -> Result<ChunkChange, CorruptChunk> {
    out.clear();
    let Some(bytes) = existing else {
        if !add {
            return Ok(ChunkChange::Unchanged);
        }
        out.push(CHUNK_TAG_LIST);
        out.extend_from_slice(&low.to_be_bytes());
        return Ok(ChunkChange::Written);
    };
    match bytes.first() {
        Some(&CHUNK_TAG_LIST) => {
            let body = &bytes[1..];
            if !body.len().is_multiple_of(2) {
                return Err(CorruptChunk("odd list length"));
            }
            let count = body.len() / 2;
            match (list_position(body, low), add) {
                (Ok(_), true) | (Err(_), false) => Ok(ChunkChange::Unchanged),
                (Ok(index), false) => {
                    if count == 1 {
                        return Ok(ChunkChange::Empty);
                    }
                    out.reserve(bytes.len() - 2);
                    out.extend_from_slice(&bytes[..1 + 2 * index]);
                    out.extend_from_slice(&bytes[1 + 2 * index + 2..]);
                    Ok(ChunkChange::Written)
                }
                (Err(index), true) => {
                    if count + 1 > POSTING_LIST_FORM_MAX_IDS {
                        let mut bitmap = decode_posting_chunk_low(bytes)?;
                        bitmap.insert(low as u32);
                        encode_posting_chunk(&bitmap, out);
                        return Ok(ChunkChange::Written);
                    }
                    out.reserve(bytes.len() + 2);
                    out.extend_from_slice(&bytes[..1 + 2 * index]);
                    out.extend_from_slice(&low.to_be_bytes());
                    out.extend_from_slice(&bytes[1 + 2 * index..]);
                    Ok(ChunkChange::Written)
                }
            }
        }
        Some(&CHUNK_TAG_ROARING) => {
            if let Some(change) = edit_roaring_in_place(&bytes[1..], low, add, out) {
                return Ok(change);
            }
            let mut bitmap = decode_posting_chunk_low(bytes)?;
            let changed = if add {
                bitmap.insert(low as u32)
            } else {
                bitmap.remove(low as u32)
            };
            if !changed {
                return Ok(ChunkChange::Unchanged);
            }
            if bitmap.is_empty() {
                return Ok(ChunkChange::Empty);
            }
            encode_posting_chunk(&bitmap, out);
            Ok(ChunkChange::Written)
        }
        _ => Err(CorruptChunk("unknown tag")),
    }
}

/// The roaring serialization of a chunk's low halves as `encode_posting_chunk` writes it: no
/// run containers, one container keyed 0, so a fixed 16-byte header (cookie, count, key,
/// cardinality - 1, offset) and then the array (cardinality u16 LE) or the bitmap (8 KiB).
const ROARING_COOKIE_NO_RUNS: u32 = 12346;
const ROARING_HEADER_BYTES: usize = 16;
const ROARING_ARRAY_MAX: usize = 4096;
const ROARING_BITMAP_BYTES: usize = 8192;

/// Adds or removes `low` in a roaring chunk's bytes without decoding them: a bit set or
/// cleared in the bitmap form, a value spliced into the array form, and the cardinality
/// rewritten. None when the change would cross a form's bounds (array ↔ bitmap at 4,096, back
/// to the list form at 1,024) or the bytes are not of the one-container shape: the caller
/// decodes and encodes, and the result is the same bytes either way (tests).
fn edit_roaring_in_place(
    serialized: &[u8],
    low: u16,
    add: bool,
    out: &mut Vec<u8>,
) -> Option<ChunkChange> {
    let header = serialized.get(..ROARING_HEADER_BYTES)?;
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let half = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
    if word(0) != ROARING_COOKIE_NO_RUNS
        || word(4) != 1
        || half(8) != 0
        || word(12) as usize != ROARING_HEADER_BYTES
    {
        return None;
    }
    let cardinality = half(10) as usize + 1;
    let data = &serialized[ROARING_HEADER_BYTES..];
    let new_cardinality = if cardinality > ROARING_ARRAY_MAX {
        edit_roaring_bitmap(data, low, add, cardinality)?
    } else {
        edit_roaring_array(data, low, add, cardinality)?
    };
    let Some(new_cardinality) = new_cardinality else {
        return Some(ChunkChange::Unchanged);
    };
    out.clear();
    out.push(CHUNK_TAG_ROARING);
    out.extend_from_slice(&header[..10]);
    out.extend_from_slice(&((new_cardinality - 1) as u16).to_le_bytes());
    out.extend_from_slice(&header[12..]);
    if cardinality > ROARING_ARRAY_MAX {
        out.extend_from_slice(data);
        let byte = 1 + ROARING_HEADER_BYTES + low as usize / 8;
        out[byte] ^= 1 << (low % 8);
    } else {
        let values = &data[..2 * cardinality];
        let index = roaring_array_position(values, low).unwrap_or_else(|index| index);
        out.extend_from_slice(&values[..2 * index]);
        if add {
            out.extend_from_slice(&low.to_le_bytes());
            out.extend_from_slice(&values[2 * index..]);
        } else {
            out.extend_from_slice(&values[2 * index + 2..]);
        }
    }
    Some(ChunkChange::Written)
}

/// The new cardinality of a bitmap container after the change (inner None: nothing to
/// change); None when it would leave the bitmap form.
fn edit_roaring_bitmap(
    data: &[u8],
    low: u16,
    add: bool,
    cardinality: usize,
) -> Option<Option<usize>> {
    if data.len() != ROARING_BITMAP_BYTES {
        return None;
    }
    let present = data[low as usize / 8] & (1 << (low % 8)) != 0;
    match (present, add) {
        (true, true) | (false, false) => Some(None),
        (false, true) => Some(Some(cardinality + 1)),
        (true, false) if cardinality - 1 > ROARING_ARRAY_MAX => Some(Some(cardinality - 1)),
        (true, false) => None,
    }
}

/// As `edit_roaring_bitmap`, for an array container.
fn edit_roaring_array(
    data: &[u8],
    low: u16,
    add: bool,
    cardinality: usize,
) -> Option<Option<usize>> {
    if data.len() != 2 * cardinality {
        return None;
    }
    match (roaring_array_position(data, low), add) {
        (Ok(_), true) | (Err(_), false) => Some(None),
        (Err(_), true) if cardinality < ROARING_ARRAY_MAX => Some(Some(cardinality + 1)),
        (Ok(_), false) if cardinality - 1 > POSTING_LIST_FORM_MAX_IDS => {
            Some(Some(cardinality - 1))
        }
        _ => None,
    }
}

/// Where `low` is in a roaring array container's values (u16 LE, sorted).
fn roaring_array_position(values: &[u8], low: u16) -> Result<usize, usize> {
    sorted_u16_position(values, low, u16::from_le_bytes)
}

/// Where `low` is in the body of a list chunk (sorted u16 BE, even length): `Ok(index)` when
/// present, else `Err(index)` where it would go.
fn list_position(body: &[u8], low: u16) -> Result<usize, usize> {
    sorted_u16_position(body, low, u16::from_be_bytes)
}

/// Binary search of `low` among sorted u16 values stored two bytes each (`read` decodes one),
/// with a fast path past the largest (IDs grow with time, so writes mostly append).
fn sorted_u16_position(bytes: &[u8], low: u16, read: fn([u8; 2]) -> u16) -> Result<usize, usize> {
    let count = bytes.len() / 2;
    let at = |index: usize| read([bytes[2 * index], bytes[2 * index + 1]]);
    if count > 0 && at(count - 1) < low {
        return Err(count);
    }
    let (mut low_index, mut high_index) = (0, count);
    while low_index < high_index {
        let middle = (low_index + high_index) / 2;
        match at(middle).cmp(&low) {
            std::cmp::Ordering::Less => low_index = middle + 1,
            std::cmp::Ordering::Greater => high_index = middle,
            std::cmp::Ordering::Equal => return Ok(middle),
        }
    }
    Err(low_index)
}

/// Whether a chunk is in list form (sorted u16 BE IDs, looked up by `list_chunk_contains`).
pub fn is_list_chunk(bytes: &[u8]) -> bool {
    bytes.first() == Some(&CHUNK_TAG_LIST) && bytes.len() % 2 == 1
}

/// Whether a chunk in list form holds `low`, by binary search (nothing decoded); None for a
/// chunk in roaring form or a damaged one (the caller decodes it instead, which reports it).
pub fn list_chunk_contains(bytes: &[u8], low: u16) -> Option<bool> {
    let body = bytes.strip_prefix(&[CHUNK_TAG_LIST])?;
    if !body.len().is_multiple_of(2) {
        return None;
    }
    Some(list_position(body, low).is_ok())
}

/// Decodes a chunk to its low halves.
pub fn decode_posting_chunk_low(bytes: &[u8]) -> Result<RoaringBitmap, CorruptChunk> {
    let mut bitmap = RoaringBitmap::new();
    decode_posting_chunk_into(bytes, 0, &mut bitmap)?;
    Ok(bitmap)
}

// ---------------------------------------------------------------- out-of-line values

/// Attribute types whose values always live out of line in `id2value` (group membership: the
/// attributes of large groups), whatever their count.
pub const OUT_OF_LINE_ALWAYS: [&str; 3] = ["member", "uniqueMember", "memberUid"];
/// Any other attribute description with more values than this lives out of line too (editing
/// one block of values then costs less than rewriting and re-checking them all on each change;
/// below it the record stays one read).
pub const OUT_OF_LINE_VALUES_MIN: usize = 256;
/// Bytes of the normalized value kept whole in an `id2value` key. LMDB keys are at most 511
/// bytes: a longer normalized value is keyed by its first bytes and its 8-byte hash (then the
/// key's tail is exactly this + 8 long, so the two forms never collide) and stored whole in the
/// row's value.
pub const VALUE_KEY_NORMALIZED_BYTES_MAX: usize = 480;
/// Key bytes before the normalized value: entry ID and description number.
pub const VALUE_KEY_PREFIX_BYTES: usize = 8;

const VALUE_TAG_SAME: u8 = 0;
const VALUE_TAG_ORIGINAL: u8 = 1;
const VALUE_TAG_LONG: u8 = 2;

/// Whether an attribute description lives out of line: `always` (its type is one of
/// [`OUT_OF_LINE_ALWAYS`]) or more than [`OUT_OF_LINE_VALUES_MIN`] values. A pure function of
/// the entry's content, so a load and single-entry writes lay an entry out alike.
pub fn is_out_of_line(always: bool, value_count: usize) -> bool {
    value_count > 0 && (always || value_count > OUT_OF_LINE_VALUES_MIN)
}

/// The key prefix of every out-of-line value of entry `id` (4 bytes) or of one of its
/// descriptions (8 bytes, with `description_number`).
pub fn value_key_prefix(id: EntryId, description_number: Option<u32>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&id.to_be_bytes());
    if let Some(number) = description_number {
        out.extend_from_slice(&number.to_be_bytes());
    }
}

/// The `id2value` key of one value: prefix ‖ normalized (≤ [`VALUE_KEY_NORMALIZED_BYTES_MAX`]
/// bytes) or prefix ‖ its first bytes ‖ xxh3-64 of the whole (BE). Keys of one description sort
/// by normalized value (long ones by their first bytes, then hash).
pub fn encode_value_key(
    id: EntryId,
    description_number: u32,
    normalized: &[u8],
    out: &mut Vec<u8>,
) {
    value_key_prefix(id, Some(description_number), out);
    out.extend_from_slice(&value_key_tail(normalized));
}

/// The part of an `id2value` key after the prefix: the normalized value, or its first bytes
/// and hash when longer than [`VALUE_KEY_NORMALIZED_BYTES_MAX`].
pub fn value_key_tail(normalized: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if normalized.len() <= VALUE_KEY_NORMALIZED_BYTES_MAX {
        return std::borrow::Cow::Borrowed(normalized);
    }
    let mut tail = Vec::with_capacity(VALUE_KEY_NORMALIZED_BYTES_MAX + 8);
    tail.extend_from_slice(&normalized[..VALUE_KEY_NORMALIZED_BYTES_MAX]);
    tail.extend_from_slice(&hash_bytes(normalized));
    std::borrow::Cow::Owned(tail)
}

/// One out-of-line value as its `id2value` row: the key ([`encode_value_key`]) and the value,
/// a tag byte then: nothing (tag 0: the original is the normalized form in the key), the
/// original (tag 1: the normalized form is the key's tail), or (tag 2, a long value) varint
/// original length ‖ original ‖ normalized.
pub fn encode_value_row(
    id: EntryId,
    description_number: u32,
    original: &[u8],
    normalized: &[u8],
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
) {
    encode_value_key(id, description_number, normalized, key);
    value.clear();
    if normalized.len() > VALUE_KEY_NORMALIZED_BYTES_MAX {
        value.push(VALUE_TAG_LONG);
        push_varint(original.len() as u64, value);
        value.extend_from_slice(original);
        value.extend_from_slice(normalized);
    } else if original == normalized {
        value.push(VALUE_TAG_SAME);
    } else {
        value.push(VALUE_TAG_ORIGINAL);
        value.extend_from_slice(original);
    }
}

/// One decoded `id2value` row, borrowing key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRow<'a> {
    pub id: EntryId,
    pub description_number: u32,
    pub original: &'a [u8],
    pub normalized: &'a [u8],
}

/// Decodes an `id2value` row; None when malformed (wrong tag, a key whose tail does not match
/// the value's form, a long value whose key is not its own).
pub fn decode_value_row<'a>(key: &'a [u8], value: &'a [u8]) -> Option<ValueRow<'a>> {
    let id = decode_id(key.get(..4)?)?;
    let description_number = u32::from_be_bytes(key.get(4..8)?.try_into().ok()?);
    let (original, normalized) = decode_value_row_tail(&key[VALUE_KEY_PREFIX_BYTES..], value)?;
    Some(ValueRow {
        id,
        description_number,
        original,
        normalized,
    })
}

/// The (original, normalized) forms of an `id2value` row from the key's tail (the key after its
/// [`VALUE_KEY_PREFIX_BYTES`]) and the value; None when malformed. A walk of one attribute's rows
/// has checked the prefix once per row already: this is the per-value part of
/// [`decode_value_row`].
#[inline]
pub fn decode_value_row_tail<'a>(tail: &'a [u8], value: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
    let (&tag, rest) = value.split_first()?;
    let (original, normalized) = match tag {
        VALUE_TAG_SAME if tail.len() <= VALUE_KEY_NORMALIZED_BYTES_MAX => (tail, tail),
        VALUE_TAG_ORIGINAL if tail.len() <= VALUE_KEY_NORMALIZED_BYTES_MAX => (rest, tail),
        VALUE_TAG_LONG if tail.len() == VALUE_KEY_NORMALIZED_BYTES_MAX + 8 => {
            let mut position = 0;
            let length = usize::try_from(read_varint(rest, &mut position)?).ok()?;
            let original = rest.get(position..position.checked_add(length)?)?;
            let normalized = &rest[position + length..];
            let expected_tail = normalized
                .get(..VALUE_KEY_NORMALIZED_BYTES_MAX)
                .filter(|_| normalized.len() > VALUE_KEY_NORMALIZED_BYTES_MAX)?;
            if tail[..VALUE_KEY_NORMALIZED_BYTES_MAX] != *expected_tail
                || tail[VALUE_KEY_NORMALIZED_BYTES_MAX..] != hash_bytes(normalized)
            {
                return None;
            }
            (original, normalized)
        }
        _ => return None,
    };
    Some((original, normalized))
}

/// Appends one `id2value` row to a framed sequence (varint key length ‖ key ‖ varint value
/// length ‖ value): how an entry's out-of-line rows travel from the encoder to the writer.
pub fn push_framed_row(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    push_varint(key.len() as u64, out);
    out.extend_from_slice(key);
    push_varint(value.len() as u64, out);
    out.extend_from_slice(value);
}

/// The (key, value) rows of a framed sequence ([`push_framed_row`]); stops at a malformed frame.
pub fn framed_rows(bytes: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
    let mut position = 0;
    std::iter::from_fn(move || {
        let take = |position: &mut usize| -> Option<&[u8]> {
            let length = usize::try_from(read_varint(bytes, position)?).ok()?;
            let slice = bytes.get(*position..position.checked_add(length)?)?;
            *position += length;
            Some(slice)
        };
        let key = take(&mut position)?;
        let value = take(&mut position)?;
        Some((key, value))
    })
}

// ---------------------------------------------------------------- out-of-line value blocks

/// A value block (one `id2value` row) holds values while its entries' bytes stay within this:
/// a whole-group walk is one cursor step per block, not per value. A single value longer than
/// the bound is a block of its own.
pub const VALUE_BLOCK_BYTES_MAX: usize = 4096;
/// And at most this many values (a bound on the in-block scan of a point lookup).
pub const VALUE_BLOCK_VALUES_MAX: usize = 128;

/// The values of one description in blocks: `id2value` rows keyed by prefix ([`value_key_prefix`])
/// ‖ the key tail ([`value_key_tail`]) of the block's first value, each row a sorted run of
/// values, each value framed as varint tail length ‖ tail ‖ varint row-value length ‖ row value
/// (the per-value form of [`encode_value_row`]). Values of a block sort strictly by tail, and a
/// block's last tail sorts below the next block's first.
pub fn push_block_value(tail: &[u8], row_value: &[u8], out: &mut Vec<u8>) {
    push_framed_row(tail, row_value, out);
}

/// Bytes one value takes in a block.
pub fn block_value_size(tail: &[u8], row_value: &[u8]) -> usize {
    varint_size(tail.len() as u64)
        + tail.len()
        + varint_size(row_value.len() as u64)
        + row_value.len()
}

fn varint_size(mut value: u64) -> usize {
    let mut size = 1;
    while value >= 0x80 {
        value >>= 7;
        size += 1;
    }
    size
}

/// One value in a block: its key tail and its row value (as [`encode_value_row`] makes it).
pub type BlockValue<'a> = (&'a [u8], &'a [u8]);

/// Where packed blocks go: each block's key and bytes, in key order.
pub type BlockSink<'s, E> = dyn FnMut(&[u8], &[u8]) -> Result<(), E> + 's;

/// A value block that does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MalformedBlock;

impl std::fmt::Display for MalformedBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed id2value block")
    }
}

/// A walk over a block's (tail, row value) pairs, borrowing the block.
#[derive(Clone, Debug)]
pub struct BlockValues<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> BlockValues<'a> {
    pub fn new(block: &'a [u8]) -> Self {
        BlockValues {
            bytes: block,
            position: 0,
        }
    }

    /// Byte offset of the next value in the block.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The next (tail, row value); None at the block's end.
    #[inline]
    pub fn next_value(&mut self) -> Result<Option<BlockValue<'a>>, MalformedBlock> {
        if self.position >= self.bytes.len() {
            return Ok(None);
        }
        let tail = self.take().ok_or(MalformedBlock)?;
        let row_value = self.take().ok_or(MalformedBlock)?;
        Ok(Some((tail, row_value)))
    }

    /// The next value's original form: `next_value` and `decode_value_row_tail` in one step,
    /// with a short path for the common rows (tail and row under 128 bytes each, the original
    /// being the tail or following the row's tag byte); None at the end.
    #[inline]
    pub fn next_original(&mut self) -> Result<Option<&'a [u8]>, MalformedBlock> {
        if let Some((original, end)) = self.short_row() {
            self.position = end;
            return Ok(Some(original));
        }
        let Some((tail, row_value)) = self.next_value()? else {
            return Ok(None);
        };
        let (original, _) = decode_value_row_tail(tail, row_value).ok_or(MalformedBlock)?;
        Ok(Some(original))
    }

    /// The original form and end of the row at the position when both its lengths take one
    /// byte and its tag is `VALUE_TAG_SAME` or `VALUE_TAG_ORIGINAL`.
    #[inline]
    fn short_row(&self) -> Option<(&'a [u8], usize)> {
        let bytes = self.bytes;
        let tail_length = usize::from(*bytes.get(self.position).filter(|byte| **byte < 0x80)?);
        let tail_start = self.position + 1;
        let tail = bytes.get(tail_start..tail_start + tail_length)?;
        let row_at = tail_start + tail_length;
        let row_length = usize::from(*bytes.get(row_at).filter(|byte| **byte < 0x80)?);
        let row_end = row_at + 1 + row_length;
        match bytes.get(row_at + 1..row_end)? {
            [VALUE_TAG_SAME] => Some((tail, row_end)),
            [VALUE_TAG_ORIGINAL, original @ ..] => Some((original, row_end)),
            _ => None,
        }
    }

    #[inline]
    fn take(&mut self) -> Option<&'a [u8]> {
        let length = usize::try_from(read_varint(self.bytes, &mut self.position)?).ok()?;
        let end = self.position.checked_add(length)?;
        let slice = self.bytes.get(self.position..end)?;
        self.position = end;
        Some(slice)
    }
}

/// A block's values, checked: each decodes, tails strictly ascending. Returns their count.
pub fn check_value_block(block: &[u8]) -> Result<usize, MalformedBlock> {
    let mut values = BlockValues::new(block);
    let (mut count, mut last): (usize, Option<&[u8]>) = (0, None);
    while let Some((tail, row_value)) = values.next_value()? {
        decode_value_row_tail(tail, row_value).ok_or(MalformedBlock)?;
        if last.is_some_and(|last| last >= tail) {
            return Err(MalformedBlock);
        }
        last = Some(tail);
        count += 1;
    }
    Ok(count)
}

/// The (first, last) tails of a block (a [`BlockValue`]-shaped pair of tails); None when empty.
pub fn block_tail_bounds(block: &[u8]) -> Result<Option<BlockValue<'_>>, MalformedBlock> {
    let mut values = BlockValues::new(block);
    let Some((first, _)) = values.next_value()? else {
        return Ok(None);
    };
    let mut last = first;
    while let Some((tail, _)) = values.next_value()? {
        last = tail;
    }
    Ok(Some((first, last)))
}

/// Where a tail belongs in a block: the offset of its slot (the first value not below it)
/// and, when the value there is the tail's own, its row value and the offset past it.
type BlockSlot<'a> = (usize, Option<(&'a [u8], usize)>);

/// The [`BlockSlot`] of `tail`: the one in-block scan of a point lookup, insert and remove.
fn block_slot<'a>(block: &'a [u8], tail: &[u8]) -> Result<BlockSlot<'a>, MalformedBlock> {
    let mut values = BlockValues::new(block);
    loop {
        let start = values.position();
        match values.next_value()? {
            Some((found, _)) if found < tail => continue,
            Some((found, row_value)) if found == tail => {
                return Ok((start, Some((row_value, values.position()))))
            }
            _ => return Ok((start, None)),
        }
    }
}

/// The row value of `tail` in a block, if there: a scan that stops past it.
pub fn block_find<'a>(block: &'a [u8], tail: &[u8]) -> Result<Option<&'a [u8]>, MalformedBlock> {
    Ok(block_slot(block, tail)?.1.map(|(row_value, _)| row_value))
}

/// A block with `tail`'s value set to `row_value` (inserted in order, or replacing the value of
/// the same tail) into `out` (cleared first).
pub fn block_insert(
    block: &[u8],
    tail: &[u8],
    row_value: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), MalformedBlock> {
    out.clear();
    let (start, same) = block_slot(block, tail)?;
    out.extend_from_slice(&block[..start]);
    push_block_value(tail, row_value, out);
    let rest = same.map_or(start, |(_, end)| end);
    out.extend_from_slice(&block[rest..]);
    Ok(())
}

/// A block without `tail`'s value into `out` (cleared first); false (and `out` empty) when the
/// block holds no such value.
pub fn block_remove(block: &[u8], tail: &[u8], out: &mut Vec<u8>) -> Result<bool, MalformedBlock> {
    out.clear();
    let (start, same) = block_slot(block, tail)?;
    let Some((_, end)) = same else {
        return Ok(false);
    };
    out.extend_from_slice(&block[..start]);
    out.extend_from_slice(&block[end..]);
    Ok(true)
}

/// Whether a block is past its bounds ([`VALUE_BLOCK_BYTES_MAX`], [`VALUE_BLOCK_VALUES_MAX`])
/// and must be split; a block of one value never is.
pub fn block_over_bounds(block: &[u8]) -> Result<bool, MalformedBlock> {
    let mut values = BlockValues::new(block);
    let mut count = 0;
    while values.next_value()?.is_some() {
        count += 1;
    }
    Ok(count > 1 && (block.len() > VALUE_BLOCK_BYTES_MAX || count > VALUE_BLOCK_VALUES_MAX))
}

/// A block a delete leaves under this many bytes merges with the next (else the previous) block
/// of its description when both fit half the bounds ([`should_merge_value_blocks`]): deletes do not wear blocks down
/// to one value each (a walk would be a cursor step per value again).
pub const VALUE_BLOCK_MERGE_BELOW_BYTES: usize = VALUE_BLOCK_BYTES_MAX / 4;

/// Whether a block a delete left (`edited`, not empty) and a neighbour (`next`, same
/// description) become one: `edited` under [`VALUE_BLOCK_MERGE_BELOW_BYTES`] and together
/// within half the bounds, so the merged block has room to grow before it splits again.
pub fn should_merge_value_blocks(edited: &[u8], next: &[u8]) -> Result<bool, MalformedBlock> {
    if edited.len() >= VALUE_BLOCK_MERGE_BELOW_BYTES
        || edited.len() + next.len() > VALUE_BLOCK_BYTES_MAX / 2
    {
        return Ok(false);
    }
    let count = |block| -> Result<usize, MalformedBlock> {
        let mut values = BlockValues::new(block);
        let mut count = 0;
        while values.next_value()?.is_some() {
            count += 1;
        }
        Ok(count)
    };
    Ok(count(edited)? + count(next)? <= VALUE_BLOCK_VALUES_MAX / 2)
}

/// Packs sorted per-value rows (full `id2value` value keys and row values, as
/// [`encode_value_row`] makes them, ascending) into blocks of at most `bytes_max` bytes and
/// `values_max` values (a value past `bytes_max` alone), emitting each block's key and bytes
/// in key order. A block never spans two descriptions. Whole writes use the full bounds; a
/// point write splitting a block uses half of them, so the halves have room to grow.
pub fn pack_value_blocks<'a, E>(
    rows: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    bytes_max: usize,
    values_max: usize,
    emit: &mut BlockSink<'_, E>,
) -> Result<(), E> {
    let (mut key, mut block, mut count) = (Vec::new(), Vec::new(), 0usize);
    for (row_key, row_value) in rows {
        let (prefix, tail) = row_key.split_at(VALUE_KEY_PREFIX_BYTES.min(row_key.len()));
        let full = count > 0
            && (key.get(..VALUE_KEY_PREFIX_BYTES) != Some(prefix)
                || count >= values_max
                || block.len() + block_value_size(tail, row_value) > bytes_max);
        if full {
            emit(&key, &block)?;
            block.clear();
            count = 0;
        }
        if count == 0 {
            key.clear();
            key.extend_from_slice(row_key);
        }
        push_block_value(tail, row_value, &mut block);
        count += 1;
    }
    if count > 0 {
        emit(&key, &block)?;
    }
    Ok(())
}

/// The blocks (key, bytes) of framed per-value rows ([`push_framed_row`] of
/// [`encode_value_row`]'s rows, key order), full bounds: what a whole write of an entry's
/// out-of-line values stores, the loader and the store alike.
pub fn value_blocks_of_framed(framed: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut blocks = Vec::new();
    let _ = pack_value_blocks::<std::convert::Infallible>(
        framed_rows(framed),
        VALUE_BLOCK_BYTES_MAX,
        VALUE_BLOCK_VALUES_MAX,
        &mut |key, block| {
            blocks.push((key.to_vec(), block.to_vec()));
            Ok(())
        },
    );
    blocks
}

/// Splits a block of one description (`prefix`) past its bounds into blocks of half the bounds,
/// emitting each block's key and bytes in key order.
pub fn split_value_block<E>(
    prefix: &[u8],
    block: &[u8],
    emit: &mut BlockSink<'_, E>,
) -> Result<Result<(), E>, MalformedBlock> {
    let mut rows = Vec::new();
    let mut values = BlockValues::new(block);
    while let Some((tail, row_value)) = values.next_value()? {
        let mut key = prefix.to_vec();
        key.extend_from_slice(tail);
        rows.push((key, row_value));
    }
    Ok(pack_value_blocks(
        rows.iter().map(|(key, value)| (key.as_slice(), *value)),
        VALUE_BLOCK_BYTES_MAX / 2,
        VALUE_BLOCK_VALUES_MAX / 2,
        emit,
    ))
}

// ---------------------------------------------------------------- varints

/// LEB128 unsigned varint.
#[inline]
pub fn push_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a varint at `*position`, advancing it.
#[inline]
pub fn read_varint(bytes: &[u8], position: &mut usize) -> Option<u64> {
    // Most varints (lengths, counts, description numbers) fit one byte: decode those inline.
    if let Some(&byte) = bytes.get(*position) {
        if byte < 0x80 {
            *position += 1;
            return Some(byte as u64);
        }
    }
    read_varint_multi_byte(bytes, position)
}

fn read_varint_multi_byte(bytes: &[u8], position: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = *bytes.get(*position)?;
        *position += 1;
        if shift >= 64 {
            return None;
        }
        value |= ((byte & 0x7F) as u64) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {

    /// The in-place roaring edit gives the bytes (and the answer) a decode, change and encode
    /// gives, at every size around the forms' bounds (1,024 list/roaring, 4,096 array/bitmap).
    #[test]
    fn roaring_chunks_edited_in_place_match_a_decode_and_encode() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut in_place = 0;
        for size in [
            1025, 1026, 1100, 2000, 4095, 4096, 4097, 4098, 5000, 30_000, 65_535,
        ] {
            let mut bitmap = RoaringBitmap::new();
            while bitmap.len() < size {
                bitmap.insert((next() % 65_536) as u32);
            }
            let mut bytes = Vec::new();
            encode_posting_chunk(&bitmap, &mut bytes);
            for step in 0..300 {
                let low = if step % 2 == 0 {
                    bitmap.select((next() % bitmap.len()) as u32).unwrap() as u16
                } else {
                    (next() % 65_536) as u16
                };
                let add = next() % 2 == 0;
                let changed = if add {
                    bitmap.insert(low as u32)
                } else {
                    bitmap.remove(low as u32)
                };
                let mut expected = Vec::new();
                let expected_change = match (changed, bitmap.is_empty()) {
                    (false, _) => ChunkChange::Unchanged,
                    (true, true) => ChunkChange::Empty,
                    (true, false) => {
                        encode_posting_chunk(&bitmap, &mut expected);
                        ChunkChange::Written
                    }
                };
                let mut scratch = Vec::new();
                in_place += usize::from(
                    bytes[0] == CHUNK_TAG_ROARING
                        && edit_roaring_in_place(&bytes[1..], low, add, &mut scratch).is_some(),
                );
                let mut out = Vec::new();
                let change = change_posting_chunk(Some(&bytes), low, add, &mut out).unwrap();
                assert_eq!(change, expected_change, "size {size} step {step}");
                if change == ChunkChange::Written {
                    assert_eq!(out, expected, "size {size} step {step} low {low} add {add}");
                    bytes = out;
                }
            }
        }
        // Not vacuous: most changes took the in-place path.
        assert!(in_place > 2000, "{in_place}");
    }

    use super::*;

    #[test]
    fn node_round_trip() {
        let node = Node {
            parent: 7,
            subtree_size: 42,
            child_count: 3,
            rdn_original: b"CN=Foo",
            rdn_normalized: b"cn=foo",
        };
        let mut bytes = Vec::new();
        encode_node(&node, &mut bytes);
        assert_eq!(decode_node(&bytes), Some(node));
        assert_eq!(decode_node(&bytes[..5]), None);
    }

    /// The ASCII byte-window path gives exactly the character path's grams, in order.
    #[test]
    fn ascii_grams_equal_character_grams() {
        for value in [
            "",
            "a",
            "ab",
            "abc",
            "abcd",
            "abcde",
            "jonathan smith",
            "12345",
        ] {
            let (mut fast, mut by_characters) = (Vec::new(), Vec::new());
            for_each_gram(value.as_bytes(), &mut |kind, gram| {
                fast.push((kind, gram.to_vec()))
            });
            let _ =
                try_grams_by_characters(value.as_bytes(), &mut |kind, gram| -> Result<(), ()> {
                    by_characters.push((kind, gram.to_vec()));
                    Ok(())
                });
            assert_eq!(fast, by_characters, "{value:?}");
        }
    }

    #[test]
    fn grams_of_short_and_long_values() {
        let mut grams = Vec::new();
        for_each_gram(b"abcde", &mut |kind, gram| {
            grams.push((kind, String::from_utf8(gram.to_vec()).unwrap()))
        });
        let expected: Vec<(u8, String)> = vec![
            (KIND_INITIAL, "ab".into()),
            (KIND_FINAL, "de".into()),
            (KIND_INITIAL, "abc".into()),
            (KIND_FINAL, "cde".into()),
            (KIND_INITIAL, "abcd".into()),
            (KIND_FINAL, "bcde".into()),
            (KIND_ANY, "abcd".into()),
            (KIND_ANY, "bcde".into()),
        ];
        assert_eq!(grams, expected);
        let mut count = 0;
        for_each_gram(b"a", &mut |_, _| count += 1);
        assert_eq!(count, 0);
        // Multi-byte characters are never split.
        for_each_gram("żółwie".as_bytes(), &mut |_, gram| {
            assert!(std::str::from_utf8(gram).is_ok())
        });
    }

    #[test]
    fn assertion_grams_are_a_subset_of_value_grams() {
        let value_keys = index_keys_of_value(IndexKinds::SUBSTRING, b"jonathan smith", None);
        let keys = substring_assertion_keys(Some(b"jona"), &[b"than s"], Some(b"mith")).unwrap();
        for key in keys {
            assert!(value_keys.contains(&key));
        }
        assert!(substring_assertion_keys(Some(b"j"), &[b"ab"], None).is_none());
    }

    #[test]
    fn windows_pinned_by_an_initial_or_final_gram_are_left_out() {
        let keys = substring_assertion_keys(Some(b"u0001234@"), &[], None).unwrap();
        let expected: Vec<Vec<u8>> = vec![
            gram_key(KIND_INITIAL, b"u000"),
            gram_key(KIND_ANY, b"0012"),
            gram_key(KIND_ANY, b"1234"),
            gram_key(KIND_ANY, b"234@"),
        ];
        assert_eq!(keys.len(), expected.len());
        assert!(expected.iter().all(|key| keys.contains(key)));
        let keys = substring_assertion_keys(None, &[], Some(b"@example")).unwrap();
        assert!(keys.contains(&gram_key(KIND_FINAL, b"mple")));
        assert!(!keys.contains(&gram_key(KIND_ANY, b"mple")));
        assert!(keys.contains(&gram_key(KIND_ANY, b"@exa")));
        // A piece of exactly four characters: the gram alone.
        let keys = substring_assertion_keys(Some(b"abcd"), &[b"abcd"], Some(b"abcd")).unwrap();
        assert_eq!(keys.len(), 3);
    }

    #[test]
    fn huge_assertions_give_few_keys_all_from_a_matching_value() {
        // Multi-byte characters, so a cut inside a character would make foreign grams.
        let piece = "żółw".repeat(100_000);
        // The value is the piece itself: it starts with, ends with and contains the piece.
        let value = piece.clone();
        let value_keys = index_keys_of_value(IndexKinds::SUBSTRING, value.as_bytes(), None);
        let many_pieces: Vec<&[u8]> = vec![piece.as_bytes(); 1000];
        for keys in [
            substring_assertion_keys(Some(piece.as_bytes()), &[], Some(piece.as_bytes())),
            substring_assertion_keys(None, &many_pieces, None),
        ] {
            let keys = keys.expect("keys");
            assert!(keys.len() <= SUBSTRING_ASSERTION_KEYS_MAX, "{}", keys.len());
            for key in keys {
                assert!(value_keys.contains(&key));
            }
        }
    }

    #[test]
    fn ordered_keys_keep_order_and_are_prefix_free() {
        let values: Vec<&[u8]> = vec![b"", b"\0", b"\0\0", b"\0a", b"a", b"ab", b"b"];
        for pair in values.windows(2) {
            let mut left = ordered_key(pair[0]);
            let mut right = ordered_key(pair[1]);
            assert!(left < right, "{:?} < {:?}", pair[0], pair[1]);
            // Appending any chunk keeps the order.
            left.extend_from_slice(&[0xFF, 0xFF]);
            right.extend_from_slice(&[0, 0]);
            assert!(left < right);
        }
    }

    #[test]
    fn posting_chunk_both_forms() {
        for count in [
            0usize,
            1,
            5,
            POSTING_LIST_FORM_MAX_IDS,
            POSTING_LIST_FORM_MAX_IDS + 1,
            40_000,
        ] {
            let low: RoaringBitmap = (0..count as u32).map(|i| (i * 7919) % 65536).collect();
            let mut bytes = Vec::new();
            encode_posting_chunk(&low, &mut bytes);
            assert_eq!(posting_chunk_id_count(&bytes).unwrap(), count as u32);
            for chunk in [0u16, 3, u16::MAX] {
                let mut decoded = RoaringBitmap::new();
                decode_posting_chunk_into(&bytes, chunk, &mut decoded).unwrap();
                let base = (chunk as u32) << 16;
                let expected: RoaringBitmap = low.iter().map(|l| base | l).collect();
                assert_eq!(decoded, expected);
                // Into a bitmap that already holds IDs of other chunks (the union path).
                let mut prefilled: RoaringBitmap = [1u32, 70_000, u32::MAX].into_iter().collect();
                decode_posting_chunk_into(&bytes, chunk, &mut prefilled).unwrap();
                let mut expected_union = expected.clone();
                expected_union.extend([1u32, 70_000, u32::MAX]);
                assert_eq!(prefilled, expected_union);
            }
            let sorted: Vec<u16> = low.iter().map(|l| l as u16).collect();
            let mut bytes_sorted = Vec::new();
            encode_posting_chunk_sorted(&sorted, &mut bytes_sorted);
            assert_eq!(bytes, bytes_sorted);
        }
        assert!(decode_posting_chunk_low(&[9]).is_err());
        assert!(decode_posting_chunk_low(&[0, 1]).is_err());
    }

    #[test]
    fn run_container_chunks_decode_into_any_chunk() {
        // The roaring format with run containers (written after `optimize`) keeps its key at
        // another offset; chunks written that way must decode and count too.
        let mut low: RoaringBitmap = (100..30_000u32).collect();
        assert!(low.optimize());
        let mut bytes = vec![CHUNK_TAG_ROARING];
        low.serialize_into(&mut bytes).unwrap();
        assert_eq!(posting_chunk_id_count(&bytes).unwrap(), 29_900);
        let mut decoded = RoaringBitmap::new();
        decode_posting_chunk_into(&bytes, 7, &mut decoded).unwrap();
        assert_eq!(decoded, ((7 << 16) + 100..(7 << 16) + 30_000).collect());
        // Two containers cannot be low halves.
        let two: RoaringBitmap = [1u32, 70_000].into_iter().collect();
        let mut bad = vec![CHUNK_TAG_ROARING];
        two.serialize_into(&mut bad).unwrap();
        assert!(decode_posting_chunk_into(&bad, 1, &mut RoaringBitmap::new()).is_err());
    }

    #[test]
    fn chunk_edits_match_set_semantics() {
        use rand::{Rng, SeedableRng};
        let mut random = rand::rngs::StdRng::seed_from_u64(7);
        let mut model = RoaringBitmap::new();
        let mut bytes: Option<Vec<u8>> = None;
        let mut out = Vec::new();
        for step in 0..20_000u32 {
            // Mostly adds with a bias to appends, so both forms and the switch between them occur.
            let low: u16 = if step % 3 == 0 {
                random.random()
            } else {
                (step % 65536) as u16
            };
            let add = random.random_bool(0.8);
            let change = change_posting_chunk(bytes.as_deref(), low, add, &mut out).unwrap();
            let model_changed = if add {
                model.insert(low as u32)
            } else {
                model.remove(low as u32)
            };
            match change {
                ChunkChange::Unchanged => assert!(!model_changed),
                ChunkChange::Empty => {
                    assert!(model.is_empty());
                    bytes = None;
                }
                ChunkChange::Written => bytes = Some(out.clone()),
            }
            if let Some(bytes) = &bytes {
                if step % 97 == 0 {
                    assert_eq!(decode_posting_chunk_low(bytes).unwrap(), model);
                }
            }
        }
        assert_eq!(
            decode_posting_chunk_low(bytes.as_deref().unwrap()).unwrap(),
            model
        );
    }

    #[test]
    fn varint_round_trip() {
        for value in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut bytes = Vec::new();
            push_varint(value, &mut bytes);
            let mut position = 0;
            assert_eq!(read_varint(&bytes, &mut position), Some(value));
            assert_eq!(position, bytes.len());
        }
    }

    #[test]
    fn value_rows_round_trip_in_every_form() {
        let long_normalized = vec![b'a'; VALUE_KEY_NORMALIZED_BYTES_MAX + 1];
        let long_original = vec![b'A'; VALUE_KEY_NORMALIZED_BYTES_MAX + 1];
        let cases: [(&[u8], &[u8]); 5] = [
            (b"uid=x,dc=example", b"uid=x,dc=example"),
            (b"UID=X,dc=Example", b"uid=x,dc=example"),
            (b"", b""),
            (&long_original, &long_normalized),
            (&long_normalized, &long_normalized),
        ];
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for (original, normalized) in cases {
            encode_value_row(7, 3, original, normalized, &mut key, &mut value);
            assert!(key.len() <= 511, "fits an LMDB key");
            let row = decode_value_row(&key, &value).expect("decodes");
            assert_eq!(
                row,
                ValueRow {
                    id: 7,
                    description_number: 3,
                    original,
                    normalized
                }
            );
            let mut expected_prefix = Vec::new();
            value_key_prefix(7, Some(3), &mut expected_prefix);
            assert!(key.starts_with(&expected_prefix));
        }
    }

    #[test]
    fn value_keys_sort_by_entry_description_then_normalized_value() {
        let key = |id, number, normalized: &[u8]| {
            let mut out = Vec::new();
            encode_value_key(id, number, normalized, &mut out);
            out
        };
        assert!(key(1, 9, b"z") < key(2, 0, b"a"));
        assert!(key(2, 0, b"z") < key(2, 1, b"a"));
        assert!(key(2, 1, b"a") < key(2, 1, b"ab"));
        assert!(key(2, 1, b"ab") < key(2, 1, b"b"));
    }

    #[test]
    fn malformed_value_rows_are_refused() {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        encode_value_row(1, 1, b"A", b"a", &mut key, &mut value);
        assert!(decode_value_row(&key[..7], &value).is_none(), "short key");
        assert!(decode_value_row(&key, &[]).is_none(), "no tag");
        assert!(decode_value_row(&key, &[9]).is_none(), "unknown tag");
        let long = vec![b'a'; VALUE_KEY_NORMALIZED_BYTES_MAX + 5];
        encode_value_row(1, 1, &long, &long, &mut key, &mut value);
        let mut other = value.clone();
        *other.last_mut().unwrap() = b'b';
        assert!(decode_value_row(&key, &other).is_none(), "hash mismatch");
        assert!(decode_value_row(&key, &[VALUE_TAG_ORIGINAL, b'x']).is_none());
    }

    #[test]
    fn out_of_line_choice_is_by_type_or_count() {
        assert!(is_out_of_line(true, 1));
        assert!(!is_out_of_line(true, 0));
        assert!(!is_out_of_line(false, OUT_OF_LINE_VALUES_MIN));
        assert!(is_out_of_line(false, OUT_OF_LINE_VALUES_MIN + 1));
    }

    #[test]
    fn framed_rows_round_trip() {
        let mut framed = Vec::new();
        push_framed_row(b"k1", b"v1", &mut framed);
        push_framed_row(&[7; 300], b"", &mut framed);
        let rows: Vec<_> = framed_rows(&framed).collect();
        assert_eq!(
            rows,
            [(&b"k1"[..], &b"v1"[..]), (&[7u8; 300][..], &b""[..])]
        );
        assert_eq!(framed_rows(&framed[..framed.len() - 1]).count(), 1);
    }

    /// Per-value rows (key, row value) of description 3 of entry 7 for these normalized values
    /// (originals upper-cased), ascending.
    fn value_rows_of(values: &[Vec<u8>]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = values
            .iter()
            .map(|normalized| {
                let (mut key, mut value) = (Vec::new(), Vec::new());
                encode_value_row(
                    7,
                    3,
                    &normalized.to_ascii_uppercase(),
                    normalized,
                    &mut key,
                    &mut value,
                );
                (key, value)
            })
            .collect();
        rows.sort();
        rows
    }

    fn pack(rows: &[(Vec<u8>, Vec<u8>)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut framed = Vec::new();
        for (key, value) in rows {
            push_framed_row(key, value, &mut framed);
        }
        value_blocks_of_framed(&framed)
    }

    /// Every block checks, is keyed by its first value, is within bounds or holds one value;
    /// the blocks' values in order are exactly `rows`.
    fn assert_blocks_hold(blocks: &[(Vec<u8>, Vec<u8>)], rows: &[(Vec<u8>, Vec<u8>)]) {
        let mut seen = Vec::new();
        for (key, block) in blocks {
            let count = check_value_block(block).expect("block checks");
            assert!(count >= 1, "no empty block");
            assert!(
                count == 1
                    || (block.len() <= VALUE_BLOCK_BYTES_MAX && count <= VALUE_BLOCK_VALUES_MAX),
                "a block of {count} values and {} bytes",
                block.len()
            );
            let (first, _) = block_tail_bounds(block).unwrap().unwrap();
            assert_eq!(
                &key[VALUE_KEY_PREFIX_BYTES..],
                first,
                "keyed by its first value"
            );
            let mut values = BlockValues::new(block);
            while let Some((tail, value)) = values.next_value().unwrap() {
                let mut full = key[..VALUE_KEY_PREFIX_BYTES].to_vec();
                full.extend_from_slice(tail);
                seen.push((full, value.to_vec()));
            }
        }
        assert_eq!(seen, rows);
        assert!(
            blocks.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "keys ascend"
        );
    }

    #[test]
    fn no_one_and_many_values_pack_into_zero_one_and_several_blocks() {
        assert!(pack(&[]).is_empty());
        let one = value_rows_of(&[b"uid=a".to_vec()]);
        assert_eq!(pack(&one).len(), 1);
        assert_blocks_hold(&pack(&one), &one);
        let many: Vec<Vec<u8>> = (0..1000)
            .map(|index| format!("uid=m{index:05},dc=example").into_bytes())
            .collect();
        let many = value_rows_of(&many);
        let blocks = pack(&many);
        assert!(blocks.len() > 5, "{} blocks", blocks.len());
        assert_blocks_hold(&blocks, &many);
        // Tiny values: the value-count bound cuts the blocks.
        let tiny: Vec<Vec<u8>> = (0..1000u32)
            .map(|index| index.to_be_bytes().to_vec())
            .collect();
        let tiny = value_rows_of(&tiny);
        let blocks = pack(&tiny);
        assert_eq!(blocks.len(), 1000usize.div_ceil(VALUE_BLOCK_VALUES_MAX));
        assert_blocks_hold(&blocks, &tiny);
    }

    #[test]
    fn blocks_never_span_two_descriptions() {
        let mut rows = value_rows_of(&[b"a".to_vec(), b"b".to_vec()]);
        let (mut key, mut value) = (Vec::new(), Vec::new());
        encode_value_row(7, 4, b"a", b"a", &mut key, &mut value);
        rows.push((key, value));
        let blocks = pack(&rows);
        assert_eq!(blocks.len(), 2);
        assert_blocks_hold(&blocks, &rows);
    }

    #[test]
    fn values_filling_a_block_exactly_stay_and_a_byte_more_starts_the_next() {
        // Ten values of 404 bytes each in the block (2-byte tail length, 400-byte tail, 1-byte
        // value length, tag), then one of 56 (+1) bytes: exactly the bound (one byte past it).
        for (extra, blocks_wanted) in [(0usize, 1usize), (1, 2)] {
            let prefix = [0, 0, 0, 7, 0, 0, 0, 3];
            let mut rows: Vec<(Vec<u8>, Vec<u8>)> = (0..10u8)
                .map(|index| {
                    (
                        [&prefix[..], &[b'a' + index; 400]].concat(),
                        vec![VALUE_TAG_SAME],
                    )
                })
                .collect();
            rows.push((
                [&prefix[..], &vec![b'z'; 53 + extra]].concat(),
                vec![VALUE_TAG_SAME],
            ));
            let size: usize = rows
                .iter()
                .map(|(key, value)| block_value_size(&key[VALUE_KEY_PREFIX_BYTES..], value))
                .sum();
            assert_eq!(size, VALUE_BLOCK_BYTES_MAX + extra);
            let blocks = pack(&rows);
            assert_eq!(blocks.len(), blocks_wanted, "extra {extra}");
            assert_blocks_hold(&blocks, &rows);
        }
    }

    #[test]
    fn a_value_larger_than_a_block_is_a_block_of_its_own() {
        let huge = vec![b'h'; VALUE_BLOCK_BYTES_MAX * 2];
        let rows = value_rows_of(&[b"a".to_vec(), huge, b"z".to_vec()]);
        let blocks = pack(&rows);
        assert_eq!(blocks.len(), 3);
        assert_blocks_hold(&blocks, &rows);
        assert!(
            !block_over_bounds(&blocks[1].1).unwrap(),
            "one value is never split"
        );
    }

    /// The block of `values` (one block, whatever its size).
    fn block_of(values: &[&[u8]]) -> Vec<u8> {
        let mut block = Vec::new();
        for value in values {
            push_block_value(value, &[VALUE_TAG_SAME], &mut block);
        }
        block
    }

    #[test]
    fn inserting_and_removing_in_a_block_keep_it_sorted() {
        let block = block_of(&[b"b", b"d"]);
        let mut out = Vec::new();
        block_insert(&block, b"a", &[VALUE_TAG_SAME], &mut out).unwrap();
        assert_eq!(out, block_of(&[b"a", b"b", b"d"]), "a new first value");
        block_insert(&block, b"c", &[VALUE_TAG_SAME], &mut out).unwrap();
        assert_eq!(out, block_of(&[b"b", b"c", b"d"]));
        block_insert(&block, b"e", &[VALUE_TAG_SAME], &mut out).unwrap();
        assert_eq!(out, block_of(&[b"b", b"d", b"e"]), "a new last value");
        block_insert(&block, b"d", &[VALUE_TAG_ORIGINAL, b'D'], &mut out).unwrap();
        assert_eq!(
            block_find(&out, b"d").unwrap(),
            Some(&[VALUE_TAG_ORIGINAL, b'D'][..])
        );
        assert_eq!(check_value_block(&out), Ok(2), "replaced, not added");
        assert!(block_remove(&block, b"b", &mut out).unwrap());
        assert_eq!(out, block_of(&[b"d"]), "the first value removed");
        assert!(block_remove(&block, b"d", &mut out).unwrap());
        assert_eq!(out, block_of(&[b"b"]), "the last value removed");
        assert!(!block_remove(&block, b"c", &mut out).unwrap(), "absent");
        assert!(block_remove(&block_of(&[b"b"]), b"b", &mut out).unwrap());
        assert!(out.is_empty(), "emptied");
        assert_eq!(block_find(&block, b"c").unwrap(), None);
        assert_eq!(block_find(&block, b"a").unwrap(), None);
        assert!(block_find(&block, b"b").unwrap().is_some());
    }

    #[test]
    fn a_block_past_its_bounds_splits_into_halves_within_them() {
        let values: Vec<Vec<u8>> = (0..VALUE_BLOCK_VALUES_MAX + 1)
            .map(|index| format!("v{index:04}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let block = block_of(&refs);
        assert!(
            block_over_bounds(&block).unwrap(),
            "one value past the count bound"
        );
        assert!(
            !block_over_bounds(&block_of(&refs[1..])).unwrap(),
            "exactly the count bound"
        );
        let prefix = [0, 0, 0, 7, 0, 0, 0, 3];
        let mut pieces = Vec::new();
        split_value_block::<()>(&prefix, &block, &mut |key, piece| {
            pieces.push((key.to_vec(), piece.to_vec()));
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            pieces.len(),
            3,
            "halves of half the count bound, then the one left"
        );
        let rows: Vec<(Vec<u8>, Vec<u8>)> = values
            .iter()
            .map(|value| ([&prefix[..], value].concat(), vec![VALUE_TAG_SAME]))
            .collect();
        assert_blocks_hold(&pieces, &rows);
    }

    #[test]
    fn malformed_blocks_are_refused() {
        assert_eq!(check_value_block(&[]), Ok(0));
        assert_eq!(
            check_value_block(&[5, b'a']),
            Err(MalformedBlock),
            "short tail"
        );
        assert_eq!(
            check_value_block(&[1, b'a', 1, 9]),
            Err(MalformedBlock),
            "unknown tag"
        );
        let unsorted = block_of(&[b"b", b"a"]);
        assert_eq!(check_value_block(&unsorted), Err(MalformedBlock));
        let twice = block_of(&[b"a", b"a"]);
        assert_eq!(check_value_block(&twice), Err(MalformedBlock));
    }

    /// `next_original` yields what `next_value` and `decode_value_row_tail` yield, for rows of
    /// every tag and length form, and refuses what they refuse.
    #[test]
    fn next_original_matches_the_general_decoder() {
        let mut block = Vec::new();
        let long_normalized = vec![b'n'; VALUE_KEY_NORMALIZED_BYTES_MAX + 40];
        let rows: [(&[u8], &[u8]); 5] = [
            (b"cn=a", b"cn=a"),
            (b"CN=B", b"cn=b"),
            (&[b'c'; 200], &[b'c'; 200]),
            (&[b'D'; 300], &[b'd'; 300]),
            (
                &[b'N'; VALUE_KEY_NORMALIZED_BYTES_MAX + 40],
                &long_normalized,
            ),
        ];
        for (original, normalized) in rows {
            let (mut key, mut row_value) = (Vec::new(), Vec::new());
            encode_value_row(1, 0, original, normalized, &mut key, &mut row_value);
            push_block_value(&key[VALUE_KEY_PREFIX_BYTES..], &row_value, &mut block);
        }
        let mut general = BlockValues::new(&block);
        let mut short = BlockValues::new(&block);
        for (original, _) in rows {
            let (tail, row_value) = general.next_value().unwrap().unwrap();
            let decoded = decode_value_row_tail(tail, row_value).unwrap().0;
            assert_eq!(decoded, original);
            assert_eq!(short.next_original(), Ok(Some(original)));
        }
        assert_eq!(short.next_original(), Ok(None));
        assert_eq!(
            BlockValues::new(&[1, b'a', 1, 9]).next_original(),
            Err(MalformedBlock)
        );
        assert_eq!(
            BlockValues::new(&[5, b'a']).next_original(),
            Err(MalformedBlock)
        );
        assert_eq!(
            BlockValues::new(&[1, b'a', 1]).next_original(),
            Err(MalformedBlock)
        );
    }

    #[test]
    fn a_small_block_merges_with_the_next_only_within_half_the_bounds() {
        let sized = |first: u8, bytes: usize| {
            // Values of 100 bytes each (1 + 97 + 1 + 1): `bytes` / 100 of them.
            let values: Vec<Vec<u8>> = (0..bytes / 100)
                .map(|index| vec![first + index as u8; 97])
                .collect();
            let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            block_of(&refs)
        };
        let small = sized(b'a', 900);
        assert!(small.len() < VALUE_BLOCK_MERGE_BELOW_BYTES);
        assert!(
            should_merge_value_blocks(&small, &sized(b'm', 1100)).unwrap(),
            "2000 bytes: fits"
        );
        assert!(
            !should_merge_value_blocks(&small, &sized(b'm', 1200)).unwrap(),
            "2100: past half"
        );
        // 1000 bytes, then one value of 24 (1 + 21 + 1 + 1): exactly the floor.
        let mut floor = sized(b'a', 1000);
        push_block_value(&[b'l'; 21], &[VALUE_TAG_SAME], &mut floor);
        assert_eq!(floor.len(), VALUE_BLOCK_MERGE_BELOW_BYTES);
        floor.truncate(1000);
        assert!(
            should_merge_value_blocks(&floor, &sized(b'm', 100)).unwrap(),
            "under the floor"
        );
        push_block_value(&[b'l'; 21], &[VALUE_TAG_SAME], &mut floor);
        assert!(
            !should_merge_value_blocks(&floor, &sized(b'm', 100)).unwrap(),
            "at the floor"
        );
        let tiny: Vec<Vec<u8>> = (0..VALUE_BLOCK_VALUES_MAX as u32 / 2)
            .map(|index| index.to_be_bytes().to_vec())
            .collect();
        let tiny: Vec<&[u8]> = tiny.iter().map(Vec::as_slice).collect();
        assert!(should_merge_value_blocks(&block_of(&tiny[..10]), &block_of(&tiny[10..])).unwrap());
        assert!(
            !should_merge_value_blocks(
                &block_of(&tiny[..10]),
                &block_of(&[&tiny[10..], &[&b"zz"[..]][..]].concat())
            )
            .unwrap(),
            "one value past half the count"
        );
    }
}
