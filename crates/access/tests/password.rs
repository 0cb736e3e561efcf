//! Password scheme tests. The fixed vectors are real outputs of OpenLDAP 2.5 `slappasswd`
//! (with the pw-sha2, pw-pbkdf2 and argon2 modules), glibc crypt(3) via Python, and the
//! reference `argon2` CLI, all for the password "secret".

use lmdir_access::password::{
    hash, is_hashed, scheme_of, verify, verify_checked, verify_memory_bytes, PasswordError, Scheme,
};

const SLAPPASSWD_VECTORS: &[&str] = &[
    "{SSHA}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40",
    "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=",
    "{SMD5}TFJE05CiK+saieDSA90hxb6PCmA=",
    "{MD5}Xr4ilOzQ4PCOq3aQ0qbuaQ==",
    "{SSHA256}oG7qQIEdDC78EPDzcNX6IzU1e5kw5IojLFCpIZjRCVNlw6HSz8l5yw==",
    "{SSHA384}YkcqAYMWOx5J7zhM2x/vQivnFXQiiFZ8iJEG6vNgYdjxYpmycsg2gyWmR1Gw5zSqJdCE8vFtdNY=",
    "{SSHA512}lWxF/GfUuCQEIuI2m7UJ2ZzHRqJ3N7tt7cE3/kuWlAYPVHBC0XXs3uTEd94B1V86csut+G/mgRytk1wQK0ll2DehEx9xR7L4",
    "{SHA256}K7gNU3sdo+OL0wNhqoVWhr3g6s1xYv72ol/pe/Unols=",
    "{SHA384}WKd1ukESvjAFrkQHznV9iP2nHUBJe7gCbsrFTU4//HIyzo3jq1rLMK45dg/ufFPt",
    "{SHA512}vSsar3708Jvp9Szi2NWZZ02Bqp1qRCFpbcTZPdBhnWgs5WtNZKnvCXdhztmeD2cmW192CF5bDufKRpayrW/isg==",
    "{PBKDF2-SHA256}10000$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
    "{PBKDF2-SHA512}10000$VJDYXTlW9CPBuseUP/DWeA$tVaWZal3B.JqDys8Med3uMsapr1Cr99I/cvpV2SOd38uMUPMgWJiqoUzAQmBTQMTT9sQQjE2aojdU8j4LYielQ",
    "{PBKDF2-SHA1}10000$9O.ISd2GUo0WkeQoDOR8HA$AsV.t3zvSIDTcouO/IC6LospTRw",
    "{PBKDF2}10000$hVIaSdYtZ3Y9.TjyLpiMfw$BzAyuCr7drUTyq5EOptiPCfKhWU",
    "{ARGON2}$argon2i$v=19$m=4096,t=3,p=1$B6R1FXAEZ2bcVcuPXi3TRw$6Ph0l3EfzIOJEGH6ljIIxCJNIQf5Wj7D+rhDiKL670A",
    "{CRYPT}$6$7K.FQIpy6Mub/hmJ$DLxuV/F2Liq4Ayi7bVkd9Jox7RGaui.fZacCbdqhvClAtsw/pFJ7S02maWn2lsLNd5N4E1jbG1eCQr4SOXpmF1",
    "{CRYPT}$5$/Hsx/sdZhVYD2Z2u$TXZloIzfMnOP7shA4GTSPm8SRjWbRbzF2Qpf3n8szOB",
    "{CRYPT}$6$rounds=2000$rAO3vBRHvuW9748a$8V4dRUcmoxpo2G6eL.RFCiciHqe8zLM1ij4gqIiIVfSD3BmPT9Myq5hzvI6Mzs1SUVg4mG.6s4PVritz6oCBq/",
];

/// glibc crypt(3) outputs (Python `crypt.crypt`), stored with an OpenLDAP `{CRYPT}` prefix.
const GLIBC_CRYPT_VECTORS: &[&str] = &[
    "{CRYPT}$6$saltsaltsalt$PMWE8DTlam1JU37Piyk43bHcMxTJq6sgu5DKB0/tGPjanN35jcY68QkpDfPFUGPWX5uCxIQkSPzMmqEiVNgts.",
    "{CRYPT}$5$rounds=10000$saltsaltsalt$W1lPXjvzBY/PSQSaoNW0wt8j2Q6KSqoGH6zhzUqYdQ9",
    "{CRYPT}$6$rounds=1000$abc$MqEcPZUYRGGcOeq7PhMpfjfu/F0HrVEI0OlZBijWvO8mSG77iNUDP5MqFceKpJTBc8iITVtNyLiNTRNCxv6oh0",
];

