//! `reindex`: rebuild named (or all) index DBs from `id2entry` with the loader's sort/merge/APPEND
//! pipeline; every key comes from the store's own key function (`IndexPlan::stored_entry_keys`).

use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use lmdir_schema::AttrId;
use lmdir_store::Store;
use roaring::RoaringBitmap;

use crate::pipeline::{split_merge, write_index_runs};
use crate::prepare::WorkerScratch;
use crate::runs::{FinishedRun, PostingRun};
use crate::LoadError;

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
    let rebuilt: Vec<AttrId> = store
        .index_plan()
        .attrs()
        .iter()
        .copied()
        .filter(|attr| only.as_ref().is_none_or(|only| only.contains(attr)))
        .collect();
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
    let worker_run_bytes = (memory_bytes / 10 * 8 / threads).max(1);
    let (runs, entries) = reindex_runs(store, &rebuilt, threads, worker_run_bytes)?;
    let parts = split_merge(runs, threads)?;
    // One txn for the rebuilt indexes, so readers never see them half built; then the
    // store records that the configured indexes are built.
    let mut bulk = store.bulk_reindex(&rebuilt)?;
    write_index_runs(&mut bulk, parts, &RoaringBitmap::new(), None)?;
    bulk.finish(None)?;
    let mut write = store.write()?;
    write.mark_indexes_built(&rebuilt);
    write
        .commit()
        .map_err(|error| LoadError::Invalid(format!("reindex commit: {error}")))?;
    let mut names: Vec<String> = rebuilt
        .iter()
        .map(|attr| schema.attribute_type(*attr).name().to_string())
        .collect();
    names.sort();
    Ok(ReindexSummary {
        entries,
        indexes: names,
        elapsed: started.elapsed(),
    })
}

/// Every stored entry's keys for the `rebuilt` attributes, on `threads` workers fed in batches
/// by this thread; returns the workers' runs and the entries read.
fn reindex_runs(
    store: &Store,
    rebuilt: &[AttrId],
    threads: usize,
    worker_run_bytes: usize,
) -> Result<(Vec<FinishedRun>, u64), LoadError> {
    let spill_directory = std::env::temp_dir();
    let descriptions = store.descriptions();
    let plan_now = store.index_plan();
    let plan = &*plan_now;
    let selected = |attr: AttrId| rebuilt.contains(&attr);
    let (batch_sender, batch_receiver) = bounded::<Vec<(u32, Vec<u8>)>>(threads * 2);
    let mut entries = 0u64;
    let runs = std::thread::scope(|scope| -> Result<Vec<FinishedRun>, LoadError> {
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let receiver = batch_receiver.clone();
            let (descriptions, spill_directory) = (&descriptions, &spill_directory);
            let selected = &selected;
            workers.push(scope.spawn(move || -> Result<FinishedRun, LoadError> {
                let mut run = PostingRun::new(worker_run_bytes, spill_directory);
                let mut scratch = WorkerScratch::default();
                for batch in receiver {
                    for (id, bytes) in batch {
                        plan.stored_entry_keys(
                            &bytes,
                            descriptions,
                            selected,
                            &mut |slot, key| {
                                scratch
                                    .push_key(&mut run, slot, key, id)
                                    .map_err(LoadError::from)
                            },
                        )?;
                    }
                }
                Ok(run.finish()?)
            }));
        }
        drop(batch_receiver);
        let read_result = (|| -> Result<(), LoadError> {
            let read = store.read()?;
            let mut batch = Vec::with_capacity(REINDEX_BATCH_ENTRIES);
            for row in read.stored_entries()? {
                let (id, value) = row?;
                batch.push((id, value.into_owned()));
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
    Ok((runs, entries))
}
