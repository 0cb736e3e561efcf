//! Password policy over the wire (draft-behera, as OpenLDAP's ppolicy): lockout after
//! pwdMaxFailure, a locked account answering 49 even with the right password (the control says
//! accountLocked), unlocking by deleting pwdAccountLockedTime, expiry warnings and grace logins.
//! Time never comes from waiting: policy durations are hours and the past is written into
//! pwdChangedTime / pwdAccountLockedTime by the rootdn (with Relax where the attribute is
//! NO-USER-MODIFICATION).

use crate::common;

use common::{person_dn, TestServer, PERSON_PASSWORD, ROOT_DN, ROOT_PASSWORD};
use ldap3::controls::RawControl;
use ldap3::{LdapConn, LdapResult, Mod, Scope, SearchEntry};
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

const PEOPLE: usize = 300;
const POLICY_OID: &str = "1.3.6.1.4.1.42.2.27.8.5.1";
const RELAX_OID: &str = "1.3.6.1.4.1.4203.666.5.12";
const DEFAULT_POLICY: &str = "cn=default,ou=policies,dc=example,dc=com";
const MAX_FAILURE: usize = 3;
const HOUR_SECONDS: u64 = 3600;
const DAY_SECONDS: u64 = 86_400;

/// The response control's contents: warning (tag 0 = timeBeforeExpiration, 1 =
/// graceAuthNsRemaining, value) and error.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct PolicyResponse {
    warning: Option<(u8, u64)>,
    error: Option<u64>,
}

fn integer(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0u64, |total, byte| (total << 8) | u64::from(*byte))
}

/// Decodes the response control (short lengths suffice for these few bytes).
fn policy_response(result: &LdapResult) -> Option<PolicyResponse> {
    let control = result
        .ctrls
        .iter()
        .find(|control| control.1.ctype == POLICY_OID)?;
    let value = control.1.val.as_ref().expect("control value");
    assert_eq!(value[0], 0x30, "a SEQUENCE: {value:?}");
    assert_eq!(usize::from(value[1]), value.len() - 2, "{value:?}");
    let mut response = PolicyResponse::default();
    let mut rest = &value[2..];
    while !rest.is_empty() {
        let (tag, length) = (rest[0], usize::from(rest[1]));
        let content = &rest[2..2 + length];
        match tag {
            0xa0 => {
                let inner_length = usize::from(content[1]);
                let choice = content[0] & 0x1f;
                response.warning = Some((choice, integer(&content[2..2 + inner_length])));
            }
            0x81 => response.error = Some(integer(content)),
            other => panic!("unexpected element {other:#x} in {value:?}"),
        }
        rest = &rest[2 + length..];
    }
    Some(response)
}

fn connect(server: &TestServer) -> LdapConn {
    LdapConn::new(&server.ldap_url()).expect("connect")
}

/// A simple bind carrying the password policy request control.
fn policy_bind(server: &TestServer, dn: &str, password: &str) -> LdapResult {
    let mut connection = connect(server);
    let control = RawControl {
        ctype: POLICY_OID.to_string(),
        crit: false,
        val: None,
    };
    connection
        .with_controls(control)
        .simple_bind(dn, password)
        .expect("bind")
}

fn root(server: &TestServer) -> LdapConn {
    let mut connection = connect(server);
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("rootdn binds");
    connection
}

fn read(server: &TestServer, dn: &str) -> SearchEntry {
    let (entries, _) = root(server)
        .search(dn, Scope::Base, "(objectClass=*)", vec!["*", "+"])
        .expect("search")
        .success()
        .expect("read");
    SearchEntry::construct(entries.into_iter().next().expect("the entry"))
}

fn values(entry: &SearchEntry, name: &str) -> Vec<String> {
    entry.attrs.get(name).cloned().unwrap_or_default()
}

fn set<'a>(items: &[&'a str]) -> HashSet<&'a str> {
    items.iter().copied().collect()
}

fn add_policy(server: &TestServer, dn: &str, attributes: &[(&str, &str)]) {
    let mut admin = root(server);
    if dn == DEFAULT_POLICY {
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
            .expect("ou=policies added");
    }
    let cn = dn
        .split(',')
        .next()
        .and_then(|rdn| rdn.strip_prefix("cn="))
        .expect("cn=... policy DN");
    let mut entry = vec![
        ("objectClass", set(&["organizationalRole", "pwdPolicy"])),
        ("cn", set(&[cn])),
        ("pwdAttribute", set(&["userPassword"])),
    ];
    for (name, value) in attributes {
        entry.push((*name, set(&[*value])));
    }
    admin
        .add(dn, entry)
        .expect("add")
        .success()
        .expect("policy entry added");
}

