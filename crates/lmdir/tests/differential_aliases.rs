//! Alias dereferencing (a search's derefAliases; `ldapsearch -a never|search|find|always`)
//! against slapd's back-mdb: aliases to an entry and to a subtree, a chain of two, a chain
//! past the depth bound, a loop, an alias to a missing entry and one to a subtree holding
//! aliases, searched at every base with every scope and mode: the same result codes, matched
//! DNs and set of returned DNs on both servers (slapd sends an entry reached by two paths
//! twice, lmdir once: a set of DNs is compared). Then, on lmdir alone (the harness gives slapd
//! one fixed access policy), a target hidden from the requester answers as a missing one, and
//! what a dereferencing search does with paging.

use crate::conformance;

use conformance::{case, run_cases, Extra, Pair, Setup, SUFFIX};
use std::process::Command;

const MODES: [&str; 4] = ["never", "search", "find", "always"];
const SCOPES: [&str; 3] = ["base", "one", "sub"];

fn entry(dn: &str, body: &str) -> String {
    format!("dn: {dn},{SUFFIX}\n{body}\n")
}

fn alias(dn: &str, target: &str) -> String {
    let cn = dn
        .split(',')
        .next()
        .and_then(|rdn| rdn.strip_prefix("cn="))
        .unwrap();
    entry(
        dn,
        &format!(
            "objectClass: alias\nobjectClass: extensibleObject\ncn: {cn}\n\
             aliasedObjectName: {target},{SUFFIX}\n"
        ),
    )
}

fn person(dn: &str, uid: &str) -> String {
    entry(
        dn,
        &format!("objectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n"),
    )
}

fn unit(ou: &str) -> String {
    entry(
        &format!("ou={ou}"),
        &format!("objectClass: organizationalUnit\nou: {ou}\n"),
    )
}

/// The aliases' bases, each searched with every scope and mode.
const ALIASES: &[&str] = &[
    "cn=toP1,ou=Aliases",
    "cn=toPeople,ou=Aliases",
    "cn=chain,ou=Aliases",
    "cn=loopA,ou=Aliases",
    "cn=missing,ou=Aliases",
    "cn=toAliases,ou=Shortcuts",
    "cn=c0,ou=Long",
    "cn=c1,ou=Long",
];

fn dataset() -> String {
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n"
    );
    for ou in ["People", "Hidden", "Aliases", "Shortcuts", "Long"] {
        ldif += &unit(ou);
    }
    ldif += &person("uid=p1,ou=People", "p1");
    ldif += &person("uid=p2,ou=People", "p2");
    ldif += &person("uid=h1,ou=Hidden", "h1");
    ldif += &alias("cn=toP1,ou=Aliases", "uid=p1,ou=People");
    ldif += &alias("cn=toPeople,ou=Aliases", "ou=People");
    ldif += &alias("cn=chain,ou=Aliases", "cn=toP1,ou=Aliases");
    ldif += &alias("cn=loopA,ou=Aliases", "cn=loopB,ou=Aliases");
    ldif += &alias("cn=loopB,ou=Aliases", "cn=loopA,ou=Aliases");
    ldif += &alias("cn=missing,ou=Aliases", "uid=nobody,ou=People");
    ldif += &alias("cn=toHidden,ou=Aliases", "ou=Hidden");
    ldif += &alias("cn=toH1,ou=Aliases", "uid=h1,ou=Hidden");
    ldif += &alias("cn=toAliases,ou=Shortcuts", "ou=Aliases");
    // c0 → c1 → … → c15 → p1: from c1, 15 aliases (slapd's depth bound); from c0, 16.
    for link in 0..16 {
        let next = match link {
            15 => "uid=p1,ou=People".to_string(),
            _ => format!("cn=c{},ou=Long", link + 1),
        };
        ldif += &alias(&format!("cn=c{link},ou=Long"), &next);
    }
    ldif
}

