//! The record of inverted links (a node whose parent has the higher ID; see `treeorder.rs`,
//! which orders outputs by it): its `meta` keys, its upkeep by every tree write and the shared
//! memo of whether a snapshot has any. A leaf below the store's `Inner` and write path.

use std::sync::atomic::{AtomicU64, Ordering};

use heed::RwTxn;

use crate::error::RawDatabase;
use crate::layout::{self, EntryId};

/// `meta` key prefix of the inverted-link set: `inv:` ‖ parent ID ‖ child ID.
pub const META_INVERSION_PREFIX: &[u8] = b"inv:";
/// `meta` key present once the inverted-link set is maintained for this DB (stores written
/// before it existed are scanned once by the next read-write open).
pub const META_INVERSIONS_TRACKED: &[u8] = b"inversions_tracked";

/// The `meta` key recording that `child`'s parent is `parent` (meaningful when parent > child).
pub fn inversion_key(parent: EntryId, child: EntryId) -> Vec<u8> {
    let mut key = Vec::with_capacity(META_INVERSION_PREFIX.len() + 8);
    key.extend_from_slice(META_INVERSION_PREFIX);
    key.extend_from_slice(&parent.to_be_bytes());
    key.extend_from_slice(&child.to_be_bytes());
    key
}

/// Keeps the inverted-link set right when `child` leaves `old_parent` (None: it is new) for
/// `new_parent` (None: it is deleted). Idempotent; every tree write calls it.
pub(crate) fn record_parent_change(
    meta: RawDatabase,
    txn: &mut RwTxn,
    child: EntryId,
    old_parent: Option<EntryId>,
    new_parent: Option<EntryId>,
) -> heed::Result<()> {
    if let Some(old) = old_parent.filter(|&old| old > child) {
        meta.delete(txn, &inversion_key(old, child))?;
    }
    if let Some(new) = new_parent.filter(|&new| new > child) {
        meta.put(txn, &inversion_key(new, child), &[])?;
    }
    Ok(())
}

/// Records every inverted link of a DB written before the set existed (one id2node scan).
pub(crate) fn track_inversions_once(
    meta: RawDatabase,
    id2node: RawDatabase,
    txn: &mut RwTxn,
) -> heed::Result<()> {
    if meta.get(txn, META_INVERSIONS_TRACKED)?.is_some() {
        return Ok(());
    }
    let mut inverted = Vec::new();
    for row in id2node.iter(txn)? {
        let (key, value) = row?;
        if let (Some(id), Some(node)) = (layout::decode_id(key), layout::decode_node(value)) {
            if node.parent > id {
                inverted.push((node.parent, id));
            }
        }
    }
    for (parent, child) in inverted {
        meta.put(txn, &inversion_key(parent, child), &[])?;
    }
    meta.put(txn, META_INVERSIONS_TRACKED, &[])
}

/// The last answer to a question about a whole snapshot (`has_inverted_links`,
/// `may_hold_glue`, `may_hold_aliases`, `may_hold_subentries`) and the snapshot it holds for,
/// shared by a store's read txns: every search
/// asks, and the txns opened between two commits read the same snapshot (one LMDB txn ID), so
/// only the first of them looks (a few B-tree lookups).
/// Packed in one word, `(snapshot << 1 | answer) + 1`; 0 = nothing known yet.
#[derive(Default)]
pub(crate) struct SnapshotAnswer(AtomicU64);

impl SnapshotAnswer {
    pub(crate) fn get(&self, snapshot: u64) -> Option<bool> {
        let packed = self.0.load(Ordering::Relaxed).checked_sub(1)?;
        (packed >> 1 == snapshot).then_some(packed & 1 == 1)
    }

    pub(crate) fn set(&self, snapshot: u64, answer: bool) {
        // IDs past 2^62 (never reached: one per commit) are simply not remembered.
        if snapshot < 1 << 62 {
            let packed = ((snapshot << 1) | u64::from(answer)) + 1;
            self.0.store(packed, Ordering::Relaxed);
        }
    }
}
