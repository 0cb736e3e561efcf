//! lmdir-config: the TOML configuration every `lmdir` command reads (`--config FILE`), with an
//! embedded default. A bad file is an error naming the file, the line and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod http;
pub use http::{parse_http_listen, HttpConfig, ScimConfig, SCIM_GROUP_PATHS, SCIM_USER_PATHS};
pub use listen::ListenAddress;
pub use url::percent_decoded;
mod integrity;
mod listen;
mod url;
pub use integrity::{
    DynlistRule, IntegrityConfig, UniqueRule, DYNLIST_RULES_MAX, INTEGRITY_ITEMS_MAX,
};
mod accesslog;
mod replication;
pub use accesslog::{AccesslogConfig, ACCESSLOG_ENTRIES_MAX};
pub use replication::{
    provider_scheme, ConsumerConfig, ReplicationConfig, ReplicationShape, SyncType, CONSUMERS_MAX,
    CONSUMER_PDU_BYTES_MAX_DEFAULT, INTERVAL_SECONDS_MAX, RID_MAX, SERVER_ID_MAX,
    SESSION_LOG_ENTRIES_MAX,
};

/// The embedded default configuration, also the documented example.
pub const DEFAULT_CONFIG_TOML: &str = include_str!("default.toml");

/// The whole configuration. Every key is optional; a missing one takes its default (the values in
/// `DEFAULT_CONFIG_TOML`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub database: DatabaseConfig,
    /// `[[access]]` rules in file order; empty = the built-in default policy (see README).
    #[serde(default)]
    pub access: Vec<AccessRule>,
    /// `[[limits]]` rules in file order; the first whose `who` matches the bound identity
    /// gives its limits (keys it leaves out take the `[server]` values).
    #[serde(default)]
    pub limits: Vec<LimitsRule>,
    /// `[replication]`: server ID, provider and consumers (RFC 4533, OpenLDAP's names).
    #[serde(default)]
    pub replication: ReplicationConfig,
    /// `[http]`: the SCIM 2.0 and web console listener (off by default).
    #[serde(default)]
    pub http: HttpConfig,
    /// `[integrity]`: referential integrity and attribute uniqueness (refint, unique).
    #[serde(default)]
    pub integrity: IntegrityConfig,
    /// `[[dynlist]]`: dynamic groups (OpenLDAP's dynlist overlay).
    #[serde(default)]
    pub dynlist: Vec<DynlistRule>,
    /// `[accesslog]`: the audit trail of writes under cn=accesslog.
    #[serde(default)]
    pub accesslog: AccesslogConfig,
    /// Where the configuration came from (a path, or `<embedded default>`), for messages.
    #[serde(skip)]
    pub source_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// `ldap://host:port`, `ldaps://host:port`, `ldapi:///path/to/socket`, and behind a load
    /// balancer sending PROXY protocol headers `pldap://host:port`, `pldaps://host:port`.
    pub listen: Vec<String>,
    /// Addresses or networks (`10.0.0.7`, `10.0.0.0/24`, `fd00::/64`) whose connections to a
    /// pldap:// or pldaps:// listener may name another client in a PROXY header: the load
    /// balancers. A connection from elsewhere is closed. Needed with a pldap listener.
    pub proxy_protocol_sources: Vec<String>,
    /// PEM certificate chain path; empty = no TLS.
    pub tls_certificate: PathBuf,
    /// PEM private key path; empty = no TLS.
    pub tls_key: PathBuf,
    /// Refuse binds and writes before TLS (ldapi connections are exempt).
    pub require_tls: bool,
    /// With `require_tls`, refuse every other operation before TLS too (searches, compares,
    /// extended operations: confidentialityRequired), as slapd's `security ssf=`/`tls=`; only
    /// StartTLS, Abandon, Cancel and Unbind remain.
    pub require_tls_for_reads: bool,
    /// Answer an anonymous simple bind (empty DN and password) with inappropriateAuthentication
    /// (48), as slapd's `disallow bind_anon`.
    pub disallow_anonymous_bind: bool,
    /// Refuse every operation but bind and StartTLS from a session that has not bound, as
    /// slapd's `require authc`.
    pub require_authentication: bool,
    /// Permission bits of ldapi sockets, in octal (`"0777"`, as slapd).
    pub ldapi_mode: String,
    /// `host:port` of the Prometheus scrape endpoint (`/metrics`); empty = none.
    pub metrics_listen: String,
    pub connections_max: u32,
    /// Concurrent connections from one IP address (IPv6: one /64) other than loopback.
    pub connections_per_address_max: u32,
    /// The same for a loopback address (127.0.0.0/8, ::1) and for one local user over ldapi:
    /// local services (a Postfix or PHP pool) hold many connections, and only this host can
    /// connect from there.
    pub connections_per_loopback_address_max: u32,
    /// Largest request once bound (slapd `sockbuf_max_incoming_auth`).
    pub pdu_bytes_max: u32,
    /// Largest request before a successful bind (slapd `sockbuf_max_incoming`).
    pub anonymous_pdu_bytes_max: u32,
    pub filter_depth_max: u32,
    pub operations_per_connection_max: u32,
    /// Operations of one connection running at once (the rest wait, holding no thread).
    pub running_operations_per_connection_max: u32,
    /// 0 = never close idle connections.
    pub idle_timeout_seconds: u64,
    /// A connection whose client takes no bytes for this long is closed (slapd `writetimeout`).
    pub write_timeout_seconds: u64,
    /// TLS handshakes (ldaps and StartTLS) must finish within this.
    pub tls_handshake_timeout_seconds: u64,
    /// Entries per search; 0 = unlimited. The rootdn is never limited.
    pub size_limit: u64,
    /// 0 = unlimited. The rootdn is never limited.
    pub time_limit_seconds: u64,
    /// Candidates examined per search; 0 = unlimited. The rootdn is never limited.
    pub lookthrough_limit: u64,
    /// Failed binds per client address and bind DN answered without delay.
    pub bind_failure_burst: u32,
    /// After the burst, one failed bind per address and DN per this interval; 0 = no
    /// throttling.
    pub bind_failure_interval_milliseconds: u64,
    /// Failed binds per client address (all DNs together) answered without delay.
    pub bind_failure_address_burst: u32,
    /// After that burst, one failed bind per address per this interval; 0 = no address budget.
    pub bind_failure_address_interval_milliseconds: u64,
    /// `userPassword` values a simple bind verifies at most (the first ones stored).
    pub bind_password_values_max: u32,
    /// Filter items (leaves and substring pieces) per search or assertion filter.
    pub filter_items_max: u32,
    /// Attributes named in a search's or a pre/post-read control's attribute list.
    pub requested_attributes_max: u32,
    /// Keys of one server-side sort request.
    pub sort_keys_max: u32,
    /// Bytes of sort key values one sorted search may hold.
    pub sort_bytes_max: u64,
    /// Bytes of sort key values the sorted searches running at once may hold, all together.
    pub sort_bytes_total_max: u64,
    /// Memory that updates queued in open LDAP transactions (RFC 5805) may hold, all
    /// connections together (each connection also at most 64 MiB).
    pub transaction_bytes_max: u64,
    /// Memory the slow password verifications running at once may need, all together (at
    /// most one per CPU core runs; one needing more than this runs alone).
    pub password_verify_memory_bytes_max: u64,
    /// Scheme used by Password Modify and for hashing cleartext passwords on add.
    pub password_hash: String,
    /// Whether a cleartext `userPassword` written by add or modify is hashed with
    /// `password_hash` (a value with a `{SCHEME}` prefix is always stored as given).
    pub password_hash_cleartext: bool,
    /// Most time the single writer spends on one update; over it the update alone fails
    /// (adminLimitExceeded) and the rest of its batch commits.
    pub write_budget_milliseconds: u64,
    /// Most attribute descriptions (type + options) one entry may hold after an update.
    pub attribute_descriptions_per_entry_max: u32,
    /// Most options (`;lang-de`, `;x-...`) in one attribute description of an update.
    pub attribute_options_per_description_max: u32,
    /// Most values one attribute of one add or modify may carry.
    pub values_per_attribute_per_request_max: u32,
    /// Log filter: a level (`error`, `warn`, `info`, `debug`, `trace`) or tracing directives.
    pub log: String,
    /// `lmdir serve` logs here (appending; reopened on SIGHUP); empty = standard error.
    pub log_file: PathBuf,
    /// `text` (human-readable lines) or `json` (one JSON object per line).
    pub log_format: LogFormat,
    /// Which entries' `authzTo` / `authzFrom` rules let a bound identity act as another one
    /// (proxied authorization, RFC 4370), as slapd's `authz-policy`.
    pub authz_policy: AuthzPolicy,
}

