//! What the server does, counted once and read two ways: OpenLDAP's `cn=Monitor` subtree (which
//! existing exporters and scripts read; see `monitor_tree`) and Prometheus' text format on
//! `metrics_listen` (see `metrics_http`). Counting is a few relaxed atomic adds per operation.

use crate::replication_status::{counter_rows, ConsumerStatus, ReplicationMonitor};
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// The operations counted, in cn=Monitor's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperationKind {
    Bind,
    Unbind,
    Search,
    Compare,
    Modify,
    Modrdn,
    Add,
    Delete,
    Abandon,
    Extended,
}

const OPERATION_KIND_COUNT: usize = 10;

impl OperationKind {
    pub const ALL: [OperationKind; OPERATION_KIND_COUNT] = [
        OperationKind::Bind,
        OperationKind::Unbind,
        OperationKind::Search,
        OperationKind::Compare,
        OperationKind::Modify,
        OperationKind::Modrdn,
        OperationKind::Add,
        OperationKind::Delete,
        OperationKind::Abandon,
        OperationKind::Extended,
    ];

    /// The RDN value of its entry under `cn=Operations,cn=Monitor` (OpenLDAP's names).
    pub fn monitor_name(self) -> &'static str {
        match self {
            OperationKind::Bind => "Bind",
            OperationKind::Unbind => "Unbind",
            OperationKind::Search => "Search",
            OperationKind::Compare => "Compare",
            OperationKind::Modify => "Modify",
            OperationKind::Modrdn => "Modrdn",
            OperationKind::Add => "Add",
            OperationKind::Delete => "Delete",
            OperationKind::Abandon => "Abandon",
            OperationKind::Extended => "Extended",
        }
    }

    /// The `operation` label value in Prometheus metrics.
    pub fn label(self) -> &'static str {
        match self {
            OperationKind::Bind => "bind",
            OperationKind::Unbind => "unbind",
            OperationKind::Search => "search",
            OperationKind::Compare => "compare",
            OperationKind::Modify => "modify",
            OperationKind::Modrdn => "modrdn",
            OperationKind::Add => "add",
            OperationKind::Delete => "delete",
            OperationKind::Abandon => "abandon",
            OperationKind::Extended => "extended",
        }
    }

    /// The operation a response (by its BER application tag) ends.
    pub fn from_response_tag(response_tag: u8) -> Option<OperationKind> {
        use crate::ber::tag;
        Some(match response_tag {
            tag::BIND_RESPONSE => OperationKind::Bind,
            tag::SEARCH_RESULT_DONE => OperationKind::Search,
            tag::COMPARE_RESPONSE => OperationKind::Compare,
            tag::MODIFY_RESPONSE => OperationKind::Modify,
            tag::MODIFY_DN_RESPONSE => OperationKind::Modrdn,
            tag::ADD_RESPONSE => OperationKind::Add,
            tag::DELETE_RESPONSE => OperationKind::Delete,
            tag::EXTENDED_RESPONSE => OperationKind::Extended,
            _ => return None,
        })
    }

    /// The operation a request starts.
    pub fn of_request(operation: &crate::request::Operation) -> Option<OperationKind> {
        use crate::request::Operation;
        use ldap3_proto::proto::LdapOp;
        let operation = match operation {
            Operation::Search(_) => return Some(OperationKind::Search),
            Operation::Bind(_) => return Some(OperationKind::Bind),
            Operation::NotUtf8(invalid) => {
                use crate::request::DnOperation;
                return Some(match invalid.operation {
                    DnOperation::Search => OperationKind::Search,
                    DnOperation::Modify => OperationKind::Modify,
                    DnOperation::Add => OperationKind::Add,
                    DnOperation::Delete => OperationKind::Delete,
                    DnOperation::ModifyDn => OperationKind::Modrdn,
                    DnOperation::Compare => OperationKind::Compare,
                });
            }
            Operation::Other(operation) => operation,
        };
        Some(match operation {
            LdapOp::BindRequest(_) => OperationKind::Bind,
            LdapOp::UnbindRequest => OperationKind::Unbind,
            LdapOp::CompareRequest(_) => OperationKind::Compare,
            LdapOp::ModifyRequest(_) => OperationKind::Modify,
            LdapOp::ModifyDNRequest(_) => OperationKind::Modrdn,
            LdapOp::AddRequest(_) => OperationKind::Add,
            LdapOp::DelRequest(_) => OperationKind::Delete,
            LdapOp::AbandonRequest(_) => OperationKind::Abandon,
            LdapOp::ExtendedRequest(_) => OperationKind::Extended,
            _ => return None,
        })
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: &'static str,
}

