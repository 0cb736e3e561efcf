//! The HTTP listener (`[http] listen`): SCIM 2.0 under `/scim/v2/` (`scim/`) for identity
//! providers, on HTTPS with the server's certificate (plain http only on a loopback address,
//! which the config enforces). Every request authenticates (`auth.rs`: HTTP Basic as a DN or
//! uid bind, or a bearer token stored hashed on a directory entry) and then runs as that
//! identity through `directory.rs`, which hands LDAP operations to `operations::dispatch`:
//! the same access policy, limits, bind throttle, password policy and writer as LDAP.
//!
//! Bounded like the LDAP side: `connections_max` connections (past it a new one is closed at
//! once), `connections_per_address_max` from one address (not a loopback one, not a trusted
//! proxy; behind a trusted proxy, as many requests in flight per forwarded client, 429 with
//! Retry-After past it), an answer left unread closed after `[server] write_timeout_seconds`, headers within
//! `HEADER_READ_TIMEOUT`, bodies within `body_bytes_max` (413 beyond,
//! decided from Content-Length before reading when it is given). Access is decided from the
//! head first: a SCIM request authenticates before its body is read (401 leaves it unread),
//! and the console reads at most `console::SIGN_IN_BODY_BYTES_MAX` without a live session.

pub mod auth;
pub mod console;
pub mod directory;
pub mod scim;
mod watched;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tracing::{info, warn};

use crate::client_limits::{AddressConnections, AddressSlot, ClientKey};
use crate::context::ServerContext;

/// A request's headers must arrive within this.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A request's body must arrive within this.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A request as the handlers see it: read whole (within `body_bytes_max`).
pub struct HttpRequest {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub peer: SocketAddr,
    pub tls: bool,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub fn query_value(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

pub type HttpResponse = Response<Full<Bytes>>;

/// What every handler shares.
pub struct HttpState {
    pub server: Arc<ServerContext>,
    pub scim: scim::Scim,
    pub tls: bool,
    /// `[http] trusted_proxies`: whose X-Forwarded-For / X-Forwarded-Proto are believed.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    pub body_bytes_max: usize,
    /// Signed-in console sessions.
    pub console: console::Sessions,
    /// Operation rates for the console's status chart.
    pub rates: console::status::Rates,
    /// Requests in flight per client named by a trusted proxy: its connections meet only the
    /// whole cap, so one client behind it could otherwise hold every slot.
    pub forwarded_requests: Arc<AddressConnections>,
    /// `[http] connections_per_address_max`, applied to each forwarded client's requests.
    pub forwarded_requests_per_client_max: usize,
    /// `[http] connections_max`: what a loopback client behind the proxy meets.
    pub requests_max: usize,
}

/// How long a client refused for too many requests in flight is told to wait.
const RETRY_AFTER_SECONDS: u32 = 1;

impl HttpState {
    /// A request slot for `client` when it came through a trusted proxy (`via_proxy`), None
    /// inside: the caller answers 429. A direct client's requests are bounded by its
    /// connections (HTTP/1: one request at a time on each).
    fn forwarded_slot(
        &self,
        via_proxy: bool,
        client: SocketAddr,
    ) -> Result<Option<AddressSlot>, ()> {
        if !via_proxy {
            return Ok(None);
        }
        let key = ClientKey::of_ip(client.ip());
        let maximum =
            key.connections_maximum(self.forwarded_requests_per_client_max, self.requests_max);
        self.forwarded_requests
            .enter(key, maximum)
            .map(Some)
            .ok_or(())
    }
}

/// 429 with Retry-After, as SCIM JSON on the SCIM paths.
fn too_many_requests(is_scim: bool) -> HttpResponse {
    let detail = "too many requests in flight from this client";
    let mut response = if is_scim {
        scim::error_response(StatusCode::TOO_MANY_REQUESTS, None, detail)
    } else {
        respond(
            StatusCode::TOO_MANY_REQUESTS,
            "text/plain; charset=utf-8",
            detail,
        )
    };
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        HeaderValue::from(RETRY_AFTER_SECONDS),
    );
    response
}

/// A response with the headers every answer carries (no caching of directory data, no
/// sniffing, no framing; HSTS over TLS).
pub fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> HttpResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(content_type) {
        headers.insert(hyper::header::CONTENT_TYPE, value);
    }
    headers.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}

