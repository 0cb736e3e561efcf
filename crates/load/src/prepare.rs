//! Stage 2 of the loader, run on every worker thread: one LDIF record → a prepared entry
//! (normalized DN and RDN, encoded `id2entry` value) plus its index keys pushed into the
//! worker's posting run under the entry's ID. The entry's rows come from the store's own
//! "entry → rows" step (`Store::entry_rows`, the one `WriteTxn::add` runs): this module only
//! parses the record, picks the per-entry values (UUID, CSN sequence = ID) and names the
//! record in errors.

use lmdir_ldif::{BodyView, ChangeOperation, ParseOptions};
use lmdir_schema::{Dn, LdapError, NormalizedDn, ResultCode};
use lmdir_store::{
    EntryRows, EntrySource, FreshValues, OperationalStamp, RowScratch, Store, WriteContext,
};
use lmdir_sync::Csn;
use rand::{Rng, SeedableRng};

use crate::runs::PostingRun;

/// Index slots (`IndexPlan` numbering) are two bytes at the front of every run key, so one
/// merged stream holds every index DB's keys grouped by DB.
pub const INDEX_DB_PREFIX_BYTES: usize = 2;

/// What a record failed on, with where.
#[derive(Debug, Clone)]
pub struct RecordError {
    pub line: u64,
    pub dn: Option<String>,
    pub message: String,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Both quote the input: a control byte in it is shown, never sent to the terminal.
        let message = lmdir_ldif::escape_control(&self.message);
        match &self.dn {
            Some(dn) => write!(
                formatter,
                "line {} (dn: {}): {message}",
                self.line,
                lmdir_ldif::escape_control(dn)
            ),
            None => write!(formatter, "line {}: {message}", self.line),
        }
    }
}

/// One entry ready for the sequencer (the only thread that writes LMDB).
pub struct PreparedEntry {
    pub id: u32,
    pub line: u64,
    pub dn: String,
    pub normalized_dn: String,
    /// Normalized parent DN; empty for a top-level entry.
    pub normalized_parent: String,
    pub rdn_original: String,
    pub rdn_normalized: String,
    /// Where the encoded `id2entry` value lies in its batch's arena (one allocation per batch,
    /// recycled: a fresh buffer per entry, freed on the writer thread, made the allocator
    /// return and re-fault memory all load long).
    pub encoded: std::ops::Range<usize>,
    /// Where its framed `id2value` rows (out-of-line values, key order) lie in the same arena.
    pub value_rows: std::ops::Range<usize>,
    /// With memberOf upkeep: the normalized DNs this entry's `member` / `uniqueMember` values
    /// name, sorted and distinct; empty otherwise.
    pub group_members: Vec<String>,
    /// Those of `group_members` a later single add of that DN would not find this group by
    /// (`Store::group_members_unfound_later`), sorted.
    pub group_members_unfound_later: Vec<String>,
    /// Byte-identical repeated values dropped from the record (see [`crate::without_repeated_values`]).
    pub repeated_values: u64,
    /// The CSNs the entry brings to the contextCSN (`EntryRows::context_csn_candidates`): its
    /// entryCSN, then the suffix's contextCSN values (kept apart so most entries allocate
    /// nothing).
    pub csn: Option<Csn>,
    pub more_csns: Vec<Csn>,
}

/// Everything a worker needs that does not change during a load.
pub struct PrepareContext {
    pub store: Store,
    pub parse_options: ParseOptions,
    /// Larger records are refused before they are parsed (`load_record_bytes_max`).
    pub record_bytes_max: usize,
    /// The load as a writer: schema checks unless `--quick`, relaxed (an import keeps the
    /// operational attributes it carries), the creator's name and the load's time.
    pub write: WriteContext,
    pub stamp: OperationalStamp,
    /// The store's index plan, taken once (the store's is behind a lock every core would share).
    pub index_plan: std::sync::Arc<lmdir_store::IndexPlan>,
}

