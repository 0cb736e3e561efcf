//! Request controls (RFC 4511 §4.1.11), decoded here rather than by ldap3_proto, whose typed
//! parser drops the criticality of some controls (sort, paged results) and logs a warning for
//! every control it does not know (assertion, pre/post-read). Two steps:
//! - `decode_controls`: the `[0] Controls` element of an LDAPMessage into `Control`s (OID,
//!   criticality, raw value). A structurally malformed sequence is a malformed PDU: the
//!   connection is closed with a notice, as slapd does.
//! - `parse`: for one operation, each control it honours is decoded into `RequestControls`
//!   (a bad value → protocolError); an unknown or inapplicable control is refused with
//!   unavailableCriticalExtension when critical and ignored otherwise.
//!
//! The BER is read strictly (`Tlv`): every element must exactly fill its parent, so a control
//! cut short by a wrong length is an error, never silently dropped. Every decoder is a pure
//! function of bytes, so the fuzz targets call them directly.

use crate::ber_read::{ber_tag, boolean, elements, integer, single_element, Tlv};
use crate::result::{code, OperationError};

pub const PAGED_RESULTS_OID: &str = "1.2.840.113556.1.4.319";
pub const MANAGE_DSA_IT_OID: &str = "2.16.840.1.113730.3.4.2";
pub const ASSERTION_OID: &str = "1.3.6.1.1.12";
pub const PRE_READ_OID: &str = "1.3.6.1.1.13.1";
pub const POST_READ_OID: &str = "1.3.6.1.1.13.2";
pub const SORT_REQUEST_OID: &str = "1.2.840.113556.1.4.473";
pub const SORT_RESPONSE_OID: &str = "1.2.840.113556.1.4.474";
/// Virtual list view (draft-ietf-ldapext-ldapv3-vlv-09), request and response.
pub const VLV_REQUEST_OID: &str = "2.16.840.1.113730.3.4.9";
pub const VLV_RESPONSE_OID: &str = "2.16.840.1.113730.3.4.10";
/// The StartTLS extended operation (RFC 4511 §4.14).
pub const START_TLS_OID: &str = "1.3.6.1.4.1.1466.20037";
/// The Cancel extended operation (RFC 3909).
pub const CANCEL_OID: &str = "1.3.6.1.1.8";

/// Permissive modify (Active Directory's OID, honoured by slapd): adding a value that is there
/// or deleting one that is not succeeds.
pub const PERMISSIVE_MODIFY_OID: &str = "1.2.840.113556.1.4.1413";

/// Relax Rules (draft-zeilenga-ldap-relax, OpenLDAP's OID): lets the rootdn set
/// NO-USER-MODIFICATION attributes.
pub const RELAX_OID: &str = "1.3.6.1.4.1.4203.666.5.12";
/// The password policy control (draft-behera-ldap-password-policy), handled in `ppolicy`.
pub const PASSWORD_POLICY_OID: &str = "1.3.6.1.4.1.42.2.27.8.5.1";
/// Proxied authorization (RFC 4370), handled in `proxy_authz`.
pub const PROXY_AUTHZ_OID: &str = "2.16.840.1.113730.3.4.18";
/// The transaction specification control (RFC 5805), handled in `transaction`.
pub const TRANSACTION_SPECIFICATION_OID: &str = "1.3.6.1.1.21.2";
/// The Subentries control (RFC 3672 §3): which of subentries and ordinary entries a search
/// returns (`search/hidden.rs`).
pub const SUBENTRIES_OID: &str = "1.3.6.1.4.1.4203.1.10.1";

/// The kinds of operation a request control may be honoured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationClass {
    Bind,
    Search,
    Compare,
    /// Add, delete and modrdn (a control for `Update` applies to `Modify` too).
    Update,
    /// Modify.
    Modify,
    PasswordModify,
    /// Other extended operations answered by `operations` (Who am I?).
    Extended,
    /// Requests the connection answers itself (StartTLS, Cancel): no control applies.
    Connection,
}

use OperationClass::{Bind, Compare, Extended, Modify, PasswordModify, Search, Update};

/// One request control lmdir honours: its OID, the operations it applies to and the decoder of
/// its value into `RequestControls` (a bad value → protocolError). A control on an operation
/// it does not apply to is unknown there (RFC 4511 §4.1.11: refused with
/// unavailableCriticalExtension when critical, else ignored). The root DSE's supportedControl
/// lists exactly these, so a control added here is advertised and honoured in one step.
pub struct RegisteredControl {
    pub oid: &'static str,
    pub name: &'static str,
    pub operations: &'static [OperationClass],
    decode: fn(&mut RequestControls, &Control) -> Result<(), OperationError>,
}