/// slapd's `authz-policy`: which rules a proxied authorization must satisfy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthzPolicy {
    /// No proxying (except the rootdn, as slapd).
    #[default]
    None,
    /// The target entry's `authzFrom` must name the bound identity.
    From,
    /// The bound entry's `authzTo` must name the target.
    To,
    /// Either rule.
    Any,
    /// Both rules.
    All,
}

/// The shape of the server's log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec!["ldap://127.0.0.1:3389".to_string()],
            proxy_protocol_sources: Vec::new(),
            tls_certificate: PathBuf::new(),
            tls_key: PathBuf::new(),
            require_tls: false,
            require_tls_for_reads: false,
            disallow_anonymous_bind: false,
            require_authentication: false,
            ldapi_mode: "0777".to_string(),
            metrics_listen: String::new(),
            connections_max: 4096,
            connections_per_address_max: 64,
            connections_per_loopback_address_max: 1024,
            pdu_bytes_max: 4 * 1024 * 1024,
            anonymous_pdu_bytes_max: 256 * 1024,
            filter_depth_max: 64,
            operations_per_connection_max: 128,
            running_operations_per_connection_max: 4,
            idle_timeout_seconds: 900,
            write_timeout_seconds: 60,
            tls_handshake_timeout_seconds: 10,
            size_limit: 500,
            time_limit_seconds: 60,
            lookthrough_limit: 100_000,
            bind_failure_burst: 5,
            bind_failure_interval_milliseconds: 1000,
            bind_failure_address_burst: 100,
            bind_failure_address_interval_milliseconds: 100,
            bind_password_values_max: 16,
            filter_items_max: 10_000,
            requested_attributes_max: 1024,
            sort_keys_max: 16,
            sort_bytes_max: 64 * 1024 * 1024,
            sort_bytes_total_max: 256 * 1024 * 1024,
            transaction_bytes_max: 256 * 1024 * 1024,
            password_verify_memory_bytes_max: 1 << 30,
            password_hash: "SSHA".to_string(),
            password_hash_cleartext: true,
            write_budget_milliseconds: 1000,
            attribute_descriptions_per_entry_max: 1024,
            attribute_options_per_description_max: 8,
            values_per_attribute_per_request_max: 10_000,
            log: "info".to_string(),
            log_file: PathBuf::new(),
            log_format: LogFormat::Text,
            authz_policy: AuthzPolicy::None,
        }
    }
}

