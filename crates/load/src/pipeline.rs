//! The load pipeline: reader thread → worker threads → the sequencer/writer (calling thread).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

use crossbeam_channel::{bounded, Receiver, Sender};
use lmdir_ldif::{ChunkedRecordSource, RecordBatch};
use lmdir_store::layout;
use lmdir_store::{BulkWriter, DirectoryLock, Store, StoreDirectory, WriteContext};
use lmdir_sync::ContextCsns;
use roaring::RoaringBitmap;

use crate::in_flight::InFlight;
use crate::memberof::GroupMembers;
use crate::prepare::{
    prepare_record, PrepareContext, PreparedEntry, RecordError, WorkerScratch,
    INDEX_DB_PREFIX_BYTES,
};
use crate::progress::Progress;
use crate::runs::{FinishedRun, MergedRuns, PostingRun, RunError, SharedCharge};
use crate::tree::{TreeBuilder, TreeError};
use crate::{LoadError, LoadInput, LoadOptions, LoadSummary, SKIPPED_REPORTED_MAX};

/// LDIF read per batch.
const CHUNK_BYTES: usize = 4 << 20;
/// Batches in flight per worker (read ahead, being prepared, or waiting to be sequenced).
const BATCHES_IN_FLIGHT_PER_WORKER: usize = 3;

struct WorkBatch {
    sequence: u64,
    first_id: u32,
    batch: RecordBatch,
}

struct DoneBatch {
    sequence: u64,
    input_bytes: usize,
    results: Vec<Result<PreparedEntry, RecordError>>,
    /// The worker could not keep index keys (a spill file not written): the load stops here,
    /// in batch order, through the sequencer like any fatal error (the stages then wind down).
    run_failure: Option<RunError>,
    /// The batch's encoded `id2entry` values (`PreparedEntry::encoded` ranges into it); sent
    /// back to the workers for reuse once written.
    arena: Vec<u8>,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Whether an existing `directory` holds a data file. Anything but a store's own files there
/// is an error: only a directory holding just a store is ours to load into or replace.
fn has_data_file(directory: &Path) -> Result<bool, LoadError> {
    match lmdir_store::inspect_directory(directory).map_err(io_error(directory))? {
        StoreDirectory::Empty => Ok(false),
        StoreDirectory::Store => Ok(true),
        StoreDirectory::Foreign(name) => Err(LoadError::Invalid(format!(
            "{}: not empty and not an lmdir store (it holds '{name}')",
            directory.display(),
        ))),
    }
}

/// Whether the store in `options.directory` has entries. Opened read-only: the caller already
/// holds the directory's writer lock.
fn holds_entries(options: &LoadOptions) -> Result<bool, LoadError> {
    let directory = &options.directory;
    let store = Store::open_read_only(directory, options.store.clone(), options.schema.clone())?;
    let count = store.read()?.entry_count().map_err(|error| {
        LoadError::Invalid(format!("{}: {}", directory.display(), error.message))
    })?;
    Ok(count > 0)
}

/// Puts the finished DB in place, then fsyncs the directory whose entries changed, so the
/// rename survives a crash.
/// - Absent target: the staging directory is renamed to it, its own writer lock held across
///   the rename, so the new store is locked from the moment it appears.
/// - Existing target (its lock held by the caller): the data file is renamed over the
///   target's (atomic; a reader of the old file keeps its mapping).
fn install(staging: &Path, directory: &Path, target_existed: bool) -> Result<(), LoadError> {
    if !target_existed {
        let _lock = DirectoryLock::acquire(staging)?;
        std::fs::rename(staging, directory).map_err(io_error(directory))?;
        return sync_directory(&parent_directory(directory));
    }
    lmdir_store::replace_data_file(staging, directory).map_err(io_error(directory))?;
    sync_directory(directory)?;
    let _ = std::fs::remove_dir_all(staging);
    Ok(())
}

fn sync_directory(directory: &Path) -> Result<(), LoadError> {
    File::open(directory)
        .and_then(|handle| handle.sync_all())
        .map_err(io_error(directory))
}

fn parent_directory(directory: &Path) -> PathBuf {
    match directory.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn staging_directory(directory: &Path) -> Result<PathBuf, LoadError> {
    let name = directory
        .file_name()
        .ok_or_else(|| {
            LoadError::Invalid(format!("{}: not a directory name", directory.display()))
        })?
        .to_string_lossy()
        .into_owned();
    let parent = parent_directory(directory);
    std::fs::create_dir_all(&parent).map_err(io_error(&parent))?;
    // A load killed earlier leaves its staging directory behind; its process is gone.
    let prefix = format!(".{name}.loading-");
    if let Ok(items) = std::fs::read_dir(&parent) {
        for item in items.flatten() {
            let file_name = item.file_name().to_string_lossy().into_owned();
            if let Some(pid) = file_name
                .strip_prefix(&prefix)
                .and_then(|pid| pid.parse::<u32>().ok())
            {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(item.path());
                }
            }
        }
    }
    Ok(parent.join(format!("{prefix}{}", std::process::id())))
}

/// Loads an LDIF file. Into an empty (or absent) directory the load builds a fresh DB beside
/// it and moves it into place at the end, so a failed or killed load leaves no DB; into a
/// non-empty store the entries are added through the store's own writes (slower, correct).
/// The directory's writer lock is held throughout: a running server refuses the load.
pub fn load(options: &LoadOptions, ldif_path: &Path) -> Result<LoadSummary, LoadError> {
    let input = File::open(ldif_path).map_err(io_error(ldif_path))?;
    let input_bytes_total = input.metadata().map(|metadata| metadata.len()).unwrap_or(0);
    load_from(options, Box::new(input), input_bytes_total)
}

/// Loads LDIF from any reader (standard input for `lmdir load -`), as [`load`] does a file.
/// The pipeline only reads forward, so a pipe streams through without being spooled;
/// `input_bytes_total` only sizes the progress display (0 = unknown).
pub fn load_from(
    options: &LoadOptions,
    input: LoadInput,
    input_bytes_total: u64,
) -> Result<LoadSummary, LoadError> {
    let started = Instant::now();
    let directory = &options.directory;
    let target_existed = directory.exists();
    // Held to the end: a server, load or reindex on this directory refuses this load here.
    let lock = if target_existed {
        let has_data = has_data_file(directory)?;
        let lock = DirectoryLock::acquire(directory)?;
        if has_data && holds_entries(options)? {
            // The store's own writes take the lock again through `Store::open`.
            drop(lock);
            return crate::existing::load_into_existing(options, input, input_bytes_total, started);
        }
        Some(lock)
    } else {
        None
    };
    let staging = staging_directory(directory)?;
    let result = load_fresh(options, input, input_bytes_total, &staging, started)
        .and_then(|summary| install(&staging, directory, target_existed).map(|()| summary));
    match result {
        Ok(mut summary) => {
            summary.database_bytes = lmdir_store::data_file_bytes(directory);
            summary.elapsed = started.elapsed();
            summary.peak_rss_bytes = crate::peak_rss_bytes();
            drop(lock);
            Ok(summary)
        }
        Err(error) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(error)
        }
    }
}