/// Every request control lmdir honours.
pub const REGISTRY: &[RegisteredControl] = &[
    RegisteredControl {
        oid: PAGED_RESULTS_OID,
        name: "simple paged results (RFC 2696)",
        operations: &[Search],
        decode: |parsed, control| {
            parsed.paged = Some(decode_paged(control.value.as_deref())?);
            parsed.paged_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: MANAGE_DSA_IT_OID,
        name: "ManageDsaIT (RFC 3296)",
        operations: &[Search, Compare, Update],
        decode: |parsed, control| {
            no_value(control)?;
            // Shows glue entries to searches and writes (`glue.rs`); lmdir stores referral
            // objects as ordinary entries, so it changes nothing else.
            parsed.manage_dsa_it = true;
            parsed.manage_dsa_it_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: ASSERTION_OID,
        name: "assertion (RFC 4528)",
        operations: &[Search, Compare, Update],
        decode: |parsed, control| {
            parsed.assertion = Some(decode_assertion(control.value.as_deref())?);
            parsed.assertion_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: PRE_READ_OID,
        name: "pre-read (RFC 4527)",
        operations: &[Update],
        decode: |parsed, control| {
            parsed.pre_read = Some(decode_attribute_list(
                PRE_READ_OID,
                control.value.as_deref(),
            )?);
            parsed.pre_read_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: POST_READ_OID,
        name: "post-read (RFC 4527)",
        operations: &[Update],
        decode: |parsed, control| {
            let value = control.value.as_deref();
            parsed.post_read = Some(decode_attribute_list(POST_READ_OID, value)?);
            parsed.post_read_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: SORT_REQUEST_OID,
        name: "server-side sorting (RFC 2891)",
        operations: &[Search],
        decode: |parsed, control| {
            parsed.sort = Some(decode_sort(control.value.as_deref())?);
            parsed.sort_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: VLV_REQUEST_OID,
        name: "virtual list view (draft-ietf-ldapext-ldapv3-vlv-09)",
        operations: &[Search],
        decode: |parsed, control| {
            parsed.vlv = Some(decode_vlv(control.value.as_deref())?);
            parsed.vlv_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: crate::matched_values::MATCHED_VALUES_OID,
        name: "matched values (RFC 3876)",
        operations: &[Search],
        decode: |parsed, control| {
            parsed.matched_values = Some(crate::matched_values::decode(control.value.as_deref())?);
            parsed.matched_values_critical = control.critical;
            Ok(())
        },
    },
    RegisteredControl {
        oid: SUBENTRIES_OID,
        name: "subentries (RFC 3672)",
        operations: &[Search],
        decode: |parsed, control| {
            parsed.subentries = Some(decode_subentries(control.value.as_deref())?);
            Ok(())
        },
    },
    RegisteredControl {
        oid: lmdir_sync::messages::SYNC_REQUEST_OID,
        name: "content synchronization (RFC 4533)",
        operations: &[Search],
        decode: |parsed, control| {
            let value = control.value.as_deref().unwrap_or_default();
            let decoded = lmdir_sync::SyncRequest::decode(value).map_err(|error| {
                protocol_error(lmdir_sync::messages::SYNC_REQUEST_OID, &error.to_string())
            })?;
            parsed.sync = Some(decoded);
            Ok(())
        },
    },
    RegisteredControl {
        oid: RELAX_OID,
        name: "Relax Rules (honoured for the rootdn)",
        operations: &[Update],
        decode: |parsed, control| {
            // Relax Rules has no value: its presence is the request.
            no_value(control)?;
            parsed.relax = true;
            Ok(())
        },
    },
    RegisteredControl {
        oid: PERMISSIVE_MODIFY_OID,
        name: "permissive modify",
        operations: &[Modify],
        decode: |parsed, control| {
            no_value(control)?;
            parsed.permissive_modify = true;
            Ok(())
        },
    },
    RegisteredControl {
        oid: PASSWORD_POLICY_OID,
        name: "password policy (draft-behera-ldap-password-policy)",
        operations: &[Bind, Update, PasswordModify],
        decode: |parsed, control| {
            no_value(control)?;
            parsed.password_policy = true;
            Ok(())
        },
    },
    RegisteredControl {
        oid: TRANSACTION_SPECIFICATION_OID,
        name: "transaction specification (RFC 5805)",
        operations: &[Update],
        decode: |parsed, control| {
            // RFC 5805 §2.2: always critical, and its value is the transaction identifier.
            if !control.critical {
                return Err(protocol_error(&control.oid, "must be critical"));
            }
            let id = control
                .value
                .clone()
                .ok_or_else(|| protocol_error(&control.oid, "needs a transaction identifier"))?;
            parsed.transaction = Some(id);
            Ok(())
        },
    },
    RegisteredControl {
        oid: PROXY_AUTHZ_OID,
        name: "proxied authorization (RFC 4370)",
        operations: &[Search, Compare, Update, PasswordModify, Extended],
        // `proxy_authz::assume_identity` decodes it and takes it off the request before the
        // operation parses its controls.
        decode: |_, _| Ok(()),
    },
];

/// The registered control with `oid` when it applies to `class`.
fn registered(oid: &str, class: OperationClass) -> Option<&'static RegisteredControl> {
    REGISTRY.iter().find(|control| {
        control.oid == oid
            && (control.operations.contains(&class)
                || (class == Modify && control.operations.contains(&Update)))
    })
}

/// Every OID of `REGISTRY` (the root DSE's supportedControl).
pub fn supported_control_oids() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|control| control.oid)
}

fn no_value(control: &Control) -> Result<(), OperationError> {
    match control.value {
        Some(_) => Err(protocol_error(&control.oid, "must not have a value")),
        None => Ok(()),
    }
}

/// Most controls one request may carry. Clients send a handful (paged + sort + assertion is
/// already many); the PDU size bounds the memory, this bounds the work per request.
pub const CONTROLS_PER_MESSAGE_MAX: usize = 32;
/// Most attribute selectors in one pre-read or post-read control: a few hundred covers every
/// attribute type of a large schema; beyond that a request is only work for the server.
pub const READ_CONTROL_ATTRIBUTES_MAX: usize = 256;
/// BER nesting accepted in an assertion filter; filter depth itself is checked against
/// `filter_depth_max` when the filter is parsed for evaluation.
const ASSERTION_BER_DEPTH_MAX: usize = 64;

/// One control as sent: Control ::= SEQUENCE { controlType LDAPOID, criticality BOOLEAN
/// DEFAULT FALSE, controlValue OCTET STRING OPTIONAL }.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub oid: String,
    pub critical: bool,
    pub value: Option<Vec<u8>>,
}

/// The Controls sequence is not a SEQUENCE OF Control.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed controls: {0}")]
pub struct MalformedControls(pub String);

fn malformed(what: &str) -> MalformedControls {
    MalformedControls(what.to_string())
}

/// Decodes the encoded `[0] Controls` element of an LDAPMessage (identifier 0xa0 included).
pub fn decode_controls(bytes: &[u8]) -> Result<Vec<Control>, MalformedControls> {
    let controls = single_element(bytes, ber_tag::CONTROLS)
        .ok_or_else(|| malformed("the element after protocolOp must be [0] Controls"))?;
    elements(controls.content)
        .ok_or_else(|| malformed("undecodable BER"))?
        .into_iter()
        .map(decode_control)
        .collect()
}

fn decode_control(element: Tlv<'_>) -> Result<Control, MalformedControls> {
    if element.tag != ber_tag::SEQUENCE {
        return Err(malformed("a control must be a SEQUENCE"));
    }
    let fields = elements(element.content).ok_or_else(|| malformed("undecodable control"))?;
    let mut fields = fields.into_iter().peekable();
    let oid = fields
        .next()
        .filter(|field| field.tag == ber_tag::OCTET_STRING)
        .ok_or_else(|| malformed("a control must start with its OID"))?;
    let oid = std::str::from_utf8(oid.content)
        .map_err(|_| malformed("control OID is not text"))?
        .to_string();
    let critical = match fields.next_if(|field| field.tag == ber_tag::BOOLEAN) {
        Some(field) => boolean(field.content)
            .ok_or_else(|| malformed("control criticality must be a one-byte BOOLEAN"))?,
        None => false,
    };
    let value = match fields.next() {
        None => None,
        Some(field) if field.tag == ber_tag::OCTET_STRING => Some(field.content.to_vec()),
        Some(_) => return Err(malformed("control value must be an OCTET STRING")),
    };
    if fields.next().is_some() {
        return Err(malformed("a control has at most three fields"));
    }
    Ok(Control {
        oid,
        critical,
        value,
    })
}

/// The decoded controls an operation acts on; each `*_critical` says whether the client marked
/// that control critical (an unhonourable critical control answers unavailableCriticalExtension).
#[derive(Debug, Clone, Default)]
pub struct RequestControls {
    /// Paged results: page size and cookie.
    pub paged: Option<(i64, Vec<u8>)>,
    pub paged_critical: bool,
    pub manage_dsa_it: bool,
    pub manage_dsa_it_critical: bool,
    /// The assertion filter (RFC 4528).
    pub assertion: Option<crate::filter::RawFilter>,
    pub assertion_critical: bool,
    /// Attribute lists of pre-read / post-read (RFC 4527).
    pub pre_read: Option<Vec<String>>,
    pub pre_read_critical: bool,
    pub post_read: Option<Vec<String>>,
    pub post_read_critical: bool,
    /// Server-side sort keys (RFC 2891).
    pub sort: Option<Vec<SortKey>>,
    pub sort_critical: bool,
    /// Virtual list view: the window of the sorted result to return.
    pub vlv: Option<VlvRequest>,
    pub vlv_critical: bool,
    /// Relax Rules requested (honoured for the rootdn only).
    pub relax: bool,
    /// Permissive modify requested.
    pub permissive_modify: bool,
    /// The password policy request control (no value): the response carries the policy's
    /// warnings and errors.
    pub password_policy: bool,
    /// The matched values control's items (RFC 3876).
    pub matched_values: Option<Vec<lmdir_schema::Filter>>,
    pub matched_values_critical: bool,
    /// RFC 4533 Sync Request (content synchronization).
    pub sync: Option<lmdir_sync::SyncRequest>,
    /// The LDAP transaction (RFC 5805) an update is queued in.
    pub transaction: Option<Vec<u8>>,
    /// The Subentries control's visibility (RFC 3672 §3): true returns subentries only,
    /// false ordinary entries only; None when not sent.
    pub subentries: Option<bool>,
}

/// VirtualListViewRequest ::= SEQUENCE { beforeCount INTEGER (0..maxInt), afterCount INTEGER
/// (0..maxInt), target CHOICE { byOffset [0] SEQUENCE { offset INTEGER (0..maxInt),
/// contentCount INTEGER (0..maxInt) }, greaterThanOrEqual [1] AssertionValue }, contextID
/// OCTET STRING OPTIONAL }. lmdir keeps no state between requests (each one sorts again in its
/// own snapshot), so the context ID is read and not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlvRequest {
    pub before: u32,
    pub after: u32,
    pub target: VlvTarget,
}

/// Where a virtual list view's window is centred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VlvTarget {
    /// A 1-based position, scaled from the client's idea of the list's size when it differs.
    ByOffset { offset: u32, content_count: u32 },
    /// The first entry whose first sort key is at or after this value in the sort order.
    GreaterThanOrEqual(Vec<u8>),
}

/// One key of a server-side sort request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub attribute: String,
    pub ordering_rule: Option<String>,
    pub reverse: bool,
}

