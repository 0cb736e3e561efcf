//! The store's contextCSN: written in the transaction of each change, never ahead of or behind
//! the data, and a reopened store never reissues a CSN even when the clock went backwards.

use crate::common;

use common::{context, entry, open, suffix_entry, SUFFIX};
use lmdir_sync::Csn;
use std::time::Duration;

fn stored(store: &lmdir_store::Store) -> Vec<Csn> {
    store.read().unwrap().context_csns().unwrap()
}

#[test]
fn aborted_changes_leave_it_and_a_reopened_store_resumes_after_it() {
    let directory = tempfile::tempdir().unwrap();
    let first = {
        let store = open(directory.path());
        store.set_server_id(7).unwrap();
        let mut write = store.write().unwrap();
        write.add(&suffix_entry(), &context()).unwrap();
        write.commit().unwrap();
        let committed = stored(&store);
        assert_eq!(committed.len(), 1);
        assert_eq!(committed[0].sid(), 7);
        // Aborted: its CSN is never the contextCSN.
        let mut write = store.write().unwrap();
        let ou = entry(
            &format!("ou=z,{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", "z")],
        );
        write.add(&ou, &context()).unwrap();
        drop(write);
        assert_eq!(stored(&store), committed);
        committed[0]
    };
    let store = open(directory.path());
    store.set_server_id(7).unwrap();
    // The clock an hour behind the first write: the CSN still sorts after it.
    let mut behind = context();
    behind.now -= Duration::from_secs(3600);
    let mut write = store.write().unwrap();
    let ou = entry(
        &format!("ou=z,{SUFFIX}"),
        &[("objectClass", "organizationalUnit"), ("ou", "z")],
    );
    write.add(&ou, &behind).unwrap();
    write.commit().unwrap();
    let after = stored(&store);
    assert_eq!(after.len(), 1);
    assert!(after[0] > first, "{} after {first}", after[0]);
    assert!(store.set_server_id(4096).is_err(), "server IDs are 12 bits");
}

/// The per-attribute state (`lmdirAttributeCSN`) of a replicating node's local modifies:
/// one value per description changed, its CSN the entry's and its base the CSN it replaced,
/// whichever way the modify went (point edits of an out-of-line member list, or the general
/// way). A multi-provider peer merges by it: without the member state a concurrent change
/// of another attribute elsewhere would win the member list too.
#[test]
fn every_local_modify_records_the_attributes_it_changed() {
    use lmdir_schema::{ModOp, Modification};
    use lmdir_store::attribute_state::{states_of, AttributeState, ATTRIBUTE_STATE};
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    store.set_server_id(3).unwrap();
    common::add_all(&store, &common::directory(4), 100);
    let group = format!("cn=group1,ou=groups,{SUFFIX}");
    let change = |op, description: &str, value: &str| Modification {
        op,
        description: description.to_string(),
        values: vec![value.as_bytes().to_vec()],
    };
    let states = || {
        let read = store.read().unwrap();
        let entry = read.entry(read.dn_to_id(&group).unwrap()).unwrap().unwrap();
        let schema = store.schema();
        let values = |name: &str| -> Vec<Vec<u8>> {
            entry
                .values_of(schema.attribute(name).unwrap())
                .into_iter()
                .map(|(original, _)| original.to_vec())
                .collect()
        };
        let entry_csn = Csn::parse(&values("entryCSN")[0]).unwrap();
        let states = values(ATTRIBUTE_STATE);
        (states_of(states.iter().map(Vec::as_slice)), entry_csn)
    };
    let modify = |modifications: &[Modification]| {
        let mut write = store.write().unwrap();
        write.modify(&group, modifications, &context()).unwrap();
        write.commit().unwrap();
    };
    // A point modify: one member added to the out-of-line list.
    modify(&[change(ModOp::Add, "member", &common::person_dn(3))]);
    let (after_add, first) = states();
    assert_eq!(
        after_add.get("member"),
        Some(&AttributeState {
            description: "member".into(),
            csn: first,
            base: None
        }),
        "{after_add:?}"
    );
    // An inline attribute and a member delete in one point modify.
    modify(&[
        change(ModOp::Add, "description", "crew"),
        change(ModOp::Delete, "member", &common::person_dn(3)),
    ]);
    let (after_delete, second) = states();
    assert!(second > first);
    for description in ["member", "description"] {
        let state = after_delete.get(description).expect(description);
        assert_eq!(state.csn, second, "{description}");
    }
    assert_eq!(after_delete["member"].base, Some(first));
    assert_eq!(after_delete["description"].base, None);
}
