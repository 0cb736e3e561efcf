//! Integration tests of the bulk loader against the store's own single-entry writes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lmdir_load::{load, reindex, LoadError, LoadOptions};
use lmdir_schema::{Dn, Entry, Filter, Schema};
use lmdir_store::{IndexKind, Store, StoreOptions, WriteContext};

const SUFFIX: &str = "dc=example,dc=com";
const ACTOR: &str = "cn=admin,dc=example,dc=com";

fn schema() -> Arc<Schema> {
    Arc::new(Schema::builtin())
}

fn index_config(with_sn_substring: bool) -> BTreeMap<String, Vec<IndexKind>> {
    use IndexKind::*;
    let mut indexes = BTreeMap::new();
    indexes.insert("objectClass".to_string(), vec![Equality]);
    indexes.insert("cn".to_string(), vec![Equality, Substring]);
    indexes.insert(
        "sn".to_string(),
        if with_sn_substring {
            vec![Equality, Substring]
        } else {
            vec![Equality]
        },
    );
    indexes.insert("uid".to_string(), vec![Equality, Substring]);
    indexes.insert("mail".to_string(), vec![Equality, Substring, Presence]);
    indexes.insert("telephoneNumber".to_string(), vec![Equality, Substring]);
    indexes.insert("description".to_string(), vec![Substring]);
    indexes.insert("uidNumber".to_string(), vec![Equality, Ordered]);
    indexes.insert("member".to_string(), vec![Equality]);
    indexes.insert("ou".to_string(), vec![Equality]);
    indexes
}

fn store_options(with_sn_substring: bool) -> StoreOptions {
    StoreOptions {
        suffix: SUFFIX.to_string(),
        indexes: index_config(with_sn_substring),
        sync: false,
        ..StoreOptions::default()
    }
}

fn options(directory: &Path, with_sn_substring: bool) -> LoadOptions {
    let mut options = LoadOptions::new(
        directory.to_path_buf(),
        store_options(with_sn_substring),
        schema(),
    );
    options.creators_name = ACTOR.to_string();
    options.threads = 2;
    options
}

const FIRST_NAMES: [&str; 8] = [
    "Anna", "Jürgen", "Zoë", "Kim", "Łukasz", "Maria", "O'Brien", "Søren",
];
const LAST_NAMES: [&str; 7] = [
    "Smith", "Kowalski", "Müller", "Nguyen", "García", "Kraków", "Lee",
];

/// A small deterministic directory: suffix, two OUs, `people` persons (some multi-valued,
/// UTF-8, base64), and groups of members.
fn directory_ldif(people: usize) -> String {
    let mut text = String::from("version: 1\n\n");
    text.push_str("dn: dc=example,dc=com\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n");
    text.push_str(
        "dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n",
    );
    text.push_str(
        "dn: ou=Groups,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Groups\n\n",
    );
    for index in 0..people {
        let first = FIRST_NAMES[index % FIRST_NAMES.len()];
        let last = LAST_NAMES[(index / 3) % LAST_NAMES.len()];
        writeln!(text, "dn: uid=u{index:07},ou=People,dc=example,dc=com").unwrap();
        text.push_str("objectClass: inetOrgPerson\nobjectClass: posixAccount\n");
        writeln!(
            text,
            "uid: u{index:07}\ncn: {first} {last} {index}\nsn: {last}\ngivenName: {first}"
        )
        .unwrap();
        writeln!(text, "mail: u{index:07}@example.com").unwrap();
        if index % 5 == 0 {
            writeln!(text, "mail: u{index:07}.alt@Example.ORG").unwrap();
        }
        writeln!(text, "telephoneNumber: +1 555 {:04}", index % 10_000).unwrap();
        writeln!(
            text,
            "description: person number {index} works on project {}",
            index % 37
        )
        .unwrap();
        writeln!(
            text,
            "uidNumber: {}\ngidNumber: {}\nhomeDirectory: /home/u{index:07}",
            10_000 + index,
            100 + index % 10
        )
        .unwrap();
        if index % 7 == 0 {
            // " leading space" must be base64 in LDIF.
            text.push_str("title:: IGxlYWRpbmcgc3BhY2U=\n");
        }
        text.push('\n');
    }
    for group in 0..people.div_ceil(100) {
        writeln!(text, "dn: cn=group{group},ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: group{group}").unwrap();
        for member in (group * 100..people).step_by(3).take(60) {
            writeln!(text, "member: uid=u{member:07},ou=People,dc=example,dc=com").unwrap();
        }
        text.push('\n');
    }
    text
}

/// One group naming every person of `directory_ldif(people)` (member lives out of line
/// always) with `descriptions` values of `description` (out of line past the threshold).
fn big_group_ldif(people: usize, descriptions: usize) -> String {
    let mut text = String::from(
        "dn: cn=everyone,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: everyone\n",
    );
    for index in (0..people).rev() {
        writeln!(text, "member: uid=U{index:07},ou=People,dc=example,dc=com").unwrap();
    }
    for index in 0..descriptions {
        writeln!(text, "description: Topic {index}").unwrap();
    }
    text.push('\n');
    text
}