/// unavailableCriticalExtension for a critical control that is unknown, inapplicable to the
/// operation, or cannot be honoured.
pub fn unavailable(oid: &str) -> OperationError {
    OperationError::new(
        code::UNAVAILABLE_CRITICAL_EXTENSION,
        format!("critical control {oid} is not supported for this operation"),
    )
}

fn protocol_error(oid: &str, what: &str) -> OperationError {
    OperationError::new(code::PROTOCOL_ERROR, format!("control {oid}: {what}"))
}

/// Decodes `controls` for an operation of `class`, each through its registered decoder.
pub fn parse(
    controls: &[Control],
    class: OperationClass,
) -> Result<RequestControls, OperationError> {
    if controls.len() > CONTROLS_PER_MESSAGE_MAX {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!(
                "{} controls exceed the limit of {CONTROLS_PER_MESSAGE_MAX} per request",
                controls.len()
            ),
        ));
    }
    let mut parsed = RequestControls::default();
    let mut seen: Vec<&str> = Vec::new();
    for control in controls {
        let oid = control.oid.as_str();
        let Some(registered) = registered(oid, class) else {
            // RFC 4511 §4.1.11: unrecognized or inappropriate controls are ignored unless critical.
            if control.critical {
                return Err(unavailable(oid));
            }
            continue;
        };
        if seen.contains(&oid) {
            return Err(protocol_error(oid, "given more than once"));
        }
        seen.push(oid);
        (registered.decode)(&mut parsed, control)?;
    }
    Ok(parsed)
}

