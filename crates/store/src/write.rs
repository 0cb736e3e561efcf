//! Write transactions: add, delete, modify, modrdn — each keeping the DN tree and every index
//! exact.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::MutexGuard;
use std::time::SystemTime;

use heed::RwTxn;
use lmdir_schema::{AttrId, Attribute, Dn, Entry, LdapError, Modification, Rdn, ResultCode};

use crate::codec::{encode_entry, AttributeToEncode};
use crate::layout::{self, EntryId, IndexKinds, Node, ROOT_PARENT_ID};
use crate::read::DnPlacement;
use crate::read::{
    corrupt, is_within, lookup_rdns, read_entry, require_node, DnLookup, TREE_DEPTH_MAX,
};
use crate::store::{lmdb_to_ldap, Inner, Store, StoreError};

/// Who writes and when; `skip_schema_check` is for trusted imports and internal updates.
#[derive(Clone, Debug)]
pub struct WriteContext {
    pub actor_dn: String,
    pub now: SystemTime,
    pub skip_schema_check: bool,
}

impl WriteContext {
    pub fn new(actor_dn: impl Into<String>) -> WriteContext {
        WriteContext {
            actor_dn: actor_dn.into(),
            now: SystemTime::now(),
            skip_schema_check: false,
        }
    }
}

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
    _writer: MutexGuard<'s, ()>,
}

/// One attribute of an entry being written: canonical description and (original, normalized).
#[derive(Clone, Debug)]
pub(crate) struct WorkingAttribute {
    pub text: String,
    pub attr: AttrId,
    pub options: Vec<String>,
    pub values: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Store {
    /// Starts the write transaction (waits for another one in this process to finish).
    pub fn write(&self) -> Result<WriteTxn<'_>, StoreError> {
        let writer = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Grow the map ahead of need (no txn of ours is open here), so MAP_FULL only happens
        // if one transaction writes more than the free half of the map.
        self.inner.grow_map_if_needed()?;
        let txn = self.inner.env.write_txn()?;
        Ok(WriteTxn {
            txn,
            inner: &self.inner,
            indexes_built: None,
            _writer: writer,
        })
    }
}

static CSN_COUNTER: AtomicU32 = AtomicU32::new(0);

fn generalized_time(now: SystemTime) -> (String, u32) {
    let datetime = time::OffsetDateTime::from(now);
    (
        format!(
            "{:04}{:02}{:02}{:02}{:02}{:02}",
            datetime.year(),
            u8::from(datetime.month()),
            datetime.day(),
            datetime.hour(),
            datetime.minute(),
            datetime.second()
        ),
        datetime.microsecond(),
    )
}

/// `YYYYmmddHHMMSSZ`.
pub fn timestamp_value(now: SystemTime) -> Vec<u8> {
    format!("{}Z", generalized_time(now).0).into_bytes()
}

/// OpenLDAP-style CSN: `YYYYmmddHHMMSS.uuuuuuZ#count#sid#mod`.
pub fn csn_value(now: SystemTime) -> Vec<u8> {
    let (seconds, microseconds) = generalized_time(now);
    let count = CSN_COUNTER.fetch_add(1, Ordering::Relaxed) % 0x100_0000;
    format!("{seconds}.{microseconds:06}Z#{count:06x}#000#000000").into_bytes()
}

fn ldap(code: ResultCode, message: impl Into<String>) -> LdapError {
    LdapError::new(code, message)
}

impl Inner {
    /// Resolves and normalizes an owned entry's attributes without schema checks (merging
    /// descriptions that are equal after canonicalization; dropping duplicate values).
    pub(crate) fn normalize_attributes(
        &self,
        attributes: &[Attribute],
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let mut working: Vec<WorkingAttribute> = Vec::with_capacity(attributes.len());
        for attribute in attributes {
            let description = self.schema.parse_description(&attribute.description)?;
            let text = self.schema.description_string(&description);
            let position = match working.iter().position(|existing| existing.text == text) {
                Some(position) => position,
                None => {
                    working.push(WorkingAttribute {
                        text,
                        attr: description.attr,
                        options: description.options,
                        values: Vec::new(),
                    });
                    working.len() - 1
                }
            };
            for value in &attribute.values {
                let normalized = self.schema.normalize_value(description.attr, value)?;
                let target = &mut working[position].values;
                if !target.iter().any(|(_, existing)| *existing == normalized) {
                    target.push((value.clone(), normalized));
                }
            }
        }
        working.retain(|attribute| !attribute.values.is_empty());
        Ok(working)
    }

