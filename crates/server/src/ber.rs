//! A direct BER writer for the messages the server sends most: SearchResultEntry, LDAPResult-shaped
//! responses and extended responses. It writes straight into the output buffer from borrowed slices (the
//! store's zero-copy entries), avoiding ldap3_proto's intermediate `StructureTag` tree. Output is
//! byte-identical to ldap3_proto's encoder (tested), which uses minimal definite lengths.

use bytes::BytesMut;

/// Universal and application tags used by the LDAP messages written here.
pub mod tag {
    pub const INTEGER: u8 = 0x02;
    pub const OCTET_STRING: u8 = 0x04;
    pub const ENUMERATED: u8 = 0x0a;
    pub const BOOLEAN: u8 = 0x01;
    pub const SEQUENCE: u8 = 0x30;
    /// LDAPResult's `referral [3] Referral` (constructed).
    pub const REFERRAL: u8 = 0xa3;
    pub const SET: u8 = 0x31;
    /// [APPLICATION 1] BindResponse.
    pub const BIND_RESPONSE: u8 = 0x61;
    /// [APPLICATION 4] SearchResultEntry.
    pub const SEARCH_RESULT_ENTRY: u8 = 0x64;
    /// [APPLICATION 5] SearchResultDone.
    pub const SEARCH_RESULT_DONE: u8 = 0x65;
    pub const MODIFY_RESPONSE: u8 = 0x67;
    pub const ADD_RESPONSE: u8 = 0x69;
    pub const DELETE_RESPONSE: u8 = 0x6b;
    pub const MODIFY_DN_RESPONSE: u8 = 0x6d;
    pub const COMPARE_RESPONSE: u8 = 0x6f;
    /// [APPLICATION 24] ExtendedResponse.
    pub const EXTENDED_RESPONSE: u8 = 0x78;
    /// [0] Controls in LDAPMessage.
    pub const CONTROLS: u8 = 0xa0;
    /// ExtendedResponse responseName [10] (primitive).
    pub const EXTENDED_RESPONSE_NAME: u8 = 0x8a;
    /// ExtendedResponse responseValue [11] (primitive).
    pub const EXTENDED_RESPONSE_VALUE: u8 = 0x8b;
    /// [APPLICATION 25] IntermediateResponse.
    pub const INTERMEDIATE_RESPONSE: u8 = 0x79;
    /// IntermediateResponse responseName [0] (primitive).
    pub const INTERMEDIATE_RESPONSE_NAME: u8 = 0x80;
    /// IntermediateResponse responseValue [1] (primitive).
    pub const INTERMEDIATE_RESPONSE_VALUE: u8 = 0x81;
}

/// Bytes reserved for a length while the content is written; 1 + 4 bytes covers every length up to
/// 4 GiB, far above any PDU limit.
const LENGTH_RESERVED_BYTES: usize = 5;
/// Values of one attribute `EntryWriter::attribute` keeps (on the stack) between its length
/// pass and its write pass; most attributes have one to three.
const ATTRIBUTE_VALUES_KEPT_MAX: usize = 16;
/// Most values `EntryWriter::attribute` reserves room for up front from its iterator's bound
/// (16 bytes each: 64 MiB); past it the list grows as values come.
const ATTRIBUTE_VALUES_RESERVED_MAX: usize = 1 << 22;
/// Bytes per value `ValueSink` reserves beyond the first value's encoding.
const MANY_VALUES_MARGIN_BYTES: usize = 8;
/// Most bytes `ValueSink` reserves up front (a larger attribute grows as it is written).
const MANY_VALUES_RESERVED_BYTES_MAX: usize = 256 << 20;
/// Most elements `BerWriter::close_innermost` ends in one pass.
const CLOSED_AT_ONCE_MAX: usize = 4;

/// Writes nested TLVs into a buffer. `open` reserves room for the length, `close` writes the minimal
/// length and slides the content left if fewer bytes were needed.
pub struct BerWriter<'buffer> {
    buffer: &'buffer mut BytesMut,
    open_content_starts: Vec<usize>,
}

impl<'buffer> BerWriter<'buffer> {
    pub fn new(buffer: &'buffer mut BytesMut) -> Self {
        BerWriter {
            buffer,
            open_content_starts: Vec::with_capacity(8),
        }
    }

