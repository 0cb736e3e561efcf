//! One client connection: reads PDUs, dispatches operations (each non-trivial one in its own task so
//! a long search never blocks the connection), writes their responses, enforces the per-connection
//! limits, upgrades to TLS on StartTLS, and closes on unbind, idle timeout, malformed input or
//! server shutdown.

use crate::ber::{self, ResultFields};
use crate::client_limits::ClientKey;
use crate::context::OperationContext;
use crate::context::ServerContext;
use crate::controls::{CANCEL_OID, START_TLS_OID};
use crate::identity::Identity;
use crate::log_text::escaped;
use crate::operations;
use crate::request::Operation;
use crate::result::{code, OperationError};
use crate::session::{Session, Transport};
use crate::sink::{Outgoing, ResultSink};
use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use ldap3_proto::proto::{LdapExtendedRequest, LdapMsg, LdapOp};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_util::codec::{Framed, FramedParts};
use tracing::{info, warn};

pub use crate::stream::{BoxedStream, ByteStream};

struct Outstanding {
    cancelled: Arc<AtomicBool>,
    task: tokio::task::AbortHandle,
}

/// What ended the read loop.
enum Ending {
    Unbind,
    PeerClosed,
    Notice(u32, String),
    Shutdown,
}

pub async fn run(
    context: Arc<ServerContext>,
    stream: BoxedStream,
    transport: Transport,
    client: ClientKey,
    connection_id: u64,
    peer: String,
    mut shutdown: watch::Receiver<bool>,
) {
    let session = open_session(&context, transport, client, connection_id, &peer);
    let mut connection = Connection::new(context, session, stream);
    let ending = connection.serve(&mut shutdown).await;
    connection.close(ending).await;
    // The connection's slot is given back when the accept loop's `Admission` drops, right after.
    info!("conn={connection_id} fd=0 closed");
}

/// What one connection holds while it serves: its session, its framed stream, the queues its
/// operations answer through, and the operations outstanding on it.
struct Connection {
    context: Arc<ServerContext>,
    session: Session,
    framed: Framed<BoxedStream, crate::pdu::PduCodec>,
    /// Bounded so a client that stops reading slows its own searches down instead of growing
    /// memory.
    sender: mpsc::Sender<Outgoing>,
    receiver: mpsc::Receiver<Outgoing>,
    inline: InlineQueue,
    outstanding: HashMap<i32, Outstanding>,
    /// Cancel requests waiting for their target to finish: target message ID → Cancel's ID.
    pending_cancels: HashMap<i32, i32>,
    operation_counter: u64,
    /// Pipelined operations queue here, costing no thread: one connection holds at most this
    /// many blocking threads and read txns however many operations it sends.
    running: Arc<tokio::sync::Semaphore>,
    pending: Arc<PendingRequests>,
    last_activity: Instant,
    write_timeout: Duration,
}

/// Resolves once the server shuts down (or its sender is gone). One future for a connection's
/// life: a `changed()` made on every turn of the serving loop put a waiter on the watch's list
/// and took it off again for every request.
async fn shutdown_requested(shutdown: &mut watch::Receiver<bool>) {
    loop {
        if shutdown.changed().await.is_err() || *shutdown.borrow() {
            return;
        }
    }
}

impl Connection {
    fn new(context: Arc<ServerContext>, session: Session, stream: BoxedStream) -> Connection {
        let settings = context.settings();
        let framed = Framed::new(stream, pdu_codec(&context, &session.identity));
        let (sender, receiver) = mpsc::channel::<Outgoing>(OUTGOING_QUEUE_MESSAGES_MAX);
        Connection {
            session,
            framed,
            sender,
            receiver,
            inline: InlineQueue::new(),
            outstanding: HashMap::new(),
            pending_cancels: HashMap::new(),
            operation_counter: 0,
            running: Arc::new(tokio::sync::Semaphore::new(
                settings.running_operations_per_connection_max,
            )),
            pending: Arc::new(PendingRequests::default()),
            last_activity: Instant::now(),
            write_timeout: settings.write_timeout,
            context,
        }
    }

