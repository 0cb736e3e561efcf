//! Proxied authorization (RFC 4370) over the wire: authz_policy, every authzTo / authzFrom
//! form, refusals (authorizationDenied 123), who may write the rules, and that a proxied
//! operation gets exactly the target's rights (reads, writes, whoami).

use crate::common;

use common::{
    attributes, bind, grant, person_dn, root, rule_by, TestServer, PERSON_PASSWORD, ROOT_DN,
};
use ldap3::controls::{ProxyAuth, RawControl};
use ldap3::exop::{WhoAmI, WhoAmIResp};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use lmdir_config::{AccessClause, AccessLevel, AccessRule, AccessTarget, AuthzPolicy, Who};
use std::collections::HashSet;

const DENIED: u32 = 123;
const PEOPLE: usize = 20;

fn server(policy: AuthzPolicy, rules: Vec<AccessRule>) -> TestServer {
    TestServer::start_populated(PEOPLE, rules, |settings| settings.authz_policy = policy)
}

fn user(server: &TestServer, index: usize) -> LdapConn {
    bind(server, &person_dn(index), PERSON_PASSWORD)
}

/// Who Am I with the proxied authorization control for `authz_id`: the authzId or the code.
fn whoami_as(connection: &mut LdapConn, authz_id: &str) -> Result<String, u32> {
    let control = ProxyAuth {
        authzid: authz_id.to_string(),
    };
    let ldap3::result::ExopResult(exop, result) = connection
        .with_controls(control)
        .extended(WhoAmI)
        .expect("whoami sent");
    if result.rc != 0 {
        return Err(result.rc);
    }
    Ok(exop.parse::<WhoAmIResp>().authzid)
}

/// Replaces `attribute` of the entry at `dn` with `values`, as the rootdn.
fn set_rules(server: &TestServer, dn: &str, attribute: &str, values: &[&str]) {
    let values: HashSet<&str> = values.iter().copied().collect();
    root(server)
        .modify(dn, vec![Mod::Replace(attribute, values)])
        .expect("modify sent")
        .success()
        .unwrap_or_else(|error| panic!("setting {attribute} of {dn}: {error}"));
}

#[test]
fn policy_none_lets_only_the_rootdn_oneself_and_anonymous_through() {
    let server = server(AuthzPolicy::None, Vec::new());
    set_rules(
        &server,
        &person_dn(1),
        "authzTo",
        &["dn.subtree:dc=example,dc=com"],
    );
    let mut u1 = user(&server, 1);
    let target = format!("dn:{}", person_dn(2));
    assert_eq!(
        whoami_as(&mut u1, &target),
        Err(DENIED),
        "authzTo needs the to policy"
    );
    assert_eq!(
        whoami_as(&mut u1, &format!("dn:{}", person_dn(1))),
        Ok(format!("dn:{}", person_dn(1))),
        "oneself"
    );
    assert_eq!(whoami_as(&mut u1, ""), Ok(String::new()), "anonymous");
    assert_eq!(whoami_as(&mut root(&server), &target), Ok(target.clone()));
    // The rootdn acts as DNs of its database only, existing or not (as slapd).
    let absent = "dn:uid=nobody,ou=people,dc=example,dc=com";
    assert_eq!(
        whoami_as(&mut root(&server), absent),
        Ok(absent.to_string())
    );
    assert_eq!(
        whoami_as(&mut root(&server), "dn:cn=x,dc=other"),
        Err(DENIED)
    );
    // `dn:` with nothing after it is anonymous (RFC 4370 §3, as slapd); with only spaces,
    // or an empty `u:`, it names nobody (slapd: "authzId mapping failed").
    for anonymous in ["dn:", "DN:"] {
        assert_eq!(
            whoami_as(&mut u1, anonymous),
            Ok(String::new()),
            "{anonymous}"
        );
    }
    for bad in [
        "x:foo",
        "dn:not a dn",
        "dn: ",
        "dn:  ",
        "u:",
        "u:nobody",
        "uid=u0000002",
    ] {
        assert_eq!(whoami_as(&mut u1, bad), Err(DENIED), "{bad}");
    }
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    for asked in [target.as_str(), "dn:", ""] {
        assert_eq!(
            whoami_as(&mut anonymous, asked),
            Err(DENIED),
            "anonymous may not proxy, not even as anonymous: {asked:?}"
        );
    }
    // Without the control nothing changed: the connection is still u1.
    let ldap3::result::ExopResult(exop, _) = u1.extended(WhoAmI).expect("whoami");
    assert_eq!(
        exop.parse::<WhoAmIResp>().authzid,
        format!("dn:{}", person_dn(1))
    );
}

