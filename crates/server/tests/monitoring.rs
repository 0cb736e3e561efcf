//! cn=Monitor and the Prometheus endpoint over the wire: counters that move with load (after N
//! searches they say N more), OpenLDAP's entry shapes, access (rootdn only by default; a rule
//! naming cn=Monitor opens it), and a scrape that names what happened.

use crate::common;

use common::{bind, grant, person_dn, TestServer, PERSON_PASSWORD, ROOT_DN, ROOT_PASSWORD};
use ldap3::{LdapConn, LdapError, Scope, SearchEntry};
use lmdir_config::{AccessLevel, AccessTarget, Who};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::SocketAddr;

const PEOPLE: usize = 200;

/// One attribute of one monitor entry, read with `+` (monitor attributes are operational).
fn monitor_value(connection: &mut LdapConn, dn: &str, attribute: &str) -> String {
    let (entries, _) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec!["*", "+"])
        .expect("search")
        .success()
        .unwrap_or_else(|error| panic!("reading {dn}: {error}"));
    let entry = SearchEntry::construct(entries.into_iter().next().expect("one entry"));
    entry
        .attrs
        .get(attribute)
        .and_then(|values| values.first().cloned())
        .unwrap_or_else(|| panic!("{dn} has no {attribute}: {:?}", entry.attrs))
}

fn completed_searches(connection: &mut LdapConn) -> u64 {
    monitor_value(
        connection,
        "cn=Search,cn=Operations,cn=Monitor",
        "monitorOpCompleted",
    )
    .parse()
    .expect("a counter")
}

fn search_people(connection: &mut LdapConn, count: usize) {
    for index in 0..count {
        let (entries, _) = connection
            .search(
                "ou=people,dc=example,dc=com",
                Scope::Subtree,
                &format!("(uid=u{index:07})"),
                vec!["cn"],
            )
            .expect("search")
            .success()
            .expect("search succeeds");
        assert_eq!(entries.len(), 1);
    }
}

fn result_code(result: Result<ldap3::SearchResult, LdapError>) -> u32 {
    result.expect("search sent").1.rc
}

#[test]
fn monitor_counters_move_with_load_and_only_the_rootdn_reads_them_by_default() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut root = bind(&server, ROOT_DN, ROOT_PASSWORD);
    let before = completed_searches(&mut root);
    search_people(&mut root, 7);
    // The first reading itself completed too.
    assert_eq!(completed_searches(&mut root), before + 1 + 7);

    let entries: u64 = monitor_value(
        &mut root,
        "cn=Database 1,cn=Databases,cn=Monitor",
        "olmMDBEntries",
    )
    .parse()
    .expect("a count");
    let groups = PEOPLE.div_ceil(common::PEOPLE_PER_GROUP);
    assert_eq!(entries as usize, 3 + PEOPLE + groups);
    let current: u64 = monitor_value(
        &mut root,
        "cn=Current,cn=Connections,cn=Monitor",
        "monitorCounter",
    )
    .parse()
    .expect("a count");
    assert!(current >= 1);
    let authz = monitor_value(&mut root, "cn=Monitor", "monitoredInfo");
    assert!(authz.starts_with("lmdir"), "{authz}");
    // The subtree lists one entry per open connection, this one bound as the rootdn.
    let (connections, _) = root
        .search(
            "cn=Connections,cn=Monitor",
            Scope::OneLevel,
            "(monitorConnectionAuthzDN=cn=admin,dc=example,dc=com)",
            vec!["monitorConnectionNumber"],
        )
        .expect("search")
        .success()
        .expect("connections listed");
    assert_eq!(connections.len(), 1);

    // Anonymous and an ordinary user find no monitor at all: a hidden base is a missing one.
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let missing = anonymous.search("cn=Monitor", Scope::Subtree, "(objectClass=*)", vec!["*"]);
    assert_eq!(result_code(missing), 32);
    let mut user = bind(&server, &person_dn(3), PERSON_PASSWORD);
    let missing = user.search("cn=Monitor", Scope::Base, "(objectClass=*)", vec!["+"]);
    assert_eq!(result_code(missing), 32);
}

#[test]
fn a_rule_naming_cn_monitor_opens_it_to_whom_it_says() {
    let rules = vec![
        grant(
            AccessTarget {
                subtree: Some("cn=Monitor".to_string()),
                ..AccessTarget::default()
            },
            Who::Users,
            AccessLevel::Read,
        ),
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ];
    let server = TestServer::start_populated(PEOPLE, rules, |_| {});
    let mut user = bind(&server, &person_dn(5), PERSON_PASSWORD);
    search_people(&mut user, 2);
    assert_eq!(completed_searches(&mut user), 2);
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let missing = anonymous.search("cn=Monitor", Scope::Base, "(objectClass=*)", vec!["+"]);
    assert_eq!(
        result_code(missing),
        32,
        "the rule grants users, not anonymous"
    );
}