/// How a load divides its memory and cores.
struct Budget {
    threads: usize,
    memory_bytes: usize,
    /// Each worker's sorted runs before they spill.
    worker_run_bytes: usize,
    /// The DN tree's `dn2id` run before it spills.
    tree_run_bytes: usize,
    /// LDIF bytes read and not yet written (`InFlight`).
    in_flight_bytes: usize,
}

impl Budget {
    fn new(options: &LoadOptions) -> Budget {
        let threads = if options.threads == 0 {
            std::thread::available_parallelism().map_or(2, |count| count.get())
        } else {
            options.threads
        };
        let memory_bytes = if options.memory_bytes_max == 0 {
            crate::default_memory_bytes()
        } else {
            options.memory_bytes_max
        };
        // Half the budget is for the workers' sorted runs, less the index writer's queue, which
        // the merge fills while the DN tree is written (so peak RSS stays near `--memory`).
        let runs_bytes = (memory_bytes / 2)
            .saturating_sub(CHUNK_QUEUE_BYTES_MAX)
            .max(memory_bytes / 4);
        Budget {
            threads,
            memory_bytes,
            worker_run_bytes: (runs_bytes / threads).max(1),
            tree_run_bytes: (memory_bytes / 10).max(1),
            in_flight_bytes: (memory_bytes / 8).max(CHUNK_BYTES),
        }
    }

    /// The most of what the sequencer holds (`Sequencing::held_bytes`) the workers' runs can
    /// give up room for; past it the load holds more than `--memory`.
    fn held_bytes_absorbable(&self) -> usize {
        SharedCharge::absorbable_bytes(self.worker_run_bytes) * self.threads
    }
}

fn load_fresh(
    options: &LoadOptions,
    input: LoadInput,
    input_bytes_total: u64,
    staging: &Path,
    started: Instant,
) -> Result<LoadSummary, LoadError> {
    let _ = std::fs::remove_dir_all(staging);
    let mut store_options = options.store.clone();
    // One fsync at the end instead of one per commit, in both modes.
    store_options.sync = false;
    let store = Store::open(staging, store_options, options.schema.clone())?;
    let summary = load_into_with(
        &store,
        options,
        input,
        input_bytes_total,
        staging,
        started,
        ContextCsn::Stamped,
    )?;
    drop(store);
    Ok(summary)
}

/// Where a load's contextCSN comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextCsn {
    /// The newest CSN the load stamped (an import: the data is this server's own).
    Stamped,
    /// Left alone: a replica's contextCSN comes with its provider's cookie, written after the
    /// load by the consumer (a stamped one would claim changes it never received).
    FromProvider,
}

/// Bulk-loads `input` into `store`, which must be open and hold no entry (a fresh replica's
/// first refresh), through the same pipeline as a fresh load: the caller keeps the store; spill
/// files go to `spill_directory`. Writers of the store wait until it is done.
pub fn load_into_empty(
    store: &Store,
    options: &LoadOptions,
    input: LoadInput,
    spill_directory: &Path,
    context_csn: ContextCsn,
) -> Result<LoadSummary, LoadError> {
    let started = Instant::now();
    let mut summary = load_into_with(
        store,
        options,
        input,
        0,
        spill_directory,
        started,
        context_csn,
    )?;
    summary.elapsed = started.elapsed();
    Ok(summary)
}