#[test]
fn malformed_controls_are_protocol_errors() {
    let server = server(AuthzPolicy::To, Vec::new());
    let mut u1 = user(&server, 1);
    let no_value = RawControl {
        ctype: "2.16.840.1.113730.3.4.18".to_string(),
        crit: true,
        val: None,
    };
    let result = u1
        .with_controls(no_value.clone())
        .extended(WhoAmI)
        .expect("sent");
    assert_eq!(result.1.rc, 2);
    let result = u1
        .with_controls(vec![no_value.clone(), no_value])
        .extended(WhoAmI)
        .expect("sent");
    assert_eq!(result.1.rc, 2);
    let long = format!("dn:cn={},dc=example,dc=com", "x".repeat(9000));
    assert_eq!(whoami_as(&mut u1, &long), Err(DENIED));
}

#[test]
fn each_policy_combines_authz_to_and_from_as_slapd() {
    // u1 may act as u2 by its authzTo, as u3 by u3's authzFrom, and as u4 by both.
    let expectations = [
        (AuthzPolicy::None, [false, false, false]),
        (AuthzPolicy::To, [true, false, true]),
        (AuthzPolicy::From, [false, true, true]),
        (AuthzPolicy::Any, [true, true, true]),
        (AuthzPolicy::All, [false, false, true]),
    ];
    for (policy, allowed) in expectations {
        let server = server(policy, Vec::new());
        let u1_rule = format!("dn:{}", person_dn(1));
        set_rules(
            &server,
            &person_dn(1),
            "authzTo",
            &[
                &format!("dn:{}", person_dn(2)),
                &format!("dn:{}", person_dn(4)),
            ],
        );
        set_rules(&server, &person_dn(3), "authzFrom", &[&u1_rule]);
        set_rules(&server, &person_dn(4), "authzFrom", &[&u1_rule]);
        let mut u1 = user(&server, 1);
        for (target, allowed) in [2, 3, 4].into_iter().zip(allowed) {
            let authz_id = format!("dn:{}", person_dn(target));
            let expected = if allowed {
                Ok(authz_id.clone())
            } else {
                Err(DENIED)
            };
            assert_eq!(
                whoami_as(&mut u1, &authz_id),
                expected,
                "{policy:?} u{target}"
            );
        }
    }
}

const PEERCRED_ROOT: &str = "gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth";

