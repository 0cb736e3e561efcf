//! Parsing of one LDIF record from its bytes.
//!
//! The record is walked physical line by physical line (memchr for the newline); a logical line
//! borrows from the input unless it was folded, so plain ASCII entries cost one allocation per
//! record (the attribute list) in `parse_record_view`.

use std::borrow::Cow;
use std::cell::Cell;
use std::fs::{File, Metadata};
use std::io::Read;
use std::ops::Range;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use memchr::memchr;

use crate::{
    mod_op_keyword, BodyView, ChangeOperation, ChangeRecord, Control, LdifError, LdifRecord, ModOp,
    Modification, ParseOptions, RecordView,
};

/// Accepts missing padding and non-zero trailing bits: other LDIF writers are not all strict, and
/// the decoded bytes are unambiguous either way.
const BASE64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Parses one record (the bytes between blank lines; leading comments, a leading `version: 1`
/// line and trailing blank lines are allowed) into an owned `LdifRecord`.
/// `first_line` is the line number of `bytes[0]` in the whole file (1-based).
pub fn parse_record(
    bytes: &[u8],
    first_line: u64,
    options: &ParseOptions,
) -> Result<LdifRecord, LdifError> {
    parse_record_view(bytes, first_line, options).map(RecordView::into_owned)
}

/// Like `parse_record`, but plain unfolded values and descriptions borrow from `bytes`.
pub fn parse_record_view<'a>(
    bytes: &'a [u8],
    first_line: u64,
    options: &ParseOptions,
) -> Result<RecordView<'a>, LdifError> {
    if bytes.len() > options.record_bytes_max {
        return Err(LdifError::new(
            first_line,
            None,
            format!(
                "record is {} bytes, more than the limit of {} bytes",
                bytes.len(),
                options.record_bytes_max
            ),
        ));
    }
    let mut parser = Parser {
        lines: PhysicalLines {
            bytes,
            position: 0,
            next_line: first_line,
        },
        options,
        // Descriptions are then sliced from it: checking each one's UTF-8 again cost ~100
        // instructions per line.
        record_text: std::str::from_utf8(bytes).ok(),
        dn: None,
        values_count: 0,
        url_bytes: Cell::new(0),
        last_line: first_line,
        started: false,
    };
    parser.record()
}

struct PhysicalLines<'a> {
    bytes: &'a [u8],
    position: usize,
    next_line: u64,
}

impl<'a> PhysicalLines<'a> {
    /// The next physical line without its LF or CRLF, with its line number.
    fn next(&mut self) -> Option<(u64, &'a [u8])> {
        if self.position >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.position..];
        let (line, advance) = match memchr(b'\n', rest) {
            Some(newline) => (&rest[..newline], newline + 1),
            None => (rest, rest.len()),
        };
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let number = self.next_line;
        self.next_line += 1;
        self.position += advance;
        Some((number, line))
    }

    fn next_is_continuation(&self) -> bool {
        self.bytes.get(self.position) == Some(&b' ')
    }
}

/// An unfolded line: borrowed from the input unless folding had to join pieces.
struct LogicalLine<'a> {
    number: u64,
    text: Cow<'a, [u8]>,
    /// Where `text` starts in the record when it is borrowed.
    start: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    Plain,
    Base64,
    Url,
}

/// `description ":" [":" | "<"] FILL value`, as byte ranges into the logical line.
struct AttributeLine {
    description: Range<usize>,
    kind: ValueKind,
    value: Range<usize>,
}

fn sub_bytes<'a>(text: &Cow<'a, [u8]>, range: Range<usize>) -> Cow<'a, [u8]> {
    match text {
        Cow::Borrowed(bytes) => Cow::Borrowed(&bytes[range]),
        Cow::Owned(bytes) => Cow::Owned(bytes[range].to_vec()),
    }
}

/// The bytes of a description without options: letters, digits, '-', '.', '_'.
static PLAIN_DESCRIPTION_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let character = byte as u8;
        table[byte] = character.is_ascii_alphanumeric()
            || character == b'-'
            || character == b'.'
            || character == b'_';
        byte += 1;
    }
    table
};

