//! Write transactions: add, delete, modify, modrdn — each keeping the DN tree and every index
//! exact.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};
use std::time::{Instant, SystemTime};

use heed::RwTxn;
use lmdir_schema::{
    AttrId, Attribute, AttributeDescription, CheckedAttribute, Dn, Entry, EntryView, LdapError,
    NormalizedAttributes, NormalizedDn, ResultCode, StoredValue,
};

use crate::changes::CommittedChanges;
use crate::error::{lmdb_to_ldap, StoreError};
use crate::layout::{self, EntryId, IndexKinds, Node, ROOT_PARENT_ID};
use crate::read::{corrupt, read_entry, require_node, TREE_DEPTH_MAX};
use crate::store::{Inner, Store};
pub(crate) use crate::working::WorkingAttribute;
pub use crate::working::WriteContext;

/// Usable index kinds and the difference to the configuration still to report.
type IndexState = (
    HashMap<AttrId, IndexKinds>,
    Option<crate::store::IndexConfigChange>,
);

/// The single write transaction. Dropping it aborts.
pub struct WriteTxn<'s> {
    // Field order: the LMDB txn ends before the writer lock is released.
    pub(crate) txn: RwTxn<'s>,
    pub(crate) inner: &'s Inner,
    /// Attributes whose indexes were rebuilt for their configured kinds (`None` = not marked).
    indexes_built: Option<Vec<AttrId>>,
    /// The index DBs as this txn began (taken under the writer lock, which every change of
    /// them holds too): one lookup per write instead of one per posting.
    pub(crate) index_databases: Arc<crate::store::IndexSet>,
    /// Past this instant every step of a write fails with adminLimitExceeded (`set_deadline`).
    deadline: Option<Instant>,
    /// While a subtree's memberOf links are being fixed after a move: its (old, new) top DN,
    /// normalized, so a link still naming an old DN below it is resolved to the moved entry.
    pub(crate) moved_subtree: Option<(String, String)>,
    /// While a replication consumer applies a provider's changes (`set_applying_replicated`).
    applying_replicated: bool,
    /// The changes made so far, when recorded (`record_changes`).
    pub(crate) changes: crate::changes::ChangeLog,
    /// A DN was removed or renamed (`dn_cache`): set by delete and modrdn.
    pub(crate) tree_changed: bool,
    _writer: MutexGuard<'s, ()>,
}

impl Store {
    /// Starts the write transaction (waits for another one in this process to finish).
    pub fn write(&self) -> Result<WriteTxn<'_>, StoreError> {
        if self.is_read_only() {
            return Err(StoreError::ReadOnly);
        }
        let writer = crate::lock::lock(&self.inner.writer);
        // Grow the map ahead of need (no txn of ours is open here), so MAP_FULL only happens
        // if one transaction writes more than the free half of the map.
        self.inner.grow_map_if_needed()?;
        let txn = self.inner.env.write_txn()?;
        Ok(WriteTxn {
            txn,
            inner: &self.inner,
            indexes_built: None,
            index_databases: self.inner.index_set(),
            moved_subtree: None,
            applying_replicated: false,
            deadline: None,
            changes: Default::default(),
            tree_changed: false,
            _writer: writer,
        })
    }
}

use crate::rows::timestamp_value;

pub(crate) fn ldap(code: ResultCode, message: impl Into<String>) -> LdapError {
    LdapError::new(code, message)
}

/// The values of `dn`'s RDN that `attributes` hold before a modify: those it may not remove.
/// A glue entry (slapd's placeholder for a partial replica's missing parent) holds none, and a
/// modify of it with ManageDsaIT is checked as slapd checks it, without them.
pub(crate) fn held_rdn_values(
    schema: &lmdir_schema::Schema,
    attributes: &NormalizedAttributes,
    dn: &lmdir_schema::NormalizedDn,
) -> Vec<(AttrId, Vec<u8>)> {
    let mut values = schema.leaf_values(dn);
    values.retain(|(attr, normalized)| {
        attributes.as_slice().iter().any(|attribute| {
            attribute.description.attr == *attr
                && attribute
                    .values
                    .iter()
                    .any(|(_, value)| value == normalized)
        })
    });
    values
}

