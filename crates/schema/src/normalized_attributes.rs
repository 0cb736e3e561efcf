//! An entry's attributes with every value normalized, made only by the schema
//! (`Schema::normalize_attributes`, or `Schema::stored_normalized` for values a store wrote
//! normalized), so code that receives them knows each value was normalized exactly once and
//! need not normalize it again (issue 21): the schema check (`Schema::check_normalized_at`),
//! a modification (`Schema::apply_normalized_modification`, which normalizes only the values
//! the request carries) and filter evaluation (`NormalizedEntryView`) all take them as they are.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use crate::check::CheckedAttribute;
use crate::entry::{Attribute, ModOp, Modification};
use crate::error::{LdapError, ResultCode};
use crate::filter::{AttributeVisitor, EntryView, StoredValue};
use crate::normalized_dn::NormalizedDn;
use crate::schema::{AttrId, AttributeDescription, Schema};

/// Attributes whose values are all (original, equality-normalized) pairs: descriptions
/// resolved and merged (one attribute per description), none without values. Duplicate values
/// and SINGLE-VALUE are left to `Schema::check_normalized_at`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NormalizedAttributes {
    attributes: Vec<CheckedAttribute>,
}

impl NormalizedAttributes {
    pub fn as_slice(&self) -> &[CheckedAttribute] {
        &self.attributes
    }

    pub fn into_vec(self) -> Vec<CheckedAttribute> {
        self.attributes
    }

    /// How many values all attributes hold.
    pub fn value_count(&self) -> usize {
        self.attributes
            .iter()
            .map(|attribute| attribute.values.len())
            .sum()
    }
}

/// Up to this many attributes a description is found by a scan; past it, through a map (an
/// entry may hold tens of thousands of descriptions, one option each: a scan per attribute
/// was quadratic).
const SCANNED_ATTRIBUTES_MAX: usize = 16;

/// Where each description is among the attributes gathered so far.
#[derive(Default)]
struct DescriptionPositions {
    /// Filled, and then kept up to date, once there are more than `SCANNED_ATTRIBUTES_MAX`.
    map: HashMap<AttributeDescription, usize>,
}

impl DescriptionPositions {
    /// The index of `description` in `checked` (whose descriptions are distinct and which
    /// only grows at its end).
    fn find(
        &mut self,
        checked: &[CheckedAttribute],
        description: &AttributeDescription,
    ) -> Option<usize> {
        if checked.len() <= SCANNED_ATTRIBUTES_MAX {
            return checked.iter().position(|existing| {
                count_comparison();
                existing.description == *description
            });
        }
        for (index, attribute) in checked.iter().enumerate().skip(self.map.len()) {
            self.map.insert(attribute.description.clone(), index);
        }
        count_comparison();
        self.map.get(description).copied()
    }
}

