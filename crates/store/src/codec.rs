//! Entry codec: the `id2entry` value.
//!
//! Layout: version byte, varint attribute count, then per attribute its description number
//! (from `meta`'s description table), varint value count, and per value: varint original length,
//! varint normalized code (0 = normalized form identical to the original, else length + 1), the
//! original bytes, then the normalized bytes when they differ. The DN is not stored (it lives in
//! the DN tree). Decoding borrows from the input (the LMDB map): no copy.

use crate::layout::{push_varint, read_varint};

pub const ENTRY_FORMAT_VERSION: u8 = 1;
/// Limits that keep a corrupt or hostile record from exhausting memory while decoding.
pub const ATTRIBUTES_PER_ENTRY_MAX: usize = 1 << 16;
pub const VALUES_PER_ATTRIBUTE_MAX: usize = 1 << 24;

/// One attribute to encode: its description number and its (original, normalized) values.
pub struct AttributeToEncode<'a> {
    pub description_number: u32,
    pub values: &'a [(Vec<u8>, Vec<u8>)],
}

/// Encodes an entry into `out` (cleared first). Refuses, writing nothing, what
/// [`EncodedEntry::parse`] would reject (more than [`ATTRIBUTES_PER_ENTRY_MAX`] attributes or
/// [`VALUES_PER_ATTRIBUTE_MAX`] values in one): a record that cannot be read back would make
/// the entry unreadable, undeletable and fail `lmdir check`.
pub fn encode_entry(
    attributes: &[AttributeToEncode<'_>],
    out: &mut Vec<u8>,
) -> Result<(), CorruptEntry> {
    out.clear();
    if attributes.len() > ATTRIBUTES_PER_ENTRY_MAX {
        return Err(CorruptEntry {
            position: 0,
            reason: "too many attributes",
        });
    }
    if attributes
        .iter()
        .any(|attribute| attribute.values.len() > VALUES_PER_ATTRIBUTE_MAX)
    {
        return Err(CorruptEntry {
            position: 0,
            reason: "too many values",
        });
    }
    out.push(ENTRY_FORMAT_VERSION);
    push_varint(attributes.len() as u64, out);
    for attribute in attributes {
        push_varint(attribute.description_number as u64, out);
        push_varint(attribute.values.len() as u64, out);
        for (original, normalized) in attribute.values {
            push_varint(original.len() as u64, out);
            if original == normalized {
                push_varint(0, out);
                out.extend_from_slice(original);
            } else {
                push_varint(normalized.len() as u64 + 1, out);
                out.extend_from_slice(original);
                out.extend_from_slice(normalized);
            }
        }
    }
    Ok(())
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("corrupt entry record at byte {position}: {reason}")]
pub struct CorruptEntry {
    pub position: usize,
    pub reason: &'static str,
}

/// A validated encoded entry; iteration cannot fail.
#[derive(Clone, Copy, Debug)]
pub struct EncodedEntry<'a> {
    bytes: &'a [u8],
    attribute_count: usize,
    body_start: usize,
}

impl<'a> EncodedEntry<'a> {
    /// Validates the whole record once so later iteration is infallible.
    pub fn parse(bytes: &'a [u8]) -> Result<EncodedEntry<'a>, CorruptEntry> {
        let corrupt = |position, reason| CorruptEntry { position, reason };
        if bytes.first() != Some(&ENTRY_FORMAT_VERSION) {
            return Err(corrupt(0, "unknown format version"));
        }
        let mut position = 1;
        let attribute_count = read_varint(bytes, &mut position)
            .ok_or(corrupt(position, "truncated attribute count"))?
            as usize;
        if attribute_count > ATTRIBUTES_PER_ENTRY_MAX {
            return Err(corrupt(position, "too many attributes"));
        }
        let body_start = position;
        for _ in 0..attribute_count {
            let number = read_varint(bytes, &mut position)
                .ok_or(corrupt(position, "truncated description number"))?;
            if number > u32::MAX as u64 {
                return Err(corrupt(position, "description number above u32"));
            }
            let value_count = read_varint(bytes, &mut position)
                .ok_or(corrupt(position, "truncated value count"))?
                as usize;
            if value_count > VALUES_PER_ATTRIBUTE_MAX {
                return Err(corrupt(position, "too many values"));
            }
            for _ in 0..value_count {
                let original_length = read_varint(bytes, &mut position)
                    .ok_or(corrupt(position, "truncated value length"))?;
                let normalized_code = read_varint(bytes, &mut position)
                    .ok_or(corrupt(position, "truncated normalized length"))?;
                let total = original_length
                    .checked_add(normalized_code.saturating_sub(1))
                    .ok_or(corrupt(position, "length overflow"))?;
                if total > (bytes.len() - position) as u64 {
                    return Err(corrupt(position, "value runs past the record"));
                }
                position += total as usize;
            }
        }
        if position != bytes.len() {
            return Err(corrupt(position, "trailing bytes"));
        }
        Ok(EncodedEntry {
            bytes,
            attribute_count,
            body_start,
        })
    }

    pub fn attribute_count(&self) -> usize {
        self.attribute_count
    }

    pub fn attributes(&self) -> EncodedAttributes<'a> {
        EncodedAttributes {
            bytes: self.bytes,
            position: self.body_start,
            remaining: self.attribute_count,
        }
    }
}

