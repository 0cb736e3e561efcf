//! The one "entry → rows" step of every write that creates an entry: `WriteTxn::add` and the
//! bulk loader's workers both call [`Store::entry_rows`], so a loaded entry is the same rows an
//! add of the same record writes, by construction. The step is pure (it reads no LMDB page):
//! normalize once, refuse what the writer may not set, stamp the operational attributes, place
//! the DN under the suffix, and collect the group members; then [`EntryRows::encode`] gives the
//! `id2entry` value and [`IndexPlan::entry_keys`] the index keys, into a caller's sink.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use lmdir_schema::{
    AttrId, Attribute, AttributeDescription, Entry, LdapError, NormalizedAttributes, NormalizedDn,
    ResultCode, Schema,
};

use crate::codec::{encode_entry, AttributeToEncode, ATTRIBUTES_PER_ENTRY_MAX};
use crate::index_plan::{IndexPlan, KeySink};
use crate::layout::{self, EntryId};
use crate::read::DnPlacement;
use crate::store::{Inner, Store};
use crate::working::{WorkingAttribute, WriteContext};

fn ldap(code: ResultCode, message: impl Into<String>) -> LdapError {
    LdapError::new(code, message)
}

// ---------------------------------------------------------------- time values and CSNs

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

/// `YYYYmmddHHMMSS.uuuuuuZ`: distinct per microsecond, for multi-valued timestamps
/// (pwdFailureTime, pwdGraceUseTime) whose values must differ.
pub fn precise_timestamp_value(now: SystemTime) -> Vec<u8> {
    let (seconds, microseconds) = generalized_time(now);
    format!("{seconds}.{microseconds:06}Z").into_bytes()
}

/// The CSN text of the `sequence`-th change at `now` (OpenLDAP's
/// `YYYYmmddHHMMSS.uuuuuuZ#count#sid#mod`, through `lmdir_sync::Csn`): the low 24 bits are the
/// count, the rest moves the time on by that many microseconds, so distinct sequences at one
/// `now` give distinct CSNs. Server ID and modification number are 0. The loader's CSNs (the
/// entry's ID as the sequence); single-entry writes take theirs from `WriteTxn::next_csn`.
pub fn csn_at(now: SystemTime, sequence: u64) -> Vec<u8> {
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let micros = i64::try_from(since_epoch.as_micros())
        .unwrap_or(i64::MAX)
        .saturating_add(i64::try_from(sequence >> 24).unwrap_or(i64::MAX));
    let count = (sequence & u64::from(lmdir_sync::csn::COUNT_MAX)) as u32;
    let csn = lmdir_sync::Csn::new(micros, count, 0, 0)
        .or_else(|_| lmdir_sync::Csn::new(0, count, 0, 0))
        .expect("count and sid are in range");
    csn.to_string().into_bytes()
}

static CSN_SEQUENCE: AtomicU64 = AtomicU64::new(0);

// ---------------------------------------------------------------- operational attributes

/// A value as written and normalized.
type ValuePair = (Vec<u8>, Vec<u8>);

/// One operational attribute type the schema has.
struct ResolvedOperational {
    name: &'static str,
    attr: AttrId,
    text: String,
    /// (value, normalized) when every entry of this write (or load) gets the same value.
    constant: Option<Result<ValuePair, LdapError>>,
}

/// In the order a new entry gets them.
const CREATION_ATTRIBUTES: [&str; 7] = [
    "entryUUID",
    "creatorsName",
    "createTimestamp",
    "modifiersName",
    "modifyTimestamp",
    "entryCSN",
    "structuralObjectClass",
];

/// The operational attributes of one writer at one time, resolved against the schema once (a
/// load makes one for all its entries: resolving per entry cost 8% of a load).
pub struct OperationalStamp {
    now: SystemTime,
    resolved: Vec<ResolvedOperational>,
}

impl OperationalStamp {
    pub fn new(schema: &Schema, context: &WriteContext) -> OperationalStamp {
        let timestamp = timestamp_value(context.now);
        let resolved = CREATION_ATTRIBUTES
            .iter()
            .filter_map(|name| {
                let attr = schema.attribute(name)?;
                let constant_value = match *name {
                    "creatorsName" | "modifiersName" => Some(context.actor_dn.as_bytes().to_vec()),
                    "createTimestamp" | "modifyTimestamp" => Some(timestamp.clone()),
                    _ => None,
                };
                Some(ResolvedOperational {
                    name,
                    attr,
                    text: schema.attribute_type(attr).name().to_string(),
                    constant: constant_value.map(|value| {
                        schema
                            .normalize_value(attr, &value)
                            .map(|normalized| (value, normalized))
                    }),
                })
            })
            .collect();
        OperationalStamp {
            now: context.now,
            resolved,
        }
    }