#[cfg(test)]
thread_local! {
    /// Description comparisons (a scan's or a map lookup's) on this thread, for tests.
    static COMPARISONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
fn count_comparison() {
    COMPARISONS.with(|count| count.set(count.get() + 1));
}

#[cfg(not(test))]
fn count_comparison() {}

fn violation(code: ResultCode, message: String) -> LdapError {
    LdapError::new(code, message)
}

impl Schema {
    /// Resolves and normalizes an entry's attributes, each value once, merging descriptions
    /// that are equal once canonical. Errors: undefinedAttributeType (unknown description),
    /// constraintViolation (an attribute without values), invalidAttributeSyntax (bad value).
    pub fn normalize_attributes(
        &self,
        attributes: &[Attribute],
    ) -> Result<NormalizedAttributes, LdapError> {
        let mut checked: Vec<CheckedAttribute> = Vec::with_capacity(attributes.len());
        let mut positions = DescriptionPositions::default();
        for attribute in attributes {
            let description = self.parse_description(&attribute.description)?;
            if attribute.values.is_empty() {
                return Err(violation(
                    ResultCode::ConstraintViolation,
                    format!("attribute '{}' has no values", attribute.description),
                ));
            }
            let index = match positions.find(&checked, &description) {
                Some(index) => index,
                None => {
                    checked.push(self.empty_attribute(description));
                    checked.len() - 1
                }
            };
            let target = &mut checked[index];
            for (value_index, value) in attribute.values.iter().enumerate() {
                let normalized = self
                    .normalize_value(target.description.attr, value)
                    .map_err(|error| {
                        violation(
                            error.code,
                            format!(
                                "{}: value #{value_index} invalid per syntax ({})",
                                target.description_string, error.message
                            ),
                        )
                    })?;
                target.values.push((value.clone(), normalized));
            }
        }
        Ok(NormalizedAttributes {
            attributes: checked,
        })
    }

    /// Attributes a store read back: their values were normalized (by this schema) when
    /// written and are taken as they are, never normalized again. The store also hands in
    /// values it normalized itself through `normalize_value` (a stand-in for values it leaves
    /// unread).
    pub fn stored_normalized(&self, attributes: Vec<CheckedAttribute>) -> NormalizedAttributes {
        NormalizedAttributes {
            attributes: attributes
                .into_iter()
                .filter(|attribute| !attribute.values.is_empty())
                .collect(),
        }
    }

    /// Replaces each value of `attr` for which `rewrite` gives a new original (a password
    /// hashed after the access check), normalizing only the new values.
    pub fn rewrite_normalized_values(
        &self,
        attributes: &mut NormalizedAttributes,
        attr: AttrId,
        rewrite: &mut dyn FnMut(&[u8]) -> Option<Vec<u8>>,
    ) -> Result<(), LdapError> {
        for attribute in &mut attributes.attributes {
            if attribute.description.attr != attr {
                continue;
            }
            for (original, normalized) in &mut attribute.values {
                if let Some(new) = rewrite(original) {
                    *normalized = self.normalize_value(attr, &new)?;
                    *original = new;
                }
            }
        }
        Ok(())
    }

    fn empty_attribute(&self, description: AttributeDescription) -> CheckedAttribute {
        CheckedAttribute {
            description_string: self.description_string(&description),
            description,
            values: Vec::new(),
        }
    }

    /// Applies one modification (RFC 4511 §4.6 semantics, RFC 4525 increment) to normalized
    /// attributes: only the request's values are normalized (and an increment's results);
    /// values already there are compared by their normalized form. With `permissive` (the
    /// permissive modify control, 1.2.840.113556.1.4.1413) adding a value the attribute holds
    /// skips that value, deleting a value or an attribute that is absent skips it, instead of
    /// attributeOrValueExists / noSuchAttribute; a value given twice in one request is still
    /// an error. Run `check_normalized_at` after all modifications.
    pub fn apply_normalized_modification(
        &self,
        attributes: &mut NormalizedAttributes,
        modification: &Modification,
        permissive: bool,
    ) -> Result<(), LdapError> {
        let description = self.parse_description(&modification.description)?;
        let list = &mut attributes.attributes;
        let position = list
            .iter()
            .position(|attribute| attribute.description == description);
        let change = Change {
            schema: self,
            name: self.description_string(&description),
            description,
            modification,
            permissive,
        };
        match modification.op {
            ModOp::Add => change.add(list, position),
            ModOp::Delete => change.delete(list, position),
            ModOp::Replace => change.replace(list, position),
            ModOp::Increment => change.increment(list, position),
        }
    }

    /// A view of normalized attributes for filter evaluation (ACL filters, the assertion
    /// control) of an entry not stored yet: nothing is normalized again, except the DN's
    /// values if a `:dn:` item asks for them.
    pub fn normalized_entry_view<'a>(
        &'a self,
        dn: &'a NormalizedDn,
        attributes: &'a NormalizedAttributes,
    ) -> NormalizedEntryView<'a> {
        NormalizedEntryView {
            schema: self,
            dn,
            attributes,
            entry_dn: self.attribute("entryDN"),
            dn_avas: OnceLock::new(),
        }
    }
}

/// One modification being applied to normalized attributes.
struct Change<'a> {
    schema: &'a Schema,
    description: AttributeDescription,
    name: String,
    modification: &'a Modification,
    permissive: bool,
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

