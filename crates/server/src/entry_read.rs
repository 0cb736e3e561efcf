//! What reads share (search, compare, pre-/post-read): the entry a subject may know of, the
//! assertion control on a read, the attribute selection and the encoding of a stored entry with
//! its computed operational attributes.

use crate::ber::{EntryWriter, ResponseControl};
use crate::context::{internal, Database};
use crate::identity::Identity;
use crate::result::{code, OperationError};
use crate::selection::AttributeSelection;
use crate::settings::ServerSettings;
use bytes::BytesMut;
use lmdir_access::acl::{EntryAccess, Subject};
use lmdir_schema::{AttrId, Filter, Schema};
use lmdir_store::ReadTxn;

/// The attribute types a search names (with their subtypes), each with the option sets asked
/// for; sorted by type, so that testing each stored attribute of each entry is a binary search
/// over a few IDs rather than a hash of each.
#[derive(Default)]
struct RequestedAttributes {
    /// Sorted by ID, one row per type.
    types: Vec<(AttrId, Vec<Vec<String>>)>,
}

impl RequestedAttributes {
    fn of(mut pairs: Vec<(AttrId, Vec<String>)>) -> RequestedAttributes {
        pairs.sort_by_key(|(attr, _)| *attr);
        let mut types: Vec<(AttrId, Vec<Vec<String>>)> = Vec::with_capacity(pairs.len());
        for (attr, options) in pairs {
            match types.last_mut() {
                Some((last, option_sets)) if *last == attr => option_sets.push(options),
                _ => types.push((attr, vec![options])),
            }
        }
        RequestedAttributes { types }
    }

    fn get(&self, attr: AttrId) -> Option<&[Vec<String>]> {
        self.types
            .binary_search_by_key(&attr, |(id, _)| *id)
            .ok()
            .map(|at| self.types[at].1.as_slice())
    }

    fn contains(&self, attr: AttrId) -> bool {
        self.get(attr).is_some()
    }

    fn is_empty(&self) -> bool {
        self.types.is_empty()
    }
}

/// Resolved attribute selection against the schema.
pub(crate) struct Selection {
    all_user: bool,
    all_operational: bool,
    /// Requested attribute types (with subtypes) → the option sets asked for; an empty set
    /// asks for every description of the type (`cn` selects `cn;lang-en` too, `cn;lang-en`
    /// selects only descriptions carrying that option, RFC 4512 §2.5).
    requested: RequestedAttributes,
    has_subordinates: Option<AttrId>,
    num_subordinates: Option<AttrId>,
    entry_dn: Option<AttrId>,
    subschema_subentry: Option<AttrId>,
    /// The matched values control's filter (RFC 3876): only matching values are returned.
    matched_values: Option<crate::matched_values::ValuesFilter>,
    context_csn: Option<AttrId>,
    /// `lmdirAttributeCSN`: returned only when named (an lmdir multi-provider peer asks for
    /// it; a slapd consumer asking for `+` must not get a type its schema lacks).
    attribute_state: Option<AttrId>,
}

impl Selection {
    pub(crate) fn resolve(schema: &Schema, selection: &AttributeSelection) -> Selection {
        let mut requested: Vec<(AttrId, Vec<String>)> = Vec::new();
        let mut request = |attr: AttrId, options: Vec<String>| {
            for subtype in schema.subtypes(attr) {
                requested.push((*subtype, options.clone()));
            }
        };
        for name in &selection.names {
            // RFC 4529: `@class` requests every attribute the class allows.
            if let Some(class_name) = name.strip_prefix('@') {
                if let Some(class) = schema.object_class(class_name) {
                    let definition = schema.object_class_definition(class);
                    for attr in definition.all_must.iter().chain(&definition.all_may) {
                        request(*attr, Vec::new());
                    }
                }
                continue;
            }
            let mut parts = name.split(';');
            let base = parts.next().unwrap_or(name);
            let options: Vec<String> = parts.map(|option| option.to_ascii_lowercase()).collect();
            if let Some(attr) = schema.attribute(base) {
                request(attr, options);
            }
        }
        let known = schema.known_attributes();
        Selection {
            all_user: selection.all_user,
            all_operational: selection.all_operational,
            requested: RequestedAttributes::of(requested),
            has_subordinates: known.has_subordinates,
            num_subordinates: known.num_subordinates,
            entry_dn: known.entry_dn,
            subschema_subentry: known.subschema_subentry,
            matched_values: None,
            context_csn: known.context_csn,
            attribute_state: schema.attribute(lmdir_store::attribute_state::ATTRIBUTE_STATE),
        }
    }

