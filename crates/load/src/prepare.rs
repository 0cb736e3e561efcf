//! Stage 2 of the loader, run on every worker thread: one LDIF record → a prepared entry
//! (normalized DN and RDN, encoded `id2entry` value) plus its index keys pushed into the
//! worker's posting run under the entry's ID.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::SystemTime;

use lmdir_ldif::{BodyView, ChangeOperation, ParseOptions};
use lmdir_schema::{
    AttrId, AttributeDescription, CheckedAttribute, Dn, Entry, LdapError, MatchingRule, Schema,
};
use lmdir_store::codec::{encode_entry, AttributeToEncode};
use lmdir_store::layout::{self, IndexKinds};
use rand::{Rng, SeedableRng};

use crate::runs::{PostingRun, RunError, WordHashMap};

/// Index DB numbers are two bytes at the front of every run key, so one merged stream holds
/// every index DB's keys grouped by DB.
pub const INDEX_DB_PREFIX_BYTES: usize = 2;

/// What a record failed on, with where.
#[derive(Debug, Clone)]
pub struct RecordError {
    pub line: u64,
    pub dn: Option<String>,
    pub message: String,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.dn {
            Some(dn) => write!(
                formatter,
                "line {} (dn: {}): {}",
                self.line, dn, self.message
            ),
            None => write!(formatter, "line {}: {}", self.line, self.message),
        }
    }
}

/// One entry ready for the sequencer (the only thread that writes LMDB).
pub struct PreparedEntry {
    pub id: u32,
    pub line: u64,
    pub dn: String,
    pub normalized_dn: String,
    /// Normalized parent DN; empty for a top-level entry.
    pub normalized_parent: String,
    pub rdn_original: String,
    pub rdn_normalized: String,
    /// Where the encoded `id2entry` value lies in its batch's arena (one allocation per batch,
    /// recycled: a fresh buffer per entry, freed on the writer thread, made the allocator
    /// return and re-fault memory all load long).
    pub encoded: std::ops::Range<usize>,
    /// With memberOf upkeep: the normalized DNs this entry's `member` / `uniqueMember` values
    /// name (uniqueMember's `#'bits'B` dropped), sorted and distinct; empty otherwise.
    pub group_members: Vec<String>,
}

/// The attribute-description number table shared by all workers: numbers are dense, assigned
/// on first sight, and written to `meta` at the end.
#[derive(Default)]
pub struct DescriptionNumbers {
    table: RwLock<(HashMap<String, u32>, Vec<String>)>,
}

impl DescriptionNumbers {
    pub fn with_existing(existing: Vec<String>) -> Self {
        let by_text = existing
            .iter()
            .enumerate()
            .map(|(number, text)| (text.clone(), number as u32))
            .collect();
        DescriptionNumbers {
            table: RwLock::new((by_text, existing)),
        }
    }

    pub fn number_of(&self, text: &str) -> u32 {
        if let Some(number) = self.table.read().expect("description lock").0.get(text) {
            return *number;
        }
        let mut guard = self.table.write().expect("description lock");
        if let Some(number) = guard.0.get(text) {
            return *number;
        }
        let number = u32::try_from(guard.1.len()).expect("fewer than 2^32 attribute descriptions");
        guard.0.insert(text.to_string(), number);
        guard.1.push(text.to_string());
        number
    }

    /// Every description text by number.
    pub fn texts(&self) -> Vec<String> {
        self.table.read().expect("description lock").1.clone()
    }
}

/// Everything a worker needs that does not change during a load.
pub struct PrepareContext {
    pub schema: Arc<Schema>,
    pub parse_options: ParseOptions,
    pub check_schema: bool,
    pub normalized_suffix: String,
    /// Index DB number and kinds per indexed attribute type.
    pub indexes: HashMap<AttrId, (u16, IndexKinds)>,
    pub descriptions: Arc<DescriptionNumbers>,
    pub operational: OperationalValues,
    /// `StoreOptions::memberof`: collect group members for the memberOf pass.
    pub memberof: bool,
    /// LMDB's key size limit (`Env::max_key_size`), for `layout::rdn_size_problem`.
    pub key_size_max: usize,
}

