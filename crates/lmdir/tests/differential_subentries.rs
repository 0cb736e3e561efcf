//! RFC 3672 subentries (`objectClass: subentry`) loaded into slapd (slapadd) and lmdir
//! (`lmdir load`) from the same LDIF, at several depths and as search bases: every scope ×
//! the Subentries control absent, TRUE, FALSE (and critical) × a filter naming subentries or
//! not, unpaged, paged and sorted (slapd's sssvlv overlay), give the same result codes and
//! the same entries on both servers (back-mdb hides subentries from
//! one-level and subtree searches without the control; TRUE returns only subentries, FALSE
//! only ordinary entries). A sync refresh hides them as slapd's syncprov does. The offline
//! `lmdir search --subentries` hides them the same way.

use crate::conformance;

use conformance::{case, run_cases, Case, Extra, Pair, Setup, SUFFIX};
use std::collections::BTreeSet;

fn subentry(dn: &str, cn: &str) -> String {
    format!(
        "dn: {dn}\nobjectClass: top\nobjectClass: subentry\ncn: {cn}\n\
         subtreeSpecification: {{}}\n\n"
    )
}

fn dataset() -> String {
    let people = format!("ou=People,{SUFFIX}");
    let staff = format!("ou=Staff,{people}");
    [
        format!(
            "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n\
             o: Example\n\n"
        ),
        subentry(&format!("cn=Top Policy,{SUFFIX}"), "Top Policy"),
        format!("dn: {people}\nobjectClass: organizationalUnit\nou: People\n\n"),
        subentry(&format!("cn=People Policy,{people}"), "People Policy"),
        format!("dn: {staff}\nobjectClass: organizationalUnit\nou: Staff\n\n"),
        subentry(&format!("cn=Staff Policy,{staff}"), "Staff Policy"),
        format!("dn: uid=p1,{staff}\nobjectClass: inetOrgPerson\nuid: p1\ncn: P One\nsn: One\n\n"),
        format!("dn: uid=p2,{people}\nobjectClass: inetOrgPerson\nuid: p2\ncn: P Two\nsn: Two\n\n"),
        format!("dn: ou=Empty,{SUFFIX}\nobjectClass: organizationalUnit\nou: Empty\n\n"),
    ]
    .concat()
}

/// The control as ldapsearch sends it: none, TRUE, FALSE, TRUE critical.
const CONTROLS: [&[&str]; 4] = [
    &[],
    &["-E", "subentries=true"],
    &["-E", "subentries=false"],
    &["-E", "!subentries=true"],
];

/// How the result is asked for: whole, in pages of 2, sorted by cn (with caseIgnoreOrderingMatch:
/// cn has no ordering rule, and slapd refuses it alone with 18).
const SHAPES: [&[&str]; 3] = [&[], &["-E", "pr=2/noprompt"], &["-E", "sss=cn:2.5.13.3"]];

fn search_cases() -> Vec<Case> {
    let people = format!("ou=People,{SUFFIX}");
    let bases = [
        SUFFIX.to_string(),
        people.clone(),
        format!("cn=People Policy,{people}"),
        format!("cn=Top Policy,{SUFFIX}"),
        format!("uid=p2,{people}"),
    ];
    let filters = ["(objectClass=*)", "(objectClass=subentry)", "(cn=*Policy)"];
    let mut cases = Vec::new();
    for base in bases {
        for scope in ["base", "one", "sub"] {
            for filter in filters {
                for control in CONTROLS {
                    for shape in SHAPES {
                        cases.push(shaped(case(&base, scope, filter), &[control, shape]));
                    }
                }
            }
        }
    }
    cases
}

