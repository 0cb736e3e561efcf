//! Scale-out behind a load balancer: Debian's HAProxy, started by the test, in `mode tcp` with
//! `option httpchk GET /readyz` against each node's metrics listener. In front of read replicas:
//! one that has completed its refresh (ready) and one whose provider is unreachable (never
//! refreshed: `/readyz` answers 503); HAProxy must take the second out, so every search sent
//! through it succeeds. In front of two multi-provider nodes: adds sent through HAProxy while a
//! node is restarted, killed, or cut off from the other (a partition); every add HAProxy's node
//! acknowledged must be on both nodes once they meet again. docs/scale-out.md shows the same
//! HAProxy config.

use crate::mesh;
use crate::support;

use ldap3::{LdapConn, LdapConnSettings, Mod, Scope};
use mesh::{
    assert_each_dn_once, assert_no_echo, converge, mesh_with, person, record, Node, Proxy, PEOPLE,
};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

/// Two multi-provider nodes (server IDs 1 and 2, each consuming the other through a link the
/// test can cut), each with a metrics listener, node 1 loaded with `PEOPLE` people and node 2
/// refreshed from it; and HAProxy in front of both, with both marked UP.
fn providers_behind_haproxy(directory: &Path) -> (Vec<Node>, Haproxy, u16) {
    let metrics = [free_port(), free_port()];
    let mut nodes = mesh_with(2, |index| {
        format!("metrics_listen = \"127.0.0.1:{}\"\n", metrics[index])
    });
    converge(&mut nodes, "the initial refresh", |export| {
        !record(export, &person(PEOPLE as usize - 1)).is_empty()
    });
    let frontend = free_port();
    let config = haproxy_config(
        frontend,
        &directory.join("haproxy.sock"),
        &[
            ("node1", nodes[0].server.port, metrics[0]),
            ("node2", nodes[1].server.port, metrics[1]),
        ],
    );
    let haproxy = Haproxy::start(directory, &config);
    wait_for_status(&haproxy, "node1", "UP");
    wait_for_status(&haproxy, "node2", "UP");
    (nodes, haproxy, frontend)
}

fn wait_for_status(haproxy: &Haproxy, server: &str, status: &str) {
    wait_for(&format!("HAProxy marking {server} {status}"), || {
        haproxy
            .statuses()
            .contains(&(server.to_string(), status.to_string()))
    });
}

/// A connection through HAProxy, bound as the rootdn; None when the balancer or the node
/// behind it drops it (a node going away).
fn rootdn_connection(port: u16) -> Option<LdapConn> {
    let settings = LdapConnSettings::new().set_conn_timeout(Duration::from_secs(10));
    let mut connection =
        LdapConn::with_settings(settings, &format!("ldap://127.0.0.1:{port}")).ok()?;
    connection.with_timeout(Duration::from_secs(30));
    let bound = connection.simple_bind(ROOT_DN, ROOT_PASSWORD).ok()?;
    (bound.rc == 0).then_some(connection)
}

