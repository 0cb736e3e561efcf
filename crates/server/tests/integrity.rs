//! `[integrity]` over the wire: referential integrity beside the built-in memberOf upkeep (a
//! deleted member leaves its groups and every referential attribute, a renamed group keeps its
//! members' memberOf and its referrers), and attribute uniqueness (constraintViolation naming
//! the other entry, within the rule's subtree only).

use crate::common;

use common::{root, TestServer};
use ldap3::{LdapConn, LdapError, Scope, SearchEntry};
use std::collections::{BTreeSet, HashSet};

const SUFFIX: &str = "dc=example,dc=com";

fn add(
    connection: &mut LdapConn,
    dn: &str,
    attributes: &[(&str, &[&str])],
) -> Result<(), LdapError> {
    let attributes: Vec<(&str, HashSet<&str>)> = attributes
        .iter()
        .map(|(name, values)| (*name, values.iter().copied().collect()))
        .collect();
    connection.add(dn, attributes)?.success().map(drop)
}

fn values(connection: &mut LdapConn, dn: &str, attribute: &str) -> BTreeSet<String> {
    let (entries, _) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec![attribute])
        .unwrap()
        .success()
        .unwrap();
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    entry
        .attrs
        .into_iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(attribute))
        .flat_map(|(_, values)| values)
        .map(|value| value.to_ascii_lowercase())
        .collect()
}

fn person(connection: &mut LdapConn, uid: &str, extra: &[(&str, &[&str])]) -> String {
    let dn = format!("uid={uid},ou=people,{SUFFIX}");
    let mut attributes: Vec<(&str, &[&str])> = vec![
        ("objectClass", &["inetOrgPerson"]),
        ("uid", std::slice::from_ref(&uid)),
        ("cn", std::slice::from_ref(&uid)),
        ("sn", std::slice::from_ref(&uid)),
    ];
    attributes.extend_from_slice(extra);
    add(connection, &dn, &attributes).unwrap();
    dn
}

fn tree(connection: &mut LdapConn) {
    add(
        connection,
        SUFFIX,
        &[("objectClass", &["top", "domain"]), ("dc", &["example"])],
    )
    .unwrap();
    for ou in ["people", "groups", "other"] {
        add(
            connection,
            &format!("ou={ou},{SUFFIX}"),
            &[("objectClass", &["organizationalUnit"]), ("ou", &[ou])],
        )
        .unwrap();
    }
}

fn set(values: &[&str]) -> BTreeSet<String> {
    values
        .iter()
        .map(|value| value.to_ascii_lowercase())
        .collect()
}

#[test]
fn referential_integrity_beside_member_of_upkeep() {
    let server = TestServer::start_with_database(|settings| {
        settings.integrity.referential_attributes =
            vec!["member".into(), "manager".into(), "seeAlso".into()];
    });
    let mut connection = root(&server);
    tree(&mut connection);
    let bea = person(&mut connection, "bea", &[]);
    let ann = person(&mut connection, "ann", &[("manager", &[bea.as_str()])]);
    let group = format!("cn=staff,ou=groups,{SUFFIX}");
    add(
        &mut connection,
        &group,
        &[
            ("objectClass", &["groupOfNames"]),
            ("cn", &["staff"]),
            ("member", &[ann.as_str(), bea.as_str()]),
        ],
    )
    .unwrap();
    let cid = person(
        &mut connection,
        "cid",
        &[("seeAlso", &[group.as_str(), bea.as_str()])],
    );
    assert_eq!(values(&mut connection, &ann, "memberOf"), set(&[&group]));

    connection.delete(&bea).unwrap().success().unwrap();
    assert_eq!(values(&mut connection, &group, "member"), set(&[&ann]));
    assert!(values(&mut connection, &ann, "manager").is_empty());
    assert_eq!(values(&mut connection, &cid, "seeAlso"), set(&[&group]));
    assert_eq!(
        values(&mut connection, &ann, "modifiersName"),
        set(&["cn=Referential Integrity Overlay"])
    );

    connection
        .modifydn(&group, "cn=crew", true, None)
        .unwrap()
        .success()
        .unwrap();
    let crew = format!("cn=crew,ou=groups,{SUFFIX}");
    assert_eq!(values(&mut connection, &ann, "memberOf"), set(&[&crew]));
    assert_eq!(values(&mut connection, &cid, "seeAlso"), set(&[&crew]));
    // Moving the people subtree rewrites the references to the entries below it.
    connection
        .modifydn(
            &format!("ou=people,{SUFFIX}"),
            "ou=people",
            true,
            Some(&format!("ou=other,{SUFFIX}")),
        )
        .unwrap()
        .success()
        .unwrap();
    let moved_ann = format!("uid=ann,ou=people,ou=other,{SUFFIX}");
    assert_eq!(values(&mut connection, &crew, "member"), set(&[&moved_ann]));
    assert_eq!(
        values(&mut connection, &moved_ann, "memberOf"),
        set(&[&crew])
    );
}

