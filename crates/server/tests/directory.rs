//! Operations against a server with a real store: every operation, paged results, limits,
//! access control and group commit, through the ldap3 crate and the ldap-utils binaries.

use crate::common;

use common::{ldap_tool, root, text, TestServer, ROOT_DN, ROOT_PASSWORD};
use ldap3::controls::{Assertion, PagedResults};
use ldap3::exop::{PasswordModify, PasswordModifyResp, WhoAmI, WhoAmIResp};
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use std::collections::HashSet;

const SUFFIX: &str = "dc=example,dc=com";
const ALICE: &str = "uid=alice,ou=People,dc=example,dc=com";

fn set<'a>(values: &[&'a str]) -> HashSet<&'a str> {
    values.iter().copied().collect()
}

/// An entry's attributes as ldap3's add takes them.
type Attributes<'a> = Vec<(&'a str, HashSet<&'a str>)>;

/// Suffix, ou=People, ou=Groups, alice (password "alicepw") and bob, group admins with alice.
fn populate(connection: &mut LdapConn) {
    let entries: Vec<(String, Attributes)> = vec![
        (
            SUFFIX.to_string(),
            vec![
                ("objectClass", set(&["top", "dcObject", "organization"])),
                ("dc", set(&["example"])),
                ("o", set(&["Example"])),
            ],
        ),
        (
            "ou=People,dc=example,dc=com".to_string(),
            vec![
                ("objectClass", set(&["organizationalUnit"])),
                ("ou", set(&["People"])),
            ],
        ),
        (
            "ou=Groups,dc=example,dc=com".to_string(),
            vec![
                ("objectClass", set(&["organizationalUnit"])),
                ("ou", set(&["Groups"])),
            ],
        ),
        (
            ALICE.to_string(),
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&["alice"])),
                ("cn", set(&["Alice Liddell"])),
                ("sn", set(&["Liddell"])),
                ("userPassword", set(&["alicepw"])),
            ],
        ),
        (
            "uid=bob,ou=People,dc=example,dc=com".to_string(),
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&["bob"])),
                ("cn", set(&["Bob Builder"])),
                ("sn", set(&["Builder"])),
                ("userPassword", set(&["bobpw"])),
            ],
        ),
        (
            "cn=admins,ou=Groups,dc=example,dc=com".to_string(),
            vec![
                ("objectClass", set(&["groupOfNames"])),
                ("cn", set(&["admins"])),
                ("member", set(&[ALICE])),
            ],
        ),
    ];
    for (dn, attributes) in entries {
        connection
            .add(&dn, attributes)
            .expect("add")
            .success()
            .unwrap_or_else(|error| panic!("adding {dn}: {error}"));
    }
}

fn search(
    connection: &mut LdapConn,
    base: &str,
    scope: Scope,
    filter: &str,
    attributes: &[&str],
) -> (Vec<SearchEntry>, u32) {
    let result = connection
        .search(base, scope, filter, attributes.to_vec())
        .expect("search");
    (
        result.0.into_iter().map(SearchEntry::construct).collect(),
        result.1.rc,
    )
}

#[test]
fn search_scopes_filters_and_no_such_object() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    populate(&mut root);

    let (people, rc) = search(
        &mut root,
        SUFFIX,
        Scope::Subtree,
        "(objectClass=person)",
        &["uid"],
    );
    assert_eq!(rc, 0);
    let uids: HashSet<&str> = people
        .iter()
        .map(|entry| entry.attrs["uid"][0].as_str())
        .collect();
    assert_eq!(uids, set(&["alice", "bob"]));

    let (one, _) = search(
        &mut root,
        SUFFIX,
        Scope::OneLevel,
        "(objectClass=*)",
        &["1.1"],
    );
    assert_eq!(one.len(), 2, "ou=People and ou=Groups");
    assert!(
        one.iter().all(|entry| entry.attrs.is_empty()),
        "1.1 returns no attributes"
    );

    let (base, _) = search(
        &mut root,
        ALICE,
        Scope::Base,
        "(objectClass=*)",
        &["cn", "+"],
    );
    assert_eq!(base.len(), 1);
    assert_eq!(base[0].attrs["cn"], vec!["Alice Liddell"]);
    assert!(
        base[0].attrs.contains_key("entryUUID"),
        "{:?}",
        base[0].attrs
    );
    assert_eq!(base[0].attrs["hasSubordinates"], vec!["FALSE"]);
    assert_eq!(
        base[0].attrs["memberOf"],
        vec!["cn=admins,ou=Groups,dc=example,dc=com"]
    );

    let (substring, _) = search(&mut root, SUFFIX, Scope::Subtree, "(cn=ali*)", &["uid"]);
    assert_eq!(substring.len(), 1);

    let (members, _) = search(
        &mut root,
        SUFFIX,
        Scope::Subtree,
        "(memberOf=cn=admins,ou=Groups,dc=example,dc=com)",
        &["uid"],
    );
    assert_eq!(members.len(), 1, "memberOf is filterable");
    assert_eq!(members[0].attrs["uid"], vec!["alice"]);

    let (typed, _) = root
        .search(ALICE, Scope::Base, "(objectClass=*)", vec!["sn"])
        .map(|result| {
            (
                result
                    .0
                    .into_iter()
                    .map(SearchEntry::construct)
                    .collect::<Vec<_>>(),
                result.1.rc,
            )
        })
        .expect("search");
    assert_eq!(typed[0].attrs["sn"], vec!["Liddell"]);

    // RFC 4526 absolute true and false filters.
    let (everything, _) = search(&mut root, ALICE, Scope::Base, "(&)", &["1.1"]);
    assert_eq!(everything.len(), 1);
    let (nothing, _) = search(&mut root, ALICE, Scope::Base, "(|)", &["1.1"]);
    assert!(nothing.is_empty());

    // RFC 4529: `@person` selects person's attributes (cn, sn, userPassword, ...), not uid.
    let (by_class, _) = search(
        &mut root,
        ALICE,
        Scope::Base,
        "(objectClass=*)",
        &["@person"],
    );
    assert!(by_class[0].attrs.contains_key("sn"));
    assert!(!by_class[0].attrs.contains_key("uid"));

    let missing = root
        .search(
            "uid=x,ou=Nowhere,dc=example,dc=com",
            Scope::Base,
            "(objectClass=*)",
            vec!["*"],
        )
        .expect("search");
    assert_eq!(missing.1.rc, 32);
    assert_eq!(missing.1.matched, SUFFIX);
}

