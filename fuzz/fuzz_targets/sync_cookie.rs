//! OpenLDAP's sync cookie and CSN text: a cookie or CSN that parses prints back to text that
//! parses to the same value, and printing it again is stable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_sync::{Cookie, Csn};

fuzz_target!(|data: &[u8]| {
    if let Ok(cookie) = Cookie::parse(data) {
        let printed = cookie.to_bytes();
        let reparsed = Cookie::parse(&printed).unwrap_or_else(|error| {
            panic!("{data:?} printed as {printed:?} does not parse: {error}")
        });
        assert_eq!(reparsed, cookie);
        assert_eq!(reparsed.to_bytes(), printed);
    }
    if let Ok(csn) = Csn::parse(data) {
        // CSN text has one spelling: what parses prints back byte for byte.
        assert_eq!(csn.to_string().as_bytes(), data);
    }
});
