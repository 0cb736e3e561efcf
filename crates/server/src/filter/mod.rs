//! Client filters (a search's filter, the assertion control's, matched values' items) decoded
//! from their BER straight into lmdir-schema's `Filter`, the one filter type: no ldap3_proto
//! tree and no RFC 4515 text in between. Assertion values stay octet strings (RFC 4511
//! §4.1.6): `(jpegPhoto=\ff\d8...)` or `(objectGUID=\9a\...)` is a valid filter and is answered.
//!
//! A request keeps its filter as a `RawFilter`: the BER element, checked well-formed when the
//! PDU arrived (a broken structure ends the connection, as slapd's SLAPD_DISCONNECT does). It
//! is decoded once, when the operation is prepared, against the configured bounds, with the
//! text parser's limits and errors: nesting depth and items (adminLimitExceeded, checked while
//! decoding, so a huge filter is refused before it is built), at most `FILTER_ITEMS_MAX` items,
//! names of descriptor/OID characters only, no empty substring piece, an extensible match
//! naming an attribute or a rule (protocolError otherwise). Unknown attributes, bad assertion
//! values and matching rules are judged when the filter is prepared against the schema
//! (Undefined), exactly as for a parsed filter.

pub mod text;

use crate::ber::BerWriter;
use crate::ber_read::{elements, read_tlv, Tlv};
use crate::result::{code, OperationError};
use crate::settings::ServerSettings;
use lmdir_schema::{is_filter_name_byte, Filter, FILTER_ITEMS_MAX};

/// BER identifiers of the Filter CHOICE (RFC 4511 §4.5.1) and of the parts of its items.
pub(crate) mod tag {
    pub const AND: u8 = 0xa0;
    pub const OR: u8 = 0xa1;
    pub const NOT: u8 = 0xa2;
    pub const EQUALITY: u8 = 0xa3;
    pub const SUBSTRINGS: u8 = 0xa4;
    pub const GREATER_OR_EQUAL: u8 = 0xa5;
    pub const LESS_OR_EQUAL: u8 = 0xa6;
    pub const PRESENT: u8 = 0x87;
    pub const APPROX: u8 = 0xa8;
    pub const EXTENSIBLE: u8 = 0xa9;
    pub const OCTET_STRING: u8 = 0x04;
    pub const SEQUENCE: u8 = 0x30;
    pub const SUBSTRING_INITIAL: u8 = 0x80;
    pub const SUBSTRING_ANY: u8 = 0x81;
    pub const SUBSTRING_FINAL: u8 = 0x82;
    pub const MATCHING_RULE: u8 = 0x81;
    pub const RULE_TYPE: u8 = 0x82;
    pub const MATCH_VALUE: u8 = 0x83;
    pub const DN_ATTRIBUTES: u8 = 0x84;
}

/// A filter as a request carries it: exactly one BER Filter element whose constructed parts
/// were checked to be exactly filled (`RawFilter::new`); decoded by `client_filter`.
#[derive(Clone, PartialEq, Eq)]
pub struct RawFilter(Vec<u8>);

impl RawFilter {
    /// `bytes` as a filter when it is exactly one well-formed element of a Filter choice,
    /// nested at most `depth_max` levels.
    pub fn new(bytes: &[u8], depth_max: usize) -> Option<RawFilter> {
        match read_tlv(bytes) {
            Some((element, [])) if is_filter_tag(element.tag) => {
                crate::ber_read::nested_well_formed(&element, depth_max)
                    .then(|| RawFilter(bytes.to_vec()))
            }
            _ => None,
        }
    }

    /// The whole BER element.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The element, read again (`new` checked it).
    pub(crate) fn element(&self) -> Tlv<'_> {
        read_tlv(&self.0).expect("checked by RawFilter::new").0
    }
}

impl std::fmt::Debug for RawFilter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&text::to_log_string(self, 256))
    }
}

fn is_filter_tag(tag: u8) -> bool {
    matches!(
        tag,
        tag::AND..=tag::LESS_OR_EQUAL | tag::PRESENT | tag::APPROX | tag::EXTENSIBLE
    )
}

/// A client filter within the configured bounds, decoded.
pub fn client_filter(
    settings: &ServerSettings,
    filter: &RawFilter,
) -> Result<Filter, OperationError> {
    client_filter_with_items(settings, filter).map(|(filter, _)| filter)
}

