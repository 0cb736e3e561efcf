//! The Prometheus scrape endpoint on `metrics_listen`: `GET /metrics` answers the text
//! exposition; `/livez` answers 200 while the process serves, `/readyz` (and `/health`, the
//! same) 200 when the server is ready for clients and 503 with the reasons when not (as
//! Kubernetes probes and HAProxy's `option httpchk` expect; GET or HEAD, anything else 405);
//! any other path 404. Bounded like the LDAP side, and kept answering while idle or
//! slow clients hold connections: at most `SCRAPE_CONNECTIONS_MAX` connections at once and
//! `SCRAPE_CONNECTIONS_PER_ADDRESS_MAX` per client address (IPv6: per /64); a new connection
//! over either cap evicts the oldest connection (of that address, or of all) whose request has
//! not arrived yet, and is closed only when every one of them is being answered. A request's
//! headers must arrive within `HEADER_READ_TIMEOUT`; one request per connection. A scraper
//! sends its request as soon as it connects, so it is answered however many idle connections
//! others open.

use crate::client_limits::ClientKey;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, warn};

/// Scrapers are few (a Prometheus or two): connections open at once.
const SCRAPE_CONNECTIONS_MAX: usize = 16;
/// Connections one client address holds at once, so one host cannot take every slot.
const SCRAPE_CONNECTIONS_PER_ADDRESS_MAX: usize = 4;
/// A scraper sends its whole request at once; a connection silent this long is closed.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// OpenMetrics text, for scrapers that ask for it (Prometheus does, in its Accept header).
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Prometheus' classic text format, for everyone else (curl, promtool, older scrapers).
const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Health answers: plain text, never cached (a probe must see the state now).
const HEALTH_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// Renders the exposition (OpenMetrics text) at scrape time.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;
/// Why the server is not ready now, one reason a line (empty when ready).
pub type Readiness = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// What the endpoint answers from.
#[derive(Clone)]
pub struct Endpoints {
    pub render: Render,
    pub readiness: Readiness,
}

/// One open scrape connection.
struct Open {
    id: u64,
    client: ClientKey,
    /// Its request has arrived (it is being answered): never evicted.
    requested: Arc<AtomicBool>,
    task: tokio::task::AbortHandle,
}

/// The open connections, oldest first (at most `SCRAPE_CONNECTIONS_MAX`).
#[derive(Default)]
struct Connections {
    open: Mutex<Vec<Open>>,
}

impl Connections {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Open>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes room for a connection of `client`: the oldest connection still waiting for its
    /// request is evicted (of that client when it is at its cap, else of all when the
    /// endpoint is full), and returned for closing. None when no room can be made (every
    /// candidate is being answered).
    fn make_room(open: &mut Vec<Open>, client: ClientKey) -> Option<Vec<Open>> {
        let mut evicted = Vec::new();
        let of_client = open.iter().filter(|entry| entry.client == client).count();
        if of_client >= SCRAPE_CONNECTIONS_PER_ADDRESS_MAX {
            evicted.push(Self::evict_oldest_idle(open, Some(client))?);
        }
        if open.len() >= SCRAPE_CONNECTIONS_MAX {
            evicted.push(Self::evict_oldest_idle(open, None)?);
        }
        Some(evicted)
    }

    fn evict_oldest_idle(open: &mut Vec<Open>, client: Option<ClientKey>) -> Option<Open> {
        let index = open.iter().position(|entry| {
            !entry.requested.load(Ordering::Acquire)
                && client.is_none_or(|client| entry.client == client)
        })?;
        Some(open.remove(index))
    }

    fn remove(&self, id: u64) {
        self.lock().retain(|entry| entry.id != id);
    }
}

/// Takes a connection out of the table when its task ends, however it ends.
struct Registered {
    connections: Arc<Connections>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.connections.remove(self.id);
    }
}