    /// Adds each creation attribute the entry lacks (no option-less attribute of its type):
    /// a relaxed writer's own values are kept.
    fn stamp_creation(
        &self,
        schema: &Schema,
        attributes: &mut Vec<WorkingAttribute>,
        structural: Option<lmdir_schema::ObjectClassId>,
        fresh: &FreshValues,
    ) -> Result<(), LdapError> {
        for resolved in &self.resolved {
            let attr = resolved.attr;
            if attributes
                .iter()
                .any(|attribute| attribute.attr == attr && attribute.options.is_empty())
            {
                continue;
            }
            let (value, normalized) = match &resolved.constant {
                Some(constant) => constant.clone()?,
                None => {
                    let value = match resolved.name {
                        "structuralObjectClass" => match structural {
                            Some(class) => schema
                                .object_class_definition(class)
                                .name()
                                .as_bytes()
                                .to_vec(),
                            None => continue,
                        },
                        "entryUUID" => fresh.entry_uuid.to_string().into_bytes(),
                        "entryCSN" => match fresh.csn {
                            Some(csn) => csn.to_string().into_bytes(),
                            None => csn_at(self.now, fresh.csn_sequence),
                        },
                        _ => unreachable!("the other creation values are constant"),
                    };
                    let normalized = schema.normalize_value(attr, &value)?;
                    (value, normalized)
                }
            };
            attributes.push(WorkingAttribute {
                text: resolved.text.clone(),
                attr,
                options: Vec::new(),
                values: vec![(value, normalized)],
            });
        }
        Ok(())
    }
}

/// The values that differ per entry: the caller picks them (the server a random UUID and the
/// process counter; the loader a UUID from its worker's generator and the entry's ID).
pub struct FreshValues {
    pub entry_uuid: uuid::Uuid,
    pub csn_sequence: u64,
    /// The write transaction's CSN for this change (`WriteTxn::next_csn`); None: made from
    /// `csn_sequence` (the loader).
    pub csn: Option<lmdir_sync::Csn>,
}

impl FreshValues {
    /// A random UUID and the next CSN of this process.
    pub fn new() -> FreshValues {
        FreshValues {
            entry_uuid: uuid::Uuid::new_v4(),
            csn_sequence: CSN_SEQUENCE.fetch_add(1, Ordering::Relaxed)
                & u64::from(lmdir_sync::csn::COUNT_MAX),
            csn: None,
        }
    }
}

impl Default for FreshValues {
    fn default() -> Self {
        FreshValues::new()
    }
}

// ---------------------------------------------------------------- normalization

/// Per-thread caches of the step (the loader keeps one per worker; a single write makes one).
/// The hasher is SipHash by default (a client's add chooses the keys); the loader, whose input
/// is the administrator's, passes a cheaper one (SipHash on these per-value lookups cost ~5% of
/// a load).
pub struct RowScratch<S = RandomState> {
    /// Description as written → its index in `resolved`: the same few dozen descriptions
    /// repeat on every entry, so each is parsed once per thread (an index, not the resolved
    /// pair, so a hit costs one lookup: a borrowed value could not be returned early).
    descriptions: HashMap<String, usize, S>,
    /// Resolved description and canonical text, in the order first written.
    resolved: Vec<(AttributeDescription, String)>,
    /// Canonical description text → its number in the store's table (numbers never change
    /// once given, so each thread asks the shared, locked table once per description).
    description_numbers: HashMap<String, u32, S>,
    /// The previous entry's descriptions and numbers by position: consecutive entries of a
    /// load mostly list the same descriptions in the same order, so a string compare finds the
    /// number without hashing (the lookups cost ~4,800 instructions per loaded person).
    recent_numbers: Vec<(String, u32)>,
    numbers: Vec<u32>,
}

impl<S: Default> Default for RowScratch<S> {
    fn default() -> Self {
        RowScratch {
            descriptions: HashMap::default(),
            resolved: Vec::new(),
            description_numbers: HashMap::default(),
            recent_numbers: Vec::new(),
            numbers: Vec::new(),
        }
    }
}

/// Descriptions cached per thread before the cache is reset (a hostile input could use many).
const DESCRIPTION_CACHE_ENTRIES_MAX: usize = 4096;
/// Up to this many values of one attribute duplicates are found by a linear scan; past it by a
/// hash set, so thousands of values cost no quadratic time.
const LINEAR_SCAN_ITEMS_MAX: usize = 16;
/// Up to this many attributes a value's attribute is found by a linear scan (attribute numbers
/// compared first); past it by a hash map. Higher than for values: a person entry has ~20
/// attributes, and building the map (a copied name per attribute, SipHash per value) cost ~5 %
/// of a load's instructions on the standard profile.
const ATTRIBUTES_SCANNED_MAX: usize = 64;

impl RowScratch {
    /// Caches with SipHash, for writes whose input a client chooses.
    pub fn new() -> RowScratch {
        RowScratch::default()
    }
}

impl<S: BuildHasher> RowScratch<S> {
    fn resolve(
        &mut self,
        schema: &Schema,
        written: &str,
    ) -> Result<&(AttributeDescription, String), LdapError> {
        if let Some(&index) = self.descriptions.get(written) {
            return Ok(&self.resolved[index]);
        }
        if self.descriptions.len() >= DESCRIPTION_CACHE_ENTRIES_MAX {
            self.descriptions.clear();
            self.resolved.clear();
        }
        let description = schema.parse_description(written)?;
        let text = schema.description_string(&description);
        self.descriptions
            .insert(written.to_string(), self.resolved.len());
        self.resolved.push((description, text));
        Ok(self.resolved.last().expect("pushed above"))
    }
}

