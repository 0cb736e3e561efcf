//! LDAP_MATCHING_RULE_IN_CHAIN (1.2.840.113556.1.4.1941) over the wire: nested memberOf,
//! member and uniqueMember chains against a hand-computed closure (fixed graphs and random
//! ones with cycles), inside AND/OR/NOT, hidden groups contributing nothing, the depth and
//! look-through bounds, and the rule in cn=Subschema.

use crate::common;

use common::{bind, grant, own_password_rule, root, rule_by, TestServer};
use ldap3::{LdapConn, LdapError, Scope, SearchEntry};
use lmdir_config::{AccessLevel, AccessTarget, Who};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashSet};

const SUFFIX: &str = "dc=example,dc=com";
const IN_CHAIN: &str = "1.2.840.113556.1.4.1941";
const PASSWORD: &str = "secret";

fn add(connection: &mut LdapConn, dn: &str, attributes: &[(&str, Vec<String>)]) {
    let attributes: Vec<(&str, HashSet<&str>)> = attributes
        .iter()
        .map(|(name, values)| (*name, values.iter().map(String::as_str).collect()))
        .collect();
    connection
        .add(dn, attributes)
        .expect("add sent")
        .success()
        .unwrap_or_else(|error| panic!("add {dn}: {error}"));
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| value.to_string()).collect()
}

fn add_suffix(connection: &mut LdapConn) {
    add(
        connection,
        SUFFIX,
        &[
            ("objectClass", strings(&["top", "domain"])),
            ("dc", strings(&["example"])),
        ],
    );
}

fn add_ou(connection: &mut LdapConn, ou: &str) -> String {
    let dn = format!("ou={ou},{SUFFIX}");
    add(
        connection,
        &dn,
        &[
            ("objectClass", strings(&["organizationalUnit"])),
            ("ou", strings(&[ou])),
        ],
    );
    dn
}

fn add_person(connection: &mut LdapConn, uid: &str, parent: &str) -> String {
    let dn = format!("uid={uid},{parent}");
    add(
        connection,
        &dn,
        &[
            ("objectClass", strings(&["inetOrgPerson"])),
            ("uid", strings(&[uid])),
            ("cn", strings(&[uid])),
            ("sn", strings(&[uid])),
            ("userPassword", strings(&[PASSWORD])),
        ],
    );
    dn
}

/// A groupOfNames (`member`) or groupOfUniqueNames (`uniqueMember`) holding `members`.
fn add_group(
    connection: &mut LdapConn,
    cn: &str,
    parent: &str,
    attribute: &str,
    members: &[String],
) -> String {
    let dn = format!("cn={cn},{parent}");
    let class = if attribute == "member" {
        "groupOfNames"
    } else {
        "groupOfUniqueNames"
    };
    add(
        connection,
        &dn,
        &[
            ("objectClass", strings(&[class])),
            ("cn", strings(&[cn])),
            (attribute, members.to_vec()),
        ],
    );
    dn
}

fn set_members(connection: &mut LdapConn, group: &str, members: &[String]) {
    let values: HashSet<&str> = members.iter().map(String::as_str).collect();
    connection
        .modify(group, vec![ldap3::Mod::Replace("member", values)])
        .expect("modify sent")
        .success()
        .unwrap_or_else(|error| panic!("modify {group}: {error}"));
}

fn search(
    connection: &mut LdapConn,
    base: &str,
    filter: &str,
) -> Result<BTreeSet<String>, LdapError> {
    let (entries, _) = connection
        .search(base, Scope::Subtree, filter, vec!["1.1"])?
        .success()?;
    Ok(entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase())
        .collect())
}

fn chain(attribute: &str, dn: &str) -> String {
    format!("({attribute}:{IN_CHAIN}:={dn})")
}

fn set(dns: &[&String]) -> BTreeSet<String> {
    dns.iter().map(|dn| dn.to_ascii_lowercase()).collect()
}

/// top ⊃ {a, u1}; a ⊃ {b, u2}; b ⊃ {c, u3}; top ⊃ d; d ⊃ c; c ⊃ u4.
struct Fixed {
    top: String,
    a: String,
    b: String,
    c: String,
    d: String,
    people: Vec<String>,
}

