//! Distinguished names (RFC 4514): parsing, string form and helpers on normalized DN strings.

use std::fmt;

use crate::error::LdapError;

/// Longest DN string accepted (bytes).
pub const DN_SIZE_BYTES_MAX: usize = 64 * 1024;
/// Most RDNs in one DN.
pub const DN_RDN_COUNT_MAX: usize = 512;
/// Most attribute-value assertions in one (multi-valued) RDN.
pub const RDN_AVA_COUNT_MAX: usize = 64;

/// Whether `dn` has the simple shape: within `DN_SIZE_BYTES_MAX`, ASCII, with no escapes,
/// quotes, `#` values, multi-valued RDNs (`+`) or `;` separators (nor NUL). In such a DN every
/// comma ends an RDN and every RDN normalizes on its own, so `Schema::normalize_dn_str` takes
/// its fast path and a caller may split it at a comma.
pub fn dn_has_simple_shape(dn: &str) -> bool {
    dn.len() <= DN_SIZE_BYTES_MAX
        && dn
            .bytes()
            .all(|byte| byte.is_ascii() && !matches!(byte, b'\\' | b'"' | b'+' | b';' | b'#' | 0))
}

/// One `type=value` of an RDN. `attr` is the type as written (name or numeric OID); `value` the
/// unescaped value bytes (for `#hex` values the contents of the BER string, or the raw BER).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ava {
    pub attr: String,
    pub value: Vec<u8>,
}

/// A relative distinguished name: one or more AVAs joined by `+`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rdn {
    pub avas: Vec<Ava>,
}

/// A distinguished name; `rdns[0]` is the leftmost (most specific) RDN. No RDNs = the root DSE.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Dn {
    pub rdns: Vec<Rdn>,
}

impl Dn {
    /// The empty DN (root DSE).
    pub fn root() -> Dn {
        Dn { rdns: Vec::new() }
    }

    /// Parses an RFC 4514 string (`cn=J. Smith+uid=js,dc=example,dc=com`). Also accepts `;` as an
    /// RDN separator and spaces around separators (RFC 2253 leniency). Errors are invalidDNSyntax.
    pub fn parse(text: &str) -> Result<Dn, LdapError> {
        Dn::parse_with(text, false)
    }

    /// Parses a DN stored as an attribute value: RFC 4514 only. LDAPv2 forms (`;` between RDNs,
    /// `"quoted"` values, `OID.`-prefixed types) are refused, since a value is returned as
    /// stored and RFC 4514 clients cannot read those forms (slapd 2.5 refuses `OID.` types and
    /// rewrites the other two: docs/compatibility.md).
    pub fn parse_value(text: &str) -> Result<Dn, LdapError> {
        Dn::parse_with(text, true)
    }

    fn parse_with(text: &str, rfc4514_only: bool) -> Result<Dn, LdapError> {
        if rfc4514_only {
            if let Some(form) = ldapv2_form(text) {
                return Err(LdapError::invalid_dn(format!(
                    "'{text}': {form} is an LDAPv2 form, not RFC 4514"
                )));
            }
        }
        if text.len() > DN_SIZE_BYTES_MAX {
            return Err(LdapError::invalid_dn(format!(
                "DN longer than {DN_SIZE_BYTES_MAX} bytes"
            )));
        }
        let mut parser = Parser {
            text,
            bytes: text.as_bytes(),
            position: 0,
        };
        parser.skip_spaces();
        let mut rdns = Vec::new();
        if parser.at_end() {
            return Ok(Dn { rdns });
        }
        loop {
            let mut avas = Vec::new();
            loop {
                avas.push(parser.ava()?);
                if avas.len() > RDN_AVA_COUNT_MAX {
                    return Err(LdapError::invalid_dn(format!(
                        "RDN with more than {RDN_AVA_COUNT_MAX} values"
                    )));
                }
                parser.skip_spaces();
                if parser.peek() == Some(b'+') {
                    parser.position += 1;
                    parser.skip_spaces();
                    continue;
                }
                break;
            }
            rdns.push(Rdn { avas });
            if rdns.len() > DN_RDN_COUNT_MAX {
                return Err(LdapError::invalid_dn(format!(
                    "DN with more than {DN_RDN_COUNT_MAX} RDNs"
                )));
            }
            match parser.peek() {
                None => break,
                Some(b',' | b';') => {
                    parser.position += 1;
                    parser.skip_spaces();
                    if parser.at_end() {
                        return Err(parser.error("DN ends with a separator"));
                    }
                }
                Some(_) => return Err(parser.error("expected ',' or '+'")),
            }
        }
        Ok(Dn { rdns })
    }

