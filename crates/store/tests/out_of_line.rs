//! Large multi-valued attributes out of line (`id2value`): an entry reads back the same
//! whether its values are in the record or not, point modifies of member values agree with a
//! model, answer 20 / 16 as the general way does, keep memberOf and the member index exact,
//! and the threshold moves an attribute out and back in. `check` stays clean throughout.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use lmdir_schema::{Entry, Filter, LdapError, ModOp, Modification, ResultCode};
use lmdir_store::{layout, Scope, SearchSpec, Store};
use proptest::prelude::*;

const GROUP: &str = "cn=big,ou=groups,dc=example,dc=com";

fn member_dn(index: usize) -> String {
    format!("uid=m{index},ou=people,{SUFFIX}")
}

fn tree() -> Vec<Entry> {
    vec![
        entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]),
        entry(
            &format!("ou=people,{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", "people")],
        ),
        entry(
            &format!("ou=groups,{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", "groups")],
        ),
    ]
}

fn person(index: usize) -> Entry {
    entry(
        &member_dn(index),
        &[("objectClass", "account"), ("uid", &format!("m{index}"))],
    )
}

/// A group of `members` (spelled in upper case, so originals differ from normalized forms)
/// and `descriptions` description values.
fn group(members: &[usize], descriptions: usize) -> Entry {
    let mut group = entry(GROUP, &[("objectClass", "groupOfNames"), ("cn", "big")]);
    group.add_values(
        "member",
        members
            .iter()
            .map(|index| member_dn(*index).to_uppercase().into_bytes()),
    );
    if descriptions > 0 {
        group.add_values(
            "description",
            (0..descriptions).map(|index| format!("Topic {index}").into_bytes()),
        );
    }
    group
}

fn assert_clean(store: &Store) {
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
}

/// (original, normalized) values.
type Values = BTreeSet<(Vec<u8>, Vec<u8>)>;

/// The group's values of `name` as (original, normalized) and whether they live out of line.
fn stored_values(store: &Store, name: &str) -> (Values, bool) {
    let read = store.read().unwrap();
    let id = read.dn_to_id(GROUP).unwrap();
    let entry = read.entry(id).unwrap().unwrap();
    let Some(attribute) = entry.attribute_by_text(name) else {
        return (BTreeSet::new(), false);
    };
    let values: BTreeSet<_> = attribute
        .values()
        .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
        .collect();
    assert_eq!(
        values.len(),
        attribute.value_count(),
        "marker count = values"
    );
    (values, attribute.is_out_of_line())
}

fn modify(store: &Store, modifications: &[Modification]) -> Result<(), LdapError> {
    let mut write = store.write().unwrap();
    write.modify(GROUP, modifications, &context())?;
    write.commit().unwrap();
    Ok(())
}

fn change(op: ModOp, name: &str, values: Vec<Vec<u8>>) -> Modification {
    Modification {
        op,
        description: name.to_string(),
        values,
    }
}

fn member_values(indexes: &[usize]) -> Vec<Vec<u8>> {
    indexes
        .iter()
        .map(|index| member_dn(*index).into_bytes())
        .collect()
}