/// `client_filter` and its item count (leaves plus substring pieces).
pub fn client_filter_with_items(
    settings: &ServerSettings,
    filter: &RawFilter,
) -> Result<(Filter, usize), OperationError> {
    let mut decoder = Decoder {
        depth_max: settings.filter_depth_max,
        items_max: settings.filter_items_max.min(FILTER_ITEMS_MAX),
        items: 0,
        nodes: 0,
    };
    let filter = decoder.filter(&filter.element(), 1)?;
    Ok((filter, decoder.items))
}

/// One SimpleFilterItem of a ValuesReturnFilter (RFC 3876 §2): a Filter leaf, no and/or/not.
pub fn simple_filter_item(element: &Tlv<'_>) -> Result<Filter, OperationError> {
    if matches!(element.tag, tag::AND | tag::OR | tag::NOT) || !is_filter_tag(element.tag) {
        return Err(malformed("not a simple filter item".to_string()));
    }
    let mut decoder = Decoder {
        depth_max: 1,
        items_max: FILTER_ITEMS_MAX,
        items: 0,
        nodes: 0,
    };
    decoder.filter(element, 1)
}

fn malformed(why: String) -> OperationError {
    OperationError::new(code::PROTOCOL_ERROR, format!("invalid filter: {why}"))
}

fn too_deep(depth_max: usize) -> OperationError {
    OperationError::new(
        code::ADMIN_LIMIT_EXCEEDED,
        format!("filter nesting depth exceeds the limit of {depth_max}"),
    )
}

fn too_many(items_max: usize) -> OperationError {
    OperationError::new(
        code::ADMIN_LIMIT_EXCEEDED,
        format!("filter has more than {items_max} items"),
    )
}

/// Decodes one filter, counting as it goes: `items` are leaves plus substring pieces (what one
/// filter test walks per entry), `nodes` every leaf and operator (lmdir-schema's bound).
struct Decoder {
    depth_max: usize,
    items_max: usize,
    items: usize,
    nodes: usize,
}

impl Decoder {
    fn count(&mut self, items: usize) -> Result<(), OperationError> {
        self.items += items;
        self.nodes += 1;
        if self.items > self.items_max {
            return Err(too_many(self.items_max));
        }
        if self.nodes > FILTER_ITEMS_MAX {
            return Err(too_many(FILTER_ITEMS_MAX));
        }
        Ok(())
    }

