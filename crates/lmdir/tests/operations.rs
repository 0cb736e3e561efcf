//! Operating lmdir as an administrator would, through the real binary: backups under write load,
//! `load -` from a pipe, `export | head`, check after an index change, the banner's try line,
//! systemd readiness, and SIGHUP reloading logs and TLS without dropping connections.

use crate::support;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ldap3::{LdapConn, LdapConnSettings, Scope};
use support::{lmdir_binary, TestServer, ROOT_DN, ROOT_PASSWORD};

/// Hang guard for anything the test waits on (a loaded machine is slow, never this slow).
const WAIT_MAX: Duration = Duration::from_secs(120);
const PEOPLE_DN: &str = "ou=People,dc=example,dc=com";

fn success(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `entries: N` from `lmdir stat`.
fn entry_count(config: &Path) -> u64 {
    let output = Command::new(lmdir_binary())
        .arg("--config")
        .arg(config)
        .arg("stat")
        .output()
        .expect("running lmdir stat");
    let text = success(&output, "stat");
    text.lines()
        .find_map(|line| line.strip_prefix("entries: "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("no entry count in:\n{text}"))
}

/// The test's config with its database directory replaced (to open a backup copy).
fn config_for_directory(server: &TestServer, directory: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(&server.config_path).expect("reading the config");
    let original = format!("directory = \"{}\"", server.database_directory().display());
    assert!(text.contains(&original), "{text}");
    let replaced = text.replace(
        &original,
        &format!("directory = \"{}\"", directory.display()),
    );
    let path = server.directory.path().join(name);
    std::fs::write(&path, replaced).expect("writing the copy's config");
    path
}

fn connect_as_root(url: &str) -> LdapConn {
    let mut connection = LdapConn::with_settings(
        LdapConnSettings::new().set_conn_timeout(Duration::from_secs(30)),
        url,
    )
    .expect("connecting");
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("bind result");
    connection
}

/// Adds `uid=w<n>` people until told to stop; counts each add the server acknowledged (an
/// acknowledged write is committed: the server answers only after the commit).
fn write_until_stopped(port: u16, acknowledged: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    let mut connection = connect_as_root(&format!("ldap://127.0.0.1:{port}"));
    let mut number = 0u64;
    while !stop.load(Ordering::Acquire) {
        let uid = format!("w{number}");
        let dn = format!("uid={uid},{PEOPLE_DN}");
        let attributes = vec![
            ("objectClass", ["inetOrgPerson"].into_iter().collect()),
            ("uid", [uid.as_str()].into_iter().collect()),
            ("cn", ["Writer"].into_iter().collect()),
            ("sn", ["Writer"].into_iter().collect()),
        ];
        connection
            .add(&dn, attributes)
            .expect("add")
            .success()
            .expect("add result");
        acknowledged.fetch_add(1, Ordering::AcqRel);
        number += 1;
    }
}

#[test]
fn a_backup_under_write_load_is_clean_and_holds_every_write_committed_before_it() {
    let mut server = TestServer::prepare("", 2000);
    let loaded = entry_count(&server.config_path);
    server.start();
    let acknowledged = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acknowledged, stop, port) = (acknowledged.clone(), stop.clone(), server.port);
        std::thread::spawn(move || write_until_stopped(port, acknowledged, stop))
    };
    let deadline = Instant::now() + WAIT_MAX;
    while acknowledged.load(Ordering::Acquire) < 50 {
        assert!(Instant::now() < deadline, "the writer made no progress");
        std::thread::sleep(Duration::from_millis(10));
    }
    let committed_before = acknowledged.load(Ordering::Acquire);
    let copy = server.directory.path().join("backup");
    let output = server.run_command(&["backup".as_ref(), copy.as_os_str()]);
    let committed_after = acknowledged.load(Ordering::Acquire);
    stop.store(true, Ordering::Release);
    writer.join().expect("the writer thread");
    let report = success(&output, "backup");
    assert!(report.contains("backup: clean"), "{report}");
    assert!(copy.join("data.mdb").is_file());
    assert!(!copy.join("data.mdb.partial").exists());

    // `lmdir check` on the copy, as an administrator would before trusting it.
    let copy_config = config_for_directory(&server, &copy, "copy.toml");
    let check = Command::new(lmdir_binary())
        .arg("--config")
        .arg(&copy_config)
        .arg("check")
        .output()
        .expect("running lmdir check on the copy");
    let check_report = success(&check, "check of the copy");
    assert!(check_report.contains("check: clean"), "{check_report}");
    let copied = entry_count(&copy_config);
    // The copy is one commit: at least everything acknowledged before the backup started,
    // at most everything acknowledged by the time it finished (plus one add in flight).
    assert!(
        copied >= loaded + committed_before,
        "{copied} entries copied, {loaded} loaded + {committed_before} acknowledged before"
    );
    assert!(
        copied <= loaded + committed_after + 1,
        "{copied} entries copied, {loaded} loaded + {committed_after} acknowledged after"
    );
    // A second backup never overwrites the first.
    let again = server.run_command(&["backup".as_ref(), copy.as_os_str()]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    server.assert_no_panic("backup under load");
}

#[test]
fn load_dash_reads_ldif_from_standard_input() {
    let server = TestServer::prepare("", 0);
    let ldif = server.generate_ldif(300, 3);
    let generated = std::fs::read_to_string(&ldif).unwrap();
    let mut child = Command::new(lmdir_binary())
        .arg("--config")
        .arg(&server.config_path)
        .args(["load", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning lmdir load -");
    // Written through a pipe from another thread, as `slapcat | lmdir load -` would.
    let mut input = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let mut file = std::fs::File::open(ldif).expect("the generated LDIF");
        std::io::copy(&mut file, &mut input).expect("feeding the pipe");
    });
    let output = child.wait_with_output().expect("lmdir load -");
    feeder.join().expect("the feeding thread");
    success(&output, "load -");
    // 300 people, their groups, the suffix and two organizational units.
    let records = generated.matches("\ndn: ").count() as u64 + 1;
    assert_eq!(entry_count(&server.config_path), records);
    server.assert_check_clean("after load -");
}

#[test]
fn export_into_head_ends_quietly_with_success() {
    let server = TestServer::prepare("", 2000);
    // More than a pipe's buffer, so the export is still writing when head leaves.
    let script = format!(
        "set -o pipefail; '{}' --config '{}' export | head -n 3",
        lmdir_binary(),
        server.config_path.display()
    );
    let output = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("running the pipeline");
    let printed = success(&output, "export | head");
    assert_eq!(printed.lines().count(), 3, "{printed}");
    assert!(printed.contains("dn: dc=example,dc=com"), "{printed}");
    assert!(
        output.stderr.is_empty(),
        "nothing on stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn check_after_an_index_change_names_the_reindex_instead_of_damage() {
    let server = TestServer::prepare("", 500);
    let original = std::fs::read_to_string(&server.config_path).unwrap();
    // A new index (title) and a new kind on an old one (uid pres); mail loses its sub kind.
    let changed = format!(
        "{original}[database.index]\nobjectClass = [\"eq\"]\ncn = [\"eq\", \"sub\"]\nsn = [\"eq\", \"sub\"]\n\
         givenName = [\"eq\", \"sub\"]\nmail = [\"eq\"]\nuid = [\"eq\", \"sub\", \"pres\"]\n\
         uidNumber = [\"eq\", \"ordered\"]\ngidNumber = [\"eq\", \"ordered\"]\nmember = [\"eq\"]\n\
         uniqueMember = [\"eq\"]\nmemberOf = [\"eq\"]\nentryUUID = [\"eq\"]\nou = [\"eq\"]\ntitle = [\"eq\"]\n"
    );
    std::fs::write(&server.config_path, changed).unwrap();
    let output = server.run_command(&["check"]);
    let report = success(&output, "check after the index change");
    assert!(
        report.contains("index title eq, uid pres not built yet: run `lmdir reindex title uid`"),
        "{report}"
    );
    assert!(
        report.contains("index mail sub no longer configured: run `lmdir reindex mail`"),
        "{report}"
    );
    assert!(
        !report.contains("DAMAGED") && !report.contains("missing from"),
        "{report}"
    );
    assert!(
        report.lines().count() < 10,
        "a few lines, not one per entry:\n{report}"
    );

    // Reindexing one of them leaves the other unbuilt (and unused by searches).
    success(&server.run_command(&["reindex", "title"]), "reindex title");
    let report = success(&server.run_command(&["check"]), "check after reindex title");
    assert!(
        report.contains("index uid pres not built yet: run `lmdir reindex uid`"),
        "{report}"
    );
    assert!(
        !report.contains("title eq") && !report.contains("DAMAGED"),
        "{report}"
    );
    success(&server.run_command(&["reindex", "uid", "mail"]), "reindex");
    let report = success(&server.run_command(&["check"]), "check after reindex");
    assert!(
        report.contains("check: clean") && !report.contains("not built"),
        "{report}"
    );
}

/// `lmdir serve` (with the demo unless `no_demo`), stdout piped, stderr into `log`.
fn spawn_serve(config: &Path, log: &Path, environment: &[(&str, &Path)]) -> Child {
    let mut command = Command::new(lmdir_binary());
    command
        .arg("--config")
        .arg(config)
        .arg("serve")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("creating the server log"));
    for (name, value) in environment {
        command.env(name, value);
    }
    command.spawn().expect("spawning lmdir serve")
}

/// Reads the banner from the server's stdout up to its `try:` line, and returns the command.
fn try_line(child: &mut Child, log: &Path) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(command) = line.trim().strip_prefix("try:") {
                    return command.trim().to_string();
                }
            }
            _ => panic!(
                "no try: line; server log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
        }
    }
}

