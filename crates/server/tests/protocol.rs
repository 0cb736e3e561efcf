//! Protocol-level behaviour against a real server over TCP, TLS and ldapi: root DSE, binds,
//! extended operations, controls, limits, malformed PDUs, shutdown.

use crate::common;

use common::{ldap_tool, text, TestServer, ROOT_DN, ROOT_PASSWORD};
use ldap3::controls::RawControl;
use ldap3::exop::{WhoAmI, WhoAmIResp};
use ldap3::{LdapConn, LdapConnSettings, Scope, SearchEntry};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn connect(server: &TestServer) -> LdapConn {
    LdapConn::new(&server.ldap_url()).expect("connect")
}

fn root_dse(connection: &mut LdapConn, attributes: &[&str]) -> SearchEntry {
    let (entries, _) = connection
        .search("", Scope::Base, "(objectClass=*)", attributes.to_vec())
        .expect("search")
        .success()
        .expect("root DSE search succeeds");
    assert_eq!(entries.len(), 1);
    SearchEntry::construct(entries.into_iter().next().expect("one entry"))
}

fn whoami(connection: &mut LdapConn) -> String {
    let (exop, _) = connection
        .extended(WhoAmI)
        .expect("whoami")
        .success()
        .expect("whoami succeeds");
    exop.parse::<WhoAmIResp>().authzid
}

/// Reads everything the server sends until it closes (or 5 s pass).
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => received.extend_from_slice(&chunk[..count]),
            Err(error) => panic!("server did not close the connection: {error}"),
        }
    }
    received
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn root_dse_lists_operational_attributes_only_on_request() {
    let server = TestServer::start(|_| {});
    let mut connection = connect(&server);
    let plain = root_dse(&mut connection, &[]);
    assert!(plain.attrs.contains_key("objectClass"));
    assert!(!plain.attrs.contains_key("supportedLDAPVersion"));

    let all = root_dse(&mut connection, &["+"]);
    assert_eq!(all.attrs["supportedLDAPVersion"], vec!["3"]);
    assert_eq!(all.attrs["subschemaSubentry"], vec!["cn=Subschema"]);
    assert_eq!(all.attrs["supportedSASLMechanisms"], vec!["EXTERNAL"]);
    let extensions = &all.attrs["supportedExtension"];
    assert!(extensions.contains(&"1.3.6.1.4.1.4203.1.11.3".to_string()));
    assert!(extensions.contains(&"1.3.6.1.4.1.1466.20037".to_string()));
    assert!(all.attrs["supportedControl"].contains(&"1.2.840.113556.1.4.319".to_string()));
    assert!(all.attrs["supportedFeatures"].contains(&"1.3.6.1.4.1.4203.1.5.1".to_string()));
    assert_eq!(all.attrs["vendorName"], vec!["lmdir"]);

    let named = root_dse(&mut connection, &["vendorName"]);
    assert_eq!(named.attrs.len(), 1);
    assert!(named.attrs.contains_key("vendorName"));
}

/// The root DSE is matched by the evaluator of stored entries, with the schema's matching
/// rules (as slapd): vendorName is caseExactMatch, and supportedControl has no equality rule
/// (RFC 4512), so an equality assertion on it is Undefined.
#[test]
fn root_dse_filters_use_the_schema_matching_rules() {
    let server = TestServer::start(|_| {});
    let mut connection = connect(&server);
    let mut count = |filter: &str| {
        let (entries, _) = connection
            .search("", Scope::Base, filter, vec!["1.1"])
            .expect("search")
            .success()
            .expect("root DSE search succeeds");
        entries.len()
    };
    assert_eq!(count("(vendorName=lmdir)"), 1);
    assert_eq!(count("(vendorName=LMDIR)"), 0);
    assert_eq!(count("(|(objectClass=top)(vendorName=nobody))"), 1);
    assert_eq!(count("(!(vendorName=lmdir))"), 0);
    assert_eq!(count("(&(objectClass=*)(vendorName=nobody))"), 0);
    assert_eq!(count("(supportedControl=1.2.840.113556.1.4.319)"), 0);
    assert_eq!(count("(!(supportedControl=1.2.840.113556.1.4.319))"), 0);
}

