//! Issue 23 item 2: SIGHUP reloads the whole config file into the running `lmdir serve`. An
//! access rule, a server limit, a `[[limits]]` rule and an index added by the reload take
//! effect while a connection opened before it keeps answering; the index is used once built;
//! cn=Monitor names the live file by its hash; an invalid file changes nothing and the log
//! says why.

use crate::support;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ldap3::{LdapConn, Scope, SearchEntry, SearchResult};
use support::{lmdir_binary, TestServer, ROOT_DN, ROOT_PASSWORD};

const WAIT_MAX: Duration = Duration::from_secs(120);
const PEOPLE_DN: &str = "ou=People,dc=example,dc=com";
const READER_DN: &str = "uid=reader,ou=People,dc=example,dc=com";
const SIZE_LIMIT_EXCEEDED: u32 = 4;
const ADMIN_LIMIT_EXCEEDED: u32 = 11;
/// `lmdir gen 60 --seed 1` has 7 people with this title.
const TITLE_FILTER: &str = "(title=Accountant)";

/// The `[database]` lines of every version of the config: the default index set written out
/// (a file's set replaces the default whole), then with `title` added; one access rule giving
/// users read and everyone else only auth.
const DEFAULT_INDEXES: &str = "objectClass = [\"eq\"], cn = [\"eq\", \"sub\"], \
     sn = [\"eq\", \"sub\"], givenName = [\"eq\", \"sub\"], mail = [\"eq\", \"sub\"], \
     uid = [\"eq\", \"sub\"], uidNumber = [\"eq\", \"ordered\"], \
     gidNumber = [\"eq\", \"ordered\"], member = [\"eq\"], uniqueMember = [\"eq\"], \
     memberOf = [\"eq\"], entryUUID = [\"eq\"], ou = [\"eq\"]";
const USERS_READ: &str = "[[access]]\nto = { subtree = \"dc=example,dc=com\" }\n\
     by = [ { who = \"users\", access = \"read\" }, { who = \"anonymous\", access = \"auth\" } ]\n";
/// Added by the reload, before the rule above: anonymous may read the people.
const ANONYMOUS_READS_PEOPLE: &str = "[[access]]\n\
     to = { subtree = \"ou=People,dc=example,dc=com\" }\n\
     by = [ { who = \"*\", access = \"read\" } ]\n";

fn receive_until(socket: &UnixDatagram, wanted: &str) {
    socket.set_read_timeout(Some(WAIT_MAX)).unwrap();
    let mut buffer = [0u8; 4096];
    loop {
        let length = socket.recv(&mut buffer).expect("a notification in time");
        if String::from_utf8_lossy(&buffer[..length]).contains(wanted) {
            return;
        }
    }
}

fn bind(port: u16, dn: &str, password: &str) -> LdapConn {
    let mut connection = LdapConn::new(&format!("ldap://127.0.0.1:{port}")).expect("connecting");
    connection
        .simple_bind(dn, password)
        .expect("bind")
        .success()
        .expect("bind result");
    connection
}

/// (entries, result code) of a subtree search of the people.
fn people(connection: &mut LdapConn, filter: &str) -> (Vec<SearchEntry>, u32) {
    let SearchResult(entries, result) = connection
        .search(PEOPLE_DN, Scope::Subtree, filter, vec!["title"])
        .expect("search");
    let entries = entries.into_iter().map(SearchEntry::construct).collect();
    (entries, result.rc)
}

/// The `[server]` lines, the `[database]` lines and the rules after them.
fn write_config(server: &TestServer, server_lines: &str, database_lines: &str) {
    let text = format!(
        "[server]\nlisten = [\"ldap://127.0.0.1:{}\"]\n{server_lines}\n\
         [database]\nsuffix = \"dc=example,dc=com\"\ndirectory = \"{}\"\nrootdn = \"{ROOT_DN}\"\n\
         rootpw = \"{ROOT_PASSWORD}\"\n{database_lines}\n",
        server.port,
        server.database_directory().display(),
    );
    std::fs::write(&server.config_path, text).unwrap();
}

fn spawn_serve(config: &Path, log: &Path, notify: &Path) -> Child {
    Command::new(lmdir_binary())
        .arg("--config")
        .arg(config)
        .args(["serve", "--no-demo"])
        .env("NOTIFY_SOCKET", notify)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawning lmdir serve")
}

fn hang_up(child: &Child, notifications: &UnixDatagram) {
    let status = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    receive_until(notifications, "RELOADING=1");
    receive_until(notifications, "READY=1");
}

/// cn=Monitor's description of the live configuration.
fn live_config(root: &mut LdapConn) -> String {
    let SearchResult(entries, result) = root
        .search(
            "cn=Configuration,cn=Monitor",
            Scope::Base,
            "(objectClass=*)",
            vec!["monitoredInfo"],
        )
        .expect("monitor search");
    assert_eq!(result.rc, 0, "{result:?}");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the entry"));
    entry.attrs["monitoredInfo"][0].clone()
}

