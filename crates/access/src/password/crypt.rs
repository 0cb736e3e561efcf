//! `{CRYPT}`: every crypt(3) format Debian's libxcrypt makes (`mkpasswd -m help`), as slapd
//! verifies them through libxcrypt's crypt(). The algorithms come from maintained crates
//! (sha-crypt, bcrypt, yescrypt, scrypt, streebog, md4, pwhash); this module holds the format
//! glue: recognising a format, reading its cost before computing anything, and libxcrypt's own
//! encodings of `$7$` (scrypt), `$gy$` (gost-yescrypt), `$3$` (NT) and `$md5` (SunMD5), which
//! no crate covers.

use super::{CostLimits, PasswordError};
use hmac::{KeyInit, Mac, SimpleHmac};
use md5::{Digest, Md5};
use streebog::Streebog256;
use subtle::ConstantTimeEq;

/// The crypt(3) alphabet: `./0-9A-Za-z`, value = index.
const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// libxcrypt's crypt() output for one format: the method's own base64, 32-byte digests.
const KDF_OUTPUT_BYTES: usize = 32;

/// A crypt(3) format, named as `mkpasswd -m` names the method that makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CryptFormat {
    /// Traditional 13-character DES.
    Des,
    /// BSDi extended DES, `_` + count + salt.
    Bsdi,
    /// `$1$`.
    Md5,
    /// `$2a$`, `$2b$`, `$2y$`.
    Bcrypt,
    /// `$5$`.
    Sha256,
    /// `$6$`.
    Sha512,
    /// `$md5$` / `$md5,rounds=N$` (Solaris).
    SunMd5,
    /// `$3$$` + hex MD4 (NT hash).
    Nt,
    /// `$7$` (libxcrypt's scrypt encoding).
    Scrypt,
    /// `$y$`.
    Yescrypt,
    /// `$gy$`.
    GostYescrypt,
}

impl CryptFormat {
    /// Every format, for listings and counts.
    pub const ALL: [CryptFormat; 11] = [
        CryptFormat::Des,
        CryptFormat::Bsdi,
        CryptFormat::Md5,
        CryptFormat::Bcrypt,
        CryptFormat::Sha256,
        CryptFormat::Sha512,
        CryptFormat::SunMd5,
        CryptFormat::Nt,
        CryptFormat::Scrypt,
        CryptFormat::Yescrypt,
        CryptFormat::GostYescrypt,
    ];

    /// `mkpasswd -m` method name of the format.
    pub fn name(self) -> &'static str {
        match self {
            CryptFormat::Des => "descrypt",
            CryptFormat::Bsdi => "bsdicrypt",
            CryptFormat::Md5 => "md5crypt",
            CryptFormat::Bcrypt => "bcrypt",
            CryptFormat::Sha256 => "sha256crypt",
            CryptFormat::Sha512 => "sha512crypt",
            CryptFormat::SunMd5 => "sunmd5",
            CryptFormat::Nt => "nt",
            CryptFormat::Scrypt => "scrypt",
            CryptFormat::Yescrypt => "yescrypt",
            CryptFormat::GostYescrypt => "gost-yescrypt",
        }
    }

    /// `CRYPT/<method>`: the label errors, logs and `lmdir check` use.
    pub fn label(self) -> &'static str {
        match self {
            CryptFormat::Des => "CRYPT/descrypt",
            CryptFormat::Bsdi => "CRYPT/bsdicrypt",
            CryptFormat::Md5 => "CRYPT/md5crypt",
            CryptFormat::Bcrypt => "CRYPT/bcrypt",
            CryptFormat::Sha256 => "CRYPT/sha256crypt",
            CryptFormat::Sha512 => "CRYPT/sha512crypt",
            CryptFormat::SunMd5 => "CRYPT/sunmd5",
            CryptFormat::Nt => "CRYPT/nt",
            CryptFormat::Scrypt => "CRYPT/scrypt",
            CryptFormat::Yescrypt => "CRYPT/yescrypt",
            CryptFormat::GostYescrypt => "CRYPT/gost-yescrypt",
        }
    }

    /// The format of a crypt(3) string, by its prefix (DES by its length and alphabet).
    pub fn of(text: &str) -> Option<CryptFormat> {
        const PREFIXES: [(&str, CryptFormat); 12] = [
            ("$1$", CryptFormat::Md5),
            ("$2a$", CryptFormat::Bcrypt),
            ("$2b$", CryptFormat::Bcrypt),
            ("$2y$", CryptFormat::Bcrypt),
            ("$5$", CryptFormat::Sha256),
            ("$6$", CryptFormat::Sha512),
            ("$md5$", CryptFormat::SunMd5),
            ("$md5,", CryptFormat::SunMd5),
            ("$3$", CryptFormat::Nt),
            ("$7$", CryptFormat::Scrypt),
            ("$y$", CryptFormat::Yescrypt),
            ("$gy$", CryptFormat::GostYescrypt),
        ];
        if let Some((_, format)) = PREFIXES.iter().find(|(prefix, _)| text.starts_with(prefix)) {
            return Some(*format);
        }
        if text.starts_with('_') {
            return Some(CryptFormat::Bsdi);
        }
        (text.len() == 13 && is_itoa64(text)).then_some(CryptFormat::Des)
    }
}