/// Debian 12 libxcrypt: `mkpasswd -m METHOD secret` for every method `mkpasswd -m help`
/// lists, then the settings mkpasswd does not make ($2y$, bare and bare-salt SunMD5, a
/// yescrypt N below the default, scrypt at N = 2^12) through crypt() itself (Python's `crypt`).
const LIBXCRYPT_VECTORS: &[&str] = &[
    "{CRYPT}$y$j9T$rn7WCwJvX9aYHQJeH2V8K1$AUivrvHRyalMx6mlVuqBem/Pep8qVzVfVfwNn7xAMgB",
    "{CRYPT}$gy$j9T$Z2Weunx7Vmq91NyxOiyKe1$98KoOcpbke3PrJ7RpRDxkU98iTats/Cry1IoTiWcmQ3",
    "{CRYPT}$7$CU..../....HpHaLMQfOeiI2iFh/1QVz0$/fwPJ0ls25MfcODj7v.SshMJpp5uj7PtCmlnuddN848",
    "{CRYPT}$2b$05$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG",
    "{CRYPT}$2a$05$iGsbBRl0RREklrpdMqxkae.P9IzVcconfziesFqARZER/s0BNzuTe",
    "{CRYPT}$6$Mzm5RrP8dm4nLiOg$.vuzRqVW6hvhhvjeAw.unMo8iktaNR586X5hpB6HNFPgaxl.ZWcw5YYnhj3v3XT/VdfHG3bwhSUqoXHHB/uAq/",
    "{CRYPT}$5$Z4pSgTlHDsXpwoQr$QCylZUc4D4dF4WDxFeTyhcSmJRwYFfHCBd8XaOJidwB",
    "{CRYPT}$md5,rounds=37856$zLVwGR12$$qwqbfdZ.vLi.ZfMgF1hj/.",
    "{CRYPT}$1$ZmFsP47X$SGrXijJDN/p/FnIJ1i/ZA0",
    "{CRYPT}_J9..OMeV1yqJwoDu4Xw",
    "{CRYPT}g2CyTOcD393jE",
    "{CRYPT}$3$$878d8014606cda29677a44efa1353fc7",
    "{CRYPT}$2y$05$abcdefghijklmnopqrstuuOQiyCxlgf/oeuTqixKmWdcYUh4Hjl0a",
    "{CRYPT}$md5$abcdefgh$$TFWU.dlIfuoAjNld5IaX3.",
    "{CRYPT}$md5,rounds=10$abcdefgh$H2KLeZpPVZR8AJzwAoLhB1",
    "{CRYPT}$y$j75$abcdefghijklmnop$vZlXu1XtxOBWRxjOpQqONp1WYfMO0dN.H4xeSMU2ZvC",
    "{CRYPT}$7$A/..../....abcdefgh$BBYMblLX618TrrkR2IpTqgIr8jbVtMlzE7O8Y0xaNxA",
];

/// libxcrypt crypt() of the non-ASCII password "sécret" (UTF-8): NT widens bytes, bcrypt
/// hashes them as they are.
const LIBXCRYPT_NON_ASCII_VECTORS: &[&str] = &[
    "{CRYPT}$3$$4bbabe021006d2a32aaedcd283dd15ba",
    "{CRYPT}$2a$05$abcdefghijklmnopqrstuue73ccPeu6jOIGNYCxh9sGEWx4Cb.zJm",
    "{CRYPT}$2y$05$abcdefghijklmnopqrstuue73ccPeu6jOIGNYCxh9sGEWx4Cb.zJm",
];

