//! Per-attribute change state, kept with each entry on a replicating lmdir node (as 389-DS's
//! state information): for every attribute description a local modify changed, the CSN of
//! that change and the CSN of the change it replaced as this node saw it. lmdir
//! multi-provider nodes exchange it (the operational attribute `lmdirAttributeCSN`, returned
//! only when asked for by name, never by `+`) and merge concurrent changes of one entry per
//! attribute; slapd never asks for it, and its entries are resolved per entry as before.

use std::collections::BTreeMap;

use lmdir_schema::{LdapError, Modification, Schema};
use lmdir_sync::Csn;

use crate::write::WorkingAttribute;

/// The operational attribute holding the state (one value per changed description).
pub const ATTRIBUTE_STATE: &str = "lmdirAttributeCSN";

/// One value of `lmdirAttributeCSN`: `<description> <csn> <base csn or ->`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeState {
    /// Canonical: primary type name and sorted options, lowercased (`title`, `cn;lang-en`).
    pub description: String,
    /// The CSN of the last change of this description.
    pub csn: Csn,
    /// The CSN of the change it replaced as the writing node saw it; None: the value the
    /// entry was added with.
    pub base: Option<Csn>,
}

impl AttributeState {
    pub fn parse(value: &[u8]) -> Option<AttributeState> {
        let text = std::str::from_utf8(value).ok()?;
        let mut parts = text.split(' ');
        let description = parts.next()?.to_string();
        let csn = Csn::parse(parts.next()?.as_bytes()).ok()?;
        let base = match parts.next()? {
            "-" => None,
            base => Some(Csn::parse(base.as_bytes()).ok()?),
        };
        (parts.next().is_none() && !description.is_empty()).then_some(AttributeState {
            description,
            csn,
            base,
        })
    }

    pub fn to_value(&self) -> String {
        let base = self
            .base
            .map_or_else(|| "-".to_string(), |csn| csn.to_string());
        format!("{} {} {base}", self.description, self.csn)
    }
}

/// The canonical state key of an attribute description (None: a type the schema lacks).
pub fn state_key(schema: &Schema, description: &str) -> Option<String> {
    let parsed = schema.parse_description(description).ok()?;
    let mut options: Vec<String> = parsed
        .options
        .iter()
        .map(|option| option.to_ascii_lowercase())
        .collect();
    options.sort();
    let mut key = schema
        .attribute_type(parsed.attr)
        .name()
        .to_ascii_lowercase();
    for option in options {
        key.push(';');
        key.push_str(&option);
    }
    Some(key)
}

/// The state values of an entry's attributes, by key (unparsable values are dropped).
pub fn states_of<'v>(values: impl Iterator<Item = &'v [u8]>) -> BTreeMap<String, AttributeState> {
    values
        .filter_map(AttributeState::parse)
        .map(|state| (state.description.clone(), state))
        .collect()
}

impl crate::WriteTxn<'_> {
    /// After a modify stamped (`stamped`: its CSN, None for a provider's change applied
    /// here): on a replicating node, records the descriptions `modifications` touched
    /// (`record_attribute_states`), whichever way the modify went (general or point), so that
    /// multi-provider peers merge concurrent changes per attribute.
    pub(crate) fn record_local_change_states(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        modifications: &[Modification],
        stamped: Option<Csn>,
    ) -> Result<(), LdapError> {
        let replicating = crate::lock::lock(&self.inner.csns).sid != 0;
        match stamped.filter(|_| replicating) {
            Some(csn) => self.record_attribute_states(attributes, modifications, csn),
            None => Ok(()),
        }
    }

    /// After a local modify stamped `csn`: records it as the last change of every description
    /// `modifications` touched, each with the CSN it replaced.
    fn record_attribute_states(
        &self,
        attributes: &mut Vec<WorkingAttribute>,
        modifications: &[Modification],
        csn: Csn,
    ) -> Result<(), LdapError> {
        let schema = &self.inner.schema();
        let Some(state_attr) = schema.attribute(ATTRIBUTE_STATE) else {
            return Ok(());
        };
        let position = attributes
            .iter()
            .position(|attribute| attribute.attr == state_attr);
        let mut states = match position {
            Some(index) => states_of(
                attributes[index]
                    .values
                    .iter()
                    .map(|(original, _)| original.as_slice()),
            ),
            None => BTreeMap::new(),
        };
        for modification in modifications {
            let Some(key) = state_key(schema, &modification.description) else {
                continue;
            };
            let base = states.get(&key).map(|state| state.csn);
            states.insert(
                key.clone(),
                AttributeState {
                    description: key,
                    csn,
                    base,
                },
            );
        }
        let mut values = Vec::with_capacity(states.len());
        for state in states.values() {
            let value = state.to_value().into_bytes();
            let normalized = schema.normalize_value(state_attr, &value)?;
            values.push((value, normalized));
        }
        match position {
            Some(index) => attributes[index].values = values,
            None => attributes.push(WorkingAttribute {
                text: schema.attribute_type(state_attr).name().to_string(),
                attr: state_attr,
                options: Vec::new(),
                values,
            }),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_value_round_trips_and_junk_is_refused() {
        let csn = Csn::parse(b"20261128042500.123456Z#000000#001#000000").unwrap();
        let base = Csn::parse(b"20261128042400.000000Z#000000#002#000000").unwrap();
        for state in [
            AttributeState {
                description: "title".into(),
                csn,
                base: Some(base),
            },
            AttributeState {
                description: "cn;lang-en".into(),
                csn,
                base: None,
            },
        ] {
            assert_eq!(
                AttributeState::parse(state.to_value().as_bytes()),
                Some(state)
            );
        }
        assert_eq!(AttributeState::parse(b"title"), None);
        assert_eq!(AttributeState::parse(b"title notacsn -"), None);
        assert_eq!(
            AttributeState::parse(b"title 20261128042500.123456Z#000000#001#000000 - x"),
            None
        );
    }
}