fn shaped(mut one: Case, extra: &[&[&'static str]]) -> Case {
    one.attributes = vec!["cn", "objectClass"];
    one.extra = extra.concat();
    one.name += &format!(" {}", one.extra.join(" "));
    one
}

/// The DNs (lowercased) `lmdir search` prints for a search of the loaded directory.
fn offline_dns(pair: &Pair, base: &str, scope: &str, subentries: Option<&str>) -> BTreeSet<String> {
    let mut arguments = vec!["search", base, "(objectClass=*)", "1.1", "--scope", scope];
    if let Some(value) = subentries {
        arguments.extend(["--subentries", value]);
    }
    let output = pair.lmdir_command(&arguments);
    assert!(output.status.success(), "{arguments:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("dn: "))
        .map(|dn| dn.to_ascii_lowercase())
        .collect()
}

#[test]
fn subentries_answer_as_on_slapd() {
    if !conformance::tools_ready("the subentries differential") {
        return;
    }
    let extra = Extra {
        slapd_global: "moduleload sssvlv\n",
        slapd_database: "overlay sssvlv\n",
        lmdir_server: "",
        lmdir_database: "",
    };
    let pair = Pair::start_configured(&dataset(), Setup::Plain, &extra);
    let cases = search_cases();
    let differences = run_cases(&pair, &cases);
    assert!(
        differences.is_empty(),
        "{} of {} cases differ:\n{}",
        differences.len(),
        cases.len(),
        differences.join("\n")
    );
}

/// `lmdir search` on the stopped store: the same hiding as the server's, through the same
/// code, with `--subentries` for the control.
#[test]
fn offline_search_hides_subentries_the_same_way() {
    if !conformance::tools_ready("the subentries differential") {
        return;
    }
    let pair = Pair::start(&dataset());
    let policies: BTreeSet<String> = [
        format!("cn=top policy,{SUFFIX}"),
        format!("cn=people policy,ou=people,{SUFFIX}"),
        format!("cn=staff policy,ou=staff,ou=people,{SUFFIX}"),
    ]
    .into_iter()
    .collect();
    let all = offline_dns(&pair, SUFFIX, "sub", None);
    assert_eq!(all.len(), 6, "the ordinary entries: {all:?}");
    assert!(all.is_disjoint(&policies), "{all:?}");
    assert_eq!(offline_dns(&pair, SUFFIX, "sub", Some("false")), all);
    assert_eq!(offline_dns(&pair, SUFFIX, "sub", Some("true")), policies);
    let top = format!("cn=Top Policy,{SUFFIX}");
    assert_eq!(offline_dns(&pair, &top, "base", None).len(), 1);
    assert!(offline_dns(&pair, &top, "base", Some("false")).is_empty());
}

/// A sync refresh (RFC 4533 refreshOnly, no cookie) hides subentries without the control and
/// returns only them with TRUE, as slapd's syncprov (over back-mdb's search) does: a consumer
/// of either server gets the same entries.
#[test]
fn a_sync_refresh_hides_subentries_as_syncprov_does() {
    if !conformance::tools_ready("the subentries sync differential") {
        return;
    }
    let extra = Extra {
        slapd_global: "moduleload syncprov\n",
        slapd_database: "overlay syncprov\n",
        lmdir_server: "",
        lmdir_database: "[replication]\nserver_id = 1\nprovider = true\n",
    };
    let pair = Pair::start_configured(&dataset(), Setup::Plain, &extra);
    let people = format!("ou=People,{SUFFIX}");
    let mut differences = Vec::new();
    for base in [SUFFIX, people.as_str()] {
        for control in CONTROLS {
            let extra = [&["-E", "sync=ro"][..], control].concat();
            let answers = pair.ports().map(|(_, port)| {
                conformance::search(port, base, "sub", "(objectClass=*)", &["cn"], &extra)
            });
            if answers[0] != answers[1] {
                differences.push(format!(
                    "-b {base} {extra:?}: {}",
                    conformance::describe_difference(&answers[0], &answers[1])
                ));
            }
            assert_eq!(answers[0].code, 0, "-b {base} {extra:?}");
            assert!(!answers[0].entries.is_empty(), "-b {base} {extra:?}");
            let policies = answers[0]
                .entries
                .iter()
                .filter(|entry| entry.to_lowercase().contains(" policy,"))
                .count();
            let expected = match control.last() {
                Some(value) if value.ends_with("true") => answers[0].entries.len(),
                _ => 0,
            };
            assert_eq!(policies, expected, "-b {base} {extra:?}: {:?}", answers[0]);
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
