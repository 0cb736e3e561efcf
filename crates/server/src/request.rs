//! lmdir's own request types, decoded strictly from BER by lmdir. What LDAP defines as an octet
//! string stays bytes: a search's filter is a `RawFilter` decoded into lmdir-schema's `Filter`
//! (octet-string assertion values), which ldap3_proto's String-valued filters could not hold —
//! a search asserting `\ff\fe` ended the client's connection.
//!
//! Search requests (the bulk of any directory's traffic) are decoded here; the other operations
//! still come from ldap3_proto (`Operation::Other`) until they get types of their own.

use crate::ber_read::{elements, read_tlv, Tlv};
use crate::filter::RawFilter;
use ldap3_proto::proto::{LdapDerefAliases, LdapOp, LdapSearchScope};

/// One decoded protocol operation of a request.
#[derive(Debug, Clone)]
pub enum Operation {
    Search(Box<SearchRequest>),
    Other(LdapOp),
}

/// SearchRequest ::= [APPLICATION 3] SEQUENCE (RFC 4511 §4.5.1).
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub base: String,
    pub scope: LdapSearchScope,
    pub aliases: LdapDerefAliases,
    /// 0..=i32::MAX: a larger INTEGER is clamped, a negative one refused.
    pub sizelimit: i32,
    pub timelimit: i32,
    pub typesonly: bool,
    pub filter: RawFilter,
    pub attrs: Vec<String>,
}

/// BER identifiers of a search request's fields.
mod tag {
    pub const SEARCH_REQUEST: u8 = 0x63;
    pub const OCTET_STRING: u8 = 0x04;
    pub const INTEGER: u8 = 0x02;
    pub const ENUMERATED: u8 = 0x0a;
    pub const BOOLEAN: u8 = 0x01;
    pub const SEQUENCE: u8 = 0x30;
}

/// Whether `operation` is a search request element (decoded by `search_request`).
pub fn is_search(operation: &Tlv<'_>) -> bool {
    operation.tag == tag::SEARCH_REQUEST
}

/// Decodes a SearchRequest element; the filter is checked well-formed to `ber_depth_max`
/// levels (decoded against the configured limits when the search is prepared). Err names the
/// field that is malformed: the connection is ended, as for any undecodable PDU.
pub fn search_request(
    operation: &Tlv<'_>,
    ber_depth_max: usize,
) -> Result<SearchRequest, &'static str> {
    let fields = elements(operation.content).ok_or("search request fields")?;
    let [base, scope, aliases, size, time, types_only, filter, attributes] = fields.as_slice()
    else {
        return Err("search request must have eight fields");
    };
    Ok(SearchRequest {
        base: utf8(base).ok_or("search base")?,
        // Some clients tag the scope INTEGER, as ldap3_proto accepted.
        scope: match enumerated(scope, &[tag::ENUMERATED, tag::INTEGER]) {
            Some(0) => LdapSearchScope::Base,
            Some(1) => LdapSearchScope::OneLevel,
            Some(2) => LdapSearchScope::Subtree,
            Some(3) => LdapSearchScope::Children,
            _ => return Err("search scope"),
        },
        aliases: match enumerated(aliases, &[tag::ENUMERATED]) {
            Some(0) => LdapDerefAliases::Never,
            Some(1) => LdapDerefAliases::InSearching,
            Some(2) => LdapDerefAliases::FindingBaseObj,
            Some(3) => LdapDerefAliases::Always,
            _ => return Err("search derefAliases"),
        },
        sizelimit: limit(size).ok_or("search sizeLimit")?,
        timelimit: limit(time).ok_or("search timeLimit")?,
        typesonly: boolean(types_only).ok_or("search typesOnly")?,
        filter: RawFilter::new(filter.whole, ber_depth_max).ok_or("search filter")?,
        attrs: attribute_selection(attributes).ok_or("search attributes")?,
    })
}

fn utf8(element: &Tlv<'_>) -> Option<String> {
    (element.tag == tag::OCTET_STRING)
        .then(|| {
            std::str::from_utf8(element.content)
                .ok()
                .map(str::to_string)
        })
        .flatten()
}