#[test]
fn dovecot_crypt_aliases_verify_their_crypt_strings() {
    for stored in [
        "{SHA512-CRYPT}$6$Mzm5RrP8dm4nLiOg$.vuzRqVW6hvhhvjeAw.unMo8iktaNR586X5hpB6HNFPgaxl.ZWcw5YYnhj3v3XT/VdfHG3bwhSUqoXHHB/uAq/",
        "{SHA256-CRYPT}$5$Z4pSgTlHDsXpwoQr$QCylZUc4D4dF4WDxFeTyhcSmJRwYFfHCBd8XaOJidwB",
        "{MD5-CRYPT}$1$ZmFsP47X$SGrXijJDN/p/FnIJ1i/ZA0",
        "{BLF-CRYPT}$2y$05$abcdefghijklmnopqrstuuOQiyCxlgf/oeuTqixKmWdcYUh4Hjl0a",
        "{DES-CRYPT}g2CyTOcD393jE",
    ] {
        assert_eq!(verify_checked(stored.as_bytes(), b"secret"), Ok(true), "{stored}");
        assert_eq!(verify_checked(stored.as_bytes(), b"secreT"), Ok(false), "{stored}");
    }
}

#[test]
fn libxcrypt_non_ascii_vectors() {
    for stored in LIBXCRYPT_NON_ASCII_VECTORS {
        assert_eq!(
            verify_checked(stored.as_bytes(), "sécret".as_bytes()),
            Ok(true),
            "{stored}"
        );
        assert_eq!(
            verify_checked(stored.as_bytes(), b"secret"),
            Ok(false),
            "{stored}"
        );
    }
}

/// The reference argon2 CLI (`argon2 saltsaltsaltsalt -id ... -e`), as OpenLDAP 2.6 stores it.
const ARGON2ID_VECTORS: &[&str] = &[
    "{ARGON2}$argon2id$v=19$m=65536,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$4ri7mhiSrnj9oEyFS4ZxbjEro69F+Nh/mAteAg51Amo",
    "{ARGON2}$argon2id$v=19$m=4096,t=3,p=2$c2FsdHNhbHRzYWx0c2FsdA$WviKIyxiF8nCFwBKC8nK7iAweBYYAUOymvAlTIEfiXM",
];

fn all_vectors() -> impl Iterator<Item = &'static str> {
    SLAPPASSWD_VECTORS
        .iter()
        .chain(GLIBC_CRYPT_VECTORS)
        .chain(LIBXCRYPT_VECTORS)
        .chain(ARGON2ID_VECTORS)
        .copied()
}

#[test]
fn reference_vectors_accept_the_right_password() {
    for stored in all_vectors() {
        assert_eq!(
            verify_checked(stored.as_bytes(), b"secret"),
            Ok(true),
            "vector {stored}"
        );
    }
}

#[test]
fn reference_vectors_reject_wrong_passwords() {
    for stored in all_vectors() {
        for wrong in [&b"Secret"[..], b"secret ", b"secre", b"x", b"secretsecret"] {
            assert_eq!(
                verify_checked(stored.as_bytes(), wrong),
                Ok(false),
                "vector {stored} with {:?}",
                String::from_utf8_lossy(wrong)
            );
        }
    }
}

#[test]
fn utf8_password_vector_from_slappasswd() {
    let stored = "{SSHA}dOMVDvYYZgOUuDx6V64LEQHIgN8VLEQb".as_bytes();
    assert!(verify(stored, "pässwörd with spaces".as_bytes()));
    assert!(!verify(stored, "passwort with spaces".as_bytes()));
}

#[test]
fn scheme_names_are_case_insensitive() {
    assert!(verify(b"{ssha}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40", b"secret"));
    assert!(verify(b"{Sha}5en6G6MezRroT3XKqkdPOmY/BfQ=", b"secret"));
    assert!(verify(
        b"{pbkdf2-sha256}10000$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
        b"secret"
    ));
    assert_eq!(Scheme::from_name("{ssha512}"), Some(Scheme::Ssha512));
    assert_eq!(Scheme::from_name("pbkdf2"), Some(Scheme::Pbkdf2Sha1));
    assert_eq!(Scheme::from_name("crypt"), Some(Scheme::Crypt));
    assert_eq!(Scheme::from_name("{BLOWFISH}"), None);
    assert_eq!(Scheme::from_name("{sha512-crypt}"), Some(Scheme::Crypt));
    assert_eq!(Scheme::from_name("BLF-CRYPT"), Some(Scheme::Crypt));
}

#[test]
fn cleartext_compares_exactly() {
    assert!(verify(b"secret", b"secret"));
    assert!(!verify(b"secret", b"Secret"));
    assert!(!verify(b"secret", b"secret2"));
    // A brace that never closes is still cleartext.
    assert!(verify(b"{secret", b"{secret"));
    assert_eq!(scheme_of(b"plain"), Ok(Scheme::Cleartext));
    // The explicit pseudo-scheme compares what follows it.
    assert!(verify(b"{CLEARTEXT}secret", b"secret"));
    assert!(!verify(b"{CLEARTEXT}secret", b"{CLEARTEXT}secret"));
    assert!(!is_hashed(b"{cleartext}secret"));
}

