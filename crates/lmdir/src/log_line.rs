//! The server's log lines, written straight into a reused per-thread byte buffer and handed to the
//! batching `LogBuffer` whole. With tracing-subscriber's formatters a search cost 12.6% (text)
//! and 18.1% (JSON) more instructions at `log = "info"` than at `warn`; with this one 3.4% and
//! 4.3% (callgrind, docs/benchmarks.md, issue 13). There the timestamp was rendered through `fmt`
//! from scratch per line (and allocated in JSON), every character of a text message went one by
//! one through the ANSI sanitizer, and serde_json escaped each formatted piece of a JSON message
//! separately. Here the timestamp up to the second is cached per thread, the message is formatted
//! once, and the sanitizer and JSON escaping only run on text holding a byte that needs them.
//!
//! The lines keep tracing-subscriber's layout, so nothing reading them changes:
//! - text: `2026-11-22T22:51:32.123456Z  INFO target: message key=value`
//! - journal: `<6> INFO target: message` (systemd stamps the time; `<N>` is the syslog priority)
//! - JSON: `{"timestamp":"…","level":"INFO","message":"…","key":value,"target":"…"}`, strings
//!   escaped by serde_json.
//!
//! Spans are not shown: lmdir creates none, and one `Layer` without span bookkeeping is what
//! keeps a line cheap.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::layer::{Context, Layer};

use lmdir_server::log_text::contains_byte_where;

use crate::log_buffer::LogBuffer;

/// A thread's line buffer grows to its longest line; one longer than this is not kept for the
/// next line, so a rare huge line does not pin memory in every thread that ever logged one.
pub const LINE_BYTES_KEPT: usize = 4096;

/// The shape of each line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineShape {
    /// Timestamp, level, target, message and fields.
    Text,
    /// For the journal: syslog priority prefix, no timestamp.
    Journal,
    /// One JSON object per line.
    Json,
}

/// The `Layer` writing every event it sees as one line into `buffer`.
pub struct LineLayer {
    shape: LineShape,
    buffer: LogBuffer,
}

impl LineLayer {
    pub fn new(shape: LineShape, buffer: LogBuffer) -> LineLayer {
        LineLayer { shape, buffer }
    }
}

thread_local! {
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// `YYYY-MM-DDTHH:MM:SS.` of the second this thread last logged in.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

impl<S: Subscriber> Layer<S> for LineLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let _ = LINE.try_with(|line| match line.try_borrow_mut() {
            Ok(mut line) => {
                line.clear();
                write_line(self.shape, &mut line, event, SystemTime::now());
                self.buffer.append(&line);
                if line.capacity() > LINE_BYTES_KEPT {
                    *line = Vec::new();
                }
            }
            // An event logged while this thread formats another (a field's Display logging).
            Err(_) => {
                let mut line = Vec::new();
                write_line(self.shape, &mut line, event, SystemTime::now());
                self.buffer.append(&line);
            }
        });
    }
}

/// Appends `event` as one whole line, newline included, to `line`.
fn write_line(shape: LineShape, line: &mut Vec<u8>, event: &Event<'_>, now: SystemTime) {
    // Events forwarded from the `log` crate carry their real target in fields.
    let normalized = event.normalized_metadata();
    let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
    match shape {
        LineShape::Text => {
            write_timestamp(line, now);
            line.push(b' ');
            write_text(line, metadata, event);
        }
        LineShape::Journal => {
            line.extend_from_slice(syslog_priority(metadata.level()));
            write_text(line, metadata, event);
        }
        LineShape::Json => write_json(line, metadata, event, now),
    }
    line.push(b'\n');
}

/// `LEVEL target: message key=value ...`, the level right-aligned in five columns.
fn write_text(line: &mut Vec<u8>, metadata: &Metadata<'_>, event: &Event<'_>) {
    let level = match *metadata.level() {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        Level::ERROR => "ERROR",
    };
    line.extend_from_slice(level.as_bytes());
    line.push(b' ');
    line.extend_from_slice(metadata.target().as_bytes());
    line.extend_from_slice(b": ");
    let fields_start = line.len();
    event.record(&mut TextFields {
        line: &mut *line,
        first: true,
    });
    sanitize_terminal_controls(line, fields_start);
}