    /// Reads requests and writes answers until something ends the connection.
    async fn serve(&mut self, shutdown: &mut watch::Receiver<bool>) -> Ending {
        let idle_setting = self.context.settings().idle_timeout;
        // Zero = never idle out; the branch is then disabled and the deadline unused.
        let idle_timeout = idle_setting.min(Duration::from_secs(86_400 * 365));
        // One timer for the connection's life, re-armed only when it fires early (activity
        // since): a timer made per request cost a timer-wheel insert and removal on every
        // operation.
        let idle = tokio::time::sleep_until(tokio::time::Instant::from_std(
            self.last_activity + idle_timeout,
        ));
        tokio::pin!(idle);
        let shutdown_requested = shutdown_requested(shutdown);
        tokio::pin!(shutdown_requested);
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown_requested => return Ending::Shutdown,
                // The connection holds a sender clone only through operations; `None` cannot
                // happen while `sender` lives here.
                outgoing = self.receiver.recv() => {
                    let Some(outgoing) = outgoing else { return Ending::PeerClosed };
                    if let Err(ending) = self.write(outgoing).await {
                        return ending;
                    }
                }
                frame = self.framed.next() => {
                    self.last_activity = Instant::now();
                    let handled = match request_of(frame, self.session.connection_id) {
                        Ok(message) => self.on_request(message).await,
                        Err(ending) => Err(ending),
                    };
                    if let Err(ending) = handled {
                        return ending;
                    }
                }
                () = &mut idle, if self.outstanding.is_empty() && !idle_setting.is_zero() => {
                    let deadline = self.last_activity + idle_timeout;
                    if Instant::now() >= deadline {
                        let reason = format!("idle for {} seconds", idle_setting.as_secs());
                        return Ending::Notice(code::UNAVAILABLE, reason);
                    }
                    idle.as_mut().reset(tokio::time::Instant::from_std(deadline));
                }
            }
        }
    }

    /// Writes what an operation queued (and whatever else is waiting).
    async fn write(&mut self, outgoing: Outgoing) -> Result<(), Ending> {
        let written = write_outgoing(
            &mut self.framed,
            &mut self.outstanding,
            &mut self.pending_cancels,
            outgoing,
            &mut self.receiver,
            self.write_timeout,
            &self.context.monitor,
        )
        .await;
        if let Err(error) = written {
            let connection_id = self.session.connection_id;
            info!(
                "conn={connection_id} closing: {}",
                escaped(&error.to_string())
            );
            return Err(Ending::PeerClosed);
        }
        self.last_activity = Instant::now();
        Ok(())
    }

    /// Sends one answer the connection itself makes; a failed write ends the connection.
    async fn send(&mut self, response: Bytes) -> Result<(), Ending> {
        send_within(&mut self.framed, response, self.write_timeout)
            .await
            .map_err(|_| Ending::PeerClosed)
    }

    /// Handles one request: the connection answers unbind, abandon, Cancel, StartTLS and bind
    /// itself; anything else goes to `operations`.
    async fn on_request(&mut self, message: crate::pdu::Request) -> Result<(), Ending> {
        self.operation_counter += 1;
        let (connection_id, operation_id) = (self.session.connection_id, self.operation_counter);
        count_received(&self.context, &self.session, &message.op);
        match message.op {
            Operation::Other(LdapOp::UnbindRequest) => {
                info!("conn={connection_id} op={operation_id} UNBIND");
                Err(Ending::Unbind)
            }
            Operation::Other(LdapOp::AbandonRequest(target)) => {
                info!("conn={connection_id} op={operation_id} ABANDON msg={target}");
                match abandon(&mut self.outstanding, &mut self.pending_cancels, target) {
                    Some(response) => self.send(response).await,
                    None => Ok(()),
                }
            }
            Operation::Other(LdapOp::ExtendedRequest(ref request))
                if request.name == CANCEL_OID =>
            {
                let cancel_request = (message.msgid, &message.controls[..], request);
                answer_cancel(
                    &mut self.framed,
                    &mut self.outstanding,
                    &mut self.pending_cancels,
                    cancel_request,
                    (connection_id, operation_id),
                    self.write_timeout,
                )
                .await
                .map_err(|_| Ending::PeerClosed)
            }
            Operation::Other(LdapOp::ExtendedRequest(ref request))
                if request.name == START_TLS_OID =>
            {
                let request_of_tls = (message.msgid, &message.controls[..]);
                self.start_tls(request_of_tls, request, operation_id).await
            }
            Operation::Bind(request) => {
                self.bind(message.msgid, &request, &message.controls, operation_id)
                    .await
            }
            operation => {
                let held = self.pending.hold(message.wire_bytes);
                let started = OperationStart {
                    message_id: message.msgid,
                    operation_id,
                    controls: message.controls,
                    operation,
                    held,
                };
                self.start_operation(started).await?;
                self.last_activity = Instant::now();
                Ok(())
            }
        }
    }

    /// StartTLS: the upgrade consumes the stream; a closed placeholder stands in until it is
    /// back.
    async fn start_tls(
        &mut self,
        request_of_tls: (i32, &[crate::controls::Control]),
        request: &LdapExtendedRequest,
        operation_id: u64,
    ) -> Result<(), Ending> {
        let placeholder: BoxedStream =
            Box::new(tokio::io::join(tokio::io::empty(), tokio::io::sink()));
        let codec = pdu_codec(&self.context, &self.session.identity);
        let current = std::mem::replace(&mut self.framed, Framed::new(placeholder, codec));
        let upgraded = start_tls(
            &self.context,
            &mut self.session,
            current,
            &self.outstanding,
            request_of_tls,
            request,
            operation_id,
        )
        .await;
        self.framed = upgraded.map_err(|()| Ending::PeerClosed)?;
        Ok(())
    }

    /// A bind, handled in order with nothing else running (RFC 4511 §4.2.1): the outstanding
    /// operations are abandoned first, and a Cancel waiting on one is answered (RFC 3909).
    async fn bind(
        &mut self,
        message_id: i32,
        request: &crate::request::BindRequest,
        controls: &[crate::controls::Control],
        operation_id: u64,
    ) -> Result<(), Ending> {
        let answers = abandon_all(&mut self.outstanding, &mut self.pending_cancels);
        send_all_within(&mut self.framed, answers, self.write_timeout)
            .await
            .map_err(|_| Ending::PeerClosed)?;
        let response = operations::bind(
            &self.context,
            &mut self.session,
            message_id,
            request,
            controls,
            operation_id,
        )
        .await;
        // The request size allowed follows the identity: larger once bound.
        *self.framed.codec_mut() = pdu_codec(&self.context, &self.session.identity);
        self.send(response).await
    }

    /// Starts an operation: refused busy past `operations_per_connection_max`, run right here when
    /// it is small (a search the index says is small), else in its own task, which waits for one of
    /// the connection's `running_operations_per_connection_max` turns. Err ends the connection.
    async fn start_operation(&mut self, start: OperationStart) -> Result<(), Ending> {
        let Connection {
            context,
            session,
            framed,
            outstanding,
            pending_cancels,
            sender,
            inline,
            running,
            pending,
            ..
        } = self;
        let settings = context.settings();
        let (connection_id, operation_id) = (session.connection_id, start.operation_id);
        if let Some(refusal) = over_outstanding_limits(&settings, session, outstanding, pending) {
            info!("conn={connection_id} op={operation_id} refused: {refusal}");
            let busy = OperationError::new(code::BUSY, refusal);
            if let Some(response) = operations::refusal(start.message_id, &start.operation, &busy) {
                if send_within(framed, response, settings.write_timeout)
                    .await
                    .is_err()
                {
                    return Err(Ending::PeerClosed);
                }
            }
            return Ok(());
        }
        if outstanding.contains_key(&start.message_id) {
            return Err(Ending::Notice(
                code::PROTOCOL_ERROR,
                format!("message ID {} is already in use", start.message_id),
            ));
        }
        let cancelled = Arc::new(AtomicBool::new(false));
        let prepared = operations::prepare(
            (context, &settings),
            session,
            &start.operation,
            &start.controls,
        );
        let write_timeout = settings.write_timeout;
        let operation_context = OperationContext {
            server: context.clone(),
            settings,
            session: session.clone(),
            message_id: start.message_id,
            operation_id,
            controls: start.controls,
            cancelled: cancelled.clone(),
            sink: ResultSink::new(sender.clone(), cancelled.clone()),
        };
        let operation = start.operation;
        if prepared.runs_inline() {
            let write_failed = run_inline(
                framed,
                outstanding,
                pending_cancels,
                inline,
                operation_context,
                operation,
                prepared,
                write_timeout,
                &context.monitor,
            )
            .await;
            return if write_failed {
                Err(Ending::PeerClosed)
            } else {
                Ok(())
            };
        }
        let turn = running.clone();
        let held = start.held;
        let task = tokio::spawn(async move {
            // Given back when the task ends or is aborted.
            let _held = held;
            // The semaphore lives as long as the connection: never closed.
            let Ok(_running) = turn.acquire_owned().await else {
                return;
            };
            // Boxed: an operation's future is kilobytes, and the task would move it whole into
            // its cell and again at each change of its stage (a tenth of a member add's work).
            Box::pin(operations::dispatch(operation_context, operation, prepared)).await
        });
        outstanding.insert(
            start.message_id,
            Outstanding {
                cancelled,
                task: task.abort_handle(),
            },
        );
        Ok(())
    }

    /// Ends the connection as `ending` says (see `close`), then closes the stream.
    async fn close(mut self, ending: Ending) {
        close(
            &mut self.framed,
            ending,
            &mut self.outstanding,
            &mut self.pending_cancels,
            &mut self.receiver,
            self.write_timeout,
            &self.context.monitor,
        )
        .await;
        let _ = self.framed.close().await;
    }
}

