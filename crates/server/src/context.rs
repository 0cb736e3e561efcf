//! What an operation needs, with no connection types: the server's shared state (settings,
//! monitor, TLS, throttles) and its database (store, schema, access policy, per-identity limits,
//! the writer's queue). Every operation module builds on this one; nothing here imports them.

use crate::client_limits::{AddressConnections, BindThrottle};
use crate::controls::{self, RequestControls};
use crate::identity::Identity;
use crate::result::{code, OperationError};
use crate::session::Session;
use crate::settings::ServerSettings;
use crate::sink::ResultSink;
use crate::subject::{subject_for, StoreGroups};
use crate::writer::{Update, WriteJob, WriteRequest, Writer, WRITE_QUEUE_LENGTH_MAX};
use lmdir_access::acl::{AccessPolicy, Subject};
use lmdir_access::password;
use lmdir_schema::{AttrId, LdapError, Schema};
use lmdir_store::{ReadTxn, Store};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Instant;
use tokio::runtime::RuntimeFlavor;
use tokio::sync::{mpsc, oneshot, Notify};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("listen {address}: {message}")]
    Listen { address: String, message: String },
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("configuration: {0}")]
    Config(String),
    #[error("database: {0}")]
    Database(String),
}

/// State shared by every connection.
pub struct ServerContext {
    /// The settings of a server without a database (a reload replaces them). With a database
    /// `settings()` reads the database's `Running` instead, where a reload swaps them with the
    /// rules as one; this then keeps the settings the server started with, unused.
    pub(crate) settings_live: crate::live::Live<ServerSettings>,
    pub tls_config: Option<Arc<rustls::ServerConfig>>,
    /// What `tls_config` presents; [`ServerContext::reload_tls`] swaps it.
    pub(crate) tls_certificate: Option<Arc<crate::tls::ReloadableCertificate>>,
    pub database: Option<Database>,
    /// `settings.rootdn` normalized by the database's schema when the server started (None
    /// without a database or when it does not normalize): each simple bind compares its
    /// normalized DN with it instead of normalizing the rootdn again.
    pub(crate) rootdn_normalized: Option<String>,
    pub(crate) active_connections: AtomicUsize,
    pub(crate) connection_counter: AtomicU64,
    pub(crate) all_closed: Notify,
    pub(crate) refusals: Refusals,
    pub(crate) started: Instant,
    /// Open connections per client address (`connections_per_address_max`).
    pub(crate) address_connections: Arc<AddressConnections>,
    /// Failed-bind throttling per client (`bind_failure_*`).
    pub bind_throttle: BindThrottle,
    /// Where `metrics_listen` bound (its port resolved), once bound.
    pub(crate) metrics_address: std::sync::Mutex<Option<SocketAddr>>,
    /// Counters for cn=Monitor and the Prometheus endpoint (the database's, which its writer
    /// also reports to, when there is one).
    pub monitor: Arc<crate::monitor::Monitor>,
    /// Replication consumers running now (started at startup, changed by a reload).
    pub(crate) consumer_tasks: Mutex<crate::replication_status::ConsumerTasks>,
    /// Memory held by updates queued in open LDAP transactions, all connections together
    /// (`transaction_bytes_max`).
    pub(crate) transaction_bytes: Arc<crate::transaction_queue::QueuedBytes>,
    /// Admission of slow password verifications (`password_verify_memory_bytes_max`).
    pub(crate) verify_gate: crate::verify_gate::VerifyGate,
    /// What a bind to an entry that cannot authenticate verifies (`bind_decoy.rs`).
    pub(crate) bind_decoy: crate::bind_decoy::BindDecoy,
    /// The configuration file now live (set by `lmdir serve` and by each reload).
    pub(crate) config_identity: Mutex<Option<crate::config_identity::ConfigIdentity>>,
}

/// Connections refused over `connections_max` or `connections_per_address_max`. Under a flood, one warning a second sums them
/// up (instead of one line per connection), and at most `REFUSALS_IN_FLIGHT_MAX` notices are
/// being written at once; beyond that a refused socket is simply closed.
#[derive(Default)]
pub(crate) struct Refusals {
    pub(crate) not_yet_logged: AtomicU64,
    pub(crate) last_log_milliseconds: AtomicU64,
    pub(crate) in_flight: AtomicUsize,
}

