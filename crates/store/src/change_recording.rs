//! Recording a write transaction's changes (`changes.rs` holds the records): kept apart so
//! that `changes` imports nothing of the write path that uses it.

use lmdir_sync::Csn;

use crate::changes::{uuid_bytes, Change, ChangeKind, CHANGES_PER_TXN_MAX};
use crate::layout::EntryId;
use crate::write::{WorkingAttribute, WriteTxn};

impl WriteTxn<'_> {
    /// Keep a record of every change from now on, handed back by `commit_with_changes`.
    pub fn record_changes(&mut self) {
        self.changes.recording = true;
    }

    /// The first value of attribute `name` among `attributes`.
    fn first_working_value<'a>(
        &self,
        attributes: &'a [WorkingAttribute],
        name: &str,
    ) -> Option<&'a [u8]> {
        let attr = self.inner.schema().attribute(name)?;
        attributes
            .iter()
            .find(|attribute| attribute.attr == attr)
            .and_then(|attribute| attribute.values.first())
            .map(|(original, _)| original.as_slice())
    }

    /// Records one change of entry `id`, whose attributes are now `attributes`.
    pub(crate) fn record_change(
        &mut self,
        kind: ChangeKind,
        id: EntryId,
        attributes: &[WorkingAttribute],
        dn: String,
        old_dn: Option<String>,
    ) {
        if !self.changes.recording || self.changes.committed.overflowed {
            return;
        }
        if self.changes.committed.changes.len() >= CHANGES_PER_TXN_MAX {
            self.changes.committed.changes = Vec::new();
            self.changes.committed.overflowed = true;
            return;
        }
        let change = Change {
            kind,
            id,
            entry_uuid: self
                .first_working_value(attributes, "entryUUID")
                .and_then(uuid_bytes),
            csn: self
                .first_working_value(attributes, "entryCSN")
                .and_then(|text| Csn::parse(text).ok()),
            dn,
            old_dn,
        };
        self.changes.committed.changes.push(change);
    }

    /// A delete's CSN is taken after its record (the entry's rows, and the memberOf upkeep
    /// recorded after it, are gone or done by then).
    pub(crate) fn set_deleted_csn(&mut self, id: EntryId, csn: Option<Csn>) {
        let deleted = self
            .changes
            .committed
            .changes
            .iter_mut()
            .rev()
            .find(|change| change.id == id && change.kind == ChangeKind::Delete);
        if let Some(change) = deleted {
            change.csn = csn;
        }
    }

    /// The changes recorded so far in this transaction (empty once more than
    /// `CHANGES_PER_TXN_MAX` were).
    pub fn recorded_changes(&self) -> &[Change] {
        &self.changes.committed.changes
    }

    pub(crate) fn is_recording_changes(&self) -> bool {
        self.changes.recording
    }
}

#[cfg(test)]
mod tests {
    use super::uuid_bytes;

    #[test]
    fn uuid_text_to_bytes() {
        let uuid = uuid_bytes(b"12345678-9abc-def0-0123-456789ABCDEF").unwrap();
        assert_eq!(uuid[0], 0x12);
        assert_eq!(uuid[15], 0xef);
        assert_eq!(uuid_bytes(b"12345678"), None);
        assert_eq!(uuid_bytes(b"zz345678-9abc-def0-0123-456789abcdef"), None);
        assert_eq!(uuid_bytes(b"12345678-9abc-def0-0123-456789abcdef00"), None);
    }
}
