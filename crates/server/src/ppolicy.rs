//! Password policy (draft-behera, as OpenLDAP's ppolicy overlay does it): policies are
//! `pwdPolicy` entries, chosen per entry by `pwdPolicySubentry` or else by the configured
//! default, read from the store at each bind (one point read). This module holds the pure
//! decisions (lockout, expiry, grace logins), the state update the writer applies inside its
//! transaction, and the response control's encoding.
//!
//! Failed binds must not let an attacker turn guesses into a write storm: at most one state
//! update per entry is pending at a time (`PendingStates`); further failures for that entry
//! merge into it, and every bind waits for the commit that records it.

use crate::ber::ResponseControl;
use crate::request::Operation;
use crate::result::{code, OperationError};
use ldap3_proto::proto::{LdapModifyRequest, LdapOp, LdapSearchScope};
use lmdir_schema::{generalized_time_unix_seconds, AttrId, ModOp, Modification, Schema};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// The password policy's operational attributes OpenLDAP's schema lets users write (the others
/// are NO-USER-MODIFICATION): the policy an entry falls under, its lock, its must-change flag
/// and its validity window. The writer never lets an entry write its own.
pub(crate) const USER_WRITABLE_STATE: &[&str] = &[
    "pwdPolicySubentry",
    "pwdAccountLockedTime",
    "pwdReset",
    "pwdStartTime",
    "pwdEndTime",
];

pub use crate::controls::PASSWORD_POLICY_OID;
/// Entries with a state update waiting for the writer at once. Past it, a failure is written
/// without a shared slot (its bind still waits for the commit: the writer's queue bounds that).
pub const PENDING_STATE_ENTRIES_MAX: usize = 4096;
/// Failure timestamps kept when the policy sets no pwdMaxFailure (OpenLDAP's default of
/// pwdMaxRecordedFailure).
const RECORDED_FAILURES_DEFAULT: usize = 5;
/// Most old passwords kept in pwdHistory and checked against a new one, whatever pwdInHistory
/// says: each check may be a slow hash, and the entry must not grow without bound.
pub const PASSWORD_HISTORY_MAX: usize = 64;
/// pwdHistory's syntax field: the old value is stored as an octet string.
const HISTORY_SYNTAX_OID: &str = "1.3.6.1.4.1.1466.115.121.1.40";
/// Failure timestamps kept whatever the policy says: an entry never grows without bound.
const RECORDED_FAILURES_MAX: usize = 1000;

/// The response control's error values (draft-behera §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyError {
    PasswordExpired = 0,
    AccountLocked = 1,
    ChangeAfterReset = 2,
    PasswordModNotAllowed = 3,
    MustSupplyOldPassword = 4,
    InsufficientPasswordQuality = 5,
    PasswordTooShort = 6,
    PasswordTooYoung = 7,
    PasswordInHistory = 8,
}

/// The response control's warning (draft-behera §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyWarning {
    TimeBeforeExpiration(u64),
    GraceAuthNsRemaining(u64),
}

/// What a response control says; empty when nothing is to be said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyResponse {
    pub warning: Option<PolicyWarning>,
    pub error: Option<PolicyError>,
}

impl PolicyResponse {
    /// The control's BER value: `SEQUENCE { warning [0] CHOICE OPTIONAL, error [1] OPTIONAL }`.
    pub fn encode(&self) -> Vec<u8> {
        let mut content = Vec::new();
        if let Some(warning) = self.warning {
            let (tag, value) = match warning {
                PolicyWarning::TimeBeforeExpiration(seconds) => (0x80, seconds),
                PolicyWarning::GraceAuthNsRemaining(count) => (0x81, count),
            };
            let inner = tagged(tag, &integer_content(value));
            content.extend(tagged(0xa0, &inner));
        }
        if let Some(error) = self.error {
            content.extend(tagged(0x81, &integer_content(error as u64)));
        }
        tagged(0x30, &content)
    }

    pub fn control(&self) -> ResponseControl {
        ResponseControl {
            oid: PASSWORD_POLICY_OID.to_string(),
            criticality: false,
            value: Some(self.encode()),
        }
    }
}

fn tagged(tag: u8, content: &[u8]) -> Vec<u8> {
    // Contents here are a few bytes: the short length form always fits.
    let mut out = vec![tag, content.len() as u8];
    out.extend_from_slice(content);
    out
}

