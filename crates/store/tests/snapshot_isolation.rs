//! A read txn is a snapshot: writes committed after it began are invisible to it, and an
//! export taken while another thread writes is a consistent tree (parents before children).

use crate::common;

use common::*;
use lmdir_ldif::{LdifReader, RecordBody};

#[test]
fn reads_are_snapshots_and_export_is_consistent_during_writes() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(200), 100);
    let before = store.read().unwrap();
    let count_before = before.entry_count().unwrap();

    let writer_store = store.clone();
    let writer = std::thread::spawn(move || {
        let context = context();
        for index in 200..400 {
            let mut write = writer_store.write().unwrap();
            write.add(&person(index), &context).unwrap();
            if index % 2 == 0 {
                write.delete(&person_dn(index - 200)).unwrap();
            }
            write.commit().unwrap();
        }
    });
    let mut exports = Vec::new();
    for _ in 0..3 {
        let mut output = Vec::new();
        store.export(&mut output).unwrap();
        exports.push(output);
    }
    writer.join().unwrap();

    // The old snapshot is unchanged.
    assert_eq!(before.entry_count().unwrap(), count_before);
    assert!(before.dn_to_id(&person_dn(0)).is_ok());
    assert!(before.dn_to_id(&person_dn(399)).is_err());
    drop(before);
    assert!(store.read().unwrap().dn_to_id(&person_dn(0)).is_err());

    // Each export: every entry's parent appears before it.
    for output in exports {
        let mut seen = std::collections::HashSet::new();
        for record in LdifReader::new(&output[..]) {
            let record = record.unwrap();
            assert!(matches!(record.body, RecordBody::Content(_)));
            let normalized = store.schema().normalize_dn_str(&record.dn).unwrap();
            if normalized != store.schema().normalize_dn_str(SUFFIX).unwrap() {
                let parent = normalized.split_once(',').unwrap().1.to_string();
                assert!(
                    seen.contains(&parent),
                    "{} exported before its parent",
                    record.dn
                );
            }
            seen.insert(normalized);
        }
    }
    assert!(store.check().unwrap().is_clean());
}
