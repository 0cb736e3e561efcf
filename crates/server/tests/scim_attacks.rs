//! Attacks on the SCIM endpoint, over the wire: what LDAP hides stays hidden (the same answer
//! as a missing resource), what LDAP refuses is refused, bodies and filters are bounded, failed
//! credentials are throttled by the LDAP bind throttle, and nothing works without credentials.

use crate::common;

use common::http::Client;
use common::{
    attributes, own_password_rule, person_dn, root, rule_by, TestServer, PERSON_PASSWORD, ROOT_DN,
    ROOT_PASSWORD,
};
use lmdir_config::{AccessLevel, AccessTarget, Who};
use serde_json::json;
use std::time::{Duration, Instant};

const USERS: &str = "/scim/v2/Users";

fn client_of(server: &TestServer) -> Client {
    let address = server.running().http_address().expect("http listener");
    match server
        .running()
        .context()
        .settings()
        .tls_certificate
        .clone()
    {
        Some(certificate) if server.running().context().settings().http.tls => {
            Client::https(address, &certificate)
        }
        _ => Client {
            address,
            certificate: None,
            authorization: None,
        },
    }
}

/// u0000002 hidden from everyone (but the rootdn); mail readable only by its own entry.
fn hiding_rules() -> Vec<lmdir_config::AccessRule> {
    vec![
        rule_by(
            AccessTarget {
                dn: Some(person_dn(2)),
                ..AccessTarget::default()
            },
            &[(Who::Anyone, AccessLevel::None)],
        ),
        own_password_rule(),
        rule_by(
            attributes(&["mail"]),
            &[
                (Who::SelfEntry, AccessLevel::Read),
                (Who::Anyone, AccessLevel::None),
            ],
        ),
        rule_by(AccessTarget::default(), &[(Who::Anyone, AccessLevel::Read)]),
    ]
}

fn id_of(admin: &Client, uid: &str) -> String {
    let list = admin
        .get(&format!("{USERS}?filter=userName%20eq%20%22{uid}%22"))
        .json();
    list["Resources"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{uid}: {list}"))
        .to_string()
}

#[test]
fn hidden_entries_and_attributes_stay_hidden_over_scim_as_over_ldap() {
    let server = TestServer::start_populated(5, hiding_rules(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
    });
    let client = client_of(&server);
    let admin = client.basic(ROOT_DN, ROOT_PASSWORD);
    let person = client.basic("u0000001", PERSON_PASSWORD);
    let hidden_id = id_of(&admin, "u0000002");
    let visible_id = id_of(&admin, "u0000003");
    // The hidden entry: not found by id, not listed, not matched by a filter, not writable —
    // each answer the one a missing resource gets.
    let missing = person.get(&format!("{USERS}/00000000-0000-4000-8000-000000000000"));
    let hidden = person.get(&format!("{USERS}/{hidden_id}"));
    assert_eq!(
        (hidden.status, hidden.json()["detail"].clone()),
        (404, missing.json()["detail"].clone())
    );
    let listed = person.get(&format!("{USERS}?count=100")).json();
    assert!(!listed.to_string().contains("u0000002"), "{listed}");
    assert_eq!(listed["totalResults"], 4);
    let filtered = person
        .get(&format!("{USERS}?filter=userName%20eq%20%22u0000002%22"))
        .json();
    assert_eq!(filtered["totalResults"], 0);
    let patch = json!({"Operations": [{"op": "replace", "path": "displayName", "value": "x"}]});
    assert_eq!(
        person
            .send_json("PATCH", &format!("{USERS}/{hidden_id}"), &patch)
            .status,
        404
    );
    assert_eq!(
        person
            .request("DELETE", &format!("{USERS}/{hidden_id}"), &[], b"")
            .status,
        404
    );
    // LDAP gives the same person the same answer.
    let mut ldap = common::bind(&server, &person_dn(1), PERSON_PASSWORD);
    let (entries, _) = ldap
        .search(
            "ou=people,dc=example,dc=com",
            ldap3::Scope::Subtree,
            "(uid=u0000002)",
            vec!["uid"],
        )
        .unwrap()
        .success()
        .unwrap();
    assert!(entries.is_empty());
    // The hidden attribute: absent from another's resource, useless in a filter, shown to self.
    let other = person.get(&format!("{USERS}/{visible_id}")).json();
    assert!(other.get("emails").is_none(), "{other}");
    let by_mail = person
        .get(&format!("{USERS}?filter=emails%20co%20%22u0000003%22"))
        .json();
    assert_eq!(by_mail["totalResults"], 0);
    let own = person
        .get(&format!("{USERS}/{}", id_of(&admin, "u0000001")))
        .json();
    assert_eq!(own["emails"][0]["value"], "u0000001@example.com");
    // Writes LDAP refuses (only the rootdn writes here) are refused: 403, and nothing changed.
    let refused = person.send_json("PATCH", &format!("{USERS}/{visible_id}"), &patch);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        person
            .send_json("POST", USERS, &json!({"userName": "intruder"}))
            .status,
        403
    );
    let unchanged = admin.get(&format!("{USERS}/{visible_id}")).json();
    assert!(unchanged.get("displayName").is_none());
    // No password is ever readable.
    let everything = admin.get(&format!("{USERS}?count=100")).text();
    assert!(!everything.contains("SSHA") && !everything.contains("password"));
}

