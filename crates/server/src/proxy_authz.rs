//! Proxied authorization v2 (RFC 4370) with OpenLDAP's `authzTo` / `authzFrom` rules and
//! `authz-policy` (config `authz_policy`), decided as slapd decides it:
//! - a bound identity asks, with the control, that one operation run as another identity (an
//!   authzId: `dn:<DN>`, `u:<uid>`, or empty or `dn:` for anonymous);
//! - anonymous clients may not ask; asking for anonymous or for oneself is always allowed; the
//!   rootdn may act as any DN within the database's suffix;
//! - otherwise the policy decides: `to` needs a rule in the bound entry's `authzTo` naming the
//!   target, `from` a rule in the target entry's `authzFrom` naming the bound identity, `any`
//!   either and `all` both; `none` (the default) allows nothing more;
//! - acting as the rootdn needs an exact (`dn:` / `dn.exact:`) rule naming it: a pattern such
//!   as `dn.subtree:` or `dn:*` written for ordinary users never reaches it, nor does `u:`.
//!
//! Every refusal answers authorizationDenied (123) before the operation starts. The rules are
//! read in one read transaction on the blocking pool (a `u:` rule or target searches the
//! directory) and every part is bounded: rules per entry, pattern bytes, compiled regex size,
//! the `u:` search's look-through.

use crate::context::OperationContext;
use crate::identity::Identity;
use crate::result::{code, OperationError};
use crate::settings::ServerSettings;
use lmdir_config::AuthzPolicy;
use lmdir_schema::{Filter, Schema};
use lmdir_store::{ReadTxn, Scope, SearchSpec};

pub use crate::controls::PROXY_AUTHZ_OID;
use crate::identity::AUTHZ_TO;

/// Longest authzId the control may carry (slapd's own DN limit, SLAP_LDAPDN_MAXLEN).
pub const AUTHZ_ID_BYTES_MAX: usize = 8192;
/// Most `authzTo` / `authzFrom` values one decision reads from an entry: each may cost a
/// directory search (`u:`, URLs), so an entry holding more is refused (adminLimitExceeded)
/// rather than walked.
pub const AUTHZ_RULES_PER_ENTRY_MAX: usize = 64;
/// Longest `dn.regex:` pattern compiled.
pub const AUTHZ_REGEX_BYTES_MAX: usize = 1024;
/// Heap a compiled `dn.regex:` pattern may take (regex-automata's NFA size limit): bounds
/// both the memory and the matching work of a hostile pattern such as `(a{999}){999}`.
pub const AUTHZ_REGEX_COMPILED_BYTES_MAX: usize = 1024 * 1024;

fn denied(why: impl Into<String>) -> OperationError {
    OperationError::new(code::AUTHORIZATION_DENIED, why)
}

/// Takes the proxied authorization control out of the operation's controls and, when there
/// is one, replaces the session identity the operation runs with; Err is the operation's
/// answer (123, or protocolError for a malformed control).
pub async fn assume_identity(context: &mut OperationContext) -> Result<(), OperationError> {
    let mut found = context
        .controls
        .iter()
        .filter(|control| control.oid == PROXY_AUTHZ_OID);
    let Some(control) = found.next().cloned() else {
        return Ok(());
    };
    if found.next().is_some() {
        return Err(OperationError::new(
            code::PROTOCOL_ERROR,
            "proxied authorization control given more than once",
        ));
    }
    context
        .controls
        .retain(|control| control.oid != PROXY_AUTHZ_OID);
    // RFC 4370 §3 asks clients to mark it critical; slapd honours it either way, and so does
    // lmdir: ignoring it would run the operation with the proxy's own, wider rights.
    let value = control.value.ok_or_else(|| {
        OperationError::new(
            code::PROTOCOL_ERROR,
            "proxied authorization control without a value",
        )
    })?;
    let bound = context.session.identity.clone();
    let settings = context.settings.clone();
    context.session.identity = authorized_identity(&context.server, settings, bound, value).await?;
    // As slapd's PROXYAUTHZ line: the operation's own lines name the proxied identity, so the
    // log says whom the connection's bound identity acted as.
    let prefix = crate::log_text::OperationPrefix {
        connection_id: context.session.connection_id,
        operation_id: context.operation_id,
    };
    tracing::info!(
        "{prefix} PROXYAUTHZ dn=\"{}\"",
        crate::log_text::escaped(&context.session.identity.dn)
    );
    Ok(())
}

