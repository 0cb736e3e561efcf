//! Every search lists each entry once and after its parent, whatever order the IDs are in:
//! random trees grown by adds, rearranged by modrdn with newSuperior (older subtrees moved
//! under newer parents) and pruned by deletes, searched whole, one level and paged.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use common::*;
use lmdir_schema::Filter;
use lmdir_store::{EntryId, ReadTxn, Scope, SearchSpec, Store};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Operation {
    /// Adds a new unit under the existing node picked by the index.
    Add(usize),
    /// Moves the node picked by the first index under the one picked by the second.
    Move(usize, usize),
    /// Deletes the leaf picked by the index.
    Delete(usize),
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        3 => any::<usize>().prop_map(Operation::Add),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(node, parent)| Operation::Move(node, parent)),
        1 => any::<usize>().prop_map(Operation::Delete),
    ]
}

/// The tree as the test believes it is: unit number → parent unit (None: the suffix).
#[derive(Default)]
struct Model {
    parents: BTreeMap<u32, Option<u32>>,
    next: u32,
}

impl Model {
    fn dn(&self, unit: Option<u32>) -> String {
        let mut dn = SUFFIX.to_string();
        let mut current = unit;
        let mut rdns = Vec::new();
        while let Some(unit) = current {
            rdns.push(format!("ou=n{unit}"));
            current = self.parents[&unit];
        }
        for rdn in rdns.iter().rev() {
            dn = format!("{rdn},{dn}");
        }
        dn
    }

    fn is_within(&self, unit: u32, ancestor: u32) -> bool {
        let mut current = Some(unit);
        while let Some(here) = current {
            if here == ancestor {
                return true;
            }
            current = self.parents[&here];
        }
        false
    }

    fn pick(&self, index: usize) -> Option<u32> {
        let units: Vec<u32> = self.parents.keys().copied().collect();
        (!units.is_empty()).then(|| units[index % units.len()])
    }

    /// Applies an operation to the store and the model (operations that make no sense for
    /// the current tree are skipped).
    fn apply(&mut self, store: &Store, operation: &Operation) {
        let context = context();
        let mut write = store.write().unwrap();
        match *operation {
            Operation::Add(parent) => {
                // Index 0 of every 4 adds at the top, the rest under an existing unit.
                let parent = if parent % 4 == 0 {
                    None
                } else {
                    self.pick(parent / 4)
                };
                let unit = self.next;
                self.next += 1;
                let dn = format!("ou=n{unit},{}", self.dn(parent));
                let parity = if unit.is_multiple_of(2) {
                    "even"
                } else {
                    "odd"
                };
                let new = entry(
                    &dn,
                    &[
                        ("objectClass", "organizationalUnit"),
                        ("ou", &format!("n{unit}")),
                        ("description", parity),
                    ],
                );
                write.add(&new, &context).unwrap();
                self.parents.insert(unit, parent);
            }
            Operation::Move(node, parent) => {
                let (Some(node), Some(parent)) = (self.pick(node), self.pick(parent)) else {
                    return;
                };
                if self.is_within(parent, node) || self.parents[&node] == Some(parent) {
                    return;
                }
                let (old, superior) = (self.dn(Some(node)), self.dn(Some(parent)));
                write
                    .modrdn(
                        &old,
                        &format!("ou=n{node}"),
                        false,
                        Some(&write.normalized_dn(&superior).unwrap()),
                        &context,
                    )
                    .unwrap();
                self.parents.insert(node, Some(parent));
            }
            Operation::Delete(leaf) => {
                let leaves: Vec<u32> = self
                    .parents
                    .keys()
                    .copied()
                    .filter(|unit| !self.parents.values().any(|parent| *parent == Some(*unit)))
                    .collect();
                if leaves.is_empty() {
                    return;
                }
                let leaf = leaves[leaf % leaves.len()];
                write.delete(&self.dn(Some(leaf))).unwrap();
                self.parents.remove(&leaf);
            }
        }
        write.commit().unwrap();
    }
}

