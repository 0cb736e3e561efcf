//! A group big enough for many `id2value` blocks: random point adds and deletes of members
//! (splitting blocks, emptying them, changing their first values) keep the stored values equal
//! to a set model, every one of them found by the point lookups (equality filters, 20 / 16
//! answers), and `check` clean; prefix lookups find values across block edges.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use lmdir_schema::{Entry, Filter, LdapError, ModOp, Modification, ResultCode};
use lmdir_store::{layout, Scope, SearchSpec, Store};
use proptest::prelude::*;

const GROUP: &str = "cn=blocks,ou=groups,dc=example,dc=com";
/// Member indexes are below this.
const MEMBERS: usize = 600;

/// Long DNs (~110 bytes): a block holds a few dozen of them.
fn member_dn(index: usize) -> String {
    format!("uid=m{index:04},ou={},{SUFFIX}", "p".repeat(60))
}

fn normalized(index: usize) -> Vec<u8> {
    member_dn(index).to_ascii_lowercase().into_bytes()
}

fn tree() -> Vec<Entry> {
    vec![
        entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]),
        entry(
            &format!("ou=groups,{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", "groups")],
        ),
    ]
}

fn group(members: &BTreeSet<usize>) -> Entry {
    let mut group = entry(GROUP, &[("objectClass", "groupOfNames"), ("cn", "blocks")]);
    group.add_values(
        "member",
        members
            .iter()
            .map(|index| member_dn(*index).to_uppercase().into_bytes()),
    );
    group
}

fn modify(store: &Store, op: ModOp, indexes: &[usize]) -> Result<(), LdapError> {
    let mut write = store.write().unwrap();
    let values = indexes
        .iter()
        .map(|index| member_dn(*index).into_bytes())
        .collect();
    let modification = Modification {
        op,
        description: "member".to_string(),
        values,
    };
    write.modify(GROUP, &[modification], &context())?;
    write.commit().unwrap();
    Ok(())
}

fn stored_members(store: &Store) -> BTreeSet<Vec<u8>> {
    let read = store.read().unwrap();
    let id = read.dn_to_id(GROUP).unwrap();
    let entry = read.entry(id).unwrap().unwrap();
    let attribute = entry.attribute_by_text("member").unwrap();
    let values: BTreeSet<Vec<u8>> = attribute
        .values()
        .map(|(original, normalized)| {
            assert_eq!(original.to_ascii_lowercase(), normalized.to_vec());
            normalized.to_vec()
        })
        .collect();
    assert_eq!(
        values.len(),
        attribute.value_count(),
        "marker count = values"
    );
    // The internal walk (a whole-group read's) yields the iterator's originals, in its order.
    let mut walked = Vec::new();
    attribute
        .values()
        .for_each_original(|original| walked.push(original));
    let iterated: Vec<&[u8]> = attribute.values().map(|(original, _)| original).collect();
    assert_eq!(walked, iterated, "for_each_original = values()");
    values
}

/// Whether the group matches `filter` (a base search: the entry's own filter test).
fn group_matches(store: &Store, filter: &str) -> bool {
    let read = store.read().unwrap();
    let spec = SearchSpec {
        base: GROUP.to_string(),
        scope: Scope::Base,
        filter: store
            .schema()
            .prepare_filter(&Filter::parse(filter, 8).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    };
    read.search(&spec).unwrap().count() == 1
}

fn assert_clean(store: &Store) {
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
}

/// One step: add (absent ones) or delete (present ones) of the indexes start, start + stride,
/// … below start + length; a delete that would empty the group is skipped.
fn step(
    store: &Store,
    model: &mut BTreeSet<usize>,
    (add, start, length, stride): (bool, usize, usize, usize),
) {
    let chosen: Vec<usize> = (start..(start + length).min(MEMBERS))
        .step_by(stride)
        .filter(|index| model.contains(index) != add)
        .collect();
    if chosen.is_empty() || (!add && chosen.len() == model.len()) {
        return;
    }
    let op = if add { ModOp::Add } else { ModOp::Delete };
    modify(store, op, &chosen).unwrap();
    for index in chosen {
        if add {
            model.insert(index);
        } else {
            model.remove(&index);
        }
    }
}

/// Point lookups agree with the model for the block edges around `around`.
fn assert_lookups(store: &Store, model: &BTreeSet<usize>, around: usize) {
    for index in around.saturating_sub(2)..(around + 3).min(MEMBERS) {
        let present = model.contains(&index);
        let equality = format!("(member={})", member_dn(index));
        assert_eq!(group_matches(store, &equality), present, "{equality}");
        let op = if present { ModOp::Add } else { ModOp::Delete };
        let expected = if present {
            ResultCode::AttributeOrValueExists
        } else {
            ResultCode::NoSuchAttribute
        };
        let refused = modify(store, op, &[index]).unwrap_err();
        assert_eq!(refused.code, expected, "member {index}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn point_changes_over_many_blocks_follow_a_set_model(
        initial_stride in 1usize..4,
        steps in proptest::collection::vec(
            (any::<bool>(), 0..MEMBERS, 1usize..120, 1usize..4), 1..14),
    ) {
        let temporary = tempfile::tempdir().unwrap();
        let store = open(temporary.path());
        add_all(&store, &tree(), 10);
        let mut model: BTreeSet<usize> = (0..MEMBERS).step_by(initial_stride).collect();
        add_all(&store, &[group(&model)], 1);
        for one in steps {
            step(&store, &mut model, one);
            let wanted: BTreeSet<Vec<u8>> = model.iter().map(|index| normalized(*index)).collect();
            prop_assert_eq!(stored_members(&store), wanted);
            assert_lookups(&store, &model, one.1);
            assert_clean(&store);
        }
    }
}

/// Deleting every member of a run of blocks (first values, last values, whole blocks) and
/// adding them back in reverse order, one request each.
#[test]
fn emptying_and_refilling_blocks_one_value_at_a_time() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &tree(), 10);
    let mut model: BTreeSet<usize> = (0..MEMBERS).collect();
    add_all(&store, &[group(&model)], 1);
    for index in 100..300 {
        modify(&store, ModOp::Delete, &[index]).unwrap();
        model.remove(&index);
    }
    assert_clean(&store);
    for index in (100..300).rev() {
        modify(&store, ModOp::Add, &[index]).unwrap();
        model.insert(index);
    }
    let wanted: BTreeSet<Vec<u8>> = model.iter().map(|index| normalized(*index)).collect();
    assert_eq!(stored_members(&store), wanted);
    assert_lookups(&store, &model, 0);
    assert_lookups(&store, &model, 299);
    assert_lookups(&store, &model, MEMBERS - 1);
    assert_clean(&store);
}

