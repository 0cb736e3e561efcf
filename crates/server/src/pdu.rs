//! Framing of LDAP PDUs on a stream. The BER length header is read first, so a huge announced
//! length is refused at once instead of buffering until the peer sends it; a complete PDU is
//! split strictly here, its controls are decoded by `controls` (keeping each one's
//! criticality), a search request by `request` (our own types, octet-string filter values), a
//! plain simple bind straight from its elements, and the rest by ldap3_proto's LdapMsg. Encoding is a pass-through of
//! already-encoded bytes.

use crate::ber_read;
use crate::controls::{self, Control};
use crate::request::{self, Operation};
use crate::request::{BindCredentials, BindRequest};
use bytes::{Bytes, BytesMut};
use ldap3_lber::common::TagClass;
use ldap3_lber::parse::Parser;
use ldap3_lber::structure::{StructureTag, PL};
use ldap3_proto::proto::{LdapMsg, LdapOp};
use std::io;
use tokio_util::codec::{Decoder, Encoder};

/// One decoded request: LDAPMessage ::= SEQUENCE { messageID, protocolOp, controls [0] OPTIONAL }.
#[derive(Debug, Clone)]
pub struct Request {
    pub msgid: i32,
    pub op: Operation,
    pub controls: Vec<Control>,
    /// Bytes of the whole LDAPMessage on the wire (what the connection's pending bound counts).
    pub wire_bytes: usize,
}

/// Why a PDU could not be decoded; each closes only the connection it arrived on.
#[derive(Debug, thiserror::Error)]
pub enum PduError {
    #[error("PDU of {announced_bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    TooLarge {
        announced_bytes: u64,
        limit_bytes: usize,
    },
    #[error("malformed PDU: {0}")]
    Malformed(String),
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

pub struct PduCodec {
    limits: Limits,
}

/// Where a codec takes its limits (the largest request, the deepest BER nesting) from.
enum Limits {
    Fixed(usize, usize),
    /// Asked at each decode: a connection's follow the settings a reload replaces.
    Live(Box<dyn Fn() -> (usize, usize) + Send>),
}

impl PduCodec {
    pub fn new(pdu_bytes_max: usize, ber_depth_max: usize) -> Self {
        PduCodec {
            limits: Limits::Fixed(pdu_bytes_max, ber_depth_max),
        }
    }

    /// A codec that asks `limits` for (largest request, deepest BER nesting) before each
    /// request it reads.
    pub fn live(limits: impl Fn() -> (usize, usize) + Send + 'static) -> Self {
        PduCodec {
            limits: Limits::Live(Box::new(limits)),
        }
    }

    fn limits(&self) -> (usize, usize) {
        match &self.limits {
            Limits::Fixed(pdu_bytes_max, ber_depth_max) => (*pdu_bytes_max, *ber_depth_max),
            Limits::Live(limits) => limits(),
        }
    }
}

/// The outer TLV header: its size in bytes and the announced content length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    header_bytes: usize,
    content_bytes: u64,
}

/// Reads the outer TLV header; None until enough bytes are there.
fn announced_length(buffer: &[u8]) -> Result<Option<Header>, PduError> {
    let Some(&first) = buffer.first() else {
        return Ok(None);
    };
    if first != 0x30 {
        return Err(PduError::Malformed(format!(
            "LDAPMessage must start with a SEQUENCE tag 0x30, got 0x{first:02x}"
        )));
    }
    let Some(&length_byte) = buffer.get(1) else {
        return Ok(None);
    };
    if length_byte < 0x80 {
        return Ok(Some(Header {
            header_bytes: 2,
            content_bytes: u64::from(length_byte),
        }));
    }
    let length_size = usize::from(length_byte & 0x7f);
    if length_size == 0 {
        return Err(PduError::Malformed(
            "indefinite length is not allowed in LDAP (RFC 4511 §5.1)".to_string(),
        ));
    }
    if length_size > 8 {
        return Err(PduError::Malformed(format!(
            "length of {length_size} bytes is not supported"
        )));
    }
    let Some(length_bytes) = buffer.get(2..2 + length_size) else {
        return Ok(None);
    };
    Ok(Some(Header {
        header_bytes: 2 + length_size,
        content_bytes: length_bytes
            .iter()
            .fold(0u64, |total, byte| (total << 8) | u64::from(*byte)),
    }))
}

