//! lmdir-ldif: RFC 2849 LDIF — a streaming reader (content and change records), a record splitter
//! for parallel parsing, and a writer.
//!
//! The parser works on one record's bytes at a time (`parse_record`), so a bulk loader can find
//! record boundaries in big chunks with `split_records` / `ChunkedRecordSource` and parse the
//! records on many threads.

mod parse;
mod reader;
mod split;
mod write;

use std::borrow::Cow;
use std::fmt;

pub use parse::{parse_record, parse_record_view};
pub use reader::LdifReader;
pub use split::{split_records, ChunkedRecordSource, RecordBatch, RecordSpan, Split};
pub use write::{is_attribute_description, needs_base64, write_entry, LdifWriter, FOLD_COLUMN};

/// One attribute value with its description (`cn`, `cn;lang-en`), as read from or written to LDIF.
pub type AttributeValue = (String, Vec<u8>);

/// One LDIF record: an entry (content record) or a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdifRecord {
    /// Line number (1-based) of the record's `dn:` line.
    pub line: u64,
    pub dn: String,
    pub body: RecordBody,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordBody {
    /// An entry: attribute descriptions and values in file order.
    Content(Vec<AttributeValue>),
    Change(ChangeRecord),
}

/// A change record (RFC 2849 `ldif-change-record`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    /// `control:` lines in file order.
    pub controls: Vec<Control>,
    pub operation: ChangeOperation,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeOperation {
    Add(Vec<AttributeValue>),
    Delete,
    Modify(Vec<Modification>),
    /// `modrdn` and `moddn` (the same operation under two names).
    ModDn {
        new_rdn: String,
        delete_old_rdn: bool,
        new_superior: Option<String>,
    },
}

/// One `add:` / `delete:` / `replace:` / `increment:` block of a modify change record is a
/// `lmdir_schema::Modification` (`op`, `description`: the attribute named after the keyword,
/// `values`), so a parsed change feeds the modify code directly.
pub use lmdir_schema::{ModOp, Modification};

/// The LDIF keyword of a modify operation.
pub fn mod_op_keyword(operation: ModOp) -> &'static str {
    match operation {
        ModOp::Add => "add",
        ModOp::Delete => "delete",
        ModOp::Replace => "replace",
        ModOp::Increment => "increment",
    }
}

/// A `control:` line: `control: <oid> [true|false] [value-spec]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub oid: String,
    pub criticality: bool,
    pub value: Option<Vec<u8>>,
}

/// A parsed record that borrows plain, unfolded values from the input buffer (no allocation per
/// value); folded, base64 and URL values are owned. Turn it into an `LdifRecord` with
/// `into_owned`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Line number (1-based) of the record's `dn:` line.
    pub line: u64,
    pub dn: Cow<'a, str>,
    pub body: BodyView<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyView<'a> {
    Content(Vec<(Cow<'a, str>, Cow<'a, [u8]>)>),
    Change(ChangeRecord),
}

impl RecordView<'_> {
    pub fn into_owned(self) -> LdifRecord {
        LdifRecord {
            line: self.line,
            dn: self.dn.into_owned(),
            body: match self.body {
                BodyView::Content(attributes) => RecordBody::Content(
                    attributes
                        .into_iter()
                        .map(|(description, value)| (description.into_owned(), value.into_owned()))
                        .collect(),
                ),
                BodyView::Change(change) => RecordBody::Change(change),
            },
        }
    }
}

/// Limits and switches for parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOptions {
    /// Largest record (all of its physical lines, separators included).
    pub record_bytes_max: usize,
    /// Largest logical line (after unfolding) and largest value read from a `file://` URL.
    pub line_bytes_max: usize,
    /// Most attribute values (or modification values) in one record.
    pub values_max: usize,
    /// Whether `attr:< file:///path` may read local (regular) files. Off by default: only a
    /// caller whose LDIF is the operator's own (as `slapadd`'s) turns it on.
    pub allow_file_urls: bool,
    /// Why URLs are refused when `allow_file_urls` is off, added to the refusal (e.g. the
    /// switch that turned them off); empty for none.
    pub file_urls_refused_because: &'static str,
    /// Most bytes all the file URLs of one record may read together (each file is also held to
    /// `line_bytes_max`).
    pub url_record_bytes_max: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            record_bytes_max: 64 * 1024 * 1024,
            line_bytes_max: 64 * 1024 * 1024,
            values_max: 1_000_000,
            allow_file_urls: false,
            file_urls_refused_because: "",
            url_record_bytes_max: 64 * 1024 * 1024,
        }
    }
}

/// An LDIF error: where (physical line, 1-based; the record's DN when known) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdifError {
    pub line: u64,
    pub dn: Option<String>,
    pub message: String,
}

impl LdifError {
    pub fn new(line: u64, dn: Option<String>, message: impl Into<String>) -> Self {
        LdifError {
            line,
            dn,
            message: message.into(),
        }
    }
}

impl fmt::Display for LdifError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = escape_control(&self.message);
        match &self.dn {
            Some(dn) => write!(
                f,
                "line {} (dn: {}): {message}",
                self.line,
                escape_control(dn)
            ),
            None => write!(f, "line {}: {message}", self.line),
        }
    }
}

/// `text` with every control character (C0, DEL, C1: a terminal escape sequence, a carriage
/// return that hides what came before it) written as `\xNN`, for error messages that quote
/// their input. Borrowed when there is none.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        if character.is_control() {
            escaped.push_str(&format!("\\x{:02x}", u32::from(character)));
        } else {
            escaped.push(character);
        }
    }
    Cow::Owned(escaped)
}

impl std::error::Error for LdifError {}
