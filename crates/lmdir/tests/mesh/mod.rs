//! Multi-provider lmdir nodes for the tests: every node has a `server_id`, `provider = true`
//! and a refreshOnly consumer (1 s interval) of every other node, each link through a small TCP
//! proxy the test can cut; and the checks that they converge (equal `lmdir export`, the same
//! contextCSNs, `lmdir check` clean, no change sent back once quiet). Used by
//! `replication_multi.rs` (the nodes alone) and `scale_out.rs` (behind HAProxy).

use crate::conformance::{modify, SUFFIX};
use crate::support::{TestServer, ROOT_DN, ROOT_PASSWORD};
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest wait for the nodes to converge: a hang guard, not a speed requirement.
pub const CONVERGENCE_WAIT_MAX: Duration = Duration::from_secs(120);
pub const PEOPLE: u64 = 40;

/// A TCP proxy between a consumer and its provider that can drop every connection and refuse
/// new ones until healed: a cut network link.
pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    pub fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (accept_cut, accept_streams) = (cut.clone(), streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if accept_cut.load(Ordering::SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    continue;
                };
                let mut held = accept_streams.lock().unwrap();
                held.push(client.try_clone().unwrap());
                held.push(server.try_clone().unwrap());
                drop(held);
                // A cut that came after the check above drained the list before these two
                // were in it: this connection must not outlive it.
                if accept_cut.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    let _ = server.shutdown(Shutdown::Both);
                    continue;
                }
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy { port, cut, streams }
    }

    pub fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies one direction until either side closes.
pub fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

/// One node: its server and the proxies its consumers pull through (one per other node).
pub struct Node {
    pub server: TestServer,
    pub sid: u16,
    pub links: Vec<Proxy>,
}

/// `count` nodes with server IDs 1..=count; node 0 is loaded with `PEOPLE` people, the others
/// start empty and receive everything by replication. Every node consumes every other one.
pub fn mesh(count: usize) -> Vec<Node> {
    mesh_with(count, |_| String::new())
}

/// As [`mesh`], node `index`'s `[server]` table getting `server_settings(index)` (TOML lines).
pub fn mesh_with(count: usize, server_settings: impl Fn(usize) -> String) -> Vec<Node> {
    let servers: Vec<TestServer> = (0..count)
        .map(|index| {
            let people = if index == 0 { PEOPLE } else { 0 };
            TestServer::prepare(&server_settings(index), people)
        })
        .collect();
    let ports: Vec<u16> = servers.iter().map(|server| server.port).collect();
    let mut nodes: Vec<Node> = servers
        .into_iter()
        .enumerate()
        .map(|(index, server)| {
            let sid = index as u16 + 1;
            let mut text = format!("\n[replication]\nserver_id = {sid}\nprovider = true\n");
            let mut links = Vec::new();
            for (peer, port) in ports.iter().enumerate().filter(|(peer, _)| *peer != index) {
                let proxy = Proxy::start(*port);
                text += &format!(
                    "[[replication.consumer]]\nrid = {}\nprovider = \"{}\"\n\
                     search_base = \"{SUFFIX}\"\ntype = \"refreshOnly\"\ninterval_seconds = 1\n\
                     retry_seconds = 1\nbind_dn = \"{ROOT_DN}\"\ncredentials = \"{ROOT_PASSWORD}\"\n",
                    peer + 1,
                    proxy.url()
                );
                links.push(proxy);
            }
            let mut config = std::fs::OpenOptions::new()
                .append(true)
                .open(&server.config_path)
                .unwrap();
            config.write_all(text.as_bytes()).unwrap();
            Node { server, sid, links }
        })
        .collect();
    for node in &mut nodes {
        node.server.start();
    }
    nodes
}

/// `lmdir export` of the node with each record's lines sorted and the records sorted by DN:
/// siblings come in ID order, which is each node's own order of arrival, and a replaced
/// entry's attributes may be stored in another order; the content is what must agree.
pub fn export_ldif(node: &Node) -> String {
    let output = node.server.run_command(&["export"]);
    assert!(output.status.success(), "lmdir export failed");
    sorted_records(&String::from_utf8(output.stdout).unwrap())
}

/// LDIF text with each record's lines after the DN sorted and the records sorted by DN: the
/// content, whatever order a server stored or sent it in.
pub fn sorted_records(text: &str) -> String {
    let mut records: Vec<String> = text
        .split("\n\n")
        .filter(|record| !record.trim().is_empty())
        .map(|record| {
            let mut lines = record.lines();
            let dn = lines.next().unwrap_or_default().to_lowercase();
            let mut rest: Vec<&str> = lines.collect();
            rest.sort_unstable();
            format!("{dn}\n{}", rest.join("\n"))
        })
        .collect();
    records.sort_unstable();
    records.join("\n\n")
}

/// The records (sorted LDIF, as `sorted_records`) that are not the same in both exports, each
/// as node 1 has it and as the other has it (at most 10): a line missing or doubled inside a
/// record shows, where a set of lines cannot show a doubled one.
fn differing_records(first: &str, other: &str) -> String {
    let by_dn = |export: &str| -> std::collections::BTreeMap<String, String> {
        export
            .split("\n\n")
            .map(|record| {
                let dn = record.lines().next().unwrap_or_default().to_string();
                (dn, record.to_string())
            })
            .collect()
    };
    let (first, other) = (by_dn(first), by_dn(other));
    let dns: std::collections::BTreeSet<&String> = first.keys().chain(other.keys()).collect();
    dns.into_iter()
        .filter(|dn| first.get(*dn) != other.get(*dn))
        .take(10)
        .map(|dn| {
            let side = |records: &std::collections::BTreeMap<String, String>| {
                records
                    .get(dn)
                    .cloned()
                    .unwrap_or_else(|| "(absent)".to_string())
            };
            format!("node 1:\n{}\nother:\n{}\n", side(&first), side(&other))
        })
        .collect()
}

