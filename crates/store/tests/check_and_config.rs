//! `check()` names damage to the DN tree; an index configuration change is detected on reopen
//! and the not-yet-built index is not used by searches.

use crate::common;

use common::*;
use lmdir_schema::Filter;
use lmdir_store::{layout, IndexKind, IndexKinds, Scope, SearchSpec, Store};
use std::sync::Arc;

#[test]
fn check_names_tree_damage() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(50), 100);
    assert!(store.check().unwrap().is_clean());
    let department_dn = format!("ou=dept4,ou=people,{SUFFIX}");
    let department = store.read().unwrap().dn_to_id(&department_dn).unwrap();
    let leaf_dn = person_dn(14);
    let leaf = store.read().unwrap().dn_to_id(&leaf_dn).unwrap();
    {
        let mut raw = store.env().write_txn().unwrap();
        // Wrong subtree size on the department.
        let bytes = store
            .id2node_database()
            .get(&raw, &layout::encode_id(department))
            .unwrap()
            .unwrap()
            .to_vec();
        let node = layout::decode_node(&bytes).unwrap();
        let mut damaged = Vec::new();
        layout::encode_node(
            &layout::Node {
                subtree_size: node.subtree_size + 3,
                ..node
            },
            &mut damaged,
        );
        store
            .id2node_database()
            .put(&mut raw, &layout::encode_id(department), &damaged)
            .unwrap();
        // A leaf whose dn2id row is gone.
        let leaf_bytes = store
            .id2node_database()
            .get(&raw, &layout::encode_id(leaf))
            .unwrap()
            .unwrap()
            .to_vec();
        let leaf_node = layout::decode_node(&leaf_bytes).unwrap();
        let mut key = Vec::new();
        layout::encode_dn2id_key(leaf_node.parent, leaf_node.rdn_normalized, &mut key);
        store.dn2id_database().delete(&mut raw, &key).unwrap();
        raw.commit().unwrap();
    }
    let report = store.check().unwrap();
    let text = report.to_string();
    assert!(
        text.contains(&format!(
            "entry {department} '{department_dn}': subtree size"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "dn2id: entry {leaf} '{leaf_dn}': no row under parent"
        )),
        "{text}"
    );
}

#[test]
fn check_names_an_entry_lacking_its_rdn_value() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    let unchecked = lmdir_store::WriteContext {
        skip_schema_check: true,
        ..context()
    };
    let mut write = store.write().unwrap();
    write.add(&suffix_entry(), &context()).unwrap();
    // What a --quick load stored before it added RDN values, as slapadd does.
    let lacking = entry(
        &format!("ou=People,{SUFFIX}"),
        &[("objectClass", "organizationalUnit"), ("ou", "Staff")],
    );
    let id = write.add(&lacking, &unchecked).unwrap();
    // A glue entry holds no value of its RDN and is no damage.
    let glue = entry(&format!("ou=Glued,{SUFFIX}"), &[("objectClass", "glue")]);
    write.add(&glue, &unchecked).unwrap();
    // Equal under the equality rule, other case and spaces: present.
    let equal = entry(
        &format!("ou=Equal,{SUFFIX}"),
        &[("objectClass", "organizationalUnit"), ("OU", " EQUAL ")],
    );
    write.add(&equal, &context()).unwrap();
    write.commit().unwrap();
    let report = store.check().unwrap();
    assert_eq!(report.problems.len(), 1, "{report}");
    assert!(
        report.problems[0].contains(&format!("entry {id} 'ou=People,{SUFFIX}'"))
            && report.problems[0].contains("lacks its RDN's value of 'ou'"),
        "{report}"
    );
}