#[test]
fn without_configured_attributes_references_stay() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = root(&server);
    tree(&mut connection);
    let bea = person(&mut connection, "bea", &[]);
    let ann = person(&mut connection, "ann", &[("manager", &[bea.as_str()])]);
    connection.delete(&bea).unwrap().success().unwrap();
    assert_eq!(values(&mut connection, &ann, "manager"), set(&[&bea]));
}

fn code_and_text(result: Result<ldap3::LdapResult, LdapError>) -> (u32, String) {
    match result {
        Ok(result) => (result.rc, result.text),
        Err(LdapError::LdapResult { result }) => (result.rc, result.text),
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn unique_values_name_the_holder_only_to_whom_may_know_it() {
    use common::{bind, grant, own_password_rule, rule_by};
    use lmdir_config::{AccessLevel, AccessTarget, Who};
    let writer = format!("uid=writer,ou=people,{SUFFIX}");
    let hidden = format!("ou=other,{SUFFIX}");
    let rules = vec![
        own_password_rule(),
        rule_by(
            AccessTarget {
                subtree: Some(hidden.clone()),
                ..AccessTarget::default()
            },
            &[
                (Who::Dn(writer.clone()), AccessLevel::None),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
        grant(AccessTarget::default(), Who::Users, AccessLevel::Write),
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Auth),
    ];
    let server = TestServer::start_populated(0, rules, |settings| {
        settings.integrity.unique = vec![lmdir_config::UniqueRule {
            base: String::new(),
            attributes: vec!["uid".into(), "mail".into()],
        }];
    });
    let mut connection = root(&server);
    tree(&mut connection);
    person(&mut connection, "writer", &[("userPassword", &["secret"])]);
    let holder = format!("uid=dup,{hidden}");
    add(
        &mut connection,
        &holder,
        &[
            ("objectClass", &["inetOrgPerson"]),
            ("uid", &["dup"]),
            ("cn", &["dup"]),
            ("sn", &["dup"]),
        ],
    )
    .unwrap();
    let duplicate: &[(&str, &[&str])] = &[
        ("objectClass", &["inetOrgPerson"]),
        ("uid", &["DUP"]),
        ("cn", &["dup2"]),
        ("sn", &["dup2"]),
    ];
    let target = format!("cn=dup2,ou=people,{SUFFIX}");
    let as_root = code_and_text(connection.add(&target, to_sets(duplicate)));
    assert_eq!(as_root.0, 19, "{as_root:?}");
    assert!(as_root.1.contains(&holder), "{as_root:?}");
    let mut as_writer_connection = bind(&server, &writer, "secret");
    let as_writer = code_and_text(as_writer_connection.add(&target, to_sets(duplicate)));
    assert_eq!(as_writer.0, 19, "{as_writer:?}");
    assert!(!as_writer.1.contains("other"), "{as_writer:?}");
    // A free value is accepted; the writer's own later change keeping it is not a duplicate.
    let free: &[(&str, &[&str])] = &[
        ("objectClass", &["inetOrgPerson"]),
        ("uid", &["free"]),
        ("cn", &["dup2"]),
        ("sn", &["dup2"]),
    ];
    let added = code_and_text(as_writer_connection.add(&target, to_sets(free)));
    assert_eq!(added.0, 0, "{added:?}");
    let kept = code_and_text(as_writer_connection.modify(
        &target,
        vec![ldap3::Mod::Replace("uid", HashSet::from(["free"]))],
    ));
    assert_eq!(kept.0, 0, "{kept:?}");
}

fn to_sets<'a>(attributes: &[(&'a str, &[&'a str])]) -> Vec<(&'a str, HashSet<&'a str>)> {
    attributes
        .iter()
        .map(|(name, values)| (*name, values.iter().copied().collect()))
        .collect()
}

/// The values of `attribute` as stored (not lowercased).
fn raw_values(connection: &mut LdapConn, dn: &str, attribute: &str) -> BTreeSet<String> {
    let (entries, _) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec![attribute])
        .unwrap()
        .success()
        .unwrap();
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    entry
        .attrs
        .into_iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(attribute))
        .flat_map(|(_, values)| values)
        .collect()
}

/// A rename whose new DN differs from the old one only in case: every reference stays, in
/// the new spelling (out-of-line member and inline manager alike), and memberOf with it.
#[test]
fn a_case_only_rename_keeps_every_reference() {
    let server = TestServer::start_with_database(|settings| {
        settings.integrity.referential_attributes = vec!["member".into(), "manager".into()];
    });
    let mut connection = root(&server);
    tree(&mut connection);
    let alice = person(&mut connection, "Alice", &[]);
    let bob = person(&mut connection, "bob", &[("manager", &[alice.as_str()])]);
    let group = format!("cn=g,ou=groups,{SUFFIX}");
    add(
        &mut connection,
        &group,
        &[
            ("objectClass", &["groupOfNames"]),
            ("cn", &["g"]),
            ("member", &[alice.as_str(), bob.as_str()]),
        ],
    )
    .unwrap();
    assert_eq!(values(&mut connection, &alice, "memberOf"), set(&[&group]));

    connection
        .modifydn(&alice, "uid=alice", true, None)
        .unwrap()
        .success()
        .unwrap();
    let renamed = format!("uid=alice,ou=people,{SUFFIX}");
    assert_eq!(
        raw_values(&mut connection, &group, "member"),
        BTreeSet::from([renamed.clone(), bob.clone()])
    );
    assert_eq!(
        raw_values(&mut connection, &bob, "manager"),
        BTreeSet::from([renamed.clone()])
    );
    assert_eq!(
        values(&mut connection, &renamed, "memberOf"),
        set(&[&group])
    );
}

/// The group of a deleted entry's last membership: with `referential_nothing` the member
/// list takes that value (slapd's refint), without it the value stays (slapd's memberof and
/// refint modifies fail the schema check there); the group stays valid either way, so a
/// later modify of it succeeds.
#[test]
fn a_group_losing_its_last_member_stays_valid() {
    let nobody = format!("cn=nobody,{SUFFIX}");
    let configurations: [(&[&str], Option<&str>); 3] = [
        (&["member"], Some(nobody.as_str())),
        (&["member"], None),
        (&[], Some(nobody.as_str())),
    ];
    for (referential, nothing) in configurations {
        let server = TestServer::start_with_database(|settings| {
            settings.integrity.referential_attributes =
                referential.iter().map(|name| name.to_string()).collect();
            settings.integrity.referential_nothing = nothing.unwrap_or_default().to_string();
        });
        let mut connection = root(&server);
        tree(&mut connection);
        let bea = person(&mut connection, "bea", &[]);
        let group = format!("cn=solo,ou=groups,{SUFFIX}");
        add(
            &mut connection,
            &group,
            &[
                ("objectClass", &["groupOfNames"]),
                ("cn", &["solo"]),
                ("member", &[bea.as_str()]),
            ],
        )
        .unwrap();
        connection.delete(&bea).unwrap().success().unwrap();
        let expected = match (referential.is_empty(), nothing) {
            (false, Some(nothing)) => nothing.to_string(),
            _ => bea.clone(),
        };
        assert_eq!(
            values(&mut connection, &group, "member"),
            set(&[&expected]),
            "{referential:?} {nothing:?}"
        );
        let modified = code_and_text(connection.modify(
            &group,
            vec![ldap3::Mod::Replace(
                "description",
                HashSet::from(["still a group"]),
            )],
        ));
        assert_eq!(modified.0, 0, "{referential:?} {nothing:?}: {modified:?}");
    }
}
