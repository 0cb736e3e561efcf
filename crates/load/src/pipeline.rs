//! The load pipeline: reader thread → worker threads → the sequencer/writer (calling thread).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crossbeam_channel::{bounded, Receiver, Sender};
use heed::{PutFlags, RwTxn};
use lmdir_ldif::{ChunkedRecordSource, ParseOptions, RecordBatch};
use lmdir_schema::AttrId;
use lmdir_store::layout::{self, IndexKinds};
use lmdir_store::RawDatabase;
use lmdir_store::{DirectoryLock, Store};
use roaring::RoaringBitmap;

use crate::memberof::GroupMembers;
use crate::prepare::{
    prepare_record, DescriptionNumbers, OperationalValues, PrepareContext, PreparedEntry,
    RecordError, WorkerScratch, INDEX_DB_PREFIX_BYTES,
};
use crate::progress::Progress;
use crate::runs::{FinishedRun, MergedRuns, PostingRun, RunError};
use crate::tree::{TreeBuilder, TreeError};
use crate::{LoadError, LoadInput, LoadOptions, LoadSummary, SKIPPED_REPORTED_MAX};

/// LDIF read per batch.
const CHUNK_BYTES: usize = 4 << 20;
/// Commit the big write txn after this many bytes of values, so LMDB's dirty page list stays
/// bounded: small enough that the pages one txn frees serve the next (128 MiB windows made the
/// writer fault in fresh memory for every page; 16 MiB: peak RSS 630-660 -> 510 MB at 200k).
const COMMIT_EVERY_BYTES: usize = 16 << 20;
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
    /// The batch's encoded `id2entry` values (`PreparedEntry::encoded` ranges into it); sent
    /// back to the workers for reuse once written.
    arena: Vec<u8>,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The index DBs of a store in a fixed numbering (the run keys' 2-byte prefix).
pub(crate) fn index_databases(
    store: &Store,
    only: Option<&[AttrId]>,
) -> (HashMap<AttrId, (u16, IndexKinds)>, Vec<RawDatabase>) {
    let schema = store.schema();
    let mut attributes: Vec<AttrId> = schema
        .attribute_types()
        .map(|(attr, _)| attr)
        .filter(|attr| {
            !store.configured_kinds(*attr).is_empty() && store.index_database(*attr).is_some()
        })
        .filter(|attr| only.is_none_or(|only| only.contains(attr)))
        .collect();
    attributes.sort_unstable();
    let mut numbers = HashMap::new();
    let mut databases = Vec::new();
    for attr in attributes {
        numbers.insert(attr, (databases.len() as u16, store.configured_kinds(attr)));
        databases.push(store.index_database(attr).expect("filtered above"));
    }
    (numbers, databases)
}

/// Whether an existing `directory` holds a data file. Anything but a store's own files there
/// is an error: only a directory holding just a store is ours to load into or replace.
fn has_data_file(directory: &Path) -> Result<bool, LoadError> {
    let mut has_data = false;
    for item in std::fs::read_dir(directory).map_err(io_error(directory))? {
        let item = item.map_err(io_error(directory))?;
        let name = item.file_name();
        if name == layout::DATA_FILE_NAME {
            has_data = true;
        } else if name != layout::LMDB_LOCK_FILE_NAME && name != lmdir_store::LOCK_FILE_NAME {
            return Err(LoadError::Invalid(format!(
                "{}: not empty and not an lmdir store (it holds '{}')",
                directory.display(),
                name.to_string_lossy()
            )));
        }
    }
    Ok(has_data)
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
    // The old reader table belongs to the old data file; LMDB makes a new one.
    let old_reader_table = directory.join(layout::LMDB_LOCK_FILE_NAME);
    match std::fs::remove_file(&old_reader_table) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(io_error(&old_reader_table)(error))
        }
        _ => {}
    }
    let target = directory.join(layout::DATA_FILE_NAME);
    std::fs::rename(staging.join(layout::DATA_FILE_NAME), &target).map_err(io_error(&target))?;
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
            return crate::reindex::load_into_existing(options, input, input_bytes_total, started);
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
            summary.database_bytes = std::fs::metadata(directory.join(layout::DATA_FILE_NAME))
                .map(|m| m.len())
                .unwrap_or(0);
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
    let (indexes, databases) = index_databases(&store, None);
    let normalized_suffix = if options.store.suffix.is_empty() {
        String::new()
    } else {
        options
            .schema
            .normalize_dn_str(&options.store.suffix)
            .map_err(|error| {
                LoadError::Invalid(format!(
                    "suffix '{}': {}",
                    options.store.suffix, error.message
                ))
            })?
    };
    let existing_descriptions: Vec<String> = {
        let table = store.descriptions();
        (0..table.len() as u32)
            .filter_map(|number| table.get(number).map(|info| info.text.clone()))
            .collect()
    };
    let existing_description_count = existing_descriptions.len();
    let context = Arc::new(PrepareContext {
        schema: options.schema.clone(),
        parse_options: ParseOptions::default(),
        check_schema: !options.quick,
        normalized_suffix,
        indexes,
        descriptions: Arc::new(DescriptionNumbers::with_existing(existing_descriptions)),
        operational: OperationalValues::new(SystemTime::now(), &options.creators_name),
        memberof: options.store.memberof,
        key_size_max: store.env().max_key_size(),
    });
    let spill_directory = staging.to_path_buf();
    // Half the budget is for the workers' sorted runs, less the index writer's queue, which the
    // merge fills while the DN tree is written (so peak RSS stays near `--memory`).
    let runs_bytes = (memory_bytes / 2)
        .saturating_sub(CHUNK_QUEUE_BYTES_MAX)
        .max(memory_bytes / 4);
    let worker_budget = (runs_bytes / threads).max(1);
    let tree_budget = (memory_bytes / 10).max(1);

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

    let mut progress = Progress::new(options.progress, input_bytes_total);
    let outcome = std::thread::scope(
        |scope| -> Result<(Sequenced, Vec<FinishedRun>), LoadError> {
            let reader = {
                let abort = &abort;
                scope.spawn(move || read_batches(input, token_receiver, work_sender, abort))
            };
            let mut workers = Vec::with_capacity(threads);
            for _ in 0..threads {
                let context = context.clone();
                let work_receiver = work_receiver.clone();
                let done_sender = done_sender.clone();
                let arena_receiver = arena_receiver.clone();
                let spill_directory = spill_directory.clone();
                let abort = &abort;
                workers.push(scope.spawn(move || {
                    prepare_batches(
                        &context,
                        work_receiver,
                        done_sender,
                        arena_receiver,
                        worker_budget,
                        &spill_directory,
                        abort,
                    )
                }));
            }
            drop(work_receiver);
            drop(done_sender);
            drop(arena_receiver);
            let sequenced = sequence(
                options,
                &store,
                done_receiver,
                BatchReturns {
                    tokens: &token_sender,
                    arenas: &arena_sender,
                },
                tree_budget,
                &spill_directory,
                &mut progress,
            );
            if sequenced.is_err() {
                abort.store(true, Ordering::SeqCst);
            }
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
    );
    let (mut sequenced, mut runs) = outcome?;
    let mut write_txn = Some(store.env().write_txn()?);
    let mut tree = sequenced.tree.take();
    let mut tree_spills = 0;
    if !sequenced.groups.is_empty() {
        // memberOf resolves member DNs through the tree: write it first.
        progress.phase("writing the DN tree");
        let tree = tree.take().expect("the tree is written once");
        let mut tree_txn = write_txn.take().expect("a txn is open");
        tree_spills = write_dn_tree(&store, &mut tree_txn, tree)?;
        // memberOf reads the tree through its own read txns: commit it first.
        tree_txn.commit()?;
        write_txn = Some(store.env().write_txn()?);
        progress.phase("adding memberOf");
        let memberof_run = crate::memberof::add_memberof(
            &store,
            &mut write_txn,
            COMMIT_EVERY_BYTES,
            &context,
            &sequenced.groups,
            &sequenced.rejected,
            (memory_bytes / 2).max(1),
            &spill_directory,
        )?;
        runs.extend(memberof_run);
    }
    progress.phase("merging indexes");
    let run_spills = runs.iter().map(|run| run.spilled.len() as u64).sum::<u64>();
    let merged = MergedRuns::new(runs)?;
    // Otherwise the single writer writes the tree while the merge thread already produces
    // index chunks (they queue up), instead of the merge waiting for the tree.
    let mut write_tree = |txn: &mut RwTxn<'_>| -> Result<(), LoadError> {
        if let Some(tree) = tree.take() {
            tree_spills = write_dn_tree(&store, txn, tree)?;
        }
        Ok(())
    };
    write_index_runs(
        store.env(),
        &mut write_txn,
        Some(COMMIT_EVERY_BYTES),
        &databases,
        merged,
        &sequenced.rejected,
        Some(&mut write_tree),
    )?;
    let spill_files = run_spills + tree_spills;
    let mut write_txn = write_txn.expect("a txn is open");
    // meta: the new description rows and the next ID.
    let meta = store.meta_database();
    for (number, text) in context
        .descriptions
        .texts()
        .iter()
        .enumerate()
        .skip(existing_description_count)
    {
        let mut key = layout::META_DESCRIPTION_PREFIX.to_vec();
        key.extend_from_slice(&(number as u32).to_be_bytes());
        meta.put(&mut write_txn, &key, text.as_bytes())?;
    }
    meta.put(
        &mut write_txn,
        layout::META_NEXT_ID,
        &(sequenced.max_id + 1).to_be_bytes(),
    )?;
    write_txn.commit()?;
    store.sync()?;
    progress.finish();
    drop(store);
    Ok(LoadSummary {
        entries: sequenced.entries,
        skipped: sequenced.skipped,
        skipped_count: sequenced.skipped_count,
        elapsed: started.elapsed(),
        input_bytes: sequenced.input_bytes,
        database_bytes: 0,
        peak_rss_bytes: 0,
        spill_files,
    })
}