fn fixed_groups(connection: &mut LdapConn) -> Fixed {
    add_suffix(connection);
    let people_ou = add_ou(connection, "people");
    let groups_ou = add_ou(connection, "groups");
    let people: Vec<String> = (1..=4)
        .map(|index| add_person(connection, &format!("u{index}"), &people_ou))
        .collect();
    let group = |connection: &mut LdapConn, cn: &str, members: &[String]| {
        add_group(connection, cn, &groups_ou, "member", members)
    };
    let c = group(connection, "c", &[people[3].clone()]);
    let b = group(connection, "b", &[c.clone(), people[2].clone()]);
    let a = group(connection, "a", &[b.clone(), people[1].clone()]);
    let d = group(connection, "d", std::slice::from_ref(&c));
    let top = group(
        connection,
        "top",
        &[a.clone(), people[0].clone(), d.clone()],
    );
    Fixed {
        top,
        a,
        b,
        c,
        d,
        people,
    }
}

#[test]
fn nested_member_of_member_and_boolean_combinations() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = root(&server);
    let fixed = fixed_groups(&mut connection);
    let Fixed {
        top,
        a,
        b,
        c,
        d,
        people,
    } = &fixed;
    let everyone_in_top = set(&[a, b, c, d, &people[0], &people[1], &people[2], &people[3]]);
    // The base group is not its own member (AD), and not every entry: exactly the closure.
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("memberOf", top)).unwrap(),
        everyone_in_top
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("memberOf", b)).unwrap(),
        set(&[c, &people[2], &people[3]])
    );
    // Plain memberOf is one level only.
    assert_eq!(
        search(&mut connection, SUFFIX, &format!("(memberOf={top})")).unwrap(),
        set(&[a, d, &people[0]])
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("member", &people[3])).unwrap(),
        set(&[c, b, d, a, top])
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("member", &people[1])).unwrap(),
        set(&[a, top])
    );
    // Inside AND, OR and NOT, and with a differently spelled asserted DN.
    assert_eq!(
        search(
            &mut connection,
            SUFFIX,
            &format!(
                "(&(objectClass=inetOrgPerson){})",
                chain("memberOf", "CN=B, ou=Groups,DC=example,DC=com")
            )
        )
        .unwrap(),
        set(&[&people[2], &people[3]])
    );
    assert_eq!(
        search(
            &mut connection,
            SUFFIX,
            &format!("(|{}(uid=u1))", chain("memberOf", c))
        )
        .unwrap(),
        set(&[&people[0], &people[3]])
    );
    assert_eq!(
        search(
            &mut connection,
            &format!("ou=people,{SUFFIX}"),
            &format!("(&(objectClass=inetOrgPerson)(!{}))", chain("memberOf", a))
        )
        .unwrap(),
        set(&[&people[0]])
    );
    // A DN naming no entry reaches nothing; an attribute that is not DN-valued is Undefined.
    assert!(search(
        &mut connection,
        SUFFIX,
        &chain("memberOf", "cn=nosuch,dc=example,dc=com")
    )
    .unwrap()
    .is_empty());
    assert!(search(&mut connection, SUFFIX, &chain("cn", top))
        .unwrap()
        .is_empty());
    // A cycle: c now holds top, so everyone reached from top is also in c's chain, top too.
    set_members(&mut connection, c, &[people[3].clone(), top.clone()]);
    let mut with_top = everyone_in_top.clone();
    with_top.insert(top.to_ascii_lowercase());
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("memberOf", top)).unwrap(),
        with_top
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("member", &people[0])).unwrap(),
        set(&[top, a, b, c, d])
    );
}

#[test]
fn unique_member_chains_without_an_index() {
    // The test database indexes member and memberOf only: uniqueMember links are found by
    // testing every entry, with the same answer.
    let server = TestServer::start_with_database(|_| {});
    let mut connection = root(&server);
    add_suffix(&mut connection);
    let ou = add_ou(&mut connection, "groups");
    let ann = add_person(&mut connection, "ann", &ou);
    let inner = add_group(
        &mut connection,
        "inner",
        &ou,
        "uniqueMember",
        std::slice::from_ref(&ann),
    );
    let outer = add_group(
        &mut connection,
        "outer",
        &ou,
        "uniqueMember",
        std::slice::from_ref(&inner),
    );
    let other = add_group(
        &mut connection,
        "other",
        &ou,
        "uniqueMember",
        std::slice::from_ref(&outer),
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("uniqueMember", &ann)).unwrap(),
        set(&[&inner, &outer, &other])
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("uniqueMember", &outer)).unwrap(),
        set(&[&other])
    );
}

