//! memberOf of a replicated entry on a store that keeps memberOf itself
//! (`StoreOptions::memberof`): a function of this store's groups, never the provider's text.
//! A provider's memberOf is what its own groups said when it sent the entry; a group change it
//! had not applied yet (or had applied, where this node had not) left that text stale, and the
//! upkeep that later fixed it on the provider carries no CSN of its own and is never sent: two
//! nodes kept different memberOf for good under equal entryCSNs. So a replicated add or
//! replace ignores the memberOf it is given and sets it from the groups here that list the
//! entry's DN.
//!
//! Which groups: with an equality index on `member` (and on `uniqueMember`), the groups posted
//! under the entry's DN, each confirmed on its stored values; plus the groups the provider's
//! and the stored memberOf name, each confirmed the same way (this also finds a uniqueMember
//! value carrying a `#'bits'B` UID, which the index posts under the whole value). Without
//! such an index only those named groups are checked: bounded by the entry's own values,
//! where finding every group listing the DN would scan every entry per replicated write (a
//! refresh quadratic in the directory's size). A group listing the DN that neither side's
//! memberOf names is then missed, until the group itself changes.
//!
//! A client add, and a move onto a new DN, take the same groups (`memberof_of_added_entry`,
//! `memberof_of_listed_dn`): a group may list a DN before any entry holds it (a dangling
//! member value, which slapd's default `memberof-dangling ignore` and bulk loads allow).
//! slapd 2.5's overlay leaves such an entry without that memberOf; here the node that took the
//! client's write would then differ for good from a peer whose replicated add found the group.
//! A move keeps the memberOf the entry held (its groups were just rewritten to list the new
//! DN); the groups found are added to it.
//!
//! A client's own memberOf (the Relax Rules control lets the rootdn's add and modify carry it)
//! must agree with the groups: a value naming no group here that lists the entry cannot be
//! added, nor one naming a group that lists it removed (constraintViolation naming the value).
//! Kept, such a value would stay on
//! the node that took the write while every peer, setting memberOf from its groups, went
//! without it: different for good under equal entryCSNs. slapd 2.5 refuses memberOf from
//! clients even under Relax (its memberof overlay's attribute is not "manageable"), and its
//! memberof.c does not reflect a memberOf modify into the group; making the group list the
//! entry instead would turn a write of the member into a write of the group, which the
//! rootdn can ask for plainly. So lmdir refuses what slapd refuses, and takes what the groups
//! already say (an export carrying memberOf back, a stale memberOf repaired); the values
//! written are then the groups' DNs as stored (`memberof_of_added_entry`, `memberof_settle`),
//! as every peer writes them, never the request's spelling. Only the groups the request's
//! values name (and the indexed ones listing the DN) are looked up. An import into a store
//! holding entries (`WriteContext::import`, `lmdir load`) is not refused: a group later in the
//! file may list the entry; its memberOf is set from the groups, and each group's own add
//! reaches the members added before it.

use std::collections::BTreeSet;

use lmdir_schema::{AttrId, LdapError, ModOp, Modification, ResultCode};

use crate::layout::EntryId;
use crate::read::{corrupt, out_of_line_rows, read_entry};
use crate::write::{ldap, WorkingAttribute, WriteTxn};

/// One value as (original, normalized).
type ValuePair = (Vec<u8>, Vec<u8>);

/// A client modify touching memberOf: the memberOf values named before and after it
/// (normalized), and its other modifications.
pub(crate) type ClientMemberof = (BTreeSet<Vec<u8>>, Vec<Modification>);

