//! Attacks on connections, binds and limits, over the wire against a populated server: planted
//! password values, a client that stops reading, a StartTLS that never handshakes, a host that
//! opens too many connections, a password-guessing loop, an anonymous client sending huge PDUs.
//! Each must cost the attacker, and never pin the server or hurt other clients. Assertions are
//! on states and counts; clocks only as hang guards and as lower bounds no load can break.

use crate::common;

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
        settings.bind_failure_address_interval = Duration::ZERO;
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
    // The test's clients are all on loopback: the loopback cap is the one they meet (which cap
    // an address gets is `client_limits`' unit test).
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.connections_per_address_max = 3;
        settings.connections_per_loopback_address_max = 3;
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

/// Whether a bind sent on a fresh connection from `source` is still unanswered after `within`
/// (a throttled bind waits the throttle's interval, here far longer).
fn bind_waits(server: &TestServer, source: [u8; 4], dn: &str, within: Duration) -> bool {
    let mut client = raw_from(server, source, 0);
    client
        .stream
        .set_read_timeout(Some(within))
        .expect("read timeout");
    client.send(vec![bind_request(1, dn, PERSON_PASSWORD)]);
    let mut chunk = [0u8; 1024];
    match client.stream.read(&mut chunk) {
        Err(error) => matches!(
            error.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        Ok(count) => {
            assert!(
                count > 0,
                "the server closed the connection instead of answering"
            );
            false
        }
    }
}

/// Issue 19 item 9: 20 wrong binds for one user through a shared client (a mail server) leave
/// the other users of that client unthrottled, while the guessed account stays throttled. The
/// account throttle's interval is 30 s, so "not throttled" is an answer within a third of that
/// and "throttled" is no answer within 3 s: bounds no machine's speed can break.
#[test]
fn one_users_failed_binds_do_not_slow_another_user_behind_the_same_client() {
    const FAILURES: u32 = 20;
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.bind_failure_burst = FAILURES;
        settings.bind_failure_interval = Duration::from_secs(30);
    });
    let mut mail_server = raw(&server);
    for attempt in 0..FAILURES {
        assert_eq!(
            mail_server.bind(attempt as i32 + 1, &person_dn(1), "typo"),
            LdapResultCode::InvalidCredentials
        );
    }
    // Another user through the same client binds without the throttle's wait.
    let mut other = raw(&server);
    other
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let started = Instant::now();
    assert_eq!(
        other.bind(1, &person_dn(2), PERSON_PASSWORD),
        LdapResultCode::Success
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // The guessed account is throttled, from this client, right password or not.
    assert!(bind_waits(
        &server,
        [127, 0, 0, 1],
        &person_dn(1),
        Duration::from_secs(3)
    ));
    // Its DN spelled another way is the same account.
    assert!(bind_waits(
        &server,
        [127, 0, 0, 1],
        &person_dn(1).to_uppercase(),
        Duration::from_secs(3)
    ));
}

/// The address keeps a budget over all DNs: guessing many accounts from one address is slowed
/// once it is spent (here 5 failures, then one per 30 s), other addresses are not.
#[test]
fn guessing_many_accounts_from_one_address_spends_its_budget() {
    let server = TestServer::start_populated(20, Vec::new(), |settings| {
        settings.bind_failure_burst = 100;
        settings.bind_failure_address_burst = 5;
        settings.bind_failure_address_interval = Duration::from_secs(30);
    });
    let mut sprayer = raw_from(&server, [127, 0, 0, 4], 0);
    for index in 0..5 {
        assert_eq!(
            sprayer.bind(index as i32 + 1, &person_dn(index), "guess"),
            LdapResultCode::InvalidCredentials
        );
    }
    assert!(bind_waits(
        &server,
        [127, 0, 0, 4],
        &person_dn(10),
        Duration::from_secs(3)
    ));
    let mut elsewhere = raw_from(&server, [127, 0, 0, 5], 0);
    assert_eq!(
        elsewhere.bind(1, &person_dn(10), PERSON_PASSWORD),
        LdapResultCode::Success
    );
}