/// Minimal two's-complement bytes of a non-negative integer.
fn integer_content(value: u64) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    let first = bytes
        .iter()
        .position(|byte| *byte != 0)
        .unwrap_or(bytes.len() - 1);
    let mut out = bytes[first..].to_vec();
    if out[0] & 0x80 != 0 {
        out.insert(0, 0);
    }
    out
}

/// The policy values lmdir enforces, read from a pwdPolicy entry (absent = 0 / FALSE, as in
/// draft-behera; durations in seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    pub max_failure: u64,
    pub lockout: bool,
    pub lockout_duration_seconds: u64,
    pub failure_count_interval_seconds: u64,
    pub max_age_seconds: u64,
    pub expire_warning_seconds: u64,
    pub grace_authn_limit: u64,
    /// Fewest characters in a new cleartext password (checked when check_quality > 0).
    pub min_length: u64,
    /// pwdCheckQuality: 0 = no quality checks, 1 = check what can be (hashed values pass),
    /// 2 = check or refuse.
    pub check_quality: u64,
    /// pwdAllowUserChange (absent = TRUE, as draft-behera's default).
    pub allow_user_change: bool,
    /// pwdSafeModify: a user's change must prove the old password.
    pub safe_modify: bool,
    /// Seconds a password must be kept before its owner changes it again.
    pub min_age_seconds: u64,
    /// pwdMustChange: a password set by an administrator must be changed by its owner.
    pub must_change: bool,
    /// Old passwords a new one must differ from (capped at `PASSWORD_HISTORY_MAX`).
    pub in_history: usize,
}

impl Policy {
    /// Reads a policy through `first_value` (the entry's first value of an attribute).
    pub fn read(schema: &Schema, first_value: impl Fn(AttrId) -> Option<Vec<u8>>) -> Policy {
        let value = |name: &str| schema.attribute(name).and_then(&first_value);
        let number = |name: &str| {
            value(name)
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .and_then(|text| text.trim().parse::<i64>().ok())
                .map_or(0, |number| number.max(0) as u64)
        };
        Policy {
            max_failure: number("pwdMaxFailure"),
            lockout: value("pwdLockout").is_some_and(|bytes| bytes.eq_ignore_ascii_case(b"TRUE")),
            lockout_duration_seconds: number("pwdLockoutDuration"),
            failure_count_interval_seconds: number("pwdFailureCountInterval"),
            max_age_seconds: number("pwdMaxAge"),
            expire_warning_seconds: number("pwdExpireWarning"),
            grace_authn_limit: number("pwdGraceAuthNLimit"),
            min_length: number("pwdMinLength"),
            check_quality: number("pwdCheckQuality"),
            allow_user_change: value("pwdAllowUserChange")
                .is_none_or(|bytes| bytes.eq_ignore_ascii_case(b"TRUE")),
            safe_modify: value("pwdSafeModify")
                .is_some_and(|bytes| bytes.eq_ignore_ascii_case(b"TRUE")),
            min_age_seconds: number("pwdMinAge"),
            in_history: (number("pwdInHistory") as usize).min(PASSWORD_HISTORY_MAX),
            must_change: value("pwdMustChange")
                .is_some_and(|bytes| bytes.eq_ignore_ascii_case(b"TRUE")),
        }
    }

    /// The policy an entry holds when it is a pwdPolicy entry (`values`: every stored value
    /// of an attribute, as `AccountState::read` takes them).
    pub fn of_entry(schema: &Schema, values: impl Fn(AttrId) -> Vec<Vec<u8>>) -> Option<Policy> {
        let object_class = schema.attribute("objectClass")?;
        let is_policy = values(object_class)
            .iter()
            .any(|value| value.eq_ignore_ascii_case(b"pwdPolicy"));
        is_policy.then(|| Policy::read(schema, |attr| values(attr).into_iter().next()))
    }

    /// The policy of an entry: its pwdPolicySubentry (`own`) when that names a pwdPolicy
    /// entry, else `default`; `lookup` reads the policy at a DN (None: no pwdPolicy there). A
    /// subentry naming some other entry does not turn the policy off: the default applies.
    pub fn resolve(
        own: Option<String>,
        default: &str,
        lookup: impl Fn(&str) -> Option<Policy>,
    ) -> Option<Policy> {
        let at = |dn: &str| if dn.is_empty() { None } else { lookup(dn) };
        own.and_then(|dn| at(&dn)).or_else(|| at(default))
    }

    fn recorded_failures_max(&self) -> usize {
        match self.max_failure {
            0 => RECORDED_FAILURES_DEFAULT,
            max => (max as usize).min(RECORDED_FAILURES_MAX),
        }
    }
}

