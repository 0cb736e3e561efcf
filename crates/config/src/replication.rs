//! `[replication]` and `[[replication.consumer]]`: RFC 4533 content synchronization with
//! OpenLDAP's names (serverID, syncprov, syncrepl). Parsed and validated here; the server runs
//! the consumers and (another part) the provider.

use serde::Deserialize;

use crate::{check_dn, problem, KeyStep, Problem};

/// Highest server ID (OpenLDAP's serverID is 12 bits in a CSN).
pub const SERVER_ID_MAX: u16 = 4095;
/// Highest consumer rid (OpenLDAP prints it with three digits in the cookie).
pub const RID_MAX: u16 = 999;
/// Most changes the provider's session log may be configured to keep: each is ~80 bytes in
/// LMDB, so this bounds it under a GiB (the store refuses more: `lmdir_store::SESSION_LOG_ENTRIES_MAX`).
pub const SESSION_LOG_ENTRIES_MAX: u64 = 10_000_000;
/// Longest refreshOnly poll interval and reconnect delay: a year (a typo of a few zeros more is
/// an error, not a consumer that silently never polls).
pub const INTERVAL_SECONDS_MAX: u64 = 366 * 86_400;
/// Most consumers one server runs (each is a connection and a task).
pub const CONSUMERS_MAX: usize = 64;
/// Highest `persist_searches_max`: each persistent search holds a task, a connection turn and
/// a place in the change broadcast, so tens of thousands is already far past any deployment.
pub const PERSIST_SEARCHES_MAX_MAX: u32 = 65_536;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplicationConfig {
    /// 1..=4095, unique per server (OpenLDAP's serverID); 0 = none.
    pub server_id: u16,
    /// Answer sync searches (OpenLDAP's syncprov overlay).
    pub provider: bool,
    /// Changes kept for the delete phase (syncprov-sessionlog).
    pub session_log_entries: u64,
    /// Most refreshAndPersist searches running at once on this provider (busy beyond).
    pub persist_searches_max: u32,
    /// Most of them one identity runs (anonymous is one identity; adminLimitExceeded beyond).
    /// The rootdn and `replica_dns` are not held to it.
    pub persist_searches_per_identity_max: u32,
    /// Of `persist_searches_max`, the slots only the rootdn and `replica_dns` may take, so
    /// other clients filling the rest never lock replication out.
    pub persist_searches_reserved: u32,
    /// Bind DNs of the replicas pulling from this provider (besides every consumer's
    /// `bind_dn`, the identity a multi-provider peer binds as): they may use the reserve.
    pub replica_dns: Vec<String>,
    /// The most replication lag (seconds, `lmdir_replication_lag_seconds`) a consumer may
    /// show while the server answers `/readyz` with 200 (1..=INTERVAL_SECONDS_MAX).
    pub ready_lag_seconds_max: u64,
    /// One per provider pulled from (OpenLDAP's syncrepl directive).
    pub consumer: Vec<ConsumerConfig>,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            server_id: 0,
            provider: false,
            session_log_entries: 100_000,
            persist_searches_max: 64,
            persist_searches_per_identity_max: 16,
            persist_searches_reserved: 8,
            replica_dns: Vec::new(),
            ready_lag_seconds_max: 60,
            consumer: Vec::new(),
        }
    }
}

/// The three shapes a replicating server takes (besides none at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicationShape {
    /// No consumers, not a provider.
    Standalone,
    /// `server_id` + `provider = true`, no consumers: the one writable master others pull from.
    Provider,
    /// Consumers without `server_id` + `provider = true`: client writes get a referral to the
    /// first consumer's provider (slapd's `updateref`).
    ReadOnlyReplica,
    /// `server_id` + `provider = true` + consumers to every other node: every node takes client
    /// writes, stamped with its own server ID, and pulls the others' (slapd's `multiprovider on`).
    MultiProvider,
}

impl ReplicationConfig {
    pub fn shape(&self) -> ReplicationShape {
        let writable_provider = self.server_id != 0 && self.provider;
        match (self.consumer.is_empty(), writable_provider) {
            (true, false) => ReplicationShape::Standalone,
            (true, true) => ReplicationShape::Provider,
            (false, false) => ReplicationShape::ReadOnlyReplica,
            (false, true) => ReplicationShape::MultiProvider,
        }
    }