    /// Starts a constructed element with `tag_byte`; must be matched by `close`.
    pub fn open(&mut self, tag_byte: u8) {
        self.buffer.extend_from_slice(&[tag_byte, 0, 0, 0, 0, 0]);
        self.open_content_starts.push(self.buffer.len());
    }

    /// Ends the innermost open element.
    pub fn close(&mut self) {
        let content_start = self
            .open_content_starts
            .pop()
            .expect("BerWriter::close without a matching open");
        let content_length = self.buffer.len() - content_start;
        let length_start = content_start - LENGTH_RESERVED_BYTES;
        let mut length_bytes = [0u8; LENGTH_RESERVED_BYTES];
        let length_size = encode_length(content_length, &mut length_bytes);
        self.buffer[length_start..length_start + length_size]
            .copy_from_slice(&length_bytes[..length_size]);
        let unused = LENGTH_RESERVED_BYTES - length_size;
        if unused > 0 {
            self.buffer
                .copy_within(content_start.., length_start + length_size);
            let new_length = self.buffer.len() - unused;
            self.buffer.truncate(new_length);
        }
    }

    /// Ends the `count` innermost open elements at once: the bytes of `count` calls of
    /// `close`, with the content moved left once instead of once per element (a large entry's
    /// attribute list, entry and message are three slides of megabytes otherwise).
    pub fn close_innermost(&mut self, count: usize) {
        assert!(
            (1..=CLOSED_AT_ONCE_MAX).contains(&count) && count <= self.depth(),
            "BerWriter::close_innermost({count}) with {} open elements",
            self.depth()
        );
        let first = self.open_content_starts.len() - count;
        let mut starts = [0usize; CLOSED_AT_ONCE_MAX];
        starts[..count].copy_from_slice(&self.open_content_starts[first..]);
        self.open_content_starts.truncate(first);
        let end = self.buffer.len();
        // Content lengths, innermost first: each holds what lies between its reserved length
        // and the next element's tag, plus that element once encoded.
        let mut lengths = [[0u8; LENGTH_RESERVED_BYTES]; CLOSED_AT_ONCE_MAX];
        let mut sizes = [0usize; CLOSED_AT_ONCE_MAX];
        let mut inner_encoded = 0;
        for index in (0..count).rev() {
            let content_length = match starts.get(index + 1).filter(|_| index + 1 < count) {
                Some(&inner_start) => {
                    inner_start - 1 - LENGTH_RESERVED_BYTES - starts[index] + inner_encoded
                }
                None => end - starts[index],
            };
            sizes[index] = encode_length(content_length, &mut lengths[index]);
            inner_encoded = 1 + sizes[index] + content_length;
        }
        // Left to right: each length, then the bytes up to the next reserved length (its tag
        // included), moved to follow it.
        let mut at = starts[0] - LENGTH_RESERVED_BYTES;
        for index in 0..count {
            self.buffer[at..at + sizes[index]].copy_from_slice(&lengths[index][..sizes[index]]);
            at += sizes[index];
            let segment_end = if index + 1 < count {
                starts[index + 1] - LENGTH_RESERVED_BYTES
            } else {
                end
            };
            self.buffer.copy_within(starts[index]..segment_end, at);
            at += segment_end - starts[index];
        }
        self.buffer.truncate(at);
    }

    /// A primitive element with the given content.
    pub fn primitive(&mut self, tag_byte: u8, content: &[u8]) {
        let mut length_bytes = [0u8; LENGTH_RESERVED_BYTES];
        let length_size = encode_length(content.len(), &mut length_bytes);
        self.buffer.reserve(1 + length_size + content.len());
        self.buffer.extend_from_slice(&[tag_byte]);
        self.buffer.extend_from_slice(&length_bytes[..length_size]);
        self.buffer.extend_from_slice(content);
    }

    pub fn octet_string(&mut self, content: &[u8]) {
        self.primitive(tag::OCTET_STRING, content);
    }

    pub fn integer(&mut self, tag_byte: u8, value: i64) {
        let mut bytes = [0u8; 8];
        let size = encode_integer(value, &mut bytes);
        self.primitive(tag_byte, &bytes[8 - size..]);
    }

    pub fn boolean(&mut self, value: bool) {
        self.primitive(tag::BOOLEAN, &[if value { 0xff } else { 0 }]);
    }

    pub fn depth(&self) -> usize {
        self.open_content_starts.len()
    }
}