#[test]
fn empty_presented_password_never_matches() {
    assert!(!verify(b"", b""));
    assert!(!verify(b"{SSHA}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40", b""));
}

#[test]
fn unknown_scheme_is_an_error_not_a_cleartext_match() {
    let stored = b"{BLOWFISH}secret";
    assert_eq!(
        verify_checked(stored, b"{BLOWFISH}secret"),
        Err(PasswordError::UnknownScheme("BLOWFISH".into()))
    );
    assert!(!verify(stored, b"secret"));
    // ...and it is kept as a hash, never hashed again as if it were a password.
    assert!(is_hashed(stored));
}

#[test]
fn malformed_values_are_errors() {
    let cases: &[&[u8]] = &[
        b"{SSHA}!!!notbase64",
        // Exactly a SHA-1 digest: no salt at all.
        b"{SSHA}5en6G6MezRroT3XKqkdPOmY/BfQ=",
        // A SHA-1 digest plus salt under {SHA}: wrong length.
        b"{SHA}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40",
        b"{PBKDF2-SHA256}10000$SQJH7c9OtuGQ2Xyrba9OhQ",
        b"{PBKDF2-SHA256}ten$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
        b"{PBKDF2-SHA256}0$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
        // A SHA-1-sized hash under PBKDF2-SHA256.
        b"{PBKDF2-SHA256}10000$9O.ISd2GUo0WkeQoDOR8HA$AsV.t3zvSIDTcouO/IC6LospTRw",
        b"{ARGON2}argon2id-but-not-phc",
        // 12 characters: no crypt(3) format.
        b"{CRYPT}SKfNmCimz.CH",
        b"{CRYPT}$1$abc$def",
        b"{CRYPT}$2b$5$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG",
        b"{CRYPT}$2b$99$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG",
        b"{CRYPT}$7$CU..../....",
        b"{CRYPT}$7$CU..../....HpHaLMQfOeiI2iFh/1QVz0$short",
        b"{CRYPT}$y$j9T$rn7WCwJvX9aYHQJeH2V8K1",
        b"{CRYPT}$gy$j9T$Z2Weunx7Vmq91NyxOiyKe1$98KoOcpbke3PrJ7",
        b"{CRYPT}$3$$878D8014606CDA29677A44EFA1353FC7",
        b"{CRYPT}_J9..OMeV",
        b"{CRYPT}$md5$abcdefgh$$short",
        b"{CRYPT}$sha1$40000$salt$hash",
        b"{CRYPT}$6$rounds=lots$abc$def",
    ];
    for stored in cases {
        let outcome = verify_checked(stored, b"secret");
        assert!(
            matches!(outcome, Err(PasswordError::Malformed { .. })),
            "{} gave {outcome:?}",
            String::from_utf8_lossy(stored)
        );
    }
}

