//! Substring searches against a full scan: random values and random assertions (initial, any
//! and final pieces, multi-byte characters and case), the index candidates always a superset
//! of the matches, and a search after its estimate in the same read txn (which reuses the
//! candidates the estimate computed) the same as one without.

use crate::common;

use common::*;
use lmdir_schema::Filter;
use lmdir_store::{CandidateMemo, Scope, SearchSpec, Store};
use proptest::prelude::*;

/// Few characters, so grams repeat across values and lists intersect in many ways; `É` and
/// `é` normalize alike, `ß` is two bytes.
const ALPHABET: &[&str] = &["a", "b", "A", "é", "É", "ß", "1"];

fn text(max_chars: usize, min_chars: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ALPHABET), min_chars..=max_chars)
        .prop_map(|characters| characters.concat())
}

/// A substring filter on `sn` from its pieces (at least one piece is non-empty).
fn substring_filter(initial: &str, any: &[String], final_: &str) -> String {
    let mut filter = format!("(sn={initial}*");
    for piece in any {
        filter.push_str(piece);
        filter.push('*');
    }
    filter.push_str(final_);
    filter.push(')');
    filter
}

/// A store holding the suffix and its OUs, then one person per value list.
fn store_with(values: &[Vec<String>]) -> (tempfile::TempDir, Store) {
    let place = tempfile::tempdir().unwrap();
    let store = open(place.path());
    let mut entries = directory(0);
    for (index, sns) in values.iter().enumerate() {
        let mut person = entry(
            &format!("uid=p{index},ou=people,{SUFFIX}"),
            &[
                ("objectClass", "inetOrgPerson"),
                ("uid", &format!("p{index}")),
                ("cn", &format!("person {index}")),
            ],
        );
        // A second value ends in a character outside the alphabet: never equal to the first.
        let sns = sns.iter().enumerate().map(|(number, sn)| {
            let suffix = if number == 0 { "" } else { "z" };
            format!("{sn}{suffix}").into_bytes()
        });
        person.add_values("sn", sns);
        entries.push(person);
    }
    add_all(&store, &entries, 500);
    (place, store)
}

fn subtree(store: &Store, filter: &str) -> SearchSpec {
    SearchSpec {
        base: SUFFIX.to_string(),
        scope: Scope::Sub,
        filter: store
            .schema()
            .prepare_filter(&Filter::parse(filter, 64).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    }
}

/// The search's matches; `estimate_first`: as the server runs a small search, the estimate's
/// kept candidates handed to the search with the base resolved once.
fn found(store: &Store, spec: &SearchSpec, estimate_first: bool) -> Vec<u32> {
    let read = store.read().unwrap();
    let mut memo = CandidateMemo::default();
    if estimate_first {
        read.estimated_candidate_count(&spec.filter, &mut memo)
            .unwrap();
    }
    let base = read.normalized_dn_to_id(&spec.base).unwrap();
    read.search_from(spec, base, memo)
        .unwrap()
        .map(|result| result.unwrap().0)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn substring_candidates_cover_every_match(
        values in prop::collection::vec(prop::collection::vec(text(10, 1), 1..=2), 1..40),
        assertions in prop::collection::vec(
            (text(6, 0), prop::collection::vec(text(6, 1), 0..=2), text(6, 0)),
            1..12,
        ),
    ) {
        let (_directory, store) = store_with(&values);
        let oracle = Oracle::build(&store);
        for (initial, any, final_) in &assertions {
            if initial.is_empty() && any.is_empty() && final_.is_empty() {
                continue;
            }
            let filter = substring_filter(initial, any, final_);
            let spec = subtree(&store, &filter);
            let expected = oracle.search(SUFFIX, Scope::Sub, &filter);
            for estimate_first in [false, true] {
                prop_assert_eq!(&found(&store, &spec, estimate_first), &expected, "{}", filter);
                let read = store.read().unwrap();
                let candidates = read.search_candidates(&spec).unwrap();
                prop_assert!(
                    expected.iter().all(|id| candidates.contains(*id)),
                    "candidates of {} miss a match", filter
                );
            }
        }
    }
}

/// Each "any" piece alone is in 7 of the 16 values, both together in 2 (one of which has them
/// in the asserted order): the estimate is the intersection (what tells the server the search
/// is small), not the shortest list's length.
#[test]
fn estimate_intersects_short_lists() {
    let words = ["abcd", "efgh", "ijkl", "mnop"];
    let values: Vec<Vec<String>> = words
        .iter()
        .flat_map(|first| {
            words
                .iter()
                .map(move |second| vec![format!("{first}{second}")])
        })
        .collect();
    let (_directory, store) = store_with(&values);
    let spec = subtree(&store, "(sn=*abcd*efgh*)");
    let read = store.read().unwrap();
    assert_eq!(
        read.estimated_candidate_count(&spec.filter, &mut CandidateMemo::default())
            .unwrap(),
        Some(2)
    );
    assert_eq!(read.search(&spec).unwrap().count(), 1);
    let one_piece = subtree(&store, "(sn=*abcd*)");
    assert_eq!(
        read.estimated_candidate_count(&one_piece.filter, &mut CandidateMemo::default())
            .unwrap(),
        Some(7)
    );
}

/// Lists longer than the estimate may decode (4,096 IDs per read txn) are bounded by their
/// headers alone: each piece is in 4,097 values and both in one, and the estimate says 4,097;
/// the search itself still intersects them.
#[test]
fn estimate_of_long_lists_reads_headers_only() {
    let mut values: Vec<Vec<String>> = Vec::new();
    for index in 0..4_096 {
        values.push(vec![format!("abcd{index}x")]);
        values.push(vec![format!("efgh{index}y")]);
    }
    values.push(vec!["abcdefgh".to_string()]);
    let (_directory, store) = store_with(&values);
    let spec = subtree(&store, "(sn=*abcd*efgh*)");
    let read = store.read().unwrap();
    assert_eq!(
        read.estimated_candidate_count(&spec.filter, &mut CandidateMemo::default())
            .unwrap(),
        Some(4_097)
    );
    assert_eq!(read.search_candidates(&spec).unwrap().len(), 1);
    assert_eq!(read.search(&spec).unwrap().count(), 1);
}
