//! The streaming reader: one record at a time from any `BufRead`, memory bounded by the record
//! size limit.

use std::io::{BufRead, Read};

use crate::split::block_line_is_record;
use crate::{parse_record, LdifError, LdifRecord, ParseOptions};

/// Iterates the records of an LDIF stream. A parse error in one record is returned and reading
/// goes on with the next record; an I/O error or an oversize record ends the iteration.
pub struct LdifReader<R> {
    reader: R,
    options: ParseOptions,
    record: Vec<u8>,
    next_line: u64,
    finished: bool,
}

impl<R: BufRead> LdifReader<R> {
    pub fn new(reader: R) -> Self {
        Self::with_options(reader, ParseOptions::default())
    }

    pub fn with_options(reader: R, options: ParseOptions) -> Self {
        LdifReader {
            reader,
            options,
            record: Vec::new(),
            next_line: 1,
            finished: false,
        }
    }

    /// Whether the iteration has ended: after an error, whether it was one that ends it (an
    /// I/O error or an oversize record) rather than one record's parse error.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Reads the next block that holds a record into `self.record`; returns its first line.
    fn read_block(&mut self) -> Result<Option<u64>, LdifError> {
        self.record.clear();
        let mut first_line = None;
        let mut block_is_record = false;
        loop {
            let line_start = self.record.len();
            let remaining_bytes = self.options.record_bytes_max.saturating_sub(line_start);
            let read_bytes = Read::take(&mut self.reader, remaining_bytes as u64 + 1)
                .read_until(b'\n', &mut self.record)
                .map_err(|error| {
                    LdifError::new(
                        self.next_line,
                        None,
                        format!("cannot read LDIF input: {error}"),
                    )
                })?;
            if read_bytes == 0 {
                return Ok(first_line.filter(|_| block_is_record));
            }
            if self.record.len() > self.options.record_bytes_max {
                return Err(LdifError::new(
                    first_line.unwrap_or(self.next_line),
                    None,
                    format!(
                        "the record starting here is longer than the limit of {} bytes",
                        self.options.record_bytes_max
                    ),
                ));
            }
            let line_number = self.next_line;
            self.next_line += 1;
            let text = &self.record[line_start..];
            let text = text.strip_suffix(b"\n").unwrap_or(text);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.is_empty() {
                self.record.truncate(line_start);
                if first_line.is_some() {
                    if block_is_record {
                        return Ok(first_line);
                    }
                    self.record.clear();
                    first_line = None;
                }
                continue;
            }
            if !block_is_record && block_line_is_record(text, first_line.is_none()) {
                block_is_record = true;
            }
            first_line.get_or_insert(line_number);
        }
    }
}

impl<R: BufRead> Iterator for LdifReader<R> {
    type Item = Result<LdifRecord, LdifError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.read_block() {
            Ok(Some(first_line)) => Some(parse_record(&self.record, first_line, &self.options)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(error) => {
                self.finished = true;
                Some(Err(error))
            }
        }
    }
}
