//! Point writes of out-of-line values in their blocks (`layout`'s "out-of-line value blocks"):
//! adding or deleting one value reads the block that holds (or would hold) it, edits it and
//! writes it back, splitting a block past its bounds, deleting one left empty and re-keying one
//! whose first value changed.

use heed::RwTxn;
use lmdir_schema::LdapError;

use crate::error::{lmdb_to_ldap, RawDatabase};
use crate::layout::{self, EntryId};
use crate::read::{block_key_for, corrupt};

/// Sets the value of normalized form `normalized` of entry `id`'s description `number` to
/// `original` (added, or its original replaced).
pub(crate) fn put_value(
    database: RawDatabase,
    txn: &mut RwTxn<'_>,
    (id, number): (EntryId, u32),
    original: &[u8],
    normalized: &[u8],
) -> Result<(), LdapError> {
    let (mut key, mut row_value) = (Vec::new(), Vec::new());
    layout::encode_value_row(id, number, original, normalized, &mut key, &mut row_value);
    let (prefix, tail) = key.split_at(layout::VALUE_KEY_PREFIX_BYTES);
    let found = block_key_for(database, txn, prefix, tail)?
        .map(|(old_key, block)| (old_key.to_vec(), block.to_vec()));
    let mut edited = Vec::new();
    match &found {
        Some((_, block)) => layout::block_insert(block, tail, &row_value, &mut edited)
            .map_err(|error| corrupt(format!("entry {id}: {error}")))?,
        None => layout::push_block_value(tail, &row_value, &mut edited),
    }
    let old_key = found.as_ref().map(|(old_key, _)| old_key.as_slice());
    write_block(database, txn, id, prefix, old_key, &edited)
}

/// Deletes the value of normalized form `normalized` of entry `id`'s description `number`;
/// false when it is not there.
pub(crate) fn delete_value(
    database: RawDatabase,
    txn: &mut RwTxn<'_>,
    (id, number): (EntryId, u32),
    normalized: &[u8],
) -> Result<bool, LdapError> {
    let mut prefix = Vec::with_capacity(layout::VALUE_KEY_PREFIX_BYTES);
    layout::value_key_prefix(id, Some(number), &mut prefix);
    let tail = layout::value_key_tail(normalized);
    let Some((old_key, block)) = block_key_for(database, txn, &prefix, &tail)?
        .map(|(old_key, block)| (old_key.to_vec(), block.to_vec()))
    else {
        return Ok(false);
    };
    let mut edited = Vec::new();
    let removed = layout::block_remove(&block, &tail, &mut edited)
        .map_err(|error| corrupt(format!("entry {id}: {error}")))?;
    if !removed {
        return Ok(false);
    }
    write_block(database, txn, id, &prefix, Some(&old_key), &edited)?;
    Ok(true)
}

/// Stores an edited block in place of the block keyed `old_key` (if any): deleted when empty,
/// re-keyed when its first value changed, split when past its bounds.
fn write_block(
    database: RawDatabase,
    txn: &mut RwTxn<'_>,
    id: EntryId,
    prefix: &[u8],
    old_key: Option<&[u8]>,
    block: &[u8],
) -> Result<(), LdapError> {
    let malformed = |error: layout::MalformedBlock| corrupt(format!("entry {id}: {error}"));
    let Some((first, _)) = layout::block_tail_bounds(block).map_err(malformed)? else {
        if let Some(old_key) = old_key {
            database.delete(txn, old_key).map_err(lmdb_to_ldap)?;
        }
        return Ok(());
    };
    let mut key = prefix.to_vec();
    key.extend_from_slice(first);
    if let Some(old_key) = old_key.filter(|old_key| *old_key != key.as_slice()) {
        database.delete(txn, old_key).map_err(lmdb_to_ldap)?;
    }
    if !layout::block_over_bounds(block).map_err(malformed)? {
        return database.put(txn, &key, block).map_err(lmdb_to_ldap);
    }
    layout::split_value_block(prefix, block, &mut |key, piece| {
        database.put(txn, key, piece).map_err(lmdb_to_ldap)
    })
    .map_err(malformed)?
}
