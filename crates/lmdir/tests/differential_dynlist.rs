//! Dynamic groups against slapd's dynlist overlay (`dynlist-attrset groupOfURLs memberURL
//! member`, lmdir's `[[dynlist]]`): reading a groupOfURLs entry lists as `member` the entries
//! its memberURL values find, the same on both servers, for every attribute selection.

use crate::conformance;

use conformance::{search, Extra, Pair, Setup, SUFFIX};

const DYNGROUP_SCHEMA: &str = "/etc/ldap/schema/dyngroup.schema";

fn dataset() -> String {
    let people = format!("ou=People,{SUFFIX}");
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: {people}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: ou=Groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: Groups\n\n"
    );
    for (uid, department) in [("ann", "7"), ("bob", "7"), ("cat", "8"), ("dan", "7")] {
        ldif += &format!(
            "dn: uid={uid},{people}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n\
             departmentNumber: {department}\n\n"
        );
    }
    ldif += &format!(
        "dn: cn=seven,ou=Groups,{SUFFIX}\nobjectClass: groupOfURLs\ncn: seven\n\
         memberURL: ldap:///{people}??sub?(departmentNumber=7)\n\n\
         dn: cn=two,ou=Groups,{SUFFIX}\nobjectClass: groupOfURLs\ncn: two\n\
         memberURL: ldap:///uid=cat,{people}??base\n\
         memberURL: ldap:///{people}??one?(uid=ann)\n\n\
         dn: cn=nobody,ou=Groups,{SUFFIX}\nobjectClass: groupOfURLs\ncn: nobody\n\
         memberURL: ldap:///ou=Missing,{SUFFIX}??sub\n\n"
    );
    ldif
}

#[test]
fn dynamic_groups_answer_as_slapd_dynlist() {
    if !conformance::tools_ready("the dynlist differential") {
        return;
    }
    let pair = Pair::start_configured(
        &dataset(),
        Setup::Plain,
        &Extra {
            slapd_global: &format!("include {DYNGROUP_SCHEMA}\nmoduleload dynlist\n"),
            slapd_database: "overlay dynlist\ndynlist-attrset groupOfURLs memberURL member\n",
            lmdir_server: "",
            lmdir_database: &format!(
                "schema_files = [\"{DYNGROUP_SCHEMA}\"]\n\
                 [[dynlist]]\nobject_class = \"groupOfURLs\"\n"
            ),
        },
    );
    let groups = format!("ou=Groups,{SUFFIX}");
    let cases: [(&str, &str, &[&str]); 6] = [
        ("sub", "(objectClass=groupOfURLs)", &[]),
        ("sub", "(objectClass=groupOfURLs)", &["member"]),
        ("sub", "(objectClass=groupOfURLs)", &["memberURL"]),
        ("sub", "(cn=seven)", &["cn", "member"]),
        ("sub", "(cn=two)", &["*", "+"]),
        ("one", "(objectClass=*)", &["1.1"]),
    ];
    let mut differences = Vec::new();
    let mut members_listed = 0;
    for (scope, filter, attributes) in cases {
        let answers: Vec<_> = [pair.openldap_port, pair.lmdir_port]
            .into_iter()
            .map(|port| search(port, &groups, scope, filter, attributes, &[]))
            .collect();
        let strip = |entries: &std::collections::BTreeSet<String>| -> Vec<String> {
            // Operational attributes each server computes differently are left out.
            entries
                .iter()
                .map(|entry| {
                    entry
                        .lines()
                        .filter(|line| {
                            ![
                                "entryuuid:",
                                "entrycsn:",
                                "createtimestamp:",
                                "modifytimestamp:",
                                "creatorsname:",
                                "modifiersname:",
                                "entrydn:",
                                "subschemasubentry:",
                                "hassubordinates:",
                                "numsubordinates:",
                                "structuralobjectclass:",
                            ]
                            .iter()
                            .any(|prefix| line.to_ascii_lowercase().starts_with(prefix))
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .collect()
        };
        let (openldap, lmdir) = (strip(&answers[0].entries), strip(&answers[1].entries));
        members_listed += lmdir
            .iter()
            .map(|entry| entry.matches("member: uid=").count())
            .sum::<usize>();
        if answers[0].code != answers[1].code || openldap != lmdir {
            differences.push(format!(
                "{scope} {filter} {attributes:?}\n  OpenLDAP ({}): {openldap:#?}\n  lmdir ({}): {lmdir:#?}",
                answers[0].code, answers[1].code
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // Not vacuous: members were listed (seven: ann, bob, dan; two: cat, ann).
    assert!(members_listed >= 10, "{members_listed}");
}

/// `(dn, value)` pairs of `attribute` in a raw ldapsearch output (DNs and values lowercased:
/// the servers may spell them differently).
fn pairs(output: &str, attribute: &str) -> std::collections::BTreeSet<(String, String)> {
    let mut found = std::collections::BTreeSet::new();
    let mut dn = String::new();
    let prefix = format!("{}: ", attribute.to_ascii_lowercase());
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("dn: ") {
            dn = rest.to_ascii_lowercase();
        } else if line.to_ascii_lowercase().starts_with(&prefix) {
            found.insert((dn.clone(), line[prefix.len()..].to_ascii_lowercase()));
        }
    }
    found
}

/// With `member+memberOf` (lmdir: `member_of_attribute`), an entry a dynamic group finds lists
/// that group in memberOf, on both servers.
#[test]
fn dynamic_member_of_answers_as_slapd_dynlist() {
    if !conformance::tools_ready("the dynlist differential") {
        return;
    }
    let pair = Pair::start_configured(
        &dataset(),
        Setup::Plain,
        &Extra {
            slapd_global: &format!("include {DYNGROUP_SCHEMA}\nmoduleload dynlist\n"),
            slapd_database: "overlay dynlist\n\
                             dynlist-attrset groupOfURLs memberURL member+memberOf\n",
            lmdir_server: "",
            lmdir_database: &format!(
                "schema_files = [\"{DYNGROUP_SCHEMA}\"]\n\
                 [[dynlist]]\nobject_class = \"groupOfURLs\"\nmember_of_attribute = \"memberOf\"\n"
            ),
        },
    );
    let people = format!("ou=People,{SUFFIX}");
    let mut differences = Vec::new();
    let mut listed = 0;
    for attributes in [&["memberOf"][..], &["cn", "memberOf"], &["+"], &["*"]] {
        let answers: Vec<_> = [pair.openldap_port, pair.lmdir_port]
            .into_iter()
            .map(|port| {
                let mut arguments = vec![
                    "-LLL",
                    "-o",
                    "ldif-wrap=no",
                    "-D",
                    conformance::ROOT_DN,
                    "-w",
                    conformance::ROOT_PASSWORD,
                    "-b",
                    &people,
                    "(objectClass=inetOrgPerson)",
                ];
                arguments.extend_from_slice(attributes);
                let (code, output) = conformance::tool(port, "ldapsearch", &arguments);
                (code, pairs(&output, "memberOf"))
            })
            .collect();
        listed += answers[1].1.len();
        if answers[0] != answers[1] {
            differences.push(format!(
                "{attributes:?}\n  OpenLDAP: {:?}\n  lmdir:    {:?}",
                answers[0], answers[1]
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // Not vacuous: ann is in seven and two, bob and dan in seven, cat in two (asked twice).
    assert!(listed >= 10, "{listed}");
}
