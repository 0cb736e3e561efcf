//! Parents before children: the order every multi-entry output uses.
//!
//! IDs are handed out in insertion order, so a parent normally has a lower ID than its
//! children and ID order is already parents-first. Two things break that: a bulk load of an
//! LDIF listing children before their parents (IDs are file positions), and a modrdn with
//! newSuperior moving an older entry under a newer one. Such an *inverted link* (a node whose
//! parent has the higher ID) is recorded in `meta` as `inv:` ‖ parent ‖ child (u32 BE each),
//! by the one write path and by the loader; while none is recorded, searches run in plain ID
//! order at no extra cost.
//!
//! With inverted links, outputs are ordered by a `TreePosition`: the highest ID on the path
//! from the top entry down to the entry (`top`), then depth, then ID. A parent's `top` is never
//! above its child's, and when equal the parent is shallower, so parents come first; without
//! inversions `top` is the entry's own ID and the order is ID order. A position is computed
//! from the entry's parent chain alone, so a paged search can resume from one.

use std::collections::HashMap;

use lmdir_schema::LdapError;
use roaring::RoaringBitmap;

use crate::error::lmdb_to_ldap;
use crate::inversions::{inversion_key, META_INVERSIONS_TRACKED, META_INVERSION_PREFIX};
use crate::layout::{self, EntryId, ROOT_PARENT_ID};
use crate::read::{corrupt, read_node, subtree_ids, ReadTxn, TREE_DEPTH_MAX};
use crate::store::Inner;

/// Every inverted link of this snapshot as (parent, child), by a scan of the tree (for check).
fn scan_inversions(read: &ReadTxn) -> Result<Vec<(EntryId, EntryId)>, LdapError> {
    let mut inverted = Vec::new();
    for row in read
        .inner
        .databases
        .id2node
        .iter(read.txn())
        .map_err(lmdb_to_ldap)?
    {
        let (key, value) = row.map_err(lmdb_to_ldap)?;
        let id = layout::decode_id(key).ok_or_else(|| corrupt("id2node key"))?;
        let node = layout::decode_node(value).ok_or_else(|| corrupt("id2node value"))?;
        if node.parent > id {
            inverted.push((node.parent, id));
        }
    }
    Ok(inverted)
}

/// Differences between the recorded inverted links and the tree (for `check`): a missing
/// record would let a search list a child before its parent.
pub(crate) fn check_inversions(read: &ReadTxn) -> Result<Vec<String>, LdapError> {
    if !read.inversions_tracked()? {
        return Ok(Vec::new());
    }
    let actual: std::collections::BTreeSet<_> = scan_inversions(read)?.into_iter().collect();
    let recorded: std::collections::BTreeSet<_> =
        recorded_inversions(read, 0)?.into_iter().collect();
    let missing = actual.difference(&recorded).map(|(parent, child)| {
        format!("meta: entry {child} has parent {parent} (a higher ID) but no inverted-link record")
    });
    let stale = recorded.difference(&actual).map(|(parent, child)| {
        format!("meta: inverted-link record {parent} -> {child} does not match the tree")
    });
    Ok(missing.chain(stale).collect())
}

/// The recorded inverted links as (parent, child), parent at least `parent_from`.
pub(crate) fn recorded_inversions(
    read: &ReadTxn,
    parent_from: EntryId,
) -> Result<Vec<(EntryId, EntryId)>, LdapError> {
    let meta = read.inner.databases.meta;
    let start = inversion_key(parent_from, 0);
    let mut end = META_INVERSION_PREFIX.to_vec();
    end.push(0xFF);
    let bounds = (
        std::ops::Bound::Included(&start[..]),
        std::ops::Bound::Excluded(&end[..]),
    );
    let mut links = Vec::new();
    for row in meta.range(read.txn(), &bounds).map_err(lmdb_to_ldap)? {
        let (key, _) = row.map_err(lmdb_to_ldap)?;
        let ids = &key[META_INVERSION_PREFIX.len()..];
        match (
            ids.get(0..4).and_then(layout::decode_id),
            ids.get(4..8).and_then(layout::decode_id),
        ) {
            (Some(parent), Some(child)) if ids.len() == 8 => links.push((parent, child)),
            _ => return Err(corrupt("meta inverted-link key")),
        }
    }
    Ok(links)
}

