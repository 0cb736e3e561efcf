//! The per-thread DN cache (bases and the DNs above returned entries, kept across read txns)
//! never shows a snapshot a DN it does not hold: renames, deletes and re-adds are seen by the
//! next snapshot, and a snapshot older than what the cache learned is not given it. Every read
//! here runs on one thread, so each one meets what the previous ones cached.

use crate::common;

use common::*;
use lmdir_schema::ResultCode;
use lmdir_store::{ReadTxn, Scope, Store};

/// The DNs of the entries `filter` finds under `base` in `read`'s snapshot.
fn found_dns(read: &ReadTxn, store: &Store, base: &str, filter: &str) -> Vec<String> {
    let base = store.schema().normalize_dn_str(base).unwrap();
    let spec = search_spec(store, &base, Scope::Sub, filter);
    read.search(&spec)
        .unwrap()
        .map(|found| found.unwrap().1.dn().unwrap())
        .collect()
}

fn resolve(read: &ReadTxn, store: &Store, dn: &str) -> Result<u32, ResultCode> {
    let normalized = store.schema().normalize_dn_str(dn).unwrap();
    read.normalized_dn_to_id(&normalized)
        .map_err(|error| error.code)
}

fn populated() -> (tempfile::TempDir, Store) {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(30), 100);
    (temporary, store)
}

#[test]
fn a_renamed_parent_shows_in_the_next_snapshot_and_not_in_the_open_one() {
    let (_temporary, store) = populated();
    let people = format!("ou=people,{SUFFIX}");
    let old_parent = format!("ou=dept3,{people}");
    let before = store.read().unwrap();
    let department = resolve(&before, &store, &old_parent).unwrap();
    // Twice: the second search meets the parent's DN and the base in the cache.
    for _ in 0..2 {
        assert_eq!(
            found_dns(&before, &store, &people, "(uid=user3)"),
            [format!("uid=user3,{old_parent}")]
        );
        assert_eq!(
            found_dns(&store.read().unwrap(), &store, &people, "(uid=user3)"),
            [format!("uid=user3,{old_parent}")]
        );
    }

    let mut write = store.write().unwrap();
    write
        .modrdn(&old_parent, "ou=Renamed", true, None, &context())
        .unwrap();
    write.commit().unwrap();

    let after = store.read().unwrap();
    assert_eq!(
        found_dns(&after, &store, &people, "(uid=user3)"),
        [format!("uid=user3,ou=Renamed,{people}")]
    );
    assert_eq!(
        resolve(&after, &store, &old_parent),
        Err(ResultCode::NoSuchObject)
    );
    assert_eq!(
        resolve(&after, &store, &format!("ou=renamed,{people}")),
        Ok(department)
    );
    // The snapshot taken before the rename still has the old name.
    assert_eq!(
        found_dns(&before, &store, &people, "(uid=user3)"),
        [format!("uid=user3,{old_parent}")]
    );
    assert_eq!(resolve(&before, &store, &old_parent), Ok(department));
}

#[test]
fn a_base_deleted_and_added_again_resolves_to_the_new_entry() {
    let (_temporary, store) = populated();
    let temporary_ou = format!("ou=temporary,{SUFFIX}");
    let add = |store: &Store| {
        let mut write = store.write().unwrap();
        let id = write
            .add(
                &entry(
                    &temporary_ou,
                    &[("objectClass", "organizationalUnit"), ("ou", "temporary")],
                ),
                &context(),
            )
            .unwrap();
        write.commit().unwrap();
        id
    };
    let first = add(&store);
    assert_eq!(
        resolve(&store.read().unwrap(), &store, &temporary_ou),
        Ok(first)
    );
    assert_eq!(
        resolve(&store.read().unwrap(), &store, &temporary_ou),
        Ok(first)
    );

    let mut write = store.write().unwrap();
    write.delete(&temporary_ou).unwrap();
    write.commit().unwrap();
    assert_eq!(
        resolve(&store.read().unwrap(), &store, &temporary_ou),
        Err(ResultCode::NoSuchObject)
    );
    let second = add(&store);
    assert_ne!(first, second);
    assert_eq!(
        resolve(&store.read().unwrap(), &store, &temporary_ou),
        Ok(second)
    );
}

#[test]
fn an_older_snapshot_is_not_given_an_entry_a_newer_one_found() {
    let (_temporary, store) = populated();
    let later_ou = format!("ou=later,{SUFFIX}");
    let older = store.read().unwrap();
    let mut write = store.write().unwrap();
    let later = write
        .add(
            &entry(
                &later_ou,
                &[("objectClass", "organizationalUnit"), ("ou", "later")],
            ),
            &context(),
        )
        .unwrap();
    write.commit().unwrap();
    assert_eq!(
        resolve(&store.read().unwrap(), &store, &later_ou),
        Ok(later)
    );
    assert_eq!(
        resolve(&older, &store, &later_ou),
        Err(ResultCode::NoSuchObject)
    );
}

#[test]
fn a_missing_entry_under_a_cached_parent_is_no_such_object_naming_the_deepest_ancestor() {
    let (_temporary, store) = populated();
    let read = store.read().unwrap();
    let people = format!("ou=people,{SUFFIX}");
    let deep: String = (0..10).map(|level| format!("ou=missing{level},")).collect();
    for missing in [
        format!("uid=nobody,{people}"),
        format!("uid=nobody,ou=nowhere,{people}"),
        format!("{deep}{people}"),
    ] {
        // Twice: the second time the parents come from the cache.
        for _ in 0..2 {
            let normalized = store.schema().normalize_dn_str(&missing).unwrap();
            let error = read.normalized_dn_to_id(&normalized).unwrap_err();
            assert_eq!(error.code, ResultCode::NoSuchObject, "{missing}");
            assert_eq!(
                error.matched_dn.as_deref(),
                Some(people.as_str()),
                "{missing}"
            );
        }
    }
    assert_eq!(
        resolve(&read, &store, &person_dn(7)),
        Ok(read.dn_to_id(&person_dn(7)).unwrap())
    );
}
