//! Listeners and lifecycle: binds every configured endpoint, accepts connections under the
//! connection limit, and shuts down gracefully (stop accepting, let in-flight operations answer,
//! send a Notice of Disconnection, close).

use crate::client_limits::{AddressSlot, BindThrottle, ClientKey};
use crate::connection::{self, BoxedStream};
use crate::session::Transport;
use crate::settings::{ListenAddress, ServerSettings};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{watch, Notify};
use tracing::{error, info, warn};

use crate::context::Refusals;
pub use crate::context::{ServerContext, ServerError};

/// Tasks a worker runs between two looks for new I/O events while it has tasks to run (tokio's
/// `event_interval`; its default is 61). A connection's task does microseconds of work per poll
/// and then waits for its client's next request. Looking after every task finds that request
/// as it arrives instead of after up to 60 others: under the uid searchrate (8 connections, 2
/// cores) lmdir answered 54.7-56.2k searches/s against 47.0-47.5k, using less CPU per search
/// (25.4-26.3 µs against 27.7-29.5), at the price of one non-blocking epoll_wait per task
/// (`bench/search-load-profile.sh`; docs/benchmarks.md, 2026-12-02).
pub const TASKS_BETWEEN_EVENT_POLLS: u32 = 1;

/// The runtime every listener and operation runs on: one worker per core, looking for I/O
/// events after every task (`TASKS_BETWEEN_EVENT_POLLS`).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .event_interval(TASKS_BETWEEN_EVENT_POLLS)
        .enable_all()
        .build()
}

const REFUSALS_IN_FLIGHT_MAX: usize = 64;
const REFUSAL_LOG_INTERVAL_MILLISECONDS: u64 = 1_000;

impl Refusals {
    /// Counts one refusal and logs a summary when the last one is a second old.
    fn note(&self, peer: &str, reason: &str, started: Instant) {
        self.not_yet_logged.fetch_add(1, Ordering::AcqRel);
        // Shifted by one interval so that the very first refusal is logged at once.
        let now_milliseconds =
            started.elapsed().as_millis() as u64 + REFUSAL_LOG_INTERVAL_MILLISECONDS;
        let last = self.last_log_milliseconds.load(Ordering::Acquire);
        let due = now_milliseconds.saturating_sub(last) >= REFUSAL_LOG_INTERVAL_MILLISECONDS;
        // One thread wins the right to log this interval's summary.
        if due
            && self
                .last_log_milliseconds
                .compare_exchange(last, now_milliseconds, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let count = self.not_yet_logged.swap(0, Ordering::AcqRel);
            if count > 0 {
                warn!("refused {count} connection(s) (latest from {peer}: {reason})");
            }
        }
    }
}

/// Refuses a connection over a limit: counted, logged in summary, answered with a notice
/// of disconnection while few such answers are in flight.
fn refuse_connection(
    context: &Arc<ServerContext>,
    stream: BoxedStream,
    peer: &str,
    reason: String,
) {
    context.refusals.note(peer, &reason, context.started);
    if context.refusals.in_flight.fetch_add(1, Ordering::AcqRel) >= REFUSALS_IN_FLIGHT_MAX {
        context.refusals.in_flight.fetch_sub(1, Ordering::AcqRel);
        return; // dropping the stream closes it
    }
    let context = context.clone();
    tokio::spawn(async move {
        refuse(stream, reason).await;
        context.refusals.in_flight.fetch_sub(1, Ordering::AcqRel);
    });
}

impl ServerContext {
    /// The settings now: an operation takes them once and keeps them to its end. With a
    /// database they come from its `Running`, swapped with the access rules as one.
    pub fn settings(&self) -> std::sync::Arc<ServerSettings> {
        match &self.database {
            Some(database) => database.running().settings.clone(),
            None => self.settings_live.load(),
        }
    }

    pub fn has_database(&self) -> bool {
        self.database.is_some()
    }

    pub fn offers_ldapi(&self) -> bool {
        self.settings()
            .listen
            .iter()
            .any(|address| matches!(address, ListenAddress::Ldapi(_)))
    }

