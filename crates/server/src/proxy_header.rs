//! PROXY protocol headers (HAProxy's v1 text line and v2 binary block) on pldap:// and pldaps://
//! listeners: which client a load balancer opened the connection for. A leaf.
//!
//! The header is read before anything else of the connection, exactly its own bytes (the LDAP
//! or TLS bytes after it stay in the socket), bounded in size here and in time by the caller.
//! The parsing itself is the `ppp` crate's.

use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Longest header accepted. A v1 line is at most 107 bytes; a v2 block is 16 bytes plus a
/// length that TLVs (HAProxy's unique ID, ALPN, TLS details) can make long, though a few
/// hundred bytes cover every setup.
pub const HEADER_BYTES_MAX: usize = 4096;

/// The v1 line's longest form (`PROXY TCP6 <max addresses and ports>\r\n`).
const V1_LINE_BYTES_MAX: usize = 107;

/// Both versions are at least this long (`PROXY UNKNOWN\r\n`; v2's fixed part is 16), so
/// reading this much never takes a byte past the header.
const SHORTEST_HEADER_BYTES: usize = 15;

/// v2's 12-byte signature.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// Whether `peer` is one of `sources`, the balancers whose headers are believed. A dual-stack
/// listener (`[::]`) sees an IPv4 balancer as `::ffff:a.b.c.d`: compared as the IPv4 address.
pub fn is_source(sources: &[ipnet::IpNet], peer: std::net::IpAddr) -> bool {
    let peer = match peer {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    sources.iter().any(|source| source.contains(&peer))
}

/// Why a connection's header was refused (the connection is closed unanswered).
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// The connection ended or failed before the header was whole.
    Io(String),
    /// Not a PROXY header, or a malformed one.
    Malformed(String),
    /// Longer than `HEADER_BYTES_MAX`.
    TooLong(usize),
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Io(error) => write!(formatter, "no whole PROXY header: {error}"),
            HeaderError::Malformed(why) => write!(formatter, "bad PROXY header: {why}"),
            HeaderError::TooLong(bytes) => write!(
                formatter,
                "PROXY header of {bytes} bytes (at most {HEADER_BYTES_MAX})"
            ),
        }
    }
}

/// Reads one header from `stream` and returns the client it names: Some(address) for a
/// proxied TCP connection over IPv4 or IPv6, None for the balancer's own connection (v2's
/// LOCAL command, as HAProxy's health checks send it, v1's UNKNOWN, or an unspecified family),
/// which keeps the peer's address.
pub async fn read_client<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> Result<Option<SocketAddr>, HeaderError> {
    let mut header = vec![0u8; SHORTEST_HEADER_BYTES];
    read_exact(stream, &mut header).await?;
    if header.starts_with(&V2_SIGNATURE[..]) {
        let mut length_low = [0u8; 1];
        read_exact(stream, &mut length_low).await?;
        header.push(length_low[0]);
        let total = 16 + usize::from(u16::from_be_bytes([header[14], header[15]]));
        if total > HEADER_BYTES_MAX {
            return Err(HeaderError::TooLong(total));
        }
        header.resize(total, 0);
        read_exact(stream, &mut header[16..]).await?;
        return v2_client(&header);
    }
    if !header.starts_with(b"PROXY ") {
        return Err(HeaderError::Malformed(
            "the connection does not start with one".to_string(),
        ));
    }
    // Byte by byte to the line's end: nothing after it may be taken from the socket.
    while !header.ends_with(b"\r\n") {
        if header.len() >= V1_LINE_BYTES_MAX {
            return Err(HeaderError::TooLong(header.len() + 1));
        }
        let mut byte = [0u8; 1];
        read_exact(stream, &mut byte).await?;
        header.push(byte[0]);
    }
    v1_client(&header)
}

async fn read_exact<S: AsyncRead + Unpin>(
    stream: &mut S,
    buffer: &mut [u8],
) -> Result<(), HeaderError> {
    stream
        .read_exact(buffer)
        .await
        .map(|_| ())
        .map_err(|error| HeaderError::Io(error.to_string()))
}

fn v2_client(header: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    use ppp::v2::{Addresses, Command, Header, Protocol};
    let parsed =
        Header::try_from(header).map_err(|error| HeaderError::Malformed(format!("v2: {error}")))?;
    if parsed.command == Command::Local {
        return Ok(None);
    }
    let client = match parsed.addresses {
        Addresses::IPv4(v4) => SocketAddr::from((v4.source_address, v4.source_port)),
        Addresses::IPv6(v6) => SocketAddr::from((v6.source_address, v6.source_port)),
        Addresses::Unspecified => return Ok(None),
        Addresses::Unix(_) => {
            return Err(HeaderError::Malformed(
                "v2: a unix socket client on a TCP listener".to_string(),
            ))
        }
    };
    if parsed.protocol != Protocol::Stream {
        return Err(HeaderError::Malformed(
            "v2: a datagram client on a TCP listener".to_string(),
        ));
    }
    Ok(Some(client))
}

