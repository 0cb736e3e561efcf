//! Entry codec: encode → decode is the identity for any attributes and values.

use lmdir_store::codec::{encode_entry, AttributeToEncode, EncodedEntry};
use proptest::prelude::*;

type Attributes = Vec<(u32, Vec<(Vec<u8>, Vec<u8>)>)>;

fn attributes() -> impl Strategy<Value = Attributes> {
    let value = (
        prop::collection::vec(any::<u8>(), 0..300),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..40)),
    )
        .prop_map(|(original, normalized)| {
            let normalized = normalized.unwrap_or_else(|| original.clone());
            (original, normalized)
        });
    prop::collection::vec((any::<u32>(), prop::collection::vec(value, 0..6)), 0..12)
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(attributes in attributes()) {
        let to_encode: Vec<AttributeToEncode<'_>> = attributes
            .iter()
            .map(|(number, values)| AttributeToEncode { description_number: *number, values })
            .collect();
        let mut bytes = Vec::new();
        encode_entry(&to_encode, &mut bytes).expect("encodable");
        let decoded = EncodedEntry::parse(&bytes).unwrap();
        prop_assert_eq!(decoded.attribute_count(), attributes.len());
        let round_trip: Attributes = decoded
            .attributes()
            .map(|attribute| {
                (
                    attribute.description_number,
                    attribute.values().map(|(original, normalized)| (original.to_vec(), normalized.to_vec())).collect(),
                )
            })
            .collect();
        prop_assert_eq!(round_trip, attributes);
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(entry) = EncodedEntry::parse(&bytes) {
            for attribute in entry.attributes() {
                for _ in attribute.values() {}
            }
        }
    }
}