/// Resolves and normalizes (description, value) pairs without schema checks: descriptions
/// equal once canonical are merged, values equal once normalized kept once, attributes left
/// without values dropped. The only normalization of unchecked writes (adds, modify results,
/// loads).
pub(crate) fn normalize_pairs<'v, S: BuildHasher>(
    schema: &Schema,
    pairs: impl Iterator<Item = (&'v str, &'v [u8])>,
    scratch: &mut RowScratch<S>,
) -> Result<Vec<WorkingAttribute>, LdapError> {
    // Room for a person entry and its operational attributes without regrowing.
    let mut working: Vec<WorkingAttribute> = Vec::with_capacity(32);
    let mut positions: HashMap<String, usize> = HashMap::new();
    let mut seen: HashMap<usize, HashSet<Vec<u8>>> = HashMap::new();
    // LDIF lists an attribute's values together (objectClass, member): a value written with
    // the previous value's description goes where that one went, with no lookup.
    let mut previous: Option<(&str, AttrId, usize)> = None;
    for (written, value) in pairs {
        let (attr, position) = match previous {
            Some((previous_written, attr, position)) if previous_written == written => {
                (attr, position)
            }
            _ => {
                let (description, text) = scratch.resolve(schema, written)?;
                let position = attribute_position(&mut working, &mut positions, description, text);
                (description.attr, position)
            }
        };
        previous = Some((written, attr, position));
        let normalized = schema
            .normalize_value(attr, value)
            .map_err(|error| LdapError::new(error.code, format!("{written}: {}", error.message)))?;
        let target = &mut working[position].values;
        let duplicate = if target.len() < LINEAR_SCAN_ITEMS_MAX {
            target.iter().any(|(_, existing)| *existing == normalized)
        } else {
            let set = seen.entry(position).or_insert_with(|| {
                target
                    .iter()
                    .map(|(_, existing)| existing.clone())
                    .collect()
            });
            !set.insert(normalized.clone())
        };
        if !duplicate {
            target.push((value.to_vec(), normalized));
        }
    }
    working.retain(|attribute| !attribute.values.is_empty());
    Ok(working)
}

/// Where in `working` the values of `description` (canonical `text`) go: the attribute with
/// the same type and canonical text, added (without values) when there is none yet.
fn attribute_position(
    working: &mut Vec<WorkingAttribute>,
    positions: &mut HashMap<String, usize>,
    description: &AttributeDescription,
    text: &str,
) -> usize {
    let same =
        |existing: &WorkingAttribute| existing.attr == description.attr && existing.text == text;
    let position = if working.last().is_some_and(same) {
        Some(working.len() - 1)
    } else if working.len() < ATTRIBUTES_SCANNED_MAX {
        working.iter().position(same)
    } else {
        if positions.is_empty() {
            positions.extend(
                working
                    .iter()
                    .enumerate()
                    .map(|(index, existing)| (existing.text.clone(), index)),
            );
        }
        positions.get(text).copied()
    };
    if let Some(position) = position {
        return position;
    }
    working.push(WorkingAttribute {
        text: text.to_string(),
        attr: description.attr,
        options: description.options.clone(),
        values: Vec::new(),
    });
    if !positions.is_empty() {
        positions.insert(text.to_string(), working.len() - 1);
    }
    working.len() - 1
}

/// The (description, value) pairs of an owned entry's attributes.
pub(crate) fn attribute_pairs(
    attributes: &[Attribute],
) -> impl Iterator<Item = (&str, &[u8])> + '_ {
    attributes.iter().flat_map(|attribute| {
        attribute
            .values
            .iter()
            .map(move |value| (attribute.description.as_str(), value.as_slice()))
    })
}

/// An entry to write: owned (a client's add, an import), or a record's pairs borrowed from the
/// LDIF (the loader: no copy of every value into an `Entry` unless the schema is checked).
/// Either way with its DN normalized once by the caller (`dn`; for `Entry` the normalization
/// of `entry.dn`).
pub enum EntrySource<'a> {
    Entry {
        entry: &'a Entry,
        dn: &'a NormalizedDn,
    },
    Pairs {
        dn: &'a NormalizedDn,
        pairs: &'a [(&'a str, &'a [u8])],
    },
    /// Attributes the writer normalized already (for its access decisions): checked as they
    /// are, no value normalized again.
    Normalized {
        dn: &'a NormalizedDn,
        attributes: NormalizedAttributes,
    },
}

impl<'a> EntrySource<'a> {
    /// The entry's DN, normalized by the caller (borrowed for as long as the source's).
    pub(crate) fn dn(&self) -> &'a NormalizedDn {
        match self {
            EntrySource::Entry { dn, .. }
            | EntrySource::Pairs { dn, .. }
            | EntrySource::Normalized { dn, .. } => dn,
        }
    }
}

