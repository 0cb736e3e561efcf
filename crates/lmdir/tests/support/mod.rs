//! Shared harness for the trust tests (hostile input, crash safety): runs the real `lmdir` binary
//! with a temporary TOML config on a free loopback port, and lets a test kill, restart and inspect it.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const SUFFIX: &str = "dc=example,dc=com";
pub const ROOT_DN: &str = "cn=admin,dc=example,dc=com";
pub const ROOT_PASSWORD: &str = "secret";
/// How long a server gets to start listening before the test fails.
const STARTUP_WAIT_MAX: Duration = Duration::from_secs(60);

pub fn lmdir_binary() -> &'static str {
    env!("CARGO_BIN_EXE_lmdir")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("binding an ephemeral port")
        .local_addr()
        .expect("local address of the ephemeral port")
        .port()
}

/// What a test adds to the config `TestServer::prepare_with` writes.
#[derive(Default)]
pub struct Settings<'a> {
    /// Listener URLs besides the loopback ldap:// one (`ldapi:///path`).
    pub listen_extra: Vec<String>,
    /// TOML lines appended to `[server]`.
    pub server: &'a str,
    /// TOML lines appended to `[database]`; may end with further tables (`[[access]]`,
    /// `[[limits]]`).
    pub database: &'a str,
}

/// A database directory plus config, and at most one running `lmdir serve` over it.
pub struct TestServer {
    pub directory: tempfile::TempDir,
    pub config_path: PathBuf,
    pub port: u16,
    child: Option<Child>,
    /// Every server run appends its stderr here, so a panic in any run is found.
    log_paths: Vec<PathBuf>,
}

impl TestServer {
    /// Writes a config whose `[server]` table gets `extra_server_settings` appended (TOML lines),
    /// and loads `people` generated people (`lmdir gen`) when `people > 0`. Does not start serving.
    pub fn prepare(extra_server_settings: &str, people: u64) -> TestServer {
        TestServer::prepare_with(
            &Settings {
                server: &format!("size_limit = 0\n{extra_server_settings}"),
                ..Settings::default()
            },
            people,
        )
    }

