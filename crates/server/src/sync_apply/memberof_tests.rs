//! memberOf of replicated entries on a node that keeps memberOf itself: the groups here decide,
//! whatever memberOf the provider sent. The sequence of `replication_multi`'s
//! `two_nodes_converge_with_conflicts_resolved_by_csn` that left node 2 with a stale memberOf
//! for good (node 1's u23 sent back with the memberOf it had before it applied node 2's group
//! change), replayed in one store, in order.

use super::tests::{entry, store_holding};
use super::*;
use lmdir_store::attribute_state::{AttributeState, ATTRIBUTE_STATE};

const SUFFIX: &str = "dc=example,dc=com";
const GROUP: &str = "cn=group00000,dc=example,dc=com";
const U23: &str = "uid=u0000023,dc=example,dc=com";
const U24: &str = "uid=u0000024,dc=example,dc=com";
const U23_UUID: &str = "00000000-0000-0000-0000-000000000023";
const U24_UUID: &str = "00000000-0000-0000-0000-000000000024";
/// Node 1's CSNs (server ID 1).
const FIRST: &str = "20261205100000.000000Z#000000#001#000000";
const SECOND: &str = "20261205110000.000000Z#000000#001#000000";
const THIRD: &str = "20261205120000.000000Z#000000#001#000000";

/// Node 2 after its delete of u23: the suffix and cn=group00000, which no longer lists u23
/// (the delete's upkeep took it out) and lists u24, not here yet. With memberOf upkeep, as
/// `indexes` says.
fn node_two(directory: &std::path::Path, member_index: bool) -> lmdir_store::Store {
    let mut indexes: std::collections::BTreeMap<String, Vec<lmdir_store::IndexKind>> = [(
        "entryUUID".to_string(),
        vec![lmdir_store::IndexKind::Equality],
    )]
    .into();
    if member_index {
        indexes.insert("member".into(), vec![lmdir_store::IndexKind::Equality]);
    }
    let options = lmdir_store::StoreOptions {
        suffix: SUFFIX.to_string(),
        sync: false,
        memberof: true,
        indexes: indexes.into_iter().collect(),
        ..lmdir_store::StoreOptions::default()
    };
    store_holding(
        directory,
        options,
        &[
            entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]),
            entry(
                GROUP,
                &[
                    ("objectClass", "groupOfNames"),
                    ("cn", "group00000"),
                    ("member", U24),
                ],
            ),
        ],
    )
}

/// A person as node 1 sends it: `memberOf` as node 1's upkeep left it, `extra` more values.
fn person(
    dn: &str,
    uuid: &str,
    csn: &str,
    memberof: Option<&str>,
    extra: &[(&str, &str)],
) -> Entry {
    let uid = dn.split([',', '=']).nth(1).unwrap();
    let mut attributes = vec![
        ("objectClass", "inetOrgPerson"),
        ("uid", uid),
        ("cn", "Person"),
        ("sn", "Number"),
        ("entryUUID", uuid),
        ("entryCSN", csn),
    ];
    attributes.extend(memberof.map(|group| ("memberOf", group)));
    attributes.extend_from_slice(extra);
    entry(dn, &attributes)
}

fn put(store: &lmdir_store::Store, entry: Entry) -> ChangeCounts {
    let uuid = uuid_bytes(
        entry
            .attribute("entryUUID")
            .map(|attribute| attribute.values[0].as_slice())
            .unwrap(),
    )
    .unwrap();
    let batch = SyncBatch {
        rid: 1,
        base: SUFFIX.to_string(),
        changes: vec![SyncChange::Put { uuid, entry }],
        cookie: CookieUpdate::Keep,
        server_id: 2,
        resolve_conflicts: true,
        applied: Arc::default(),
    };
    let mut txn = store.write().unwrap();
    let counts = apply(&mut txn, &batch).unwrap();
    txn.commit().unwrap();
    counts
}

