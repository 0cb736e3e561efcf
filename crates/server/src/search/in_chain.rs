//! In-chain items of a search's filter (`(memberOf:1.2.840.113556.1.4.1941:=cn=top,...)`),
//! resolved once per search in its read txn with the subject's rights, before index planning:
//! the store walks the chain over the attribute's equality index (`ReadTxn::in_chain_closure`)
//! and the item becomes the set of entry IDs reached, which then plans and tests like any
//! indexed leaf. An entry the subject may not search and read, or whose chaining attribute it
//! may not search, is neither reached nor followed: a hidden group contributes nothing. The
//! walk's candidates count against the search's look-through limit and it stops on the
//! search's time limit and on abandon.

use crate::context::Database;
use crate::result::OperationError;
use lmdir_access::acl::Subject;
use lmdir_schema::{AttrId, EntryIdSet, LdapError, PreparedFilter};
use lmdir_store::{EntryRef, InChainBounds, ReadTxn};
use std::collections::HashMap;

/// Entries a dynamic group's computed members link a value to (`dynlist::in_chain_links`).
type DynamicLinks = HashMap<Vec<u8>, Vec<lmdir_store::EntryId>>;

/// Most links from the asserted DN to a reached entry (adminLimitExceeded beyond): deeper
/// nesting than any directory's group design, well within a walk's bounded cost.
pub(super) const IN_CHAIN_DEPTH_MAX: usize = 64;

/// Resolves every in-chain item of `filter`; returns the candidates examined, which the search
/// then has fewer of for its own look-through (`lookthrough_max`, 0 = unlimited, is the whole).
pub(super) fn resolve(
    database: &Database,
    read: &ReadTxn,
    subject: &Subject<'_>,
    filter: &mut PreparedFilter,
    lookthrough_max: u64,
    stop: &dyn Fn() -> Option<LdapError>,
) -> Result<u64, OperationError> {
    let mut examined = 0u64;
    // The dynamic groups' links of each chaining attribute, computed once per search: they
    // depend on the attribute and the subject only, and each computation evaluates every
    // dynamic group (a filter of 5,000 items computed them 5,000 times).
    let mut dynamic_by_attr: Vec<(AttrId, DynamicLinks)> = Vec::new();
    filter.resolve_in_chain::<OperationError>(&mut |query| {
        let remaining = match lookthrough_max {
            0 => 0,
            limit => limit.saturating_sub(examined).max(1),
        };
        let known = dynamic_by_attr
            .iter()
            .position(|(attr, _)| *attr == query.attr);
        let index = match known {
            Some(index) => index,
            None => {
                let view = database.dynlist_view();
                let links = crate::dynlist::in_chain_links(&view, read, subject, query.attr)?;
                dynamic_by_attr.push((query.attr, links));
                dynamic_by_attr.len() - 1
            }
        };
        let dynamic = &dynamic_by_attr[index].1;
        let computed_links = |value: &[u8]| dynamic.get(value).cloned().unwrap_or_default();
        let bounds = InChainBounds {
            depth_max: IN_CHAIN_DEPTH_MAX,
            examined_max: usize::try_from(remaining).unwrap_or(usize::MAX),
            stop,
            computed_links: &computed_links,
        };
        let mut admit = |id, entry: &EntryRef<'_>, linked: bool| {
            subject.is_rootdn || admits(database, read, subject, id, entry, linked, query.covered)
        };
        let outcome = read.in_chain_closure(query, &bounds, &mut admit)?;
        examined = examined.saturating_add(outcome.examined as u64);
        Ok(EntryIdSet::new(outcome.members.iter().collect()))
    })?;
    Ok(examined)
}

/// Whether the subject may see `entry` on a chain: search and read on the entry (as a search
/// returning it needs) and, for an entry reached through the attribute, search on it.
fn admits(
    database: &Database,
    read: &ReadTxn,
    subject: &Subject<'_>,
    id: lmdir_store::EntryId,
    entry: &EntryRef<'_>,
    linked: bool,
    covered: &[lmdir_schema::CoveredAttribute],
) -> bool {
    let Ok(normalized_dn) = read.normalized_dn_of(id) else {
        return false;
    };
    let policy = database.policy();
    let access = policy.for_entry(subject, &normalized_dn, entry);
    access.can_search_entry()
        && access.can_read_entry()
        && (!linked || covered.iter().all(|item| access.can_filter_on(item.attr)))
}
