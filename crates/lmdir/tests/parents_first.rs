//! Outputs list parents before children, so they replay with ldapadd: an LDIF listing children
//! before their parents loaded by `lmdir load`, then searched with ldapsearch (whole, paged)
//! and exported with `lmdir export`, each fed to an empty server with ldapadd; and a subtree
//! moved under a newer parent with ldapmodrdn -s.

use crate::support;

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::{TestServer, ROOT_DN, ROOT_PASSWORD, SUFFIX};

/// Children before parents over three levels, siblings of different parents interleaved.
fn child_first_ldif() -> String {
    let mut ldif = String::new();
    let mut record = |dn: &str, lines: &str| {
        ldif += &format!("dn: {dn}\n{lines}\n");
    };
    let person =
        |uid: &str| format!("objectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n");
    let unit = |ou: &str| format!("objectClass: organizationalUnit\nou: {ou}\n");
    record(&format!("uid=a1,ou=a,ou=people,{SUFFIX}"), &person("a1"));
    record(&format!("uid=b1,ou=b,ou=people,{SUFFIX}"), &person("b1"));
    record(&format!("ou=a,ou=people,{SUFFIX}"), &unit("a"));
    record(&format!("uid=a2,ou=a,ou=people,{SUFFIX}"), &person("a2"));
    record(
        &format!("cn=g1,ou=groups,{SUFFIX}"),
        &format!("objectClass: groupOfNames\ncn: g1\nmember: uid=a1,ou=a,ou=people,{SUFFIX}\n"),
    );
    record(&format!("ou=b,ou=people,{SUFFIX}"), &unit("b"));
    record(&format!("uid=b2,ou=b,ou=people,{SUFFIX}"), &person("b2"));
    record(&format!("ou=people,{SUFFIX}"), &unit("people"));
    record(&format!("ou=groups,{SUFFIX}"), &unit("groups"));
    record(SUFFIX, "objectClass: domain\ndc: example\n");
    record(&format!("uid=a3,ou=a,ou=people,{SUFFIX}"), &person("a3"));
    ldif
}

const CHILD_FIRST_ENTRIES: usize = 11;

fn url(server: &TestServer) -> String {
    format!("ldap://127.0.0.1:{}", server.port)
}

fn run(command: &mut Command, input: Option<&[u8]>) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    if let Some(input) = input {
        stdin.write_all(input).expect("writing to the tool");
    }
    drop(stdin);
    child.wait_with_output().expect("waiting for the tool")
}

fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The whole directory as the rootdn sees it, in the server's order (`extra`: e.g. paging).
fn ldapsearch_all(server: &TestServer, extra: &[&str]) -> String {
    let mut command = Command::new("ldapsearch");
    command
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H", &url(server)])
        .args([
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
            "-b",
            SUFFIX,
            "-s",
            "sub",
        ])
        .args(extra)
        .arg("(objectClass=*)");
    let output = run(&mut command, None);
    assert_success(&output, "ldapsearch");
    String::from_utf8(output.stdout).expect("UTF-8 LDIF")
}

