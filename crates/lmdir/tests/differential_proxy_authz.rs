//! Proxied authorization (RFC 4370) by an ordinary bound user, against slapd: the authzId
//! `dn:` (the empty DN) is the anonymous identity (RFC 4370 §3) and the operation then runs
//! with anonymous rights, as slapd 2.5 runs it, for a user with an `authzTo` rule and for one
//! without; `dn:` followed by spaces only, and an empty `u:`, name nobody (123 on both);
//! anonymous clients may not proxy at all. Both servers run `authz-policy to` and the same
//! access rules: `ou=Secret` is readable by bound users only.
//!
//! The differential suite (differential.rs) covers the rootdn's proxied searches; this file
//! the bound user's, whose rights the anonymous identity lowers.

use crate::conformance;

use std::process::Command;

use conformance::{answer, normalize_dn, Answer, Extra, Pair, Setup, SUFFIX};

const PROXY: &str = "uid=proxy,ou=People,dc=example,dc=com";
const PROXY_PASSWORD: &str = "proxypw";
/// A user with no `authzTo` rule.
const PLAIN: &str = "uid=plain,ou=People,dc=example,dc=com";
const PLAIN_PASSWORD: &str = "plainpw";
const SECRET: &str = "ou=Secret,dc=example,dc=com";

const SLAPD_RULES: &str = "\
access to attrs=userPassword by self write by anonymous auth by * none
access to dn.subtree=\"ou=Secret,dc=example,dc=com\" by users read by * none
access to * by * read
";

/// `SLAPD_RULES` as lmdir's `[[access]]`.
const LMDIR_RULES: &str = "\
[[access]]
to = { attrs = [\"userPassword\"] }
by = [ { who = \"self\", access = \"write\" }, { who = \"anonymous\", access = \"auth\" }, { who = \"*\", access = \"none\" } ]
[[access]]
to = { subtree = \"ou=Secret,dc=example,dc=com\" }
by = [ { who = \"users\", access = \"read\" }, { who = \"*\", access = \"none\" } ]
[[access]]
to = {}
by = [ { who = \"*\", access = \"read\" } ]
";

fn dataset() -> String {
    format!(
        "dn: {SUFFIX}\nobjectClass: domain\ndc: example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: {PROXY}\nobjectClass: inetOrgPerson\nuid: proxy\ncn: Proxy\nsn: Proxy\n\
         userPassword: {PROXY_PASSWORD}\nauthzTo: dn.subtree:ou=People,{SUFFIX}\n\n\
         dn: {PLAIN}\nobjectClass: inetOrgPerson\nuid: plain\ncn: Plain\nsn: Plain\n\
         userPassword: {PLAIN_PASSWORD}\n\n\
         dn: {SECRET}\nobjectClass: organizationalUnit\nou: Secret\n\n\
         dn: cn=hidden,{SECRET}\nobjectClass: organizationalRole\ncn: hidden\n\n"
    )
}

/// The authzIds asked for: the anonymous forms, forms naming nobody, and a user under the
/// proxy's rule (a leading space before the DN is allowed by both).
const AUTHZ_IDS: &[&str] = &[
    "dn:",
    "DN:",
    "",
    "dn: ",
    "dn:  ",
    "u:",
    "dn:uid=plain,ou=People,dc=example,dc=com",
    "dn: uid=plain,ou=People,dc=example,dc=com",
];

/// Bind arguments for each client: (name, arguments after `-x -H URL`).
fn clients() -> [(&'static str, Vec<&'static str>); 3] {
    [
        ("proxy", vec!["-D", PROXY, "-w", PROXY_PASSWORD]),
        ("plain", vec!["-D", PLAIN, "-w", PLAIN_PASSWORD]),
        ("anonymous", Vec::new()),
    ]
}

/// A subtree search of the suffix (DNs only) with the critical control for `authz_id`.
fn search_as(port: u16, bind: &[&str], authz_id: &str) -> Answer {
    let control = format!("!authzid={authz_id}");
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no"])
        .args(["-H", &format!("ldap://127.0.0.1:{port}")])
        .args(bind)
        .args([
            "-e",
            &control,
            "-b",
            SUFFIX,
            "-s",
            "sub",
            "(objectClass=*)",
            "1.1",
        ])
        .output()
        .expect("ldapsearch runs");
    answer(output)
}

/// Who Am I with the critical control for `authz_id`: the exit code and the identity
/// (normalized: slapd names the normalized DN, lmdir the DN as given).
fn whoami_as(port: u16, bind: &[&str], authz_id: &str) -> (i32, String) {
    let control = format!("!authzid={authz_id}");
    let output = Command::new("ldapwhoami")
        .args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(bind)
        .args(["-e", &control])
        .output()
        .expect("ldapwhoami runs");
    let said = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let identity = match said.strip_prefix("dn:") {
        Some(dn) => format!("dn:{}", normalize_dn(dn)),
        None => said,
    };
    (output.status.code().unwrap_or(-1), identity)
}

fn start() -> Pair {
    Pair::start_configured(
        &dataset(),
        Setup::Access(SLAPD_RULES),
        &Extra {
            slapd_global: "authz-policy to\n",
            lmdir_server: "authz_policy = \"to\"\n",
            lmdir_database: LMDIR_RULES,
            ..Extra::default()
        },
    )
}

#[test]
fn proxied_authz_ids_answer_as_on_slapd() {
    if !conformance::tools_ready("the proxied authorization differential") {
        return;
    }
    let pair = start();
    let mut differences = Vec::new();
    for (client, bind) in clients() {
        for authz_id in AUTHZ_IDS {
            let slapd = search_as(pair.openldap_port, &bind, authz_id);
            let lmdir = search_as(pair.lmdir_port, &bind, authz_id);
            if slapd != lmdir {
                differences.push(format!(
                    "search as {client} with {authz_id:?}:\nslapd {slapd:?}\nlmdir {lmdir:?}"
                ));
            }
            let slapd = whoami_as(pair.openldap_port, &bind, authz_id);
            let lmdir = whoami_as(pair.lmdir_port, &bind, authz_id);
            if slapd != lmdir {
                differences.push(format!(
                    "whoami as {client} with {authz_id:?}: slapd {slapd:?}, lmdir {lmdir:?}"
                ));
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// RFC 4370 §3: `dn:` is the anonymous identity, so a bound user who reads `ou=Secret` does
/// not read it through the control, on either server (the search still runs: 0, not 123).
#[test]
fn the_empty_dn_authz_id_reads_with_anonymous_rights_on_both() {
    if !conformance::tools_ready("the proxied authorization differential") {
        return;
    }
    let pair = start();
    let secret = normalize_dn(SECRET);
    let holds_secret = |answer: &Answer| {
        answer
            .entries
            .iter()
            .any(|entry| entry.to_lowercase().contains(&secret))
    };
    let (_, bind) = &clients()[1];
    for (server, port) in pair.ports() {
        let own = search_as(port, bind, &format!("dn:{PLAIN}"));
        assert_eq!(own.code, 0, "{server}: {own:?}");
        assert!(holds_secret(&own), "{server}: a user reads ou=Secret");
        let anonymous = search_as(port, bind, "dn:");
        assert_eq!(anonymous.code, 0, "{server}: {anonymous:?}");
        assert!(!anonymous.entries.is_empty(), "{server}: {anonymous:?}");
        assert!(
            !holds_secret(&anonymous),
            "{server}: ou=Secret read through dn: {anonymous:?}"
        );
        assert_eq!(whoami_as(port, bind, "dn:"), (0, "anonymous".to_string()));
    }
}
