//! Properties of policy evaluation over randomly generated policies and filters.

use lmdir_access::acl::{Access, AccessGrantSpec, AccessPolicy, AccessRuleSpec, TargetPart};
use lmdir_schema::{Dn, Entry, Filter, OwnedEntryView, Schema, Tri};
use proptest::prelude::*;

const SUFFIX: &str = "dc=example,dc=com";
const ATTRIBUTES: &[&str] = &[
    "cn",
    "sn",
    "name",
    "mail",
    "uid",
    "objectClass",
    "description",
    "userPassword",
];
const VALUES: &[&str] = &[
    "bob",
    "Bob",
    "x",
    "bob@example.com",
    "inetOrgPerson",
    "b",
    "secret",
];
const LEVELS: &[&str] = &["none", "auth", "compare", "search", "read", "write"];
const WHOS: &[&str] = &[
    "*",
    "anonymous",
    "users",
    "self",
    "dn.subtree=ou=people,dc=example,dc=com",
    "dn.one=ou=people,dc=example,dc=com",
    "dn.children=dc=example,dc=com",
];

fn bob(schema: &Schema) -> (String, OwnedEntryView) {
    let mut entry = Entry::new(Dn::parse("uid=bob,ou=People,dc=example,dc=com").unwrap());
    entry.add_values("objectClass", [b"inetOrgPerson".to_vec()]);
    entry.add_values("uid", [b"bob".to_vec()]);
    entry.add_values("cn", [b"Bob".to_vec(), b"Bobby".to_vec()]);
    entry.add_values("sn", [b"Builder".to_vec()]);
    entry.add_values("mail", [b"bob@example.com".to_vec()]);
    entry.add_values("userPassword", [b"secret".to_vec()]);
    (
        schema.normalize_dn(&entry.dn).unwrap(),
        OwnedEntryView::new(schema, &entry).unwrap(),
    )
}

fn rule_strategy() -> impl Strategy<Value = AccessRuleSpec> {
    (
        proptest::collection::vec(proptest::sample::select(ATTRIBUTES), 0..3),
        proptest::collection::vec(
            (
                proptest::sample::select(WHOS),
                proptest::sample::select(LEVELS),
            ),
            1..4,
        ),
        any::<bool>(),
        0..7u8,
    )
        .prop_map(|(attrs, by, with_filter, place)| AccessRuleSpec {
            attrs: attrs.into_iter().map(String::from).collect(),
            filter: with_filter.then(|| "(objectClass=inetOrgPerson)".to_string()),
            subtree: match place {
                1 => Some("ou=people,dc=example,dc=com".to_string()),
                2 => Some("ou=groups,dc=example,dc=com".to_string()),
                _ => None,
            },
            dn: (place == 3).then(|| "uid=bob,ou=people,dc=example,dc=com".to_string()),
            one: (place == 5).then(|| "ou=people,dc=example,dc=com".to_string()),
            children: (place == 6).then(|| "ou=people,dc=example,dc=com".to_string()),
            by: by
                .into_iter()
                .map(|(who, access)| AccessGrantSpec {
                    who: who.into(),
                    access: access.into(),
                })
                .collect(),
        })
}

fn leaf_strategy() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(ATTRIBUTES),
        proptest::sample::select(VALUES),
        0..4u8,
    )
        .prop_map(|(attribute, value, kind)| match kind {
            0 => format!("({attribute}={value})"),
            1 => format!("({attribute}=*)"),
            2 => format!("({attribute}={value}*)"),
            _ => format!("({attribute}~={value})"),
        })
}

fn filter_strategy() -> impl Strategy<Value = String> {
    leaf_strategy().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 1..3)
                .prop_map(|children| format!("(&{})", children.concat())),
            proptest::collection::vec(inner.clone(), 1..3)
                .prop_map(|children| format!("(|{})", children.concat())),
            inner.prop_map(|child| format!("(!{child})")),
        ]
    })
}