fn spec(base: &str, scope: Scope, filter: &str) -> SearchSpec {
    SearchSpec {
        base: base.to_string(),
        scope,
        filter: schema().prepare_filter(&Filter::parse(filter, 16).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    }
}

fn all_ids(read: &ReadTxn, spec: &SearchSpec) -> Vec<EntryId> {
    read.search(spec)
        .unwrap()
        .map(|result| result.unwrap().0)
        .collect()
}

/// The same search in pages of `page_size`, each page a new read txn resuming from the
/// position of the first entry it did not take.
fn paged_ids(store: &Store, spec: &SearchSpec, page_size: usize) -> Vec<EntryId> {
    let mut ids = Vec::new();
    let mut resume = None;
    loop {
        let read = store.read().unwrap();
        let mut cursor = read.search(spec).unwrap();
        if let Some(position) = resume {
            cursor = cursor.resume_from(position);
        }
        let mut page = 0;
        resume = None;
        while let Some(result) = cursor.next() {
            let (id, _) = result.unwrap();
            if page == page_size {
                resume = cursor.last_position();
                break;
            }
            ids.push(id);
            page += 1;
        }
        if resume.is_none() {
            return ids;
        }
    }
}

/// Each entry once, each after its parent when the parent is listed too.
fn assert_parents_first(read: &ReadTxn, ids: &[EntryId], what: &str) {
    let mut seen = BTreeSet::new();
    for id in ids {
        assert!(
            seen.insert(*id),
            "{what}: entry {id} listed twice in {ids:?}"
        );
    }
    let places: HashMap<EntryId, usize> =
        ids.iter().enumerate().map(|(at, id)| (*id, at)).collect();
    for (at, id) in ids.iter().enumerate() {
        let parent = read.parent_of(*id).unwrap().unwrap();
        if let Some(parent_at) = places.get(&parent) {
            assert!(
                *parent_at < at,
                "{what}: entry {id} listed before its parent {parent} in {ids:?}"
            );
        }
    }
}

fn check_every_output(store: &Store, model: &Model, page_size: usize) {
    let read = store.read().unwrap();
    let id_of = |unit: u32| read.dn_to_id(&model.dn(Some(unit))).unwrap();
    let mut bases = vec![None];
    bases.extend(model.pick(0).map(Some));
    bases.extend(model.pick(model.next as usize / 2).map(Some));
    let units_filter = {
        let wanted: String = model
            .parents
            .keys()
            .step_by(2)
            .map(|unit| format!("(ou=n{unit})"))
            .collect();
        format!("(|(ou=none){wanted})")
    };
    for base in bases {
        for scope in [Scope::Sub, Scope::One] {
            for filter in [
                "(objectClass=*)",
                "(description=odd)",
                units_filter.as_str(),
            ] {
                let spec = spec(&model.dn(base), scope, filter);
                let what = format!("{base:?} {scope:?} {filter}");
                let ids = all_ids(&read, &spec);
                assert_parents_first(&read, &ids, &what);
                // Exactly the matching entries in scope.
                let matcher = |unit: &u32| {
                    let in_scope = match scope {
                        Scope::One => model.parents[unit] == base,
                        _ => base.is_none_or(|base| model.is_within(*unit, base)),
                    };
                    let matches = match filter {
                        "(description=odd)" => unit % 2 == 1,
                        "(objectClass=*)" => true,
                        _ => units_filter.contains(&format!("(ou=n{unit})")),
                    };
                    in_scope && matches
                };
                let mut expected: BTreeSet<EntryId> = model
                    .parents
                    .keys()
                    .filter(|unit| matcher(unit))
                    .map(|unit| id_of(*unit))
                    .collect();
                let suffix = read.dn_to_id(SUFFIX).unwrap();
                if base.is_none() && scope == Scope::Sub && filter == "(objectClass=*)" {
                    expected.insert(suffix);
                }
                assert_eq!(
                    ids.iter().copied().collect::<BTreeSet<_>>(),
                    expected,
                    "{what}"
                );
                assert_eq!(
                    paged_ids(store, &spec, page_size),
                    ids,
                    "{what} paged by {page_size}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_output_lists_parents_first(
        operations in prop::collection::vec(operation(), 1..60),
        page_size in 1usize..6,
    ) {
        let temporary = tempfile::tempdir().unwrap();
        let store = open(temporary.path());
        let mut write = store.write().unwrap();
        write
            .add(&suffix_entry(), &context())
            .unwrap();
        write.commit().unwrap();
        let mut model = Model::default();
        for operation in &operations {
            model.apply(&store, operation);
        }
        check_every_output(&store, &model, page_size);
        let report = store.check().unwrap();
        prop_assert!(report.is_clean(), "{report}");
    }
}

/// A subtree moved under a newer parent: searches list the new parent first, and the store
/// goes back to plain ID order once the move is undone.
#[test]
fn moved_subtree_comes_after_its_new_parent_until_moved_back() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    let mut model = Model::default();
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    write.commit().unwrap();
    for parent in [0, 1, 5, 9] {
        model.apply(&store, &Operation::Add(parent)); // n0 top, n1..n3 under existing units
    }
    model.apply(&store, &Operation::Add(0)); // n4 at the top, newest
    let (n0, n4) = (0, 4);
    model.apply(&store, &Operation::Move(n0, n4));
    assert_eq!(model.parents[&0], Some(4));
    let read = store.read().unwrap();
    assert!(read.has_inverted_links().unwrap());
    let ids = all_ids(&read, &spec(SUFFIX, Scope::Sub, "(objectClass=*)"));
    assert_parents_first(&read, &ids, "after the move");
    assert_eq!(ids.len(), 6);
    drop(read);
    model.apply(&store, &Operation::Add(0)); // n5, so that n0 can move back to the top
    let mut write = store.write().unwrap();
    write
        .modrdn(
            &model.dn(Some(0)),
            "ou=n0",
            false,
            Some(&write.normalized_dn(SUFFIX).unwrap()),
            &context(),
        )
        .unwrap();
    write.commit().unwrap();
    model.parents.insert(0, None);
    let read = store.read().unwrap();
    assert!(!read.has_inverted_links().unwrap());
    let ids = all_ids(&read, &spec(SUFFIX, Scope::Sub, "(objectClass=*)"));
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "no inverted link: plain ID order");
}

/// `check` names an inverted link the record lacks (a search would list that child first)
/// and a record the tree does not back.
#[test]
fn check_compares_the_inverted_link_record_with_the_tree() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    let mut model = Model::default();
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    write.commit().unwrap();
    model.apply(&store, &Operation::Add(0)); // n0
    model.apply(&store, &Operation::Add(0)); // n1, newer
    model.apply(&store, &Operation::Move(0, 1)); // n0 under n1
    assert!(store.check().unwrap().is_clean());
    let (n0, n1) = {
        let read = store.read().unwrap();
        (
            read.dn_to_id(&model.dn(Some(0))).unwrap(),
            read.dn_to_id(&model.dn(Some(1))).unwrap(),
        )
    };
    let meta = store.meta_database();
    let mut write = store.write().unwrap();
    meta.delete(write.raw_txn(), &lmdir_store::inversion_key(n1, n0))
        .unwrap();
    meta.put(
        write.raw_txn(),
        &lmdir_store::inversion_key(n0 + 7, n0),
        &[],
    )
    .unwrap();
    write.commit().unwrap();
    let report = store.check().unwrap().to_string();
    assert!(report.contains("but no inverted-link record"), "{report}");
    assert!(report.contains("does not match the tree"), "{report}");
}
