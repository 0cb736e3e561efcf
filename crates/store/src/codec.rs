//! Entry codec: the `id2entry` value.
//!
//! Layout: version byte, varint attribute count, then per attribute its description number
//! (from `meta`'s description table), varint value count, and per value: varint original length,
//! varint normalized code, the original bytes, then the normalized bytes when the code says they
//! are stored. The DN is not stored (it lives in the DN tree).
//!
//! Normalized codes in version 2 (written today): 0 = normalized form identical to the original,
//! 1 = normalized form is the ASCII lowercase of the original (not stored: computed when asked
//! for), n + 2 = n normalized bytes follow the original. Version 1 (still read, never written)
//! has only 0 and n + 1. Code 1 exists because case-ignoring rules (caseIgnoreMatch and kin)
//! turn most values into exactly their ASCII lowercase: on the large benchmark profile those
//! copies were 36 % of id2entry's bytes (descriptions of 200..600 characters stored twice), and
//! dropping them keeps records under LMDB's overflow threshold (~2 KB on 4 KiB pages).
//!
//! Version 3 is version 2 with each value count written as `count << 1 | out_of_line`: an
//! out-of-line attribute (`layout::is_out_of_line`) keeps only its description number and value
//! count here (a marker), its values being `id2value` rows (`layout::encode_value_row`).
//!
//! Version 4 (written today, store format 3) is version 3 with, after an inline attribute's
//! count, the varint byte length of its values: a walk over the attributes (a filter looking
//! for `uid`, a reader sending only `cn`, a bind reading `userPassword`) steps over each
//! attribute in one read instead of reading every value's header. Versions 1 to 3 are still
//! read (stores of format 2, upgraded in place, keep their records until rewritten).
//!
//! Decoding borrows from the input (the LMDB map): no copy. Only a code-1 normalized value is
//! computed, on demand ([`NormalizedValue`]), into a buffer no longer than its original, so a
//! corrupt record cannot make the decoder allocate more than the record's own size.

use std::borrow::Cow;
use std::cell::OnceCell;

use crate::layout::{push_varint, read_varint};

/// The version `encode_entry` writes: attributes carry their values' byte length.
pub const ENTRY_FORMAT_VERSION: u8 = 4;
/// Written before version 4 when every attribute was inline; still decoded.
pub const ENTRY_FORMAT_VERSION_UNCOUNTED: u8 = 2;
/// Written before version 4 when an attribute lived out of line; still decoded.
pub const ENTRY_FORMAT_VERSION_OUT_OF_LINE: u8 = 3;
/// The first format (normalized values always stored when they differ); still decoded.
pub const ENTRY_FORMAT_VERSION_EXPLICIT_NORMALIZED: u8 = 1;
/// Limits that keep a corrupt or hostile record from exhausting memory while decoding.
pub const ATTRIBUTES_PER_ENTRY_MAX: usize = 1 << 16;
pub const VALUES_PER_ATTRIBUTE_MAX: usize = 1 << 24;

const CODE_SAME: u64 = 0;
const CODE_ASCII_LOWERCASE: u64 = 1;
const CODE_STORED_OFFSET: u64 = 2;

/// One attribute to encode: its description number and its (original, normalized) values;
/// when `out_of_line` is `Some(count)`, only the marker (number, count) is written and
/// `values` is not read, the values being `id2value` rows (the caller writes those).
pub struct AttributeToEncode<'a> {
    pub description_number: u32,
    pub values: &'a [(Vec<u8>, Vec<u8>)],
    pub out_of_line: Option<usize>,
}