fn write_file(directory: &Path, name: &str, text: &str) -> PathBuf {
    let path = directory.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The export without the per-write values (UUIDs, CSNs, timestamps differ between runs).
fn stable_export(store: &Store) -> String {
    let mut bytes = Vec::new();
    store.export(&mut bytes).unwrap();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .filter(|line| {
            ![
                "entryUUID:",
                "entryCSN:",
                "createTimestamp:",
                "modifyTimestamp:",
            ]
            .iter()
            .any(|prefix| line.starts_with(prefix))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every DB's digest, the per-run values (UUIDs, CSNs, timestamps) left out.
fn digests(store: &Store) -> Vec<lmdir_store::DatabaseDigest> {
    store
        .database_digests(&[
            "entryUUID",
            "entryCSN",
            "createTimestamp",
            "modifyTimestamp",
        ])
        .unwrap()
}

fn open(directory: &Path, with_sn_substring: bool) -> Store {
    Store::open(directory, store_options(with_sn_substring), schema()).unwrap()
}

fn assert_clean(store: &Store) {
    let report = store.check().unwrap();
    assert!(
        report.is_clean(),
        "check found problems: {:?}",
        report.problems
    );
}

/// The reference: the same LDIF through the store's single-entry `add`.
fn build_with_adds(directory: &Path, ldif: &str, with_sn_substring: bool) -> Store {
    let store = open(directory, with_sn_substring);
    let mut write = store.write().unwrap();
    let context = WriteContext::new(ACTOR);
    for record in lmdir_ldif::LdifReader::new(ldif.as_bytes()) {
        let record = record.unwrap();
        let lmdir_ldif::RecordBody::Content(values) = record.body else {
            panic!("content records only")
        };
        let mut entry = Entry::new(Dn::parse(&record.dn).unwrap());
        for (description, value) in values {
            entry.add_values(&description, std::iter::once(value));
        }
        write.add(&entry, &context).unwrap();
    }
    write.commit().unwrap();
    store
}

#[test]
fn bulk_load_equals_single_entry_adds_and_checks_clean() {
    let work = tempfile::tempdir().unwrap();
    let ldif = directory_ldif(2000) + &big_group_ldif(2000, 300);
    let path = write_file(work.path(), "in.ldif", &ldif);
    let loaded_directory = work.path().join("loaded");
    let summary = load(&options(&loaded_directory, true), &path).unwrap();
    assert_eq!(summary.entries, 3 + 2000 + 20 + 1);
    assert_eq!(summary.skipped_count, 0);
    let loaded = open(&loaded_directory, true);
    assert_clean(&loaded);
    let reference = build_with_adds(&work.path().join("added"), &ldif, true);
    assert_clean(&reference);
    let loaded_export = stable_export(&loaded);
    assert_eq!(loaded_export, stable_export(&reference));
    // Every DB the same, row for row: the loader and `add` run the same entry → rows step.
    assert_eq!(digests(&loaded), digests(&reference));
    assert!(loaded_export.contains("creatorsName: cn=admin,dc=example,dc=com"));
    assert!(loaded_export.contains("structuralObjectClass: inetOrgPerson"));
    // The loaded store takes further single-entry writes at the next ID.
    let mut write = loaded.write().unwrap();
    let mut entry = Entry::new(Dn::parse("ou=Extra,dc=example,dc=com").unwrap());
    entry.add_values("objectClass", [b"organizationalUnit".to_vec()]);
    entry.add_values("ou", [b"Extra".to_vec()]);
    let id = write.add(&entry, &WriteContext::new(ACTOR)).unwrap();
    write.commit().unwrap();
    assert_eq!(id as u64, summary.entries + 1);
    assert_clean(&loaded);
}

#[test]
fn tiny_memory_budget_spills_and_gives_the_same_database() {
    let work = tempfile::tempdir().unwrap();
    let ldif = directory_ldif(1500);
    let path = write_file(work.path(), "in.ldif", &ldif);
    let roomy_directory = work.path().join("roomy");
    let roomy = load(&options(&roomy_directory, true), &path).unwrap();
    assert_eq!(roomy.spill_files, 0);
    // The DN tree holds every DN (here ~1,500 of 30+ bytes), counted against --memory.
    assert!(
        roomy.held_bytes_peak > 1500 * 30,
        "held {}",
        roomy.held_bytes_peak
    );
    assert_eq!(roomy.held_bytes_over_budget, 0);
    assert!(!roomy.to_string().contains("warning"), "{roomy}");
    let tight_directory = work.path().join("tight");
    let mut tight_options = options(&tight_directory, true);
    tight_options.memory_bytes_max = 64 * 1024;
    tight_options.quick = true;
    let tight = load(&tight_options, &path).unwrap();
    assert!(
        tight.spill_files > 4,
        "a 64 KiB budget must spill, got {} files",
        tight.spill_files
    );
    // A tree larger than 64 KiB can make room for: said, not hidden.
    assert!(tight.held_bytes_over_budget > 0, "{tight:?}");
    assert!(
        tight
            .to_string()
            .contains("warning: the DN tree and member lists held"),
        "{tight}"
    );
    let (roomy, tight) = (open(&roomy_directory, true), open(&tight_directory, true));
    assert_clean(&tight);
    assert_eq!(stable_export(&roomy), stable_export(&tight));
}

#[test]
fn children_before_parents_are_reordered() {
    let work = tempfile::tempdir().unwrap();
    let ldif = "dn: uid=a,ou=People,dc=example,dc=com\nobjectClass: account\nuid: a\n\n\
                dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n\
                dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
                dn: uid=b,ou=People,dc=example,dc=com\nobjectClass: account\nuid: b\n";
    let path = write_file(work.path(), "in.ldif", ldif);
    let directory = work.path().join("db");
    assert_eq!(load(&options(&directory, true), &path).unwrap().entries, 4);
    let store = open(&directory, true);
    assert_clean(&store);
    let read = store.read().unwrap();
    let people = read.dn_to_id("ou=people,dc=example,dc=com").unwrap();
    assert_eq!(read.subtree_size(people).unwrap(), 3);
    assert_eq!(read.num_subordinates(people).unwrap(), 2);
    assert_eq!(
        read.dn_to_id("UID=A,ou=People,dc=example,dc=com").unwrap(),
        1
    );
    assert_eq!(read.dn_of(1).unwrap(), "uid=a,ou=People,dc=example,dc=com");
}

#[test]
fn bad_records_name_their_line_and_leave_no_database() {
    let work = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str); 4] = [
        (
            "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\ndn: ou=x,dc=example,dc=com\nobjectClass: organizationalUnit\nnoSuchAttribute: 1\nou: x\n",
            "line 5",
            "noSuchAttribute",
        ),
        ("dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\ndn: ou=y,dc=example,dc=com\nou: y\n", "line 5", "objectClass"),
        ("dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\ndn: ou=z,dc=example,dc=com\nobjectClass organizationalUnit\n", "line 6", ""),
        (
            "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\ndn: ou=a,ou=missing,dc=example,dc=com\nobjectClass: organizationalUnit\nou: a\n",
            "line 5",
            "ou=missing,dc=example,dc=com",
        ),
    ];
    for (index, (ldif, line, detail)) in cases.iter().enumerate() {
        let path = write_file(work.path(), &format!("bad{index}.ldif"), ldif);
        let directory = work.path().join(format!("db{index}"));
        let error = load(&options(&directory, true), &path).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, LoadError::Record(_)),
            "case {index}: {message}"
        );
        assert!(
            message.contains(line),
            "case {index}: '{message}' should name {line}"
        );
        assert!(
            message.contains(detail),
            "case {index}: '{message}' should mention {detail}"
        );
        assert!(
            !directory.exists(),
            "case {index}: a failed load must leave no DB"
        );
        let leftovers: Vec<_> = std::fs::read_dir(work.path())
            .unwrap()
            .flatten()
            .filter(|item| item.file_name().to_string_lossy().contains(".loading-"))
            .collect();
        assert!(
            leftovers.is_empty(),
            "case {index}: staging directory left behind"
        );
    }
}