fn dns_in_order(ldif: &str) -> Vec<String> {
    ldif.lines()
        .filter_map(|line| line.strip_prefix("dn: "))
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Every DN once, and after its parent (the DNs here have no escaped commas).
fn assert_parents_first(dns: &[String], what: &str) {
    let places: HashMap<&str, usize> = dns
        .iter()
        .enumerate()
        .map(|(at, dn)| (dn.as_str(), at))
        .collect();
    assert_eq!(
        places.len(),
        dns.len(),
        "{what}: a DN is listed twice: {dns:?}"
    );
    for (at, dn) in dns.iter().enumerate() {
        if dn == SUFFIX {
            continue;
        }
        let parent = dn.split_once(',').map(|(_, parent)| parent).unwrap_or("");
        let parent_at = places
            .get(parent)
            .unwrap_or_else(|| panic!("{what}: the parent of {dn} is not listed: {dns:?}"));
        assert!(
            *parent_at < at,
            "{what}: {dn} comes before its parent: {dns:?}"
        );
    }
}

/// An empty server takes `ldif` with ldapadd (every parent exists when its child arrives)
/// and then holds `expected` entries.
fn assert_replays_with_ldapadd(ldif: &str, expected: usize, what: &str) {
    let mut target = TestServer::prepare("", 0);
    target.start();
    let output = run(
        Command::new("ldapadd").args([
            "-x",
            "-H",
            &url(&target),
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
        ]),
        Some(ldif.as_bytes()),
    );
    assert_success(&output, &format!("ldapadd of {what}"));
    assert_eq!(
        dns_in_order(&ldapsearch_all(&target, &[])).len(),
        expected,
        "{what}: entries after the replay"
    );
    target.assert_no_panic(what);
}

/// `lmdir export` keeps operational attributes (for `lmdir load`); ldapadd may not set them.
fn without_operational_attributes(ldif: &str) -> String {
    const OPERATIONAL: [&str; 7] = [
        "createtimestamp:",
        "modifytimestamp:",
        "creatorsname:",
        "modifiersname:",
        "entryuuid:",
        "entrycsn:",
        "structuralobjectclass:",
    ];
    ldif.lines()
        .filter(|line| {
            let lower = line.to_ascii_lowercase();
            !OPERATIONAL.iter().any(|name| lower.starts_with(name))
                && !lower.starts_with("memberof:")
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

fn load(server: &TestServer, ldif: &str) {
    let path = server.directory.path().join("child-first.ldif");
    std::fs::write(&path, ldif).expect("writing the LDIF");
    let output = server.run_command(&["load".as_ref(), path.as_os_str()]);
    assert_success(&output, "lmdir load");
}

fn export(server: &TestServer) -> String {
    let path = server.directory.path().join("export.ldif");
    let output = server.run_command(&["export".as_ref(), path.as_os_str()]);
    assert_success(&output, "lmdir export");
    std::fs::read_to_string(Path::new(&path)).expect("reading the export")
}

#[test]
fn child_first_load_searches_and_exports_parents_first_and_replays() {
    let mut server = TestServer::prepare("", 0);
    load(&server, &child_first_ldif());
    server.assert_check_clean("after the child-first load");

    let exported = export(&server);
    assert_parents_first(&dns_in_order(&exported), "lmdir export");
    assert_replays_with_ldapadd(
        &without_operational_attributes(&exported),
        CHILD_FIRST_ENTRIES,
        "lmdir export",
    );

    server.start();
    let searched = ldapsearch_all(&server, &[]);
    let dns = dns_in_order(&searched);
    assert_eq!(dns.len(), CHILD_FIRST_ENTRIES);
    assert_parents_first(&dns, "ldapsearch");
    // Paged, the pages end on both sides of the waiting entries; the same sequence comes out.
    for page_size in ["1", "2", "3"] {
        let paged = ldapsearch_all(&server, &["-E", &format!("pr={page_size}/noprompt")]);
        assert_eq!(dns_in_order(&paged), dns, "pages of {page_size}");
    }
    // One level below a unit loaded after its children.
    let mut command = Command::new("ldapsearch");
    command
        .args([
            "-x",
            "-LLL",
            "-H",
            &url(&server),
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
        ])
        .args([
            "-b",
            &format!("ou=people,{SUFFIX}"),
            "-s",
            "one",
            "(objectClass=*)",
            "1.1",
        ]);
    let one_level = run(&mut command, None);
    assert_success(&one_level, "one-level ldapsearch");
    assert_eq!(
        dns_in_order(&String::from_utf8_lossy(&one_level.stdout)).len(),
        2
    );
    // The size limit cuts the parents-first sequence, not the ID order.
    let mut command = Command::new("ldapsearch");
    command
        .args([
            "-x",
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-H",
            &url(&server),
            "-z",
            "4",
        ])
        .args([
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
            "-b",
            SUFFIX,
            "(objectClass=*)",
            "1.1",
        ]);
    let limited = run(&mut command, None);
    assert_eq!(limited.status.code(), Some(4), "sizeLimitExceeded");
    assert_eq!(
        dns_in_order(&String::from_utf8_lossy(&limited.stdout)),
        dns[..4].to_vec()
    );

    assert_replays_with_ldapadd(&searched, CHILD_FIRST_ENTRIES, "ldapsearch output");
    server.assert_no_panic("child-first searches");
}

#[test]
fn subtree_moved_under_a_newer_parent_is_listed_after_it() {
    let mut server = TestServer::prepare("", 0);
    server.start();
    let unit = |ou: &str, parent: &str| {
        format!("dn: ou={ou},{parent}\nobjectClass: organizationalUnit\nou: {ou}\n\n")
    };
    let mut adds = format!("dn: {SUFFIX}\nobjectClass: domain\ndc: example\n\n");
    adds += &unit("old", SUFFIX);
    adds += &unit("inner", &format!("ou=old,{SUFFIX}"));
    adds += &unit("leaf", &format!("ou=inner,ou=old,{SUFFIX}"));
    adds += &unit("new", SUFFIX);
    let output = run(
        Command::new("ldapadd").args([
            "-x",
            "-H",
            &url(&server),
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
        ]),
        Some(adds.as_bytes()),
    );
    assert_success(&output, "ldapadd");
    let output = run(
        Command::new("ldapmodrdn")
            .args([
                "-x",
                "-H",
                &url(&server),
                "-D",
                ROOT_DN,
                "-w",
                ROOT_PASSWORD,
            ])
            .args(["-s", &format!("ou=new,{SUFFIX}")])
            .args([&format!("ou=old,{SUFFIX}"), "ou=old"]),
        None,
    );
    assert_success(&output, "ldapmodrdn -s");
    let searched = ldapsearch_all(&server, &[]);
    let dns = dns_in_order(&searched);
    assert_eq!(dns.len(), 5);
    assert_parents_first(&dns, "after the move");
    for page_size in ["1", "2"] {
        let paged = ldapsearch_all(&server, &["-E", &format!("pr={page_size}/noprompt")]);
        assert_eq!(dns_in_order(&paged), dns, "pages of {page_size}");
    }
    assert_replays_with_ldapadd(
        &without_operational_attributes(&searched),
        5,
        "the moved tree",
    );
    server.kill_hard();
    server.assert_check_clean("after the move");
    let exported = export(&server);
    assert_parents_first(&dns_in_order(&exported), "export after the move");
}