fn v1_client(header: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    use ppp::v1::{Addresses, Header};
    let parsed =
        Header::try_from(header).map_err(|error| HeaderError::Malformed(format!("v1: {error}")))?;
    // The parser reads up to the first CR: a line with anything between it and the end is
    // not the one header line.
    if parsed.header.len() != header.len() {
        return Err(HeaderError::Malformed(
            "v1: a carriage return inside the line".to_string(),
        ));
    }
    Ok(match parsed.addresses {
        Addresses::Tcp4(v4) => Some(SocketAddr::from((v4.source_address, v4.source_port))),
        Addresses::Tcp6(v6) => Some(SocketAddr::from((v6.source_address, v6.source_port))),
        Addresses::Unknown => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client a header names and the bytes left in the stream after it.
    fn read(bytes: &[u8]) -> (Result<Option<SocketAddr>, HeaderError>, Vec<u8>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut stream = bytes;
            let client = read_client(&mut stream).await;
            (client, stream.to_vec())
        })
    }

    fn v2(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
        let mut header = V2_SIGNATURE.to_vec();
        header.push(0x20 | command);
        header.push(family);
        let length = u16::try_from(addresses.len() + tlvs.len()).unwrap();
        header.extend_from_slice(&length.to_be_bytes());
        header.extend_from_slice(addresses);
        header.extend_from_slice(tlvs);
        header
    }

    const LDAP: &[u8] = b"\x30\x0c\x02\x01\x01\x60\x07\x02\x01\x03\x04\x00\x80\x00";

    #[test]
    fn a_v1_line_names_the_client_and_leaves_the_ldap_bytes() {
        let mut bytes = b"PROXY TCP4 192.0.2.7 10.0.0.1 40001 389\r\n".to_vec();
        bytes.extend_from_slice(LDAP);
        let (client, rest) = read(&bytes);
        assert_eq!(client, Ok(Some("192.0.2.7:40001".parse().unwrap())));
        assert_eq!(rest, LDAP);
        let (client, rest) = read(b"PROXY TCP6 2001:db8::5 2001:db8::1 5000 636\r\n\x16");
        assert_eq!(client, Ok(Some("[2001:db8::5]:5000".parse().unwrap())));
        assert_eq!(rest, b"\x16");
        let (client, rest) = read(b"PROXY UNKNOWN\r\n0");
        assert_eq!(client, Ok(None));
        assert_eq!(rest, b"0");
    }

    #[test]
    fn a_v2_block_names_the_client_and_leaves_the_ldap_bytes() {
        let mut addresses = vec![198, 51, 100, 9, 10, 0, 0, 1];
        addresses.extend_from_slice(&41000u16.to_be_bytes());
        addresses.extend_from_slice(&389u16.to_be_bytes());
        // A NOOP TLV after the addresses, as HAProxy may send.
        let mut bytes = v2(1, 0x11, &addresses, &[0x04, 0x00, 0x02, 0, 0]);
        bytes.extend_from_slice(LDAP);
        let (client, rest) = read(&bytes);
        assert_eq!(client, Ok(Some("198.51.100.9:41000".parse().unwrap())));
        assert_eq!(rest, LDAP);
        // LOCAL: HAProxy's own check; the peer keeps its address.
        let mut bytes = v2(0, 0x00, &[], &[]);
        bytes.extend_from_slice(LDAP);
        let (client, rest) = read(&bytes);
        assert_eq!(client, Ok(None));
        assert_eq!(rest, LDAP);
    }

    #[test]
    fn a_balancer_is_known_by_its_address_on_either_stack() {
        let sources: Vec<ipnet::IpNet> = ["10.0.0.5", "fd00::/64"]
            .iter()
            .map(|text| lmdir_config::parse_network(text).unwrap())
            .collect();
        let is = |peer: &str| is_source(&sources, peer.parse().unwrap());
        assert!(is("10.0.0.5"));
        assert!(is("::ffff:10.0.0.5"), "IPv4 through a dual-stack listener");
        assert!(is("fd00::7"));
        assert!(!is("10.0.0.6"));
        assert!(!is("::ffff:10.0.0.6"));
        assert!(!is("fd01::7"));
    }

    #[test]
    fn what_is_not_a_whole_header_is_refused() {
        let refused = |bytes: &[u8]| read(bytes).0.expect_err("refused");
        // A client speaking LDAP at once (two binds: at least the 15 bytes read first).
        let plain_ldap = [LDAP, LDAP].concat();
        assert!(matches!(refused(&plain_ldap), HeaderError::Malformed(_)));
        assert!(matches!(refused(b"PROXY TCP4 1.2"), HeaderError::Io(_)));
        assert!(matches!(
            refused(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n"),
            HeaderError::Malformed(_)
        ));
        assert!(matches!(
            refused(b"PROXY TCP4 300.2.3.4 5.6.7.8 1 2\r\n"),
            HeaderError::Malformed(_)
        ));
        let long = format!("PROXY TCP4 {}\r\n", "1".repeat(200));
        assert_eq!(refused(long.as_bytes()), HeaderError::TooLong(108));
        // v2 past the bound: refused from its length, before reading the rest.
        let mut big = V2_SIGNATURE.to_vec();
        big.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(refused(&big), HeaderError::TooLong(16 + 0xffff));
        // v2 whose addresses are cut short, and a datagram client.
        assert!(matches!(
            refused(&v2(1, 0x11, &[1, 2, 3], &[])),
            HeaderError::Malformed(_)
        ));
        assert!(matches!(
            refused(&v2(1, 0x12, &[1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2], &[])),
            HeaderError::Malformed(_)
        ));
        assert!(matches!(
            refused(&v2(1, 0x11, &[], &[])[..14]),
            HeaderError::Io(_)
        ));
    }
}
