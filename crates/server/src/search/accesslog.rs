//! Searches under `cn=accesslog`: the audit trail's records (`crate::accesslog`), read from
//! the store one at a time in the search's read txn (`built.rs` walks them) and shown as
//! OpenLDAP's accesslog shows them: the container `cn=accesslog` (auditContainer) and one
//! entry per write, `reqStart=<time>,cn=accesslog`, oldest first. Access as for cn=Monitor:
//! the rootdn, or whom an `[[access]]` rule naming cn=accesslog lets read ("all entries"
//! covers the directory only).

use super::built::{TreeItem, TreeItems};
use crate::result::OperationError;
use lmdir_schema::{AttrId, Dn, Entry, PreparedFilter, Schema};
use lmdir_store::ReadTxn;

/// Microseconds in a second: a log key is a record's start time in microseconds.
const MICROS_PER_SECOND: u64 = 1_000_000;

/// The log keys a search may return: from `from` (inclusive) to `before` (exclusive; None:
/// to the end). The log is kept in key order, so a search of a time window reads that window
/// only, not the whole log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KeyRange {
    pub(super) from: u64,
    pub(super) before: Option<u64>,
}

impl KeyRange {
    const ALL: KeyRange = KeyRange {
        from: 0,
        before: None,
    };

    pub(super) fn within(self, other: KeyRange) -> KeyRange {
        KeyRange {
            from: self.from.max(other.from),
            before: match (self.before, other.before) {
                (Some(left), Some(right)) => Some(left.min(right)),
                (left, right) => left.or(right),
            },
        }
    }

    fn spanning(self, other: KeyRange) -> KeyRange {
        KeyRange {
            from: self.from.min(other.from),
            before: self.before.zip(other.before).map(|(l, r)| l.max(r)),
        }
    }

    /// The keys of records started within the second of `time` and after (`from`), before
    /// (`before`), or both: whole seconds, so a fraction never excludes a match (the exact
    /// test is the filter's, on every record read).
    fn of_second(time: &[u8], from: bool, before: bool) -> KeyRange {
        let Ok(seconds) = lmdir_schema::generalized_time_unix_seconds(time) else {
            return KeyRange::ALL;
        };
        let second_key = u64::try_from(seconds)
            .unwrap_or(0)
            .saturating_mul(MICROS_PER_SECOND);
        KeyRange {
            from: if from { second_key } else { 0 },
            before: before.then(|| second_key.saturating_add(MICROS_PER_SECOND)),
        }
    }
}

/// The keys a search of the log with `filter` and base `base` (normalized) can return: the
/// bounds its reqStart assertions and a record base put on the records' start times.
pub(super) fn search_keys(schema: &Schema, filter: &PreparedFilter, base: &str) -> KeyRange {
    let filter_keys = schema
        .attribute("reqStart")
        .map_or(KeyRange::ALL, |req_start| filter_keys(req_start, filter));
    let base_keys = base
        .strip_suffix(lmdir_access::acl::ACCESSLOG_NDN)
        .and_then(|rdn| rdn.strip_suffix(',')?.strip_prefix("reqstart="))
        .map_or(KeyRange::ALL, |time| {
            KeyRange::of_second(time.as_bytes(), true, false)
        });
    filter_keys.within(base_keys)
}

/// The bounds `filter` puts on reqStart (`req_start`): an AND takes the narrowest, an OR the
/// widest of its parts; anything else bounds nothing.
fn filter_keys(req_start: AttrId, filter: &PreparedFilter) -> KeyRange {
    match filter {
        PreparedFilter::And(parts) => parts.iter().fold(KeyRange::ALL, |keys, part| {
            keys.within(filter_keys(req_start, part))
        }),
        PreparedFilter::Or(parts) if !parts.is_empty() => parts
            .iter()
            .map(|part| filter_keys(req_start, part))
            .reduce(KeyRange::spanning)
            .unwrap_or(KeyRange::ALL),
        PreparedFilter::Equality {
            attr, normalized, ..
        } if *attr == req_start => KeyRange::of_second(normalized, true, true),
        PreparedFilter::GreaterOrEqual { attr, key, .. } if *attr == req_start => {
            KeyRange::of_second(&ordering_time(key), true, false)
        }
        PreparedFilter::LessOrEqual { attr, key, .. } if *attr == req_start => {
            KeyRange::of_second(&ordering_time(key), false, true)
        }
        _ => KeyRange::ALL,
    }
}

