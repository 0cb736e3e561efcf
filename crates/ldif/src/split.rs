//! Record boundaries for parallel parsing: records are separated by blank lines, so a big chunk
//! of the file can be cut into records with one memchr pass and parsed on many threads.

use std::io::{ErrorKind, Read};

use memchr::memchr;

use crate::{parse_record, LdifError, LdifRecord, ParseOptions};

/// One record inside a chunk: `chunk[start..end]`, whose first byte is on line `first_line`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSpan {
    pub start: usize,
    pub end: usize,
    pub first_line: u64,
}

/// What `split_records` found in a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// Complete records, in file order. Blocks holding only comments or `version: 1` are left out.
    pub records: Vec<RecordSpan>,
    /// Bytes of the chunk that are done with; `chunk[consumed_bytes..]` is the start of an
    /// incomplete record to carry over to the next chunk (empty at the end of input).
    pub consumed_bytes: usize,
    /// Line number of `chunk[consumed_bytes]`.
    pub next_line: u64,
}

/// Whether a physical line makes its block a record: comments, continuations and a valid
/// `version: 1` line do not (an invalid version line does, so that parsing reports it).
fn is_record_line(text: &[u8]) -> bool {
    match text.first() {
        None | Some(b'#') | Some(b' ') => false,
        Some(b'v') | Some(b'V') => !is_version_one(text),
        Some(_) => true,
    }
}

fn is_version_one(text: &[u8]) -> bool {
    const KEYWORD: &[u8] = b"version:";
    text.len() >= KEYWORD.len()
        && text[..KEYWORD.len()].eq_ignore_ascii_case(KEYWORD)
        && text[KEYWORD.len()..].trim_ascii() == b"1"
}

/// Finds the complete records in `chunk`, whose first byte is on line `first_line` (1-based).
/// Unless `at_end_of_input`, a record is complete only once the blank line after it is in the
/// chunk (the next line could continue it), so the loader carries `chunk[consumed_bytes..]` over.
pub fn split_records(chunk: &[u8], first_line: u64, at_end_of_input: bool) -> Split {
    let mut records = Vec::new();
    let mut position = 0;
    let mut line = first_line;
    // Start offset and line of the block being read, and whether it holds a record line.
    let mut block: Option<(usize, u64)> = None;
    let mut block_is_record = false;
    loop {
        if position >= chunk.len() {
            return match block {
                Some((start, start_line)) if !at_end_of_input => Split {
                    records,
                    consumed_bytes: start,
                    next_line: start_line,
                },
                Some((start, start_line)) => {
                    if block_is_record {
                        records.push(RecordSpan {
                            start,
                            end: chunk.len(),
                            first_line: start_line,
                        });
                    }
                    Split {
                        records,
                        consumed_bytes: chunk.len(),
                        next_line: line,
                    }
                }
                None => Split {
                    records,
                    consumed_bytes: chunk.len(),
                    next_line: line,
                },
            };
        }
        let line_end = match memchr(b'\n', &chunk[position..]) {
            Some(offset) => position + offset,
            None if at_end_of_input => chunk.len(),
            None => {
                // An incomplete last line: it and its block wait for the next chunk.
                let (consumed_bytes, next_line) = block.unwrap_or((position, line));
                return Split {
                    records,
                    consumed_bytes,
                    next_line,
                };
            }
        };
        let text = &chunk[position..line_end];
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            if let Some((start, start_line)) = block.take() {
                if block_is_record {
                    records.push(RecordSpan {
                        start,
                        end: position,
                        first_line: start_line,
                    });
                }
            }
        } else {
            if block.is_none() {
                block = Some((position, line));
                // A continuation with nothing before it is malformed: parse it to report it
                // rather than skipping it like a comment's continuation.
                block_is_record = text[0] == b' ';
            }
            if !block_is_record && is_record_line(text) {
                block_is_record = true;
            }
        }
        line += 1;
        position = line_end + 1;
    }
}

/// A batch of complete records: one owned buffer and where each record is in it. Batches are
/// `Send`, so they can go to worker threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordBatch {
    pub bytes: Vec<u8>,
    pub records: Vec<RecordSpan>,
}

impl RecordBatch {
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The bytes of one record.
    pub fn record_bytes(&self, span: &RecordSpan) -> &[u8] {
        &self.bytes[span.start..span.end]
    }

