//! `to = { one = ... }` / `to = { children = ... }` and `who = "dn.one=..."` /
//! `"dn.children=..."`: slapd's `dn.one` (entries exactly one level below, not the DN itself) and
//! `dn.children` (every entry below, not the DN itself), for targets and for requesters.

use lmdir_access::acl::{Access, AccessPolicy, TargetPart};
use lmdir_config::{Config, Who};
use lmdir_schema::{Dn, Entry, OwnedEntryView, Schema};

const CONFIG: &str = r#"
[database]
suffix = "dc=example,dc=com"
rootdn = "cn=admin,dc=example,dc=com"

[[access]]
to = { one = "ou=People,dc=example,dc=com", attrs = ["telephoneNumber"] }
by = [ { who = "self", access = "read" }, { who = "*", access = "none" } ]

[[access]]
to = { children = "ou=People,dc=example,dc=com", attrs = ["description"] }
by = [ { who = "dn.one=ou=People,dc=example,dc=com", access = "read" } ]

[[access]]
to = {}
by = [ { who = "dn.children=ou=People,dc=example,dc=com", access = "read" },
       { who = "*", access = "search" } ]
"#;

const PEOPLE: &str = "ou=People,dc=example,dc=com";
const ANN: &str = "uid=ann,ou=People,dc=example,dc=com";
const BOB: &str = "uid=bob,ou=People,dc=example,dc=com";
const CAT: &str = "uid=cat,ou=Staff,ou=People,dc=example,dc=com";
const DAN: &str = "uid=dan,ou=Others,dc=example,dc=com";

fn entry(schema: &Schema, dn: &str) -> (String, OwnedEntryView) {
    let mut entry = Entry::new(Dn::parse(dn).unwrap());
    entry.add_values("objectClass", [b"extensibleObject".to_vec()]);
    entry.add_values("description", [b"about".to_vec()]);
    entry.add_values("telephoneNumber", [b"+1 555 0100".to_vec()]);
    (
        schema.normalize_dn(&entry.dn).unwrap(),
        OwnedEntryView::new(schema, &entry).unwrap(),
    )
}

fn policy(schema: &Schema) -> AccessPolicy {
    let config = Config::from_str(CONFIG, "scopes.toml").expect("valid config");
    AccessPolicy::from_config(
        &config.access,
        schema,
        &config.database.suffix,
        &config.database.rootdn,
    )
    .expect("valid rules")
}

/// The level `requester` (None: anonymous) holds on `part` of the entry `target`.
fn level(
    policy: &AccessPolicy,
    schema: &Schema,
    requester: Option<&str>,
    target: &str,
    part: TargetPart,
) -> Access {
    let no_groups = |_: &str, _: &str| false;
    let bound = requester.map(|dn| schema.normalize_dn_str(dn).unwrap());
    let subject = policy.subject(bound.as_deref(), &no_groups);
    let (ndn, view) = entry(schema, target);
    policy.for_entry(&subject, &ndn, &view).level(part)
}

#[test]
fn one_level_and_children_targets_and_requesters() {
    let schema = Schema::builtin();
    let policy = policy(&schema);
    let phone = TargetPart::Attribute(schema.attribute("telephoneNumber").unwrap());
    let description = TargetPart::Attribute(schema.attribute("description").unwrap());
    let level = |requester, target, part| level(&policy, &schema, requester, target, part);

    // Rule 1 covers ann's phone (one level below), not ou=People's nor cat's (two levels).
    assert_eq!(level(Some(ANN), ANN, phone), Access::Read);
    assert_eq!(level(Some(BOB), ANN, phone), Access::None);
    assert_eq!(
        level(Some(BOB), CAT, phone),
        Access::Read,
        "rule 3: bob is below People"
    );
    assert_eq!(level(Some(BOB), PEOPLE, phone), Access::Read, "rule 3");
    assert_eq!(level(Some(DAN), PEOPLE, phone), Access::Search, "rule 3");

    // Rule 2 covers the descriptions below ou=People (cat's too), not its own; ann and bob are
    // one level below People, cat is not, nor is ou=People itself.
    assert_eq!(level(Some(BOB), CAT, description), Access::Read);
    assert_eq!(level(Some(ANN), BOB, description), Access::Read);
    assert_eq!(level(Some(CAT), BOB, description), Access::None);
    assert_eq!(level(Some(PEOPLE), BOB, description), Access::None);
    assert_eq!(level(None, BOB, description), Access::None);
    assert_eq!(level(Some(DAN), PEOPLE, description), Access::Search);

    // Rule 3: `dn.children` names cat (two levels below) but not ou=People itself.
    assert_eq!(level(Some(CAT), DAN, TargetPart::Entry), Access::Read);
    assert_eq!(level(Some(PEOPLE), DAN, TargetPart::Entry), Access::Search);
    assert_eq!(level(None, DAN, TargetPart::Entry), Access::Search);
}