/// Waits until every node exports the same LDIF, `ready` holds for it and every node holds
/// the same contextCSNs; returns the export. A consumer may commit a refresh's entries before
/// the cookie that covers them (the cookie comes last, in its own transaction), so equal data
/// alone does not mean quiet: until the cookies agree, a provider still has changes to send.
pub fn converge(nodes: &mut [Node], context: &str, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + CONVERGENCE_WAIT_MAX;
    loop {
        let exports: Vec<String> = nodes.iter().map(export_ldif).collect();
        if exports.iter().all(|export| export == &exports[0])
            && ready(&exports[0])
            && same_context_csns(nodes)
        {
            for node in nodes.iter() {
                node.server.assert_check_clean(context);
            }
            return exports[0].clone();
        }
        for node in nodes.iter_mut() {
            node.server.assert_running(context);
        }
        if Instant::now() >= deadline {
            for (index, other) in exports.iter().enumerate().skip(1) {
                eprintln!(
                    "{context}: records of node {} that differ from node 1's:\n{}",
                    index + 1,
                    differing_records(&exports[0], other)
                );
            }
            for (index, node) in nodes.iter().enumerate() {
                let lines = exports[index].lines().count();
                eprintln!(
                    "node {} ({lines} lines, contextCSN {:?}) log:\n{}",
                    index + 1,
                    context_csns(node),
                    node.server.logs()
                );
            }
            panic!("{context}: the nodes did not converge");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether every node holds the same contextCSN values.
pub fn same_context_csns(nodes: &[Node]) -> bool {
    let first = context_csns(&nodes[0]);
    nodes[1..].iter().all(|node| context_csns(node) == first)
}

pub fn person(index: usize) -> String {
    format!("uid=u{index:07},ou=people,{SUFFIX}")
}

pub fn change(node: &Node, text: &str) {
    let answer = modify(node.server.port, text);
    assert_eq!(answer.code, 0, "{text}: {answer:?}");
}

pub fn set_description(node: &Node, dn: &str, value: &str) {
    change(
        node,
        &format!("dn: {dn}\nchangetype: modify\nreplace: description\ndescription: {value}\n"),
    );
}

pub fn add_person(node: &Node, uid: &str) {
    change(
        node,
        &format!(
            "dn: uid={uid},ou=people,{SUFFIX}\nchangetype: add\nobjectClass: inetOrgPerson\n\
             uid: {uid}\ncn: {uid}\nsn: {uid}\n"
        ),
    );
}

/// The LDIF record of `dn` in an export (empty when absent).
pub fn record<'e>(export: &'e str, dn: &str) -> &'e str {
    export
        .split("\n\n")
        .find(|record| {
            record
                .lines()
                .next()
                .is_some_and(|line| line.eq_ignore_ascii_case(&format!("dn: {dn}")))
        })
        .unwrap_or("")
}

/// The node's contextCSN values (one per server ID), as the rootdn reads them on the suffix.
pub fn context_csns(node: &Node) -> Vec<String> {
    context_csns_at(node.server.port)
}

pub fn context_csns_at(port: u16) -> Vec<String> {
    let mut csns = base_values(port, SUFFIX, "contextCSN");
    // A cookie lists its CSNs by server ID, the third `#` field.
    csns.sort_by_key(|csn| csn.split('#').nth(2).map(str::to_string));
    csns
}

/// The values of `attribute` on the entry `base` of the server at `port`, as the rootdn reads
/// them with `ldapsearch` (empty when the entry or the attribute is not there).
pub fn base_values(port: u16, base: &str, attribute: &str) -> Vec<String> {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-s", "base", "-b", base])
        .arg(attribute)
        .output()
        .expect("running ldapsearch");
    let prefix = format!("{attribute}: ");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix(prefix.as_str()))
        .map(str::to_string)
        .collect()
}

/// How many whole entries (changed since the cookie) `provider` sends to a refreshOnly sync
/// search made with the cookie `consumer`'s consumer sends: its server ID and its contextCSN.
/// Unchanged entries come as `present`, a DN without attributes.
pub fn entries_sent(provider: &Node, consumer: &Node) -> usize {
    let cookie = format!(
        "rid=001,sid={:03x},csn={}",
        consumer.sid,
        context_csns(consumer).join(";")
    );
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{}", provider.server.port))
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-b", SUFFIX])
        .arg("-E")
        .arg(format!("sync=ro/{cookie}"))
        .arg("entryCSN")
        .stderr(Stdio::piped())
        .output()
        .expect("running ldapsearch");
    assert!(
        output.status.success(),
        "sync search: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with("entryCSN: "))
        .count()
}

/// Once quiet, no node sends any entry to any other: a change that went A→B does not come
/// back B→A (the consumer's cookie carries every server ID's CSN it holds).
pub fn assert_no_echo(nodes: &[Node], context: &str) {
    for provider in nodes {
        for consumer in nodes.iter().filter(|node| node.sid != provider.sid) {
            assert_eq!(
                entries_sent(provider, consumer),
                0,
                "{context}: node {} still sends entries to node {}",
                provider.sid,
                consumer.sid
            );
        }
    }
}

/// Each DN of an export once (case aside): nothing a node applied twice.
pub fn assert_each_dn_once(export: &str) {
    let dns: Vec<String> = export
        .lines()
        .filter_map(|line| line.strip_prefix("dn: "))
        .map(str::to_lowercase)
        .collect();
    let unique: std::collections::BTreeSet<&String> = dns.iter().collect();
    assert_eq!(dns.len(), unique.len(), "a DN exported twice");
}