    /// Schema-checks (unless skipped) and normalizes.
    fn checked_attributes(
        &self,
        entry: &Entry,
        skip_schema_check: bool,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        if skip_schema_check {
            return self.normalize_attributes(&entry.attributes);
        }
        let checked = self.schema.check_and_normalize(entry)?;
        Ok(checked
            .attributes
            .into_iter()
            .map(|attribute| WorkingAttribute {
                text: attribute.description_string,
                attr: attribute.description.attr,
                options: attribute.description.options,
                values: attribute.values,
            })
            .collect())
    }

    /// Every index key (without chunk) of an entry's values, per indexed attribute.
    pub(crate) fn index_keys(
        &self,
        attributes: &[WorkingAttribute],
    ) -> BTreeMap<AttrId, BTreeSet<Vec<u8>>> {
        let mut keys: BTreeMap<AttrId, BTreeSet<Vec<u8>>> = BTreeMap::new();
        let mut buffer = Vec::new();
        for attribute in attributes {
            let kinds = self
                .configured_indexes
                .get(&attribute.attr)
                .copied()
                .unwrap_or_default();
            if kinds.is_empty() {
                continue;
            }
            let ordering = self.schema.attribute_type(attribute.attr).ordering;
            let set = keys.entry(attribute.attr).or_default();
            for (_, normalized) in &attribute.values {
                buffer.clear();
                let ordering_key = match ordering {
                    Some(rule) if kinds.contains(IndexKinds::ORDERED) => {
                        Some(rule.ordering_key(normalized))
                    }
                    _ => None,
                };
                layout::index_keys_for_value(
                    kinds,
                    normalized,
                    ordering_key.as_deref(),
                    &mut buffer,
                );
                set.extend(buffer.drain(..));
            }
        }
        keys
    }
}

