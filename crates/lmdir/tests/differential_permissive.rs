//! The permissive modify control (1.2.840.113556.1.4.1413; Active Directory tools, Samba and
//! UnboundID's `--permissiveModify` send it) against slapd, which honours it: the same modify
//! requests, with and without the control, give the same result codes and leave the same entry
//! on both servers.

use crate::conformance;

use conformance::{search, Pair, SUFFIX};

const PERMISSIVE: &str = "!1.2.840.113556.1.4.1413";

fn dataset() -> String {
    format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: uid=p1,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p1\ncn: P One\nsn: One\n\
         description: a\ndescription: b\n\n"
    )
}

/// ldapmodify (or ldapadd with `add`) of `change` as the rootdn, with the control when
/// `permissive`: its exit code, the LDAP result code.
fn change(port: u16, change: &str, permissive: bool, tool: &str) -> i32 {
    let control: &[&str] = if permissive { &["-e", PERMISSIVE] } else { &[] };
    conformance::ldap_change_code(port, tool, control, change)
}

#[test]
fn permissive_modify_answers_as_slapd() {
    if !conformance::tools_ready("the permissive modify differential") {
        return;
    }
    let pair = Pair::start(&dataset());
    let target = format!("dn: uid=p1,ou=People,{SUFFIX}\nchangetype: modify\n");
    let cases = [
        "add: description\ndescription: a\ndescription: c\n",
        "delete: description\ndescription: zz\ndescription: b\n",
        "delete: telephoneNumber\n",
        "delete: telephoneNumber\ntelephoneNumber: 1\n",
        "add: description\ndescription: d\ndescription: d\n",
        "add: description\ndescription: A\n",
        "replace: description\ndescription: x\n-\nadd: description\ndescription: x\n",
    ];
    let mut differences = Vec::new();
    let mut permissive_successes = 0;
    for permissive in [false, true] {
        for body in cases {
            let ldif = format!("{target}{body}");
            let answers: Vec<(i32, _)> = [pair.openldap_port, pair.lmdir_port]
                .into_iter()
                .map(|port| {
                    let code = change(port, &ldif, permissive, "ldapmodify");
                    let entry = search(
                        port,
                        &format!("uid=p1,ou=People,{SUFFIX}"),
                        "base",
                        "(objectClass=*)",
                        &["description", "telephoneNumber"],
                        &[],
                    );
                    (code, entry.entries)
                })
                .collect();
            if answers[0] != answers[1] {
                differences.push(format!(
                    "permissive={permissive} {body:?}\n  OpenLDAP: {:?}\n  lmdir:    {:?}",
                    answers[0], answers[1]
                ));
            }
            permissive_successes += usize::from(permissive && answers[1].0 == 0);
        }
    }
    // On an add the control does not apply: critical, it is refused (12) on both.
    let add = format!(
        "dn: uid=p2,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p2\ncn: P Two\nsn: Two\n"
    );
    let adds: Vec<i32> = [pair.openldap_port, pair.lmdir_port]
        .into_iter()
        .map(|port| change(port, &add, true, "ldapadd"))
        .collect();
    if adds[0] != adds[1] {
        differences.push(format!(
            "critical control on add: OpenLDAP {} lmdir {}",
            adds[0], adds[1]
        ));
    }
    // Not vacuous: the control turned refusals into successes.
    assert!(permissive_successes >= 3, "{permissive_successes}");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
