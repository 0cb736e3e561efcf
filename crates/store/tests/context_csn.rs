//! The store's contextCSN: written in the transaction of each change, never ahead of or behind
//! the data, and a reopened store never reissues a CSN even when the clock went backwards.

mod common;

use common::{context, entry, open, SUFFIX};
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
        write
            .add(
                &entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]),
                &context(),
            )
            .unwrap();
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
