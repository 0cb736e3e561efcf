//! `[[dynlist]]` over the wire: a dynamic group's members are what its URLs find with the
//! reader's own rights (an entry hidden from the reader is not listed), merged after stored
//! values, and only when the member attribute is asked for. The built-in schema has no
//! groupOfURLs, so the rule here is on extensibleObject with labeledURI (the differential
//! suite runs slapd's own groupOfURLs/memberURL).

use crate::common;

use common::{bind, grant, own_password_rule, root, rule_by, TestServer};
use ldap3::{LdapConn, Scope, SearchEntry};
use lmdir_config::{AccessLevel, AccessTarget, Who};
use std::collections::{BTreeSet, HashSet};

const SUFFIX: &str = "dc=example,dc=com";

fn add(connection: &mut LdapConn, dn: &str, attributes: &[(&str, &[&str])]) {
    let attributes: Vec<(&str, HashSet<&str>)> = attributes
        .iter()
        .map(|(name, values)| (*name, values.iter().copied().collect()))
        .collect();
    connection
        .add(dn, attributes)
        .unwrap()
        .success()
        .unwrap_or_else(|error| panic!("add {dn}: {error}"));
}

fn members(connection: &mut LdapConn, dn: &str, attributes: Vec<&str>) -> BTreeSet<String> {
    let (entries, _) = connection
        .search(dn, Scope::Base, "(objectClass=*)", attributes)
        .unwrap()
        .success()
        .unwrap();
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the group"));
    entry
        .attrs
        .get("member")
        .into_iter()
        .flatten()
        .map(|dn| dn.to_ascii_lowercase())
        .collect()
}

#[test]
fn dynamic_members_are_found_with_the_readers_rights() {
    let viewer = format!("uid=viewer,ou=people,{SUFFIX}");
    let bob = format!("uid=bob,ou=people,{SUFFIX}");
    let rules = vec![
        own_password_rule(),
        rule_by(
            AccessTarget {
                dn: Some(bob.clone()),
                ..AccessTarget::default()
            },
            &[
                (Who::Dn(viewer.clone()), AccessLevel::None),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ];
    let server = TestServer::start_populated(0, rules, |settings| {
        settings.dynlist = vec![lmdir_config::DynlistRule {
            object_class: "extensibleObject".into(),
            url_attribute: "labeledURI".into(),
            member_attribute: "member".into(),
            member_of_attribute: "memberOf".into(),
        }];
    });
    let mut connection = root(&server);
    add(
        &mut connection,
        SUFFIX,
        &[("objectClass", &["top", "domain"]), ("dc", &["example"])],
    );
    for ou in ["people", "groups"] {
        add(
            &mut connection,
            &format!("ou={ou},{SUFFIX}"),
            &[("objectClass", &["organizationalUnit"]), ("ou", &[ou])],
        );
    }
    for (uid, department) in [("ann", "7"), ("bob", "7"), ("cat", "8"), ("viewer", "9")] {
        add(
            &mut connection,
            &format!("uid={uid},ou=people,{SUFFIX}"),
            &[
                ("objectClass", &["inetOrgPerson"]),
                ("uid", &[uid]),
                ("cn", &[uid]),
                ("sn", &[uid]),
                ("departmentNumber", &[department]),
                ("userPassword", &["secret"]),
            ],
        );
    }
    let group = format!("cn=dyn,ou=groups,{SUFFIX}");
    let url = format!("ldap:///ou=people,{SUFFIX}??sub?(departmentNumber=7)");
    let static_member = format!("uid=cat,ou=people,{SUFFIX}");
    add(
        &mut connection,
        &group,
        &[
            ("objectClass", &["organizationalRole", "extensibleObject"]),
            ("cn", &["dyn"]),
            ("labeledURI", &[url.as_str()]),
            ("member", &[static_member.as_str(), bob.as_str()]),
        ],
    );
    let ann = format!("uid=ann,ou=people,{SUFFIX}");
    let expected = |dns: &[&String]| -> BTreeSet<String> {
        dns.iter().map(|dn| dn.to_ascii_lowercase()).collect()
    };
    assert_eq!(
        members(&mut connection, &group, vec!["member"]),
        expected(&[&ann, &bob, &static_member])
    );
    assert!(members(&mut connection, &group, vec!["cn"]).is_empty());
    let mut viewer_connection = bind(&server, &viewer, "secret");
    // bob is stored and found, but the reader may not see him as found; the stored value stays.
    assert_eq!(
        members(&mut viewer_connection, &group, vec!["*"]),
        expected(&[&ann, &bob, &static_member])
    );
    connection
        .modify(
            &group,
            vec![ldap3::Mod::Delete("member", HashSet::from([bob.as_str()]))],
        )
        .unwrap()
        .success()
        .unwrap();
    assert_eq!(
        members(&mut viewer_connection, &group, vec!["*"]),
        expected(&[&ann, &static_member])
    );
    assert_eq!(
        members(&mut connection, &group, vec!["*"]),
        expected(&[&ann, &bob, &static_member])
    );
    // ann lists the dynamic group in memberOf (found by its URL); cat holds a stored value.
    let member_of = |connection: &mut LdapConn, dn: &str| -> BTreeSet<String> {
        let (entries, _) = connection
            .search(dn, Scope::Base, "(objectClass=*)", vec!["memberOf"])
            .unwrap()
            .success()
            .unwrap();
        let entry = SearchEntry::construct(entries.into_iter().next().expect("the entry"));
        entry
            .attrs
            .get("memberOf")
            .into_iter()
            .flatten()
            .map(|dn| dn.to_ascii_lowercase())
            .collect()
    };
    assert_eq!(member_of(&mut viewer_connection, &ann), expected(&[&group]));
    assert_eq!(
        member_of(&mut connection, &static_member),
        expected(&[&group])
    );
    // In-chain walks follow dynamic members too (ann is in dyn only through its URL).
    let outer = format!("cn=outer,ou=groups,{SUFFIX}");
    add(
        &mut connection,
        &outer,
        &[
            ("objectClass", &["groupOfNames"]),
            ("cn", &["outer"]),
            ("member", &[group.as_str()]),
        ],
    );
    let chain = |attribute: &str, dn: &str| format!("({attribute}:1.2.840.113556.1.4.1941:={dn})");
    assert_eq!(
        found(&mut connection, &chain("member", &ann)),
        expected(&[&group, &outer])
    );
    assert_eq!(
        found(&mut connection, &chain("memberOf", &outer)),
        expected(&[&group, &ann, &bob, &static_member])
    );
    assert_eq!(
        found(&mut viewer_connection, &chain("memberOf", &outer)),
        expected(&[&group, &ann, &static_member])
    );
}

fn found(connection: &mut LdapConn, filter: &str) -> BTreeSet<String> {
    let (entries, _) = connection
        .search(SUFFIX, Scope::Subtree, filter, vec!["1.1"])
        .unwrap()
        .success()
        .unwrap();
    entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase())
        .collect()
}