#[test]
fn costs_over_the_limits_are_refused_without_computing() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"{PBKDF2-SHA256}4000000000$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
            "iterations",
        ),
        (
            b"{ARGON2}$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$4ri7mhiSrnj9oEyFS4ZxbjEro69F+Nh/mAteAg51Amo",
            "m",
        ),
        (
            b"{ARGON2}$argon2id$v=19$m=4096,t=1000,p=1$c2FsdHNhbHRzYWx0c2FsdA$4ri7mhiSrnj9oEyFS4ZxbjEro69F+Nh/mAteAg51Amo",
            "t",
        ),
        (
            b"{CRYPT}$6$rounds=999999999$saltsaltsalt$PMWE8DTlam1JU37Piyk43bHcMxTJq6sgu5DKB0/tGPjanN35jcY68QkpDfPFUGPWX5uCxIQkSPzMmqEiVNgts.",
            "rounds",
        ),
        (
            b"{CRYPT}$2b$31$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG",
            "cost",
        ),
        // N = 2^40.
        (
            b"{CRYPT}$7$cU..../....HpHaLMQfOeiI2iFh/1QVz0$/fwPJ0ls25MfcODj7v.SshMJpp5uj7PtCmlnuddN848",
            "N*r*p",
        ),
        // N = 2^30.
        (
            b"{CRYPT}$y$jRT$rn7WCwJvX9aYHQJeH2V8K1$AUivrvHRyalMx6mlVuqBem/Pep8qVzVfVfwNn7xAMgB",
            "N*r*p",
        ),
        (
            b"{CRYPT}$gy$jRT$Z2Weunx7Vmq91NyxOiyKe1$98KoOcpbke3PrJ7RpRDxkU98iTats/Cry1IoTiWcmQ3",
            "N*r*p",
        ),
        // t = 5.
        (
            b"{CRYPT}$y$j9T/2$rn7WCwJvX9aYHQJeH2V8K1$AUivrvHRyalMx6mlVuqBem/Pep8qVzVfVfwNn7xAMgB",
            "t",
        ),
        (
            b"{CRYPT}$md5,rounds=4000000000$zLVwGR12$$qwqbfdZ.vLi.ZfMgF1hj/.",
            "rounds",
        ),
        // BSDi count 2^24 - 1.
        (b"{CRYPT}_zzzzOMeV1yqJwoDu4Xw", "rounds"),
    ];
    for (stored, expected_field) in cases {
        match verify_checked(stored, b"secret") {
            Err(PasswordError::CostTooHigh { field, .. }) => assert_eq!(field, *expected_field),
            other => panic!("{} gave {other:?}", String::from_utf8_lossy(stored)),
        }
    }
}

#[test]
fn oversized_input_is_refused() {
    let long = vec![b'a'; 5000];
    assert_eq!(verify_checked(&long, &long), Err(PasswordError::TooLong));
    assert_eq!(
        verify_checked(b"{SSHA}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40", &long),
        Err(PasswordError::TooLong)
    );
    assert_eq!(hash(Scheme::Ssha, &long), Err(PasswordError::TooLong));
}

#[test]
fn hashing_round_trips_for_every_writable_scheme() {
    for scheme in Scheme::ALL.into_iter().filter(|scheme| scheme.can_hash()) {
        let stored = hash(scheme, "correct horse ✓".as_bytes()).expect("hash");
        let text = String::from_utf8(stored.clone()).expect("stored values are ASCII");
        assert!(
            text.starts_with(&format!("{{{}}}", scheme.name())),
            "{text}"
        );
        assert_eq!(scheme_of(&stored), Ok(scheme), "{text}");
        assert!(is_hashed(&stored), "{text}");
        assert_eq!(
            verify_checked(&stored, "correct horse ✓".as_bytes()),
            Ok(true),
            "{text}"
        );
        assert_eq!(
            verify_checked(&stored, b"correct horse"),
            Ok(false),
            "{text}"
        );
    }
}

#[test]
fn hashing_uses_fresh_salts() {
    for scheme in [Scheme::Ssha, Scheme::Pbkdf2Sha256, Scheme::Crypt] {
        let first = hash(scheme, b"secret").expect("hash");
        let second = hash(scheme, b"secret").expect("hash");
        assert_ne!(first, second, "{}", scheme.name());
    }
}

#[test]
fn written_formats_match_what_openldap_reads() {
    let pbkdf2 = String::from_utf8(hash(Scheme::Pbkdf2Sha256, b"secret").unwrap()).unwrap();
    let fields: Vec<&str> = pbkdf2
        .strip_prefix("{PBKDF2-SHA256}")
        .unwrap()
        .split('$')
        .collect();
    assert_eq!(fields.len(), 3, "{pbkdf2}");
    assert_eq!(fields[0], "10000");
    // Adapted base64: no '+' and no padding.
    assert!(!pbkdf2.contains('+') && !pbkdf2.contains('='), "{pbkdf2}");
    let argon2 = String::from_utf8(hash(Scheme::Argon2, b"secret").unwrap()).unwrap();
    assert!(
        argon2.starts_with("{ARGON2}$argon2id$v=19$m=19456,t=2,p=1$"),
        "{argon2}"
    );
    let crypt = String::from_utf8(hash(Scheme::Crypt, b"secret").unwrap()).unwrap();
    assert!(crypt.starts_with("{CRYPT}$6$"), "{crypt}");
}

#[test]
fn verify_only_schemes_refuse_to_hash() {
    for scheme in [Scheme::Md5, Scheme::Smd5, Scheme::Sha, Scheme::Cleartext] {
        assert_eq!(
            hash(scheme, b"secret"),
            Err(PasswordError::VerifyOnlyScheme(scheme.name()))
        );
    }
}