#[test]
fn simple_binds_follow_rfc_4513() {
    let server = TestServer::start(|_| {});
    let mut connection = connect(&server);
    assert_eq!(whoami(&mut connection), "");

    let wrong = connection.simple_bind(ROOT_DN, "wrong").expect("bind");
    assert_eq!(wrong.rc, 49, "wrong password → invalidCredentials");
    let unknown = connection
        .simple_bind("cn=nobody,dc=example,dc=com", "x")
        .expect("bind");
    assert_eq!(unknown.rc, 49, "unknown DN → invalidCredentials");
    let unauthenticated = connection.simple_bind(ROOT_DN, "").expect("bind");
    assert_eq!(
        unauthenticated.rc, 53,
        "DN without password is refused, never a login"
    );
    assert_eq!(
        whoami(&mut connection),
        "",
        "failed binds leave the connection anonymous"
    );

    connection
        .simple_bind("CN=Admin, DC=Example, DC=Com", ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("rootdn bind with other case and spaces");
    assert_eq!(whoami(&mut connection), "dn:CN=Admin, DC=Example, DC=Com");

    connection
        .simple_bind("", "")
        .expect("bind")
        .success()
        .expect("anonymous bind");
    assert_eq!(whoami(&mut connection), "");
}

#[test]
fn require_tls_refuses_clear_binds_but_allows_them_after_starttls() {
    let server = TestServer::start(|settings| settings.require_tls = true);
    let mut clear = connect(&server);
    let refused = clear.simple_bind(ROOT_DN, ROOT_PASSWORD).expect("bind");
    assert_eq!(refused.rc, 13, "confidentialityRequired");

    let settings = LdapConnSettings::new()
        .set_starttls(true)
        .set_no_tls_verify(true);
    let mut secured = LdapConn::with_settings(settings, &server.ldap_url()).expect("StartTLS");
    secured
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("bind after StartTLS");
    assert_eq!(whoami(&mut secured), format!("dn:{ROOT_DN}"));
}

/// `require_tls_for_reads` (slapd's `security ssf=`): before TLS every operation but StartTLS
/// answers confidentialityRequired, searches of the root DSE and compares included; after
/// StartTLS the same requests run.
#[test]
fn require_tls_for_reads_refuses_clear_searches_until_starttls() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.require_tls = true;
        settings.require_tls_for_reads = true;
    });
    let mut clear = connect(&server);
    let search = |connection: &mut LdapConn, base: &str| {
        let result = connection
            .search(base, Scope::Base, "(objectClass=*)", vec!["1.1"])
            .expect("search sent");
        (result.1.rc, result.0.len())
    };
    assert_eq!(search(&mut clear, "dc=example,dc=com"), (13, 0));
    assert_eq!(search(&mut clear, ""), (13, 0));
    let compared = clear
        .compare("dc=example,dc=com", "dc", "example")
        .expect("compare sent");
    assert_eq!(compared.0.rc, 13);
    let settings = LdapConnSettings::new()
        .set_starttls(true)
        .set_no_tls_verify(true);
    let mut secured = LdapConn::with_settings(settings, &server.ldap_url()).expect("StartTLS");
    assert_eq!(search(&mut secured, "dc=example,dc=com"), (0, 1));
    assert_eq!(search(&mut secured, ""), (0, 1));
}

#[test]
fn ldaps_serves_the_same_protocol() {
    let server = TestServer::start(|_| {});
    let settings = LdapConnSettings::new().set_no_tls_verify(true);
    let mut connection = LdapConn::with_settings(settings, &server.ldaps_url()).expect("ldaps");
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("bind over ldaps");
    let entry = root_dse(&mut connection, &["+"]);
    assert_eq!(entry.attrs["supportedLDAPVersion"], vec!["3"]);
}

#[test]
fn unknown_critical_control_is_refused_and_non_critical_ignored() {
    let server = TestServer::start(|_| {});
    let mut connection = connect(&server);
    let critical = RawControl {
        ctype: "1.2.3.4.5.6".to_string(),
        crit: true,
        val: None,
    };
    let result = connection
        .with_controls(vec![critical])
        .search("", Scope::Base, "(objectClass=*)", vec!["+"])
        .expect("search");
    assert_eq!(result.1.rc, 12, "unavailableCriticalExtension");
    assert!(result.0.is_empty());

    let ignored = RawControl {
        ctype: "1.2.3.4.5.6".to_string(),
        crit: false,
        val: None,
    };
    let result = connection
        .with_controls(vec![ignored])
        .search("", Scope::Base, "(objectClass=*)", vec!["+"])
        .expect("search");
    assert_eq!(result.1.rc, 0);
    assert_eq!(result.0.len(), 1);
}

