//! Request controls: which ones each operation honours, decoding their values, and the
//! criticality rule (unknown or inapplicable critical control → unavailableCriticalExtension;
//! non-critical ones that are not implemented are ignored, RFC 4511 §4.1.11).

use crate::result::{code, OperationError};
use ldap3_lber::parse::Parser;
use ldap3_proto::control::LdapControl;
use ldap3_proto::proto::LdapFilter;

pub const PAGED_RESULTS_OID: &str = "1.2.840.113556.1.4.319";
pub const MANAGE_DSA_IT_OID: &str = "2.16.840.1.113730.3.4.2";
pub const ASSERTION_OID: &str = "1.3.6.1.1.12";
pub const PRE_READ_OID: &str = "1.3.6.1.1.13.1";
pub const POST_READ_OID: &str = "1.3.6.1.1.13.2";
pub const SORT_REQUEST_OID: &str = "1.2.840.113556.1.4.473";
pub const SORT_RESPONSE_OID: &str = "1.2.840.113556.1.4.474";
pub const PASSWORD_POLICY_OID: &str = "1.3.6.1.4.1.42.2.27.8.5.1";
/// Relax Rules (draft-zeilenga-ldap-relax, OpenLDAP's OID): lets the rootdn set
/// NO-USER-MODIFICATION attributes.
pub const RELAX_OID: &str = "1.3.6.1.4.1.4203.666.5.12";

/// Controls honoured by search.
pub const SEARCH_CONTROLS: &[&str] = &[
    PAGED_RESULTS_OID,
    MANAGE_DSA_IT_OID,
    ASSERTION_OID,
    SORT_REQUEST_OID,
];
/// Controls honoured by compare.
pub const COMPARE_CONTROLS: &[&str] = &[MANAGE_DSA_IT_OID, ASSERTION_OID];
/// Controls honoured by add, delete, modify and modrdn.
pub const UPDATE_CONTROLS: &[&str] = &[
    MANAGE_DSA_IT_OID,
    ASSERTION_OID,
    PRE_READ_OID,
    POST_READ_OID,
    RELAX_OID,
];

/// The decoded controls an operation acts on.
#[derive(Debug, Clone, Default)]
pub struct RequestControls {
    /// Paged results: page size and cookie.
    pub paged: Option<(i64, Vec<u8>)>,
    pub manage_dsa_it: bool,
    /// The assertion filter (RFC 4528).
    pub assertion: Option<LdapFilter>,
    /// Attribute lists of pre-read / post-read (RFC 4527).
    pub pre_read: Option<Vec<String>>,
    pub post_read: Option<Vec<String>>,
    /// Server-side sort keys (RFC 2891).
    pub sort: Option<Vec<SortKey>>,
    /// Relax Rules requested (honoured for the rootdn only).
    pub relax: bool,
}

/// One key of a server-side sort request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub attribute: String,
    pub ordering_rule: Option<String>,
    pub reverse: bool,
}

fn unavailable(oid: &str) -> OperationError {
    OperationError::new(
        code::UNAVAILABLE_CRITICAL_EXTENSION,
        format!("critical control {oid} is not supported for this operation"),
    )
}

fn protocol_error(oid: &str, what: &str) -> OperationError {
    OperationError::new(code::PROTOCOL_ERROR, format!("control {oid}: {what}"))
}

/// Decodes `controls` for an operation that honours the OIDs in `honoured`.
pub fn parse(
    controls: &[LdapControl],
    honoured: &[&str],
) -> Result<RequestControls, OperationError> {
    let mut parsed = RequestControls::default();
    for control in controls {
        match control {
            LdapControl::SimplePagedResults { size, cookie } => {
                // ldap3_proto does not keep this control's criticality; clients mark it critical or
                // not, and it is honoured wherever it applies (search).
                if honoured.contains(&PAGED_RESULTS_OID) {
                    if parsed.paged.is_some() {
                        return Err(protocol_error(PAGED_RESULTS_OID, "given twice"));
                    }
                    if *size < 0 {
                        return Err(protocol_error(PAGED_RESULTS_OID, "negative page size"));
                    }
                    parsed.paged = Some((*size, cookie.clone()));
                } else {
                    return Err(unavailable(PAGED_RESULTS_OID));
                }
            }
            LdapControl::ManageDsaIT { criticality } => {
                if honoured.contains(&MANAGE_DSA_IT_OID) {
                    // lmdir stores no referral objects, so ManageDsaIT changes nothing: accepted.
                    parsed.manage_dsa_it = true;
                } else if *criticality {
                    return Err(unavailable(MANAGE_DSA_IT_OID));
                }
            }
            // ldap3_proto drops this control's criticality: it is treated as non-critical, so
            // where it does not apply (or a key cannot be used) results come unsorted with the
            // reason in the response control (RFC 2891 §1.2).
            LdapControl::ServerSort { sort_requests }
                if honoured.contains(&SORT_REQUEST_OID) && !sort_requests.is_empty() =>
            {
                parsed.sort = Some(
                    sort_requests
                        .iter()
                        .map(|key| SortKey {
                            attribute: key.attribute_name.clone(),
                            ordering_rule: key.ordering_rule.clone(),
                            reverse: key.reverse_order,
                        })
                        .collect(),
                );
            }
            // Password policy is not implemented; non-critical requests (nslcd) are ignored.
            LdapControl::PasswordPolicyRequest { criticality: true } => {
                return Err(unavailable(PASSWORD_POLICY_OID));
            }
            LdapControl::Unknown {
                oid,
                criticality,
                value,
            } => {
                let applies = honoured.contains(&oid.as_str());
                match oid.as_str() {
                    ASSERTION_OID if applies => {
                        let value = value
                            .as_deref()
                            .ok_or_else(|| protocol_error(ASSERTION_OID, "missing value"))?;
                        parsed.assertion = Some(decode_filter(value)?);
                    }
                    PRE_READ_OID if applies => {
                        parsed.pre_read =
                            Some(decode_attribute_list(PRE_READ_OID, value.as_deref())?);
                    }
                    POST_READ_OID if applies => {
                        parsed.post_read =
                            Some(decode_attribute_list(POST_READ_OID, value.as_deref())?);
                    }
                    // Relax Rules has no value (its presence is the request).
                    RELAX_OID if applies => parsed.relax = true,
                    _ if *criticality => return Err(unavailable(oid)),
                    _ => {}
                }
            }
            LdapControl::SyncRequest {
                criticality: true, ..
            }
            | LdapControl::SearchOptions {
                criticality: true, ..
            }
            | LdapControl::ShowDeleted { criticality: true }
            | LdapControl::SdFlags {
                criticality: true, ..
            }
            | LdapControl::ExtendedDn {
                criticality: true, ..
            } => {
                return Err(OperationError::new(
                    code::UNAVAILABLE_CRITICAL_EXTENSION,
                    "critical control not supported",
                ));
            }
            // Response-only controls sent in a request carry no meaning; ignored.
            _ => {}
        }
    }
    Ok(parsed)
}

