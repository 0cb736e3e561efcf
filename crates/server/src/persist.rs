//! The committed changes a provider streams to its refreshAndPersist searches (RFC 4533 §3.4):
//! the writer publishes each committed transaction's changes here, on its own thread right after
//! the commit, so every subscriber sees them in commit order. The broadcast is bounded
//! (`PERSIST_QUEUE_CHANGES_MAX` changes, shared by all subscribers): a subscriber that falls
//! further behind is told it lagged and ends its search with e-syncRefreshRequired; so is one
//! that has more than `PERSIST_QUEUE_BYTES_MAX` of published changes yet to take (a client that
//! reads slowly or not at all: the broadcast keeps every change until its slowest subscriber
//! took it), even while it waits for its client; nothing is ever queued per subscriber without
//! a bound.

use lmdir_store::{Change, CommittedChanges, PriorNeeds};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, watch};

/// Most published changes kept for the slowest persistent search (one ring shared by all):
/// a few hundred bytes each, so the ring holds a few MiB at most. A search further behind
/// than this refreshes instead (e-syncRefreshRequired).
pub(crate) const PERSIST_QUEUE_CHANGES_MAX: usize = 16_384;
/// Most bytes of published changes (`Change::held_bytes`) one persistent search may have yet to
/// take from the broadcast: past it the search ends with e-syncRefreshRequired, and the changes
/// kept for it alone are freed.
pub(crate) const PERSIST_QUEUE_BYTES_MAX: u64 = 32 * 1024 * 1024;
/// Most persistent searches one connection runs at once (busy beyond): each holds one of its
/// connection's `running_operations_per_connection_max` turns for as long as it lasts, so a
/// connection always keeps turns for its other operations.
pub(crate) const PERSIST_SEARCHES_PER_CONNECTION_MAX: usize = 2;

/// One item of the broadcast.
#[derive(Clone, Debug)]
pub(crate) enum Published {
    /// One committed change; `txn_id` is its transaction's LMDB ID, `end_bytes` the bytes
    /// published so far, this change's included (`PersistHub::published_bytes`).
    Change {
        txn_id: u64,
        change: Arc<Change>,
        end_bytes: u64,
    },
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
    /// Running persistent searches, by connection, by identity and in all.
    running: Mutex<Running>,
    /// `Change::held_bytes` of every change published so far.
    published_bytes: AtomicU64,
}

/// How far one persistent search is behind the broadcast, in bytes.
pub(crate) struct Backlog {
    /// `published_bytes` as of the last change the search took.
    taken_bytes: AtomicU64,
    /// Set once it has more than `PERSIST_QUEUE_BYTES_MAX` yet to take: the search ends.
    overrun: watch::Sender<bool>,
}

impl Backlog {
    /// The search took the change published up to `end_bytes`.
    pub(crate) fn took(&self, end_bytes: u64) {
        self.taken_bytes.fetch_max(end_bytes, Ordering::AcqRel);
    }

    /// Resolves once the search is past its bound (at once if it is already).
    pub(crate) fn overrun(&self) -> watch::Receiver<bool> {
        self.overrun.subscribe()
    }
}

/// Who holds the persist slots. Entries exist only while searches run, so every map is bounded
/// by `persist_searches_max`.
#[derive(Default)]
struct Running {
    by_connection: HashMap<u64, usize>,
    /// By normalized bind DN ("" = anonymous, one identity however many clients).
    by_identity: HashMap<String, usize>,
    total: usize,
    /// Searches of identities that are neither the rootdn nor a replica.
    unprivileged: usize,
    /// What each running search's filter (and the access rules it runs under) tests, by
    /// ticket number; `needs` is their union, rebuilt when a search starts or ends.
    tested: HashMap<u64, PriorNeeds>,
    needs: Arc<PriorNeeds>,
    /// Each running search's backlog, by ticket number.
    backlogs: HashMap<u64, Arc<Backlog>>,
    next_ticket: u64,
}

/// Who asks for a persist slot.
pub(crate) struct PersistSubject {
    pub connection_id: u64,
    /// What the search's filter and the access rules test (`PriorNeeds`).
    pub tested: PriorNeeds,
    /// The normalized DN the search runs as; empty = anonymous.
    pub identity: String,
    /// The rootdn or a configured replica: may take the reserved slots, no per-identity cap.
    pub privileged: bool,
}

