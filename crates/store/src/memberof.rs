//! memberOf upkeep (`StoreOptions::memberof`): member entries of groupOfNames (`member`) and
//! groupOfUniqueNames (`uniqueMember`) carry `memberOf: <group DN>`; deleting or renaming a
//! member also fixes the groups' member lists (like OpenLDAP's memberof + refint overlays),
//! except a group's last value of a required attribute, which stays (slapd's memberof modify
//! fails the schema check there; `[integrity]`'s `referential_nothing` then replaces it).
//! Internal updates skip schema checks and timestamps. Moving a subtree renames its
//! descendants too: their groups' member lists are rewritten, one update per group for the
//! whole subtree (`memberof_subtree_renamed`).

use std::collections::BTreeSet;

use lmdir_schema::{AttrId, LdapError, Schema};

use crate::codec::EncodedEntry;
use crate::error::lmdb_to_ldap;
use crate::layout::{self, EntryId};
use crate::rows::{group_members, strip_unique_id};
use crate::write::{WorkingAttribute, WriteTxn};

impl WriteTxn<'_> {
    fn group_attributes(&self) -> (Option<AttrId>, Option<AttrId>) {
        (
            self.inner.schema().attribute("member"),
            self.inner.schema().attribute("uniqueMember"),
        )
    }

    pub(crate) fn group_members(&self, attributes: &[WorkingAttribute]) -> BTreeSet<String> {
        group_members(&self.inner.schema(), attributes)
    }

    /// The entry a stored link names. While a moved subtree is being fixed, a link naming an
    /// old DN below its old top is followed to where the entry is now.
    fn id_of_normalized_dn(&self, normalized: &str) -> Result<Option<EntryId>, LdapError> {
        let lookup = self.lookup_normalized_text(normalized)?;
        if lookup.found.is_some() {
            return Ok(lookup.found);
        }
        let Some((old_top, new_top)) = &self.moved_subtree else {
            return Ok(None);
        };
        let Some(prefix) = normalized.strip_suffix(old_top.as_str()) else {
            return Ok(None);
        };
        if !(prefix.is_empty() || prefix.ends_with(',')) {
            return Ok(None);
        }
        Ok(self
            .lookup_normalized_text(&format!("{prefix}{new_top}"))?
            .found)
    }

    /// One entry's DN changed (rename or move) and maybe its values: its members' `memberOf`
    /// follow the group's new DN, and the groups listing it list the new DN.
    pub(crate) fn memberof_entry_renamed(
        &mut self,
        id: EntryId,
        old_dn: &str,
        new_dn: &str,
        old_attributes: &[WorkingAttribute],
        attributes: &[WorkingAttribute],
    ) -> Result<(), LdapError> {
        let old_members = self.group_members(old_attributes);
        let new_members = self.group_members(attributes);
        self.memberof_group_changed(id, Some(old_dn), &old_members, Some(new_dn), &new_members)?;
        self.memberof_member_renamed_or_deleted(id, old_dn, attributes, Some(new_dn))
    }

    /// A subtree moved (`top` renamed from `old_top` to `new_top`): every entry below it has a
    /// new DN too, so its links are fixed as for a rename (OpenLDAP's refint overlay does the
    /// same). Bounded by the write's deadline, checked per entry.
    pub(crate) fn memberof_subtree_renamed(
        &mut self,
        top: EntryId,
        old_top: &str,
        new_top: &str,
    ) -> Result<(), LdapError> {
        let below = crate::read::subtree_ids(self.inner, &self.txn, top)?;
        let mut renames = GroupRenames::new();
        for id in below.iter().filter(|id| *id != top) {
            self.check_deadline()?;
            let new_dn = self.dn_of(id)?;
            let Some(prefix) = new_dn.strip_suffix(new_top) else {
                continue;
            };
            let old_dn = format!("{prefix}{old_top}");
            let attributes = self.stored_attributes(id)?;
            let members = self.group_members(&attributes);
            self.memberof_group_changed(id, Some(&old_dn), &members, Some(&new_dn), &members)?;
            self.collect_member_renames(id, &old_dn, &attributes, Some(&new_dn), &mut renames)?;
        }
        // One update per group for the whole subtree: a group naming 50,000 moved members
        // was rewritten 50,000 times (past the write budget where slapd's overlay, which
        // fixes only the moved entry's own memberships, answered at once).
        for (group, (group_dn, links)) in renames {
            self.check_deadline()?;
            self.rename_members_of(group, &group_dn, &links)?;
        }
        Ok(())
    }

    /// Reads an entry, lets `change` edit its attributes, writes it back with the index diff.
    pub(crate) fn internal_update(
        &mut self,
        id: EntryId,
        change: impl FnOnce(&mut Vec<WorkingAttribute>) -> Result<bool, LdapError>,
    ) -> Result<(), LdapError> {
        let old = self.stored_attributes(id)?;
        let mut new = old.clone();
        if !change(&mut new)? {
            return Ok(());
        }
        new.retain(|attribute| !attribute.values.is_empty());
        self.stamp_internal_change(&mut new)?;
        self.put_entry(id, &new)?;
        self.reindex_changed(id, &old, &new)?;
        if self.is_recording_changes() {
            let dn = self.dn_of(id)?;
            self.record_change(
                crate::changes::ChangeKind::Modify,
                id,
                &new,
                dn.clone(),
                None,
            );
            self.record_prior(dn, &old);
        }
        Ok(())
    }

    /// Adds or removes `memberOf: group_dn` on one member entry.
    fn set_memberof(
        &mut self,
        member: EntryId,
        group_dn: &str,
        add: bool,
    ) -> Result<(), LdapError> {
        let Some(memberof) = self.inner.schema().attribute("memberOf") else {
            return Ok(());
        };
        let normalized = self
            .inner
            .schema()
            .normalize_value(memberof, group_dn.as_bytes())?;
        let name = self
            .inner
            .schema()
            .attribute_type(memberof)
            .name()
            .to_string();
        self.internal_update(member, |attributes| {
            let position = attributes
                .iter()
                .position(|attribute| attribute.attr == memberof && attribute.options.is_empty());
            let present = position.is_some_and(|index| {
                attributes[index]
                    .values
                    .iter()
                    .any(|(_, value)| *value == normalized)
            });
            match (add, position) {
                (true, _) if present => Ok(false),
                (true, Some(index)) => {
                    attributes[index]
                        .values
                        .push((group_dn.as_bytes().to_vec(), normalized));
                    Ok(true)
                }
                (true, None) => {
                    attributes.push(WorkingAttribute {
                        text: name,
                        attr: memberof,
                        options: Vec::new(),
                        values: vec![(group_dn.as_bytes().to_vec(), normalized)],
                    });
                    Ok(true)
                }
                (false, Some(index)) if present => {
                    attributes[index]
                        .values
                        .retain(|(_, value)| *value != normalized);
                    Ok(true)
                }
                (false, _) => Ok(false),
            }
        })
    }

    /// A group was added / modified / deleted / renamed: fix `memberOf` on the members that
    /// left or joined (all of them when the group's DN changed).
    pub(crate) fn memberof_group_changed(
        &mut self,
        _group: EntryId,
        old_dn: Option<&str>,
        old_members: &BTreeSet<String>,
        new_dn: Option<&str>,
        new_members: &BTreeSet<String>,
    ) -> Result<(), LdapError> {
        let dn_changed = old_dn != new_dn;
        if let Some(old_dn) = old_dn {
            for member in old_members {
                if dn_changed || !new_members.contains(member) {
                    if let Some(id) = self.id_of_normalized_dn(member)? {
                        self.set_memberof(id, old_dn, false)?;
                    }
                }
            }
        }
        if let Some(new_dn) = new_dn {
            for member in new_members {
                if dn_changed || !old_members.contains(member) {
                    if let Some(id) = self.id_of_normalized_dn(member)? {
                        self.set_memberof(id, new_dn, true)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A member entry was deleted (`new_dn` None) or renamed: remove or rewrite its DN in the
    /// member lists of the groups its `memberOf` names.
    pub(crate) fn memberof_member_renamed_or_deleted(
        &mut self,
        member: EntryId,
        old_dn: &str,
        attributes: &[WorkingAttribute],
        new_dn: Option<&str>,
    ) -> Result<(), LdapError> {
        let mut renames = GroupRenames::new();
        self.collect_member_renames(member, old_dn, attributes, new_dn, &mut renames)?;
        for (group, (group_dn, links)) in renames {
            self.rename_members_of(group, &group_dn, &links)?;
        }
        Ok(())
    }

    /// Adds to `renames`, for each group the member's `memberOf` names, what replaces the
    /// member's old DN there (its new DN; None: deleted).
    fn collect_member_renames(
        &self,
        member: EntryId,
        old_dn: &str,
        attributes: &[WorkingAttribute],
        new_dn: Option<&str>,
        renames: &mut GroupRenames,
    ) -> Result<(), LdapError> {
        let Some(memberof) = self.inner.schema().attribute("memberOf") else {
            return Ok(());
        };
        let old_normalized = self.inner.schema().normalize_dn_str(old_dn)?;
        let replacement = match new_dn {
            Some(new_dn) => Some((
                new_dn.as_bytes().to_vec(),
                self.inner.schema().normalize_dn_str(new_dn)?.into_bytes(),
            )),
            None => None,
        };
        let groups = attributes
            .iter()
            .filter(|attribute| attribute.attr == memberof)
            .flat_map(|attribute| attribute.values.iter())
            .map(|(_, normalized)| String::from_utf8_lossy(normalized).into_owned());
        for group_dn in groups {
            let Some(group) = self.id_of_normalized_dn(&group_dn)? else {
                continue;
            };
            if group == member {
                continue;
            }
            let (_, links) = renames
                .entry(group)
                .or_insert_with(|| (group_dn, MemberLinks::new(self.group_attributes())));
            links.add(old_normalized.clone(), replacement.clone());
        }
        Ok(())
    }

    /// Rewrites the member lists of `group` as `links` say, by point writes where its members
    /// live out of line, else in one internal update.
    fn rename_members_of(
        &mut self,
        group: EntryId,
        group_dn: &str,
        links: &MemberLinks,
    ) -> Result<(), LdapError> {
        if self.point_members_renamed(group, links)? {
            return Ok(());
        }
        let schema = self.inner.schema();
        self.internal_update(group, |attributes| {
            Ok(links.rewrite(&schema, attributes, group_dn))
        })
    }
}

/// Per group (by ID): its DN as a member's memberOf names it, and the member renames in it.
type GroupRenames = std::collections::BTreeMap<EntryId, (String, MemberLinks)>;

/// A member's new DN as (original, normalized).
pub(crate) type NewMemberDn = (Vec<u8>, Vec<u8>);

/// What replaces members' DNs in a group's member lists: per old normalized DN, the new DN, or
/// None where the member was deleted.
pub(crate) struct MemberLinks {
    /// (member, uniqueMember)
    pub(crate) attrs: (Option<AttrId>, Option<AttrId>),
    pub(crate) renames: std::collections::HashMap<String, Option<NewMemberDn>>,
}

impl MemberLinks {
    fn new(attrs: (Option<AttrId>, Option<AttrId>)) -> MemberLinks {
        MemberLinks {
            attrs,
            renames: std::collections::HashMap::new(),
        }
    }

    fn add(&mut self, old_normalized: String, replacement: Option<NewMemberDn>) {
        self.renames.insert(old_normalized, replacement);
    }

    /// Drops the group's values naming a renamed or deleted member (uniqueMember ones with any
    /// `#'...'B`) and adds the replacements; whether anything changed. A delete that would
    /// empty an attribute the group's object classes require leaves that attribute as it is
    /// (slapd's memberof modify fails the schema check there and the group keeps the value):
    /// the group stays valid, and `[integrity]`'s `referential_nothing`, when set, then
    /// replaces the value.
    fn rewrite(
        &self,
        schema: &Schema,
        attributes: &mut [WorkingAttribute],
        group_dn: &str,
    ) -> bool {
        let (member_attr, unique_attr) = self.attrs;
        let required = required_attributes(schema, attributes);
        let mut changed = false;
        for attribute in attributes.iter_mut() {
            let is_unique = Some(attribute.attr) == unique_attr;
            if Some(attribute.attr) != member_attr && !is_unique {
                continue;
            }
            let mut replacements = Vec::new();
            let mut kept = attribute.values.clone();
            kept.retain(|(_, normalized)| {
                let text = String::from_utf8_lossy(normalized);
                let dn = if is_unique {
                    strip_unique_id(&text)
                } else {
                    &text
                };
                match self.renames.get(dn) {
                    Some(replacement) => {
                        replacements.extend(replacement.clone());
                        false
                    }
                    None => true,
                }
            });
            if kept.len() == attribute.values.len() {
                continue;
            }
            for (original, normalized) in replacements {
                if !kept.iter().any(|(_, value)| *value == normalized) {
                    kept.push((original, normalized));
                }
            }
            if kept.is_empty() && required.contains(&attribute.attr) {
                tracing::warn!(
                    "memberOf: '{group_dn}' keeps its last required {} value",
                    attribute.text
                );
                continue;
            }
            attribute.values = kept;
            changed = true;
        }
        changed
    }
}

/// The attribute types the entry's object classes (and their superclasses) require.
fn required_attributes(schema: &Schema, attributes: &[WorkingAttribute]) -> Vec<AttrId> {
    let object_class = schema.object_class_attribute();
    attributes
        .iter()
        .filter(|attribute| attribute.attr == object_class)
        .flat_map(|attribute| attribute.values.iter())
        .filter_map(|(original, _)| schema.object_class(&String::from_utf8_lossy(original)))
        .flat_map(|class| {
            schema
                .object_class_definition(class)
                .all_must
                .iter()
                .copied()
        })
        .collect()
}

impl WriteTxn<'_> {
    /// memberOf upkeep for the delete of an entry whose values are unknown (undecodable): its
    /// links are found by scanning every entry (a repair's cost): groups listing its DN drop
    /// it, and entries whose memberOf names it (it was a group) drop that value.
    pub(crate) fn memberof_unknown_entry_deleted(
        &mut self,
        id: EntryId,
        dn: &str,
    ) -> Result<(), LdapError> {
        let Some(memberof) = self.inner.schema().attribute("memberOf") else {
            return Ok(());
        };
        let normalized = self.inner.schema().normalize_dn_str(dn)?;
        let (groups, members) = self.entries_linked_to(id, &normalized, memberof)?;
        let mut group_dns = Vec::with_capacity(groups.len());
        for group in groups {
            let group_dn = crate::read::dn_of(self.inner, &self.txn, group, true)?.into_bytes();
            group_dns.push((group_dn.clone(), group_dn));
        }
        let as_member = [WorkingAttribute {
            text: "memberOf".to_string(),
            attr: memberof,
            options: Vec::new(),
            values: group_dns,
        }];
        self.memberof_member_renamed_or_deleted(id, dn, &as_member, None)?;
        for member in members {
            self.set_memberof(member, dn, false)?;
        }
        Ok(())
    }

    /// (groups whose member / uniqueMember values name `normalized_dn`, entries whose memberOf
    /// names it), `id` itself and undecodable entries left out.
    fn entries_linked_to(
        &self,
        id: EntryId,
        normalized_dn: &str,
        memberof: AttrId,
    ) -> Result<(Vec<EntryId>, Vec<EntryId>), LdapError> {
        let (member_attr, unique_attr) = self.group_attributes();
        let descriptions = crate::lock::read(&self.inner.descriptions).clone();
        let (mut groups, mut members) = (Vec::new(), Vec::new());
        for row in self
            .inner
            .databases
            .id2entry
            .iter(&self.txn)
            .map_err(lmdb_to_ldap)?
        {
            let (key, value) = row.map_err(lmdb_to_ldap)?;
            let (Some(other), Ok(encoded)) = (layout::decode_id(key), EncodedEntry::parse(value))
            else {
                continue;
            };
            if other == id {
                continue;
            }
            for attribute in encoded.attributes() {
                let Some(info) = descriptions.get(attribute.description_number) else {
                    continue;
                };
                let is_unique = Some(info.attr) == unique_attr;
                let names_it = |normalized: &[u8]| {
                    let text = String::from_utf8_lossy(normalized);
                    let dn = if is_unique {
                        strip_unique_id(&text)
                    } else {
                        &text
                    };
                    dn == normalized_dn
                };
                let listed = match attribute.out_of_line {
                    false => attribute
                        .values()
                        .any(|(_, normalized)| names_it(&normalized.to_cow())),
                    true => {
                        let number = attribute.description_number;
                        let mut rows =
                            crate::read::out_of_line_rows(self.inner, &self.txn, other, number)?;
                        rows.try_fold(false, |found, row| {
                            Ok::<_, LdapError>(found || names_it(row?.normalized))
                        })?
                    }
                };
                if listed && (Some(info.attr) == member_attr || is_unique) {
                    groups.push(other);
                } else if listed && info.attr == memberof {
                    members.push(other);
                }
            }
        }
        groups.dedup();
        members.dedup();
        Ok((groups, members))
    }
}
