//! Deleting a leaf entry (RFC 4511 §4.8; back-mdb's delete.c).

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use lmdir_schema::{LdapError, NormalizedDn, ResultCode};

use crate::changes::ChangeKind;
use crate::codec::EncodedEntry;
use crate::error::lmdb_to_ldap;
use crate::layout::{self, EntryId};
use crate::target_dn::TargetDn;
use crate::write::{ldap, WriteTxn};

impl WriteTxn<'_> {
    /// Deletes a leaf entry: a change of this server, so it takes a CSN (contextCSN).
    pub fn delete<T: TargetDn + ?Sized>(&mut self, dn: &T) -> Result<EntryId, LdapError> {
        let dn = &*self.target(dn)?;
        // The CSN first: the session log records the delete under it before the rows go.
        let csn = self.next_csn(SystemTime::now())?;
        let id = self.unlink_leaf(dn, Some(csn))?;
        self.set_deleted_csn(id, Some(csn));
        Ok(id)
    }

    /// Deletes a leaf entry as a replication provider deleted it: the change is the
    /// provider's, so this server's contextCSN does not move.
    pub fn delete_replicated<T: TargetDn + ?Sized>(
        &mut self,
        dn: &T,
    ) -> Result<EntryId, LdapError> {
        let dn = &*self.target(dn)?;
        let id = self.unlink_leaf(dn, None)?;
        self.set_deleted_csn(id, None);
        Ok(id)
    }

    /// Records the delete of entry `id` (before its rows go: its entryUUID and DN).
    pub(crate) fn record_delete(&mut self, id: EntryId, decodable: bool) -> Result<(), LdapError> {
        if !self.is_recording_changes() {
            return Ok(());
        }
        let attributes = match decodable {
            true => self.stored_attributes(id)?,
            false => Vec::new(),
        };
        let dn = self.dn_of(id)?;
        self.record_change(
            ChangeKind::Delete,
            id,
            &attributes,
            dn.clone(),
            Some(dn.clone()),
        );
        if decodable {
            self.record_prior(dn, &attributes);
        }
        Ok(())
    }

    /// `csn`: the delete's own CSN (None: applied for a provider), for the session log.
    pub(crate) fn unlink_leaf(
        &mut self,
        dn: &NormalizedDn,
        csn: Option<lmdir_sync::Csn>,
    ) -> Result<EntryId, LdapError> {
        let id = self.existing(dn)?;
        let node = self.read_owned_node(id)?;
        if node.child_count > 0 {
            return Err(ldap(
                ResultCode::NotAllowedOnNonLeaf,
                format!("entry '{dn}' has {} children", node.child_count),
            ));
        }
        self.log_removal(id, csn)?;
        let decodable = self.is_decodable(id)?;
        self.record_delete(id, decodable)?;
        if decodable {
            self.unlink_decodable(id)?;
        } else {
            // A repair (the server lets only the rootdn reach an undecodable entry): its
            // values, hence its keys and memberOf links, are unknown.
            tracing::warn!(entry = id, dn = %dn, "deleting an undecodable entry");
            if self.inner.options.memberof {
                let dn = self.dn_of(id)?;
                self.memberof_unknown_entry_deleted(id, &dn)?;
            }
            self.remove_from_every_index(id)?;
        }
        self.replace_value_rows(id, &[])?;
        let id_key = layout::encode_id(id);
        self.inner
            .databases
            .id2entry
            .delete(&mut self.txn, &id_key)
            .map_err(lmdb_to_ldap)?;
        self.inner
            .databases
            .id2node
            .delete(&mut self.txn, &id_key)
            .map_err(lmdb_to_ldap)?;
        let mut key = Vec::new();
        layout::encode_dn2id_key(node.parent, &node.rdn_normalized, &mut key);
        self.tree_changed = true;
        self.inner
            .databases
            .dn2id
            .delete(&mut self.txn, &key)
            .map_err(lmdb_to_ldap)?;
        self.adjust_subtree_sizes(node.parent, -1)?;
        self.adjust_child_count(node.parent, -1)?;
        self.record_parent_change(id, Some(node.parent), None)?;
        Ok(id)
    }

    /// Whether the entry's id2entry row decodes with the known descriptions.
    pub(crate) fn is_decodable(&self, id: EntryId) -> Result<bool, LdapError> {
        let Some(bytes) = self
            .inner
            .databases
            .id2entry
            .get(&self.txn, &layout::encode_id(id))
            .map_err(lmdb_to_ldap)?
        else {
            return Ok(false);
        };
        let descriptions = crate::lock::read(&self.inner.descriptions).clone();
        Ok(EncodedEntry::parse(bytes).is_ok_and(|encoded| {
            encoded
                .attributes()
                .all(|attribute| descriptions.get(attribute.description_number).is_some())
        }))
    }

    /// Removes a decodable entry's memberOf links and index postings (before its rows go).
    pub(crate) fn unlink_decodable(&mut self, id: EntryId) -> Result<(), LdapError> {
        let attributes = self.stored_attributes(id)?;
        if self.inner.options.memberof {
            let group_dn = self.dn_of(id)?;
            let members = self.group_members(&attributes);
            self.memberof_group_changed(id, Some(&group_dn), &members, None, &BTreeSet::new())?;
            self.memberof_member_renamed_or_deleted(id, &group_dn, &attributes, None)?;
        }
        // Re-read: the memberOf upkeep above may have changed this entry's values.
        let attributes = self.stored_attributes(id)?;
        let keys = self.inner.index_keys(&attributes);
        self.update_indexes(id, &keys, &BTreeMap::new())
    }
}