/// The journal's priority prefix: `<3>` error … `<7>` debug and trace.
fn syslog_priority(level: &Level) -> &'static [u8] {
    match *level {
        Level::ERROR => b"<3>",
        Level::WARN => b"<4>",
        Level::INFO => b"<6>",
        Level::DEBUG | Level::TRACE => b"<7>",
    }
}

/// The text fields: the message as is, other fields as `name=value` (Debug), space-separated.
struct TextFields<'a> {
    line: &'a mut Vec<u8>,
    first: bool,
}

impl Visit for TextFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let name = field.name();
        if name.starts_with("log.") {
            return; // The `log` crate's metadata, already shown as the target.
        }
        if !self.first {
            self.line.push(b' ');
        }
        self.first = false;
        let mut out = LineWriter(self.line);
        // Writing into a Vec cannot fail.
        let _ = match name {
            "message" => write!(out, "{value:?}"),
            name => write!(out, "{}={value:?}", raw_name(name)),
        };
    }
}

/// A field named with a raw identifier (`r#type`) shows as `type`.
fn raw_name(name: &str) -> &str {
    name.strip_prefix("r#").unwrap_or(name)
}

/// `fmt::Write` into the byte line.
struct LineWriter<'a>(&'a mut Vec<u8>);

impl fmt::Write for LineWriter<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

/// The characters tracing-subscriber's text lines never let through raw, because a terminal
/// showing the log would act on them: ESC, BEL, BS, FF, DEL and the C1 controls. (Client text is
/// already escaped by lmdir_server's `log_text`; this covers every other message.)
fn sanitize_terminal_controls(line: &mut Vec<u8>, start: usize) {
    // C1 controls are U+0080..U+009F, UTF-8 `c2 80`..`c2 9f`: 0xc2 finds them (and Latin-1
    // symbols, which are then kept as they are).
    let suspicious = |byte: u8| matches!(byte, 0x1b | 0x07 | 0x08 | 0x0c | 0x7f | 0xc2);
    if !contains_byte_where(&line[start..], suspicious) {
        return;
    }
    let Some(first) = line[start..].iter().position(|&byte| suspicious(byte)) else {
        return;
    };
    let from = start + first;
    let tail = String::from_utf8_lossy(&line[from..]).into_owned();
    line.truncate(from);
    let mut out = LineWriter(line);
    for character in tail.chars() {
        let _ = match character {
            '\x1b' => out.write_str("\\x1b"),
            '\x07' => out.write_str("\\x07"),
            '\x08' => out.write_str("\\x08"),
            '\x0c' => out.write_str("\\x0c"),
            '\x7f' => out.write_str("\\x7f"),
            '\u{80}'..='\u{9f}' => write!(out, "\\u{{{:x}}}", character as u32),
            other => out.write_char(other),
        };
    }
}

/// RFC 3339 in UTC with microseconds, as tracing-subscriber writes it:
/// `2026-11-22T22:51:32.123456Z`. The part up to the second is cached per thread.
fn write_timestamp(line: &mut Vec<u8>, now: SystemTime) {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since_epoch.as_secs();
    let cached = SECOND.try_with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.0 != seconds {
            cached.1 = second_prefix(seconds);
            cached.0 = seconds;
        }
        line.extend_from_slice(cached.1.as_bytes());
    });
    if cached.is_err() {
        // A thread logging while its thread-locals are torn down.
        line.extend_from_slice(second_prefix(seconds).as_bytes());
    }
    let mut digits = [b'0'; 6];
    let mut micros = since_epoch.subsec_micros();
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    line.extend_from_slice(&digits);
    line.push(b'Z');
}

