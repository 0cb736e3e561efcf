//! lmdir-access: the server's security decisions as a library: password schemes
//! ([`password`]) and access control ([`acl`]).
//!
//! ```
//! use lmdir_access::acl::{AccessPolicy, TargetPart};
//! use lmdir_access::password;
//! use lmdir_schema::{Dn, Entry, OwnedEntryView, Schema};
//!
//! let schema = Schema::builtin();
//! // No [[access]] rules: the secure default policy.
//! let policy = AccessPolicy::from_config(&[], &schema, "dc=example,dc=com", "cn=admin,dc=example,dc=com")?;
//!
//! let stored = password::hash(password::Scheme::Ssha, b"secret")?;
//! let mut entry = Entry::new(Dn::parse("uid=bob,ou=People,dc=example,dc=com")?);
//! entry.add_values("objectClass", [b"inetOrgPerson".to_vec()]);
//! entry.add_values("cn", [b"Bob".to_vec()]);
//! entry.add_values("sn", [b"Builder".to_vec()]);
//! entry.add_values("userPassword", [stored.clone()]);
//! let entry_ndn = schema.normalize_dn(&entry.dn)?;
//! let view = OwnedEntryView::new(&schema, &entry)?;
//! let user_password = schema.attribute("userPassword").unwrap();
//!
//! // Bind as bob: evaluated for the anonymous subject, then the password is checked.
//! let no_groups = |_: &str, _: &str| false;
//! let anonymous = policy.subject(None, &no_groups);
//! let as_anonymous = policy.for_entry(&anonymous, &entry_ndn, &view);
//! assert!(as_anonymous.can_authenticate_with(user_password));
//! assert!(password::verify(&stored, b"secret"));
//! // Anonymous reads the entry but not its password.
//! assert!(as_anonymous.can_read_entry());
//! assert!(!as_anonymous.can_read_attribute(user_password));
//! // Bob may change his own password, but not his name.
//! let bob = policy.subject(Some(&entry_ndn), &no_groups);
//! let as_bob = policy.for_entry(&bob, &entry_ndn, &view);
//! assert!(as_bob.can_write_attribute(user_password));
//! assert!(!as_bob.allowed(TargetPart::Attribute(schema.attribute("cn").unwrap()), lmdir_access::acl::Access::Write));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod acl;
pub mod password;
