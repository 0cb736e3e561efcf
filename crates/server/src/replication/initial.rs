//! A fresh replica's first refresh through the bulk loader (issue 23): a consumer whose store
//! holds no entry and that has no cookie streams the refresh's entries, as LDIF, into
//! `lmdir_load::load_into_empty` — the sort-then-append pipeline of `lmdir load`, on every
//! core — instead of the writer's batches of 256 (a read-modify-write per index key each).
//!
//! The load runs on a blocking thread, fed through a bounded queue of LDIF chunks, while the
//! consumer keeps reading from the provider. It ends at the first message that is not an
//! entry added to the refresh (the end of the refresh, a delete, a new cookie): the load
//! commits, and from there the session goes on through the writer as any other. The cookie is
//! written by the writer after the load, in its own transaction: a crash between the two
//! leaves entries without a cookie, which the next session refreshes in full through the
//! writer (its present phase removes what the provider no longer has). The contextCSN comes
//! with that cookie, never from the load.

use super::link::SessionError;
use crate::context::Database;
use lmdir_ldif::LdifWriter;
use lmdir_schema::Entry;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokio::sync::mpsc;

/// LDIF bytes gathered before a chunk goes to the loader.
const CHUNK_BYTES: usize = 1 << 20;
/// Chunks queued for the loader (so at most ~8 MiB of refresh waits in memory).
const CHUNKS_QUEUED_MAX: usize = 8;

enum Chunk {
    Ldif(Vec<u8>),
    /// The refresh's entries are all sent: end of input.
    End,
}

/// The loader's input: the queue's chunks, in order. A queue closed without `End` (the session
/// failed) is an error, so the load fails instead of committing part of a refresh as whole.
struct QueueInput {
    receiver: mpsc::Receiver<Chunk>,
    chunk: Vec<u8>,
    offset: usize,
    ended: bool,
}

impl Read for QueueInput {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        while self.offset == self.chunk.len() {
            if self.ended {
                return Ok(0);
            }
            match self.receiver.blocking_recv() {
                Some(Chunk::Ldif(bytes)) => {
                    self.chunk = bytes;
                    self.offset = 0;
                }
                Some(Chunk::End) => self.ended = true,
                None => {
                    return Err(std::io::Error::other(
                        "the refresh ended before all its entries arrived",
                    ))
                }
            }
        }
        let count = buffer.len().min(self.chunk.len() - self.offset);
        buffer[..count].copy_from_slice(&self.chunk[self.offset..self.offset + count]);
        self.offset += count;
        Ok(count)
    }
}

/// A bulk load in progress.
pub(super) struct BulkRefresh {
    sender: mpsc::Sender<Chunk>,
    loader: tokio::task::JoinHandle<Result<lmdir_load::LoadSummary, lmdir_load::LoadError>>,
    ldif: LdifWriter<Vec<u8>>,
    entries: u64,
    started: Instant,
    /// With memberOf upkeep: the schema, to leave out the provider's memberOf (the loader sets
    /// it from the groups the refresh brings, as the writer does for a replicated entry).
    memberof_kept: Option<(std::sync::Arc<lmdir_schema::Schema>, lmdir_schema::AttrId)>,
}

/// Whether a bulk refresh runs in this process: one at a time, so of several consumers of an
/// empty store (a multi-provider node) one loads and the others go through the writer, which
/// waits for the load's end.
static BULK_REFRESH_RUNNING: AtomicBool = AtomicBool::new(false);

/// The one bulk refresh of this process, released when dropped.
pub(super) struct BulkClaim(());

impl BulkClaim {
    fn take() -> Option<BulkClaim> {
        BULK_REFRESH_RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| BulkClaim(()))
    }
}

impl Drop for BulkClaim {
    fn drop(&mut self) {
        BULK_REFRESH_RUNNING.store(false, Ordering::Release);
    }
}

/// The claim on the bulk path when a consumer takes it: it may (`bulk_initial_refresh`), has no
/// cookie, the store holds no entry, and no other consumer is loading. A bulk load a killed
/// process left half done is undone first.
pub(super) fn applies(
    database: &Database,
    enabled: bool,
    cookie: Option<&[u8]>,
) -> Result<Option<BulkClaim>, String> {
    let store = database.store();
    if store
        .live_load_interrupted()
        .map_err(|error| error.to_string())?
    {
        tracing::warn!("an interrupted bulk refresh is undone: the replica starts over");
        store
            .discard_failed_load()
            .map_err(|error| error.to_string())?;
    }
    if !enabled || cookie.is_some() {
        return Ok(None);
    }
    let Some(claim) = BulkClaim::take() else {
        return Ok(None);
    };
    let read = store.read().map_err(|error| error.to_string())?;
    let empty = read.entry_count().map_err(|error| error.message)? == 0;
    Ok(empty.then_some(claim))
}

