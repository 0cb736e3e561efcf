//! Adding an entry (RFC 4511 §4.7; back-mdb's add.c).

use std::collections::{BTreeMap, BTreeSet};

use lmdir_schema::{Entry, LdapError, NormalizedAttributes, NormalizedDn, ResultCode};

use crate::changes::ChangeKind;
use crate::error::lmdb_to_ldap;
use crate::layout::{self, EntryId, ROOT_PARENT_ID};
use crate::write::{ldap, OwnedNode, WriteContext, WriteTxn};

impl WriteTxn<'_> {
    /// Adds an entry; returns its ID. The entry's rows come from the one "entry → rows" step
    /// (`rows.rs`) that the bulk loader's workers run too. Its DN is normalized here, once
    /// (`add_normalized` takes it normalized).
    pub fn add(&mut self, entry: &Entry, context: &WriteContext) -> Result<EntryId, LdapError> {
        let dn = self.inner.schema().normalized_dn(entry.dn.clone())?;
        self.add_normalized(entry, &dn, context)
    }

    /// `add` of an entry whose DN the caller normalized (`dn`, the normalization of
    /// `entry.dn`, by `Schema::normalized_dn`): neither the DN nor its naming values are
    /// normalized again.
    pub fn add_normalized(
        &mut self,
        entry: &Entry,
        dn: &NormalizedDn,
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        debug_assert_eq!(&entry.dn, dn.dn(), "the DN normalized is the entry's");
        self.add_source(crate::rows::EntrySource::Entry { entry, dn }, context)
    }

    /// `add_normalized` of an entry whose values the caller normalized too (the server's
    /// writer, for its access decisions): they are checked as they are, none normalized again.
    pub fn add_normalized_attributes(
        &mut self,
        dn: &NormalizedDn,
        attributes: NormalizedAttributes,
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        self.add_source(
            crate::rows::EntrySource::Normalized { dn, attributes },
            context,
        )
    }

    fn add_source(
        &mut self,
        source: crate::rows::EntrySource<'_>,
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        let dn = source.dn();
        let lookup = self.lookup(dn)?;
        if lookup.found.is_some() {
            return Err(ldap(
                ResultCode::EntryAlreadyExists,
                format!("entry '{dn}' already exists"),
            ));
        }
        // The parent is looked for before the entry is checked, as slapd does: an add under a
        // missing parent is noSuchObject whatever the entry holds.
        let place = self.inner.tree_place(dn)?;
        let parent = if place.is_top_level() {
            ROOT_PARENT_ID
        } else {
            // The parent must exist: it is the lookup's deepest match covering all but one RDN.
            match lookup.deepest {
                Some((parent, covered)) if covered == dn.rdns().len() - 1 => parent,
                _ => {
                    let mut error = self.no_such_object(dn, &lookup)?;
                    error.message = format!("parent of '{dn}' does not exist");
                    return Err(error);
                }
            }
        };
        // A replicated add is placed where its provider placed it: the provider decided.
        if parent != ROOT_PARENT_ID && !context.import && !context.replicated {
            self.refuse_parent_class(parent)?;
        }
        self.check_deadline()?;
        let stamp = crate::rows::OperationalStamp::new(&self.inner.schema(), context);
        let fresh = crate::rows::FreshValues {
            csn: match context.replicated {
                true => None,
                false => Some(self.next_csn(context.now)?),
            },
            ..crate::rows::FreshValues::new()
        };
        let rows = self.inner.entry_rows_at(
            place,
            source,
            context,
            &stamp,
            &fresh,
            &mut crate::rows::RowScratch::new(),
        )?;
        self.check_deadline()?;
        let id = self.allocate_id()?;
        let crate::rows::EntryRows {
            place,
            mut attributes,
            group_members,
        } = rows;
        if !context.replicated && !context.import {
            // A client's memberOf (Relax) must be what this store's groups say: peers set it
            // from theirs.
            self.refuse_memberof_of_client_add(&attributes, dn.as_str())?;
        }
        // memberOf kept up here is this store's fact, never the request's or the provider's
        // text: the groups listing the DN (a group here may list it already).
        self.memberof_of_added_entry(&mut attributes, dn.as_str())?;
        let mut key = Vec::new();
        layout::encode_dn2id_key(parent, place.rdn_normalized.as_bytes(), &mut key);
        self.inner
            .databases
            .dn2id
            .put(&mut self.txn, &key, &layout::encode_id(id))
            .map_err(lmdb_to_ldap)?;
        self.put_node(
            id,
            &OwnedNode {
                parent,
                subtree_size: 1,
                child_count: 0,
                rdn_original: place.rdn_original.into_bytes(),
                rdn_normalized: place.rdn_normalized.into_bytes(),
            },
        )?;
        self.adjust_subtree_sizes(parent, 1)?;
        self.adjust_child_count(parent, 1)?;
        self.put_entry(id, &attributes)?;
        let keys = self.inner.index_keys(&attributes);
        self.update_indexes(id, &BTreeMap::new(), &keys)?;
        if !group_members.is_empty() {
            let group_dn = self.dn_of(id)?;
            self.memberof_group_changed(
                id,
                Some(&group_dn),
                &BTreeSet::new(),
                Some(&group_dn),
                &group_members,
            )?;
        }
        if self.is_recording_changes() {
            let dn = self.dn_of(id)?;
            self.record_change(ChangeKind::Add, id, &attributes, dn, None);
        }
        Ok(id)
    }

    /// back-mdb's add.c refusals of a parent by its class (after the write access to its
    /// children, which the server decides first): a subentry holds no entries
    /// (objectClassViolation 65, "parent is a subentry", tested first), nor does an alias
    /// (aliasProblem 33, "parent is an alias"). ManageDsaIT changes nothing, as in slapd.
    pub(crate) fn refuse_parent_class(&self, parent: EntryId) -> Result<(), LdapError> {
        match self.class_of(parent)? {
            ParentClass::Subentry => Err(ldap(
                ResultCode::ObjectClassViolation,
                "parent is a subentry",
            )),
            ParentClass::Alias => Err(ldap(ResultCode::AliasProblem, "parent is an alias")),
            ParentClass::Other => Ok(()),
        }
    }

    /// Whether the entry `id` is a subentry, an alias (by objectClass name or OID), or neither.
    pub(crate) fn class_of(&self, id: EntryId) -> Result<ParentClass, LdapError> {
        let Some(entry) = self.entry_by_id(id)? else {
            return Ok(ParentClass::Other);
        };
        let object_class = self.inner.schema().object_class_attribute();
        let holds = |values: [&str; 2]| {
            values
                .iter()
                .any(|value| entry.has_value(object_class, value.as_bytes()))
        };
        Ok(if holds(lmdir_schema::SUBENTRY_CLASS_VALUES) {
            ParentClass::Subentry
        } else if holds(lmdir_schema::ALIAS_CLASS_VALUES) {
            ParentClass::Alias
        } else {
            ParentClass::Other
        })
    }
}

/// What an entry's class makes of it as a parent (`WriteTxn::class_of`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParentClass {
    Subentry,
    Alias,
    Other,
}
