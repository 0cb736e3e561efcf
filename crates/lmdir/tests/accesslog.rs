//! Issue 23 item 5: the audit trail under `cn=accesslog`. The same add, modify, modrdn and
//! delete sent to slapd 2.5 with its accesslog overlay (`logops writes`, `logsuccess TRUE`,
//! `logold (objectClass=*)`)
//! and to lmdir with `[accesslog] enabled = true, log_old = true` give the same records, once the values
//! that differ by nature (times, session numbers, entryUUIDs, CSNs) are masked; the log is
//! the rootdn's, and it is bounded by count and by age.

use crate::conformance;
use crate::support;

use conformance::{modify, Extra, Pair, Setup, SUFFIX};
use std::process::Command;
use std::time::Duration;
use support::{TestServer, ROOT_DN, ROOT_PASSWORD};

const BASE_LDIF: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
     dc: example\no: Example\n\ndn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\n\
     ou: People\n\ndn: ou=Former,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Former\n";

/// The writes, in order (each its own ldapmodify): every kind the log records, and one that
/// fails (neither server logs a failure with `logsuccess TRUE`).
const WRITES: &[&str] = &[
    "dn: uid=ada,ou=People,dc=example,dc=com\nchangetype: add\nobjectClass: inetOrgPerson\n\
     uid: ada\ncn: Ada Lovelace\nsn: Lovelace\nmail: ada@example.com\n",
    "dn: uid=ada,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: description\n\
     description: first programmer\n-\nadd: mail\nmail: countess@example.com\n-\n\
     delete: mail\nmail: ada@example.com\n",
    "dn: uid=ada,ou=People,dc=example,dc=com\nchangetype: modrdn\nnewrdn: uid=lovelace\n\
     deleteoldrdn: 1\nnewsuperior: ou=Former,dc=example,dc=com\n",
    "dn: uid=ada,ou=People,dc=example,dc=com\nchangetype: delete\n",
    "dn: uid=lovelace,ou=Former,dc=example,dc=com\nchangetype: delete\n",
];