/// The request a frame read carries, or how the connection ends: the peer closed it or a
/// read failed (closed quietly), or the bytes are no LDAP message (a Notice of Disconnection).
fn request_of(
    frame: Option<Result<crate::pdu::Request, crate::pdu::PduError>>,
    connection_id: u64,
) -> Result<crate::pdu::Request, Ending> {
    match frame {
        None => Err(Ending::PeerClosed),
        Some(Ok(message)) => Ok(message),
        Some(Err(crate::pdu::PduError::Io(error))) => {
            info!(
                "conn={connection_id} read failed: {}",
                escaped(&error.to_string())
            );
            Err(Ending::PeerClosed)
        }
        Some(Err(error)) => {
            warn!(
                "conn={connection_id} closing: {}",
                escaped(&error.to_string())
            );
            Err(Ending::Notice(code::PROTOCOL_ERROR, error.to_string()))
        }
    }
}

/// Answers a Cancel request (RFC 3909) at once when it fails; one that goes ahead is answered
/// when its target ends. `cancel_request`: the Cancel's message ID, controls and request;
/// Err when the answer could not be written.
async fn answer_cancel(
    framed: &mut Framed<BoxedStream, crate::pdu::PduCodec>,
    outstanding: &mut HashMap<i32, Outstanding>,
    pending_cancels: &mut HashMap<i32, i32>,
    (message_id, controls, request): (i32, &[crate::controls::Control], &LdapExtendedRequest),
    (connection_id, operation_id): (u64, u64),
    write_timeout: Duration,
) -> Result<(), crate::pdu::PduError> {
    let result_code = match cancel(controls, request, message_id, outstanding, pending_cancels) {
        Ok(result_code) => result_code,
        Err(target) => {
            info!("conn={connection_id} op={operation_id} CANCEL msg={target}");
            return Ok(());
        }
    };
    info!("conn={connection_id} op={operation_id} CANCEL err={result_code}");
    let response = cancel_response(message_id, result_code);
    send_within(framed, response, write_timeout).await
}