/// A signed BER integer of at most 8 content bytes.
fn signed(content: &[u8]) -> Option<i64> {
    if content.is_empty() || content.len() > 8 {
        return None;
    }
    let negative = content[0] & 0x80 != 0;
    let start = if negative { -1i64 } else { 0 };
    Some(
        content
            .iter()
            .fold(start, |value, byte| (value << 8) | i64::from(*byte)),
    )
}

fn enumerated(element: &Tlv<'_>, tags: &[u8]) -> Option<i64> {
    tags.contains(&element.tag)
        .then(|| signed(element.content))
        .flatten()
}

/// sizeLimit and timeLimit: INTEGER (0 .. maxInt).
fn limit(element: &Tlv<'_>) -> Option<i32> {
    let value = enumerated(element, &[tag::INTEGER])?;
    (value >= 0).then(|| i32::try_from(value).unwrap_or(i32::MAX))
}

fn boolean(element: &Tlv<'_>) -> Option<bool> {
    match (element.tag, element.content) {
        (tag::BOOLEAN, [byte]) => Some(*byte != 0),
        _ => None,
    }
}

/// AttributeSelection ::= SEQUENCE OF selector LDAPString.
fn attribute_selection(element: &Tlv<'_>) -> Option<Vec<String>> {
    if element.tag != tag::SEQUENCE {
        return None;
    }
    let mut names = Vec::new();
    let mut rest = element.content;
    while !rest.is_empty() {
        let (name, after) = read_tlv(rest)?;
        names.push(utf8(&name)?);
        rest = after;
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ber::BerWriter;
    use bytes::BytesMut;

    /// A SearchRequest element with `filter` (BER) in its place.
    fn search_element(scope: i64, size: i64, filter: &[u8]) -> Vec<u8> {
        let mut before = BytesMut::new();
        let mut writer = BerWriter::new(&mut before);
        writer.octet_string(b"dc=example,dc=com");
        writer.integer(tag::ENUMERATED, scope);
        writer.integer(tag::ENUMERATED, 0);
        writer.integer(tag::INTEGER, size);
        writer.integer(tag::INTEGER, 0);
        writer.boolean(false);
        drop(writer);
        let mut after = BytesMut::new();
        let mut writer = BerWriter::new(&mut after);
        writer.open(tag::SEQUENCE);
        writer.octet_string(b"cn");
        writer.octet_string(b"1.1");
        writer.close();
        drop(writer);
        let content = [&before[..], filter, &after[..]].concat();
        let mut element = BytesMut::new();
        BerWriter::new(&mut element).primitive(tag::SEARCH_REQUEST, &content);
        element.to_vec()
    }

    fn decode(bytes: &[u8]) -> Result<SearchRequest, &'static str> {
        let (element, rest) = read_tlv(bytes).expect("element");
        assert!(rest.is_empty());
        search_request(&element, 16)
    }

    /// A binary assertion value (not UTF-8) decodes: the search answers it.
    #[test]
    fn binary_assertion_values_decode() {
        // (userPassword=\ff\fe)
        let filter = [
            0xa3, 0x12, 0x04, 0x0c, b'u', b's', b'e', b'r', b'P', b'a', b's', b's', b'w', b'o',
            b'r', b'd', 0x04, 0x02, 0xff, 0xfe,
        ];
        let request = decode(&search_element(2, 5, &filter)).expect("decodes");
        assert_eq!(request.base, "dc=example,dc=com");
        assert_eq!(request.scope, LdapSearchScope::Subtree);
        assert_eq!(request.sizelimit, 5);
        assert_eq!(request.attrs, ["cn", "1.1"]);
        assert_eq!(request.filter.as_bytes(), filter);
    }

    #[test]
    fn bad_fields_are_named() {
        let present = [0x87, 0x02, b'c', b'n'];
        assert_eq!(
            decode(&search_element(7, 0, &present)).unwrap_err(),
            "search scope"
        );
        assert_eq!(
            decode(&search_element(0, -1, &present)).unwrap_err(),
            "search sizeLimit"
        );
        let cut = [0xa3, 0x04, 0x04, 0x02, b'c'];
        assert!(decode(&search_element(0, 0, &cut)).is_err());
        let big = decode(&search_element(0, 1 << 40, &present)).expect("clamped");
        assert_eq!(big.sizelimit, i32::MAX);
    }
}