fn load_into_with(
    store: &Store,
    options: &LoadOptions,
    input: LoadInput,
    input_bytes_total: u64,
    staging: &Path,
    started: Instant,
    context_csn: ContextCsn,
) -> Result<LoadSummary, LoadError> {
    let budget = Budget::new(options);
    // A load writes as a relaxed importer: entries keep the operational values they carry.
    let write = WriteContext {
        now: SystemTime::now(),
        skip_schema_check: options.quick,
        relax: true,
        ..WriteContext::new(options.creators_name.clone())
    };
    let context = PrepareContext::new(store.clone(), write, options);
    // Into a live store (a replica's first refresh) the load carries the live-load mark.
    let mut bulk = match context_csn {
        ContextCsn::Stamped => store.bulk_load()?,
        ContextCsn::FromProvider => store.bulk_load_live()?,
    };
    let mut progress = Progress::new(options.progress, input_bytes_total);
    let (mut sequenced, runs) = run_stages(
        options,
        &context,
        &mut bulk,
        input,
        &budget,
        staging,
        &mut progress,
    )?;
    let spill_files = write_tree_and_indexes(
        store,
        &mut bulk,
        (&mut sequenced, context_csn),
        runs,
        &budget,
        staging,
        &mut progress,
    )?;
    // Per server ID, the newest of the entries' entryCSNs (those they carried, and those the
    // load stamped with server ID 0 on the entries that had none) and of the suffix's
    // contextCSN, as `slapadd -w` leaves it: an export from slapd keeps its CSNs, so its
    // consumers' cookies stay current.
    if context_csn == ContextCsn::Stamped {
        for csn in sequenced.context.iter() {
            bulk.set_context_csn(csn)?;
        }
    }
    bulk.finish(Some(sequenced.max_id + 1))?;
    crate::unique::check_fresh(store, options, &sequenced.lines)?;
    progress.finish();
    drop(context);
    Ok(LoadSummary {
        entries: sequenced.entries,
        repeated_values: sequenced.repeated_values,
        skipped: sequenced.skipped,
        skipped_count: sequenced.skipped_count,
        elapsed: started.elapsed(),
        input_bytes: sequenced.input_bytes,
        database_bytes: 0,
        peak_rss_bytes: 0,
        spill_files,
        held_bytes_peak: sequenced.held_bytes_peak as u64,
        held_bytes_over_budget: sequenced
            .held_bytes_peak
            .saturating_sub(budget.held_bytes_absorbable()) as u64,
    })
}

/// Stages 1-3 running together: the reader thread, the workers, and the sequencer on this
/// thread (LMDB's single writer). Returns what was sequenced and the workers' runs.
// Each phase stays out of line so an instruction profile names it (bench/load-instructions.sh).
#[inline(never)]
fn run_stages(
    options: &LoadOptions,
    context: &PrepareContext,
    bulk: &mut BulkWriter<'_>,
    input: LoadInput,
    budget: &Budget,
    spill_directory: &Path,
    progress: &mut Progress,
) -> Result<(Sequenced, Vec<FinishedRun>), LoadError> {
    let threads = budget.threads;
    let abort = AtomicBool::new(false);
    let window = threads * BATCHES_IN_FLIGHT_PER_WORKER;
    let (token_sender, token_receiver) = bounded::<()>(window);
    for _ in 0..window {
        token_sender
            .send(())
            .expect("the token channel has room for the window");
    }
    let (work_sender, work_receiver) = bounded::<WorkBatch>(threads);
    let (done_sender, done_receiver) = bounded::<DoneBatch>(window);
    // Arenas come back from the writer; at most one per batch in flight is kept.
    let (arena_sender, arena_receiver) = bounded::<Vec<u8>>(window);
    let in_flight = InFlight::new(budget.in_flight_bytes);
    let charge = SharedCharge::new(threads);
    std::thread::scope(
        |scope| -> Result<(Sequenced, Vec<FinishedRun>), LoadError> {
            let reader = {
                let abort = &abort;
                let in_flight = &in_flight;
                let parse_options = context.parse_options.clone();
                scope.spawn(move || {
                    let limits = ReadLimits {
                        tokens: token_receiver,
                        in_flight,
                        abort,
                    };
                    read_batches(input, &parse_options, limits, work_sender)
                })
            };
            let mut workers = Vec::with_capacity(threads);
            for _ in 0..threads {
                let work_receiver = work_receiver.clone();
                let done_sender = done_sender.clone();
                let arena_receiver = arena_receiver.clone();
                let abort = &abort;
                let run = PostingRun::new(budget.worker_run_bytes, spill_directory)
                    .charged(charge.clone());
                workers.push(scope.spawn(move || {
                    prepare_batches(
                        context,
                        work_receiver,
                        done_sender,
                        arena_receiver,
                        run,
                        spill_directory,
                        abort,
                    )
                }));
            }
            drop(work_receiver);
            drop(done_sender);
            drop(arena_receiver);
            let sequenced = sequence(
                options,
                bulk,
                done_receiver,
                BatchReturns {
                    tokens: &token_sender,
                    arenas: &arena_sender,
                    in_flight: &in_flight,
                    charge: &charge,
                },
                budget.tree_run_bytes,
                spill_directory,
                progress,
            );
            if sequenced.is_err() {
                abort.store(true, Ordering::SeqCst);
            }
            in_flight.close();
            drop(token_sender);
            let reader_result = reader.join().expect("the reader thread does not panic");
            let mut runs = Vec::with_capacity(threads);
            let mut worker_error = None;
            for worker in workers {
                match worker.join().expect("worker threads do not panic") {
                    Ok(run) => runs.push(run),
                    Err(error) => worker_error = Some(error),
                }
            }
            let sequenced = sequenced?;
            reader_result?;
            if let Some(error) = worker_error {
                return Err(error.into());
            }
            Ok((sequenced, runs))
        },
    )
}