    /// Each record's bytes with its first line number.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.records
            .iter()
            .map(|span| (self.record_bytes(span), span.first_line))
    }

    /// Parses every record of the batch (on the calling thread).
    pub fn parse_all(&self, options: &ParseOptions) -> Vec<Result<LdifRecord, LdifError>> {
        self.iter()
            .map(|(bytes, first_line)| parse_record(bytes, first_line, options))
            .collect()
    }
}

/// Reads any `Read` in big chunks and yields batches of complete records, carrying each chunk's
/// incomplete tail over to the next. Memory is bounded: a chunk grows beyond `chunk_bytes` only
/// for a single record longer than that, and never beyond `ParseOptions::record_bytes_max`.
pub struct ChunkedRecordSource<R> {
    reader: R,
    chunk_bytes: usize,
    record_bytes_max: usize,
    carry: Vec<u8>,
    carry_first_line: u64,
    end_of_input: bool,
    finished: bool,
}

/// Default chunk size: big enough that splitting costs little per record, small enough that a
/// few batches in flight per thread stay cheap.
pub const DEFAULT_CHUNK_BYTES: usize = 4 * 1024 * 1024;

impl<R: Read> ChunkedRecordSource<R> {
    pub fn new(reader: R, options: &ParseOptions) -> Self {
        Self::with_chunk_bytes(reader, options, DEFAULT_CHUNK_BYTES)
    }

    pub fn with_chunk_bytes(reader: R, options: &ParseOptions, chunk_bytes: usize) -> Self {
        ChunkedRecordSource {
            reader,
            chunk_bytes: chunk_bytes.max(1),
            record_bytes_max: options.record_bytes_max,
            carry: Vec::new(),
            carry_first_line: 1,
            end_of_input: false,
            finished: false,
        }
    }

    /// The next batch (never empty), or `None` at the end of input.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, LdifError> {
        if self.finished {
            return Ok(None);
        }
        let mut target_bytes = self.chunk_bytes.max(self.carry.len() + 1);
        let mut buffer = Vec::with_capacity(target_bytes);
        buffer.extend_from_slice(&self.carry);
        self.carry.clear();
        let mut first_line = self.carry_first_line;
        loop {
            self.fill(&mut buffer, target_bytes, first_line)?;
            let split = split_records(&buffer, first_line, self.end_of_input);
            if !split.records.is_empty() || self.end_of_input {
                self.carry
                    .extend_from_slice(&buffer[split.consumed_bytes..]);
                self.carry_first_line = split.next_line;
                buffer.truncate(split.consumed_bytes);
                if self.end_of_input && self.carry.is_empty() {
                    self.finished = true;
                }
                if split.records.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(RecordBatch {
                    bytes: buffer,
                    records: split.records,
                }));
            }
            // No complete record: drop what was done with (comment blocks) and, if one record
            // is bigger than the buffer, grow the buffer up to just past the limit so that an
            // oversize record is detected here.
            buffer.drain(..split.consumed_bytes);
            first_line = split.next_line;
            if buffer.len() > self.record_bytes_max {
                self.finished = true;
                return Err(LdifError::new(
                    first_line,
                    None,
                    format!(
                        "the record starting here is longer than the limit of {} bytes",
                        self.record_bytes_max
                    ),
                ));
            }
            target_bytes = self
                .chunk_bytes
                .max(buffer.len().saturating_mul(2))
                .min(self.record_bytes_max.saturating_add(2))
                .max(buffer.len() + 1);
        }
    }

    fn fill(
        &mut self,
        buffer: &mut Vec<u8>,
        target_bytes: usize,
        first_line: u64,
    ) -> Result<(), LdifError> {
        while buffer.len() < target_bytes && !self.end_of_input {
            let filled = buffer.len();
            buffer.resize(target_bytes, 0);
            match self.reader.read(&mut buffer[filled..]) {
                Ok(0) => {
                    buffer.truncate(filled);
                    self.end_of_input = true;
                }
                Ok(read_bytes) => buffer.truncate(filled + read_bytes),
                Err(error) if error.kind() == ErrorKind::Interrupted => buffer.truncate(filled),
                Err(error) => {
                    buffer.truncate(filled);
                    self.finished = true;
                    return Err(LdifError::new(
                        first_line,
                        None,
                        format!("cannot read LDIF input: {error}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl<R: Read> Iterator for ChunkedRecordSource<R> {
    type Item = Result<RecordBatch, LdifError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().transpose()
    }
}

/// Whether a non-empty physical line makes its block a record (see `split_records`).
pub(crate) fn block_line_is_record(text: &[u8], first_in_block: bool) -> bool {
    (first_in_block && text[0] == b' ') || is_record_line(text)
}