/// The per-search shortcuts (one decision for every entry at or below a base) see the new scopes
/// as they are: `children` covers everything strictly below its DN, `one` never a whole subtree.
#[test]
fn scope_decisions_for_a_search_base() {
    let schema = Schema::builtin();
    let rules = r#"
[database]
suffix = "dc=example,dc=com"
[[access]]
to = { children = "ou=People,dc=example,dc=com" }
by = [ { who = "*", access = "read" } ]
[[access]]
to = { one = "ou=Others,dc=example,dc=com" }
by = [ { who = "*", access = "search" } ]
[[access]]
to = {}
by = [ { who = "*", access = "none" } ]
"#;
    let config = Config::from_str(rules, "scopes.toml").unwrap();
    let policy =
        AccessPolicy::from_config(&config.access, &schema, "dc=example,dc=com", "").unwrap();
    let no_groups = |_: &str, _: &str| false;
    let anonymous = policy.subject(None, &no_groups);
    let ndn = |dn: &str| schema.normalize_dn_str(dn).unwrap();
    let within = |base: &str| policy.for_subject_within(&anonymous, &ndn(base));

    // Below ann: every entry is strictly below ou=People.
    assert_eq!(
        within(ANN).level_everywhere(TargetPart::Entry),
        Access::Read
    );
    assert!(within(ANN).uniform_entry_access().is_some());
    // At ou=People: ou=People itself falls to the last rule.
    assert_eq!(
        within(PEOPLE).level_everywhere(TargetPart::Entry),
        Access::None
    );
    assert!(within(PEOPLE).uniform_entry_access().is_none());
    assert_eq!(
        within(PEOPLE).level_somewhere(TargetPart::Entry),
        Access::Read
    );
    // ou=Others: its children are searchable, it and their children are not.
    assert_eq!(
        within(DAN).level_somewhere(TargetPart::Entry),
        Access::Search
    );
    assert!(within(DAN).uniform_entry_access().is_none());
    let below_dan = "cn=x,uid=dan,ou=Others,dc=example,dc=com";
    assert_eq!(
        within(below_dan).level_somewhere(TargetPart::Entry),
        Access::None
    );
}

#[test]
fn who_words_and_config_checks() {
    for (text, who) in [
        ("dn.one=ou=a,dc=x", Who::DnOne("ou=a,dc=x".into())),
        ("dn.onelevel=ou=a,dc=x", Who::DnOne("ou=a,dc=x".into())),
        ("dn.children=ou=a,dc=x", Who::DnChildren("ou=a,dc=x".into())),
    ] {
        assert_eq!(Who::try_from(text.to_string()), Ok(who.clone()));
        assert_eq!(Who::try_from(who.to_string()), Ok(who));
    }
    let two = "[database]\nsuffix = \"dc=x\"\n[[access]]\n\
               to = { subtree = \"dc=x\", children = \"dc=x\" }\nby = [ { who = \"*\", access = \"read\" } ]\n";
    let error = Config::from_str(two, "two.toml").unwrap_err().to_string();
    assert!(
        error.contains("at most one of subtree, dn, one and children"),
        "{error}"
    );
    let bad = "[database]\nsuffix = \"dc=x\"\n[[access]]\n\
               to = { one = \"ou=,,dc=x\" }\nby = [ { who = \"*\", access = \"read\" } ]\n";
    let error = Config::from_str(bad, "bad.toml").unwrap_err().to_string();
    assert!(error.contains("one"), "{error}");
}