impl PrepareContext {
    pub fn new(store: Store, write: WriteContext, options: &crate::LoadOptions) -> PrepareContext {
        let stamp = store.operational_stamp(&write);
        PrepareContext {
            index_plan: store.index_plan(),
            store,
            parse_options: load_parse_options(options),
            record_bytes_max: load_record_bytes_max(options),
            write,
            stamp,
        }
    }
}

/// The LDIF limits of a load: a trusted file whose groups may name millions of members, so a
/// record may hold as many values as the store's codec takes in one attribute and 256 MiB (a
/// group of 4 million 60-byte member DNs); other limits as the LDIF reader's defaults. File
/// URLs only when `file_urls` (`LoadOptions::file_urls`), reading together no more than a
/// record may hold inline.
pub fn load_parse_options(options: &crate::LoadOptions) -> ParseOptions {
    ParseOptions {
        record_bytes_max: RECORD_BYTES_MAX,
        values_max: lmdir_store::codec::VALUES_PER_ATTRIBUTE_MAX,
        allow_file_urls: options.file_urls,
        file_urls_refused_because: options.file_urls_refused_because,
        url_record_bytes_max: load_record_bytes_max(options),
        ..ParseOptions::default()
    }
}

/// The largest record the LDIF reader of a load reads.
const RECORD_BYTES_MAX: usize = 256 << 20;

/// The largest record a load prepares: its memory budget (`--memory`), at most 256 MiB. A
/// record costs several times its size once parsed, normalized and encoded (one of 236 MB
/// reached 1.8 GB), so a larger one is refused, naming its line, before any of that; its
/// file URLs together read no more either.
pub fn load_record_bytes_max(options: &crate::LoadOptions) -> usize {
    let budget_bytes = if options.memory_bytes_max == 0 {
        crate::default_memory_bytes()
    } else {
        options.memory_bytes_max
    };
    budget_bytes.min(RECORD_BYTES_MAX)
}

/// Most bytes a worker's scratch buffer keeps between entries.
const SCRATCH_KEPT_BYTES_MAX: usize = 16 << 20;

/// Reusable per-worker buffers, so the hot loop allocates little.
#[derive(Default)]
pub struct WorkerScratch {
    /// The store's step caches, with the loader's word hasher (the LDIF is trusted input).
    pub(crate) rows: RowScratch<std::hash::BuildHasherDefault<crate::runs::WordHasher>>,
    encoded: Vec<u8>,
    value_rows: Vec<u8>,
    /// entryUUIDs are version-4 UUIDs from this generator (seeded from the OS once per
    /// worker: one getrandom system call per entry cost more than the rest of the UUID).
    uuid_random: Option<rand::rngs::StdRng>,
    /// A failure to keep index keys (a spill file that could not be written): no record's
    /// fault, and the keys taken out of memory for the spill are gone, so the whole load stops
    /// (`take_run_failure`), `--continue-on-error` or not.
    run_failure: Option<crate::runs::RunError>,
}

impl WorkerScratch {
    /// The run's failure while the last record was prepared, if any.
    pub(crate) fn take_run_failure(&mut self) -> Option<crate::runs::RunError> {
        self.run_failure.take()
    }

    /// Pushes `key` of index `slot` under `id` into `run`, behind the slot prefix.
    pub(crate) fn push_key(
        &mut self,
        run: &mut PostingRun,
        slot: u16,
        key: &[u8],
        id: u32,
    ) -> Result<(), crate::runs::RunError> {
        run.push_prefixed(slot.to_be_bytes(), key, id)
    }
}

fn record_error(line: u64, dn: Option<&str>, message: impl Into<String>) -> RecordError {
    RecordError {
        line,
        dn: dn.map(str::to_string),
        message: message.into(),
    }
}

fn ldap_message(error: &LdapError) -> String {
    format!("{} ({})", error.message, error.code.name())
}