/// Substring filters with an initial part on an out-of-line description of many blocks: the
/// values sharing a prefix are found whether they start a block, end one or span two.
#[test]
fn initial_substrings_find_values_across_blocks() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &tree(), 10);
    let mut group = group(&[0].into_iter().collect());
    let topic = |index: usize| format!("Topic {index:04} {}", "t".repeat(100));
    group.add_values(
        "description",
        (0..400)
            .filter(|index| index % 7 != 3)
            .map(|index| topic(index).into_bytes()),
    );
    add_all(&store, &[group], 1);
    for index in 0..400 {
        let filter = format!("(description=topic {index:04} *)");
        assert_eq!(group_matches(&store, &filter), index % 7 != 3, "{filter}");
    }
    for (prefix, matches) in [
        ("topic 00", true),
        ("topic 039", true),
        ("topic 04", false),
        ("a", false),
        ("zz", false),
    ] {
        let filter = format!("(description={prefix}*)");
        assert_eq!(group_matches(&store, &filter), matches, "{filter}");
    }
    // Taking values out one by one: the rest are still found.
    for index in (0..399).filter(|index| index % 7 == 0) {
        let mut write = store.write().unwrap();
        let modification = Modification {
            op: ModOp::Delete,
            description: "description".to_string(),
            values: vec![topic(index).into_bytes()],
        };
        write.modify(GROUP, &[modification], &context()).unwrap();
        write.commit().unwrap();
        let gone = format!("(description=topic {index:04} *)");
        assert!(!group_matches(&store, &gone), "{gone}");
        let next = format!("(description=topic {:04} *)", index + 1);
        assert!(group_matches(&store, &next), "{next}");
    }
    assert_clean(&store);
}

/// The group's `id2value` blocks.
fn block_count(store: &Store) -> usize {
    let id = store.read().unwrap().dn_to_id(GROUP).unwrap();
    let database = store.id2value_database().unwrap();
    let raw = store.env().read_txn().unwrap();
    let mut prefix = Vec::new();
    layout::value_key_prefix(id, None, &mut prefix);
    database.prefix_iter(&raw, &prefix).unwrap().count()
}

/// Deleting four of every five members of a range leaves its blocks a fifth full: a block a
/// delete leaves small takes in the next one, so the range ends in fewer blocks.
#[test]
fn blocks_thinned_by_deletes_merge() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &tree(), 10);
    let mut model: BTreeSet<usize> = (0..MEMBERS).collect();
    add_all(&store, &[group(&model)], 1);
    let before = block_count(&store);
    for index in (100..400).filter(|index| index % 5 != 0) {
        modify(&store, ModOp::Delete, &[index]).unwrap();
        model.remove(&index);
    }
    let after = block_count(&store);
    // The range held ~14 of the 28 blocks; thinned without merging they would all stay (a
    // fifth of their values left, ~8.7 KB, merges into ~8 blocks of at most half the bound).
    assert!(after + 5 <= before, "{before} blocks before, {after} after");
    let wanted: BTreeSet<Vec<u8>> = model.iter().map(|index| normalized(*index)).collect();
    assert_eq!(stored_members(&store), wanted);
    assert_lookups(&store, &model, 100);
    assert_lookups(&store, &model, 250);
    assert_clean(&store);
}