/// Splits one complete LDAPMessage (header included) off the front of `buffer`; None until it
/// has all arrived. An announced length over `pdu_bytes_max` is refused from the header alone.
pub fn take_frame(
    buffer: &mut BytesMut,
    pdu_bytes_max: usize,
) -> Result<Option<BytesMut>, PduError> {
    let Some(header) = announced_length(buffer)? else {
        return Ok(None);
    };
    if header.content_bytes > pdu_bytes_max as u64 {
        return Err(PduError::TooLarge {
            announced_bytes: header.content_bytes,
            limit_bytes: pdu_bytes_max,
        });
    }
    // Bounded by pdu_bytes_max just above. No reserve: a peer announcing a big PDU and
    // sending nothing must not make us allocate it.
    let frame_bytes = header.header_bytes + header.content_bytes as usize;
    if buffer.len() < frame_bytes {
        return Ok(None);
    }
    Ok(Some(buffer.split_to(frame_bytes)))
}

/// Decodes one complete LDAPMessage (exactly `frame`, header included).
pub fn decode_message(frame: &[u8], ber_depth_max: usize) -> Result<Request, PduError> {
    let malformed = |what: &str| PduError::Malformed(what.to_string());
    // LDAPMessage ::= SEQUENCE { messageID, protocolOp, controls [0] Controls OPTIONAL },
    // split strictly here: the controls are decoded by `controls`, never by ldap3_proto, which
    // would lose criticality and warn about each control it does not know.
    let elements = match ber_read::read_tlv(frame) {
        Some((message, [])) if message.tag == 0x30 => ber_read::elements(message.content),
        _ => None,
    }
    .ok_or_else(|| malformed("LDAPMessage is not one well-formed SEQUENCE"))?;
    let (message_id, operation, controls) = match elements.as_slice() {
        [message_id, operation] => (message_id, operation, Vec::new()),
        [message_id, operation, controls] => (
            message_id,
            operation,
            controls::decode_controls(controls.whole)
                .map_err(|error| PduError::Malformed(error.to_string()))?,
        ),
        _ => return Err(malformed("LDAPMessage must have two or three elements")),
    };
    if let Some((msgid, bind)) = bind_request(message_id, operation) {
        return Ok(Request {
            msgid,
            op: Operation::Bind(bind),
            controls,
            wire_bytes: frame.len(),
        });
    }
    if request::is_search(operation) {
        let msgid = message_id_of(message_id).ok_or_else(|| malformed("message ID"))?;
        let search = match request::search_request(operation, ber_depth_max) {
            Ok(search) => Operation::Search(Box::new(search)),
            // Only the base at fault: another malformed field ends the connection.
            Err(what @ request::SEARCH_BASE_NOT_UTF8) => {
                Operation::NotUtf8(request::NotUtf8::of(operation).ok_or_else(|| malformed(what))?)
            }
            Err(what) => return Err(malformed(what)),
        };
        return Ok(Request {
            msgid,
            op: search,
            controls,
            wire_bytes: frame.len(),
        });
    }
    let parse = |element: &ber_read::Tlv<'_>| {
        Parser::new(ber_depth_max)
            .parse(element.whole)
            .map(|(_, tag)| tag)
            .map_err(|_| malformed("undecodable BER"))
    };
    let envelope = StructureTag {
        class: TagClass::Universal,
        id: 16,
        payload: PL::C(vec![parse(message_id)?, parse(operation)?]),
    };
    let message = match LdapMsg::try_from(envelope) {
        Ok(message) => message,
        Err(error) => {
            // A DN that is not UTF-8 is answered, not a reason to end the connection.
            let invalid = request::NotUtf8::of(operation);
            let msgid = message_id_of(message_id);
            let (Some(invalid), Some(msgid)) = (invalid, msgid) else {
                return Err(PduError::Malformed(error.to_string()));
            };
            return Ok(Request {
                msgid,
                op: Operation::NotUtf8(invalid),
                controls,
                wire_bytes: frame.len(),
            });
        }
    };
    let op = match message.op {
        LdapOp::BindRequest(bind) => Operation::Bind(bind.into()),
        other => Operation::Other(other),
    };
    Ok(Request {
        msgid: message.msgid,
        op,
        controls,
        wire_bytes: frame.len(),
    })
}