impl AttributeToEncode<'_> {
    fn value_count(&self) -> usize {
        self.out_of_line.unwrap_or(self.values.len())
    }
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
        .any(|attribute| attribute.value_count() > VALUES_PER_ATTRIBUTE_MAX)
    {
        return Err(CorruptEntry {
            position: 0,
            reason: "too many values",
        });
    }
    if attributes
        .iter()
        .any(|attribute| attribute.out_of_line == Some(0))
    {
        return Err(CorruptEntry {
            position: 0,
            reason: "an out-of-line attribute without values",
        });
    }
    out.push(ENTRY_FORMAT_VERSION);
    push_varint(attributes.len() as u64, out);
    for attribute in attributes {
        push_varint(attribute.description_number as u64, out);
        let count = attribute.value_count() as u64;
        push_varint(count << 1 | u64::from(attribute.out_of_line.is_some()), out);
        if attribute.out_of_line.is_none() {
            encode_counted_values(attribute.values, out);
        }
    }
    Ok(())
}

/// An inline attribute's values preceded by their byte length (version 4): written first, the
/// length's varint then rotated in front of them.
fn encode_counted_values(values: &[(Vec<u8>, Vec<u8>)], out: &mut Vec<u8>) {
    let start = out.len();
    encode_values(values, out);
    let length = (out.len() - start) as u64;
    let before = out.len();
    push_varint(length, out);
    let length_bytes = out.len() - before;
    out[start..].rotate_right(length_bytes);
}

fn encode_values(values: &[(Vec<u8>, Vec<u8>)], out: &mut Vec<u8>) {
    for (original, normalized) in values {
        push_varint(original.len() as u64, out);
        if original == normalized {
            push_varint(CODE_SAME, out);
            out.extend_from_slice(original);
        } else if is_ascii_lowercase_of(original, normalized) {
            push_varint(CODE_ASCII_LOWERCASE, out);
            out.extend_from_slice(original);
        } else {
            push_varint(normalized.len() as u64 + CODE_STORED_OFFSET, out);
            out.extend_from_slice(original);
            out.extend_from_slice(normalized);
        }
    }
}

fn is_ascii_lowercase_of(original: &[u8], normalized: &[u8]) -> bool {
    original.len() == normalized.len()
        && original
            .iter()
            .zip(normalized)
            .all(|(original, normalized)| original.to_ascii_lowercase() == *normalized)
}

/// Stored normalized bytes for a code: `code - offset` where the offset is 1 in version 1 and 2
/// in version 2, none below it (0 = same as the original; 1 in version 2 = ASCII lowercase, in
/// version 1 an empty stored form). One subtraction, so skipping values stays as cheap as in
/// version 1.
#[inline]
fn stored_length(code: u64, stored_offset: u64) -> u64 {
    code.saturating_sub(stored_offset)
}

fn stored_offset(version: u8) -> u64 {
    if version == ENTRY_FORMAT_VERSION_EXPLICIT_NORMALIZED {
        1
    } else {
        CODE_STORED_OFFSET
    }
}

/// Reads one value's header, leaving `position` after the value; returns the original's start,
/// its length and the normalized code. Only called on records `parse` validated.
#[inline]
fn read_value(
    bytes: &[u8],
    stored_offset: u64,
    position: &mut usize,
) -> Option<(usize, usize, u64)> {
    let original_length = read_varint(bytes, position)? as usize;
    let code = read_varint(bytes, position)?;
    let start = *position;
    *position = start + original_length + stored_length(code, stored_offset) as usize;
    Some((start, original_length, code))
}