/// The first message the server sends on an ldapi connection after an anonymous bind request.
fn ldapi_bind_answer(server: &TestServer) -> (std::os::unix::net::UnixStream, LdapOp) {
    use tokio_util::codec::{Decoder, Encoder};
    let mut stream =
        std::os::unix::net::UnixStream::connect(server.ldapi_path()).expect("ldapi connect");
    stream.set_read_timeout(Some(HANG_GUARD)).expect("timeout");
    let mut codec = ldap3_proto::LdapCodec::new(Some(1 << 20), None);
    let mut buffer = bytes::BytesMut::new();
    codec
        .encode(bind_request(1, "", ""), &mut buffer)
        .expect("encode");
    // A refused connection may be closed before the request is written: its notice is read.
    let _ = stream.write_all(&buffer);
    let mut received = bytes::BytesMut::new();
    loop {
        if let Some(message) = codec.decode(&mut received).expect("decode") {
            return (stream, message.op);
        }
        let mut chunk = [0u8; 4096];
        let count = stream.read(&mut chunk).expect("an answer");
        assert!(count > 0, "closed without an answer");
        received.extend_from_slice(&chunk[..count]);
    }
}

/// A local user over ldapi (the socket is 0777, as slapd's) was never counted per client, so
/// one shell account could hold all of `connections_max` and lock every client out; it now
/// meets the loopback cap.
#[test]
fn one_local_user_over_ldapi_meets_the_loopback_cap() {
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.connections_per_loopback_address_max = 3;
    });
    let mut held = Vec::new();
    for _ in 0..3 {
        let (stream, answer) = ldapi_bind_answer(&server);
        assert!(matches!(answer, LdapOp::BindResponse(_)), "{answer:?}");
        held.push(stream);
    }
    let (_over, answer) = ldapi_bind_answer(&server);
    match answer {
        LdapOp::ExtendedResponse(notice) => {
            assert_eq!(notice.res.code, LdapResultCode::Busy, "{notice:?}")
        }
        other => panic!("expected a busy notice, got {other:?}"),
    }
}

/// Issue 19 item 9: a local Postfix or PHP pool holds more than 64 connections from 127.0.0.1;
/// with the default config every one of them is served.
#[test]
fn a_local_pool_of_a_hundred_connections_is_served_by_default() {
    let server = TestServer::start_populated(10, Vec::new(), |_| {});
    let mut pool: Vec<RawClient> = (0..100).map(|_| raw(&server)).collect();
    for (index, client) in pool.iter_mut().enumerate() {
        assert_eq!(
            client.bind(1, "", ""),
            LdapResultCode::Success,
            "connection {index} from 127.0.0.1"
        );
    }
}

/// A provider (server ID 1) with the given persist limits (max, per identity, reserved).
fn provider(limits: Option<(u32, u32, u32)>, replica: Option<String>) -> TestServer {
    TestServer::start_populated(20, Vec::new(), |settings| {
        settings.replication.server_id = 1;
        settings.replication.provider = true;
        if let Some((max, per_identity, reserved)) = limits {
            settings.replication.persist_searches_max = max;
            settings.replication.persist_searches_per_identity_max = per_identity;
            settings.replication.persist_searches_reserved = reserved;
        }
        settings.replication.replica_dns = replica.into_iter().collect();
    })
}

