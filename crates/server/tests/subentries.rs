//! RFC 3672 subentries over the wire, as back-mdb returns them: a one-level or subtree search
//! skips them unless the Subentries control (1.3.6.1.4.1.4203.1.10.1) is sent; TRUE returns
//! only subentries, FALSE only ordinary entries, in every scope; a base search returns one
//! without the control. The control is listed by the root DSE, accepted critical, and its
//! value is one BOOLEAN (anything else: protocolError). Paged, sorted and list-view searches
//! obey it.
//! The differential test against slapd is `crates/lmdir/tests/differential_subentries.rs`.

use crate::common;

use common::{root, TestServer};
use ldap3::controls::{PagedResults, RawControl};
use ldap3::{LdapConn, LdapResult, Scope, SearchEntry};
use std::collections::HashSet;

const PEOPLE: usize = 6;
const SUBENTRIES_OID: &str = "1.3.6.1.4.1.4203.1.10.1";
const SUFFIX: &str = "dc=example,dc=com";
const SORT_OID: &str = "1.2.840.113556.1.4.473";
const VLV_OID: &str = "2.16.840.1.113730.3.4.9";

fn subentries_control(critical: bool, visibility: bool) -> RawControl {
    RawControl {
        ctype: SUBENTRIES_OID.to_string(),
        crit: critical,
        val: Some(vec![0x01, 0x01, if visibility { 0xff } else { 0x00 }]),
    }
}

fn subentry_dns() -> [String; 2] {
    [
        format!("cn=top policy,{SUFFIX}"),
        format!("cn=people policy,ou=people,{SUFFIX}"),
    ]
}

/// A populated directory with a subentry below the suffix and one below ou=people.
fn started() -> TestServer {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut connection = root(&server);
    for dn in subentry_dns() {
        let cn = dn[3..].split(',').next().unwrap().to_string();
        let attributes = vec![
            ("objectClass", HashSet::from(["top", "subentry"])),
            ("cn", HashSet::from([cn.as_str()])),
            ("subtreeSpecification", HashSet::from(["{}"])),
        ];
        connection
            .add(&dn, attributes)
            .expect("sent")
            .success()
            .expect("add subentry");
    }
    server
}

/// The DNs (lowercased) a search returns with `controls`, or its result code.
fn dns(
    connection: &mut LdapConn,
    (base, scope): (&str, Scope),
    filter: &str,
    controls: Vec<RawControl>,
) -> Result<HashSet<String>, u32> {
    let ldap3::SearchResult(entries, result) = connection
        .with_controls(controls)
        .search(base, scope, filter, vec!["1.1"])
        .expect("search sent");
    if result.rc != 0 {
        return Err(result.rc);
    }
    Ok(entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase())
        .collect())
}

fn lowered(dns: &[String]) -> HashSet<String> {
    dns.iter().map(|dn| dn.to_ascii_lowercase()).collect()
}

#[test]
fn the_root_dse_lists_the_subentries_control() {
    let server = started();
    let (entries, _) = LdapConn::new(&server.ldap_url())
        .expect("connect")
        .search("", Scope::Base, "(objectClass=*)", vec!["supportedControl"])
        .expect("sent")
        .success()
        .expect("root DSE");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    assert!(entry.attrs["supportedControl"].contains(&SUBENTRIES_OID.to_string()));
}

#[test]
fn subentries_are_returned_only_as_the_control_asks() {
    let server = started();
    let mut connection = root(&server);
    let subtree = (SUFFIX, Scope::Subtree);
    let everything = "(objectClass=*)";
    let plain = dns(&mut connection, subtree, everything, Vec::new()).unwrap();
    assert!(plain.len() > PEOPLE, "the ordinary entries: {plain:?}");
    assert!(plain.is_disjoint(&lowered(&subentry_dns())), "{plain:?}");
    let named = dns(
        &mut connection,
        subtree,
        "(objectClass=subentry)",
        Vec::new(),
    );
    assert_eq!(named.unwrap(), HashSet::new(), "hidden even when named");
    for critical in [false, true] {
        let only = vec![subentries_control(critical, true)];
        let found = dns(&mut connection, subtree, everything, only).unwrap();
        assert_eq!(found, lowered(&subentry_dns()), "critical {critical}");
        let ordinary = vec![subentries_control(critical, false)];
        let found = dns(&mut connection, subtree, everything, ordinary).unwrap();
        assert_eq!(found, plain, "FALSE: ordinary entries only");
    }
    let one_level = (SUFFIX, Scope::OneLevel);
    let found = dns(&mut connection, one_level, everything, Vec::new()).unwrap();
    assert!(!found.contains(&subentry_dns()[0].to_ascii_lowercase()));
    let only = vec![subentries_control(true, true)];
    let found = dns(&mut connection, one_level, everything, only).unwrap();
    assert_eq!(found, lowered(&subentry_dns()[..1]));
}

