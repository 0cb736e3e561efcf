//! The web console in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`, which scripts/test.sh installs) driven over WebDriver signs in as the
//! administrator, creates a user, adds it to a group, signs in as that user, changes the
//! password (the policy's refusal shown first), is locked out by the policy's failures and is
//! unlocked by the administrator. A screenshot of each page is kept under
//! target/test-artifacts/console/. The session and CSRF attacks are plain HTTP requests.

use crate::common;

use common::http::Client;
use common::{root, TestServer, ROOT_DN, ROOT_PASSWORD};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process and one browser session in it.
struct Browser {
    driver: Child,
    client: Client,
    session: String,
    artifacts: PathBuf,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self
            .client
            .request("DELETE", &format!("/session/{}", self.session), &[], b"");
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    /// `certificate`: the server's PEM certificate, trusted by its key's hash (Chromium's
    /// `--ignore-certificate-errors-spki-list`), so the page is a secure context and its
    /// `Secure`, `__Host-` cookies are kept as a real deployment's would be.
    fn start(profile: &std::path::Path, certificate: &std::path::Path) -> Option<Browser> {
        let (chromium, driver) = (
            PathBuf::from("/usr/bin/chromium"),
            PathBuf::from("/usr/bin/chromedriver"),
        );
        if !chromium.exists() || !driver.exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "chromium and chromium-driver are missing: scripts/test.sh installs them"
            );
            eprintln!(
                "chromium/chromedriver not installed (scripts/test.sh installs them): not run"
            );
            return None;
        }
        let port = free_port();
        let process = Command::new(&driver)
            .arg(format!("--port={port}"))
            .spawn()
            .expect("chromedriver");
        let client = Client {
            address: ([127, 0, 0, 1], port).into(),
            certificate: None,
            authorization: None,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(client.address).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let arguments = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1200,1000",
        ];
        let mut args: Vec<String> = arguments
            .iter()
            .map(|argument| argument.to_string())
            .collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        args.push(format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_hash(certificate)
        ));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let answer = client.send_json("POST", "/session", &capabilities);
        let session = answer.json()["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {}", answer.text()))
            .to_string();
        let artifacts =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-artifacts/console");
        std::fs::create_dir_all(&artifacts).expect("artifacts directory");
        Some(Browser {
            driver: process,
            client,
            session,
            artifacts,
        })
    }

    fn command(&self, method: &str, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let answer = if method == "GET" {
            self.client.get(&path)
        } else {
            self.client.send_json(method, &path, &body)
        };
        let value = answer.json();
        assert_eq!(answer.status, 200, "{method} {path}: {value}");
        value["value"].clone()
    }

    fn go(&self, url: &str) {
        self.command("POST", "/url", json!({"url": url}));
    }

    /// The element `css` selects, waiting up to 10 s for a page that is still loading.
    fn find(&self, css: &str) -> String {
        let path = format!("/session/{}/element", self.session);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = self.client.send_json(
                "POST",
                &path,
                &json!({"using": "css selector", "value": css}),
            );
            if let Some(element) = answer.json()["value"][ELEMENT].as_str() {
                return element.to_string();
            }
            if Instant::now() > deadline {
                panic!("no element {css} on the page:\n{}", self.source());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css);
        self.command("POST", &format!("/element/{element}/clear"), json!({}));
        self.command(
            "POST",
            &format!("/element/{element}/value"),
            json!({"text": text}),
        );
    }

    /// Clicks `css` (every click here submits a form) and waits until the page it was on is
    /// gone, so the next look is at the page the form led to.
    fn click(&self, css: &str) {
        let page = self.find("html");
        let element = self.find(css);
        self.command("POST", &format!("/element/{element}/click"), json!({}));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let path = format!("/session/{}/element/{page}/name", self.session);
            let answer = self.client.get(&path);
            if answer.json()["value"]["error"] == "stale element reference" {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "clicking {css} left the page as it was"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn text(&self, css: &str) -> String {
        let element = self.find(css);
        self.command("GET", &format!("/element/{element}/text"), json!(null))
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn source(&self) -> String {
        self.command("GET", "/source", json!(null))
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn screenshot(&self, name: &str) {
        use base64::Engine;
        let data = self.command("GET", "/screenshot", json!(null));
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap())
            .expect("png");
        std::fs::write(self.artifacts.join(format!("{name}.png")), png).expect("write screenshot");
    }

    fn sign_in(&self, base: &str, user: &str, password: &str) {
        self.go(&format!("{base}/login"));
        self.type_into("#user", user);
        self.type_into("#password", password);
        self.click("#signin");
    }
}

/// base64(SHA-256(SubjectPublicKeyInfo)) of a PEM certificate, by openssl.
fn spki_hash(certificate: &std::path::Path) -> String {
    let script = format!(
        "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
        certificate.display()
    );
    let output = Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("openssl");
    assert!(
        output.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn add_policy(server: &TestServer) {
    let mut ldap = root(server);
    ldap.add(
        "cn=policy,dc=example,dc=com",
        vec![
            ("objectClass", ["organizationalRole", "pwdPolicy"].into()),
            ("cn", ["policy"].into()),
            ("pwdAttribute", ["userPassword"].into()),
            ("pwdLockout", ["TRUE"].into()),
            ("pwdMaxFailure", ["3"].into()),
            ("pwdMinLength", ["10"].into()),
            ("pwdCheckQuality", ["2"].into()),
            ("pwdInHistory", ["3"].into()),
        ],
    )
    .unwrap()
    .success()
    .unwrap();
}

fn start_server() -> (TestServer, String) {
    let server = TestServer::start_populated(3, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
        settings.password_policy_default = "cn=policy,dc=example,dc=com".to_string();
    });
    add_policy(&server);
    let base = format!("https://{}", server.running().http_address().unwrap());
    (server, base)
}

#[test]
fn an_administrator_and_a_user_work_the_console_in_a_browser() {
    let (server, base) = start_server();
    let profile = tempfile::tempdir().unwrap();
    let certificate = server
        .running()
        .context()
        .settings()
        .tls_certificate
        .clone()
        .unwrap();
    let Some(browser) = Browser::start(profile.path(), &certificate) else {
        return;
    };
    browser.go(&format!("{base}/login"));
    browser.screenshot("01-sign-in");
    browser.sign_in(&base, ROOT_DN, ROOT_PASSWORD);
    assert_eq!(browser.text("#me-dn"), ROOT_DN);
    browser.screenshot("02-admin-account");
    // Create alice.
    browser.go(&format!("{base}/users"));
    browser.type_into("form[action='/users/new'] #uid", "alice");
    browser.type_into("form[action='/users/new'] #givenName", "Alice");
    browser.type_into("form[action='/users/new'] #sn", "Liddell");
    browser.type_into("form[action='/users/new'] #password", "Rabbit-hole-1865");
    browser.click("#create-user");
    browser.find("#lock-state");
    assert!(
        browser
            .source()
            .contains("uid=alice,ou=People,dc=example,dc=com"),
        "user page"
    );
    browser.screenshot("03-user-created");
    browser.go(&format!("{base}/users?q=ali"));
    assert!(browser.source().contains("Alice Liddell"));
    browser.screenshot("04-users-search");
    // Add her to group0000.
    browser.go(&format!("{base}/groups"));
    browser.click("a[href*='group0000']");
    browser.type_into("form[action='/group/add'] #member", "alice");
    browser.click("#add-member");
    assert_eq!(browser.text("#notice"), "Member added.");
    browser.go(&format!(
        "{base}/group?dn=cn%3Dgroup0000%2Cou%3Dgroups%2Cdc%3Dexample%2Cdc%3Dcom&q=alice"
    ));
    assert!(
        browser.text("#members").contains("uid=alice"),
        "alice listed"
    );
    browser.screenshot("05-group-members");
    browser.click("#signout");
    // Alice changes her password: too short first, then a good one.
    browser.sign_in(&base, "alice", "Rabbit-hole-1865");
    assert!(browser.text("#me-dn").starts_with("uid=alice"));
    browser.type_into("#old", "Rabbit-hole-1865");
    browser.type_into("#new", "short");
    browser.type_into("#again", "short");
    browser.click("#change-password");
    let refusal = browser.text("#notice");
    assert!(refusal.contains("password policy"), "{refusal}");
    browser.screenshot("06-password-refused");
    browser.type_into("#old", "Rabbit-hole-1865");
    browser.type_into("#new", "Looking-glass-1871");
    browser.type_into("#again", "Looking-glass-1871");
    browser.click("#change-password");
    assert_eq!(browser.text("#notice"), "Your password was changed.");
    browser.screenshot("07-password-changed");
    browser.click("#signout");
    // Three wrong passwords lock her out: the right one is then refused too.
    for _ in 0..3 {
        browser.sign_in(&base, "alice", "not-her-password");
        assert!(browser
            .text("#notice")
            .contains("Wrong user name or password"));
    }
    browser.sign_in(&base, "alice", "Looking-glass-1871");
    assert!(browser.text("#notice").contains("locked"));
    browser.screenshot("08-locked-out");
    // The administrator unlocks her.
    browser.sign_in(&base, ROOT_DN, ROOT_PASSWORD);
    browser.go(&format!(
        "{base}/user?dn=uid%3Dalice%2Cou%3DPeople%2Cdc%3Dexample%2Cdc%3Dcom"
    ));
    assert!(browser.text("#lock-state").starts_with("Locked"));
    browser.screenshot("09-user-locked");
    browser.click("#unlock");
    assert_eq!(browser.text("#notice"), "Unlocked.");
    browser.screenshot("10-user-unlocked");
    browser.go(&format!("{base}/status"));
    assert_eq!(browser.text("#health"), "Ready");
    browser.find("#rates");
    browser.screenshot("11-status");
    browser.click("#signout");
    browser.sign_in(&base, "alice", "Looking-glass-1871");
    assert!(browser.text("#me-dn").starts_with("uid=alice"));
    browser.screenshot("12-user-back-in");
    drop(server);
}

fn cookie_of(answer: &common::http::Answer, name: &str) -> Option<String> {
    answer
        .headers
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case("set-cookie"))
        .find_map(|(_, value)| {
            value
                .strip_prefix(&format!("{name}="))
                .map(|rest| rest.split(';').next().unwrap_or("").to_string())
        })
}

/// An HTTPS client of the server's console, trusting its certificate.
fn https_client(server: &TestServer) -> Client {
    let certificate = server
        .running()
        .context()
        .settings()
        .tls_certificate
        .clone()
        .unwrap();
    Client::https(server.running().http_address().unwrap(), &certificate)
}

/// Signs in over plain requests: (session cookie, CSRF token of the account page).
fn sign_in(client: &Client, user: &str, password: &str) -> Option<(String, String)> {
    let login = client.get("/login");
    let token = cookie_of(&login, "__Host-lmdir_login").expect("login cookie");
    let body = format!(
        "csrf={token}&user={}&password={}",
        form_urlencoded::byte_serialize(user.as_bytes()).collect::<String>(),
        form_urlencoded::byte_serialize(password.as_bytes()).collect::<String>()
    );
    let answer = client.request(
        "POST",
        "/login",
        &[
            ("Cookie", &format!("__Host-lmdir_login={token}")),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    );
    let session = cookie_of(&answer, "__Host-lmdir").filter(|session| !session.is_empty())?;
    let me = client.request(
        "GET",
        "/me",
        &[("Cookie", &format!("__Host-lmdir={session}"))],
        b"",
    );
    let page = me.text();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)?
        .split('"')
        .next()?
        .to_string();
    Some((session, csrf))
}

#[test]
fn sessions_and_forms_resist_forgery_and_replay() {
    let (server, base) = start_server();
    let client = https_client(&server);
    let login = client.get("/login");
    assert_eq!(login.status, 200);
    let csp = login.header("content-security-policy").unwrap_or_default();
    assert!(csp.contains("default-src 'none'") && !csp.contains("script-src"));
    assert_eq!(login.header("x-frame-options"), Some("DENY"));
    assert_eq!(login.header("x-content-type-options"), Some("nosniff"));
    // Sign-in without the form's token is refused before any bind.
    let forged = client.request(
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        format!("user={ROOT_DN}&password={ROOT_PASSWORD}").as_bytes(),
    );
    assert_eq!(forged.status, 403);
    let (session, csrf) = sign_in(&client, ROOT_DN, ROOT_PASSWORD).expect("signed in");
    let set_cookie = client.request("GET", "/login", &[], b"");
    assert!(set_cookie
        .headers
        .iter()
        .any(|(key, value)| key.eq_ignore_ascii_case("set-cookie")
            && value.contains("HttpOnly")
            && value.contains("SameSite=Strict")
            && value.contains("Secure")));
    let with = |cookie: &str| format!("__Host-lmdir={cookie}");
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let post = |cookie: &str, body: &str| {
        let header = with(cookie);
        client.request(
            "POST",
            "/users/new",
            &[form[0], ("Cookie", header.as_str())],
            body.as_bytes(),
        )
    };
    // A form without the token, or with another, does nothing.
    assert_eq!(post(&session, "uid=mallory&sn=M").status, 403);
    assert_eq!(post(&session, "csrf=00&uid=mallory&sn=M").status, 403);
    // A forged session is not one.
    let forged = "ab".repeat(32);
    assert_eq!(
        client
            .request("GET", "/users", &[("Cookie", &with(&forged))], b"")
            .status,
        303
    );
    assert_eq!(
        post(&forged, &format!("csrf={csrf}&uid=mallory&sn=M")).status,
        403
    );
    // With both, it works; after sign-out the same cookie and token are refused (replay).
    assert_eq!(
        post(&session, &format!("csrf={csrf}&uid=trent&sn=T")).status,
        303
    );
    let out = client.request(
        "POST",
        "/logout",
        &[form[0], ("Cookie", &with(&session))],
        format!("csrf={csrf}").as_bytes(),
    );
    assert_eq!(out.status, 303);
    assert_eq!(
        post(&session, &format!("csrf={csrf}&uid=mallory&sn=M")).status,
        403
    );
    let mut ldap = root(&server);
    let (entries, _) = ldap
        .search(
            "ou=people,dc=example,dc=com",
            ldap3::Scope::Subtree,
            "(uid=mallory)",
            vec!["uid"],
        )
        .unwrap()
        .success()
        .unwrap();
    assert!(entries.is_empty());
    // A person signed in may do only what LDAP lets them: the default policy lets them not
    // create users.
    let (person, person_csrf) =
        sign_in(&client, "u0000001", common::PERSON_PASSWORD).expect("person signed in");
    let refused = post(&person, &format!("csrf={person_csrf}&uid=mallory&sn=M"));
    assert!(
        refused.text().contains("not allowed for you"),
        "{}",
        refused.text()
    );
    let _ = base;
}

/// A form's token counts only in its body (a token in a URL leaks through logs and history),
/// and a browser's cross-site request (`Sec-Fetch-Site: cross-site`) changes nothing even
/// with a session and a token: before, both were served.
#[test]
fn tokens_in_urls_and_cross_site_requests_are_refused() {
    let (server, _base) = start_server();
    let client = https_client(&server);
    let (session, csrf) = sign_in(&client, ROOT_DN, ROOT_PASSWORD).expect("signed in");
    let cookie = format!("__Host-lmdir={session}");
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let in_url = client.request(
        "POST",
        &format!("/users/new?csrf={csrf}"),
        &[form, ("Cookie", &cookie)],
        b"uid=mallory&sn=M",
    );
    assert_eq!(in_url.status, 403, "{}", in_url.text());
    let cross_site = client.request(
        "POST",
        "/users/new",
        &[form, ("Cookie", &cookie), ("Sec-Fetch-Site", "cross-site")],
        format!("csrf={csrf}&uid=eve&sn=E").as_bytes(),
    );
    assert_eq!(cross_site.status, 403, "{}", cross_site.text());
    let mut ldap = root(&server);
    let (entries, _) = ldap
        .search(
            "ou=people,dc=example,dc=com",
            ldap3::Scope::Subtree,
            "(|(uid=mallory)(uid=eve))",
            vec!["uid"],
        )
        .unwrap()
        .success()
        .unwrap();
    assert!(entries.is_empty(), "{entries:?}");
    // The same form from the console's own page is served.
    let same_origin = client.request(
        "POST",
        "/users/new",
        &[form, ("Cookie", &cookie), ("Sec-Fetch-Site", "same-origin")],
        format!("csrf={csrf}&uid=trent&sn=T").as_bytes(),
    );
    assert_eq!(same_origin.status, 303, "{}", same_origin.text());
}

/// A group's members come a page at a time (20), found through memberOf: the page says how
/// many there are and lists 20, whatever the group's size.
#[test]
fn group_members_are_paged() {
    let server = TestServer::start_populated(300, Vec::new(), |settings| {
        settings.http.listen = "127.0.0.1:0".to_string();
    });
    let client = https_client(&server);
    let (session, _) = sign_in(&client, ROOT_DN, ROOT_PASSWORD).expect("signed in");
    let cookie = format!("__Host-lmdir={session}");
    let page = |query: &str| {
        let answer = client.request(
            "GET",
            &format!("/group?dn=cn%3Dgroup0001%2Cou%3Dgroups%2Cdc%3Dexample%2Cdc%3Dcom{query}"),
            &[("Cookie", &cookie)],
            b"",
        );
        assert_eq!(answer.status, 200);
        answer.text()
    };
    let first = page("");
    assert!(first.contains("Page 1 of 5 (100 in all)"), "{first}");
    assert_eq!(first.matches("action=\"/group/remove\"").count(), 20);
    assert!(first.contains("uid=u0000100,") && !first.contains("uid=u0000120,"));
    let third = page("&page=3");
    assert!(
        third.contains("uid=u0000140,") && !third.contains("uid=u0000100,"),
        "{third}"
    );
    let searched = page("&q=u000019");
    assert!(searched.contains("(10 in all)"), "{searched}");
}

/// A password an administrator reset under `pwdMustChange` opens only its own change, as on
/// an LDAP connection (SCIM refuses it: 401); once changed, the console opens.
#[test]
fn a_reset_password_must_be_changed_first() {
    let (server, _) = start_server();
    let mut ldap = root(&server);
    ldap.modify(
        "cn=policy,dc=example,dc=com",
        vec![ldap3::Mod::Add("pwdMustChange", ["TRUE"].into())],
    )
    .unwrap()
    .success()
    .unwrap();
    let client = https_client(&server);
    let (admin, admin_csrf) = sign_in(&client, ROOT_DN, ROOT_PASSWORD).expect("admin signed in");
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let reset = client.request(
        "POST",
        "/user/password",
        &[form, ("Cookie", &format!("__Host-lmdir={admin}"))],
        format!("csrf={admin_csrf}&dn=uid%3Du0000001%2Cou%3Dpeople%2Cdc%3Dexample%2Cdc%3Dcom&password=Reset-by-admin-1").as_bytes(),
    );
    assert!(
        reset.text().contains("The password was reset."),
        "{}",
        reset.text()
    );
    assert_eq!(
        client
            .basic("u0000001", "Reset-by-admin-1")
            .get("/scim/v2/Users")
            .status,
        401
    );
    let (session, csrf) =
        sign_in(&client, "u0000001", "Reset-by-admin-1").expect("signed in to change");
    let cookie = format!("__Host-lmdir={session}");
    let users = client.request("GET", "/users", &[("Cookie", &cookie)], b"");
    assert_eq!((users.status, users.header("location")), (303, Some("/me")));
    let me = client.request("GET", "/me", &[("Cookie", &cookie)], b"");
    assert!(
        me.text().contains("reset by an administrator"),
        "{}",
        me.text()
    );
    let changed = client.request(
        "POST",
        "/me/password",
        &[form, ("Cookie", &cookie)],
        format!("csrf={csrf}&old=Reset-by-admin-1&new=Chosen-by-me-22&again=Chosen-by-me-22")
            .as_bytes(),
    );
    assert!(
        changed.text().contains("Your password was changed."),
        "{}",
        changed.text()
    );
    assert_eq!(
        client
            .request("GET", "/users", &[("Cookie", &cookie)], b"")
            .status,
        200
    );
    assert_eq!(
        client
            .basic("u0000001", "Chosen-by-me-22")
            .get("/scim/v2/Users")
            .status,
        200
    );
}

/// A session outlived its account: a user locked by an administrator (or deactivated over
/// SCIM) or deleted after signing in kept using the console for up to its 12 h lifetime. Each
/// request now finds the account as a bind would.
#[test]
fn a_session_ends_when_its_account_is_locked_or_deleted() {
    let (server, _) = start_server();
    let client = https_client(&server);
    let page = |session: &str| {
        let cookie = format!("__Host-lmdir={session}");
        client
            .request("GET", "/me", &[("Cookie", &cookie)], b"")
            .status
    };
    let user = common::person_dn(1);
    let (locked, _) = sign_in(&client, &user, common::PERSON_PASSWORD).expect("signed in");
    let (deleted, _) =
        sign_in(&client, &common::person_dn(2), common::PERSON_PASSWORD).expect("signed in");
    assert_eq!((page(&locked), page(&deleted)), (200, 200));
    let mut ldap = common::root(&server);
    ldap.modify(
        &user,
        vec![ldap3::Mod::Add(
            "pwdAccountLockedTime",
            ["000001010000Z"].into(),
        )],
    )
    .unwrap()
    .success()
    .unwrap();
    ldap.delete(&common::person_dn(2))
        .unwrap()
        .success()
        .unwrap();
    // Sent back to sign in (a redirect), and the session is gone for good.
    assert_eq!((page(&locked), page(&deleted)), (303, 303));
    ldap.modify(
        &user,
        vec![ldap3::Mod::Delete(
            "pwdAccountLockedTime",
            std::collections::HashSet::new(),
        )],
    )
    .unwrap()
    .success()
    .unwrap();
    assert_eq!(page(&locked), 303, "an ended session stays ended");
}

/// The status page shows what cn=Monitor holds (replication URLs and errors, connection and
/// session counts): it was open to every signed-in user. Now only to whom cn=Monitor is.
#[test]
fn the_status_page_is_only_for_whom_cn_monitor_is_open_to() {
    let (server, _) = start_server();
    let client = https_client(&server);
    let get = |session: &str, path: &str| {
        let cookie = format!("__Host-lmdir={session}");
        client
            .request("GET", path, &[("Cookie", &cookie)], b"")
            .text()
    };
    let (user, _) = sign_in(&client, &common::person_dn(1), common::PERSON_PASSWORD).unwrap();
    let (admin, _) = sign_in(&client, ROOT_DN, ROOT_PASSWORD).unwrap();
    let refused = get(&user, "/status");
    assert!(refused.contains("No such page.") && !refused.contains("id=\"health\""));
    assert!(!get(&user, "/me").contains("href=\"/status\""));
    assert!(get(&admin, "/status").contains("id=\"health\""));
    assert!(get(&admin, "/me").contains("href=\"/status\""));
}

/// The administrators' reset form sets a password without the current one; aimed at one's
/// own DN it let whoever held a session take the account. One's own password changes on the
/// account page, which asks for the current one.
#[test]
fn the_reset_form_does_not_change_ones_own_password() {
    let (server, _) = start_server();
    let client = https_client(&server);
    let own = common::person_dn(1);
    let (session, csrf) = sign_in(&client, &own, common::PERSON_PASSWORD).unwrap();
    let body = format!(
        "csrf={csrf}&dn={}&password=Taken-over-2026",
        form_urlencoded::byte_serialize(own.as_bytes()).collect::<String>()
    );
    let answer = client.request(
        "POST",
        "/user/password",
        &[
            ("Cookie", &format!("__Host-lmdir={session}")),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    );
    assert!(
        answer
            .text()
            .contains("Change your own password on your account page."),
        "{}",
        answer.text()
    );
    let bind = |password: &str| {
        let mut connection = ldap3::LdapConn::new(&server.ldap_url()).unwrap();
        connection.simple_bind(&own, password).unwrap().rc
    };
    assert_eq!(
        (bind(common::PERSON_PASSWORD), bind("Taken-over-2026")),
        (0, 49)
    );
}

/// The login page's Set-Cookie line over plain HTTP, sent with `extra` header lines.
fn login_cookie_line(server: &TestServer, extra: &str) -> String {
    use std::io::{Read, Write};
    let address = server.running().http_address().unwrap();
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    let request =
        format!("GET /login HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n");
    stream.write_all(request.as_bytes()).expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
        .lines()
        .find(|line| line.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie in\n{response}"))
        .to_string()
}

/// A console behind a TLS-terminating reverse proxy on loopback (plain http here): with the
/// proxy in `[http] trusted_proxies`, its `X-Forwarded-Proto: https` makes the login cookie the
/// `__Host-`, `Secure` one a browser on HTTPS keeps; the same header from a peer not trusted
/// changes nothing (before, the cookies were never Secure behind a proxy).
#[test]
fn behind_a_trusted_proxy_the_console_sets_secure_cookies() {
    for (trusted, forwarded, secure) in [
        (true, "X-Forwarded-Proto: https\r\n", true),
        (true, "", false),
        (false, "X-Forwarded-Proto: https\r\n", false),
    ] {
        let server = TestServer::start_populated(1, Vec::new(), |settings| {
            settings.http.listen = "127.0.0.1:0".to_string();
            settings.http.tls = false;
            if trusted {
                settings.http.trusted_proxies = vec!["127.0.0.1".to_string()];
            }
        });
        let line = login_cookie_line(&server, forwarded);
        let case = format!("trusted {trusted}, {forwarded:?}: {line}");
        assert_eq!(line.contains("__Host-lmdir_login="), secure, "{case}");
        assert_eq!(line.contains("; Secure"), secure, "{case}");
    }
}

/// A session outlived the password it was signed in with: after an administrator reset it,
/// or the person changed it elsewhere (a thief's session kept going after the owner changed
/// the password), the session lived on for up to 12 hours. A session now ends when the
/// password it was checked against changes; the session that changes it goes on.
#[test]
fn a_session_ends_when_its_password_is_reset_or_changed() {
    let (server, _) = start_server();
    let client = https_client(&server);
    let page = |session: &str| {
        let cookie = format!("__Host-lmdir={session}");
        client
            .request("GET", "/me", &[("Cookie", &cookie)], b"")
            .status
    };
    let reset_user = common::person_dn(1);
    let (reset, _) = sign_in(&client, &reset_user, common::PERSON_PASSWORD).expect("signed in");
    let user = common::person_dn(2);
    let (changing, csrf) = sign_in(&client, &user, common::PERSON_PASSWORD).expect("signed in");
    let (elsewhere, _) = sign_in(&client, &user, common::PERSON_PASSWORD).expect("signed in");
    assert_eq!(
        (page(&reset), page(&changing), page(&elsewhere)),
        (200, 200, 200)
    );
    let mut ldap = common::root(&server);
    ldap.modify(
        &reset_user,
        vec![ldap3::Mod::Replace(
            "userPassword",
            ["Reset-by-admin-1"].into(),
        )],
    )
    .unwrap()
    .success()
    .unwrap();
    assert_eq!(
        page(&reset),
        303,
        "a session outlived an administrator's reset"
    );
    let form = ("Content-Type", "application/x-www-form-urlencoded");
    let changed = client.request(
        "POST",
        "/me/password",
        &[form, ("Cookie", &format!("__Host-lmdir={changing}"))],
        format!(
            "csrf={csrf}&old={}&new=Chosen-by-me-22&again=Chosen-by-me-22",
            common::PERSON_PASSWORD
        )
        .as_bytes(),
    );
    assert!(
        changed.text().contains("Your password was changed."),
        "{}",
        changed.text()
    );
    assert_eq!(page(&changing), 200, "the session that changed it goes on");
    assert_eq!(
        page(&elsewhere),
        303,
        "another session outlived a password change"
    );
}
