//! export → fresh store (add every entry) → export gives identical LDIF, even after modrdn
//! moved subtrees so ID order is no longer parents-first.

use crate::common;

use common::*;
use lmdir_ldif::{LdifReader, RecordBody};
use lmdir_schema::{Dn, Entry};

#[test]
fn export_then_reimport_then_export_is_identical() {
    let first_directory = tempfile::tempdir().unwrap();
    let store = open(first_directory.path());
    add_all(&store, &directory(400), 200);
    {
        // Move a department (with its people) below ou=groups, which has a larger ID than
        // ou=people's children... and rename a person: parents now have larger IDs than some
        // children, so an ID-order export would put a child before its parent.
        let mut write = store.write().unwrap();
        let context = context();
        write
            .add(
                &entry(
                    &format!("ou=late,{SUFFIX}"),
                    &[("objectClass", "organizationalUnit"), ("ou", "late")],
                ),
                &context,
            )
            .unwrap();
        write
            .modrdn(
                &format!("ou=dept2,ou=people,{SUFFIX}"),
                "ou=dept2",
                false,
                Some(&write.normalized_dn(&format!("ou=late,{SUFFIX}")).unwrap()),
                &context,
            )
            .unwrap();
        write
            .modrdn(
                &person_dn(13),
                "uid=Moved13",
                true,
                Some(&write.normalized_dn(&format!("ou=late,{SUFFIX}")).unwrap()),
                &context,
            )
            .unwrap();
        write.commit().unwrap();
    }
    assert!(store.check().unwrap().is_clean());
    let mut first_export = Vec::new();
    let exported = store.export(&mut first_export).unwrap();
    assert_eq!(exported, store.read().unwrap().entry_count().unwrap());

    let mut entries = Vec::new();
    for record in LdifReader::new(&first_export[..]) {
        let record = record.unwrap();
        let RecordBody::Content(attributes) = record.body else {
            panic!("export wrote a change record")
        };
        let mut entry = Entry::new(Dn::parse(&record.dn).unwrap());
        for (description, value) in attributes {
            entry.add_values(&description, [value]);
        }
        entries.push(entry);
    }
    assert_eq!(entries.len() as u64, exported);
    let second_directory = tempfile::tempdir().unwrap();
    let second = open(second_directory.path());
    add_all(&second, &entries, 1_000);
    let mut second_export = Vec::new();
    second.export(&mut second_export).unwrap();
    assert!(first_export == second_export, "exports differ");
    assert!(second.check().unwrap().is_clean());

    let stat = second.stat().unwrap();
    assert_eq!(stat.entries, exported);
    let text = stat.to_string();
    assert!(text.contains("index uid (eq)"), "{text}");
}