fn scrape(address: std::net::SocketAddr) -> String {
    let mut stream = std::net::TcpStream::connect(address).expect("connect to metrics");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

fn metric(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{body}"))
}

#[test]
fn prometheus_scrapes_count_operations_entries_and_writes() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    });
    let address = server
        .running()
        .context()
        .metrics_address()
        .expect("metrics endpoint bound");
    let series = "lmdir_operations_total{operation=\"search\",result=\"success\"}";
    let mut root = bind(&server, ROOT_DN, ROOT_PASSWORD);
    search_people(&mut root, 1);
    let first = scrape(address);
    let before = metric(&first, series);
    let entries_before = metric(&first, "lmdir_entries_returned_total");
    search_people(&mut root, 5);
    root.modify(
        &person_dn(1),
        vec![ldap3::Mod::Replace("description", ["changed"].into())],
    )
    .expect("modify")
    .success()
    .expect("modified");
    let body = scrape(address);
    assert_eq!(metric(&body, series), before + 5.0);
    assert_eq!(
        metric(&body, "lmdir_entries_returned_total"),
        entries_before + 5.0
    );
    assert!(metric(&body, "lmdir_sent_bytes_total") > 0.0);
    assert!(metric(&body, "lmdir_entries") as usize > PEOPLE);
    assert!(metric(&body, "lmdir_write_batch_operations_count") >= 1.0);
    assert!(metric(&body, "lmdir_connections{state=\"open\"}") >= 1.0);
    assert!(
        body.contains("# TYPE lmdir_operations_total counter"),
        "{body}"
    );
    promtool_accepts(&body);
}

/// `promtool check metrics` (Debian's prometheus package) on a scrape, when it is installed.
fn promtool_accepts(body: &str) {
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI=true and promtool is missing (apt-get install prometheus)"
            );
            eprintln!("skipping the promtool check: promtool is not installed (apt-get install prometheus)");
            return;
        }
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("feed promtool");
    let output = child.wait_with_output().expect("promtool ran");
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A TCP connection to `address` from the loopback address `source` (any 127.x.y.z is this
/// host on Linux, so a test can play several clients).
fn connect_from(server: &TestServer, source: [u8; 4], address: SocketAddr) -> std::net::TcpStream {
    let stream = server.runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from((source, 0)))
            .expect("bind source address");
        socket.connect(address).await.expect("connect")
    });
    let stream = stream.into_std().expect("std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("timeout");
    stream
}

/// Issue 19 item 6: clients that connect and send `GET /m` and nothing more, the endpoint's
/// whole connection cap's worth from one address and as many again from others, do not lock
/// scrapes out: a scrape from a holding address and one from elsewhere are both answered.
#[test]
fn idle_half_requests_do_not_lock_scrapes_out() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    });
    let address = server
        .running()
        .context()
        .metrics_address()
        .expect("metrics endpoint bound");
    let mut idle = Vec::new();
    for source in [
        [127, 0, 0, 1],
        [127, 0, 0, 2],
        [127, 0, 0, 3],
        [127, 0, 0, 4],
    ] {
        for _ in 0..16 {
            let mut stream = connect_from(&server, source, address);
            stream.write_all(b"GET /m").expect("half a request");
            idle.push(stream);
        }
    }
    for source in [[127, 0, 0, 1], [127, 0, 0, 9]] {
        let mut stream = connect_from(&server, source, address);
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .expect("request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response");
        assert!(
            response.starts_with("HTTP/1.1 200") && response.contains("lmdir_entries"),
            "scrape from {source:?}: {response:?}"
        );
    }
    drop(idle);
}

/// One request to the metrics listener: (status code, the whole response).
fn http(address: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).expect("connect to metrics");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("timeout");
    stream
        .write_all(format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    (status, response)
}

fn metrics_address(server: &TestServer) -> SocketAddr {
    server
        .running()
        .context()
        .metrics_address()
        .expect("metrics endpoint bound")
}

#[test]
fn a_plain_server_is_live_and_ready_until_its_writes_stop() {
    let server = TestServer::start_with_database(|settings| {
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    });
    let address = metrics_address(&server);
    let (status, live) = http(address, "GET", "/livez");
    assert_eq!(status, 200, "{live}");
    for path in ["/readyz", "/health"] {
        let (status, ready) = http(address, "GET", path);
        assert_eq!(status, 200, "{ready}");
        assert!(ready.contains("cache-control: no-store"), "{ready}");
        assert!(ready.ends_with("\r\n\r\nready\n"), "{ready}");
    }
    let (status, head) = http(address, "HEAD", "/readyz");
    assert_eq!(status, 200);
    assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
    assert_eq!(http(address, "DELETE", "/readyz").0, 405);
    assert_eq!(http(address, "GET", "/metrics").0, 200);

    // The first step of shutdown: a balancer must stop sending clients before they fail.
    let database = server.running().context().database.as_ref().expect("db");
    database.stop_writes();
    let (status, ready) = http(address, "GET", "/readyz");
    assert_eq!(status, 503, "{ready}");
    assert!(
        ready.ends_with("not ready\nserver: shutting down\n"),
        "{ready}"
    );
    assert_eq!(http(address, "GET", "/livez").0, 200, "still live");
}

