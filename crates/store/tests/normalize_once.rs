//! Issue 21: a write normalizes its DN once and each value once. The schema counts its
//! normalizations per thread (`lmdir_schema::normalization_counts`); these tests run the
//! writer's call sequence (lmdir-server's `Writer::apply` for the rootdn: `JobDns::of`
//! normalizes the request's DN, the access step looks the target up, the store writes) on
//! the test's own thread and read the counts around it.

use crate::common;

use common::*;
use lmdir_schema::{ModOp, Modification, NormalizationCounts};

/// The counts of normalizations `work` did on this thread.
fn counted<T>(work: impl FnOnce() -> T) -> (T, NormalizationCounts) {
    lmdir_schema::normalizations_during(work)
}

/// Values of every attribute of the stored entry (client values and stamped ones).
fn stored_value_count(store: &lmdir_store::Store, dn: &str) -> u64 {
    let read = store.read().unwrap();
    let id = read.dn_to_id(dn).unwrap();
    let entry = read.entry(id).unwrap().unwrap();
    entry
        .attributes()
        .map(|attribute| attribute.values().count() as u64)
        .sum()
}

#[test]
fn an_add_normalizes_its_dn_once_and_each_value_once() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(2), 10);
    let schema = store.schema();
    let dn = format!("cn=Many Values+sn=Example,ou=people,{SUFFIX}");
    let mut attributes = vec![
        ("objectClass", "person"),
        ("objectClass", "organizationalPerson"),
        ("cn", "Many Values"),
        ("sn", "Example"),
        ("telephoneNumber", "+1 555 0100"),
    ];
    let descriptions: Vec<String> = (0..7).map(|index| format!("Line {index}")).collect();
    attributes.extend(
        descriptions
            .iter()
            .map(|text| ("description", text.as_str())),
    );
    let new_entry = entry(&dn, &attributes);

    let (id, counts) = counted(|| {
        // The writer: the request's DN normalized once (`JobDns::of`) ...
        let normalized = schema.normalized_dn(new_entry.dn.clone()).unwrap();
        let mut write = store.write().unwrap();
        // ... the rootdn's access step looks the target up with it ...
        assert!(write.entry_by_dn(&normalized).unwrap().is_none());
        // ... and the store adds the entry under it.
        let id = write
            .add_normalized(&new_entry, &normalized, &context())
            .unwrap();
        write.commit().unwrap();
        id
    });
    assert!(id > 0);
    assert_eq!(counts.dns, 1, "DN normalizations of one add: {counts:?}");
    // Every stored value (the client's and the operational ones the store stamps) once.
    let stored = stored_value_count(&store, &dn);
    assert!(
        stored > attributes.len() as u64,
        "operational values are stamped"
    );
    assert_eq!(counts.values, stored, "value normalizations of one add");
}

#[test]
fn typed_writes_do_not_normalize_their_dns_again() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(3), 10);
    let schema = store.schema();
    let target = schema.parse_normalized_dn(&person_dn(1)).unwrap();
    let superior = schema
        .parse_normalized_dn(&format!("ou=people,{SUFFIX}"))
        .unwrap();
    let replace = Modification {
        op: ModOp::Replace,
        description: "description".to_string(),
        values: vec![b"changed".to_vec()],
    };
    let mut write = store.write().unwrap();
    let ((), counts) = counted(|| {
        write.dn_to_id(&target).unwrap();
        write.deepest_existing(&target).unwrap();
        write.modify(&target, &[replace], &context()).unwrap();
    });
    assert_eq!(counts.dns, 0, "lookups and modify: {counts:?}");
    // A rename normalizes its new RDN, and nothing else of its DNs; of values only the ones
    // it stamps (the new RDN's value comes from the normalized RDN, the stored ones are taken
    // as they are).
    let (_, counts) = counted(|| {
        write
            .modrdn(&target, "uid=renamed", false, Some(&superior), &context())
            .unwrap()
    });
    assert_eq!(counts.dns, 1, "modrdn: {counts:?}");
    assert_eq!(counts.values, STAMPED_BY_MODIFY, "modrdn: {counts:?}");
    let renamed = schema
        .parse_normalized_dn(&format!("uid=renamed,ou=people,{SUFFIX}"))
        .unwrap();
    let (_, counts) = counted(|| write.delete(&renamed).unwrap());
    assert_eq!(counts, NormalizationCounts::default(), "delete");
    write.commit().unwrap();
}