/// `YYYY-MM-DDTHH:MM:SS.` for a second since the epoch (UTC).
fn second_prefix(seconds: u64) -> String {
    let time = i64::try_from(seconds)
        .ok()
        .and_then(|seconds| time::OffsetDateTime::from_unix_timestamp(seconds).ok())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.",
        time.year(),
        u8::from(time.month()),
        time.day(),
        time.hour(),
        time.minute(),
        time.second()
    )
}

/// One JSON object: timestamp, level, the event's fields (message first, as recorded), target.
/// The timestamp and level are ASCII without quotes or backslashes; every other string is
/// written by `json_str`.
fn write_json(line: &mut Vec<u8>, metadata: &Metadata<'_>, event: &Event<'_>, now: SystemTime) {
    line.extend_from_slice(b"{\"timestamp\":\"");
    write_timestamp(line, now);
    line.extend_from_slice(b"\",\"level\":\"");
    line.extend_from_slice(metadata.level().as_str().as_bytes());
    line.push(b'"');
    event.record(&mut JsonFields(&mut *line));
    line.extend_from_slice(b",\"target\":");
    json_str(line, metadata.target());
    line.push(b'}');
}

/// Appends `text` as a JSON string. JSON escapes only `"`, `\` and controls below 0x20
/// (RFC 8259 §7): a string without them (a target, a field name, most result lines) is copied
/// between quotes as is, after one vectorized scan; any other goes through serde_json.
fn json_str(line: &mut Vec<u8>, text: &str) {
    let escaped_by_json = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
    if contains_byte_where(text.as_bytes(), escaped_by_json) {
        json_value(line, text);
    } else {
        line.push(b'"');
        line.extend_from_slice(text.as_bytes());
        line.push(b'"');
    }
}

/// Appends `value` serialized by serde_json (a string escaped and quoted, a number as is).
fn json_value<T: serde::Serialize + ?Sized>(line: &mut Vec<u8>, value: &T) {
    // Serializing a str, a number or a bool into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *line, value);
}

/// The event's fields as JSON members: numbers and booleans as such, the rest as strings.
struct JsonFields<'a>(&'a mut Vec<u8>);

impl JsonFields<'_> {
    /// Writes `,"name":` and returns true, or false for a field not shown.
    fn name(&mut self, field: &Field) -> bool {
        let name = field.name();
        if name.starts_with("log.") {
            return false; // The `log` crate's metadata, already shown as the target.
        }
        self.0.push(b',');
        json_str(self.0, raw_name(name));
        self.0.push(b':');
        true
    }

    fn member<T: serde::Serialize + ?Sized>(&mut self, field: &Field, value: &T) {
        if self.name(field) {
            json_value(self.0, value);
        }
    }
}

thread_local! {
    /// A field's formatted text on its way to being escaped (see `record_debug`).
    static UNESCAPED: RefCell<String> = const { RefCell::new(String::new()) };
}