#[test]
fn bodies_and_filters_are_bounded() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.body_bytes_max = 64 * 1024;
    });
    let admin = client_of(&server).basic(ROOT_DN, ROOT_PASSWORD);
    // A declared length over the bound is refused before the body is read (sent here
    // without it: the answer comes first).
    let head = format!(
        "POST {USERS} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {}\r\nContent-Type: application/scim+json\r\nContent-Length: {}\r\n\r\n",
        admin.authorization.clone().unwrap(),
        2 << 20
    );
    let raw = String::from_utf8_lossy(&admin.exchange(head.as_bytes())).into_owned();
    assert!(
        raw.starts_with("HTTP/1.1 413"),
        "{}",
        &raw[..raw.len().min(200)]
    );
    // Sent in chunks with no length, the body is cut at the bound too.
    let mut chunked = format!(
        "POST {USERS} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
        admin.authorization.clone().unwrap()
    )
    .into_bytes();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n", 4096).as_bytes());
        chunked.extend_from_slice(&[b'x'; 4096]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let raw = String::from_utf8_lossy(&admin.exchange(&chunked)).into_owned();
    assert!(
        raw.starts_with("HTTP/1.1 413"),
        "{}",
        &raw[..raw.len().min(200)]
    );
    let long_filter = format!("userName eq \"{}\"", "a".repeat(5000));
    let answer = admin.get(&format!(
        "{USERS}?filter={}",
        long_filter.replace(' ', "%20").replace('"', "%22")
    ));
    assert_eq!(
        (answer.status, answer.json()["scimType"].clone()),
        (400, json!("invalidFilter"))
    );
    let deep = format!("{}userName%20pr{}", "(".repeat(100), ")".repeat(100));
    let answer = admin.get(&format!("{USERS}?filter={deep}"));
    assert_eq!(
        (answer.status, answer.json()["scimType"].clone()),
        (400, json!("invalidFilter"))
    );
    let wide = vec!["userName%20pr"; 200].join("%20or%20");
    assert_eq!(admin.get(&format!("{USERS}?filter={wide}")).status, 400);
    // A chain within the SCIM bound (64 comparisons) is one LDAP `or`, not 63 nested ones
    // past the server's filter depth (before: 500 with the LDAP error's text).
    let chain = (0..64)
        .map(|index| format!("userName%20eq%20%22u{index:07}%22"))
        .collect::<Vec<_>>()
        .join("%20or%20");
    let answer = admin.get(&format!("{USERS}?filter={chain}"));
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["totalResults"], 2);
    let chain = (0..64)
        .map(|index| format!("userName%20ne%20%22u{index:07}%22"))
        .collect::<Vec<_>>()
        .join("%20and%20");
    let answer = admin.get(&format!("{USERS}?filter={chain}"));
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["totalResults"], 0);
    let many: Vec<serde_json::Value> = (0..1001)
        .map(|_| json!({"op": "remove", "path": "title"}))
        .collect();
    let id = id_of(&admin, "u0000001");
    let answer = admin.send_json(
        "PATCH",
        &format!("{USERS}/{id}"),
        &json!({"Operations": many}),
    );
    assert_eq!(answer.status, 400);
}

#[test]
fn a_thousand_wrong_passwords_are_throttled_like_ldap_binds() {
    let interval = Duration::from_millis(5);
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.bind_failure_burst = 5;
        settings.bind_failure_interval = interval;
        settings.bind_failure_address_burst = 100;
        settings.bind_failure_address_interval = Duration::from_millis(1);
    });
    let client = client_of(&server);
    let wrong = client.basic("u0000001", "guess");
    let started = Instant::now();
    for attempt in 0..1000 {
        let answer = wrong.get(USERS);
        assert_eq!(answer.status, 401, "attempt {attempt}");
    }
    let elapsed = started.elapsed();
    // Past the burst of 5, each failure waits for the next token: at least 995 intervals.
    assert!(
        elapsed >= interval * 995,
        "1,000 failures took only {elapsed:?}"
    );
    // The same throttle holds the LDAP binds of that account from that address.
    let (accounts, clients) = server.running().context().bind_throttle.tracked();
    assert!(accounts >= 1 && clients >= 1);
    // The right password still gets in (a success is never refused by the throttle).
    let answer = client.basic("u0000001", PERSON_PASSWORD).get(USERS);
    assert_eq!(answer.status, 200);
    println!("1,000 wrong Basic credentials: {elapsed:?} (interval {interval:?})");
}

