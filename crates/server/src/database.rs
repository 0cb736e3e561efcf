//! The directory data behind the server, over lmdir-store: search (each in its own read txn on
//! a blocking thread), compare, binds against userPassword, access control via lmdir-access, and
//! updates through one writer thread that group-commits concurrent writes.

use crate::ber::{EntryWriter, ResponseControl};
use crate::connection::Identity;
use crate::controls::RequestControls;
use crate::operations::{OperationContext, Outgoing, SearchDone};
use crate::ppolicy::{
    self, AccountState, Policy, PolicyError, PolicyResponse, Slot, StateUpdate, Verdict,
};
use crate::result::{code, OperationError};
use crate::selection::AttributeSelection;
use crate::server::{ServerContext, ServerError};
use crate::writer::{PolicyState, WriteJob, WriteRequest, Writer, WRITE_QUEUE_LENGTH_MAX};
use bytes::BytesMut;
use ldap3_proto::proto::{
    LdapAddRequest, LdapCompareRequest, LdapExtendedRequest, LdapModifyDNRequest,
    LdapModifyRequest, LdapModifyType, LdapPasswordModifyRequest, LdapSearchRequest,
    LdapSearchScope,
};
use lmdir_access::acl::{AccessPolicy, EntryAccess, Subject};
use lmdir_access::password;
use lmdir_schema::{
    AttrId, Dn, Entry, Filter, LdapError, ModOp, Modification, OwnedEntryView, Schema,
};
use lmdir_store::{ReadTxn, Scope, SearchSpec, Store};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

mod monitor_search;
mod search;
use search::{check_read_assertion, disclosed_entry};
pub use search::{search, search_is_small_for};

/// Search output is handed to the connection in chunks of about this size. Each hand-off wakes
/// two threads; on a loaded machine fewer, larger ones preempt the reading client less (a full
/// scan through ldapsearch measured faster with 256 KiB than with 64 KiB).
const SEARCH_CHUNK_BYTES: usize = 256 * 1024;

impl From<LdapError> for OperationError {
    fn from(error: LdapError) -> Self {
        OperationError {
            code: error.code.code(),
            message: error.message,
            matched_dn: error.matched_dn.unwrap_or_default(),
            controls: Vec::new(),
        }
    }
}

fn internal(error: impl std::fmt::Display) -> OperationError {
    OperationError::new(code::OTHER, error.to_string())
}

/// An open database: the store, its schema, the access policy and the writer thread.
pub struct Database {
    store: Store,
    schema: Arc<Schema>,
    policy: Arc<AccessPolicy>,
    write_queue: Mutex<Option<mpsc::Sender<WriteJob>>>,
    /// Set when shutdown begins: no new update is queued and queued ones are answered
    /// unavailable (the writer's budget bounds the one it is applying).
    writes_stopping: Arc<AtomicBool>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    user_password: Option<AttrId>,
    /// Keys the tags of paged-results cookies (random per start: cookies die with the server).
    cookie_key: [u8; 32],
    /// The server's counters; the writer reports its batches here.
    monitor: Arc<crate::monitor::Monitor>,
    /// Search limits per identity (`[[limits]]`), set when the server starts.
    limits: crate::limits::IdentityLimits,
    /// Password policy state updates waiting for the writer (one per entry).
    pending_states: Arc<ppolicy::PendingStates>,
}

impl Database {
    /// Wraps an opened store; starts the writer thread.
    pub fn new(store: Store, policy: AccessPolicy) -> Database {
        let schema = store.schema().clone();
        let (sender, receiver) = mpsc::channel(WRITE_QUEUE_LENGTH_MAX);
        let policy = Arc::new(policy);
        let writes_stopping = Arc::new(AtomicBool::new(false));
        let monitor = Arc::new(crate::monitor::Monitor::new());
        let pending_states = Arc::new(ppolicy::PendingStates::default());
        let writer = Writer {
            pending_states: pending_states.clone(),
            store: store.clone(),
            policy: policy.clone(),
            stopping: writes_stopping.clone(),
            monitor: monitor.clone(),
        };
        let writer_thread = std::thread::Builder::new()
            .name("lmdir-writer".to_string())
            .spawn(move || writer.run(receiver))
            .expect("spawning the writer thread");
        Database {
            user_password: schema.attribute("userPassword"),
            store,
            schema,
            policy,
            writes_stopping,
            write_queue: Mutex::new(Some(sender)),
            writer_thread: Mutex::new(Some(writer_thread)),
            cookie_key: rand::random(),
            monitor,
            limits: crate::limits::IdentityLimits::default(),
            pending_states,
        }
    }

    /// Compiles the `[[limits]]` rules against this database's schema (a `who` DN it cannot
    /// normalize is a config error).
    pub(crate) fn set_limits(&mut self, rules: &[lmdir_config::LimitsRule]) -> Result<(), String> {
        self.limits = crate::limits::IdentityLimits::compile(rules, &self.schema)?;
        Ok(())
    }

    /// The effective search limits of a subject.
    pub(crate) fn limits_of(
        &self,
        settings: &crate::settings::ServerSettings,
        subject: &Subject<'_>,
    ) -> crate::limits::EffectiveLimits {
        self.limits.resolve(settings, subject)
    }

    /// The counters this database's writer reports to (the server shows them with its own).
    pub fn monitor(&self) -> &Arc<crate::monitor::Monitor> {
        &self.monitor
    }