/// The items of a value that must be one SEQUENCE.
fn value_sequence<'value>(
    oid: &str,
    value: Option<&'value [u8]>,
    what: &str,
) -> Result<Vec<Tlv<'value>>, OperationError> {
    let value = value.ok_or_else(|| protocol_error(oid, "missing value"))?;
    single_element(value, ber_tag::SEQUENCE)
        .and_then(|sequence| elements(sequence.content))
        .ok_or_else(|| protocol_error(oid, &format!("{what} must be a SEQUENCE")))
}

/// The Subentries control's value, `visibility BOOLEAN` (RFC 3672 §3). As slapd: exactly the
/// three octets of a BOOLEAN with a short length (any content octet but 0 is TRUE); no value,
/// or anything else, is a protocolError. Criticality changes nothing.
pub fn decode_subentries(value: Option<&[u8]>) -> Result<bool, OperationError> {
    match value {
        Some(&[ber_tag::BOOLEAN, 1, visibility]) => Ok(visibility != 0),
        Some(_) => Err(protocol_error(
            SUBENTRIES_OID,
            "value must be one BOOLEAN (3 octets)",
        )),
        None => Err(protocol_error(SUBENTRIES_OID, "missing value")),
    }
}

/// realSearchControlValue ::= SEQUENCE { size INTEGER (0..maxInt), cookie OCTET STRING }
/// (RFC 2696 §2).
pub fn decode_paged(value: Option<&[u8]>) -> Result<(i64, Vec<u8>), OperationError> {
    let oid = PAGED_RESULTS_OID;
    let items = value_sequence(oid, value, "paged results value")?;
    let [size, cookie] = items.as_slice() else {
        return Err(protocol_error(oid, "value must hold a size and a cookie"));
    };
    let size = Some(size)
        .filter(|size| size.tag == ber_tag::INTEGER)
        .and_then(|size| integer(size.content))
        .ok_or_else(|| protocol_error(oid, "page size must be an INTEGER"))?;
    if cookie.tag != ber_tag::OCTET_STRING {
        return Err(protocol_error(oid, "cookie must be an OCTET STRING"));
    }
    if !(0..=i64::from(i32::MAX)).contains(&size) {
        return Err(protocol_error(oid, "page size outside 0..maxInt"));
    }
    Ok((size, cookie.content.to_vec()))
}

