//! Parses an LDIF file and reports records and errors:
//! `cargo run --release -p lmdir-ldif --example check -- FILE.ldif`.

use std::io::BufReader;

use lmdir_ldif::{LdifReader, RecordBody};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check FILE.ldif");
        std::process::exit(2);
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error) => {
            eprintln!("{path}: {error}");
            std::process::exit(1);
        }
    };
    let (mut entries, mut changes, mut values, mut errors) = (0u64, 0u64, 0u64, 0u64);
    for result in LdifReader::new(BufReader::with_capacity(1 << 20, file)) {
        match result {
            Ok(record) => match record.body {
                RecordBody::Content(attributes) => {
                    entries += 1;
                    values += attributes.len() as u64;
                }
                RecordBody::Change(_) => changes += 1,
            },
            Err(error) => {
                errors += 1;
                eprintln!("{path}: {error}");
            }
        }
    }
    println!("{entries} entries ({values} values), {changes} change records, {errors} errors");
    if errors > 0 {
        std::process::exit(1);
    }
}