fn to_owned_entry(dn: Dn, attributes: &[WorkingAttribute]) -> Entry {
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
type RdnAssertion = (AttrId, Vec<u8>, Vec<u8>);

/// An owned copy of an id2node row.
struct OwnedNode {
    parent: EntryId,
    subtree_size: u32,
    child_count: u32,
    rdn_original: Vec<u8>,
    rdn_normalized: Vec<u8>,
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

impl<'s> WriteTxn<'s> {
    fn read_owned_node(&self, id: EntryId) -> Result<OwnedNode, LdapError> {
        Ok(OwnedNode::from(&require_node(self.inner, &self.txn, id)?))
    }

    fn put_node(&mut self, id: EntryId, node: &OwnedNode) -> Result<(), LdapError> {
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

    /// Adds `delta` to the subtree size of `start` and all its ancestors.
    fn adjust_subtree_sizes(&mut self, start: EntryId, delta: i64) -> Result<(), LdapError> {
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

    fn adjust_child_count(&mut self, id: EntryId, delta: i64) -> Result<(), LdapError> {
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

    fn posting_change(
        &mut self,
        attr: AttrId,
        key: &[u8],
        id: EntryId,
        add: bool,
    ) -> Result<(), LdapError> {
        let database = *self
            .inner
            .databases
            .indexes
            .get(&attr)
            .expect("an index DB exists for every configured attribute");
        let mut full_key = Vec::with_capacity(key.len() + 2);
        layout::index_key_with_chunk(key, layout::chunk_of(id), &mut full_key);
        let existing = database.get(&self.txn, &full_key).map_err(lmdb_to_ldap)?;
        let mut bytes = Vec::new();
        match layout::change_posting_chunk(existing, layout::low_half(id), add, &mut bytes)
            .map_err(|error| corrupt(format!("index key {full_key:?}: {error}")))?
        {
            layout::ChunkChange::Unchanged => {}
            layout::ChunkChange::Empty => {
                database
                    .delete(&mut self.txn, &full_key)
                    .map_err(lmdb_to_ldap)?;
            }
            layout::ChunkChange::Written => {
                database
                    .put(&mut self.txn, &full_key, &bytes)
                    .map_err(lmdb_to_ldap)?;
            }
        }
        Ok(())
    }

    /// Applies the difference between an entry's old and new index keys.
    pub(crate) fn update_indexes(
        &mut self,
        id: EntryId,
        old: &BTreeMap<AttrId, BTreeSet<Vec<u8>>>,
        new: &BTreeMap<AttrId, BTreeSet<Vec<u8>>>,
    ) -> Result<(), LdapError> {
        let empty = BTreeSet::new();
        for (attr, old_keys) in old {
            let new_keys = new.get(attr).unwrap_or(&empty);
            for key in old_keys.difference(new_keys) {
                self.posting_change(*attr, key, id, false)?;
            }
        }
        for (attr, new_keys) in new {
            let old_keys = old.get(attr).unwrap_or(&empty);
            for key in new_keys.difference(old_keys) {
                self.posting_change(*attr, key, id, true)?;
            }
        }
        Ok(())
    }

    pub(crate) fn put_entry(
        &mut self,
        id: EntryId,
        attributes: &[WorkingAttribute],
    ) -> Result<(), LdapError> {
        let numbers: Vec<u32> = attributes
            .iter()
            .map(|attribute| {
                self.inner
                    .description_number(&attribute.text, attribute.attr, &attribute.options)
            })
            .collect();
        let to_encode: Vec<AttributeToEncode<'_>> = attributes
            .iter()
            .zip(&numbers)
            .map(|(attribute, number)| AttributeToEncode {
                description_number: *number,
                values: &attribute.values,
            })
            .collect();
        let mut bytes = Vec::new();
        encode_entry(&to_encode, &mut bytes);
        self.inner
            .databases
            .id2entry
            .put(&mut self.txn, &layout::encode_id(id), &bytes)
            .map_err(lmdb_to_ldap)
    }

    pub(crate) fn stored_attributes(
        &self,
        id: EntryId,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let encoded = read_entry(self.inner, &self.txn, id)?
            .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
        let descriptions = self
            .inner
            .descriptions
            .read()
            .expect("description lock poisoned")
            .clone();
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

    pub(crate) fn lookup(&self, dn: &Dn) -> Result<(Vec<String>, DnLookup), LdapError> {
        let rdns = self.inner.normalize_rdns(dn)?;
        let lookup = lookup_rdns(self.inner, &self.txn, &rdns)?;
        Ok((rdns, lookup))
    }

    fn no_such_object(&self, dn: &Dn, lookup: &DnLookup) -> Result<LdapError, LdapError> {
        let mut error = ldap(ResultCode::NoSuchObject, format!("no such entry '{dn}'"));
        if let Some((ancestor, _)) = lookup.deepest {
            error =
                error.with_matched_dn(crate::read::dn_of(self.inner, &self.txn, ancestor, false)?);
        }
        Ok(error)
    }

    /// Finds an existing entry by DN or fails with noSuchObject (+ matched DN).
    fn existing(&self, dn: &Dn) -> Result<EntryId, LdapError> {
        let (_, lookup) = self.lookup(dn)?;
        match lookup.found {
            Some(id) => Ok(id),
            None => Err(self.no_such_object(dn, &lookup)?),
        }
    }

    fn set_operational(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        name: &str,
        value: Vec<u8>,
        replace: bool,
    ) -> Result<(), LdapError> {
        let Some(attr) = self.inner.schema.attribute(name) else {
            return Ok(());
        };
        let text = self.inner.schema.attribute_type(attr).name().to_string();
        let normalized = self.inner.schema.normalize_value(attr, &value)?;
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

    fn stamp_modification(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        context: &WriteContext,
    ) -> Result<(), LdapError> {
        self.set_operational(
            attributes,
            "modifyTimestamp",
            timestamp_value(context.now),
            true,
        )?;
        self.set_operational(
            attributes,
            "modifiersName",
            context.actor_dn.clone().into_bytes(),
            true,
        )?;
        self.set_operational(attributes, "entryCSN", csn_value(context.now), true)
    }

    /// LMDB keys are limited (511 bytes by default); a dn2id key is 4 + normalized RDN bytes.
    fn check_rdn_key_size(&self, rdn_normalized_bytes: usize, name: &str) -> Result<(), LdapError> {
        let key_size_max = self.inner.env.max_key_size();
        if 4 + rdn_normalized_bytes > key_size_max {
            return Err(ldap(
                ResultCode::ConstraintViolation,
                format!(
                    "'{name}': normalized RDN of {rdn_normalized_bytes} bytes exceeds the limit of {} bytes",
                    key_size_max - 4
                ),
            ));
        }
        Ok(())
    }

    fn allocate_id(&mut self) -> Result<EntryId, LdapError> {
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

    /// Adds an entry; returns its ID.
    pub fn add(&mut self, entry: &Entry, context: &WriteContext) -> Result<EntryId, LdapError> {
        let (rdns, lookup) = self.lookup(&entry.dn)?;
        if lookup.found.is_some() {
            return Err(ldap(
                ResultCode::EntryAlreadyExists,
                format!("entry '{}' already exists", entry.dn),
            ));
        }
        let DnPlacement::UnderSuffix { below_suffix_rdns } = self.inner.place_dn(&rdns) else {
            return Err(ldap(
                ResultCode::NoSuchObject,
                format!(
                    "'{}' is not within the naming context '{}'",
                    entry.dn, self.inner.suffix_original
                ),
            ));
        };
        let (parent, rdn_original, rdn_normalized) = if below_suffix_rdns == 0 {
            // The top-level entry: its dn2id key is its whole normalized DN.
            (
                ROOT_PARENT_ID,
                entry.dn.to_string(),
                Inner::top_level_key(&rdns, 0),
            )
        } else {
            // The parent must exist: it is the lookup's deepest match covering all but one RDN.
            match lookup.deepest {
                Some((parent, covered)) if covered == rdns.len() - 1 => {
                    (parent, entry.dn.rdns[0].to_string(), rdns[0].clone())
                }
                _ => {
                    let mut error = self.no_such_object(&entry.dn, &lookup)?;
                    error.message = format!("parent of '{}' does not exist", entry.dn);
                    return Err(error);
                }
            }
        };

        let mut attributes = self
            .inner
            .checked_attributes(entry, context.skip_schema_check)?;
        let timestamp = timestamp_value(context.now);
        self.set_operational(
            &mut attributes,
            "entryUUID",
            uuid::Uuid::new_v4().to_string().into_bytes(),
            false,
        )?;
        self.set_operational(
            &mut attributes,
            "creatorsName",
            context.actor_dn.clone().into_bytes(),
            false,
        )?;
        self.set_operational(&mut attributes, "createTimestamp", timestamp.clone(), false)?;
        self.set_operational(
            &mut attributes,
            "modifiersName",
            context.actor_dn.clone().into_bytes(),
            false,
        )?;
        self.set_operational(&mut attributes, "modifyTimestamp", timestamp, false)?;
        self.set_operational(&mut attributes, "entryCSN", csn_value(context.now), false)?;
        if let Ok(class) = self.inner.schema.structural_object_class(entry) {
            let name = self
                .inner
                .schema
                .object_class_definition(class)
                .name()
                .to_string();
            self.set_operational(
                &mut attributes,
                "structuralObjectClass",
                name.into_bytes(),
                false,
            )?;
        }

        self.check_rdn_key_size(rdn_normalized.len(), &entry.dn.to_string())?;
        let id = self.allocate_id()?;
        let mut key = Vec::new();
        layout::encode_dn2id_key(parent, rdn_normalized.as_bytes(), &mut key);
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
                rdn_original: rdn_original.into_bytes(),
                rdn_normalized: rdn_normalized.into_bytes(),
            },
        )?;
        self.adjust_subtree_sizes(parent, 1)?;
        self.adjust_child_count(parent, 1)?;
        self.put_entry(id, &attributes)?;
        let keys = self.inner.index_keys(&attributes);
        self.update_indexes(id, &BTreeMap::new(), &keys)?;
        if self.inner.options.memberof {
            let members = self.group_members(&attributes);
            if !members.is_empty() {
                let group_dn = self.dn_of(id)?;
                self.memberof_group_changed(
                    id,
                    Some(&group_dn),
                    &BTreeSet::new(),
                    Some(&group_dn),
                    &members,
                )?;
            }
        }
        Ok(id)
    }

    /// Deletes a leaf entry.
    pub fn delete(&mut self, dn: &str) -> Result<EntryId, LdapError> {
        let dn = Dn::parse(dn)?;
        let id = self.existing(&dn)?;
        let node = self.read_owned_node(id)?;
        if node.child_count > 0 {
            return Err(ldap(
                ResultCode::NotAllowedOnNonLeaf,
                format!("entry '{dn}' has {} children", node.child_count),
            ));
        }
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
        self.update_indexes(id, &keys, &BTreeMap::new())?;
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
        self.inner
            .databases
            .dn2id
            .delete(&mut self.txn, &key)
            .map_err(lmdb_to_ldap)?;
        self.adjust_subtree_sizes(node.parent, -1)?;
        self.adjust_child_count(node.parent, -1)?;
        Ok(id)
    }

    /// The (attr, normalized value) pairs of an RDN.
    fn rdn_assertions(&self, rdn: &Rdn) -> Result<Vec<RdnAssertion>, LdapError> {
        rdn.avas
            .iter()
            .map(|ava| {
                let attr = self.inner.schema.attribute(&ava.attr).ok_or_else(|| {
                    ldap(
                        ResultCode::InvalidDnSyntax,
                        format!("unknown attribute type '{}' in RDN", ava.attr),
                    )
                })?;
                let normalized = self.inner.schema.normalize_value(attr, &ava.value)?;
                Ok((attr, ava.value.clone(), normalized))
            })
            .collect()
    }

    /// The RDN (parsed) of an entry's node; the top-level entry's node holds its whole DN.
    fn node_rdn(&self, node: &OwnedNode) -> Result<Rdn, LdapError> {
        let text =
            std::str::from_utf8(&node.rdn_original).map_err(|_| corrupt("RDN is not UTF-8"))?;
        let dn = Dn::parse(text)?;
        dn.rdns
            .into_iter()
            .next()
            .ok_or_else(|| corrupt("empty RDN in id2node"))
    }

    /// Modifies an entry (RFC 4511 §4.6; all or nothing).
    pub fn modify(
        &mut self,
        dn: &str,
        modifications: &[Modification],
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        let dn = Dn::parse(dn)?;
        let id = self.existing(&dn)?;
        let old_attributes = self.stored_attributes(id)?;
        let mut entry = to_owned_entry(dn.clone(), &old_attributes);
        for modification in modifications {
            if !context.skip_schema_check {
                self.inner
                    .schema
                    .check_user_modification(&modification.description)?;
            }
            self.inner
                .schema
                .apply_modification(&mut entry, modification)?;
        }
        let node = self.read_owned_node(id)?;
        let mut attributes = self.inner.normalize_attributes(&entry.attributes)?;
        // RDN values cannot be removed.
        for (attr, _, normalized) in self.rdn_assertions(&self.node_rdn(&node)?)? {
            let present = attributes.iter().any(|attribute| {
                attribute.attr == attr
                    && attribute
                        .values
                        .iter()
                        .any(|(_, value)| *value == normalized)
            });
            if !present {
                return Err(ldap(
                    ResultCode::NotAllowedOnRdn,
                    format!(
                        "cannot remove the RDN value of '{}' from '{dn}'",
                        self.inner.schema.attribute_type(attr).name()
                    ),
                ));
            }
        }
        self.stamp_modification(&mut attributes, context)?;
        if !context.skip_schema_check {
            attributes = self
                .inner
                .checked_attributes(&to_owned_entry(dn, &attributes), false)?;
        }
        self.put_entry(id, &attributes)?;
        let old_keys = self.inner.index_keys(&old_attributes);
        let new_keys = self.inner.index_keys(&attributes);
        self.update_indexes(id, &old_keys, &new_keys)?;
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
        Ok(id)
    }

    /// Renames and/or moves an entry (with its whole subtree: only the moved node changes).
    pub fn modrdn(
        &mut self,
        dn: &str,
        new_rdn: &str,
        delete_old_rdn: bool,
        new_superior: Option<&str>,
        context: &WriteContext,
    ) -> Result<EntryId, LdapError> {
        let dn = Dn::parse(dn)?;
        let id = self.existing(&dn)?;
        let node = self.read_owned_node(id)?;
        if node.parent == ROOT_PARENT_ID {
            return Err(ldap(
                ResultCode::UnwillingToPerform,
                format!("cannot rename the naming context entry '{dn}'"),
            ));
        }
        let new_rdn = Rdn::parse(new_rdn)?;
        let new_rdn_normalized = self.inner.schema.normalize_rdn(&new_rdn)?;
        let new_parent = match new_superior {
            None => node.parent,
            Some(superior) => {
                let superior = Dn::parse(superior)?;
                let parent = self.existing(&superior)?;
                if is_within(self.inner, &self.txn, parent, id)? {
                    return Err(ldap(
                        ResultCode::UnwillingToPerform,
                        format!("cannot move '{dn}' below itself ('{superior}')"),
                    ));
                }
                parent
            }
        };
        self.check_rdn_key_size(new_rdn_normalized.len(), &new_rdn.to_string())?;
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

        // Entry values: add the new RDN's values, drop the old ones when asked.
        let old_attributes = self.stored_attributes(id)?;
        let mut attributes = old_attributes.clone();
        let new_assertions = self.rdn_assertions(&new_rdn)?;
        if delete_old_rdn {
            for (attr, _, normalized) in self.rdn_assertions(&self.node_rdn(&node)?)? {
                if new_assertions
                    .iter()
                    .any(|(new_attr, _, new_value)| *new_attr == attr && *new_value == normalized)
                {
                    continue;
                }
                for attribute in attributes
                    .iter_mut()
                    .filter(|attribute| attribute.attr == attr && attribute.options.is_empty())
                {
                    attribute.values.retain(|(_, value)| *value != normalized);
                }
            }
            attributes.retain(|attribute| !attribute.values.is_empty());
        }
        for (attr, original, normalized) in new_assertions {
            let present = attributes.iter().any(|attribute| {
                attribute.attr == attr
                    && attribute
                        .values
                        .iter()
                        .any(|(_, value)| *value == normalized)
            });
            if present {
                continue;
            }
            match attributes
                .iter_mut()
                .find(|attribute| attribute.attr == attr && attribute.options.is_empty())
            {
                Some(attribute) => attribute.values.push((original, normalized)),
                None => attributes.push(WorkingAttribute {
                    text: self.inner.schema.attribute_type(attr).name().to_string(),
                    attr,
                    options: Vec::new(),
                    values: vec![(original, normalized)],
                }),
            }
        }
        self.stamp_modification(&mut attributes, context)?;
        let parent_dn = match new_superior {
            Some(superior) => Dn::parse(superior)?,
            None => dn.parent().unwrap_or_else(Dn::root),
        };
        let new_dn = parent_dn.child(new_rdn.clone());
        if !context.skip_schema_check {
            attributes = self
                .inner
                .checked_attributes(&to_owned_entry(new_dn, &attributes), false)?;
        }

        let old_dn_text = self.dn_of(id)?;
        // Tree: move the one node.
        let mut old_key = Vec::new();
        layout::encode_dn2id_key(node.parent, &node.rdn_normalized, &mut old_key);
        self.inner
            .databases
            .dn2id
            .delete(&mut self.txn, &old_key)
            .map_err(lmdb_to_ldap)?;
        self.inner
            .databases
            .dn2id
            .put(&mut self.txn, &new_key, &layout::encode_id(id))
            .map_err(lmdb_to_ldap)?;
        let moved = OwnedNode {
            parent: new_parent,
            subtree_size: node.subtree_size,
            child_count: node.child_count,
            rdn_original: new_rdn.to_string().into_bytes(),
            rdn_normalized: new_rdn_normalized.into_bytes(),
        };
        self.put_node(id, &moved)?;
        if new_parent != node.parent {
            self.adjust_subtree_sizes(node.parent, -(node.subtree_size as i64))?;
            self.adjust_child_count(node.parent, -1)?;
            self.adjust_subtree_sizes(new_parent, node.subtree_size as i64)?;
            self.adjust_child_count(new_parent, 1)?;
        }
        self.put_entry(id, &attributes)?;
        let old_keys = self.inner.index_keys(&old_attributes);
        let new_keys = self.inner.index_keys(&attributes);
        self.update_indexes(id, &old_keys, &new_keys)?;
        if self.inner.options.memberof {
            let new_dn_text = self.dn_of(id)?;
            let old_members = self.group_members(&old_attributes);
            let new_members = self.group_members(&attributes);
            self.memberof_group_changed(
                id,
                Some(&old_dn_text),
                &old_members,
                Some(&new_dn_text),
                &new_members,
            )?;
            self.memberof_member_renamed_or_deleted(
                id,
                &old_dn_text,
                &attributes,
                Some(&new_dn_text),
            )?;
        }
        Ok(id)
    }

    /// The DN of an entry as this transaction sees it.
    pub fn dn_of(&self, id: EntryId) -> Result<String, LdapError> {
        crate::read::dn_of(self.inner, &self.txn, id, false)
    }

    /// The ID of a DN as this transaction sees it (noSuchObject with matched DN on a miss).
    pub fn dn_to_id(&self, dn: &str) -> Result<EntryId, LdapError> {
        self.existing(&Dn::parse(dn)?)
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
    fn record_indexes_built(&mut self, attributes: &[AttrId]) -> Result<IndexState, LdapError> {
        let inner = self.inner;
        let mut built = inner
            .usable_indexes
            .read()
            .expect("index lock poisoned")
            .clone();
        for attr in attributes {
            if let Some(kinds) = inner.configured_indexes.get(attr) {
                built.insert(*attr, *kinds);
            }
        }
        let text = crate::store::index_config_text(&built, &inner.schema).join("\n");
        inner
            .databases
            .meta
            .put(&mut self.txn, layout::META_INDEX_CONFIG, text.as_bytes())
            .map_err(lmdb_to_ldap)?;
        Ok(crate::store::index_state(
            &inner.configured_indexes,
            &text,
            &inner.schema,
        ))
    }

    /// The raw LMDB write txn (for the bulk loader and tests).
    pub fn raw_txn(&mut self) -> &mut RwTxn<'s> {
        &mut self.txn
    }

    /// Commits all changes made in this transaction.
    pub fn commit(mut self) -> Result<(), LdapError> {
        // Persist descriptions allocated since the last commit (numbers are dense).
        let mut persisted = self
            .inner
            .descriptions_persisted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let table = self
            .inner
            .descriptions
            .read()
            .expect("description lock poisoned")
            .clone();
        for number in *persisted..table.len() {
            let info = table.get(number as u32).expect("number below table length");
            let mut key = layout::META_DESCRIPTION_PREFIX.to_vec();
            key.extend_from_slice(&(number as u32).to_be_bytes());
            self.inner
                .databases
                .meta
                .put(&mut self.txn, &key, info.text.as_bytes())
                .map_err(lmdb_to_ldap)?;
        }
        let index_state = match self.indexes_built.take() {
            Some(attributes) => Some(self.record_indexes_built(&attributes)?),
            None => None,
        };
        let inner = self.inner;
        let WriteTxn { txn, _writer, .. } = self;
        txn.commit().map_err(lmdb_to_ldap)?;
        *persisted = table.len();
        if let Some((usable, change)) = index_state {
            *inner.usable_indexes.write().expect("index lock poisoned") = usable;
            *inner
                .index_config_change
                .write()
                .expect("index lock poisoned") = change;
        }
        drop(_writer);
        Ok(())
    }
}