/// SortKeyList ::= SEQUENCE OF SEQUENCE { attributeType AttributeDescription,
/// orderingRule [0] MatchingRuleId OPTIONAL, reverseOrder [1] BOOLEAN DEFAULT FALSE }
/// (RFC 2891 §1.1). How many keys are accepted is decided where the sort is planned; the
/// PDU size bounds what is decoded here.
pub fn decode_sort(value: Option<&[u8]>) -> Result<Vec<SortKey>, OperationError> {
    let keys = value_sequence(SORT_REQUEST_OID, value, "sort key list")?;
    if keys.is_empty() {
        return Err(protocol_error(SORT_REQUEST_OID, "no sort keys"));
    }
    keys.into_iter().map(decode_sort_key).collect()
}

fn decode_sort_key(key: Tlv<'_>) -> Result<SortKey, OperationError> {
    let oid = SORT_REQUEST_OID;
    let text = |content: &[u8]| {
        std::str::from_utf8(content)
            .map(str::to_string)
            .map_err(|_| protocol_error(oid, "sort key text is not UTF-8"))
    };
    let fields = Some(key)
        .filter(|key| key.tag == ber_tag::SEQUENCE)
        .and_then(|key| elements(key.content))
        .ok_or_else(|| protocol_error(oid, "a sort key must be a SEQUENCE"))?;
    let mut fields = fields.into_iter().peekable();
    let attribute = fields
        .next()
        .filter(|field| field.tag == ber_tag::OCTET_STRING)
        .ok_or_else(|| protocol_error(oid, "a sort key must start with an attribute"))?;
    let ordering_rule = match fields.next_if(|field| field.tag == ber_tag::ORDERING_RULE) {
        Some(field) => Some(text(field.content)?),
        None => None,
    };
    let reverse = match fields.next_if(|field| field.tag == ber_tag::REVERSE_ORDER) {
        Some(field) => boolean(field.content)
            .ok_or_else(|| protocol_error(oid, "reverseOrder must be a one-byte BOOLEAN"))?,
        None => false,
    };
    if fields.next().is_some() {
        return Err(protocol_error(oid, "unexpected field in a sort key"));
    }
    Ok(SortKey {
        attribute: text(attribute.content)?,
        ordering_rule,
        reverse,
    })
}