/// The bounds a new persistent search must fit in (`[replication]`).
#[derive(Clone, Copy)]
pub(crate) struct PersistLimits {
    /// `persist_searches_max`: server-wide.
    pub searches_max: usize,
    /// `persist_searches_per_identity_max`.
    pub per_identity_max: usize,
    /// `persist_searches_reserved`: slots only privileged subjects take.
    pub reserved: usize,
}

/// A persistent search's place in the count; given back when dropped.
pub(crate) struct PersistTicket {
    hub: Arc<PersistHub>,
    number: u64,
    pub(crate) backlog: Arc<Backlog>,
    connection_id: u64,
    identity: String,
    privileged: bool,
}

/// Decrements a count in `map`, removing the entry at zero.
fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(count) = map.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            map.remove(key);
        }
    }
}

impl Drop for PersistTicket {
    fn drop(&mut self) {
        let mut running = self.hub.counts();
        release(&mut running.by_connection, &self.connection_id);
        release(&mut running.by_identity, &self.identity);
        running.total -= 1;
        if !self.privileged {
            running.unprivileged -= 1;
        }
        running.tested.remove(&self.number);
        running.backlogs.remove(&self.number);
        running.rebuild_needs();
    }
}

impl Running {
    /// The union of the running searches' needs (a few filters: rebuilt at each start and end).
    fn rebuild_needs(&mut self) {
        let mut union = PriorNeeds::default();
        for tested in self.tested.values() {
            for (attr, values) in &tested.asserted {
                union
                    .asserted
                    .entry(*attr)
                    .or_default()
                    .extend(values.iter().cloned());
            }
            union.whole.extend(tested.whole.iter().copied());
            union.every_attribute |= tested.every_attribute;
        }
        self.needs = Arc::new(union);
    }
}

/// Why a persistent search may not start.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Every slot is taken.
    ServerFull(usize),
    /// Every slot but the reserved ones is taken (by unprivileged subjects).
    OnlyReservedLeft(usize),
    /// This identity runs its share already.
    IdentityFull(usize),
    ConnectionFull,
}

impl Default for PersistHub {
    fn default() -> Self {
        PersistHub {
            sender: broadcast::channel(PERSIST_QUEUE_CHANGES_MAX).0,
            enabled: AtomicBool::new(false),
            stop: watch::channel(false).0,
            running: Mutex::new(Running::default()),
            published_bytes: AtomicU64::new(0),
        }
    }
}

impl PersistHub {
    fn counts(&self) -> std::sync::MutexGuard<'_, Running> {
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

