//! lmdir's own request types, decoded strictly from BER by lmdir. What LDAP defines as an octet
//! string stays bytes: a search's filter is a `RawFilter` decoded into lmdir-schema's `Filter`
//! (octet-string assertion values), which ldap3_proto's String-valued filters could not hold —
//! a search asserting `\ff\fe` ended the client's connection.
//!
//! Search requests (the bulk of any directory's traffic) are decoded here, binds into
//! `BindRequest` by `pdu::bind_request` (their common shapes; the rest through ldap3_proto and
//! converted), Password Modify's value here when it runs; the other operations still come
//! from ldap3_proto (`Operation::Other`). A bind's password is octets (a Latin-1 `café` is
//! `63 61 66 e9`): ldap3_proto's String refused it and the connection was ended.

use crate::ber_read::{elements, read_tlv, Tlv};
use crate::filter::RawFilter;
use ldap3_proto::proto::{LdapDerefAliases, LdapOp, LdapSearchScope};

/// One decoded protocol operation of a request.
#[derive(Debug, Clone)]
pub enum Operation {
    Search(Box<SearchRequest>),
    Bind(BindRequest),
    /// A well-formed request naming a DN (a Latin-1 `cn=José`) or a compared attribute in
    /// octets that are not UTF-8.
    NotUtf8(NotUtf8),
    Other(LdapOp),
}

/// A well-formed request naming a DN (or, in a compare, add or modify, an attribute) in octets
/// that are not UTF-8: answered with its operation's response as slapd answers it, invalidDNSyntax (34) or
/// undefinedAttributeType (17), where ldap3_proto's Strings (and the search decoder) refused
/// the PDU and the connection was ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUtf8 {
    pub operation: DnOperation,
    /// Which field: "entry", "base object", "new RDN", "new superior" (DNs), or
    /// `ATTRIBUTE_DESCRIPTION`.
    pub field: &'static str,
}

/// `NotUtf8::field` of an attribute description (a compare's, an add's, a modify's).
pub const ATTRIBUTE_DESCRIPTION: &str = "attribute description";

/// Whether an attribute description a request names after its DN is not UTF-8: a compare's
/// (`ava { desc, value }`), an add's (`attributes SEQUENCE OF { type, vals }`) or a modify's
/// (`changes SEQUENCE OF { operation, modification { type, vals } }`).
fn descriptions_not_utf8(kind: DnOperation, after_dn: &[u8]) -> bool {
    let not_utf8 = |bytes: &[u8]| std::str::from_utf8(bytes).is_err();
    fn first_of<'a>(element: &Tlv<'a>) -> Option<Tlv<'a>> {
        read_tlv(element.content).map(|(first, _)| first)
    }
    let Some((list, _)) = read_tlv(after_dn) else {
        return false;
    };
    let items = || elements(list.content).unwrap_or_default();
    match kind {
        DnOperation::Compare => first_of(&list).is_some_and(|desc| not_utf8(desc.content)),
        DnOperation::Add => items()
            .iter()
            .filter_map(first_of)
            .any(|kind| not_utf8(kind.content)),
        DnOperation::Modify => items().iter().any(|change| {
            let fields = elements(change.content).unwrap_or_default();
            fields
                .get(1)
                .and_then(first_of)
                .is_some_and(|kind| not_utf8(kind.content))
        }),
        _ => false,
    }
}

/// The operations that name DNs besides bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnOperation {
    Search,
    Modify,
    Add,
    Delete,
    ModifyDn,
    Compare,
}

impl DnOperation {
    /// The operation of a request tag (`[APPLICATION n]`).
    fn of_request_tag(request_tag: u8) -> Option<DnOperation> {
        Some(match request_tag {
            0x63 => DnOperation::Search,
            0x66 => DnOperation::Modify,
            0x68 => DnOperation::Add,
            0x4a => DnOperation::Delete,
            0x6c => DnOperation::ModifyDn,
            0x6e => DnOperation::Compare,
            _ => return None,
        })
    }

    /// The tag of the response that ends it.
    pub fn response_tag(self) -> u8 {
        use crate::ber::tag;
        match self {
            DnOperation::Search => tag::SEARCH_RESULT_DONE,
            DnOperation::Modify => tag::MODIFY_RESPONSE,
            DnOperation::Add => tag::ADD_RESPONSE,
            DnOperation::Delete => tag::DELETE_RESPONSE,
            DnOperation::ModifyDn => tag::MODIFY_DN_RESPONSE,
            DnOperation::Compare => tag::COMPARE_RESPONSE,
        }
    }
}

