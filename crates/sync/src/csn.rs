//! OpenLDAP's change sequence number (CSN): `YYYYmmddHHMMSS.uuuuuuZ#cccccc#sss#mmmmmm`, the UTC time
//! to the microsecond, a `%06x` count of changes within that microsecond, the `%03x` server ID
//! (0..=4095) and a `%06x` modification number. All fields are fixed width, so OpenLDAP orders CSNs
//! by comparing their text; [`Csn`]'s derived order (time, count, sid, modification) is the same.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};
use time::{Date, Month, OffsetDateTime, Time};

/// The largest server ID OpenLDAP accepts (`serverID` ≤ 4095, three hex digits).
pub const SID_MAX: u16 = 0xfff;
/// The largest change count within one microsecond (six hex digits).
pub const COUNT_MAX: u32 = 0xff_ffff;
/// The largest modification number (six hex digits).
pub const MODIFICATION_MAX: u32 = 0xff_ffff;
/// Every CSN's text is exactly this long.
pub const CSN_TEXT_BYTES: usize = 40;

/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z: the times four year digits can hold.
const MICROS_MIN: i64 = -62_167_219_200 * 1_000_000;
const MICROS_MAX: i64 = 253_402_300_799 * 1_000_000 + 999_999;

/// One CSN. Fields are private so every value is in range; order is OpenLDAP's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Csn {
    /// Microseconds since the Unix epoch, UTC, within years 0000..=9999.
    micros: i64,
    count: u32,
    sid: u16,
    modification: u32,
}

/// Why a CSN was refused; `field` names the part of the text (or the argument) at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsnError {
    #[error("CSN must be exactly {CSN_TEXT_BYTES} bytes, found {0}")]
    Length(usize),
    #[error("CSN {field}: {reason}")]
    Field {
        field: &'static str,
        reason: &'static str,
    },
    #[error("CSN generator exhausted: the clock is at 9999-12-31T23:59:59.999999Z and the count at its maximum")]
    Exhausted,
}

fn field_error(field: &'static str, reason: &'static str) -> CsnError {
    CsnError::Field { field, reason }
}

impl Csn {
    /// A CSN from its parts; each is checked against its field's range.
    pub fn new(micros: i64, count: u32, sid: u16, modification: u32) -> Result<Csn, CsnError> {
        if !(MICROS_MIN..=MICROS_MAX).contains(&micros) {
            return Err(field_error("time", "outside years 0000..=9999"));
        }
        if count > COUNT_MAX {
            return Err(field_error("count", "above 0xffffff"));
        }
        if sid > SID_MAX {
            return Err(field_error("sid", "above 0xfff"));
        }
        if modification > MODIFICATION_MAX {
            return Err(field_error("mod", "above 0xffffff"));
        }
        Ok(Csn {
            micros,
            count,
            sid,
            modification,
        })
    }

    pub fn micros(&self) -> i64 {
        self.micros
    }
    pub fn count(&self) -> u32 {
        self.count
    }
    pub fn sid(&self) -> u16 {
        self.sid
    }
    pub fn modification(&self) -> u32 {
        self.modification
    }

    /// Parses CSN text exactly as OpenLDAP (2.4 and later) writes it; anything else is refused
    /// with the offending field named. Lowercase hex only: OpenLDAP compares CSNs as octet
    /// strings, so an uppercase variant would be a different, mis-ordered value.
    pub fn parse(text: &[u8]) -> Result<Csn, CsnError> {
        if text.len() != CSN_TEXT_BYTES {
            return Err(CsnError::Length(text.len()));
        }
        for (position, separator, field) in [
            (14, b'.', "separator before microseconds"),
            (21, b'Z', "time zone"),
            (22, b'#', "separator before count"),
            (29, b'#', "separator before sid"),
            (33, b'#', "separator before mod"),
        ] {
            if text[position] != separator {
                return Err(field_error(field, "unexpected character"));
            }
        }
        let year = decimal(&text[0..4], "year")?;
        let month = decimal(&text[4..6], "month")?;
        let day = decimal(&text[6..8], "day")?;
        let hour = decimal(&text[8..10], "hour")?;
        let minute = decimal(&text[10..12], "minute")?;
        let second = decimal(&text[12..14], "second")?;
        let microsecond = decimal(&text[15..21], "microseconds")?;
        let seconds = unix_seconds(year, month, day, hour, minute, second)?;
        Csn::new(
            seconds * 1_000_000 + i64::from(microsecond),
            hex(&text[23..29], "count")?,
            hex(&text[30..33], "sid")? as u16,
            hex(&text[34..40], "mod")?,
        )
    }
}

