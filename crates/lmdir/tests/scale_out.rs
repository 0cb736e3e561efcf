//! Scale-out behind a load balancer: Debian's HAProxy, started by the test, in `mode tcp` with
//! `option httpchk GET /readyz` against each node's metrics listener, in front of an lmdir
//! replica that has completed its refresh (ready) and one whose provider is unreachable (never
//! refreshed: `/readyz` answers 503). HAProxy must take the second out, so every search sent
//! through it succeeds. docs/scale-out.md shows the same HAProxy config.

mod support;

use ldap3::{LdapConn, Scope};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{free_port, Settings, TestServer, ROOT_DN, ROOT_PASSWORD, SUFFIX};

const HAPROXY: &str = "/usr/sbin/haproxy";
/// Longest wait for a refresh or a health check verdict: a hang guard, not a speed requirement.
const WAIT_MAX: Duration = Duration::from_secs(120);
const SEARCHES: usize = 40;

/// The HAProxy config docs/scale-out.md shows, with this test's ports.
fn haproxy_config(frontend: u16, stats_socket: &Path, nodes: &[(&str, u16, u16)]) -> String {
    let mut text = format!(
        "global\n    stats socket {} mode 600 level admin\n\n\
         defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1m\n    timeout server 1m\n\n\
         frontend ldap\n    bind 127.0.0.1:{frontend}\n    default_backend lmdir\n\n\
         backend lmdir\n    balance roundrobin\n    option httpchk GET /readyz\n    http-check expect status 200\n",
        stats_socket.display()
    );
    for (name, ldap_port, metrics_port) in nodes {
        text += &format!(
            "    server {name} 127.0.0.1:{ldap_port} check port {metrics_port} inter 200ms\n"
        );
    }
    text
}

/// HAProxy running a config; killed when dropped.
struct Haproxy {
    child: Child,
    socket: std::path::PathBuf,
}

impl Haproxy {
    fn start(directory: &Path, config: &str) -> Haproxy {
        let path = directory.join("haproxy.cfg");
        std::fs::write(&path, config).expect("writing haproxy.cfg");
        let check = Command::new(HAPROXY)
            .args(["-c", "-f"])
            .arg(&path)
            .output()
            .expect("haproxy -c");
        assert!(
            check.status.success(),
            "haproxy -c: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(HAPROXY)
            .args(["-db", "-f"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting haproxy");
        Haproxy {
            child,
            socket: directory.join("haproxy.sock"),
        }
    }

    /// Each server's status column of `show stat` (UP, DOWN, ...), by name.
    fn statuses(&self) -> Vec<(String, String)> {
        let Ok(mut stream) = std::os::unix::net::UnixStream::connect(&self.socket) else {
            return Vec::new();
        };
        stream.write_all(b"show stat\n").expect("show stat");
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text.lines()
            .filter(|line| line.starts_with("lmdir,"))
            .filter_map(|line| {
                let fields: Vec<&str> = line.split(',').collect();
                let name = fields.get(1)?.to_string();
                let status = fields.get(17)?.to_string();
                (name != "BACKEND").then_some((name, status))
            })
            .collect()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (status code, body) of a GET on a metrics listener.
fn get(port: u16, path: &str) -> (u16, String) {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .expect("request");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

fn wait_for(context: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !condition() {
        assert!(Instant::now() < deadline, "{context}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A replica with a refreshAndPersist consumer of `provider` and a metrics listener.
fn replica(provider: &str, metrics_port: u16) -> TestServer {
    let server = format!("metrics_listen = \"127.0.0.1:{metrics_port}\"\n");
    let database = format!(
        "\n[replication]\n[[replication.consumer]]\nrid = 7\nprovider = \"{provider}\"\n\
         search_base = \"{SUFFIX}\"\ntype = \"refreshAndPersist\"\nretry_seconds = 1\n\
         bind_dn = \"{ROOT_DN}\"\ncredentials = \"{ROOT_PASSWORD}\"\n"
    );
    let mut replica = TestServer::prepare_with(
        &Settings {
            server: &server,
            database: &database,
            ..Settings::default()
        },
        0,
    );
    replica.start();
    replica
}

fn haproxy_or_skip() -> bool {
    if Path::new(HAPROXY).exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI=true and {HAPROXY} is missing (scripts/test.sh installs haproxy)"
    );
    eprintln!("skipped: {HAPROXY} is missing");
    false
}

/// The suffix entry, searched through HAProxy on a new connection: its result code.
fn search_through(port: u16) -> u32 {
    let mut connection =
        LdapConn::new(&format!("ldap://127.0.0.1:{port}")).expect("connect through haproxy");
    let result = connection
        .search(SUFFIX, Scope::Base, "(objectClass=*)", vec!["dc"])
        .expect("search sent");
    let _ = connection.unbind();
    if result.1.rc == 0 {
        assert_eq!(result.0.len(), 1, "one suffix entry");
    }
    result.1.rc
}

#[test]
fn haproxy_sends_searches_only_to_the_ready_replica() {
    if !haproxy_or_skip() {
        return;
    }
    let mut provider = TestServer::prepare_with(
        &Settings {
            database: "\n[replication]\nserver_id = 1\nprovider = true\n",
            ..Settings::default()
        },
        20,
    );
    provider.start();
    let (ready_metrics, stale_metrics) = (free_port(), free_port());
    let ready = replica(
        &format!("ldap://127.0.0.1:{}", provider.port),
        ready_metrics,
    );
    // Nothing listens on this port: the consumer never refreshes.
    let stale = replica(&format!("ldap://127.0.0.1:{}", free_port()), stale_metrics);
    wait_for("the replica's refresh", || {
        get(ready_metrics, "/readyz").0 == 200
    });
    let (status, body) = get(stale_metrics, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        "not ready\nreplication rid=007: first refresh not complete\n"
    );
    assert_eq!(
        search_through(stale.port),
        32,
        "the stale replica holds nothing"
    );

    let directory = tempfile::tempdir().expect("haproxy directory");
    let frontend = free_port();
    let config = haproxy_config(
        frontend,
        &directory.path().join("haproxy.sock"),
        &[
            ("ready", ready.port, ready_metrics),
            ("stale", stale.port, stale_metrics),
        ],
    );
    let haproxy = Haproxy::start(directory.path(), &config);
    wait_for("HAProxy's checks: ready UP, stale DOWN", || {
        let statuses = haproxy.statuses();
        statuses.contains(&("ready".to_string(), "UP".to_string()))
            && statuses.contains(&("stale".to_string(), "DOWN".to_string()))
    });
    for index in 0..SEARCHES {
        assert_eq!(
            search_through(frontend),
            0,
            "search {index} through HAProxy"
        );
    }
    provider.assert_no_panic("provider");
}
