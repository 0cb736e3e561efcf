//! The access matrix: every operation kind, as every kind of subject, under the default and
//! a configured policy, with the expected allow/deny of each cell written out.

use lmdir_access::acl::{
    Access, AccessGrantSpec, AccessPolicy, AccessRuleSpec, EntryAccess, GroupMembership,
    ResolvedGroups, Subject, Target, TargetPart,
};
use lmdir_schema::{Dn, Entry, OwnedEntryView, Schema};

const SUFFIX: &str = "dc=example,dc=com";
const ROOTDN: &str = "cn=admin,dc=example,dc=com";

struct Directory {
    schema: Schema,
    alice: (String, OwnedEntryView),
    bob: (String, OwnedEntryView),
    carol_ndn: String,
    admins_ndn: String,
}

fn person(schema: &Schema, dn: &str, uid: &str) -> (String, OwnedEntryView) {
    let mut entry = Entry::new(Dn::parse(dn).unwrap());
    entry.add_values(
        "objectClass",
        ["top", "person", "organizationalPerson", "inetOrgPerson"]
            .map(|value| value.as_bytes().to_vec()),
    );
    entry.add_values("uid", [uid.as_bytes().to_vec()]);
    entry.add_values("cn", [uid.as_bytes().to_vec()]);
    entry.add_values("sn", [uid.as_bytes().to_vec()]);
    entry.add_values("mail", [format!("{uid}@example.com").into_bytes()]);
    entry.add_values(
        "userPassword",
        [b"{SSHA}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40".to_vec()],
    );
    let ndn = schema.normalize_dn(&entry.dn).unwrap();
    (ndn, OwnedEntryView::new(schema, &entry).unwrap())
}

fn directory() -> Directory {
    let schema = Schema::builtin();
    let alice = person(&schema, "uid=alice,ou=People,dc=example,dc=com", "alice");
    let bob = person(&schema, "uid=bob,ou=People,dc=example,dc=com", "bob");
    let carol_ndn = schema
        .normalize_dn_str("uid=carol,ou=People,dc=example,dc=com")
        .unwrap();
    let admins_ndn = schema
        .normalize_dn_str("cn=Admins,ou=Groups,dc=example,dc=com")
        .unwrap();
    Directory {
        schema,
        alice,
        bob,
        carol_ndn,
        admins_ndn,
    }
}

fn grant(who: &str, access: &str) -> AccessGrantSpec {
    AccessGrantSpec {
        who: who.into(),
        access: access.into(),
    }
}

/// An OpenLDAP-style policy: passwords writable by their owner and the admins group, usable
/// for binds by anonymous only; mail of inetOrgPersons readable by admins, comparable by
/// users; everything else writable by admins, readable by users, searchable by anonymous.
fn configured_rules() -> Vec<AccessRuleSpec> {
    vec![
        AccessRuleSpec {
            subtree: Some("ou=people,dc=example,dc=com".into()),
            attrs: vec!["userPassword".into()],
            by: vec![
                grant("self", "write"),
                grant("anonymous", "auth"),
                grant("group=cn=admins,ou=groups,dc=example,dc=com", "write"),
                grant("*", "none"),
            ],
            ..AccessRuleSpec::default()
        },
        AccessRuleSpec {
            subtree: Some("ou=people,dc=example,dc=com".into()),
            filter: Some("(objectClass=inetOrgPerson)".into()),
            attrs: vec!["mail".into()],
            by: vec![
                grant("self", "write"),
                grant("group=cn=admins,ou=groups,dc=example,dc=com", "read"),
                grant("users", "compare"),
                grant("*", "none"),
            ],
            ..AccessRuleSpec::default()
        },
        AccessRuleSpec {
            by: vec![
                grant("group=cn=admins,ou=groups,dc=example,dc=com", "write"),
                grant("users", "read"),
                grant("anonymous", "search"),
            ],
            ..AccessRuleSpec::default()
        },
    ]
}

