//! Descriptions written to `meta` by someone else (the bulk loader) become usable after
//! `reload_descriptions`, and entries using them decode.

use crate::common;

use common::*;
use lmdir_store::codec::{encode_entry, AttributeToEncode};
use lmdir_store::layout;

#[test]
fn reload_picks_up_descriptions_written_directly() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(3), 10);
    let before = store.descriptions().len() as u32;
    assert!(store.descriptions().number_of("cn;lang-de").is_none());
    let uid_id = store.read().unwrap().dn_to_id(&person_dn(1)).unwrap();
    {
        let mut raw = store.env().write_txn().unwrap();
        let mut key = layout::META_DESCRIPTION_PREFIX.to_vec();
        key.extend_from_slice(&before.to_be_bytes());
        store
            .meta_database()
            .put(&mut raw, &key, b"cn;lang-de")
            .unwrap();
        // Rewrite one entry to use only the new description.
        let values = vec![(b"Jan".to_vec(), b"jan".to_vec())];
        let mut bytes = Vec::new();
        encode_entry(
            &[AttributeToEncode {
                description_number: before,
                values: &values,
                out_of_line: None,
            }],
            &mut bytes,
        )
        .expect("encodable");
        store
            .id2entry_database()
            .put(&mut raw, &layout::encode_id(uid_id), &bytes)
            .unwrap();
        raw.commit().unwrap();
    }
    // Before the reload the entry's description is unknown: a clear error, not a panic.
    assert!(store.read().unwrap().entry(uid_id).is_err());
    store.reload_descriptions().unwrap();
    assert_eq!(store.descriptions().number_of("cn;lang-de"), Some(before));
    let read = store.read().unwrap();
    let entry = read.entry(uid_id).unwrap().unwrap();
    let attribute = entry.attributes().next().unwrap();
    assert_eq!(attribute.description_text(), "cn;lang-de");
    assert_eq!(attribute.options(), &["lang-de".to_string()]);
}
