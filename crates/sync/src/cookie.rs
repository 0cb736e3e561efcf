//! OpenLDAP's sync cookie, `rid=%03d,sid=%03x,csn=<csn>;<csn>...[,delcsn=<csn>]`, and the
//! contextCSN set it carries (at most one CSN per server ID).
//!
//! OpenLDAP writes the fields in that order, omits `sid` when it has no server ID, the CSN list
//! when it has none, and `delcsn` when empty; its CSN list is sorted by server ID. The parser here
//! accepts exactly that shape (each field at most once, in that order) and refuses everything
//! else with the offending field named.

use crate::csn::{Csn, CsnError, SID_MAX};
use std::collections::BTreeMap;
use std::fmt;

/// OpenLDAP's largest replica ID (`rid` is three decimal digits).
pub const RID_MAX: u16 = 999;
/// A cookie's largest size in bytes. A cookie holds one CSN (40 bytes + separator) per server ID
/// that ever wrote; 8 KiB is room for ~195 writing servers, far beyond any real multi-provider
/// deployment, while keeping what a client can make the server parse and keep per search small.
pub const COOKIE_BYTES_MAX: usize = 8192;

/// A set of CSNs, at most one per server ID, kept sorted by server ID: a provider's contextCSN
/// (merging keeps the largest CSN per SID) or the CSN list of a cookie.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextCsns {
    by_sid: BTreeMap<u16, Csn>,
}

impl ContextCsns {
    pub fn new() -> ContextCsns {
        ContextCsns::default()
    }

    /// Takes `csn` into the set if it is newer than the one held for its SID (or the first for
    /// it); returns whether the set changed. This is how contextCSN follows committed writes.
    pub fn merge(&mut self, csn: Csn) -> bool {
        match self.by_sid.get(&csn.sid()) {
            Some(held) if *held >= csn => false,
            _ => {
                self.by_sid.insert(csn.sid(), csn);
                true
            }
        }
    }

    /// Merges every CSN of `other` (the max per SID of both sets).
    pub fn merge_all(&mut self, other: &ContextCsns) -> bool {
        let mut changed = false;
        for csn in other.iter() {
            changed |= self.merge(csn);
        }
        changed
    }

    pub fn get(&self, sid: u16) -> Option<Csn> {
        self.by_sid.get(&sid).copied()
    }

    /// The CSNs in server-ID order (the order OpenLDAP writes them in a cookie).
    pub fn iter(&self) -> impl Iterator<Item = Csn> + '_ {
        self.by_sid.values().copied()
    }

    pub fn len(&self) -> usize {
        self.by_sid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_sid.is_empty()
    }

    /// Compares a consumer's CSNs (from its cookie) against this provider's contextCSN set.
    pub fn status_of(&self, consumer: &ContextCsns) -> CookieStatus {
        let mut status = CookieStatus::default();
        for (sid, provider_csn) in &self.by_sid {
            match consumer.by_sid.get(sid) {
                None => status.behind.push(*sid),
                Some(consumer_csn) if consumer_csn < provider_csn => status.behind.push(*sid),
                Some(consumer_csn) if consumer_csn > provider_csn => status.ahead.push(*sid),
                Some(_) => {}
            }
        }
        status.unknown = consumer
            .by_sid
            .keys()
            .filter(|sid| !self.by_sid.contains_key(sid))
            .copied()
            .collect();
        status
    }
}

/// How a consumer's cookie stands against a provider's contextCSN set (server IDs ascending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CookieStatus {
    /// SIDs for which the provider holds changes the consumer has not seen (its CSN is older
    /// or missing): the provider must send what changed since.
    pub behind: Vec<u16>,
    /// SIDs for which the consumer's CSN is newer than the provider's (it has seen changes from
    /// elsewhere that have not reached this provider yet).
    pub ahead: Vec<u16>,
    /// SIDs in the cookie that the provider has no contextCSN for; OpenLDAP drops them from the
    /// cookie it answers with.
    pub unknown: Vec<u16>,
}

impl CookieStatus {
    /// Nothing to send: no SID on which the consumer is behind.
    pub fn is_up_to_date(&self) -> bool {
        self.behind.is_empty()
    }
}