/// `ldapsearch` of the log's records as `dn` binds (`-LLL`, unwrapped), with entryCSN.
fn log_records(port: u16, bind: Option<(&str, &str)>) -> (i32, String) {
    let mut command = Command::new("ldapsearch");
    command
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"));
    if let Some((dn, password)) = bind {
        command.args(["-D", dn, "-w", password]);
    }
    let output = command
        .args(["-b", "cn=accesslog", "(reqType=*)", "*", "entryCSN"])
        .output()
        .expect("running ldapsearch");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Values that differ between two servers by nature, masked: times, session numbers,
/// entryUUIDs, CSNs, stamped timestamps. What stays: record count and order, object classes,
/// reqType, reqAuthzID, reqDN, reqResult, every reqMod line's attribute and operation (and
/// the request's own values), reqNewRDN, reqDeleteOldRDN, reqNewSuperior, reqNewDN, and which
/// records carry reqEntryUUID and entryCSN.
fn masked(text: &str) -> Vec<String> {
    const MASKED_VALUES: &[&str] = &[
        "reqStart: ",
        "reqEnd: ",
        "reqSession: ",
        "reqEntryUUID: ",
        "entryCSN: ",
        "reqMod: entryUUID:+ ",
        "reqMod: entryCSN:+ ",
        "reqMod: entryCSN:= ",
        "reqMod: createTimestamp:+ ",
        "reqMod: modifyTimestamp:+ ",
        "reqMod: modifyTimestamp:= ",
        "reqOld: entryUUID: ",
        "reqOld: entryCSN: ",
        "reqOld: createTimestamp: ",
        "reqOld: modifyTimestamp: ",
    ];
    text.split("\n\n")
        .filter(|record| !record.trim().is_empty())
        .map(|record| {
            let mut lines: Vec<String> = record
                .lines()
                .filter(|line| !line.starts_with("dn: "))
                .map(
                    |line| match MASKED_VALUES.iter().find(|head| line.starts_with(*head)) {
                        Some(head) => format!("{head}…"),
                        None => line.to_string(),
                    },
                )
                .collect();
            // reqOld lists the entry's values in each server's stored order: a set.
            if let Some(start) = lines.iter().position(|line| line.starts_with("reqOld: ")) {
                let count = lines[start..]
                    .iter()
                    .take_while(|line| line.starts_with("reqOld: "))
                    .count();
                lines[start..start + count].sort();
            }
            lines.join("\n")
        })
        .collect()
}

#[test]
fn the_accesslog_of_add_modify_modrdn_and_delete_matches_slapds() {
    if let Err(missing) = conformance::tools_available() {
        assert!(std::env::var_os("CI").is_none(), "{missing}");
        eprintln!("skipping: {missing}");
        return;
    }
    let log_directory = tempfile::tempdir().unwrap();
    // The log's own database comes after the main one (slapadd fills the first).
    let slapd_database = format!(
        "overlay accesslog\nlogdb \"cn=accesslog\"\nlogops writes\nlogsuccess TRUE\n\
         logold (objectClass=*)\n\
         database mdb\nsuffix \"cn=accesslog\"\nrootdn \"{ROOT_DN}\"\n\
         directory {}\nmaxsize 104857600\n",
        log_directory.path().display()
    );
    let pair = Pair::start_configured(
        BASE_LDIF,
        Setup::Plain,
        &Extra {
            slapd_global: "moduleload accesslog\n",
            slapd_database: &slapd_database,
            lmdir_server: "",
            lmdir_database: "[accesslog]\nenabled = true\nlog_old = true\n",
        },
    );
    for write in WRITES {
        let answers: Vec<_> = pair
            .ports()
            .iter()
            .map(|(_, port)| modify(*port, write).code)
            .collect();
        assert_eq!(answers[0], answers[1], "{write}");
    }
    let (code, openldap) = log_records(pair.openldap_port, Some((ROOT_DN, ROOT_PASSWORD)));
    assert_eq!(code, 0, "{openldap}");
    let (code, lmdir) = log_records(pair.lmdir_port, Some((ROOT_DN, ROOT_PASSWORD)));
    assert_eq!(code, 0, "{lmdir}\n{}", pair.lmdir_log());
    let (openldap, lmdir) = (masked(&openldap), masked(&lmdir));
    assert_eq!(lmdir.len(), 4, "{lmdir:#?}");
    assert_eq!(openldap, lmdir);
    for (record, kind) in lmdir.iter().zip(["add", "modify", "modrdn", "delete"]) {
        assert!(record.contains(&format!("reqType: {kind}")), "{record}");
        assert!(record.contains("entryCSN: …"), "{record}");
    }
    assert!(
        lmdir[1].contains("reqOld: mail: ada@example.com"),
        "{}",
        lmdir[1]
    );
    assert!(
        lmdir[3].contains("reqOld: cn: Ada Lovelace"),
        "{}",
        lmdir[3]
    );
    // The log is the rootdn's: anonymous finds no such tree on lmdir.
    let (code, text) = log_records(pair.lmdir_port, None);
    assert_eq!((code, text.as_str()), (32, ""));
    let _ = SUFFIX;
}

fn add_person(port: u16, uid: &str) {
    let text = format!(
        "dn: uid={uid},ou=people,dc=example,dc=com\nchangetype: add\nobjectClass: inetOrgPerson\n\
         uid: {uid}\ncn: {uid}\nsn: {uid}\n"
    );
    assert_eq!(modify(port, &text).code, 0, "{text}");
}

fn logged_uids(port: u16) -> Vec<String> {
    let (code, text) = log_records(port, Some((ROOT_DN, ROOT_PASSWORD)));
    assert_eq!(code, 0, "{text}");
    text.lines()
        .filter_map(|line| line.strip_prefix("reqDN: uid="))
        .map(|rest| rest.split(',').next().unwrap_or_default().to_string())
        .collect()
}

/// `max_entries` keeps the newest records; `max_age_seconds` drops older ones as writes come.
#[test]
fn the_accesslog_is_bounded_by_count_and_by_age() {
    let mut server = TestServer::prepare_with(
        &support::Settings {
            database: "[accesslog]\nenabled = true\nmax_entries = 2\nmax_age_seconds = 2\n",
            ..support::Settings::default()
        },
        1,
    );
    server.start();
    for uid in ["a1", "a2", "a3"] {
        add_person(server.port, uid);
    }
    assert_eq!(logged_uids(server.port), ["a2", "a3"]);
    std::thread::sleep(Duration::from_millis(2_500));
    add_person(server.port, "a4");
    assert_eq!(logged_uids(server.port), ["a4"]);
}

/// `ldapsearch` of every record's reqMod and reqOld, bound as `dn` (`-LLL`, unwrapped).
fn logged_changes(port: u16, dn: &str, password: &str) -> String {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(["-D", dn, "-w", password])
        .args(["-b", "cn=accesslog", "(objectClass=*)", "reqMod", "reqOld"])
        .output()
        .expect("running ldapsearch");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{text}");
    text
}

/// lmdir's own secrets (lmdirBearerToken) are never recorded by value, hashed or not: an
/// auditor an `[[access]]` rule lets read cn=accesslog would otherwise read every token (a
/// cleartext value is a working HTTP bearer token). The log still says a token was added,
/// replaced or held (a value-less `lmdirBearerToken:+` / `:=` line), and keeps the other
/// values (userPassword's too, as slapd's accesslog does).
#[test]
fn the_accesslog_never_records_bearer_token_values() {
    let auditor = format!("cn=auditor,{SUFFIX}");
    let rules = format!(
        "[accesslog]\nenabled = true\nlog_old = true\n\n\
         [[access]]\nto = {{ subtree = \"cn=accesslog\" }}\n\
         by = [ {{ who = \"dn={auditor}\", access = \"read\" }} ]\n\n\
         [[access]]\nto = {{}}\nby = [ {{ who = \"*\", access = \"read\" }} ]\n"
    );
    let mut server = TestServer::prepare_with(
        &support::Settings {
            database: &rules,
            ..support::Settings::default()
        },
        1,
    );
    server.start();
    let hashed = format!("{{SHA256}}{}", "A".repeat(43));
    let holder = format!("uid=x,ou=people,{SUFFIX}");
    let writes = [
        format!(
            "dn: {auditor}\nchangetype: add\nobjectClass: person\ncn: auditor\nsn: auditor\n\
             userPassword: audit-pw\n"
        ),
        format!(
            "dn: {holder}\nchangetype: add\nobjectClass: inetOrgPerson\n\
             objectClass: lmdirTokenHolder\nuid: x\ncn: x\nsn: x\ndescription: d0\n\
             lmdirBearerToken: {hashed}\n"
        ),
        format!(
            "dn: {holder}\nchangetype: modify\nreplace: lmdirBearerToken\n\
             lmdirBearerToken: cleartext-secret\n-\nadd: description\ndescription: d1\n"
        ),
        format!("dn: {holder}\nchangetype: delete\n"),
    ];
    for write in &writes {
        assert_eq!(modify(server.port, write).code, 0, "{write}");
    }
    let text = logged_changes(server.port, &auditor, "audit-pw");
    for secret in ["AAAA", "cleartext-secret"] {
        assert!(!text.contains(secret), "{secret} logged:\n{text}");
    }
    for line in [
        "reqMod: lmdirBearerToken:+\n",
        "reqMod: lmdirBearerToken:=\n",
        "reqMod: description:+ d0\n",
        "reqMod: description:+ d1\n",
        "reqOld: description: d0\n",
        // Hashed or not as `password_hash_cleartext` says, but recorded.
        "reqMod: userPassword:+ ",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    assert_eq!(
        text.matches("reqMod: lmdirBearerToken:").count(),
        2,
        "one value-less line per add and per modification:\n{text}"
    );
}

/// `ldapsearch` of the log as the rootdn with `extra` arguments: (exit code, record DNs).
fn log_search(port: u16, extra: &[&str]) -> (i32, Vec<String>) {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD])
        .args(extra)
        .args(["-b", "cn=accesslog", "(reqType=*)", "reqDN"])
        .output()
        .expect("running ldapsearch");
    let text = String::from_utf8_lossy(&output.stdout);
    let dns = text
        .lines()
        .filter_map(|line| line.strip_prefix("dn: "))
        .map(str::to_string)
        .collect();
    (output.status.code().unwrap_or(-1), dns)
}

