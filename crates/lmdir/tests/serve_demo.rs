//! `lmdir serve --config FILE` on an empty database serves it empty: demo people (password
//! "password") belong only to the no-config trial run, never to a configured server or replica.

use crate::support;

use ldap3::{LdapConn, Scope};
use support::{TestServer, SUFFIX};

#[test]
fn a_configured_server_never_loads_demo_people() {
    let mut server = TestServer::prepare("", 0);
    // No --no-demo: the config file alone must keep the demo out.
    server.start_with(&["serve"]);
    let mut client = LdapConn::new(&format!("ldap://127.0.0.1:{}", server.port)).unwrap();
    let bind = client
        .simple_bind(&format!("uid=u0000001,ou=People,{SUFFIX}"), "password")
        .unwrap();
    assert_eq!(bind.rc, 49, "a demo person must not exist: {bind:?}");
    let search = client
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["1.1"])
        .unwrap();
    assert_eq!(search.1.rc, 32, "the suffix must not exist: {:?}", search.1);
    assert!(search.0.is_empty());
    let _ = client.unbind();
    server.assert_no_panic("serving an empty database");
}