/// Everything an operation task needs.
pub struct OperationContext {
    pub server: Arc<ServerContext>,
    /// The settings the operation runs with, taken once as it starts: a reload while it runs
    /// changes nothing in it (its limits, timeouts and policies stay one snapshot).
    pub settings: Arc<ServerSettings>,
    pub session: Session,
    pub message_id: i32,
    pub operation_id: u64,
    pub controls: Vec<controls::Control>,
    pub cancelled: Arc<AtomicBool>,
    /// Where the operation's messages go.
    pub sink: ResultSink,
}

impl From<LdapError> for OperationError {
    fn from(error: LdapError) -> Self {
        OperationError {
            code: error.code.code(),
            message: error.message,
            matched_dn: error.matched_dn.unwrap_or_default(),
            controls: Vec::new(),
            referral: Vec::new(),
            extended_value: None,
        }
    }
}

pub(crate) fn internal(error: impl std::fmt::Display) -> OperationError {
    OperationError::new(code::OTHER, error.to_string())
}

pub(crate) use crate::rules::{Rules, Running};

/// An open database: the store, its schema, the access policy and the writer thread.
pub struct Database {
    pub(crate) store: Store,
    /// The settings and rules now (a reload replaces them whole; see `Running`).
    pub(crate) live: Arc<crate::live::Live<Running>>,
    pub(crate) write_queue: Mutex<Option<mpsc::Sender<WriteJob>>>,
    /// Set when shutdown begins: no new update is queued and queued ones are answered
    /// unavailable (the writer's budget bounds the one it is applying).
    pub(crate) writes_stopping: Arc<AtomicBool>,
    pub(crate) writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The writer, shared by its thread and by leaders (see `submit`).
    pub(crate) writer: Arc<Mutex<Writer>>,
    pub(crate) user_password: Option<AttrId>,
    /// The group membership attributes (`member`, `uniqueMember`) and `pwdPolicySubentry`,
    /// resolved once: every search and bind needs them, and a schema extension keeps their IDs.
    pub(crate) member_attributes: Vec<AttrId>,
    pub(crate) pwd_policy_subentry: Option<AttrId>,
    /// Keys the tags of paged-results cookies (random per start: cookies die with the server).
    pub(crate) cookie_key: [u8; 32],
    /// The server's counters; the writer reports its batches here.
    pub(crate) monitor: Arc<crate::monitor::Monitor>,
    /// Password policy state updates waiting for the writer (one per entry).
    pub(crate) pending_states: Arc<crate::ppolicy::PendingStates>,
    /// The suffix shows its contextCSN only on a replicating server (a server ID, a provider or
    /// a consumer), as slapd shows it only with syncprov or syncrepl; set when the server starts.
    pub(crate) shows_context_csn: bool,
    /// Committed changes for refreshAndPersist searches (published by the writer).
    pub(crate) persist: Arc<crate::persist::PersistHub>,
    /// When a reload last extended the schema (cn=Subschema's modifyTimestamp; None: the
    /// schema is the one the server started with).
    pub(crate) schema_extended_at: Mutex<Option<std::time::SystemTime>>,
    /// `[accesslog]`, shared with the writer (set when the server starts and by a reload).
    pub(crate) accesslog: Arc<crate::live::Live<lmdir_config::AccesslogConfig>>,
    /// Sort key bytes the sorted searches running now hold (`sort_bytes_total_max`).
    pub(crate) sort_bytes_in_use: std::sync::atomic::AtomicUsize,
}