    /// What a write starting now records of each changed entry as it was before the change
    /// (`Change::before`): None (no image) unless a persistent search runs, the one reader of
    /// those copies; else what the running searches test, which bounds the image of a point
    /// modify of a big group. A search that joins while a write runs may get that write's
    /// changes without images (or with images bounded by the others' needs) and decides as
    /// for an entry too large to carry (see `search/persist.rs`): never naming a hidden entry.
    /// The access rules' filters, `policy` (the write's), are needs too: a search decides with
    /// the rules of its batch, and a reload may have added one since the search started.
    pub(crate) fn begin_write(
        &self,
        policy: &lmdir_access::acl::AccessPolicy,
    ) -> Option<Arc<PriorNeeds>> {
        if !self.is_enabled() {
            return None;
        }
        let mut needs = {
            let running = self.counts();
            if running.total == 0 {
                return None;
            }
            (*running.needs).clone()
        };
        for filter in policy.rule_filters() {
            needs.add_filter(filter);
        }
        Some(Arc::new(needs))
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
            let bytes = change.held_bytes() as u64;
            let end_bytes = self.published_bytes.fetch_add(bytes, Ordering::AcqRel) + bytes;
            let _ = self.sender.send(Published::Change {
                txn_id,
                change: Arc::new(change),
                end_bytes,
            });
        }
        self.end_overruns();
    }

    /// Ends every search with more than `PERSIST_QUEUE_BYTES_MAX` yet to take.
    fn end_overruns(&self) {
        let published = self.published_bytes.load(Ordering::Acquire);
        let running = self.counts();
        for backlog in running.backlogs.values() {
            let taken = backlog.taken_bytes.load(Ordering::Acquire);
            if published.saturating_sub(taken) > PERSIST_QUEUE_BYTES_MAX {
                backlog
                    .overrun
                    .send_if_modified(|overrun| !std::mem::replace(overrun, true));
            }
        }
    }

    /// Every persistent search ends (shutdown).
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Persistent searches running now (monitoring and tests).
    pub(crate) fn running_searches(&self) -> usize {
        self.counts().total
    }

    /// A place for one more persistent search of `subject`, within `limits`: the server's
    /// `searches_max`, less the reserve unless the subject is the rootdn or a replica, the
    /// identity's share (privileged subjects have none) and
    /// `PERSIST_SEARCHES_PER_CONNECTION_MAX` for the connection; with it the subscription to
    /// the changes committed from now on and the stop signal. Subscribe before the refresh
    /// opens its snapshot, so no change falls between.
    #[allow(clippy::type_complexity)]
    pub(crate) fn join(
        self: &Arc<Self>,
        subject: PersistSubject,
        limits: PersistLimits,
    ) -> Result<
        (
            PersistTicket,
            broadcast::Receiver<Published>,
            watch::Receiver<bool>,
        ),
        Refused,
    > {
        let mut running = self.counts();
        if running.total >= limits.searches_max {
            return Err(Refused::ServerFull(limits.searches_max));
        }
        let open_to_all = limits.searches_max.saturating_sub(limits.reserved);
        if !subject.privileged && running.unprivileged >= open_to_all {
            return Err(Refused::OnlyReservedLeft(limits.reserved));
        }
        let identity_count = running
            .by_identity
            .get(&subject.identity)
            .copied()
            .unwrap_or(0);
        if !subject.privileged && identity_count >= limits.per_identity_max {
            return Err(Refused::IdentityFull(limits.per_identity_max));
        }
        let connection_count = running
            .by_connection
            .get(&subject.connection_id)
            .copied()
            .unwrap_or(0);
        if connection_count >= PERSIST_SEARCHES_PER_CONNECTION_MAX {
            return Err(Refused::ConnectionFull);
        }
        *running
            .by_connection
            .entry(subject.connection_id)
            .or_insert(0) += 1;
        *running
            .by_identity
            .entry(subject.identity.clone())
            .or_insert(0) += 1;
        running.total += 1;
        if !subject.privileged {
            running.unprivileged += 1;
        }
        let number = running.next_ticket;
        running.next_ticket += 1;
        running.tested.insert(number, subject.tested);
        running.rebuild_needs();
        let backlog = Arc::new(Backlog {
            taken_bytes: AtomicU64::new(self.published_bytes.load(Ordering::Acquire)),
            overrun: watch::channel(false).0,
        });
        running.backlogs.insert(number, backlog.clone());
        drop(running);
        Ok((
            PersistTicket {
                hub: self.clone(),
                number,
                backlog,
                connection_id: subject.connection_id,
                identity: subject.identity,
                privileged: subject.privileged,
            },
            self.sender.subscribe(),
            self.stop.subscribe(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(connection_id: u64, identity: &str, privileged: bool) -> PersistSubject {
        PersistSubject {
            connection_id,
            tested: PriorNeeds::default(),
            identity: identity.to_string(),
            privileged,
        }
    }

    const LIMITS: PersistLimits = PersistLimits {
        searches_max: 8,
        per_identity_max: 4,
        reserved: 2,
    };

    #[test]
    fn identities_get_a_share_and_the_reserve_is_kept_for_the_rootdn_and_replicas() {
        let hub = Arc::new(PersistHub::default());
        let mut held = Vec::new();
        for connection in 0..2 {
            for _ in 0..2 {
                held.push(hub.join(subject(connection, "", false), LIMITS).unwrap().0);
            }
        }
        assert_eq!(
            hub.join(subject(9, "", false), LIMITS).err(),
            Some(Refused::IdentityFull(4))
        );
        held.push(hub.join(subject(10, "uid=a", false), LIMITS).unwrap().0);
        held.push(hub.join(subject(10, "uid=a", false), LIMITS).unwrap().0);
        assert_eq!(
            hub.join(subject(10, "uid=a", false), LIMITS).err(),
            Some(Refused::OnlyReservedLeft(2))
        );
        assert_eq!(
            hub.join(subject(11, "uid=b", false), LIMITS).err(),
            Some(Refused::OnlyReservedLeft(2))
        );
        held.push(hub.join(subject(12, "cn=admin", true), LIMITS).unwrap().0);
        held.push(hub.join(subject(13, "cn=replica", true), LIMITS).unwrap().0);
        assert_eq!(
            hub.join(subject(14, "cn=replica", true), LIMITS).err(),
            Some(Refused::ServerFull(8))
        );
        assert_eq!(hub.running_searches(), 8);
        drop(held);
        assert_eq!(hub.running_searches(), 0);
        let running = hub.counts();
        assert!(running.by_identity.is_empty() && running.by_connection.is_empty());
    }
}