/// A server whose default policy locks after `MAX_FAILURE` failures within an hour, until an
/// administrator unlocks; the bind throttle is opened wide so it never delays these binds.
fn lockout_server() -> TestServer {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.password_policy_default = DEFAULT_POLICY.to_string();
        settings.bind_failure_burst = 100_000;
        settings.bind_failure_address_burst = 100_000;
    });
    add_policy(
        &server,
        DEFAULT_POLICY,
        &[
            ("pwdMaxFailure", "3"),
            ("pwdLockout", "TRUE"),
            ("pwdLockoutDuration", "0"),
            ("pwdFailureCountInterval", "3600"),
        ],
    );
    server
}

fn generalized_time(seconds_ago: u64) -> String {
    let when = SystemTime::now() - Duration::from_secs(seconds_ago);
    String::from_utf8(lmdir_store::timestamp_value(when)).expect("ASCII")
}

/// Writes a state attribute as the rootdn with Relax Rules (pwdChangedTime is
/// NO-USER-MODIFICATION, as in OpenLDAP).
fn set_state(server: &TestServer, dn: &str, name: &str, value: &str) {
    let relax = RawControl {
        ctype: RELAX_OID.to_string(),
        crit: true,
        val: None,
    };
    root(server)
        .with_controls(relax)
        .modify(dn, vec![Mod::Replace(name, set(&[value]))])
        .expect("modify")
        .success()
        .expect("state written");
}

#[test]
fn failures_lock_the_account_until_the_rootdn_deletes_the_lock() {
    let server = lockout_server();
    let dn = person_dn(1);
    for attempt in 0..MAX_FAILURE {
        let result = policy_bind(&server, &dn, "wrong");
        assert_eq!(result.rc, 49, "failure {attempt}: {result:?}");
    }
    let entry = read(&server, &dn);
    assert_eq!(values(&entry, "pwdFailureTime").len(), MAX_FAILURE);
    assert_eq!(values(&entry, "pwdAccountLockedTime").len(), 1, "{entry:?}");

    // The right password: still 49 (as slapd), and the control says accountLocked (1).
    let locked = policy_bind(&server, &dn, PERSON_PASSWORD);
    assert_eq!(locked.rc, 49, "{locked:?}");
    assert_eq!(
        policy_response(&locked),
        Some(PolicyResponse {
            warning: None,
            error: Some(1)
        })
    );
    // Without the request control there is no response control.
    let mut plain = connect(&server);
    let result = plain.simple_bind(&dn, PERSON_PASSWORD).expect("bind");
    assert_eq!(result.rc, 49);
    assert!(policy_response(&result).is_none(), "{result:?}");

    // Someone else is unaffected.
    assert_eq!(policy_bind(&server, &person_dn(2), PERSON_PASSWORD).rc, 0);

    // Unlocking is deleting pwdAccountLockedTime (as in OpenLDAP).
    root(&server)
        .modify(
            &dn,
            vec![Mod::Delete("pwdAccountLockedTime", HashSet::new())],
        )
        .expect("modify")
        .success()
        .expect("unlocked");
    let unlocked = policy_bind(&server, &dn, PERSON_PASSWORD);
    assert_eq!(unlocked.rc, 0, "{unlocked:?}");
    // Nothing to say: an empty response control, as slapd answers.
    assert_eq!(
        policy_response(&unlocked),
        Some(PolicyResponse::default()),
        "{unlocked:?}"
    );
    // A success clears the failures.
    let entry = read(&server, &dn);
    assert!(values(&entry, "pwdFailureTime").is_empty(), "{entry:?}");
    assert!(values(&entry, "pwdAccountLockedTime").is_empty());
}

