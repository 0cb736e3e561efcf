//! Point writes of out-of-line values in their blocks (`layout`'s "out-of-line value blocks"):
//! adding or deleting one value reads the block that holds (or would hold) it, edits it and
//! writes it back, splitting a block past its bounds, deleting one left empty, merging one a
//! delete left small with a neighbour, and re-keying one whose first value changed.

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
    let (key, edited) = merge_with_a_neighbour(database, txn, id, old_key, edited)?;
    write_block(database, txn, id, &prefix, Some(&key), &edited)?;
    Ok(true)
}

/// What is left of the block keyed `key` after a delete (`edited`), merged with the next block
/// of the description, else with the one before, when `layout::should_merge_value_blocks` says
/// so: the merged block and the key it is stored under now (the other block's row is deleted).
fn merge_with_a_neighbour(
    database: RawDatabase,
    txn: &mut RwTxn<'_>,
    id: EntryId,
    key: Vec<u8>,
    mut edited: Vec<u8>,
) -> Result<(Vec<u8>, Vec<u8>), LdapError> {
    if edited.is_empty() || edited.len() >= layout::VALUE_BLOCK_MERGE_BELOW_BYTES {
        return Ok((key, edited));
    }
    let malformed = |error: layout::MalformedBlock| corrupt(format!("entry {id}: {error}"));
    let prefix = &key[..layout::VALUE_KEY_PREFIX_BYTES];
    let owned = |(key, block): (&[u8], &[u8])| (key.to_vec(), block.to_vec());
    let next = database.get_greater_than(txn, &key).map_err(lmdb_to_ldap)?;
    if let Some((next_key, next)) = next
        .filter(|(found, _)| found.starts_with(prefix))
        .map(owned)
    {
        if layout::should_merge_value_blocks(&edited, &next).map_err(malformed)? {
            edited.extend_from_slice(&next);
            database.delete(txn, &next_key).map_err(lmdb_to_ldap)?;
            return Ok((key, edited));
        }
    }
    let before = database.get_lower_than(txn, &key).map_err(lmdb_to_ldap)?;
    if let Some((before_key, mut merged)) = before
        .filter(|(found, _)| found.starts_with(prefix))
        .map(owned)
    {
        if layout::should_merge_value_blocks(&edited, &merged).map_err(malformed)? {
            merged.extend_from_slice(&edited);
            database.delete(txn, &key).map_err(lmdb_to_ldap)?;
            return Ok((before_key, merged));
        }
    }
    Ok((key, edited))
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