/// `sha256:` and the first 16 hex digits of the file's SHA-256, by `sha256sum`.
fn file_hash(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    format!("sha256:{}", &text[..16])
}

fn wait_for_log(log: &Path, wanted: &str) -> String {
    let deadline = Instant::now() + WAIT_MAX;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(wanted) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {wanted:?} in the log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sighup_applies_a_rule_a_limit_and_an_index_and_an_invalid_file_changes_nothing() {
    let server = TestServer::prepare(
        "", 60, // `lmdir gen 60 --seed 1`, loaded offline
    );
    let base_server = "log = \"warn\"\nsize_limit = 0\nlookthrough_limit = 20";
    write_config(
        &server,
        base_server,
        &format!("index = {{ {DEFAULT_INDEXES} }}\n{USERS_READ}"),
    );
    let scratch = server.directory.path();
    let (log, notify) = (scratch.join("serve.log"), scratch.join("notify.sock"));
    let notifications = UnixDatagram::bind(&notify).unwrap();
    let child = spawn_serve(&server.config_path, &log, &notify);
    receive_until(&notifications, "READY=1");
    let mut root = bind(server.port, ROOT_DN, ROOT_PASSWORD);
    let reader = vec![
        ("objectClass", ["inetOrgPerson"].into_iter().collect()),
        ("uid", ["reader"].into_iter().collect()),
        ("cn", ["Reader"].into_iter().collect()),
        ("sn", ["Reader"].into_iter().collect()),
        ("userPassword", ["readerpw"].into_iter().collect()),
    ];
    root.add(READER_DN, reader).unwrap().success().unwrap();
    let first_identity = live_config(&mut root);
    assert!(
        first_identity.starts_with(&file_hash(&server.config_path)),
        "{first_identity}"
    );

    // Before: the user's title search scans past the look-through limit (no title index);
    // anonymous sees no one.
    let mut open_before = bind(server.port, READER_DN, "readerpw");
    let (_, code) = people(&mut open_before, TITLE_FILTER);
    assert_eq!(code, ADMIN_LIMIT_EXCEEDED, "unindexed before the reload");
    let mut anonymous = LdapConn::new(&format!("ldap://127.0.0.1:{}", server.port)).unwrap();
    assert!(people(&mut anonymous, TITLE_FILTER).0.is_empty());

    // The reload: a title index, a server size limit of 5, anonymous limited to 2 entries by
    // a [[limits]] rule, a rule letting anonymous read the people; `sync` needs a restart.
    let reloaded_server = "log = \"info\"\nsize_limit = 5\nlookthrough_limit = 20";
    let reloaded_database = format!(
        "sync = false\nindex = {{ {DEFAULT_INDEXES}, title = [\"eq\"] }}\n\
         {ANONYMOUS_READS_PEOPLE}{USERS_READ}\
         [[limits]]\nwho = \"anonymous\"\nsize = 2\n"
    );
    write_config(&server, reloaded_server, &reloaded_database);
    hang_up(&child, &notifications);
    let reloaded_hash = file_hash(&server.config_path);
    let text = wait_for_log(&log, "indexes built and in use: title:eq");
    assert!(
        text.contains("database.sync changed; it needs a restart"),
        "{text}"
    );
    assert!(
        text.contains(&format!("configuration {reloaded_hash}")),
        "{text}"
    );
    let live = live_config(&mut root);
    assert!(live.starts_with(&reloaded_hash), "{live}");

    // The connection opened before the reload: indexed now, and cut at the new size limit.
    let (entries, code) = people(&mut open_before, TITLE_FILTER);
    assert_eq!((entries.len(), code), (5, SIZE_LIMIT_EXCEEDED));
    // The rootdn has no limits: all 7.
    let (entries, code) = people(&mut root, TITLE_FILTER);
    assert_eq!((entries.len(), code), (7, 0));
    assert!(entries
        .iter()
        .all(|entry| entry.attrs["title"] == ["Accountant"]));
    // Anonymous, on its connection from before the reload: the new rule and its own limit.
    let (entries, code) = people(&mut anonymous, TITLE_FILTER);
    assert_eq!((entries.len(), code), (2, SIZE_LIMIT_EXCEEDED));

    // An invalid file (a [[limits]] rule the schema cannot resolve) changes nothing, not
    // even the size limit it also lowers; nor does a file that is not TOML.
    let invalid_database = format!(
        "{reloaded_database}[[limits]]\nwho = \"group=noSuchType=x,dc=example,dc=com\"\nsize = 1\n"
    );
    write_config(
        &server,
        "log = \"info\"\nsize_limit = 1\nlookthrough_limit = 20",
        &invalid_database,
    );
    hang_up(&child, &notifications);
    let text = wait_for_log(&log, "nothing changed, the live configuration is");
    assert!(text.contains("[[limits]]"), "{text}");
    std::fs::write(&server.config_path, "[server\nsize_limit = 1\n").unwrap();
    hang_up(&child, &notifications);
    assert_eq!(live_config(&mut root), live);
    let (entries, code) = people(&mut open_before, TITLE_FILTER);
    assert_eq!((entries.len(), code), (5, SIZE_LIMIT_EXCEEDED));
    let (entries, code) = people(&mut anonymous, TITLE_FILTER);
    assert_eq!((entries.len(), code), (2, SIZE_LIMIT_EXCEEDED));

    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output.status);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.matches("nothing changed, the live configuration is")
            .count(),
        2,
        "{text}"
    );
    write_config(&server, reloaded_server, &reloaded_database);
    server.assert_check_clean("after the reloads");
}