/// Iterator over the attributes of a validated entry.
#[derive(Clone, Debug)]
pub struct EncodedAttributes<'a> {
    bytes: &'a [u8],
    position: usize,
    remaining: usize,
}

impl<'a> Iterator for EncodedAttributes<'a> {
    type Item = EncodedAttribute<'a>;

    fn next(&mut self) -> Option<EncodedAttribute<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let description_number = read_varint(self.bytes, &mut self.position)? as u32;
        let value_count = read_varint(self.bytes, &mut self.position)? as usize;
        let values_start = self.position;
        // Skip the values to position the next attribute.
        for _ in 0..value_count {
            let original_length = read_varint(self.bytes, &mut self.position)? as usize;
            let normalized_code = read_varint(self.bytes, &mut self.position)? as usize;
            self.position += original_length + normalized_code.saturating_sub(1);
        }
        Some(EncodedAttribute {
            description_number,
            value_count,
            bytes: self.bytes,
            values_start,
        })
    }
}

/// One attribute of an encoded entry.
#[derive(Clone, Copy, Debug)]
pub struct EncodedAttribute<'a> {
    pub description_number: u32,
    pub value_count: usize,
    bytes: &'a [u8],
    values_start: usize,
}

impl<'a> EncodedAttribute<'a> {
    /// (original, normalized) pairs, borrowed from the record.
    pub fn values(&self) -> EncodedValues<'a> {
        EncodedValues {
            bytes: self.bytes,
            position: self.values_start,
            remaining: self.value_count,
        }
    }
}

#[derive(Clone, Debug)]
pub struct EncodedValues<'a> {
    bytes: &'a [u8],
    position: usize,
    remaining: usize,
}

impl<'a> Iterator for EncodedValues<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let original_length = read_varint(self.bytes, &mut self.position)? as usize;
        let normalized_code = read_varint(self.bytes, &mut self.position)? as usize;
        let original = &self.bytes[self.position..self.position + original_length];
        self.position += original_length;
        if normalized_code == 0 {
            return Some((original, original));
        }
        let normalized = &self.bytes[self.position..self.position + normalized_code - 1];
        self.position += normalized_code - 1;
        Some((original, normalized))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_corrupt_records() {
        let values = vec![(b"Foo".to_vec(), b"foo".to_vec())];
        let mut bytes = Vec::new();
        encode_entry(
            &[AttributeToEncode {
                description_number: 3,
                values: &values,
            }],
            &mut bytes,
        )
        .expect("encodable");
        assert!(EncodedEntry::parse(&bytes).is_ok());
        for cut in 0..bytes.len() {
            assert!(EncodedEntry::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(EncodedEntry::parse(&trailing).is_err());
    }

    /// The invariant: whatever the encoder writes, the decoder reads; what the decoder would
    /// reject, the encoder refuses (at the exact bounds).
    #[test]
    fn encoder_refuses_exactly_what_the_decoder_rejects() {
        let one_value = vec![(b"x".to_vec(), b"x".to_vec())];
        let attributes = |count: usize| -> Vec<AttributeToEncode<'_>> {
            (0..count)
                .map(|number| AttributeToEncode {
                    description_number: number as u32,
                    values: &one_value,
                })
                .collect()
        };
        let mut bytes = Vec::new();
        encode_entry(&attributes(ATTRIBUTES_PER_ENTRY_MAX), &mut bytes).expect("at the bound");
        let parsed = EncodedEntry::parse(&bytes).expect("decodes");
        assert_eq!(parsed.attribute_count(), ATTRIBUTES_PER_ENTRY_MAX);
        let refused = encode_entry(&attributes(ATTRIBUTES_PER_ENTRY_MAX + 1), &mut bytes);
        assert_eq!(
            refused.map_err(|error| error.reason),
            Err("too many attributes")
        );
        assert!(bytes.is_empty(), "nothing written on refusal");
        // The values bound is the same check on `values.len()`; 2^24 value pairs would take
        // ~800 MB to build here.
    }
}