// ---------------------------------------------------------------- the step

/// Where a new entry goes in the DN tree.
#[derive(Debug, Clone)]
pub struct TreePlace {
    /// Normalized RDNs, leaf first.
    pub rdns: Vec<String>,
    /// RDNs below the suffix entry's own name: 0 for the suffix (top-level) entry.
    pub below_suffix_rdns: usize,
    /// The node's RDN as written (the whole DN for the top-level entry) and normalized (its
    /// `dn2id` key part).
    pub rdn_original: String,
    pub rdn_normalized: String,
}

impl TreePlace {
    pub fn is_top_level(&self) -> bool {
        self.below_suffix_rdns == 0
    }

    pub fn normalized_dn(&self) -> String {
        self.rdns.join(",")
    }

    /// The parent's normalized DN; empty for the top-level entry.
    pub fn normalized_parent(&self) -> String {
        if self.is_top_level() {
            String::new()
        } else {
            self.rdns[1..].join(",")
        }
    }
}

/// One new entry as rows: normalized and stamped attributes, its place in the tree, and the
/// group members its values name (only with memberOf upkeep).
pub struct EntryRows {
    pub place: TreePlace,
    pub(crate) attributes: Vec<WorkingAttribute>,
    /// Normalized DNs named by `member` / `uniqueMember`, when the store keeps memberOf.
    pub group_members: BTreeSet<String>,
}

impl Inner {
    /// Where `dn` sits under the suffix (noSuchObject outside it), from the RDNs it was
    /// normalized to.
    pub(crate) fn tree_place(&self, normalized: &NormalizedDn) -> Result<TreePlace, LdapError> {
        let dn = normalized.dn();
        if dn.rdns.is_empty() {
            return Err(ldap(
                ResultCode::UnwillingToPerform,
                "the root DSE (empty DN) cannot be written",
            ));
        }
        let rdns = normalized.rdns().to_vec();
        let DnPlacement::UnderSuffix { below_suffix_rdns } = self.place_dn(&rdns) else {
            return Err(ldap(
                ResultCode::NoSuchObject,
                format!(
                    "'{dn}' is not within the naming context '{}'",
                    self.suffix_original
                ),
            ));
        };
        let (rdn_original, rdn_normalized) = if below_suffix_rdns == 0 {
            // The top-level entry: its dn2id key is its whole normalized DN.
            (dn.to_string(), Inner::top_level_key(&rdns, 0))
        } else {
            (dn.rdns[0].to_string(), rdns[0].clone())
        };
        let key_size_max = self.env.max_key_size();
        if let Some(problem) =
            layout::rdn_size_problem(rdn_original.len(), rdn_normalized.len(), key_size_max)
        {
            return Err(ldap(
                ResultCode::ConstraintViolation,
                format!("'{dn}': {problem}"),
            ));
        }
        Ok(TreePlace {
            rdns,
            below_suffix_rdns,
            rdn_original,
            rdn_normalized,
        })
    }

    /// Normalizes (checking the schema unless the context skips it) and gives the structural
    /// class when there is one.
    fn normalized_attributes<S: BuildHasher>(
        &self,
        source: EntrySource<'_>,
        context: &WriteContext,
        scratch: &mut RowScratch<S>,
    ) -> Result<(Vec<WorkingAttribute>, Option<lmdir_schema::ObjectClassId>), LdapError> {
        let schema = &*self.schema();
        if !context.skip_schema_check {
            let checked = match source {
                EntrySource::Entry { entry, dn } => schema.check_and_normalize_at(entry, dn)?,
                EntrySource::Pairs { dn, pairs } => {
                    let mut entry = Entry::new(dn.dn().clone());
                    for (description, value) in pairs.iter() {
                        entry.add_values(description, std::iter::once(value.to_vec()));
                    }
                    schema.check_and_normalize_at(&entry, dn)?
                }
                EntrySource::Normalized { dn, attributes } => {
                    schema.check_normalized_at(attributes, dn)?
                }
            };
            let attributes = checked
                .attributes
                .into_iter()
                .map(WorkingAttribute::from_checked)
                .collect();
            return Ok((attributes, Some(checked.structural_object_class)));
        }
        let attributes = match source {
            EntrySource::Entry { entry, .. } => {
                normalize_pairs(schema, attribute_pairs(&entry.attributes), scratch)?
            }
            EntrySource::Pairs { pairs, .. } => {
                normalize_pairs(schema, pairs.iter().copied(), scratch)?
            }
            EntrySource::Normalized { attributes, .. } => attributes
                .into_vec()
                .into_iter()
                .map(WorkingAttribute::from_checked)
                .collect(),
        };
        // The structural class needs only the object classes' values (as written).
        let object_class = schema.object_class_attribute();
        let values = attributes
            .iter()
            .filter(|attribute| attribute.attr == object_class)
            .flat_map(|attribute| attribute.values.iter())
            .map(|(original, _)| original.as_slice());
        let structural = schema.structural_object_class_of_values(values).ok();
        Ok((attributes, structural))
    }

