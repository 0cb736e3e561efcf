//! lmdir-load: the parallel bulk loader and reindexer.
//!
//! Stage 1 (a reader thread) cuts the LDIF into batches of records; stage 2 (one worker per core)
//! parses each record and runs the store's own "entry → rows" step on it (`Store::entry_rows`,
//! the step `WriteTxn::add` runs), grouping the index keys into per-thread posting runs
//! (spilled compressed when over the memory budget); stage 3 (the calling thread, LMDB's single
//! writer) appends `id2entry` in ID order through the store's `BulkWriter`, builds the DN tree,
//! and at the end k-way merges the runs into each index DB in key order. The loader only
//! schedules (batches, runs, merge, threads, spill, progress); it writes no row of its own
//! making. See README.md.

mod existing;
mod in_flight;
mod memberof;
mod naming;
mod pipeline;
mod prepare;
mod progress;
mod reindex;
pub mod runs;
mod tree;
mod unique;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lmdir_schema::Schema;
use lmdir_store::{StoreError, StoreOptions};

pub use pipeline::{load, load_from, load_into_empty, ContextCsn};
pub use prepare::RecordError;
pub use reindex::{reindex, ReindexSummary};

/// LDIF to load: a file, or standard input. Read strictly forward, once.
pub type LoadInput = Box<dyn std::io::Read + Send>;

/// How to load.
#[derive(Clone)]
pub struct LoadOptions {
    /// The store directory (created; a fresh load builds beside it and renames into place).
    pub directory: PathBuf,
    pub store: StoreOptions,
    pub schema: Arc<Schema>,
    /// Like `slapadd -q`: no schema checks (values are still normalized).
    pub quick: bool,
    /// Skip bad records (each reported in the summary) instead of stopping at the first.
    pub continue_on_error: bool,
    /// Memory budget for the sort runs; 0 = min(1 GiB, RAM / 4).
    pub memory_bytes_max: usize,
    /// Worker threads; 0 = one per core.
    pub threads: usize,
    /// Show progress (a bar on a terminal, periodic lines otherwise).
    pub progress: bool,
    /// creatorsName / modifiersName for entries that lack them.
    pub creators_name: String,
    /// Uniqueness rules (`[[integrity.unique]]`): a value held twice fails the load, listing
    /// every duplicate.
    pub unique: Vec<UniqueScope>,
    /// Whether `attr:< file:///path` values read local files (RFC 2849, as slapadd does): only
    /// for an LDIF file the operator hands `lmdir load`, never for data from the network (a
    /// replica's first refresh). Off unless set.
    pub file_urls: bool,
    /// Why file URLs are refused when `file_urls` is off, added to the refusal (the switch that
    /// turned them off); empty for none.
    pub file_urls_refused_because: &'static str,
}

/// Values of each of `attributes` unique among the entries at or below `base` (empty: the
/// suffix).
#[derive(Clone, Debug, Default)]
pub struct UniqueScope {
    pub base: String,
    pub attributes: Vec<String>,
}

impl LoadOptions {
    pub fn new(directory: PathBuf, store: StoreOptions, schema: Arc<Schema>) -> Self {
        LoadOptions {
            directory,
            store,
            schema,
            quick: false,
            continue_on_error: false,
            memory_bytes_max: 0,
            threads: 0,
            progress: false,
            creators_name: String::new(),
            unique: Vec::new(),
            file_urls: false,
            file_urls_refused_because: "",
        }
    }
}

/// What a load did.
#[derive(Debug, Clone)]
pub struct LoadSummary {
    pub entries: u64,
    /// Records skipped with `continue_on_error` (at most `SKIPPED_REPORTED_MAX` kept).
    pub skipped: Vec<RecordError>,
    pub skipped_count: u64,
    pub elapsed: Duration,
    pub input_bytes: u64,
    pub database_bytes: u64,
    pub peak_rss_bytes: u64,
    pub spill_files: u64,
    /// Values repeated byte for byte within one entry, loaded once (slapadd keeps them too).
    pub repeated_values: u64,
    /// The most the load held in memory that grows with the input: the DN tree (every DN, to
    /// place children and find duplicates), group member lists (memberOf) and entry lines
    /// (uniqueness). It is charged to the index runs' share of `--memory`, which spill sooner.
    pub held_bytes_peak: u64,
    /// How far that peak went past what the runs could give up: the load held this much more
    /// than `--memory` (0: it stayed within).
    pub held_bytes_over_budget: u64,
}