#[test]
fn a_burst_of_failures_records_at_most_max_failure_times() {
    let server = lockout_server();
    let dn = person_dn(3);
    const CONNECTIONS: usize = 4;
    const BINDS_PER_CONNECTION: usize = 25;
    std::thread::scope(|scope| {
        for _ in 0..CONNECTIONS {
            scope.spawn(|| {
                let mut connection = connect(&server);
                for _ in 0..BINDS_PER_CONNECTION {
                    let result = connection.simple_bind(&dn, "wrong").expect("bind");
                    assert_eq!(result.rc, 49);
                }
            });
        }
    });
    let entry = read(&server, &dn);
    assert_eq!(
        values(&entry, "pwdFailureTime").len(),
        MAX_FAILURE,
        "{entry:?}"
    );
    assert_eq!(values(&entry, "pwdAccountLockedTime").len(), 1);
    assert_eq!(policy_bind(&server, &dn, PERSON_PASSWORD).rc, 49);

    // A password reset by the administrator forgets the lock and the failures (as slapd).
    root(&server)
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["reset"]))])
        .expect("modify")
        .success()
        .expect("password reset");
    let entry = read(&server, &dn);
    assert!(
        values(&entry, "pwdAccountLockedTime").is_empty(),
        "{entry:?}"
    );
    assert!(values(&entry, "pwdFailureTime").is_empty());
    assert_eq!(policy_bind(&server, &dn, "reset").rc, 0);
}

#[test]
fn a_lock_with_a_duration_ends_by_itself() {
    let server = lockout_server();
    let timed = "cn=timed,ou=policies,dc=example,dc=com";
    add_policy(
        &server,
        timed,
        &[
            ("pwdMaxFailure", "3"),
            ("pwdLockout", "TRUE"),
            ("pwdLockoutDuration", "3600"),
        ],
    );
    let (recent, old) = (person_dn(4), person_dn(5));
    for dn in [&recent, &old] {
        root(&server)
            .modify(dn, vec![Mod::Replace("pwdPolicySubentry", set(&[timed]))])
            .expect("modify")
            .success()
            .expect("policy chosen");
    }
    set_state(
        &server,
        &recent,
        "pwdAccountLockedTime",
        &generalized_time(600),
    );
    set_state(
        &server,
        &old,
        "pwdAccountLockedTime",
        &generalized_time(2 * HOUR_SECONDS),
    );
    let still_locked = policy_bind(&server, &recent, PERSON_PASSWORD);
    assert_eq!(still_locked.rc, 49);
    assert_eq!(
        policy_response(&still_locked).and_then(|r| r.error),
        Some(1)
    );
    assert_eq!(policy_bind(&server, &old, PERSON_PASSWORD).rc, 0);
    assert!(values(&read(&server, &old), "pwdAccountLockedTime").is_empty());
}

#[test]
fn expiry_warns_then_grace_logins_count_down_then_binds_fail() {
    let server = lockout_server();
    let expiring = "cn=expiring,ou=policies,dc=example,dc=com";
    add_policy(
        &server,
        expiring,
        &[
            ("pwdMaxAge", &DAY_SECONDS.to_string()),
            ("pwdExpireWarning", &(3 * HOUR_SECONDS).to_string()),
            ("pwdGraceAuthNLimit", "2"),
        ],
    );
    let (soon, expired, fresh) = (person_dn(6), person_dn(7), person_dn(8));
    for dn in [&soon, &expired, &fresh] {
        root(&server)
            .modify(
                dn,
                vec![Mod::Replace("pwdPolicySubentry", set(&[expiring]))],
            )
            .expect("modify")
            .success()
            .expect("policy chosen");
    }
    // Two hours before expiry: inside the three-hour warning window.
    let left_seconds = 2 * HOUR_SECONDS;
    set_state(
        &server,
        &soon,
        "pwdChangedTime",
        &generalized_time(DAY_SECONDS - left_seconds),
    );
    let warned = policy_bind(&server, &soon, PERSON_PASSWORD);
    assert_eq!(warned.rc, 0, "{warned:?}");
    let (choice, seconds) = policy_response(&warned)
        .and_then(|response| response.warning)
        .expect("a warning");
    assert_eq!(choice, 0, "timeBeforeExpiration");
    // Bounded by the seconds this test took, never asserted on speed: a hang guard only.
    assert!(
        seconds <= left_seconds && seconds > left_seconds - 600,
        "{seconds}"
    );

    // Changed an hour ago: no warning at all.
    set_state(
        &server,
        &fresh,
        "pwdChangedTime",
        &generalized_time(HOUR_SECONDS),
    );
    let quiet = policy_bind(&server, &fresh, PERSON_PASSWORD);
    assert_eq!(quiet.rc, 0);
    // Nothing to say: an empty response control, as slapd answers.
    assert_eq!(
        policy_response(&quiet),
        Some(PolicyResponse::default()),
        "{quiet:?}"
    );

    // Expired two days ago: two grace logins (1 then 0 remaining), then passwordExpired (0).
    set_state(
        &server,
        &expired,
        "pwdChangedTime",
        &generalized_time(2 * DAY_SECONDS),
    );
    for remaining in [1, 0] {
        let grace = policy_bind(&server, &expired, PERSON_PASSWORD);
        assert_eq!(grace.rc, 0, "{grace:?}");
        assert_eq!(
            policy_response(&grace),
            Some(PolicyResponse {
                warning: Some((1, remaining)),
                error: None
            })
        );
    }
    assert_eq!(values(&read(&server, &expired), "pwdGraceUseTime").len(), 2);
    let refused = policy_bind(&server, &expired, PERSON_PASSWORD);
    assert_eq!(refused.rc, 49, "{refused:?}");
    assert_eq!(
        policy_response(&refused),
        Some(PolicyResponse {
            warning: None,
            error: Some(0)
        })
    );

    // A new password restarts the clock: pwdChangedTime is now, the grace uses are gone.
    root(&server)
        .modify(
            &expired,
            vec![Mod::Replace("userPassword", set(&["renewed"]))],
        )
        .expect("modify")
        .success()
        .expect("password reset");
    let entry = read(&server, &expired);
    assert!(values(&entry, "pwdGraceUseTime").is_empty(), "{entry:?}");
    let changed = values(&entry, "pwdChangedTime");
    assert_eq!(changed.len(), 1, "{entry:?}");
    assert!(changed[0] >= generalized_time(600), "{changed:?}");
    let renewed = policy_bind(&server, &expired, "renewed");
    assert_eq!(renewed.rc, 0, "{renewed:?}");
    // Nothing to say: an empty response control, as slapd answers.
    assert_eq!(
        policy_response(&renewed),
        Some(PolicyResponse::default()),
        "{renewed:?}"
    );
}