    /// The step: see the module comment. Fails with the LDAP result a single add answers.
    pub(crate) fn entry_rows<S: BuildHasher>(
        &self,
        source: EntrySource<'_>,
        context: &WriteContext,
        stamp: &OperationalStamp,
        fresh: &FreshValues,
        scratch: &mut RowScratch<S>,
    ) -> Result<EntryRows, LdapError> {
        let place = self.tree_place(source.dn())?;
        self.entry_rows_at(place, source, context, stamp, fresh, scratch)
    }

    /// The step for an entry whose place in the tree is known (`tree_place` of its DN).
    pub(crate) fn entry_rows_at<S: BuildHasher>(
        &self,
        place: TreePlace,
        source: EntrySource<'_>,
        context: &WriteContext,
        stamp: &OperationalStamp,
        fresh: &FreshValues,
        scratch: &mut RowScratch<S>,
    ) -> Result<EntryRows, LdapError> {
        let (mut attributes, structural) = self.normalized_attributes(source, context, scratch)?;
        for attribute in &attributes {
            refuse_no_user_modification(&self.schema(), attribute.attr, context)?;
        }
        stamp.stamp_creation(&self.schema(), &mut attributes, structural, fresh)?;
        check_entry_limits(&attributes, context)?;
        let group_members = if self.options.memberof {
            group_members(&self.schema(), &attributes)
        } else {
            BTreeSet::new()
        };
        Ok(EntryRows {
            place,
            attributes,
            group_members,
        })
    }
}

/// Refuses a client-supplied NO-USER-MODIFICATION attribute unless the context relaxes it.
pub(crate) fn refuse_no_user_modification(
    schema: &Schema,
    attr: AttrId,
    context: &WriteContext,
) -> Result<(), LdapError> {
    let attribute_type = schema.attribute_type(attr);
    if attribute_type.no_user_modification && !context.relax && !context.skip_schema_check {
        return Err(ldap(
            ResultCode::ConstraintViolation,
            format!("{}: no user modification allowed", attribute_type.name()),
        ));
    }
    Ok(())
}

/// Refuses an entry with more descriptions than the context allows.
pub(crate) fn check_entry_limits(
    attributes: &[WorkingAttribute],
    context: &WriteContext,
) -> Result<(), LdapError> {
    let limit = context
        .attribute_descriptions_per_entry_max
        .min(ATTRIBUTES_PER_ENTRY_MAX);
    if attributes.len() > limit {
        return Err(ldap(
            ResultCode::AdminLimitExceeded,
            format!(
                "the entry would hold {} attribute descriptions (limit {limit})",
                attributes.len()
            ),
        ));
    }
    Ok(())
}

impl Store {
    /// The "entry → rows" step for a writer outside a write txn (the bulk loader's workers;
    /// thread-safe). `WriteTxn::add` runs the same step.
    pub fn entry_rows<S: BuildHasher>(
        &self,
        source: EntrySource<'_>,
        context: &WriteContext,
        stamp: &OperationalStamp,
        fresh: &FreshValues,
        scratch: &mut RowScratch<S>,
    ) -> Result<EntryRows, LdapError> {
        self.inner
            .entry_rows(source, context, stamp, fresh, scratch)
    }

    /// The operational attributes a writer with `context` stamps (make once per load).
    pub fn operational_stamp(&self, context: &WriteContext) -> OperationalStamp {
        OperationalStamp::new(&self.inner.schema(), context)
    }

    /// Where the store keeps each index: see [`IndexPlan`].
    pub fn index_plan(&self) -> std::sync::Arc<IndexPlan> {
        self.inner.index_set().plan.clone()
    }

    /// Those of a new group's `group_members` that a later add of that DN does not find the
    /// group by (`memberof_of_added_entry` looks for an equality posting under the DN itself):
    /// named only by an unindexed attribute or by a `uniqueMember` with a UID. Sorted; mostly
    /// empty. For the bulk loader, which mirrors single adds of its file in order.
    pub fn group_members_unfound_later(&self, rows: &EntryRows) -> Vec<String> {
        if rows.group_members.is_empty() {
            return Vec::new();
        }
        (self.inner).members_unfound_later(&rows.attributes, &rows.group_members)
    }
}

impl EntryRows {
    pub fn normalized_dn(&self) -> String {
        self.place.normalized_dn()
    }

    /// The CSNs this new entry brings to the directory's contextCSN, as `slapadd -w` counts
    /// them: its entryCSN (carried, or stamped by the step) and, on the top-level entry (the
    /// suffix, where `slapcat` writes it), each stored contextCSN value. Parsed as every
    /// write parses entryCSN (`lmdir_sync::Csn`); a value that is not a CSN adds nothing.
    pub fn context_csn_candidates(&self, schema: &Schema, add: &mut dyn FnMut(lmdir_sync::Csn)) {
        let mut values_of = |attr: Option<AttrId>, all: bool| {
            let Some(attr) = attr else { return };
            for attribute in self.attributes.iter().filter(|a| a.attr == attr) {
                let values = attribute.values.iter();
                for (original, _) in values.take(if all { usize::MAX } else { 1 }) {
                    if let Ok(csn) = lmdir_sync::Csn::parse(original) {
                        add(csn);
                    }
                }
            }
        };
        values_of(schema.attribute("entryCSN"), false);
        if self.place.is_top_level() {
            values_of(schema.known_attributes().context_csn, true);
        }
    }

