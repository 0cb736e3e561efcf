//! Issue 9 through the real binary: while `lmdir serve` runs on a directory, a second `serve`
//! (another port), `load` and `reindex` on it are refused with a clear message naming the
//! directory and the server's pid, and change nothing; `export`, `check`, `stat` and `search`
//! work beside it and see what the server commits, new attribute descriptions included.

use crate::support;

use std::collections::HashSet;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ldap3::{LdapConn, LdapConnSettings};
use support::{free_port, lmdir_binary, TestServer, ROOT_DN, ROOT_PASSWORD};

/// A hang guard only: a refused command exits at once.
const REFUSAL_WAIT_MAX: Duration = Duration::from_secs(60);

/// Runs `lmdir --config <config> <arguments>`; a command still running after the hang guard
/// is killed and fails the test (a second server that was accepted would run forever).
fn run_bounded(config: &std::path::Path, arguments: &[&str]) -> Output {
    // Output goes to files (a pipe nobody reads while we wait could fill and block the child).
    let scratch = tempfile::tempdir().expect("scratch directory");
    let (stdout_path, stderr_path) = (scratch.path().join("out"), scratch.path().join("err"));
    let mut child = Command::new(lmdir_binary())
        .arg("--config")
        .arg(config)
        .args(arguments)
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("running lmdir");
    let deadline = Instant::now() + REFUSAL_WAIT_MAX;
    let status = loop {
        if let Some(status) = child.try_wait().expect("polling lmdir") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lmdir {arguments:?} was not refused: it is still running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: std::fs::read(&stdout_path).unwrap(),
        stderr: std::fs::read(&stderr_path).unwrap(),
    }
}

fn assert_refused(output: &Output, what: &str, directory: &str, server_pid: u32) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{what} was accepted: {stderr}");
    assert!(
        stderr.contains("already open for writing")
            && stderr.contains(directory)
            && stderr.contains(&format!("pid {server_pid}")),
        "{what}: unclear refusal: {stderr}"
    );
}

fn stdout_of(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed beside the server: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn add_with_new_description(port: u16) {
    let mut connection = LdapConn::with_settings(
        LdapConnSettings::new().set_conn_timeout(Duration::from_secs(10)),
        &format!("ldap://127.0.0.1:{port}"),
    )
    .expect("connecting");
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .unwrap()
        .success()
        .unwrap();
    connection
        .add(
            "ou=french,dc=example,dc=com",
            vec![
                ("objectClass", HashSet::from(["organizationalUnit"])),
                ("ou", HashSet::from(["french"])),
                ("description;lang-fr", HashSet::from(["bonjour"])),
            ],
        )
        .unwrap()
        .success()
        .unwrap();
}

#[test]
fn a_second_writer_is_refused_and_readers_work_beside_the_server() {
    let mut server = TestServer::prepare("", 40);
    server.start();
    let pid = server.pid();
    let directory = server.database_directory().display().to_string();

    // A second server on the same directory and another port.
    let second_config = server.directory.path().join("second.toml");
    let text = std::fs::read_to_string(&server.config_path).unwrap();
    let text = text.replace(
        &format!("127.0.0.1:{}", server.port),
        &format!("127.0.0.1:{}", free_port()),
    );
    std::fs::write(&second_config, text).unwrap();
    let second = run_bounded(&second_config, &["serve", "--no-demo"]);
    assert_refused(&second, "a second serve", &directory, pid);

    // An offline load adding a description the server does not know, and a reindex.
    let ldif = server.directory.path().join("more.ldif");
    std::fs::write(
        &ldif,
        "dn: ou=offline,dc=example,dc=com\nobjectClass: organizationalUnit\nou: offline\n\
         description;lang-de: hallo\n",
    )
    .unwrap();
    let load = run_bounded(&server.config_path, &["load", ldif.to_str().unwrap()]);
    assert_refused(&load, "load", &directory, pid);
    let reindex = run_bounded(&server.config_path, &["reindex"]);
    assert_refused(&reindex, "reindex", &directory, pid);

    // The server numbers a new description; read-only tools in new processes see it.
    add_with_new_description(server.port);
    let found = stdout_of(
        run_bounded(
            &server.config_path,
            &["search", "dc=example,dc=com", "(ou=french)"],
        ),
        "search",
    );
    assert!(found.contains("description;lang-fr: bonjour"), "{found}");
    let exported = stdout_of(run_bounded(&server.config_path, &["export"]), "export");
    assert!(exported.contains("dn: ou=french,dc=example,dc=com"));
    assert!(!exported.contains("ou=offline"), "the refused load wrote");
    let report = stdout_of(run_bounded(&server.config_path, &["check"]), "check");
    assert!(report.contains("check: clean"), "{report}");
    stdout_of(run_bounded(&server.config_path, &["stat"]), "stat");
    server.assert_running("after the refused writers");
    server.assert_no_panic("after the refused writers");

    // Once the server is gone the load goes through.
    server.kill_hard();
    stdout_of(
        run_bounded(&server.config_path, &["load", ldif.to_str().unwrap()]),
        "load after the server stopped",
    );
    server.assert_check_clean("after the later load");
}
