//! Matching rules (RFC 4517 and the few OpenLDAP ones used by operational attributes), value
//! normalization and order-preserving keys.

use crate::error::LdapError;
use crate::prep::{prepare_ascii_bytes, prepare_string};
use crate::syntax::{parse_generalized_time, parse_integer, validate_oid_or_descr};

/// Longest value any rule normalizes (bytes); longer values are rejected, not truncated.
pub const VALUE_SIZE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// What a matching rule is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchingRuleKind {
    Equality,
    Ordering,
    Substrings,
    /// integerBitAndMatch / integerBitOrMatch: usable in extensible filters only (an attribute
    /// type cannot name one as its EQUALITY rule).
    Bitwise,
    /// OpenLDAP's dnSubtreeMatch, dnOneLevelMatch, dnSubordinateMatch and dnSuperiorMatch: a DN
    /// value's place in the tree relative to the asserted DN, in extensible filters only
    /// (`(entryDN:dnSubtreeMatch:=ou=People,dc=example,dc=com)`, OpenLDAP's test015).
    DnRelation,
    /// Active Directory's LDAP_MATCHING_RULE_IN_CHAIN (1.2.840.113556.1.4.1941) on a DN-valued
    /// attribute: the entry is linked to the asserted DN through a chain of that attribute's
    /// values (`(memberOf:1.2.840.113556.1.4.1941:=cn=top,...)`). The chain is resolved over the
    /// directory once per search (the store's `in_chain_closure`); an entry alone cannot say.
    InChain,
}

/// Where a substring assertion component stands (`initial*any*final`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubstringPosition {
    Initial,
    Any,
    Final,
}

/// How a rule turns a value into its comparable form. Rules of one family produce the same
/// normalized bytes, so a value stored normalized by `caseIgnoreMatch` can be used as is by
/// `caseIgnoreOrderingMatch` and `caseIgnoreSubstringsMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NormalizationFamily {
    CaseIgnore,
    CaseExact,
    CaseIgnoreIa5,
    CaseExactIa5,
    NumericString,
    TelephoneNumber,
    Integer,
    Boolean,
    GeneralizedTime,
    Octet,
    BitString,
    DistinguishedName,
    ObjectIdentifier,
    UniqueMember,
    CaseIgnoreList,
    Uuid,
    Csn,
    /// The OID that starts an RFC 4512 description (`( 2.5.6.0 NAME 'top' ... )`): how the
    /// subschema attributes compare, so `(objectClasses=2.5.6.0)` finds `top`'s definition.
    ObjectIdentifierFirstComponent,
}

macro_rules! matching_rules {
    ($( $variant:ident => ($name:literal, $oid:literal, $kind:ident, $family:ident, $syntax:literal) ),* $(,)?) => {
        /// A matching rule lmdir implements.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum MatchingRule { $( $variant ),* }

        impl MatchingRule {
            /// Every implemented rule, for cn=Subschema.
            pub const ALL: &'static [MatchingRule] = &[ $( MatchingRule::$variant ),* ];

            /// The rule's RFC name (`caseIgnoreMatch`).
            pub fn name(self) -> &'static str {
                match self { $( MatchingRule::$variant => $name ),* }
            }

            /// The rule's numeric OID.
            pub fn oid(self) -> &'static str {
                match self { $( MatchingRule::$variant => $oid ),* }
            }

            pub fn kind(self) -> MatchingRuleKind {
                match self { $( MatchingRule::$variant => MatchingRuleKind::$kind ),* }
            }

            pub fn family(self) -> NormalizationFamily {
                match self { $( MatchingRule::$variant => NormalizationFamily::$family ),* }
            }

            /// OID of the assertion syntax, for the rule's definition.
            pub fn syntax_oid(self) -> &'static str {
                match self { $( MatchingRule::$variant => $syntax ),* }
            }
        }
    };
}