/// The memberOf values (lowercased) of the entry at `dn`.
fn memberof(store: &lmdir_store::Store, dn: &str) -> Vec<String> {
    let txn = store.write().unwrap();
    let id = txn.entry_by_dn(dn).unwrap().expect("the entry").id;
    let entry = txn.owned_entry(id).unwrap();
    entry
        .attribute("memberOf")
        .map(|attribute| {
            attribute
                .values
                .iter()
                .map(|value| String::from_utf8_lossy(value).to_ascii_lowercase())
                .collect()
        })
        .unwrap_or_default()
}

fn description(store: &lmdir_store::Store, dn: &str) -> Option<Vec<u8>> {
    let txn = store.write().unwrap();
    let id = txn.entry_by_dn(dn).unwrap()?.id;
    let entry = txn.owned_entry(id).unwrap();
    entry
        .attribute("description")
        .map(|attribute| attribute.values[0].clone())
}

#[test]
fn a_replicated_entry_takes_memberof_from_this_nodes_groups_on_every_path() {
    let directory = tempfile::tempdir().unwrap();
    let store = node_two(directory.path(), true);
    // The add path: u23 comes back naming the group it has left here; u24, which the group
    // lists here, comes naming none.
    put(&store, person(U23, U23_UUID, FIRST, Some(GROUP), &[]));
    put(&store, person(U24, U24_UUID, FIRST, None, &[]));
    assert_eq!(
        memberof(&store, U23),
        Vec::<String>::new(),
        "stale memberOf taken"
    );
    assert_eq!(
        memberof(&store, U24),
        vec![GROUP.to_string()],
        "group here not seen"
    );
    // The replace path: later versions, memberOf as sent still wrong both ways.
    let modified = ("description", "modified before the delete");
    let counts = put(
        &store,
        person(U23, U23_UUID, SECOND, Some(GROUP), &[modified]),
    );
    assert_eq!(counts.modifies, 1);
    put(&store, person(U24, U24_UUID, SECOND, None, &[modified]));
    assert_eq!(
        memberof(&store, U23),
        Vec::<String>::new(),
        "replaced with the sent memberOf"
    );
    assert_eq!(memberof(&store, U24), vec![GROUP.to_string()]);
    // The per-attribute merge path (an entry with lmdirAttributeCSN): the description merged,
    // memberOf still this node's.
    let state = AttributeState {
        description: "description".into(),
        csn: Csn::parse(THIRD.as_bytes()).unwrap(),
        base: Csn::parse(SECOND.as_bytes()).ok(),
    }
    .to_value();
    let merged = [("description", "merged"), (ATTRIBUTE_STATE, state.as_str())];
    let counts = put(&store, person(U23, U23_UUID, THIRD, Some(GROUP), &merged));
    assert_eq!(counts.modifies, 1);
    put(&store, person(U24, U24_UUID, THIRD, None, &merged));
    assert_eq!(description(&store, U23), Some(b"merged".to_vec()));
    assert_eq!(
        memberof(&store, U23),
        Vec::<String>::new(),
        "merged the sent memberOf"
    );
    assert_eq!(memberof(&store, U24), vec![GROUP.to_string()]);
}

#[test]
fn without_a_member_index_the_named_groups_are_checked_here() {
    let directory = tempfile::tempdir().unwrap();
    let store = node_two(directory.path(), false);
    // Bounded without the index: the groups the sent memberOf names are checked, and only
    // those; the group naming u24 is confirmed, the one that left u23 is dropped.
    put(&store, person(U23, U23_UUID, FIRST, Some(GROUP), &[]));
    put(&store, person(U24, U24_UUID, FIRST, Some(GROUP), &[]));
    assert_eq!(memberof(&store, U23), Vec::<String>::new());
    assert_eq!(memberof(&store, U24), vec![GROUP.to_string()]);
    assert_eq!(description(&store, U24), None);
}
