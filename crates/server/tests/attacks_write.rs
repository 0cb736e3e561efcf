//! Attacks on the write side (issue 9 items 3 and 5, issue 10), over the wire against a populated
//! directory: bounded requests, protected operational attributes, decisions made in the
//! writer's own transaction, password costs and Password Modify's access rules, and shutdown
//! with the writer busy. No assertion depends on the machine's speed: durations appear only as
//! generous hang guards.

use crate::common;

use common::{
    attributes, bind, grant, own_password_rule, person_dn, root, rule_by, TestServer,
    PERSON_PASSWORD, ROOT_DN,
};
use ldap3::controls::RawControl;
use ldap3::exop::PasswordModify;
use ldap3::{LdapConn, LdapConnAsync, Mod, Scope, SearchEntry};
use lmdir_config::{AccessClause, AccessLevel, AccessRule, AccessTarget, Who};
use std::collections::HashSet;
use std::time::{Duration, Instant};

const PEOPLE: usize = 2000;
const RELAX_OID: &str = "1.3.6.1.4.1.4203.666.5.12";

fn set(values: &[&str]) -> HashSet<String> {
    values.iter().map(|value| value.to_string()).collect()
}

/// The entry's attributes as the rootdn reads them (all user and operational attributes).
fn read_entry(connection: &mut LdapConn, dn: &str) -> SearchEntry {
    let (entries, result) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec!["*", "+"])
        .expect("search")
        .success()
        .expect("entry readable");
    assert_eq!(result.rc, 0);
    SearchEntry::construct(entries.into_iter().next().expect("one entry"))
}

fn can_bind(server: &TestServer, dn: &str, password: &str) -> bool {
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    connection.simple_bind(dn, password).expect("bind").rc == 0
}

#[test]
fn a_flood_of_attribute_options_is_refused_and_the_entry_stays_readable() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let target = person_dn(7);
    let mut user = bind(&server, &target, PERSON_PASSWORD);
    // The request: 65,600 userPassword descriptions (the default policy lets a user
    // write its own userPassword), about 3.4 MB.
    let descriptions: Vec<String> = (0..65_600)
        .map(|index| format!("userPassword;x-{index}"))
        .collect();
    let changes = descriptions
        .iter()
        .map(|description| Mod::Add(description.clone(), set(&["{SSHA}aGVsbG8gd29ybGQ="])))
        .collect();
    let refused = user.modify(&target, changes).expect("modify answered");
    assert_eq!(refused.rc, 11, "adminLimitExceeded: {refused:?}");

    let mut admin = root(&server);
    let entry = read_entry(&mut admin, &target);
    assert!(entry.attrs.keys().all(|name| !name.contains(";x-")));
    // The writer is free and the database sound: the user still changes its password.
    user.modify(
        &target,
        vec![Mod::Replace("userPassword".to_string(), set(&["next"]))],
    )
    .expect("modify")
    .success()
    .expect("a normal write goes through");
    assert!(can_bind(&server, &target, "next"));
}

#[test]
fn options_per_description_are_bounded() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.attribute_options_per_description_max = 2;
    });
    let target = person_dn(6);
    let mut user = bind(&server, &target, PERSON_PASSWORD);
    let add = |user: &mut LdapConn, description: &str| {
        user.modify(
            &target,
            vec![Mod::Add(
                description.to_string(),
                set(&["{SSHA}aGVsbG8gd29ybGQ="]),
            )],
        )
        .expect("modify")
        .rc
    };
    assert_eq!(add(&mut user, "userPassword;x-a;x-b"), 0);
    assert_eq!(add(&mut user, "userPassword;x-a;x-b;x-c"), 11);
}

#[test]
fn descriptions_per_entry_are_bounded_across_requests() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.attribute_descriptions_per_entry_max = 32;
    });
    let target = person_dn(8);
    let mut user = bind(&server, &target, PERSON_PASSWORD);
    let batch = |start: usize| -> Vec<Mod<String>> {
        (start..start + 10)
            .map(|index| {
                Mod::Add(
                    format!("userPassword;x-{index}"),
                    [format!("{{SSHA}}aGVsbG8gd29ybGQ{index}")].into(),
                )
            })
            .collect()
    };
    // The entry starts with ~15 descriptions (its attributes and operational ones).
    let first = user.modify(&target, batch(0)).expect("modify");
    assert_eq!(first.rc, 0, "{first:?}");
    let mut codes = Vec::new();
    for start in [10, 20, 30] {
        codes.push(user.modify(&target, batch(start)).expect("modify").rc);
    }
    assert!(
        codes.contains(&11),
        "adminLimitExceeded expected: {codes:?}"
    );
    let mut admin = root(&server);
    let entry = read_entry(&mut admin, &target);
    assert!(
        entry.attrs.len() <= 32,
        "{} descriptions",
        entry.attrs.len()
    );
}

#[test]
fn values_per_attribute_are_bounded_before_any_hashing() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.values_per_attribute_per_request_max = 100;
    });
    let target = person_dn(9);
    let mut user = bind(&server, &target, PERSON_PASSWORD);
    let many: HashSet<String> = (0..101).map(|index| format!("cleartext{index}")).collect();
    let refused = user
        .modify(
            &target,
            vec![Mod::Replace("userPassword".to_string(), many)],
        )
        .expect("modify");
    assert_eq!(refused.rc, 11, "{refused:?}");
    // Another's password: refused for access, whatever the values (and none hashed).
    let other = person_dn(10);
    let few: HashSet<String> = (0..50).map(|index| format!("cleartext{index}")).collect();
    let denied = user
        .modify(&other, vec![Mod::Replace("userPassword".to_string(), few)])
        .expect("modify");
    assert_eq!(denied.rc, 50, "{denied:?}");
    assert!(can_bind(&server, &target, PERSON_PASSWORD));
    assert!(can_bind(&server, &other, PERSON_PASSWORD));
}

