//! The committed changes a provider streams to its refreshAndPersist searches (RFC 4533 §3.4):
//! the writer publishes each committed transaction's changes here, on its own thread right after
//! the commit, so every subscriber sees them in commit order. The broadcast is bounded
//! (`PERSIST_QUEUE_CHANGES_MAX` changes, shared by all subscribers): a subscriber that falls
//! further behind is told it lagged and ends its search with e-syncRefreshRequired; nothing is
//! ever queued per subscriber without a bound.

use lmdir_store::{Change, CommittedChanges};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, watch};

/// Most published changes kept for the slowest persistent search (one ring shared by all):
/// a few hundred bytes each, so the ring holds a few MiB at most. A search further behind
/// than this refreshes instead (e-syncRefreshRequired).
pub(crate) const PERSIST_QUEUE_CHANGES_MAX: usize = 16_384;
/// Most persistent searches one connection runs at once (busy beyond): each holds one of its
/// connection's `running_operations_per_connection_max` turns for as long as it lasts, so a
/// connection always keeps turns for its other operations.
pub(crate) const PERSIST_SEARCHES_PER_CONNECTION_MAX: usize = 2;

/// One item of the broadcast.
#[derive(Clone, Debug)]
pub(crate) enum Published {
    /// One committed change; `txn_id` is its transaction's LMDB ID.
    Change { txn_id: u64, change: Arc<Change> },
    /// A transaction committed more changes than it recorded: every subscriber refreshes.
    Overflow { txn_id: u64 },
}

/// The change broadcast and the count of persistent searches.
pub(crate) struct PersistHub {
    sender: broadcast::Sender<Published>,
    /// Publishing costs a record per change: only a provider does it.
    enabled: AtomicBool,
    /// Set at shutdown: every persistent search ends.
    stop: watch::Sender<bool>,
    /// Running persistent searches, by connection.
    running: Mutex<HashMap<u64, usize>>,
}

/// A persistent search's place in the count; given back when dropped.
pub(crate) struct PersistTicket {
    hub: Arc<PersistHub>,
    connection_id: u64,
}

impl Drop for PersistTicket {
    fn drop(&mut self) {
        let mut running = self.hub.counts();
        if let Some(count) = running.get_mut(&self.connection_id) {
            *count -= 1;
            if *count == 0 {
                running.remove(&self.connection_id);
            }
        }
    }
}

/// Why a persistent search may not start.
pub(crate) enum Refused {
    ServerFull(usize),
    ConnectionFull,
}

impl Default for PersistHub {
    fn default() -> Self {
        PersistHub {
            sender: broadcast::channel(PERSIST_QUEUE_CHANGES_MAX).0,
            enabled: AtomicBool::new(false),
            stop: watch::channel(false).0,
            running: Mutex::new(HashMap::new()),
        }
    }
}

impl PersistHub {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<u64, usize>> {
        // A panic while holding it cannot leave the counts half-updated (one step each).
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Publish from now on (a provider); set before the first write.
    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Called by the writer after each commit, on its thread (so in commit order). A send
    /// with no subscriber is not an error.
    pub(crate) fn publish(&self, committed: CommittedChanges) {
        let txn_id = committed.txn_id;
        if committed.overflowed {
            let _ = self.sender.send(Published::Overflow { txn_id });
            return;
        }
        for change in committed.changes {
            let _ = self.sender.send(Published::Change {
                txn_id,
                change: Arc::new(change),
            });
        }
    }

    /// Every persistent search ends (shutdown).
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// A place for one more persistent search of `connection_id`, within
    /// `persist_searches_max` for the server and `PERSIST_SEARCHES_PER_CONNECTION_MAX` for the
    /// connection; with it the subscription to the changes committed from now on and the stop
    /// signal. Subscribe before the refresh opens its snapshot, so no change falls between.
    #[allow(clippy::type_complexity)]
    pub(crate) fn join(
        self: &Arc<Self>,
        connection_id: u64,
        searches_max: usize,
    ) -> Result<
        (
            PersistTicket,
            broadcast::Receiver<Published>,
            watch::Receiver<bool>,
        ),
        Refused,
    > {
        let mut running = self.counts();
        let total: usize = running.values().sum();
        if total >= searches_max {
            return Err(Refused::ServerFull(searches_max));
        }
        let count = running.entry(connection_id).or_insert(0);
        if *count >= PERSIST_SEARCHES_PER_CONNECTION_MAX {
            return Err(Refused::ConnectionFull);
        }
        *count += 1;
        drop(running);
        Ok((
            PersistTicket {
                hub: self.clone(),
                connection_id,
            },
            self.sender.subscribe(),
            self.stop.subscribe(),
        ))
    }
}
