//! RFC 4515 string form of a decoded filter (for the stats log and for lmdir-schema's parser) and
//! the nesting-depth limit.

use ldap3_proto::proto::LdapFilter;
use std::fmt::Write;

/// Nesting depth: a leaf is 1, `(&(a=b))` is 2.
/// Iterative, so a hostile nesting cannot overflow the stack.
pub fn depth(filter: &LdapFilter) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(filter, 1usize)];
    while let Some((filter, level)) = pending.pop() {
        deepest = deepest.max(level);
        match filter {
            LdapFilter::And(children) | LdapFilter::Or(children) => {
                pending.extend(children.iter().map(|child| (child, level + 1)));
            }
            LdapFilter::Not(child) => pending.push((child, level + 1)),
            _ => {}
        }
    }
    deepest
}

/// Items of a filter: leaves plus substring pieces, what one filter test walks per entry.
/// Counting stops past `stop_after`, so measuring a huge filter costs no more than the limit.
pub fn item_count(filter: &LdapFilter, stop_after: usize) -> usize {
    let mut count = 0usize;
    let mut pending = vec![filter];
    while let Some(filter) = pending.pop() {
        if count > stop_after {
            break;
        }
        match filter {
            LdapFilter::And(children) | LdapFilter::Or(children) => pending.extend(children),
            LdapFilter::Not(child) => pending.push(child),
            LdapFilter::Substring(_, substrings) => {
                count += 1 + substrings.any.len();
            }
            _ => count += 1,
        }
    }
    count
}

/// Bytes of a filter's attribute names and assertion values, counted until past `stop_after`.
pub fn text_bytes(filter: &LdapFilter, stop_after: usize) -> usize {
    let mut bytes = 0usize;
    let mut pending = vec![filter];
    while let Some(filter) = pending.pop() {
        if bytes > stop_after {
            break;
        }
        bytes += match filter {
            LdapFilter::And(children) | LdapFilter::Or(children) => {
                pending.extend(children);
                0
            }
            LdapFilter::Not(child) => {
                pending.push(child);
                0
            }
            LdapFilter::Present(attribute) => attribute.len(),
            LdapFilter::Equality(attribute, value)
            | LdapFilter::GreaterOrEqual(attribute, value)
            | LdapFilter::LessOrEqual(attribute, value)
            | LdapFilter::Approx(attribute, value) => attribute.len() + value.len(),
            LdapFilter::Substring(attribute, substrings) => {
                attribute.len()
                    + substrings.initial.as_ref().map_or(0, String::len)
                    + substrings.any.iter().map(String::len).sum::<usize>()
                    + substrings.final_.as_ref().map_or(0, String::len)
            }
            LdapFilter::Extensible(assertion) => {
                assertion.type_.as_ref().map_or(0, String::len)
                    + assertion.matching_rule.as_ref().map_or(0, String::len)
                    + assertion.match_value.len()
            }
        };
    }
    bytes
}

/// Whether an attribute description names a password or a hash of one (the access crate's
/// `SECRET_ATTRIBUTES`): its assertion values never reach a log.
fn is_secret_attribute(description: &str) -> bool {
    lmdir_access::acl::names_secret_attribute(description)
}

