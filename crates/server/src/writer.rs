//! The writer: it owns LMDB's single write transaction, and every access, assertion and
//! schema decision of an update is made here, inside that transaction, against the state the
//! update will actually change. A decision made earlier in a read transaction could be stale:
//! two pipelined requests (`add X`, then `modrdn X`) would both pass checks that saw the
//! directory before the first one.
//!
//! Queued updates (up to a bound) share one transaction and one commit. Each update runs under
//! a time budget; past it the update fails alone (adminLimitExceeded). When one fails, the
//! transaction is aborted, that update is answered with its error, the updates before it are
//! committed on their own in a fresh transaction (they succeeded on this very state), and the
//! rest go on: an update is re-applied only for a failure behind it in its own batch, so the
//! work stays linear in the batch (not re-applying everything after every failure).
//!
//! The writer sits behind a mutex. Its thread takes it for each batch of queued updates; when
//! it is idle and nothing is queued, the task submitting an update takes it instead and
//! applies and commits that update on its own thread (`Database::lead`).

use crate::identity::Identity;
use crate::ppolicy::{self, AccountState, PendingStates, Policy};
use lmdir_access::acl::{Access, EntryAccess, ExactGroup, GroupMembership, Subject, TargetPart};
use lmdir_schema::{
    AttrId, Entry, EntryView, Filter, LdapError, ModOp, Modification, NormalizedAttributes,
    NormalizedDn, Rdn, ResultCode, Schema,
};
use lmdir_store::{Store, StoredEntry, WriteContext, WriteTxn};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::mpsc;
use tracing::{error, info};

/// Most write requests waiting for the writer; more wait in their connections (backpressure).
pub(crate) const WRITE_QUEUE_LENGTH_MAX: usize = 1024;
/// Most operations committed in one LMDB transaction.
const WRITE_BATCH_OPERATIONS_MAX: usize = 64;

pub(crate) use crate::write_request::{
    PolicyState, ReadImages, TransactionUpdates, Update, WriteJob, WriteRequest,
};

/// The writer's lock. A panic while applying a batch drops its transaction (LMDB aborts it)
/// and its jobs' answers (their clients are answered "writer failed"); the writer stays usable.
pub(crate) fn lock_writer(shared: &Mutex<Writer>) -> MutexGuard<'_, Writer> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the writer shares with the server (its thread and leading tasks take it by its lock).
pub(crate) struct Writer {
    pub store: Store,
    /// The rules of the batch being applied (taken from `live` per batch).
    pub rules: Arc<crate::rules::Rules>,
    /// The settings and rules a reload replaces.
    pub live: Arc<crate::live::Live<crate::rules::Running>>,
    /// Set at shutdown: queued updates are answered unavailable instead of applied.
    pub stopping: Arc<AtomicBool>,
    /// Batch sizes and commit times are reported here.
    pub monitor: Arc<crate::monitor::Monitor>,
    /// Policy state updates waiting for this writer, one per entry.
    pub pending_states: Arc<PendingStates>,
    /// Where committed changes go for refreshAndPersist searches.
    pub persist: Arc<crate::persist::PersistHub>,
    /// `[accesslog]` (taken per batch: a reload may change it).
    pub accesslog: Arc<crate::live::Live<lmdir_config::AccesslogConfig>>,
}

/// A request as `[integrity]` sees it (None: no rule looks at it), with its DNs normalized.
fn integrity_change<'r>(
    request: &'r WriteRequest,
    dns: &'r JobDns,
) -> Option<crate::integrity::Change<'r>> {
    use crate::integrity::Change;
    Some(match request {
        WriteRequest::Add(entry) => Change::Add(entry, &dns.target),
        WriteRequest::Delete(_) => Change::Delete(&dns.target),
        WriteRequest::Modify(_, modifications) => Change::Modify(&dns.target, modifications),
        WriteRequest::ModifyDn { new_rdn, .. } => Change::Rename {
            dn: &dns.target,
            new_rdn,
            new_superior: dns.new_superior.as_ref(),
        },
        _ => return None,
    })
}

/// A client update's DNs, normalized once when the writer takes it (issue 21): the access
/// decisions, the integrity rules and the store all use these, none normalizes them again.
pub(crate) struct JobDns {
    /// The entry the update writes (an add's new entry).
    pub target: NormalizedDn,
    /// A modify DN's new superior.
    pub new_superior: Option<NormalizedDn>,
}

impl JobDns {
    /// None for the requests that name no DN of their own (policy state, replication,
    /// transactions).
    pub(crate) fn of(schema: &Schema, request: &WriteRequest) -> Result<Option<JobDns>, LdapError> {
        let target = match request {
            WriteRequest::Add(entry) => schema.normalized_dn(entry.dn.clone())?,
            WriteRequest::Delete(dn)
            | WriteRequest::Modify(dn, _)
            | WriteRequest::ModifyDn { dn, .. }
            | WriteRequest::SetPassword { dn, .. } => schema.parse_normalized_dn(dn)?,
            WriteRequest::PolicyState(_)
            | WriteRequest::Replicate(_)
            | WriteRequest::Transaction(_) => return Ok(None),
        };
        let new_superior = match request {
            WriteRequest::ModifyDn {
                new_superior: Some(superior),
                ..
            } => Some(schema.parse_normalized_dn(superior)?),
            _ => None,
        };
        Ok(Some(JobDns {
            target,
            new_superior,
        }))
    }
}

fn ldap(code: ResultCode, message: impl Into<String>) -> LdapError {
    LdapError::new(code, message)
}

fn insufficient(what: &str, dn: &str) -> LdapError {
    ldap(
        ResultCode::InsufficientAccessRights,
        format!("no write access to {what} of '{dn}'"),
    )
}

fn shutting_down() -> LdapError {
    ldap(ResultCode::Unavailable, "server shutting down")
}

/// Group membership as the writer's transaction sees it.
struct TxnGroups<'t, 's> {
    txn: &'t WriteTxn<'s>,
    member_attributes: Vec<AttrId>,
}

impl GroupMembership for TxnGroups<'_, '_> {
    fn is_member(&self, group_ndn: &str, member_ndn: &str) -> bool {
        let Ok(Some(group)) = self.txn.entry_by_normalized_dn(group_ndn) else {
            return false;
        };
        let uid_prefix = crate::subject::member_uid_prefix(member_ndn);
        self.member_attributes.iter().any(|attr| {
            group.has_value(*attr, member_ndn.as_bytes())
                || group.has_value_with_prefix(*attr, &uid_prefix)
        })
    }

    fn is_member_of(&self, group: &ExactGroup, member_ndn: &str) -> bool {
        let Ok(Some(entry)) = self.txn.entry_by_normalized_dn(&group.ndn) else {
            return false;
        };
        // As slapd: the value must equal the DN (a uniqueMember value with a UID does not).
        entry.has_value(group.object_class_attribute, group.object_class.as_bytes())
            && entry.has_value(group.member_attribute, member_ndn.as_bytes())
    }
}

/// The read entry snapshots `job` wants taken before (`after` false) or after it.
fn wanted_images(job: &WriteJob, after: bool) -> Option<&ReadImages> {
    let images = job.update.read_images.as_deref()?;
    let wanted = if after {
        images.want_post
    } else {
        images.want_pre
    };
    wanted.then_some(images)
}