/// The normalized form of a stored value: borrowed from the record, or the ASCII lowercase of
/// the original, computed only when asked for (most readers send originals only).
#[derive(Clone, Copy, Debug)]
pub enum NormalizedValue<'a> {
    Stored(&'a [u8]),
    AsciiLowercaseOf(&'a [u8]),
}

impl<'a> NormalizedValue<'a> {
    /// The bytes, borrowed when stored, else computed (never longer than the original).
    pub fn to_cow(&self) -> Cow<'a, [u8]> {
        match *self {
            NormalizedValue::Stored(bytes) => Cow::Borrowed(bytes),
            NormalizedValue::AsciiLowercaseOf(original) => {
                Cow::Owned(original.to_ascii_lowercase())
            }
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.to_cow().into_owned()
    }

    pub fn len(&self) -> usize {
        match *self {
            NormalizedValue::Stored(bytes) | NormalizedValue::AsciiLowercaseOf(bytes) => {
                bytes.len()
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the bytes to `out` without an intermediate allocation.
    pub fn extend_into(&self, out: &mut Vec<u8>) {
        match *self {
            NormalizedValue::Stored(bytes) => out.extend_from_slice(bytes),
            NormalizedValue::AsciiLowercaseOf(original) => {
                // Copy then lowercase in place: both run over whole words, not byte by byte.
                let start = out.len();
                out.extend_from_slice(original);
                out[start..].make_ascii_lowercase();
            }
        }
    }
}

/// Compares without computing the lowercase form.
impl PartialEq<[u8]> for NormalizedValue<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        match *self {
            NormalizedValue::Stored(bytes) => bytes == other,
            NormalizedValue::AsciiLowercaseOf(original) => is_ascii_lowercase_of(original, other),
        }
    }
}

impl PartialEq<&[u8]> for NormalizedValue<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        *self == **other
    }
}

impl PartialEq for NormalizedValue<'_> {
    fn eq(&self, other: &NormalizedValue<'_>) -> bool {
        match *other {
            NormalizedValue::Stored(bytes) => *self == *bytes,
            NormalizedValue::AsciiLowercaseOf(_) => *self == *other.to_cow(),
        }
    }
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
    version: u8,
    attribute_count: usize,
    body_start: usize,
    out_of_line: bool,
}

impl<'a> EncodedEntry<'a> {
    /// Validates the whole record once so later iteration is infallible.
    pub fn parse(bytes: &'a [u8]) -> Result<EncodedEntry<'a>, CorruptEntry> {
        Self::parse_within(bytes, u64::from(u32::MAX) + 1)
    }

    /// As [`EncodedEntry::parse`], also rejecting description numbers from `description_count`
    /// up (description numbers are dense: a reader's table holds `0..description_count`). One
    /// pass checks both, where a second walk of every value would cost as much again on each
    /// read (a full scan decodes every entry).
    pub fn parse_within(
        bytes: &'a [u8],
        description_count: u64,
    ) -> Result<EncodedEntry<'a>, CorruptEntry> {
        let version = match bytes.first() {
            Some(
                &version @ (ENTRY_FORMAT_VERSION
                | ENTRY_FORMAT_VERSION_UNCOUNTED
                | ENTRY_FORMAT_VERSION_EXPLICIT_NORMALIZED
                | ENTRY_FORMAT_VERSION_OUT_OF_LINE),
            ) => version,
            _ => return Err(corrupt(0, "unknown format version")),
        };
        let mut position = 1;
        let attribute_count = read_varint(bytes, &mut position)
            .ok_or_else(|| corrupt(position, "truncated attribute count"))?
            as usize;
        if attribute_count > ATTRIBUTES_PER_ENTRY_MAX {
            return Err(corrupt(position, "too many attributes"));
        }
        let body_start = position;
        let record = RecordShape {
            version,
            stored_offset: stored_offset(version),
            description_count,
        };
        let mut any_out_of_line = false;
        for _ in 0..attribute_count {
            any_out_of_line |= record.parse_attribute(bytes, &mut position)?;
        }
        if position != bytes.len() {
            return Err(corrupt(position, "trailing bytes"));
        }
        Ok(EncodedEntry {
            bytes,
            version,
            attribute_count,
            body_start,
            out_of_line: any_out_of_line,
        })
    }

    pub fn attribute_count(&self) -> usize {
        self.attribute_count
    }

    /// Whether any attribute lives out of line (format versions 3 and 4).
    pub fn has_out_of_line(&self) -> bool {
        self.out_of_line
    }

    /// The record's format version (1 to 4).
    pub fn version(&self) -> u8 {
        self.version
    }

    pub fn attributes(&self) -> EncodedAttributes<'a> {
        EncodedAttributes {
            bytes: self.bytes,
            version: self.version,
            stored_offset: stored_offset(self.version),
            position: self.body_start,
            remaining: self.attribute_count,
        }
    }
}

