//! Attacks on connections, binds and limits, over the wire against a populated server: planted
//! password values, a client that stops reading, a StartTLS that never handshakes, a host that
//! opens too many connections, a password-guessing loop, an anonymous client sending huge PDUs.
//! Each must cost the attacker, and never pin the server or hurt other clients. Assertions are
//! on states and counts; clocks only as hang guards and as lower bounds no load can break.

mod common;

use common::{person_dn, TestServer, PERSON_PASSWORD, ROOT_DN, ROOT_PASSWORD};
use ldap3::{LdapConn, Scope};
use ldap3_proto::proto::{LdapExtendedRequest, LdapFilter, LdapOp, LdapSearchRequest};
use ldap3_proto::{LdapMsg, LdapResultCode};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Hang guard for anything the server must do by itself (close a connection, release a txn):
/// far above what any loaded machine needs, never a speed claim.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn connect(server: &TestServer) -> LdapConn {
    LdapConn::new(&server.ldap_url()).expect("connect")
}

/// A raw TCP client from `source` (any 127.x.y.z is this host on Linux, so tests can play
/// several client addresses) with a receive buffer of `receive_buffer_bytes` (0 = default).
fn raw_from(server: &TestServer, source: [u8; 4], receive_buffer_bytes: u32) -> RawClient {
    let socket = server.runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        if receive_buffer_bytes > 0 {
            socket
                .set_recv_buffer_size(receive_buffer_bytes)
                .expect("receive buffer");
        }
        socket
            .bind(SocketAddr::from((source, 0)))
            .expect("bind source address");
        let stream = socket
            .connect(server.ldap_address())
            .await
            .expect("connect");
        stream.into_std().expect("std stream")
    });
    socket.set_nonblocking(false).expect("blocking");
    socket
        .set_read_timeout(Some(HANG_GUARD))
        .expect("read timeout");
    RawClient {
        stream: socket,
        codec: ldap3_proto::LdapCodec::new(Some(64 << 20), None),
        received: bytes::BytesMut::new(),
    }
}

fn raw(server: &TestServer) -> RawClient {
    raw_from(server, [127, 0, 0, 1], 0)
}

struct RawClient {
    stream: TcpStream,
    codec: ldap3_proto::LdapCodec,
    received: bytes::BytesMut,
}

impl RawClient {
    fn send(&mut self, messages: Vec<LdapMsg>) {
        use tokio_util::codec::Encoder;
        let mut buffer = bytes::BytesMut::new();
        for message in messages {
            self.codec.encode(message, &mut buffer).expect("encode");
        }
        self.stream.write_all(&buffer).expect("write");
    }

    /// The next message, or None once the server has closed the connection.
    fn receive(&mut self) -> Option<LdapMsg> {
        use tokio_util::codec::Decoder;
        loop {
            if let Some(message) = self.codec.decode(&mut self.received).expect("decode") {
                return Some(message);
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(count) => self.received.extend_from_slice(&chunk[..count]),
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(error) => panic!("no answer and no close within the hang guard: {error}"),
            }
        }
    }

    /// Reads until the server closes; returns the messages seen on the way.
    fn until_closed(&mut self) -> Vec<LdapMsg> {
        std::iter::from_fn(|| self.receive()).collect()
    }

    fn bind(&mut self, message_id: i32, dn: &str, password: &str) -> LdapResultCode {
        self.send(vec![bind_request(message_id, dn, password)]);
        match self.receive().expect("a bind response").op {
            LdapOp::BindResponse(response) => response.res.code,
            other => panic!("expected a bind response, got {other:?}"),
        }
    }
}

fn bind_request(message_id: i32, dn: &str, password: &str) -> LdapMsg {
    LdapMsg {
        msgid: message_id,
        op: LdapOp::BindRequest(ldap3_proto::proto::LdapBindRequest {
            version: 3,
            dn: dn.to_string(),
            cred: ldap3_proto::proto::LdapBindCred::Simple(password.to_string()),
        }),
        ctrl: Vec::new(),
    }
}

fn search_request(message_id: i32, filter: LdapFilter) -> LdapMsg {
    LdapMsg {
        msgid: message_id,
        op: LdapOp::SearchRequest(LdapSearchRequest {
            base: "dc=example,dc=com".to_string(),
            scope: ldap3_proto::proto::LdapSearchScope::Subtree,
            aliases: ldap3_proto::proto::LdapDerefAliases::Never,
            sizelimit: 0,
            timelimit: 0,
            typesonly: false,
            filter,
            attrs: Vec::new(),
        }),
        ctrl: Vec::new(),
    }
}