/// Values of the operational attributes a load adds to entries that lack them.
pub struct OperationalValues {
    pub creators_name: Vec<u8>,
    pub timestamp: Vec<u8>,
    /// entryCSN's time part without the trailing `Z`, microseconds precision.
    csn_seconds: String,
    csn_micros: u32,
    /// The operational attribute types the schema has, resolved once per load (normalizing
    /// the creator's DN and parsing seven descriptions per entry cost 8% of the load).
    resolved: OnceLock<Vec<ResolvedOperational>>,
}

/// A value as written and normalized.
type ValuePair = (Vec<u8>, Vec<u8>);

/// One operational attribute type, resolved against the schema.
struct ResolvedOperational {
    name: &'static str,
    attr: AttrId,
    description: Result<AttributeDescription, LdapError>,
    description_string: String,
    /// (value, normalized value) when every entry gets the same value.
    constant: Option<Result<ValuePair, LdapError>>,
}

impl OperationalValues {
    pub fn new(now: SystemTime, creators_name: &str) -> Self {
        let since_epoch = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let date_time = time::OffsetDateTime::from_unix_timestamp(since_epoch.as_secs() as i64)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        let seconds = format!(
            "{:04}{:02}{:02}{:02}{:02}{:02}",
            date_time.year(),
            u8::from(date_time.month()),
            date_time.day(),
            date_time.hour(),
            date_time.minute(),
            date_time.second()
        );
        OperationalValues {
            creators_name: creators_name.as_bytes().to_vec(),
            timestamp: format!("{seconds}Z").into_bytes(),
            csn_seconds: seconds,
            csn_micros: since_epoch.subsec_micros(),
            resolved: OnceLock::new(),
        }
    }

    /// The operational attributes in the order `WriteTxn::add` appends them (the ones the
    /// schema lacks left out), with the values that are the same on every entry normalized.
    fn resolved(&self, schema: &Schema) -> &[ResolvedOperational] {
        self.resolved.get_or_init(|| {
            OPERATIONAL_NAMES
                .iter()
                .filter_map(|name| {
                    let attr = schema.attribute(name)?;
                    let constant_value = match *name {
                        "creatorsName" | "modifiersName" => Some(self.creators_name.clone()),
                        "createTimestamp" | "modifyTimestamp" => Some(self.timestamp.clone()),
                        _ => None,
                    };
                    let type_name = schema.attribute_type(attr).name();
                    Some(ResolvedOperational {
                        name,
                        attr,
                        description: schema.parse_description(type_name),
                        description_string: type_name.to_string(),
                        constant: constant_value.map(|value| {
                            schema
                                .normalize_value(attr, &value)
                                .map(|normalized| (value, normalized))
                        }),
                    })
                })
                .collect()
        })
    }

    /// A CSN unique per entry: the load's time plus the ID in the change-count field
    /// (`YYYYmmddHHMMSS.uuuuuuZ#cccccc#000#000000`, as OpenLDAP writes them).
    fn csn(&self, id: u32) -> Vec<u8> {
        let micros = u64::from(self.csn_micros) + u64::from(id >> 24);
        format!(
            "{}.{:06}Z#{:06x}#000#000000",
            self.csn_seconds,
            micros % 1_000_000,
            id & 0x00ff_ffff
        )
        .into_bytes()
    }
}

/// Reusable per-worker buffers, so the hot loop allocates little.
#[derive(Default)]
pub struct WorkerScratch {
    key: Vec<u8>,
    ordered: Vec<u8>,
    encoded: Vec<u8>,
    /// entryUUIDs are version-4 UUIDs from this generator (seeded from the OS once per
    /// worker: one getrandom system call per entry cost more than the rest of the UUID).
    uuid_random: Option<rand::rngs::StdRng>,
    encoded_attributes: Vec<(u32, usize)>,
    /// Description as written in the LDIF → resolved description and canonical text: the
    /// same few dozen descriptions repeat on every entry, so each is parsed once per worker.
    /// (SipHash on these lookups cost more than the lookups; the keys are few and capped.)
    descriptions: WordHashMap<String, (AttributeDescription, String)>,
    /// Canonical description text → its number in the load's shared table (numbers never
    /// change once given, so each worker asks the locked table once per description).
    description_numbers: WordHashMap<String, u32>,
}

/// Descriptions cached per worker before the cache is reset (a hostile LDIF could use many).
const DESCRIPTION_CACHE_ENTRIES_MAX: usize = 4096;