/// A value count field: (count, out of line); versions 3 and 4 carry the flag bit.
#[inline]
fn split_count(version: u8, field: u64) -> (u64, bool) {
    match version {
        ENTRY_FORMAT_VERSION | ENTRY_FORMAT_VERSION_OUT_OF_LINE => (field >> 1, field & 1 == 1),
        _ => (field, false),
    }
}

fn corrupt(position: usize, reason: &'static str) -> CorruptEntry {
    CorruptEntry { position, reason }
}

/// What validating one record's attributes needs to know of it.
struct RecordShape {
    version: u8,
    stored_offset: u64,
    description_count: u64,
}

impl RecordShape {
    /// Validates one attribute, advancing `position` past it; returns whether it is out of
    /// line. Run on every entry read (the whole record once, so later walks cannot fail).
    #[inline(always)]
    fn parse_attribute(&self, bytes: &[u8], position: &mut usize) -> Result<bool, CorruptEntry> {
        let number = read_varint(bytes, position)
            .ok_or_else(|| corrupt(*position, "truncated description number"))?;
        if number > u32::MAX as u64 {
            return Err(corrupt(*position, "description number above u32"));
        }
        if number >= self.description_count {
            return Err(corrupt(
                *position,
                "description number missing from the description table",
            ));
        }
        let count_field = read_varint(bytes, position)
            .ok_or_else(|| corrupt(*position, "truncated value count"))?;
        let (value_count, out_of_line) = split_count(self.version, count_field);
        if value_count > VALUES_PER_ATTRIBUTE_MAX as u64 {
            return Err(corrupt(*position, "too many values"));
        }
        if out_of_line {
            if value_count == 0 {
                return Err(corrupt(
                    *position,
                    "an out-of-line attribute without values",
                ));
            }
            return Ok(true);
        }
        let counted = self.version == ENTRY_FORMAT_VERSION;
        let end = match counted {
            true => parse_values_length(bytes, position)?,
            false => bytes.len(),
        };
        for _ in 0..value_count {
            parse_value(self.stored_offset, bytes, end, position)?;
        }
        if counted && *position != end {
            return Err(corrupt(*position, "values shorter than their byte length"));
        }
        Ok(false)
    }
}

/// Validates a version-4 attribute's values byte length, advancing `position` past it;
/// returns where its values end.
#[inline(always)]
fn parse_values_length(bytes: &[u8], position: &mut usize) -> Result<usize, CorruptEntry> {
    let length = read_varint(bytes, position)
        .ok_or_else(|| corrupt(*position, "truncated values length"))?;
    if length > (bytes.len() - *position) as u64 {
        return Err(corrupt(*position, "values length runs past the record"));
    }
    Ok(*position + length as usize)
}

/// Validates one value's header and extent (within `end`), advancing `position` past it.
#[inline(always)]
fn parse_value(
    stored_offset: u64,
    bytes: &[u8],
    end: usize,
    position: &mut usize,
) -> Result<(), CorruptEntry> {
    let original_length =
        read_varint(bytes, position).ok_or_else(|| corrupt(*position, "truncated value length"))?;
    let code = read_varint(bytes, position)
        .ok_or_else(|| corrupt(*position, "truncated normalized length"))?;
    let total = original_length
        .checked_add(stored_length(code, stored_offset))
        .ok_or_else(|| corrupt(*position, "length overflow"))?;
    if total > end.saturating_sub(*position) as u64 {
        return Err(corrupt(*position, "value runs past its attribute"));
    }
    *position += total as usize;
    Ok(())
}

/// Iterator over the attributes of a validated entry.
#[derive(Clone, Debug)]
pub struct EncodedAttributes<'a> {
    bytes: &'a [u8],
    version: u8,
    stored_offset: u64,
    position: usize,
    remaining: usize,
}

impl<'a> Iterator for EncodedAttributes<'a> {
    type Item = EncodedAttribute<'a>;

