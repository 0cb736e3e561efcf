//! Cross-check against an independent implementation: ldap3_proto (the LDAP library the server
//! speaks through) decodes what this crate encodes, and this crate decodes what ldap3_proto
//! encodes, for the three Sync controls.

use ldap3_lber::common::TagClass;
use ldap3_lber::structure::{StructureTag, PL};
use ldap3_lber::structures::{ASNTag, Tag};
use ldap3_proto::control::LdapControl;
use ldap3_proto::proto::{SyncRequestMode, SyncStateValue};
use lmdir_sync::messages::{SYNC_DONE_OID, SYNC_REQUEST_OID, SYNC_STATE_OID};
use lmdir_sync::{SyncDone, SyncMode, SyncRequest, SyncState, SyncStateKind};

const UUID: [u8; 16] = [7; 16];

/// `Control ::= SEQUENCE { controlType, controlValue }` around one of our values.
fn control(oid: &str, value: Vec<u8>) -> LdapControl {
    let octets = |bytes: Vec<u8>| StructureTag {
        class: TagClass::Universal,
        id: 4,
        payload: PL::P(bytes),
    };
    let tag = StructureTag {
        class: TagClass::Universal,
        id: 16,
        payload: PL::C(vec![octets(oid.as_bytes().to_vec()), octets(value)]),
    };
    LdapControl::try_from(tag).expect("ldap3_proto decodes the control")
}

/// The controlValue bytes ldap3_proto writes for `control`.
fn value_of(control: LdapControl) -> Vec<u8> {
    let tag: Tag = control.into();
    let children = tag.into_structure().expect_constructed().expect("SEQUENCE");
    children
        .into_iter()
        .last()
        .and_then(StructureTag::expect_primitive)
        .expect("controlValue")
}

#[test]
fn sync_request_both_ways() {
    let ours = SyncRequest {
        mode: SyncMode::RefreshAndPersist,
        cookie: Some(b"rid=002,csn=x".to_vec()),
        reload_hint: true,
    };
    match control(SYNC_REQUEST_OID, ours.encode()) {
        LdapControl::SyncRequest {
            mode,
            cookie,
            reload_hint,
            ..
        } => {
            assert_eq!(mode, SyncRequestMode::RefreshAndPersist);
            assert_eq!(cookie, ours.cookie);
            assert!(reload_hint);
        }
        other => panic!("decoded as {other:?}"),
    }
    // ldap3_proto omits a FALSE reloadHint; OpenLDAP writes it. Both decode the same.
    let theirs = value_of(LdapControl::SyncRequest {
        criticality: true,
        mode: SyncRequestMode::RefreshOnly,
        cookie: None,
        reload_hint: false,
    });
    assert_eq!(
        SyncRequest::decode(&theirs),
        Ok(SyncRequest {
            mode: SyncMode::RefreshOnly,
            cookie: None,
            reload_hint: false
        })
    );
}

#[test]
fn sync_state_both_ways() {
    let ours = SyncState {
        state: SyncStateKind::Modify,
        entry_uuid: UUID,
        cookie: Some(b"rid=002".to_vec()),
    };
    match control(SYNC_STATE_OID, ours.encode()) {
        LdapControl::SyncState {
            state,
            entry_uuid,
            cookie,
        } => {
            assert_eq!(state, SyncStateValue::Modify);
            assert_eq!(entry_uuid.as_bytes(), &UUID);
            assert_eq!(cookie, ours.cookie);
        }
        other => panic!("decoded as {other:?}"),
    }
    let theirs = value_of(LdapControl::SyncState {
        state: SyncStateValue::Modify,
        entry_uuid: uuid::Uuid::from_bytes(UUID),
        cookie: Some(b"rid=002".to_vec()),
    });
    assert_eq!(theirs, ours.encode());
    assert_eq!(SyncState::decode(&theirs), Ok(ours));
}

#[test]
fn sync_done_both_ways() {
    let ours = SyncDone {
        cookie: Some(b"rid=002".to_vec()),
        refresh_deletes: true,
    };
    match control(SYNC_DONE_OID, ours.encode()) {
        LdapControl::SyncDone {
            cookie,
            refresh_deletes,
        } => {
            assert_eq!(cookie, ours.cookie);
            assert!(refresh_deletes);
        }
        other => panic!("decoded as {other:?}"),
    }
    let theirs = value_of(LdapControl::SyncDone {
        cookie: Some(b"rid=002".to_vec()),
        refresh_deletes: true,
    });
    assert_eq!(theirs, ours.encode());
    assert_eq!(SyncDone::decode(&theirs), Ok(ours));
}