fn run_shell(command: &str) -> Output {
    Command::new("bash")
        .args(["-c", command])
        .output()
        .expect("running bash")
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `lmdir serve` with `config` (logging under `scratch`), runs the banner's `try:` line
/// in a shell, stops the server, and returns the line with what it printed (it must succeed).
fn serve_and_run_try_line(config: &Path, scratch: &Path) -> (String, String) {
    let log = scratch.join("serve.log");
    let mut child = spawn_serve(config, &log, &[]);
    let line = try_line(&mut child, &log);
    let output = run_shell(&line);
    stop(child);
    let found = success(&output, &line);
    (line, found)
}

#[test]
fn the_banner_try_line_works_under_another_suffix() {
    let scratch = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let config = scratch.path().join("lmdir.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"]\n\
             [database]\nsuffix = \"dc=acme,dc=org\"\nrootdn = \"cn=manager,dc=acme,dc=org\"\n\
             rootpw = \"it's secret\"\ndirectory = \"{}\"\n",
            scratch.path().join("db").display()
        ),
    )
    .unwrap();
    let (line, found) = serve_and_run_try_line(&config, scratch.path());
    assert!(
        found.contains("namingContexts: dc=acme,dc=org"),
        "{line}\n{found}"
    );
}

#[test]
fn the_banner_try_line_works_with_require_tls() {
    let scratch = tempfile::tempdir().unwrap();
    let files = lmdir_server::ensure_demo_tls(scratch.path()).unwrap();
    let port = support::free_port();
    let config = scratch.path().join("lmdir.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"]\nrequire_tls = true\n\
             tls_certificate = \"{}\"\ntls_key = \"{}\"\n[database]\nrootdn = \"cn=admin,dc=example,dc=com\"\nrootpw = \"secret\"\ndirectory = \"{}\"\n",
            files.certificate_path.display(),
            files.key_path.display(),
            scratch.path().join("db").display()
        ),
    )
    .unwrap();
    let (line, found) = serve_and_run_try_line(&config, scratch.path());
    // A server started from a config file never gets the demo people (issue 9): the try line
    // reads the root DSE, over StartTLS since require_tls is on.
    assert!(line.contains("-ZZ"), "{line}");
    assert!(
        found.contains("namingContexts: dc=example,dc=com"),
        "{line}\n{found}"
    );
}