#[test]
fn too_deep_filter_is_refused_with_admin_limit_exceeded() {
    let server = TestServer::start(|settings| settings.filter_depth_max = 3);
    let mut connection = connect(&server);
    let shallow = connection
        .search(
            "",
            Scope::Base,
            "(&(objectClass=*)(!(vendorName=x)))",
            vec!["1.1"],
        )
        .expect("search");
    assert_eq!(shallow.1.rc, 0);
    let deep = connection
        .search(
            "",
            Scope::Base,
            "(&(objectClass=*)(!(|(vendorName=x)(cn=y))))",
            vec!["1.1"],
        )
        .expect("search");
    assert_eq!(deep.1.rc, 11);
}

#[test]
fn entries_outside_every_naming_context_are_no_such_object() {
    let server = TestServer::start(|_| {});
    let mut connection = connect(&server);
    let result = connection
        .search(
            "dc=example,dc=com",
            Scope::Subtree,
            "(objectClass=*)",
            vec!["*"],
        )
        .expect("search");
    assert_eq!(result.1.rc, 32);
    let compare = connection
        .compare("dc=example,dc=com", "dc", "example")
        .expect("compare");
    assert_eq!(compare.0.rc, 32);
}

#[test]
fn unknown_extended_operation_is_a_protocol_error() {
    let server = TestServer::start(|_| {});
    let mut connection = connect(&server);
    let result = connection
        .extended(ldap3::exop::Exop {
            name: Some("1.2.3.4.99".to_string()),
            val: None,
        })
        .expect("extended");
    assert_eq!(result.1.rc, 2);
}

#[test]
fn garbage_closes_only_that_connection() {
    let server = TestServer::start(|_| {});
    let mut healthy = connect(&server);
    healthy
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("bind");

    // Not BER at all.
    let mut garbage = TcpStream::connect(server.ldap_address()).expect("connect");
    garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("write");
    let received = read_until_closed(&mut garbage);
    assert!(
        contains(&received, b"1.3.6.1.4.1.1466.20036"),
        "a Notice of Disconnection precedes the close"
    );

    // A huge announced length: refused at once, without waiting for the body.
    let mut huge = TcpStream::connect(server.ldap_address()).expect("connect");
    huge.write_all(&[0x30, 0x84, 0x7f, 0xff, 0xff, 0xff, 0x02, 0x01])
        .expect("write");
    let received = read_until_closed(&mut huge);
    assert!(contains(&received, b"1.3.6.1.4.1.1466.20036"));

    // A truncated PDU followed by end of stream.
    let mut truncated = TcpStream::connect(server.ldap_address()).expect("connect");
    truncated
        .write_all(&[0x30, 0x0c, 0x02, 0x01, 0x01, 0x60])
        .expect("write");
    truncated
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown write");
    read_until_closed(&mut truncated);

    // Well-framed but an invalid LDAPMessage inside.
    let mut invalid = TcpStream::connect(server.ldap_address()).expect("connect");
    invalid
        .write_all(&[0x30, 0x06, 0x02, 0x01, 0x01, 0x04, 0x01, 0x00])
        .expect("write");
    let received = read_until_closed(&mut invalid);
    assert!(contains(&received, b"1.3.6.1.4.1.1466.20036"));

    assert_eq!(whoami(&mut healthy), format!("dn:{ROOT_DN}"));
}

#[test]
fn oversize_pdu_closes_the_connection() {
    let server = TestServer::start(|settings| settings.pdu_bytes_max = 512);
    let mut connection = connect(&server);
    let long_filter = format!("(vendorName={})", "x".repeat(2000));
    let result = connection.search("", Scope::Base, &long_filter, vec!["1.1"]);
    assert!(
        result.is_err(),
        "the server drops the connection: {result:?}"
    );
    let mut fresh = connect(&server);
    assert_eq!(whoami(&mut fresh), "");
}

#[test]
fn connections_over_the_limit_get_a_notice() {
    let server = TestServer::start(|settings| settings.connections_max = 2);
    let mut first = connect(&server);
    let mut second = connect(&server);
    assert_eq!(whoami(&mut first), "");
    assert_eq!(whoami(&mut second), "");
    let mut third = TcpStream::connect(server.ldap_address()).expect("connect");
    let received = read_until_closed(&mut third);
    assert!(contains(&received, b"too many connections"));
    drop(first);
    // The slot frees once the server sees the close; poll briefly.
    let mut admitted = false;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(20));
        if let Ok(mut connection) = LdapConn::new(&server.ldap_url()) {
            if connection
                .extended(WhoAmI)
                .map(|result| result.1.rc == 0)
                .unwrap_or(false)
            {
                admitted = true;
                break;
            }
        }
    }
    assert!(admitted, "a slot is available again after a client leaves");
}