impl Change<'_> {
    /// The request's values, each normalized once.
    fn normalized_values(&self, operation: &str) -> Result<Pairs, LdapError> {
        let name = &self.name;
        self.modification
            .values
            .iter()
            .enumerate()
            .map(|(index, value)| {
                let normalized = self
                    .schema
                    .normalize_value(self.description.attr, value)
                    .map_err(|error| {
                        violation(
                            error.code,
                            format!(
                                "modify/{operation}: {name}: value #{index} invalid per syntax"
                            ),
                        )
                    })?;
                Ok((value.clone(), normalized))
            })
            .collect()
    }

    fn add(
        self,
        list: &mut Vec<CheckedAttribute>,
        position: Option<usize>,
    ) -> Result<(), LdapError> {
        let name = &self.name;
        if self.modification.values.is_empty() {
            return Err(violation(
                ResultCode::ProtocolError,
                format!("modify/add: {name}: no values given"),
            ));
        }
        let new = self.normalized_values("add")?;
        let added = {
            let existing: HashSet<&[u8]> = position
                .map(|index| {
                    list[index]
                        .values
                        .iter()
                        .map(|(_, normalized)| normalized.as_slice())
                        .collect()
                })
                .unwrap_or_default();
            let mut given = HashSet::new();
            let mut added = Vec::with_capacity(new.len());
            for (index, (original, normalized)) in new.into_iter().enumerate() {
                let held = existing.contains(normalized.as_slice());
                if (held && !self.permissive) || !given.insert(normalized.clone()) {
                    return Err(violation(
                        ResultCode::AttributeOrValueExists,
                        format!("modify/add: {name}: value #{index} already exists"),
                    ));
                }
                if !held {
                    added.push((original, normalized));
                }
            }
            added
        };
        match position {
            Some(index) => list[index].values.extend(added),
            None if added.is_empty() => {}
            None => list.push(CheckedAttribute {
                values: added,
                ..self.schema.empty_attribute(self.description)
            }),
        }
        Ok(())
    }

    fn delete(
        self,
        list: &mut Vec<CheckedAttribute>,
        position: Option<usize>,
    ) -> Result<(), LdapError> {
        let name = &self.name;
        let Some(index) = position else {
            if self.permissive {
                return Ok(());
            }
            return Err(violation(
                ResultCode::NoSuchAttribute,
                format!("modify/delete: {name}: no such attribute"),
            ));
        };
        if self.modification.values.is_empty() {
            list.remove(index);
            return Ok(());
        }
        let to_delete = self.normalized_values("delete")?;
        let to_delete: HashSet<&[u8]> = {
            let existing: HashSet<&[u8]> = list[index]
                .values
                .iter()
                .map(|(_, normalized)| normalized.as_slice())
                .collect();
            for (value_index, (_, normalized)) in to_delete.iter().enumerate() {
                if !self.permissive && !existing.contains(normalized.as_slice()) {
                    return Err(violation(
                        ResultCode::NoSuchAttribute,
                        format!("modify/delete: {name}: value #{value_index} does not exist"),
                    ));
                }
            }
            to_delete
                .iter()
                .map(|(_, normalized)| normalized.as_slice())
                .collect()
        };
        list[index]
            .values
            .retain(|(_, normalized)| !to_delete.contains(normalized.as_slice()));
        if list[index].values.is_empty() {
            list.remove(index);
        }
        Ok(())
    }

    fn replace(
        self,
        list: &mut Vec<CheckedAttribute>,
        position: Option<usize>,
    ) -> Result<(), LdapError> {
        let name = &self.name;
        let values = self.normalized_values("replace")?;
        if let Some(index) = crate::check::first_duplicate(&values) {
            return Err(violation(
                ResultCode::AttributeOrValueExists,
                format!("modify/replace: {name}: value #{index} provided more than once"),
            ));
        }
        match (position, values.is_empty()) {
            (Some(index), true) => {
                list.remove(index);
            }
            (Some(index), false) => list[index].values = values,
            (None, true) => {}
            (None, false) => list.push(CheckedAttribute {
                values,
                ..self.schema.empty_attribute(self.description)
            }),
        }
        Ok(())
    }

    /// RFC 4525: each value plus the delta; the new values are normalized (once each).
    fn increment(
        self,
        list: &mut [CheckedAttribute],
        position: Option<usize>,
    ) -> Result<(), LdapError> {
        let name = &self.name;
        let attr = self.description.attr;
        let attribute_type = self.schema.attribute_type(attr);
        if attribute_type.equality != Some(crate::matching::MatchingRule::IntegerMatch) {
            return Err(violation(
                ResultCode::ConstraintViolation,
                format!("modify/increment: {name}: increment not supported for value syntax"),
            ));
        }
        let [delta] = self.modification.values.as_slice() else {
            return Err(violation(
                ResultCode::ProtocolError,
                format!("modify/increment: {name}: needs exactly one value"),
            ));
        };
        let Some(index) = position else {
            return Err(violation(
                ResultCode::NoSuchAttribute,
                format!("modify/increment: {name}: no such attribute"),
            ));
        };
        let parse = |value: &[u8]| -> Option<i128> {
            std::str::from_utf8(value).ok()?.trim().parse::<i128>().ok()
        };
        let delta = parse(delta).ok_or_else(|| {
            violation(
                ResultCode::InvalidAttributeSyntax,
                format!("modify/increment: {name}: delta is not an integer"),
            )
        })?;
        let mut incremented = Vec::with_capacity(list[index].values.len());
        for (value, _) in &list[index].values {
            let sum = parse(value)
                .and_then(|current| current.checked_add(delta))
                .ok_or_else(|| {
                    violation(
                        ResultCode::ConstraintViolation,
                        format!("modify/increment: {name}: value out of range"),
                    )
                })?;
            let original = sum.to_string().into_bytes();
            let normalized = self.schema.normalize_value(attr, &original)?;
            incremented.push((original, normalized));
        }
        list[index].values = incremented;
        Ok(())
    }
}

