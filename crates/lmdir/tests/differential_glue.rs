//! Glue entries (an OpenLDAP partial replica's placeholders, `objectClass: top`, `glue`, no RDN
//! value) loaded into slapd (slapadd) and lmdir (`lmdir load`) from the same LDIF: searches
//! with and without ManageDsaIT (`ldapsearch -M`), with a glue entry as their base and below
//! one, compare, and writes of and below glue entries give the same result codes, the same
//! entries and the same matched DNs on both servers.

use crate::conformance;

use conformance::{case, run_cases, Case, Pair, ROOT_DN, ROOT_PASSWORD, SUFFIX};
use std::io::Write;
use std::process::{Command, Stdio};

fn dataset() -> String {
    format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: top\nobjectClass: glue\nstructuralObjectClass: glue\n\n\
         dn: ou=Staff,ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: Staff\n\n\
         dn: uid=p1,ou=Staff,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p1\ncn: P One\n\
         sn: One\n\n\
         dn: uid=p2,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p2\ncn: P Two\nsn: Two\n\n\
         dn: ou=Groups,{SUFFIX}\nobjectClass: top\nobjectClass: glue\n\n\
         dn: ou=Deep,ou=Groups,{SUFFIX}\nobjectClass: glue\n\n\
         dn: cn=g1,ou=Deep,ou=Groups,{SUFFIX}\nobjectClass: groupOfNames\ncn: g1\n\
         member: uid=p1,ou=Staff,ou=People,{SUFFIX}\n\n\
         dn: ou=Empty,{SUFFIX}\nobjectClass: top\nobjectClass: glue\n\n"
    )
}

/// Every search, without and with ManageDsaIT.
fn search_cases() -> Vec<Case> {
    let people = format!("ou=People,{SUFFIX}");
    let bases = [
        (SUFFIX.to_string(), "sub", "(objectClass=*)"),
        (SUFFIX.to_string(), "one", "(objectClass=*)"),
        (SUFFIX.to_string(), "sub", "(objectClass=glue)"),
        (SUFFIX.to_string(), "sub", "(|(ou=*)(cn=g1))"),
        (people.clone(), "base", "(objectClass=*)"),
        (people.clone(), "one", "(objectClass=*)"),
        (people.clone(), "sub", "(objectClass=*)"),
        (format!("uid=p2,{people}"), "base", "(objectClass=*)"),
        (format!("uid=zz,{people}"), "base", "(objectClass=*)"),
        (format!("ou=Deep,ou=Groups,{SUFFIX}"), "sub", "(cn=*)"),
        (format!("ou=Empty,{SUFFIX}"), "base", "(objectClass=glue)"),
    ];
    // Published by neither server's cn=Subschema (slapd hides them).
    let mut cases: Vec<Case> = [
        "(objectClasses=1.3.6.1.4.1.4203.666.3.4)",
        "(objectClasses=1.3.6.1.4.1.4203.666.3.5)",
        "(attributeTypes=1.3.6.1.4.1.4203.666.1.23)",
        "(objectClasses=2.5.17.0)",
    ]
    .into_iter()
    .map(|filter| {
        let mut one = case("cn=Subschema", "base", filter);
        one.attributes = vec!["cn"];
        one
    })
    .collect();
    for manage in [false, true] {
        for (base, scope, filter) in &bases {
            let mut one = case(base, scope, filter);
            one.attributes = vec!["objectClass", "ou", "uid"];
            if manage {
                one.extra = vec!["-M"];
                one.name += " -M";
            }
            cases.push(one);
        }
    }
    cases
}

/// A change as the rootdn with ldapmodify (`-M` when `manage`): its result code and the
/// matched DN it printed.
fn change(port: u16, ldif: &str, manage: bool) -> (i32, Option<String>) {
    let mut child = Command::new("ldapmodify")
        .args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD])
        .args(if manage { &["-M"][..] } else { &[] })
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ldapmodify");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(ldif.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let matched = stderr.lines().find_map(|line| {
        let line = line.trim();
        line.get(..11)
            .filter(|head| head.eq_ignore_ascii_case("matched DN:"))
            .map(|_| conformance::normalize_dn(line[11..].trim()))
    });
    (output.status.code().unwrap_or(-1), matched)
}

