//! Per-attribute merge of one entry changed on two multi-provider nodes (issue 23 item 1).
//! Each lmdir node keeps, per attribute description a local modify changed, the CSN of that
//! change and of the change it replaced (`lmdirAttributeCSN`, lmdir-store's
//! `attribute_state`). When a provider's version of an entry meets the local one, every
//! description takes the values of the side whose change of it is later: changes of
//! different attributes both survive, and a change is lost only to a later change of the same
//! attribute. That loss is a conflict when the winner's writer had not seen the loser's
//! change (the loser's CSN is newer than the base the winner replaced): it is returned, to be
//! counted and logged with both CSNs. Pure: no I/O.

use lmdir_schema::{Attribute, Entry, Schema};
use lmdir_store::attribute_state::{state_key, states_of, AttributeState, ATTRIBUTE_STATE};
use lmdir_sync::Csn;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Attributes that describe the entry's last change as a whole: they follow the side with
/// the later entryCSN, not a description's state.
const ENTRY_LEVEL: [&str; 4] = [
    "entryCSN",
    "modifyTimestamp",
    "modifiersName",
    ATTRIBUTE_STATE,
];

/// A same-attribute change discarded by the merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub description: String,
    pub kept: Csn,
    pub discarded: Csn,
}

/// The merged entry and the conflicts it settled.
#[derive(Debug)]
pub(crate) struct Merged {
    pub entry: Entry,
    pub conflicts: Vec<Conflict>,
}

/// Whether a provider's entry carries per-attribute state (an lmdir node's modified entry).
pub(crate) fn has_state(entry: &Entry) -> bool {
    entry
        .attributes
        .iter()
        .any(|attribute| attribute.description.eq_ignore_ascii_case(ATTRIBUTE_STATE))
}

fn entry_csn(entry: &Entry) -> Option<Csn> {
    values_named(entry, "entryCSN").find_map(|value| Csn::parse(value).ok())
}

fn values_named<'e>(entry: &'e Entry, name: &'e str) -> impl Iterator<Item = &'e [u8]> {
    entry
        .attributes
        .iter()
        .filter(move |attribute| attribute.description.eq_ignore_ascii_case(name))
        .flat_map(|attribute| attribute.values.iter().map(Vec::as_slice))
}

/// An entry's attributes other than the entry-level ones, by state key, values sorted (for
/// comparing the two sides' contents of one key).
fn by_key(schema: &Schema, entry: &Entry) -> BTreeMap<String, Vec<Attribute>> {
    let mut grouped: BTreeMap<String, Vec<Attribute>> = BTreeMap::new();
    for attribute in &entry.attributes {
        let entry_level = ENTRY_LEVEL
            .iter()
            .any(|name| attribute.description.eq_ignore_ascii_case(name));
        if entry_level {
            continue;
        }
        let key = state_key(schema, &attribute.description)
            .unwrap_or_else(|| attribute.description.to_ascii_lowercase());
        grouped.entry(key).or_default().push(attribute.clone());
    }
    grouped
}

fn contents(attributes: Option<&Vec<Attribute>>) -> BTreeSet<Vec<u8>> {
    attributes
        .into_iter()
        .flatten()
        .flat_map(|attribute| attribute.values.iter().cloned())
        .collect()
}

/// Which side's change of one description is later; ties (the same change, or neither side
/// changed it since the add) go by the entryCSN.
fn incoming_wins(
    incoming: Option<&AttributeState>,
    local: Option<&AttributeState>,
    incoming_entry_later: bool,
) -> bool {
    match (incoming, local) {
        (Some(incoming), Some(local)) => incoming.csn > local.csn,
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => incoming_entry_later,
    }
}

/// The discarded change when the winner's writer had not seen it (its base is older).
fn conflict(key: &str, winner: &AttributeState, loser: &AttributeState) -> Option<Conflict> {
    let unseen = winner.base.is_none_or(|base| base < loser.csn);
    (unseen && winner.csn != loser.csn).then(|| Conflict {
        description: key.to_string(),
        kept: winner.csn,
        discarded: loser.csn,
    })
}

