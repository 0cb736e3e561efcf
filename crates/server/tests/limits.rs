//! Issue 10 #8, per-identity limits (`[[limits]]`, OpenLDAP's `limits` directive), over the wire
//! against a populated directory: a service account pages through everything while anonymous
//! and other users keep the server's limits; dn= and group= rules, first match wins; time and
//! look-through per identity; a `who` the schema cannot normalize stops the server starting.

use crate::common;

use common::{group_dn, person_dn, TestServer, PERSON_PASSWORD, ROOT_DN, ROOT_PASSWORD};
use ldap3::controls::{PagedResults, RawControl};
use ldap3::{LdapConn, Scope, SearchOptions};
use lmdir_config::{Limit, LimitsRule, Who};

const PEOPLE: &str = "ou=people,dc=example,dc=com";
const SUCCESS: u32 = 0;
const TIME_LIMIT_EXCEEDED: u32 = 3;
const SIZE_LIMIT_EXCEEDED: u32 = 4;
const ADMIN_LIMIT_EXCEEDED: u32 = 11;
const PAGED_RESULTS_OID: &str = "1.2.840.113556.1.4.319";

fn anonymous(server: &TestServer) -> LdapConn {
    LdapConn::new(&server.ldap_url()).expect("connect")
}

fn bound(server: &TestServer, dn: &str, password: &str) -> LdapConn {
    let mut connection = anonymous(server);
    connection
        .simple_bind(dn, password)
        .expect("bind")
        .success()
        .expect("bind succeeds");
    connection
}

fn person(server: &TestServer, index: usize) -> LdapConn {
    bound(server, &person_dn(index), PERSON_PASSWORD)
}

/// A rule for `who` with no limits set yet.
fn limits_for(who: Who) -> LimitsRule {
    LimitsRule {
        who,
        size: None,
        time_seconds: None,
        lookthrough: None,
        paged_total: None,
        page_size: None,
    }
}

/// One unpaged one-level search of ou=people: entries returned and the result code.
fn search_people(connection: &mut LdapConn, filter: &str) -> (usize, u32) {
    let result = connection
        .search(PEOPLE, Scope::OneLevel, filter, vec!["1.1"])
        .expect("search");
    (result.0.len(), result.1.rc)
}

/// One page of a paged search of ou=people: entries, result code, the cookie for the next.
fn one_page(connection: &mut LdapConn, page_size: i32, cookie: Vec<u8>) -> (usize, u32, Vec<u8>) {
    let controls: Vec<RawControl> = vec![PagedResults {
        size: page_size,
        cookie,
    }
    .into()];
    let result = connection
        .with_controls(controls)
        .with_search_options(SearchOptions::new())
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    let cookie = result
        .1
        .ctrls
        .iter()
        .find(|control| control.1.ctype == PAGED_RESULTS_OID)
        .map(|control| control.1.parse::<PagedResults>().cookie)
        .unwrap_or_default();
    (result.0.len(), result.1.rc, cookie)
}

/// Pages through ou=people as SSSD does; returns the entries seen and the final result code.
fn page_through(connection: &mut LdapConn, page_size: i32) -> (usize, u32) {
    let mut cookie = Vec::new();
    let mut seen = 0;
    for _ in 0..10_000 {
        let (entries, rc, next) = one_page(connection, page_size, cookie);
        seen += entries;
        if rc != SUCCESS || next.is_empty() {
            return (seen, rc);
        }
        cookie = next;
    }
    panic!("paging never ended");
}

#[test]
fn a_service_group_pages_through_every_user_while_anonymous_keeps_the_default() {
    // Group 1 holds people 100..199: the service accounts; group 2 (200..299) may page without
    // limit but keeps the size limit for plain searches (slapd's "size.prtotal=unlimited").
    let server = TestServer::start_populated(2000, Vec::new(), |settings| {
        settings.size_limit = 4;
        settings.limits = vec![
            LimitsRule {
                size: Some(Limit::Unlimited),
                ..limits_for(Who::Group(group_dn(1)))
            },
            LimitsRule {
                paged_total: Some(Limit::Unlimited),
                ..limits_for(Who::Group(group_dn(2)))
            },
        ];
    });
    let mut service = person(&server, 150);
    assert_eq!(page_through(&mut service, 1000), (2000, SUCCESS));
    assert_eq!(
        search_people(&mut service, "(objectClass=*)"),
        (2000, SUCCESS)
    );

    let mut pager = person(&server, 250);
    assert_eq!(page_through(&mut pager, 1000), (2000, SUCCESS));
    assert_eq!(
        search_people(&mut pager, "(objectClass=*)"),
        (4, SIZE_LIMIT_EXCEEDED)
    );

    // Anonymous and a user in no listed group: the server's limit, as a total over the pages.
    for mut connection in [anonymous(&server), person(&server, 50)] {
        assert_eq!(
            page_through(&mut connection, 1000),
            (4, SIZE_LIMIT_EXCEEDED)
        );
        assert_eq!(
            search_people(&mut connection, "(objectClass=*)"),
            (4, SIZE_LIMIT_EXCEEDED)
        );
    }
    // The rootdn is never limited.
    let mut root = bound(&server, ROOT_DN, ROOT_PASSWORD);
    assert_eq!(search_people(&mut root, "(objectClass=*)"), (2000, SUCCESS));
}