fn decode_filter(value: &[u8]) -> Result<LdapFilter, OperationError> {
    let mut parser = Parser::new(64);
    let (_, tag) = parser
        .parse(value)
        .map_err(|_| protocol_error(ASSERTION_OID, "undecodable filter"))?;
    LdapFilter::try_from(tag).map_err(|_| protocol_error(ASSERTION_OID, "invalid filter"))
}

/// AttributeSelection ::= SEQUENCE OF selector LDAPString (RFC 4527 §3.1).
fn decode_attribute_list(oid: &str, value: Option<&[u8]>) -> Result<Vec<String>, OperationError> {
    let value = value.ok_or_else(|| protocol_error(oid, "missing value"))?;
    let mut parser = Parser::new(4);
    let (_, tag) = parser
        .parse(value)
        .map_err(|_| protocol_error(oid, "undecodable attribute list"))?;
    let items = tag
        .match_id(16)
        .and_then(|tag| tag.expect_constructed())
        .ok_or_else(|| protocol_error(oid, "attribute list must be a SEQUENCE"))?;
    items
        .into_iter()
        .map(|item| {
            item.expect_primitive()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(|| protocol_error(oid, "attribute names must be strings"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_critical_is_refused_and_unknown_non_critical_ignored() {
        let critical = LdapControl::Unknown {
            oid: "1.2.3.4".to_string(),
            criticality: true,
            value: None,
        };
        let error = parse(&[critical], SEARCH_CONTROLS).unwrap_err();
        assert_eq!(error.code, code::UNAVAILABLE_CRITICAL_EXTENSION);
        let ignored = LdapControl::Unknown {
            oid: "1.2.3.4".to_string(),
            criticality: false,
            value: None,
        };
        assert!(parse(&[ignored], SEARCH_CONTROLS).is_ok());
    }

    #[test]
    fn password_policy_is_ignored_unless_critical() {
        assert!(parse(
            &[LdapControl::PasswordPolicyRequest { criticality: false }],
            &[]
        )
        .is_ok());
        assert_eq!(
            parse(
                &[LdapControl::PasswordPolicyRequest { criticality: true }],
                &[]
            )
            .unwrap_err()
            .code,
            code::UNAVAILABLE_CRITICAL_EXTENSION
        );
    }

    #[test]
    fn pre_read_attribute_list_decodes() {
        // SEQUENCE { "cn", "+" }
        let value = vec![0x30, 0x07, 0x04, 0x02, b'c', b'n', 0x04, 0x01, b'+'];
        let control = LdapControl::Unknown {
            oid: PRE_READ_OID.to_string(),
            criticality: true,
            value: Some(value),
        };
        let parsed = parse(&[control], &[PRE_READ_OID]).expect("parse");
        assert_eq!(
            parsed.pre_read,
            Some(vec!["cn".to_string(), "+".to_string()])
        );
    }

    #[test]
    fn assertion_filter_decodes() {
        // (cn=x) as BER: [3] { "cn", "x" }
        let value = vec![0xa3, 0x07, 0x04, 0x02, b'c', b'n', 0x04, 0x01, b'x'];
        let control = LdapControl::Unknown {
            oid: ASSERTION_OID.to_string(),
            criticality: true,
            value: Some(value),
        };
        let parsed = parse(&[control], COMPARE_CONTROLS).expect("parse");
        assert_eq!(
            parsed.assertion,
            Some(LdapFilter::Equality("cn".to_string(), "x".to_string()))
        );
    }

    #[test]
    fn paged_results_outside_search_is_refused() {
        let paged = LdapControl::SimplePagedResults {
            size: 10,
            cookie: Vec::new(),
        };
        assert_eq!(
            parse(&[paged], UPDATE_CONTROLS).unwrap_err().code,
            code::UNAVAILABLE_CRITICAL_EXTENSION
        );
    }
}
