//! Loading into a store that already holds entries: through the store's own writes.

use std::io::{BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use lmdir_schema::{Dn, Entry, ResultCode};
use lmdir_store::{Store, WriteContext};

use crate::prepare::RecordError;
use crate::{LoadError, LoadOptions, LoadSummary, SKIPPED_REPORTED_MAX};

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
        // As slapadd: an entry may be loaded below an alias or a subentry, and its memberOf is
        // the groups' (not refused where a group later in the file lists it).
        import: true,
        ..WriteContext::new(options.creators_name.clone())
    };
    let unique_rules = crate::unique::compile(options)?;
    let mut write = store.write()?;
    let mut tally = Tally::default();
    let bytes_read = Arc::new(AtomicU64::new(0));
    let counted = CountingReader {
        inner: input,
        bytes_read: bytes_read.clone(),
    };
    // The same LDIF limits and file URL switch as a load into an empty store.
    let mut reader = lmdir_ldif::LdifReader::with_options(
        BufReader::with_capacity(1 << 20, counted),
        crate::prepare::load_parse_options(options),
    );
    while let Some(record) = reader.next() {
        let record = match record {
            Ok(record) => record,
            Err(error) => {
                let error = read_error(error);
                // A read error or an oversize record cannot be resumed after (the record
                // boundaries are lost); one bad record can, as in the empty-store path.
                if reader.is_finished() {
                    return Err(LoadError::Record(error));
                }
                tally.skipped.skip(options, error)?;
                continue;
            }
        };
        match loadable_entry(&options.schema, record) {
            Ok(loadable) => tally.add(&mut write, loadable, &context, &unique_rules, options)?,
            Err(error) => {
                tally.skipped.skip(options, error)?;
                continue;
            }
        }
        progress.update(tally.entries, bytes_read.load(Ordering::Relaxed));
    }
    // Every duplicate listed; the txn is dropped (nothing written) when there is one.
    crate::unique::failure(std::mem::take(&mut tally.not_unique))?;
    write
        .commit()
        .map_err(|error| LoadError::Invalid(format!("commit: {error}")))?;
    store.sync()?;
    progress.finish();
    let database_bytes = lmdir_store::data_file_bytes(&options.directory);
    Ok(LoadSummary {
        entries: tally.entries,
        skipped: tally.skipped.listed,
        skipped_count: tally.skipped.count,
        elapsed: started.elapsed(),
        input_bytes: input_bytes_total,
        database_bytes,
        peak_rss_bytes: crate::peak_rss_bytes(),
        spill_files: 0,
        repeated_values: tally.repeated_values,
        held_bytes_peak: 0,
        held_bytes_over_budget: 0,
    })
}

/// A record the LDIF reader could not read, as the load reports it.
fn read_error(error: lmdir_ldif::LdifError) -> RecordError {
    RecordError {
        line: error.line,
        dn: error.dn,
        message: error.message,
    }
}

/// What a load into an existing store added and skipped so far, and the uniqueness conflicts
/// its added entries raised (`crate::unique`).
#[derive(Default)]
struct Tally {
    entries: u64,
    repeated_values: u64,
    skipped: Skipped,
    not_unique: Vec<String>,
}

impl Tally {
    /// Adds one loadable record's entry (`loadable_entry`): counted with the uniqueness
    /// conflicts it raises when added, skipped (or the load's error) when refused.
    fn add(
        &mut self,
        write: &mut lmdir_store::WriteTxn<'_>,
        (line, dn, mut entry): (u64, String, Entry),
        context: &WriteContext,
        unique_rules: &[crate::unique::CompiledRule],
        options: &LoadOptions,
    ) -> Result<(), LoadError> {
        let (added, repeated) = add_entry(write, &mut entry, context);
        self.repeated_values += repeated;
        match added {
            Ok(id) => {
                self.entries += 1;
                let conflicts = crate::unique::conflicts_of_added(write, unique_rules, id, line)?;
                self.not_unique.extend(conflicts);
                Ok(())
            }
            Err(error) => self.skipped.skip(
                options,
                RecordError {
                    line,
                    dn: Some(dn),
                    message: error.to_string(),
                },
            ),
        }
    }
}