/// A version-2 record (no values byte lengths) of what a version-4 record holds: what a
/// format-2 store has on disk.
fn version_two_record(record: &[u8]) -> Vec<u8> {
    use lmdir_store::codec::{EncodedEntry, NormalizedValue};
    fn varint(mut value: u64, out: &mut Vec<u8>) {
        while value >= 0x80 {
            out.push(value as u8 | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }
    let entry = EncodedEntry::parse(record).unwrap();
    assert!(!entry.has_out_of_line());
    let mut out = vec![2];
    varint(entry.attribute_count() as u64, &mut out);
    for attribute in entry.attributes() {
        varint(u64::from(attribute.description_number), &mut out);
        varint(attribute.value_count as u64, &mut out);
        for (original, normalized) in attribute.values() {
            varint(original.len() as u64, &mut out);
            match normalized {
                NormalizedValue::AsciiLowercaseOf(_) => out.push(1),
                NormalizedValue::Stored(bytes) if bytes == original => out.push(0),
                NormalizedValue::Stored(bytes) => varint(bytes.len() as u64 + 2, &mut out),
            }
            out.extend_from_slice(original);
            if let NormalizedValue::Stored(bytes) = normalized {
                if bytes != original {
                    out.extend_from_slice(bytes);
                }
            }
        }
    }
    out
}

/// A format-2 store (entry records of version 2, no values byte lengths) opens with this build:
/// its number becomes 3 at the read-write open, its records read and search as before, and a
/// change rewrites a record as version 4.
#[test]
fn a_format_two_store_is_upgraded_in_place_and_its_records_read() {
    let temporary = tempfile::tempdir().unwrap();
    let ou = format!("ou=groups,{SUFFIX}");
    let before = {
        let store = open(temporary.path());
        let mut write = store.write().unwrap();
        for entry in tree() {
            write.add(&entry, &context()).unwrap();
        }
        write.commit().unwrap();
        let read = store.read().unwrap();
        let id = read.dn_to_id(&ou).unwrap();
        let entry = read.entry(id).unwrap().unwrap();
        let before = entry.to_entry(lmdir_schema::Dn::parse(&ou).unwrap());
        let key = id.to_be_bytes();
        let record = store
            .id2entry_database()
            .get(read.raw_txn(), &key)
            .unwrap()
            .unwrap()
            .to_vec();
        drop(read);
        let mut raw = store.env().write_txn().unwrap();
        store
            .id2entry_database()
            .put(&mut raw, &key, &version_two_record(&record))
            .unwrap();
        store
            .meta_database()
            .put(&mut raw, layout::META_FORMAT_VERSION, &2u32.to_be_bytes())
            .unwrap();
        raw.commit().unwrap();
        before
    };
    let store = open(temporary.path());
    let read = store.read().unwrap();
    let version = store
        .meta_database()
        .get(read.raw_txn(), layout::META_FORMAT_VERSION)
        .unwrap()
        .unwrap()
        .to_vec();
    assert_eq!(version, layout::FORMAT_VERSION.to_be_bytes(), "upgraded");
    let id = read.dn_to_id(&ou).unwrap();
    let entry = read.entry(id).unwrap().unwrap();
    assert_eq!(
        entry.to_entry(lmdir_schema::Dn::parse(&ou).unwrap()),
        before
    );
    let record = store
        .id2entry_database()
        .get(read.raw_txn(), &id.to_be_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(record[0], 2, "read as it is, not rewritten");
    drop(read);
    let spec = SearchSpec {
        base: SUFFIX.to_string(),
        scope: Scope::Sub,
        filter: store.schema().prepare_filter(
            &Filter::parse("(&(ou=groups)(objectClass=organizationalUnit))", 8).unwrap(),
        ),
        size_limit: 0,
        lookthrough_limit: 0,
    };
    assert_eq!(store.read().unwrap().search(&spec).unwrap().count(), 1);
    let mut write = store.write().unwrap();
    let modification = Modification {
        op: ModOp::Add,
        description: "description".to_string(),
        values: vec![b"rewritten".to_vec()],
    };
    write.modify(&ou, &[modification], &context()).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    let record = store
        .id2entry_database()
        .get(read.raw_txn(), &id.to_be_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(record[0], lmdir_store::codec::ENTRY_FORMAT_VERSION);
    drop(read);
    assert_clean(&store);
}

/// A store of the format before blocks (one row per value) is refused at open, naming both
/// format versions, rather than misread.
#[test]
fn a_store_of_the_previous_format_is_refused_by_version() {
    let temporary = tempfile::tempdir().unwrap();
    {
        let store = open(temporary.path());
        let mut raw = store.env().write_txn().unwrap();
        store
            .meta_database()
            .put(&mut raw, layout::META_FORMAT_VERSION, &1u32.to_be_bytes())
            .unwrap();
        raw.commit().unwrap();
    }
    let error = Store::open(temporary.path(), options(), schema())
        .err()
        .expect("refused");
    let message = error.to_string();
    assert!(
        message.contains("format version 1")
            && message.contains(&format!("reads version {}", layout::FORMAT_VERSION)),
        "{message}"
    );
}