matching_rules! {
    ObjectIdentifierMatch => ("objectIdentifierMatch", "2.5.13.0", Equality, ObjectIdentifier, "1.3.6.1.4.1.1466.115.121.1.38"),
    ObjectIdentifierFirstComponentMatch => ("objectIdentifierFirstComponentMatch", "2.5.13.30", Equality, ObjectIdentifierFirstComponent, "1.3.6.1.4.1.1466.115.121.1.38"),
    DistinguishedNameMatch => ("distinguishedNameMatch", "2.5.13.1", Equality, DistinguishedName, "1.3.6.1.4.1.1466.115.121.1.12"),
    CaseIgnoreMatch => ("caseIgnoreMatch", "2.5.13.2", Equality, CaseIgnore, "1.3.6.1.4.1.1466.115.121.1.15"),
    CaseIgnoreOrderingMatch => ("caseIgnoreOrderingMatch", "2.5.13.3", Ordering, CaseIgnore, "1.3.6.1.4.1.1466.115.121.1.15"),
    CaseIgnoreSubstringsMatch => ("caseIgnoreSubstringsMatch", "2.5.13.4", Substrings, CaseIgnore, "1.3.6.1.4.1.1466.115.121.1.58"),
    CaseExactMatch => ("caseExactMatch", "2.5.13.5", Equality, CaseExact, "1.3.6.1.4.1.1466.115.121.1.15"),
    CaseExactOrderingMatch => ("caseExactOrderingMatch", "2.5.13.6", Ordering, CaseExact, "1.3.6.1.4.1.1466.115.121.1.15"),
    CaseExactSubstringsMatch => ("caseExactSubstringsMatch", "2.5.13.7", Substrings, CaseExact, "1.3.6.1.4.1.1466.115.121.1.58"),
    NumericStringMatch => ("numericStringMatch", "2.5.13.8", Equality, NumericString, "1.3.6.1.4.1.1466.115.121.1.36"),
    NumericStringOrderingMatch => ("numericStringOrderingMatch", "2.5.13.9", Ordering, NumericString, "1.3.6.1.4.1.1466.115.121.1.36"),
    NumericStringSubstringsMatch => ("numericStringSubstringsMatch", "2.5.13.10", Substrings, NumericString, "1.3.6.1.4.1.1466.115.121.1.58"),
    CaseIgnoreListMatch => ("caseIgnoreListMatch", "2.5.13.11", Equality, CaseIgnoreList, "1.3.6.1.4.1.1466.115.121.1.41"),
    CaseIgnoreListSubstringsMatch => ("caseIgnoreListSubstringsMatch", "2.5.13.12", Substrings, CaseIgnoreList, "1.3.6.1.4.1.1466.115.121.1.58"),
    BooleanMatch => ("booleanMatch", "2.5.13.13", Equality, Boolean, "1.3.6.1.4.1.1466.115.121.1.7"),
    IntegerMatch => ("integerMatch", "2.5.13.14", Equality, Integer, "1.3.6.1.4.1.1466.115.121.1.27"),
    IntegerOrderingMatch => ("integerOrderingMatch", "2.5.13.15", Ordering, Integer, "1.3.6.1.4.1.1466.115.121.1.27"),
    BitStringMatch => ("bitStringMatch", "2.5.13.16", Equality, BitString, "1.3.6.1.4.1.1466.115.121.1.6"),
    OctetStringMatch => ("octetStringMatch", "2.5.13.17", Equality, Octet, "1.3.6.1.4.1.1466.115.121.1.40"),
    OctetStringOrderingMatch => ("octetStringOrderingMatch", "2.5.13.18", Ordering, Octet, "1.3.6.1.4.1.1466.115.121.1.40"),
    TelephoneNumberMatch => ("telephoneNumberMatch", "2.5.13.20", Equality, TelephoneNumber, "1.3.6.1.4.1.1466.115.121.1.50"),
    TelephoneNumberSubstringsMatch => ("telephoneNumberSubstringsMatch", "2.5.13.21", Substrings, TelephoneNumber, "1.3.6.1.4.1.1466.115.121.1.58"),
    UniqueMemberMatch => ("uniqueMemberMatch", "2.5.13.23", Equality, UniqueMember, "1.3.6.1.4.1.1466.115.121.1.34"),
    GeneralizedTimeMatch => ("generalizedTimeMatch", "2.5.13.27", Equality, GeneralizedTime, "1.3.6.1.4.1.1466.115.121.1.24"),
    GeneralizedTimeOrderingMatch => ("generalizedTimeOrderingMatch", "2.5.13.28", Ordering, GeneralizedTime, "1.3.6.1.4.1.1466.115.121.1.24"),
    CaseExactIa5Match => ("caseExactIA5Match", "1.3.6.1.4.1.1466.109.114.1", Equality, CaseExactIa5, "1.3.6.1.4.1.1466.115.121.1.26"),
    CaseIgnoreIa5Match => ("caseIgnoreIA5Match", "1.3.6.1.4.1.1466.109.114.2", Equality, CaseIgnoreIa5, "1.3.6.1.4.1.1466.115.121.1.26"),
    CaseIgnoreIa5SubstringsMatch => ("caseIgnoreIA5SubstringsMatch", "1.3.6.1.4.1.1466.109.114.3", Substrings, CaseIgnoreIa5, "1.3.6.1.4.1.1466.115.121.1.58"),
    CaseExactIa5SubstringsMatch => ("caseExactIA5SubstringsMatch", "1.3.6.1.4.1.4203.1.2.1", Substrings, CaseExactIa5, "1.3.6.1.4.1.1466.115.121.1.58"),
    UuidMatch => ("UUIDMatch", "1.3.6.1.1.16.2", Equality, Uuid, "1.3.6.1.1.16.1"),
    UuidOrderingMatch => ("UUIDOrderingMatch", "1.3.6.1.1.16.3", Ordering, Uuid, "1.3.6.1.1.16.1"),
    CsnMatch => ("CSNMatch", "1.3.6.1.4.1.4203.666.11.2.2", Equality, Csn, "1.3.6.1.4.1.4203.666.11.2.1"),
    CsnOrderingMatch => ("CSNOrderingMatch", "1.3.6.1.4.1.4203.666.11.2.3", Ordering, Csn, "1.3.6.1.4.1.4203.666.11.2.1"),
    // Active Directory's bitwise rules, which slapd implements too; many applications filter
    // with them (`(userAccountControl:1.2.840.113556.1.4.803:=2)`).
    IntegerBitAndMatch => ("integerBitAndMatch", "1.2.840.113556.1.4.803", Bitwise, Integer, "1.3.6.1.4.1.1466.115.121.1.27"),
    IntegerBitOrMatch => ("integerBitOrMatch", "1.2.840.113556.1.4.804", Bitwise, Integer, "1.3.6.1.4.1.1466.115.121.1.27"),
    // slapd's built-in DN relation rules (the OIDs slapd answers to).
    DnOneLevelMatch => ("dnOneLevelMatch", "1.3.6.1.4.1.4203.666.4.8", DnRelation, DistinguishedName, "1.3.6.1.4.1.1466.115.121.1.12"),
    DnSubtreeMatch => ("dnSubtreeMatch", "1.3.6.1.4.1.4203.666.4.9", DnRelation, DistinguishedName, "1.3.6.1.4.1.1466.115.121.1.12"),
    DnSubordinateMatch => ("dnSubordinateMatch", "1.3.6.1.4.1.4203.666.4.10", DnRelation, DistinguishedName, "1.3.6.1.4.1.1466.115.121.1.12"),
    DnSuperiorMatch => ("dnSuperiorMatch", "1.3.6.1.4.1.4203.666.4.11", DnRelation, DistinguishedName, "1.3.6.1.4.1.1466.115.121.1.12"),
    // Active Directory's in-chain rule (nested groups); AD gives it no descriptor, this is ours.
    InChainMatch => ("inChainMatch", "1.2.840.113556.1.4.1941", InChain, DistinguishedName, "1.3.6.1.4.1.1466.115.121.1.12"),
}