#[test]
fn bearer_tokens_act_as_their_entry_and_are_stored_hashed() {
    use base64::Engine;
    let server = TestServer::start_populated(3, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
    });
    let secret = "k3N9-token-secret-for-tests";
    let holder = person_dn(0);
    let mut ldap = root(&server);
    let token = common::http::issue_token(&mut ldap, &holder, secret);
    let client = client_of(&server);
    let bearer = client.bearer(&token);
    let list = bearer.get(USERS);
    assert_eq!(list.status, 200, "{}", list.text());
    // It runs as u0000000, who may read but (under the default policy) not write.
    assert_eq!(
        bearer
            .send_json("POST", USERS, &json!({"userName": "new"}))
            .status,
        403
    );
    let wrong = format!(
        "lmdir.{}.not-the-secret",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(holder.as_bytes())
    );
    assert_eq!(client.bearer(&wrong).get(USERS).status, 401);
    assert_eq!(client.bearer(secret).get(USERS).status, 401);
    // Nobody else reads the hash, over LDAP or SCIM.
    let mut other = common::bind(&server, &person_dn(1), PERSON_PASSWORD);
    let (entries, _) = other
        .search(
            &holder,
            ldap3::Scope::Base,
            "(objectClass=*)",
            vec!["lmdirBearerToken"],
        )
        .unwrap()
        .success()
        .unwrap();
    let entry = ldap3::SearchEntry::construct(entries.into_iter().next().unwrap());
    assert!(
        entry.attrs.is_empty() && entry.bin_attrs.is_empty(),
        "{entry:?}"
    );
    assert!(!list.text().contains("SHA256"));
}

/// The first status line of each response in `raw`.
fn status_lines(raw: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(raw)
        .lines()
        .filter(|line| line.starts_with("HTTP/1.1 "))
        .map(str::to_string)
        .collect()
}

#[test]
fn access_is_decided_before_a_body_is_read() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
    });
    let client = client_of(&server);
    let body_bytes_max = server.running().context().settings().http.body_bytes_max;
    let declared = body_bytes_max / 2;
    // A SCIM request without credentials, or with wrong ones, declares half the bound and
    // sends none of it: the answer is 401 at once (were the body awaited, the read would time
    // out and answer 400).
    let wrong = client.basic("u0000001", "guess");
    for authorization in [None, wrong.authorization.as_deref()] {
        let credentials = authorization
            .map(|value| format!("Authorization: {value}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "POST {USERS} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{credentials}Content-Type: application/scim+json\r\nContent-Length: {declared}\r\n\r\n"
        );
        let lines = status_lines(&client.exchange(head.as_bytes()));
        assert_eq!(lines, ["HTTP/1.1 401 Unauthorized"], "{credentials}");
    }
    // Without a console session, no more than a sign-in form is read: a longer declared
    // body is refused unread, and a chunked one is cut at that allowance.
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {declared}\r\n\r\n"
    );
    let lines = status_lines(&client.exchange(head.as_bytes()));
    assert_eq!(lines, ["HTTP/1.1 413 Payload Too Large"]);
    let mut chunked = b"POST /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n", 4096).as_bytes());
        chunked.extend_from_slice(&[b'a'; 4096]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let lines = status_lines(&client.exchange(&chunked));
    assert_eq!(lines, ["HTTP/1.1 413 Payload Too Large"]);
    // An unread body is never taken for the next request on a kept-alive connection: the
    // request after it is answered, the one inside it is not.
    let inner = "GET /console.css HTTP/1.1\r\nHost: x\r\n\r\n";
    let smuggled = format!(
        "POST {USERS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/scim+json\r\nContent-Length: {}\r\n\r\n{inner}",
        inner.len()
    );
    let next = "GET /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut stream = std::net::TcpStream::connect(client.address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut raw = Vec::new();
    std::io::Write::write_all(&mut stream, smuggled.as_bytes()).expect("send");
    while !String::from_utf8_lossy(&raw).contains("\r\n\r\n") {
        let mut buffer = [0u8; 4096];
        match std::io::Read::read(&mut stream, &mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => raw.extend_from_slice(&buffer[..read]),
        }
    }
    let _ = std::io::Write::write_all(&mut stream, next.as_bytes());
    let _ = std::io::Read::read_to_end(&mut stream, &mut raw);
    let lines = status_lines(&raw);
    println!("kept-alive connection after an unread body: {lines:?}");
    assert_eq!(lines[0], "HTTP/1.1 401 Unauthorized");
    assert!(
        lines.len() == 1 || lines[1..] == ["HTTP/1.1 200 OK"],
        "{lines:?}"
    );
    // The signed-in paths are unchanged: a SCIM request with credentials is read and served.
    let admin = client.basic(ROOT_DN, ROOT_PASSWORD);
    let created = admin.send_json("POST", USERS, &json!({"userName": "readbody"}));
    assert_eq!(created.status, 201, "{}", created.text());
}