/// After the entries: the DN tree, memberOf (which resolves member DNs through the tree, so
/// the tree is written and committed first), and the merged indexes. Returns the spill files
/// used.
#[inline(never)]
fn write_tree_and_indexes(
    store: &Store,
    bulk: &mut BulkWriter<'_>,
    (sequenced, context_csn): (&mut Sequenced, ContextCsn),
    mut runs: Vec<FinishedRun>,
    budget: &Budget,
    spill_directory: &Path,
    progress: &mut Progress,
) -> Result<u64, LoadError> {
    let mut tree = sequenced.tree.take();
    let mut tree_spills = 0;
    if !sequenced.groups.is_empty() {
        progress.phase("writing the DN tree");
        let tree = tree.take().expect("the tree is written once");
        tree_spills = write_dn_tree(bulk, tree)?;
        // memberOf reads the tree through the store's read txns: commit it first.
        bulk.checkpoint()?;
        progress.phase("adding memberOf");
        // A replica's memberOf is a function of its groups, whatever order the refresh sent
        // them in (the writer's replicated adds look groups up the same way); an import's
        // follows single-entry adds of the file in order.
        let memberships = match context_csn {
            ContextCsn::Stamped => crate::memberof::Memberships::AddedBefore,
            ContextCsn::FromProvider => crate::memberof::Memberships::EveryGroup,
        };
        let memberof_run = crate::memberof::add_memberof(
            store,
            bulk,
            (&sequenced.groups, memberships),
            &sequenced.rejected,
            (budget.memory_bytes / 2).max(1),
            spill_directory,
        )?;
        runs.extend(memberof_run);
    }
    progress.phase("merging indexes");
    let run_spills = runs.iter().map(|run| run.spilled.len() as u64).sum::<u64>();
    let parts = split_merge(runs, budget.threads)?;
    // Otherwise the single writer writes the tree while the merge thread already produces
    // index chunks (they queue up), instead of the merge waiting for the tree.
    let mut write_tree = |bulk: &mut BulkWriter<'_>| -> Result<(), LoadError> {
        if let Some(tree) = tree.take() {
            tree_spills = write_dn_tree(bulk, tree)?;
        }
        Ok(())
    };
    write_index_runs(bulk, parts, &sequenced.rejected, Some(&mut write_tree))?;
    Ok(run_spills + tree_spills)
}

/// What holds the reader back: a token per batch in flight, the bytes in flight, the abort.
struct ReadLimits<'a> {
    tokens: Receiver<()>,
    in_flight: &'a InFlight,
    abort: &'a AtomicBool,
}

/// Stage 1: batches of records in file order, numbered; IDs are record ordinals.
#[inline(never)]
fn read_batches(
    input: LoadInput,
    parse_options: &lmdir_ldif::ParseOptions,
    limits: ReadLimits<'_>,
    work: Sender<WorkBatch>,
) -> Result<(), LoadError> {
    let ReadLimits {
        tokens,
        in_flight,
        abort,
    } = limits;
    let mut source = ChunkedRecordSource::with_chunk_bytes(input, parse_options, CHUNK_BYTES);
    let mut next_id: u64 = 1;
    let mut sequence = 0u64;
    loop {
        if tokens.recv().is_err() || abort.load(Ordering::Relaxed) {
            return Ok(());
        }
        let batch = match source.next_batch() {
            Ok(Some(batch)) => batch,
            Ok(None) => return Ok(()),
            Err(error) => {
                return Err(LoadError::Record(RecordError {
                    line: error.line,
                    dn: error.dn,
                    message: error.message,
                }))
            }
        };
        if !in_flight.acquire(batch.bytes.len()) {
            return Ok(());
        }
        let count = batch.records.len() as u64;
        if next_id + count > u64::from(u32::MAX) {
            return Err(LoadError::Invalid(format!(
                "more than {} entries in one load",
                u32::MAX - 1
            )));
        }
        let first_id = next_id as u32;
        next_id += count;
        if work
            .send(WorkBatch {
                sequence,
                first_id,
                batch,
            })
            .is_err()
        {
            return Ok(());
        }
        sequence += 1;
    }
}

/// Stage 2: prepare every record of each batch; index keys go into this thread's run.
#[inline(never)]
fn prepare_batches(
    context: &PrepareContext,
    work: Receiver<WorkBatch>,
    done: Sender<DoneBatch>,
    arenas: Receiver<Vec<u8>>,
    mut run: PostingRun,
    spill_directory: &Path,
    abort: &AtomicBool,
) -> Result<FinishedRun, RunError> {
    let mut scratch = WorkerScratch::default();
    for WorkBatch {
        sequence,
        first_id,
        batch,
    } in work
    {
        if abort.load(Ordering::Relaxed) {
            break;
        }
        let mut results = Vec::with_capacity(batch.records.len());
        let mut run_failure = None;
        let mut arena = arenas.try_recv().unwrap_or_default();
        arena.clear();
        // Encoded entries are a little larger than their LDIF (normalized values added).
        arena.reserve(batch.bytes.len() + batch.bytes.len() / 2);
        for (offset, (bytes, first_line)) in batch.iter().enumerate() {
            let id = first_id + offset as u32;
            results.push(prepare_record(
                context,
                bytes,
                first_line,
                id,
                &mut run,
                &mut scratch,
                &mut arena,
            ));
            run_failure = scratch.take_run_failure();
            if run_failure.is_some() {
                break;
            }
        }
        let failed = run_failure.is_some();
        let sent = done.send(DoneBatch {
            sequence,
            input_bytes: batch.bytes.len(),
            results,
            run_failure,
            arena,
        });
        if failed {
            // The sequencer answers with the failure when it reaches this batch, and then sets
            // `abort`. Not here: another worker would drop an earlier batch it had just taken,
            // and the sequencer would wait for it.
            return Err(RunError::Corrupt {
                path: spill_directory.to_path_buf(),
                what: "this worker stopped at a failed spill",
            });
        }
        if sent.is_err() {
            break;
        }
    }
    run.finish()
}