/// Groups whose `member` equals the DN, by the store's search (equality index on member).
fn groups_naming(store: &Store, index: usize) -> usize {
    let read = store.read().unwrap();
    let filter = format!("(member={})", member_dn(index));
    let spec = SearchSpec {
        base: SUFFIX.to_string(),
        scope: Scope::Sub,
        filter: store
            .schema()
            .prepare_filter(&Filter::parse(&filter, 8).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    };
    read.search(&spec).unwrap().count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Whatever the counts (around the threshold), the values read back are those added, in
    /// the record or out of line as `layout::is_out_of_line` says.
    #[test]
    fn values_read_back_in_or_out_of_line(
        members in 1usize..40,
        descriptions in prop_oneof![0usize..4, 250usize..262],
    ) {
        let temporary = tempfile::tempdir().unwrap();
        let store = open(temporary.path());
        add_all(&store, &tree(), 10);
        let indexes: Vec<usize> = (0..members).collect();
        let group = group(&indexes, descriptions);
        add_all(&store, std::slice::from_ref(&group), 1);
        let (stored, outside) = stored_values(&store, "member");
        prop_assert!(outside, "member always lives out of line");
        let expected: BTreeSet<Vec<u8>> = group.attributes.iter()
            .find(|attribute| attribute.description == "member").unwrap()
            .values.iter().cloned().collect();
        let originals: BTreeSet<Vec<u8>> = stored.iter().map(|(original, _)| original.clone()).collect();
        prop_assert_eq!(originals, expected);
        for (original, normalized) in &stored {
            prop_assert_eq!(&original.to_ascii_lowercase(), normalized);
        }
        let (stored, outside) = stored_values(&store, "description");
        prop_assert_eq!(stored.len(), descriptions);
        prop_assert_eq!(outside, layout::is_out_of_line(false, descriptions));
        assert_clean(&store);
    }

    /// Random point adds and deletes of members agree with a set model, with the general
    /// way's answers for a value already there (20) or missing (16), the member index exact.
    #[test]
    fn point_member_changes_follow_a_model(
        steps in proptest::collection::vec((any::<bool>(), proptest::collection::vec(0usize..80, 1..4)), 1..12),
    ) {
        let temporary = tempfile::tempdir().unwrap();
        let store = open(temporary.path());
        add_all(&store, &tree(), 10);
        let mut model: BTreeSet<usize> = (0..80).step_by(2).collect();
        let initial: Vec<usize> = model.iter().copied().collect();
        add_all(&store, &[group(&initial, 0)], 1);
        for (add, indexes) in steps {
            let distinct: BTreeSet<usize> = indexes.iter().copied().collect();
            let op = if add { ModOp::Add } else { ModOp::Delete };
            let result = modify(&store, &[change(op, "member", member_values(&indexes))]);
            let repeated = distinct.len() != indexes.len();
            let expected = if add && (repeated || distinct.iter().any(|index| model.contains(index))) {
                Err(ResultCode::AttributeOrValueExists)
            } else if !add && distinct.iter().any(|index| !model.contains(index)) {
                Err(ResultCode::NoSuchAttribute)
            } else {
                // Emptying the group (the general way answers objectClassViolation) included.
                Ok(())
            };
            let emptied = !add && expected.is_ok() && distinct.len() == model.len();
            match (result, emptied) {
                (Err(error), true) => prop_assert_eq!(error.code, ResultCode::ObjectClassViolation),
                (result, _) => {
                    prop_assert_eq!(result.map_err(|error| error.code), expected);
                    if expected.is_ok() {
                        for index in &distinct {
                            if add { model.insert(*index); } else { model.remove(index); }
                        }
                    }
                }
            }
            let (stored, _) = stored_values(&store, "member");
            let names: BTreeSet<Vec<u8>> = stored.into_iter().map(|(_, normalized)| normalized).collect();
            let wanted: BTreeSet<Vec<u8>> = model.iter().map(|index| member_dn(*index).to_ascii_lowercase().into_bytes()).collect();
            prop_assert_eq!(names, wanted);
        }
        for index in [0usize, 1, 2, 3, 79] {
            prop_assert_eq!(groups_naming(&store, index), usize::from(model.contains(&index)));
        }
        assert_clean(&store);
    }
}

#[test]
fn one_request_deleting_and_adding_the_same_member_keeps_it() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &tree(), 10);
    add_all(&store, &[group(&[1, 2, 3], 0)], 1);
    modify(
        &store,
        &[
            change(ModOp::Delete, "member", member_values(&[2])),
            change(ModOp::Add, "member", member_values(&[2, 4])),
            change(ModOp::Replace, "description", vec![b"changed".to_vec()]),
        ],
    )
    .unwrap();
    let (stored, _) = stored_values(&store, "member");
    assert_eq!(stored.len(), 4);
    assert_eq!(groups_naming(&store, 2), 1);
    assert_eq!(groups_naming(&store, 4), 1);
    let (description, outside) = stored_values(&store, "description");
    assert_eq!(description.len(), 1);
    assert!(!outside);
    // A syntax error in a point value is the general way's answer, and nothing is written.
    let error = modify(
        &store,
        &[
            change(ModOp::Add, "member", member_values(&[5])),
            change(ModOp::Add, "member", vec![b"not a dn".to_vec()]),
        ],
    )
    .unwrap_err();
    assert_eq!(error.code, ResultCode::InvalidDnSyntax);
    assert_eq!(groups_naming(&store, 5), 0);
    assert_clean(&store);
}