#[test]
fn idle_connections_are_closed_with_a_notice() {
    let server = TestServer::start(|settings| settings.idle_timeout = Duration::from_millis(300));
    let mut idle = TcpStream::connect(server.ldap_address()).expect("connect");
    let received = read_until_closed(&mut idle);
    assert!(contains(&received, b"1.3.6.1.4.1.1466.20036"));
    assert!(contains(&received, b"idle"));
}

/// The idle timer is one per connection, re-armed when it fires after activity: a client
/// active more often than the timeout stays connected through several timeouts, and is closed
/// once it stops.
#[test]
fn active_connections_outlive_the_idle_timeout_and_idle_ones_do_not() {
    let server = TestServer::start(|settings| settings.idle_timeout = Duration::from_millis(600));
    let mut connection = connect(&server);
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(2_400) {
        assert_eq!(whoami(&mut connection), "", "still connected while active");
        std::thread::sleep(Duration::from_millis(150));
    }
    std::thread::sleep(Duration::from_millis(2_000));
    assert!(
        connection.extended(WhoAmI).is_err(),
        "closed after a whole timeout without activity"
    );
}

#[test]
fn shutdown_sends_a_notice_to_connected_clients() {
    let mut server = TestServer::start(|_| {});
    let address = server.ldap_address();
    let mut client = TcpStream::connect(address).expect("connect");
    // Make sure the connection is accepted before shutting down: a root DSE search round trip.
    let mut connection = connect(&server);
    assert_eq!(whoami(&mut connection), "");
    std::thread::sleep(Duration::from_millis(50));
    server.shutdown();
    let received = read_until_closed(&mut client);
    assert!(contains(&received, b"shutting down"));
    assert!(
        TcpStream::connect(address).is_err(),
        "no longer accepting after shutdown"
    );
}

#[test]
fn sasl_external_over_ldapi_maps_the_peer_uid() {
    let server = TestServer::start(|_| {});
    let mut connection = LdapConn::new(&server.ldapi_url()).expect("ldapi connect");
    connection
        .sasl_external_bind()
        .expect("bind")
        .success()
        .expect("EXTERNAL bind");
    let identity = whoami(&mut connection);
    let uid = common::own_uid();
    if uid == "0" {
        assert_eq!(identity, format!("dn:{ROOT_DN}"));
    } else {
        assert!(identity.contains(&format!("uidNumber={uid}")), "{identity}");
    }
    let mut tcp = connect(&server);
    let refused = tcp.sasl_external_bind().expect("bind");
    assert_eq!(refused.rc, 48, "EXTERNAL needs ldapi");
}

/// Without a rootdn, local root over ldapi is the peercred identity, as slapd has it, with what
/// the rules grant that DN. Before, it became an empty-DN "rootdn": every access check bypassed
/// (it could replace any password), yet anonymous to Who am I? and the accesslog.
#[test]
fn without_a_rootdn_local_root_is_its_peercred_identity() {
    let uid = common::own_uid();
    let server = TestServer::start_populated(3, Vec::new(), |settings| {
        settings.rootdn = String::new();
        settings.rootpw = String::new();
    });
    let mut connection = LdapConn::new(&server.ldapi_url()).expect("ldapi connect");
    connection
        .sasl_external_bind()
        .expect("bind")
        .success()
        .expect("EXTERNAL bind");
    let identity = whoami(&mut connection);
    let expected = format!("+uidnumber={uid},cn=peercred,cn=external,cn=auth");
    assert!(identity.to_lowercase().ends_with(&expected), "{identity}");
    let changed = connection
        .modify(
            &common::person_dn(1),
            vec![ldap3::Mod::Replace("userPassword", ["taken"].into())],
        )
        .expect("modify sent");
    assert_eq!(changed.rc, 50, "{changed:?}");
}