#[test]
fn binds_compare_and_default_access_control() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    populate(&mut root);

    // The cleartext password given on add was hashed with the configured scheme.
    let (stored, _) = search(
        &mut root,
        ALICE,
        Scope::Base,
        "(objectClass=*)",
        &["userPassword"],
    );
    assert!(stored[0].bin_attrs.get("userPassword").map_or_else(
        || stored[0].attrs["userPassword"][0].starts_with("{SSHA}"),
        |values| values[0].starts_with(b"{SSHA}")
    ));

    let mut alice = LdapConn::new(&server.ldap_url()).expect("connect");
    assert_eq!(alice.simple_bind(ALICE, "wrong").expect("bind").rc, 49);
    alice
        .simple_bind(ALICE, "alicepw")
        .expect("bind")
        .success()
        .expect("alice binds");
    let (exop, _) = alice
        .extended(WhoAmI)
        .expect("whoami")
        .success()
        .expect("whoami");
    assert_eq!(exop.parse::<WhoAmIResp>().authzid, format!("dn:{ALICE}"));

    // Self reads own userPassword; others and anonymous do not see it.
    let (own, _) = search(
        &mut alice,
        ALICE,
        Scope::Base,
        "(objectClass=*)",
        &["userPassword"],
    );
    assert_eq!(own[0].attrs.len() + own[0].bin_attrs.len(), 1);
    let (other, _) = search(
        &mut alice,
        "uid=bob,ou=People,dc=example,dc=com",
        Scope::Base,
        "(objectClass=*)",
        &["userPassword", "cn"],
    );
    assert!(
        !other[0].attrs.contains_key("userPassword")
            && !other[0].bin_attrs.contains_key("userPassword")
    );
    assert!(other[0].attrs.contains_key("cn"));
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let (hidden, _) = search(
        &mut anonymous,
        SUFFIX,
        Scope::Subtree,
        "(userPassword=*)",
        &["*"],
    );
    assert!(
        hidden.is_empty(),
        "userPassword is not searchable by anonymous"
    );

    // Compare.
    let equal = root.compare(ALICE, "sn", "LIDDELL").expect("compare");
    assert_eq!(equal.0.rc, 6, "compareTrue (caseIgnoreMatch)");
    let unequal = root.compare(ALICE, "sn", "Smith").expect("compare");
    assert_eq!(unequal.0.rc, 5, "compareFalse");
    let absent = root.compare(ALICE, "mail", "a@b").expect("compare");
    assert_eq!(absent.0.rc, 16, "noSuchAttribute");

    // Only the rootdn writes by default.
    let denied = alice
        .modify(ALICE, vec![Mod::Replace("description", set(&["mine"]))])
        .expect("modify");
    assert_eq!(denied.rc, 50);
    let denied = anonymous
        .add(
            "uid=eve,ou=People,dc=example,dc=com",
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&["eve"])),
                ("cn", set(&["e"])),
                ("sn", set(&["e"])),
            ],
        )
        .expect("add");
    assert_eq!(denied.rc, 50);
}

