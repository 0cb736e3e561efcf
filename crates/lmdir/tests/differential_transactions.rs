//! LDAP transactions (RFC 5805) against slapd 2.5, whose back-mdb has them: the same LDIF sent
//! with `ldapmodify -E txn=commit` (and `txn=abort`) gives the same exit code and leaves the same
//! entries on both servers — every change of a transaction, or none.

use crate::conformance;

use conformance::{search, Pair, SUFFIX};

fn dataset() -> String {
    format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: uid=p1,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p1\ncn: P One\nsn: One\n\
         description: a\n\n\
         dn: uid=p2,ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p2\ncn: P Two\nsn: Two\n\n"
    )
}

/// `ldapmodify -E <transaction>` of `ldif` as the rootdn: its exit code (the LDAP result).
fn ldapmodify_in_transaction(port: u16, transaction: &str, ldif: &str) -> i32 {
    conformance::ldap_change_code(port, "ldapmodify", &["-E", transaction], ldif)
}

fn people(port: u16) -> Vec<String> {
    let answer = search(
        port,
        &format!("ou=People,{SUFFIX}"),
        "one",
        "(objectClass=*)",
        &["description"],
        &[],
    );
    let mut entries: Vec<String> = answer.entries.into_iter().collect();
    entries.sort();
    entries
}

/// Each case: the transaction flag, the LDIF, and whether it should change anything.
fn cases() -> Vec<(&'static str, String, bool)> {
    let add = |uid: &str| {
        format!("dn: uid={uid},ou=People,{SUFFIX}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n\n")
    };
    let describe = |uid: &str, value: &str| {
        format!("dn: uid={uid},ou=People,{SUFFIX}\nchangetype: modify\nadd: description\ndescription: {value}\n\n")
    };
    let delete = |uid: &str| format!("dn: uid={uid},ou=People,{SUFFIX}\nchangetype: delete\n\n");
    vec![
        // Three kinds of update, all committed together.
        (
            "txn=commit",
            format!("{}{}{}", add("t1"), describe("p1", "b"), delete("p2")),
            true,
        ),
        // The third update fails (t1 exists): the first two must not be applied either.
        (
            "txn=commit",
            format!("{}{}{}", describe("p1", "c"), add("t2"), add("t1")),
            false,
        ),
        // A value that already exists fails the second update: nothing applied.
        (
            "txn=commit",
            format!("{}{}", add("t3"), describe("p1", "b")),
            false,
        ),
        // Aborted: nothing applied.
        (
            "txn=abort",
            format!("{}{}", add("t4"), describe("p1", "d")),
            false,
        ),
        // A later update sees the earlier ones of its own transaction.
        (
            "txn=commit",
            format!("{}{}", add("t5"), describe("t5", "new")),
            true,
        ),
        // An entry deleted earlier in the transaction may be added again...
        (
            "txn=commit",
            format!("{}{}{}", delete("t5"), delete("t1"), add("t5")),
            true,
        ),
        // ... and is gone for the updates after its delete: the modify fails, the delete is
        // undone.
        (
            "txn=commit",
            format!("{}{}", delete("p1"), describe("p1", "e")),
            false,
        ),
    ]
}

/// slapd and lmdir serving `dataset()`; None (outside CI only) when slapd or ldap-utils is
/// missing: under `CI=true` a missing dependency fails the test.
fn started_pair() -> Option<Pair> {
    if !conformance::tools_ready("the transaction differential") {
        return None;
    }
    Some(Pair::start(&dataset()))
}

/// How often one case may crash the reference slapd before the test gives up on it.
const SLAPD_CRASHES_PER_CASE_MAX: usize = 5;

/// `ldapmodify` of one transaction against the reference: (code, entries before, after). slapd
/// 2.5 sometimes crashes (SIGSEGV) at End Transaction: ldapmodify sends the End while slapd is
/// still queuing the last update of the transaction on another thread (its stats log shows the
/// update without a result, then TXN END, then nothing; about one run in five of this test on
/// 2 cores). A crash commits nothing (one LMDB txn), so the case runs again on the restarted
/// slapd; lmdir never gets a second try.
fn on_reference(pair: &mut Pair, transaction: &str, ldif: &str) -> CaseRun {
    for _ in 0..=SLAPD_CRASHES_PER_CASE_MAX {
        let run = run_case(pair.openldap_port, transaction, ldif);
        if !pair.restart_slapd_if_exited() {
            return run;
        }
    }
    panic!("slapd crashed {SLAPD_CRASHES_PER_CASE_MAX} times on {transaction}\n{ldif}");
}

/// One case's run on one server: the exit code, the entries before and after.
type CaseRun = (i32, Vec<String>, Vec<String>);

fn run_case(port: u16, transaction: &str, ldif: &str) -> CaseRun {
    let before = people(port);
    let code = ldapmodify_in_transaction(port, transaction, ldif);
    (code, before, people(port))
}

#[test]
fn transactions_commit_all_or_nothing_as_slapd() {
    let Some(mut pair) = started_pair() else {
        return;
    };
    let mut differences = Vec::new();
    for (transaction, ldif, changes) in cases() {
        let mut answers = Vec::new();
        for port in [pair.openldap_port, pair.lmdir_port] {
            let (code, before, after) = if port == pair.openldap_port {
                on_reference(&mut pair, transaction, &ldif)
            } else {
                run_case(port, transaction, &ldif)
            };
            answers.push((code, after.clone()));
            // Not vacuous: a transaction that must change something did, one that must not
            // left every entry as it was.
            assert_eq!(
                before != after,
                changes,
                "port {port} {transaction} code {code}\n{ldif}\nbefore {before:?}\nafter {after:?}"
            );
        }
        if answers[0] != answers[1] {
            differences.push(format!(
                "{transaction}\n{ldif}\n  OpenLDAP: {:?}\n  lmdir:    {:?}",
                answers[0], answers[1]
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// What `on_reference` relies on: a reference slapd that died is started again on the same
/// port and data, and a running one is left alone.
#[test]
fn a_reference_slapd_that_died_is_started_again_on_its_data() {
    let Some(mut pair) = started_pair() else {
        return;
    };
    let entries = people(pair.openldap_port);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert!(
        !pair.restart_slapd_if_exited(),
        "a running slapd is not restarted"
    );
    pair.kill_slapd();
    assert!(pair.restart_slapd_if_exited());
    assert_eq!(people(pair.openldap_port), entries);
}

/// `ldapexop` of Start Transaction without a bind: slapd answers strongerAuthRequired (8), and
/// so does lmdir (queued updates hold server memory; anonymous clients hold none).
#[test]
fn anonymous_start_transaction_answers_as_slapd() {
    let Some(pair) = started_pair() else {
        return;
    };
    for port in [pair.openldap_port, pair.lmdir_port] {
        let output = std::process::Command::new("ldapexop")
            .args([
                "-x",
                "-H",
                &format!("ldap://127.0.0.1:{port}"),
                "1.3.6.1.1.21.1",
            ])
            .output()
            .expect("ldapexop runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("(8)"),
            "port {port} (slapd {}): {stderr}",
            pair.openldap_port
        );
    }
}