    /// The per-identity share that applies: `persist_searches_per_identity_max`, at most
    /// `persist_searches_max` (a small server keeps its old meaning without more keys).
    pub fn persist_share_per_identity(&self) -> u32 {
        self.persist_searches_per_identity_max
            .min(self.persist_searches_max)
    }

    /// The reserve that applies: `persist_searches_reserved`, at most half of
    /// `persist_searches_max`, so others always keep the other half.
    pub fn persist_reserve(&self) -> u32 {
        self.persist_searches_reserved
            .min(self.persist_searches_max / 2)
    }

    /// The bind DNs whose persistent searches may take the reserved slots (with the rootdn):
    /// `replica_dns` and every consumer's `bind_dn` (in a multi-provider ring each node binds
    /// to the others as the identity its peers bind to it with).
    pub fn replica_identities(&self) -> impl Iterator<Item = &str> {
        self.replica_dns.iter().map(String::as_str).chain(
            self.consumer
                .iter()
                .map(|consumer| consumer.bind_dn.as_str())
                .filter(|dn| !dn.is_empty()),
        )
    }

    /// A server with consumers that is not itself a provider: client writes are referred to
    /// the (first) consumer's provider.
    pub fn is_read_only_replica(&self) -> bool {
        self.shape() == ReplicationShape::ReadOnlyReplica
    }

    /// A server that takes client writes and also pulls other providers' changes: conflicts
    /// between them are resolved by CSN.
    pub fn is_multi_provider(&self) -> bool {
        self.shape() == ReplicationShape::MultiProvider
    }
}

/// The two RFC 4533 modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SyncType {
    #[serde(rename = "refreshOnly")]
    RefreshOnly,
    #[serde(rename = "refreshAndPersist")]
    RefreshAndPersist,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerConfig {
    /// 1..=999, unique among this server's consumers.
    pub rid: u16,
    /// `ldap://host[:port]` (with `starttls = true` for TLS) or `ldaps://host[:port]`.
    pub provider: String,
    /// The replicated subtree: the suffix or an entry below it.
    pub search_base: String,
    #[serde(rename = "type", default = "default_sync_type")]
    pub sync_type: SyncType,
    /// refreshOnly: seconds between the end of one poll and the next.
    #[serde(default = "default_interval_seconds")]
    pub interval_seconds: u64,
    /// Seconds before reconnecting after any error.
    #[serde(default = "default_retry_seconds")]
    pub retry_seconds: u64,
    /// Simple bind DN; empty = anonymous.
    #[serde(default)]
    pub bind_dn: String,
    #[serde(default)]
    pub credentials: String,
    /// StartTLS on an ldap:// provider before binding.
    #[serde(default)]
    pub starttls: bool,
    /// PEM file of the CA that signed the provider's certificate; empty = system roots.
    #[serde(default)]
    pub tls_ca_certificate: String,
    /// A consumer whose store is empty takes its first refresh through the bulk loader (every
    /// core, sorted appends) instead of the writer's batches; false: always the writer.
    #[serde(default = "default_bulk_initial_refresh")]
    pub bulk_initial_refresh: bool,
    /// Largest message the provider may send: one entry with all its values (a group of
    /// 1,000,000 members is ~45 MB on the wire). Larger ends the session with an error naming
    /// the size. Not the server's `pdu_bytes_max`, which bounds what clients send.
    #[serde(default = "default_consumer_pdu_bytes_max")]
    pub pdu_bytes_max: u64,
}

/// The default largest message from a provider: 256 MiB, a group of ~5 million members.
pub const CONSUMER_PDU_BYTES_MAX_DEFAULT: u64 = 256 << 20;
/// The bounds of a consumer's `pdu_bytes_max` (the server's own lower bound, up to 2 GiB).
pub const CONSUMER_PDU_BYTES_MAX_RANGE: std::ops::RangeInclusive<u64> = 1024..=(2 << 30);

fn default_bulk_initial_refresh() -> bool {
    true
}

fn default_consumer_pdu_bytes_max() -> u64 {
    CONSUMER_PDU_BYTES_MAX_DEFAULT
}