    /// Opens the store and access policy described by a config file.
    pub fn open(config: &lmdir_config::Config) -> Result<Database, ServerError> {
        let schema = schema_from_config(config)?;
        let options = store_options_from_config(config);
        let store =
            Store::open(&config.database.directory, options, schema.clone()).map_err(|error| {
                ServerError::Database(format!("{}: {error}", config.database.directory.display()))
            })?;
        let policy = AccessPolicy::from_config(
            &config.access,
            &schema,
            &config.database.suffix,
            &config.database.rootdn,
        )
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

    fn normalize_dn(&self, dn: &str) -> Result<String, OperationError> {
        self.schema
            .normalize_dn_str(dn)
            .map_err(OperationError::from)
    }

    async fn submit(&self, job: WriteJob) -> Result<(), OperationError> {
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
        sender
            .send(job)
            .await
            .map_err(|_| OperationError::new(code::UNAVAILABLE, "writer stopped"))
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

/// Checks a presented password against a stored value: cleartext or any `{SCHEME}` that
/// lmdir-access verifies (constant-time compares).
pub fn password_matches(stored: &[u8], presented: &[u8]) -> bool {
    lmdir_access::password::verify(stored, presented)
}

/// Whether `presented` matches any of `stored` (already bounded by the caller). Fast schemes
/// take microseconds and are checked on this task; if any value uses a deliberately slow scheme
/// (PBKDF2, Argon2, crypt) all are checked on the blocking pool, so a bind never stalls the
/// reactor, whether it is the rootdn's `rootpw` or an entry's `userPassword`.
pub async fn any_password_matches(
    stored: Vec<Vec<u8>>,
    presented: &[u8],
) -> Result<bool, OperationError> {
    let slow = stored
        .iter()
        .any(|value| lmdir_access::password::scheme_of(value).is_ok_and(|scheme| scheme.is_slow()));
    let presented = presented.to_vec();
    let verify = move || {
        stored
            .iter()
            .any(|value| password_matches(value, &presented))
    };
    if slow {
        tokio::task::spawn_blocking(verify).await.map_err(internal)
    } else {
        Ok(verify())
    }
}

/// Group membership over the store: `member` / `uniqueMember` of the group entry, read in the
/// operation's own read transaction.
struct StoreGroups<'txn> {
    read: &'txn ReadTxn,
    member_attributes: Vec<AttrId>,
}

impl lmdir_access::acl::GroupMembership for StoreGroups<'_> {
    fn is_member(&self, group_ndn: &str, member_ndn: &str) -> bool {
        let Ok(id) = self.read.dn_to_id(group_ndn) else {
            return false;
        };
        let Ok(Some(group)) = self.read.entry(id) else {
            return false;
        };
        self.member_attributes.iter().any(|attr| {
            group
                .values_of(*attr)
                .iter()
                .any(|(_, normalized)| names_member(normalized, member_ndn))
        })
    }
}

/// Whether a normalized member / uniqueMember value names `member_ndn` (uniqueMember may
/// carry `#uid` after the DN).
pub(crate) fn names_member(normalized: &[u8], member_ndn: &str) -> bool {
    normalized == member_ndn.as_bytes()
        || normalized.starts_with(member_ndn.as_bytes())
            && normalized.get(member_ndn.len()) == Some(&b'#')
}

/// The access-control subject of a connection's identity.
pub(crate) fn subject_for<'a>(
    policy: &AccessPolicy,
    identity: &'a Identity,
    groups: &'a dyn lmdir_access::acl::GroupMembership,
) -> Subject<'a> {
    let bound = (!identity.normalized_dn.is_empty()).then_some(identity.normalized_dn.as_str());
    let mut subject = policy.subject(bound, groups);
    subject.is_rootdn |= identity.is_rootdn;
    subject
}

impl Database {
    fn groups<'txn>(&self, read: &'txn ReadTxn) -> StoreGroups<'txn> {
        StoreGroups {
            read,
            member_attributes: ["member", "uniqueMember"]
                .iter()
                .filter_map(|name| self.schema.attribute(name))
                .collect(),
        }
    }

    fn subject<'a>(&self, identity: &'a Identity, groups: &'a StoreGroups<'a>) -> Subject<'a> {
        subject_for(&self.policy, identity, groups)
    }
}

fn database_of(server: &ServerContext) -> Option<&Database> {
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
    for note in schema.warnings() {
        tracing::warn!("schema: {note}");
    }
    Ok(Arc::new(schema))
}

/// The store options a config describes (every command opens the store through this).
pub fn store_options_from_config(config: &lmdir_config::Config) -> lmdir_store::StoreOptions {
    let indexes = config
        .database
        .index
        .iter()
        .map(|(attribute, kinds)| {
            let kinds = kinds
                .iter()
                .map(|kind| match kind {
                    lmdir_config::IndexKind::Eq => lmdir_store::IndexKind::Equality,
                    lmdir_config::IndexKind::Presence => lmdir_store::IndexKind::Presence,
                    lmdir_config::IndexKind::Substring => lmdir_store::IndexKind::Substring,
                    lmdir_config::IndexKind::Ordered => lmdir_store::IndexKind::Ordered,
                    // Approximate matching is equality on normalized values (lmdir-schema):
                    // the equality index serves it.
                    lmdir_config::IndexKind::Approx => lmdir_store::IndexKind::Equality,
                })
                .collect();
            (attribute.clone(), kinds)
        })
        .collect();
    lmdir_store::StoreOptions {
        suffix: config.database.suffix.clone(),
        indexes,
        sync: config.database.sync,
        memberof: config.database.memberof,
        ..lmdir_store::StoreOptions::default()
    }
}

fn no_such_object(dn: &str) -> OperationError {
    OperationError::new(
        code::NO_SUCH_OBJECT,
        format!("'{dn}' is not within any naming context of this server"),
    )
}

fn require_secure_write(context: &OperationContext) -> Result<(), OperationError> {
    if context.server.settings.require_tls && !context.session.is_secure() {
        return Err(OperationError::new(
            code::CONFIDENTIALITY_REQUIRED,
            "TLS is required before updates",
        ));
    }
    Ok(())
}

/// The identity `dn` binds as with `password` against its entry's userPassword, under the
/// entry's password policy when one applies: a locked account and an expired password answer
/// invalidCredentials, failures are recorded, and `response` says what the policy control
/// tells the client.
pub async fn bind_entry(
    server: &Arc<ServerContext>,
    dn: &str,
    password: &[u8],
    response: &mut Option<PolicyResponse>,
) -> Result<Identity, OperationError> {
    let Some(database) = database_of(server) else {
        return Err(OperationError::new(code::INVALID_CREDENTIALS, ""));
    };
    let invalid = || OperationError::new(code::INVALID_CREDENTIALS, "");
    // Finding the entry and its stored passwords takes microseconds: done on this task.
    let normalized_dn = database.normalize_dn(dn).map_err(|_| invalid())?;
    let (stored_passwords, policed) = database
        .bind_candidate(server, dn, &normalized_dn)?
        .ok_or_else(invalid)?;
    let now_time = std::time::SystemTime::now();
    let now = ppolicy::unix_seconds(now_time);
    if policed.is_some() {
        // As slapd: a bind under a policy answers the request control even with nothing to
        // say (an empty response), whatever the outcome.
        *response = Some(PolicyResponse::default());
    }
    if let Some((policy, state)) = &policed {
        if state.is_locked(policy, now) {
            *response = Some(PolicyResponse {
                warning: None,
                error: Some(PolicyError::AccountLocked),
            });
            return Err(invalid());
        }
    }
    let matched = any_password_matches(stored_passwords, password).await?;
    let identity = Identity {
        dn: dn.to_string(),
        normalized_dn: normalized_dn.clone(),
        is_rootdn: database.policy.is_rootdn(&normalized_dn),
    };
    let Some((policy, state)) = policed else {
        return if matched {
            Ok(identity)
        } else {
            Err(invalid())
        };
    };
    if !matched {
        database
            .record_failure(server, &normalized_dn, policy, now_time)
            .await;
        return Err(invalid());
    }
    match ppolicy::verdict(&policy, &state, now) {
        Verdict::Expired => {
            *response = Some(PolicyResponse {
                warning: None,
                error: Some(PolicyError::PasswordExpired),
            });
            Err(invalid())
        }
        Verdict::Bound {
            response: said,
            grace_login,
        } => {
            *response = Some(said);
            // A plain success writes nothing: only state to clear or a grace login to count.
            if grace_login || !state.failures.is_empty() || state.locked_at.is_some() {
                let update = StateUpdate {
                    dn: normalized_dn,
                    policy,
                    failures: Vec::new(),
                    success: true,
                    grace_use_at: grace_login.then_some(now_time),
                };
                database
                    .write_policy_state(server, PolicyState::Taken(Some(update)))
                    .await;
            }
            Ok(identity)
        }
    }
}