impl Writer {
    /// The store's schema now (constant while this thread holds a write txn).
    fn schema(&self) -> Arc<Schema> {
        self.store.schema()
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// The thread's loop: batches of queued jobs, until the queue's last sender is gone. The
    /// writer is shared with leaders (`Database::submit`): the thread takes it per batch.
    pub(crate) fn run(shared: Arc<Mutex<Writer>>, mut receiver: mpsc::Receiver<WriteJob>) {
        while let Some(first) = receiver.blocking_recv() {
            let mut writer = lock_writer(&shared);
            let mut batch = VecDeque::from([first]);
            while batch.len() < WRITE_BATCH_OPERATIONS_MAX {
                match receiver.try_recv() {
                    Ok(job) => batch.push_back(job),
                    Err(_) => break,
                }
            }
            writer.run_jobs(batch);
        }
        info!("writer stopped");
    }

    /// Applies and commits `batch`, answering each job, on the calling thread.
    pub(crate) fn run_jobs(&mut self, batch: VecDeque<WriteJob>) {
        assert!(!batch.is_empty() && batch.len() <= WRITE_BATCH_OPERATIONS_MAX);
        // Reloaded rules apply from the next batch on.
        self.rules = self.live.load().rules.clone();
        self.run_batch(batch);
    }

    fn run_batch(&self, mut pending: VecDeque<WriteJob>) {
        while !pending.is_empty() {
            let started = Instant::now();
            let mut txn = match self.store.write() {
                Ok(txn) => txn,
                Err(error) => {
                    error!("write transaction failed to start: {error}");
                    let failure: LdapError = error.into();
                    for job in pending.drain(..) {
                        let _ = job.reply.send(Err(failure.clone()));
                    }
                    return;
                }
            };
            // The snapshot before the batch is the one before its first update, for that
            // update's pre-read: opened once the write txn is (a map growth at its start waits
            // for every reader), which has changed nothing yet and is the only writer.
            if let Some(images) = pending.front().and_then(|job| wanted_images(job, false)) {
                if let Ok(read) = self.store.read() {
                    images.keep(false, read);
                }
            }
            let accesslog = self.accesslog.load();
            if self.persist.is_enabled() || accesslog.enabled {
                txn.record_changes();
                match self.persist.begin_write(&self.rules.policy) {
                    Some(needs) => txn.bound_prior_entries(needs),
                    None => txn.skip_prior_entries(),
                }
            }
            let (applied, failed) = self.fill_batch(&mut txn, &mut pending);
            match failed {
                None => self.commit_batch(txn, applied, started),
                Some((job, error)) => {
                    drop(txn);
                    let _ = job.reply.send(Err(error));
                    if !applied.is_empty() {
                        self.run_batch(applied.into());
                    }
                }
            }
        }
    }

    /// Applies jobs from `pending` in `txn` until one fails (returned with its error), the
    /// server stops (the rest answered), or a read entry control ends the batch: one wanting
    /// the store just before it starts the next batch, one wanting it just after ends this one.
    fn fill_batch(
        &self,
        txn: &mut WriteTxn<'_>,
        pending: &mut VecDeque<WriteJob>,
    ) -> (Vec<WriteJob>, Option<(WriteJob, LdapError)>) {
        let mut applied = Vec::new();
        while let Some(mut job) = pending.pop_front() {
            if self.stopping() {
                // Not started: answered, never applied (the budget bounds the one running).
                let _ = job.reply.send(Err(shutting_down()));
                for job in pending.drain(..) {
                    let _ = job.reply.send(Err(shutting_down()));
                }
                break;
            }
            if !applied.is_empty() && wanted_images(&job, false).is_some() {
                pending.push_front(job);
                break;
            }
            if let Err(error) = self.apply(txn, &mut job.update) {
                return (applied, Some((job, error)));
            }
            let ends_batch = wanted_images(&job, true).is_some();
            applied.push(job);
            if ends_batch {
                break;
            }
        }
        (applied, None)
    }

    /// Commits a batch and answers its jobs: the changes published to persistent searches
    /// first, and the store after the last update kept for its post-read.
    fn commit_batch(&self, txn: WriteTxn<'_>, applied: Vec<WriteJob>, started: Instant) {
        let committed = txn.commit_with_changes().map(|changes| {
            self.monitor
                .write_committed(applied.len(), started.elapsed());
            // Published before any job is answered: a client that reads its answer and then
            // looks at a persist search finds its change queued.
            if self.persist.is_enabled() {
                self.persist.publish(changes);
            }
            // Before the next batch: the store just after the last update.
            let last = applied.last().and_then(|job| wanted_images(job, true));
            if let (Some(images), Ok(read)) = (last, self.store.read()) {
                images.keep(true, read);
            }
        });
        for job in applied {
            let _ = job.reply.send(committed.clone());
        }
    }

    /// Decides and applies one job inside the shared transaction, within its budget.
    fn apply(&self, txn: &mut WriteTxn<'_>, job: &mut Update) -> Result<(), LdapError> {
        let deadline = Instant::now() + job.budget;
        txn.set_deadline(Some(deadline));
        if let WriteRequest::PolicyState(state) = &mut job.request {
            let result = self.apply_policy_state(txn, state);
            txn.set_deadline(None);
            return result;
        }
        if let WriteRequest::Transaction(transaction) = &mut job.request {
            txn.set_deadline(None);
            return self.apply_transaction(txn, transaction);
        }
        if let WriteRequest::Replicate(batch) = &job.request {
            let result = crate::sync_apply::apply(txn, batch).map(|applied| {
                tracing::debug!(
                    "replication rid={:03}: {} entries changed, {} kept as they were",
                    batch.rid,
                    applied.total(),
                    applied.kept
                );
            });
            txn.set_deadline(None);
            return result;
        }
        let result = JobDns::of(&self.schema(), &job.request).and_then(|dns| match dns {
            Some(dns) => self.apply_update(txn, job, &dns, deadline),
            None => Ok(()),
        });
        txn.set_deadline(None);
        result.map_err(|error| name_the_budget(error, job.budget))
    }

    /// `apply` of a client's update, whose DNs `dns` holds normalized.
    fn apply_update(
        &self,
        txn: &mut WriteTxn<'_>,
        job: &mut Update,
        dns: &JobDns,
        deadline: Instant,
    ) -> Result<(), LdapError> {
        let accesslog = self.accesslog.load();
        let recorded = txn.recorded_changes().len();
        let old = (accesslog.enabled && accesslog.log_old)
            .then(|| crate::accesslog::entry_before(txn, &job.request, &dns.target))
            .flatten();
        // An add's values, normalized once: by the access step when it evaluates them (kept
        // here for the store's add), else by the store.
        let mut added: Option<NormalizedAttributes> = None;
        self.authorize(txn, job, dns, &mut added)
            .and_then(|()| self.hash_passwords(job, deadline, added.as_mut()))
            .and_then(|()| {
                // The values a password change replaces, for pwdHistory.
                let before = self.stored_passwords(txn, job, dns)?;
                let integrity = &self.rules.integrity;
                let may_name = |holder: &StoredEntry| self.discloses(txn, &job.identity, holder);
                let change = integrity_change(&job.request, dns);
                let renamed = match &change {
                    Some(change) => integrity.before_change(txn, change, &may_name)?,
                    None => None,
                };
                self.store_change(txn, job, dns, added.take())?;
                if let Some(change) = &change {
                    integrity.after_change(txn, change, renamed)?;
                }
                self.note_password_change(txn, job, dns, &before)?;
                self.revoke_secrets_on_reset(txn, job, dns)
            })
            .and_then(|()| match accesslog.enabled {
                true => self.record_audit(txn, job, &accesslog, (recorded, old)),
                false => Ok(()),
            })
    }

    /// The accesslog record of an update just applied: `recorded` is how many changes the
    /// transaction had recorded before it, `old` its target before (with `log_old`).
    fn record_audit(
        &self,
        txn: &mut WriteTxn<'_>,
        job: &Update,
        accesslog: &lmdir_config::AccesslogConfig,
        (recorded, old): (usize, Option<Entry>),
    ) -> Result<(), LdapError> {
        let changes = txn
            .recorded_changes()
            .get(recorded..)
            .unwrap_or(&[])
            .to_vec();
        let requester = crate::accesslog::Requester {
            identity: &job.identity,
            session: job.session,
            received: job.received,
            old,
        };
        crate::accesslog::record(txn, accesslog, &job.request, &requester, &changes)
    }

    /// Applies an LDAP transaction's updates in order, each decided as if sent alone (its own
    /// identity, controls and budget) against the state the ones before it left; the first
    /// failure fails the whole job, so its batch aborts and none of them commits.
    fn apply_transaction(
        &self,
        txn: &mut WriteTxn<'_>,
        transaction: &mut TransactionUpdates,
    ) -> Result<(), LdapError> {
        for (position, update) in transaction.updates.iter_mut().enumerate() {
            assert!(
                !matches!(update.request, WriteRequest::Transaction(_)),
                "transactions do not nest"
            );
            if let Err(error) = self.apply(txn, update) {
                *transaction
                    .failed
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner()) = Some(position);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Applies a policy state update to the entry as this transaction sees it.
    fn apply_policy_state(
        &self,
        txn: &mut WriteTxn<'_>,
        state: &mut PolicyState,
    ) -> Result<(), LdapError> {
        if let PolicyState::Pending(dn) = state {
            *state = PolicyState::Taken(self.pending_states.take(dn).map(|(update, _)| update));
        }
        let PolicyState::Taken(Some(update)) = state else {
            return Ok(());
        };
        let dn = self.schema().parse_normalized_dn(&update.dn)?;
        let Some(entry) = txn.entry_by_dn(&dn)? else {
            // Deleted since the bind: nothing to record.
            return Ok(());
        };
        let current = AccountState::read(&self.schema(), stored_values(&entry));
        let modifications = update.modifications(&current, std::time::SystemTime::now());
        if modifications.is_empty() {
            return Ok(());
        }
        let context = WriteContext {
            relax: true,
            ..WriteContext::new(update.dn.clone())
        };
        txn.modify(&dn, &modifications, &context).map(drop)
    }

    /// The userPassword values of a modify's target before it applies (empty otherwise).
    fn stored_passwords(
        &self,
        txn: &WriteTxn<'_>,
        job: &Update,
        dns: &JobDns,
    ) -> Result<Vec<Vec<u8>>, LdapError> {
        let (WriteRequest::Modify(..), Some(password_attr)) =
            (&job.request, self.schema().attribute("userPassword"))
        else {
            return Ok(Vec::new());
        };
        let Some(entry) = txn.entry_by_dn(&dns.target)? else {
            return Ok(Vec::new());
        };
        Ok(entry
            .values_of(password_attr)
            .map(|(value, _)| value.to_vec())
            .collect())
    }

    /// After a change of userPassword on an entry under a password policy: pwdChangedTime is
    /// now (expiry counts from it) and the old password's grace logins, failures and lock are
    /// forgotten, as OpenLDAP's ppolicy does. A Relax request that sets pwdChangedTime itself
    /// is kept. A change younger than pwdMinAge in this transaction's view is refused.
    fn note_password_change(
        &self,
        txn: &mut WriteTxn<'_>,
        job: &Update,
        dns: &JobDns,
        before: &[Vec<u8>],
    ) -> Result<(), LdapError> {
        let (Some(password_attr), Some(policy_subentry)) = (
            self.schema().attribute("userPassword"),
            self.schema().attribute("pwdPolicySubentry"),
        ) else {
            return Ok(());
        };
        let names = |description: &str, name: &str| {
            self.schema()
                .parse_description(description)
                .is_ok_and(|parsed| Some(parsed.attr) == self.schema().attribute(name))
        };
        let descriptions: Vec<&str> = match &job.request {
            WriteRequest::Add(entry) => entry
                .attributes
                .iter()
                .map(|a| a.description.as_str())
                .collect(),
            WriteRequest::Modify(_, modifications) => modifications
                .iter()
                .map(|m| m.description.as_str())
                .collect(),
            _ => return Ok(()),
        };
        let dn = &dns.target;
        let password_changed = descriptions
            .iter()
            .any(|description| names(description, "userPassword"));
        let sets_changed_time = descriptions
            .iter()
            .any(|description| names(description, "pwdChangedTime"));
        if !password_changed || sets_changed_time {
            return Ok(());
        }
        let Some(entry) = txn.entry_by_dn(dn)? else {
            return Ok(());
        };
        let has_password = entry.values_of(password_attr).next().is_some();
        let policy = self.policy_in_txn(txn, job, &entry, policy_subentry);
        let (Some(policy), true) = (policy, has_password) else {
            return Ok(());
        };
        let is_add = matches!(job.request, WriteRequest::Add(_));
        if !is_add {
            self.refuse_young_change(job, &entry, &policy)?;
        }
        let sets_reset = descriptions
            .iter()
            .any(|description| names(description, "pwdReset"));
        // An administrator's new password must be changed by its owner under pwdMustChange;
        // anyone else's change clears the flag (OpenLDAP's behaviour). A request that sets
        // pwdReset itself keeps its value, and so does an add: slapd's ppolicy marks only a
        // modify of an existing entry's password as a reset.
        let reset = match (
            sets_reset || is_add,
            job.identity.is_rootdn && policy.must_change,
        ) {
            (true, _) => None,
            (false, true) => Some(vec![b"TRUE".to_vec()]),
            (false, false) => Some(Vec::new()),
        };
        let modifications = self.password_change_state(&entry, &policy, reset, before);
        let context = WriteContext {
            relax: true,
            ..WriteContext::new(job.identity.dn.clone())
        };
        txn.modify(dn, &modifications, &context).map(drop)
    }

    /// A password set on an entry by anyone but the entry itself (an administrator's reset,
    /// the usual answer to a compromised account) removes the entry's lmdir credentials
    /// (`LMDIR_SECRET_ATTRIBUTES`: bearer tokens) in the same transaction. Whoever held the
    /// old password could have planted a token on the entry (it writes its own), which would
    /// otherwise outlive the reset; only the rootdn may delete another entry's. The owner's own
    /// change keeps them, and a request writing such an attribute itself keeps what it writes.
    fn revoke_secrets_on_reset(
        &self,
        txn: &mut WriteTxn<'_>,
        job: &Update,
        dns: &JobDns,
    ) -> Result<(), LdapError> {
        let WriteRequest::Modify(_, modifications) = &job.request else {
            return Ok(());
        };
        let schema = self.schema();
        let writes = |attr: AttrId| {
            modifications.iter().any(|modification| {
                schema
                    .parse_description(&modification.description)
                    .is_ok_and(|parsed| parsed.attr == attr)
            })
        };
        let Some(password_attr) = schema.attribute("userPassword") else {
            return Ok(());
        };
        let own = job.identity.normalized_dn == dns.target.as_str();
        if own || !writes(password_attr) {
            return Ok(());
        }
        let Some(entry) = txn.entry_by_dn(&dns.target)? else {
            return Ok(());
        };
        let removals: Vec<Modification> = lmdir_access::acl::LMDIR_SECRET_ATTRIBUTES
            .iter()
            .filter_map(|(name, _)| schema.attribute(name).map(|attr| (*name, attr)))
            .filter(|(_, attr)| !writes(*attr) && entry.values_of(*attr).next().is_some())
            .map(|(name, _)| Modification {
                op: ModOp::Delete,
                description: name.to_string(),
                values: Vec::new(),
            })
            .collect();
        if removals.is_empty() {
            return Ok(());
        }
        let context = WriteContext {
            relax: true,
            ..WriteContext::new(job.identity.dn.clone())
        };
        txn.modify(&dns.target, &removals, &context)?;
        tracing::info!(
            dn = %dns.target,
            by = %job.identity.dn,
            "a password set by another identity: the entry's bearer tokens are removed"
        );
        Ok(())
    }

    /// The password policy `entry` is under, as this transaction sees the policy entries.
    fn policy_in_txn(
        &self,
        txn: &WriteTxn<'_>,
        job: &Update,
        entry: &StoredEntry,
        policy_subentry: AttrId,
    ) -> Option<Policy> {
        let own = entry
            .values_of(policy_subentry)
            .next()
            .and_then(|(value, _)| String::from_utf8(value.to_vec()).ok());
        Policy::resolve(own, &job.password_policy_default, |dn| {
            let policy_entry = txn.entry_by_dn(dn).ok()??;
            Policy::of_entry(&self.schema(), stored_values(&policy_entry))
        })
    }

    /// pwdMinAge once more, against pwdChangedTime as this transaction sees it: the check
    /// before the writer read the committed entry, so a second change queued in the same LDAP
    /// transaction, or sent beside the first, would pass it (six changes in one transaction
    /// flushed pwdInHistory within one pwdMinAge). The rootdn is exempt, as before the writer.
    fn refuse_young_change(
        &self,
        job: &Update,
        entry: &StoredEntry,
        policy: &Policy,
    ) -> Result<(), LdapError> {
        if job.identity.is_rootdn {
            return Ok(());
        }
        let state = AccountState::read(&self.schema(), stored_values(entry));
        let now = ppolicy::unix_seconds(std::time::SystemTime::now());
        match ppolicy::is_too_young(policy, &state, now) {
            true => Err(ldap(ResultCode::ConstraintViolation, ppolicy::TOO_YOUNG)),
            false => Ok(()),
        }
    }

    /// The state a password change leaves: pwdChangedTime now; grace uses, failures and lock
    /// forgotten; pwdReset as decided (`None`: left as the request set it); pwdHistory.
    fn password_change_state(
        &self,
        entry: &StoredEntry,
        policy: &Policy,
        reset: Option<Vec<Vec<u8>>>,
        before: &[Vec<u8>],
    ) -> Vec<Modification> {
        let now = std::time::SystemTime::now();
        let replace = |name: &str, values: Vec<Vec<u8>>| Modification {
            op: ModOp::Replace,
            description: name.to_string(),
            values,
        };
        let forgotten = ["pwdGraceUseTime", "pwdFailureTime", "pwdAccountLockedTime"];
        std::iter::once(replace(
            "pwdChangedTime",
            vec![lmdir_store::timestamp_value(now)],
        ))
        .chain(forgotten.iter().map(|name| replace(name, Vec::new())))
        .chain(reset.map(|values| replace("pwdReset", values)))
        .chain(self.history_change(entry, policy, before, now))
        .collect()
    }

    /// pwdHistory with the replaced passwords added, under pwdInHistory.
    fn history_change(
        &self,
        entry: &StoredEntry,
        policy: &Policy,
        before: &[Vec<u8>],
        now: std::time::SystemTime,
    ) -> Option<Modification> {
        let history_attr = self.schema().attribute("pwdHistory")?;
        if policy.in_history == 0 || before.is_empty() {
            return None;
        }
        let stored = entry
            .values_of(history_attr)
            .map(|(value, _)| value.to_vec())
            .collect();
        let current: Vec<&[u8]> = self
            .schema()
            .attribute("userPassword")
            .map(|attr| entry.values_of(attr).map(|(value, _)| value).collect())
            .unwrap_or_default();
        // Only the values the change removed become history.
        let replaced: Vec<Vec<u8>> = before
            .iter()
            .filter(|old| !current.contains(&old.as_slice()))
            .cloned()
            .collect();
        Some(Modification {
            op: ModOp::Replace,
            description: "pwdHistory".to_string(),
            values: ppolicy::updated_history(stored, &replaced, policy.in_history, now),
        })
    }

    /// Applies the job's change to the store; `added`: an add's values, normalized already.
    fn store_change(
        &self,
        txn: &mut WriteTxn<'_>,
        job: &Update,
        dns: &JobDns,
        added: Option<NormalizedAttributes>,
    ) -> Result<(), LdapError> {
        let context = WriteContext {
            relax: job.relax,
            permissive_modify: job.permissive_modify,
            attribute_descriptions_per_entry_max: job.attribute_descriptions_per_entry_max,
            ..WriteContext::new(job.identity.dn.clone())
        };
        match &job.request {
            WriteRequest::Add(entry) => match added {
                Some(attributes) => {
                    txn.add_normalized_attributes(&dns.target, attributes, &context)
                }
                None => txn.add_normalized(entry, &dns.target, &context),
            }
            .map(drop),
            WriteRequest::Delete(_) => txn.delete(&dns.target).map(drop),
            WriteRequest::Modify(_, modifications) => {
                txn.modify(&dns.target, modifications, &context).map(drop)
            }
            WriteRequest::ModifyDn {
                new_rdn,
                delete_old_rdn,
                ..
            } => txn
                .modrdn(
                    &dns.target,
                    new_rdn,
                    *delete_old_rdn,
                    dns.new_superior.as_ref(),
                    &context,
                )
                .map(drop),
            WriteRequest::SetPassword { .. } => Err(ldap(
                ResultCode::Other,
                "Password Modify reached the store unhashed",
            )),
            WriteRequest::PolicyState(_)
            | WriteRequest::Replicate(_)
            | WriteRequest::Transaction(_) => Ok(()),
        }
    }

    /// Hashes the passwords `WriteRequest::for_each_password_to_hash` names, in place (after
    /// the access check, so a request without write access costs no hashing; in place, so a
    /// re-applied job is not hashed again). A bound client's arrive hashed already under a
    /// slow scheme (`prehash.rs`), so this hashes only fast schemes' and anonymous requests'.
    /// Stops at the deadline.
    /// `added`: an add's values normalized already, whose hashed passwords are normalized
    /// again (only those).
    fn hash_passwords(
        &self,
        job: &mut Update,
        deadline: Instant,
        added: Option<&mut NormalizedAttributes>,
    ) -> Result<(), LdapError> {
        let Some(password_attr) = self.schema().attribute("userPassword") else {
            return Ok(());
        };
        let scheme = job.password_scheme;
        // Cleartext → hash, for an add's normalized values.
        let mut hashed = std::collections::HashMap::new();
        let remember = matches!(job.request, WriteRequest::Add(_)) && added.is_some();
        job.request.for_each_password_to_hash(
            &self.schema(),
            password_attr,
            job.hash_cleartext,
            &mut |value| {
                let cleartext = remember.then(|| value.clone());
                crate::write_request::hash_password_within(scheme, value, deadline)?;
                if let Some(cleartext) = cleartext {
                    hashed.insert(cleartext, value.clone());
                }
                Ok::<(), LdapError>(())
            },
        )?;
        // A new password, hashed now or on its way (`prehash.rs`), becomes the modify it is,
        // so a re-applied job is not hashed twice.
        if let WriteRequest::SetPassword { dn, password, .. } = &mut job.request {
            let modification = Modification {
                op: ModOp::Replace,
                description: "userPassword".to_string(),
                values: vec![std::mem::take(password)],
            };
            job.request = WriteRequest::Modify(std::mem::take(dn), vec![modification]);
        }
        if let Some(normalized) = added.filter(|_| !hashed.is_empty()) {
            self.schema()
                .rewrite_normalized_values(normalized, password_attr, &mut |value| {
                    hashed.get(value).cloned()
                })?;
        }
        Ok(())
    }

    /// The access and assertion decisions for a job, in the transaction's own view.
    /// `added`: where an add's values go once normalized for a decision (`normalized_add`).
    fn authorize(
        &self,
        txn: &WriteTxn<'_>,
        job: &Update,
        dns: &JobDns,
        added: &mut Option<NormalizedAttributes>,
    ) -> Result<(), LdapError> {
        let groups = TxnGroups {
            txn,
            member_attributes: ["member", "uniqueMember"]
                .iter()
                .filter_map(|name| self.schema().attribute(name))
                .collect(),
        };
        let subject = crate::subject::subject_for(&self.rules.policy, &job.identity, &groups);
        let target = &dns.target;
        let existing = if job.identity.is_rootdn {
            match txn.entry_by_dn(target) {
                // An entry that cannot be decoded: the rootdn acts on it without its values (to
                // delete it: a repair); an assertion gets the error.
                Err(_) if job.assertion.is_none() => None,
                found => found?,
            }
        } else {
            // Before the assertion and any access decision: neither may tell a hidden entry
            // from a missing one.
            self.known_target(txn, &subject, &job.request, target)?
        };
        if let Some(entry) = existing.as_ref() {
            if crate::glue::hides_glue(&job.request, job.manage_dsa_it)
                && crate::glue::stored_is_glue(&self.schema(), entry)
            {
                let dn = txn.dn_of(entry.id)?;
                return Err(crate::glue::glue_as_missing(&job.request, dn));
            }
        }
        if let Some(assertion) = &job.assertion {
            match (&job.request, existing.as_ref()) {
                // An add's assertion is tested on the entry being added (as OpenLDAP does).
                (WriteRequest::Add(entry), _) => {
                    let schema = self.schema();
                    let attributes = normalized_add(&schema, entry, added)?;
                    let view = schema.normalized_entry_view(target, attributes);
                    self.check_assertion(&subject, assertion, target.as_str(), &view)?;
                }
                (_, Some(entry)) => {
                    self.check_assertion(&subject, assertion, &entry.normalized_dn, entry)?;
                }
                (_, None) => {
                    return Err(ldap(
                        ResultCode::NoSuchObject,
                        format!("no such entry '{target}'"),
                    ))
                }
            }
        }
        if job.identity.is_rootdn {
            return Ok(());
        }
        match (&job.request, existing.as_ref()) {
            (WriteRequest::Add(entry), _) => {
                self.authorize_add(txn, &subject, (entry, added), target)
            }
            // Never: known_target found every other target or answered noSuchObject.
            (_, None) => Ok(()),
            (request, Some(entry)) => {
                self.authorize_change(txn, &subject, &job.identity, (request, dns), entry)
            }
        }
    }

    /// Access to change the existing `entry` at `target` (a disclosed one: `known_target`).
    fn authorize_change(
        &self,
        txn: &WriteTxn<'_>,
        subject: &Subject<'_>,
        identity: &Identity,
        (request, dns): (&WriteRequest, &JobDns),
        entry: &StoredEntry,
    ) -> Result<(), LdapError> {
        let target = &dns.target;
        let dn_text = target.to_string();
        let access = self
            .rules
            .policy
            .for_entry(subject, &entry.normalized_dn, entry);
        match request {
            WriteRequest::Delete(_) => {
                require_entry_write(&access, &dn_text)?;
                self.require_children_write(txn, subject, target.parent())
            }
            WriteRequest::Modify(_, modifications) => {
                // A modify with no change still restamps the entry (modifiersName, entryCSN,
                // replicated): that is a write of the entry itself.
                if modifications.is_empty() {
                    require_entry_write(&access, &dn_text)?;
                }
                let own = entry.normalized_dn == identity.normalized_dn;
                for modification in modifications {
                    let parsed = self.schema().parse_description(&modification.description)?;
                    if !access.can_write_attribute(parsed.attr)
                        || own && self.is_self_granting(parsed.attr)
                    {
                        return Err(insufficient(&modification.description, &dn_text));
                    }
                }
                Ok(())
            }
            WriteRequest::SetPassword { .. } => {
                let password_attr = self
                    .schema()
                    .attribute("userPassword")
                    .ok_or_else(|| ldap(ResultCode::UnwillingToPerform, "no userPassword"))?;
                if !access.can_write_attribute(password_attr) {
                    return Err(insufficient("userPassword", &dn_text));
                }
                Ok(())
            }
            WriteRequest::ModifyDn {
                new_rdn,
                delete_old_rdn,
                ..
            } => {
                require_entry_write(&access, &dn_text)?;
                self.require_children_write(txn, subject, target.parent())?;
                if let Some(superior) = &dns.new_superior {
                    self.disclosed(txn, subject, superior)?;
                    self.require_children_write(txn, subject, Some(superior.clone()))?;
                }
                let mut naming = vec![Rdn::parse(new_rdn)?];
                if *delete_old_rdn {
                    naming.extend(target.dn().rdns.first().cloned());
                }
                let own = entry.normalized_dn == identity.normalized_dn;
                self.require_naming_write((&access, own), &naming, &dn_text)
            }
            // The server's own updates and adds: decided before (apply(), authorize_add).
            WriteRequest::Add(_)
            | WriteRequest::PolicyState(_)
            | WriteRequest::Replicate(_)
            | WriteRequest::Transaction(_) => Ok(()),
        }
    }

    /// The target of a job by a subject other than the rootdn, as that subject may know of
    /// it: an add's parent must be disclosed (the entry at the add's own DN, if any, is left to
    /// the store's alreadyExists, which needs write on the parent's children to reach); any
    /// other target must be. Otherwise noSuchObject, exactly as for a missing entry.
    fn known_target<'t>(
        &self,
        txn: &'t WriteTxn<'_>,
        subject: &Subject<'_>,
        request: &WriteRequest,
        target: &NormalizedDn,
    ) -> Result<Option<StoredEntry<'t>>, LdapError> {
        if let WriteRequest::Add(_) = request {
            if let Some(parent) = target.parent() {
                self.disclosed(txn, subject, &parent)?;
            }
            return Ok(None);
        }
        self.disclosed(txn, subject, target).map(Some)
    }

    /// Whether `identity` may learn that `entry` exists (OpenLDAP's disclose), in this txn.
    fn discloses(&self, txn: &WriteTxn<'_>, identity: &Identity, entry: &StoredEntry) -> bool {
        let groups = TxnGroups {
            txn,
            member_attributes: ["member", "uniqueMember"]
                .iter()
                .filter_map(|name| self.schema().attribute(name))
                .collect(),
        };
        let subject = crate::subject::subject_for(&self.rules.policy, identity, &groups);
        subject.is_rootdn
            || self
                .rules
                .policy
                .for_entry(&subject, &entry.normalized_dn, entry)
                .can_disclose_entry()
    }

    /// The entry at `dn` if the subject may know of it (any access to `entry`, OpenLDAP's
    /// `disclose`). A hidden entry and a missing one answer the same noSuchObject, whose
    /// matched DN is the deepest ancestor the subject may know of: the writer's side of
    /// `entry_read::disclosed_entry`, in the writer's own transaction.
    fn disclosed<'t>(
        &self,
        txn: &'t WriteTxn<'_>,
        subject: &Subject<'_>,
        dn: &NormalizedDn,
    ) -> Result<StoredEntry<'t>, LdapError> {
        let is_disclosed = |entry: &StoredEntry| {
            self.rules
                .policy
                .for_entry(subject, &entry.normalized_dn, entry)
                .can_disclose_entry()
        };
        let mut ancestor = match txn.entry_by_dn(dn)? {
            Some(entry) if is_disclosed(&entry) => return Ok(entry),
            Some(entry) => txn.parent_of(entry.id)?,
            // Its deepest existing ancestor, checked below like any other.
            None => txn.deepest_existing(dn)?,
        };
        let text = dn.to_string();
        let mut missing = ldap(
            ResultCode::NoSuchObject,
            // Cut: a 16 MiB DN is not echoed back whole.
            format!("no such entry '{}'", crate::log_text::bounded(&text, 256)),
        );
        while let Some(id) = ancestor.filter(|id| *id != lmdir_store::layout::ROOT_PARENT_ID) {
            if let Some(entry) = txn.entry_by_id(id)? {
                if is_disclosed(&entry) {
                    missing = missing.with_matched_dn(txn.dn_of(id)?);
                    break;
                }
            }
            ancestor = txn.parent_of(id)?;
        }
        Err(missing)
    }

    /// Whether an entry may never write `attr` on itself, whatever `[[access]]` grants it (a
    /// `self write` rule on every attribute is common), because it would grant itself what
    /// administrators decide: the password policy state OpenLDAP's schema leaves
    /// user-modifiable (a laxer policy, lifting its own lock or must-change flag) and `authzTo`
    /// (whom it may act as: `dn.regex:.*` would make it anyone). Others with write access (a
    /// helpdesk unlocking an account) may.
    fn is_self_granting(&self, attr: AttrId) -> bool {
        ppolicy::USER_WRITABLE_STATE
            .iter()
            .chain(&[crate::identity::AUTHZ_TO])
            .any(|name| self.schema().attribute(name) == Some(attr))
    }

    /// A rename gives the new RDN's attributes values (and takes the old one's with
    /// deleteOldRdn): write on each. An entry renaming itself is held to what a modify of its
    /// own holds it to: no self-granting attribute (`uid=bob+pwdPolicySubentry=<a laxer
    /// policy>` set its own policy), and no userPassword, which a name would set past the
    /// policy's quality checks and hashing, in cleartext in the DN.
    fn require_naming_write(
        &self,
        (access, own): (&EntryAccess<'_>, bool),
        naming: &[Rdn],
        dn_text: &str,
    ) -> Result<(), LdapError> {
        let password_attr = self.schema().attribute("userPassword");
        for ava in naming.iter().flat_map(|rdn| rdn.avas.iter()) {
            let attr = self.schema().attribute(&ava.attr).ok_or_else(|| {
                ldap(
                    ResultCode::InvalidDnSyntax,
                    format!("unknown attribute type '{}' in RDN", ava.attr),
                )
            })?;
            let self_granting = self.is_self_granting(attr) || Some(attr) == password_attr;
            if !access.can_write_attribute(attr) || own && self_granting {
                return Err(insufficient(&ava.attr, dn_text));
            }
        }
        Ok(())
    }

    /// The assertion control: evaluated with the subject's search access, so attributes it may
    /// not search are Undefined (assertionFailed), never an oracle.
    fn check_assertion(
        &self,
        subject: &Subject<'_>,
        assertion: &Filter,
        normalized_dn: &str,
        entry: &dyn EntryView,
    ) -> Result<(), LdapError> {
        let access = self.rules.policy.for_entry(subject, normalized_dn, entry);
        let prepared = self.schema().prepare_filter(assertion);
        if access.restrict_filter(&prepared).evaluate(entry).is_true() {
            Ok(())
        } else {
            Err(ldap(
                ResultCode::AssertionFailed,
                "assertion control failed",
            ))
        }
    }

    /// Access to add `entry` at `target`; its values are normalized into `added`, once.
    fn authorize_add(
        &self,
        txn: &WriteTxn<'_>,
        subject: &Subject<'_>,
        (entry, added): (&Entry, &mut Option<NormalizedAttributes>),
        target: &NormalizedDn,
    ) -> Result<(), LdapError> {
        let dn_text = entry.dn.to_string();
        self.require_children_write(txn, subject, target.parent())?;
        let schema = self.schema();
        let attributes = normalized_add(&schema, entry, added)?;
        let view = schema.normalized_entry_view(target, attributes);
        let access = self.rules.policy.for_entry(subject, target.as_str(), &view);
        require_entry_write(&access, &dn_text)?;
        for attribute in &entry.attributes {
            let parsed = self.schema().parse_description(&attribute.description)?;
            if !access.can_write_attribute(parsed.attr) {
                return Err(insufficient(&attribute.description, &dn_text));
            }
        }
        Ok(())
    }

    /// Write on the parent's children (adding below it, removing or moving from it). No parent
    /// (the root), or one outside the database (the suffix entry's), is the rootdn's alone, as
    /// back-mdb's "no parent, must be root"; a missing parent within the database is left to
    /// the store (noSuchObject).
    fn require_children_write(
        &self,
        txn: &WriteTxn<'_>,
        subject: &Subject<'_>,
        parent: Option<NormalizedDn>,
    ) -> Result<(), LdapError> {
        let Some(parent) = parent else {
            return Err(insufficient("children", "the root"));
        };
        let Some(parent_entry) = txn.entry_by_dn(&parent)? else {
            return match txn.is_within_database(&parent) {
                true => Ok(()),
                false => Err(insufficient("children", &parent.to_string())),
            };
        };
        let access =
            self.rules
                .policy
                .for_entry(subject, &parent_entry.normalized_dn, &parent_entry);
        if !access.can_write_children() {
            return Err(insufficient("children", &parent.to_string()));
        }
        Ok(())
    }
}