#[test]
fn updates_and_their_result_codes() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    populate(&mut root);

    root.modify(ALICE, vec![Mod::Replace("description", set(&["updated"]))])
        .expect("modify")
        .success()
        .expect("replace description");
    let (entry, _) = search(
        &mut root,
        ALICE,
        Scope::Base,
        "(objectClass=*)",
        &["description", "modifiersName"],
    );
    assert_eq!(entry[0].attrs["description"], vec!["updated"]);

    let duplicate = root
        .add(
            ALICE,
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&["alice"])),
                ("cn", set(&["a"])),
                ("sn", set(&["a"])),
            ],
        )
        .expect("add");
    assert_eq!(duplicate.rc, 68, "entryAlreadyExists");
    let orphan = root
        .add(
            "uid=x,ou=Nowhere,dc=example,dc=com",
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&["x"])),
                ("cn", set(&["x"])),
                ("sn", set(&["x"])),
            ],
        )
        .expect("add");
    assert_eq!(orphan.rc, 32);
    let missing_sn = root
        .add(
            "uid=y,ou=People,dc=example,dc=com",
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&["y"])),
                ("cn", set(&["y"])),
            ],
        )
        .expect("add");
    assert_eq!(missing_sn.rc, 65, "objectClassViolation");

    let non_leaf = root.delete("ou=People,dc=example,dc=com").expect("delete");
    assert_eq!(non_leaf.rc, 66);

    root.modifydn(
        ALICE,
        "uid=alice2",
        true,
        Some("ou=Groups,dc=example,dc=com"),
    )
    .expect("modrdn")
    .success()
    .expect("rename and move");
    let (moved, _) = search(
        &mut root,
        "uid=alice2,ou=Groups,dc=example,dc=com",
        Scope::Base,
        "(objectClass=*)",
        &["uid"],
    );
    assert_eq!(moved[0].attrs["uid"], vec!["alice2"]);

    root.delete("uid=alice2,ou=Groups,dc=example,dc=com")
        .expect("delete")
        .success()
        .expect("delete leaf");
    let gone = root
        .search(
            "uid=alice2,ou=Groups,dc=example,dc=com",
            Scope::Base,
            "(objectClass=*)",
            vec!["1.1"],
        )
        .expect("search");
    assert_eq!(gone.1.rc, 32);

    // Assertion control (RFC 4528).
    let failed = root
        .with_controls(Assertion::new("(sn=Nobody)"))
        .modify(
            "uid=bob,ou=People,dc=example,dc=com",
            vec![Mod::Replace("description", set(&["x"]))],
        )
        .expect("modify");
    assert_eq!(failed.rc, 122, "assertionFailed");
    root.with_controls(Assertion::new("(sn=Builder)"))
        .modify(
            "uid=bob,ou=People,dc=example,dc=com",
            vec![Mod::Replace("description", set(&["x"]))],
        )
        .expect("modify")
        .success()
        .expect("assertion holds");
}

#[test]
fn password_modify_self_and_generated() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    populate(&mut root);

    let mut alice = LdapConn::new(&server.ldap_url()).expect("connect");
    alice
        .simple_bind(ALICE, "alicepw")
        .expect("bind")
        .success()
        .expect("bind");
    let wrong_old = alice
        .extended(PasswordModify {
            user_id: None,
            old_pass: Some("nope"),
            new_pass: Some("newpw"),
        })
        .expect("exop");
    assert_eq!(
        wrong_old.1.rc, 53,
        "slapd: unwilling to verify old password"
    );
    alice
        .extended(PasswordModify {
            user_id: None,
            old_pass: Some("alicepw"),
            new_pass: Some("newpw"),
        })
        .expect("exop")
        .success()
        .expect("self change");
    let mut again = LdapConn::new(&server.ldap_url()).expect("connect");
    again
        .simple_bind(ALICE, "newpw")
        .expect("bind")
        .success()
        .expect("new password works");

    let bob = "uid=bob,ou=People,dc=example,dc=com";
    let denied = alice
        .extended(PasswordModify {
            user_id: Some(bob),
            old_pass: Some("bobpw"),
            new_pass: Some("x"),
        })
        .expect("exop");
    // As slapd: with an old password, 53 whether it is right or not.
    assert_eq!(denied.1.rc, 53, "a user may not change another's password");

    let (exop, _) = root
        .extended(PasswordModify {
            user_id: Some(bob),
            old_pass: None,
            new_pass: None,
        })
        .expect("exop")
        .success()
        .expect("rootdn generates a password");
    let generated = exop.parse::<PasswordModifyResp>().gen_pass;
    assert!(generated.len() >= 12);
    let mut bob_connection = LdapConn::new(&server.ldap_url()).expect("connect");
    bob_connection
        .simple_bind(bob, &generated)
        .expect("bind")
        .success()
        .expect("generated password works");
}

/// The response control with this OID (it must be there).
fn response_control<'c>(
    controls: &'c [ldap3::controls::Control],
    oid: &str,
) -> &'c ldap3::controls::RawControl {
    &controls
        .iter()
        .find(|control| control.1.ctype == oid)
        .unwrap_or_else(|| panic!("response control {oid} present"))
        .1
}

/// Adds `uid=pNN` people (sn=P) under ou=People in the given order (IDs follow it).
fn add_people_p00_to_p24(root: &mut LdapConn, order: impl Iterator<Item = usize>) {
    for index in order {
        let uid = format!("p{index:02}");
        root.add(
            &format!("uid={uid},ou=People,dc=example,dc=com"),
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&[uid.as_str()])),
                ("cn", set(&[uid.as_str()])),
                ("sn", set(&["P"])),
            ],
        )
        .expect("add")
        .success()
        .expect("add person");
    }
}