/// The matrix columns: (what, needed level).
fn columns(schema: &Schema) -> Vec<(&'static str, TargetPart, Access)> {
    let mail = TargetPart::Attribute(schema.attribute("mail").unwrap());
    let password = TargetPart::Attribute(schema.attribute("userPassword").unwrap());
    vec![
        ("read mail", mail, Access::Read),
        ("search mail", mail, Access::Search),
        ("compare mail", mail, Access::Compare),
        ("write mail", mail, Access::Write),
        ("read userPassword", password, Access::Read),
        ("search userPassword", password, Access::Search),
        ("compare userPassword", password, Access::Compare),
        ("write userPassword", password, Access::Write),
        ("auth userPassword", password, Access::Auth),
        ("search entry", TargetPart::Entry, Access::Search),
        ("read entry", TargetPart::Entry, Access::Read),
        ("write entry", TargetPart::Entry, Access::Write),
        ("write children", TargetPart::Children, Access::Write),
    ]
}

/// Rows: (label, bound DN or anonymous, target entry is alice (self) or bob, expected cells).
/// Cells follow `columns`, Y = allowed, N = denied; spaces group mail | userPassword | entry.
fn check_matrix(
    policy: &AccessPolicy,
    directory: &Directory,
    rows: &[(&str, Option<&str>, &str, &str)],
) {
    let admins = directory.admins_ndn.clone();
    let carol = directory.carol_ndn.clone();
    let membership = move |group: &str, member: &str| group == admins && member == carol;
    let columns = columns(&directory.schema);
    for (label, bound, target_name, expected) in rows {
        let bound_ndn = bound.map(|dn| directory.schema.normalize_dn_str(dn).unwrap());
        let subject = policy.subject(bound_ndn.as_deref(), &membership);
        let (entry_ndn, entry) = match *target_name {
            "alice" => (&directory.alice.0, &directory.alice.1),
            "bob" => (&directory.bob.0, &directory.bob.1),
            other => panic!("unknown target {other}"),
        };
        let expected: Vec<char> = expected
            .chars()
            .filter(|cell| !cell.is_whitespace())
            .collect();
        assert_eq!(expected.len(), columns.len(), "row {label}");
        let entry_access = policy.for_entry(&subject, entry_ndn, entry);
        for ((column, part, access), cell) in columns.iter().zip(&expected) {
            let target = Target {
                entry_ndn,
                entry,
                part: *part,
            };
            let allowed = policy.allowed(&subject, &target, *access);
            assert_eq!(
                allowed,
                *cell == 'Y',
                "{label}: {column} should be {}",
                if *cell == 'Y' { "allowed" } else { "denied" }
            );
            assert_eq!(
                entry_access.allowed(*part, *access),
                allowed,
                "{label}: {column} via EntryAccess"
            );
        }
    }
}

#[test]
fn default_policy_matrix() {
    let directory = directory();
    let policy = AccessPolicy::from_rules(&[], &directory.schema, SUFFIX, Some(ROOTDN)).unwrap();
    assert!(policy.is_default());
    assert!(!policy.uses_groups());
    //                   mail: R S C W   pw: R S C W A   entry: S R W children:W
    check_matrix(
        &policy,
        &directory,
        &[
            ("anonymous on bob", None, "bob", "YYYN NNNNY YYN N"),
            (
                "alice on herself",
                Some("uid=alice,ou=people,dc=example,dc=com"),
                "alice",
                "YYYN YYYYY YYN N",
            ),
            (
                "alice on bob",
                Some("uid=alice,ou=people,dc=example,dc=com"),
                "bob",
                "YYYN NNNNY YYN N",
            ),
            (
                "carol (admins member) on bob",
                Some("uid=carol,ou=people,dc=example,dc=com"),
                "bob",
                "YYYN NNNNY YYN N",
            ),
            (
                "rootdn on bob",
                Some("CN=Admin,DC=Example,DC=Com"),
                "bob",
                "YYYY YYYYY YYY Y",
            ),
        ],
    );
}

