//! The matched values control (RFC 3876) over the wire: only matching values come back, by the
//! schema's matching rules; it is no oracle on values the subject may not read; it works with
//! paging and sort; malformed and oversized filters are refused.

use crate::common;

use common::{bind, person_dn, root, TestServer, PERSON_PASSWORD};
use ldap3::controls::{MatchedValues, PagedResults, RawControl};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use std::collections::{HashMap, HashSet};

const PEOPLE: usize = 30;
const MATCHED_VALUES_OID: &str = "1.2.826.0.1.3344810.2.3";

type Attributes = HashMap<String, Vec<String>>;

/// A subtree search under ou=people with `controls`: each entry's DN and attributes, or the code.
fn search(
    connection: &mut LdapConn,
    filter: &str,
    attributes: Vec<&str>,
    controls: Vec<RawControl>,
) -> Result<Vec<(String, Attributes)>, u32> {
    let result = connection
        .with_controls(controls)
        .search(
            "ou=people,dc=example,dc=com",
            Scope::Subtree,
            filter,
            attributes,
        )
        .expect("search sent");
    if result.1.rc != 0 {
        return Err(result.1.rc);
    }
    Ok(result
        .0
        .into_iter()
        .map(|entry| {
            let entry = SearchEntry::construct(entry);
            (entry.dn, entry.attrs)
        })
        .collect())
}

fn started() -> TestServer {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    // Person 1 gets three mail values and a second cn to choose among.
    let mails = HashSet::from(["a@one.example", "b@two.example", "c@one.example"]);
    root(&server)
        .modify(
            &person_dn(1),
            vec![
                Mod::Replace("mail", mails),
                Mod::Add("cn", HashSet::from(["Alias One"])),
            ],
        )
        .expect("sent")
        .success()
        .expect("modify");
    server
}

#[test]
fn only_matching_values_return_by_the_schema_rules() {
    let server = started();
    let mut u2 = bind(&server, &person_dn(2), PERSON_PASSWORD);
    let found = search(
        &mut u2,
        "(uid=u0000001)",
        vec!["mail", "cn", "uid"],
        vec![MatchedValues::new("((mail=*@ONE.example)(cn=alias one))")],
    )
    .expect("search");
    let (_, attributes) = &found[0];
    let mut mails = attributes["mail"].clone();
    mails.sort();
    assert_eq!(mails, ["a@one.example", "c@one.example"]);
    assert_eq!(attributes["cn"], ["Alias One"]);
    // As slapd: an attribute with no matching value, named by an item or not, is left out.
    assert!(!attributes.contains_key("uid"), "{attributes:?}");
    // Every entry of the search is still returned.
    let all = search(
        &mut u2,
        "(objectClass=inetOrgPerson)",
        vec!["mail"],
        vec![MatchedValues::new("((mail=u0000007@example.com))")],
    )
    .expect("search");
    assert_eq!(all.len(), PEOPLE);
    let with_mail: Vec<&String> = all
        .iter()
        .filter(|(_, attributes)| attributes.contains_key("mail"))
        .map(|(dn, _)| dn)
        .collect();
    assert_eq!(with_mail, [&person_dn(7)]);
}

#[test]
fn hidden_values_are_no_oracle() {
    let server = started();
    let mut u2 = bind(&server, &person_dn(2), PERSON_PASSWORD);
    // u2 may not read u1's userPassword (default access: auth only): a right guess and a wrong
    // one answer the same.
    let answers: Vec<_> = [
        "((userPassword=secret))",
        "((userPassword=wrong))",
        "((userPassword=*))",
    ]
    .iter()
    .map(|item| {
        search(
            &mut u2,
            "(uid=u0000001)",
            vec!["userPassword", "uid"],
            vec![MatchedValues::new(item)],
        )
        .expect("search")
    })
    .collect();
    assert!(
        answers.iter().all(|answer| answer == &answers[0]),
        "{answers:?}"
    );
    assert!(!answers[0][0].1.contains_key("userPassword"));
    // The owner reads it, so it gets its value back by presence.
    let mut u1 = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let own = search(
        &mut u1,
        "(uid=u0000001)",
        vec!["userPassword"],
        vec![MatchedValues::new("((userPassword=*))")],
    )
    .expect("search");
    assert!(own[0].1.contains_key("userPassword"));
}

#[test]
fn works_with_paging_and_sort() {
    let server = started();
    let mut connection = root(&server);
    let sort = RawControl {
        ctype: "1.2.840.113556.1.4.473".to_string(),
        crit: true,
        // SEQUENCE { SEQUENCE { "uid" } reverseOrder TRUE }
        val: Some(vec![
            0x30, 0x0a, 0x30, 0x08, 0x04, 0x03, b'u', b'i', b'd', 0x81, 0x01, 0xff,
        ]),
    };
    let mut cookie = Vec::new();
    let mut seen = Vec::new();
    loop {
        let paged: RawControl = PagedResults {
            size: 7,
            cookie: cookie.clone(),
        }
        .into();
        let result = connection
            .with_controls(vec![
                paged,
                sort.clone(),
                MatchedValues::new("((mail=u00000*))"),
            ])
            .search(
                "ou=people,dc=example,dc=com",
                Scope::Subtree,
                "(objectClass=inetOrgPerson)",
                vec!["mail", "uid"],
            )
            .expect("search")
            .success()
            .expect("page");
        for entry in result.0 {
            let entry = SearchEntry::construct(entry);
            assert!(!entry.attrs.contains_key("uid"));
            seen.push((entry.dn, entry.attrs.get("mail").cloned()));
        }
        let next = result
            .1
            .ctrls
            .iter()
            .find_map(|control| match &control.1 {
                raw if raw.ctype == "1.2.840.113556.1.4.319" => Some(raw.clone()),
                _ => None,
            })
            .expect("paged response");
        let response: PagedResults = next.parse();
        if response.cookie.is_empty() {
            break;
        }
        cookie = response.cookie;
    }
    assert_eq!(seen.len(), PEOPLE);
    let expected: Vec<String> = (0..PEOPLE).rev().map(person_dn).collect();
    let order: Vec<String> = seen.iter().map(|(dn, _)| dn.clone()).collect();
    assert_eq!(order, expected, "sorted by uid, reversed");
    // Person 1's mail values all differ from the item; everyone else's matches.
    for (dn, mail) in &seen {
        assert_eq!(mail.is_some(), dn != &person_dn(1), "{dn}: {mail:?}");
    }
}