/// What the writer hands back per written batch: a token (the reader may read one more batch)
/// and the batch's arena (a worker may reuse it); and what it holds now, charged to the
/// workers' runs.
struct BatchReturns<'a> {
    tokens: &'a Sender<()>,
    arenas: &'a Sender<Vec<u8>>,
    in_flight: &'a InFlight,
    charge: &'a SharedCharge,
}

struct Sequenced {
    entries: u64,
    repeated_values: u64,
    max_id: u32,
    rejected: RoaringBitmap,
    skipped: Vec<RecordError>,
    skipped_count: u64,
    input_bytes: u64,
    /// The DN tree, complete but not written yet: `write_dn_tree` writes it, overlapping the
    /// index merge when it can (taken out once written).
    tree: Option<TreeBuilder>,
    /// Group entries and their member DNs (only with memberOf upkeep), in ID order.
    groups: Vec<GroupMembers>,
    /// (ID, line) of each accepted entry, in ID order (only with uniqueness rules).
    lines: Vec<(u32, u64)>,
    /// The most the sequencer held beside its budgets (`Sequencing::note_held_bytes`).
    held_bytes_peak: usize,
    /// The greatest CSN per server ID of the accepted entries' entryCSNs and the suffix's
    /// contextCSN values: the contextCSN `slapadd -w` leaves (an orphan dropped at the end
    /// under --continue-on-error may still have raised it).
    context: ContextCsns,
}

struct Skips {
    continue_on_error: bool,
    skipped: Vec<RecordError>,
    count: u64,
}

impl Skips {
    fn skip(&mut self, error: RecordError) -> Result<(), LoadError> {
        if !self.continue_on_error {
            return Err(LoadError::Record(error));
        }
        self.count += 1;
        if self.skipped.len() < SKIPPED_REPORTED_MAX {
            self.skipped.push(error);
        }
        Ok(())
    }
}

/// Largest arena handed back to the workers for reuse.
const ARENA_KEPT_BYTES_MAX: usize = 64 << 20;

/// Stage 3: batches back in file order; id2entry appended; the DN tree built; at the end the
/// tree's rows written.
#[inline(never)]
fn sequence(
    options: &LoadOptions,
    bulk: &mut BulkWriter<'_>,
    done: Receiver<DoneBatch>,
    returns: BatchReturns<'_>,
    tree_budget: usize,
    spill_directory: &Path,
    progress: &mut Progress,
) -> Result<Sequenced, LoadError> {
    let mut state = Sequencing::new(options, tree_budget, spill_directory)?;
    let mut reorder: BTreeMap<u64, DoneBatch> = BTreeMap::new();
    let mut next_sequence = 0u64;
    for batch in done {
        reorder.insert(batch.sequence, batch);
        while let Some(mut batch) = reorder.remove(&next_sequence) {
            if let Some(failure) = batch.run_failure.take() {
                return Err(failure.into());
            }
            next_sequence += 1;
            state.input_bytes += batch.input_bytes as u64;
            state.accepted.clear();
            for result in batch.results {
                state.take(result)?;
            }
            state.append_accepted(bulk, &batch.arena)?;
            // The batch is done with: let the reader read one more, and a worker reuse the arena
            // (not one a large group grew: ~6 MiB is the usual size).
            if batch.arena.capacity() <= ARENA_KEPT_BYTES_MAX {
                let _ = returns.arenas.try_send(batch.arena);
            }
            returns.in_flight.release(batch.input_bytes);
            returns.charge.set(state.note_held_bytes());
            let _ = returns.tokens.send(());
            progress.update(state.entries, state.input_bytes);
        }
    }
    if !reorder.is_empty() {
        // A worker stopped early (abort or error): its error is reported by the caller.
        return Err(LoadError::Invalid(
            "the load stopped before all batches were prepared".into(),
        ));
    }
    state.finish(bulk)
}

/// What `sequence` gathered from the batches taken in order so far.
struct Sequencing {
    tree: TreeBuilder,
    skips: Skips,
    rejected: RoaringBitmap,
    entries: u64,
    repeated_values: u64,
    input_bytes: u64,
    max_id: u32,
    groups: Vec<GroupMembers>,
    /// Each entry's line, kept only when uniqueness is checked.
    lines: Vec<(u32, u64)>,
    keep_lines: bool,
    /// What `groups` holds (their member DNs).
    group_bytes: usize,
    /// The most `held_bytes` was after a batch.
    held_bytes_peak: usize,
    context: ContextCsns,
    /// The batch's accepted entries, appended together through one cursor.
    accepted: Vec<(u32, std::ops::Range<usize>, std::ops::Range<usize>)>,
}

impl Sequencing {
    /// Nothing taken yet; the tree builder spills to `spill_directory` past `tree_budget`.
    fn new(
        options: &LoadOptions,
        tree_budget: usize,
        spill_directory: &Path,
    ) -> Result<Sequencing, LoadError> {
        Ok(Sequencing {
            tree: TreeBuilder::new(tree_budget, spill_directory)?,
            skips: Skips {
                continue_on_error: options.continue_on_error,
                skipped: Vec::new(),
                count: 0,
            },
            rejected: RoaringBitmap::new(),
            entries: 0,
            repeated_values: 0,
            input_bytes: 0,
            max_id: 0,
            groups: Vec::new(),
            lines: Vec::new(),
            keep_lines: !options.unique.is_empty(),
            group_bytes: 0,
            held_bytes_peak: 0,
            context: ContextCsns::new(),
            accepted: Vec::new(),
        })
    }