#[test]
fn configured_policy_matrix() {
    let directory = directory();
    let policy =
        AccessPolicy::from_rules(&configured_rules(), &directory.schema, SUFFIX, Some(ROOTDN))
            .unwrap();
    assert!(!policy.is_default());
    assert!(policy.uses_groups());
    //                   mail: R S C W   pw: R S C W A   entry: S R W children:W
    check_matrix(
        &policy,
        &directory,
        &[
            ("anonymous on bob", None, "bob", "NNNN NNNNY YNN N"),
            (
                "alice on herself",
                Some("uid=alice,ou=people,dc=example,dc=com"),
                "alice",
                "YYYY YYYYY YYN N",
            ),
            (
                "alice on bob",
                Some("uid=alice,ou=people,dc=example,dc=com"),
                "bob",
                "NNYN NNNNN YYN N",
            ),
            (
                "carol (admins member) on bob",
                Some("uid=carol,ou=people,dc=example,dc=com"),
                "bob",
                "YYYN YYYYY YYY Y",
            ),
            ("rootdn on bob", Some(ROOTDN), "bob", "YYYY YYYYY YYY Y"),
        ],
    );
}

fn people_only_membership() -> impl GroupMembership {
    |_group: &str, _member: &str| false
}

#[test]
fn filter_clause_only_matches_entries_passing_the_filter() {
    let directory = directory();
    let schema = &directory.schema;
    let policy =
        AccessPolicy::from_rules(&configured_rules(), schema, SUFFIX, Some(ROOTDN)).unwrap();
    // A device under ou=People is not an inetOrgPerson: rule 1 skips it and rule 2 (users
    // read) decides its description... and its mail-less attributes.
    let mut device = Entry::new(Dn::parse("cn=printer,ou=People,dc=example,dc=com").unwrap());
    device.add_values("objectClass", [b"device".to_vec()]);
    device.add_values("cn", [b"printer".to_vec()]);
    let device_ndn = schema.normalize_dn(&device.dn).unwrap();
    let device_view = OwnedEntryView::new(schema, &device).unwrap();
    let groups = people_only_membership();
    let alice_ndn = directory.alice.0.clone();
    let alice = policy.subject(Some(&alice_ndn), &groups);
    let mail = schema.attribute("mail").unwrap();
    let on_device = policy.for_entry(&alice, &device_ndn, &device_view);
    assert!(
        on_device.can_read_attribute(mail),
        "rule 2 grants users read"
    );
    let on_bob = policy.for_entry(&alice, &directory.bob.0, &directory.bob.1);
    assert!(
        !on_bob.can_read_attribute(mail),
        "rule 1 grants users only compare"
    );
    assert!(on_bob.can_compare(mail));
}

#[test]
fn attribute_rules_cover_subtypes() {
    let directory = directory();
    let schema = &directory.schema;
    let rules = vec![
        AccessRuleSpec {
            attrs: vec!["name".into()],
            by: vec![grant("*", "none")],
            ..AccessRuleSpec::default()
        },
        AccessRuleSpec {
            by: vec![grant("*", "read")],
            ..AccessRuleSpec::default()
        },
    ];
    let policy = AccessPolicy::from_rules(&rules, schema, SUFFIX, None).unwrap();
    let groups = people_only_membership();
    let anonymous = policy.subject(None, &groups);
    let access = policy.for_entry(&anonymous, &directory.bob.0, &directory.bob.1);
    for hidden in ["name", "cn", "sn", "givenName"] {
        assert!(
            !access.can_read_attribute(schema.attribute(hidden).unwrap()),
            "{hidden} is a name subtype"
        );
    }
    assert!(access.can_read_attribute(schema.attribute("mail").unwrap()));
    assert!(access.can_read_entry());
}