impl WorkerScratch {
    fn resolve(
        &mut self,
        schema: &Schema,
        written: &str,
    ) -> Result<&(AttributeDescription, String), LdapError> {
        if !self.descriptions.contains_key(written) {
            if self.descriptions.len() >= DESCRIPTION_CACHE_ENTRIES_MAX {
                self.descriptions.clear();
            }
            let description = schema.parse_description(written)?;
            let text = schema.description_string(&description);
            self.descriptions
                .insert(written.to_string(), (description, text));
        }
        Ok(self.descriptions.get(written).expect("inserted above"))
    }

    fn description_number(&mut self, context: &PrepareContext, text: &str) -> u32 {
        if let Some(number) = self.description_numbers.get(text) {
            return *number;
        }
        if self.description_numbers.len() >= DESCRIPTION_CACHE_ENTRIES_MAX {
            self.description_numbers.clear();
        }
        let number = context.descriptions.number_of(text);
        self.description_numbers.insert(text.to_string(), number);
        number
    }
}

fn record_error(line: u64, dn: Option<&str>, message: impl Into<String>) -> RecordError {
    RecordError {
        line,
        dn: dn.map(str::to_string),
        message: message.into(),
    }
}

fn ldap_message(error: &LdapError) -> String {
    format!("{} ({})", error.message, error.code.name())
}

/// In the order `WriteTxn::add` appends them.
const OPERATIONAL_NAMES: [&str; 7] = [
    "entryUUID",
    "creatorsName",
    "createTimestamp",
    "modifiersName",
    "modifyTimestamp",
    "entryCSN",
    "structuralObjectClass",
];

/// Prepares one record. On success the entry's index keys are already in `run`.
pub fn prepare_record(
    context: &PrepareContext,
    record_bytes: &[u8],
    first_line: u64,
    id: u32,
    run: &mut PostingRun,
    scratch: &mut WorkerScratch,
    arena: &mut Vec<u8>,
) -> Result<PreparedEntry, RecordError> {
    let view = lmdir_ldif::parse_record_view(record_bytes, first_line, &context.parse_options)
        .map_err(|error| RecordError {
            line: error.line,
            dn: error.dn,
            message: error.message,
        })?;
    let line = view.line;
    let dn_text = view.dn.as_ref();
    let schema = &*context.schema;
    let dn = Dn::parse(dn_text)
        .map_err(|error| record_error(line, Some(dn_text), ldap_message(&error)))?;
    let values: Vec<(&str, &[u8])> = match &view.body {
        BodyView::Content(values) => values
            .iter()
            .map(|(description, value)| (description.as_ref(), value.as_ref()))
            .collect(),
        BodyView::Change(change) => match &change.operation {
            ChangeOperation::Add(values) => values
                .iter()
                .map(|(description, value)| (description.as_str(), value.as_slice()))
                .collect(),
            _ => {
                return Err(record_error(
                    line,
                    Some(dn_text),
                    "only entries and 'changetype: add' records can be loaded",
                ))
            }
        },
    };
    let fail = |error: LdapError| record_error(line, Some(dn_text), ldap_message(&error));
    let (normalized_dn, mut attributes, entry) = if context.check_schema {
        let mut entry = Entry::new(dn);
        for (description, value) in &values {
            entry.add_values(description, std::iter::once(value.to_vec()));
        }
        let checked = schema.check_and_normalize(&entry).map_err(fail)?;
        (checked.normalized_dn, checked.attributes, entry)
    } else {
        let normalized_dn = schema.normalize_dn(&dn).map_err(fail)?;
        let attributes = normalize_without_checks(schema, &values, scratch).map_err(fail)?;
        // The structural class needs only the object classes.
        let object_class = schema.object_class_attribute();
        let mut entry = Entry::new(dn);
        for attribute in attributes
            .iter()
            .filter(|attribute| attribute.description.attr == object_class)
        {
            entry.add_values(
                &attribute.description_string,
                attribute
                    .values
                    .iter()
                    .map(|(original, _)| original.clone()),
            );
        }
        (normalized_dn, attributes, entry)
    };
    add_operational_attributes(context, &entry, &mut attributes, id, scratch).map_err(fail)?;
    let (rdn_original, rdn_normalized, normalized_parent) =
        place_in_tree(context, &entry.dn, &normalized_dn)
            .map_err(|message| record_error(line, Some(dn_text), message))?;
    // Checked here, where the record can be named: the tree writer cannot store it.
    if let Some(problem) = layout::rdn_size_problem(
        rdn_original.len(),
        rdn_normalized.len(),
        context.key_size_max,
    ) {
        return Err(record_error(line, Some(dn_text), problem));
    }

    scratch.encoded_attributes.clear();
    for (position, attribute) in attributes.iter().enumerate() {
        let number = scratch.description_number(context, &attribute.description_string);
        scratch.encoded_attributes.push((number, position));
    }
    let to_encode: Vec<AttributeToEncode<'_>> = scratch
        .encoded_attributes
        .iter()
        .map(|(number, position)| AttributeToEncode {
            description_number: *number,
            values: &attributes[*position].values,
        })
        .collect();
    encode_entry(&to_encode, &mut scratch.encoded)
        .map_err(|error| record_error(line, Some(dn_text), error.to_string()))?;

    push_index_keys(context, &attributes, id, run, scratch)
        .map_err(|error| record_error(line, Some(dn_text), error.to_string()))?;
    let encoded_start = arena.len();
    arena.extend_from_slice(&scratch.encoded);
    let encoded = encoded_start..arena.len();
    let group_members = if context.memberof {
        group_members(schema, &attributes)
    } else {
        Vec::new()
    };
    Ok(PreparedEntry {
        id,
        line,
        dn: dn_text.to_string(),
        normalized_dn,
        normalized_parent,
        rdn_original,
        rdn_normalized,
        encoded,
        group_members,
    })
}