/// Reads the format of `text`, or says it is none libxcrypt makes.
pub(super) fn format_of(text: &str) -> Result<CryptFormat, PasswordError> {
    CryptFormat::of(text).ok_or_else(|| PasswordError::Malformed {
        scheme: "CRYPT",
        reason: "not a crypt(3) format lmdir verifies (those Debian's mkpasswd makes)".to_string(),
    })
}

fn malformed(format: CryptFormat, reason: impl Into<String>) -> PasswordError {
    PasswordError::Malformed {
        scheme: format.label(),
        reason: reason.into(),
    }
}

fn is_itoa64(text: &str) -> bool {
    text.bytes().all(|byte| ITOA64.contains(&byte))
}

fn atoi64(byte: u8) -> Option<u64> {
    ITOA64
        .iter()
        .position(|&candidate| candidate == byte)
        .map(|index| index as u64)
}

/// Little-endian base-64 number of `digits` characters (BSDi's count, scrypt's r and p).
fn decode_le_number(format: CryptFormat, field: &str, digits: &[u8]) -> Result<u64, PasswordError> {
    digits.iter().rev().try_fold(0u64, |value, &digit| {
        atoi64(digit)
            .map(|six_bits| (value << 6) | six_bits)
            .ok_or_else(|| malformed(format, format!("{field} is not crypt base64")))
    })
}

/// The memory (bytes) verifying a stored crypt string allocates: scrypt's and yescrypt's
/// 128·N·r for the big array plus 128·r·p for the blocks; 0 for the others (a few KiB at
/// most) and for strings that do not parse.
pub(super) fn memory_bytes(text: &str) -> u64 {
    let Ok(format) = format_of(text) else {
        return 0;
    };
    let (n, r, p) = match format {
        CryptFormat::Scrypt => match scrypt_parts(text) {
            Ok(parts) => (
                1u128 << parts.log_n,
                u128::from(parts.r),
                u128::from(parts.p),
            ),
            Err(_) => return 0,
        },
        CryptFormat::Yescrypt | CryptFormat::GostYescrypt => match yescrypt_parts(format, text) {
            Ok(parts) => (
                u128::from(parts.params.n()),
                u128::from(parts.params.r()),
                u128::from(parts.params.p()),
            ),
            Err(_) => return 0,
        },
        _ => return 0,
    };
    saturating_u64(128 * r * (n + p))
}