#[test]
fn index_config_change_is_detected_and_unbuilt_index_is_not_used() {
    let temporary = tempfile::tempdir().unwrap();
    {
        let store = open(temporary.path());
        add_all(&store, &directory(60), 100);
        assert!(store.index_config_change().is_none());
    }
    let mut options = options();
    options
        .indexes
        .insert("givenName".to_string(), vec![IndexKind::Equality]);
    let store = Store::open(temporary.path(), options, schema()).unwrap();
    let change = store
        .index_config_change()
        .expect("the new index is reported");
    assert_eq!(change.added, vec!["givenname:eq".to_string()]);
    assert!(change.removed.is_empty());
    let given_name = store.schema().attribute("givenName").unwrap();
    assert!(store.indexed_kinds(given_name).is_empty());
    assert_eq!(store.configured_kinds(given_name), IndexKinds::EQUALITY);

    // The empty new index must not hide the existing entries from a search.
    let filter = "(givenName=anna)";
    let found = search_ids(&store, SUFFIX, Scope::Sub, filter);
    assert_eq!(found.len(), 6);
    assert_eq!(
        found,
        Oracle::build(&store).search(SUFFIX, Scope::Sub, filter)
    );
}

/// A caller's stop check ends a scan that matches nothing within a bounded number of
/// candidates, so limits such as a deadline or an abandon hold while nothing is returned.
#[test]
fn a_stop_check_ends_a_scan_that_matches_nothing() {
    use std::cell::Cell;
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(300), 100);
    let spec = SearchSpec {
        base: SUFFIX.to_string(),
        scope: Scope::Sub,
        filter: store
            .schema()
            .prepare_filter(&Filter::parse("(description=matches nothing)", 8).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    };
    let read = store.read().unwrap();
    let asked = Cell::new(0usize);
    let results: Vec<_> = read
        .search(&spec)
        .unwrap()
        .stop_when(|| {
            asked.set(asked.get() + 1);
            Some(lmdir_schema::LdapError::new(
                lmdir_schema::ResultCode::TimeLimitExceeded,
                "stop",
            ))
        })
        .collect();
    assert_eq!(results.len(), 1, "one error, then the cursor is finished");
    let error = results[0].as_ref().expect_err("stopped");
    assert_eq!(error.code, lmdir_schema::ResultCode::TimeLimitExceeded);
    assert_eq!(asked.get(), 1);
    // Without a stop the same scan runs to its end and finds nothing.
    assert_eq!(read.search(&spec).unwrap().count(), 0);
}

/// `add_indexes` on an open store builds the new kinds (a new attribute's DB and a new kind
/// of an indexed one), makes them usable, keeps them maintained by later writes, and a search
/// opened before the build keeps answering from its own snapshot; `check` finds every
/// posting exact afterwards.
#[test]
fn indexes_added_to_an_open_store_are_built_used_and_maintained() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(80), 100);
    let given_name = store.schema().attribute("givenName").unwrap();
    let uid = store.schema().attribute("uid").unwrap();
    assert!(store.indexed_kinds(given_name).is_empty());
    let search = |read: &lmdir_store::ReadTxn, filter: &str| -> Vec<u32> {
        let spec = search_spec(&store, SUFFIX, Scope::Sub, filter);
        read.search(&spec)
            .unwrap()
            .map(|result| result.unwrap().0)
            .collect()
    };
    let before = store.read().unwrap();
    let baseline = search(&before, "(givenName=anna)");
    assert!(!baseline.is_empty());
    let mut wanted = options().indexes;
    wanted.insert("givenName".to_string(), vec![IndexKind::Equality]);
    wanted.insert(
        "uid".to_string(),
        vec![IndexKind::Equality, IndexKind::Substring],
    );
    wanted.remove("telephoneNumber");
    let report = store.add_indexes(&wanted).unwrap();
    assert_eq!(report.built, vec!["givenname:eq", "uid:sub"]);
    assert_eq!(report.kept, vec!["telephonenumber:eq,pres"]);
    assert_eq!(report.entries, store.read().unwrap().entry_count().unwrap());
    assert_eq!(store.indexed_kinds(given_name), IndexKinds::EQUALITY);
    assert_eq!(
        store.indexed_kinds(uid),
        IndexKinds::EQUALITY.union(IndexKinds::SUBSTRING)
    );
    assert!(store.index_config_change().is_none());
    // A later add is indexed too.
    add_all(&store, &[person(500)], 1);
    let oracle = Oracle::build(&store);
    for filter in ["(givenName=anna)", "(uid=*er5*)", "(uid=user5*)"] {
        let found = search(&store.read().unwrap(), filter);
        assert!(!found.is_empty(), "{filter}");
        assert_eq!(found, oracle.search(SUFFIX, Scope::Sub, filter), "{filter}");
    }
    // The snapshot taken before the build still answers (without the new index).
    assert_eq!(search(&before, "(givenName=anna)"), baseline);
    drop(before);
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
    assert!(report.notes.is_empty(), "{:?}", report.notes);
}