#[test]
fn extreme_cost_hashes_cannot_be_stored() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let target = person_dn(11);
    let mut user = bind(&server, &target, PERSON_PASSWORD);
    let extreme = [
        "{ARGON2}$argon2id$v=19$m=262144,t=64,p=1$c2FsdHNhbHRzYWx0c2FsdA$4ri7mhiSrnj9oEyFS4ZxbjEro69F+Nh/mAteAg51Amo",
        "{PBKDF2-SHA256}1000000$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
        "{CRYPT}$6$rounds=1000000$saltsaltsalt$PMWE8DTlam1JU37Piyk43bHcMxTJq6sgu5DKB0/tGPjanN35jcY68QkpDfPFUGPWX5uCxIQkSPzMmqEiVNgts.",
    ];
    for value in extreme {
        let refused = user
            .modify(
                &target,
                vec![Mod::Replace("userPassword".to_string(), set(&[value]))],
            )
            .expect("modify");
        assert_eq!(
            refused.rc, 19,
            "constraintViolation for {value}: {refused:?}"
        );
    }
    assert!(can_bind(&server, &target, PERSON_PASSWORD));
}

#[test]
fn no_user_modification_attributes_are_refused_without_relax() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut admin = root(&server);
    let new_person = |uid: &str, forged: (&'static str, &'static str)| {
        vec![
            ("objectClass".to_string(), set(&["inetOrgPerson"])),
            ("uid".to_string(), set(&[uid])),
            ("cn".to_string(), set(&[uid])),
            ("sn".to_string(), set(&[uid])),
            (forged.0.to_string(), set(&[forged.1])),
        ]
    };
    let dn = |uid: &str| format!("uid={uid},ou=people,dc=example,dc=com");
    for forged in [
        ("entryUUID", "00000000-0000-4000-8000-000000000000"),
        ("memberOf", "cn=admins,dc=example,dc=com"),
        ("creatorsName", "cn=nobody,dc=example,dc=com"),
    ] {
        let refused = admin
            .add(&dn("forger"), new_person("forger", forged))
            .expect("add");
        assert_eq!(refused.rc, 19, "{}: {refused:?}", forged.0);
    }
    let modified = admin
        .modify(
            &person_dn(12),
            vec![Mod::Replace(
                "memberOf".to_string(),
                set(&["cn=admins,dc=example,dc=com"]),
            )],
        )
        .expect("modify");
    assert_eq!(modified.rc, 19, "{modified:?}");
    let renamed = admin
        .modifydn(
            &person_dn(12),
            "uid=x+memberOf=cn=admins\\,dc=example\\,dc=com",
            false,
            None,
        )
        .expect("modrdn");
    assert_eq!(renamed.rc, 19, "{renamed:?}");

    // The rootdn with Relax Rules (as OpenLDAP): kept as given.
    let relax = RawControl {
        ctype: RELAX_OID.to_string(),
        crit: true,
        val: None,
    };
    admin
        .with_controls(relax)
        .add(
            &dn("imported"),
            new_person(
                "imported",
                ("entryUUID", "00000000-0000-4000-8000-000000000001"),
            ),
        )
        .expect("add")
        .success()
        .expect("relaxed add");
    let entry = read_entry(&mut admin, &dn("imported"));
    assert_eq!(
        entry.attrs["entryUUID"],
        vec!["00000000-0000-4000-8000-000000000001".to_string()]
    );
}

/// `ou=drop` is open to every user; everything else is read-only for them.
fn drop_box_rules() -> Vec<AccessRule> {
    vec![
        grant(
            AccessTarget {
                subtree: Some("ou=drop,dc=example,dc=com".to_string()),
                ..AccessTarget::default()
            },
            Who::Users,
            AccessLevel::Write,
        ),
        grant(
            AccessTarget {
                attrs: vec!["userPassword".to_string()],
                ..AccessTarget::default()
            },
            Who::Anyone,
            AccessLevel::Auth,
        ),
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ]
}

#[test]
fn a_pipelined_rename_is_decided_on_the_state_after_the_add() {
    let server = TestServer::start_populated(PEOPLE, drop_box_rules(), |_| {});
    let mut admin = root(&server);
    admin
        .add(
            "ou=drop,dc=example,dc=com",
            vec![
                ("objectClass".to_string(), set(&["organizationalUnit"])),
                ("ou".to_string(), set(&["drop"])),
            ],
        )
        .expect("add")
        .success()
        .expect("drop box");
    let url = server.ldap_url();
    let user = person_dn(13);
    let (add, rename) = server.runtime.block_on(async move {
        let (connection, mut ldap) = LdapConnAsync::new(&url).await.expect("connect");
        ldap3::drive!(connection);
        ldap.simple_bind(&user, PERSON_PASSWORD)
            .await
            .expect("bind")
            .success()
            .expect("bound");
        let mut second = ldap.clone();
        let x = "uid=x,ou=drop,dc=example,dc=com";
        let attributes = vec![
            ("objectClass".to_string(), set(&["account"])),
            ("uid".to_string(), set(&["x"])),
        ];
        // Sent back to back on one connection: the rename is checked before the add ran
        // if checks happen outside the writer.
        tokio::join!(
            ldap.add(x, attributes),
            second.modifydn(x, "uid=x", true, Some("ou=people,dc=example,dc=com"))
        )
    });
    assert_eq!(add.expect("add").rc, 0);
    let rename = rename.expect("modrdn");
    // Either the rename reached the writer first (no such entry yet) or it was decided on the
    // state after the add: no write on ou=people's children.
    assert!(
        rename.rc == 50 || rename.rc == 32,
        "the move into ou=people must be refused: {rename:?}"
    );
    let (found, _) = admin
        .search(
            "ou=people,dc=example,dc=com",
            Scope::OneLevel,
            "(uid=x)",
            vec!["1.1"],
        )
        .expect("search")
        .success()
        .expect("search ok");
    assert!(found.is_empty(), "uid=x was moved into ou=people");
}

