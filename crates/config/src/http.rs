//! `[http]` and `[http.scim]`: the HTTPS listener serving SCIM 2.0 (RFC 7643/7644) and the web
//! console. Parsed and validated here; the server (`lmdir_server::http`) runs it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Deserialize;

use crate::{problem, KeyStep, Problem};

/// Largest `body_bytes_max` (a request body is held whole while it is translated).
pub const HTTP_BODY_BYTES_MAX_MAX: u64 = 64 << 20;
/// Most operations one `/Bulk` request may be configured to carry.
pub const SCIM_BULK_OPERATIONS_MAX_MAX: u32 = 1000;

/// The SCIM attributes a mapping may name (User: `user_attributes`, Group: `group_attributes`).
pub const SCIM_USER_PATHS: &[&str] = &[
    "userName",
    "name.givenName",
    "name.familyName",
    "name.formatted",
    "displayName",
    "title",
    "emails",
    "phoneNumbers",
    "externalId",
    "groups",
];
pub const SCIM_GROUP_PATHS: &[&str] = &["displayName", "members", "externalId"];

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// `ip:port` of the SCIM + console listener; empty = off.
    pub listen: String,
    /// HTTPS with `[server] tls_certificate`/`tls_key`; false (plain http) only on a loopback
    /// address.
    pub tls: bool,
    /// Connections open at once (a new one past it is closed at once; none open is closed to
    /// make room). A connection whose answer the client leaves unread for `[server]
    /// write_timeout_seconds` is closed.
    pub connections_max: u32,
    /// Connections one client address (IPv6: a /64) holds at once; a loopback address or a
    /// `trusted_proxies` one (a TLS-terminating proxy carries many clients) only
    /// `connections_max`; behind a trusted proxy each forwarded client has as many requests
    /// in flight (429 past it).
    pub connections_per_address_max: u32,
    /// Largest request body (413 beyond).
    pub body_bytes_max: u64,
    /// Signed-in console sessions kept at once (the oldest is dropped past it).
    pub sessions_max: u32,
    /// A console session ends after this long without a request.
    pub session_idle_seconds: u64,
    /// Reverse proxies (addresses or networks) in front of the listener: a request from one
    /// is the client its `X-Forwarded-For` names (the rightmost address not itself a trusted
    /// proxy) and HTTPS when its `X-Forwarded-Proto` says `https`. Empty: the headers are
    /// ignored, every request is its TCP peer.
    pub trusted_proxies: Vec<String>,
    pub scim: ScimConfig,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: String::new(),
            tls: true,
            connections_max: 256,
            connections_per_address_max: 32,
            body_bytes_max: 1 << 20,
            sessions_max: 1024,
            session_idle_seconds: 900,
            trusted_proxies: Vec::new(),
            scim: ScimConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScimConfig {
    /// Where Users live and are created; empty = `ou=People,<suffix>`.
    pub users_base: String,
    /// Where Groups live and are created; empty = `ou=Groups,<suffix>`.
    pub groups_base: String,
    /// Object classes of a User created over SCIM (the first structural one decides what a
    /// User is when listing: entries of any of them are Users).
    pub user_object_classes: Vec<String>,
    pub group_object_classes: Vec<String>,
    /// SCIM attribute → directory attribute (keys: `SCIM_USER_PATHS`).
    pub user_attributes: BTreeMap<String, String>,
    /// SCIM attribute → directory attribute (keys: `SCIM_GROUP_PATHS`).
    pub group_attributes: BTreeMap<String, String>,
    /// Operations in one `/Bulk` request (413 beyond).
    pub bulk_operations_max: u32,
    /// Resources on one page of a list (`count` is lowered to it).
    pub page_resources_max: u32,
}

impl Default for ScimConfig {
    fn default() -> Self {
        let pairs = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(scim, ldap)| (scim.to_string(), ldap.to_string()))
                .collect()
        };
        ScimConfig {
            users_base: String::new(),
            groups_base: String::new(),
            user_object_classes: ["top", "person", "organizationalPerson", "inetOrgPerson"]
                .map(str::to_string)
                .to_vec(),
            group_object_classes: ["top", "groupOfNames"].map(str::to_string).to_vec(),
            user_attributes: pairs(&[
                ("userName", "uid"),
                ("name.givenName", "givenName"),
                ("name.familyName", "sn"),
                ("name.formatted", "cn"),
                ("displayName", "displayName"),
                ("title", "title"),
                ("emails", "mail"),
                ("phoneNumbers", "telephoneNumber"),
                ("externalId", "employeeNumber"),
                ("groups", "memberOf"),
            ]),
            group_attributes: pairs(&[
                ("displayName", "cn"),
                ("members", "member"),
                ("externalId", "businessCategory"),
            ]),
            bulk_operations_max: 100,
            page_resources_max: 200,
        }
    }
}