/// Fixed-width decimal digits.
fn decimal(digits: &[u8], field: &'static str) -> Result<u32, CsnError> {
    digits.iter().try_fold(0u32, |value, &byte| match byte {
        b'0'..=b'9' => Ok(value * 10 + u32::from(byte - b'0')),
        _ => Err(field_error(field, "expected decimal digits")),
    })
}

/// Fixed-width lowercase hex digits.
fn hex(digits: &[u8], field: &'static str) -> Result<u32, CsnError> {
    digits.iter().try_fold(0u32, |value, &byte| {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            _ => return Err(field_error(field, "expected lowercase hex digits")),
        };
        Ok(value * 16 + u32::from(digit))
    })
}

fn unix_seconds(
    year: u32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
) -> Result<i64, CsnError> {
    let month = u8::try_from(month)
        .ok()
        .and_then(|month| Month::try_from(month).ok())
        .ok_or_else(|| field_error("month", "not 01..=12"))?;
    // Four digits always fit an i32 and u8 below; the ranges are checked by `time`.
    let date = Date::from_calendar_date(year as i32, month, day as u8)
        .map_err(|_| field_error("day", "not a day of that month"))?;
    let time = Time::from_hms(hour as u8, minute as u8, second as u8)
        .map_err(|_| field_error("time of day", "hour, minute or second out of range"))?;
    Ok(date.with_time(time).assume_utc().unix_timestamp())
}

impl FromStr for Csn {
    type Err = CsnError;
    fn from_str(text: &str) -> Result<Csn, CsnError> {
        Csn::parse(text.as_bytes())
    }
}

impl fmt::Display for Csn {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.micros.div_euclid(1_000_000);
        let microsecond = self.micros.rem_euclid(1_000_000);
        // In range by construction (years 0000..=9999), which `time` represents.
        let moment = OffsetDateTime::from_unix_timestamp(seconds).map_err(|_| fmt::Error)?;
        // Digits into a fixed buffer (every field is fixed width): `write!` with ten padded
        // fields cost ~3,800 instructions per CSN, and a bulk load formats one per entry.
        let mut text = *b"00000000000000.000000Z#000000#000#000000";
        put_digits(&mut text[0..4], moment.year().unsigned_abs(), 10);
        put_digits(&mut text[4..6], u32::from(u8::from(moment.month())), 10);
        put_digits(&mut text[6..8], u32::from(moment.day()), 10);
        put_digits(&mut text[8..10], u32::from(moment.hour()), 10);
        put_digits(&mut text[10..12], u32::from(moment.minute()), 10);
        put_digits(&mut text[12..14], u32::from(moment.second()), 10);
        put_digits(&mut text[15..21], microsecond as u32, 10);
        put_digits(&mut text[23..29], self.count, 16);
        put_digits(&mut text[30..33], u32::from(self.sid), 16);
        put_digits(&mut text[34..40], self.modification, 16);
        formatter.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

/// `value`'s last `out.len()` digits in `radix` (lowercase hex), zero-padded.
fn put_digits(out: &mut [u8], mut value: u32, radix: u32) {
    for digit in out.iter_mut().rev() {
        *digit = b"0123456789abcdef"[(value % radix) as usize];
        value /= radix;
    }
}

/// Hands out strictly increasing CSNs for one server ID. A later call in the same microsecond
/// (or with a clock that went backwards) keeps the last time and adds one to the count; when the
/// count is full the time moves on by one microsecond. So CSNs never go backwards, whatever the
/// clock does, as OpenLDAP requires of entryCSN/contextCSN.
#[derive(Debug, Clone)]
pub struct CsnGenerator {
    sid: u16,
    last: Option<Csn>,
}

impl CsnGenerator {
    pub fn new(sid: u16) -> Result<CsnGenerator, CsnError> {
        Csn::new(0, 0, sid, 0)?;
        Ok(CsnGenerator { sid, last: None })
    }

