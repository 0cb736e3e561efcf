//! Entry codec: encode → decode is the identity for any attributes and values, whichever
//! normalized code a value gets (same, ASCII lowercase of the original, stored), and records of
//! the first format version keep decoding.

use std::cell::OnceCell;

use lmdir_store::codec::{
    encode_entry, AttributeToEncode, EncodedEntry, ENTRY_FORMAT_VERSION,
    ENTRY_FORMAT_VERSION_EXPLICIT_NORMALIZED,
};
use lmdir_store::layout::push_varint;
use proptest::prelude::*;

type Attributes = Vec<(u32, Vec<(Vec<u8>, Vec<u8>)>)>;

/// Normalized forms of each kind the encoder distinguishes: identical, the ASCII lowercase (the
/// original drawn from a cased alphabet so it often differs), and arbitrary bytes.
fn value() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    let original = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        prop::collection::vec(prop::sample::select(b"aAzZ 0\xc3\x84".to_vec()), 0..60),
    ];
    (original, 0..3u8, prop::collection::vec(any::<u8>(), 0..40)).prop_map(
        |(original, kind, other)| {
            let normalized = match kind {
                0 => original.clone(),
                1 => original.to_ascii_lowercase(),
                _ => other,
            };
            (original, normalized)
        },
    )
}

fn attributes() -> impl Strategy<Value = Attributes> {
    prop::collection::vec((any::<u32>(), prop::collection::vec(value(), 0..6)), 0..12)
}

fn decode(bytes: &[u8]) -> Attributes {
    EncodedEntry::parse(bytes)
        .unwrap()
        .attributes()
        .map(|attribute| {
            let computed = OnceCell::new();
            let slices: Vec<(Vec<u8>, Vec<u8>)> = attribute
                .slice_values(&computed)
                .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
                .collect();
            let values: Vec<(Vec<u8>, Vec<u8>)> = attribute
                .values()
                .map(|(original, normalized)| {
                    assert!(
                        normalized == normalized.to_cow().as_ref(),
                        "compare = bytes"
                    );
                    (original.to_vec(), normalized.to_vec())
                })
                .collect();
            assert_eq!(slices, values, "both value views agree");
            (attribute.description_number, values)
        })
        .collect()
}

/// The first format, written as it was: normalized bytes stored whenever they differ (n + 1).
fn encode_version_one(attributes: &Attributes) -> Vec<u8> {
    let mut out = vec![ENTRY_FORMAT_VERSION_EXPLICIT_NORMALIZED];
    push_varint(attributes.len() as u64, &mut out);
    for (number, values) in attributes {
        push_varint(*number as u64, &mut out);
        push_varint(values.len() as u64, &mut out);
        for (original, normalized) in values {
            push_varint(original.len() as u64, &mut out);
            let stored = original != normalized;
            push_varint(
                if stored {
                    normalized.len() as u64 + 1
                } else {
                    0
                },
                &mut out,
            );
            out.extend_from_slice(original);
            if stored {
                out.extend_from_slice(normalized);
            }
        }
    }
    out
}

fn varint_length(value: u64) -> usize {
    (64 - value.max(1).leading_zeros() as usize).div_ceil(7)
}

/// The bytes version 1 spends on an attribute's values (headers included): at least what
/// version 4 spends, so its varint is at least as long as version 4's values length.
fn version_one_values_length(values: &[(Vec<u8>, Vec<u8>)]) -> usize {
    values
        .iter()
        .map(|(original, normalized)| {
            let stored = if original == normalized {
                0
            } else {
                normalized.len()
            };
            let code = if original == normalized {
                0
            } else {
                stored as u64 + 1
            };
            varint_length(original.len() as u64) + varint_length(code) + original.len() + stored
        })
        .sum()
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(attributes in attributes()) {
        let to_encode: Vec<AttributeToEncode<'_>> = attributes
            .iter()
            .map(|(number, values)| AttributeToEncode { description_number: *number, values, out_of_line: None })
            .collect();
        let mut bytes = Vec::new();
        encode_entry(&to_encode, &mut bytes).expect("encodable");
        prop_assert_eq!(bytes[0], ENTRY_FORMAT_VERSION);
        prop_assert_eq!(EncodedEntry::parse(&bytes).unwrap().attribute_count(), attributes.len());
        prop_assert_eq!(decode(&bytes), attributes.clone());
        // Never larger than the first format but for what version 4 adds per attribute: the
        // values byte length and the out-of-line bit of the count.
        let version_one = encode_version_one(&attributes);
        let added: usize = attributes
            .iter()
            .map(|(_, values)| {
                let values_bytes = version_one_values_length(values);
                varint_length(values_bytes as u64) + varint_length((values.len() as u64) << 1)
                    - varint_length(values.len() as u64)
            })
            .sum();
        prop_assert!(bytes.len() <= version_one.len() + added);
    }

    #[test]
    fn version_one_records_decode_to_the_same_values(attributes in attributes()) {
        prop_assert_eq!(decode(&encode_version_one(&attributes)), attributes);
    }

    #[test]
    fn decoding_garbage_never_panics(
        version in prop::sample::select(vec![1u8, 2, 3, 4]),
        mut bytes in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        bytes.insert(0, version);
        if let Ok(entry) = EncodedEntry::parse(&bytes) {
            for attribute in entry.attributes() {
                let computed = OnceCell::new();
                let mut computed_bytes = 0;
                for (original, normalized) in attribute.slice_values(&computed) {
                    prop_assert!(normalized.len() <= bytes.len());
                    computed_bytes += original.len();
                }
                // What decoding may allocate is bounded by the record's own size.
                prop_assert!(computed.get().map_or(0, Vec::len) <= computed_bytes.min(bytes.len()));
                for (_, normalized) in attribute.values() {
                    let _ = normalized.to_cow();
                }
            }
        }
    }
}
