//! lmdir as an RFC 4533 provider for an unmodified OpenLDAP slapd consumer (`syncrepl`
//! refreshOnly and refreshAndPersist) and for another lmdir: the real `lmdir serve` with
//! `[replication] provider = true`, a private consumer pulling from it, checked by comparing
//! `ldapsearch` dumps of both (user attributes plus entryUUID, entryCSN, timestamps and names)
//! and, at the end, `slapcat` / `lmdir export` against `lmdir export`. Convergence is polled,
//! with a generous hang guard only: nothing here depends on speed.

use crate::conformance;
use crate::slapd_sync;
use crate::support;

use conformance::{free_port, modify, SUFFIX};
use ldap3::controls::{
    parse_syncinfo, Control, EntryState, RawControl, RefreshMode, SyncDone, SyncInfo, SyncRequest,
    SyncState,
};
use slapd_sync::Dump;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Settings, TestServer, ROOT_DN, ROOT_PASSWORD};

/// Longest wait for the consumer to converge: a hang guard, not a speed requirement.
const CONVERGENCE_WAIT_MAX: Duration = Duration::from_secs(120);
const PEOPLE: u64 = 300;

/// A slapd (back-mdb) whose only content comes from a `syncrepl` consumer of lmdir.
type Consumer = slapd_sync::Slapd;

fn start_consumer(provider_port: u16) -> Consumer {
    start_consumer_typed(provider_port, "refreshOnly interval=00:00:00:01")
}

/// A consumer of `type=<sync_type>` (with its own further syncrepl words).
fn start_consumer_typed(provider_port: u16, sync_type: &str) -> Consumer {
    Consumer::start(free_port(), |root| {
        slapd_sync::config_head(root, &["memberof"])
            + &format!(
                "sizelimit unlimited\n\
                 database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"cn=consumer,{SUFFIX}\"\nrootpw secret\n\
                 directory {}\nmaxsize 1073741824\ndbnosync\nindex objectClass,entryCSN,entryUUID eq\n\
                 syncrepl rid=001 provider=ldap://127.0.0.1:{provider_port} bindmethod=simple \
                 binddn=\"{ROOT_DN}\" credentials={ROOT_PASSWORD} searchbase=\"{SUFFIX}\" \
                 type={sync_type} retry=\"1 +\" schemachecking=off\n",
                root.join("db").display()
            )
    })
}

/// DN (lowercased) → (entryUUID, entryCSN) of every record of an LDIF dump (folded lines
/// joined first).
fn identities(ldif: &str) -> BTreeMap<String, (String, String)> {
    let unfolded = ldif.replace("\n ", "");
    unfolded
        .split("\n\n")
        .filter_map(|record| {
            let mut dn = None;
            let (mut uuid, mut csn) = (String::new(), String::new());
            for line in record.lines() {
                if let Some(value) = line.strip_prefix("dn: ") {
                    dn = Some(value.to_ascii_lowercase().replace(", ", ","));
                } else if let Some(value) = line.strip_prefix("entryUUID: ") {
                    uuid = value.to_ascii_lowercase();
                } else if let Some(value) = line.strip_prefix("entryCSN: ") {
                    csn = value.to_string();
                }
            }
            dn.map(|dn| (dn, (uuid, csn)))
        })
        .collect()
}