#[test]
fn every_rule_form_names_what_slapd_names() {
    let server = server(AuthzPolicy::To, Vec::new());
    let people = "ou=people,dc=example,dc=com";
    let group = "cn=group0000,ou=groups,dc=example,dc=com";
    let (u2, u3, u4) = (person_dn(2), person_dn(3), person_dn(4));
    let cases: Vec<(String, Vec<(&str, bool)>)> = vec![
        (format!("dn:{u2}"), vec![(&u2, true), (&u3, false)]),
        (
            "dn.exact: UID=u0000002, ou=People,dc=example,dc=com".to_string(),
            vec![(&u2, true), (&u3, false)],
        ),
        (
            format!("dn.subtree:{people}"),
            vec![
                (&u2, true),
                (people, true),
                (group, false),
                (ROOT_DN, false),
            ],
        ),
        (
            format!("dn.children:{people}"),
            vec![(&u2, true), (people, false)],
        ),
        (
            "dn.onelevel:dc=example,dc=com".to_string(),
            vec![(people, true), (&u2, false)],
        ),
        (
            "dn.regex:^uid=u000000[23],ou=people".to_string(),
            vec![(&u2, true), (&u3, true), (&u4, false)],
        ),
        (
            "dn:*".to_string(),
            vec![(&u2, true), (group, true), (ROOT_DN, false)],
        ),
        ("u:u0000002".to_string(), vec![(&u2, true), (&u3, false)]),
        // As slapcat exports them (X-ORDERED 'VALUES'): the {n} index is no part of the rule.
        (
            format!("{{0}}dn.subtree:{people}"),
            vec![(&u2, true), (group, false)],
        ),
        (format!("{{12}}dn:{u3}"), vec![(&u3, true), (&u2, false)]),
        (
            format!("ldap:///{people}??sub?(mail=u0000002@example.com)"),
            vec![(&u2, true), (&u3, false)],
        ),
        (
            format!("ldap:///{people}??one?(objectClass=inetOrgPerson)"),
            vec![(&u3, true), (group, false)],
        ),
        // Not implemented: grants nothing rather than something unintended.
        (
            format!("group/groupOfNames/member:{group}"),
            vec![(&u2, false)],
        ),
        (u2.clone(), vec![(&u2, true), (&u3, false)]),
        // The rootdn only by a rule naming it exactly.
        (
            "dn.subtree:dc=example,dc=com".to_string(),
            vec![(&u2, true), (ROOT_DN, false)],
        ),
        (format!("dn:{ROOT_DN}"), vec![(ROOT_DN, true), (&u2, false)]),
        // Nor a peercred identity (only the kernel attests it over ldapi; migrated rules may
        // grant it everything): `dn:*`, a subtree or a regex never reach it.
        (
            "dn:*".to_string(),
            vec![(PEERCRED_ROOT, false), (&u2, true)],
        ),
        (
            "dn.subtree:cn=auth".to_string(),
            vec![(PEERCRED_ROOT, false)],
        ),
        ("dn.regex:.*".to_string(), vec![(PEERCRED_ROOT, false)]),
        (format!("dn:{PEERCRED_ROOT}"), vec![(PEERCRED_ROOT, true)]),
    ];
    let mut u1 = user(&server, 1);
    for (rule, targets) in &cases {
        set_rules(&server, &person_dn(1), "authzTo", &[rule]);
        for (target, allowed) in targets {
            let authz_id = format!("dn:{target}");
            let answer = whoami_as(&mut u1, &authz_id);
            assert_eq!(
                answer.is_ok(),
                *allowed,
                "rule {rule}, target {target}: {answer:?}"
            );
            if *allowed {
                assert_eq!(answer, Ok(authz_id));
            } else {
                assert_eq!(answer, Err(DENIED));
            }
        }
    }
    // A u: authzId names the one entry with that uid.
    set_rules(&server, &person_dn(1), "authzTo", &[&format!("dn:{u2}")]);
    assert_eq!(whoami_as(&mut u1, "u:u0000002"), Ok(format!("dn:{u2}")));
    assert_eq!(whoami_as(&mut u1, "u:u0000003"), Err(DENIED));
}

#[test]
fn users_cannot_grant_themselves_authz_rules_under_the_default_access() {
    let server = server(AuthzPolicy::Any, Vec::new());
    let mut u1 = user(&server, 1);
    for (dn, attribute) in [(person_dn(1), "authzTo"), (person_dn(2), "authzFrom")] {
        let rule = HashSet::from(["dn:*"]);
        let result = u1
            .modify(&dn, vec![Mod::Add(attribute, rule)])
            .expect("modify sent");
        assert_eq!(result.rc, 50, "{attribute} on {dn}: {result:?}");
    }
    assert_eq!(
        whoami_as(&mut u1, &format!("dn:{}", person_dn(2))),
        Err(DENIED)
    );
}

#[test]
fn an_entry_never_writes_its_own_authz_to_even_with_self_write() {
    // A common rule: every user writes its own entry (userPassword included).
    let rules = vec![AccessRule {
        to: AccessTarget::default(),
        by: vec![
            AccessClause {
                who: Who::SelfEntry,
                access: AccessLevel::Write,
            },
            AccessClause {
                who: Who::Anyone,
                access: AccessLevel::Read,
            },
        ],
    }];
    let server = server(AuthzPolicy::To, rules);
    let mut u1 = user(&server, 1);
    let result = u1
        .modify(
            &person_dn(1),
            vec![Mod::Add("authzTo", HashSet::from(["dn.regex:.*"]))],
        )
        .expect("modify sent");
    assert_eq!(
        result.rc, 50,
        "a user granted itself every identity: {result:?}"
    );
    assert_eq!(
        whoami_as(&mut u1, &format!("dn:{}", person_dn(2))),
        Err(DENIED)
    );
    // authzFrom on its own entry grants others, not itself: still its own to write.
    let result = u1
        .modify(
            &person_dn(1),
            vec![Mod::Add(
                "authzFrom",
                HashSet::from([person_dn(3).as_str()]),
            )],
        )
        .expect("modify sent");
    assert_eq!(result.rc, 0, "{result:?}");
}