/// Binds `[http] listen` and serves until shutdown; Ok(None) when it is off.
pub async fn start(
    context: &Arc<ServerContext>,
    shutdown: watch::Receiver<bool>,
) -> Result<Option<(SocketAddr, tokio::task::JoinHandle<()>)>, crate::context::ServerError> {
    let config = &context.settings().http;
    let listen_error = |message: String| crate::context::ServerError::Listen {
        address: config.listen.clone(),
        message,
    };
    let Some(address) = lmdir_config::parse_http_listen(&config.listen).map_err(listen_error)?
    else {
        return Ok(None);
    };
    let tls = match (config.tls, &context.tls_config) {
        (true, Some(tls_config)) => Some(tls_config.clone()),
        (true, None) => {
            return Err(listen_error(
                "HTTPS needs [server] tls_certificate and tls_key".to_string(),
            ))
        }
        (false, _) if !address.ip().is_loopback() => {
            return Err(listen_error(
                "plain http only on a loopback address".to_string(),
            ))
        }
        (false, _) => None,
    };
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| listen_error(error.to_string()))?;
    let local = listener
        .local_addr()
        .map_err(|error| listen_error(error.to_string()))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    info!("SCIM on {scheme}://{local}/scim/v2/, web console on {scheme}://{local}/");
    let state = Arc::new(HttpState {
        server: context.clone(),
        scim: scim::Scim::new(
            &config.scim,
            &context.settings().suffix,
            &format!("{scheme}://{local}"),
        ),
        tls: tls.is_some(),
        trusted_proxies: config
            .trusted_proxies
            .iter()
            .filter_map(|proxy| lmdir_config::parse_network(proxy).ok())
            .collect(),
        body_bytes_max: usize::try_from(config.body_bytes_max).unwrap_or(usize::MAX),
        console: console::Sessions::new(
            config.sessions_max as usize,
            Duration::from_secs(config.session_idle_seconds),
        ),
        rates: console::status::Rates::default(),
        forwarded_requests: Arc::new(AddressConnections::default()),
        forwarded_requests_per_client_max: config.connections_per_address_max as usize,
        requests_max: config.connections_max as usize,
    });
    tokio::spawn(sample_rates(state.clone(), shutdown.clone()));
    let connections = Connections {
        all: Arc::new(Semaphore::new(config.connections_max as usize)),
        by_address: Arc::default(),
        per_address_max: config.connections_per_address_max as usize,
        max: config.connections_max as usize,
        trusted: state.trusted_proxies.clone(),
    };
    let task = tokio::spawn(accept(listener, state, tls, connections, shutdown));
    Ok(Some((local, task)))
}

/// Samples the operation counters for the console's chart until shutdown.
async fn sample_rates(state: Arc<HttpState>, mut shutdown: watch::Receiver<bool>) {
    loop {
        state.rates.sample(&state.server.monitor);
        tokio::select! {
            _ = shutdown.changed() => break,
            () = tokio::time::sleep(console::status::SAMPLE_INTERVAL) => {}
        }
    }
}

/// The listener's connection caps: all of them, and each client address's.
struct Connections {
    all: Arc<Semaphore>,
    by_address: Arc<AddressConnections>,
    per_address_max: usize,
    max: usize,
    /// `[http] trusted_proxies`: each carries many clients, so meets only `max`.
    trusted: Vec<ipnet::IpNet>,
}

impl Connections {
    /// A connection from `peer` counted in, or None (it is closed at once, as the LDAP side
    /// refuses past its caps, never another closed to make room): one address may not take
    /// every slot, but a loopback address or a trusted proxy carries many clients, so only
    /// the whole cap applies to it. A connection is admitted before any request on it names
    /// a forwarded client: behind a proxy the cap is on each client's requests in flight
    /// (`HttpState::forwarded_slot`).
    fn admit(
        &self,
        peer: std::net::IpAddr,
    ) -> Option<(tokio::sync::OwnedSemaphorePermit, AddressSlot)> {
        let client = ClientKey::of_ip(peer);
        let per_address_max = if crate::proxy_header::is_source(&self.trusted, peer) {
            self.max
        } else {
            client.connections_maximum(self.per_address_max, self.max)
        };
        let address_slot = self.by_address.enter(client, per_address_max)?;
        let permit = self.all.clone().try_acquire_owned().ok()?;
        Some((permit, address_slot))
    }
}