/// A refreshAndPersist base search of `dn` asking for no attributes (`ldapsearch -E
/// '!sync=rp' -s base -b DN 1.1`): the server judges it small.
fn persist_search(message_id: i32, dn: &str) -> LdapMsg {
    LdapMsg {
        msgid: message_id,
        op: LdapOp::SearchRequest(LdapSearchRequest {
            base: dn.to_string(),
            scope: ldap3_proto::proto::LdapSearchScope::Base,
            aliases: ldap3_proto::proto::LdapDerefAliases::Never,
            sizelimit: 0,
            timelimit: 0,
            typesonly: false,
            filter: LdapFilter::Present("objectClass".to_string()),
            attrs: vec!["1.1".to_string()],
        }),
        ctrl: vec![ldap3_proto::control::LdapControl::SyncRequest {
            criticality: true,
            mode: ldap3_proto::proto::SyncRequestMode::RefreshAndPersist,
            cookie: None,
            reload_hint: false,
        }],
    }
}

/// How a persistent search of `message_id` started: None once its refresh is done and it
/// persists, else the result code it ended with.
fn persist_outcome(client: &mut RawClient, message_id: i32) -> Option<LdapResultCode> {
    loop {
        let message = client.receive().expect("an answer to the sync search");
        assert_eq!(message.msgid, message_id, "{message:?}");
        match message.op {
            LdapOp::SearchResultDone(result) => return Some(result.code),
            LdapOp::IntermediateResponse(_) => return None,
            _ => {}
        }
    }
}

fn whoami_request(message_id: i32) -> LdapMsg {
    LdapMsg {
        msgid: message_id,
        op: LdapOp::ExtendedRequest(LdapExtendedRequest {
            name: "1.3.6.1.4.1.4203.1.11.3".to_string(),
            value: None,
        }),
        ctrl: Vec::new(),
    }
}

/// Issue 19 item 3, the reproduction: 64 clients start a small refreshAndPersist search and go
/// away (`timeout 0.5 ldapsearch -E '!sync=rp' -s base ...`). Every connection closes and
/// frees its slot; the same address is served again and the rootdn starts a persist search.
#[test]
fn persistent_searches_of_vanished_clients_free_their_connections_and_slots() {
    let server = provider(None, None);
    for _ in 0..64 {
        let mut client = raw(&server);
        client.send(vec![persist_search(1, &person_dn(7))]);
        drop(client);
    }
    eventually("the vanished clients' connections close", || {
        server.running().context().active_connections() == 0
    });
    eventually("their persist slots are free", || {
        server.running().context().persist_searches_running() == 0
    });
    let mut again = raw(&server);
    again.send(vec![whoami_request(1)]);
    match again.receive().expect("a whoami answer").op {
        LdapOp::ExtendedResponse(response) => {
            assert_eq!(response.res.code, LdapResultCode::Success)
        }
        other => panic!("expected a whoami answer, got {other:?}"),
    }
    let mut admin = raw(&server);
    assert_eq!(
        admin.bind(1, ROOT_DN, ROOT_PASSWORD),
        LdapResultCode::Success
    );
    admin.send(vec![persist_search(2, &person_dn(7))]);
    assert_eq!(persist_outcome(&mut admin, 2), None, "the rootdn persists");
}

/// Abandon and Unbind sent on a connection whose small persistent search runs are read and
/// acted on: the search ends, its slot is freed, later requests are answered.
#[test]
fn abandon_and_unbind_reach_a_connection_running_a_small_persistent_search() {
    let server = provider(None, None);
    let mut client = raw(&server);
    client.send(vec![persist_search(1, &person_dn(3))]);
    assert_eq!(persist_outcome(&mut client, 1), None);
    assert_eq!(server.running().context().persist_searches_running(), 1);
    client.send(vec![
        LdapMsg {
            msgid: 2,
            op: LdapOp::AbandonRequest(1),
            ctrl: Vec::new(),
        },
        whoami_request(3),
    ]);
    let answer = client.receive().expect("the whoami after the abandon");
    assert_eq!(answer.msgid, 3, "{answer:?}");
    eventually("the abandoned search frees its slot", || {
        server.running().context().persist_searches_running() == 0
    });
    client.send(vec![persist_search(4, &person_dn(3))]);
    assert_eq!(persist_outcome(&mut client, 4), None);
    client.send(vec![LdapMsg {
        msgid: 5,
        op: LdapOp::UnbindRequest,
        ctrl: Vec::new(),
    }]);
    assert!(client.until_closed().is_empty(), "closed on unbind");
    eventually("the unbound connection's search frees its slot", || {
        server.running().context().persist_searches_running() == 0
    });
}

