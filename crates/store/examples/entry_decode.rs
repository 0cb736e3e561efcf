//! Decode cost per stored entry, for instruction counts under callgrind (the machine is shared,
//! so wall time is noise): `entry_decode DIRECTORY [ROUNDS] [originals]`.
//!
//! Opens a loaded store read-only and, for every entry, does what a full-subtree search does with
//! it: fetch and validate the record, walk every attribute, and hand the originals to a sink (the
//! result writer's work), then evaluate a filter that reads every normalized value (the worst
//! case for computed normalized forms; `originals` skips it). Run it on a store loaded before and after a codec change:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/debug/examples/entry_decode DIR
//! ```
//! and divide the instruction count (minus a run with ROUNDS=0, the open cost) by the entries.

use std::path::PathBuf;
use std::sync::Arc;

use lmdir_schema::{EntryView, Schema};
use lmdir_store::{Store, StoreOptions};

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let directory = PathBuf::from(
        arguments
            .get(1)
            .expect("usage: entry_decode DIRECTORY [ROUNDS]"),
    );
    let rounds: usize = arguments
        .get(2)
        .map_or(1, |text| text.parse().expect("ROUNDS"));
    let originals_only = arguments.get(3).is_some_and(|mode| mode == "originals");
    let options = StoreOptions {
        suffix: "dc=example,dc=com".to_string(),
        sync: false,
        // Valgrind cannot reserve the default 1 TiB of address space; the stores measured are
        // far smaller.
        map_size_bytes: 1 << 32,
        ..StoreOptions::default()
    };
    let store =
        Store::open_read_only(&directory, options, Arc::new(Schema::builtin())).expect("open");
    let read = store.read().expect("read txn");
    let (mut entries, mut original_bytes, mut normalized_bytes) = (0u64, 0u64, 0u64);
    for _ in 0..rounds {
        let mut id = 1;
        while let Some(entry) = read.entry(id).expect("entry decodes") {
            entries += 1;
            for attribute in entry.attributes() {
                for (original, _) in attribute.values() {
                    original_bytes += std::hint::black_box(original).len() as u64;
                }
            }
            if originals_only {
                id += 1;
                continue;
            }
            entry.for_each_attribute(&mut |_, _, values| {
                normalized_bytes += values
                    .map(|value| value.normalized.len() as u64)
                    .sum::<u64>();
                true
            });
            id += 1;
        }
    }
    println!(
        "{entries} entries, {original_bytes} original bytes, {normalized_bytes} normalized bytes"
    );
}
