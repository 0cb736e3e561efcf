//! The matched values control (RFC 3876): a search returns, of each attribute, only the values
//! that match some item of the control's ValuesReturnFilter. As slapd does it, an attribute
//! none of whose values match (including one no item names) is left out of the entry; with
//! typesOnly the types are returned as without the control.
//!
//! Each value is tested by the filter evaluator of lmdir-schema, on a view of the entry that
//! holds only that value, so the items match exactly as the same items would in a search
//! filter (matching rules, subtypes, options). Only attributes the subject may read reach the
//! test (the caller checks first), so the control reveals nothing a plain read would not.

use crate::ber_read::{elements, single_element, SEQUENCE_TAG};
use crate::result::{code, OperationError};
use lmdir_schema::{
    AttrId, AttributeVisitor, EntryView, Filter, PreparedFilter, Schema, StoredValue,
};

pub const MATCHED_VALUES_OID: &str = "1.2.826.0.1.3344810.2.3";

/// Most items one ValuesReturnFilter may hold: every returned value is tested against each
/// item, so this bounds the work per value. Real clients send one or a few.
pub const MATCHED_VALUES_ITEMS_MAX: usize = 64;

fn protocol_error(what: &str) -> OperationError {
    OperationError::new(
        code::PROTOCOL_ERROR,
        format!("control {MATCHED_VALUES_OID}: {what}"),
    )
}

/// ValuesReturnFilter ::= SEQUENCE OF SimpleFilterItem, each item as the filter evaluator
/// reads it. A malformed value is protocolError; more than `MATCHED_VALUES_ITEMS_MAX` items
/// is adminLimitExceeded; an empty sequence is protocolError (RFC 3876 §2: SIZE (1..MAX)).
pub fn decode(value: Option<&[u8]>) -> Result<Vec<Filter>, OperationError> {
    let value = value.ok_or_else(|| protocol_error("missing value"))?;
    let items = single_element(value, SEQUENCE_TAG)
        .and_then(|sequence| elements(sequence.content))
        .ok_or_else(|| protocol_error("value must be a SEQUENCE OF SimpleFilterItem"))?;
    if items.is_empty() {
        return Err(protocol_error("no filter items"));
    }
    if items.len() > MATCHED_VALUES_ITEMS_MAX {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!(
                "control {MATCHED_VALUES_OID}: {} items exceed the limit of {MATCHED_VALUES_ITEMS_MAX}",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .map(|item| {
            crate::filter::simple_filter_item(item).map_err(|error| protocol_error(&error.message))
        })
        .collect()
}

/// A ValuesReturnFilter resolved against the schema for one search.
#[derive(Debug, Clone)]
pub struct ValuesFilter {
    items: Vec<PreparedFilter>,
}

impl ValuesFilter {
    pub fn new(schema: &Schema, items: &[Filter]) -> ValuesFilter {
        ValuesFilter {
            items: items
                .iter()
                .map(|item| schema.prepare_filter(item))
                .collect(),
        }
    }

    /// The values (original forms) of the attribute `attr` with `options` that are returned.
    pub fn kept<'v, N: AsRef<[u8]>>(
        &self,
        attr: AttrId,
        options: &[String],
        values: impl Iterator<Item = (&'v [u8], N)>,
    ) -> Vec<&'v [u8]> {
        values
            .filter(|(original, normalized)| {
                self.keeps(
                    attr,
                    options,
                    StoredValue {
                        original,
                        normalized: normalized.as_ref(),
                    },
                )
            })
            .map(|(original, _)| original)
            .collect()
    }

    /// Whether a value of the attribute `attr` with `options` is returned: some item is True
    /// on it (Undefined and False items keep nothing).
    pub fn keeps(&self, attr: AttrId, options: &[String], value: StoredValue<'_>) -> bool {
        let view = OneValue {
            attr,
            options,
            value,
        };
        self.items.iter().any(|item| item.evaluate(&view).is_true())
    }
}

/// An entry holding one value of one attribute, for testing that value alone.
struct OneValue<'a> {
    attr: AttrId,
    options: &'a [String],
    value: StoredValue<'a>,
}