/// The session of a connection just accepted (anonymous), counted in cn=Monitor.
fn open_session(
    context: &ServerContext,
    transport: Transport,
    client: ClientKey,
    connection_id: u64,
    peer: &str,
) -> Session {
    let tls_active = transport == Transport::Tls;
    let listener = match &transport {
        Transport::Tcp => "ldap",
        Transport::Tls => "ldaps",
        Transport::Ldapi { .. } => "ldapi",
    };
    let session = Session {
        connection_id,
        identity: Identity::default(),
        transport,
        client,
        tls_active,
        monitor: context
            .monitor
            .connection_opened(connection_id, peer, listener),
        password_must_change: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        transactions: Arc::new(crate::transaction_queue::Transactions::new(
            context.transaction_bytes.clone(),
        )),
    };
    info!(
        "conn={connection_id} fd=0 ACCEPT from {peer} ({})",
        if session.tls_active { "TLS" } else { "clear" }
    );
    session
}

/// Counts a received request; the ones answered by the connection itself (not by `dispatch`)
/// are counted complete here too.
fn count_received(context: &ServerContext, session: &Session, operation: &Operation) {
    session.monitor.operation_received();
    let kind = crate::monitor::OperationKind::of_request(operation);
    if let Some(kind) = kind {
        context.monitor.operation_initiated(kind);
    }
    let answered_here = match operation {
        Operation::Other(LdapOp::UnbindRequest | LdapOp::AbandonRequest(_)) => true,
        Operation::Other(LdapOp::ExtendedRequest(request)) => {
            request.name == CANCEL_OID || request.name == START_TLS_OID
        }
        _ => false,
    };
    if let (true, Some(kind)) = (answered_here, kind) {
        context
            .monitor
            .operation_completed(kind, code::SUCCESS, std::time::Duration::ZERO);
        session.monitor.operation_completed();
    }
}

/// Cancel (RFC 3909): the result code to answer now, or Err(target) when the target is running
/// and the answer waits for its end (success if it stopped, tooLate if not).
fn cancel(
    controls: &[crate::controls::Control],
    request: &LdapExtendedRequest,
    cancel_message_id: i32,
    outstanding: &mut HashMap<i32, Outstanding>,
    pending_cancels: &mut HashMap<i32, i32>,
) -> Result<u32, i32> {
    let controls = crate::controls::parse(controls, crate::controls::OperationClass::Connection);
    Ok(
        match (controls, parse_cancel_id(request.value.as_deref())) {
            (Err(error), _) => error.code,
            (_, None) => code::PROTOCOL_ERROR,
            (_, Some(target)) if pending_cancels.contains_key(&target) => code::CANNOT_CANCEL,
            (_, Some(target)) => match outstanding.get(&target) {
                Some(operation) => {
                    operation.cancelled.store(true, Ordering::Release);
                    pending_cancels.insert(target, cancel_message_id);
                    return Err(target);
                }
                None => code::NO_SUCH_OPERATION,
            },
        },
    )
}

/// Abandons every outstanding operation (a bind ends them all); returns the answers of the
/// Cancels that were waiting on them.
fn abandon_all(
    outstanding: &mut HashMap<i32, Outstanding>,
    pending_cancels: &mut HashMap<i32, i32>,
) -> Vec<Bytes> {
    let targets: Vec<i32> = outstanding.keys().copied().collect();
    let answers = targets
        .into_iter()
        .filter_map(|target| abandon(outstanding, pending_cancels, target))
        .collect();
    // A Cancel waits only on an outstanding operation (it leaves with its target's result).
    debug_assert!(pending_cancels.is_empty(), "a Cancel outlived its target");
    answers
}

/// Abandons `target`: its task is aborted and it sends nothing more. Returns the response to a
/// Cancel that was waiting on it (canceled), if any.
fn abandon(
    outstanding: &mut HashMap<i32, Outstanding>,
    pending_cancels: &mut HashMap<i32, i32>,
    target: i32,
) -> Option<Bytes> {
    if let Some(abandoned) = outstanding.remove(&target) {
        // Abort first: a job that sees the flag ends with `canceled`, and its task must not be
        // left free to send that for an abandoned operation.
        abandoned.task.abort();
        abandoned.cancelled.store(true, Ordering::Release);
    }
    pending_cancels
        .remove(&target)
        .map(|cancel_message_id| cancel_response(cancel_message_id, code::CANCELED))
}

/// A request the connection hands to `operations` (anything but bind, unbind, abandon, Cancel
/// and StartTLS).
struct OperationStart {
    message_id: i32,
    operation_id: u64,
    controls: Vec<crate::controls::Control>,
    operation: Operation,
    /// Its request's bytes in the connection's pending count, until the operation ends.
    held: PendingHold,
}

/// Bytes of requests a connection has read whose operations have not ended (waiting for a
/// turn or running). Decoded requests hold several times their wire size (a 2-byte value is a
/// 24-byte `Vec` and an allocation; 128 pipelined searches with 81 KB filters of 9,000 items
/// grew the server by 90 MB), so 128 operations of 256 KiB each were about 300 MB per
/// anonymous connection; past `pending_request_bytes_max` a new operation is answered busy at once.
#[derive(Default)]
struct PendingRequests {
    bytes: AtomicUsize,
}

impl PendingRequests {
    fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    fn hold(self: &Arc<Self>, bytes: usize) -> PendingHold {
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
        PendingHold {
            pending: self.clone(),
            bytes,
        }
    }
}

