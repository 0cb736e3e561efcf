//! The server's own settings: what the listener, connections and operations need. Built from
//! lmdir-config's `Config` by the caller (or directly by tests), so this crate's core does not
//! depend on the config file format.

use std::path::PathBuf;
use std::time::Duration;

/// One listening endpoint parsed from a URL.
pub use lmdir_config::ListenAddress;

/// Everything the server needs to run, with the limits named as in the config file.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub listen: Vec<ListenAddress>,
    /// The load balancers whose PROXY headers pldap/pldaps listeners believe; a connection to
    /// such a listener from elsewhere is closed.
    pub proxy_protocol_sources: Vec<ipnet::IpNet>,
    pub tls_certificate: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Refuse binds and writes before TLS (ldapi counts as secure).
    pub require_tls: bool,
    pub require_tls_for_reads: bool,
    /// Answer an anonymous simple bind with inappropriateAuthentication (slapd's `disallow
    /// bind_anon`).
    pub disallow_anonymous_bind: bool,
    /// Refuse every operation but bind and StartTLS before a bind (slapd's `require authc`).
    pub require_authentication: bool,
    /// Permission bits of the ldapi socket (slapd: 0777; who may do what is decided by the
    /// peer's uid/gid identity and the access rules, not by the socket file).
    pub ldapi_mode: u32,
    /// Where Prometheus scrapes `/metrics`; None = no endpoint.
    pub metrics_listen: Option<std::net::SocketAddr>,
    pub connections_max: usize,
    /// Per IP address (IPv6: per /64) other than loopback.
    pub connections_per_address_max: usize,
    /// Per loopback address (127.0.0.0/8, ::1) and per ldapi uid: this host's own services.
    pub connections_per_loopback_address_max: usize,
    /// Largest request once bound.
    pub pdu_bytes_max: usize,
    /// Largest request before a successful bind (the smaller of the two applies).
    pub anonymous_pdu_bytes_max: usize,
    pub filter_depth_max: usize,
    pub operations_per_connection_max: usize,
    /// Operations of one connection running at once; the rest wait, holding no thread.
    pub running_operations_per_connection_max: usize,
    pub idle_timeout: Duration,
    /// A connection whose client takes no bytes for this long is closed.
    pub write_timeout: Duration,
    /// ldaps and StartTLS handshakes.
    pub tls_handshake_timeout: Duration,
    /// 0 = unlimited; the rootdn is always unlimited.
    pub size_limit: u64,
    pub time_limit: Duration,
    /// 0 = unlimited.
    pub lookthrough_limit: u64,
    /// Failed binds per address and bind DN answered without delay.
    pub bind_failure_burst: u32,
    /// Then one failure per address and DN per interval; zero = no throttling.
    pub bind_failure_interval: Duration,
    /// Failed binds per address, all DNs together, answered without delay.
    pub bind_failure_address_burst: u32,
    /// Then one failure per address per interval; zero = no address budget.
    pub bind_failure_address_interval: Duration,
    /// `userPassword` values one simple bind verifies at most.
    pub bind_password_values_max: usize,
    /// Leaves plus substring pieces of a search or assertion filter.
    pub filter_items_max: usize,
    /// Names in a search's or pre/post-read control's attribute list.
    pub requested_attributes_max: usize,
    /// Keys of one server-side sort request.
    pub sort_keys_max: usize,
    /// Bytes of sort key values one sorted search may hold.
    pub sort_bytes_max: usize,
    /// Bytes of sort key values all sorted searches running at once may hold.
    pub sort_bytes_total_max: usize,
    /// Memory the updates queued in open LDAP transactions may hold, all connections together.
    pub transaction_bytes_max: usize,
    /// Memory the slow password verifications running at once may need (`verify_gate`).
    pub password_verify_memory_bytes_max: u64,
    pub password_hash: String,
    pub password_hash_cleartext: bool,
    /// Most writer time per update (see `lmdir-config`).
    pub write_budget: Duration,
    pub attribute_descriptions_per_entry_max: usize,
    pub attribute_options_per_description_max: usize,
    pub values_per_attribute_per_request_max: usize,
    pub suffix: String,
    pub rootdn: String,
    /// Cleartext or `{SCHEME}`-hashed.
    pub rootpw: String,
    /// `[[limits]]` rules in config order (compiled against the schema when the server starts
    /// and by a reload: `rules::Rules`).
    pub limits: Vec<lmdir_config::LimitsRule>,
    /// `[integrity]`: refint and unique rules (compiled into `rules::Rules` when the server
    /// starts and by a reload; the writer applies them).
    pub integrity: lmdir_config::IntegrityConfig,
    /// `[[dynlist]]` rules (compiled into `rules::Rules` when the server starts and by a
    /// reload).
    pub dynlist: Vec<lmdir_config::DynlistRule>,
    /// The pwdPolicy entry for entries without `pwdPolicySubentry`; empty = none.
    pub password_policy_default: String,
    /// `[replication]`: the consumers this server runs (RFC 4533).
    pub replication: lmdir_config::ReplicationConfig,
    /// A read-only replica's provider URL: client writes are referred there (result 10).
    pub update_referral: Option<String>,
    /// Proxied authorization policy (slapd's `authz-policy`; see `proxy_authz`).
    pub authz_policy: lmdir_config::AuthzPolicy,
    /// `[http]`: the SCIM and web console listener (`http/`); `listen` empty = off.
    pub http: lmdir_config::HttpConfig,
    /// `[accesslog]`: the audit trail of writes.
    pub accesslog: lmdir_config::AccesslogConfig,
}