    /// As `prepare`, with every part of the config the test may add (`size_limit` is then the
    /// default unless `settings.server` sets it).
    pub fn prepare_with(settings: &Settings<'_>, people: u64) -> TestServer {
        let directory = tempfile::tempdir().expect("creating the test directory");
        let port = free_port();
        let config_path = directory.path().join("lmdir.toml");
        let listeners: String = settings
            .listen_extra
            .iter()
            .map(|url| format!(", \"{url}\""))
            .collect();
        let text = format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"{listeners}]\nlog = \"warn\"\n{}\n\
             [database]\nsuffix = \"{SUFFIX}\"\ndirectory = \"{}\"\nrootdn = \"{ROOT_DN}\"\n\
             rootpw = \"{ROOT_PASSWORD}\"\n{}\n",
            settings.server,
            directory.path().join("db").display(),
            settings.database,
        );
        std::fs::write(&config_path, text).expect("writing the test config");
        let server = TestServer {
            directory,
            config_path,
            port,
            child: None,
            log_paths: Vec::new(),
        };
        if people > 0 {
            let ldif_path = server.generate_ldif(people, 1);
            let output = server.run_command(&["load".as_ref(), ldif_path.as_os_str()]);
            assert!(
                output.status.success(),
                "lmdir load failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        server
    }

    pub fn database_directory(&self) -> PathBuf {
        self.directory.path().join("db")
    }

    /// `lmdir gen people --seed seed` into a file in the test directory.
    pub fn generate_ldif(&self, people: u64, seed: u64) -> PathBuf {
        let path = self
            .directory
            .path()
            .join(format!("gen-{people}-{seed}.ldif"));
        let output = Command::new(lmdir_binary())
            .args(["gen", &people.to_string(), "--seed", &seed.to_string()])
            .output()
            .expect("running lmdir gen");
        assert!(output.status.success(), "lmdir gen failed");
        std::fs::write(&path, output.stdout).expect("writing the generated LDIF");
        path
    }

    /// Runs `lmdir --config <ours> <arguments>` to completion.
    pub fn run_command<S: AsRef<std::ffi::OsStr>>(&self, arguments: &[S]) -> Output {
        Command::new(lmdir_binary())
            .arg("--config")
            .arg(&self.config_path)
            .args(arguments)
            .output()
            .expect("running lmdir")
    }

    /// `lmdir check`; panics with its report unless clean.
    pub fn assert_check_clean(&self, context: &str) {
        let output = self.run_command(&["check"]);
        assert!(
            output.status.success(),
            "{context}: lmdir check failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts `lmdir serve --no-demo` and waits until it accepts connections.
    pub fn start(&mut self) {
        self.start_with(&["serve", "--no-demo"]);
    }

    /// Starts `lmdir --config FILE <arguments>` (a serve) and waits until it accepts connections.
    pub fn start_with(&mut self, arguments: &[&str]) {
        assert!(self.child.is_none(), "the server is already running");
        let log_path = self
            .directory
            .path()
            .join(format!("serve-{}.log", self.log_paths.len()));
        let child = Command::new(lmdir_binary())
            .arg("--config")
            .arg(&self.config_path)
            .args(arguments)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).expect("creating the server log"))
            .spawn()
            .expect("spawning lmdir serve");
        self.log_paths.push(log_path);
        self.child = Some(child);
        let deadline = Instant::now() + STARTUP_WAIT_MAX;
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten())
            {
                panic!("lmdir serve exited at startup ({status}):\n{}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "lmdir serve did not start listening in time"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is not running").id()
    }

    /// SIGKILL (no chance to clean up), then reap.
    pub fn kill_hard(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // std's kill is SIGKILL on Unix
            let _ = child.wait();
        }
    }

    /// SIGTERM (a graceful shutdown: writes stop, the answers in flight are sent), then waits
    /// for the exit and asserts it is a clean one.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + STARTUP_WAIT_MAX;
        let status = loop {
            if let Some(status) = child.try_wait().expect("polling the server") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                panic!("lmdir serve did not exit after SIGTERM:\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        assert!(
            status.success(),
            "lmdir serve exited {status} after SIGTERM:\n{}",
            self.logs()
        );
    }

    /// Whether the server process is still alive (it must never exit on its own in these tests).
    pub fn assert_running(&mut self, context: &str) {
        let child = self.child.as_mut().expect("the server is not running");
        if let Some(status) = child.try_wait().expect("polling the server") {
            panic!("{context}: the server exited ({status}):\n{}", self.logs());
        }
    }

    /// Resident memory of the server in KiB, from /proc.
    pub fn resident_memory_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("reading the server's /proc status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc status")
    }

    pub fn logs(&self) -> String {
        self.log_paths
            .iter()
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n--- next run ---\n")
    }

    pub fn assert_no_panic(&self, context: &str) {
        let logs = self.logs();
        assert!(
            !logs.contains("panicked"),
            "{context}: the server panicked:\n{logs}"
        );
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill_hard();
    }
}

/// The soft limit on open files of this process (the test's own sockets count against it).
pub fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("Max open files"))
                .and_then(|line| line.split_whitespace().nth(3))
                .and_then(|soft| soft.parse().ok())
        })
        .unwrap_or(1024)
}

/// Minimal BER writing for hand-made (and deliberately broken) LDAP PDUs.
pub mod ber {
    pub fn length(length: usize) -> Vec<u8> {
        if length < 0x80 {
            return vec![length as u8];
        }
        let bytes: Vec<u8> = length
            .to_be_bytes()
            .into_iter()
            .skip_while(|byte| *byte == 0)
            .collect();
        let mut out = vec![0x80 | bytes.len() as u8];
        out.extend(bytes);
        out
    }

    pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend(length(content.len()));
        out.extend_from_slice(content);
        out
    }

    pub fn integer(value: u32) -> Vec<u8> {
        let mut bytes: Vec<u8> = value
            .to_be_bytes()
            .into_iter()
            .skip_while(|byte| *byte == 0)
            .collect();
        if bytes.first().is_none_or(|byte| byte & 0x80 != 0) {
            bytes.insert(0, 0);
        }
        tlv(0x02, &bytes)
    }

    /// LDAPMessage ::= SEQUENCE { messageID, protocolOp }
    pub fn message(message_id: u32, protocol_operation: &[u8]) -> Vec<u8> {
        let mut content = integer(message_id);
        content.extend_from_slice(protocol_operation);
        tlv(0x30, &content)
    }

    /// A simple BindRequest (application 0).
    pub fn simple_bind(message_id: u32, name: &str, password: &str) -> Vec<u8> {
        let mut content = integer(3);
        content.extend(tlv(0x04, name.as_bytes()));
        content.extend(tlv(0x80, password.as_bytes()));
        message(message_id, &tlv(0x60, &content))
    }

    /// A SearchRequest (application 3) with an already encoded filter.
    pub fn search(message_id: u32, base: &str, filter: &[u8], attributes: &[&[u8]]) -> Vec<u8> {
        let mut content = tlv(0x04, base.as_bytes());
        content.extend(tlv(0x0a, &[2])); // wholeSubtree
        content.extend(tlv(0x0a, &[0])); // neverDerefAliases
        content.extend(integer(0));
        content.extend(integer(0));
        content.extend(tlv(0x01, &[0]));
        content.extend_from_slice(filter);
        let mut selection = Vec::new();
        for attribute in attributes {
            selection.extend(tlv(0x04, attribute));
        }
        content.extend(tlv(0x30, &selection));
        message(message_id, &tlv(0x63, &content))
    }

    /// Equality filter (context 3).
    pub fn equality(attribute: &[u8], value: &[u8]) -> Vec<u8> {
        let mut content = tlv(0x04, attribute);
        content.extend(tlv(0x04, value));
        tlv(0xa3, &content)
    }

    /// AbandonRequest (application 16, primitive).
    pub fn abandon(message_id: u32, target_id: u32) -> Vec<u8> {
        let target = integer(target_id);
        message(message_id, &tlv(0x50, &target[2..]))
    }

    /// Walks BER messages in a buffer: returns (protocol op tag, whole message length) of the first.
    pub fn first_message(buffer: &[u8]) -> Option<(u8, usize)> {
        if buffer.len() < 2 {
            return None;
        }
        let (content_length, header) = if buffer[1] < 0x80 {
            (buffer[1] as usize, 2)
        } else {
            let size = (buffer[1] & 0x7f) as usize;
            let bytes = buffer.get(2..2 + size)?;
            (
                bytes
                    .iter()
                    .fold(0usize, |total, byte| (total << 8) | *byte as usize),
                2 + size,
            )
        };
        let total = header + content_length;
        if buffer.len() < total {
            return None;
        }
        // messageID INTEGER follows; then the protocol op's tag.
        let id_length = buffer[header + 1] as usize;
        let tag = *buffer.get(header + 2 + id_length)?;
        Some((tag, total))
    }
}

/// Reads until the peer closes or `limit` elapses; returns the bytes received and whether it closed.
pub fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    use std::io::Read;
    let deadline = Instant::now() + limit;
    let mut received = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return (received, false);
        }
        stream
            .set_read_timeout(Some(deadline - now))
            .expect("setting a read timeout");
        match stream.read(&mut buffer) {
            Ok(0) => return (received, true),
            Ok(count) => received.extend_from_slice(&buffer[..count]),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (received, false)
            }
            // Reset by the peer counts as closed.
            Err(_) => return (received, true),
        }
    }
}