/// `type *(";" option)`: letters, digits, '-', '.', '_' (seen in the wild) and non-empty
/// options; one pass because it runs for every line.
fn is_valid_description(bytes: &[u8]) -> bool {
    let Some(&first) = bytes.first() else {
        return false;
    };
    if !first.is_ascii_alphanumeric() {
        return false;
    }
    // Almost every description has no option: one table lookup per byte, no state.
    if bytes
        .iter()
        .all(|&byte| PLAIN_DESCRIPTION_BYTE[usize::from(byte)])
    {
        return true;
    }
    let mut previous = first;
    for &byte in &bytes[1..] {
        let allowed = byte.is_ascii_alphanumeric()
            || byte == b'-'
            || byte == b'.'
            || byte == b'_'
            || (byte == b';' && previous != b';');
        if !allowed {
            return false;
        }
        previous = byte;
    }
    previous != b';'
}

fn printable(bytes: &[u8]) -> String {
    const SHOWN_BYTES_MAX: usize = 60;
    let shown = &bytes[..bytes.len().min(SHOWN_BYTES_MAX)];
    let mut text = String::from_utf8_lossy(shown).into_owned();
    if bytes.len() > SHOWN_BYTES_MAX {
        text.push_str("...");
    }
    text
}

/// Opens a URL's file for reading only if it is a regular file: a FIFO would hang the read (the
/// open itself is non-blocking, and the opened handle is checked again, so a file swapped for a
/// FIFO or device after the first check is refused too), a device or directory is no value.
fn open_regular_file(path: &str) -> Result<File, String> {
    let metadata =
        std::fs::metadata(path).map_err(|error| format!("cannot open {path}: {error}"))?;
    if !metadata.is_file() {
        return Err(not_regular(path, &metadata));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| format!("cannot open {path}: {error}"))?;
    let opened = file
        .metadata()
        .map_err(|error| format!("cannot read {path}: {error}"))?;
    if !opened.is_file() {
        return Err(not_regular(path, &opened));
    }
    Ok(file)
}

fn not_regular(path: &str, metadata: &Metadata) -> String {
    let kind = metadata.file_type();
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    format!("{path} is {what}: file URLs read regular files only")
}

struct Parser<'a, 'o> {
    lines: PhysicalLines<'a>,
    options: &'o ParseOptions,
    /// The whole record when it is UTF-8 (nearly always).
    record_text: Option<&'a str>,
    /// The record's DN once read, for error messages.
    dn: Option<Cow<'a, str>>,
    values_count: usize,
    /// Bytes read from file URLs so far in this record (held to `url_record_bytes_max`).
    url_bytes: Cell<usize>,
    /// Number of the last physical line read, for errors at the end of the record.
    last_line: u64,
    /// Whether a non-comment line was seen: blank lines before it are skipped, after it they
    /// end the record.
    started: bool,
}

