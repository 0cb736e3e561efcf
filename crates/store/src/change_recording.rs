//! Recording a write transaction's changes (`changes.rs` holds the records): kept apart so
//! that `changes` imports nothing of the write path that uses it.

use std::sync::Arc;

use lmdir_schema::{AttributeDescription, CheckedAttribute};
use lmdir_sync::Csn;

use crate::changes::{
    uuid_bytes, Change, ChangeKind, PriorEntry, PriorNeeds, CHANGES_PER_TXN_MAX,
    PRIOR_ENTRIES_BYTES_PER_TXN_MAX, PRIOR_ENTRY_BYTES_MAX,
};
use crate::layout::EntryId;
use crate::write::{WorkingAttribute, WriteTxn};

impl WriteTxn<'_> {
    /// Keep a record of every change from now on, handed back by `commit_with_changes`, each
    /// with the entry as it was before it (`Change::before`) unless `skip_prior_entries`.
    pub fn record_changes(&mut self) {
        self.changes.recording = true;
    }

    /// Records carry no entry as it was before the change (`Change::before` None): nobody
    /// reads them (an accesslog alone, or a provider with no persistent search running), and
    /// each is a copy of the entry's values.
    pub fn skip_prior_entries(&mut self) {
        self.changes.no_prior_entries = true;
    }

    /// What the readers of the images test (`PriorNeeds`): an entry modified the point way
    /// then carries an image with only those of its out-of-line values (else none).
    pub fn bound_prior_entries(&mut self, needs: Arc<PriorNeeds>) {
        self.changes.prior_needs = Some(needs);
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
            before: None,
        };
        self.changes.committed.changes.push(change);
    }

    /// Gives the change just recorded the entry as it was before it (`Change::before`): its
    /// DN then and its attributes then, within `PRIOR_ENTRY_BYTES_MAX` and the transaction's
    /// `PRIOR_ENTRIES_BYTES_PER_TXN_MAX` (else it carries none).
    pub(crate) fn record_prior(&mut self, dn: String, attributes: &[WorkingAttribute]) {
        let log = &self.changes;
        if !log.recording || log.no_prior_entries || log.committed.overflowed {
            return;
        }
        let bytes = attributes
            .iter()
            .flat_map(|attribute| attribute.values.iter())
            .map(|(original, normalized)| original.len() + normalized.len())
            .sum::<usize>()
            .saturating_add(dn.len());
        if bytes > PRIOR_ENTRY_BYTES_MAX
            || log.prior_bytes.saturating_add(bytes) > PRIOR_ENTRIES_BYTES_PER_TXN_MAX
        {
            return;
        }
        let checked = attributes
            .iter()
            .map(|attribute| CheckedAttribute {
                description: AttributeDescription {
                    attr: attribute.attr,
                    options: attribute.options.clone(),
                },
                description_string: attribute.text.clone(),
                values: attribute.values.clone(),
            })
            .collect();
        let prior = PriorEntry {
            bytes,
            dn,
            attributes: self.inner.schema().stored_normalized(checked),
        };
        if let Some(change) = self.changes.committed.changes.last_mut() {
            change.before = Some(Arc::new(prior));
            self.changes.prior_bytes += bytes;
            self.inner
                .prior_entries_built
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
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

    /// The readers' needs when images are built (`bound_prior_entries`), else None.
    pub(crate) fn prior_needs(&self) -> Option<Arc<PriorNeeds>> {
        let log = &self.changes;
        match log.recording && !log.no_prior_entries {
            true => log.prior_needs.clone(),
            false => None,
        }
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
