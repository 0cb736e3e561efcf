//! LDAP transactions (RFC 5805). Start Transaction opens one on the connection; an update that
//! carries the transaction specification control is checked as if it were sent alone (its
//! controls, limits, password syntax) and queued, answered success ("queued"); End Transaction
//! hands the queued updates to the writer as one job, applied in order in one LMDB transaction,
//! so all of them commit or none does. Nothing of a transaction is decided before its end: the
//! writer makes every access, assertion and schema decision against the state the updates
//! change, as for any other update.
//!
//! An update naming an open transaction that is refused before it is queued (a bad request, a
//! limit) aborts that transaction: a client that missed the refusal cannot commit the rest
//! without it. Ending a transaction that is unknown (never started, ended, aborted, or the
//! connection bound again since) answers unwillingToPerform. Each connection's transactions are
//! its own; they end with it.

use crate::ber_read::{elements, read_tlv};
use crate::context::{database_of, no_such_object, submit, OperationContext};
use crate::result::{code, OperationError};
use crate::writer::{TransactionUpdates, Update, WriteRequest};
use bytes::BytesMut;
use std::sync::{Arc, Mutex};

/// Open transactions on one connection (OpenLDAP allows one; clients use one).
pub const TRANSACTIONS_PER_CONNECTION_MAX: usize = 4;
/// Updates queued in one transaction: a provisioning batch, not a bulk load (`lmdir load`).
pub const UPDATES_PER_TRANSACTION_MAX: usize = 1024;
/// Bytes of DNs and values queued in one connection's transactions, held until they end.
pub const QUEUED_BYTES_PER_CONNECTION_MAX: usize = 64 << 20;

/// One queued update and the message that asked for it.
struct Queued {
    message_id: i32,
    update: Update,
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

fn unknown() -> OperationError {
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
    fn take(&self, id: &[u8]) -> Option<Vec<Queued>> {
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

/// The transaction an update names with the specification control, if it carries one.
pub(crate) fn named_transaction(context: &OperationContext) -> Option<&[u8]> {
    context
        .controls
        .iter()
        .find(|control| control.oid == crate::controls::TRANSACTION_SPECIFICATION_OID)
        .and_then(|control| control.value.as_deref())
}

/// After an update that named a transaction was refused: the transaction is aborted.
pub(crate) fn abort_named(context: &OperationContext) {
    if let Some(id) = named_transaction(context) {
        context.session.transactions.abort(id);
    }
}

/// EndTxnRequest ::= SEQUENCE { commit BOOLEAN DEFAULT TRUE, identifier OCTET STRING }.
fn decode_end(value: Option<&[u8]>) -> Result<(bool, Vec<u8>), OperationError> {
    let malformed = || OperationError::new(code::PROTOCOL_ERROR, "malformed End Transaction");
    let (sequence, rest) = read_tlv(value.ok_or_else(malformed)?).ok_or_else(malformed)?;
    if sequence.tag != 0x30 || !rest.is_empty() {
        return Err(malformed());
    }
    // The identifier is read whatever its (primitive) tag, as the UnboundID SDK's decoder
    // does: its ldapmodify sends back the Start response's value element, tagged [11].
    let primitive = |tag: u8| tag & 0x20 == 0;
    match elements(sequence.content).ok_or_else(malformed)?.as_slice() {
        [identifier] if primitive(identifier.tag) && identifier.tag != 0x01 => {
            Ok((true, identifier.content.to_vec()))
        }
        [commit, identifier]
            if commit.tag == 0x01 && commit.content.len() == 1 && primitive(identifier.tag) =>
        {
            Ok((commit.content[0] != 0, identifier.content.to_vec()))
        }
        _ => Err(malformed()),
    }
}

/// txnEndRes ::= SEQUENCE { messageID MessageID OPTIONAL, ... }: the failed update's message.
fn end_response_value(failed_message_id: i32) -> Vec<u8> {
    let mut buffer = BytesMut::with_capacity(16);
    let mut writer = crate::ber::BerWriter::new(&mut buffer);
    writer.open(0x30);
    writer.integer(0x02, i64::from(failed_message_id));
    writer.close();
    drop(writer);
    buffer.to_vec()
}

/// End Transaction: abort, or commit every queued update in one writer transaction. A failure
/// answers the failed update's result code and names its message ID in the response value.
pub(crate) async fn end(
    context: &OperationContext,
    value: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, OperationError> {
    let (commit, id) = decode_end(value)?;
    let queued = context.session.transactions.take(&id).ok_or_else(unknown)?;
    if !commit || queued.is_empty() {
        return Ok(None);
    }
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(""));
    };
    let (message_ids, updates): (Vec<i32>, Vec<Update>) = queued
        .into_iter()
        .map(|queued| (queued.message_id, queued.update))
        .unzip();
    let failed = Arc::new(Mutex::new(None));
    let transaction = TransactionUpdates {
        updates,
        failed: failed.clone(),
    };
    let update = crate::context::update_of(
        context,
        &crate::controls::RequestControls::default(),
        WriteRequest::Transaction(transaction),
    )?;
    submit(database, update)
        .await
        .map(|()| None)
        .map_err(|mut error| {
            let position = *failed.lock().unwrap_or_else(|poison| poison.into_inner());
            if let Some(message_id) = position.and_then(|position| message_ids.get(position)) {
                error.extended_value = Some(end_response_value(*message_id).into_boxed_slice());
            }
            error
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_requests_decode_with_and_without_the_commit_flag() {
        assert_eq!(
            decode_end(Some(&[0x30, 0x03, 0x04, 0x01, b'7'])).unwrap(),
            (true, b"7".to_vec())
        );
        assert_eq!(
            decode_end(Some(&[0x30, 0x06, 0x01, 0x01, 0x00, 0x04, 0x01, b'7'])).unwrap(),
            (false, b"7".to_vec())
        );
        // UnboundID's ldapmodify: the identifier tagged as the Start response's value.
        assert_eq!(
            decode_end(Some(&[0x30, 0x03, 0x8b, 0x01, b'1'])).unwrap(),
            (true, b"1".to_vec())
        );
        for bad in [
            &[][..],
            &[0x30, 0x00],
            &[0x30, 0x03, 0x01, 0x01, 0x00],
            &[0x30, 0x02, 0x30, 0x00],
            &[0x30, 0x03, 0x04, 0x01, b'7', 0x00],
        ] {
            assert_eq!(
                decode_end(Some(bad)).unwrap_err().code,
                code::PROTOCOL_ERROR
            );
        }
        assert!(decode_end(None).is_err());
    }

    #[test]
    fn the_end_response_names_the_failed_message() {
        assert_eq!(end_response_value(5), vec![0x30, 0x03, 0x02, 0x01, 0x05]);
    }

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