#[test]
fn point_changes_keep_memberof() {
    let temporary = tempfile::tempdir().unwrap();
    let mut options = options();
    options.memberof = true;
    let store = Store::open(temporary.path(), options, schema()).unwrap();
    let mut entries = tree();
    entries.extend((0..5).map(person));
    add_all(&store, &entries, 10);
    add_all(&store, &[group(&[0, 1, 2], 0)], 1);
    let memberof = |index: usize| -> Vec<String> {
        let read = store.read().unwrap();
        let id = read.dn_to_id(&member_dn(index)).unwrap();
        let attr = read.schema().attribute("memberOf").unwrap();
        read.entry(id)
            .unwrap()
            .unwrap()
            .values_of(attr)
            .iter()
            .map(|(original, _)| String::from_utf8(original.to_vec()).unwrap())
            .collect()
    };
    assert_eq!(memberof(1), [GROUP]);
    modify(&store, &[change(ModOp::Add, "member", member_values(&[3]))]).unwrap();
    modify(
        &store,
        &[change(ModOp::Delete, "member", member_values(&[1]))],
    )
    .unwrap();
    assert_eq!(memberof(3), [GROUP]);
    assert!(memberof(1).is_empty());
    assert_eq!(memberof(0), [GROUP]);
    // Deleting a member entry drops it from the group (through the general way).
    let mut write = store.write().unwrap();
    write.delete(&member_dn(0)).unwrap();
    write.commit().unwrap();
    let (stored, _) = stored_values(&store, "member");
    assert_eq!(stored.len(), 2);
    assert_clean(&store);
}

#[test]
fn the_threshold_moves_an_attribute_out_and_back_in() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &tree(), 10);
    let at_threshold = layout::OUT_OF_LINE_VALUES_MIN;
    add_all(&store, &[group(&[1], at_threshold)], 1);
    assert!(!stored_values(&store, "description").1);
    let one_more = vec![b"Topic extra".to_vec()];
    modify(
        &store,
        &[change(ModOp::Add, "description", one_more.clone())],
    )
    .unwrap();
    let (values, outside) = stored_values(&store, "description");
    assert!(outside);
    assert_eq!(values.len(), at_threshold + 1);
    assert_clean(&store);
    // A point add and delete while out of line, then back to the threshold: inline again.
    modify(
        &store,
        &[change(
            ModOp::Add,
            "description",
            vec![b"Topic two".to_vec()],
        )],
    )
    .unwrap();
    assert!(stored_values(&store, "description").1);
    modify(
        &store,
        &[change(
            ModOp::Delete,
            "description",
            vec![b"topic TWO".to_vec(), b"Topic extra".to_vec()],
        )],
    )
    .unwrap();
    let (values, outside) = stored_values(&store, "description");
    assert!(!outside);
    assert_eq!(values.len(), at_threshold);
    assert_clean(&store);
    // Deleting the group leaves no id2value row behind.
    let mut write = store.write().unwrap();
    write.delete(GROUP).unwrap();
    write.commit().unwrap();
    assert_clean(&store);
    let names = store.database_names();
    assert!(names.iter().any(|name| name == layout::DB_ID2VALUE));
    let digests = store.database_digests(&[]).unwrap();
    let values = digests
        .iter()
        .find(|digest| digest.name == layout::DB_ID2VALUE)
        .unwrap();
    assert_eq!(values.rows, 0);
}

/// `check` names an out-of-line value that is missing, one that is there without a marker and
/// a malformed row.
#[test]
fn check_names_damaged_id2value_rows() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &tree(), 10);
    add_all(&store, &[group(&[1, 2, 3], 0)], 1);
    assert_clean(&store);
    let id = store.read().unwrap().dn_to_id(GROUP).unwrap();
    let number = store.descriptions().number_of("member").unwrap();
    let database = store.id2value_database().unwrap();
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut raw = store.env().write_txn().unwrap();
    // The group's three values are one block: take the second out of it.
    layout::value_key_prefix(id, Some(number), &mut key);
    let (block_key, block) = {
        let (block_key, block) = database
            .prefix_iter(&raw, &key)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        (block_key.to_vec(), block.to_vec())
    };
    let gone = member_dn(2).to_ascii_lowercase();
    let mut edited = Vec::new();
    assert!(layout::block_remove(&block, gone.as_bytes(), &mut edited).unwrap());
    database.put(&mut raw, &block_key, &edited).unwrap();
    layout::encode_value_row(id, number + 40, b"x", b"x", &mut key, &mut value);
    let mut stray = Vec::new();
    layout::push_block_value(b"x", &value, &mut stray);
    database.put(&mut raw, &key, &stray).unwrap();
    layout::encode_value_key(id + 1, number, b"y", &mut key);
    database.put(&mut raw, &key, &[9]).unwrap();
    raw.commit().unwrap();
    let report = store.check().unwrap();
    let problems = report.problems.join("\n");
    assert!(
        problems.contains("marks 3 values, id2value holds 2"),
        "{problems}"
    );
    assert!(
        problems.contains("without an out-of-line marker"),
        "{problems}"
    );
    assert!(problems.contains("malformed block"), "{problems}");
}