    /// Re-reads the configured TLS certificate and key (after a renewal): new handshakes get
    /// them, open connections go on undisturbed. `Ok(false)` when TLS is not configured; on an
    /// error the certificate in use stays.
    pub fn reload_tls(&self) -> Result<bool, crate::tls::TlsError> {
        match &self.tls_certificate {
            Some(certificate) => certificate.reload().map(|()| true),
            None => Ok(false),
        }
    }

    pub fn active_connections(&self) -> usize {
        self.active_connections.load(Ordering::Acquire)
    }

    /// refreshAndPersist searches holding a `persist_searches_max` slot now.
    pub fn persist_searches_running(&self) -> usize {
        self.database
            .as_ref()
            .map_or(0, |database| database.persist.running_searches())
    }

    /// Records which configuration file is live (cn=Monitor's `cn=Configuration` shows it).
    pub fn set_config_identity(&self, identity: crate::config_identity::ConfigIdentity) {
        *self
            .config_identity
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(identity);
    }

    pub fn config_identity(&self) -> Option<crate::config_identity::ConfigIdentity> {
        self.config_identity
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The metrics endpoint's bound address (None without `metrics_listen`).
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        *self
            .metrics_address
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What cn=Monitor and the metrics show besides counters: connections, runtime, LMDB.
    pub fn monitor_state(&self) -> crate::monitor::MonitorState {
        let runtime = tokio::runtime::Handle::try_current().map(|handle| handle.metrics());
        let database = self.database.as_ref().and_then(|database| {
            let store = database.store();
            match store.environment_usage() {
                Ok(usage) => Some(crate::monitor::DatabaseState {
                    suffix: self.settings().suffix.clone(),
                    directory: store.directory().display().to_string(),
                    usage,
                }),
                Err(error) => {
                    warn!("monitor: reading the LMDB environment failed: {error}");
                    None
                }
            }
        });
        crate::monitor::MonitorState {
            connections_current: self.active_connections() as u64,
            connections_max: self.settings().connections_max as u64,
            threads_max: runtime
                .as_ref()
                .map_or(0, |metrics| metrics.num_workers() as u64),
            tasks_alive: runtime
                .as_ref()
                .map_or(0, |metrics| metrics.num_alive_tasks() as u64),
            tasks_queued: runtime
                .as_ref()
                .map_or(0, |metrics| metrics.global_queue_depth() as u64),
            database,
            config: self.config_identity(),
        }
    }

    pub(crate) fn connection_closed(&self) {
        let before = self.active_connections.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "connection count underflow");
        if before == 1 {
            self.all_closed.notify_waiters();
        }
    }
}

/// The address a listener actually bound (port 0 resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundAddress {
    Ldap(SocketAddr),
    Ldaps(SocketAddr),
    Ldapi(PathBuf),
    /// pldap: connections open with a PROXY header.
    Pldap(SocketAddr),
    /// pldaps: a PROXY header, then TLS.
    Pldaps(SocketAddr),
}

impl BoundAddress {
    /// The URL clients use for this endpoint.
    pub fn url(&self) -> String {
        match self {
            BoundAddress::Ldap(address) => format!("ldap://{address}"),
            BoundAddress::Ldaps(address) => format!("ldaps://{address}"),
            BoundAddress::Pldap(address) => format!("pldap://{address}"),
            BoundAddress::Pldaps(address) => format!("pldaps://{address}"),
            BoundAddress::Ldapi(path) => {
                let encoded: String = path
                    .to_string_lossy()
                    .chars()
                    .map(|character| match character {
                        '/' => "%2F".to_string(),
                        other => other.to_string(),
                    })
                    .collect();
                format!("ldapi://{encoded}")
            }
        }
    }
}

/// A started server; dropping it does not stop it, call [`RunningServer::shutdown`].
pub struct RunningServer {
    pub addresses: Vec<BoundAddress>,
    context: Arc<ServerContext>,
    shutdown_sender: watch::Sender<bool>,
    listener_tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Where `[http] listen` (SCIM) bound, when it is on.
    http_address: Option<SocketAddr>,
}