/// MessageID ::= INTEGER (0 .. maxInt).
fn message_id_of(element: &ber_read::Tlv<'_>) -> Option<i32> {
    const INTEGER: u8 = 0x02;
    if element.tag != INTEGER || element.content.first().is_none_or(|byte| byte & 0x80 != 0) {
        return None;
    }
    i32::try_from(ber_integer_as_ldap3_proto(element.content)?).ok()
}

/// A bind (a simple one is half of an authrate's requests) decoded straight from its elements,
/// without the `StructureTag` tree and the copies of ldap3_proto's path: `{ version INTEGER,
/// name OCTET STRING, simple [0] | sasl [3] { mechanism, credentials OPTIONAL } }` with any
/// name and password octets, nothing after; anything else (constructed strings, extra
/// elements, a mechanism that is not UTF-8) is left to ldap3_proto, which decodes every request
/// taken here with a UTF-8 name and password to this same value (and refused the others: their
/// connection ended).
fn bind_request(
    message_id: &ber_read::Tlv<'_>,
    operation: &ber_read::Tlv<'_>,
) -> Option<(i32, BindRequest)> {
    const INTEGER: u8 = 0x02;
    const OCTET_STRING: u8 = 0x04;
    const BIND_REQUEST: u8 = 0x60;
    const SIMPLE: u8 = 0x80;
    const SASL: u8 = 0xa3;
    if message_id.tag != INTEGER || operation.tag != BIND_REQUEST {
        return None;
    }
    let (version, rest) = ber_read::read_tlv(operation.content)?;
    let (name, rest) = ber_read::read_tlv(rest)?;
    let (password, rest) = ber_read::read_tlv(rest)?;
    if !rest.is_empty() || version.tag != INTEGER || name.tag != OCTET_STRING {
        return None;
    }
    let credentials = match password.tag {
        SIMPLE => BindCredentials::Simple(password.content.to_vec()),
        SASL => sasl_credentials(password.content)?,
        _ => return None,
    };
    // ldap3_proto's truncations: the message ID to i32, the version to i64.
    let msgid = ber_integer_as_ldap3_proto(message_id.content)? as i32;
    let version = ber_integer_as_ldap3_proto(version.content)? as i64;
    let request = BindRequest {
        version,
        name: name.content.to_vec(),
        credentials,
    };
    Some((msgid, request))
}

/// SaslCredentials ::= SEQUENCE { mechanism LDAPString, credentials OCTET STRING OPTIONAL }
/// (the `[3]` choice's content); None for any other shape (left to ldap3_proto).
fn sasl_credentials(content: &[u8]) -> Option<BindCredentials> {
    const OCTET_STRING: u8 = 0x04;
    let (mechanism, rest) = ber_read::read_tlv(content)?;
    let credentials = match ber_read::read_tlv(rest) {
        None if rest.is_empty() => Vec::new(),
        Some((credentials, [])) if credentials.tag == OCTET_STRING => credentials.content.to_vec(),
        _ => return None,
    };
    if mechanism.tag != OCTET_STRING {
        return None;
    }
    let mechanism = std::str::from_utf8(mechanism.content).ok()?.to_string();
    Some(BindCredentials::Sasl {
        mechanism,
        credentials,
    })
}

