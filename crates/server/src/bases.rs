//! Search bases normalized recently on this thread, reused while the schema is the same; a
//! bind's DN takes its parent from the same cache.
//!
//! Clients search under the same few bases (`ou=People,...`) again and again, and normalizing
//! one costs a schema lookup and a matching rule per RDN: ~3,100 instructions of a uid search
//! of ~64,000. The cache key holds the schema weakly: a `Weak` keeps its allocation, so a new
//! schema can never take the old one's address and match by mistake.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use lmdir_schema::{LdapError, Schema};

/// Slots per thread (direct-mapped by the base's hash).
const SLOTS: usize = 16;
/// Longest base text kept.
const BASE_BYTES_MAX: usize = 512;

struct Normalized {
    schema: Weak<Schema>,
    base: String,
    normalized: String,
}

thread_local! {
    static BASES: RefCell<Vec<Option<Normalized>>> = RefCell::new((0..SLOTS).map(|_| None).collect());
}

fn slot(base: &str) -> usize {
    u64::from_be_bytes(lmdir_store::layout::hash_bytes(base.as_bytes())) as usize % SLOTS
}

/// `base` normalized by `schema` (`Schema::normalize_dn_str`), from this thread's cache when
/// it normalized the same text under the same schema before. Errors are not kept.
pub(crate) fn normalized_base(schema: &Arc<Schema>, base: &str) -> Result<String, LdapError> {
    let slot = slot(base);
    let cached = BASES.with_borrow(|bases| match &bases[slot] {
        Some(kept) if kept.base == base && Weak::as_ptr(&kept.schema) == Arc::as_ptr(schema) => {
            Some(kept.normalized.clone())
        }
        _ => None,
    });
    if let Some(normalized) = cached {
        return Ok(normalized);
    }
    let normalized = schema.normalize_dn_str(base)?;
    if base.len() <= BASE_BYTES_MAX {
        BASES.with_borrow_mut(|bases| {
            bases[slot] = Some(Normalized {
                schema: Arc::downgrade(schema),
                base: base.to_string(),
                normalized: normalized.clone(),
            });
        });
    }
    Ok(normalized)
}

/// An entry's `dn` normalized by `schema`: its first RDN here, its parent through this thread's
/// base cache. A bind names a different entry each time, under the same few parents (`uid=…,
/// ou=People,…`): the parent's RDNs cost a schema lookup and a matching rule each. The answer
/// (and every error) is `Schema::normalize_dn_str`'s: only the simple shape is split (ASCII, no
/// escapes, quotes or multi-valued RDNs, within the size and RDN bounds, so its first comma
/// ends its first RDN); any other DN, or any part that does not normalize, takes the whole path.
pub(crate) fn normalized_entry_dn(schema: &Arc<Schema>, dn: &str) -> Result<String, LdapError> {
    match split_normalized(schema, dn) {
        Some(normalized) => Ok(normalized),
        None => schema.normalize_dn_str(dn),
    }
}

fn split_normalized(schema: &Arc<Schema>, dn: &str) -> Option<String> {
    if !lmdir_schema::dn_has_simple_shape(dn) {
        return None;
    }
    // Each side alone is within the RDN bound even when the whole is not.
    let rdn_count = dn.bytes().filter(|byte| *byte == b',').count() + 1;
    if rdn_count > lmdir_schema::DN_RDN_COUNT_MAX {
        return None;
    }
    let (first, parent) = dn.split_once(',')?;
    let first = schema.normalize_dn_str(first).ok()?;
    let parent = normalized_base(schema, parent).ok()?;
    // An empty side ("uid=a, " or ",dc=com") is no RDN: the whole path refuses it.
    if first.is_empty() || parent.is_empty() {
        return None;
    }
    let mut normalized = String::with_capacity(first.len() + 1 + parent.len());
    normalized.push_str(&first);
    normalized.push(',');
    normalized.push_str(&parent);
    Some(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_dn_normalizes_as_the_whole_path_does() {
        let schema = Arc::new(Schema::builtin());
        let dns = [
            "uid=U0012345,ou=People,dc=example,dc=com",
            "UID=u1 , OU=People , DC=Example,dc=COM",
            "cn=Some  Body,ou=People,dc=example,dc=com",
            "cn=a,,dc=com",
            "uid=a, ",
            ",dc=com",
            "uid=a,",
            "uid=a",
            "",
            "uid=a,ou=People,dc=example,dc=com,",
            "uid=a\\,b,ou=People,dc=example,dc=com",
            "cn=\"a,b\",dc=com",
            "cn=a+sn=b,dc=com",
            "uid=a;dc=com",
            "cn=#04024869,dc=com",
            "cn=Łukasz,dc=com",
            "nosuchattribute=a,dc=com",
            "uid=a,nosuchattribute=b,dc=com",
            "2.5.4.3=a,dc=com",
            "oid.2.5.4.3=a,dc=com",
            "uid=a,=b",
            "uid=a,dc",
        ];
        for dn in dns {
            let whole = schema.normalize_dn_str(dn);
            let split = normalized_entry_dn(&schema, dn);
            match (&whole, &split) {
                (Ok(whole), Ok(split)) => assert_eq!(whole, split, "{dn:?}"),
                (Err(whole), Err(split)) => {
                    assert_eq!(whole.to_string(), split.to_string(), "{dn:?}")
                }
                _ => panic!("{dn:?}: whole {whole:?}, split {split:?}"),
            }
        }
        // Past the RDN bound the whole path decides, however short each side is.
        let many = format!("uid=a{}", ",dc=x".repeat(lmdir_schema::DN_RDN_COUNT_MAX));
        assert_eq!(
            normalized_entry_dn(&schema, &many).map_err(|error| error.to_string()),
            schema
                .normalize_dn_str(&many)
                .map_err(|error| error.to_string())
        );
    }

    #[test]
    fn a_base_is_normalized_once_per_schema() {
        let schema = Arc::new(Schema::builtin());
        let base = "OU=People , DC=Example,dc=COM";
        let first = normalized_base(&schema, base).unwrap();
        assert_eq!(first, schema.normalize_dn_str(base).unwrap());
        assert_eq!(normalized_base(&schema, base).unwrap(), first);
        assert!(normalized_base(&schema, "not a dn").is_err());
        assert!(
            normalized_base(&schema, "not a dn").is_err(),
            "errors are not kept"
        );
        // Another schema (even with the same definitions) normalizes again: what it would
        // answer is its own business.
        let other = Arc::new(Schema::builtin());
        assert_eq!(normalized_base(&other, base).unwrap(), first);
        BASES.with_borrow(|bases| {
            let kept = bases[slot(base)].as_ref().unwrap();
            assert!(Weak::ptr_eq(&kept.schema, &Arc::downgrade(&other)));
        });
    }
}
