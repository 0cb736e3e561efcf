//! Issue 22 item 1 over the wire: a group of thousands of members (its `member` values out of
//! line in the store) takes member adds and deletes with the usual answers (20, 16), keeps
//! memberOf, answers compare, `(member=dn)` searches, the assertion control and post-read,
//! reads back whole, and a provider's refresh carries a point change of it.

use crate::common;

use std::collections::HashSet;

use common::{group_dn, person_dn, root, TestServer, PEOPLE_PER_GROUP};
use ldap3::controls::{Assertion, PostRead, PostReadResp, RawControl};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};

/// People in the directory; the big group names the first `MEMBERS`.
const PEOPLE: usize = 2_100;
const MEMBERS: usize = 2_000;
const BIG: &str = "cn=everyone,ou=groups,dc=example,dc=com";

fn server() -> TestServer {
    TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.replication.server_id = 5;
        settings.replication.provider = true;
        settings.replication.session_log_entries = 0;
    })
}

fn add_big_group(connection: &mut LdapConn) {
    let members: Vec<String> = (0..MEMBERS).map(person_dn).collect();
    let members: HashSet<&str> = members.iter().map(String::as_str).collect();
    connection
        .add(
            BIG,
            vec![
                ("objectClass", HashSet::from(["groupOfNames"])),
                ("cn", HashSet::from(["everyone"])),
                ("member", members),
            ],
        )
        .expect("add answered")
        .success()
        .expect("the big group is added");
}

fn member_change(connection: &mut LdapConn, add: bool, index: usize) -> u32 {
    let dn = person_dn(index);
    let change = match add {
        true => Mod::Add("member", HashSet::from([dn.as_str()])),
        false => Mod::Delete("member", HashSet::from([dn.as_str()])),
    };
    connection
        .modify(BIG, vec![change])
        .expect("modify answered")
        .rc
}

fn memberof(connection: &mut LdapConn, index: usize) -> Vec<String> {
    let (entries, _) = connection
        .search(
            &person_dn(index),
            Scope::Base,
            "(objectClass=*)",
            vec!["memberOf"],
        )
        .expect("search answered")
        .success()
        .expect("search succeeded");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the person"));
    entry.attrs.get("memberOf").cloned().unwrap_or_default()
}

fn groups_naming(connection: &mut LdapConn, index: usize) -> HashSet<String> {
    let filter = format!("(member={})", person_dn(index));
    let (entries, _) = connection
        .search(
            "ou=groups,dc=example,dc=com",
            Scope::Subtree,
            &filter,
            vec!["1.1"],
        )
        .expect("search answered")
        .success()
        .expect("search succeeded");
    entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase())
        .collect()
}