/// One operation's share of `PendingRequests`, given back when it is dropped: when the
/// operation ends however it ends (answered, abandoned, aborted by a bind, its task gone).
struct PendingHold {
    pending: Arc<PendingRequests>,
    bytes: usize,
}

impl Drop for PendingHold {
    fn drop(&mut self) {
        let before = self.pending.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
        debug_assert!(before >= self.bytes, "pending request bytes released twice");
    }
}

/// How many request bytes a connection's operations may hold: four of its largest requests
/// (`anonymous_pdu_bytes_max` before a bind, `pdu_bytes_max` after). One operation is always
/// taken when none is outstanding.
fn pending_request_bytes_max(
    settings: &crate::settings::ServerSettings,
    identity: &Identity,
) -> usize {
    PENDING_REQUESTS_OF_LARGEST_SIZE * pdu_bytes_max(settings, identity)
}

/// Largest requests a connection may have pending at once (see `pending_request_bytes_max`).
pub const PENDING_REQUESTS_OF_LARGEST_SIZE: usize = 4;

/// Why a new operation would take the connection past its bounds on outstanding operations
/// (count, and bytes of their requests, the new one's already counted in `pending`), if so.
fn over_outstanding_limits(
    settings: &crate::settings::ServerSettings,
    session: &Session,
    outstanding: &HashMap<i32, Outstanding>,
    pending: &PendingRequests,
) -> Option<String> {
    if outstanding.len() >= settings.operations_per_connection_max {
        return Some(format!(
            "too many outstanding operations on this connection (limit {})",
            settings.operations_per_connection_max
        ));
    }
    let bytes_max = pending_request_bytes_max(settings, &session.identity);
    if !outstanding.is_empty() && pending.bytes() > bytes_max {
        return Some(format!(
            "the requests outstanding on this connection would hold more than {bytes_max} bytes"
        ));
    }
    None
}

/// The queue of the operations a connection runs on its own task, one at a time: made once
/// per connection, not per operation (a channel is an allocation and its teardown).
struct InlineQueue {
    sender: mpsc::Sender<Outgoing>,
    receiver: mpsc::Receiver<Outgoing>,
}

impl InlineQueue {
    fn new() -> InlineQueue {
        let (sender, receiver) = mpsc::channel::<Outgoing>(OUTGOING_QUEUE_MESSAGES_MAX);
        InlineQueue { sender, receiver }
    }
}

/// Runs a small operation on the connection's task, writing its output as it comes, instead of
/// spawning a task another thread may steal (microseconds of work). True when a write failed
/// (the connection then ends, whatever is left queued with it).
#[allow(clippy::too_many_arguments)]
async fn run_inline(
    framed: &mut Framed<BoxedStream, crate::pdu::PduCodec>,
    outstanding: &mut HashMap<i32, Outstanding>,
    pending_cancels: &mut HashMap<i32, i32>,
    inline: &mut InlineQueue,
    operation_context: OperationContext,
    operation: Operation,
    prepared: operations::Prepared,
    write_timeout: Duration,
    monitor: &crate::monitor::Monitor,
) -> bool {
    debug_assert!(
        inline.receiver.is_empty(),
        "an inline operation's output left queued"
    );
    let operation_context = OperationContext {
        sink: ResultSink::new(inline.sender.clone(), operation_context.cancelled.clone()),
        ..operation_context
    };
    let dispatch = operations::dispatch(operation_context, operation, prepared);
    tokio::pin!(dispatch);
    let mut dispatch_done = false;
    loop {
        let outgoing = if dispatch_done {
            // The operation has ended, and with it its sink: an inline operation starts nothing
            // that outlives it (no task, no persist), so what is queued is all there is to write.
            debug_assert_eq!(
                inline.sender.strong_count(),
                1,
                "an inline operation's sink outlived it"
            );
            match inline.receiver.try_recv() {
                Ok(outgoing) => outgoing,
                Err(_) => return false,
            }
        } else {
            tokio::select! {
                () = &mut dispatch => {
                    dispatch_done = true;
                    continue;
                }
                // The queue holds a sender of its own: it never closes.
                outgoing = inline.receiver.recv() => match outgoing {
                    Some(outgoing) => outgoing,
                    None => return false,
                },
            }
        };
        if write_outgoing(
            framed,
            outstanding,
            pending_cancels,
            outgoing,
            &mut inline.receiver,
            write_timeout,
            monitor,
        )
        .await
        .is_err()
        {
            return true;
        }
    }
}