#[test]
fn first_matching_rule_wins_even_if_a_later_one_grants_more() {
    let directory = directory();
    let rules = vec![
        AccessRuleSpec {
            dn: Some("uid=bob,ou=people,dc=example,dc=com".into()),
            by: vec![grant("users", "search")],
            ..AccessRuleSpec::default()
        },
        AccessRuleSpec {
            by: vec![grant("*", "write")],
            ..AccessRuleSpec::default()
        },
    ];
    let policy = AccessPolicy::from_rules(&rules, &directory.schema, SUFFIX, None).unwrap();
    let groups = people_only_membership();
    let alice = policy.subject(Some(&directory.alice.0), &groups);
    let on_bob = policy.for_entry(&alice, &directory.bob.0, &directory.bob.1);
    assert_eq!(on_bob.level(TargetPart::Entry), Access::Search);
    assert!(!on_bob.can_read_entry());
    // Anonymous matches no `by` of rule 0: denied, rule 1 is never consulted.
    let anonymous = policy.subject(None, &groups);
    assert_eq!(
        policy
            .for_entry(&anonymous, &directory.bob.0, &directory.bob.1)
            .level(TargetPart::Entry),
        Access::None
    );
    // `dn` is exact: alice is not covered by rule 0.
    let on_alice = policy.for_entry(&alice, &directory.alice.0, &directory.alice.1);
    assert_eq!(on_alice.level(TargetPart::Entry), Access::Write);
}

#[test]
fn who_dn_and_dn_subtree() {
    let directory = directory();
    let rules = vec![AccessRuleSpec {
        by: vec![
            grant("dn=uid=alice,ou=People,dc=example,dc=com", "write"),
            grant("dn.subtree=ou=people,dc=example,dc=com", "read"),
            grant("*", "auth"),
        ],
        ..AccessRuleSpec::default()
    }];
    let policy = AccessPolicy::from_rules(&rules, &directory.schema, SUFFIX, None).unwrap();
    let groups = people_only_membership();
    let level = |bound: Option<&str>| {
        let ndn = bound.map(|dn| directory.schema.normalize_dn_str(dn).unwrap());
        let subject: Subject<'_> = policy.subject(ndn.as_deref(), &groups);
        policy
            .for_entry(&subject, &directory.bob.0, &directory.bob.1)
            .level(TargetPart::Entry)
    };
    assert_eq!(
        level(Some("UID=Alice,OU=People,DC=example,DC=com")),
        Access::Write
    );
    assert_eq!(
        level(Some("uid=dave,ou=People,dc=example,dc=com")),
        Access::Read
    );
    assert_eq!(level(Some("ou=People,dc=example,dc=com")), Access::Read);
    assert_eq!(
        level(Some("uid=eve,ou=Other,dc=example,dc=com")),
        Access::Auth
    );
    assert_eq!(level(None), Access::Auth);
}

#[test]
fn rootdn_is_recognized_by_normalized_dn_only() {
    let directory = directory();
    let policy =
        AccessPolicy::from_rules(&configured_rules(), &directory.schema, SUFFIX, Some(ROOTDN))
            .unwrap();
    let groups = people_only_membership();
    let ndn = directory
        .schema
        .normalize_dn_str("cn=ADMIN, dc=example, dc=com")
        .unwrap();
    assert!(policy.subject(Some(&ndn), &groups).is_rootdn);
    assert!(!policy.subject(Some(&directory.alice.0), &groups).is_rootdn);
    assert!(!policy.subject(None, &groups).is_rootdn);
    let no_rootdn =
        AccessPolicy::from_rules(&configured_rules(), &directory.schema, SUFFIX, None).unwrap();
    assert!(!no_rootdn.subject(Some(&ndn), &groups).is_rootdn);
}

