//! LDAP transactions (RFC 5805) over the wire: queued updates are invisible until End
//! Transaction, commit together or not at all, are decided with the access of whoever sent
//! each one, and every count a client controls is bounded: per transaction, per connection,
//! and the memory all connections' queued updates hold together; anonymous clients hold none.

use crate::common;

use common::transaction::{end, in_transaction, start, start_request, END, SPECIFICATION, START};
use common::{
    bind, grant, own_password_rule, person_dn, root, rule_by, TestServer, PERSON_PASSWORD,
};
use ldap3::controls::RawControl;
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use lmdir_config::{AccessLevel, AccessTarget, Who};
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn description(connection: &mut LdapConn, dn: &str) -> HashSet<String> {
    let (entries, _) = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec!["description"])
        .expect("search sent")
        .success()
        .expect("search");
    entries
        .into_iter()
        .flat_map(|entry| {
            SearchEntry::construct(entry)
                .attrs
                .remove("description")
                .unwrap_or_default()
        })
        .collect()
}

fn set(values: &[&str]) -> HashSet<String> {
    values.iter().map(|value| value.to_string()).collect()
}

fn describe(connection: &mut LdapConn, id: &[u8], dn: &str, value: &str) -> u32 {
    connection
        .with_controls(in_transaction(id))
        .modify(
            dn,
            vec![Mod::Replace("description".to_string(), set(&[value]))],
        )
        .expect("modify sent")
        .rc
}

