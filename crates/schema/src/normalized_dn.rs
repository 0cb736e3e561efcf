//! A DN together with its normalized form, made only by the schema (`Schema::normalized_dn`),
//! so code that receives one knows the DN was normalized exactly once and need not parse or
//! normalize it again (issue 21). Also the per-thread normalization counters that let tests
//! assert it.

use std::cell::Cell;

use crate::dn::{Dn, Rdn};
use crate::error::LdapError;
use crate::schema::{AttrId, Schema};

/// A DN as written (for storage and messages) and its normalized RDNs, leaf first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedDn {
    dn: Dn,
    /// The normalized RDNs joined by `,` (the root is empty).
    text: String,
    /// Normalized RDNs, leaf first (the pieces of `text`).
    rdns: Vec<String>,
}

impl NormalizedDn {
    /// The DN as written.
    pub fn dn(&self) -> &Dn {
        &self.dn
    }

    /// The normalized DN (`Schema::normalize_dn`'s text).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The normalized RDNs, leaf first.
    pub fn rdns(&self) -> &[String] {
        &self.rdns
    }

    pub fn is_root(&self) -> bool {
        self.rdns.is_empty()
    }

    /// The parent (written and normalized, without normalizing again); None for the root.
    pub fn parent(&self) -> Option<NormalizedDn> {
        let dn = self.dn.parent()?;
        let rdns = self.rdns[1..].to_vec();
        let text = self.text.get(self.rdns[0].len() + 1..).unwrap_or("");
        Some(NormalizedDn {
            dn,
            text: text.to_string(),
            rdns,
        })
    }

    /// The DN as written, taken out.
    pub fn into_dn(self) -> Dn {
        self.dn
    }
}

impl std::fmt::Display for NormalizedDn {
    /// The DN as written (messages name what the client sent).
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.dn.fmt(formatter)
    }
}

impl Schema {
    /// Normalizes `dn` once into a [`NormalizedDn`] (RDN by RDN, as `normalize_dn`).
    pub fn normalized_dn(&self, dn: Dn) -> Result<NormalizedDn, LdapError> {
        count_dn_normalization();
        let mut rdns = Vec::with_capacity(dn.rdns.len());
        for rdn in &dn.rdns {
            let mut normalized = String::new();
            self.write_normalized_rdn(rdn, &mut normalized)?;
            rdns.push(normalized);
        }
        Ok(NormalizedDn {
            text: rdns.join(","),
            rdns,
            dn,
        })
    }

    /// `parent` with `rdn` added on the left: only the new RDN is normalized.
    pub fn normalized_child(
        &self,
        parent: &NormalizedDn,
        rdn: &Rdn,
    ) -> Result<NormalizedDn, LdapError> {
        count_dn_normalization();
        let mut leaf = String::new();
        self.write_normalized_rdn(rdn, &mut leaf)?;
        let mut text = leaf.clone();
        if !parent.text.is_empty() {
            text.push(',');
            text.push_str(&parent.text);
        }
        let mut rdns = Vec::with_capacity(parent.rdns.len() + 1);
        rdns.push(leaf);
        rdns.extend(parent.rdns.iter().cloned());
        Ok(NormalizedDn {
            dn: parent.dn.child(rdn.clone()),
            text,
            rdns,
        })
    }

    /// Parses a DN as a request names it (RFC 2253 leniency, as `normalize_dn_str`) and
    /// normalizes it once.
    pub fn parse_normalized_dn(&self, text: &str) -> Result<NormalizedDn, LdapError> {
        self.normalized_dn(Dn::parse(text)?)
    }

    /// The leaf RDN's (attribute, normalized value) pairs, read back from its normalized
    /// text (no value is normalized again). Empty for the root.
    pub fn leaf_values(&self, dn: &NormalizedDn) -> Vec<(AttrId, Vec<u8>)> {
        match dn.rdns.first() {
            Some(leaf) => self.rdn_values(leaf),
            None => Vec::new(),
        }
    }

    /// The (attribute, normalized value) pairs of a normalized RDN's text; of its first RDN
    /// when it holds more (a store keeps a top-level entry's whole normalized DN as its RDN).
    pub fn rdn_values(&self, rdn_normalized: &str) -> Vec<(AttrId, Vec<u8>)> {
        let leaf = split_unescaped(rdn_normalized, b',')[0];
        split_unescaped(leaf, b'+')
            .into_iter()
            .filter_map(|ava| {
                let (name, value) = ava.split_once('=')?;
                Some((self.attribute(name)?, unescape(value)))
            })
            .collect()
    }
}