#[test]
fn password_modify_follows_write_access_to_user_password() {
    let helpdesk = "cn=group0001,ou=groups,dc=example,dc=com";
    let rules = vec![
        AccessRule {
            to: AccessTarget {
                attrs: vec!["userPassword".to_string()],
                ..AccessTarget::default()
            },
            by: vec![
                AccessClause {
                    who: Who::SelfEntry,
                    access: AccessLevel::Write,
                },
                AccessClause {
                    who: Who::Group(helpdesk.to_string()),
                    access: AccessLevel::Write,
                },
                AccessClause {
                    who: Who::Anyone,
                    access: AccessLevel::Auth,
                },
            ],
        },
        AccessRule {
            to: AccessTarget::default(),
            by: vec![AccessClause {
                who: Who::Anyone,
                access: AccessLevel::Read,
            }],
        },
    ];
    let server = TestServer::start_populated(PEOPLE, rules, |_| {});
    // Person 0 is in group0000 only; person 150 is in group0001 (the helpdesk).
    let (plain, helper, victim) = (person_dn(0), person_dn(150), person_dn(20));
    let set_password = |connection: &mut LdapConn, user: &str, new: &str| {
        connection
            .extended(PasswordModify {
                user_id: Some(user),
                old_pass: None,
                new_pass: Some(new),
            })
            .expect("exop")
            .1
            .rc
    };
    let mut plain_user = bind(&server, &plain, PERSON_PASSWORD);
    assert_eq!(set_password(&mut plain_user, &victim, "stolen"), 50);
    assert!(!can_bind(&server, &victim, "stolen"));

    let mut helpdesk_user = bind(&server, &helper, PERSON_PASSWORD);
    assert_eq!(
        set_password(&mut helpdesk_user, &victim, "reset-by-helpdesk"),
        0
    );
    assert!(can_bind(&server, &victim, "reset-by-helpdesk"));

    // Oneself, without the old password (ldappasswd without -a, ldap3's modify_password).
    let own = plain_user
        .extended(PasswordModify {
            user_id: None,
            old_pass: None,
            new_pass: Some("my-new-one"),
        })
        .expect("exop");
    assert_eq!(own.1.rc, 0, "{:?}", own.1);
    assert!(can_bind(&server, &plain, "my-new-one"));
    // A wrong old password still fails.
    let wrong = plain_user
        .extended(PasswordModify {
            user_id: None,
            old_pass: Some("not-it"),
            new_pass: Some("other"),
        })
        .expect("exop");
    assert_eq!(wrong.1.rc, 53, "slapd: unwilling to verify old password");
}

#[test]
fn a_users_password_hashing_never_holds_the_writer() {
    // A person writes their own entry's userPassword (and sees the entry, so the writer gets
    // as far as hashing).
    let own_entry = rule_by(
        attributes(&["entry", "userPassword"]),
        &[
            (Who::SelfEntry, AccessLevel::Write),
            (Who::Anyone, AccessLevel::Auth),
        ],
    );
    let mut server = TestServer::start_populated(PEOPLE, vec![own_entry], |settings| {
        settings.password_hash = "ARGON2".to_string();
        settings.write_budget = Duration::from_secs(5);
    });
    // A person replaces their own userPassword with 10,000 cleartext values: at least 5 s of
    // Argon2 on any machine, cut by the budget (adminLimitExceeded). Before, the writer
    // hashed them inside its transaction and every other write waited the whole budget.
    let url = server.ldap_url();
    let (answered, answer) = std::sync::mpsc::channel();
    let hashing = std::thread::spawn(move || {
        let mut person = common::bind_url(&url, &person_dn(0), PERSON_PASSWORD);
        let values: HashSet<String> = (0..10_000).map(|index| format!("pw{index}")).collect();
        let result = person
            .modify(
                &person_dn(0),
                vec![Mod::Replace(
                    "userPassword",
                    values.iter().map(String::as_str).collect(),
                )],
            )
            .expect("modify sent");
        let _ = answered.send(result.rc);
    });
    std::thread::sleep(Duration::from_millis(300));
    // Three writes by someone else are answered while that hashing still runs.
    let mut admin = root(&server);
    for index in 0..3 {
        let description = format!("written while hashing {index}");
        admin
            .modify(
                &person_dn(1),
                vec![Mod::Replace(
                    "description",
                    HashSet::from([description.as_str()]),
                )],
            )
            .expect("modify sent")
            .success()
            .expect("written");
    }
    let early = answer.try_recv();
    assert!(
        early.is_err(),
        "the hashing update was answered ({early:?}) before the writes queued behind it"
    );
    let code = answer
        .recv_timeout(Duration::from_secs(60))
        .expect("the hashing update is answered");
    assert_eq!(code, 11, "cut by its write budget");
    hashing.join().expect("hashing client");
    server.shutdown();
}

