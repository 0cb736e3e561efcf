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
    slapd_pid_file: PathBuf,
    lmdir: Child,
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = self.lmdir.kill();
        let _ = self.lmdir.wait();
        if let Ok(pid) = std::fs::read_to_string(&self.slapd_pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}

/// Configuration added to each server on top of the shared one (e.g. an overlay and its
/// counterpart in lmdir): slapd.conf lines for the global and the database section, TOML lines
/// for lmdir's `[database]`.
#[derive(Default)]
pub struct Extra<'a> {
    pub slapd_global: &'a str,
    pub slapd_database: &'a str,
    pub lmdir_database: &'a str,
}

impl Pair {
    /// Loads `ldif` into both servers (slapadd, `lmdir load`) and starts them.
    pub fn start(ldif: &str) -> Pair {
        Pair::start_with(ldif, &Extra::default())
    }

    /// `start`, each server configured with its part of `extra`.
    pub fn start_with(ldif: &str, extra: &Extra<'_>) -> Pair {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        let ldif_path = root.join("data.ldif");
        std::fs::write(&ldif_path, ldif).unwrap();

        let openldap_port = free_port();
        let slapd_config = root.join("slapd.conf");
        let slapd_pid_file = root.join("slapd.pid");
        std::fs::create_dir_all(root.join("openldap-db")).unwrap();
        let mut text = String::new();
        for schema in ["core", "cosine", "inetorgperson", "nis"] {
            text += &format!("include /etc/ldap/schema/{schema}.schema\n");
        }
        text += &format!(
            "modulepath /usr/lib/ldap\nmoduleload back_mdb\n{}pidfile {}\nsizelimit unlimited\n\
             database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"{ROOT_DN}\"\nrootpw {ROOT_PASSWORD}\n\
             directory {}\nmaxsize 1073741824\n",
            extra.slapd_global,
            slapd_pid_file.display(),
            root.join("openldap-db").display()
        );
        for (attribute, kinds) in INDEXES {
            text += &format!("index {attribute} {}\n", kinds.join(","));
        }
        text += extra.slapd_database;
        std::fs::write(&slapd_config, text).unwrap();
        run_checked(
            Command::new("slapadd")
                .arg("-f")
                .arg(&slapd_config)
                .arg("-l")
                .arg(&ldif_path),
        );
        run_checked(
            Command::new(slapd_binary())
                .arg("-f")
                .arg(&slapd_config)
                .arg("-h")
                .arg(format!("ldap://127.0.0.1:{openldap_port}/")),
        );

        let lmdir_port = free_port();
        let lmdir_config = root.join("lmdir.toml");
        let mut text = format!(
            "[server]\nlisten = [\"ldap://127.0.0.1:{lmdir_port}\"]\nsize_limit = 0\n\
             [database]\nsuffix = \"{SUFFIX}\"\ndirectory = \"{}\"\nrootdn = \"{ROOT_DN}\"\n\
             rootpw = \"{ROOT_PASSWORD}\"\n\
             # memberOf upkeep also removes deleted members from groups (like OpenLDAP's memberof +\n\
             # refint overlays); the reference runs neither, so neither does this side.\n\
             memberof = false\n{}[database.index]\n",
            root.join("lmdir-db").display(),
            extra.lmdir_database
        );
        for (attribute, kinds) in INDEXES {
            let kinds: Vec<String> = kinds.iter().map(|kind| format!("\"{kind}\"")).collect();
            text += &format!("{attribute} = [{}]\n", kinds.join(", "));
        }
        std::fs::write(&lmdir_config, text).unwrap();
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
            slapd_pid_file,
            lmdir,
        };
        wait_until_up(openldap_port);
        wait_until_up(lmdir_port);
        pair
    }

    pub fn ports(&self) -> [(&'static str, u16); 2] {
        [("OpenLDAP", self.openldap_port), ("lmdir", self.lmdir_port)]
    }
}

fn run_checked(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

pub fn wait_until_up(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let status = Command::new("ldapsearch")
            .args([
                "-x",
                "-LLL",
                "-H",
                &format!("ldap://127.0.0.1:{port}"),
                "-b",
                "",
                "-s",
                "base",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if status.success() {
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

/// A DN with canonical escapes and no spaces around separators; `lowercase` also folds case (names
/// are case-insensitive; every naming attribute of this data set is too).
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
            split_unescaped(rdn, '+')
                .iter()
                .map(|ava| match ava.split_once('=') {
                    Some((name, value)) => format!(
                        "{}={}",
                        name.trim().to_lowercase(),
                        fold(&canonical_escapes(value.trim()))
                    ),
                    None => fold(ava.trim()),
                })
                .collect::<Vec<_>>()
                .join("+")
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