impl RunningServer {
    pub fn context(&self) -> &Arc<ServerContext> {
        &self.context
    }

    /// The SCIM / console listener's address (None when `[http] listen` is off).
    pub fn http_address(&self) -> Option<SocketAddr> {
        self.http_address
    }

    /// The first plain `ldap://` address (tests).
    pub fn ldap_address(&self) -> Option<SocketAddr> {
        self.addresses.iter().find_map(|address| match address {
            BoundAddress::Ldap(socket) => Some(*socket),
            _ => None,
        })
    }

    pub fn ldaps_address(&self) -> Option<SocketAddr> {
        self.addresses.iter().find_map(|address| match address {
            BoundAddress::Ldaps(socket) => Some(*socket),
            _ => None,
        })
    }

    /// Stops accepting, lets in-flight operations answer (writes commit), then closes every
    /// connection with a Notice of Disconnection. Waits at most `grace` for connections to close.
    pub async fn shutdown(self, grace: Duration) {
        info!("shutdown: stop accepting");
        if let Some(database) = &self.context.database {
            database.stop_writes();
        }
        let _ = self.shutdown_sender.send(true);
        for task in self.listener_tasks {
            let _ = task.await;
        }
        crate::replication::consumer::stop_all(&self.context).await;
        let context = self.context.clone();
        let wait_all = async {
            loop {
                let notified = context.all_closed.notified();
                if context.active_connections() == 0 {
                    break;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(grace, wait_all).await.is_err() {
            warn!(
                "shutdown: {} connections still open after {:?}",
                self.context.active_connections(),
                grace
            );
        }
        for address in &self.addresses {
            if let BoundAddress::Ldapi(path) = address {
                let _ = std::fs::remove_file(path);
            }
        }
        if let Some(database) = &self.context.database {
            database.close().await;
        }
        info!("shutdown: done");
    }
}

/// The TLS configuration the settings name (a certificate and key given together), checked
/// against the listeners: an ldaps:// listener needs one.
#[allow(clippy::type_complexity)]
fn tls_of(
    settings: &ServerSettings,
) -> Result<
    (
        Option<Arc<rustls::ServerConfig>>,
        Option<Arc<crate::tls::ReloadableCertificate>>,
    ),
    ServerError,
> {
    let (tls_config, tls_certificate) = match (&settings.tls_certificate, &settings.tls_key) {
        (Some(certificate), Some(key)) => {
            let (config, reloadable) = crate::tls::load_reloadable_server_config(certificate, key)?;
            (Some(config), Some(reloadable))
        }
        (None, None) => (None, None),
        _ => {
            return Err(ServerError::Config(
                "tls_certificate and tls_key must be given together".to_string(),
            ))
        }
    };
    if settings.listen.is_empty() {
        return Err(ServerError::Config("no listen address".to_string()));
    }
    let needs_tls = settings.listen.iter().any(ListenAddress::is_tls);
    if needs_tls && tls_config.is_none() {
        return Err(ServerError::Config(
            "an ldaps:// or pldaps:// listener needs tls_certificate and tls_key".to_string(),
        ));
    }
    let proxied = settings.listen.iter().any(ListenAddress::is_proxied);
    if proxied && settings.proxy_protocol_sources.is_empty() {
        return Err(ServerError::Config(
            "a pldap:// or pldaps:// listener needs proxy_protocol_sources".to_string(),
        ));
    }
    Ok((tls_config, tls_certificate))
}

/// Binds the ldapi:// socket, replacing one left by an earlier run (never anything else).
fn bind_ldapi(path: &std::path::Path) -> Result<UnixListener, ServerError> {
    if path.exists() {
        // A socket left by an earlier run; refuse to delete anything that is not a socket.
        use std::os::unix::fs::FileTypeExt;
        let is_socket = std::fs::symlink_metadata(path)
            .map(|metadata| metadata.file_type().is_socket())
            .unwrap_or(false);
        if !is_socket {
            return Err(ServerError::Listen {
                address: path.display().to_string(),
                message: "exists and is not a socket".to_string(),
            });
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(|error| ServerError::Listen {
        address: path.display().to_string(),
        message: error.to_string(),
    })?;
    Ok(listener)
}

/// Binds every listener and starts accepting. Port 0 picks a free port (see `addresses`).
pub async fn start(
    settings: ServerSettings,
    database: Option<crate::database::Database>,
) -> Result<RunningServer, ServerError> {
    let tls = tls_of(&settings)?;
    let database = match database {
        Some(database) => Some(installed_database(&settings, database)?),
        None => None,
    };
    let context = server_context(&settings, tls, database);
    let (shutdown_sender, shutdown_receiver) = watch::channel(false);
    let mut addresses = Vec::new();
    let mut listener_tasks = Vec::new();
    for address in &settings.listen {
        let (bound, task) = match address {
            ListenAddress::Ldap(host_port)
            | ListenAddress::Ldaps(host_port)
            | ListenAddress::Pldap(host_port)
            | ListenAddress::Pldaps(host_port) => {
                listen_tcp(&context, address, host_port, &shutdown_receiver).await?
            }
            ListenAddress::Ldapi(path) => {
                listen_ldapi(&context, path, settings.ldapi_mode, &shutdown_receiver)?
            }
        };
        addresses.push(bound);
        listener_tasks.push(task);
    }
    if let Some(address) = settings.metrics_listen {
        listener_tasks.push(start_metrics(&context, address, shutdown_receiver.clone()).await?);
    }
    let http_address = match crate::http::start(&context, shutdown_receiver.clone()).await? {
        Some((address, task)) => {
            listener_tasks.push(task);
            Some(address)
        }
        None => None,
    };
    // Replication consumers end with the listeners, before the writer is closed.
    crate::replication::start_consumers(&context, shutdown_receiver.clone());
    Ok(RunningServer {
        addresses,
        context,
        shutdown_sender,
        listener_tasks,
        http_address,
    })
}

/// The database set up for these settings: schema and rules installed, replication and
/// accesslog settings, the server ID its CSNs carry, and the session log (kept only while
/// this server is a provider).
fn installed_database(
    settings: &ServerSettings,
    mut database: crate::database::Database,
) -> Result<crate::database::Database, ServerError> {
    database.install(settings).map_err(ServerError::Config)?;
    database.set_replicating(&settings.replication);
    database.set_accesslog(&settings.accesslog);
    // Every CSN this server issues carries its server ID (`[replication] server_id`).
    database
        .store()
        .set_server_id(settings.replication.server_id)
        .map_err(|error| ServerError::Config(error.to_string()))?;
    // The delete phase's log exists only while this server is a provider.
    let replication = &settings.replication;
    database
        .store()
        .set_session_log_entries(match replication.provider {
            true => replication.session_log_entries,
            false => 0,
        })
        .map_err(|error| ServerError::Config(error.to_string()))?;
    Ok(database)
}

/// The context every connection of a server just started shares: its settings, TLS, the
/// database (and its monitor, or a fresh one without a database), nothing counted yet.
fn server_context(
    settings: &ServerSettings,
    (tls_config, tls_certificate): (
        Option<Arc<rustls::ServerConfig>>,
        Option<Arc<crate::tls::ReloadableCertificate>>,
    ),
    database: Option<crate::database::Database>,
) -> Arc<ServerContext> {
    let monitor = match &database {
        Some(database) => database.monitor().clone(),
        None => Arc::new(crate::monitor::Monitor::new()),
    };
    let rootdn_normalized = database
        .as_ref()
        .and_then(|database| database.normalize_dn(&settings.rootdn).ok());
    Arc::new(ServerContext {
        settings_live: crate::live::Live::new(settings.clone()),
        tls_config,
        tls_certificate,
        rootdn_normalized,
        database,
        active_connections: AtomicUsize::new(0),
        connection_counter: AtomicU64::new(0),
        all_closed: Notify::new(),
        refusals: Refusals::default(),
        started: Instant::now(),
        address_connections: Arc::default(),
        bind_throttle: BindThrottle::new(
            (settings.bind_failure_burst, settings.bind_failure_interval),
            (
                settings.bind_failure_address_burst,
                settings.bind_failure_address_interval,
            ),
        ),
        monitor,
        metrics_address: std::sync::Mutex::new(None),
        config_identity: std::sync::Mutex::new(None),
        consumer_tasks: std::sync::Mutex::default(),
        transaction_bytes: Arc::default(),
        verify_gate: crate::verify_gate::VerifyGate::for_this_machine(),
        bind_decoy: crate::bind_decoy::BindDecoy::default(),
    })
}

/// Binds one TCP listen address (`host_port` of `address`: ldap, ldaps, pldap or pldaps)
/// and spawns its accept loop; returns where it bound and the loop's task.
async fn listen_tcp(
    context: &Arc<ServerContext>,
    address: &ListenAddress,
    host_port: &str,
    shutdown: &watch::Receiver<bool>,
) -> Result<(BoundAddress, tokio::task::JoinHandle<()>), ServerError> {
    let listen_error = |error: std::io::Error| ServerError::Listen {
        address: host_port.to_string(),
        message: error.to_string(),
    };
    let listener = TcpListener::bind(host_port).await.map_err(listen_error)?;
    let local = listener.local_addr().map_err(listen_error)?;
    let kind = TcpKind {
        tls: address.is_tls(),
        proxied: address.is_proxied(),
    };
    let bound = match (kind.proxied, kind.tls) {
        (false, false) => BoundAddress::Ldap(local),
        (false, true) => BoundAddress::Ldaps(local),
        (true, false) => BoundAddress::Pldap(local),
        (true, true) => BoundAddress::Pldaps(local),
    };
    info!("listening on {}", bound.url());
    let task = tokio::spawn(accept_tcp(
        context.clone(),
        listener,
        kind,
        shutdown.clone(),
    ));
    Ok((bound, task))
}

/// Binds the ldapi socket at `path` with its `mode` and spawns its accept loop; returns
/// where it bound and the loop's task.
fn listen_ldapi(
    context: &Arc<ServerContext>,
    path: &std::path::Path,
    mode: u32,
    shutdown: &watch::Receiver<bool>,
) -> Result<(BoundAddress, tokio::task::JoinHandle<()>), ServerError> {
    let listener = bind_ldapi(path)?;
    set_ldapi_mode(path, mode)?;
    info!("listening on ldapi://{}", path.display());
    let task = tokio::spawn(accept_unix(context.clone(), listener, shutdown.clone()));
    Ok((BoundAddress::Ldapi(path.to_path_buf()), task))
}

/// Binds `metrics_listen` and serves Prometheus scrapes of this server's monitor, and its
/// health (`/livez`, `/readyz`), until shutdown.
async fn start_metrics(
    context: &Arc<ServerContext>,
    address: SocketAddr,
    shutdown: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, ServerError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| ServerError::Listen {
            address: address.to_string(),
            message: error.to_string(),
        })?;
    let local = listener.local_addr().map_err(|error| ServerError::Listen {
        address: address.to_string(),
        message: error.to_string(),
    })?;
    info!("metrics on http://{local}/metrics");
    if let Some(warning) = metrics_exposure_warning(local) {
        warn!("{warning}");
    }
    *context
        .metrics_address
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(local);
    let weak = Arc::downgrade(context);
    let render: crate::metrics_http::Render = Arc::new(move || match weak.upgrade() {
        Some(context) => context.monitor.render_metrics(&context.monitor_state()),
        None => "# EOF\n".to_string(),
    });
    let weak = Arc::downgrade(context);
    let readiness: crate::metrics_http::Readiness = Arc::new(move || match weak.upgrade() {
        Some(context) => crate::health::not_ready_reasons(&context),
        None => vec!["server: shutting down".to_string()],
    });
    Ok(tokio::spawn(crate::metrics_http::serve(
        listener,
        crate::metrics_http::Endpoints { render, readiness },
        shutdown,
    )))
}

/// The warning for a metrics listener others can reach: it has no authentication (as
/// Prometheus scrapes expect), and its counts, connection numbers, replication state and
/// readiness reasons are then anyone's who reaches the address.
fn metrics_exposure_warning(local: SocketAddr) -> Option<String> {
    (!local.ip().is_loopback()).then(|| {
        format!(
            "metrics_listen {local} is not a loopback address: /metrics, /livez and /readyz \
             answer anyone who reaches it, without authentication; bind it to loopback or a \
             management network, or filter it"
        )
    })
}

/// One admitted connection: counted in `active_connections` (and against its address) until
/// dropped, so a connection task that ends any way, a panic included, gives its slots back.
struct Admission {
    context: Arc<ServerContext>,
    connection_id: u64,
    _address_slot: Option<AddressSlot>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.context.monitor.connection_closed(self.connection_id);
        self.context.connection_closed();
    }
}

/// Counts a new connection in, or says why it is refused: over `connections_max`, or over its
/// client's cap (`connections_per_address_max`, or `connections_per_loopback_address_max` for
/// loopback and ldapi clients).
fn admit(context: &Arc<ServerContext>, client: ClientKey) -> Result<Admission, String> {
    let mut admission = admit_connection(context)?;
    let settings = context.settings();
    let maximum = client.connections_maximum(
        settings.connections_per_address_max,
        settings.connections_per_loopback_address_max,
    );
    admission.count_against(client, maximum)?;
    Ok(admission)
}

/// Counts a new connection in under `connections_max` alone (a proxied connection, before its
/// header names the client to count it against).
fn admit_connection(context: &Arc<ServerContext>) -> Result<Admission, String> {
    let previous = context.active_connections.fetch_add(1, Ordering::AcqRel);
    let mut admission = Admission {
        context: context.clone(),
        connection_id: 0,
        _address_slot: None,
    };
    if previous >= context.settings().connections_max {
        return Err(format!(
            "too many connections (limit {})",
            context.settings().connections_max
        ));
    }
    admission.connection_id = context.connection_counter.fetch_add(1, Ordering::Relaxed) + 1;
    Ok(admission)
}

impl Admission {
    /// Counts the connection against its client's cap.
    fn count_against(&mut self, client: ClientKey, maximum: usize) -> Result<(), String> {
        debug_assert!(self._address_slot.is_none(), "counted against one client");
        let Some(slot) = self.context.address_connections.enter(client, maximum) else {
            return Err(format!(
                "too many connections from {client} (limit {maximum})"
            ));
        };
        self._address_slot = Some(slot);
        Ok(())
    }
}

async fn refuse(mut stream: BoxedStream, reason: String) {
    use tokio::io::AsyncWriteExt;
    let notice = crate::ber::notice_of_disconnection(crate::result::code::BUSY, &reason);
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let _ = stream.write_all(&notice).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// How a TCP listener's connections begin.
#[derive(Debug, Clone, Copy)]
struct TcpKind {
    /// ldaps, pldaps: a TLS handshake first (after the PROXY header when proxied).
    tls: bool,
    /// pldap, pldaps: a PROXY header first, naming the client.
    proxied: bool,
}

async fn accept_tcp(
    context: Arc<ServerContext>,
    listener: TcpListener,
    kind: TcpKind,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                // Out of descriptors and similar: back off instead of spinning.
                error!("accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if kind.proxied {
            accept_proxied(&context, stream, peer, kind, &shutdown);
            continue;
        }
        let client = ClientKey::of_ip(peer.ip());
        let admission = match admit(&context, client) {
            Ok(admission) => admission,
            Err(reason) => {
                refuse_connection(&context, Box::new(stream), &peer.to_string(), reason);
                continue;
            }
        };
        let accepted = Accepted {
            context: context.clone(),
            stream,
            client,
            peer: peer.to_string(),
            admission,
        };
        tokio::spawn(accepted.serve(kind.tls, shutdown.clone()));
    }
}

/// A connection from a load balancer on a pldap/pldaps listener: only from
/// `proxy_protocol_sources`, counted under `connections_max` at once, then against the client
/// its PROXY header names (read within the TLS handshake timeout; closed unanswered without
/// one). A named client is never counted as a loopback one: the header is the balancer's word.
fn accept_proxied(
    context: &Arc<ServerContext>,
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
    kind: TcpKind,
    shutdown: &watch::Receiver<bool>,
) {
    let settings = context.settings();
    let believed = crate::proxy_header::is_source(&settings.proxy_protocol_sources, peer.ip());
    if !believed {
        // Closed unanswered: whoever is not a balancer learns nothing of the server.
        let reason = "not in proxy_protocol_sources (closed)";
        context
            .refusals
            .note(&peer.to_string(), reason, context.started);
        return;
    }
    let mut admission = match admit_connection(context) {
        Ok(admission) => admission,
        Err(reason) => {
            refuse_connection(context, Box::new(stream), &peer.to_string(), reason);
            return;
        }
    };
    let context = context.clone();
    let shutdown = shutdown.clone();
    let header_time = settings.tls_handshake_timeout;
    let per_client_max = settings.connections_per_address_max;
    tokio::spawn(async move {
        let connection_id = admission.connection_id;
        let header =
            tokio::time::timeout(header_time, crate::proxy_header::read_client(&mut stream)).await;
        let client_address = match header {
            Ok(Ok(named)) => named.unwrap_or(peer),
            Ok(Err(error)) => {
                info!("conn={connection_id} from {peer}: {error}; closed");
                return;
            }
            Err(_) => {
                info!("conn={connection_id} from {peer}: no PROXY header in time; closed");
                return;
            }
        };
        let client = ClientKey::of_ip(client_address.ip());
        let maximum = if client_address == peer {
            client.connections_maximum(
                per_client_max,
                context.settings().connections_per_loopback_address_max,
            )
        } else {
            per_client_max
        };
        if let Err(reason) = admission.count_against(client, maximum) {
            drop(admission);
            let shown = client_address.to_string();
            refuse_connection(&context, Box::new(stream), &shown, reason);
            return;
        }
        if client_address != peer {
            tracing::debug!("conn={connection_id} from {client_address} via {peer}");
        }
        let accepted = Accepted {
            context,
            stream,
            client,
            peer: client_address.to_string(),
            admission,
        };
        accepted.serve(kind.tls, shutdown).await;
    });
}

/// An admitted TCP connection, its client known, before its TLS handshake if any.
struct Accepted {
    context: Arc<ServerContext>,
    stream: tokio::net::TcpStream,
    client: ClientKey,
    /// The client's address as logs and cn=Monitor show it.
    peer: String,
    admission: Admission,
}

impl Accepted {
    /// Runs the connection: the TLS handshake first when `tls`, within its timeout.
    async fn serve(self, tls: bool, shutdown: watch::Receiver<bool>) {
        let Accepted {
            context,
            stream,
            client,
            peer,
            admission,
        } = self;
        let connection_id = admission.connection_id;
        // Counted until the connection ends.
        let _admission = admission;
        let (stream, transport): (BoxedStream, Transport) = if tls {
            let Some(tls_config) = context.tls_config.clone() else {
                return;
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(tls_config);
            let handshake = tokio::time::timeout(
                context.settings().tls_handshake_timeout,
                acceptor.accept(stream),
            )
            .await;
            match handshake {
                Ok(Ok(tls_stream)) => (Box::new(tls_stream), Transport::Tls),
                Ok(Err(error)) => {
                    info!(
                        "conn={connection_id} TLS handshake from {peer} failed: {}",
                        crate::log_text::escaped(&error.to_string())
                    );
                    return;
                }
                Err(_) => {
                    info!("conn={connection_id} TLS handshake from {peer} timed out");
                    return;
                }
            }
        } else {
            (Box::new(stream), Transport::Tcp)
        };
        connection::run(
            context,
            stream,
            transport,
            client,
            connection_id,
            peer,
            shutdown,
        )
        .await;
    }
}

/// Gives the ldapi socket its configured mode: bind leaves it to the umask, and a client
/// without write permission on the socket cannot connect at all.
fn set_ldapi_mode(path: &std::path::Path, mode: u32) -> Result<(), ServerError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|error| {
        ServerError::Listen {
            address: path.display().to_string(),
            message: format!("setting mode {mode:o}: {error}"),
        }
    })
}

async fn accept_unix(
    context: Arc<ServerContext>,
    listener: UnixListener,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                error!("accept on ldapi failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let credentials = match stream.peer_cred() {
            Ok(credentials) => credentials,
            Err(error) => {
                warn!("ldapi peer credentials unavailable: {error}");
                continue;
            }
        };
        let peer = format!("uid={} gid={}", credentials.uid(), credentials.gid());
        let client = ClientKey::LocalUser(credentials.uid());
        let admission = match admit(&context, client) {
            Ok(admission) => admission,
            Err(reason) => {
                refuse_connection(&context, Box::new(stream), &peer, reason);
                continue;
            }
        };
        let transport = Transport::Ldapi {
            uid: credentials.uid(),
            gid: credentials.gid(),
        };
        let context = context.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let connection_id = admission.connection_id;
            // Counted until the connection ends.
            let _admission = admission;
            connection::run(
                context,
                Box::new(stream),
                transport,
                client,
                connection_id,
                peer,
                shutdown,
            )
            .await
        });
    }
}