/// Stage 1: batches of records in file order, numbered; IDs are record ordinals.
fn read_batches(
    input: LoadInput,
    tokens: Receiver<()>,
    work: Sender<WorkBatch>,
    abort: &AtomicBool,
) -> Result<(), LoadError> {
    let mut source =
        ChunkedRecordSource::with_chunk_bytes(input, &ParseOptions::default(), CHUNK_BYTES);
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
fn prepare_batches(
    context: &PrepareContext,
    work: Receiver<WorkBatch>,
    done: Sender<DoneBatch>,
    arenas: Receiver<Vec<u8>>,
    budget_bytes: usize,
    spill_directory: &Path,
    abort: &AtomicBool,
) -> Result<FinishedRun, RunError> {
    let mut run = PostingRun::new(budget_bytes, spill_directory);
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
        }
        if done
            .send(DoneBatch {
                sequence,
                input_bytes: batch.bytes.len(),
                results,
                arena,
            })
            .is_err()
        {
            break;
        }
    }
    run.finish()
}

/// What the writer hands back per written batch: a token (the reader may read one more batch)
/// and the batch's arena (a worker may reuse it).
struct BatchReturns<'a> {
    tokens: &'a Sender<()>,
    arenas: &'a Sender<Vec<u8>>,
}

struct Sequenced {
    entries: u64,
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

/// Stage 3: batches back in file order; id2entry appended; the DN tree built; at the end the
/// tree's rows written.
fn sequence(
    options: &LoadOptions,
    store: &Store,
    done: Receiver<DoneBatch>,
    returns: BatchReturns<'_>,
    tree_budget: usize,
    spill_directory: &Path,
    progress: &mut Progress,
) -> Result<Sequenced, LoadError> {
    let env = store.env();
    let id2entry = store.id2entry_database();
    let mut tree = TreeBuilder::new(tree_budget, spill_directory)?;
    let mut write_txn = env.write_txn()?;
    let mut bytes_since_commit = 0usize;
    let mut reorder: BTreeMap<u64, DoneBatch> = BTreeMap::new();
    let mut next_sequence = 0u64;
    let mut skips = Skips {
        continue_on_error: options.continue_on_error,
        skipped: Vec::new(),
        count: 0,
    };
    let mut rejected = RoaringBitmap::new();
    let mut entries = 0u64;
    let mut input_bytes = 0u64;
    let mut max_id = 0u32;
    let mut groups: Vec<GroupMembers> = Vec::new();
    for batch in done {
        reorder.insert(batch.sequence, batch);
        while let Some(batch) = reorder.remove(&next_sequence) {
            next_sequence += 1;
            input_bytes += batch.input_bytes as u64;
            for result in batch.results {
                let mut entry = match result {
                    Ok(entry) => entry,
                    Err(error) => {
                        skips.skip(error)?;
                        continue;
                    }
                };
                match tree.arrive(&entry) {
                    Ok(_) => {}
                    Err(TreeError::Record(error)) => {
                        rejected.insert(entry.id);
                        skips.skip(error)?;
                        continue;
                    }
                    Err(TreeError::Run(error)) => return Err(error.into()),
                }
                id2entry.put_with_flags(
                    &mut write_txn,
                    PutFlags::APPEND,
                    &entry.id.to_be_bytes(),
                    &batch.arena[entry.encoded.clone()],
                )?;
                max_id = max_id.max(entry.id);
                entries += 1;
                if !entry.group_members.is_empty() {
                    groups.push((entry.id, std::mem::take(&mut entry.group_members)));
                }
                bytes_since_commit += entry.encoded.len();
                if bytes_since_commit >= COMMIT_EVERY_BYTES {
                    write_txn.commit()?;
                    write_txn = env.write_txn()?;
                    bytes_since_commit = 0;
                }
            }
            // The batch is done with: let the reader read one more, and a worker reuse the arena.
            let _ = returns.arenas.try_send(batch.arena);
            let _ = returns.tokens.send(());
            progress.update(entries, input_bytes);
        }
    }
    if !reorder.is_empty() {
        // A worker stopped early (abort or error): its error is reported by the caller.
        return Err(LoadError::Invalid(
            "the load stopped before all batches were prepared".into(),
        ));
    }
    for (id, error) in tree.orphans() {
        rejected.insert(id);
        id2entry.delete(&mut write_txn, &id.to_be_bytes())?;
        entries -= 1;
        skips.skip(error)?;
    }
    write_txn.commit()?;
    Ok(Sequenced {
        entries,
        max_id,
        rejected,
        skipped: skips.skipped,
        skipped_count: skips.count,
        input_bytes,
        tree: Some(tree),
        groups,
    })
}

/// Writes the DN tree (`id2node` in ID order with subtree sizes, then `dn2id` sorted), both with
/// APPEND, into `write_txn`. Returns the number of spill files the tree used.
fn write_dn_tree(
    store: &Store,
    write_txn: &mut RwTxn<'_>,
    tree: TreeBuilder,
) -> Result<u64, LoadError> {
    let (dn2id_run, mut rows) = tree.finish()?;
    let tree_spills = dn2id_run.spilled.len() as u64;
    let id2node = store.id2node_database();
    let mut value = Vec::with_capacity(256);
    while let Some((record, subtree_size, child_count)) = rows.next_row()? {
        let node = layout::Node {
            parent: record.parent,
            subtree_size,
            child_count,
            rdn_original: &record.rdn_original,
            rdn_normalized: &record.rdn_normalized,
        };
        layout::encode_node(&node, &mut value);
        // A child listed before its parent has the lower ID: recorded for parents-first output.
        lmdir_store::record_parent_change(
            store.meta_database(),
            write_txn,
            record.id,
            None,
            Some(record.parent),
        )?;
        id2node.put_with_flags(
            write_txn,
            PutFlags::APPEND,
            &record.id.to_be_bytes(),
            &value,
        )?;
    }
    let dn2id = store.dn2id_database();
    let mut merged = MergedRuns::new(vec![dn2id_run])?;
    let (mut key, mut ids) = (Vec::new(), Vec::new());
    while merged.next_into(&mut key, &mut ids)? {
        assert_eq!(
            ids.len(),
            1,
            "a dn2id key names exactly one entry (duplicates are rejected on arrival)"
        );
        dn2id.put_with_flags(write_txn, PutFlags::APPEND, &key, &ids[0].to_be_bytes())?;
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
fn merge_and_encode(
    mut merged: MergedRuns,
    rejected: &RoaringBitmap,
    output: Sender<ChunkBatch>,
) -> Result<(), LoadError> {
    let (mut key, mut ids) = (Vec::new(), Vec::new());
    let mut low_halves: Vec<u16> = Vec::with_capacity(1024);
    let mut value = Vec::with_capacity(4096);
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
            encode_sorted_chunk(&low_halves, &mut value);
            let key_start = batch.bytes.len();
            batch.bytes.extend_from_slice(body);
            batch.bytes.extend_from_slice(&chunk.to_be_bytes());
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

/// `layout::encode_posting_chunk_sorted`, byte for byte, with the bitmap form built from the
/// sorted IDs in one pass (collecting into a bitmap inserts one by one: 3% of the load's CPU, on
/// the merge thread that the index writer waits for).
fn encode_sorted_chunk(low_halves: &[u16], out: &mut Vec<u8>) {
    if low_halves.len() <= layout::POSTING_LIST_FORM_MAX_IDS {
        layout::encode_posting_chunk_sorted(low_halves, out);
    } else {
        let bitmap = RoaringBitmap::from_sorted_iter(low_halves.iter().map(|low| u32::from(*low)))
            .expect("chunk IDs are ascending");
        layout::encode_posting_chunk(&bitmap, out);
    }
}

/// Work for the index writer to do first, in its txn.
pub(crate) type BeforeIndexes<'f, 'e> = &'f mut dyn FnMut(&mut RwTxn<'e>) -> Result<(), LoadError>;

/// Writes merged (DB number ‖ key) → IDs runs into the (empty) index DBs as posting chunks in
/// key order with APPEND. The merge and encoding run on a second thread, overlapping the
/// single LMDB writer.
/// With `commit_every_bytes`, the txn in `write_txn` is committed and replaced after that many
/// bytes, so LMDB's dirty pages stay bounded (used on the staging DB, which nobody reads yet).
/// `before_indexes` runs on the writer first, in the same txn, while the merge thread already
/// fills the queue (the loader writes the DN tree there).
pub(crate) fn write_index_runs<'e>(
    env: &'e heed::Env<heed::WithoutTls>,
    write_txn: &mut Option<RwTxn<'e>>,
    commit_every_bytes: Option<usize>,
    databases: &[RawDatabase],
    merged: MergedRuns,
    rejected: &RoaringBitmap,
    before_indexes: Option<BeforeIndexes<'_, 'e>>,
) -> Result<(), LoadError> {
    let (sender, receiver) = bounded::<ChunkBatch>(CHUNK_BATCHES_QUEUED_MAX);
    std::thread::scope(|scope| -> Result<(), LoadError> {
        let producer = scope.spawn(move || merge_and_encode(merged, rejected, sender));
        let written = (|| -> Result<(), LoadError> {
            if let Some(before_indexes) = before_indexes {
                before_indexes(write_txn.as_mut().expect("a txn is open"))?;
            }
            let mut last_key: Vec<u8> = Vec::new();
            let mut last_database = u16::MAX;
            let mut bytes_since_commit = 0usize;
            for batch in &receiver {
                if let Some(limit) = commit_every_bytes {
                    bytes_since_commit += batch.bytes.len();
                    if bytes_since_commit >= limit {
                        bytes_since_commit = 0;
                        write_txn.take().expect("a txn is open").commit()?;
                        *write_txn = Some(env.write_txn()?);
                    }
                }
                let txn = write_txn.as_mut().expect("a txn is open");
                for (database_number, key_range, value_range) in &batch.chunks {
                    let database = databases[*database_number as usize];
                    if *database_number != last_database {
                        last_database = *database_number;
                        last_key.clear();
                    }
                    let full_key = &batch.bytes[key_range.clone()];
                    let value = &batch.bytes[value_range.clone()];
                    // Keys arrive ascending per DB, so APPEND; a key that is not greater than
                    // the last (impossible with the layout's prefix-free keys) falls back to put.
                    if full_key > last_key.as_slice() {
                        database.put_with_flags(txn, PutFlags::APPEND, full_key, value)?;
                    } else {
                        database.put(txn, full_key, value)?;
                    }
                    last_key.clear();
                    last_key.extend_from_slice(full_key);
                }
            }
            Ok(())
        })();
        // Unblock the producer if the writer failed, then collect its result.
        drop(receiver);
        let produced = producer.join().expect("the merge thread does not panic");
        written?;
        produced
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (1000..9000)
                .chain(20_000..20_100)
                .chain(60_000..65_000)
                .collect(),
        ];
        for low_halves in shapes {
            let (mut ours, mut store) = (Vec::new(), Vec::new());
            encode_sorted_chunk(&low_halves, &mut ours);
            layout::encode_posting_chunk_sorted(&low_halves, &mut store);
            assert_eq!(ours, store, "{} IDs", low_halves.len());
        }
    }
}
