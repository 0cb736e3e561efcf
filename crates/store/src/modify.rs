//! Modifying an entry (RFC 4511 §4.6; back-mdb's modify.c).

use lmdir_schema::{LdapError, Modification};

use crate::changes::ChangeKind;
use crate::layout::EntryId;
use crate::target_dn::TargetDn;
use crate::write::{held_rdn_values, require_rdn_value, WriteContext, WriteTxn};

impl WriteTxn<'_> {
    /// Modifies an entry (RFC 4511 §4.6; all or nothing).
    pub fn modify<T: TargetDn + ?Sized>(
        &mut self,
        dn: &T,
        modifications: &[Modification],
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        let dn = &*self.target(dn)?;
        let id = self.existing(dn)?;
        // A client's memberOf is looked at only where it may write one at all (Relax); else
        // the modify refuses it as NO-USER-MODIFICATION.
        let may_write_memberof = context.relax || context.skip_schema_check;
        let client_memberof = match !context.replicated && may_write_memberof {
            true => self.memberof_of_client_modify(id, dn.as_str(), modifications)?,
            false => None,
        };
        let Some((named, others)) = client_memberof else {
            return self.modify_entry(id, dn, modifications, context);
        };
        // A client's memberOf change that agrees with the groups: memberOf is then set from
        // the groups (their DNs as stored, as every peer sets it), not from the request's text.
        let id = self.modify_entry(id, dn, &others, context)?;
        self.memberof_settle(id, &named)?;
        Ok(id)
    }

    /// `modify` once the request's memberOf is settled: by point writes where the entry's
    /// values live out of line, else in one rewrite of the record.
    fn modify_entry(
        &mut self,
        id: EntryId,
        dn: &lmdir_schema::NormalizedDn,
        modifications: &[Modification],
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        if let Some(id) = self.modify_out_of_line(id, dn, modifications, context)? {
            return Ok(id);
        }
        let old_attributes = self.stored_attributes(id)?;
        // The stored values as they are (normalized when written): only the request's values
        // are normalized, once each (`Schema::apply_normalized_modification`).
        // (`old_attributes` stays for the index and memberOf differences below.)
        let mut modified = self.inner.stored_normalized(old_attributes.clone());
        let schema = self.inner.schema();
        let held = held_rdn_values(&schema, &modified, dn);
        for modification in modifications {
            self.check_deadline()?;
            if !context.skip_schema_check && !context.relax {
                schema.check_user_modification(&modification.description)?;
            }
            schema.apply_normalized_modification(
                &mut modified,
                modification,
                context.permissive_modify,
            )?;
        }
        // RDN values cannot be removed.
        for (attr, normalized) in held {
            require_rdn_value(self.inner, &modified, attr, &normalized, dn.dn())?;
        }
        self.check_deadline()?;
        let mut attributes =
            self.inner
                .modified_attributes(modified, dn, context.skip_schema_check)?;
        let stamped = self.stamp_modification(&mut attributes, context)?;
        self.record_local_change_states(&mut attributes, modifications, stamped)?;
        self.check_entry_limits(&attributes, context)?;
        self.check_deadline()?;
        self.put_entry(id, &attributes)?;
        self.reindex_changed(id, &old_attributes, &attributes)?;
        if self.inner.options.memberof {
            let old_members = self.group_members(&old_attributes);
            let new_members = self.group_members(&attributes);
            if old_members != new_members {
                let group_dn = self.dn_of(id)?;
                self.memberof_group_changed(
                    id,
                    Some(&group_dn),
                    &old_members,
                    Some(&group_dn),
                    &new_members,
                )?;
            }
        }
        if self.is_recording_changes() {
            let dn = self.dn_of(id)?;
            self.record_change(ChangeKind::Modify, id, &attributes, dn.clone(), None);
            self.record_prior(dn, &old_attributes);
        }
        Ok(id)
    }
}