#[test]
fn duplicate_dn_names_both_lines() {
    let work = tempfile::tempdir().unwrap();
    let ldif = "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
                dn: ou=x,dc=example,dc=com\nobjectClass: organizationalUnit\nou: x\n\n\
                dn: OU=X,dc=example,dc=com\nobjectClass: organizationalUnit\nou: x\n";
    let path = write_file(work.path(), "in.ldif", ldif);
    let message = load(&options(&work.path().join("db"), true), &path)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("line 9") && message.contains("line 5"),
        "{message}"
    );
}

#[test]
fn continue_on_error_skips_and_counts() {
    let work = tempfile::tempdir().unwrap();
    let mut ldif = directory_ldif(50);
    ldif.push_str("dn: ou=bad,dc=example,dc=com\nou: bad\n\n");
    ldif.push_str(
        "dn: uid=orphan,ou=nowhere,dc=example,dc=com\nobjectClass: account\nuid: orphan\n\n",
    );
    ldif.push_str(
        "dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n",
    );
    let path = write_file(work.path(), "in.ldif", &ldif);
    let directory = work.path().join("db");
    let mut options = options(&directory, true);
    options.continue_on_error = true;
    let summary = load(&options, &path).unwrap();
    assert_eq!(summary.skipped_count, 3, "{summary}");
    assert_eq!(summary.entries, 3 + 50 + 1);
    let store = open(&directory, true);
    assert_clean(&store);
    assert_eq!(
        store.read().unwrap().entry_count().unwrap(),
        summary.entries
    );
}

fn candidates(store: &Store, filters: &[&str]) -> Vec<Option<Vec<u32>>> {
    let read = store.read().unwrap();
    filters
        .iter()
        .map(|text| {
            let prepared = store
                .schema()
                .prepare_filter(&Filter::parse(text, 32).unwrap());
            read.filter_candidates(&prepared)
                .unwrap()
                .map(|bitmap| bitmap.iter().collect())
        })
        .collect()
}

#[test]
fn reindex_after_adding_an_index_answers_like_a_fresh_load() {
    let work = tempfile::tempdir().unwrap();
    let ldif = directory_ldif(800);
    let path = write_file(work.path(), "in.ldif", &ldif);
    let old_directory = work.path().join("old");
    load(&options(&old_directory, false), &path).unwrap();
    let fresh_directory = work.path().join("fresh");
    load(&options(&fresh_directory, true), &path).unwrap();

    let reopened = open(&old_directory, true);
    assert!(
        reopened.index_config_change().is_some(),
        "the new sn substring index must be noticed"
    );
    let summary = reindex(&reopened, Some(&["sn".to_string()]), 0, 2).unwrap();
    assert_eq!(summary.indexes, vec!["sn".to_string()]);
    assert!(reopened.index_config_change().is_none());
    assert_clean(&reopened);
    let filters = [
        "(sn=*owal*)",
        "(sn=Mü*)",
        "(sn=*ee)",
        "(&(sn=Smith)(cn=*anna*))",
        "(|(sn=*arcía)(uid=u00001*))",
        "(uidNumber>=10700)",
    ];
    let fresh = open(&fresh_directory, true);
    let expected = candidates(&fresh, &filters);
    for (filter, ids) in filters.iter().zip(&expected) {
        assert!(ids.is_some(), "{filter} must be answered from the indexes");
    }
    assert!(
        expected.iter().all(|ids| !ids.as_ref().unwrap().is_empty()),
        "every filter matches something"
    );
    assert_eq!(candidates(&reopened, &filters), expected);
    // Reindexing everything keeps the same answers.
    reindex(&reopened, None, 16 * 1024, 2).unwrap();
    assert_clean(&reopened);
    assert_eq!(candidates(&reopened, &filters), expected);
}

#[test]
fn loading_into_a_non_empty_store_adds_entries() {
    let work = tempfile::tempdir().unwrap();
    let first = write_file(work.path(), "first.ldif", &directory_ldif(100));
    let directory = work.path().join("db");
    load(&options(&directory, true), &first).unwrap();
    let second = write_file(
        work.path(),
        "second.ldif",
        "dn: ou=More,dc=example,dc=com\nobjectClass: organizationalUnit\nou: More\n\n\
         dn: uid=new,ou=More,dc=example,dc=com\nobjectClass: account\nuid: new\n",
    );
    let summary = load(&options(&directory, true), &second).unwrap();
    assert_eq!(summary.entries, 2);
    let store = open(&directory, true);
    assert_clean(&store);
    assert_eq!(
        store.read().unwrap().entry_count().unwrap(),
        3 + 100 + 1 + 2
    );
    // A duplicate of an existing entry is refused and changes nothing.
    let duplicate = write_file(
        work.path(),
        "dup.ldif",
        "dn: ou=More,dc=example,dc=com\nobjectClass: organizationalUnit\nou: More\n",
    );
    drop(store);
    let error = load(&options(&directory, true), &duplicate)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("line 1") && error.contains("already exists"),
        "{error}"
    );
}

/// As slapadd: an entry below an alias or a subentry loads, into an empty store and into a
/// non-empty one (whose load adds entry by entry: the server's add would refuse them).
#[test]
fn entries_below_an_alias_or_a_subentry_load_as_with_slapadd() {
    let work = tempfile::tempdir().unwrap();
    let below = |parent: &str, cn: &str| {
        format!(
            "dn: cn={cn},{parent},dc=example,dc=com\nobjectClass: organizationalRole\ncn: {cn}\n\n"
        )
    };
    let first = format!(
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
         dc: example\no: Example\n\n\
         dn: cn=Alias,dc=example,dc=com\nobjectClass: alias\nobjectClass: extensibleObject\n\
         cn: Alias\naliasedObjectName: dc=example,dc=com\n\n\
         dn: cn=Policy,dc=example,dc=com\nobjectClass: top\nobjectClass: subentry\n\
         cn: Policy\nsubtreeSpecification: {{}}\n\n{}{}",
        below("cn=Alias", "a"),
        below("cn=Policy", "a")
    );
    let first = write_file(work.path(), "first.ldif", &first);
    let directory = work.path().join("db");
    assert_eq!(load(&options(&directory, true), &first).unwrap().entries, 5);
    let second = format!("{}{}", below("cn=Alias", "b"), below("cn=Policy", "b"));
    let second = write_file(work.path(), "second.ldif", &second);
    assert_eq!(
        load(&options(&directory, true), &second).unwrap().entries,
        2
    );
    let store = open(&directory, true);
    assert_clean(&store);
    assert_eq!(store.read().unwrap().entry_count().unwrap(), 7);
}

