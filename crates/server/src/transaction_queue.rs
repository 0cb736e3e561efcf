//! A connection's open LDAP transactions (RFC 5805) and the updates queued in them, bounded
//! per connection and, all connections together, by `transaction_bytes_max`; `transaction`
//! starts and ends them. Part of the session, below every operation.
//!
//! What is counted is the memory a queued update holds, not its bytes on the wire: each value,
//! name and filter node with its allocation, so ten thousand one-byte values count ~400 KB,
//! not 10 KB.

use crate::result::{code, OperationError};
use crate::write_request::{Update, WriteRequest};
use lmdir_schema::heap_block_bytes as block;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Open transactions on one connection (OpenLDAP allows one; clients use one).
pub const TRANSACTIONS_PER_CONNECTION_MAX: usize = 4;
/// Updates queued in one transaction: a provisioning batch, not a bulk load (`lmdir load`).
pub const UPDATES_PER_TRANSACTION_MAX: usize = 1024;
/// Memory one connection's queued updates may hold until their transactions end.
pub const QUEUED_BYTES_PER_CONNECTION_MAX: usize = 64 << 20;

/// Memory held by every connection's queued updates: the server-wide count that
/// `transaction_bytes_max` bounds. Shared by the sessions; each returns its share when its
/// transactions end or the connection closes.
#[derive(Debug, Default)]
pub struct QueuedBytes(AtomicUsize);

