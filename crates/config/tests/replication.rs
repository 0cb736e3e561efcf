//! `[replication]` and `[[replication.consumer]]`: values, defaults, and each error naming its key.

use lmdir_config::{Config, ConfigError, SyncType};

fn error_of(text: &str) -> ConfigError {
    Config::from_str(text, "test.toml").expect_err(text)
}

fn assert_error(text: &str, key: &str, message_part: &str) {
    let error = error_of(text);
    assert_eq!(error.key.as_deref(), Some(key), "{text:?}: {error}");
    assert!(error.line.is_some(), "{text:?}: {error}");
    assert!(
        error.message.contains(message_part),
        "{text:?}: {error} should contain {message_part:?}"
    );
}

const CONSUMER: &str = r#"
[[replication.consumer]]
rid = 7
provider = "ldap://10.0.0.1:389"
search_base = "ou=people,dc=example,dc=com"
"#;

#[test]
fn defaults_and_a_full_consumer() {
    let default = Config::default();
    assert_eq!(default.replication.server_id, 0);
    assert!(!default.replication.provider);
    assert_eq!(default.replication.session_log_entries, 100_000);
    assert_eq!(default.replication.persist_searches_max, 64);
    assert!(default.replication.consumer.is_empty());
    assert!(!default.replication.is_read_only_replica());

    let config = Config::from_str(
        r#"
[replication]
server_id = 3
provider = true
session_log_entries = 500
[[replication.consumer]]
rid = 1
provider = "ldaps://ldap.example.com"
search_base = "dc=example,dc=com"
type = "refreshOnly"
interval_seconds = 30
retry_seconds = 2
bind_dn = "cn=replicator,dc=example,dc=com"
credentials = "secret"
tls_ca_certificate = "/etc/ssl/ca.pem"
"#,
        "test.toml",
    )
    .unwrap();
    let replication = &config.replication;
    assert_eq!((replication.server_id, replication.provider), (3, true));
    assert!(!replication.is_read_only_replica());
    let consumer = &replication.consumer[0];
    assert_eq!(consumer.sync_type, SyncType::RefreshOnly);
    assert_eq!((consumer.interval_seconds, consumer.retry_seconds), (30, 2));
    assert_eq!(consumer.tls_ca_certificate, "/etc/ssl/ca.pem");

    let replica = Config::from_str(CONSUMER, "test.toml").unwrap();
    let consumer = &replica.replication.consumer[0];
    assert_eq!(consumer.sync_type, SyncType::RefreshAndPersist);
    assert_eq!((consumer.interval_seconds, consumer.retry_seconds), (60, 5));
    assert!(consumer.bind_dn.is_empty() && !consumer.starttls);
    assert!(replica.replication.is_read_only_replica());
}

#[test]
fn replication_errors_name_the_key() {
    assert_error(
        "[replication]\nserver_id = 4096\n",
        "replication.server_id",
        "4095",
    );
    assert_error(
        "[replication]\nprovider = true\n",
        "replication.server_id",
        "server_id",
    );
    assert_error(
        "[replication]\nserver_id = 1\nprovider = true\nsession_log_entries = 10000001\n",
        "replication.session_log_entries",
        "0..=",
    );
    assert_error(
        "[replication]\npersist_searches_max = 0\n",
        "replication.persist_searches_max",
        "1..=",
    );
    assert_error(
        "[replication]\nready_lag_seconds_max = 0\n",
        "replication.ready_lag_seconds_max",
        "1..=",
    );
    assert_error(
        "[replication]\nready_lag_seconds_max = 31622401\n",
        "replication.ready_lag_seconds_max",
        "1..=31622400",
    );
    let with = |line: &str| format!("{CONSUMER}{line}\n");
    let key = |name: &str| format!("replication.consumer[0].{name}");
    assert_error(
        &CONSUMER.replace("rid = 7", "rid = 1000"),
        &key("rid"),
        "1..=999",
    );
    assert_error(
        &CONSUMER.replace("ldap://10.0.0.1:389", "http://x"),
        &key("provider"),
        "ldap:// or ldaps://",
    );
    assert_error(
        &CONSUMER.replace("10.0.0.1:389", "h:99999"),
        &key("provider"),
        "port",
    );
    assert_error(
        &CONSUMER.replace("ou=people,dc=example,dc=com", "dc=other,dc=org"),
        &key("search_base"),
        "suffix",
    );
    assert_error(
        &with("type = \"refreshSometimes\""),
        &key("type"),
        "variant",
    );
    assert_error(
        &with("interval_seconds = 0"),
        &key("interval_seconds"),
        "1..=",
    );
    assert_error(&with("retry_seconds = 0"), &key("retry_seconds"), "1..=");
    assert_error(&with("credentials = \"x\""), &key("credentials"), "bind_dn");
    assert_error(
        &with("bind_dn = \"nonsense\""),
        &key("bind_dn"),
        "attribute=value",
    );
    assert_error(
        &with("tls_ca_certificate = \"/ca.pem\""),
        &key("tls_ca_certificate"),
        "TLS",
    );
    assert_error(
        &(CONSUMER.replace("ldap://", "ldaps://") + "starttls = true\n"),
        &key("starttls"),
        "StartTLS",
    );
    assert_error(
        &format!("{CONSUMER}{CONSUMER}"),
        "replication.consumer[1].rid",
        "rid 7",
    );
}