#[test]
fn password_changes_outside_any_policy_leave_no_changed_time() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let dn = person_dn(10);
    root(&server)
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["renewed"]))])
        .expect("modify")
        .success()
        .expect("password set");
    assert!(values(&read(&server, &dn), "pwdChangedTime").is_empty());
}

#[test]
fn without_a_policy_failures_leave_no_state() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |settings| {
        settings.bind_failure_burst = 100_000;
        settings.bind_failure_address_burst = 100_000;
    });
    let dn = person_dn(9);
    for _ in 0..MAX_FAILURE + 1 {
        assert_eq!(policy_bind(&server, &dn, "wrong").rc, 49);
    }
    let result = policy_bind(&server, &dn, PERSON_PASSWORD);
    assert_eq!(result.rc, 0);
    assert!(policy_response(&result).is_none());
    assert!(values(&read(&server, &dn), "pwdFailureTime").is_empty());
}

#[test]
fn short_new_passwords_are_refused_with_password_too_short() {
    let server = lockout_server();
    let strict = "cn=strict,ou=policies,dc=example,dc=com";
    add_policy(
        &server,
        strict,
        &[("pwdMinLength", "8"), ("pwdCheckQuality", "1")],
    );
    let dn = person_dn(11);
    root(&server)
        .modify(&dn, vec![Mod::Replace("pwdPolicySubentry", set(&[strict]))])
        .expect("modify")
        .success()
        .expect("policy chosen");
    let control = || RawControl {
        ctype: POLICY_OID.to_string(),
        crit: false,
        val: None,
    };
    let too_short = PolicyResponse {
        warning: None,
        error: Some(6),
    };
    // A modify of userPassword, by the user, with and without the request control.
    let mut user = connect(&server);
    user.simple_bind(&dn, PERSON_PASSWORD)
        .expect("bind")
        .success()
        .expect("user binds");
    let refused = user
        .with_controls(control())
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["short"]))])
        .expect("modify");
    assert_eq!(refused.rc, 19, "{refused:?}");
    assert_eq!(policy_response(&refused), Some(too_short));
    let plain = user
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["short"]))])
        .expect("modify");
    assert_eq!(plain.rc, 19, "{plain:?}");
    assert!(policy_response(&plain).is_none());

    // Password Modify, likewise; a long enough password goes through.
    let mut exop = |new: &str| {
        user.with_controls(control())
            .extended(ldap3::exop::PasswordModify {
                user_id: None,
                old_pass: None,
                new_pass: Some(new),
            })
            .expect("exop")
            .1
    };
    let refused = exop("short");
    assert_eq!(refused.rc, 19, "{refused:?}");
    assert_eq!(policy_response(&refused), Some(too_short));
    assert_eq!(exop("long-enough").rc, 0);
    assert_eq!(policy_bind(&server, &dn, "long-enough").rc, 0);
    assert_eq!(policy_bind(&server, &dn, PERSON_PASSWORD).rc, 49);
    // The rootdn is a password administrator: not held to the quality rules (as slapd).
    root(&server)
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["tiny"]))])
        .expect("modify")
        .success()
        .expect("administrator reset");
}