/// People under ou=People at `port`, as the rootdn counts them.
fn people_count(port: u16) -> usize {
    let mut root = bind(port, ROOT_DN, ROOT_PASSWORD);
    let SearchResult(entries, _) = root
        .search(PEOPLE_DN, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    entries.len()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A replication consumer added by SIGHUP starts and pulls the provider; removed by the next
/// SIGHUP it stops (cn=Monitor no longer shows it, and a later change on the provider stays
/// there); the server's other connections are undisturbed.
#[test]
fn sighup_starts_and_stops_a_replication_consumer() {
    let replication = |sid: u16| format!("[replication]\nserver_id = {sid}\nprovider = true\n");
    let provider = TestServer::prepare_with(
        &support::Settings {
            database: &replication(1),
            ..support::Settings::default()
        },
        20,
    );
    let mut provider = provider;
    provider.start();
    let node = TestServer::prepare_with(
        &support::Settings {
            database: &replication(2),
            ..support::Settings::default()
        },
        0,
    );
    let base = std::fs::read_to_string(&node.config_path).unwrap();
    let scratch = node.directory.path();
    let (log, notify) = (scratch.join("serve.log"), scratch.join("notify.sock"));
    let notifications = UnixDatagram::bind(&notify).unwrap();
    let child = spawn_serve(&node.config_path, &log, &notify);
    receive_until(&notifications, "READY=1");
    let mut open_before = bind(node.port, ROOT_DN, ROOT_PASSWORD);
    assert_eq!(people_count(node.port), 0);

    let consumer = format!(
        "[[replication.consumer]]\nrid = 1\nprovider = \"ldap://127.0.0.1:{}\"\n\
         search_base = \"dc=example,dc=com\"\ntype = \"refreshOnly\"\ninterval_seconds = 1\n\
         retry_seconds = 1\nbind_dn = \"{ROOT_DN}\"\ncredentials = \"{ROOT_PASSWORD}\"\n",
        provider.port
    );
    std::fs::write(&node.config_path, format!("{base}{consumer}")).unwrap();
    hang_up(&child, &notifications);
    let provider_people = people_count(provider.port);
    wait_until("the consumer's refresh", || {
        people_count(node.port) == provider_people
    });
    let consumer_entry = "cn=Consumer 001,cn=Database 1,cn=Databases,cn=Monitor";
    let SearchResult(shown, _) = open_before
        .search(consumer_entry, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .unwrap();
    assert_eq!(shown.len(), 1, "cn=Monitor shows the added consumer");

    std::fs::write(&node.config_path, &base).unwrap();
    hang_up(&child, &notifications);
    let SearchResult(shown, result) = open_before
        .search(consumer_entry, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .unwrap();
    assert!(shown.is_empty() && result.rc == 32, "{result:?}");
    let mut root = bind(provider.port, ROOT_DN, ROOT_PASSWORD);
    let late = vec![
        ("objectClass", ["inetOrgPerson"].into_iter().collect()),
        ("uid", ["late"].into_iter().collect()),
        ("cn", ["Late"].into_iter().collect()),
        ("sn", ["Late"].into_iter().collect()),
    ];
    root.add(&format!("uid=late,{PEOPLE_DN}"), late)
        .unwrap()
        .success()
        .unwrap();
    // Three poll intervals of the removed consumer: nothing arrives.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(people_count(node.port), provider_people);
    assert_eq!(people_count(provider.port), provider_people + 1);

    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output.status);
}

/// The schema file a reload adds: a new attribute type and an auxiliary class allowing it.
/// `{syntax}` is the attribute's SYNTAX (Directory String first; a later version changes it).
fn colour_schema(syntax: &str) -> String {
    format!(
        "attributetype ( 1.3.6.1.4.1.99999.7.1 NAME 'exampleColour'\n\
         \tDESC 'a colour' EQUALITY caseIgnoreMatch SUBSTR caseIgnoreSubstringsMatch\n\
         \tSYNTAX {syntax} )\n\
         objectclass ( 1.3.6.1.4.1.99999.8.1 NAME 'exampleColoured' AUXILIARY\n\
         \tMAY exampleColour )\n"
    )
}
const DIRECTORY_STRING: &str = "1.3.6.1.4.1.1466.115.121.1.15";
const IA5_STRING: &str = "1.3.6.1.4.1.1466.115.121.1.26";
const UNDEFINED_ATTRIBUTE_TYPE: u32 = 17;

fn coloured_person(uid: &str, colour: &str) -> Vec<(String, std::collections::HashSet<String>)> {
    let values = |values: &[&str]| values.iter().map(|value| value.to_string()).collect();
    vec![
        (
            "objectClass".to_string(),
            values(&["inetOrgPerson", "exampleColoured"]),
        ),
        ("uid".to_string(), values(&[uid])),
        ("cn".to_string(), values(&[uid])),
        ("sn".to_string(), values(&[uid])),
        ("exampleColour".to_string(), values(&[colour])),
    ]
}

/// DNs of the people whose colour matches `filter`, as `connection` sees them.
fn coloured(connection: &mut LdapConn, filter: &str) -> Vec<String> {
    let SearchResult(entries, result) = connection
        .search(PEOPLE_DN, Scope::Subtree, filter, vec!["exampleColour"])
        .expect("search");
    assert_eq!(result.rc, 0, "{result:?}");
    let mut dns: Vec<String> = entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn)
        .collect();
    dns.sort();
    dns
}

/// cn=Subschema's attributeTypes and objectClasses values that name `name`.
fn subschema_definitions(connection: &mut LdapConn, name: &str) -> Vec<String> {
    let SearchResult(entries, result) = connection
        .search(
            "cn=Subschema",
            Scope::Base,
            "(objectClass=subschema)",
            vec!["attributeTypes", "objectClasses"],
        )
        .expect("subschema search");
    assert_eq!(result.rc, 0, "{result:?}");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("cn=Subschema"));
    let wanted = format!("NAME '{name}'");
    entry
        .attrs
        .values()
        .flatten()
        .filter(|definition| definition.contains(&wanted))
        .cloned()
        .collect()
}

/// A `lmdir serve` killed when the test ends early (a failed assertion), so no server outlives
/// a failing run.
struct Serving(Option<Child>);

impl Serving {
    fn child(&self) -> &Child {
        self.0.as_ref().expect("running")
    }

    /// SIGTERM, and the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        child.wait().unwrap()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// cn=Subschema's (createTimestamp, modifyTimestamp).
fn subschema_times(connection: &mut LdapConn) -> (String, String) {
    let SearchResult(entries, result) = connection
        .search(
            "cn=Subschema",
            Scope::Base,
            "(objectClass=*)",
            vec!["createTimestamp", "modifyTimestamp"],
        )
        .expect("subschema search");
    assert_eq!(result.rc, 0, "{result:?}");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("cn=Subschema"));
    let time = |name: &str| entry.attrs[name][0].clone();
    (time("createTimestamp"), time("modifyTimestamp"))
}

/// Schema additions by SIGHUP: a connection opened before the reload adds an entry with the
/// new attribute type and auxiliary class (refused as undefinedAttributeType before), finds
/// it by the new attribute through the index the same reload added, and sees both in
/// cn=Subschema; a later reload that changes the attribute's syntax is refused whole, logged
/// with the definition and what differs, and changes nothing.
#[test]
fn sighup_adds_schema_live_and_refuses_a_changed_definition() {
    let server = TestServer::prepare("", 5);
    let schema_path = server.directory.path().join("colour.schema");
    let database = |indexes: &str| {
        format!(
            "schema_files = [\"{}\"]\nindex = {{ {DEFAULT_INDEXES}{indexes} }}\n",
            schema_path.display()
        )
    };
    // Before: the file lists no schema file.
    write_config(
        &server,
        "log = \"info\"",
        &format!("index = {{ {DEFAULT_INDEXES} }}\n"),
    );
    let scratch = server.directory.path();
    let (log, notify) = (scratch.join("serve.log"), scratch.join("notify.sock"));
    let notifications = UnixDatagram::bind(&notify).unwrap();
    let serving = Serving(Some(spawn_serve(&server.config_path, &log, &notify)));
    receive_until(&notifications, "READY=1");
    let mut open_before = bind(server.port, ROOT_DN, ROOT_PASSWORD);
    let teal_dn = format!("uid=teal,{PEOPLE_DN}");
    let refused = open_before
        .add(&teal_dn, coloured_person("teal", "Teal"))
        .unwrap();
    assert_eq!(refused.rc, UNDEFINED_ATTRIBUTE_TYPE, "{refused:?}");
    assert!(subschema_definitions(&mut open_before, "exampleColour").is_empty());
    let (created, modified) = subschema_times(&mut open_before);
    assert_eq!(created, modified, "the schema the server started with");
    // GeneralizedTime has whole seconds: the reload's modifyTimestamp is a later second.
    std::thread::sleep(Duration::from_millis(1100));

    // The reload: the schema file, and an equality index on its attribute.
    std::fs::write(&schema_path, colour_schema(DIRECTORY_STRING)).unwrap();
    write_config(
        &server,
        "log = \"info\"",
        &database(", exampleColour = [\"eq\"]"),
    );
    hang_up(serving.child(), &notifications);
    let text = wait_for_log(&log, "indexes built and in use: ");
    assert!(
        text.contains(
            "schema extended live: attribute type exampleColour, object class exampleColoured"
        ),
        "{text}"
    );
    let live = live_config(&mut open_before);
    assert!(live.starts_with(&file_hash(&server.config_path)), "{live}");

    // The same connection: the entries are accepted, found by the new attribute.
    for (uid, colour) in [("teal", "Teal"), ("crimson", "Crimson"), ("teal2", "TEAL")] {
        let dn = format!("uid={uid},{PEOPLE_DN}");
        open_before
            .add(&dn, coloured_person(uid, colour))
            .unwrap()
            .success()
            .unwrap();
    }
    let teals = vec![teal_dn.clone(), format!("uid=teal2,{PEOPLE_DN}")];
    assert_eq!(coloured(&mut open_before, "(exampleColour=teal)"), teals);
    assert_eq!(
        coloured(
            &mut open_before,
            "(&(objectClass=exampleColoured)(exampleColour=crim*))"
        ),
        vec![format!("uid=crimson,{PEOPLE_DN}")]
    );
    let attribute = subschema_definitions(&mut open_before, "exampleColour");
    assert_eq!(attribute.len(), 1, "{attribute:?}");
    assert!(attribute[0].contains(DIRECTORY_STRING), "{attribute:?}");
    assert_eq!(
        subschema_definitions(&mut open_before, "exampleColoured").len(),
        1
    );
    let (created_after, extended) = subschema_times(&mut open_before);
    assert_eq!(created_after, created);
    assert!(extended > modified, "{extended} after {modified}");

    // A reload that changes the attribute's syntax: refused whole (its new limit too).
    std::fs::write(&schema_path, colour_schema(IA5_STRING)).unwrap();
    write_config(
        &server,
        "log = \"info\"\nsize_limit = 1",
        &database(", exampleColour = [\"eq\"]"),
    );
    hang_up(serving.child(), &notifications);
    let text = wait_for_log(&log, "nothing changed, the live configuration is");
    assert!(
        text.contains(
            "attribute type 'exampleColour' (1.3.6.1.4.1.99999.7.1) changed (SYNTAX differ)"
        ),
        "{text}"
    );
    assert_eq!(live_config(&mut open_before), live);
    assert_eq!(coloured(&mut open_before, "(exampleColour=teal)"), teals);
    assert_eq!(
        subschema_definitions(&mut open_before, "exampleColour"),
        attribute
    );
    assert_eq!(subschema_times(&mut open_before), (created, extended));
    let mut opened_after = bind(server.port, ROOT_DN, ROOT_PASSWORD);
    assert_eq!(coloured(&mut opened_after, "(exampleColour=TEAL)"), teals);

    let status = serving.stop();
    assert!(status.success(), "{status}");
    std::fs::write(&schema_path, colour_schema(DIRECTORY_STRING)).unwrap();
    server.assert_check_clean("after the schema reloads");
}

/// Starts `lmdir serve` on `server`'s config, logging to `serve.log` in its directory; the
/// notification socket says when it is ready and when each reload is done.
fn serve_with_notifications(server: &TestServer) -> (Serving, UnixDatagram, std::path::PathBuf) {
    let scratch = server.directory.path();
    let (log, notify) = (scratch.join("serve.log"), scratch.join("notify.sock"));
    let notifications = UnixDatagram::bind(&notify).unwrap();
    let serving = Serving(Some(spawn_serve(&server.config_path, &log, &notify)));
    receive_until(&notifications, "READY=1");
    (serving, notifications, log)
}

/// The result code of a base search of cn=Monitor's entry for consumer rid 1 (32: none).
fn consumer_shown(connection: &mut LdapConn) -> u32 {
    let consumer_entry = "cn=Consumer 001,cn=Database 1,cn=Databases,cn=Monitor";
    let SearchResult(_, result) = connection
        .search(consumer_entry, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .unwrap();
    result.rc
}

/// A reload never starts consumers under a replication identity it did not apply (a data
/// loss: a consumer meant for a multi-provider node, run by a standalone one, resolves no
/// conflicts and its first refresh deletes every local entry its provider lacks). Case A: a
/// standalone server reloaded into a multi-provider node (server_id, provider, a consumer);
/// case B: then twice into a read-only replica, which needs a restart too; the record of what
/// runs must not take the refused file for running, so the second time is refused again and
/// the restart warnings repeat. Every time the consumer is not started (cn=Monitor has no
/// entry for it, registered before the reload answers READY) and the server stays writable.
#[test]
fn sighup_never_starts_consumers_under_a_replication_identity_it_did_not_apply() {
    let server = TestServer::prepare("", 5);
    let indexes = format!("index = {{ {DEFAULT_INDEXES} }}\n");
    write_config(&server, "log = \"info\"", &indexes);
    let (serving, notifications, log) = serve_with_notifications(&server);
    let mut root = bind(server.port, ROOT_DN, ROOT_PASSWORD);
    // Nothing listens there: the consumer, if started, would only retry.
    let consumer = format!(
        "[[replication.consumer]]\nrid = 1\nprovider = \"ldap://127.0.0.1:{}\"\n\
         search_base = \"dc=example,dc=com\"\ntype = \"refreshOnly\"\n\
         bind_dn = \"{ROOT_DN}\"\ncredentials = \"{ROOT_PASSWORD}\"\n",
        support::free_port()
    );
    let multi_provider =
        format!("{indexes}[replication]\nserver_id = 1\nprovider = true\n{consumer}");
    let replica = format!("{indexes}{consumer}");
    let refused_consumers = "reload: replication.consumer (";
    for (round, database) in [&multi_provider, &replica, &replica]
        .into_iter()
        .enumerate()
    {
        write_config(&server, "log = \"info\"", database);
        hang_up(serving.child(), &notifications);
        assert_eq!(consumer_shown(&mut root), 32, "round {round}: not started");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            text.matches(refused_consumers).count(),
            round + 1,
            "round {round}: named as needing a restart every time\n{text}"
        );
        assert!(
            live_config(&mut root).contains("waiting for a restart: "),
            "round {round}"
        );
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("reload: replication (server_id, provider"),
        "{text}"
    );
    // Still the writable standalone server it was: the rootdn's add is applied, not referred.
    let added = vec![
        ("objectClass", ["inetOrgPerson"].into_iter().collect()),
        ("uid", ["kept"].into_iter().collect()),
        ("cn", ["Kept"].into_iter().collect()),
        ("sn", ["Kept"].into_iter().collect()),
    ];
    root.add(&format!("uid=kept,{PEOPLE_DN}"), added)
        .unwrap()
        .success()
        .unwrap();
    assert_eq!(people_count(server.port), 6);
    assert!(serving.stop().success());
}

const CONFIDENTIALITY_REQUIRED: u32 = 13;

/// `require_tls` is checked against what will run: the TLS files and listeners need a restart,
/// so a file adding them with `require_tls = true` to a server without TLS is refused whole
/// (StartTLS is not offered until the restart; applying require_tls alone would refuse every
/// bind over ldap:// with confidentialityRequired).
#[test]
fn sighup_refuses_require_tls_the_running_listeners_cannot_offer() {
    let server = TestServer::prepare("", 0);
    let indexes = format!("index = {{ {DEFAULT_INDEXES} }}\n");
    write_config(&server, "log = \"info\"", &indexes);
    let (serving, notifications, log) = serve_with_notifications(&server);
    let mut root = bind(server.port, ROOT_DN, ROOT_PASSWORD);
    let live = live_config(&mut root);
    let scratch = server.directory.path();
    let tls = format!(
        "log = \"info\"\nrequire_tls = true\ntls_certificate = \"{}\"\ntls_key = \"{}\"",
        scratch.join("cert.pem").display(),
        scratch.join("key.pem").display()
    );
    write_config(&server, &tls, &indexes);
    hang_up(serving.child(), &notifications);
    let mut connection = LdapConn::new(&format!("ldap://127.0.0.1:{}", server.port)).unwrap();
    let result = connection.simple_bind(ROOT_DN, ROOT_PASSWORD).unwrap();
    assert_ne!(result.rc, CONFIDENTIALITY_REQUIRED, "{result:?}");
    assert_eq!(result.rc, 0, "{result:?}");
    let text = wait_for_log(&log, "nothing changed, the live configuration is");
    assert!(text.contains("server.require_tls"), "{text}");
    assert_eq!(live_config(&mut root), live);
    assert!(serving.stop().success());
}

const CONSTRAINT_VIOLATION: u32 = 19;

/// A person under ou=People with `mail`.
fn person_with_mail(uid: &str, mail: &str) -> Vec<(String, std::collections::HashSet<String>)> {
    let value = |value: &str| [value.to_string()].into_iter().collect();
    vec![
        ("objectClass".to_string(), value("inetOrgPerson")),
        ("uid".to_string(), value(uid)),
        ("cn".to_string(), value(uid)),
        ("sn".to_string(), value(uid)),
        ("mail".to_string(), value(mail)),
    ]
}

/// `member` values of `dn` as the rootdn reads them.
fn members_of(connection: &mut LdapConn, dn: &str) -> Vec<String> {
    let SearchResult(entries, result) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec!["member"])
        .expect("search");
    assert_eq!(result.rc, 0, "{result:?}");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the group"));
    entry.attrs.get("member").cloned().unwrap_or_default()
}