fn default_sync_type() -> SyncType {
    SyncType::RefreshAndPersist
}
fn default_interval_seconds() -> u64 {
    60
}
fn default_retry_seconds() -> u64 {
    5
}

/// The scheme of a provider URL, after checking its shape (`ldap://` or `ldaps://`, a host,
/// an optional port, nothing else).
pub fn provider_scheme(url: &str) -> Result<&'static str, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{url:?} is not a URL (expected ldap:// or ldaps://)"))?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "ldap" => "ldap",
        "ldaps" => "ldaps",
        _ => return Err(format!("{url:?}: the provider must be ldap:// or ldaps://")),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains('/') || authority.contains('?') {
        return Err(format!("{url:?}: expected {scheme}://host[:port]"));
    }
    if let Some((_, port)) = authority
        .rsplit_once(':')
        .filter(|_| !authority.ends_with(']'))
    {
        port.parse::<u16>()
            .map_err(|_| format!("{url:?}: {port:?} is not a port"))?;
    }
    Ok(scheme)
}

impl ReplicationConfig {
    /// `listen` is the server's own listener URLs: a consumer pulling from one of them would
    /// replicate from this server itself.
    pub(crate) fn validate(&self, suffix: &str, listen: &[String]) -> Result<(), Problem> {
        use KeyStep::Key;
        let path = |key: &'static str| vec![Key("replication"), Key(key)];
        if self.server_id > SERVER_ID_MAX {
            return Err(problem(
                path("server_id"),
                format!("{} is above {SERVER_ID_MAX}", self.server_id),
            ));
        }
        if self.provider && self.server_id == 0 {
            return Err(problem(
                path("server_id"),
                "a provider needs a server_id (1..4095) for its CSNs",
            ));
        }
        if self.session_log_entries > SESSION_LOG_ENTRIES_MAX {
            return Err(problem(
                path("session_log_entries"),
                format!("must be 0..={SESSION_LOG_ENTRIES_MAX} (0 = no session log)"),
            ));
        }
        if !(1..=PERSIST_SEARCHES_MAX_MAX).contains(&self.persist_searches_max) {
            return Err(problem(
                path("persist_searches_max"),
                format!("must be 1..={PERSIST_SEARCHES_MAX_MAX}"),
            ));
        }
        if !(1..=PERSIST_SEARCHES_MAX_MAX).contains(&self.persist_searches_per_identity_max) {
            return Err(problem(
                path("persist_searches_per_identity_max"),
                format!("must be 1..={PERSIST_SEARCHES_MAX_MAX}"),
            ));
        }
        if self.persist_searches_reserved > PERSIST_SEARCHES_MAX_MAX {
            return Err(problem(
                path("persist_searches_reserved"),
                format!("must be 0..={PERSIST_SEARCHES_MAX_MAX} (0 = no reserve)"),
            ));
        }
        if !(1..=INTERVAL_SECONDS_MAX).contains(&self.ready_lag_seconds_max) {
            return Err(problem(
                path("ready_lag_seconds_max"),
                format!("must be 1..={INTERVAL_SECONDS_MAX}"),
            ));
        }
        if self.replica_dns.len() > CONSUMERS_MAX {
            return Err(problem(
                path("replica_dns"),
                format!("at most {CONSUMERS_MAX} DNs"),
            ));
        }
        for dn in &self.replica_dns {
            check_dn(dn).map_err(|message| problem(path("replica_dns"), message))?;
        }
        if self.consumer.len() > CONSUMERS_MAX {
            return Err(problem(
                path("consumer"),
                format!("at most {CONSUMERS_MAX} consumers"),
            ));
        }
        for (index, consumer) in self.consumer.iter().enumerate() {
            consumer.validate(index, suffix)?;
            if let Some(own) = listen
                .iter()
                .find(|own| same_listener(&consumer.provider, own))
            {
                return Err(problem(
                    consumer_path(index, "provider"),
                    format!(
                        "{:?} is this server's own listener {own:?}: a consumer of itself \
                         (list only the OTHER nodes of a multi-provider set)",
                        consumer.provider
                    ),
                ));
            }
            if self.consumer[..index].iter().any(|c| c.rid == consumer.rid) {
                return Err(problem(
                    consumer_path(index, "rid"),
                    format!("rid {} is used by another consumer", consumer.rid),
                ));
            }
        }
        Ok(())
    }
}

