//! Adds and renames below an alias or a subentry, against slapd (back-mdb's add.c and
//! modrdn.c): an add below an alias is aliasProblem (33) "parent is an alias", below a
//! subentry objectClassViolation (65) "parent is a subentry"; a rename whose new superior is
//! an alias is 33 "new superior is an alias", one whose new superior is a subentry succeeds,
//! as does one whose new superior is the alias it is already below. The same codes, texts and
//! matched DNs for the rootdn (with and without ManageDsaIT), for a user who may write there,
//! and for one who may only read. Entries already below an alias or a subentry load
//! (slapadd and `lmdir load` check no parent's class). A parent the user may not know of is
//! lmdir's deliberate difference: slapd names its class, lmdir answers as for a missing one.

use crate::conformance;

use std::io::Write;
use std::process::{Command, Stdio};

use conformance::{normalize_dn, Extra, Pair, Setup, ROOT_DN, ROOT_PASSWORD, SUFFIX};

const WRITER: &str = "uid=w,dc=example,dc=com";
const WRITER_PASSWORD: &str = "writerpw";
/// A user who may only read.
const READER: &str = "uid=r,dc=example,dc=com";

/// The writer may write everywhere except the two hidden parents, where it may only add
/// children: it may not know of them. Everyone else reads.
const SLAPD_RULES: &str = "\
access to attrs=userPassword by self write by anonymous auth by * none
access to dn.base=\"cn=Hidden Alias,dc=example,dc=com\" attrs=children
  by dn.exact=\"uid=w,dc=example,dc=com\" write by * none
access to dn.base=\"cn=Hidden Policy,dc=example,dc=com\" attrs=children
  by dn.exact=\"uid=w,dc=example,dc=com\" write by * none
access to dn.base=\"cn=Hidden Alias,dc=example,dc=com\" by * none
access to dn.base=\"cn=Hidden Policy,dc=example,dc=com\" by * none
access to * by dn.exact=\"uid=w,dc=example,dc=com\" write by * read
";

/// `SLAPD_RULES` as lmdir's `[[access]]`.
fn lmdir_rules() -> String {
    let writer = format!("{{ who = \"dn={WRITER}\", access = \"write\" }}");
    let mut rules = "[[access]]\nto = { attrs = [\"userPassword\"] }\n\
        by = [ { who = \"self\", access = \"write\" }, { who = \"anonymous\", access = \"auth\" }, \
        { who = \"*\", access = \"none\" } ]\n"
        .to_string();
    for hidden in ["cn=Hidden Alias", "cn=Hidden Policy"] {
        rules += &format!(
            "[[access]]\nto = {{ dn = \"{hidden},{SUFFIX}\", attrs = [\"children\"] }}\n\
             by = [ {writer}, {{ who = \"*\", access = \"none\" }} ]\n"
        );
    }
    for hidden in ["cn=Hidden Alias", "cn=Hidden Policy"] {
        rules += &format!(
            "[[access]]\nto = {{ dn = \"{hidden},{SUFFIX}\" }}\n\
             by = [ {{ who = \"*\", access = \"none\" }} ]\n"
        );
    }
    rules += &format!(
        "[[access]]\nto = {{}}\nby = [ {writer}, {{ who = \"*\", access = \"read\" }} ]\n"
    );
    rules
}

fn alias(cn: &str) -> String {
    format!(
        "dn: cn={cn},{SUFFIX}\nobjectClass: alias\nobjectClass: extensibleObject\ncn: {cn}\n\
         aliasedObjectName: ou=People,{SUFFIX}\n\n"
    )
}

fn subentry(cn: &str) -> String {
    format!(
        "dn: cn={cn},{SUFFIX}\nobjectClass: top\nobjectClass: subentry\ncn: {cn}\n\
         subtreeSpecification: {{}}\n\n"
    )
}

fn role(dn: &str) -> String {
    let cn = dn.split(',').next().unwrap().trim_start_matches("cn=");
    format!("dn: {dn}\nobjectClass: organizationalRole\ncn: {cn}\n\n")
}

