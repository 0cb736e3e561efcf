//! Config parsing, defaults, and every kind of error with its file, line and key.

use std::path::PathBuf;

use lmdir_config::{AccessLevel, Config, ConfigError, IndexKind, Limit, Who, DEFAULT_CONFIG_TOML};

fn error_of(text: &str) -> ConfigError {
    Config::from_str(text, "test.toml").expect_err(text)
}

fn assert_error(text: &str, line: u64, key: &str, message_part: &str) {
    let error = error_of(text);
    assert_eq!(error.source_name, "test.toml");
    assert_eq!(error.line, Some(line), "{text:?}: {error}");
    assert_eq!(error.key.as_deref(), Some(key), "{text:?}: {error}");
    assert!(
        error.message.contains(message_part),
        "{text:?}: {error} should contain {message_part:?}"
    );
}

#[test]
fn embedded_default_equals_built_in_defaults_but_for_the_demo_admin() {
    let embedded = Config::embedded_default();
    let mut empty = Config::from_str("", "<embedded default>").unwrap();
    // Only the embedded demo names an admin and its password; a file does not inherit them.
    assert_eq!(embedded.database.rootdn, "cn=admin,dc=example,dc=com");
    assert_eq!(embedded.database.rootpw, "secret");
    assert_eq!(
        (
            empty.database.rootdn.as_str(),
            empty.database.rootpw.as_str()
        ),
        ("", "")
    );
    empty.database.rootdn = embedded.database.rootdn.clone();
    empty.database.rootpw = embedded.database.rootpw.clone();
    assert_eq!(embedded, empty);
    let mut built_in = Config::default();
    built_in.database.rootdn = embedded.database.rootdn.clone();
    built_in.database.rootpw = embedded.database.rootpw.clone();
    assert_eq!(embedded, built_in);
    assert_eq!(embedded.server.listen, vec!["ldap://127.0.0.1:3389"]);
    assert_eq!(embedded.server.pdu_bytes_max, 4_194_304);
    assert_eq!(
        embedded.database.index["uidNumber"],
        vec![IndexKind::Equality, IndexKind::Ordered]
    );
    assert_eq!(embedded.database.index.len(), 13);
    assert!(embedded.access.is_empty());
    assert!(DEFAULT_CONFIG_TOML.contains("[database.index]"));
}

/// A file naming a rootdn but no rootpw (a migrated slapd whose admin comes in over ldapi)
/// has no root password: before, it took the demo's "secret".
#[test]
fn a_file_without_rootpw_has_no_root_password() {
    let text = "[database]\nsuffix = \"dc=corp,dc=com\"\nrootdn = \"cn=manager,dc=corp,dc=com\"\n";
    let config = Config::from_str(text, "test.toml").unwrap();
    assert_eq!(config.database.rootdn, "cn=manager,dc=corp,dc=com");
    assert_eq!(config.database.rootpw, "");
    let config = Config::from_str("[database]\nsuffix = \"dc=corp,dc=com\"\n", "t").unwrap();
    assert_eq!(
        (
            config.database.rootdn.as_str(),
            config.database.rootpw.as_str()
        ),
        ("", "")
    );
}

