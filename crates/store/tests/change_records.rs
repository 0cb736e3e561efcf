//! Change records (`WriteTxn::record_changes` / `commit_with_changes`): every committed add,
//! modify, modrdn and delete, in order, with entryUUID, entryCSN and DNs; the snapshot ID of a
//! read txn tells which committed lists it already sees.

mod common;

use common::{context, entry, open, suffix_entry, SUFFIX};
use lmdir_schema::{ModOp, Modification};
use lmdir_store::ChangeKind;

#[test]
fn committed_changes_come_back_in_order_and_snapshots_place_them() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    store.set_server_id(3).unwrap();
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    // Not recording: nothing is handed back.
    let unrecorded = write.commit_with_changes().unwrap();
    assert!(unrecorded.changes.is_empty());
    let before = store.read().unwrap();

    let ou = |name: &str| {
        entry(
            &format!("ou={name},{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", name)],
        )
    };
    let mut write = store.write().unwrap();
    write.record_changes();
    write.add(&ou("a"), &context()).unwrap();
    write.add(&ou("b"), &context()).unwrap();
    let description = Modification {
        op: ModOp::Replace,
        description: "description".to_string(),
        values: vec![b"changed".to_vec()],
    };
    write
        .modify(&format!("ou=a,{SUFFIX}"), &[description], &context())
        .unwrap();
    write
        .modrdn(
            &format!("ou=a,{SUFFIX}"),
            "ou=c",
            true,
            Some(&write.normalized_dn(&format!("ou=b,{SUFFIX}")).unwrap()),
            &context(),
        )
        .unwrap();
    write.delete(&format!("ou=c,ou=b,{SUFFIX}")).unwrap();
    let committed = write.commit_with_changes().unwrap();
    let kinds: Vec<ChangeKind> = committed.changes.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            ChangeKind::Add,
            ChangeKind::Add,
            ChangeKind::Modify,
            ChangeKind::ModRdn,
            ChangeKind::Delete
        ]
    );
    assert!(!committed.overflowed);
    let a = &committed.changes[0];
    assert!(a.entry_uuid.is_some());
    assert_ne!(committed.changes[1].entry_uuid, a.entry_uuid);
    assert_eq!(committed.changes[2].entry_uuid, a.entry_uuid);
    assert_eq!(committed.changes[3].dn, format!("ou=c,ou=b,{SUFFIX}"));
    assert_eq!(
        committed.changes[3].old_dn.as_deref(),
        Some(format!("ou=a,{SUFFIX}").as_str())
    );
    let delete = &committed.changes[4];
    assert_eq!(delete.dn, format!("ou=c,ou=b,{SUFFIX}"));
    assert_eq!(delete.entry_uuid, a.entry_uuid);
    // Every change has its own CSN of server ID 3, increasing; the delete's is the newest and
    // is the contextCSN.
    let csns: Vec<_> = committed.changes.iter().map(|c| c.csn.unwrap()).collect();
    assert!(csns.windows(2).all(|pair| pair[0] < pair[1]), "{csns:?}");
    assert!(csns.iter().all(|csn| csn.sid() == 3));
    let after = store.read().unwrap();
    assert_eq!(after.context_csns().unwrap(), vec![delete.csn.unwrap()]);
    assert!(before.snapshot_id() < committed.txn_id);
    assert!(after.snapshot_id() >= committed.txn_id);

    // Aborted: the records die with the transaction.
    let mut write = store.write().unwrap();
    write.record_changes();
    write.add(&ou("d"), &context()).unwrap();
    drop(write);
    let mut write = store.write().unwrap();
    write.record_changes();
    let empty = write.commit_with_changes().unwrap();
    assert!(empty.changes.is_empty());
}

/// A modify, modrdn and delete record carry the entry as it was before (its DN then and its
/// values), within `PRIOR_ENTRY_BYTES_MAX`: a bigger entry's record carries none.
#[test]
fn changes_carry_the_entry_before_them_within_a_bound() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    store.set_server_id(3).unwrap();
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    let big = "x".repeat(lmdir_store::PRIOR_ENTRY_BYTES_MAX);
    for (name, description) in [("small", "before"), ("big", big.as_str())] {
        let dn = format!("ou={name},{SUFFIX}");
        let attributes = [
            ("objectClass", "organizationalUnit"),
            ("ou", name),
            ("description", description),
        ];
        write.add(&entry(&dn, &attributes), &context()).unwrap();
    }
    write.commit().unwrap();
    let mut write = store.write().unwrap();
    write.record_changes();
    write
        .modrdn(
            &format!("ou=small,{SUFFIX}"),
            "ou=moved",
            true,
            None,
            &context(),
        )
        .unwrap();
    write.delete(&format!("ou=moved,{SUFFIX}")).unwrap();
    write.delete(&format!("ou=big,{SUFFIX}")).unwrap();
    let committed = write.commit_with_changes().unwrap();
    let priors: Vec<Option<String>> = committed
        .changes
        .iter()
        .map(|change| change.before.as_ref().map(|prior| prior.dn.clone()))
        .collect();
    assert_eq!(
        priors,
        [
            Some(format!("ou=small,{SUFFIX}")),
            Some(format!("ou=moved,{SUFFIX}")),
            None,
        ]
    );
    let before = committed.changes[0].before.as_ref().unwrap();
    let values: Vec<&[u8]> = before
        .attributes
        .as_slice()
        .iter()
        .filter(|attribute| attribute.description_string == "description")
        .flat_map(|attribute| attribute.values.iter().map(|(original, _)| &original[..]))
        .collect();
    assert_eq!(values, [b"before".as_slice()]);
}