#[test]
fn paged_results_walk_a_real_cursor_and_size_limits_apply() {
    let server = TestServer::start_with_database(|settings| settings.size_limit = 7);
    let mut root = root(&server);
    populate(&mut root);
    add_people_p00_to_p24(&mut root, 0..25);
    let mut seen = HashSet::new();
    let mut cookie = Vec::new();
    let mut pages = 0;
    loop {
        let control = PagedResults {
            size: 10,
            cookie: cookie.clone(),
        };
        let result = root
            .with_controls(control)
            .search(
                "ou=People,dc=example,dc=com",
                Scope::OneLevel,
                "(sn=P)",
                vec!["uid"],
            )
            .expect("search");
        assert_eq!(result.1.rc, 0);
        pages += 1;
        for entry in result.0 {
            assert!(
                seen.insert(SearchEntry::construct(entry).dn),
                "no entry twice"
            );
        }
        let raw = result
            .1
            .ctrls
            .iter()
            .find(|control| control.1.ctype == "1.2.840.113556.1.4.319")
            .expect("paged response control present");
        let parsed: PagedResults = raw.1.parse();
        if parsed.cookie.is_empty() {
            break;
        }
        cookie = parsed.cookie;
        assert!(pages < 10, "paging terminates");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 25);

    // Anonymous is held to size_limit = 7; the rootdn is not.
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let limited = anonymous
        .search(
            "ou=People,dc=example,dc=com",
            Scope::OneLevel,
            "(sn=P)",
            vec!["uid"],
        )
        .expect("search");
    assert_eq!(limited.1.rc, 4, "sizeLimitExceeded");
    assert_eq!(limited.0.len(), 7);
    let (all, rc) = search(
        &mut root,
        "ou=People,dc=example,dc=com",
        Scope::OneLevel,
        "(sn=P)",
        &["uid"],
    );
    assert_eq!((all.len(), rc), (25, 0));
}

#[test]
fn concurrent_writers_are_group_committed_without_loss() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    populate(&mut root);
    let url = server.ldap_url();
    let workers: Vec<_> = (0..6)
        .map(|worker| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut connection = LdapConn::new(&url).expect("connect");
                connection
                    .simple_bind(ROOT_DN, ROOT_PASSWORD)
                    .expect("bind")
                    .success()
                    .expect("bind");
                for index in 0..15 {
                    let uid = format!("w{worker}n{index}");
                    connection
                        .add(
                            &format!("uid={uid},ou=People,dc=example,dc=com"),
                            vec![
                                ("objectClass", set(&["inetOrgPerson"])),
                                ("uid", set(&[uid.as_str()])),
                                ("cn", set(&[uid.as_str()])),
                                ("sn", set(&["W"])),
                            ],
                        )
                        .expect("add")
                        .success()
                        .expect("concurrent add");
                    // Every fifth write fails (duplicate) and must fail alone.
                    if index % 5 == 0 {
                        let duplicate = connection
                            .add(
                                &format!("uid={uid},ou=People,dc=example,dc=com"),
                                vec![
                                    ("objectClass", set(&["inetOrgPerson"])),
                                    ("uid", set(&[uid.as_str()])),
                                    ("cn", set(&[uid.as_str()])),
                                    ("sn", set(&["W"])),
                                ],
                            )
                            .expect("add");
                        assert_eq!(duplicate.rc, 68);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    let (written, rc) = search(&mut root, SUFFIX, Scope::Subtree, "(sn=W)", &["1.1"]);
    assert_eq!((written.len(), rc), (90, 0));
}

#[test]
fn subschema_is_published() {
    let server = TestServer::start_with_database(|_| {});
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let (entries, rc) = search(
        &mut anonymous,
        "cn=Subschema",
        Scope::Base,
        "(objectClass=subschema)",
        &[
            "attributeTypes",
            "objectClasses",
            "ldapSyntaxes",
            "matchingRules",
        ],
    );
    assert_eq!(rc, 0);
    let attribute_types = &entries[0].attrs["attributeTypes"];
    assert!(attribute_types
        .iter()
        .any(|definition| definition.contains("NAME 'uid'") || definition.contains("'uid'")));
    assert!(entries[0].attrs["objectClasses"]
        .iter()
        .any(|definition| definition.contains("inetOrgPerson")));
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    let (root_dse, _) = search(
        &mut connection,
        "",
        Scope::Base,
        "(objectClass=*)",
        &["namingContexts", "supportedExtension"],
    );
    assert_eq!(root_dse[0].attrs["namingContexts"], vec![SUFFIX]);
    assert!(
        root_dse[0].attrs["supportedExtension"].contains(&"1.3.6.1.4.1.4203.1.11.1".to_string())
    );
}

#[test]
fn ldap_utils_cover_every_operation() {
    let server = TestServer::start_with_database(|_| {});
    let url = server.ldap_url();
    let ldif_path = server.directory.path().join("base.ldif");
    std::fs::write(
        &ldif_path,
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n\
         dn: uid=carol,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: carol\ncn: Carol\nsn: Kraków\nuserPassword: carolpw\n",
    )
    .expect("ldif");
    let bind = ["-x", "-H", url.as_str(), "-D", ROOT_DN, "-w", ROOT_PASSWORD];
    let run = |program: &str, extra: &[&str]| {
        let mut arguments: Vec<&str> = bind.to_vec();
        arguments.extend_from_slice(extra);
        ldap_tool(program, &arguments)
    };
    let Some(output) = run("ldapadd", &["-f", ldif_path.to_str().expect("utf-8 path")]) else {
        return;
    };
    assert!(output.status.success(), "ldapadd: {}", text(&output.stderr));

    let output =
        run("ldapsearch", &["-LLL", "-b", SUFFIX, "(sn=KRAKÓW)", "uid"]).expect("ldapsearch");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("uid: carol"),
        "{}",
        text(&output.stdout)
    );

    let change = server.directory.path().join("change.ldif");
    std::fs::write(&change, "dn: uid=carol,ou=People,dc=example,dc=com\nchangetype: modify\nreplace: description\ndescription: edited\n").expect("ldif");
    let output = run("ldapmodify", &["-f", change.to_str().expect("path")]).expect("ldapmodify");
    assert!(output.status.success(), "{}", text(&output.stderr));

    let output = run(
        "ldapcompare",
        &[
            "uid=carol,ou=People,dc=example,dc=com",
            "description:edited",
        ],
    )
    .expect("ldapcompare");
    assert_eq!(
        output.status.code(),
        Some(6),
        "compareTrue: {}",
        text(&output.stdout)
    );

    let output = run(
        "ldappasswd",
        &["-s", "carolnew", "uid=carol,ou=People,dc=example,dc=com"],
    )
    .expect("ldappasswd");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = ldap_tool(
        "ldapwhoami",
        &[
            "-x",
            "-H",
            &url,
            "-D",
            "uid=carol,ou=People,dc=example,dc=com",
            "-w",
            "carolnew",
        ],
    )
    .expect("ldapwhoami");
    assert!(output.status.success(), "{}", text(&output.stderr));

    let output = run(
        "ldapmodrdn",
        &[
            "-r",
            "uid=carol,ou=People,dc=example,dc=com",
            "uid=caroline",
        ],
    )
    .expect("ldapmodrdn");
    assert!(output.status.success(), "{}", text(&output.stderr));

    let output = run(
        "ldapsearch",
        &[
            "-LLL",
            "-E",
            "pr=1/noprompt",
            "-b",
            SUFFIX,
            "(objectClass=*)",
            "1.1",
        ],
    )
    .expect("ldapsearch paged");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).matches("dn: ").count(), 3);

    let output =
        run("ldapdelete", &["uid=caroline,ou=People,dc=example,dc=com"]).expect("ldapdelete");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = run(
        "ldapsearch",
        &[
            "-LLL",
            "-b",
            "uid=caroline,ou=People,dc=example,dc=com",
            "-s",
            "base",
        ],
    )
    .expect("ldapsearch");
    assert_eq!(output.status.code(), Some(32));
}