    /// This selection returning only the values matching `items` (RFC 3876), when given.
    pub(crate) fn with_matched_values(
        self,
        schema: &Schema,
        items: Option<&[Filter]>,
    ) -> Selection {
        Selection {
            matched_values: items
                .map(|items| crate::matched_values::ValuesFilter::new(schema, items)),
            ..self
        }
    }

    /// Writes one attribute of an entry built in memory (cn=Subschema, cn=Monitor) as a stored
    /// one is written: no values under typesOnly, only the matching ones under the matched
    /// values control (a value its type's rule cannot normalize matches nothing).
    pub(crate) fn write_built_attribute(
        &self,
        schema: &Schema,
        writer: &mut EntryWriter<'_>,
        (attr, description): (AttrId, &str),
        values: &[Vec<u8>],
        types_only: bool,
    ) {
        let description = description.as_bytes();
        if types_only {
            writer.attribute(description, std::iter::empty());
            return;
        }
        let Some(matched) = &self.matched_values else {
            writer.attribute(description, values.iter().map(Vec::as_slice));
            return;
        };
        let normalized = values.iter().filter_map(|value| {
            let normalized = schema.normalize_value(attr, value).ok()?;
            Some((value.as_slice(), normalized))
        });
        let kept = matched.kept(attr, &[], normalized);
        if !kept.is_empty() {
            writer.attribute(description, kept);
        }
    }

    /// Whether `selects` can answer true for any stored attribute: false for a request of
    /// `1.1` alone (or of names the schema does not know).
    pub(crate) fn may_select_stored(&self) -> bool {
        self.all_user || self.all_operational || !self.requested.is_empty()
    }

    /// `options`: the stored description's options (lowercased).
    pub(crate) fn selects(&self, schema: &Schema, attr: AttrId, options: &[String]) -> bool {
        let requested_here = self.requested.get(attr).is_some_and(|option_sets| {
            option_sets
                .iter()
                .any(|wanted| lmdir_schema::options_match(wanted, options))
        });
        if requested_here {
            return true;
        }
        if Some(attr) == self.attribute_state {
            return false;
        }
        if schema.attribute_type(attr).is_operational() {
            self.all_operational
        } else {
            self.all_user
        }
    }

    /// Only stored attributes: what a replication consumer stores must be data, never values
    /// this server computes per read (an OpenLDAP consumer refuses numSubordinates, which its
    /// schema lacks, and would store the others as if they were data).
    pub(crate) fn stored_only(mut self) -> Selection {
        self.has_subordinates = None;
        self.num_subordinates = None;
        self.entry_dn = None;
        self.subschema_subentry = None;
        self.context_csn = None;
        self
    }

    fn selects_computed(&self, attr: Option<AttrId>) -> bool {
        attr.is_some_and(|attr| self.all_operational || self.requested.contains(attr))
    }
}

/// Counts an entry's children as a subject may know of them (numSubordinates,
/// hasSubordinates): the stored count when every entry is disclosed to the subject, otherwise
/// the disclosed children, counted only up to `SUBORDINATES_CHECKED_MAX` children.
pub(crate) struct Subordinates<'a> {
    database: &'a Database,
    read: &'a ReadTxn,
    subject: &'a Subject<'a>,
    every_entry_disclosed: bool,
    /// The schema, access policy and `[[dynlist]]` rules the operation started with.
    dynlist: crate::dynlist::DynlistView,
    /// The dynamic groups that find each entry (`[[dynlist]] member_of_attribute`), worked
    /// out once per operation when first needed.
    dynamic_member_of: std::cell::RefCell<Option<DynamicMemberOf>>,
}

/// Entry → (attribute, dynamic group DN) pairs it is listed in.
type DynamicMemberOf = std::collections::HashMap<lmdir_store::EntryId, Vec<(AttrId, String)>>;