/// Prepares one record. On success the entry's index keys are already in `run`.
pub fn prepare_record(
    context: &PrepareContext,
    record_bytes: &[u8],
    first_line: u64,
    id: u32,
    run: &mut PostingRun,
    scratch: &mut WorkerScratch,
    arena: &mut Vec<u8>,
) -> Result<PreparedEntry, RecordError> {
    check_record_size(context, record_bytes, first_line)?;
    let view = lmdir_ldif::parse_record_view(record_bytes, first_line, &context.parse_options)
        .map_err(|error| RecordError {
            line: error.line,
            dn: error.dn,
            message: error.message,
        })?;
    let line = view.line;
    let dn_text = view.dn.as_ref();
    let dn = Dn::parse(dn_text)
        .map_err(|error| record_error(line, Some(dn_text), ldap_message(&error)))?;
    let pairs = record_pairs(&view.body, line, dn_text)?;
    let fail = |error: LdapError| record_error(line, Some(dn_text), ldap_message(&error));
    let fresh = fresh_values(scratch, id);
    let store = &context.store;
    // The record's one DN normalization: the store's step takes it as it is.
    let schema = store.schema();
    let dn = schema.normalized_dn(dn).map_err(fail)?;
    // As slapadd: a value of the entry's RDN that the record lacks is added (both modes).
    let missing = crate::naming::missing_naming_values(&schema, dn.dn(), &pairs);
    let completed: Vec<(&str, &[u8])>;
    let pairs: &[(&str, &[u8])] = if missing.is_empty() {
        &pairs
    } else {
        completed = pairs.iter().copied().chain(missing).collect();
        &completed
    };
    let (rows, repeated_values) =
        rows_keeping_repeats_once(context, &dn, pairs, &fresh, scratch).map_err(fail)?;
    encode_rows(store, &rows, id, scratch).map_err(fail)?;
    push_index_keys(context, &rows, (id, line, dn_text), run, scratch)?;
    let encoded_start = arena.len();
    arena.extend_from_slice(&scratch.encoded);
    let encoded_end = arena.len();
    arena.extend_from_slice(&scratch.value_rows);
    // A large group's rows (100 MB for a million members) are not kept for the next entry.
    if scratch.value_rows.capacity() > SCRATCH_KEPT_BYTES_MAX {
        scratch.value_rows = Vec::new();
    }
    let (csn, more_csns) = context_csns(store, &rows);
    let normalized_dn = rows.normalized_dn();
    let normalized_parent = rows.place.normalized_parent();
    let group_members_unfound_later = store.group_members_unfound_later(&rows);
    // The rows are done with: their RDN strings move into the entry rather than being copied.
    let place = rows.place;
    Ok(PreparedEntry {
        id,
        line,
        dn: dn_text.to_string(),
        normalized_dn,
        normalized_parent,
        rdn_original: place.rdn_original,
        rdn_normalized: place.rdn_normalized,
        encoded: encoded_start..encoded_end,
        value_rows: encoded_end..arena.len(),
        group_members: rows.group_members.into_iter().collect(),
        group_members_unfound_later,
        repeated_values,
        csn,
        more_csns,
    })
}

/// A record larger than the load's memory budget allows for one (`--memory`) is refused
/// before it is parsed.
fn check_record_size(
    context: &PrepareContext,
    record_bytes: &[u8],
    first_line: u64,
) -> Result<(), RecordError> {
    if record_bytes.len() > context.record_bytes_max {
        return Err(record_error(
            first_line,
            None,
            format!(
                "the record starting here is {} bytes, more than the load's memory budget \
                 allows for one record ({} bytes; --memory)",
                record_bytes.len(),
                context.record_bytes_max
            ),
        ));
    }
    Ok(())
}

/// The (description, value) pairs of a content or `changetype: add` record, borrowed from
/// it; any other change record cannot be loaded.
fn record_pairs<'v>(
    body: &'v BodyView<'_>,
    line: u64,
    dn_text: &str,
) -> Result<Vec<(&'v str, &'v [u8])>, RecordError> {
    Ok(match body {
        BodyView::Content(values) => values
            .iter()
            .map(|(description, value)| (description.as_ref(), value.as_ref()))
            .collect(),
        BodyView::Change(change) => match &change.operation {
            ChangeOperation::Add(values) => values
                .iter()
                .map(|(description, value)| (description.as_str(), value.as_slice()))
                .collect(),
            _ => {
                return Err(record_error(
                    line,
                    Some(dn_text),
                    "only entries and 'changetype: add' records can be loaded",
                ))
            }
        },
    })
}