/// The identity `bound` may act as when it asks for `authz_id`: the proxied authorization
/// control's value, or the authorization identity of a SASL bind (RFC 4422 §3.4.1). One
/// decision for both, made with the settings the operation (or bind) took; authorizationDenied
/// when it may not.
pub(crate) async fn authorized_identity(
    server: &std::sync::Arc<crate::context::ServerContext>,
    settings: std::sync::Arc<ServerSettings>,
    bound: Identity,
    authz_id: Vec<u8>,
) -> Result<Identity, OperationError> {
    let server = server.clone();
    tokio::task::spawn_blocking(move || decide(&server, &settings, &bound, &authz_id))
        .await
        .map_err(|error| OperationError::new(code::OTHER, error.to_string()))?
}

/// The identity `bound` may act as, asked for by `authz_id`.
fn decide(
    server: &crate::context::ServerContext,
    settings: &ServerSettings,
    bound: &Identity,
    authz_id: &[u8],
) -> Result<Identity, OperationError> {
    if bound.normalized_dn.is_empty() {
        return Err(denied("anonymous proxied authorization not allowed"));
    }
    if authz_id.is_empty() {
        return Ok(Identity::default());
    }
    if authz_id.len() > AUTHZ_ID_BYTES_MAX {
        return Err(denied(format!(
            "authzId longer than {AUTHZ_ID_BYTES_MAX} bytes"
        )));
    }
    let authz_id = std::str::from_utf8(authz_id).map_err(|_| denied("authzId is not UTF-8"))?;
    let database = server
        .database
        .as_ref()
        .ok_or_else(|| denied("no directory to authorize against"))?;
    let read = database
        .store()
        .read()
        .map_err(|error| OperationError::new(code::OTHER, error.to_string()))?;
    let rules = Rules {
        schema: read.schema(),
        read: &read,
        settings,
        rootdn: rootdn_of(server, settings),
        peercred_base: read
            .schema()
            .normalize_dn_str(crate::identity::PEERCRED_BASE)
            .unwrap_or_default(),
    };
    let target = rules
        .target(authz_id)?
        .ok_or_else(|| denied("authzId mapping failed"))?;
    let anonymous = target.normalized_dn.is_empty();
    if anonymous
        || target.normalized_dn == bound.normalized_dn
        || bound.is_rootdn && rules.in_database(&target)
    {
        return Ok(target);
    }
    if rules.permitted(settings.authz_policy, bound, &target)? {
        Ok(target)
    } else {
        Err(denied("not authorized to assume identity"))
    }
}

/// The rootdn, normalized; empty when none is configured.
fn rootdn_of(server: &crate::context::ServerContext, settings: &ServerSettings) -> String {
    let rootdn = &settings.rootdn;
    if rootdn.is_empty() {
        String::new()
    } else {
        crate::context::normalized_identity_dn(server, rootdn)
    }
}

/// One `authzTo` / `authzFrom` value, parsed (slapd's authz syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// `dn:` / `dn.exact:` / a bare DN: this DN (normalized).
    Exact(String),
    /// `dn:*`: any DN (never the rootdn).
    Anyone,
    Subtree(String),
    Children(String),
    OneLevel(String),
    /// `dn.regex:`: matched, case-insensitively and unanchored, against the normalized DN.
    Regex(String),
    /// `u:<uid>`: the one entry with that uid.
    User(String),
    /// `ldap:///base??scope?filter`: entries in scope matching the filter.
    Url {
        base: String,
        scope: Scope,
        filter: String,
    },
    /// A form lmdir does not implement (`group/...:`) or a value that does not parse: grants
    /// nothing.
    Nothing,
}