    /// A generator whose CSNs all sort after `last` (this server's contextCSN at start-up), so a
    /// restart on a clock that is behind never reissues an old CSN.
    pub fn resuming_after(sid: u16, last: Csn) -> Result<CsnGenerator, CsnError> {
        let mut generator = CsnGenerator::new(sid)?;
        generator.last = Some(last);
        Ok(generator)
    }

    pub fn sid(&self) -> u16 {
        self.sid
    }

    /// The next CSN for the wall-clock time `now`.
    pub fn next(&mut self, now: SystemTime) -> Result<Csn, CsnError> {
        let micros = match now.duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_micros())
                .map(|micros| -micros)
                .unwrap_or(i64::MIN),
        };
        self.next_at_micros(micros)
    }

    /// The next CSN for a clock reading in microseconds since the Unix epoch; readings outside
    /// years 0000..=9999 are clamped into them.
    pub fn next_at_micros(&mut self, micros: i64) -> Result<Csn, CsnError> {
        let micros = micros.clamp(MICROS_MIN, MICROS_MAX);
        let (micros, count) = match self.last {
            Some(last) if micros <= last.micros => {
                if last.count < COUNT_MAX {
                    (last.micros, last.count + 1)
                } else if last.micros < MICROS_MAX {
                    (last.micros + 1, 0)
                } else {
                    return Err(CsnError::Exhausted);
                }
            }
            _ => (micros, 0),
        };
        let csn = Csn::new(micros, count, self.sid, 0)?;
        self.last = Some(csn);
        Ok(csn)
    }
}

#[cfg(test)]
mod tests {
    /// The digit-by-digit text equals `write!` with padded fields (the oracle), at both ends
    /// of the time range and across every field's range.
    #[test]
    fn text_equals_padded_formatting() {
        let oracle = |csn: &Csn| {
            let moment =
                OffsetDateTime::from_unix_timestamp(csn.micros.div_euclid(1_000_000)).unwrap();
            format!(
                "{:04}{:02}{:02}{:02}{:02}{:02}.{:06}Z#{:06x}#{:03x}#{:06x}",
                moment.year(),
                u8::from(moment.month()),
                moment.day(),
                moment.hour(),
                moment.minute(),
                moment.second(),
                csn.micros.rem_euclid(1_000_000),
                csn.count,
                csn.sid,
                csn.modification
            )
        };
        let times = [
            MICROS_MIN,
            MICROS_MIN + 1,
            -1,
            0,
            1_763_851_234_567_890,
            MICROS_MAX,
        ];
        for (index, micros) in times.into_iter().enumerate() {
            for (count, sid, modification) in [
                (0, 0, 0),
                (0x12_3abc, 0x7f, 9),
                (COUNT_MAX, SID_MAX, MODIFICATION_MAX),
            ] {
                let csn = Csn::new(micros, count, sid, modification).unwrap();
                assert_eq!(csn.to_string(), oracle(&csn), "time {index}");
            }
        }
    }

    use super::*;

    #[test]
    fn parses_and_formats_openldap_text() {
        let text = "20260101120000.123456Z#00000a#fff#000001";
        let csn: Csn = text.parse().expect("parse");
        assert_eq!(csn.count(), 10);
        assert_eq!(csn.sid(), 0xfff);
        assert_eq!(csn.modification(), 1);
        // 2026-01-01T12:00:00Z is 1767268800 seconds after the epoch.
        assert_eq!(csn.micros(), 1_767_268_800_123_456);
        assert_eq!(csn.to_string(), text);
    }