    pub fn is_root(&self) -> bool {
        self.rdns.is_empty()
    }

    /// The leftmost RDN.
    pub fn rdn(&self) -> Option<&Rdn> {
        self.rdns.first()
    }

    /// The DN without its leftmost RDN; None for the root.
    pub fn parent(&self) -> Option<Dn> {
        if self.rdns.is_empty() {
            None
        } else {
            Some(Dn {
                rdns: self.rdns[1..].to_vec(),
            })
        }
    }

    /// This DN with `rdn` added on the left.
    pub fn child(&self, rdn: Rdn) -> Dn {
        let mut rdns = Vec::with_capacity(self.rdns.len() + 1);
        rdns.push(rdn);
        rdns.extend(self.rdns.iter().cloned());
        Dn { rdns }
    }
}

impl Rdn {
    /// Parses a single RDN (`cn=a+sn=b`).
    pub fn parse(text: &str) -> Result<Rdn, LdapError> {
        let dn = Dn::parse(text)?;
        if dn.rdns.len() != 1 {
            return Err(LdapError::invalid_dn(format!(
                "'{text}' is not a single RDN"
            )));
        }
        Ok(dn.rdns.into_iter().next().expect("length checked"))
    }
}

/// The LDAPv2 (RFC 1779) feature a DN string uses outside escapes, if any: a `;` separator, a
/// quoted value, or an `OID.` type prefix.
pub(crate) fn ldapv2_form(text: &str) -> Option<&'static str> {
    let bytes = text.as_bytes();
    let mut index = 0;
    let mut at_type_start = true;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => {
                index += 2;
                at_type_start = false;
                continue;
            }
            b';' => return Some("';' between RDNs"),
            b'"' => return Some("a quoted value"),
            b',' | b'+' => at_type_start = true,
            b' ' => {}
            _ if at_type_start => {
                let rest = &bytes[index..];
                if rest.len() >= 4 && rest[..4].eq_ignore_ascii_case(b"oid.") {
                    return Some("an 'OID.' attribute type prefix");
                }
                at_type_start = false;
            }
            _ => {}
        }
        index += 1;
    }
    None
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    position: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    fn at_end(&self) -> bool {
        self.position >= self.bytes.len()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.position += 1;
        }
    }

    fn error(&self, why: &str) -> LdapError {
        LdapError::invalid_dn(format!(
            "invalid DN '{}': {why} at offset {}",
            self.text, self.position
        ))
    }

    fn ava(&mut self) -> Result<Ava, LdapError> {
        let start = self.position;
        while let Some(byte) = self.peek() {
            if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.' {
                self.position += 1;
            } else {
                break;
            }
        }
        let attr = &self.text[start..self.position];
        let attr = attr
            .strip_prefix("OID.")
            .or_else(|| attr.strip_prefix("oid."))
            .unwrap_or(attr);
        if attr.is_empty() {
            return Err(self.error("missing attribute type"));
        }
        crate::syntax::validate_oid_or_descr(attr).map_err(|_| self.error("bad attribute type"))?;
        self.skip_spaces();
        if self.peek() != Some(b'=') {
            return Err(self.error("expected '='"));
        }
        self.position += 1;
        self.skip_spaces();
        let value = if self.peek() == Some(b'#') {
            self.hex_value()?
        } else {
            self.string_value()?
        };
        Ok(Ava {
            attr: attr.to_string(),
            value,
        })
    }

    fn hex_value(&mut self) -> Result<Vec<u8>, LdapError> {
        self.position += 1;
        let start = self.position;
        while self.peek().is_some_and(|byte| byte.is_ascii_hexdigit()) {
            self.position += 1;
        }
        let digits = &self.bytes[start..self.position];
        if digits.is_empty() || !digits.len().is_multiple_of(2) {
            return Err(self.error("'#' value needs an even number of hex digits"));
        }
        let ber: Vec<u8> = digits
            .chunks(2)
            .map(|pair| hex_pair(pair[0], pair[1]))
            .collect();
        Ok(ber_string_contents(&ber).map(<[u8]>::to_vec).unwrap_or(ber))
    }

    fn string_value(&mut self) -> Result<Vec<u8>, LdapError> {
        let mut value = Vec::new();
        // Length of `value` up to the last character that was escaped or not a space, so
        // unescaped trailing spaces are dropped and escaped ones kept.
        let mut significant_length = 0;
        if self.peek() == Some(b'"') {
            // RFC 1779 quoted value.
            self.position += 1;
            loop {
                match self.peek() {
                    None => return Err(self.error("unterminated quoted value")),
                    Some(b'"') => {
                        self.position += 1;
                        break;
                    }
                    Some(b'\\') => value.push(self.escape()?),
                    Some(byte) => {
                        value.push(byte);
                        self.position += 1;
                    }
                }
            }
            self.skip_spaces();
            return Ok(value);
        }
        while let Some(byte) = self.peek() {
            match byte {
                b',' | b'+' | b';' => break,
                b'\\' => {
                    value.push(self.escape()?);
                    significant_length = value.len();
                }
                0 => return Err(self.error("unescaped NUL")),
                _ => {
                    value.push(byte);
                    self.position += 1;
                    if byte != b' ' {
                        significant_length = value.len();
                    }
                }
            }
        }
        value.truncate(significant_length);
        Ok(value)
    }

    fn escape(&mut self) -> Result<u8, LdapError> {
        self.position += 1;
        match (self.peek(), self.bytes.get(self.position + 1).copied()) {
            (Some(high), Some(low)) if high.is_ascii_hexdigit() && low.is_ascii_hexdigit() => {
                self.position += 2;
                Ok(hex_pair(high, low))
            }
            (Some(special), _) if b" \"#+,;<=>\\".contains(&special) => {
                self.position += 1;
                Ok(special)
            }
            _ => Err(self.error("bad escape")),
        }
    }
}