/// An INTEGER's content read as ldap3_proto reads it: at most 8 bytes, big-endian, zero-padded
/// (not sign-extended).
fn ber_integer_as_ldap3_proto(content: &[u8]) -> Option<u64> {
    (content.len() <= 8).then(|| {
        content
            .iter()
            .fold(0u64, |value, byte| (value << 8) | u64::from(*byte))
    })
}

impl Decoder for PduCodec {
    type Item = Request;
    type Error = PduError;

    fn decode(&mut self, buffer: &mut BytesMut) -> Result<Option<Request>, PduError> {
        if buffer.is_empty() {
            return Ok(None);
        }
        let (pdu_bytes_max, ber_depth_max) = self.limits();
        match take_frame(buffer, pdu_bytes_max)? {
            Some(frame) => decode_message(&frame, ber_depth_max).map(Some),
            None => Ok(None),
        }
    }
}

impl Encoder<Bytes> for PduCodec {
    type Error = PduError;

    fn encode(&mut self, item: Bytes, buffer: &mut BytesMut) -> Result<(), PduError> {
        buffer.extend_from_slice(&item);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bind message: `30 len 02 msgid... 60 len <body>`.
    fn bind_frame(message_id: &[u8], body: &[u8]) -> Vec<u8> {
        let mut content = vec![0x02, message_id.len() as u8];
        content.extend_from_slice(message_id);
        content.push(0x60);
        content.push(body.len() as u8);
        content.extend_from_slice(body);
        let mut frame = vec![0x30, content.len() as u8];
        frame.extend_from_slice(&content);
        frame
    }

    /// What ldap3_proto alone makes of a frame (the path every other request takes).
    fn through_ldap3_proto(frame: &[u8]) -> Option<(i32, LdapOp)> {
        let (message, _) = ber_read::read_tlv(frame)?;
        let elements = ber_read::elements(message.content)?;
        let tags = elements
            .iter()
            .map(|element| {
                Parser::new(32)
                    .parse(element.whole)
                    .map(|(_, tag)| tag)
                    .ok()
            })
            .collect::<Option<Vec<_>>>()?;
        let envelope = StructureTag {
            class: TagClass::Universal,
            id: 16,
            payload: PL::C(tags),
        };
        LdapMsg::try_from(envelope)
            .ok()
            .map(|message| (message.msgid, message.op))
    }

    #[test]
    fn binds_decode_as_ldap3_proto_decodes_them() {
        let simple = |name: &[u8], password: &[u8]| {
            let mut body = vec![0x02, 0x01, 0x03, 0x04, name.len() as u8];
            body.extend_from_slice(name);
            body.push(0x80);
            body.push(password.len() as u8);
            body.extend_from_slice(password);
            body
        };
        let cases: Vec<Vec<u8>> = vec![
            bind_frame(
                &[0x05],
                &simple(b"uid=u1,ou=People,dc=example,dc=com", b"password"),
            ),
            bind_frame(&[0x00, 0x80], &simple(b"cn=x", b"secret")),
            bind_frame(&[0xff, 0xff, 0xff, 0xff], &simple(b"", b"")),
            bind_frame(
                &[0x01, 0x02, 0x03, 0x04, 0x05, 0x06],
                &simple("cn=Zoë".as_bytes(), b"p"),
            ),
            bind_frame(&[], &simple(b"cn=x", b"p")),
            // version 2, two-byte version, a version in nine bytes (too long for ldap3_proto)
            bind_frame(&[0x07], &[0x02, 0x01, 0x02, 0x04, 0x00, 0x80, 0x01, b'p']),
            bind_frame(
                &[0x07],
                &[0x02, 0x02, 0x00, 0x03, 0x04, 0x00, 0x80, 0x01, b'p'],
            ),
            bind_frame(
                &[0x07],
                &[
                    0x02, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0x04, 0x00, 0x80, 0x00,
                ],
            ),
            // an element after the credentials, a long-form length, SASL, unknown choice
            bind_frame(
                &[0x07],
                &[0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00, 0x04, 0x00],
            ),
            bind_frame(
                &[0x07],
                &[0x02, 0x01, 0x03, 0x04, 0x81, 0x01, b'x', 0x80, 0x00],
            ),
            bind_frame(
                &[0x07],
                &[
                    0x02, 0x01, 0x03, 0x04, 0x00, 0xa3, 0x06, 0x04, 0x04, b'P', b'L', b'A', b'I',
                ],
            ),
            bind_frame(&[0x07], &[0x02, 0x01, 0x03, 0x04, 0x00, 0x81, 0x00]),
            // SASL EXTERNAL with empty credentials
            bind_frame(
                &[0x07],
                &[
                    0x02, 0x01, 0x03, 0x04, 0x00, 0xa3, 0x0c, 0x04, 0x08, b'E', b'X', b'T', b'E',
                    b'R', b'N', b'A', b'L', 0x04, 0x00,
                ],
            ),
            // the credentials missing, the name not an OCTET STRING
            bind_frame(&[0x07], &[0x02, 0x01, 0x03, 0x04, 0x00]),
            bind_frame(&[0x07], &[0x02, 0x01, 0x03, 0x0c, 0x00, 0x80, 0x00]),
        ];
        let ours = |frame: &[u8]| {
            decode_message(frame, 32)
                .ok()
                .map(|request| match request.op {
                    Operation::Bind(bind) => (request.msgid, bind),
                    other => panic!("a bind decoded as {other:?}"),
                })
        };
        for frame in cases {
            let expected = through_ldap3_proto(&frame).map(|(msgid, op)| match op {
                LdapOp::BindRequest(bind) => (msgid, BindRequest::from(bind)),
                other => panic!("ldap3_proto read a bind as {other:?}"),
            });
            assert_eq!(ours(&frame), expected, "frame {frame:02x?}");
        }
        // A password is octets: Latin-1 "café" is taken as sent (ldap3_proto refused it, and
        // the connection was ended).
        let latin1 = bind_frame(&[0x07], &simple(b"cn=x", b"caf\xe9"));
        assert_eq!(through_ldap3_proto(&latin1), None);
        let (_, bind) = ours(&latin1).expect("decoded");
        assert_eq!(
            bind.credentials,
            BindCredentials::Simple(b"caf\xe9".to_vec())
        );
        // So is the name, answered invalidDNSyntax when it is not UTF-8.
        let name = bind_frame(&[0x07], &simple(&[0xff, 0xfe], b"p"));
        assert_eq!(through_ldap3_proto(&name), None);
        let (_, bind) = ours(&name).expect("decoded");
        assert_eq!(bind.name, [0xff, 0xfe]);
    }

    #[test]
    fn huge_announced_length_is_refused_before_the_body_arrives() {
        let mut codec = PduCodec::new(1024, 32);
        let mut buffer = BytesMut::from(&[0x30u8, 0x84, 0x7f, 0xff, 0xff, 0xff][..]);
        assert!(matches!(
            codec.decode(&mut buffer),
            Err(PduError::TooLarge {
                announced_bytes: 0x7fff_ffff,
                limit_bytes: 1024
            })
        ));
    }

    /// A live codec asks for its limits at each request: lowered between two requests, the
    /// second is refused (a reload lowering `pdu_bytes_max` bites on open connections).
    #[test]
    fn a_live_codec_takes_its_limit_at_each_request() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let limit = std::sync::Arc::new(AtomicUsize::new(4096));
        let source = limit.clone();
        let mut codec = PduCodec::live(move || (source.load(Ordering::Relaxed), 32));
        let frame = bind_frame(&[1], &[0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00]);
        let padded = |frame: &[u8]| {
            // The same bind announcing a longer content (the rest is never sent).
            let mut announced = vec![0x30u8, 0x82, 0x08, 0x00];
            announced.extend_from_slice(&frame[2..]);
            announced
        };
        let mut buffer = BytesMut::from(&frame[..]);
        assert!(codec.decode(&mut buffer).expect("decode").is_some());
        let mut buffer = BytesMut::from(&padded(&frame)[..]);
        assert!(
            matches!(codec.decode(&mut buffer), Ok(None)),
            "waits under 4096"
        );
        limit.store(1024, Ordering::Relaxed);
        assert!(matches!(
            codec.decode(&mut buffer),
            Err(PduError::TooLarge {
                announced_bytes: 0x800,
                limit_bytes: 1024
            })
        ));
    }