    #[inline]
    fn next(&mut self) -> Option<EncodedAttribute<'a>> {
        self.next_where(|_| true)
    }
}

impl<'a> EncodedAttributes<'a> {
    /// The next attribute whose description number `wanted` accepts: the others are stepped
    /// over without being built (one read of their length in version 4, a walk over their
    /// values' headers before).
    #[inline]
    pub fn next_where(
        &mut self,
        mut wanted: impl FnMut(u32) -> bool,
    ) -> Option<EncodedAttribute<'a>> {
        while self.remaining > 0 {
            self.remaining -= 1;
            let description_number = read_varint(self.bytes, &mut self.position)? as u32;
            let (value_count, out_of_line) =
                split_count(self.version, read_varint(self.bytes, &mut self.position)?);
            let value_count = value_count as usize;
            if !out_of_line && self.version == ENTRY_FORMAT_VERSION {
                let length = read_varint(self.bytes, &mut self.position)? as usize;
                self.position += length;
                if wanted(description_number) {
                    return Some(self.attribute(description_number, value_count, false, length));
                }
                continue;
            }
            let values_start = self.position;
            if !out_of_line {
                for _ in 0..value_count {
                    read_value(self.bytes, self.stored_offset, &mut self.position)?;
                }
            }
            if wanted(description_number) {
                let length = self.position - values_start;
                return Some(self.attribute(description_number, value_count, out_of_line, length));
            }
        }
        None
    }

    /// The attribute whose values (`length` bytes) end at the current position.
    #[inline]
    fn attribute(
        &self,
        description_number: u32,
        value_count: usize,
        out_of_line: bool,
        length: usize,
    ) -> EncodedAttribute<'a> {
        EncodedAttribute {
            description_number,
            value_count,
            out_of_line,
            bytes: self.bytes,
            stored_offset: self.stored_offset,
            values_start: self.position - length,
        }
    }
}

/// One attribute of an encoded entry.
#[derive(Clone, Copy, Debug)]
pub struct EncodedAttribute<'a> {
    pub description_number: u32,
    pub value_count: usize,
    /// The values are `id2value` rows, not in this record: [`EncodedAttribute::values`] yields
    /// none (the store's readers stream them from `id2value`).
    pub out_of_line: bool,
    bytes: &'a [u8],
    stored_offset: u64,
    values_start: usize,
}

impl<'a> EncodedAttribute<'a> {
    /// (original, normalized) pairs, the originals borrowed from the record; none for an
    /// out-of-line attribute.
    pub fn values(&self) -> EncodedValues<'a> {
        EncodedValues {
            bytes: self.bytes,
            stored_offset: self.stored_offset,
            position: self.values_start,
            remaining: match self.out_of_line {
                true => 0,
                false => self.value_count,
            },
        }
    }

    /// Whether any value's normalized form is computed rather than stored (then
    /// [`NormalizedValue::to_cow`] allocates).
    pub fn has_computed_normalized(&self) -> bool {
        self.values()
            .any(|(_, normalized)| matches!(normalized, NormalizedValue::AsciiLowercaseOf(_)))
    }
}

/// (original, normalized) pairs as plain slices, for callers that need the normalized bytes of
/// every value (filter evaluation). Computed normalized forms of the whole attribute go into
/// `computed` the first time one is reached, so an iteration that stops early, or never meets a
/// computed one, allocates nothing.
#[derive(Clone, Debug)]
pub struct SliceValues<'c> {
    values: EncodedValues<'c>,
    attribute: EncodedAttribute<'c>,
    computed: &'c OnceCell<Vec<u8>>,
    computed_offset: usize,
}

impl<'a> EncodedAttribute<'a> {
    pub fn slice_values<'c>(&self, computed: &'c OnceCell<Vec<u8>>) -> SliceValues<'c>
    where
        'a: 'c,
    {
        SliceValues {
            values: self.values(),
            attribute: *self,
            computed,
            computed_offset: 0,
        }
    }

    fn computed_normalized(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.values()
                .map(|(original, normalized)| match normalized {
                    NormalizedValue::AsciiLowercaseOf(_) => original.len(),
                    NormalizedValue::Stored(_) => 0,
                })
                .sum(),
        );
        for (_, normalized) in self.values() {
            if let NormalizedValue::AsciiLowercaseOf(_) = normalized {
                normalized.extend_into(&mut out);
            }
        }
        out
    }
}

