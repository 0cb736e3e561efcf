//! Server-side sort (RFC 2891): the keys resolved against the schema, each entry's sort values
//! as the subject may read them, the order, the response control, and the bounded buffer.

use crate::ber::ResponseControl;
use crate::result::{code, OperationError};
use bytes::BytesMut;
use lmdir_access::acl::EntryAccess;
use lmdir_schema::{AttrId, Schema};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Most entries one sorted search may hold in memory.
pub(super) const SORTED_ENTRIES_MAX: usize = 100_000;

/// A usable sort key: attribute, rule giving the order, direction.
pub(super) struct PlannedSortKey {
    attr: AttrId,
    rule: Option<lmdir_schema::MatchingRule>,
    reverse: bool,
}

/// The sort keys resolved, or the RFC 2891 result code (and attribute) explaining why not.
pub(super) type SortPlan = Result<Vec<PlannedSortKey>, (u32, String)>;

/// Resolves sort keys, or the RFC 2891 result code (and attribute) explaining why not.
pub(super) fn plan_sort(
    schema: &Schema,
    keys: &[crate::controls::SortKey],
) -> Result<Vec<PlannedSortKey>, (u32, String)> {
    keys.iter()
        .map(|key| {
            let attr = schema
                .attribute(&key.attribute)
                .ok_or((code::NO_SUCH_ATTRIBUTE, key.attribute.clone()))?;
            let rule = match &key.ordering_rule {
                Some(name) => Some(
                    lmdir_schema::MatchingRule::by_name_or_oid(name)
                        .ok_or((code::INAPPROPRIATE_MATCHING, key.attribute.clone()))?,
                ),
                None => schema.attribute_type(attr).ordering,
            };
            Ok(PlannedSortKey {
                attr,
                rule,
                reverse: key.reverse,
            })
        })
        .collect()
}

/// Per key, the value an entry sorts by: the smallest (largest when reversed) of its values
/// in the key's order; None when the entry lacks the attribute or the subject may not read it
/// there (a hidden attribute sorts as an absent one, so the order reveals none of its values).
pub(super) fn sort_values(
    entry: &lmdir_store::EntryRef<'_>,
    keys: &[PlannedSortKey],
    access: &EntryAccess<'_>,
) -> Vec<Option<Vec<u8>>> {
    keys.iter()
        .map(|key| {
            if !access.can_read_attribute(key.attr) {
                return None;
            }
            let candidates = entry
                .values_of(key.attr)
                .into_iter()
                .map(|(_, normalized)| match key.rule {
                    Some(rule) => rule.ordering_key(&normalized),
                    None => normalized.to_vec(),
                });
            if key.reverse {
                candidates.max()
            } else {
                candidates.min()
            }
        })
        .collect()
}