/// E1: a search of the log honours the size limit (sizeLimitExceeded with exactly that many
/// records, as slapd's back-mdb answers it) and pages (every record once, in order).
#[test]
fn a_log_search_honours_the_size_limit_and_pages() {
    let mut server = TestServer::prepare_with(
        &support::Settings {
            database: "[accesslog]\nenabled = true\n",
            ..support::Settings::default()
        },
        1,
    );
    server.start();
    for uid in ["s1", "s2", "s3", "s4", "s5"] {
        add_person(server.port, uid);
    }
    let (code, all) = log_search(server.port, &[]);
    assert_eq!((code, all.len()), (0, 5), "{all:?}");
    let (code, limited) = log_search(server.port, &["-z", "2"]);
    assert_eq!((code, limited.as_slice()), (4, &all[..2]));
    let (code, paged) = log_search(server.port, &["-E", "pr=2/noprompt"]);
    assert_eq!((code, paged), (0, all.clone()));
    // A page and a total size limit together: the limit counts over the pages.
    let (code, paged_limited) = log_search(server.port, &["-z", "3", "-E", "pr=2/noprompt"]);
    assert_eq!((code, paged_limited.as_slice()), (4, &all[..3]));
}

/// The log is not sorted: a critical sort or virtual list view answers
/// unavailableCriticalExtension (12), as slapd answers on a database without sssvlv, a
/// non-critical sort returns the records in log order; the assertion control is tested on the
/// base (assertionFailed, 122, and nothing sent when it does not hold); the Subentries control
/// asking for subentries only returns none (the log holds none). Each of these was ignored.
#[test]
fn a_log_search_answers_the_sort_assertion_and_subentries_controls() {
    let mut server = TestServer::prepare_with(
        &support::Settings {
            database: "[accesslog]\nenabled = true\n",
            ..support::Settings::default()
        },
        1,
    );
    server.start();
    for uid in ["c1", "c2", "c3"] {
        add_person(server.port, uid);
    }
    let (code, all) = log_search(server.port, &[]);
    assert_eq!((code, all.len()), (0, 3), "{all:?}");
    let (code, sorted) = log_search(server.port, &["-E", "!sss=-reqStart"]);
    assert_eq!((code, sorted.len()), (12, 0), "{sorted:?}");
    let (code, window) = log_search(server.port, &["-E", "!sss=reqStart", "-E", "!vlv=0/1/1/0"]);
    assert_eq!((code, window.len()), (12, 0), "{window:?}");
    let (code, unsorted) = log_search(server.port, &["-E", "sss=-reqStart"]);
    assert_eq!((code, unsorted), (0, all.clone()));
    let (code, failed) = log_search(server.port, &["-e", "assert=(cn=nothere)"]);
    assert_eq!((code, failed.len()), (122, 0), "{failed:?}");
    let (code, held) = log_search(server.port, &["-e", "assert=(cn=accesslog)"]);
    assert_eq!((code, held), (0, all.clone()));
    let (code, subentries) = log_search(server.port, &["-E", "subentries=true"]);
    assert_eq!((code, subentries.len()), (0, 0), "{subentries:?}");
    let (code, ordinary) = log_search(server.port, &["-E", "subentries=false"]);
    assert_eq!((code, ordinary), (0, all));
    // cn=Monitor, whose base is found before any entry goes out, the same way.
    let monitor = |extra: &[&str]| {
        let output = Command::new("ldapsearch")
            .args(["-x", "-LLL", "-H"])
            .arg(format!("ldap://127.0.0.1:{}", server.port))
            .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-b", "cn=Monitor"])
            .args(extra)
            .args(["(objectClass=*)", "1.1"])
            .output()
            .expect("running ldapsearch");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        (
            output.status.code().unwrap_or(-1),
            text.matches("dn: ").count(),
        )
    };
    let (code, entries) = monitor(&[]);
    assert!(code == 0 && entries > 3, "{code} {entries}");
    assert_eq!(monitor(&["-e", "assert=(cn=nothere)"]), (122, 0));
    assert_eq!(monitor(&["-e", "assert=(cn=Monitor)"]), (0, entries));
    assert_eq!(monitor(&["-E", "!sss=cn"]).0, 12);
}

