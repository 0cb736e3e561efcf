//! The audit trail of writes (the server's `[accesslog]`): one record per accepted write,
//! appended in the write's own transaction, keyed by its start time in microseconds (u64 BE,
//! raised past the last key so keys are unique and ascending), purged from the oldest end by
//! age and count as records are appended. A record is its attributes in order: u16 BE count,
//! then per attribute a u16 BE name length, the name, a u32 BE value count and per value a
//! u32 BE length and the bytes.

use lmdir_schema::{LdapError, ResultCode};
use std::ops::Bound;

use crate::error::{lmdb_to_ldap, RawDatabase};
use crate::read::corrupt;
use crate::{ReadTxn, WriteTxn};

/// One record: (attribute name, values), in the order written.
pub type AuditRecord = Vec<(String, Vec<Vec<u8>>)>;

/// Most records one append purges (a lowered `max_entries` shrinks the log over several writes).
const PURGED_PER_APPEND_MAX: usize = 1024;

fn unavailable() -> LdapError {
    LdapError::new(
        ResultCode::Unavailable,
        "this store has no accesslog DB (opened read-only, made by an older lmdir)",
    )
}

pub fn encode_record(record: &AuditRecord) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(record.len().min(u16::MAX as usize) as u16).to_be_bytes());
    for (name, values) in record.iter().take(u16::MAX as usize) {
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(values.len() as u32).to_be_bytes());
        for value in values {
            out.extend_from_slice(&(value.len() as u32).to_be_bytes());
            out.extend_from_slice(value);
        }
    }
    out
}

pub fn decode_record(bytes: &[u8]) -> Option<AuditRecord> {
    let mut rest = bytes;
    let mut take = |count: usize| -> Option<&[u8]> {
        let (head, tail) = (rest.get(..count)?, rest.get(count..)?);
        rest = tail;
        Some(head)
    };
    let attributes = u16::from_be_bytes(take(2)?.try_into().ok()?);
    let mut record = Vec::with_capacity(attributes as usize);
    for _ in 0..attributes {
        let name_length = u16::from_be_bytes(take(2)?.try_into().ok()?) as usize;
        let name = String::from_utf8(take(name_length)?.to_vec()).ok()?;
        let count = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
        let mut values = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let length = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
            values.push(take(length)?.to_vec());
        }
        record.push((name, values));
    }
    rest.is_empty().then_some(record)
}

fn key_of(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

impl WriteTxn<'_> {
    fn accesslog(&self) -> Result<RawDatabase, LdapError> {
        self.inner.databases.accesslog.ok_or_else(unavailable)
    }

    /// The key a record starting at `start_micros` gets: that time, or just after the last
    /// record's when that is not earlier.
    pub fn next_audit_key(&self, start_micros: u64) -> Result<u64, LdapError> {
        let last = self.accesslog()?.last(&self.txn).map_err(lmdb_to_ldap)?;
        let after_last = last
            .and_then(|(key, _)| key_of(key))
            .map_or(0, |key| key.saturating_add(1));
        Ok(start_micros.max(after_last))
    }

    /// Appends `record` under `key` (from `next_audit_key`), then purges records older than
    /// `oldest_micros` and the oldest beyond `max_entries`.
    pub fn append_audit_record(
        &mut self,
        key: u64,
        record: &AuditRecord,
        (oldest_micros, max_entries): (u64, u64),
    ) -> Result<(), LdapError> {
        let database = self.accesslog()?;
        database
            .put(&mut self.txn, &key.to_be_bytes(), &encode_record(record))
            .map_err(lmdb_to_ldap)?;
        for _ in 0..PURGED_PER_APPEND_MAX {
            let count = database.len(&self.txn).map_err(lmdb_to_ldap)?;
            let Some((first, _)) = database.first(&self.txn).map_err(lmdb_to_ldap)? else {
                break;
            };
            let first = first.to_vec();
            let old = key_of(&first).is_some_and(|first| first < oldest_micros);
            if count <= max_entries && !old {
                break;
            }
            database
                .delete(&mut self.txn, &first)
                .map_err(lmdb_to_ldap)?;
        }
        Ok(())
    }
}

/// The records from a key on, oldest first (`ReadTxn::audit_records_from`).
pub type AuditRecords<'txn> =
    Box<dyn Iterator<Item = Result<(u64, AuditRecord), LdapError>> + 'txn>;

impl ReadTxn {
    /// Every record, oldest first, with its key (the start time in microseconds).
    pub fn audit_records(&self) -> Result<Vec<(u64, AuditRecord)>, LdapError> {
        self.audit_records_from(0)?.collect()
    }

    /// The records whose key is `from_key` or later, oldest first, read one at a time as
    /// the iterator is advanced (a search of a big log holds one record, not the log).
    pub fn audit_records_from(&self, from_key: u64) -> Result<AuditRecords<'_>, LdapError> {
        let Some(database) = self.inner.databases.accesslog else {
            return Ok(Box::new(std::iter::empty()));
        };
        let start = from_key.to_be_bytes();
        let range: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(&start[..]), Bound::Unbounded);
        let rows = database.range(&self.txn, &range).map_err(lmdb_to_ldap)?;
        Ok(Box::new(rows.map(|row| {
            let (key, value) = row.map_err(lmdb_to_ldap)?;
            let key = key_of(key).ok_or_else(|| corrupt(format!("accesslog key {key:?}")))?;
            let record =
                decode_record(value).ok_or_else(|| corrupt(format!("accesslog record {key}")))?;
            Ok((key, record))
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_cut_one_is_refused() {
        let record: AuditRecord = vec![
            ("reqType".into(), vec![b"modify".to_vec()]),
            ("reqMod".into(), vec![b"cn:+ A".to_vec(), b"sn:-".to_vec()]),
            ("reqOld".into(), Vec::new()),
        ];
        let bytes = encode_record(&record);
        assert_eq!(decode_record(&bytes), Some(record));
        assert_eq!(decode_record(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode_record(&[bytes.as_slice(), b"x"].concat()), None);
    }
}
