//! RFC 4515 string form of a decoded filter (for the stats log and for lmdir-schema's parser) and
//! the nesting-depth limit.

use ldap3_proto::proto::LdapFilter;
use std::fmt::Write;

/// Nesting depth: a leaf is 1, `(&(a=b))` is 2.
pub fn depth(filter: &LdapFilter) -> usize {
    match filter {
        LdapFilter::And(children) | LdapFilter::Or(children) => {
            1 + children.iter().map(depth).max().unwrap_or(0)
        }
        LdapFilter::Not(child) => 1 + depth(child),
        _ => 1,
    }
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

/// Whether an attribute description names a password: its assertion values never reach a log.
fn is_secret_attribute(description: &str) -> bool {
    let base = description.split(';').next().unwrap_or(description);
    base.eq_ignore_ascii_case("userPassword") || base == "2.5.4.35"
}

/// The filter for the stats log: RFC 4515 form with the values asserted on userPassword (and
/// of extensible matches naming no attribute, which may test it) replaced by `<redacted>`.
pub fn to_log_string(filter: &LdapFilter) -> String {
    let mut out = String::with_capacity(64);
    write_filter_redacting(&mut out, filter, true);
    out
}

/// Writes `filter` in RFC 4515 form.
pub fn write_filter(out: &mut String, filter: &LdapFilter) {
    write_filter_redacting(out, filter, false);
}

fn write_filter_redacting(out: &mut String, filter: &LdapFilter, redact: bool) {
    let secret = |attribute: &str| redact && is_secret_attribute(attribute);
    match filter {
        LdapFilter::And(children) => write_set(out, '&', children, redact),
        LdapFilter::Or(children) => write_set(out, '|', children, redact),
        LdapFilter::Not(child) => {
            out.push_str("(!");
            write_filter_redacting(out, child, redact);
            out.push(')');
        }
        LdapFilter::Equality(attribute, value) => {
            write_simple(out, attribute, "=", value, secret(attribute))
        }
        LdapFilter::GreaterOrEqual(attribute, value) => {
            write_simple(out, attribute, ">=", value, secret(attribute))
        }
        LdapFilter::LessOrEqual(attribute, value) => {
            write_simple(out, attribute, "<=", value, secret(attribute))
        }
        LdapFilter::Approx(attribute, value) => {
            write_simple(out, attribute, "~=", value, secret(attribute))
        }
        LdapFilter::Present(attribute) => {
            let _ = write!(out, "({attribute}=*)");
        }
        LdapFilter::Substring(attribute, substrings) => {
            let _ = write!(out, "({attribute}=");
            if secret(attribute) {
                out.push_str(REDACTED);
                out.push(')');
                return;
            }
            if let Some(initial) = &substrings.initial {
                push_escaped(out, initial);
            }
            out.push('*');
            for any in &substrings.any {
                push_escaped(out, any);
                out.push('*');
            }
            if let Some(final_) = &substrings.final_ {
                push_escaped(out, final_);
            }
            out.push(')');
        }
        LdapFilter::Extensible(assertion) => {
            out.push('(');
            if let Some(attribute) = &assertion.type_ {
                out.push_str(attribute);
            }
            if assertion.dn_attributes {
                out.push_str(":dn");
            }
            if let Some(rule) = &assertion.matching_rule {
                out.push(':');
                out.push_str(rule);
            }
            out.push_str(":=");
            if assertion.type_.as_deref().is_none_or(secret) && redact {
                out.push_str(REDACTED);
            } else {
                push_escaped(out, &assertion.match_value);
            }
            out.push(')');
        }
    }
}

fn write_set(out: &mut String, operator: char, children: &[LdapFilter], redact: bool) {
    out.push('(');
    out.push(operator);
    for child in children {
        write_filter_redacting(out, child, redact);
    }
    out.push(')');
}

/// What the log shows instead of a password assertion value.
const REDACTED: &str = "<redacted>";

fn write_simple(out: &mut String, attribute: &str, operator: &str, value: &str, redact: bool) {
    out.push('(');
    out.push_str(attribute);
    out.push_str(operator);
    if redact {
        out.push_str(REDACTED);
    } else {
        push_escaped(out, value);
    }
    out.push(')');
}

/// Escapes special characters; other characters (including non-ASCII UTF-8) pass unchanged.
fn push_escaped(out: &mut String, value: &str) {
    for character in value.chars() {
        match character {
            '*' | '(' | ')' | '\\' | '\0' => {
                let _ = write!(out, "\\{:02x}", character as u32);
            }
            _ if (character as u32) < 0x20 || character == '\u{7f}' => {
                let _ = write!(out, "\\{:02x}", character as u32);
            }
            _ => out.push(character),
        }
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

    #[test]
    fn depth_counts_nesting() {
        let parsed = parse_ldap_filter_str("(&(a=1)(|(b=2)(!(c=3))))").expect("parse");
        assert_eq!(depth(&parsed), 4);
        assert_eq!(depth(&LdapFilter::Present("a".to_string())), 1);
    }
}