/// Waits for a datagram equal to `wanted` on the notify socket, returning the ones before it.
fn receive_until(socket: &UnixDatagram, wanted: &str) -> Vec<String> {
    socket.set_read_timeout(Some(WAIT_MAX)).unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let length = socket
            .recv(&mut buffer)
            .unwrap_or_else(|error| panic!("no {wanted} (after {seen:?}): {error}"));
        let message = String::from_utf8_lossy(&buffer[..length]).into_owned();
        if message == wanted {
            return seen;
        }
        seen.push(message);
    }
}

/// Every line of a JSON log file, parsed (each must be one JSON object).
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|mut file| file.read_to_string(&mut text))
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    text.lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
            assert!(
                value["timestamp"].is_string() && value["level"].is_string(),
                "{line}"
            );
            value
        })
        .collect()
}

fn has_level(lines: &[serde_json::Value], level: &str) -> bool {
    lines.iter().any(|line| line["level"] == level)
}

/// A TLS client that trusts exactly one certificate: it connects only while that is presented.
fn trusting_only(certificate: &Path) -> LdapConnSettings {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls_pki_types::CertificateDer::pem_file_iter(certificate).unwrap() {
        roots.add(certificate.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    LdapConnSettings::new()
        .set_config(Arc::new(config))
        .set_conn_timeout(Duration::from_secs(30))
}

fn ldaps_connects(url: &str, certificate: &Path) -> bool {
    LdapConn::with_settings(trusting_only(certificate), url)
        .and_then(|mut connection| connection.simple_bind(ROOT_DN, ROOT_PASSWORD))
        .is_ok_and(|result| result.success().is_ok())
}

#[test]
fn systemd_readiness_and_sighup_reload_logs_and_tls_without_dropping_connections() {
    let scratch = tempfile::tempdir().unwrap();
    let tls_directory = scratch.path().join("tls");
    let files = lmdir_server::ensure_demo_tls(&tls_directory).unwrap();
    let first_certificate = scratch.path().join("first.crt");
    std::fs::copy(&files.certificate_path, &first_certificate).unwrap();
    let (port, tls_port) = (support::free_port(), support::free_port());
    let log_file = scratch.path().join("lmdir.log");
    let config = scratch.path().join("lmdir.toml");
    let write_config = |level: &str| {
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = [\"ldap://127.0.0.1:{port}\", \"ldaps://127.0.0.1:{tls_port}\"]\n\
                 tls_certificate = \"{}\"\ntls_key = \"{}\"\nlog = \"{level}\"\nlog_file = \"{}\"\n\
                 log_format = \"json\"\n[database]\nrootdn = \"cn=admin,dc=example,dc=com\"\nrootpw = \"secret\"\ndirectory = \"{}\"\n",
                files.certificate_path.display(),
                files.key_path.display(),
                log_file.display(),
                scratch.path().join("db").display()
            ),
        )
        .unwrap()
    };
    write_config("warn");
    let notify_path = scratch.path().join("notify.sock");
    let notifications = UnixDatagram::bind(&notify_path).unwrap();
    let stderr_log = scratch.path().join("stderr.log");
    let child = spawn_serve(
        &config,
        &stderr_log,
        &[("NOTIFY_SOCKET", notify_path.as_path())],
    );
    receive_until(&notifications, "READY=1");
    let url = format!("ldap://127.0.0.1:{port}");
    let mut open_before = connect_as_root(&url);
    let ldaps = format!("ldaps://localhost:{tls_port}");
    assert!(ldaps_connects(&ldaps, &first_certificate));

    // logrotate moves the file away; the certificate is renewed; the level goes up to info.
    let rotated = scratch.path().join("lmdir.log.1");
    std::fs::rename(&log_file, &rotated).unwrap();
    std::fs::remove_file(&files.certificate_path).unwrap();
    std::fs::remove_file(&files.key_path).unwrap();
    lmdir_server::ensure_demo_tls(&tls_directory).unwrap();
    write_config("info");
    let hangup = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hangup.success());
    receive_until(&notifications, "RELOADING=1");
    receive_until(&notifications, "READY=1");

    // The connection opened before the reload still works.
    let (entries, _) = open_before
        .search("", Scope::Base, "(objectClass=*)", vec!["namingContexts"])
        .expect("search on the connection opened before SIGHUP")
        .success()
        .expect("search result");
    assert_eq!(entries.len(), 1);
    // New handshakes present the renewed certificate, and only it.
    assert!(ldaps_connects(&ldaps, &files.certificate_path));
    assert!(!ldaps_connects(&ldaps, &first_certificate));
    // At info, the new connection is logged, into the reopened file.
    let _after = connect_as_root(&url);
    let deadline = Instant::now() + WAIT_MAX;
    while !log_file.exists() || !has_level(&json_lines(&log_file), "INFO") {
        assert!(Instant::now() < deadline, "no INFO line after SIGHUP");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !has_level(&json_lines(&rotated), "INFO"),
        "before SIGHUP the level was warn"
    );
    drop(open_before);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    receive_until(&notifications, "STOPPING=1");
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output.status);
}