/// Checks a password change against the target's policy (`ppolicy::change_refusal`, then
/// pwdInHistory), as OpenLDAP's ppolicy does for modify and Password Modify; the refusal's
/// control error goes out when the request control came. The rootdn is exempt, as slapd
/// exempts password administrators. Read before the writer: a policy or entry changed
/// meanwhile only moves the check by one update.
async fn check_password_change(
    context: &OperationContext,
    database: &Database,
    controls: &RequestControls,
    dn: &str,
    change: &ppolicy::PasswordChange<'_>,
) -> Result<(), OperationError> {
    let refusal = match judge_password_change(context, database, dn, change)? {
        None => None,
        Some(Judged::Refused(refusal)) => Some(refusal),
        Some(Judged::CheckHistory { current, history }) => {
            history_refusal(change, current, history).await?
        }
    };
    let Some((result_code, text, failure)) = refusal else {
        return Ok(());
    };
    let mut error = OperationError::new(result_code, text);
    if controls.password_policy {
        let response = PolicyResponse {
            warning: None,
            error: Some(failure),
        };
        error = error.with_control(response.control());
    }
    Err(error)
}

/// What the read transaction says of a password change.
enum Judged {
    Refused(ppolicy::Refusal),
    /// pwdInHistory applies: the new passwords must match none of these (bounded) values.
    CheckHistory {
        current: Vec<Vec<u8>>,
        history: Vec<Vec<u8>>,
    },
}

fn judge_password_change(
    context: &OperationContext,
    database: &Database,
    dn: &str,
    change: &ppolicy::PasswordChange<'_>,
) -> Result<Option<Judged>, OperationError> {
    if context.session.identity.is_rootdn {
        return Ok(None);
    }
    let Ok(normalized) = database.normalize_dn(dn) else {
        return Ok(None);
    };
    let read = database.store.read().map_err(internal)?;
    let Ok(id) = read.dn_to_id(&normalized) else {
        return Ok(None);
    };
    let Some(entry) = read.entry(id).map_err(OperationError::from)? else {
        return Ok(None);
    };
    let Some(policy) = database.policy_of(&context.server, &read, &entry) else {
        return Ok(None);
    };
    let state = database.account_state(&entry);
    let now = ppolicy::unix_seconds(std::time::SystemTime::now());
    if let Some(refusal) = ppolicy::change_refusal(&policy, &state, change, now) {
        return Ok(Some(Judged::Refused(refusal)));
    }
    if policy.in_history == 0 {
        return Ok(None);
    }
    let values = |name: &str| -> Vec<Vec<u8>> {
        database
            .schema
            .attribute(name)
            .map_or_else(Vec::new, |attr| {
                entry
                    .values_of(attr)
                    .iter()
                    .map(|(value, _)| value.to_vec())
                    .collect()
            })
    };
    let bound = context.server.settings.bind_password_values_max;
    let current = values("userPassword").into_iter().take(bound).collect();
    let mut stored_history = values("pwdHistory");
    // Values start with their generalized time: byte order is time order.
    stored_history.sort();
    let mut history: Vec<Vec<u8>> = stored_history
        .iter()
        .filter_map(|value| ppolicy::history_password(value).map(<[u8]>::to_vec))
        .collect();
    // The most recent pwdInHistory values (stored in time order; at most PASSWORD_HISTORY_MAX).
    let excess = history.len().saturating_sub(policy.in_history);
    history.drain(..excess);
    Ok(Some(Judged::CheckHistory { current, history }))
}

/// pwdInHistory: a new cleartext password equal to the current one or to one in the history
/// is refused (19, passwordInHistory), with slapd's texts. Hashed new values cannot be compared.
async fn history_refusal(
    change: &ppolicy::PasswordChange<'_>,
    current: Vec<Vec<u8>>,
    history: Vec<Vec<u8>>,
) -> Result<Option<ppolicy::Refusal>, OperationError> {
    for new in &change.new_passwords {
        if password::is_hashed(new) {
            continue;
        }
        if any_password_matches(current.clone(), new).await? {
            return Ok(Some((
                code::CONSTRAINT_VIOLATION,
                "Password is not being changed from existing value",
                PolicyError::PasswordInHistory,
            )));
        }
        if any_password_matches(history.clone(), new).await? {
            return Ok(Some((
                code::CONSTRAINT_VIOLATION,
                "Password is in history of old passwords",
                PolicyError::PasswordInHistory,
            )));
        }
    }
    Ok(None)
}

/// A bind's stored passwords (bounded) and, when a policy applies, the policy and the
/// account's state; None when the entry cannot be bound to.
type BindCandidate = (Vec<Vec<u8>>, Option<(Policy, AccountState)>);

impl Database {
    fn account_state(&self, entry: &lmdir_store::EntryRef<'_>) -> AccountState {
        AccountState::read(&self.schema, |attr| {
            entry
                .values_of(attr)
                .iter()
                .map(|(value, _)| value.to_vec())
                .collect()
        })
    }

    fn is_user_password(&self, description: &str) -> bool {
        self.schema
            .parse_description(description)
            .is_ok_and(|parsed| Some(parsed.attr) == self.user_password)
    }

