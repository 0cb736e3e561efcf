//! Prints a digest of every DB of a store loaded by `bench_load`, to compare two loads of the same
//! LDIF (before/after a loader change): `digest_store DIRECTORY [--memberof]`. The digests are
//! `Store::database_digests`: byte for byte, except that attribute descriptions count by their
//! text, not their number, and `id2entry` leaves out the values that differ per run
//! (entryUUID, createTimestamp, modifyTimestamp, entryCSN).

use std::path::PathBuf;
use std::sync::Arc;

mod common;

use common::benchmark_indexes;
use lmdir_schema::Schema;
use lmdir_store::{Store, StoreOptions};

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
    // `--profile NAME`: the index set of that `lmdir gen` profile (bench/common.sh's INDEX_SET).
    let profile = arguments
        .iter()
        .position(|argument| argument == "--profile")
        .and_then(|at| arguments.get(at + 1))
        .map_or(lmdir_gen::Profile::Standard, |name| {
            lmdir_gen::Profile::parse(name).expect("--profile standard|large|mixed")
        });
    let options = StoreOptions {
        map_size_bytes: lmdir_store::MAP_SIZE_DEFAULT_BYTES,
        suffix: "dc=example,dc=com".to_string(),
        indexes: benchmark_indexes(profile, memberof),
        sync: false,
        memberof,
    };
    let store = Store::open(&directory, options, Arc::new(Schema::builtin())).expect("open");
    for digest in store
        .database_digests(&PER_RUN_ATTRIBUTES)
        .expect("digests")
    {
        println!(
            "{:24} {:10} {:016x}",
            digest.name, digest.rows, digest.digest
        );
    }
}