/// What a stored crypt string costs to verify, as (field, value, limit) for each bounded field.
pub(super) fn costs(
    text: &str,
    limits: &CostLimits,
) -> Result<Vec<(&'static str, u64, u64)>, PasswordError> {
    let format = format_of(text)?;
    let rounds = u64::from(limits.crypt_rounds);
    Ok(match format {
        CryptFormat::Sha256 | CryptFormat::Sha512 => sha_crypt_rounds(format, text)?
            .map(|value| vec![("rounds", value, rounds)])
            .unwrap_or_default(),
        CryptFormat::SunMd5 => vec![("rounds", sun_md5_parts(text)?.rounds, rounds)],
        CryptFormat::Bsdi => vec![("rounds", bsdi_count(text)?, rounds)],
        CryptFormat::Bcrypt => vec![("cost", bcrypt_cost(text)?, u64::from(limits.bcrypt_cost))],
        CryptFormat::Scrypt => {
            let parts = scrypt_parts(text)?;
            let work = (1u128 << parts.log_n) * u128::from(parts.r) * u128::from(parts.p);
            vec![("N*r*p", saturating_u64(work), limits.scrypt_work)]
        }
        CryptFormat::Yescrypt | CryptFormat::GostYescrypt => {
            let parts = yescrypt_parts(format, text)?;
            let params = &parts.params;
            let work = u128::from(params.n()) * u128::from(params.r()) * u128::from(params.p());
            vec![
                ("N*r*p", saturating_u64(work), limits.scrypt_work),
                (
                    "t",
                    yescrypt_time(params, limits),
                    u64::from(limits.yescrypt_time),
                ),
            ]
        }
        CryptFormat::Md5 => {
            md5_hash(text)?;
            Vec::new()
        }
        CryptFormat::Nt => {
            nt_hex(text)?;
            Vec::new()
        }
        CryptFormat::Des => Vec::new(),
    })
}