    /// Whether `description` names an operational attribute type.
    fn is_operational(&self, description: &str) -> bool {
        self.schema
            .parse_description(description)
            .is_ok_and(|parsed| self.schema.attribute_type(parsed.attr).is_operational())
    }

    fn bind_candidate(
        &self,
        server: &ServerContext,
        dn: &str,
        normalized_dn: &str,
    ) -> Result<Option<BindCandidate>, OperationError> {
        let read = self.store.read().map_err(internal)?;
        let Ok(id) = read.dn_to_id(normalized_dn) else {
            return Ok(None);
        };
        let Some(entry) = read.entry(id).map_err(OperationError::from)? else {
            return Ok(None);
        };
        let Some(password_attribute) = self.user_password else {
            return Ok(None);
        };
        let groups = self.groups(&read);
        let anonymous = Identity::default();
        let subject = self.subject(&anonymous, &groups);
        let access = self.policy.for_entry(&subject, normalized_dn, &entry);
        if !access.can_authenticate_with(password_attribute) {
            return Ok(None);
        }
        let values = entry.values_of(password_attribute);
        // Values planted by whoever may write userPassword must not make each bind hash
        // without bound: only the first `bind_password_values_max` count.
        let values_max = server.settings.bind_password_values_max;
        if values.len() > values_max {
            tracing::warn!(
                "bind dn=\"{}\": {} userPassword values, only the first {values_max} are checked",
                crate::log_text::escaped(dn),
                values.len()
            );
        }
        let stored = values
            .iter()
            .take(values_max)
            .map(|(stored, _)| stored.to_vec())
            .collect();
        let policed = self
            .policy_of(server, &read, &entry)
            .map(|policy| (policy, self.account_state(&entry)));
        Ok(Some((stored, policed)))
    }

    /// The password policy of `entry`: its pwdPolicySubentry when that names a pwdPolicy
    /// entry, else the configured default; None when neither does (one point read each, no
    /// cache: a changed policy entry applies at the next bind). A pwdPolicySubentry naming
    /// some other entry does not turn the policy off: the default still applies.
    fn policy_of(
        &self,
        server: &ServerContext,
        read: &ReadTxn,
        entry: &lmdir_store::EntryRef<'_>,
    ) -> Option<Policy> {
        let own = self
            .schema
            .attribute("pwdPolicySubentry")
            .and_then(|attr| {
                entry
                    .values_of(attr)
                    .first()
                    .map(|(value, _)| value.to_vec())
            })
            .and_then(|value| String::from_utf8(value).ok());
        Policy::resolve(own, &server.settings.password_policy_default, |dn| {
            let id = read.dn_to_id(&self.normalize_dn(dn).ok()?).ok()?;
            let policy_entry = read.entry(id).ok()??;
            Policy::of_entry(&self.schema, |attr| {
                policy_entry
                    .values_of(attr)
                    .iter()
                    .map(|(value, _)| value.to_vec())
                    .collect()
            })
        })
    }

    /// Records a failed bind: merged into the entry's pending update when there is one, else
    /// queued as a new one; returns once the commit that holds it is done.
    async fn record_failure(
        &self,
        server: &ServerContext,
        dn: &str,
        policy: Policy,
        now: std::time::SystemTime,
    ) {
        match self.pending_states.fail(dn, policy, now) {
            Slot::Merged(mut done) => {
                let _ = done.wait_for(|committed| *committed).await;
            }
            Slot::Submit(done) => {
                let _guard = ppolicy::SlotGuard {
                    pending: &self.pending_states,
                    dn: dn.to_string(),
                    done,
                };
                self.write_policy_state(server, PolicyState::Pending(dn.to_string()))
                    .await;
            }
            Slot::Unshared => {
                let update = StateUpdate::failure(dn, policy, now);
                self.write_policy_state(server, PolicyState::Taken(Some(update)))
                    .await;
            }
        }
    }

    /// Queues a policy state update and waits for its commit; a failure is logged (the bind's
    /// answer does not depend on it).
    async fn write_policy_state(&self, server: &ServerContext, state: PolicyState) {
        let settings = &server.settings;
        let (reply, response) = oneshot::channel();
        let job = WriteJob {
            request: WriteRequest::PolicyState(state),
            identity: Identity::default(),
            assertion: None,
            relax: false,
            budget: settings.write_budget,
            attribute_descriptions_per_entry_max: settings.attribute_descriptions_per_entry_max,
            password_scheme: password::Scheme::Ssha,
            password_policy_default: settings.password_policy_default.clone(),
            reply,
        };
        let outcome = match self.submit(job).await {
            Ok(()) => response.await.unwrap_or_else(|_| {
                Err(lmdir_schema::LdapError::new(
                    lmdir_schema::ResultCode::Other,
                    "writer failed",
                ))
            }),
            Err(error) => Err(lmdir_schema::LdapError::new(
                lmdir_schema::ResultCode::Other,
                error.message,
            )),
        };
        if let Err(error) = outcome {
            tracing::warn!("password policy state not recorded: {error}");
        }
    }
}

/// Resolved attribute selection against the schema.
struct Selection {
    all_user: bool,
    all_operational: bool,
    /// Requested attribute types (with subtypes) → the option sets asked for; an empty set
    /// asks for every description of the type (`cn` selects `cn;lang-en` too, `cn;lang-en`
    /// selects only descriptions carrying that option, RFC 4512 §2.5).
    requested: HashMap<AttrId, Vec<Vec<String>>>,
    has_subordinates: Option<AttrId>,
    num_subordinates: Option<AttrId>,
    entry_dn: Option<AttrId>,
    subschema_subentry: Option<AttrId>,
}

impl Selection {
    fn resolve(schema: &Schema, selection: &AttributeSelection) -> Selection {
        let mut requested: HashMap<AttrId, Vec<Vec<String>>> = HashMap::new();
        let mut request = |attr: AttrId, options: Vec<String>| {
            for subtype in schema.subtypes(attr) {
                requested.entry(*subtype).or_default().push(options.clone());
            }
        };
        for name in &selection.names {
            // RFC 4529: `@class` requests every attribute the class allows.
            if let Some(class_name) = name.strip_prefix('@') {
                if let Some(class) = schema.object_class(class_name) {
                    let definition = schema.object_class_definition(class);
                    for attr in definition.all_must.iter().chain(&definition.all_may) {
                        request(*attr, Vec::new());
                    }
                }
                continue;
            }
            let mut parts = name.split(';');
            let base = parts.next().unwrap_or(name);
            let options: Vec<String> = parts.map(|option| option.to_ascii_lowercase()).collect();
            if let Some(attr) = schema.attribute(base) {
                request(attr, options);
            }
        }
        Selection {
            all_user: selection.all_user,
            all_operational: selection.all_operational,
            requested,
            has_subordinates: schema.attribute("hasSubordinates"),
            num_subordinates: schema.attribute("numSubordinates"),
            entry_dn: schema.attribute("entryDN"),
            subschema_subentry: schema.attribute("subschemaSubentry"),
        }
    }