impl<'c> Iterator for SliceValues<'c> {
    type Item = (&'c [u8], &'c [u8]);

    fn next(&mut self) -> Option<(&'c [u8], &'c [u8])> {
        let (original, normalized) = self.values.next()?;
        match normalized {
            NormalizedValue::Stored(bytes) => Some((original, bytes)),
            NormalizedValue::AsciiLowercaseOf(_) => {
                let attribute = self.attribute;
                let all = self
                    .computed
                    .get_or_init(|| attribute.computed_normalized());
                let start = self.computed_offset;
                self.computed_offset += original.len();
                Some((original, all.get(start..self.computed_offset)?))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.values.size_hint()
    }
}

#[derive(Clone, Debug)]
pub struct EncodedValues<'a> {
    bytes: &'a [u8],
    stored_offset: u64,
    position: usize,
    remaining: usize,
}

impl<'a> Iterator for EncodedValues<'a> {
    type Item = (&'a [u8], NormalizedValue<'a>);

    fn next(&mut self) -> Option<(&'a [u8], NormalizedValue<'a>)> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (start, original_length, code) =
            read_value(self.bytes, self.stored_offset, &mut self.position)?;
        let original = &self.bytes[start..start + original_length];
        let normalized = if code == CODE_SAME {
            NormalizedValue::Stored(original)
        } else if code < self.stored_offset {
            // Only code 1 in version 2 (version 1's offset is 1).
            NormalizedValue::AsciiLowercaseOf(original)
        } else {
            NormalizedValue::Stored(&self.bytes[start + original_length..self.position])
        };
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
                out_of_line: None,
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

    #[test]
    fn parse_within_rejects_description_numbers_past_the_table() {
        let bytes = one_attribute(&[(b"x".to_vec(), b"x".to_vec())]);
        assert!(EncodedEntry::parse_within(&bytes, 4).is_ok());
        let error = EncodedEntry::parse_within(&bytes, 3).expect_err("number 3 of 3");
        assert_eq!(
            error.reason,
            "description number missing from the description table"
        );
    }

    fn one_attribute(values: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        encode_entry(
            &[AttributeToEncode {
                description_number: 3,
                values,
                out_of_line: None,
            }],
            &mut bytes,
        )
        .expect("encodable");
        bytes
    }

    #[test]
    fn ascii_lowercase_normalized_forms_are_a_code_not_bytes() {
        let bytes = one_attribute(&[(b"Foo".to_vec(), b"foo".to_vec())]);
        // Version, 1 attribute, number 3, 1 value (count << 1), 5 value bytes, length 3, code.
        assert_eq!(
            bytes,
            [
                4,
                1,
                3,
                2,
                5,
                3,
                CODE_ASCII_LOWERCASE as u8,
                b'F',
                b'o',
                b'o'
            ]
        );
        // Not a pure ASCII lowercasing (space folding, non-ASCII case): stored.
        let folded = one_attribute(&[("A  B".into(), "a b".into())]);
        assert_eq!(folded[6], 3 + CODE_STORED_OFFSET as u8);
        let non_ascii = one_attribute(&[("Ä".into(), "ä".into())]);
        let (_, normalized) = EncodedEntry::parse(&non_ascii)
            .unwrap()
            .attributes()
            .next()
            .unwrap()
            .values()
            .next()
            .unwrap();
        assert!(matches!(normalized, NormalizedValue::Stored(b) if b == "ä".as_bytes()));
    }

