//! Bounds on what one write may store: descriptions per entry, protected operational
//! attributes, the per-request deadline, and readable read-back of whatever was accepted.

use crate::common;

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

/// Adds `levels` nested OUs below `top`, each named `ou=<prefix><level>`; returns the DNs.
fn chain(store: &lmdir_store::Store, top: &str, levels: usize, prefix: &str) -> Vec<String> {
    let mut dns = Vec::with_capacity(levels);
    let mut parent = top.to_string();
    let mut write = store.write().unwrap();
    for level in 0..levels {
        let value = format!("{prefix}{level}");
        let dn = format!("ou={value},{parent}");
        let unit = entry(
            &dn,
            &[("objectClass", "organizationalUnit"), ("ou", &value)],
        );
        write.add(&unit, &client()).unwrap();
        parent = dn.clone();
        dns.push(dn);
    }
    write.commit().unwrap();
    dns
}

/// A move may not put entries where no request could name them: refused when the moved
/// subtree's deepest entry would have more RDNs than a DN may (`DN_RDN_COUNT_MAX`) or a DN
/// longer than `DN_SIZE_BYTES_MAX`, though the moved entry itself would fit; accepted one
/// level higher, where its descendants are nameable.
#[test]
fn a_move_keeps_every_descendant_nameable() {
    use lmdir_schema::{DN_RDN_COUNT_MAX, DN_SIZE_BYTES_MAX};
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(0), 10);
    // dc=example,dc=com is 2 RDNs: the deepest link of the chain has DN_RDN_COUNT_MAX - 1.
    let deep = chain(&store, SUFFIX, DN_RDN_COUNT_MAX - 3, "c");
    let subtree = chain(&store, SUFFIX, 2, "s");
    let mut write = store.write().unwrap();
    let superior = write.normalized_dn(deep.last().unwrap()).unwrap();
    let refused = write
        .modrdn(&subtree[0], "ou=s0", true, Some(&superior), &client())
        .unwrap_err();
    assert_eq!(refused.code, ResultCode::AdminLimitExceeded, "{refused}");
    assert!(refused.message.contains("RDNs"), "{refused}");
    let superior = write.normalized_dn(&deep[deep.len() - 2]).unwrap();
    write
        .modrdn(&subtree[0], "ou=s0", true, Some(&superior), &client())
        .unwrap();
    write.commit().unwrap();
    let deepest = format!("ou=s1,ou=s0,{}", deep[deep.len() - 2]);
    assert_eq!(
        lmdir_schema::Dn::parse(&deepest).unwrap().rdns.len(),
        DN_RDN_COUNT_MAX
    );
    assert!(store.read().unwrap().dn_to_id(&deepest).is_ok());

    // The same by length: long RDNs down to a DN of 65,400 bytes, a short entry moved below
    // it (it fits) whose child's RDN is 404 bytes (it would not).
    let long = chain_to_length(&store, SUFFIX, DN_SIZE_BYTES_MAX - 136);
    assert_eq!(long.last().unwrap().len(), DN_SIZE_BYTES_MAX - 136);
    let short = chain(&store, SUFFIX, 1, "short")[0].clone();
    chain(&store, &short, 1, &"b".repeat(400));
    let mut write = store.write().unwrap();
    let superior = write.normalized_dn(long.last().unwrap()).unwrap();
    let refused = write
        .modrdn(&short, "ou=short0", true, Some(&superior), &client())
        .unwrap_err();
    assert_eq!(refused.code, ResultCode::AdminLimitExceeded, "{refused}");
    assert!(refused.message.contains("bytes"), "{refused}");
    let superior = write.normalized_dn(&long[long.len() - 3]).unwrap();
    write
        .modrdn(&short, "ou=short0", true, Some(&superior), &client())
        .unwrap();
    write.commit().unwrap();
    assert!(store.check().unwrap().is_clean());
}

/// Adds nested OUs below `top` (RDNs of at most 404 bytes) until the deepest DN is `length`
/// bytes long; returns the DNs.
fn chain_to_length(store: &lmdir_store::Store, top: &str, length: usize) -> Vec<String> {
    let mut dns = Vec::new();
    let mut parent = top.to_string();
    let mut write = store.write().unwrap();
    while parent.len() < length {
        let remaining = length - parent.len();
        let take = match remaining {
            801.. => 404,
            405..=800 => remaining / 2,
            _ => remaining,
        };
        let value = format!("{:04}{}", dns.len(), "a".repeat(take - 8));
        let dn = format!("ou={value},{parent}");
        let unit = entry(
            &dn,
            &[("objectClass", "organizationalUnit"), ("ou", &value)],
        );
        write.add(&unit, &client()).unwrap();
        parent = dn.clone();
        dns.push(dn);
    }
    write.commit().unwrap();
    dns
}