impl MatchingRule {
    /// Finds a rule by name (case-insensitive) or numeric OID.
    pub fn by_name_or_oid(name_or_oid: &str) -> Option<MatchingRule> {
        let wanted = name_or_oid.trim();
        MatchingRule::ALL
            .iter()
            .copied()
            .find(|rule| rule.oid() == wanted || rule.name().eq_ignore_ascii_case(wanted))
    }

    /// The equality rule of this rule's family, used to normalize values when an ordering or
    /// substrings rule is named in an extensible match.
    pub fn equality_rule(self) -> MatchingRule {
        match self.family() {
            NormalizationFamily::CaseIgnore => MatchingRule::CaseIgnoreMatch,
            NormalizationFamily::CaseExact => MatchingRule::CaseExactMatch,
            NormalizationFamily::CaseIgnoreIa5 => MatchingRule::CaseIgnoreIa5Match,
            NormalizationFamily::CaseExactIa5 => MatchingRule::CaseExactIa5Match,
            NormalizationFamily::NumericString => MatchingRule::NumericStringMatch,
            NormalizationFamily::TelephoneNumber => MatchingRule::TelephoneNumberMatch,
            NormalizationFamily::Integer => MatchingRule::IntegerMatch,
            NormalizationFamily::Boolean => MatchingRule::BooleanMatch,
            NormalizationFamily::GeneralizedTime => MatchingRule::GeneralizedTimeMatch,
            NormalizationFamily::Octet => MatchingRule::OctetStringMatch,
            NormalizationFamily::BitString => MatchingRule::BitStringMatch,
            NormalizationFamily::DistinguishedName => MatchingRule::DistinguishedNameMatch,
            NormalizationFamily::ObjectIdentifier => MatchingRule::ObjectIdentifierMatch,
            NormalizationFamily::UniqueMember => MatchingRule::UniqueMemberMatch,
            NormalizationFamily::CaseIgnoreList => MatchingRule::CaseIgnoreListMatch,
            NormalizationFamily::Uuid => MatchingRule::UuidMatch,
            NormalizationFamily::Csn => MatchingRule::CsnMatch,
            NormalizationFamily::ObjectIdentifierFirstComponent => {
                MatchingRule::ObjectIdentifierFirstComponentMatch
            }
        }
    }

    /// Whether an attribute of this syntax can be matched with this rule when an extensible
    /// filter names the rule but no attribute (OpenLDAP's compatible syntaxes: string rules also
    /// apply to printable, country and telephone number strings).
    pub fn applies_to_syntax(self, syntax_oid: &str) -> bool {
        const DIRECTORY_STRING_COMPATIBLE: &[&str] = &[
            "1.3.6.1.4.1.1466.115.121.1.15",
            "1.3.6.1.4.1.1466.115.121.1.11",
            "1.3.6.1.4.1.1466.115.121.1.44",
            "1.3.6.1.4.1.1466.115.121.1.50",
        ];
        match self.family() {
            NormalizationFamily::CaseIgnore | NormalizationFamily::CaseExact => {
                DIRECTORY_STRING_COMPATIBLE.contains(&syntax_oid)
            }
            _ => self.equality_rule().syntax_oid() == syntax_oid,
        }
    }

    /// RFC 4512 definition for cn=Subschema's matchingRules.
    pub fn definition_string(self) -> String {
        format!(
            "( {} NAME '{}' SYNTAX {} )",
            self.oid(),
            self.name(),
            self.syntax_oid()
        )
    }

    /// Normalizes an attribute value (or a whole assertion value) for comparison. An invalid value
    /// is invalidAttributeSyntax. DN-based rules use the built-in schema to normalize attribute
    /// names; `Schema::normalize_value` uses the server's own schema instead.
    pub fn normalize(&self, value: &[u8]) -> Result<Vec<u8>, LdapError> {
        match self.family() {
            NormalizationFamily::DistinguishedName
            | NormalizationFamily::UniqueMember
            | NormalizationFamily::ObjectIdentifierFirstComponent => {
                crate::schema::Schema::builtin_shared().normalize_with_rule(*self, value)
            }
            _ => normalize_without_schema(self.family(), value),
        }
    }

    /// Normalizes one substring assertion piece (initial, any or final). Pieces of
    /// space-insensitive string rules are trimmed and collapsed like values.
    pub fn normalize_substring_piece(&self, piece: &[u8]) -> Result<Vec<u8>, LdapError> {
        match self.family() {
            NormalizationFamily::CaseIgnore
            | NormalizationFamily::CaseExact
            | NormalizationFamily::CaseIgnoreIa5
            | NormalizationFamily::CaseExactIa5
            | NormalizationFamily::NumericString
            | NormalizationFamily::TelephoneNumber
            | NormalizationFamily::CaseIgnoreList => normalize_without_schema(self.family(), piece),
            _ => Ok(piece.to_vec()),
        }
    }