fn mail_of(connection: &mut LdapConn, proxied: Option<&str>, dn: &str) -> Result<Vec<String>, u32> {
    if let Some(authz_id) = proxied {
        connection.with_controls(ProxyAuth {
            authzid: authz_id.to_string(),
        });
    }
    let result = connection
        .search(dn, Scope::Base, "(objectClass=*)", vec!["mail"])
        .expect("search sent");
    if result.1.rc != 0 {
        return Err(result.1.rc);
    }
    let entry = SearchEntry::construct(result.0.into_iter().next().expect("one entry"));
    Ok(entry.attrs.get("mail").cloned().unwrap_or_default())
}

#[test]
fn a_proxied_read_has_the_targets_rights_and_only_with_a_rule() {
    let rules = vec![
        grant(
            attributes(&["userPassword"]),
            Who::Anyone,
            AccessLevel::Auth,
        ),
        grant(
            attributes(&["mail"]),
            Who::Dn(person_dn(2)),
            AccessLevel::Read,
        ),
        grant(attributes(&[]), Who::Anyone, AccessLevel::Read),
    ];
    let server = server(AuthzPolicy::To, rules);
    set_rules(
        &server,
        &person_dn(1),
        "authzTo",
        &[&format!("dn:{}", person_dn(2))],
    );
    let target = person_dn(5);
    let as_u2 = format!("dn:{}", person_dn(2));
    let mut u1 = user(&server, 1);
    assert_eq!(mail_of(&mut u1, None, &target), Ok(Vec::new()));
    assert_eq!(
        mail_of(&mut u1, Some(&as_u2), &target),
        Ok(vec!["u0000005@example.com".to_string()])
    );
    let mut u3 = user(&server, 3);
    assert_eq!(mail_of(&mut u3, Some(&as_u2), &target), Err(DENIED));
    assert_eq!(mail_of(&mut u3, None, &target), Ok(Vec::new()));
}

/// The empty-DN authzId `dn:` (RFC 4370 §3) runs the operation with anonymous rights, under
/// every policy and for a user with no rule: what anonymous may not read stays unread, and
/// what it may not write stays unwritten.
#[test]
fn an_empty_dn_authz_id_runs_with_anonymous_rights() {
    let rules = vec![
        grant(
            attributes(&["userPassword"]),
            Who::Anyone,
            AccessLevel::Auth,
        ),
        rule_by(
            attributes(&["mail"]),
            &[
                (Who::Users, AccessLevel::Read),
                (Who::Anyone, AccessLevel::None),
            ],
        ),
        rule_by(
            attributes(&[]),
            &[
                (Who::Users, AccessLevel::Write),
                (Who::Anyone, AccessLevel::Read),
            ],
        ),
    ];
    for policy in [AuthzPolicy::None, AuthzPolicy::All] {
        let server = server(policy, rules.clone());
        let target = person_dn(5);
        let mut u1 = user(&server, 1);
        let mail = vec!["u0000005@example.com".to_string()];
        assert_eq!(mail_of(&mut u1, None, &target), Ok(mail.clone()));
        for anonymous in ["dn:", "", "Dn:"] {
            assert_eq!(
                mail_of(&mut u1, Some(anonymous), &target),
                Ok(Vec::new()),
                "{policy:?} {anonymous:?}: read with anonymous rights"
            );
        }
        let change = || vec![Mod::Replace("description", HashSet::from(["proxied"]))];
        let proxied = u1
            .with_controls(ProxyAuth {
                authzid: "dn:".to_string(),
            })
            .modify(&target, change())
            .expect("sent");
        assert_eq!(proxied.rc, 50, "{policy:?}: anonymous may not write");
        let plain = u1.modify(&target, change()).expect("sent");
        assert_eq!(plain.rc, 0, "{policy:?}: u1 itself may write: {plain:?}");
    }
}

#[test]
fn a_proxied_write_runs_and_is_recorded_as_the_target() {
    let server = server(AuthzPolicy::To, Vec::new());
    set_rules(
        &server,
        &person_dn(1),
        "authzTo",
        &[&format!("dn:{ROOT_DN}")],
    );
    let mut u1 = user(&server, 1);
    let change = || vec![Mod::Replace("description", HashSet::from(["proxied"]))];
    let plain = u1.modify(&person_dn(5), change()).expect("sent");
    assert_eq!(plain.rc, 50, "u1 itself may not write");
    let proxied = u1
        .with_controls(ProxyAuth {
            authzid: format!("dn:{ROOT_DN}"),
        })
        .modify(&person_dn(5), change())
        .expect("sent");
    assert_eq!(proxied.rc, 0, "{proxied:?}");
    let (entries, _) = root(&server)
        .search(
            &person_dn(5),
            Scope::Base,
            "(objectClass=*)",
            vec!["modifiersName"],
        )
        .expect("search")
        .success()
        .expect("read back");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    assert_eq!(entry.attrs["modifiersName"], vec![ROOT_DN.to_string()]);
}