/// The writes, in order: (LDIF change, with ManageDsaIT).
fn write_cases() -> Vec<(String, bool)> {
    let people = format!("ou=People,{SUFFIX}");
    let empty = format!("ou=Empty,{SUFFIX}");
    let description = "changetype: modify\nadd: description\ndescription: x\n";
    let extensible = "changetype: modify\nadd: objectClass\nobjectClass: extensibleObject\n";
    let rename = "changetype: modrdn\nnewrdn: ou=Moved\ndeleteoldrdn: 1\n";
    let glue_add = "changetype: add\nobjectClass: top\nobjectClass: glue\n";
    let person = "changetype: add\nobjectClass: inetOrgPerson\nuid: p3\ncn: P Three\nsn: Three\n";
    [
        (format!("dn: {people}\n{description}"), false),
        (format!("dn: {people}\n{description}"), true),
        (format!("dn: {people}\n{extensible}"), false),
        (format!("dn: uid=zz,{people}\n{description}"), false),
        (format!("dn: {people}\nchangetype: delete\n"), false),
        (format!("dn: {people}\nchangetype: delete\n"), true),
        (format!("dn: {empty}\n{rename}"), false),
        (format!("dn: {empty}\nchangetype: delete\n"), false),
        (format!("dn: {empty}\n{rename}"), true),
        (format!("dn: {empty}\nchangetype: delete\n"), true),
        (format!("dn: ou=G2,{SUFFIX}\n{glue_add}"), false),
        (format!("dn: ou=G3,{SUFFIX}\n{glue_add}ou: G3\n"), false),
        (format!("dn: uid=p3,{people}\n{person}"), false),
        (format!("dn: {people}\n{extensible}"), true),
        (format!("dn: {people}\n{description}"), true),
        (format!("dn: ou=G2,{SUFFIX}\nchangetype: delete\n"), false),
    ]
    .into_iter()
    .collect()
}

#[test]
fn glue_entries_answer_as_on_slapd() {
    if !conformance::tools_ready("the glue entries differential") {
        return;
    }
    let pair = Pair::start(&dataset());
    let mut differences = run_cases(&pair, &search_cases());
    // Compare is not glue-aware on slapd: TRUE (6) with and without ManageDsaIT.
    for manage in [&[][..], &["-M"]] {
        let answers: Vec<i32> = [pair.openldap_port, pair.lmdir_port]
            .into_iter()
            .map(|port| {
                let mut arguments = vec!["-D", ROOT_DN, "-w", ROOT_PASSWORD];
                arguments.extend_from_slice(manage);
                let dn = format!("ou=People,{SUFFIX}");
                arguments.extend([dn.as_str(), "objectClass:glue"]);
                conformance::tool(port, "ldapcompare", &arguments).0
            })
            .collect();
        if answers[0] != answers[1] {
            differences.push(format!("compare {manage:?}: {answers:?}"));
        }
    }
    // Password Modify of a glue entry: noSuchObject on slapd, with ManageDsaIT too.
    for manage in [&[][..], &["-e", "manageDSAit"]] {
        let answers: Vec<(i32, String)> = [pair.openldap_port, pair.lmdir_port]
            .into_iter()
            .map(|port| {
                let mut arguments = vec!["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-s", "new"];
                arguments.extend_from_slice(manage);
                let dn = format!("ou=Groups,{SUFFIX}");
                arguments.push(dn.as_str());
                conformance::tool(port, "ldappasswd", &arguments)
            })
            .collect();
        if answers[0] != answers[1] {
            differences.push(format!("ldappasswd {manage:?}: {answers:?}"));
        }
    }
    for (ldif, manage) in write_cases() {
        let answers: Vec<_> = [pair.openldap_port, pair.lmdir_port]
            .into_iter()
            .map(|port| change(port, &ldif, manage))
            .collect();
        if answers[0] != answers[1] {
            differences.push(format!(
                "-M={manage} {ldif:?}\n  OpenLDAP: {:?}\n  lmdir:    {:?}",
                answers[0], answers[1]
            ));
        }
    }
    // Whatever the writes left, seen through and around the glue entries.
    differences.extend(run_cases(&pair, &search_cases()));
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
