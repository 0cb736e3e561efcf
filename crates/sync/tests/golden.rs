//! Golden byte vectors for every RFC 4533 value, each derived by hand from the ASN.1 and from
//! which DEFAULT values OpenLDAP writes (see `messages.rs`), then the strictness cases.

use lmdir_sync::messages::SYNC_ID_SET_UUIDS_MAX;
use lmdir_sync::{
    DecodeError, SyncDone, SyncInfo, SyncMode, SyncRequest, SyncState, SyncStateKind,
};

/// "rid=001" as an OCTET STRING: 04 07 'r' 'i' 'd' '=' '0' '0' '1'.
const COOKIE_TLV: [u8; 9] = [0x04, 0x07, b'r', b'i', b'd', b'=', b'0', b'0', b'1'];
const UUID: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
const UUID_2: [u8; 16] = [0xff; 16];

fn cookie() -> Option<Vec<u8>> {
    Some(b"rid=001".to_vec())
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn uuid_tlv(uuid: &[u8; 16]) -> Vec<u8> {
    concat(&[&[0x04, 0x10], uuid])
}

fn assert_golden_request(value: SyncRequest, bytes: &[u8]) {
    assert_eq!(value.encode(), bytes, "{value:?}");
    assert_eq!(SyncRequest::decode(bytes), Ok(value));
}

#[test]
fn sync_request_golden() {
    // SEQUENCE (30, 3 + 9 + 3 = 15) { ENUMERATED 3 (0a 01 03), cookie, BOOLEAN FALSE (01 01 00) }:
    // the consumer writes reloadHint even when FALSE.
    let bytes = concat(&[
        &[0x30, 0x0f, 0x0a, 0x01, 0x03],
        &COOKIE_TLV,
        &[0x01, 0x01, 0x00],
    ]);
    assert_golden_request(
        SyncRequest {
            mode: SyncMode::RefreshAndPersist,
            cookie: cookie(),
            reload_hint: false,
        },
        &bytes,
    );
    // SEQUENCE (30 06) { ENUMERATED 1, BOOLEAN TRUE (01 01 ff) }
    assert_golden_request(
        SyncRequest {
            mode: SyncMode::RefreshOnly,
            cookie: None,
            reload_hint: true,
        },
        &[0x30, 0x06, 0x0a, 0x01, 0x01, 0x01, 0x01, 0xff],
    );
    // Other encoders may omit the DEFAULT reloadHint: accepted as FALSE.
    assert_eq!(
        SyncRequest::decode(&[0x30, 0x03, 0x0a, 0x01, 0x01]).map(|request| request.reload_hint),
        Ok(false)
    );
}

#[test]
fn sync_state_golden() {
    // SEQUENCE (3 + 18 = 21 = 0x15) { ENUMERATED add (1), OCTET STRING 16 bytes (04 10 ...) }
    let without_cookie = concat(&[&[0x30, 0x15, 0x0a, 0x01, 0x01], &uuid_tlv(&UUID)]);
    let state = SyncState {
        state: SyncStateKind::Add,
        entry_uuid: UUID,
        cookie: None,
    };
    assert_eq!(state.encode(), without_cookie);
    assert_eq!(SyncState::decode(&without_cookie), Ok(state));
    // ... with delete (3) and the cookie: 21 + 9 = 30 = 0x1e.
    let with_cookie = concat(&[
        &[0x30, 0x1e, 0x0a, 0x01, 0x03],
        &uuid_tlv(&UUID),
        &COOKIE_TLV,
    ]);
    let state = SyncState {
        state: SyncStateKind::Delete,
        entry_uuid: UUID,
        cookie: cookie(),
    };
    assert_eq!(state.encode(), with_cookie);
    assert_eq!(SyncState::decode(&with_cookie), Ok(state));
}

#[test]
fn sync_done_golden() {
    // Nothing to say: an empty SEQUENCE (refreshDeletes FALSE is the DEFAULT, omitted).
    let empty = SyncDone {
        cookie: None,
        refresh_deletes: false,
    };
    assert_eq!(empty.encode(), [0x30, 0x00]);
    assert_eq!(SyncDone::decode(&[0x30, 0x00]), Ok(empty));
    // SEQUENCE (9 + 3 = 12 = 0x0c) { cookie, BOOLEAN TRUE }
    let bytes = concat(&[&[0x30, 0x0c], &COOKIE_TLV, &[0x01, 0x01, 0xff]]);
    let done = SyncDone {
        cookie: cookie(),
        refresh_deletes: true,
    };
    assert_eq!(done.encode(), bytes);
    assert_eq!(SyncDone::decode(&bytes), Ok(done));
}

fn assert_golden_info(value: SyncInfo, bytes: &[u8]) {
    assert_eq!(value.encode(), bytes, "{value:?}");
    assert_eq!(SyncInfo::decode(bytes, SYNC_ID_SET_UUIDS_MAX), Ok(value));
}

#[test]
fn sync_info_golden() {
    // newcookie [0] primitive: 80 07 "rid=001"
    assert_golden_info(
        SyncInfo::NewCookie(b"rid=001".to_vec()),
        &concat(&[&[0x80], &COOKIE_TLV[1..]]),
    );
    // refreshDelete [1] constructed (a1), empty: refreshDone TRUE is the DEFAULT, omitted.
    assert_golden_info(
        SyncInfo::RefreshDelete {
            cookie: None,
            refresh_done: true,
        },
        &[0xa1, 0x00],
    );
    // refreshPresent [2] (a2, 9 + 3 = 12) { cookie, BOOLEAN FALSE }: FALSE is written.
    assert_golden_info(
        SyncInfo::RefreshPresent {
            cookie: cookie(),
            refresh_done: false,
        },
        &concat(&[&[0xa2, 0x0c], &COOKIE_TLV, &[0x01, 0x01, 0x00]]),
    );
    // syncIdSet [3] (a3, 3 + 2 + 36 = 41 = 0x29) { BOOLEAN TRUE, SET (31 24) { 2 × 04 10 ... } }
    assert_golden_info(
        SyncInfo::SyncIdSet {
            cookie: None,
            refresh_deletes: true,
            uuids: vec![UUID, UUID_2],
        },
        &concat(&[
            &[0xa3, 0x29, 0x01, 0x01, 0xff, 0x31, 0x24],
            &uuid_tlv(&UUID),
            &uuid_tlv(&UUID_2),
        ]),
    );
    // syncIdSet [3] (a3, 9 + 2 = 11) { cookie, empty SET }: refreshDeletes FALSE omitted.
    assert_golden_info(
        SyncInfo::SyncIdSet {
            cookie: cookie(),
            refresh_deletes: false,
            uuids: vec![],
        },
        &concat(&[&[0xa3, 0x0b], &COOKIE_TLV, &[0x31, 0x00]]),
    );
}

#[test]
fn explicit_default_values_are_accepted() {
    // refreshDelete { refreshDone TRUE } written out, as BER allows.
    assert_eq!(
        SyncInfo::decode(&[0xa1, 0x03, 0x01, 0x01, 0xff], 1),
        Ok(SyncInfo::RefreshDelete {
            cookie: None,
            refresh_done: true
        })
    );
    // Any non-zero octet is TRUE in BER.
    assert_eq!(
        SyncDone::decode(&[0x30, 0x03, 0x01, 0x01, 0x01]).map(|done| done.refresh_deletes),
        Ok(true)
    );
}

fn is_malformed<T: std::fmt::Debug>(result: Result<T, DecodeError>) -> bool {
    matches!(result, Err(DecodeError::Malformed(_)))
}

#[test]
fn strictness() {
    let request = |bytes: &[u8]| is_malformed(SyncRequest::decode(bytes));
    assert!(request(&[]), "empty");
    assert!(
        request(&[0x30, 0x03, 0x0a, 0x01, 0x01, 0x00]),
        "trailing byte"
    );
    assert!(
        request(&[0x31, 0x03, 0x0a, 0x01, 0x01]),
        "SET instead of SEQUENCE"
    );
    assert!(
        request(&[0x30, 0x03, 0x02, 0x01, 0x01]),
        "INTEGER instead of ENUMERATED"
    );
    assert!(request(&[0x30, 0x03, 0x0a, 0x01, 0x02]), "mode 2");
    assert!(
        request(&[0x30, 0x04, 0x0a, 0x02, 0x00, 0x01]),
        "padded ENUMERATED"
    );
    assert!(request(&[0x30, 0x00]), "mode missing");
    assert!(
        request(&[0x30, 0x81, 0x03, 0x0a, 0x01, 0x01]),
        "non-minimal length"
    );
    assert!(
        request(&[0x30, 0x80, 0x0a, 0x01, 0x01, 0x00, 0x00]),
        "indefinite length"
    );
    assert!(
        request(&[0x30, 0x05, 0x0a, 0x01, 0x01, 0x04, 0x05]),
        "truncated inner element"
    );
    assert!(
        request(&[0x30, 0x04, 0x0a, 0x01, 0x01, 0x00]),
        "garbage inside the SEQUENCE"
    );
    assert!(
        request(&[0x30, 0x07, 0x0a, 0x01, 0x01, 0x01, 0x02, 0xff, 0xff]),
        "two-octet BOOLEAN"
    );
    assert!(
        request(&[0x30, 0x08, 0x0a, 0x01, 0x01, 0x24, 0x03, 0x04, 0x01, b'x']),
        "constructed OCTET STRING"
    );
    assert!(
        request(&[0x30, 0x09, 0x0a, 0x01, 0x01, 0x01, 0x01, 0x00, 0x04, 0x00]),
        "cookie after reloadHint"
    );
    assert!(request(&[0x3f, 0x1f, 0x00]), "high tag number");
    let short_uuid = concat(&[&[0x30, 0x14, 0x0a, 0x01, 0x01, 0x04, 0x0f], &UUID[..15]]);
    assert!(is_malformed(SyncState::decode(&short_uuid)), "15-byte UUID");
    assert!(
        is_malformed(SyncState::decode(&[0x30, 0x03, 0x0a, 0x01, 0x04])),
        "state 4"
    );
    let info = |bytes: &[u8]| is_malformed(SyncInfo::decode(bytes, SYNC_ID_SET_UUIDS_MAX));
    assert!(info(&[0x04, 0x00]), "universal tag");
    assert!(info(&[0xa0, 0x00]), "constructed newcookie");
    assert!(info(&[0x81, 0x00]), "primitive refreshDelete");
    assert!(info(&[0xa4, 0x00]), "choice [4]");
    assert!(info(&[0xa3, 0x00]), "syncIdSet without its SET");
    assert!(info(&[0xa3, 0x04, 0x31, 0x02, 0x04, 0x00]), "empty UUID");
    assert!(info(&[0xa3, 0x04, 0x31, 0x00, 0x31, 0x00]), "two SETs");
    assert!(info(&[0xa3, 0x02, 0x30, 0x00]), "SEQUENCE instead of SET");
    let deep = [0xa3, 0x06, 0x31, 0x04, 0x30, 0x02, 0x30, 0x00];
    assert!(info(&deep), "nested too deep");
}

#[test]
fn limits() {
    let set = concat(&[
        &[0xa3, 0x26, 0x31, 0x24],
        &uuid_tlv(&UUID),
        &uuid_tlv(&UUID_2),
    ]);
    assert_eq!(
        SyncInfo::decode(&set, 1),
        Err(DecodeError::TooManyUuids { found: 2, limit: 1 })
    );
    assert!(SyncInfo::decode(&set, 2).is_ok());

    let long = vec![b'x'; lmdir_sync::cookie::COOKIE_BYTES_MAX + 1];
    let request = SyncRequest {
        mode: SyncMode::RefreshOnly,
        cookie: Some(long.clone()),
        reload_hint: false,
    };
    assert_eq!(
        SyncRequest::decode(&request.encode()),
        Err(DecodeError::CookieTooLong(long.len()))
    );
    assert_eq!(
        SyncInfo::decode(&SyncInfo::NewCookie(long.clone()).encode(), 1),
        Err(DecodeError::CookieTooLong(long.len()))
    );
}