#[test]
fn is_hashed_recognizes_every_scheme_prefix() {
    assert!(is_hashed(b"{SSHA}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40"));
    assert!(is_hashed(b"{crypt}$6$x$y"));
    // Schemes lmdir does not know are hashes all the same: stored as given, never re-hashed.
    assert!(is_hashed(b"{NOPE}secret"));
    assert!(is_hashed(b"{SHA512-CRYPT}$6$x$y"));
    assert!(is_hashed(b"{BLF-CRYPT}$2y$05$x"));
    assert!(is_hashed(b"{SHA256.HEX}abcd"));
    assert!(!is_hashed(b"secret"));
    assert!(!is_hashed(b"{CLEARTEXT}secret"));
    // Not the `{NAME}` syntax: cleartext that happens to start with a brace.
    assert!(!is_hashed(b"{}secret"));
    assert!(!is_hashed(b"{1abc}secret"));
    assert!(!is_hashed(b"{has space}secret"));
    assert!(!is_hashed(b"{unclosed"));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn ssha_round_trip(password in proptest::collection::vec(any::<u8>(), 1..64)) {
            let stored = hash(Scheme::Ssha512, &password).unwrap();
            prop_assert!(verify(&stored, &password));
            let mut other = password.clone();
            other[0] ^= 1;
            prop_assert!(!verify(&stored, &other));
        }

        #[test]
        fn verify_never_panics(stored in proptest::collection::vec(any::<u8>(), 0..200),
                               presented in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = verify_checked(&stored, &presented);
        }

        #[test]
        fn verify_never_panics_on_crypt_garbage(
            prefix_index in 0..14usize,
            payload in "[./0-9A-Za-z$,=é€_]{0,90}") {
            let prefixes = ["", "$1$", "$2b$", "$2b$1", "$5$", "$6$", "$md5,rounds=", "$md5$", "$3$$",
                            "$7$", "$y$", "$gy$", "_", "$2y$0"];
            let stored = format!("{{CRYPT}}{}{payload}", prefixes[prefix_index]);
            let _ = verify_checked(stored.as_bytes(), b"secret");
            let _ = lmdir_access::password::check_verifiable(stored.as_bytes());
        }

        #[test]
        fn verify_never_panics_on_scheme_prefixed_garbage(
            scheme_index in 0..Scheme::ALL.len(),
            payload in "[A-Za-z0-9+/=.$,]{0,120}") {
            let stored = format!("{{{}}}{payload}", Scheme::ALL[scheme_index].name());
            let _ = verify_checked(stored.as_bytes(), b"secret");
        }
    }
}

#[test]
fn stored_costs_are_bounded_tighter_than_verified_ones() {
    use lmdir_access::password::{check_cost, STORE_COST_LIMITS, VERIFY_COST_LIMITS};
    // Within what verify computes, but every bind would pay it: refused for storing.
    let extreme: &[(&[u8], &str)] = &[
        (
            b"{ARGON2}$argon2id$v=19$m=262144,t=64,p=1$c2FsdHNhbHRzYWx0c2FsdA$4ri7mhiSrnj9oEyFS4ZxbjEro69F+Nh/mAteAg51Amo",
            "m",
        ),
        (
            b"{PBKDF2-SHA256}1000000$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
            "iterations",
        ),
        (
            b"{CRYPT}$6$rounds=1000000$saltsaltsalt$PMWE8DTlam1JU37Piyk43bHcMxTJq6sgu5DKB0/tGPjanN35jcY68QkpDfPFUGPWX5uCxIQkSPzMmqEiVNgts.",
            "rounds",
        ),
        (
            b"{CRYPT}$2b$13$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG",
            "cost",
        ),
        // `mkpasswd -m scrypt -R 8`: 128 MiB.
        (
            b"{CRYPT}$7$DU..../..../3I/V5HsroIDVdzoqXA/z.$4EhMUhgyWilJsM2W6m7BFm91CI5PDnjRXD1xNKRXBY5",
            "N*r*p",
        ),
        // t = 1.
        (
            b"{CRYPT}$y$j9T/.$rn7WCwJvX9aYHQJeH2V8K1$AUivrvHRyalMx6mlVuqBem/Pep8qVzVfVfwNn7xAMgB",
            "t",
        ),
        (b"{CRYPT}_/.k.OMeV1yqJwoDu4Xw", "rounds"),
    ];
    for (stored, expected_field) in extreme {
        assert_eq!(check_cost(stored, &VERIFY_COST_LIMITS), Ok(()));
        match check_cost(stored, &STORE_COST_LIMITS) {
            Err(PasswordError::CostTooHigh { field, .. }) => assert_eq!(field, *expected_field),
            other => panic!("{} gave {other:?}", String::from_utf8_lossy(stored)),
        }
    }
    // What `hash` writes, and costless schemes, may always be stored.
    for scheme in Scheme::ALL.into_iter().filter(|scheme| scheme.can_hash()) {
        let stored = hash(scheme, b"secret").expect("hash");
        assert_eq!(
            check_cost(&stored, &STORE_COST_LIMITS),
            Ok(()),
            "{scheme:?}"
        );
    }
    assert_eq!(check_cost(b"plain text", &STORE_COST_LIMITS), Ok(()));
    assert_eq!(
        check_cost(&vec![b'a'; 5000], &STORE_COST_LIMITS),
        Err(PasswordError::TooLong)
    );
}

