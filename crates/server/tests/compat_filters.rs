//! OpenLDAP compatibility of filters and schema over the wire: `:dn:` extensible matching on
//! DN values as written, the AD bitwise rules, language range options, cn=Subschema matched by
//! OID, and an rfc2307bis schema file overriding the built-in posixGroup.

use crate::common;

use common::{bind_url, TestServer, ROOT_DN, ROOT_PASSWORD};
use ldap3::{LdapConn, LdapError, Scope, SearchEntry};
use std::collections::HashSet;

const SUFFIX: &str = "dc=example,dc=com";
const ANN: &str = "uid=ann,ou=People,dc=example,dc=com";
const BEN: &str = "uid=ben,ou=People,dc=example,dc=com";
const DIVISION: &str = "ou=Information Technology Division,dc=example,dc=com";
const HELP_DESK: &str = "cn=Help Desk,ou=Information Technology Division,dc=example,dc=com";

fn add(connection: &mut LdapConn, dn: &str, attributes: &[(&str, &[&str])]) {
    let attributes: Vec<(&str, HashSet<&str>)> = attributes
        .iter()
        .map(|(name, values)| (*name, values.iter().copied().collect()))
        .collect();
    connection
        .add(dn, attributes)
        .expect("add sent")
        .success()
        .unwrap_or_else(|error| panic!("add {dn}: {error}"));
}

/// A small tree shaped like OpenLDAP's ordered test data: people under ou=People, a division
/// whose name only its own entry and its children carry in their DNs.
fn populate(connection: &mut LdapConn) {
    add(
        connection,
        SUFFIX,
        &[
            ("objectClass", &["top", "dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["Example"]),
        ],
    );
    add(
        connection,
        "ou=People,dc=example,dc=com",
        &[
            ("objectClass", &["organizationalUnit"]),
            ("ou", &["People"]),
        ],
    );
    for (dn, uid, uid_number) in [(ANN, "ann", "1042"), (BEN, "ben", "8")] {
        add(
            connection,
            dn,
            &[
                ("objectClass", &["inetOrgPerson", "posixAccount"]),
                ("uid", &[uid]),
                ("cn", &[uid]),
                ("sn", &[uid]),
                ("uidNumber", &[uid_number]),
                ("gidNumber", &["100"]),
                ("homeDirectory", &["/home/x"]),
            ],
        );
    }
    add(
        connection,
        DIVISION,
        &[
            ("objectClass", &["organizationalUnit"]),
            ("ou", &["Information Technology Division"]),
        ],
    );
    add(
        connection,
        HELP_DESK,
        &[
            ("objectClass", &["organizationalRole"]),
            ("cn", &["Help Desk"]),
            ("cn;lang-en-us", &["Help Desk (US)"]),
            ("description;lang-en-gb", &["Helpdesk"]),
        ],
    );
}

/// The DNs a subtree search of the suffix returns for `filter`.
fn found(connection: &mut LdapConn, filter: &str) -> HashSet<String> {
    let (entries, _) = connection
        .search(SUFFIX, Scope::Subtree, filter, vec!["1.1"])
        .expect("search sent")
        .success()
        .unwrap_or_else(|error| panic!("{filter}: {error}"));
    entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn)
        .collect()
}

fn dns(values: &[&str]) -> HashSet<String> {
    values.iter().map(|dn| dn.to_string()).collect()
}

#[test]
fn extensible_dn_bitwise_and_language_range_filters_match_as_in_slapd() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = bind_url(&server.ldap_url(), ROOT_DN, ROOT_PASSWORD);
    populate(&mut connection);
    let people = "ou=People,dc=example,dc=com";
    // :dn: tests every entry's DN values as written, with the rule asked for.
    assert_eq!(
        found(&mut connection, "(:dn:caseExactMatch:=People)"),
        dns(&[people, ANN, BEN])
    );
    assert_eq!(
        found(&mut connection, "(:dn:caseExactMatch:=people)"),
        dns(&[])
    );
    assert_eq!(
        found(&mut connection, "(:dn:caseIgnoreMatch:=people)"),
        dns(&[people, ANN, BEN])
    );
    assert_eq!(
        found(
            &mut connection,
            "(:dn:caseExactMatch:=Information Technology Division)"
        ),
        dns(&[DIVISION, HELP_DESK])
    );
    assert_eq!(
        found(&mut connection, "(ou:dn:=information technology division)"),
        dns(&[DIVISION, HELP_DESK])
    );
    // Bitwise AND / OR on uidNumber 1042 (0b100_0001_0010) and 8 (0b1000).
    assert_eq!(
        found(&mut connection, "(uidNumber:1.2.840.113556.1.4.803:=2)"),
        dns(&[ANN])
    );
    assert_eq!(
        found(&mut connection, "(uidNumber:1.2.840.113556.1.4.803:=10)"),
        dns(&[])
    );
    assert_eq!(
        found(&mut connection, "(uidNumber:1.2.840.113556.1.4.804:=10)"),
        dns(&[ANN, BEN])
    );
    assert_eq!(
        found(
            &mut connection,
            "(&(objectClass=posixAccount)(!(uidNumber:1.2.840.113556.1.4.803:=8)))"
        ),
        dns(&[ANN])
    );
    // Language ranges: lang-en- covers lang-en-us and lang-en-gb, on subtypes of name too.
    assert_eq!(
        found(&mut connection, "(cn;lang-en-=Help Desk \\28US\\29)"),
        dns(&[HELP_DESK])
    );
    assert_eq!(
        found(&mut connection, "(name;lang-en-=*)"),
        dns(&[HELP_DESK])
    );
    assert_eq!(
        found(&mut connection, "(description;lang-=*)"),
        dns(&[HELP_DESK])
    );
    assert_eq!(found(&mut connection, "(cn;lang-fr-=*)"), dns(&[]));
    // ... and in the attributes asked for: `name;lang-en-` returns `cn;lang-en-us` (a subtype
    // with a tag in the range), `description;lang-` every tagged description, `cn` alone not.
    let (entries, _) = connection
        .search(
            HELP_DESK,
            Scope::Base,
            "(objectClass=*)",
            vec!["name;lang-en-", "description;lang-"],
        )
        .expect("search sent")
        .success()
        .expect("help desk read");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("one entry"));
    let mut returned: Vec<&str> = entry.attrs.keys().map(String::as_str).collect();
    returned.sort_unstable();
    assert_eq!(returned, ["cn;lang-en-us", "description;lang-en-gb"]);
}