/// Persist slots per identity: anonymous (one identity however many clients) gets its share
/// (adminLimitExceeded beyond), ordinary users together leave the reserve (busy beyond), and
/// the rootdn and a configured replica still start theirs; a full server answers busy.
#[test]
fn persist_slots_are_shared_per_identity_with_a_reserve_for_the_rootdn_and_replicas() {
    let replica = person_dn(19);
    let server = provider(Some((8, 4, 2)), Some(replica.clone()));
    let base = person_dn(5);
    let start = |client: &mut RawClient, message_id: i32| {
        client.send(vec![persist_search(message_id, &base)]);
        persist_outcome(client, message_id)
    };
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut anonymous = raw(&server);
        assert_eq!(start(&mut anonymous, 1), None);
        assert_eq!(start(&mut anonymous, 2), None);
        held.push(anonymous);
    }
    let mut fifth = raw(&server);
    assert_eq!(
        start(&mut fifth, 1),
        Some(LdapResultCode::AdminLimitExceeded)
    );
    let mut user = raw(&server);
    assert_eq!(
        user.bind(1, &person_dn(1), PERSON_PASSWORD),
        LdapResultCode::Success
    );
    assert_eq!(start(&mut user, 2), None);
    assert_eq!(start(&mut user, 3), None);
    let mut other_user = raw(&server);
    assert_eq!(
        other_user.bind(1, &person_dn(2), PERSON_PASSWORD),
        LdapResultCode::Success
    );
    assert_eq!(start(&mut other_user, 2), Some(LdapResultCode::Busy));
    let mut admin = raw(&server);
    assert_eq!(
        admin.bind(1, ROOT_DN, ROOT_PASSWORD),
        LdapResultCode::Success
    );
    assert_eq!(
        start(&mut admin, 2),
        None,
        "the rootdn takes a reserved slot"
    );
    let mut replication = raw(&server);
    assert_eq!(
        replication.bind(1, &replica, PERSON_PASSWORD),
        LdapResultCode::Success
    );
    assert_eq!(
        start(&mut replication, 2),
        None,
        "the replica takes the other"
    );
    assert_eq!(
        start(&mut admin, 3),
        Some(LdapResultCode::Busy),
        "all 8 are taken"
    );
    assert_eq!(server.running().context().persist_searches_running(), 8);
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

