//! Attribute uniqueness against slapd's unique overlay (`unique_uri
//! ldap:///ou=People,dc=example,dc=com?uid,mail?sub`, lmdir's `[[integrity.unique]]`): the same
//! adds, modifies and renames get the same result codes and texts and leave the same directory.

use crate::conformance;

use conformance::{search, Extra, Pair, Setup, ROOT_DN, ROOT_PASSWORD, SUFFIX};
use std::io::Write;
use std::process::{Command, Stdio};

fn dataset() -> String {
    format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: ou=Other,{SUFFIX}\nobjectClass: organizationalUnit\nou: Other\n\n\
         dn: uid=ann,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: ann\ncn: Ann\nsn: A\n\
         mail: ann@example.com\n\n\
         dn: uid=bob,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: bob\ncn: Bob\nsn: B\n\n\
         dn: uid=ann,ou=Other,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: ann\ncn: Ann\nsn: A\n\
         mail: other@example.com\n\n"
    )
}

/// ldapmodify of `change` as the rootdn: the result code and the server's text.
fn apply(port: u16, change: &str) -> (i32, String) {
    let mut child = Command::new("ldapmodify")
        .args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ldapmodify");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(change.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&output.stderr)
        .lines()
        .find_map(|line| line.trim().strip_prefix("additional info:"))
        .unwrap_or_default()
        .trim()
        .to_string();
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn unique_answers_as_slapd_unique() {
    if !conformance::tools_ready("the unique differential") {
        return;
    }
    let pair = Pair::start_configured(
        &dataset(),
        Setup::Plain,
        &Extra {
            slapd_global: "moduleload unique\n",
            slapd_database: &format!(
                "overlay unique\nunique_uri ldap:///ou=People,{SUFFIX}?uid,mail?sub\n"
            ),
            lmdir_server: "",
            lmdir_database: &format!(
                "[[integrity.unique]]\nbase = \"ou=People,{SUFFIX}\"\n\
                 attributes = [\"uid\", \"mail\"]\n"
            ),
        },
    );
    let people = format!("ou=People,{SUFFIX}");
    let person = |uid: &str, parent: &str, extra: &str| {
        format!(
            "dn: cn={uid} x,{parent}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: {uid}\n\
             cn: {uid} x\nsn: X\n{extra}"
        )
    };
    let steps = [
        // A uid held under ou=People: refused; elsewhere it is not a duplicate.
        person("ann", &people, ""),
        person("ann", &format!("ou=Other,{SUFFIX}"), ""),
        person("cat", &people, "mail: ANN@example.com\n"),
        person("cat", &people, "mail: cat@example.com\n"),
        // A modify adding or replacing with a held value; one keeping its own value.
        format!("dn: uid=bob,{people}\nchangetype: modify\nadd: mail\nmail: cat@example.com\n"),
        format!("dn: uid=bob,{people}\nchangetype: modify\nreplace: uid\nuid: ann\n"),
        format!("dn: uid=ann,{people}\nchangetype: modify\nreplace: cn\ncn: Ann A\n"),
        format!("dn: uid=bob,{people}\nchangetype: modify\nadd: mail\nmail: other@example.com\n"),
        // A rename whose new RDN value is held; one that is free.
        format!("dn: uid=bob,{people}\nchangetype: modrdn\nnewrdn: uid=cat\ndeleteoldrdn: 0\n"),
        format!("dn: uid=bob,{people}\nchangetype: modrdn\nnewrdn: uid=dan\ndeleteoldrdn: 1\n"),
    ];
    let mut differences = Vec::new();
    let mut refused = 0;
    for step in &steps {
        let openldap = apply(pair.openldap_port, step);
        let lmdir = apply(pair.lmdir_port, step);
        refused += usize::from(lmdir.0 == 19);
        // slapd's text names the values; lmdir's adds the entry holding one.
        let same = openldap.0 == lmdir.0 && lmdir.1.starts_with(&openldap.1);
        if !same {
            differences.push(format!(
                "{step}  OpenLDAP: {openldap:?}\n  lmdir:    {lmdir:?}"
            ));
        }
    }
    let snapshots: Vec<_> = [pair.openldap_port, pair.lmdir_port]
        .into_iter()
        .map(|port| search(port, SUFFIX, "sub", "(objectClass=*)", &["*"], &[]).entries)
        .collect();
    if snapshots[0] != snapshots[1] {
        differences.push(format!(
            "directories differ:\n  only OpenLDAP: {:#?}\n  only lmdir: {:#?}",
            snapshots[0].difference(&snapshots[1]).collect::<Vec<_>>(),
            snapshots[1].difference(&snapshots[0]).collect::<Vec<_>>()
        ));
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // Not vacuous: lmdir refused the duplicates (and slapd did the same).
    assert!(refused >= 5, "{refused}");
}