/// Most children checked one by one for a subject that may not know of every entry: past it
/// numSubordinates is left out when one of those checked is disclosed, and the entry answers
/// as a leaf when none is (see [`Subordinates::count`]).
const SUBORDINATES_CHECKED_MAX: u32 = 1000;

impl<'a> Subordinates<'a> {
    pub(crate) fn new(database: &'a Database, read: &'a ReadTxn, subject: &'a Subject<'a>) -> Self {
        let dynlist = database.dynlist_view();
        Subordinates {
            database,
            read,
            subject,
            every_entry_disclosed: dynlist
                .policy
                .for_subject(subject)
                .can_disclose_every_entry(),
            dynlist,
            dynamic_member_of: std::cell::RefCell::new(None),
        }
    }

    /// The dynamic groups finding `id`, listed in `attr`.
    fn dynamic_groups_of(
        &self,
        id: lmdir_store::EntryId,
        attr: AttrId,
    ) -> Result<Vec<Vec<u8>>, OperationError> {
        let mut cached = self.dynamic_member_of.borrow_mut();
        if cached.is_none() {
            *cached = Some(crate::dynlist::member_of(
                &self.dynlist,
                self.read,
                self.subject,
            )?);
        }
        Ok(cached
            .as_ref()
            .and_then(|listed| listed.get(&id))
            .into_iter()
            .flatten()
            .filter(|(listed_in, _)| *listed_in == attr)
            .map(|(_, group)| group.as_bytes().to_vec())
            .collect())
    }

    /// What the subject may know of `id`'s children. The stored count when the subject's
    /// rules disclose every entry (anywhere, or at and below `id`). Otherwise the disclosed
    /// children, checked one by one: all of them when there are at most
    /// `SUBORDINATES_CHECKED_MAX` and `exact` is asked for, else up to the first disclosed
    /// one among the first `SUBORDINATES_CHECKED_MAX`. Hidden children are never counted.
    ///
    /// When none of the first `SUBORDINATES_CHECKED_MAX` of more children is disclosed, the
    /// rest are not read (a search may return many such containers) and the entry answers as
    /// a leaf, exactly as one whose few children are all hidden. Of the possible answers this
    /// is the one that reveals nothing: leaving the attributes out, or TRUE, would tell a big
    /// container of hidden entries from a leaf. Its cost: a child disclosed only past the
    /// first `SUBORDINATES_CHECKED_MAX` is not counted (the answer errs toward hiding).
    fn count(
        &self,
        id: lmdir_store::EntryId,
        exact: bool,
    ) -> Result<KnownChildren, OperationError> {
        let stored = self.read.num_subordinates(id)?;
        if stored == 0 || self.every_entry_disclosed || self.subtree_disclosed(id)? {
            return Ok(KnownChildren::Exact(stored));
        }
        let checked_all = stored <= SUBORDINATES_CHECKED_MAX;
        let enough = match exact && checked_all {
            true => u32::MAX,
            false => 1,
        };
        let disclosed = self.disclosed_children(id, enough)?;
        Ok(match (checked_all && disclosed < enough, disclosed) {
            (true, _) | (false, 0) => KnownChildren::Exact(disclosed),
            (false, _) => KnownChildren::Some,
        })
    }

    /// Whether the subject's rules disclose every entry at or below `id`: then its stored
    /// child count hides nothing (the every-entry shortcut, for one subtree).
    fn subtree_disclosed(&self, id: lmdir_store::EntryId) -> Result<bool, OperationError> {
        let ndn = self.read.normalized_dn_of(id)?;
        Ok(self
            .dynlist
            .policy
            .for_subject_within(self.subject, &ndn)
            .can_disclose_every_entry())
    }

    /// How many of the first `SUBORDINATES_CHECKED_MAX` children of `id` are disclosed to the
    /// subject, counting no further than `enough`.
    fn disclosed_children(
        &self,
        id: lmdir_store::EntryId,
        enough: u32,
    ) -> Result<u32, OperationError> {
        let policy = &self.dynlist.policy;
        let mut disclosed = 0;
        for child in self
            .read
            .first_children(id, SUBORDINATES_CHECKED_MAX as usize)?
        {
            let Some(entry) = self.read.entry(child)? else {
                continue;
            };
            let child_ndn = self.read.normalized_dn_of(child)?;
            if policy
                .for_entry(self.subject, &child_ndn, &entry)
                .can_disclose_entry()
            {
                disclosed += 1;
                if disclosed >= enough {
                    break;
                }
            }
        }
        Ok(disclosed)
    }
}

