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
        // As slapadd: an entry may be loaded below an alias or a subentry.
        any_parent_class: true,
        ..WriteContext::new(options.creators_name.clone())
    };
    let unique_rules = crate::unique::compile(options)?;
    let mut not_unique = Vec::new();
    let mut write = store.write()?;
    let mut entries = 0u64;
    let mut repeated_values = 0u64;
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
                let error = RecordError {
                    line: error.line,
                    dn: error.dn,
                    message: error.message,
                };
                // A read error or an oversize record cannot be resumed after (the record
                // boundaries are lost); one bad record can, as in the empty-store path.
                if reader.is_finished() {
                    return Err(LoadError::Record(error));
                }
                skip(error)?;
                continue;
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
        let mut entry = entry_of(&options.schema, dn, values);
        let mut added = write.add(&entry, &context);
        // As the bulk path: a value repeated byte for byte is loaded once and counted.
        if matches!(&added, Err(error) if error.code == ResultCode::AttributeOrValueExists) {
            let dropped = crate::drop_repeated_values(&mut entry);
            if dropped > 0 {
                added = write.add(&entry, &context);
                repeated_values += dropped * u64::from(added.is_ok());
            }
        }
        match added {
            Ok(id) => {
                entries += 1;
                not_unique.extend(crate::unique::conflicts_of_added(
                    &write,
                    &unique_rules,
                    id,
                    line,
                )?);
            }
            Err(error) => skip(RecordError {
                line,
                dn: Some(record.dn),
                message: error.to_string(),
            })?,
        }
        progress.update(entries, bytes_read.load(Ordering::Relaxed));
    }
    // Every duplicate listed; the txn is dropped (nothing written) when there is one.
    crate::unique::failure(not_unique)?;
    write
        .commit()
        .map_err(|error| LoadError::Invalid(format!("commit: {error}")))?;
    store.sync()?;
    progress.finish();
    let database_bytes = lmdir_store::data_file_bytes(&options.directory);
    Ok(LoadSummary {
        entries,
        skipped,
        skipped_count,
        elapsed: started.elapsed(),
        input_bytes: input_bytes_total,
        database_bytes,
        peak_rss_bytes: crate::peak_rss_bytes(),
        spill_files: 0,
        repeated_values,
    })
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