/// Ends a connection as `ending` says: operations in flight are stopped (or, at shutdown,
/// given a grace period to answer), then a Notice of Disconnection when one is due.
#[allow(clippy::too_many_arguments)]
async fn close(
    framed: &mut Framed<BoxedStream, crate::pdu::PduCodec>,
    ending: Ending,
    outstanding: &mut HashMap<i32, Outstanding>,
    pending_cancels: &mut HashMap<i32, i32>,
    receiver: &mut mpsc::Receiver<Outgoing>,
    write_timeout: Duration,
    monitor: &crate::monitor::Monitor,
) {
    let stop_all = |outstanding: &mut HashMap<i32, Outstanding>| {
        for (_, operation) in outstanding.drain() {
            operation.cancelled.store(true, Ordering::Release);
            operation.task.abort();
        }
    };
    let notice = match ending {
        Ending::Unbind | Ending::PeerClosed => {
            stop_all(outstanding);
            None
        }
        Ending::Notice(result_code, reason) => {
            stop_all(outstanding);
            Some((result_code, reason))
        }
        Ending::Shutdown => {
            // In-flight operations (writes especially) finish and are answered before the notice.
            let grace = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
            while !outstanding.is_empty() {
                let Ok(Some(outgoing)) = tokio::time::timeout_at(grace, receiver.recv()).await
                else {
                    break;
                };
                let written = write_outgoing(
                    framed,
                    outstanding,
                    pending_cancels,
                    outgoing,
                    receiver,
                    write_timeout,
                    monitor,
                )
                .await;
                if written.is_err() {
                    break;
                }
            }
            Some((code::UNAVAILABLE, "server shutting down".to_string()))
        }
    };
    if let Some((result_code, reason)) = notice {
        let notice = ber::notice_of_disconnection(result_code, &reason);
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            framed.send(notice.freeze()),
        )
        .await;
    }
}

/// Writes one outgoing item and everything else already queued, then flushes once.
async fn write_outgoing(
    framed: &mut Framed<BoxedStream, crate::pdu::PduCodec>,
    outstanding: &mut HashMap<i32, Outstanding>,
    pending_cancels: &mut HashMap<i32, i32>,
    first: Outgoing,
    receiver: &mut mpsc::Receiver<Outgoing>,
    write_timeout: Duration,
    monitor: &crate::monitor::Monitor,
) -> Result<(), crate::pdu::PduError> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut next = Some(first);
    while let Some(outgoing) = next.take() {
        match outgoing {
            Outgoing::Message { bytes, .. } if bytes.is_empty() => {}
            // Abandoned (or cancelled) since it was queued: RFC 4511 4.11 lets the server stop
            // sending, and the client has already moved on.
            Outgoing::Message { stopped, .. } if stopped.load(Ordering::Acquire) => {}
            Outgoing::Message { bytes, .. } => chunks.push(bytes),
            Outgoing::Done {
                message_id,
                result_code,
                response,
            } => {
                if !response.is_empty() {
                    chunks.push(response);
                }
                outstanding.remove(&message_id);
                // RFC 3909: the Cancel is answered after its target's own response.
                if let Some(cancel_message_id) = pending_cancels.remove(&message_id) {
                    let cancel_result = if result_code == code::CANCELED {
                        code::SUCCESS
                    } else {
                        code::TOO_LATE
                    };
                    chunks.push(cancel_response(cancel_message_id, cancel_result));
                }
            }
        }
        // Batch what is already waiting, up to a bound, so big searches flush in large writes.
        if chunks.len() < OUTGOING_BATCH_CHUNKS_MAX {
            next = receiver.try_recv().ok();
        }
    }
    if chunks.is_empty() {
        return Ok(());
    }
    // Whatever the codec still buffers goes first; then the chunks are written as they are,
    // with vectored writes, instead of being copied into the codec's buffer (a search's
    // output is written once, by the kernel).
    within(write_timeout, framed.flush()).await?;
    write_all_vectored(framed.get_mut(), &chunks, write_timeout).await?;
    within(
        write_timeout,
        tokio::io::AsyncWriteExt::flush(framed.get_mut()),
    )
    .await?;
    monitor.bytes_sent(chunks.iter().map(Bytes::len).sum());
    Ok(())
}

/// The request codec for a connection bound as `identity`: before a successful bind only
/// `anonymous_pdu_bytes_max` (unauthenticated clients cannot make the server buffer megabytes).
/// It reads the limits from the settings now before each request, so a reload lowering them
/// bites on open connections too (an operator doing so during an attack expects it).
fn pdu_codec(context: &Arc<ServerContext>, identity: &Identity) -> crate::pdu::PduCodec {
    let (context, bound) = (context.clone(), !identity.dn.is_empty());
    crate::pdu::PduCodec::live(move || {
        let settings = context.settings();
        (
            pdu_bytes_max_when(&settings, bound),
            settings.filter_depth_max + 32,
        )
    })
}

/// The largest request the connection takes now: larger once bound.
fn pdu_bytes_max(settings: &crate::settings::ServerSettings, identity: &Identity) -> usize {
    pdu_bytes_max_when(settings, !identity.dn.is_empty())
}

/// The largest request a connection takes, `bound` or not.
fn pdu_bytes_max_when(settings: &crate::settings::ServerSettings, bound: bool) -> usize {
    if bound {
        settings.pdu_bytes_max
    } else {
        settings.anonymous_pdu_bytes_max.min(settings.pdu_bytes_max)
    }
}

/// One write step (a write, a flush) that must progress within `write_timeout`: a client that
/// takes nothing for that long is treated as gone (slapd's `writetimeout`), so the operations
/// feeding it end and release their read transactions and threads. A step done at its first
/// poll (nearly every write: the socket's buffer has room) makes no timer; a timer made for
/// each of a response's three steps cost a clock read and a timer entry built and dropped.
async fn within<T, E: Into<crate::pdu::PduError>>(
    write_timeout: Duration,
    step: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, crate::pdu::PduError> {
    let mut step = std::pin::pin!(step);
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(step.as_mut().poll(cx))).await;
    if let std::task::Poll::Ready(result) = first {
        return result.map_err(Into::into);
    }
    match tokio::time::timeout(write_timeout, step).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(crate::pdu::PduError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the client took no data for {} s (write timeout)",
                write_timeout.as_secs()
            ),
        ))),
    }
}