    /// Takes one record's result in order: a bad record or one the tree refuses is skipped
    /// (or fails the load); an accepted entry is counted, its CSNs merged and its group
    /// members kept.
    fn take(&mut self, result: Result<PreparedEntry, RecordError>) -> Result<(), LoadError> {
        let mut entry = match result {
            Ok(entry) => entry,
            Err(error) => return self.skips.skip(error),
        };
        match self.tree.arrive(&entry) {
            Ok(_) => {}
            Err(TreeError::Record(error)) => {
                self.rejected.insert(entry.id);
                return self.skips.skip(error);
            }
            Err(TreeError::Run(error)) => return Err(error.into()),
        }
        self.accepted
            .push((entry.id, entry.encoded.clone(), entry.value_rows.clone()));
        if self.keep_lines {
            self.lines.push((entry.id, entry.line));
        }
        self.max_id = self.max_id.max(entry.id);
        self.entries += 1;
        self.repeated_values += entry.repeated_values;
        for csn in entry.csn.into_iter().chain(entry.more_csns.drain(..)) {
            self.context.merge(csn);
        }
        if !entry.group_members.is_empty() {
            self.group_bytes += group_member_bytes(&entry.group_members)
                + group_member_bytes(&entry.group_members_unfound_later);
            self.groups.push(GroupMembers {
                id: entry.id,
                members: std::mem::take(&mut entry.group_members),
                unfound_later: std::mem::take(&mut entry.group_members_unfound_later),
            });
        }
        Ok(())
    }

    /// About what the sequencer holds in memory that grows with the input and has no budget
    /// of its own: the DN tree's slots and waiting nodes, the group member lists (for
    /// memberOf) and the entries' lines (for uniqueness). Records it in the peak.
    fn note_held_bytes(&mut self) -> usize {
        let held = self.tree.held_bytes()
            + self.group_bytes
            + self.groups.capacity() * size_of::<GroupMembers>()
            + self.lines.capacity() * size_of::<(u32, u64)>();
        self.held_bytes_peak = self.held_bytes_peak.max(held);
        held
    }

    /// Appends the batch's accepted entries and their value rows (ranges into `arena`).
    fn append_accepted(&self, bulk: &mut BulkWriter<'_>, arena: &[u8]) -> Result<(), LoadError> {
        bulk.append_entries(
            self.accepted
                .iter()
                .map(|(id, encoded, _)| (*id, &arena[encoded.clone()])),
        )?;
        bulk.append_value_rows(
            self.accepted
                .iter()
                .filter(|(_, _, rows)| !rows.is_empty())
                .map(|(_, _, rows)| &arena[rows.clone()]),
        )?;
        Ok(())
    }

    /// Every batch taken: the entries whose parent never came are removed and skipped.
    fn finish(mut self, bulk: &mut BulkWriter<'_>) -> Result<Sequenced, LoadError> {
        for (id, error) in self.tree.orphans() {
            self.rejected.insert(id);
            bulk.remove_entry(id)?;
            self.entries -= 1;
            self.skips.skip(error)?;
        }
        Ok(Sequenced {
            entries: self.entries,
            repeated_values: self.repeated_values,
            max_id: self.max_id,
            rejected: self.rejected,
            skipped: self.skips.skipped,
            skipped_count: self.skips.count,
            input_bytes: self.input_bytes,
            tree: Some(self.tree),
            groups: self.groups,
            lines: self.lines,
            context: self.context,
            held_bytes_peak: self.held_bytes_peak,
        })
    }
}

/// What a group's member DN list holds.
fn group_member_bytes(members: &[String]) -> usize {
    members
        .iter()
        .map(|member| size_of::<String>() + member.capacity())
        .sum()
}

/// Tree rows read ahead and appended through one cursor at a time.
const TREE_ROWS_PER_APPEND: usize = 4096;

/// Writes the DN tree (`id2node` in ID order with subtree sizes, then `dn2id` sorted), both
/// appended. Returns the number of spill files the tree used.
#[inline(never)]
fn write_dn_tree(bulk: &mut BulkWriter<'_>, tree: TreeBuilder) -> Result<u64, LoadError> {
    let (dn2id_run, mut rows) = tree.finish()?;
    let tree_spills = dn2id_run.spilled.len() as u64;
    // Rows are read (fallibly) in groups, each group appended through one cursor.
    let mut records = Vec::with_capacity(TREE_ROWS_PER_APPEND);
    loop {
        records.clear();
        while records.len() < TREE_ROWS_PER_APPEND {
            match rows.next_row()? {
                Some(row) => records.push(row),
                None => break,
            }
        }
        if records.is_empty() {
            break;
        }
        bulk.append_nodes(records.iter().map(|(record, subtree_size, child_count)| {
            let node = layout::Node {
                parent: record.parent,
                subtree_size: *subtree_size,
                child_count: *child_count,
                rdn_original: &record.rdn_original,
                rdn_normalized: &record.rdn_normalized,
            };
            (record.id, node)
        }))?;
    }
    let mut merged = MergedRuns::new(vec![dn2id_run])?;
    let (mut key, mut ids) = (Vec::new(), Vec::new());
    // dn2id keys in one arena per group: (key range, ID).
    let (mut keys, mut dn2id_rows) = (Vec::new(), Vec::with_capacity(TREE_ROWS_PER_APPEND));
    loop {
        keys.clear();
        dn2id_rows.clear();
        while dn2id_rows.len() < TREE_ROWS_PER_APPEND && merged.next_into(&mut key, &mut ids)? {
            assert_eq!(
                ids.len(),
                1,
                "a dn2id key names exactly one entry (duplicates are rejected on arrival)"
            );
            dn2id_rows.push((keys.len()..keys.len() + key.len(), ids[0]));
            keys.extend_from_slice(&key);
        }
        if dn2id_rows.is_empty() {
            break;
        }
        bulk.append_dn2ids(
            dn2id_rows
                .iter()
                .map(|(range, id)| (&keys[range.clone()], *id)),
        )?;
    }
    Ok(tree_spills)
}

