//! Change records (`WriteTxn::record_changes` / `commit_with_changes`): every committed add,
//! modify, modrdn and delete, in order, with entryUUID, entryCSN and DNs; the snapshot ID of a
//! read txn tells which committed lists it already sees.

use crate::common;

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

/// The DN of member `index` of `store_with_big_group`'s group.
fn member(index: usize) -> String {
    format!("uid=m{index},{SUFFIX}")
}

/// A store holding the suffix and a group of 600 members (m0 to m599), and the group's DN.
fn store_with_big_group(directory: &std::path::Path) -> (lmdir_store::Store, String) {
    let store = open(directory);
    store.set_server_id(3).unwrap();
    let group_dn = format!("cn=big,{SUFFIX}");
    let mut group = entry(&group_dn, &[("objectClass", "groupOfNames"), ("cn", "big")]);
    group.add_values("member", (0..600).map(|index| member(index).into_bytes()));
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    write.add(&group, &context()).unwrap();
    write.commit().unwrap();
    (store, group_dn)
}

/// A point modify of a big group (member values out of line) carries, as its entry before the
/// change, only the member values the readers assert (`PriorNeeds`), each looked up as it was
/// before: never the 600-value list; a reader testing members otherwise (presence) gets none,
/// and with `skip_prior_entries` no image is built at all.
#[test]
fn a_point_modify_carries_only_the_asserted_members_it_held_before() {
    use lmdir_schema::Filter;
    use std::sync::Arc;
    let directory = tempfile::tempdir().unwrap();
    let (store, group_dn) = store_with_big_group(directory.path());
    let needs_of = |text: &str| {
        let mut needs = lmdir_store::PriorNeeds::default();
        needs.add_filter(
            &store
                .schema()
                .prepare_filter(&Filter::parse(text, 8).unwrap()),
        );
        Arc::new(needs)
    };
    let change = |op: ModOp, index: usize| Modification {
        op,
        description: "member".to_string(),
        values: vec![member(index).into_bytes()],
    };
    // m7 held and removed, m8 held and kept, m900 added, m901 never held.
    let equality = format!(
        "(|(member={})(member={})(member={})(member={}))",
        member(7),
        member(8),
        member(900),
        member(901)
    );
    let before_of = |needs: Option<Arc<lmdir_store::PriorNeeds>>| {
        let mut write = store.write().unwrap();
        write.record_changes();
        match needs {
            Some(needs) => write.bound_prior_entries(needs),
            None => write.skip_prior_entries(),
        }
        let changes = [change(ModOp::Delete, 7), change(ModOp::Add, 900)];
        write.modify(&group_dn, &changes, &context()).unwrap();
        let committed = write.commit_with_changes().unwrap();
        // Undone for the next round (not recorded).
        let mut undo = store.write().unwrap();
        let back = [change(ModOp::Add, 7), change(ModOp::Delete, 900)];
        undo.modify(&group_dn, &back, &context()).unwrap();
        undo.commit().unwrap();
        committed.changes[0].before.clone()
    };
    let prior = before_of(Some(needs_of(&equality))).expect("an image");
    let members: Vec<&[u8]> = prior
        .attributes
        .as_slice()
        .iter()
        .filter(|attribute| attribute.description_string.eq_ignore_ascii_case("member"))
        .flat_map(|attribute| {
            attribute
                .values
                .iter()
                .map(|(_, normalized)| &normalized[..])
        })
        .collect();
    assert_eq!(members.len(), 2, "m7 and m8 only: {members:?}");
    assert!(prior.bytes < 4096, "{} bytes", prior.bytes);
    assert!(before_of(Some(needs_of("(member=*)"))).is_none());
    let built = store.prior_entries_built();
    assert!(before_of(None).is_none());
    assert_eq!(store.prior_entries_built(), built);
}