/// One AVA of a DN: (type, original value, normalized value).
type DnAva = (AttrId, Vec<u8>, Vec<u8>);

/// An `EntryView` over an entry about to be added (`Schema::normalized_entry_view`): its
/// normalized attributes as they are, plus the virtual `entryDN` from the normalized DN.
pub struct NormalizedEntryView<'a> {
    schema: &'a Schema,
    dn: &'a NormalizedDn,
    attributes: &'a NormalizedAttributes,
    entry_dn: Option<AttrId>,
    /// (type, original value, normalized value) of each AVA of the DN, normalized only when a
    /// `:dn:` item first asks.
    dn_avas: OnceLock<Vec<DnAva>>,
}

impl NormalizedEntryView<'_> {
    fn dn_avas(&self) -> &[DnAva] {
        self.dn_avas
            .get_or_init(|| self.schema.dn_avas(self.dn.dn()))
    }
}

impl EntryView for NormalizedEntryView<'_> {
    fn for_each_attribute(&self, visit: &mut AttributeVisitor<'_>) {
        for attribute in self.attributes.as_slice() {
            let mut values = attribute
                .values
                .iter()
                .map(|(original, normalized)| StoredValue {
                    original,
                    normalized,
                });
            if !visit(
                attribute.description.attr,
                &attribute.description.options,
                &mut values,
            ) {
                return;
            }
        }
        // entryDN is virtual (never stored) but filters may test it, as in OpenLDAP.
        let Some(entry_dn) = self.entry_dn else {
            return;
        };
        let stored = self
            .attributes
            .as_slice()
            .iter()
            .any(|attribute| attribute.description.attr == entry_dn);
        if !stored {
            let original = self.dn.dn().to_string();
            let mut value = std::iter::once(StoredValue {
                original: original.as_bytes(),
                normalized: self.dn.as_str().as_bytes(),
            });
            visit(entry_dn, &[], &mut value);
        }
    }

    fn for_each_dn_ava(&self, visit: &mut dyn FnMut(AttrId, StoredValue<'_>) -> bool) {
        crate::filter::visit_dn_avas(self.dn_avas(), visit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dn::Dn;
    use crate::filter::{Filter, Tri};
    use crate::normalized_dn::NormalizationCounts;

    fn attribute(description: &str, values: &[&str]) -> Attribute {
        Attribute {
            description: description.to_string(),
            values: values
                .iter()
                .map(|value| value.as_bytes().to_vec())
                .collect(),
        }
    }

    fn counted<T>(work: impl FnOnce() -> T) -> (T, NormalizationCounts) {
        crate::normalized_dn::normalizations_during(work)
    }

    #[test]
    fn many_descriptions_merge_with_linear_lookups() {
        let schema = Schema::builtin();
        let options = 25_000;
        // Each description twice (a value each), the second round in another case and order.
        let mut attributes: Vec<Attribute> = (0..options)
            .map(|index| attribute(&format!("description;x-{index}"), &["first"]))
            .collect();
        attributes.extend(
            (0..options)
                .rev()
                .map(|index| attribute(&format!("DESCRIPTION;X-{index}"), &["second"])),
        );
        attributes.push(attribute("cn", &["A"]));
        let before = COMPARISONS.with(std::cell::Cell::get);
        let normalized = schema.normalize_attributes(&attributes).unwrap();
        let comparisons = COMPARISONS.with(std::cell::Cell::get) - before;
        assert_eq!(normalized.as_slice().len(), options + 1);
        assert_eq!(normalized.value_count(), 2 * options + 1);
        let last = &normalized.as_slice()[options - 1];
        assert_eq!(
            last.description_string,
            format!("description;x-{}", options - 1)
        );
        assert_eq!(last.values.len(), 2);
        // One lookup per attribute past the first few scans (a scan each was 600 million).
        let bound = (attributes.len() + SCANNED_ATTRIBUTES_MAX * SCANNED_ATTRIBUTES_MAX) as u64;
        assert!(comparisons <= bound, "{comparisons} comparisons");
    }

    #[test]
    fn a_modification_normalizes_only_its_own_values() {
        let schema = Schema::builtin();
        let many: Vec<String> = (0..50).map(|index| format!("Value {index}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let mut attributes = schema
            .normalize_attributes(&[attribute("description", &many), attribute("CN", &["A"])])
            .unwrap();
        let modification = Modification {
            op: ModOp::Delete,
            description: "Description".to_string(),
            values: vec![b"VALUE 3".to_vec(), b"value 4".to_vec()],
        };
        let (result, counts) =
            counted(|| schema.apply_normalized_modification(&mut attributes, &modification, false));
        result.unwrap();
        assert_eq!(counts.values, 2, "the request's values only");
        assert_eq!(attributes.value_count(), 49);
        let absent = Modification {
            values: vec![b"value 3".to_vec()],
            ..modification
        };
        let error = schema
            .apply_normalized_modification(&mut attributes, &absent, false)
            .unwrap_err();
        assert_eq!(error.code, ResultCode::NoSuchAttribute);
        schema
            .apply_normalized_modification(&mut attributes, &absent, true)
            .unwrap();
    }

    #[test]
    fn the_view_of_normalized_attributes_evaluates_without_normalizing_again() {
        let schema = Schema::builtin();
        let dn = schema
            .normalized_dn(Dn::parse("cn=Babs Jensen,ou=People,dc=Example,dc=com").unwrap())
            .unwrap();
        let attributes = schema
            .normalize_attributes(&[
                attribute("objectClass", &["person"]),
                attribute("cn", &["Babs Jensen"]),
                attribute("sn", &["Jensen"]),
            ])
            .unwrap();
        let view = schema.normalized_entry_view(&dn, &attributes);
        let test = |text: &str| {
            let filter = Filter::parse(text, 32).unwrap();
            schema.prepare_filter(&filter).evaluate(&view)
        };
        let (results, counts) = counted(|| {
            [
                test("(cn=babs jensen)"),
                test("(entryDN=CN=Babs Jensen,OU=people,DC=example,DC=com)"),
                test("(sn=smith)"),
            ]
        });
        assert_eq!(results, [Tri::True, Tri::True, Tri::False]);
        assert_eq!(
            counts.values, 0,
            "stored values and entryDN are read as they are"
        );
        // A `:dn:` item asks for the DN's values: normalized then, once.
        let (result, counts) = counted(|| test("(ou:dn:=people)"));
        assert_eq!(result, Tri::True);
        assert_eq!(counts.values, 4, "the DN's four values");
        let (_, counts) = counted(|| test("(dc:dn:=example)"));
        assert_eq!(counts.values, 0, "kept");
    }
}