/// What a subject may know of an entry's children (see [`Subordinates::count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KnownChildren {
    /// This many, all checked (or every entry below is disclosed).
    Exact(u32),
    /// At least one disclosed child; how many was not counted.
    Some,
}

impl KnownChildren {
    /// The hasSubordinates value.
    fn has_subordinates(self) -> &'static [u8] {
        match self {
            KnownChildren::Exact(0) => b"FALSE",
            KnownChildren::Exact(_) | KnownChildren::Some => b"TRUE",
        }
    }

    /// The numSubordinates value; None when left out.
    fn num_subordinates(self) -> Option<Vec<u8>> {
        match self {
            KnownChildren::Exact(count) => Some(count.to_string().into_bytes()),
            KnownChildren::Some => None,
        }
    }
}

/// Writes one stored entry as a SearchResultEntry with the selected, readable attributes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_stored_entry(
    buffer: &mut BytesMut,
    message_id: i32,
    schema: &Schema,
    subordinates: &Subordinates<'_>,
    id: lmdir_store::EntryId,
    entry: &lmdir_store::EntryRef<'_>,
    dn: &str,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
    types_only: bool,
    controls: &[ResponseControl],
) -> Result<(), OperationError> {
    let mut writer = EntryWriter::begin(buffer, message_id, dn.as_bytes());
    write_entry_attributes(
        &mut writer,
        schema,
        subordinates,
        id,
        entry,
        dn,
        selection,
        access,
        types_only,
    )?;
    writer.finish(controls);
    Ok(())
}

/// The selected, readable attributes of a stored entry (computed operational ones included).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_entry_attributes(
    writer: &mut EntryWriter<'_>,
    schema: &Schema,
    subordinates: &Subordinates<'_>,
    id: lmdir_store::EntryId,
    entry: &lmdir_store::EntryRef<'_>,
    dn: &str,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
    types_only: bool,
) -> Result<(), OperationError> {
    let context_csns = match subordinates.database.shows_context_csn {
        true => context_csns(subordinates.read, id, selection, access)?,
        false => Vec::new(),
    };
    let mut dynamic = dynamic_values(schema, subordinates, id, entry, selection, access)?;
    // `1.1` alone (every authrate search) selects no stored attribute: none is decoded.
    // Unselected attributes are stepped over by their description number.
    let stored = selection.may_select_stored().then(|| {
        entry.attributes_where(|description| {
            selection.selects(schema, description.attr, &description.options)
        })
    });
    for attribute in stored.into_iter().flatten() {
        let attr = attribute.attr();
        if stash_dynamic(&mut dynamic, &attribute) {
            continue;
        }
        if !context_csns.is_empty() && Some(attr) == selection.context_csn {
            // A contextCSN loaded with the data (a slapcat LDIF): the live one replaces it.
            continue;
        }
        if access.is_some_and(|access| !access.can_read_attribute(attr)) {
            continue;
        }
        let description = attribute.description_text().as_bytes();
        if types_only {
            writer.attribute(description, std::iter::empty());
        } else if let Some(matched) = &selection.matched_values {
            let values = attribute
                .values()
                .map(|(original, normalized)| (original, normalized.to_cow()));
            let kept = matched.kept(attr, attribute.options(), values);
            if !kept.is_empty() {
                writer.attribute(description, kept);
            }
        } else if EntryWriter::has_many_values(attribute.value_count()) {
            let values = attribute.values();
            writer.attribute_many_values(description, attribute.value_count(), |sink| {
                values.for_each_original(|value| sink.push(value))
            });
        } else {
            writer.attribute(
                description,
                attribute.values().map(|(original, _)| original),
            );
        }
    }
    for dynamic in dynamic {
        dynamic.write(writer, schema, selection, types_only);
    }
    write_computed(writer, subordinates, id, dn, selection, types_only)?;
    if !context_csns.is_empty() {
        let values: Vec<Vec<u8>> = match types_only {
            true => Vec::new(),
            false => context_csns
                .iter()
                .map(|csn| csn.to_string().into_bytes())
                .collect(),
        };
        writer.attribute(b"contextCSN", values.iter().map(Vec::as_slice));
    }
    Ok(())
}

