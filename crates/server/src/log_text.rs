//! Client-supplied text in log lines. A DN, an OID, a filter or an error text quoting one comes
//! from the client; written raw, a newline in it would forge a whole log line, a quote would end
//! the field early, and a 16 MiB filter would flood the log. `escaped` writes every such
//! character as `\xx` (hex, as in LDAP string escapes), so one request is always one line and
//! every field ends where the log says; `bounded` also cuts the text to a length first.

use std::fmt;

/// Longest filter a log line shows, in bytes (before escaping).
pub const LOG_FILTER_BYTES_MAX: usize = 1024;
/// Longest DN (or other single name) a log line shows, in bytes (before escaping).
pub const LOG_DN_BYTES_MAX: usize = 512;
/// Longest attribute list a log line shows, in bytes (before escaping).
pub const LOG_ATTRIBUTES_BYTES_MAX: usize = 256;

/// `conn=N op=M`, the start of every operation's log line, displayed without an allocation.
#[derive(Debug, Clone, Copy)]
pub struct OperationPrefix {
    pub connection_id: u64,
    pub operation_id: u64,
}

impl fmt::Display for OperationPrefix {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "conn={} op={}",
            Integer(self.connection_id),
            Integer(self.operation_id)
        )
    }
}

/// An integer in a log line, written by `itoa`: `{}` of an integer goes through core::fmt's
/// padding machinery, about twice the instructions, on every line (issue 13).
#[derive(Debug, Clone, Copy)]
pub struct Integer<T>(pub T);

impl<T: itoa::Integer + Copy> fmt::Display for Integer<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(itoa::Buffer::new().format(self.0))
    }
}

/// Displays `text` with `"`, `\` and every control or line-breaking character written as `\xx`
/// (UTF-8 bytes in hex); all else as is.
pub fn escaped(text: &str) -> Escaped<'_> {
    Escaped(text)
}

pub struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(position) = next_escape(rest) {
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

/// Where the first character of `text` that `needs_escape` starts. Every such character starts
/// with a byte below 0x20, DEL, `"`, `\\`, 0xc2 (C1 controls, U+0080..U+009F) or 0xe2 (U+2028,
/// U+2029): a whole-text scan for those bytes, which the compiler vectorizes, clears the usual
/// text (a DN, a filter) at once; only a candidate byte is looked at as a character.
fn next_escape(text: &str) -> Option<usize> {
    let candidate = |byte: u8| byte < 0x20 || matches!(byte, 0x7f | b'"' | b'\\' | 0xc2 | 0xe2);
    let mut start = 0;
    while contains_byte_where(&text.as_bytes()[start..], candidate) {
        let offset = text.as_bytes()[start..]
            .iter()
            .position(|&byte| candidate(byte))?;
        let position = start + offset;
        let character = text[position..].chars().next()?;
        if needs_escape(character) {
            return Some(position);
        }
        start = position + character.len_utf8();
    }
    None
}

/// Whether any byte of `bytes` meets `predicate`, tested 32 bytes at a time without an early
/// exit inside a block, so the compiler can compare a whole block in a few vector instructions
/// (a log line is checked per byte: issue 13, logging stays cheap).
pub fn contains_byte_where(bytes: &[u8], predicate: impl Fn(u8) -> bool) -> bool {
    bytes.chunks(32).any(|block| {
        block
            .iter()
            .fold(false, |found, &byte| found | predicate(byte))
    })
}

/// `text` cut to at most `bytes_max` bytes (on a character boundary, with the full length
/// noted), then `escaped`, for use inside `"..."`. Borrowed and displayed in place: an
/// operation's log line allocates nothing for its fields (issue 13, logging stays cheap).
pub fn bounded(text: &str, bytes_max: usize) -> Bounded<'_> {
    let mut cut = text.len().min(bytes_max);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Bounded { text, cut }
}

pub struct Bounded<'a> {
    text: &'a str,
    cut: usize,
}

impl fmt::Display for Bounded<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        escaped(&self.text[..self.cut]).fmt(formatter)?;
        if self.cut < self.text.len() {
            write!(formatter, "...({} bytes)", self.text.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            OperationPrefix {
                connection_id: 0,
                operation_id: u64::MAX
            }
            .to_string(),
            "conn=0 op=18446744073709551615"
        );
        assert_eq!(Integer(-42_i64).to_string(), "-42");
        // Bytes that may start an escape but do not: Latin-1 symbols (c2 a9), other e2 signs.
        assert_eq!(
            escaped("\u{a9} \u{2026} \u{85}").to_string(),
            "\u{a9} \u{2026} \\c2\\85"
        );
        // Past the first block of 32 bytes, and at the very end.
        let long = format!("{}\"", "x".repeat(70));
        assert_eq!(
            escaped(&long).to_string(),
            format!("{}\\22", "x".repeat(70))
        );
    }

    #[test]
    fn escapes_line_breaks_quotes_and_backslashes() {
        let forged = "uid=x\n2026 INFO conn=1 op=2 BIND dn=\"cn=admin\"\\";
        let logged = bounded(forged, LOG_DN_BYTES_MAX).to_string();
        assert!(!logged.contains('\n'));
        assert!(!logged.contains('"'));
        assert_eq!(
            logged,
            "uid=x\\0a2026 INFO conn=1 op=2 BIND dn=\\22cn=admin\\22\\5c"
        );
        assert_eq!(bounded("caf\u{e9}\r", 64).to_string(), "caf\u{e9}\\0d");
    }

    #[test]
    fn truncates_on_a_character_boundary_and_says_how_long() {
        let long = "\u{e9}".repeat(1000); // 2 bytes each
        let logged = bounded(&long, 101).to_string();
        assert_eq!(logged, format!("{}...(2000 bytes)", "\u{e9}".repeat(50)));
        assert_eq!(bounded("short", 10).to_string(), "short");
    }
}