#[test]
fn under_systemd_stderr_lines_carry_the_syslog_priority_and_no_timestamp() {
    use std::os::unix::fs::MetadataExt;
    let scratch = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let config = scratch.path().join("lmdir.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"]\nlog = \"info\"\n[database]\nrootdn = \"cn=admin,dc=example,dc=com\"\nrootpw = \"secret\"\ndirectory = \"{}\"\n",
            scratch.path().join("db").display()
        ),
    )
    .unwrap();
    let log = scratch.path().join("journal");
    let journal = std::fs::File::create(&log).unwrap();
    let metadata = journal.metadata().unwrap();
    // What systemd sets when stderr is the journal: that stream's device and inode.
    let stream = format!("{}:{}", metadata.dev(), metadata.ino());
    let notify_path = scratch.path().join("notify.sock");
    let notifications = UnixDatagram::bind(&notify_path).unwrap();
    let child = Command::new(lmdir_binary())
        .arg("--config")
        .arg(&config)
        .args(["serve", "--no-demo"])
        .env("JOURNAL_STREAM", &stream)
        .env("NOTIFY_SOCKET", &notify_path)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(journal)
        .spawn()
        .unwrap();
    receive_until(&notifications, "READY=1");
    stop(child);
    let text = std::fs::read_to_string(&log).unwrap();
    let listening = text
        .lines()
        .find(|line| line.contains("listening on"))
        .unwrap_or_else(|| panic!("no listening line:\n{text}"));
    assert!(
        listening.starts_with("<6> INFO") || listening.starts_with("<6>INFO"),
        "{listening}"
    );
    assert!(
        text.lines().all(|line| line.starts_with('<')),
        "every line has a priority:\n{text}"
    );
}