/// `lmdir export` of a server's database.
fn export(server: &TestServer) -> String {
    let output = server.run_command(&["export"]);
    assert!(
        output.status.success(),
        "lmdir export failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn dump(port: u16, bind_dn: &str) -> Dump {
    slapd_sync::dump(port, bind_dn, ROOT_PASSWORD)
}

fn assert_converges(provider: &mut TestServer, consumer: &Consumer, context: &str) -> Dump {
    let bind_dn = format!("cn=consumer,{SUFFIX}");
    assert_converges_on(provider, (consumer.port, &bind_dn), context, &|| {
        consumer.log()
    })
}

/// Polls until the dump of the consumer at `port` (read as `bind_dn`) equals the provider's;
/// `consumer_log` explains a failure.
fn assert_converges_on(
    provider: &mut TestServer,
    (port, bind_dn): (u16, &str),
    context: &str,
    consumer_log: &dyn Fn() -> String,
) -> Dump {
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    loop {
        let expected = dump(provider.port, ROOT_DN);
        let found = dump(port, bind_dn);
        if expected == found && !expected.is_empty() {
            return found;
        }
        provider.assert_running(context);
        if Instant::now() >= deadline {
            panic!(
                "{context}: no convergence: {}\n{}\nconsumer:\n{}",
                slapd_sync::difference(&expected, &found),
                provider.logs(),
                consumer_log()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn tools_or_skip() -> bool {
    if let Err(reason) = conformance::tools_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true and a dependency is missing: {reason}"
        );
        eprintln!("skipped: {reason}");
        return false;
    }
    let back_mdb = Path::new("/usr/lib/ldap/back_mdb.la").exists();
    assert!(
        back_mdb || std::env::var_os("CI").is_none(),
        "CI=true and slapd's back_mdb module is missing"
    );
    back_mdb
}

#[test]
fn a_slapd_refresh_only_consumer_loads_lmdir_and_follows_its_changes() {
    if !tools_or_skip() {
        return;
    }
    let mut provider =
        TestServer::prepare("[replication]\nserver_id = 1\nprovider = true\n", PEOPLE);
    provider.start();
    let consumer = start_consumer(provider.port);
    let loaded = assert_converges(&mut provider, &consumer, "initial refresh");
    assert!(loaded.len() as u64 > PEOPLE);
    let person = loaded
        .keys()
        .find(|dn| dn.starts_with("dn: uid="))
        .expect("a person")
        .trim_start_matches("dn: ")
        .to_string();
    let parent = person.split_once(',').expect("a parent").1.to_string();
    let port = provider.port;
    let change = |ldif: String| {
        let answer = modify(port, &ldif);
        assert_eq!(answer.code, 0, "change on lmdir failed: {ldif}");
    };
    change(format!(
        "dn: uid=added,{parent}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: added\n\
         cn: Added\nsn: Added\n\ndn: {person}\nchangetype: modify\nreplace: description\n\
         description: changed on lmdir\n"
    ));
    assert_converges(&mut provider, &consumer, "add and modify");
    change(format!(
        "dn: uid=added,{parent}\nchangetype: modrdn\nnewrdn: uid=renamed\ndeleteoldrdn: 1\n\n\
         dn: {person}\nchangetype: delete\n"
    ));
    let after = assert_converges(
        &mut provider,
        &consumer,
        "modrdn and delete (present phase)",
    );
    assert_eq!(after.len(), loaded.len(), "one added, one deleted");
    provider.assert_no_panic("provider");
}

/// Values of `attribute` in every entry of `scope` at `base` on lmdir, as `ldapsearch` prints
/// them.
fn values(port: u16, base: &str, scope: &str, attribute: &str) -> Vec<String> {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args([
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
            "-s",
            scope,
            "-b",
            base,
            attribute,
        ])
        .output()
        .expect("running ldapsearch");
    let prefix = format!("{attribute}: ");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

/// contextCSN of server ID 1 and the newest entryCSN of server ID 1 (CSN text orders as CSNs).
fn context_and_newest(port: u16) -> (Option<String>, Option<String>) {
    let ours = |csn: &String| csn.contains("#001#");
    let context = values(port, SUFFIX, "base", "contextCSN")
        .into_iter()
        .find(ours);
    let newest = values(port, SUFFIX, "sub", "entryCSN")
        .into_iter()
        .filter(ours)
        .max();
    (context, newest)
}

#[test]
fn context_csn_matches_the_data_after_a_sigkill_mid_writes() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare("[replication]\nserver_id = 1\nprovider = true\n", 50);
    provider.start();
    let port = provider.port;
    let person = values(port, SUFFIX, "sub", "uid")
        .into_iter()
        .next()
        .expect("a person");
    let dn = values(port, SUFFIX, "sub", "entryDN")
        .into_iter()
        .find(|dn| dn.starts_with(&format!("uid={person},")))
        .expect("the person's DN");
    // A stream of modifies, killed while it runs: whatever committed, contextCSN matches it.
    let changes: String = (0..2000)
        .map(|index| {
            format!("dn: {dn}\nchangetype: modify\nreplace: description\ndescription: {index}\n\n")
        })
        .collect();
    let writer = std::thread::spawn(move || modify(port, &changes));
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    while context_and_newest(port).0.is_none() {
        assert!(Instant::now() < deadline, "no write committed");
        std::thread::sleep(Duration::from_millis(20));
    }
    provider.kill_hard();
    let _ = writer.join();
    provider.start();
    let (context, newest) = context_and_newest(port);
    assert!(context.is_some(), "a committed change left a contextCSN");
    assert_eq!(
        context, newest,
        "contextCSN is the newest committed entryCSN"
    );
    provider.assert_check_clean("after SIGKILL");
}

const SYNC_STATE_OID: &str = "1.3.6.1.4.1.4203.1.9.1.2";
const SYNC_DONE_OID: &str = "1.3.6.1.4.1.4203.1.9.1.3";
const E_SYNC_REFRESH_REQUIRED: u32 = 4096;

type Uuids = BTreeSet<Vec<u8>>;

/// What one refreshOnly sync search (ldap3, as a consumer) got back.
#[derive(Debug, Default)]
struct Refresh {
    code: u32,
    /// entryUUIDs sent whole (state add).
    added: Uuids,
    /// Entries sent as `present` (a present phase).
    presents: usize,
    /// UUIDs of the syncIdSets with refreshDeletes TRUE (a delete phase).
    deleted: Uuids,
    id_sets: usize,
    cookie: Option<Vec<u8>>,
    refresh_deletes: bool,
}

/// A refreshOnly sync search of the subtree at `base` on lmdir with `cookie`, as the rootdn.
fn refresh(port: u16, base: &str, cookie: Option<Vec<u8>>) -> Refresh {
    let mut ldap = ldap3::LdapConn::new(&format!("ldap://127.0.0.1:{port}")).expect("connect");
    ldap.simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("bind result");
    let request = SyncRequest {
        mode: RefreshMode::RefreshOnly,
        cookie,
        reload_hint: false,
    };
    let mut stream = ldap
        .with_controls(RawControl::from(request))
        .streaming_search(
            base,
            ldap3::Scope::Subtree,
            "(objectClass=*)",
            vec!["*", "+"],
        )
        .expect("sync search");
    let mut got = Refresh::default();
    while let Some(entry) = stream.next().expect("sync search message") {
        if entry.is_intermediate() {
            match parse_syncinfo(entry) {
                SyncInfo::SyncIdSet {
                    refresh_deletes,
                    sync_uuids,
                    ..
                } => {
                    assert!(refresh_deletes, "a syncIdSet of a delete phase");
                    got.id_sets += 1;
                    got.deleted.extend(sync_uuids);
                }
                other => panic!("unexpected Sync Info {other:?}"),
            }
            continue;
        }
        for Control(_, raw) in &entry.1 {
            if raw.ctype == SYNC_STATE_OID {
                let state: SyncState = raw.parse();
                match state.state {
                    EntryState::Add => {
                        got.added.insert(state.entry_uuid);
                    }
                    EntryState::Present => got.presents += 1,
                    other => panic!("unexpected state {other:?} in a refresh"),
                }
            }
        }
    }
    let result = stream.result();
    got.code = result.rc;
    for Control(_, raw) in &result.ctrls {
        if raw.ctype == SYNC_DONE_OID {
            let done: SyncDone = raw.parse();
            got.cookie = done.cookie;
            got.refresh_deletes = done.refresh_deletes;
        }
    }
    got
}

/// DNs of the people (uid=...) on lmdir, in a stable order.
fn people(port: u16) -> Vec<String> {
    let mut dns: Vec<String> = values(port, SUFFIX, "sub", "entryDN")
        .into_iter()
        .filter(|dn| dn.starts_with("uid="))
        .collect();
    dns.sort();
    dns
}

fn deletes_ldif(dns: &[String]) -> String {
    dns.iter()
        .map(|dn| format!("dn: {dn}\nchangetype: delete\n\n"))
        .collect()
}

fn provider_with_log(session_log_entries: u64, people: u64) -> TestServer {
    let mut provider = TestServer::prepare(
        &format!(
            "[replication]\nserver_id = 1\nprovider = true\n\
             session_log_entries = {session_log_entries}\n"
        ),
        people,
    );
    provider.start();
    provider
}

#[test]
fn a_cookie_the_session_log_covers_gets_a_delete_phase() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = provider_with_log(100_000, PEOPLE);
    let port = provider.port;
    let consumer = start_consumer(port);
    assert_converges(&mut provider, &consumer, "initial refresh");
    let persons = people(port);
    let parent = persons[0].split_once(',').expect("a parent").1.to_string();
    let in_parent: Vec<&String> = persons
        .iter()
        .filter(|dn| dn.ends_with(&format!(",{parent}")))
        .collect();
    assert!(in_parent.len() >= 4, "people under {parent}");
    let before = refresh(port, &parent, None);
    assert_eq!(before.code, 0);
    let cookie = before.cookie.clone().expect("a cookie");

    // Two deletes, a rename within the parent, a move out of it (to the suffix).
    let renamed_rdn = "uid=renamed-in-place";
    let change = |ldif: String| {
        let answer = modify(port, &ldif);
        assert_eq!(answer.code, 0, "change on lmdir failed: {ldif}");
    };
    change(format!(
        "dn: {}\nchangetype: delete\n\ndn: {}\nchangetype: delete\n\n\
         dn: {}\nchangetype: modrdn\nnewrdn: {renamed_rdn}\ndeleteoldrdn: 0\n\n\
         dn: {}\nchangetype: modrdn\nnewrdn: uid=moved-out\ndeleteoldrdn: 0\nnewsuperior: {SUFFIX}\n",
        in_parent[0], in_parent[1], in_parent[2], in_parent[3]
    ));

    let delta = refresh(port, &parent, Some(cookie));
    let after = refresh(port, &parent, None);
    assert_eq!(delta.code, 0, "delete phase answered");
    assert_eq!(delta.presents, 0, "no present phase: {delta:?}");
    assert!(delta.id_sets >= 1 && delta.refresh_deletes, "{delta:?}");
    let gone: Uuids = before.added.difference(&after.added).cloned().collect();
    assert_eq!(gone.len(), 3, "two deleted and one moved out of {parent}");
    assert_eq!(
        delta.deleted, gone,
        "exactly the deleted and moved-out UUIDs"
    );
    assert!(
        delta.added.len() < 10 && delta.added.is_subset(&after.added),
        "only changed entries are sent: {} of {}",
        delta.added.len(),
        after.added.len()
    );
    let applied: Uuids = before
        .added
        .difference(&delta.deleted)
        .chain(&delta.added)
        .cloned()
        .collect();
    assert_eq!(
        applied, after.added,
        "the delta applied to the old set is the new set"
    );

    // The slapd consumer (whole suffix) converges from its cookie the same way.
    assert_converges(
        &mut provider,
        &consumer,
        "deletes and renames (delete phase)",
    );
    provider.assert_no_panic("provider");
}

/// A move from slapd: `lmdir load` of a `slapcat` export keeps its contextCSN (per server ID
/// the greatest of the suffix's contextCSN and the entries' entryCSNs, as `slapadd -w`), so a
/// consumer presenting the cookie it had from slapd is up to date: no entries, no present
/// phase, no e-syncRefreshRequired, with and without a session log.
#[test]
fn a_cookie_from_slapd_is_current_after_loading_its_slapcat_export() {
    let exported = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\
         entryUUID: 6b2d4c9e-0f0a-4d1e-9a51-0b7e8c2f1a01\n\
         entryCSN: 20251101000000.000000Z#000000#001#000000\n\
         contextCSN: 20260101000000.000000Z#000000#001#000000\n\
         contextCSN: 20250101000000.000000Z#000000#002#000000\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\
         entryUUID: 6b2d4c9e-0f0a-4d1e-9a51-0b7e8c2f1a02\n\
         entryCSN: 20251215000000.000000Z#000000#001#000000\n\n\
         dn: cn=a,ou=People,{SUFFIX}\nobjectClass: person\ncn: a\nsn: a\n\
         entryUUID: 6b2d4c9e-0f0a-4d1e-9a51-0b7e8c2f1a03\n\
         entryCSN: 20260102000000.000000Z#000003#002#000000\n"
    );
    let cookie = b"rid=001,sid=001,csn=20260101000000.000000Z#000000#001#000000;\
                   20260102000000.000000Z#000003#002#000000"
        .to_vec();
    for session_log_entries in [0, 100] {
        let mut provider = TestServer::prepare(
            &format!(
                "[replication]\nserver_id = 3\nprovider = true\n\
                 session_log_entries = {session_log_entries}\n"
            ),
            0,
        );
        let path = provider.directory.path().join("slapcat.ldif");
        std::fs::write(&path, &exported).unwrap();
        let output = provider.run_command(&["load".as_ref(), path.as_os_str()]);
        assert!(
            output.status.success(),
            "lmdir load failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        provider.start();
        let got = refresh(provider.port, SUFFIX, Some(cookie.clone()));
        let context = format!("session log of {session_log_entries}: {got:?}");
        assert_eq!(got.code, 0, "{context}");
        assert!(got.added.is_empty(), "no entry is sent: {context}");
        assert_eq!(got.presents, 0, "no present phase: {context}");
        assert!(got.deleted.is_empty(), "nothing deleted: {context}");
        assert!(got.refresh_deletes, "up to date: {context}");
        // A consumer without a cookie still gets every entry.
        assert_eq!(refresh(provider.port, SUFFIX, None).added.len(), 3);
        provider.assert_no_panic("provider");
    }
}

#[test]
fn a_consumer_offline_longer_than_the_session_log_reloads_and_converges() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = provider_with_log(50, PEOPLE);
    let port = provider.port;
    let mut consumer = start_consumer(port);
    assert_converges(&mut provider, &consumer, "initial refresh");
    let mut replica = TestServer::prepare(
        &format!(
            "[replication]\n[[replication.consumer]]\nrid = 2\n\
             provider = \"ldap://127.0.0.1:{port}\"\nsearch_base = \"{SUFFIX}\"\n\
             type = \"refreshOnly\"\ninterval_seconds = 1\nretry_seconds = 1\n\
             bind_dn = \"{ROOT_DN}\"\ncredentials = \"{ROOT_PASSWORD}\"\n"
        ),
        0,
    );
    replica.start();
    assert_replica_converges(&mut provider, &mut replica, "lmdir replica, initial");
    let cookie = refresh(port, SUFFIX, None).cookie.expect("a cookie");
    consumer.stop();
    replica.kill_hard();

    let persons = people(port);
    let answer = modify(port, &deletes_ldif(&persons[..200]));
    assert_eq!(answer.code, 0, "200 deletes");
    let stale = refresh(port, SUFFIX, Some(cookie));
    assert_eq!(
        stale.code, E_SYNC_REFRESH_REQUIRED,
        "a cookie older than the log: {stale:?}"
    );

    // slapd's consumer sends reloadHint TRUE: it gets the present phase instead of 4096.
    consumer.resume();
    assert_converges(
        &mut provider,
        &consumer,
        "slapd with a cookie older than the log",
    );
    replica.start();
    assert_replica_converges(
        &mut provider,
        &mut replica,
        "lmdir after e-syncRefreshRequired",
    );
    replica.assert_check_clean("lmdir replica");
    provider.assert_check_clean("provider");
    provider.assert_no_panic("provider");
}

fn assert_replica_converges(provider: &mut TestServer, replica: &mut TestServer, context: &str) {
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    loop {
        let expected = dump(provider.port, ROOT_DN);
        if expected == dump(replica.port, ROOT_DN) && !expected.is_empty() {
            return;
        }
        provider.assert_running(context);
        replica.assert_running(context);
        assert!(
            Instant::now() < deadline,
            "{context}: no convergence\n{}",
            replica.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_cookie_taken_before_a_sigkill_still_gets_a_correct_delete_phase() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = provider_with_log(100_000, PEOPLE);
    let port = provider.port;
    let before = refresh(port, SUFFIX, None);
    let cookie = before.cookie.clone().expect("a cookie");
    let persons = people(port);
    let ldif = deletes_ldif(&persons);
    let writer = std::thread::spawn(move || modify(port, &ldif));
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    while people(port).len() == persons.len() {
        assert!(Instant::now() < deadline, "no delete committed");
        std::thread::sleep(Duration::from_millis(20));
    }
    provider.kill_hard();
    let _ = writer.join();
    provider.start();
    let delta = refresh(port, SUFFIX, Some(cookie));
    let after = refresh(port, SUFFIX, None);
    assert_eq!(delta.code, 0, "{delta:?}");
    assert_eq!(delta.presents, 0, "a delete phase");
    let gone: Uuids = before.added.difference(&after.added).cloned().collect();
    assert!(!gone.is_empty());
    assert_eq!(
        delta.deleted, gone,
        "the log holds exactly the committed deletes"
    );
    let (context, newest) = context_and_newest(port);
    assert!(context >= newest, "contextCSN covers every entryCSN");
    provider.assert_check_clean("after SIGKILL");
}

#[test]
fn the_session_log_never_holds_more_than_its_cap() {
    if !tools_or_skip() {
        return;
    }
    const CAP: usize = 20;
    let provider = provider_with_log(CAP as u64, PEOPLE);
    let port = provider.port;
    let old_cookie = refresh(port, SUFFIX, None).cookie.expect("a cookie");
    let persons = people(port);
    let answer = modify(port, &deletes_ldif(&persons[..CAP * 10]));
    assert_eq!(answer.code, 0, "10x the cap in deletes");
    let stat = provider.run_command(&["stat"]);
    let text = String::from_utf8_lossy(&stat.stdout);
    let rows: usize = text
        .lines()
        .find_map(|line| line.strip_prefix("sessionlog"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|rows| rows.parse().ok())
        .unwrap_or_else(|| panic!("no sessionlog row count in lmdir stat:\n{text}"));
    assert_eq!(rows, CAP, "the log is full and trimmed to its cap");
    assert_eq!(
        refresh(port, SUFFIX, Some(old_cookie)).code,
        E_SYNC_REFRESH_REQUIRED
    );
    let fresh = refresh(port, SUFFIX, None).cookie.expect("a cookie");
    let current = refresh(port, SUFFIX, Some(fresh));
    assert_eq!(current.code, 0);
    assert!(current.added.is_empty() && current.deleted.is_empty() && current.presents == 0);
    provider.assert_check_clean("after trimming");
}

/// People loaded before a refreshAndPersist consumer starts (the initial refresh's size).
const PERSIST_PEOPLE: u64 = 10_000;

/// Adds, modifies, a modrdn with newSuperior and deletes on lmdir, each answered before the
/// next; returns nothing, panics on a failed change.
fn change_stream(port: u16, people: &[String]) {
    let change = |ldif: String| {
        let answer = modify(port, &ldif);
        assert_eq!(answer.code, 0, "change on lmdir failed: {ldif}");
    };
    let parent = people[0].split_once(',').expect("a parent").1.to_string();
    change(format!(
        "dn: ou=moved,{SUFFIX}\nchangetype: add\nobjectClass: organizationalUnit\nou: moved\n\n\
         dn: uid=added,{parent}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: added\n\
         cn: Added\nsn: Added\n"
    ));
    for (index, person) in people.iter().enumerate().take(20) {
        change(format!(
            "dn: {person}\nchangetype: modify\nreplace: description\ndescription: persisted {index}\n"
        ));
    }
    change(format!(
        "dn: uid=added,{parent}\nchangetype: modrdn\nnewrdn: uid=renamed\ndeleteoldrdn: 1\n\
         newsuperior: ou=moved,{SUFFIX}\n\ndn: {}\nchangetype: modrdn\nnewrdn: uid=mover\n\
         deleteoldrdn: 0\nnewsuperior: ou=moved,{SUFFIX}\n",
        people[1]
    ));
    for person in &people[2..6] {
        change(format!("dn: {person}\nchangetype: delete\n"));
    }
}

/// The DNs of some people on lmdir.
fn some_people(dump: &Dump) -> Vec<String> {
    dump.keys()
        .filter(|dn| dn.starts_with("dn: uid="))
        .take(10)
        .map(|dn| dn.trim_start_matches("dn: ").to_string())
        .collect()
}

/// The same entries with the same entryUUID and entryCSN in both dumps.
fn assert_same_identities(provider: &str, consumer: &str, context: &str) {
    let (provider, consumer) = (identities(provider), identities(consumer));
    assert_eq!(provider.len(), consumer.len(), "{context}: entry counts");
    let differing: Vec<_> = provider
        .iter()
        .filter(|(dn, identity)| consumer.get(*dn) != Some(identity))
        .take(3)
        .collect();
    assert!(differing.is_empty(), "{context}: differing {differing:?}");
    assert!(
        provider
            .values()
            .all(|(uuid, csn)| !uuid.is_empty() && !csn.is_empty()),
        "{context}: every entry has an entryUUID and an entryCSN"
    );
}

#[test]
fn a_slapd_refresh_and_persist_consumer_follows_lmdir_without_polling() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare(
        "[replication]\nserver_id = 1\nprovider = true\n",
        PERSIST_PEOPLE,
    );
    provider.start();
    let consumer = start_consumer_typed(provider.port, "refreshAndPersist");
    let loaded = assert_converges(&mut provider, &consumer, "initial refresh");
    assert!(loaded.len() as u64 > PERSIST_PEOPLE);
    change_stream(provider.port, &some_people(&loaded));
    let after = assert_converges(&mut provider, &consumer, "persisted changes");
    assert_eq!(after.len(), loaded.len() + 2 - 4, "two added, four deleted");
    // One refresh, then everything came through the persist phase: slapd never reconnected.
    let log = consumer.log();
    assert_eq!(
        log.matches("REFRESH_PRESENT").count(),
        1,
        "one refresh phase:\n{log}"
    );
    provider.assert_no_panic("provider");
    let consumer_copy = consumer.slapcat();
    provider.kill_hard();
    assert_same_identities(
        &export(&provider),
        &consumer_copy,
        "slapcat vs lmdir export",
    );
}

#[test]
fn an_lmdir_refresh_and_persist_consumer_follows_lmdir() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare(
        "[replication]\nserver_id = 1\nprovider = true\n",
        PERSIST_PEOPLE,
    );
    provider.start();
    let mut consumer = TestServer::prepare(
        &format!(
            "[replication]\n[[replication.consumer]]\nrid = 1\n\
             provider = \"ldap://127.0.0.1:{}\"\nsearch_base = \"{SUFFIX}\"\n\
             type = \"refreshAndPersist\"\nretry_seconds = 1\nbind_dn = \"{ROOT_DN}\"\n\
             credentials = \"{ROOT_PASSWORD}\"\n",
            provider.port
        ),
        0,
    );
    consumer.start();
    let target = (consumer.port, ROOT_DN);
    let loaded = assert_converges_on(&mut provider, target, "initial refresh", &|| {
        consumer.logs()
    });
    assert!(loaded.len() as u64 > PERSIST_PEOPLE);
    change_stream(provider.port, &some_people(&loaded));
    let after = assert_converges_on(&mut provider, target, "persisted changes", &|| {
        consumer.logs()
    });
    assert_eq!(after.len(), loaded.len() + 2 - 4, "two added, four deleted");
    provider.assert_no_panic("provider");
    consumer.assert_no_panic("consumer");
    provider.kill_hard();
    consumer.kill_hard();
    assert_same_identities(&export(&provider), &export(&consumer), "lmdir exports");
    consumer.assert_check_clean("consumer");
}

/// Issue 22: member adds and deletes on a group naming every person (its member values out of
/// line on both sides) reach a refreshAndPersist lmdir consumer, which applies them by the
/// values that differ and stays `lmdir check` clean.
#[test]
fn an_lmdir_consumer_follows_member_changes_of_a_big_group() {
    if !tools_or_skip() {
        return;
    }
    let mut provider =
        TestServer::prepare("[replication]\nserver_id = 1\nprovider = true\n", 2_000);
    provider.start();
    let everyone = people(provider.port);
    assert!(everyone.len() >= 2_000);
    let members: String = everyone
        .iter()
        .map(|dn| format!("member: {dn}\n"))
        .collect();
    let group = format!("cn=everyone,{SUFFIX}");
    let answer = modify(
        provider.port,
        &format!(
            "dn: {group}\nchangetype: add\nobjectClass: groupOfNames\ncn: everyone\n{members}"
        ),
    );
    assert_eq!(answer.code, 0, "adding the big group");
    let mut consumer = TestServer::prepare(
        &format!(
            "[replication]\n[[replication.consumer]]\nrid = 1\n\
             provider = \"ldap://127.0.0.1:{}\"\nsearch_base = \"{SUFFIX}\"\n\
             type = \"refreshAndPersist\"\nretry_seconds = 1\nbind_dn = \"{ROOT_DN}\"\n\
             credentials = \"{ROOT_PASSWORD}\"\n",
            provider.port
        ),
        0,
    );
    consumer.start();
    let target = (consumer.port, ROOT_DN);
    assert_converges_on(&mut provider, target, "the big group refreshed", &|| {
        consumer.logs()
    });
    for (operation, person) in [
        ("delete", &everyone[0]),
        ("delete", &everyone[1]),
        ("add", &everyone[0]),
    ] {
        let answer = modify(
            provider.port,
            &format!("dn: {group}\nchangetype: modify\n{operation}: member\nmember: {person}\n"),
        );
        assert_eq!(answer.code, 0, "{operation} {person}");
    }
    let after = assert_converges_on(&mut provider, target, "member changes persisted", &|| {
        consumer.logs()
    });
    // Dump keys are the `dn:` lines, lowercased.
    let group_lines = after
        .get(&format!("dn: {group}").to_ascii_lowercase())
        .map(|lines| {
            lines
                .iter()
                .filter(|line| line.starts_with("member:"))
                .count()
        });
    assert_eq!(group_lines, Some(everyone.len() - 1));
    provider.assert_no_panic("provider");
    consumer.assert_no_panic("consumer");
    provider.kill_hard();
    consumer.kill_hard();
    consumer.assert_check_clean("consumer");
}

/// Hand-built PDUs and reading for a raw persist client.
mod raw {
    use super::support::ber::{first_message, integer, message, simple_bind, tlv};
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    pub const SEARCH_RESULT_ENTRY: u8 = 0x64;
    pub const SEARCH_RESULT_DONE: u8 = 0x65;
    pub const INTERMEDIATE_RESPONSE: u8 = 0x79;
    pub const BIND_RESPONSE: u8 = 0x61;
    /// Longest wait for one expected message: a hang guard only.
    const MESSAGE_WAIT_MAX: Duration = Duration::from_secs(60);

    /// A bound connection as `dn`.
    pub fn connect(port: u16, dn: &str, password: &str) -> Client {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
        stream
            .write_all(&simple_bind(1, dn, password))
            .expect("sending the bind");
        let mut client = Client {
            stream,
            buffer: Vec::new(),
        };
        let (tag, _) = client.next_message().expect("a bind response");
        assert_eq!(tag, BIND_RESPONSE);
        client
    }

    /// A subtree search of `base` for every entry with a refreshAndPersist Sync Request.
    pub fn persist_search(message_id: u32, base: &str) -> Vec<u8> {
        let mut search = tlv(0x04, base.as_bytes());
        search.extend(tlv(0x0a, &[2]));
        search.extend(tlv(0x0a, &[0]));
        search.extend(integer(0));
        search.extend(integer(0));
        search.extend(tlv(0x01, &[0]));
        search.extend(tlv(0x87, b"objectClass"));
        search.extend(tlv(0x30, &[]));
        let mut control = tlv(0x04, b"1.3.6.1.4.1.4203.1.9.1.1");
        control.extend(tlv(0x04, &tlv(0x30, &tlv(0x0a, &[3]))));
        let mut operation = tlv(0x63, &search);
        operation.extend(tlv(0xa0, &tlv(0x30, &control)));
        message(message_id, &operation)
    }

    pub struct Client {
        pub stream: TcpStream,
        buffer: Vec<u8>,
    }

    impl Client {
        pub fn send(&mut self, bytes: &[u8]) {
            self.stream.write_all(bytes).expect("sending");
        }

        /// The next whole message: its protocol op tag and bytes; None once closed.
        pub fn next_message(&mut self) -> Option<(u8, Vec<u8>)> {
            let deadline = Instant::now() + MESSAGE_WAIT_MAX;
            loop {
                if let Some((tag, length)) = first_message(&self.buffer) {
                    let bytes: Vec<u8> = self.buffer.drain(..length).collect();
                    return Some((tag, bytes));
                }
                let now = Instant::now();
                assert!(now < deadline, "no message within the hang guard");
                self.stream
                    .set_read_timeout(Some(deadline - now))
                    .expect("read timeout");
                let mut chunk = [0u8; 65536];
                match self.stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return None,
                    Ok(count) => self.buffer.extend_from_slice(&chunk[..count]),
                }
            }
        }

        /// Reads until a message with `tag` (None if the connection closed first).
        pub fn until(&mut self, tag: u8) -> Option<Vec<u8>> {
            loop {
                let (found, bytes) = self.next_message()?;
                if found == tag {
                    return Some(bytes);
                }
            }
        }
    }

    /// The result code of a SearchResultDone message.
    pub fn result_code(done: &[u8]) -> u32 {
        let position = done
            .iter()
            .position(|byte| *byte == SEARCH_RESULT_DONE)
            .expect("a SearchResultDone");
        // [APPLICATION 5] length (short or 0x81/0x82 long form), then ENUMERATED.
        let mut at = position + 1;
        at += if done[at] & 0x80 != 0 {
            1 + (done[at] & 0x7f) as usize
        } else {
            1
        };
        assert_eq!(done[at], 0x0a, "resultCode");
        let length = done[at + 1] as usize;
        done[at + 2..at + 2 + length]
            .iter()
            .fold(0, |total, byte| (total << 8) | u32::from(*byte))
    }
}

/// Whether process `pid` has exited (gone, or a zombie waiting to be reaped).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn persist_searches_are_counted_and_end_on_abandon_and_on_shutdown() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare(
        "[replication]\nserver_id = 1\nprovider = true\npersist_searches_max = 1\n",
        20,
    );
    provider.start();
    let port = provider.port;
    let mut first = raw::connect(port, ROOT_DN, ROOT_PASSWORD);
    first.send(&raw::persist_search(2, SUFFIX));
    first
        .until(raw::INTERMEDIATE_RESPONSE)
        .expect("the refresh ends with a Sync Info");
    // A change reaches the running persist search.
    let person = values(port, SUFFIX, "sub", "entryDN")
        .into_iter()
        .find(|dn| dn.starts_with("uid="))
        .expect("a person");
    let answer = modify(
        port,
        &format!("dn: {person}\nchangetype: modify\nreplace: description\ndescription: seen\n"),
    );
    assert_eq!(answer.code, 0);
    let (tag, entry) = first.next_message().expect("the change");
    assert_eq!(tag, raw::SEARCH_RESULT_ENTRY);
    assert!(String::from_utf8_lossy(&entry).contains("seen"));
    // persist_searches_max = 1: a second one is busy while the first runs.
    let mut second = raw::connect(port, ROOT_DN, ROOT_PASSWORD);
    second.send(&raw::persist_search(2, SUFFIX));
    let done = second.until(raw::SEARCH_RESULT_DONE).expect("an answer");
    assert_eq!(
        raw::result_code(&done),
        51,
        "busy beyond persist_searches_max"
    );
    // Abandon ends the first and gives its place back.
    first.send(&super_abandon(3, 2));
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    let mut message_id = 3;
    loop {
        second.send(&raw::persist_search(message_id, SUFFIX));
        let (tag, bytes) = second.next_message().expect("an answer");
        if tag != raw::SEARCH_RESULT_DONE {
            break;
        }
        assert_eq!(raw::result_code(&bytes), 51);
        assert!(
            Instant::now() < deadline,
            "the abandoned search kept its place"
        );
        message_id += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    second
        .until(raw::INTERMEDIATE_RESPONSE)
        .expect("the second refresh ends with a Sync Info");
    // Shutdown ends the running persist search and the server stops.
    let pid = provider.pid();
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    while second.next_message().is_some() {}
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    while !exited(pid) {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    provider.assert_no_panic("provider");
}

/// AbandonRequest.
fn super_abandon(message_id: u32, target: u32) -> Vec<u8> {
    support::ber::abandon(message_id, target)
}

#[test]
fn a_consumer_that_stops_reading_is_ended_and_others_are_served() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare(
        "write_timeout_seconds = 1\n[replication]\nserver_id = 1\nprovider = true\n",
        20,
    );
    provider.start();
    let port = provider.port;
    let mut stalled = raw::connect(port, ROOT_DN, ROOT_PASSWORD);
    stalled.send(&raw::persist_search(2, SUFFIX));
    stalled
        .until(raw::INTERMEDIATE_RESPONSE)
        .expect("the refresh ends with a Sync Info");
    // It reads nothing more. 32 MiB of changes: far past what the socket buffers and the
    // connection's queue hold.
    let person = values(port, SUFFIX, "sub", "entryDN")
        .into_iter()
        .find(|dn| dn.starts_with("uid="))
        .expect("a person");
    let big = "x".repeat(64 * 1024);
    let changes: String = (0..512)
        .map(|index| {
            format!("dn: {person}\nchangetype: modify\nreplace: description\ndescription: {index}{big}\n\n")
        })
        .collect();
    let answer = modify(port, &changes);
    assert_eq!(answer.code, 0, "the writes are served");
    // Others are served meanwhile.
    assert_eq!(values(port, &person, "base", "entryDN").len(), 1);
    // The stalled connection is closed (write_timeout_seconds) without anyone reading from
    // it: only the connection counting is left.
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    loop {
        let current = values(
            port,
            "cn=Current,cn=Connections,cn=Monitor",
            "base",
            "monitorCounter",
        );
        if current == ["1"] {
            break;
        }
        assert!(Instant::now() < deadline, "still open: {current:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // What it was sent ends with the close or with e-syncRefreshRequired, never more.
    let mut ended_with = None;
    while let Some((tag, bytes)) = stalled.next_message() {
        if tag == raw::SEARCH_RESULT_DONE {
            ended_with = Some(raw::result_code(&bytes));
            break;
        }
    }
    assert!(
        matches!(ended_with, None | Some(4096)),
        "ended with {ended_with:?}"
    );
    provider.assert_running("after the stalled consumer");
    provider.assert_no_panic("provider");
}

#[test]
fn a_subtree_moved_into_and_out_of_a_persist_search_scope_is_sent_entry_by_entry() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare("[replication]\nserver_id = 1\nprovider = true\n", 5);
    provider.start();
    let port = provider.port;
    let people = format!("ou=People,{SUFFIX}");
    let mut client = raw::connect(port, ROOT_DN, ROOT_PASSWORD);
    client.send(&raw::persist_search(2, &people));
    client
        .until(raw::INTERMEDIATE_RESPONSE)
        .expect("the refresh ends with a Sync Info");
    let change = |ldif: String| assert_eq!(modify(port, &ldif).code, 0, "{ldif}");
    // Built outside the search's scope: nothing is sent for it.
    change(format!(
        "dn: ou=team,{SUFFIX}\nchangetype: add\nobjectClass: organizationalUnit\nou: team\n\n\
         dn: uid=t1,ou=team,{SUFFIX}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: t1\n\
         cn: T1\nsn: T1\n"
    ));
    change(format!(
        "dn: ou=team,{SUFFIX}\nchangetype: modrdn\nnewrdn: ou=team\ndeleteoldrdn: 0\n\
         newsuperior: {people}\n"
    ));
    let mut received = String::new();
    for _ in 0..2 {
        let (tag, bytes) = client.next_message().expect("a moved entry");
        assert_eq!(tag, raw::SEARCH_RESULT_ENTRY);
        received += &String::from_utf8_lossy(&bytes);
    }
    assert!(
        received.contains(&format!("ou=team,{people}")),
        "{received}"
    );
    assert!(
        received.contains(&format!("uid=t1,ou=team,{people}")),
        "{received}"
    );
    // Moved out again: both leave the scope as deletes naming their last DN in it.
    change(format!(
        "dn: ou=team,{people}\nchangetype: modrdn\nnewrdn: ou=team\ndeleteoldrdn: 0\n\
         newsuperior: {SUFFIX}\n"
    ));
    let mut received = String::new();
    for _ in 0..2 {
        let (tag, bytes) = client.next_message().expect("a moved-out entry");
        assert_eq!(tag, raw::SEARCH_RESULT_ENTRY);
        assert!(
            !String::from_utf8_lossy(&bytes).contains("inetOrgPerson"),
            "no attributes"
        );
        received += &String::from_utf8_lossy(&bytes);
    }
    assert!(
        received.contains(&format!("uid=t1,ou=team,{people}")),
        "{received}"
    );
    provider.assert_no_panic("provider");
}

#[test]
fn cancel_ends_a_persist_search_with_canceled() {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare("[replication]\nserver_id = 1\nprovider = true\n", 5);
    provider.start();
    let mut client = raw::connect(provider.port, ROOT_DN, ROOT_PASSWORD);
    client.send(&raw::persist_search(2, SUFFIX));
    client
        .until(raw::INTERMEDIATE_RESPONSE)
        .expect("the refresh ends with a Sync Info");
    // RFC 3909 Cancel of message 2.
    use support::ber::{integer, message, tlv};
    let mut request = tlv(0x80, b"1.3.6.1.1.8");
    request.extend(tlv(0x81, &tlv(0x30, &integer(2))));
    client.send(&message(3, &tlv(0x77, &request)));
    let done = client
        .until(raw::SEARCH_RESULT_DONE)
        .expect("the search ends");
    assert_eq!(raw::result_code(&done), 118, "canceled");
    let (tag, response) = client.next_message().expect("the Cancel's answer");
    assert_eq!(tag, 0x78);
    assert!(
        response.windows(3).any(|w| w == [0x0a, 0x01, 0x00]),
        "success"
    );
    provider.assert_no_panic("provider");
}

/// A group larger than the 4 MiB a client may send (here: larger than the replica's own client
/// limit, set to 1 MiB) still replicates: what a provider sends is bounded by the consumer's
/// `pdu_bytes_max` (256 MiB by default), not by the server's client limit. Before, the consumer
/// refused the entry and retried forever.
#[test]
fn a_group_larger_than_the_client_request_limit_replicates() {
    if !tools_or_skip() {
        return;
    }
    const MEMBERS: usize = 30_000;
    // Clients may send this many values of one attribute here (the default is 10,000).
    let mut provider = TestServer::prepare(
        "values_per_attribute_per_request_max = 100000\n\
         [replication]\nserver_id = 1\nprovider = true\n",
        10,
    );
    provider.start();
    let port = provider.port;
    let mut group =
        format!("dn: cn=huge,{SUFFIX}\nchangetype: add\nobjectClass: groupOfNames\ncn: huge\n");
    for member in 0..MEMBERS {
        group.push_str(&format!("member: uid=m{member:06},ou=People,{SUFFIX}\n"));
    }
    assert!(
        group.len() > 1 << 20,
        "the group is larger than the replica's client limit"
    );
    let answer = modify(port, &group);
    assert_eq!(
        answer.code, 0,
        "adding the {MEMBERS}-member group: {answer:?}"
    );
    let mut replica = TestServer::prepare(
        &format!(
            "pdu_bytes_max = 1048576\n[replication]\n[[replication.consumer]]\nrid = 3\n\
             provider = \"ldap://127.0.0.1:{port}\"\nsearch_base = \"{SUFFIX}\"\n\
             type = \"refreshAndPersist\"\nretry_seconds = 1\n\
             bind_dn = \"{ROOT_DN}\"\ncredentials = \"{ROOT_PASSWORD}\"\n"
        ),
        0,
    );
    replica.start();
    assert_replica_converges(&mut provider, &mut replica, "a 30,000-member group");
    let more = format!(
        "dn: cn=huge,{SUFFIX}\nchangetype: modify\nadd: member\nmember: uid=extra,ou=People,{SUFFIX}\n"
    );
    assert_eq!(modify(port, &more).code, 0, "one more member");
    assert_replica_converges(&mut provider, &mut replica, "a member added to the group");
    replica.assert_no_panic("replica");
    replica.assert_check_clean("replica");
}

/// The result line `ldapsearch -E sync=ro -a <deref>` prints against the server at `port`.
fn sync_search_result(port: u16, deref: &str, base: &str) -> String {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-b", base, "-s", "base"])
        .args(["-a", deref, "-E", "sync=ro", "1.1"])
        .output()
        .expect("running ldapsearch");
    let status = output.status.code().unwrap_or(-1);
    let text = String::from_utf8_lossy(&output.stderr);
    let message = text
        .lines()
        .find(|line| line.starts_with("Additional information"))
        .unwrap_or_default()
        .to_string();
    format!("exit {status} {message}")
}

/// A sync search dereferencing aliases in searching (`search`, `always`) is answered as slapd's
/// syncprov answers it, protocolError (2) "illegal value for derefAliases", even below a base
/// that does not exist; `never` and `find` are served by both.
#[test]
fn a_sync_search_dereferencing_aliases_is_answered_as_slapd_answers() {
    if !tools_or_skip() {
        return;
    }
    let mut lmdir = provider_with_log(0, 3);
    let slapd = slapd_sync::Slapd::start(free_port(), |root| {
        slapd_sync::config_head(root, &["syncprov"])
            + &format!(
                "database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"{ROOT_DN}\"\nrootpw {ROOT_PASSWORD}\n\
                 directory {}\nmaxsize 104857600\noverlay syncprov\n",
                root.join("db").display()
            )
    });
    let suffix = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: x\n"
    );
    let added = Command::new("ldapadd")
        .args(["-x", "-H"])
        .arg(format!("ldap://127.0.0.1:{}", slapd.port))
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(suffix.as_bytes())?;
            child.wait()
        })
        .expect("running ldapadd");
    assert!(added.success(), "the suffix added to slapd");
    let missing = format!("ou=gone,{SUFFIX}");
    for (deref, base) in [
        ("never", SUFFIX),
        ("find", SUFFIX),
        ("search", SUFFIX),
        ("always", SUFFIX),
        ("always", missing.as_str()),
    ] {
        let theirs = sync_search_result(slapd.port, deref, base);
        let ours = sync_search_result(lmdir.port, deref, base);
        assert_eq!(ours, theirs, "-a {deref} -b {base}");
        if deref == "search" {
            assert!(
                theirs.contains("illegal value for derefAliases"),
                "{theirs}"
            );
        }
    }
    lmdir.stop();
}

