//! What each replication consumer is doing, kept by the consumer's task and read by cn=Monitor
//! (`cn=Consumer NNN,cn=Database 1,cn=Databases,cn=Monitor`, OpenLDAP 2.5's names) and the
//! Prometheus endpoint (`lmdir_replication_*`). Counters are the Prometheus counters themselves
//! (atomics; cn=Monitor reads their values); the rest sits behind one small mutex that is never
//! held across an await: the consumer takes it for a few field writes per message or batch.
//!
//! Also the provider side: sync searches running now, by mode.

use lmdir_sync::{ContextCsns, Cookie, Csn};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// Bytes of the last error text kept per consumer (an error can quote a provider's message,
/// whose length the provider chooses).
pub const LAST_ERROR_BYTES_MAX: usize = 512;
/// Bytes of a cookie kept for display (lmdir-sync's `COOKIE_BYTES_MAX`: a longer one is refused
/// by the parser anyway, this only bounds what a hostile provider's value costs here).
pub const COOKIE_DISPLAY_BYTES_MAX: usize = lmdir_sync::cookie::COOKIE_BYTES_MAX;

/// Where a consumer is. `monitor_name` is `olmSRSyncPhase`'s value: OpenLDAP's `Refresh` and
/// `Persist` where it has one (a refreshOnly consumer between polls stays `Refresh` there too,
/// with no connection); lmdir names the states OpenLDAP does not show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPhase {
    /// Connecting, TLS, binding.
    Connecting,
    /// The sync search's refresh stage.
    Refreshing,
    /// refreshAndPersist after the refresh: changes stream in.
    Persisting,
    /// refreshOnly between polls.
    WaitingToPoll,
    /// After an error, until `retry_seconds` have passed.
    WaitingToRetry,
}

impl SyncPhase {
    pub fn monitor_name(self) -> &'static str {
        match self {
            SyncPhase::Connecting => "Connecting",
            SyncPhase::Refreshing => "Refresh",
            SyncPhase::Persisting => "Persist",
            SyncPhase::WaitingToPoll => "Refresh",
            SyncPhase::WaitingToRetry => "Waiting to retry",
        }
    }
}

/// Changes a committed batch applied, by kind (a rename that also changed attributes counts
/// as one rename; a delete of a subtree counts every entry).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChangeCounts {
    pub adds: u64,
    pub modifies: u64,
    pub deletes: u64,
    pub renames: u64,
    /// Entries the provider sent that were left as they were (not in `total`): the local
    /// entryCSN was later or equal, or a later change had deleted the entry (multi-provider).
    pub kept: u64,
    /// Same-attribute conflicts between multi-provider nodes resolved by discarding the
    /// change with the earlier CSN (each also logged with both CSNs).
    pub conflicts: u64,
}

/// The kinds, as the `kind` label and cn=Monitor's counter entries name them.
const CHANGE_KINDS: [(&str, &str); 4] = [
    ("add", "Adds"),
    ("modify", "Modifies"),
    ("delete", "Deletes"),
    ("rename", "Renames"),
];

impl ChangeCounts {
    fn by_kind(&self) -> [u64; 4] {
        [self.adds, self.modifies, self.deletes, self.renames]
    }