/// A load into a store holding entries takes memberOf as the groups give it, as a replica's
/// add does: a member carrying memberOf for a group later in the file (slapcat writes entries in
/// ID order, a group often after its members) loads, and a value no group backs is dropped,
/// not refused (a client's Relax add of either is refused: `crates/store/tests/memberof.rs`).
#[test]
fn a_load_into_a_non_empty_store_takes_memberof_from_the_groups() {
    let work = tempfile::tempdir().unwrap();
    let first = write_file(work.path(), "first.ldif", &directory_ldif(10));
    let directory = work.path().join("db");
    let mut load_options = options(&directory, true);
    load_options.store = memberof_store_options();
    load(&load_options, &first).unwrap();
    let second = write_file(
        work.path(),
        "second.ldif",
        "dn: uid=early,ou=People,dc=example,dc=com\nobjectClass: account\nuid: early\n\
         memberOf: cn=later,ou=Groups,dc=example,dc=com\n\
         memberOf: cn=nowhere,ou=Groups,dc=example,dc=com\n\n\
         dn: cn=later,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: later\n\
         member: uid=early,ou=People,dc=example,dc=com\n",
    );
    let summary = load(&load_options, &second).unwrap();
    assert_eq!((summary.entries, summary.skipped_count), (2, 0));
    let store = Store::open(&directory, memberof_store_options(), schema()).unwrap();
    assert_clean(&store);
    let read = store.read().unwrap();
    let early = read
        .entry(
            read.dn_to_id("uid=early,ou=People,dc=example,dc=com")
                .unwrap(),
        )
        .unwrap()
        .unwrap();
    let memberof: Vec<String> = early
        .attribute_by_text("memberOf")
        .map(|attribute| {
            attribute
                .values()
                .map(|(original, _)| String::from_utf8_lossy(original).into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(memberof, ["cn=later,ou=Groups,dc=example,dc=com"]);
}

/// The ou entry of `name` holding only `ou: Staff`.
fn ou_lacking_its_rdn_value(name: &str) -> String {
    format!("dn: ou={name},dc=example,dc=com\nobjectClass: organizationalUnit\nou: Staff\n\n")
}

#[test]
fn a_missing_rdn_value_is_added_as_slapadd_adds_it_with_and_without_quick() {
    let work = tempfile::tempdir().unwrap();
    let suffix = "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n";
    let ldif = format!("{suffix}{}", ou_lacking_its_rdn_value("People"));
    let path = write_file(work.path(), "lacking.ldif", &ldif);
    let more = write_file(work.path(), "more.ldif", &ou_lacking_its_rdn_value("More"));
    for quick in [false, true] {
        let directory = work.path().join(format!("db-{quick}"));
        let mut options = options(&directory, true);
        options.quick = quick;
        load(&options, &path).unwrap();
        // Into a store that has entries: the same.
        load(&options, &more).unwrap();
        let store = open(&directory, true);
        assert_clean(&store);
        let export = stable_export(&store);
        for name in ["People", "More"] {
            let expected = format!(
                "dn: ou={name},dc=example,dc=com\nobjectClass: organizationalUnit\nou: Staff\nou: {name}\n"
            );
            assert!(export.contains(&expected), "quick {quick}: {export}");
        }
    }
    // A naming attribute the entry's classes do not allow: added, then refused by the schema
    // check, as slapadd refuses it ("attribute 'uid' not allowed").
    let not_allowed = write_file(
        work.path(),
        "uid.ldif",
        &format!("{suffix}dn: uid=x,dc=example,dc=com\nobjectClass: organizationalUnit\nou: x\n"),
    );
    let message = load(&options(&work.path().join("refused"), true), &not_allowed)
        .unwrap_err()
        .to_string();
    assert!(message.contains("attribute 'uid' not allowed"), "{message}");
}

#[test]
fn a_record_larger_than_the_memory_budget_is_refused_naming_its_line() {
    let work = tempfile::tempdir().unwrap();
    let mut ldif = directory_ldif(20);
    let line = ldif.lines().count() + 1;
    // 100 KiB in one value: more than a 64 KiB budget allows for one record.
    writeln!(
        ldif,
        "dn: ou=Big,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Big\n\
         description: {}\n",
        "x".repeat(100 << 10)
    )
    .unwrap();
    ldif.push_str("dn: ou=After,dc=example,dc=com\nobjectClass: organizationalUnit\nou: After\n");
    let path = write_file(work.path(), "big.ldif", &ldif);
    let mut tight = options(&work.path().join("tight"), true);
    tight.memory_bytes_max = 64 << 10;
    let message = load(&tight, &path).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!("line {line}: ")) && message.contains("--memory"),
        "{message}"
    );
    // Skipped under --continue-on-error, the records after it loaded.
    tight.continue_on_error = true;
    let summary = load(&tight, &path).unwrap();
    assert_eq!(summary.skipped_count, 1, "{summary}");
    let store = open(&work.path().join("tight"), true);
    assert!(stable_export(&store).contains("dn: ou=After,dc=example,dc=com"));
    assert!(!stable_export(&store).contains("dn: ou=Big,"));
    // A budget that holds it loads it.
    drop(store);
    load(&options(&work.path().join("roomy"), true), &path).unwrap();
}

#[test]
fn error_messages_show_control_bytes_escaped() {
    let work = tempfile::tempdir().unwrap();
    // An orphan whose DN (base64) holds a terminal escape sequence and a carriage return.
    let ldif = format!(
        "{}dn:: {}\nobjectClass: organizationalUnit\nou: x\n",
        "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n",
        "b3U9eBtbMzFtLG91PW1pc3NpbmcNLGRjPWV4YW1wbGUsZGM9Y29t"
    );
    let path = write_file(work.path(), "escape.ldif", &ldif);
    let message = load(&options(&work.path().join("db"), true), &path)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("ou=x\\x1b[31m,ou=missing\\x0d,"),
        "{message}"
    );
    assert!(!message.chars().any(char::is_control), "{message:?}");
}