#[test]
fn a_group_the_subject_may_not_read_contributes_nothing() {
    let viewer = format!("uid=viewer,ou=people,{SUFFIX}");
    let hidden = format!("cn=b,ou=groups,{SUFFIX}");
    let rules = vec![
        own_password_rule(),
        rule_by(
            AccessTarget {
                dn: Some(hidden.clone()),
                ..AccessTarget::default()
            },
            &[
                (Who::Dn(viewer.clone()), AccessLevel::None),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ];
    let server = TestServer::start_with_rules(rules);
    let mut connection = root(&server);
    let fixed = fixed_groups(&mut connection);
    add_person(&mut connection, "viewer", &format!("ou=people,{SUFFIX}"));
    let Fixed {
        top,
        a,
        b,
        c,
        d,
        people,
    } = &fixed;
    assert_eq!(&hidden, b);
    let mut viewer_connection = bind(&server, &viewer, PASSWORD);
    // b and u3 (only in b) are gone; c and u4 are still reached through d.
    assert_eq!(
        search(&mut viewer_connection, SUFFIX, &chain("memberOf", top)).unwrap(),
        set(&[a, c, d, &people[0], &people[1], &people[3]])
    );
    assert!(
        search(&mut viewer_connection, SUFFIX, &chain("member", &people[2]))
            .unwrap()
            .is_empty()
    );
    assert!(
        search(&mut viewer_connection, SUFFIX, &chain("memberOf", b))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("member", &people[2])).unwrap(),
        set(&[b, a, top])
    );
}

#[test]
fn depth_and_look_through_bounds() {
    let server = TestServer::start_with_database(|settings| settings.lookthrough_limit = 10);
    let mut connection = root(&server);
    add_suffix(&mut connection);
    let ou = add_ou(&mut connection, "groups");
    let people: Vec<String> = (0..20)
        .map(|index| add_person(&mut connection, &format!("p{index}"), &ou))
        .collect();
    let crowd = add_group(&mut connection, "crowd", &ou, "member", &people);
    // Twenty members examined: over a user's look-through of 10, not the rootdn's (unlimited).
    let mut user = bind(&server, &people[0], PASSWORD);
    let refused = search(&mut user, SUFFIX, &chain("memberOf", &crowd)).unwrap_err();
    assert!(
        matches!(&refused, LdapError::LdapResult { result } if result.rc == 11),
        "{refused:?}"
    );
    assert_eq!(
        search(&mut connection, SUFFIX, &chain("memberOf", &crowd))
            .unwrap()
            .len(),
        20
    );
    // A chain of 64 links resolves; one of 65 is refused (adminLimitExceeded) for anyone.
    let mut groups = vec![add_group(
        &mut connection,
        "n0",
        &ou,
        "member",
        &[people[0].clone()],
    )];
    for depth in 1..=65 {
        let previous = groups.last().expect("one group").clone();
        groups.push(add_group(
            &mut connection,
            &format!("n{depth}"),
            &ou,
            "member",
            &[previous],
        ));
        if depth == 64 {
            let found = search(&mut connection, SUFFIX, &chain("member", &groups[0])).unwrap();
            assert_eq!(found.len(), 64);
        }
    }
    let refused = search(&mut connection, SUFFIX, &chain("member", &groups[0])).unwrap_err();
    assert!(
        matches!(&refused, LdapError::LdapResult { result } if result.rc == 11 && result.text.contains("deeper")),
        "{refused:?}"
    );
}

#[test]
fn the_rule_is_in_the_subschema() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = root(&server);
    let (entries, _) = connection
        .search(
            "cn=Subschema",
            Scope::Base,
            "(objectClass=*)",
            vec!["matchingRules"],
        )
        .unwrap()
        .success()
        .unwrap();
    let entry = SearchEntry::construct(entries.into_iter().next().expect("subschema"));
    let rules = entry.attrs.get("matchingRules").expect("matchingRules");
    assert!(
        rules
            .iter()
            .any(|rule| rule.contains(IN_CHAIN) && rule.contains("inChainMatch")),
        "{rules:?}"
    );
}

/// A random group graph: `members[g]` are the node indexes group g lists (groups first, then
/// people); an empty list gets the case's filler person.
#[derive(Debug, Clone)]
struct Graph {
    groups: usize,
    people: usize,
    members: Vec<Vec<usize>>,
}

