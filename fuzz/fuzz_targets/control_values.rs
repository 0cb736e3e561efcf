//! Each control value decoder on arbitrary bytes (the first byte picks the decoder): paged
//! results, server-side sort, assertion, pre/post-read, matched values. Nothing may panic, and what is accepted
//! must respect the decoders' own rules and limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_server::controls::{self, PRE_READ_OID, READ_CONTROL_ATTRIBUTES_MAX};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, value)) = data.split_first() else {
        return;
    };
    match selector % 5 {
        0 => {
            if let Ok((size, _cookie)) = controls::decode_paged(Some(value)) {
                assert!((0..=i64::from(i32::MAX)).contains(&size), "page size {size}");
            }
        }
        1 => {
            if let Ok(keys) = controls::decode_sort(Some(value)) {
                assert!(!keys.is_empty());
            }
        }
        2 => {
            if let Ok(filter) = controls::decode_assertion(Some(value)) {
                // What the server does next with an assertion: decode it under the default
                // limits, and log it.
                let settings = lmdir_server::settings::ServerSettings::with_defaults(Vec::new());
                let _ = lmdir_server::filter::client_filter(&settings, &filter);
                let _ = lmdir_server::filter_text::to_log_string(&filter, 1024);
            }
        }
        3 => {
            if let Ok(items) = lmdir_server::matched_values::decode(Some(value)) {
                let limit = lmdir_server::matched_values::MATCHED_VALUES_ITEMS_MAX;
                assert!(!items.is_empty() && items.len() <= limit);
            }
        }
        _ => {
            if let Ok(attributes) = controls::decode_attribute_list(PRE_READ_OID, Some(value)) {
                assert!(attributes.len() <= READ_CONTROL_ATTRIBUTES_MAX);
            }
        }
    }
});