impl Drop for BerWriter<'_> {
    fn drop(&mut self) {
        // An element left open would leave placeholder bytes in the output: a programming error.
        debug_assert!(
            self.open_content_starts.is_empty() || std::thread::panicking(),
            "BerWriter dropped with {} open elements",
            self.open_content_starts.len()
        );
    }
}

/// Bytes of a whole TLV (one tag byte, minimal length, content) with `content_length` bytes.
fn primitive_encoded_length(content_length: usize) -> usize {
    let length_size = match content_length {
        0..=0x7F => 1,
        0x80..=0xFF => 2,
        0x100..=0xFFFF => 3,
        0x1_0000..=0xFF_FFFF => 4,
        _ => 5,
    };
    1 + length_size + content_length
}

/// Writes a tag and the minimal length of `content_length` at `out[at..]`; returns the position
/// after them. `out` was sized for them. Always inlined: called per value, and a call costs
/// as much as the stores (measured: not inlined at `#[inline]`).
#[inline(always)]
fn put_header(out: &mut [u8], at: usize, tag_byte: u8, content_length: usize) -> usize {
    out[at] = tag_byte;
    if content_length < 0x80 {
        out[at + 1] = content_length as u8;
        return at + 2;
    }
    let mut length_bytes = [0u8; LENGTH_RESERVED_BYTES];
    let length_size = encode_length(content_length, &mut length_bytes);
    out[at + 1..at + 1 + length_size].copy_from_slice(&length_bytes[..length_size]);
    at + 1 + length_size
}

/// Appends a tag and the minimal length of `content_length` (room reserved by the caller).
#[inline(always)]
fn append_header(buffer: &mut BytesMut, tag_byte: u8, content_length: usize) {
    let mut header = [0u8; 1 + LENGTH_RESERVED_BYTES];
    let end = put_header(&mut header, 0, tag_byte, content_length);
    buffer.extend_from_slice(&header[..end]);
}

/// A whole primitive element at `out[at..]`; returns the position after it.
#[inline(always)]
fn put_primitive(out: &mut [u8], at: usize, tag_byte: u8, content: &[u8]) -> usize {
    let at = put_header(out, at, tag_byte, content.len());
    out[at..at + content.len()].copy_from_slice(content);
    at + content.len()
}

/// Minimal definite-length encoding; returns the number of bytes written to `out`.
fn encode_length(length: usize, out: &mut [u8; LENGTH_RESERVED_BYTES]) -> usize {
    assert!(
        length <= u32::MAX as usize,
        "BER length {length} exceeds 4 GiB"
    );
    if length < 128 {
        out[0] = length as u8;
        return 1;
    }
    let be = (length as u32).to_be_bytes();
    let skip = be.iter().take_while(|byte| **byte == 0).count();
    let count = 4 - skip;
    out[0] = 0x80 | count as u8;
    out[1..=count].copy_from_slice(&be[skip..]);
    1 + count
}

/// Minimal two's complement big-endian integer into the tail of `out`; returns its byte count.
fn encode_integer(value: i64, out: &mut [u8; 8]) -> usize {
    *out = value.to_be_bytes();
    let mut start = 0;
    while start < 7 {
        let redundant = (out[start] == 0x00 && out[start + 1] & 0x80 == 0)
            || (out[start] == 0xff && out[start + 1] & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    8 - start
}

/// One control to attach to a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseControl {
    pub oid: String,
    pub criticality: bool,
    pub value: Option<Vec<u8>>,
}

fn write_controls(writer: &mut BerWriter<'_>, controls: &[ResponseControl]) {
    if controls.is_empty() {
        return;
    }
    writer.open(tag::CONTROLS);
    for control in controls {
        writer.open(tag::SEQUENCE);
        writer.octet_string(control.oid.as_bytes());
        if control.criticality {
            writer.boolean(true);
        }
        if let Some(value) = &control.value {
            writer.octet_string(value);
        }
        writer.close();
    }
    writer.close();
}

/// The LDAPResult fields shared by most responses.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultFields<'text> {
    pub code: u32,
    pub matched_dn: &'text str,
    pub message: &'text str,
}

fn write_result_fields(writer: &mut BerWriter<'_>, result: &ResultFields<'_>) {
    writer.integer(tag::ENUMERATED, i64::from(result.code));
    writer.octet_string(result.matched_dn.as_bytes());
    writer.octet_string(result.message.as_bytes());
}