/// Every stored value of an attribute of `entry`, as the policy readers take them.
fn stored_values<'e>(entry: &'e StoredEntry<'_>) -> impl Fn(AttrId) -> Vec<Vec<u8>> + 'e {
    move |attr| {
        entry
            .values_of(attr)
            .map(|(value, _)| value.to_vec())
            .collect()
    }
}

/// Past the write budget, the answer names the setting (a large subtree move with memberOf on
/// may need more than the default: the administrator raises it and reloads).
fn name_the_budget(mut error: LdapError, budget: std::time::Duration) -> LdapError {
    if error.code == ResultCode::AdminLimitExceeded && error.message.contains("time budget") {
        error.message = format!(
            "{} of {} ms ([server] write_budget_milliseconds, reloadable)",
            error.message,
            budget.as_millis()
        );
    }
    error
}

/// An add's values normalized (once: kept in `added` for the decisions after and the store).
fn normalized_add<'n>(
    schema: &Schema,
    entry: &Entry,
    added: &'n mut Option<NormalizedAttributes>,
) -> Result<&'n NormalizedAttributes, LdapError> {
    let attributes = match added.take() {
        Some(attributes) => attributes,
        None => schema.normalize_attributes(&entry.attributes)?,
    };
    Ok(added.insert(attributes))
}