/// Merges `incoming` (a provider's version, with its state) into `local` per description.
pub(crate) fn merge(schema: &Schema, local: &Entry, incoming: &Entry) -> Merged {
    let local_states = states_of(values_named(local, ATTRIBUTE_STATE));
    let incoming_states = states_of(values_named(incoming, ATTRIBUTE_STATE));
    let incoming_entry_later = match (entry_csn(incoming), entry_csn(local)) {
        (Some(incoming), Some(local)) => incoming > local,
        (incoming, local) => incoming.is_some() || local.is_none(),
    };
    let local_groups = by_key(schema, local);
    let incoming_groups = by_key(schema, incoming);
    let keys: BTreeSet<&String> = local_groups.keys().chain(incoming_groups.keys()).collect();
    let mut merged = Entry::new(incoming.dn.clone());
    let mut states: Vec<AttributeState> = Vec::new();
    let mut conflicts = Vec::new();
    for key in keys {
        let (incoming_state, local_state) = (incoming_states.get(key), local_states.get(key));
        let from_incoming = incoming_wins(incoming_state, local_state, incoming_entry_later);
        let (winner, loser, groups) = match from_incoming {
            true => (incoming_state, local_state, &incoming_groups),
            false => (local_state, incoming_state, &local_groups),
        };
        let differ = contents(local_groups.get(key)) != contents(incoming_groups.get(key));
        if let (Some(winner), Some(loser), true) = (winner, loser, differ) {
            conflicts.extend(conflict(key, winner, loser));
        }
        states.extend(winner.cloned());
        merged
            .attributes
            .extend(groups.get(key).into_iter().flatten().cloned());
    }
    let newer = if incoming_entry_later {
        incoming
    } else {
        local
    };
    for name in &ENTRY_LEVEL[..3] {
        let values: Vec<Vec<u8>> = values_named(newer, name).map(<[u8]>::to_vec).collect();
        if !values.is_empty() {
            merged.add_values(name, values);
        }
    }
    if !states.is_empty() {
        merged.add_values(
            ATTRIBUTE_STATE,
            states.iter().map(|state| state.to_value().into_bytes()),
        );
    }
    Merged {
        entry: merged,
        conflicts,
    }
}

/// Whether two versions of an entry hold the same data (the entry-level change attributes
/// aside): when the merge kept something of this node's that the provider's version lacks,
/// the result is a change of this node's, which the provider has yet to receive.
pub(crate) fn same_data(schema: &Schema, one: &Entry, other: &Entry) -> bool {
    let flat = |entry: &Entry| -> BTreeMap<String, BTreeSet<Vec<u8>>> {
        by_key(schema, entry)
            .into_iter()
            .map(|(key, attributes)| (key, contents(Some(&attributes))))
            .collect()
    };
    flat(one) == flat(other)
}

/// Gives the merged entry a CSN of this node's (a provider sends what is newer than its
/// consumer's cookie per server ID: the other node's CSN alone would hide this node's part).
pub(crate) fn set_entry_csn(entry: &mut Entry, csn: Csn) {
    entry
        .attributes
        .retain(|attribute| !attribute.description.eq_ignore_ascii_case("entryCSN"));
    entry.add_values("entryCSN", [csn.to_string().into_bytes()]);
}

/// The entry without its memberOf descriptions (by any name, with any options); borrowed
/// when it has none.
pub(crate) fn without_memberof<'e>(schema: &Schema, entry: &'e Entry) -> Cow<'e, Entry> {
    let Some(memberof) = schema.attribute("memberOf") else {
        return Cow::Borrowed(entry);
    };
    let is_memberof = |attribute: &Attribute| {
        schema
            .parse_description(&attribute.description)
            .is_ok_and(|description| description.attr == memberof)
    };
    if !entry.attributes.iter().any(is_memberof) {
        return Cow::Borrowed(entry);
    }
    let mut kept = Entry::new(entry.dn.clone());
    kept.attributes = entry
        .attributes
        .iter()
        .filter(|attribute| !is_memberof(attribute))
        .cloned()
        .collect();
    Cow::Owned(kept)
}