async fn accept(
    listener: TcpListener,
    state: Arc<HttpState>,
    tls: Option<Arc<rustls::ServerConfig>>,
    connections: Connections,
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
                warn!("http accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(held) = connections.admit(peer.ip()) else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        let progress = watched::Progress::new();
        let stream = watched::Watched::new(stream, progress.clone());
        tokio::spawn(async move {
            let _held = held;
            let served = Served {
                state,
                peer,
                progress,
                shutdown,
            };
            match tls {
                Some(tls) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
                    let handshake = tokio::time::timeout(
                        served.state.server.settings().tls_handshake_timeout,
                        acceptor.accept(stream),
                    )
                    .await;
                    if let Ok(Ok(stream)) = handshake {
                        serve_connection(TokioIo::new(stream), served).await;
                    }
                }
                None => serve_connection(TokioIo::new(stream), served).await,
            }
        });
    }
}

/// What serving one connection needs besides its stream.
struct Served {
    state: Arc<HttpState>,
    peer: SocketAddr,
    progress: Arc<watched::Progress>,
    shutdown: watch::Receiver<bool>,
}

/// Returns once a write of the connection has been pending for `limit`.
async fn write_stalled(progress: &watched::Progress, limit: Duration) {
    let tick = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    loop {
        tokio::time::sleep(tick).await;
        if progress.stalled_for().is_some_and(|waited| waited >= limit) {
            return;
        }
    }
}

/// Serves the connection's requests until it ends, the server shuts down, or an answer waits
/// for the client to read it longer than `[server] write_timeout_seconds` (closed then: a
/// client pipelining requests and never reading held its slot forever before).
async fn serve_connection<I>(io: I, served: Served)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let Served {
        state,
        peer,
        progress,
        mut shutdown,
    } = served;
    let write_timeout = state.server.settings().write_timeout;
    let service = service_fn(move |request: Request<Incoming>| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(handle(state, peer, request).await) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(64 * 1024)
        .serve_connection(io, service);
    tokio::pin!(connection);
    tokio::select! {
        _ = &mut connection => {}
        () = write_stalled(&progress, write_timeout) => {
            info!("http {peer}: an answer went unread for {write_timeout:?}: connection closed");
        }
        _ = shutdown.changed() => connection.as_mut().graceful_shutdown(),
    }
}

/// Most X-Forwarded-For addresses looked at, from the right.
const FORWARDED_HOPS_MAX: usize = 16;

/// The client and whether it came over HTTPS: the TCP peer and the listener's TLS, unless the
/// peer is a trusted proxy. Then the client is the rightmost X-Forwarded-For address that is not
/// itself a trusted proxy (what the last proxy saw; entries further left are the client's own
/// word), and HTTPS when the last X-Forwarded-Proto says so. A header that names no address
/// leaves the peer.
fn forwarded_client(
    trusted: &[ipnet::IpNet],
    peer: SocketAddr,
    headers: &HeaderMap,
    listener_tls: bool,
) -> (SocketAddr, bool) {
    if trusted.is_empty() || !crate::proxy_header::is_source(trusted, peer.ip()) {
        return (peer, listener_tls);
    }
    let hops: Vec<std::net::IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .collect::<Vec<&str>>()
        .into_iter()
        .rev()
        .take(FORWARDED_HOPS_MAX)
        .map_while(|hop| hop.trim().parse().ok())
        .collect();
    let client = hops
        .iter()
        .find(|hop| !crate::proxy_header::is_source(trusted, **hop))
        .or(hops.last())
        .map_or(peer, |address| SocketAddr::new(*address, 0));
    let https = headers
        .get_all("x-forwarded-proto")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .last()
        .map(|proto| proto.trim().eq_ignore_ascii_case("https"));
    (client, https.unwrap_or(listener_tls))
}

