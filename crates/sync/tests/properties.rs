//! Round-trip and ordering properties of CSNs, cookies and the RFC 4533 values, and decoders that
//! never panic on arbitrary bytes.

use lmdir_sync::cookie::COOKIE_BYTES_MAX;
use lmdir_sync::csn::{COUNT_MAX, MODIFICATION_MAX, SID_MAX};
use lmdir_sync::messages::SYNC_ID_SET_UUIDS_MAX;
use lmdir_sync::{
    ContextCsns, Cookie, Csn, CsnGenerator, SyncDone, SyncInfo, SyncMode, SyncRequest, SyncState,
    SyncStateKind,
};
use proptest::prelude::*;

/// 0000-01-01 .. 9999-12-31T23:59:59.999999, in microseconds since the epoch.
const MICROS_RANGE: std::ops::RangeInclusive<i64> =
    -62_167_219_200_000_000..=253_402_300_799_999_999;

fn csn() -> impl Strategy<Value = Csn> {
    (
        MICROS_RANGE,
        0..=COUNT_MAX,
        0..=SID_MAX,
        0..=MODIFICATION_MAX,
    )
        .prop_map(|(micros, count, sid, modification)| {
            Csn::new(micros, count, sid, modification).expect("in range")
        })
}

fn cookie_bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300))
}

fn uuid() -> impl Strategy<Value = [u8; 16]> {
    any::<[u8; 16]>()
}

proptest! {
    #[test]
    fn csn_text_round_trips(csn in csn()) {
        let text = csn.to_string();
        prop_assert_eq!(text.len(), 40);
        prop_assert_eq!(Csn::parse(text.as_bytes()), Ok(csn));
    }

    /// OpenLDAP orders CSNs by their text; the typed order must agree.
    #[test]
    fn csn_order_is_text_order(a in csn(), b in csn()) {
        prop_assert_eq!(a.cmp(&b), a.to_string().cmp(&b.to_string()));
    }

    #[test]
    fn csn_parse_never_panics(text in proptest::collection::vec(any::<u8>(), 0..60)) {
        let _ = Csn::parse(&text);
    }

    /// Whatever the clock does, each CSN is strictly greater than the one before.
    #[test]
    fn generator_is_strictly_increasing(
        sid in 0..=SID_MAX,
        readings in proptest::collection::vec(any::<i64>(), 1..200),
    ) {
        let mut generator = CsnGenerator::new(sid).expect("sid");
        let mut previous: Option<Csn> = None;
        for micros in readings {
            let next = generator.next_at_micros(micros).expect("csn");
            prop_assert_eq!(next.sid(), sid);
            if let Some(previous) = previous {
                prop_assert!(next > previous, "{} after {}", next, previous);
            }
            previous = Some(next);
        }
    }

    #[test]
    fn cookie_round_trips(
        rid in proptest::option::of(0u16..=999),
        sid in proptest::option::of(0..=SID_MAX),
        csns in proptest::collection::vec(csn(), 0..20),
        delcsn in proptest::option::of(csn()),
    ) {
        let mut context = ContextCsns::new();
        for csn in csns {
            context.merge(csn);
        }
        let cookie = Cookie::new(rid, sid, context, delcsn).expect("cookie");
        let text = cookie.to_bytes();
        if text.is_empty() {
            prop_assert!(Cookie::parse(&text).is_err());
        } else {
            prop_assert!(text.len() <= COOKIE_BYTES_MAX);
            prop_assert_eq!(Cookie::parse(&text), Ok(cookie));
        }
    }

    /// Whatever parses prints to text that parses to the same cookie.
    #[test]
    fn cookie_parse_never_panics(text in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(cookie) = Cookie::parse(&text) {
            prop_assert_eq!(Cookie::parse(&cookie.to_bytes()), Ok(cookie));
        }
    }

    #[test]
    fn merge_is_max_per_sid(csns in proptest::collection::vec(csn(), 0..50)) {
        let mut context = ContextCsns::new();
        for csn in &csns {
            context.merge(*csn);
        }
        for csn in &csns {
            let held = context.get(csn.sid()).expect("merged");
            prop_assert!(held >= *csn);
        }
        prop_assert!(context.status_of(&context).is_up_to_date());
    }

    #[test]
    fn sync_request_round_trips(
        refresh_only in any::<bool>(),
        cookie in cookie_bytes(),
        reload_hint in any::<bool>(),
    ) {
        let mode = if refresh_only { SyncMode::RefreshOnly } else { SyncMode::RefreshAndPersist };
        let value = SyncRequest { mode, cookie, reload_hint };
        prop_assert_eq!(SyncRequest::decode(&value.encode()), Ok(value));
    }

    #[test]
    fn sync_state_round_trips(state in 0u8..4, entry_uuid in uuid(), cookie in cookie_bytes()) {
        let state = [
            SyncStateKind::Present,
            SyncStateKind::Add,
            SyncStateKind::Modify,
            SyncStateKind::Delete,
        ][usize::from(state)];
        let value = SyncState { state, entry_uuid, cookie };
        prop_assert_eq!(SyncState::decode(&value.encode()), Ok(value));
    }

    #[test]
    fn sync_done_round_trips(cookie in cookie_bytes(), refresh_deletes in any::<bool>()) {
        let value = SyncDone { cookie, refresh_deletes };
        prop_assert_eq!(SyncDone::decode(&value.encode()), Ok(value));
    }

    #[test]
    fn sync_info_round_trips(
        choice in 0u8..4,
        cookie in cookie_bytes(),
        flag in any::<bool>(),
        uuids in proptest::collection::vec(uuid(), 0..300),
    ) {
        let value = match choice {
            0 => SyncInfo::NewCookie(cookie.unwrap_or_default()),
            1 => SyncInfo::RefreshDelete { cookie, refresh_done: flag },
            2 => SyncInfo::RefreshPresent { cookie, refresh_done: flag },
            _ => SyncInfo::SyncIdSet { cookie, refresh_deletes: flag, uuids },
        };
        prop_assert_eq!(SyncInfo::decode(&value.encode(), SYNC_ID_SET_UUIDS_MAX), Ok(value));
    }

    /// Arbitrary bytes: every decoder returns, and whatever decodes re-encodes to a value that
    /// decodes to the same thing.
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        if let Ok(value) = SyncRequest::decode(&bytes) {
            prop_assert_eq!(SyncRequest::decode(&value.encode()), Ok(value));
        }
        if let Ok(value) = SyncState::decode(&bytes) {
            prop_assert_eq!(SyncState::decode(&value.encode()), Ok(value));
        }
        if let Ok(value) = SyncDone::decode(&bytes) {
            prop_assert_eq!(SyncDone::decode(&value.encode()), Ok(value));
        }
        if let Ok(value) = SyncInfo::decode(&bytes, 8) {
            prop_assert_eq!(SyncInfo::decode(&value.encode(), 8), Ok(value));
        }
    }
}