/// Reads what the rules need, in one read transaction.
struct Rules<'a> {
    schema: &'a Schema,
    read: &'a ReadTxn,
    settings: &'a ServerSettings,
    rootdn: String,
    /// `identity::PEERCRED_BASE` normalized (see `rule_names`).
    peercred_base: String,
}

impl Rules<'_> {
    /// The identity an authzId names (None: it names nobody). `u:` never names the rootdn.
    fn target(&self, authz_id: &str) -> Result<Option<Identity>, OperationError> {
        if let Some(dn) = strip_prefix_ignore_case(authz_id, "dn:") {
            // RFC 4370 §3: `dn:` with nothing after it is the anonymous identity, as the empty
            // authzId is (slapd runs the operation as anonymous). Spaces alone name nobody:
            // slapd answers "authzId mapping failed" (123) for `dn: `.
            if dn.is_empty() {
                return Ok(Some(Identity::default()));
            }
            let dn = dn.trim_start();
            let Some(normalized) = self
                .schema
                .normalize_dn_str(dn)
                .ok()
                .filter(|normalized| !normalized.is_empty())
            else {
                return Ok(None);
            };
            return Ok(Some(Identity {
                dn: dn.to_string(),
                is_rootdn: !self.rootdn.is_empty() && normalized == self.rootdn,
                normalized_dn: normalized,
            }));
        }
        if let Some(uid) = strip_prefix_ignore_case(authz_id, "u:") {
            let Some(normalized) = self.user_dn(uid)? else {
                return Ok(None);
            };
            if normalized == self.rootdn {
                return Ok(None);
            }
            let id = self.read.normalized_dn_to_id(&normalized)?;
            return Ok(Some(Identity {
                dn: self.read.dn_of(id)?,
                normalized_dn: normalized,
                is_rootdn: false,
            }));
        }
        Ok(None)
    }

    /// Whether the normalized `dn` is an ldapi peercred identity.
    fn is_peercred(&self, dn: &str) -> bool {
        !self.peercred_base.is_empty()
            && lmdir_schema::normalized_dn_is_within(dn, &self.peercred_base)
    }

    /// Whether `identity` lies in this database (slapd lets the rootdn act as any such DN).
    fn in_database(&self, identity: &Identity) -> bool {
        self.schema
            .normalize_dn_str(&self.settings.suffix)
            .is_ok_and(|suffix| {
                lmdir_schema::normalized_dn_is_within(&identity.normalized_dn, &suffix)
            })
    }

    /// Whether the policy lets `bound` act as `target` (neither self nor the rootdn asking).
    fn permitted(
        &self,
        policy: AuthzPolicy,
        bound: &Identity,
        target: &Identity,
    ) -> Result<bool, OperationError> {
        let to = || self.entry_rules_allow(&bound.normalized_dn, AUTHZ_TO, target);
        let from = || self.entry_rules_allow(&target.normalized_dn, "authzFrom", bound);
        Ok(match policy {
            AuthzPolicy::None => false,
            AuthzPolicy::To => to()?,
            AuthzPolicy::From => from()?,
            AuthzPolicy::Any => to()? || from()?,
            AuthzPolicy::All => to()? && from()?,
        })
    }

    /// Whether a value of `attribute` on the entry at `holder` names `asserted`.
    fn entry_rules_allow(
        &self,
        holder: &str,
        attribute: &str,
        asserted: &Identity,
    ) -> Result<bool, OperationError> {
        let Some(attr) = self.schema.attribute(attribute) else {
            return Ok(false);
        };
        let Ok(id) = self.read.normalized_dn_to_id(holder) else {
            return Ok(false);
        };
        let Some(entry) = self.read.entry(id)? else {
            return Ok(false);
        };
        let values = entry.values_of(attr);
        if values.len() > AUTHZ_RULES_PER_ENTRY_MAX {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!("more than {AUTHZ_RULES_PER_ENTRY_MAX} {attribute} values on '{holder}'"),
            ));
        }
        for (original, _) in values {
            let rule = std::str::from_utf8(original)
                .map_or(Rule::Nothing, |text| parse_rule(self.schema, text));
            if self.rule_names(&rule, asserted)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `rule` names `asserted`. The rootdn, and the peercred identities only the kernel
    /// attests over ldapi (`...,cn=peercred,cn=external,cn=auth`, which migrated rules such as
    /// `by dn.exact=gidNumber=0+uidNumber=0,cn=peercred,... manage` may empower), only by an
    /// exact rule: `dn:*` or a regex never reaches them.
    fn rule_names(&self, rule: &Rule, asserted: &Identity) -> Result<bool, OperationError> {
        let dn = asserted.normalized_dn.as_str();
        let reserved = asserted.is_rootdn || self.is_peercred(dn);
        if reserved && !matches!(rule, Rule::Exact(_)) {
            return Ok(false);
        }
        Ok(match rule {
            Rule::Exact(exact) => exact == dn,
            Rule::Anyone => true,
            Rule::Subtree(base) => within(dn, base, Depth::Subtree),
            Rule::Children(base) => within(dn, base, Depth::Children),
            Rule::OneLevel(base) => within(dn, base, Depth::OneLevel),
            Rule::Regex(pattern) => regex_matches(pattern, dn),
            Rule::User(uid) => self.user_dn(uid)?.as_deref() == Some(dn),
            Rule::Url {
                base,
                scope,
                filter,
            } => self.url_names(base, *scope, filter, dn)?,
            Rule::Nothing => false,
        })
    }

    /// Whether the entry `dn` is within `base`/`scope` and matches `filter`.
    fn url_names(
        &self,
        base: &str,
        scope: Scope,
        filter: &str,
        dn: &str,
    ) -> Result<bool, OperationError> {
        let depth = match scope {
            Scope::Base => Depth::Base,
            Scope::One => Depth::OneLevel,
            Scope::Sub => Depth::Subtree,
        };
        if !within(dn, base, depth) {
            return Ok(false);
        }
        let Ok(filter) = Filter::parse(filter, self.settings.filter_depth_max) else {
            return Ok(false);
        };
        let Ok(id) = self.read.normalized_dn_to_id(dn) else {
            return Ok(false);
        };
        let Some(entry) = self.read.entry(id)? else {
            return Ok(false);
        };
        Ok(self
            .schema
            .prepare_filter(&filter)
            .evaluate(&entry)
            .is_true())
    }

    /// The normalized DN of the one entry under the suffix whose uid is `uid` (None: no entry
    /// or more than one). The search is bounded by the server's look-through limit.
    fn user_dn(&self, uid: &str) -> Result<Option<String>, OperationError> {
        let filter = Filter::Equality {
            description: "uid".to_string(),
            value: uid.as_bytes().to_vec(),
        };
        let Ok(base) = self.schema.normalize_dn_str(&self.settings.suffix) else {
            return Ok(None);
        };
        let spec = SearchSpec {
            base,
            scope: Scope::Sub,
            filter: self.schema.prepare_filter(&filter),
            size_limit: 0,
            lookthrough_limit: usize::try_from(self.settings.lookthrough_limit)
                .unwrap_or(usize::MAX),
        };
        let Ok(cursor) = self.read.search(&spec) else {
            return Ok(None);
        };
        let mut found = None;
        for item in cursor.take(2) {
            let (id, _) = item?;
            if found.is_some() {
                return Ok(None);
            }
            found = Some(self.read.normalized_dn_of(id)?);
        }
        Ok(found)
    }
}