/// notAllowedOnRDN unless `attributes` still hold the RDN value `normalized` of `attr`: a
/// modify of `dn` may not remove a value of its RDN.
pub(crate) fn require_rdn_value(
    inner: &Inner,
    attributes: &NormalizedAttributes,
    attr: AttrId,
    normalized: &[u8],
    dn: &impl std::fmt::Display,
) -> Result<(), LdapError> {
    let present = attributes.as_slice().iter().any(|attribute| {
        attribute.description.attr == attr
            && attribute
                .values
                .iter()
                .any(|(_, value)| value.as_slice() == normalized)
    });
    if present {
        return Ok(());
    }
    Err(ldap(
        ResultCode::NotAllowedOnRdn,
        format!(
            "cannot remove the RDN value of '{}' from '{dn}'",
            inner.schema().attribute_type(attr).name()
        ),
    ))
}

impl WorkingAttribute {
    /// As the schema's attribute type (a move: no value is copied or normalized).
    pub(crate) fn into_checked(self) -> CheckedAttribute {
        CheckedAttribute {
            description: AttributeDescription {
                attr: self.attr,
                options: self.options,
            },
            description_string: self.text,
            values: self.values,
        }
    }

    pub(crate) fn from_checked(attribute: CheckedAttribute) -> WorkingAttribute {
        WorkingAttribute {
            text: attribute.description_string,
            attr: attribute.description.attr,
            options: attribute.description.options,
            values: attribute.values,
        }
    }
}

impl Inner {
    /// Stored attributes as the schema's normalized ones (read back, not normalized again; a
    /// move of the values).
    pub(crate) fn stored_normalized(
        &self,
        attributes: Vec<WorkingAttribute>,
    ) -> NormalizedAttributes {
        self.schema().stored_normalized(
            attributes
                .into_iter()
                .map(WorkingAttribute::into_checked)
                .collect(),
        )
    }

    /// The attributes a modify leaves, schema-checked unless `skip_schema_check`: no value
    /// is normalized again (`Schema::check_normalized_at`).
    pub(crate) fn modified_attributes(
        &self,
        attributes: NormalizedAttributes,
        dn: &NormalizedDn,
        skip_schema_check: bool,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let attributes = match skip_schema_check {
            true => attributes.into_vec(),
            false => {
                self.schema()
                    .check_normalized_at(attributes, dn)?
                    .attributes
            }
        };
        Ok(attributes
            .into_iter()
            .map(WorkingAttribute::from_checked)
            .collect())
    }
}

impl Inner {
    /// Makes entry `id`'s `id2value` rows exactly the blocks of `framed` (per-value rows, key
    /// order; `layout::value_blocks_of_framed`): a merge of the blocks there with the new ones,
    /// so only blocks that differ are written or deleted. Returns the bytes written.
    pub(crate) fn replace_value_rows(
        &self,
        txn: &mut RwTxn<'_>,
        id: EntryId,
        framed: &[u8],
    ) -> Result<usize, LdapError> {
        let database = self
            .databases
            .values
            .ok_or_else(|| corrupt("the store has no id2value DB"))?;
        let mut prefix = Vec::new();
        layout::value_key_prefix(id, None, &mut prefix);
        let mut existing: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for row in database.prefix_iter(txn, &prefix).map_err(lmdb_to_ldap)? {
            let (key, value) = row.map_err(lmdb_to_ldap)?;
            existing.push((key.to_vec(), value.to_vec()));
        }
        let mut written = 0;
        let mut old = existing.iter().peekable();
        for (key, value) in layout::value_blocks_of_framed(framed) {
            let (key, value) = (key.as_slice(), value.as_slice());
            while let Some((old_key, _)) = old.next_if(|(old_key, _)| old_key.as_slice() < key) {
                database.delete(txn, old_key).map_err(lmdb_to_ldap)?;
            }
            let same = old.next_if(|(old_key, _)| old_key == key);
            if same.is_none_or(|(_, old_value)| old_value != value) {
                database.put(txn, key, value).map_err(lmdb_to_ldap)?;
                written += key.len() + value.len();
            }
        }
        for (old_key, _) in old {
            database.delete(txn, old_key).map_err(lmdb_to_ldap)?;
        }
        Ok(written)
    }

