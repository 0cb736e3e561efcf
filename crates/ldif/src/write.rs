//! The LDIF writer: folds lines at 76 columns and base64-encodes exactly the values that RFC 2849
//! does not allow as SAFE-STRING.

use std::io::{self, Write};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::{mod_op_keyword, ChangeOperation, ChangeRecord, LdifRecord, RecordBody};

/// Longest physical line written (bytes, newline excluded); continuation lines hold a space and
/// `FOLD_COLUMN - 1` bytes.
pub const FOLD_COLUMN: usize = 76;

/// Whether RFC 2849 requires `value` to be written as `attr:: base64`: it is not a SAFE-STRING
/// (NUL, LF, CR or a byte above 0x7F anywhere; space, ':' or '<' first), or it ends with a space
/// (which readers may strip).
pub fn needs_base64(value: &[u8]) -> bool {
    let Some(&first) = value.first() else {
        return false;
    };
    first == b' '
        || first == b':'
        || first == b'<'
        || value.last() == Some(&b' ')
        || value
            .iter()
            .any(|&byte| byte == 0 || byte == b'\n' || byte == b'\r' || byte >= 0x80)
}

/// Whether `text` can stand as an LDIF line's attribute description (RFC 2849 `AttributeDescription`:
/// a name or numeric OID, then `;options`): letters, digits, '-', '.', ';' and '_' (which schema
/// files in the wild use, and the LDIF reader accepts), a letter or digit first. Anything else (a newline, ':' or '<' above all) would make the line read as
/// something else, a `file://` URL included.
pub fn is_attribute_description(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|&byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b';' | b'_'))
}

/// The error for a description `is_attribute_description` refuses.
fn bad_description(description: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{description:?} is not an attribute description; nothing written"),
    )
}

/// Writes records to any `Write`. Each record is assembled in a reused buffer and written with a
/// single `write_all`; wrap files in a `BufWriter` anyway for many small records.
pub struct LdifWriter<W> {
    writer: W,
    buffer: Vec<u8>,
    /// One logical line before folding.
    line: Vec<u8>,
}

impl<W: Write> LdifWriter<W> {
    pub fn new(writer: W) -> Self {
        LdifWriter {
            writer,
            buffer: Vec::new(),
            line: Vec::new(),
        }
    }

    /// `version: 1` and a blank line.
    pub fn write_version(&mut self) -> io::Result<()> {
        self.writer.write_all(b"version: 1\n\n")
    }

    /// One content record: `dn:` then each attribute value, then a blank line.
    pub fn write_entry<D, V>(
        &mut self,
        dn: &str,
        attributes: impl IntoIterator<Item = (D, V)>,
    ) -> io::Result<()>
    where
        D: AsRef<str>,
        V: AsRef<[u8]>,
    {
        self.buffer.clear();
        self.push_value("dn", dn.as_bytes());
        for (description, value) in attributes {
            let description = description.as_ref();
            if !is_attribute_description(description) {
                return Err(bad_description(description));
            }
            self.push_value(description, value.as_ref());
        }
        self.buffer.push(b'\n');
        self.writer.write_all(&self.buffer)
    }

    /// Any record: content records as `write_entry`, change records with `changetype:`.
    pub fn write_record(&mut self, record: &LdifRecord) -> io::Result<()> {
        match &record.body {
            RecordBody::Content(attributes) => self.write_entry(
                &record.dn,
                attributes
                    .iter()
                    .map(|(description, value)| (description.as_str(), value.as_slice())),
            ),
            RecordBody::Change(change) => self.write_change(&record.dn, change),
        }
    }