impl ServerConfig {
    /// Whether a certificate and key are configured.
    pub fn tls_enabled(&self) -> bool {
        !self.tls_certificate.as_os_str().is_empty() && !self.tls_key.as_os_str().is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    pub suffix: String,
    /// The LMDB directory. A relative path is relative to the current directory of the process.
    pub directory: PathBuf,
    /// The administrator DN (no limits, no access control); empty (the default in a file) =
    /// none.
    pub rootdn: String,
    /// The rootdn's password: cleartext or `{SCHEME}hash`; empty (the default in a file) = the
    /// rootdn cannot bind with a password.
    pub rootpw: String,
    /// Extra OpenLDAP-format `.schema` files loaded after the built-in schema.
    pub schema_files: Vec<PathBuf>,
    /// fsync every commit (false = no sync: faster, a crash may lose recent commits).
    pub sync: bool,
    /// Maintain `memberOf` on group members.
    pub memberof: bool,
    /// DN of the pwdPolicy entry for entries without `pwdPolicySubentry`; empty = none
    /// (OpenLDAP's `ppolicy_default`).
    pub password_policy_default: String,
    /// LMDB map size the store opens with; the map doubles by itself when more than half is
    /// used, so this is a starting reservation of address space, not a cap.
    pub map_size_bytes: u64,
    /// Indexed attribute → index kinds. Given in a file, it replaces the default set whole.
    pub index: BTreeMap<String, Vec<IndexKind>>,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        let index = [
            ("objectClass", &[IndexKind::Equality][..]),
            ("cn", &[IndexKind::Equality, IndexKind::Substring]),
            ("sn", &[IndexKind::Equality, IndexKind::Substring]),
            ("givenName", &[IndexKind::Equality, IndexKind::Substring]),
            ("mail", &[IndexKind::Equality, IndexKind::Substring]),
            ("uid", &[IndexKind::Equality, IndexKind::Substring]),
            ("uidNumber", &[IndexKind::Equality, IndexKind::Ordered]),
            ("gidNumber", &[IndexKind::Equality, IndexKind::Ordered]),
            ("member", &[IndexKind::Equality]),
            ("uniqueMember", &[IndexKind::Equality]),
            ("memberOf", &[IndexKind::Equality]),
            ("entryUUID", &[IndexKind::Equality]),
            ("ou", &[IndexKind::Equality]),
        ]
        .into_iter()
        .map(|(attribute, kinds)| (attribute.to_string(), kinds.to_vec()))
        .collect();
        DatabaseConfig {
            suffix: "dc=example,dc=com".to_string(),
            directory: PathBuf::from("./lmdir-data"),
            // A file without these keys has no rootdn and no root password (slapd: a rootdn
            // without rootpw cannot bind with a password). Only the embedded default's text
            // names the demo's admin and password.
            rootdn: String::new(),
            rootpw: String::new(),
            schema_files: Vec::new(),
            sync: true,
            memberof: true,
            password_policy_default: String::new(),
            map_size_bytes: MAP_SIZE_DEFAULT_BYTES,
            index,
        }
    }
}

/// entryUUID's OID (RFC 4530), as an index key may name it.
const ENTRY_UUID_OID: &str = "1.3.6.1.1.16.4";

/// The map LMDB reserves at open by default: 1 TiB of address space, not of disk (the file
/// grows with the data). Tools that cannot reserve that much (valgrind) set a smaller one.
pub const MAP_SIZE_DEFAULT_BYTES: u64 = 1 << 40;
/// Smallest configurable map: below it the map would double at once on any real directory.
pub const MAP_SIZE_MIN_BYTES: u64 = 16 << 20;
/// Largest configurable map (16 TiB): beyond what x86-64 user address space comfortably gives.
pub const MAP_SIZE_MAX_BYTES: u64 = 16 << 40;

/// The kinds of index an attribute can have: the one type the config, the store, the loader
/// and migrate share; `IndexKind::from_name` is the one reader of their words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IndexKind {
    Equality,
    Presence,
    /// Initial, any and final grams, built together.
    Substring,
    Ordered,
    /// Approximate matching is equality on normalized values (lmdir-schema): the store serves
    /// it with the equality index.
    Approx,
}

impl IndexKind {
    /// The config words, first the one `name` writes.
    pub const NAMES: [&'static str; 5] = ["eq", "pres", "sub", "ordered", "approx"];

    /// The config word.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Equality => "eq",
            IndexKind::Presence => "pres",
            IndexKind::Substring => "sub",
            IndexKind::Ordered => "ordered",
            IndexKind::Approx => "approx",
        }
    }

    /// The kind a word names, in lmdir's config or OpenLDAP's `index` directive (case-blind):
    /// eq/equality, pres/presence, sub/substr/substring(s)/subinitial/subany/subfinal,
    /// ord/ordered/ordering, approx.
    pub fn from_name(word: &str) -> Option<IndexKind> {
        Some(match word.to_ascii_lowercase().as_str() {
            "eq" | "equality" => IndexKind::Equality,
            "pres" | "presence" => IndexKind::Presence,
            "sub" | "substr" | "substring" | "substrings" | "subinitial" | "subany"
            | "subfinal" => IndexKind::Substring,
            "ord" | "ordered" | "ordering" => IndexKind::Ordered,
            "approx" => IndexKind::Approx,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for IndexKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = String::deserialize(deserializer)?;
        IndexKind::from_name(&word)
            .ok_or_else(|| serde::de::Error::unknown_variant(&word, &IndexKind::NAMES))
    }
}

/// One `[[access]]` rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessRule {
    pub to: AccessTarget,
    pub by: Vec<AccessClause>,
}

/// What a rule applies to; every part given must match (an empty target matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessTarget {
    /// This entry and everything below it.
    pub subtree: Option<String>,
    /// Exactly this entry.
    pub dn: Option<String>,
    /// The entries exactly one level below this one (slapd's `dn.one`), not itself.
    pub one: Option<String>,
    /// Every entry below this one (slapd's `dn.children`), not itself.
    pub children: Option<String>,
    /// Only entries matching this RFC 4515 filter.
    pub filter: Option<String>,
    /// Attribute names (subtypes included), `entry`, `children`; empty = all.
    pub attrs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessClause {
    pub who: Who,
    pub access: AccessLevel,
}

/// Who a `by` clause is about.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Who {
    /// Not bound (anonymous).
    Anonymous,
    /// Any bound user.
    Users,
    /// The entry the access is about.
    SelfEntry,
    /// `*`: everyone.
    Anyone,
    /// `dn=<DN>`: exactly this bound DN.
    Dn(String),
    /// `dn.subtree=<DN>`: bound DNs at or below this DN.
    DnSubtree(String),
    /// `dn.one=<DN>` (also `dn.onelevel=`): bound DNs exactly one level below this DN.
    DnOne(String),
    /// `dn.children=<DN>`: bound DNs below this DN, not itself.
    DnChildren(String),
    /// `group=<DN>`: members (`member` / `uniqueMember`) of this group, whatever its class.
    Group(String),
    /// `group/<objectClass>/<attribute>=<DN>` (slapd's `group` clause, whose bare `group=`
    /// means `group/groupOfNames/member=`): bound DNs that are values of exactly `attribute` of
    /// the entry `dn`, which must have `object_class` among its objectClass values.
    GroupOf {
        object_class: String,
        attribute: String,
        dn: String,
    },
}

impl TryFrom<String> for Who {
    type Error = String;