/// Deleting or renaming a member fixes the big groups by point writes: member values, and
/// uniqueMember values with or without a `#uid`.
#[test]
fn deleting_and_renaming_members_fix_out_of_line_groups() {
    let temporary = tempfile::tempdir().unwrap();
    let mut options = options();
    options.memberof = true;
    let store = Store::open(temporary.path(), options, schema()).unwrap();
    let mut entries = tree();
    entries.extend((0..4).map(person));
    add_all(&store, &entries, 10);
    add_all(&store, &[group(&[0, 1, 2, 3], 0)], 1);
    let unique_dn = format!("cn=unique,ou=groups,{SUFFIX}");
    let mut unique = entry(
        &unique_dn,
        &[("objectClass", "groupOfUniqueNames"), ("cn", "unique")],
    );
    unique.add_values(
        "uniqueMember",
        [
            format!("{}#'0101'B", member_dn(1)).into_bytes(),
            member_dn(1).into_bytes(),
            member_dn(2).into_bytes(),
            member_dn(3).into_bytes(),
        ],
    );
    add_all(&store, &[unique], 1);
    let mut write = store.write().unwrap();
    write.delete(&member_dn(1)).unwrap();
    write
        .modrdn(&member_dn(2), "uid=m2b", true, None, &context())
        .unwrap();
    write.commit().unwrap();
    let renamed = format!("uid=m2b,ou=people,{SUFFIX}");
    let normalized = |name: &str, dn: &str| -> BTreeSet<String> {
        let read = store.read().unwrap();
        let id = read.dn_to_id(dn).unwrap();
        let entry = read.entry(id).unwrap().unwrap();
        let attribute = entry.attribute_by_text(name).unwrap();
        attribute
            .values()
            .map(|(_, normalized)| String::from_utf8(normalized.to_vec()).unwrap())
            .collect()
    };
    let expected: BTreeSet<String> = [member_dn(0), renamed.clone(), member_dn(3)]
        .iter()
        .map(|dn| dn.to_ascii_lowercase())
        .collect();
    assert_eq!(normalized("member", GROUP), expected);
    let expected: BTreeSet<String> = [renamed.clone(), member_dn(3)]
        .iter()
        .map(|dn| dn.to_ascii_lowercase())
        .collect();
    assert_eq!(normalized("uniqueMember", &unique_dn), expected);
    assert_eq!(groups_naming(&store, 1), 0);
    assert_clean(&store);
}

/// A provider's whole entry replaces a big group by the values that differ (a member gone, one
/// new, one respelled), the rest of the record as sent.
#[test]
fn replacing_a_big_group_as_a_provider_sent_it() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &tree(), 10);
    add_all(&store, &[group(&[1, 2, 3, 4], 300)], 1);
    let mut sent = group(&[2, 3, 4, 5], 0);
    for attribute in &mut sent.attributes {
        if attribute.description == "member" {
            // Member 2 respelled in lower case: the same value, a new original.
            attribute.values[0] = member_dn(2).into_bytes();
        }
    }
    sent.add_values("description", [b"only one".to_vec()]);
    let id = store.read().unwrap().dn_to_id(GROUP).unwrap();
    // As a consumer applies it (crates/server/src/replication/apply.rs).
    let replicated = lmdir_store::WriteContext {
        relax: true,
        replicated: true,
        skip_schema_check: true,
        ..context()
    };
    let mut write = store.write().unwrap();
    write.replace_entry(id, &sent, &replicated).unwrap();
    write.commit().unwrap();
    let (members, outside) = stored_values(&store, "member");
    assert!(outside);
    let originals: BTreeSet<Vec<u8>> = members.into_iter().map(|(original, _)| original).collect();
    let expected: BTreeSet<Vec<u8>> = [
        member_dn(2),
        member_dn(3).to_uppercase(),
        member_dn(4).to_uppercase(),
        member_dn(5).to_uppercase(),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect();
    assert_eq!(originals, expected);
    let (descriptions, outside) = stored_values(&store, "description");
    assert_eq!(descriptions.len(), 1);
    assert!(!outside);
    assert_eq!(groups_naming(&store, 1), 0);
    assert_eq!(groups_naming(&store, 5), 1);
    assert_clean(&store);
    // Again with only the members changed: the point way (one gone, one new).
    let mut again = group(&[2, 3, 4, 6], 0);
    again.add_values("description", [b"only one".to_vec()]);
    let mut write = store.write().unwrap();
    write.replace_entry(id, &again, &replicated).unwrap();
    write.commit().unwrap();
    assert_eq!(stored_values(&store, "member").0.len(), 4);
    assert_eq!(groups_naming(&store, 5), 0);
    assert_eq!(groups_naming(&store, 6), 1);
    assert_clean(&store);
}
