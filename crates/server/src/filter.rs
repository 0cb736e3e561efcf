//! Client filters (search filters and the assertion control) from their decoded form straight
//! to lmdir-schema's `Filter`: no RFC 4515 text in between. The limits and errors are the text
//! parser's: nesting depth and items (adminLimitExceeded), at most `FILTER_ITEMS_MAX` items,
//! names of descriptor/OID characters only, no empty substring piece, an extensible match
//! naming an attribute or a rule (protocolError otherwise). Unknown attributes, bad assertion
//! values and matching rules are judged when the filter is prepared against the schema
//! (Undefined), exactly as for a parsed filter.

use crate::result::{code, OperationError};
use crate::settings::ServerSettings;
use ldap3_proto::proto::{LdapFilter, LdapMatchingRuleAssertion, LdapSubstringFilter};
use lmdir_schema::{is_filter_name_byte, Filter, FILTER_ITEMS_MAX};

/// A client filter within the configured bounds, converted.
pub fn client_filter(
    settings: &ServerSettings,
    filter: &LdapFilter,
) -> Result<Filter, OperationError> {
    filter_within_limits(settings, filter)?;
    let mut items = 0;
    convert(filter, &mut items)
}

/// Nesting depth and item count (leaves plus substring pieces) of a search or assertion filter.
/// Iterative: it runs before anything recurses over the filter.
pub fn filter_within_limits(
    settings: &ServerSettings,
    filter: &LdapFilter,
) -> Result<(), OperationError> {
    let depth = crate::filter_text::depth(filter);
    if depth > settings.filter_depth_max {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!(
                "filter nesting depth {depth} exceeds the limit of {}",
                settings.filter_depth_max
            ),
        ));
    }
    let items_max = settings.filter_items_max;
    if crate::filter_text::item_count(filter, items_max) > items_max {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!("filter has more than {items_max} items"),
        ));
    }
    Ok(())
}

fn malformed(why: String) -> OperationError {
    OperationError::new(code::PROTOCOL_ERROR, format!("invalid filter: {why}"))
}

/// An attribute description or matching rule name as the text parser accepts it.
fn name(text: &str) -> Result<String, OperationError> {
    if text.is_empty() {
        return Err(malformed("missing attribute description".to_string()));
    }
    if !text.bytes().all(is_filter_name_byte) {
        return Err(malformed(format!(
            "bad name '{}'",
            crate::log_text::bounded(text, 64)
        )));
    }
    Ok(text.to_string())
}

/// Converts one filter (depth already bounded by `filter_within_limits`, so recursing is safe);
/// `items` counts leaves and operators against `FILTER_ITEMS_MAX`, as the parser does.
fn convert(filter: &LdapFilter, items: &mut usize) -> Result<Filter, OperationError> {
    *items += 1;
    if *items > FILTER_ITEMS_MAX {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!("filter has more than {FILTER_ITEMS_MAX} items"),
        ));
    }
    let all = |children: &[LdapFilter], items: &mut usize| {
        children
            .iter()
            .map(|child| convert(child, items))
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(match filter {
        LdapFilter::And(children) => Filter::And(all(children, items)?),
        LdapFilter::Or(children) => Filter::Or(all(children, items)?),
        LdapFilter::Not(child) => Filter::Not(Box::new(convert(child, items)?)),
        LdapFilter::Equality(description, value) => Filter::Equality {
            description: name(description)?,
            value: value.as_bytes().to_vec(),
        },
        LdapFilter::GreaterOrEqual(description, value) => Filter::GreaterOrEqual {
            description: name(description)?,
            value: value.as_bytes().to_vec(),
        },
        LdapFilter::LessOrEqual(description, value) => Filter::LessOrEqual {
            description: name(description)?,
            value: value.as_bytes().to_vec(),
        },
        LdapFilter::Approx(description, value) => Filter::Approx {
            description: name(description)?,
            value: value.as_bytes().to_vec(),
        },
        LdapFilter::Present(description) => Filter::Present {
            description: name(description)?,
        },
        LdapFilter::Substring(description, pieces) => substrings(description, pieces)?,
        LdapFilter::Extensible(assertion) => extensible(assertion)?,
    })
}

/// An empty initial or final piece is no piece; an empty middle piece is malformed. A
/// substring filter with no piece at all reads as presence, as its text form `(a=*)` does.
fn substrings(description: &str, pieces: &LdapSubstringFilter) -> Result<Filter, OperationError> {
    let description = name(description)?;
    if pieces.any.iter().any(String::is_empty) {
        return Err(malformed("empty substring between '*'s".to_string()));
    }
    let piece = |piece: &Option<String>| {
        piece
            .as_deref()
            .filter(|piece| !piece.is_empty())
            .map(|piece| piece.as_bytes().to_vec())
    };
    let (initial, final_) = (piece(&pieces.initial), piece(&pieces.final_));
    if initial.is_none() && final_.is_none() && pieces.any.is_empty() {
        return Ok(Filter::Present { description });
    }
    Ok(Filter::Substrings {
        description,
        initial,
        any: pieces
            .any
            .iter()
            .map(|any| any.as_bytes().to_vec())
            .collect(),
        final_,
    })
}