    /// The entry's `id2entry` value into `out` and, framed (`layout::push_framed_row`) in key
    /// order, its `id2value` rows into `value_rows` (both cleared first), numbering new
    /// descriptions in the store's table (they are written to `meta` by the commit that writes
    /// the entry).
    pub fn encode<S: BuildHasher>(
        &self,
        store: &Store,
        id: EntryId,
        scratch: &mut RowScratch<S>,
        out: &mut Vec<u8>,
        value_rows: &mut Vec<u8>,
    ) -> Result<(), LdapError> {
        encode_attributes(&store.inner, id, &self.attributes, scratch, out, value_rows)
    }
}

impl Inner {
    /// Whether a description of `attr` with `value_count` values lives out of line.
    pub(crate) fn is_out_of_line(&self, attr: AttrId, value_count: usize) -> bool {
        layout::is_out_of_line(self.out_of_line_always.contains(&attr), value_count)
    }
}

/// (original, normalized) pairs.
type ValuePairs = Vec<(Vec<u8>, Vec<u8>)>;
/// An out-of-line value in row order: description number, key tail, the (original, normalized)
/// pair.
type OrderedValue<'a> = (u32, std::borrow::Cow<'a, [u8]>, &'a (Vec<u8>, Vec<u8>));
/// An entry's (ID, record) with every value inline ([`crate::ReadTxn::inlined_record`]).
type InlinedRecord<'a> = Result<(crate::EntryId, std::borrow::Cow<'a, [u8]>), LdapError>;

/// The `id2value` rows of an entry's out-of-line attributes, framed, in key order (numbers are
/// the attributes' description numbers). Two values with one key (the same normalized value)
/// are attributeOrValueExists.
fn encode_value_rows(
    id: EntryId,
    attributes: &[(u32, &WorkingAttribute)],
    out: &mut Vec<u8>,
) -> Result<(), LdapError> {
    out.clear();
    let mut order: Vec<OrderedValue<'_>> = attributes
        .iter()
        .flat_map(|(number, attribute)| {
            attribute
                .values
                .iter()
                .map(move |value| (*number, layout::value_key_tail(&value.1), value))
        })
        .collect();
    order.sort_unstable_by(|left, right| (left.0, &left.1).cmp(&(right.0, &right.1)));
    if let Some(pair) = order
        .windows(2)
        .find(|pair| pair[0].0 == pair[1].0 && pair[0].1 == pair[1].1)
    {
        return Err(ldap(
            ResultCode::AttributeOrValueExists,
            format!(
                "value '{}' is there twice",
                String::from_utf8_lossy(&pair[1].2 .0)
            ),
        ));
    }
    let (mut key, mut value) = (Vec::new(), Vec::new());
    for (number, _, (original, normalized)) in order {
        layout::encode_value_row(id, number, original, normalized, &mut key, &mut value);
        layout::push_framed_row(&key, &value, out);
    }
    Ok(())
}

/// Encodes attributes as an `id2entry` value (the one caller of `codec::encode_entry` for
/// whole entries), numbering descriptions through the thread's cache.
pub(crate) fn encode_attributes<S: BuildHasher>(
    inner: &Inner,
    id: EntryId,
    attributes: &[WorkingAttribute],
    scratch: &mut RowScratch<S>,
    out: &mut Vec<u8>,
    value_rows: &mut Vec<u8>,
) -> Result<(), LdapError> {
    if !cached_description_numbers(attributes, scratch) {
        scratch.numbers = inner.description_numbers(attributes);
        if scratch.description_numbers.len() >= DESCRIPTION_CACHE_ENTRIES_MAX {
            scratch.description_numbers.clear();
        }
        for (attribute, number) in attributes.iter().zip(&scratch.numbers) {
            scratch
                .description_numbers
                .insert(attribute.text.clone(), *number);
        }
    }
    remember_recent_numbers(attributes, scratch);
    let to_encode: Vec<AttributeToEncode<'_>> = attributes
        .iter()
        .zip(&scratch.numbers)
        .map(|(attribute, number)| AttributeToEncode {
            description_number: *number,
            values: &attribute.values,
            out_of_line: inner
                .is_out_of_line(attribute.attr, attribute.values.len())
                .then_some(attribute.values.len()),
        })
        .collect();
    encode_entry(&to_encode, out).map_err(|error| {
        ldap(
            ResultCode::AdminLimitExceeded,
            format!("the entry cannot be stored: {}", error.reason),
        )
    })?;
    let outside: Vec<(u32, &WorkingAttribute)> = to_encode
        .iter()
        .zip(attributes)
        .filter(|(encoded, _)| encoded.out_of_line.is_some())
        .map(|(encoded, attribute)| (encoded.description_number, attribute))
        .collect();
    encode_value_rows(id, &outside, value_rows)
}

