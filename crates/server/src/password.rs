//! Passwords: simple and SASL EXTERNAL binds, the password policy's glue (lock, expiry, grace,
//! failures queued to the writer, checks of a change), and the Password Modify extended
//! operation.

use crate::client_limits::ClientKey;
use crate::context::{
    database_of, internal, normalized_identity_dn, require_secure_write, same_dn, submit_update,
    Database, OperationContext, ServerContext,
};
use crate::controls::RequestControls;
use crate::identity::Identity;
use crate::ppolicy::{
    self, AccountState, Policy, PolicyError, PolicyResponse, Slot, StateUpdate, Verdict,
};
use crate::request::{BindCredentials, BindRequest, PasswordModifyRequest};
use crate::result::{code, OperationError};
use crate::session::{Session, Transport};
use crate::settings::ServerSettings;
use crate::writer::{PolicyState, Update, WriteJob, WriteRequest};
use bytes::BytesMut;
use ldap3_proto::proto::LdapExtendedRequest;
use lmdir_access::password;
use lmdir_schema::AttrId;
use lmdir_store::ReadTxn;
use std::sync::Arc;
use tokio::sync::oneshot;
use tracing::{info, warn};

/// Checks a presented password against a stored value: cleartext or any `{SCHEME}` that
/// lmdir-access verifies (constant-time compares). A value that cannot be verified at all
/// (unknown scheme, malformed, cost over the bound) does not match, and when `dn` names its
/// entry a warning says why, with the entry and the scheme, never the value: the client sees
/// only invalidCredentials, as from slapd.
pub fn password_matches(stored: &[u8], presented: &[u8], dn: Option<&str>) -> bool {
    match password::verify_checked(stored, presented) {
        Ok(matched) => matched,
        Err(error) => {
            if let Some(dn) = dn {
                warn!(
                    dn,
                    scheme = %password::scheme_label(stored),
                    reason = %error,
                    "a userPassword value cannot be verified"
                );
            }
            false
        }
    }
}

/// Whether `presented` matches any of `stored` (already bounded by the caller). Fast schemes
/// take microseconds and are checked on this task; if any value uses a deliberately slow scheme
/// (PBKDF2, Argon2, crypt) all are checked on the blocking pool, once the server's verify gate
/// admits them (`verify_gate`: a core and the memory they need, after `client`'s earlier
/// checks), so a bind never stalls the reactor and many binds at once never take more than the
/// gate's budget, whether it is the rootdn's `rootpw` or an entry's `userPassword`.
pub async fn any_password_matches(
    server: &ServerContext,
    client: ClientKey,
    stored: Vec<Vec<u8>>,
    presented: &[u8],
    dn: Option<&str>,
) -> Result<bool, OperationError> {
    let matching = first_matching_password(server, client, stored, presented, dn).await?;
    Ok(matching.is_some())
}

/// The position in `stored` of the first value `presented` matches (see
/// `any_password_matches`, which this is).
async fn first_matching_password(
    server: &ServerContext,
    client: ClientKey,
    stored: Vec<Vec<u8>>,
    presented: &[u8],
    dn: Option<&str>,
) -> Result<Option<usize>, OperationError> {
    server.monitor.password_checked();
    let slow = stored
        .iter()
        .any(|value| lmdir_access::password::scheme_of(value).is_ok_and(|scheme| scheme.is_slow()));
    // The values are verified one after another: the largest need is the memory taken.
    let memory_bytes = if slow {
        stored_memory_bytes(&stored)
    } else {
        0
    };
    let presented = presented.to_vec();
    let dn = dn.map(str::to_string);
    let verify = move || {
        stored
            .iter()
            .position(|value| password_matches(value, &presented, dn.as_deref()))
    };
    if !slow {
        return Ok(verify());
    }
    let budget_bytes = server.settings().password_verify_memory_bytes_max;
    server
        .verify_gate
        .run_blocking(Some(client), memory_bytes, budget_bytes, verify)
        .await
        .map_err(internal)
}

/// The most memory verifying one of `stored` needs (they are verified one at a time).
fn stored_memory_bytes(stored: &[Vec<u8>]) -> u64 {
    stored
        .iter()
        .map(|value| lmdir_access::password::verify_memory_bytes(value))
        .max()
        .unwrap_or(0)
}

/// What checks a password of an entry: the server, the settings its operation took once (a
/// reload landing mid-check changes nothing of it), the database and the client asking.
struct Checker<'a> {
    server: &'a Arc<ServerContext>,
    settings: &'a ServerSettings,
    database: &'a Database,
    client: ClientKey,
}

