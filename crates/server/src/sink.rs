//! How operations hand their output to the connection: a narrow, bounded queue of encoded
//! messages. Defined below the connection so that operations never name its types.

use bytes::Bytes;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What operation tasks send to their connection.
#[derive(Debug)]
pub enum Outgoing {
    /// One or more encoded LDAPMessages of an operation, and that operation's stop flag: the
    /// connection drops them unwritten once the operation is abandoned or cancelled, so output
    /// that was waiting for room in the queue never reaches the client after an Abandon.
    Message {
        bytes: Bytes,
        stopped: Arc<AtomicBool>,
    },
    /// The operation with this message ID ends: its final `response` (empty when it sends
    /// none), with this result code (a pending Cancel is answered from it). One message, so the
    /// connection forgets the operation in the same step that writes its response: a client that
    /// sends its next request on reading the response never finds this one still counted
    /// against `operations_per_connection_max`.
    Done {
        message_id: i32,
        result_code: u32,
        response: Bytes,
    },
}

/// An operation's way to its connection's outgoing queue (bounded: a client that stops reading
/// slows only its own operations). Every send answers false once the connection is gone.
#[derive(Clone)]
pub struct ResultSink {
    sender: mpsc::Sender<Outgoing>,
    /// The operation's abandon/cancel flag (`OperationContext::cancelled`).
    stopped: Arc<AtomicBool>,
}

impl ResultSink {
    pub fn new(sender: mpsc::Sender<Outgoing>, stopped: Arc<AtomicBool>) -> ResultSink {
        ResultSink { sender, stopped }
    }

    fn message(&self, bytes: Bytes) -> Outgoing {
        Outgoing::Message {
            bytes,
            stopped: self.stopped.clone(),
        }
    }

    /// Queues one or more encoded messages, waiting while the queue is full.
    pub async fn send(&self, bytes: Bytes) -> bool {
        self.sender.send(self.message(bytes)).await.is_ok()
    }

    /// `send` from a blocking thread (a search on the blocking pool).
    pub fn send_blocking(&self, bytes: Bytes) -> bool {
        self.sender.blocking_send(self.message(bytes)).is_ok()
    }

    /// Ends the operation `message_id`: its final response (empty for none) and result code.
    pub async fn done(&self, message_id: i32, result_code: u32, response: Bytes) {
        // A closed queue means the connection is gone; nothing is left to tell.
        let _ = self
            .sender
            .send(Outgoing::Done {
                message_id,
                result_code,
                response,
            })
            .await;
    }
}
