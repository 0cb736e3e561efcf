//! Access control: OpenLDAP `access to ... by ...` semantics over normalized DNs.
//!
//! A policy is an ordered list of rules. For a target (an entry, the entry's `children`, or
//! one attribute of the entry), the first rule whose `to` clause matches decides; inside it
//! the first `by` clause whose `who` matches the subject gives the granted level, and the
//! request is allowed when the granted level implies the requested one. A matching rule
//! without a matching `by` clause, or no matching rule at all, denies (OpenLDAP's implicit
//! `by * none` / `access to * by * none`). The rootdn is always allowed everything.
//!
//! Every DN, filter and attribute name is parsed and normalized once in
//! [`AccessPolicy::from_rules`]; evaluation only compares normalized strings and attribute
//! ids. For many checks on one entry (a search returning attributes), take an
//! [`EntryAccess`] with [`AccessPolicy::for_entry`]: it matches the rules' DN and filter
//! clauses once and answers per-attribute questions from that.

use std::borrow::Cow;
use std::fmt;

use lmdir_schema::{
    normalized_dn_is_descendant_of, normalized_dn_is_within, normalized_dn_parent, AttrId,
    CoveredAttribute, EntryView, Filter, PreparedFilter, Schema,
};

/// Most rules a policy may hold.
pub const RULES_MAX: usize = 1024;
/// Most `by` clauses in one rule.
pub const GRANTS_PER_RULE_MAX: usize = 64;
/// Most names in one rule's `attrs` list.
pub const ATTRIBUTES_PER_RULE_MAX: usize = 256;
/// Nesting limit for `to.filter`.
pub const FILTER_DEPTH_MAX: usize = 32;

/// Access levels, each implying all the ones before it (OpenLDAP's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Nothing, not even the existence of the target.
    None,
    /// May be used to authenticate (bind with the userPassword value).
    Auth,
    /// May be used in a compare operation.
    Compare,
    /// May be used in a search filter.
    Search,
    /// May be returned in search results.
    Read,
    /// May be added, modified or deleted.
    Write,
}

impl Access {
    /// Parses the config word (`none`, `auth`, `compare`, `search`, `read`, `write`),
    /// case-insensitively.
    pub fn from_word(word: &str) -> Option<Access> {
        [
            Access::None,
            Access::Auth,
            Access::Compare,
            Access::Search,
            Access::Read,
            Access::Write,
        ]
        .into_iter()
        .find(|access| access.word().eq_ignore_ascii_case(word))
    }

    /// The config word for this level.
    pub fn word(self) -> &'static str {
        match self {
            Access::None => "none",
            Access::Auth => "auth",
            Access::Compare => "compare",
            Access::Search => "search",
            Access::Read => "read",
            Access::Write => "write",
        }
    }

    /// Whether holding `self` permits an operation that needs `needed`.
    pub fn implies(self, needed: Access) -> bool {
        self >= needed
    }
}

impl fmt::Display for Access {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.word())
    }
}

/// One `[[access]]` rule as written in the config, before parsing and normalization.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessRuleSpec {
    /// `to.subtree`: the rule applies to this entry and everything below it.
    pub subtree: Option<String>,
    /// `to.dn`: the rule applies to exactly this entry.
    pub dn: Option<String>,
    /// `to.one`: the rule applies to the entries exactly one level below this one.
    pub one: Option<String>,
    /// `to.children`: the rule applies to every entry below this one, not to itself.
    pub children: Option<String>,
    /// `to.filter`: the rule applies only to entries matching this RFC 4515 filter.
    pub filter: Option<String>,
    /// `to.attrs`: attribute names (subtypes included), `entry` and `children`; empty = all.
    pub attrs: Vec<String>,
    /// `by`: `(who, access)` pairs, first match wins.
    pub by: Vec<AccessGrantSpec>,
}

impl From<&lmdir_config::AccessRule> for AccessRuleSpec {
    fn from(rule: &lmdir_config::AccessRule) -> AccessRuleSpec {
        AccessRuleSpec {
            subtree: rule.to.subtree.clone(),
            dn: rule.to.dn.clone(),
            one: rule.to.one.clone(),
            children: rule.to.children.clone(),
            filter: rule.to.filter.clone(),
            attrs: rule.to.attrs.clone(),
            by: rule
                .by
                .iter()
                .map(|clause| AccessGrantSpec {
                    // The config's `Who` displays as the config word (`dn.subtree=<DN>`, ...).
                    who: clause.who.to_string(),
                    access: clause.access.word().to_string(),
                })
                .collect(),
        }
    }
}

/// One `by = { who, access }` clause as written in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessGrantSpec {
    pub who: String,
    pub access: String,
}

/// A policy construction problem naming the rule (0-based index in the config order) and
/// the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("access rule {rule_index}: {field}: {reason}")]
    Rule {
        rule_index: usize,
        field: String,
        reason: String,
    },
    #[error("{field}: {reason}")]
    Policy { field: String, reason: String },
}

fn rule_error(rule_index: usize, field: impl Into<String>, reason: impl Into<String>) -> AclError {
    AclError::Rule {
        rule_index,
        field: field.into(),
        reason: reason.into(),
    }
}

/// Tells whether a user (normalized DN) is a member of a group (normalized DN). The server
/// implements it over the store (e.g. `member`/`uniqueMember` of the group entry); any
/// `Fn(&str, &str) -> bool` closure works too (it answers no for `group/<class>/<attribute>=`).
pub trait GroupMembership {
    /// `group=<DN>`: lmdir's own meaning (a `member` or `uniqueMember` value of the entry).
    fn is_member(&self, group_ndn: &str, member_ndn: &str) -> bool;

    /// `group/<objectClass>/<attribute>=<DN>`, slapd's: the group entry has the objectClass
    /// value and `member_ndn` is a value of exactly that attribute (equal to it: a uniqueMember
    /// value with a `#'…'B` UID does not count, as in slapd). An implementation that cannot
    /// tell answers no, which denies.
    fn is_member_of(&self, group: &ExactGroup, member_ndn: &str) -> bool {
        let _ = (group, member_ndn);
        false
    }
}

/// The group of a `group/<objectClass>/<attribute>=<DN>` clause, resolved with the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactGroup {
    /// The group entry's normalized DN.
    pub ndn: String,
    /// The `objectClass` attribute.
    pub object_class_attribute: AttrId,
    /// The class as a normalized objectClass value (its primary name, lowercased).
    pub object_class: String,
    /// The member attribute (DN or NameAndOptionalUID syntax).
    pub member_attribute: AttrId,
}

impl<F: Fn(&str, &str) -> bool> GroupMembership for F {
    fn is_member(&self, group_ndn: &str, member_ndn: &str) -> bool {
        self(group_ndn, member_ndn)
    }
}

/// The groups of one subject, resolved ahead (e.g. once per bind, for the DNs of
/// [`AccessPolicy::group_dns`]), so evaluation never touches the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedGroups {
    member_ndn: String,
    group_ndns: std::collections::HashSet<String>,
}

impl ResolvedGroups {
    /// `member_ndn` belongs to exactly the groups listed (normalized DNs).
    pub fn new(
        member_ndn: impl Into<String>,
        group_ndns: impl IntoIterator<Item = String>,
    ) -> Self {
        ResolvedGroups {
            member_ndn: member_ndn.into(),
            group_ndns: group_ndns.into_iter().collect(),
        }
    }
}

impl GroupMembership for ResolvedGroups {
    fn is_member(&self, group_ndn: &str, member_ndn: &str) -> bool {
        member_ndn == self.member_ndn && self.group_ndns.contains(group_ndn)
    }
}