/// One LDAP write through HAProxy on a new connection, retried on a new connection while the
/// connection fails (a node stopping, killed or not yet marked DOWN); the result code of the
/// first answer.
fn write_through(port: u16, write: &dyn Fn(&mut LdapConn) -> ldap3::result::Result<u32>) -> u32 {
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        if let Some(mut connection) = rootdn_connection(port) {
            if let Ok(code) = write(&mut connection) {
                let _ = connection.unbind();
                return code;
            }
        }
        assert!(Instant::now() < deadline, "no write went through HAProxy");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// LDAP's unavailable (52): what a node answers to a request that reaches it while it stops.
const UNAVAILABLE: u32 = 52;

/// Adds people through HAProxy, one a connection (round robin spreads them over the nodes),
/// on a thread, until stopped; keeps the DNs whose add was acknowledged: 0, or 68 (already
/// exists) when an earlier try's answer was lost with its connection after the add was made.
struct Writer {
    acknowledged: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(port: u16, prefix: &'static str) -> Writer {
        let acknowledged: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop: Arc<AtomicBool> = Arc::default();
        let (kept, stopping) = (acknowledged.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut index = 0usize;
            while !stopping.load(Ordering::SeqCst) {
                let dn = format!("uid={prefix}{index:05},ou=people,{SUFFIX}");
                let uid = format!("{prefix}{index:05}");
                let code = loop {
                    let code = write_through(port, &|connection| {
                        let attributes = vec![
                            ("objectClass", HashSet::from(["inetOrgPerson"])),
                            ("uid", HashSet::from([uid.as_str()])),
                            ("cn", HashSet::from([uid.as_str()])),
                            ("sn", HashSet::from(["Through HAProxy"])),
                        ];
                        Ok(connection.add(&dn, attributes)?.rc)
                    });
                    // 52 (unavailable): the add reached a node already shutting down, which
                    // answers without applying it; a client tries again, as after a lost
                    // connection.
                    if code != UNAVAILABLE {
                        break code;
                    }
                };
                assert!(
                    code == 0 || code == 68,
                    "add of {dn} through HAProxy: {code}"
                );
                kept.lock().unwrap().push(dn);
                index += 1;
            }
        });
        Writer {
            acknowledged,
            stop,
            thread: Some(thread),
        }
    }

    /// Waits until `count` adds more than now are acknowledged.
    fn wait_for_more(&self, count: usize) {
        let target = self.acknowledged.lock().unwrap().len() + count;
        wait_for(
            &format!("{target} adds acknowledged through HAProxy"),
            || self.acknowledged.lock().unwrap().len() >= target,
        );
    }

    /// Stops the adds; the acknowledged DNs.
    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the writer thread panicked");
        }
        self.acknowledged.lock().unwrap().clone()
    }
}

/// Every acknowledged DN is in the (converged) export, once.
fn assert_all_there(export: &str, acknowledged: &[String]) {
    for dn in acknowledged {
        assert!(!record(export, dn).is_empty(), "acknowledged {dn} is lost");
    }
    assert_each_dn_once(export);
}

/// Adds flow through HAProxy the whole time while node 2 is stopped (SIGTERM) and started
/// again, then node 1 is SIGKILLed and started again. HAProxy takes each out while it is away
/// (its checks fail) and back once `/readyz` answers 200 (its consumer refreshed); each add
/// whose answer was lost with its node is retried on a new connection. Once both are back,
/// every acknowledged add is on both nodes, the nodes hold the same data, and nothing is sent
/// back and forth.
#[test]
fn no_acknowledged_add_is_lost_through_haproxy_when_a_node_restarts_or_is_killed() {
    if !haproxy_or_skip() {
        return;
    }
    let directory = tempfile::tempdir().expect("haproxy directory");
    let (mut nodes, haproxy, frontend) = providers_behind_haproxy(directory.path());
    let writer = Writer::start(frontend, "ha");
    writer.wait_for_more(20);
    nodes[1].server.stop();
    wait_for_status(&haproxy, "node2", "DOWN");
    writer.wait_for_more(20);
    nodes[1].server.start();
    wait_for_status(&haproxy, "node2", "UP");
    writer.wait_for_more(20);
    nodes[0].server.kill_hard();
    wait_for_status(&haproxy, "node1", "DOWN");
    writer.wait_for_more(20);
    nodes[0].server.start();
    wait_for_status(&haproxy, "node1", "UP");
    writer.wait_for_more(20);
    let acknowledged = writer.finish();
    let export = converge(&mut nodes, "after the restart and the kill", |export| {
        acknowledged.iter().all(|dn| !record(export, dn).is_empty())
    });
    assert_all_there(&export, &acknowledged);
    assert_no_echo(&nodes, "after the restart and the kill");
    for node in &nodes {
        node.server.assert_no_panic("a node behind HAProxy");
    }
}