    /// `normalize_substring_piece` for a piece at `position` of the assertion, as slapd's
    /// `UTF8StringNormalize` prepares substring components of directory strings: a space
    /// (after NFKC) at the edge next to a `*` stays, one space for a run (an initial piece keeps
    /// its trailing space, a final one its leading space, an any piece both), so `(cn=a *)`
    /// does not match `ab`.
    pub fn normalize_substring_piece_at(
        &self,
        piece: &[u8],
        position: SubstringPosition,
    ) -> Result<Vec<u8>, LdapError> {
        let mut normalized = self.normalize_substring_piece(piece)?;
        let directory_string = matches!(
            self.family(),
            NormalizationFamily::CaseIgnore | NormalizationFamily::CaseExact
        );
        if !directory_string || normalized.is_empty() || normalized == b" " {
            return Ok(normalized);
        }
        let text = utf8(piece)?;
        let (leading, trailing) = crate::prep::edge_spaces(text);
        if leading && position != SubstringPosition::Initial {
            normalized.insert(0, b' ');
        }
        if trailing && position != SubstringPosition::Final {
            normalized.push(b' ');
        }
        Ok(normalized)
    }

    /// For the bitwise rules: whether a normalized integer value matches the asserted bits
    /// (all of them for integerBitAndMatch, any for integerBitOrMatch), as 64-bit two's
    /// complement integers like slapd's. A value out of that range matches nothing; every
    /// other rule answers false.
    pub fn bitwise_matches(&self, normalized_value: &[u8], asserted: i64) -> bool {
        let Some(value) = integer_as_i64(normalized_value) else {
            return false;
        };
        match self {
            MatchingRule::IntegerBitAndMatch => value & asserted == asserted,
            MatchingRule::IntegerBitOrMatch => value & asserted != 0,
            _ => false,
        }
    }

    /// For the DnRelation rules: whether the normalized DN `value` stands to the normalized
    /// `asserted` DN as the rule says (subtree: at or below; one level: a child; subordinate:
    /// strictly below; superior: strictly above).
    pub fn dn_relation_matches(&self, value: &[u8], asserted: &[u8]) -> bool {
        use crate::dn::{
            normalized_dn_is_descendant_of, normalized_dn_is_within, normalized_dn_parent,
        };
        let (Ok(value), Ok(asserted)) = (std::str::from_utf8(value), std::str::from_utf8(asserted))
        else {
            return false;
        };
        match self {
            MatchingRule::DnSubtreeMatch => normalized_dn_is_within(value, asserted),
            MatchingRule::DnOneLevelMatch => normalized_dn_parent(value) == Some(asserted),
            MatchingRule::DnSubordinateMatch => normalized_dn_is_descendant_of(value, asserted),
            MatchingRule::DnSuperiorMatch => normalized_dn_is_descendant_of(asserted, value),
            _ => false,
        }
    }

    /// Turns a value normalized by this rule's family into a key whose memcmp order is the rule's
    /// order: integers become sign byte + length-prefixed big-endian magnitude (negatives
    /// complemented), generalized times their digits without `.`/`Z` (so shorter fractions sort
    /// first), strings their normalized UTF-8 (code point order).
    pub fn ordering_key(&self, normalized: &[u8]) -> Vec<u8> {
        match self.family() {
            NormalizationFamily::Integer => integer_ordering_key(normalized),
            NormalizationFamily::GeneralizedTime => normalized
                .iter()
                .copied()
                .filter(|byte| byte.is_ascii_digit())
                .collect(),
            _ => normalized.to_vec(),
        }
    }
}