/// A schema extension installed into an open store: an entry with the new attribute type is
/// refused before and stored after, a new index on it is built and finds it, and the store
/// reopened with the schema loaded in another order (other IDs) reads it by its stored
/// description. A schema that renumbers or changes a definition is refused, changing nothing.
#[test]
fn a_schema_extension_is_installed_live_and_a_change_is_refused() {
    const COLOUR: &str = "attributetype ( 1.3.6.1.4.1.99999.7.1 NAME 'exampleColour' \
        EQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )\n\
        objectclass ( 1.3.6.1.4.1.99999.8.1 NAME 'exampleColoured' AUXILIARY MAY exampleColour )";
    const FIRST: &str = "attributetype ( 1.3.6.1.4.1.99999.7.2 NAME 'exampleFirst' \
        SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )";
    let loaded = |texts: &[&str]| {
        let mut schema = lmdir_schema::Schema::builtin();
        for text in texts {
            schema.load_schema_text(text, "test").unwrap();
        }
        std::sync::Arc::new(schema)
    };
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(10), 100);
    let dn = format!("uid=teal,ou=People,{SUFFIX}");
    let person = entry(
        &dn,
        &[
            ("objectClass", "inetOrgPerson"),
            ("objectClass", "exampleColoured"),
            ("uid", "teal"),
            ("cn", "Teal"),
            ("sn", "Teal"),
            ("exampleColour", "Teal"),
        ],
    );
    let mut write = store.write().unwrap();
    assert!(write.add(&person, &context()).is_err(), "unknown before");
    drop(write);

    assert!(store.extend_schema(loaded(&[])).is_ok(), "the same schema");
    let extended = Arc::new(store.schema().extended_by(&loaded(&[COLOUR])).unwrap());
    store.extend_schema(extended.clone()).unwrap();
    // Loaded in another order, exampleColour would get another ID; changed, another meaning.
    let renumbered = loaded(&[FIRST, COLOUR]);
    let refused = store.extend_schema(renumbered.clone());
    assert!(
        refused
            .as_ref()
            .is_err_and(|error| error.to_string().contains("change its ID")),
        "{refused:?}"
    );
    let changed = loaded(&[&COLOUR.replace("caseIgnoreMatch", "caseExactMatch")]);
    let refused = store.extend_schema(changed);
    assert!(
        refused
            .as_ref()
            .is_err_and(|error| error.to_string().contains("EQUALITY differ")),
        "{refused:?}"
    );
    assert_eq!(
        store.schema().attribute_type_count(),
        extended.attribute_type_count()
    );

    let mut write = store.write().unwrap();
    write.add(&person, &context()).unwrap();
    write.commit().unwrap();
    let mut wanted = options().indexes;
    wanted.insert("exampleColour".to_string(), vec![IndexKind::Equality]);
    let report = store.add_indexes(&wanted).unwrap();
    assert_eq!(report.built, vec!["examplecolour:eq"]);
    let colour = store.schema().attribute("exampleColour").unwrap();
    assert_eq!(store.indexed_kinds(colour), IndexKinds::EQUALITY);
    let found = |store: &Store| -> Vec<u32> {
        let spec = SearchSpec {
            base: SUFFIX.to_string(),
            scope: Scope::Sub,
            filter: store
                .schema()
                .prepare_filter(&Filter::parse("(exampleColour=TEAL)", 8).unwrap()),
            size_limit: 0,
            lookthrough_limit: 0,
        };
        let read = store.read().unwrap();
        read.search(&spec)
            .unwrap()
            .map(|result| result.unwrap().0)
            .collect()
    };
    let id = store.read().unwrap().dn_to_id(&dn).unwrap();
    assert_eq!(found(&store), vec![id]);
    drop(store);

    let reopened = Store::open(temporary.path(), options(), renumbered).unwrap();
    assert_ne!(reopened.schema().attribute("exampleColour"), Some(colour));
    let read = reopened.read().unwrap();
    let stored = read
        .entry(id)
        .unwrap()
        .expect("stored")
        .to_entry(lmdir_schema::Dn::parse(&dn).unwrap());
    let values = stored
        .attribute("exampleColour")
        .map(|attribute| &attribute.values);
    assert_eq!(values, Some(&vec![b"Teal".to_vec()]), "{stored:?}");
}

