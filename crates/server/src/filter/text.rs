//! RFC 4515 string form of a request's filter, written straight from its BER (`RawFilter`)
//! for the stats log: bounded, escaped, password values redacted, whatever the filter's size
//! and whether or not it is within the limits that decoding it for the search enforces.

use super::{tag, RawFilter};
use crate::ber_read::{elements, read_tlv, Tlv};
use std::fmt::Write;

/// Whether an attribute description names a password or a hash of one (the access crate's
/// `SECRET_ATTRIBUTES`): its assertion values never reach a log.
fn is_secret_attribute(description: &[u8]) -> bool {
    std::str::from_utf8(description).is_ok_and(lmdir_access::acl::names_secret_attribute)
}

/// The filter for the stats log: RFC 4515 form with the values asserted on userPassword (and
/// of extensible matches naming no attribute, which may test it) replaced by `<redacted>`,
/// written only up to about `bytes_max` bytes and then ended with `...`, so a 16 MiB filter
/// costs the log no more than a short one.
pub fn to_log_string(filter: &RawFilter, bytes_max: usize) -> String {
    let mut writer = FilterWriter {
        out: String::with_capacity(64),
        bytes_max,
    };
    writer.filter(&filter.element());
    if writer.out.len() > bytes_max {
        let mut cut = bytes_max;
        while !writer.out.is_char_boundary(cut) {
            cut -= 1;
        }
        writer.out.truncate(cut);
        writer.out.push_str("...");
    }
    writer.out
}

/// What the log shows instead of a password assertion value.
const REDACTED: &str = "<redacted>";
/// What the log shows for a part of a filter that does not decode (the search answers it).
const UNDECODABLE: &str = "?";

/// RFC 4515 writer over a filter's BER that redacts password values and stops adding text
/// past `bytes_max`. Nesting was bounded when the request's PDU was checked.
struct FilterWriter {
    out: String,
    bytes_max: usize,
}

impl FilterWriter {
    fn full(&self) -> bool {
        self.out.len() > self.bytes_max
    }

    /// Client text that is not an assertion value (attribute names, rule names).
    fn name(&mut self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let room = self
            .bytes_max
            .saturating_sub(self.out.len())
            .saturating_add(1);
        let mut cut = text.len().min(room);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.out.push_str(&text[..cut]);
    }

    /// An assertion value, escaped (RFC 4515 §3): UTF-8 text unchanged but for the special
    /// characters, any other byte as `\xx`.
    fn value(&mut self, value: &[u8]) {
        // Most values are plain ASCII with nothing to escape: copied at once, up to the same
        // place the loop below stops (one byte past the bound), instead of a char at a time.
        let plain =
            |byte: u8| (0x20..0x7f).contains(&byte) && !matches!(byte, b'*' | b'(' | b')' | b'\\');
        if !crate::log_text::contains_byte_where(value, |byte| !plain(byte)) {
            if !self.full() {
                let room = (self.bytes_max - self.out.len()).saturating_add(1);
                let plain = std::str::from_utf8(&value[..value.len().min(room)]).unwrap_or("");
                self.out.push_str(plain);
            }
            return;
        }
        let Ok(text) = std::str::from_utf8(value) else {
            for byte in value {
                if self.full() {
                    return;
                }
                if plain(*byte) {
                    self.out.push(char::from(*byte));
                } else {
                    let _ = write!(self.out, "\\{byte:02x}");
                }
            }
            return;
        };
        for character in text.chars() {
            if self.full() {
                return;
            }
            match character {
                '*' | '(' | ')' | '\\' | '\0' => {
                    let _ = write!(self.out, "\\{:02x}", character as u32);
                }
                _ if (character as u32) < 0x20 || character == '\u{7f}' => {
                    let _ = write!(self.out, "\\{:02x}", character as u32);
                }
                _ => self.out.push(character),
            }
        }
    }

    fn filter(&mut self, element: &Tlv<'_>) {
        if self.full() {
            return;
        }
        match element.tag {
            tag::AND => self.set('&', element.content),
            tag::OR => self.set('|', element.content),
            tag::NOT => {
                self.out.push_str("(!");
                match read_tlv(element.content) {
                    Some((child, _)) => self.filter(&child),
                    None => self.out.push_str(UNDECODABLE),
                }
                self.out.push(')');
            }
            tag::EQUALITY => self.simple(element.content, "="),
            tag::GREATER_OR_EQUAL => self.simple(element.content, ">="),
            tag::LESS_OR_EQUAL => self.simple(element.content, "<="),
            tag::APPROX => self.simple(element.content, "~="),
            tag::PRESENT => {
                self.out.push('(');
                self.name(element.content);
                self.out.push_str("=*)");
            }
            tag::SUBSTRINGS => self.substring(element.content),
            tag::EXTENSIBLE => self.extensible(element.content),
            _ => self.out.push_str(UNDECODABLE),
        }
    }

