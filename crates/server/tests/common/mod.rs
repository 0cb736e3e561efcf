//! Starts a real server on ephemeral ports for integration tests.
#![allow(dead_code)]

pub mod http;
pub mod transaction;

use lmdir_server::{ListenAddress, RunningServer, ServerSettings};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub const ROOT_DN: &str = "cn=admin,dc=example,dc=com";
pub const ROOT_PASSWORD: &str = "secret";

pub struct TestServer {
    pub runtime: tokio::runtime::Runtime,
    pub running: Option<RunningServer>,
    pub directory: tempfile::TempDir,
}

impl TestServer {
    /// Starts with ldap://, ldaps:// (self-signed demo cert) and ldapi:// listeners; `adjust` may change
    /// settings before start.
    pub fn start(adjust: impl FnOnce(&mut ServerSettings)) -> TestServer {
        TestServer::start_inner(adjust, None)
    }

    /// Like `start`, with an empty store for dc=example,dc=com behind it (default access policy).
    pub fn start_with_database(adjust: impl FnOnce(&mut ServerSettings)) -> TestServer {
        TestServer::start_inner(adjust, Some(Vec::new()))
    }

    /// With a store and the given `[[access]]` rules.
    pub fn start_with_rules(rules: Vec<lmdir_config::AccessRule>) -> TestServer {
        TestServer::start_inner(|_| {}, Some(rules))
    }

    /// With a store holding `people` people (see `person_dn`, password `PERSON_PASSWORD`) and
    /// their groups (see `populate`), the given `[[access]]` rules (empty: the default policy) and
    /// `adjust`ed settings. The attack tests run against this: a directory of thousands of entries.
    pub fn start_populated(
        people: usize,
        rules: Vec<lmdir_config::AccessRule>,
        adjust: impl FnOnce(&mut ServerSettings),
    ) -> TestServer {
        TestServer::start_full(adjust, Some(rules), people)
    }

    fn start_inner(
        adjust: impl FnOnce(&mut ServerSettings),
        database_rules: Option<Vec<lmdir_config::AccessRule>>,
    ) -> TestServer {
        TestServer::start_full(adjust, database_rules, 0)
    }

    fn start_full(
        adjust: impl FnOnce(&mut ServerSettings),
        database_rules: Option<Vec<lmdir_config::AccessRule>>,
        people: usize,
    ) -> TestServer {
        let directory = tempfile::tempdir().expect("tempdir");
        let tls = lmdir_server::ensure_demo_tls(directory.path()).expect("demo tls");
        let mut settings = ServerSettings::with_defaults(vec![
            ListenAddress::Ldap("127.0.0.1:0".to_string()),
            ListenAddress::Ldaps("127.0.0.1:0".to_string()),
            ListenAddress::Ldapi(directory.path().join("ldapi.sock")),
        ]);
        settings.tls_certificate = Some(tls.certificate_path);
        settings.tls_key = Some(tls.key_path);
        adjust(&mut settings);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let database =
            database_rules.map(|rules| open_database(directory.path(), &settings, &rules));
        if people > 0 {
            let database = database
                .as_ref()
                .expect("a populated server has a database");
            populate(database.store(), people);
        }
        let running = runtime
            .block_on(lmdir_server::start(settings, database))
            .expect("server start");
        TestServer {
            runtime,
            running: Some(running),
            directory,
        }
    }

    pub fn running(&self) -> &RunningServer {
        self.running.as_ref().expect("server running")
    }

    pub fn ldap_address(&self) -> SocketAddr {
        self.running().ldap_address().expect("ldap listener")
    }

    pub fn ldap_url(&self) -> String {
        format!("ldap://{}", self.ldap_address())
    }

    pub fn ldaps_url(&self) -> String {
        format!("ldaps://{}", self.running().ldaps_address().expect("ldaps"))
    }

    pub fn ldapi_path(&self) -> PathBuf {
        self.directory.path().join("ldapi.sock")
    }

    pub fn ldapi_url(&self) -> String {
        lmdir_server::BoundAddress::Ldapi(self.ldapi_path()).url()
    }