fn strip_prefix_ignore_case<'t>(text: &'t str, prefix: &str) -> Option<&'t str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Where a normalized DN must lie relative to a rule's normalized base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// The base itself.
    Base,
    /// The base or below.
    Subtree,
    /// Strictly below.
    Children,
    /// Immediately below.
    OneLevel,
}

fn within(dn: &str, base: &str, depth: Depth) -> bool {
    match depth {
        Depth::Base => dn == base,
        Depth::Subtree => lmdir_schema::normalized_dn_is_within(dn, base),
        Depth::Children => lmdir_schema::normalized_dn_is_descendant_of(dn, base),
        Depth::OneLevel => lmdir_schema::normalized_dn_parent(dn) == Some(base),
    }
}

/// `dn.regex:` matching, with the pattern's size bounded; a pattern over the bounds or that
/// does not compile matches nothing.
fn regex_matches(pattern: &str, dn: &str) -> bool {
    use regex_automata::{meta, util::syntax};
    if pattern.len() > AUTHZ_REGEX_BYTES_MAX {
        return false;
    }
    let compiled = meta::Builder::new()
        .configure(
            meta::Config::new()
                .nfa_size_limit(Some(AUTHZ_REGEX_COMPILED_BYTES_MAX))
                .onepass_size_limit(Some(AUTHZ_REGEX_COMPILED_BYTES_MAX))
                .hybrid_cache_capacity(AUTHZ_REGEX_COMPILED_BYTES_MAX)
                .dfa_size_limit(Some(AUTHZ_REGEX_COMPILED_BYTES_MAX)),
        )
        .syntax(syntax::Config::new().case_insensitive(true))
        .build(pattern);
    compiled.is_ok_and(|regex| regex.is_match(dn))
}

