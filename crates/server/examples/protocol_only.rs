//! A measuring instrument, not a server: answers LDAP over TCP with no directory behind it, to
//! find the rate ceiling a load generator reaches on this machine (`bench/serve-vs-openldap.sh`
//! with `CEILING=1`). Every bind succeeds; every search returns one entry, a person of the
//! benchmark data's shape with the `cn` the searchrate asks for, then success; other requests
//! get `unwillingToPerform`; an unbind closes. It decodes only the envelope (message ID and
//! operation tag), frames with lmdir's own framing and writes with the same BER writer, on
//! lmdir's own tokio runtime (`server::runtime`): what is left of lmdir's cost per operation
//! is the directory's own work.
//!
//! Usage: cargo run --release -p lmdir-server --example protocol_only -- 127.0.0.1:PORT

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use lmdir_server::ber::{self, tag, EntryWriter, ResultFields};
use lmdir_server::ber_read::{integer, read_tlv};
use lmdir_server::pdu::take_frame;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, Encoder, Framed};

/// Largest request accepted (the instrument answers benchmark traffic only).
const REQUEST_BYTES_MAX: usize = 64 * 1024;
/// The entry every search returns: the benchmark data's shape (`lmdir gen`).
const ENTRY_DN: &[u8] = b"uid=u0012345,ou=People,dc=example,dc=com";
const ENTRY_CN: &[u8] = b"Hannelore Abernathy-Quint";

/// Frames whole LDAPMessages with the server's own framing (`pdu::take_frame`) and passes
/// `Bytes` through on the way out.
struct Envelopes;

impl Decoder for Envelopes {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, buffer: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        take_frame(buffer, REQUEST_BYTES_MAX).map_err(|error| invalid(&error.to_string()))
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

/// The message ID and the protocolOp's tag of one LDAPMessage (`ber_read`, as the server
/// reads them).
fn envelope(message: &[u8]) -> Result<(i32, u8), std::io::Error> {
    let (sequence, _) = read_tlv(message).ok_or_else(|| invalid("malformed message"))?;
    let (id, rest) = read_tlv(sequence.content)
        .filter(|(id, _)| id.tag == tag::INTEGER)
        .ok_or_else(|| invalid("no message ID"))?;
    let message_id = integer(id.content)
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| invalid("bad message ID"))?;
    let (operation, _) = read_tlv(rest).ok_or_else(|| invalid("no operation"))?;
    Ok((message_id, operation.tag))
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
    let runtime = lmdir_server::server::runtime()?;
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