#[test]
fn verifiability_is_told_without_a_password_and_labelled_by_scheme() {
    use lmdir_access::password::{check_verifiable, scheme_label};
    for stored in all_vectors().chain(LIBXCRYPT_NON_ASCII_VECTORS.iter().copied()) {
        assert_eq!(check_verifiable(stored.as_bytes()), Ok(()), "{stored}");
    }
    assert_eq!(check_verifiable(b"plain"), Ok(()));
    assert!(matches!(
        check_verifiable(b"{PLAIN-MD5}5ebe2294ecd0e0f08eab7690d2a6ee69"),
        Err(PasswordError::UnknownScheme(_))
    ));
    assert!(matches!(
        check_verifiable(b"{SSHA}!!!notbase64"),
        Err(PasswordError::Malformed { .. })
    ));
    assert!(matches!(
        check_verifiable(b"{CRYPT}$1$abc$def"),
        Err(PasswordError::Malformed { .. })
    ));
    assert!(matches!(
        check_verifiable(b"{CRYPT}$2b$31$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG"),
        Err(PasswordError::CostTooHigh { .. })
    ));
    let labels = [
        ("{ssha}abc", "SSHA"),
        ("secret", "CLEARTEXT"),
        ("{CRYPT}$y$j9T$a$b", "CRYPT/yescrypt"),
        ("{CRYPT}g2CyTOcD393jE", "CRYPT/descrypt"),
        ("{CRYPT}$9$x", "CRYPT"),
        ("{BLF-CRYPT}$2y$05$x", "CRYPT/bcrypt"),
        ("{PLAIN-MD5}5ebe", "PLAIN-MD5"),
    ];
    for (stored, label) in labels {
        assert_eq!(scheme_label(stored.as_bytes()), label, "{stored}");
    }
}

