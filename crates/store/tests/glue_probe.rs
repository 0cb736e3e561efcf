//! `ReadTxn::may_hold_glue` (and `may_hold_aliases`, `may_hold_subentries`): a search tests its entries for glue (`objectClass: glue`, which it
//! skips without ManageDsaIT) only in snapshots that may hold some. Without glue the answer is
//! no, so a search pays nothing per entry; once a glue entry is committed, later snapshots say
//! yes, and one read before the commit keeps its own answer.

use crate::common;

use common::{context, entry, open, suffix_entry, SUFFIX};

#[test]
fn only_snapshots_holding_glue_say_they_may() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    write.commit().unwrap();
    let before = store.read().unwrap();
    assert!(!before.may_hold_glue().unwrap());
    let mut write = store.write().unwrap();
    write
        .add(
            &entry(&format!("ou=gone,{SUFFIX}"), &[("objectClass", "glue")]),
            &context(),
        )
        .unwrap();
    write.commit().unwrap();
    assert!(store.read().unwrap().may_hold_glue().unwrap());
    assert!(
        !before.may_hold_glue().unwrap(),
        "an older snapshot keeps its answer"
    );
}

/// `ReadTxn::may_hold_aliases`, the same probe for `objectClass: alias`: a search asking to
/// dereference aliases (JNDI's default) pays for it only in snapshots that may hold some.
#[test]
fn only_snapshots_holding_aliases_say_they_may() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    write.commit().unwrap();
    assert!(!store.read().unwrap().may_hold_aliases().unwrap());
    let alias = entry(
        &format!("ou=elsewhere,{SUFFIX}"),
        &[
            ("objectClass", "alias"),
            ("objectClass", "extensibleObject"),
            ("ou", "elsewhere"),
            ("aliasedObjectName", SUFFIX),
        ],
    );
    let mut write = store.write().unwrap();
    write.add(&alias, &context()).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    assert!(read.may_hold_aliases().unwrap());
    assert!(!read.may_hold_glue().unwrap(), "each class its own answer");
}

/// `ReadTxn::may_hold_subentries`, the same probe for `objectClass: subentry` (RFC 3672): a
/// search without subentries tests none of its entries for the class.
#[test]
fn only_snapshots_holding_subentries_say_they_may() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    write.commit().unwrap();
    let before = store.read().unwrap();
    assert!(!before.may_hold_subentries().unwrap());
    let subentry = entry(
        &format!("cn=policy,{SUFFIX}"),
        &[
            ("objectClass", "subentry"),
            ("cn", "policy"),
            ("subtreeSpecification", "{}"),
        ],
    );
    let mut write = store.write().unwrap();
    write.add(&subentry, &context()).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    assert!(read.may_hold_subentries().unwrap());
    assert!(
        !read.may_hold_aliases().unwrap(),
        "each class its own answer"
    );
    assert!(
        !before.may_hold_subentries().unwrap(),
        "an older snapshot keeps its answer"
    );
}