/// The values a load gives entry `id` when its record lacks them: a random entryUUID (from
/// the worker's generator, seeded once) and the ID as its CSN sequence.
fn fresh_values(scratch: &mut WorkerScratch, id: u32) -> FreshValues {
    let random = scratch
        .uuid_random
        .get_or_insert_with(rand::rngs::StdRng::from_os_rng);
    FreshValues {
        entry_uuid: uuid::Builder::from_random_bytes(random.random()).into_uuid(),
        csn_sequence: u64::from(id),
        csn: None,
    }
}

/// Encodes the entry's rows into the worker's `encoded` and `value_rows` buffers (reused
/// from entry to entry).
fn encode_rows(
    store: &Store,
    rows: &EntryRows,
    id: u32,
    scratch: &mut WorkerScratch,
) -> Result<(), LdapError> {
    let mut encoded = std::mem::take(&mut scratch.encoded);
    let mut value_rows = std::mem::take(&mut scratch.value_rows);
    let encoding = rows.encode(store, id, &mut scratch.rows, &mut encoded, &mut value_rows);
    scratch.encoded = encoded;
    scratch.value_rows = value_rows;
    encoding
}

/// Pushes the entry's index keys into `run`. A key too long is the record's own fault
/// (skipped under --continue-on-error); any other failure stops the load
/// (`scratch.run_failure`). `record`: the entry's ID, line and DN as written.
fn push_index_keys(
    context: &PrepareContext,
    rows: &EntryRows,
    (id, line, dn_text): (u32, u64, &str),
    run: &mut PostingRun,
    scratch: &mut WorkerScratch,
) -> Result<(), RecordError> {
    let keyed = context
        .index_plan
        .entry_keys(rows, &mut |slot, key| scratch.push_key(run, slot, key, id));
    match keyed {
        Ok(()) => Ok(()),
        Err(error @ crate::runs::RunError::KeyTooLong { .. }) => {
            Err(record_error(line, Some(dn_text), error.to_string()))
        }
        Err(error) => {
            let message = format!("the load stops: {error}");
            scratch.run_failure = Some(error);
            Err(record_error(line, Some(dn_text), message))
        }
    }
}

/// The entry's contextCSN candidates: the first, and any others.
fn context_csns(store: &Store, rows: &EntryRows) -> (Option<Csn>, Vec<Csn>) {
    let mut csn = None;
    let mut more_csns = Vec::new();
    rows.context_csn_candidates(&store.schema(), &mut |candidate| match csn {
        None => csn = Some(candidate),
        Some(_) => more_csns.push(candidate),
    });
    (csn, more_csns)
}

/// The record's rows. A record that repeats a value byte for byte (OpenLDAP's own
/// test-whoami.ldif repeats `userpassword:: amFq`) is loaded with the value once, as slapadd
/// does, and the count of dropped repeats returned: only after the store refused it with
/// attributeOrValueExists, so a load without repeats does no extra work. Values equal only
/// under the matching rule stay an error, as does any repeat sent by a client.
fn rows_keeping_repeats_once(
    context: &PrepareContext,
    dn: &NormalizedDn,
    pairs: &[(&str, &[u8])],
    fresh: &FreshValues,
    scratch: &mut WorkerScratch,
) -> Result<(EntryRows, u64), LdapError> {
    let rows_of = |pairs: &[(&str, &[u8])], scratch: &mut WorkerScratch| {
        context.store.entry_rows(
            EntrySource::Pairs { dn, pairs },
            &context.write,
            &context.stamp,
            fresh,
            &mut scratch.rows,
        )
    };
    match rows_of(pairs, scratch) {
        Err(error) if error.code == ResultCode::AttributeOrValueExists => {
            let (kept, dropped) = crate::without_repeated_values(pairs);
            if dropped == 0 {
                return Err(error);
            }
            Ok((rows_of(&kept, scratch)?, dropped))
        }
        other => Ok((other?, 0)),
    }
}
