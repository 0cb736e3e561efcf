//! What the replication tests share about an unmodified OpenLDAP slapd beside lmdir: the head of
//! its config, starting it in the foreground with its sync log, and comparing full `ldapsearch`
//! dumps of two servers.

use super::conformance::SUFFIX;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The attributes a dump holds: a provider's values a consumer must keep as sent.
pub const DUMPED: &[&str] = &[
    "*",
    "entryUUID",
    "entryCSN",
    "createTimestamp",
    "modifyTimestamp",
    "creatorsName",
    "modifiersName",
];

/// Every entry (DN lowercased) → its attribute lines, as `ldapsearch -LLL` prints them.
pub type Dump = BTreeMap<String, BTreeSet<String>>;

/// The first lines of a slapd.conf in `root`: the schemas the tests use, back_mdb and
/// `modules`, the pid file.
pub fn config_head(root: &Path, modules: &[&str]) -> String {
    let mut config = String::new();
    for schema in ["core", "cosine", "inetorgperson", "nis"] {
        config += &format!("include /etc/ldap/schema/{schema}.schema\n");
    }
    config += "modulepath /usr/lib/ldap\nmoduleload back_mdb\n";
    for module in modules {
        config += &format!("moduleload {module}\n");
    }
    config += &format!("pidfile {}\n", root.join("slapd.pid").display());
    config
}

/// slapd in the foreground (`-d sync`) on the config in `root`, serving `port`, its log
/// appended to `root/slapd.log`.
fn start_in(root: &Path, port: u16) -> std::process::Child {
    super::conformance::start_slapd(&root.join("slapd.conf"), port, "sync")
}

/// The sync log `start_in` keeps in `root`.
pub fn log(root: &Path) -> String {
    std::fs::read_to_string(root.join("slapd.log")).unwrap_or_default()
}

/// Every entry below the suffix of the server at `port`, read as `bind_dn` / `password`.
pub fn dump(port: u16, bind_dn: &str, password: &str) -> Dump {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(["-D", bind_dn, "-w", password, "-b", SUFFIX])
        .args(DUMPED)
        .output()
        .expect("running ldapsearch");
    String::from_utf8_lossy(&output.stdout)
        .split("\n\n")
        .filter(|record| !record.trim().is_empty())
        .map(|record| {
            let mut lines = record.lines();
            let dn = lines.next().unwrap_or_default().to_ascii_lowercase();
            (dn, lines.map(str::to_string).collect())
        })
        .collect()
}

/// How two dumps differ, for a failure message: the counts, a few DNs only on either side and
/// the lines that differ in the first two entries on both.
pub fn difference(provider: &Dump, consumer: &Dump) -> String {
    let only_provider: Vec<_> = provider
        .keys()
        .filter(|dn| !consumer.contains_key(*dn))
        .take(3)
        .collect();
    let only_consumer: Vec<_> = consumer
        .keys()
        .filter(|dn| !provider.contains_key(*dn))
        .take(3)
        .collect();
    let differing: Vec<_> = provider
        .iter()
        .filter(|(dn, lines)| consumer.get(*dn).is_some_and(|other| other != *lines))
        .take(2)
        .map(|(dn, lines)| {
            let other = &consumer[dn];
            let missing: Vec<_> = lines.difference(other).collect();
            let extra: Vec<_> = other.difference(lines).collect();
            format!("{dn}: provider only {missing:?}, consumer only {extra:?}")
        })
        .collect();
    format!(
        "{} vs {} entries; only on the provider {only_provider:?}; only on the consumer \
         {only_consumer:?}; {differing:?}",
        provider.len(),
        consumer.len()
    )
}

/// A slapd in the foreground (`-d sync`) on the config and database in its own directory, its
/// sync log there too; killed when dropped.
pub struct Slapd {
    directory: tempfile::TempDir,
    pub port: u16,
    child: std::process::Child,
}

impl Drop for Slapd {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Slapd {
    /// Writes `config(root)` as slapd.conf in a new directory with an empty `db`, and serves
    /// it on `port`.
    pub fn start(port: u16, config: impl FnOnce(&Path) -> String) -> Slapd {
        let directory = tempfile::tempdir().expect("slapd directory");
        let root = directory.path();
        std::fs::create_dir_all(root.join("db")).unwrap();
        std::fs::write(root.join("slapd.conf"), config(root)).unwrap();
        let child = start_in(root, port);
        Slapd {
            directory,
            port,
            child,
        }
    }

    /// SIGKILL, keeping the database and config for `resume`.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts slapd again on the same database, config and port.
    pub fn resume(&mut self) {
        self.stop();
        self.child = start_in(self.directory.path(), self.port);
    }

    pub fn log(&self) -> String {
        log(self.directory.path())
    }

    /// `slapcat` of the database (mdb allows it beside the running slapd).
    pub fn slapcat(&self) -> String {
        let output = Command::new("/usr/sbin/slapcat")
            .arg("-f")
            .arg(self.directory.path().join("slapd.conf"))
            .args(["-o", "ldif_wrap=no"])
            .output()
            .expect("running slapcat");
        assert!(output.status.success(), "slapcat failed");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}
