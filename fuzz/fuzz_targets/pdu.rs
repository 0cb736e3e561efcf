//! The server's PDU framing and decoding (size guard, strict envelope, our controls decoder,
//! ldap3_proto for the operation) on arbitrary bytes, then what the server does with a decoded
//! search filter: depth, text form, and parse.
#![no_main]

use bytes::BytesMut;
use ldap3_proto::proto::LdapOp;
use libfuzzer_sys::fuzz_target;
use lmdir_server::pdu::PduCodec;
use tokio_util::codec::Decoder;

/// As the server's defaults: 16 MiB PDUs, filter depth 64 (+32 BER levels for the envelope).
const PDU_BYTES_MAX: usize = 16 * 1024 * 1024;
const FILTER_DEPTH_MAX: usize = 64;

fuzz_target!(|data: &[u8]| {
    let mut codec = PduCodec::new(PDU_BYTES_MAX, FILTER_DEPTH_MAX + 32);
    let mut buffer = BytesMut::from(data);
    // Several PDUs may be in one buffer; stop at the first error or when more bytes are needed.
    for _ in 0..64 {
        let Ok(Some(message)) = codec.decode(&mut buffer) else {
            break;
        };
        if let LdapOp::SearchRequest(request) = &message.op {
            let depth = lmdir_server::filter_text::depth(&request.filter);
            if depth <= FILTER_DEPTH_MAX {
                let text = lmdir_server::filter_text::to_string(&request.filter);
                let _ = lmdir_schema::Filter::parse(&text, FILTER_DEPTH_MAX);
            }
        }
    }
});
