//! Starts a real server on ephemeral ports for integration tests.
#![allow(dead_code)]

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

    fn start_inner(
        adjust: impl FnOnce(&mut ServerSettings),
        database_rules: Option<Vec<lmdir_config::AccessRule>>,
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

/// Runs an ldap-utils binary; None (with a printed reason) when it is not installed.
pub fn ldap_tool(program: &str, arguments: &[&str]) -> Option<std::process::Output> {
    let mut command = Command::new(program);
    command.args(arguments).env("LDAPTLS_REQCERT", "never");
    match command.output() {
        Ok(output) => Some(output),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
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
