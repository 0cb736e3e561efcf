//! The LDIF record parser on arbitrary bytes (file URLs off, as for untrusted input).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_ldif::{parse_record, ParseOptions};

fuzz_target!(|data: &[u8]| {
    let options = ParseOptions {
        allow_file_urls: false,
        ..ParseOptions::default()
    };
    let _ = parse_record(data, 1, &options);
});