/// `values` of one entry.
fn entry_values(port: u16, dn: &str, attribute: &str) -> Vec<String> {
    let mut found: Vec<String> = values(port, dn, "base", attribute)
        .into_iter()
        .map(|value| value.to_ascii_lowercase())
        .collect();
    found.sort_unstable();
    found
}

/// Polls (hang guard only) until `ready` holds.
fn wait_until(context: &str, server: &mut TestServer, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    while !ready() {
        server.assert_running(context);
        assert!(Instant::now() < deadline, "{context}: {}", server.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A consumer that keeps memberOf itself sets it from its own groups, on a replicated add and
/// on a replicated modify alike, whatever memberOf the provider sends: here a provider without
/// upkeep whose loaded data says `uid=a` is in a group that does not exist and in one that does
/// not list it, and says nothing of the group listing `uid=b`. (Before, the consumer took the
/// provider's text: between lmdir nodes, a memberOf sent before the sender applied a group
/// change stayed wrong on the receiver for good.)
#[test]
fn an_lmdir_consumer_keeping_memberof_takes_it_from_its_own_groups() {
    consumer_keeping_memberof(false);
}

/// As above, the first refresh through the bulk loader: the provider's memberOf left out, every
/// group the refresh brings counted whatever its place in it (here `uid=b` comes after the
/// group listing it, which single-entry adds in that order would not count).
#[test]
fn an_lmdir_consumer_bulk_loading_its_refresh_takes_memberof_from_its_own_groups() {
    consumer_keeping_memberof(true);
}

fn consumer_keeping_memberof(bulk_initial_refresh: bool) {
    if !tools_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare_with(
        &Settings {
            server: "[replication]\nserver_id = 1\nprovider = true\n",
            database: "memberof = false\n",
            ..Settings::default()
        },
        0,
    );
    let (real, ghost) = (format!("cn=real,{SUFFIX}"), format!("cn=ghost,{SUFFIX}"));
    let (a, b) = (format!("uid=a,{SUFFIX}"), format!("uid=b,{SUFFIX}"));
    let person =
        |uid: &str| format!("objectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n");
    let ldif = format!(
        "dn: {SUFFIX}\nobjectClass: domain\ndc: example\n\n\
         dn: {real}\nobjectClass: groupOfNames\ncn: real\nmember: {b}\n\n\
         dn: {a}\n{}memberOf: {ghost}\nmemberOf: {real}\n\n\
         dn: {b}\n{}\n",
        person("a"),
        person("b")
    );
    let path = provider.directory.path().join("stale.ldif");
    std::fs::write(&path, ldif).unwrap();
    let loaded = provider.run_command(&["load".as_ref(), path.as_os_str()]);
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    provider.start();
    assert_eq!(entry_values(provider.port, &a, "memberOf").len(), 2);
    let mut consumer = TestServer::prepare(
        &format!(
            "[replication]\n[[replication.consumer]]\nrid = 1\n\
             provider = \"ldap://127.0.0.1:{}\"\nsearch_base = \"{SUFFIX}\"\n\
             type = \"refreshAndPersist\"\nretry_seconds = 1\nbind_dn = \"{ROOT_DN}\"\n\
             credentials = \"{ROOT_PASSWORD}\"\nbulk_initial_refresh = {bulk_initial_refresh}\n",
            provider.port
        ),
        0,
    );
    consumer.start();
    let port = consumer.port;
    wait_until("the refresh", &mut consumer, || {
        !entry_values(port, &a, "uid").is_empty() && !entry_values(port, &b, "uid").is_empty()
    });
    assert_eq!(entry_values(port, &a, "memberOf"), Vec::<String>::new());
    assert_eq!(entry_values(port, &b, "memberOf"), vec![real.clone()]);
    // Replicated modifies: the provider's memberOf sent again, still wrong both ways.
    for dn in [&a, &b] {
        let answer = modify(
            provider.port,
            &format!("dn: {dn}\nchangetype: modify\nreplace: description\ndescription: later\n"),
        );
        assert_eq!(answer.code, 0, "modify {dn}");
    }
    wait_until("the modifies", &mut consumer, || {
        [&a, &b]
            .iter()
            .all(|dn| entry_values(port, dn, "description") == ["later"])
    });
    assert_eq!(entry_values(port, &a, "memberOf"), Vec::<String>::new());
    assert_eq!(entry_values(port, &b, "memberOf"), vec![real.clone()]);
    // The consumer's own upkeep still follows its groups.
    let answer = modify(
        provider.port,
        &format!("dn: {real}\nchangetype: modify\nadd: member\nmember: {a}\n"),
    );
    assert_eq!(answer.code, 0);
    wait_until("the group change", &mut consumer, || {
        entry_values(port, &a, "memberOf") == [real.clone()]
    });
    provider.assert_no_panic("provider");
    consumer.assert_no_panic("consumer");
    consumer.assert_check_clean("consumer");
}