impl NotUtf8 {
    /// The request element's DN fields (search, add, modify, delete, modify DN, compare) and the
    /// attribute descriptions of a compare, an add or a modify, if one is not UTF-8; None for
    /// any other request or when all are.
    pub fn of(operation: &Tlv<'_>) -> Option<NotUtf8> {
        let not_utf8 = |bytes: &[u8]| std::str::from_utf8(bytes).is_err();
        let kind = DnOperation::of_request_tag(operation.tag)?;
        let invalid = |field| {
            Some(NotUtf8 {
                operation: kind,
                field,
            })
        };
        match kind {
            // DelRequest ::= [APPLICATION 10] LDAPDN
            DnOperation::Delete => not_utf8(operation.content)
                .then_some(())
                .and(invalid("entry")),
            // ModifyDNRequest ::= { entry, newrdn, deleteoldrdn, newSuperior [0] OPTIONAL }
            DnOperation::ModifyDn => {
                let fields = elements(operation.content)?;
                let named = [(0, "entry"), (1, "new RDN"), (3, "new superior")];
                named.into_iter().find_map(|(index, field)| {
                    let element = fields.get(index)?;
                    not_utf8(element.content).then_some(()).and(invalid(field))
                })
            }
            // Search, Modify, Add, Compare: the DN first.
            DnOperation::Search | DnOperation::Modify | DnOperation::Add | DnOperation::Compare => {
                let (first, _) = read_tlv(operation.content)?;
                let field = match kind {
                    DnOperation::Search => "base object",
                    _ => "entry",
                };
                if first.tag == tag::OCTET_STRING && not_utf8(first.content) {
                    return invalid(field);
                }
                let after_dn = operation.content.get(first.whole.len()..)?;
                descriptions_not_utf8(kind, after_dn).then_some(())?;
                invalid(ATTRIBUTE_DESCRIPTION)
            }
        }
    }

    /// The answer's result code: undefinedAttributeType for an attribute, else
    /// invalidDNSyntax.
    pub fn result_code(&self) -> u32 {
        if self.field == ATTRIBUTE_DESCRIPTION {
            17
        } else {
            34
        }
    }
}

/// BindRequest ::= [APPLICATION 0] SEQUENCE { version INTEGER (1 .. 127), name LDAPDN,
/// authentication AuthenticationChoice } (RFC 4511 §4.2).
#[derive(Debug, Clone, PartialEq)]
pub struct BindRequest {
    /// As sent (ldap3_proto's reading: at most 8 bytes); anything but 3 is refused.
    pub version: i64,
    /// The name's octets: a DN is UTF-8, and one that is not is answered invalidDNSyntax
    /// (34), as slapd answers it, not by ending the connection.
    pub name: Vec<u8>,
    pub credentials: BindCredentials,
}

impl BindRequest {
    /// A bind as `dn` (the HTTP listener's Basic and sign-in).
    pub fn simple(dn: &str, password: &[u8]) -> BindRequest {
        BindRequest {
            version: 3,
            name: dn.as_bytes().to_vec(),
            credentials: BindCredentials::Simple(password.to_vec()),
        }
    }

    /// The name as a DN's text; Err when it is not UTF-8.
    pub fn dn(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.name)
    }
}

/// AuthenticationChoice, with a simple password as the octets it is.
#[derive(Clone, PartialEq)]
pub enum BindCredentials {
    Simple(Vec<u8>),
    Sasl {
        mechanism: String,
        credentials: Vec<u8>,
    },
    /// A choice lmdir does not know: answered authMethodNotSupported.
    Unsupported,
}

impl std::fmt::Debug for BindCredentials {
    // Never the password or the SASL credentials.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindCredentials::Simple(_) => formatter.write_str("Simple(..)"),
            BindCredentials::Sasl { mechanism, .. } => {
                write!(formatter, "Sasl {{ mechanism: {mechanism:?}, .. }}")
            }
            BindCredentials::Unsupported => formatter.write_str("Unsupported"),
        }
    }
}

