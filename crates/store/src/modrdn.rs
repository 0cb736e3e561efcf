//! Renaming and moving an entry (RFC 4511 §4.9; back-mdb's modrdn.c).

use lmdir_schema::{
    Dn, LdapError, NormalizedDn, Rdn, ResultCode, DN_RDN_COUNT_MAX, DN_SIZE_BYTES_MAX,
};

use crate::changes::ChangeKind;
use crate::error::lmdb_to_ldap;
use crate::layout::{self, EntryId, ROOT_PARENT_ID};
use crate::read::{corrupt, is_within};
use crate::target_dn::TargetDn;
use crate::write::{ldap, OwnedNode, RdnAssertion, WorkingAttribute, WriteContext, WriteTxn};

impl WriteTxn<'_> {
    /// The (attr, normalized value) pairs of an RDN.
    pub(crate) fn rdn_assertions(&self, rdn: &Rdn) -> Result<Vec<RdnAssertion>, LdapError> {
        rdn.avas
            .iter()
            .map(|ava| {
                let attr = self.inner.schema().attribute(&ava.attr).ok_or_else(|| {
                    ldap(
                        ResultCode::InvalidDnSyntax,
                        format!("unknown attribute type '{}' in RDN", ava.attr),
                    )
                })?;
                let normalized = self.inner.schema().normalize_value(attr, &ava.value)?;
                Ok((attr, ava.value.clone(), normalized))
            })
            .collect()
    }

    /// The new RDN's AVAs, their normalized values read back from `dn` (the new DN, whose
    /// leaf RDN is `rdn` normalized: `Schema::leaf_values`), so no value is normalized again;
    /// an RDN naming one type twice (`cn=a+cn=b`) is normalized value by value.
    fn new_rdn_assertions(
        &self,
        rdn: &Rdn,
        dn: &NormalizedDn,
    ) -> Result<Vec<RdnAssertion>, LdapError> {
        let schema = self.inner.schema();
        let leaf = schema.leaf_values(dn);
        let mut assertions = Vec::with_capacity(rdn.avas.len());
        for ava in &rdn.avas {
            let mut same_type = schema
                .attribute(&ava.attr)
                .into_iter()
                .flat_map(|attr| leaf.iter().filter(move |(leaf_attr, _)| *leaf_attr == attr));
            match (same_type.next(), same_type.next()) {
                (Some((attr, normalized)), None) => {
                    assertions.push((*attr, ava.value.clone(), normalized.clone()))
                }
                _ => return self.rdn_assertions(rdn),
            }
        }
        Ok(assertions)
    }

    /// deleteoldrdn: the old RDN's values leave the option-less descriptions of `attributes`,
    /// but those the new RDN names again. A value the entry lacks (a glue entry lacks its RDN
    /// value) is noSuchAttribute, as slapd's delete of it.
    fn drop_old_rdn_values(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        node: &OwnedNode,
        new_assertions: &[RdnAssertion],
    ) -> Result<(), LdapError> {
        for (attr, _, normalized) in self.rdn_assertions(&self.node_rdn(node)?)? {
            if new_assertions
                .iter()
                .any(|(new_attr, _, new_value)| *new_attr == attr && *new_value == normalized)
            {
                continue;
            }
            // A glue entry lacks its RDN value: as slapd, deleting it fails like a modify's.
            let held = attributes.iter().any(|attribute| {
                attribute.attr == attr
                    && attribute
                        .values
                        .iter()
                        .any(|(_, value)| *value == normalized)
            });
            if !held {
                return Err(ldap(
                    ResultCode::NoSuchAttribute,
                    format!(
                        "modify/delete: {}: no such value",
                        self.inner.schema().attribute_type(attr).name()
                    ),
                ));
            }
            for attribute in attributes
                .iter_mut()
                .filter(|attribute| attribute.attr == attr && attribute.options.is_empty())
            {
                attribute.values.retain(|(_, value)| *value != normalized);
            }
        }
        attributes.retain(|attribute| !attribute.values.is_empty());
        Ok(())
    }

    /// The RDN (parsed) of an entry's node; the top-level entry's node holds its whole DN.
    pub(crate) fn node_rdn(&self, node: &OwnedNode) -> Result<Rdn, LdapError> {
        let text =
            std::str::from_utf8(&node.rdn_original).map_err(|_| corrupt("RDN is not UTF-8"))?;
        let dn = Dn::parse(text)?;
        dn.rdns
            .into_iter()
            .next()
            .ok_or_else(|| corrupt("empty RDN in id2node"))
    }

    /// Renames and/or moves an entry (with its whole subtree: only the moved node changes).
    /// `dn` and `new_superior` come normalized (not normalized again); the new RDN is
    /// normalized here, once.
    pub fn modrdn<T: TargetDn + ?Sized>(
        &mut self,
        dn: &T,
        new_rdn: &str,
        delete_old_rdn: bool,
        new_superior: Option<&NormalizedDn>,
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        let dn = &*self.target(dn)?;
        let id = self.existing(dn)?;
        let node = self.read_owned_node(id)?;
        if node.parent == ROOT_PARENT_ID {
            return Err(ldap(
                ResultCode::UnwillingToPerform,
                format!("cannot rename the naming context entry '{dn}'"),
            ));
        }
        let new_rdn = Rdn::parse(new_rdn)?;
        let (new_dn, new_parent) =
            self.new_place(dn, id, &node, (&new_rdn, new_superior), context)?;
        let new_rdn_normalized = new_dn.rdns()[0].clone();
        let new_rdn_original = new_rdn.to_string();
        self.check_rdn_size(
            new_rdn_original.len(),
            new_rdn_normalized.len(),
            &new_rdn_original,
        )?;
        self.refuse_unnameable_subtree(id, &node, (dn, &new_dn), (new_parent, &new_rdn_original))?;
        let new_key = self.free_dn2id_key(id, new_parent, &new_rdn_normalized, &new_rdn)?;

        let old_attributes = self.stored_attributes(id)?;
        let rdn_change = (&new_rdn, &new_dn, delete_old_rdn);
        let attributes = self.renamed_values(&old_attributes, &node, rdn_change, context)?;
        self.check_deadline()?;

        let old_dn_text = self.dn_of(id)?;
        let moved = OwnedNode {
            parent: new_parent,
            subtree_size: node.subtree_size,
            child_count: node.child_count,
            rdn_original: new_rdn.to_string().into_bytes(),
            rdn_normalized: new_rdn_normalized.into_bytes(),
        };
        self.move_node(id, &node, &moved, &new_key)?;
        self.put_entry(id, &attributes)?;
        self.reindex_changed(id, &old_attributes, &attributes)?;
        self.log_rename(id, &attributes)?;
        let renamed = Renamed {
            old_dn: old_dn_text,
            old_attributes: &old_attributes,
            attributes: &attributes,
        };
        if self.inner.options.memberof {
            self.memberof_after_rename(id, (dn, &new_dn), &renamed)?;
        }
        if self.is_recording_changes() {
            self.record_rename(id, renamed)?;
        }
        Ok(id)
    }

    /// Where a renamed entry goes: its new DN (under `new_superior`, else its parent) and
    /// its new parent's ID. Renaming the root or moving an entry below itself is
    /// unwillingToPerform; a new superior that is an alias is aliasProblem (not for a
    /// replicated move).
    fn new_place(
        &self,
        dn: &NormalizedDn,
        id: EntryId,
        node: &OwnedNode,
        (new_rdn, new_superior): (&Rdn, Option<&NormalizedDn>),
        context: &WriteContext,
    ) -> Result<(NormalizedDn, EntryId), LdapError> {
        let new_dn = match new_superior {
            Some(superior) => self.inner.schema().normalized_child(superior, new_rdn)?,
            None => match dn.parent() {
                Some(parent) => self.inner.schema().normalized_child(&parent, new_rdn)?,
                None => {
                    return Err(ldap(
                        ResultCode::UnwillingToPerform,
                        "cannot rename the root",
                    ))
                }
            },
        };
        let new_parent = match new_superior {
            None => node.parent,
            Some(superior) => {
                let parent = self.existing(superior)?;
                if is_within(self.inner, &self.txn, parent, id)? {
                    return Err(ldap(
                        ResultCode::UnwillingToPerform,
                        format!("cannot move '{dn}' below itself ('{superior}')"),
                    ));
                }
                // back-mdb's modrdn.c: a new superior that is an alias is refused, unless it
                // is the present parent (then slapd ignores it); a subentry is not. A
                // replicated move goes where its provider moved it.
                if parent != node.parent
                    && !context.replicated
                    && self.class_of(parent)? == crate::add::ParentClass::Alias
                {
                    return Err(ldap(ResultCode::AliasProblem, "new superior is an alias"));
                }
                parent
            }
        };
        Ok((new_dn, new_parent))
    }

    /// The dn2id key of the entry's new name under `new_parent`; entryAlreadyExists when
    /// another entry holds that name there (the entry itself may: a rename to its own RDN).
    fn free_dn2id_key(
        &self,
        id: EntryId,
        new_parent: EntryId,
        new_rdn_normalized: &str,
        new_rdn: &Rdn,
    ) -> Result<Vec<u8>, LdapError> {
        let mut new_key = Vec::new();
        layout::encode_dn2id_key(new_parent, new_rdn_normalized.as_bytes(), &mut new_key);
        if let Some(existing) = self
            .inner
            .databases
            .dn2id
            .get(&self.txn, &new_key)
            .map_err(lmdb_to_ldap)?
        {
            if layout::decode_id(existing) != Some(id) {
                return Err(ldap(
                    ResultCode::EntryAlreadyExists,
                    format!("entry '{new_rdn}' already exists under the new parent"),
                ));
            }
        }
        Ok(new_key)
    }

    /// The entry's values after a rename: the new RDN's values added, the old ones dropped
    /// when asked, stamped, schema-checked and within the entry limits.
    fn renamed_values(
        &mut self,
        old_attributes: &[WorkingAttribute],
        node: &OwnedNode,
        rdn_change: (&Rdn, &NormalizedDn, bool),
        context: &WriteContext,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let new_dn = rdn_change.1;
        let mut attributes = old_attributes.to_vec();
        self.apply_rdn_values(&mut attributes, node, rdn_change, context)?;
        self.stamp_modification(&mut attributes, context)?;
        if !context.skip_schema_check {
            // The stored values and the RDN's are normalized already: checked as they are.
            let normalized = self.inner.stored_normalized(attributes);
            attributes = self.inner.modified_attributes(normalized, new_dn, false)?;
        }
        // A group here may list the new DN already: its memberOf comes as on an add there
        // (a replicated move settles it again from the same groups).
        self.memberof_of_listed_dn(&mut attributes, new_dn.as_str())?;
        self.check_entry_limits(&attributes, context)?;
        Ok(attributes)
    }

    /// The entry's values after the rename: the new RDN's values added (refused when
    /// NO-USER-MODIFICATION), the old RDN's dropped when `delete_old_rdn` (the third of
    /// `(new_rdn, new_dn, delete_old_rdn)`).
    fn apply_rdn_values(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        node: &OwnedNode,
        (new_rdn, new_dn, delete_old_rdn): (&Rdn, &NormalizedDn, bool),
        context: &WriteContext,
    ) -> Result<(), LdapError> {
        let new_assertions = self.new_rdn_assertions(new_rdn, new_dn)?;
        for (attr, _, _) in &new_assertions {
            self.refuse_no_user_modification(*attr, context)?;
        }
        if delete_old_rdn {
            self.drop_old_rdn_values(attributes, node, &new_assertions)?;
        }
        for assertion in new_assertions {
            self.add_rdn_value(attributes, assertion);
        }
        Ok(())
    }

    /// Adds one value of the new RDN unless the entry holds it already: to the attribute
    /// without options, or as a new attribute.
    fn add_rdn_value(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        (attr, original, normalized): RdnAssertion,
    ) {
        let present = attributes.iter().any(|attribute| {
            attribute.attr == attr
                && attribute
                    .values
                    .iter()
                    .any(|(_, value)| *value == normalized)
        });
        if present {
            return;
        }
        match attributes
            .iter_mut()
            .find(|attribute| attribute.attr == attr && attribute.options.is_empty())
        {
            Some(attribute) => attribute.values.push((original, normalized)),
            None => attributes.push(WorkingAttribute {
                text: self.inner.schema().attribute_type(attr).name().to_string(),
                attr,
                options: Vec::new(),
                values: vec![(original, normalized)],
            }),
        }
    }

    /// Moves the one node in the tree: its dn2id key from the old name to `new_key`, its
    /// node record to `moved`, and, when its parent changes, both parents' subtree sizes
    /// and child counts.
    fn move_node(
        &mut self,
        id: EntryId,
        node: &OwnedNode,
        moved: &OwnedNode,
        new_key: &[u8],
    ) -> Result<(), LdapError> {
        let mut old_key = Vec::new();
        layout::encode_dn2id_key(node.parent, &node.rdn_normalized, &mut old_key);
        self.tree_changed = true;
        self.inner
            .databases
            .dn2id
            .delete(&mut self.txn, &old_key)
            .map_err(lmdb_to_ldap)?;
        self.inner
            .databases
            .dn2id
            .put(&mut self.txn, new_key, &layout::encode_id(id))
            .map_err(lmdb_to_ldap)?;
        self.put_node(id, moved)?;
        let new_parent = moved.parent;
        if new_parent != node.parent {
            self.record_parent_change(id, Some(node.parent), Some(new_parent))?;
            self.adjust_subtree_sizes(node.parent, -(node.subtree_size as i64))?;
            self.adjust_child_count(node.parent, -1)?;
            self.adjust_subtree_sizes(new_parent, node.subtree_size as i64)?;
            self.adjust_child_count(new_parent, 1)?;
        }
        Ok(())
    }

    /// memberOf after a rename: the entry's own group links and those of its subtree follow
    /// the new DN (`dn` and `new_dn` normalized).
    fn memberof_after_rename(
        &mut self,
        id: EntryId,
        (dn, new_dn): (&NormalizedDn, &NormalizedDn),
        renamed: &Renamed<'_>,
    ) -> Result<(), LdapError> {
        let new_dn_text = self.dn_of(id)?;
        let old_dn_text = renamed.old_dn.as_str();
        self.moved_subtree = Some((dn.as_str().to_string(), new_dn.as_str().to_string()));
        let fixed = self
            .memberof_entry_renamed(
                id,
                old_dn_text,
                &new_dn_text,
                renamed.old_attributes,
                renamed.attributes,
            )
            .and_then(|()| self.memberof_subtree_renamed(id, old_dn_text, &new_dn_text));
        self.moved_subtree = None;
        fixed
    }

    /// Records the rename for the change log: the entry as it is now, its old DN and the
    /// prior entry.
    fn record_rename(&mut self, id: EntryId, renamed: Renamed<'_>) -> Result<(), LdapError> {
        let dn = self.dn_of(id)?;
        self.record_change(
            ChangeKind::ModRdn,
            id,
            renamed.attributes,
            dn,
            Some(renamed.old_dn.clone()),
        );
        self.record_prior(renamed.old_dn, renamed.old_attributes);
        Ok(())
    }
}

