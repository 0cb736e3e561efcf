//! Issue 9: one writer per directory, read-only opens beside it that see what it commits, and
//! an undecodable entry that is skipped by searches, named by `check` and deletable.

use crate::common;

use common::*;
use lmdir_schema::{Filter, ResultCode};
use lmdir_store::codec::{encode_entry, AttributeToEncode};
use lmdir_store::{layout, EntryId, Scope, SearchSpec, Store, StoreError};

const PEOPLE: u32 = 60;

fn open_read_only(directory: &std::path::Path) -> Store {
    Store::open_read_only(directory, options(), schema()).expect("read-only open")
}

fn subtree_search(store: &Store, filter: &str) -> (Vec<EntryId>, usize) {
    let read = store.read().unwrap();
    let spec = SearchSpec {
        base: SUFFIX.to_string(),
        scope: Scope::Sub,
        filter: read
            .schema()
            .prepare_filter(&Filter::parse(filter, 16).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    };
    let mut cursor = read.search(&spec).unwrap();
    let mut ids = Vec::new();
    for result in cursor.by_ref() {
        ids.push(result.expect("one bad entry does not end the search").0);
    }
    (ids, cursor.undecodable())
}

/// Replaces an entry's id2entry value through the raw env (the store's test hook).
fn overwrite_entry(store: &Store, id: EntryId, bytes: &[u8]) {
    let mut raw = store.env().write_txn().unwrap();
    store
        .id2entry_database()
        .put(&mut raw, &layout::encode_id(id), bytes)
        .unwrap();
    raw.commit().unwrap();
}

#[test]
fn a_second_writer_is_refused_naming_the_directory_and_holder() {
    let temporary = tempfile::tempdir().unwrap();
    let first = open(temporary.path());
    let error = match Store::open(temporary.path(), options(), schema()) {
        Err(error) => error,
        Ok(_) => panic!("a second read-write open must be refused"),
    };
    let message = error.to_string();
    assert!(matches!(error, StoreError::Locked { .. }), "{message}");
    assert!(
        message.contains(&temporary.path().display().to_string())
            && message.contains(&format!("pid {}", std::process::id())),
        "{message}"
    );
    drop(first);
    // The lock lives exactly as long as the store.
    let again = open(temporary.path());
    assert!(!again.is_read_only());
}

const CHILD_DIRECTORY: &str = "LMDIR_STORE_READER_CHILD_DIRECTORY";
const FRENCH: &str = "ou=french,dc=example,dc=com";
/// A hang guard only: each wait normally ends in milliseconds.
const WAIT_SECONDS_MAX: u64 = 60;

fn wait_for_file(path: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(WAIT_SECONDS_MAX);
    while !path.exists() {
        assert!(std::time::Instant::now() < deadline, "waiting for {path:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Child side of the next test (another process, as LMDB requires): a read-only store beside
/// the parent's writer.
#[test]
fn read_only_child() {
    let Some(directory) = std::env::var_os(CHILD_DIRECTORY) else {
        return; // run directly: nothing to do
    };
    let directory = std::path::PathBuf::from(directory);
    // The parent holds the writer lock: a read-write open is refused, naming the parent.
    let error = Store::open(&directory, options(), schema())
        .err()
        .expect("refused");
    assert!(matches!(error, StoreError::Locked { .. }), "{error}");
    let reader = open_read_only(&directory);
    assert!(reader.is_read_only());
    assert!(matches!(reader.write(), Err(StoreError::ReadOnly)));
    assert!(reader
        .descriptions()
        .number_of("description;lang-fr")
        .is_none());
    std::fs::write(directory.join("child-ready"), "").unwrap();
    wait_for_file(&directory.join("parent-committed"));
    // Descriptions the writer numbered after this store was opened decode here.
    let read = reader.read().unwrap();
    let id = read.dn_to_id(FRENCH).unwrap();
    let found = read.entry(id).unwrap().unwrap();
    let value = found.attribute_by_text("description;lang-fr").unwrap();
    assert_eq!(value.values().next().unwrap().0, b"bonjour");
    let value = found.attribute_by_text("description;lang-de").unwrap();
    assert_eq!(value.values().next().unwrap().0, b"hallo");
    drop(read);
    assert!(reader.check().unwrap().is_clean());
    assert!(reader.export(&mut Vec::new()).unwrap() > 10);
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
fn a_read_only_store_in_another_process_sees_what_the_writer_commits() {
    let temporary = tempfile::tempdir().unwrap();
    let writer = open(temporary.path());
    add_all(&writer, &directory(10), 100);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_name("read_only_child"), "--test-threads=1"])
        .env(CHILD_DIRECTORY, temporary.path())
        .spawn()
        .unwrap();
    wait_for_file(&temporary.path().join("child-ready"));
    // The writer numbers descriptions the reader has never seen (issue 9's scenario).
    let mut write = writer.write().unwrap();
    let mut added = entry(
        FRENCH,
        &[
            ("objectClass", "organizationalUnit"),
            ("ou", "french"),
            ("description;lang-fr", "bonjour"),
        ],
    );
    added.add_values("description;lang-de", [b"hallo".to_vec()]);
    write.add(&added, &context()).unwrap();
    write.commit().unwrap();
    std::fs::write(temporary.path().join("parent-committed"), "").unwrap();
    assert!(child.wait().unwrap().success(), "the reader child failed");
}

#[test]
fn a_read_only_open_of_a_missing_store_fails_without_creating_one() {
    let temporary = tempfile::tempdir().unwrap();
    let directory = temporary.path().join("none");
    assert!(Store::open_read_only(&directory, options(), schema()).is_err());
    assert!(!directory.exists());
}

#[test]
fn an_undecodable_entry_is_skipped_named_and_deletable() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(PEOPLE), 100);
    let (all, _) = subtree_search(&store, "(objectClass=*)");
    let victim_dn = person_dn(7);
    let victim = store.read().unwrap().dn_to_id(&victim_dn).unwrap();
    overwrite_entry(&store, victim, b"\x01\xff\xff\xff garbage");

    // Unindexed (sequential) and indexed searches both return every other entry.
    let (found, skipped) = subtree_search(&store, "(objectClass=*)");
    assert_eq!(skipped, 1);
    assert_eq!(found.len(), all.len() - 1);
    assert!(!found.contains(&victim));
    let (found, skipped) = subtree_search(&store, "(objectClass=inetOrgPerson)");
    assert_eq!(skipped, 1);
    assert_eq!(found.len(), PEOPLE as usize - 1);

    let report = store.check().unwrap();
    let named = format!("entry {victim} '{victim_dn}' cannot be decoded");
    assert!(
        report
            .problems
            .iter()
            .any(|problem| problem.contains(&named)),
        "{report}"
    );
    // Its stale postings are not listed one by one: the entry itself is the problem.
    assert_eq!(report.problems.len(), 1, "{report}");

    let mut write = store.write().unwrap();
    assert_eq!(write.delete(&victim_dn).unwrap(), victim);
    write.commit().unwrap();
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
    let (found, skipped) = subtree_search(&store, "(objectClass=*)");
    assert_eq!((found.len(), skipped), (all.len() - 1, 0));
}

#[test]
fn check_verifies_the_description_table_against_the_entries() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(20), 100);
    let victim_dn = person_dn(3);
    let victim = store.read().unwrap().dn_to_id(&victim_dn).unwrap();
    // A well-formed entry using a number the table does not have (a second process's row
    // that never reached this table, as in issue 9).
    let missing = store.descriptions().len() as u32 + 5;
    let values = vec![(b"x".to_vec(), b"x".to_vec())];
    let mut bytes = Vec::new();
    encode_entry(
        &[AttributeToEncode {
            description_number: missing,
            values: &values,
            out_of_line: None,
        }],
        &mut bytes,
    )
    .expect("one attribute of one value encodes");
    overwrite_entry(&store, victim, &bytes);
    // And a description stored twice under two numbers.
    let duplicate_number = store.descriptions().len() as u32;
    let mut raw = store.env().write_txn().unwrap();
    let mut key = layout::META_DESCRIPTION_PREFIX.to_vec();
    key.extend_from_slice(&duplicate_number.to_be_bytes());
    store.meta_database().put(&mut raw, &key, b"cn").unwrap();
    raw.commit().unwrap();

    let report = store.check().unwrap();
    let text = report.to_string();
    assert!(
        text.contains(&format!(
            "entry {victim} '{victim_dn}' cannot be decoded (uses attribute description {missing} missing from the description table"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "description 'cn' is stored twice, as 1 and {duplicate_number}"
        )) || text.contains("is stored twice"),
        "{text}"
    );
    // Reading the entry is an error, never a panic.
    let read = store.read().unwrap();
    let error = read.entry(victim).expect_err("undecodable");
    assert_eq!(error.code, ResultCode::Other);
    assert!(error.message.contains("missing from the description table"));
}