    fn substring(&mut self, content: &[u8]) {
        let parts = elements(content).unwrap_or_default();
        let [attribute, pieces] = parts.as_slice() else {
            self.out.push_str(UNDECODABLE);
            return;
        };
        self.out.push('(');
        self.name(attribute.content);
        self.out.push('=');
        if is_secret_attribute(attribute.content) {
            self.out.push_str(REDACTED);
            self.out.push(')');
            return;
        }
        let pieces = elements(pieces.content).unwrap_or_default();
        if pieces
            .first()
            .is_none_or(|piece| piece.tag != tag::SUBSTRING_INITIAL)
        {
            self.out.push('*');
        }
        for piece in &pieces {
            if self.full() {
                break;
            }
            self.value(piece.content);
            if piece.tag != tag::SUBSTRING_FINAL {
                self.out.push('*');
            }
        }
        self.out.push(')');
    }

    fn extensible(&mut self, content: &[u8]) {
        let parts = elements(content).unwrap_or_default();
        let part = |wanted: u8| parts.iter().find(|part| part.tag == wanted);
        self.out.push('(');
        let attribute = part(tag::RULE_TYPE);
        if let Some(attribute) = attribute {
            self.name(attribute.content);
        }
        if part(tag::DN_ATTRIBUTES).is_some_and(|flag| flag.content.iter().any(|byte| *byte != 0)) {
            self.out.push_str(":dn");
        }
        if let Some(rule) = part(tag::MATCHING_RULE) {
            self.out.push(':');
            self.name(rule.content);
        }
        self.out.push_str(":=");
        // With no attribute named, the rule may apply to userPassword.
        if attribute.is_none_or(|attribute| is_secret_attribute(attribute.content)) {
            self.out.push_str(REDACTED);
        } else if let Some(value) = part(tag::MATCH_VALUE) {
            self.value(value.content);
        }
        self.out.push(')');
    }

    fn set(&mut self, operator: char, content: &[u8]) {
        self.out.push('(');
        self.out.push(operator);
        let mut rest = content;
        while let Some((child, after)) = read_tlv(rest) {
            if self.full() {
                break;
            }
            self.filter(&child);
            rest = after;
        }
        self.out.push(')');
    }

    fn simple(&mut self, content: &[u8], operator: &str) {
        let parts = elements(content).unwrap_or_default();
        let [attribute, value] = parts.as_slice() else {
            self.out.push_str(UNDECODABLE);
            return;
        };
        self.out.push('(');
        self.name(attribute.content);
        self.out.push_str(operator);
        if is_secret_attribute(attribute.content) {
            self.out.push_str(REDACTED);
        } else {
            self.value(value.content);
        }
        self.out.push(')');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::tests::encode;
    use lmdir_schema::Filter;

    fn logged(text: &str, bytes_max: usize) -> String {
        to_log_string(&encode(&Filter::parse(text, 64).expect(text)), bytes_max)
    }

    #[test]
    fn round_trips_through_the_parser() {
        for text in [
            "(objectClass=*)",
            "(&(uid=u1)(|(cn=a*b*c)(!(sn=x))))",
            "(l=Kraków)",
            "(uidNumber>=10)",
            "(uidNumber<=10)",
            "(cn~=smith)",
            "(cn=*mid*)",
            "(cn=start*)",
            "(cn:dn:caseExactMatch:=x)",
        ] {
            assert_eq!(logged(text, usize::MAX), text);
        }
    }

    #[test]
    fn special_characters_and_binary_values_are_escaped() {
        assert_eq!(
            logged("(cn=K\\2a\\28\\29\\5c\\00)", usize::MAX),
            "(cn=K\\2a\\28\\29\\5c\\00)"
        );
        assert_eq!(
            logged("(jpegPhoto=\\ff\\d8)", usize::MAX),
            "(jpegPhoto=\\ff\\d8)"
        );
    }

    /// A plain value is copied whole, and stops where the character loop would: one byte past
    /// the bound, which `to_log_string` then cuts and marks.
    #[test]
    fn plain_and_escaped_values_are_cut_at_the_same_place() {
        assert_eq!(logged("(cn=abcdefghijklmnop)", 10), "(cn=abcdef...");
        assert_eq!(logged("(cn=abcdefghijklmno\\28)", 10), "(cn=abcdef...");
        let both = "(&(cn=abcdefghijklmnop)(cn=abcdefghijklmnop))";
        assert_eq!(logged(both, 20), "(&(cn=abcdefghijklmn...");
        assert_eq!(logged(both, 1000), both);
    }
}