#[test]
fn ldap_utils_root_dse_whoami_and_tls() {
    let server = TestServer::start(|_| {});
    let url = server.ldap_url();
    let Some(output) = ldap_tool(
        "ldapsearch",
        &["-x", "-H", &url, "-b", "", "-s", "base", "-LLL", "+"],
    ) else {
        return;
    };
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("supportedLDAPVersion: 3"), "{stdout}");
    assert!(stdout.contains("vendorName: lmdir"), "{stdout}");

    let output = ldap_tool(
        "ldapwhoami",
        &["-x", "-H", &url, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
    )
    .expect("ldapwhoami present with ldapsearch");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), format!("dn:{ROOT_DN}"));

    let output = ldap_tool(
        "ldapwhoami",
        &["-x", "-H", &url, "-D", ROOT_DN, "-w", "bad"],
    )
    .expect("ldapwhoami");
    assert_eq!(output.status.code(), Some(49), "{}", text(&output.stderr));

    // StartTLS required (-ZZ) with a self-signed certificate.
    let output = ldap_tool(
        "ldapwhoami",
        &["-x", "-ZZ", "-H", &url, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
    )
    .expect("ldapwhoami");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), format!("dn:{ROOT_DN}"));

    let ldaps = server.ldaps_url();
    let output = ldap_tool(
        "ldapsearch",
        &[
            "-x",
            "-H",
            &ldaps,
            "-b",
            "",
            "-s",
            "base",
            "-LLL",
            "vendorName",
        ],
    )
    .expect("ldapsearch");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("vendorName: lmdir"));

    let ldapi = server.ldapi_url();
    let output =
        ldap_tool("ldapwhoami", &["-Y", "EXTERNAL", "-H", &ldapi, "-Q"]).expect("ldapwhoami");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("dn:"));
}

/// Sends LDAP messages over a raw socket and reads decoded responses: for exchanges the client
/// crates cannot express (pipelined requests, hand-made extended request values).
struct RawClient {
    stream: TcpStream,
    codec: ldap3_proto::LdapCodec,
    received: bytes::BytesMut,
}