#[test]
fn the_three_shapes_and_a_consumer_of_itself() {
    use lmdir_config::ReplicationShape;
    let shape = |text: &str| {
        Config::from_str(text, "test.toml")
            .unwrap()
            .replication
            .shape()
    };
    let provider = "[replication]\nserver_id = 1\nprovider = true\n";
    assert_eq!(shape(""), ReplicationShape::Standalone);
    assert_eq!(shape(provider), ReplicationShape::Provider);
    assert_eq!(shape(CONSUMER), ReplicationShape::ReadOnlyReplica);
    let multi = format!("{provider}{CONSUMER}");
    assert_eq!(shape(&multi), ReplicationShape::MultiProvider);
    assert!(Config::from_str(&multi, "test.toml")
        .unwrap()
        .replication
        .is_multi_provider());

    // A consumer whose provider is this server's own listener would replicate from itself.
    let own = |listen: &str, provider: &str| {
        format!(
            "[server]\nlisten = [\"{listen}\"]\n{}\n[[replication.consumer]]\nrid = 2\n\
             provider = \"{provider}\"\nsearch_base = \"dc=example,dc=com\"\n",
            provider_table()
        )
    };
    fn provider_table() -> &'static str {
        "[replication]\nserver_id = 1\nprovider = true"
    }
    for (listen, provider) in [
        ("ldap://127.0.0.1:3389", "ldap://127.0.0.1:3389"),
        ("ldap://LDAP1.example.com", "ldap://ldap1.example.com:389/"),
        ("ldap://0.0.0.0:3389", "ldap://localhost:3389"),
    ] {
        assert_error(
            &own(listen, provider),
            "replication.consumer[0].provider",
            "own listener",
        );
    }
    for (listen, provider) in [
        ("ldap://127.0.0.1:3389", "ldap://127.0.0.1:3390"),
        ("ldap://127.0.0.1:389", "ldaps://127.0.0.1:389"),
        ("ldap://0.0.0.0:3389", "ldap://10.0.0.2:3389"),
    ] {
        Config::from_str(&own(listen, provider), "test.toml").expect(provider);
    }
}

#[test]
fn a_consumer_needs_the_entry_uuid_equality_index() {
    let index = |lines: &str| {
        format!("[database]\nsuffix = \"dc=example,dc=com\"\n[database.index]\n{lines}\n{CONSUMER}")
    };
    assert_error(
        &index("uid = [\"eq\"]"),
        "database.index",
        "entryUUID = [\"eq\"]",
    );
    assert_error(
        &index("entryUUID = [\"pres\"]"),
        "database.index",
        "entryUUID",
    );
    for named in ["entryUUID", "entryuuid", "\"1.3.6.1.1.16.4\""] {
        let text = index(&format!("{named} = [\"eq\"]"));
        Config::from_str(&text, "test.toml").expect(&text);
    }
    // Without a consumer the index is the operator's choice.
    let provider_only =
        "[database.index]\nuid = [\"eq\"]\n[replication]\nserver_id = 1\nprovider = true\n";
    Config::from_str(provider_only, "test.toml").expect(provider_only);
}