#[test]
fn client_text_cannot_forge_log_lines() {
    let logs = crate::captured_logs();
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

/// A proxied operation's log lines name the identity it ran as; a PROXYAUTHZ line says whom
/// the connection's own identity acted as (as slapd's), so the log tells who did it.
#[test]
fn a_proxied_operation_logs_whom_it_acts_as() {
    let logs = crate::captured_logs();
    let server = TestServer::start_populated(3, Vec::new(), |_| {});
    let mut root = common::root(&server);
    let target = person_dn(2);
    let proxied = root
        .with_controls(ldap3::controls::ProxyAuth {
            authzid: format!("dn:{target}"),
        })
        .search(&target, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search sent");
    assert_eq!(proxied.1.rc, 0, "{proxied:?}");
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    let line = format!("PROXYAUTHZ dn=\"{target}\"");
    assert!(text.contains(&line), "no {line} in:\n{text}");
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

/// An anonymous search whose filter costs the server a while per entry (5,000 distinct items on
/// an unindexed attribute) and holds ~205 KB on the wire (one item carries a 100 KB value).
fn slow_large_search(message_id: i32) -> LdapMsg {
    let mut items: Vec<LdapFilter> = (0..5000)
        .map(|index| LdapFilter::Equality("description".to_string(), format!("v{index}")))
        .collect();
    items.push(LdapFilter::Equality(
        "description".to_string(),
        "x".repeat(100_000),
    ));
    search_request(message_id, LdapFilter::Or(items))
}

#[test]
fn pipelined_requests_past_the_connections_bytes_are_answered_busy() {
    let server = TestServer::start_populated(500, Vec::new(), |settings| {
        settings.lookthrough_limit = 0;
        settings.running_operations_per_connection_max = 1;
    });
    // Anonymous: requests of up to 256 KiB, 1 MiB of them outstanding. Before, 128
    // such operations were taken and held decoded, several times their wire size each.
    const SENT: i32 = 24;
    let mut client = raw(&server);
    client.send((1..=SENT).map(slow_large_search).collect());
    let (mut busy, mut done) = (0, 0);
    while busy + done < SENT {
        if let LdapOp::SearchResultDone(result) = client.receive().expect("an answer").op {
            if result.code == LdapResultCode::Busy {
                assert!(result.message.contains("bytes"), "{}", result.message);
                busy += 1;
            } else {
                assert_eq!(result.code, LdapResultCode::Success, "{}", result.message);
                done += 1;
            }
        }
    }
    // Each search takes far longer than reading all 24 requests: five are taken, the rest
    // refused as they arrive (more are taken only once one ends).
    assert!(busy >= SENT / 2, "{busy} busy, {done} answered");
    assert!((4..SENT).contains(&done), "{busy} busy, {done} answered");
    // The connection is still served.
    client.send(vec![search_request(
        100,
        LdapFilter::Equality("uid".to_string(), "nobody".to_string()),
    )]);
    loop {
        if let LdapOp::SearchResultDone(result) = client.receive().expect("an answer").op {
            assert_eq!(result.code, LdapResultCode::Success);
            break;
        }
    }
}

/// `lmdir_password_checks_total`, scraped from the metrics listener: a bind counts when its
/// password check begins, before it waits at the verify gate.
fn password_checks(server: &TestServer) -> usize {
    let address = server.running().context().metrics_address();
    let mut stream = TcpStream::connect(address.expect("metrics listener")).expect("connect");
    stream.set_read_timeout(Some(HANG_GUARD)).expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let series = "lmdir_password_checks_total ";
    response
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series}in\n{response}"))
}

/// Whether `client`'s bind has been answered (without waiting for it).
fn answered_now(client: &RawClient) -> bool {
    client.stream.set_nonblocking(true).expect("nonblocking");
    let answered = client
        .stream
        .peek(&mut [0u8; 1])
        .is_ok_and(|count| count > 0);
    client.stream.set_nonblocking(false).expect("blocking");
    answered
}

/// `mkpasswd -m scrypt secret` (libxcrypt's default: N = 2^14, r = 32, p = 1: 64 MiB, a
/// tenth of a second or so per check).
const SCRYPT_SECRET: &str =
    "{CRYPT}$7$CU..../....TAlTQpwtZxLkJrQgbfT/C1$89mRo3L5bBO9mKQvRcBlfEMJv/ZT5nIBaM.QA2RcBkD";

/// The verify gate served slow password checks first come, first served: one address binding
/// over and over to an account with a slow hash (its own, or missing DNs, which check a decoy)
/// kept all of its binds ahead of any other client's. Each client now has at most one check per
/// core at the gate: another address's bind is answered while most of the busy address's still
/// wait (before: after all of them). Counted, never timed; each check takes long enough that a
/// stalled test thread does not blur the count.
#[test]
fn one_address_binding_in_a_loop_does_not_queue_every_other_clients_bind() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let busy_binds = 12 * cores;
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    });
    let mut root = connect(&server);
    root.simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind sent")
        .success()
        .expect("rootdn");
    root.modify(
        &person_dn(0),
        vec![ldap3::Mod::Replace(
            "userPassword",
            std::collections::HashSet::from([SCRYPT_SECRET]),
        )],
    )
    .expect("modify sent")
    .success()
    .expect("the scrypt hash is stored as given");
    let password = PERSON_PASSWORD;
    let before = password_checks(&server);
    let mut busy: Vec<RawClient> = (0..busy_binds)
        .map(|_| raw_from(&server, [127, 0, 0, 6], 0))
        .collect();
    for client in &mut busy {
        client.send(vec![bind_request(1, &person_dn(0), password)]);
    }
    eventually("every busy bind's check begun", || {
        password_checks(&server) >= before + busy_binds
    });
    let mut other = raw_from(&server, [127, 0, 0, 7], 0);
    assert_eq!(
        other.bind(1, &person_dn(0), password),
        LdapResultCode::Success
    );
    let answered_first = busy.iter().filter(|client| answered_now(client)).count();
    assert!(
        answered_first <= busy_binds / 2,
        "{answered_first} of the busy address's {busy_binds} binds were answered before \
         another address's one"
    );
    for client in &mut busy {
        match client.receive().expect("a bind response").op {
            LdapOp::BindResponse(response) => {
                assert_eq!(response.res.code, LdapResultCode::Success)
            }
            other => panic!("expected a bind response, got {other:?}"),
        }
    }
}

