//! Issue 12, provider step 2 over the wire: RFC 4533 refreshOnly. Without a cookie every entry
//! in scope comes with Sync State add and its entryUUID, and the Sync Done carries a cookie
//! whose CSNs are the directory's contextCSN; with that cookie only the entries changed since
//! come whole, the others as `present` (the consumer deletes what is not mentioned); an
//! up-to-date consumer gets nothing and refreshDeletes TRUE. (refreshAndPersist is tested with
//! real consumers in crates/lmdir/tests/replication_provider.rs.)

use crate::common;

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

/// What one refreshOnly sync search streamed back (ldap3 as a consumer, Sync Infos included).
#[derive(Debug, Default)]
struct Streamed {
    code: u32,
    /// (DN, entryUUID) of the entries sent whole (state add).
    added: Vec<(String, Vec<u8>)>,
    /// DNs of the entries sent as `present` (a present phase).
    presents: Vec<String>,
    /// The UUIDs of the syncIdSets (a delete phase).
    deleted: HashSet<Vec<u8>>,
    cookie: Option<Vec<u8>>,
    refresh_deletes: bool,
}

/// A refreshOnly sync search of `scope` at `base` with `cookie`, read message by message.
fn streamed_sync(
    connection: &mut LdapConn,
    base: &str,
    scope: Scope,
    cookie: Option<Vec<u8>>,
) -> Streamed {
    use ldap3::controls::{parse_syncinfo, EntryState, SyncInfo};
    let request = ldap3::controls::SyncRequest {
        mode: ldap3::controls::RefreshMode::RefreshOnly,
        cookie,
        reload_hint: false,
    };
    let mut stream = connection
        .with_controls(RawControl::from(request))
        .streaming_search(base, scope, "(objectClass=*)", vec!["*", "+"])
        .expect("sync search");
    let mut got = Streamed::default();
    while let Some(entry) = stream.next().expect("sync search message") {
        if entry.is_intermediate() {
            if let SyncInfo::SyncIdSet { sync_uuids, .. } = parse_syncinfo(entry) {
                got.deleted.extend(sync_uuids);
            }
            continue;
        }
        let controls = entry.1.clone();
        let dn = SearchEntry::construct(entry).dn;
        for Control(_, raw) in &controls {
            if raw.ctype == SYNC_STATE_OID {
                let state: ldap3::controls::SyncState = raw.parse();
                match state.state {
                    EntryState::Add => got.added.push((dn.clone(), state.entry_uuid)),
                    EntryState::Present => got.presents.push(dn.clone()),
                    other => panic!("unexpected state {other:?} in a refresh"),
                }
            }
        }
    }
    let result = stream.result();
    got.code = result.rc;
    for Control(_, raw) in &result.ctrls {
        if raw.ctype == SYNC_DONE_OID {
            let done: ldap3::controls::SyncDone = raw.parse();
            got.cookie = done.cookie;
            got.refresh_deletes = done.refresh_deletes;
        }
    }
    got
}