impl WriteTxn<'_> {
    /// Whether this store keeps memberOf itself (then a provider's memberOf is not taken).
    pub fn keeps_memberof(&self) -> bool {
        self.memberof_kept().is_some()
    }

    /// memberOf's attribute when this store keeps it up.
    pub(crate) fn memberof_kept(&self) -> Option<AttrId> {
        (self.inner.options.memberof)
            .then(|| self.inner.schema().attribute("memberOf"))
            .flatten()
    }

    /// An added entry's attributes (at normalized DN `dn`, not stored yet; a replicated add, or
    /// a client's whose memberOf `refuse_memberof_of_client_add` let pass): every memberOf
    /// description dropped, memberOf set from this store's groups (see the module).
    pub(crate) fn memberof_of_added_entry(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        dn: &str,
    ) -> Result<(), LdapError> {
        let Some(memberof) = self.memberof_kept() else {
            return Ok(());
        };
        let named = named_groups(attributes, memberof);
        attributes.retain(|attribute| attribute.attr != memberof);
        let values = self.memberof_from_groups(dn, &named)?;
        if !values.is_empty() {
            attributes.push(memberof_attribute(self, memberof, values));
        }
        Ok(())
    }

    /// A move's attributes (the entry at normalized DN `dn`, not written yet): the memberOf
    /// they hold stays, and the groups here that list `dn` are added to it, found as for an
    /// add (see the module; none without a member equality index).
    pub(crate) fn memberof_of_listed_dn(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        dn: &str,
    ) -> Result<(), LdapError> {
        let Some(memberof) = self.memberof_kept() else {
            return Ok(());
        };
        let held = named_groups(attributes, memberof);
        let found: Vec<ValuePair> = self
            .memberof_from_groups(dn, &BTreeSet::new())?
            .into_iter()
            .filter(|(_, normalized)| !held.contains(normalized))
            .collect();
        if found.is_empty() {
            return Ok(());
        }
        let plain = attributes
            .iter_mut()
            .find(|attribute| attribute.attr == memberof && attribute.options.is_empty());
        match plain {
            Some(attribute) => attribute.values.extend(found),
            None => attributes.push(memberof_attribute(self, memberof, found)),
        }
        Ok(())
    }

    /// A client add's memberOf (the entry at normalized DN `dn`, not written yet; the Relax
    /// control or a load let it carry memberOf): refused where a value names no group here
    /// listing `dn` (see the module).
    pub(crate) fn refuse_memberof_of_client_add(
        &self,
        attributes: &[WorkingAttribute],
        dn: &str,
    ) -> Result<(), LdapError> {
        let Some(memberof) = self.memberof_kept() else {
            return Ok(());
        };
        let held = named_groups(attributes, memberof);
        self.refuse_memberof_unlike_groups(dn, &held, &BTreeSet::new())
    }

    /// A client modify of entry `id` at normalized DN `dn` (under Relax, the only way a client
    /// modifies memberOf): refused where it would add a memberOf value naming no group here
    /// listing `dn`, or remove one naming a group that lists it (see the module). Only the
    /// groups of the values it changes are looked up. When it touches memberOf and passes:
    /// the memberOf values it and the entry name (normalized, for `memberof_settle`) and its
    /// other modifications.
    pub(crate) fn memberof_of_client_modify(
        &self,
        id: EntryId,
        dn: &str,
        modifications: &[Modification],
    ) -> Result<Option<ClientMemberof>, LdapError> {
        let Some(memberof) = self.memberof_kept() else {
            return Ok(None);
        };
        let schema = self.inner.schema();
        let (mut after, mut before) = (None, BTreeSet::new());
        let mut others = Vec::new();
        for modification in modifications {
            let description = schema.parse_description(&modification.description);
            if description.map_or(true, |description| description.attr != memberof) {
                others.push(modification.clone()); // an unknown one: the modify refuses it
                continue;
            }
            let values = modification
                .values
                .iter()
                .map(|value| schema.normalize_value(memberof, value))
                .collect::<Result<BTreeSet<Vec<u8>>, LdapError>>()?;
            let held: &mut BTreeSet<Vec<u8>> = match &mut after {
                Some(held) => held,
                None => {
                    let stored = self.stored_descriptions_of(id, memberof)?;
                    before = named_groups(&stored, memberof);
                    after.insert(before.clone())
                }
            };
            match modification.op {
                ModOp::Add => held.extend(values),
                ModOp::Delete if values.is_empty() => held.clear(),
                ModOp::Delete => held.retain(|value| !values.contains(value)),
                ModOp::Replace => *held = values,
                // Not a memberOf operation: left to the modify, which refuses it.
                ModOp::Increment => others.push(modification.clone()),
            }
        }
        let Some(after) = after else {
            return Ok(None);
        };
        let added = after.difference(&before).cloned().collect();
        let removed = before.difference(&after).cloned().collect();
        self.refuse_memberof_unlike_groups(dn, &added, &removed)?;
        Ok(Some((before.union(&after).cloned().collect(), others)))
    }

    /// Refuses (constraintViolation, naming the value) a client's memberOf change of the entry
    /// at normalized DN `dn` that would make it differ from this store's groups: an `added`
    /// value naming no group listing `dn`, a `removed` one naming a group that lists it
    /// (normalized group DNs; only these groups are looked up).
    fn refuse_memberof_unlike_groups(
        &self,
        dn: &str,
        added: &BTreeSet<Vec<u8>>,
        removed: &BTreeSet<Vec<u8>>,
    ) -> Result<(), LdapError> {
        if added.is_empty() && removed.is_empty() {
            return Ok(());
        }
        let named: BTreeSet<Vec<u8>> = added.union(removed).cloned().collect();
        let backed: BTreeSet<Vec<u8>> = self
            .memberof_from_groups(dn, &named)?
            .into_iter()
            .map(|(_, normalized)| normalized)
            .collect();
        let refuse = |value: &Vec<u8>, what: &str| {
            Err(ldap(
                ResultCode::ConstraintViolation,
                format!(
                    "memberOf: '{}' {what} '{dn}': memberOf is kept from the groups' member \
                     values, change the group instead",
                    String::from_utf8_lossy(value)
                ),
            ))
        };
        if let Some(value) = added.iter().find(|value| !backed.contains(*value)) {
            return refuse(value, "is no group listing");
        }
        if let Some(value) = removed.iter().find(|value| backed.contains(*value)) {
            return refuse(value, "is a group listing");
        }
        Ok(())
    }

    /// After a replicated replace of entry `id`, or a client's modify of its memberOf: its
    /// memberOf set from this store's groups, `sent` (the provider's or the client's memberOf,
    /// normalized) naming more candidates. Written only when it differs from what is stored.
    pub(crate) fn memberof_settle(
        &mut self,
        id: EntryId,
        sent: &BTreeSet<Vec<u8>>,
    ) -> Result<(), LdapError> {
        let Some(memberof) = self.memberof_kept() else {
            return Ok(());
        };
        // Only the memberOf descriptions are read: a big group's out-of-line members stay
        // where they are.
        let stored = self.stored_descriptions_of(id, memberof)?;
        let mut named = named_groups(&stored, memberof);
        named.extend(sent.iter().cloned());
        let dn = self.normalized_dn_of(id)?;
        let values = self.memberof_from_groups(&dn, &named)?;
        let wanted: BTreeSet<&Vec<u8>> = values.iter().map(|(_, normalized)| normalized).collect();
        let held: BTreeSet<&Vec<u8>> = stored
            .iter()
            .flat_map(|attribute| attribute.values.iter().map(|(_, normalized)| normalized))
            .collect();
        if wanted == held && stored.len() <= 1 {
            return Ok(());
        }
        let attribute = memberof_attribute(self, memberof, values);
        self.internal_update(id, move |attributes| {
            attributes.retain(|attribute| attribute.attr != memberof);
            attributes.push(attribute);
            Ok(true)
        })
    }

    /// The memberOf values (group DN as stored, normalized) of the entry at normalized DN
    /// `dn`: the groups of this store listing it, among the indexed ones and those `named`
    /// (normalized group DNs), in ID order. Checks the write's deadline per candidate.
    fn memberof_from_groups(
        &self,
        dn: &str,
        named: &BTreeSet<Vec<u8>>,
    ) -> Result<Vec<ValuePair>, LdapError> {
        let mut candidates = BTreeSet::new();
        for attr in self.member_attributes() {
            let Ok(value) = self.inner.schema().normalize_value(attr, dn.as_bytes()) else {
                continue;
            };
            if let Some(posted) = self.equality_postings(attr, &value)? {
                candidates.extend(posted);
            }
        }
        for group in named {
            self.check_deadline()?;
            let text = String::from_utf8_lossy(group);
            if let Some(id) = self.lookup_normalized_text(&text)?.found {
                candidates.insert(id);
            }
        }
        let memberof = self.inner.schema().attribute("memberOf");
        let mut values = Vec::new();
        for group in candidates {
            self.check_deadline()?;
            if !self.group_lists(group, dn)? {
                continue;
            }
            let group_dn = self.dn_of(group)?;
            let normalized = match memberof {
                Some(memberof) => self
                    .inner
                    .schema()
                    .normalize_value(memberof, group_dn.as_bytes())?,
                None => continue,
            };
            values.push((group_dn.into_bytes(), normalized));
        }
        Ok(values)
    }

    /// Entry `id`'s descriptions of `attr` (any options), values out of line included.
    fn stored_descriptions_of(
        &self,
        id: EntryId,
        attr: AttrId,
    ) -> Result<Vec<WorkingAttribute>, LdapError> {
        let encoded = read_entry(self.inner, &self.txn, id)?
            .ok_or_else(|| corrupt(format!("entry {id} has no id2entry row")))?;
        let descriptions = crate::lock::read(&self.inner.descriptions).clone();
        let mut found = Vec::new();
        for attribute in encoded.attributes() {
            let Some(info) = descriptions.get(attribute.description_number) else {
                continue;
            };
            if info.attr != attr {
                continue;
            }
            let number = attribute.description_number;
            let values = match attribute.out_of_line {
                false => attribute
                    .values()
                    .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
                    .collect(),
                true => out_of_line_rows(self.inner, &self.txn, id, number)?
                    .map(|row| row.map(|row| (row.original.to_vec(), row.normalized.to_vec())))
                    .collect::<Result<Vec<_>, LdapError>>()?,
            };
            found.push(WorkingAttribute {
                text: info.text.clone(),
                attr,
                options: info.options.clone(),
                values,
            });
        }
        Ok(found)
    }

    /// `member` and `uniqueMember`, those the schema has.
    fn member_attributes(&self) -> Vec<AttrId> {
        let schema = self.inner.schema();
        ["member", "uniqueMember"]
            .iter()
            .filter_map(|name| schema.attribute(name))
            .collect()
    }
}

/// The normalized group DNs the memberOf descriptions among `attributes` name.
fn named_groups(attributes: &[WorkingAttribute], memberof: AttrId) -> BTreeSet<Vec<u8>> {
    attributes
        .iter()
        .filter(|attribute| attribute.attr == memberof)
        .flat_map(|attribute| attribute.values.iter())
        .map(|(_, normalized)| normalized.clone())
        .collect()
}

fn memberof_attribute(
    txn: &WriteTxn<'_>,
    memberof: AttrId,
    values: Vec<ValuePair>,
) -> WorkingAttribute {
    WorkingAttribute {
        text: txn
            .inner
            .schema()
            .attribute_type(memberof)
            .name()
            .to_string(),
        attr: memberof,
        options: Vec::new(),
        values,
    }
}