impl RawClient {
    fn connect(server: &TestServer) -> RawClient {
        let stream = TcpStream::connect(server.ldap_address()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        RawClient {
            stream,
            codec: ldap3_proto::LdapCodec::default(),
            received: bytes::BytesMut::new(),
        }
    }

    /// Writes all `messages` in one write, so the server reads them back to back.
    fn send(&mut self, messages: Vec<ldap3_proto::LdapMsg>) {
        use tokio_util::codec::Encoder;
        let mut buffer = bytes::BytesMut::new();
        for message in messages {
            self.codec.encode(message, &mut buffer).expect("encode");
        }
        self.stream.write_all(&buffer).expect("write");
    }

    fn receive(&mut self) -> ldap3_proto::LdapMsg {
        use tokio_util::codec::Decoder;
        loop {
            if let Some(message) = self.codec.decode(&mut self.received).expect("decode") {
                return message;
            }
            let mut chunk = [0u8; 16 * 1024];
            let count = self.stream.read(&mut chunk).expect("read");
            assert!(count > 0, "server closed the connection");
            self.received.extend_from_slice(&chunk[..count]);
        }
    }
}

/// The suffix and 300 entries below it: enough that a search is usually still running when a
/// request sent right behind it is read.
fn populate_for_raw_tests(root: &mut LdapConn) {
    root.simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("root bind");
    let add = |connection: &mut LdapConn, dn: &str, attributes: Vec<(&str, Vec<&str>)>| {
        let attributes = attributes
            .into_iter()
            .map(|(name, values)| (name, values.into_iter().collect()))
            .collect();
        connection
            .add(dn, attributes)
            .expect("add")
            .success()
            .expect("added");
    };
    add(
        root,
        "dc=example,dc=com",
        vec![
            ("objectClass", vec!["dcObject", "organization"]),
            ("dc", vec!["example"]),
            ("o", vec!["Example"]),
        ],
    );
    for index in 0..300 {
        let uid = format!("c{index:03}");
        add(
            root,
            &format!("uid={uid},dc=example,dc=com"),
            vec![("objectClass", vec!["account"]), ("uid", vec![&uid])],
        );
    }
}

/// A subtree search of every entry.
fn subtree_search(message_id: i32) -> ldap3_proto::LdapMsg {
    use ldap3_proto::proto::{
        LdapDerefAliases, LdapFilter, LdapOp, LdapSearchRequest, LdapSearchScope,
    };
    ldap3_proto::LdapMsg {
        msgid: message_id,
        op: LdapOp::SearchRequest(LdapSearchRequest {
            base: "dc=example,dc=com".to_string(),
            scope: LdapSearchScope::Subtree,
            aliases: LdapDerefAliases::Never,
            sizelimit: 0,
            timelimit: 0,
            typesonly: false,
            filter: LdapFilter::Present("objectClass".to_string()),
            attrs: Vec::new(),
        }),
        ctrl: Vec::new(),
    }
}

fn whoami_request(message_id: i32) -> ldap3_proto::LdapMsg {
    ldap3_proto::LdapMsg {
        msgid: message_id,
        op: ldap3_proto::proto::LdapOp::ExtendedRequest(ldap3_proto::proto::LdapExtendedRequest {
            name: "1.3.6.1.4.1.4203.1.11.3".to_string(),
            value: None,
        }),
        ctrl: Vec::new(),
    }
}

fn cancel_request(message_id: i32, value: Option<Vec<u8>>) -> ldap3_proto::LdapMsg {
    ldap3_proto::LdapMsg {
        msgid: message_id,
        op: ldap3_proto::proto::LdapOp::ExtendedRequest(ldap3_proto::proto::LdapExtendedRequest {
            name: "1.3.6.1.1.8".to_string(),
            value,
        }),
        ctrl: Vec::new(),
    }
}

/// `SEQUENCE { cancelID INTEGER }` for small IDs.
fn cancel_value(target: u8) -> Vec<u8> {
    assert!(target < 0x80);
    vec![0x30, 0x03, 0x02, 0x01, target]
}

fn extended_result_code(message: &ldap3_proto::LdapMsg) -> ldap3_proto::LdapResultCode {
    match &message.op {
        ldap3_proto::proto::LdapOp::ExtendedResponse(response) => response.res.code.clone(),
        other => panic!("expected an extended response, got {other:?}"),
    }
}

#[test]
fn cancel_answers_after_its_target_and_refuses_unknown_targets() {
    use ldap3_proto::proto::LdapOp;
    use ldap3_proto::LdapResultCode;
    let server = TestServer::start_with_database(|_| {});
    let mut root = connect(&server);
    let supported = root_dse(&mut root, &["supportedExtension"]);
    assert!(supported.attrs["supportedExtension"].contains(&"1.3.6.1.1.8".to_string()));

    populate_for_raw_tests(&mut root);

    let mut client = RawClient::connect(&server);
    // Nothing outstanding under that ID.
    client.send(vec![cancel_request(1, Some(cancel_value(77)))]);
    let answer = client.receive();
    assert_eq!(answer.msgid, 1);
    assert_eq!(
        extended_result_code(&answer),
        LdapResultCode::NoSuchOperation
    );
    // A value that is not SEQUENCE { INTEGER }.
    client.send(vec![cancel_request(2, Some(vec![0x04, 0x01, 0x05]))]);
    assert_eq!(
        extended_result_code(&client.receive()),
        LdapResultCode::ProtocolError
    );
    client.send(vec![cancel_request(3, None)]);
    assert_eq!(
        extended_result_code(&client.receive()),
        LdapResultCode::ProtocolError
    );

    // A search and a Cancel of it, back to back: whichever wins, the search is answered first
    // (canceled, or done when the Cancel came too late) and the Cancel after it, consistently.
    let mut canceled_rounds = 0;
    for round in 0..20u8 {
        let search_id = 10 + 2 * i32::from(round);
        let search = subtree_search(search_id);
        client.send(vec![
            search,
            cancel_request(search_id + 1, Some(cancel_value(search_id as u8))),
        ]);
        let search_done = loop {
            let message = client.receive();
            match message.op {
                LdapOp::SearchResultEntry(_) => assert_eq!(message.msgid, search_id),
                LdapOp::SearchResultDone(result) => {
                    assert_eq!(
                        message.msgid, search_id,
                        "the search ends before the Cancel's answer"
                    );
                    break result.code;
                }
                LdapOp::ExtendedResponse(response) => {
                    // The Cancel could only be answered early when it found nothing to cancel.
                    assert_eq!(message.msgid, search_id + 1);
                    assert_eq!(response.res.code, LdapResultCode::NoSuchOperation);
                    panic!(
                        "the search was still outstanding when the Cancel was read, yet unanswered"
                    );
                }
                other => panic!("unexpected response {other:?}"),
            }
        };
        let cancel_answer = client.receive();
        assert_eq!(cancel_answer.msgid, search_id + 1);
        let cancel_code = extended_result_code(&cancel_answer);
        match search_done {
            LdapResultCode::Canceled => {
                canceled_rounds += 1;
                assert_eq!(cancel_code, LdapResultCode::Success)
            }
            LdapResultCode::Success => assert!(
                cancel_code == LdapResultCode::TooLate || cancel_code == LdapResultCode::NoSuchOperation,
                "a finished search makes the Cancel tooLate (or finds nothing), not {cancel_code:?}"
            ),
            other => panic!("search ended with {other:?}"),
        }
    }
    eprintln!("{canceled_rounds} of 20 searches were canceled, the others finished first");
}

/// A bind abandons every outstanding operation; a Cancel waiting on one is answered before the
/// bind's response (before: never, and a later operation reusing the target's message ID made
/// a stray Cancel response appear).
#[test]
fn a_bind_answers_the_cancels_waiting_on_what_it_abandons() {
    use ldap3_proto::proto::{LdapBindCred, LdapBindRequest, LdapOp};
    let server = TestServer::start_with_database(|_| {});
    populate_for_raw_tests(&mut connect(&server));
    let mut client = RawClient::connect(&server);
    for round in 0..10 {
        let base = 100 * round;
        let bind = ldap3_proto::LdapMsg {
            msgid: base + 3,
            op: LdapOp::BindRequest(LdapBindRequest {
                version: 3,
                dn: String::new(),
                cred: LdapBindCred::Simple(String::new()),
            }),
            ctrl: Vec::new(),
        };
        let cancel = cancel_request(base + 2, Some(cancel_value(1)));
        let mut search = subtree_search(1);
        search.msgid = 1;
        client.send(vec![search, cancel, bind]);
        let mut cancel_answered = false;
        loop {
            let message = client.receive();
            match message.op {
                LdapOp::BindResponse(_) => break,
                LdapOp::ExtendedResponse(_) => {
                    assert_eq!(message.msgid, base + 2);
                    cancel_answered = true;
                }
                _ => assert_eq!(message.msgid, 1, "only the search's own messages"),
            }
        }
        assert!(
            cancel_answered,
            "round {round}: the Cancel was answered before the bind"
        );
        // Nothing stray follows: the next answer is the next request's.
        client.send(vec![whoami_request(base + 4)]);
        assert_eq!(client.receive().msgid, base + 4);
    }
}

#[test]
fn abandoned_searches_end_silently_and_the_connection_goes_on() {
    use ldap3_proto::proto::LdapOp;
    use ldap3_proto::LdapResultCode;
    let server = TestServer::start_with_database(|_| {});
    populate_for_raw_tests(&mut connect(&server));
    let mut client = RawClient::connect(&server);
    let mut abandoned_rounds = 0;
    for round in 0..20 {
        let search_id = 10 + 2 * round;
        let whoami_id = search_id + 1;
        let abandon = ldap3_proto::LdapMsg {
            msgid: 1000 + round,
            op: LdapOp::AbandonRequest(search_id),
            ctrl: Vec::new(),
        };
        client.send(vec![
            subtree_search(search_id),
            abandon,
            whoami_request(whoami_id),
        ]);
        // Entries of the search may come first, and its SearchResultDone only if it finished
        // before the Abandon was read. Abandon itself has no response.
        let mut search_finished = false;
        loop {
            let message = client.receive();
            match message.op {
                LdapOp::SearchResultEntry(_) => assert_eq!(message.msgid, search_id),
                LdapOp::SearchResultDone(result) => {
                    assert_eq!(message.msgid, search_id);
                    assert_eq!(result.code, LdapResultCode::Success);
                    search_finished = true;
                }
                LdapOp::ExtendedResponse(response) => {
                    assert_eq!(message.msgid, whoami_id, "only the Who am I is answered");
                    assert_eq!(response.res.code, LdapResultCode::Success);
                    break;
                }
                other => panic!("unexpected response {other:?}"),
            }
        }
        if !search_finished {
            abandoned_rounds += 1;
        }
    }
    // Nothing of an abandoned search trails in later: the next exchange is answered alone.
    client.send(vec![whoami_request(5000)]);
    let next = client.receive();
    assert_eq!(next.msgid, 5000, "no late message of an abandoned search");
    eprintln!("{abandoned_rounds} of 20 searches were abandoned before they finished");
}

#[test]
fn operations_beyond_the_per_connection_limit_are_answered_busy() {
    use ldap3_proto::proto::LdapOp;
    use ldap3_proto::LdapResultCode;
    let server =
        TestServer::start_with_database(|settings| settings.operations_per_connection_max = 1);
    populate_for_raw_tests(&mut connect(&server));
    let mut client = RawClient::connect(&server);
    let mut busy_rounds = 0;
    for round in 0..10 {
        let first = 10 + 2 * round;
        let second = first + 1;
        client.send(vec![subtree_search(first), whoami_request(second)]);
        let mut first_done = false;
        let mut second_code = None;
        while !(first_done && second_code.is_some()) {
            let message = client.receive();
            match message.op {
                LdapOp::SearchResultEntry(_) => assert_eq!(message.msgid, first),
                LdapOp::SearchResultDone(result) => {
                    assert_eq!(
                        (message.msgid, result.code),
                        (first, LdapResultCode::Success)
                    );
                    first_done = true;
                }
                LdapOp::ExtendedResponse(response) => {
                    assert_eq!(message.msgid, second);
                    second_code = Some(response.res.code);
                }
                other => panic!("unexpected response {other:?}"),
            }
        }
        // Busy while the search was outstanding; success only if it had already finished.
        match second_code.expect("answered") {
            LdapResultCode::Busy => busy_rounds += 1,
            LdapResultCode::Success => {}
            other => panic!("the second operation got {other:?}"),
        }
    }
    eprintln!("{busy_rounds} of 10 second operations were refused busy");
}

/// A filter's assertion values are octet strings (RFC 4511 §4.1.6): a value that is not UTF-8
/// (`\ff\fe`, as in binary attributes, certificates, GUIDs) is answered, as slapd answers it,
/// and the connection goes on. Before lmdir decoded searches itself, ldap3_proto's String
/// filters refused the PDU and the connection was closed with a Notice of Disconnection.
#[test]
fn binary_assertion_values_are_answered_and_the_connection_goes_on() {
    let server = TestServer::start_populated(3, Vec::new(), |_| {});
    const PEOPLE: &str = "ou=people,dc=example,dc=com";
    let mut connection = common::root(&server);
    let filters = [
        "(userPassword=\\ff\\fe)",
        "(|(cn=\\ff\\fe\\00)(uid=u0000001))",
        "(cn=*\\c3\\28*)",
        "(!(description>=\\80))",
    ];
    for filter in filters {
        let ldap3::SearchResult(entries, result) = connection
            .search(PEOPLE, Scope::Subtree, filter, vec!["uid"])
            .unwrap_or_else(|error| panic!("{filter}: {error}"));
        assert_eq!(result.rc, 0, "{filter}: {}", result.text);
        // Undefined items (a value no Directory String holds) match nothing, even under NOT.
        let expected = usize::from(filter.contains("uid=u0000001"));
        assert_eq!(entries.len(), expected, "{filter}");
    }
    // The same connection still answers.
    assert_eq!(whoami(&mut connection), format!("dn:{}", ROOT_DN));
    // ldap-utils sends the same bytes.
    let url = server.ldap_url();
    let Some(output) = ldap_tool(
        "ldapsearch",
        &[
            "-x",
            "-H",
            &url,
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
            "-b",
            PEOPLE,
            "-LLL",
            "(|(userPassword=\\ff\\fe)(uid=u0000002))",
            "uid",
        ],
    ) else {
        return;
    };
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("uid: u0000002"),
        "{}",
        text(&output.stdout)
    );
}