/// Serves scrapes until `shutdown` turns true (or its sender goes away).
pub async fn serve(
    listener: TcpListener,
    endpoints: Endpoints,
    mut shutdown: watch::Receiver<bool>,
) {
    let connections = Arc::new(Connections::default());
    let mut next_id: u64 = 0;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    warn!("metrics listener: accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
                continue;
            }
        };
        next_id += 1;
        admit(
            &connections,
            next_id,
            stream,
            ClientKey::of_ip(peer.ip()),
            &endpoints,
        );
    }
}

/// Starts serving one accepted connection when room can be made for it, else closes it.
fn admit(
    connections: &Arc<Connections>,
    id: u64,
    stream: tokio::net::TcpStream,
    client: ClientKey,
    endpoints: &Endpoints,
) {
    let mut open = connections.lock();
    let Some(evicted) = Connections::make_room(&mut open, client) else {
        debug!(
            "metrics listener: every connection is being answered; closing one more from {client}"
        );
        return;
    };
    for entry in &evicted {
        debug!(
            "metrics listener: closing an idle connection from {}",
            entry.client
        );
    }
    let requested = Arc::new(AtomicBool::new(false));
    let registered = Registered {
        connections: connections.clone(),
        id,
    };
    let task = tokio::spawn(serve_connection(
        stream,
        endpoints.clone(),
        requested.clone(),
        registered,
    ));
    open.push(Open {
        id,
        client,
        requested,
        task: task.abort_handle(),
    });
    drop(open);
    // Outside the lock: an aborted task's guard takes it when it drops.
    for entry in evicted {
        entry.task.abort();
    }
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    endpoints: Endpoints,
    requested: Arc<AtomicBool>,
    _registered: Registered,
) {
    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
        requested.store(true, Ordering::Release);
        let response = respond(&request, &endpoints);
        async move { Ok::<_, Infallible>(response) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(error) = connection.await {
        debug!("metrics connection: {error}");
    }
}

fn respond<Body>(request: &Request<Body>, endpoints: &Endpoints) -> Response<Full<Bytes>> {
    match request.uri().path() {
        "/livez" => health(request.method(), Vec::new, "live"),
        "/readyz" | "/health" => health(request.method(), &*endpoints.readiness, "ready"),
        _ => metrics(request, &endpoints.render),
    }
}

/// A health answer: 200 `{ok}` when `reasons` gives none, else 503 with them; HEAD gets the
/// same status and headers without the body; other methods 405.
fn health(method: &Method, reasons: impl Fn() -> Vec<String>, ok: &str) -> Response<Full<Bytes>> {
    let mut builder = Response::builder()
        .header(hyper::header::CONTENT_TYPE, HEALTH_CONTENT_TYPE)
        .header(hyper::header::CACHE_CONTROL, "no-store");
    let (status, body) = if method != Method::GET && method != Method::HEAD {
        builder = builder.header(hyper::header::ALLOW, "GET, HEAD");
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD\n".to_string(),
        )
    } else {
        let reasons = reasons();
        if reasons.is_empty() {
            (StatusCode::OK, format!("{ok}\n"))
        } else {
            let mut body = format!("not {ok}\n");
            for reason in reasons {
                body.push_str(&reason);
                body.push('\n');
            }
            (StatusCode::SERVICE_UNAVAILABLE, body)
        }
    };
    builder
        .status(status)
        .body(Full::new(Bytes::from(body)))
        .expect("a response from constant parts")
}

/// `GET /metrics`; any other path (or method) 404.
fn metrics<Body>(request: &Request<Body>, render: &Render) -> Response<Full<Bytes>> {
    let wants_openmetrics = request
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .any(|value| {
            value
                .to_str()
                .is_ok_and(|text| text.contains("application/openmetrics-text"))
        });
    let (status, content_type, body) =
        if request.method() == Method::GET && request.uri().path() == "/metrics" {
            if wants_openmetrics {
                (StatusCode::OK, OPENMETRICS_CONTENT_TYPE, render())
            } else {
                let text = prometheus_text(&render());
                (StatusCode::OK, PROMETHEUS_TEXT_CONTENT_TYPE, text)
            }
        } else {
            (
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                "only GET /metrics, /livez, /readyz and /health are served here\n".to_string(),
            )
        };
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a response from constant parts")
}