#[test]
fn the_subschema_entry_matches_by_oid_or_name() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = bind_url(&server.ldap_url(), ROOT_DN, ROOT_PASSWORD);
    for (filter, expected) in [
        ("(objectClasses=2.5.6.0)", 1),
        ("(objectClasses=pilotPerson)", 1),
        ("(attributeTypes=2.5.4.3)", 1),
        ("(objectClasses=2.5.6.999)", 0),
    ] {
        let (entries, _) = connection
            .search("cn=Subschema", Scope::Base, filter, vec!["1.1"])
            .expect("search sent")
            .success()
            .unwrap_or_else(|error| panic!("{filter}: {error}"));
        assert_eq!(entries.len(), expected, "{filter}");
    }
}

fn rfc2307bis_fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schema/tests/fixtures/rfc2307bis_style.schema")
}

/// Starts a server the way `lmdir serve` does (config → settings and database), with
/// `schema_files`; returns the runtime, the running server and its ldap:// URL.
fn serve_with_schema_files(
    directory: &std::path::Path,
    schema_files: Vec<std::path::PathBuf>,
) -> (tokio::runtime::Runtime, lmdir_server::RunningServer, String) {
    let mut config = lmdir_config::Config::embedded_default();
    config.database.directory = directory.join("data");
    config.database.schema_files = schema_files;
    config.server.listen = vec!["ldap://127.0.0.1:0".to_string()];
    std::fs::create_dir_all(&config.database.directory).expect("data dir");
    let settings = lmdir_server::ServerSettings::from_config(&config).expect("settings");
    let database = lmdir_server::Database::open(&config).expect("database opens");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let running = runtime
        .block_on(lmdir_server::start(settings, Some(database)))
        .expect("start");
    let url = format!("ldap://{}", running.ldap_address().expect("ldap address"));
    (runtime, running, url)
}

