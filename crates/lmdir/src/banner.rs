//! The lines `lmdir serve` prints when it started on an empty database: what was loaded, the
//! administrator's credentials, and an `ldapsearch` line that works as printed, whatever the
//! suffix, listeners and `require_tls` are.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use lmdir_config::Config;
use lmdir_server::BoundAddress;

/// `demo_loaded`: the demo directory went in (it exists only under dc=example,dc=com);
/// otherwise the database is still empty and the line reads the root DSE instead.
pub fn print(config: &Config, demo_loaded: bool, addresses: &[BoundAddress]) {
    let database = &config.database;
    if demo_loaded {
        println!(
            "lmdir demo directory loaded ({} people; every person's password is \"password\").",
            crate::commands::DEMO_PEOPLE
        );
    } else {
        println!(
            "lmdir: the database for {} is empty; fill it with `lmdir load FILE.ldif` (or `slapcat | lmdir load -`).",
            database.suffix
        );
    }
    if let Some(line) = data_line(config) {
        println!("  data:     {line}");
    }
    if !database.rootdn.is_empty() {
        println!("  root DN:  {}", database.rootdn);
        if !is_hashed(&database.rootpw) {
            println!("  password: {}", database.rootpw);
        }
    }
    if let Some(line) = try_line(config, demo_loaded, addresses) {
        println!("  try:      {line}");
    }
}

/// The web console's URL and a `curl` for SCIM that works as printed, when `[http]` is on.
pub fn print_http(config: &Config, address: Option<std::net::SocketAddr>) {
    let Some(address) = address else {
        return;
    };
    for line in http_lines(config, address) {
        println!("{line}");
    }
}

pub fn http_lines(config: &Config, address: std::net::SocketAddr) -> Vec<String> {
    let tls = config.http.tls;
    let scheme = if tls { "https" } else { "http" };
    let address = reachable_socket(address);
    let database = &config.database;
    let mut curl = vec!["curl -sS".to_string()];
    if tls {
        curl.push(format!(
            "--cacert {}",
            quote(&config.server.tls_certificate.to_string_lossy())
        ));
    }
    if !database.rootdn.is_empty() && !is_hashed(&database.rootpw) {
        curl.push(format!(
            "-u {}",
            quote(&format!("{}:{}", database.rootdn, database.rootpw))
        ));
    } else if !database.rootdn.is_empty() {
        curl.push(format!("-u {}", quote(&database.rootdn)));
    }
    curl.push(quote(&format!(
        "{scheme}://{address}/scim/v2/Users?count=2"
    )));
    vec![
        format!("  console:  {scheme}://{address}/ (sign in with the root DN, or a person's uid and password)"),
        format!("  scim:     {}", curl.join(" ")),
    ]
}

/// A wildcard bind address as the loopback one a local client can reach.
fn reachable_socket(address: std::net::SocketAddr) -> std::net::SocketAddr {
    let ip = match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    std::net::SocketAddr::new(ip, address.port())
}

/// Where the database is; a relative `directory` (the default `./lmdir-data`) is said to be
/// relative to the directory the server was started in, which is easy to miss.
pub fn data_line(config: &Config) -> Option<String> {
    let absolute = config.database_directory().ok()?;
    let configured = &config.database.directory;
    Some(if configured.is_relative() {
        format!(
            "{} ({} is relative to the directory lmdir was started in)",
            absolute.display(),
            configured.display()
        )
    } else {
        absolute.display().to_string()
    })
}

/// The `ldapsearch` command line, or None when nothing is listening.
pub fn try_line(config: &Config, demo_loaded: bool, addresses: &[BoundAddress]) -> Option<String> {
    let server = &config.server;
    let database = &config.database;
    let endpoint = choose_endpoint(addresses, server.require_tls)?;
    let mut words = Vec::new();
    let tls = !matches!(endpoint, BoundAddress::Ldapi(_))
        && (server.require_tls || matches!(endpoint, BoundAddress::Ldaps(_)));
    if tls {
        // The server's own chain as the trust anchor: right for a self-signed certificate, and
        // for a CA-issued one whose file includes the CA.
        words.push(format!(
            "LDAPTLS_CACERT={}",
            quote(&server.tls_certificate.to_string_lossy())
        ));
    }
    words.push("ldapsearch -x".to_string());
    if tls && matches!(endpoint, BoundAddress::Ldap(_)) {
        words.push("-ZZ".to_string());
    }
    words.push(format!("-H {}", reachable(endpoint).url()));
    if !database.rootdn.is_empty() {
        words.push(format!("-D {}", quote(&database.rootdn)));
        words.push(if is_hashed(&database.rootpw) {
            "-W".to_string()
        } else {
            format!("-w {}", quote(&database.rootpw))
        });
    }
    if demo_loaded {
        words.push(format!("-b {} '(uid=u0000001)'", quote(&database.suffix)));
    } else {
        words.push("-b '' -s base namingContexts".to_string());
    }
    Some(words.join(" "))
}