/// `[integrity]` and `[[dynlist]]` apply live: a unique rule added by SIGHUP refuses the next
/// duplicate, on a connection opened before it; a dynamic group rule lists the members its
/// URL finds. A rule that does not compile (an unknown attribute) refuses the reload, instead
/// of being accepted and failing the next start; `log_format` needs a restart and says so.
#[test]
fn sighup_applies_integrity_and_dynlist_rules_and_refuses_an_invalid_one() {
    let server = TestServer::prepare("", 3);
    let indexes = format!("index = {{ {DEFAULT_INDEXES} }}\n");
    write_config(&server, "log = \"info\"", &indexes);
    let (serving, notifications, log) = serve_with_notifications(&server);
    let mut root = bind(server.port, ROOT_DN, ROOT_PASSWORD);
    let group = "cn=found,dc=example,dc=com";
    let url = format!("ldap:///{PEOPLE_DN}??one?(uid=same*)");
    let group_entry = vec![
        (
            "objectClass",
            ["organizationalRole", "extensibleObject"]
                .into_iter()
                .collect(),
        ),
        ("cn", ["found"].into_iter().collect()),
        ("labeledURI", [url.as_str()].into_iter().collect()),
    ];
    root.add(group, group_entry).unwrap().success().unwrap();
    let dn = |uid: &str| format!("uid={uid},{PEOPLE_DN}");
    root.add(&dn("same1"), person_with_mail("same1", "same@example.com"))
        .unwrap()
        .success()
        .unwrap();
    assert!(members_of(&mut root, group).is_empty(), "no rule yet");

    let rules = format!(
        "{indexes}[[integrity.unique]]\nattributes = [\"mail\"]\n\
         [[dynlist]]\nobject_class = \"extensibleObject\"\nurl_attribute = \"labeledURI\"\n"
    );
    write_config(&server, "log = \"info\"\nlog_format = \"json\"", &rules);
    hang_up(serving.child(), &notifications);
    let refused = root
        .add(&dn("same2"), person_with_mail("same2", "same@example.com"))
        .unwrap();
    assert_eq!(refused.rc, CONSTRAINT_VIOLATION, "{refused:?}");
    assert_eq!(members_of(&mut root, group), vec![dn("same1")]);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("server.log_format changed; it needs a restart"),
        "{text}"
    );

    let live = live_config(&mut root);
    let invalid = format!("{rules}[integrity]\nreferential_attributes = [\"noSuchAttr\"]\n");
    write_config(&server, "log = \"info\"", &invalid);
    hang_up(serving.child(), &notifications);
    let text = wait_for_log(&log, "nothing changed, the live configuration is");
    assert!(text.contains("noSuchAttr"), "{text}");
    assert_eq!(live_config(&mut root), live);
    let refused = root
        .add(&dn("same3"), person_with_mail("same3", "same@example.com"))
        .unwrap();
    assert_eq!(
        refused.rc, CONSTRAINT_VIOLATION,
        "the rules in force stay: {refused:?}"
    );
    assert!(serving.stop().success());
    write_config(&server, "log = \"info\"", &rules);
    server.assert_check_clean("after the integrity reloads");
}
/// Size of the search request `oversized_search` sends: over 1 KiB, the lowest
/// `anonymous_pdu_bytes_max`, and under the defaults.
const OVERSIZED_FILTER_BYTES: usize = 3000;

