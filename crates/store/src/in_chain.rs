//! LDAP_MATCHING_RULE_IN_CHAIN (1.2.840.113556.1.4.1941): the entries a DN-valued attribute
//! links to an asserted DN through chains of its values, found over the attribute's equality
//! index (IDs, not DN strings): `(member:…1941:=uid=x)` reaches the groups holding x, then the
//! groups holding those; `(memberOf:…1941:=cn=top)` the entries whose memberOf names top, then
//! those whose memberOf names one of them. Each entry joins at most once (cycles end), every
//! candidate counts against a look-through bound, the walk asks a stop check (time limit,
//! abandon) every 64 candidates, and a chain longer than the depth bound is refused rather
//! than cut short (a silently shorter closure would be a wrong answer).

use lmdir_schema::{InChainQuery, LdapError, PreparedFilter, ResultCode};
use roaring::RoaringBitmap;

use crate::layout::EntryId;
use crate::read::{subtree_ids, EntryRef, ReadTxn};

/// How far one in-chain walk may go.
pub struct InChainBounds<'a> {
    /// Most links from the asserted DN to a reached entry.
    pub depth_max: usize,
    /// Most candidate entries examined (read and tested); 0 = unlimited.
    pub examined_max: usize,
    /// Asked every `STOP_CHECK_INTERVAL` candidates: Some(error) ends the walk with it.
    pub stop: &'a dyn Fn() -> Option<LdapError>,
    /// Entries linked to a value by values the store does not hold (a dynamic group's
    /// members): followed like stored links, without testing stored values.
    pub computed_links: &'a dyn Fn(&[u8]) -> Vec<EntryId>,
}

/// What one walk found and what it cost.
#[derive(Debug, Default)]
pub struct InChainOutcome {
    pub members: RoaringBitmap,
    /// Candidate entries read and tested (the look-through the walk used).
    pub examined: usize,
}

const STOP_CHECK_INTERVAL: usize = 64;

/// A walk's state while it follows one level's links.
struct Walk<'w> {
    outcome: &'w mut InChainOutcome,
    /// Entries the subject may not see on a chain (never tested again).
    refused: &'w mut RoaringBitmap,
    /// The next level's link values (DNs of the entries just joined).
    next: &'w mut Vec<Vec<u8>>,
    /// The entries linked to the current value by computed values (`computed_links`).
    computed: &'w RoaringBitmap,
}

/// The value an equality link item asserts.
fn value_of(link: &PreparedFilter) -> Vec<u8> {
    match link {
        PreparedFilter::Equality { normalized, .. } => normalized.clone(),
        _ => Vec::new(),
    }
}

impl ReadTxn {
    /// The closure of `query` (see the module). `admit(id, entry, linked)` says whether an entry
    /// counts (the subject's access to it): one that does not is neither a member nor followed.
    /// The asserted DN must name an existing admitted entry (`linked` false: it was named, not
    /// reached through the attribute), else nothing is reached.
    pub fn in_chain_closure(
        &self,
        query: InChainQuery<'_>,
        bounds: &InChainBounds<'_>,
        admit: &mut dyn FnMut(EntryId, &EntryRef<'_>, bool) -> bool,
    ) -> Result<InChainOutcome, LdapError> {
        let mut outcome = InChainOutcome::default();
        let schema = self.schema();
        let Some(rule) = schema.attribute_type(query.attr).equality else {
            return Ok(outcome);
        };
        let start = std::str::from_utf8(query.normalized)
            .ok()
            .and_then(|dn| self.normalized_dn_to_id(dn).ok());
        let start_admitted = match start {
            Some(id) => self
                .entry(id)?
                .is_some_and(|entry| admit(id, &entry, false)),
            None => false,
        };
        if !start_admitted {
            return Ok(outcome);
        }
        let mut refused = RoaringBitmap::new();
        let mut level: Vec<Vec<u8>> = vec![query.normalized.to_vec()];
        let mut depth = 0;
        while !level.is_empty() {
            depth += 1;
            let mut next = Vec::new();
            for value in level {
                let link = PreparedFilter::Equality {
                    attr: query.attr,
                    options: Vec::new(),
                    rule,
                    covered: query.covered.to_vec(),
                    normalized: value,
                };
                let computed: RoaringBitmap = (bounds.computed_links)(&value_of(&link))
                    .into_iter()
                    .collect();
                let mut walk = Walk {
                    outcome: &mut outcome,
                    refused: &mut refused,
                    next: &mut next,
                    computed: &computed,
                };
                self.follow(&link, bounds, admit, &mut walk)?;
            }
            if !next.is_empty() && depth > bounds.depth_max {
                return Err(LdapError::new(
                    ResultCode::AdminLimitExceeded,
                    format!(
                        "in-chain match on {} is nested deeper than {} levels",
                        schema.attribute_type(query.attr).name(),
                        bounds.depth_max
                    ),
                ));
            }
            level = next;
        }
        Ok(outcome)
    }

    /// The entries holding one link value (`link`, an equality item): each new one the subject
    /// may see joins the members and its DN the next level.
    fn follow(
        &self,
        link: &PreparedFilter,
        bounds: &InChainBounds<'_>,
        admit: &mut dyn FnMut(EntryId, &EntryRef<'_>, bool) -> bool,
        walk: &mut Walk<'_>,
    ) -> Result<(), LdapError> {
        let mut candidates = match self.filter_candidates(link)? {
            Some(candidates) => candidates,
            None => self.every_id()?,
        };
        candidates |= walk.computed;
        for id in &candidates {
            if walk.outcome.members.contains(id) || walk.refused.contains(id) {
                continue;
            }
            count_examined(walk.outcome, bounds)?;
            let Some(entry) = self.entry(id)? else {
                continue;
            };
            if !walk.computed.contains(id) && !link.evaluate(&entry).is_true() {
                continue;
            }
            if !admit(id, &entry, true) {
                walk.refused.insert(id);
                continue;
            }
            walk.outcome.members.insert(id);
            walk.next.push(self.normalized_dn_of(id)?.into_bytes());
        }
        Ok(())
    }

    /// Every entry's ID (an in-chain link over an attribute without an equality index).
    fn every_id(&self) -> Result<RoaringBitmap, LdapError> {
        let mut ids = RoaringBitmap::new();
        for root in self.root_ids()? {
            ids |= subtree_ids(&self.inner, self.txn(), root)?;
        }
        Ok(ids)
    }
}

/// Counts one examined candidate against the bounds.
fn count_examined(
    outcome: &mut InChainOutcome,
    bounds: &InChainBounds<'_>,
) -> Result<(), LdapError> {
    outcome.examined += 1;
    if bounds.examined_max != 0 && outcome.examined > bounds.examined_max {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!(
                "in-chain match examined more than {} candidate entries",
                bounds.examined_max
            ),
        ));
    }
    if outcome.examined.is_multiple_of(STOP_CHECK_INTERVAL) {
        if let Some(error) = (bounds.stop)() {
            return Err(error);
        }
    }
    Ok(())
}