/// Checks `password` against the entry's userPassword under its password policy, when one
/// applies: a locked account answers invalidCredentials without a look at the password, a wrong
/// password is recorded as a failure (pwdFailureTime, then the lock), and `response` says what
/// the policy control tells the client. The one path of every password check of an entry: a
/// bind's and Password Modify's old password. Ok holds the policy and the account's state
/// before the check (None: no policy applies).
async fn check_entry_password(
    checker: &Checker<'_>,
    dn: &str,
    normalized_dn: &str,
    password: &[u8],
    response: &mut Option<PolicyResponse>,
) -> Result<Option<(Policy, AccountState)>, OperationError> {
    let Checker {
        server,
        settings,
        database,
        client,
    } = *checker;
    let invalid = || OperationError::new(code::INVALID_CREDENTIALS, "");
    // Finding the entry and its stored passwords takes microseconds: done on this task.
    let candidate = database.bind_candidate(settings, dn, normalized_dn)?;
    let Some((stored_passwords, policed)) = candidate.filter(|(stored, _)| !stored.is_empty())
    else {
        // Nothing to authenticate with: as long as a wrong password, never a match.
        verify_decoy(server, client, password).await?;
        return Err(invalid());
    };
    let now_time = std::time::SystemTime::now();
    if policed.is_some() {
        // As slapd: a bind under a policy answers the request control even with nothing to
        // say (an empty response), whatever the outcome.
        *response = Some(PolicyResponse::default());
    }
    if let Some((policy, state)) = &policed {
        if state.is_locked(policy, ppolicy::unix_seconds(now_time)) {
            // Checked and forgotten, as slapd checks a locked account's password before its
            // ppolicy refuses the bind: a locked account takes a wrong password's time.
            let _ignored =
                any_password_matches(server, client, stored_passwords, password, Some(dn)).await?;
            *response = Some(PolicyResponse {
                warning: None,
                error: Some(PolicyError::AccountLocked),
            });
            return Err(invalid());
        }
    }
    if any_password_matches(server, client, stored_passwords, password, Some(dn)).await? {
        return match policed {
            Some(_) => still_unlocked(checker, dn, normalized_dn, response),
            None => Ok(None),
        };
    }
    if let Some((policy, _)) = policed {
        database
            .record_failure(settings, normalized_dn, policy, now_time)
            .await;
    }
    Err(invalid())
}

/// After a match under a policy: the account's state read again, with the failures concurrent
/// binds recorded but the writer has not committed yet, since guesses sent at once were all
/// checked against the state from before any of them failed. One that matches after the
/// others' failures reach the lockout is refused as locked (before, it bound). Failures the
/// writer took but has not committed are in neither: that window is the commit's.
fn still_unlocked(
    checker: &Checker<'_>,
    dn: &str,
    normalized_dn: &str,
    response: &mut Option<PolicyResponse>,
) -> Result<Option<(Policy, AccountState)>, OperationError> {
    let database = checker.database;
    let now = ppolicy::unix_seconds(std::time::SystemTime::now());
    let fresh = database.bind_candidate(checker.settings, dn, normalized_dn)?;
    let policed = fresh.and_then(|(_, policed)| policed);
    if let Some((policy, state)) = &policed {
        let pending = database.pending_states.pending_failures(normalized_dn);
        if state.is_locked_with(policy, &pending, now) {
            *response = Some(PolicyResponse {
                warning: None,
                error: Some(PolicyError::AccountLocked),
            });
            return Err(OperationError::new(code::INVALID_CREDENTIALS, ""));
        }
    }
    Ok(policed)
}

/// Verifies `password` against the bind decoy of the configured scheme, and forgets the
/// outcome: a bind to what cannot authenticate takes a wrong password's time.
pub(crate) async fn verify_decoy(
    server: &ServerContext,
    client: ClientKey,
    password: &[u8],
) -> Result<(), OperationError> {
    // The configuration validates the scheme: none to use is no decoy, not a failed bind.
    let Ok(scheme) = crate::context::password_scheme(server) else {
        return Ok(());
    };
    let budget_bytes = server.settings().password_verify_memory_bytes_max;
    let decoy = server
        .bind_decoy
        .value(scheme, &server.verify_gate, budget_bytes);
    let Some(decoy) = decoy.await else {
        return Ok(());
    };
    let decoy = vec![decoy];
    let _never_a_match = any_password_matches(server, client, decoy, password, None).await?;
    Ok(())
}

/// The identity `dn` (normalized: `normalized_dn`) binds as with `password` against its
/// entry's userPassword (`check_entry_password`), then the policy's verdict: an expired
/// password answers invalidCredentials, a grace login is counted.
async fn bind_entry(
    checker: &Checker<'_>,
    dn: &str,
    normalized_dn: String,
    password: &[u8],
    response: &mut Option<PolicyResponse>,
) -> Result<Identity, OperationError> {
    let database = checker.database;
    let invalid = || OperationError::new(code::INVALID_CREDENTIALS, "");
    let policed = check_entry_password(checker, dn, &normalized_dn, password, response).await?;
    let Some((policy, state)) = policed else {
        return Ok(bound_identity(database, dn, normalized_dn));
    };
    let now_time = std::time::SystemTime::now();
    let now = ppolicy::unix_seconds(now_time);
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
                    dn: normalized_dn.clone(),
                    policy,
                    failures: Vec::new(),
                    success: true,
                    grace_use_at: grace_login.then_some(now_time),
                };
                database
                    .write_policy_state(checker.settings, PolicyState::Taken(Some(update)))
                    .await;
            }
            Ok(bound_identity(database, dn, normalized_dn))
        }
    }
}

/// The identity of a successful bind as an entry.
fn bound_identity(database: &Database, dn: &str, normalized_dn: String) -> Identity {
    Identity {
        dn: dn.to_string(),
        is_rootdn: database.policy().is_rootdn(&normalized_dn),
        normalized_dn,
    }
}

/// Checks a password change against the target's policy (`ppolicy::change_refusal`, then
/// pwdInHistory), as OpenLDAP's ppolicy does for modify and Password Modify; the refusal's
/// control error goes out when the request control came. The rootdn is exempt, as slapd
/// exempts password administrators. Read before the writer: a policy or entry changed
/// meanwhile only moves the check by one update.
pub(crate) async fn check_password_change(
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
            let client = context.session.client;
            history_refusal(&context.server, client, change, current, history).await?
        }
    };
    match refusal {
        None => Ok(()),
        Some(refusal) => Err(refusal_error(controls, refusal)),
    }
}