fn raw(critical: bool, value: Option<Vec<u8>>) -> RawControl {
    RawControl {
        ctype: MATCHED_VALUES_OID.to_string(),
        crit: critical,
        val: value,
    }
}

#[test]
fn malformed_oversized_and_misplaced_controls_are_refused() {
    let server = started();
    let mut connection = root(&server);
    // (&(cn=x)): not a simple item.
    let and_item = vec![
        0x30, 0x0b, 0xa0, 0x09, 0xa3, 0x07, 0x04, 0x02, b'c', b'n', 0x04, 0x01, b'x',
    ];
    let empty = vec![0x30, 0x00];
    for (value, code) in [
        (Some(and_item), 2),
        (Some(empty), 2),
        (None, 2),
        (Some(vec![0x30, 0x05, 0xa3, 0x07]), 2),
    ] {
        let answer = search(
            &mut connection,
            "(uid=u0000001)",
            vec!["cn"],
            vec![raw(true, value)],
        );
        assert_eq!(answer.err(), Some(code));
    }
    let many = format!("({})", "(cn=x)".repeat(65));
    let answer = search(
        &mut connection,
        "(uid=u0000001)",
        vec!["cn"],
        vec![MatchedValues::new(many)],
    );
    assert_eq!(answer.err(), Some(11), "more items than the limit");
    // Compare does not honour it: critical → 12.
    let mut control = MatchedValues::new("((cn=x))");
    control.crit = true;
    let result = connection
        .with_controls(control)
        .compare(&person_dn(1), "uid", "u0000001")
        .expect("sent");
    assert_eq!(result.0.rc, 12);
}

#[test]
fn the_root_dse_lists_both_controls() {
    let server = started();
    let (entries, _) = LdapConn::new(&server.ldap_url())
        .expect("connect")
        .search("", Scope::Base, "(objectClass=*)", vec!["supportedControl"])
        .expect("sent")
        .success()
        .expect("root DSE");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    let controls = &entry.attrs["supportedControl"];
    assert!(controls.contains(&MATCHED_VALUES_OID.to_string()));
    assert!(controls.contains(&"2.16.840.1.113730.3.4.18".to_string()));
}

#[test]
fn ldapsearch_sends_matched_values() {
    let server = started();
    let url = server.ldap_url();
    let Some(output) = common::ldap_tool(
        "ldapsearch",
        &[
            "-x",
            "-H",
            &url,
            "-b",
            &person_dn(1),
            "-s",
            "base",
            "-E",
            "!mv=(mail=*two*)",
            "mail",
            "uid",
        ],
    ) else {
        return;
    };
    assert!(output.status.success(), "{}", common::text(&output.stderr));
    let text = common::text(&output.stdout);
    assert!(text.contains("mail: b@two.example"), "{text}");
    assert!(
        !text.contains("a@one.example") && !text.contains("uid:"),
        "{text}"
    );
}

/// The entries the server builds itself (cn=Subschema, cn=Monitor) honour the control too: a
/// definition is kept by its OID or name under objectIdentifierFirstComponentMatch (issue 20 #8,
/// OpenLDAP's test015), a monitor value by its type's rule.
#[test]
fn built_entries_return_only_matching_values() {
    let server = started();
    let mut connection = root(&server);
    let values = |connection: &mut LdapConn, base: &str, filter: &str, attribute: &str| {
        let result = connection
            .with_controls(vec![MatchedValues::new(filter)])
            .search(base, Scope::Base, "(objectClass=*)", vec![attribute])
            .expect("search")
            .success()
            .expect("success");
        let mut entries: Vec<SearchEntry> =
            result.0.into_iter().map(SearchEntry::construct).collect();
        let entry = entries.pop().expect("one entry");
        entry.attrs.get(attribute).cloned().unwrap_or_default()
    };
    for filter in [
        "((attributeTypes=0.9.2342.19200300.100.1.25))",
        "((attributeTypes=domainComponent))",
    ] {
        let kept = values(&mut connection, "cn=Subschema", filter, "attributeTypes");
        assert_eq!(kept.len(), 1, "{filter}: {kept:?}");
        assert!(kept[0].starts_with("( 0.9.2342.19200300.100.1.25 NAME ( 'dc'"));
    }
    let none = values(
        &mut connection,
        "cn=Subschema",
        "((objectClasses=1.2.3.4.5.6.7))",
        "objectClasses",
    );
    assert!(none.is_empty(), "{none:?}");
    let counters = values(
        &mut connection,
        "cn=Database 1,cn=Databases,cn=Monitor",
        "((olmMDBEntries=999999))",
        "olmMDBEntries",
    );
    assert!(counters.is_empty(), "{counters:?}");
}
