//! An update as it travels to the writer thread: what the client asked for (`WriteRequest`),
//! who asks and under which limits (`Update`), and where the answer goes (`WriteJob`). Below
//! the writer, the accesslog and the transaction queue, which all read it.

use crate::identity::Identity;
use crate::ppolicy::StateUpdate;
use lmdir_access::password::{self, Scheme};
use lmdir_schema::{AttrId, Entry, Filter, LdapError, ModOp, Modification, Schema};
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
    /// Password Modify: replace the entry's userPassword with this password, hashed by the
    /// writer once write access to userPassword is established, unless `hashed` (hashed
    /// already on its way, `prehash.rs`: the writer stores it as it is).
    SetPassword {
        dn: String,
        password: Vec<u8>,
        hashed: bool,
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

/// Most values a point change carries (`WriteRequest::is_point_change`). Each value of a
/// membership attribute also rewrites one member entry (~0.1-0.3 ms), so this bounds such a
/// change to a few milliseconds.
pub(crate) const POINT_CHANGE_VALUES_MAX: usize = 32;

impl WriteRequest {
    /// Calls `hash` on each password value a write hashes: an add's or a modify's (add,
    /// replace) userPassword values that are not `{SCHEME}` hashes already, under
    /// `password_hash_cleartext`; a Password Modify's new password, whatever it looks like,
    /// unless marked `hashed`. The one definition for the writer and `prehash.rs`.
    pub(crate) fn for_each_password_to_hash<E>(
        &mut self,
        schema: &Schema,
        password_attr: AttrId,
        hash_cleartext: bool,
        hash: &mut impl FnMut(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let is_password = |description: &str| {
            schema
                .parse_description(description)
                .is_ok_and(|parsed| parsed.attr == password_attr)
        };
        let mut cleartext = |values: &mut Vec<Vec<u8>>| -> Result<(), E> {
            for value in values
                .iter_mut()
                .filter(|value| !password::is_hashed(value))
            {
                hash(value)?;
            }
            Ok(())
        };
        match self {
            WriteRequest::SetPassword {
                password, hashed, ..
            } if !*hashed => hash(password),
            WriteRequest::Add(entry) if hash_cleartext => {
                for attribute in &mut entry.attributes {
                    if is_password(&attribute.description) {
                        cleartext(&mut attribute.values)?;
                    }
                }
                Ok(())
            }
            WriteRequest::Modify(_, modifications) if hash_cleartext => {
                for modification in modifications {
                    let adds = matches!(modification.op, ModOp::Add | ModOp::Replace);
                    if adds && is_password(&modification.description) {
                        cleartext(&mut modification.values)?;
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether this is a point change, whose work is bounded by the values it names: an add,
    /// or a modify that only adds, deletes listed values or increments (a replace, or a delete
    /// of a whole attribute, may drop a million member values), with at most
    /// `POINT_CHANGE_VALUES_MAX` values, none of them of `password` (hashed and checked against
    /// the password policy in the writer: milliseconds for a slow scheme).
    pub(crate) fn is_point_change(&self, schema: &Schema, password: Option<AttrId>) -> bool {
        // An undefined or malformed description is no password (the writer refuses it).
        let is_password = |description: &str| {
            password.is_some()
                && schema
                    .parse_description(description)
                    .is_ok_and(|parsed| Some(parsed.attr) == password)
        };
        match self {
            WriteRequest::Add(entry) => {
                let values: usize = entry.attributes.iter().map(|a| a.values.len()).sum();
                values <= POINT_CHANGE_VALUES_MAX
                    && !entry.attributes.iter().any(|a| is_password(&a.description))
            }
            WriteRequest::Modify(_, modifications) => {
                let values: usize = modifications.iter().map(|m| m.values.len()).sum();
                let each_lists_values = modifications.iter().all(|modification| {
                    !modification.values.is_empty()
                        && matches!(
                            modification.op,
                            ModOp::Add | ModOp::Delete | ModOp::Increment
                        )
                        && !is_password(&modification.description)
                });
                values <= POINT_CHANGE_VALUES_MAX && each_lists_values
            }
            _ => false,
        }
    }
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

/// The snapshots the writer takes for one update's read entry controls (RFC 4527): the store
/// just before the update and just after it, whatever else commits. The writer starts a batch
/// with an update wanting the first and ends one after an update wanting the second, so each
/// snapshot holds this update's change and no other's (two `increment` modifies with
/// post-read, read after their commits, both showed the later value).
pub(crate) struct ReadImages {
    pub want_pre: bool,
    pub want_post: bool,
    taken: std::sync::Mutex<[Option<lmdir_store::ReadTxn>; 2]>,
}

impl ReadImages {
    /// The snapshots a request's controls ask for; None when neither.
    pub fn wanted(pre: bool, post: bool) -> Option<Arc<ReadImages>> {
        (pre || post).then(|| {
            Arc::new(ReadImages {
                want_pre: pre,
                want_post: post,
                taken: std::sync::Mutex::new([None, None]),
            })
        })
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, [Option<lmdir_store::ReadTxn>; 2]> {
        self.taken
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps the snapshot before (`after` false) or after the update.
    pub fn keep(&self, after: bool, read: lmdir_store::ReadTxn) {
        self.slots()[usize::from(after)] = Some(read);
    }

    /// The snapshot before (`after` false) or after the update, once.
    pub fn take(&self, after: bool) -> Option<lmdir_store::ReadTxn> {
        self.slots()[usize::from(after)].take()
    }
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
    /// ManageDsaIT: a glue entry is written as any other (without it: noSuchObject).
    pub manage_dsa_it: bool,
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
    /// The snapshots its pre-read and post-read controls are answered from.
    pub read_images: Option<Arc<ReadImages>>,
}

/// Hashes a password in place with `scheme`, unless `deadline` (the update's write budget) has
/// passed: adminLimitExceeded then, constraintViolation for a password too long to hash.
pub(crate) fn hash_password_within(
    scheme: Scheme,
    value: &mut Vec<u8>,
    deadline: std::time::Instant,
) -> Result<(), LdapError> {
    use lmdir_schema::ResultCode;
    if std::time::Instant::now() > deadline {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            "the write exceeded its time budget while hashing passwords",
        ));
    }
    *value = password::hash(scheme, value).map_err(|error| match error {
        password::PasswordError::TooLong => {
            LdapError::new(ResultCode::ConstraintViolation, error.to_string())
        }
        other => LdapError::new(ResultCode::Other, other.to_string()),
    })?;
    Ok(())
}

/// An update queued for the writer with where its answer goes.
pub(crate) struct WriteJob {
    pub update: Update,
    pub reply: oneshot::Sender<Result<(), LdapError>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use lmdir_schema::{Attribute, Dn};

    fn modify(op: ModOp, description: &str, count: usize) -> WriteRequest {
        let values = (0..count).map(|i| format!("uid=u{i},dc=example,dc=com").into_bytes());
        WriteRequest::Modify(
            "cn=big,dc=example,dc=com".to_string(),
            vec![Modification {
                op,
                description: description.to_string(),
                values: values.collect(),
            }],
        )
    }

    #[test]
    fn point_changes_name_few_values_and_never_a_password() {
        let schema = Schema::builtin();
        let password = schema.attribute("userPassword");
        let point = |request: &WriteRequest| request.is_point_change(&schema, password);
        assert!(point(&modify(ModOp::Add, "member", 1)));
        assert!(point(&modify(ModOp::Delete, "member", 1)));
        assert!(point(&modify(
            ModOp::Add,
            "member",
            POINT_CHANGE_VALUES_MAX
        )));
        assert!(!point(&modify(
            ModOp::Add,
            "member",
            POINT_CHANGE_VALUES_MAX + 1
        )));
        // A replace or a delete of the whole attribute may drop every value there is.
        assert!(!point(&modify(ModOp::Replace, "member", 1)));
        assert!(!point(&modify(ModOp::Delete, "member", 0)));
        // Hashing and the password policy run in the writer, whatever the spelling.
        assert!(!point(&modify(ModOp::Add, "userPassword", 1)));
        assert!(!point(&modify(ModOp::Add, "USERPASSWORD;binary", 1)));
        assert!(!point(&modify(ModOp::Add, "2.5.4.35", 1)));
        let mut entry = Entry::new(Dn::parse("uid=new,dc=example,dc=com").unwrap());
        entry.attributes.push(Attribute {
            description: "uid".to_string(),
            values: vec![b"new".to_vec()],
        });
        assert!(point(&WriteRequest::Add(entry.clone())));
        entry.attributes.push(Attribute {
            description: "userPassword".to_string(),
            values: vec![b"secret".to_vec()],
        });
        assert!(!point(&WriteRequest::Add(entry)));
        assert!(!point(&WriteRequest::Delete(
            "uid=u1,dc=example,dc=com".to_string()
        )));
    }
}
