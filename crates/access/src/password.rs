//! userPassword schemes: verifying stored values the way OpenLDAP does and hashing new ones.
//!
//! A stored value is `{SCHEME}payload` (scheme name case-insensitive) or, without a `{`
//! prefix, cleartext. Every comparison of secret-derived bytes is constant time (`subtle`).
//! Expensive schemes carry their cost in the stored value; costs above the `*_MAX` limits
//! below are refused with [`PasswordError::CostTooHigh`] instead of being computed, so a
//! planted hash cannot turn a bind into a denial of service.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};
use md5::Md5;
use rand::RngCore;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

mod crypt;
pub use crypt::CryptFormat;

/// Largest PBKDF2 iteration count verified in a stored value (OpenLDAP writes 10,000).
pub const PBKDF2_ITERATIONS_MAX: u32 = 1_000_000;
/// Iterations used by [`hash`] for `{PBKDF2-SHA256}`: OpenLDAP's pw-pbkdf2 default, so
/// values move between the two servers and binds stay cheap.
pub const PBKDF2_ITERATIONS_DEFAULT: u32 = 10_000;
/// Largest Argon2 memory cost (KiB) verified in a stored value: 256 MiB per bind attempt.
pub const ARGON2_MEMORY_KIB_MAX: u32 = 262_144;
/// Largest Argon2 time cost (passes) verified in a stored value.
pub const ARGON2_TIME_COST_MAX: u32 = 64;
/// Largest Argon2 parallelism verified in a stored value.
pub const ARGON2_PARALLELISM_MAX: u32 = 16;
/// Argon2id costs used by [`hash`]: the OWASP minimum (19 MiB, 2 passes, 1 lane).
pub const ARGON2_MEMORY_KIB_DEFAULT: u32 = 19_456;
/// See [`ARGON2_MEMORY_KIB_DEFAULT`].
pub const ARGON2_TIME_COST_DEFAULT: u32 = 2;
/// Largest crypt(3) round count verified in a stored value: sha-crypt's `rounds=`, SunMD5's
/// `rounds=` (on top of its 4,096 fixed rounds), BSDi's count of DES passes.
pub const CRYPT_ROUNDS_MAX: u32 = 1_000_000;
/// Largest bcrypt cost (log2 of the rounds) verified in a stored value: 2^13 rounds, about half
/// a second on one core.
pub const BCRYPT_COST_MAX: u32 = 13;
/// Largest scrypt / yescrypt N·r·p verified in a stored value: 2^21, i.e. 256 MiB of memory
/// (128·N·r bytes) at p = 1, as [`ARGON2_MEMORY_KIB_MAX`].
pub const SCRYPT_WORK_MAX: u64 = 1 << 21;
/// Largest yescrypt `t` (extra passes at the same memory) verified in a stored value.
pub const YESCRYPT_TIME_MAX: u32 = 4;

/// Upper bounds on the cost parameters a stored value carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostLimits {
    pub pbkdf2_iterations: u32,
    pub argon2_memory_kib: u32,
    pub argon2_time_cost: u32,
    pub argon2_parallelism: u32,
    pub crypt_rounds: u32,
    pub bcrypt_cost: u32,
    /// N·r·p of scrypt `$7$` and (gost-)yescrypt `$y$`/`$gy$`: memory is 128·N·r bytes.
    pub scrypt_work: u64,
    pub yescrypt_time: u32,
}

/// What [`verify`] computes at all: values imported from elsewhere (slappasswd, other
/// servers) up to these costs still bind; anything above answers `CostTooHigh` uncomputed.
pub const VERIFY_COST_LIMITS: CostLimits = CostLimits {
    pbkdf2_iterations: PBKDF2_ITERATIONS_MAX,
    argon2_memory_kib: ARGON2_MEMORY_KIB_MAX,
    argon2_time_cost: ARGON2_TIME_COST_MAX,
    argon2_parallelism: ARGON2_PARALLELISM_MAX,
    crypt_rounds: CRYPT_ROUNDS_MAX,
    bcrypt_cost: BCRYPT_COST_MAX,
    scrypt_work: SCRYPT_WORK_MAX,
    yescrypt_time: YESCRYPT_TIME_MAX,
};