impl Database {
    /// Wraps an opened store; starts the writer thread.
    pub fn new(store: Store, policy: AccessPolicy) -> Database {
        let schema = store.schema().clone();
        let (sender, receiver) = mpsc::channel(WRITE_QUEUE_LENGTH_MAX);
        // The server's settings and rules replace these when it starts (`install`).
        let live = Arc::new(crate::live::Live::new(Running {
            settings: Arc::new(ServerSettings::with_defaults(Vec::new())),
            rules: Arc::new(Rules::with_policy(policy)),
        }));
        let writes_stopping = Arc::new(AtomicBool::new(false));
        let monitor = Arc::new(crate::monitor::Monitor::new());
        let pending_states = Arc::new(crate::ppolicy::PendingStates::default());
        let persist = Arc::new(crate::persist::PersistHub::default());
        let accesslog: Arc<crate::live::Live<lmdir_config::AccesslogConfig>> = Arc::default();
        let writer = Writer {
            accesslog: accesslog.clone(),
            persist: persist.clone(),
            pending_states: pending_states.clone(),
            store: store.clone(),
            rules: live.load().rules.clone(),
            live: live.clone(),
            stopping: writes_stopping.clone(),
            monitor: monitor.clone(),
        };
        let writer = Arc::new(Mutex::new(writer));
        let thread_writer = writer.clone();
        let writer_thread = std::thread::Builder::new()
            .name("lmdir-writer".to_string())
            .spawn(move || Writer::run(thread_writer, receiver))
            .expect("spawning the writer thread");
        Database {
            user_password: schema.attribute("userPassword"),
            member_attributes: ["member", "uniqueMember"]
                .iter()
                .filter_map(|name| schema.attribute(name))
                .collect(),
            pwd_policy_subentry: schema.attribute("pwdPolicySubentry"),
            store,
            live,
            writes_stopping,
            write_queue: Mutex::new(Some(sender)),
            writer_thread: Mutex::new(Some(writer_thread)),
            writer,
            cookie_key: rand::random(),
            monitor,
            shows_context_csn: false,
            pending_states,
            persist,
            schema_extended_at: Mutex::new(None),
            accesslog,
            sort_bytes_in_use: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The schema now: the store's, which a reload may extend (only additions: an `AttrId`
    /// an operation resolved keeps its meaning in any later schema).
    pub(crate) fn schema(&self) -> Arc<Schema> {
        self.store.schema()
    }

    /// What the dynamic group functions need of this database: its schema and rules now.
    pub(crate) fn dynlist_view(&self) -> crate::dynlist::DynlistView {
        let rules = self.running().rules.clone();
        crate::dynlist::DynlistView {
            schema: self.schema(),
            policy: rules.policy.clone(),
            groups: rules.dynlist.clone(),
        }
    }

    /// Warns, for each attribute `integrity` looks up without an equality index (`indexed`
    /// says which have one), that each delete, rename or unique check reads every entry.
    pub(crate) fn warn_unindexed(
        &self,
        integrity: &crate::integrity::Integrity,
        indexed: impl Fn(AttrId) -> bool,
    ) {
        for attr in integrity.looked_up_attributes() {
            if !indexed(attr) {
                tracing::warn!(
                    "[integrity] {} has no equality index: each delete, rename or unique check \
                     reads every entry for it (add it to [database.index])",
                    self.schema().attribute_type(attr).name()
                );
            }
        }
    }

    /// `[accesslog]`: whether and how long the writer keeps its audit trail.
    pub(crate) fn set_accesslog(&self, config: &lmdir_config::AccesslogConfig) {
        self.accesslog.store(Arc::new(config.clone()));
    }

    /// The accesslog configuration now.
    pub(crate) fn accesslog(&self) -> Arc<lmdir_config::AccesslogConfig> {
        self.accesslog.load()
    }

    /// Compiles the `[[limits]]` rules against this database's schema (a `who` DN it cannot
    /// normalize is a config error).
    pub(crate) fn set_replicating(&mut self, replication: &lmdir_config::ReplicationConfig) {
        self.shows_context_csn =
            replication.server_id != 0 || replication.provider || !replication.consumer.is_empty();
        if replication.provider {
            self.persist.enable();
        }
    }

    /// Compiles the rules `settings` names against this database's schema and makes them,
    /// with `settings`, what runs (when the server starts).
    pub(crate) fn install(&self, settings: &ServerSettings) -> Result<(), String> {
        let rules = Rules::compile(self.policy(), settings, &self.schema())?;
        self.warn_unindexed(&rules.integrity, |attr| {
            self.store
                .indexed_kinds(attr)
                .contains(lmdir_store::IndexKinds::EQUALITY)
        });
        self.live.store(Arc::new(Running {
            settings: Arc::new(settings.clone()),
            rules: Arc::new(rules),
        }));
        Ok(())
    }

    /// The settings and rules now (see `Running`).
    pub(crate) fn running(&self) -> Arc<Running> {
        self.live.load()
    }

    /// The effective search limits of a subject.
    pub(crate) fn limits_of(
        &self,
        settings: &ServerSettings,
        subject: &Subject<'_>,
    ) -> crate::limits::EffectiveLimits {
        self.running().rules.limits.resolve(settings, subject)
    }

    /// The access policy now: an operation takes it once and decides with it throughout.
    pub(crate) fn policy(&self) -> Arc<AccessPolicy> {
        self.running().rules.policy.clone()
    }

    /// The counters this database's writer reports to (the server shows them with its own).
    pub fn monitor(&self) -> &Arc<crate::monitor::Monitor> {
        &self.monitor
    }

    /// Opens the store and access policy described by a config file.
    pub fn open(config: &lmdir_config::Config) -> Result<Database, ServerError> {
        let schema = schema_from_config(config)?;
        let options = lmdir_store::StoreOptions::from_config(config);
        let store =
            Store::open(&config.database.directory, options, schema.clone()).map_err(|error| {
                ServerError::Database(format!("{}: {error}", config.database.directory.display()))
            })?;
        let policy = AccessPolicy::for_config(config, &schema)
            .map_err(|error| ServerError::Config(error.to_string()))?;
        Ok(Database::new(store, policy))
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// First step of shutdown: refuse new updates and answer queued ones unavailable, so
    /// connections waiting on the writer are answered within about one write budget.
    pub fn stop_writes(&self) {
        self.writes_stopping.store(true, Ordering::Release);
        // Persistent searches never end on their own: they end now, so connections close.
        self.persist.stop();
    }

    /// Stops the writer (after `stop_writes`, queued updates are answered, not applied).
    pub async fn close(&self) {
        self.stop_writes();
        let sender = self
            .write_queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        drop(sender);
        let thread = self
            .writer_thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    pub(crate) fn normalize_dn(&self, dn: &str) -> Result<String, OperationError> {
        self.schema()
            .normalize_dn_str(dn)
            .map_err(OperationError::from)
    }

    /// `normalize_dn` of an entry's DN under one of a few parents (a simple bind's): the same
    /// answer, the parent's RDNs from this thread's base cache (`bases.rs`).
    pub(crate) fn normalize_entry_dn(&self, dn: &str) -> Result<String, OperationError> {
        crate::bases::normalized_entry_dn(&self.schema(), dn).map_err(OperationError::from)
    }

    /// Hands `job` to the writer; its answer comes on `job.reply` after the commit.
    pub(crate) async fn submit(&self, job: WriteJob) -> Result<(), OperationError> {
        if self.writes_stopping.load(Ordering::Acquire) {
            return Err(OperationError::new(
                code::UNAVAILABLE,
                "server shutting down",
            ));
        }
        let sender = self
            .write_queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
            .ok_or_else(|| OperationError::new(code::UNAVAILABLE, "server shutting down"))?;
        let Some(job) = self.lead(job, &sender) else {
            return Ok(());
        };
        sender
            .send(job)
            .await
            .map_err(|_| OperationError::new(code::UNAVAILABLE, "writer stopped"))
    }

    /// Group commit with a leader: when the writer is idle and nothing waits in its queue, the
    /// job is applied and committed on this thread, answered before this returns (None). The
    /// hand-off to the writer thread and back costs two thread wake-ups, each ~0.3 ms on a VM
    /// whose other vCPU sat idle. Returns the job when the writer is busy: it queues, and the
    /// writer thread commits it with the others waiting (one commit for the group).
    ///
    /// A job that may block (an fsync, a map growth waiting for readers, a change of unbounded
    /// size) first hands the worker's other tasks to another thread (`block_in_place`: more
    /// wake-ups). A point change committed without fsync is bounded work and runs like any
    /// other task: at 1,000,000 members a member change then costs ~0.25 ms of CPU instead
    /// of ~0.4 and one context switch instead of five (docs/benchmarks.md, issue 22).
    fn lead(&self, job: WriteJob, queue: &mpsc::Sender<WriteJob>) -> Option<WriteJob> {
        let multi_thread = on_multi_thread_runtime();
        let queue_empty = || queue.capacity() == queue.max_capacity();
        if !multi_thread || !queue_empty() {
            return Some(job);
        }
        let mut writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Some(job),
        };
        // Queued while the lock was being taken: those go first, through the thread.
        if !queue_empty() {
            return Some(job);
        }
        // A map growth waits for every reader (up to MAP_GROWTH_WAIT): that one hands off too.
        let bounded = !self.store.options().sync
            && !self.store.map_growth_due()
            && job
                .update
                .request
                .is_point_change(&self.schema(), self.user_password);
        if bounded {
            writer.run_jobs(VecDeque::from([job]));
        } else {
            // The worker's other tasks move to another thread while this one writes.
            tokio::task::block_in_place(|| writer.run_jobs(VecDeque::from([job])));
        }
        None
    }
}

/// Whether this runs on a multi-thread tokio runtime (where `block_in_place` may hand the
/// worker's other tasks to another thread).
fn on_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Runs `work`, which may take long (a walk of the directory), on this thread after handing
/// the worker's other tasks to another one (`block_in_place`), on a multi-thread runtime; on
/// any other, or outside one, it just runs.
pub(crate) fn blocking_here<T>(work: impl FnOnce() -> T) -> T {
    if on_multi_thread_runtime() {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// DN equality for configured DNs (rootdn): schema normalization when a database is open,
/// otherwise case-insensitive with spaces around separators ignored.
pub fn same_dn(server: &ServerContext, left: &str, right: &str) -> bool {
    if let Some(database) = &server.database {
        if let (Ok(left), Ok(right)) = (database.normalize_dn(left), database.normalize_dn(right)) {
            return left == right;
        }
    }
    fn simple_normalize(dn: &str) -> String {
        dn.split(',')
            .map(|rdn| {
                rdn.split('=')
                    .map(|part| part.trim().to_lowercase())
                    .collect::<Vec<_>>()
                    .join("=")
            })
            .collect::<Vec<_>>()
            .join(",")
    }
    simple_normalize(left) == simple_normalize(right)
}

impl Database {
    /// Whether `identity` may read some entry at or below `base` (normalized): the rootdn,
    /// or a rule that may match there granting it read (`SubjectAccess::level_somewhere`, an
    /// upper bound of every entry's level). For the trees the server builds on request
    /// (cn=Monitor, cn=accesslog, the console's status page): decided before they are built.
    pub(crate) fn may_read_below(
        &self,
        identity: &Identity,
        base: &str,
    ) -> Result<bool, OperationError> {
        if identity.is_rootdn {
            return Ok(true);
        }
        let read = self.store.read().map_err(internal)?;
        let groups = self.groups(&read);
        let subject = self.subject(identity, &groups);
        let policy = self.policy();
        let level = policy
            .for_subject_within(&subject, base)
            .level_somewhere(lmdir_access::acl::TargetPart::Entry);
        Ok(level.implies(lmdir_access::acl::Access::Read))
    }

    pub(crate) fn groups<'txn>(&'txn self, read: &'txn ReadTxn) -> StoreGroups<'txn> {
        StoreGroups {
            read,
            member_attributes: &self.member_attributes,
        }
    }

    pub(crate) fn subject<'a>(
        &self,
        identity: &'a Identity,
        groups: &'a StoreGroups<'a>,
    ) -> Subject<'a> {
        subject_for(&self.policy(), identity, groups)
    }
}

pub(crate) fn database_of(server: &ServerContext) -> Option<&Database> {
    server.database.as_ref()
}

/// The normalized form of a bound DN (for access control and identity comparisons).
pub fn normalized_identity_dn(server: &ServerContext, dn: &str) -> String {
    if let Some(database) = database_of(server) {
        if let Ok(normalized) = database.normalize_dn(dn) {
            return normalized;
        }
    }
    dn.to_lowercase()
}

/// The built-in schema plus the config's extra `.schema` files, in order.
/// Its loading notes are logged here, on every path that loads a schema (serve, load, check,
/// reindex): an override of a built-in definition changes what entries are valid and how
/// values match, so the operator must see it.
pub fn schema_from_config(config: &lmdir_config::Config) -> Result<Arc<Schema>, ServerError> {
    let mut schema = Schema::builtin();
    for path in &config.database.schema_files {
        schema
            .load_schema_file(path)
            .map_err(|error| ServerError::Database(error.to_string()))?;
    }
    log_schema_notes(&schema);
    Ok(Arc::new(schema))
}

/// Logs the schema's loading notes, each once per process: `lmdir serve` loads the schema for
/// its startup checks and again for the server, and the operator needs each note once. Repeats
/// of a definition with the same meaning are one summary line.
fn log_schema_notes(schema: &Schema) {
    static LOGGED: std::sync::Mutex<Option<std::collections::HashSet<String>>> =
        std::sync::Mutex::new(None);
    let mut logged = LOGGED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let logged = logged.get_or_insert_with(Default::default);
    for note in schema.warnings() {
        if logged.insert(note.clone()) {
            tracing::warn!("schema: {note}");
        }
    }
    let repeated = schema.repeated_definitions();
    if repeated > 0 && logged.insert(format!("repeated {repeated}")) {
        tracing::info!(
            "schema: {repeated} definitions in schema_files repeat built-in or earlier ones \
             with the same meaning (kept once)"
        );
    }
}

pub(crate) fn no_such_object(dn: &str) -> OperationError {
    OperationError::new(
        code::NO_SUCH_OBJECT,
        format!("'{dn}' is not within any naming context of this server"),
    )
}

pub(crate) fn require_secure_write(context: &OperationContext) -> Result<(), OperationError> {
    if let Some(provider) = &context.settings.update_referral {
        // A read-only replica (OpenLDAP's updateref): every client write, the rootdn's too,
        // belongs on the provider; a local write would be overwritten or diverge.
        return Err(OperationError::referral(
            provider,
            "this server is a read-only replica: write to its provider",
        ));
    }
    if context.settings.require_tls && !context.session.is_secure() {
        return Err(OperationError::new(
            code::CONFIDENTIALITY_REQUIRED,
            "TLS is required before updates",
        ));
    }
    Ok(())
}

/// The scheme cleartext passwords are hashed with (validated by the config).
pub(crate) fn password_scheme(server: &ServerContext) -> Result<password::Scheme, OperationError> {
    let name = &server.settings().password_hash;
    password::Scheme::from_name(name).ok_or_else(|| {
        OperationError::new(
            code::OTHER,
            format!("password_hash scheme {name} is unknown"),
        )
    })
}

/// The update a request asks for, with the limits it runs under: what the writer decides and
/// applies (inside its transaction), whether it is sent now or queued in an LDAP transaction.
pub(crate) fn update_of(
    context: &OperationContext,
    controls: &RequestControls,
    request: WriteRequest,
) -> Result<Update, OperationError> {
    let assertion = controls
        .assertion
        .as_ref()
        .map(|assertion| crate::filter::client_filter(&context.settings, assertion))
        .transpose()?;
    let identity = context.session.identity.clone();
    let settings = &context.settings;
    Ok(Update {
        request,
        relax: controls.relax && identity.is_rootdn,
        permissive_modify: controls.permissive_modify,
        manage_dsa_it: controls.manage_dsa_it,
        identity,
        assertion,
        budget: settings.write_budget,
        attribute_descriptions_per_entry_max: settings.attribute_descriptions_per_entry_max,
        password_scheme: password_scheme(&context.server)?,
        hash_cleartext: settings.password_hash_cleartext,
        password_policy_default: settings.password_policy_default.clone(),
        session: context.session.connection_id,
        received: std::time::SystemTime::now(),
        read_images: None,
    })
}

/// Queues an update for the writer and waits for its answer (sent after the commit).
pub(crate) async fn submit(database: &Database, update: Update) -> Result<(), OperationError> {
    let (reply, response) = oneshot::channel();
    database.submit(WriteJob { update, reply }).await?;
    match response.await {
        Ok(result) => result.map_err(OperationError::from),
        Err(_) => Err(OperationError::new(code::OTHER, "writer failed")),
    }
}

/// Queues an update for the writer, which decides access and the assertion inside its
/// transaction, and waits for its answer (sent after the commit).
pub(crate) async fn submit_update(
    context: &OperationContext,
    database: &Database,
    controls: &RequestControls,
    request: WriteRequest,
) -> Result<(), OperationError> {
    submit(database, update_of(context, controls, request)?).await
}