#[test]
fn dereferencing_answers_as_slapd() {
    if !conformance::tools_ready("the alias dereferencing differential") {
        return;
    }
    let pair = Pair::start(&dataset());
    let mut bases: Vec<String> = ["", "ou=Aliases,", "ou=Shortcuts,", "ou=Long,", "ou=People,"]
        .iter()
        .map(|prefix| format!("{prefix}{SUFFIX}"))
        .collect();
    bases.extend(ALIASES.iter().map(|dn| format!("{dn},{SUFFIX}")));
    let mut cases = Vec::new();
    for base in &bases {
        for scope in SCOPES {
            for mode in MODES {
                if base.starts_with("cn=c0,") && mode != "never" && mode != "search" {
                    continue; // past the depth bound: `depth_bound_is_a_clear_result`
                }
                let mut one = case(base, scope, "(objectClass=*)");
                one.attributes = vec!["1.1"];
                one.extra = vec!["-a", mode];
                one.name = format!("-a {mode} {}", one.name);
                cases.push(one);
            }
        }
    }
    // A filter applies to the entries reached through aliases too.
    for mode in MODES {
        let mut one = case(SUFFIX, "sub", "(uid=p*)");
        one.extra = vec!["-a", mode];
        one.name = format!("-a {mode} {}", one.name);
        cases.push(one);
    }
    // The size limit counts the entries reached through aliases.
    let mut limited = case(&format!("ou=Aliases,{SUFFIX}"), "sub", "(objectClass=*)");
    limited.extra = vec!["-a", "always", "-z", "2"];
    limited.count_only = true;
    cases.push(limited);
    let differences = run_cases(&pair, &cases);
    assert!(
        differences.is_empty(),
        "{} of {} searches differ:\n{}",
        differences.len(),
        cases.len(),
        differences.join("\n")
    );
}

/// A chain of 16 aliases from the base: slapd ends the search with success (0), no entry, the
/// 16th alias as matched DN and "maximum deref depth exceeded" as text (its `deref_base`
/// overwrites the error code while it follows the chain); lmdir sends the same matched DN and
/// text with aliasDereferencingProblem (36), the code RFC 4511 names for it, so a client does not
/// read an empty success. A known difference (docs/compatibility.md).
#[test]
fn depth_bound_is_a_clear_result() {
    if !conformance::tools_ready("the alias depth differential") {
        return;
    }
    let pair = Pair::start(&dataset());
    let base = format!("cn=c0,ou=Long,{SUFFIX}");
    let matched = Some(conformance::normalize_dn(&format!(
        "cn=c15,ou=Long,{SUFFIX}"
    )));
    for scope in SCOPES {
        for mode in ["find", "always"] {
            let [(_, openldap), (_, lmdir)] = pair.ports();
            let arguments = ["-a", mode];
            let slapd =
                conformance::search(openldap, &base, scope, "(objectClass=*)", &[], &arguments);
            let ours = conformance::search(lmdir, &base, scope, "(objectClass=*)", &[], &arguments);
            assert_eq!(
                (slapd.code, slapd.entries.len()),
                (0, 0),
                "-s {scope} -a {mode}"
            );
            assert_eq!(slapd.matched_dn, matched, "-s {scope} -a {mode}");
            assert_eq!(
                (ours.code, ours.entries.len()),
                (36, 0),
                "-s {scope} -a {mode}"
            );
            assert_eq!(ours.matched_dn, matched, "-s {scope} -a {mode}");
        }
    }
}