/// The pairs of one record with every byte-identical repeat of a value (same attribute
/// description, case-insensitively, and the same bytes) after the first dropped, and how many
/// were dropped. Called only for a record already refused with attributeOrValueExists.
pub(crate) fn without_repeated_values<'a>(
    pairs: &[(&'a str, &'a [u8])],
) -> (Vec<(&'a str, &'a [u8])>, u64) {
    let mut kept: Vec<(&'a str, &'a [u8])> = Vec::with_capacity(pairs.len());
    let mut seen: std::collections::HashSet<(String, &'a [u8])> = std::collections::HashSet::new();
    for &(description, value) in pairs {
        if seen.insert((description.to_ascii_lowercase(), value)) {
            kept.push((description, value));
        }
    }
    let dropped = (pairs.len() - kept.len()) as u64;
    (kept, dropped)
}

/// [`without_repeated_values`] for an owned entry (loads into an existing database).
pub(crate) fn drop_repeated_values(entry: &mut lmdir_schema::Entry) -> u64 {
    let mut dropped = 0u64;
    for attribute in &mut entry.attributes {
        let before = attribute.values.len();
        let mut seen: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        attribute.values.retain(|value| seen.insert(value.clone()));
        dropped += (before - attribute.values.len()) as u64;
    }
    dropped
}

/// Skipped records kept for the report; the count covers all.
pub const SKIPPED_REPORTED_MAX: usize = 1000;

impl std::fmt::Display for LoadSummary {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seconds = self.elapsed.as_secs_f64().max(1e-9);
        writeln!(
            formatter,
            "loaded {} entries in {:.2} s ({:.0} entries/s, {:.1} MB/s of LDIF)",
            self.entries,
            seconds,
            self.entries as f64 / seconds,
            self.input_bytes as f64 / 1e6 / seconds
        )?;
        writeln!(
            formatter,
            "database size {:.1} MB, peak RSS {:.1} MB, {} spill files",
            self.database_bytes as f64 / 1e6,
            self.peak_rss_bytes as f64 / 1e6,
            self.spill_files
        )?;
        if self.held_bytes_over_budget > 0 {
            writeln!(
                formatter,
                "warning: the DN tree and member lists held {:.1} MB, {:.1} MB more than \
                 --memory left beside the index runs (about {:.1} MB of --memory would hold them)",
                self.held_bytes_peak as f64 / 1e6,
                self.held_bytes_over_budget as f64 / 1e6,
                self.held_bytes_peak as f64 * 8.0 / 3.0 / 1e6
            )?;
        }
        if self.repeated_values > 0 {
            writeln!(
                formatter,
                "{} repeated values kept once (a value repeated byte for byte in one entry)",
                self.repeated_values
            )?;
        }
        if self.skipped_count > 0 {
            for error in &self.skipped {
                writeln!(formatter, "skipped: {error}")?;
            }
            writeln!(formatter, "{} records skipped", self.skipped_count)?;
        }
        Ok(())
    }
}

/// Each message includes the error it wraps, so none is also a `source()`: `lmdir`'s
/// `{:#}` prints the chain, and a wrapped error would appear twice.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Record(RecordError),
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("store: {0}")]
    Store(StoreError),
    #[error("{0}")]
    Run(runs::RunError),
    #[error("{0}")]
    Invalid(String),
}

impl From<StoreError> for LoadError {
    fn from(error: StoreError) -> LoadError {
        LoadError::Store(error)
    }
}

impl From<runs::RunError> for LoadError {
    fn from(error: runs::RunError) -> LoadError {
        LoadError::Run(error)
    }
}

impl From<lmdir_schema::LdapError> for LoadError {
    fn from(error: lmdir_schema::LdapError) -> LoadError {
        LoadError::Store(StoreError::Ldap(error))
    }
}

/// Peak resident set size of this process (VmHWM), 0 when unknown.
pub fn peak_rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kilobytes| kilobytes * 1024)
}

/// The default memory budget: min(1 GiB, RAM / 4).
pub fn default_memory_bytes() -> usize {
    const GIBIBYTE: usize = 1 << 30;
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<usize>()
                        .ok()
                })
        })
        .map_or(4 * GIBIBYTE, |kilobytes| kilobytes * 1024);
    GIBIBYTE.min(total / 4)
}