fn subject_strategy() -> impl Strategy<Value = Option<&'static str>> {
    proptest::sample::select(vec![
        None,
        Some("uid=bob,ou=people,dc=example,dc=com"),
        Some("uid=alice,ou=people,dc=example,dc=com"),
        Some("cn=outsider,dc=example,dc=com"),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Restricting a filter to what the subject may search never makes it match where it
    /// did not, nor fail where it matched: each result is the original or Undefined.
    #[test]
    fn restriction_only_moves_results_to_undefined(
        rules in proptest::collection::vec(rule_strategy(), 0..4),
        filter_text in filter_strategy(),
        bound in subject_strategy(),
    ) {
        let schema = Schema::builtin();
        let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, None).unwrap();
        let (bob_ndn, bob_view) = bob(&schema);
        let groups = |_: &str, _: &str| false;
        let subject = policy.subject(bound, &groups);
        let access = policy.for_entry(&subject, &bob_ndn, &bob_view);
        let filter = schema.prepare_filter(&Filter::parse(&filter_text, 16).unwrap());
        let original = filter.evaluate(&bob_view);
        let restricted = access.restrict_filter(&filter).evaluate(&bob_view);
        prop_assert!(restricted == original || restricted == Tri::Undefined,
            "{filter_text}: original {original:?}, restricted {restricted:?}");
    }

    /// Levels are monotone (holding a level allows every lower one), `allowed` agrees with
    /// `for_entry`, and the rootdn is allowed everything whatever the rules.
    #[test]
    fn levels_are_monotone_and_rootdn_is_unlimited(
        rules in proptest::collection::vec(rule_strategy(), 0..4),
        bound in subject_strategy(),
        attribute in proptest::sample::select(ATTRIBUTES),
    ) {
        let schema = Schema::builtin();
        let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, Some("cn=admin,dc=example,dc=com")).unwrap();
        let (bob_ndn, bob_view) = bob(&schema);
        let groups = |_: &str, _: &str| false;
        let subject = policy.subject(bound, &groups);
        let access = policy.for_entry(&subject, &bob_ndn, &bob_view);
        let levels = [Access::None, Access::Auth, Access::Compare, Access::Search, Access::Read, Access::Write];
        for part in [TargetPart::Entry, TargetPart::Children, TargetPart::Attribute(schema.attribute(attribute).unwrap())] {
            let held = access.level(part);
            for level in levels {
                prop_assert_eq!(access.allowed(part, level), held >= level);
                let target = lmdir_access::acl::Target { entry_ndn: &bob_ndn, entry: &bob_view, part };
                prop_assert_eq!(policy.allowed(&subject, &target, level), held >= level);
            }
        }
        let rootdn = policy.subject(Some("cn=admin,dc=example,dc=com"), &groups);
        let as_rootdn = policy.for_entry(&rootdn, &bob_ndn, &bob_view);
        prop_assert_eq!(as_rootdn.level(TargetPart::Entry), Access::Write);
        prop_assert_eq!(as_rootdn.level(TargetPart::Attribute(schema.attribute(attribute).unwrap())), Access::Write);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A subject's level "everywhere" is a lower bound of its level on any entry, so a decision
    /// made from it (index candidates, stored child counts) never grants what an entry denies.
    #[test]
    fn level_everywhere_bounds_every_entry(
        rules in proptest::collection::vec(rule_strategy(), 0..4),
        bound in subject_strategy(),
        attribute in proptest::sample::select(ATTRIBUTES),
    ) {
        let schema = Schema::builtin();
        let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, None).unwrap();
        let (bob_ndn, bob_view) = bob(&schema);
        let groups = |_: &str, _: &str| false;
        let subject = policy.subject(bound, &groups);
        let everywhere = policy.for_subject(&subject);
        let within_people = policy.for_subject_within(&subject, "ou=people,dc=example,dc=com");
        let within_bob = policy.for_subject_within(&subject, &bob_ndn);
        let access = policy.for_entry(&subject, &bob_ndn, &bob_view);
        for part in [TargetPart::Entry, TargetPart::Children, TargetPart::Attribute(schema.attribute(attribute).unwrap())] {
            prop_assert!(everywhere.level_everywhere(part) <= access.level(part));
            prop_assert!(within_people.level_everywhere(part) <= access.level(part));
            prop_assert!(within_bob.level_everywhere(part) <= access.level(part));
            // Looking at fewer entries can only raise the bound.
            prop_assert!(everywhere.level_everywhere(part) <= within_people.level_everywhere(part));
        }
    }

    /// A subject's level "somewhere" is an upper bound of its level on any entry there, so work
    /// skipped because it falls short (a search of cn=accesslog) would have shown nothing.
    #[test]
    fn level_somewhere_bounds_every_entry_from_above(
        rules in proptest::collection::vec(rule_strategy(), 0..4),
        bound in subject_strategy(),
        attribute in proptest::sample::select(ATTRIBUTES),
    ) {
        let schema = Schema::builtin();
        let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, None).unwrap();
        let (bob_ndn, bob_view) = bob(&schema);
        let groups = |_: &str, _: &str| false;
        let subject = policy.subject(bound, &groups);
        let access = policy.for_entry(&subject, &bob_ndn, &bob_view);
        for within in ["", SUFFIX, "ou=people,dc=example,dc=com", bob_ndn.as_str()] {
            let somewhere = policy.for_subject_within(&subject, within);
            for part in [TargetPart::Entry, TargetPart::Children, TargetPart::Attribute(schema.attribute(attribute).unwrap())] {
                prop_assert!(somewhere.level_somewhere(part) >= access.level(part));
            }
        }
    }

    /// An access said to be uniform below a base (a search then decides access once) is the
    /// access `for_entry` gives each entry there, on every part.
    #[test]
    fn uniform_access_is_each_entrys_access(
        rules in proptest::collection::vec(rule_strategy(), 0..4),
        bound in subject_strategy(),
        attribute in proptest::sample::select(ATTRIBUTES),
    ) {
        let schema = Schema::builtin();
        let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, None).unwrap();
        let (bob_ndn, bob_view) = bob(&schema);
        let groups = |_: &str, _: &str| false;
        let subject = policy.subject(bound, &groups);
        let access = policy.for_entry(&subject, &bob_ndn, &bob_view);
        for base in [SUFFIX, "ou=people,dc=example,dc=com", bob_ndn.as_str()] {
            let Some(uniform) = policy.for_subject_within(&subject, base).uniform_entry_access() else {
                continue;
            };
            for part in [TargetPart::Entry, TargetPart::Children, TargetPart::Attribute(schema.attribute(attribute).unwrap())] {
                prop_assert_eq!(uniform.level(part), access.level(part), "base {}", base);
            }
        }
    }

    /// The candidate filter (index candidates, the store's own test) is true wherever the
    /// subject's restricted filter is: narrowing by it never loses an entry the subject gets.
    #[test]
    fn candidate_filter_keeps_every_entry_the_restricted_filter_matches(
        rules in proptest::collection::vec(rule_strategy(), 0..4),
        filter_text in filter_strategy(),
        bound in subject_strategy(),
    ) {
        let schema = Schema::builtin();
        let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, None).unwrap();
        let (bob_ndn, bob_view) = bob(&schema);
        let groups = |_: &str, _: &str| false;
        let subject = policy.subject(bound, &groups);
        let filter = schema.prepare_filter(&Filter::parse(&filter_text, 16).unwrap());
        let restricted = policy
            .for_entry(&subject, &bob_ndn, &bob_view)
            .restrict_filter(&filter)
            .evaluate(&bob_view);
        for everywhere in [
            policy.for_subject(&subject),
            policy.for_subject_within(&subject, "ou=people,dc=example,dc=com"),
        ] {
            let candidate = everywhere.candidate_filter(&filter).evaluate(&bob_view);
            prop_assert!(!restricted.is_true() || candidate.is_true(),
                "{filter_text}: restricted {restricted:?}, candidate {candidate:?}");
        }
    }
}