/// Who is asking: the bound identity (normalized DN, `None` when anonymous), whether it is
/// the rootdn, and how to resolve its group memberships.
#[derive(Clone, Copy)]
pub struct Subject<'a> {
    pub bound_ndn: Option<&'a str>,
    pub is_rootdn: bool,
    pub groups: &'a dyn GroupMembership,
}

impl fmt::Debug for Subject<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Subject")
            .field("bound_ndn", &self.bound_ndn)
            .field("is_rootdn", &self.is_rootdn)
            .finish_non_exhaustive()
    }
}

/// Which part of an entry an access check is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetPart {
    /// The entry itself (OpenLDAP's `entry` pseudo-attribute): needed to see it in a search
    /// (search), return it (read), add or delete it (write).
    Entry,
    /// The entry's children (OpenLDAP's `children` pseudo-attribute): write is needed on the
    /// parent to add or delete an entry below it.
    Children,
    /// One attribute type of the entry.
    Attribute(AttrId),
}

/// What an access check is about: an entry (normalized DN and a view of its attributes for
/// `to.filter` rules) and a part of it.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub entry_ndn: &'a str,
    pub entry: &'a dyn EntryView,
    pub part: TargetPart,
}

/// The `who` of a `by` clause, DNs normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Who {
    Anyone,
    Anonymous,
    Users,
    SelfEntry,
    ExactDn(String),
    Subtree(String),
    /// Bound DNs exactly one level below.
    OneLevel(String),
    /// Bound DNs strictly below.
    Children(String),
    Group(String),
    GroupOf(ExactGroup),
}

#[derive(Debug, Clone)]
struct Grant {
    who: Who,
    access: Access,
}

/// Which targets of a matching entry a rule covers.
#[derive(Debug, Clone)]
struct Parts {
    /// `attrs` empty: every attribute, `entry` and `children`.
    all: bool,
    entry: bool,
    children: bool,
    /// Sorted attribute ids, each listed type expanded to its subtypes.
    attributes: Vec<AttrId>,
}

impl Parts {
    fn covers(&self, part: TargetPart) -> bool {
        if self.all {
            return true;
        }
        match part {
            TargetPart::Entry => self.entry,
            TargetPart::Children => self.children,
            TargetPart::Attribute(attr) => self.attributes.binary_search(&attr).is_ok(),
        }
    }
}

#[derive(Debug, Clone)]
enum Scope {
    All,
    Exact(String),
    Subtree(String),
    /// The entries whose parent is this DN (slapd's `dn.one`).
    OneLevel(String),
    /// The entries strictly below this DN (slapd's `dn.children`).
    Children(String),
}

impl Scope {
    /// Whether the normalized DN is in the scope.
    fn contains(&self, entry_ndn: &str) -> bool {
        match self {
            Scope::All => !is_server_tree(entry_ndn),
            Scope::Exact(ndn) => entry_ndn == ndn,
            Scope::Subtree(base) => normalized_dn_is_within(entry_ndn, base),
            Scope::OneLevel(parent) => normalized_dn_parent(entry_ndn) == Some(parent.as_str()),
            Scope::Children(ancestor) => normalized_dn_is_descendant_of(entry_ndn, ancestor),
        }
    }

    /// Whether some entry at or below `base` is in the scope.
    fn meets_subtree(&self, base: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Exact(ndn) => normalized_dn_is_within(ndn, base),
            Scope::Subtree(top) | Scope::Children(top) => {
                normalized_dn_is_within(top, base) || normalized_dn_is_descendant_of(base, top)
            }
            Scope::OneLevel(parent) => {
                normalized_dn_is_within(parent, base)
                    || normalized_dn_parent(base) == Some(parent.as_str())
            }
        }
    }

    /// Whether every entry at or below `base` is in the scope.
    fn covers_subtree(&self, base: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Subtree(top) => normalized_dn_is_within(base, top),
            Scope::Children(ancestor) => normalized_dn_is_descendant_of(base, ancestor),
            // Entries below `base` are never all one level below the same DN, nor one DN.
            Scope::Exact(_) | Scope::OneLevel(_) => false,
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    scope: Scope,
    filter: Option<PreparedFilter>,
    parts: Parts,
    grants: Vec<Grant>,
}

impl Rule {
    fn matches_entry(&self, entry_ndn: &str, entry: &dyn EntryView) -> bool {
        self.scope.contains(entry_ndn)
            && self
                .filter
                .as_ref()
                .is_none_or(|filter| filter.evaluate(entry).is_true())
    }

    /// The level the first matching `by` clause grants, `None` (the level) when none matches.
    fn granted(&self, subject: &Subject<'_>, entry_ndn: &str) -> Access {
        for grant in &self.grants {
            if grant.who.matches(subject, Some(entry_ndn)) {
                return grant.access;
            }
        }
        Access::None
    }
}

impl Who {
    /// Whether the subject is who this names; `self` needs the entry (`None`: never).
    fn matches(&self, subject: &Subject<'_>, entry_ndn: Option<&str>) -> bool {
        match self {
            Who::Anyone => true,
            Who::Anonymous => subject.bound_ndn.is_none(),
            Who::Users => subject.bound_ndn.is_some(),
            Who::SelfEntry => entry_ndn.is_some() && subject.bound_ndn == entry_ndn,
            Who::ExactDn(ndn) => subject.bound_ndn == Some(ndn.as_str()),
            Who::Subtree(base) => subject
                .bound_ndn
                .is_some_and(|bound| normalized_dn_is_within(bound, base)),
            Who::OneLevel(parent) => subject
                .bound_ndn
                .is_some_and(|bound| normalized_dn_parent(bound) == Some(parent.as_str())),
            Who::Children(ancestor) => subject
                .bound_ndn
                .is_some_and(|bound| normalized_dn_is_descendant_of(bound, ancestor)),
            Who::Group(group) => subject
                .bound_ndn
                .is_some_and(|bound| subject.groups.is_member(group, bound)),
            Who::GroupOf(group) => subject
                .bound_ndn
                .is_some_and(|bound| subject.groups.is_member_of(group, bound)),
        }
    }
}

/// A `who` outside access rules (the `[[limits]]` rules), DNs normalized, matched exactly as a
/// `by` clause's; `self` is refused (it is about an entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectSelector(Who);

impl SubjectSelector {
    /// Parses a config `who` (as a `by` clause's), normalizing its DN with the schema.
    pub fn parse(text: &str, schema: &Schema) -> Result<SubjectSelector, String> {
        match parse_who_text(text, schema)? {
            Who::SelfEntry => Err(format!("'{text}': self is only meaningful in access rules")),
            who => Ok(SubjectSelector(who)),
        }
    }

    /// Whether the subject is who this names (group membership through `subject.groups`).
    pub fn matches(&self, subject: &Subject<'_>) -> bool {
        self.0.matches(subject, None)
    }
}

/// Every attribute that holds a password or a password hash, by name and OID: the built-in
/// policy gives them the userPassword protection (self write, others auth only) and the stats
/// log never shows a value asserted on one. The one place to add another.
pub const SECRET_ATTRIBUTES: &[(&str, &str)] = &[
    ("userPassword", "2.5.4.35"),
    ("authPassword", "1.3.6.1.4.1.4203.1.3.4"),
    ("pwdHistory", "1.3.6.1.4.1.42.2.27.8.1.20"),
    // Hashed bearer tokens of the HTTP API (SCIM): a token acts as its entry, like a password.
    (
        "lmdirBearerToken",
        "2.25.252748931133857544399076788790202829374.1.1",
    ),
];