    /// The element at nesting `depth` (a leaf at the top is depth 1); recursion is bounded by
    /// `depth_max`, checked before descending.
    fn filter(&mut self, element: &Tlv<'_>, depth: usize) -> Result<Filter, OperationError> {
        if depth > self.depth_max {
            return Err(too_deep(self.depth_max));
        }
        let structure = || malformed("undecodable filter element".to_string());
        match element.tag {
            tag::AND | tag::OR => {
                self.count(0)?;
                let children = elements(element.content).ok_or_else(structure)?;
                let children = children
                    .iter()
                    .map(|child| self.filter(child, depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(if element.tag == tag::AND {
                    Filter::And(children)
                } else {
                    Filter::Or(children)
                })
            }
            tag::NOT => {
                self.count(0)?;
                match read_tlv(element.content) {
                    Some((child, [])) => Ok(Filter::Not(Box::new(self.filter(&child, depth + 1)?))),
                    _ => Err(malformed("'not' must hold exactly one filter".to_string())),
                }
            }
            tag::PRESENT => {
                self.count(1)?;
                Ok(Filter::Present {
                    description: name(element.content)?,
                })
            }
            tag::SUBSTRINGS => self.substrings(element.content),
            tag::EXTENSIBLE => {
                self.count(1)?;
                extensible(element.content)
            }
            tag::EQUALITY | tag::GREATER_OR_EQUAL | tag::LESS_OR_EQUAL | tag::APPROX => {
                self.count(1)?;
                value_assertion(element.tag, element.content)
            }
            other => Err(malformed(format!("unknown filter choice 0x{other:02x}"))),
        }
    }

    /// SubstringFilter ::= SEQUENCE { type, substrings SEQUENCE SIZE (1..MAX) OF CHOICE {
    /// initial [0] (first, at most once), any [1], final [2] (last, at most once) } }. An empty
    /// initial or final piece is no piece; an empty middle piece is malformed. No piece at all
    /// reads as presence, as its text form `(a=*)` does.
    fn substrings(&mut self, content: &[u8]) -> Result<Filter, OperationError> {
        let structure = || malformed("undecodable substring filter".to_string());
        let parts = elements(content).ok_or_else(structure)?;
        let [description, pieces] = parts.as_slice() else {
            return Err(structure());
        };
        if description.tag != tag::OCTET_STRING || pieces.tag != tag::SEQUENCE {
            return Err(structure());
        }
        let description = name(description.content)?;
        let pieces = elements(pieces.content).ok_or_else(structure)?;
        let last = pieces.len().saturating_sub(1);
        let (mut initial, mut any, mut final_) = (None, Vec::new(), None);
        for (position, piece) in pieces.iter().enumerate() {
            match piece.tag {
                tag::SUBSTRING_INITIAL if position == 0 => initial = Some(piece.content),
                tag::SUBSTRING_ANY if piece.content.is_empty() => {
                    return Err(malformed("empty substring between '*'s".to_string()))
                }
                tag::SUBSTRING_ANY => any.push(piece.content.to_vec()),
                tag::SUBSTRING_FINAL if position == last => final_ = Some(piece.content),
                _ => return Err(malformed("substring pieces out of order".to_string())),
            }
        }
        self.count(1 + any.len())?;
        let piece =
            |piece: Option<&[u8]>| piece.filter(|piece| !piece.is_empty()).map(<[u8]>::to_vec);
        let (initial, final_) = (piece(initial), piece(final_));
        if initial.is_none() && final_.is_none() && any.is_empty() {
            return Ok(Filter::Present { description });
        }
        Ok(Filter::Substrings {
            description,
            initial,
            any,
            final_,
        })
    }
}

/// What a name with bytes no attribute description or matching rule may hold becomes: a name
/// no schema defines (a descriptor starts with a letter), so the item is Undefined.
const INAPPROPRIATE_NAME: &str = "_inappropriate";

/// An attribute description or matching rule name as the text parser accepts it. One with
/// other bytes (a Latin-1 `café`, a space) names nothing: slapd answers such a search
/// successfully ("AttributeDescription contains inappropriate characters"), the item
/// Undefined, where lmdir answered protocolError; it now stands for `INAPPROPRIATE_NAME`.
fn name(bytes: &[u8]) -> Result<String, OperationError> {
    if bytes.is_empty() {
        return Err(malformed("missing attribute description".to_string()));
    }
    if !bytes.iter().copied().all(is_filter_name_byte) {
        return Ok(INAPPROPRIATE_NAME.to_string());
    }
    // Only ASCII passed the check above.
    Ok(String::from_utf8(bytes.to_vec()).expect("ASCII name"))
}

/// AttributeValueAssertion ::= SEQUENCE { attributeDesc, assertionValue OCTET STRING }.
fn value_assertion(choice: u8, content: &[u8]) -> Result<Filter, OperationError> {
    let parts = elements(content);
    let Some([description, value]) = parts.as_deref() else {
        return Err(malformed(
            "undecodable attribute value assertion".to_string(),
        ));
    };
    if description.tag != tag::OCTET_STRING || value.tag != tag::OCTET_STRING {
        return Err(malformed(
            "undecodable attribute value assertion".to_string(),
        ));
    }
    let description = name(description.content)?;
    let value = value.content.to_vec();
    Ok(match choice {
        tag::EQUALITY => Filter::Equality { description, value },
        tag::GREATER_OR_EQUAL => Filter::GreaterOrEqual { description, value },
        tag::LESS_OR_EQUAL => Filter::LessOrEqual { description, value },
        _ => Filter::Approx { description, value },
    })
}

/// MatchingRuleAssertion ::= SEQUENCE { matchingRule [1] OPTIONAL, type [2] OPTIONAL,
/// matchValue [3], dnAttributes [4] BOOLEAN DEFAULT FALSE }, in that order.
fn extensible(content: &[u8]) -> Result<Filter, OperationError> {
    let structure = || malformed("undecodable extensible match".to_string());
    let mut parts = elements(content)
        .ok_or_else(structure)?
        .into_iter()
        .peekable();
    let mut optional_name = |wanted: u8| -> Result<Option<String>, OperationError> {
        match parts.next_if(|part| part.tag == wanted) {
            Some(part) if part.content.is_empty() => Ok(None),
            Some(part) => name(part.content).map(Some),
            None => Ok(None),
        }
    };
    let rule = optional_name(tag::MATCHING_RULE)?;
    let description = optional_name(tag::RULE_TYPE)?;
    let value = parts
        .next_if(|part| part.tag == tag::MATCH_VALUE)
        .ok_or_else(structure)?
        .content
        .to_vec();
    let dn_attributes = match parts.next() {
        None => false,
        Some(part) if part.tag == tag::DN_ATTRIBUTES && part.content.len() == 1 => {
            part.content[0] != 0
        }
        Some(_) => return Err(structure()),
    };
    if parts.next().is_some() {
        return Err(structure());
    }
    if description.is_none() && rule.is_none() {
        return Err(malformed(
            "extensible match needs an attribute or a matching rule".to_string(),
        ));
    }
    Ok(Filter::Extensible {
        rule,
        description,
        value,
        dn_attributes,
    })
}

/// Writes `filter` as RFC 4511 BER (what a client sends; the HTTP side builds its requests
/// with it, the tests their input).
pub(crate) fn write_filter(writer: &mut BerWriter<'_>, filter: &Filter) {
    let assertion = |writer: &mut BerWriter<'_>, choice: u8, description: &str, value: &[u8]| {
        writer.open(choice);
        writer.octet_string(description.as_bytes());
        writer.octet_string(value);
        writer.close();
    };
    match filter {
        Filter::And(children) | Filter::Or(children) => {
            writer.open(if matches!(filter, Filter::And(_)) {
                tag::AND
            } else {
                tag::OR
            });
            children
                .iter()
                .for_each(|child| write_filter(writer, child));
            writer.close();
        }
        Filter::Not(child) => {
            writer.open(tag::NOT);
            write_filter(writer, child);
            writer.close();
        }
        Filter::Equality { description, value } => {
            assertion(writer, tag::EQUALITY, description, value)
        }
        Filter::GreaterOrEqual { description, value } => {
            assertion(writer, tag::GREATER_OR_EQUAL, description, value)
        }
        Filter::LessOrEqual { description, value } => {
            assertion(writer, tag::LESS_OR_EQUAL, description, value)
        }
        Filter::Approx { description, value } => assertion(writer, tag::APPROX, description, value),
        Filter::Present { description } => writer.primitive(tag::PRESENT, description.as_bytes()),
        Filter::Substrings {
            description,
            initial,
            any,
            final_,
        } => {
            writer.open(tag::SUBSTRINGS);
            writer.octet_string(description.as_bytes());
            writer.open(tag::SEQUENCE);
            if let Some(initial) = initial {
                writer.primitive(tag::SUBSTRING_INITIAL, initial);
            }
            for piece in any {
                writer.primitive(tag::SUBSTRING_ANY, piece);
            }
            if let Some(final_) = final_ {
                writer.primitive(tag::SUBSTRING_FINAL, final_);
            }
            writer.close();
            writer.close();
        }
        Filter::Extensible {
            rule,
            description,
            value,
            dn_attributes,
        } => {
            writer.open(tag::EXTENSIBLE);
            if let Some(rule) = rule {
                writer.primitive(tag::MATCHING_RULE, rule.as_bytes());
            }
            if let Some(description) = description {
                writer.primitive(tag::RULE_TYPE, description.as_bytes());
            }
            writer.primitive(tag::MATCH_VALUE, value);
            if *dn_attributes {
                writer.primitive(tag::DN_ATTRIBUTES, &[0xff]);
            }
            writer.close();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;

    /// The BER a client sends for `filter` (our own writer, as a client library would encode).
    pub(crate) fn encode(filter: &Filter) -> RawFilter {
        let mut buffer = BytesMut::new();
        let mut writer = BerWriter::new(&mut buffer);
        super::write_filter(&mut writer, filter);
        drop(writer);
        RawFilter::new(&buffer, 1_000).expect("well-formed")
    }

    /// Decoding a client's BER gives what the RFC 4515 parser gives, for every kind of item.
    #[test]
    fn decoding_equals_parsing() {
        let settings = ServerSettings::with_defaults(Vec::new());
        let filters = [
            "(uid=bob)",
            "(&(objectClass=person)(|(cn=a*b*c)(!(sn<=x)))(mail>=m)(cn~=jon))",
            "(cn=*)",
            "(cn=ab*)",
            "(cn=*yz)",
            "(cn=\\2a\\28\\29\\5c)",
            "(userPassword=\\ff\\fe)",
            "(jpegPhoto=\\ff\\d8\\ff\\e0)",
            "(cn:caseExactMatch:=Bob)",
            "(cn:dn:2.5.13.5:=x)",
            "(:dn:caseIgnoreMatch:=x)",
            "(cn;lang-en=x)",
            "(cn=)",
            "(&)",
        ];
        for text in filters {
            let parsed = Filter::parse(text, 64).expect(text);
            assert_eq!(
                client_filter(&settings, &encode(&parsed)).expect(text),
                parsed,
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_and_oversized_filters_answer_the_parsers_codes() {
        let settings = ServerSettings::with_defaults(Vec::new());
        // A name with bytes no description may hold names nothing (the item is Undefined),
        // as slapd takes it: not an error.
        for bad_name in ["c n", "caf\u{e9}"] {
            let filter = Filter::Equality {
                description: bad_name.to_string(),
                value: b"x".to_vec(),
            };
            let decoded = client_filter(&settings, &encode(&filter)).expect(bad_name);
            let Filter::Equality { description, .. } = decoded else {
                panic!("{decoded:?}");
            };
            assert_eq!(description, INAPPROPRIATE_NAME);
        }
        let empty_piece = Filter::Substrings {
            description: "cn".to_string(),
            initial: Some(b"a".to_vec()),
            any: vec![Vec::new()],
            final_: None,
        };
        let nameless = Filter::Extensible {
            rule: None,
            description: None,
            value: b"x".to_vec(),
            dn_attributes: false,
        };
        for filter in [empty_piece, nameless] {
            let error = client_filter(&settings, &encode(&filter)).unwrap_err();
            assert_eq!(error.code, code::PROTOCOL_ERROR, "{filter:?}");
        }
        let mut deep = Filter::Present {
            description: "cn".to_string(),
        };
        for _ in 0..settings.filter_depth_max {
            deep = Filter::Not(Box::new(deep));
        }
        let error = client_filter(&settings, &encode(&deep)).unwrap_err();
        assert_eq!(error.code, code::ADMIN_LIMIT_EXCEEDED);
        let Filter::Not(shallower) = deep else {
            unreachable!()
        };
        assert!(client_filter(&settings, &encode(&shallower)).is_ok());
        let wide = Filter::Or(
            (0..=settings.filter_items_max)
                .map(|index| Filter::Present {
                    description: format!("a{index}"),
                })
                .collect(),
        );
        let error = client_filter(&settings, &encode(&wide)).unwrap_err();
        assert_eq!(error.code, code::ADMIN_LIMIT_EXCEEDED);
    }

    /// Pieces after a final or before... an initial: refused, as slapd's get_ssa refuses them.
    #[test]
    fn substring_pieces_must_be_in_order() {
        let settings = ServerSettings::with_defaults(Vec::new());
        let mut buffer = BytesMut::new();
        let mut writer = BerWriter::new(&mut buffer);
        writer.open(tag::SUBSTRINGS);
        writer.octet_string(b"cn");
        writer.open(tag::SEQUENCE);
        writer.primitive(tag::SUBSTRING_ANY, b"b");
        writer.primitive(tag::SUBSTRING_INITIAL, b"a");
        writer.close();
        writer.close();
        drop(writer);
        let raw = RawFilter::new(&buffer, 8).expect("well-formed BER");
        let error = client_filter(&settings, &raw).unwrap_err();
        assert_eq!(error.code, code::PROTOCOL_ERROR);
    }

    #[test]
    fn only_one_well_formed_filter_element_is_a_raw_filter() {
        let raw = encode(&Filter::parse("(cn=x)", 8).expect("parse"));
        let mut two = raw.as_bytes().to_vec();
        two.extend_from_slice(raw.as_bytes());
        assert!(RawFilter::new(&two, 8).is_none());
        let cut = &raw.as_bytes()[..raw.as_bytes().len() - 1];
        assert!(RawFilter::new(cut, 8).is_none());
        assert!(
            RawFilter::new(&[0x04, 0x01, b'x'], 8).is_none(),
            "not a Filter choice"
        );
    }
}