/// The values one request brings to an attribute, the attribute names it selects and the
/// members it resolves are bounded, each answered 400 tooMany before the work: before, a
/// PATCH adding 60,000 values onto an existing attribute (by anyone who may read the entry:
/// here a user's own) merged them in quadratic time on the shared runtime, 300 attribute
/// names were each looked up in a list per attribute of every resource, and a page of 120
/// groups resolved its 12,000 members one LDAP read each.
#[test]
fn values_names_and_member_resolutions_are_bounded() {
    let rules = vec![
        own_password_rule(),
        rule_by(
            AccessTarget::default(),
            &[
                (Who::SelfEntry, AccessLevel::Write),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
    ];
    let server = TestServer::start_populated(12_000, rules, |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
    });
    let client = client_of(&server);
    let admin = client.basic(ROOT_DN, ROOT_PASSWORD);
    let user = client.basic("u0000001", PERSON_PASSWORD);
    let id = id_of(&admin, "u0000001");
    let values: Vec<u64> = (0..60_000).collect();
    let body = json!({"Operations": [
        {"op": "add", "path": "emails", "value": values},
        {"op": "add", "path": "emails", "value": values},
    ]});
    let started = Instant::now();
    let answer = user.send_json("PATCH", &format!("{USERS}/{id}"), &body);
    let took = started.elapsed();
    println!("PATCH of 2 x 60,000 values: {} in {took:?}", answer.status);
    assert_eq!(
        (answer.status, answer.json()["scimType"].clone()),
        (400, json!("tooMany")),
        "{}",
        answer.text()
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    // Values added one operation at a time meet the bound on the attribute's result.
    let thousand: Vec<serde_json::Value> = (0..1000)
        .map(|index| json!({"value": format!("x{index}@example.com")}))
        .collect();
    let body = json!({"Operations": [
        {"op": "add", "path": "emails", "value": thousand},
        {"op": "add", "path": "emails", "value": [{"value": "one-more@example.com"}]},
    ]});
    let answer = user.send_json("PATCH", &format!("{USERS}/{id}"), &body);
    assert_eq!(
        (answer.status, answer.json()["scimType"].clone()),
        (400, json!("tooMany")),
        "{}",
        answer.text()
    );
    // An attribute holding more values than that (written over LDAP) is not filtered value
    // by value, 1,000 operations over: 400 before any is.
    let mut ldap = root(&server);
    let many: std::collections::HashSet<String> = (0..1500)
        .map(|index| format!("m{index}@example.com"))
        .collect();
    ldap.modify(
        &person_dn(3),
        vec![ldap3::Mod::Add(
            "mail",
            many.iter().map(String::as_str).collect(),
        )],
    )
    .unwrap()
    .success()
    .unwrap();
    let other = id_of(&admin, "u0000003");
    let filtered: Vec<serde_json::Value> = (0..1000)
        .map(|index| json!({"op": "remove", "path": format!("emails[value eq \"m{index}@example.com\"]")}))
        .collect();
    let answer = admin.send_json(
        "PATCH",
        &format!("{USERS}/{other}"),
        &json!({"Operations": filtered}),
    );
    assert_eq!(
        (answer.status, answer.json()["scimType"].clone()),
        (400, json!("tooMany")),
        "{}",
        &answer.text()[..answer.text().len().min(300)]
    );
    let names = (0..300)
        .map(|index| format!("a{index}"))
        .collect::<Vec<_>>()
        .join(",");
    let answer = admin.get(&format!("{USERS}/{id}?attributes={names}"));
    assert_eq!(
        (answer.status, answer.json()["scimType"].clone()),
        (400, json!("tooMany")),
        "{}",
        answer.text()
    );
    let started = Instant::now();
    let answer = admin.get("/scim/v2/Groups?count=200");
    println!(
        "a page of 120 groups of 100 members: {} in {:?}",
        answer.status,
        started.elapsed()
    );
    assert_eq!(
        (answer.status, answer.json()["scimType"].clone()),
        (400, json!("tooMany")),
        "{}",
        &answer.text()[..answer.text().len().min(300)]
    );
    // Within the bounds all of it is served: members left out, or a smaller page.
    let answer = admin.get("/scim/v2/Groups?count=200&excludedAttributes=members");
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.json()["Resources"].as_array().map(Vec::len),
        Some(120)
    );
    let answer = admin.get("/scim/v2/Groups?count=50");
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.json()["Resources"][0]["members"]
            .as_array()
            .map(Vec::len),
        Some(100)
    );
    let body = json!({"Operations": [{"op": "add", "path": "emails", "value": [
        {"value": "u0000001@example.com"}, {"value": "second@example.com"}]}]});
    let answer = user.send_json("PATCH", &format!("{USERS}/{id}"), &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["emails"].as_array().map(Vec::len), Some(2));
}

