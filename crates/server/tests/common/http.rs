//! A small blocking HTTPS client for the SCIM tests: one request per connection, TLS pinned
//! to the server's own (self-signed demo) certificate.
#![allow(dead_code)]

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
struct Pinned {
    certificate: Vec<u8>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.certificate.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("not the pinned certificate".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Where and how to reach the HTTP listener.
#[derive(Clone)]
pub struct Client {
    pub address: SocketAddr,
    /// The server certificate (DER) for HTTPS; None = plain http.
    pub certificate: Option<Vec<u8>>,
    /// The Authorization header sent with every request (None: none).
    pub authorization: Option<String>,
}

impl Client {
    pub fn https(address: SocketAddr, certificate_pem: &Path) -> Client {
        let certificate = CertificateDer::from_pem_file(certificate_pem).expect("certificate PEM");
        Client {
            address,
            certificate: Some(certificate.as_ref().to_vec()),
            authorization: None,
        }
    }

    pub fn basic(&self, user: &str, password: &str) -> Client {
        use base64::Engine;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Client {
            authorization: Some(format!("Basic {encoded}")),
            ..self.clone()
        }
    }

    pub fn bearer(&self, token: &str) -> Client {
        Client {
            authorization: Some(format!("Bearer {token}")),
            ..self.clone()
        }
    }

    pub fn get(&self, path: &str) -> Answer {
        self.request("GET", path, &[], b"")
    }

    pub fn send_json(&self, method: &str, path: &str, body: &serde_json::Value) -> Answer {
        self.request(
            method,
            path,
            &[("Content-Type", "application/scim+json")],
            body.to_string().as_bytes(),
        )
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Answer {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        if let Some(authorization) = &self.authorization {
            head.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        let raw = self.exchange(&request);
        parse(&raw)
    }

    /// Sends raw bytes and returns everything read until the server closes.
    pub fn exchange(&self, request: &[u8]) -> Vec<u8> {
        let stream = TcpStream::connect(self.address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let mut response = Vec::new();
        match &self.certificate {
            None => {
                let mut stream = stream;
                let _ = stream.write_all(request);
                read_response(&mut stream, &mut response);
            }
            Some(certificate) => {
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                    .with_safe_default_protocol_versions()
                    .expect("protocols")
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Pinned {
                        certificate: certificate.clone(),
                        provider,
                    }))
                    .with_no_client_auth();
                let name = ServerName::IpAddress(self.address.ip().into());
                let connection =
                    rustls::ClientConnection::new(Arc::new(config), name).expect("tls client");
                let mut tls = rustls::StreamOwned::new(connection, stream);
                let _ = tls.write_all(request);
                read_response(&mut tls, &mut response);
            }
        }
        response
    }
}

/// Reads one response: until its Content-Length is complete (a server may keep the connection
/// open whatever `Connection: close` asked), else until the server closes.
fn read_response(stream: &mut impl Read, response: &mut Vec<u8>) {
    let mut buffer = [0u8; 16384];
    loop {
        if let Some(split) = response.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse::<usize>().ok());
            if length.is_some_and(|length| response.len() >= split + 4 + length) {
                return;
            }
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => response.extend_from_slice(&buffer[..read]),
        }
    }
}

fn parse(raw: &[u8]) -> Answer {
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

/// A bearer token for `dn` with `secret`, its `{SHA256}` hash stored on the entry as
/// docs/scim.md issues one (by `ldap`, which may write it).
pub fn issue_token(ldap: &mut ldap3::LdapConn, dn: &str, secret: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let hash = format!(
        "{{SHA256}}{}",
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(secret.as_bytes()))
    );
    ldap.modify(
        dn,
        vec![
            ldap3::Mod::Add("objectClass", ["lmdirTokenHolder"].into()),
            ldap3::Mod::Add("lmdirBearerToken", [hash.as_str()].into()),
        ],
    )
    .expect("modify sent")
    .success()
    .expect("token stored");
    let encoded_dn = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(dn.as_bytes());
    format!("lmdir.{encoded_dn}.{secret}")
}