/// Sends one response through the codec within the write timeout.
async fn send_within(
    framed: &mut Framed<BoxedStream, crate::pdu::PduCodec>,
    response: Bytes,
    write_timeout: Duration,
) -> Result<(), crate::pdu::PduError> {
    within(write_timeout, framed.send(response)).await
}

/// Sends `responses` in order, each within the write timeout.
async fn send_all_within(
    framed: &mut Framed<BoxedStream, crate::pdu::PduCodec>,
    responses: Vec<Bytes>,
    write_timeout: Duration,
) -> Result<(), crate::pdu::PduError> {
    for response in responses {
        send_within(framed, response, write_timeout).await?;
    }
    Ok(())
}

/// The Cancel request value: `SEQUENCE { cancelID MessageID }` (RFC 3909 §2).
fn parse_cancel_id(value: Option<&[u8]>) -> Option<i32> {
    let value = value?;
    let (&[0x30, sequence_length, 0x02, integer_length], integer) =
        value.split_first_chunk::<4>()?
    else {
        return None;
    };
    let integer_length = integer_length as usize;
    if sequence_length as usize != integer_length + 2
        || integer.len() != integer_length
        || !(1..=4).contains(&integer_length)
    {
        return None;
    }
    let mut id: i64 = if integer[0] & 0x80 != 0 { -1 } else { 0 };
    for &byte in integer {
        id = (id << 8) | i64::from(byte);
    }
    // MessageID ::= INTEGER (0 .. maxInt)
    i32::try_from(id).ok().filter(|id| *id >= 0)
}

/// A Cancel response: an ExtendedResponse without name or value (RFC 3909 §2).
fn cancel_response(message_id: i32, result_code: u32) -> Bytes {
    extended_response(message_id, result_code, "", None)
}

/// An ExtendedResponse without a value.
fn extended_response(
    message_id: i32,
    result_code: u32,
    message: &str,
    name: Option<&str>,
) -> Bytes {
    let mut buffer = BytesMut::with_capacity(64 + message.len());
    ber::write_extended_response(
        &mut buffer,
        message_id,
        &ResultFields {
            code: result_code,
            matched_dn: "",
            message,
        },
        name,
        None,
        &[],
    );
    buffer.freeze()
}

/// Responses queued per connection before operations wait for the socket. A big search sends
/// chunks of up to 256 KiB, so this bounds a slow reader's queue at about 4 MiB.
const OUTGOING_QUEUE_MESSAGES_MAX: usize = 16;

/// Most queued messages gathered into one write.
const OUTGOING_BATCH_CHUNKS_MAX: usize = 512;
/// Most slices handed to one vectored write (Linux takes up to 1,024).
const SLICES_PER_WRITE_MAX: usize = 64;

/// Writes every chunk (none empty) in order, resuming after partial writes.
async fn write_all_vectored(
    stream: &mut BoxedStream,
    chunks: &[Bytes],
    write_timeout: Duration,
) -> Result<(), crate::pdu::PduError> {
    debug_assert!(chunks.iter().all(|chunk| !chunk.is_empty()));
    use tokio::io::AsyncWriteExt;
    let mut index = 0;
    let mut offset = 0;
    while index < chunks.len() {
        let slices: Vec<std::io::IoSlice<'_>> = chunks[index..]
            .iter()
            .take(SLICES_PER_WRITE_MAX)
            .enumerate()
            .map(|(position, chunk)| {
                std::io::IoSlice::new(if position == 0 {
                    &chunk[offset..]
                } else {
                    &chunk[..]
                })
            })
            .collect();
        let mut written = within(write_timeout, stream.write_vectored(&slices)).await?;
        if written == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into());
        }
        while index < chunks.len() && written > 0 {
            let left_in_chunk = chunks[index].len() - offset;
            if written >= left_in_chunk {
                written -= left_in_chunk;
                index += 1;
                offset = 0;
            } else {
                offset += written;
                written = 0;
            }
        }
    }
    Ok(())
}

async fn start_tls(
    context: &Arc<ServerContext>,
    session: &mut Session,
    mut framed: Framed<BoxedStream, crate::pdu::PduCodec>,
    outstanding: &HashMap<i32, Outstanding>,
    (message_id, controls): (i32, &[crate::controls::Control]),
    request: &LdapExtendedRequest,
    operation_id: u64,
) -> Result<Framed<BoxedStream, crate::pdu::PduCodec>, ()> {
    let connection_id = session.connection_id;
    info!("conn={connection_id} op={operation_id} EXT oid={START_TLS_OID}");
    let refusal = start_tls_refusal(context, session, outstanding, controls, request);
    let (result_code, message) = match &refusal {
        Some(error) => (error.code, error.message.as_str()),
        None => (code::SUCCESS, ""),
    };
    let response = extended_response(message_id, result_code, message, Some(START_TLS_OID));
    info!(
        "conn={connection_id} op={operation_id} RESULT tag=120 err={result_code} text={}",
        escaped(message)
    );
    if send_within(&mut framed, response, context.settings().write_timeout)
        .await
        .is_err()
    {
        return Err(());
    }
    let Some(tls_config) = context.tls_config.clone().filter(|_| refusal.is_none()) else {
        return Ok(framed);
    };
    tls_handshake(context, session, framed, tls_config).await
}