fn add_posix_group_of_names(url: &str) -> Result<ldap3::LdapResult, LdapError> {
    let mut connection = bind_url(url, ROOT_DN, ROOT_PASSWORD);
    add(
        &mut connection,
        SUFFIX,
        &[
            ("objectClass", &["top", "dcObject", "organization"]),
            ("dc", &["example"]),
            ("o", &["Example"]),
        ],
    );
    let attributes: Vec<(&str, HashSet<&str>)> = vec![
        ("objectClass", ["groupOfNames", "posixGroup"].into()),
        ("cn", ["admins"].into()),
        ("gidNumber", ["500"].into()),
        ("member", ["cn=admins,dc=example,dc=com"].into()),
    ];
    connection
        .add("cn=admins,dc=example,dc=com", attributes)?
        .success()
}

#[test]
fn an_rfc2307bis_schema_file_lets_posix_groups_be_groups_of_names() {
    assert_eq!(
        lmdir_config::Config::embedded_default()
            .database
            .schema_files,
        Vec::<std::path::PathBuf>::new()
    );
    // Built-in schema only: posixGroup is STRUCTURAL, the add is refused.
    let directory = tempfile::tempdir().expect("tempdir");
    let (runtime, running, url) = serve_with_schema_files(directory.path(), Vec::new());
    let refused = add_posix_group_of_names(&url).unwrap_err();
    assert!(
        refused.to_string().contains("rc=65"),
        "objectClassViolation expected: {refused}"
    );
    runtime.block_on(running.shutdown(std::time::Duration::from_secs(10)));

    // With the rfc2307bis file configured, its AUXILIARY posixGroup takes effect.
    let directory = tempfile::tempdir().expect("tempdir");
    let (runtime, running, url) =
        serve_with_schema_files(directory.path(), vec![rfc2307bis_fixture()]);
    add_posix_group_of_names(&url).expect("groupOfNames + posixGroup is accepted");
    let mut connection = bind_url(&url, ROOT_DN, ROOT_PASSWORD);
    let (entries, _) = connection
        .search(
            SUFFIX,
            Scope::Subtree,
            "(&(objectClass=posixGroup)(objectClass=groupOfNames))",
            vec!["gidNumber"],
        )
        .expect("search sent")
        .success()
        .expect("search");
    assert_eq!(entries.len(), 1);
    runtime.block_on(running.shutdown(std::time::Duration::from_secs(10)));
}

/// OpenLDAP's test suite adds an entry with no attributes and expects protocolError (2), not
/// objectClassViolation (65).
#[test]
fn an_add_without_attributes_is_a_protocol_error() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = bind_url(&server.ldap_url(), ROOT_DN, ROOT_PASSWORD);
    populate(&mut connection);
    let empty: Vec<(&str, std::collections::HashSet<&str>)> = Vec::new();
    let result = connection
        .add("cn=nothing,dc=example,dc=com", empty)
        .expect("add sent");
    assert_eq!(result.rc, 2, "{result:?}");
}

/// LDAPv2-style DNs in DN-syntax values (OpenLDAP's test suite stores them and expects them
/// refused or returned in RFC 4514 form): refused with invalidAttributeSyntax, as slapd does.
#[test]
fn ldapv2_dn_values_are_refused() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = bind_url(&server.ldap_url(), ROOT_DN, ROOT_PASSWORD);
    populate(&mut connection);
    for value in [
        "UID=jsmith;O=example;C=US",
        "CN=\"John Smith\",O=example",
        "OID.0.9.2342.19200300.100.1.1=jsmith,dc=example,dc=com",
    ] {
        let result = connection
            .add(
                "cn=v2group,dc=example,dc=com",
                vec![
                    ("objectClass", HashSet::from(["groupOfNames"])),
                    ("cn", HashSet::from(["v2group"])),
                    ("member", HashSet::from([value])),
                ],
            )
            .expect("add sent");
        assert_eq!(result.rc, 21, "{value}: {result:?}");
    }
}