fn require_entry_write(access: &EntryAccess<'_>, dn: &str) -> Result<(), LdapError> {
    if access.allowed(TargetPart::Entry, Access::Write) {
        Ok(())
    } else {
        Err(insufficient("entry", dn))
    }
}

#[cfg(test)]
mod tests {
    //! Issue 21: an update's DN is normalized once and each value once, counted by the
    //! schema's per-thread counters around `Writer::apply` (which runs on the writer thread or
    //! a leading task's thread in the server; here on the test's thread).

    use super::*;
    use lmdir_access::acl::AccessPolicy;
    use lmdir_access::password;
    use lmdir_schema::NormalizationCounts;
    use lmdir_store::StoreOptions;
    use std::time::Duration;

    const SUFFIX: &str = "dc=example,dc=com";
    const ROOTDN: &str = "cn=admin,dc=example,dc=com";

    /// Default settings and `policy` as the only rule.
    fn live_with(policy: AccessPolicy) -> Arc<crate::live::Live<crate::rules::Running>> {
        Arc::new(crate::live::Live::new(crate::rules::Running {
            settings: Arc::new(crate::settings::ServerSettings::with_defaults(Vec::new())),
            rules: Arc::new(crate::rules::Rules::with_policy(policy)),
        }))
    }

    fn writer(directory: &std::path::Path) -> Writer {
        let options = StoreOptions {
            suffix: SUFFIX.to_string(),
            sync: false,
            ..StoreOptions::default()
        };
        let store = Store::open(directory, options, Arc::new(Schema::builtin())).unwrap();
        let policy = AccessPolicy::from_config(&[], &store.schema(), SUFFIX, ROOTDN).unwrap();
        let live = live_with(policy);
        Writer {
            store,
            rules: live.load().rules.clone(),
            live,
            stopping: Arc::default(),
            monitor: Arc::new(crate::monitor::Monitor::new()),
            pending_states: Arc::default(),
            persist: Arc::default(),
            accesslog: Arc::default(),
        }
    }