fn hex_pair(high: u8, low: u8) -> u8 {
    let digit = |byte: u8| (byte as char).to_digit(16).expect("hex digit checked") as u8;
    digit(high) << 4 | digit(low)
}

/// Contents of a BER-encoded primitive string (OCTET STRING, UTF8String, PrintableString,
/// IA5String, T61String, BMP not included), or None when it is not one.
fn ber_string_contents(ber: &[u8]) -> Option<&[u8]> {
    let (&tag, rest) = ber.split_first()?;
    if !matches!(tag, 0x04 | 0x0C | 0x13 | 0x14 | 0x16) {
        return None;
    }
    let (&first_length, rest) = rest.split_first()?;
    let (length, contents) = if first_length < 0x80 {
        (usize::from(first_length), rest)
    } else {
        let length_bytes = usize::from(first_length & 0x7F);
        if length_bytes == 0 || length_bytes > 4 || rest.len() < length_bytes {
            return None;
        }
        let length = rest[..length_bytes]
            .iter()
            .fold(0usize, |accumulator, byte| {
                accumulator << 8 | usize::from(*byte)
            });
        (length, &rest[length_bytes..])
    };
    (contents.len() == length).then_some(contents)
}

/// Appends `value` escaped per RFC 4514 §2.4: `"+,;<>\` always, `#` and space when leading,
/// space when trailing, NUL and bytes that are not UTF-8 as `\XX`.
pub fn escape_value(value: &[u8], output: &mut String) {
    let valid_utf8 = std::str::from_utf8(value).is_ok();
    let last = value.len().saturating_sub(1);
    for (index, &byte) in value.iter().enumerate() {
        let needs_backslash =
            matches!(byte, b'"' | b'+' | b',' | b';' | b'<' | b'>' | b'\\' | b'=')
                || (index == 0 && (byte == b'#' || byte == b' '))
                || (index == last && byte == b' ');
        if byte == 0 || (!valid_utf8 && !byte.is_ascii()) {
            output.push_str(&format!("\\{byte:02X}"));
        } else if needs_backslash {
            output.push('\\');
            output.push(byte as char);
        } else if byte.is_ascii() {
            output.push(byte as char);
        } else {
            // Valid UTF-8 multi-byte sequence: copy the whole character at its first byte.
            if (byte & 0xC0) != 0x80 {
                let width = match byte {
                    0xF0..=0xFF => 4,
                    0xE0..=0xEF => 3,
                    _ => 2,
                };
                output.push_str(
                    std::str::from_utf8(&value[index..index + width]).expect("validated UTF-8"),
                );
            }
        }
    }
}

impl fmt::Display for Ava {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut escaped = String::with_capacity(self.value.len() + 4);
        escape_value(&self.value, &mut escaped);
        write!(formatter, "{}={}", self.attr, escaped)
    }
}