#[test]
fn without_check_quality_the_minimum_length_is_not_enforced() {
    let server = lockout_server();
    let lenient = "cn=lenient,ou=policies,dc=example,dc=com";
    add_policy(&server, lenient, &[("pwdMinLength", "8")]);
    let dn = person_dn(13);
    root(&server)
        .modify(
            &dn,
            vec![Mod::Replace("pwdPolicySubentry", set(&[lenient]))],
        )
        .expect("modify")
        .success()
        .expect("policy chosen");
    let mut user = connect(&server);
    user.simple_bind(&dn, PERSON_PASSWORD)
        .expect("bind")
        .success()
        .expect("user binds");
    let changed = user
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["short"]))])
        .expect("modify");
    assert_eq!(changed.rc, 0, "{changed:?}");
}

#[test]
fn a_subentry_naming_no_policy_does_not_escape_the_default() {
    let server = lockout_server();
    let dn = person_dn(12);
    // Not a pwdPolicy entry: the default policy still applies.
    root(&server)
        .modify(
            &dn,
            vec![Mod::Replace(
                "pwdPolicySubentry",
                set(&["ou=people,dc=example,dc=com"]),
            )],
        )
        .expect("modify")
        .success()
        .expect("subentry set");
    for _ in 0..MAX_FAILURE {
        assert_eq!(policy_bind(&server, &dn, "wrong").rc, 49);
    }
    let locked = policy_bind(&server, &dn, PERSON_PASSWORD);
    assert_eq!(locked.rc, 49);
    assert_eq!(policy_response(&locked).and_then(|r| r.error), Some(1));
}

/// Binds `dn` under a fresh policy made of `attributes` and returns the connection.
fn user_under(
    server: &TestServer,
    policy_cn: &str,
    attributes: &[(&str, &str)],
    dn: &str,
) -> LdapConn {
    let policy = format!("cn={policy_cn},ou=policies,dc=example,dc=com");
    add_policy(server, &policy, attributes);
    root(server)
        .modify(dn, vec![Mod::Replace("pwdPolicySubentry", set(&[&policy]))])
        .expect("modify")
        .success()
        .expect("policy chosen");
    let mut user = connect(server);
    user.simple_bind(dn, PERSON_PASSWORD)
        .expect("bind")
        .success()
        .expect("user binds");
    user
}

/// The rootdn sets the entry's password (a reset under pwdMustChange).
fn admin_reset(server: &TestServer, dn: &str, password: &str) {
    root(server)
        .modify(dn, vec![Mod::Replace("userPassword", set(&[password]))])
        .expect("modify")
        .success()
        .expect("administrator reset");
}

/// Password Modify on oneself with the request control: (result code, control error).
fn change_own(user: &mut LdapConn, old: Option<&str>, new: &str) -> (u32, Option<u64>) {
    let control = RawControl {
        ctype: POLICY_OID.to_string(),
        crit: false,
        val: None,
    };
    let result = user
        .with_controls(control)
        .extended(ldap3::exop::PasswordModify {
            user_id: None,
            old_pass: old,
            new_pass: Some(new),
        })
        .expect("exop")
        .1;
    (result.rc, policy_response(&result).and_then(|r| r.error))
}

#[test]
fn user_changes_follow_allow_user_change_safe_modify_and_min_age() {
    let server = lockout_server();
    // pwdAllowUserChange FALSE: 50 with passwordModNotAllowed (3); the rootdn still may.
    let dn = person_dn(14);
    let mut user = user_under(&server, "frozen", &[("pwdAllowUserChange", "FALSE")], &dn);
    assert_eq!(change_own(&mut user, None, "new-password"), (50, Some(3)));
    root(&server)
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["by-admin"]))])
        .expect("modify")
        .success()
        .expect("administrator reset");

    // pwdSafeModify: the old password is required (50, mustSupplyOldPassword 4); pwdMinAge
    // an hour: a second change right after the first is too young (19, passwordTooYoung 7).
    let dn = person_dn(15);
    let attributes = [("pwdSafeModify", "TRUE"), ("pwdMinAge", "3600")];
    let mut user = user_under(&server, "careful", &attributes, &dn);
    assert_eq!(change_own(&mut user, None, "new-password"), (50, Some(4)));
    assert_eq!(
        change_own(&mut user, Some(PERSON_PASSWORD), "new-password"),
        (0, None)
    );
    assert_eq!(
        change_own(&mut user, Some("new-password"), "newer-password"),
        (19, Some(7))
    );
    // A modify that deletes the old value and adds the new one proves the old password too;
    // the age rule still holds it back.
    let modified = user
        .modify(
            &dn,
            vec![
                Mod::Delete("userPassword", set(&["new-password"])),
                Mod::Add("userPassword", set(&["newer-password"])),
            ],
        )
        .expect("modify");
    assert_eq!(modified.rc, 19, "{modified:?}");
}