#[test]
fn full_config_with_access_rules() {
    let text = r#"
[server]
listen = ["ldap://0.0.0.0:389", "ldaps://[::1]:636", "ldapi:///run/lmdir.sock", "ldapi://%2Ftmp%2Fs"]
tls_certificate = "cert.pem"
tls_key = "key.pem"
require_tls = true
log = "lmdir_server=debug,info"
password_hash = "pbkdf2-sha256"

[database]
suffix = "o=Zürich"
directory = "data"
rootdn = ""
sync = false

[database.index]
mail = ["equality", "pres", "substr", "approx"]

[[access]]
to = { subtree = "ou=people,o=Zürich", filter = "(&(objectClass=person)(!(uid=x\\29)))", attrs = ["userPassword"] }
by = [ { who = "self", access = "write" }, { who = "anonymous", access = "auth" },
       { who = "dn.subtree=ou=admins,o=Zürich", access = "read" }, { who = "*", access = "none" } ]

[[access]]
to = {}
by = [ { who = "group=cn=staff,o=Zürich", access = "search" }, { who = "DN=cn=x\\,y,o=Zürich", access = "compare" }, { who = "users", access = "read" } ]
"#;
    let config = Config::from_str(text, "full.toml").unwrap();
    assert_eq!(config.source_name, "full.toml");
    assert!(config.server.tls_enabled());
    assert_eq!(
        config.server.connections_max, 4096,
        "unset keys keep defaults"
    );
    assert_eq!(
        config.database.index.len(),
        1,
        "a given index table replaces the default"
    );
    assert_eq!(
        config.database.index["mail"],
        vec![
            IndexKind::Equality,
            IndexKind::Presence,
            IndexKind::Substring,
            IndexKind::Approx
        ]
    );
    assert!(!config.database.sync);
    assert_eq!(config.access.len(), 2);
    let rule = &config.access[0];
    assert_eq!(rule.to.attrs, vec!["userPassword"]);
    assert_eq!(rule.by[0].who, Who::SelfEntry);
    assert_eq!(rule.by[1].access, AccessLevel::Auth);
    assert_eq!(rule.by[2].who, Who::DnSubtree("ou=admins,o=Zürich".into()));
    assert_eq!(rule.by[3].who, Who::Anyone);
    assert_eq!(config.access[1].to, Default::default());
    assert_eq!(
        config.access[1].by[0].who,
        Who::Group("cn=staff,o=Zürich".into())
    );
    assert_eq!(
        config.access[1].by[1].who,
        Who::Dn("cn=x\\,y,o=Zürich".into())
    );
    assert_eq!(
        config.access[1].by[1].who.to_string(),
        "dn=cn=x\\,y,o=Zürich"
    );
    assert_eq!(
        config.database_directory().unwrap(),
        std::env::current_dir().unwrap().join("data")
    );
}

#[test]
fn load_reads_files_and_names_them() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("lmdir.toml");
    std::fs::write(&path, "[database]\nsuffix = \"dc=test\"\n").unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(config.database.suffix, "dc=test");
    assert_eq!(config.source_name, path.display().to_string());

    std::fs::write(&path, "[database]\n\nsufix = \"dc=test\"\n").unwrap();
    let error = Config::load(&path).unwrap_err();
    assert_eq!(error.line, Some(3));
    assert!(error.to_string().starts_with(&format!(
        "{}:3: database.sufix: unknown field",
        path.display()
    )));

    let missing = directory.path().join("missing.toml");
    let error = Config::load(&missing).unwrap_err();
    assert_eq!(error.line, None);
    assert!(error.message.contains("cannot read"), "{error}");
}

#[test]
fn syntax_and_type_errors() {
    assert_error(
        "[server]\nlisten = [\n",
        2,
        "server.listen",
        "unclosed array",
    );
    assert_error(
        "[server]\nconnections_max = \"many\"\n",
        2,
        "server.connections_max",
        "invalid type",
    );
    assert_error(
        "[server]\nconnections_max = -1\n",
        2,
        "server.connections_max",
        "",
    );
    assert_error(
        "[server]\nlisten = \"ldap://x\"\n",
        2,
        "server.listen",
        "invalid type",
    );
    assert_error("[servr]\n", 1, "servr", "unknown field");
    assert_error("[server]\nport = 1\n", 2, "server.port", "unknown field");
    assert_error(
        "[database.index]\ncn = [\"fast\"]\n",
        2,
        "database.index.cn",
        "unknown variant",
    );
    assert_error(
        "[[access]]\nto = {}\nby = [ { who = \"self\", access = \"writ\" } ]\n",
        3,
        "access[0].access",
        "unknown variant",
    );
    assert_error(
        "[[access]]\nto = {}\nby = [ { who = \"everybody\", access = \"read\" } ]\n",
        3,
        "access[0].who",
        "unknown who",
    );
    assert_error(
        "[[access]]\nto = { subtree = \"dc=x\", attr = [] }\nby = []\n",
        2,
        "access[0].attr",
        "unknown field",
    );
    assert_error(
        "[[access]]\nby = []\n",
        1,
        "access[0]",
        "missing field `to`",
    );
}

