//! An update as it travels to the writer thread: what the client asked for (`WriteRequest`),
//! who asks and under which limits (`Update`), and where the answer goes (`WriteJob`). Below
//! the writer, the accesslog and the transaction queue, which all read it.

use crate::identity::Identity;
use crate::ppolicy::StateUpdate;
use lmdir_access::password::Scheme;
use lmdir_schema::{Entry, Filter, LdapError, Modification};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// One update as the client asked for it (access is decided by the writer).
#[derive(Debug)]
pub(crate) enum WriteRequest {
    Add(Entry),
    Delete(String),
    Modify(String, Vec<Modification>),
    ModifyDn {
        dn: String,
        new_rdn: String,
        delete_old_rdn: bool,
        new_superior: Option<String>,
    },
    /// Password Modify: replace the entry's userPassword with this cleartext, hashed by the
    /// writer once write access to userPassword is established.
    SetPassword {
        dn: String,
        password: Vec<u8>,
    },
    /// Password policy state (failed binds, lockout, grace logins): the server's own update,
    /// decided against the entry inside the writer's transaction, never access-checked as the
    /// user who bound.
    PolicyState(PolicyState),
    /// What a replication provider sent, with the cookie covering it: the server's own update
    /// as the provider's copy, never access-checked and never restamped.
    Replicate(crate::sync_apply::SyncBatch),
    /// The updates of one LDAP transaction (RFC 5805), applied in order in one writer
    /// transaction: all of them commit or none does.
    Transaction(TransactionUpdates),
}

/// An LDAP transaction's updates, and where the writer says which one failed.
pub(crate) struct TransactionUpdates {
    pub updates: Vec<Update>,
    /// The position of the update that failed (the End Transaction response names its
    /// message ID); unset while none has.
    pub failed: Arc<std::sync::Mutex<Option<usize>>>,
}

impl std::fmt::Debug for TransactionUpdates {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "transaction of {} updates", self.updates.len())
    }
}

/// Where a policy state update is: still in the shared pending table (failures of the same
/// entry merge into it until the writer takes it), or taken (kept in the job, so a job
/// re-applied after a failure in its batch applies the same update).
#[derive(Debug)]
pub(crate) enum PolicyState {
    Pending(String),
    Taken(Option<StateUpdate>),
}

/// One update: who asks, with what, and under which limits.
pub(crate) struct Update {
    pub request: WriteRequest,
    pub identity: Identity,
    /// The assertion control's filter (RFC 4528), evaluated on the target inside the txn.
    pub assertion: Option<Filter>,
    /// Relax Rules granted (the rootdn asked for it): NO-USER-MODIFICATION attributes kept.
    pub relax: bool,
    /// The permissive modify control: present values added and absent ones deleted are skipped.
    pub permissive_modify: bool,
    pub budget: Duration,
    pub attribute_descriptions_per_entry_max: usize,
    /// Scheme for cleartext userPassword values.
    pub password_scheme: Scheme,
    /// `password_hash_cleartext`: whether add and modify hash cleartext userPassword values
    /// (Password Modify always hashes its new password).
    pub hash_cleartext: bool,
    /// `password_policy_default`: whether a password change falls under a policy when the
    /// entry names none itself.
    pub password_policy_default: String,
    /// The connection it came on (the accesslog's reqSession; 0 for the server's own).
    pub session: u64,
    /// When it arrived (the accesslog's reqStart).
    pub received: std::time::SystemTime,
}

/// An update queued for the writer with where its answer goes.
pub(crate) struct WriteJob {
    pub update: Update,
    pub reply: oneshot::Sender<Result<(), LdapError>>,
}