#[test]
fn a_load_into_a_non_empty_store_takes_the_loads_ldif_options() {
    let work = tempfile::tempdir().unwrap();
    let first = write_file(work.path(), "first.ldif", &directory_ldif(5));
    let directory = work.path().join("db");
    load(&options(&directory, true), &first).unwrap();
    // A record that does not parse is skipped under --continue-on-error, as into an empty
    // store, and the records after it load.
    let second = write_file(
        work.path(),
        "second.ldif",
        "dn: ou=Broken,dc=example,dc=com\nobjectClass organizationalUnit\n\n\
         dn: ou=More,dc=example,dc=com\nobjectClass: organizationalUnit\nou: More\n",
    );
    let mut skipping = options(&directory, true);
    skipping.continue_on_error = true;
    let summary = load(&skipping, &second).unwrap();
    assert_eq!(
        (summary.entries, summary.skipped_count),
        (1, 1),
        "{summary}"
    );
    assert_eq!(summary.skipped[0].line, 2);
    // File URLs are read only when the load allows them, and a refusal says why.
    let secret = write_file(work.path(), "secret.txt", "not for the directory");
    let third = write_file(
        work.path(),
        "third.ldif",
        &format!(
            "dn: ou=Url,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Url\n\
             description:< file://{}\n",
            secret.display()
        ),
    );
    let mut refusing = options(&directory, true);
    refusing.file_urls_refused_because = "--no-file-urls was given";
    let message = load(&refusing, &third).unwrap_err().to_string();
    assert!(
        message.contains("line 4") && message.contains("--no-file-urls"),
        "{message}"
    );
    let mut reading = options(&directory, true);
    reading.file_urls = true;
    assert_eq!(load(&reading, &third).unwrap().entries, 1);
    let store = open(&directory, true);
    assert!(stable_export(&store).contains("description: not for the directory"));
}

/// Child side of the kill test: loads the file named by the environment, slowly enough to be killed.
#[test]
fn kill_test_child() {
    let Ok(ldif) = std::env::var("LMDIR_LOAD_KILL_CHILD_LDIF") else {
        return;
    };
    let directory = PathBuf::from(std::env::var("LMDIR_LOAD_KILL_CHILD_DB").unwrap());
    let mut options = options(&directory, true);
    options.threads = 1;
    let _ = load(&options, Path::new(&ldif));
}

/// `function`'s name as libtest knows it in this test binary (its path below the binary's root,
/// `module::function`): what a child run of that one test must pass with `--exact`.
fn test_name(function: &str) -> String {
    let module = module_path!()
        .split_once("::")
        .map_or("", |(_, below_root)| below_root);
    format!("{module}::{function}")
}

#[test]
fn a_load_killed_midway_leaves_no_database() {
    let work = tempfile::tempdir().unwrap();
    let path = write_file(work.path(), "big.ldif", &directory_ldif(40_000));
    let directory = work.path().join("db");
    for delay_milliseconds in [50u64, 400] {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &test_name("kill_test_child"),
                "--nocapture",
                "--test-threads=1",
            ])
            .env("LMDIR_LOAD_KILL_CHILD_LDIF", &path)
            .env("LMDIR_LOAD_KILL_CHILD_DB", &directory)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the load has started writing its staging DB, then kill it hard.
        let started = std::time::Instant::now();
        loop {
            let staging = std::fs::read_dir(work.path())
                .unwrap()
                .flatten()
                .any(|item| item.file_name().to_string_lossy().contains(".loading-"));
            if staging || child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the child load never started writing its staging DB"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_milliseconds));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        if status.success() {
            // The load finished before the kill: then it must be complete and clean. (A child
            // that ran no test also ends in success, having loaded nothing: that fails here.)
            assert!(directory.exists(), "the child's load left no DB");
            assert_clean(&open(&directory, true));
            return;
        }
        assert!(
            !directory.exists(),
            "a killed load must leave no DB at the target"
        );
    }
    // The next load cleans the dead load's staging directory and succeeds.
    let small = write_file(work.path(), "small.ldif", &directory_ldif(10));
    load(&options(&directory, true), &small).unwrap();
    assert_clean(&open(&directory, true));
    let leftovers = std::fs::read_dir(work.path())
        .unwrap()
        .flatten()
        .filter(|item| item.file_name().to_string_lossy().contains(".loading-"))
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn a_foreign_non_empty_directory_is_refused_untouched() {
    let work = tempfile::tempdir().unwrap();
    let path = write_file(work.path(), "in.ldif", &directory_ldif(3));
    let directory = work.path().join("db");
    std::fs::create_dir(&directory).unwrap();
    std::fs::write(directory.join("notes.txt"), "keep me").unwrap();
    let message = load(&options(&directory, true), &path)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("not an lmdir store") && message.contains("notes.txt"),
        "{message}"
    );
    let names: Vec<String> = std::fs::read_dir(&directory)
        .unwrap()
        .flatten()
        .map(|item| item.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["notes.txt".to_string()]);
}

/// Store options with memberOf upkeep and a memberOf equality + presence index.
fn memberof_store_options() -> StoreOptions {
    let mut options = store_options(true);
    options.memberof = true;
    options.indexes.insert(
        "memberOf".to_string(),
        vec![IndexKind::Equality, IndexKind::Presence],
    );
    options
}

/// Groups after their members, plus the edge cases of the store's memberOf semantics: a group
/// naming itself, a uniqueMember with `#'bits'B`, a member that never exists, one that is
/// added only after the group (its add finds the group over the member index) and one added
/// after a group naming it only by a uniqueMember with a UID (which the index posts under the
/// whole value: its add does not find that group).
fn memberof_ldif() -> String {
    let mut ldif = directory_ldif(700);
    ldif.push_str(
        "dn: cn=self,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: self\n\
         member: cn=self,ou=Groups,dc=example,dc=com\n\
         member: uid=u0000001,ou=People,dc=example,dc=com\n\
         member: uid=late,ou=People,dc=example,dc=com\n\
         member: uid=nobody,ou=People,dc=example,dc=com\n\n\
         dn: cn=unique,ou=Groups,dc=example,dc=com\nobjectClass: groupOfUniqueNames\ncn: unique\n\
         uniqueMember: uid=u0000003,ou=People,dc=example,dc=com#'0101'B\n\
         uniqueMember: uid=u0000004,ou=People,dc=example,dc=com\n\
         uniqueMember: uid=late2,ou=People,dc=example,dc=com#'01'B\n\n\
         dn: uid=late,ou=People,dc=example,dc=com\nobjectClass: account\nuid: late\n\n\
         dn: uid=late2,ou=People,dc=example,dc=com\nobjectClass: account\nuid: late2\n",
    );
    ldif
}