/// The Notice of Disconnection's result code, if `messages` hold one.
fn notice_code(messages: &[LdapMsg]) -> Option<LdapResultCode> {
    messages.iter().find_map(|message| match &message.op {
        LdapOp::ExtendedResponse(response)
            if response.name.as_deref() == Some("1.3.6.1.4.1.1466.20036") =>
        {
            Some(response.res.code.clone())
        }
        _ => None,
    })
}

/// Polls `condition` until it holds; fails after the hang guard.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {HANG_GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn probe_search(server: &TestServer) {
    let mut client = connect(server);
    let (entries, result) = client
        .search(
            "dc=example,dc=com",
            Scope::Subtree,
            "(uid=u0000001)",
            vec!["cn"],
        )
        .expect("probe search")
        .success()
        .expect("probe search succeeds");
    assert_eq!((entries.len(), result.rc), (1, 0));
    let _ = client.unbind();
}

/// Replaces `userPassword` of `dn` with `values`, in this order (raw, as a client library's
/// unordered set would lose it).
fn replace_passwords(client: &mut RawClient, message_id: i32, dn: &str, values: Vec<String>) {
    use ldap3_proto::proto::{LdapModify, LdapModifyRequest, LdapModifyType, LdapPartialAttribute};
    client.send(vec![LdapMsg {
        msgid: message_id,
        op: LdapOp::ModifyRequest(LdapModifyRequest {
            dn: dn.to_string(),
            changes: vec![LdapModify {
                operation: LdapModifyType::Replace,
                modification: LdapPartialAttribute {
                    atype: "userPassword".to_string(),
                    vals: values.into_iter().map(String::into_bytes).collect(),
                },
            }],
        }),
        ctrl: Vec::new(),
    }]);
    match client.receive().expect("a modify response").op {
        LdapOp::ModifyResponse(result) => assert_eq!(result.code, LdapResultCode::Success),
        other => panic!("expected a modify response, got {other:?}"),
    }
}

#[test]
fn a_bind_checks_only_the_first_planted_password_values() {
    let server = TestServer::start_populated(50, Vec::new(), |settings| {
        settings.bind_password_values_max = 4;
        settings.bind_failure_interval = Duration::ZERO;
    });
    let mut root = raw(&server);
    assert_eq!(
        root.bind(1, ROOT_DN, ROOT_PASSWORD),
        LdapResultCode::Success
    );
    // 20 values; the real password is the 3rd of person 1 and the 10th of person 2.
    let values = |real_at: usize| -> Vec<String> {
        (0..20)
            .map(|index| {
                if index == real_at {
                    "real-password".to_string()
                } else {
                    format!("planted-{index}")
                }
            })
            .collect()
    };
    replace_passwords(&mut root, 2, &person_dn(1), values(2));
    replace_passwords(&mut root, 3, &person_dn(2), values(9));
    let mut client = raw(&server);
    assert_eq!(
        client.bind(1, &person_dn(1), "real-password"),
        LdapResultCode::Success
    );
    // Past the bound a value is never checked: the bind fails like a wrong password.
    assert_eq!(
        client.bind(2, &person_dn(2), "real-password"),
        LdapResultCode::InvalidCredentials
    );
    assert_eq!(
        client.bind(3, &person_dn(2), "planted-19"),
        LdapResultCode::InvalidCredentials
    );
    assert_eq!(
        client.bind(4, &person_dn(2), "planted-1"),
        LdapResultCode::Success
    );
}