#[test]
fn an_administrator_reset_must_be_changed_by_the_owner() {
    let server = lockout_server();
    let dn = person_dn(16);
    drop(user_under(
        &server,
        "reset",
        &[("pwdMustChange", "TRUE")],
        &dn,
    ));
    admin_reset(&server, &dn, "temporary");
    assert_eq!(values(&read(&server, &dn), "pwdReset"), vec!["TRUE"]);
    // Bound, told changeAfterReset (2).
    let bound = policy_bind(&server, &dn, "temporary");
    assert_eq!(bound.rc, 0, "{bound:?}");
    assert_eq!(policy_response(&bound).and_then(|r| r.error), Some(2));
    // The owner's own change clears the flag.
    let mut user = connect(&server);
    user.simple_bind(&dn, "temporary")
        .expect("bind")
        .success()
        .expect("user binds");
    assert_eq!(change_own(&mut user, None, "chosen-by-me"), (0, None));
    assert!(values(&read(&server, &dn), "pwdReset").is_empty());
    let after = policy_bind(&server, &dn, "chosen-by-me");
    assert_eq!(after.rc, 0);
    // Nothing to say: an empty response control, as slapd answers.
    assert_eq!(
        policy_response(&after),
        Some(PolicyResponse::default()),
        "{after:?}"
    );
}

/// slapd's ppolicy checks pwdMinAge only while pwdReset is not TRUE: the owner of a password an
/// administrator reset changes it at once (before: 19 passwordTooYoung, the reset having set
/// pwdChangedTime, so under pwdMustChange the account could do nothing for pwdMinAge).
#[test]
fn a_reset_password_is_changed_at_once_whatever_the_minimum_age() {
    let server = lockout_server();
    let dn = person_dn(18);
    let attributes = [("pwdMustChange", "TRUE"), ("pwdMinAge", "3600")];
    drop(user_under(&server, "reset-young", &attributes, &dn));
    admin_reset(&server, &dn, "temporary");
    let mut user = connect(&server);
    user.simple_bind(&dn, "temporary")
        .expect("bind")
        .success()
        .expect("user binds");
    assert_eq!(change_own(&mut user, None, "chosen-by-me"), (0, None));
    // The reset is over: the age rule holds the next change back.
    assert_eq!(change_own(&mut user, None, "chosen-again"), (19, Some(7)));
}

/// Two changes of one's own password queued in one LDAP transaction: the check before the
/// writer reads the entry as committed, so both passed it and both committed (pwdInHistory
/// flushed within one pwdMinAge). The writer judges the second against the first's
/// pwdChangedTime: 19, and neither commits.
#[test]
fn password_changes_in_one_transaction_meet_the_minimum_age_together() {
    use common::transaction::{end, in_transaction, start};
    let server = lockout_server();
    let dn = person_dn(19);
    let attributes = [("pwdMinAge", "3600"), ("pwdInHistory", "1")];
    let mut user = user_under(&server, "patient", &attributes, &dn);
    let queue = |user: &mut LdapConn, id: &[u8], password: &str| {
        let queued = user
            .with_controls(in_transaction(id))
            .modify(&dn, vec![Mod::Replace("userPassword", set(&[password]))])
            .expect("modify sent");
        assert_eq!(queued.rc, 0, "queued: {queued:?}");
    };
    let id = start(&mut user);
    queue(&mut user, &id, "second-password");
    queue(&mut user, &id, "third-password");
    let (code, failed) = end(&mut user, &id, true);
    assert_eq!(code, 19, "the second change is too young");
    assert!(failed.is_some(), "the response names the failed update");
    assert_eq!(policy_bind(&server, &dn, PERSON_PASSWORD).rc, 0);
    // One change alone commits.
    let id = start(&mut user);
    queue(&mut user, &id, "second-password");
    assert_eq!(end(&mut user, &id, true).0, 0);
    assert_eq!(policy_bind(&server, &dn, "second-password").rc, 0);
}