/// The assertion control's value is one Filter (RFC 4528 §3), checked well-formed here and
/// decoded against the configured limits where the operation uses it.
pub fn decode_assertion(value: Option<&[u8]>) -> Result<crate::filter::RawFilter, OperationError> {
    let value = value.ok_or_else(|| protocol_error(ASSERTION_OID, "missing value"))?;
    crate::filter::RawFilter::new(value, ASSERTION_BER_DEPTH_MAX)
        .ok_or_else(|| protocol_error(ASSERTION_OID, "undecodable filter"))
}

/// The virtual list view request control's value (`VlvRequest`).
pub fn decode_vlv(value: Option<&[u8]>) -> Result<VlvRequest, OperationError> {
    const BY_OFFSET: u8 = 0xa0;
    const GREATER_OR_EQUAL: u8 = 0x81;
    let oid = VLV_REQUEST_OID;
    let fields = value_sequence(oid, value, "virtual list view request")?;
    let count = |field: &Tlv<'_>, what: &str| {
        Some(field)
            .filter(|field| field.tag == ber_tag::INTEGER)
            .and_then(|field| integer(field.content))
            .and_then(|number| u32::try_from(number).ok())
            .filter(|number| i32::try_from(*number).is_ok())
            .ok_or_else(|| protocol_error(oid, &format!("{what} must be an INTEGER (0..maxInt)")))
    };
    let (before, after, target, context) = match fields.as_slice() {
        [before, after, target] => (before, after, target, None),
        [before, after, target, context] => (before, after, target, Some(context)),
        _ => return Err(protocol_error(oid, "value must hold 3 or 4 fields")),
    };
    if context.is_some_and(|context| context.tag != ber_tag::OCTET_STRING) {
        return Err(protocol_error(oid, "contextID must be an OCTET STRING"));
    }
    let target = match target.tag {
        BY_OFFSET => {
            let parts = elements(target.content).unwrap_or_default();
            let [offset, content_count] = parts.as_slice() else {
                return Err(protocol_error(
                    oid,
                    "byOffset must hold an offset and a count",
                ));
            };
            VlvTarget::ByOffset {
                offset: count(offset, "offset")?,
                content_count: count(content_count, "contentCount")?,
            }
        }
        GREATER_OR_EQUAL => VlvTarget::GreaterThanOrEqual(target.content.to_vec()),
        _ => {
            return Err(protocol_error(
                oid,
                "target must be byOffset or greaterThanOrEqual",
            ))
        }
    };
    Ok(VlvRequest {
        before: count(before, "beforeCount")?,
        after: count(after, "afterCount")?,
        target,
    })
}