#[test]
fn require_tls_refuses_clear_writes() {
    let server = TestServer::start_with_database(|settings| settings.require_tls = true);
    // ldapi counts as secure: the rootdn populates over it via SASL EXTERNAL or a simple bind.
    let mut secure = LdapConn::new(&server.ldapi_url()).expect("ldapi");
    secure
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("bind over ldapi");
    populate(&mut secure);
    // A clear TCP connection may still read anonymously, but an update is refused.
    let mut clear = LdapConn::new(&server.ldap_url()).expect("connect");
    let refused = clear
        .delete("uid=bob,ou=People,dc=example,dc=com")
        .expect("delete");
    assert_eq!(refused.rc, 13, "confidentialityRequired");
    let (found, rc) = search(&mut clear, SUFFIX, Scope::Subtree, "(uid=bob)", &["uid"]);
    assert_eq!((found.len(), rc), (1, 0));
}

#[test]
fn configured_rules_grant_group_members_write_and_deny_others() {
    use lmdir_config::{AccessClause, AccessLevel, AccessRule, AccessTarget, Who};
    let rules = vec![
        AccessRule {
            to: AccessTarget {
                subtree: Some("ou=People,dc=example,dc=com".to_string()),
                attrs: vec!["userPassword".to_string()],
                ..AccessTarget::default()
            },
            by: vec![
                AccessClause {
                    who: Who::SelfEntry,
                    access: AccessLevel::Write,
                },
                AccessClause {
                    who: Who::Anyone,
                    access: AccessLevel::Auth,
                },
            ],
        },
        AccessRule {
            to: AccessTarget {
                subtree: Some("ou=People,dc=example,dc=com".to_string()),
                ..AccessTarget::default()
            },
            by: vec![
                AccessClause {
                    who: Who::Group("cn=admins,ou=Groups,dc=example,dc=com".to_string()),
                    access: AccessLevel::Write,
                },
                AccessClause {
                    who: Who::Users,
                    access: AccessLevel::Read,
                },
                AccessClause {
                    who: Who::Anonymous,
                    access: AccessLevel::None,
                },
            ],
        },
    ];
    let server = TestServer::start_with_rules(rules);
    let mut root = root(&server);
    populate(&mut root);
    let bob_dn = "uid=bob,ou=People,dc=example,dc=com";

    // alice (a member of cn=admins) writes bob; bob (not a member) cannot write alice.
    let mut alice = LdapConn::new(&server.ldap_url()).expect("connect");
    alice
        .simple_bind(ALICE, "alicepw")
        .expect("bind")
        .success()
        .expect("alice binds");
    alice
        .modify(
            bob_dn,
            vec![Mod::Replace("description", set(&["by alice"]))],
        )
        .expect("modify")
        .success()
        .expect("group member may write");
    let mut bob = LdapConn::new(&server.ldap_url()).expect("connect");
    bob.simple_bind(bob_dn, "bobpw")
        .expect("bind")
        .success()
        .expect("bob binds");
    let denied = bob
        .modify(ALICE, vec![Mod::Replace("description", set(&["by bob"]))])
        .expect("modify");
    assert_eq!(denied.rc, 50);

    // Users read entries but not others' passwords; anonymous sees nothing under People.
    let (seen, _) = search(
        &mut bob,
        ALICE,
        Scope::Base,
        "(objectClass=*)",
        &["cn", "userPassword"],
    );
    assert_eq!(seen.len(), 1);
    assert!(seen[0].attrs.contains_key("cn"));
    assert!(
        !seen[0].attrs.contains_key("userPassword")
            && !seen[0].bin_attrs.contains_key("userPassword")
    );
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    let (hidden, _) = search(
        &mut anonymous,
        "ou=People,dc=example,dc=com",
        Scope::OneLevel,
        "(objectClass=*)",
        &["cn"],
    );
    assert!(hidden.is_empty());
    // Anonymous holds no access at all on People entries, so it may not even learn that alice
    // exists: compare answers noSuchObject, as for a missing entry (OpenLDAP's disclose).
    let compare = anonymous.compare(ALICE, "sn", "Liddell").expect("compare");
    assert_eq!(compare.0.rc, 32);
    // A user who may read but not compare userPassword gets insufficientAccessRights.
    let compare = bob
        .compare(ALICE, "userPassword", "alicepw")
        .expect("compare");
    assert_eq!(compare.0.rc, 50);
}