    pub fn total(&self) -> u64 {
        self.by_kind().iter().sum()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RidLabel {
    rid: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RidKindLabels {
    rid: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabel {
    mode: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// The metric families of every consumer, and the consumers, for both views.
#[derive(Debug, Default)]
pub struct ReplicationMonitor {
    consumers: Mutex<Vec<Arc<ConsumerStatus>>>,
    applied: Family<RidKindLabels, Counter>,
    kept: Family<RidLabel, Counter>,
    conflicts: Family<RidLabel, Counter>,
    reloads: Family<RidLabel, Counter>,
    refreshes: Family<RidLabel, Counter>,
    reconnects: Family<RidLabel, Counter>,
    connected: Family<RidLabel, Gauge>,
    lag: Family<RidLabel, FloatGauge>,
    last_sync: Family<RidLabel, Gauge>,
    sync_searches: Family<ModeLabel, Gauge>,
}

impl ReplicationMonitor {
    /// Registers the families under the monitor's registry (prefix `lmdir`).
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "replication_changes_applied",
            "Changes from the provider committed by this consumer, by kind",
            self.applied.clone(),
        );
        registry.register(
            "replication_changes_kept",
            "Entries from the provider left as they were (multi-provider conflicts): the local entryCSN was as new or newer, or a later change had deleted the entry here",
            self.kept.clone(),
        );
        registry.register(
            "replication_conflicts",
            "Changes of one attribute made concurrently on two multi-provider nodes, settled by keeping the later CSN's values and discarding the other change",
            self.conflicts.clone(),
        );
        registry.register(
            "replication_reloads",
            "Full reloads after the provider answered e-syncRefreshRequired (4096)",
            self.reloads.clone(),
        );
        registry.register(
            "replication_refreshes",
            "Sync searches sent (each poll of refreshOnly, each session of refreshAndPersist)",
            self.refreshes.clone(),
        );
        registry.register(
            "replication_reconnects",
            "Sessions with the provider that ended in an error (each is retried)",
            self.reconnects.clone(),
        );
        registry.register(
            "replication_connected",
            "1 while the consumer holds a bound connection to its provider",
            self.connected.clone(),
        );
        registry.register(
            "replication_lag_seconds",
            "Provider's newest CSN this consumer has received minus the newest it has committed (both stamped by the provider's clock)",
            self.lag.clone(),
        );
        registry.register(
            "replication_last_sync_timestamp_seconds",
            "Unix time of the consumer's last commit or completed poll",
            self.last_sync.clone(),
        );
        registry.register(
            "sync_searches",
            "RFC 4533 sync searches this server is answering now, by mode",
            self.sync_searches.clone(),
        );
    }

    /// A consumer's record, created when its task starts (its series start at zero).
    pub fn register_consumer(&self, identity: ConsumerIdentity) -> Arc<ConsumerStatus> {
        let rid = RidLabel {
            rid: identity.rid.to_string(),
        };
        let applied = CHANGE_KINDS.map(|(kind, _)| {
            self.applied
                .get_or_create(&RidKindLabels {
                    rid: rid.rid.clone(),
                    kind,
                })
                .clone()
        });
        let status = Arc::new(ConsumerStatus {
            identity,
            applied,
            kept: self.kept.get_or_create(&rid).clone(),
            conflicts: self.conflicts.get_or_create(&rid).clone(),
            reloads: self.reloads.get_or_create(&rid).clone(),
            refreshes: self.refreshes.get_or_create(&rid).clone(),
            reconnects: self.reconnects.get_or_create(&rid).clone(),
            connected: self.connected.get_or_create(&rid).clone(),
            lag: self.lag.get_or_create(&rid).clone(),
            last_sync: self.last_sync.get_or_create(&rid).clone(),
            state: Mutex::new(ConsumerState::default()),
        });
        lock(&self.consumers).push(status.clone());
        status
    }

    /// A consumer a reload removed: no longer shown (its metric series stay, frozen).
    pub fn unregister_consumer(&self, rid: u16) {
        lock(&self.consumers).retain(|status| status.identity.rid != rid);
    }

    /// The consumers, in the order they started.
    pub fn consumers(&self) -> Vec<Arc<ConsumerStatus>> {
        lock(&self.consumers).clone()
    }

    /// A sync search in `mode` ("refreshOnly", "refreshAndPersist") started; it counts until
    /// the guard is dropped.
    pub fn sync_search_started(&self, mode: &'static str) -> SyncSearchGuard {
        let gauge = self
            .sync_searches
            .get_or_create(&ModeLabel { mode })
            .clone();
        gauge.inc();
        SyncSearchGuard { gauge }
    }

    /// Sync searches running now, by mode.
    pub fn sync_searches(&self, mode: &'static str) -> i64 {
        self.sync_searches.get_or_create(&ModeLabel { mode }).get()
    }
}

/// Counts one running sync search while alive.
#[derive(Debug)]
pub struct SyncSearchGuard {
    gauge: Gauge,
}

impl Drop for SyncSearchGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a consumer is configured as (fixed for its life).
#[derive(Clone, Debug)]
pub struct ConsumerIdentity {
    pub rid: u16,
    pub provider: String,
    pub search_base: String,
    /// `refreshOnly` or `refreshAndPersist`.
    pub sync_type: &'static str,
}

/// The changing part of a consumer's state.
#[derive(Clone, Debug)]
pub struct ConsumerState {
    pub phase: SyncPhase,
    /// `IP=addr:port` of our end while connected (olmSRConnection), else empty.
    pub connection: String,
    pub next_connect: Option<SystemTime>,
    pub last_connect: Option<SystemTime>,
    pub last_contact: Option<SystemTime>,
    pub last_sync: Option<SystemTime>,
    pub last_cookie_received: Vec<u8>,
    pub last_cookie_sent: Vec<u8>,
    pub last_error: String,
    pub last_error_time: Option<SystemTime>,
    /// The newest CSN per server ID the provider has sent (cookies and entryCSNs).
    pub received: ContextCsns,
    /// The newest CSN per server ID committed here (the stored cookie and applied entries).
    pub committed: ContextCsns,
    /// A refresh has been committed whole since the consumer started (or since its last
    /// reload): until then `/readyz` answers 503. Stays set while disconnected.
    pub refreshed: bool,
}

impl Default for ConsumerState {
    fn default() -> ConsumerState {
        ConsumerState {
            phase: SyncPhase::Connecting,
            connection: String::new(),
            next_connect: None,
            last_connect: None,
            last_contact: None,
            last_sync: None,
            last_cookie_received: Vec::new(),
            last_cookie_sent: Vec::new(),
            last_error: String::new(),
            last_error_time: None,
            received: ContextCsns::new(),
            committed: ContextCsns::new(),
            refreshed: false,
        }
    }
}

/// One consumer's record. Every method is a few field writes under the lock (or atomic adds).
#[derive(Debug)]
pub struct ConsumerStatus {
    pub identity: ConsumerIdentity,
    applied: [Counter; 4],
    kept: Counter,
    conflicts: Counter,
    reloads: Counter,
    refreshes: Counter,
    reconnects: Counter,
    connected: Gauge,
    lag: FloatGauge,
    last_sync: Gauge,
    state: Mutex<ConsumerState>,
}

/// Counter values for cn=Monitor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerCounts {
    pub applied: ChangeCounts,
    pub reloads: u64,
    pub refreshes: u64,
    pub reconnects: u64,
}

/// The CSNs of a cookie (none when it does not parse: the display still shows its text).
fn cookie_csns(cookie: &[u8]) -> ContextCsns {
    Cookie::parse(cookie)
        .map(|cookie| cookie.csns().clone())
        .unwrap_or_default()
}

/// At most `max` bytes of a provider's value, as text: cn=Monitor shows it as a directory
/// string, which a provider's invalid UTF-8 must not break.
fn bounded(bytes: &[u8], max: usize) -> Vec<u8> {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)])
        .into_owned()
        .into_bytes()
}