impl fmt::Display for Rdn {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, ava) in self.avas.iter().enumerate() {
            if index > 0 {
                formatter.write_str("+")?;
            }
            write!(formatter, "{ava}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Dn {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, rdn) in self.rdns.iter().enumerate() {
            if index > 0 {
                formatter.write_str(",")?;
            }
            write!(formatter, "{rdn}")?;
        }
        Ok(())
    }
}

/// Splits a normalized (or any RFC 4514) DN string into its RDN strings, leftmost first,
/// honoring backslash escapes. The empty DN gives no RDNs.
pub fn split_rdns(dn: &str) -> Vec<&str> {
    let mut rdns = Vec::new();
    if dn.is_empty() {
        return rdns;
    }
    let bytes = dn.as_bytes();
    let mut start = 0;
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b',' => {
                rdns.push(&dn[start..index]);
                start = index + 1;
                index += 1;
            }
            _ => index += 1,
        }
    }
    rdns.push(&dn[start..]);
    rdns
}

/// True when normalized DN `dn` equals `base` or lies below it (both from `Schema::normalize_dn`).
/// The root (empty) base contains every DN.
pub fn normalized_dn_is_within(dn: &str, base: &str) -> bool {
    if base.is_empty() {
        return true;
    }
    if dn == base {
        return true;
    }
    if dn.len() <= base.len() + 1 || !dn.ends_with(base) {
        return false;
    }
    // The byte before the base must be an RDN separator that is not escaped.
    let boundary = dn.len() - base.len() - 1;
    if dn.as_bytes()[boundary] != b',' {
        return false;
    }
    let backslashes = dn.as_bytes()[..boundary]
        .iter()
        .rev()
        .take_while(|byte| **byte == b'\\')
        .count();
    backslashes % 2 == 0
}

/// True when normalized DN `dn` lies strictly below `ancestor`.
pub fn normalized_dn_is_descendant_of(dn: &str, ancestor: &str) -> bool {
    dn != ancestor && normalized_dn_is_within(dn, ancestor)
}