/// The attributes of `SECRET_ATTRIBUTES` lmdir itself defines (slapd has none, so no rule
/// written for slapd, nor what `lmdir migrate` translates from one, ever names them). Whatever
/// `[[access]]` says, rules placed before the configured ones keep them
/// ([`AccessPolicy::lmdir_secret_rules`]): the entry itself writes, everyone else may only
/// authenticate with them, and only the rootdn (above every rule) writes another entry's.
pub const LMDIR_SECRET_ATTRIBUTES: &[(&str, &str)] = &[(
    "lmdirBearerToken",
    "2.25.252748931133857544399076788790202829374.1.1",
)];

/// The password policy's per-account state (draft-behera): when and how often a bind failed,
/// whether the account is locked or was reset. The built-in policy lets the entry itself and
/// the rootdn read it, nobody else (it tells an attacker which accounts are near lockout).
pub const PASSWORD_POLICY_STATE_ATTRIBUTES: &[(&str, &str)] = &[
    ("pwdFailureTime", "1.3.6.1.4.1.42.2.27.8.1.19"),
    ("pwdAccountLockedTime", "1.3.6.1.4.1.42.2.27.8.1.17"),
    ("pwdGraceUseTime", "1.3.6.1.4.1.42.2.27.8.1.21"),
    ("pwdReset", "1.3.6.1.4.1.42.2.27.8.1.22"),
    ("pwdLastSuccess", "1.3.6.1.4.1.42.2.27.8.1.29"),
    ("pwdAccountTmpLockoutEnd", "1.3.6.1.4.1.42.2.27.8.1.33"),
];

/// Whether an attribute description (`userPassword;x`, `2.5.4.35`) names one of
/// `SECRET_ATTRIBUTES`, without a schema (the stats log redacts by this).
pub fn names_secret_attribute(description: &str) -> bool {
    names_one_of(SECRET_ATTRIBUTES, description)
}

/// Whether an attribute description names one of `LMDIR_SECRET_ATTRIBUTES`, without a schema
/// (the audit trail records no value of these).
pub fn names_lmdir_secret_attribute(description: &str) -> bool {
    names_one_of(LMDIR_SECRET_ATTRIBUTES, description)
}

/// Whether `description`'s type (before any `;option`) is one of `attributes`, by name (any
/// case) or OID.
fn names_one_of(attributes: &[(&str, &str)], description: &str) -> bool {
    let base = description.split(';').next().unwrap_or(description);
    attributes
        .iter()
        .any(|(name, oid)| base.eq_ignore_ascii_case(name) || base == *oid)
}

/// The monitor tree's root (normalized). Rules may name it or entries below it; a rule for
/// "all entries" (`to = {}`) covers the directory, never the monitor, so by default only the
/// rootdn reads what the server is doing.
pub const MONITOR_NDN: &str = "cn=monitor";
/// The audit trail's root (normalized): like the monitor, outside "all entries".
pub const ACCESSLOG_NDN: &str = "cn=accesslog";

/// Whether a normalized DN is in a tree the server shows besides the directory (cn=Monitor,
/// cn=accesslog): rules must name it, "all entries" never covers it.
pub fn is_server_tree(ndn: &str) -> bool {
    normalized_dn_is_within(ndn, MONITOR_NDN) || normalized_dn_is_within(ndn, ACCESSLOG_NDN)
}

/// A parsed, normalized access policy.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    rules: Vec<Rule>,
    /// How many of `rules`, first, are `lmdir_secret_rules`.
    secret_rules: usize,
    rootdn_ndn: Option<String>,
    is_default: bool,
}

/// The database suffix normalized, or the config error naming it.
fn suffix_ndn(schema: &Schema, suffix: &str) -> Result<String, AclError> {
    schema
        .normalize_dn_str(suffix)
        .map_err(|error| AclError::Policy {
            field: "database.suffix".into(),
            reason: format!("'{suffix}': {}", error.message),
        })
}

impl AccessPolicy {
    /// The rules' target filters: all an entry's values the policy's decisions read (grants
    /// name subjects and groups, never the entry's values).
    pub fn rule_filters(&self) -> impl Iterator<Item = &PreparedFilter> {
        self.rules.iter().filter_map(|rule| rule.filter.as_ref())
    }

    /// Builds the policy from config rules. With no rules the secure default applies (see
    /// [`AccessPolicy::default_rules`]). `suffix` is the database suffix: rule DNs must lie
    /// within it (a DN outside can never match and is a config mistake). `rootdn` is the
    /// config's rootdn, which may do everything.
    pub fn from_rules(
        rules: &[AccessRuleSpec],
        schema: &Schema,
        suffix: &str,
        rootdn: Option<&str>,
    ) -> Result<AccessPolicy, AclError> {
        let suffix_ndn = suffix_ndn(schema, suffix)?;
        let rootdn_ndn = rootdn
            .map(|dn| {
                schema
                    .normalize_dn_str(dn)
                    .map_err(|error| AclError::Policy {
                        field: "database.rootdn".into(),
                        reason: format!("'{dn}': {}", error.message),
                    })
            })
            .transpose()?;
        if rules.len() > RULES_MAX {
            return Err(AclError::Policy {
                field: "access".into(),
                reason: format!("{} rules, the limit is {RULES_MAX}", rules.len()),
            });
        }
        let is_default = rules.is_empty();
        let default_rules;
        let specs = if is_default {
            default_rules = AccessPolicy::default_rules(schema);
            &default_rules[..]
        } else {
            rules
        };
        let configured = specs
            .iter()
            .enumerate()
            .map(|(rule_index, spec)| parse_rule(rule_index, spec, schema, &suffix_ndn));
        // lmdir's own secrets first, before whatever was configured (or the default).
        let secret_specs = AccessPolicy::lmdir_secret_rules(schema, &[]);
        let rules = secret_specs
            .iter()
            .map(|spec| parse_rule(0, spec, schema, &suffix_ndn))
            .chain(configured)
            .collect::<Result<Vec<Rule>, AclError>>()?;
        Ok(AccessPolicy {
            rules,
            secret_rules: secret_specs.len(),
            rootdn_ndn,
            is_default,
        })
    }

    /// Builds the policy from the config's `[[access]]` rules (`config.access`), the
    /// database suffix and rootdn (`""` = no rootdn, as in the config). Errors name the rule
    /// index and field as in [`AccessPolicy::from_rules`].
    pub fn from_config(
        rules: &[lmdir_config::AccessRule],
        schema: &Schema,
        suffix: &str,
        rootdn: &str,
    ) -> Result<AccessPolicy, AclError> {
        let specs: Vec<AccessRuleSpec> = rules.iter().map(AccessRuleSpec::from).collect();
        let rootdn = (!rootdn.trim().is_empty()).then_some(rootdn);
        AccessPolicy::from_rules(&specs, schema, suffix, rootdn)
    }

    /// The policy of a whole config: its `[[access]]` rules, suffix and rootdn
    /// ([`AccessPolicy::from_config`]), with its replicas (`[replication]`'s
    /// `replica_identities`) reading lmdir's own secrets ([`AccessPolicy::with_replica_readers`]).
    pub fn for_config(
        config: &lmdir_config::Config,
        schema: &Schema,
    ) -> Result<AccessPolicy, AclError> {
        let database = &config.database;
        let policy =
            AccessPolicy::from_config(&config.access, schema, &database.suffix, &database.rootdn)?;
        let mut replicas: Vec<&str> = Vec::new();
        for dn in config.replication.replica_identities() {
            if !replicas.contains(&dn) {
                replicas.push(dn);
            }
        }
        policy.with_replica_readers(&replicas, schema, &database.suffix)
    }