/// The default policy is uniform below the suffix for anonymous searches, not for a bound
/// subject (its own entry grants it more on userPassword), nor below the monitor tree.
#[test]
fn default_policy_is_uniform_for_anonymous_only() {
    let schema = Schema::builtin();
    let policy =
        AccessPolicy::from_rules(&AccessPolicy::default_rules(&schema), &schema, SUFFIX, None)
            .unwrap();
    let groups = |_: &str, _: &str| false;
    let anonymous = policy.subject(None, &groups);
    let bound = policy.subject(Some("uid=bob,ou=people,dc=example,dc=com"), &groups);
    assert!(policy
        .for_subject_within(&anonymous, SUFFIX)
        .uniform_entry_access()
        .is_some());
    assert!(policy
        .for_subject_within(&bound, SUFFIX)
        .uniform_entry_access()
        .is_none());
    assert!(policy
        .for_subject_within(&anonymous, "cn=monitor")
        .uniform_entry_access()
        .is_none());
    assert!(policy
        .for_subject(&anonymous)
        .uniform_entry_access()
        .is_none());
}

/// With `userPassword` hidden from anonymous (the default policy), a password item narrows
/// nothing: the candidate filter does not mention it, whatever its value.
#[test]
fn candidate_filter_drops_items_hidden_anywhere() {
    let schema = Schema::builtin();
    let policy =
        AccessPolicy::from_rules(&AccessPolicy::default_rules(&schema), &schema, SUFFIX, None)
            .unwrap();
    let groups = |_: &str, _: &str| false;
    let anonymous = policy.subject(None, &groups);
    let everywhere = policy.for_subject(&anonymous);
    let candidates = |text: &str| {
        let filter = schema.prepare_filter(&Filter::parse(text, 8).unwrap());
        everywhere.candidate_filter(&filter).into_owned()
    };
    let password = schema.attribute("userPassword").unwrap();
    assert!(!everywhere.can_filter_on_everywhere(password));
    assert!(everywhere.can_filter_on_everywhere(schema.attribute("uid").unwrap()));
    assert!(everywhere.can_disclose_every_entry());
    let right = candidates("(&(uid=bob)(userPassword={SSHA}P))");
    let wrong = candidates("(&(uid=bob)(userPassword={SSHA}O))");
    assert_eq!(format!("{right:?}"), format!("{wrong:?}"));
    // Under a negation a hidden item widens to False, so the negation is True.
    let (bob_ndn, bob_view) = bob(&schema);
    let _ = bob_ndn;
    assert!(candidates("(!(userPassword=secret))")
        .evaluate(&bob_view)
        .is_true());
    assert!(candidates("(userPassword=nothing)")
        .evaluate(&bob_view)
        .is_true());
}