/// The normalized member DNs of a group entry, exactly as the store's memberOf upkeep reads
/// them: every `member` / `uniqueMember` attribute (any options), uniqueMember's optional
/// `#'bits'B` suffix dropped.
fn group_members(schema: &Schema, attributes: &[CheckedAttribute]) -> Vec<String> {
    let member = schema.attribute("member");
    let unique_member = schema.attribute("uniqueMember");
    let mut members = std::collections::BTreeSet::new();
    for attribute in attributes {
        let is_member = Some(attribute.description.attr) == member;
        let is_unique = Some(attribute.description.attr) == unique_member;
        if !is_member && !is_unique {
            continue;
        }
        for (_, normalized) in &attribute.values {
            let text = String::from_utf8_lossy(normalized);
            let dn = match text.rfind("#'") {
                Some(position) if is_unique => &text[..position],
                _ => &text[..],
            };
            members.insert(dn.to_string());
        }
    }
    members.into_iter().collect()
}

/// Adds the operational attributes a server's add sets, in the store's order and with its
/// rule (only when no option-less attribute of that type is present), so a loaded entry is
/// byte-identical to one added through `WriteTxn::add`.
fn add_operational_attributes(
    context: &PrepareContext,
    entry: &Entry,
    attributes: &mut Vec<CheckedAttribute>,
    id: u32,
    scratch: &mut WorkerScratch,
) -> Result<(), LdapError> {
    let operational = &context.operational;
    let schema = &*context.schema;
    for resolved in operational.resolved(schema) {
        let attr = resolved.attr;
        if attributes.iter().any(|attribute| {
            attribute.description.attr == attr && attribute.description.options.is_empty()
        }) {
            continue;
        }
        let (value, normalized) = match &resolved.constant {
            Some(constant) => constant.clone()?,
            None => {
                let value = match resolved.name {
                    "structuralObjectClass" => match schema.structural_object_class(entry) {
                        Ok(class) => schema
                            .object_class_definition(class)
                            .name()
                            .as_bytes()
                            .to_vec(),
                        Err(_) => continue,
                    },
                    "entryUUID" => {
                        let random = scratch
                            .uuid_random
                            .get_or_insert_with(rand::rngs::StdRng::from_os_rng);
                        uuid::Builder::from_random_bytes(random.random())
                            .into_uuid()
                            .to_string()
                            .into_bytes()
                    }
                    "entryCSN" => operational.csn(id),
                    _ => unreachable!("the other operational values are constant"),
                };
                let normalized = schema.normalize_value(attr, &value)?;
                (value, normalized)
            }
        };
        attributes.push(CheckedAttribute {
            description_string: resolved.description_string.clone(),
            description: resolved.description.clone()?,
            values: vec![(value, normalized)],
        });
    }
    Ok(())
}