/// The `result` label of each result code counted by name, so that a dashboard needs no code
/// table; the last ("other") is every other code's.
const RESULT_LABELS: [(u32, &str); RESULT_LABEL_COUNT] = {
    use crate::result::code;
    [
        (code::SUCCESS, "success"),
        (code::COMPARE_TRUE, "compareTrue"),
        (code::COMPARE_FALSE, "compareFalse"),
        (code::INVALID_CREDENTIALS, "invalidCredentials"),
        (code::NO_SUCH_OBJECT, "noSuchObject"),
        (code::INSUFFICIENT_ACCESS_RIGHTS, "insufficientAccessRights"),
        (code::SIZE_LIMIT_EXCEEDED, "sizeLimitExceeded"),
        (code::TIME_LIMIT_EXCEEDED, "timeLimitExceeded"),
        (code::ADMIN_LIMIT_EXCEEDED, "adminLimitExceeded"),
        (code::BUSY, "busy"),
        (code::UNWILLING_TO_PERFORM, "unwillingToPerform"),
        (code::PROTOCOL_ERROR, "protocolError"),
        (code::CANCELED, "canceled"),
        (code::ASSERTION_FAILED, "assertionFailed"),
        (code::UNAVAILABLE, "unavailable"),
        (
            code::UNAVAILABLE_CRITICAL_EXTENSION,
            "unavailableCriticalExtension",
        ),
        (code::INVALID_DN_SYNTAX, "invalidDNSyntax"),
        (code::NO_SUCH_ATTRIBUTE, "noSuchAttribute"),
        (code::UNDEFINED_ATTRIBUTE_TYPE, "undefinedAttributeType"),
        (19, "constraintViolation"),
        (20, "attributeOrValueExists"),
        (21, "invalidAttributeSyntax"),
        (64, "namingViolation"),
        (65, "objectClassViolation"),
        (66, "notAllowedOnNonLeaf"),
        (68, "entryAlreadyExists"),
        (u32::MAX, "other"),
    ]
};

const RESULT_LABEL_COUNT: usize = 27;

/// Where `result_code`'s label is in `RESULT_LABELS` ("other" for a code not named there).
fn result_index(result_code: u32) -> usize {
    RESULT_LABELS[..RESULT_LABEL_COUNT - 1]
        .iter()
        .position(|(code, _)| *code == result_code)
        .unwrap_or(RESULT_LABEL_COUNT - 1)
}

/// One open connection as cn=Monitor shows it (`cn=Connection N,cn=Connections,cn=Monitor`).
#[derive(Debug)]
pub struct ConnectionRecord {
    pub number: u64,
    pub peer: String,
    pub listener: String,
    pub started: SystemTime,
    operations_received: AtomicU64,
    operations_completed: AtomicU64,
    last_activity_seconds: AtomicU64,
    authz_dn: Mutex<String>,
}

impl ConnectionRecord {
    /// An operation arrived on this connection.
    pub fn operation_received(&self) {
        self.operations_received.fetch_add(1, Ordering::Relaxed);
        self.last_activity_seconds
            .store(unix_seconds(SystemTime::now()), Ordering::Relaxed);
    }

    /// An operation on this connection sent its final response (or ended silently).
    pub fn operation_completed(&self) {
        self.operations_completed.fetch_add(1, Ordering::Relaxed);
    }

    /// The connection's identity changed (a bind).
    pub fn set_authz_dn(&self, dn: &str) {
        let mut current = self
            .authz_dn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        current.clear();
        current.push_str(dn);
    }