#[test]
fn shutdown_with_the_writer_busy_answers_every_write_and_returns() {
    // Anonymous clients may write userPassword here: an anonymous update's passwords are
    // hashed by the writer itself (a bound identity's are hashed before, `prehash.rs`), so
    // the first update below keeps the single writer busy.
    let anyone_writes = rule_by(
        attributes(&["entry", "userPassword"]),
        &[(Who::Anyone, AccessLevel::Write)],
    );
    let mut server = TestServer::start_populated(PEOPLE, vec![anyone_writes], |settings| {
        // Argon2 makes each cleartext value a real cost for the single writer.
        settings.password_hash = "ARGON2".to_string();
        settings.write_budget = Duration::from_secs(2);
    });
    let url = server.ldap_url();
    let runtime_handle = server.runtime.handle().clone();
    // One anonymous update hashing 500 cleartext passwords (far over the budget), then ten
    // more updates queued behind it on other connections.
    let busy: HashSet<String> = (0..500).map(|index| format!("pw{index}")).collect();
    let mut tasks = Vec::new();
    for index in 0..11 {
        let url = url.clone();
        let values = if index == 0 {
            busy.clone()
        } else {
            [format!("queued{index}")].into()
        };
        let target = person_dn(30 + index);
        tasks.push(runtime_handle.spawn(async move {
            let (connection, mut ldap) = LdapConnAsync::new(&url).await.expect("connect");
            ldap3::drive!(connection);
            ldap.modify(
                &target,
                vec![Mod::Replace("userPassword".to_string(), values)],
            )
            .await
            .map(|result| result.rc)
        }));
    }
    // Let the requests reach the writer (if some have not, they are refused: still answered).
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    server.shutdown();
    // Hang guard only: the budget (2 s) bounds the update in flight, queued ones are answered
    // at once; before the fix shutdown waited for all 500 hashes and every queued update.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "shutdown took {:?}",
        started.elapsed()
    );
    for task in tasks {
        let code = server
            .runtime
            .block_on(task)
            .expect("task")
            .expect("every write is answered, none lost");
        assert!(
            [0, 11, 52].contains(&code),
            "success, adminLimitExceeded or unavailable, got {code}"
        );
    }
}

#[test]
fn an_update_assertion_on_a_hidden_attribute_is_never_an_oracle() {
    let rules = vec![
        own_password_rule(),
        AccessRule {
            to: AccessTarget {
                attrs: vec!["employeeNumber".to_string()],
                ..AccessTarget::default()
            },
            by: vec![AccessClause {
                who: Who::Anyone,
                access: AccessLevel::None,
            }],
        },
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ];
    let server = TestServer::start_populated(PEOPLE, rules, |_| {});
    let target = person_dn(14);
    let mut user = bind(&server, &target, PERSON_PASSWORD);
    let change = || vec![Mod::Replace("userPassword".to_string(), set(&["changed"]))];
    // employeeNumber of person 14 is "14": true, false and negated probes all fail alike.
    for probe in [
        "(employeeNumber=14)",
        "(employeeNumber=15)",
        "(!(employeeNumber=15))",
    ] {
        let result = user
            .with_controls(ldap3::controls::Assertion::new(probe))
            .modify(&target, change())
            .expect("modify");
        assert_eq!(result.rc, 122, "{probe}: {result:?}");
    }
    // A visible attribute still asserts normally.
    user.with_controls(ldap3::controls::Assertion::new("(uid=u0000014)"))
        .modify(&target, change())
        .expect("modify")
        .success()
        .expect("assertion on a visible attribute holds");
}

#[test]
fn an_add_assertion_is_tested_on_the_entry_being_added() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut admin = root(&server);
    let person = |uid: &str| {
        vec![
            ("objectClass".to_string(), set(&["inetOrgPerson"])),
            ("uid".to_string(), set(&[uid])),
            ("cn".to_string(), set(&[uid])),
            ("sn".to_string(), set(&["Asserted"])),
        ]
    };
    let dn = |uid: &str| format!("uid={uid},ou=people,dc=example,dc=com");
    let failed = admin
        .with_controls(ldap3::controls::Assertion::new("(sn=Other)"))
        .add(&dn("asserted1"), person("asserted1"))
        .expect("add");
    assert_eq!(failed.rc, 122, "{failed:?}");
    admin
        .with_controls(ldap3::controls::Assertion::new("(sn=Asserted)"))
        .add(&dn("asserted2"), person("asserted2"))
        .expect("add")
        .success()
        .expect("the assertion holds on the new entry");
}

const SUFFIX: &str = "dc=example,dc=com";
const HOSTS: &str = "ou=hosts,dc=example,dc=com";
const DEFAULT_POLICY: &str = "cn=default,ou=policies,dc=example,dc=com";

/// A result as a client sees it: code, matched DN, message with `dn` written `X`.
fn answer(result: &ldap3::LdapResult, dn: &str) -> (u32, String, String) {
    (
        result.rc,
        result.matched.clone(),
        result.text.replace(dn, "X"),
    )
}

fn anonymous(server: &TestServer) -> LdapConn {
    LdapConn::new(&server.ldap_url()).expect("connect")
}