/// Why a StartTLS request is refused (None when it may go ahead): bad controls, a value, TLS
/// already on, ldapi, no TLS configured, or operations still outstanding.
fn start_tls_refusal(
    context: &ServerContext,
    session: &Session,
    outstanding: &HashMap<i32, Outstanding>,
    controls: &[crate::controls::Control],
    request: &LdapExtendedRequest,
) -> Option<OperationError> {
    if let Err(error) =
        crate::controls::parse(controls, crate::controls::OperationClass::Connection)
    {
        Some(error)
    } else if request.value.is_some() {
        Some(OperationError::new(
            code::PROTOCOL_ERROR,
            "StartTLS request must not carry a value",
        ))
    } else if session.tls_active {
        Some(OperationError::new(
            code::OPERATIONS_ERROR,
            "TLS already started",
        ))
    } else if matches!(session.transport, Transport::Ldapi { .. }) {
        Some(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "StartTLS is not offered over ldapi",
        ))
    } else if context.tls_config.is_none() {
        Some(OperationError::new(
            code::UNAVAILABLE,
            "TLS is not configured on this server",
        ))
    } else if !outstanding.is_empty() {
        Some(OperationError::new(
            code::OPERATIONS_ERROR,
            format!(
                "{} operations outstanding; StartTLS needs an idle connection",
                outstanding.len()
            ),
        ))
    } else {
        None
    }
}

/// The TLS handshake after a StartTLS success response: nothing may have arrived after the
/// request, and the handshake must end within `tls_handshake_timeout`; Err closes the
/// connection.
async fn tls_handshake(
    context: &ServerContext,
    session: &mut Session,
    framed: Framed<BoxedStream, crate::pdu::PduCodec>,
    tls_config: Arc<rustls::ServerConfig>,
) -> Result<Framed<BoxedStream, crate::pdu::PduCodec>, ()> {
    let connection_id = session.connection_id;
    let parts = framed.into_parts();
    if !parts.read_buf.is_empty() {
        warn!("conn={connection_id} data received after StartTLS request before the TLS handshake; closing");
        return Err(());
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config);
    // A client that asks for TLS and then sends nothing must not hold the connection forever.
    let handshake_timeout = context.settings().tls_handshake_timeout;
    let Ok(handshake) = tokio::time::timeout(handshake_timeout, acceptor.accept(parts.io)).await
    else {
        info!(
            "conn={connection_id} TLS handshake not finished within {} s; closing",
            handshake_timeout.as_secs()
        );
        return Err(());
    };
    match handshake {
        Ok(tls_stream) => {
            session.tls_active = true;
            info!("conn={connection_id} TLS established");
            let boxed: BoxedStream = Box::new(tls_stream);
            let mut new_parts = FramedParts::new::<Bytes>(boxed, parts.codec);
            new_parts.write_buf = BytesMut::new();
            Ok(Framed::from_parts(new_parts))
        }
        Err(error) => {
            info!(
                "conn={connection_id} TLS handshake failed: {}",
                escaped(&error.to_string())
            );
            Err(())
        }
    }
}

/// Encodes a full LDAPMessage with ldap3_proto (for the less frequent responses).
pub fn encode_message(message: LdapMsg) -> Bytes {
    use tokio_util::codec::Encoder;
    let mut buffer = BytesMut::new();
    ldap3_proto::LdapCodec::default()
        .encode(message, &mut buffer)
        .expect("encoding into a BytesMut cannot fail");
    buffer.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn cancel_ids_parse_and_bad_values_are_refused() {
        assert_eq!(
            parse_cancel_id(Some(&[0x30, 0x03, 0x02, 0x01, 0x05])),
            Some(5)
        );
        assert_eq!(
            parse_cancel_id(Some(&[0x30, 0x04, 0x02, 0x02, 0x01, 0x00])),
            Some(256)
        );
        assert_eq!(parse_cancel_id(Some(&[0x30, 0x03, 0x02, 0x01, 0xff])), None);
        assert_eq!(parse_cancel_id(Some(&[0x30, 0x03, 0x02, 0x02, 0x05])), None);
        assert_eq!(parse_cancel_id(Some(&[0x30, 0x02, 0x02, 0x00])), None);
        assert_eq!(parse_cancel_id(None), None);
    }

    #[tokio::test]
    async fn vectored_writes_deliver_every_chunk_in_order_despite_partial_writes() {
        // A 7-byte pipe forces partial writes that end inside chunks and between them.
        let (writer, mut reader) = tokio::io::duplex(7);
        let chunks: Vec<Bytes> = (1..=40u8)
            .map(|length| Bytes::from(vec![length; length as usize]))
            .collect();
        let expected: Vec<u8> = chunks.iter().flat_map(|chunk| chunk.to_vec()).collect();
        let reading = tokio::spawn(async move {
            let mut received = Vec::new();
            reader.read_to_end(&mut received).await.unwrap();
            received
        });
        let mut stream: BoxedStream = Box::new(writer);
        write_all_vectored(&mut stream, &chunks, Duration::from_secs(60))
            .await
            .unwrap();
        drop(stream);
        assert_eq!(reading.await.unwrap(), expected);
    }
}