#[test]
fn new_passwords_must_differ_from_the_current_and_the_remembered_ones() {
    let server = lockout_server();
    let dn = person_dn(17);
    let mut user = user_under(&server, "history", &[("pwdInHistory", "2")], &dn);
    assert_eq!(change_own(&mut user, None, "second"), (0, None));
    assert_eq!(change_own(&mut user, None, "third"), (0, None));
    assert_eq!(values(&read(&server, &dn), "pwdHistory").len(), 2);
    // The current password (19, passwordInHistory 8), then a remembered one.
    assert_eq!(change_own(&mut user, None, "third"), (19, Some(8)));
    assert_eq!(change_own(&mut user, None, PERSON_PASSWORD), (19, Some(8)));
    assert_eq!(change_own(&mut user, None, "second"), (19, Some(8)));
    // Two are remembered: after one more change the first falls out of the history.
    assert_eq!(change_own(&mut user, None, "fourth"), (0, None));
    assert_eq!(values(&read(&server, &dn), "pwdHistory").len(), 2);
    assert_eq!(change_own(&mut user, None, PERSON_PASSWORD), (0, None));
    assert_eq!(policy_bind(&server, &dn, PERSON_PASSWORD).rc, 0);
}

fn policy_control() -> RawControl {
    RawControl {
        ctype: POLICY_OID.to_string(),
        crit: false,
        val: None,
    }
}

/// slapd's restriction after an administrator's reset: the connection that bound with the reset
/// password may read the root DSE, ask who it is and change the password; every other
/// operation answers insufficientAccess (50), with the changeAfterReset control (2) on add and
/// modify. The change lifts the restriction on that connection.
#[test]
fn a_connection_bound_with_a_reset_password_may_only_change_it() {
    let server = lockout_server();
    let dn = person_dn(18);
    drop(user_under(
        &server,
        "restrict",
        &[("pwdMustChange", "TRUE")],
        &dn,
    ));
    admin_reset(&server, &dn, "temporary");
    let mut user = connect(&server);
    let bound = user
        .with_controls(policy_control())
        .simple_bind(&dn, "temporary")
        .expect("bind");
    assert_eq!(
        (bound.rc, policy_response(&bound).and_then(|r| r.error)),
        (0, Some(2))
    );
    let refused = |result: LdapResult, control: Option<u64>| {
        assert_eq!(result.rc, 50, "{result:?}");
        assert_eq!(policy_response(&result).and_then(|r| r.error), control);
    };
    let search = user
        .with_controls(policy_control())
        .search(&dn, Scope::Base, "(objectClass=*)", vec!["cn"])
        .expect("search");
    refused(search.1, None);
    let compare = user.compare(&dn, "cn", "x").expect("compare");
    refused(compare.0, None);
    let modify = user
        .with_controls(policy_control())
        .modify(&dn, vec![Mod::Replace("description", set(&["x"]))])
        .expect("modify");
    refused(modify, Some(2));
    let add = user
        .with_controls(policy_control())
        .add(
            "cn=new,dc=example,dc=com",
            vec![
                ("objectClass", set(&["organizationalRole"])),
                ("cn", set(&["new"])),
            ],
        )
        .expect("add");
    refused(add, Some(2));
    refused(user.delete(&person_dn(19)).expect("delete"), None);
    let rename = user
        .modifydn(&person_dn(19), "uid=renamed", true, None)
        .expect("modrdn");
    refused(rename, None);
    // Allowed: the root DSE, Who am I?, then the change itself.
    let root_dse = user
        .search("", Scope::Base, "(objectClass=*)", vec!["namingContexts"])
        .expect("search")
        .success();
    assert!(root_dse.is_ok(), "{root_dse:?}");
    let whoami = user.extended(ldap3::exop::WhoAmI).expect("whoami");
    assert_eq!(whoami.1.rc, 0);
    assert!(whoami.0.val.is_some());
    assert_eq!(change_own(&mut user, None, "chosen-by-me"), (0, None));
    // Lifted on this connection.
    let search = user
        .search(&dn, Scope::Base, "(objectClass=*)", vec!["cn"])
        .expect("search")
        .success();
    assert!(search.is_ok(), "{search:?}");
}