    #[test]
    fn partial_header_waits_for_more_bytes() {
        let mut codec = PduCodec::new(1024, 32);
        let mut buffer = BytesMut::from(&[0x30u8, 0x82, 0x01][..]);
        assert!(matches!(codec.decode(&mut buffer), Ok(None)));
    }

    #[test]
    fn wrong_tag_is_malformed() {
        let mut codec = PduCodec::new(1024, 32);
        let mut buffer = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        assert!(matches!(
            codec.decode(&mut buffer),
            Err(PduError::Malformed(_))
        ));
    }

    #[test]
    fn controls_are_decoded_with_their_criticality() {
        let mut codec = PduCodec::new(1024, 32);
        // LDAPMessage { 2, delRequest "x", [0] { { "1.2.3.4", TRUE } } }
        let mut buffer = BytesMut::from(
            &[
                0x30u8, 0x16, 0x02, 0x01, 0x02, 0x4a, 0x01, b'x', 0xa0, 0x0e, 0x30, 0x0c, 0x04,
                0x07, b'1', b'.', b'2', b'.', b'3', b'.', b'4', 0x01, 0x01, 0xff,
            ][..],
        );
        let request = codec.decode(&mut buffer).expect("decode").expect("request");
        assert_eq!(request.msgid, 2);
        assert_eq!(
            request.controls,
            vec![Control {
                oid: "1.2.3.4".to_string(),
                critical: true,
                value: None
            }]
        );
        assert!(buffer.is_empty());
    }