/// Normalization for every family that needs no schema (all but DN-based ones).
pub(crate) fn normalize_without_schema(
    family: NormalizationFamily,
    value: &[u8],
) -> Result<Vec<u8>, LdapError> {
    if value.len() > VALUE_SIZE_BYTES_MAX {
        return Err(LdapError::invalid_syntax(format!(
            "value of {} bytes exceeds the limit of {VALUE_SIZE_BYTES_MAX} bytes",
            value.len()
        )));
    }
    match family {
        NormalizationFamily::CaseIgnore | NormalizationFamily::CaseExact if value.is_ascii() => {
            let mut output = Vec::with_capacity(value.len());
            prepare_ascii_bytes(
                value,
                family == NormalizationFamily::CaseIgnore,
                &mut output,
            );
            Ok(output)
        }
        NormalizationFamily::CaseIgnore | NormalizationFamily::CaseExact => {
            let text = utf8(value)?;
            let mut output = String::with_capacity(text.len());
            prepare_string(text, family == NormalizationFamily::CaseIgnore, &mut output);
            Ok(output.into_bytes())
        }
        NormalizationFamily::CaseIgnoreIa5 | NormalizationFamily::CaseExactIa5 => {
            if !value.is_ascii() {
                return Err(LdapError::invalid_syntax(
                    "IA5 string contains a non-ASCII byte",
                ));
            }
            let mut output = Vec::with_capacity(value.len());
            prepare_ascii_bytes(
                value,
                family == NormalizationFamily::CaseIgnoreIa5,
                &mut output,
            );
            Ok(output)
        }
        NormalizationFamily::NumericString => {
            let mut output = Vec::with_capacity(value.len());
            for &byte in value {
                match byte {
                    b'0'..=b'9' => output.push(byte),
                    b' ' => {}
                    _ => {
                        return Err(LdapError::invalid_syntax(
                            "numeric string may hold only digits and spaces",
                        ))
                    }
                }
            }
            Ok(output)
        }
        // slapd's telephoneNumberNormalize: spaces and hyphens removed, nothing else (no case
        // folding: the syntax is a printable string, compared as it is).
        NormalizationFamily::TelephoneNumber => Ok(value
            .iter()
            .copied()
            .filter(|byte| *byte != b' ' && *byte != b'-')
            .collect()),
        NormalizationFamily::Integer => parse_integer(value).map(|(negative, digits)| {
            let mut output = Vec::with_capacity(digits.len() + 1);
            if negative {
                output.push(b'-');
            }
            output.extend_from_slice(digits);
            output
        }),
        NormalizationFamily::Boolean => {
            if value.eq_ignore_ascii_case(b"TRUE") {
                Ok(b"TRUE".to_vec())
            } else if value.eq_ignore_ascii_case(b"FALSE") {
                Ok(b"FALSE".to_vec())
            } else {
                Err(LdapError::invalid_syntax("boolean must be TRUE or FALSE"))
            }
        }
        NormalizationFamily::GeneralizedTime => {
            parse_generalized_time(value).map(String::into_bytes)
        }
        NormalizationFamily::Octet | NormalizationFamily::Csn => Ok(value.to_vec()),
        NormalizationFamily::BitString => {
            let valid = value.len() >= 3
                && value[0] == b'\''
                && value.ends_with(b"'B")
                && value[1..value.len() - 2]
                    .iter()
                    .all(|byte| *byte == b'0' || *byte == b'1');
            if valid {
                Ok(value.to_vec())
            } else {
                Err(LdapError::invalid_syntax(
                    "bit string must look like '0101'B",
                ))
            }
        }
        NormalizationFamily::ObjectIdentifier => {
            let text = utf8(value)?.trim();
            validate_oid_or_descr(text)?;
            Ok(text.to_ascii_lowercase().into_bytes())
        }
        NormalizationFamily::CaseIgnoreList => {
            let text = utf8(value)?;
            let mut output = String::with_capacity(text.len());
            let mut line = String::new();
            for (index, part) in text.split('$').enumerate() {
                if index > 0 {
                    output.push('$');
                }
                prepare_string(part, true, &mut line);
                output.push_str(&line);
            }
            Ok(output.into_bytes())
        }
        NormalizationFamily::Uuid => {
            let text = utf8(value)?;
            let bytes = text.as_bytes();
            let valid = bytes.len() == 36
                && bytes.iter().enumerate().all(|(index, byte)| match index {
                    8 | 13 | 18 | 23 => *byte == b'-',
                    _ => byte.is_ascii_hexdigit(),
                });
            if valid {
                Ok(text.to_ascii_lowercase().into_bytes())
            } else {
                Err(LdapError::invalid_syntax(
                    "UUID must be 8-4-4-4-12 hex digits",
                ))
            }
        }
        NormalizationFamily::DistinguishedName
        | NormalizationFamily::UniqueMember
        | NormalizationFamily::ObjectIdentifierFirstComponent => {
            unreachable!(
                "DN and OID-name normalization need a schema; callers route it through Schema"
            )
        }
    }
}

pub(crate) fn utf8(value: &[u8]) -> Result<&str, LdapError> {
    std::str::from_utf8(value).map_err(|_| LdapError::invalid_syntax("value is not valid UTF-8"))
}

/// A normalized integer (`-?[1-9][0-9]*|0`) as an i64; None when it does not fit.
pub(crate) fn integer_as_i64(normalized: &[u8]) -> Option<i64> {
    std::str::from_utf8(normalized).ok()?.parse().ok()
}

/// Sign byte: negative < zero < positive.
const SIGN_NEGATIVE: u8 = 0x00;
const SIGN_ZERO: u8 = 0x01;
const SIGN_POSITIVE: u8 = 0x02;

/// Key of a normalized integer (`-?[1-9][0-9]*|0`). Malformed input (never produced by
/// normalize) sorts as zero.
fn integer_ordering_key(normalized: &[u8]) -> Vec<u8> {
    let (negative, digits) = match normalized.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, normalized),
    };
    if digits.is_empty() || digits == b"0" || !digits.iter().all(u8::is_ascii_digit) {
        return vec![SIGN_ZERO];
    }
    let magnitude = decimal_to_big_endian(digits);
    let length = u16::try_from(magnitude.len()).unwrap_or(u16::MAX);
    let mut key = Vec::with_capacity(magnitude.len() + 3);
    if negative {
        key.push(SIGN_NEGATIVE);
        key.extend_from_slice(&(!length).to_be_bytes());
        key.extend(magnitude.iter().map(|byte| !byte));
    } else {
        key.push(SIGN_POSITIVE);
        key.extend_from_slice(&length.to_be_bytes());
        key.extend_from_slice(&magnitude);
    }
    key
}