    /// The rules used when the config has none:
    ///
    /// ```toml
    /// [[access]]   # every name of SECRET_ATTRIBUTES the schema knows
    /// to = { attrs = ["userPassword", "authPassword", "pwdHistory"] }
    /// by = [ { who = "self", access = "write" }, { who = "*", access = "auth" } ]
    /// [[access]]   # every name of PASSWORD_POLICY_STATE_ATTRIBUTES
    /// to = { attrs = ["pwdFailureTime", "pwdAccountLockedTime", "pwdGraceUseTime", "pwdReset", "pwdLastSuccess",
    ///                "pwdAccountTmpLockoutEnd"] }
    /// by = [ { who = "self", access = "read" } ]
    /// [[access]]
    /// to = {}
    /// by = [ { who = "*", access = "read" } ]
    /// ```
    ///
    /// So anyone may bind, nobody reads, searches or compares another entry's password or old
    /// password hashes, an entry reads and changes its own password, reads (never changes) its
    /// own lockout and failure state, which nobody else but the rootdn sees; everything else
    /// is readable by all and only the rootdn writes. Names the schema does not define
    /// (authPassword without its schema file) are left out.
    pub fn default_rules(schema: &Schema) -> Vec<AccessRuleSpec> {
        let grant = |who: &str, access: &str| AccessGrantSpec {
            who: who.into(),
            access: access.into(),
        };
        let known = |names: &[(&str, &str)]| -> Vec<String> {
            names
                .iter()
                .filter(|(name, _)| schema.attribute(name).is_some())
                .map(|(name, _)| (*name).to_string())
                .collect()
        };
        // An empty `attrs` would mean every attribute: a rule none of whose names the schema
        // defines is left out.
        let protected = [
            (
                known(SECRET_ATTRIBUTES),
                vec![grant("self", "write"), grant("*", "auth")],
            ),
            (
                known(PASSWORD_POLICY_STATE_ATTRIBUTES),
                vec![grant("self", "read")],
            ),
        ];
        let mut rules: Vec<AccessRuleSpec> = protected
            .into_iter()
            .filter(|(attrs, _)| !attrs.is_empty())
            .map(|(attrs, by)| AccessRuleSpec {
                attrs,
                by,
                ..AccessRuleSpec::default()
            })
            .collect();
        rules.push(AccessRuleSpec {
            by: vec![grant("*", "read")],
            ..AccessRuleSpec::default()
        });
        rules
    }

    /// The rules placed before every policy, configured or default, for
    /// `LMDIR_SECRET_ATTRIBUTES` (those the schema defines), with a `read` clause for each of
    /// `replicas` (see [`AccessPolicy::with_replica_readers`]):
    ///
    /// ```toml
    /// [[access]]
    /// to = { attrs = ["lmdirBearerToken"] }
    /// by = [ { who = "self", access = "write" }, { who = "dn=<replica>", access = "read" }, …,
    ///        { who = "*", access = "auth" } ]
    /// ```
    ///
    /// Before, only the default policy protected them: any configured list replaced that, so
    /// under Debian's `to * by * read` anyone read every token hash, and under a rule letting
    /// users write one user planted a token on another's entry.
    pub fn lmdir_secret_rules(schema: &Schema, replicas: &[&str]) -> Vec<AccessRuleSpec> {
        let attrs: Vec<String> = LMDIR_SECRET_ATTRIBUTES
            .iter()
            .filter(|(name, _)| schema.attribute(name).is_some())
            .map(|(name, _)| (*name).to_string())
            .collect();
        if attrs.is_empty() {
            // An empty `attrs` would mean every attribute.
            return Vec::new();
        }
        let grant = |who: &str, access: &str| AccessGrantSpec {
            who: who.into(),
            access: access.into(),
        };
        let readers = replicas.iter().map(|dn| grant(&format!("dn={dn}"), "read"));
        let by = std::iter::once(grant("self", "write"))
            .chain(readers)
            .chain(std::iter::once(grant("*", "auth")))
            .collect();
        vec![AccessRuleSpec {
            attrs,
            by,
            ..AccessRuleSpec::default()
        }]
    }

    /// The policy with `replicas` (the bind DNs of the replicas pulling from this server:
    /// `[replication]`'s `replica_identities`) allowed to read lmdir's own secrets, so those
    /// replicate as the configured rules let everything else replicate; nobody else gains
    /// anything. A replica bound as the rootdn needs none of this.
    pub fn with_replica_readers(
        mut self,
        replicas: &[&str],
        schema: &Schema,
        suffix: &str,
    ) -> Result<AccessPolicy, AclError> {
        if replicas.is_empty() || self.secret_rules == 0 {
            return Ok(self);
        }
        let suffix_ndn = suffix_ndn(schema, suffix)?;
        let specs = AccessPolicy::lmdir_secret_rules(schema, replicas);
        let rules = specs
            .iter()
            .map(|spec| parse_rule(0, spec, schema, &suffix_ndn))
            .collect::<Result<Vec<Rule>, AclError>>()
            .map_err(|error| AclError::Policy {
                field: "replication.replica_dns".into(),
                reason: error.to_string(),
            })?;
        self.rules.splice(0..self.secret_rules, rules);
        Ok(self)
    }

    /// Whether the policy is the built-in default (no `[[access]]` rules configured).
    pub fn is_default(&self) -> bool {
        self.is_default
    }

    /// Whether any rule has a `group=` (or `group/<class>/<attribute>=`) clause, so the server
    /// knows membership lookups matter.
    pub fn uses_groups(&self) -> bool {
        self.rules.iter().any(|rule| {
            rule.grants
                .iter()
                .any(|grant| matches!(grant.who, Who::Group(_) | Who::GroupOf(_)))
        })
    }

    /// The normalized DNs of every group named in a `group=` clause, each once, in rule
    /// order: the only groups whose `is_member` can change a decision (the
    /// `group/<class>/<attribute>=` clauses ask `is_member_of`).
    pub fn group_dns(&self) -> Vec<&str> {
        let mut group_dns: Vec<&str> = Vec::new();
        for grant in self.rules.iter().flat_map(|rule| &rule.grants) {
            if let Who::Group(group_ndn) = &grant.who {
                if !group_dns.contains(&group_ndn.as_str()) {
                    group_dns.push(group_ndn);
                }
            }
        }
        group_dns
    }

    /// Whether the normalized DN is the configured rootdn.
    pub fn is_rootdn(&self, ndn: &str) -> bool {
        self.rootdn_ndn.as_deref() == Some(ndn)
    }

    /// A subject for a bound normalized DN (`None`: anonymous), with `is_rootdn` filled in.
    pub fn subject<'a>(
        &self,
        bound_ndn: Option<&'a str>,
        groups: &'a dyn GroupMembership,
    ) -> Subject<'a> {
        Subject {
            bound_ndn,
            is_rootdn: bound_ndn.is_some_and(|ndn| self.is_rootdn(ndn)),
            groups,
        }
    }

    /// Whether `subject` holds `access` on `target` (first matching rule decides).
    pub fn allowed(&self, subject: &Subject<'_>, target: &Target<'_>, access: Access) -> bool {
        self.for_entry(subject, target.entry_ndn, target.entry)
            .allowed(target.part, access)
    }

    /// Matches the rules' DN and filter clauses against one entry once, so that many
    /// per-attribute checks on it are cheap.
    pub fn for_entry<'policy>(
        &'policy self,
        subject: &Subject<'_>,
        entry_ndn: &str,
        entry: &dyn EntryView,
    ) -> EntryAccess<'policy> {
        if subject.is_rootdn {
            return EntryAccess {
                matched: Vec::new(),
                is_rootdn: true,
            };
        }
        let matched = self
            .rules
            .iter()
            .filter(|rule| rule.matches_entry(entry_ndn, entry))
            .map(|rule| (&rule.parts, rule.granted(subject, entry_ndn)))
            .collect();
        EntryAccess {
            matched,
            is_rootdn: false,
        }
    }
}