impl ReadTxn {
    /// Whether ID order may put a child before its parent in this snapshot: some inverted
    /// link is recorded, or the DB predates the record (then every output is ordered).
    pub fn has_inverted_links(&self) -> Result<bool, LdapError> {
        let snapshot = self.snapshot_id();
        if let Some(known) = self.inner.inverted_links_known.get(snapshot) {
            return Ok(known);
        }
        let answer = self.read_has_inverted_links()?;
        self.inner.inverted_links_known.set(snapshot, answer);
        Ok(answer)
    }

    /// Whether this snapshot may hold a glue entry (`objectClass: glue`, a partial replica's
    /// placeholder, which searches skip without ManageDsaIT). Known once per snapshot, so
    /// searches test their entries for glue only where some exist.
    pub fn may_hold_glue(&self) -> Result<bool, LdapError> {
        self.may_hold_class(&self.inner.glue_known, lmdir_schema::GLUE_CLASS_VALUES)
    }

    /// Whether this snapshot may hold an alias entry (`objectClass: alias`). Known once per
    /// snapshot, so a search asking to dereference aliases (JNDI's default) pays for it only
    /// where some exist.
    pub fn may_hold_aliases(&self) -> Result<bool, LdapError> {
        self.may_hold_class(&self.inner.aliases_known, lmdir_schema::ALIAS_CLASS_VALUES)
    }

    /// Whether this snapshot may hold a subentry (`objectClass: subentry`, RFC 3672), which
    /// searches return only as the Subentries control asks. Known once per snapshot, so
    /// searches test their entries for it only where some exist.
    pub fn may_hold_subentries(&self) -> Result<bool, LdapError> {
        self.may_hold_class(
            &self.inner.subentries_known,
            lmdir_schema::SUBENTRY_CLASS_VALUES,
        )
    }

    /// Whether the objectClass equality index has a posting under one of `values` (a class's
    /// name and OID, normalized), or objectClass is not so indexed (then any entry may be of
    /// the class); the answer is kept in `known` for this snapshot.
    fn may_hold_class(
        &self,
        known: &crate::inversions::SnapshotAnswer,
        values: [&str; 2],
    ) -> Result<bool, LdapError> {
        let snapshot = self.snapshot_id();
        if let Some(answer) = known.get(snapshot) {
            return Ok(answer);
        }
        let schema = self.schema();
        let mut answer = false;
        for value in values {
            let filter = schema.prepare_filter(&lmdir_schema::Filter::Equality {
                description: "objectClass".to_string(),
                value: value.as_bytes().to_vec(),
            });
            match self.filter_candidates(&filter)? {
                Some(candidates) if candidates.is_empty() => {}
                _ => answer = true,
            }
        }
        known.set(snapshot, answer);
        Ok(answer)
    }

    fn read_has_inverted_links(&self) -> Result<bool, LdapError> {
        let meta = self.inner.databases.meta;
        if meta
            .get(self.txn(), META_INVERSIONS_TRACKED)
            .map_err(lmdb_to_ldap)?
            .is_none()
        {
            return Ok(true);
        }
        Ok(meta
            .prefix_iter(self.txn(), META_INVERSION_PREFIX)
            .map_err(lmdb_to_ldap)?
            .next()
            .is_some())
    }

    /// Whether the DB records its inverted links (false only for a read-only open of a DB no
    /// read-write open has touched since the record was introduced).
    pub(crate) fn inversions_tracked(&self) -> Result<bool, LdapError> {
        Ok(self
            .inner
            .databases
            .meta
            .get(self.txn(), META_INVERSIONS_TRACKED)
            .map_err(lmdb_to_ldap)?
            .is_some())
    }
}

/// Where an entry stands in parents-first output order (see the module comment). Ordered
/// field by field; a paged search resumes from the position of the first entry not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TreePosition {
    /// The highest ID among the entry and its ancestors.
    pub top: EntryId,
    /// RDNs below the top-level entry.
    pub depth: u32,
    pub id: EntryId,
}

