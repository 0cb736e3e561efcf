//! The changes a write transaction made, handed back by `WriteTxn::commit_with_changes` once
//! they are committed: what an RFC 4533 provider streams to its persistent searches (OpenLDAP's
//! syncprov does the same from its overlay's response callbacks). Only a committed list ever
//! leaves the transaction, so an aborted write is never published.
//!
//! Recording is off unless the transaction asks for it (`record_changes`): the bulk load into a
//! non-empty store and the offline tools pay nothing. A transaction keeps at most
//! `CHANGES_PER_TXN_MAX` records; past that it keeps none and says so (`overflowed`), and a
//! reader must treat that as "everything may have changed" (a provider ends its persistent
//! searches with e-syncRefreshRequired).
//!
//! A subtree move is one record: the moved entry's, with its DN before and after. Its
//! descendants' entries are unchanged (their DNs follow the moved node), and a consumer that
//! applies the move moves its own copy of the subtree; a reader for which the move changes
//! whether descendants are in scope expands the record itself (`ReadTxn::subtree_ids`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use lmdir_schema::{AttrId, NormalizedAttributes, PreparedFilter};
use lmdir_sync::Csn;

use crate::layout::EntryId;

/// Most change records one transaction keeps; beyond, it keeps none and is `overflowed`.
/// A writer batch of client updates makes at most a few hundred; a replicated present phase
/// deleting a large subtree can make more, and its readers refresh instead.
pub const CHANGES_PER_TXN_MAX: usize = 65_536;
/// Most bytes (DN, originals and normalized values) of the entry as it was before a change
/// that a change record carries (`Change::before`): a person entry is about 1 KiB; a bigger
/// one (a photo, a large group) is carried as None, and a reader that needs it must refresh.
/// A provider's broadcast holds at most 16,384 records, so at most 128 MiB of these.
pub const PRIOR_ENTRY_BYTES_MAX: usize = 8 * 1024;
/// Most bytes of such entries one transaction's records carry in all; beyond, None.
pub const PRIOR_ENTRIES_BYTES_PER_TXN_MAX: usize = 2 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Add,
    Modify,
    ModRdn,
    Delete,
}

/// One change to one entry, as committed.
#[derive(Clone, Debug)]
pub struct Change {
    pub kind: ChangeKind,
    pub id: EntryId,
    /// The entry's entryUUID (16 bytes); None when it has none (it cannot be replicated).
    pub entry_uuid: Option<[u8; 16]>,
    /// The entryCSN the change stamped (or, replicated, carried); None for a replicated
    /// delete (the provider's delete has no CSN here) or an entry without one.
    pub csn: Option<Csn>,
    /// The entry's DN after the change (for a delete: its last DN).
    pub dn: String,
    /// The DN before a modrdn or delete.
    pub old_dn: Option<String>,
    /// The entry as it was just before a modify, modrdn or delete (its DN then and every
    /// value), for readers that must know whether they returned it before the change (a
    /// persistent search sends a delete only then, as slapd's syncprov decides before the
    /// write); None for an add, past `PRIOR_ENTRY_BYTES_MAX` or
    /// `PRIOR_ENTRIES_BYTES_PER_TXN_MAX`, for an undecodable entry and for the out-of-line
    /// point modify of a large group.
    pub before: Option<Arc<PriorEntry>>,
}

/// An entry as it was before a change.
#[derive(Debug)]
pub struct PriorEntry {
    /// Its DN then.
    pub dn: String,
    /// Bytes of its DN and values (originals and normalized), within `PRIOR_ENTRY_BYTES_MAX`.
    pub bytes: usize,
    pub attributes: NormalizedAttributes,
}

/// What the readers of `Change::before` test on an entry (the filters of the running persistent
/// searches and of the access rules), so that the image of an entry modified the point way
/// (`point_modify.rs`) carries, of its out-of-line values (a group's member list), only those:
/// the few values equality items assert, never the whole list.
#[derive(Clone, Debug, Default)]
pub struct PriorNeeds {
    /// Attribute types tested only by equality on their stored form, with the normalized
    /// values asserted.
    pub asserted: HashMap<AttrId, HashSet<Vec<u8>>>,
    /// Attribute types tested otherwise (presence, substrings, ordering, approximate,
    /// extensible, in-chain, or equality needing the original): a point modify of an entry
    /// with such out-of-line values carries no image.
    pub whole: HashSet<AttrId>,
    /// An extensible match without a type tests every attribute: no point modify carries one.
    pub every_attribute: bool,
}