/// The case the property above is mostly about, written out: `name` covers `cn` and `sn`;
/// with `cn` hidden, a value only `cn` has must not decide the filter either way.
#[test]
fn partially_hidden_supertype_is_undefined_unless_a_visible_subtype_matches() {
    let schema = Schema::builtin();
    let rules = vec![
        AccessRuleSpec {
            attrs: vec!["cn".into()],
            by: vec![AccessGrantSpec {
                who: "*".into(),
                access: "compare".into(),
            }],
            ..AccessRuleSpec::default()
        },
        AccessRuleSpec {
            by: vec![AccessGrantSpec {
                who: "*".into(),
                access: "read".into(),
            }],
            ..AccessRuleSpec::default()
        },
    ];
    let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, None).unwrap();
    let (bob_ndn, bob_view) = bob(&schema);
    let groups = |_: &str, _: &str| false;
    let anonymous = policy.subject(None, &groups);
    let access = policy.for_entry(&anonymous, &bob_ndn, &bob_view);
    let evaluate = |text: &str| {
        let filter = schema.prepare_filter(&Filter::parse(text, 8).unwrap());
        (
            filter.evaluate(&bob_view),
            access.restrict_filter(&filter).evaluate(&bob_view),
        )
    };
    // Only cn has "Bobby": hidden, so neither a match nor a provable non-match.
    assert_eq!(evaluate("(name=bobby)"), (Tri::True, Tri::Undefined));
    assert_eq!(evaluate("(!(name=bobby))"), (Tri::False, Tri::Undefined));
    assert_eq!(evaluate("(name=nobody)"), (Tri::False, Tri::Undefined));
    // sn is visible: a match through it stands.
    assert_eq!(evaluate("(name=builder)"), (Tri::True, Tri::True));
    // cn alone is fully hidden.
    assert_eq!(evaluate("(cn=bobby)"), (Tri::True, Tri::Undefined));
    // Untouched attributes evaluate as before.
    assert_eq!(evaluate("(uid=bob)"), (Tri::True, Tri::True));
    assert_eq!(evaluate("(!(uid=alice))"), (Tri::True, Tri::True));
}

