//! Virtual list view (draft-ietf-ldapext-ldapv3-vlv-09) over a sorted result: the window of
//! entries around a target position, chosen by offset or by the first sort key's value, with
//! the positions OpenLDAP's sssvlv overlay gives. lmdir keeps no list between requests: each
//! one sorts its own snapshot again, within the sorted search's bounds (SORTED_ENTRIES_MAX
//! entries, `sort_bytes_max`), so a client's context ID is not needed and none is returned.

use super::sort::{assertion_sort_value, compare_key_values, PlannedSortKey};
use crate::ber::ResponseControl;
use crate::controls::{VlvRequest, VlvTarget, VLV_RESPONSE_OID};
use crate::result::OperationError;
use bytes::BytesMut;
use lmdir_schema::Schema;

/// The operation's result code when a virtual list view cannot be given (LDAP_VLV_ERROR).
pub(super) const VLV_ERROR: u32 = 76;

/// virtualListViewResult values as OpenLDAP's sssvlv sends them: the draft's enumeration names
/// sortControlMissing 60 and offsetRangeError 61, slapd sends 76 and 77 (its LDAP_VLV_SSS_MISSING
/// and LDAP_VLV_RANGE_ERROR), and clients written against slapd read those.
pub(super) mod vlv_result {
    pub const SUCCESS: u32 = 0;
    pub const INAPPROPRIATE_MATCHING: u32 = 18;
    pub const SORT_CONTROL_MISSING: u32 = 76;
    pub const OFFSET_RANGE_ERROR: u32 = 77;
}

/// The entries to return, `start..end` of the sorted list, and the target's 1-based position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) target_position: usize,
}

/// The window `request` asks for over a sorted list of `total` entries, whose first sort key
/// values `first_key(index)` gives; Err is the virtualListViewResult explaining why not.
pub(super) fn window<'v>(
    request: &VlvRequest,
    total: usize,
    key: &PlannedSortKey,
    schema: &Schema,
    first_key: impl Fn(usize) -> Option<&'v [u8]>,
) -> Result<Window, u32> {
    let before = request.before as usize;
    let after = request.after as usize;
    let target_position = match &request.target {
        VlvTarget::ByOffset {
            offset,
            content_count,
        } => offset_position(*offset as usize, *content_count as usize, total)?,
        VlvTarget::GreaterThanOrEqual(value) => {
            let value = assertion_sort_value(schema, key, value)
                .ok_or(vlv_result::INAPPROPRIATE_MATCHING)?;
            let first_at_or_after = partition_point(total, |index| {
                compare_key_values(key, first_key(index), Some(&value)).is_lt()
            });
            if first_at_or_after == total {
                // Past the end: the window ends with the last entry, `before` of them.
                let start = total.saturating_sub(before.max(1));
                return Ok(Window {
                    start,
                    end: total,
                    target_position: total + 1,
                });
            }
            first_at_or_after + 1
        }
    };
    let cursor = target_position.max(1).min(total.max(1)) - 1;
    let start = cursor - before.min(cursor);
    let end = start
        .saturating_add(cursor - start)
        .saturating_add(after)
        .saturating_add(1)
        .min(total);
    Ok(Window {
        start: start.min(end),
        end,
        target_position,
    })
}

/// The target position of a byOffset request: offset as given when the client's content count
/// is 0 or right, else scaled to the real size; the first or last entry when asked for by
/// offset 1 or offset = count; beyond the list, offsetRangeError.
fn offset_position(offset: usize, content_count: usize, total: usize) -> Result<usize, u32> {
    if offset == content_count {
        return Ok(total);
    }
    if offset == 1 {
        return Ok(1);
    }
    if content_count != 0 && content_count != total {
        if offset > content_count {
            return Err(vlv_result::OFFSET_RANGE_ERROR);
        }
        // At most maxInt × SORTED_ENTRIES_MAX: no overflow in 64 bits.
        return Ok(total * offset / content_count);
    }
    if offset > total {
        return Err(vlv_result::OFFSET_RANGE_ERROR);
    }
    Ok(offset)
}

/// The first index in 0..total for which `before` is false (`before` holds for a prefix).
fn partition_point(total: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, total);
    while low < high {
        let middle = low + (high - low) / 2;
        if before(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

/// VirtualListViewResponse ::= SEQUENCE { targetPosition INTEGER, contentCount INTEGER,
/// virtualListViewResult ENUMERATED, contextID OCTET STRING OPTIONAL }.
pub(super) fn response_control(
    target_position: usize,
    content_count: usize,
    result: u32,
) -> ResponseControl {
    let as_integer = |number: usize| i64::try_from(number).unwrap_or(i64::MAX);
    let mut value = BytesMut::new();
    let mut writer = crate::ber::BerWriter::new(&mut value);
    writer.open(crate::ber::tag::SEQUENCE);
    writer.integer(crate::ber::tag::INTEGER, as_integer(target_position));
    writer.integer(crate::ber::tag::INTEGER, as_integer(content_count));
    writer.integer(crate::ber::tag::ENUMERATED, i64::from(result));
    writer.close();
    drop(writer);
    ResponseControl {
        oid: VLV_RESPONSE_OID.to_string(),
        criticality: false,
        value: Some(value.to_vec()),
    }
}

/// The refusal of a virtual list view that cannot be given, with its response control.
pub(super) fn refusal(result: u32, content_count: usize, message: &str) -> OperationError {
    OperationError::new(VLV_ERROR, message).with_control(response_control(0, content_count, result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_sssvlv() {
        // Exact, first, last (offset = count, 0/0 too), scaled, beyond the end.
        assert_eq!(offset_position(3, 0, 10), Ok(3));
        assert_eq!(offset_position(1, 50, 10), Ok(1));
        assert_eq!(offset_position(50, 50, 10), Ok(10));
        assert_eq!(offset_position(0, 0, 10), Ok(10));
        assert_eq!(offset_position(25, 50, 10), Ok(5));
        assert_eq!(
            offset_position(11, 10, 10),
            Err(vlv_result::OFFSET_RANGE_ERROR)
        );
        assert_eq!(
            offset_position(60, 50, 10),
            Err(vlv_result::OFFSET_RANGE_ERROR)
        );
        assert_eq!(
            offset_position(11, 0, 10),
            Err(vlv_result::OFFSET_RANGE_ERROR)
        );
    }

    #[test]
    fn partition_point_finds_the_first_not_before() {
        let values = [1, 3, 3, 5, 9];
        for (probe, expected) in [(0, 0), (3, 1), (4, 3), (9, 4), (10, 5)] {
            assert_eq!(
                partition_point(values.len(), |index| values[index] < probe),
                expected
            );
        }
    }
}