fn saturating_u64(value: u128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// Whether `presented` is the password the crypt string `text` describes. As slapd's
/// `{CRYPT}` (crypt() takes a C string), a password with a NUL byte never matches.
pub(super) fn verify(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    let format = format_of(text)?;
    if presented.contains(&0) {
        return Ok(false);
    }
    check_password_work(format, text, presented)?;
    match format {
        CryptFormat::Des => verify_des(text, presented),
        CryptFormat::Bsdi => verify_bsdi(text, presented),
        CryptFormat::Md5 => verify_md5(text, presented),
        CryptFormat::Bcrypt => verify_bcrypt(text, presented),
        CryptFormat::Sha256 | CryptFormat::Sha512 => verify_sha_crypt(format, text, presented),
        CryptFormat::SunMd5 => verify_sun_md5(text, presented),
        CryptFormat::Nt => verify_nt(text, presented),
        CryptFormat::Scrypt => verify_scrypt(text, presented),
        CryptFormat::Yescrypt => verify_yescrypt(text, presented),
        CryptFormat::GostYescrypt => verify_gost_yescrypt(text, presented),
    }
}

fn verify_des(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    // `of` only answers Des for 13 crypt-alphabet characters.
    Ok(pwhash::unix_crypt::verify(presented, text))
}

/// `_` + 4 count characters + 4 salt characters + 11 hash characters.
fn bsdi_count(text: &str) -> Result<u64, PasswordError> {
    let format = CryptFormat::Bsdi;
    if text.len() != 20 || !is_itoa64(&text[1..]) {
        return Err(malformed(
            format,
            "expected _ and 19 crypt-alphabet characters",
        ));
    }
    let count = decode_le_number(format, "count", &text.as_bytes()[1..5])?;
    if count == 0 {
        return Err(malformed(format, "count is 0"));
    }
    Ok(count)
}

fn verify_bsdi(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    bsdi_count(text)?;
    Ok(pwhash::bsdi_crypt::verify(presented, text))
}

/// `$1$` + up to 8 salt characters + `$` + 22 hash characters.
fn md5_hash(text: &str) -> Result<&str, PasswordError> {
    let format = CryptFormat::Md5;
    let Some((salt, hash)) = text[3..].split_once('$') else {
        return Err(malformed(format, "expected $1$salt$hash"));
    };
    if salt.len() > 8 || hash.len() != 22 || !is_itoa64(hash) {
        return Err(malformed(
            format,
            "expected up to 8 salt and 22 hash characters",
        ));
    }
    Ok(hash)
}

fn verify_md5(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    md5_hash(text)?;
    Ok(pwhash::md5_crypt::verify(presented, text))
}

/// The two-digit cost of `$2b$NN$` + 53 characters.
fn bcrypt_cost(text: &str) -> Result<u64, PasswordError> {
    let format = CryptFormat::Bcrypt;
    let bytes = text.as_bytes();
    if text.len() != 60 || bytes[6] != b'$' {
        return Err(malformed(format, "expected $2b$NN$ and 53 characters"));
    }
    text.get(4..6)
        .and_then(|digits| digits.parse::<u64>().ok())
        .filter(|cost| (4..=31).contains(cost))
        .ok_or_else(|| malformed(format, "cost is not a number from 04 to 31"))
}

fn verify_bcrypt(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    bcrypt_cost(text)?;
    bcrypt::verify(presented, text)
        .map_err(|error| malformed(CryptFormat::Bcrypt, error.to_string()))
}

/// Most bytes sha-crypt may hash over its rounds for one check: rounds × (password length +
/// 64), the work of the largest rounds verified ([`super::CRYPT_ROUNDS_MAX`]) with a 64-byte
/// password. sha-crypt hashes the whole password again in every round (and its square once),
/// so without this a 4 KiB password against a planted `rounds=100000` value cost ~60× the same
/// value's work for a real password: many core-seconds per bind attempt.
pub const SHA_CRYPT_WORK_BYTES_MAX: u64 = super::CRYPT_ROUNDS_MAX as u64 * 128;

/// Refuses, computing nothing, a check whose work grows past [`SHA_CRYPT_WORK_BYTES_MAX`]
/// with the presented password's length (sha-crypt only: the other formats read the password
/// once, or a bounded part of it).
fn check_password_work(
    format: CryptFormat,
    text: &str,
    presented: &[u8],
) -> Result<(), PasswordError> {
    if !matches!(format, CryptFormat::Sha256 | CryptFormat::Sha512) {
        return Ok(());
    }
    // sha-crypt raises fewer than 1,000 rounds to 1,000.
    let rounds = sha_crypt_rounds(format, text)?
        .unwrap_or(SHA_CRYPT_DEFAULT_ROUNDS)
        .max(1_000);
    let length = u64::try_from(presented.len()).unwrap_or(u64::MAX);
    let work = rounds.saturating_mul(length.saturating_add(64));
    if work > SHA_CRYPT_WORK_BYTES_MAX {
        return Err(PasswordError::CostTooHigh {
            scheme: format.name(),
            field: "rounds x (password bytes + 64)",
            value: work,
            limit: SHA_CRYPT_WORK_BYTES_MAX,
        });
    }
    Ok(())
}

/// sha-crypt's rounds when the string names none.
const SHA_CRYPT_DEFAULT_ROUNDS: u64 = 5_000;

/// The `rounds=` of a sha-crypt string, when given (the default is 5,000).
fn sha_crypt_rounds(format: CryptFormat, text: &str) -> Result<Option<u64>, PasswordError> {
    let Some(rounds_text) = text
        .get(3..)
        .and_then(|rest| rest.split('$').next())
        .and_then(|field| field.strip_prefix("rounds="))
    else {
        return Ok(None);
    };
    let rounds: u64 = rounds_text
        .parse()
        .map_err(|_| malformed(format, format!("rounds '{rounds_text}' is not a number")))?;
    Ok(Some(rounds))
}

fn verify_sha_crypt(
    format: CryptFormat,
    text: &str,
    presented: &[u8],
) -> Result<bool, PasswordError> {
    use sha_crypt::password_hash::PasswordVerifier;
    match sha_crypt::ShaCrypt::default().verify_password(presented, text) {
        Ok(()) => Ok(true),
        Err(sha_crypt::password_hash::Error::PasswordInvalid) => Ok(false),
        Err(error) => Err(malformed(format, error.to_string())),
    }
}

/// A SunMD5 string: the setting hashed first (everything before the last `$`), the extra
/// rounds and the 22-character hash.
struct SunMd5Parts<'a> {
    setting: &'a str,
    rounds: u64,
    hash: &'a str,
}