/// What one subject may do wherever it looks (everywhere, or at and below a search base): the
/// lowest level any such entry grants it on a part, so a decision made once per operation (which filter items may narrow index candidates,
/// whether stored child counts may be shown) cannot depend on a hidden value.
#[derive(Debug)]
pub struct SubjectAccess<'a> {
    policy: &'a AccessPolicy,
    subject: Subject<'a>,
    /// Only entries at or below this normalized DN count (a search's base); None: all.
    within: Option<String>,
    granted_everywhere: std::cell::RefCell<Vec<(TargetPart, Access)>>,
}

impl AccessPolicy {
    /// Decisions about `subject` that hold for every entry (see [`SubjectAccess`]).
    pub fn for_subject<'a>(&'a self, subject: &Subject<'a>) -> SubjectAccess<'a> {
        SubjectAccess {
            policy: self,
            subject: *subject,
            within: None,
            granted_everywhere: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// As [`AccessPolicy::for_subject`], for the entries at or below `base_ndn` only (a
    /// search's scope): rules that cannot match there do not lower the levels.
    pub fn for_subject_within<'a>(
        &'a self,
        subject: &Subject<'a>,
        base_ndn: &str,
    ) -> SubjectAccess<'a> {
        SubjectAccess {
            policy: self,
            subject: *subject,
            within: Some(base_ndn.to_string()),
            granted_everywhere: std::cell::RefCell::new(Vec::new()),
        }
    }
}

impl<'a> SubjectAccess<'a> {
    /// The level the subject holds on `part` of every entry: the least of the levels granted
    /// by each rule that may decide it, up to the first rule matching all entries (an entry
    /// no rule matches grants nothing). `self` clauses count both as matching and not, and
    /// group membership depends on the subject only, so this bounds every entry's answer.
    pub fn level_everywhere(&self, part: TargetPart) -> Access {
        if self.subject.is_rootdn {
            return Access::Write;
        }
        if let Some((_, level)) = self
            .granted_everywhere
            .borrow()
            .iter()
            .find(|(known, _)| *known == part)
        {
            return *level;
        }
        let level = self.compute_level_everywhere(part);
        self.granted_everywhere.borrow_mut().push((part, level));
        level
    }

    fn compute_level_everywhere(&self, part: TargetPart) -> Access {
        let subject = &self.subject;
        let mut lowest = Access::Write;
        for rule in self
            .policy
            .rules
            .iter()
            .filter(|rule| rule.parts.covers(part) && self.may_match_within(rule))
        {
            // Not self: an entry DN no bound DN equals (normalized DNs are never empty but
            // the root's, and nobody binds as the root).
            let as_other = rule.granted(subject, "");
            let as_self = match subject.bound_ndn {
                Some(bound) => rule.granted(subject, bound),
                None => as_other,
            };
            lowest = lowest.min(as_other).min(as_self);
            if self.matches_all_within(rule) {
                return lowest;
            }
        }
        Access::None
    }

    /// The most the subject may hold on `part` of any entry at or below `within`: the highest
    /// level a rule that may match there grants it (`self` clauses counted). An entry there
    /// gives no more, so work that only such access would show can be skipped: a search of
    /// cn=accesslog by a subject no rule lets read it answers before the log is read.
    pub fn level_somewhere(&self, part: TargetPart) -> Access {
        if self.subject.is_rootdn {
            return Access::Write;
        }
        let subject = &self.subject;
        // "All entries" covers the directory only: not the server's own trees.
        let in_server_tree = self.within.as_deref().is_some_and(is_server_tree);
        self.policy
            .rules
            .iter()
            .filter(|rule| rule.parts.covers(part) && self.may_match_within(rule))
            .filter(|rule| !(in_server_tree && matches!(rule.scope, Scope::All)))
            .map(|rule| {
                let as_other = rule.granted(subject, "");
                let as_self = subject
                    .bound_ndn
                    .map_or(as_other, |bound| rule.granted(subject, bound));
                as_other.max(as_self)
            })
            .max()
            .unwrap_or(Access::None)
    }

    /// Whether the rule's DN clause can match some entry at or below `within`.
    fn may_match_within(&self, rule: &Rule) -> bool {
        let Some(base) = self.within.as_deref() else {
            return true;
        };
        rule.scope.meets_subtree(base)
    }

    /// Whether the rule matches every entry at or below `within` (everywhere when None).
    fn matches_all_within(&self, rule: &Rule) -> bool {
        rule.filter.is_none()
            && match (&rule.scope, self.within.as_deref()) {
                (Scope::All, _) => true,
                (scope, Some(base)) => scope.covers_subtree(base),
                (_, None) => false,
            }
    }