/// The ldapi socket needs no TLS even under `require_tls`; otherwise plain ldap, or with
/// `require_tls` ldaps first (StartTLS on plain ldap when there is no ldaps listener).
fn choose_endpoint(addresses: &[BoundAddress], require_tls: bool) -> Option<&BoundAddress> {
    let find = |wanted: fn(&BoundAddress) -> bool| addresses.iter().find(|address| wanted(address));
    let ldapi = find(|address| matches!(address, BoundAddress::Ldapi(_)));
    let ldap = find(|address| matches!(address, BoundAddress::Ldap(_)));
    let ldaps = find(|address| matches!(address, BoundAddress::Ldaps(_)));
    if require_tls {
        ldapi.or(ldaps).or(ldap)
    } else {
        ldap.or(ldapi).or(ldaps)
    }
}

/// A wildcard listener (0.0.0.0, ::) is reached through the loopback address of its family.
fn reachable(address: &BoundAddress) -> BoundAddress {
    let loopback = |socket: &SocketAddr| {
        let ip = match socket.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        SocketAddr::new(ip, socket.port())
    };
    match address {
        BoundAddress::Ldap(socket) => BoundAddress::Ldap(loopback(socket)),
        BoundAddress::Ldaps(socket) => BoundAddress::Ldaps(loopback(socket)),
        BoundAddress::Ldapi(path) => BoundAddress::Ldapi(path.clone()),
        // Never offered to a client here: only a load balancer speaks to it.
        BoundAddress::Pldap(socket) => BoundAddress::Pldap(loopback(socket)),
        BoundAddress::Pldaps(socket) => BoundAddress::Pldaps(loopback(socket)),
    }
}

/// A `{SCHEME}hash` rootpw cannot be typed as the password: the line asks for it (-W) instead.
fn is_hashed(rootpw: &str) -> bool {
    rootpw.starts_with('{') && rootpw.contains('}')
}

/// One shell word in single quotes.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::from_str(text, "test.toml").expect("test config")
    }

    #[test]
    fn require_tls_uses_ldapi_when_there_is_one_and_starttls_otherwise() {
        let tls = "[server]\ntls_certificate = \"/etc/lmdir/cert.pem\"\ntls_key = \"/k.pem\"\nrequire_tls = true\n";
        let plain = BoundAddress::Ldap("0.0.0.0:389".parse().unwrap());
        let socket = BoundAddress::Ldapi("/run/lmdir/ldapi".into());
        let line = try_line(&config(tls), true, std::slice::from_ref(&plain)).unwrap();
        assert!(
            line.starts_with(
                "LDAPTLS_CACERT='/etc/lmdir/cert.pem' ldapsearch -x -ZZ -H ldap://127.0.0.1:389 "
            ),
            "{line}"
        );
        let line = try_line(&config(tls), true, &[plain, socket]).unwrap();
        assert!(
            line.starts_with("ldapsearch -x -H ldapi://%2Frun%2Flmdir%2Fldapi "),
            "{line}"
        );
    }

    #[test]
    fn a_hashed_rootpw_is_asked_for_and_quotes_survive() {
        let text = "[database]\nsuffix = \"o=O'Brien\"\nrootdn = \"cn=admin,o=O'Brien\"\nrootpw = \"{SSHA}abc\"\n";
        let address = BoundAddress::Ldap("[::]:3389".parse().unwrap());
        let line = try_line(&config(text), false, &[address]).unwrap();
        assert_eq!(
            line,
            r"ldapsearch -x -H ldap://[::1]:3389 -D 'cn=admin,o=O'\''Brien' -W -b '' -s base namingContexts"
        );
    }
}