#[test]
fn dn_rules_apply_in_order_and_cap_the_page_size() {
    let server = TestServer::start_populated(120, Vec::new(), |settings| {
        settings.size_limit = 4;
        settings.limits = vec![
            LimitsRule {
                size: Some(Limit::Count(10)),
                page_size: Some(Limit::Count(3)),
                ..limits_for(Who::Dn(person_dn(7)))
            },
            LimitsRule {
                size: Some(Limit::Count(6)),
                ..limits_for(Who::Users)
            },
            // Never reached for bound users: the `users` rule above matches first.
            LimitsRule {
                size: Some(Limit::Unlimited),
                ..limits_for(Who::DnSubtree(PEOPLE.to_string()))
            },
        ];
    });
    let mut seven = person(&server, 7);
    assert_eq!(
        search_people(&mut seven, "(objectClass=*)"),
        (10, SIZE_LIMIT_EXCEEDED)
    );
    // A page of 1000 asked, 3 served; the size limit is the total over the pages.
    let (entries, rc, cookie) = one_page(&mut seven, 1000, Vec::new());
    assert_eq!((entries, rc), (3, SUCCESS));
    assert!(!cookie.is_empty(), "more pages follow");
    assert_eq!(page_through(&mut seven, 1000), (10, SIZE_LIMIT_EXCEEDED));

    assert_eq!(
        search_people(&mut person(&server, 8), "(objectClass=*)"),
        (6, SIZE_LIMIT_EXCEEDED)
    );
    assert_eq!(
        search_people(&mut anonymous(&server), "(objectClass=*)"),
        (4, SIZE_LIMIT_EXCEEDED)
    );
    // A client's own smaller size limit still applies under a lifted one.
    let result = seven
        .with_search_options(SearchOptions::new().sizelimit(2))
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!((result.0.len(), result.1.rc), (2, SIZE_LIMIT_EXCEEDED));
}

#[test]
fn look_through_and_time_limits_per_identity() {
    // A time limit of one nanosecond has passed by the time any search reads its first
    // candidate, so the server's limit is always hit and only a lifted one lets a search finish.
    let server = TestServer::start_populated(300, Vec::new(), |settings| {
        settings.lookthrough_limit = 50;
        settings.time_limit = std::time::Duration::from_nanos(1);
        settings.limits = vec![
            LimitsRule {
                lookthrough: Some(Limit::Unlimited),
                time_seconds: Some(Limit::Unlimited),
                ..limits_for(Who::Dn(person_dn(1)))
            },
            LimitsRule {
                time_seconds: Some(Limit::Count(3600)),
                ..limits_for(Who::Dn(person_dn(2)))
            },
        ];
    });
    // description is not indexed: the search looks through all 300 people.
    let unindexed = "(description=person number 1*)";
    assert_eq!(
        search_people(&mut person(&server, 1), unindexed),
        (111, SUCCESS)
    );
    let (_, rc) = search_people(&mut person(&server, 2), unindexed);
    assert_eq!(rc, ADMIN_LIMIT_EXCEEDED, "the server's look-through limit");
    // Few candidates (uid is indexed): under the look-through limit, so only time decides.
    let indexed = "(|(uid=u0000010)(uid=u0000011))";
    assert_eq!(
        search_people(&mut person(&server, 2), indexed),
        (2, SUCCESS)
    );
    let (_, rc) = search_people(&mut person(&server, 3), indexed);
    assert_eq!(rc, TIME_LIMIT_EXCEEDED, "the server's time limit");
    let (_, rc) = search_people(&mut anonymous(&server), indexed);
    assert_eq!(rc, TIME_LIMIT_EXCEEDED, "the server's time limit");
}

#[test]
fn a_limits_rule_the_schema_cannot_read_stops_the_start() {
    let directory = tempfile::tempdir().expect("tempdir");
    let text = "[[limits]]\nwho = \"users\"\nsize = 10\n\
                [[limits]]\nwho = \"group=noSuchType=x,dc=example,dc=com\"\nsize = 10\n";
    let mut config = lmdir_config::Config::from_str(text, "limits.toml").expect("valid syntax");
    config.database.directory = directory.path().join("data");
    config.server.listen = vec!["ldap://127.0.0.1:0".to_string()];
    std::fs::create_dir_all(&config.database.directory).expect("data dir");
    let settings = lmdir_server::ServerSettings::from_config(&config).expect("settings");
    assert_eq!(settings.limits, config.limits);
    let database = lmdir_server::Database::open(&config).expect("database opens");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let error = match runtime.block_on(lmdir_server::start(settings, Some(database))) {
        Ok(_) => panic!("a server started with an unreadable limits rule"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("limits[1].who"), "{error}");
    assert!(error.contains("noSuchType"), "{error}");
}
