//! The config path `lmdir serve` takes: settings and database from lmdir-config's embedded
//! default (with the directory and port moved into a temp dir), then a real round trip.

use ldap3::{LdapConn, Scope};
use lmdir_server::{Database, ServerSettings};

#[test]
fn embedded_default_config_opens_a_database_and_serves() {
    let directory = tempfile::tempdir().expect("tempdir");
    let mut config = lmdir_config::Config::embedded_default();
    config.database.directory = directory.path().join("data");
    config.server.listen = vec!["ldap://127.0.0.1:0".to_string()];
    std::fs::create_dir_all(&config.database.directory).expect("data dir");

    let settings = ServerSettings::from_config(&config).expect("settings");
    assert_eq!(settings.size_limit, config.server.size_limit);
    let database = Database::open(&config).expect("database opens");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let running = runtime
        .block_on(lmdir_server::start(settings, Some(database)))
        .expect("start");
    let address = running.ldap_address().expect("ldap address");

    let mut connection = LdapConn::new(&format!("ldap://{address}")).expect("connect");
    connection
        .simple_bind(&config.database.rootdn, &config.database.rootpw)
        .expect("bind")
        .success()
        .expect("rootdn from config binds");
    let (entries, _) = connection
        .search("", Scope::Base, "(objectClass=*)", vec!["namingContexts"])
        .expect("search")
        .success()
        .expect("root DSE");
    let entry = ldap3::SearchEntry::construct(entries.into_iter().next().expect("root DSE"));
    assert_eq!(
        entry.attrs["namingContexts"],
        vec![config.database.suffix.clone()]
    );
    runtime.block_on(running.shutdown(std::time::Duration::from_secs(5)));
}

#[test]
fn bad_listen_url_is_a_config_error() {
    let mut config = lmdir_config::Config::embedded_default();
    config.server.listen = vec!["http://127.0.0.1:80".to_string()];
    let error = ServerSettings::from_config(&config).unwrap_err();
    assert!(error.contains("http://127.0.0.1:80"), "{error}");
}
