//! Issue 9, the read side, over the wire against a populated directory: no value hidden from a
//! subject changes any answer it gets (assertion control, compare, sort, base lookup, index
//! candidates), and every client-controlled count is bounded with a proper result code.

use crate::common;

use common::{person_dn, root, TestServer};
use ldap3::controls::{Assertion, PagedResults, RawControl};
use ldap3::{LdapConn, LdapResult, Mod, Scope, SearchEntry, SearchOptions};
use lmdir_config::{AccessClause, AccessLevel, AccessRule, AccessTarget, Who};
use std::collections::HashSet;

const PEOPLE: &str = "ou=people,dc=example,dc=com";
const ASSERTION_FAILED: u32 = 122;
const ADMIN_LIMIT_EXCEEDED: u32 = 11;
const SIZE_LIMIT_EXCEEDED: u32 = 4;
const NO_SUCH_OBJECT: u32 = 32;

fn anonymous(server: &TestServer) -> LdapConn {
    LdapConn::new(&server.ldap_url()).expect("connect")
}

/// `to <target> by * <level>`.
fn rule(to: AccessTarget, access: AccessLevel) -> AccessRule {
    AccessRule {
        to,
        by: vec![AccessClause {
            who: Who::Anyone,
            access,
        }],
    }
}

/// Everyone reads everything except `attribute`, which nobody may use at all.
fn hide_attribute(attribute: &str) -> Vec<AccessRule> {
    vec![
        rule(
            AccessTarget {
                attrs: vec![attribute.to_string()],
                ..AccessTarget::default()
            },
            AccessLevel::None,
        ),
        rule(AccessTarget::default(), AccessLevel::Read),
    ]
}

/// The stored userPassword of an entry, as the rootdn reads it.
fn stored_password(server: &TestServer, dn: &str) -> String {
    let (entries, _) = root(server)
        .search(dn, Scope::Base, "(objectClass=*)", vec!["userPassword"])
        .expect("search")
        .success()
        .expect("root reads the password");
    assert_eq!(entries.len(), 1);
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    let value = &entry.bin_attrs.get("userPassword").map_or_else(
        || entry.attrs["userPassword"][0].clone().into_bytes(),
        |values| values[0].clone(),
    );
    String::from_utf8(value.clone()).expect("hash text")
}