/// A SCIM body is JSON by its Content-Type (RFC 7644 §3.1), and a browser's cross-site write
/// is refused: before, a cross-site `<form enctype=text/plain>` posting JSON-looking text ran
/// as whoever's Basic credentials the browser had cached (every 401 offers Basic).
#[test]
fn bodies_must_be_scim_json_and_writes_same_site() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
    });
    let admin = client_of(&server).basic(ROOT_DN, ROOT_PASSWORD);
    let user = |name: &str| json!({"userName": name}).to_string();
    // What a text/plain form sends: name={"userName":"x","a":"=..."}.
    let form_text = r#"{"userName":"formed","x":"="}"#;
    for (content_type, body) in [
        ("text/plain", form_text.to_string()),
        ("application/x-www-form-urlencoded", user("urlencoded")),
        ("multipart/form-data; boundary=x", user("multipart")),
    ] {
        let answer = admin.request(
            "POST",
            USERS,
            &[("Content-Type", content_type)],
            body.as_bytes(),
        );
        assert_eq!(answer.status, 415, "{content_type}: {}", answer.text());
    }
    let bulk = json!({"Operations": [{"method": "POST", "path": "/Users", "bulkId": "1",
        "data": {"userName": "bulked"}}]});
    let answer = admin.request(
        "POST",
        "/scim/v2/Bulk",
        &[("Content-Type", "text/plain")],
        bulk.to_string().as_bytes(),
    );
    assert_eq!(answer.status, 415, "{}", answer.text());
    let answer = admin.request("POST", USERS, &[], user("untyped").as_bytes());
    assert_eq!(answer.status, 415, "{}", answer.text());
    let cross_site = admin.request(
        "POST",
        USERS,
        &[
            ("Content-Type", "application/scim+json"),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        user("crossed").as_bytes(),
    );
    assert_eq!(cross_site.status, 403, "{}", cross_site.text());
    let id = id_of(&admin, "u0000001");
    let deleted = admin.request(
        "DELETE",
        &format!("{USERS}/{id}"),
        &[("Sec-Fetch-Site", "cross-site")],
        b"",
    );
    assert_eq!(deleted.status, 403, "{}", deleted.text());
    // Reads stay open to any site's fetch (they carry no authority a page could use).
    let read = admin.request("GET", USERS, &[("Sec-Fetch-Site", "cross-site")], b"");
    assert_eq!(read.status, 200);
    let listed = admin.get(&format!("{USERS}?count=10")).json();
    let names: Vec<&str> = listed["Resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|user| user["userName"].as_str())
        .collect();
    assert_eq!(names, ["u0000000", "u0000001"]);
    // Both SCIM types are served, parameters and all.
    for (content_type, name) in [
        ("application/scim+json", "typed"),
        ("application/json; charset=utf-8", "plainjson"),
    ] {
        let answer = admin.request(
            "POST",
            USERS,
            &[("Content-Type", content_type)],
            user(name).as_bytes(),
        );
        assert_eq!(answer.status, 201, "{content_type}: {}", answer.text());
    }
}

/// Requests pipelined onto a connection whose answers are never read from it.
fn stall(address: std::net::SocketAddr) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let request = b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..100_000 {
        if std::io::Write::write_all(&mut stream, request).is_err() {
            break;
        }
    }
    stream
}

/// A client that pipelines requests and never reads the answers holds its connection only
/// for the write timeout (`[server] write_timeout_seconds`, as on LDAP): before, such
/// connections were held forever, so a few of them took every slot.
#[test]
fn a_client_that_never_reads_gives_its_slot_back() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.http.connections_max = 2;
        settings.write_timeout = Duration::from_secs(2);
    });
    let client = client_of(&server);
    let stalled: Vec<_> = (0..2).map(|_| stall(client.address)).collect();
    let request = b"GET /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let refused = status_lines(&client.exchange(request));
    assert!(refused.is_empty(), "both slots are held: {refused:?}");
    // Within the write timeout and well before the header timeout (10 s) could count.
    let started = Instant::now();
    let served = loop {
        std::thread::sleep(Duration::from_millis(500));
        let lines = status_lines(&client.exchange(request));
        if !lines.is_empty() || started.elapsed() > Duration::from_secs(15) {
            break lines;
        }
    };
    println!("a slot came back after {:?}", started.elapsed());
    assert_eq!(served, ["HTTP/1.1 200 OK"], "a slot is free again");
    assert!(started.elapsed() < Duration::from_secs(8));
    drop(stalled);
}

/// An internal failure (LDAP `other`, 80: a store error, here an unknown hashing scheme the
/// server was started with) answers 500 with a generic text; the detail goes to the log only
/// (before: "LDAP 80: <the error's text>" in the body).
#[test]
fn internal_errors_answer_a_generic_text() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.password_hash = "NO-SUCH-SCHEME".to_string();
    });
    let admin = client_of(&server).basic(ROOT_DN, ROOT_PASSWORD);
    let id = id_of(&admin, "u0000001");
    let answer = admin.send_json(
        "PATCH",
        &format!("{USERS}/{id}"),
        &json!({"Operations": [{"op": "replace", "path": "password", "value": "n3w-Secret"}]}),
    );
    assert_eq!(answer.status, 500, "{}", answer.text());
    let detail = answer.json()["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !detail.contains("LDAP 80") && !detail.contains("NO-SUCH-SCHEME"),
        "{detail}"
    );
}