    /// `options`: the stored description's options (lowercased).
    fn selects(&self, schema: &Schema, attr: AttrId, options: &[String]) -> bool {
        let requested_here = self.requested.get(&attr).is_some_and(|option_sets| {
            option_sets
                .iter()
                .any(|wanted| lmdir_schema::options_match(wanted, options))
        });
        if requested_here {
            return true;
        }
        if schema.attribute_type(attr).is_operational() {
            self.all_operational
        } else {
            self.all_user
        }
    }

    fn selects_computed(&self, attr: Option<AttrId>) -> bool {
        attr.is_some_and(|attr| self.all_operational || self.requested.contains_key(&attr))
    }
}

/// Counts an entry's children as a subject may know of them (numSubordinates,
/// hasSubordinates): the stored count when every entry is disclosed to the subject, otherwise
/// the disclosed children, counted only up to `SUBORDINATES_CHECKED_MAX` children.
struct Subordinates<'a> {
    database: &'a Database,
    read: &'a ReadTxn,
    subject: &'a Subject<'a>,
    every_entry_disclosed: bool,
}

/// Most children checked one by one for a subject that may not know of every entry; past it
/// the computed attributes are left out rather than counting hidden children.
const SUBORDINATES_CHECKED_MAX: u32 = 1000;

impl<'a> Subordinates<'a> {
    fn new(database: &'a Database, read: &'a ReadTxn, subject: &'a Subject<'a>) -> Self {
        Subordinates {
            database,
            read,
            subject,
            every_entry_disclosed: database
                .policy
                .for_subject(subject)
                .can_disclose_every_entry(),
        }
    }

    /// The number of children of `id` the subject may know of; None when not counted.
    fn count(&self, id: lmdir_store::EntryId) -> Result<Option<u32>, OperationError> {
        let stored = self.read.num_subordinates(id)?;
        if self.every_entry_disclosed || stored == 0 {
            return Ok(Some(stored));
        }
        if stored > SUBORDINATES_CHECKED_MAX {
            return Ok(None);
        }
        let mut disclosed = 0;
        for child in self.read.children(id)? {
            let Some(entry) = self.read.entry(child)? else {
                continue;
            };
            let child_ndn = self.read.normalized_dn_of(child)?;
            if self
                .database
                .policy
                .for_entry(self.subject, &child_ndn, &entry)
                .can_disclose_entry()
            {
                disclosed += 1;
            }
        }
        Ok(Some(disclosed))
    }
}

/// Writes one stored entry as a SearchResultEntry with the selected, readable attributes.
#[allow(clippy::too_many_arguments)]
fn write_stored_entry(
    buffer: &mut BytesMut,
    message_id: i32,
    schema: &Schema,
    subordinates: &Subordinates<'_>,
    id: lmdir_store::EntryId,
    entry: &lmdir_store::EntryRef<'_>,
    dn: &str,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
    types_only: bool,
) -> Result<(), OperationError> {
    let mut writer = EntryWriter::begin(buffer, message_id, dn.as_bytes());
    write_entry_attributes(
        &mut writer,
        schema,
        subordinates,
        id,
        entry,
        dn,
        selection,
        access,
        types_only,
    )?;
    writer.finish(&[]);
    Ok(())
}

/// The selected, readable attributes of a stored entry (computed operational ones included).
#[allow(clippy::too_many_arguments)]
fn write_entry_attributes(
    writer: &mut EntryWriter<'_>,
    schema: &Schema,
    subordinates: &Subordinates<'_>,
    id: lmdir_store::EntryId,
    entry: &lmdir_store::EntryRef<'_>,
    dn: &str,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
    types_only: bool,
) -> Result<(), OperationError> {
    for attribute in entry.attributes() {
        let attr = attribute.attr();
        if !selection.selects(schema, attr, attribute.options()) {
            continue;
        }
        if access.is_some_and(|access| !access.can_read_attribute(attr)) {
            continue;
        }
        let description = attribute.description_text().as_bytes();
        if types_only {
            writer.attribute(description, std::iter::empty());
        } else {
            writer.attribute(
                description,
                attribute.values().map(|(original, _)| original),
            );
        }
    }
    let computed: [(Option<AttrId>, &str); 4] = [
        (selection.has_subordinates, "hasSubordinates"),
        (selection.num_subordinates, "numSubordinates"),
        (selection.entry_dn, "entryDN"),
        (selection.subschema_subentry, "subschemaSubentry"),
    ];
    for (attr, name) in computed {
        if !selection.selects_computed(attr) {
            continue;
        }
        let value: Vec<u8> = match name {
            "hasSubordinates" | "numSubordinates" => match subordinates.count(id)? {
                None => continue,
                Some(count) if name == "numSubordinates" => count.to_string().into_bytes(),
                Some(0) => b"FALSE".to_vec(),
                Some(_) => b"TRUE".to_vec(),
            },
            "entryDN" => dn.as_bytes().to_vec(),
            _ => b"cn=Subschema".to_vec(),
        };
        if types_only {
            writer.attribute(name.as_bytes(), std::iter::empty());
        } else {
            writer.attribute(name.as_bytes(), [value.as_slice()]);
        }
    }
    Ok(())
}