/// Person 1 may write the description of their own entry and of person 2's, nobody's else.
fn server() -> TestServer {
    let writers = AccessTarget {
        attrs: vec!["description".to_string()],
        ..AccessTarget::default()
    };
    let rules = vec![
        own_password_rule(),
        rule_by(
            AccessTarget {
                dn: Some(person_dn(2)),
                ..writers.clone()
            },
            &[
                (Who::Dn(person_dn(1)), AccessLevel::Write),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
        rule_by(
            writers,
            &[
                (Who::SelfEntry, AccessLevel::Write),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
        grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ];
    TestServer::start_populated(20, rules, |_| {})
}

#[test]
fn queued_updates_are_invisible_until_committed_together() {
    let server = server();
    let mut user = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let mut observer = root(&server);
    let id = start(&mut user);
    assert_eq!(describe(&mut user, &id, &person_dn(1), "one"), 0);
    assert_eq!(describe(&mut user, &id, &person_dn(2), "two"), 0);
    // Queued, not written: another connection (and the sender itself) sees nothing yet.
    assert!(!description(&mut observer, &person_dn(1)).contains("one"));
    assert!(!description(&mut user, &person_dn(2)).contains("two"));
    assert_eq!(end(&mut user, &id, true), (0, None));
    assert_eq!(description(&mut observer, &person_dn(1)), set(&["one"]));
    assert_eq!(description(&mut observer, &person_dn(2)), set(&["two"]));
    // Ended: the identifier is gone.
    assert_eq!(end(&mut user, &id, true).0, 53);
}

#[test]
fn an_update_without_access_fails_the_whole_transaction_and_is_named() {
    let server = server();
    let mut user = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let mut observer = root(&server);
    let id = start(&mut user);
    assert_eq!(describe(&mut user, &id, &person_dn(1), "mine"), 0);
    assert_eq!(describe(&mut user, &id, &person_dn(2), "allowed"), 0);
    // Person 3's description is not person 1's to write: decided at commit, by the writer.
    assert_eq!(describe(&mut user, &id, &person_dn(3), "denied"), 0);
    let denied_message = user.last_id();
    let (code, value) = end(&mut user, &id, true);
    assert_eq!(code, 50);
    // txnEndRes: SEQUENCE { messageID } of the update that failed.
    let value = value.expect("the failed update's message ID");
    assert_eq!(&value[..2], &[0x30, value.len() as u8 - 2]);
    assert_eq!(value[2], 0x02);
    let named = value[4..]
        .iter()
        .fold(0i64, |total, byte| (total << 8) | i64::from(*byte));
    assert_eq!(named, i64::from(denied_message));
    for person in 1..=3 {
        let values = description(&mut observer, &person_dn(person));
        assert!(
            !values
                .iter()
                .any(|value| ["mine", "allowed", "denied"].contains(&value.as_str())),
            "person {person}: {values:?}"
        );
    }
}

#[test]
fn abort_a_new_bind_and_a_refused_update_end_the_transaction() {
    let server = server();
    let mut user = bind(&server, &person_dn(1), PERSON_PASSWORD);
    let mut observer = root(&server);

    let id = start(&mut user);
    assert_eq!(describe(&mut user, &id, &person_dn(1), "aborted"), 0);
    assert_eq!(end(&mut user, &id, false), (0, None));
    assert_eq!(end(&mut user, &id, true).0, 53);

    // Queued as person 1, never committed as whoever binds next.
    let id = start(&mut user);
    assert_eq!(describe(&mut user, &id, &person_dn(1), "rebound"), 0);
    user.simple_bind(&person_dn(4), PERSON_PASSWORD)
        .expect("bind sent")
        .success()
        .expect("bind");
    assert_eq!(end(&mut user, &id, true).0, 53);

    // A refused update (here one description with more options than the server takes) aborts
    // its transaction: the updates queued before it cannot commit without it.
    let options: String = (0..100).map(|index| format!(";x{index}")).collect();
    let id = start(&mut user);
    assert_eq!(describe(&mut user, &id, &person_dn(4), "kept?"), 0);
    let refused = user
        .with_controls(in_transaction(&id))
        .modify(
            &person_dn(4),
            vec![Mod::Replace(format!("description{options}"), set(&["x"]))],
        )
        .expect("modify sent")
        .rc;
    assert_ne!(refused, 0);
    assert_eq!(end(&mut user, &id, true).0, 53);
    for person in [1, 4] {
        let values = description(&mut observer, &person_dn(person));
        assert!(
            !values
                .iter()
                .any(|value| ["aborted", "rebound", "kept?"].contains(&value.as_str())),
            "person {person}: {values:?}"
        );
    }
}

#[test]
fn the_specification_control_is_checked_and_transactions_are_bounded() {
    let server = server();
    let mut user = root(&server);
    // Non-critical: a protocol error (RFC 5805 §2.2: it is always critical).
    let id = start(&mut user);
    let lax = user
        .with_controls(RawControl {
            crit: false,
            ..in_transaction(&id)
        })
        .modify(
            &person_dn(1),
            vec![Mod::Replace("description".to_string(), set(&["x"]))],
        )
        .expect("modify sent")
        .rc;
    assert_eq!(lax, 2);
    // An identifier no Start gave: refused, nothing queued anywhere.
    assert_eq!(describe(&mut user, b"999", &person_dn(1), "x"), 53);
    // Not on a search (critical, so unavailableCriticalExtension).
    let open = start(&mut user);
    let search = user
        .with_controls(in_transaction(&open))
        .search(&person_dn(1), Scope::Base, "(objectClass=*)", vec!["cn"])
        .expect("search sent");
    assert_eq!(search.1.rc, 12);
    // At most four open transactions per connection.
    let mut fresh = root(&server);
    for _ in 0..4 {
        start(&mut fresh);
    }
    assert_eq!(start_request(&mut fresh).1.rc, 11);
    // At most 1,024 updates in one: the 1,025th is refused and the transaction aborted.
    let mut bulk = root(&server);
    let id = start(&mut bulk);
    for index in 0..1024 {
        assert_eq!(
            describe(&mut bulk, &id, &person_dn(5), &format!("v{index}")),
            0
        );
    }
    assert_eq!(describe(&mut bulk, &id, &person_dn(5), "over"), 11);
    assert_eq!(end(&mut bulk, &id, true).0, 53);
}

#[test]
fn the_root_dse_lists_the_transaction_operations_and_control() {
    let server = server();
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let (entries, _) = anonymous
        .search(
            "",
            Scope::Base,
            "(objectClass=*)",
            vec!["supportedExtension", "supportedControl"],
        )
        .expect("search sent")
        .success()
        .expect("root DSE");
    let root_dse = SearchEntry::construct(entries.into_iter().next().expect("root DSE"));
    let extensions = &root_dse.attrs["supportedExtension"];
    assert!(extensions.contains(&START.to_string()), "{extensions:?}");
    assert!(extensions.contains(&END.to_string()), "{extensions:?}");
    assert!(root_dse.attrs["supportedControl"].contains(&SPECIFICATION.to_string()));
}

#[test]
fn anonymous_clients_cannot_open_a_transaction() {
    let server = server();
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let refused = start_request(&mut anonymous);
    assert_eq!(refused.1.rc, 8, "{:?}", refused.1);
    assert!(refused.0.val.is_none());
    // Nothing to name: an update in any transaction is refused and nothing is queued.
    assert_eq!(describe(&mut anonymous, b"1", &person_dn(1), "x"), 53);
}

/// Queues in transaction `id` a modify adding 2,000 short values to person 5's description:
/// ~20 KB on the wire, ~100 KB held in memory. Returns the result code.
fn queue_many_values(connection: &mut LdapConn, id: &[u8], batch: usize) -> u32 {
    let values: HashSet<String> = (0..2000).map(|index| format!("{batch}-{index}")).collect();
    connection
        .with_controls(in_transaction(id))
        .modify(
            &person_dn(5),
            vec![Mod::Add("description".to_string(), values)],
        )
        .expect("modify sent")
        .rc
}

/// Queues batches in a new transaction on `connection` until one is refused (at most 40);
/// returns how many were queued and the refusal's code.
fn fill(connection: &mut LdapConn) -> (Vec<u8>, usize, u32) {
    let id = start(connection);
    for batch in 0..40 {
        let code = queue_many_values(connection, &id, batch);
        if code != 0 {
            return (id, batch, code);
        }
    }
    (id, 40, 0)
}

#[test]
fn queued_memory_is_bounded_across_connections_and_returned_when_one_closes() {
    // One MiB for all connections' queued updates. Counted by their bytes on the wire (as
    // before this bound) forty batches would fit; counted by what they hold, about ten do.
    let server = TestServer::start_populated(20, Vec::new(), |settings| {
        settings.transaction_bytes_max = 1 << 20;
    });
    let mut first = root(&server);
    let (id, queued, code) = fill(&mut first);
    assert_eq!(code, 11, "the bound was never reached");
    assert!((4..40).contains(&queued), "{queued} batches fit in 1 MiB");
    // Refused: the transaction is aborted and what it held is returned at once.
    assert_eq!(end(&mut first, &id, true).0, 53);
    // `second` holds all but one batch's worth, in a transaction it keeps open...
    let mut second = root(&server);
    let held = start(&mut second);
    for batch in 0..queued - 1 {
        assert_eq!(
            queue_many_values(&mut second, &held, batch),
            0,
            "batch {batch}"
        );
    }
    // ...so a third connection fits one batch, not two (and its transaction is aborted).
    let mut third = root(&server);
    let (_, squeezed, code) = fill(&mut third);
    assert_eq!((squeezed, code), (1, 11));
    // ...until `second` closes with its transaction open: the server takes back its share.
    second.unbind().expect("unbind");
    drop(second);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, refilled, _) = fill(&mut third);
        if refilled == queued {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a closed connection's queued updates still count ({refilled} of {queued} fit)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
