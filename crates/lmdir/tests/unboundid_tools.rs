//! The UnboundID LDAP SDK's own command-line tools against lmdir, beside slapd 2.5 where slapd
//! has the feature: `ldapmodify --useTransaction` (RFC 5805), `ldapmodify --permissiveModify`
//! and `ldapsearch --virtualListView` with `--sortOrder` (slapd with sssvlv). Issue 21: lmdir
//! answered these 2, 20 and 12.
//!
//! The SDK's jar comes from Maven Central (scripts/test.sh fetches it); `UNBOUNDID_JAR` names
//! another copy.

use crate::conformance;

use conformance::{search, Extra, Pair, Setup, ROOT_DN, ROOT_PASSWORD, SUFFIX};
use std::path::PathBuf;
use std::process::Command;

const UNBOUNDID_VERSION: &str = "7.0.1";

fn unboundid_jar() -> Result<PathBuf, String> {
    let path = match std::env::var_os("UNBOUNDID_JAR") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(std::env::var_os("HOME").ok_or("HOME is not set")?).join(format!(
            ".m2/repository/com/unboundid/unboundid-ldapsdk/{UNBOUNDID_VERSION}/unboundid-ldapsdk-{UNBOUNDID_VERSION}.jar"
        )),
    };
    if !path.exists() {
        return Err(format!(
            "{} is missing (scripts/test.sh fetches it with mvn)",
            path.display()
        ));
    }
    let java = Command::new("java").arg("-version").output();
    if !java.is_ok_and(|output| output.status.success()) {
        return Err("java is not installed (scripts/test.sh installs it)".to_string());
    }
    Ok(path)
}

/// Whether the tools and both servers' programs are here; under CI=true they must be.
fn available() -> Option<PathBuf> {
    let found = conformance::tools_available().and_then(|()| unboundid_jar());
    match found {
        Ok(jar) => Some(jar),
        Err(reason) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI=true and a dependency is missing: {reason}"
            );
            eprintln!("skipping the UnboundID tool tests: {reason}");
            None
        }
    }
}

/// Runs the SDK tool `tool` against `port` as the rootdn: exit code and standard output.
fn unboundid(jar: &PathBuf, tool: &str, port: u16, arguments: &[&str]) -> (i32, String) {
    let output = Command::new("java")
        .arg("-cp")
        .arg(jar)
        .args(["com.unboundid.ldap.sdk.unboundidds.Launcher", tool])
        .args(["--hostname", "127.0.0.1", "--port", &port.to_string()])
        .args(["--bindDN", ROOT_DN, "--bindPassword", ROOT_PASSWORD])
        .args(arguments)
        .output()
        .expect("java");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr),
    )
}

fn dataset() -> String {
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n"
    );
    for index in 0..30 {
        let key = (index * 7) % 30;
        ldif += &format!(
            "dn: uid=p{key:02},ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p{key:02}\n\
             cn: Person {key:02}\nsn: S{:02}\ndescription: d\n\n",
            30 - key
        );
    }
    ldif
}

fn descriptions(port: u16, uid: &str) -> Vec<String> {
    let answer = search(
        port,
        &format!("uid={uid},ou=People,{SUFFIX}"),
        "base",
        "(objectClass=*)",
        &["description"],
        &[],
    );
    answer.entries.into_iter().collect()
}