/// The two nodes cut off from each other (a partition) while HAProxy keeps both in rotation
/// (each is ready: a consumer cut off after its refresh stays ready) and spreads adds over
/// both, plus a change of `title` and one of `description` of one entry on two connections.
/// During the partition each node lacks what the other took; once the link is back, both hold
/// every acknowledged add and both attribute changes.
#[test]
fn a_partition_behind_haproxy_loses_no_acknowledged_change() {
    if !haproxy_or_skip() {
        return;
    }
    let directory = tempfile::tempdir().expect("haproxy directory");
    let (mut nodes, haproxy, frontend) = providers_behind_haproxy(directory.path());
    for node in &nodes {
        node.links.iter().for_each(Proxy::cut);
    }
    let writer = Writer::start(frontend, "split");
    writer.wait_for_more(40);
    let changed = person(7);
    for (attribute, value) in [
        ("title", "Partitioned title"),
        ("description", "Partitioned"),
    ] {
        let code = write_through(frontend, &|connection| {
            let modification = Mod::Replace(attribute, HashSet::from([value]));
            Ok(connection.modify(&changed, vec![modification])?.rc)
        });
        assert_eq!(code, 0, "replace {attribute} through HAProxy");
    }
    let acknowledged = writer.finish();
    for (index, node) in nodes.iter().enumerate() {
        let held = mesh::export_ldif(node);
        let missing = acknowledged
            .iter()
            .filter(|dn| record(&held, dn).is_empty())
            .count();
        assert!(
            missing > 0 && missing < acknowledged.len(),
            "node {} holds {} of {} adds during the partition: HAProxy sent them all one way",
            index + 1,
            acknowledged.len() - missing,
            acknowledged.len()
        );
    }
    wait_for_status(&haproxy, "node1", "UP");
    wait_for_status(&haproxy, "node2", "UP");
    for node in &nodes {
        node.links.iter().for_each(Proxy::heal);
    }
    let export = converge(&mut nodes, "after the partition", |export| {
        let entry = record(export, &changed);
        entry.contains("title: Partitioned title")
            && entry.contains("description: Partitioned")
            && acknowledged.iter().all(|dn| !record(export, dn).is_empty())
    });
    assert_all_there(&export, &acknowledged);
    assert_no_echo(&nodes, "after the partition");
}

/// An anonymous simple bind, message 1.
const ANONYMOUS_BIND: &[u8] = b"\x30\x0c\x02\x01\x01\x60\x07\x02\x01\x03\x04\x00\x80\x00";

/// A TCP connection to `port` on 127.0.0.1 from `source` (any 127.x.y.z is this host, so the
/// test plays several client addresses).
fn connect_from(source: [u8; 4], port: u16) -> std::net::TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(std::net::SocketAddr::from((source, 0)))
            .expect("bind source");
        let stream = socket
            .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .expect("connect");
        stream.into_std().expect("std stream")
    });
    stream.set_nonblocking(false).expect("blocking");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    stream
}

/// Whether an anonymous bind on `stream` is answered success (false: a notice, or closed).
fn binds(stream: &mut std::net::TcpStream) -> bool {
    if stream.write_all(ANONYMOUS_BIND).is_err() {
        return false;
    }
    let mut response = [0u8; 14];
    stream.read_exact(&mut response).is_ok() && response[5] == 0x61 && response[9] == 0
}

/// The bytes a server sends before it closes `stream`.
fn until_closed(stream: &mut std::net::TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    received
}