/// Fills `scratch.numbers` from the thread's caches (the previous entry's description at the
/// same position, else the hash map); false when a description is not cached.
fn cached_description_numbers<S: BuildHasher>(
    attributes: &[WorkingAttribute],
    scratch: &mut RowScratch<S>,
) -> bool {
    scratch.numbers.clear();
    for (index, attribute) in attributes.iter().enumerate() {
        let number = match scratch.recent_numbers.get(index) {
            Some((text, number)) if *text == attribute.text => *number,
            _ => match scratch.description_numbers.get(&attribute.text) {
                Some(number) => *number,
                None => return false,
            },
        };
        scratch.numbers.push(number);
    }
    true
}

/// Keeps this entry's descriptions and numbers by position for the next entry (a changed
/// position reuses its string's buffer).
fn remember_recent_numbers<S>(attributes: &[WorkingAttribute], scratch: &mut RowScratch<S>) {
    scratch.recent_numbers.truncate(attributes.len());
    for (index, (attribute, &number)) in attributes.iter().zip(&scratch.numbers).enumerate() {
        match scratch.recent_numbers.get_mut(index) {
            Some((text, recent)) => {
                if *text != attribute.text {
                    text.clone_from(&attribute.text);
                }
                *recent = number;
            }
            None => scratch
                .recent_numbers
                .push((attribute.text.clone(), number)),
        }
    }
}

// ---------------------------------------------------------------- index keys

impl IndexPlan {
    /// Every index key of an entry's values (repeats possible: callers dedupe).
    pub(crate) fn attribute_keys<'a, E>(
        &self,
        attributes: impl IntoIterator<Item = &'a WorkingAttribute>,
        emit: &mut KeySink<'_, E>,
    ) -> Result<(), E> {
        for attribute in attributes {
            if self.get(attribute.attr).is_none() {
                continue;
            }
            for (_, normalized) in &attribute.values {
                self.value_keys(attribute.attr, normalized, emit)?;
            }
        }
        Ok(())
    }

    /// Every index key of a new entry.
    pub fn entry_keys<E>(&self, rows: &EntryRows, emit: &mut KeySink<'_, E>) -> Result<(), E> {
        self.attribute_keys(&rows.attributes, emit)
    }
}

impl IndexPlan {
    /// Every index key of a stored entry (an `id2entry` value) for the attributes `selected`
    /// accepts: what a reindex rebuilds, with the same key function as every write.
    pub fn stored_entry_keys<E: From<LdapError>>(
        &self,
        record: &[u8],
        descriptions: &crate::DescriptionTable,
        selected: &dyn Fn(AttrId) -> bool,
        emit: &mut KeySink<'_, E>,
    ) -> Result<(), E> {
        let encoded = crate::codec::EncodedEntry::parse(record)
            .map_err(|error| crate::read::corrupt(format!("entry: {error}")))?;
        for attribute in encoded.attributes() {
            let info = descriptions
                .get(attribute.description_number)
                .ok_or_else(|| {
                    crate::read::corrupt(format!(
                        "unknown description {}",
                        attribute.description_number
                    ))
                })?;
            if self.get(info.attr).is_none() || !selected(info.attr) {
                continue;
            }
            for (_, normalized) in attribute.values() {
                self.value_keys(info.attr, &normalized.to_cow(), emit)?;
            }
        }
        Ok(())
    }
}

impl crate::ReadTxn {
    /// Every stored entry as (ID, `id2entry` value), in ID order (reindex reads them all). A
    /// record with out-of-line attributes comes with their values brought back inline
    /// ([`crate::ReadTxn::inlined_record`]), so [`IndexPlan::stored_entry_keys`] sees them all.
    pub fn stored_entries(
        &self,
    ) -> Result<impl Iterator<Item = InlinedRecord<'_>> + '_, LdapError> {
        let rows = self
            .inner
            .databases
            .id2entry
            .iter(self.txn())
            .map_err(crate::error::lmdb_to_ldap)?;
        Ok(rows.map(|row| {
            let (key, value) = row.map_err(crate::error::lmdb_to_ldap)?;
            let id = layout::decode_id(key)
                .ok_or_else(|| crate::read::corrupt(format!("id2entry key {key:02x?}")))?;
            Ok((id, self.inlined_record(id, value)?))
        }))
    }