/// Result code (and entry count) of an anonymous base search of `dn` with an assertion.
fn base_search_with_assertion(server: &TestServer, dn: &str, assertion: &str) -> (u32, usize) {
    let result = anonymous(server)
        .with_controls(Assertion::new(assertion))
        .search(dn, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    (result.1.rc, result.0.len())
}

#[test]
fn assertion_control_reveals_nothing_of_a_hidden_password() {
    let server = TestServer::start_populated(50, Vec::new(), |_| {});
    let target = person_dn(1);
    let hash = stored_password(&server, &target);
    assert!(hash.starts_with("{SSHA}"), "{hash}");
    // The binary search: an ordering match below / above the real prefix, and
    // equality with the hash or with the cleartext password.
    let prefix = &hash[..8];
    let mut above = prefix.as_bytes().to_vec();
    *above.last_mut().expect("prefix") += 1;
    let above = String::from_utf8(above).expect("ascii");
    let assertions = [
        format!("(userPassword:2.5.13.18:={prefix})"),
        format!("(userPassword:2.5.13.18:={above})"),
        format!("(userPassword={hash})"),
        "(userPassword={SSHA}AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA)".to_string(),
        format!("(userPassword={})", common::PERSON_PASSWORD),
        "(userPassword=wrong)".to_string(),
        "(userPassword=*)".to_string(),
        "(!(userPassword=*))".to_string(),
    ];
    for assertion in &assertions {
        assert_eq!(
            base_search_with_assertion(&server, &target, assertion),
            (ASSERTION_FAILED, 0),
            "anonymous {assertion}"
        );
    }
    // A visible attribute still asserts normally, and the rootdn sees everything.
    assert_eq!(
        base_search_with_assertion(&server, &target, "(uid=u0000001)"),
        (0, 1)
    );
    let rooted = root(&server)
        .with_controls(Assertion::new(format!("(userPassword={hash})")))
        .search(&target, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!(rooted.1.rc, 0);
}

#[test]
fn compare_with_an_assertion_reveals_nothing_of_a_hidden_password() {
    let server = TestServer::start_populated(20, Vec::new(), |_| {});
    let target = person_dn(2);
    let hash = stored_password(&server, &target);
    let answers: Vec<u32> = [
        format!("(userPassword={hash})"),
        "(userPassword=x)".to_string(),
    ]
    .iter()
    .map(|assertion| {
        anonymous(&server)
            .with_controls(Assertion::new(assertion))
            .compare(&target, "uid", "u0000002")
            .expect("compare")
            .0
            .rc
    })
    .collect();
    assert_eq!(answers, vec![ASSERTION_FAILED, ASSERTION_FAILED]);
}

#[test]
fn sorting_by_a_hidden_attribute_orders_as_if_it_were_absent() {
    let people = 30;
    let server = TestServer::start_populated(people, Vec::new(), |_| {});
    let mut root = root(&server);
    // Distinct salted hashes, so an order by hash is a random order.
    for index in 0..people {
        root.modify(
            &person_dn(index),
            vec![Mod::Replace(
                "userPassword",
                HashSet::from([format!("password{index}").as_str()]),
            )],
        )
        .expect("modify")
        .success()
        .expect("password set");
    }
    let order = |connection: &mut LdapConn| -> Vec<String> {
        let result = connection
            .with_controls(sort_control(&["userPassword"]))
            .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
            .expect("sorted search");
        assert_eq!(result.1.rc, 0);
        result
            .0
            .into_iter()
            .map(|entry| SearchEntry::construct(entry).dn)
            .collect()
    };
    let id_order: Vec<String> = (0..people).map(person_dn).collect();
    // The attack works where the attribute is readable: the rootdn's order is the hashes'.
    assert_ne!(order(&mut root), id_order, "sorting by hash reorders");
    // Anonymous may not read userPassword: every entry sorts as lacking it (stable, ID order).
    assert_eq!(order(&mut anonymous(&server)), id_order);
}

#[test]
fn compare_on_a_supertype_does_not_match_a_hidden_subtype() {
    let server = TestServer::start_populated(20, hide_attribute("cn"), |_| {});
    let target = person_dn(3);
    let compare = |value: &str| {
        anonymous(&server)
            .compare(&target, "name", value)
            .expect("compare")
            .0
            .rc
    };
    // cn is "Person 3" (hidden), sn is "Surname3" (visible, a subtype of name too).
    assert_eq!(compare("Person 3"), compare("Nobody At All"));
    assert_eq!(compare("Person 3"), 5, "compareFalse");
    assert_eq!(compare("Surname3"), 6, "compareTrue on the visible subtype");
    // cn itself cannot be compared.
    let direct = anonymous(&server)
        .compare(&target, "cn", "Person 3")
        .expect("compare")
        .0
        .rc;
    assert_eq!(direct, 50, "insufficientAccessRights");
}

/// rc, matched DN and message of an anonymous base search (message with `dn` replaced by `X`).
fn base_answer(server: &TestServer, dn: &str) -> (u32, String, String) {
    let result: LdapResult = anonymous(server)
        .search(dn, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search")
        .1;
    (result.rc, result.matched, result.text.replace(dn, "X"))
}

#[test]
fn a_hidden_entry_answers_exactly_as_a_missing_one() {
    let hidden = person_dn(4);
    let rules = vec![
        rule(
            AccessTarget {
                subtree: Some(hidden.clone()),
                ..AccessTarget::default()
            },
            AccessLevel::None,
        ),
        rule(AccessTarget::default(), AccessLevel::Read),
    ];
    let server = TestServer::start_populated(20, rules, |_| {});
    let missing = format!("uid=nobody,{PEOPLE}");
    let hidden_answer = base_answer(&server, &hidden);
    assert_eq!(hidden_answer, base_answer(&server, &missing));
    assert_eq!(hidden_answer.0, NO_SUCH_OBJECT);
    assert_eq!(hidden_answer.1, PEOPLE, "matched DN is the visible parent");
    // Below the hidden entry, the matched DN skips it.
    let below_hidden = format!("cn=x,{hidden}");
    let below_missing = format!("cn=x,{missing}");
    assert_eq!(
        base_answer(&server, &below_hidden),
        base_answer(&server, &below_missing)
    );
    assert_eq!(base_answer(&server, &below_hidden).1, PEOPLE);
    // Compare on the hidden entry answers as on a missing one.
    let compare = |dn: &str| {
        let result = anonymous(&server)
            .compare(dn, "uid", "u0000004")
            .expect("compare")
            .0;
        (result.rc, result.matched)
    };
    assert_eq!(compare(&hidden), compare(&missing));
    assert_eq!(compare(&hidden).0, NO_SUCH_OBJECT);
    // The parent's computed child count leaves it out; the rootdn's counts every child.
    let count = |connection: &mut LdapConn| {
        let (entries, _) = connection
            .search(
                PEOPLE,
                Scope::Base,
                "(objectClass=*)",
                vec!["numSubordinates"],
            )
            .expect("search")
            .success()
            .expect("parent visible");
        let entry = SearchEntry::construct(entries.into_iter().next().expect("parent"));
        entry.attrs["numSubordinates"][0].clone()
    };
    assert_eq!(count(&mut anonymous(&server)), "19");
    assert_eq!(count(&mut root(&server)), "20");
    // The rootdn still finds it.
    let rooted = root(&server)
        .search(&hidden, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!((rooted.1.rc, rooted.0.len()), (0, 1));
}

/// As back-mdb: a search needs search access on its base entry. With `auth` on ou=people and
/// `read` below it, a one-level search from ou=people answers insufficientAccess (50) and no
/// entry (before: every person), a search from a person still answers; a base with nothing
/// granted answers as a missing one.
#[test]
fn a_search_base_needs_search_access_on_its_entry() {
    let people = |level| {
        rule(
            AccessTarget {
                dn: Some(PEOPLE.to_string()),
                ..AccessTarget::default()
            },
            level,
        )
    };
    let below = rule(
        AccessTarget {
            subtree: Some(PEOPLE.to_string()),
            ..AccessTarget::default()
        },
        AccessLevel::Read,
    );
    let search = |server: &TestServer, base: &str, scope: Scope| {
        let result = anonymous(server)
            .search(base, scope, "(objectClass=*)", vec!["1.1"])
            .expect("search");
        (result.1.rc, result.0.len())
    };
    let server =
        TestServer::start_populated(5, vec![people(AccessLevel::Auth), below.clone()], |_| {});
    assert_eq!(search(&server, PEOPLE, Scope::OneLevel), (50, 0));
    assert_eq!(search(&server, PEOPLE, Scope::Subtree), (50, 0));
    assert_eq!(search(&server, PEOPLE, Scope::Base), (50, 0));
    assert_eq!(search(&server, &person_dn(1), Scope::Base), (0, 1));
    let server =
        TestServer::start_populated(5, vec![people(AccessLevel::None), below.clone()], |_| {});
    assert_eq!(
        search(&server, PEOPLE, Scope::OneLevel),
        (NO_SUCH_OBJECT, 0)
    );
    let server = TestServer::start_populated(5, vec![people(AccessLevel::Search), below], |_| {});
    assert_eq!(search(&server, PEOPLE, Scope::OneLevel), (0, 5));
}

#[test]
fn hidden_values_do_not_choose_index_candidates() {
    // cn is indexed (equality and substrings) and hidden; with a look-through limit the number
    // of candidates examined would tell how many entries hold a hidden value.
    let server = TestServer::start_populated(300, hide_attribute("cn"), |settings| {
        settings.lookthrough_limit = 50;
    });
    let answer = |filter: &str| {
        let result = anonymous(&server)
            .search(PEOPLE, Scope::Subtree, filter, vec!["1.1"])
            .expect("search");
        (result.1.rc, result.0.len())
    };
    // Index candidates from cn would be 111 entries for the first and none for the second.
    let many = answer("(cn=Person 1*)");
    let none = answer("(cn=Nobody*)");
    assert_eq!(many, none);
    assert_eq!(
        many.0, ADMIN_LIMIT_EXCEEDED,
        "both look through the subtree"
    );
    // A visible indexed attribute still narrows the candidates below the limit.
    assert_eq!(answer("(|(uid=u0000010)(uid=u0000011))"), (0, 2));
}

/// The RFC 2891 sort request control with one ascending key per attribute.
fn sort_control(attributes: &[&str]) -> RawControl {
    let mut keys = Vec::new();
    for attribute in attributes {
        let mut key = vec![0x04];
        ber_length(&mut key, attribute.len());
        key.extend_from_slice(attribute.as_bytes());
        keys.push(0x30);
        ber_length(&mut keys, key.len());
        keys.extend_from_slice(&key);
    }
    let mut value = vec![0x30];
    ber_length(&mut value, keys.len());
    value.extend_from_slice(&keys);
    RawControl {
        ctype: "1.2.840.113556.1.4.473".to_string(),
        crit: false,
        val: Some(value),
    }
}

fn ber_length(out: &mut Vec<u8>, length: usize) {
    if length < 0x80 {
        out.push(length as u8);
    } else {
        let bytes = (length as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|byte| **byte == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

#[test]
fn sort_keys_and_sorted_bytes_are_bounded() {
    let server = TestServer::start_populated(400, Vec::new(), |settings| {
        settings.sort_bytes_max = 64 * 1024;
    });
    let sorted = |attributes: &[&str]| {
        anonymous(&server)
            .with_controls(sort_control(attributes))
            .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
            .expect("search")
            .1
            .rc
    };
    // The 20,000 keys (default sort_keys_max 16).
    assert_eq!(sorted(&["cn"; 20_000]), ADMIN_LIMIT_EXCEEDED);
    assert_eq!(sorted(&["cn"; 17]), ADMIN_LIMIT_EXCEEDED);
    // 400 entries of one small key (~70 bytes each) fit in 64 KiB; 16 keys each do not.
    let one_key = anonymous(&server)
        .with_controls(sort_control(&["sn"]))
        .with_search_options(SearchOptions::new().sizelimit(5))
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!(one_key.1.rc, SIZE_LIMIT_EXCEEDED);
    assert_eq!(one_key.0.len(), 5);
    assert_eq!(sorted(&["description"; 16]), ADMIN_LIMIT_EXCEEDED);
}

/// Each sorted search was bounded alone (64 MiB), not all of them together: 4 operations per
/// connection and 64 connections per address let one anonymous address hold 256 of them.
/// Sorted searches running at once now share `sort_bytes_total_max`; here it is below what one
/// search needs, so that search answers busy (51), and a smaller one still sorts.
#[test]
fn sorted_searches_running_at_once_share_one_total() {
    let server = TestServer::start_populated(400, Vec::new(), |settings| {
        settings.sort_bytes_max = 1 << 20;
        settings.sort_bytes_total_max = 16 * 1024;
    });
    let sorted = |filter: &str| {
        anonymous(&server)
            .with_controls(sort_control(&["sn"]))
            .search(PEOPLE, Scope::OneLevel, filter, vec!["1.1"])
            .expect("search")
    };
    // 400 entries of ~70 bytes each: past the total.
    let all = sorted("(objectClass=*)");
    assert_eq!(all.1.rc, 51, "{:?}", all.1);
    assert!(all.1.text.contains("sort_bytes_total_max"), "{:?}", all.1);
    // What it held was returned: a search of a few entries sorts.
    let few = sorted("(|(uid=u0000001)(uid=u0000002)(uid=u0000003))");
    assert_eq!((few.1.rc, few.0.len()), (0, 3));
}

#[test]
fn filters_and_attribute_lists_are_bounded() {
    let server = TestServer::start_populated(10, Vec::new(), |settings| {
        settings.filter_items_max = 1000;
        settings.requested_attributes_max = 100;
        // The 2 MB filters below come from an anonymous client: let them through the smaller
        // pre-bind PDU limit (attacks_net tests that one) so the item bound is what answers.
        settings.anonymous_pdu_bytes_max = settings.pdu_bytes_max;
    });
    let rc = |filter: &str, attributes: Vec<String>| {
        anonymous(&server)
            .search(PEOPLE, Scope::Subtree, filter, attributes)
            .expect("search")
            .1
            .rc
    };
    let or_of = |count: usize| {
        let items: String = (0..count)
            .map(|index| format!("(uid=u{index:07})"))
            .collect();
        format!("(|{items})")
    };
    assert_eq!(rc(&or_of(1000), vec!["1.1".to_string()]), 0);
    assert_eq!(
        rc(&or_of(1001), vec!["1.1".to_string()]),
        ADMIN_LIMIT_EXCEEDED
    );
    // The 100,000-item filter.
    assert_eq!(
        rc(&or_of(100_000), vec!["1.1".to_string()]),
        ADMIN_LIMIT_EXCEEDED
    );
    // Substring pieces count as items.
    let pieces = format!("(cn=*{}*)", vec!["a"; 1001].join("*"));
    assert_eq!(rc(&pieces, vec!["1.1".to_string()]), ADMIN_LIMIT_EXCEEDED);
    // A 1 MiB substring piece is one item: answered (its index keys are bounded in the store).
    let long_piece = format!("(cn=*{}*)", "x".repeat(1 << 20));
    assert_eq!(rc(&long_piece, vec!["1.1".to_string()]), 0);
    // Assertion filters are held to the same bound.
    let asserted = anonymous(&server)
        .with_controls(Assertion::new(or_of(1001)))
        .search(&person_dn(1), Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search")
        .1
        .rc;
    assert_eq!(asserted, ADMIN_LIMIT_EXCEEDED);
    let attributes: Vec<String> = (0..101).map(|index| format!("a{index}")).collect();
    assert_eq!(
        rc("(uid=u0000001)", attributes.clone()),
        ADMIN_LIMIT_EXCEEDED
    );
    // A post-read list over the bound refuses the update before it is written.
    let mut root = root(&server);
    let refused = root
        .with_controls(ldap3::controls::PostRead::new(
            attributes.iter().map(String::as_str).collect(),
        ))
        .modify(
            &person_dn(1),
            vec![Mod::Replace("description", HashSet::from(["changed"]))],
        )
        .expect("modify");
    assert_eq!(refused.rc, ADMIN_LIMIT_EXCEEDED);
    let (entries, _) = root
        .search(
            &person_dn(1),
            Scope::Base,
            "(objectClass=*)",
            vec!["description"],
        )
        .expect("search")
        .success()
        .expect("read back");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    assert_eq!(
        entry.attrs["description"],
        vec!["person number 1".to_string()]
    );
}

/// Pages through `filter` under ou=people with pages of `page_size`; returns the entries seen
/// and the final result code.
fn page_through(
    connection: &mut LdapConn,
    page_size: i32,
    size_limit: i32,
    sort: Option<&str>,
) -> (usize, u32) {
    let mut cookie = Vec::new();
    let mut seen = 0;
    for _ in 0..1000 {
        let mut controls: Vec<RawControl> = vec![PagedResults {
            size: page_size,
            cookie: cookie.clone(),
        }
        .into()];
        if let Some(attribute) = sort {
            controls.push(sort_control(&[attribute]));
        }
        let result = connection
            .with_controls(controls)
            .with_search_options(SearchOptions::new().sizelimit(size_limit))
            .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
            .expect("search");
        seen += result.0.len();
        if result.1.rc != 0 {
            return (seen, result.1.rc);
        }
        let parsed: PagedResults = result
            .1
            .ctrls
            .iter()
            .find(|control| control.1.ctype == "1.2.840.113556.1.4.319")
            .expect("paged response")
            .1
            .parse();
        if parsed.cookie.is_empty() {
            return (seen, 0);
        }
        cookie = parsed.cookie;
    }
    panic!("paging never ended");
}

#[test]
fn the_size_limit_counts_every_page_of_a_paged_search() {
    let server = TestServer::start_populated(120, Vec::new(), |settings| {
        settings.size_limit = 25;
    });
    let mut connection = anonymous(&server);
    // The server's limit, then the client's own, unsorted and sorted.
    assert_eq!(
        page_through(&mut connection, 10, 0, None),
        (25, SIZE_LIMIT_EXCEEDED)
    );
    assert_eq!(
        page_through(&mut connection, 10, 15, None),
        (15, SIZE_LIMIT_EXCEEDED)
    );
    assert_eq!(
        page_through(&mut connection, 10, 0, Some("uid")),
        (25, SIZE_LIMIT_EXCEEDED)
    );
    // The rootdn has no server limit: every person, in pages.
    assert_eq!(page_through(&mut root(&server), 10, 0, None), (120, 0));

    // A cookie the server did not issue (a reset count, another search's) is refused.
    let first = connection
        .with_controls(PagedResults {
            size: 10,
            cookie: Vec::new(),
        })
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    let PagedResults { mut cookie, .. } = first
        .1
        .ctrls
        .iter()
        .find(|control| control.1.ctype == "1.2.840.113556.1.4.319")
        .expect("paged response")
        .1
        .parse();
    assert!(!cookie.is_empty());
    for byte in &mut cookie[4..12] {
        *byte = 0; // "nothing sent yet"
    }
    let forged = connection
        .with_controls(PagedResults { size: 10, cookie })
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    assert_eq!(forged.1.rc, 53, "unwillingToPerform");
}

/// Every value of `attributes` on `dn` that `connection` can read (searching with a filter on
/// them too, so a search-only leak counts).
fn visible_values(connection: &mut LdapConn, dn: &str, attributes: &[&str]) -> Vec<String> {
    let mut seen = Vec::new();
    for filter in std::iter::once("(objectClass=*)".to_string()).chain(
        attributes
            .iter()
            .map(|attribute| format!("({attribute}=*)")),
    ) {
        let (entries, _) = connection
            .search(dn, Scope::Base, &filter, attributes.to_vec())
            .expect("search")
            .success()
            .expect("base search answers");
        for entry in entries {
            let entry = SearchEntry::construct(entry);
            for (name, values) in entry.attrs.iter() {
                seen.extend(values.iter().map(|value| format!("{name}: {value}")));
            }
            for (name, values) in entry.bin_attrs.iter() {
                seen.extend(values.iter().map(|value| format!("{name}: {value:?}")));
            }
            if filter != "(objectClass=*)" {
                seen.push(format!("{filter} matched"));
            }
        }
    }
    seen
}

/// Issue 19 item 5: after a user changes their password twice, pwdHistory holds the old
/// `{SSHA}` hashes, and a failed bind leaves pwdFailureTime. With the built-in policy nobody
/// but the entry itself (and the rootdn) reads, searches or compares the old hashes, and the
/// lockout state is hidden from anonymous and other users alike.
#[test]
fn old_password_hashes_and_lockout_state_are_hidden_by_the_default_policy() {
    let policy = "cn=default,ou=policies,dc=example,dc=com";
    let server = TestServer::start_populated(200, Vec::new(), |settings| {
        settings.password_policy_default = policy.to_string();
    });
    let mut admin = root(&server);
    let set = |values: &[&'static str]| values.iter().copied().collect::<HashSet<&str>>();
    admin
        .add(
            "ou=policies,dc=example,dc=com",
            vec![
                ("objectClass", set(&["organizationalUnit"])),
                ("ou", set(&["policies"])),
            ],
        )
        .expect("add")
        .success()
        .expect("ou=policies");
    admin
        .add(
            policy,
            vec![
                ("objectClass", set(&["organizationalRole", "pwdPolicy"])),
                ("cn", set(&["default"])),
                ("pwdAttribute", set(&["userPassword"])),
                ("pwdInHistory", set(&["3"])),
                ("pwdMaxFailure", set(&["3"])),
                ("pwdLockout", set(&["TRUE"])),
            ],
        )
        .expect("add")
        .success()
        .expect("policy");
    let owner_dn = person_dn(4);
    let mut owner = common::bind(&server, &owner_dn, common::PERSON_PASSWORD);
    for password in ["second-secret", "third-secret"] {
        owner
            .modify(
                &owner_dn,
                vec![Mod::Replace("userPassword", set(&[password]))],
            )
            .expect("modify")
            .success()
            .expect("the owner changes their password");
    }
    let failing_dn = person_dn(5);
    let failed = LdapConn::new(&server.ldap_url())
        .expect("connect")
        .simple_bind(&failing_dn, "wrong")
        .expect("bind answered");
    assert_eq!(failed.rc, 49);

    let secrets = ["pwdHistory", "pwdFailureTime", "userPassword"];
    // The rootdn sees what there is to hide (the fixture really holds it).
    let rooted = visible_values(&mut admin, &owner_dn, &secrets);
    assert!(
        rooted
            .iter()
            .any(|value| value.starts_with("pwdHistory: ") && value.contains("{SSHA}")),
        "{rooted:?}"
    );
    let rooted = visible_values(&mut admin, &failing_dn, &secrets);
    assert!(
        rooted
            .iter()
            .any(|value| value.starts_with("pwdFailureTime: ")),
        "{rooted:?}"
    );
    // The owner reads their own history; nobody else learns anything of it.
    let own = visible_values(&mut owner, &owner_dn, &["pwdHistory"]);
    assert!(
        own.iter().any(|value| value.starts_with("pwdHistory: ")),
        "{own:?}"
    );
    let mut other = common::bind(&server, &person_dn(9), common::PERSON_PASSWORD);
    for (who, connection) in [
        ("anonymous", &mut anonymous(&server)),
        ("another user", &mut other),
    ] {
        for dn in [&owner_dn, &failing_dn] {
            let seen = visible_values(connection, dn, &secrets);
            assert!(seen.is_empty(), "{who} sees {seen:?} on {dn}");
        }
        let compared = connection
            .compare(&owner_dn, "pwdHistory", "x")
            .expect("compare answered");
        assert_ne!(
            compared.0.rc, 5,
            "{who}: compare on pwdHistory must not run"
        );
        assert_ne!(
            compared.0.rc, 6,
            "{who}: compare on pwdHistory must not run"
        );
    }
}

/// A DN's value may be a DN (`owner=cn=x`: `=` needs no escape), so `owner=owner=...=cn=x` nests
/// as deep as it is long, and each level's normalization escapes the one below it, doubling its
/// length. 40 levels (240 bytes) from an anonymous client held the server's CPU and memory
/// without end (2^40 bytes); now past four levels the search base is invalidDNSyntax (34), the
/// bind invalidCredentials (49), and the server answers on.
#[test]
fn a_dn_nested_in_itself_is_refused_and_the_server_lives() {
    const INVALID_DN_SYNTAX: u32 = 34;
    let server = TestServer::start_populated(5, Vec::new(), |_| {});
    for levels in [40, 20_000] {
        let nested = format!("{}cn=x", "owner=".repeat(levels));
        let mut client = anonymous(&server);
        let bind = client.simple_bind(&nested, "x").expect("bind answered");
        // A bind DN that does not normalize answers as a wrong password does.
        assert_eq!(bind.rc, 49, "{levels}: {bind:?}");
        let mut client = anonymous(&server);
        let search = client
            .search(&nested, Scope::Base, "(objectClass=*)", vec!["1.1"])
            .expect("search answered");
        assert_eq!(search.1.rc, INVALID_DN_SYNTAX, "{levels}: {:?}", search.1);
    }
    let (entries, _) = anonymous(&server)
        .search(PEOPLE, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search")
        .success()
        .expect("the server still answers");
    assert_eq!(entries.len(), 5);
}

/// hasSubordinates and numSubordinates of ou=people for `connection` (None: left out).
fn child_attributes(connection: &mut LdapConn) -> (Option<String>, Option<String>) {
    let (entries, _) = connection
        .search(
            PEOPLE,
            Scope::Base,
            "(objectClass=*)",
            vec!["hasSubordinates", "numSubordinates"],
        )
        .expect("search")
        .success()
        .expect("parent visible");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("parent"));
    let first = |name: &str| entry.attrs.get(name).map(|values| values[0].clone());
    (first("hasSubordinates"), first("numSubordinates"))
}

/// A rule hiding another subtree (ou=groups) no longer drops both attributes from a container
/// of more than 1000 children whose own subtree hides nothing; the hidden subtree stays out of
/// its parent's count.
#[test]
fn a_big_container_keeps_its_child_count_when_only_another_subtree_is_hidden() {
    let rules = vec![
        rule(
            AccessTarget {
                subtree: Some("ou=groups,dc=example,dc=com".to_string()),
                ..AccessTarget::default()
            },
            AccessLevel::None,
        ),
        rule(AccessTarget::default(), AccessLevel::Read),
    ];
    let server = TestServer::start_populated(1001, rules, |_| {});
    let expected = (Some("TRUE".to_string()), Some("1001".to_string()));
    assert_eq!(child_attributes(&mut anonymous(&server)), expected);
    let (entries, _) = anonymous(&server)
        .search(
            "dc=example,dc=com",
            Scope::Base,
            "(objectClass=*)",
            vec!["numSubordinates"],
        )
        .expect("search")
        .success()
        .expect("suffix visible");
    let suffix = SearchEntry::construct(entries.into_iter().next().expect("suffix"));
    assert_eq!(
        suffix.attrs["numSubordinates"],
        vec!["1"],
        "ou=groups not counted"
    );
}

/// A container whose every child is hidden from the subject answers exactly as a leaf
/// (hasSubordinates FALSE, numSubordinates 0) past 1000 children as below: before, the big
/// one left both attributes out, which told a big container of hidden entries from a leaf.
/// Asked alone, hasSubordinates answers the same; the rootdn still sees every child.
#[test]
fn a_big_container_of_hidden_children_answers_as_a_leaf() {
    let rules = vec![
        rule(
            AccessTarget {
                children: Some(PEOPLE.to_string()),
                ..AccessTarget::default()
            },
            AccessLevel::None,
        ),
        rule(AccessTarget::default(), AccessLevel::Read),
    ];
    let leaf = (Some("FALSE".to_string()), Some("0".to_string()));
    for people in [3, 1001, 2500] {
        let server = TestServer::start_populated(people, rules.clone(), |_| {});
        assert_eq!(
            child_attributes(&mut anonymous(&server)),
            leaf,
            "{people} hidden children"
        );
        let (entries, _) = anonymous(&server)
            .search(
                PEOPLE,
                Scope::Base,
                "(objectClass=*)",
                vec!["hasSubordinates"],
            )
            .expect("search")
            .success()
            .expect("parent visible");
        let entry = SearchEntry::construct(entries.into_iter().next().expect("parent"));
        assert_eq!(entry.attrs["hasSubordinates"], vec!["FALSE"], "{people}");
        assert_eq!(
            child_attributes(&mut root(&server)),
            (Some("TRUE".to_string()), Some(people.to_string()))
        );
    }
}

/// Past 1000 children, some of them hidden: hasSubordinates is TRUE at the first disclosed
/// child (the hidden ones come first), numSubordinates is left out rather than counted.
#[test]
fn a_big_container_with_hidden_children_answers_true_and_no_count() {
    let rules = vec![
        rule(
            AccessTarget {
                filter: Some("(uid=u000000*)".to_string()),
                ..AccessTarget::default()
            },
            AccessLevel::None,
        ),
        rule(AccessTarget::default(), AccessLevel::Read),
    ];
    let server = TestServer::start_populated(1001, rules, |_| {});
    assert_eq!(
        child_attributes(&mut anonymous(&server)),
        (Some("TRUE".to_string()), None)
    );
    assert_eq!(
        child_attributes(&mut root(&server)),
        (Some("TRUE".to_string()), Some("1001".to_string()))
    );
}