/// The selected computed attributes: hasSubordinates, numSubordinates (the children worked
/// out once for both, counted exactly only when numSubordinates is selected), entryDN and
/// subschemaSubentry.
fn write_computed(
    writer: &mut EntryWriter<'_>,
    subordinates: &Subordinates<'_>,
    id: lmdir_store::EntryId,
    dn: &str,
    selection: &Selection,
    types_only: bool,
) -> Result<(), OperationError> {
    let wants_count = selection.selects_computed(selection.num_subordinates);
    let children = match wants_count || selection.selects_computed(selection.has_subordinates) {
        true => Some(subordinates.count(id, wants_count)?),
        false => None,
    };
    let computed: [(Option<AttrId>, &str); 4] = [
        (selection.has_subordinates, "hasSubordinates"),
        (selection.num_subordinates, "numSubordinates"),
        (selection.entry_dn, "entryDN"),
        (selection.subschema_subentry, "subschemaSubentry"),
    ];
    for (attr, name) in computed {
        if !selection.selects_computed(attr) {
            continue;
        }
        let value: Option<Vec<u8>> = match name {
            "hasSubordinates" => children.map(|known| known.has_subordinates().to_vec()),
            "numSubordinates" => children.and_then(KnownChildren::num_subordinates),
            "entryDN" => Some(dn.as_bytes().to_vec()),
            _ => Some(b"cn=Subschema".to_vec()),
        };
        match (value, types_only) {
            (None, _) => {}
            (Some(_), true) => writer.attribute(name.as_bytes(), std::iter::empty()),
            (Some(value), false) => writer.attribute(name.as_bytes(), [value.as_slice()]),
        }
    }
    Ok(())
}

/// A dynamic group's member attribute (`[[dynlist]]`): its stored values and the members
/// its URLs find for the reader.
struct DynamicMembers {
    attr: AttrId,
    stored: Vec<Vec<u8>>,
    found: Vec<Vec<u8>>,
}

/// The computed values `entry` gets (`[[dynlist]]`): its dynamic members, the dynamic groups
/// finding it.
fn dynamic_values(
    schema: &Schema,
    subordinates: &Subordinates<'_>,
    id: lmdir_store::EntryId,
    entry: &lmdir_store::EntryRef<'_>,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
) -> Result<Vec<DynamicMembers>, OperationError> {
    let mut dynamic = dynamic_members(schema, subordinates, entry, selection, access)?;
    dynamic.extend(dynamic_member_of(
        schema,
        subordinates,
        id,
        selection,
        access,
    )?);
    Ok(dynamic)
}

/// Keeps a stored attribute's values with the computed ones of the same attribute (written
/// together, once: an attribute appears once in an entry); false when none are computed.
fn stash_dynamic(
    dynamic: &mut [DynamicMembers],
    attribute: &lmdir_store::AttributeRef<'_>,
) -> bool {
    let attr = attribute.attr();
    let Some(dynamic) = dynamic
        .iter_mut()
        .find(|dynamic| dynamic.attr == attr && attribute.options().is_empty())
    else {
        return false;
    };
    dynamic.stored = attribute
        .values()
        .map(|(original, _)| original.to_vec())
        .collect();
    true
}

/// The dynamic members of `entry` when it is a dynamic group whose member attribute is
/// selected and readable; None otherwise (nothing is searched).
fn dynamic_members(
    schema: &Schema,
    subordinates: &Subordinates<'_>,
    entry: &lmdir_store::EntryRef<'_>,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
) -> Result<Vec<DynamicMembers>, OperationError> {
    let view = &subordinates.dynlist;
    let Some(rule) = crate::dynlist::rule_of(&view.groups, schema, entry) else {
        return Ok(Vec::new());
    };
    let attr = rule.member_attr;
    let readable = access.is_none_or(|access| access.can_read_attribute(attr));
    if !selection.selects(schema, attr, &[]) || !readable {
        return Ok(Vec::new());
    }
    let found =
        crate::dynlist::members(view, subordinates.read, subordinates.subject, rule, entry)?
            .into_iter()
            .map(|(_, dn)| dn)
            .collect();
    Ok(vec![DynamicMembers {
        attr,
        stored: Vec::new(),
        found,
    }])
}