impl QueuedBytes {
    /// Takes `bytes` if the total stays within `max_bytes`.
    fn reserve(&self, bytes: usize, max_bytes: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= max_bytes)
            })
            .is_ok()
    }

    fn release(&self, bytes: usize) {
        let before = self.0.fetch_sub(bytes, Ordering::AcqRel);
        debug_assert!(before >= bytes, "released more than was reserved");
    }

    /// Memory held now, all connections together.
    pub fn held(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// One queued update and the message that asked for it.
pub(crate) struct Queued {
    pub message_id: i32,
    pub update: Update,
}

struct Open {
    id: Vec<u8>,
    updates: Vec<Queued>,
    /// Memory its updates hold (`held_bytes` of each).
    held_bytes: usize,
}

#[derive(Default)]
struct State {
    next_number: u64,
    open: Vec<Open>,
}

impl State {
    /// Memory this connection's queued updates hold, all its open transactions together.
    fn held_bytes(&self) -> usize {
        self.open.iter().map(|open| open.held_bytes).sum()
    }
}

/// A connection's open transactions (shared by its operations' tasks).
#[derive(Default)]
pub struct Transactions {
    state: Mutex<State>,
    /// The server-wide count this connection's queued bytes are part of.
    server: Arc<QueuedBytes>,
}

impl Drop for Transactions {
    /// The connection ended: what its open transactions held goes back to the server.
    fn drop(&mut self) {
        self.abort_all();
    }
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
    /// A connection's transactions, counted in the server-wide `server` as well.
    pub fn new(server: Arc<QueuedBytes>) -> Transactions {
        Transactions {
            state: Mutex::default(),
            server,
        }
    }

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
            held_bytes: 0,
        });
        Ok(id)
    }

    /// Whether `id` names an open transaction.
    pub fn is_open(&self, id: &[u8]) -> bool {
        self.lock().open.iter().any(|open| open.id == id)
    }

    /// Queues `update` in transaction `id`; over a limit (this connection's, or
    /// `server_max_bytes` for all connections together) the transaction is aborted.
    pub(crate) fn queue(
        &self,
        id: &[u8],
        message_id: i32,
        update: Update,
        server_max_bytes: usize,
    ) -> Result<(), OperationError> {
        let bytes = held_bytes(&update);
        let refusal = {
            let mut state = self.lock();
            let connection_bytes = state.held_bytes();
            let transaction = state
                .open
                .iter_mut()
                .find(|open| open.id == id)
                .ok_or_else(unknown)?;
            if transaction.updates.len() >= UPDATES_PER_TRANSACTION_MAX {
                format!("more than {UPDATES_PER_TRANSACTION_MAX} updates in one transaction")
            } else if connection_bytes + bytes > QUEUED_BYTES_PER_CONNECTION_MAX {
                format!(
                    "transactions on this connection would hold more than \
                     {QUEUED_BYTES_PER_CONNECTION_MAX} bytes"
                )
            } else if !self.server.reserve(bytes, server_max_bytes) {
                format!(
                    "open transactions would hold more than {server_max_bytes} bytes \
                     (transaction_bytes_max)"
                )
            } else {
                transaction.held_bytes += bytes;
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
        self.server.release(open.held_bytes);
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
        self.server.release(state.held_bytes());
        state.open.clear();
    }
}

/// Memory a list of values holds: the list's buffer of `Vec` headers and each value's block.
fn values_bytes(values: &[Vec<u8>]) -> usize {
    block(std::mem::size_of_val(values))
        + values.iter().map(|value| block(value.len())).sum::<usize>()
}

/// Memory a queued update holds until its transaction ends: the update itself, its DNs,
/// names and values each with its allocation, and its assertion filter.
pub(crate) fn held_bytes(update: &Update) -> usize {
    std::mem::size_of::<Update>()
        + request_bytes(&update.request)
        + update
            .assertion
            .as_ref()
            .map_or(0, |filter| filter.held_bytes())
        + block(update.identity.dn.len())
        + block(update.identity.normalized_dn.len())
        + block(update.password_policy_default.len())
}

fn request_bytes(request: &WriteRequest) -> usize {
    let modifications = |modifications: &[lmdir_schema::Modification]| -> usize {
        block(std::mem::size_of_val(modifications))
            + modifications
                .iter()
                .map(|change| block(change.description.len()) + values_bytes(&change.values))
                .sum::<usize>()
    };
    // A parsed DN (an add's): its list of RDNs, each one's list of AVAs, their types and values.
    let parsed_dn = |dn: &lmdir_schema::Dn| -> usize {
        block(std::mem::size_of_val(dn.rdns.as_slice()))
            + dn.rdns
                .iter()
                .map(|rdn| {
                    block(std::mem::size_of_val(rdn.avas.as_slice()))
                        + rdn
                            .avas
                            .iter()
                            .map(|ava| block(ava.attr.len()) + block(ava.value.len()))
                            .sum::<usize>()
                })
                .sum::<usize>()
    };
    match request {
        WriteRequest::Add(entry) => {
            parsed_dn(&entry.dn)
                + block(std::mem::size_of_val(entry.attributes.as_slice()))
                + entry
                    .attributes
                    .iter()
                    .map(|attribute| {
                        block(attribute.description.len()) + values_bytes(&attribute.values)
                    })
                    .sum::<usize>()
        }
        WriteRequest::Delete(dn) => block(dn.len()),
        WriteRequest::Modify(dn, changes) => block(dn.len()) + modifications(changes),
        WriteRequest::ModifyDn {
            dn,
            new_rdn,
            new_superior,
            ..
        } => {
            block(dn.len())
                + block(new_rdn.len())
                + new_superior.as_ref().map_or(0, |dn| block(dn.len()))
        }
        WriteRequest::SetPassword { dn, password, .. } => block(dn.len()) + block(password.len()),
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

    #[test]
    fn tiny_values_count_the_memory_they_hold_not_their_bytes() {
        let values: Vec<Vec<u8>> = (0..10_000u32)
            .map(|index| index.to_be_bytes()[3..].to_vec())
            .collect();
        let request = WriteRequest::Modify(
            "cn=x".to_string(),
            vec![lmdir_schema::Modification {
                op: lmdir_schema::ModOp::Add,
                description: "description".to_string(),
                values,
            }],
        );
        let per_value = std::mem::size_of::<Vec<u8>>() + block(1);
        assert!(request_bytes(&request) >= 10_000 * per_value);
    }

    #[test]
    fn the_server_wide_count_refuses_past_its_bound_and_takes_back_releases() {
        let server = QueuedBytes::default();
        assert!(server.reserve(600, 1000));
        assert!(!server.reserve(401, 1000));
        assert!(server.reserve(400, 1000));
        server.release(600);
        assert_eq!(server.held(), 400);
        assert!(!server.reserve(usize::MAX, usize::MAX));
    }
}