/// The rootdn adds `dn` with these attributes.
fn add_entry(server: &TestServer, dn: &str, attributes: &[(&str, &[&str])]) {
    root(server)
        .add(
            dn,
            attributes
                .iter()
                .map(|(name, values)| (name.to_string(), set(values)))
                .collect(),
        )
        .expect("add")
        .success()
        .unwrap_or_else(|error| panic!("add {dn}: {error}"));
}

/// What every write and read answers for `dn`, as `connection` asks: modify (with and without
/// changes, with a pre-read control), delete, rename, compare, add below it, Password Modify
/// and a base search.
fn write_answers(
    connection: &mut LdapConn,
    dn: &str,
) -> Vec<(&'static str, (u32, String, String))> {
    let pre_read = RawControl {
        ctype: "1.3.6.1.1.13.1".to_string(),
        crit: true,
        // SEQUENCE OF AttributeDescription: "cn"
        val: Some(vec![0x30, 0x04, 0x04, 0x02, b'c', b'n']),
    };
    let below = format!("cn=new,{dn}");
    vec![
        (
            "modify",
            connection
                .modify(
                    dn,
                    vec![Mod::Replace("description".to_string(), set(&["x"]))],
                )
                .expect("modify"),
        ),
        (
            "empty modify",
            connection
                .modify(dn, Vec::<Mod<String>>::new())
                .expect("modify"),
        ),
        (
            "modify with pre-read",
            connection
                .with_controls(pre_read)
                .modify(
                    dn,
                    vec![Mod::Replace("description".to_string(), set(&["y"]))],
                )
                .expect("modify"),
        ),
        ("delete", connection.delete(dn).expect("delete")),
        (
            "modrdn",
            connection
                .modifydn(dn, "cn=renamed", true, None)
                .expect("modrdn"),
        ),
        (
            "compare",
            connection.compare(dn, "cn", "h1").expect("compare").0,
        ),
        (
            "add below",
            connection
                .add(
                    &below,
                    vec![
                        ("objectClass".to_string(), set(&["device"])),
                        ("cn".to_string(), set(&["new"])),
                    ],
                )
                .expect("add"),
        ),
        (
            "password modify",
            connection
                .extended(PasswordModify {
                    user_id: Some(dn),
                    old_pass: None,
                    new_pass: Some("x"),
                })
                .expect("exop")
                .1,
        ),
        (
            "search",
            connection
                .search(dn, Scope::Base, "(objectClass=*)", vec!["1.1"])
                .expect("search")
                .1,
        ),
    ]
    .into_iter()
    .map(|(name, result)| {
        let seen = answer(&result, dn);
        (name, (seen.0, seen.1, seen.2.replace(&below, "X")))
    })
    .collect()
}

/// `ou=hosts` is known to nobody but the rootdn, `ou=drop` is open to every user, the rest as
/// the default policy.
fn hidden_hosts_rules() -> Vec<AccessRule> {
    let subtree = |dn: &str| AccessTarget {
        subtree: Some(dn.to_string()),
        ..AccessTarget::default()
    };
    vec![
        grant(subtree(HOSTS), Who::SelfEntry, AccessLevel::Read),
        grant(
            subtree("ou=drop,dc=example,dc=com"),
            Who::Users,
            AccessLevel::Write,
        ),
        own_password_rule(),
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ]
}

#[test]
fn every_operation_answers_for_a_hidden_entry_as_for_a_missing_one() {
    let server = TestServer::start_populated(PEOPLE, hidden_hosts_rules(), |_| {});
    add_entry(
        &server,
        HOSTS,
        &[("objectClass", &["organizationalUnit"]), ("ou", &["hosts"])],
    );
    let hidden = format!("cn=h1,{HOSTS}");
    add_entry(
        &server,
        &hidden,
        &[("objectClass", &["device"]), ("cn", &["h1"])],
    );
    let missing = format!("cn=h9,{HOSTS}");
    let user = person_dn(1);
    for (who, mut connection) in [
        ("anonymous", anonymous(&server)),
        ("a user", bind(&server, &user, PERSON_PASSWORD)),
    ] {
        let hidden_answers = write_answers(&mut connection, &hidden);
        let missing_answers = write_answers(&mut connection, &missing);
        for ((operation, seen), (_, expected)) in hidden_answers.iter().zip(&missing_answers) {
            if who == "anonymous" && *operation == "password modify" {
                assert_eq!(seen.0, 8, "anonymous Password Modify: {seen:?}");
            } else {
                // The nearest ancestor this subject may know of is the suffix, for both.
                assert_eq!(
                    (seen.0, seen.1.as_str()),
                    (32, SUFFIX),
                    "{who}: {operation} of a hidden entry: {seen:?}"
                );
            }
            assert_eq!(
                seen, expected,
                "{who}: {operation}: hidden and missing differ"
            );
        }
    }
    // The hidden entry is untouched and still there for the rootdn.
    let entry = read_entry(&mut root(&server), &hidden);
    assert!(!entry.attrs.contains_key("description"), "{entry:?}");
}