/// A search whose filter holds `OVERSIZED_FILTER_BYTES` bytes, as message `message_id`.
fn oversized_search(message_id: u32) -> Vec<u8> {
    let value = vec![b'x'; OVERSIZED_FILTER_BYTES];
    let filter = support::ber::equality(b"cn", &value);
    support::ber::search(message_id, PEOPLE_DN, &filter, &[b"1.1"])
}

/// Sends `oversized_search` and reads until its result (application 5, tag 0x65) arrives.
fn search_answered(stream: &mut std::net::TcpStream, message_id: u32) {
    use std::io::{Read, Write};
    stream.write_all(&oversized_search(message_id)).unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let mut rest = &received[..];
        while let Some((tag, length)) = support::ber::first_message(rest) {
            if tag == 0x65 {
                return;
            }
            rest = &rest[length..];
        }
        let count = stream.read(&mut buffer).expect("an answer");
        assert!(count > 0, "closed before the result");
        received.extend_from_slice(&buffer[..count]);
    }
}

/// The request size limits bite on connections opened before the reload that lowers them: an
/// operator lowering them during an attack expects that. Before the reload both connections
/// (anonymous and bound) are answered a request over 1 KiB; after it both are closed for one.
#[test]
fn sighup_lowers_the_request_size_limits_of_open_connections() {
    use std::io::Write;
    let server = TestServer::prepare("", 0);
    let indexes = format!("index = {{ {DEFAULT_INDEXES} }}\n");
    write_config(&server, "log = \"info\"", &indexes);
    let (serving, notifications, log) = serve_with_notifications(&server);
    let connect = || {
        let stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        stream.set_read_timeout(Some(WAIT_MAX)).unwrap();
        stream
    };
    let (mut anonymous, mut bound) = (connect(), connect());
    bound
        .write_all(&support::ber::simple_bind(1, ROOT_DN, ROOT_PASSWORD))
        .unwrap();
    search_answered(&mut anonymous, 1);
    search_answered(&mut bound, 2);

    write_config(
        &server,
        "log = \"info\"\nanonymous_pdu_bytes_max = 1024\npdu_bytes_max = 2048",
        &indexes,
    );
    hang_up(serving.child(), &notifications);
    for (stream, message_id) in [(&mut anonymous, 2), (&mut bound, 3)] {
        stream.write_all(&oversized_search(message_id)).unwrap();
        let (_, closed) = support::read_until_closed(stream, WAIT_MAX);
        assert!(closed, "message {message_id}: the connection is closed");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("needs a restart"), "{text}");
    assert!(serving.stop().success());
}

