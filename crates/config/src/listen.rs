//! `[server] listen` URLs, parsed once: the config check and the server's listeners both take
//! the `ListenAddress` made here.

use std::path::PathBuf;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddress {
    /// `ldap://host[:port]`: `host:port`, port 389 when none is given.
    Ldap(String),
    /// `ldaps://host[:port]`: `host:port`, port 636 when none is given.
    Ldaps(String),
    /// `ldapi:///path` or `ldapi://%2Fpath`: the socket's absolute path.
    Ldapi(PathBuf),
    /// `pldap://host[:port]` (OpenLDAP 2.5's scheme): LDAP behind a load balancer that opens
    /// every connection with a PROXY protocol header (v1 or v2) naming the client; port 389.
    Pldap(String),
    /// `pldaps://host[:port]`: the same with TLS after the header; port 636.
    Pldaps(String),
}

impl ListenAddress {
    /// `ldap://host[:port][/]`, `ldaps://host[:port][/]`, `ldapi:///path` or `ldapi://%2Fpath`,
    /// `pldap://` and `pldaps://` as ldap and ldaps; a bracketed IPv6 host; ports 1..=65535.
    pub fn parse(url: &str) -> Result<ListenAddress, String> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(format!(
                "{url:?} is not a URL (expected ldap://, ldaps://, ldapi://, pldap:// or pldaps://)"
            ));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "ldap" => Ok(ListenAddress::Ldap(host_port(url, scheme, rest, 389)?)),
            "ldaps" => Ok(ListenAddress::Ldaps(host_port(url, scheme, rest, 636)?)),
            "ldapi" => socket_path(url, rest).map(ListenAddress::Ldapi),
            "pldap" => Ok(ListenAddress::Pldap(host_port(url, scheme, rest, 389)?)),
            "pldaps" => Ok(ListenAddress::Pldaps(host_port(url, scheme, rest, 636)?)),
            other => Err(format!(
                "{url:?}: unknown scheme {other:?} (ldap, ldaps, ldapi, pldap, pldaps)"
            )),
        }
    }

    /// Whether this is a network listener (not a unix socket).
    pub fn is_network(&self) -> bool {
        !matches!(self, ListenAddress::Ldapi(_))
    }

    /// Whether a TLS handshake opens each connection (ldaps, pldaps).
    pub fn is_tls(&self) -> bool {
        matches!(self, ListenAddress::Ldaps(_) | ListenAddress::Pldaps(_))
    }

    /// Whether each connection starts with a PROXY protocol header (pldap, pldaps).
    pub fn is_proxied(&self) -> bool {
        matches!(self, ListenAddress::Pldap(_) | ListenAddress::Pldaps(_))
    }

    /// `host:port` of a network listener; None for ldapi.
    pub fn host_port(&self) -> Option<&str> {
        match self {
            ListenAddress::Ldap(host_port)
            | ListenAddress::Ldaps(host_port)
            | ListenAddress::Pldap(host_port)
            | ListenAddress::Pldaps(host_port) => Some(host_port),
            ListenAddress::Ldapi(_) => None,
        }
    }
}

/// The absolute socket path of an ldapi URL's rest (percent-escapes decoded).
fn socket_path(url: &str, rest: &str) -> Result<PathBuf, String> {
    let path = crate::percent_decoded(rest)
        .ok_or_else(|| format!("{url:?}: bad %-escape in the socket path"))?;
    if !path.starts_with('/') || path.trim_end_matches('/').is_empty() {
        return Err(format!(
            "{url:?}: ldapi needs an absolute socket path (ldapi:///run/lmdir.sock)"
        ));
    }
    Ok(PathBuf::from(path))
}

/// `host:port` of an ldap or ldaps URL's rest, the default port added when none is given.
fn host_port(url: &str, scheme: &str, rest: &str, default_port: u16) -> Result<String, String> {
    let host_port = rest.strip_suffix('/').unwrap_or(rest);
    if host_port.is_empty() || host_port.contains('/') {
        return Err(format!("{url:?}: expected {scheme}://host:port"));
    }
    let (host, port) = if let Some(after_bracket) = host_port.strip_prefix('[') {
        let Some((host, rest)) = after_bracket.split_once(']') else {
            return Err(format!("{url:?}: unclosed '[' in IPv6 address"));
        };
        match rest.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if rest.is_empty() => (host, None),
            None => return Err(format!("{url:?}: unexpected text after ']'")),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{url:?}: missing host"));
    }
    match port {
        None => Ok(format!("{host_port}:{default_port}")),
        // Port 0: any free port, the address bound is logged (tests, trial runs).
        Some(port) => match port.parse::<u16>() {
            Ok(_) => Ok(host_port.to_string()),
            Err(_) => Err(format!(
                "{url:?}: port {port:?} is not a number in 0..=65535"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_urls_parse_with_default_ports() {
        let parsed = |url: &str| ListenAddress::parse(url);
        assert_eq!(
            parsed("ldap://127.0.0.1:3389"),
            Ok(ListenAddress::Ldap("127.0.0.1:3389".to_string()))
        );
        assert_eq!(
            parsed("ldaps://localhost/"),
            Ok(ListenAddress::Ldaps("localhost:636".to_string()))
        );
        assert_eq!(
            parsed("LDAP://[::1]"),
            Ok(ListenAddress::Ldap("[::1]:389".to_string()))
        );
        assert_eq!(
            parsed("ldap://127.0.0.1:0"),
            Ok(ListenAddress::Ldap("127.0.0.1:0".to_string()))
        );
        assert_eq!(
            parsed("ldap://[::1]:1389"),
            Ok(ListenAddress::Ldap("[::1]:1389".to_string()))
        );
        assert_eq!(
            parsed("ldapi:///run/lmdir.sock"),
            Ok(ListenAddress::Ldapi(PathBuf::from("/run/lmdir.sock")))
        );
        assert_eq!(
            parsed("ldapi://%2Frun%2Flmdir.sock"),
            Ok(ListenAddress::Ldapi(PathBuf::from("/run/lmdir.sock")))
        );
        assert_eq!(
            parsed("pldap://10.0.0.5"),
            Ok(ListenAddress::Pldap("10.0.0.5:389".to_string()))
        );
        assert_eq!(
            parsed("PLDAPS://[::1]:1636/"),
            Ok(ListenAddress::Pldaps("[::1]:1636".to_string()))
        );
        let pldaps = parsed("pldaps://h").unwrap();
        assert!(pldaps.is_tls() && pldaps.is_proxied() && pldaps.is_network());
        assert_eq!(pldaps.host_port(), Some("h:636"));
    }

    #[test]
    fn bad_listen_urls_say_why() {
        for (url, why) in [
            ("http://x", "unknown scheme"),
            ("127.0.0.1:389", "is not a URL"),
            ("ldapi://", "absolute socket path"),
            ("ldapi://run/lmdir.sock", "absolute socket path"),
            ("ldapi://%zz", "bad %-escape"),
            ("ldap://", "expected ldap://host:port"),
            ("ldap://host/base", "expected ldap://host:port"),
            ("ldap://[::1", "unclosed '['"),
            ("ldap://[::1]x", "unexpected text after ']'"),
            ("ldap://:389", "missing host"),
            ("ldap://host:x", "not a number in 0..=65535"),
            ("ldap://host:65536", "not a number in 0..=65535"),
            ("pldap://", "expected pldap://host:port"),
            ("pldapi:///x", "unknown scheme"),
        ] {
            let error = ListenAddress::parse(url).expect_err(url);
            assert!(error.contains(why), "{url}: {error}");
        }
    }
}