/// A password change as the policy judges it (not by a password administrator).
pub struct PasswordChange<'a> {
    /// The entry changes its own password.
    pub by_self: bool,
    /// The old password was given (Password Modify's oldPasswd, or a delete of the old value).
    pub old_supplied: bool,
    pub new_passwords: Vec<&'a [u8]>,
}

/// slapd's text for a change setting more than one password value.
pub const ONE_VALUE_ONLY: &str = "Password policy only allows one password value";

/// Why a change is refused: the result code, slapd's text, and the control's error (None:
/// the control says nothing, as slapd's for more than one value).
pub type Refusal = (u32, &'static str, Option<PolicyError>);

/// The checks of a password change in OpenLDAP's order: one new value, pwdAllowUserChange
/// (own password only), pwdSafeModify, pwdMinAge, then quality (pwdCheckQuality with
/// pwdMinLength).
pub fn change_refusal(
    policy: &Policy,
    state: &AccountState,
    change: &PasswordChange<'_>,
    now: i64,
) -> Option<Refusal> {
    // As slapd's ppolicy: one new value per change. It also bounds what the history check
    // verifies (each new value against every kept password: 400,000 values of one modify
    // were each verified before).
    if change.new_passwords.len() > 1 {
        return Some((code::CONSTRAINT_VIOLATION, ONE_VALUE_ONLY, None));
    }
    if change.by_self && !policy.allow_user_change {
        return Some((
            code::INSUFFICIENT_ACCESS_RIGHTS,
            "User alteration of password is not allowed",
            Some(PolicyError::PasswordModNotAllowed),
        ));
    }
    if policy.safe_modify && !change.old_supplied {
        return Some((
            code::INSUFFICIENT_ACCESS_RIGHTS,
            "Must supply old password to be changed as well as new one",
            Some(PolicyError::MustSupplyOldPassword),
        ));
    }
    if is_too_young(policy, state, now) {
        return Some((
            code::CONSTRAINT_VIOLATION,
            TOO_YOUNG,
            Some(PolicyError::PasswordTooYoung),
        ));
    }
    change
        .new_passwords
        .iter()
        .find_map(|password| quality_failure(policy, password))
        .map(|failure| {
            (
                code::CONSTRAINT_VIOLATION,
                "Password fails quality checking policy",
                Some(failure),
            )
        })
}

/// pwdMinAge: the password was changed less than the policy's minimum age ago, and not reset
/// by an administrator since (slapd checks the age only while pwdReset is not TRUE: the owner
/// of a reset password must be able to change it at once). Judged before
/// the writer with the rest of `change_refusal`, and again by the writer inside its
/// transaction (`Writer::note_password_change`), where a change queued or racing beside it
/// has already set pwdChangedTime.
pub fn is_too_young(policy: &Policy, state: &AccountState, now: i64) -> bool {
    policy.min_age_seconds > 0
        && !state.reset
        && state.changed_at.is_some_and(|changed_at| {
            now.saturating_sub(changed_at) < policy.min_age_seconds as i64
        })
}

/// The refusal of a password change `is_too_young` holds back.
pub const TOO_YOUNG: &str = "Password is too young to change";

/// pwdCheckQuality: 0 checks nothing; a hashed value cannot be measured, so it passes under
/// 1 and is refused under 2; a cleartext one must have pwdMinLength characters.
fn quality_failure(policy: &Policy, password: &[u8]) -> Option<PolicyError> {
    match policy.check_quality {
        0 => None,
        quality if lmdir_access::password::is_hashed(password) => {
            (quality >= 2).then_some(PolicyError::InsufficientPasswordQuality)
        }
        _ => {
            let length = String::from_utf8_lossy(password).chars().count() as u64;
            (length < policy.min_length).then_some(PolicyError::PasswordTooShort)
        }
    }
}

/// A pwdHistory value as OpenLDAP writes it: `time#syntax#length#old value`, the time to the
/// microsecond so changes within one second keep their order.
pub fn history_value(at: SystemTime, old: &[u8]) -> Vec<u8> {
    let mut value = lmdir_store::precise_timestamp_value(at);
    value.extend_from_slice(format!("#{HISTORY_SYNTAX_OID}#{}#", old.len()).as_bytes());
    value.extend_from_slice(old);
    value
}

/// The old password inside a pwdHistory value (None when malformed).
pub fn history_password(value: &[u8]) -> Option<&[u8]> {
    let mut fields = value.splitn(4, |byte| *byte == b'#');
    let (_time, _syntax, length) = (fields.next()?, fields.next()?, fields.next()?);
    let old = fields.next()?;
    let length: usize = std::str::from_utf8(length).ok()?.parse().ok()?;
    (old.len() == length).then_some(old)
}

/// pwdHistory after a change that replaced `old` passwords: the stored history plus one value
/// per old password, the most recent `in_history` kept.
pub fn updated_history(
    stored: Vec<Vec<u8>>,
    old: &[Vec<u8>],
    in_history: usize,
    at: SystemTime,
) -> Vec<Vec<u8>> {
    let mut history: Vec<Vec<u8>> = stored
        .into_iter()
        .chain(old.iter().map(|password| history_value(at, password)))
        .collect();
    // Values start with their generalized time: byte order is time order.
    history.sort();
    history.dedup();
    let excess = history.len().saturating_sub(in_history);
    history.drain(..excess);
    history
}

/// Seconds since the epoch.
pub fn unix_seconds(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

/// A stored timestamp: its seconds (for the policy's arithmetic) and its value as stored.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StoredTime {
    pub seconds: i64,
    pub value: Vec<u8>,
}

impl StoredTime {
    fn new(at: SystemTime) -> StoredTime {
        StoredTime {
            seconds: unix_seconds(at),
            value: lmdir_store::precise_timestamp_value(at),
        }
    }
}

/// The pwdAccountLockedTime of an account locked by an administrator until unlocked.
pub const PERMANENT_LOCK_VALUE: &[u8] = b"000001010000Z";

/// An entry's password policy state, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountState {
    pub locked_at: Option<i64>,
    pub failures: Vec<StoredTime>,
    pub changed_at: Option<i64>,
    pub grace_uses: u64,
    /// pwdReset TRUE: the password was set by an administrator.
    pub reset: bool,
}

