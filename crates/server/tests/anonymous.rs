//! Issue 20 #4: refusing anonymous sessions, as slapd's `disallow bind_anon` and `require authc`
//! (`[server] disallow_anonymous_bind`, `require_authentication`). The result codes and texts
//! are slapd 2.5's (crates/lmdir/tests/differential_anonymous.rs compares them with a slapd).

use crate::common;

use common::{person_dn, TestServer, PERSON_PASSWORD, ROOT_DN, ROOT_PASSWORD};
use ldap3::{LdapConn, LdapConnSettings, Mod, Scope};
use std::collections::HashSet;

const SUFFIX: &str = "dc=example,dc=com";

fn connect(server: &TestServer) -> LdapConn {
    LdapConn::new(&server.ldap_url()).expect("connect")
}

/// The code of each operation an anonymous session tries.
fn anonymous_codes(server: &TestServer) -> Vec<(&'static str, u32)> {
    let mut connection = connect(server);
    let search = |connection: &mut LdapConn, base: &str| {
        connection
            .search(base, Scope::Base, "(objectClass=*)", vec!["1.1"])
            .expect("search")
            .1
            .rc
    };
    let target = person_dn(0);
    vec![
        ("search", search(&mut connection, SUFFIX)),
        ("root DSE", search(&mut connection, "")),
        ("subschema", search(&mut connection, "cn=Subschema")),
        (
            "compare",
            connection
                .compare(&target, "uid", "nobody")
                .expect("compare")
                .0
                .rc,
        ),
        (
            "whoami",
            connection
                .extended(ldap3::exop::WhoAmI)
                .expect("whoami")
                .1
                .rc,
        ),
        (
            "modify",
            connection
                .modify(&target, vec![Mod::Replace("sn", HashSet::from(["x"]))])
                .expect("modify")
                .rc,
        ),
        ("delete", connection.delete(&target).expect("delete").rc),
    ]
}

#[test]
fn disallow_anonymous_bind_answers_48_and_leaves_other_binds() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.disallow_anonymous_bind = true
    });
    let mut connection = connect(&server);
    let refused = connection.simple_bind("", "").expect("bind");
    assert_eq!(refused.rc, 48, "inappropriateAuthentication: {refused:?}");
    assert_eq!(refused.text, "anonymous bind disallowed");
    // The session stays usable: a real bind succeeds, and an unbound session still reads.
    connection
        .simple_bind(&person_dn(1), PERSON_PASSWORD)
        .expect("bind")
        .success()
        .expect("a user's bind");
    let codes = anonymous_codes(&server);
    assert_eq!(codes[0], ("search", 0), "{codes:?}");
}

#[test]
fn require_authentication_refuses_everything_but_bind_and_starttls() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.require_authentication = true
    });
    assert_eq!(
        anonymous_codes(&server),
        vec![
            ("search", 53),
            ("root DSE", 53),
            ("subschema", 53),
            ("compare", 53),
            ("whoami", 53),
            ("modify", 8),
            ("delete", 8),
        ]
    );
    // An anonymous bind is allowed (only `disallow bind_anon` refuses it) but does not authenticate.
    let mut connection = connect(&server);
    connection.simple_bind("", "").unwrap().success().unwrap();
    let still = connection
        .search(SUFFIX, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .unwrap();
    assert_eq!(still.1.rc, 53);
    // StartTLS is allowed before the bind.
    let settings = LdapConnSettings::new()
        .set_starttls(true)
        .set_no_tls_verify(true);
    let mut secured = LdapConn::with_settings(settings, &server.ldap_url()).expect("StartTLS");
    secured
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .unwrap()
        .success()
        .unwrap();
    // After a bind everything works.
    let mut user = connect(&server);
    user.simple_bind(&person_dn(1), PERSON_PASSWORD)
        .unwrap()
        .success()
        .unwrap();
    let (entries, result) = user
        .search(SUFFIX, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .unwrap()
        .success()
        .map(|(entries, result)| (entries.len(), result.rc))
        .unwrap();
    assert_eq!((entries, result), (1, 0));
}
