//! What the `lmdir` commands say (issue 20 #6 and #9): schema files that repeat the built-in
//! definitions give one summary line and each real warning once (also under `serve`, which loads
//! the schema twice); `check` names only the side of an index change that exists and says it is
//! not damage; an error is printed once, not once per level of its chain; the serve banner says
//! where a relative data directory is.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

const DEBIAN_SCHEMA: [&str; 4] = ["core", "cosine", "nis", "inetorgperson"];
const SEED: &str = "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
                    dc: example\no: Example\n\ndn: ou=people,dc=example,dc=com\n\
                    objectClass: organizationalUnit\nou: people\n";

fn lmdir(config: &Path, arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lmdir"))
        .arg("--config")
        .arg(config)
        .args(arguments)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A config with a listener on `port`, the data in `directory` and the given extra lines.
fn write_config(root: &Path, port: u16, directory: &str, extra: &str) -> PathBuf {
    let path = root.join("lmdir.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"]\n\n[database]\n\
             directory = \"{directory}\"\n{extra}"
        ),
    )
    .unwrap();
    path
}

fn load_seed(root: &Path, config: &Path) {
    let seed = root.join("seed.ldif");
    std::fs::write(&seed, SEED).unwrap();
    let output = lmdir(config, &["load", seed.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// A server started in `directory`, stopped (by its own handle) when dropped.
struct Server(Child);

impl Server {
    fn start(config: &Path, directory: &Path, log: &Path, out: &Path) -> Server {
        Server(
            Command::new(env!("CARGO_BIN_EXE_lmdir"))
                .arg("--config")
                .arg(config)
                .arg("serve")
                .current_dir(directory)
                .stdout(std::fs::File::create(out).unwrap())
                .stderr(std::fs::File::create(log).unwrap())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until `path` holds `text` (the server writes its log and banner as it starts).
fn wait_for_text(path: &Path, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let content = std::fs::read_to_string(path).unwrap_or_default();
        if content.contains(text) {
            return content;
        }
        assert!(Instant::now() < deadline, "{text:?} never came: {content}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn warn_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.contains(" WARN "))
        .map(|line| line.split_once(" WARN ").unwrap().1.to_string())
        .collect()
}

#[test]
fn debian_schema_files_give_one_summary_and_each_warning_once() {
    let files: Vec<String> = DEBIAN_SCHEMA
        .iter()
        .map(|name| format!("/etc/ldap/schema/{name}.schema"))
        .collect();
    if let Some(missing) = files.iter().find(|file| !Path::new(file).exists()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{missing} is missing (the slapd package installs it)"
        );
        eprintln!("skipping: {missing} is missing (the slapd package installs it)");
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let listed: Vec<String> = files.iter().map(|file| format!("{file:?}")).collect();
    let schema_files = format!("schema_files = [{}]\n", listed.join(", "));
    let port = free_port();
    let data = root.join("db");
    let config = write_config(root, port, data.to_str().unwrap(), &schema_files);
    load_seed(root, &config);

    let stat = lmdir(&config, &["stat"]);
    assert!(stat.status.success(), "{}", stderr(&stat));
    let text = stderr(&stat);
    let warnings = warn_lines(&text);
    assert!(!text.contains("repeats the definition"), "{text}");
    assert_eq!(
        text.matches("repeat built-in or earlier ones with the same meaning")
            .count(),
        1,
        "{text}"
    );
    // What remains is what differs: rules lmdir lacks and definitions that change a built-in.
    assert!(
        warnings
            .iter()
            .all(|warning| warning.contains("is not implemented")
                || warning.contains("overrides the built-in definition")),
        "{warnings:#?}"
    );
    assert!(
        warnings
            .iter()
            .any(|warning| warning.contains("'certificateExactMatch' is not implemented")),
        "{warnings:#?}"
    );
    assert!(
        warnings.len() < 30,
        "{} warnings: {warnings:#?}",
        warnings.len()
    );

    // `serve` loads the schema for its startup check and for the server: each note once.
    let log = root.join("serve.log");
    let server = Server::start(&config, root, &log, &root.join("serve.out"));
    let served = wait_for_text(&log, "listening");
    drop(server);
    let mut served_warnings = warn_lines(&served);
    let count = served_warnings.len();
    served_warnings.sort();
    served_warnings.dedup();
    assert_eq!(count, served_warnings.len(), "a warning repeated: {served}");
    assert_eq!(count, warnings.len(), "{served}");
}

#[test]
fn check_names_only_the_index_change_there_is_and_exits_zero() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let data = root.join("db");
    let config = write_config(root, free_port(), data.to_str().unwrap(), "");
    load_seed(root, &config);
    // The default index set minus everything but objectClass: built indexes no longer configured.
    let narrowed = write_config(
        root,
        free_port(),
        data.to_str().unwrap(),
        "\n[database.index]\nobjectClass = [\"eq\"]\n",
    );
    let check = lmdir(&narrowed, &["check"]);
    let text = stderr(&check);
    assert!(check.status.success(), "{text}");
    assert!(text.contains("no longer configured: "), "{text}");
    assert!(!text.contains("not built"), "{text}");
    assert!(text.contains("not damage"), "{text}");
}

#[test]
fn an_error_is_printed_once() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let port = free_port();
    let data = root.join("db");
    let config = write_config(root, port, data.to_str().unwrap(), "");
    let missing = lmdir(&config, &["load", "/nonexistent/file.ldif"]);
    let text = stderr(&missing);
    assert!(!missing.status.success());
    assert_eq!(
        text.matches("No such file or directory").count(),
        1,
        "{text}"
    );

    load_seed(root, &config);
    let log = root.join("serve.log");
    let _server = Server::start(&config, root, &log, &root.join("serve.out"));
    wait_for_text(&log, "listening");
    let locked = lmdir(&config, &["reindex"]);
    let text = stderr(&locked);
    assert!(!locked.status.success(), "{text}");
    assert_eq!(
        text.matches("already open for writing").count(),
        1,
        "{text}"
    );
}

#[test]
fn the_banner_says_where_a_relative_data_directory_is() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let config = write_config(root, free_port(), "relative-db", "");
    let out = root.join("serve.out");
    let _server = Server::start(&config, root, &root.join("serve.log"), &out);
    // A file without rootdn/rootpw has no admin to name: the banner ends with its try line.
    let banner = wait_for_text(&out, "try:");
    let absolute = std::fs::canonicalize(root).unwrap().join("relative-db");
    let expected = format!(
        "  data:     {} (relative-db is relative to the directory lmdir was started in)",
        absolute.display()
    );
    assert!(
        banner.contains(&expected)
            || banner.contains(&expected.replace(
                &absolute.display().to_string(),
                &root.join("relative-db").display().to_string()
            )),
        "{banner}"
    );
}