/// RFC 4527: the entry at `dn` as the value of a pre-read or post-read response control, with
/// the requested attributes the subject may read; None when the entry does not exist.
fn read_entry_control(
    database: &Database,
    identity: &Identity,
    dn: &str,
    attributes: &[String],
    oid: &str,
) -> Result<Option<ResponseControl>, OperationError> {
    let read = database.store.read().map_err(internal)?;
    let normalized = database.normalize_dn(dn)?;
    let Ok(id) = read.dn_to_id(&normalized) else {
        return Ok(None);
    };
    let Some(entry) = read.entry(id)? else {
        return Ok(None);
    };
    let groups = database.groups(&read);
    let subject = database.subject(identity, &groups);
    let access =
        (!identity.is_rootdn).then(|| database.policy.for_entry(&subject, &normalized, &entry));
    if access
        .as_ref()
        .is_some_and(|access| !access.can_read_entry())
    {
        return Err(OperationError::new(
            code::INSUFFICIENT_ACCESS_RIGHTS,
            format!("no read access to '{dn}' for the read entry control"),
        ));
    }
    let selection = Selection::resolve(
        &database.schema,
        &AttributeSelection::from_request(attributes),
    );
    let original_dn = read.dn_of(id)?;
    let mut value = BytesMut::new();
    let mut writer = EntryWriter::begin_bare(&mut value, original_dn.as_bytes());
    write_entry_attributes(
        &mut writer,
        &database.schema,
        &Subordinates::new(database, &read, &subject),
        id,
        &entry,
        &original_dn,
        &selection,
        access.as_ref(),
        false,
    )?;
    writer.finish_bare();
    Ok(Some(ResponseControl {
        oid: oid.to_string(),
        criticality: false,
        value: Some(value.to_vec()),
    }))
}

/// The attribute lists of pre-read / post-read within `requested_attributes_max`, checked
/// before an update is written (a post-read refused after the write would report a failure
/// for a change that was made).
fn read_controls_within_limits(
    context: &OperationContext,
    controls: &RequestControls,
) -> Result<(), OperationError> {
    for attributes in [&controls.pre_read, &controls.post_read]
        .into_iter()
        .flatten()
    {
        crate::operations::attribute_list_within_limits(
            &context.server.settings,
            attributes.len(),
        )?;
    }
    Ok(())
}

/// Runs a read-entry control on the blocking pool.
async fn read_entry_control_async(
    context: &OperationContext,
    dn: String,
    attributes: Option<Vec<String>>,
    oid: &'static str,
) -> Result<Option<ResponseControl>, OperationError> {
    let Some(attributes) = attributes else {
        return Ok(None);
    };
    let server = context.server.clone();
    let identity = context.session.identity.clone();
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        read_entry_control(database, &identity, &dn, &attributes, oid)
    })
    .await
    .map_err(internal)?
}

pub async fn compare(
    context: &OperationContext,
    request: &LdapCompareRequest,
) -> Result<bool, OperationError> {
    let Some(_) = database_of(&context.server) else {
        return Err(no_such_object(&request.dn));
    };
    let controls = crate::controls::parse(&context.controls, crate::controls::COMPARE_CONTROLS)?;
    let server = context.server.clone();
    let identity = context.session.identity.clone();
    let request = request.clone();
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        compare_entry(database, &server.settings, &identity, &request, &controls)
    })
    .await
    .map_err(internal)?
}

/// Compare (RFC 4511 §4.10) as the subject sees the entry: an entry it may not know of answers
/// as a missing one; only the asserted type's subtypes it may compare are compared (`name`
/// never matches a hidden `cn`); the assertion control sees hidden items as Undefined.
fn compare_entry(
    database: &Database,
    settings: &crate::settings::ServerSettings,
    identity: &Identity,
    request: &LdapCompareRequest,
    controls: &RequestControls,
) -> Result<bool, OperationError> {
    let description = database.schema.parse_description(&request.atype)?;
    let attr = description.attr;
    let asserted = database.schema.normalize_value(attr, &request.val)?;
    let normalized_dn = database.normalize_dn(&request.dn)?;
    let read = database.store.read().map_err(internal)?;
    let groups = database.groups(&read);
    let subject = database.subject(identity, &groups);
    let (_, entry) = disclosed_entry(database, &read, &subject, &request.dn, &normalized_dn)?;
    let access = database.policy.for_entry(&subject, &normalized_dn, &entry);
    let comparable: Vec<AttrId> = database
        .schema
        .subtypes(attr)
        .iter()
        .copied()
        .filter(|subtype| access.can_compare(*subtype))
        .collect();
    if comparable.is_empty() {
        return Err(OperationError::new(
            code::INSUFFICIENT_ACCESS_RIGHTS,
            format!("no compare access to {} of '{}'", request.atype, request.dn),
        ));
    }
    if let Some(assertion) = &controls.assertion {
        check_read_assertion(database, settings, &access, &entry, assertion)?;
    }
    let mut found_attribute = false;
    for attribute in entry.attributes() {
        if !comparable.contains(&attribute.attr()) {
            continue;
        }
        found_attribute = true;
        if attribute
            .values()
            .any(|(_, normalized)| normalized == asserted.as_slice())
        {
            return Ok(true);
        }
    }
    if !found_attribute {
        return Err(OperationError::new(
            code::NO_SUCH_ATTRIBUTE,
            format!("'{}' has no {}", request.dn, request.atype),
        ));
    }
    Ok(false)
}