fn graphs() -> impl Strategy<Value = Graph> {
    (1usize..=7, 1usize..=5).prop_flat_map(|(groups, people)| {
        prop::collection::vec(
            prop::collection::vec(prop::bool::weighted(0.3), groups + people),
            groups,
        )
        .prop_map(move |edges| Graph {
            groups,
            people,
            members: edges
                .into_iter()
                .map(|row| {
                    let chosen: Vec<usize> = (0..row.len()).filter(|node| row[*node]).collect();
                    if chosen.is_empty() {
                        vec![groups + people]
                    } else {
                        chosen
                    }
                })
                .collect(),
        })
    })
}

/// Nodes reachable from `start` through one or more member edges.
fn reachable(members: &[Vec<usize>], start: usize) -> BTreeSet<usize> {
    let mut found = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        for next in members.get(node).into_iter().flatten() {
            if found.insert(*next) {
                stack.push(*next);
            }
        }
    }
    found
}

#[test]
fn random_group_graphs_match_the_hand_computed_closure() {
    let server = TestServer::start_with_database(|_| {});
    let connection = RefCell::new(root(&server));
    add_suffix(&mut connection.borrow_mut());
    let case = Cell::new(0usize);
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&graphs(), |graph| {
            case.set(case.get() + 1);
            let connection = &mut *connection.borrow_mut();
            let base = add_ou(connection, &format!("case{}", case.get()));
            let mut dns: Vec<String> = (0..graph.groups)
                .map(|group| format!("cn=g{group},{base}"))
                .collect();
            for person in 0..=graph.people {
                dns.push(add_person(connection, &format!("p{person}"), &base));
            }
            let filler = dns[graph.groups + graph.people].clone();
            for dn in dns.iter().take(graph.groups) {
                let cn = dn[3..dn.find(',').unwrap()].to_string();
                add_group(
                    connection,
                    &cn,
                    &base,
                    "member",
                    std::slice::from_ref(&filler),
                );
            }
            for (group, members) in graph.members.iter().enumerate() {
                let values: Vec<String> = members.iter().map(|node| dns[*node].clone()).collect();
                set_members(connection, &dns[group], &values);
            }
            let named = |nodes: BTreeSet<usize>| -> BTreeSet<String> {
                nodes
                    .into_iter()
                    .map(|node| dns[node].to_ascii_lowercase())
                    .collect()
            };
            for (group, dn) in dns.iter().enumerate().take(graph.groups) {
                let found = search(connection, &base, &chain("memberOf", dn)).unwrap();
                prop_assert_eq!(
                    found,
                    named(reachable(&graph.members, group)),
                    "memberOf {}",
                    group
                );
            }
            for (node, dn) in dns.iter().enumerate() {
                let holders: BTreeSet<usize> = (0..graph.groups)
                    .filter(|group| reachable(&graph.members, *group).contains(&node))
                    .collect();
                let found = search(connection, &base, &chain("member", dn)).unwrap();
                prop_assert_eq!(found, named(holders), "member {}", node);
            }
            Ok(())
        })
        .unwrap();
}

/// A paged search re-resolves the chain in each page's read txn: every member once, across
/// pages of two.
#[test]
fn paged_in_chain_searches_return_each_member_once() {
    use ldap3::controls::{PagedResults, RawControl};
    let server = TestServer::start_with_database(|_| {});
    let mut connection = root(&server);
    let fixed = fixed_groups(&mut connection);
    let expected = search(&mut connection, SUFFIX, &chain("memberOf", &fixed.top)).unwrap();
    let mut seen = Vec::new();
    let mut cookie = Vec::new();
    for _ in 0..20 {
        let controls: Vec<RawControl> = vec![PagedResults {
            size: 2,
            cookie: cookie.clone(),
        }
        .into()];
        let (entries, result) = connection
            .with_controls(controls)
            .search(
                SUFFIX,
                Scope::Subtree,
                &chain("memberOf", &fixed.top),
                vec!["1.1"],
            )
            .unwrap()
            .success()
            .unwrap();
        assert!(entries.len() <= 2);
        seen.extend(
            entries
                .into_iter()
                .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase()),
        );
        let parsed: PagedResults = result
            .ctrls
            .iter()
            .find(|control| control.1.ctype == "1.2.840.113556.1.4.319")
            .expect("paged response")
            .1
            .parse();
        if parsed.cookie.is_empty() {
            break;
        }
        cookie = parsed.cookie;
    }
    assert_eq!(seen.len(), expected.len(), "{seen:?}");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), expected);
}