/// RFC 2891: entries without a sort attribute sort after all others, in either direction.
pub(super) fn compare_sort_values(
    keys: &[PlannedSortKey],
    left: &[Option<Vec<u8>>],
    right: &[Option<Vec<u8>>],
) -> std::cmp::Ordering {
    keys.iter()
        .zip(left)
        .zip(right)
        .map(|((key, left), right)| compare_key_values(key, left.as_deref(), right.as_deref()))
        .find(|order| order.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// One key's order of two sort values (None: the entry lacks the attribute, sorting last).
pub(super) fn compare_key_values(
    key: &PlannedSortKey,
    left: Option<&[u8]>,
    right: Option<&[u8]>,
) -> std::cmp::Ordering {
    use std::cmp::Ordering as Order;
    match (left, right) {
        (Some(left), Some(right)) if key.reverse => left.cmp(right).reverse(),
        (Some(left), Some(right)) => left.cmp(right),
        (Some(_), None) => Order::Less,
        (None, Some(_)) => Order::Greater,
        (None, None) => Order::Equal,
    }
}

/// An assertion value in the form `sort_values` gives an entry's value of `key`; None when the
/// value is invalid for the key's rule (or its attribute's syntax).
pub(super) fn assertion_sort_value(
    schema: &Schema,
    key: &PlannedSortKey,
    value: &[u8],
) -> Option<Vec<u8>> {
    match key.rule {
        Some(rule) => schema
            .normalize_with_rule(rule, value)
            .ok()
            .map(|normalized| rule.ordering_key(&normalized)),
        None => schema.normalize_value(key.attr, value).ok(),
    }
}

/// SortResult ::= SEQUENCE { sortResult ENUMERATED, attributeType [0] AttributeDescription OPTIONAL }
pub(super) fn sort_response_control(
    plan: &Result<Vec<PlannedSortKey>, (u32, String)>,
) -> ResponseControl {
    let mut value = BytesMut::new();
    let mut writer = crate::ber::BerWriter::new(&mut value);
    writer.open(crate::ber::tag::SEQUENCE);
    match plan {
        Ok(_) => writer.integer(crate::ber::tag::ENUMERATED, 0),
        Err((result_code, attribute)) => {
            writer.integer(crate::ber::tag::ENUMERATED, i64::from(*result_code));
            if !attribute.is_empty() {
                writer.primitive(0x80, attribute.as_bytes());
            }
        }
    }
    writer.close();
    drop(writer);
    ResponseControl {
        oid: crate::controls::SORT_RESPONSE_OID.to_string(),
        criticality: false,
        value: Some(value.to_vec()),
    }
}

/// Entries sorted so far: each one's sort values and ID, and the bytes they hold, counted
/// also in the server's total of sorted searches running now (returned when dropped).
pub(super) struct SortBuffer<'a> {
    pub(super) entries: Vec<(Vec<Option<Vec<u8>>>, lmdir_store::EntryId)>,
    bytes: usize,
    in_use: &'a AtomicUsize,
}

impl Drop for SortBuffer<'_> {
    fn drop(&mut self) {
        self.in_use.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Bytes one sorted entry holds besides its key values (its row and one slot per key).
pub(super) fn sort_entry_overhead_bytes(key_count: usize) -> usize {
    std::mem::size_of::<(Vec<Option<Vec<u8>>>, lmdir_store::EntryId)>()
        + key_count * std::mem::size_of::<Option<Vec<u8>>>()
}

impl<'a> SortBuffer<'a> {
    /// An empty buffer counting into `in_use` (the server's total, `sort_bytes_total_max`).
    pub(super) fn new(in_use: &'a AtomicUsize) -> SortBuffer<'a> {
        SortBuffer {
            entries: Vec::new(),
            bytes: 0,
            in_use,
        }
    }

    /// Adds one entry; adminLimitExceeded past the entry or byte bound of one search, busy
    /// past `bytes_total_max` for all sorted searches now.
    pub(super) fn push(
        &mut self,
        values: Vec<Option<Vec<u8>>>,
        id: lmdir_store::EntryId,
        (bytes_max, bytes_total_max): (usize, usize),
    ) -> Result<(), OperationError> {
        if self.entries.len() >= SORTED_ENTRIES_MAX {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!("more than {SORTED_ENTRIES_MAX} entries to sort"),
            ));
        }
        let added_bytes = sort_entry_overhead_bytes(values.len())
            + values.iter().flatten().map(Vec::len).sum::<usize>();
        self.bytes += added_bytes;
        let total_bytes = self.in_use.fetch_add(added_bytes, Ordering::Relaxed) + added_bytes;
        if self.bytes > bytes_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!("sort keys of this search exceed {bytes_max} bytes"),
            ));
        }
        if total_bytes > bytes_total_max {
            return Err(OperationError::new(
                code::BUSY,
                format!(
                    "the sorted searches running now hold {bytes_total_max} bytes of sort keys \
                     (sort_bytes_total_max); try again"
                ),
            ));
        }
        self.entries.push((values, id));
        Ok(())
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    const KEY_BYTES: usize = 100;

    fn key() -> Vec<Option<Vec<u8>>> {
        vec![Some(vec![b'k'; KEY_BYTES])]
    }

    #[test]
    fn sorted_searches_share_one_total_and_return_it_when_done() {
        let in_use = AtomicUsize::new(0);
        let per_entry = sort_entry_overhead_bytes(1) + KEY_BYTES;
        let limits = (usize::MAX, 10 * per_entry);
        let mut first = SortBuffer::new(&in_use);
        for id in 0..8 {
            first.push(key(), id, limits).expect("within the total");
        }
        let mut second = SortBuffer::new(&in_use);
        second.push(key(), 1, limits).expect("the ninth entry fits");
        second.push(key(), 2, limits).expect("the tenth entry fits");
        let refused = second.push(key(), 3, limits).expect_err("past the total");
        assert_eq!(refused.code, code::BUSY);
        drop(second);
        assert_eq!(in_use.load(Ordering::Relaxed), 8 * per_entry);
        drop(first);
        assert_eq!(in_use.load(Ordering::Relaxed), 0);
        // One search's own bound still answers adminLimitExceeded.
        let mut alone = SortBuffer::new(&in_use);
        let refused = alone
            .push(key(), 1, (per_entry - 1, usize::MAX))
            .expect_err("past one search's bound");
        assert_eq!(refused.code, code::ADMIN_LIMIT_EXCEEDED);
    }
}
