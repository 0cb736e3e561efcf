//! `[[integrity.unique]]` in `lmdir load`: every duplicate value within a rule's subtree is
//! reported with each holder's record, line and DN, and nothing is loaded; values outside the
//! subtree and values that differ are not duplicates. Both paths: a fresh load (indexed and
//! unindexed attributes) and a load into an existing directory.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lmdir_load::{load, LoadError, LoadOptions, UniqueScope};
use lmdir_schema::Schema;
use lmdir_store::{IndexKind, Store, StoreOptions};

const SUFFIX: &str = "dc=example,dc=com";

fn options(directory: &Path) -> LoadOptions {
    let mut indexes = BTreeMap::new();
    indexes.insert("objectClass".to_string(), vec![IndexKind::Equality]);
    indexes.insert("uid".to_string(), vec![IndexKind::Equality]);
    indexes.insert("mail".to_string(), vec![IndexKind::Equality]);
    let store = StoreOptions {
        suffix: SUFFIX.to_string(),
        indexes,
        sync: false,
        ..StoreOptions::default()
    };
    let mut options = LoadOptions::new(directory.to_path_buf(), store, Arc::new(Schema::builtin()));
    options.threads = 2;
    options.unique = vec![UniqueScope {
        base: format!("ou=People,{SUFFIX}"),
        // employeeNumber has no index: every entry is read for it.
        attributes: vec!["uid".into(), "mail".into(), "employeeNumber".into()],
    }];
    options
}

fn person(uid: &str, parent: &str, extra: &str) -> String {
    format!(
        "dn: cn={uid},{parent}\nobjectClass: inetOrgPerson\ncn: {uid}\nsn: S\nuid: {uid}\n{extra}\n"
    )
}

fn top() -> String {
    format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: E\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: ou=Other,{SUFFIX}\nobjectClass: organizationalUnit\nou: Other\n\n"
    )
}

/// The line where `dn` starts in `ldif` (1-based).
fn line_of(ldif: &str, dn: &str) -> usize {
    ldif.lines()
        .position(|line| line == format!("dn: {dn}"))
        .expect("dn in the LDIF")
        + 1
}

fn failure(result: Result<lmdir_load::LoadSummary, LoadError>) -> String {
    match result {
        Err(LoadError::Invalid(message)) => message,
        other => panic!("expected the load to fail on duplicates: {other:?}"),
    }
}

#[test]
fn a_fresh_load_reports_every_duplicate_and_installs_nothing() {
    let people = format!("ou=People,{SUFFIX}");
    let other = format!("ou=Other,{SUFFIX}");
    let mut ldif = top();
    ldif += &person("ann", &people, "mail: ann@example.com\nemployeeNumber: 7\n");
    ldif += &person("bob", &people, "mail: ANN@example.com\nemployeeNumber: 8\n");
    ldif += &person("cat", &people, "uid: ann\nemployeeNumber: 7\n");
    ldif += &person("dan", &people, "mail: dan@example.com\n");
    // Outside the rule's subtree: not a duplicate.
    ldif += &person(
        "eve",
        &other,
        "uid: dan\nmail: dan@example.com\nemployeeNumber: 8\n",
    );
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("data.ldif");
    std::fs::write(&file, &ldif).unwrap();
    let directory = scratch.path().join("db");
    let message = failure(load(&options(&directory), &file));
    assert!(message.starts_with("3 values are not unique"), "{message}");
    let line = |cn: &str| line_of(&ldif, &format!("cn={cn},{people}"));
    for (attribute, first, second) in [
        ("uid: \"ann\"", "ann", "cat"),
        ("mail: \"ann@example.com\"", "ann", "bob"),
        ("employeeNumber: \"7\"", "ann", "cat"),
    ] {
        let report = message
            .lines()
            .find(|report| report.starts_with(attribute))
            .unwrap_or_else(|| panic!("{attribute} in {message}"));
        for cn in [first, second] {
            assert!(
                report.contains(&format!("(line {}, cn={cn},{people})", line(cn))),
                "{report}"
            );
        }
    }
    assert!(!message.contains("eve"), "{message}");
    assert!(!directory.join("data.mdb").exists());
}

#[test]
fn a_load_into_a_directory_reports_what_it_would_duplicate() {
    let people = format!("ou=People,{SUFFIX}");
    let scratch = tempfile::tempdir().unwrap();
    let directory = scratch.path().join("db");
    let first = scratch.path().join("first.ldif");
    std::fs::write(
        &first,
        top() + &person("ann", &people, "mail: ann@example.com\n"),
    )
    .unwrap();
    load(&options(&directory), &first).expect("no duplicates");
    let second = scratch.path().join("second.ldif");
    let more = person("bob", &people, "mail: Ann@Example.com\n")
        + &person("cat", &people, "mail: cat@example.com\n");
    std::fs::write(&second, &more).unwrap();
    let message = failure(load(&options(&directory), &second));
    assert!(message.starts_with("1 values are not unique"), "{message}");
    assert!(
        message.contains(&format!(
            "line 1 (cn=bob,{people}) is held by cn=ann,{people}"
        )),
        "{message}"
    );
    // Nothing of the second file was written.
    let options = options(&directory);
    let store = Store::open_read_only(&directory, options.store, options.schema).unwrap();
    let read = store.read().unwrap();
    assert!(read.dn_to_id(&format!("cn=cat,{people}")).is_err());
}