impl AccountState {
    /// Reads the state through `values` (every stored value of an attribute); values that
    /// are not generalized times are ignored.
    pub fn read(schema: &Schema, values: impl Fn(AttrId) -> Vec<Vec<u8>>) -> AccountState {
        let times = |name: &str| -> Vec<StoredTime> {
            schema.attribute(name).map_or_else(Vec::new, |attr| {
                values(attr)
                    .into_iter()
                    .filter_map(|value| {
                        let seconds = generalized_time_unix_seconds(&value).ok()?;
                        Some(StoredTime { seconds, value })
                    })
                    .collect()
            })
        };
        let first = |name: &str| times(name).first().map(|time| time.seconds);
        AccountState {
            locked_at: first("pwdAccountLockedTime"),
            failures: times("pwdFailureTime"),
            changed_at: first("pwdChangedTime"),
            grace_uses: times("pwdGraceUseTime").len() as u64,
            reset: schema.attribute("pwdReset").is_some_and(|attr| {
                values(attr)
                    .first()
                    .is_some_and(|value| value.eq_ignore_ascii_case(b"TRUE"))
            }),
        }
    }

    /// Whether the account is locked at `now` (a duration of 0 locks until an administrator
    /// deletes pwdAccountLockedTime).
    pub fn is_locked(&self, policy: &Policy, now: i64) -> bool {
        let Some(locked_at) = self.locked_at else {
            return false;
        };
        // draft-behera: 000001010000Z locks until an administrator unlocks, whatever the
        // lockout duration (SCIM's active = false writes it).
        if generalized_time_unix_seconds(PERMANENT_LOCK_VALUE).ok() == Some(locked_at) {
            return true;
        }
        policy.lockout_duration_seconds == 0
            || now < locked_at.saturating_add(policy.lockout_duration_seconds as i64)
    }

    /// Whether the account is locked at `now`, or will be once `pending` failures (recorded
    /// by concurrent binds, not committed yet) are: with the stored ones inside
    /// pwdFailureCountInterval they reach pwdMaxFailure under pwdLockout.
    pub fn is_locked_with(&self, policy: &Policy, pending: &[StoredTime], now: i64) -> bool {
        if self.is_locked(policy, now) {
            return true;
        }
        if pending.is_empty() || !policy.lockout || policy.max_failure == 0 {
            return false;
        }
        let interval = policy.failure_count_interval_seconds as i64;
        let recent = self
            .failures
            .iter()
            .filter(|at| interval == 0 || now.saturating_sub(at.seconds) < interval)
            .count();
        (recent + pending.len()) as u64 >= policy.max_failure
    }
}