/// HAProxy in front of a pldap:// listener: `send-proxy-v2` on one frontend, `send-proxy`
/// (v1) on the other. Each client behind it counts as itself, not as HAProxy's one address:
/// two connections from 127.0.0.2 fill its cap of 2 (the third, through the other frontend,
/// is answered busy) while 127.0.0.3 still connects, and cn=Monitor shows the clients'
/// addresses. Straight to the pldap port, a peer outside proxy_protocol_sources is closed
/// unanswered, and so is a source that sends LDAP without a header.
#[test]
fn clients_behind_haproxy_send_proxy_count_as_themselves() {
    if !haproxy_or_skip() {
        return;
    }
    let pldap_port = free_port();
    let (v2_port, v1_port) = (free_port(), free_port());
    let mut server = TestServer::prepare_with(
        &Settings {
            listen_extra: vec![format!("pldap://127.0.0.1:{pldap_port}")],
            server: "proxy_protocol_sources = [\"127.0.0.1\"]\nconnections_per_address_max = 2\n\
                     tls_handshake_timeout_seconds = 1\n",
            ..Settings::default()
        },
        0,
    );
    server.start();
    let work = tempfile::tempdir().unwrap();
    let config = format!(
        "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1m\n    timeout server 1m\n\n\
         frontend v2\n    bind 127.0.0.1:{v2_port}\n    default_backend v2\n\
         backend v2\n    server node 127.0.0.1:{pldap_port} send-proxy-v2\n\n\
         frontend v1\n    bind 127.0.0.1:{v1_port}\n    default_backend v1\n\
         backend v1\n    server node 127.0.0.1:{pldap_port} send-proxy\n"
    );
    let _haproxy = Haproxy::start(work.path(), &config);
    wait_for("HAProxy listens", || {
        std::net::TcpStream::connect(("127.0.0.1", v2_port)).is_ok()
    });
    let mut held = vec![connect_from([127, 0, 0, 2], v2_port)];
    wait_for("the first client binds through HAProxy", || {
        held[0] = connect_from([127, 0, 0, 2], v2_port);
        binds(&mut held[0])
    });
    let mut second = connect_from([127, 0, 0, 2], v1_port);
    assert!(binds(&mut second), "a second connection of 127.0.0.2 (v1)");
    held.push(second);
    let mut over = connect_from([127, 0, 0, 2], v1_port);
    let notice = until_closed(&mut over);
    assert!(
        notice.windows(3).any(|bytes| bytes == [0x0a, 0x01, 51]),
        "the third connection of 127.0.0.2 is answered busy: {notice:?}"
    );
    let mut other = connect_from([127, 0, 0, 3], v1_port);
    assert!(binds(&mut other), "127.0.0.3 has its own cap");
    held.push(other);

    let mut root = LdapConn::new(&format!("ldap://127.0.0.1:{}", server.port)).expect("connect");
    root.simple_bind(ROOT_DN, ROOT_PASSWORD)
        .unwrap()
        .success()
        .unwrap();
    let (entries, _) = root
        .search(
            "cn=Connections,cn=Monitor",
            ldap3::Scope::OneLevel,
            "(objectClass=*)",
            vec!["monitorConnectionPeerAddress"],
        )
        .unwrap()
        .success()
        .unwrap();
    let peers: Vec<String> = entries
        .into_iter()
        .flat_map(|entry| {
            ldap3::SearchEntry::construct(entry)
                .attrs
                .remove("monitorConnectionPeerAddress")
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        peers
            .iter()
            .filter(|peer| peer.starts_with("127.0.0.2:"))
            .count(),
        2,
        "{peers:?}"
    );
    assert!(
        peers.iter().any(|peer| peer.starts_with("127.0.0.3:")),
        "{peers:?}"
    );

    let mut stranger = connect_from([127, 0, 0, 5], pldap_port);
    let _ = stranger.write_all(ANONYMOUS_BIND);
    assert_eq!(
        until_closed(&mut stranger),
        b"",
        "not a proxy_protocol_sources peer"
    );
    let mut headerless = connect_from([127, 0, 0, 1], pldap_port);
    headerless.write_all(ANONYMOUS_BIND).unwrap();
    assert_eq!(
        until_closed(&mut headerless),
        b"",
        "LDAP without a PROXY header"
    );
    server.assert_running("after the proxied clients");
}