impl ConsumerStatus {
    fn state(&self) -> MutexGuard<'_, ConsumerState> {
        lock(&self.state)
    }

    /// A copy of the state now.
    pub fn snapshot(&self) -> ConsumerState {
        self.state().clone()
    }

    pub fn counts(&self) -> ConsumerCounts {
        let [adds, modifies, deletes, renames] = self.applied.each_ref().map(Counter::get);
        ConsumerCounts {
            applied: ChangeCounts {
                adds,
                modifies,
                deletes,
                renames,
                kept: self.kept.get(),
                conflicts: self.conflicts.get(),
            },
            reloads: self.reloads.get(),
            refreshes: self.refreshes.get(),
            reconnects: self.reconnects.get(),
        }
    }

    pub fn connected(&self) -> bool {
        self.connected.get() == 1
    }

    /// A session starts connecting; `stored_cookie` is what this server has committed.
    pub fn connecting(&self, stored_cookie: Option<&[u8]>) {
        let mut state = self.state();
        // next_connect stays: the time this attempt was scheduled for, as slapd shows it.
        state.phase = SyncPhase::Connecting;
        if let Some(cookie) = stored_cookie {
            state.committed.merge_all(&cookie_csns(cookie));
        }
    }

    /// Bound to the provider from `local_address`; the sync search goes out with `cookie`.
    pub fn searching(&self, local_address: &str, cookie: Option<&[u8]>) {
        self.connected.set(1);
        self.refreshes.inc();
        let mut state = self.state();
        state.phase = SyncPhase::Refreshing;
        state.connection = format!("IP={local_address}");
        state.last_connect = Some(SystemTime::now());
        state.last_cookie_sent =
            cookie.map_or_else(Vec::new, |cookie| bounded(cookie, COOKIE_DISPLAY_BYTES_MAX));
    }

    /// A message arrived; `csn` is the entryCSN it carried, `cookie` its cookie, if any.
    pub fn contact(&self, csn: Option<Csn>, cookie: Option<&[u8]>) {
        let mut state = self.state();
        state.last_contact = Some(SystemTime::now());
        if let Some(csn) = csn {
            state.received.merge(csn);
        }
        if let Some(cookie) = cookie {
            state.last_cookie_received = bounded(cookie, COOKIE_DISPLAY_BYTES_MAX);
            let csns = cookie_csns(cookie);
            state.received.merge_all(&csns);
        }
        self.update_lag(&state);
    }

    /// The refresh is over; changes stream in (refreshAndPersist).
    pub fn persisting(&self) {
        self.state().phase = SyncPhase::Persisting;
    }

    /// A batch committed: `counts` applied, and the CSNs it covered (its entries' and cookie's).
    pub fn committed(&self, counts: ChangeCounts, csns: &ContextCsns) {
        let now = SystemTime::now();
        {
            let mut state = self.state();
            state.committed.merge_all(csns);
            state.last_sync = Some(now);
            self.update_lag(&state);
        }
        self.last_sync.set(unix_seconds(now));
        // Counted last: a reader that sees the counts also sees the lag they brought.
        for (counter, value) in self.applied.iter().zip(counts.by_kind()) {
            counter.inc_by(value);
        }
        self.kept.inc_by(counts.kept);
        self.conflicts.inc_by(counts.conflicts);
    }

    /// Everything received so far is committed (a batch's commit succeeded, or nothing was
    /// left to write): once the refresh is over (`persisting`), the consumer is refreshed.
    pub fn flushed(&self) {
        let mut state = self.state();
        if state.phase == SyncPhase::Persisting {
            state.refreshed = true;
        }
    }

    /// A refresh has been committed whole since the start or the last reload.
    pub fn refreshed(&self) -> bool {
        self.state().refreshed
    }

    /// The provider answered e-syncRefreshRequired: the cookie is dropped, a reload follows,
    /// and the consumer is not refreshed until that reload has been committed.
    pub fn reloading(&self) {
        self.reloads.inc();
        let mut state = self.state();
        state.committed = ContextCsns::new();
        state.refreshed = false;
    }

    /// A refreshOnly poll completed (its changes committed); the next starts at `next`.
    pub fn polled(&self, next: SystemTime) {
        self.connected.set(0);
        let now = SystemTime::now();
        self.last_sync.set(unix_seconds(now));
        let mut state = self.state();
        state.refreshed = true;
        state.phase = SyncPhase::WaitingToPoll;
        state.connection.clear();
        state.last_sync = Some(now);
        state.next_connect = Some(next);
    }

    /// The session failed with `error`; the next attempt starts at `next`.
    pub fn failed(&self, error: &str, next: SystemTime) {
        self.connected.set(0);
        self.reconnects.inc();
        let mut state = self.state();
        state.phase = SyncPhase::WaitingToRetry;
        state.connection.clear();
        state.next_connect = Some(next);
        let mut end = error.len().min(LAST_ERROR_BYTES_MAX);
        while !error.is_char_boundary(end) {
            end -= 1;
        }
        state.last_error = error[..end].to_string();
        state.last_error_time = Some(SystemTime::now());
    }

    /// The consumer stopped (server shutdown).
    pub fn stopped(&self) {
        self.connected.set(0);
        self.state().connection.clear();
    }

    /// Lag: for each server ID the provider told us of, its newest CSN's time minus the newest
    /// committed here; the largest, 0 when caught up. Both times come from CSNs the provider
    /// (or the server that wrote the change) stamped, so clock skew between this server and
    /// the provider does not enter it, and a quiet directory shows 0 rather than a growing
    /// age. What the provider has not sent yet (a link cut while it takes writes) is not seen:
    /// `lmdir_replication_connected` shows that.
    fn update_lag(&self, state: &ConsumerState) {
        let lag_micros = state
            .received
            .iter()
            .filter_map(|received| {
                let committed = state.committed.get(received.sid())?;
                Some(received.micros().saturating_sub(committed.micros()).max(0))
            })
            .max()
            .unwrap_or(0);
        self.lag.set(lag_micros as f64 / 1_000_000.0);
    }

    /// The lag gauge's value in seconds.
    pub fn lag_seconds(&self) -> f64 {
        self.lag.get()
    }
}