/// Normalization without schema checks (`--quick`), with the store's rules: descriptions that
/// are equal once canonical are merged, values equal once normalized are kept once, and
/// attributes left without values are dropped.
fn normalize_without_checks(
    schema: &Schema,
    values: &[(&str, &[u8])],
    scratch: &mut WorkerScratch,
) -> Result<Vec<CheckedAttribute>, LdapError> {
    let mut attributes: Vec<CheckedAttribute> = Vec::with_capacity(24);
    // Per attribute: normalized values seen, once an attribute has enough values for a linear
    // duplicate scan to cost more than a set.
    let mut seen: HashMap<usize, std::collections::HashSet<Vec<u8>>> = HashMap::new();
    const LINEAR_SCAN_VALUES_MAX: usize = 16;
    for (written, value) in values {
        let (description, text) = scratch.resolve(schema, written)?;
        let normalized = schema
            .normalize_value(description.attr, value)
            .map_err(|error| LdapError::new(error.code, format!("{written}: {}", error.message)))?;
        let position = match attributes
            .iter()
            .position(|existing| existing.description_string == *text)
        {
            Some(position) => position,
            None => {
                attributes.push(CheckedAttribute {
                    description: description.clone(),
                    description_string: text.clone(),
                    values: Vec::new(),
                });
                attributes.len() - 1
            }
        };
        let target = &mut attributes[position].values;
        let duplicate = if target.len() < LINEAR_SCAN_VALUES_MAX {
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
    attributes.retain(|attribute| !attribute.values.is_empty());
    Ok(attributes)
}

/// The entry's (original RDN, normalized RDN, normalized parent DN) in the store's tree. The
/// suffix entry's node holds the whole suffix DN as its RDN, with the virtual root as parent.
fn place_in_tree(
    context: &PrepareContext,
    dn: &Dn,
    normalized_dn: &str,
) -> Result<(String, String, String), String> {
    let suffix = &context.normalized_suffix;
    if normalized_dn.is_empty() {
        return Err("the root DSE (empty DN) cannot be loaded".into());
    }
    if !suffix.is_empty() && normalized_dn == suffix {
        return Ok((dn.to_string(), normalized_dn.to_string(), String::new()));
    }
    if !lmdir_schema::normalized_dn_is_descendant_of(normalized_dn, suffix) {
        return Err(format!("entry is not within the suffix '{suffix}'"));
    }
    let parent = lmdir_schema::normalized_dn_parent(normalized_dn).unwrap_or("");
    if suffix.is_empty() && !parent.is_empty() {
        // Without a configured suffix the tree is rooted at single-RDN entries as usual.
    }
    let rdn_normalized =
        &normalized_dn[..normalized_dn.len() - parent.len() - usize::from(!parent.is_empty())];
    let rdn_original = dn
        .rdns
        .first()
        .map(|rdn| rdn.to_string())
        .unwrap_or_default();
    Ok((rdn_original, rdn_normalized.to_string(), parent.to_string()))
}

/// Pushes every index key of the entry (DB number ‖ key without chunk) under `id`. Keys are
/// built in a reused buffer with the store's layout functions, so they are byte-identical to
/// what single-entry writes produce.
fn push_index_keys(
    context: &PrepareContext,
    attributes: &[CheckedAttribute],
    id: u32,
    run: &mut PostingRun,
    scratch: &mut WorkerScratch,
) -> Result<(), RunError> {
    for attribute in attributes {
        let Some(&(database, kinds)) = context.indexes.get(&attribute.description.attr) else {
            continue;
        };
        let ordering: Option<MatchingRule> = context
            .schema
            .attribute_type(attribute.description.attr)
            .ordering;
        let prefix = database.to_be_bytes();
        for (_, normalized) in &attribute.values {
            push_value_keys(&prefix, kinds, normalized, ordering, id, run, scratch)?;
        }
    }
    Ok(())
}

pub(crate) fn push_value_keys(
    prefix: &[u8; INDEX_DB_PREFIX_BYTES],
    kinds: IndexKinds,
    normalized: &[u8],
    ordering: Option<MatchingRule>,
    id: u32,
    run: &mut PostingRun,
    scratch: &mut WorkerScratch,
) -> Result<(), RunError> {
    let key = &mut scratch.key;
    if kinds.contains(IndexKinds::PRESENCE) {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(layout::KIND_PRESENCE);
        run.push(key, id)?;
    }
    if kinds.contains(IndexKinds::EQUALITY) {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(layout::KIND_EQUALITY);
        key.extend_from_slice(&layout::hash_bytes(normalized));
        run.push(key, id)?;
    }
    if kinds.contains(IndexKinds::SUBSTRING) && normalized.is_ascii() {
        // ASCII: characters are bytes, so the grams are byte windows (the store's
        // `for_each_gram` computes character boundaries first; same grams, tested below).
        let length = normalized.len();
        let mut push_gram = |kind: u8, gram: &[u8]| -> Result<(), RunError> {
            key.clear();
            key.extend_from_slice(prefix);
            key.push(kind);
            key.extend_from_slice(&layout::hash_bytes(gram));
            run.push(key, id)
        };
        for gram_length in layout::GRAM_LENGTH_MIN_CHARS..=layout::GRAM_LENGTH_MAX_CHARS.min(length)
        {
            push_gram(layout::KIND_INITIAL, &normalized[..gram_length])?;
            push_gram(layout::KIND_FINAL, &normalized[length - gram_length..])?;
        }
        if length >= layout::GRAM_LENGTH_MAX_CHARS {
            for window in normalized.windows(layout::GRAM_LENGTH_MAX_CHARS) {
                push_gram(layout::KIND_ANY, window)?;
            }
        }
    } else if kinds.contains(IndexKinds::SUBSTRING) {
        let mut failure = None;
        layout::for_each_gram(normalized, &mut |kind, gram| {
            if failure.is_some() {
                return;
            }
            key.clear();
            key.extend_from_slice(prefix);
            key.push(kind);
            key.extend_from_slice(&layout::hash_bytes(gram));
            if let Err(error) = run.push(key, id) {
                failure = Some(error);
            }
        });
        if let Some(error) = failure {
            return Err(error);
        }
    }
    if kinds.contains(IndexKinds::ORDERED) {
        if let Some(rule) = ordering {
            let ordered = &mut scratch.ordered;
            ordered.clear();
            ordered.extend_from_slice(prefix);
            ordered.extend_from_slice(&layout::ordered_key(&rule.ordering_key(normalized)));
            run.push(ordered, id)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The loader's allocation-free key builder must produce exactly the store's keys.
    #[test]
    fn fast_keys_equal_store_keys() {
        let directory = tempfile::tempdir().unwrap();
        let values: [&[u8]; 6] = [
            b"",
            b"a",
            b"ab",
            b"jonathan smith",
            "zürich kraków".as_bytes(),
            b"12345",
        ];
        let all = IndexKinds::EQUALITY
            .union(IndexKinds::PRESENCE)
            .union(IndexKinds::SUBSTRING)
            .union(IndexKinds::ORDERED);
        for value in values {
            let mut run = PostingRun::new(1 << 30, directory.path());
            let mut scratch = WorkerScratch::default();
            push_value_keys(
                &[0, 7],
                all,
                value,
                Some(MatchingRule::CaseIgnoreOrderingMatch),
                1,
                &mut run,
                &mut scratch,
            )
            .unwrap();
            let finished = run.finish().unwrap();
            let ours: BTreeSet<Vec<u8>> = finished
                .memory
                .iter()
                .flat_map(|run| run.iter())
                .map(|(key, _)| key[2..].to_vec())
                .collect();
            let mut expected = Vec::new();
            let ordering = MatchingRule::CaseIgnoreOrderingMatch.ordering_key(value);
            layout::index_keys_for_value(all, value, Some(&ordering), &mut expected);
            let expected: BTreeSet<Vec<u8>> = expected.into_iter().collect();
            assert_eq!(ours, expected, "value {:?}", String::from_utf8_lossy(value));
        }
    }

    #[test]
    fn csn_is_unique_and_well_formed() {
        let values = OperationalValues::new(
            SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_500_000),
            "cn=admin",
        );
        assert_eq!(values.timestamp, b"19700101000001Z");
        let first = String::from_utf8(values.csn(1)).unwrap();
        assert_eq!(first, "19700101000001.500000Z#000001#000#000000");
        assert_ne!(values.csn(1), values.csn(1 + (1 << 24)));
    }
}