#[test]
fn validation_errors_name_line_and_key() {
    assert_error(
        "[server]\nlisten = []\n",
        2,
        "server.listen",
        "at least one",
    );
    assert_error(
        "[server]\nlisten = [\"ldap://a:1\",\n  \"http://x\"]\n",
        3,
        "server.listen[1]",
        "unknown scheme",
    );
    assert_error(
        "[server]\nlisten = [\"localhost:389\"]\n",
        2,
        "server.listen[0]",
        "not a URL",
    );
    assert_error(
        "[server]\nlisten = [\"ldap://:389\"]\n",
        2,
        "server.listen[0]",
        "missing host",
    );
    // A pldap listener believes headers only from the balancers named.
    assert_error(
        "[server]\nlisten = [\"pldap://0.0.0.0:389\"]\n",
        1,
        "server.proxy_protocol_sources",
        "needs proxy_protocol_sources",
    );
    assert_error(
        "[server]\nlisten = [\"pldap://h\"]\nproxy_protocol_sources = [\"10.0.0.0/8\", \"lb\"]\n",
        3,
        "server.proxy_protocol_sources[1]",
        "neither an IP address nor a network",
    );
    assert_error(
        "[server]\nlisten = [\"pldaps://h\"]\nproxy_protocol_sources = [\"10.0.0.7\"]\n",
        2,
        "server.listen",
        "pldaps:// listener needs tls_certificate",
    );
    assert_error(
        "[server]\nlisten = [\"ldap://h:99999\"]\n",
        2,
        "server.listen[0]",
        "port",
    );
    assert_error(
        "[server]\nlisten = [\"ldap://[::1\"]\n",
        2,
        "server.listen[0]",
        "unclosed",
    );
    assert_error(
        "[server]\nlisten = [\"ldapi://relative\"]\n",
        2,
        "server.listen[0]",
        "absolute",
    );
    assert_error(
        "[server]\nlisten = [\"ldaps://h:636\"]\n",
        2,
        "server.listen",
        "needs tls",
    );
    assert_error(
        "[server]\ntls_key = \"k.pem\"\n",
        2,
        "server.tls_key",
        "needs both",
    );
    assert_error(
        "[server]\nrequire_tls = true\n",
        2,
        "server.require_tls",
        "needs tls",
    );
    assert_error(
        "[server]\nrequire_tls_for_reads = true\n",
        2,
        "server.require_tls_for_reads",
        "needs require_tls",
    );
    assert_error(
        "[server]\nconnections_max = 0\n",
        2,
        "server.connections_max",
        "range",
    );
    assert_error(
        "[server]\npdu_bytes_max = 10\n",
        2,
        "server.pdu_bytes_max",
        "range",
    );
    assert_error(
        "[server]\nfilter_depth_max = 5000\n",
        2,
        "server.filter_depth_max",
        "range",
    );
    assert_error(
        "[server]\noperations_per_connection_max = 0\n",
        2,
        "server.operations_per_connection_max",
        "range",
    );
    assert_error(
        "[server]\nfilter_items_max = 100001\n",
        2,
        "server.filter_items_max",
        "range",
    );
    assert_error(
        "[server]\nrequested_attributes_max = 0\n",
        2,
        "server.requested_attributes_max",
        "range",
    );
    assert_error(
        "[server]\nsort_keys_max = 0\n",
        2,
        "server.sort_keys_max",
        "range",
    );
    assert_error(
        "[server]\nsort_bytes_max = 1000\n",
        2,
        "server.sort_bytes_max",
        "range",
    );
    assert_error(
        "[server]\npassword_hash = \"ROT13\"\n",
        2,
        "server.password_hash",
        "unknown password scheme",
    );
    assert_error(
        "[server]\nlog = \"verbose\"\n",
        2,
        "server.log",
        "unknown log level",
    );
    assert_error(
        "[database]\nsuffix = \"\"\n",
        2,
        "database.suffix",
        "must not be empty",
    );
    assert_error(
        "[database]\nsuffix = \"example.com\"\n",
        2,
        "database.suffix",
        "attribute=value",
    );
    assert_error(
        "[database]\nrootdn = \"cn=a,\"\n",
        2,
        "database.rootdn",
        "attribute=value",
    );
    assert_error(
        "[database]\npassword_policy_default = \"cn=default,\"\n",
        2,
        "database.password_policy_default",
        "attribute=value",
    );
    assert_error(
        "[database]\nmap_size_bytes = 4096\n",
        2,
        "database.map_size_bytes",
        "between",
    );
    assert_error(
        "[database]\ndirectory = \"\"\n",
        2,
        "database.directory",
        "must not be empty",
    );
    assert_error(
        "[database.index]\n\"c n\" = [\"eq\"]\n",
        2,
        "database.index.c n",
        "not an attribute name",
    );
    assert_error(
        "[database.index]\ncn = [\"eq\"]\nCN = [\"sub\"]\n",
        2,
        "database.index.cn",
        "same attribute",
    );
    assert_error(
        "[database.index]\ncn = []\n",
        2,
        "database.index.cn",
        "at least one index kind",
    );
    assert_error(
        "[[access]]\nto = { subtree = \"dc=x\" }\nby = [{ who = \"*\", access = \"read\" }]\n\n\
         [[access]]\nto = { filter = \"((cn=a)\" }\nby = [{ who = \"*\", access = \"read\" }]\n",
        6,
        "access[1].to.filter",
        "unbalanced",
    );
    assert_error(
        "[[access]]\nto = { filter = \"cn=a\" }\nby = [{ who = \"*\", access = \"read\" }]\n",
        2,
        "access[0].to.filter",
        "parentheses",
    );
    assert_error(
        "[[access]]\nto = { dn = \"nonsense\" }\nby = [{ who = \"*\", access = \"read\" }]\n",
        2,
        "access[0].to.dn",
        "attribute=value",
    );
    assert_error(
        "[[access]]\nto = { attrs = [\"user password\"] }\nby = [{ who = \"*\", access = \"read\" }]\n",
        2,
        "access[0].to.attrs",
        "not an attribute name",
    );
    assert_error(
        "[[access]]\nto = {}\nby = []\n",
        3,
        "access[0].by",
        "at least one",
    );
    assert_error(
        "[[access]]\nto = {}\nby = [{ who = \"dn.subtree=oops\", access = \"read\" }]\n",
        3,
        "access[0].who",
        "attribute=value",
    );
}

