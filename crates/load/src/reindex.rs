//! `reindex`: rebuild named (or all) index DBs from `id2entry` with the loader's sort/merge/APPEND
//! pipeline; and the load path into a store that already holds entries.

use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use lmdir_schema::{AttrId, Dn, Entry, MatchingRule};
use lmdir_store::codec::EncodedEntry;
use lmdir_store::layout::IndexKinds;
use lmdir_store::{Store, WriteContext};
use roaring::RoaringBitmap;

use crate::pipeline::{index_databases, write_index_runs};
use crate::prepare::{push_value_keys, RecordError, WorkerScratch};
use crate::runs::{FinishedRun, MergedRuns, PostingRun};
use crate::{LoadError, LoadOptions, LoadSummary, SKIPPED_REPORTED_MAX};

/// Entries handed to a reindex worker at once.
const REINDEX_BATCH_ENTRIES: usize = 4096;

/// What a reindex did.
#[derive(Debug, Clone)]
pub struct ReindexSummary {
    pub entries: u64,
    pub indexes: Vec<String>,
    pub elapsed: Duration,
}

/// Rebuilds the index DBs of `attributes` (names or OIDs; `None` = every configured index):
/// clears them, regenerates every key from the stored normalized values on all cores, merges
/// the sorted runs and writes each DB in key order with APPEND, in one write transaction.
/// Afterwards the store's index configuration is marked as built.
pub fn reindex(
    store: &Store,
    attributes: Option<&[String]>,
    memory_bytes_max: usize,
    threads: usize,
) -> Result<ReindexSummary, LoadError> {
    let started = Instant::now();
    let schema = store.schema().clone();
    let only: Option<Vec<AttrId>> = match attributes {
        None => None,
        Some(names) => {
            let mut resolved = Vec::with_capacity(names.len());
            for name in names {
                let attr = schema.attribute(name).ok_or_else(|| {
                    LoadError::Invalid(format!("reindex: unknown attribute type '{name}'"))
                })?;
                if store.configured_kinds(attr).is_empty() {
                    return Err(LoadError::Invalid(format!(
                        "reindex: attribute '{name}' has no configured index"
                    )));
                }
                resolved.push(attr);
            }
            Some(resolved)
        }
    };
    let (numbers, databases) = index_databases(store, only.as_deref());
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(2, |count| count.get())
    } else {
        threads
    };
    let memory_bytes = if memory_bytes_max == 0 {
        crate::default_memory_bytes()
    } else {
        memory_bytes_max
    };
    let spill_directory = std::env::temp_dir();
    let descriptions = store.descriptions();
    // Description number → (index DB number, kinds, ordering rule) for indexed descriptions.
    let mut by_description: Vec<Option<(u16, IndexKinds, Option<MatchingRule>)>> =
        Vec::with_capacity(descriptions.len());
    for number in 0..descriptions.len() as u32 {
        let info = descriptions.get(number).expect("number below length");
        by_description.push(numbers.get(&info.attr).map(|(database, kinds)| {
            (*database, *kinds, schema.attribute_type(info.attr).ordering)
        }));
    }
    let by_description = Arc::new(by_description);

    let (batch_sender, batch_receiver) = bounded::<Vec<(u32, Vec<u8>)>>(threads * 2);
    let worker_budget = (memory_bytes / 10 * 8 / threads).max(1);
    let mut entries = 0u64;
    let runs = std::thread::scope(|scope| -> Result<Vec<FinishedRun>, LoadError> {
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let receiver = batch_receiver.clone();
            let by_description = by_description.clone();
            let spill_directory = spill_directory.clone();
            workers.push(scope.spawn(move || -> Result<FinishedRun, LoadError> {
                let mut run = PostingRun::new(worker_budget, &spill_directory);
                let mut scratch = WorkerScratch::default();
                for batch in receiver {
                    for (id, bytes) in batch {
                        let encoded = EncodedEntry::parse(&bytes)
                            .map_err(|error| LoadError::Invalid(format!("entry {id}: {error}")))?;
                        for attribute in encoded.attributes() {
                            let Some(Some((database, kinds, ordering))) =
                                by_description.get(attribute.description_number as usize)
                            else {
                                continue;
                            };
                            let prefix = database.to_be_bytes();
                            for (_, normalized) in attribute.values() {
                                push_value_keys(
                                    &prefix,
                                    *kinds,
                                    &normalized.to_cow(),
                                    *ordering,
                                    id,
                                    &mut run,
                                    &mut scratch,
                                )?;
                            }
                        }
                    }
                }
                Ok(run.finish()?)
            }));
        }
        drop(batch_receiver);
        let read_result = (|| -> Result<(), LoadError> {
            let read_txn = store.env().read_txn()?;
            let mut batch = Vec::with_capacity(REINDEX_BATCH_ENTRIES);
            for row in store.id2entry_database().iter(&read_txn)? {
                let (key, value) = row?;
                let id = lmdir_store::layout::decode_id(key).ok_or_else(|| {
                    LoadError::Invalid(format!("id2entry key {key:02x?} is not an ID"))
                })?;
                batch.push((id, value.to_vec()));
                entries += 1;
                if batch.len() == REINDEX_BATCH_ENTRIES {
                    let full =
                        std::mem::replace(&mut batch, Vec::with_capacity(REINDEX_BATCH_ENTRIES));
                    if batch_sender.send(full).is_err() {
                        break;
                    }
                }
            }
            if !batch.is_empty() {
                let _ = batch_sender.send(batch);
            }
            Ok(())
        })();
        drop(batch_sender);
        let mut runs = Vec::with_capacity(threads);
        let mut first_error = read_result.err();
        for worker in workers {
            match worker.join().expect("reindex workers do not panic") {
                Ok(run) => runs.push(run),
                Err(error) => first_error = first_error.or(Some(error)),
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(runs),
        }
    })?;
    let merged = MergedRuns::new(runs)?;
    // One txn for the rebuilt indexes, so readers never see them half built; then the
    // store records that the configured indexes are built.
    let mut write_txn = Some(store.env().write_txn()?);
    for database in &databases {
        database.clear(write_txn.as_mut().expect("a txn is open"))?;
    }
    write_index_runs(
        store.env(),
        &mut write_txn,
        None,
        &databases,
        merged,
        &RoaringBitmap::new(),
        None,
    )?;
    write_txn.expect("a txn is open").commit()?;
    let mut write = store.write()?;
    let rebuilt: Vec<AttrId> = numbers.keys().copied().collect();
    write.mark_indexes_built(&rebuilt);
    write
        .commit()
        .map_err(|error| LoadError::Invalid(format!("reindex commit: {error}")))?;
    let mut names: Vec<String> = numbers
        .keys()
        .map(|attr| schema.attribute_type(*attr).name().to_string())
        .collect();
    names.sort();
    Ok(ReindexSummary {
        entries,
        indexes: names,
        elapsed: started.elapsed(),
    })
}