/// Whether two versions of an entry hold the same values under every description.
pub(crate) fn same_content(schema: &Schema, one: &Entry, other: &Entry) -> bool {
    let sorted = |entry: &Entry| -> BTreeMap<String, BTreeSet<Vec<u8>>> {
        let mut all: BTreeMap<String, BTreeSet<Vec<u8>>> = BTreeMap::new();
        for attribute in &entry.attributes {
            let key = state_key(schema, &attribute.description)
                .unwrap_or_else(|| attribute.description.to_ascii_lowercase());
            all.entry(key)
                .or_default()
                .extend(attribute.values.iter().cloned());
        }
        all
    };
    sorted(one) == sorted(other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lmdir_schema::Dn;

    const BASE: &str = "20261128040000.000000Z#000000#000#000000";
    const ONE: &str = "20261128041000.000000Z#000000#001#000000";
    const TWO: &str = "20261128042000.000000Z#000000#002#000000";

    fn entry(pairs: &[(&str, &str)]) -> Entry {
        let mut entry = Entry::new(Dn::parse("uid=a,dc=example,dc=com").unwrap());
        for (name, value) in pairs {
            entry.add_values(name, [value.as_bytes().to_vec()]);
        }
        entry
    }

    fn state(description: &str, csn: &str, base: Option<&str>) -> String {
        let csn = Csn::parse(csn.as_bytes()).unwrap();
        let base = base.map(|base| Csn::parse(base.as_bytes()).unwrap());
        AttributeState {
            description: description.into(),
            csn,
            base,
        }
        .to_value()
    }

    fn value<'e>(entry: &'e Entry, name: &'e str) -> Vec<&'e [u8]> {
        values_named(entry, name).collect()
    }

    #[test]
    fn changes_of_different_attributes_both_survive_on_either_side() {
        let schema = Schema::builtin();
        let title = state("title", ONE, None);
        let description = state("description", TWO, None);
        let one = entry(&[
            ("uid", "a"),
            ("title", "Boss"),
            ("description", "old"),
            ("entryCSN", ONE),
            (ATTRIBUTE_STATE, &title),
        ]);
        let two = entry(&[
            ("uid", "a"),
            ("title", "Clerk"),
            ("description", "new"),
            ("entryCSN", TWO),
            (ATTRIBUTE_STATE, &description),
        ]);
        for (local, incoming) in [(&one, &two), (&two, &one)] {
            let merged = merge(&schema, local, incoming);
            assert_eq!(merged.conflicts, Vec::new());
            assert_eq!(value(&merged.entry, "title"), [b"Boss".as_slice()]);
            assert_eq!(value(&merged.entry, "description"), [b"new".as_slice()]);
            assert_eq!(value(&merged.entry, "entryCSN"), [TWO.as_bytes()]);
            assert_eq!(value(&merged.entry, ATTRIBUTE_STATE).len(), 2);
        }
        let once = merge(&schema, &one, &two).entry;
        assert!(same_content(
            &schema,
            &once,
            &merge(&schema, &two, &one).entry
        ));
    }

    #[test]
    fn a_same_attribute_conflict_keeps_the_later_csn_and_is_reported_on_both_sides() {
        let schema = Schema::builtin();
        let one = entry(&[
            ("title", "Boss"),
            ("entryCSN", ONE),
            (ATTRIBUTE_STATE, &state("title", ONE, Some(BASE))),
        ]);
        let two = entry(&[
            ("title", "Clerk"),
            ("entryCSN", TWO),
            (ATTRIBUTE_STATE, &state("title", TWO, Some(BASE))),
        ]);
        let expected = Conflict {
            description: "title".into(),
            kept: Csn::parse(TWO.as_bytes()).unwrap(),
            discarded: Csn::parse(ONE.as_bytes()).unwrap(),
        };
        for (local, incoming) in [(&one, &two), (&two, &one)] {
            let merged = merge(&schema, local, incoming);
            assert_eq!(value(&merged.entry, "title"), [b"Clerk".as_slice()]);
            assert_eq!(merged.conflicts, vec![expected.clone()]);
        }
        // A change made after seeing the other (its base is the other's CSN) is no conflict.
        let seen = entry(&[
            ("title", "Clerk"),
            ("entryCSN", TWO),
            (ATTRIBUTE_STATE, &state("title", TWO, Some(ONE))),
        ]);
        assert_eq!(merge(&schema, &one, &seen).conflicts, Vec::new());
        assert_eq!(merge(&schema, &seen, &one).conflicts, Vec::new());
    }
}