    /// Writes the `meta` rows of the descriptions numbered since the last commit (numbers are
    /// dense). Returns the persisted count's guard and the count to set once `txn` committed.
    pub(crate) fn persist_descriptions(
        &self,
        txn: &mut RwTxn<'_>,
    ) -> Result<(MutexGuard<'_, usize>, usize), LdapError> {
        let persisted = crate::lock::lock(&self.descriptions_persisted);
        let table = crate::lock::read(&self.descriptions).clone();
        for number in *persisted..table.len() {
            let info = table.get(number as u32).expect("number below table length");
            let mut key = layout::META_DESCRIPTION_PREFIX.to_vec();
            key.extend_from_slice(&(number as u32).to_be_bytes());
            self.databases
                .meta
                .put(txn, &key, info.text.as_bytes())
                .map_err(lmdb_to_ldap)?;
        }
        Ok((persisted, table.len()))
    }

    /// An entry's inline attributes, owned; its out-of-line ones are left out unread.
    pub(crate) fn stored_attributes_inline(
        &self,
        txn: &heed::RoTxn<'_, heed::WithoutTls>,
        id: EntryId,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let encoded = read_entry(self, txn, id)?
            .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
        let descriptions = crate::lock::read(&self.descriptions).clone();
        encoded
            .attributes()
            .filter(|attribute| !attribute.out_of_line)
            .map(|attribute| {
                let info = descriptions
                    .get(attribute.description_number)
                    .ok_or_else(|| corrupt(format!("entry {id}: unknown description")))?;
                Ok(WorkingAttribute {
                    text: info.text.clone(),
                    attr: info.attr,
                    options: info.options.clone(),
                    values: attribute
                        .values()
                        .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
                        .collect(),
                })
            })
            .collect()
    }

    /// An entry's stored attributes, owned (for a write that changes them).
    pub(crate) fn stored_attributes(
        &self,
        txn: &heed::RoTxn<'_, heed::WithoutTls>,
        id: EntryId,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let encoded = read_entry(self, txn, id)?
            .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
        let descriptions = crate::lock::read(&self.descriptions).clone();
        encoded
            .attributes()
            .map(|attribute| {
                let info = descriptions
                    .get(attribute.description_number)
                    .ok_or_else(|| {
                        corrupt(format!(
                            "entry {id}: unknown description {}",
                            attribute.description_number
                        ))
                    })?;
                let values = match attribute.out_of_line {
                    false => attribute
                        .values()
                        .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
                        .collect(),
                    true => {
                        let mut values = Vec::with_capacity(attribute.value_count);
                        let number = attribute.description_number;
                        for row in crate::read::out_of_line_rows(self, txn, id, number)? {
                            let row = row?;
                            values.push((row.original.to_vec(), row.normalized.to_vec()));
                        }
                        values
                    }
                };
                Ok(WorkingAttribute {
                    text: info.text.clone(),
                    attr: info.attr,
                    options: info.options.clone(),
                    values,
                })
            })
            .collect()
    }
}

pub(crate) fn to_owned_entry(dn: Dn, attributes: &[WorkingAttribute]) -> Entry {
    Entry {
        dn,
        attributes: attributes
            .iter()
            .map(|attribute| Attribute {
                description: attribute.text.clone(),
                values: attribute
                    .values
                    .iter()
                    .map(|(original, _)| original.clone())
                    .collect(),
            })
            .collect(),
    }
}

/// One AVA of an RDN: attribute, original value, normalized value.
pub(crate) type RdnAssertion = (AttrId, Vec<u8>, Vec<u8>);

/// An owned copy of an id2node row.
pub(crate) struct OwnedNode {
    pub(crate) parent: EntryId,
    pub(crate) subtree_size: u32,
    pub(crate) child_count: u32,
    pub(crate) rdn_original: Vec<u8>,
    pub(crate) rdn_normalized: Vec<u8>,
}

impl OwnedNode {
    fn from(node: &Node<'_>) -> OwnedNode {
        OwnedNode {
            parent: node.parent,
            subtree_size: node.subtree_size,
            child_count: node.child_count,
            rdn_original: node.rdn_original.to_vec(),
            rdn_normalized: node.rdn_normalized.to_vec(),
        }
    }
}