impl EntryView for OneValue<'_> {
    fn for_each_attribute(&self, visit: &mut AttributeVisitor<'_>) {
        visit(self.attr, self.options, &mut std::iter::once(self.value));
    }

    fn for_each_dn_ava(&self, _visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool) {
        // SimpleFilterItems test attribute values; the DN is not a value of the entry.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ber::{tag, BerWriter};
    use bytes::BytesMut;

    fn encode(write: impl FnOnce(&mut BerWriter<'_>)) -> Vec<u8> {
        let mut buffer = BytesMut::new();
        let mut writer = BerWriter::new(&mut buffer);
        write(&mut writer);
        drop(writer);
        buffer.to_vec()
    }

    fn equality<'a>(description: &'a str, value: &'a str) -> impl Fn(&mut BerWriter<'_>) + 'a {
        move |writer| {
            writer.open(0xa3);
            writer.octet_string(description.as_bytes());
            writer.octet_string(value.as_bytes());
            writer.close();
        }
    }

    #[test]
    fn items_decode_into_filters() {
        let value = encode(|writer| {
            writer.open(tag::SEQUENCE);
            equality("cn", "x")(writer);
            writer.primitive(0x87, b"mail");
            writer.close();
        });
        let filters = decode(Some(&value)).expect("decode");
        assert_eq!(
            filters,
            vec![
                Filter::Equality {
                    description: "cn".to_string(),
                    value: b"x".to_vec()
                },
                Filter::Present {
                    description: "mail".to_string()
                }
            ]
        );
    }

    #[test]
    fn malformed_values_are_protocol_errors_and_too_many_items_a_limit() {
        let and_item = encode(|writer| {
            writer.open(tag::SEQUENCE);
            writer.open(0xa0);
            equality("cn", "x")(writer);
            writer.close();
            writer.close();
        });
        let empty = encode(|writer| {
            writer.open(tag::SEQUENCE);
            writer.close();
        });
        let cut_short = vec![0x30, 0x05, 0xa3, 0x07, 0x04, 0x02, b'c'];
        let not_a_sequence = vec![0x04, 0x00];
        for bad in [and_item, empty, cut_short, not_a_sequence] {
            let error = decode(Some(&bad)).unwrap_err();
            assert_eq!(error.code, code::PROTOCOL_ERROR, "{bad:02x?}");
        }
        assert_eq!(decode(None).unwrap_err().code, code::PROTOCOL_ERROR);
        let many = encode(|writer| {
            writer.open(tag::SEQUENCE);
            for _ in 0..=MATCHED_VALUES_ITEMS_MAX {
                equality("cn", "x")(writer);
            }
            writer.close();
        });
        assert_eq!(
            decode(Some(&many)).unwrap_err().code,
            code::ADMIN_LIMIT_EXCEEDED
        );
    }

    #[test]
    fn values_are_kept_by_the_schema_rules_of_their_type() {
        let schema = Schema::builtin();
        let cn = schema.attribute("cn").unwrap();
        let mail = schema.attribute("mail").unwrap();
        let items = [
            Filter::parse("(name=ALICE*)", 8).unwrap(),
            Filter::parse("(mail=*)", 8).unwrap(),
        ];
        let filter = ValuesFilter::new(&schema, &items);
        let value = |original: &'static [u8], normalized: &'static [u8]| StoredValue {
            original,
            normalized,
        };
        // cn is a subtype of name; caseIgnoreSubstringsMatch.
        assert!(filter.keeps(cn, &[], value(b"Alice Smith", b"alice smith")));
        assert!(!filter.keeps(cn, &[], value(b"Bob", b"bob")));
        assert!(filter.keeps(mail, &[], value(b"a@x", b"a@x")));
        // uid is no subtype of name.
        let uid = schema.attribute("uid").unwrap();
        assert!(!filter.keeps(uid, &[], value(b"Alice", b"alice")));
    }
}
