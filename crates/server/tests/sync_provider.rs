//! Issue 12, provider step 2 over the wire: RFC 4533 refreshOnly. Without a cookie every entry
//! in scope comes with Sync State add and its entryUUID, and the Sync Done carries a cookie
//! whose CSNs are the directory's contextCSN; with that cookie only the entries changed since
//! come whole, the others as `present` (the consumer deletes what is not mentioned); an
//! up-to-date consumer gets nothing and refreshDeletes TRUE. (refreshAndPersist is tested with
//! real consumers in crates/lmdir/tests/replication_provider.rs.)

mod common;

use common::{person_dn, root, TestServer};
use ldap3::controls::{Control, RawControl};
use ldap3::{LdapConn, Mod, ResultEntry, Scope, SearchEntry};
use lmdir_sync::messages::{SYNC_DONE_OID, SYNC_REQUEST_OID, SYNC_STATE_OID};
use lmdir_sync::{Cookie, SyncDone, SyncMode, SyncRequest, SyncState, SyncStateKind};
use std::collections::HashSet;

const PEOPLE: usize = 300;
/// Entries of `populate` besides the people: the suffix, two OUs, one group per 100 people.
const ENTRIES: usize = PEOPLE + 3 + PEOPLE / common::PEOPLE_PER_GROUP;
const SERVER_ID: u16 = 3;
const SUFFIX: &str = "dc=example,dc=com";

struct Refresh {
    /// (DN, state, entryUUID text as sent in the state, attribute count)
    entries: Vec<(String, SyncState, usize)>,
    done: SyncDone,
}

fn raw_control(controls: &[Control], oid: &str) -> Option<Vec<u8>> {
    controls
        .iter()
        .find(|Control(_, raw)| raw.ctype == oid)
        .map(|Control(_, raw)| raw.val.clone().unwrap_or_default())
}

fn sync_search(
    connection: &mut LdapConn,
    mode: SyncMode,
    cookie: Option<&[u8]>,
) -> Result<Refresh, u32> {
    let request = SyncRequest {
        mode,
        cookie: cookie.map(<[u8]>::to_vec),
        reload_hint: false,
    };
    let manage_dsa_it = RawControl {
        ctype: "2.16.840.1.113730.3.4.2".to_string(),
        crit: true,
        val: None,
    };
    let sync = RawControl {
        ctype: SYNC_REQUEST_OID.to_string(),
        crit: true,
        val: Some(request.encode()),
    };
    let result = connection
        .with_controls(vec![sync, manage_dsa_it])
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["*", "+"])
        .expect("search answered");
    if result.1.rc != 0 {
        return Err(result.1.rc);
    }
    let entries = result
        .0
        .into_iter()
        .map(|result_entry: ResultEntry| {
            let controls = result_entry.1.clone();
            let state = SyncState::decode(&raw_control(&controls, SYNC_STATE_OID).expect("state"))
                .expect("a Sync State value");
            let entry = SearchEntry::construct(result_entry);
            if let Some(uuid) = entry.attrs.get("entryUUID") {
                let hex: String = uuid[0].chars().filter(|c| *c != '-').collect();
                let sent: String = state
                    .entry_uuid
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert_eq!(hex, sent, "the state's entryUUID is the entry's");
            }
            (entry.dn, state, entry.attrs.len())
        })
        .collect();
    let done = SyncDone::decode(&raw_control(&result.1.ctrls, SYNC_DONE_OID).expect("Sync Done"))
        .expect("a Sync Done value");
    Ok(Refresh { entries, done })
}

fn context_csn_text(connection: &mut LdapConn) -> Vec<String> {
    let (entries, _) = connection
        .search(SUFFIX, Scope::Base, "(objectClass=*)", vec!["contextCSN"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("suffix"));
    entry.attrs["contextCSN"].clone()
}

/// A provider without a session log (`session_log_entries = 0`): a refresh with a cookie is a
/// present phase (the delete phase is shown by `crates/lmdir/tests/replication_provider.rs`).
fn provider() -> TestServer {
    TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.replication.server_id = SERVER_ID;
        settings.replication.provider = true;
        settings.replication.session_log_entries = 0;
    })
}

#[test]
fn refresh_only_then_present_phase_then_up_to_date() {
    let server = provider();
    let mut connection = root(&server);
    let first = sync_search(&mut connection, SyncMode::RefreshOnly, None).expect("refresh");
    assert_eq!(first.entries.len(), ENTRIES);
    assert!(first
        .entries
        .iter()
        .all(|(_, state, attributes)| state.state == SyncStateKind::Add && *attributes > 0));
    assert!(!first.done.refresh_deletes);
    let cookie = first.done.cookie.expect("a cookie");
    let parsed = Cookie::parse(&cookie).expect("OpenLDAP's cookie format");
    assert_eq!(parsed.sid(), Some(SERVER_ID));
    let csns: Vec<String> = parsed.csns().iter().map(|csn| csn.to_string()).collect();
    assert_eq!(csns, context_csn_text(&mut connection));

    connection
        .modify(
            &person_dn(5),
            vec![Mod::Replace("sn", HashSet::from(["Five"]))],
        )
        .unwrap()
        .success()
        .unwrap();
    let second =
        sync_search(&mut connection, SyncMode::RefreshOnly, Some(&cookie)).expect("refresh");
    assert_eq!(
        second.entries.len(),
        ENTRIES,
        "a present phase names every entry"
    );
    let changed: Vec<&String> = second
        .entries
        .iter()
        .filter(|(_, state, _)| state.state == SyncStateKind::Add)
        .map(|(dn, _, _)| dn)
        .collect();
    assert_eq!(changed, vec![&person_dn(5)]);
    assert!(second
        .entries
        .iter()
        .filter(|(_, state, _)| state.state == SyncStateKind::Present)
        .all(|(_, _, attributes)| *attributes == 0));
    assert!(!second.done.refresh_deletes, "present phase");
    let cookie = second.done.cookie.expect("a cookie");

    let third =
        sync_search(&mut connection, SyncMode::RefreshOnly, Some(&cookie)).expect("refresh");
    assert!(third.entries.is_empty(), "up to date: nothing sent");
    assert!(third.done.refresh_deletes);
}

#[test]
fn refused_without_provider_or_with_a_bad_cookie() {
    let server = TestServer::start_populated(10, Vec::new(), |_| {});
    let mut connection = root(&server);
    assert_eq!(
        sync_search(&mut connection, SyncMode::RefreshOnly, None).err(),
        Some(53)
    );
    assert_eq!(
        sync_search(&mut connection, SyncMode::RefreshAndPersist, None).err(),
        Some(53)
    );
    let server = provider();
    let mut connection = root(&server);
    assert_eq!(
        sync_search(
            &mut connection,
            SyncMode::RefreshOnly,
            Some(b"rid=1,csn=garbage")
        )
        .err(),
        Some(2)
    );
    // A persistent search whose refresh fails ends there (and gives its place back).
    for _ in 0..3 {
        assert_eq!(
            sync_search(
                &mut connection,
                SyncMode::RefreshAndPersist,
                Some(b"rid=1,csn=garbage")
            )
            .err(),
            Some(2)
        );
    }
}