#[test]
fn a_client_that_stops_reading_is_closed_and_its_read_txns_released() {
    const RUNNING_MAX: usize = 2;
    let server = TestServer::start_populated(5000, Vec::new(), |settings| {
        settings.write_timeout = Duration::from_secs(1);
        settings.running_operations_per_connection_max = RUNNING_MAX;
        settings.size_limit = 0;
        settings.lookthrough_limit = 0;
    });
    let store = server
        .running()
        .context()
        .database
        .as_ref()
        .expect("database")
        .store()
        .clone();
    // 16 searches of every entry (about 1.5 MB each) and a tiny receive window: far more than
    // the socket buffers and the connection's queue hold, so the server's sender stalls.
    let mut stalled = raw_from(&server, [127, 0, 0, 1], 4096);
    stalled.send(
        (1..=16)
            .map(|id| search_request(id, LdapFilter::Present("objectClass".to_string())))
            .collect(),
    );
    // Others are served meanwhile.
    probe_search(&server);
    // Without a write timeout the stalled connection would hold its searches' read txns and
    // blocking threads forever (the idle timeout does not apply while operations run).
    // Meanwhile the 16 pipelined searches hold at most RUNNING_MAX read txns (and threads), plus
    // the one the connection task opens to estimate the next request before it gets a turn
    // (one at a time: the task prepares requests in order, and drops a large one's txn).
    let mut most_read_txns = 0;
    eventually("the stalled connection is closed", || {
        most_read_txns = most_read_txns.max(store.open_read_txns());
        server.running().context().active_connections() == 0
    });
    eventually("every read txn is released", || store.open_read_txns() == 0);
    eprintln!("the stalled connection held at most {most_read_txns} read txns");
    assert!(
        most_read_txns <= RUNNING_MAX + 1,
        "{most_read_txns} read txns"
    );
    let messages = stalled.until_closed();
    let done = messages
        .iter()
        .filter(|message| matches!(message.op, LdapOp::SearchResultDone(_)))
        .count();
    assert!(done < 16, "the stalled client's searches were cut short");
    probe_search(&server);
}

#[test]
fn starttls_without_a_handshake_is_closed() {
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.tls_handshake_timeout = Duration::from_secs(1);
    });
    let mut client = raw(&server);
    client.send(vec![LdapMsg {
        msgid: 1,
        op: LdapOp::ExtendedRequest(LdapExtendedRequest {
            name: "1.3.6.1.4.1.1466.20037".to_string(),
            value: None,
        }),
        ctrl: Vec::new(),
    }]);
    match client.receive().expect("a StartTLS response").op {
        LdapOp::ExtendedResponse(response) => {
            assert_eq!(response.res.code, LdapResultCode::Success)
        }
        other => panic!("expected the StartTLS response, got {other:?}"),
    }
    // Now silence: the server must give up on the handshake by itself.
    let mut byte = [0u8; 1];
    let closed = match client.stream.read(&mut byte) {
        Ok(0) => true,
        Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    };
    assert!(closed, "a client that never handshakes must be closed");
    probe_search(&server);
    eventually("the connection slot is freed", || {
        server.running().context().active_connections() == 0
    });
}

#[test]
fn connections_over_the_per_address_cap_are_answered_busy() {
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.connections_per_address_max = 3;
    });
    let mut held: Vec<RawClient> = (0..3).map(|_| raw(&server)).collect();
    // Each is admitted (answers a bind) before the next address test.
    for (index, client) in held.iter_mut().enumerate() {
        assert_eq!(
            client.bind(index as i32 + 1, "", ""),
            LdapResultCode::Success
        );
    }
    let mut over = raw(&server);
    let messages = over.until_closed();
    assert_eq!(notice_code(&messages), Some(LdapResultCode::Busy));
    // Another address is not affected.
    let mut elsewhere = raw_from(&server, [127, 0, 0, 2], 0);
    assert_eq!(elsewhere.bind(1, "", ""), LdapResultCode::Success);
    // A slot of this address frees when one of its connections ends.
    held.pop();
    eventually("a freed slot admits a new connection", || {
        let mut again = raw(&server);
        again.send(vec![bind_request(1, "", "")]);
        matches!(
            again.receive().map(|message| message.op),
            Some(LdapOp::BindResponse(_))
        )
    });
}

#[test]
fn failed_binds_past_the_burst_are_slowed_per_address() {
    const BURST: u32 = 3;
    const INTERVAL: Duration = Duration::from_millis(500);
    const FAILURES: u32 = 7;
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.bind_failure_burst = BURST;
        settings.bind_failure_interval = INTERVAL;
    });
    let mut guesser = raw(&server);
    let started = Instant::now();
    for attempt in 0..FAILURES {
        let code = guesser.bind(attempt as i32 + 1, &person_dn(1), "guess");
        assert_eq!(code, LdapResultCode::InvalidCredentials);
    }
    // Failures past the burst come at most one per interval, however fast the machine: a lower
    // bound only, which load can only make truer.
    let least = INTERVAL * (FAILURES - BURST);
    let elapsed = started.elapsed();
    assert!(
        elapsed >= least - Duration::from_millis(50),
        "{FAILURES} failed binds answered in {elapsed:?}, less than {least:?}"
    );
    // Right passwords still bind (after their wait), from this address and from another.
    assert_eq!(
        guesser.bind(100, &person_dn(1), PERSON_PASSWORD),
        LdapResultCode::Success
    );
    let mut other = raw_from(&server, [127, 0, 0, 3], 0);
    assert_eq!(
        other.bind(1, &person_dn(2), PERSON_PASSWORD),
        LdapResultCode::Success
    );
}