/// libxcrypt itself, when installed: for every method `mkpasswd -m help` lists, hashes of
/// random passwords made by `mkpasswd` verify with the password and not with another. Without
/// mkpasswd the test passes with a note, except under CI=true where it fails.
#[test]
fn mkpasswd_hashes_of_random_passwords_verify() {
    use rand::Rng;
    use std::io::Write;
    use std::process::{Command, Stdio};
    let help = match Command::new("mkpasswd").args(["-m", "help"]).output() {
        Ok(output) => String::from_utf8_lossy(&output.stdout).into_owned(),
        Err(error) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "mkpasswd is missing (apt-get install whois): {error}"
            );
            eprintln!("skipping: mkpasswd is not installed ({error})");
            return;
        }
    };
    let methods: Vec<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Available methods"))
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(methods.len() >= 12, "{help}");
    let mut random = rand::rng();
    for method in methods {
        for _ in 0..2 {
            let length = random.random_range(1..=24);
            let password: String = (0..length)
                .map(|_| char::from(random.random_range(0x21u8..0x7f)))
                .collect();
            let mut child = Command::new("mkpasswd")
                .args(["-m", method, "--stdin"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("mkpasswd");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(password.as_bytes())
                .expect("write");
            let output = child.wait_with_output().expect("mkpasswd");
            assert!(output.status.success(), "mkpasswd -m {method}");
            let stored = format!(
                "{{CRYPT}}{}",
                String::from_utf8_lossy(&output.stdout).trim()
            );
            assert_eq!(
                verify_checked(stored.as_bytes(), password.as_bytes()),
                Ok(true),
                "{method}: {password:?} → {stored}"
            );
            // A different first byte changes even DES's eight significant characters.
            let mut wrong = password.into_bytes();
            wrong[0] = if wrong[0] == b'!' { b'#' } else { b'!' };
            assert_eq!(
                verify_checked(stored.as_bytes(), &wrong),
                Ok(false),
                "{method}: {stored}"
            );
        }
    }
}

#[test]
fn verify_memory_is_what_the_memory_hard_schemes_allocate() {
    const MIB: u64 = 1 << 20;
    // mkpasswd -m scrypt (N = 2^14, r = 32, p = 1): 64 MiB and the blocks.
    let scrypt =
        b"{CRYPT}$7$CU..../....H7ZVB0ddSRCKmOKHXTD.v1$k9fQDBwz2qDh7i4sQr4FXz6ybQG.Eq0rBwyhc0N8Zi4";
    assert_eq!(verify_memory_bytes(scrypt), 128 * 32 * ((1 << 14) + 1));
    // yescrypt's default (N = 4096, r = 32): 16 MiB.
    let yescrypt =
        b"{CRYPT}$y$j9T$rn7WCwJvX9aYHQJeH2V8K1$AUivrvHRyalMx6mlVuqBem/Pep8qVzVfVfwNn7xAMgB";
    assert_eq!(verify_memory_bytes(yescrypt), 128 * 32 * (4096 + 1));
    // Our own Argon2id: m = 19,456 KiB.
    let argon2 = hash(Scheme::Argon2, b"secret").expect("hash");
    assert_eq!(verify_memory_bytes(&argon2), 19_456 * 1024);
    // The others need no memory to speak of; neither do values that cannot be verified.
    for light in [
        &b"{SSHA}RDpsQcWJgeAzWkrbhetcLfU4ZZzrLh40"[..],
        b"{PBKDF2-SHA256}10000$SQJH7c9OtuGQ2Xyrba9OhQ$c3JxHuBA9CJQe3iBplVgKZGb55rHPDudxv0R537qw4Q",
        b"secret",
        b"{CRYPT}$7$garbage",
        b"{UNKNOWN}x",
    ] {
        assert!(verify_memory_bytes(light) < MIB, "{light:?}");
    }
}

/// sha-crypt hashes the whole password again in every round: a 4 KiB password against a value
/// with many rounds cost tens of times that value's work for a real password (many
/// core-seconds per bind attempt against a planted `rounds=100000`). Past rounds × (length +
/// 64) = 128 MB the check is refused uncomputed; real passwords against real values still
/// verify, long ones against glibc's default 5,000 rounds too.
#[test]
fn sha_crypt_work_is_bounded_by_rounds_times_password_length() {
    let planted = "{CRYPT}$6$rounds=100000$Mzm5RrP8dm4nLiOg$.vuzRqVW6hvhhvjeAw.unMo8iktaNR586X5hpB6HNFPgaxl.ZWcw5YYnhj3v3XT/VdfHG3bwhSUqoXHHB/uAq/";
    let long = vec![b'a'; 4096];
    let refused = verify_checked(planted.as_bytes(), &long);
    assert!(
        matches!(refused, Err(PasswordError::CostTooHigh { .. })),
        "{refused:?}"
    );
    let sha256 =
        "{CRYPT}$5$rounds=999999$Z4pSgTlHDsXpwoQr$QCylZUc4D4dF4WDxFeTyhcSmJRwYFfHCBd8XaOJidwB";
    assert!(matches!(
        verify_checked(sha256.as_bytes(), &long[..100]),
        Err(PasswordError::CostTooHigh { .. })
    ));
    // glibc's default rounds: every length up to the 4 KiB bound is checked.
    let default = "{CRYPT}$6$Mzm5RrP8dm4nLiOg$.vuzRqVW6hvhhvjeAw.unMo8iktaNR586X5hpB6HNFPgaxl.ZWcw5YYnhj3v3XT/VdfHG3bwhSUqoXHHB/uAq/";
    assert_eq!(verify_checked(default.as_bytes(), &long), Ok(false));
    assert_eq!(verify_checked(default.as_bytes(), b"secret"), Ok(true));
}