/// A GeneralizedTime of the whole seconds of an ordering key (the canonical UTC form's digits:
/// `YYYYMMDDHHMMSS` then the fraction's); an unusable key gives an invalid time (no bound).
fn ordering_time(key: &[u8]) -> Vec<u8> {
    let mut time = key.get(..14).unwrap_or_default().to_vec();
    time.push(b'Z');
    time
}

/// The container, then the records with keys in `keys` (from the first when unbounded below),
/// each decoded only when the walk reaches it.
pub(super) fn log_items(read: &ReadTxn, keys: KeyRange) -> Result<TreeItems<'_>, OperationError> {
    let container_dn = crate::accesslog::ACCESSLOG_DN.to_string();
    let mut container = Entry::new(Dn::parse(&container_dn)?);
    container.add_values("objectClass", [b"auditContainer".to_vec()]);
    container.add_values("cn", [b"accesslog".to_vec()]);
    let container = TreeItem {
        key: None,
        shown_dn: container_dn,
        entry: container,
    };
    let records = read
        .audit_records_from(keys.from)?
        .take_while(move |record| match (record, keys.before) {
            (Ok((key, _)), Some(before)) => *key < before,
            _ => true,
        })
        .map(|record| {
            let (key, record) = record?;
            record_item(key, record)
        });
    Ok(Box::new(std::iter::once(Ok(container)).chain(records)))
}

/// A record as an entry below the container, named by its start time.
fn record_item(
    key: u64,
    record: lmdir_store::accesslog::AuditRecord,
) -> Result<TreeItem, OperationError> {
    let dn = format!(
        "reqStart={},{}",
        crate::accesslog::generalized_time(key),
        crate::accesslog::ACCESSLOG_DN
    );
    let mut entry = Entry::new(Dn::parse(&dn)?);
    for (name, values) in record {
        entry.add_values(&name, values);
    }
    Ok(TreeItem {
        key: Some(key),
        shown_dn: dn,
        entry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lmdir_schema::Filter;

    /// 2026-12-05 12:00:00 UTC, as a log key's second.
    const NOON_SECONDS: u64 = 1_796_472_000;

    fn keys(filter: &str, base: &str) -> KeyRange {
        let schema = Schema::builtin();
        let prepared = schema.prepare_filter(&Filter::parse(filter, 32).expect("filter"));
        let base = schema
            .normalize_dn(&Dn::parse(base).expect("dn"))
            .expect("normalized");
        search_keys(&schema, &prepared, &base)
    }

    fn range(from_seconds: u64, before_seconds: Option<u64>) -> KeyRange {
        KeyRange {
            from: from_seconds * MICROS_PER_SECOND,
            before: before_seconds.map(|seconds| seconds * MICROS_PER_SECOND),
        }
    }

    #[test]
    fn a_time_window_bounds_the_log_walk() {
        let container = "cn=accesslog";
        assert_eq!(keys("(reqType=add)", container), KeyRange::ALL);
        assert_eq!(
            keys("(reqStart>=20261205120000.5Z)", container),
            range(NOON_SECONDS, None)
        );
        // A time zone offset is converted: 13:00+0100 is noon UTC.
        assert_eq!(
            keys("(reqStart<=202612051300+0100)", container),
            range(0, Some(NOON_SECONDS + 1))
        );
        assert_eq!(
            keys(
                "(&(reqStart>=20261205120000Z)(reqType=add)(reqStart<=20261205120100Z))",
                container
            ),
            range(NOON_SECONDS, Some(NOON_SECONDS + 61))
        );
        assert_eq!(
            keys("(reqStart=20261205120000.123456Z)", container),
            range(NOON_SECONDS, Some(NOON_SECONDS + 1))
        );
        assert_eq!(
            keys(
                "(|(reqStart=20261205120000Z)(reqStart=20261205120100Z))",
                container
            ),
            range(NOON_SECONDS, Some(NOON_SECONDS + 61))
        );
        // Nothing under a NOT or in an OR part without a bound narrows the walk.
        assert_eq!(
            keys("(!(reqStart<=20261205120000Z))", container),
            KeyRange::ALL
        );
        assert_eq!(
            keys("(|(reqStart>=20261205120000Z)(reqType=add))", container),
            KeyRange::ALL
        );
        assert_eq!(keys("(reqStart>=garbage)", container), KeyRange::ALL);
    }

    #[test]
    fn a_record_base_starts_the_walk_at_its_second() {
        let base = "reqStart=20261205120000.000042Z,cn=accesslog";
        assert_eq!(keys("(objectClass=*)", base), range(NOON_SECONDS, None));
    }
}