#[test]
fn bulk_load_with_memberof_equals_single_entry_adds() {
    let work = tempfile::tempdir().unwrap();
    let ldif = memberof_ldif();
    let path = write_file(work.path(), "in.ldif", &ldif);
    let reference_directory = work.path().join("added");
    let reference = Store::open(&reference_directory, memberof_store_options(), schema()).unwrap();
    {
        let mut write = reference.write().unwrap();
        let context = WriteContext::new(ACTOR);
        for record in lmdir_ldif::LdifReader::new(ldif.as_bytes()) {
            let record = record.unwrap();
            let lmdir_ldif::RecordBody::Content(values) = record.body else {
                panic!("content records only")
            };
            let mut entry = Entry::new(Dn::parse(&record.dn).unwrap());
            for (description, value) in values {
                entry.add_values(&description, std::iter::once(value));
            }
            write.add(&entry, &context).unwrap();
        }
        write.commit().unwrap();
    }
    assert_clean(&reference);
    let reference_export = stable_export(&reference);
    assert!(reference_export.contains("memberOf: cn=group0,ou=Groups,dc=example,dc=com"));

    for quick in [false, true] {
        let directory = work.path().join(format!("loaded-{quick}"));
        let mut load_options = options(&directory, true);
        load_options.store = memberof_store_options();
        load_options.quick = quick;
        load(&load_options, &path).unwrap();
        let loaded = Store::open(&directory, memberof_store_options(), schema()).unwrap();
        assert_clean(&loaded);
        assert_eq!(stable_export(&loaded), reference_export, "quick: {quick}");
        assert_eq!(digests(&loaded), digests(&reference), "quick: {quick}");

        let read = loaded.read().unwrap();
        let ids_of = |dns: &[String]| -> Vec<u32> {
            let mut ids: Vec<u32> = dns.iter().map(|dn| read.dn_to_id(dn).unwrap()).collect();
            ids.sort_unstable();
            ids
        };
        let group0: Vec<String> = (0..700)
            .step_by(3)
            .take(60)
            .map(|member| format!("uid=u{member:07},ou=People,dc=example,dc=com"))
            .collect();
        let self_members = [
            "cn=self,ou=Groups,dc=example,dc=com".to_string(),
            "uid=u0000001,ou=People,dc=example,dc=com".to_string(),
            "uid=late,ou=People,dc=example,dc=com".to_string(),
        ];
        let unique_members = [
            "uid=u0000003,ou=People,dc=example,dc=com".to_string(),
            "uid=u0000004,ou=People,dc=example,dc=com".to_string(),
        ];
        let answers = candidates(
            &loaded,
            &[
                "(memberOf=cn=group0,ou=Groups,dc=example,dc=com)",
                "(memberOf=CN=Self,ou=groups,dc=example,dc=com)",
                "(memberOf=cn=unique,ou=Groups,dc=example,dc=com)",
                "(memberOf=*)",
            ],
        );
        assert_eq!(answers[0], Some(ids_of(&group0)));
        assert_eq!(answers[1], Some(ids_of(&self_members)));
        assert_eq!(answers[2], Some(ids_of(&unique_members)));
        let late2 = read
            .dn_to_id("uid=late2,ou=People,dc=example,dc=com")
            .unwrap();
        let with_memberof = answers[3].as_ref().unwrap();
        assert!(
            !with_memberof.contains(&late2),
            "named only with a UID, before it existed"
        );
        // 7 groups of up to 60 members (group5 and group6 are shorter), plus self's 3 and
        // unique's 2 (u0000003 is already counted in group0).
        let mut everyone: Vec<String> = (0..7)
            .flat_map(|group| {
                (group * 100..700)
                    .step_by(3)
                    .take(60)
                    .map(|member| format!("uid=u{member:07},ou=People,dc=example,dc=com"))
            })
            .chain(self_members.iter().cloned())
            .chain(unique_members.iter().cloned())
            .collect();
        everyone.sort();
        everyone.dedup();
        let mut expected_all = ids_of(&everyone);
        expected_all.dedup();
        assert_eq!(*with_memberof, expected_all);
    }
}

/// Issue 9: a load beside a process that has the store open for writing would number new
/// descriptions from its own memory; it is refused, naming the directory, and changes nothing.
#[test]
fn a_load_into_a_store_open_for_writing_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let directory = work.path().join("db");
    load(
        &options(&directory, true),
        &write_file(work.path(), "first.ldif", &directory_ldif(5)),
    )
    .unwrap();
    let writer = open(&directory, true);
    let count = writer.read().unwrap().entry_count().unwrap();
    let second = write_file(
        work.path(),
        "second.ldif",
        "dn: ou=More,dc=example,dc=com\nobjectClass: organizationalUnit\nou: More\ndescription;lang-fr: bonjour\n",
    );
    let error = load(&options(&directory, true), &second).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            error,
            LoadError::Store(lmdir_store::StoreError::Locked { .. })
        ),
        "{message}"
    );
    assert!(
        message.contains(&directory.display().to_string()) && message.contains("pid "),
        "{message}"
    );
    assert_eq!(writer.read().unwrap().entry_count().unwrap(), count);
    assert!(writer
        .descriptions()
        .number_of("description;lang-fr")
        .is_none());
    // Once the writer is gone the same load goes through.
    drop(writer);
    load(&options(&directory, true), &second).unwrap();
    assert_clean(&open(&directory, true));
}

/// An RDN too long for a DN (70,000 bytes) or for a dn2id key (over LMDB's key size) is a
/// record error naming its line, with or without schema checks, not an abort of the load.
#[test]
fn an_overlong_rdn_is_rejected_naming_its_line() {
    let work = tempfile::tempdir().unwrap();
    let cases = [
        (70_000usize, false, "longer than"),
        (600, false, "exceeds the limit"),
        (600, true, "exceeds the limit"),
    ];
    for (index, (length, quick, detail)) in cases.into_iter().enumerate() {
        let value = "a".repeat(length);
        let ldif = format!(
            "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
             dn: ou={value},dc=example,dc=com\nobjectClass: organizationalUnit\nou: {value}\n"
        );
        let path = write_file(work.path(), &format!("long{index}.ldif"), &ldif);
        let directory = work.path().join(format!("db{index}"));
        let mut options = options(&directory, true);
        options.quick = quick;
        let error = load(&options, &path).unwrap_err();
        let message = error.to_string();
        let tail = &message[message.len().saturating_sub(200)..];
        assert!(matches!(error, LoadError::Record(_)), "{length}: {tail}");
        assert!(message.starts_with("line 5 "), "{length}: {tail}");
        assert!(tail.contains(detail), "{length}: {tail}");
        assert!(!directory.exists(), "{length}: a failed load leaves no DB");
    }
}