/// Parses one rule value in slapd's authz syntax (see `Rule`). authzTo and authzFrom are
/// `X-ORDERED 'VALUES'` in slapd, which stores and exports them as `{0}dn.subtree:...`: the
/// `{n}` index orders the values and is no part of the rule (values migrated from slapcat
/// kept it, and no rule matched).
fn parse_rule(schema: &Schema, text: &str) -> Rule {
    let text = lmdir_schema::strip_ordering_prefix(text);
    let dn_rule = |dn: &str, make: fn(String) -> Rule| {
        let dn = dn.trim_start_matches(' ');
        if dn == "*" {
            return Rule::Anyone;
        }
        schema.normalize_dn_str(dn).map_or(Rule::Nothing, make)
    };
    /// A rule's prefix and the rule it makes of the DN that follows.
    type DnForm = (&'static str, fn(String) -> Rule);
    const DN_FORMS: [DnForm; 5] = [
        ("dn:", Rule::Exact),
        ("dn.exact:", Rule::Exact),
        ("dn.subtree:", Rule::Subtree),
        ("dn.children:", Rule::Children),
        ("dn.onelevel:", Rule::OneLevel),
    ];
    for (prefix, make) in DN_FORMS {
        if let Some(dn) = strip_prefix_ignore_case(text, prefix) {
            return dn_rule(dn, make);
        }
    }
    if let Some(pattern) = strip_prefix_ignore_case(text, "dn.regex:") {
        return Rule::Regex(pattern.trim_start_matches(' ').to_string());
    }
    if let Some(uid) = strip_prefix_ignore_case(text, "u:") {
        return Rule::User(uid.to_string());
    }
    if strip_prefix_ignore_case(text, "dn").is_some()
        || strip_prefix_ignore_case(text, "group").is_some()
        || strip_prefix_ignore_case(text, "u.").is_some()
    {
        return Rule::Nothing;
    }
    if let Some(url) = strip_prefix_ignore_case(text, "ldap://") {
        return parse_url(schema, url).unwrap_or(Rule::Nothing);
    }
    // slapd's last chance: a bare DN is an exact rule.
    dn_rule(text, Rule::Exact)
}

/// `ldap:///base??scope?filter` after `ldap://`: no host, no attributes, no extensions
/// (as slapd requires); scope defaults to base and the filter to `(objectClass=*)`.
fn parse_url(schema: &Schema, rest: &str) -> Option<Rule> {
    let rest = rest.strip_prefix('/')?;
    let mut parts = rest.split('?');
    let base = lmdir_config::percent_decoded(parts.next()?)?;
    let attributes = parts.next().unwrap_or("");
    let scope = match parts.next().unwrap_or("").to_ascii_lowercase().as_str() {
        "" | "base" => Scope::Base,
        "one" | "onelevel" => Scope::One,
        "sub" | "subtree" => Scope::Sub,
        _ => return None,
    };
    let filter = match parts.next().unwrap_or("") {
        "" => "(objectClass=*)".to_string(),
        filter => lmdir_config::percent_decoded(filter)?,
    };
    if !attributes.is_empty() || parts.next().is_some() {
        return None;
    }
    Some(Rule::Url {
        base: schema.normalize_dn_str(&base).ok()?,
        scope,
        filter,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::builtin()
    }

    #[test]
    fn rule_forms_parse_as_slapd_reads_them() {
        let schema = schema();
        let people = "ou=people,dc=example,dc=com".to_string();
        let cases = [
            (
                "dn:ou=People,dc=example,dc=com",
                Rule::Exact(people.clone()),
            ),
            (
                "DN.EXACT: ou=people,dc=example,dc=com",
                Rule::Exact(people.clone()),
            ),
            (
                "dn.subtree:ou=people,dc=example,dc=com",
                Rule::Subtree(people.clone()),
            ),
            (
                "dn.children:ou=people,dc=example,dc=com",
                Rule::Children(people.clone()),
            ),
            (
                "dn.onelevel:ou=people,dc=example,dc=com",
                Rule::OneLevel(people.clone()),
            ),
            ("dn:*", Rule::Anyone),
            (
                "dn.regex:^uid=[^,]+,ou=people",
                Rule::Regex("^uid=[^,]+,ou=people".to_string()),
            ),
            ("u:jdoe", Rule::User("jdoe".to_string())),
            ("ou=People,dc=example,dc=com", Rule::Exact(people.clone())),
            (
                "group/groupOfNames/member:cn=g,dc=example,dc=com",
                Rule::Nothing,
            ),
            ("dn.base:ou=people,dc=example,dc=com", Rule::Nothing),
            ("dn:not a dn", Rule::Nothing),
            ("ldap://host/dc=example,dc=com", Rule::Nothing),
            ("ldap:///dc=example,dc=com?cn?sub", Rule::Nothing),
            ("ldap:///dc=example,dc=com??bogus", Rule::Nothing),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_rule(&schema, text), expected, "{text}");
        }
        assert_eq!(
            parse_rule(
                &schema,
                "ldap:///ou=People,dc=example,dc=com??sub?(uid=a%2A)"
            ),
            Rule::Url {
                base: people,
                scope: Scope::Sub,
                filter: "(uid=a*)".to_string(),
            }
        );
    }

    #[test]
    fn scopes_compare_whole_rdns() {
        let base = "ou=people,dc=example,dc=com";
        let child = "uid=a,ou=people,dc=example,dc=com";
        let grandchild = "cn=x,uid=a,ou=people,dc=example,dc=com";
        assert!(within(base, base, Depth::Subtree) && !within(base, base, Depth::Children));
        assert!(within(child, base, Depth::OneLevel) && within(child, base, Depth::Children));
        assert!(!within(grandchild, base, Depth::OneLevel));
        assert!(within(grandchild, base, Depth::Subtree));
        // A suffix of the text that is not a suffix of RDNs.
        assert!(!within(
            "uid=a,xou=people,dc=example,dc=com",
            base,
            Depth::Subtree
        ));
    }

    #[test]
    fn regexes_are_bounded_and_case_insensitive() {
        assert!(regex_matches(
            "^uid=[^,]+,OU=people",
            "uid=a,ou=people,dc=x"
        ));
        assert!(!regex_matches("^uid=b,", "uid=a,ou=people,dc=x"));
        assert!(
            !regex_matches("(", "anything"),
            "a bad pattern matches nothing"
        );
        assert!(
            !regex_matches("(a{999}){999}", "aaaa"),
            "a pattern compiling past the size limit matches nothing"
        );
        let long = "a".repeat(AUTHZ_REGEX_BYTES_MAX + 1);
        assert!(!regex_matches(&long, &long));
    }

    #[test]
    fn percent_decoding_refuses_bad_escapes() {
        assert_eq!(
            lmdir_config::percent_decoded("a%20b").as_deref(),
            Some("a b")
        );
        assert_eq!(lmdir_config::percent_decoded("a%2"), None);
        assert_eq!(lmdir_config::percent_decoded("a%zz"), None);
    }
}