/// How a bind with the right password ends under a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Bound; a grace login when `grace_login` (its use is recorded).
    Bound {
        response: PolicyResponse,
        grace_login: bool,
    },
    /// Expired without grace logins left: invalidCredentials with passwordExpired.
    Expired,
}

/// Whether the password is past `pwdMaxAge` at `now` (grace logins aside: they are for
/// changing it). No pwdChangedTime or no pwdMaxAge: never.
pub fn is_expired(policy: &Policy, state: &AccountState, now: i64) -> bool {
    let max_age = policy.max_age_seconds;
    state
        .changed_at
        .filter(|_| max_age > 0)
        .is_some_and(|changed_at| now.saturating_sub(changed_at).max(0) as u64 >= max_age)
}

/// Expiry of a right password at `now`: warnings, grace logins, or refusal. No
/// pwdChangedTime or no pwdMaxAge: the password never expires.
pub fn verdict(policy: &Policy, state: &AccountState, now: i64) -> Verdict {
    let mut response = PolicyResponse::default();
    if policy.must_change && state.reset {
        // Bound so the password can be changed; the client is told it must be, and the
        // connection is restricted to that change (`change_after_reset_refusal`).
        response.error = Some(PolicyError::ChangeAfterReset);
        return Verdict::Bound {
            response,
            grace_login: false,
        };
    }
    let max_age = policy.max_age_seconds;
    let Some(changed_at) = state.changed_at.filter(|_| max_age > 0) else {
        return Verdict::Bound {
            response,
            grace_login: false,
        };
    };
    let age = now.saturating_sub(changed_at).max(0) as u64;
    if age >= max_age {
        if state.grace_uses < policy.grace_authn_limit {
            let remaining = policy.grace_authn_limit - state.grace_uses - 1;
            response.warning = Some(PolicyWarning::GraceAuthNsRemaining(remaining));
            return Verdict::Bound {
                response,
                grace_login: true,
            };
        }
        return Verdict::Expired;
    }
    let left = max_age - age;
    if policy.expire_warning_seconds > 0 && left <= policy.expire_warning_seconds {
        response.warning = Some(PolicyWarning::TimeBeforeExpiration(left));
    }
    Verdict::Bound {
        response,
        grace_login: false,
    }
}

/// slapd's text for an operation refused on a connection that must change its password first.
pub const CHANGE_AFTER_RESET_TEXT: &str =
    "Operations are restricted to bind/unbind/abandon/StartTLS/modify password";

/// What a connection bound with a reset password (pwdMustChange) may still do, as slapd's
/// ppolicy overlay decides it: bind, unbind, abandon and every extended operation (StartTLS,
/// Who am I?, Password Modify), reading the root DSE and the subschema, and a modify that
/// touches only the password and operational attributes (`password_only`). Anything else is
/// refused with insufficientAccess; the changeAfterReset control goes with the refusal of an
/// add or modify that asked for it (`wants_control`), the operations slapd takes the request
/// control on. One deliberate difference: slapd lets modrdn through, lmdir refuses it (the
/// password is the only change allowed until it is made; docs/compatibility.md).
pub fn change_after_reset_refusal(
    operation: &Operation,
    password_only: impl FnOnce(&LdapModifyRequest) -> bool,
    wants_control: bool,
) -> Option<OperationError> {
    let allowed = match operation {
        Operation::Search(request) => {
            let root_dse = request.base.is_empty() && request.scope == LdapSearchScope::Base;
            root_dse || request.base.trim().eq_ignore_ascii_case("cn=subschema")
        }
        Operation::Other(LdapOp::ExtendedRequest(_))
        | Operation::Bind(_)
        | Operation::NotUtf8(_) => true,
        Operation::Other(LdapOp::ModifyRequest(request)) => password_only(request),
        Operation::Other(
            LdapOp::AddRequest(_)
            | LdapOp::DelRequest(_)
            | LdapOp::ModifyDNRequest(_)
            | LdapOp::CompareRequest(_),
        ) => false,
        // Not requests: `dispatch` answers them.
        Operation::Other(_) => true,
    };
    if allowed {
        return None;
    }
    let refusal = OperationError::new(code::INSUFFICIENT_ACCESS_RIGHTS, CHANGE_AFTER_RESET_TEXT);
    let takes_control = matches!(
        operation,
        Operation::Other(LdapOp::AddRequest(_) | LdapOp::ModifyRequest(_))
    );
    Some(if wants_control && takes_control {
        let response = PolicyResponse {
            warning: None,
            error: Some(PolicyError::ChangeAfterReset),
        };
        refusal.with_control(response.control())
    } else {
        refusal
    })
}