    pub fn shutdown(&mut self) {
        if let Some(running) = self.running.take() {
            self.runtime
                .block_on(running.shutdown(Duration::from_secs(10)));
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// An `[[access]]` rule with one `by` clause: `who` gets `access` to `to`.
pub fn grant(
    to: lmdir_config::AccessTarget,
    who: lmdir_config::Who,
    access: lmdir_config::AccessLevel,
) -> lmdir_config::AccessRule {
    lmdir_config::AccessRule {
        to,
        by: vec![lmdir_config::AccessClause { who, access }],
    }
}

/// An `[[access]]` rule to `to` whose `by` clauses are `by`, in order.
pub fn rule_by(
    to: lmdir_config::AccessTarget,
    by: &[(lmdir_config::Who, lmdir_config::AccessLevel)],
) -> lmdir_config::AccessRule {
    lmdir_config::AccessRule {
        to,
        by: by
            .iter()
            .map(|(who, access)| lmdir_config::AccessClause {
                who: who.clone(),
                access: *access,
            })
            .collect(),
    }
}

/// The attributes `names` of every entry, as an `[[access]]` target.
pub fn attributes(names: &[&str]) -> lmdir_config::AccessTarget {
    lmdir_config::AccessTarget {
        attrs: names.iter().map(|name| name.to_string()).collect(),
        ..lmdir_config::AccessTarget::default()
    }
}

/// The usual password rule: the entry writes its own userPassword, anyone else may bind with
/// it and nothing more.
pub fn own_password_rule() -> lmdir_config::AccessRule {
    use lmdir_config::{AccessLevel, Who};
    rule_by(
        attributes(&["userPassword"]),
        &[
            (Who::SelfEntry, AccessLevel::Write),
            (Who::Anyone, AccessLevel::Auth),
        ],
    )
}

/// A connection to `url` bound as `dn` (a failed bind panics, naming the DN).
pub fn bind_url(url: &str, dn: &str, password: &str) -> ldap3::LdapConn {
    let mut connection = ldap3::LdapConn::new(url).expect("connect");
    connection
        .simple_bind(dn, password)
        .expect("bind sent")
        .success()
        .unwrap_or_else(|error| panic!("bind as '{dn}': {error}"));
    connection
}

/// A connection to the server's ldap:// listener bound as `dn`.
pub fn bind(server: &TestServer, dn: &str, password: &str) -> ldap3::LdapConn {
    bind_url(&server.ldap_url(), dn, password)
}

/// A connection bound as the rootdn.
pub fn root(server: &TestServer) -> ldap3::LdapConn {
    bind(server, ROOT_DN, ROOT_PASSWORD)
}

/// Runs an ldap-utils binary; None (with a printed reason) when it is not installed.
pub fn ldap_tool(program: &str, arguments: &[&str]) -> Option<std::process::Output> {
    let mut command = Command::new(program);
    command.args(arguments).env("LDAPTLS_REQCERT", "never");
    match command.output() {
        Ok(output) => Some(output),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI=true and {program} is missing (apt-get install ldap-utils)"
            );
            eprintln!("skipping: {program} is not installed (apt-get install ldap-utils)");
            None
        }
        Err(error) => panic!("running {program}: {error}"),
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn open_database(
    directory: &std::path::Path,
    settings: &ServerSettings,
    rules: &[lmdir_config::AccessRule],
) -> lmdir_server::Database {
    use std::sync::Arc;
    let schema = Arc::new(lmdir_schema::Schema::builtin());
    let indexes = [
        ("objectClass", vec![lmdir_store::IndexKind::Equality]),
        (
            "uid",
            vec![
                lmdir_store::IndexKind::Equality,
                lmdir_store::IndexKind::Substring,
            ],
        ),
        (
            "cn",
            vec![
                lmdir_store::IndexKind::Equality,
                lmdir_store::IndexKind::Substring,
            ],
        ),
        ("member", vec![lmdir_store::IndexKind::Equality]),
        ("memberOf", vec![lmdir_store::IndexKind::Equality]),
    ]
    .into_iter()
    .map(|(name, kinds)| (name.to_string(), kinds))
    .collect();
    let options = lmdir_store::StoreOptions {
        suffix: settings.suffix.clone(),
        indexes,
        sync: false,
        memberof: true,
        ..lmdir_store::StoreOptions::default()
    };
    let data = directory.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let store = lmdir_store::Store::open(&data, options, schema.clone()).expect("store open");
    let policy = lmdir_access::acl::AccessPolicy::from_config(
        rules,
        &schema,
        &settings.suffix,
        &settings.rootdn,
    )
    .expect("default policy");
    lmdir_server::Database::new(store, policy)
}

/// The password of every person `populate` writes.
pub const PERSON_PASSWORD: &str = "secret";
/// People per group in `populate`'s directory.
pub const PEOPLE_PER_GROUP: usize = 100;

/// The DN of person `index` (0-based) in `populate`'s directory.
pub fn person_dn(index: usize) -> String {
    format!("uid=u{index:07},ou=people,dc=example,dc=com")
}

/// The DN of group `index` in `populate`'s directory.
pub fn group_dn(index: usize) -> String {
    format!("cn=group{index:04},ou=groups,dc=example,dc=com")
}

/// Writes dc=example,dc=com, ou=people, ou=groups, `people` inetOrgPerson entries (uid, cn, sn,
/// mail, description, employeeNumber, userPassword `{SSHA}` of `PERSON_PASSWORD`) and one
/// groupOfNames per `PEOPLE_PER_GROUP` people, in one transaction.
pub fn populate(store: &lmdir_store::Store, people: usize) {
    use lmdir_schema::{Dn, Entry};
    let context = lmdir_store::WriteContext::new("cn=admin,dc=example,dc=com");
    let entry = |dn: &str, attributes: &[(&str, Vec<Vec<u8>>)]| {
        let mut entry = Entry::new(Dn::parse(dn).expect("fixture DN"));
        for (description, values) in attributes {
            entry.add_values(description, values.iter().cloned());
        }
        entry
    };
    let one = |value: &str| vec![value.as_bytes().to_vec()];
    let mut txn = store.write().expect("write txn");
    let top = [
        entry(
            "dc=example,dc=com",
            &[
                ("objectClass", vec![b"top".to_vec(), b"domain".to_vec()]),
                ("dc", one("example")),
            ],
        ),
        entry(
            "ou=people,dc=example,dc=com",
            &[
                ("objectClass", one("organizationalUnit")),
                ("ou", one("people")),
            ],
        ),
        entry(
            "ou=groups,dc=example,dc=com",
            &[
                ("objectClass", one("organizationalUnit")),
                ("ou", one("groups")),
            ],
        ),
    ];
    for top_entry in &top {
        txn.add(top_entry, &context).expect("fixture add");
    }
    let hash = lmdir_access::password::hash(
        lmdir_access::password::Scheme::Ssha,
        PERSON_PASSWORD.as_bytes(),
    )
    .expect("hash");
    for index in 0..people {
        let uid = format!("u{index:07}");
        let person = entry(
            &person_dn(index),
            &[
                ("objectClass", vec![b"inetOrgPerson".to_vec()]),
                ("uid", one(&uid)),
                ("cn", one(&format!("Person {index}"))),
                ("sn", one(&format!("Surname{}", index % 997))),
                ("mail", one(&format!("{uid}@example.com"))),
                ("description", one(&format!("person number {index}"))),
                ("employeeNumber", one(&index.to_string())),
                ("userPassword", vec![hash.clone()]),
            ],
        );
        txn.add(&person, &context).expect("fixture person");
    }
    for group in 0..people.div_ceil(PEOPLE_PER_GROUP) {
        let members = (group * PEOPLE_PER_GROUP..people.min((group + 1) * PEOPLE_PER_GROUP))
            .map(|index| person_dn(index).into_bytes())
            .collect();
        let group_entry = entry(
            &group_dn(group),
            &[
                ("objectClass", one("groupOfNames")),
                ("cn", one(&format!("group{group:04}"))),
                ("member", members),
            ],
        );
        txn.add(&group_entry, &context).expect("fixture group");
    }
    txn.commit().expect("fixture commit");
}

/// This process's uid, from /proc (the peercred identity SASL EXTERNAL over ldapi gives it).
pub fn own_uid() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|line| line.starts_with("Uid:"))?;
            line.split_whitespace().nth(1).map(str::to_string)
        })
        .expect("uid")
}