#[test]
fn a_hidden_new_superior_or_parent_answers_as_a_missing_one() {
    let server = TestServer::start_populated(PEOPLE, hidden_hosts_rules(), |_| {});
    add_entry(
        &server,
        HOSTS,
        &[("objectClass", &["organizationalUnit"]), ("ou", &["hosts"])],
    );
    add_entry(
        &server,
        "ou=drop,dc=example,dc=com",
        &[("objectClass", &["organizationalUnit"]), ("ou", &["drop"])],
    );
    let mut user = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let mover = "uid=mover,ou=drop,dc=example,dc=com";
    user.add(
        mover,
        vec![
            ("objectClass".to_string(), set(&["account"])),
            ("uid".to_string(), set(&["mover"])),
        ],
    )
    .expect("add")
    .success()
    .expect("a user adds in ou=drop");
    let mut move_under = |superior: &str| {
        let result = user
            .modifydn(mover, "uid=mover", true, Some(superior))
            .expect("modrdn");
        answer(&result, superior)
    };
    let hidden = move_under(HOSTS);
    assert_eq!(hidden, move_under("ou=nowhere,dc=example,dc=com"));
    assert_eq!((hidden.0, hidden.1.as_str()), (32, SUFFIX), "{hidden:?}");
    // Below the hidden subtree the store's matched DN (ou=hosts) is never the answer.
    let deep = move_under(&format!("cn=nothing,{HOSTS}"));
    assert_eq!((deep.0, deep.1.as_str()), (32, SUFFIX), "{deep:?}");
}

#[test]
fn an_empty_modify_needs_write_access_to_the_entry() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let target = person_dn(4);
    let stamps = |server: &TestServer| {
        let mut admin = root(server);
        let entry = read_entry(&mut admin, &target);
        let suffix = read_entry(&mut admin, SUFFIX);
        (
            entry.attrs.get("entryCSN").cloned(),
            entry.attrs.get("modifiersName").cloned(),
            entry.attrs.get("modifyTimestamp").cloned(),
            suffix.attrs.get("contextCSN").cloned(),
        )
    };
    let before = stamps(&server);
    let empty = |connection: &mut LdapConn| {
        connection
            .modify(&target, Vec::<Mod<String>>::new())
            .expect("modify")
            .rc
    };
    assert_eq!(empty(&mut anonymous(&server)), 50, "anonymous");
    assert_eq!(
        empty(&mut bind(&server, &person_dn(5), PERSON_PASSWORD)),
        50,
        "another user"
    );
    // The default policy lets a user write its password only, not its entry.
    assert_eq!(
        empty(&mut bind(&server, &target, PERSON_PASSWORD)),
        50,
        "itself"
    );
    assert_eq!(
        stamps(&server),
        before,
        "a refused empty modify changed the entry"
    );
    // With write access to the entry it is a touch, as on slapd (rootdn: success, restamped).
    assert_eq!(empty(&mut root(&server)), 0, "rootdn");
    let after = stamps(&server);
    assert_ne!(after.0, before.0, "the rootdn's empty modify restamps");
    assert_eq!(after.1, Some(vec![ROOT_DN.to_string()]));
}

/// The default password policy locks an account after three failures.
fn add_lockout_policy(server: &TestServer) {
    add_default_policy(
        server,
        &[("pwdMaxFailure", &["3"]), ("pwdLockout", &["TRUE"])],
    );
}

fn add_default_policy(server: &TestServer, rules: &[(&str, &[&str])]) {
    add_entry(
        server,
        "ou=policies,dc=example,dc=com",
        &[
            ("objectClass", &["organizationalUnit"]),
            ("ou", &["policies"]),
        ],
    );
    let mut attributes: Vec<(&str, &[&str])> = vec![
        ("objectClass", &["organizationalRole", "pwdPolicy"]),
        ("cn", &["default"]),
        ("pwdAttribute", &["userPassword"]),
    ];
    attributes.extend_from_slice(rules);
    add_entry(server, DEFAULT_POLICY, &attributes);
}

fn change_password(
    connection: &mut LdapConn,
    user: Option<&str>,
    old: &str,
    new: &str,
) -> (u32, String) {
    let result = connection
        .extended(PasswordModify {
            user_id: user,
            old_pass: Some(old),
            new_pass: Some(new),
        })
        .expect("exop")
        .1;
    (result.rc, result.text)
}

#[test]
fn password_modify_is_no_password_oracle() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.password_policy_default = DEFAULT_POLICY.to_string();
    });
    add_lockout_policy(&server);
    let target = person_dn(13);
    let passwords = |server: &TestServer| read_entry(&mut root(server), &target).attrs;
    let before = passwords(&server);
    // Anonymous: strongerAuthRequired, as slapd, whatever the guess.
    let mut nobody = anonymous(&server);
    let right = change_password(&mut nobody, Some(&target), PERSON_PASSWORD, "x");
    assert_eq!(right.0, 8, "{right:?}");
    assert_eq!(
        right,
        change_password(&mut nobody, Some(&target), "wrong", "x")
    );
    // Another user (no write access): the same answer for a right and a wrong guess (slapd: 53).
    let mut other = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let right = change_password(&mut other, Some(&target), PERSON_PASSWORD, "x");
    assert_eq!(right.0, 53, "{right:?}");
    assert_eq!(
        right,
        change_password(&mut other, Some(&target), "wrong", "x")
    );
    assert_eq!(
        passwords(&server),
        before,
        "no guess was recorded or applied"
    );
    // The entry itself: a wrong old password is a failed bind, counted to the lockout.
    let mut own = bind(&server, &target, PERSON_PASSWORD);
    for _ in 0..3 {
        assert_eq!(change_password(&mut own, None, "wrong", "x").0, 53);
    }
    let entry = passwords(&server);
    assert_eq!(
        entry.get("pwdFailureTime").map(Vec::len),
        Some(3),
        "{entry:?}"
    );
    assert!(entry.contains_key("pwdAccountLockedTime"), "{entry:?}");
    assert!(!can_bind(&server, &target, PERSON_PASSWORD), "locked");
    // Locked: the right old password answers as a wrong one and changes nothing.
    let locked = change_password(&mut own, None, PERSON_PASSWORD, "new-one");
    assert_eq!(locked, change_password(&mut own, None, "wrong", "new-one"));
    assert_eq!(
        passwords(&server).get("userPassword"),
        before.get("userPassword"),
        "a locked account's password was changed through Password Modify"
    );
}