/// Static checks of an update's attributes, before anything is hashed or queued: options per
/// description, values per attribute and descriptions per request bounded
/// (adminLimitExceeded), and a userPassword
/// given already hashed must carry a cost every later bind can afford (constraintViolation).
fn check_request_attributes<'a>(
    database: &Database,
    settings: &crate::settings::ServerSettings,
    attributes: impl Iterator<Item = (&'a str, &'a [Vec<u8>], bool)>,
) -> Result<(), OperationError> {
    let mut descriptions = std::collections::HashSet::new();
    // `stores`: the values are added (add, modify add/replace), not only named for deletion.
    for (description, values, stores) in attributes {
        let options = description.matches(';').count();
        if options > settings.attribute_options_per_description_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "{description}: {options} options (limit {})",
                    settings.attribute_options_per_description_max
                ),
            ));
        }
        if values.len() > settings.values_per_attribute_per_request_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "{description}: {} values in one request (limit {})",
                    values.len(),
                    settings.values_per_attribute_per_request_max
                ),
            ));
        }
        descriptions.insert(description.to_ascii_lowercase());
        if descriptions.len() > settings.attribute_descriptions_per_entry_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "more than {} attribute descriptions in one request",
                    settings.attribute_descriptions_per_entry_max
                ),
            ));
        }
        let is_password = database.user_password.is_some_and(|password_attr| {
            database
                .schema
                .parse_description(description)
                .is_ok_and(|parsed| parsed.attr == password_attr)
        });
        if is_password && stores {
            for value in values.iter().filter(|value| password::is_hashed(value)) {
                password::check_cost(value, &password::STORE_COST_LIMITS).map_err(|error| {
                    OperationError::new(
                        code::CONSTRAINT_VIOLATION,
                        format!("userPassword: {error}"),
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// The scheme cleartext passwords are hashed with (validated by the config).
fn password_scheme(context: &OperationContext) -> Result<password::Scheme, OperationError> {
    let name = &context.server.settings.password_hash;
    password::Scheme::from_name(name).ok_or_else(|| {
        OperationError::new(
            code::OTHER,
            format!("password_hash scheme {name} is unknown"),
        )
    })
}

/// Queues an update for the writer, which decides access and the assertion inside its
/// transaction, and waits for its answer (sent after the commit).
async fn submit_update(
    context: &OperationContext,
    database: &Database,
    controls: &RequestControls,
    request: WriteRequest,
) -> Result<(), OperationError> {
    let assertion = controls
        .assertion
        .as_ref()
        .map(|assertion| {
            Filter::parse(
                &crate::filter_text::to_string(assertion),
                context.server.settings.filter_depth_max,
            )
        })
        .transpose()?;
    let identity = context.session.identity.clone();
    let settings = &context.server.settings;
    let (reply, response) = oneshot::channel();
    let job = WriteJob {
        request,
        relax: controls.relax && identity.is_rootdn,
        identity,
        assertion,
        budget: settings.write_budget,
        attribute_descriptions_per_entry_max: settings.attribute_descriptions_per_entry_max,
        password_scheme: password_scheme(context)?,
        password_policy_default: settings.password_policy_default.clone(),
        reply,
    };
    database.submit(job).await?;
    match response.await {
        Ok(result) => result.map_err(OperationError::from),
        Err(_) => Err(OperationError::new(code::OTHER, "writer failed")),
    }
}

pub async fn add(
    context: &OperationContext,
    request: LdapAddRequest,
) -> Result<Vec<ResponseControl>, OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(&request.dn));
    };
    if request.attributes.is_empty() {
        // As slapd: an entry needs at least its object classes; an empty list is malformed.
        return Err(OperationError::new(
            code::PROTOCOL_ERROR,
            "an add request must carry the entry's attributes",
        ));
    }
    let request_dn = request.dn.clone();
    require_secure_write(context)?;
    let controls = crate::controls::parse(&context.controls, crate::controls::UPDATE_CONTROLS)?;
    read_controls_within_limits(context, &controls)?;
    check_request_attributes(
        database,
        &context.server.settings,
        request
            .attributes
            .iter()
            .map(|attribute| (attribute.atype.as_str(), attribute.vals.as_slice(), true)),
    )?;
    let dn = Dn::parse(&request.dn)?;
    let mut entry = Entry::new(dn);
    for attribute in request.attributes {
        entry.add_values(&attribute.atype, attribute.vals);
    }
    // Nothing exists before an add: a pre-read control has nothing to return.
    submit_update(context, database, &controls, WriteRequest::Add(entry)).await?;
    let post = read_entry_control_async(
        context,
        request_dn,
        controls.post_read,
        crate::controls::POST_READ_OID,
    )
    .await?;
    Ok(post.into_iter().collect())
}

pub async fn delete(
    context: &OperationContext,
    dn: &str,
) -> Result<Vec<ResponseControl>, OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(dn));
    };
    require_secure_write(context)?;
    let controls = crate::controls::parse(&context.controls, crate::controls::UPDATE_CONTROLS)?;
    read_controls_within_limits(context, &controls)?;
    let pre = read_entry_control_async(
        context,
        dn.to_string(),
        controls.pre_read.clone(),
        crate::controls::PRE_READ_OID,
    )
    .await?;
    submit_update(
        context,
        database,
        &controls,
        WriteRequest::Delete(dn.to_string()),
    )
    .await?;
    Ok(pre.into_iter().collect())
}

fn modification_of(change: ldap3_proto::proto::LdapModify) -> Modification {
    let op = match change.operation {
        LdapModifyType::Add => ModOp::Add,
        LdapModifyType::Delete => ModOp::Delete,
        LdapModifyType::Replace => ModOp::Replace,
        LdapModifyType::Increment => ModOp::Increment,
    };
    Modification {
        op,
        description: change.modification.atype,
        values: change.modification.vals,
    }
}

/// Whether a modify changes only the password and operational attributes: all a connection
/// bound with a reset password may do until it changes it (as slapd's ppolicy).
pub fn changes_only_password(server: &ServerContext, request: &LdapModifyRequest) -> bool {
    database_of(server).is_some_and(|database| {
        request.changes.iter().all(|change| {
            let description = &change.modification.atype;
            database.is_user_password(description) || database.is_operational(description)
        })
    })
}

pub async fn modify(
    context: &OperationContext,
    request: LdapModifyRequest,
) -> Result<Vec<ResponseControl>, OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(&request.dn));
    };
    require_secure_write(context)?;
    let controls = crate::controls::parse(&context.controls, crate::controls::UPDATE_CONTROLS)?;
    read_controls_within_limits(context, &controls)?;
    let modifications: Vec<Modification> =
        request.changes.into_iter().map(modification_of).collect();
    let password_changes = modifications
        .iter()
        .filter(|change| database.is_user_password(&change.description));
    let changes_password = password_changes.clone().next().is_some();
    let new_passwords: Vec<&[u8]> = password_changes
        .clone()
        .filter(|change| matches!(change.op, ModOp::Add | ModOp::Replace))
        .flat_map(|change| change.values.iter().map(Vec::as_slice))
        .collect();
    if !new_passwords.is_empty() {
        let change = ppolicy::PasswordChange {
            by_self: context.session.identity.normalized_dn
                == database.normalize_dn(&request.dn).unwrap_or_default(),
            old_supplied: password_changes
                .filter(|change| change.op == ModOp::Delete)
                .any(|change| !change.values.is_empty()),
            new_passwords,
        };
        check_password_change(context, database, &controls, &request.dn, &change).await?;
    }
    check_request_attributes(
        database,
        &context.server.settings,
        modifications.iter().map(|change| {
            let stores = matches!(change.op, ModOp::Add | ModOp::Replace);
            (
                change.description.as_str(),
                change.values.as_slice(),
                stores,
            )
        }),
    )?;
    let pre = read_entry_control_async(
        context,
        request.dn.clone(),
        controls.pre_read.clone(),
        crate::controls::PRE_READ_OID,
    )
    .await?;
    submit_update(
        context,
        database,
        &controls,
        WriteRequest::Modify(request.dn.clone(), modifications),
    )
    .await?;
    if changes_password {
        password_changed(context);
    }
    let post = read_entry_control_async(
        context,
        request.dn,
        controls.post_read,
        crate::controls::POST_READ_OID,
    )
    .await?;
    Ok(pre.into_iter().chain(post).collect())
}