#[test]
fn a_base_search_returns_a_subentry_unless_the_control_is_false() {
    let server = started();
    let mut connection = root(&server);
    let [subentry, _] = subentry_dns();
    let base = (subentry.as_str(), Scope::Base);
    let filter = "(objectClass=*)";
    let expected = lowered(std::slice::from_ref(&subentry));
    assert_eq!(
        dns(&mut connection, base, filter, Vec::new()).unwrap(),
        expected
    );
    let only = vec![subentries_control(true, true)];
    assert_eq!(dns(&mut connection, base, filter, only).unwrap(), expected);
    let ordinary = vec![subentries_control(true, false)];
    assert_eq!(
        dns(&mut connection, base, filter, ordinary).unwrap(),
        HashSet::new()
    );
    // An ordinary base with TRUE: not returned (success, no entry).
    let suffix = (SUFFIX, Scope::Base);
    let only = vec![subentries_control(false, true)];
    assert_eq!(
        dns(&mut connection, suffix, filter, only).unwrap(),
        HashSet::new()
    );
}

#[test]
fn paged_and_sorted_searches_obey_the_control() {
    let server = started();
    let mut connection = root(&server);
    let mut cookie = Vec::new();
    let mut seen = Vec::new();
    loop {
        let paged: RawControl = PagedResults {
            size: 1,
            cookie: cookie.clone(),
        }
        .into();
        let (entries, result) = connection
            .with_controls(vec![paged, subentries_control(true, true)])
            .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["1.1"])
            .expect("sent")
            .success()
            .expect("page");
        seen.extend(
            entries
                .into_iter()
                .map(|entry| SearchEntry::construct(entry).dn),
        );
        cookie = paged_cookie(&result);
        if cookie.is_empty() {
            break;
        }
    }
    assert_eq!(lowered(&seen), lowered(&subentry_dns()));
    assert_eq!(seen.len(), 2, "each once: {seen:?}");
    // SEQUENCE { SEQUENCE { "cn" } }
    let sort = RawControl {
        ctype: SORT_OID.to_string(),
        crit: true,
        val: Some(vec![0x30, 0x06, 0x30, 0x04, 0x04, 0x02, b'c', b'n']),
    };
    let (entries, _) = connection
        .with_controls(vec![sort.clone(), subentries_control(true, true)])
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["1.1"])
        .expect("sent")
        .success()
        .expect("sorted");
    let order: Vec<String> = entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase())
        .collect();
    let [top, people] = subentry_dns().map(|dn| dn.to_ascii_lowercase());
    assert_eq!(
        order,
        [people.clone(), top.clone()],
        "sorted by cn, subentries only"
    );
    // A list view from the first entry, 9 after it: { before 0, after 9, byOffset { 1, 0 } }.
    let window = RawControl {
        ctype: VLV_OID.to_string(),
        crit: true,
        val: Some(vec![
            0x30, 0x0e, 0x02, 0x01, 0x00, 0x02, 0x01, 0x09, 0xa0, 0x06, 0x02, 0x01, 0x01, 0x02,
            0x01, 0x00,
        ]),
    };
    let (entries, _) = connection
        .with_controls(vec![sort, window, subentries_control(false, true)])
        .search(SUFFIX, Scope::Subtree, "(objectClass=*)", vec!["1.1"])
        .expect("sent")
        .success()
        .expect("list view");
    let order: Vec<String> = entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase())
        .collect();
    assert_eq!(order, [people, top], "the list holds the subentries only");
}

fn paged_cookie(result: &LdapResult) -> Vec<u8> {
    let response = result
        .ctrls
        .iter()
        .find(|control| control.1.ctype == "1.2.840.113556.1.4.319")
        .expect("paged response");
    let parsed: PagedResults = response.1.clone().parse();
    parsed.cookie
}

#[test]
fn a_bad_value_is_a_protocol_error_and_compare_refuses_it_critical() {
    let server = started();
    let mut connection = root(&server);
    for value in [None, Some(vec![0x04, 0x01, 0xff]), Some(vec![0x01, 0x01])] {
        let control = RawControl {
            ctype: SUBENTRIES_OID.to_string(),
            crit: false,
            val: value.clone(),
        };
        let answer = dns(
            &mut connection,
            (SUFFIX, Scope::Subtree),
            "(cn=*)",
            vec![control],
        );
        assert_eq!(answer.err(), Some(2), "{value:?}");
    }
    let result = connection
        .with_controls(subentries_control(true, true))
        .compare(SUFFIX, "dc", "example")
        .expect("sent");
    assert_eq!(result.0.rc, 12, "a search control only");
}
