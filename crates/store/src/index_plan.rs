//! The configured indexes in a fixed numbering (`IndexPlan`) and every index key of one value,
//! through `layout`'s key functions. A leaf: the store's index set holds a plan, the row encoder
//! and the writers use it (their entry-level key walks are in `rows.rs`).

use std::collections::HashMap;

use lmdir_schema::{AttrId, MatchingRule, Schema};

use crate::layout::{self, IndexKinds};

/// Where index keys go: `(slot, key without chunk)`; an error stops the walk.
pub type KeySink<'a, E> = dyn FnMut(u16, &[u8]) -> Result<(), E> + 'a;

/// One indexed attribute type: its slot (a dense number the bulk writer names index DBs by),
/// kinds and ordering rule.
#[derive(Debug, Clone, Copy)]
pub struct IndexedAttribute {
    pub slot: u16,
    pub kinds: IndexKinds,
    pub(crate) ordering: Option<MatchingRule>,
}

/// The configured indexes in a fixed numbering (slots ascend with the attribute's ID).
#[derive(Debug, Default)]
pub struct IndexPlan {
    /// By attribute ID (IDs are dense indexes into the schema): no hashing per value.
    by_attr: Vec<Option<IndexedAttribute>>,
    attrs: Vec<AttrId>,
}

impl IndexPlan {
    pub(crate) fn new(schema: &Schema, configured: &HashMap<AttrId, IndexKinds>) -> IndexPlan {
        let mut attrs: Vec<AttrId> = configured
            .iter()
            .filter(|(_, kinds)| !kinds.is_empty())
            .map(|(attr, _)| *attr)
            .collect();
        attrs.sort_unstable();
        let mut by_attr = vec![None; attrs.last().map_or(0, |last| *last as usize + 1)];
        for (slot, attr) in attrs.iter().enumerate() {
            by_attr[*attr as usize] = Some(IndexedAttribute {
                slot: u16::try_from(slot).expect("fewer than 65,536 index DBs"),
                kinds: configured[attr],
                ordering: schema.attribute_type(*attr).ordering,
            });
        }
        IndexPlan { by_attr, attrs }
    }

    pub fn get(&self, attr: AttrId) -> Option<&IndexedAttribute> {
        self.by_attr.get(attr as usize).and_then(Option::as_ref)
    }

    /// The attribute of each slot.
    pub fn attrs(&self) -> &[AttrId] {
        &self.attrs
    }

    /// Every index key of one stored value of `attr` (none when it is not indexed), as
    /// `emit(slot, key)`.
    pub fn value_keys<E>(
        &self,
        attr: AttrId,
        normalized: &[u8],
        emit: &mut KeySink<'_, E>,
    ) -> Result<(), E> {
        let Some(indexed) = self.get(attr) else {
            return Ok(());
        };
        let ordering_key = match indexed.ordering {
            Some(rule) if indexed.kinds.contains(IndexKinds::ORDERED) => {
                Some(rule.ordering_key(normalized))
            }
            _ => None,
        };
        layout::index_keys_for_value(
            indexed.kinds,
            normalized,
            ordering_key.as_deref(),
            &mut |key| emit(indexed.slot, key),
        )
    }
}