/// Encoded posting chunks on their way from the merge thread to the LMDB writer: one arena
/// and (DB number, key range, value range) per chunk, so a batch is two allocations.
#[derive(Default)]
struct ChunkBatch {
    bytes: Vec<u8>,
    chunks: Vec<(u16, std::ops::Range<usize>, std::ops::Range<usize>)>,
}

/// Chunks per batch handed to the writer, and the bytes at which a batch is handed over early.
const CHUNK_BATCH_ITEMS: usize = 8192;
const CHUNK_BATCH_BYTES_MAX: usize = 1 << 20;
/// Batches queued between the merge thread and the writer: at most ~64 MiB, enough for the
/// merge to run on while the writer writes the DN tree.
const CHUNK_BATCHES_QUEUED_MAX: usize = 64;
const CHUNK_QUEUE_BYTES_MAX: usize = CHUNK_BATCHES_QUEUED_MAX * CHUNK_BATCH_BYTES_MAX;

/// The merge side: k-way merge, rejected IDs removed, IDs cut into 65,536-ID chunks and
/// encoded with the store's layout.
#[inline(never)]
fn merge_and_encode(
    mut merged: MergedRuns,
    rejected: &RoaringBitmap,
    output: Sender<ChunkBatch>,
) -> Result<(), LoadError> {
    let (mut key, mut ids) = (Vec::new(), Vec::new());
    let mut low_halves: Vec<u16> = Vec::with_capacity(1024);
    let mut value = Vec::with_capacity(4096);
    let mut bits = Vec::with_capacity(1 << 13);
    let mut batch = ChunkBatch::default();
    while merged.next_into(&mut key, &mut ids)? {
        assert!(
            key.len() > INDEX_DB_PREFIX_BYTES,
            "run keys carry a DB number and a kind"
        );
        let database_number = u16::from_be_bytes([key[0], key[1]]);
        if !rejected.is_empty() {
            ids.retain(|id| !rejected.contains(*id));
        }
        let body = &key[INDEX_DB_PREFIX_BYTES..];
        let mut position = 0;
        while position < ids.len() {
            let chunk = layout::chunk_of(ids[position]);
            low_halves.clear();
            while position < ids.len() && layout::chunk_of(ids[position]) == chunk {
                low_halves.push(layout::low_half(ids[position]));
                position += 1;
            }
            encode_sorted_chunk(&low_halves, &mut bits, &mut value);
            let key_start = batch.bytes.len();
            layout::push_index_key_with_chunk(body, chunk, &mut batch.bytes);
            let value_start = batch.bytes.len();
            batch.bytes.extend_from_slice(&value);
            batch.chunks.push((
                database_number,
                key_start..value_start,
                value_start..batch.bytes.len(),
            ));
        }
        if (batch.chunks.len() >= CHUNK_BATCH_ITEMS || batch.bytes.len() >= CHUNK_BATCH_BYTES_MAX)
            && output.send(std::mem::take(&mut batch)).is_err()
        {
            return Ok(());
        }
    }
    if !batch.chunks.is_empty() {
        let _ = output.send(batch);
    }
    Ok(())
}

/// `layout::encode_posting_chunk_sorted`, byte for byte, with the bitmap form built in one pass
/// over the sorted IDs: a bitset (LSB first) that roaring takes whole, so each ID costs one bit
/// set instead of roaring's checked push (collecting into a bitmap inserts one by one: 3% of the
/// load's CPU, on the merge threads that the index writer waits for). `bits` is scratch.
fn encode_sorted_chunk(low_halves: &[u16], bits: &mut Vec<u8>, out: &mut Vec<u8>) {
    let Some(last) = low_halves.last() else {
        return layout::encode_posting_chunk_sorted(low_halves, out);
    };
    if low_halves.len() <= layout::POSTING_LIST_FORM_MAX_IDS {
        layout::encode_posting_chunk_sorted(low_halves, out);
    } else {
        bits.clear();
        bits.resize(usize::from(*last) / 8 + 1, 0);
        for low in low_halves {
            bits[usize::from(*low) / 8] |= 1 << (low % 8);
        }
        layout::encode_posting_chunk(&RoaringBitmap::from_lsb0_bytes(0, bits), out);
    }
}

/// Merge threads at most: the one writer does about a third of the tail's work (standard
/// profile: 12.7k of 32.8k instructions per entry), so past three or four merge threads it is the
/// bound and more threads only add spill readers.
const MERGE_THREADS_MAX: usize = 4;
/// Spill-file readers at most over all merge parts: each part reads every spill file on its own
/// (a 256 KiB buffer and lz4's 64 KiB blocks, ~0.4 MiB), so many spills get fewer parts.
const SPILL_READERS_MAX: usize = 64;

/// The merge of `runs` cut for up to `threads` merge threads (`MergedRuns::split`), as many
/// parts as `MERGE_THREADS_MAX` and `SPILL_READERS_MAX` allow.
pub(crate) fn split_merge(
    runs: Vec<FinishedRun>,
    threads: usize,
) -> Result<Vec<MergedRuns>, LoadError> {
    let spill_files: usize = runs.iter().map(|run| run.spilled.len()).sum();
    let parts = threads
        .min(MERGE_THREADS_MAX)
        .min(SPILL_READERS_MAX / spill_files.max(1))
        .max(1);
    Ok(MergedRuns::split(runs, parts)?)
}