#[test]
fn pre_read_and_post_read_return_the_entry_around_a_modify() {
    use ldap3::controls::{PostRead, PostReadResp, PreRead, PreReadResp};
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    populate(&mut root);
    let result = root
        .with_controls(vec![
            PreRead::new(vec!["description"]),
            PostRead::new(vec!["description", "uid"]),
        ])
        .modify(ALICE, vec![Mod::Replace("description", set(&["after"]))])
        .expect("modify");
    assert_eq!(result.rc, 0);
    let pre: PreReadResp = response_control(&result.ctrls, "1.3.6.1.1.13.1").parse();
    assert!(
        !pre.attrs.contains_key("description"),
        "no description before: {:?}",
        pre.attrs
    );
    let post: PostReadResp = response_control(&result.ctrls, "1.3.6.1.1.13.2").parse();
    assert_eq!(post.attrs["description"], vec!["after"]);
    assert_eq!(post.attrs["uid"], vec!["alice"]);

    let renamed = root
        .with_controls(PostRead::new(vec!["uid"]))
        .modifydn(ALICE, "uid=alicia", true, None)
        .expect("modrdn");
    assert_eq!(renamed.rc, 0);
    let post: PostReadResp = renamed.ctrls[0].1.parse();
    assert_eq!(post.attrs["uid"], vec!["alicia"]);
}

#[test]
fn server_side_sort_orders_results_and_reports_unknown_attributes() {
    use ldap3::controls::RawControl;
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    populate(&mut root);
    let uids = |connection: &mut LdapConn, control: RawControl| {
        let result = connection
            .with_controls(control)
            .search(
                SUFFIX,
                Scope::Subtree,
                "(objectClass=inetOrgPerson)",
                vec!["uid"],
            )
            .expect("search");
        let response = result
            .1
            .ctrls
            .iter()
            .find(|control| control.1.ctype == "1.2.840.113556.1.4.474")
            .and_then(|control| control.1.val.clone())
            .expect("sort response control");
        let order: Vec<String> = result
            .0
            .into_iter()
            .map(|entry| SearchEntry::construct(entry).attrs["uid"][0].clone())
            .collect();
        (order, response)
    };
    let (ascending, response) = uids(&mut root, sort_request_control("uid", false));
    assert_eq!(ascending, vec!["alice", "bob"]);
    assert_eq!(
        response,
        vec![0x30, 0x03, 0x0a, 0x01, 0x00],
        "sortResult success"
    );
    let (descending, _) = uids(&mut root, sort_request_control("uid", true));
    assert_eq!(descending, vec!["bob", "alice"]);
    let (unsorted, response) = uids(&mut root, sort_request_control("noSuchAttr", false));
    assert_eq!(unsorted.len(), 2);
    assert_eq!(
        &response[..5],
        &[0x30, 0x0f, 0x0a, 0x01, 16],
        "noSuchAttribute reported"
    );
}

/// The RFC 2891 request control sorting by one attribute.
fn sort_request_control(attribute: &str, reverse: bool) -> ldap3::controls::RawControl {
    // SortKeyList ::= SEQUENCE OF SEQUENCE { attributeType, orderingRule [0] OPTIONAL, reverseOrder [1] }
    let mut key = vec![0x04, attribute.len() as u8];
    key.extend_from_slice(attribute.as_bytes());
    if reverse {
        key.extend_from_slice(&[0x81, 0x01, 0xff]);
    }
    let mut inner = vec![0x30, key.len() as u8];
    inner.extend_from_slice(&key);
    let mut value = vec![0x30, inner.len() as u8];
    value.extend_from_slice(&inner);
    ldap3::controls::RawControl {
        ctype: "1.2.840.113556.1.4.473".to_string(),
        crit: false,
        val: Some(value),
    }
}

