//! String preparation against slapd: pairs of strings that RFC 4518 and slapd 2.5 treat
//! differently (full versus simple case folding, map-to-nothing, which characters are spaces)
//! are added, searched and used in DNs on both servers; the result codes and the match sets
//! must be the same. A normalizer that merges two values slapd keeps apart loses data (a load
//! or a replicated entry keeps one of them), so this is a drop-in fidelity test.

use crate::conformance;

use base64::Engine;
use conformance::{search, Answer, Pair, SUFFIX};

/// (a, b): each is added, searched for and named in a DN against the other.
const PAIRS: &[(&str, &str)] = &[
    ("Groß", "Gross"),
    ("Groß", "GROSS"),
    ("ς", "σ"),
    ("Σ", "σ"),
    ("ΣΊΣΥΦΟΣ", "σίσυφος"),
    ("ΣΊΣΥΦΟΣ", "σίσυφοσ"),
    ("İ", "i"),
    ("İ", "i\u{307}"),
    ("\u{3392}", "MHz"),
    ("\u{3392}", "mhz"),
    ("a\tb", "a b"),
    ("a\nb", "a b"),
    ("a\u{1}b", "ab"),
    ("so\u{AD}ft", "soft"),
    ("a\u{200B}b", "ab"),
    ("a\u{A0}b", "a b"),
    ("a\u{3000}b", "a b"),
    ("  a  b  ", "a b"),
    ("a ", "ab"),
    ("\u{FB01}le", "file"),
    ("\u{FB01}le", "FILE"),
    ("\u{212A}", "k"),
    ("\u{212A}", "K"),
    ("\u{212B}", "Å"),
    ("\u{212B}", "å"),
    ("e\u{301}", "é"),
    ("E\u{301}", "é"),
    ("Ａ", "a"),
    ("Ά", "ά"),
    ("ı", "I"),
    ("ı", "i"),
    ("Ǆ", "ǆ"),
    ("ǅ", "ǆ"),
    ("Ａ", "ａ"),
    ("Straße", "STRASSE"),
    ("KRAKÓW", "kraków"),
    ("µ", "μ"),
];

/// Pairs whose characters slapd's older Unicode tables do not know (docs/compatibility.md):
/// printed, not asserted.
const NEWER_UNICODE: &[(&str, &str)] = &[
    ("Ꭰ", "ꭰ"),               // Cherokee: lowercase added in Unicode 8
    ("\u{10D0}", "\u{1C90}"), // Georgian Mkhedruli / Mtavruli: Unicode 11
    ("Ⴀ", "ⴀ"),               // Georgian Asomtavruli / Nuskhuri: a case pair since Unicode 4.1
];

/// telephoneNumber: its own preparation on top of the caseIgnore one.
const PHONE_PAIRS: &[(&str, &str)] = &[
    ("+1 555 0100", "+15550100"),
    ("+1-555-0100", "+15550100"),
    ("１２３", "123"),
    ("12\u{A0}3", "123"),
    ("12\u{AD}3", "123"),
    ("+1 555 CALL", "+1 555 call"),
    ("+1 555\t0100", "+1 5550100"),
];

fn base64(value: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(value)
}

/// RFC 4515: every byte but ASCII letters and digits as `\XX`.
fn filter_escape(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (byte as char).to_string(),
            other => format!("\\{other:02x}"),
        })
        .collect()
}

fn dataset() -> String {
    format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n"
    )
}

/// What one server answered for one pair: every step's code, every search's match set.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    steps: Vec<(String, i32)>,
    searches: Vec<(String, Answer)>,
}

fn add(port: u16, ldif: &str) -> i32 {
    conformance::ldap_change_code(port, "ldapadd", &[], ldif)
}

/// An entry under ou=People named by ASCII `cn`, with `values` of `attribute` (base64).
fn entry(cn: &str, attribute: &str, values: &[&str]) -> String {
    let mut ldif =
        format!("dn: cn={cn},ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\ncn: {cn}\nsn: s\n");
    for value in values {
        ldif += &format!("{attribute}:: {}\n", base64(value));
    }
    ldif
}

fn find(port: u16, filter: &str) -> Answer {
    search(
        port,
        &format!("ou=People,{SUFFIX}"),
        "one",
        filter,
        &["1.1"],
        &[],
    )
}

/// Values of the `both` entries as each server keeps them.
fn read_back(port: u16, tag: &str, attributes: &[&str]) -> Answer {
    search(
        port,
        &format!("ou=People,{SUFFIX}"),
        "one",
        &format!("(cn={tag}*)"),
        attributes,
        &[],
    )
}

