//! The server's PDU framing and decoding (size guard, strict envelope, our controls decoder,
//! our search request decoder, ldap3_proto for the other operations) on arbitrary bytes, then
//! what the server does with a decoded search filter: decode it under the default limits, log it.
#![no_main]

use bytes::BytesMut;
use lmdir_server::request::Operation;
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
        if let Operation::Search(request) = &message.op {
            let settings = lmdir_server::settings::ServerSettings::with_defaults(Vec::new());
            let _ = lmdir_server::filter::client_filter(&settings, &request.filter);
            let _ = lmdir_server::filter_text::to_log_string(&request.filter, 1024);
        }
    }
});