#[test]
fn sorted_searches_page_and_size_limit_in_sorted_order() {
    use ldap3::controls::RawControl;
    let server = TestServer::start_with_database(|settings| settings.size_limit = 7);
    let mut root = root(&server);
    populate(&mut root);
    // Added in reverse, so ID order is the opposite of the sorted order.
    add_people_p00_to_p24(&mut root, (0..25).rev());
    let expected: Vec<String> = (0..25).map(|index| format!("p{index:02}")).collect();
    let uids_of = |entries: Vec<ldap3::ResultEntry>| -> Vec<String> {
        entries
            .into_iter()
            .map(|entry| SearchEntry::construct(entry).attrs["uid"][0].clone())
            .collect()
    };

    // A page of 10 of (sn=P) sorted by uid, from `cookie`.
    let sorted_page = |root: &mut LdapConn, cookie: Vec<u8>| {
        let paged: RawControl = PagedResults { size: 10, cookie }.into();
        root.with_controls(vec![paged, sort_request_control("uid", false)])
            .search(
                "ou=People,dc=example,dc=com",
                Scope::OneLevel,
                "(sn=P)",
                vec!["uid"],
            )
            .expect("search")
    };

    // Pages of a sorted search follow the sorted order, none overlapping.
    let mut collected = Vec::new();
    let mut cookie = Vec::new();
    let mut pages = 0;
    loop {
        let result = sorted_page(&mut root, cookie.clone());
        assert_eq!(result.1.rc, 0);
        pages += 1;
        let page = uids_of(result.0);
        assert!(page.len() <= 10);
        collected.extend(page);
        let parsed: PagedResults =
            response_control(&result.1.ctrls, "1.2.840.113556.1.4.319").parse();
        if parsed.cookie.is_empty() {
            break;
        }
        cookie = parsed.cookie;
        assert!(pages < 10, "paging terminates");
    }
    assert_eq!(pages, 3);
    assert_eq!(collected, expected);

    // A cookie from an unsorted search is refused by the sorted one (its number means an ID).
    let first_unsorted = root
        .with_controls(PagedResults {
            size: 10,
            cookie: Vec::new(),
        })
        .search(
            "ou=People,dc=example,dc=com",
            Scope::OneLevel,
            "(sn=P)",
            vec!["uid"],
        )
        .expect("search");
    let unsorted_cookie: PagedResults =
        response_control(&first_unsorted.1.ctrls, "1.2.840.113556.1.4.319").parse();
    let mixed = sorted_page(&mut root, unsorted_cookie.cookie);
    assert_eq!(mixed.1.rc, 53, "unwillingToPerform");

    // The size limit keeps the first entries in sorted order, whichever direction.
    let mut anonymous = LdapConn::new(&server.ldap_url()).expect("connect");
    for (reverse, first_seven) in [
        (false, expected[..7].to_vec()),
        (true, expected.iter().rev().take(7).cloned().collect()),
    ] {
        let limited = anonymous
            .with_controls(sort_request_control("uid", reverse))
            .search(
                "ou=People,dc=example,dc=com",
                Scope::OneLevel,
                "(sn=P)",
                vec!["uid"],
            )
            .expect("search");
        assert_eq!(limited.1.rc, 4, "sizeLimitExceeded");
        assert_eq!(uids_of(limited.0), first_seven);
    }
}

/// The DNs of a full scan's entries, lowercased (the store walks id2node beside id2entry for
/// them rather than looking each one up).
fn scanned_dns(connection: &mut LdapConn, filter: &str) -> HashSet<String> {
    let (entries, _) = connection
        .search(SUFFIX, Scope::Subtree, filter, vec!["1.1"])
        .expect("search")
        .success()
        .expect("scan succeeds");
    entries
        .into_iter()
        .map(|entry| SearchEntry::construct(entry).dn.to_ascii_lowercase())
        .collect()
}

/// A full scan returns each entry under its own DN across gaps in the entry IDs (deleted
/// people: the node walk steps over them) and with a filter that skips long runs of entries
/// (the walk seeks past them).
#[test]
fn full_scans_return_each_entry_under_its_own_dn() {
    let people = 300;
    let server = TestServer::start_populated(people, Vec::new(), |_| {});
    let mut connection = root(&server);
    let deleted = |index: usize| index % 7 == 3;
    for index in (0..people).filter(|index| deleted(*index)) {
        connection
            .delete(&common::person_dn(index))
            .expect("delete")
            .success()
            .expect("deleted");
    }
    let groups: HashSet<String> = (0..people / common::PEOPLE_PER_GROUP)
        .map(common::group_dn)
        .collect();
    let mut others: HashSet<String> = [
        SUFFIX,
        "ou=people,dc=example,dc=com",
        "ou=groups,dc=example,dc=com",
    ]
    .iter()
    .map(|dn| dn.to_string())
    .collect();
    others.extend(groups);
    let mut everything = others.clone();
    everything.extend(
        (0..people)
            .filter(|index| !deleted(*index))
            .map(common::person_dn),
    );
    assert_eq!(scanned_dns(&mut connection, "(objectClass=*)"), everything);
    // Unindexed (a NOT): the whole DB in ID order again, returning only entries far apart.
    assert_eq!(
        scanned_dns(&mut connection, "(!(objectClass=inetOrgPerson))"),
        others
    );
}