pub async fn modify_dn(
    context: &OperationContext,
    request: LdapModifyDNRequest,
) -> Result<Vec<ResponseControl>, OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(&request.dn));
    };
    require_secure_write(context)?;
    let controls = crate::controls::parse(&context.controls, crate::controls::UPDATE_CONTROLS)?;
    read_controls_within_limits(context, &controls)?;
    let pre = read_entry_control_async(
        context,
        request.dn.clone(),
        controls.pre_read.clone(),
        crate::controls::PRE_READ_OID,
    )
    .await?;
    let new_dn = {
        let parent = match &request.new_superior {
            Some(superior) => superior.clone(),
            None => Dn::parse(&request.dn)?
                .parent()
                .map(|parent| parent.to_string())
                .unwrap_or_default(),
        };
        if parent.is_empty() {
            request.newrdn.clone()
        } else {
            format!("{},{parent}", request.newrdn)
        }
    };
    submit_update(
        context,
        database,
        &controls,
        WriteRequest::ModifyDn {
            dn: request.dn,
            new_rdn: request.newrdn,
            delete_old_rdn: request.deleteoldrdn,
            new_superior: request.new_superior,
        },
    )
    .await?;
    let post = read_entry_control_async(
        context,
        new_dn,
        controls.post_read,
        crate::controls::POST_READ_OID,
    )
    .await?;
    Ok(pre.into_iter().chain(post).collect())
}

/// Characters of generated passwords: unambiguous letters and digits.
const GENERATED_PASSWORD_ALPHABET: &[u8] =
    b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const GENERATED_PASSWORD_LENGTH: usize = 16;

fn generate_password() -> String {
    use rand::Rng;
    let mut random = rand::rng();
    (0..GENERATED_PASSWORD_LENGTH)
        .map(|_| {
            GENERATED_PASSWORD_ALPHABET[random.random_range(0..GENERATED_PASSWORD_ALPHABET.len())]
                as char
        })
        .collect()
}

/// Checks Password Modify's old password against the target's stored values (a bind's cost,
/// off the reactor); invalidCredentials when none matches.
async fn verify_old_password(
    context: &OperationContext,
    target_dn: &str,
    password_attribute: AttrId,
    old: &[u8],
) -> Result<(), OperationError> {
    let server = context.server.clone();
    let target = target_dn.to_string();
    let old = old.to_vec();
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        let normalized = database.normalize_dn(&target)?;
        let read = database.store.read().map_err(internal)?;
        let id = read.dn_to_id(&normalized)?;
        let entry = read.entry(id)?.ok_or_else(|| no_such_object(&target))?;
        let verified = entry
            .values_of(password_attribute)
            .iter()
            .any(|(stored, _)| password_matches(stored, &old));
        if verified {
            Ok(())
        } else {
            Err(OperationError::new(
                code::INVALID_CREDENTIALS,
                "old password does not match",
            ))
        }
    })
    .await
    .map_err(internal)?
}

/// A password change succeeded: the connection is no longer restricted to making one (slapd
/// lifts its changeAfterReset restriction on any successful change from the connection).
fn password_changed(context: &OperationContext) {
    context
        .session
        .password_must_change
        .store(false, Ordering::Release);
}

pub async fn password_modify(
    context: &OperationContext,
    request: &LdapExtendedRequest,
) -> Result<(Option<String>, Option<Vec<u8>>), OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "no database holds passwords on this server",
        ));
    };
    require_secure_write(context)?;
    let controls = crate::controls::parse(&context.controls, &[ppolicy::PASSWORD_POLICY_OID])?;
    let parsed = if request.value.is_none() {
        LdapPasswordModifyRequest {
            user_identity: None,
            old_password: None,
            new_password: None,
        }
    } else {
        LdapPasswordModifyRequest::try_from(request).map_err(|_| {
            OperationError::new(code::PROTOCOL_ERROR, "malformed Password Modify request")
        })?
    };
    let identity = context.session.identity.clone();
    let target_dn = match parsed.user_identity.as_deref() {
        Some(user) => user.strip_prefix("dn:").unwrap_or(user).to_string(),
        None if identity.dn.is_empty() => {
            return Err(OperationError::new(
                code::UNWILLING_TO_PERFORM,
                "anonymous users have no password to change",
            ));
        }
        None => identity.dn.clone(),
    };
    let Some(password_attribute) = database.user_password else {
        return Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "the schema has no userPassword",
        ));
    };
    // Who may set it is the writer's decision (write access to userPassword, as for a modify:
    // the entry itself under the default policy, a helpdesk group given write by `[[access]]`).
    // An old password, when given, must match (RFC 3062 §2), whoever asks.
    if let Some(old) = parsed.old_password.as_deref() {
        verify_old_password(context, &target_dn, password_attribute, old.as_bytes()).await?;
    }
    let (new_password, generated) = match parsed.new_password {
        Some(password) => (password, false),
        None => (generate_password(), true),
    };
    let change = ppolicy::PasswordChange {
        by_self: identity.normalized_dn == database.normalize_dn(&target_dn).unwrap_or_default(),
        old_supplied: parsed.old_password.is_some(),
        new_passwords: vec![new_password.as_bytes()],
    };
    check_password_change(context, database, &controls, &target_dn, &change).await?;
    if new_password.len() > password::PASSWORD_LENGTH_BYTES_MAX {
        return Err(OperationError::new(
            code::CONSTRAINT_VIOLATION,
            format!(
                "the new password is longer than {} bytes",
                password::PASSWORD_LENGTH_BYTES_MAX
            ),
        ));
    }
    submit_update(
        context,
        database,
        &RequestControls::default(),
        WriteRequest::SetPassword {
            dn: target_dn,
            password: new_password.clone().into_bytes(),
        },
    )
    .await?;
    password_changed(context);
    if generated {
        // PasswdModifyResponseValue ::= SEQUENCE { genPasswd [0] OCTET STRING OPTIONAL }
        let mut value = BytesMut::new();
        let mut writer = crate::ber::BerWriter::new(&mut value);
        writer.open(crate::ber::tag::SEQUENCE);
        writer.primitive(0x80, new_password.as_bytes());
        writer.close();
        drop(writer);
        Ok((None, Some(value.to_vec())))
    } else {
        Ok((None, None))
    }
}