#[test]
fn restrict_filter_hides_attributes_without_search_access() {
    let directory = directory();
    let schema = &directory.schema;
    let policy =
        AccessPolicy::from_rules(&configured_rules(), schema, SUFFIX, Some(ROOTDN)).unwrap();
    let groups = people_only_membership();
    let filter =
        schema.prepare_filter(&lmdir_schema::Filter::parse("(mail=bob@example.com)", 8).unwrap());
    let bob_view = &directory.bob.1;
    assert!(filter.evaluate(bob_view).is_true());

    // Anonymous has no search access to mail on bob: the item is Undefined, so it cannot
    // match, and neither can its negation (no probing by `(!(mail=...))`).
    let anonymous = policy.subject(None, &groups);
    let as_anonymous: EntryAccess<'_> = policy.for_entry(&anonymous, &directory.bob.0, bob_view);
    let restricted = as_anonymous.restrict_filter(&filter);
    assert_eq!(restricted.evaluate(bob_view), lmdir_schema::Tri::Undefined);
    let negated = schema
        .prepare_filter(&lmdir_schema::Filter::parse("(!(mail=nobody@example.com))", 8).unwrap());
    assert!(negated.evaluate(bob_view).is_true());
    assert_eq!(
        as_anonymous.restrict_filter(&negated).evaluate(bob_view),
        lmdir_schema::Tri::Undefined
    );

    // Bob himself may search his mail: the filter is used unchanged (borrowed).
    let bob = policy.subject(Some(&directory.bob.0), &groups);
    let as_bob = policy.for_entry(&bob, &directory.bob.0, bob_view);
    assert!(matches!(
        as_bob.restrict_filter(&filter),
        std::borrow::Cow::Borrowed(_)
    ));
    assert!(as_bob.restrict_filter(&filter).evaluate(bob_view).is_true());

    // A supertype filter keeps only the visible subtypes: (name=bob) still matches via cn/sn.
    let name_filter = schema.prepare_filter(&lmdir_schema::Filter::parse("(name=bob)", 8).unwrap());
    let rules = vec![
        AccessRuleSpec {
            attrs: vec!["cn".into()],
            by: vec![grant("*", "none")],
            ..AccessRuleSpec::default()
        },
        AccessRuleSpec {
            by: vec![grant("*", "read")],
            ..AccessRuleSpec::default()
        },
    ];
    let cn_hidden = AccessPolicy::from_rules(&rules, schema, SUFFIX, None).unwrap();
    let anonymous = cn_hidden.subject(None, &groups);
    let access = cn_hidden.for_entry(&anonymous, &directory.bob.0, bob_view);
    assert!(
        access
            .restrict_filter(&name_filter)
            .evaluate(bob_view)
            .is_true(),
        "sn=bob is still visible"
    );
    let cn_filter = schema.prepare_filter(&lmdir_schema::Filter::parse("(cn=bob)", 8).unwrap());
    assert_eq!(
        access.restrict_filter(&cn_filter).evaluate(bob_view),
        lmdir_schema::Tri::Undefined
    );
}

#[test]
fn groups_resolved_ahead_give_the_same_decisions() {
    let directory = directory();
    let policy =
        AccessPolicy::from_rules(&configured_rules(), &directory.schema, SUFFIX, Some(ROOTDN))
            .unwrap();
    assert_eq!(policy.group_dns(), vec![directory.admins_ndn.as_str()]);
    let carol = ResolvedGroups::new(directory.carol_ndn.clone(), [directory.admins_ndn.clone()]);
    let as_carol = policy.for_entry(
        &policy.subject(Some(&directory.carol_ndn), &carol),
        &directory.bob.0,
        &directory.bob.1,
    );
    assert!(
        as_carol.can_write_children(),
        "admins write everything outside the people rules"
    );
    assert!(as_carol.can_write_attribute(directory.schema.attribute("userPassword").unwrap()));
    // The same resolved set does not make another user a member.
    let alice_ndn = directory.alice.0.clone();
    let as_alice = policy.for_entry(
        &policy.subject(Some(&alice_ndn), &carol),
        &directory.bob.0,
        &directory.bob.1,
    );
    assert!(!as_alice.can_write_children());
    // Nor does it reach anonymous subjects.
    let as_anonymous = policy.for_entry(
        &policy.subject(None, &carol),
        &directory.bob.0,
        &directory.bob.1,
    );
    assert!(!as_anonymous.can_read_entry());
    assert!(as_anonymous.can_search_entry());
}