    #[test]
    fn a_control_cut_short_by_its_length_is_malformed_not_dropped() {
        let mut codec = PduCodec::new(1024, 32);
        // As above, but the message's length ends inside the critical control.
        let mut buffer = BytesMut::from(
            &[
                0x30u8, 0x14, 0x02, 0x01, 0x02, 0x4a, 0x01, b'x', 0xa0, 0x0e, 0x30, 0x0c, 0x04,
                0x07, b'1', b'.', b'2', b'.', b'3', b'.', b'4', 0x01,
            ][..],
        );
        assert!(matches!(
            codec.decode(&mut buffer),
            Err(PduError::Malformed(_))
        ));
    }

    #[test]
    fn a_pdu_split_across_reads_waits_for_the_rest() {
        let mut codec = PduCodec::new(1024, 32);
        let mut buffer = BytesMut::from(&[0x30u8, 0x05, 0x02, 0x01, 0x01][..]);
        assert!(matches!(codec.decode(&mut buffer), Ok(None)));
        buffer.extend_from_slice(&[0x42, 0x00, 0x30]);
        let request = codec.decode(&mut buffer).expect("decode").expect("request");
        assert!(matches!(
            request.op,
            Operation::Other(LdapOp::UnbindRequest)
        ));
        assert_eq!(&buffer[..], &[0x30]);
    }

    #[test]
    fn a_third_element_that_is_not_controls_is_malformed() {
        let mut codec = PduCodec::new(1024, 32);
        let mut buffer =
            BytesMut::from(&[0x30u8, 0x07, 0x02, 0x01, 0x01, 0x42, 0x00, 0x04, 0x00][..]);
        assert!(matches!(
            codec.decode(&mut buffer),
            Err(PduError::Malformed(_))
        ));
    }

    #[test]
    fn a_valid_unbind_decodes() {
        let mut codec = PduCodec::new(1024, 32);
        // LDAPMessage { messageID 1, unbindRequest [APPLICATION 2] NULL }
        let mut buffer = BytesMut::from(&[0x30u8, 0x05, 0x02, 0x01, 0x01, 0x42, 0x00][..]);
        let message = codec.decode(&mut buffer).expect("decode").expect("message");
        assert_eq!(message.msgid, 1);
    }
}