async fn handle(
    state: Arc<HttpState>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> HttpResponse {
    let (parts, body) = request.into_parts();
    let query = parts
        .uri
        .query()
        .map(|query| {
            form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let via_proxy = crate::proxy_header::is_source(&state.trusted_proxies, peer.ip());
    let (peer, tls) = forwarded_client(&state.trusted_proxies, peer, &parts.headers, state.tls);
    let mut request = HttpRequest {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query,
        headers: parts.headers,
        body: Bytes::new(),
        peer,
        tls,
    };
    // Access is decided from the head before the body is read: an unauthenticated SCIM
    // request's body is never read, and the console reads no more than a sign-in form
    // without a live session.
    let is_scim = request.path.starts_with(scim::PREFIX);
    let slot = state.forwarded_slot(via_proxy, peer);
    let mut response = if slot.is_err() {
        too_many_requests(is_scim)
    } else if let Some(refused) = refuse_cross_site(&request, is_scim) {
        refused
    } else if let Some(rest) = request.path.strip_prefix(scim::PREFIX) {
        let rest = rest.to_string();
        match auth::authenticate(&state, &request).await {
            Err(auth::Unauthenticated) => scim::unauthorized(),
            Ok(client) => match read_body(&request, body, state.body_bytes_max).await {
                Ok(bytes) => {
                    request.body = bytes;
                    scim::handle(&state, &request, &rest, client).await
                }
                Err(refused) => refused.scim_response(),
            },
        }
    } else {
        let allowance_bytes = console::body_allowance_bytes(&state, &request);
        match read_body(&request, body, allowance_bytes).await {
            Ok(bytes) => {
                request.body = bytes;
                console::handle(&state, &request).await
            }
            Err(refused) => refused.text_response(),
        }
    };
    if state.tls {
        response.headers_mut().insert(
            "strict-transport-security",
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

/// 403 for a state-changing request a browser marks `Sec-Fetch-Site: cross-site`: another
/// site's page may not write with the credentials or cookies the browser holds for this one
/// (cached Basic credentials for SCIM, a session for the console). Safe methods pass.
fn refuse_cross_site(request: &HttpRequest, is_scim: bool) -> Option<HttpResponse> {
    let safe = matches!(request.method, Method::GET | Method::HEAD | Method::OPTIONS);
    let cross_site = request
        .header("sec-fetch-site")
        .is_some_and(|site| site.trim().eq_ignore_ascii_case("cross-site"));
    if safe || !cross_site {
        return None;
    }
    let text = "a cross-site request may not change anything here";
    Some(if is_scim {
        scim::error_response(StatusCode::FORBIDDEN, None, text)
    } else {
        respond(StatusCode::FORBIDDEN, "text/plain", text)
    })
}

/// Why a body was not read whole.
enum BodyRefused {
    /// Longer than the request's allowance (declared or sent).
    TooLarge { allowance_bytes: usize },
    /// Cut off, malformed, or not sent within `BODY_READ_TIMEOUT`.
    Unreadable,
}

impl BodyRefused {
    fn text(&self) -> String {
        match self {
            BodyRefused::TooLarge { allowance_bytes } => {
                format!("the request body is larger than {allowance_bytes} bytes")
            }
            BodyRefused::Unreadable => "the body could not be read".to_string(),
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            BodyRefused::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BodyRefused::Unreadable => StatusCode::BAD_REQUEST,
        }
    }

    fn scim_response(&self) -> HttpResponse {
        scim::error_response(self.status(), None, &self.text())
    }

    fn text_response(&self) -> HttpResponse {
        respond(self.status(), "text/plain", self.text())
    }
}

/// The request's body, read whole within `allowance_bytes` (refused before reading when
/// its declared length is over).
async fn read_body(
    request: &HttpRequest,
    body: Incoming,
    allowance_bytes: usize,
) -> Result<Bytes, BodyRefused> {
    let too_large = BodyRefused::TooLarge { allowance_bytes };
    let declared = request
        .header(hyper::header::CONTENT_LENGTH.as_str())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > allowance_bytes as u64) {
        return Err(too_large);
    }
    let collected = tokio::time::timeout(
        BODY_READ_TIMEOUT,
        Limited::new(body, allowance_bytes).collect(),
    )
    .await;
    match collected {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err(too_large),
        Ok(Err(_)) | Err(_) => Err(BodyRefused::Unreadable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Behind a trusted reverse proxy the client is the rightmost X-Forwarded-For address that
    /// is not a trusted proxy itself, and HTTPS is what the proxy's X-Forwarded-Proto says;
    /// from anyone else the headers are the client's own word and ignored.
    #[test]
    fn a_trusted_proxy_names_the_client_and_its_scheme() {
        let trusted: Vec<ipnet::IpNet> = ["127.0.0.1", "10.0.0.0/8"]
            .iter()
            .map(|text| lmdir_config::parse_network(text).unwrap())
            .collect();
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, HeaderValue::from_str(value).unwrap());
            }
            map
        };
        let proxy: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let stranger: SocketAddr = "192.0.2.9:40000".parse().unwrap();
        let spoofed = headers(&[
            ("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.1.2.3"),
            ("x-forwarded-proto", "https"),
        ]);
        let (client, tls) = forwarded_client(&trusted, proxy, &spoofed, false);
        assert_eq!(client.ip().to_string(), "198.51.100.7");
        assert!(tls);
        // Not from a trusted proxy: the TCP peer and the listener's own scheme.
        assert_eq!(
            forwarded_client(&trusted, stranger, &spoofed, false),
            (stranger, false)
        );
        assert_eq!(
            forwarded_client(&[], proxy, &spoofed, false),
            (proxy, false)
        );
        // Two header lines join; every hop a trusted proxy: the leftmost one looked at.
        let lines = headers(&[
            ("x-forwarded-for", "10.9.9.9"),
            ("x-forwarded-for", "10.1.1.1"),
            ("x-forwarded-proto", "http"),
        ]);
        let (client, tls) = forwarded_client(&trusted, proxy, &lines, true);
        assert_eq!(client.ip().to_string(), "10.9.9.9");
        assert!(!tls);
        // Nothing parseable: the peer.
        let junk = headers(&[("x-forwarded-for", "unknown")]);
        assert_eq!(
            forwarded_client(&trusted, proxy, &junk, false),
            (proxy, false)
        );
    }

    fn connections(per_address_max: usize, max: usize) -> Connections {
        Connections {
            all: Arc::new(Semaphore::new(max)),
            by_address: Arc::default(),
            per_address_max,
            max,
            trusted: Vec::new(),
        }
    }

    #[test]
    fn one_address_cannot_take_every_slot() {
        let caps = connections(2, 4);
        let attacker: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        let held: Vec<_> = (0..3).map(|_| caps.admit(attacker)).collect();
        // Two of its own, the third refused: before, it took all 256.
        assert_eq!(held.iter().filter(|held| held.is_some()).count(), 2);
        let other: std::net::IpAddr = "198.51.100.9".parse().unwrap();
        let served = caps.admit(other);
        assert!(served.is_some(), "another client is served");
        // An IPv6 host counts per /64.
        let first: std::net::IpAddr = "2001:db8::1".parse().unwrap();
        let second: std::net::IpAddr = "2001:db8::2".parse().unwrap();
        let v6 = caps.admit(first);
        assert!(v6.is_some(), "the fourth slot");
        assert!(caps.admit(second).is_none(), "the whole cap is in use");
        drop(held);
        let again = caps.admit(second);
        assert!(again.is_some(), "a slot was returned");
        // Two from the /64 now: a free slot is not its to take.
        let third: std::net::IpAddr = "2001:db8::3".parse().unwrap();
        assert!(caps.admit(third).is_none());
        drop((served, v6, again));
    }

    /// A trusted proxy (`[http] trusted_proxies`) carries many clients, as a loopback one
    /// does: it meets only the whole cap (before, 32 connections from a proxy elsewhere
    /// locked out every client behind it).
    #[test]
    fn a_trusted_proxy_meets_only_the_whole_cap() {
        let mut caps = connections(2, 4);
        caps.trusted = vec![lmdir_config::parse_network("192.0.2.0/24").unwrap()];
        let proxy: std::net::IpAddr = "192.0.2.10".parse().unwrap();
        let held: Vec<_> = (0..5).map(|_| caps.admit(proxy)).collect();
        assert_eq!(held.iter().filter(|held| held.is_some()).count(), 4);
        drop(held);
        let stranger: std::net::IpAddr = "198.51.100.9".parse().unwrap();
        let held: Vec<_> = (0..3).map(|_| caps.admit(stranger)).collect();
        assert_eq!(held.iter().filter(|held| held.is_some()).count(), 2);
    }

    #[test]
    fn a_loopback_proxy_meets_only_the_whole_cap() {
        let caps = connections(2, 4);
        let proxy: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let held: Vec<_> = (0..5).map(|_| caps.admit(proxy)).collect();
        assert_eq!(held.iter().filter(|held| held.is_some()).count(), 4);
    }
}