/// An entry just renamed: its old DN (as stored, not normalized), its values before the
/// rename and after it.
struct Renamed<'r> {
    old_dn: String,
    old_attributes: &'r [WorkingAttribute],
    attributes: &'r [WorkingAttribute],
}

impl WriteTxn<'_> {
    /// A rename or move may not give any entry of the subtree a DN no request can name: more
    /// RDNs than `DN_RDN_COUNT_MAX` or more bytes than `DN_SIZE_BYTES_MAX` (original or
    /// normalized), adminLimitExceeded. The entry's DN and its new one come normalized, with
    /// the new parent and RDN as given (the new DN as it will read back). The subtree is
    /// walked only when the entry's DN grows.
    fn refuse_unnameable_subtree(
        &self,
        id: EntryId,
        node: &OwnedNode,
        (dn, new_dn): (&NormalizedDn, &NormalizedDn),
        (new_parent, new_rdn): (EntryId, &str),
    ) -> Result<(), LdapError> {
        let new_original_bytes = match new_parent {
            ROOT_PARENT_ID => new_rdn.len(),
            parent => new_rdn.len() + 1 + self.dn_of(parent)?.len(),
        };
        let grows = new_dn.rdns().len() > dn.rdns().len()
            || new_dn.as_str().len() > dn.as_str().len()
            || new_original_bytes > self.dn_of(id)?.len();
        if !grows {
            return Ok(());
        }
        let (depth, original, normalized) = match node.subtree_size {
            0 | 1 => (0, 0, 0),
            _ => self.subtree_extent(id)?,
        };
        let refused = |what: String| {
            Err(ldap(
                ResultCode::AdminLimitExceeded,
                format!(
                    "renaming '{dn}' to '{new_dn}' would give an entry of its subtree a DN of \
                     {what}"
                ),
            ))
        };
        let rdns = new_dn.rdns().len() + depth;
        if rdns > DN_RDN_COUNT_MAX {
            return refused(format!("{rdns} RDNs (at most {DN_RDN_COUNT_MAX})"));
        }
        let bytes = (new_original_bytes + original).max(new_dn.as_str().len() + normalized);
        if bytes > DN_SIZE_BYTES_MAX {
            return refused(format!("{bytes} bytes (at most {DN_SIZE_BYTES_MAX})"));
        }
        Ok(())
    }

    /// How far the subtree of `id` reaches below it: the most RDNs, original bytes and
    /// normalized bytes a descendant's DN adds to `id`'s (each the maximum over the subtree).
    /// Bounded by the write's deadline.
    fn subtree_extent(&self, id: EntryId) -> Result<(usize, usize, usize), LdapError> {
        let mut extent = (0, 0, 0);
        let mut stack = vec![(id, 0usize, 0usize, 0usize)];
        let mut walked = 0usize;
        while let Some((current, depth, original, normalized)) = stack.pop() {
            extent = (
                extent.0.max(depth),
                extent.1.max(original),
                extent.2.max(normalized),
            );
            if depth > crate::read::TREE_DEPTH_MAX {
                return Err(corrupt(format!("DN tree below entry {id} is too deep")));
            }
            walked += 1;
            if walked.is_multiple_of(256) {
                self.check_deadline()?;
            }
            for child in crate::read::children_of(self.inner, &self.txn, current)? {
                let below = self.read_owned_node(child)?;
                stack.push((
                    child,
                    depth + 1,
                    original + 1 + below.rdn_original.len(),
                    normalized + 1 + below.rdn_normalized.len(),
                ));
            }
        }
        Ok(extent)
    }
}
