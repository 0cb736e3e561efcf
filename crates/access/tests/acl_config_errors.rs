//! Policy construction refuses bad rules with errors naming the rule index and the field.

use lmdir_access::acl::{
    Access, AccessGrantSpec, AccessPolicy, AccessRuleSpec, AclError, GRANTS_PER_RULE_MAX, RULES_MAX,
};
use lmdir_schema::Schema;

const SUFFIX: &str = "dc=example,dc=com";

fn grant(who: &str, access: &str) -> AccessGrantSpec {
    AccessGrantSpec {
        who: who.into(),
        access: access.into(),
    }
}

fn good_rule() -> AccessRuleSpec {
    AccessRuleSpec {
        by: vec![grant("*", "read")],
        ..AccessRuleSpec::default()
    }
}

/// Builds a policy whose second rule (index 1) is `bad` and returns the error.
fn error_for(bad: AccessRuleSpec) -> AclError {
    let schema = Schema::builtin();
    AccessPolicy::from_rules(&[good_rule(), bad], &schema, SUFFIX, None)
        .expect_err("bad rule must be refused")
}

fn assert_rule_error(error: AclError, expected_field: &str, reason_contains: &str) {
    match &error {
        AclError::Rule {
            rule_index,
            field,
            reason,
        } => {
            assert_eq!(*rule_index, 1, "{error}");
            assert_eq!(field, expected_field, "{error}");
            assert!(reason.contains(reason_contains), "{error}");
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("access rule 1: {expected_field}: ")),
                "{error}"
            );
        }
        other => panic!("expected a rule error, got {other:?}"),
    }
}

#[test]
fn bad_subtree_dn() {
    let error = error_for(AccessRuleSpec {
        subtree: Some("ou=people,,dc=x".into()),
        ..good_rule()
    });
    assert_rule_error(error, "to.subtree", "ou=people,,dc=x");
}

#[test]
fn dn_outside_the_suffix() {
    let error = error_for(AccessRuleSpec {
        dn: Some("uid=a,dc=other,dc=org".into()),
        ..good_rule()
    });
    assert_rule_error(error, "to.dn", "outside the database suffix");
}

#[test]
fn subtree_and_dn_together() {
    let error = error_for(AccessRuleSpec {
        subtree: Some(SUFFIX.into()),
        dn: Some(SUFFIX.into()),
        ..good_rule()
    });
    assert_rule_error(error, "to", "at most one of subtree, dn, one and children");
}

#[test]
fn unparsable_filter() {
    let error = error_for(AccessRuleSpec {
        filter: Some("(objectClass=person".into()),
        ..good_rule()
    });
    assert_rule_error(error, "to.filter", "objectClass=person");
}

#[test]
fn filter_on_unknown_attribute() {
    let error = error_for(AccessRuleSpec {
        filter: Some("(&(objectClass=person)(shoeSize=42))".into()),
        ..good_rule()
    });
    assert_rule_error(error, "to.filter", "shoeSize");
}

#[test]
fn unknown_attribute_in_attrs() {
    let error = error_for(AccessRuleSpec {
        attrs: vec!["mail".into(), "shoeSize".into()],
        ..good_rule()
    });
    assert_rule_error(error, "to.attrs[1]", "shoeSize");
}

#[test]
fn unknown_who() {
    let error = error_for(AccessRuleSpec {
        by: vec![grant("*", "read"), grant("everyone", "read")],
        ..good_rule()
    });
    assert_rule_error(error, "by[1].who", "everyone");
    let error = error_for(AccessRuleSpec {
        by: vec![grant("dn.regex=.*", "read")],
        ..good_rule()
    });
    assert_rule_error(error, "by[0].who", "dn.regex");
    let error = error_for(AccessRuleSpec {
        by: vec![grant("group=not a dn", "read")],
        ..good_rule()
    });
    assert_rule_error(error, "by[0].who", "not a dn");
}

#[test]
fn unknown_access_word() {
    let error = error_for(AccessRuleSpec {
        by: vec![grant("*", "manage")],
        ..good_rule()
    });
    assert_rule_error(error, "by[0].access", "manage");
}

#[test]
fn rule_without_by_clauses() {
    let error = error_for(AccessRuleSpec {
        by: Vec::new(),
        ..good_rule()
    });
    assert_rule_error(error, "by", "no clauses");
}

#[test]
fn too_many_by_clauses() {
    let error = error_for(AccessRuleSpec {
        by: vec![grant("*", "read"); GRANTS_PER_RULE_MAX + 1],
        ..good_rule()
    });
    assert_rule_error(error, "by", "limit");
}

#[test]
fn too_many_rules() {
    let schema = Schema::builtin();
    let rules = vec![good_rule(); RULES_MAX + 1];
    match AccessPolicy::from_rules(&rules, &schema, SUFFIX, None) {
        Err(AclError::Policy { field, reason }) => {
            assert_eq!(field, "access");
            assert!(reason.contains("limit"), "{reason}");
        }
        other => panic!("expected a policy error, got {other:?}"),
    }
}

#[test]
fn bad_rootdn_and_suffix() {
    let schema = Schema::builtin();
    match AccessPolicy::from_rules(&[], &schema, SUFFIX, Some("cn=admin,,x")) {
        Err(AclError::Policy { field, .. }) => assert_eq!(field, "database.rootdn"),
        other => panic!("expected a rootdn error, got {other:?}"),
    }
    match AccessPolicy::from_rules(&[], &schema, "dc=example,=com", None) {
        Err(AclError::Policy { field, .. }) => assert_eq!(field, "database.suffix"),
        other => panic!("expected a suffix error, got {other:?}"),
    }
}

#[test]
fn words_are_case_insensitive_and_levels_ordered() {
    let schema = Schema::builtin();
    let rules = vec![AccessRuleSpec {
        attrs: vec!["USERPASSWORD".into(), "Entry".into(), "CHILDREN".into()],
        by: vec![
            grant("Self", "WRITE"),
            grant("Anonymous", "Auth"),
            grant("GROUP=cn=x,dc=example,dc=com", "Read"),
        ],
        ..AccessRuleSpec::default()
    }];
    let policy = AccessPolicy::from_rules(&rules, &schema, SUFFIX, None).expect("valid rules");
    assert!(policy.uses_groups());
    let levels = [
        Access::None,
        Access::Auth,
        Access::Compare,
        Access::Search,
        Access::Read,
        Access::Write,
    ];
    for (index, level) in levels.iter().enumerate() {
        assert_eq!(Access::from_word(level.word()), Some(*level));
        for (other_index, other) in levels.iter().enumerate() {
            assert_eq!(
                level.implies(*other),
                index >= other_index,
                "{level} implies {other}"
            );
        }
    }
}
