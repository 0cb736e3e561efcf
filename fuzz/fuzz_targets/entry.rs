//! The stored-entry decoder on arbitrary bytes (both format versions): validation must reject
//! anything that the infallible iteration afterwards could trip over, and computed normalized
//! forms never take more memory than the record's own originals.
#![no_main]

use std::cell::OnceCell;

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
            let computed = OnceCell::new();
            let mut original_bytes = 0;
            for ((original, normalized), (slice_original, slice_normalized)) in
                attribute.values().zip(attribute.slice_values(&computed))
            {
                assert_eq!(original, slice_original);
                assert!(normalized == slice_normalized, "both views agree");
                original_bytes += original.len();
            }
            let allocated = computed.get().map_or(0, Vec::len);
            assert!(allocated <= original_bytes && allocated <= data.len());
        }
        assert_eq!(
            attributes,
            entry.attribute_count(),
            "attribute count of a validated entry"
        );
    }
});