#[test]
fn a_consumer_that_never_refreshed_makes_the_server_not_ready_naming_only_its_rid() {
    // A port nothing listens on: the consumer's connection is refused, again and again.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address");
    let provider = format!("ldap://{closed}");
    let server = TestServer::start_with_database(|settings| {
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
        settings
            .replication
            .consumer
            .push(lmdir_config::ConsumerConfig {
                rid: 7,
                provider: provider.clone(),
                search_base: "dc=example,dc=com".to_string(),
                sync_type: lmdir_config::SyncType::RefreshAndPersist,
                interval_seconds: 60,
                retry_seconds: 1,
                bind_dn: "cn=replicator,dc=example,dc=com".to_string(),
                credentials: "secret".to_string(),
                starttls: false,
                tls_ca_certificate: String::new(),
                bulk_initial_refresh: true,
                pdu_bytes_max: lmdir_config::CONSUMER_PDU_BYTES_MAX_DEFAULT,
            });
    });
    let address = metrics_address(&server);
    assert_eq!(http(address, "GET", "/livez").0, 200);
    // Before and after its first failed attempt (the status says it was tried).
    let consumer = server.running().context().monitor.replication.consumers()[0].clone();
    for attempt in 0..2 {
        let (status, ready) = http(address, "GET", "/readyz");
        assert_eq!(status, 503, "{ready}");
        assert!(
            ready.ends_with("not ready\nreplication rid=007: first refresh not complete\n"),
            "{ready}"
        );
        for secret in [
            provider.as_str(),
            &closed.port().to_string(),
            "cn=replicator",
        ] {
            assert!(!ready.contains(secret), "{secret} in {ready}");
        }
        if attempt == 0 {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while consumer.snapshot().last_error.is_empty() {
                assert!(std::time::Instant::now() < deadline, "no attempt in 60 s");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// The answer code of a simple bind as `dn` with `password`.
fn bind_code(server: &TestServer, dn: &str, password: &str) -> u32 {
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    connection.simple_bind(dn, password).expect("bind sent").rc
}

#[test]
fn a_bind_to_what_cannot_authenticate_checks_a_password_as_a_wrong_one_does() {
    // Under Argon2 a wrong password costs tens of milliseconds; a bind to a missing entry
    // answered at once, so the delay told which accounts exist. Each now checks one password.
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
        settings.password_hash = "ARGON2".to_string();
    });
    let address = metrics_address(&server);
    let mut root = bind(&server, ROOT_DN, ROOT_PASSWORD);
    root.extended(ldap3::exop::PasswordModify {
        user_id: Some(&person_dn(0)),
        old_pass: None,
        new_pass: Some("argon2-password"),
    })
    .expect("password modify sent")
    .success()
    .expect("password set");
    let series = "lmdir_password_checks_total";
    let missing = "uid=nobody,ou=People,dc=example,dc=com";
    let without_password = common::group_dn(0);
    for (dn, what) in [
        (person_dn(0), "a wrong password"),
        (missing.to_string(), "a missing entry"),
        (without_password, "an entry without userPassword"),
    ] {
        let before = metric(&scrape(address), series);
        assert_eq!(bind_code(&server, &dn, "guess"), 49, "{what}");
        assert_eq!(metric(&scrape(address), series), before + 1.0, "{what}");
    }
    assert_eq!(bind_code(&server, &person_dn(0), "argon2-password"), 0);
}

/// A locked account answered without a look at the password, so under a slow scheme its
/// quick 49 told an attacker it was locked (and existed). As slapd, which checks the password
/// before its ppolicy refuses, the locked bind now checks one password too.
#[test]
fn a_bind_to_a_locked_account_checks_a_password_as_a_wrong_one_does() {
    let policy_dn = "cn=lockout,dc=example,dc=com";
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
        settings.password_policy_default = policy_dn.to_string();
    });
    let address = metrics_address(&server);
    let mut root = bind(&server, ROOT_DN, ROOT_PASSWORD);
    root.add(
        policy_dn,
        vec![
            (
                "objectClass",
                HashSet::from(["organizationalRole", "pwdPolicy"]),
            ),
            ("cn", HashSet::from(["lockout"])),
            ("pwdAttribute", HashSet::from(["userPassword"])),
            ("pwdLockout", HashSet::from(["TRUE"])),
            ("pwdMaxFailure", HashSet::from(["3"])),
        ],
    )
    .expect("add sent")
    .success()
    .expect("the policy is added");
    root.modify(
        &person_dn(0),
        vec![ldap3::Mod::Replace(
            "pwdAccountLockedTime",
            HashSet::from(["000001010000Z"]),
        )],
    )
    .expect("modify sent")
    .success()
    .expect("locked by the administrator");
    let series = "lmdir_password_checks_total";
    for password in ["guess", PERSON_PASSWORD] {
        let before = metric(&scrape(address), series);
        assert_eq!(
            bind_code(&server, &person_dn(0), password),
            49,
            "{password}"
        );
        assert_eq!(metric(&scrape(address), series), before + 1.0, "{password}");
    }
}
