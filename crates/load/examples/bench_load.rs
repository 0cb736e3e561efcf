//! Times a bulk load of `lmdir gen N` with the benchmark's index set (issue 3):
//! `cargo run --release -p lmdir-load --example bench_load -- N WORK_DIR [--check] [--default-mode] [--memory BYTES]
//! [--memberof] [--ldif PATH] [--profile standard|large|mixed] [--small-map]` (`--ldif` loads an existing `lmdir gen N`
//! file instead of generating one in WORK_DIR; `--profile` is `lmdir gen`'s data shape).

use std::path::PathBuf;
use std::sync::Arc;

mod common;

use common::benchmark_indexes;
use lmdir_load::{load, LoadOptions};
use lmdir_schema::Schema;
use lmdir_store::{Store, StoreOptions};

// The allocator the CLI is expected to use: the loader allocates per value on every core.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let people: u64 = arguments
        .get(1)
        .and_then(|text| text.parse().ok())
        .expect("usage: bench_load N WORK_DIR");
    let work = PathBuf::from(arguments.get(2).expect("usage: bench_load N WORK_DIR"));
    let flag = |name: &str| arguments.iter().any(|argument| argument == name);
    std::fs::create_dir_all(&work).expect("work directory");
    let value_of = |name: &str| {
        let position = arguments.iter().position(|argument| argument == name)?;
        Some(
            arguments
                .get(position + 1)
                .unwrap_or_else(|| panic!("{name} needs a value")),
        )
    };
    let profile = value_of("--profile").map_or(lmdir_gen::Profile::Standard, |name| {
        lmdir_gen::Profile::parse(name).expect("--profile standard|large|mixed")
    });
    let ldif = match value_of("--ldif") {
        Some(path) => PathBuf::from(path),
        None if profile == lmdir_gen::Profile::Standard => work.join(format!("gen-{people}.ldif")),
        None => work.join(format!("gen-{people}-large.ldif")),
    };
    if !ldif.exists() {
        let started = std::time::Instant::now();
        let file = std::io::BufWriter::new(std::fs::File::create(&ldif).expect("create LDIF"));
        lmdir_gen::generate_profile(people, 1, profile, file).expect("generate");
        eprintln!(
            "generated {} in {:.2} s",
            ldif.display(),
            started.elapsed().as_secs_f64()
        );
    }
    let directory = work.join(format!("db-{people}"));
    let _ = std::fs::remove_dir_all(&directory);
    // Valgrind cannot reserve the default 1 TiB map: `--small-map` uses 8 GiB.
    let map_size_bytes = if flag("--small-map") {
        8 << 30
    } else {
        lmdir_store::MAP_SIZE_DEFAULT_BYTES
    };
    // `--memberof`: memberOf upkeep on, with a memberOf equality index.
    let memberof = flag("--memberof");
    let indexes = benchmark_indexes(profile, memberof);
    let store_options = StoreOptions {
        map_size_bytes,
        suffix: "dc=example,dc=com".to_string(),
        indexes,
        sync: true,
        memberof,
    };
    let schema = Arc::new(Schema::builtin());
    let mut options = LoadOptions::new(directory.clone(), store_options.clone(), schema.clone());
    options.quick = !flag("--default-mode");
    options.progress = true;
    options.creators_name = "cn=admin,dc=example,dc=com".to_string();
    if let Some(memory) = value_of("--memory") {
        options.memory_bytes_max = memory.parse().expect("--memory BYTES");
    }
    let summary = load(&options, &ldif).unwrap_or_else(|error| panic!("load failed: {error}"));
    print!("{summary}");
    if flag("--check") {
        let store = Store::open(&directory, store_options, schema).expect("open");
        let report = store.check().expect("check");
        println!(
            "check: {} entries, {} postings, clean: {}",
            report.entries_checked,
            report.postings_checked,
            report.is_clean()
        );
        for problem in report.problems.iter().take(10) {
            println!("  {problem}");
        }
    }
}
