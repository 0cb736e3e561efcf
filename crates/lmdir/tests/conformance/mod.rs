//! The side-by-side harness: one OpenLDAP slapd (Debian's, back-mdb) and one lmdir on loopback, loaded
//! with the same LDIF and the same indexes, driven by the same ldap-utils commands.
//!
//! Outputs are compared after normalizing only what the standards leave open: entry order without a
//! sort control, attribute order, DN spacing and case, and values that differ by nature (timestamps,
//! UUIDs, CSNs).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const SUFFIX: &str = "dc=example,dc=com";
pub const ROOT_DN: &str = "cn=admin,dc=example,dc=com";
pub const ROOT_PASSWORD: &str = "secret";

/// attribute → index kinds, given to both servers.
pub const INDEXES: &[(&str, &[&str])] = &[
    ("objectClass", &["eq"]),
    ("cn", &["eq", "sub"]),
    ("sn", &["eq", "sub"]),
    ("uid", &["eq", "sub"]),
    ("mail", &["eq", "sub"]),
    ("l", &["eq", "sub"]),
    ("title", &["eq", "sub"]),
    ("telephoneNumber", &["eq", "sub"]),
    ("uidNumber", &["eq"]),
    ("employeeNumber", &["eq"]),
    ("member", &["eq"]),
    ("uniqueMember", &["eq"]),
    ("ou", &["eq"]),
];

/// Attributes whose values differ by nature between two servers loading the same data.
const VALUES_DIFFER_BY_NATURE: &[&str] = &[
    "entryuuid",
    "entrycsn",
    "createtimestamp",
    "modifytimestamp",
    "contextcsn",
    // Salted hashes (and lmdir hashes cleartext values on add, slapd keeps them as sent).
    "userpassword",
];

/// Operational attributes one server computes and the other does not (see docs/compatibility.md):
/// compared neither way.
const NOT_COMPARED: &[&str] = &["memberof", "numsubordinates"];

pub fn tools_available() -> Result<(), String> {
    for tool in ["slapd", "slapadd", "ldapsearch", "ldapmodify"] {
        let found = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]
            .iter()
            .any(|directory| Path::new(directory).join(tool).exists());
        if !found {
            return Err(format!(
                "{tool} is not installed (scripts/test.sh installs slapd and ldap-utils)"
            ));
        }
    }
    Ok(())
}

/// Whether slapd and ldap-utils are here for `what` (a differential): under `CI=true` a
/// missing one fails the test; elsewhere the test says it skips and returns.
pub fn tools_ready(what: &str) -> bool {
    match tools_available() {
        Ok(()) => true,
        Err(reason) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI=true and a dependency of {what} is missing: {reason}"
            );
            eprintln!("skipping {what}: {reason}");
            false
        }
    }
}

/// Runs `command`, panicking with its output unless it succeeds.
pub fn run_checked(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn slapd_binary() -> PathBuf {
    for directory in ["/usr/sbin", "/usr/local/sbin"] {
        let path = Path::new(directory).join("slapd");
        if path.exists() {
            return path;
        }
    }
    PathBuf::from("slapd")
}

pub struct Pair {
    _directory: tempfile::TempDir,
    pub openldap_port: u16,
    pub lmdir_port: u16,
    /// slapd in the foreground, its `stats` log in `slapd.log` beside its config.
    slapd: Child,
    lmdir: Child,
}

impl Drop for Pair {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A failed test says whether each server was still up and what it logged.
            let root = self._directory.path();
            eprintln!(
                "lmdir (port {}) at the failure: {:?} (None: running); its log's last lines:\n{}",
                self.lmdir_port,
                self.lmdir.try_wait(),
                log_tail(&root.join("lmdir.log"))
            );
            eprintln!(
                "slapd (port {}) at the failure: {:?} (None: running), a connection to its \
                 port: {:?}; its log's last lines:\n{}",
                self.openldap_port,
                self.slapd.try_wait(),
                std::net::TcpStream::connect(("127.0.0.1", self.openldap_port)).map(|_| "accepted"),
                log_tail(&root.join("slapd.log"))
            );
        }
        let _ = self.lmdir.kill();
        let _ = self.lmdir.wait();
        let _ = self.slapd.kill();
        let _ = self.slapd.wait();
    }
}

