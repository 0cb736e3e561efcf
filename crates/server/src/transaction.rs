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
use crate::transaction_queue::unknown;
use crate::write_request::{TransactionUpdates, Update, WriteRequest};
use bytes::BytesMut;
use std::sync::{Arc, Mutex};

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
}