fn sun_md5_parts(text: &str) -> Result<SunMd5Parts<'_>, PasswordError> {
    let format = CryptFormat::SunMd5;
    let rounds = match text.strip_prefix("$md5,rounds=") {
        Some(rest) => {
            let digits = rest.split('$').next().unwrap_or_default();
            digits
                .parse::<u64>()
                .map_err(|_| malformed(format, format!("rounds '{digits}' is not a number")))?
        }
        None => 0,
    };
    let Some((setting, hash)) = text.rsplit_once('$') else {
        return Err(malformed(format, "no hash"));
    };
    if hash.len() != 22 || !is_itoa64(hash) {
        return Err(malformed(
            format,
            "the hash is not 22 crypt-alphabet characters",
        ));
    }
    Ok(SunMd5Parts {
        setting,
        rounds,
        hash,
    })
}

/// Hamlet's soliloquy with its C string's NUL: what SunMD5 mixes into a round on a coin flip.
const HAMLET: &[u8] = include_bytes!("hamlet.txt");

/// Bit `index` (mod 128) of a 16-byte digest, least significant bit of each byte first.
fn digest_bit(digest: &[u8; 16], index: usize) -> u8 {
    (digest[(index >> 3) & 15] >> (index & 7)) & 1
}

/// One of SunMD5's two 7-bit indexes: bit i is chosen by digest bytes `first + i` and
/// `second + i` (mod 16), as Muffett's algorithm does.
fn sun_md5_index(digest: &[u8; 16], first: usize, second: usize) -> usize {
    (0..7).fold(0usize, |index, i| {
        let a = digest[(first + i) & 15];
        let b = digest[(second + i) & 15];
        let v = digest[usize::from((a >> (b % 5)) & 15)] >> ((b >> (a & 7)) & 1);
        index | (usize::from(digest_bit(digest, usize::from(v))) << i)
    })
}

/// SunMD5: MD5(password ‖ setting), then 4096 + rounds rounds of MD5(previous ‖ [Hamlet
/// when the coin flip says so] ‖ decimal round number).
fn sun_md5_digest(parts: &SunMd5Parts<'_>, presented: &[u8]) -> [u8; 16] {
    let mut digest: [u8; 16] = Md5::new()
        .chain_update(presented)
        .chain_update(parts.setting.as_bytes())
        .finalize()
        .into();
    for round in 0..4096 + parts.rounds {
        let bit = usize::try_from(round % 128).unwrap_or_default();
        let shift_x = usize::from(digest_bit(&digest, bit));
        let shift_y = usize::from(digest_bit(&digest, bit + 64));
        let x = sun_md5_index(&digest, shift_x, 3 + shift_x);
        let y = sun_md5_index(&digest, 8 + shift_y, 11 + shift_y);
        let coin = digest_bit(&digest, x) ^ digest_bit(&digest, y);
        let mut hasher = Md5::new().chain_update(digest);
        if coin == 1 {
            hasher.update(HAMLET);
        }
        hasher.update(round.to_string().as_bytes());
        digest = hasher.finalize().into();
    }
    digest
}

fn verify_sun_md5(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    let parts = sun_md5_parts(text)?;
    let digest = sun_md5_digest(&parts, presented);
    // MD5-crypt's byte order: groups (0,6,12) … (4,10,5), then byte 11 alone.
    const GROUPS: [[usize; 3]; 5] = [[0, 6, 12], [1, 7, 13], [2, 8, 14], [3, 9, 15], [4, 10, 5]];
    let mut encoded = Vec::with_capacity(22);
    for [high, middle, low] in GROUPS {
        let value = (u32::from(digest[high]) << 16)
            | (u32::from(digest[middle]) << 8)
            | u32::from(digest[low]);
        push_itoa64(&mut encoded, value, 4);
    }
    push_itoa64(&mut encoded, u32::from(digest[11]), 2);
    Ok(bool::from(encoded.ct_eq(parts.hash.as_bytes())))
}