/// Decimal digits (no leading zeros) to big-endian binary without leading zero bytes.
fn decimal_to_big_endian(digits: &[u8]) -> Vec<u8> {
    if digits.len() <= 38 {
        let value = digits.iter().fold(0u128, |accumulator, digit| {
            accumulator * 10 + u128::from(digit - b'0')
        });
        let bytes = value.to_be_bytes();
        let first_nonzero = bytes
            .iter()
            .position(|byte| *byte != 0)
            .unwrap_or(bytes.len() - 1);
        return bytes[first_nonzero..].to_vec();
    }
    // Little-endian base-256 accumulator: multiply by 10, add the digit.
    let mut little_endian: Vec<u8> = vec![0];
    for digit in digits {
        let mut carry = u32::from(digit - b'0');
        for byte in little_endian.iter_mut() {
            let product = u32::from(*byte) * 10 + carry;
            *byte = (product & 0xFF) as u8;
            carry = product >> 8;
        }
        while carry > 0 {
            little_endian.push((carry & 0xFF) as u8);
            carry >>= 8;
        }
    }
    while little_endian.len() > 1 && little_endian.last() == Some(&0) {
        little_endian.pop();
    }
    little_endian.reverse();
    little_endian
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn normalized(rule: MatchingRule, value: &str) -> String {
        String::from_utf8(rule.normalize(value.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn rules_are_found_by_name_and_oid() {
        assert_eq!(
            MatchingRule::by_name_or_oid("caseignorematch"),
            Some(MatchingRule::CaseIgnoreMatch)
        );
        assert_eq!(
            MatchingRule::by_name_or_oid("2.5.13.15"),
            Some(MatchingRule::IntegerOrderingMatch)
        );
        assert_eq!(
            MatchingRule::by_name_or_oid("caseIgnoreIA5Match"),
            Some(MatchingRule::CaseIgnoreIa5Match)
        );
        assert_eq!(MatchingRule::by_name_or_oid("noSuchMatch"), None);
        for rule in MatchingRule::ALL {
            assert_eq!(MatchingRule::by_name_or_oid(rule.oid()), Some(*rule));
            assert_eq!(MatchingRule::by_name_or_oid(rule.name()), Some(*rule));
            assert_eq!(rule.equality_rule().family(), rule.family());
            assert_eq!(rule.equality_rule().kind(), MatchingRuleKind::Equality);
        }
    }

    #[test]
    fn case_rules() {
        assert_eq!(
            normalized(MatchingRule::CaseIgnoreMatch, "  Barbara  JENSEN "),
            "barbara jensen"
        );
        assert_eq!(
            normalized(MatchingRule::CaseExactMatch, "  Barbara  JENSEN "),
            "Barbara JENSEN"
        );
        assert_eq!(
            normalized(MatchingRule::CaseIgnoreIa5Match, "User@Example.COM"),
            "user@example.com"
        );
        assert_eq!(
            normalized(MatchingRule::CaseExactIa5Match, "/home/Bob "),
            "/home/Bob"
        );
        assert_eq!(
            MatchingRule::CaseIgnoreIa5Match
                .normalize("Kraków".as_bytes())
                .unwrap_err()
                .code,
            crate::ResultCode::InvalidAttributeSyntax
        );
        assert!(MatchingRule::CaseIgnoreMatch
            .normalize(&[0xFF, 0xFE])
            .is_err());
        assert_eq!(
            normalized(MatchingRule::CaseIgnoreListMatch, "1 Main St $ SPRINGFIELD"),
            "1 main st$springfield"
        );
    }

    #[test]
    fn substring_pieces_keep_the_spaces_next_to_a_star() {
        let piece = |text: &str, position| {
            String::from_utf8(
                MatchingRule::CaseIgnoreSubstringsMatch
                    .normalize_substring_piece_at(text.as_bytes(), position)
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(piece("  A  B  ", SubstringPosition::Initial), "a b ");
        assert_eq!(piece("  A  B  ", SubstringPosition::Any), " a b ");
        assert_eq!(piece("  A  B  ", SubstringPosition::Final), " a b");
        assert_eq!(piece("\u{3000}A", SubstringPosition::Final), " a");
        assert_eq!(piece("   ", SubstringPosition::Any), " ");
    }

    #[test]
    fn numeric_and_telephone_rules() {
        assert_eq!(
            normalized(MatchingRule::NumericStringMatch, " 123 456 "),
            "123456"
        );
        assert!(MatchingRule::NumericStringMatch.normalize(b"12a").is_err());
        assert_eq!(
            normalized(MatchingRule::TelephoneNumberMatch, "+1 555-123 4567"),
            "+15551234567"
        );
        assert_eq!(
            normalized(MatchingRule::TelephoneNumberSubstringsMatch, "555-12"),
            "55512"
        );
        assert_eq!(
            MatchingRule::TelephoneNumberSubstringsMatch
                .normalize_substring_piece(b" 12-3 ")
                .unwrap(),
            b"123"
        );
        // As slapd: no case folding, and no edge spaces kept in substring pieces.
        assert_eq!(
            MatchingRule::TelephoneNumberSubstringsMatch
                .normalize_substring_piece_at(b" 12 ", SubstringPosition::Any)
                .unwrap(),
            b"12"
        );
        assert_eq!(
            normalized(MatchingRule::TelephoneNumberMatch, "+1 555 CALL"),
            "+1555CALL"
        );
    }

    #[test]
    fn integer_boolean_uuid_bitstring_rules() {
        // RFC 4517 3.3.16 and OpenLDAP: no leading zeros, no negative zero.
        assert!(MatchingRule::IntegerMatch.normalize(b"0042").is_err());
        assert!(MatchingRule::IntegerMatch.normalize(b"-0").is_err());
        assert_eq!(normalized(MatchingRule::IntegerMatch, "0"), "0");
        assert_eq!(normalized(MatchingRule::IntegerMatch, "42"), "42");
        assert_eq!(normalized(MatchingRule::IntegerMatch, "-17"), "-17");
        assert!(MatchingRule::IntegerMatch.normalize(b"4x").is_err());
        assert!(MatchingRule::IntegerMatch.normalize(b"").is_err());
        assert!(MatchingRule::IntegerMatch.normalize(b"-").is_err());
        assert_eq!(normalized(MatchingRule::BooleanMatch, "true"), "TRUE");
        assert!(MatchingRule::BooleanMatch.normalize(b"yes").is_err());
        assert_eq!(
            normalized(
                MatchingRule::UuidMatch,
                "9C1B6E3A-1D2F-4C5B-8A9E-0123456789AB"
            ),
            "9c1b6e3a-1d2f-4c5b-8a9e-0123456789ab"
        );
        assert!(MatchingRule::UuidMatch.normalize(b"not-a-uuid").is_err());
        assert_eq!(
            normalized(MatchingRule::BitStringMatch, "'0101'B"),
            "'0101'B"
        );
        assert!(MatchingRule::BitStringMatch.normalize(b"'012'B").is_err());
        assert_eq!(normalized(MatchingRule::OctetStringMatch, " AbC "), " AbC ");
        assert_eq!(
            normalized(MatchingRule::ObjectIdentifierMatch, "InetOrgPerson"),
            "inetorgperson"
        );
        assert_eq!(
            normalized(MatchingRule::ObjectIdentifierMatch, "2.5.6.6"),
            "2.5.6.6"
        );
        assert!(MatchingRule::ObjectIdentifierMatch
            .normalize(b"1..2")
            .is_err());
        assert!(MatchingRule::ObjectIdentifierMatch
            .normalize(b"-x")
            .is_err());
    }

    #[test]
    fn generalized_time_rule_converts_to_utc() {
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "20261121232323Z"),
            "20261121232323Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "202611212323Z"),
            "20261121232300Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "2026112123Z"),
            "20261121230000Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "20261121232323.500Z"),
            "20261121232323.5Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "20261121232323,25Z"),
            "20261121232323.25Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "20261121232323.0Z"),
            "20261121232323Z"
        );
        // Fraction of an hour and of a minute.
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "2026112123.5Z"),
            "20261121233000Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "202611212323.25Z"),
            "20261121232315Z"
        );
        // Offsets cross day, month and year boundaries.
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "20261231233000-0100"),
            "20270101003000Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "20260301003000+0200"),
            "20260228223000Z"
        );
        assert_eq!(
            normalized(MatchingRule::GeneralizedTimeMatch, "20240301003000+01"),
            "20240229233000Z"
        );
        for invalid in [
            "2026112123",
            "20261321000000Z",
            "20260230000000Z",
            "20261121246000Z",
            "2026112123+2500",
            "x",
            "",
        ] {
            assert!(
                MatchingRule::GeneralizedTimeMatch
                    .normalize(invalid.as_bytes())
                    .is_err(),
                "{invalid}"
            );
        }
    }

    #[test]
    fn generalized_time_ordering_keys_follow_time_order() {
        let ordered = [
            "19700101000000Z",
            "20261121232323Z",
            "20261121232323.05Z",
            "20261121232323.5Z",
            "20261121232324Z",
        ];
        let keys: Vec<Vec<u8>> = ordered
            .iter()
            .map(|time| {
                let rule = MatchingRule::GeneralizedTimeOrderingMatch;
                rule.ordering_key(&rule.normalize(time.as_bytes()).unwrap())
            })
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]), "{keys:?}");
    }

    #[test]
    fn integer_ordering_keys_of_big_numbers() {
        let rule = MatchingRule::IntegerOrderingMatch;
        let key = |text: &str| rule.ordering_key(&rule.normalize(text.as_bytes()).unwrap());
        let huge = "9".repeat(60);
        let huger = format!("1{}", "0".repeat(60));
        assert!(key(&huge) < key(&huger));
        assert!(key(&format!("-{huger}")) < key(&format!("-{huge}")));
        assert!(key(&format!("-{huge}")) < key("-1"));
        assert!(key("-1") < key("0"));
        assert!(key("0") < key("1"));
        assert_eq!(decimal_to_big_endian(b"256"), vec![1, 0]);
        assert_eq!(decimal_to_big_endian(huger.as_bytes()), {
            // 10^60 computed by the u128-free path must agree with repeated multiplication.
            let mut expected = vec![1u8];
            for _ in 0..60 {
                let mut carry = 0u32;
                for byte in expected.iter_mut().rev() {
                    let product = u32::from(*byte) * 10 + carry;
                    *byte = (product & 0xFF) as u8;
                    carry = product >> 8;
                }
                while carry > 0 {
                    expected.insert(0, (carry & 0xFF) as u8);
                    carry >>= 8;
                }
            }
            expected
        });
    }

    /// A valid sample value and a larger one (in the rule's order) per family.
    fn sample_pair(family: NormalizationFamily) -> (&'static str, &'static str) {
        match family {
            NormalizationFamily::CaseIgnore | NormalizationFamily::CaseIgnoreList => {
                ("Apple", "banana")
            }
            NormalizationFamily::CaseExact => ("Banana", "apple"),
            NormalizationFamily::CaseIgnoreIa5 => ("a@x", "B@x"),
            NormalizationFamily::CaseExactIa5 => ("B", "a"),
            NormalizationFamily::NumericString => ("1 2", "13"),
            NormalizationFamily::TelephoneNumber => ("+1 555", "+1-556"),
            NormalizationFamily::Integer => ("-10", "9"),
            NormalizationFamily::Boolean => ("FALSE", "TRUE"),
            NormalizationFamily::GeneralizedTime => ("20260101000000+0100", "20260101000000Z"),
            NormalizationFamily::Octet | NormalizationFamily::Csn => ("\u{1}a", "b"),
            NormalizationFamily::BitString => ("'01'B", "'1'B"),
            NormalizationFamily::DistinguishedName => ("CN=A,DC=X", "cn=b,dc=x"),
            NormalizationFamily::ObjectIdentifier => ("1.2.3", "Person"),
            NormalizationFamily::ObjectIdentifierFirstComponent => {
                ("( 1.2.3 NAME 'x' )", "( 1.2.4 )")
            }
            NormalizationFamily::UniqueMember => ("cn=a#'01'B", "cn=b"),
            NormalizationFamily::Uuid => (
                "00000000-0000-0000-0000-00000000000A",
                "00000000-0000-0000-0000-00000000000b",
            ),
        }
    }

    #[test]
    fn every_rule_normalizes_and_orders_its_samples() {
        for rule in MatchingRule::ALL {
            let (smaller, larger) = sample_pair(rule.family());
            let smaller_normalized = rule
                .normalize(smaller.as_bytes())
                .unwrap_or_else(|error| panic!("{}: {error}", rule.name()));
            let larger_normalized = rule
                .normalize(larger.as_bytes())
                .unwrap_or_else(|error| panic!("{}: {error}", rule.name()));
            assert_ne!(smaller_normalized, larger_normalized, "{}", rule.name());
            // Normalizing is idempotent for every rule.
            assert_eq!(
                rule.normalize(&smaller_normalized).unwrap(),
                smaller_normalized,
                "{}",
                rule.name()
            );
            if rule.kind() == MatchingRuleKind::Ordering {
                assert!(
                    rule.ordering_key(&smaller_normalized) < rule.ordering_key(&larger_normalized),
                    "{} orders {smaller} before {larger}",
                    rule.name()
                );
            }
        }
    }

    proptest! {
        #[test]
        fn integer_key_memcmp_order_equals_numeric_order(left in any::<i64>(), right in any::<i64>()) {
            let rule = MatchingRule::IntegerOrderingMatch;
            let key = |number: i64| rule.ordering_key(&rule.normalize(number.to_string().as_bytes()).unwrap());
            prop_assert_eq!(key(left).cmp(&key(right)), left.cmp(&right));
        }

        #[test]
        fn wide_integer_key_order(left in any::<i128>(), right in any::<i128>()) {
            let rule = MatchingRule::IntegerOrderingMatch;
            let key = |number: i128| rule.ordering_key(&rule.normalize(number.to_string().as_bytes()).unwrap());
            prop_assert_eq!(key(left).cmp(&key(right)), left.cmp(&right));
        }

        #[test]
        fn case_ignore_ignores_ascii_case(text in "[ -~]{1,20}") {
            let rule = MatchingRule::CaseIgnoreMatch;
            prop_assert_eq!(
                rule.normalize(text.to_ascii_uppercase().as_bytes()).unwrap(),
                rule.normalize(text.to_ascii_lowercase().as_bytes()).unwrap()
            );
        }

        #[test]
        fn case_exact_is_idempotent(text in "\\PC{0,20}") {
            let rule = MatchingRule::CaseExactMatch;
            if let Ok(once) = rule.normalize(text.as_bytes()) {
                prop_assert_eq!(rule.normalize(&once).unwrap(), once);
            }
        }

        /// As slapd's, caseIgnore preparation folds before NFKC, not after: idempotent on
        /// text NFKC leaves as it is, not on compatibility characters NFKC makes uppercase
        /// (`㎒` → `MHz` → `mhz`).
        #[test]
        fn case_ignore_is_idempotent_on_nfkc_stable_text(text in "\\PC{0,20}") {
            use unicode_normalization::UnicodeNormalization;
            prop_assume!(text.nfkc().eq(text.chars()));
            let rule = MatchingRule::CaseIgnoreMatch;
            if let Ok(once) = rule.normalize(text.as_bytes()) {
                prop_assert_eq!(rule.normalize(&once).unwrap(), once);
            }
        }
    }

    #[test]
    fn dn_relation_rules_place_a_dn_relative_to_the_asserted_one() {
        let base = b"ou=people,dc=example,dc=com";
        let cases: &[(&[u8], [bool; 4])] = &[
            // value: [subtree, one level, subordinate, superior]
            (b"ou=people,dc=example,dc=com", [true, false, false, false]),
            (
                b"cn=a,ou=people,dc=example,dc=com",
                [true, true, true, false],
            ),
            (
                b"cn=b,cn=a,ou=people,dc=example,dc=com",
                [true, false, true, false],
            ),
            (b"dc=example,dc=com", [false, false, false, true]),
            (b"dc=com", [false, false, false, true]),
            // An escaped comma is not an RDN boundary.
            (
                b"cn=x\\,ou=people,dc=example,dc=com",
                [false, false, false, false],
            ),
            (b"ou=other,dc=example,dc=com", [false, false, false, false]),
        ];
        let rules = [
            MatchingRule::DnSubtreeMatch,
            MatchingRule::DnOneLevelMatch,
            MatchingRule::DnSubordinateMatch,
            MatchingRule::DnSuperiorMatch,
        ];
        for (value, expected) in cases {
            for (rule, expected) in rules.iter().zip(expected) {
                assert_eq!(
                    rule.dn_relation_matches(value, base),
                    *expected,
                    "{rule:?} {}",
                    String::from_utf8_lossy(value)
                );
            }
        }
    }
}
