//! Strict BER reading, shared by every decoder of what clients and providers send (the PDU
//! frame, controls, filters, extended operations, sync messages): single-byte identifiers,
//! definite lengths, nothing read past its element.

/// BER identifier bytes read here.
pub mod ber_tag {
    pub const BOOLEAN: u8 = 0x01;
    pub const INTEGER: u8 = 0x02;
    pub const OCTET_STRING: u8 = 0x04;
    pub const SEQUENCE: u8 = 0x30;
    pub const CONTROLS: u8 = 0xa0;
    pub const ORDERING_RULE: u8 = 0x80;
    pub const REVERSE_ORDER: u8 = 0x81;
}

/// One BER element: identifier byte, content, and the whole encoding (header included).
#[derive(Debug, Clone, Copy)]
pub struct Tlv<'bytes> {
    pub tag: u8,
    pub content: &'bytes [u8],
    pub whole: &'bytes [u8],
}

/// Reads the element at the start of `bytes`: single-byte identifiers (tag numbers below 31,
/// all LDAP needs) and definite lengths of at most 8 bytes (as the PDU framing accepts);
/// returns it and what follows.
pub fn read_tlv(bytes: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = bytes.split_first()?;
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let size = usize::from(first & 0x7f);
        if size == 0 || size > 8 {
            return None;
        }
        let (length_bytes, rest) = rest.split_at_checked(size)?;
        let length = length_bytes
            .iter()
            .fold(0u64, |total, byte| (total << 8) | u64::from(*byte));
        (usize::try_from(length).ok()?, rest)
    };
    let (content, rest) = rest.split_at_checked(length)?;
    let whole = &bytes[..bytes.len() - rest.len()];
    Some((
        Tlv {
            tag,
            content,
            whole,
        },
        rest,
    ))
}

/// Room made at once for the elements of a constructed element (more grow the vector).
const ELEMENTS_EXPECTED: usize = 8;

/// The elements that exactly fill `content` (the content of a constructed element).
pub fn elements(mut content: &[u8]) -> Option<Vec<Tlv<'_>>> {
    // A SearchRequest has 8 elements: room for them at once instead of growing through 4.
    let mut items = Vec::with_capacity(ELEMENTS_EXPECTED);
    while !content.is_empty() {
        let (item, rest) = read_tlv(content)?;
        items.push(item);
        content = rest;
    }
    Some(items)
}

/// Whether every constructed element within `element`, down to `depth_left` levels, is exactly
/// filled by its children.
pub fn nested_well_formed(element: &Tlv<'_>, depth_left: usize) -> bool {
    const CONSTRUCTED: u8 = 0x20;
    if element.tag & CONSTRUCTED == 0 {
        return true;
    }
    if depth_left == 0 {
        return false;
    }
    // Walked in place: this runs on every request, and collecting each level's children
    // into a vector cost an allocation per constructed element.
    let mut content = element.content;
    while !content.is_empty() {
        let Some((child, rest)) = read_tlv(content) else {
            return false;
        };
        if !nested_well_formed(&child, depth_left - 1) {
            return false;
        }
        content = rest;
    }
    true
}

/// The identifier of a universal SEQUENCE.
pub const SEQUENCE_TAG: u8 = ber_tag::SEQUENCE;

/// `bytes` holding exactly one element with identifier `tag`.
pub fn single_element(bytes: &[u8], tag: u8) -> Option<Tlv<'_>> {
    match read_tlv(bytes)? {
        (element, []) if element.tag == tag => Some(element),
        _ => None,
    }
}

/// The content of a one-byte BOOLEAN; any non-zero octet is TRUE (X.690 §8.2).
pub fn boolean(content: &[u8]) -> Option<bool> {
    match content {
        [byte] => Some(*byte != 0),
        _ => None,
    }
}

/// INTEGER content octets (two's complement, 1..=8 bytes).
pub fn integer(content: &[u8]) -> Option<i64> {
    if content.is_empty() || content.len() > 8 {
        return None;
    }
    let sign: i64 = if content[0] & 0x80 != 0 { -1 } else { 0 };
    Some(
        content
            .iter()
            .fold(sign, |total, byte| (total << 8) | i64::from(*byte)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tlv_reader_takes_long_form_lengths_and_refuses_what_does_not_fit() {
        let (element, rest) = read_tlv(&[0x04, 0x84, 0, 0, 0, 2, b'a', b'b', 0xff]).expect("tlv");
        assert_eq!(
            (element.tag, element.content, rest),
            (0x04, &b"ab"[..], &[0xff][..])
        );
        assert_eq!(element.whole.len(), 8);
        assert!(
            read_tlv(&[0x04, 0x81, 0x05, b'a']).is_none(),
            "content cut short"
        );
        assert!(read_tlv(&[0x04, 0x80]).is_none(), "indefinite length");
        assert!(read_tlv(&[0x1f, 0x01, 0x00]).is_none(), "high tag number");
        assert!(read_tlv(&[0x04, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 1]).is_none());
        assert!(
            elements(&[0x04, 0x01, b'a', 0x04]).is_none(),
            "a trailing partial element"
        );
    }
}