    /// The access every entry at or below `within` gives the subject, when it is the same for
    /// all of them: each rule that may match there matches every such entry (no filter, no
    /// narrower DN) and grants without looking at the entry (no `self` clause for a bound
    /// subject). Then a search decides access once instead of per entry (no DN to build, no
    /// rules to match per returned entry). None when it may differ, or without a `within`.
    pub fn uniform_entry_access(&self) -> Option<EntryAccess<'a>> {
        if self.subject.is_rootdn {
            return Some(EntryAccess {
                matched: Vec::new(),
                is_rootdn: true,
            });
        }
        let base = self.within.as_deref()?;
        // `Scope::All` leaves out the monitor tree, so only a base outside it (and not the
        // root, above it) makes "all" mean every entry below.
        if base.is_empty() || is_server_tree(base) {
            return None;
        }
        let policy: &'a AccessPolicy = self.policy;
        let mut matched = Vec::new();
        for rule in &policy.rules {
            if !self.may_match_within(rule) {
                continue;
            }
            if !self.matches_all_within(rule) {
                return None;
            }
            let depends_on_entry = self.subject.bound_ndn.is_some()
                && rule
                    .grants
                    .iter()
                    .any(|grant| matches!(grant.who, Who::SelfEntry));
            if depends_on_entry {
                return None;
            }
            // Not `self` (anonymous, or no such clause): the entry's DN is not consulted.
            matched.push((&rule.parts, rule.granted(&self.subject, "")));
        }
        Some(EntryAccess {
            matched,
            is_rootdn: false,
        })
    }

    /// May the subject use `attr` in a filter on every entry?
    pub fn can_filter_on_everywhere(&self, attr: AttrId) -> bool {
        self.level_everywhere(TargetPart::Attribute(attr))
            .implies(Access::Search)
    }

    /// Whether every entry is disclosed to the subject (see [`EntryAccess::can_disclose_entry`]).
    pub fn can_disclose_every_entry(&self) -> bool {
        self.level_everywhere(TargetPart::Entry)
            .implies(Access::Auth)
    }

    /// Whether every entry may appear in the subject's search results (search on `entry`
    /// everywhere): a search base needs it (see [`EntryAccess::can_search_entry`]).
    pub fn can_search_every_entry(&self) -> bool {
        self.level_everywhere(TargetPart::Entry)
            .implies(Access::Search)
    }

    /// A filter that is true wherever the subject's restricted filter
    /// ([`EntryAccess::restrict_filter`]) can be true on any entry, built only from items on
    /// attributes the subject may search everywhere: the others are True where they count
    /// positively and False under a negation. Index candidates and the store's own filter test
    /// taken from it depend on no value hidden from the subject.
    pub fn candidate_filter<'filter>(
        &self,
        filter: &'filter PreparedFilter,
    ) -> Cow<'filter, PreparedFilter> {
        if self.subject.is_rootdn || self.leaves_visible_everywhere(filter) {
            Cow::Borrowed(filter)
        } else {
            Cow::Owned(self.widened(filter, true))
        }
    }

    fn leaf_visible_everywhere(&self, filter: &PreparedFilter) -> bool {
        // A resolved in-chain item is the set its walk reached with this subject's rights,
        // each link admitted only where the subject may search the chaining attribute: no
        // hidden value made it, so index candidates may come from it (the per-entry test
        // still restricts it).
        if matches!(
            filter,
            PreparedFilter::InChain {
                members: Some(_),
                ..
            }
        ) {
            return true;
        }
        leaf_visible(filter, &|attr| self.can_filter_on_everywhere(attr), &|| {
            self.can_disclose_every_entry()
        })
    }

    fn leaves_visible_everywhere(&self, filter: &PreparedFilter) -> bool {
        match filter {
            PreparedFilter::And(children) | PreparedFilter::Or(children) => children
                .iter()
                .all(|child| self.leaves_visible_everywhere(child)),
            PreparedFilter::Not(child) => self.leaves_visible_everywhere(child),
            leaf => self.leaf_visible_everywhere(leaf),
        }
    }

    /// `positive`: whether the item counts towards a True result (not under an odd number of
    /// negations). Replacing a positive item by True or a negated one by False can only raise
    /// the result, so the widened filter is true wherever the original could be.
    fn widened(&self, filter: &PreparedFilter, positive: bool) -> PreparedFilter {
        match filter {
            PreparedFilter::And(children) => PreparedFilter::And(
                children
                    .iter()
                    .map(|child| self.widened(child, positive))
                    .collect(),
            ),
            PreparedFilter::Or(children) => PreparedFilter::Or(
                children
                    .iter()
                    .map(|child| self.widened(child, positive))
                    .collect(),
            ),
            PreparedFilter::Not(child) => {
                PreparedFilter::Not(Box::new(self.widened(child, !positive)))
            }
            leaf if self.leaf_visible_everywhere(leaf) => leaf.clone(),
            _ if positive => PreparedFilter::True,
            _ => PreparedFilter::False,
        }
    }
}

/// The decisions of one policy for one subject on one entry.
#[derive(Debug, Clone)]
pub struct EntryAccess<'policy> {
    /// The rules whose DN and filter match the entry, in policy order, with the level each
    /// grants the subject.
    matched: Vec<(&'policy Parts, Access)>,
    is_rootdn: bool,
}

impl EntryAccess<'_> {
    /// The level the subject holds on a part of the entry.
    pub fn level(&self, part: TargetPart) -> Access {
        if self.is_rootdn {
            return Access::Write;
        }
        self.matched
            .iter()
            .find(|(parts, _)| parts.covers(part))
            .map_or(Access::None, |(_, access)| *access)
    }

    /// Whether the subject holds `access` on a part of the entry.
    pub fn allowed(&self, part: TargetPart, access: Access) -> bool {
        self.level(part).implies(access)
    }

    /// May the subject learn that the entry exists (any level on `entry`, OpenLDAP's
    /// `disclose`)? A hidden entry answers exactly as a missing one: noSuchObject, with a
    /// matched DN only of a disclosed ancestor.
    pub fn can_disclose_entry(&self) -> bool {
        self.allowed(TargetPart::Entry, Access::Auth)
    }

    /// May the entry appear in search results at all (search on `entry`)?
    pub fn can_search_entry(&self) -> bool {
        self.allowed(TargetPart::Entry, Access::Search)
    }

    /// May the entry be returned (read on `entry`)?
    pub fn can_read_entry(&self) -> bool {
        self.allowed(TargetPart::Entry, Access::Read)
    }

    /// May the attribute be used in a search filter on this entry?
    pub fn can_filter_on(&self, attr: AttrId) -> bool {
        self.allowed(TargetPart::Attribute(attr), Access::Search)
    }

    /// May the attribute's values be returned?
    pub fn can_read_attribute(&self, attr: AttrId) -> bool {
        self.allowed(TargetPart::Attribute(attr), Access::Read)
    }

    /// May a compare operation assert on the attribute?
    pub fn can_compare(&self, attr: AttrId) -> bool {
        self.allowed(TargetPart::Attribute(attr), Access::Compare)
    }

    /// May the attribute be written (modify, or carried by an added entry)?
    pub fn can_write_attribute(&self, attr: AttrId) -> bool {
        self.allowed(TargetPart::Attribute(attr), Access::Write)
    }

    /// May the entry's `userPassword` (attribute id given) be used to bind?
    pub fn can_authenticate_with(&self, password_attr: AttrId) -> bool {
        self.allowed(TargetPart::Attribute(password_attr), Access::Auth)
    }

    /// May entries be added below or deleted from below this entry (write on `children`)?
    pub fn can_write_children(&self) -> bool {
        self.allowed(TargetPart::Children, Access::Write)
    }

    /// The filter as this subject may evaluate it on this entry: items on attributes without
    /// search access become Undefined (RFC 4511 §4.5.1.7 style, as OpenLDAP does), so they
    /// neither match nor reveal values. Borrowed when nothing had to change.
    pub fn restrict_filter<'filter>(
        &self,
        filter: &'filter PreparedFilter,
    ) -> Cow<'filter, PreparedFilter> {
        if self.is_rootdn || self.filter_fully_visible(filter) {
            Cow::Borrowed(filter)
        } else {
            Cow::Owned(self.restricted(filter))
        }
    }

    fn filter_fully_visible(&self, filter: &PreparedFilter) -> bool {
        match filter {
            PreparedFilter::True | PreparedFilter::False | PreparedFilter::Undefined => true,
            PreparedFilter::And(children) | PreparedFilter::Or(children) => children
                .iter()
                .all(|child| self.filter_fully_visible(child)),
            PreparedFilter::Not(child) => self.filter_fully_visible(child),
            leaf => leaf_visible(leaf, &|attr| self.can_filter_on(attr), &|| {
                self.can_search_entry()
            }),
        }
    }

    fn visible_covered(&self, covered: &[CoveredAttribute]) -> Vec<CoveredAttribute> {
        covered
            .iter()
            .copied()
            .filter(|covered_attribute| self.can_filter_on(covered_attribute.attr))
            .collect()
    }

    fn restricted(&self, filter: &PreparedFilter) -> PreparedFilter {
        // Each leaf keeps only the attribute types the subject may search.
        let leaf = |covered: &[CoveredAttribute],
                    rebuild: &dyn Fn(Vec<CoveredAttribute>) -> PreparedFilter| {
            let visible = self.visible_covered(covered);
            hidden_aware(visible.len(), covered.len(), || rebuild(visible))
        };
        match filter {
            PreparedFilter::True | PreparedFilter::False | PreparedFilter::Undefined => {
                filter.clone()
            }
            PreparedFilter::And(children) => PreparedFilter::And(
                children
                    .iter()
                    .map(|child| self.restricted(child))
                    .collect(),
            ),
            PreparedFilter::Or(children) => PreparedFilter::Or(
                children
                    .iter()
                    .map(|child| self.restricted(child))
                    .collect(),
            ),
            PreparedFilter::Not(child) => PreparedFilter::Not(Box::new(self.restricted(child))),
            PreparedFilter::Present {
                attr,
                options,
                covered,
            } => {
                let visible: Vec<AttrId> = covered
                    .iter()
                    .copied()
                    .filter(|covered_attr| self.can_filter_on(*covered_attr))
                    .collect();
                hidden_aware(visible.len(), covered.len(), || PreparedFilter::Present {
                    attr: *attr,
                    options: options.clone(),
                    covered: visible.clone(),
                })
            }
            PreparedFilter::Equality {
                attr,
                options,
                rule,
                covered,
                normalized,
            } => leaf(covered, &|covered| PreparedFilter::Equality {
                attr: *attr,
                options: options.clone(),
                rule: *rule,
                covered,
                normalized: normalized.clone(),
            }),
            PreparedFilter::Approx {
                attr,
                options,
                rule,
                covered,
                normalized,
            } => leaf(covered, &|covered| PreparedFilter::Approx {
                attr: *attr,
                options: options.clone(),
                rule: *rule,
                covered,
                normalized: normalized.clone(),
            }),
            PreparedFilter::Substrings {
                attr,
                options,
                rule,
                covered,
                initial,
                any,
                final_,
            } => leaf(covered, &|covered| PreparedFilter::Substrings {
                attr: *attr,
                options: options.clone(),
                rule: *rule,
                covered,
                initial: initial.clone(),
                any: any.clone(),
                final_: final_.clone(),
            }),
            PreparedFilter::GreaterOrEqual {
                attr,
                options,
                rule,
                covered,
                key,
            } => leaf(covered, &|covered| PreparedFilter::GreaterOrEqual {
                attr: *attr,
                options: options.clone(),
                rule: *rule,
                covered,
                key: key.clone(),
            }),
            PreparedFilter::LessOrEqual {
                attr,
                options,
                rule,
                covered,
                key,
            } => leaf(covered, &|covered| PreparedFilter::LessOrEqual {
                attr: *attr,
                options: options.clone(),
                rule: *rule,
                covered,
                key: key.clone(),
            }),
            // The chain itself was resolved with the subject's rights (each link's entry
            // decided on its own); here, as any leaf, the entry's own chaining attribute.
            PreparedFilter::InChain {
                attr,
                covered,
                normalized,
                members,
            } => leaf(covered, &|covered| PreparedFilter::InChain {
                attr: *attr,
                covered,
                normalized: normalized.clone(),
                members: members.clone(),
            }),
            PreparedFilter::Extensible {
                rule,
                attr,
                options,
                covered,
                dn_attributes,
                normalized,
                pieces,
            } => {
                let visible = self.visible_covered(covered);
                // `:dn:` matching reads the DN, which is visible with the entry itself.
                let dn_visible = *dn_attributes && self.can_search_entry();
                let visible_count = visible.len() + usize::from(dn_visible);
                let total_count = covered.len() + usize::from(*dn_attributes);
                hidden_aware(visible_count, total_count, || PreparedFilter::Extensible {
                    rule: *rule,
                    attr: *attr,
                    options: options.clone(),
                    covered: visible,
                    dn_attributes: dn_visible,
                    normalized: normalized.clone(),
                    pieces: pieces.clone(),
                })
            }
        }
    }
}