/// Root DSE searches on `connection`, each checked to succeed.
fn search_root_dse(connection: &mut LdapConn, searches: usize) {
    for _ in 0..searches {
        let (entries, _) = connection
            .search("", Scope::Base, "(objectClass=*)", vec!["namingContexts"])
            .expect("root DSE search")
            .success()
            .expect("root DSE result");
        assert_eq!(entries.len(), 1);
    }
}

/// How many lines of the log say `marker` (e.g. ` SRCH `).
fn lines_with(text: &str, marker: &str) -> usize {
    text.lines().filter(|line| line.contains(marker)).count()
}

/// Log lines are batched in memory (crates/lmdir/src/log_buffer.rs). On an idle server the
/// flusher thread writes a line out without any shutdown (the wait is only a hang guard: without
/// the timer the line would never come); a burst larger than the buffer is written out as it
/// fills; and a clean SIGTERM shutdown leaves every operation's request and result line in the
/// file, none lost in the buffer.
#[test]
fn buffered_log_lines_arrive_within_the_flush_interval_and_none_is_lost_at_shutdown() {
    const SEARCHES: usize = 2_000;
    let scratch = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let log_file = scratch.path().join("lmdir.log");
    let config = scratch.path().join("lmdir.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"]\nlog = \"info\"\nlog_file = \"{}\"\n\
             [database]\nrootdn = \"cn=admin,dc=example,dc=com\"\nrootpw = \"secret\"\ndirectory = \"{}\"\n",
            log_file.display(),
            scratch.path().join("db").display()
        ),
    )
    .unwrap();
    let notify_path = scratch.path().join("notify.sock");
    let notifications = UnixDatagram::bind(&notify_path).unwrap();
    let child = spawn_serve(
        &config,
        &scratch.path().join("stderr.log"),
        &[("NOTIFY_SOCKET", notify_path.as_path())],
    );
    receive_until(&notifications, "READY=1");
    let mut connection = connect_as_root(&format!("ldap://127.0.0.1:{port}"));
    search_root_dse(&mut connection, 1);
    let deadline = Instant::now() + WAIT_MAX;
    while lines_with(
        &std::fs::read_to_string(&log_file).unwrap(),
        "RESULT tag=5 ",
    ) < 1
    {
        assert!(
            Instant::now() < deadline,
            "the idle server never wrote its line out"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    search_root_dse(&mut connection, SEARCHES);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    receive_until(&notifications, "STOPPING=1");
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", output.status);
    let text = std::fs::read_to_string(&log_file).unwrap();
    // Well over one buffer of lines, so the inline write of a full buffer took part.
    assert!(text.len() > 2 * 64 * 1024, "{} bytes", text.len());
    assert_eq!(lines_with(&text, " SRCH "), SEARCHES + 1);
    assert_eq!(lines_with(&text, "RESULT tag=5 "), SEARCHES + 1);
    assert!(text.ends_with('\n'), "the last line is whole");
    assert_eq!(lines_with(&text, "SIGTERM received"), 1);
}

/// With `[http]` on, the banner prints the console's URL and a `curl` for SCIM that works as
/// printed (the no-config trial run turns it on the same way, on 127.0.0.1:8443).
#[test]
fn the_banner_scim_curl_line_works() {
    let scratch = tempfile::tempdir().unwrap();
    let files = lmdir_server::ensure_demo_tls(scratch.path()).unwrap();
    let (port, http_port) = (support::free_port(), support::free_port());
    let config = scratch.path().join("lmdir.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"]\ntls_certificate = \"{}\"\ntls_key = \"{}\"\n\
             [database]\nrootdn = \"cn=admin,dc=example,dc=com\"\nrootpw = \"secret\"\ndirectory = \"{}\"\n[http]\nlisten = \"127.0.0.1:{http_port}\"\n",
            files.certificate_path.display(),
            files.key_path.display(),
            scratch.path().join("db").display()
        ),
    )
    .unwrap();
    let log = scratch.path().join("serve.log");
    let mut child = spawn_serve(&config, &log, &[]);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let (mut console, mut curl) = (None, None);
    while curl.is_none() {
        let line = lines.next().and_then(Result::ok).unwrap_or_else(|| {
            panic!(
                "no scim: line; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        if let Some(url) = line.trim().strip_prefix("console:") {
            console = Some(url.trim().to_string());
        }
        if let Some(command) = line.trim().strip_prefix("scim:") {
            curl = Some(command.trim().to_string());
        }
    }
    let curl = curl.unwrap();
    let output = run_shell(&curl);
    let console_page = run_shell(&format!(
        "curl -sS --cacert '{}' {}login",
        files.certificate_path.display(),
        console
            .clone()
            .unwrap_or_default()
            .split(' ')
            .next()
            .unwrap_or_default()
    ));
    stop(child);
    let found = success(&output, &curl);
    assert!(found.contains("\"totalResults\":0"), "{curl}\n{found}");
    assert!(console
        .unwrap()
        .starts_with(&format!("https://127.0.0.1:{http_port}/")));
    assert!(String::from_utf8_lossy(&console_page.stdout).contains("Sign in"));
}