impl From<ldap3_proto::proto::LdapBindRequest> for BindRequest {
    fn from(request: ldap3_proto::proto::LdapBindRequest) -> BindRequest {
        use ldap3_proto::proto::LdapBindCred;
        BindRequest {
            version: request.version,
            name: request.dn.into_bytes(),
            credentials: match request.cred {
                LdapBindCred::Simple(password) => BindCredentials::Simple(password.into_bytes()),
                LdapBindCred::SASL(sasl) => BindCredentials::Sasl {
                    mechanism: sasl.mechanism,
                    credentials: sasl.credentials,
                },
                LdapBindCred::Unsupported => BindCredentials::Unsupported,
            },
        }
    }
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

/// `search_request`'s error when only the base is at fault (it is not UTF-8, or not a string).
pub const SEARCH_BASE_NOT_UTF8: &str = "search base";

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
        base: utf8(base).ok_or(SEARCH_BASE_NOT_UTF8)?,
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

/// AttributeSelection ::= SEQUENCE OF selector LDAPString. A selector that is not UTF-8 names
/// no attribute: kept (lossily) as one that matches none, as slapd ignores it, so the list is
/// not taken for an empty one (all attributes).
fn attribute_selection(element: &Tlv<'_>) -> Option<Vec<String>> {
    if element.tag != tag::SEQUENCE {
        return None;
    }
    let mut names = Vec::new();
    let mut rest = element.content;
    while !rest.is_empty() {
        let (name, after) = read_tlv(rest)?;
        if name.tag != tag::OCTET_STRING {
            return None;
        }
        names.push(String::from_utf8_lossy(name.content).into_owned());
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

/// PasswdModifyRequestValue ::= SEQUENCE { userIdentity [0] OCTET STRING OPTIONAL,
/// oldPasswd [1] OCTET STRING OPTIONAL, newPasswd [2] OCTET STRING OPTIONAL } (RFC 3062), with
/// the passwords as the octets they are (ldap3_proto's Strings refused a Latin-1 one).
#[derive(Clone, Default, PartialEq)]
pub struct PasswordModifyRequest {
    /// A DN (or `dn:` authzId) naming whose password changes; UTF-8.
    pub user_identity: Option<String>,
    pub old_password: Option<Vec<u8>>,
    pub new_password: Option<Vec<u8>>,
}

impl std::fmt::Debug for PasswordModifyRequest {
    // Never the passwords.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PasswordModifyRequest")
            .field("user_identity", &self.user_identity)
            .field("old_password", &self.old_password.as_ref().map(|_| ".."))
            .field("new_password", &self.new_password.as_ref().map(|_| ".."))
            .finish()
    }
}

impl PasswordModifyRequest {
    /// Decodes the request value (None: an empty request, every field absent). Err names what
    /// is malformed: fields out of order or repeated, another tag, a constructed string, bytes
    /// after the sequence, a user identity that is not UTF-8.
    pub fn decode(value: Option<&[u8]>) -> Result<PasswordModifyRequest, &'static str> {
        let Some(value) = value else {
            return Ok(PasswordModifyRequest::default());
        };
        let fields = match read_tlv(value) {
            Some((sequence, [])) if sequence.tag == tag::SEQUENCE => elements(sequence.content),
            _ => None,
        }
        .ok_or("the request value is not one SEQUENCE")?;
        let mut request = PasswordModifyRequest::default();
        let mut next_tag = 0x80;
        for field in &fields {
            if !(next_tag..=0x82).contains(&field.tag) {
                return Err("a field out of order, repeated or of another tag");
            }
            next_tag = field.tag + 1;
            match field.tag {
                0x80 => {
                    let identity = std::str::from_utf8(field.content)
                        .map_err(|_| "the user identity is not UTF-8")?;
                    request.user_identity = Some(identity.to_string());
                }
                0x81 => request.old_password = Some(field.content.to_vec()),
                _ => request.new_password = Some(field.content.to_vec()),
            }
        }
        Ok(request)
    }
}

#[cfg(test)]
mod password_modify_tests {
    use super::PasswordModifyRequest;

    #[test]
    fn password_modify_values_decode_with_octet_passwords() {
        assert_eq!(
            PasswordModifyRequest::decode(None),
            Ok(PasswordModifyRequest::default())
        );
        // { [0] "cn=x", [1] 63 61 66 e9, [2] "new" }
        let value = [
            0x30, 0x11, 0x80, 0x04, b'c', b'n', b'=', b'x', 0x81, 0x04, b'c', b'a', b'f', 0xe9,
            0x82, 0x03, b'n', b'e', b'w',
        ];
        let request = PasswordModifyRequest::decode(Some(&value)).expect("decoded");
        assert_eq!(request.user_identity.as_deref(), Some("cn=x"));
        assert_eq!(request.old_password.as_deref(), Some(&b"caf\xe9"[..]));
        assert_eq!(request.new_password.as_deref(), Some(&b"new"[..]));
        // Only the new password; an empty sequence.
        let only_new = [0x30, 0x03, 0x82, 0x01, 0xe9];
        let request = PasswordModifyRequest::decode(Some(&only_new)).expect("decoded");
        assert_eq!(request.new_password.as_deref(), Some(&[0xe9][..]));
        assert_eq!(
            PasswordModifyRequest::decode(Some(&[0x30, 0x00])),
            Ok(PasswordModifyRequest::default())
        );
        for malformed in [
            &[0x30, 0x06, 0x82, 0x01, b'a', 0x81, 0x01, b'b'][..], // out of order
            &[0x30, 0x06, 0x81, 0x01, b'a', 0x81, 0x01, b'b'],     // repeated
            &[0x30, 0x03, 0x83, 0x01, b'a'],                       // another tag
            &[0x30, 0x03, 0x80, 0x01, 0xff],                       // identity not UTF-8
            &[0x30, 0x03, 0x80, 0x01, b'a', 0x00],                 // bytes after
            &[0x04, 0x00],                                         // not a SEQUENCE
        ] {
            assert!(
                PasswordModifyRequest::decode(Some(malformed)).is_err(),
                "{malformed:02x?}"
            );
        }
    }
}