#[test]
fn error_display_format() {
    let error = error_of("[server]\nlog = \"loud\"\n");
    assert_eq!(
        error.to_string(),
        "test.toml:2: server.log: unknown log level \"loud\" (off, error, warn, info, debug, trace)"
    );
    let _ = PathBuf::new();
}

#[test]
fn ldapi_mode_is_octal_up_to_0777() {
    assert_eq!(Config::embedded_default().server.ldapi_mode, "0777");
    assert_eq!(lmdir_config::parse_ldapi_mode("0777"), Ok(0o777));
    assert_eq!(lmdir_config::parse_ldapi_mode("770"), Ok(0o770));
    for bad in ["", "77", "0778", "1777", "rwx", "07777", "-777"] {
        assert!(
            lmdir_config::parse_ldapi_mode(bad).is_err(),
            "{bad:?} accepted"
        );
    }
    let error = error_of("[server]\nldapi_mode = \"0999\"\n");
    assert!(error.to_string().contains("server.ldapi_mode"), "{error}");
}

#[test]
fn log_file_and_format() {
    let config = Config::from_str(
        "[server]\nlog_file = \"/var/log/lmdir/lmdir.log\"\nlog_format = \"json\"\n",
        "test.toml",
    )
    .unwrap();
    assert_eq!(
        config.server.log_file,
        PathBuf::from("/var/log/lmdir/lmdir.log")
    );
    assert_eq!(config.server.log_format, lmdir_config::LogFormat::Json);
    let default = Config::embedded_default();
    assert!(default.server.log_file.as_os_str().is_empty());
    assert_eq!(default.server.log_format, lmdir_config::LogFormat::Text);
    assert_error(
        "[server]\nlog_format = \"xml\"\n",
        2,
        "server.log_format",
        "xml",
    );
}

#[test]
fn limits_rules_parse_in_order() {
    let config = Config::from_str(
        "[[limits]]\nwho = \"group=cn=services,dc=example,dc=com\"\nsize = \"unlimited\"\n\
         paged_total = \"Unlimited\"\n\
         [[limits]]\nwho = \"anonymous\"\nsize = 10\ntime_seconds = 5\nlookthrough = 100\n\
         page_size = 50\n",
        "test.toml",
    )
    .expect("valid limits");
    let services = &config.limits[0];
    assert_eq!(
        services.who,
        Who::Group("cn=services,dc=example,dc=com".into())
    );
    assert_eq!(services.size, Some(Limit::Unlimited));
    assert_eq!(services.paged_total, Some(Limit::Unlimited));
    assert_eq!(services.time_seconds, None);
    let anonymous = &config.limits[1];
    assert_eq!(anonymous.who, Who::Anonymous);
    assert_eq!(anonymous.size, Some(Limit::Count(10)));
    assert_eq!(anonymous.time_seconds, Some(Limit::Count(5)));
    assert_eq!(anonymous.lookthrough, Some(Limit::Count(100)));
    assert_eq!(anonymous.page_size, Some(Limit::Count(50)));
    assert_eq!(Limit::Unlimited.zero_unlimited(), 0);
    assert!(Config::embedded_default().limits.is_empty());
}