/// Loading into a store that already has entries: each entry goes through the store's own
/// `add` (parent lookups, subtree sizes, posting chunk merges) inside one write transaction, so
/// a failure leaves the store as it was. Slower than the fresh path, and correct.
pub(crate) fn load_into_existing(
    options: &LoadOptions,
    input: crate::LoadInput,
    input_bytes_total: u64,
    started: Instant,
) -> Result<LoadSummary, LoadError> {
    let store = Store::open(
        &options.directory,
        options.store.clone(),
        options.schema.clone(),
    )?;
    let mut progress = crate::progress::Progress::new(options.progress, input_bytes_total);
    // An import keeps the operational attributes it carries (entryUUID, creatorsName, ...).
    let context = WriteContext {
        skip_schema_check: options.quick,
        relax: true,
        ..WriteContext::new(options.creators_name.clone())
    };
    let mut write = store.write()?;
    let mut entries = 0u64;
    let mut skipped = Vec::new();
    let mut skipped_count = 0u64;
    let mut skip = |error: RecordError| -> Result<(), LoadError> {
        if !options.continue_on_error {
            return Err(LoadError::Record(error));
        }
        skipped_count += 1;
        if skipped.len() < SKIPPED_REPORTED_MAX {
            skipped.push(error);
        }
        Ok(())
    };
    let reader = lmdir_ldif::LdifReader::new(BufReader::with_capacity(1 << 20, input));
    for record in reader {
        let record = match record {
            Ok(record) => record,
            Err(error) => {
                // A reader error cannot be resumed after: the record boundaries are lost.
                return Err(LoadError::Record(RecordError {
                    line: error.line,
                    dn: error.dn,
                    message: error.message,
                }));
            }
        };
        let line = record.line;
        let values = match record.body {
            lmdir_ldif::RecordBody::Content(values) => values,
            lmdir_ldif::RecordBody::Change(change) => match change.operation {
                lmdir_ldif::ChangeOperation::Add(values) => values,
                _ => {
                    skip(RecordError {
                        line,
                        dn: Some(record.dn),
                        message: "only entries and 'changetype: add' records can be loaded".into(),
                    })?;
                    continue;
                }
            },
        };
        let dn = match Dn::parse(&record.dn) {
            Ok(dn) => dn,
            Err(error) => {
                skip(RecordError {
                    line,
                    dn: Some(record.dn),
                    message: error.message,
                })?;
                continue;
            }
        };
        let mut entry = Entry::new(dn);
        for (description, value) in values {
            entry.add_values(&description, std::iter::once(value));
        }
        match write.add(&entry, &context) {
            Ok(_) => entries += 1,
            Err(error) => skip(RecordError {
                line,
                dn: Some(record.dn),
                message: error.to_string(),
            })?,
        }
        progress.update(entries, 0);
    }
    write
        .commit()
        .map_err(|error| LoadError::Invalid(format!("commit: {error}")))?;
    store.sync()?;
    progress.finish();
    let database_bytes =
        std::fs::metadata(Path::new(&options.directory).join(lmdir_store::layout::DATA_FILE_NAME))
            .map(|m| m.len())
            .unwrap_or(0);
    Ok(LoadSummary {
        entries,
        skipped,
        skipped_count,
        elapsed: started.elapsed(),
        input_bytes: input_bytes_total,
        database_bytes,
        peak_rss_bytes: crate::peak_rss_bytes(),
        spill_files: 0,
    })
}
