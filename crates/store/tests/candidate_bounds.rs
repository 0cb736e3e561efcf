//! What one search's index candidates may cost before its own limits (time, stop check,
//! look-through) apply: they are computed before the first entry is examined.

use crate::common;

use common::*;
use lmdir_schema::Filter;
use lmdir_store::{Scope, SearchSpec};

const PEOPLE: u32 = 2000;

#[test]
fn range_items_past_the_row_budget_constrain_nothing_and_the_search_stays_exact() {
    let place = tempfile::tempdir().unwrap();
    let store = open(place.path());
    add_all(&store, &directory(PEOPLE), 500);
    let read = store.read().unwrap();
    let prepare = |text: &str| {
        store
            .schema()
            .prepare_filter(&Filter::parse(text, 8).unwrap())
    };
    // One range: its candidates come from the ordered index.
    let narrow = prepare("(uidNumber>=11990)");
    let candidates = read.filter_candidates(&narrow).unwrap();
    assert_eq!(candidates.map(|ids| ids.len()), Some(10));
    // 600 items each walking the whole index (600 × 2,000 rows, past the 2^20 budget): before,
    // every one was read before the search could stop; now the rest constrain nothing.
    let items: String = (0..600).map(|_| "(uidNumber>=0)").collect();
    let wide = prepare(&format!("(|{items}(uid=user7))"));
    assert_eq!(read.filter_candidates(&wide).unwrap(), None);
    // The search examines its scope with the exact test instead: the same entries.
    let spec = SearchSpec {
        base: format!("ou=people,{SUFFIX}"),
        scope: Scope::Sub,
        filter: wide,
        size_limit: 0,
        lookthrough_limit: 0,
    };
    let people = read
        .search(&spec)
        .unwrap()
        .filter(|found| found.is_ok())
        .count();
    assert_eq!(people, PEOPLE as usize);
}
