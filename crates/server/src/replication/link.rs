//! The consumer's connection to its provider: TCP, ldaps or StartTLS (rustls, verifying the
//! provider against `tls_ca_certificate` or the system roots), simple bind, and the provider's
//! messages framed and decoded with bounds (`pdu_bytes_max`, lmdir-sync's strict decoders).

use crate::ber_read;
use crate::controls::Control;
use crate::controls::START_TLS_OID;
use crate::stream::BoxedStream;
use bytes::BytesMut;
use ldap3_lber::common::TagClass;
use ldap3_lber::structure::{StructureTag, PL};
use ldap3_proto::proto::{
    LdapBindCred, LdapBindRequest, LdapExtendedRequest, LdapMsg, LdapOp, LdapResult,
    LdapSearchResultEntry,
};
use lmdir_config::ConsumerConfig;
use lmdir_sync::messages::{SYNC_ID_SET_UUIDS_MAX, SYNC_INFO_OID, SYNC_STATE_OID};
use lmdir_sync::{SyncDone, SyncInfo, SyncState};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a session failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum SessionError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("applying the provider's changes: {0}")]
    Apply(String),
}

/// Connecting, the TLS handshake, StartTLS and bind each get this long (a hang guard: a
/// provider that accepts and says nothing is retried, not waited on forever).
pub(crate) const PROVIDER_HANDSHAKE_TIMEOUT_SECONDS: u64 = 30;
/// BER nesting accepted in a provider's message (entries and sync values are shallow).
const PROVIDER_BER_DEPTH_MAX: usize = 32;
/// Bytes read from the socket at once.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Why a session with the provider ended; logged, then retried after `retry_seconds`.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("the provider sent {0}")]
    Protocol(String),
    #[error("{what} failed: result {code}: {message}")]
    Refused {
        what: &'static str,
        code: u32,
        message: String,
    },
    #[error("timed out after {PROVIDER_HANDSHAKE_TIMEOUT_SECONDS} s: {0}")]
    Timeout(&'static str),
    #[error("{0}")]
    Limit(String),
}

fn protocol(what: impl Into<String>) -> LinkError {
    LinkError::Protocol(what.into())
}

/// One message from the provider, decoded as far as the consumer needs.
#[derive(Debug)]
pub(crate) enum Message {
    Entry {
        entry: LdapSearchResultEntry,
        state: Option<SyncState>,
    },
    Info(SyncInfo),
    Done {
        result: LdapResult,
        done: Option<SyncDone>,
    },
    Other(LdapOp),
}

pub(crate) struct Link {
    stream: BoxedStream,
    buffer: BytesMut,
    pdu_bytes_max: usize,
    next_message_id: i32,
    /// The bytes of the frame last received (bounds the consumer's batch by bytes).
    pub last_frame_bytes: usize,
    /// Our end of the connection, `addr:port` (cn=Monitor's olmSRConnection).
    pub local_address: String,
}

async fn guarded<T>(
    what: &'static str,
    future: impl std::future::Future<Output = Result<T, LinkError>>,
) -> Result<T, LinkError> {
    tokio::time::timeout(
        Duration::from_secs(PROVIDER_HANDSHAKE_TIMEOUT_SECONDS),
        future,
    )
    .await
    .map_err(|_| LinkError::Timeout(what))?
}

/// `host:port` and whether TLS starts at once, from a validated provider URL.
fn address_of(url: &str) -> Result<(String, String, bool), LinkError> {
    let scheme = lmdir_config::provider_scheme(url).map_err(LinkError::Limit)?;
    let (_, rest) = url.split_once("://").unwrap_or((url, url));
    let authority = rest.trim_end_matches('/');
    let ldaps = scheme == "ldaps";
    let has_port = match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    };
    let address = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if ldaps { 636 } else { 389 })
    };
    let host = match authority.rsplit_once(':') {
        Some((host, _)) if has_port => host,
        _ => authority,
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    Ok((address, host, ldaps))
}