    fn authz_dn(&self) -> String {
        self.authz_dn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Every counter the server keeps, with the Prometheus registry that names them.
#[derive(Debug)]
pub struct Monitor {
    started: SystemTime,
    initiated: [AtomicU64; OPERATION_KIND_COUNT],
    completed: [AtomicU64; OPERATION_KIND_COUNT],
    operations: Family<OperationLabels, Counter>,
    durations: Family<OperationLabel, Histogram, fn() -> Histogram>,
    /// Each (operation, result) series of `operations` once used: the family's map is locked
    /// and hashed once per series, not once per operation (a clone shares the series' count).
    operation_series: [[OnceLock<Counter>; RESULT_LABEL_COUNT]; OPERATION_KIND_COUNT],
    /// Each operation's series of `durations` once used, likewise.
    duration_series: [OnceLock<Histogram>; OPERATION_KIND_COUNT],
    connections_accepted: Counter,
    bytes_sent: Counter,
    messages_sent: Counter,
    entries_sent: Counter,
    failed_binds: Counter,
    password_checks: Counter,
    write_batch_operations: Histogram,
    commit_seconds: Histogram,
    open_connections: Mutex<BTreeMap<u64, Arc<ConnectionRecord>>>,
    /// Replication consumers and the provider's sync searches.
    pub replication: ReplicationMonitor,
    registry: Registry,
}

fn duration_histogram() -> Histogram {
    // 50 µs .. ~13 s in factors of 4.
    Histogram::new(exponential_buckets(0.000_05, 4.0, 10))
}

impl Default for Monitor {
    fn default() -> Monitor {
        Monitor::new()
    }
}

impl Monitor {
    pub fn new() -> Monitor {
        let mut monitor = Monitor {
            started: SystemTime::now(),
            initiated: Default::default(),
            completed: Default::default(),
            operations: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            operation_series: Default::default(),
            duration_series: Default::default(),
            connections_accepted: Counter::default(),
            bytes_sent: Counter::default(),
            messages_sent: Counter::default(),
            entries_sent: Counter::default(),
            failed_binds: Counter::default(),
            password_checks: Counter::default(),
            // 1 .. 64 operations per commit (the writer's batch bound).
            write_batch_operations: Histogram::new(exponential_buckets(1.0, 2.0, 7)),
            commit_seconds: duration_histogram(),
            open_connections: Mutex::new(BTreeMap::new()),
            replication: ReplicationMonitor::default(),
            registry: Registry::with_prefix("lmdir"),
        };
        monitor.register_metrics();
        monitor
    }

    fn register_metrics(&mut self) {
        let registry = &mut self.registry;
        registry.register(
            "operations",
            "LDAP operations completed, by operation and result",
            self.operations.clone(),
        );
        registry.register(
            "operation_duration_seconds",
            "Time from an operation's arrival to its final response",
            self.durations.clone(),
        );
        registry.register(
            "connections_accepted",
            "Connections accepted since start",
            self.connections_accepted.clone(),
        );
        registry.register(
            "sent_bytes",
            "Bytes of LDAP messages written to clients",
            self.bytes_sent.clone(),
        );
        registry.register(
            "sent_messages",
            "LDAP messages (PDUs) sent to clients",
            self.messages_sent.clone(),
        );
        registry.register(
            "entries_returned",
            "Search result entries sent",
            self.entries_sent.clone(),
        );
        registry.register(
            "failed_binds",
            "Simple binds answered invalidCredentials",
            self.failed_binds.clone(),
        );
        registry.register(
            "password_checks",
            "Passwords checked against stored values (binds, bearer tokens, Password Modify, \
             the history); a bind to what cannot authenticate checks a decoy",
            self.password_checks.clone(),
        );
        registry.register(
            "write_batch_operations",
            "Write operations committed together in one LMDB transaction",
            self.write_batch_operations.clone(),
        );
        registry.register(
            "write_commit_seconds",
            "Time to apply and commit one write batch",
            self.commit_seconds.clone(),
        );
        self.replication.register_metrics(registry);
    }

    /// An operation arrived.
    pub fn operation_initiated(&self, kind: OperationKind) {
        self.initiated[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// An operation ended with `result_code` after `elapsed`.
    pub fn operation_completed(&self, kind: OperationKind, result_code: u32, elapsed: Duration) {
        self.completed[kind.index()].fetch_add(1, Ordering::Relaxed);
        let result = result_index(result_code);
        self.operation_series[kind.index()][result]
            .get_or_init(|| {
                self.operations
                    .get_or_create(&OperationLabels {
                        operation: kind.label(),
                        result: RESULT_LABELS[result].1,
                    })
                    .clone()
            })
            .inc();
        self.duration_series[kind.index()]
            .get_or_init(|| {
                self.durations
                    .get_or_create(&OperationLabel {
                        operation: kind.label(),
                    })
                    .clone()
            })
            .observe(elapsed.as_secs_f64());
        if kind == OperationKind::Bind && result_code == crate::result::code::INVALID_CREDENTIALS {
            self.failed_binds.inc();
        }
    }

    /// A presented password was checked against stored values.
    pub fn password_checked(&self) {
        self.password_checks.inc();
    }

    /// `bytes` of LDAP messages were written to a client.
    pub fn bytes_sent(&self, bytes: usize) {
        self.bytes_sent.inc_by(bytes as u64);
    }

    /// `messages` LDAP messages (PDUs) were sent, `entries` of them search result entries.
    pub fn messages_sent(&self, messages: u64, entries: u64) {
        self.messages_sent.inc_by(messages);
        self.entries_sent.inc_by(entries);
    }

    /// The writer committed a batch of `operations` in `elapsed`.
    pub fn write_committed(&self, operations: usize, elapsed: Duration) {
        self.write_batch_operations.observe(operations as f64);
        self.commit_seconds.observe(elapsed.as_secs_f64());
    }

    /// A connection was accepted; the record lives until `connection_closed(number)`.
    pub fn connection_opened(
        &self,
        number: u64,
        peer: &str,
        listener: &str,
    ) -> Arc<ConnectionRecord> {
        self.connections_accepted.inc();
        let now = SystemTime::now();
        let record = Arc::new(ConnectionRecord {
            number,
            peer: peer.to_string(),
            listener: listener.to_string(),
            started: now,
            operations_received: AtomicU64::new(0),
            operations_completed: AtomicU64::new(0),
            last_activity_seconds: AtomicU64::new(unix_seconds(now)),
            authz_dn: Mutex::new(String::new()),
        });
        self.connections().insert(number, record.clone());
        record
    }

    pub fn connection_closed(&self, number: u64) {
        self.connections().remove(&number);
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ConnectionRecord>>> {
        self.open_connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn started(&self) -> SystemTime {
        self.started
    }

    /// Operations of `kind` initiated and completed so far.
    pub fn operation_counts(&self, kind: OperationKind) -> (u64, u64) {
        (
            self.initiated[kind.index()].load(Ordering::Relaxed),
            self.completed[kind.index()].load(Ordering::Relaxed),
        )
    }

    /// The open connections, oldest first.
    pub fn open_connection_records(&self) -> Vec<Arc<ConnectionRecord>> {
        self.connections().values().cloned().collect()
    }

    pub fn totals(&self) -> Totals {
        Totals {
            connections_accepted: self.connections_accepted.get(),
            bytes_sent: self.bytes_sent.get(),
            messages_sent: self.messages_sent.get(),
            entries_sent: self.entries_sent.get(),
        }
    }

    /// The Prometheus text exposition: every counter here, then the gauges of `state`.
    pub fn render_metrics(&self, state: &MonitorState) -> String {
        let mut text = String::with_capacity(8 * 1024);
        let mut gauges = Registry::with_prefix("lmdir");
        register_state_gauges(&mut gauges, self, state);
        // Writing to a String cannot fail.
        let _ = encode_registry(&mut text, &self.registry);
        let _ = encode_registry(&mut text, &gauges);
        let _ = encode_eof(&mut text);
        text
    }
}

/// Counter totals for cn=Monitor's statistics entries.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    pub connections_accepted: u64,
    pub bytes_sent: u64,
    pub messages_sent: u64,
    pub entries_sent: u64,
}

/// What the server is at the moment of a read (not counters): filled by the server from its
/// context and the store, so this module needs neither.
#[derive(Clone, Debug, Default)]
pub struct MonitorState {
    pub connections_current: u64,
    pub connections_max: u64,
    /// Tokio's worker threads, tasks alive, and tasks queued for a worker.
    pub threads_max: u64,
    pub tasks_alive: u64,
    pub tasks_queued: u64,
    pub database: Option<DatabaseState>,
    /// The live configuration file, when the server was started from one.
    pub config: Option<crate::config_identity::ConfigIdentity>,
}

#[derive(Clone, Debug, Default)]
pub struct DatabaseState {
    pub suffix: String,
    pub directory: String,
    pub usage: lmdir_store::EnvironmentUsage,
}

fn gauge(value: u64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    gauge
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

fn register_state_gauges(registry: &mut Registry, monitor: &Monitor, state: &MonitorState) {
    let connections = Family::<StateLabel, Gauge>::default();
    connections
        .get_or_create(&StateLabel { state: "open" })
        .set(state.connections_current as i64);
    connections
        .get_or_create(&StateLabel { state: "limit" })
        .set(state.connections_max as i64);
    registry.register("connections", "Client connections", connections);
    let uptime = unix_seconds(SystemTime::now()).saturating_sub(unix_seconds(monitor.started));
    registry.register("uptime_seconds", "Seconds since start", gauge(uptime));
    registry.register("tasks_alive", "Tokio tasks alive", gauge(state.tasks_alive));
    let Some(database) = &state.database else {
        return;
    };
    let usage = &database.usage;
    for (name, help, value) in [
        ("lmdb_map_size_bytes", "LMDB map size", usage.map_size_bytes),
        (
            "lmdb_page_size_bytes",
            "LMDB page size",
            usage.page_size_bytes,
        ),
        (
            "lmdb_pages_used",
            "LMDB pages up to the last written",
            usage.pages_used,
        ),
        (
            "lmdb_pages_free",
            "LMDB pages on the free list",
            usage.pages_free,
        ),
        ("lmdb_readers_max", "LMDB reader slots", usage.readers_max),
        (
            "lmdb_readers_used",
            "LMDB reader slots in use",
            usage.readers_used,
        ),
        ("entries", "Entries in the database", usage.entries),
    ] {
        registry.register(name, help, gauge(value));
    }
}

/// One cn=Monitor entry: its DN (as shown) and attributes.
#[derive(Clone, Debug)]
pub struct MonitorEntry {
    pub dn: String,
    pub attributes: Vec<(&'static str, Vec<Vec<u8>>)>,
}

/// `YYYYmmddHHMMSSZ`, as monitorTimestamp values are.
fn generalized_time(time: SystemTime) -> Vec<u8> {
    lmdir_store::timestamp_value(time)
}

impl MonitorEntry {
    fn new(dn: String, object_class: &'static str, cn: &str) -> MonitorEntry {
        MonitorEntry {
            dn,
            attributes: vec![
                ("objectClass", vec![object_class.as_bytes().to_vec()]),
                ("cn", vec![cn.as_bytes().to_vec()]),
            ],
        }
    }

    fn with(mut self, description: &'static str, value: impl ToString) -> MonitorEntry {
        self.attributes
            .push((description, vec![value.to_string().into_bytes()]));
        self
    }

    fn with_bytes(mut self, description: &'static str, value: Vec<u8>) -> MonitorEntry {
        self.attributes.push((description, vec![value]));
        self
    }
}

/// The DN of the monitor subtree's root.
pub const MONITOR_DN: &str = "cn=Monitor";

fn child(rdn: &str, parent: &str) -> String {
    format!("{rdn},{parent}")
}

/// The whole cn=Monitor subtree now, parents before children, in OpenLDAP's shape.
pub fn monitor_tree(monitor: &Monitor, state: &MonitorState) -> Vec<MonitorEntry> {
    let mut entries = vec![
        MonitorEntry::new(MONITOR_DN.to_string(), "monitorServer", "Monitor").with(
            "monitoredInfo",
            format!("lmdir {}", env!("CARGO_PKG_VERSION")),
        ),
    ];
    connection_entries(monitor, state, &mut entries);
    operation_entries(monitor, &mut entries);
    statistics_entries(monitor, &mut entries);
    thread_entries(state, &mut entries);
    time_entries(monitor, &mut entries);
    database_entries(state, &mut entries);
    if let Some(config) = &state.config {
        // Which configuration is live: the file's hash and when it was (re)loaded.
        entries.push(
            MonitorEntry::new(
                child("cn=Configuration", MONITOR_DN),
                "monitoredObject",
                "Configuration",
            )
            .with("monitoredInfo", config.describe())
            .with_bytes("monitorTimestamp", generalized_time(config.loaded_at)),
        );
    }
    if state.database.is_some() {
        replication_entries(monitor, &mut entries);
    }
    entries
}

fn counter_entry(parent: &str, cn: &str, value: u64) -> MonitorEntry {
    MonitorEntry::new(
        child(&format!("cn={cn}"), parent),
        "monitorCounterObject",
        cn,
    )
    .with("monitorCounter", value)
}

fn connection_entries(monitor: &Monitor, state: &MonitorState, entries: &mut Vec<MonitorEntry>) {
    let parent = child("cn=Connections", MONITOR_DN);
    entries.push(MonitorEntry::new(
        parent.clone(),
        "monitorContainer",
        "Connections",
    ));
    entries.push(counter_entry(
        &parent,
        "Max File Descriptors",
        state.connections_max,
    ));
    entries.push(counter_entry(
        &parent,
        "Total",
        monitor.totals().connections_accepted,
    ));
    entries.push(counter_entry(&parent, "Current", state.connections_current));
    for record in monitor.open_connection_records() {
        let cn = format!("Connection {}", record.number);
        let received = record.operations_received.load(Ordering::Relaxed);
        let completed = record.operations_completed.load(Ordering::Relaxed);
        let activity = SystemTime::UNIX_EPOCH
            + Duration::from_secs(record.last_activity_seconds.load(Ordering::Relaxed));
        entries.push(
            MonitorEntry::new(
                child(&format!("cn={cn}"), &parent),
                "monitorConnection",
                &cn,
            )
            .with("monitorConnectionNumber", record.number)
            .with("monitorConnectionProtocol", 3)
            .with("monitorConnectionOpsReceived", received)
            .with(
                "monitorConnectionOpsExecuting",
                received.saturating_sub(completed),
            )
            .with("monitorConnectionOpsPending", 0)
            .with("monitorConnectionOpsCompleted", completed)
            .with("monitorConnectionAuthzDN", record.authz_dn())
            .with("monitorConnectionListener", &record.listener)
            .with("monitorConnectionPeerAddress", &record.peer)
            .with_bytes(
                "monitorConnectionStartTime",
                generalized_time(record.started),
            )
            .with_bytes("monitorConnectionActivityTime", generalized_time(activity)),
        );
    }
}

fn operation_entries(monitor: &Monitor, entries: &mut Vec<MonitorEntry>) {
    let parent = child("cn=Operations", MONITOR_DN);
    let (mut initiated_all, mut completed_all) = (0, 0);
    let mut children = Vec::with_capacity(OPERATION_KIND_COUNT);
    for kind in OperationKind::ALL {
        let (initiated, completed) = monitor.operation_counts(kind);
        initiated_all += initiated;
        completed_all += completed;
        let cn = kind.monitor_name();
        children.push(
            MonitorEntry::new(child(&format!("cn={cn}"), &parent), "monitorOperation", cn)
                .with("monitorOpInitiated", initiated)
                .with("monitorOpCompleted", completed),
        );
    }
    entries.push(
        MonitorEntry::new(parent, "monitorOperation", "Operations")
            .with("monitorOpInitiated", initiated_all)
            .with("monitorOpCompleted", completed_all),
    );
    entries.extend(children);
}

fn statistics_entries(monitor: &Monitor, entries: &mut Vec<MonitorEntry>) {
    let parent = child("cn=Statistics", MONITOR_DN);
    let totals = monitor.totals();
    entries.push(MonitorEntry::new(
        parent.clone(),
        "monitorContainer",
        "Statistics",
    ));
    entries.push(counter_entry(&parent, "Bytes", totals.bytes_sent));
    entries.push(counter_entry(&parent, "PDU", totals.messages_sent));
    entries.push(counter_entry(&parent, "Entries", totals.entries_sent));
    entries.push(counter_entry(&parent, "Referrals", 0));
}

fn thread_entries(state: &MonitorState, entries: &mut Vec<MonitorEntry>) {
    let parent = child("cn=Threads", MONITOR_DN);
    entries.push(MonitorEntry::new(
        parent.clone(),
        "monitorContainer",
        "Threads",
    ));
    for (cn, value) in [
        ("Max", state.threads_max),
        ("Open", state.threads_max),
        ("Active", state.tasks_alive),
        ("Pending", state.tasks_queued),
    ] {
        entries.push(
            MonitorEntry::new(child(&format!("cn={cn}"), &parent), "monitoredObject", cn)
                .with("monitoredInfo", value),
        );
    }
}

fn time_entries(monitor: &Monitor, entries: &mut Vec<MonitorEntry>) {
    let parent = child("cn=Time", MONITOR_DN);
    let now = SystemTime::now();
    let uptime = unix_seconds(now).saturating_sub(unix_seconds(monitor.started));
    entries.push(MonitorEntry::new(
        parent.clone(),
        "monitorContainer",
        "Time",
    ));
    entries.push(
        MonitorEntry::new(child("cn=Start", &parent), "monitoredObject", "Start")
            .with_bytes("monitorTimestamp", generalized_time(monitor.started)),
    );
    entries.push(
        MonitorEntry::new(child("cn=Current", &parent), "monitoredObject", "Current")
            .with_bytes("monitorTimestamp", generalized_time(now)),
    );
    entries.push(
        MonitorEntry::new(child("cn=Uptime", &parent), "monitoredObject", "Uptime")
            .with("monitoredInfo", uptime),
    );
}

fn database_entries(state: &MonitorState, entries: &mut Vec<MonitorEntry>) {
    let parent = child("cn=Databases", MONITOR_DN);
    entries.push(MonitorEntry::new(
        parent.clone(),
        "monitorContainer",
        "Databases",
    ));
    let Some(database) = &state.database else {
        return;
    };
    let usage = &database.usage;
    let mut entry = MonitorEntry::new(
        child("cn=Database 1", &parent),
        "monitoredObject",
        "Database 1",
    )
    .with("monitoredInfo", "mdb")
    .with("namingContexts", &database.suffix)
    .with("olmDbDirectory", &database.directory)
    .with("olmMDBPagesMax", usage.pages_max())
    .with("olmMDBPagesUsed", usage.pages_used)
    .with("olmMDBPagesFree", usage.pages_free)
    .with("olmMDBReadersMax", usage.readers_max)
    .with("olmMDBReadersUsed", usage.readers_used)
    .with("olmMDBEntries", usage.entries);
    entry.attributes[0].1.push(b"olmMDBDatabase".to_vec());
    entries.push(entry);
}

/// The database entry that replication entries hang below (OpenLDAP puts each syncrepl
/// consumer under the database it writes to).
fn database_dn() -> String {
    child("cn=Database 1", &child("cn=Databases", MONITOR_DN))
}

/// One `olmSyncReplInstance` per consumer, as OpenLDAP 2.5's syncrepl shows it, with counter
/// children in back-monitor's shape; then the provider's running sync searches.
fn replication_entries(monitor: &Monitor, entries: &mut Vec<MonitorEntry>) {
    let database = database_dn();
    for status in monitor.replication.consumers() {
        consumer_entries(&status, &database, entries);
    }
    let parent = child("cn=Sync Searches", &database);
    entries.push(MonitorEntry::new(
        parent.clone(),
        "monitorContainer",
        "Sync Searches",
    ));
    for mode in ["refreshOnly", "refreshAndPersist"] {
        let running = monitor.replication.sync_searches(mode);
        entries.push(counter_entry(&parent, mode, running.max(0) as u64));
    }
}

fn consumer_entries(status: &ConsumerStatus, database: &str, entries: &mut Vec<MonitorEntry>) {
    let identity = &status.identity;
    let state = status.snapshot();
    let cn = format!("Consumer {:03}", identity.rid);
    let dn = child(&format!("cn={cn}"), database);
    let mut entry = MonitorEntry::new(dn.clone(), "olmSyncReplInstance", &cn)
        .with("monitoredInfo", identity.sync_type)
        .with("olmSRProviderURIList", &identity.provider)
        .with("olmSRSyncPhase", state.phase.monitor_name());
    let optional_text = [
        ("olmSRConnection", state.connection.into_bytes()),
        ("olmSRLastCookieRcvd", state.last_cookie_received),
        ("olmSRLastCookieSent", state.last_cookie_sent),
    ];
    for (name, value) in optional_text {
        if !value.is_empty() {
            entry = entry.with_bytes(name, value);
        }
    }
    let times = [
        ("olmSRNextConnect", state.next_connect),
        ("olmSRLastConnect", state.last_connect),
        ("olmSRLastContact", state.last_contact),
    ];
    for (name, time) in times {
        if let Some(time) = time {
            entry = entry.with_bytes(name, generalized_time(time));
        }
    }
    let csns: Vec<Vec<u8>> = state
        .committed
        .iter()
        .map(|csn| csn.to_string().into_bytes())
        .collect();
    if !csns.is_empty() {
        entry.attributes.push(("contextCSN", csns));
    }
    entries.push(entry);
    for (cn, value) in counter_rows(&status.counts()) {
        entries.push(counter_entry(&dn, cn, value));
    }
    if let Some(time) = state.last_sync {
        entries.push(
            MonitorEntry::new(child("cn=Last Sync", &dn), "monitoredObject", "Last Sync")
                .with_bytes("monitorTimestamp", generalized_time(time)),
        );
    }
    if let Some(time) = state.last_error_time {
        entries.push(
            MonitorEntry::new(child("cn=Last Error", &dn), "monitoredObject", "Last Error")
                .with("monitoredInfo", &state.last_error)
                .with_bytes("monitorTimestamp", generalized_time(time)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reach_both_views() {
        let monitor = Monitor::new();
        for _ in 0..3 {
            monitor.operation_initiated(OperationKind::Search);
            monitor.operation_completed(OperationKind::Search, 0, Duration::from_micros(80));
        }
        monitor.operation_initiated(OperationKind::Bind);
        monitor.operation_completed(OperationKind::Bind, 49, Duration::from_millis(2));
        monitor.bytes_sent(100);
        monitor.messages_sent(2, 1);
        let record = monitor.connection_opened(7, "IP=127.0.0.1:5000", "ldap://127.0.0.1:389");
        record.operation_received();
        record.set_authz_dn("cn=admin,dc=example,dc=com");

        let state = MonitorState {
            connections_current: 1,
            connections_max: 4096,
            ..MonitorState::default()
        };
        let tree = monitor_tree(&monitor, &state);
        let find = |dn: &str, attribute: &str| -> String {
            let entry = tree.iter().find(|entry| entry.dn == dn).expect(dn);
            let values = &entry
                .attributes
                .iter()
                .find(|(name, _)| *name == attribute)
                .expect(attribute)
                .1;
            String::from_utf8(values[0].clone()).unwrap()
        };
        assert_eq!(
            find("cn=Search,cn=Operations,cn=Monitor", "monitorOpCompleted"),
            "3"
        );
        assert_eq!(find("cn=Operations,cn=Monitor", "monitorOpInitiated"), "4");
        assert_eq!(
            find("cn=Bytes,cn=Statistics,cn=Monitor", "monitorCounter"),
            "100"
        );
        assert_eq!(
            find(
                "cn=Connection 7,cn=Connections,cn=Monitor",
                "monitorConnectionAuthzDN"
            ),
            "cn=admin,dc=example,dc=com"
        );
        // Parents come before children.
        for (index, entry) in tree.iter().enumerate() {
            if let Some((_, parent)) = entry.dn.split_once(',') {
                assert!(
                    tree[..index].iter().any(|earlier| earlier.dn == parent),
                    "{}",
                    entry.dn
                );
            }
        }

        let text = monitor.render_metrics(&state);
        assert!(
            text.contains("lmdir_operations_total{operation=\"search\",result=\"success\"} 3"),
            "{text}"
        );
        assert!(text.contains("lmdir_failed_binds_total 1"), "{text}");
        assert!(
            text.contains("lmdir_connections{state=\"open\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));

        monitor.connection_closed(7);
        assert!(monitor.open_connection_records().is_empty());
    }

    #[test]
    fn a_consumer_shows_as_openldap_shows_syncrepl_and_in_the_metrics() {
        use crate::replication_status::{ChangeCounts, ConsumerIdentity};
        let monitor = Monitor::new();
        let status = monitor.replication.register_consumer(ConsumerIdentity {
            rid: 7,
            provider: "ldap://provider:389".into(),
            search_base: "dc=example,dc=com".into(),
            sync_type: "refreshAndPersist",
        });
        status.searching("127.0.0.1:40000", None);
        let cookie = b"rid=007,csn=20250101000000.000000Z#000000#000#000000";
        status.contact(None, Some(cookie));
        let mut covered = lmdir_sync::ContextCsns::new();
        covered.merge(lmdir_sync::Csn::parse(&cookie[12..]).unwrap());
        let counts = ChangeCounts {
            adds: 2,
            renames: 1,
            kept: 4,
            ..ChangeCounts::default()
        };
        status.committed(counts, &covered);
        let running = monitor.replication.sync_search_started("refreshOnly");
        let state = MonitorState {
            database: Some(DatabaseState::default()),
            ..MonitorState::default()
        };
        let tree = monitor_tree(&monitor, &state);
        let consumer = "cn=Consumer 007,cn=Database 1,cn=Databases,cn=Monitor";
        let entry = tree
            .iter()
            .find(|entry| entry.dn == consumer)
            .expect(consumer);
        let value = |name: &str| {
            let (_, values) = entry
                .attributes
                .iter()
                .find(|(n, _)| *n == name)
                .expect(name);
            String::from_utf8(values[0].clone()).unwrap()
        };
        assert_eq!(value("objectClass"), "olmSyncReplInstance");
        assert_eq!(value("olmSRProviderURIList"), "ldap://provider:389");
        assert_eq!(value("olmSRSyncPhase"), "Refresh");
        assert_eq!(value("olmSRConnection"), "IP=127.0.0.1:40000");
        assert_eq!(value("olmSRLastCookieRcvd").as_bytes(), cookie);
        assert_eq!(value("contextCSN").as_bytes(), &cookie[12..]);
        let adds = tree
            .iter()
            .find(|entry| entry.dn == format!("cn=Adds,{consumer}"))
            .expect("the adds counter");
        assert_eq!(adds.attributes[2], ("monitorCounter", vec![b"2".to_vec()]));
        let kept = tree
            .iter()
            .find(|entry| entry.dn == format!("cn=Kept,{consumer}"))
            .expect("the kept counter");
        assert_eq!(kept.attributes[2], ("monitorCounter", vec![b"4".to_vec()]));
        let text = monitor.render_metrics(&state);
        for series in [
            "lmdir_replication_changes_applied_total{rid=\"7\",kind=\"add\"} 2",
            "lmdir_replication_changes_applied_total{rid=\"7\",kind=\"rename\"} 1",
            "lmdir_replication_changes_kept_total{rid=\"7\"} 4",
            "lmdir_replication_connected{rid=\"7\"} 1",
            "lmdir_replication_refreshes_total{rid=\"7\"} 1",
            "lmdir_sync_searches{mode=\"refreshOnly\"} 1",
        ] {
            assert!(text.contains(series), "{series} in {text}");
        }
        drop(running);
    }
}
