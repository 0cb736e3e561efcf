//! RFC 3986 percent-decoding, as LDAP URLs use it (RFC 4516): listen URLs, proxy
//! authorization rules, dynamic group and integrity URLs all read escapes through it.

/// `%2C` → `,`; None for a bad escape (not two hex digits) or bytes that are not UTF-8.
pub fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            if !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode_and_bad_ones_are_refused() {
        assert_eq!(percent_decoded("a%2Cb%20c").as_deref(), Some("a,b c"));
        assert_eq!(
            percent_decoded("%2Frun%2flmdir.sock").as_deref(),
            Some("/run/lmdir.sock")
        );
        for bad in ["%", "%2", "%zz", "%+1", "%ff"] {
            assert_eq!(percent_decoded(bad), None, "{bad}");
        }
    }
}