/// The token hash of `dn` as `ldap` reads it (None: no value shown).
fn token_values_seen(ldap: &mut ldap3::LdapConn, dn: &str) -> Vec<String> {
    let (entries, _) = ldap
        .search(
            dn,
            ldap3::Scope::Base,
            "(objectClass=*)",
            vec!["lmdirBearerToken"],
        )
        .unwrap()
        .success()
        .unwrap();
    entries
        .into_iter()
        .map(ldap3::SearchEntry::construct)
        .flat_map(|entry| {
            let text = entry.attrs.into_values().flatten();
            let binary = entry
                .bin_attrs
                .into_values()
                .flatten()
                .map(|value| String::from_utf8_lossy(&value).into_owned());
            text.chain(binary).collect::<Vec<_>>()
        })
        .collect()
}

/// `lmdirBearerToken` was protected by the built-in policy only: configured `[[access]]`
/// rules (what `lmdir migrate` writes from slapd's, which never name it) replaced that, so
/// under Debian's `to * by * read` anonymous read every token hash, and under a rule letting
/// users write, one user planted a token of their own on another's entry. Now a rule placed
/// before the configured ones keeps it: the entry itself writes, others may only authenticate.
#[test]
fn bearer_token_hashes_stay_protected_under_configured_rules() {
    let rules = vec![rule_by(
        AccessTarget::default(),
        &[
            (Who::Users, AccessLevel::Write),
            (Who::Anyone, AccessLevel::Read),
        ],
    )];
    let server = TestServer::start_populated(3, rules, |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
    });
    let holder = person_dn(0);
    let mut ldap = root(&server);
    let token = common::http::issue_token(&mut ldap, &holder, "first-token-secret");
    let client = client_of(&server);
    assert_eq!(client.bearer(&token).get(USERS).status, 200);
    let mut anonymous = ldap3::LdapConn::new(&server.ldap_url()).unwrap();
    let seen = token_values_seen(&mut anonymous, &holder);
    assert!(seen.is_empty(), "anonymous read the token hashes: {seen:?}");
    let mut other = common::bind(&server, &person_dn(1), PERSON_PASSWORD);
    let seen = token_values_seen(&mut other, &holder);
    assert!(
        seen.is_empty(),
        "another user read the token hashes: {seen:?}"
    );
    // Another user may write the entry, not its tokens.
    let planted = other
        .modify(
            &holder,
            vec![ldap3::Mod::Add(
                "lmdirBearerToken",
                ["{SHA256}K7gNU3sdo+OL0wNhqoVWhr3g6s1xYv72ol/pe/Unols="].into(),
            )],
        )
        .unwrap();
    assert_eq!(planted.rc, 50, "{planted:?}");
    // The entry itself still issues its own, and the rootdn anyone's.
    let mut own = common::bind(&server, &person_dn(2), PERSON_PASSWORD);
    let own_token = common::http::issue_token(&mut own, &person_dn(2), "own-token-secret");
    assert_eq!(client.bearer(&own_token).get(USERS).status, 200);
}

/// Debian makes `cn=admin,<suffix>` both an entry and the rootdn: a token stored on that entry
/// (by anyone with write to it) acted as the rootdn over HTTP, past every access rule and the
/// password policy. A token never acts as the rootdn.
#[test]
fn a_token_on_the_rootdns_own_entry_is_refused() {
    let server = TestServer::start_populated(1, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
    });
    let mut ldap = root(&server);
    ldap.add(
        ROOT_DN,
        vec![
            ("objectClass", ["organizationalRole"].into()),
            ("cn", ["admin"].into()),
        ],
    )
    .unwrap()
    .success()
    .unwrap();
    let token = common::http::issue_token(&mut ldap, ROOT_DN, "rootdn-entry-token");
    let bearer = client_of(&server).bearer(&token);
    let created = bearer.send_json("POST", USERS, &json!({"userName": "byroottoken"}));
    assert_eq!(created.status, 401, "{}", created.text());
    assert_eq!(bearer.get(USERS).status, 401);
}

/// Without a rootpw a bind to the rootdn checks its entry's userPassword, which whoever may
/// write that entry's password sets: over HTTP no entry credential becomes the rootdn, so
/// Basic with it is refused there (LDAP binds are unchanged).
#[test]
fn without_a_rootpw_http_never_reaches_the_rootdn_by_an_entry_password() {
    let server = TestServer::start_populated(1, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.rootdn = person_dn(0);
        settings.rootpw = String::new();
    });
    let basic = client_of(&server).basic(&person_dn(0), PERSON_PASSWORD);
    let created = basic.send_json("POST", USERS, &json!({"userName": "byentrypassword"}));
    assert_eq!(created.status, 401, "{}", created.text());
}

fn add_token_policy(ldap: &mut ldap3::LdapConn, max_age_seconds: u32) {
    ldap.add(
        "cn=policy,dc=example,dc=com",
        vec![
            ("objectClass", ["organizationalRole", "pwdPolicy"].into()),
            ("cn", ["policy"].into()),
            ("pwdAttribute", ["userPassword"].into()),
            ("pwdMustChange", ["TRUE"].into()),
            ("pwdMaxAge", [max_age_seconds.to_string().as_str()].into()),
        ],
    )
    .unwrap()
    .success()
    .unwrap();
}