/// An entry as a write transaction sees it, for access and assertion decisions made inside the
/// writer's transaction: its inline attributes owned, its out-of-line ones read from the
/// transaction when asked (streamed, or one lookup for an equality test), so deciding on a
/// 100,000-member group reads no member it does not test.
#[derive(Clone)]
pub struct StoredEntry<'t> {
    pub id: EntryId,
    pub normalized_dn: String,
    attributes: Vec<WorkingAttribute>,
    /// Out-of-line descriptions: (description number, attribute, options).
    outside: Vec<(u32, AttrId, Vec<String>)>,
    /// The DN's AVAs as (type, original value, normalized value), for `:dn:` filter items:
    /// normalized only when such an item first asks (an access decision need not).
    dn_avas: std::sync::OnceLock<Vec<RdnAssertion>>,
    inner: &'t Inner,
    txn: &'t heed::RoTxn<'t>,
}

impl std::fmt::Debug for StoredEntry<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StoredEntry")
            .field("id", &self.id)
            .field("normalized_dn", &self.normalized_dn)
            .field("attributes", &self.attributes)
            .field("outside", &self.outside)
            .finish()
    }
}

impl<'t> StoredEntry<'t> {
    /// (original, normalized) values of every description of `attr`, out-of-line ones streamed.
    pub fn values_of(&self, attr: AttrId) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let inline = self
            .attributes
            .iter()
            .filter(move |attribute| attribute.attr == attr)
            .flat_map(|attribute| attribute.values.iter())
            .map(|(original, normalized)| (original.as_slice(), normalized.as_slice()));
        let outside = self
            .outside
            .iter()
            .filter(move |(_, outside_attr, _)| *outside_attr == attr)
            .flat_map(|(number, _, _)| self.outside_values(*number));
        inline.chain(outside)
    }

    /// One out-of-line description's values (a damaged row ends them, logged; `check` names it).
    fn outside_values(&self, number: u32) -> impl Iterator<Item = (&'t [u8], &'t [u8])> + 't {
        let rows = crate::read::out_of_line_rows(self.inner, self.txn, self.id, number);
        let rows: Box<dyn Iterator<Item = _> + 't> = match rows {
            Ok(rows) => Box::new(rows),
            Err(error) => Box::new(std::iter::once(Err(error))),
        };
        rows.map_while(|row| match row {
            Ok(row) => Some((row.original, row.normalized)),
            Err(error) => {
                tracing::error!(error = %error.message, "reading out-of-line values");
                None
            }
        })
    }

    /// Whether a description of `attr` holds a value of this normalized form (a lookup for an
    /// out-of-line description).
    pub fn has_value(&self, attr: AttrId, normalized: &[u8]) -> bool {
        self.attributes
            .iter()
            .filter(|attribute| attribute.attr == attr)
            .any(|attribute| {
                attribute
                    .values
                    .iter()
                    .any(|(_, value)| value == normalized)
            })
            || self.outside.iter().any(|(number, outside_attr, _)| {
                *outside_attr == attr
                    && crate::read::out_of_line_contains(
                        self.inner, self.txn, self.id, *number, normalized,
                    )
                    .unwrap_or(false)
            })
    }
}

impl StoredEntry<'_> {
    /// The DN's AVAs (`dn_avas`), read and normalized on first use. The DN as written:
    /// `:dn:` rules of another family than the type's own test the original spelling (as
    /// `EntryRef` does).
    fn dn_avas(&self) -> &[RdnAssertion] {
        self.dn_avas.get_or_init(|| {
            let original_dn = match crate::read::dn_of(self.inner, self.txn, self.id, false) {
                Ok(dn) => dn,
                Err(error) => {
                    tracing::error!(error = %error.message, "reading the DN of entry {}", self.id);
                    return Vec::new();
                }
            };
            Dn::parse(&original_dn)
                .map(|dn| self.inner.schema().dn_avas(&dn))
                .unwrap_or_default()
        })
    }

    /// Whether a value of a description of `attr` starts with `prefix` (a cursor positioning
    /// for an out-of-line description).
    pub fn has_value_with_prefix(&self, attr: AttrId, prefix: &[u8]) -> bool {
        self.attributes
            .iter()
            .filter(|attribute| attribute.attr == attr)
            .any(|attribute| {
                attribute
                    .values
                    .iter()
                    .any(|(_, value)| value.starts_with(prefix))
            })
            || self.outside.iter().any(|(number, outside_attr, _)| {
                *outside_attr == attr
                    && crate::read::out_of_line_has_prefix(
                        self.inner, self.txn, self.id, *number, prefix,
                    )
                    .unwrap_or(false)
            })
    }
}