fn extensible(assertion: &LdapMatchingRuleAssertion) -> Result<Filter, OperationError> {
    let description = match assertion.type_.as_deref() {
        None | Some("") => None,
        Some(description) => Some(name(description)?),
    };
    let rule = match assertion.matching_rule.as_deref() {
        None | Some("") => None,
        Some(rule) => Some(name(rule)?),
    };
    if description.is_none() && rule.is_none() {
        return Err(malformed(
            "extensible match needs an attribute or a matching rule".to_string(),
        ));
    }
    Ok(Filter::Extensible {
        rule,
        description,
        value: assertion.match_value.as_bytes().to_vec(),
        dn_attributes: assertion.dn_attributes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The converter gives what the RFC 4515 round trip gave, for every kind of item.
    #[test]
    fn converting_equals_printing_and_parsing() {
        let settings = ServerSettings::with_defaults(Vec::new());
        let filters = [
            "(uid=bob)",
            "(&(objectClass=person)(|(cn=a*b*c)(!(sn<=x)))(mail>=m)(cn~=jon))",
            "(cn=*)",
            "(cn=ab*)",
            "(cn=*yz)",
            "(cn=\\2a\\28\\29\\5c)",
            "(cn:caseExactMatch:=Bob)",
            "(cn:dn:2.5.13.5:=x)",
            "(:dn:caseIgnoreMatch:=x)",
            "(cn;lang-en=x)",
            "(cn=)",
        ];
        for text in filters {
            let parsed = Filter::parse(text, 64).expect(text);
            let decoded = to_ldap(&parsed);
            assert_eq!(
                client_filter(&settings, &decoded).expect(text),
                parsed,
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_and_oversized_filters_answer_the_parsers_codes() {
        let settings = ServerSettings::with_defaults(Vec::new());
        let bad_name = LdapFilter::Equality("c n".to_string(), "x".to_string());
        let empty_piece = LdapFilter::Substring(
            "cn".to_string(),
            LdapSubstringFilter {
                initial: Some("a".to_string()),
                any: vec![String::new()],
                final_: None,
            },
        );
        let nameless = LdapFilter::Extensible(LdapMatchingRuleAssertion {
            matching_rule: None,
            type_: None,
            match_value: "x".to_string(),
            dn_attributes: false,
        });
        for filter in [bad_name, empty_piece, nameless] {
            let error = client_filter(&settings, &filter).unwrap_err();
            assert_eq!(error.code, code::PROTOCOL_ERROR, "{filter:?}");
        }
        let mut deep = LdapFilter::Present("cn".to_string());
        for _ in 0..=settings.filter_depth_max {
            deep = LdapFilter::Not(Box::new(deep));
        }
        let error = client_filter(&settings, &deep).unwrap_err();
        assert_eq!(error.code, code::ADMIN_LIMIT_EXCEEDED);
    }

    /// The decoded form of a parsed filter (what a client's BER decodes to).
    fn to_ldap(filter: &Filter) -> LdapFilter {
        let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).expect("UTF-8 in tests");
        match filter {
            Filter::And(children) => LdapFilter::And(children.iter().map(to_ldap).collect()),
            Filter::Or(children) => LdapFilter::Or(children.iter().map(to_ldap).collect()),
            Filter::Not(child) => LdapFilter::Not(Box::new(to_ldap(child))),
            Filter::Equality { description, value } => {
                LdapFilter::Equality(description.clone(), text(value))
            }
            Filter::GreaterOrEqual { description, value } => {
                LdapFilter::GreaterOrEqual(description.clone(), text(value))
            }
            Filter::LessOrEqual { description, value } => {
                LdapFilter::LessOrEqual(description.clone(), text(value))
            }
            Filter::Approx { description, value } => {
                LdapFilter::Approx(description.clone(), text(value))
            }
            Filter::Present { description } => LdapFilter::Present(description.clone()),
            Filter::Substrings {
                description,
                initial,
                any,
                final_,
            } => LdapFilter::Substring(
                description.clone(),
                LdapSubstringFilter {
                    initial: initial.as_deref().map(text),
                    any: any.iter().map(|piece| text(piece)).collect(),
                    final_: final_.as_deref().map(text),
                },
            ),
            Filter::Extensible {
                rule,
                description,
                value,
                dn_attributes,
            } => LdapFilter::Extensible(LdapMatchingRuleAssertion {
                matching_rule: rule.clone(),
                type_: description.clone(),
                match_value: text(value),
                dn_attributes: *dn_attributes,
            }),
        }
    }
}