#[test]
fn ldapmodify_use_transaction_commits_all_or_nothing() {
    let Some(jar) = available() else { return };
    let pair = Pair::start(&dataset());
    let directory = tempfile::tempdir().unwrap();
    let good = directory.path().join("good.ldif");
    std::fs::write(
        &good,
        format!(
            "dn: uid=p01,ou=People,{SUFFIX}\nchangetype: modify\nadd: description\ndescription: t1\n\n\
             dn: uid=new,ou=People,{SUFFIX}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: new\ncn: New\nsn: New\n\n\
             dn: uid=p02,ou=People,{SUFFIX}\nchangetype: delete\n\n"
        ),
    )
    .unwrap();
    let bad = directory.path().join("bad.ldif");
    std::fs::write(
        &bad,
        format!(
            "dn: uid=p03,ou=People,{SUFFIX}\nchangetype: modify\nadd: description\ndescription: t2\n\n\
             dn: uid=new,ou=People,{SUFFIX}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: new\ncn: New\nsn: New\n\n"
        ),
    )
    .unwrap();
    let port = pair.lmdir_port;
    let run = |file: &PathBuf| {
        unboundid(
            &jar,
            "ldapmodify",
            port,
            &["--useTransaction", "--ldifFile", file.to_str().unwrap()],
        )
    };
    let (code, output) = run(&good);
    assert_eq!(code, 0, "{output}");
    assert!(
        descriptions(port, "p01").concat().contains("t1"),
        "{output} {:?}",
        descriptions(port, "p01")
    );
    assert!(descriptions(port, "p02").is_empty(), "p02 deleted");
    assert!(!descriptions(port, "new").is_empty(), "new added");
    // uid=new exists now: the second change fails, and the first is not applied either.
    // (The tool exits 0 whatever End Transaction answers: what it printed is the answer.)
    let (_, output) = run(&bad);
    assert!(output.contains("68 (entry already exists)"), "{output}");
    assert!(output.contains("Failed Operation Message ID"), "{output}");
    assert!(
        !descriptions(port, "p03").concat().contains("t2"),
        "{output}"
    );
}

#[test]
fn ldapmodify_permissive_modify_answers_as_slapd() {
    let Some(jar) = available() else { return };
    let pair = Pair::start(&dataset());
    let directory = tempfile::tempdir().unwrap();
    let ldif = directory.path().join("permissive.ldif");
    std::fs::write(
        &ldif,
        // slapd 2.5 answers 16 to a permissive delete whose *last* value is absent (its loop
        // keeps the last lookup's result; docs/compatibility.md): not asked here.
        format!(
            "dn: uid=p04,ou=People,{SUFFIX}\nchangetype: modify\nadd: description\ndescription: d\n-\n\
             add: description\ndescription: e\n-\ndelete: description\ndescription: absent\ndescription: d\n-\n\
             delete: telephoneNumber\n\n"
        ),
    )
    .unwrap();
    let mut answers = Vec::new();
    for port in [pair.openldap_port, pair.lmdir_port] {
        let (code, output) = unboundid(
            &jar,
            "ldapmodify",
            port,
            &["--permissiveModify", "--ldifFile", ldif.to_str().unwrap()],
        );
        assert_eq!(code, 0, "port {port}: {output}");
        answers.push(descriptions(port, "p04"));
    }
    assert_eq!(answers[0], answers[1]);
    assert!(
        answers[1].concat().contains("description: e"),
        "{answers:?}"
    );
}

/// The entry DNs an `ldapsearch` printed, in order.
fn dns(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("dn: "))
        .map(str::to_ascii_lowercase)
        .collect()
}

#[test]
fn ldapsearch_virtual_list_view_answers_as_slapd_sssvlv() {
    let Some(jar) = available() else { return };
    let extra = Extra {
        slapd_global: "moduleload sssvlv\n",
        slapd_database: "overlay sssvlv\n",
        ..Extra::default()
    };
    let pair = Pair::start_configured(&dataset(), Setup::Plain, &extra);
    let base = format!("ou=People,{SUFFIX}");
    for window in ["0:4:1:0", "2:3:10:30", "1:1:s15", "0:9:25:0"] {
        let mut answers = Vec::new();
        for port in [pair.openldap_port, pair.lmdir_port] {
            let (code, output) = unboundid(
                &jar,
                "ldapsearch",
                port,
                &[
                    "--baseDN",
                    &base,
                    "--scope",
                    "one",
                    // slapd sorts only by an ordering rule (sn has none: 18); lmdir too then.
                    "--sortOrder",
                    "sn:caseIgnoreOrderingMatch",
                    "--virtualListView",
                    window,
                    "(objectClass=inetOrgPerson)",
                    "1.1",
                ],
            );
            assert_eq!(code, 0, "port {port} window {window}: {output}");
            answers.push(dns(&output));
        }
        assert!(!answers[1].is_empty(), "window {window}");
        assert_eq!(answers[0], answers[1], "window {window}");
    }
}