/// A filter leaf whose covered attribute types were cut to the visible ones: all hidden →
/// Undefined; some hidden → `(leaf OR Undefined)`, true when a visible type matches and
/// otherwise Undefined rather than False (OpenLDAP answers "insufficient access" there, so
/// `(!(name=x))` cannot learn that a hidden subtype lacks `x`); none hidden → the leaf.
fn hidden_aware(
    visible_count: usize,
    total_count: usize,
    rebuild: impl FnOnce() -> PreparedFilter,
) -> PreparedFilter {
    debug_assert!(visible_count <= total_count);
    if visible_count == 0 {
        PreparedFilter::Undefined
    } else if visible_count < total_count {
        PreparedFilter::Or(vec![rebuild(), PreparedFilter::Undefined])
    } else {
        rebuild()
    }
}

fn normalize_rule_dn(
    schema: &Schema,
    rule_index: usize,
    field: &str,
    text: &str,
    suffix_ndn: &str,
) -> Result<String, AclError> {
    let ndn = schema
        .normalize_dn_str(text)
        .map_err(|error| rule_error(rule_index, field, format!("'{text}': {}", error.message)))?;
    if !normalized_dn_is_within(&ndn, suffix_ndn) && !is_server_tree(&ndn) {
        return Err(rule_error(
            rule_index,
            field,
            format!(
                "'{text}' is outside the database suffix '{suffix_ndn}', cn=Monitor and \
                 cn=accesslog"
            ),
        ));
    }
    Ok(ndn)
}

fn parse_rule(
    rule_index: usize,
    spec: &AccessRuleSpec,
    schema: &Schema,
    suffix_ndn: &str,
) -> Result<Rule, AclError> {
    let scope = parse_scope(rule_index, spec, schema, suffix_ndn)?;
    let filter = spec
        .filter
        .as_deref()
        .map(|text| parse_rule_filter(rule_index, text, schema))
        .transpose()?;
    let parts = parse_parts(rule_index, &spec.attrs, schema)?;
    if spec.by.is_empty() {
        return Err(rule_error(
            rule_index,
            "by",
            "no clauses: the rule would deny everything it matches; write { who = \"*\", access = \"none\" } if meant",
        ));
    }
    if spec.by.len() > GRANTS_PER_RULE_MAX {
        return Err(rule_error(
            rule_index,
            "by",
            format!(
                "{} clauses, the limit is {GRANTS_PER_RULE_MAX}",
                spec.by.len()
            ),
        ));
    }
    let grants = spec
        .by
        .iter()
        .enumerate()
        .map(|(grant_index, grant)| {
            let who = parse_who(rule_index, grant_index, &grant.who, schema)?;
            let access = Access::from_word(&grant.access).ok_or_else(|| {
                rule_error(
                    rule_index,
                    format!("by[{grant_index}].access"),
                    format!(
                        "'{}' is not one of none, auth, compare, search, read, write",
                        grant.access
                    ),
                )
            })?;
            Ok(Grant { who, access })
        })
        .collect::<Result<Vec<Grant>, AclError>>()?;
    Ok(Rule {
        scope,
        filter,
        parts,
        grants,
    })
}

/// The rule's DN part: at most one of `subtree`, `dn`, `one` and `children`.
fn parse_scope(
    rule_index: usize,
    spec: &AccessRuleSpec,
    schema: &Schema,
    suffix_ndn: &str,
) -> Result<Scope, AclError> {
    type MakeScope = fn(String) -> Scope;
    let places: [(&str, &Option<String>, MakeScope); 4] = [
        ("to.subtree", &spec.subtree, Scope::Subtree),
        ("to.dn", &spec.dn, Scope::Exact),
        ("to.one", &spec.one, Scope::OneLevel),
        ("to.children", &spec.children, Scope::Children),
    ];
    let mut given = places
        .into_iter()
        .filter_map(|(field, dn, scope)| dn.as_ref().map(|dn| (field, dn, scope)));
    let Some((field, dn, scope)) = given.next() else {
        return Ok(Scope::All);
    };
    if given.next().is_some() {
        return Err(rule_error(
            rule_index,
            "to",
            "give at most one of subtree, dn, one and children",
        ));
    }
    Ok(scope(normalize_rule_dn(
        schema, rule_index, field, dn, suffix_ndn,
    )?))
}