/// The filter for the stats log: RFC 4515 form with the values asserted on userPassword (and
/// of extensible matches naming no attribute, which may test it) replaced by `<redacted>`,
/// written only up to about `bytes_max` bytes and then ended with `...`, so a 16 MiB filter
/// costs the log no more than a short one.
pub fn to_log_string(filter: &LdapFilter, bytes_max: usize) -> String {
    let mut writer = FilterWriter {
        out: String::with_capacity(64),
        redact: true,
        bytes_max,
    };
    writer.filter(filter);
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

/// Writes `filter` in RFC 4515 form.
pub fn write_filter(out: &mut String, filter: &LdapFilter) {
    let mut writer = FilterWriter {
        out: std::mem::take(out),
        redact: false,
        bytes_max: usize::MAX,
    };
    writer.filter(filter);
    *out = writer.out;
}

/// What the log shows instead of a password assertion value.
const REDACTED: &str = "<redacted>";

/// RFC 4515 writer that may redact password values and stops adding text past `bytes_max`.
struct FilterWriter {
    out: String,
    redact: bool,
    bytes_max: usize,
}

impl FilterWriter {
    fn full(&self) -> bool {
        self.out.len() > self.bytes_max
    }

    fn secret(&self, attribute: &str) -> bool {
        self.redact && is_secret_attribute(attribute)
    }

    /// Client text that is not an assertion value (attribute names, rule names).
    fn name(&mut self, text: &str) {
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

    /// An assertion value, escaped (RFC 4515 §3); other characters (UTF-8 too) unchanged.
    fn value(&mut self, value: &str) {
        // Most values are plain ASCII with nothing to escape: copied at once, up to the same
        // place the loop below stops (one byte past the bound), instead of a char at a time.
        let plain =
            |byte: u8| (0x20..0x7f).contains(&byte) && !matches!(byte, b'*' | b'(' | b')' | b'\\');
        if !crate::log_text::contains_byte_where(value.as_bytes(), |byte| !plain(byte)) {
            if !self.full() {
                let room = (self.bytes_max - self.out.len()).saturating_add(1);
                self.out.push_str(&value[..value.len().min(room)]);
            }
            return;
        }
        for character in value.chars() {
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

    fn filter(&mut self, filter: &LdapFilter) {
        if self.full() {
            return;
        }
        match filter {
            LdapFilter::And(children) => self.set('&', children),
            LdapFilter::Or(children) => self.set('|', children),
            LdapFilter::Not(child) => {
                self.out.push_str("(!");
                self.filter(child);
                self.out.push(')');
            }
            LdapFilter::Equality(attribute, value) => self.simple(attribute, "=", value),
            LdapFilter::GreaterOrEqual(attribute, value) => self.simple(attribute, ">=", value),
            LdapFilter::LessOrEqual(attribute, value) => self.simple(attribute, "<=", value),
            LdapFilter::Approx(attribute, value) => self.simple(attribute, "~=", value),
            LdapFilter::Present(attribute) => {
                self.out.push('(');
                self.name(attribute);
                self.out.push_str("=*)");
            }
            LdapFilter::Substring(attribute, substrings) => self.substring(attribute, substrings),
            LdapFilter::Extensible(assertion) => self.extensible(assertion),
        }
    }

    fn substring(&mut self, attribute: &str, substrings: &ldap3_proto::proto::LdapSubstringFilter) {
        self.out.push('(');
        self.name(attribute);
        self.out.push('=');
        if self.secret(attribute) {
            self.out.push_str(REDACTED);
            self.out.push(')');
            return;
        }
        if let Some(initial) = &substrings.initial {
            self.value(initial);
        }
        self.out.push('*');
        for any in &substrings.any {
            if self.full() {
                break;
            }
            self.value(any);
            self.out.push('*');
        }
        if let Some(final_) = &substrings.final_ {
            self.value(final_);
        }
        self.out.push(')');
    }

    fn extensible(&mut self, assertion: &ldap3_proto::proto::LdapMatchingRuleAssertion) {
        self.out.push('(');
        if let Some(attribute) = &assertion.type_ {
            self.name(attribute);
        }
        if assertion.dn_attributes {
            self.out.push_str(":dn");
        }
        if let Some(rule) = &assertion.matching_rule {
            self.out.push(':');
            self.name(rule);
        }
        self.out.push_str(":=");
        // With no attribute named, the rule may apply to userPassword.
        if self.redact && assertion.type_.as_deref().is_none_or(is_secret_attribute) {
            self.out.push_str(REDACTED);
        } else {
            self.value(&assertion.match_value);
        }
        self.out.push(')');
    }

    fn set(&mut self, operator: char, children: &[LdapFilter]) {
        self.out.push('(');
        self.out.push(operator);
        for child in children {
            if self.full() {
                break;
            }
            self.filter(child);
        }
        self.out.push(')');
    }

    fn simple(&mut self, attribute: &str, operator: &str, value: &str) {
        self.out.push('(');
        self.name(attribute);
        self.out.push_str(operator);
        if self.secret(attribute) {
            self.out.push_str(REDACTED);
        } else {
            self.value(value);
        }
        self.out.push(')');
    }
}

/// The RFC 4515 string of `filter`.
pub fn to_string(filter: &LdapFilter) -> String {
    let mut out = String::with_capacity(64);
    write_filter(&mut out, filter);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldap3_proto::parse_ldap_filter_str;

    #[test]
    fn round_trips_through_ldap3_proto_parser() {
        for text in [
            "(objectClass=*)",
            "(&(uid=u1)(|(cn=a*b*c)(!(sn=x))))",
            "(l=Kraków)",
            "(uidNumber>=10)",
            "(uidNumber<=10)",
            "(cn~=smith)",
            "(cn=*mid*)",
            "(cn=start*)",
        ] {
            let parsed = parse_ldap_filter_str(text).expect(text);
            assert_eq!(to_string(&parsed), text);
        }
    }

    #[test]
    fn special_characters_are_escaped() {
        let filter = LdapFilter::Equality("cn".to_string(), "K*()\\\u{0}".to_string());
        assert_eq!(to_string(&filter), "(cn=K\\2a\\28\\29\\5c\\00)");
    }

    /// A plain value is copied whole, and stops where the character loop would: one byte past
    /// the bound, which `to_log_string` then cuts and marks.
    #[test]
    fn plain_and_escaped_values_are_cut_at_the_same_place() {
        let plain = LdapFilter::Equality("cn".to_string(), "abcdefghijklmnop".to_string());
        assert_eq!(to_log_string(&plain, 10), "(cn=abcdef...");
        let escaped = LdapFilter::Equality("cn".to_string(), "abcdefghijklmno(".to_string());
        assert_eq!(to_log_string(&escaped, 10), "(cn=abcdef...");
        let both = LdapFilter::And(vec![plain.clone(), plain]);
        assert_eq!(to_log_string(&both, 20), "(&(cn=abcdefghijklmn...");
        assert_eq!(
            to_log_string(&both, 1000),
            "(&(cn=abcdefghijklmnop)(cn=abcdefghijklmnop))"
        );
    }

    #[test]
    fn depth_counts_nesting() {
        let parsed = parse_ldap_filter_str("(&(a=1)(|(b=2)(!(c=3))))").expect("parse");
        assert_eq!(depth(&parsed), 4);
        assert_eq!(depth(&LdapFilter::Present("a".to_string())), 1);
    }
}