/// What a client may store verbatim as a hash (see [`check_cost`]): every later bind to the
/// entry pays this cost, so it stays near what a bind should cost (tens of milliseconds on
/// one core): PBKDF2 at OWASP's 600,000 for SHA-256, Argon2 at 64 MiB × 4 passes × 4 lanes,
/// sha-crypt (and SunMD5, BSDi) at 20× glibc's default 5,000 rounds, bcrypt at cost 12,
/// scrypt/yescrypt at N·r·p = 2^19 (64 MiB: `mkpasswd -m scrypt`'s default; yescrypt's is
/// 16 MiB) with no extra yescrypt passes. Our own [`hash`] stays far below.
pub const STORE_COST_LIMITS: CostLimits = CostLimits {
    pbkdf2_iterations: 600_000,
    argon2_memory_kib: 65_536,
    argon2_time_cost: 4,
    argon2_parallelism: 4,
    crypt_rounds: 100_000,
    bcrypt_cost: 12,
    scrypt_work: 1 << 19,
    yescrypt_time: 0,
};
/// Longest stored value or presented password handled (bytes); longer input is refused.
pub const PASSWORD_LENGTH_BYTES_MAX: usize = 4096;
/// Salt length for the salted digest schemes written by [`hash`].
const DIGEST_SALT_LENGTH_BYTES: usize = 8;
/// Salt length for PBKDF2 and Argon2 written by [`hash`] (OpenLDAP's pw-pbkdf2 uses 16).
const KDF_SALT_LENGTH_BYTES: usize = 16;
/// Raw salt bytes for `$6$`: 12 bytes encode to the 16 salt characters sha-crypt allows.
const CRYPT_SALT_LENGTH_BYTES: usize = 12;

/// Why a stored value could not be checked or a hash could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("unknown password scheme '{0}'")]
    UnknownScheme(String),
    #[error("password scheme {0} is supported for verification only")]
    VerifyOnlyScheme(&'static str),
    #[error("malformed {scheme} value: {reason}")]
    Malformed {
        scheme: &'static str,
        reason: String,
    },
    #[error("{scheme} cost {field}={value} exceeds the limit {limit}")]
    CostTooHigh {
        scheme: &'static str,
        field: &'static str,
        value: u64,
        limit: u64,
    },
    #[error("password or stored value longer than {PASSWORD_LENGTH_BYTES_MAX} bytes")]
    TooLong,
    #[error("{scheme} hashing failed: {reason}")]
    HashFailed {
        scheme: &'static str,
        reason: String,
    },
}

/// Dovecot's names for crypt(3) formats, verified as `{CRYPT}` (slapd does not know them).
pub const DOVECOT_CRYPT_ALIASES: [&str; 5] = [
    "DES-CRYPT",
    "MD5-CRYPT",
    "SHA256-CRYPT",
    "SHA512-CRYPT",
    "BLF-CRYPT",
];

/// A password storage scheme, named as OpenLDAP names it inside `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Ssha,
    Ssha256,
    Ssha384,
    Ssha512,
    Sha,
    Sha256,
    Sha384,
    Sha512,
    /// Salted MD5: verification only.
    Smd5,
    /// MD5: verification only.
    Md5,
    Pbkdf2Sha1,
    Pbkdf2Sha256,
    Pbkdf2Sha512,
    Argon2,
    Crypt,
    /// No `{}` prefix: the value is the password itself.
    Cleartext,
}