    fn try_from(text: String) -> Result<Who, String> {
        let dn_argument = |prefix: &str| -> Option<Result<String, String>> {
            let rest = text.get(..prefix.len())?;
            if !rest.eq_ignore_ascii_case(prefix) {
                return None;
            }
            let dn = text[prefix.len()..].trim().to_string();
            Some(
                check_dn(&dn)
                    .map(|()| dn.clone())
                    .map_err(|message| format!("who = {text:?}: {message}")),
            )
        };
        match text.to_ascii_lowercase().as_str() {
            "anonymous" => return Ok(Who::Anonymous),
            "users" => return Ok(Who::Users),
            "self" => return Ok(Who::SelfEntry),
            "*" => return Ok(Who::Anyone),
            _ => {}
        }
        if let Some(dn) = dn_argument("dn.subtree=") {
            return dn.map(Who::DnSubtree);
        }
        if let Some(dn) = dn_argument("dn.one=").or_else(|| dn_argument("dn.onelevel=")) {
            return dn.map(Who::DnOne);
        }
        if let Some(dn) = dn_argument("dn.children=") {
            return dn.map(Who::DnChildren);
        }
        if let Some(dn) = dn_argument("dn=") {
            return dn.map(Who::Dn);
        }
        if let Some(dn) = dn_argument("group=") {
            return dn.map(Who::Group);
        }
        if let Some(who) = group_of(&text) {
            return who;
        }
        Err(format!(
            "unknown who {text:?} (anonymous, users, self, *, \"dn=<DN>\", \"dn.subtree=<DN>\", \
             \"dn.one=<DN>\", \"dn.children=<DN>\", \"group=<DN>\", \
             \"group/<objectClass>/<attribute>=<DN>\")"
        ))
    }
}

/// `group/<objectClass>/<attribute>=<DN>`; None when the text does not start with `group/`.
fn group_of(text: &str) -> Option<Result<Who, String>> {
    let rest = text
        .get(..6)
        .filter(|start| start.eq_ignore_ascii_case("group/"))
        .map(|_| &text[6..])?;
    let form = || {
        format!("who = {text:?}: write \"group/<objectClass>/<attribute>=<DN>\" (both names given)")
    };
    let Some((path, dn)) = rest.split_once('=') else {
        return Some(Err(form()));
    };
    let Some((object_class, attribute)) = path.split_once('/') else {
        return Some(Err(form()));
    };
    if !is_attribute_name(object_class) || !is_attribute_name(attribute) {
        return Some(Err(form()));
    }
    let dn = dn.trim().to_string();
    Some(
        check_dn(&dn)
            .map(|()| Who::GroupOf {
                object_class: object_class.to_string(),
                attribute: attribute.to_string(),
                dn: dn.clone(),
            })
            .map_err(|message| format!("who = {text:?}: {message}")),
    )
}

impl fmt::Display for Who {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Anonymous => formatter.write_str("anonymous"),
            Who::Users => formatter.write_str("users"),
            Who::SelfEntry => formatter.write_str("self"),
            Who::Anyone => formatter.write_str("*"),
            Who::Dn(dn) => write!(formatter, "dn={dn}"),
            Who::DnSubtree(dn) => write!(formatter, "dn.subtree={dn}"),
            Who::DnOne(dn) => write!(formatter, "dn.one={dn}"),
            Who::DnChildren(dn) => write!(formatter, "dn.children={dn}"),
            Who::Group(dn) => write!(formatter, "group={dn}"),
            Who::GroupOf {
                object_class,
                attribute,
                dn,
            } => write!(formatter, "group/{object_class}/{attribute}={dn}"),
        }
    }
}

/// One `[[limits]]` rule (OpenLDAP's `limits` directive): search limits for the identities
/// `who` matches. An absent key keeps the `[server]` value.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsRule {
    /// As an `[[access]]` clause's `who`, except `self` (limits are not about an entry).
    pub who: Who,
    /// Entries per search (`[server] size_limit`; OpenLDAP `size`).
    pub size: Option<Limit>,
    /// Time per search (`[server] time_limit_seconds`; OpenLDAP `time`).
    pub time_seconds: Option<Limit>,
    /// Candidates examined per search (`[server] lookthrough_limit`; OpenLDAP `size.unchecked`).
    pub lookthrough: Option<Limit>,
    /// Entries over all pages of one paged search (OpenLDAP `size.prtotal`); absent = the
    /// rule's (or the server's) size limit.
    pub paged_total: Option<Limit>,
    /// Largest page honoured; bigger page requests get pages of this size (OpenLDAP
    /// `size.pr`); absent = no cap.
    pub page_size: Option<Limit>,
}

impl LimitsRule {
    /// The rule's limits with their config keys, for validation and messages.
    pub fn keyed_limits(&self) -> [(&'static str, Option<Limit>); 5] {
        [
            ("size", self.size),
            ("time_seconds", self.time_seconds),
            ("lookthrough", self.lookthrough),
            ("paged_total", self.paged_total),
            ("page_size", self.page_size),
        ]
    }
}

/// A limit in a `[[limits]]` rule: a positive count or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Count(u64),
    Unlimited,
}

impl Limit {
    /// The count as the server's settings hold limits: 0 = unlimited.
    pub fn zero_unlimited(self) -> u64 {
        match self {
            Limit::Count(count) => count,
            Limit::Unlimited => 0,
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Limit, D::Error> {
        deserializer.deserialize_any(LimitVisitor)
    }
}

/// Reads a limit written as a number or a word; anything else (a table from `size.soft = 5`,
/// a negative number) is an error saying what is expected.
struct LimitVisitor;

impl serde::de::Visitor<'_> for LimitVisitor {
    type Value = Limit;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a positive number or \"unlimited\"")
    }

    fn visit_u64<E: serde::de::Error>(self, count: u64) -> Result<Limit, E> {
        Ok(Limit::Count(count))
    }

    fn visit_i64<E: serde::de::Error>(self, count: i64) -> Result<Limit, E> {
        u64::try_from(count)
            .map(Limit::Count)
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(count), &self))
    }

    fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<Limit, E> {
        if word.eq_ignore_ascii_case("unlimited") {
            Ok(Limit::Unlimited)
        } else {
            Err(E::invalid_value(serde::de::Unexpected::Str(word), &self))
        }
    }
}

/// Access levels, each implying the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLevel {
    None,
    Auth,
    Compare,
    Search,
    Read,
    Write,
}

