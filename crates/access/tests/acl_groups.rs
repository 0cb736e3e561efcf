//! `who = "group/<objectClass>/<attribute>=<DN>"`: slapd's group clause, with its class and member
//! attribute resolved against the schema and handed to `GroupMembership::is_member_of`; lmdir's
//! own `group=` keeps asking `is_member`.

use std::cell::RefCell;

use lmdir_access::acl::{Access, AccessPolicy, ExactGroup, GroupMembership, TargetPart};
use lmdir_config::{Config, Who};
use lmdir_schema::{Dn, Entry, OwnedEntryView, Schema};

const GROUP: &str = "cn=Staff,ou=Groups,dc=example,dc=com";
const MEMBER: &str = "uid=ann,ou=People,dc=example,dc=com";

fn policy_for(schema: &Schema, who: &str) -> Result<AccessPolicy, String> {
    let text = format!(
        "[database]\nsuffix = \"dc=example,dc=com\"\n[[access]]\nto = {{}}\n\
         by = [ {{ who = \"{who}\", access = \"read\" }} ]\n"
    );
    let config = Config::from_str(&text, "groups.toml").map_err(|error| error.to_string())?;
    AccessPolicy::from_config(&config.access, schema, "dc=example,dc=com", "")
        .map_err(|error| error.to_string())
}

/// Records what it is asked; `exact` answers `is_member_of`, `plain` answers `is_member`.
#[derive(Default)]
struct Recorder {
    exact: bool,
    plain: bool,
    asked: RefCell<Vec<ExactGroup>>,
}

impl GroupMembership for Recorder {
    fn is_member(&self, _: &str, _: &str) -> bool {
        self.plain
    }

    fn is_member_of(&self, group: &ExactGroup, _: &str) -> bool {
        self.asked.borrow_mut().push(group.clone());
        self.exact
    }
}

fn level(policy: &AccessPolicy, schema: &Schema, groups: &dyn GroupMembership) -> Access {
    let mut entry = Entry::new(Dn::parse("uid=bob,ou=People,dc=example,dc=com").unwrap());
    entry.add_values("objectClass", [b"person".to_vec()]);
    entry.add_values("cn", [b"bob".to_vec()]);
    entry.add_values("sn", [b"bob".to_vec()]);
    let ndn = schema.normalize_dn(&entry.dn).unwrap();
    let view = OwnedEntryView::new(schema, &entry).unwrap();
    let member = schema.normalize_dn_str(MEMBER).unwrap();
    let subject = policy.subject(Some(&member), groups);
    policy
        .for_entry(&subject, &ndn, &view)
        .level(TargetPart::Entry)
}

#[test]
fn the_class_and_attribute_reach_is_member_of() {
    let schema = Schema::builtin();
    let exact = policy_for(
        &schema,
        &format!("group/groupOfUniqueNames/uniqueMember={GROUP}"),
    )
    .unwrap();
    assert!(exact.uses_groups());
    let yes = Recorder {
        exact: true,
        ..Recorder::default()
    };
    assert_eq!(level(&exact, &schema, &yes), Access::Read);
    let asked = yes.asked.borrow();
    assert_eq!(
        asked[0],
        ExactGroup {
            ndn: schema.normalize_dn_str(GROUP).unwrap(),
            object_class_attribute: schema.object_class_attribute(),
            object_class: "groupofuniquenames".into(),
            member_attribute: schema.attribute("uniqueMember").unwrap(),
        }
    );
    // The plain answer does not count for the exact form, and a closure (no is_member_of)
    // denies it.
    let plain_only = Recorder {
        plain: true,
        ..Recorder::default()
    };
    assert_eq!(level(&exact, &schema, &plain_only), Access::None);
    let everyone_is_a_member = |_: &str, _: &str| true;
    assert_eq!(level(&exact, &schema, &everyone_is_a_member), Access::None);

    // lmdir's `group=` asks is_member only.
    let plain = policy_for(&schema, &format!("group={GROUP}")).unwrap();
    assert_eq!(level(&plain, &schema, &plain_only), Access::Read);
    let exact_only = Recorder {
        exact: true,
        ..Recorder::default()
    };
    assert_eq!(level(&plain, &schema, &exact_only), Access::None);
}

#[test]
fn names_are_resolved_and_checked() {
    let schema = Schema::builtin();
    // Names in any case, or OIDs, resolve to the class's primary name.
    let by_oid = policy_for(&schema, &format!("group/2.5.6.9/2.5.4.31={GROUP}")).unwrap();
    let yes = Recorder {
        exact: true,
        ..Recorder::default()
    };
    assert_eq!(level(&by_oid, &schema, &yes), Access::Read);
    assert_eq!(yes.asked.borrow()[0].object_class, "groupofnames");
    assert_eq!(
        yes.asked.borrow()[0].member_attribute,
        schema.attribute("member").unwrap()
    );

    for (who, expected) in [
        ("group/noSuchClass/member", "unknown object class"),
        (
            "group/groupOfNames/noSuchAttribute",
            "unknown attribute type",
        ),
        (
            "group/groupOfNames/cn",
            "not of DN or NameAndOptionalUID syntax",
        ),
        ("group/groupOfNames", "group/<objectClass>/<attribute>=<DN>"),
    ] {
        let error = policy_for(&schema, &format!("{who}={GROUP}")).unwrap_err();
        assert!(error.contains(expected), "{who}: {error}");
    }
    let who = Who::try_from(format!("group/groupOfNames/member={GROUP}")).unwrap();
    assert_eq!(
        who.to_string(),
        format!("group/groupOfNames/member={GROUP}")
    );
}
