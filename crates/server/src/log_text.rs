//! Client-supplied text in log lines. A DN, an OID or an error text quoting either comes from
//! the client; written raw, a newline in it would forge a whole log line and a quote would end
//! the field early. `escaped` writes every such character as `\xx` (hex, as in LDAP string
//! escapes), so one request is always one line and every field ends where the log says.

use std::fmt;

/// Displays `text` with `"`, `\` and every control or line-breaking character written as `\xx`
/// (UTF-8 bytes in hex); all else as is.
pub fn escaped(text: &str) -> Escaped<'_> {
    Escaped(text)
}

pub struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(position) = rest.find(needs_escape) {
            formatter.write_str(&rest[..position])?;
            let character = rest[position..].chars().next().unwrap_or_default();
            let mut bytes = [0u8; 4];
            for byte in character.encode_utf8(&mut bytes).as_bytes() {
                write!(formatter, "\\{byte:02x}")?;
            }
            rest = &rest[position + character.len_utf8()..];
        }
        formatter.write_str(rest)
    }
}

/// Control characters (C0, DEL, C1), the Unicode line and paragraph separators, the quote that
/// delimits fields, and the escape character itself.
fn needs_escape(character: char) -> bool {
    character.is_control() || matches!(character, '"' | '\\' | '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn line_breaks_quotes_and_controls_are_escaped_and_the_rest_kept() {
        assert_eq!(
            escaped("cn=x\nconn=1 op=1 RESULT err=0\"\\\u{7f}").to_string(),
            "cn=x\\0aconn=1 op=1 RESULT err=0\\22\\5c\\7f"
        );
        assert_eq!(
            escaped("cn=Åsa,dc=example").to_string(),
            "cn=Åsa,dc=example"
        );
        assert_eq!(
            escaped("a\u{2028}b\u{85}").to_string(),
            "a\\e2\\80\\a8b\\c2\\85"
        );
        assert_eq!(escaped("").to_string(), "");
    }
}