/// `text` cut at each `separator` byte that is not escaped by a backslash.
fn split_unescaped(text: &str, separator: u8) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut parts = Vec::new();
    let (mut start, mut index) = (0, 0);
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            byte if byte == separator => {
                parts.push(&text[start..index]);
                start = index + 1;
                index += 1;
            }
            _ => index += 1,
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The bytes `escape_value` escaped: `\XX` is a byte, `\c` the character `c` (no character
/// `escape_value` escapes that way is a hex digit).
fn unescape(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut value = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'\\' || index + 1 == bytes.len() {
            value.push(bytes[index]);
            index += 1;
            continue;
        }
        let hex = bytes
            .get(index + 1..index + 3)
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .filter(|pair| pair.bytes().all(|byte| byte.is_ascii_hexdigit()))
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match hex {
            Some(byte) => {
                value.push(byte);
                index += 3;
            }
            None => {
                value.push(bytes[index + 1]);
                index += 2;
            }
        }
    }
    value
}

/// How often this thread normalized a DN (or RDN) and an attribute value through the
/// schema's public normalization methods (a value inside a DN is part of that DN's count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NormalizationCounts {
    pub dns: u64,
    pub values: u64,
}

thread_local! {
    static COUNTS: Cell<NormalizationCounts> = const {
        Cell::new(NormalizationCounts { dns: 0, values: 0 })
    };
}

/// This thread's normalization counts so far (tests subtract two readings).
pub fn normalization_counts() -> NormalizationCounts {
    COUNTS.with(Cell::get)
}

/// What `work` returns and the normalizations it did on this thread (a test's measure of
/// "normalized once").
pub fn normalizations_during<T>(work: impl FnOnce() -> T) -> (T, NormalizationCounts) {
    let before = normalization_counts();
    let result = work();
    let after = normalization_counts();
    let counts = NormalizationCounts {
        dns: after.dns - before.dns,
        values: after.values - before.values,
    };
    (result, counts)
}

pub(crate) fn count_dn_normalization() {
    COUNTS.with(|counts| {
        let mut now = counts.get();
        now.dns += 1;
        counts.set(now);
    });
}

pub(crate) fn count_value_normalization() {
    COUNTS.with(|counts| {
        let mut now = counts.get();
        now.values += 1;
        counts.set(now);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::builtin()
    }

    #[test]
    fn normalized_dn_matches_normalize_dn_and_splits_leaf_first() {
        let schema = schema();
        let dn = Dn::parse("CN=A\\,B+uid=X,OU=People,dc=Example,dc=COM").unwrap();
        let normalized = schema.normalized_dn(dn.clone()).unwrap();
        assert_eq!(normalized.as_str(), schema.normalize_dn(&dn).unwrap());
        assert_eq!(normalized.rdns().len(), 4);
        assert_eq!(normalized.rdns()[1], "ou=people");
        assert_eq!(normalized.dn(), &dn);
        let parent = normalized.parent().unwrap();
        assert_eq!(parent.as_str(), "ou=people,dc=example,dc=com");
        assert_eq!(parent.rdns(), &normalized.rdns()[1..]);
        assert_eq!(parent.dn(), &dn.parent().unwrap());
        let child = schema
            .normalized_child(&parent, &Rdn::parse("UID=Z").unwrap())
            .unwrap();
        assert_eq!(child.as_str(), "uid=z,ou=people,dc=example,dc=com");
        assert_eq!(child.rdns()[1..], parent.rdns()[..]);
        assert_eq!(child.dn().to_string(), "UID=Z,OU=People,dc=Example,dc=COM");
        let top = schema.parse_normalized_dn("dc=com").unwrap();
        assert_eq!(top.parent().unwrap().as_str(), "");
        assert!(top.parent().unwrap().is_root());
    }

    #[test]
    fn leaf_values_are_the_normalized_values_of_the_leaf_rdn() {
        let schema = schema();
        let dn = schema
            .parse_normalized_dn("cn=A\\,B  c+uid=X\\+y,dc=example")
            .unwrap();
        let cn = schema.attribute("cn").unwrap();
        let uid = schema.attribute("uid").unwrap();
        let mut expected = vec![
            (cn, schema.normalize_value(cn, b"A,B  c").unwrap()),
            (uid, schema.normalize_value(uid, b"X+y").unwrap()),
        ];
        let mut found = schema.leaf_values(&dn);
        expected.sort();
        found.sort();
        assert_eq!(found, expected);
        let hash = schema
            .parse_normalized_dn("cn=\\#a\\=b,dc=example")
            .unwrap();
        assert_eq!(
            schema.leaf_values(&hash),
            vec![(cn, schema.normalize_value(cn, b"#a=b").unwrap())]
        );
        assert_eq!(unescape("a\\00b\\\\41\\"), b"a\0b\\41\\");
    }

    #[test]
    fn counters_count_this_thread_only() {
        let schema = schema();
        let before = normalization_counts();
        schema.parse_normalized_dn("cn=a,dc=example").unwrap();
        schema.normalize_dn_str("cn=b,dc=example").unwrap();
        let cn = schema.attribute("cn").unwrap();
        schema.normalize_value(cn, b"Value").unwrap();
        let other = std::thread::spawn(move || {
            schema.normalize_value(cn, b"x").unwrap();
            normalization_counts()
        })
        .join()
        .unwrap();
        let after = normalization_counts();
        assert_eq!(after.dns - before.dns, 2);
        assert_eq!(after.values - before.values, 1);
        assert_eq!(other.values, 1);
    }
}
