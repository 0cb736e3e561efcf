//! Issue 12, provider step 1 over the wire: every change takes an entryCSN carrying the server's
//! ID, and the suffix entry's contextCSN (one value per server ID) is the newest committed CSN
//! of that server ID after every add, modify, modrdn and delete.

use crate::common;

use common::{person_dn, root, TestServer};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use lmdir_sync::Csn;
use std::collections::{BTreeMap, HashSet};

const PEOPLE: usize = 300;
const SERVER_ID: u16 = 0x2a;
const SUFFIX: &str = "dc=example,dc=com";

fn csns(entry: &SearchEntry, attribute: &str) -> Vec<Csn> {
    entry
        .attrs
        .get(attribute)
        .into_iter()
        .flatten()
        .map(|text| text.parse().expect("a CSN in OpenLDAP's format"))
        .collect()
}

/// The suffix entry's contextCSN, by server ID.
fn context_csns(connection: &mut LdapConn, attributes: Vec<&str>) -> BTreeMap<u16, Csn> {
    let (entries, _) = connection
        .search(SUFFIX, Scope::Base, "(objectClass=*)", attributes)
        .expect("search answered")
        .success()
        .expect("search succeeded");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the suffix entry"));
    let csns = csns(&entry, "contextCSN");
    let by_sid: BTreeMap<u16, Csn> = csns.iter().map(|csn| (csn.sid(), *csn)).collect();
    assert_eq!(
        by_sid.len(),
        csns.len(),
        "one contextCSN value per server ID"
    );
    by_sid
}

/// The largest entryCSN in the directory, by server ID.
fn newest_entry_csns(connection: &mut LdapConn) -> BTreeMap<u16, Csn> {
    let (entries, _) = connection
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["entryCSN"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    let mut newest: BTreeMap<u16, Csn> = BTreeMap::new();
    for entry in entries {
        for csn in csns(&SearchEntry::construct(entry), "entryCSN") {
            let slot = newest.entry(csn.sid()).or_insert(csn);
            *slot = (*slot).max(csn);
        }
    }
    newest
}

fn entry_csn(connection: &mut LdapConn, dn: &str) -> Csn {
    let (entries, _) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec!["entryCSN"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the entry"));
    csns(&entry, "entryCSN")[0]
}

#[test]
fn context_csn_is_the_newest_change_after_every_write() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.replication.server_id = SERVER_ID;
    });
    let mut connection = root(&server);
    // The fixture's entries were written before the server ID was set: server ID 0.
    let before = context_csns(&mut connection, vec!["+"]);
    assert_eq!(before, newest_entry_csns(&mut connection));
    assert_eq!(before.keys().copied().collect::<Vec<_>>(), vec![0]);

    let new_dn = format!("uid=csn-test,{}", "ou=people,dc=example,dc=com");
    let renamed_dn = "uid=csn-renamed,ou=people,dc=example,dc=com".to_string();
    let mut issued: Vec<Csn> = Vec::new();
    let check = |connection: &mut LdapConn, issued: &mut Vec<Csn>, dn: Option<&str>| {
        let context = context_csns(connection, vec!["contextCSN"]);
        assert_eq!(context[&0], before[&0], "server ID 0 did not change");
        let ours = context[&SERVER_ID];
        assert!(
            issued.last().is_none_or(|last| *last < ours),
            "CSNs only grow"
        );
        issued.push(ours);
        if let Some(dn) = dn {
            assert_eq!(entry_csn(connection, dn), ours, "the change's entryCSN");
            assert_eq!(newest_entry_csns(connection)[&SERVER_ID], ours);
        }
    };
    connection
        .add(
            &new_dn,
            vec![
                ("objectClass", HashSet::from(["inetOrgPerson"])),
                ("uid", HashSet::from(["csn-test"])),
                ("cn", HashSet::from(["CSN Test"])),
                ("sn", HashSet::from(["Test"])),
            ],
        )
        .unwrap()
        .success()
        .unwrap();
    check(&mut connection, &mut issued, Some(&new_dn));
    connection
        .modify(
            &person_dn(7),
            vec![Mod::Replace("sn", HashSet::from(["Seven"]))],
        )
        .unwrap()
        .success()
        .unwrap();
    check(&mut connection, &mut issued, Some(&person_dn(7)));
    connection
        .modifydn(&new_dn, "uid=csn-renamed", true, None)
        .unwrap()
        .success()
        .unwrap();
    check(&mut connection, &mut issued, Some(&renamed_dn));
    connection.delete(&renamed_dn).unwrap().success().unwrap();
    // A delete leaves no entry carrying its CSN: the contextCSN is newer than every entry's.
    check(&mut connection, &mut issued, None);
    let after_delete = *issued.last().expect("checked");
    assert!(newest_entry_csns(&mut connection)[&SERVER_ID] < after_delete);
    // A refused change takes no CSN that sticks.
    let refused = connection
        .modify(&renamed_dn, vec![Mod::Replace("sn", HashSet::from(["x"]))])
        .unwrap();
    assert_eq!(refused.rc, 32, "noSuchObject");
    assert_eq!(
        context_csns(&mut connection, vec!["contextCSN"])[&SERVER_ID],
        after_delete
    );
    connection
        .modify(
            &person_dn(8),
            vec![Mod::Replace("sn", HashSet::from(["Eight"]))],
        )
        .unwrap()
        .success()
        .unwrap();
    check(&mut connection, &mut issued, Some(&person_dn(8)));
}

#[test]
fn context_csn_is_not_returned_on_other_entries_nor_without_asking() {
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.replication.server_id = SERVER_ID;
    });
    let mut connection = root(&server);
    assert_eq!(
        entries_with_context_csn(&mut connection),
        vec![SUFFIX.to_string()]
    );
    let (entries, _) = connection
        .search(SUFFIX, Scope::Base, "(objectClass=*)", vec!["*"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    assert!(!SearchEntry::construct(entries.into_iter().next().unwrap())
        .attrs
        .contains_key("contextCSN"));
}

/// The DNs of the entries a `*` `+` subtree search returns with a contextCSN.
fn entries_with_context_csn(connection: &mut LdapConn) -> Vec<String> {
    let (entries, _) = connection
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["*", "+"])
        .expect("search answered")
        .success()
        .expect("search succeeded");
    entries
        .into_iter()
        .map(SearchEntry::construct)
        .filter(|entry| entry.attrs.contains_key("contextCSN"))
        .map(|entry| entry.dn)
        .collect()
}

#[test]
fn a_server_that_does_not_replicate_shows_no_context_csn_as_slapd_without_syncprov() {
    let server = TestServer::start_populated(10, Vec::new(), |_| {});
    let mut connection = root(&server);
    assert!(entries_with_context_csn(&mut connection).is_empty());
}
