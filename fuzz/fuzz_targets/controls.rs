//! The request controls decoder (`[0] Controls` of an LDAPMessage) on arbitrary bytes, then the
//! per-operation decoding of each control's value with its criticality rule. Nothing may panic;
//! a decoded control list must give the same answer every time it is parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_server::controls::{self, COMPARE_CONTROLS, SEARCH_CONTROLS, UPDATE_CONTROLS};

fuzz_target!(|data: &[u8]| {
    let Ok(decoded) = controls::decode_controls(data) else {
        return;
    };
    for honoured in [SEARCH_CONTROLS, COMPARE_CONTROLS, UPDATE_CONTROLS, &[]] {
        let first = controls::parse(&decoded, honoured).map(|parsed| format!("{parsed:?}"));
        let again = controls::parse(&decoded, honoured).map(|parsed| format!("{parsed:?}"));
        assert_eq!(first, again, "parsing the same controls twice differs");
        if let Ok(parsed) = controls::parse(&decoded, honoured) {
            // A critical control that was not honoured must have been refused.
            for control in decoded.iter().filter(|control| control.critical) {
                assert!(
                    honoured.contains(&control.oid.as_str()),
                    "critical {} accepted where not honoured",
                    control.oid
                );
            }
            if let Some(keys) = &parsed.sort {
                assert!(!keys.is_empty(), "an empty sort key list was accepted");
            }
        }
    }
});