/// A token authenticates only while a bind with the password would: an account whose
/// password an administrator reset (pwdMustChange) or whose password expired does not act
/// through its tokens (before, both kept reading and writing over SCIM).
#[test]
fn tokens_follow_the_password_policy_as_binds_do() {
    let server = TestServer::start_populated(3, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.password_policy_default = "cn=policy,dc=example,dc=com".to_string();
    });
    let mut ldap = root(&server);
    add_token_policy(&mut ldap, 2);
    let client = client_of(&server);
    let reset = common::http::issue_token(&mut ldap, &person_dn(0), "reset-account-token");
    let expiring = common::http::issue_token(&mut ldap, &person_dn(1), "expiring-token");
    let untouched = common::http::issue_token(&mut ldap, &person_dn(2), "untouched-token");
    assert_eq!(client.bearer(&reset).get(USERS).status, 200);
    // An administrator resets u0's password: pwdReset, which pwdMustChange makes binding
    // open nothing but the change.
    set_password(&mut ldap, &person_dn(0), "Reset-by-admin-1");
    assert_eq!(client.bearer(&reset).get(USERS).status, 401);
    // u1 changes its own password (pwdChangedTime now); pwdMaxAge 2 s later it is expired.
    let mut own = common::bind(&server, &person_dn(1), PERSON_PASSWORD);
    set_password(&mut own, &person_dn(1), "Chosen-by-me-1");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(client.bearer(&expiring).get(USERS).status, 401);
    // u2 has no pwdChangedTime (never expires) and no reset: its token works.
    assert_eq!(client.bearer(&untouched).get(USERS).status, 200);
}

/// A password set by someone other than the entry (an administrator's reset) removes the
/// entry's bearer tokens: one planted by a thief who held the old password worked again once
/// the owner chose a new password, and only the rootdn may delete another entry's tokens. The
/// owner's own password change keeps its tokens. No password policy is involved.
#[test]
fn a_reset_by_another_identity_removes_the_entrys_tokens() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
    });
    let mut ldap = root(&server);
    let client = client_of(&server);
    let kept = common::http::issue_token(&mut ldap, &person_dn(0), "owner-changes-token");
    let planted = common::http::issue_token(&mut ldap, &person_dn(1), "planted-token");
    let mut owner = common::bind(&server, &person_dn(0), PERSON_PASSWORD);
    set_password(&mut owner, &person_dn(0), "Chosen-by-me-1");
    assert_eq!(client.bearer(&kept).get(USERS).status, 200);
    assert_eq!(client.bearer(&planted).get(USERS).status, 200);
    set_password(&mut ldap, &person_dn(1), "Reset-by-admin-1");
    assert_eq!(client.bearer(&planted).get(USERS).status, 401);
    let (entries, _) = ldap
        .search(
            &person_dn(1),
            ldap3::Scope::Base,
            "(objectClass=*)",
            vec!["lmdirBearerToken", "userPassword"],
        )
        .unwrap()
        .success()
        .unwrap();
    let entry = ldap3::SearchEntry::construct(entries.into_iter().next().unwrap());
    assert!(!entry.attrs.contains_key("lmdirBearerToken"), "{entry:?}");
    assert!(entry.attrs.contains_key("userPassword"), "{entry:?}");
    assert_eq!(client.bearer(&kept).get(USERS).status, 200);
}

/// Replaces `dn`'s userPassword with `password` as `ldap`'s identity.
fn set_password(ldap: &mut ldap3::LdapConn, dn: &str, password: &str) {
    ldap.modify(
        dn,
        vec![ldap3::Mod::Replace("userPassword", [password].into())],
    )
    .unwrap()
    .success()
    .unwrap();
}

/// `require_tls` refuses a simple bind without TLS, Basic credentials on the plain-HTTP
/// loopback listener included; a bearer token is a credential too and is refused alike.
#[test]
fn require_tls_refuses_tokens_over_plain_http_as_it_refuses_binds() {
    let server = TestServer::start_populated(1, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.require_tls = true;
    });
    let mut ldap = common::bind_url(&server.ldapi_url(), ROOT_DN, ROOT_PASSWORD);
    let token = common::http::issue_token(&mut ldap, &person_dn(0), "plain-http-token");
    let client = client_of(&server);
    assert_eq!(
        client.basic("u0000000", PERSON_PASSWORD).get(USERS).status,
        401
    );
    assert_eq!(client.bearer(&token).get(USERS).status, 401);
}