impl Visit for JsonFields<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.member(field, &value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.member(field, &value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.member(field, &value);
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if self.name(field) {
            json_str(self.0, value);
        }
    }

    /// The message (and any field given as `%value` or `?value`): formatted into a reused
    /// string first, then escaped in one pass; handing serde_json each piece the message is
    /// formatted from costs more than twice as much per line (callgrind, issue 13).
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.name(field) {
            return;
        }
        let written = UNESCAPED.try_with(|text| {
            let Ok(mut text) = text.try_borrow_mut() else {
                return false;
            };
            text.clear();
            let _ = write!(text, "{value:?}");
            json_str(self.0, &text);
            if text.capacity() > LINE_BYTES_KEPT {
                *text = String::new();
            }
            true
        });
        if written != Ok(true) {
            // A field whose formatting logs an event: that inner event gets its own string.
            json_str(self.0, &format!("{value:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_buffer::Destination;
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// What tracing-subscriber's own formatter writes, to compare lmdir's lines with.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// Runs `log` with lmdir's layer of `shape` and tracing-subscriber's equivalent side by
    /// side; returns (lmdir's lines, tracing-subscriber's lines).
    fn both(shape: LineShape, log: impl Fn()) -> (String, String) {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("log");
        let file = std::fs::File::create(&path).unwrap();
        let buffer =
            LogBuffer::start(Destination::File(Arc::new(Mutex::new(Arc::new(file))))).unwrap();
        let reference = Captured::default();
        let writer = reference.clone();
        let theirs = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry().with(LineLayer::new(shape, buffer.clone()));
        match shape {
            LineShape::Text => tracing::subscriber::with_default(subscriber.with(theirs), &log),
            LineShape::Journal => {
                tracing::subscriber::with_default(subscriber.with(theirs.without_time()), &log)
            }
            LineShape::Json => tracing::subscriber::with_default(
                subscriber.with(theirs.json().flatten_event(true)),
                &log,
            ),
        }
        buffer.flush();
        (std::fs::read_to_string(&path).unwrap(), reference.text())
    }

    /// A search's request and result lines as lmdir_server writes them, with client text that
    /// tries to forge a line, end a field and hide a password.
    fn operation_lines() {
        use lmdir_server::log_text::{bounded, LOG_DN_BYTES_MAX};
        let base = "dc=x\n2026-01-01T00:00:00.000000Z  INFO forged: \"quoted\"\\";
        tracing::info!(
            "conn=7 op=3 SRCH base=\"{}\" scope=2 deref=0 filter=\"(userPassword=<redacted>)\" attrs=\"\"",
            bounded(base, LOG_DN_BYTES_MAX)
        );
        tracing::info!(
            "conn=7 op=3 RESULT tag=5 err=0 nentries=1 duration_us=42 text={}",
            bounded(&"é".repeat(600), LOG_DN_BYTES_MAX)
        );
        tracing::warn!(entry = 12_u64, dn = %"cn=a\"b", flag = true, "deleting an undecodable entry");
        tracing::error!(count = -3_i64, name = "in\"side\n", "with fields");
    }

    /// Text and journal lines equal tracing-subscriber's, timestamp aside.
    #[test]
    fn text_lines_keep_the_layout_fields_and_escaping() {
        let (ours, theirs) = both(LineShape::Text, operation_lines);
        assert_eq!(ours.lines().count(), 4, "{ours}");
        let without_time = |text: &str| -> Vec<String> {
            text.lines().map(|line| line[27..].to_string()).collect()
        };
        assert_eq!(without_time(&ours), without_time(&theirs));
        for line in ours.lines() {
            let (stamp, _) = line.split_at(27);
            assert!(
                time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339)
                    .is_ok()
                    && stamp.len() == "2026-11-22T22:51:32.123456Z".len(),
                "{line}"
            );
        }
        let search = ours.lines().next().unwrap();
        assert!(search.contains(
            " INFO lmdir::log_line::tests: conn=7 op=3 SRCH base=\"dc=x\\0a2026-01-01T00:00:00.000000Z  INFO forged: \\22quoted\\22\\5c\" scope=2"
        ), "{search}");
        assert!(ours.contains("...(1200 bytes)"), "{ours}");
        assert!(ours.contains("<redacted>"));

        let (ours, theirs) = both(LineShape::Journal, operation_lines);
        assert_eq!(ours.lines().count(), 4, "{ours}");
        let priorities: Vec<&str> = ours.lines().map(|line| &line[..3]).collect();
        assert_eq!(priorities, ["<6>", "<6>", "<4>", "<3>"]);
        let ours: Vec<&str> = ours.lines().map(|line| &line[3..]).collect();
        assert_eq!(ours, theirs.lines().collect::<Vec<_>>());
    }

    /// JSON lines hold the same members and values as tracing-subscriber's, timestamp aside.
    #[test]
    fn json_lines_keep_the_members_values_and_escaping() {
        let (ours, theirs) = both(LineShape::Json, operation_lines);
        assert_eq!(ours.lines().count(), 4, "{ours}");
        for (ours, theirs) in ours.lines().zip(theirs.lines()) {
            let mut ours: serde_json::Value = serde_json::from_str(ours).unwrap();
            let mut theirs: serde_json::Value = serde_json::from_str(theirs).unwrap();
            let stamp = ours["timestamp"].as_str().unwrap().to_string();
            assert_eq!(stamp.len(), 27, "{stamp}");
            assert!(time::OffsetDateTime::parse(
                &stamp,
                &time::format_description::well_known::Rfc3339
            )
            .is_ok());
            ours["timestamp"].take();
            theirs["timestamp"].take();
            assert_eq!(ours, theirs);
        }
        let first: serde_json::Value = serde_json::from_str(ours.lines().next().unwrap()).unwrap();
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["target"], "lmdir::log_line::tests");
        assert!(first["message"]
            .as_str()
            .unwrap()
            .starts_with("conn=7 op=3 SRCH base=\"dc=x\\0a2026"));
        let fields: serde_json::Value = serde_json::from_str(ours.lines().nth(2).unwrap()).unwrap();
        assert_eq!(fields["entry"], 12);
        assert_eq!(fields["dn"], "cn=a\"b");
        assert_eq!(fields["flag"], true);

        // A message with raw controls, quotes and backslashes (escaped in one pass).
        let message = "raw\nnewline \"q\" \\ tab\t \u{1b} \u{85} \u{7f} é";
        let (ours, theirs) = both(LineShape::Json, || tracing::info!("{}", message));
        assert_eq!(ours.lines().count(), 1, "{ours}");
        let ours: serde_json::Value = serde_json::from_str(&ours).unwrap();
        let theirs: serde_json::Value = serde_json::from_str(&theirs).unwrap();
        assert_eq!(ours["message"], message);
        assert_eq!(ours["message"], theirs["message"]);
    }

    /// Terminal controls in a message (not client text, which log_text escaped already) are
    /// written as tracing-subscriber writes them; other non-ASCII text is kept.
    #[test]
    fn terminal_controls_are_sanitized_as_tracing_subscriber_does() {
        let (ours, theirs) = both(LineShape::Text, || {
            tracing::info!(
                "bell\x07 escape\x1b[31m next\u{85}line © é \x7f {}",
                "\x08\x0c"
            );
        });
        assert_eq!(ours[27..], theirs[27..]);
        assert!(ours.contains("bell\\x07 escape\\x1b[31m next\\u{85}line © é \\x7f \\x08\\x0c"));
    }

    /// Copied as is or escaped by serde_json, a string comes out as serde_json writes it.
    #[test]
    fn json_strings_are_what_serde_json_writes() {
        let long = format!("{}\"{}", "a".repeat(40), "b".repeat(40));
        for text in [
            "",
            "lmdir_server::operations",
            "conn=1 op=2 RESULT tag=5 err=0 nentries=1 duration_us=9 text=",
            "dn=\"x\"",
            "back\\slash",
            "tab\tnew\nline\u{1}\u{1f}",
            "\u{7f} \u{85} é \u{2028}",
            long.as_str(),
        ] {
            let mut line = Vec::new();
            json_str(&mut line, text);
            assert_eq!(
                String::from_utf8(line).unwrap(),
                serde_json::to_string(text).unwrap()
            );
        }
    }

    #[test]
    fn timestamps_roll_over_the_cached_second() {
        let mut line = Vec::new();
        let base = UNIX_EPOCH + std::time::Duration::from_secs(1_795_909_892);
        write_timestamp(&mut line, base + std::time::Duration::from_micros(999_999));
        line.push(b' ');
        write_timestamp(
            &mut line,
            base + std::time::Duration::from_micros(1_000_007),
        );
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "2026-11-28T23:51:32.999999Z 2026-11-28T23:51:33.000007Z"
        );
    }
}