impl AccessLevel {
    /// The config word.
    pub fn word(self) -> &'static str {
        match self {
            AccessLevel::None => "none",
            AccessLevel::Auth => "auth",
            AccessLevel::Compare => "compare",
            AccessLevel::Search => "search",
            AccessLevel::Read => "read",
            AccessLevel::Write => "write",
        }
    }
}

/// A configuration problem: which file, which line (when known), which key, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub source_name: String,
    pub line: Option<u64>,
    /// Dotted key path, e.g. `server.listen` or `access[0].by[1].who`.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}", self.source_name)?;
        if let Some(line) = self.line {
            write!(formatter, ":{line}")?;
        }
        write!(formatter, ": ")?;
        if let Some(key) = &self.key {
            write!(formatter, "{key}: ")?;
        }
        write!(formatter, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Password schemes lmdir can hash with (lmdir-access `Scheme::can_hash`).
pub const PASSWORD_HASH_SCHEMES: &[&str] = &[
    "SSHA",
    "SSHA256",
    "SSHA384",
    "SSHA512",
    "PBKDF2-SHA256",
    "ARGON2",
    "CRYPT",
];

const LOG_LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

impl Default for Config {
    fn default() -> Self {
        Config {
            server: ServerConfig::default(),
            database: DatabaseConfig::default(),
            access: Vec::new(),
            limits: Vec::new(),
            replication: ReplicationConfig::default(),
            http: HttpConfig::default(),
            integrity: IntegrityConfig::default(),
            dynlist: Vec::new(),
            accesslog: AccesslogConfig::default(),
            source_name: EMBEDDED_SOURCE_NAME.to_string(),
        }
    }
}

const EMBEDDED_SOURCE_NAME: &str = "<embedded default>";

/// One step of a key path, for finding a key's line in the file.
#[derive(Debug, Clone)]
enum KeyStep {
    Key(&'static str),
    /// A key chosen by the user (an indexed attribute's name).
    Name(String),
    Index(usize),
}

struct Problem {
    path: Vec<KeyStep>,
    message: String,
}

fn problem(path: Vec<KeyStep>, message: impl Into<String>) -> Problem {
    Problem {
        path,
        message: message.into(),
    }
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let source_name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            source_name: source_name.clone(),
            line: None,
            key: None,
            message: format!("cannot read the config file: {error}"),
        })?;
        Config::from_str(&text, &source_name)
    }

    /// Parses and validates config text; `source_name` names it in errors.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str, source_name: &str) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|error| {
            let span = error.span();
            let line = span.as_ref().map(|span| line_of(text, span.start));
            let key = span.as_ref().and_then(|span| key_at(text, span.start));
            ConfigError {
                source_name: source_name.to_string(),
                line,
                key,
                message: error.message().trim().to_string(),
            }
        })?;
        config.source_name = source_name.to_string();
        if let Err(problem) = config.validate() {
            return Err(ConfigError {
                source_name: source_name.to_string(),
                line: locate(text, &problem.path),
                key: Some(path_text(&problem.path)),
                message: problem.message,
            });
        }
        Ok(config)
    }

    /// The embedded default configuration.
    pub fn embedded_default() -> Config {
        match Config::from_str(DEFAULT_CONFIG_TOML, EMBEDDED_SOURCE_NAME) {
            Ok(config) => config,
            // The embedded text is fixed at build time and tested; failing here is a build bug.
            Err(error) => unreachable!("the embedded default config is invalid: {error}"),
        }
    }

    /// The database directory as an absolute path (relative to the current directory).
    pub fn database_directory(&self) -> std::io::Result<PathBuf> {
        std::path::absolute(&self.database.directory)
    }

    /// Checks every key and every rule between keys again, for a config put together rather
    /// than read from one file: a reload's, which keeps the running value of each key that
    /// needs a restart (`require_tls` with the running TLS files and listeners, not the
    /// file's). The error names the key (`server.require_tls: …`).
    pub fn check(&self) -> Result<(), String> {
        self.validate()
            .map_err(|problem| format!("{}: {}", path_text(&problem.path), problem.message))
    }

    fn validate(&self) -> Result<(), Problem> {
        use KeyStep::{Index, Key};
        let server = &self.server;
        if server.listen.is_empty() {
            return Err(problem(
                vec![Key("server"), Key("listen")],
                "at least one listen URL is needed",
            ));
        }
        let mut has_ldaps = false;
        let mut has_network = false;
        let mut has_proxied = false;
        for (index, url) in server.listen.iter().enumerate() {
            let address = ListenAddress::parse(url).map_err(|message| {
                problem(vec![Key("server"), Key("listen"), Index(index)], message)
            })?;
            has_ldaps |= address.is_tls();
            has_network |= address.is_network();
            has_proxied |= address.is_proxied();
        }
        for (index, source) in server.proxy_protocol_sources.iter().enumerate() {
            parse_network(source).map_err(|message| {
                problem(
                    vec![Key("server"), Key("proxy_protocol_sources"), Index(index)],
                    message,
                )
            })?;
        }
        if has_proxied && server.proxy_protocol_sources.is_empty() {
            return Err(problem(
                vec![Key("server"), Key("proxy_protocol_sources")],
                "a pldap:// or pldaps:// listener needs proxy_protocol_sources: the load \
                 balancers' addresses or networks, the only peers whose PROXY header is believed",
            ));
        }
        let certificate_set = !server.tls_certificate.as_os_str().is_empty();
        let key_set = !server.tls_key.as_os_str().is_empty();
        if certificate_set != key_set {
            let missing = if certificate_set {
                "tls_key"
            } else {
                "tls_certificate"
            };
            let given = if certificate_set {
                "tls_certificate"
            } else {
                "tls_key"
            };
            return Err(problem(
                vec![Key("server"), Key(given)],
                format!("{given} is set but {missing} is empty: TLS needs both"),
            ));
        }
        if has_ldaps && !server.tls_enabled() {
            return Err(problem(
                vec![Key("server"), Key("listen")],
                "an ldaps:// or pldaps:// listener needs tls_certificate and tls_key",
            ));
        }
        if server.require_tls_for_reads && !server.require_tls {
            return Err(problem(
                vec![Key("server"), Key("require_tls_for_reads")],
                "require_tls_for_reads needs require_tls (binds and writes first)",
            ));
        }
        if server.require_tls && has_network && !server.tls_enabled() {
            return Err(problem(
                vec![Key("server"), Key("require_tls")],
                "require_tls on an ldap:// or ldaps:// listener needs tls_certificate and tls_key",
            ));
        }
        parse_ldapi_mode(&server.ldapi_mode)
            .map_err(|message| problem(vec![Key("server"), Key("ldapi_mode")], message))?;
        parse_metrics_listen(&server.metrics_listen)
            .map_err(|message| problem(vec![Key("server"), Key("metrics_listen")], message))?;
        let ranges: [(&'static str, u64, u64, u64); 26] = [
            (
                "connections_max",
                server.connections_max.into(),
                1,
                1_000_000,
            ),
            (
                "connections_per_address_max",
                server.connections_per_address_max.into(),
                1,
                1_000_000,
            ),
            (
                "connections_per_loopback_address_max",
                server.connections_per_loopback_address_max.into(),
                1,
                1_000_000,
            ),
            ("pdu_bytes_max", server.pdu_bytes_max.into(), 1024, 1 << 30),
            (
                "anonymous_pdu_bytes_max",
                server.anonymous_pdu_bytes_max.into(),
                1024,
                1 << 30,
            ),
            (
                "running_operations_per_connection_max",
                server.running_operations_per_connection_max.into(),
                1,
                1_000_000,
            ),
            (
                "write_timeout_seconds",
                server.write_timeout_seconds,
                1,
                86_400,
            ),
            (
                "tls_handshake_timeout_seconds",
                server.tls_handshake_timeout_seconds,
                1,
                3_600,
            ),
            (
                "bind_failure_burst",
                server.bind_failure_burst.into(),
                1,
                1_000_000,
            ),
            (
                "bind_failure_interval_milliseconds",
                server.bind_failure_interval_milliseconds,
                0,
                60_000,
            ),
            (
                "bind_failure_address_burst",
                server.bind_failure_address_burst.into(),
                1,
                1_000_000,
            ),
            (
                "bind_failure_address_interval_milliseconds",
                server.bind_failure_address_interval_milliseconds,
                0,
                60_000,
            ),
            (
                "bind_password_values_max",
                server.bind_password_values_max.into(),
                1,
                1_000,
            ),
            ("filter_depth_max", server.filter_depth_max.into(), 1, 1000),
            // lmdir-schema refuses more than 100,000 filter items whatever the config says.
            (
                "filter_items_max",
                server.filter_items_max.into(),
                1,
                100_000,
            ),
            (
                "requested_attributes_max",
                server.requested_attributes_max.into(),
                1,
                100_000,
            ),
            ("sort_keys_max", server.sort_keys_max.into(), 1, 1024),
            ("sort_bytes_max", server.sort_bytes_max, 1 << 20, 1 << 36),
            (
                "sort_bytes_total_max",
                server.sort_bytes_total_max,
                1 << 20,
                1 << 40,
            ),
            (
                "transaction_bytes_max",
                server.transaction_bytes_max,
                1 << 20,
                1 << 36,
            ),
            (
                "password_verify_memory_bytes_max",
                server.password_verify_memory_bytes_max,
                1 << 20,
                1 << 40,
            ),
            (
                "operations_per_connection_max",
                server.operations_per_connection_max.into(),
                1,
                1_000_000,
            ),
            (
                "write_budget_milliseconds",
                server.write_budget_milliseconds,
                10,
                600_000,
            ),
            // 65,536: the most an entry record can hold (lmdir-store's codec).
            (
                "attribute_descriptions_per_entry_max",
                server.attribute_descriptions_per_entry_max.into(),
                16,
                65_536,
            ),
            // 16: the most the schema parses (lmdir-schema's DESCRIPTION_OPTIONS_MAX).
            (
                "attribute_options_per_description_max",
                server.attribute_options_per_description_max.into(),
                0,
                16,
            ),
            (
                "values_per_attribute_per_request_max",
                server.values_per_attribute_per_request_max.into(),
                1,
                1_000_000,
            ),
        ];
        for (key, value, minimum, maximum) in ranges {
            if value < minimum || value > maximum {
                return Err(problem(
                    vec![Key("server"), Key(key)],
                    format!("{value} is outside the allowed range {minimum}..={maximum}"),
                ));
            }
        }
        if !PASSWORD_HASH_SCHEMES
            .iter()
            .any(|scheme| scheme.eq_ignore_ascii_case(&server.password_hash))
        {
            return Err(problem(
                vec![Key("server"), Key("password_hash")],
                format!(
                    "unknown password scheme {:?} (one of {})",
                    server.password_hash,
                    PASSWORD_HASH_SCHEMES.join(", ")
                ),
            ));
        }
        check_log_filter(&server.log)
            .map_err(|message| problem(vec![Key("server"), Key("log")], message))?;

        let database = &self.database;
        if database.suffix.trim().is_empty() {
            return Err(problem(
                vec![Key("database"), Key("suffix")],
                "the suffix must not be empty",
            ));
        }
        check_dn(&database.suffix)
            .map_err(|message| problem(vec![Key("database"), Key("suffix")], message))?;
        if database.directory.as_os_str().is_empty() {
            return Err(problem(
                vec![Key("database"), Key("directory")],
                "the database directory must not be empty",
            ));
        }
        if !database.rootdn.is_empty() {
            check_dn(&database.rootdn)
                .map_err(|message| problem(vec![Key("database"), Key("rootdn")], message))?;
        }
        if !database.password_policy_default.is_empty() {
            check_dn(&database.password_policy_default).map_err(|message| {
                problem(
                    vec![Key("database"), Key("password_policy_default")],
                    message,
                )
            })?;
        }
        if !(MAP_SIZE_MIN_BYTES..=MAP_SIZE_MAX_BYTES).contains(&database.map_size_bytes) {
            return Err(problem(
                vec![Key("database"), Key("map_size_bytes")],
                format!(
                    "the map size must be between {MAP_SIZE_MIN_BYTES} (16 MiB) and \
                     {MAP_SIZE_MAX_BYTES} (16 TiB) bytes"
                ),
            ));
        }
        let mut seen_attributes: BTreeMap<String, &str> = BTreeMap::new();
        for (attribute, kinds) in &database.index {
            let path = || {
                vec![
                    Key("database"),
                    Key("index"),
                    KeyStep::Name(attribute.clone()),
                ]
            };
            if !is_attribute_name(attribute) {
                return Err(problem(
                    path(),
                    format!("{attribute:?} is not an attribute name"),
                ));
            }
            if let Some(previous) =
                seen_attributes.insert(attribute.to_ascii_lowercase(), attribute)
            {
                return Err(problem(
                    path(),
                    format!("{attribute:?} and {previous:?} name the same attribute"),
                ));
            }
            if kinds.is_empty() {
                return Err(problem(
                    path(),
                    format!("{attribute}: list at least one index kind or remove the attribute"),
                ));
            }
        }

        self.validate_access()?;
        self.validate_limits()?;
        self.http.validate(self.server.tls_enabled())?;
        self.replication
            .validate(&self.database.suffix, &self.server.listen)?;
        self.integrity.validate()?;
        integrity::validate_dynlist(&self.dynlist)?;
        self.accesslog.validate()?;
        self.validate_consumer_index()
    }

    /// A consumer finds every entry the provider sends by its entryUUID (changes, deletes, the
    /// present phase): without that equality index each would fail with unwillingToPerform.
    fn validate_consumer_index(&self) -> Result<(), Problem> {
        use KeyStep::Key;
        if self.replication.consumer.is_empty() {
            return Ok(());
        }
        let indexed = self.database.index.iter().any(|(attribute, kinds)| {
            (attribute.eq_ignore_ascii_case("entryUUID") || attribute == ENTRY_UUID_OID)
                && kinds.contains(&IndexKind::Equality)
        });
        if indexed {
            return Ok(());
        }
        Err(problem(
            vec![Key("database"), Key("index")],
            "a replication consumer needs `entryUUID = [\"eq\"]`: it finds the entries the \
             provider sends by their entryUUID",
        ))
    }

    fn validate_access(&self) -> Result<(), Problem> {
        use KeyStep::{Index, Key};
        for (rule_index, rule) in self.access.iter().enumerate() {
            let rule_path = |rest: &[KeyStep]| {
                let mut path = vec![Key("access"), Index(rule_index)];
                path.extend_from_slice(rest);
                path
            };
            let scopes = [
                ("subtree", &rule.to.subtree),
                ("dn", &rule.to.dn),
                ("one", &rule.to.one),
                ("children", &rule.to.children),
            ];
            for (key, dn) in scopes {
                if let Some(dn) = dn {
                    check_dn(dn)
                        .map_err(|message| problem(rule_path(&[Key("to"), Key(key)]), message))?;
                }
            }
            if scopes.iter().filter(|(_, dn)| dn.is_some()).count() > 1 {
                return Err(problem(
                    rule_path(&[Key("to")]),
                    "give at most one of subtree, dn, one and children",
                ));
            }
            if let Some(filter) = &rule.to.filter {
                check_filter_shape(filter)
                    .map_err(|message| problem(rule_path(&[Key("to"), Key("filter")]), message))?;
            }
            for attribute in &rule.to.attrs {
                if !is_attribute_name(attribute) {
                    return Err(problem(
                        rule_path(&[Key("to"), Key("attrs")]),
                        format!("{attribute:?} is not an attribute name"),
                    ));
                }
            }
            if rule.by.is_empty() {
                return Err(problem(
                    rule_path(&[Key("by")]),
                    "a rule needs at least one `by` clause",
                ));
            }
        }
        Ok(())
    }

    fn validate_limits(&self) -> Result<(), Problem> {
        use KeyStep::{Index, Key};
        for (rule_index, rule) in self.limits.iter().enumerate() {
            let path = |key: &'static str| vec![Key("limits"), Index(rule_index), Key(key)];
            if rule.who == Who::SelfEntry {
                return Err(problem(
                    path("who"),
                    "\"self\" means nothing in a limits rule (it is not about an entry)",
                ));
            }
            let keyed = rule.keyed_limits();
            if keyed.iter().all(|(_, limit)| limit.is_none()) {
                return Err(problem(
                    path("who"),
                    "a limits rule needs at least one of size, time_seconds, lookthrough, \
                     paged_total, page_size",
                ));
            }
            for (key, limit) in keyed {
                if limit == Some(Limit::Count(0)) {
                    return Err(problem(
                        path(key),
                        "0 is not a limit: write a positive number or \"unlimited\"",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The ldapi socket's permission bits from their octal text (`"0777"`, `"770"`): 3 or 4 octal
/// digits, at most 0777 (set-id and sticky bits mean nothing on a socket).
pub fn parse_ldapi_mode(text: &str) -> Result<u32, String> {
    let digits = text.trim();
    let octal =
        (3..=4).contains(&digits.len()) && digits.bytes().all(|b| (b'0'..=b'7').contains(&b));
    match u32::from_str_radix(digits, 8) {
        Ok(mode) if octal && mode <= 0o777 => Ok(mode),
        _ => Err(format!(
            "{text:?} is not a socket mode: 3 or 4 octal digits up to \"0777\""
        )),
    }
}

/// The metrics endpoint's address: None when `text` is empty, else an `ip:port` (a name would
/// need a resolver at start and could bind somewhere unexpected; the endpoint is meant for
/// loopback or a management network).
/// An address (`10.0.0.7`, `::1`: the one host) or a network in CIDR form (`10.0.0.0/24`,
/// `fd00::/64`), as `proxy_protocol_sources` lists them.
pub fn parse_network(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    if let Ok(address) = text.parse::<std::net::IpAddr>() {
        return Ok(ipnet::IpNet::from(address));
    }
    text.parse::<ipnet::IpNet>()
        .map(|network| network.trunc())
        .map_err(|_| format!("{text:?} is neither an IP address nor a network (10.0.0.0/24)"))
}

pub fn parse_metrics_listen(text: &str) -> Result<Option<std::net::SocketAddr>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| format!("{text:?} is not an address: ip:port such as \"127.0.0.1:9330\""))
}

fn check_log_filter(filter: &str) -> Result<(), String> {
    let filter = filter.trim();
    if filter.is_empty() {
        return Err("the log filter must not be empty".to_string());
    }
    // Directives (`lmdir_server=debug,info`) are checked by the logger itself; a bare word must
    // be a level, since a typo there would silently log nothing.
    let is_directive_list = filter.contains('=') || filter.contains(',') || filter.contains(':');
    if !is_directive_list
        && !LOG_LEVELS
            .iter()
            .any(|level| level.eq_ignore_ascii_case(filter))
    {
        return Err(format!(
            "unknown log level {filter:?} ({})",
            LOG_LEVELS.join(", ")
        ));
    }
    Ok(())
}

fn is_attribute_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let keyword = !bytes.is_empty()
        && bytes[0].is_ascii_alphabetic()
        && bytes
            .iter()
            .all(|&byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b';');
    let oid = !bytes.is_empty()
        && bytes
            .iter()
            .all(|&byte| byte.is_ascii_digit() || byte == b'.')
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..");
    keyword || oid
}

/// A light RFC 4514 shape check (the schema crate parses DNs fully when the server starts):
/// comma-separated RDNs, each `type=value` pairs joined by '+', escapes honoured.
fn check_dn(dn: &str) -> Result<(), String> {
    if dn.trim().is_empty() {
        return Err("the DN is empty".to_string());
    }
    let mut components = Vec::new();
    let mut current = String::new();
    let mut characters = dn.chars();
    while let Some(character) = characters.next() {
        match character {
            '\\' => {
                current.push(character);
                match characters.next() {
                    Some(escaped) => current.push(escaped),
                    None => return Err(format!("DN {dn:?} ends with a lone '\\'")),
                }
            }
            ',' | '+' => components.push(std::mem::take(&mut current)),
            _ => current.push(character),
        }
    }
    components.push(current);
    for component in components {
        let Some((attribute, _value)) = component.split_once('=') else {
            return Err(format!(
                "DN {dn:?}: {:?} is not attribute=value",
                component.trim()
            ));
        };
        if !is_attribute_name(attribute.trim()) {
            return Err(format!(
                "DN {dn:?}: {:?} is not an attribute name",
                attribute.trim()
            ));
        }
    }
    Ok(())
}

/// A filter must be one parenthesized RFC 4515 expression (the full parse happens when the
/// server builds its access policy).
fn check_filter_shape(filter: &str) -> Result<(), String> {
    let filter = filter.trim();
    if !filter.starts_with('(') || !filter.ends_with(')') {
        return Err(format!("filter {filter:?} must be enclosed in parentheses"));
    }
    let mut depth = 0i64;
    let mut escaped = false;
    for (position, character) in filter.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match character {
            '\\' => escaped = true,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 || (depth == 0 && position + 1 != filter.len()) {
                    return Err(format!("filter {filter:?} has unbalanced parentheses"));
                }
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("filter {filter:?} has unbalanced parentheses"));
    }
    Ok(())
}

fn line_of(text: &str, offset: usize) -> u64 {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&byte| byte == b'\n')
        .count() as u64
        + 1
}

/// The dotted key at a toml error position: the enclosing `[table]` header plus the key on that
/// line nearest before (or at) the error.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |newline| newline + 1);
    let line_end = text[offset..]
        .find('\n')
        .map_or(text.len(), |newline| offset + newline);
    let line = &text[line_start..line_end];
    let is_key_char = |character: char| {
        character.is_ascii_alphanumeric()
            || character == '_'
            || character == '-'
            || character == '.'
    };
    // The error may point at a key (unknown field) or at a value (bad type or variant).
    let at: String = text[offset..line_end]
        .trim_start()
        .chars()
        .take_while(|&character| is_key_char(character))
        .collect();
    let after_key = text[offset..line_end].trim_start()[at.len()..].trim_start();
    let before = &text[line_start..offset];
    let key = if !at.is_empty() && after_key.starts_with('=') {
        at
    } else if let Some(equals) = before.rfind('=') {
        let name = before[..equals].trim_end();
        let start = name
            .rfind(|character: char| !is_key_char(character))
            .map_or(0, |position| position + 1);
        name[start..].to_string()
    } else {
        at
    };
    let header_name = |candidate: &str| {
        let candidate = candidate.trim();
        candidate
            .strip_prefix("[[")
            .and_then(|rest| rest.split_once("]]"))
            .map(|(name, _)| {
                // An array of tables: name the element (`limits[1]`), as validation errors do.
                let name = name.trim();
                // Headers up to the error's line: the nearest one is the last of them.
                let earlier = text[..line_end]
                    .lines()
                    .filter(|other| {
                        other
                            .trim()
                            .strip_prefix("[[")
                            .and_then(|rest| rest.split_once("]]"))
                            .is_some_and(|(other, _)| other.trim() == name)
                    })
                    .count();
                format!("{name}[{}]", earlier.saturating_sub(1))
            })
            .or_else(|| {
                candidate
                    .strip_prefix('[')
                    .and_then(|rest| rest.split_once(']'))
                    .map(|(name, _)| name.trim().to_string())
            })
    };
    if let Some(header) = header_name(line) {
        return Some(header);
    }
    let header = text[..line_start].lines().rev().find_map(header_name);
    match (header, key.is_empty()) {
        (Some(header), false) => Some(format!("{header}.{key}")),
        (Some(header), true) => Some(header),
        (None, false) => Some(key),
        (None, true) => None,
    }
}

fn path_text(path: &[KeyStep]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            KeyStep::Key(key) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(key);
            }
            KeyStep::Name(name) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(name);
            }
            KeyStep::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

/// The line of the deepest key of `path` present in the file (the key itself when it is
/// there, else its nearest enclosing table).
fn locate(text: &str, path: &[KeyStep]) -> Option<u64> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut best_offset: Option<usize> = None;
    let mut current: Option<&DeValue<'_>> = None;
    let mut table: Option<&DeTable<'_>> = Some(root.get_ref());
    for step in path {
        let next = match (step, table, current) {
            (KeyStep::Key(key), Some(table), _) => table.get(*key),
            (KeyStep::Name(name), Some(table), _) => table.get(name.as_str()),
            (KeyStep::Index(index), _, Some(DeValue::Array(array))) => array.get(*index),
            _ => None,
        };
        let Some(next) = next else { break };
        best_offset = Some(next.span().start);
        current = Some(next.get_ref());
        table = match next.get_ref() {
            DeValue::Table(inner) => Some(inner),
            _ => None,
        };
    }
    best_offset.map(|offset| line_of(text, offset))
}