/// `lmdir_password_checks_total` from the metrics listener.
fn password_checks(server: &TestServer) -> usize {
    use std::io::{Read, Write};
    let address = server.running().context().metrics_address();
    let mut stream = std::net::TcpStream::connect(address.expect("metrics")).expect("connect");
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

/// A token naming an entry without tokens (or no entry at all) was refused at once, while a
/// wrong secret for an entry holding tokens took a hash's time: the delay told which entries
/// hold tokens. Such a check now verifies the bind decoy, as a bind to a missing DN does, and
/// every refused token leaves a log line naming the DN and the client, as a failed bind does.
#[test]
fn refused_tokens_cost_a_verification_and_are_logged() {
    use base64::Engine;
    let logs = crate::captured_logs();
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.metrics_listen = Some("127.0.0.1:0".parse().expect("address"));
    });
    let client = client_of(&server);
    let token_of = |dn: &str| {
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dn.as_bytes());
        format!("lmdir.{encoded}.some-guess")
    };
    for dn in [
        "uid=nobody-here,ou=people,dc=example,dc=com",
        person_dn(1).as_str(),
    ] {
        let before = password_checks(&server);
        assert_eq!(client.bearer(&token_of(dn)).get(USERS).status, 401);
        let after = password_checks(&server);
        assert_eq!(after, before + 1, "{dn}: no verification ran");
        let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
        assert!(
            text.lines()
                .any(|line| line.contains("bearer token") && line.contains(dn)),
            "no log line for {dn}:\n{text}"
        );
    }
    // Both failures were charged to the bind throttle, per DN (the server was fresh).
    let (accounts, clients) = server.running().context().bind_throttle.tracked();
    assert!(accounts >= 2 && clients >= 1, "{accounts} {clients}");
}

/// A PATCH or PUT by someone who may write nothing of the resource is refused before its work
/// is done (a thousand operations applied, members resolved), whatever that work would have
/// said: before, a PATCH of an unmapped path and a PUT of the unchanged resource changed
/// nothing, wrote nothing and answered 200. A hidden resource stays a 404; a writer still gets
/// the work's own answer.
#[test]
fn write_access_is_decided_before_a_patch_or_put_is_worked() {
    let server = TestServer::start_populated(5, hiding_rules(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
    });
    let client = client_of(&server);
    let admin = client.basic(ROOT_DN, ROOT_PASSWORD);
    let person = client.basic("u0000001", PERSON_PASSWORD);
    let visible = format!("{USERS}/{}", id_of(&admin, "u0000003"));
    let hidden = format!("{USERS}/{}", id_of(&admin, "u0000002"));
    let bad_path =
        json!({"Operations": [{"op": "replace", "path": "noSuchAttribute", "value": "x"}]});
    let refused = person.send_json("PATCH", &visible, &bad_path);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(person.send_json("PATCH", &hidden, &bad_path).status, 404);
    let worked = admin.send_json("PATCH", &visible, &bad_path);
    assert_eq!(worked.status, 200, "{}", worked.text());
    let unchanged = admin.get(&visible).json();
    let put = person.send_json("PUT", &visible, &unchanged);
    assert_eq!(put.status, 403, "{}", put.text());
    assert_eq!(person.send_json("PUT", &hidden, &unchanged).status, 404);
    assert_eq!(admin.send_json("PUT", &visible, &unchanged).status, 200);
}

/// Connections from a trusted proxy meet only the whole cap (the proxy carries many clients),
/// so before, one client behind it could hold every request slot. Each forwarded client now
/// has `connections_per_address_max` requests in flight: past it 429 with Retry-After, while
/// another client behind the same proxy is served, and the slots come back when its requests
/// end.
#[test]
fn a_client_behind_a_trusted_proxy_cannot_hold_every_request_slot() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.http.tls = false;
        settings.http.trusted_proxies = vec!["127.0.0.1".to_string()];
        settings.http.connections_per_address_max = 2;
    });
    let client = client_of(&server);
    // Two sign-in forms from 192.0.2.7 whose bodies never come: both requests stay in flight.
    let hold = || {
        let mut stream = std::net::TcpStream::connect(client.address).expect("connect");
        let head = "POST /login HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.7\r\n\
            Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 20\r\n\r\n";
        std::io::Write::write_all(&mut stream, head.as_bytes()).expect("send");
        stream.set_nonblocking(true).expect("non-blocking");
        stream
    };
    // Answered (or closed) already: a held form the server reached while a probe below held
    // the client's other slot was refused, and holds nothing.
    let answered = |stream: &std::net::TcpStream| {
        !matches!(
            stream.peek(&mut [0u8; 1]),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock
        )
    };
    let mut held: Vec<std::net::TcpStream> = (0..2).map(|_| hold()).collect();
    let from = |address: &str| {
        format!("GET /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Forwarded-For: {address}\r\n\r\n")
    };
    let answer_for = |address: &str, wanted: &str, held: &mut Vec<std::net::TcpStream>| {
        let mut raw = Vec::new();
        for _ in 0..100 {
            raw = client.exchange(from(address).as_bytes());
            if status_lines(&raw) == [wanted] {
                break;
            }
            for stream in held.iter_mut() {
                if answered(stream) {
                    *stream = hold();
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        String::from_utf8_lossy(&raw).to_string()
    };
    let refused = answer_for("192.0.2.7", "HTTP/1.1 429 Too Many Requests", &mut held);
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1\r\n"),
        "{refused}"
    );
    let other = client.exchange(from("192.0.2.8").as_bytes());
    assert_eq!(status_lines(&other), ["HTTP/1.1 200 OK"]);
    held.clear();
    let served = answer_for("192.0.2.7", "HTTP/1.1 200 OK", &mut held);
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
}