#[test]
fn ldap_utils_proxy_with_authzid() {
    let server = server(AuthzPolicy::To, Vec::new());
    set_rules(
        &server,
        &person_dn(1),
        "authzTo",
        &[&format!("dn:{}", person_dn(2))],
    );
    let url = server.ldap_url();
    let u1 = person_dn(1);
    let run = |program: &str, extra: &[&str]| {
        let mut arguments = vec!["-x", "-H", &url, "-D", &u1, "-w", PERSON_PASSWORD];
        arguments.extend_from_slice(extra);
        common::ldap_tool(program, &arguments)
    };
    let allowed = format!("!authzid=dn:{}", person_dn(2));
    let Some(output) = run("ldapwhoami", &["-e", &allowed]) else {
        return;
    };
    assert!(output.status.success(), "{}", common::text(&output.stderr));
    assert_eq!(
        common::text(&output.stdout).trim(),
        format!("dn:{}", person_dn(2))
    );
    let refused = format!("!authzid=dn:{}", person_dn(3));
    let output = run("ldapwhoami", &["-e", &refused]).expect("ran before");
    assert!(!output.status.success());
    assert!(
        common::text(&output.stdout).contains("Proxied Authorization Denied (123)"),
        "{output:?}"
    );
    let output = run(
        "ldapsearch",
        &["-e", &allowed, "-b", &person_dn(7), "-s", "base", "uid"],
    )
    .expect("ran before");
    assert!(output.status.success(), "{}", common::text(&output.stderr));
    assert!(common::text(&output.stdout).contains("uid: u0000007"));
}

/// `ldapwhoami -Y EXTERNAL -X authz_id` over ldapi: the identity bound, or the result code.
fn external_whoami(server: &TestServer, authz_id: &str) -> Result<String, i32> {
    let ldapi = server.ldapi_url();
    let output = common::ldap_tool(
        "ldapwhoami",
        &["-Y", "EXTERNAL", "-H", &ldapi, "-Q", "-X", authz_id],
    )
    .expect("ldapwhoami (ldap-utils) drives SASL EXTERNAL with an authzId");
    if output.status.success() {
        Ok(common::text(&output.stdout).trim().to_string())
    } else {
        Err(output.status.code().unwrap_or(-1))
    }
}
#[test]
fn sasl_external_grants_only_an_authzid_proxying_would() {
    let server = server(AuthzPolicy::None, Vec::new());
    let person = person_dn(3);
    let insufficient = Err(50);
    // Outside the database nobody may be assumed, not even by the rootdn (slapd: 50).
    assert_eq!(
        external_whoami(&server, "dn:cn=someone,dc=elsewhere,dc=org"),
        insufficient
    );
    assert_eq!(
        external_whoami(&server, "u:nobody-has-this-uid"),
        insufficient
    );
    // `dn:` is the anonymous identity, which anyone may take (slapd: "anonymous"); spaces
    // alone name nobody (slapd: 50).
    assert_eq!(external_whoami(&server, "dn:"), Ok("anonymous".to_string()));
    assert_eq!(external_whoami(&server, "dn: "), insufficient);
    if common::own_uid() == "0" {
        // root is the rootdn over ldapi: it may act as any DN of its database, and as itself.
        assert_eq!(
            external_whoami(&server, &format!("dn:{person}")),
            Ok(format!("dn:{person}"))
        );
        assert_eq!(
            external_whoami(&server, "u:u0000005"),
            Ok(format!("dn:{}", person_dn(5)))
        );
        assert_eq!(
            external_whoami(&server, &format!("dn:{ROOT_DN}")),
            Ok(format!("dn:{ROOT_DN}"))
        );
    } else {
        // Any other local user is its peercred identity: no rule lets it become anyone.
        assert_eq!(
            external_whoami(&server, &format!("dn:{ROOT_DN}")),
            insufficient
        );
        assert_eq!(
            external_whoami(&server, &format!("dn:{person}")),
            insufficient
        );
    }
}