/// The rustls client configuration verifying a provider.
pub(crate) fn tls_client_config(
    config: &ConsumerConfig,
) -> Result<Arc<rustls::ClientConfig>, LinkError> {
    let mut roots = rustls::RootCertStore::empty();
    if config.tls_ca_certificate.is_empty() {
        let native = rustls_native_certs::load_native_certs();
        for certificate in native.certs {
            let _ = roots.add(certificate);
        }
    } else {
        let path = &config.tls_ca_certificate;
        let certificates = CertificateDer::pem_file_iter(path)
            .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
            .map_err(|error| LinkError::Tls(format!("{path}: {error}")))?;
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|error| LinkError::Tls(format!("{path}: {error}")))?;
        }
    }
    if roots.is_empty() {
        return Err(LinkError::Tls(
            "no CA certificate to verify the provider".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| LinkError::Tls(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

async fn tls_wrap(
    tcp: TcpStream,
    host: &str,
    config: &ConsumerConfig,
) -> Result<BoxedStream, LinkError> {
    let connector = tokio_rustls::TlsConnector::from(tls_client_config(config)?);
    let name = ServerName::try_from(host.to_string())
        .map_err(|error| LinkError::Tls(format!("{host}: {error}")))?;
    let stream = guarded("TLS handshake", async {
        Ok(connector.connect(name, tcp).await?)
    })
    .await?;
    Ok(Box::new(stream))
}

impl Link {
    /// Connects (TLS as configured) and binds.
    pub(crate) async fn open(
        config: &ConsumerConfig,
        pdu_bytes_max: usize,
    ) -> Result<Link, LinkError> {
        let (address, host, ldaps) = address_of(&config.provider)?;
        let tcp = guarded("connect", async { Ok(TcpStream::connect(&address).await?) }).await?;
        let _ = tcp.set_nodelay(true);
        let local_address = tcp
            .local_addr()
            .map(|address| address.to_string())
            .unwrap_or_default();
        let stream: BoxedStream = if ldaps {
            tls_wrap(tcp, &host, config).await?
        } else if config.starttls {
            let mut tcp = tcp;
            guarded("StartTLS", start_tls(&mut tcp, pdu_bytes_max)).await?;
            tls_wrap(tcp, &host, config).await?
        } else {
            Box::new(tcp)
        };
        let mut link = Link {
            stream,
            buffer: BytesMut::new(),
            pdu_bytes_max,
            // Message 1 was StartTLS's when there was one; IDs need only be unique.
            next_message_id: 2,
            last_frame_bytes: 0,
            local_address,
        };
        guarded("bind", link.bind(config)).await?;
        Ok(link)
    }

    async fn bind(&mut self, config: &ConsumerConfig) -> Result<(), LinkError> {
        let request = LdapOp::BindRequest(LdapBindRequest {
            version: 3,
            dn: config.bind_dn.clone(),
            cred: LdapBindCred::Simple(config.credentials.clone()),
        });
        self.send(request, Vec::new()).await?;
        match self.receive().await? {
            Message::Other(LdapOp::BindResponse(response)) => check_result("bind", &response.res),
            other => Err(protocol(format!("{other:?} instead of a bind response"))),
        }
    }

    /// Sends one request with these controls; returns its message ID.
    pub(crate) async fn send(
        &mut self,
        operation: LdapOp,
        request_controls: Vec<Control>,
    ) -> Result<i32, LinkError> {
        let message_id = self.next_message_id;
        self.next_message_id += 1;
        let bytes = encode_request(message_id, operation, request_controls)?;
        self.stream.write_all(&bytes).await?;
        self.stream.flush().await?;
        Ok(message_id)
    }

    /// The next message already buffered, if a whole one is.
    pub(crate) fn buffered(&mut self) -> Result<Option<Message>, LinkError> {
        let frame = crate::pdu::take_frame(&mut self.buffer, self.pdu_bytes_max)
            .map_err(|error| protocol(error.to_string()))?;
        let Some(frame) = frame else {
            return Ok(None);
        };
        self.last_frame_bytes = frame.len();
        decode(&frame).map(Some)
    }

    /// The next message, reading as needed.
    pub(crate) async fn receive(&mut self) -> Result<Message, LinkError> {
        loop {
            if let Some(message) = self.buffered()? {
                return Ok(message);
            }
            self.buffer.reserve(READ_CHUNK_BYTES);
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                return Err(protocol("end of stream (connection closed)"));
            }
        }
    }
}

/// LDAPMessage { messageID, operation, controls [0] (when any) }.
fn encode_request(
    message_id: i32,
    operation: LdapOp,
    request_controls: Vec<Control>,
) -> Result<BytesMut, LinkError> {
    let tag: StructureTag = LdapMsg::new(message_id, operation).into();
    let PL::C(mut elements) = tag.payload else {
        return Err(protocol("an unencodable request"));
    };
    if !request_controls.is_empty() {
        elements.push(controls_tag(request_controls));
    }
    let tag = StructureTag {
        payload: PL::C(elements),
        ..tag
    };
    let mut bytes = BytesMut::new();
    ldap3_lber::write::encode_into(&mut bytes, tag)?;
    Ok(bytes)
}

/// StartTLS in clear on the TCP stream (message 1), before the TLS handshake.
async fn start_tls(tcp: &mut TcpStream, pdu_bytes_max: usize) -> Result<(), LinkError> {
    let request = LdapOp::ExtendedRequest(LdapExtendedRequest {
        name: START_TLS_OID.to_string(),
        value: None,
    });
    tcp.write_all(&encode_request(1, request, Vec::new())?)
        .await?;
    let mut buffer = BytesMut::new();
    let frame = loop {
        let frame = crate::pdu::take_frame(&mut buffer, pdu_bytes_max)
            .map_err(|error| protocol(error.to_string()))?;
        if let Some(frame) = frame {
            break frame;
        }
        if tcp.read_buf(&mut buffer).await? == 0 {
            return Err(protocol("end of stream before the StartTLS response"));
        }
    };
    // Nothing may follow the StartTLS response in clear (RFC 4511 §4.14.2).
    if !buffer.is_empty() {
        return Err(protocol("bytes after the StartTLS response"));
    }
    match decode(&frame)? {
        Message::Other(LdapOp::ExtendedResponse(response)) => {
            check_result("StartTLS", &response.res)
        }
        other => Err(protocol(format!(
            "{other:?} instead of the StartTLS response"
        ))),
    }
}

fn check_result(what: &'static str, result: &LdapResult) -> Result<(), LinkError> {
    let code = result_code(result);
    if code == 0 {
        Ok(())
    } else {
        Err(LinkError::Refused {
            what,
            code,
            message: result.message.clone(),
        })
    }
}

pub(crate) fn result_code(result: &LdapResult) -> u32 {
    result.code.clone() as u32
}

fn octet(id: u64, bytes: Vec<u8>) -> StructureTag {
    StructureTag {
        class: TagClass::Universal,
        id,
        payload: PL::P(bytes),
    }
}

/// `controls [0] SEQUENCE OF Control`.
fn controls_tag(request_controls: Vec<Control>) -> StructureTag {
    let controls = request_controls
        .into_iter()
        .map(|control| {
            let mut fields = vec![octet(4, control.oid.into_bytes())];
            if control.critical {
                fields.push(octet(1, vec![0xff]));
            }
            if let Some(value) = control.value {
                fields.push(octet(4, value));
            }
            StructureTag {
                class: TagClass::Universal,
                id: 16,
                payload: PL::C(fields),
            }
        })
        .collect();
    StructureTag {
        class: TagClass::Context,
        id: 0,
        payload: PL::C(controls),
    }
}

/// IntermediateResponse: [APPLICATION 25], constructed.
const INTERMEDIATE_RESPONSE_TAG: u8 = 0x79;
const RESPONSE_NAME_TAG: u8 = 0x80;
const RESPONSE_VALUE_TAG: u8 = 0x81;

/// Decodes one provider message: Sync Info by lmdir-sync (its syncIdSet bounded), everything
/// else by the server's own PDU decoder (which keeps each control's raw value).
fn decode(frame: &[u8]) -> Result<Message, LinkError> {
    let malformed = || protocol("a malformed LDAPMessage");
    let (message, _) = ber_read::read_tlv(frame).ok_or_else(malformed)?;
    let elements = ber_read::elements(message.content).ok_or_else(malformed)?;
    if let Some(operation) = elements
        .get(1)
        .filter(|op| op.tag == INTERMEDIATE_RESPONSE_TAG)
    {
        let parts = ber_read::elements(operation.content).ok_or_else(malformed)?;
        let field = |tag| parts.iter().find(|part| part.tag == tag).map(|p| p.content);
        if field(RESPONSE_NAME_TAG) != Some(SYNC_INFO_OID.as_bytes()) {
            return Err(protocol("an intermediate response that is not Sync Info"));
        }
        let value = field(RESPONSE_VALUE_TAG).ok_or_else(malformed)?;
        let info = SyncInfo::decode(value, SYNC_ID_SET_UUIDS_MAX)
            .map_err(|error| protocol(error.to_string()))?;
        return Ok(Message::Info(info));
    }
    let decoded = crate::pdu::decode_message(frame, PROVIDER_BER_DEPTH_MAX)
        .map_err(|error| protocol(error.to_string()))?;
    let value_of = |oid: &str| {
        decoded
            .controls
            .iter()
            .find(|control| control.oid == oid)
            .map(|control| control.value.clone().unwrap_or_default())
    };
    let operation = match decoded.op {
        crate::request::Operation::Other(operation) => operation,
        crate::request::Operation::Search(_) => {
            return Err(protocol("a search request from the provider"))
        }
        crate::request::Operation::Bind(_) | crate::request::Operation::NotUtf8(_) => {
            return Err(protocol("a request from the provider"))
        }
    };
    Ok(match operation {
        LdapOp::SearchResultEntry(entry) => Message::Entry {
            state: value_of(SYNC_STATE_OID)
                .map(|value| SyncState::decode(&value))
                .transpose()
                .map_err(|error| protocol(error.to_string()))?,
            entry,
        },
        LdapOp::SearchResultDone(result) => Message::Done {
            done: value_of(lmdir_sync::messages::SYNC_DONE_OID)
                .map(|value| SyncDone::decode(&value))
                .transpose()
                .map_err(|error| protocol(error.to_string()))?,
            result,
        },
        other => Message::Other(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_addresses() {
        let parsed = |url: &str| address_of(url).unwrap();
        assert_eq!(
            parsed("ldap://10.0.0.1"),
            ("10.0.0.1:389".into(), "10.0.0.1".into(), false)
        );
        assert_eq!(
            parsed("ldaps://ldap.example.com:1636/"),
            (
                "ldap.example.com:1636".into(),
                "ldap.example.com".into(),
                true
            )
        );
        assert_eq!(
            parsed("ldap://[::1]"),
            ("[::1]:389".into(), "::1".into(), false)
        );
        assert!(address_of("http://x").is_err());
    }
}