/// An anonymous ldapsearch on `port`: (exit code = result code, the DNs returned, lowercased
/// and sorted, what it printed on standard error).
fn anonymous_search(
    port: u16,
    base: &str,
    scope: &str,
    extra: &[&str],
) -> (i32, Vec<String>, String) {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no"])
        .args(["-H", &format!("ldap://127.0.0.1:{port}")])
        .args(["-b", base, "-s", scope])
        .args(extra)
        .args(["(objectClass=*)", "1.1"])
        .output()
        .unwrap();
    let mut dns: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("dn: "))
        .map(|dn| dn.to_lowercase())
        .collect();
    dns.sort();
    (
        output.status.code().unwrap_or(-1),
        dns,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// lmdir alone: ou=Hidden is hidden from anonymous. An alias to it (or to an entry in it)
/// answers exactly as an alias to a missing entry (aliasProblem, the alias as matched DN),
/// and a search in scope never returns a hidden entry through an alias.
#[test]
fn hidden_targets_answer_as_missing_ones() {
    if !conformance::tools_ready("the hidden alias target test") {
        return;
    }
    let rules = format!(
        "[[access]]\nto = {{ subtree = \"ou=Hidden,{SUFFIX}\" }}\n\
         by = [ {{ who = \"*\", access = \"none\" }} ]\n\
         [[access]]\nto = {{}}\nby = [ {{ who = \"*\", access = \"read\" }} ]\n"
    );
    let pair = Pair::start_configured(
        &dataset(),
        Setup::Plain,
        &Extra {
            lmdir_database: &rules,
            ..Extra::default()
        },
    );
    let port = pair.lmdir_port;
    let aliases = format!("ou=Aliases,{SUFFIX}");
    for scope in SCOPES {
        for mode in ["find", "always"] {
            let missing =
                anonymous_search(port, &format!("cn=missing,{aliases}"), scope, &["-a", mode]);
            assert_eq!(missing.0, 33, "{missing:?}");
            assert!(
                missing
                    .2
                    .contains(&format!("Matched DN: cn=missing,{aliases}")),
                "{missing:?}"
            );
            for hidden in ["cn=toHidden", "cn=toH1"] {
                let answer =
                    anonymous_search(port, &format!("{hidden},{aliases}"), scope, &["-a", mode]);
                assert_eq!(
                    answer.0, missing.0,
                    "{hidden} -s {scope} -a {mode}: {answer:?}"
                );
                assert_eq!(
                    answer.2.replace(hidden, "cn=missing"),
                    missing.2,
                    "{hidden} -s {scope} -a {mode}"
                );
            }
        }
    }
    let hidden = format!("ou=hidden,{SUFFIX}");
    for mode in MODES {
        for scope in ["one", "sub"] {
            for base in [SUFFIX, &aliases] {
                let (code, dns, _) = anonymous_search(port, base, scope, &["-a", mode]);
                assert_eq!(code, 0, "-b {base} -s {scope} -a {mode}");
                assert!(
                    dns.iter().all(|dn| !dn.ends_with(&hidden)),
                    "-b {base} -s {scope} -a {mode}: {dns:?}"
                );
            }
        }
    }
}

/// Paging: a search whose aliases lead out of its base's scope is refused (unwillingToPerform:
/// a page cookie holds one position in one walk); one whose scope has no alias to follow pages
/// as always, and a sorted one pages over the whole sorted result.
#[test]
fn paging_with_dereferencing() {
    if !conformance::tools_ready("the alias paging test") {
        return;
    }
    let pair = Pair::start(&dataset());
    let port = pair.lmdir_port;
    let aliases = format!("ou=Aliases,{SUFFIX}");
    let paged = ["-E", "pr=2/noprompt"];
    let (code, _, error) = anonymous_search(
        port,
        &aliases,
        "sub",
        &[&paged[..], &["-a", "always"]].concat(),
    );
    assert_eq!(code, 53, "{error}");
    let (code, dns, _) = anonymous_search(
        port,
        &aliases,
        "sub",
        &[&paged[..], &["-a", "never"]].concat(),
    );
    assert_eq!((code, dns.len()), (0, 9), "{dns:?}");
    let people = format!("ou=People,{SUFFIX}");
    let (code, dns, _) = anonymous_search(
        port,
        &people,
        "sub",
        &[&paged[..], &["-a", "always"]].concat(),
    );
    assert_eq!((code, dns.len()), (0, 3), "{dns:?}");
    let sorted = ["-E", "pr=2/noprompt", "-E", "sss=cn", "-a", "always"];
    let (code, dns, error) = anonymous_search(port, &aliases, "sub", &sorted);
    assert_eq!(code, 0, "{error}");
    let expected = [
        "ou=aliases",
        "ou=hidden",
        "ou=people",
        "uid=h1,ou=hidden",
        "uid=p1,ou=people",
        "uid=p2,ou=people",
    ];
    let expected: Vec<String> = expected.iter().map(|dn| format!("{dn},{SUFFIX}")).collect();
    assert_eq!(dns, expected);
}

/// lmdir alone: a search in scope follows at most 256 aliases (`ALIASES_FOLLOWED_MAX`), then
/// ends with adminLimitExceeded; without dereferencing the same scope answers as always.
#[test]
fn aliases_followed_are_bounded() {
    if !conformance::tools_ready("the alias bound test") {
        return;
    }
    let mut ldif = dataset();
    ldif += &unit("Many");
    for link in 0..257 {
        ldif += &alias(&format!("cn=m{link},ou=Many"), "uid=p1,ou=People");
    }
    let pair = Pair::start(&ldif);
    let many = format!("ou=Many,{SUFFIX}");
    let (code, dns, error) = anonymous_search(pair.lmdir_port, &many, "sub", &["-a", "search"]);
    assert_eq!((code, dns.len()), (11, 0), "{error}");
    assert!(error.contains("more than 256 aliases"), "{error}");
    let (code, dns, _) = anonymous_search(pair.lmdir_port, &many, "sub", &["-a", "never"]);
    assert_eq!((code, dns.len()), (0, 258));
}
