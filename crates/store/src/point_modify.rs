//! Modify of an entry with out-of-line attributes (`layout::is_out_of_line`) without reading
//! their values: adding or deleting values of such an attribute is a point lookup, insert or
//! delete in `id2value` per value, plus that value's index keys and memberOf upkeep for that
//! one member. The record (inline attributes and the markers) is rewritten and schema-checked
//! as usual; an out-of-line attribute takes part in the check through one of its values (each
//! stored value was checked when written, and the check needs presence and the type only).
//!
//! Anything else goes the general way (`WriteTxn::modify` reads the whole entry): replacing or
//! deleting a whole out-of-line attribute, emptying it, crossing the count threshold either
//! way, a new description of an always-out-of-line type, one attribute type under two
//! descriptions where one is out of line, and deleting values of an attribute with substring
//! or ordered indexes (whether another value still gives a gram needs them all). Deleting a
//! value removes its equality key: two values of one entry with the same 64-bit hash would
//! leave the other unindexed (`lmdir check` would name it).

use std::collections::{BTreeMap, HashMap, HashSet};

use lmdir_schema::{
    AttrId, LdapError, ModOp, Modification, NormalizedAttributes, NormalizedDn, ResultCode,
};

use crate::changes::ChangeKind;
use crate::codec::{encode_entry, AttributeToEncode};
use crate::error::lmdb_to_ldap;
use crate::index::IndexKeys;
use crate::layout::{self, EntryId, IndexKinds};
use crate::memberof::{MemberLinks, NewMemberDn};
use crate::read::{corrupt, out_of_line_contains, read_entry};
use crate::value_blocks;
use crate::write::{WorkingAttribute, WriteContext, WriteTxn};

/// One out-of-line description of the entry being modified.
struct Outside {
    number: u32,
    attr: AttrId,
    options: Vec<String>,
    text: String,
    count: usize,
}

/// What a request does to one out-of-line value: whether it was there before, whether it is
/// there after (with the original to store).
struct PointChange {
    number: u32,
    attr: AttrId,
    normalized: Vec<u8>,
    existed: bool,
    after: Option<Vec<u8>>,
}

/// The planned point changes, keyed by (description number, normalized value).
type PointChanges = BTreeMap<(u32, Vec<u8>), PointChange>;

fn violation(code: ResultCode, message: String) -> LdapError {
    LdapError::new(code, message)
}