    #[test]
    fn version_one_records_still_decode() {
        // Written before version 2: code n + 1 means n stored bytes; 1 means an empty one.
        let bytes = [
            1, 1, 3, 2, 3, 4, b'F', b'o', b'o', b'f', b'o', b'o', 0, 2, b'X',
        ];
        let entry = EncodedEntry::parse(&bytes).expect("version 1 decodes");
        assert_eq!(entry.version(), ENTRY_FORMAT_VERSION_EXPLICIT_NORMALIZED);
        let attribute = entry.attributes().next().unwrap();
        let values: Vec<(Vec<u8>, Vec<u8>)> = attribute
            .values()
            .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
            .collect();
        assert_eq!(
            values,
            [
                (b"Foo".to_vec(), b"foo".to_vec()),
                (Vec::new(), b"X".to_vec())
            ]
        );
        assert!(!attribute.has_computed_normalized());
    }

    /// Records written before version 4 (no values byte length) read as they did.
    #[test]
    fn version_two_and_three_records_still_decode() {
        // Version 2: number 3 with "Foo"/code 1, number 5 with two values "a", "b".
        let two = [
            2, 2, 3, 1, 3, 1, b'F', b'o', b'o', 5, 2, 1, 0, b'a', 1, 0, b'b',
        ];
        // Version 3: the same, then number 6 out of line with 7 values (count << 1 | 1).
        let three = [
            3, 3, 3, 2, 3, 1, b'F', b'o', b'o', 5, 4, 1, 0, b'a', 1, 0, b'b', 6, 15,
        ];
        for (bytes, out_of_line) in [(&two[..], false), (&three[..], true)] {
            let entry = EncodedEntry::parse(bytes).expect("decodes");
            assert_eq!(entry.has_out_of_line(), out_of_line);
            let attributes: Vec<_> = entry.attributes().collect();
            let numbers: Vec<u32> = attributes.iter().map(|a| a.description_number).collect();
            assert_eq!(numbers[..2], [3, 5]);
            let second: Vec<&[u8]> = attributes[1].values().map(|(o, _)| o).collect();
            assert_eq!(second, [b"a", b"b"]);
            let (original, normalized) = attributes[0].values().next().unwrap();
            assert_eq!(
                (original, normalized.to_vec()),
                (&b"Foo"[..], b"foo".to_vec())
            );
            for cut in 0..bytes.len() {
                assert!(EncodedEntry::parse(&bytes[..cut]).is_err(), "cut at {cut}");
            }
        }
    }

    /// A version-4 values length must be exactly what its values fill: shorter or longer is
    /// refused at parse, so the one-step skip of a walk can never land inside a value.
    #[test]
    fn a_values_length_that_disagrees_with_the_values_is_refused() {
        let bytes = one_attribute(&[
            (b"ab".to_vec(), b"ab".to_vec()),
            (b"c".to_vec(), b"c".to_vec()),
        ]);
        // Version, count, number, count field, length (7), then the values.
        assert_eq!(bytes[4], 7);
        assert!(EncodedEntry::parse(&bytes).is_ok());
        for wrong in [0u8, 3, 6] {
            let mut shorter = bytes.clone();
            shorter[4] = wrong;
            assert!(EncodedEntry::parse(&shorter).is_err(), "length {wrong}");
        }
        let mut longer = bytes.clone();
        longer[4] = 8;
        longer.push(0);
        assert!(
            EncodedEntry::parse(&longer).is_err(),
            "a byte past the values"
        );
    }

