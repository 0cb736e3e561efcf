//! The request controls decoder (`[0] Controls` of an LDAPMessage) on arbitrary bytes, then the
//! per-operation decoding of each control's value with its criticality rule. Nothing may panic;
//! a decoded control list must give the same answer every time it is parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_server::controls::{self, OperationClass};

fuzz_target!(|data: &[u8]| {
    let Ok(decoded) = controls::decode_controls(data) else {
        return;
    };
    for class in [
        OperationClass::Search,
        OperationClass::Compare,
        OperationClass::Update,
        OperationClass::Bind,
        OperationClass::Connection,
    ] {
        let first = controls::parse(&decoded, class).map(|parsed| format!("{parsed:?}"));
        let again = controls::parse(&decoded, class).map(|parsed| format!("{parsed:?}"));
        assert_eq!(first, again, "parsing the same controls twice differs");
        if let Ok(parsed) = controls::parse(&decoded, class) {
            // A critical control that was not honoured must have been refused.
            for control in decoded.iter().filter(|control| control.critical) {
                let honoured = controls::REGISTRY.iter().any(|registered| {
                    registered.oid == control.oid && registered.operations.contains(&class)
                });
                assert!(
                    honoured,
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