impl WriteTxn<'_> {
    /// The modify of entry `id` done the point way, or None when it must go the general way
    /// (nothing written then).
    pub(crate) fn modify_out_of_line(
        &mut self,
        id: EntryId,
        dn: &NormalizedDn,
        modifications: &[Modification],
        context: &WriteContext,
    ) -> Result<Option<EntryId>, LdapError> {
        let Some(mut outside) = self.outside_descriptions(id)? else {
            return Ok(None);
        };
        let schema = self.inner.schema().clone();
        // The per-attribute change state is edited inline (`record_local_change_states`).
        let state = schema.attribute(crate::attribute_state::ATTRIBUTE_STATE);
        if outside.iter().any(|one| Some(one.attr) == state) {
            return Ok(None);
        }
        let mut inline_mods = Vec::new();
        let mut changes = PointChanges::new();
        for modification in modifications {
            self.check_deadline()?;
            if !context.skip_schema_check && !context.relax {
                schema.check_user_modification(&modification.description)?;
            }
            let Ok(description) = schema.parse_description(&modification.description) else {
                return Ok(None);
            };
            let target = outside.iter_mut().find(|outside| {
                outside.attr == description.attr && outside.options == description.options
            });
            match target {
                Some(target) => {
                    if !self.plan_point(target, id, modification, context, &mut changes)? {
                        return Ok(None);
                    }
                }
                None if self.inner.out_of_line_always.contains(&description.attr) => {
                    return Ok(None)
                }
                None => inline_mods.push(modification),
            }
        }
        let requested = (inline_mods.as_slice(), modifications);
        let attributes = self.inline_after(id, dn, requested, &outside, &changes, context)?;
        let Some(attributes) = attributes else {
            return Ok(None);
        };
        if !self.point_deletes_are_exact(&changes) {
            return Ok(None);
        }
        self.refuse_rdn_point_deletes(dn, &changes)?;
        self.write_point_modify(id, &attributes, &outside, &changes, true)?;
        Ok(Some(id))
    }

    /// The entry's out-of-line descriptions; None when it has none, or when one shares its
    /// attribute type with another description of the entry.
    fn outside_descriptions(&self, id: EntryId) -> Result<Option<Vec<Outside>>, LdapError> {
        let encoded = read_entry(self.inner, &self.txn, id)?
            .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
        if !encoded.has_out_of_line() {
            return Ok(None);
        }
        let descriptions = crate::lock::read(&self.inner.descriptions).clone();
        let mut outside = Vec::new();
        let mut attrs = Vec::new();
        for attribute in encoded.attributes() {
            let info = descriptions
                .get(attribute.description_number)
                .ok_or_else(|| corrupt(format!("entry {id}: unknown description")))?;
            attrs.push(info.attr);
            if attribute.out_of_line {
                outside.push(Outside {
                    number: attribute.description_number,
                    attr: info.attr,
                    options: info.options.clone(),
                    text: info.text.clone(),
                    count: attribute.value_count,
                });
            }
        }
        let shared = outside
            .iter()
            .any(|one| attrs.iter().filter(|attr| **attr == one.attr).count() > 1);
        Ok((!shared).then_some(outside))
    }

    /// Whether normalized `value` of `target` is there, as planned so far or as stored.
    fn point_present(
        &self,
        id: EntryId,
        target: &Outside,
        normalized: &[u8],
        changes: &PointChanges,
    ) -> Result<bool, LdapError> {
        match changes.get(&(target.number, normalized.to_vec())) {
            Some(change) => Ok(change.after.is_some()),
            None => out_of_line_contains(self.inner, &self.txn, id, target.number, normalized),
        }
    }

    /// Plans one add or delete of values of an out-of-line description (false: not a point
    /// change, go the general way). Errors are the general way's: 20, 16, syntax.
    fn plan_point(
        &self,
        target: &mut Outside,
        id: EntryId,
        modification: &Modification,
        context: &WriteContext,
        changes: &mut PointChanges,
    ) -> Result<bool, LdapError> {
        let name = &target.text;
        let operation = match modification.op {
            ModOp::Add if !modification.values.is_empty() => "add",
            ModOp::Delete if !modification.values.is_empty() => "delete",
            _ => return Ok(false),
        };
        let mut given = HashSet::new();
        let mut planned = Vec::new();
        for (index, value) in modification.values.iter().enumerate() {
            let normalized = self
                .inner
                .schema()
                .normalize_value(target.attr, value)
                .map_err(|error| {
                    violation(
                        error.code,
                        format!("modify/{operation}: {name}: value #{index} invalid per syntax"),
                    )
                })?;
            let repeated = !given.insert(normalized.clone());
            if repeated && operation == "delete" {
                continue;
            }
            let present = self.point_present(id, target, &normalized, changes)?;
            if operation == "add" && ((present && !context.permissive_modify) || repeated) {
                return Err(violation(
                    ResultCode::AttributeOrValueExists,
                    format!("modify/add: {name}: value #{index} already exists"),
                ));
            }
            if operation == "delete" && !present && !context.permissive_modify {
                return Err(violation(
                    ResultCode::NoSuchAttribute,
                    format!("modify/delete: {name}: value #{index} does not exist"),
                ));
            }
            if present != (operation == "add") {
                planned.push((value.clone(), normalized, present));
            }
        }
        for (original, normalized, present) in planned {
            let key = (target.number, normalized.clone());
            let existed = changes.get(&key).map_or(present, |change| change.existed);
            let after = (operation == "add").then_some(original);
            target.count = match after {
                Some(_) => target.count + 1,
                None => target.count - 1,
            };
            changes.insert(
                key,
                PointChange {
                    number: target.number,
                    attr: target.attr,
                    normalized,
                    existed,
                    after,
                },
            );
        }
        Ok(target.count > 0 && self.inner.is_out_of_line(target.attr, target.count))
    }

    /// The inline attributes after the inline modifications (`requested`: those, and the
    /// whole request), schema-checked with the out-of-line ones present, stamped, with the
    /// change state of every description the request touches (as the general way records
    /// it); None when one should now live out of line (the general way moves it). Only the
    /// modifications' values are normalized.
    fn inline_after(
        &mut self,
        id: EntryId,
        dn: &NormalizedDn,
        (modifications, request): (&[&Modification], &[Modification]),
        outside: &[Outside],
        changes: &PointChanges,
        context: &WriteContext,
    ) -> Result<Option<Vec<WorkingAttribute>>, LdapError> {
        let mut modified = self.inner.stored_normalized(self.inline_attributes(id)?);
        let schema = self.inner.schema();
        let held = crate::write::held_rdn_values(&schema, &modified, dn);
        for modification in modifications {
            self.check_deadline()?;
            schema.apply_normalized_modification(
                &mut modified,
                modification,
                context.permissive_modify,
            )?;
        }
        if modified.as_slice().iter().any(|attribute| {
            self.inner
                .is_out_of_line(attribute.description.attr, attribute.values.len())
        }) {
            return Ok(None);
        }
        self.refuse_inline_rdn_removal(dn, held, &modified, outside)?;
        let mut attributes = match context.skip_schema_check {
            true => self.inner.modified_attributes(modified, dn, true)?,
            false => self.checked_with_stand_ins(id, dn, modified, outside, changes)?,
        };
        let stamped = self.stamp_modification(&mut attributes, context)?;
        self.record_local_change_states(&mut attributes, request, stamped)?;
        let mut counted = attributes.clone();
        counted.extend(outside.iter().map(|one| WorkingAttribute {
            text: one.text.clone(),
            attr: one.attr,
            options: one.options.clone(),
            values: Vec::new(),
        }));
        crate::rows::check_entry_limits(&counted, context)?;
        Ok(Some(attributes))
    }

    /// Schema-checks inline attributes together with one value of each out-of-line one
    /// (its first stored value still there, else a planned new one; both normalized already)
    /// and returns the inline attributes as checked.
    fn checked_with_stand_ins(
        &self,
        id: EntryId,
        dn: &NormalizedDn,
        attributes: NormalizedAttributes,
        outside: &[Outside],
        changes: &PointChanges,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let mut with_stand_ins = attributes.into_vec();
        for one in outside {
            // A planned new value, else the first stored one not deleted by this request.
            let mut stand_in = changes.values().find_map(|change| {
                let original = change
                    .after
                    .as_ref()
                    .filter(|_| change.number == one.number)?;
                Some((original.clone(), change.normalized.clone()))
            });
            if stand_in.is_none() {
                for row in crate::read::out_of_line_rows(self.inner, &self.txn, id, one.number)? {
                    let row = row?;
                    if !changes.contains_key(&(one.number, row.normalized.to_vec())) {
                        stand_in = Some((row.original.to_vec(), row.normalized.to_vec()));
                        break;
                    }
                }
            }
            let stand_in = stand_in
                .ok_or_else(|| corrupt(format!("entry {id}: out-of-line values vanished")))?;
            with_stand_ins.push(
                WorkingAttribute {
                    text: one.text.clone(),
                    attr: one.attr,
                    options: one.options.clone(),
                    values: vec![stand_in],
                }
                .into_checked(),
            );
        }
        let with_stand_ins = self.inner.schema().stored_normalized(with_stand_ins);
        let checked = self.inner.modified_attributes(with_stand_ins, dn, false)?;
        Ok(checked
            .into_iter()
            .filter(|attribute| {
                !outside
                    .iter()
                    .any(|one| one.attr == attribute.attr && one.options == attribute.options)
            })
            .collect())
    }

    /// The entry's inline attributes (out-of-line ones left out, their values unread).
    fn inline_attributes(&self, id: EntryId) -> Result<Vec<WorkingAttribute>, LdapError> {
        self.inner.stored_attributes_inline(&self.txn, id)
    }

    /// Deleted values with only equality and presence keys can be unindexed one by one.
    fn point_deletes_are_exact(&self, changes: &PointChanges) -> bool {
        let point_safe = IndexKinds::EQUALITY.union(IndexKinds::PRESENCE);
        changes
            .values()
            .filter(|change| change.existed && change.after.is_none())
            .all(|change| {
                self.inner
                    .index_set()
                    .plan
                    .get(change.attr)
                    .is_none_or(|indexed| point_safe.contains(indexed.kinds))
            })
    }

    /// An inline RDN value the entry held (`held`) cannot be removed (notAllowedOnRDN, as the
    /// general way answers).
    fn refuse_inline_rdn_removal(
        &self,
        dn: &NormalizedDn,
        held: Vec<(AttrId, Vec<u8>)>,
        attributes: &NormalizedAttributes,
        outside: &[Outside],
    ) -> Result<(), LdapError> {
        for (attr, normalized) in held {
            if outside.iter().any(|one| one.attr == attr) {
                continue;
            }
            crate::write::require_rdn_value(self.inner, attributes, attr, &normalized, dn.dn())?;
        }
        Ok(())
    }

    /// An RDN value cannot be deleted (notAllowedOnRDN, as the general way answers).
    fn refuse_rdn_point_deletes(
        &self,
        dn: &NormalizedDn,
        changes: &PointChanges,
    ) -> Result<(), LdapError> {
        for (attr, normalized) in self.inner.schema().leaf_values(dn) {
            let deleted = changes.values().any(|change| {
                change.attr == attr && change.after.is_none() && change.normalized == normalized
            });
            if deleted {
                return Err(violation(
                    ResultCode::NotAllowedOnRdn,
                    format!(
                        "cannot remove the RDN value of '{}' from '{dn}'",
                        self.inner.schema().attribute_type(attr).name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Writes the record, the `id2value` rows, the index keys and (`memberof_upkeep`) the
    /// memberOf upkeep of a planned point modify.
    fn write_point_modify(
        &mut self,
        id: EntryId,
        attributes: &[WorkingAttribute],
        outside: &[Outside],
        changes: &PointChanges,
        memberof_upkeep: bool,
    ) -> Result<(), LdapError> {
        let old_inline = self.inline_attributes(id)?;
        self.put_record_with_markers(id, attributes, outside)?;
        let database = self
            .inner
            .databases
            .values
            .ok_or_else(|| corrupt("the store has no id2value DB"))?;
        for change in changes.values() {
            self.check_deadline()?;
            let place = (id, change.number);
            match &change.after {
                Some(original) => {
                    value_blocks::put_value(
                        database,
                        &mut self.txn,
                        place,
                        original,
                        &change.normalized,
                    )?;
                }
                None => {
                    value_blocks::delete_value(database, &mut self.txn, place, &change.normalized)?;
                }
            }
        }
        self.reindex_changed(id, &old_inline, attributes)?;
        self.update_point_indexes(id, changes)?;
        if memberof_upkeep {
            self.point_memberof(id, changes)?;
        }
        if self.is_recording_changes() {
            let dn = self.dn_of(id)?;
            self.record_change(ChangeKind::Modify, id, attributes, dn.clone(), None);
            if let Some(image) = self.point_prior(id, old_inline, outside, changes)? {
                self.record_prior(dn, &image);
            }
        }
        Ok(())
    }

    /// The entry as it was before a point modify, for `Change::before`, bounded by what its
    /// readers test (`PriorNeeds`): its inline attributes then, and of each out-of-line
    /// description only the asserted values it held (looked up one by one: the list is never
    /// read). None when no reader's needs are known or one tests such values otherwise.
    fn point_prior(
        &self,
        id: EntryId,
        mut image: Vec<WorkingAttribute>,
        outside: &[Outside],
        changes: &PointChanges,
    ) -> Result<Option<Vec<WorkingAttribute>>, LdapError> {
        let Some(needs) = self.prior_needs() else {
            return Ok(None);
        };
        if needs.every_attribute || outside.iter().any(|one| needs.whole.contains(&one.attr)) {
            return Ok(None);
        }
        for one in outside {
            let Some(asserted) = needs.asserted.get(&one.attr) else {
                continue;
            };
            let mut values = Vec::new();
            for normalized in asserted {
                self.check_deadline()?;
                let held = match changes.get(&(one.number, normalized.clone())) {
                    Some(change) => change.existed,
                    None => {
                        out_of_line_contains(self.inner, &self.txn, id, one.number, normalized)?
                    }
                };
                if held {
                    // Compared by its stored normalized form only (`PriorNeeds::asserted`).
                    values.push((normalized.clone(), normalized.clone()));
                }
            }
            if !values.is_empty() {
                image.push(WorkingAttribute {
                    text: one.text.clone(),
                    attr: one.attr,
                    options: one.options.clone(),
                    values,
                });
            }
        }
        Ok(Some(image))
    }

    /// The id2entry record: inline attributes, then one marker per out-of-line description.
    fn put_record_with_markers(
        &mut self,
        id: EntryId,
        attributes: &[WorkingAttribute],
        outside: &[Outside],
    ) -> Result<(), LdapError> {
        let numbers = self.inner.description_numbers(attributes);
        let mut to_encode: Vec<AttributeToEncode<'_>> = attributes
            .iter()
            .zip(&numbers)
            .map(|(attribute, number)| AttributeToEncode {
                description_number: *number,
                values: &attribute.values,
                out_of_line: None,
            })
            .collect();
        to_encode.extend(outside.iter().map(|one| AttributeToEncode {
            description_number: one.number,
            values: &[],
            out_of_line: Some(one.count),
        }));
        let mut bytes = Vec::new();
        encode_entry(&to_encode, &mut bytes).map_err(|error| {
            violation(
                ResultCode::AdminLimitExceeded,
                format!("entry {id} cannot be stored: {}", error.reason),
            )
        })?;
        self.inner
            .databases
            .id2entry
            .put(&mut self.txn, &layout::encode_id(id), &bytes)
            .map_err(lmdb_to_ldap)
    }

    /// Index keys of the values added (posted) and deleted (unposted: equality only, the
    /// attribute keeping values so its presence key stays).
    fn update_point_indexes(
        &mut self,
        id: EntryId,
        changes: &PointChanges,
    ) -> Result<(), LdapError> {
        let mut added = IndexKeys::new();
        let mut removed = IndexKeys::new();
        let index_set = self.inner.index_set();
        let plan = &index_set.plan;
        for change in changes.values() {
            let sink = match (change.existed, change.after.is_some()) {
                (false, true) => &mut added,
                (true, false) => &mut removed,
                _ => continue,
            };
            let keys = sink.entry(change.attr).or_default();
            let _ = plan.value_keys(change.attr, &change.normalized, &mut |_, key| {
                keys.insert(key.to_vec());
                Ok::<(), ()>(())
            });
        }
        for keys in removed.values_mut() {
            keys.retain(|key| key.first() == Some(&layout::KIND_EQUALITY));
        }
        self.update_indexes(id, &removed, &added)
    }

    /// memberOf upkeep of the members that joined or left (member / uniqueMember changes).
    fn point_memberof(&mut self, id: EntryId, changes: &PointChanges) -> Result<(), LdapError> {
        if !self.inner.options.memberof {
            return Ok(());
        }
        let as_attributes = |existed: bool| -> Vec<WorkingAttribute> {
            changes
                .values()
                .filter(|change| change.existed == existed && change.after.is_some() != existed)
                .map(|change| WorkingAttribute {
                    text: String::new(),
                    attr: change.attr,
                    options: Vec::new(),
                    values: vec![(Vec::new(), change.normalized.clone())],
                })
                .collect()
        };
        let mut left = self.group_members(&as_attributes(true));
        let joined = self.group_members(&as_attributes(false));
        // A member named by another value still there (`dn` and `dn#'0101'B`) stays one.
        let mut still_listed = Vec::new();
        for member in &left {
            if self.group_lists(id, member)? {
                still_listed.push(member.clone());
            }
        }
        for member in still_listed {
            left.remove(&member);
        }
        if left.is_empty() && joined.is_empty() {
            return Ok(());
        }
        let group_dn = self.dn_of(id)?;
        self.memberof_group_changed(id, Some(&group_dn), &left, Some(&group_dn), &joined)
    }

    /// Whether group `id`, as written so far in this txn, lists the normalized DN `member`
    /// in a member value or a uniqueMember value (with or without its `#'...'B` UID).
    pub(crate) fn group_lists(&self, id: EntryId, member: &str) -> Result<bool, LdapError> {
        let schema = self.inner.schema();
        let (member_attr, unique_attr) =
            (schema.attribute("member"), schema.attribute("uniqueMember"));
        let mut with_uid = member.as_bytes().to_vec();
        with_uid.extend_from_slice(b"#'");
        for (number, attr, _, _) in self.out_of_line_descriptions(id)? {
            let is_unique = Some(attr) == unique_attr;
            if Some(attr) != member_attr && !is_unique {
                continue;
            }
            if out_of_line_contains(self.inner, &self.txn, id, number, member.as_bytes())?
                || (is_unique
                    && crate::read::out_of_line_has_prefix(
                        self.inner, &self.txn, id, number, &with_uid,
                    )?)
            {
                return Ok(true);
            }
        }
        Ok(self
            .group_members(&self.inline_attributes(id)?)
            .contains(member))
    }
}

impl WriteTxn<'_> {
    /// memberOf upkeep of members deleted or renamed (`links`), on one group whose member /
    /// uniqueMember values live out of line: the values naming an old DN (for uniqueMember
    /// with any `#uid`) go and its replacement comes, by point writes, as the general way's
    /// internal update would do it (entryCSN stamped once, no schema check). False: nothing
    /// written, take the general way.
    pub(crate) fn point_members_renamed(
        &mut self,
        group: EntryId,
        links: &MemberLinks,
    ) -> Result<bool, LdapError> {
        let Some(mut outside) = self.outside_descriptions(group)? else {
            return Ok(false);
        };
        let (member, unique) = links.attrs;
        let mut changes = PointChanges::new();
        for target in outside.iter_mut() {
            let is_unique = Some(target.attr) == unique;
            if Some(target.attr) != member && !is_unique {
                continue;
            }
            for (old_normalized, replacement) in &links.renames {
                let renamed = (old_normalized.as_str(), replacement.as_ref());
                self.plan_member_rename(group, target, is_unique, renamed, &mut changes)?;
            }
            if target.count == 0 || !self.inner.is_out_of_line(target.attr, target.count) {
                return Ok(false);
            }
        }
        if changes.is_empty() {
            return Ok(true);
        }
        if !self.point_deletes_are_exact(&changes) {
            return Ok(false);
        }
        let mut inline = self.inline_attributes(group)?;
        self.stamp_internal_change(&mut inline)?;
        self.write_point_modify(group, &inline, &outside, &changes, false)?;
        Ok(true)
    }

    /// Plans, on one out-of-line member attribute of `group`, the delete of the values naming
    /// `old_normalized` and the add of its replacement.
    fn plan_member_rename(
        &self,
        group: EntryId,
        target: &mut Outside,
        is_unique: bool,
        (old_normalized, replacement): (&str, Option<&NewMemberDn>),
        changes: &mut PointChanges,
    ) -> Result<(), LdapError> {
        let exact = old_normalized.as_bytes();
        let mut gone = Vec::new();
        if out_of_line_contains(self.inner, &self.txn, group, target.number, exact)? {
            gone.push(exact.to_vec());
        }
        if is_unique {
            let mut with_uid = exact.to_vec();
            with_uid.push(b'#');
            gone.extend(crate::read::out_of_line_values_with_prefix(
                self.inner,
                &self.txn,
                group,
                target.number,
                &with_uid,
            )?);
        }
        if gone.is_empty() {
            return Ok(());
        }
        for normalized in gone {
            target.count -= 1;
            let change = PointChange {
                number: target.number,
                attr: target.attr,
                normalized: normalized.clone(),
                existed: true,
                after: None,
            };
            changes.insert((target.number, normalized), change);
        }
        if let Some((original, normalized)) = replacement {
            if !self.point_present(group, target, normalized, changes)? {
                target.count += 1;
                let change = PointChange {
                    number: target.number,
                    attr: target.attr,
                    normalized: normalized.clone(),
                    existed: false,
                    after: Some(original.clone()),
                };
                changes.insert((target.number, normalized.clone()), change);
            }
        }
        Ok(())
    }
}

/// An out-of-line description: its number, attribute, options and text.
pub(crate) type OutOfLineDescription = (u32, AttrId, Vec<String>, String);

impl WriteTxn<'_> {
    /// The entry's out-of-line descriptions as (number, attribute, options, text), from its
    /// record alone.
    pub(crate) fn out_of_line_descriptions(
        &self,
        id: EntryId,
    ) -> Result<Vec<OutOfLineDescription>, LdapError> {
        let encoded = read_entry(self.inner, &self.txn, id)?
            .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
        let descriptions = crate::lock::read(&self.inner.descriptions).clone();
        encoded
            .attributes()
            .filter(|attribute| attribute.out_of_line)
            .map(|attribute| {
                let info = descriptions
                    .get(attribute.description_number)
                    .ok_or_else(|| corrupt(format!("entry {id}: unknown description")))?;
                Ok((
                    attribute.description_number,
                    info.attr,
                    info.options.clone(),
                    info.text.clone(),
                ))
            })
            .collect()
    }

    /// The delete and add of values that make out-of-line description `number` of entry `id`
    /// hold exactly `values` (a provider's whole attribute): the stored values are streamed and
    /// compared, so a one-member change of a replicated group is a one-member point modify.
    /// None when a given value does not normalize (the general way answers it).
    pub(crate) fn point_difference(
        &self,
        id: EntryId,
        (number, attr, text): (u32, AttrId, &str),
        values: &[Vec<u8>],
    ) -> Result<Option<Vec<Modification>>, LdapError> {
        let mut given: HashMap<Vec<u8>, &Vec<u8>> = HashMap::with_capacity(values.len());
        for value in values {
            let Ok(normalized) = self.inner.schema().normalize_value(attr, value) else {
                return Ok(None);
            };
            given.insert(normalized, value);
        }
        let (mut deleted, mut added) = (Vec::new(), Vec::new());
        for row in crate::read::out_of_line_rows(self.inner, &self.txn, id, number)? {
            let row = row?;
            match given.remove(row.normalized) {
                Some(original) if original.as_slice() == row.original => {}
                Some(original) => {
                    deleted.push(row.original.to_vec());
                    added.push(original.clone());
                }
                None => deleted.push(row.original.to_vec()),
            }
        }
        added.extend(given.into_values().cloned());
        let change = |op, values: Vec<Vec<u8>>| Modification {
            op,
            description: text.to_string(),
            values,
        };
        let mut modifications = Vec::new();
        if !deleted.is_empty() {
            modifications.push(change(ModOp::Delete, deleted));
        }
        if !added.is_empty() {
            modifications.push(change(ModOp::Add, added));
        }
        Ok(Some(modifications))
    }
}