/// Writes a complete LDAPMessage whose protocolOp is an LDAPResult-shaped response
/// (`operation_tag` is e.g. `tag::SEARCH_RESULT_DONE`).
pub fn write_result_message(
    buffer: &mut BytesMut,
    message_id: i32,
    operation_tag: u8,
    result: &ResultFields<'_>,
    controls: &[ResponseControl],
) {
    write_result_message_with_referral(buffer, message_id, operation_tag, result, &[], controls);
}

/// As `write_result_message`, with the LDAPResult's `referral [3] SEQUENCE OF URI` when
/// `referral` is not empty (RFC 4511 §4.1.10).
pub fn write_result_message_with_referral(
    buffer: &mut BytesMut,
    message_id: i32,
    operation_tag: u8,
    result: &ResultFields<'_>,
    referral: &[String],
    controls: &[ResponseControl],
) {
    let mut writer = BerWriter::new(buffer);
    writer.open(tag::SEQUENCE);
    writer.integer(tag::INTEGER, i64::from(message_id));
    writer.open(operation_tag);
    write_result_fields(&mut writer, result);
    if !referral.is_empty() {
        writer.open(tag::REFERRAL);
        for url in referral {
            writer.octet_string(url.as_bytes());
        }
        writer.close();
    }
    writer.close();
    write_controls(&mut writer, controls);
    writer.close();
}

/// Writes an ExtendedResponse message (also used for the unsolicited Notice of Disconnection).
pub fn write_extended_response(
    buffer: &mut BytesMut,
    message_id: i32,
    result: &ResultFields<'_>,
    response_name: Option<&str>,
    response_value: Option<&[u8]>,
    controls: &[ResponseControl],
) {
    let mut writer = BerWriter::new(buffer);
    writer.open(tag::SEQUENCE);
    writer.integer(tag::INTEGER, i64::from(message_id));
    writer.open(tag::EXTENDED_RESPONSE);
    write_result_fields(&mut writer, result);
    if let Some(name) = response_name {
        writer.primitive(tag::EXTENDED_RESPONSE_NAME, name.as_bytes());
    }
    if let Some(value) = response_value {
        writer.primitive(tag::EXTENDED_RESPONSE_VALUE, value);
    }
    writer.close();
    write_controls(&mut writer, controls);
    writer.close();
}

/// Writes an IntermediateResponse message (RFC 4511 §4.13), e.g. a Sync Info (RFC 4533).
pub fn write_intermediate_response(
    buffer: &mut BytesMut,
    message_id: i32,
    response_name: &str,
    response_value: &[u8],
) {
    let mut writer = BerWriter::new(buffer);
    writer.open(tag::SEQUENCE);
    writer.integer(tag::INTEGER, i64::from(message_id));
    writer.open(tag::INTERMEDIATE_RESPONSE);
    writer.primitive(tag::INTERMEDIATE_RESPONSE_NAME, response_name.as_bytes());
    writer.primitive(tag::INTERMEDIATE_RESPONSE_VALUE, response_value);
    writer.close();
    writer.close();
}

/// Streams one SearchResultEntry: call `attribute` once per attribute, then `finish`.
pub struct EntryWriter<'buffer> {
    writer: BerWriter<'buffer>,
}

impl<'buffer> EntryWriter<'buffer> {
    pub fn begin(buffer: &'buffer mut BytesMut, message_id: i32, dn: &[u8]) -> Self {
        let mut writer = BerWriter::new(buffer);
        writer.open(tag::SEQUENCE);
        writer.integer(tag::INTEGER, i64::from(message_id));
        writer.open(tag::SEARCH_RESULT_ENTRY);
        writer.octet_string(dn);
        writer.open(tag::SEQUENCE);
        EntryWriter { writer }
    }

    /// A bare SearchResultEntry (no LDAPMessage around it), as carried in the value of the
    /// pre-read / post-read response controls (RFC 4527 §3.2). End it with `finish_bare`.
    pub fn begin_bare(buffer: &'buffer mut BytesMut, dn: &[u8]) -> Self {
        let mut writer = BerWriter::new(buffer);
        writer.open(tag::SEARCH_RESULT_ENTRY);
        writer.octet_string(dn);
        writer.open(tag::SEQUENCE);
        EntryWriter { writer }
    }

    pub fn finish_bare(mut self) {
        self.writer.close_innermost(2); // attributes, SearchResultEntry
        debug_assert_eq!(self.writer.depth(), 0);
    }