/// A later bind as someone else, or a failed one, leaves no restriction behind; a modify of the
/// password alone is allowed and lifts it too.
#[test]
fn the_restriction_ends_with_a_new_bind_or_a_password_modify() {
    let server = lockout_server();
    let dn = person_dn(20);
    drop(user_under(
        &server,
        "rebind",
        &[("pwdMustChange", "TRUE")],
        &dn,
    ));
    admin_reset(&server, &dn, "temporary");
    let mut user = connect(&server);
    user.simple_bind(&dn, "temporary")
        .expect("bind")
        .success()
        .expect("bound");
    let searched = |user: &mut LdapConn| {
        user.search(&dn, Scope::Base, "(objectClass=*)", vec!["cn"])
            .expect("search")
            .1
            .rc
    };
    assert_eq!(searched(&mut user), 50);
    user.simple_bind(&person_dn(21), PERSON_PASSWORD)
        .expect("bind")
        .success()
        .expect("another identity binds");
    assert_eq!(searched(&mut user), 0);
    user.simple_bind(&dn, "temporary")
        .expect("bind")
        .success()
        .expect("bound again");
    assert_eq!(searched(&mut user), 50);
    let changed = user
        .modify(&dn, vec![Mod::Replace("userPassword", set(&["my-own"]))])
        .expect("modify");
    assert_eq!(changed.rc, 0, "{changed:?}");
    assert_eq!(searched(&mut user), 0);
}

/// slapd's ppolicy checks an added entry's password too: a delegated administrator (not the
/// rootdn) adding a person under a policy with pwdCheckQuality gets 19 for a short password,
/// with passwordTooShort in the control; lmdir answered 0. Someone who may not add there still
/// gets the writer's refusal, never the policy's verdict.
#[test]
fn an_added_password_meets_the_new_entrys_policy() {
    use lmdir_config::{AccessLevel, AccessTarget, Who};
    let people = "ou=People,dc=example,dc=com";
    let admin = person_dn(0);
    let rules = vec![
        common::rule_by(
            common::attributes(&["userPassword"]),
            &[
                (Who::Dn(admin.clone()), AccessLevel::Write),
                (Who::SelfEntry, AccessLevel::Write),
                (Who::Anyone, AccessLevel::Auth),
            ],
        ),
        common::grant(
            AccessTarget {
                subtree: Some(people.to_string()),
                ..AccessTarget::default()
            },
            Who::Dn(admin.clone()),
            AccessLevel::Write,
        ),
        common::grant(AccessTarget::default(), Who::Anyone, AccessLevel::Read),
    ];
    let server = TestServer::start_populated(PEOPLE, rules, |settings| {
        settings.password_policy_default = DEFAULT_POLICY.to_string();
    });
    add_policy(
        &server,
        DEFAULT_POLICY,
        &[("pwdMinLength", "8"), ("pwdCheckQuality", "1")],
    );
    fn person<'a>(uid: &'a str, password: &'a str) -> Vec<(&'a str, HashSet<&'a str>)> {
        vec![
            ("objectClass", set(&["inetOrgPerson"])),
            ("uid", set(&[uid])),
            ("cn", set(&[uid])),
            ("sn", set(&[uid])),
            ("userPassword", set(&[password])),
        ]
    }
    let dn = |uid: &str| format!("uid={uid},{people}");
    let mut delegated = connect(&server);
    delegated
        .simple_bind(&admin, PERSON_PASSWORD)
        .expect("bind")
        .success()
        .expect("the delegated administrator binds");
    let control = RawControl {
        ctype: POLICY_OID.to_string(),
        crit: false,
        val: None,
    };
    let short = delegated
        .with_controls(control)
        .add(&dn("weak"), person("weak", "short"))
        .expect("add");
    assert_eq!(short.rc, 19, "{short:?}");
    let too_short = PolicyResponse {
        warning: None,
        error: Some(6),
    };
    assert_eq!(policy_response(&short), Some(too_short));
    let good = delegated
        .add(&dn("strong"), person("strong", "long-enough-password"))
        .expect("add");
    assert_eq!(good.rc, 0, "{good:?}");
    // Another user may not add there (the subtree's rule names only the administrator, so
    // ou=People is hidden from it): the writer answers as without a password, never 19.
    let mut other = connect(&server);
    other
        .simple_bind(&person_dn(1), PERSON_PASSWORD)
        .expect("bind")
        .success()
        .expect("binds");
    let refused = other
        .add(&dn("sneaky"), person("sneaky", "short"))
        .expect("add");
    assert_eq!(refused.rc, 32, "{refused:?}");
    // The rootdn is a password administrator: not held to the quality rules (as slapd).
    let by_root = root(&server)
        .add(&dn("by-root"), person("by-root", "tiny"))
        .expect("add");
    assert_eq!(by_root.rc, 0, "{by_root:?}");
}
