//! The RFC 4514 DN parser and the schema's DN normalization; normalizing is idempotent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_schema::{Dn, Schema};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(dn) = Dn::parse(text) else {
        return;
    };
    let schema = Schema::builtin_shared();
    if let Ok(normalized) = schema.normalize_dn(&dn) {
        let again = schema
            .normalize_dn_str(&normalized)
            .unwrap_or_else(|error| {
                panic!("{text:?} normalized to {normalized:?}, which fails: {error}")
            });
        assert_eq!(again, normalized, "normalizing {text:?} is not idempotent");
    }
});