/// Issue 19 item 5: the built-in policy protects every secret attribute as userPassword (the
/// entry itself writes, others only bind), and the lockout state is the entry's own to read,
/// never to change; nobody else but the rootdn gets anything of either.
#[test]
fn default_policy_protects_every_secret_and_the_lockout_state() {
    let schema = Schema::builtin();
    let rootdn = "cn=admin,dc=example,dc=com";
    let policy = AccessPolicy::from_rules(
        &AccessPolicy::default_rules(&schema),
        &schema,
        SUFFIX,
        Some(rootdn),
    )
    .unwrap();
    let (bob_ndn, bob_view) = bob(&schema);
    let groups = |_: &str, _: &str| false;
    let anonymous = policy.subject(None, &groups);
    let other = policy.subject(Some("uid=eve,ou=people,dc=example,dc=com"), &groups);
    let own = policy.subject(Some(&bob_ndn), &groups);
    let root = policy.subject(Some(rootdn), &groups);
    let level = |subject, name: &str| {
        let attribute = schema.attribute(name).unwrap();
        let access = policy.for_entry(subject, &bob_ndn, &bob_view);
        LEVELS_IN_ORDER
            .iter()
            .rev()
            .copied()
            .find(|&level| access.allowed(TargetPart::Attribute(attribute), level))
            .unwrap_or(Access::None)
    };
    for secret in ["userPassword", "pwdHistory"] {
        assert_eq!(level(&anonymous, secret), Access::Auth, "{secret}");
        assert_eq!(level(&other, secret), Access::Auth, "{secret}");
        assert_eq!(level(&own, secret), Access::Write, "{secret}");
    }
    for state in [
        "pwdFailureTime",
        "pwdAccountLockedTime",
        "pwdGraceUseTime",
        "pwdReset",
        "pwdLastSuccess",
        "pwdAccountTmpLockoutEnd",
    ] {
        assert_eq!(level(&anonymous, state), Access::None, "{state}");
        assert_eq!(level(&other, state), Access::None, "{state}");
        assert_eq!(level(&own, state), Access::Read, "{state}");
        assert_eq!(level(&root, state), Access::Write, "{state}");
    }
    assert_eq!(level(&anonymous, "pwdChangedTime"), Access::Read);
    assert_eq!(level(&anonymous, "mail"), Access::Read);
    // Every secret the schema defines is in the rule; an unknown one (authPassword without its
    // schema file) is left out instead of failing the policy.
    let rules = AccessPolicy::default_rules(&schema);
    assert!(rules[0].attrs.iter().any(|name| name == "pwdHistory"));
    assert!(!rules[0].attrs.iter().any(|name| name == "authPassword"));
}

const LEVELS_IN_ORDER: &[Access] = &[
    Access::None,
    Access::Auth,
    Access::Compare,
    Access::Search,
    Access::Read,
    Access::Write,
];