/// With memberOf upkeep, deleting an undecodable member drops it from the groups listing it
/// (but not a group's last required value), and deleting an undecodable group drops it from its members' memberOf.
#[test]
fn deleting_an_undecodable_entry_repairs_memberof_links() {
    let temporary = tempfile::tempdir().unwrap();
    let store = Store::open(
        temporary.path(),
        lmdir_store::StoreOptions {
            memberof: true,
            ..options()
        },
        schema(),
    )
    .unwrap();
    let people = format!("ou=people,{SUFFIX}");
    let person = |name: &str| format!("uid={name},{people}");
    let group = |name: &str| format!("cn={name},{SUFFIX}");
    let mut write = store.write().unwrap();
    let top = [("objectClass", "domain"), ("dc", "example")];
    write.add(&entry(SUFFIX, &top), &context()).unwrap();
    let unit = [("objectClass", "organizationalUnit"), ("ou", "people")];
    write.add(&entry(&people, &unit), &context()).unwrap();
    for name in ["ann", "bob"] {
        let attributes = [("objectClass", "account"), ("uid", name)];
        write
            .add(&entry(&person(name), &attributes), &context())
            .unwrap();
    }
    let mut both = entry(
        &group("both"),
        &[("objectClass", "groupOfNames"), ("cn", "both")],
    );
    both.add_values(
        "member",
        [person("ann").into_bytes(), person("bob").into_bytes()],
    );
    write.add(&both, &context()).unwrap();
    let mut ann_only = entry(
        &group("ann"),
        &[("objectClass", "groupOfNames"), ("cn", "ann")],
    );
    ann_only.add_values("member", [person("ann").into_bytes()]);
    write.add(&ann_only, &context()).unwrap();
    write.commit().unwrap();
    let values_of = |dn: &str, attribute: &str| -> Vec<String> {
        let read = store.read().unwrap();
        let id = read.dn_to_id(dn).unwrap();
        let found = read.entry(id).unwrap().unwrap();
        let attr = read.schema().attribute(attribute).unwrap();
        found
            .values_of(attr)
            .into_iter()
            .map(|(_, normalized)| String::from_utf8(normalized.to_vec()).unwrap())
            .collect()
    };
    assert_eq!(values_of(&person("bob"), "memberOf").len(), 1);

    // An undecodable member.
    let ann = store.read().unwrap().dn_to_id(&person("ann")).unwrap();
    overwrite_entry(&store, ann, b"\x01\xff\xff\xffgarbage");
    let mut write = store.write().unwrap();
    write.delete(&person("ann")).unwrap();
    write.commit().unwrap();
    assert_eq!(values_of(&group("both"), "member").len(), 1);
    // ann's only group keeps its one required member value (as slapd's memberof does).
    assert_eq!(values_of(&group("ann"), "member"), vec![person("ann")]);
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");

    // An undecodable group.
    let both_id = store.read().unwrap().dn_to_id(&group("both")).unwrap();
    overwrite_entry(&store, both_id, b"\x01\xff\xff\xffgarbage");
    let mut write = store.write().unwrap();
    write.delete(&group("both")).unwrap();
    write.commit().unwrap();
    assert!(values_of(&person("bob"), "memberOf").is_empty());
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
}
