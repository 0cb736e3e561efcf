//! The stored-entry decoder on arbitrary bytes: validation must reject anything that the
//! infallible iteration afterwards could trip over.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_store::codec::EncodedEntry;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = EncodedEntry::parse(data) {
        let mut attributes = 0;
        for attribute in entry.attributes() {
            attributes += 1;
            let values = attribute.values().count();
            assert_eq!(
                values, attribute.value_count,
                "value count of a validated entry"
            );
        }
        assert_eq!(
            attributes,
            entry.attribute_count(),
            "attribute count of a validated entry"
        );
    }
});
