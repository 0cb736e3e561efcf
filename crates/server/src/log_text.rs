//! Client-supplied text in log lines: bounded and escaped, so a request can neither flood the
//! log nor forge a line (a DN holding a newline and `conn=1 op=2 BIND ...`).

use std::fmt::Write;

/// Longest filter a log line shows, in bytes (before escaping).
pub const LOG_FILTER_BYTES_MAX: usize = 1024;
/// Longest DN (or other single name) a log line shows, in bytes (before escaping).
pub const LOG_DN_BYTES_MAX: usize = 512;
/// Longest attribute list a log line shows, in bytes (before escaping).
pub const LOG_ATTRIBUTES_BYTES_MAX: usize = 256;

/// `text` cut to at most `bytes_max` bytes (on a character boundary, with the full length
/// noted), `"` `\` and control characters written as `\xx`, for use inside `"..."`.
pub fn bounded(text: &str, bytes_max: usize) -> String {
    let mut cut = text.len().min(bytes_max);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = String::with_capacity(cut + 16);
    for character in text[..cut].chars() {
        if character == '"' || character == '\\' || character.is_control() {
            for byte in character.to_string().bytes() {
                let _ = write!(out, "\\{byte:02x}");
            }
        } else {
            out.push(character);
        }
    }
    if cut < text.len() {
        let _ = write!(out, "...({} bytes)", text.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_line_breaks_quotes_and_backslashes() {
        let forged = "uid=x\n2026 INFO conn=1 op=2 BIND dn=\"cn=admin\"\\";
        let logged = bounded(forged, LOG_DN_BYTES_MAX);
        assert!(!logged.contains('\n'));
        assert!(!logged.contains('"'));
        assert_eq!(
            logged,
            "uid=x\\0a2026 INFO conn=1 op=2 BIND dn=\\22cn=admin\\22\\5c"
        );
        assert_eq!(bounded("caf\u{e9}\r", 64), "caf\u{e9}\\0d");
    }

    #[test]
    fn truncates_on_a_character_boundary_and_says_how_long() {
        let long = "\u{e9}".repeat(1000); // 2 bytes each
        let logged = bounded(&long, 101);
        assert_eq!(logged, format!("{}...(2000 bytes)", "\u{e9}".repeat(50)));
        assert_eq!(bounded("short", 10), "short");
    }
}