/// Adds `dn` with `stored` values of `many` (plus what its classes need); the entry's values.
fn add_with_many_values(
    store: &lmdir_store::Store,
    dn: &str,
    base: &[(&str, &str)],
    many: &str,
    stored: usize,
) {
    let values: Vec<String> = (0..stored)
        .map(|index| format!("Stored value {index}"))
        .collect();
    let mut attributes = base.to_vec();
    attributes.extend(values.iter().map(|value| (many, value.as_str())));
    let mut write = store.write().unwrap();
    write.add(&entry(dn, &attributes), &context()).unwrap();
    write.commit().unwrap();
}

fn modification(op: ModOp, description: &str, values: &[String]) -> Modification {
    Modification {
        op,
        description: description.to_string(),
        values: values
            .iter()
            .map(|value| value.as_bytes().to_vec())
            .collect(),
    }
}

/// `count` values `prefix 0`, `prefix 1`, ...
fn values(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|index| format!("{prefix} {index}"))
        .collect()
}

/// The normalizations of one modify of `dn` (in its own committed txn).
fn modify_counted(
    store: &lmdir_store::Store,
    dn: &str,
    modifications: &[Modification],
) -> NormalizationCounts {
    let target = store.schema().parse_normalized_dn(dn).unwrap();
    let mut write = store.write().unwrap();
    let ((), counts) = counted(|| {
        write.modify(&target, modifications, &context()).unwrap();
    });
    write.commit().unwrap();
    counts
}

/// The operational values a modify stamps, each normalized once when stamped:
/// modifyTimestamp, modifiersName and entryCSN.
const STAMPED_BY_MODIFY: u64 = 3;

#[test]
fn a_modify_normalizes_each_request_value_once_whatever_the_entry_holds() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(2), 10);
    let base = [
        ("objectClass", "person"),
        ("sn", "Example"),
        ("telephoneNumber", "+1 555 0100"),
    ];
    let mut measured = Vec::new();
    for stored in [5, 40, 200] {
        let dn = format!("cn=Holder {stored},ou=people,{SUFFIX}");
        let mut with_cn = base.to_vec();
        let cn = format!("Holder {stored}");
        with_cn.push(("cn", &cn));
        add_with_many_values(&store, &dn, &with_cn, "description", stored);
        // Adds 3 values, deletes 2 stored ones, replaces telephoneNumber with 4 values.
        let modifications = [
            modification(ModOp::Add, "description", &values("Added value", 3)),
            modification(ModOp::Delete, "description", &values("Stored value", 2)),
            modification(ModOp::Replace, "telephoneNumber", &values("+1 555 02", 4)),
        ];
        let counts = modify_counted(&store, &dn, &modifications);
        eprintln!("modify of 3+2+4 values on an entry with {stored} descriptions: {counts:?}");
        measured.push((stored, counts));
    }
    for (stored, counts) in measured {
        assert_eq!(counts.dns, 0, "DN normalizations ({stored} stored)");
        assert_eq!(
            counts.values,
            9 + STAMPED_BY_MODIFY,
            "value normalizations of a 3+2+4-value modify ({stored} stored values)"
        );
    }
}

#[test]
fn a_point_modify_of_a_large_group_normalizes_each_request_value_once() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(2), 10);
    let dn = format!("cn=large,ou=groups,{SUFFIX}");
    let members: Vec<String> = (0..300)
        .map(|index| format!("uid=member{index},ou=people,{SUFFIX}"))
        .collect();
    let mut attributes = vec![("objectClass", "groupOfNames"), ("cn", "large")];
    attributes.extend(members.iter().map(|member| ("member", member.as_str())));
    let mut write = store.write().unwrap();
    write.add(&entry(&dn, &attributes), &context()).unwrap();
    write.commit().unwrap();
    let added: Vec<String> = (0..3)
        .map(|index| format!("uid=new{index},ou=people,{SUFFIX}"))
        .collect();
    // Adds 3 members and deletes 2 (point changes of the out-of-line values), replaces
    // description with 4 values (inline).
    let modifications = [
        modification(ModOp::Add, "member", &added),
        modification(ModOp::Delete, "member", &members[..2]),
        modification(ModOp::Replace, "description", &values("Line", 4)),
    ];
    let counts = modify_counted(&store, &dn, &modifications);
    eprintln!("point modify of 3+2+4 values on a 300-member group: {counts:?}");
    assert_eq!(counts.dns, 0, "DN normalizations: {counts:?}");
    assert_eq!(counts.values, 9 + STAMPED_BY_MODIFY, "value normalizations");
}