impl Scheme {
    /// Every scheme with its canonical name, for lookups and listings.
    pub const ALL: [Scheme; 16] = [
        Scheme::Ssha,
        Scheme::Ssha256,
        Scheme::Ssha384,
        Scheme::Ssha512,
        Scheme::Sha,
        Scheme::Sha256,
        Scheme::Sha384,
        Scheme::Sha512,
        Scheme::Smd5,
        Scheme::Md5,
        Scheme::Pbkdf2Sha1,
        Scheme::Pbkdf2Sha256,
        Scheme::Pbkdf2Sha512,
        Scheme::Argon2,
        Scheme::Crypt,
        Scheme::Cleartext,
    ];

    /// The name written between the braces (`CLEARTEXT` for the prefix-less form).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Ssha => "SSHA",
            Scheme::Ssha256 => "SSHA256",
            Scheme::Ssha384 => "SSHA384",
            Scheme::Ssha512 => "SSHA512",
            Scheme::Sha => "SHA",
            Scheme::Sha256 => "SHA256",
            Scheme::Sha384 => "SHA384",
            Scheme::Sha512 => "SHA512",
            Scheme::Smd5 => "SMD5",
            Scheme::Md5 => "MD5",
            Scheme::Pbkdf2Sha1 => "PBKDF2-SHA1",
            Scheme::Pbkdf2Sha256 => "PBKDF2-SHA256",
            Scheme::Pbkdf2Sha512 => "PBKDF2-SHA512",
            Scheme::Argon2 => "ARGON2",
            Scheme::Crypt => "CRYPT",
            Scheme::Cleartext => "CLEARTEXT",
        }
    }

    /// Looks a scheme up by name, case-insensitively, with or without braces.
    /// `PBKDF2` is OpenLDAP's alias of `PBKDF2-SHA1`; Dovecot's crypt(3) schemes
    /// ([`DOVECOT_CRYPT_ALIASES`]: `{SHA512-CRYPT}$6$...`, `{BLF-CRYPT}$2y$...`) are `CRYPT`,
    /// since their payload is the crypt(3) string itself.
    pub fn from_name(name: &str) -> Option<Scheme> {
        let bare = name
            .strip_prefix('{')
            .and_then(|rest| rest.strip_suffix('}'))
            .unwrap_or(name);
        if bare.eq_ignore_ascii_case("PBKDF2") {
            return Some(Scheme::Pbkdf2Sha1);
        }
        if DOVECOT_CRYPT_ALIASES
            .iter()
            .any(|alias| alias.eq_ignore_ascii_case(bare))
        {
            return Some(Scheme::Crypt);
        }
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.name().eq_ignore_ascii_case(bare))
    }

    /// Whether verifying a value of this scheme is deliberately slow (a key-derivation
    /// function: milliseconds or more), so a server should not do it on its async reactor.
    pub fn is_slow(self) -> bool {
        matches!(
            self,
            Scheme::Pbkdf2Sha1
                | Scheme::Pbkdf2Sha256
                | Scheme::Pbkdf2Sha512
                | Scheme::Argon2
                | Scheme::Crypt
        )
    }

    /// Whether [`hash`] can write values of this scheme.
    pub fn can_hash(self) -> bool {
        matches!(
            self,
            Scheme::Ssha
                | Scheme::Ssha256
                | Scheme::Ssha384
                | Scheme::Ssha512
                | Scheme::Pbkdf2Sha256
                | Scheme::Argon2
                | Scheme::Crypt
        )
    }
}

/// Splits `{SCHEME}payload` into the scheme name and the payload. Values without a closing
/// brace, or not starting with `{`, are cleartext (`None`).
fn split_scheme(stored: &[u8]) -> (Option<&str>, &[u8]) {
    if stored.first() != Some(&b'{') {
        return (None, stored);
    }
    let Some(close) = stored.iter().position(|&byte| byte == b'}') else {
        return (None, stored);
    };
    match std::str::from_utf8(&stored[1..close]) {
        Ok(name) => (Some(name), &stored[close + 1..]),
        Err(_) => (None, stored),
    }
}

/// The scheme of a stored value; `Err` names an unknown `{SCHEME}`.
pub fn scheme_of(stored: &[u8]) -> Result<Scheme, PasswordError> {
    match split_scheme(stored) {
        (None, _) => Ok(Scheme::Cleartext),
        (Some(name), _) => {
            Scheme::from_name(name).ok_or_else(|| PasswordError::UnknownScheme(name.to_string()))
        }
    }
}