/// The last lines of the log at `path` (empty when there is none).
fn log_tail(path: &Path) -> String {
    const LINES: usize = 40;
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(LINES).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Waits until the slapd child answers LDAP on `port`, whatever it answers (a configuration
/// that refuses anonymous binds or unauthenticated searches answers 48 or 53: it is up). Err
/// (with its log) when slapd exits first (a port taken, a config refused) or never answers.
fn wait_for_slapd(slapd: &mut Child, port: u16, log: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = slapd.try_wait().expect("polling slapd") {
            let tail = log_tail(log);
            return Err(format!(
                "slapd exited ({status}) before serving port {port}:\n{tail}"
            ));
        }
        if answers_ldap(port) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let tail = log_tail(log);
            return Err(format!("slapd never answered on port {port}:\n{tail}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether a server on `port` answers a root DSE search at all: ldapsearch exits with the
/// LDAP result code, or 255 when it reached no server.
fn answers_ldap(port: u16) -> bool {
    const SERVER_DOWN_EXIT: i32 = 255;
    root_dse_search_exit(port).is_some_and(|code| code != SERVER_DOWN_EXIT)
}

/// The exit code of an anonymous `ldapsearch` of the root DSE on `port` (None: killed by a
/// signal).
fn root_dse_search_exit(port: u16) -> Option<i32> {
    Command::new("ldapsearch")
        .args(["-x", "-LLL", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(["-b", "", "-s", "base", "1.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running ldapsearch")
        .code()
}

/// slapd in the foreground (`-d debug_level`) on `config` (a slapd.conf file, or a cn=config
/// directory: `-F`), serving `port` when this returns; its log goes to `slapd.log` beside the
/// config (appended: a restart keeps what came before). A child of the test, so stopping it
/// never reaches another process (a daemonized slapd's pid file may name a pid the system has
/// since given to another test's server: pid_max is 32,768 here and the suite wraps it).
pub fn start_slapd(config: &Path, port: u16, debug_level: &str) -> Child {
    let log_path = config
        .parent()
        .expect("a config lies in a directory")
        .join("slapd.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .expect("slapd's log");
    let config_flag = if config.is_dir() { "-F" } else { "-f" };
    let mut slapd = Command::new(slapd_binary())
        .arg(config_flag)
        .arg(config)
        .arg("-h")
        .arg(format!("ldap://127.0.0.1:{port}/"))
        .args(["-d", debug_level])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting slapd");
    if let Err(failure) = wait_for_slapd(&mut slapd, port, &log_path) {
        // Not yet anyone's to stop: a slapd left running would outlive the test.
        stop_children([Some(slapd)]);
        panic!("{failure}");
    }
    slapd
}

/// Stops the servers a test started as its children (kill, then reap).
pub fn stop_children(children: impl IntoIterator<Item = Option<Child>>) {
    for mut child in children.into_iter().flatten() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// How both servers are configured beyond the plain back-mdb reference.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// Nothing more: lmdir runs with `memberof = false`, like the plain reference.
    Plain,
    /// slapd's memberof and refint overlays on `member`, lmdir's built-in `memberof = true`
    /// (OpenLDAP's test057 configuration).
    MemberOfRefint,
    /// A size limit of `SETUP_SIZE_LIMIT` lifted for `SETUP_UNLIMITED_DN` (slapd `limits`,
    /// lmdir `[[limits]]`; OpenLDAP's test025).
    SizeLimits,
    /// These slapd.conf `access` lines in place of the built-in policy's; lmdir's
    /// counterpart `[[access]]` rules go in `Extra::lmdir_database`.
    Access(&'static str),
}

/// Configuration added to each server on top of `Setup` (e.g. an overlay and its counterpart
/// in lmdir): slapd.conf lines for the global and the database section, TOML lines for lmdir's
/// `[server]` and `[database]`.
#[derive(Default)]
pub struct Extra<'a> {
    pub slapd_global: &'a str,
    pub slapd_database: &'a str,
    pub lmdir_server: &'a str,
    pub lmdir_database: &'a str,
}

/// The size limit of `Setup::SizeLimits`.
pub const SETUP_SIZE_LIMIT: usize = 3;
/// The identity `Setup::SizeLimits` lifts the size limit for.
pub const SETUP_UNLIMITED_DN: &str =
    "cn=Ben Ortiz,ou=Research Division,ou=People,dc=example,dc=com";

impl Pair {
    /// Loads `ldif` into both servers (slapadd, `lmdir load`) and starts them.
    pub fn start(ldif: &str) -> Pair {
        Pair::start_with(ldif, Setup::Plain)
    }

    /// As `start`, with `setup` on both servers.
    pub fn start_with(ldif: &str, setup: Setup) -> Pair {
        Pair::start_configured(ldif, setup, &Extra::default())
    }

    /// As `start_with`, each server also configured with its part of `extra`.
    pub fn start_configured(ldif: &str, setup: Setup, extra: &Extra<'_>) -> Pair {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        let ldif_path = root.join("data.ldif");
        std::fs::write(&ldif_path, ldif).unwrap();

        let openldap_port = free_port();
        let slapd_config = root.join("slapd.conf");
        let slapd_pid_file = root.join("slapd.pid");
        std::fs::create_dir_all(root.join("openldap-db")).unwrap();
        std::fs::write(
            &slapd_config,
            slapd_config_text(root, &slapd_pid_file, setup, extra),
        )
        .unwrap();
        run_checked(
            Command::new("slapadd")
                .arg("-f")
                .arg(&slapd_config)
                .arg("-l")
                .arg(&ldif_path),
        );
        let slapd = start_slapd(&slapd_config, openldap_port, "stats");

        let lmdir_port = free_port();
        let lmdir_config = root.join("lmdir.toml");
        std::fs::write(
            &lmdir_config,
            lmdir_config_text(root, lmdir_port, setup, extra),
        )
        .unwrap();
        let lmdir_binary = env!("CARGO_BIN_EXE_lmdir");
        run_checked(
            Command::new(lmdir_binary)
                .arg("--config")
                .arg(&lmdir_config)
                .arg("load")
                .arg(&ldif_path),
        );
        let lmdir = Command::new(lmdir_binary)
            .arg("--config")
            .arg(&lmdir_config)
            .args(["serve", "--no-demo"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join("lmdir.log")).unwrap())
            .spawn()
            .unwrap();
        let pair = Pair {
            _directory: directory,
            openldap_port,
            lmdir_port,
            slapd,
            lmdir,
        };
        wait_until_up(lmdir_port);
        pair
    }

    /// When slapd has exited (a crash of the reference: slapd 2.5 can crash on End Transaction,
    /// see differential_transactions.rs), starts it again on the same database, config and port
    /// and says so; LMDB keeps what it committed. False while it runs.
    pub fn restart_slapd_if_exited(&mut self) -> bool {
        let Some(status) = self.slapd.try_wait().expect("polling slapd") else {
            return false;
        };
        let root = self._directory.path();
        eprintln!(
            "slapd on port {} exited ({status}); its log's last lines:\n{}\nstarting it again",
            self.openldap_port,
            log_tail(&root.join("slapd.log"))
        );
        self.slapd = start_slapd(&root.join("slapd.conf"), self.openldap_port, "stats");
        true
    }

    /// Ends slapd as a crash would (SIGKILL) and reaps it: for the test of
    /// `restart_slapd_if_exited`.
    pub fn kill_slapd(&mut self) {
        self.slapd.kill().expect("slapd runs");
        self.slapd.wait().expect("reaping slapd");
    }

    pub fn ports(&self) -> [(&'static str, u16); 2] {
        [("OpenLDAP", self.openldap_port), ("lmdir", self.lmdir_port)]
    }

    /// Runs `lmdir --config <its config> arguments...` beside the running server (a command
    /// opening the store read-only, such as `search`): its output.
    pub fn lmdir_command(&self, arguments: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_lmdir"))
            .arg("--config")
            .arg(self._directory.path().join("lmdir.toml"))
            .args(arguments)
            .output()
            .expect("lmdir runs")
    }

    /// What lmdir has logged so far (its standard error).
    pub fn lmdir_log(&self) -> String {
        std::fs::read_to_string(self._directory.path().join("lmdir.log")).unwrap_or_default()
    }
}

/// The reference's slapd.conf: Debian's base schema, back-mdb with `INDEXES`, lmdir's built-in
/// access policy, and what `setup` adds.
fn slapd_config_text(root: &Path, pid_file: &Path, setup: Setup, extra: &Extra<'_>) -> String {
    let mut text = String::new();
    for schema in ["core", "cosine", "inetorgperson", "nis"] {
        text += &format!("include /etc/ldap/schema/{schema}.schema\n");
    }
    text += "modulepath /usr/lib/ldap\nmoduleload back_mdb\n";
    if setup == Setup::MemberOfRefint {
        text += "moduleload memberof\nmoduleload refint\n";
    }
    text += extra.slapd_global;
    let size_limit = match setup {
        Setup::SizeLimits => SETUP_SIZE_LIMIT.to_string(),
        _ => "unlimited".to_string(),
    };
    text += &format!(
        "pidfile {}\nsizelimit {size_limit}\n\
         database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"{ROOT_DN}\"\nrootpw {ROOT_PASSWORD}\n\
         directory {}\nmaxsize 1073741824\n",
        pid_file.display(),
        root.join("openldap-db").display()
    );
    for (attribute, kinds) in INDEXES {
        text += &format!("index {attribute} {}\n", kinds.join(","));
    }
    // lmdir's built-in policy when no [[access]] is configured, so binds and Password Modify
    // by users meet the same rights on both sides.
    match setup {
        Setup::Access(rules) => text += rules,
        _ => {
            text += "access to attrs=userPassword by self write by * auth\naccess to * by * read\n"
        }
    }
    match setup {
        Setup::Plain | Setup::Access(_) => {}
        Setup::MemberOfRefint => {
            text +=
                "overlay memberof\nmemberof-refint TRUE\noverlay refint\nrefint_attributes member\n"
        }
        Setup::SizeLimits => {
            text += &format!("limits dn.exact=\"{SETUP_UNLIMITED_DN}\" size=unlimited\n")
        }
    }
    text += extra.slapd_database;
    text
}

/// lmdir's config for the same data: `INDEXES`, and what `setup` adds.
fn lmdir_config_text(root: &Path, port: u16, setup: Setup, extra: &Extra<'_>) -> String {
    let size_limit = match setup {
        Setup::SizeLimits => SETUP_SIZE_LIMIT,
        _ => 0,
    };
    let mut text = format!(
        "[server]\nlisten = [\"ldap://127.0.0.1:{port}\"]\nsize_limit = {size_limit}\n{}\
         [database]\nsuffix = \"{SUFFIX}\"\ndirectory = \"{}\"\nrootdn = \"{ROOT_DN}\"\n\
         rootpw = \"{ROOT_PASSWORD}\"\n\
         # memberOf upkeep also removes deleted members from groups (like OpenLDAP's memberof +\n\
         # refint overlays): on only when the reference runs them.\n\
         memberof = {}\n{}[database.index]\n",
        extra.lmdir_server,
        root.join("lmdir-db").display(),
        setup == Setup::MemberOfRefint,
        extra.lmdir_database
    );
    for (attribute, kinds) in INDEXES {
        let kinds: Vec<String> = kinds.iter().map(|kind| format!("\"{kind}\"")).collect();
        text += &format!("{attribute} = [{}]\n", kinds.join(", "));
    }
    if setup == Setup::SizeLimits {
        text += &format!("[[limits]]\nwho = \"dn={SETUP_UNLIMITED_DN}\"\nsize = \"unlimited\"\n");
    }
    text
}

pub fn wait_until_up(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if root_dse_search_exit(port) == Some(0) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no LDAP server came up on port {port}");
}

/// What one ldap-utils command gave: its exit code (the LDAP result code), the normalized entries and
/// the matched DN it printed, if any.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub code: i32,
    pub entries: BTreeSet<String>,
    pub matched_dn: Option<String>,
}

pub fn search(
    port: u16,
    base: &str,
    scope: &str,
    filter: &str,
    attributes: &[&str],
    extra: &[&str],
) -> Answer {
    let mut command = Command::new("ldapsearch");
    command.args([
        "-x",
        "-LLL",
        "-o",
        "ldif-wrap=no",
        "-H",
        &format!("ldap://127.0.0.1:{port}"),
    ]);
    command.args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-b", base, "-s", scope]);
    command.args(extra).arg(filter).args(attributes);
    answer(command.output().unwrap())
}

/// Runs one ldap-utils `tool` (ldapwhoami, ldappasswd, ldapcompare...) against `port` with
/// `arguments` after `-x -H URL`: its exit code (the LDAP result code) and its standard output.
pub fn tool(port: u16, tool: &str, arguments: &[&str]) -> (i32, String) {
    let output = Command::new(tool)
        .args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(arguments)
        .output()
        .unwrap_or_else(|error| panic!("{tool}: {error}"));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// `tool` (ldapmodify or ldapadd) as the rootdn with `extra` arguments, `ldif` on its standard
/// input: the exit code, which is the LDAP result code.
pub fn ldap_change_code(port: u16, tool: &str, extra: &[&str], ldif: &str) -> i32 {
    let mut arguments = vec!["-D", ROOT_DN, "-w", ROOT_PASSWORD];
    arguments.extend_from_slice(extra);
    ldap_change_code_with(port, tool, &arguments, ldif)
}

/// `ldap_change_code` with the bind arguments in `arguments` (none: anonymous).
pub fn ldap_change_code_with<S: AsRef<std::ffi::OsStr>>(
    port: u16,
    tool: &str,
    arguments: &[S],
    ldif: &str,
) -> i32 {
    let mut child = Command::new(tool)
        .args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect(tool);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(ldif.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    let code = output.status.code().unwrap_or(-1);
    if code == 255 {
        // The server could not be reached (LDAP_SERVER_DOWN): say what the tool saw.
        eprintln!(
            "{tool} on port {port}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    code
}

/// Applies one LDIF change record with ldapmodify as the rootdn.
pub fn modify(port: u16, change: &str) -> Answer {
    let mut child = Command::new("ldapmodify")
        .args([
            "-x",
            "-H",
            &format!("ldap://127.0.0.1:{port}"),
            "-D",
            ROOT_DN,
            "-w",
            ROOT_PASSWORD,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(change.as_bytes())
        .unwrap();
    let mut answer = answer(child.wait_with_output().unwrap());
    answer.entries.clear(); // ldapmodify prints "modifying entry ..." lines, not entries
    answer
}

pub fn answer(output: Output) -> Answer {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let matched_dn = stderr
        .lines()
        .find_map(|line| line.trim().strip_prefix("Matched DN:"))
        .map(|dn| normalize_dn(dn.trim()));
    Answer {
        code: output.status.code().unwrap_or(-1),
        entries: normalize_ldif(&String::from_utf8_lossy(&output.stdout)),
        matched_dn,
    }
}

/// Splits a DN string at unescaped `separator`s.
fn split_unescaped(text: &str, separator: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut escaped = false;
    for character in text.chars() {
        if character == separator && !escaped {
            parts.push(String::new());
            continue;
        }
        escaped = character == '\\' && !escaped;
        parts.last_mut().unwrap().push(character);
    }
    parts
}

/// RFC 4514 lets a value escape a character as `\,` or `\2C`: both become one canonical form (the
/// character itself, backslash-escaped only where the RFC requires it).
fn canonical_escapes(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut decoded = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'\\' && index + 1 < bytes.len() {
            let hex =
                std::str::from_utf8(&bytes[index + 1..(index + 3).min(bytes.len())]).unwrap_or("");
            match u8::from_str_radix(hex, 16) {
                Ok(byte) if hex.len() == 2 => {
                    decoded.push(byte);
                    index += 3;
                }
                _ => {
                    decoded.push(bytes[index + 1]);
                    index += 2;
                }
            }
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    let mut canonical = String::new();
    for character in String::from_utf8_lossy(&decoded).chars() {
        if matches!(character, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=') {
            canonical.push('\\');
        }
        canonical.push(character);
    }
    canonical
}

/// A DN with canonical escapes, no spaces around separators and the AVAs of a multi-valued RDN
/// sorted (RFC 4514 2.2 leaves their order open: slapd sorts them, lmdir keeps the order given);
/// `lowercase` also folds case (names are case-insensitive; every naming attribute of this data
/// set is too).
fn canonical_dn(dn: &str, lowercase: bool) -> String {
    let fold = |text: &str| {
        if lowercase {
            text.to_lowercase()
        } else {
            text.to_string()
        }
    };
    split_unescaped(dn.trim(), ',')
        .iter()
        .map(|rdn| {
            let mut avas: Vec<String> = split_unescaped(rdn, '+')
                .iter()
                .map(|ava| match ava.split_once('=') {
                    Some((name, value)) => format!(
                        "{}={}",
                        name.trim().to_lowercase(),
                        fold(&canonical_escapes(value.trim()))
                    ),
                    None => fold(ava.trim()),
                })
                .collect();
            avas.sort();
            avas.join("+")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// DN spacing, escaping and case are left open by the standards for entry names.
pub fn normalize_dn(dn: &str) -> String {
    canonical_dn(dn, true)
}

/// DN-valued attributes keep their values' case but not their escaping or spacing.
const DN_VALUED: &[&str] = &[
    "entrydn",
    "member",
    "uniquemember",
    "creatorsname",
    "modifiersname",
    "manager",
    "seealso",
];

/// Each entry becomes one string: its normalized DN, then its sorted "attribute: value" lines.
pub fn normalize_ldif(text: &str) -> BTreeSet<String> {
    let mut entries = BTreeSet::new();
    for record in text.split("\n\n") {
        let mut dn = None;
        let mut lines: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in record.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = match value.strip_prefix(':') {
                Some(encoded) => (name, format!(":: {}", encoded.trim())),
                None => (name, format!(": {}", value.trim_start())),
            };
            if name.eq_ignore_ascii_case("dn") {
                let plain = match value.strip_prefix(":: ") {
                    Some(encoded) => String::from_utf8_lossy(&decode_base64(encoded)).into_owned(),
                    None => value.trim_start_matches(": ").to_string(),
                };
                dn = Some(normalize_dn(&plain));
                continue;
            }
            let name = name.to_lowercase();
            if NOT_COMPARED.contains(&name.as_str()) {
                continue;
            }
            let value = if VALUES_DIFFER_BY_NATURE.contains(&name.as_str()) {
                ": <differs by nature>".to_string()
            } else if DN_VALUED.contains(&name.as_str()) && !value.starts_with("::") {
                format!(": {}", canonical_dn(value.trim_start_matches(": "), false))
            } else {
                value
            };
            lines.entry(name).or_default().push(value);
        }
        if let Some(dn) = dn {
            let mut entry = format!("dn: {dn}");
            for (name, mut values) in lines {
                values.sort();
                if VALUES_DIFFER_BY_NATURE.contains(&name.as_str()) {
                    values.dedup();
                }
                for value in values {
                    entry += &format!("\n{name}{value}");
                }
            }
            entries.insert(entry);
        }
    }
    entries
}

fn decode_base64(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap_or_default()
}

/// A compact description of how two answers differ, for the failure message.
pub fn describe_difference(openldap: &Answer, lmdir: &Answer) -> String {
    let mut text = String::new();
    if openldap.code != lmdir.code {
        text += &format!(
            "  result code: OpenLDAP {} lmdir {}\n",
            openldap.code, lmdir.code
        );
    }
    if openldap.matched_dn != lmdir.matched_dn {
        text += &format!(
            "  matched DN: OpenLDAP {:?} lmdir {:?}\n",
            openldap.matched_dn, lmdir.matched_dn
        );
    }
    for entry in openldap.entries.difference(&lmdir.entries) {
        text += &format!("  only OpenLDAP:\n    {}\n", entry.replace('\n', "\n    "));
    }
    for entry in lmdir.entries.difference(&openldap.entries) {
        text += &format!("  only lmdir:\n    {}\n", entry.replace('\n', "\n    "));
    }
    text
}

/// One search sent to both servers.
pub struct Case {
    pub name: String,
    pub base: String,
    pub scope: &'static str,
    pub filter: String,
    pub attributes: Vec<&'static str>,
    pub extra: Vec<&'static str>,
    /// Size-limited searches return an arbitrary subset: compare the code and the count only.
    pub count_only: bool,
}

pub fn case(base: &str, scope: &'static str, filter: &str) -> Case {
    Case {
        name: format!("-b '{base}' -s {scope} '{filter}'"),
        base: base.to_string(),
        scope,
        filter: filter.to_string(),
        attributes: Vec::new(),
        extra: Vec::new(),
        count_only: false,
    }
}

/// Sends every case to both servers; one description per case whose answers differ.
pub fn run_cases(pair: &Pair, cases: &[Case]) -> Vec<String> {
    let mut differences = Vec::new();
    for case in cases {
        let [(_, openldap_port), (_, lmdir_port)] = pair.ports();
        let openldap = search(
            openldap_port,
            &case.base,
            case.scope,
            &case.filter,
            &case.attributes,
            &case.extra,
        );
        let lmdir = search(
            lmdir_port,
            &case.base,
            case.scope,
            &case.filter,
            &case.attributes,
            &case.extra,
        );
        let same = if case.count_only {
            openldap.code == lmdir.code && openldap.entries.len() == lmdir.entries.len()
        } else {
            openldap == lmdir
        };
        if !same {
            differences.push(format!(
                "{}\n{}",
                case.name,
                describe_difference(&openldap, &lmdir)
            ));
        }
    }
    differences
}

/// The normalized DNs of a subtree search as the rootdn, in the order the server sent them.
pub fn dns_in_output_order(port: u16, base: &str, extra: &[&str]) -> Vec<String> {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no"])
        .args(["-H", &format!("ldap://127.0.0.1:{port}")])
        .args(["-D", ROOT_DN, "-w", ROOT_PASSWORD, "-b", base, "-s", "sub"])
        .args(extra)
        .args(["(objectClass=*)", "1.1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "ldapsearch on port {port} failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            if let Some(encoded) = line.strip_prefix("dn:: ") {
                return Some(normalize_dn(&String::from_utf8_lossy(&decode_base64(
                    encoded,
                ))));
            }
            line.strip_prefix("dn: ").map(normalize_dn)
        })
        .collect()
}

/// The normalized DN of the parent of a normalized DN.
pub fn parent_dn(dn: &str) -> String {
    split_unescaped(dn, ',')[1..].join(",")
}
