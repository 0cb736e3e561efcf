//! Scale-out behind a load balancer: Debian's HAProxy, started by the test, in `mode tcp` with
//! `option httpchk GET /readyz` against each node's metrics listener. In front of read replicas:
//! one that has completed its refresh (ready) and one whose provider is unreachable (never
//! refreshed: `/readyz` answers 503); HAProxy must take the second out, so every search sent
//! through it succeeds. In front of two multi-provider nodes: adds sent through HAProxy while a
//! node is restarted, killed, or cut off from the other (a partition); every add HAProxy's node
//! acknowledged must be on both nodes once they meet again. docs/scale-out.md shows the same
//! HAProxy config.

#[allow(dead_code)]
mod conformance;
#[allow(dead_code)]
mod mesh;
mod support;

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
