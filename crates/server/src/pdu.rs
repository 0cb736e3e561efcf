//! Framing of LDAP PDUs on a stream: decoding with ldap3_proto's codec behind a size guard that
//! reads the BER length header first, so a huge announced length is refused at once instead of
//! buffering until the peer sends it; encoding is a pass-through of already-encoded bytes.

use bytes::{Bytes, BytesMut};
use ldap3_proto::proto::LdapMsg;
use ldap3_proto::LdapCodec;
use std::io;
use tokio_util::codec::{Decoder, Encoder};

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
    inner: LdapCodec,
    pdu_bytes_max: usize,
}

impl PduCodec {
    pub fn new(pdu_bytes_max: usize, ber_depth_max: usize) -> Self {
        PduCodec {
            // The inner limit counts the header too; ours counts the announced content.
            inner: LdapCodec::new(Some(pdu_bytes_max + 16), Some(ber_depth_max)),
            pdu_bytes_max,
        }
    }
}

/// Reads the outer TLV header; returns the announced content length when enough bytes are there.
fn announced_length(buffer: &[u8]) -> Result<Option<u64>, PduError> {
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
        return Ok(Some(u64::from(length_byte)));
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
    Ok(Some(
        length_bytes
            .iter()
            .fold(0u64, |total, byte| (total << 8) | u64::from(*byte)),
    ))
}

impl Decoder for PduCodec {
    type Item = LdapMsg;
    type Error = PduError;

    fn decode(&mut self, buffer: &mut BytesMut) -> Result<Option<LdapMsg>, PduError> {
        match announced_length(buffer)? {
            None => return Ok(None),
            Some(length) if length > self.pdu_bytes_max as u64 => {
                return Err(PduError::TooLarge {
                    announced_bytes: length,
                    limit_bytes: self.pdu_bytes_max,
                })
            }
            Some(_) => {}
        }
        self.inner
            .decode(buffer)
            .map_err(|error| PduError::Malformed(error.to_string()))
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
    fn a_valid_unbind_decodes() {
        let mut codec = PduCodec::new(1024, 32);
        // LDAPMessage { messageID 1, unbindRequest [APPLICATION 2] NULL }
        let mut buffer = BytesMut::from(&[0x30u8, 0x05, 0x02, 0x01, 0x01, 0x42, 0x00][..]);
        let message = codec.decode(&mut buffer).expect("decode").expect("message");
        assert_eq!(message.msgid, 1);
    }
}
