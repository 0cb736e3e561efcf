//! Stores written with RFC 4518 string preparation (format 3): a read-write open raises the
//! number in place when no value or DN prepares differently under slapd's preparation, and
//! refuses the store, naming the entry, when one does; the refused store still exports.

use crate::common;

use common::*;
use lmdir_schema::Filter;
use lmdir_store::codec::{encode_entry, AttributeToEncode, EncodedEntry};
use lmdir_store::{layout, Scope, SearchSpec, Store};

/// A value's (original, normalized) forms.
type ValueForms = (Vec<u8>, Vec<u8>);

const PERSON: &str = "cn=Müller,dc=example,dc=com";

/// A directory whose values prepare alike under both: ASCII ones, and non-ASCII ones that
/// only case fold and compose (a DN among them).
fn write_directory(store: &Store) {
    let mut write = store.write().unwrap();
    for entry in [
        entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]),
        entry(
            PERSON,
            &[
                ("objectClass", "person"),
                ("cn", "Müller"),
                ("sn", "Kraków Straße"),
                ("description", "Plain ASCII"),
            ],
        ),
    ] {
        write.add(&entry, &context()).unwrap();
    }
    write.commit().unwrap();
}

fn format_version(store: &Store) -> Vec<u8> {
    let read = store.read().unwrap();
    store
        .meta_database()
        .get(read.raw_txn(), layout::META_FORMAT_VERSION)
        .unwrap()
        .unwrap()
        .to_vec()
}

fn set_format_version(store: &Store, version: u32) {
    let mut raw = store.env().write_txn().unwrap();
    store
        .meta_database()
        .put(
            &mut raw,
            layout::META_FORMAT_VERSION,
            &version.to_be_bytes(),
        )
        .unwrap();
    raw.commit().unwrap();
}

/// Rewrites the person's record through the codec with `sn`'s normalized form as RFC 4518
/// made it (ß folded to "ss"), as a format-3 store holds it.
fn store_rfc4518_form(store: &Store) {
    let read = store.read().unwrap();
    let id = read.dn_to_id(PERSON).unwrap();
    let key = id.to_be_bytes();
    let record = store
        .id2entry_database()
        .get(read.raw_txn(), &key)
        .unwrap()
        .unwrap()
        .to_vec();
    drop(read);
    let parsed = EncodedEntry::parse(&record).unwrap();
    let attributes: Vec<(u32, Vec<ValueForms>)> = parsed
        .attributes()
        .map(|attribute| {
            let values = attribute
                .values()
                .map(|(original, normalized)| {
                    let normalized = if original == "Kraków Straße".as_bytes() {
                        "kraków strasse".as_bytes().to_vec()
                    } else {
                        normalized.to_vec()
                    };
                    (original.to_vec(), normalized)
                })
                .collect();
            (attribute.description_number, values)
        })
        .collect();
    let to_encode: Vec<AttributeToEncode<'_>> = attributes
        .iter()
        .map(|(number, values)| AttributeToEncode {
            description_number: *number,
            values,
            out_of_line: None,
        })
        .collect();
    let mut encoded = Vec::new();
    encode_entry(&to_encode, &mut encoded).unwrap();
    let mut raw = store.env().write_txn().unwrap();
    store
        .id2entry_database()
        .put(&mut raw, &key, &encoded)
        .unwrap();
    raw.commit().unwrap();
}

fn count(store: &Store, filter: &str) -> usize {
    let spec = SearchSpec {
        base: SUFFIX.to_string(),
        scope: Scope::Sub,
        filter: store
            .schema()
            .prepare_filter(&Filter::parse(filter, 8).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    };
    store.read().unwrap().search(&spec).unwrap().count()
}

#[test]
fn a_store_whose_values_prepare_alike_is_upgraded_in_place() {
    let temporary = tempfile::tempdir().unwrap();
    {
        let store = open(temporary.path());
        write_directory(&store);
        set_format_version(&store, layout::FORMAT_VERSION_RFC4518_PREPARATION);
    }
    let store = open(temporary.path());
    assert_eq!(
        format_version(&store),
        layout::FORMAT_VERSION.to_be_bytes(),
        "upgraded"
    );
    assert_eq!(count(&store, "(cn=MÜLLER)"), 1);
    assert_eq!(count(&store, "(sn=*STRASSE*)"), 0, "ß is not ss");
    assert_eq!(count(&store, "(sn=*straße*)"), 1);
    assert!(store.check().unwrap().is_clean());
}

#[test]
fn a_store_holding_a_value_prepared_differently_is_refused_and_exports() {
    let temporary = tempfile::tempdir().unwrap();
    {
        let store = open(temporary.path());
        write_directory(&store);
        store_rfc4518_form(&store);
        set_format_version(&store, layout::FORMAT_VERSION_RFC4518_PREPARATION);
    }
    let error = Store::open(temporary.path(), options(), schema())
        .err()
        .expect("refused");
    let message = error.to_string();
    assert!(
        message.contains("1 entries")
            && message.contains(PERSON)
            && message.contains("sn")
            && message.contains("lmdir export")
            && message.contains("lmdir load"),
        "{message}"
    );
    // Not upgraded, still exportable by a read-only open.
    let store = Store::open_read_only(temporary.path(), options(), schema()).unwrap();
    assert_eq!(
        format_version(&store),
        layout::FORMAT_VERSION_RFC4518_PREPARATION.to_be_bytes()
    );
    let mut ldif = Vec::new();
    assert_eq!(store.export(&mut ldif).unwrap(), 2);
    let ldif = String::from_utf8(ldif).unwrap();
    assert!(ldif.contains("sn:: "), "{ldif}"); // non-ASCII: base64
    assert!(ldif.contains("dn:: "), "{ldif}");
}

/// Rewrites the person's DN-tree node through the layout with its normalized RDN as RFC 4518
/// made it (`cn=gross`, the ß folded).
fn store_rfc4518_rdn(store: &Store, dn: &str) {
    let read = store.read().unwrap();
    let id = read.dn_to_id(dn).unwrap();
    let key = layout::encode_id(id);
    let bytes = store
        .id2node_database()
        .get(read.raw_txn(), &key)
        .unwrap()
        .unwrap()
        .to_vec();
    drop(read);
    let mut node = layout::decode_node(&bytes).unwrap();
    node.rdn_normalized = b"cn=gross";
    let mut encoded = Vec::new();
    layout::encode_node(&node, &mut encoded);
    let mut raw = store.env().write_txn().unwrap();
    store
        .id2node_database()
        .put(&mut raw, &key, &encoded)
        .unwrap();
    raw.commit().unwrap();
}

#[test]
fn a_store_holding_a_name_prepared_differently_is_refused() {
    let temporary = tempfile::tempdir().unwrap();
    let dn = format!("cn=Groß,{SUFFIX}");
    {
        let store = open(temporary.path());
        write_directory(&store);
        let mut write = store.write().unwrap();
        let person = entry(
            &dn,
            &[("objectClass", "person"), ("cn", "Groß"), ("sn", "G")],
        );
        write.add(&person, &context()).unwrap();
        write.commit().unwrap();
        store_rfc4518_rdn(&store, &dn);
        set_format_version(&store, layout::FORMAT_VERSION_RFC4518_PREPARATION);
    }
    let message = Store::open(temporary.path(), options(), schema())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        message.contains("1 entries") && message.contains(&dn) && message.contains("DN"),
        "{message}"
    );
}