impl PriorNeeds {
    /// Adds what `filter` tests.
    pub fn add_filter(&mut self, filter: &PreparedFilter) {
        match filter {
            PreparedFilter::True | PreparedFilter::False | PreparedFilter::Undefined => {}
            PreparedFilter::And(items) | PreparedFilter::Or(items) => {
                items.iter().for_each(|item| self.add_filter(item));
            }
            PreparedFilter::Not(item) => self.add_filter(item),
            PreparedFilter::Equality {
                covered,
                normalized,
                ..
            } => {
                for one in covered {
                    if one.stored_form_usable {
                        let values = self.asserted.entry(one.attr).or_default();
                        values.insert(normalized.clone());
                    } else {
                        self.whole.insert(one.attr);
                    }
                }
            }
            PreparedFilter::Present { covered, .. } => self.whole.extend(covered.iter().copied()),
            PreparedFilter::Approx { covered, .. }
            | PreparedFilter::Substrings { covered, .. }
            | PreparedFilter::GreaterOrEqual { covered, .. }
            | PreparedFilter::LessOrEqual { covered, .. }
            | PreparedFilter::InChain { covered, .. } => {
                self.whole.extend(covered.iter().map(|one| one.attr));
            }
            PreparedFilter::Extensible { attr, covered, .. } => match attr {
                Some(_) => self.whole.extend(covered.iter().map(|one| one.attr)),
                None => self.every_attribute = true,
            },
        }
    }
}

impl Change {
    /// About how many bytes this record holds: its DNs, its entry before the change and a
    /// fixed part (what a queue of them is bounded by).
    pub fn held_bytes(&self) -> usize {
        const FIXED_BYTES: usize = 128;
        FIXED_BYTES
            + self.dn.len()
            + self.old_dn.as_ref().map_or(0, String::len)
            + self.before.as_ref().map_or(0, |prior| prior.bytes)
    }
}

/// What one committed transaction changed, in the order it changed it.
#[derive(Clone, Debug, Default)]
pub struct CommittedChanges {
    /// The LMDB transaction ID the changes committed as: a read snapshot whose
    /// `ReadTxn::snapshot_id` is at least this one sees them.
    pub txn_id: u64,
    pub changes: Vec<Change>,
    /// More than `CHANGES_PER_TXN_MAX` changes: `changes` is empty and incomplete.
    pub overflowed: bool,
}

impl CommittedChanges {
    /// Puts the changes in the order of their CSNs, which is the order a consumer must apply
    /// them in (OpenLDAP's ignores a CSN older than the last one it applied). A change is
    /// recorded when it is complete, so a modrdn or delete comes after the memberOf upkeep it
    /// caused although its CSN is older. A change without a CSN (a replicated delete) keeps
    /// its place after the change before it. Stable: equal keys keep their order.
    pub(crate) fn sort_by_csn(&mut self) {
        let mut last = None;
        let mut keyed: Vec<(Option<Csn>, Change)> = std::mem::take(&mut self.changes)
            .into_iter()
            .map(|change| {
                last = change.csn.or(last);
                (last, change)
            })
            .collect();
        keyed.sort_by_key(|(key, _)| *key);
        self.changes = keyed.into_iter().map(|(_, change)| change).collect();
    }
}

/// The recorder inside a write transaction.
#[derive(Default)]
pub(crate) struct ChangeLog {
    pub(crate) recording: bool,
    /// No `Change::before` is built (`WriteTxn::skip_prior_entries`): nobody reads it.
    pub(crate) no_prior_entries: bool,
    /// What the readers test (`WriteTxn::bound_prior_entries`): a point modify's image then
    /// carries those values of its out-of-line attributes; None: it carries no image.
    pub(crate) prior_needs: Option<Arc<PriorNeeds>>,
    pub(crate) committed: CommittedChanges,
    /// Bytes of `Change::before` entries recorded so far (`PRIOR_ENTRIES_BYTES_PER_TXN_MAX`).
    pub(crate) prior_bytes: usize,
}

/// The 16 bytes of an entryUUID's text (hyphens ignored).
pub fn uuid_bytes(text: &[u8]) -> Option<[u8; 16]> {
    let mut uuid = [0u8; 16];
    let mut digits = text.iter().filter(|byte| **byte != b'-');
    for byte in &mut uuid {
        let high = (*digits.next()? as char).to_digit(16)?;
        let low = (*digits.next()? as char).to_digit(16)?;
        *byte = (high * 16 + low) as u8;
    }
    digits.next().is_none().then_some(uuid)
}