/// The 16 bytes of an entry's entryUUID, read as the rootdn.
fn uuid_of(connection: &mut LdapConn, dn: &str) -> Vec<u8> {
    let (entries, _) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec!["entryUUID"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the entry"));
    let hex: String = entry.attrs["entryUUID"][0]
        .chars()
        .filter(|c| *c != '-')
        .collect();
    (0..16)
        .map(|index| u8::from_str_radix(&hex[index * 2..index * 2 + 2], 16).expect("hex"))
        .collect()
}

fn add_entry(connection: &mut LdapConn, dn: &str, attributes: &[(&str, &str)]) {
    let attributes: Vec<(&str, HashSet<&str>)> = attributes
        .iter()
        .map(|(name, value)| (*name, HashSet::from([*value])))
        .collect();
    connection
        .add(dn, attributes)
        .expect("add answered")
        .success()
        .unwrap_or_else(|error| panic!("add {dn}: {error}"));
}

fn rename(connection: &mut LdapConn, dn: &str, new_rdn: &str) {
    connection
        .modifydn(dn, new_rdn, true, None)
        .expect("modrdn answered")
        .success()
        .unwrap_or_else(|error| panic!("modrdn {dn}: {error}"));
}

/// Users read everything but userPassword, except the entries whose description is `secret`
/// and the subtree of ou=vault,ou=people (hidden from all but the rootdn).
fn hiding_rules() -> Vec<lmdir_config::AccessRule> {
    use lmdir_config::{AccessLevel, AccessTarget, Who};
    vec![
        common::own_password_rule(),
        common::grant(
            AccessTarget {
                filter: Some("(description=secret)".to_string()),
                ..AccessTarget::default()
            },
            Who::Anyone,
            AccessLevel::None,
        ),
        common::grant(
            AccessTarget {
                subtree: Some(format!("ou=vault,ou=people,{SUFFIX}")),
                ..AccessTarget::default()
            },
            Who::Anyone,
            AccessLevel::None,
        ),
        common::grant(AccessTarget::default(), Who::Users, AccessLevel::Read),
    ]
}

/// A provider with its session log (the default) and `hiding_rules`.
fn provider_with_log(people: usize) -> TestServer {
    TestServer::start_populated(people, hiding_rules(), |settings| {
        settings.replication.server_id = SERVER_ID;
        settings.replication.provider = true;
    })
}

/// A logged rename makes the delete phase name the entries it moved out of the search: never
/// the members of the moved subtree the searcher may not see (slapd names only the logged
/// entries). The searcher's refresh either leaves them out or falls back to a present phase.
#[test]
fn a_delete_phase_never_names_hidden_members_of_a_renamed_subtree() {
    let server = provider_with_log(10);
    let mut admin = root(&server);
    let team = format!("ou=team,{SUFFIX}");
    add_entry(
        &mut admin,
        &team,
        &[("objectClass", "organizationalUnit"), ("ou", "team")],
    );
    for (index, description) in ["open", "secret", "open"].iter().enumerate() {
        add_entry(
            &mut admin,
            &format!("uid=t{index},{team}"),
            &[
                ("objectClass", "inetOrgPerson"),
                ("uid", &format!("t{index}")),
                ("cn", "T"),
                ("sn", "T"),
                ("description", description),
            ],
        );
    }
    let hidden = uuid_of(&mut admin, &format!("uid=t1,{team}"));
    let mut user = common::bind(&server, &person_dn(1), common::PERSON_PASSWORD);
    for scope in [Scope::Base, Scope::Subtree] {
        let before = streamed_sync(&mut user, SUFFIX, scope, None);
        assert_eq!(before.code, 0);
        assert!(
            !before.added.iter().any(|(_, uuid)| *uuid == hidden),
            "hidden from the user"
        );
        let cookie = before.cookie.expect("a cookie");
        let current = admin_team_dn(&mut admin);
        let next = if current.starts_with("ou=team,") {
            "ou=crew"
        } else {
            "ou=team"
        };
        rename(&mut admin, &current, next);
        let delta = streamed_sync(&mut user, SUFFIX, scope, Some(cookie));
        assert_eq!(delta.code, 0, "{scope:?}: {delta:?}");
        assert!(
            !delta.deleted.contains(&hidden),
            "{scope:?}: the hidden entry's entryUUID is not disclosed: {delta:?}"
        );
        assert!(
            !delta.added.iter().any(|(_, uuid)| *uuid == hidden),
            "{scope:?}: {delta:?}"
        );
    }
}

/// The DN the team OU has now (ou=team or ou=crew).
fn admin_team_dn(admin: &mut LdapConn) -> String {
    let (entries, _) = admin
        .search(SUFFIX, Scope::OneLevel, "(|(ou=team)(ou=crew))", vec!["ou"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    SearchEntry::construct(entries.into_iter().next().expect("the team")).dn
}

/// A rename of a big subtree: the delete phase does not walk (and list) it past a bound, it
/// falls back to a present phase (RFC 4533 §3.3.1), for a base search that never held it.
#[test]
fn a_renamed_big_subtree_makes_a_present_phase_not_a_list_of_its_members() {
    const MANY: usize = 10_100;
    let server = provider_with_log(MANY);
    let mut admin = root(&server);
    let before = streamed_sync(&mut admin, SUFFIX, Scope::Base, None);
    assert_eq!(before.code, 0);
    let cookie = before.cookie.expect("a cookie");
    rename(&mut admin, &format!("ou=people,{SUFFIX}"), "ou=folk");
    let delta = streamed_sync(&mut admin, SUFFIX, Scope::Base, Some(cookie));
    assert_eq!(delta.code, 0, "{:?}", delta.cookie);
    assert!(
        delta.deleted.len() < 2,
        "the moved subtree is not listed: {} UUIDs",
        delta.deleted.len()
    );
    assert!(!delta.refresh_deletes, "a present phase");
    assert_eq!(
        delta.presents.len() + delta.added.len(),
        1,
        "the base entry"
    );
}

/// What a persistent search sent after its refresh, up to and including the entry `marker`:
/// (DN, state) of each entry message.
fn persisted_until<'a, 'b>(
    stream: &mut ldap3::EntryStream<'a, 'b, &'static str, Vec<&'static str>>,
    marker: &str,
) -> Vec<(String, String)> {
    let mut got = Vec::new();
    while let Some(entry) = stream.next().expect("a persist message") {
        if entry.is_intermediate() {
            continue;
        }
        let controls = entry.1.clone();
        let dn = SearchEntry::construct(entry).dn;
        let state = controls
            .iter()
            .find(|Control(_, raw)| raw.ctype == SYNC_STATE_OID)
            .map(|Control(_, raw)| raw.parse::<ldap3::controls::SyncState>().state)
            .expect("a Sync State");
        let done = dn == marker;
        got.push((dn, format!("{state:?}")));
        if done {
            return got;
        }
    }
    panic!("the persistent search ended before {marker}: {got:?}");
}

/// A refreshAndPersist search of `scope` at `base` with `filter` (no cookie); its refresh is
/// read up to the Sync Info that ends it.
fn persist_search<'a>(
    connection: &'a mut LdapConn,
    base: &'a str,
    filter: &'a str,
) -> ldap3::EntryStream<'a, 'a, &'static str, Vec<&'static str>> {
    persist_search_with(connection, base, filter, ldap3::SearchOptions::new())
}

/// `persist_search` with search `options` (aliases dereferenced, a timeout per message).
fn persist_search_with<'a>(
    connection: &'a mut LdapConn,
    base: &'a str,
    filter: &'a str,
    options: ldap3::SearchOptions,
) -> ldap3::EntryStream<'a, 'a, &'static str, Vec<&'static str>> {
    let request = ldap3::controls::SyncRequest {
        mode: ldap3::controls::RefreshMode::RefreshAndPersist,
        cookie: None,
        reload_hint: false,
    };
    let mut stream = connection
        .with_search_options(options)
        .with_controls(RawControl::from(request))
        .streaming_search(base, Scope::Subtree, filter, vec!["*"])
        .expect("persist search");
    while let Some(entry) = stream.next().expect("a refresh message") {
        if entry.is_intermediate() {
            return stream;
        }
    }
    panic!("the refresh ended without a Sync Info");
}

fn person(uid: &str, description: &str) -> Vec<(&'static str, String)> {
    vec![
        ("objectClass", "inetOrgPerson".to_string()),
        ("uid", uid.to_string()),
        ("cn", uid.to_string()),
        ("sn", uid.to_string()),
        ("description", description.to_string()),
    ]
}

fn add_person(connection: &mut LdapConn, dn: &str, uid: &str, description: &str) {
    let attributes = person(uid, description);
    let borrowed: Vec<(&str, &str)> = attributes
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    add_entry(connection, dn, &borrowed);
}

fn delete(connection: &mut LdapConn, dn: &str) {
    connection
        .delete(dn)
        .expect("delete answered")
        .success()
        .unwrap_or_else(|error| panic!("delete {dn}: {error}"));
}

/// A persistent search is told of a delete only when the deleted entry was returned by the
/// search before the delete (its filter and access, as the searcher), as slapd decides:
/// never an entry hidden from the searcher by a filter rule (which the entry with no values
/// used to pass), never one that did not match the search's filter.
#[test]
fn a_persistent_search_is_told_only_of_deletes_of_entries_it_returned() {
    let server = provider_with_log(10);
    let mut admin = root(&server);
    let mut user = common::bind(&server, &person_dn(1), common::PERSON_PASSWORD);
    let mut stream = persist_search(&mut user, SUFFIX, "(description=open)");
    let people = format!("ou=people,{SUFFIX}");
    let (secret, open, marker) = (
        format!("uid=s1,{people}"),
        format!("uid=o1,{people}"),
        format!("uid=m1,{people}"),
    );
    add_person(&mut admin, &secret, "s1", "secret");
    delete(&mut admin, &secret);
    // Readable, but never matched `(description=open)`.
    let other = format!("uid=n1,{people}");
    add_person(&mut admin, &other, "n1", "other");
    delete(&mut admin, &other);
    add_person(&mut admin, &open, "o1", "open");
    delete(&mut admin, &open);
    add_person(&mut admin, &marker, "m1", "open");
    let got = persisted_until(&mut stream, &marker);
    // o1's add is sent unless the persist phase reads it after its delete (then only the
    // delete: a consumer ignores a UUID it does not hold).
    let expected: Vec<(String, String)> = [(&open, "Add"), (&open, "Delete"), (&marker, "Add")]
        .iter()
        .map(|(dn, state)| (dn.to_string(), state.to_string()))
        .collect();
    assert!(
        got == expected || got[..] == expected[1..],
        "only o1 and the marker: {got:?}"
    );
}

/// An entry that leaves a persistent search's scope is sent as a delete only when the searcher
/// could see it before the move (at its old place, as it was): never the old DN of an entry
/// hidden there, moved to a readable place outside the scope, nor its descendants'.
#[test]
fn a_persistent_search_is_not_told_of_hidden_entries_leaving_its_scope() {
    let server = provider_with_log(10);
    let mut admin = root(&server);
    let people = format!("ou=people,{SUFFIX}");
    let mut user = common::bind(&server, &person_dn(1), common::PERSON_PASSWORD);
    let mut stream = persist_search(&mut user, &people, "(objectClass=*)");
    let vault = format!("ou=vault,{people}");
    let unit = |name: &'static str| [("objectClass", "organizationalUnit"), ("ou", name)];
    add_entry(&mut admin, &vault, &unit("vault"));
    add_person(&mut admin, &format!("uid=v1,{vault}"), "v1", "open");
    add_entry(&mut admin, &format!("ou=box,{vault}"), &unit("box"));
    add_person(&mut admin, &format!("uid=b1,ou=box,{vault}"), "b1", "open");
    for rdn in ["uid=v1", "ou=box"] {
        admin
            .modifydn(&format!("{rdn},{vault}"), rdn, true, Some(SUFFIX))
            .expect("modrdn answered")
            .success()
            .expect("moved out");
    }
    let visible = format!("uid=w1,{people}");
    add_person(&mut admin, &visible, "w1", "open");
    admin
        .modifydn(&visible, "uid=w1", true, Some(SUFFIX))
        .expect("modrdn answered")
        .success()
        .expect("moved out");
    let marker = format!("uid=m2,{people}");
    add_person(&mut admin, &marker, "m2", "open");
    let got = persisted_until(&mut stream, &marker);
    // w1's add is sent unless the persist phase reads it after its move (then only the delete).
    let expected: Vec<(String, String)> =
        [(&visible, "Add"), (&visible, "Delete"), (&marker, "Add")]
            .iter()
            .map(|(dn, state)| (dn.to_string(), state.to_string()))
            .collect();
    assert!(
        got == expected || got[..] == expected[1..],
        "only w1 and the marker: {got:?}"
    );
}

/// A persistent search whose base is an alias, dereferenced in finding, follows the alias in
/// its persist phase as in its refresh (slapd's syncprov keeps the found entry's DN as the
/// search's base): an add under the target is sent, a change to the alias entry is not.
#[test]
fn a_persistent_search_at_an_alias_found_follows_its_target() {
    use std::time::Duration;
    let server = provider_with_log(10);
    let mut admin = root(&server);
    let staff = format!("cn=staff,{SUFFIX}");
    let people = format!("ou=people,{SUFFIX}");
    admin
        .add(
            &staff,
            vec![
                ("objectClass", HashSet::from(["alias", "extensibleObject"])),
                ("cn", HashSet::from(["staff"])),
                ("aliasedObjectName", HashSet::from([people.as_str()])),
            ],
        )
        .expect("add answered")
        .success()
        .expect("alias added");
    let mut searcher = root(&server);
    searcher.with_timeout(Duration::from_secs(10));
    let options = ldap3::SearchOptions::new().deref(ldap3::DerefAliases::Finding);
    let mut stream = persist_search_with(&mut searcher, &staff, "(objectClass=*)", options);
    set_description(&mut admin, &staff, "not in the target's subtree");
    let added = format!("uid=new,{people}");
    add_person(&mut admin, &added, "new", "open");
    let got = persisted_until(&mut stream, &added);
    assert_eq!(
        got,
        vec![(added.clone(), "Add".to_string())],
        "only the add"
    );
}

/// Sync searches never run on the runtime's workers: a few base-scope refreshes whose delete
/// phase reads renamed subtrees (here 24 renames of 10,100 people) used to run inline, so a
/// bind on another connection waited for them; it is answered at once now (and the delete
/// phase stops at its bound).
#[test]
fn base_scope_sync_searches_do_not_stall_other_clients() {
    const MANY: usize = 10_100;
    let server = provider_with_log(MANY);
    let mut admin = root(&server);
    let before = streamed_sync(&mut admin, SUFFIX, Scope::Base, None);
    let cookie = before.cookie.expect("a cookie");
    let names = ["ou=folk", "ou=people"];
    for round in 0..24 {
        let from = names[(round + 1) % 2];
        rename(&mut admin, &format!("{from},{SUFFIX}"), names[round % 2]);
    }
    let searches: Vec<_> = (0..4)
        .map(|_| {
            let url = server.ldap_url();
            let cookie = cookie.clone();
            std::thread::spawn(move || {
                let mut connection = common::bind_url(&url, common::ROOT_DN, common::ROOT_PASSWORD);
                streamed_sync(&mut connection, SUFFIX, Scope::Base, Some(cookie)).code
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let started = std::time::Instant::now();
    let _bound = common::bind(&server, &person_dn(1), common::PERSON_PASSWORD);
    let bind_took = started.elapsed();
    for search in searches {
        assert_eq!(search.join().expect("search thread"), 0);
    }
    let all_took = started.elapsed();
    eprintln!("bind {bind_took:?}, searches {all_took:?}");
    assert!(
        bind_took < std::time::Duration::from_millis(250),
        "a bind waited {bind_took:?} behind sync searches"
    );
}

/// Polls `condition` until it holds; fails after a hang guard (not a measure of speed: the
/// condition either comes true at once or never).
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "{what}: never");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn set_description(connection: &mut LdapConn, dn: &str, description: &str) {
    connection
        .modify(
            dn,
            vec![Mod::Replace("description", HashSet::from([description]))],
        )
        .expect("modify answered")
        .success()
        .unwrap_or_else(|error| panic!("modify {dn}: {error}"));
}

/// A persistent search whose refresh is small (a few index candidates: it runs on the
/// connection's task, in the read txn of its estimate) holds no read txn while it waits for
/// changes: LMDB reuses no page freed after the oldest reader's snapshot, so a pinned one made
/// data.mdb grow with every modify for as long as the search lasted. Each change is read in
/// its own short txn, released before it is sent.
#[test]
fn a_waiting_persistent_search_holds_no_read_txn() {
    let server = provider_with_log(10);
    let store = server
        .running()
        .context()
        .database
        .as_ref()
        .expect("database")
        .store()
        .clone();
    let mut admin = root(&server);
    let target = person_dn(1);
    let mut searcher = root(&server);
    let mut stream = persist_search(&mut searcher, SUFFIX, "(uid=u0000001)");
    for round in 0..20 {
        set_description(&mut admin, &target, &format!("round {round}"));
    }
    set_description(&mut admin, &target, "last");
    let got = persisted_until(&mut stream, &target);
    assert!(
        got.iter().all(|(dn, _)| dn == &target),
        "only the searched entry: {got:?}"
    );
    eventually("no read txn is open while the search waits", || {
        store.open_read_txns() == 0
    });
}

/// A sync search that dereferences aliases in searching (`search`, `always`) is a
/// protocolError "illegal value for derefAliases", refreshOnly and refreshAndPersist alike and
/// whether its base exists or not, as slapd's syncprov answers (checked against slapd in
/// crates/lmdir/tests/replication_provider.rs); `never` and `find` are served.
#[test]
fn a_sync_search_dereferencing_in_searching_is_a_protocol_error() {
    use ldap3::{DerefAliases, SearchOptions};
    let server = provider();
    let mut connection = root(&server);
    let cases = [
        (DerefAliases::Never, SyncMode::RefreshOnly, SUFFIX, 0),
        (DerefAliases::Finding, SyncMode::RefreshOnly, SUFFIX, 0),
        (DerefAliases::Searching, SyncMode::RefreshOnly, SUFFIX, 2),
        (DerefAliases::Always, SyncMode::RefreshOnly, SUFFIX, 2),
        (DerefAliases::Always, SyncMode::RefreshAndPersist, SUFFIX, 2),
        (
            DerefAliases::Searching,
            SyncMode::RefreshOnly,
            "ou=gone,dc=example,dc=com",
            2,
        ),
    ];
    for (deref, mode, base, expected) in cases {
        let request = SyncRequest {
            mode,
            cookie: None,
            reload_hint: false,
        };
        let sync = RawControl {
            ctype: SYNC_REQUEST_OID.to_string(),
            crit: true,
            val: Some(request.encode()),
        };
        let result = connection
            .with_search_options(SearchOptions::new().deref(deref))
            .with_controls(vec![sync])
            .search(base, Scope::Base, "(objectClass=*)", vec!["1.1"])
            .expect("search answered")
            .1;
        assert_eq!(result.rc, expected, "{deref:?} {mode:?} {base}: {result:?}");
        if expected == 2 {
            assert_eq!(result.text, "illegal value for derefAliases");
        }
    }
    assert_eq!(
        server.running().context().persist_searches_running(),
        0,
        "no persist slot was taken"
    );
}