    /// Writes one PartialAttribute; with `values` empty it is the typesOnly form. The lengths
    /// are summed first (the values are borrowed slices, so that pass is cheap), so nothing is
    /// written twice: this is most of a search's output.
    pub fn attribute<'value, Values>(&mut self, description: &[u8], values: Values)
    where
        Values: IntoIterator<Item = &'value [u8]>,
    {
        // The values are read once (a large group's stream from a B-tree cursor): the first
        // ones kept in place, more as borrowed slices in `more` (16 bytes each, never copied).
        // `more` is sized from the iterator's bound (a large group's stored value count), so
        // 100,000 values are not copied through a dozen doublings.
        let values = values.into_iter();
        let more_capacity_values = values.size_hint().1.map_or(0, |upper| {
            upper
                .saturating_sub(ATTRIBUTE_VALUES_KEPT_MAX)
                .min(ATTRIBUTE_VALUES_RESERVED_MAX)
        });
        let mut kept: [&[u8]; ATTRIBUTE_VALUES_KEPT_MAX] = [&[]; ATTRIBUTE_VALUES_KEPT_MAX];
        let mut more: Vec<&[u8]> = Vec::with_capacity(more_capacity_values);
        let mut count = 0;
        let mut set_length = 0;
        for value in values {
            set_length += primitive_encoded_length(value.len());
            match kept.get_mut(count) {
                Some(slot) => *slot = value,
                None => more.push(value),
            }
            count += 1;
        }
        let sequence_length =
            primitive_encoded_length(description.len()) + primitive_encoded_length(set_length);
        let total = primitive_encoded_length(sequence_length);
        if count > ATTRIBUTE_VALUES_KEPT_MAX {
            // Many values (a group): appended into room reserved once, so the megabytes are
            // written once, not zero-filled first (0.6 % of a 100,000-value read's instructions).
            let buffer = &mut *self.writer.buffer;
            let start = buffer.len();
            buffer.reserve(total);
            append_header(buffer, tag::SEQUENCE, sequence_length);
            append_header(buffer, tag::OCTET_STRING, description.len());
            buffer.extend_from_slice(description);
            append_header(buffer, tag::SET, set_length);
            for value in kept.iter().chain(&more) {
                append_header(buffer, tag::OCTET_STRING, value.len());
                buffer.extend_from_slice(value);
            }
            debug_assert_eq!(
                buffer.len() - start,
                total,
                "attribute length computed and written differ"
            );
            return;
        }
        // The whole attribute is sized at once and filled in place: each tag and length is a
        // byte store, not an append that checks capacity and calls memcpy (three per value,
        // then most of a full scan's instructions).
        let start = self.writer.buffer.len();
        self.writer.buffer.resize(start + total, 0);
        let out = &mut self.writer.buffer[start..];
        let mut at = put_header(out, 0, tag::SEQUENCE, sequence_length);
        at = put_primitive(out, at, tag::OCTET_STRING, description);
        at = put_header(out, at, tag::SET, set_length);
        for value in kept[..count.min(ATTRIBUTE_VALUES_KEPT_MAX)]
            .iter()
            .chain(&more)
        {
            at = put_primitive(out, at, tag::OCTET_STRING, value);
        }
        debug_assert_eq!(at, total, "attribute length computed and written differ");
    }

    /// Writes one PartialAttribute of many values (a large group's) in one pass over them:
    /// `write_values` hands each value to the [`ValueSink`] once, each is appended as it comes,
    /// and the two lengths are closed after (one slide of the values when they need fewer length
    /// bytes than reserved). Nothing is kept per value: `attribute` keeps a 16-byte slice of
    /// each to size the set first, 16 MB for a 1,000,000-member group.
    pub fn attribute_many_values(
        &mut self,
        description: &[u8],
        value_count_hint: usize,
        write_values: impl FnOnce(&mut ValueSink<'_>),
    ) {
        self.writer.open(tag::SEQUENCE);
        self.writer.octet_string(description);
        self.writer.open(tag::SET);
        let mut sink = ValueSink {
            buffer: &mut *self.writer.buffer,
            value_count_hint,
        };
        write_values(&mut sink);
        self.writer.close_innermost(2); // the set, the attribute
    }

    /// Whether an attribute of `value_count` values is written by `attribute_many_values`
    /// rather than `attribute`.
    pub fn has_many_values(value_count: usize) -> bool {
        value_count > ATTRIBUTE_VALUES_KEPT_MAX
    }

    pub fn finish(mut self, controls: &[ResponseControl]) {
        if controls.is_empty() {
            self.writer.close_innermost(3); // attributes, SearchResultEntry, LDAPMessage
        } else {
            self.writer.close_innermost(2); // attributes, SearchResultEntry
            write_controls(&mut self.writer, controls);
            self.writer.close(); // LDAPMessage
        }
        debug_assert_eq!(self.writer.depth(), 0);
    }
}

/// Where `EntryWriter::attribute_many_values` takes its values: each `push` appends one
/// OCTET STRING.
pub struct ValueSink<'buffer> {
    buffer: &'buffer mut BytesMut,
    /// Values still expected (the stored count): room for them is reserved at the first push,
    /// from its length, so a large group's megabytes are not copied through a dozen doublings.
    value_count_hint: usize,
}

