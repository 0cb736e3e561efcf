//! A measuring instrument, not a server: answers LDAP over TCP with no directory behind it, to
//! find the rate ceiling a load generator reaches on this machine (`bench/serve-vs-openldap.sh`
//! with `CEILING=1`). Every bind succeeds; every search returns one entry, a person of the
//! benchmark data's shape with the `cn` the searchrate asks for, then success; other requests
//! get `unwillingToPerform`; an unbind closes. It decodes only the envelope (message ID and
//! operation tag), frames with the same codec as lmdir and writes with the same BER writer, on
//! a tokio runtime of as many workers as lmdir's: what is left of lmdir's cost per operation
//! is the directory's own work.
//!
//! Usage: cargo run --release -p lmdir-server --example protocol_only -- 127.0.0.1:PORT

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use lmdir_server::ber::{self, tag, EntryWriter, ResultFields};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, Encoder, Framed};

/// Largest request accepted (the instrument answers benchmark traffic only).
const REQUEST_BYTES_MAX: usize = 64 * 1024;
/// The entry every search returns: the benchmark data's shape (`lmdir gen`).
const ENTRY_DN: &[u8] = b"uid=u0012345,ou=People,dc=example,dc=com";
const ENTRY_CN: &[u8] = b"Hannelore Abernathy-Quint";

/// Frames whole LDAPMessages (a tag, a definite length, the content) and passes `Bytes`
/// through on the way out.
struct Envelopes;

impl Decoder for Envelopes {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, buffer: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        let Some((header_bytes, content_bytes)) = definite_length(buffer)? else {
            return Ok(None);
        };
        let total_bytes = header_bytes + content_bytes;
        if total_bytes > REQUEST_BYTES_MAX {
            return Err(invalid("request over 64 KiB"));
        }
        if buffer.len() < total_bytes {
            buffer.reserve(total_bytes - buffer.len());
            return Ok(None);
        }
        Ok(Some(buffer.split_to(total_bytes)))
    }
}

impl Encoder<Bytes> for Envelopes {
    type Error = std::io::Error;

    fn encode(&mut self, item: Bytes, buffer: &mut BytesMut) -> Result<(), std::io::Error> {
        buffer.extend_from_slice(&item);
        Ok(())
    }
}

fn invalid(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message.to_string())
}

/// (header bytes, content bytes) of the element at the start of `bytes`; None until complete.
fn definite_length(bytes: &[u8]) -> Result<Option<(usize, usize)>, std::io::Error> {
    let Some(&first) = bytes.get(1) else {
        return Ok(None);
    };
    if first < 0x80 {
        return Ok(Some((2, usize::from(first))));
    }
    let count = usize::from(first & 0x7f);
    if count == 0 || count > 4 {
        return Err(invalid("length form not supported"));
    }
    let Some(length_bytes) = bytes.get(2..2 + count) else {
        return Ok(None);
    };
    let content = length_bytes
        .iter()
        .fold(0usize, |length, byte| (length << 8) | usize::from(*byte));
    Ok(Some((2 + count, content)))
}

/// The message ID and the protocolOp's tag of one LDAPMessage.
fn envelope(message: &[u8]) -> Result<(i32, u8), std::io::Error> {
    let (header_bytes, _) = definite_length(message)?.ok_or_else(|| invalid("short message"))?;
    let id = message
        .get(header_bytes..)
        .filter(|rest| rest.first() == Some(&tag::INTEGER))
        .ok_or_else(|| invalid("no message ID"))?;
    let id_bytes = usize::from(*id.get(1).ok_or_else(|| invalid("short message ID"))?);
    let digits = id
        .get(2..2 + id_bytes)
        .filter(|digits| (1..=4).contains(&digits.len()))
        .ok_or_else(|| invalid("bad message ID"))?;
    let message_id = digits
        .iter()
        .fold(0i32, |id, byte| (id << 8) | i32::from(*byte));
    let operation = *id
        .get(2 + id_bytes)
        .ok_or_else(|| invalid("no operation"))?;
    Ok((message_id, operation))
}

/// The response bytes to one request; None for an unbind.
fn respond(message_id: i32, operation: u8) -> Option<Bytes> {
    const BIND_REQUEST: u8 = 0x60;
    const UNBIND_REQUEST: u8 = 0x42;
    const SEARCH_REQUEST: u8 = 0x63;
    let success = ResultFields {
        code: 0,
        matched_dn: "",
        message: "",
    };
    let mut buffer = BytesMut::with_capacity(160);
    match operation {
        UNBIND_REQUEST => return None,
        BIND_REQUEST => {
            ber::write_result_message(&mut buffer, message_id, tag::BIND_RESPONSE, &success, &[])
        }
        SEARCH_REQUEST => {
            let mut entry = EntryWriter::begin(&mut buffer, message_id, ENTRY_DN);
            entry.attribute(b"cn", [ENTRY_CN]);
            entry.finish(&[]);
            let done = tag::SEARCH_RESULT_DONE;
            ber::write_result_message(&mut buffer, message_id, done, &success, &[]);
        }
        _ => {
            let refused = ResultFields {
                code: 53,
                matched_dn: "",
                message: "protocol-only responder",
            };
            let done = tag::EXTENDED_RESPONSE;
            ber::write_result_message(&mut buffer, message_id, done, &refused, &[]);
        }
    }
    Some(buffer.freeze())
}

async fn serve(stream: TcpStream) -> Result<(), std::io::Error> {
    stream.set_nodelay(true)?;
    let mut framed = Framed::new(stream, Envelopes);
    while let Some(message) = framed.next().await {
        let (message_id, operation) = envelope(&message?)?;
        match respond(message_id, operation) {
            Some(response) => framed.send(response).await?,
            None => return Ok(()),
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address = std::env::args()
        .nth(1)
        .ok_or("usage: protocol_only ADDRESS:PORT")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(&address).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(async move {
                if let Err(error) = serve(stream).await {
                    eprintln!("protocol_only: connection ended: {error}");
                }
            });
        }
    })
}