/// `listen` as a socket address (None: off).
pub fn parse_http_listen(text: &str) -> Result<Option<SocketAddr>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    text.trim()
        .parse()
        .map(Some)
        .map_err(|_| format!("'{text}': expected ip:port, e.g. \"127.0.0.1:8443\""))
}

impl HttpConfig {
    pub(crate) fn validate(&self, tls_configured: bool) -> Result<(), Problem> {
        use KeyStep::Key;
        let at = |key: &'static str| vec![Key("http"), Key(key)];
        let address =
            parse_http_listen(&self.listen).map_err(|message| problem(at("listen"), message))?;
        for (index, proxy) in self.trusted_proxies.iter().enumerate() {
            crate::parse_network(proxy).map_err(|message| {
                problem(
                    vec![Key("http"), Key("trusted_proxies"), KeyStep::Index(index)],
                    message,
                )
            })?;
        }
        if let Some(address) = address {
            if self.tls && !tls_configured {
                return Err(problem(
                    at("tls"),
                    "HTTPS needs [server] tls_certificate and tls_key (or tls = false on a loopback address)",
                ));
            }
            if !self.tls && !address.ip().is_loopback() {
                return Err(problem(
                    at("tls"),
                    "plain http (tls = false) is allowed only on a loopback address: passwords and tokens cross it",
                ));
            }
        }
        let ranges: [(&'static str, u64, u64, u64); 5] = [
            ("connections_max", self.connections_max.into(), 1, 65_536),
            (
                "connections_per_address_max",
                self.connections_per_address_max.into(),
                1,
                65_536,
            ),
            (
                "body_bytes_max",
                self.body_bytes_max,
                1024,
                HTTP_BODY_BYTES_MAX_MAX,
            ),
            ("sessions_max", self.sessions_max.into(), 1, 1_000_000),
            (
                "session_idle_seconds",
                self.session_idle_seconds,
                60,
                7 * 86_400,
            ),
        ];
        for (key, value, low, high) in ranges {
            if !(low..=high).contains(&value) {
                return Err(problem(
                    at(key),
                    format!("{value} is outside {low}..={high}"),
                ));
            }
        }
        self.scim.validate()
    }
}

impl ScimConfig {
    fn validate(&self) -> Result<(), Problem> {
        use KeyStep::{Key, Name};
        let at = |key: &'static str| vec![Key("http"), Key("scim"), Key(key)];
        for (table, known, map) in [
            ("user_attributes", SCIM_USER_PATHS, &self.user_attributes),
            ("group_attributes", SCIM_GROUP_PATHS, &self.group_attributes),
        ] {
            for (scim, ldap) in map {
                let path = || vec![Key("http"), Key("scim"), Key(table), Name(scim.clone())];
                if !known.contains(&scim.as_str()) {
                    return Err(problem(
                        path(),
                        format!(
                            "unknown SCIM attribute '{scim}' (known: {})",
                            known.join(", ")
                        ),
                    ));
                }
                if ldap.trim().is_empty() {
                    return Err(problem(path(), "needs a directory attribute name"));
                }
            }
        }
        for (key, required) in [
            ("user_attributes", "userName"),
            ("group_attributes", "displayName"),
        ] {
            let map = if key == "user_attributes" {
                &self.user_attributes
            } else {
                &self.group_attributes
            };
            if !map.contains_key(required) {
                return Err(problem(
                    at(key),
                    format!("{required} must be mapped (it names the entry)"),
                ));
            }
        }
        if self.user_object_classes.is_empty() || self.group_object_classes.is_empty() {
            return Err(problem(
                at("user_object_classes"),
                "object class lists may not be empty",
            ));
        }
        if !(1..=SCIM_BULK_OPERATIONS_MAX_MAX).contains(&self.bulk_operations_max) {
            return Err(problem(
                at("bulk_operations_max"),
                format!("outside 1..={SCIM_BULK_OPERATIONS_MAX_MAX}"),
            ));
        }
        if !(1..=10_000).contains(&self.page_resources_max) {
            return Err(problem(at("page_resources_max"), "outside 1..=10000"));
        }
        Ok(())
    }
}