/// The directory string steps for pair `tag` on `port`: add one entry each, one holding both
/// (as description, caseIgnore, and labeledURI, caseExact), searches with each, DN siblings.
fn directory_string_outcome(port: u16, tag: &str, a: &str, b: &str) -> Outcome {
    let mut steps = Vec::new();
    for (name, attribute, values) in [
        ("a", "description", vec![a]),
        ("b", "description", vec![b]),
        ("ua", "labeledURI", vec![a]),
        ("ub", "labeledURI", vec![b]),
        ("both", "description", vec![a, b]),
        ("uboth", "labeledURI", vec![a, b]),
    ] {
        let code = add(port, &entry(&format!("{tag}{name}"), attribute, &values));
        steps.push((format!("add {name}"), code));
    }
    let mut searches = Vec::new();
    for (side, value) in [("a", a), ("b", b)] {
        let escaped = filter_escape(value);
        for (label, assertion) in [
            ("eq", format!("description={escaped}")),
            ("sub any", format!("description=*{escaped}*")),
            ("sub initial", format!("description={escaped}*")),
            ("sub final", format!("description=*{escaped}")),
            ("exact eq", format!("labeledURI={escaped}")),
            (
                "caseExactMatch",
                format!("description:caseExactMatch:={escaped}"),
            ),
            (
                "caseExactSubstrings",
                format!("description:caseExactSubstringsMatch:={escaped}"),
            ),
        ] {
            let filter = format!("(&(cn={tag}*)({assertion}))");
            searches.push((format!("{label} {side}"), find(port, &filter)));
        }
    }
    searches.push((
        "values kept".into(),
        read_back(port, tag, &["description", "labeledURI"]),
    ));
    steps.extend(dn_steps(port, tag, a, b));
    Outcome { steps, searches }
}

/// RFC 4514: every byte but ASCII letters and digits as `\XX`.
fn dn_escape(value: &str) -> String {
    filter_escape(value)
}

/// cn=<a> then its sibling cn=<b> in a container of their own: 0 then 68 when the DNs match.
fn dn_steps(port: u16, tag: &str, a: &str, b: &str) -> Vec<(String, i32)> {
    let container = format!("ou={tag}dn,ou=People,{SUFFIX}");
    let mut steps = vec![(
        "add container".to_string(),
        add(
            port,
            &format!("dn: {container}\nobjectClass: organizationalUnit\nou: {tag}dn\n"),
        ),
    )];
    for (side, value) in [("a", a), ("b", b)] {
        let dn = format!("cn={},{container}", dn_escape(value));
        let ldif = format!(
            "dn:: {}\nobjectClass: person\ncn:: {}\nsn: s\n",
            base64(&dn),
            base64(value)
        );
        steps.push((format!("add dn {side}"), add(port, &ldif)));
    }
    steps
}

/// telephoneNumber: one entry each, one with both, equality and substring searches.
fn phone_outcome(port: u16, tag: &str, a: &str, b: &str) -> Outcome {
    let mut steps = Vec::new();
    for (name, values) in [("a", vec![a]), ("b", vec![b]), ("both", vec![a, b])] {
        let code = add(
            port,
            &entry(&format!("{tag}{name}"), "telephoneNumber", &values),
        );
        steps.push((format!("add {name}"), code));
    }
    let mut searches = Vec::new();
    for (side, value) in [("a", a), ("b", b)] {
        let escaped = filter_escape(value);
        for (label, assertion) in [
            ("eq", format!("telephoneNumber={escaped}")),
            ("sub any", format!("telephoneNumber=*{escaped}*")),
        ] {
            let filter = format!("(&(cn={tag}*)({assertion}))");
            searches.push((format!("{label} {side}"), find(port, &filter)));
        }
    }
    Outcome { steps, searches }
}

/// The differences between the two servers' outcomes, one line each.
fn differences(openldap: &Outcome, lmdir: &Outcome) -> Vec<String> {
    let mut lines = Vec::new();
    for (ours, theirs) in openldap.steps.iter().zip(&lmdir.steps) {
        if ours != theirs {
            lines.push(format!(
                "{}: OpenLDAP {} lmdir {}",
                ours.0, ours.1, theirs.1
            ));
        }
    }
    for (ours, theirs) in openldap.searches.iter().zip(&lmdir.searches) {
        if ours.1 != theirs.1 {
            lines.push(format!(
                "{}:\n{}",
                ours.0,
                conformance::describe_difference(&ours.1, &theirs.1)
            ));
        }
    }
    lines
}

type Probe = fn(u16, &str, &str, &str) -> Outcome;

/// Runs `probe` on both servers for each pair; the pairs where they differ, described.
fn compare(pair: &Pair, prefix: &str, pairs: &[(&str, &str)], probe: Probe) -> Vec<String> {
    let mut report = Vec::new();
    for (index, (a, b)) in pairs.iter().enumerate() {
        let tag = format!("{prefix}{index}x");
        let openldap = probe(pair.openldap_port, &tag, a, b);
        let lmdir = probe(pair.lmdir_port, &tag, a, b);
        let lines = differences(&openldap, &lmdir);
        if !lines.is_empty() {
            report.push(format!("{a:?} / {b:?}:\n  {}", lines.join("\n  ")));
        }
    }
    report
}

#[test]
fn string_preparation_matches_slapd() {
    if !conformance::tools_ready("the string preparation differential") {
        return;
    }
    let pair = Pair::start(&dataset());
    let mut report = compare(&pair, "s", PAIRS, directory_string_outcome);
    report.extend(compare(&pair, "t", PHONE_PAIRS, phone_outcome));
    let newer = compare(&pair, "n", NEWER_UNICODE, directory_string_outcome);
    if !newer.is_empty() {
        eprintln!(
            "characters newer than slapd's Unicode tables (documented, not asserted):\n{}",
            newer.join("\n")
        );
    }
    // Not vacuous: slapd itself keeps ß and ss apart.
    let probe = directory_string_outcome(pair.openldap_port, "check", "Groß", "Gross");
    assert_eq!(probe.steps[4], ("add both".to_string(), 0), "{probe:?}");
    assert!(
        report.is_empty(),
        "{} pairs differ:\n{}",
        report.len(),
        report.join("\n")
    );
}