/// The increment-and-read pattern of RFC 4525 and RFC 4527 (an ID allocator): pre-read and
/// post-read were read in their own transactions before queueing and after the commit, so two
/// concurrent increments could both see the later value and hand out one ID twice. The writer
/// now keeps, for each such update, the store just before and just after it.
#[test]
fn concurrent_increments_read_their_own_before_and_after() {
    use ldap3::controls::{PostRead, PostReadResp, PreRead, PreReadResp};
    const CLIENTS: usize = 8;
    const INCREMENTS: usize = 25;
    let server = TestServer::start_with_database(|_| {});
    let mut admin = root(&server);
    populate(&mut admin);
    let counter = format!("cn=counter,{SUFFIX}");
    admin
        .add(
            &counter,
            vec![
                ("objectClass", set(&["posixGroup"])),
                ("cn", set(&["counter"])),
                ("gidNumber", set(&["1000"])),
            ],
        )
        .expect("add")
        .success()
        .expect("counter added");
    let seen: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                scope.spawn(|| {
                    let mut connection = root(&server);
                    (0..INCREMENTS)
                        .map(|_| {
                            let result = connection
                                .with_controls(vec![
                                    PreRead::new(vec!["gidNumber"]),
                                    PostRead::new(vec!["gidNumber"]),
                                ])
                                .modify(&counter, vec![Mod::Increment("gidNumber", "1")])
                                .expect("modify");
                            assert_eq!(result.rc, 0, "{result:?}");
                            let pre: PreReadResp =
                                response_control(&result.ctrls, "1.3.6.1.1.13.1").parse();
                            let post: PostReadResp =
                                response_control(&result.ctrls, "1.3.6.1.1.13.2").parse();
                            let number = |values: &Vec<String>| values[0].parse::<u64>().unwrap();
                            (
                                number(&pre.attrs["gidNumber"]),
                                number(&post.attrs["gidNumber"]),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|client| client.join().expect("no panic"))
            .collect()
    });
    let total = (CLIENTS * INCREMENTS) as u64;
    for (before, after) in &seen {
        assert_eq!(before + 1, *after, "each sees its own increment: {seen:?}");
    }
    let mut after: Vec<u64> = seen.iter().map(|(_, after)| *after).collect();
    after.sort_unstable();
    let expected: Vec<u64> = (1001..=1000 + total).collect();
    assert_eq!(after, expected, "every value handed out once");
}

/// Names whose preparation is not idempotent: as slapd, a value is lowercased, then NFKC, so
/// `™` becomes `TM` and `㎒` `MHz`, which a second preparation would lowercase. An entry so
/// named, a child below it, a group naming the child, renames of both and their deletes all
/// find their entries; a step that prepared a prepared DN again would miss them.
#[test]
fn entries_named_with_compatibility_characters_live_a_whole_life() {
    let server = TestServer::start_with_database(|_| {});
    let mut ldap = root(&server);
    populate(&mut ldap);
    let unit = "ou=Acme™ ㎒,dc=example,dc=com";
    let child = format!("cn=Widget™,{unit}");
    let admins = "cn=admins,ou=Groups,dc=example,dc=com";
    let ok = |result: ldap3::result::Result<ldap3::LdapResult>, what: &str| {
        let result = result.expect("sent");
        assert_eq!(result.rc, 0, "{what}: {result:?}");
    };
    ok(
        ldap.add(
            unit,
            vec![
                ("objectClass", set(&["organizationalUnit"])),
                ("ou", set(&["Acme™ ㎒"])),
            ],
        ),
        "add the unit",
    );
    ok(
        ldap.add(
            &child,
            vec![
                ("objectClass", set(&["organizationalRole"])),
                ("cn", set(&["Widget™"])),
            ],
        ),
        "add the child",
    );
    let (found, rc) = search(&mut ldap, unit, Scope::OneLevel, "(objectClass=*)", &["cn"]);
    assert_eq!((rc, found.len()), (0, 1), "{found:?}");
    let (found, rc) = search(&mut ldap, SUFFIX, Scope::Subtree, "(cn=Widget™)", &["1.1"]);
    assert_eq!((rc, found.len()), (0, 1), "{found:?}");
    ok(
        ldap.modify(admins, vec![Mod::Add("member", set(&[child.as_str()]))]),
        "add the child to a group",
    );
    let (found, _) = search(
        &mut ldap,
        &child,
        Scope::Base,
        "(objectClass=*)",
        &["memberOf"],
    );
    assert_eq!(
        found[0].attrs.get("memberOf"),
        Some(&vec![admins.to_string()])
    );
    ok(
        ldap.modify(
            &child,
            vec![Mod::Replace("description", set(&["a widget"]))],
        ),
        "modify the child",
    );
    ok(
        ldap.modifydn(&child, "cn=Gadget™", true, None),
        "rename the child",
    );
    let renamed = format!("cn=Gadget™,{unit}");
    let filter = format!("(member={renamed})");
    let (found, rc) = search(&mut ldap, SUFFIX, Scope::Subtree, &filter, &["1.1"]);
    assert_eq!(
        (rc, found.len()),
        (0, 1),
        "the group follows the rename: {found:?}"
    );
    ok(
        ldap.modifydn(unit, "ou=Acme™ ㎓", true, None),
        "rename the unit over its child",
    );
    let moved = "cn=Gadget™,ou=Acme™ ㎓,dc=example,dc=com";
    let (found, rc) = search(
        &mut ldap,
        moved,
        Scope::Base,
        "(objectClass=*)",
        &["memberOf"],
    );
    assert_eq!((rc, found.len()), (0, 1), "{found:?}");
    assert_eq!(
        found[0].attrs.get("memberOf"),
        Some(&vec![admins.to_string()])
    );
    ok(ldap.delete(moved), "delete the child");
    ok(
        ldap.delete("ou=Acme™ ㎓,dc=example,dc=com"),
        "delete the unit",
    );
    let (found, _) = search(
        &mut ldap,
        admins,
        Scope::Base,
        "(objectClass=*)",
        &["member"],
    );
    assert_eq!(found[0].attrs.get("member"), Some(&vec![ALICE.to_string()]));
}
