//! Search bases normalized recently on this thread, reused while the schema is the same.
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

#[cfg(test)]
mod tests {
    use super::*;

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