/// A parsed sync cookie.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cookie {
    rid: Option<u16>,
    sid: Option<u16>,
    csns: ContextCsns,
    delcsn: Option<Csn>,
}

/// Why a cookie was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CookieError {
    #[error("cookie is empty")]
    Empty,
    #[error("cookie is {0} bytes, above the limit of {COOKIE_BYTES_MAX}")]
    TooLong(usize),
    #[error("cookie field {field}: {reason}")]
    Field {
        field: &'static str,
        reason: &'static str,
    },
    #[error("cookie field {field}: {source}")]
    Csn {
        field: &'static str,
        source: CsnError,
    },
    #[error("cookie holds two CSNs for server ID {0:03x}")]
    DuplicateSid(u16),
}

fn field_error(field: &'static str, reason: &'static str) -> CookieError {
    CookieError::Field { field, reason }
}

/// The cookie's fields, in the only order they may appear.
const FIELDS: [&str; 4] = ["rid", "sid", "csn", "delcsn"];

impl Cookie {
    /// A cookie from its parts; `rid` must be ≤ 999 and `sid` ≤ 0xfff.
    pub fn new(
        rid: Option<u16>,
        sid: Option<u16>,
        csns: ContextCsns,
        delcsn: Option<Csn>,
    ) -> Result<Cookie, CookieError> {
        if rid.is_some_and(|rid| rid > RID_MAX) {
            return Err(field_error("rid", "above 999"));
        }
        if sid.is_some_and(|sid| sid > SID_MAX) {
            return Err(field_error("sid", "above 0xfff"));
        }
        Ok(Cookie {
            rid,
            sid,
            csns,
            delcsn,
        })
    }

    pub fn rid(&self) -> Option<u16> {
        self.rid
    }
    pub fn sid(&self) -> Option<u16> {
        self.sid
    }
    pub fn csns(&self) -> &ContextCsns {
        &self.csns
    }
    pub fn delcsn(&self) -> Option<Csn> {
        self.delcsn
    }

    /// Parses a cookie as received in a Sync Request or from a provider.
    pub fn parse(text: &[u8]) -> Result<Cookie, CookieError> {
        if text.is_empty() {
            return Err(CookieError::Empty);
        }
        if text.len() > COOKIE_BYTES_MAX {
            return Err(CookieError::TooLong(text.len()));
        }
        let mut cookie = Cookie::default();
        let mut next_field = 0;
        for part in text.split(|&byte| byte == b',') {
            let (index, value) = split_field(part, next_field)?;
            next_field = index + 1;
            match index {
                0 => cookie.rid = Some(parse_rid(value)?),
                1 => cookie.sid = Some(parse_sid(value)?),
                2 => cookie.csns = parse_csn_list(value)?,
                _ => {
                    cookie.delcsn = Some(Csn::parse(value).map_err(|source| CookieError::Csn {
                        field: "delcsn",
                        source,
                    })?)
                }
            }
        }
        Ok(cookie)
    }

    /// The cookie a provider answers `consumer` with, as slapd builds it: the consumer's rid
    /// echoed, the provider's own sid, and the provider's contextCSN set, so SIDs the provider
    /// does not know are dropped. A sid above 0xfff (config validation never lets one through)
    /// is left out rather than written into a cookie no one could parse.
    pub fn reply_to(consumer: &Cookie, provider_sid: Option<u16>, context: &ContextCsns) -> Cookie {
        Cookie {
            rid: consumer.rid,
            sid: provider_sid.filter(|sid| *sid <= SID_MAX),
            csns: context.clone(),
            delcsn: None,
        }
    }