/// One plain-http request to `port` (`Connection: close`): (status, Set-Cookie values).
fn http_exchange(port: u16, head: &str, body: &str) -> (u16, Vec<String>) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("http connect");
    stream.set_read_timeout(Some(WAIT_MAX)).unwrap();
    let request = format!(
        "{head}\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer}"));
    let cookies = answer
        .lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| {
            line.strip_prefix("set-cookie: ")
                .or(line.strip_prefix("Set-Cookie: "))
        })
        .map(|value| value.split(';').next().unwrap_or("").to_string())
        .collect();
    (status, cookies)
}

/// Signs in to the console on `port` as the rootdn with `rootpw`: the session cookie.
fn console_sign_in(port: u16, rootpw: &str) -> String {
    let (_, cookies) = http_exchange(port, "GET /login HTTP/1.1", "");
    let login = cookies
        .iter()
        .find(|cookie| cookie.starts_with("lmdir_login="))
        .expect("a sign-in cookie")
        .clone();
    let token = login.trim_start_matches("lmdir_login=");
    let dn = ROOT_DN.replace('=', "%3D").replace(',', "%2C");
    let body = format!("csrf={token}&user={dn}&password={rootpw}");
    let head = format!(
        "POST /login HTTP/1.1\r\nCookie: {login}\r\nContent-Type: application/x-www-form-urlencoded"
    );
    let (status, cookies) = http_exchange(port, &head, &body);
    assert_eq!(status, 303);
    cookies
        .into_iter()
        .find(|cookie| cookie.starts_with("lmdir_session=") && cookie.len() > 14)
        .expect("signed in")
}

