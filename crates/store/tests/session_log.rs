//! The provider's session log: each delete and rename is logged by the transaction that makes
//! it (an aborted one logs nothing), the log never holds more than its cap, trimmed rows raise
//! the floor that tells which cookies the log still covers, and turning it off and on restarts
//! it at the contextCSN.

use crate::common;

use common::{context, entry, open, suffix_entry, SUFFIX};
use lmdir_store::{LoggedKind, Store};
use lmdir_sync::ContextCsns;

/// The contextCSN now, as a consumer's cookie would hold it.
fn cookie(store: &Store) -> ContextCsns {
    let mut csns = ContextCsns::new();
    for csn in store.read().unwrap().context_csns().unwrap() {
        csns.merge(csn);
    }
    csns
}

fn person(uid: &str, ou: &str) -> lmdir_schema::Entry {
    entry(
        &format!("uid={uid},ou={ou},{SUFFIX}"),
        &[
            ("objectClass", "inetOrgPerson"),
            ("uid", uid),
            ("cn", uid),
            ("sn", uid),
        ],
    )
}

fn unseen(store: &Store, known: &ContextCsns) -> Vec<(LoggedKind, u32)> {
    let mut changes = Vec::new();
    store
        .read()
        .unwrap()
        .for_each_unseen_change(known, &mut |change| {
            changes.push((change.kind, change.entry));
            Ok(true)
        })
        .unwrap();
    changes
}

#[test]
fn deletes_and_renames_are_logged_in_their_txn_and_trimmed_to_the_cap() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    store.set_server_id(1).unwrap();
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    for ou in ["a", "b"] {
        let dn = format!("ou={ou},{SUFFIX}");
        let ou_entry = entry(&dn, &[("objectClass", "organizationalUnit"), ("ou", ou)]);
        write.add(&ou_entry, &context()).unwrap();
    }
    let mut ids = Vec::new();
    for index in 0..5 {
        ids.push(
            write
                .add(&person(&format!("p{index}"), "a"), &context())
                .unwrap(),
        );
    }
    write.commit().unwrap();
    assert_eq!(
        store.read().unwrap().session_log().unwrap(),
        None,
        "off by default"
    );

    store.set_session_log_entries(3).unwrap();
    let start = cookie(&store);
    let log = store.read().unwrap().session_log().unwrap().expect("a log");
    assert_eq!((log.rows, log.entries_max), (0, 3));
    assert!(log.covers(&start), "it starts at the contextCSN");
    assert!(
        !log.covers(&ContextCsns::new()),
        "an older cookie is not covered"
    );

    let mut write = store.write().unwrap();
    write
        .modrdn(
            &format!("uid=p0,ou=a,{SUFFIX}"),
            "uid=p0",
            false,
            Some(&write.normalized_dn(&format!("ou=b,{SUFFIX}")).unwrap()),
            &context(),
        )
        .unwrap();
    write.commit().unwrap();
    let mut aborted = store.write().unwrap();
    aborted.delete(&format!("uid=p1,ou=a,{SUFFIX}")).unwrap();
    drop(aborted);
    assert_eq!(unseen(&store, &start), vec![(LoggedKind::Rename, ids[0])]);

    let mut after_delete = Vec::new();
    for index in 1..5 {
        let mut write = store.write().unwrap();
        write
            .delete(&format!("uid=p{index},ou=a,{SUFFIX}"))
            .unwrap();
        write.commit().unwrap();
        after_delete.push(cookie(&store));
    }
    let log = store.read().unwrap().session_log().unwrap().unwrap();
    assert_eq!(log.rows, 3, "trimmed to the cap");
    assert!(
        !log.covers(&start),
        "the rename and first delete were trimmed"
    );
    assert!(
        log.covers(&after_delete[0]),
        "a cookie after the last trimmed change"
    );
    assert_eq!(
        unseen(&store, &after_delete[0]),
        vec![
            (LoggedKind::Delete, ids[2]),
            (LoggedKind::Delete, ids[3]),
            (LoggedKind::Delete, ids[4])
        ]
    );
    assert!(unseen(&store, &after_delete[3]).is_empty());
    let report = store.check().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    store.set_session_log_entries(0).unwrap();
    assert_eq!(store.read().unwrap().session_log().unwrap(), None);
    store.set_session_log_entries(10).unwrap();
    let log = store.read().unwrap().session_log().unwrap().unwrap();
    assert_eq!(log.rows, 0, "a restarted log holds nothing from before");
    assert!(log.covers(&after_delete[3]) && !log.covers(&after_delete[2]));
    assert!(
        store.set_session_log_entries(10_000_001).is_err(),
        "above the maximum"
    );
}