    /// The cookie's text as bytes, for the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

/// Splits `name=value` and finds `name` among the fields not yet passed.
fn split_field(part: &[u8], next_field: usize) -> Result<(usize, &[u8]), CookieError> {
    let equals = part
        .iter()
        .position(|&byte| byte == b'=')
        .ok_or_else(|| field_error("name", "a field without '='"))?;
    let (name, value) = (&part[..equals], &part[equals + 1..]);
    let index = FIELDS
        .iter()
        .position(|field| field.as_bytes() == name)
        .ok_or_else(|| field_error("name", "not one of rid, sid, csn, delcsn"))?;
    if index < next_field {
        return Err(field_error(
            FIELDS[index],
            "repeated or out of order (rid, sid, csn, delcsn)",
        ));
    }
    Ok((index, value))
}

fn parse_rid(value: &[u8]) -> Result<u16, CookieError> {
    if value.len() != 3 || !value.iter().all(u8::is_ascii_digit) {
        return Err(field_error("rid", "expected three decimal digits"));
    }
    Ok(value
        .iter()
        .fold(0u16, |rid, digit| rid * 10 + u16::from(digit - b'0')))
}

fn parse_sid(value: &[u8]) -> Result<u16, CookieError> {
    let hex_digit = |byte: &u8| byte.is_ascii_digit() || (b'a'..=b'f').contains(byte);
    if value.len() != 3 || !value.iter().all(hex_digit) {
        return Err(field_error("sid", "expected three lowercase hex digits"));
    }
    let text = std::str::from_utf8(value).map_err(|_| field_error("sid", "not ASCII"))?;
    u16::from_str_radix(text, 16).map_err(|_| field_error("sid", "not hex"))
}

/// `csn;csn;...` with at most one CSN per server ID.
fn parse_csn_list(value: &[u8]) -> Result<ContextCsns, CookieError> {
    let mut csns = ContextCsns::new();
    for text in value.split(|&byte| byte == b';') {
        let csn = Csn::parse(text).map_err(|source| CookieError::Csn {
            field: "csn",
            source,
        })?;
        if csns.get(csn.sid()).is_some() {
            return Err(CookieError::DuplicateSid(csn.sid()));
        }
        csns.merge(csn);
    }
    Ok(csns)
}

impl fmt::Display for Cookie {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut separator = "";
        if let Some(rid) = self.rid {
            write!(formatter, "rid={rid:03}")?;
            separator = ",";
        }
        if let Some(sid) = self.sid {
            write!(formatter, "{separator}sid={sid:03x}")?;
            separator = ",";
        }
        if !self.csns.is_empty() {
            write!(formatter, "{separator}csn=")?;
            for (index, csn) in self.csns.iter().enumerate() {
                let list_separator = if index == 0 { "" } else { ";" };
                write!(formatter, "{list_separator}{csn}")?;
            }
            separator = ",";
        }
        if let Some(delcsn) = self.delcsn {
            write!(formatter, "{separator}delcsn={delcsn}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSN_1: &str = "20260101120000.000001Z#000000#001#000000";
    const CSN_2: &str = "20260101120000.000002Z#000000#002#000000";

    fn csn(text: &str) -> Csn {
        text.parse().expect("csn")
    }

    #[test]
    fn openldap_cookie_round_trips() {
        let text = format!("rid=001,sid=00a,csn={CSN_1};{CSN_2},delcsn={CSN_2}");
        let cookie = Cookie::parse(text.as_bytes()).expect("parse");
        assert_eq!(cookie.rid(), Some(1));
        assert_eq!(cookie.sid(), Some(10));
        assert_eq!(cookie.csns().len(), 2);
        assert_eq!(cookie.delcsn(), Some(csn(CSN_2)));
        assert_eq!(cookie.to_string(), text);
        for text in ["rid=123", "rid=000,sid=fff", "sid=001"] {
            assert_eq!(
                Cookie::parse(text.as_bytes()).expect(text).to_string(),
                text
            );
        }
    }

    #[test]
    fn csns_are_written_in_sid_order() {
        let text = format!("rid=001,csn={CSN_2};{CSN_1}");
        let cookie = Cookie::parse(text.as_bytes()).expect("parse");
        assert_eq!(cookie.to_string(), format!("rid=001,csn={CSN_1};{CSN_2}"));
    }

    #[test]
    fn malformed_cookies_name_the_field() {
        let long = "x".repeat(COOKIE_BYTES_MAX + 1);
        let cases = [
            ("", "empty".to_string()),
            (long.as_str(), "above the limit".to_string()),
            ("rid=1", "rid".to_string()),
            ("rid=1000", "rid".to_string()),
            ("rid=001,sid=FFF", "sid".to_string()),
            ("rid=001,sid=1000", "sid".to_string()),
            ("sid=001,rid=001", "rid".to_string()),
            ("rid=001,rid=002", "rid".to_string()),
            ("rid=001,foo=1", "name".to_string()),
            ("rid=001,", "name".to_string()),
            ("rid=001,csn=", "csn".to_string()),
            ("rid=001,csn=x", "csn".to_string()),
            ("rid=001,delcsn=20260101", "delcsn".to_string()),
        ];
        for (text, expected) in cases {
            let error = Cookie::parse(text.as_bytes()).expect_err(text).to_string();
            assert!(error.contains(&expected), "{text}: {error}");
        }
        let duplicate = format!(
            "rid=001,csn={CSN_1};{}",
            CSN_1.replace("000001Z", "000009Z")
        );
        assert_eq!(
            Cookie::parse(duplicate.as_bytes()),
            Err(CookieError::DuplicateSid(1))
        );
    }

    #[test]
    fn a_reply_echoes_rid_puts_own_sid_and_drops_unknown_sids() {
        let consumer_text = format!("rid=042,sid=003,csn={CSN_1};{CSN_2}");
        let consumer = Cookie::parse(consumer_text.as_bytes()).expect("parse");
        let mut context = ContextCsns::new();
        context.merge(csn("20260101120000.000009Z#000000#002#000000"));
        let reply = Cookie::reply_to(&consumer, Some(7), &context);
        assert_eq!(
            reply.to_string(),
            "rid=042,sid=007,csn=20260101120000.000009Z#000000#002#000000"
        );
    }

    #[test]
    fn new_checks_rid_and_sid() {
        assert!(Cookie::new(Some(RID_MAX + 1), None, ContextCsns::new(), None).is_err());
        assert!(Cookie::new(None, Some(SID_MAX + 1), ContextCsns::new(), None).is_err());
        assert!(Cookie::new(Some(RID_MAX), Some(SID_MAX), ContextCsns::new(), None).is_ok());
    }

    #[test]
    fn merge_keeps_the_largest_csn_per_sid() {
        let mut context = ContextCsns::new();
        assert!(context.merge(csn(CSN_2)));
        let older_sid_2 = csn("20250101120000.000000Z#000000#002#000000");
        assert!(!context.merge(older_sid_2));
        assert!(!context.merge(csn(CSN_2)));
        let newer_sid_2 = csn("20270101120000.000000Z#000000#002#000000");
        assert!(context.merge(newer_sid_2));
        assert!(context.merge(csn(CSN_1)));
        assert_eq!(context.get(2), Some(newer_sid_2));
        assert_eq!(
            context.iter().map(|csn| csn.sid()).collect::<Vec<_>>(),
            [1, 2]
        );
        let mut other = ContextCsns::new();
        assert!(!other.merge_all(&ContextCsns::new()));
        assert!(other.merge_all(&context));
        assert_eq!(other, context);
    }

    #[test]
    fn status_says_behind_ahead_and_unknown_per_sid() {
        let mut provider = ContextCsns::new();
        provider.merge(csn("20260101120000.000005Z#000000#001#000000"));
        provider.merge(csn("20260101120000.000005Z#000000#002#000000"));
        provider.merge(csn("20260101120000.000005Z#000000#003#000000"));
        let mut consumer = ContextCsns::new();
        consumer.merge(csn("20260101120000.000004Z#000000#001#000000")); // behind
        consumer.merge(csn("20260101120000.000006Z#000000#002#000000")); // ahead
        consumer.merge(csn("20260101120000.000001Z#000000#009#000000")); // unknown
        let status = provider.status_of(&consumer);
        assert_eq!(status.behind, [1, 3]); // 3: missing from the cookie
        assert_eq!(status.ahead, [2]);
        assert_eq!(status.unknown, [9]);
        assert!(!status.is_up_to_date());
        assert!(provider.status_of(&provider).is_up_to_date());
        assert_eq!(provider.status_of(&provider), CookieStatus::default());
    }
}