/// Scheme, lowercased host and port (the scheme's default when absent) of an ldap(s) URL.
fn endpoint(url: &str) -> Option<(String, String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "ldap" => 389,
        "ldaps" => 636,
        _ => return None,
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !authority.ends_with(']') => (host, port.parse().ok()?),
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((scheme, host.to_ascii_lowercase(), port))
}

/// Whether a provider URL certainly names this server's listener `own`: the same scheme and
/// port, and the same host, or a loopback host while `own` listens on every address. Other
/// spellings of this machine (its DNS name, another of its addresses) cannot be told from the
/// config; the consumer then notices at run time that the provider answers with this
/// server's own server ID, and refuses it.
fn same_listener(provider: &str, own: &str) -> bool {
    let (Some(provider), Some(own)) = (endpoint(provider), endpoint(own)) else {
        return false;
    };
    let loopback = ["localhost", "127.0.0.1", "::1"].contains(&provider.1.as_str());
    let wildcard = ["0.0.0.0", "::", ""].contains(&own.1.as_str());
    provider.0 == own.0 && provider.2 == own.2 && (provider.1 == own.1 || (loopback && wildcard))
}

fn consumer_path(index: usize, key: &'static str) -> Vec<KeyStep> {
    vec![
        KeyStep::Key("replication"),
        KeyStep::Key("consumer"),
        KeyStep::Index(index),
        KeyStep::Key(key),
    ]
}

/// Whether `dn` is `suffix` or below it (a textual check, case- and space-insensitive; the
/// server compares normalized DNs when it starts).
fn within_suffix(dn: &str, suffix: &str) -> bool {
    let squash = |text: &str| -> String {
        text.split(',')
            .map(|rdn| rdn.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(",")
    };
    let (dn, suffix) = (squash(dn), squash(suffix));
    dn == suffix || dn.ends_with(&format!(",{suffix}"))
}

impl ConsumerConfig {
    fn validate(&self, index: usize, suffix: &str) -> Result<(), Problem> {
        let path = |key| consumer_path(index, key);
        if !(1..=RID_MAX).contains(&self.rid) {
            return Err(problem(path("rid"), format!("must be 1..={RID_MAX}")));
        }
        let scheme = provider_scheme(&self.provider).map_err(|m| problem(path("provider"), m))?;
        check_dn(&self.search_base).map_err(|m| problem(path("search_base"), m))?;
        if !within_suffix(&self.search_base, suffix) {
            return Err(problem(
                path("search_base"),
                format!("{:?} is not within the suffix {suffix:?}", self.search_base),
            ));
        }
        for (key, seconds) in [
            ("interval_seconds", self.interval_seconds),
            ("retry_seconds", self.retry_seconds),
        ] {
            if !(1..=INTERVAL_SECONDS_MAX).contains(&seconds) {
                return Err(problem(
                    path(key),
                    format!("must be 1..={INTERVAL_SECONDS_MAX}"),
                ));
            }
        }
        if !CONSUMER_PDU_BYTES_MAX_RANGE.contains(&self.pdu_bytes_max) {
            return Err(problem(
                path("pdu_bytes_max"),
                format!(
                    "must be {}..={} bytes",
                    CONSUMER_PDU_BYTES_MAX_RANGE.start(),
                    CONSUMER_PDU_BYTES_MAX_RANGE.end()
                ),
            ));
        }
        if !self.bind_dn.is_empty() {
            check_dn(&self.bind_dn).map_err(|m| problem(path("bind_dn"), m))?;
        } else if !self.credentials.is_empty() {
            return Err(problem(
                path("credentials"),
                "credentials without a bind_dn (an anonymous bind sends none)",
            ));
        }
        if self.starttls && scheme == "ldaps" {
            return Err(problem(
                path("starttls"),
                "an ldaps:// provider is already TLS: StartTLS is for ldap://",
            ));
        }
        if !self.tls_ca_certificate.is_empty() && !self.starttls && scheme == "ldap" {
            return Err(problem(
                path("tls_ca_certificate"),
                "a CA certificate without TLS: use ldaps:// or starttls = true",
            ));
        }
        Ok(())
    }
}