    pub fn write_change(&mut self, dn: &str, change: &ChangeRecord) -> io::Result<()> {
        self.buffer.clear();
        self.push_value("dn", dn.as_bytes());
        for control in &change.controls {
            self.line.clear();
            self.line.extend_from_slice(b"control: ");
            self.line.extend_from_slice(control.oid.as_bytes());
            self.line.extend_from_slice(if control.criticality {
                b" true"
            } else {
                b" false"
            });
            if let Some(value) = &control.value {
                if needs_base64(value) {
                    self.line.extend_from_slice(b":: ");
                    let encoded = STANDARD.encode(value);
                    self.line.extend_from_slice(encoded.as_bytes());
                } else {
                    self.line.extend_from_slice(b": ");
                    self.line.extend_from_slice(value);
                }
            }
            self.fold_line();
        }
        match &change.operation {
            ChangeOperation::Add(attributes) => {
                self.buffer.extend_from_slice(b"changetype: add\n");
                for (description, value) in attributes {
                    if !is_attribute_description(description) {
                        return Err(bad_description(description));
                    }
                    self.push_value(description, value);
                }
            }
            ChangeOperation::Delete => self.buffer.extend_from_slice(b"changetype: delete\n"),
            ChangeOperation::Modify(modifications) => {
                self.buffer.extend_from_slice(b"changetype: modify\n");
                for modification in modifications {
                    if !is_attribute_description(&modification.description) {
                        return Err(bad_description(&modification.description));
                    }
                    self.push_value(
                        mod_op_keyword(modification.op),
                        modification.description.as_bytes(),
                    );
                    for value in &modification.values {
                        self.push_value(&modification.description, value);
                    }
                    self.buffer.extend_from_slice(b"-\n");
                }
            }
            ChangeOperation::ModDn {
                new_rdn,
                delete_old_rdn,
                new_superior,
            } => {
                self.buffer.extend_from_slice(b"changetype: modrdn\n");
                self.push_value("newrdn", new_rdn.as_bytes());
                self.buffer.extend_from_slice(if *delete_old_rdn {
                    b"deleteoldrdn: 1\n"
                } else {
                    b"deleteoldrdn: 0\n"
                });
                if let Some(new_superior) = new_superior {
                    self.push_value("newsuperior", new_superior.as_bytes());
                }
            }
        }
        self.buffer.push(b'\n');
        self.writer.write_all(&self.buffer)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    pub fn into_inner(self) -> W {
        self.writer
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.writer
    }

    /// Appends `description: value` (or `description:: base64`) to the buffer, folded.
    fn push_value(&mut self, description: &str, value: &[u8]) {
        self.line.clear();
        self.line.extend_from_slice(description.as_bytes());
        if value.is_empty() {
            self.line.push(b':');
        } else if needs_base64(value) {
            self.line.extend_from_slice(b":: ");
            let start = self.line.len();
            self.line.resize(
                start + base64::encoded_len(value.len(), true).unwrap_or(0),
                0,
            );
            let written = STANDARD
                .encode_slice(value, &mut self.line[start..])
                .unwrap_or(0);
            self.line.truncate(start + written);
        } else {
            self.line.extend_from_slice(b": ");
            self.line.extend_from_slice(value);
        }
        self.fold_line();
    }

    /// Moves `self.line` into the buffer as physical lines of at most `FOLD_COLUMN` bytes. Folding
    /// may split a UTF-8 sequence only in a description or DN given as raw text, which readers
    /// join back byte for byte.
    fn fold_line(&mut self) {
        let line = &self.line[..];
        if line.len() <= FOLD_COLUMN {
            self.buffer.extend_from_slice(line);
            self.buffer.push(b'\n');
            return;
        }
        self.buffer.extend_from_slice(&line[..FOLD_COLUMN]);
        self.buffer.push(b'\n');
        for piece in line[FOLD_COLUMN..].chunks(FOLD_COLUMN - 1) {
            self.buffer.push(b' ');
            self.buffer.extend_from_slice(piece);
            self.buffer.push(b'\n');
        }
    }
}

/// Writes one content record (see `LdifWriter::write_entry`).
pub fn write_entry<W, D, V>(
    writer: &mut W,
    dn: &str,
    attributes: impl IntoIterator<Item = (D, V)>,
) -> io::Result<()>
where
    W: Write,
    D: AsRef<str>,
    V: AsRef<[u8]>,
{
    LdifWriter::new(writer).write_entry(dn, attributes)
}