#[test]
fn large_requests_need_a_bind() {
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.anonymous_pdu_bytes_max = 64 * 1024;
        settings.pdu_bytes_max = 1024 * 1024;
    });
    let big_filter = || LdapFilter::Equality("description".to_string(), "x".repeat(200 * 1024));
    let mut anonymous = raw(&server);
    anonymous.send(vec![search_request(1, big_filter())]);
    // Closed unanswered (the notice may be lost to the reset of the unread request bytes).
    let messages = anonymous.until_closed();
    assert!(messages
        .iter()
        .all(|message| !matches!(message.op, LdapOp::SearchResultDone(_))));
    assert!(matches!(
        notice_code(&messages),
        None | Some(LdapResultCode::ProtocolError)
    ));

    let mut bound = raw(&server);
    assert_eq!(
        bound.bind(1, &person_dn(1), PERSON_PASSWORD),
        LdapResultCode::Success
    );
    bound.send(vec![search_request(2, big_filter())]);
    match bound.receive().expect("an answer").op {
        LdapOp::SearchResultDone(result) => assert_eq!(result.code, LdapResultCode::Success),
        other => panic!("expected the search to be answered, got {other:?}"),
    }
}

/// Log lines written by this test process (every test's server logs here).
fn captured_logs() -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    use std::sync::{Arc, Mutex, OnceLock};
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = logs.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Sink(sink.clone()))
            .try_init()
            .expect("the only subscriber of this test binary");
        logs
    })
    .clone()
}

#[test]
fn client_text_cannot_forge_log_lines() {
    let logs = captured_logs();
    let server = TestServer::start_populated(10, Vec::new(), |_| {});
    let forged = "\nconn=999999 op=1 RESULT tag=97 err=0 text=forged\"";
    let mut client = raw(&server);
    client.bind(1, &format!("cn=x{forged},dc=example,dc=com"), "guess");
    client.send(vec![
        LdapMsg {
            msgid: 2,
            op: LdapOp::DelRequest(format!("cn=y{forged},dc=example,dc=com")),
            ctrl: Vec::new(),
        },
        LdapMsg {
            msgid: 3,
            op: LdapOp::ExtendedRequest(LdapExtendedRequest {
                name: format!("1.2.3{forged}"),
                value: None,
            }),
            ctrl: Vec::new(),
        },
    ]);
    let answered: Vec<i32> = (0..2)
        .map(|_| client.receive().expect("an answer").msgid)
        .collect();
    assert_eq!(answered.len(), 2);
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(
        !text.lines().any(|line| line.starts_with("conn=999999")),
        "a client forged a log line:\n{text}"
    );
    // The text is there, escaped, inside its own line.
    for field in [
        "BIND dn=\"cn=x\\0aconn=999999",
        "DEL dn=\"cn=y\\0aconn=999999",
        "EXT oid=1.2.3\\0aconn=999999",
    ] {
        assert!(text.contains(field), "no {field} in:\n{text}");
    }
}

#[test]
fn a_rootpw_in_a_slow_scheme_is_checked_like_any_other() {
    let hashed =
        lmdir_access::password::hash(lmdir_access::password::Scheme::Pbkdf2Sha256, b"root-secret")
            .expect("hash");
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.rootpw = String::from_utf8(hashed).expect("a hash is text");
    });
    // Checked on the blocking pool (the scheme is slow by design); the answers are the same.
    let mut client = raw(&server);
    assert_eq!(
        client.bind(1, ROOT_DN, "root-secret"),
        LdapResultCode::Success
    );
    assert_eq!(
        client.bind(2, ROOT_DN, ROOT_PASSWORD),
        LdapResultCode::InvalidCredentials
    );
}