    /// An `id2entry` record as it would be with every value inline (version 2): the record
    /// itself when no attribute lives out of line, else rebuilt from it and its `id2value` rows.
    pub fn inlined_record<'r>(
        &self,
        id: crate::EntryId,
        record: &'r [u8],
    ) -> Result<std::borrow::Cow<'r, [u8]>, LdapError> {
        let encoded = crate::codec::EncodedEntry::parse(record)
            .map_err(|error| crate::read::corrupt(format!("entry {id}: {error}")))?;
        if !encoded.has_out_of_line() {
            return Ok(std::borrow::Cow::Borrowed(record));
        }
        let mut values: Vec<(u32, ValuePairs)> = Vec::new();
        for attribute in encoded.attributes() {
            let number = attribute.description_number;
            let pairs = match attribute.out_of_line {
                false => attribute
                    .values()
                    .map(|(original, normalized)| (original.to_vec(), normalized.to_vec()))
                    .collect(),
                true => crate::read::out_of_line_rows(&self.inner, self.txn(), id, number)?
                    .map(|row| row.map(|row| (row.original.to_vec(), row.normalized.to_vec())))
                    .collect::<Result<_, _>>()?,
            };
            values.push((number, pairs));
        }
        let to_encode: Vec<AttributeToEncode<'_>> = values
            .iter()
            .map(|(number, values)| AttributeToEncode {
                description_number: *number,
                values,
                out_of_line: None,
            })
            .collect();
        let mut out = Vec::new();
        encode_entry(&to_encode, &mut out)
            .map_err(|error| crate::read::corrupt(format!("entry {id}: {error}")))?;
        Ok(std::borrow::Cow::Owned(out))
    }
}

/// Normalized DNs listed in `member` / `uniqueMember` (uniqueMember's `#bits` dropped): the
/// one reading of a group's members, for single-entry writes and the bulk loader alike.
pub(crate) fn group_members(schema: &Schema, attributes: &[WorkingAttribute]) -> BTreeSet<String> {
    let member = schema.attribute("member");
    let unique_member = schema.attribute("uniqueMember");
    let mut members = BTreeSet::new();
    for attribute in attributes {
        let is_member = Some(attribute.attr) == member;
        let is_unique = Some(attribute.attr) == unique_member;
        if !is_member && !is_unique {
            continue;
        }
        for (_, normalized) in &attribute.values {
            let text = String::from_utf8_lossy(normalized);
            let dn = if is_unique {
                strip_unique_id(&text)
            } else {
                &text
            };
            members.insert(dn.to_string());
        }
    }
    members
}

impl Inner {
    /// The `members` (of `attributes`) that a later add of that DN does not find the group
    /// by: found are the values of `member` / `uniqueMember` with a usable equality index,
    /// posted under the whole normalized value (a `uniqueMember` with a UID is not found
    /// under its DN).
    fn members_unfound_later(
        &self,
        attributes: &[WorkingAttribute],
        members: &BTreeSet<String>,
    ) -> Vec<String> {
        let schema = self.schema();
        let indexed = |name| (schema.attribute(name)).filter(|attr| self.has_equality_index(*attr));
        let (member, unique_member) = (indexed("member"), indexed("uniqueMember"));
        if member.is_none() && unique_member.is_none() {
            return members.iter().cloned().collect();
        }
        let mut found: HashSet<String> = HashSet::new();
        for attribute in attributes {
            let is_unique = Some(attribute.attr) == unique_member;
            if Some(attribute.attr) != member && !is_unique {
                continue;
            }
            for (_, normalized) in &attribute.values {
                let text = String::from_utf8_lossy(normalized);
                // `group_members` names a uniqueMember by its DN part; the index, by the whole.
                if !is_unique || strip_unique_id(&text).len() == text.len() {
                    found.insert(text.into_owned());
                }
            }
        }
        (members.iter())
            .filter(|dn| !found.contains(dn.as_str()))
            .cloned()
            .collect()
    }
}

/// `uniqueMember` values are `DN[#'bits'B]`: the DN part (a `#` inside a DN value is escaped,
/// so the last unescaped `#` followed by `'` starts the optional UID).
pub(crate) fn strip_unique_id(value: &str) -> &str {
    match value.rfind("#'") {
        Some(position) => &value[..position],
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attributes and values past the linear-scan limits, interleaved and repeated: each
    /// description ends up once, with its distinct values in first-seen order.
    #[test]
    fn normalize_pairs_merges_across_the_scan_limits() {
        let schema = Schema::builtin();
        let descriptions: Vec<String> = (0..ATTRIBUTES_SCANNED_MAX + 20)
            .map(|index| format!("description;lang-x{index}"))
            .collect();
        let values: Vec<String> = (0..LINEAR_SCAN_ITEMS_MAX + 5)
            .map(|index| format!("Value {index}"))
            .collect();
        let mut pairs: Vec<(&str, &[u8])> = Vec::new();
        for round in 0..2 {
            for value in &values {
                for description in &descriptions {
                    pairs.push((description.as_str(), value.as_bytes()));
                }
                // A case-only variant is the same normalized value: kept once.
                if round == 1 {
                    pairs.push((descriptions[0].as_str(), b"VALUE 0"));
                }
            }
        }
        let mut scratch = RowScratch::new();
        let working = normalize_pairs(&schema, pairs.into_iter(), &mut scratch).unwrap();
        assert_eq!(working.len(), descriptions.len());
        for attribute in &working {
            let originals: Vec<&[u8]> = attribute
                .values
                .iter()
                .map(|(original, _)| original.as_slice())
                .collect();
            let expected: Vec<&[u8]> = values.iter().map(|value| value.as_bytes()).collect();
            assert_eq!(originals, expected, "{}", attribute.text);
        }
    }
}