/// A search of a time window reads the log from the window's start second (`search_keys`):
/// the records it returns are still exactly those the filter selects, at the window's edges,
/// for a base that is a record, and with a fraction of a second in the assertion.
#[test]
fn a_log_search_of_a_time_window_returns_exactly_its_records() {
    let mut server = TestServer::prepare_with(
        &support::Settings {
            database: "[accesslog]\nenabled = true\n",
            ..support::Settings::default()
        },
        1,
    );
    server.start();
    for uid in ["w1", "w2", "w3", "w4"] {
        add_person(server.port, uid);
    }
    let (code, all) = log_search(server.port, &[]);
    assert_eq!((code, all.len()), (0, 4), "{all:?}");
    let start_of = |dn: &str| {
        dn.strip_prefix("reqStart=")
            .and_then(|rest| rest.strip_suffix(",cn=accesslog"))
            .expect("a record DN")
            .to_string()
    };
    let window = |filter: String| {
        let output = Command::new("ldapsearch")
            .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
            .arg(format!("ldap://127.0.0.1:{}", server.port))
            .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-b", "cn=accesslog"])
            .arg(filter)
            .arg("1.1")
            .output()
            .expect("running ldapsearch");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.strip_prefix("dn: "))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (second, third) = (start_of(&all[1]), start_of(&all[2]));
    assert_eq!(window(format!("(reqStart>={second})")), all[1..].to_vec());
    assert_eq!(window(format!("(reqStart<={second})")), all[..2].to_vec());
    assert_eq!(
        window(format!("(&(reqStart>={second})(reqStart<={third}))")),
        all[1..3].to_vec()
    );
    assert_eq!(window(format!("(reqStart={third})")), vec![all[2].clone()]);
    // A record as the base, scope base: found from its own second on.
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{}", server.port))
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-s", "base", "-b"])
        .arg(&all[3])
        .args(["(objectClass=*)", "reqDN"])
        .output()
        .expect("running ldapsearch");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(text.contains(&format!("dn: {}", all[3])), "{text}");
    assert!(text.contains("reqDN: uid=w4,"), "{text}");
}