/// slapd's ppolicy on a modify that deletes the old password by value before it adds the new
/// one (`delete: userPassword` / `userPassword: <old cleartext>`, what pwdSafeModify asks
/// for): the old value is checked as a bind checks it and the delete takes the stored value it
/// matched, since a stored hash never equals the cleartext (before: noSuchAttribute, and under
/// pwdSafeModify no password could change by modify at all). A wrong one answers 53 ("Must
/// supply correct old password to change to new one", mustSupplyOldPassword), under the bind
/// throttle. Only under a policy, for a subject that may write the password, and not for the
/// rootdn (who deletes by value), as slapd.
pub(crate) async fn resolve_deleted_password(
    context: &OperationContext,
    database: &Database,
    controls: &RequestControls,
    dn: &str,
    modifications: &mut [lmdir_schema::Modification],
) -> Result<(), OperationError> {
    let Some(delete) = modifications.iter_mut().find(|change| {
        change.op == lmdir_schema::ModOp::Delete
            && !change.values.is_empty()
            && database.is_user_password(&change.description)
    }) else {
        return Ok(());
    };
    if context.session.identity.is_rootdn {
        return Ok(());
    }
    let Some((normalized, stored)) = policed_passwords(context, database, dn)? else {
        return Ok(());
    };
    let server = &context.server;
    let client = context.session.client;
    let presented = delete.values[0].clone();
    let check = async {
        first_matching_password(server, client, stored.clone(), &presented, Some(dn))
            .await?
            .ok_or_else(|| OperationError::new(code::INVALID_CREDENTIALS, ""))
    };
    match throttled(server, &context.session, dn, Some(&normalized), check).await {
        Ok(index) => {
            delete.values = vec![stored[index].clone()];
            Ok(())
        }
        Err(error) if error.code == code::INVALID_CREDENTIALS => {
            let refusal = (
                code::UNWILLING_TO_PERFORM,
                "Must supply correct old password to change to new one",
                Some(PolicyError::MustSupplyOldPassword),
            );
            Err(refusal_error(controls, refusal))
        }
        Err(error) => Err(error),
    }
}

/// An entry's normalized DN and its stored userPassword values (bounded).
type StoredPasswords = (String, Vec<Vec<u8>>);

/// The entry's normalized DN and its stored userPassword values (bounded), when a password
/// policy applies to it and the subject may write its password; else None.
fn policed_passwords(
    context: &OperationContext,
    database: &Database,
    dn: &str,
) -> Result<Option<StoredPasswords>, OperationError> {
    with_settable_entry(context, database, dn, |read, entry, normalized| {
        let Some(password_attr) = database.user_password else {
            return Ok(None);
        };
        if database.policy_of(&context.settings, read, entry).is_none() {
            return Ok(None);
        }
        let values_max = context.settings.bind_password_values_max;
        let stored = entry
            .values_of(password_attr)
            .iter()
            .take(values_max)
            .map(|(value, _)| value.to_vec())
            .collect();
        Ok(Some((normalized.to_string(), stored)))
    })
}