#[test]
fn a_load_records_the_newest_csn_it_stamped_as_context_csn() {
    let work = tempfile::tempdir().unwrap();
    let path = write_file(work.path(), "in.ldif", &directory_ldif(300));
    let directory = work.path().join("loaded");
    load(&options(&directory, false), &path).unwrap();
    let store = open(&directory, false);
    let read = store.read().unwrap();
    let context = read.context_csns().unwrap();
    let newest = (1..=read.entry_count().unwrap() as u32)
        .filter_map(|id| {
            let entry = read.entry(id).unwrap()?;
            let value = entry
                .attribute_by_text("entryCSN")?
                .values()
                .next()?
                .0
                .to_vec();
            Some(lmdir_sync::Csn::parse(&value).unwrap())
        })
        .max()
        .expect("loaded entries have entryCSNs");
    assert_eq!(context, vec![newest]);
}

/// A `slapcat` export keeps its CSNs: the loaded contextCSN is, per server ID, the greatest of
/// the suffix's contextCSN values and the entries' entryCSNs (what `slapadd -w` leaves), so a
/// consumer's cookie from the old provider is still current. No server ID 0 value is made up
/// when every entry carries its CSN; an entry without one is stamped with server ID 0, and
/// that CSN is then the contextCSN of server ID 0.
#[test]
fn a_load_keeps_the_context_csn_of_a_slapcat_export() {
    let work = tempfile::tempdir().unwrap();
    let exported = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
         dc: example\no: Example\nentryCSN: 20251101000000.000000Z#000000#001#000000\n\
         contextCSN: 20260101000000.000000Z#000000#001#000000\n\
         contextCSN: 20250101000000.000000Z#000000#002#000000\n\n\
         dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\
         entryCSN: 20251215000000.000000Z#000000#001#000000\n\n\
         dn: cn=a,ou=People,dc=example,dc=com\nobjectClass: person\ncn: a\nsn: a\n\
         entryCSN: 20260102000000.000000Z#000003#002#000000\n\n\
         dn: cn=b,ou=People,dc=example,dc=com\nobjectClass: person\ncn: b\nsn: b\n\
         entryCSN: 20251201000000.000000Z#000000#002#000000\n";
    let csn = |text: &str| lmdir_sync::Csn::parse(text.as_bytes()).unwrap();
    let path = write_file(work.path(), "slapcat.ldif", exported);
    let directory = work.path().join("exported");
    load(&options(&directory, false), &path).unwrap();
    let store = open(&directory, false);
    assert_eq!(
        store.read().unwrap().context_csns().unwrap(),
        vec![
            csn("20260101000000.000000Z#000000#001#000000"),
            csn("20260102000000.000000Z#000003#002#000000"),
        ]
    );
    drop(store);

    // One entry without an entryCSN: stamped at the load, with server ID 0.
    let mixed = format!(
        "{exported}\ndn: cn=c,ou=People,dc=example,dc=com\nobjectClass: person\ncn: c\nsn: c\n"
    );
    let path = write_file(work.path(), "mixed.ldif", &mixed);
    let directory = work.path().join("mixed");
    load(&options(&directory, false), &path).unwrap();
    let store = open(&directory, false);
    let read = store.read().unwrap();
    let stamped = read
        .entry(5)
        .unwrap()
        .expect("cn=c is the fifth entry")
        .attribute_by_text("entryCSN")
        .and_then(|values| values.values().next().map(|(value, _)| value.to_vec()))
        .expect("the load stamps an entryCSN");
    let stamped = lmdir_sync::Csn::parse(&stamped).unwrap();
    assert_eq!(stamped.sid(), 0);
    assert_eq!(
        read.context_csns().unwrap(),
        vec![
            stamped,
            csn("20260101000000.000000Z#000000#001#000000"),
            csn("20260102000000.000000Z#000003#002#000000"),
        ]
    );
}

/// OpenLDAP's test-whoami.ldif repeats `userpassword:: amFq` in one entry; slapadd loads it.
/// lmdir loads a value repeated byte for byte once and counts it, on the bulk path and into an
/// existing store; the result equals single-entry adds of the LDIF without the repeats. Values
/// equal only under the matching rule stay an error.
#[test]
fn repeated_identical_values_load_once_and_are_counted() {
    let work = tempfile::tempdir().unwrap();
    let base = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
                dc: example\no: Example\n\n";
    let repeated = format!(
        "{base}dn: cn=jaj,dc=example,dc=com\nobjectClass: person\ncn: jaj\nsn: jaj\n\
         userpassword:: amFq\nuserpassword:: amFq\ndescription: x\nDescription: x\n"
    );
    let once = format!(
        "{base}dn: cn=jaj,dc=example,dc=com\nobjectClass: person\ncn: jaj\nsn: jaj\n\
         userpassword:: amFq\ndescription: x\n"
    );
    let path = write_file(work.path(), "whoami.ldif", &repeated);
    let loaded_directory = work.path().join("loaded");
    let summary = load(&options(&loaded_directory, true), &path).unwrap();
    assert_eq!((summary.entries, summary.repeated_values), (2, 2));
    assert!(
        summary.to_string().contains("2 repeated values kept once"),
        "{summary}"
    );
    let loaded = open(&loaded_directory, true);
    assert_clean(&loaded);
    let reference = build_with_adds(&work.path().join("added"), &once, true);
    assert_eq!(stable_export(&loaded), stable_export(&reference));
    assert_eq!(digests(&loaded), digests(&reference));
    drop(loaded);

    // Into an existing store, through the store's own add.
    let more = write_file(
        work.path(),
        "more.ldif",
        "dn: cn=again,dc=example,dc=com\nobjectClass: person\ncn: again\nsn: a\nsn: a\n",
    );
    let summary = load(&options(&loaded_directory, true), &more).unwrap();
    assert_eq!((summary.entries, summary.repeated_values), (1, 1));
    assert_clean(&open(&loaded_directory, true));

    // Equal under caseIgnoreMatch but not the same bytes: still attributeOrValueExists.
    let equal_only = format!(
        "{base}dn: cn=jaj,dc=example,dc=com\nobjectClass: person\ncn: jaj\nsn: Jaj\nsn: jaj\n"
    );
    let path = write_file(work.path(), "equal.ldif", &equal_only);
    let error = load(&options(&work.path().join("refused"), true), &path)
        .unwrap_err()
        .to_string();
    assert!(error.contains("attributeOrValueExists"), "{error}");
}

