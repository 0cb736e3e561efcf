//! Prints a digest of every DB of a store loaded by `bench_load`, to compare two loads of the same
//! LDIF (before/after a loader change): `digest_store DIRECTORY [--memberof]`. Every DB is
//! digested byte for byte, except that attribute descriptions count by their text, not their
//! number (workers number descriptions in the order they first meet them, which varies), and
//! `id2entry` leaves out the values that differ per run (entryUUID, createTimestamp,
//! modifyTimestamp, entryCSN).

use std::path::PathBuf;
use std::sync::Arc;

mod common;

use common::benchmark_indexes;
use lmdir_schema::Schema;
use lmdir_store::codec::EncodedEntry;
use lmdir_store::{Store, StoreOptions};
use xxhash_rust::xxh3::Xxh3;

const PER_RUN_ATTRIBUTES: [&str; 4] = [
    "entryUUID",
    "createTimestamp",
    "modifyTimestamp",
    "entryCSN",
];

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let directory = PathBuf::from(arguments.get(1).expect("usage: digest_store DIRECTORY"));
    let memberof = arguments.iter().any(|argument| argument == "--memberof");
    let options = StoreOptions {
        map_size_bytes: lmdir_store::MAP_SIZE_DEFAULT_BYTES,
        suffix: "dc=example,dc=com".to_string(),
        indexes: benchmark_indexes(memberof),
        sync: false,
        memberof,
    };
    let store = Store::open(&directory, options, Arc::new(Schema::builtin())).expect("open");
    let read = store.env().read_txn().expect("read txn");
    let mut databases = vec![
        ("meta".to_string(), store.meta_database()),
        ("id2entry".to_string(), store.id2entry_database()),
        ("id2node".to_string(), store.id2node_database()),
        ("dn2id".to_string(), store.dn2id_database()),
    ];
    let schema = store.schema();
    for name in benchmark_indexes(memberof).keys() {
        let attr = schema.attribute(name).expect("benchmark attributes exist");
        let database = store.index_database(attr).expect("configured index DB");
        databases.push((format!("idx.{name}"), database));
    }
    let descriptions = store.descriptions();
    let skipped_numbers: Vec<u32> = (0..descriptions.len() as u32)
        .filter(|number| {
            descriptions.get(*number).is_some_and(|info| {
                PER_RUN_ATTRIBUTES
                    .iter()
                    .any(|name| info.text.eq_ignore_ascii_case(name))
            })
        })
        .collect();
    for (name, database) in databases {
        let mut digest = Xxh3::new();
        let mut rows = 0u64;
        let mut description_texts: Vec<Vec<u8>> = Vec::new();
        for row in database.iter(&read).expect("iterate") {
            let (key, value) = row.expect("row");
            rows += 1;
            if name == "meta" && key.starts_with(lmdir_store::layout::META_DESCRIPTION_PREFIX) {
                // Numbering aside, the set of descriptions must match.
                description_texts.push(value.to_vec());
                continue;
            }
            digest.update(&(key.len() as u64).to_le_bytes());
            digest.update(key);
            if name == "id2entry" {
                let entry = EncodedEntry::parse(value).expect("entry decodes");
                for attribute in entry.attributes() {
                    if skipped_numbers.contains(&attribute.description_number) {
                        continue;
                    }
                    let text = &descriptions
                        .get(attribute.description_number)
                        .expect("every description number is in meta")
                        .text;
                    digest.update(&(text.len() as u64).to_le_bytes());
                    digest.update(text.as_bytes());
                    for (original, normalized) in attribute.values() {
                        digest.update(&(original.len() as u64).to_le_bytes());
                        digest.update(original);
                        digest.update(&(normalized.len() as u64).to_le_bytes());
                        digest.update(&normalized.to_cow());
                    }
                }
            } else {
                digest.update(&(value.len() as u64).to_le_bytes());
                digest.update(value);
            }
        }
        description_texts.sort();
        for text in &description_texts {
            digest.update(text);
        }
        println!("{name:24} {rows:10} {:016x}", digest.digest());
    }
}