/// Entries below an alias and below a subentry included: both loaders take them.
fn dataset() -> String {
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n\
         o: Example\n\n\
         dn: {WRITER}\nobjectClass: inetOrgPerson\nuid: w\ncn: w\nsn: w\n\
         userPassword: {WRITER_PASSWORD}\n\n\
         dn: {READER}\nobjectClass: inetOrgPerson\nuid: r\ncn: r\nsn: r\n\
         userPassword: {WRITER_PASSWORD}\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n"
    );
    ldif += &alias("Alias");
    ldif += &alias("Hidden Alias");
    ldif += &subentry("Policy");
    ldif += &subentry("Hidden Policy");
    for dn in [
        "cn=Loaded,cn=Alias",
        "cn=Loaded,cn=Policy",
        "cn=m",
        "cn=n",
        "cn=o",
    ] {
        ldif += &role(&format!("{dn},{SUFFIX}"));
    }
    ldif
}

/// Who sends a change.
#[derive(Clone, Copy, Debug)]
enum As {
    Root,
    /// The rootdn with ManageDsaIT (critical): slapd changes nothing for it here.
    RootManaging,
    Writer,
    Reader,
}

/// An LDAP result as ldapmodify reports it: code, additional info, matched DN.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    code: i32,
    text: String,
    matched_dn: Option<String>,
}

fn change(port: u16, who: As, ldif: &str) -> Outcome {
    let mut command = Command::new("ldapmodify");
    command.args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")]);
    match who {
        As::Root => command.args(["-D", ROOT_DN, "-w", ROOT_PASSWORD]),
        As::RootManaging => command.args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-M", "-M"]),
        As::Writer => command.args(["-D", WRITER, "-w", WRITER_PASSWORD]),
        As::Reader => command.args(["-D", READER, "-w", WRITER_PASSWORD]),
    };
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ldapmodify");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(ldif.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let field = |name: &str| {
        stderr
            .lines()
            .find_map(|line| line.trim().strip_prefix(name))
            .map(|value| value.trim().to_string())
    };
    Outcome {
        code: output.status.code().unwrap_or(-1),
        text: field("additional info:").unwrap_or_default(),
        matched_dn: field("matched DN:").map(|dn| normalize_dn(&dn)),
    }
}

fn add_below(parent: &str, cn: &str) -> String {
    format!("dn: cn={cn},{parent},{SUFFIX}\nchangetype: add\nobjectClass: organizationalRole\ncn: {cn}\n")
}

/// A rename of `dn` (below the suffix) to `new_rdn`, below `new_superior` if given.
fn rename(dn: &str, new_rdn: &str, new_superior: Option<&str>) -> String {
    let mut ldif =
        format!("dn: {dn},{SUFFIX}\nchangetype: modrdn\nnewrdn: {new_rdn}\ndeleteoldrdn: 1\n");
    if let Some(superior) = new_superior {
        ldif += &format!("newsuperior: {superior},{SUFFIX}\n");
    }
    ldif
}

/// The changes in order (each sent to both servers, which stay alike), with slapd's code.
fn cases() -> Vec<(As, String, i32)> {
    let mut cases = Vec::new();
    for who in [As::Root, As::RootManaging, As::Writer] {
        cases.extend([
            (who, add_below("cn=Alias", "x"), 33),
            (who, add_below("cn=Policy", "x"), 65),
            (who, rename("cn=m", "cn=m", Some("cn=Alias")), 33),
        ]);
    }
    cases.extend([
        // No write access decides before the parent's class.
        (As::Reader, add_below("cn=Alias", "x"), 50),
        (As::Reader, add_below("cn=Policy", "x"), 50),
        (As::Reader, rename("cn=m", "cn=m", Some("cn=Alias")), 50),
        // Below an ordinary entry that is itself below an alias or a subentry.
        (As::Writer, add_below("cn=Loaded,cn=Alias", "x"), 0),
        (As::Root, add_below("cn=Loaded,cn=Policy", "x"), 0),
        // Renamed in place below an alias, and "moved" to the alias it is below: slapd
        // ignores a new superior that is the present parent.
        (As::Root, rename("cn=x,cn=Loaded,cn=Alias", "cn=y", None), 0),
        (
            As::Root,
            rename("cn=Loaded,cn=Alias", "cn=Renamed", None),
            0,
        ),
        (
            As::Writer,
            rename("cn=Renamed,cn=Alias", "cn=Loaded", Some("cn=Alias")),
            0,
        ),
        // A subentry as new superior is not refused; an ordinary one is fine.
        (As::Root, rename("cn=m", "cn=m", Some("cn=Policy")), 0),
        (As::Writer, rename("cn=n", "cn=n", Some("cn=Policy")), 0),
        (As::Writer, rename("cn=o", "cn=o", Some("ou=People")), 0),
        (As::Writer, add_below("ou=People", "x"), 0),
    ]);
    cases
}