/// The parent of a normalized DN string (`""` for a one-RDN DN), None for the root.
pub fn normalized_dn_parent(dn: &str) -> Option<&str> {
    if dn.is_empty() {
        return None;
    }
    let first = split_rdns(dn)
        .into_iter()
        .next()
        .expect("non-empty DN has an RDN");
    Some(dn.get(first.len() + 1..).unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ava(attr: &str, value: &[u8]) -> Ava {
        Ava {
            attr: attr.to_string(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn rfc_4514_examples_parse() {
        let dn = Dn::parse("UID=jsmith,DC=example,DC=net").unwrap();
        assert_eq!(dn.rdns.len(), 3);
        assert_eq!(dn.rdns[0].avas[0], ava("UID", b"jsmith"));

        let dn = Dn::parse("OU=Sales+CN=J.  Smith,DC=example,DC=net").unwrap();
        assert_eq!(
            dn.rdns[0].avas,
            vec![ava("OU", b"Sales"), ava("CN", b"J.  Smith")]
        );

        let dn = Dn::parse("CN=James \\\"Jim\\\" Smith\\, III,DC=example,DC=net").unwrap();
        assert_eq!(dn.rdns[0].avas[0].value, b"James \"Jim\" Smith, III");

        let dn = Dn::parse("CN=Before\\0dAfter,DC=example,DC=net").unwrap();
        assert_eq!(dn.rdns[0].avas[0].value, b"Before\rAfter");

        let dn = Dn::parse("1.3.6.1.4.1.1466.0=#04024869,DC=example,DC=com").unwrap();
        assert_eq!(dn.rdns[0].avas[0], ava("1.3.6.1.4.1.1466.0", b"Hi"));

        let dn = Dn::parse("CN=Lu\\C4\\8Di\\C4\\87").unwrap();
        assert_eq!(dn.rdns[0].avas[0].value, "Lučić".as_bytes());
    }

    #[test]
    fn spaces_escapes_and_root() {
        assert!(Dn::parse("").unwrap().is_root());
        assert!(Dn::parse("   ").unwrap().is_root());
        let dn = Dn::parse(" cn = Babs  , dc=example ").unwrap();
        assert_eq!(dn.rdns[0].avas[0], ava("cn", b"Babs"));
        assert_eq!(dn.rdns[1].avas[0], ava("dc", b"example"));
        let dn = Dn::parse("cn=\\ lead and trail\\ ,dc=x").unwrap();
        assert_eq!(dn.rdns[0].avas[0].value, b" lead and trail ");
        assert_eq!(
            Dn::parse("cn=a\\2Cb").unwrap().rdns[0].avas[0].value,
            b"a,b"
        );
        assert_eq!(Dn::parse("cn=a;dc=b").unwrap().rdns.len(), 2);
        assert_eq!(
            Dn::parse("cn=\"a,b\",dc=c").unwrap().rdns[0].avas[0].value,
            b"a,b"
        );
        assert_eq!(Dn::parse("cn=,dc=c").unwrap().rdns[0].avas[0].value, b"");
    }

    #[test]
    fn invalid_dns_are_invalid_dn_syntax() {
        for text in [
            "cn",
            "=x",
            "cn=a,",
            "cn=a,,dc=b",
            "cn=a\\",
            "cn=a\\zz",
            "cn=#123",
            "c n=a",
            "cn=#",
            "-cn=x",
            "cn=a\0",
        ] {
            let error = Dn::parse(text).unwrap_err();
            assert_eq!(error.code, crate::ResultCode::InvalidDnSyntax, "{text}");
        }
        let too_long = format!("cn={}", "a".repeat(DN_SIZE_BYTES_MAX));
        assert!(Dn::parse(&too_long).is_err());
        let too_deep = vec!["dc=a"; DN_RDN_COUNT_MAX + 1].join(",");
        assert!(Dn::parse(&too_deep).is_err());
    }

    #[test]
    fn display_escapes_per_rfc_4514() {
        let dn = Dn {
            rdns: vec![
                Rdn {
                    avas: vec![ava("cn", b" #a,b+c\"d\\e<f>;g ")],
                },
                Rdn {
                    avas: vec![ava("dc", b"x")],
                },
            ],
        };
        assert_eq!(
            dn.to_string(),
            "cn=\\ #a\\,b\\+c\\\"d\\\\e\\<f\\>\\;g\\ ,dc=x"
        );
        assert_eq!(Dn::parse(&dn.to_string()).unwrap(), dn);
        let binary = Dn {
            rdns: vec![Rdn {
                avas: vec![ava("cn", &[0xFF, 0x00, b'a'])],
            }],
        };
        assert_eq!(binary.to_string(), "cn=\\FF\\00a");
        assert_eq!(Dn::parse(&binary.to_string()).unwrap(), binary);
        let multi = Dn::parse("cn=a+sn=b,dc=c").unwrap();
        assert_eq!(multi.to_string(), "cn=a+sn=b,dc=c");
        assert_eq!(Dn::parse("cn=Kraków").unwrap().to_string(), "cn=Kraków");
    }

    #[test]
    fn parent_child_and_normalized_helpers() {
        let dn = Dn::parse("cn=a,ou=b,dc=c").unwrap();
        assert_eq!(dn.parent().unwrap().to_string(), "ou=b,dc=c");
        assert_eq!(Dn::root().parent(), None);
        assert_eq!(dn.parent().unwrap().child(dn.rdns[0].clone()), dn);
        assert_eq!(split_rdns("cn=a\\,b,dc=c"), vec!["cn=a\\,b", "dc=c"]);
        assert_eq!(split_rdns("cn=a\\\\,dc=c"), vec!["cn=a\\\\", "dc=c"]);
        assert!(normalized_dn_is_within("cn=a,dc=c", "dc=c"));
        assert!(normalized_dn_is_within("dc=c", "dc=c"));
        assert!(!normalized_dn_is_descendant_of("dc=c", "dc=c"));
        assert!(normalized_dn_is_within("dc=c", ""));
        assert!(!normalized_dn_is_within("cn=a,xdc=c", "dc=c"));
        assert!(!normalized_dn_is_within("cn=a\\,dc=c", "dc=c"));
        assert!(normalized_dn_is_within("cn=a\\\\,dc=c", "dc=c"));
        assert_eq!(normalized_dn_parent("cn=a\\,b,dc=c"), Some("dc=c"));
        assert_eq!(normalized_dn_parent("dc=c"), Some(""));
        assert_eq!(normalized_dn_parent(""), None);
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips(values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 1..5)) {
            let dn = Dn { rdns: values.iter().map(|value| Rdn { avas: vec![ava("cn", value)] }).collect() };
            prop_assert_eq!(Dn::parse(&dn.to_string()).unwrap(), dn);
        }
    }
}
