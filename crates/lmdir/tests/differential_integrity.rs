//! Referential integrity against slapd's refint overlay: the same deletes, renames and subtree
//! moves on both servers, with `refint_attributes` / `[integrity] referential_attributes` on
//! manager, secretary, seeAlso, owner, member and uniqueMember, leave the same directory (values,
//! modifiersName) on both. slapd's refint applies its changes in a background task after
//! answering, so each step waits (bounded) for the two directories to agree.

use crate::conformance;

use conformance::{modify, search, Extra, Pair, Setup, SUFFIX};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const ATTRIBUTES: &str = "manager secretary seeAlso owner member uniqueMember";

fn person(uid: &str, parent: &str, extra: &str) -> String {
    format!(
        "dn: uid={uid},{parent}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n{extra}\n"
    )
}

fn dataset() -> String {
    let people = format!("ou=People,{SUFFIX}");
    let team = format!("ou=Team,{people}");
    let p1 = format!("uid=p1,{people}");
    let p2 = format!("uid=p2,{people}");
    let p3 = format!("uid=p3,{people}");
    let p5 = format!("uid=p5,{team}");
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: {people}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: ou=Projects,{SUFFIX}\nobjectClass: organizationalUnit\nou: Projects\n\n\
         dn: {team}\nobjectClass: organizationalUnit\nou: Team\n\n"
    );
    ldif += &person("p1", &people, &format!("seeAlso: {p5}\n"));
    ldif += &person("p2", &people, &format!("manager: {p1}\nsecretary: {p3}\n"));
    ldif += &person("p3", &people, "");
    ldif += &person(
        "p4",
        &people,
        &format!("manager: {p1}\nseeAlso: {p1}\nseeAlso: {p2}\n"),
    );
    ldif += &person("p5", &team, &format!("manager: {p2}\n"));
    ldif += &format!(
        "dn: cn=g1,{SUFFIX}\nobjectClass: groupOfNames\ncn: g1\nmember: {p1}\nmember: {p2}\n\
         owner: {p1}\n\n\
         dn: cn=g2,{SUFFIX}\nobjectClass: groupOfNames\ncn: g2\nmember: {p5}\nmember: {p3}\n\n\
         dn: cn=u1,{SUFFIX}\nobjectClass: groupOfUniqueNames\ncn: u1\nuniqueMember: {p1}\n\
         uniqueMember: {p5}\nuniqueMember: {p3}\n\n"
    );
    ldif
}

/// Every entry with its user attributes and modifiersName, normalized.
fn snapshot(port: u16) -> BTreeSet<String> {
    search(
        port,
        SUFFIX,
        "sub",
        "(objectClass=*)",
        &["*", "modifiersName"],
        &[],
    )
    .entries
}

/// Waits (up to 10 s) for both directories to agree; the difference otherwise.
fn agreement(pair: &Pair) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let openldap = snapshot(pair.openldap_port);
        let lmdir = snapshot(pair.lmdir_port);
        if openldap == lmdir {
            return Ok(());
        }
        if Instant::now() > deadline {
            let only_openldap: Vec<_> = openldap.difference(&lmdir).collect();
            let only_lmdir: Vec<_> = lmdir.difference(&openldap).collect();
            return Err(format!(
                "only OpenLDAP: {only_openldap:#?}\nonly lmdir: {only_lmdir:#?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn referential_integrity_answers_as_slapd_refint() {
    run_steps(None);
}

/// With `refint_nothing`, a delete removing a required attribute's last value puts the
/// placeholder there instead (on both).
#[test]
fn referential_nothing_answers_as_slapd_refint_nothing() {
    run_steps(Some("cn=nobody,dc=example,dc=com"));
}

fn run_steps(nothing: Option<&str>) {
    if !conformance::tools_ready("the refint differential") {
        return;
    }
    let mut slapd_database = format!("overlay refint\nrefint_attributes {ATTRIBUTES}\n");
    let names: Vec<String> = ATTRIBUTES
        .split(' ')
        .map(|name| format!("\"{name}\""))
        .collect();
    let mut lmdir_database = format!(
        "[integrity]\nreferential_attributes = [{}]\n",
        names.join(", ")
    );
    if let Some(nothing) = nothing {
        slapd_database += &format!("refint_nothing \"{nothing}\"\n");
        lmdir_database += &format!("referential_nothing = \"{nothing}\"\n");
    }
    let pair = Pair::start_configured(
        &dataset(),
        Setup::Plain,
        &Extra {
            slapd_global: "moduleload refint\n",
            slapd_database: &slapd_database,
            lmdir_server: "",
            lmdir_database: &lmdir_database,
        },
    );
    // manager (not in the harness's indexes) is looked up by reading every entry: said once.
    let log = pair.lmdir_log();
    assert!(log.contains("manager has no equality index"), "{log}");
    assert!(!log.contains("member has no equality index"), "{log}");
    let people = format!("ou=People,{SUFFIX}");
    let steps = [
        format!("dn: uid=p3,{people}\nchangetype: delete\n"),
        format!("dn: uid=p1,{people}\nchangetype: modrdn\nnewrdn: uid=p1x\ndeleteoldrdn: 1\n"),
        format!(
            "dn: ou=Team,{people}\nchangetype: modrdn\nnewrdn: ou=Team\ndeleteoldrdn: 1\n\
             newsuperior: ou=Projects,{SUFFIX}\n"
        ),
        format!("dn: uid=p2,{people}\nchangetype: delete\n"),
        format!("dn: uid=p1x,{people}\nchangetype: delete\n"),
    ];
    let before = snapshot(pair.lmdir_port);
    let mut differences = Vec::new();
    for step in &steps {
        let codes: Vec<i32> = [pair.openldap_port, pair.lmdir_port]
            .into_iter()
            .map(|port| modify(port, step).code)
            .collect();
        assert_eq!(codes, [0, 0], "{step}");
        if let Err(difference) = agreement(&pair) {
            differences.push(format!("after\n{step}{difference}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // Not vacuous: the referrers did change (lmdir rewrote or removed their values).
    let after = snapshot(pair.lmdir_port);
    assert!(
        after
            .iter()
            .any(|entry| entry.contains("modifiersname: cn=Referential Integrity Overlay")),
        "{after:#?}"
    );
    assert_ne!(before, after);
    if let Some(nothing) = nothing {
        assert!(
            after
                .iter()
                .any(|entry| entry.contains(&format!("member: {nothing}"))),
            "{after:#?}"
        );
    }
}