#[test]
fn wrong_old_passwords_are_throttled_as_failed_binds() {
    const BURST: u32 = 2;
    const INTERVAL: Duration = Duration::from_millis(500);
    const FAILURES: u32 = 6;
    let server = TestServer::start_populated(20, Vec::new(), |settings| {
        settings.bind_failure_burst = BURST;
        settings.bind_failure_interval = INTERVAL;
    });
    let mut own = bind(&server, &person_dn(3), PERSON_PASSWORD);
    let started = Instant::now();
    for _ in 0..FAILURES {
        assert_eq!(change_password(&mut own, None, "guess", "x").0, 53);
    }
    // A lower bound only, which load can only make truer.
    let least = INTERVAL * (FAILURES - BURST);
    let elapsed = started.elapsed();
    assert!(
        elapsed >= least - Duration::from_millis(50),
        "{FAILURES} wrong old passwords answered in {elapsed:?}, less than {least:?}"
    );
}

#[test]
fn an_entry_never_writes_its_own_password_policy_state() {
    // A common rule: every user writes its own entry.
    let rules = vec![
        own_password_rule(),
        rule_by(
            AccessTarget::default(),
            &[
                (Who::SelfEntry, AccessLevel::Write),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
    ];
    let server = TestServer::start_populated(PEOPLE, rules, |settings| {
        settings.password_policy_default = DEFAULT_POLICY.to_string();
    });
    add_lockout_policy(&server);
    add_entry(
        &server,
        "cn=lax,ou=policies,dc=example,dc=com",
        &[
            ("objectClass", &["organizationalRole", "pwdPolicy"]),
            ("cn", &["lax"]),
            ("pwdAttribute", &["userPassword"]),
        ],
    );
    let user = person_dn(7);
    let mut own = bind(&server, &user, PERSON_PASSWORD);
    let mut modify = |changes: Vec<Mod<&str>>| own.modify(&user, changes).expect("modify").rc;
    assert_eq!(
        modify(vec![Mod::Replace("description", set_of(&["mine"]))]),
        0
    );
    let lax = "cn=lax,ou=policies,dc=example,dc=com";
    assert_eq!(
        modify(vec![Mod::Replace("pwdPolicySubentry", set_of(&[lax]))]),
        50,
        "a user pointed itself at a laxer policy"
    );
    assert_eq!(
        modify(vec![Mod::Replace("pwdReset", set_of(&["FALSE"]))]),
        50
    );
    assert_eq!(
        modify(vec![Mod::Delete("pwdAccountLockedTime", HashSet::new())]),
        50,
        "a user may not lift its own lock"
    );
    // An administrator still manages them.
    let reset = root(&server)
        .modify(&user, vec![Mod::Replace("pwdReset", set_of(&["TRUE"]))])
        .expect("modify");
    assert_eq!(reset.rc, 0, "{reset:?}");
}

fn set_of<'a>(values: &[&'a str]) -> HashSet<&'a str> {
    values.iter().copied().collect()
}

#[test]
fn the_policy_judges_a_new_password_only_for_who_may_set_it() {
    let server = TestServer::start_populated(PEOPLE, hidden_hosts_rules(), |settings| {
        settings.password_policy_default = DEFAULT_POLICY.to_string();
    });
    add_default_policy(
        &server,
        &[("pwdCheckQuality", &["2"]), ("pwdMinLength", &["10"])],
    );
    add_entry(
        &server,
        HOSTS,
        &[("objectClass", &["organizationalUnit"]), ("ou", &["hosts"])],
    );
    let hidden = format!("uid=svc,{HOSTS}");
    add_entry(
        &server,
        &hidden,
        &[
            ("objectClass", &["account", "simpleSecurityObject"]),
            ("uid", &["svc"]),
            ("userPassword", &["service-secret"]),
        ],
    );
    let mut user = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let mut set_short = |dn: &str| {
        let result = user
            .modify(dn, vec![Mod::Replace("userPassword", set_of(&["short"]))])
            .expect("modify");
        answer(&result, dn)
    };
    // Another user's password: no write access, so no verdict on its quality.
    assert_eq!(set_short(&person_dn(2)).0, 50);
    // An entry the user may not know of: as a missing one, not "too short".
    let hidden_answer = set_short(&hidden);
    assert_eq!(hidden_answer, set_short(&format!("uid=none,{HOSTS}")));
    assert_eq!((hidden_answer.0, hidden_answer.1.as_str()), (32, SUFFIX));
    // Its own: the policy speaks.
    assert_eq!(set_short(&person_dn(1)).0, 19);
}

