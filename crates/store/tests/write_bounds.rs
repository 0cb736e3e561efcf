//! Bounds on what one write may store: descriptions per entry, protected operational
//! attributes, the per-request deadline, and readable read-back of whatever was accepted.

mod common;

use common::*;
use lmdir_schema::{ModOp, Modification, ResultCode};
use lmdir_store::WriteContext;
use std::time::{Duration, Instant};

fn client() -> WriteContext {
    WriteContext::new("cn=admin,dc=example,dc=com")
}

#[test]
fn descriptions_per_entry_are_bounded_and_the_entry_stays_readable() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(2), 10);
    let target = person_dn(0);
    let mut context = client();
    context.attribute_descriptions_per_entry_max = 64;
    let options = |count: usize| -> Vec<Modification> {
        (0..count)
            .map(|index| Modification {
                op: ModOp::Add,
                description: format!("description;x-{index}"),
                values: vec![b"v".to_vec()],
            })
            .collect()
    };
    let mut write = store.write().unwrap();
    let refused = write.modify(&target, &options(100), &context).unwrap_err();
    assert_eq!(refused.code, ResultCode::AdminLimitExceeded, "{refused}");
    drop(write);
    // Below the bound it is stored, and reads back.
    let mut write = store.write().unwrap();
    write.modify(&target, &options(20), &context).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    let id = read.dn_to_id(&target.to_lowercase()).unwrap();
    let entry = read.entry(id).unwrap().expect("entry readable");
    assert!(entry.attribute_count() > 20);
    assert!(entry.attribute_count() <= 64);
}

#[test]
fn no_user_modification_attributes_need_relax() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(1), 10);
    let forged = |uid: &str| {
        let mut entry = entry(
            &format!("uid={uid},ou=people,dc=example,dc=com"),
            &[
                ("objectClass", "inetOrgPerson"),
                ("uid", uid),
                ("cn", "Forger"),
                ("sn", "Forger"),
            ],
        );
        entry.add_values(
            "entryUUID",
            [b"00000000-0000-0000-0000-000000000000".to_vec()],
        );
        entry
    };
    let mut write = store.write().unwrap();
    let refused = write.add(&forged("forger"), &client()).unwrap_err();
    assert_eq!(refused.code, ResultCode::ConstraintViolation, "{refused}");
    let modified = write
        .modify(
            &person_dn(0),
            &[Modification {
                op: ModOp::Replace,
                description: "creatorsName".to_string(),
                values: vec![b"cn=someone else".to_vec()],
            }],
            &client(),
        )
        .unwrap_err();
    assert_eq!(modified.code, ResultCode::ConstraintViolation, "{modified}");
    let renamed = write
        .modrdn(
            &person_dn(0),
            "uid=x+memberOf=cn=admins\\,dc=example\\,dc=com",
            false,
            None,
            &client(),
        )
        .unwrap_err();
    assert_eq!(renamed.code, ResultCode::ConstraintViolation, "{renamed}");
    // Relax (loader, replication, the Relax control): kept as given.
    let mut relaxed = client();
    relaxed.relax = true;
    write.add(&forged("imported"), &relaxed).unwrap();
    write.commit().unwrap();
}

#[test]
fn a_write_past_its_deadline_fails_with_admin_limit_exceeded() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(1), 10);
    let mut write = store.write().unwrap();
    // A deadline already past: the first step refuses, whatever the machine's speed.
    write.set_deadline(Some(Instant::now() - Duration::from_secs(1)));
    let refused = write
        .modify(
            &person_dn(0),
            &[Modification {
                op: ModOp::Replace,
                description: "description".to_string(),
                values: vec![b"late".to_vec()],
            }],
            &client(),
        )
        .unwrap_err();
    assert_eq!(refused.code, ResultCode::AdminLimitExceeded, "{refused}");
    write.set_deadline(None);
    write
        .modify(
            &person_dn(0),
            &[Modification {
                op: ModOp::Replace,
                description: "description".to_string(),
                values: vec![b"in time".to_vec()],
            }],
            &client(),
        )
        .unwrap();
}
