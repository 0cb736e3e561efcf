//! A connection's open LDAP transactions (RFC 5805) and the updates queued in them, bounded
//! per connection; `transaction` starts and ends them. Part of the session, below every
//! operation.

use crate::result::{code, OperationError};
use crate::write_request::{Update, WriteRequest};
use std::sync::Mutex;

/// Open transactions on one connection (OpenLDAP allows one; clients use one).
pub const TRANSACTIONS_PER_CONNECTION_MAX: usize = 4;
/// Updates queued in one transaction: a provisioning batch, not a bulk load (`lmdir load`).
pub const UPDATES_PER_TRANSACTION_MAX: usize = 1024;
/// Bytes of DNs and values queued in one connection's transactions, held until they end.
pub const QUEUED_BYTES_PER_CONNECTION_MAX: usize = 64 << 20;

/// One queued update and the message that asked for it.
pub(crate) struct Queued {
    pub message_id: i32,
    pub update: Update,
}

struct Open {
    id: Vec<u8>,
    updates: Vec<Queued>,
}

#[derive(Default)]
struct State {
    next_number: u64,
    open: Vec<Open>,
    queued_bytes: usize,
}

/// A connection's open transactions (shared by its operations' tasks).
#[derive(Default)]
pub struct Transactions {
    state: Mutex<State>,
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{} open transactions", self.lock().open.len())
    }
}

fn limit(message: String) -> OperationError {
    OperationError::new(code::ADMIN_LIMIT_EXCEEDED, message)
}

pub(crate) fn unknown() -> OperationError {
    OperationError::new(code::UNWILLING_TO_PERFORM, "unknown transaction identifier")
}

impl Transactions {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Opens a transaction; its identifier is the connection's count of them, in decimal.
    pub fn start(&self) -> Result<Vec<u8>, OperationError> {
        let mut state = self.lock();
        if state.open.len() >= TRANSACTIONS_PER_CONNECTION_MAX {
            return Err(limit(format!(
                "{TRANSACTIONS_PER_CONNECTION_MAX} transactions are already open on this connection"
            )));
        }
        state.next_number += 1;
        let id = state.next_number.to_string().into_bytes();
        state.open.push(Open {
            id: id.clone(),
            updates: Vec::new(),
        });
        Ok(id)
    }

    /// Whether `id` names an open transaction.
    pub fn is_open(&self, id: &[u8]) -> bool {
        self.lock().open.iter().any(|open| open.id == id)
    }

    /// Queues `update` in transaction `id`; over a limit the transaction is aborted.
    pub(crate) fn queue(
        &self,
        id: &[u8],
        message_id: i32,
        update: Update,
    ) -> Result<(), OperationError> {
        let bytes = request_bytes(&update.request);
        let refusal = {
            let mut state = self.lock();
            let State {
                open, queued_bytes, ..
            } = &mut *state;
            let transaction = open
                .iter_mut()
                .find(|open| open.id == id)
                .ok_or_else(unknown)?;
            if transaction.updates.len() >= UPDATES_PER_TRANSACTION_MAX {
                format!("more than {UPDATES_PER_TRANSACTION_MAX} updates in one transaction")
            } else if *queued_bytes + bytes > QUEUED_BYTES_PER_CONNECTION_MAX {
                format!(
                    "transactions on this connection would hold more than \
                     {QUEUED_BYTES_PER_CONNECTION_MAX} bytes"
                )
            } else {
                *queued_bytes += bytes;
                transaction.updates.push(Queued { message_id, update });
                return Ok(());
            }
        };
        self.abort(id);
        Err(limit(format!("{refusal}: the transaction is aborted")))
    }

    /// Removes transaction `id` and returns its updates in the order they were queued.
    pub(crate) fn take(&self, id: &[u8]) -> Option<Vec<Queued>> {
        let mut state = self.lock();
        let position = state.open.iter().position(|open| open.id == id)?;
        let open = state.open.remove(position);
        let bytes: usize = open
            .updates
            .iter()
            .map(|queued| request_bytes(&queued.update.request))
            .sum();
        state.queued_bytes -= bytes;
        Some(open.updates)
    }

    /// Drops transaction `id` (if open) and everything queued in it.
    pub fn abort(&self, id: &[u8]) {
        self.take(id);
    }

    /// Drops every open transaction: the connection's identity changed (a bind), and updates
    /// queued under the old one must not commit under the new one.
    pub fn abort_all(&self) {
        let mut state = self.lock();
        state.open.clear();
        state.queued_bytes = 0;
    }
}

/// What a queued update holds on to: its DNs and values.
fn request_bytes(request: &WriteRequest) -> usize {
    let modifications = |modifications: &[lmdir_schema::Modification]| -> usize {
        modifications
            .iter()
            .map(|change| {
                change.description.len() + change.values.iter().map(Vec::len).sum::<usize>()
            })
            .sum()
    };
    match request {
        WriteRequest::Add(entry) => entry
            .attributes
            .iter()
            .map(|attribute| {
                attribute.description.len() + attribute.values.iter().map(Vec::len).sum::<usize>()
            })
            .sum::<usize>()
            .saturating_add(256),
        WriteRequest::Delete(dn) => dn.len(),
        WriteRequest::Modify(dn, changes) => dn.len() + modifications(changes),
        WriteRequest::ModifyDn {
            dn,
            new_rdn,
            new_superior,
            ..
        } => dn.len() + new_rdn.len() + new_superior.as_ref().map_or(0, String::len),
        WriteRequest::SetPassword { dn, password } => dn.len() + password.len(),
        WriteRequest::PolicyState(_)
        | WriteRequest::Replicate(_)
        | WriteRequest::Transaction(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_are_bounded_per_connection_and_end_once() {
        let transactions = Transactions::default();
        let ids: Vec<_> = (0..TRANSACTIONS_PER_CONNECTION_MAX)
            .map(|_| transactions.start().unwrap())
            .collect();
        assert_eq!(
            transactions.start().unwrap_err().code,
            code::ADMIN_LIMIT_EXCEEDED
        );
        assert!(transactions.take(&ids[0]).is_some());
        assert!(transactions.take(&ids[0]).is_none());
        assert!(transactions.start().is_ok());
        transactions.abort_all();
        assert!(!transactions.is_open(&ids[1]));
    }
}