/// The records a load skipped (`continue_on_error`): the first `SKIPPED_REPORTED_MAX` listed,
/// all counted.
#[derive(Default)]
struct Skipped {
    listed: Vec<RecordError>,
    count: u64,
}

impl Skipped {
    /// Skips a bad record when the load continues on errors; else the load fails with it.
    fn skip(&mut self, options: &LoadOptions, error: RecordError) -> Result<(), LoadError> {
        if !options.continue_on_error {
            return Err(LoadError::Record(error));
        }
        self.count += 1;
        if self.listed.len() < SKIPPED_REPORTED_MAX {
            self.listed.push(error);
        }
        Ok(())
    }
}

/// A record's line, DN (as written) and entry; only entries and `changetype: add` records
/// load, and their DN must parse.
fn loadable_entry(
    schema: &lmdir_schema::Schema,
    record: lmdir_ldif::LdifRecord,
) -> Result<(u64, String, Entry), RecordError> {
    let line = record.line;
    let values = match record.body {
        lmdir_ldif::RecordBody::Content(values) => values,
        lmdir_ldif::RecordBody::Change(change) => match change.operation {
            lmdir_ldif::ChangeOperation::Add(values) => values,
            _ => {
                return Err(RecordError {
                    line,
                    dn: Some(record.dn),
                    message: "only entries and 'changetype: add' records can be loaded".into(),
                })
            }
        },
    };
    match Dn::parse(&record.dn) {
        Ok(dn) => Ok((line, record.dn, entry_of(schema, dn, values))),
        Err(error) => Err(RecordError {
            line,
            dn: Some(record.dn),
            message: error.message,
        }),
    }
}

/// Adds one entry in the load's txn. As the bulk path: a value repeated byte for byte is
/// loaded once and counted (the second of the pair: values dropped, when the add succeeded).
fn add_entry(
    write: &mut lmdir_store::WriteTxn<'_>,
    entry: &mut Entry,
    context: &WriteContext,
) -> (Result<lmdir_store::EntryId, lmdir_schema::LdapError>, u64) {
    let mut added = write.add(entry, context);
    let mut repeated_values = 0;
    if matches!(&added, Err(error) if error.code == ResultCode::AttributeOrValueExists) {
        let dropped = crate::drop_repeated_values(entry);
        if dropped > 0 {
            added = write.add(entry, context);
            repeated_values += dropped * u64::from(added.is_ok());
        }
    }
    (added, repeated_values)
}

/// The record as an entry; a value of its RDN that the record lacks is added, as slapadd adds
/// it (`crate::naming`).
fn entry_of(schema: &lmdir_schema::Schema, dn: Dn, values: Vec<(String, Vec<u8>)>) -> Entry {
    let missing: Vec<(String, Vec<u8>)> = {
        let pairs: Vec<(&str, &[u8])> = values
            .iter()
            .map(|(description, value)| (description.as_str(), value.as_slice()))
            .collect();
        crate::naming::missing_naming_values(schema, &dn, &pairs)
            .into_iter()
            .map(|(description, value)| (description.to_string(), value.to_vec()))
            .collect()
    };
    let mut entry = Entry::new(dn);
    for (description, value) in values.into_iter().chain(missing) {
        entry.add_values(&description, std::iter::once(value));
    }
    entry
}

/// Counts the bytes read through it, for the progress display (the LDIF reader owns the input).
struct CountingReader {
    inner: crate::LoadInput,
    bytes_read: Arc<AtomicU64>,
}

impl Read for CountingReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let count = self.inner.read(buffer)?;
        self.bytes_read.fetch_add(count as u64, Ordering::Relaxed);
        Ok(count)
    }
}