/// The dynamic groups that find entry `id`, for each rule's memberOf attribute that is
/// selected and readable (the groups are worked out once per operation).
fn dynamic_member_of(
    schema: &Schema,
    subordinates: &Subordinates<'_>,
    id: lmdir_store::EntryId,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
) -> Result<Vec<DynamicMembers>, OperationError> {
    let mut listed: Vec<DynamicMembers> = Vec::new();
    let attributes = subordinates
        .dynlist
        .groups
        .iter()
        .filter_map(|rule| rule.member_of_attr);
    for attr in attributes {
        let readable = access.is_none_or(|access| access.can_read_attribute(attr));
        let known = listed.iter().any(|dynamic| dynamic.attr == attr);
        if !selection.selects(schema, attr, &[]) || !readable || known {
            continue;
        }
        listed.push(DynamicMembers {
            attr,
            stored: Vec::new(),
            found: subordinates.dynamic_groups_of(id, attr)?,
        });
    }
    Ok(listed)
}

impl DynamicMembers {
    /// The stored values, then the found members not among them (compared as DNs).
    fn write(
        self,
        writer: &mut EntryWriter<'_>,
        schema: &Schema,
        selection: &Selection,
        types_only: bool,
    ) {
        let name = schema.attribute_type(self.attr).name().as_bytes();
        let mut seen = std::collections::HashSet::new();
        let mut values: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for value in self.stored.into_iter().chain(self.found) {
            let normalized = schema
                .normalize_value(self.attr, &value)
                .unwrap_or_else(|_| value.clone());
            if seen.insert(normalized.clone()) {
                values.push((value, normalized));
            }
        }
        if values.is_empty() {
            return;
        }
        if types_only {
            writer.attribute(name, std::iter::empty());
            return;
        }
        let pairs = values
            .iter()
            .map(|(original, normalized)| (original.as_slice(), normalized.as_slice()));
        match &selection.matched_values {
            Some(matched) => {
                let kept = matched.kept(self.attr, &[], pairs);
                if !kept.is_empty() {
                    writer.attribute(name, kept);
                }
            }
            None => writer.attribute(name, pairs.map(|(original, _)| original)),
        }
    }
}

/// The directory's contextCSN (one value per server ID) when `id` is the naming context's
/// entry and the attribute is selected and readable; empty otherwise. It lives in the store's
/// `meta`, written in the transaction of each change (`lmdir_store::context_csn`).
fn context_csns(
    read: &ReadTxn,
    id: lmdir_store::EntryId,
    selection: &Selection,
    access: Option<&EntryAccess<'_>>,
) -> Result<Vec<lmdir_sync::Csn>, OperationError> {
    let Some(attr) = selection.context_csn else {
        return Ok(Vec::new());
    };
    if !selection.selects_computed(Some(attr))
        || access.is_some_and(|access| !access.can_read_attribute(attr))
        || read.parent_of(id)? != Some(lmdir_store::layout::ROOT_PARENT_ID)
    {
        return Ok(Vec::new());
    }
    Ok(read.context_csns()?)
}