    /// Issue 22: group commit with a leader. On an idle writer the submitting thread applies
    /// and commits the update itself: it is answered before `submit` returns. The store
    /// fsyncs each commit, so a hand-off to the writer thread could not have answered by then.
    #[test]
    // The writer's lock is held across `submit` on purpose: it is how the test makes the
    // writer busy. The writer thread waits on it, not this task.
    #[allow(clippy::await_holding_lock)]
    fn an_update_on_an_idle_writer_is_committed_by_the_thread_that_submits_it() {
        let directory = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            suffix: SUFFIX.to_string(),
            sync: true,
            ..StoreOptions::default()
        };
        let store = Store::open(directory.path(), options, Arc::new(Schema::builtin())).unwrap();
        let policy = AccessPolicy::from_config(&[], &store.schema(), SUFFIX, ROOTDN).unwrap();
        let database = crate::context::Database::new(store, policy);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // The rootdn's add of `entry`, and where its answer comes.
        let add_job = |entry: Entry| {
            let (reply, response) = tokio::sync::oneshot::channel();
            let update = rootdn_update(WriteRequest::Add(entry));
            (WriteJob { update, reply }, response)
        };
        runtime.block_on(async {
            let top = entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]);
            let (job, mut response) = add_job(top);
            database.submit(job).await.unwrap();
            assert!(
                matches!(response.try_recv(), Ok(Ok(()))),
                "an idle writer's update is answered before submit returns"
            );
            // A busy writer (its lock held): the update queues, and the writer thread commits
            // it once the writer is free.
            let busy = lock_writer(&database.writer);
            let people = entry(
                &format!("ou=People,{SUFFIX}"),
                &[("objectClass", "organizationalUnit"), ("ou", "People")],
            );
            let (job, mut response) = add_job(people);
            database.submit(job).await.unwrap();
            assert!(
                response.try_recv().is_err(),
                "queued while the writer is busy"
            );
            drop(busy);
            assert!(matches!(response.await, Ok(Ok(()))));
        });
        let read = database.store.read().unwrap();
        assert!(read.dn_to_id(&format!("ou=People,{SUFFIX}")).is_ok());
    }

    fn rootdn_update(request: WriteRequest) -> Update {
        Update {
            request,
            identity: Identity {
                dn: ROOTDN.to_string(),
                normalized_dn: ROOTDN.to_string(),
                is_rootdn: true,
            },
            assertion: None,
            relax: false,
            permissive_modify: false,
            manage_dsa_it: false,
            budget: Duration::from_secs(60),
            attribute_descriptions_per_entry_max: 1024,
            password_scheme: password::Scheme::Ssha,
            hash_cleartext: false,
            password_policy_default: String::new(),
            session: 0,
            received: std::time::SystemTime::now(),
            read_images: None,
        }
    }

    fn entry(dn: &str, attributes: &[(&str, &str)]) -> Entry {
        let mut entry = Entry::new(lmdir_schema::Dn::parse(dn).unwrap());
        for (description, value) in attributes {
            entry.add_values(description, [value.as_bytes().to_vec()]);
        }
        entry
    }

    /// Applies `request` as the rootdn in one committed txn; the normalizations it did.
    fn apply_counted(writer: &Writer, request: WriteRequest) -> NormalizationCounts {
        apply_update_counted(writer, rootdn_update(request)).unwrap()
    }

    /// Applies `update` in one committed txn; the normalizations it did.
    fn apply_update_counted(
        writer: &Writer,
        mut update: Update,
    ) -> Result<NormalizationCounts, LdapError> {
        let (applied, counts) = lmdir_schema::normalizations_during(|| {
            let mut txn = writer.store.write().unwrap();
            writer.apply(&mut txn, &mut update)?;
            txn.commit().unwrap();
            Ok::<(), LdapError>(())
        });
        applied.map(|()| counts)
    }

    /// The values of every attribute of the stored entry at `dn`.
    fn stored_value_count(writer: &Writer, dn: &str) -> u64 {
        let read = writer.store.read().unwrap();
        let stored = read.entry(read.dn_to_id(dn).unwrap()).unwrap().unwrap();
        stored
            .attributes()
            .map(|attribute| attribute.values().count() as u64)
            .sum()
    }

    #[test]
    fn an_add_through_the_writer_normalizes_its_dn_once_and_each_value_once() {
        let directory = tempfile::tempdir().unwrap();
        let writer = writer(directory.path());
        let top = entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]);
        apply_counted(&writer, WriteRequest::Add(top));
        let dn = format!("cn=Many Values+sn=Example,{SUFFIX}");
        let mut attributes = vec![
            ("objectClass", "person"),
            ("cn", "Many Values"),
            ("sn", "Example"),
        ];
        let lines: Vec<String> = (0..9).map(|index| format!("Line {index}")).collect();
        attributes.extend(lines.iter().map(|line| ("description", line.as_str())));
        let counts = apply_counted(&writer, WriteRequest::Add(entry(&dn, &attributes)));
        assert_eq!(counts.dns, 1, "DN normalizations of one add: {counts:?}");
        let read = writer.store.read().unwrap();
        let stored = read.entry(read.dn_to_id(&dn).unwrap()).unwrap().unwrap();
        let values: u64 = stored
            .attributes()
            .map(|attribute| attribute.values().count() as u64)
            .sum();
        assert!(
            values > attributes.len() as u64,
            "operational values stamped"
        );
        assert_eq!(counts.values, values, "value normalizations of one add");
    }

    #[test]
    fn a_delete_and_a_rename_through_the_writer_normalize_their_dns_once() {
        let directory = tempfile::tempdir().unwrap();
        let writer = writer(directory.path());
        let top = entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]);
        apply_counted(&writer, WriteRequest::Add(top));
        for unit in ["ou=a", "ou=b"] {
            let ou = &unit[3..];
            let unit_entry = entry(
                &format!("{unit},{SUFFIX}"),
                &[("objectClass", "organizationalUnit"), ("ou", ou)],
            );
            apply_counted(&writer, WriteRequest::Add(unit_entry));
        }
        let rename = WriteRequest::ModifyDn {
            dn: format!("ou=a,{SUFFIX}"),
            new_rdn: "ou=c".to_string(),
            delete_old_rdn: true,
            new_superior: Some(format!("ou=b,{SUFFIX}")),
        };
        // The target, the new superior and the new RDN: each normalized once.
        let counts = apply_counted(&writer, rename);
        assert_eq!(counts.dns, 3, "modify DN: {counts:?}");
        let counts = apply_counted(&writer, WriteRequest::Delete(format!("ou=c,ou=b,{SUFFIX}")));
        // (Its values: the access step's `entry_by_dn` reads the stored entry, whose DN's
        // values it normalizes for `:dn:` matching, `WriteTxn::entry_by_id`.)
        assert_eq!(counts.dns, 1, "delete: {counts:?}");
    }

    const EDITORS: &str = "cn=editors,ou=groups,dc=example,dc=com";

    /// A writer whose policy lets members of cn=editors write persons below ou=people (a
    /// rule with a filter, evaluated on the entry being added or modified) and bound users
    /// write ou=people itself (its children).
    fn editing_writer(directory: &std::path::Path) -> Writer {
        use lmdir_config::{AccessClause, AccessLevel, AccessRule, AccessTarget, Who};
        let mut writer = writer(directory);
        let rules = [
            AccessRule {
                to: AccessTarget {
                    subtree: Some(format!("ou=people,{SUFFIX}")),
                    filter: Some("(objectClass=person)".to_string()),
                    ..AccessTarget::default()
                },
                by: vec![AccessClause {
                    who: Who::Group(EDITORS.to_string()),
                    access: AccessLevel::Write,
                }],
            },
            AccessRule {
                to: AccessTarget {
                    dn: Some(format!("ou=people,{SUFFIX}")),
                    ..AccessTarget::default()
                },
                by: vec![AccessClause {
                    who: Who::Users,
                    access: AccessLevel::Write,
                }],
            },
        ];
        let policy =
            AccessPolicy::from_config(&rules, &writer.store.schema(), SUFFIX, ROOTDN).unwrap();
        writer.live = live_with(policy);
        writer.rules = writer.live.load().rules.clone();
        for added in [
            entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]),
            entry(
                &format!("ou=people,{SUFFIX}"),
                &[("objectClass", "organizationalUnit"), ("ou", "people")],
            ),
            entry(
                &format!("ou=groups,{SUFFIX}"),
                &[("objectClass", "organizationalUnit"), ("ou", "groups")],
            ),
            entry(
                EDITORS,
                &[
                    ("objectClass", "groupOfNames"),
                    ("cn", "editors"),
                    ("member", &format!("uid=editor,ou=people,{SUFFIX}")),
                ],
            ),
        ] {
            apply_counted(&writer, WriteRequest::Add(added));
        }
        writer
    }

    /// An update by the bound user `uid=<uid>,ou=people,...` (not the rootdn).
    fn user_update(uid: &str, request: WriteRequest) -> Update {
        let dn = format!("uid={uid},ou=people,{SUFFIX}");
        Update {
            identity: Identity {
                normalized_dn: dn.clone(),
                dn,
                is_rootdn: false,
            },
            ..rootdn_update(request)
        }
    }

    fn modification(op: ModOp, description: &str, values: &[&str]) -> Modification {
        Modification {
            op,
            description: description.to_string(),
            values: values
                .iter()
                .map(|value| value.as_bytes().to_vec())
                .collect(),
        }
    }

    #[test]
    fn an_add_and_a_modify_by_a_user_an_acl_allows_normalize_each_value_once() {
        let directory = tempfile::tempdir().unwrap();
        let writer = editing_writer(directory.path());
        let dn = format!("cn=New Person,ou=people,{SUFFIX}");
        let mut attributes = vec![
            ("objectClass", "person"),
            ("cn", "New Person"),
            ("sn", "Person"),
            ("telephoneNumber", "+1 555 0100"),
        ];
        let lines: Vec<String> = (0..6).map(|index| format!("Line {index}")).collect();
        attributes.extend(lines.iter().map(|line| ("description", line.as_str())));
        let new_entry = entry(&dn, &attributes);
        // The ACL decides: a user outside cn=editors may not add it.
        let refused = apply_update_counted(
            &writer,
            user_update("other", WriteRequest::Add(new_entry.clone())),
        )
        .unwrap_err();
        assert_eq!(refused.code, ResultCode::InsufficientAccessRights);

        let add = user_update("editor", WriteRequest::Add(new_entry));
        let counts = apply_update_counted(&writer, add).unwrap();
        eprintln!("add by a user the ACL allows: {counts:?}");
        assert_eq!(counts.dns, 1, "DN normalizations of one add: {counts:?}");
        let stored = stored_value_count(&writer, &dn);
        assert!(
            stored > attributes.len() as u64,
            "operational values stamped"
        );
        assert_eq!(counts.values, stored, "value normalizations of one add");

        // Adds 3 values, deletes 2, replaces telephoneNumber with 2: each normalized once, and
        // the 3 values the store stamps (modifyTimestamp, modifiersName, entryCSN).
        let modifications = vec![
            modification(ModOp::Add, "description", &["New 1", "New 2", "New 3"]),
            modification(ModOp::Delete, "description", &["Line 0", "Line 1"]),
            modification(
                ModOp::Replace,
                "telephoneNumber",
                &["+1 555 0101", "+1 555 0102"],
            ),
        ];
        let modify = user_update("editor", WriteRequest::Modify(dn.clone(), modifications));
        let counts = apply_update_counted(&writer, modify).unwrap();
        eprintln!("modify of 3+2+2 values by a user the ACL allows: {counts:?}");
        assert_eq!(counts.dns, 1, "DN normalizations of one modify: {counts:?}");
        assert_eq!(counts.values, 7 + 3, "value normalizations of one modify");
    }

    #[test]
    fn a_password_hashed_after_the_access_check_is_stored_with_its_hash_normalized() {
        let directory = tempfile::tempdir().unwrap();
        let writer = editing_writer(directory.path());
        let dn = format!("cn=Secret,ou=people,{SUFFIX}");
        let attributes = [
            ("objectClass", "person"),
            ("cn", "Secret"),
            ("sn", "Secret"),
            ("userPassword", "cleartext secret"),
        ];
        let mut add = user_update("editor", WriteRequest::Add(entry(&dn, &attributes)));
        add.hash_cleartext = true;
        apply_update_counted(&writer, add).unwrap();
        let read = writer.store.read().unwrap();
        let stored = read.entry(read.dn_to_id(&dn).unwrap()).unwrap().unwrap();
        let password = writer.store.schema().attribute("userPassword").unwrap();
        let values = stored.values_of(password);
        let [(original, normalized)] = values.as_slice() else {
            panic!("one userPassword value: {values:?}");
        };
        assert!(password::is_hashed(original), "hashed before it was stored");
        // octetStringMatch: the normalized form is the value itself, the hash (not the
        // cleartext the access step normalized).
        assert_eq!(*original, normalized.as_ref());
    }
}