impl TreePosition {
    /// Bytes of `to_bytes`.
    pub const BYTES: usize = 12;

    /// The position of `id` in a store without inverted links (plain ID order).
    pub fn in_id_order(id: EntryId) -> TreePosition {
        TreePosition {
            top: id,
            depth: 0,
            id,
        }
    }

    pub fn to_bytes(self) -> [u8; Self::BYTES] {
        let mut bytes = [0u8; Self::BYTES];
        bytes[0..4].copy_from_slice(&self.top.to_be_bytes());
        bytes[4..8].copy_from_slice(&self.depth.to_be_bytes());
        bytes[8..12].copy_from_slice(&self.id.to_be_bytes());
        bytes
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<TreePosition> {
        let word = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
        (bytes.len() == Self::BYTES).then_some(())?;
        Some(TreePosition {
            top: word(0)?,
            depth: word(4)?,
            id: word(8)?,
        })
    }
}

/// Interior nodes whose (top, depth) a search remembers: candidates share few parents, so
/// each costs one node read; cleared when full, so a search's memory stays bounded.
const POSITION_MEMO_ENTRIES_MAX: usize = 65_536;

/// Computes positions through the parent chain, remembering interior nodes.
#[derive(Default)]
pub(crate) struct PositionFinder {
    memo: HashMap<EntryId, (EntryId, u32)>,
}

impl PositionFinder {
    /// The position of `id`, or None when it has no node (deleted, or a damaged index).
    pub(crate) fn position(
        &mut self,
        inner: &Inner,
        txn: &heed::RoTxn,
        id: EntryId,
    ) -> Result<Option<TreePosition>, LdapError> {
        // Walk up to the first remembered ancestor (or the top), then fill in downwards.
        let mut chain = Vec::new();
        let mut current = id;
        let mut known: Option<(EntryId, u32)> = None;
        loop {
            if chain.len() > TREE_DEPTH_MAX {
                return Err(corrupt(format!(
                    "entry {id}: parent chain deeper than {TREE_DEPTH_MAX}"
                )));
            }
            let Some(node) = read_node(inner, txn, current)? else {
                if current == id {
                    return Ok(None);
                }
                return Err(corrupt(format!("entry {current} has no id2node row")));
            };
            chain.push(current);
            if node.parent == ROOT_PARENT_ID {
                break;
            }
            if let Some(&parent_position) = self.memo.get(&node.parent) {
                known = Some(parent_position);
                break;
            }
            current = node.parent;
        }
        if self.memo.len() + chain.len() > POSITION_MEMO_ENTRIES_MAX {
            self.memo.clear();
        }
        let mut position = known;
        for (index, &node) in chain.iter().enumerate().rev() {
            let here = match position {
                None => (node, 0),
                Some((top, depth)) => (top.max(node), depth + 1),
            };
            // The candidate itself is rarely asked again; its ancestors are.
            if index > 0 {
                self.memo.insert(node, here);
            }
            position = Some(here);
        }
        let (top, depth) = position.expect("the chain holds at least the entry itself");
        Ok(Some(TreePosition { top, depth, id }))
    }
}

/// The IDs up to `position.top` that may still come at or after `position`: only entries
/// below an inverted link whose parent is at least `top` can have a `top` that high with a
/// lower ID of their own (on the path down from that ancestor, IDs must drop below `top`
/// somewhere, and that step is such a link). Everything else up to `top` comes before.
pub(crate) fn ids_still_ahead_below(
    read: &ReadTxn,
    position: TreePosition,
) -> Result<RoaringBitmap, LdapError> {
    let mut ahead = RoaringBitmap::new();
    for (_, child) in recorded_inversions(read, position.top)? {
        if child <= position.top && !ahead.contains(child) {
            ahead |= subtree_ids(&read.inner, read.txn(), child)?;
        }
    }
    // The top entry itself and its lower-ID descendants share `top`; they are in the sets
    // above unless they are the top entry.
    ahead.insert(position.top);
    ahead.remove_range(position.top.saturating_add(1)..);
    Ok(ahead)
}