impl EntryView for StoredEntry<'_> {
    fn for_each_attribute(
        &self,
        visit: &mut (dyn FnMut(AttrId, &[String], &mut dyn Iterator<Item = StoredValue<'_>>) -> bool
                  + '_),
    ) {
        for attribute in &self.attributes {
            let mut values = attribute
                .values
                .iter()
                .map(|(original, normalized)| StoredValue {
                    original,
                    normalized,
                });
            if !visit(attribute.attr, &attribute.options, &mut values) {
                return;
            }
        }
        for (number, attr, options) in &self.outside {
            let mut values =
                self.outside_values(*number)
                    .map(|(original, normalized)| StoredValue {
                        original,
                        normalized,
                    });
            if !visit(*attr, options, &mut values) {
                return;
            }
        }
    }

    fn for_each_dn_ava(&self, visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool) {
        lmdir_schema::visit_dn_avas(self.dn_avas(), visit);
    }

    fn lookup_normalized(
        &self,
        attr: AttrId,
        options: &[String],
        normalized: &[u8],
    ) -> Option<bool> {
        let (number, _, _) = self
            .outside
            .iter()
            .find(|(_, outside_attr, outside_options)| {
                *outside_attr == attr && outside_options == options
            })?;
        crate::read::out_of_line_contains(self.inner, self.txn, self.id, *number, normalized).ok()
    }
}

impl<'s> WriteTxn<'s> {
    /// Bounds the work of what follows: past `deadline` each step (a modification, an index
    /// posting) fails with adminLimitExceeded, and the caller aborts or drops this request.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    pub(crate) fn check_deadline(&self) -> Result<(), LdapError> {
        match self.deadline {
            Some(deadline) if Instant::now() > deadline => Err(ldap(
                ResultCode::AdminLimitExceeded,
                "the write exceeded its time budget",
            )),
            _ => Ok(()),
        }
    }

    /// Whether `dn` names the suffix entry or an entry below it (the database may hold it).
    pub fn is_within_database(&self, dn: &NormalizedDn) -> bool {
        matches!(
            self.inner.place_dn(dn.rdns()),
            crate::read::DnPlacement::UnderSuffix { .. }
        )
    }

    /// The entry at `dn` as this transaction sees it (None when absent).
    pub fn entry_by_dn<T: crate::target_dn::TargetDn + ?Sized>(
        &self,
        dn: &T,
    ) -> Result<Option<StoredEntry<'_>>, LdapError> {
        let lookup = self.lookup(&*self.target(dn)?)?;
        match lookup.found {
            Some(id) => self.entry_by_id(id),
            None => Ok(None),
        }
    }

    /// The entry at a normalized DN given as text (a stored link, an identity's DN from
    /// `Schema::normalize_dn`): split at its RDNs, neither parsed nor normalized again.
    pub fn entry_by_normalized_dn(
        &self,
        normalized: &str,
    ) -> Result<Option<StoredEntry<'_>>, LdapError> {
        match self.lookup_normalized_text(normalized)?.found {
            Some(id) => self.entry_by_id(id),
            None => Ok(None),
        }
    }

    /// The entry with ID `id` as this transaction sees it (None when absent).
    pub fn entry_by_id(&self, id: EntryId) -> Result<Option<StoredEntry<'_>>, LdapError> {
        if crate::read::read_node(self.inner, &self.txn, id)?.is_none() {
            return Ok(None);
        }
        let normalized_dn = crate::read::dn_of(self.inner, &self.txn, id, true)?;
        let encoded = read_entry(self.inner, &self.txn, id)?
            .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
        let descriptions = crate::lock::read(&self.inner.descriptions).clone();
        let outside = encoded
            .attributes()
            .filter(|attribute| attribute.out_of_line)
            .filter_map(|attribute| {
                let info = descriptions.get(attribute.description_number)?;
                Some((
                    attribute.description_number,
                    info.attr,
                    info.options.clone(),
                ))
            })
            .collect();
        Ok(Some(StoredEntry {
            id,
            normalized_dn,
            attributes: self.inner.stored_attributes_inline(&self.txn, id)?,
            outside,
            dn_avas: std::sync::OnceLock::new(),
            inner: self.inner,
            txn: &self.txn,
        }))
    }

    pub(crate) fn check_entry_limits(
        &self,
        attributes: &[WorkingAttribute],
        context: &WriteContext,
    ) -> Result<(), LdapError> {
        crate::rows::check_entry_limits(attributes, context)
    }

    pub(crate) fn refuse_no_user_modification(
        &self,
        attr: AttrId,
        context: &WriteContext,
    ) -> Result<(), LdapError> {
        crate::rows::refuse_no_user_modification(&self.inner.schema(), attr, context)
    }

    pub(crate) fn read_owned_node(&self, id: EntryId) -> Result<OwnedNode, LdapError> {
        Ok(OwnedNode::from(&require_node(self.inner, &self.txn, id)?))
    }

    pub(crate) fn put_node(&mut self, id: EntryId, node: &OwnedNode) -> Result<(), LdapError> {
        if node.rdn_original.len() > u16::MAX as usize {
            return Err(ldap(
                ResultCode::ConstraintViolation,
                "RDN longer than 65535 bytes",
            ));
        }
        let mut bytes = Vec::new();
        layout::encode_node(
            &Node {
                parent: node.parent,
                subtree_size: node.subtree_size,
                child_count: node.child_count,
                rdn_original: &node.rdn_original,
                rdn_normalized: &node.rdn_normalized,
            },
            &mut bytes,
        );
        self.inner
            .databases
            .id2node
            .put(&mut self.txn, &layout::encode_id(id), &bytes)
            .map_err(lmdb_to_ldap)
    }

    /// Keeps `meta`'s inverted-link record (parents-first output) right for a moved or
    /// deleted node.
    pub(crate) fn record_parent_change(
        &mut self,
        id: EntryId,
        old_parent: Option<EntryId>,
        new_parent: Option<EntryId>,
    ) -> Result<(), LdapError> {
        crate::inversions::record_parent_change(
            self.inner.databases.meta,
            &mut self.txn,
            id,
            old_parent,
            new_parent,
        )
        .map_err(lmdb_to_ldap)
    }

    /// Adds `delta` to the subtree size of `start` and all its ancestors.
    pub(crate) fn adjust_subtree_sizes(
        &mut self,
        start: EntryId,
        delta: i64,
    ) -> Result<(), LdapError> {
        let mut current = start;
        for _ in 0..TREE_DEPTH_MAX {
            if current == ROOT_PARENT_ID {
                return Ok(());
            }
            let mut node = self.read_owned_node(current)?;
            let size = node.subtree_size as i64 + delta;
            if size < 1 || size > u32::MAX as i64 {
                return Err(corrupt(format!(
                    "subtree size of entry {current} would become {size}"
                )));
            }
            node.subtree_size = size as u32;
            let parent = node.parent;
            self.put_node(current, &node)?;
            current = parent;
        }
        Err(corrupt(format!(
            "entry {start}: parent chain deeper than {TREE_DEPTH_MAX}"
        )))
    }

    pub(crate) fn adjust_child_count(&mut self, id: EntryId, delta: i64) -> Result<(), LdapError> {
        if id == ROOT_PARENT_ID {
            return Ok(());
        }
        let mut node = self.read_owned_node(id)?;
        let count = node.child_count as i64 + delta;
        if count < 0 {
            return Err(corrupt(format!(
                "child count of entry {id} would become negative"
            )));
        }
        node.child_count = count as u32;
        self.put_node(id, &node)
    }

    pub(crate) fn put_entry(
        &mut self,
        id: EntryId,
        attributes: &[WorkingAttribute],
    ) -> Result<(), LdapError> {
        let (mut bytes, mut value_rows) = (Vec::new(), Vec::new());
        crate::rows::encode_attributes(
            self.inner,
            id,
            attributes,
            &mut crate::rows::RowScratch::new(),
            &mut bytes,
            &mut value_rows,
        )
        .map_err(|error| ldap(error.code, format!("entry {id}: {}", error.message)))?;
        self.inner
            .databases
            .id2entry
            .put(&mut self.txn, &layout::encode_id(id), &bytes)
            .map_err(lmdb_to_ldap)?;
        self.replace_value_rows(id, &value_rows)
    }

    /// Makes entry `id`'s `id2value` rows exactly `framed` (`Inner::replace_value_rows`).
    pub(crate) fn replace_value_rows(
        &mut self,
        id: EntryId,
        framed: &[u8],
    ) -> Result<(), LdapError> {
        self.check_deadline()?;
        self.inner.replace_value_rows(&mut self.txn, id, framed)?;
        Ok(())
    }

    pub(crate) fn stored_attributes(
        &self,
        id: EntryId,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        self.inner.stored_attributes(&self.txn, id)
    }

    pub(crate) fn set_operational(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        name: &str,
        value: Vec<u8>,
        replace: bool,
    ) -> Result<(), LdapError> {
        let Some(attr) = self.inner.schema().attribute(name) else {
            return Ok(());
        };
        let text = self.inner.schema().attribute_type(attr).name().to_string();
        let normalized = self.inner.schema().normalize_value(attr, &value)?;
        match attributes
            .iter_mut()
            .find(|attribute| attribute.attr == attr && attribute.options.is_empty())
        {
            Some(existing) if replace => existing.values = vec![(value, normalized)],
            Some(_) => {}
            None => attributes.push(WorkingAttribute {
                text,
                attr,
                options: Vec::new(),
                values: vec![(value, normalized)],
            }),
        }
        Ok(())
    }

    /// Stamps a change's operational attributes; returns the CSN it issued (None for a
    /// replicated change, which keeps the provider's).
    pub(crate) fn stamp_modification(
        &mut self,
        attributes: &mut Vec<WorkingAttribute>,
        context: &WriteContext,
    ) -> Result<Option<lmdir_sync::Csn>, LdapError> {
        let restamp = !context.replicated;
        self.set_operational(
            attributes,
            "modifyTimestamp",
            timestamp_value(context.now),
            restamp,
        )?;
        self.set_operational(
            attributes,
            "modifiersName",
            context.actor_dn.clone().into_bytes(),
            restamp,
        )?;
        if context.replicated {
            // The provider's entryCSN is kept (see `WriteContext::replicated`).
            return Ok(None);
        }
        let csn = self.next_csn(context.now)?;
        self.set_operational(attributes, "entryCSN", csn.to_string().into_bytes(), true)?;
        Ok(Some(csn))
    }

    /// Marks the writes that follow, until set back to false, as a replication provider's
    /// changes being applied: the memberOf upkeep they cause keeps each touched entry's
    /// entryCSN. That upkeep derives from replicated content alone, so every node derives the
    /// same values; a CSN of this node on it would make it look like a local change that is
    /// newer than the provider's, which multi-provider conflict resolution would let win (a
    /// deleted member brought back by its memberOf touch-up).
    pub fn set_applying_replicated(&mut self, applying: bool) {
        self.applying_replicated = applying;
    }

    /// A change this store makes on its own to another entry (memberOf upkeep: a group losing
    /// a deleted member, a member's memberOf): it takes a CSN like any change, so a
    /// replication consumer sees the entry as changed; except while applying replicated
    /// changes (`set_applying_replicated`).
    pub(crate) fn stamp_internal_change(
        &mut self,
        attributes: &mut Vec<WorkingAttribute>,
    ) -> Result<(), LdapError> {
        if self.applying_replicated {
            return Ok(());
        }
        let csn = self.next_csn(SystemTime::now())?;
        self.set_operational(attributes, "entryCSN", csn.to_string().into_bytes(), true)
    }

    /// The RDN fits a node and a dn2id key (`layout::rdn_size_problem`).
    pub(crate) fn check_rdn_size(
        &self,
        original_bytes: usize,
        normalized_bytes: usize,
        name: &str,
    ) -> Result<(), LdapError> {
        let key_size_max = self.inner.env.max_key_size();
        match layout::rdn_size_problem(original_bytes, normalized_bytes, key_size_max) {
            None => Ok(()),
            Some(problem) => Err(ldap(
                ResultCode::ConstraintViolation,
                format!("'{name}': {problem}"),
            )),
        }
    }

    pub(crate) fn allocate_id(&mut self) -> Result<EntryId, LdapError> {
        let next = self
            .inner
            .databases
            .meta
            .get(&self.txn, layout::META_NEXT_ID)
            .map_err(lmdb_to_ldap)?
            .and_then(layout::decode_id)
            .ok_or_else(|| corrupt("meta next_id missing"))?;
        let following = next.checked_add(1).ok_or_else(|| {
            ldap(
                ResultCode::UnwillingToPerform,
                "entry IDs exhausted (2^32 - 1 entries written)",
            )
        })?;
        self.inner
            .databases
            .meta
            .put(
                &mut self.txn,
                layout::META_NEXT_ID,
                &following.to_be_bytes(),
            )
            .map_err(lmdb_to_ldap)?;
        Ok(next)
    }

    pub fn num_subordinates(&self, id: EntryId) -> Result<u32, LdapError> {
        Ok(require_node(self.inner, &self.txn, id)?.child_count)
    }

    /// Records that the indexes of `attributes` are now built for their configured kinds (after
    /// a reindex of them); the other attributes keep what was built before, so a partial
    /// reindex never lets searches use an index kind nobody built.
    pub fn mark_indexes_built(&mut self, attributes: &[AttrId]) {
        self.indexes_built
            .get_or_insert_with(Vec::new)
            .extend_from_slice(attributes);
    }

    /// Writes `meta`'s record of the built indexes: what was usable before, plus the configured
    /// kinds of the rebuilt `attributes`; returns the state searches switch to after the commit.
    pub(crate) fn record_indexes_built(
        &mut self,
        attributes: &[AttrId],
    ) -> Result<IndexState, LdapError> {
        let inner = self.inner;
        let index_set = inner.index_set();
        let mut built = index_set.usable.clone();
        for attr in attributes {
            if let Some(kinds) = index_set.configured.get(attr) {
                built.insert(*attr, *kinds);
            }
        }
        let text = crate::store::index_config_text(&built, &inner.schema()).join("\n");
        inner
            .databases
            .meta
            .put(&mut self.txn, layout::META_INDEX_CONFIG, text.as_bytes())
            .map_err(lmdb_to_ldap)?;
        Ok(crate::store::index_state(
            &index_set.configured,
            &text,
            &inner.schema(),
        ))
    }

    /// The raw LMDB write txn, for tests (feature `raw-access`).
    #[cfg(feature = "raw-access")]
    pub fn raw_txn(&mut self) -> &mut RwTxn<'s> {
        &mut self.txn
    }

    /// Commits all changes made in this transaction.
    pub fn commit(self) -> Result<(), LdapError> {
        self.commit_with_changes().map(drop)
    }

    /// Commits, and hands back the changes recorded (`record_changes`; empty otherwise), now
    /// that they are committed.
    pub fn commit_with_changes(mut self) -> Result<CommittedChanges, LdapError> {
        let mut committed = std::mem::take(&mut self.changes.committed);
        committed.txn_id = self.txn.id() as u64;
        committed.sort_by_csn();
        let (mut persisted, described) = self.inner.persist_descriptions(&mut self.txn)?;
        let index_state = match self.indexes_built.take() {
            Some(attributes) => Some(self.record_indexes_built(&attributes)?),
            None => None,
        };
        let inner = self.inner;
        if self.tree_changed {
            inner.tree_changes_in(committed.txn_id);
        }
        let WriteTxn { txn, _writer, .. } = self;
        txn.commit().map_err(lmdb_to_ldap)?;
        *persisted = described;
        if let Some((usable, change)) = index_state {
            inner.set_usable_indexes(usable);
            *crate::lock::write(&inner.index_config_change) = change;
        }
        drop(_writer);
        Ok(committed)
    }
}