/// `lmdir serve`: opens the database the config describes and serves it until SIGTERM or
/// SIGINT, then shuts down gracefully (in-flight writes are committed and answered).
pub async fn serve(config: lmdir_config::Config) -> Result<(), ServerError> {
    let settings = ServerSettings::from_config(&config).map_err(ServerError::Config)?;
    let database = crate::database::Database::open(&config)?;
    serve_settings(settings, Some(database)).await
}

/// Runs until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn serve_settings(
    settings: ServerSettings,
    database: Option<crate::database::Database>,
) -> Result<(), ServerError> {
    let running = start(settings, database).await?;
    wait_for_signal().await;
    running.shutdown(Duration::from_secs(30)).await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut terminate), Ok(mut interrupt)) => {
            tokio::select! {
                _ = terminate.recv() => info!("SIGTERM received"),
                _ = interrupt.recv() => info!("SIGINT received"),
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn a_metrics_listener_others_can_reach_is_warned_of() {
        for reachable in ["0.0.0.0:9090", "192.0.2.1:9090", "[::]:9090"] {
            let warning = metrics_exposure_warning(reachable.parse().unwrap());
            assert!(
                warning.is_some_and(|text| text.contains("without authentication")),
                "{reachable}"
            );
        }
        for local in ["127.0.0.1:9090", "[::1]:9090"] {
            assert_eq!(metrics_exposure_warning(local.parse().unwrap()), None);
        }
    }

    #[test]
    fn a_flood_of_refusals_is_logged_once_a_second_not_once_each() {
        let refusals = Refusals::default();
        let started = Instant::now();
        refusals.note("peer-0", "full", started);
        // The first refusal is reported at once.
        assert_eq!(refusals.not_yet_logged.load(Ordering::Acquire), 0);
        for index in 1..100 {
            refusals.note(&format!("peer-{index}"), "full", started);
        }
        // The rest of the second's refusals wait for the next summary line.
        assert_eq!(refusals.not_yet_logged.load(Ordering::Acquire), 99);
        let an_interval_ago =
            started - Duration::from_millis(REFUSAL_LOG_INTERVAL_MILLISECONDS + 10);
        refusals.note("peer-100", "full", an_interval_ago);
        assert_eq!(refusals.not_yet_logged.load(Ordering::Acquire), 0);
    }
}
