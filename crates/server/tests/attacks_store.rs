//! Issue 9 over the wire: one undecodable entry in a directory of thousands never stops other
//! results; the rootdn can delete it, and the store checks clean afterwards.

use crate::common;

use common::{person_dn, TestServer, ROOT_DN, ROOT_PASSWORD};
use ldap3::{LdapConn, Scope};

const PEOPLE: usize = 2_000;
/// Entries of `populate` besides the people: the suffix, two OUs, one group per 100 people.
const OTHER_ENTRIES: usize = 3 + PEOPLE / common::PEOPLE_PER_GROUP;

fn connect_as_root(server: &TestServer) -> LdapConn {
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .unwrap()
        .success()
        .unwrap();
    connection
}

/// Entries a subtree search returns, and its result code.
fn search_count(connection: &mut LdapConn, filter: &str) -> (usize, u32) {
    let result = connection
        .search("dc=example,dc=com", Scope::Subtree, filter, vec!["1.1"])
        .expect("search answered");
    (result.0.len(), result.1.rc)
}

fn corrupt_entry(server: &TestServer, dn: &str) -> u32 {
    let database = server.running().context().database.as_ref().unwrap();
    let store = database.store();
    let id = store.read().unwrap().dn_to_id(dn).unwrap();
    // The store's raw-env test hook: bytes no codec version accepts.
    let mut raw = store.env().write_txn().unwrap();
    store
        .id2entry_database()
        .put(
            &mut raw,
            &lmdir_store::layout::encode_id(id),
            b"\x01\xff\xff\xffnot an entry",
        )
        .unwrap();
    raw.commit().unwrap();
    id
}

#[test]
fn an_undecodable_entry_is_skipped_by_searches_and_deleted_by_the_rootdn() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut root = connect_as_root(&server);
    let (everything, code) = search_count(&mut root, "(objectClass=*)");
    assert_eq!((everything, code), (PEOPLE + OTHER_ENTRIES, 0));

    let victim_dn = person_dn(1_027);
    let victim = corrupt_entry(&server, &victim_dn);

    // Sequential (unindexed) and indexed searches return every other entry, with success.
    assert_eq!(
        search_count(&mut root, "(objectClass=*)"),
        (everything - 1, 0)
    );
    assert_eq!(
        search_count(&mut root, "(objectClass=inetOrgPerson)"),
        (PEOPLE - 1, 0)
    );
    // u0001000 .. u0001099 through the substring index, the victim among them.
    assert_eq!(search_count(&mut root, "(uid=u00010*)"), (99, 0));

    let store = server
        .running()
        .context()
        .database
        .as_ref()
        .unwrap()
        .store();
    let report = store.check().unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|problem| problem.contains(&format!("entry {victim} '{victim_dn}'"))),
        "{report}"
    );

    // Only the rootdn acts on an entry whose values (hence its access) are unknown.
    let mut person = LdapConn::new(&server.ldap_url()).expect("connect");
    person
        .simple_bind(&person_dn(1), common::PERSON_PASSWORD)
        .unwrap()
        .success()
        .unwrap();
    let refused = person.delete(&victim_dn).unwrap();
    assert_ne!(refused.rc, 0, "a person deleted the undecodable entry");
    assert_eq!(
        search_count(&mut root, "(objectClass=inetOrgPerson)"),
        (PEOPLE - 1, 0)
    );
    assert!(!store.check().unwrap().is_clean());

    let deleted = root.delete(&victim_dn).unwrap();
    assert_eq!(deleted.rc, 0, "rootdn delete: {}", deleted.text);
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        search_count(&mut root, "(objectClass=*)"),
        (everything - 1, 0)
    );
    assert_eq!(
        search_count(&mut root, "(objectClass=inetOrgPerson)"),
        (PEOPLE - 1, 0)
    );
}