/// RFC 4527: the entry at `dn` as the value of a pre-read or post-read response control, with
/// the requested attributes the subject may read. An entry the subject may not know of answers
/// exactly as a missing one (noSuchObject, the matched DN only of a disclosed ancestor): the
/// answer the update itself gives.
pub(crate) fn read_entry_control(
    database: &Database,
    (identity, snapshot): (&Identity, Option<lmdir_store::ReadTxn>),
    dn: &str,
    attributes: &[String],
    oid: &str,
) -> Result<ResponseControl, OperationError> {
    // The writer's snapshot just before or after the update when it took one, else now.
    let read = match snapshot {
        Some(read) => read,
        None => database.store.read().map_err(internal)?,
    };
    let normalized = database.normalize_dn(dn)?;
    let groups = database.groups(&read);
    let subject = database.subject(identity, &groups);
    let (id, entry) = disclosed_entry(database, &read, &subject, dn, &normalized)?;
    let policy = database.policy();
    let access = (!identity.is_rootdn).then(|| policy.for_entry(&subject, &normalized, &entry));
    if access
        .as_ref()
        .is_some_and(|access| !access.can_read_entry())
    {
        return Err(OperationError::new(
            code::INSUFFICIENT_ACCESS_RIGHTS,
            format!("no read access to '{dn}' for the read entry control"),
        ));
    }
    let selection = Selection::resolve(
        &database.schema(),
        &AttributeSelection::from_request(attributes),
    );
    let original_dn = read.dn_of(id)?;
    let mut value = BytesMut::new();
    let mut writer = EntryWriter::begin_bare(&mut value, original_dn.as_bytes());
    write_entry_attributes(
        &mut writer,
        &database.schema(),
        &Subordinates::new(database, &read, &subject),
        id,
        &entry,
        &original_dn,
        &selection,
        access.as_ref(),
        false,
    )?;
    writer.finish_bare();
    Ok(ResponseControl {
        oid: oid.to_string(),
        criticality: false,
        value: Some(value.to_vec()),
    })
}

/// RFC 4528 on a read (search base, compare): the assertion holds when it is True with the
/// items the subject may not search Undefined, so hidden values answer exactly as absent ones.
pub(crate) fn check_read_assertion(
    database: &Database,
    settings: &ServerSettings,
    access: &EntryAccess<'_>,
    entry: &(impl lmdir_schema::EntryView + ?Sized),
    assertion: &crate::filter::RawFilter,
) -> Result<(), OperationError> {
    let assertion = crate::filter::client_filter(settings, assertion)?;
    let prepared = database.schema().prepare_filter(&assertion);
    if access.restrict_filter(&prepared).evaluate(entry).is_true() {
        Ok(())
    } else {
        Err(OperationError::new(
            code::ASSERTION_FAILED,
            "assertion control failed",
        ))
    }
}

/// The entry at `dn` (normalized: `normalized`) if the subject may know of it. A missing entry
/// and a hidden one answer the same noSuchObject, whose matched DN is the deepest ancestor the
/// subject may know of (OpenLDAP's `disclose`), so neither the result code, the message nor
/// the matched DN tells them apart.
pub(crate) fn disclosed_entry<'txn>(
    database: &Database,
    read: &'txn ReadTxn,
    subject: &Subject<'_>,
    dn: &str,
    normalized: &str,
) -> Result<(lmdir_store::EntryId, lmdir_store::EntryRef<'txn>), OperationError> {
    let mut ancestor = match read.normalized_dn_to_id(normalized) {
        Ok(id) => {
            if let Some(entry) = read.entry(id)? {
                if database
                    .policy()
                    .for_entry(subject, normalized, &entry)
                    .can_disclose_entry()
                {
                    return Ok((id, entry));
                }
            }
            // Hidden (or gone): the matched DN comes from its ancestors. Read only here: a
            // disclosed base, every search's case, needs no parent.
            read.parent_of(id)?
        }
        Err(error) if error.code == lmdir_schema::ResultCode::NoSuchObject => {
            match &error.matched_dn {
                Some(matched) => read.dn_to_id(matched).ok(),
                None => None,
            }
        }
        Err(error) => return Err(error.into()),
    };
    let mut missing = OperationError::new(
        code::NO_SUCH_OBJECT,
        // The DN as the client gave it (so hidden and missing read alike), cut: a 16 MiB DN
        // is not echoed back whole.
        format!("no such entry '{}'", crate::log_text::bounded(dn, 256)),
    );
    while let Some(id) = ancestor.filter(|id| *id != 0) {
        if let Some(entry) = read.entry(id)? {
            let ancestor_ndn = read.normalized_dn_of(id)?;
            if database
                .policy()
                .for_entry(subject, &ancestor_ndn, &entry)
                .can_disclose_entry()
            {
                missing.matched_dn = read.dn_of(id)?;
                break;
            }
        }
        ancestor = read.parent_of(id)?;
    }
    Err(missing)
}