fn members(connection: &mut LdapConn) -> HashSet<String> {
    let (entries, _) = connection
        .search(BIG, Scope::Base, "(objectClass=*)", vec!["member"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the group"));
    entry.attrs["member"]
        .iter()
        .map(|dn| dn.to_ascii_lowercase())
        .collect()
}

fn compare_member(connection: &mut LdapConn, index: usize) -> bool {
    connection
        .compare(BIG, "member", person_dn(index))
        .expect("compare answered")
        .equal()
        .expect("compareTrue or compareFalse")
}

#[test]
fn member_changes_on_a_big_group_answer_like_any_modify() {
    let server = server();
    let mut connection = root(&server);
    add_big_group(&mut connection);
    let outsider = MEMBERS + 50;
    assert_eq!(member_change(&mut connection, true, outsider), 0);
    assert_eq!(
        member_change(&mut connection, true, outsider),
        20,
        "already there"
    );
    assert_eq!(
        member_change(&mut connection, false, MEMBERS + 99),
        16,
        "not there"
    );
    assert_eq!(member_change(&mut connection, false, 0), 0);
    assert_eq!(
        memberof(&mut connection, outsider).len(),
        2,
        "its own group and the big one"
    );
    assert!(memberof(&mut connection, outsider)
        .iter()
        .any(|dn| dn.eq_ignore_ascii_case(BIG)));
    assert!(!memberof(&mut connection, 0)
        .iter()
        .any(|dn| dn.eq_ignore_ascii_case(BIG)));

    assert!(compare_member(&mut connection, outsider));
    assert!(compare_member(&mut connection, 1));
    assert!(!compare_member(&mut connection, 0));
    assert!(!compare_member(&mut connection, MEMBERS + 1));

    let own_group = group_dn(outsider / PEOPLE_PER_GROUP).to_ascii_lowercase();
    assert_eq!(
        groups_naming(&mut connection, outsider),
        HashSet::from([BIG.to_ascii_lowercase(), own_group])
    );
    assert_eq!(
        groups_naming(&mut connection, 0).len(),
        1,
        "only its 100-group now"
    );

    let mut expected: HashSet<String> = (1..MEMBERS).map(person_dn).collect();
    expected.insert(person_dn(outsider));
    assert_eq!(members(&mut connection), expected);
}

#[test]
fn assertion_and_post_read_see_the_big_group() {
    let server = server();
    let mut connection = root(&server);
    add_big_group(&mut connection);
    let newcomer = person_dn(MEMBERS + 7);
    let asserted = |index: usize| Assertion::new(format!("(member={})", person_dn(index)));
    let passed = connection
        .with_controls(asserted(MEMBERS - 1))
        .modify(
            BIG,
            vec![Mod::Add("member", HashSet::from([newcomer.as_str()]))],
        )
        .expect("modify answered");
    assert_eq!(passed.rc, 0);
    let failed = connection
        .with_controls(asserted(MEMBERS + 8))
        .modify(
            BIG,
            vec![Mod::Delete("member", HashSet::from([newcomer.as_str()]))],
        )
        .expect("modify answered");
    assert_eq!(failed.rc, 122, "assertionFailed");
    let searched = connection
        .with_controls(asserted(MEMBERS + 8))
        .search(BIG, Scope::Base, "(objectClass=*)", vec!["cn"])
        .expect("search answered");
    assert_eq!(searched.1.rc, 122);

    let read: RawControl = PostRead::new(vec!["member"]);
    let result = connection
        .with_controls(read)
        .modify(
            BIG,
            vec![Mod::Delete("member", HashSet::from([newcomer.as_str()]))],
        )
        .expect("modify answered");
    assert_eq!(result.rc, 0);
    let post: PostReadResp = result
        .ctrls
        .iter()
        .find(|control| control.1.ctype == "1.3.6.1.1.13.2")
        .expect("post-read answered")
        .1
        .parse();
    assert_eq!(post.attrs["member"].len(), MEMBERS);
}

/// A refreshOnly sync after a member add sends the big group whole, the new member in it.
#[test]
fn a_refresh_carries_a_point_change_of_the_big_group() {
    use lmdir_sync::messages::{SYNC_DONE_OID, SYNC_REQUEST_OID};
    use lmdir_sync::{SyncDone, SyncMode, SyncRequest};
    let server = server();
    let mut connection = root(&server);
    add_big_group(&mut connection);
    let refresh = |connection: &mut LdapConn, cookie: Option<Vec<u8>>| {
        let request = SyncRequest {
            mode: SyncMode::RefreshOnly,
            cookie,
            reload_hint: false,
        };
        let sync = RawControl {
            ctype: SYNC_REQUEST_OID.to_string(),
            crit: true,
            val: Some(request.encode()),
        };
        let result = connection
            .with_controls(sync)
            .search(BIG, Scope::Base, "(objectClass=*)", vec!["member"])
            .expect("search answered");
        assert_eq!(result.1.rc, 0);
        let done = result
            .1
            .ctrls
            .iter()
            .find(|control| control.1.ctype == SYNC_DONE_OID)
            .and_then(|control| SyncDone::decode(control.1.val.as_deref()?).ok())
            .expect("a Sync Done");
        let entries: Vec<SearchEntry> = result.0.into_iter().map(SearchEntry::construct).collect();
        (entries, done.cookie)
    };
    let (first, cookie) = refresh(&mut connection, None);
    assert_eq!(first[0].attrs["member"].len(), MEMBERS);
    assert_eq!(member_change(&mut connection, true, MEMBERS + 3), 0);
    let (second, _) = refresh(&mut connection, cookie);
    let sent: Vec<&SearchEntry> = second
        .iter()
        .filter(|entry| !entry.attrs.is_empty())
        .collect();
    assert_eq!(sent.len(), 1, "the changed group comes whole");
    let names: HashSet<String> = sent[0].attrs["member"]
        .iter()
        .map(|dn| dn.to_ascii_lowercase())
        .collect();
    assert_eq!(names.len(), MEMBERS + 1);
    assert!(names.contains(&person_dn(MEMBERS + 3)));
}

/// The DN and Sync State of each persist message up to and including one about `marker`.
fn persisted_until(
    stream: &mut ldap3::EntryStream<'_, '_, &'static str, Vec<&'static str>>,
    marker: &str,
) -> Vec<(String, String)> {
    use lmdir_sync::messages::SYNC_STATE_OID;
    let mut got = Vec::new();
    while let Some(entry) = stream.next().expect("a persist message") {
        if entry.is_intermediate() {
            continue;
        }
        let state = entry
            .1
            .iter()
            .find(|control| control.1.ctype == SYNC_STATE_OID)
            .map(|control| {
                format!(
                    "{:?}",
                    control.1.parse::<ldap3::controls::SyncState>().state
                )
            })
            .expect("a Sync State");
        let dn = SearchEntry::construct(entry).dn.to_ascii_lowercase();
        let done = dn == marker.to_ascii_lowercase();
        got.push((dn, state));
        if done {
            return got;
        }
    }
    panic!("the persistent search ended before {marker}: {got:?}");
}

/// A refreshAndPersist search of the groups with `filter`, read up to the end of its refresh.
fn persist_search<'a>(
    connection: &'a mut LdapConn,
    filter: &'a str,
) -> ldap3::EntryStream<'a, 'a, &'static str, Vec<&'static str>> {
    let request = ldap3::controls::SyncRequest {
        mode: ldap3::controls::RefreshMode::RefreshAndPersist,
        cookie: None,
        reload_hint: false,
    };
    let mut stream = connection
        .with_controls(RawControl::from(request))
        .streaming_search(
            "ou=groups,dc=example,dc=com",
            Scope::Subtree,
            filter,
            vec!["cn"],
        )
        .expect("persist search");
    while let Some(entry) = stream.next().expect("a refresh message") {
        if entry.is_intermediate() {
            return stream;
        }
    }
    panic!("the refresh ended without a Sync Info");
}

/// Writes copy each changed entry as it was before the change (for persistent searches to
/// decide what left them) only while a persistent search runs; and a persistent search on
/// `(member=X)` follows point member changes of the big group (2,000 members, whose whole
/// before-image is far past `PRIOR_ENTRY_BYTES_MAX`): another member's arrival sends nothing,
/// X's arrival sends the group whole, X's departure its delete (the point modify's image
/// carries only the member values the running filters assert).
#[test]
fn before_images_only_while_a_persistent_search_runs_and_member_changes_are_followed() {
    let server = server();
    let store = server
        .running()
        .context()
        .database
        .as_ref()
        .expect("database")
        .store()
        .clone();
    let mut admin = root(&server);
    add_big_group(&mut admin);
    let x = MEMBERS + 5;
    let describe = |connection: &mut LdapConn, dn: &str, text: &str| {
        connection
            .modify(dn, vec![Mod::Replace("description", HashSet::from([text]))])
            .expect("modify answered")
            .success()
            .expect("modified");
    };
    let before = store.prior_entries_built();
    describe(&mut admin, &person_dn(x), "no search runs");
    assert_eq!(member_change(&mut admin, true, MEMBERS + 1), 0);
    assert_eq!(
        store.prior_entries_built(),
        before,
        "no persistent search: no before-image"
    );
    let mut searcher = root(&server);
    let filter = format!("(member={})", person_dn(x));
    let mut stream = persist_search(&mut searcher, &filter);
    describe(&mut admin, &person_dn(x), "a search runs");
    assert!(
        store.prior_entries_built() > before,
        "a persistent search runs: the person's before-image is built"
    );
    // Not X: the group neither matched before nor matches now, so nothing is sent (without
    // the bounded before-image the search could not tell, and sent the group as a delete).
    // The persist phase reads a change's entry as it is when it takes the change: X's own
    // arrival waits until a marker shows this one was taken, or the group could be read with
    // X in it and sent, rightly but for another reason.
    assert_eq!(member_change(&mut admin, true, MEMBERS + 7), 0);
    let own = group_dn(x / PEOPLE_PER_GROUP);
    describe(&mut admin, &own, "first marker");
    assert_eq!(
        persisted_until(&mut stream, &own),
        vec![(own.to_ascii_lowercase(), "Modify".to_string())],
        "another member's arrival sends nothing"
    );
    assert_eq!(member_change(&mut admin, true, x), 0);
    assert_eq!(member_change(&mut admin, false, x), 0);
    describe(&mut admin, &own, "marker");
    let got = persisted_until(&mut stream, &own);
    let big = BIG.to_ascii_lowercase();
    let expected = vec![
        (big.clone(), "Modify".to_string()),
        (big.clone(), "Delete".to_string()),
        (own.to_ascii_lowercase(), "Modify".to_string()),
    ];
    // The add is not sent when the persist phase reads the group after X left it again.
    assert!(
        got == expected || got[..] == expected[1..],
        "X's arrival and departure, then the marker: {got:?}"
    );
}