impl ServerSettings {
    /// Settings with the embedded default config's values, listening on `listen`.
    pub fn with_defaults(listen: Vec<ListenAddress>) -> ServerSettings {
        let mut settings = ServerSettings::from_config(&lmdir_config::Config::embedded_default())
            .expect("the embedded default config maps to settings");
        settings.listen = listen;
        settings
    }

    /// The settings a config file describes (listen URLs validated here).
    pub fn from_config(config: &lmdir_config::Config) -> Result<ServerSettings, String> {
        let server = &config.server;
        let database = &config.database;
        let listen = server
            .listen
            .iter()
            .map(|url| ListenAddress::parse(url))
            .collect::<Result<Vec<_>, _>>()?;
        let path_or_none =
            |path: &std::path::Path| (!path.as_os_str().is_empty()).then(|| path.to_path_buf());
        let proxy_protocol_sources = server
            .proxy_protocol_sources
            .iter()
            .map(|source| lmdir_config::parse_network(source))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ServerSettings {
            listen,
            proxy_protocol_sources,
            tls_certificate: path_or_none(&server.tls_certificate),
            tls_key: path_or_none(&server.tls_key),
            require_tls: server.require_tls,
            require_tls_for_reads: server.require_tls_for_reads,
            disallow_anonymous_bind: server.disallow_anonymous_bind,
            require_authentication: server.require_authentication,
            ldapi_mode: lmdir_config::parse_ldapi_mode(&server.ldapi_mode)?,
            metrics_listen: lmdir_config::parse_metrics_listen(&server.metrics_listen)?,
            connections_max: server.connections_max as usize,
            connections_per_address_max: server.connections_per_address_max as usize,
            connections_per_loopback_address_max: server.connections_per_loopback_address_max
                as usize,
            pdu_bytes_max: server.pdu_bytes_max as usize,
            anonymous_pdu_bytes_max: server.anonymous_pdu_bytes_max as usize,
            filter_depth_max: server.filter_depth_max as usize,
            operations_per_connection_max: server.operations_per_connection_max as usize,
            running_operations_per_connection_max: server.running_operations_per_connection_max
                as usize,
            idle_timeout: Duration::from_secs(server.idle_timeout_seconds),
            write_timeout: Duration::from_secs(server.write_timeout_seconds),
            tls_handshake_timeout: Duration::from_secs(server.tls_handshake_timeout_seconds),
            size_limit: server.size_limit,
            time_limit: Duration::from_secs(server.time_limit_seconds),
            lookthrough_limit: server.lookthrough_limit,
            bind_failure_burst: server.bind_failure_burst,
            bind_failure_interval: Duration::from_millis(server.bind_failure_interval_milliseconds),
            bind_failure_address_burst: server.bind_failure_address_burst,
            bind_failure_address_interval: Duration::from_millis(
                server.bind_failure_address_interval_milliseconds,
            ),
            bind_password_values_max: server.bind_password_values_max as usize,
            filter_items_max: server.filter_items_max as usize,
            requested_attributes_max: server.requested_attributes_max as usize,
            sort_keys_max: server.sort_keys_max as usize,
            sort_bytes_max: usize::try_from(server.sort_bytes_max).unwrap_or(usize::MAX),
            sort_bytes_total_max: usize::try_from(server.sort_bytes_total_max)
                .unwrap_or(usize::MAX),
            transaction_bytes_max: usize::try_from(server.transaction_bytes_max)
                .unwrap_or(usize::MAX),
            password_verify_memory_bytes_max: server.password_verify_memory_bytes_max,
            password_hash: server.password_hash.clone(),
            password_hash_cleartext: server.password_hash_cleartext,
            write_budget: Duration::from_millis(server.write_budget_milliseconds),
            attribute_descriptions_per_entry_max: server.attribute_descriptions_per_entry_max
                as usize,
            attribute_options_per_description_max: server.attribute_options_per_description_max
                as usize,
            values_per_attribute_per_request_max: server.values_per_attribute_per_request_max
                as usize,
            suffix: database.suffix.clone(),
            rootdn: database.rootdn.clone(),
            rootpw: database.rootpw.clone(),
            limits: config.limits.clone(),
            integrity: config.integrity.clone(),
            dynlist: config.dynlist.clone(),
            password_policy_default: database.password_policy_default.clone(),
            replication: config.replication.clone(),
            update_referral: config
                .replication
                .is_read_only_replica()
                .then(|| config.replication.consumer[0].provider.clone()),
            authz_policy: server.authz_policy,
            http: config.http.clone(),
            accesslog: config.accesslog.clone(),
        })
    }
}