/// Work for the index writer to do first.
pub(crate) type BeforeIndexes<'f> = &'f mut dyn FnMut(&mut BulkWriter<'_>) -> Result<(), LoadError>;

/// Writes merged (slot ‖ key) → IDs runs into the (empty) index DBs as posting chunks in key
/// order through the bulk writer. `parts` are the merge cut into ascending key ranges
/// (`MergedRuns::split`): each is merged and encoded on its own thread into its own queue, and
/// the single LMDB writer drains the queues in order, so every DB is still appended in key
/// order while the later parts merge ahead. `before_indexes` runs on the writer first, while
/// the merge threads already fill their queues (the loader writes the DN tree there).
#[inline(never)]
pub(crate) fn write_index_runs(
    bulk: &mut BulkWriter<'_>,
    parts: Vec<MergedRuns>,
    rejected: &RoaringBitmap,
    before_indexes: Option<BeforeIndexes<'_>>,
) -> Result<(), LoadError> {
    // The queues share the one queue budget (counted in `--memory`).
    let queued_per_part = (CHUNK_BATCHES_QUEUED_MAX / parts.len().max(1)).max(1);
    std::thread::scope(|scope| -> Result<(), LoadError> {
        let mut producers = Vec::with_capacity(parts.len());
        let mut receivers = Vec::with_capacity(parts.len());
        for (number, merged) in parts.into_iter().enumerate() {
            let (sender, receiver) = bounded::<ChunkBatch>(queued_per_part);
            let producer = std::thread::Builder::new()
                .name(format!("lmdir-merge-{number}"))
                .spawn_scoped(scope, move || merge_and_encode(merged, rejected, sender))
                .map_err(|error| LoadError::Invalid(format!("starting a merge thread: {error}")))?;
            producers.push(producer);
            receivers.push(receiver);
        }
        let written = (|| -> Result<(), LoadError> {
            if let Some(before_indexes) = before_indexes {
                before_indexes(bulk)?;
            }
            for receiver in &receivers {
                for batch in receiver {
                    let bytes = &batch.bytes;
                    bulk.append_index_chunks(batch.chunks.iter().map(
                        |(slot, key_range, value_range)| {
                            (
                                *slot,
                                &bytes[key_range.clone()],
                                &bytes[value_range.clone()],
                            )
                        },
                    ))?;
                }
            }
            Ok(())
        })();
        // Unblock the producers if the writer failed, then collect their results.
        drop(receivers);
        let mut produced = Ok(());
        for producer in producers {
            let result = producer.join().expect("the merge threads do not panic");
            if produced.is_ok() {
                produced = result;
            }
        }
        written?;
        produced
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of `spills` spill files (one key each) and an in-memory run of 1,000 keys.
    fn runs_with_spills(directory: &Path, spills: u32) -> Vec<FinishedRun> {
        let mut spilled = crate::runs::PostingRun::new(1, directory);
        for id in 1..=spills {
            spilled.push(&id.to_be_bytes(), id).unwrap();
        }
        let mut memory = crate::runs::PostingRun::new(1 << 30, directory);
        for id in 1..=1000u32 {
            memory.push(&id.to_be_bytes(), id + spills).unwrap();
        }
        vec![spilled.finish().unwrap(), memory.finish().unwrap()]
    }

    /// Merge parts are bounded by the thread cap and by the spill readers they would open.
    #[test]
    fn merge_parts_are_bounded_by_threads_and_spill_readers() {
        let directory = tempfile::tempdir().unwrap();
        let few = runs_with_spills(directory.path(), 2);
        assert_eq!(split_merge(few, 64).unwrap().len(), MERGE_THREADS_MAX);
        let few = runs_with_spills(directory.path(), 2);
        assert_eq!(split_merge(few, 2).unwrap().len(), 2);
        let many = runs_with_spills(directory.path(), SPILL_READERS_MAX as u32 / 2 + 1);
        assert_eq!(split_merge(many, 64).unwrap().len(), 1);
    }

    /// The merge's one-pass bitmap encoding must equal the store's for every chunk shape.
    #[test]
    fn sorted_chunk_encoding_equals_the_store_encoding() {
        let shapes: Vec<Vec<u16>> = vec![
            vec![],
            vec![7],
            (0..layout::POSTING_LIST_FORM_MAX_IDS as u16).collect(),
            (0..=layout::POSTING_LIST_FORM_MAX_IDS as u16).collect(),
            (0..u16::MAX).step_by(3).collect(),
            (0..=u16::MAX).collect(),
            // Array containers in the bitmap form, the roaring array limit on each side.
            (5..u16::MAX).step_by(20).collect(),
            (0..4096u16).map(|low| low * 16).collect(),
            (0..4097u16).map(|low| low * 15 + 1).collect(),
            (1000..9000)
                .chain(20_000..20_100)
                .chain(60_000..65_000)
                .collect(),
        ];
        // One bitset scratch for all shapes, as on the merge thread: no bit may linger.
        let mut bits = Vec::new();
        for low_halves in shapes {
            let (mut ours, mut store) = (Vec::new(), Vec::new());
            encode_sorted_chunk(&low_halves, &mut bits, &mut ours);
            layout::encode_posting_chunk_sorted(&low_halves, &mut store);
            assert_eq!(ours, store, "{} IDs", low_halves.len());
        }
    }
}