/// Input that yields `bytes`, then fails: a refresh that broke off.
struct BrokenInput {
    bytes: std::io::Cursor<Vec<u8>>,
}

impl std::io::Read for BrokenInput {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self.bytes.read(buffer)? {
            0 => Err(std::io::Error::other("the provider went away")),
            count => Ok(count),
        }
    }
}

/// A fresh replica's first refresh (issue 23): the loader's pipeline into an open, empty store
/// gives the same DBs as a fresh load; a load whose input breaks off is undone by
/// `discard_failed_load`, after which the store is empty, clean and takes a whole load.
#[test]
fn a_load_into_an_open_empty_store_is_a_fresh_load_and_a_broken_one_is_undone() {
    use lmdir_load::{load_into_empty, ContextCsn};
    use std::io::Read;
    let work = tempfile::tempdir().unwrap();
    let ldif = directory_ldif(3000);
    let path = write_file(work.path(), "in.ldif", &ldif);
    let loaded_directory = work.path().join("loaded");
    load(&options(&loaded_directory, true), &path).unwrap();
    let reference = open(&loaded_directory, true);

    let live_directory = work.path().join("live");
    let live = open(&live_directory, true);
    let spill = work.path().join("spill");
    std::fs::create_dir_all(&spill).unwrap();
    // Half the LDIF, then an error: the load fails (with a tiny memory budget: spills too).
    let half = ldif.len() / 2;
    let broken = BrokenInput {
        bytes: std::io::Cursor::new(ldif.as_bytes()[..half].to_vec()),
    };
    let mut tiny = options(&live_directory, true);
    tiny.memory_bytes_max = 64 << 10;
    // As the replica does: marked under way first, so a cut-off load is found later.
    live.mark_live_load(true).unwrap();
    let failed = load_into_empty(
        &live,
        &tiny,
        Box::new(broken),
        &spill,
        ContextCsn::FromProvider,
    );
    assert!(failed.is_err());
    assert!(live.live_load_interrupted().unwrap());
    let report = live.check().unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|problem| problem.contains("live_load_under_way")),
        "{:?}",
        report.problems
    );
    live.discard_failed_load().unwrap();
    assert!(!live.live_load_interrupted().unwrap());
    assert_eq!(live.read().unwrap().entry_count().unwrap(), 0);
    assert_clean(&live);

    let mut whole = Vec::new();
    std::fs::File::open(&path)
        .unwrap()
        .read_to_end(&mut whole)
        .unwrap();
    // Twice: a whole load, undone (every DB and tree row had data: a failure after the
    // loader's periodic commits leaves at most that), then loaded again.
    for round in 0..2 {
        let summary = load_into_empty(
            &live,
            &options(&live_directory, true),
            Box::new(std::io::Cursor::new(whole.clone())),
            &spill,
            ContextCsn::FromProvider,
        )
        .unwrap();
        assert_eq!(summary.entries, 3 + 3000 + 30);
        assert_clean(&live);
        assert_eq!(stable_export(&live), stable_export(&reference));
        // The provider's contextCSN, not one the load made up: none until the cookie comes.
        assert!(live.read().unwrap().context_csns().unwrap().is_empty());
        if round == 0 {
            live.discard_failed_load().unwrap();
            assert_eq!(live.read().unwrap().entry_count().unwrap(), 0);
            assert_clean(&live);
        }
    }
}

/// `attr:< file:///path` reads a local file only when the load says so (`lmdir load` of the
/// operator's own file, as slapadd). A replica's first refresh loads what a provider sent: a
/// file URL there (smuggled in through an attribute name) would have copied the replica's
/// config or TLS key into an entry anyone could read.
#[test]
fn file_urls_are_read_only_when_the_load_allows_them() {
    let work = tempfile::tempdir().unwrap();
    let secret = write_file(work.path(), "secret.txt", "the replica's secret");
    let ldif = format!(
        "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\ndescription:< file://{}\n",
        secret.display()
    );
    let path = write_file(work.path(), "urls.ldif", &ldif);
    let refused = work.path().join("refused");
    let error = load(&options(&refused, true), &path).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, LoadError::Record(_)), "{message}");
    assert!(message.contains("line 4"), "{message}");
    assert!(!refused.exists(), "{message}");
    let allowed = work.path().join("allowed");
    let mut with_urls = options(&allowed, true);
    with_urls.file_urls = true;
    load(&with_urls, &path).expect("the operator's own file may name files");
    let store = open(&allowed, true);
    assert!(stable_export(&store).contains("description: the replica's secret"));
}

/// What slapd 2.5 writes into its data and `slapcat` exports: `pwdLastSuccess` (lastbind, in
/// slapd's core schema), `pwdAccountTmpLockoutEnd`, and a policy entry with the ppolicy
/// overlay's `pwdPolicyChecker` class. Before, each such record failed with
/// undefinedAttributeType (and `--continue-on-error` skipped every user who ever bound).
#[test]
fn an_openldap_25_export_with_lastbind_and_policy_checker_loads() {
    let work = tempfile::tempdir().unwrap();
    let ldif = "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
        dn: ou=people,dc=example,dc=com\nobjectClass: organizationalUnit\nou: people\n\n\
        dn: cn=default,dc=example,dc=com\nobjectClass: organizationalRole\nobjectClass: pwdPolicy\n\
        objectClass: pwdPolicyChecker\ncn: default\npwdAttribute: userPassword\n\
        pwdCheckModule: check_password.so\npwdCheckModuleArg: minPoints=3\n\n\
        dn: uid=ann,ou=people,dc=example,dc=com\nobjectClass: account\nuid: ann\n\
        pwdLastSuccess: 20261203101500Z\npwdAccountTmpLockoutEnd: 20261203102000Z\n";
    let path = write_file(work.path(), "slapcat.ldif", ldif);
    let directory = work.path().join("db");
    load(&options(&directory, true), &path).expect("slapcat output loads");
    let exported = stable_export(&open(&directory, true));
    for line in [
        "pwdLastSuccess: 20261203101500Z",
        "pwdAccountTmpLockoutEnd: 20261203102000Z",
        "pwdCheckModuleArg: minPoints=3",
    ] {
        assert!(exported.contains(line), "{line} in\n{exported}");
    }
}
