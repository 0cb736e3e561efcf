//! The policy built from a real `lmdir.toml` `[[access]]` section.

use lmdir_access::acl::{Access, AccessPolicy, TargetPart};
use lmdir_config::Config;
use lmdir_schema::{Dn, Entry, OwnedEntryView, Schema};

const CONFIG: &str = r#"
[database]
suffix = "dc=example,dc=com"
rootdn = "cn=admin,dc=example,dc=com"

[[access]]
to = { subtree = "ou=people,dc=example,dc=com", attrs = ["userPassword"] }
by = [ { who = "self", access = "write" },
       { who = "anonymous", access = "auth" },
       { who = "group=cn=admins,ou=groups,dc=example,dc=com", access = "write" },
       { who = "*", access = "none" } ]

[[access]]
to = { subtree = "ou=people,dc=example,dc=com", filter = "(objectClass=inetOrgPerson)", attrs = ["mail"] }
by = [ { who = "self", access = "write" }, { who = "users", access = "compare" } ]

[[access]]
to = {}
by = [ { who = "dn.subtree=ou=people,dc=example,dc=com", access = "read" },
       { who = "anonymous", access = "search" } ]
"#;

fn bob(schema: &Schema) -> (String, OwnedEntryView) {
    let mut entry = Entry::new(Dn::parse("uid=bob,ou=People,dc=example,dc=com").unwrap());
    entry.add_values("objectClass", [b"inetOrgPerson".to_vec()]);
    entry.add_values("uid", [b"bob".to_vec()]);
    entry.add_values("cn", [b"bob".to_vec()]);
    entry.add_values("sn", [b"bob".to_vec()]);
    entry.add_values("mail", [b"bob@example.com".to_vec()]);
    (
        schema.normalize_dn(&entry.dn).unwrap(),
        OwnedEntryView::new(schema, &entry).unwrap(),
    )
}

#[test]
fn config_rules_become_a_policy() {
    let config = Config::from_str(CONFIG, "test.toml").expect("valid config");
    let schema = Schema::builtin();
    let policy = AccessPolicy::from_config(
        &config.access,
        &schema,
        &config.database.suffix,
        &config.database.rootdn,
    )
    .expect("valid rules");
    assert!(!policy.is_default());
    assert!(policy.uses_groups());
    let (bob_ndn, bob_view) = bob(&schema);
    let password = TargetPart::Attribute(schema.attribute("userPassword").unwrap());
    let mail = TargetPart::Attribute(schema.attribute("mail").unwrap());
    let groups = |_: &str, _: &str| false;

    let anonymous = policy.subject(None, &groups);
    let as_anonymous = policy.for_entry(&anonymous, &bob_ndn, &bob_view);
    assert_eq!(as_anonymous.level(password), Access::Auth);
    assert_eq!(
        as_anonymous.level(mail),
        Access::None,
        "rule 1 has no clause for anonymous"
    );
    assert_eq!(as_anonymous.level(TargetPart::Entry), Access::Search);

    let alice_ndn = schema
        .normalize_dn_str("uid=alice,ou=people,dc=example,dc=com")
        .unwrap();
    let alice = policy.subject(Some(&alice_ndn), &groups);
    let as_alice = policy.for_entry(&alice, &bob_ndn, &bob_view);
    assert_eq!(as_alice.level(password), Access::None);
    assert_eq!(as_alice.level(mail), Access::Compare);
    assert_eq!(as_alice.level(TargetPart::Entry), Access::Read);

    let rootdn = schema
        .normalize_dn_str("cn=admin,dc=example,dc=com")
        .unwrap();
    assert!(policy.subject(Some(&rootdn), &groups).is_rootdn);
}

#[test]
fn empty_config_gives_the_default_policy_and_empty_rootdn_means_none() {
    let config = Config::from_str("[database]\nsuffix = \"dc=example,dc=com\"\n", "test.toml")
        .expect("valid config");
    let schema = Schema::builtin();
    let policy = AccessPolicy::from_config(&config.access, &schema, &config.database.suffix, "")
        .expect("default");
    assert!(policy.is_default());
    let groups = |_: &str, _: &str| false;
    assert!(!policy.subject(Some(""), &groups).is_rootdn);
}

#[test]
fn schema_level_mistakes_are_caught_when_the_policy_is_built() {
    // The config checks shapes; the attribute only becomes unknown against the schema.
    let text = CONFIG.replace("attrs = [\"mail\"]", "attrs = [\"mial\"]");
    let config = Config::from_str(&text, "test.toml").expect("shape is valid");
    let schema = Schema::builtin();
    let error = AccessPolicy::from_config(
        &config.access,
        &schema,
        &config.database.suffix,
        &config.database.rootdn,
    )
    .expect_err("unknown attribute");
    assert_eq!(
        error.to_string(),
        "access rule 1: to.attrs[0]: unknown attribute type 'mial'"
    );
}

/// lmdir's own secrets (lmdirBearerToken) are kept by a rule before the configured ones:
/// under `to * by * read` nobody but the entry itself reads them, and others may only
/// authenticate; the replicas the config names read them, so they replicate as the configured
/// rules let everything else replicate.
#[test]
fn lmdir_secrets_stay_protected_and_replicas_read_them() {
    let text = r#"
[database]
suffix = "dc=example,dc=com"
rootdn = "cn=admin,dc=example,dc=com"

[replication]
replica_dns = ["cn=replicator,dc=example,dc=com"]

[[access]]
to = {}
by = [ { who = "users", access = "write" }, { who = "*", access = "read" } ]
"#;
    let config = Config::from_str(text, "test.toml").expect("valid config");
    let schema = Schema::builtin();
    let (bob_ndn, bob_view) = bob(&schema);
    let token = TargetPart::Attribute(schema.attribute("lmdirBearerToken").unwrap());
    let groups = |_: &str, _: &str| false;
    let level = |policy: &AccessPolicy, who: Option<&str>| {
        let ndn = who.map(|dn| schema.normalize_dn_str(dn).unwrap());
        let subject = policy.subject(ndn.as_deref(), &groups);
        policy.for_entry(&subject, &bob_ndn, &bob_view).level(token)
    };
    let replicator = Some("cn=replicator,dc=example,dc=com");
    let alice = Some("uid=alice,ou=people,dc=example,dc=com");
    let bob = Some("uid=bob,ou=People,dc=example,dc=com");
    for policy in [
        AccessPolicy::for_config(&config, &schema).expect("valid"),
        AccessPolicy::from_config(
            &config.access,
            &schema,
            &config.database.suffix,
            &config.database.rootdn,
        )
        .expect("valid"),
    ] {
        assert_eq!(level(&policy, None), Access::Auth);
        assert_eq!(level(&policy, alice), Access::Auth);
        assert_eq!(level(&policy, bob), Access::Write);
    }
    let with_replicas = AccessPolicy::for_config(&config, &schema).unwrap();
    assert_eq!(level(&with_replicas, replicator), Access::Read);
    let without = AccessPolicy::from_config(
        &config.access,
        &schema,
        &config.database.suffix,
        &config.database.rootdn,
    )
    .unwrap();
    assert_eq!(level(&without, replicator), Access::Auth);
}