/// A rename gives the new RDN's values: an entry that may rename itself (write on its parent's
/// children, as a self-service rule grants) named itself `+pwdPolicySubentry=<a laxer policy>`
/// or `+userPassword=<anything>` (past the policy's quality and hashing, in cleartext in its DN),
/// which a modify of its own refuses.
#[test]
fn an_entry_renaming_itself_gains_nothing_a_modify_refuses() {
    let rules = vec![
        own_password_rule(),
        rule_by(
            AccessTarget {
                dn: Some("ou=People,dc=example,dc=com".to_string()),
                attrs: vec!["children".to_string()],
                ..AccessTarget::default()
            },
            &[(Who::Users, AccessLevel::Write)],
        ),
        rule_by(
            AccessTarget::default(),
            &[
                (Who::SelfEntry, AccessLevel::Write),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
    ];
    let server = TestServer::start_populated(PEOPLE, rules, |settings| {
        settings.password_policy_default = DEFAULT_POLICY.to_string();
    });
    add_lockout_policy(&server);
    let user = person_dn(7);
    let uid = user.split(',').next().expect("an RDN").to_string();
    let mut own = bind(&server, &user, PERSON_PASSWORD);
    let mut rename = |new_rdn: &str| {
        own.modifydn(&user, new_rdn, false, None)
            .expect("modrdn")
            .rc
    };
    let lax = "cn=lax\\,ou=policies\\,dc=example\\,dc=com";
    assert_eq!(
        rename(&format!("{uid}+pwdPolicySubentry={lax}")),
        50,
        "a user named itself into a laxer policy"
    );
    assert_eq!(rename(&format!("{uid}+userPassword=weak")), 50);
    // A rename of its own name stays allowed.
    assert_eq!(rename(&format!("{uid}+cn=Renamed")), 0);
}

/// The suffix entry has no parent in the database: adding or deleting it is the rootdn's alone,
/// as back-mdb ("no parent, must be root"), whatever the rules grant. Before, `to * by * write`
/// let an anonymous client delete the suffix entry of a database holding nothing else.
#[test]
fn only_the_rootdn_adds_or_deletes_the_suffix_entry() {
    let everyone_writes = AccessRule {
        to: AccessTarget::default(),
        by: vec![AccessClause {
            who: Who::Anyone,
            access: AccessLevel::Write,
        }],
    };
    let server = TestServer::start_with_rules(vec![everyone_writes]);
    let suffix = "dc=example,dc=com";
    let attributes = || {
        vec![
            ("objectClass", HashSet::from(["dcObject", "organization"])),
            ("dc", HashSet::from(["example"])),
            ("o", HashSet::from(["Example"])),
        ]
    };
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let added = anonymous.add(suffix, attributes()).expect("add sent");
    assert_ne!(added.rc, 0, "{added:?}");
    root(&server)
        .add(suffix, attributes())
        .expect("add sent")
        .success()
        .expect("the rootdn adds the suffix");
    let deleted = anonymous.delete(suffix).expect("delete sent");
    assert_eq!(deleted.rc, 50, "{deleted:?}");
    root(&server)
        .delete(suffix)
        .expect("delete sent")
        .success()
        .expect("the rootdn deletes it");
}

/// Past the write budget the answer names the setting to raise: a large subtree move with
/// memberOf on (every moved member's groups rewritten) is the administrator's case for it.
#[test]
fn a_write_past_its_budget_names_the_setting() {
    let server = TestServer::start_populated(5, Vec::new(), |settings| {
        settings.write_budget = Duration::ZERO;
    });
    let result = root(&server)
        .modify(
            &person_dn(1),
            vec![Mod::Replace("description", HashSet::from(["late"]))],
        )
        .expect("modify sent");
    assert_eq!(result.rc, 11, "{result:?}");
    assert!(
        result.text.contains("write_budget_milliseconds"),
        "{}",
        result.text
    );
}

/// A glue entry (a partial replica's placeholder) a subject may not know of answers every
/// operation exactly as a missing entry, with ManageDsaIT or without: its DN is never the
/// matched DN, where slapd names it. One the subject may read answers a modify without
/// ManageDsaIT noSuchObject naming itself, and with it the access decision (50), as slapd.
#[test]
fn a_hidden_glue_entry_answers_as_a_missing_one() {
    let server = TestServer::start_populated(10, hidden_hosts_rules(), |_| {});
    add_entry(&server, HOSTS, &[("objectClass", &["top", "glue"])]);
    let open = "ou=open,dc=example,dc=com";
    add_entry(&server, open, &[("objectClass", &["top", "glue"])]);
    let mut user = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let manage_dsa_it = RawControl {
        ctype: "2.16.840.1.113730.3.4.2".to_string(),
        crit: true,
        val: None,
    };
    let hidden = write_answers(&mut user, HOSTS);
    let missing = write_answers(&mut user, "ou=nowhere,dc=example,dc=com");
    assert_eq!(hidden, missing);
    for (operation, seen) in &hidden {
        assert_eq!(seen.1, SUFFIX, "{operation}: {seen:?}");
    }
    let modify = |connection: &mut LdapConn, dn: &str| {
        let change = vec![Mod::Replace("description".to_string(), set(&["x"]))];
        answer(&connection.modify(dn, change).expect("modify"), dn)
    };
    let hidden_managed = modify(user.with_controls(manage_dsa_it.clone()), HOSTS);
    assert_eq!((hidden_managed.0, hidden_managed.1.as_str()), (32, SUFFIX));
    let visible = modify(&mut user, open);
    assert_eq!((visible.0, visible.1.as_str()), (32, open), "{visible:?}");
    let managed = modify(user.with_controls(manage_dsa_it), open);
    assert_eq!(managed.0, 50, "{managed:?}");
    let (entries, _) = user
        .search(SUFFIX, Scope::OneLevel, "(objectClass=*)", vec!["1.1"])
        .expect("search")
        .success()
        .expect("search answers");
    let dns: Vec<String> = entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn)
        .collect();
    assert!(!dns.iter().any(|dn| dn == open), "{dns:?}");
}