/// A persistent search whose client stops reading ends with e-syncRefreshRequired (4096) once
/// more than `PERSIST_QUEUE_BYTES_MAX` (32 MiB) of changes wait for it, even while its sender
/// waits for the client (the write timeout is an hour here: it does not end it), so the
/// broadcast no longer keeps changes for it; others are served meanwhile. 10,000 modifies
/// whose before-images hold about 7 KiB each: about 68 MiB of changes, of which the socket
/// buffers and the connection's queue absorb well under half.
#[test]
fn a_persistent_search_whose_client_stops_reading_ends_past_its_queue_bound() {
    use ldap3::Mod;
    use ldap3_proto::control::LdapControl;
    use ldap3_proto::proto::SyncRequestMode;
    use std::collections::HashSet;
    let server = TestServer::start_populated(20, Vec::new(), |settings| {
        settings.write_timeout = Duration::from_secs(3600);
        settings.replication.server_id = 1;
        settings.replication.provider = true;
    });
    let mut stalled = raw_from(&server, [127, 0, 0, 1], 4096);
    assert_eq!(
        stalled.bind(1, ROOT_DN, ROOT_PASSWORD),
        LdapResultCode::Success
    );
    let mut request = search_request(2, LdapFilter::Present("objectClass".to_string()));
    request.ctrl = vec![LdapControl::SyncRequest {
        criticality: true,
        mode: SyncRequestMode::RefreshAndPersist,
        cookie: None,
        reload_hint: false,
    }];
    stalled.send(vec![request]);
    while !matches!(
        stalled.receive().expect("the refresh").op,
        LdapOp::IntermediateResponse(_)
    ) {}
    // It reads nothing more now.
    let mut admin = LdapConn::new(&server.ldap_url()).expect("connect");
    admin
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind answered")
        .success()
        .expect("bound");
    let filler = "x".repeat(3000);
    for round in 0..10_000 {
        let value = format!("{round} {filler}");
        admin
            .modify(
                &person_dn(1),
                vec![Mod::Replace("description", HashSet::from([value.as_str()]))],
            )
            .expect("modify answered")
            .success()
            .expect("the writes are served");
    }
    probe_search(&server);
    // Reading again: what was queued, then the end.
    let code = loop {
        match stalled
            .receive()
            .expect("the search's end before a close")
            .op
        {
            LdapOp::SearchResultDone(done) => break done.code,
            _ => continue,
        }
    };
    assert_eq!(code, LdapResultCode::EsyncRefreshRequired);
    assert_eq!(server.running().context().persist_searches_running(), 0);
}