    /// The one-step walk of version 4 meets the same attributes and values as the encoder
    /// was given, inline and out of line mixed.
    #[test]
    fn counted_attributes_walk_to_what_was_encoded() {
        let first = vec![(b"X".to_vec(), b"x".to_vec()); 3];
        let long: Vec<(Vec<u8>, Vec<u8>)> = (0..40)
            .map(|index| (vec![b'v'; 10 + index], vec![b'n'; 3]))
            .collect();
        let mut bytes = Vec::new();
        encode_entry(
            &[
                AttributeToEncode {
                    description_number: 1,
                    values: &first,
                    out_of_line: None,
                },
                AttributeToEncode {
                    description_number: 2,
                    values: &[],
                    out_of_line: Some(9),
                },
                AttributeToEncode {
                    description_number: 300,
                    values: &long,
                    out_of_line: None,
                },
            ],
            &mut bytes,
        )
        .expect("encodable");
        let entry = EncodedEntry::parse(&bytes).expect("decodes");
        let attributes: Vec<_> = entry.attributes().collect();
        assert_eq!(attributes.len(), 3);
        assert_eq!(attributes[2].description_number, 300);
        let values: Vec<(Vec<u8>, Vec<u8>)> = attributes[2]
            .values()
            .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
            .collect();
        assert_eq!(values, long, "a multi-byte values length");
        assert_eq!(attributes[0].values().count(), 3);
        assert_eq!(attributes[1].value_count, 9);
    }

    #[test]
    fn slice_values_compute_only_when_reached() {
        let bytes = one_attribute(&[
            (b"same".to_vec(), b"same".to_vec()),
            (b"Ab".to_vec(), b"ab".to_vec()),
            (b"CdE".to_vec(), b"cde".to_vec()),
        ]);
        let attribute = EncodedEntry::parse(&bytes)
            .unwrap()
            .attributes()
            .next()
            .unwrap();
        let computed = OnceCell::new();
        let first = attribute.slice_values(&computed).next();
        assert_eq!(first, Some((&b"same"[..], &b"same"[..])));
        assert!(
            computed.get().is_none(),
            "nothing computed for a stored form"
        );
        let all: Vec<_> = attribute.slice_values(&computed).collect();
        assert_eq!(
            all,
            [
                (&b"same"[..], &b"same"[..]),
                (b"Ab", b"ab"),
                (b"CdE", b"cde")
            ]
        );
        assert_eq!(
            computed.get().map(Vec::len),
            Some(5),
            "once, for the whole attribute"
        );
    }

    #[test]
    fn normalized_comparisons_need_no_allocation() {
        let lower = NormalizedValue::AsciiLowercaseOf(b"MiXed");
        let (asserted, original): (&[u8], &[u8]) = (b"mixed", b"MiXed");
        assert!(lower == asserted);
        assert!(lower != original);
        assert!(lower == *asserted);
        assert!(lower == NormalizedValue::Stored(b"mixed"));
        assert!(NormalizedValue::Stored(b"mixed") == lower);
        assert_eq!(lower.len(), 5);
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
                    out_of_line: None,
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

    #[test]
    fn out_of_line_attributes_keep_only_a_marker() {
        let inline = vec![(b"Foo".to_vec(), b"foo".to_vec())];
        let outside = [
            (b"A".to_vec(), b"a".to_vec()),
            (b"B".to_vec(), b"b".to_vec()),
        ];
        let mut bytes = Vec::new();
        encode_entry(
            &[
                AttributeToEncode {
                    description_number: 1,
                    values: &inline,
                    out_of_line: None,
                },
                AttributeToEncode {
                    description_number: 2,
                    values: &[],
                    out_of_line: Some(outside.len()),
                },
            ],
            &mut bytes,
        )
        .expect("encodable");
        assert_eq!(bytes[0], ENTRY_FORMAT_VERSION);
        assert_eq!(
            &bytes[bytes.len() - 2..],
            [2, 2 << 1 | 1],
            "number, count|flag"
        );
        let entry = EncodedEntry::parse(&bytes).expect("decodes");
        assert!(entry.has_out_of_line());
        let attributes: Vec<_> = entry.attributes().collect();
        assert!(!attributes[0].out_of_line);
        assert_eq!(attributes[0].values().count(), 1);
        assert!(attributes[1].out_of_line);
        assert_eq!(attributes[1].value_count, 2);
        assert_eq!(attributes[1].values().count(), 0, "values live in id2value");
        for cut in 0..bytes.len() {
            assert!(EncodedEntry::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A marker of no values cannot be read back as anything: refused.
        assert!(EncodedEntry::parse(&[3, 1, 2, 1]).is_err());
    }
}