/// A console session of the rootdn lasted its 12 hours after the rootpw it signed in with was
/// rotated (the rootdn was always let through). It ends once a reload changes the rootpw.
#[test]
fn sighup_rotating_the_rootpw_ends_the_rootdns_console_sessions() {
    let server = TestServer::prepare("", 0);
    let http_port = support::free_port();
    let config = |rootpw: &str| {
        let text = format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{}\"]\nlog = \"info\"\n\
             [database]\nsuffix = \"dc=example,dc=com\"\ndirectory = \"{}\"\nrootdn = \"{ROOT_DN}\"\n\
             rootpw = \"{rootpw}\"\n\
             [http]\nlisten = \"127.0.0.1:{http_port}\"\ntls = false\n",
            server.port,
            server.database_directory().display(),
        );
        std::fs::write(&server.config_path, text).unwrap();
    };
    config(ROOT_PASSWORD);
    let (serving, notifications, _log) = serve_with_notifications(&server);
    let session = console_sign_in(http_port, ROOT_PASSWORD);
    let me = format!("GET /me HTTP/1.1\r\nCookie: {session}");
    assert_eq!(http_exchange(http_port, &me, "").0, 200);
    config("rotated-secret");
    hang_up(serving.child(), &notifications);
    assert_eq!(
        http_exchange(http_port, &me, "").0,
        303,
        "a session outlived the rootpw it signed in with"
    );
    let fresh = console_sign_in(http_port, "rotated-secret");
    let me = format!("GET /me HTTP/1.1\r\nCookie: {fresh}");
    assert_eq!(http_exchange(http_port, &me, "").0, 200);
    assert!(serving.stop().success());
}