impl ValueSink<'_> {
    #[inline]
    pub fn push(&mut self, value: &[u8]) {
        if self.value_count_hint > 0 {
            // Values of one attribute have similar lengths (DNs under one parent): the first
            // one's plus a margin, capped; a longer tail grows the buffer as usual.
            let per_value = primitive_encoded_length(value.len()) + MANY_VALUES_MARGIN_BYTES;
            let estimate = per_value.saturating_mul(self.value_count_hint);
            self.buffer
                .reserve(estimate.min(MANY_VALUES_RESERVED_BYTES_MAX));
            self.value_count_hint = 0;
        }
        if value.len() < 0x80 {
            // A fixed-size header: two byte stores, not a call to memcpy.
            self.buffer
                .extend_from_slice(&[tag::OCTET_STRING, value.len() as u8]);
        } else {
            append_header(self.buffer, tag::OCTET_STRING, value.len());
        }
        self.buffer.extend_from_slice(value);
    }
}

/// The Notice of Disconnection OID (RFC 4511 §4.4.1).
pub const NOTICE_OF_DISCONNECTION_OID: &str = "1.3.6.1.4.1.1466.20036";

/// An unsolicited Notice of Disconnection (messageID 0) with the given result code and reason.
pub fn notice_of_disconnection(code: u32, message: &str) -> BytesMut {
    let mut buffer = BytesMut::with_capacity(64 + message.len());
    write_extended_response(
        &mut buffer,
        0,
        &ResultFields {
            code,
            matched_dn: "",
            message,
        },
        Some(NOTICE_OF_DISCONNECTION_OID),
        None,
        &[],
    );
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `close_innermost(n)` writes the bytes of `n` calls of `close`, whatever the lengths'
    /// sizes (1 to 4 bytes) at each level.
    #[test]
    fn closing_several_elements_at_once_matches_closing_them_one_by_one() {
        let sizes = [0usize, 5, 120, 127, 128, 255, 256, 65_535, 65_536, 70_000];
        for depth in 1..=CLOSED_AT_ONCE_MAX {
            for (round, &inner) in sizes.iter().enumerate() {
                let between = sizes[(round * 7 + depth) % sizes.len()] % 300;
                let write = |buffer: &mut BytesMut, at_once: bool| {
                    let mut writer = BerWriter::new(buffer);
                    writer.open(tag::SEQUENCE);
                    writer.octet_string(b"outside");
                    for level in 0..depth {
                        writer.open(0x30 + level as u8);
                        writer.octet_string(&vec![b'b'; between]);
                    }
                    writer.octet_string(&vec![b'v'; inner]);
                    if at_once {
                        writer.close_innermost(depth);
                    } else {
                        (0..depth).for_each(|_| writer.close());
                    }
                    writer.octet_string(b"after");
                    writer.close();
                };
                let (mut one_by_one, mut at_once) = (BytesMut::new(), BytesMut::new());
                write(&mut one_by_one, false);
                write(&mut at_once, true);
                assert_eq!(
                    one_by_one, at_once,
                    "depth {depth}, inner {inner}, between {between}"
                );
            }
        }
    }
    /// `attribute_many_values` writes the bytes `attribute` writes for the same values, at
    /// every size of the set's and the attribute's lengths (1 to 4 bytes), with and without
    /// attributes around it, whatever the count hint says.
    #[test]
    fn an_attribute_written_in_one_pass_matches_the_sized_form() {
        for count in [17usize, 40, 200, 3_000, 70_000] {
            for hint in [0, count / 2, count, count * 3] {
                // Mostly DNs (one-byte lengths), some longer values (two-byte lengths) and one
                // of three-byte length.
                let values: Vec<Vec<u8>> = (0..count)
                    .map(|index| match index {
                        9 => vec![b'x'; 70_000],
                        _ if index % 7 == 3 => vec![b'y'; 130 + index % 200],
                        _ => format!("uid=u{index:07},ou=People,dc=example,dc=com").into_bytes(),
                    })
                    .collect();
                let write = |buffer: &mut BytesMut, one_pass: bool| {
                    let mut entry = EntryWriter::begin(buffer, 7, b"cn=big,ou=Groups");
                    entry.attribute(b"cn", [&b"big"[..]]);
                    if one_pass {
                        entry.attribute_many_values(b"member", hint, |sink| {
                            values.iter().for_each(|value| sink.push(value))
                        });
                    } else {
                        entry.attribute(b"member", values.iter().map(Vec::as_slice));
                    }
                    entry.attribute(b"objectClass", [&b"groupOfNames"[..]]);
                    entry.finish(&[]);
                };
                let (mut sized, mut one_pass) = (BytesMut::new(), BytesMut::new());
                write(&mut sized, false);
                write(&mut one_pass, true);
                assert!(sized == one_pass, "{count} values, hint {hint}");
            }
        }
        assert!(!EntryWriter::has_many_values(ATTRIBUTE_VALUES_KEPT_MAX));
        assert!(EntryWriter::has_many_values(ATTRIBUTE_VALUES_KEPT_MAX + 1));
    }

    use ldap3_proto::proto::{
        LdapExtendedResponse, LdapMsg, LdapOp, LdapPartialAttribute, LdapResult, LdapResultCode,
        LdapSearchResultEntry,
    };
    use ldap3_proto::LdapCodec;
    use tokio_util::codec::Encoder;

    fn reference(message: LdapMsg) -> Vec<u8> {
        let mut buffer = BytesMut::new();
        LdapCodec::default()
            .encode(message, &mut buffer)
            .expect("reference encode");
        buffer.to_vec()
    }

    fn sample_entry(value_size: usize, attribute_count: usize) -> LdapSearchResultEntry {
        LdapSearchResultEntry {
            dn: "uid=u0000001,ou=People,dc=example,dc=com".to_string(),
            attributes: (0..attribute_count)
                .map(|index| LdapPartialAttribute {
                    atype: format!("attribute{index}"),
                    vals: (0..(index % 3))
                        .map(|value_index| vec![b'a' + (value_index as u8); value_size])
                        .collect(),
                })
                .collect(),
        }
    }

    fn encode_own(message_id: i32, entry: &LdapSearchResultEntry) -> Vec<u8> {
        let mut buffer = BytesMut::new();
        let mut writer = EntryWriter::begin(&mut buffer, message_id, entry.dn.as_bytes());
        for attribute in &entry.attributes {
            writer.attribute(
                attribute.atype.as_bytes(),
                attribute.vals.iter().map(Vec::as_slice),
            );
        }
        writer.finish(&[]);
        buffer.to_vec()
    }

    #[test]
    fn search_entry_bytes_match_ldap3_proto_for_all_length_forms() {
        // Value sizes straddle the short/long length boundaries (127/128, 255/256, 65535/65536).
        for value_size in [0, 1, 127, 128, 255, 256, 65_535, 65_536] {
            for attribute_count in [0, 1, 5, 40] {
                for message_id in [0, 1, 127, 128, 255, 256, 32_768, i32::MAX] {
                    let entry = sample_entry(value_size, attribute_count);
                    let expected = reference(LdapMsg::new(
                        message_id,
                        LdapOp::SearchResultEntry(entry.clone()),
                    ));
                    assert_eq!(
                        encode_own(message_id, &entry),
                        expected,
                        "value_size={value_size} attributes={attribute_count} id={message_id}"
                    );
                }
            }
        }
    }

    /// An iterator whose `size_hint` upper bound is `claimed_upper` whatever it yields: the
    /// writer sizes its value list from that bound and must not depend on it being true.
    struct ClaimedBound<'a> {
        values: std::slice::Iter<'a, Vec<u8>>,
        claimed_upper: usize,
    }

    impl<'a> Iterator for ClaimedBound<'a> {
        type Item = &'a [u8];
        fn next(&mut self) -> Option<&'a [u8]> {
            self.values.next().map(Vec::as_slice)
        }
        fn size_hint(&self) -> (usize, Option<usize>) {
            (0, Some(self.claimed_upper))
        }
    }

    #[test]
    fn many_valued_attribute_bytes_match_whatever_the_size_hint() {
        // Past ATTRIBUTE_VALUES_KEPT_MAX values the writer keeps them in a list it sizes from
        // the iterator's upper bound (a large group's stored value count).
        for value_count in [0, 15, 16, 17, 1_000, 5_000] {
            let entry = LdapSearchResultEntry {
                dn: "cn=big,ou=Groups,dc=example,dc=com".to_string(),
                attributes: vec![LdapPartialAttribute {
                    atype: "member".to_string(),
                    vals: (0..value_count)
                        .map(|index| format!("uid=u{index:07},ou=people,dc=example,dc=com").into())
                        .collect(),
                }],
            };
            let expected = reference(LdapMsg::new(3, LdapOp::SearchResultEntry(entry.clone())));
            for claimed_upper in [0, value_count / 2, value_count, value_count * 2, usize::MAX] {
                let mut buffer = BytesMut::new();
                let mut writer = EntryWriter::begin(&mut buffer, 3, entry.dn.as_bytes());
                let values = ClaimedBound {
                    values: entry.attributes[0].vals.iter(),
                    claimed_upper,
                };
                writer.attribute(b"member", values);
                writer.finish(&[]);
                assert_eq!(
                    buffer.to_vec(),
                    expected,
                    "values={value_count} claimed upper bound={claimed_upper}"
                );
            }
        }
    }

    #[test]
    fn result_messages_match_ldap3_proto() {
        for (code, code_enum) in [
            (0, LdapResultCode::Success),
            (32, LdapResultCode::NoSuchObject),
            (122, LdapResultCode::AssertionFailed),
            (4096, LdapResultCode::EsyncRefreshRequired),
        ] {
            let result = LdapResult {
                code: code_enum,
                matcheddn: "dc=example,dc=com".to_string(),
                message: "x".repeat(200),
                referral: vec![],
            };
            let expected = reference(LdapMsg::new(7, LdapOp::SearchResultDone(result.clone())));
            let mut buffer = BytesMut::new();
            write_result_message(
                &mut buffer,
                7,
                tag::SEARCH_RESULT_DONE,
                &ResultFields {
                    code,
                    matched_dn: &result.matcheddn,
                    message: &result.message,
                },
                &[],
            );
            assert_eq!(buffer.to_vec(), expected, "code {code}");
        }
    }

    #[test]
    fn extended_response_matches_ldap3_proto() {
        let expected = reference(LdapMsg::new(
            0,
            LdapOp::ExtendedResponse(LdapExtendedResponse {
                res: LdapResult {
                    code: LdapResultCode::Unavailable,
                    matcheddn: String::new(),
                    message: "server shutting down".to_string(),
                    referral: vec![],
                },
                name: Some(NOTICE_OF_DISCONNECTION_OID.to_string()),
                value: None,
            }),
        ));
        assert_eq!(
            notice_of_disconnection(52, "server shutting down").to_vec(),
            expected
        );
    }

    #[test]
    fn controls_are_decodable_by_ldap3_proto() {
        use tokio_util::codec::Decoder;
        let mut buffer = BytesMut::new();
        write_result_message(
            &mut buffer,
            3,
            tag::SEARCH_RESULT_DONE,
            &ResultFields {
                code: 0,
                matched_dn: "",
                message: "",
            },
            &[ResponseControl {
                oid: "1.2.3.4".to_string(),
                criticality: false,
                value: Some(vec![1, 2, 3]),
            }],
        );
        let decoded = LdapCodec::default()
            .decode(&mut buffer)
            .expect("decode")
            .expect("complete message");
        assert_eq!(decoded.msgid, 3);
        assert_eq!(decoded.ctrl.len(), 1);
    }

    #[test]
    fn integer_encoding_is_minimal_twos_complement() {
        let cases: [(i64, &[u8]); 7] = [
            (0, &[0]),
            (127, &[0x7f]),
            (128, &[0x00, 0x80]),
            (255, &[0x00, 0xff]),
            (-1, &[0xff]),
            (-128, &[0x80]),
            (-129, &[0xff, 0x7f]),
        ];
        for (value, expected) in cases {
            let mut bytes = [0u8; 8];
            let size = encode_integer(value, &mut bytes);
            assert_eq!(&bytes[8 - size..], expected, "value {value}");
        }
    }
}