/// AttributeSelection ::= SEQUENCE OF selector LDAPString (RFC 4527 §3.1).
pub fn decode_attribute_list(
    oid: &str,
    value: Option<&[u8]>,
) -> Result<Vec<String>, OperationError> {
    let items = value_sequence(oid, value, "attribute list")?;
    if items.len() > READ_CONTROL_ATTRIBUTES_MAX {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!(
                "control {oid}: {} attributes exceed the limit of {READ_CONTROL_ATTRIBUTES_MAX}",
                items.len()
            ),
        ));
    }
    items
        .into_iter()
        .map(|item| {
            Some(item)
                .filter(|item| item.tag == ber_tag::OCTET_STRING)
                .and_then(|item| std::str::from_utf8(item.content).ok())
                .map(str::to_string)
                .ok_or_else(|| protocol_error(oid, "attribute names must be strings"))
        })
        .collect()
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

    fn control(oid: &str, critical: bool, value: Option<Vec<u8>>) -> Control {
        Control {
            oid: oid.to_string(),
            critical,
            value,
        }
    }

    fn sort_value(keys: &[(&str, Option<&str>, bool)]) -> Vec<u8> {
        encode(|writer| {
            writer.open(tag::SEQUENCE);
            for (attribute, rule, reverse) in keys {
                writer.open(tag::SEQUENCE);
                writer.octet_string(attribute.as_bytes());
                if let Some(rule) = rule {
                    writer.primitive(0x80, rule.as_bytes());
                }
                if *reverse {
                    writer.primitive(0x81, &[0xff]);
                }
                writer.close();
            }
            writer.close();
        })
    }

    #[test]
    fn controls_sequence_keeps_criticality_and_value() {
        let bytes = encode(|writer| {
            writer.open(tag::CONTROLS);
            writer.open(tag::SEQUENCE);
            writer.octet_string(SORT_REQUEST_OID.as_bytes());
            writer.boolean(true);
            writer.octet_string(&sort_value(&[("cn", None, false)]));
            writer.close();
            writer.open(tag::SEQUENCE);
            writer.octet_string(b"1.2.3.4");
            writer.close();
            writer.close();
        });
        let decoded = decode_controls(&bytes).expect("decode");
        assert_eq!(
            decoded,
            vec![
                control(
                    SORT_REQUEST_OID,
                    true,
                    Some(sort_value(&[("cn", None, false)]))
                ),
                control("1.2.3.4", false, None),
            ]
        );
    }

    #[test]
    fn malformed_controls_sequences_are_refused() {
        let cases: Vec<Vec<u8>> = vec![
            // Not [0].
            vec![0x30, 0x00],
            // A control that is not a SEQUENCE.
            vec![0xa0, 0x03, 0x04, 0x01, b'1'],
            // Criticality of two bytes.
            vec![
                0xa0, 0x09, 0x30, 0x07, 0x04, 0x01, b'1', 0x01, 0x02, 0xff, 0xff,
            ],
            // A fourth field.
            vec![
                0xa0, 0x0b, 0x30, 0x09, 0x04, 0x01, b'1', 0x01, 0x01, 0xff, 0x04, 0x00, 0x04, 0x00,
            ],
            // Value that is not an OCTET STRING.
            vec![0xa0, 0x07, 0x30, 0x05, 0x04, 0x01, b'1', 0x02, 0x00],
        ];
        for bytes in cases {
            assert!(decode_controls(&bytes).is_err(), "{bytes:02x?} accepted");
        }
    }

    #[test]
    fn unknown_critical_is_refused_and_unknown_non_critical_ignored() {
        let error = parse(&[control("1.2.3.4", true, None)], OperationClass::Search).unwrap_err();
        assert_eq!(error.code, code::UNAVAILABLE_CRITICAL_EXTENSION);
        assert!(parse(&[control("1.2.3.4", false, None)], OperationClass::Search).is_ok());
    }

    #[test]
    fn inapplicable_control_follows_its_criticality() {
        let paged = encode(|writer| {
            writer.open(tag::SEQUENCE);
            writer.integer(tag::INTEGER, 10);
            writer.octet_string(b"");
            writer.close();
        });
        let critical = control(PAGED_RESULTS_OID, true, Some(paged.clone()));
        assert_eq!(
            parse(&[critical], OperationClass::Update).unwrap_err().code,
            code::UNAVAILABLE_CRITICAL_EXTENSION
        );
        let parsed = parse(
            &[control(PAGED_RESULTS_OID, false, Some(paged.clone()))],
            OperationClass::Update,
        )
        .expect("ignored");
        assert!(parsed.paged.is_none());
        let parsed = parse(
            &[control(PAGED_RESULTS_OID, true, Some(paged))],
            OperationClass::Search,
        )
        .expect("parse");
        assert_eq!(parsed.paged, Some((10, Vec::new())));
        assert!(parsed.paged_critical);
    }

    #[test]
    fn sort_keys_decode_with_rule_and_direction() {
        let value = sort_value(&[
            ("sn", Some("caseIgnoreOrderingMatch"), true),
            ("cn", None, false),
        ]);
        let parsed = parse(
            &[control(SORT_REQUEST_OID, false, Some(value))],
            OperationClass::Search,
        )
        .expect("parse");
        assert!(!parsed.sort_critical);
        assert_eq!(
            parsed.sort,
            Some(vec![
                SortKey {
                    attribute: "sn".to_string(),
                    ordering_rule: Some("caseIgnoreOrderingMatch".to_string()),
                    reverse: true,
                },
                SortKey {
                    attribute: "cn".to_string(),
                    ordering_rule: None,
                    reverse: false,
                },
            ])
        );
    }

    #[test]
    fn bad_values_are_protocol_errors() {
        let empty_sort = sort_value(&[]);
        let negative_page = encode(|writer| {
            writer.open(tag::SEQUENCE);
            writer.integer(tag::INTEGER, -1);
            writer.octet_string(b"");
            writer.close();
        });
        let cases = [
            control(SORT_REQUEST_OID, false, Some(empty_sort)),
            control(SORT_REQUEST_OID, true, None),
            control(PAGED_RESULTS_OID, false, Some(negative_page)),
            control(PAGED_RESULTS_OID, false, Some(vec![0x30, 0x03, 0x02, 0x01])),
            control(ASSERTION_OID, true, Some(vec![0x04, 0x00])),
            control(MANAGE_DSA_IT_OID, false, Some(Vec::new())),
        ];
        for case in cases {
            let error = parse(std::slice::from_ref(&case), OperationClass::Search).unwrap_err();
            assert_eq!(error.code, code::PROTOCOL_ERROR, "{case:?}");
        }
    }

    /// As slapd's parseSubentries: exactly a 3-octet BOOLEAN, criticality free; a search
    /// control only.
    #[test]
    fn subentries_value_is_one_boolean() {
        let decoded = |critical: bool, value: &[u8]| {
            let sent = control(SUBENTRIES_OID, critical, Some(value.to_vec()));
            parse(&[sent], OperationClass::Search).map(|parsed| parsed.subentries)
        };
        assert_eq!(decoded(true, &[0x01, 0x01, 0xff]).unwrap(), Some(true));
        assert_eq!(decoded(false, &[0x01, 0x01, 0x01]).unwrap(), Some(true));
        assert_eq!(decoded(true, &[0x01, 0x01, 0x00]).unwrap(), Some(false));
        let bad: [&[u8]; 6] = [
            &[],
            &[0x01, 0x01],
            &[0x01, 0x02, 0x00, 0x00],
            &[0x01, 0x81, 0x01, 0xff],
            &[0x02, 0x01, 0x01],
            &[0x01, 0x01, 0xff, 0x00],
        ];
        for value in bad {
            assert_eq!(
                decoded(false, value).unwrap_err().code,
                code::PROTOCOL_ERROR,
                "{value:?}"
            );
        }
        let absent = control(SUBENTRIES_OID, false, None);
        let error = parse(std::slice::from_ref(&absent), OperationClass::Search).unwrap_err();
        assert_eq!(error.code, code::PROTOCOL_ERROR);
        let on_compare = control(SUBENTRIES_OID, true, Some(vec![0x01, 0x01, 0xff]));
        let error = parse(&[on_compare], OperationClass::Compare).unwrap_err();
        assert_eq!(error.code, code::UNAVAILABLE_CRITICAL_EXTENSION);
    }

    #[test]
    fn a_control_given_twice_is_a_protocol_error() {
        let twice = [
            control(MANAGE_DSA_IT_OID, false, None),
            control(MANAGE_DSA_IT_OID, false, None),
        ];
        assert_eq!(
            parse(&twice, OperationClass::Search).unwrap_err().code,
            code::PROTOCOL_ERROR
        );
    }

    #[test]
    fn counts_over_the_limits_are_admin_limit_exceeded() {
        let many = vec![control("1.2.3.4", false, None); CONTROLS_PER_MESSAGE_MAX + 1];
        assert_eq!(
            parse(&many, OperationClass::Search).unwrap_err().code,
            code::ADMIN_LIMIT_EXCEEDED
        );
        let attributes = encode(|writer| {
            writer.open(tag::SEQUENCE);
            for _ in 0..=READ_CONTROL_ATTRIBUTES_MAX {
                writer.octet_string(b"cn");
            }
            writer.close();
        });
        let error = parse(
            &[control(PRE_READ_OID, false, Some(attributes))],
            OperationClass::Update,
        )
        .unwrap_err();
        assert_eq!(error.code, code::ADMIN_LIMIT_EXCEEDED);
    }

    #[test]
    fn pre_read_attribute_list_decodes() {
        // SEQUENCE { "cn", "+" }
        let value = vec![0x30, 0x07, 0x04, 0x02, b'c', b'n', 0x04, 0x01, b'+'];
        let parsed = parse(
            &[control(PRE_READ_OID, true, Some(value))],
            OperationClass::Update,
        )
        .expect("parse");
        assert_eq!(
            parsed.pre_read,
            Some(vec!["cn".to_string(), "+".to_string()])
        );
        assert!(parsed.pre_read_critical);
    }

    #[test]
    fn assertion_filter_decodes() {
        // (cn=x) as BER: [3] { "cn", "x" }
        let value = vec![0xa3, 0x07, 0x04, 0x02, b'c', b'n', 0x04, 0x01, b'x'];
        let parsed = parse(
            &[control(ASSERTION_OID, true, Some(value))],
            OperationClass::Compare,
        )
        .expect("parse");
        let settings = crate::settings::ServerSettings::with_defaults(Vec::new());
        let assertion = parsed.assertion.expect("assertion");
        assert_eq!(
            crate::filter::client_filter(&settings, &assertion).expect("decodes"),
            lmdir_schema::Filter::Equality {
                description: "cn".to_string(),
                value: b"x".to_vec(),
            }
        );
    }
}