/// OpenMetrics text as Prometheus' classic text format (0.0.4): a counter's HELP and TYPE name
/// its `_total` series, and the OpenMetrics-only `# UNIT` and `# EOF` lines go. Everything else
/// (gauges, histograms, label syntax) is the same in both.
fn prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut lines = openmetrics.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default();
            let counter_type = format!("# TYPE {name} counter");
            if lines.peek() == Some(&counter_type.as_str()) {
                lines.next();
                out.push_str(&format!("# HELP {name}_total{}\n", &rest[name.len()..]));
                out.push_str(&format!("# TYPE {name}_total counter\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(address: std::net::SocketAddr, path: &str) -> String {
        get_accepting(address, path, "*/*").await
    }

    async fn get_accepting(address: std::net::SocketAddr, path: &str, accept: &str) -> String {
        request(address, "GET", path, accept).await
    }

    async fn request(
        address: std::net::SocketAddr,
        method: &str,
        path: &str,
        accept: &str,
    ) -> String {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn scrapes_render_and_other_paths_are_not_found() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let scrapes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = scrapes.clone();
        let render: Render = Arc::new(move || {
            let count = counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            format!(
                "# HELP lmdir_scrapes Scrapes.\n# TYPE lmdir_scrapes counter\nlmdir_scrapes_total {count}\n# EOF\n"
            )
        });
        let readiness: Readiness = Arc::new(Vec::new);
        let server = tokio::spawn(serve(listener, Endpoints { render, readiness }, stopped));

        let first = get_accepting(address, "/metrics", "application/openmetrics-text").await;
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        assert!(first.contains("application/openmetrics-text"), "{first}");
        assert!(first.ends_with("lmdir_scrapes_total 1\n# EOF\n"), "{first}");
        let second = get(address, "/metrics").await;
        assert!(second.contains("text/plain; version=0.0.4"), "{second}");
        assert!(
            second.ends_with(
                "# HELP lmdir_scrapes_total Scrapes.\n# TYPE lmdir_scrapes_total counter\nlmdir_scrapes_total 2\n"
            ),
            "{second}"
        );
        assert!(get(address, "/other").await.starts_with("HTTP/1.1 404"));
        assert_eq!(scrapes.load(std::sync::atomic::Ordering::Relaxed), 2);

        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(30), server)
            .await
            .expect("the endpoint stops on shutdown")
            .unwrap();
    }

    #[tokio::test]
    async fn health_answers_the_readiness_now_without_caching() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let ready = Arc::new(AtomicBool::new(false));
        let seen = ready.clone();
        let readiness: Readiness = Arc::new(move || match seen.load(Ordering::Acquire) {
            true => Vec::new(),
            false => vec!["replication rid=007: first refresh not complete".to_string()],
        });
        let render: Render = Arc::new(|| "# EOF\n".to_string());
        let server = tokio::spawn(serve(listener, Endpoints { render, readiness }, stopped));

        let live = get(address, "/livez").await;
        assert!(live.starts_with("HTTP/1.1 200"), "{live}");
        assert!(live.ends_with("\r\n\r\nlive\n"), "{live}");
        for path in ["/readyz", "/health"] {
            let answer = get(address, path).await;
            assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
            assert!(answer.contains("cache-control: no-store"), "{answer}");
            assert!(answer.contains("content-type: text/plain"), "{answer}");
            assert!(
                answer.ends_with("not ready\nreplication rid=007: first refresh not complete\n"),
                "{answer}"
            );
        }
        let head = request(address, "HEAD", "/readyz", "*/*").await;
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
        ready.store(true, Ordering::Release);
        let answer = get(address, "/readyz").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("\r\n\r\nready\n"), "{answer}");
        let post = request(address, "POST", "/readyz", "*/*").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        assert!(post.contains("allow: GET, HEAD"), "{post}");
        assert!(get(address, "/metrics").await.starts_with("HTTP/1.1 200"));

        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(30), server)
            .await
            .expect("the endpoint stops on shutdown")
            .unwrap();
    }
}