/// Appends `count` crypt-alphabet characters of `value`, least significant six bits first.
fn push_itoa64(out: &mut Vec<u8>, mut value: u32, count: usize) {
    for _ in 0..count {
        out.push(ITOA64[(value & 63) as usize]);
        value >>= 6;
    }
}

/// `$3$$` + 32 lowercase hex digits of MD4 over the password widened byte by byte to UTF-16LE
/// (libxcrypt's NT method does not decode UTF-8).
fn nt_hex(text: &str) -> Result<&str, PasswordError> {
    let format = CryptFormat::Nt;
    text.strip_prefix("$3$$")
        .filter(|hex| {
            hex.len() == 32
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        .ok_or_else(|| malformed(format, "expected $3$$ and 32 lowercase hex digits"))
}

fn verify_nt(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    let hex = nt_hex(text)?;
    let widened: Vec<u8> = presented.iter().flat_map(|&byte| [byte, 0]).collect();
    let digest = md4::Md4::digest(&widened);
    let computed: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    Ok(bool::from(computed.as_bytes().ct_eq(hex.as_bytes())))
}

/// A `$7$` string: N = 2^log_n (one character), r and p (five characters each, little-endian),
/// the salt (used as its characters, not decoded) and the 43-character hash.
struct ScryptParts<'a> {
    log_n: u8,
    r: u32,
    p: u32,
    salt: &'a str,
    hash: &'a str,
}

fn scrypt_parts(text: &str) -> Result<ScryptParts<'_>, PasswordError> {
    let format = CryptFormat::Scrypt;
    let bytes = text.as_bytes();
    let (Some(setting), Some((salt, hash))) = (
        bytes.get(3..14),
        text.get(14..).and_then(|rest| rest.rsplit_once('$')),
    ) else {
        return Err(malformed(
            format,
            "expected $7$, 11 parameter characters, salt$hash",
        ));
    };
    let log_n = atoi64(setting[0])
        .and_then(|value| u8::try_from(value).ok())
        .filter(|&value| (1..=63).contains(&value))
        .ok_or_else(|| malformed(format, "N is not a power of two from 2 to 2^63"))?;
    let r = decode_le_number(format, "r", &setting[1..6])?;
    let p = decode_le_number(format, "p", &setting[6..11])?;
    let (Ok(r), Ok(p)) = (u32::try_from(r), u32::try_from(p)) else {
        return Err(malformed(format, "r or p out of range"));
    };
    if r == 0 || p == 0 || hash.len() != 43 || !is_itoa64(hash) {
        return Err(malformed(
            format,
            "r or p is 0, or the hash is not 43 characters",
        ));
    }
    Ok(ScryptParts {
        log_n,
        r,
        p,
        salt,
        hash,
    })
}

fn verify_scrypt(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    let format = CryptFormat::Scrypt;
    let parts = scrypt_parts(text)?;
    let params = scrypt::Params::new(parts.log_n, parts.r, parts.p)
        .map_err(|error| malformed(format, error.to_string()))?;
    let mut computed = [0u8; KDF_OUTPUT_BYTES];
    scrypt::scrypt(presented, parts.salt.as_bytes(), &params, &mut computed)
        .map_err(|error| malformed(format, error.to_string()))?;
    let encoded = mcf::Base64::Crypt.encode_string(&computed);
    Ok(bool::from(encoded.as_bytes().ct_eq(parts.hash.as_bytes())))
}