fn unix_seconds(time: SystemTime) -> i64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        })
}

/// The cn=Monitor counter entries under a consumer: (cn, value).
pub fn counter_rows(counts: &ConsumerCounts) -> Vec<(&'static str, u64)> {
    let mut rows: Vec<(&'static str, u64)> = CHANGE_KINDS
        .iter()
        .zip(counts.applied.by_kind())
        .map(|((_, cn), value)| (*cn, value))
        .collect();
    rows.push(("Kept", counts.applied.kept));
    rows.push(("Conflicts", counts.applied.conflicts));
    rows.push(("Refreshes", counts.refreshes));
    rows.push(("Reloads", counts.reloads));
    rows.push(("Reconnects", counts.reconnects));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csn(text: &str) -> Csn {
        Csn::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn lag_is_the_provider_csn_gap_and_zero_when_caught_up() {
        let monitor = ReplicationMonitor::default();
        let status = monitor.register_consumer(ConsumerIdentity {
            rid: 7,
            provider: "ldap://p".into(),
            search_base: "dc=example,dc=com".into(),
            sync_type: "refreshAndPersist",
        });
        let old = "20250101000000.000000Z#000000#001#000000";
        status.connecting(Some(format!("rid=007,csn={old}").as_bytes()));
        status.searching("127.0.0.1:5000", None);
        assert_eq!(status.lag_seconds(), 0.0);
        status.flushed();
        assert!(
            !status.refreshed(),
            "a batch during the refresh is not the refresh"
        );
        status.persisting();
        assert!(
            !status.refreshed(),
            "the refresh's last batch is not committed yet"
        );
        status.flushed();
        assert!(status.refreshed());
        let new = csn("20250101000002.500000Z#000000#001#000000");
        status.contact(Some(new), None);
        assert_eq!(status.lag_seconds(), 2.5);
        let mut covered = ContextCsns::new();
        covered.merge(new);
        status.committed(
            ChangeCounts {
                modifies: 3,
                kept: 2,
                ..ChangeCounts::default()
            },
            &covered,
        );
        assert_eq!(status.lag_seconds(), 0.0);
        assert_eq!(status.counts().applied.modifies, 3);
        assert_eq!(status.counts().applied.kept, 2);
        assert_eq!(
            status.counts().applied.total(),
            3,
            "kept entries are not changes"
        );
        assert_eq!(status.counts().refreshes, 1);
        assert!(status.connected());

        status.contact(None, Some(b"rid=007,csn=\xff"));
        assert_eq!(
            status.snapshot().last_cookie_received,
            "rid=007,csn=\u{fffd}".as_bytes()
        );
        status.failed(&"é".repeat(LAST_ERROR_BYTES_MAX), SystemTime::now());
        let state = status.snapshot();
        assert!(state.last_error.len() <= LAST_ERROR_BYTES_MAX);
        assert_eq!(state.phase, SyncPhase::WaitingToRetry);
        assert!(state.connection.is_empty());
        assert!(!status.connected());
        assert_eq!(status.counts().reconnects, 1);
        assert!(
            status.refreshed(),
            "a refreshed consumer stays so while disconnected"
        );
        status.reloading();
        assert!(!status.refreshed(), "a reload starts over");
    }

    #[test]
    fn sync_searches_count_while_their_guard_lives() {
        let monitor = ReplicationMonitor::default();
        let first = monitor.sync_search_started("refreshAndPersist");
        let second = monitor.sync_search_started("refreshAndPersist");
        assert_eq!(monitor.sync_searches("refreshAndPersist"), 2);
        drop(first);
        assert_eq!(monitor.sync_searches("refreshAndPersist"), 1);
        drop(second);
        assert_eq!(monitor.sync_searches("refreshAndPersist"), 0);
    }
}

/// The running consumer tasks by rid, each with its config and its own stop signal, so that a
/// reload can stop one and start another; and the server's shutdown signal they also obey.
#[derive(Default)]
pub struct ConsumerTasks {
    pub(crate) running: std::collections::BTreeMap<u16, RunningConsumer>,
    pub(crate) shutdown: Option<tokio::sync::watch::Receiver<bool>>,
}

pub(crate) struct RunningConsumer {
    pub config: lmdir_config::ConsumerConfig,
    pub stop: Arc<tokio::sync::watch::Sender<bool>>,
    pub task: tokio::task::JoinHandle<()>,
}