impl<'a> Parser<'a, '_> {
    fn error(&self, line: u64, message: impl Into<String>) -> LdifError {
        LdifError::new(
            line,
            self.dn.as_ref().map(|dn| dn.to_string()),
            message.into(),
        )
    }

    /// The next logical line, unfolded; `None` at the end of the record. An empty line ends the
    /// record: anything other than blank lines and comments after it is an error.
    fn next_raw_line(&mut self) -> Result<Option<LogicalLine<'a>>, LdifError> {
        let (number, first, start) = loop {
            let start = self.lines.position;
            let Some((number, first)) = self.lines.next() else {
                return Ok(None);
            };
            self.last_line = number;
            if !first.is_empty() || self.started {
                break (number, first, start);
            }
        };
        if first.is_empty() {
            self.expect_only_blank_lines()?;
            return Ok(None);
        }
        if first[0] == b' ' {
            return Err(self.error(
                number,
                "line starts with a space (a continuation) but there is no line to continue",
            ));
        }
        let line_bytes_max = self.options.line_bytes_max;
        if !self.lines.next_is_continuation() {
            if first.len() > line_bytes_max {
                return Err(self.error(
                    number,
                    format!("line is longer than the limit of {line_bytes_max} bytes"),
                ));
            }
            return Ok(Some(LogicalLine {
                number,
                text: Cow::Borrowed(first),
                start: Some(start),
            }));
        }
        let mut joined = first.to_vec();
        while self.lines.next_is_continuation() {
            let Some((continuation_number, continuation)) = self.lines.next() else {
                break;
            };
            self.last_line = continuation_number;
            joined.extend_from_slice(&continuation[1..]);
            if joined.len() > line_bytes_max {
                return Err(self.error(
                    number,
                    format!("folded line is longer than the limit of {line_bytes_max} bytes"),
                ));
            }
        }
        Ok(Some(LogicalLine {
            number,
            text: Cow::Owned(joined),
            start: None,
        }))
    }

    fn expect_only_blank_lines(&mut self) -> Result<(), LdifError> {
        while let Some((number, line)) = self.lines.next() {
            self.last_line = number;
            if !line.is_empty() && line[0] != b'#' && line[0] != b' ' {
                return Err(self.error(
                    number,
                    "a blank line ended the record but more lines follow (records must be \
                     parsed one at a time)",
                ));
            }
        }
        Ok(())
    }

    /// The next logical line that is not a comment.
    fn next_line(&mut self) -> Result<Option<LogicalLine<'a>>, LdifError> {
        loop {
            match self.next_raw_line()? {
                Some(line) if line.text[0] == b'#' => continue,
                Some(line) => {
                    self.started = true;
                    return Ok(Some(line));
                }
                None => return Ok(None),
            }
        }
    }

    fn split_attribute(&self, line: &LogicalLine<'a>) -> Result<AttributeLine, LdifError> {
        let text = &line.text[..];
        let Some(colon) = memchr(b':', text) else {
            return Err(self.error(
                line.number,
                format!(
                    "expected \"attribute: value\" but found no ':' in {:?}",
                    printable(text)
                ),
            ));
        };
        let (kind, mut value_start) = match text.get(colon + 1) {
            Some(b':') => (ValueKind::Base64, colon + 2),
            Some(b'<') => (ValueKind::Url, colon + 2),
            _ => (ValueKind::Plain, colon + 1),
        };
        while text.get(value_start) == Some(&b' ') {
            value_start += 1;
        }
        let mut value_end = text.len();
        if kind != ValueKind::Plain {
            // Trailing spaces are never part of base64 text or of a URL.
            while value_end > value_start && text[value_end - 1] == b' ' {
                value_end -= 1;
            }
        }
        Ok(AttributeLine {
            description: 0..colon,
            kind,
            value: value_start..value_end,
        })
    }

    fn description(
        &self,
        line: &LogicalLine<'a>,
        range: Range<usize>,
    ) -> Result<Cow<'a, str>, LdifError> {
        let bytes = &line.text[range.clone()];
        if !is_valid_description(bytes) {
            return Err(self.error(
                line.number,
                format!(
                    "{:?} is not a valid attribute description (letters, digits, '-', '.', \
                     options after ';')",
                    printable(bytes)
                ),
            ));
        }
        let in_record = self
            .record_text
            .zip(line.start)
            .and_then(|(text, start)| text.get(start + range.start..start + range.end));
        if let Some(description) = in_record {
            return Ok(Cow::Borrowed(description));
        }
        match sub_bytes(&line.text, range) {
            Cow::Borrowed(bytes) => std::str::from_utf8(bytes).ok().map(Cow::Borrowed),
            Cow::Owned(bytes) => String::from_utf8(bytes).ok().map(Cow::Owned),
        }
        .ok_or_else(|| self.error(line.number, "attribute description is not ASCII"))
    }

    fn value(
        &self,
        line: &LogicalLine<'a>,
        attribute: &AttributeLine,
    ) -> Result<Cow<'a, [u8]>, LdifError> {
        let raw = &line.text[attribute.value.clone()];
        match attribute.kind {
            ValueKind::Plain => Ok(sub_bytes(&line.text, attribute.value.clone())),
            ValueKind::Base64 => BASE64_LENIENT.decode(raw).map(Cow::Owned).map_err(|error| {
                self.error(
                    line.number,
                    format!("invalid base64 value {:?}: {error}", printable(raw)),
                )
            }),
            ValueKind::Url => self.read_url(line.number, raw).map(Cow::Owned),
        }
    }

    fn text_value(
        &self,
        line: &LogicalLine<'a>,
        attribute: &AttributeLine,
        what: &str,
    ) -> Result<Cow<'a, str>, LdifError> {
        if attribute.kind == ValueKind::Url {
            return Err(self.error(line.number, format!("{what} cannot be given as a URL")));
        }
        match self.value(line, attribute)? {
            Cow::Borrowed(bytes) => std::str::from_utf8(bytes).ok().map(Cow::Borrowed),
            Cow::Owned(bytes) => String::from_utf8(bytes).ok().map(Cow::Owned),
        }
        .ok_or_else(|| self.error(line.number, format!("{what} is not valid UTF-8")))
    }

    fn read_url(&self, line: u64, url: &[u8]) -> Result<Vec<u8>, LdifError> {
        if !self.options.allow_file_urls {
            let mut message = String::from("URL values (attr:< url) are not allowed here");
            if !self.options.file_urls_refused_because.is_empty() {
                message.push_str(": ");
                message.push_str(self.options.file_urls_refused_because);
            }
            return Err(self.error(line, message));
        }
        let path = self.url_path(line, url)?;
        let file = open_regular_file(&path).map_err(|message| self.error(line, message))?;
        let file_limit = self.options.line_bytes_max;
        let record_limit = self.options.url_record_bytes_max;
        let record_left = record_limit.saturating_sub(self.url_bytes.get());
        let mut contents = Vec::new();
        file.take(file_limit.min(record_left) as u64 + 1)
            .read_to_end(&mut contents)
            .map_err(|error| self.error(line, format!("cannot read {path}: {error}")))?;
        if contents.len() > file_limit {
            return Err(self.error(
                line,
                format!("{path} is larger than the limit of {file_limit} bytes"),
            ));
        }
        if contents.len() > record_left {
            return Err(self.error(
                line,
                format!(
                    "the record's file URLs read more than the limit of {record_limit} bytes \
                     (reading {path})"
                ),
            ));
        }
        self.url_bytes.set(self.url_bytes.get() + contents.len());
        Ok(contents)
    }

    /// The local path of a `file:///path` (or `file://localhost/path`) URL.
    fn url_path(&self, line: u64, url: &[u8]) -> Result<String, LdifError> {
        let Some(rest) = url.strip_prefix(b"file://") else {
            return Err(self.error(
                line,
                format!(
                    "unsupported URL {:?}: only file:///path is supported",
                    printable(url)
                ),
            ));
        };
        let rest = rest.strip_prefix(b"localhost").unwrap_or(rest);
        if !rest.starts_with(b"/") {
            return Err(self.error(
                line,
                format!("URL {:?} must have an absolute path", printable(url)),
            ));
        }
        percent_decode(rest)
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| {
                self.error(
                    line,
                    format!(
                        "URL {:?} has a bad %-escape or is not UTF-8",
                        printable(url)
                    ),
                )
            })
    }

    fn count_value(&mut self, line: u64) -> Result<(), LdifError> {
        self.values_count += 1;
        if self.values_count > self.options.values_max {
            return Err(self.error(
                line,
                format!(
                    "record has more than the limit of {} values",
                    self.options.values_max
                ),
            ));
        }
        Ok(())
    }

    fn record(&mut self) -> Result<RecordView<'a>, LdifError> {
        let mut line = self.next_line()?;
        if let Some(first) = &line {
            let attribute = self.split_attribute(first)?;
            if first.text[attribute.description.clone()].eq_ignore_ascii_case(b"version") {
                let value = &first.text[attribute.value.clone()];
                if attribute.kind != ValueKind::Plain || value.trim_ascii_end() != b"1" {
                    return Err(self.error(
                        first.number,
                        format!(
                            "unsupported LDIF version {:?} (only 1 is defined)",
                            printable(value)
                        ),
                    ));
                }
                line = self.next_line()?;
            }
        }
        let Some(dn_line) = line else {
            return Err(self.error(self.last_line, "record has no \"dn:\" line"));
        };
        let attribute = self.split_attribute(&dn_line)?;
        if !dn_line.text[attribute.description.clone()].eq_ignore_ascii_case(b"dn") {
            return Err(self.error(
                dn_line.number,
                format!(
                    "a record must start with \"dn:\", found {:?}",
                    printable(&dn_line.text[attribute.description.clone()])
                ),
            ));
        }
        let dn = self.text_value(&dn_line, &attribute, "the DN")?;
        self.dn = Some(dn);
        let record_line = dn_line.number;

        let mut controls = Vec::new();
        // A person has ~25 values: start there to skip the regrowths (counting the record's
        // lines first cost more than the regrowths it saved).
        let mut attributes = Vec::with_capacity(32);
        while let Some(line) = self.next_line()? {
            let attribute = self.split_attribute(&line)?;
            let description = &line.text[attribute.description.clone()];
            if attributes.is_empty() && description.eq_ignore_ascii_case(b"control") {
                controls.push(self.control(&line, &attribute)?);
                continue;
            }
            if attributes.is_empty() && description.eq_ignore_ascii_case(b"changetype") {
                let operation = self.change(&line, &attribute)?;
                let dn = self.dn.take().unwrap_or_default();
                return Ok(RecordView {
                    line: record_line,
                    dn,
                    body: BodyView::Change(ChangeRecord {
                        controls,
                        operation,
                    }),
                });
            }
            if !controls.is_empty() {
                return Err(self.error(
                    line.number,
                    "\"control:\" lines must be followed by \"changetype:\"",
                ));
            }
            if description.eq_ignore_ascii_case(b"dn") {
                return Err(self.error(
                    line.number,
                    "a second \"dn:\" line in one record (missing blank line between records?)",
                ));
            }
            self.count_value(line.number)?;
            let description = self.description(&line, attribute.description.clone())?;
            let value = self.value(&line, &attribute)?;
            attributes.push((description, value));
        }
        if !controls.is_empty() {
            return Err(self.error(
                self.last_line,
                "\"control:\" lines must be followed by \"changetype:\"",
            ));
        }
        if attributes.is_empty() {
            return Err(self.error(record_line, "entry has no attributes"));
        }
        let dn = self.dn.take().unwrap_or_default();
        Ok(RecordView {
            line: record_line,
            dn,
            body: BodyView::Content(attributes),
        })
    }

    /// `control: <oid> [true|false] [: value | :: base64 | :< url]`
    fn control(
        &self,
        line: &LogicalLine<'a>,
        attribute: &AttributeLine,
    ) -> Result<Control, LdifError> {
        if attribute.kind != ValueKind::Plain {
            return Err(self.error(line.number, "\"control:\" must be followed by an OID"));
        }
        let text = &line.text[attribute.value.clone()];
        let oid_end = text
            .iter()
            .position(|&byte| byte == b' ' || byte == b':')
            .unwrap_or(text.len());
        let oid = &text[..oid_end];
        let oid_valid = !oid.is_empty()
            && oid
                .iter()
                .all(|&byte| byte.is_ascii_digit() || byte == b'.')
            && !oid.starts_with(b".")
            && !oid.ends_with(b".")
            && memchr::memmem::find(oid, b"..").is_none();
        if !oid_valid {
            return Err(self.error(
                line.number,
                format!("control type {:?} is not a numeric OID", printable(oid)),
            ));
        }
        let mut rest = text[oid_end..].trim_ascii_start();
        let mut criticality = false;
        if let Some(after) = rest.strip_prefix(b"true") {
            criticality = true;
            rest = after.trim_ascii_start();
        } else if let Some(after) = rest.strip_prefix(b"false") {
            rest = after.trim_ascii_start();
        }
        let value = if rest.is_empty() {
            None
        } else if let Some(base64_text) = rest.strip_prefix(b"::") {
            let base64_text = base64_text.trim_ascii();
            Some(BASE64_LENIENT.decode(base64_text).map_err(|error| {
                self.error(
                    line.number,
                    format!("invalid base64 control value: {error}"),
                )
            })?)
        } else if let Some(url) = rest.strip_prefix(b":<") {
            Some(self.read_url(line.number, url.trim_ascii())?)
        } else if let Some(plain) = rest.strip_prefix(b":") {
            let fill = plain.iter().take_while(|&&byte| byte == b' ').count();
            Some(plain[fill..].to_vec())
        } else {
            return Err(self.error(
                line.number,
                format!(
                    "after the control type expected true, false or ': value', found {:?}",
                    printable(rest)
                ),
            ));
        };
        Ok(Control {
            oid: String::from_utf8_lossy(oid).into_owned(),
            criticality,
            value,
        })
    }

    fn change(
        &mut self,
        line: &LogicalLine<'a>,
        attribute: &AttributeLine,
    ) -> Result<ChangeOperation, LdifError> {
        if attribute.kind != ValueKind::Plain {
            return Err(self.error(line.number, "changetype must be a plain value"));
        }
        let change_type = line.text[attribute.value.clone()].trim_ascii_end();
        let lowered = change_type.to_ascii_lowercase();
        match &lowered[..] {
            b"add" => self.change_add(line.number),
            b"delete" => {
                if let Some(extra) = self.next_line()? {
                    return Err(self.error(
                        extra.number,
                        "a delete change record has no lines after \"changetype: delete\"",
                    ));
                }
                Ok(ChangeOperation::Delete)
            }
            b"modify" => self.change_modify(),
            b"modrdn" | b"moddn" => self.change_moddn(line.number),
            _ => Err(self.error(
                line.number,
                format!(
                    "unknown changetype {:?} (add, delete, modify, modrdn, moddn)",
                    printable(change_type)
                ),
            )),
        }
    }

    fn change_add(&mut self, changetype_line: u64) -> Result<ChangeOperation, LdifError> {
        let mut attributes = Vec::new();
        while let Some(line) = self.next_line()? {
            self.count_value(line.number)?;
            let attribute = self.split_attribute(&line)?;
            let description = self.description(&line, attribute.description.clone())?;
            let value = self.value(&line, &attribute)?;
            attributes.push((description.into_owned(), value.into_owned()));
        }
        if attributes.is_empty() {
            return Err(self.error(
                changetype_line,
                "an add change record needs at least one attribute",
            ));
        }
        Ok(ChangeOperation::Add(attributes))
    }

    fn change_modify(&mut self) -> Result<ChangeOperation, LdifError> {
        let mut modifications = Vec::new();
        while let Some(line) = self.next_line()? {
            let attribute = self.split_attribute(&line)?;
            let keyword = &line.text[attribute.description.clone()];
            let operation = if keyword.eq_ignore_ascii_case(b"add") {
                ModOp::Add
            } else if keyword.eq_ignore_ascii_case(b"delete") {
                ModOp::Delete
            } else if keyword.eq_ignore_ascii_case(b"replace") {
                ModOp::Replace
            } else if keyword.eq_ignore_ascii_case(b"increment") {
                ModOp::Increment
            } else {
                return Err(self.error(
                    line.number,
                    format!(
                        "expected add:, delete:, replace: or increment: in a modify record, \
                         found {:?}",
                        printable(keyword)
                    ),
                ));
            };
            if attribute.kind != ValueKind::Plain {
                return Err(self.error(
                    line.number,
                    format!("{}: must name an attribute", mod_op_keyword(operation)),
                ));
            }
            let mut name_range = attribute.value.clone();
            while name_range.end > name_range.start && line.text[name_range.end - 1] == b' ' {
                name_range.end -= 1;
            }
            let name = self.description(&line, name_range)?.into_owned();
            let mut values = Vec::new();
            let mut separator_seen = false;
            while let Some(value_line) = self.next_line()? {
                if value_line.text.trim_ascii_end() == b"-" {
                    separator_seen = true;
                    break;
                }
                let value_attribute = self.split_attribute(&value_line)?;
                let description = &value_line.text[value_attribute.description.clone()];
                if !description.eq_ignore_ascii_case(name.as_bytes()) {
                    return Err(self.error(
                        value_line.number,
                        format!(
                            "value for {:?} inside the \"{}: {}\" block (missing '-' line?)",
                            printable(description),
                            mod_op_keyword(operation),
                            name
                        ),
                    ));
                }
                self.count_value(value_line.number)?;
                values.push(self.value(&value_line, &value_attribute)?.into_owned());
            }
            if operation == ModOp::Increment && values.len() != 1 {
                return Err(self.error(
                    line.number,
                    format!(
                        "increment: {name} needs exactly one value, found {}",
                        values.len()
                    ),
                ));
            }
            modifications.push(Modification {
                op: operation,
                description: name,
                values,
            });
            if !separator_seen {
                break;
            }
        }
        Ok(ChangeOperation::Modify(modifications))
    }

    fn expect_keyword(
        &mut self,
        keyword: &str,
        after_line: u64,
    ) -> Result<(LogicalLine<'a>, AttributeLine), LdifError> {
        let Some(line) = self.next_line()? else {
            return Err(self.error(
                after_line,
                format!("missing \"{keyword}:\" line in modrdn/moddn record"),
            ));
        };
        let attribute = self.split_attribute(&line)?;
        if !line.text[attribute.description.clone()].eq_ignore_ascii_case(keyword.as_bytes()) {
            return Err(self.error(
                line.number,
                format!(
                    "expected \"{keyword}:\", found {:?}",
                    printable(&line.text[attribute.description.clone()])
                ),
            ));
        }
        Ok((line, attribute))
    }

    fn change_moddn(&mut self, changetype_line: u64) -> Result<ChangeOperation, LdifError> {
        let (rdn_line, rdn_attribute) = self.expect_keyword("newrdn", changetype_line)?;
        let new_rdn = self
            .text_value(&rdn_line, &rdn_attribute, "newrdn")?
            .into_owned();
        if new_rdn.is_empty() {
            return Err(self.error(rdn_line.number, "newrdn is empty"));
        }
        let (delete_line, delete_attribute) =
            self.expect_keyword("deleteoldrdn", rdn_line.number)?;
        let delete_old_rdn = match delete_line.text[delete_attribute.value.clone()].trim_ascii_end()
        {
            b"0" if delete_attribute.kind == ValueKind::Plain => false,
            b"1" if delete_attribute.kind == ValueKind::Plain => true,
            other => {
                return Err(self.error(
                    delete_line.number,
                    format!("deleteoldrdn must be 0 or 1, found {:?}", printable(other)),
                ))
            }
        };
        let mut new_superior = None;
        if let Some(line) = self.next_line()? {
            let attribute = self.split_attribute(&line)?;
            if !line.text[attribute.description.clone()].eq_ignore_ascii_case(b"newsuperior") {
                return Err(self.error(
                    line.number,
                    format!(
                        "expected \"newsuperior:\" or the end of the record, found {:?}",
                        printable(&line.text[attribute.description.clone()])
                    ),
                ));
            }
            new_superior = Some(
                self.text_value(&line, &attribute, "newsuperior")?
                    .into_owned(),
            );
            if let Some(extra) = self.next_line()? {
                return Err(self.error(
                    extra.number,
                    "unexpected line after \"newsuperior:\" in modrdn/moddn record",
                ));
            }
        }
        Ok(ChangeOperation::ModDn {
            new_rdn,
            delete_old_rdn,
            new_superior,
        })
    }
}

fn percent_decode(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let high = (*bytes.get(index + 1)? as char).to_digit(16)?;
            let low = (*bytes.get(index + 2)? as char).to_digit(16)?;
            decoded.push((high * 16 + low) as u8);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    Some(decoded)
}