#[test]
fn adds_and_renames_below_aliases_and_subentries_answer_as_on_slapd() {
    if !conformance::tools_ready("the parents differential") {
        return;
    }
    let rules = lmdir_rules();
    let pair = Pair::start_configured(
        &dataset(),
        Setup::Access(SLAPD_RULES),
        &Extra {
            lmdir_database: &rules,
            ..Extra::default()
        },
    );
    let mut differences = Vec::new();
    for (who, ldif, expected) in cases() {
        let slapd = change(pair.openldap_port, who, &ldif);
        let lmdir = change(pair.lmdir_port, who, &ldif);
        assert_eq!(slapd.code, expected, "slapd, as {who:?}:\n{ldif}{slapd:?}");
        // Texts are compared where back-mdb's own refusal is the answer.
        let same = match slapd.code {
            33 | 65 => slapd == lmdir,
            _ => (slapd.code, &slapd.matched_dn) == (lmdir.code, &lmdir.matched_dn),
        };
        if !same {
            differences.push(format!(
                "as {who:?}:\n{ldif}slapd {slapd:?}\nlmdir {lmdir:?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// A parent the writer may add children to but may not know of: slapd names its class
/// (33, 65), which tells its existence and kind; lmdir answers exactly as for a missing
/// parent (noSuchObject, the suffix as matched DN), for an add and for a new superior.
#[test]
fn a_hidden_parent_answers_as_a_missing_one() {
    if !conformance::tools_ready("the hidden parents test") {
        return;
    }
    let rules = lmdir_rules();
    let pair = Pair::start_configured(
        &dataset(),
        Setup::Access(SLAPD_RULES),
        &Extra {
            lmdir_database: &rules,
            ..Extra::default()
        },
    );
    let hidden = [("cn=Hidden Alias", 33), ("cn=Hidden Policy", 65)];
    for (parent, slapd_code) in hidden {
        let lower = parent.to_lowercase();
        let slapd = change(pair.openldap_port, As::Writer, &add_below(parent, "x"));
        assert_eq!(slapd.code, slapd_code, "slapd reveals {parent}: {slapd:?}");
        let mut missing = change(pair.lmdir_port, As::Writer, &add_below("cn=Missing", "x"));
        missing.text = missing.text.to_lowercase();
        let answer = change(pair.lmdir_port, As::Writer, &add_below(parent, "x"));
        assert_eq!(missing.code, 32, "{missing:?}");
        assert_eq!(missing.matched_dn.as_deref(), Some(SUFFIX));
        assert_eq!(
            Outcome {
                text: answer.text.to_lowercase().replace(&lower, "cn=missing"),
                ..answer
            },
            missing,
            "add below {parent}"
        );
        let mut missing = change(
            pair.lmdir_port,
            As::Writer,
            &rename("cn=m", "cn=m", Some("cn=Missing")),
        );
        missing.text = missing.text.to_lowercase();
        let answer = change(
            pair.lmdir_port,
            As::Writer,
            &rename("cn=m", "cn=m", Some(parent)),
        );
        assert_eq!(missing.code, 32, "{missing:?}");
        assert_eq!(
            Outcome {
                text: answer.text.to_lowercase().replace(&lower, "cn=missing"),
                ..answer
            },
            missing,
            "move below {parent}"
        );
    }
}