/// Whether a written value is already a hash and is stored as given: it starts with a
/// `{SCHEME}` prefix ([`has_scheme_prefix`]) other than `{CLEARTEXT}`, whether lmdir knows the
/// scheme or not (Dovecot's `{SHA512-CRYPT}`, `{BLF-CRYPT}`, `{PLAIN-MD5}`...: hashing those
/// again would lose them). The one place every write path asks "is this already a hash".
pub fn is_hashed(stored: &[u8]) -> bool {
    has_scheme_prefix(stored) && scheme_of(stored) != Ok(Scheme::Cleartext)
}

/// Longest scheme name recognised inside a `{SCHEME}` prefix.
const SCHEME_NAME_LENGTH_MAX: usize = 64;

/// Whether the value starts with `{NAME}`: a letter, then letters, digits, `-`, `_` or `.`
/// (Dovecot's `{SHA256.HEX}`), at most [`SCHEME_NAME_LENGTH_MAX`] characters.
pub fn has_scheme_prefix(stored: &[u8]) -> bool {
    let Some(rest) = stored.strip_prefix(b"{") else {
        return false;
    };
    let Some(close) = rest.iter().position(|&byte| byte == b'}') else {
        return false;
    };
    let name = &rest[..close];
    name.len() <= SCHEME_NAME_LENGTH_MAX
        && name.first().is_some_and(u8::is_ascii_alphabetic)
        && name
            .iter()
            .all(|&byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

/// Whether `presented` is the password `stored` describes. Unknown schemes, malformed values,
/// costs over the limits and empty presented passwords all answer `false`; use
/// [`verify_checked`] to learn why.
pub fn verify(stored: &[u8], presented: &[u8]) -> bool {
    verify_checked(stored, presented).unwrap_or(false)
}

/// Like [`verify`] but tells apart "wrong password" (`Ok(false)`) from "cannot check"
/// (`Err`), so the server can log a broken stored value.
pub fn verify_checked(stored: &[u8], presented: &[u8]) -> Result<bool, PasswordError> {
    if stored.len() > PASSWORD_LENGTH_BYTES_MAX || presented.len() > PASSWORD_LENGTH_BYTES_MAX {
        return Err(PasswordError::TooLong);
    }
    // An empty password is an unauthenticated bind (RFC 4513 §5.1.2), never a match.
    if presented.is_empty() {
        return Ok(false);
    }
    check_cost(stored, &VERIFY_COST_LIMITS)?;
    let scheme = scheme_of(stored)?;
    verify_scheme(scheme, split_scheme(stored).1, presented)
}

/// Verifies `presented` against the payload of a value of `scheme` (costs already checked).
fn verify_scheme(scheme: Scheme, payload: &[u8], presented: &[u8]) -> Result<bool, PasswordError> {
    match scheme {
        // `payload` is the whole value without a prefix, or what follows `{CLEARTEXT}`.
        Scheme::Cleartext => Ok(bool::from(payload.ct_eq(presented))),
        Scheme::Ssha => verify_salted_digest::<Sha1>(scheme, payload, presented),
        Scheme::Ssha256 => verify_salted_digest::<Sha256>(scheme, payload, presented),
        Scheme::Ssha384 => verify_salted_digest::<Sha384>(scheme, payload, presented),
        Scheme::Ssha512 => verify_salted_digest::<Sha512>(scheme, payload, presented),
        Scheme::Smd5 => verify_salted_digest::<Md5>(scheme, payload, presented),
        Scheme::Sha => verify_digest::<Sha1>(scheme, payload, presented),
        Scheme::Sha256 => verify_digest::<Sha256>(scheme, payload, presented),
        Scheme::Sha384 => verify_digest::<Sha384>(scheme, payload, presented),
        Scheme::Sha512 => verify_digest::<Sha512>(scheme, payload, presented),
        Scheme::Md5 => verify_digest::<Md5>(scheme, payload, presented),
        Scheme::Pbkdf2Sha1 => verify_pbkdf2::<Sha1>(scheme, payload, presented),
        Scheme::Pbkdf2Sha256 => verify_pbkdf2::<Sha256>(scheme, payload, presented),
        Scheme::Pbkdf2Sha512 => verify_pbkdf2::<Sha512>(scheme, payload, presented),
        Scheme::Argon2 => verify_argon2(payload, presented),
        Scheme::Crypt => verify_crypt(payload, presented),
    }
}

/// Whether a stored value can be verified at all, without a password and without running a
/// key-derivation function: a known scheme, a well-formed value (the digests' base64 and
/// length, the KDFs' parameters, the crypt(3) format) and costs within [`VERIFY_COST_LIMITS`].
/// `Err` says why not; `lmdir check` lists such values, a bind logs them.
pub fn check_verifiable(stored: &[u8]) -> Result<(), PasswordError> {
    check_cost(stored, &VERIFY_COST_LIMITS)?;
    let scheme = scheme_of(stored)?;
    if !scheme.is_slow() {
        // Microseconds: the digest's own decoding says whether the value is well formed.
        verify_scheme(scheme, split_scheme(stored).1, b"\0")?;
    }
    Ok(())
}

/// The scheme of a stored value as `lmdir check` counts and a bind logs it: the scheme's name,
/// `CRYPT/<mkpasswd method>` for a crypt(3) format, `CLEARTEXT` without a prefix, and an unknown
/// `{NAME}`'s name as written (at most 64 characters).
pub fn scheme_label(stored: &[u8]) -> String {
    match split_scheme(stored) {
        (None, _) => Scheme::Cleartext.name().to_string(),
        (Some(name), payload) => match Scheme::from_name(name) {
            Some(Scheme::Crypt) => std::str::from_utf8(payload)
                .ok()
                .and_then(CryptFormat::of)
                .map_or("CRYPT", CryptFormat::label)
                .to_string(),
            Some(scheme) => scheme.name().to_string(),
            None => name.chars().take(SCHEME_NAME_LENGTH_MAX).collect(),
        },
    }
}

/// Refuses, computing nothing, a stored value longer than [`PASSWORD_LENGTH_BYTES_MAX`]
/// (`TooLong`) or whose cost parameters exceed `limits` (`CostTooHigh`). Cleartext, digests
/// and unknown schemes carry no cost; a cost field that does not parse is `Malformed`.
pub fn check_cost(stored: &[u8], limits: &CostLimits) -> Result<(), PasswordError> {
    if stored.len() > PASSWORD_LENGTH_BYTES_MAX {
        return Err(PasswordError::TooLong);
    }
    let Ok(scheme) = scheme_of(stored) else {
        return Ok(());
    };
    let payload = split_scheme(stored).1;
    let costs = match scheme {
        Scheme::Pbkdf2Sha1 | Scheme::Pbkdf2Sha256 | Scheme::Pbkdf2Sha512 => vec![(
            "iterations",
            pbkdf2_iterations(scheme, payload)?,
            limits.pbkdf2_iterations,
        )],
        Scheme::Argon2 => {
            let params = argon2_params(payload)?;
            vec![
                ("m", params.m_cost(), limits.argon2_memory_kib),
                ("t", params.t_cost(), limits.argon2_time_cost),
                ("p", params.p_cost(), limits.argon2_parallelism),
            ]
        }
        Scheme::Crypt => {
            let text = crypt_text(payload)?;
            return check_limits(crypt::format_of(text)?.label(), crypt::costs(text, limits)?);
        }
        _ => Vec::new(),
    };
    let widened = costs
        .into_iter()
        .map(|(field, value, limit)| (field, u64::from(value), u64::from(limit)));
    check_limits(scheme.name(), widened.collect())
}

/// The memory (bytes) [`hash`] allocates for a value of `scheme`: Argon2's default `m`, next
/// to nothing for the others it writes.
pub fn hash_memory_bytes(scheme: Scheme) -> u64 {
    match scheme {
        Scheme::Argon2 => u64::from(ARGON2_MEMORY_KIB_DEFAULT) * 1024,
        _ => 0,
    }
}

/// The memory (bytes) verifying `stored` allocates: Argon2's `m` KiB, scrypt's and yescrypt's
/// 128·N·r (+ 128·r·p); 0 for the schemes that need no more than a few KiB, and for values
/// that cannot be verified (nothing is computed for those). Callers bound how many of these
/// run at once by it: one bind's cost is bounded by [`check_cost`], many binds' by the caller.
pub fn verify_memory_bytes(stored: &[u8]) -> u64 {
    let Ok(scheme) = scheme_of(stored) else {
        return 0;
    };
    let payload = split_scheme(stored).1;
    match scheme {
        Scheme::Argon2 => argon2_params(payload)
            .map(|params| u64::from(params.m_cost()) * 1024)
            .unwrap_or(0),
        Scheme::Crypt => crypt_text(payload).map_or(0, crypt::memory_bytes),
        _ => 0,
    }
}

/// `CostTooHigh` for the first (field, value, limit) whose value is over its limit.
fn check_limits(
    scheme: &'static str,
    costs: Vec<(&'static str, u64, u64)>,
) -> Result<(), PasswordError> {
    for (field, value, limit) in costs {
        if value > limit {
            return Err(PasswordError::CostTooHigh {
                scheme,
                field,
                value,
                limit,
            });
        }
    }
    Ok(())
}

/// The iteration count of a PBKDF2 payload `iterations$salt$hash`.
fn pbkdf2_iterations(scheme: Scheme, payload: &[u8]) -> Result<u32, PasswordError> {
    let text = std::str::from_utf8(payload).map_err(|_| malformed(scheme, "not UTF-8"))?;
    let iterations_text = text.split('$').next().unwrap_or_default();
    let iterations: u32 = iterations_text.parse().map_err(|_| {
        malformed(
            scheme,
            format!("iterations '{iterations_text}' is not a number"),
        )
    })?;
    if iterations == 0 {
        return Err(malformed(scheme, "iterations is 0"));
    }
    Ok(iterations)
}

/// The parameters of an Argon2 PHC string.
fn argon2_params(payload: &[u8]) -> Result<argon2::Params, PasswordError> {
    let scheme = Scheme::Argon2;
    let text = std::str::from_utf8(payload).map_err(|_| malformed(scheme, "not UTF-8"))?;
    let parsed = argon2::PasswordHash::new(text)
        .map_err(|error| malformed(scheme, format!("PHC string: {error}")))?;
    argon2::Params::try_from(&parsed)
        .map_err(|error| malformed(scheme, format!("parameters: {error}")))
}

/// Makes a new stored value `{SCHEME}...` for `password` with a fresh random salt.
pub fn hash(scheme: Scheme, password: &[u8]) -> Result<Vec<u8>, PasswordError> {
    if password.len() > PASSWORD_LENGTH_BYTES_MAX {
        return Err(PasswordError::TooLong);
    }
    let payload = match scheme {
        Scheme::Ssha => hash_salted_digest::<Sha1>(password),
        Scheme::Ssha256 => hash_salted_digest::<Sha256>(password),
        Scheme::Ssha384 => hash_salted_digest::<Sha384>(password),
        Scheme::Ssha512 => hash_salted_digest::<Sha512>(password),
        Scheme::Pbkdf2Sha256 => hash_pbkdf2_sha256(password),
        Scheme::Argon2 => hash_argon2(password)?,
        Scheme::Crypt => hash_crypt_sha512(password)?,
        Scheme::Sha
        | Scheme::Sha256
        | Scheme::Sha384
        | Scheme::Sha512
        | Scheme::Smd5
        | Scheme::Md5
        | Scheme::Pbkdf2Sha1
        | Scheme::Pbkdf2Sha512
        | Scheme::Cleartext => return Err(PasswordError::VerifyOnlyScheme(scheme.name())),
    };
    let mut stored = Vec::with_capacity(scheme.name().len() + 2 + payload.len());
    stored.push(b'{');
    stored.extend_from_slice(scheme.name().as_bytes());
    stored.push(b'}');
    stored.extend_from_slice(payload.as_bytes());
    Ok(stored)
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// Standard base64 that accepts values with or without `=` padding (some tools drop it).
const BASE64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn malformed(scheme: Scheme, reason: impl Into<String>) -> PasswordError {
    PasswordError::Malformed {
        scheme: scheme.name(),
        reason: reason.into(),
    }
}

fn decode_base64(scheme: Scheme, payload: &[u8]) -> Result<Vec<u8>, PasswordError> {
    BASE64_LENIENT
        .decode(payload)
        .map_err(|error| malformed(scheme, format!("base64: {error}")))
}

/// `{SSHA}`-style: base64(digest(password ‖ salt) ‖ salt), salt at least one byte.
fn verify_salted_digest<D: Digest>(
    scheme: Scheme,
    payload: &[u8],
    presented: &[u8],
) -> Result<bool, PasswordError> {
    let decoded = decode_base64(scheme, payload)?;
    let digest_length = <D as Digest>::output_size();
    if decoded.len() <= digest_length {
        return Err(malformed(
            scheme,
            format!(
                "{} bytes decoded, needs more than the {digest_length}-byte digest",
                decoded.len()
            ),
        ));
    }
    let (expected, salt) = decoded.split_at(digest_length);
    let mut hasher = D::new();
    hasher.update(presented);
    hasher.update(salt);
    let computed = hasher.finalize();
    Ok(bool::from(computed.as_slice().ct_eq(expected)))
}

/// `{SHA}`-style: base64(digest(password)).
fn verify_digest<D: Digest>(
    scheme: Scheme,
    payload: &[u8],
    presented: &[u8],
) -> Result<bool, PasswordError> {
    let decoded = decode_base64(scheme, payload)?;
    let digest_length = <D as Digest>::output_size();
    if decoded.len() != digest_length {
        return Err(malformed(
            scheme,
            format!(
                "{} bytes decoded, the digest is {digest_length}",
                decoded.len()
            ),
        ));
    }
    let computed = D::digest(presented);
    Ok(bool::from(computed.as_slice().ct_eq(&decoded)))
}

fn hash_salted_digest<D: Digest>(password: &[u8]) -> String {
    let salt = random_bytes::<DIGEST_SALT_LENGTH_BYTES>();
    let mut hasher = D::new();
    hasher.update(password);
    hasher.update(salt);
    let mut raw = hasher.finalize().to_vec();
    raw.extend_from_slice(&salt);
    STANDARD.encode(raw)
}

/// OpenLDAP's "adapted base64" for PBKDF2: `.` stands for `+`, no `=` padding.
fn decode_adapted_base64(
    scheme: Scheme,
    field: &str,
    text: &str,
) -> Result<Vec<u8>, PasswordError> {
    let standard: String = text
        .chars()
        .map(|character| if character == '.' { '+' } else { character })
        .collect();
    BASE64_LENIENT
        .decode(standard.as_bytes())
        .map_err(|error| malformed(scheme, format!("{field}: base64: {error}")))
}

fn encode_adapted_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD_NO_PAD
        .encode(bytes)
        .replace('+', ".")
}

/// `{PBKDF2-SHAx}iterations$salt$hash` (pw-pbkdf2); the hash length is the digest length.
fn verify_pbkdf2<D>(scheme: Scheme, payload: &[u8], presented: &[u8]) -> Result<bool, PasswordError>
where
    D: Digest + pbkdf2::hmac::EagerHash,
{
    let text = std::str::from_utf8(payload).map_err(|_| malformed(scheme, "not UTF-8"))?;
    let mut fields = text.split('$');
    let (Some(_), Some(salt_text), Some(hash_text), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(malformed(scheme, "expected iterations$salt$hash"));
    };
    let iterations = pbkdf2_iterations(scheme, payload)?;
    let salt = decode_adapted_base64(scheme, "salt", salt_text)?;
    let expected = decode_adapted_base64(scheme, "hash", hash_text)?;
    let digest_length = <D as Digest>::output_size();
    if expected.len() != digest_length {
        return Err(malformed(
            scheme,
            format!(
                "hash is {} bytes, the digest is {digest_length}",
                expected.len()
            ),
        ));
    }
    let mut computed = vec![0u8; digest_length];
    pbkdf2::pbkdf2_hmac::<D>(presented, &salt, iterations, &mut computed);
    Ok(bool::from(computed.ct_eq(&expected)))
}

fn hash_pbkdf2_sha256(password: &[u8]) -> String {
    let salt = random_bytes::<KDF_SALT_LENGTH_BYTES>();
    let mut derived = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password, &salt, PBKDF2_ITERATIONS_DEFAULT, &mut derived);
    format!(
        "{PBKDF2_ITERATIONS_DEFAULT}${}${}",
        encode_adapted_base64(&salt),
        encode_adapted_base64(&derived)
    )
}

/// `{ARGON2}$argon2id$v=19$m=..,t=..,p=..$salt$hash` (PHC string; argon2i/argon2d too).
fn verify_argon2(payload: &[u8], presented: &[u8]) -> Result<bool, PasswordError> {
    use argon2::{PasswordHash, PasswordVerifier};
    let scheme = Scheme::Argon2;
    let text = std::str::from_utf8(payload).map_err(|_| malformed(scheme, "not UTF-8"))?;
    let parsed = PasswordHash::new(text)
        .map_err(|error| malformed(scheme, format!("PHC string: {error}")))?;
    match argon2::Argon2::default().verify_password(presented, &parsed) {
        Ok(()) => Ok(true),
        Err(argon2::password_hash::Error::PasswordInvalid) => Ok(false),
        Err(error) => Err(malformed(scheme, format!("{error}"))),
    }
}

fn hash_argon2(password: &[u8]) -> Result<String, PasswordError> {
    use argon2::PasswordHasher;
    let failed = |error: &dyn std::fmt::Display| PasswordError::HashFailed {
        scheme: Scheme::Argon2.name(),
        reason: error.to_string(),
    };
    let params = argon2::Params::new(ARGON2_MEMORY_KIB_DEFAULT, ARGON2_TIME_COST_DEFAULT, 1, None)
        .map_err(|error| failed(&error))?;
    let hasher = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    let salt = random_bytes::<KDF_SALT_LENGTH_BYTES>();
    let phc = hasher
        .hash_password_with_salt(password, &salt)
        .map_err(|error| failed(&error))?;
    Ok(phc.to_string())
}

/// The crypt(3) string of a `{CRYPT}` payload.
fn crypt_text(payload: &[u8]) -> Result<&str, PasswordError> {
    std::str::from_utf8(payload).map_err(|_| malformed(Scheme::Crypt, "not UTF-8"))
}

/// `{CRYPT}` + any crypt(3) format libxcrypt makes (see [`CryptFormat`]).
fn verify_crypt(payload: &[u8], presented: &[u8]) -> Result<bool, PasswordError> {
    crypt::verify(crypt_text(payload)?, presented)
}

fn hash_crypt_sha512(password: &[u8]) -> Result<String, PasswordError> {
    use sha_crypt::password_hash::PasswordHasher;
    let salt = random_bytes::<CRYPT_SALT_LENGTH_BYTES>();
    let mcf = sha_crypt::ShaCrypt::SHA512
        .hash_password_with_salt(password, &salt)
        .map_err(|error| PasswordError::HashFailed {
            scheme: Scheme::Crypt.name(),
            reason: error.to_string(),
        })?;
    Ok(mcf.to_string())
}