/// A state change the writer applies to one entry, decided against the entry as its
/// transaction sees it (never access-checked as the user: it is the server's own update).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateUpdate {
    pub dn: String,
    pub policy: Policy,
    /// Failed binds to record, merged from concurrent failures (at most the policy's cap).
    pub failures: Vec<StoredTime>,
    /// A bind succeeded: failures are cleared (and an expired lock removed).
    pub success: bool,
    /// A grace login at this time.
    pub grace_use_at: Option<SystemTime>,
}

impl StateUpdate {
    /// An update recording one failed bind at `at`.
    pub fn failure(dn: &str, policy: Policy, at: SystemTime) -> StateUpdate {
        StateUpdate {
            dn: dn.to_string(),
            policy,
            failures: vec![StoredTime::new(at)],
            success: false,
            grace_use_at: None,
        }
    }

    /// Merges another failure (the pending slot's coalescing); only the most recent
    /// failures up to the policy's cap are kept, so a burst costs no memory.
    fn add_failure(&mut self, at: SystemTime) {
        if self.failures.len() >= self.policy.recorded_failures_max() {
            self.failures.remove(0);
        }
        self.failures.push(StoredTime::new(at));
    }

    /// The modifications that bring `state` (the entry in the writer's transaction) up to
    /// date at `now`; empty when nothing changes.
    pub fn modifications(&self, state: &AccountState, now: SystemTime) -> Vec<Modification> {
        let seconds = unix_seconds(now);
        let mut changes = Vec::new();
        if self.success {
            if !state.failures.is_empty() {
                changes.push(replace("pwdFailureTime", Vec::new()));
            }
            if state.locked_at.is_some() && !state.is_locked(&self.policy, seconds) {
                changes.push(replace("pwdAccountLockedTime", Vec::new()));
            }
        }
        if let Some(at) = self.grace_use_at {
            changes.push(Modification {
                op: ModOp::Add,
                description: "pwdGraceUseTime".to_string(),
                values: vec![StoredTime::new(at).value],
            });
        }
        if !self.failures.is_empty() {
            changes.extend(self.failure_changes(state, seconds));
        }
        changes
    }

    /// pwdFailureTime: the stored failures still inside pwdFailureCountInterval plus the new
    /// ones, the most recent up to the cap; pwdAccountLockedTime once they reach pwdMaxFailure.
    fn failure_changes(&self, state: &AccountState, now: i64) -> Vec<Modification> {
        let policy = &self.policy;
        let interval = policy.failure_count_interval_seconds as i64;
        let mut times: Vec<StoredTime> = state
            .failures
            .iter()
            .filter(|at| interval == 0 || now.saturating_sub(at.seconds) < interval)
            .chain(self.failures.iter())
            .cloned()
            .collect();
        times.sort();
        times.dedup_by(|later, earlier| later.value == earlier.value);
        let keep = policy.recorded_failures_max();
        if times.len() > keep {
            times.drain(..times.len() - keep);
        }
        let count = times.len() as u64;
        let mut changes = vec![replace(
            "pwdFailureTime",
            times.into_iter().map(|time| time.value).collect(),
        )];
        let reaches_max = policy.max_failure > 0 && count >= policy.max_failure;
        if policy.lockout && reaches_max && !state.is_locked(policy, now) {
            let locked_at = UNIX_EPOCH + Duration::from_secs(now.max(0) as u64);
            changes.push(replace(
                "pwdAccountLockedTime",
                vec![lmdir_store::timestamp_value(locked_at)],
            ));
        }
        changes
    }
}

fn replace(description: &str, values: Vec<Vec<u8>>) -> Modification {
    Modification {
        op: ModOp::Replace,
        description: description.to_string(),
        values,
    }
}

/// The pending state updates, one per entry (normalized DN): a failed bind merges into the
/// entry's pending update when there is one, else opens one and submits it. Each update's
/// waiters learn of its commit through a watch channel.
#[derive(Default)]
pub struct PendingStates {
    slots: Mutex<HashMap<String, PendingSlot>>,
}

/// One entry's pending update and the channel its commit is announced on.
type PendingSlot = (StateUpdate, Arc<watch::Sender<bool>>);

/// What a bind does with its failure: submit a new update, or wait on a pending one.
pub enum Slot {
    /// Queue the entry's update, then announce its commit on this channel.
    Submit(Arc<watch::Sender<bool>>),
    Merged(watch::Receiver<bool>),
    /// The table is full: write this update on its own.
    Unshared,
}