/// supportedControl lists every control lmdir honours, from the one registry: the content
/// synchronization, password policy and Relax Rules controls (all honoured) were missing, so
/// clients that look before they ask (Apache Directory Studio, JNDI tools) did not use them.
/// Each listed control is honoured: marked critical on an operation it applies to, it is
/// never refused as unavailable.
#[test]
fn supported_control_lists_exactly_what_is_honoured() {
    let server = TestServer::start(|_| {});
    let mut connection = connect(&server);
    let entry = root_dse(&mut connection, &["supportedControl"]);
    let listed: std::collections::BTreeSet<String> =
        entry.attrs["supportedControl"].iter().cloned().collect();
    let registered: std::collections::BTreeSet<String> =
        lmdir_server::controls::supported_control_oids()
            .map(str::to_string)
            .collect();
    assert_eq!(listed, registered);
    for oid in [
        "1.3.6.1.4.1.4203.1.9.1.1",
        "1.3.6.1.4.1.42.2.27.8.5.1",
        "1.3.6.1.4.1.4203.666.5.12",
        "1.2.840.113556.1.4.319",
        "1.2.826.0.1.3344810.2.3",
    ] {
        assert!(listed.contains(oid), "{oid} missing from {listed:?}");
    }
    // The password policy control, critical, on a bind it applies to: honoured.
    let mut bind = connect(&server);
    let result = bind
        .with_controls(RawControl {
            ctype: "1.3.6.1.4.1.42.2.27.8.5.1".to_string(),
            crit: true,
            val: None,
        })
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind");
    assert_eq!(result.rc, 0, "{}", result.text);
    // Relax, critical, on a search it does not apply to: unavailableCriticalExtension.
    let result = connection
        .with_controls(RawControl {
            ctype: "1.3.6.1.4.1.4203.666.5.12".to_string(),
            crit: true,
            val: None,
        })
        .search("", Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!(result.1.rc, 12);
}