/// An index kind dropped from the configuration stops being maintained, so the store's record
/// of built indexes drops it at the next read-write open: configured again later, it is a new
/// kind (not used until built) instead of stale postings that miss the entries written in
/// between. Built live then, its old keys are replaced, so every posting is exact.
#[test]
fn an_index_kind_dropped_and_configured_again_is_rebuilt_not_reused() {
    let temporary = tempfile::tempdir().unwrap();
    let open_with = |cn_kinds: Vec<IndexKind>| {
        let mut options = options();
        options.indexes.insert("cn".to_string(), cn_kinds);
        Store::open(temporary.path(), options, schema()).unwrap()
    };
    let both = || vec![IndexKind::Equality, IndexKind::Substring];
    let person = |uid: &str, cn: &str| {
        entry(
            &format!("uid={uid},ou=people,{SUFFIX}"),
            &[
                ("objectClass", "inetOrgPerson"),
                ("uid", uid),
                ("cn", cn),
                ("sn", cn),
            ],
        )
    };
    {
        let store = open_with(both());
        add_all(&store, &directory(20), 100);
        add_all(&store, &[person("quix", "Quixotic")], 1);
    }
    {
        let store = open_with(vec![IndexKind::Equality]);
        add_all(&store, &[person("zebra", "Zebra")], 1);
        let mut write = store.write().unwrap();
        write
            .delete(&format!("uid=quix,ou=people,{SUFFIX}"))
            .unwrap();
        write.commit().unwrap();
    }
    let searches_find_zebra = |store: &Store| {
        let oracle = Oracle::build(store);
        for filter in ["(cn=*ebr*)", "(cn=*xot*)"] {
            let found = search_ids(store, SUFFIX, Scope::Sub, filter);
            assert_eq!(found, oracle.search(SUFFIX, Scope::Sub, filter), "{filter}");
        }
        assert_eq!(search_ids(store, SUFFIX, Scope::Sub, "(cn=*ebr*)").len(), 1);
    };
    let cn = schema().attribute("cn").unwrap();
    {
        let store = open_with(both());
        assert_eq!(store.indexed_kinds(cn), IndexKinds::EQUALITY);
        let change = store.index_config_change().expect("cn sub is new again");
        assert_eq!(change.added, vec!["cn:eq,sub".to_string()]);
        searches_find_zebra(&store);
    }
    // Dropped again, then added live: built from the entries, the old keys gone.
    let store = open_with(vec![IndexKind::Equality]);
    let report = store.add_indexes(&options().indexes).unwrap();
    assert_eq!(report.built, vec!["cn:sub".to_string()]);
    assert_eq!(store.indexed_kinds(cn), both_kinds());
    searches_find_zebra(&store);
    let checked = store.check().unwrap();
    assert!(checked.is_clean(), "{checked}");
    assert!(checked.notes.is_empty(), "{:?}", checked.notes);
}

fn both_kinds() -> IndexKinds {
    IndexKinds::EQUALITY.union(IndexKinds::SUBSTRING)
}