impl PendingStates {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PendingSlot>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a failure of `dn` at `now` under `policy`.
    pub fn fail(&self, dn: &str, policy: Policy, now: SystemTime) -> Slot {
        let mut slots = self.lock();
        if let Some((update, done)) = slots.get_mut(dn) {
            update.add_failure(now);
            return Slot::Merged(done.subscribe());
        }
        if slots.len() >= PENDING_STATE_ENTRIES_MAX {
            return Slot::Unshared;
        }
        let done = Arc::new(watch::channel(false).0);
        let update = StateUpdate::failure(dn, policy, now);
        slots.insert(dn.to_string(), (update, done.clone()));
        Slot::Submit(done)
    }

    /// The failures of `dn` merged into its pending update, not yet taken by the writer.
    pub fn pending_failures(&self, dn: &str) -> Vec<StoredTime> {
        self.lock()
            .get(dn)
            .map(|(update, _)| update.failures.clone())
            .unwrap_or_default()
    }

    /// Takes the pending update of `dn` for the writer (later failures open a new one).
    pub fn take(&self, dn: &str) -> Option<PendingSlot> {
        self.lock().remove(dn)
    }
}

/// Held by the bind that opened a slot until its update is committed. Dropped (after the
/// commit, or early when the bind is abandoned before its job is queued or when the writer
/// answered without applying it), it removes the slot if the writer never took it, so no
/// failure merges into an update that will never be written, and it wakes the merged binds.
pub struct SlotGuard<'a> {
    pub pending: &'a PendingStates,
    pub dn: String,
    pub done: Arc<watch::Sender<bool>>,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut slots = self.pending.lock();
        let ours = slots
            .get(&self.dn)
            .is_some_and(|(_, done)| Arc::ptr_eq(done, &self.done));
        if ours {
            slots.remove(&self.dn);
        }
        drop(slots);
        self.done.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An administrator's lock (000001010000Z) holds whatever the lockout duration.
    #[test]
    fn the_permanent_lock_value_locks_until_unlocked() {
        let schema = Schema::builtin();
        let locked = schema.attribute("pwdAccountLockedTime").expect("attribute");
        let state = AccountState::read(&schema, |attr| {
            if attr == locked {
                vec![PERMANENT_LOCK_VALUE.to_vec()]
            } else {
                Vec::new()
            }
        });
        assert!(state.locked_at.is_some(), "year 0 parses");
        let policy = Policy {
            lockout_duration_seconds: 60,
            ..Policy::default()
        };
        assert!(state.is_locked(&policy, 4_000_000_000));
    }

    #[test]
    fn the_response_control_encodes_as_draft_behera_says() {
        let warning = PolicyResponse {
            warning: Some(PolicyWarning::TimeBeforeExpiration(300)),
            error: None,
        };
        assert_eq!(
            warning.encode(),
            [0x30, 0x06, 0xa0, 0x04, 0x80, 0x02, 0x01, 0x2c]
        );
        let locked = PolicyResponse {
            warning: None,
            error: Some(PolicyError::AccountLocked),
        };
        assert_eq!(locked.encode(), [0x30, 0x03, 0x81, 0x01, 0x01]);
        let grace = PolicyResponse {
            warning: Some(PolicyWarning::GraceAuthNsRemaining(0)),
            error: None,
        };
        assert_eq!(grace.encode(), [0x30, 0x05, 0xa0, 0x03, 0x81, 0x01, 0x00]);
        // 128 needs a leading zero byte to stay positive.
        assert_eq!(integer_content(128), [0x00, 0x80]);
        assert_eq!(PolicyResponse::default().encode(), [0x30, 0x00]);
    }

    fn failure_at(seconds: i64) -> StoredTime {
        StoredTime::new(UNIX_EPOCH + Duration::from_secs(seconds as u64))
    }

    fn lockout_policy(interval: u64) -> Policy {
        Policy {
            max_failure: 3,
            lockout: true,
            failure_count_interval_seconds: interval,
            ..Policy::default()
        }
    }

    /// A right guess checked while wrong ones of the same burst are still pending: with the
    /// stored failures they reach pwdMaxFailure, so the account counts as locked (the review
    /// found the re-read after a match saw committed failures only). Failures outside the
    /// count interval do not count, and nothing pending leaves the stored state's verdict.
    #[test]
    fn pending_failures_that_reach_the_maximum_lock() {
        let now = 1_000_000;
        let policy = lockout_policy(3600);
        let state = AccountState {
            failures: vec![failure_at(now - 7200), failure_at(now - 10)],
            ..AccountState::default()
        };
        assert!(!state.is_locked_with(&policy, &[], now));
        assert!(!state.is_locked_with(&policy, &[failure_at(now)], now));
        assert!(state.is_locked_with(&policy, &[failure_at(now), failure_at(now - 1)], now));
        let without_lockout = Policy {
            lockout: false,
            ..policy
        };
        let pending = [failure_at(now), failure_at(now - 1), failure_at(now - 2)];
        assert!(!state.is_locked_with(&without_lockout, &pending, now));
        let pending_states = PendingStates::default();
        let _slot = pending_states.fail("uid=x", policy, UNIX_EPOCH);
        let _merged = pending_states.fail("uid=x", policy, UNIX_EPOCH);
        assert_eq!(pending_states.pending_failures("uid=x").len(), 2);
        assert!(pending_states.pending_failures("uid=y").is_empty());
    }

    #[test]
    fn failures_outside_the_count_interval_are_forgotten() {
        let now = 1_000_000;
        let state = AccountState {
            failures: vec![failure_at(now - 7200), failure_at(now - 10)],
            ..AccountState::default()
        };
        let update = |interval| StateUpdate {
            dn: "uid=x".to_string(),
            policy: lockout_policy(interval),
            failures: vec![failure_at(now)],
            success: false,
            grace_use_at: None,
        };
        let at = UNIX_EPOCH + Duration::from_secs(now as u64);
        // Within an hour only one earlier failure counts: two recorded, no lock.
        let changes = update(3600).modifications(&state, at);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].values.len(), 2);
        // No interval: all three count and the account locks.
        let changes = update(0).modifications(&state, at);
        assert_eq!(changes[0].values.len(), 3);
        assert_eq!(changes[1].description, "pwdAccountLockedTime");
    }

    #[test]
    fn merged_failures_stay_within_the_policy_cap() {
        let mut update = StateUpdate::failure(
            "uid=x",
            lockout_policy(0),
            UNIX_EPOCH + Duration::from_secs(1),
        );
        for second in 2..100 {
            update.add_failure(UNIX_EPOCH + Duration::from_secs(second));
        }
        assert_eq!(update.failures.len(), 3);
        assert_eq!(update.failures[2].seconds, 99);
    }

    #[test]
    fn an_abandoned_slot_is_removed_and_its_waiters_woken() {
        let pending = PendingStates::default();
        let at = UNIX_EPOCH + Duration::from_secs(1);
        let Slot::Submit(done) = pending.fail("uid=x", lockout_policy(0), at) else {
            panic!("the first failure opens a slot");
        };
        let Slot::Merged(waiter) = pending.fail("uid=x", lockout_policy(0), at) else {
            panic!("the second merges");
        };
        drop(SlotGuard {
            pending: &pending,
            dn: "uid=x".to_string(),
            done,
        });
        assert!(*waiter.borrow());
        assert!(pending.take("uid=x").is_none());
        // The next failure opens a fresh slot.
        assert!(matches!(
            pending.fail("uid=x", lockout_policy(0), at),
            Slot::Submit(_)
        ));
    }

    #[test]
    fn expiry_warns_inside_the_window_and_counts_grace_logins() {
        let policy = Policy {
            max_age_seconds: 1000,
            expire_warning_seconds: 100,
            grace_authn_limit: 1,
            ..Policy::default()
        };
        let state = |changed_at, grace_uses| AccountState {
            changed_at: Some(changed_at),
            grace_uses,
            ..AccountState::default()
        };
        let bound = |warning| Verdict::Bound {
            response: PolicyResponse {
                warning,
                error: None,
            },
            grace_login: false,
        };
        assert_eq!(verdict(&policy, &state(0, 0), 500), bound(None));
        assert_eq!(
            verdict(&policy, &state(0, 0), 950),
            bound(Some(PolicyWarning::TimeBeforeExpiration(50)))
        );
        assert_eq!(
            verdict(&policy, &state(0, 0), 1000),
            Verdict::Bound {
                response: PolicyResponse {
                    warning: Some(PolicyWarning::GraceAuthNsRemaining(0)),
                    error: None
                },
                grace_login: true
            }
        );
        assert_eq!(verdict(&policy, &state(0, 1), 1000), Verdict::Expired);
        // No pwdChangedTime: never expires.
        assert_eq!(
            verdict(&policy, &AccountState::default(), 5000),
            bound(None)
        );
    }
}