fn parse_rule_filter(
    rule_index: usize,
    text: &str,
    schema: &Schema,
) -> Result<PreparedFilter, AclError> {
    let filter = Filter::parse(text, FILTER_DEPTH_MAX)
        .map_err(|error| rule_error(rule_index, "to.filter", error.message))?;
    check_filter_descriptions(&filter, schema)
        .map_err(|reason| rule_error(rule_index, "to.filter", reason))?;
    Ok(schema.prepare_filter(&filter))
}

/// An unknown attribute would make the filter item Undefined forever: a silent config
/// mistake, so it is refused here.
fn check_filter_descriptions(filter: &Filter, schema: &Schema) -> Result<(), String> {
    let check = |description: &str| {
        schema
            .parse_description(description)
            .map(|_| ())
            .map_err(|error| format!("'{description}': {}", error.message))
    };
    match filter {
        Filter::And(children) | Filter::Or(children) => children
            .iter()
            .try_for_each(|child| check_filter_descriptions(child, schema)),
        Filter::Not(child) => check_filter_descriptions(child, schema),
        Filter::Equality { description, .. }
        | Filter::Substrings { description, .. }
        | Filter::GreaterOrEqual { description, .. }
        | Filter::LessOrEqual { description, .. }
        | Filter::Present { description }
        | Filter::Approx { description, .. } => check(description),
        Filter::Extensible { description, .. } => description.as_deref().map_or(Ok(()), check),
    }
}

fn parse_parts(rule_index: usize, attrs: &[String], schema: &Schema) -> Result<Parts, AclError> {
    if attrs.len() > ATTRIBUTES_PER_RULE_MAX {
        return Err(rule_error(
            rule_index,
            "to.attrs",
            format!(
                "{} names, the limit is {ATTRIBUTES_PER_RULE_MAX}",
                attrs.len()
            ),
        ));
    }
    let mut parts = Parts {
        all: attrs.is_empty(),
        entry: false,
        children: false,
        attributes: Vec::new(),
    };
    for (attr_index, name) in attrs.iter().enumerate() {
        if name.eq_ignore_ascii_case("entry") {
            parts.entry = true;
        } else if name.eq_ignore_ascii_case("children") {
            parts.children = true;
        } else {
            let attr = schema.attribute(name).ok_or_else(|| {
                rule_error(
                    rule_index,
                    format!("to.attrs[{attr_index}]"),
                    format!("unknown attribute type '{name}'"),
                )
            })?;
            parts.attributes.extend_from_slice(schema.subtypes(attr));
        }
    }
    parts.attributes.sort_unstable();
    parts.attributes.dedup();
    Ok(parts)
}

fn parse_who(
    rule_index: usize,
    grant_index: usize,
    text: &str,
    schema: &Schema,
) -> Result<Who, AclError> {
    parse_who_text(text, schema)
        .map_err(|reason| rule_error(rule_index, format!("by[{grant_index}].who"), reason))
}

fn parse_who_text(text: &str, schema: &Schema) -> Result<Who, String> {
    let trimmed = text.trim();
    let simple = match trimmed.to_ascii_lowercase().as_str() {
        "*" => Some(Who::Anyone),
        "anonymous" => Some(Who::Anonymous),
        "users" => Some(Who::Users),
        "self" => Some(Who::SelfEntry),
        _ => None,
    };
    if let Some(who) = simple {
        return Ok(who);
    }
    let Some((keyword, dn_text)) = trimmed.split_once('=') else {
        return Err(format!(
            "'{text}' is not one of *, anonymous, users, self, dn=<DN>, dn.subtree=<DN>, \
             dn.one=<DN>, dn.children=<DN>, group=<DN>, group/<objectClass>/<attribute>=<DN>"
        ));
    };
    let dn_text = dn_text.trim().trim_matches('"');
    let normalize = |kind: &str| {
        schema
            .normalize_dn_str(dn_text)
            .map_err(|error| format!("{kind} '{dn_text}': {}", error.message))
    };
    let keyword = keyword.trim().to_ascii_lowercase();
    if let Some(path) = keyword.strip_prefix("group/") {
        return exact_group(path, normalize("group")?, schema).map(Who::GroupOf);
    }
    match keyword.as_str() {
        "dn" | "dn.exact" | "dn.base" => Ok(Who::ExactDn(normalize("dn")?)),
        "dn.subtree" => Ok(Who::Subtree(normalize("dn.subtree")?)),
        "dn.one" | "dn.onelevel" => Ok(Who::OneLevel(normalize("dn.one")?)),
        "dn.children" => Ok(Who::Children(normalize("dn.children")?)),
        "group" => Ok(Who::Group(normalize("group")?)),
        other => Err(format!(
            "unknown who kind '{other}' (dn, dn.subtree, dn.one, dn.children, group)"
        )),
    }
}

/// `<objectClass>/<attribute>` of a `group/<objectClass>/<attribute>=` clause: a known class and
/// a known attribute of DN or NameAndOptionalUID syntax (slapd's static groups; a labeledURI
/// subtype would make it a dynamic group, which these rules do not evaluate).
fn exact_group(path: &str, ndn: String, schema: &Schema) -> Result<ExactGroup, String> {
    let Some((class_name, attribute_name)) = path.split_once('/') else {
        return Err(format!(
            "group/{path}=: name both the object class and the member attribute \
             (group/<objectClass>/<attribute>=<DN>)"
        ));
    };
    let class = schema
        .object_class(class_name)
        .ok_or_else(|| format!("group/{path}=: unknown object class '{class_name}'"))?;
    let member_attribute = schema
        .attribute(attribute_name)
        .ok_or_else(|| format!("group/{path}=: unknown attribute type '{attribute_name}'"))?;
    let syntax = &schema.attribute_type(member_attribute).syntax;
    if !matches!(
        syntax,
        lmdir_schema::Syntax::DistinguishedName | lmdir_schema::Syntax::NameAndOptionalUid
    ) {
        return Err(format!(
            "group/{path}=: '{attribute_name}' is not of DN or NameAndOptionalUID syntax \
             (dynamic groups are not evaluated in access rules)"
        ));
    }
    Ok(ExactGroup {
        ndn,
        object_class_attribute: schema.object_class_attribute(),
        object_class: schema
            .object_class_definition(class)
            .name()
            .to_ascii_lowercase(),
        member_attribute,
    })
}

/// Whether a filter leaf uses only attributes `can_filter_on` allows (and, for `:dn:`
/// extensible items, whether `dn_visible`); anything that is not a leaf is visible here.
fn leaf_visible(
    filter: &PreparedFilter,
    can_filter_on: &dyn Fn(AttrId) -> bool,
    dn_visible: &dyn Fn() -> bool,
) -> bool {
    match filter {
        PreparedFilter::Present { covered, .. } => covered.iter().all(|attr| can_filter_on(*attr)),
        PreparedFilter::Equality { covered, .. }
        | PreparedFilter::Approx { covered, .. }
        | PreparedFilter::Substrings { covered, .. }
        | PreparedFilter::GreaterOrEqual { covered, .. }
        | PreparedFilter::LessOrEqual { covered, .. }
        | PreparedFilter::InChain { covered, .. } => {
            covered.iter().all(|covered| can_filter_on(covered.attr))
        }
        PreparedFilter::Extensible {
            covered,
            dn_attributes,
            ..
        } => {
            covered.iter().all(|covered| can_filter_on(covered.attr))
                && (!dn_attributes || dn_visible())
        }
        _ => true,
    }
}