/// A yescrypt string's parameters, decoded salt and hash, and (for `$gy$`) the length of the
/// setting the GOST HMAC covers.
struct YescryptParts {
    params: yescrypt::Params,
    salt: Vec<u8>,
    hash: Vec<u8>,
    setting_length: usize,
}

fn yescrypt_parts(format: CryptFormat, text: &str) -> Result<YescryptParts, PasswordError> {
    // `$gy$` carries a yescrypt setting after its own prefix.
    let body = text
        .strip_prefix("$y$")
        .or_else(|| text.strip_prefix("$gy$"))
        .ok_or_else(|| malformed(format, "no $y$ or $gy$ prefix"))?;
    let mut fields = body.split('$');
    let (Some(params_text), Some(salt_text), Some(hash_text), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(malformed(format, "expected params$salt$hash"));
    };
    let params: yescrypt::Params = params_text
        .parse()
        .map_err(|error| malformed(format, format!("parameters: {error}")))?;
    let decode = |field: &str, value: &str| {
        mcf::Base64::Crypt
            .decode_vec(value)
            .map_err(|error| malformed(format, format!("{field}: {error}")))
    };
    let hash = decode("hash", hash_text)?;
    if hash.len() != KDF_OUTPUT_BYTES {
        return Err(malformed(format, "the hash is not 32 bytes"));
    }
    Ok(YescryptParts {
        params,
        salt: decode("salt", salt_text)?,
        hash,
        setting_length: text.len() - hash_text.len() - 1,
    })
}

/// yescrypt's `t` (extra time at the same memory), which its parameters do not expose:
/// found by comparing with parameters built for each t up to the limit; over it answers
/// limit + 1.
fn yescrypt_time(params: &yescrypt::Params, limits: &CostLimits) -> u64 {
    use yescrypt::{Mode, Params};
    (0..=limits.yescrypt_time)
        .find(|&t| {
            [Mode::Classic, Mode::Worm, Mode::Rw]
                .into_iter()
                .any(|mode| {
                    Params::new_with_all_params(mode, params.n(), params.r(), params.p(), t, 0)
                        .is_ok_and(|candidate| candidate == *params)
                })
        })
        .map_or(u64::from(limits.yescrypt_time) + 1, u64::from)
}

fn yescrypt_raw(
    format: CryptFormat,
    parts: &YescryptParts,
    presented: &[u8],
) -> Result<[u8; KDF_OUTPUT_BYTES], PasswordError> {
    let mut computed = [0u8; KDF_OUTPUT_BYTES];
    yescrypt::yescrypt(presented, &parts.salt, &parts.params, &mut computed)
        .map_err(|error| malformed(format, error.to_string()))?;
    Ok(computed)
}

fn verify_yescrypt(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    let format = CryptFormat::Yescrypt;
    let parts = yescrypt_parts(format, text)?;
    let computed = yescrypt_raw(format, &parts, presented)?;
    Ok(bool::from(computed.ct_eq(&parts.hash)))
}

/// `$gy$`: HMAC-Streebog-256 keyed with HMAC-Streebog-256(Streebog-256(password), setting)
/// over the yescrypt output of the same setting.
fn verify_gost_yescrypt(text: &str, presented: &[u8]) -> Result<bool, PasswordError> {
    let format = CryptFormat::GostYescrypt;
    let parts = yescrypt_parts(format, text)?;
    let yescrypt_output = yescrypt_raw(format, &parts, presented)?;
    let hmac = |key: &[u8], message: &[u8]| -> Result<Vec<u8>, PasswordError> {
        let mut mac = <SimpleHmac<Streebog256> as KeyInit>::new_from_slice(key)
            .map_err(|error| malformed(format, error.to_string()))?;
        mac.update(message);
        Ok(mac.finalize().into_bytes().to_vec())
    };
    let password_digest = Streebog256::digest(presented);
    let setting = &text.as_bytes()[..parts.setting_length];
    let key = hmac(&password_digest, setting)?;
    let computed = hmac(&key, &yescrypt_output)?;
    Ok(bool::from(computed.ct_eq(&parts.hash)))
}
