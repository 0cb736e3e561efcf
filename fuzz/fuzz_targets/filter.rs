//! The RFC 4515 filter parser; a filter that parses must print back to text that parses again
//! to the same filter.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_schema::Filter;

const FILTER_DEPTH_MAX: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(filter) = Filter::parse(text, FILTER_DEPTH_MAX) {
        let printed = filter.to_string();
        let reparsed = Filter::parse(&printed, FILTER_DEPTH_MAX).unwrap_or_else(|error| {
            panic!("{text:?} printed as {printed:?} does not parse: {error}")
        });
        assert_eq!(
            reparsed.to_string(),
            printed,
            "printing is not stable for {text:?}"
        );
    }
});