    #[test]
    fn extreme_years_round_trip() {
        for text in [
            "00000101000000.000000Z#000000#000#000000",
            "99991231235959.999999Z#ffffff#fff#ffffff",
            "19691231235959.999999Z#000000#000#000000",
        ] {
            assert_eq!(Csn::parse(text.as_bytes()).expect(text).to_string(), text);
        }
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("20260101120000.123456Z#000000#000#00000", "40 bytes"),
            ("202a0101120000.123456Z#000000#000#000000", "year"),
            ("20261301120000.123456Z#000000#000#000000", "month"),
            ("20260230120000.123456Z#000000#000#000000", "day"),
            ("20260101240000.123456Z#000000#000#000000", "time of day"),
            ("20260101120060.123456Z#000000#000#000000", "time of day"),
            (
                "20260101120000,123456Z#000000#000#000000",
                "separator before microseconds",
            ),
            ("20260101120000.12345xZ#000000#000#000000", "microseconds"),
            ("20260101120000.123456z#000000#000#000000", "time zone"),
            ("20260101120000.123456Z#00000A#000#000000", "count"),
            ("20260101120000.123456Z#000000#00g#000000", "sid"),
            ("20260101120000.123456Z#000000#000#-00000", "mod"),
            (
                "20260101120000.123456Z#000000;000#000000",
                "separator before sid",
            ),
        ];
        for (text, field) in cases {
            let error = Csn::parse(text.as_bytes()).expect_err(text).to_string();
            assert!(error.contains(field), "{text}: {error} should name {field}");
        }
    }

    #[test]
    fn the_old_openldap_2_3_format_is_refused() {
        assert!(Csn::parse(b"20040101120000Z#000001#00#000000").is_err());
    }

    #[test]
    fn new_checks_ranges() {
        assert!(Csn::new(0, COUNT_MAX + 1, 0, 0).is_err());
        assert!(Csn::new(0, 0, SID_MAX + 1, 0).is_err());
        assert!(Csn::new(0, 0, 0, MODIFICATION_MAX + 1).is_err());
        assert!(Csn::new(MICROS_MAX + 1, 0, 0, 0).is_err());
        assert!(Csn::new(MICROS_MIN - 1, 0, 0, 0).is_err());
        assert!(CsnGenerator::new(SID_MAX + 1).is_err());
    }

    #[test]
    fn generator_counts_within_a_microsecond_and_survives_a_clock_going_back() {
        let mut generator = CsnGenerator::new(5).expect("sid");
        let first = generator.next_at_micros(1_000).expect("csn");
        let same = generator.next_at_micros(1_000).expect("csn");
        let earlier = generator.next_at_micros(10).expect("csn");
        let later = generator.next_at_micros(2_000).expect("csn");
        assert_eq!((first.micros(), first.count()), (1_000, 0));
        assert_eq!((same.micros(), same.count()), (1_000, 1));
        assert_eq!((earlier.micros(), earlier.count()), (1_000, 2));
        assert_eq!((later.micros(), later.count()), (2_000, 0));
        assert!(first < same && same < earlier && earlier < later);
        assert!(first.to_string() < same.to_string());
        assert_eq!(later.sid(), 5);
    }

    #[test]
    fn a_full_count_moves_time_on_and_the_end_of_time_is_an_error() {
        let full = Csn::new(1_000, COUNT_MAX, 1, 0).expect("csn");
        let mut generator = CsnGenerator::resuming_after(1, full).expect("sid");
        let next = generator.next_at_micros(0).expect("csn");
        assert_eq!((next.micros(), next.count()), (1_001, 0));

        let last = Csn::new(MICROS_MAX, COUNT_MAX, 1, 0).expect("csn");
        let mut generator = CsnGenerator::resuming_after(1, last).expect("sid");
        assert_eq!(generator.next_at_micros(i64::MAX), Err(CsnError::Exhausted));
    }

    #[test]
    fn system_time_before_the_epoch_and_far_future_are_clamped_not_panicking() {
        let mut generator = CsnGenerator::new(0).expect("sid");
        let past = UNIX_EPOCH - std::time::Duration::from_secs(10);
        assert_eq!(generator.next(past).expect("csn").micros(), -10 * 1_000_000);
        let far = generator.next_at_micros(i64::MAX).expect("csn");
        assert_eq!(far.micros(), MICROS_MAX);
    }
}