/// `then` on the entry `dn` names (with its normalized DN) when the subject may set its
/// password; None otherwise. Only such a subject hears what the policy thinks of a change:
/// anyone else gets the writer's answer (noSuchObject for an entry it may not know of,
/// insufficientAccess), never a verdict that tells the entry exists.
fn with_settable_entry<T>(
    context: &OperationContext,
    database: &Database,
    dn: &str,
    then: impl FnOnce(&ReadTxn, &lmdir_store::EntryRef<'_>, &str) -> Result<Option<T>, OperationError>,
) -> Result<Option<T>, OperationError> {
    let (Ok(normalized), Some(password_attr)) = (database.normalize_dn(dn), database.user_password)
    else {
        return Ok(None);
    };
    let read = database.store.read().map_err(internal)?;
    let Ok(id) = read.normalized_dn_to_id(&normalized) else {
        return Ok(None);
    };
    let Some(entry) = read.entry(id).map_err(OperationError::from)? else {
        return Ok(None);
    };
    let groups = database.groups(&read);
    let subject = database.subject(&context.session.identity, &groups);
    let policy = database.policy();
    let access = policy.for_entry(&subject, &normalized, &entry);
    if !access.can_disclose_entry() || !access.can_write_attribute(password_attr) {
        return Ok(None);
    }
    then(&read, &entry, &normalized)
}

/// A policy's refusal as answered: its code and slapd's text, and the response control when
/// the request control came.
fn refusal_error(controls: &RequestControls, refusal: ppolicy::Refusal) -> OperationError {
    let (result_code, text, failure) = refusal;
    let mut error = OperationError::new(result_code, text);
    if controls.password_policy {
        let response = PolicyResponse {
            warning: None,
            error: failure,
        };
        error = error.with_control(response.control());
    }
    error
}

/// slapd's ppolicy on an add: under the new entry's policy (its pwdPolicySubentry, else the
/// default) one userPassword value, and a cleartext one of the policy's quality unless the
/// rootdn adds it. Judged only for a subject that may add below the parent: anyone else gets
/// the writer's refusal, never the policy's verdict.
pub(crate) fn check_added_password(
    context: &OperationContext,
    database: &Database,
    controls: &RequestControls,
    entry: &lmdir_schema::Entry,
) -> Result<(), OperationError> {
    let new_passwords: Vec<&[u8]> = entry
        .attributes
        .iter()
        .filter(|attribute| database.is_user_password(&attribute.description))
        .flat_map(|attribute| attribute.values.iter().map(Vec::as_slice))
        .collect();
    if new_passwords.is_empty() {
        return Ok(());
    }
    let read = database.store.read().map_err(internal)?;
    let identity = &context.session.identity;
    if !identity.is_rootdn && !may_add_below_parent(database, &read, identity, entry)? {
        return Ok(());
    }
    let schema = database.schema();
    let own = entry
        .attributes
        .iter()
        .find(|attribute| {
            schema
                .parse_description(&attribute.description)
                .is_ok_and(|parsed| Some(parsed.attr) == database.pwd_policy_subentry)
        })
        .and_then(|attribute| attribute.values.first())
        .and_then(|value| String::from_utf8(value.clone()).ok());
    let Some(policy) = database.policy_named(&context.settings, &read, own) else {
        return Ok(());
    };
    // One value, the rootdn's add too (slapd checks it before it exempts the root, and
    // answers it without a response control).
    if new_passwords.len() > 1 {
        return Err(OperationError::new(
            code::CONSTRAINT_VIOLATION,
            ppolicy::ONE_VALUE_ONLY,
        ));
    }
    if identity.is_rootdn {
        return Ok(());
    }
    let change = ppolicy::PasswordChange {
        by_self: false,
        old_supplied: true,
        new_passwords,
    };
    let now = ppolicy::unix_seconds(std::time::SystemTime::now());
    let state = AccountState::default();
    match ppolicy::change_refusal(&policy, &state, &change, now) {
        None => Ok(()),
        Some(refusal) => Err(refusal_error(controls, refusal)),
    }
}

/// Whether the subject may add entries below `entry`'s parent (a missing or hidden parent:
/// no, and the writer answers).
fn may_add_below_parent(
    database: &Database,
    read: &ReadTxn,
    identity: &Identity,
    entry: &lmdir_schema::Entry,
) -> Result<bool, OperationError> {
    let Some(parent) = entry.dn.parent() else {
        return Ok(false);
    };
    let Ok(parent_ndn) = database.schema().normalize_dn(&parent) else {
        return Ok(false);
    };
    let Ok(id) = read.normalized_dn_to_id(&parent_ndn) else {
        return Ok(false);
    };
    let Some(parent_entry) = read.entry(id).map_err(OperationError::from)? else {
        return Ok(false);
    };
    let groups = database.groups(read);
    let subject = database.subject(identity, &groups);
    let policy = database.policy();
    let access = policy.for_entry(&subject, &parent_ndn, &parent_entry);
    Ok(access.can_disclose_entry() && access.can_write_children())
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
    with_settable_entry(context, database, dn, |read, entry, _| {
        judge_entry_change(context, database, (read, entry), change)
    })
}

/// `judge_password_change` on the entry found (one the subject may set the password of).
fn judge_entry_change(
    context: &OperationContext,
    database: &Database,
    (read, entry): (&ReadTxn, &lmdir_store::EntryRef<'_>),
    change: &ppolicy::PasswordChange<'_>,
) -> Result<Option<Judged>, OperationError> {
    let Some(policy) = database.policy_of(&context.settings, read, entry) else {
        return Ok(None);
    };
    let state = database.account_state(entry);
    let now = ppolicy::unix_seconds(std::time::SystemTime::now());
    if let Some(refusal) = ppolicy::change_refusal(&policy, &state, change, now) {
        return Ok(Some(Judged::Refused(refusal)));
    }
    if policy.in_history == 0 {
        return Ok(None);
    }
    let values = |name: &str| -> Vec<Vec<u8>> {
        database
            .schema()
            .attribute(name)
            .map_or_else(Vec::new, |attr| {
                entry
                    .values_of(attr)
                    .iter()
                    .map(|(value, _)| value.to_vec())
                    .collect()
            })
    };
    let bound = context.settings.bind_password_values_max;
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
    server: &ServerContext,
    client: ClientKey,
    change: &ppolicy::PasswordChange<'_>,
    current: Vec<Vec<u8>>,
    history: Vec<Vec<u8>>,
) -> Result<Option<ppolicy::Refusal>, OperationError> {
    for new in &change.new_passwords {
        if password::is_hashed(new) {
            continue;
        }
        if any_password_matches(server, client, current.clone(), new, None).await? {
            return Ok(Some((
                code::CONSTRAINT_VIOLATION,
                "Password is not being changed from existing value",
                Some(PolicyError::PasswordInHistory),
            )));
        }
        if any_password_matches(server, client, history.clone(), new, None).await? {
            return Ok(Some((
                code::CONSTRAINT_VIOLATION,
                "Password is in history of old passwords",
                Some(PolicyError::PasswordInHistory),
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
        AccountState::read(&self.schema(), |attr| {
            entry
                .values_of(attr)
                .iter()
                .map(|(value, _)| value.to_vec())
                .collect()
        })
    }

    pub(crate) fn is_user_password(&self, description: &str) -> bool {
        self.schema()
            .parse_description(description)
            .is_ok_and(|parsed| Some(parsed.attr) == self.user_password)
    }

    /// Whether `description` names an operational attribute type.
    fn is_operational(&self, description: &str) -> bool {
        self.schema()
            .parse_description(description)
            .is_ok_and(|parsed| self.schema().attribute_type(parsed.attr).is_operational())
    }

    fn bind_candidate(
        &self,
        settings: &ServerSettings,
        dn: &str,
        normalized_dn: &str,
    ) -> Result<Option<BindCandidate>, OperationError> {
        let read = self.store.read().map_err(internal)?;
        let Ok(id) = read.normalized_dn_to_id(normalized_dn) else {
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
        let policy = self.policy();
        let access = policy.for_entry(&subject, normalized_dn, &entry);
        if !access.can_authenticate_with(password_attribute) {
            return Ok(None);
        }
        // Values planted by whoever may write userPassword must not make each bind hash
        // without bound: only the first `bind_password_values_max` count.
        let values_max = settings.bind_password_values_max;
        let (stored, value_count, own_policy) =
            self.password_and_policy_subentry(&entry, password_attribute, values_max);
        if value_count > values_max {
            tracing::warn!(
                "bind dn=\"{}\": {value_count} userPassword values, only the first {values_max} are checked",
                crate::log_text::escaped(dn),
            );
        }
        let policed = self
            .policy_named(settings, &read, own_policy)
            .map(|policy| (policy, self.account_state(&entry)));
        Ok(Some((stored, policed)))
    }

    /// Whether `entry`'s password policy keeps out what authenticates as the entry without
    /// its password (a bearer token) now: the account locked (as a bind finds it), its
    /// password reset by an administrator under pwdMustChange (a bind then opens only the
    /// change), or expired (past pwdMaxAge; grace logins are for changing the password, a
    /// token takes none).
    pub(crate) fn account_refuses_tokens(
        &self,
        server: &ServerContext,
        read: &ReadTxn,
        entry: &lmdir_store::EntryRef<'_>,
    ) -> bool {
        let Some(policy) = self.policy_of(&server.settings(), read, entry) else {
            return false;
        };
        let state = self.account_state(entry);
        let now = ppolicy::unix_seconds(std::time::SystemTime::now());
        state.is_locked(&policy, now)
            || (policy.must_change && state.reset)
            || ppolicy::is_expired(&policy, &state, now)
    }

    /// A digest of `entry`'s userPassword values (all of them, in stored order): what a
    /// console session signed in against, so it ends when they change (a reset, a change
    /// made elsewhere).
    pub(crate) fn password_digest(&self, entry: &lmdir_store::EntryRef<'_>) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        digest.update(b"userPassword");
        if let Some(attribute) = self.user_password {
            for (value, _) in entry.values_of(attribute).iter() {
                digest.update((value.len() as u64).to_be_bytes());
                digest.update(value);
            }
        }
        digest.finalize().into()
    }

    /// Whether `entry`'s password policy holds its account locked now (as a bind would find
    /// it).
    pub(crate) fn account_locked(
        &self,
        server: &ServerContext,
        read: &ReadTxn,
        entry: &lmdir_store::EntryRef<'_>,
    ) -> bool {
        let now = ppolicy::unix_seconds(std::time::SystemTime::now());
        self.policy_of(&server.settings(), read, entry)
            .is_some_and(|policy| self.account_state(entry).is_locked(&policy, now))
    }

    /// In one walk over the entry: its first `values_max` userPassword values, how many it
    /// has, and its pwdPolicySubentry (the first value) when it names one.
    fn password_and_policy_subentry(
        &self,
        entry: &lmdir_store::EntryRef<'_>,
        password_attribute: AttrId,
        values_max: usize,
    ) -> (Vec<Vec<u8>>, usize, Option<String>) {
        let subentry_attribute = self.pwd_policy_subentry;
        let mut stored = Vec::new();
        let mut value_count = 0;
        let mut own_policy = None;
        let wanted = |description: &lmdir_store::DescriptionInfo| {
            description.attr == password_attribute || Some(description.attr) == subentry_attribute
        };
        for attribute in entry.attributes_where(wanted) {
            if attribute.description.attr == password_attribute {
                for (value, _) in attribute.values() {
                    value_count += 1;
                    if stored.len() < values_max {
                        stored.push(value.to_vec());
                    }
                }
            } else if own_policy.is_none() {
                own_policy = attribute.values().next().map(|(value, _)| value.to_vec());
            }
        }
        let own_policy = own_policy.and_then(|value| String::from_utf8(value).ok());
        (stored, value_count, own_policy)
    }

    /// The password policy of `entry`: its pwdPolicySubentry when that names a pwdPolicy
    /// entry, else the configured default; None when neither does (one point read each, no
    /// cache: a changed policy entry applies at the next bind). A pwdPolicySubentry naming
    /// some other entry does not turn the policy off: the default still applies.
    fn policy_of(
        &self,
        settings: &ServerSettings,
        read: &ReadTxn,
        entry: &lmdir_store::EntryRef<'_>,
    ) -> Option<Policy> {
        let own = self
            .pwd_policy_subentry
            .and_then(|attr| {
                entry
                    .values_of(attr)
                    .first()
                    .map(|(value, _)| value.to_vec())
            })
            .and_then(|value| String::from_utf8(value).ok());
        self.policy_named(settings, read, own)
    }

    /// The password policy of an entry whose pwdPolicySubentry is `own` (see `policy_of`).
    fn policy_named(
        &self,
        settings: &ServerSettings,
        read: &ReadTxn,
        own: Option<String>,
    ) -> Option<Policy> {
        Policy::resolve(own, &settings.password_policy_default, |dn| {
            let id = read
                .normalized_dn_to_id(&self.normalize_dn(dn).ok()?)
                .ok()?;
            let policy_entry = read.entry(id).ok()??;
            Policy::of_entry(&self.schema(), |attr| {
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
        settings: &ServerSettings,
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
                self.write_policy_state(settings, PolicyState::Pending(dn.to_string()))
                    .await;
            }
            Slot::Unshared => {
                let update = StateUpdate::failure(dn, policy, now);
                self.write_policy_state(settings, PolicyState::Taken(Some(update)))
                    .await;
            }
        }
    }

    /// Queues a policy state update and waits for its commit; a failure is logged (the bind's
    /// answer does not depend on it).
    async fn write_policy_state(&self, settings: &ServerSettings, state: PolicyState) {
        let (reply, response) = oneshot::channel();
        let job = WriteJob {
            update: Update {
                request: WriteRequest::PolicyState(state),
                identity: Identity::default(),
                assertion: None,
                relax: false,
                permissive_modify: false,
                manage_dsa_it: true,
                budget: settings.write_budget,
                attribute_descriptions_per_entry_max: settings.attribute_descriptions_per_entry_max,
                password_scheme: password::Scheme::Ssha,
                hash_cleartext: false,
                password_policy_default: settings.password_policy_default.clone(),
                session: 0,
                received: std::time::SystemTime::now(),
                read_images: None,
            },
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

/// Whether a modify changes only the password and operational attributes: all a connection
/// bound with a reset password may do until it changes it (as slapd's ppolicy).
pub fn changes_only_password(
    server: &ServerContext,
    request: &ldap3_proto::proto::LdapModifyRequest,
) -> bool {
    database_of(server).is_some_and(|database| {
        request.changes.iter().all(|change| {
            let description = &change.modification.atype;
            database.is_user_password(description) || database.is_operational(description)
        })
    })
}

/// A password change succeeded: the connection is no longer restricted to making one (slapd
/// lifts its changeAfterReset restriction on any successful change from the connection).
pub(crate) fn password_changed(context: &OperationContext) {
    context
        .session
        .password_must_change
        .store(false, std::sync::atomic::Ordering::Release);
}

/// Password Modify's answer to an old password it will not verify (slapd's words): the same
/// for a subject that may not change the password, a wrong guess and a locked account.
fn unwilling_to_verify() -> OperationError {
    OperationError::new(
        code::UNWILLING_TO_PERFORM,
        "unwilling to verify old password",
    )
}

/// Whether the subject may set the userPassword of `target_dn` (write access to it, as the
/// writer decides for the change itself). An entry the subject may not know of answers as a
/// missing one.
async fn may_change_password(
    context: &OperationContext,
    target_dn: &str,
    password_attribute: AttrId,
) -> Result<bool, OperationError> {
    let server = context.server.clone();
    let identity = context.session.identity.clone();
    let target = target_dn.to_string();
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        let normalized = database.normalize_dn(&target)?;
        let read = database.store.read().map_err(internal)?;
        let groups = database.groups(&read);
        let subject = database.subject(&identity, &groups);
        let (_, entry) =
            crate::entry_read::disclosed_entry(database, &read, &subject, &target, &normalized)?;
        Ok(database
            .policy()
            .for_entry(&subject, &normalized, &entry)
            .can_write_attribute(password_attribute))
    })
    .await
    .map_err(internal)?
}

/// Checks Password Modify's old password as a bind checks one (`check_entry_password`, under
/// the client's bind throttle): a wrong one is a failed bind of the target, counted towards its
/// lockout, and a locked account is never compared. Every failure answers alike.
async fn verify_old_password(
    context: &OperationContext,
    database: &Database,
    target_dn: &str,
    old: &[u8],
) -> Result<(), OperationError> {
    let server = &context.server;
    let normalized = database.normalize_dn(target_dn)?;
    let check = async {
        let mut unsaid = None;
        let checker = Checker {
            server,
            settings: &context.settings,
            database,
            client: context.session.client,
        };
        check_entry_password(&checker, target_dn, &normalized, old, &mut unsaid)
            .await
            .map(drop)
    };
    match throttled(
        server,
        &context.session,
        target_dn,
        Some(&normalized),
        check,
    )
    .await
    {
        Err(error) if error.code == code::INVALID_CREDENTIALS => Err(unwilling_to_verify()),
        outcome => outcome,
    }
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
    let controls = crate::controls::parse(
        &context.controls,
        crate::controls::OperationClass::PasswordModify,
    )?;
    let parsed = decode_password_modify(request)?;
    let identity = context.session.identity.clone();
    if identity.normalized_dn.is_empty() {
        // As slapd, whatever the target and the old password: anonymous has nothing to change
        // and learns nothing.
        return Err(OperationError::new(
            code::STRONG_AUTH_REQUIRED,
            "only authenticated users may change passwords",
        ));
    }
    let target_dn = match parsed.user_identity.as_deref() {
        Some(user) => user.strip_prefix("dn:").unwrap_or(user).to_string(),
        None => identity.dn.clone(),
    };
    let Some(password_attribute) = database.user_password else {
        return Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "the schema has no userPassword",
        ));
    };
    let old = parsed.old_password.as_deref();
    authorize_password_change(context, database, &target_dn, password_attribute, old).await?;
    let (new_password, generated) = match parsed.new_password {
        Some(password) => (password, false),
        None => (generate_password().into_bytes(), true),
    };
    let change = ppolicy::PasswordChange {
        by_self: identity.normalized_dn == database.normalize_dn(&target_dn).unwrap_or_default(),
        old_supplied: parsed.old_password.is_some(),
        new_passwords: vec![&new_password],
    };
    check_password_change(context, database, &controls, &target_dn, &change).await?;
    refuse_long_password(&new_password)?;
    let request = WriteRequest::SetPassword {
        dn: target_dn,
        password: new_password.clone(),
        hashed: false,
    };
    let request = crate::prehash::prehashed(context, database, request).await?;
    submit_update(context, database, &RequestControls::default(), request).await?;
    password_changed(context);
    Ok((
        None,
        generated.then(|| generated_password_value(&new_password)),
    ))
}

/// The Password Modify request's value (RFC 3062 §2); protocolError when malformed.
fn decode_password_modify(
    request: &LdapExtendedRequest,
) -> Result<PasswordModifyRequest, OperationError> {
    PasswordModifyRequest::decode(request.value.as_deref()).map_err(|what| {
        OperationError::new(
            code::PROTOCOL_ERROR,
            format!("malformed Password Modify request: {what}"),
        )
    })
}

/// Access first (write access to userPassword, as for a modify: the entry itself under the
/// default policy, a helpdesk group given write by `[[access]]`), so nothing that follows
/// (the old password, the policy's checks) answers a subject that may not change it. The
/// writer decides it again in its transaction for the change itself. An old password, when
/// given, must match (RFC 3062 §2), whoever asks.
async fn authorize_password_change(
    context: &OperationContext,
    database: &Database,
    target_dn: &str,
    password_attribute: AttrId,
    old_password: Option<&[u8]>,
) -> Result<(), OperationError> {
    let may_change = may_change_password(context, target_dn, password_attribute).await?;
    match (may_change, old_password) {
        (false, Some(_)) => Err(unwilling_to_verify()),
        (false, None) => Err(OperationError::new(
            code::INSUFFICIENT_ACCESS_RIGHTS,
            format!("no write access to userPassword of '{target_dn}'"),
        )),
        (true, Some(old)) => verify_old_password(context, database, target_dn, old).await,
        (true, None) => Ok(()),
    }
}

/// A new password longer than `PASSWORD_LENGTH_BYTES_MAX` is a constraintViolation.
fn refuse_long_password(new_password: &[u8]) -> Result<(), OperationError> {
    if new_password.len() > password::PASSWORD_LENGTH_BYTES_MAX {
        return Err(OperationError::new(
            code::CONSTRAINT_VIOLATION,
            format!(
                "the new password is longer than {} bytes",
                password::PASSWORD_LENGTH_BYTES_MAX
            ),
        ));
    }
    Ok(())
}

/// The response value carrying a generated password:
/// PasswdModifyResponseValue ::= SEQUENCE { genPasswd [0] OCTET STRING OPTIONAL }
fn generated_password_value(new_password: &[u8]) -> Vec<u8> {
    let mut value = BytesMut::new();
    let mut writer = crate::ber::BerWriter::new(&mut value);
    writer.open(crate::ber::tag::SEQUENCE);
    writer.primitive(0x80, new_password);
    writer.close();
    drop(writer);
    value.to_vec()
}

pub(crate) async fn bind_outcome(
    server: &Arc<ServerContext>,
    settings: &Arc<ServerSettings>,
    session: &Session,
    request: &BindRequest,
    policy_response: &mut Option<PolicyResponse>,
) -> Result<Identity, OperationError> {
    if request.version != 3 {
        return Err(OperationError::new(
            code::PROTOCOL_ERROR,
            format!("LDAP version {} is not supported; use 3", request.version),
        ));
    }
    // Whatever the method, as slapd: a name that is not UTF-8 is no DN.
    let dn = request
        .dn()
        .map_err(|_| OperationError::new(code::INVALID_DN_SYNTAX, "invalid DN: not UTF-8"))?;
    match &request.credentials {
        BindCredentials::Unsupported => Err(OperationError::new(
            code::AUTH_METHOD_NOT_SUPPORTED,
            "authentication method not supported",
        )),
        BindCredentials::Sasl {
            mechanism,
            credentials,
        } => {
            if !mechanism.eq_ignore_ascii_case("EXTERNAL") {
                return Err(OperationError::new(
                    code::AUTH_METHOD_NOT_SUPPORTED,
                    format!("SASL mechanism {mechanism} not supported"),
                ));
            }
            let Transport::Ldapi { uid, gid } = session.transport else {
                return Err(OperationError::new(
                    code::INAPPROPRIATE_AUTHENTICATION,
                    "SASL EXTERNAL is only available over ldapi://",
                ));
            };
            // Local root is the rootdn only where one is configured; without one it is the
            // peercred identity slapd gives it, with what the rules grant that DN (it was an
            // empty-DN "rootdn": every check bypassed, yet anonymous to Who am I?, the
            // accesslog and the limits).
            let rootdn = settings.rootdn.clone();
            let authenticated = if uid == 0 && !rootdn.is_empty() {
                Identity {
                    normalized_dn: normalized_identity_dn(server, &rootdn),
                    dn: rootdn,
                    is_rootdn: true,
                }
            } else {
                let base = crate::identity::PEERCRED_BASE;
                let dn = format!("gidNumber={gid}+uidNumber={uid},{base}");
                Identity {
                    normalized_dn: dn.to_lowercase(),
                    dn,
                    is_rootdn: false,
                }
            };
            external_authorization(server, settings.clone(), authenticated, credentials).await
        }
        BindCredentials::Simple(password) => {
            simple_bind(server, settings, session, dn, password, policy_response).await
        }
    }
}

/// SASL EXTERNAL's authorization identity (RFC 4422 §3.4.1, RFC 4513 §5.2.3): none (empty
/// credentials) is the authenticated identity; one the client names is granted only as the
/// proxied authorization control would grant it (oneself; the rootdn any DN of the database;
/// authzTo / authzFrom under `authz_policy`), else the bind fails with insufficientAccessRights
/// (50), as slapd answers it.
async fn external_authorization(
    server: &Arc<ServerContext>,
    settings: Arc<ServerSettings>,
    authenticated: Identity,
    authz_id: &[u8],
) -> Result<Identity, OperationError> {
    if authz_id.is_empty() {
        return Ok(authenticated);
    }
    crate::proxy_authz::authorized_identity(server, settings, authenticated, authz_id.to_vec())
        .await
        .map_err(|error| match error.code {
            code::AUTHORIZATION_DENIED => OperationError::new(
                code::INSUFFICIENT_ACCESS_RIGHTS,
                format!("SASL authorization failure: {}", error.message),
            ),
            _ => error,
        })
}

/// A simple bind (RFC 4513 §5.1). Binds that check a password are throttled per client and
/// bind DN: once that pair's failures exceed `bind_failure_burst` (or the client's, over all
/// DNs, `bind_failure_address_burst`), its binds wait (whatever their outcome, so the wait
/// tells nothing) before the password is checked.
async fn simple_bind(
    server: &Arc<ServerContext>,
    settings: &ServerSettings,
    session: &Session,
    dn: &str,
    password: &[u8],
    policy_response: &mut Option<PolicyResponse>,
) -> Result<Identity, OperationError> {
    if dn.is_empty() {
        if password.is_empty() {
            if settings.disallow_anonymous_bind {
                // slapd's `disallow bind_anon`: the same code and text.
                return Err(OperationError::new(
                    code::INAPPROPRIATE_AUTHENTICATION,
                    "anonymous bind disallowed",
                ));
            }
            return Ok(Identity::default());
        }
        return Err(OperationError::new(
            code::INVALID_CREDENTIALS,
            "a password needs a bind DN",
        ));
    }
    if password.is_empty() {
        // RFC 4513 §5.1.2: an unauthenticated bind is never a login; refused like OpenLDAP.
        return Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "unauthenticated bind (DN with no password) disallowed",
        ));
    }
    if settings.require_tls && !session.is_secure() {
        return Err(OperationError::new(
            code::CONFIDENTIALITY_REQUIRED,
            "TLS is required before a simple bind",
        ));
    }
    // Normalized once: the throttle's key, the rootdn check and the entry's lookup.
    let normalized = database_of(server).map(|database| database.normalize_entry_dn(dn));
    let throttle_normalized = normalized.as_ref().and_then(|result| result.as_ref().ok());
    throttled(
        server,
        session,
        dn,
        throttle_normalized.map(String::as_str),
        check_password(
            server,
            settings,
            session.client,
            dn,
            normalized.clone(),
            password,
            policy_response,
        ),
    )
    .await
}

/// Runs a password check of `dn` under the failed-bind throttle (binds and Password Modify's old
/// password alike), per (client, DN): one user's typos do not slow the others behind a shared
/// client, while the client's own, larger budget still slows guessing across many DNs. Once
/// either is spent, every check waits first (whatever its outcome, so the wait tells nothing),
/// and a failure costs a token of both.
/// `normalized` is `dn` as the database normalizes it, when it does (else the key is `dn`
/// lowercased).
pub(crate) async fn throttled<T>(
    server: &ServerContext,
    session: &Session,
    dn: &str,
    normalized: Option<&str>,
    check: impl std::future::Future<Output = Result<T, OperationError>>,
) -> Result<T, OperationError> {
    let lowered;
    let throttle_dn = match normalized {
        Some(normalized) => normalized,
        None => {
            lowered = dn.to_ascii_lowercase();
            &lowered
        }
    };
    let ticket = server.bind_throttle.admit(session.client, throttle_dn);
    if !ticket.delay.is_zero() {
        info!(
            "conn={} password check of dn=\"{}\" from {} throttled for {} ms after repeated failures",
            session.connection_id,
            crate::log_text::escaped(dn),
            session.client,
            ticket.delay.as_millis()
        );
        tokio::time::sleep(ticket.delay).await;
    }
    let outcome = check.await;
    server.bind_throttle.settle(ticket, outcome.is_ok());
    outcome
}

/// The identity `dn` binds as with `password`: the rootdn against `rootpw`, anyone else against
/// their entry's `userPassword`. `normalized` is the database's normalization of `dn` (None
/// without a database), made once by the caller for the throttle, the rootdn check, the
/// entry's lookup and the identity alike.
async fn check_password(
    server: &Arc<ServerContext>,
    settings: &ServerSettings,
    client: ClientKey,
    dn: &str,
    normalized: Option<Result<String, OperationError>>,
    password: &[u8],
    policy_response: &mut Option<PolicyResponse>,
) -> Result<Identity, OperationError> {
    let database = database_of(server);
    if !settings.rootpw.is_empty() && names_rootdn(server, settings, dn, normalized.as_ref()) {
        let stored = vec![settings.rootpw.as_bytes().to_vec()];
        return if any_password_matches(server, client, stored, password, Some(dn)).await? {
            let normalized_dn = match normalized {
                Some(Ok(normalized)) => normalized,
                _ => normalized_identity_dn(server, dn),
            };
            Ok(Identity {
                dn: dn.to_string(),
                normalized_dn,
                is_rootdn: true,
            })
        } else {
            Err(OperationError::new(code::INVALID_CREDENTIALS, ""))
        };
    }
    match (database, normalized) {
        (Some(database), Some(Ok(normalized))) => {
            let checker = Checker {
                server,
                settings,
                database,
                client,
            };
            bind_entry(&checker, dn, normalized, password, policy_response).await
        }
        _ => Err(OperationError::new(code::INVALID_CREDENTIALS, "")),
    }
}

/// Whether the bind DN `dn` (`normalized` by the database, when there is one) is the rootdn:
/// `same_dn`'s answer, from the rootdn normalized when the server started.
fn names_rootdn(
    server: &ServerContext,
    settings: &ServerSettings,
    dn: &str,
    normalized: Option<&Result<String, OperationError>>,
) -> bool {
    match (normalized, &server.rootdn_normalized) {
        (Some(Ok(normalized)), Some(rootdn)) => normalized == rootdn,
        _ => same_dn(server, dn, &settings.rootdn),
    }
}