impl BulkRefresh {
    /// Starts the loader on a blocking thread, reading what `push` sends; `claim` is this
    /// process's one bulk refresh (`applies` took it).
    pub(super) fn start(database: &Database, claim: BulkClaim) -> BulkRefresh {
        let (sender, receiver) = mpsc::channel(CHUNKS_QUEUED_MAX);
        let store = database.store().clone();
        let schema = store.schema().clone();
        let memberof_kept = (store.options().memberof)
            .then(|| schema.attribute("memberOf"))
            .flatten()
            .map(|memberof| (schema.clone(), memberof));
        let input = QueueInput {
            receiver,
            chunk: Vec::new(),
            offset: 0,
            ended: false,
        };
        let loader = tokio::task::spawn_blocking(move || {
            // Held until the load (and any discard) is over: one bulk refresh at a time.
            let _claim = claim;
            let mut options = lmdir_load::LoadOptions::new(
                store.directory().to_path_buf(),
                store.options().clone(),
                store.schema().clone(),
            );
            // The provider checked every entry when it was written.
            options.quick = true;
            let spill = tempfile::Builder::new()
                .prefix(".replica-load-")
                .tempdir_in(store.directory())
                .map_err(|error| lmdir_load::LoadError::Io {
                    path: store.directory().to_path_buf(),
                    error,
                })?;
            let loaded = lmdir_load::load_into_empty(
                &store,
                &options,
                Box::new(input),
                spill.path(),
                lmdir_load::ContextCsn::FromProvider,
            );
            // A load that failed after a periodic commit left its mark and part of the
            // refresh: undone, so the store is empty again and the next session starts over.
            // One that failed before (or was refused: the store had entries) left nothing.
            if loaded.is_err() && store.live_load_interrupted().unwrap_or(false) {
                if let Err(error) = store.discard_failed_load() {
                    tracing::error!("the failed bulk refresh could not be undone: {error}");
                }
            }
            loaded
        });
        BulkRefresh {
            sender,
            loader,
            ldif: LdifWriter::new(Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 4)),
            entries: 0,
            started: Instant::now(),
            memberof_kept,
        }
    }

    /// Queues one entry of the refresh.
    pub(super) async fn push(&mut self, entry: &Entry) -> Result<(), SessionError> {
        let dn = entry.dn.to_string();
        let kept = |attribute: &&lmdir_schema::Attribute| match &self.memberof_kept {
            Some((schema, memberof)) => schema
                .parse_description(&attribute.description)
                .map_or(true, |description| description.attr != *memberof),
            None => true,
        };
        let pairs = entry.attributes.iter().filter(kept).flat_map(|attribute| {
            attribute
                .values
                .iter()
                .map(move |value| (attribute.description.as_str(), value.as_slice()))
        });
        self.ldif
            .write_entry(&dn, pairs)
            .map_err(|error| SessionError::Apply(format!("bulk refresh: {error}")))?;
        self.entries += 1;
        if self.ldif.get_mut().len() >= CHUNK_BYTES {
            let chunk = std::mem::take(self.ldif.get_mut());
            self.send(Chunk::Ldif(chunk)).await?;
        }
        Ok(())
    }

    async fn send(&self, chunk: Chunk) -> Result<(), SessionError> {
        if self.sender.send(chunk).await.is_err() {
            // The loader stopped early: its error is what `finish` reports.
            return Err(SessionError::Apply(
                "the bulk refresh's loader stopped".to_string(),
            ));
        }
        Ok(())
    }

    /// Ends the input and waits for the load to commit; returns the entries loaded.
    pub(super) async fn finish(mut self) -> Result<(u64, f64), SessionError> {
        let rest = std::mem::take(self.ldif.get_mut());
        let sent = async {
            if !rest.is_empty() {
                self.send(Chunk::Ldif(rest)).await?;
            }
            self.send(Chunk::End).await
        }
        .await;
        let loaded = self
            .loader
            .await
            .map_err(|error| SessionError::Apply(format!("bulk refresh: {error}")))?
            .map_err(|error| SessionError::Apply(format!("bulk refresh: {error}")))?;
        sent?;
        assert_eq!(
            loaded.entries + loaded.skipped_count,
            self.entries,
            "the loader saw every entry sent"
        );
        if loaded.skipped_count > 0 {
            return Err(SessionError::Apply(format!(
                "bulk refresh: {} entries refused",
                loaded.skipped_count
            )));
        }
        Ok((loaded.entries, self.started.elapsed().as_secs_f64()))
    }
}