#[test]
fn limits_errors_name_rule_and_key() {
    assert_error(
        "[[limits]]\nwho = \"users\"\nsize = 5\n[[limits]]\nwho = \"self\"\nsize = 5\n",
        5,
        "limits[1].who",
        "\"self\" means nothing",
    );
    assert_error(
        "[[limits]]\nwho = \"users\"\n",
        2,
        "limits[0].who",
        "at least one of size",
    );
    assert_error(
        "[[limits]]\nwho = \"users\"\nsize = 5\ntime_seconds = 0\n",
        4,
        "limits[0].time_seconds",
        "0 is not a limit",
    );
    assert_error(
        "[[limits]]\nwho = \"users\"\nlookthrough = \"lots\"\n",
        3,
        "limits[0].lookthrough",
        "expected a positive number or \"unlimited\"",
    );
    assert_error(
        "[[limits]]\nwho = \"nobody\"\nsize = 5\n",
        2,
        "limits[0].who",
        "unknown who",
    );
    assert_error(
        "[[limits]]\nwho = \"users\"\nsize.soft = 5\n",
        3,
        "limits[0].size.soft",
        "expected a positive number",
    );
}

#[test]
fn integrity_and_dynlist_parse_and_their_errors_name_the_key() {
    let config = Config::from_str(
        "[integrity]\nreferential_attributes = [\"member\", \"manager\"]\n\
         referential_nothing = \"cn=nobody,dc=example,dc=com\"\n\
         [[integrity.unique]]\nattributes = [\"uid\"]\n\
         [[integrity.unique]]\nbase = \"ou=people,dc=example,dc=com\"\nattributes = [\"mail\"]\n\
         [[dynlist]]\nobject_class = \"groupOfURLs\"\n",
        "test.toml",
    )
    .unwrap();
    assert_eq!(
        config.integrity.referential_attributes,
        vec!["member", "manager"]
    );
    assert_eq!(
        config.integrity.referential_modifiers_name,
        "cn=Referential Integrity Overlay"
    );
    assert_eq!(config.integrity.unique.len(), 2);
    assert_eq!(config.integrity.unique[0].base, "");
    assert_eq!(config.dynlist[0].url_attribute, "memberURL");
    assert_eq!(config.dynlist[0].member_attribute, "member");
    assert_eq!(config.dynlist[0].member_of_attribute, "");
    assert_error(
        "[integrity]\nreferential_attributes = [\"not a name\"]\n",
        2,
        "integrity.referential_attributes",
        "is not an attribute name",
    );
    assert_error(
        "[integrity]\nreferential_nothing = \"no equals sign\"\n",
        2,
        "integrity.referential_nothing",
        "",
    );
    assert_error(
        "[[integrity.unique]]\nbase = \"dc=x\"\nattributes = []\n",
        3,
        "integrity.unique[0].attributes",
        "names attributes",
    );
    assert_error(
        "[[dynlist]]\nobject_class = \"group of urls\"\n",
        2,
        "dynlist[0].object_class",
        "is not a name",
    );
}

/// `Config::check` finds a rule between keys broken by a config put together from two files
/// (a reload keeping the running TLS files): each file alone was valid.
#[test]
fn check_names_a_rule_between_keys_of_a_combined_config() {
    let with_tls = Config::from_str(
        "[server]\nrequire_tls = true\ntls_certificate = \"c.pem\"\ntls_key = \"k.pem\"\n",
        "test.toml",
    )
    .unwrap();
    assert_eq!(with_tls.check(), Ok(()));
    let mut combined = with_tls.clone();
    let without_tls = Config::default();
    combined.server.tls_certificate = without_tls.server.tls_certificate;
    combined.server.tls_key = without_tls.server.tls_key;
    let problem = combined.check().unwrap_err();
    assert!(
        problem.starts_with("server.require_tls: ") && problem.contains("needs tls"),
        "{problem}"
    );
}
