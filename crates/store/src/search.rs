//! Search: filter → index candidates → scope → exact filter test, in ID order.

use std::ops::Bound;

use heed::types::Bytes;
use heed::RoRange;

use lmdir_schema::{AttrId, CoveredAttribute, LdapError, MatchingRule, PreparedFilter, ResultCode};
use roaring::RoaringBitmap;

use crate::layout::{self, EntryId, IndexKinds};
use crate::read::{
    children_of, corrupt, is_within, postings, require_node, subtree_ids, EntryRef, ReadTxn,
};
use crate::store::lmdb_to_ldap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Base,
    One,
    Sub,
}

#[derive(Clone, Debug)]
pub struct SearchSpec {
    pub base: String,
    pub scope: Scope,
    pub filter: PreparedFilter,
    /// Entries returned before sizeLimitExceeded; 0 = unlimited.
    pub size_limit: usize,
    /// Candidates examined before adminLimitExceeded; 0 = unlimited.
    pub lookthrough_limit: usize,
}

/// Where a search's candidate IDs come from.
enum CandidateSource<'a> {
    /// Exact candidate set, consumed from the smallest ID.
    Ids(RoaringBitmap),
    /// The whole DB in ID order (a subtree search of everything with no usable index):
    /// walks id2entry with one cursor from `next`, without building a bitmap of all IDs.
    Sequential {
        next: EntryId,
        rows: Option<RoRange<'a, Bytes, Bytes>>,
    },
}

/// The matching entries of a search, in ID order.
pub struct SearchCursor<'a> {
    read: &'a ReadTxn,
    spec: &'a SearchSpec,
    source: CandidateSource<'a>,
    returned: usize,
    examined: usize,
    finished: bool,
    /// The filter tests the virtual entryDN attribute: present it on candidates (computing a
    /// DN costs a parent walk, so only when asked).
    filter_uses_entry_dn: bool,
}

/// Whether any leaf of `filter` applies to `attr`.
fn filter_mentions(filter: &PreparedFilter, attr: AttrId) -> bool {
    match filter {
        PreparedFilter::True | PreparedFilter::False | PreparedFilter::Undefined => false,
        PreparedFilter::And(parts) | PreparedFilter::Or(parts) => {
            parts.iter().any(|part| filter_mentions(part, attr))
        }
        PreparedFilter::Not(inner) => filter_mentions(inner, attr),
        PreparedFilter::Present { covered, .. } => covered.contains(&attr),
        PreparedFilter::Equality { covered, .. }
        | PreparedFilter::Approx { covered, .. }
        | PreparedFilter::Substrings { covered, .. }
        | PreparedFilter::GreaterOrEqual { covered, .. }
        | PreparedFilter::LessOrEqual { covered, .. }
        | PreparedFilter::Extensible { covered, .. } => {
            covered.iter().any(|covered| covered.attr == attr)
        }
    }
}

impl ReadTxn {
    fn usable_kinds(&self, attr: AttrId) -> IndexKinds {
        self.inner
            .usable_indexes
            .read()
            .expect("index lock poisoned")
            .get(&attr)
            .copied()
            .unwrap_or_default()
    }

    /// Postings of one key per covered attribute, unioned; None when any covered attribute
    /// lacks the index (then the leaf is unindexed).
    fn union_over_covered(
        &self,
        covered: &[CoveredAttribute],
        kind: IndexKinds,
        keys: &[Vec<u8>],
    ) -> Result<Option<RoaringBitmap>, LdapError> {
        let mut union = RoaringBitmap::new();
        for attribute in covered {
            if !attribute.stored_form_usable || !self.usable_kinds(attribute.attr).contains(kind) {
                return Ok(None);
            }
            let Some(database) = self.inner.databases.indexes.get(&attribute.attr) else {
                return Ok(None);
            };
            // All keys must hit (AND) within one attribute.
            let mut within: Option<RoaringBitmap> = None;
            for key in keys {
                let mut ids = RoaringBitmap::new();
                postings(*database, self.txn(), key, &mut ids)?;
                within = Some(match within {
                    None => ids,
                    Some(previous) => previous & ids,
                });
                if within.as_ref().is_some_and(RoaringBitmap::is_empty) {
                    break;
                }
            }
            union |= within.unwrap_or_default();
        }
        Ok(Some(union))
    }

    fn ordered_candidates(
        &self,
        covered: &[CoveredAttribute],
        rule: MatchingRule,
        key: &[u8],
        greater: bool,
    ) -> Result<Option<RoaringBitmap>, LdapError> {
        let mut union = RoaringBitmap::new();
        let encoded = layout::ordered_key(key);
        for attribute in covered {
            let ordering = self.inner.schema.attribute_type(attribute.attr).ordering;
            if !attribute.stored_form_usable
                || ordering != Some(rule)
                || !self
                    .usable_kinds(attribute.attr)
                    .contains(IndexKinds::ORDERED)
            {
                return Ok(None);
            }
            let Some(database) = self.inner.databases.indexes.get(&attribute.attr) else {
                return Ok(None);
            };
            let kind_start = [layout::KIND_ORDERED];
            let kind_end = [layout::KIND_ORDERED + 1];
            let mut last = encoded.clone();
            last.extend_from_slice(&[0xFF, 0xFF]);
            let range: (Bound<&[u8]>, Bound<&[u8]>) = if greater {
                (
                    Bound::Included(&encoded[..]),
                    Bound::Excluded(&kind_end[..]),
                )
            } else {
                (Bound::Included(&kind_start[..]), Bound::Included(&last[..]))
            };
            for row in database.range(self.txn(), &range).map_err(lmdb_to_ldap)? {
                let (full_key, value) = row.map_err(lmdb_to_ldap)?;
                let (_, chunk) =
                    layout::split_index_key(full_key).ok_or_else(|| corrupt("short index key"))?;
                layout::decode_posting_chunk_into(value, chunk, &mut union)
                    .map_err(|error| corrupt(error.to_string()))?;
            }
        }
        Ok(Some(union))
    }

    /// Candidate IDs of a filter from the indexes; None = not constrained by any index.
    pub fn filter_candidates(
        &self,
        filter: &PreparedFilter,
    ) -> Result<Option<RoaringBitmap>, LdapError> {
        Ok(match filter {
            PreparedFilter::True => None,
            // Nothing can evaluate to True.
            PreparedFilter::False | PreparedFilter::Undefined => Some(RoaringBitmap::new()),
            PreparedFilter::And(filters) => {
                let mut result: Option<RoaringBitmap> = None;
                for filter in filters {
                    if let Some(ids) = self.filter_candidates(filter)? {
                        let narrowed = match result {
                            None => ids,
                            Some(previous) => previous & ids,
                        };
                        let empty = narrowed.is_empty();
                        result = Some(narrowed);
                        if empty {
                            break;
                        }
                    }
                }
                result
            }
            PreparedFilter::Or(filters) => {
                let mut union = RoaringBitmap::new();
                for filter in filters {
                    match self.filter_candidates(filter)? {
                        Some(ids) => union |= ids,
                        None => return Ok(None),
                    }
                }
                Some(union)
            }
            PreparedFilter::Not(_) => None,
            PreparedFilter::Equality {
                covered,
                normalized,
                ..
            }
            | PreparedFilter::Approx {
                covered,
                normalized,
                ..
            } => self.union_over_covered(
                covered,
                IndexKinds::EQUALITY,
                &[layout::equality_key(normalized)],
            )?,
            PreparedFilter::Substrings {
                covered,
                initial,
                any,
                final_,
                ..
            } => {
                let any: Vec<&[u8]> = any.iter().map(Vec::as_slice).collect();
                match layout::substring_assertion_keys(initial.as_deref(), &any, final_.as_deref())
                {
                    None => None,
                    Some(keys) => self.union_over_covered(covered, IndexKinds::SUBSTRING, &keys)?,
                }
            }
            PreparedFilter::GreaterOrEqual {
                covered, rule, key, ..
            } => self.ordered_candidates(covered, *rule, key, true)?,
            PreparedFilter::LessOrEqual {
                covered, rule, key, ..
            } => self.ordered_candidates(covered, *rule, key, false)?,
            PreparedFilter::Present { covered, .. } => {
                let covered: Vec<CoveredAttribute> = covered
                    .iter()
                    .map(|attr| CoveredAttribute {
                        attr: *attr,
                        stored_form_usable: true,
                    })
                    .collect();
                self.union_over_covered(&covered, IndexKinds::PRESENCE, &[layout::presence_key()])?
            }
            PreparedFilter::Extensible { .. } => None,
        })
    }

    /// Resolves the candidates of a search within its scope. Returns the source to iterate.
    fn scoped_candidates(
        &self,
        spec: &SearchSpec,
        base: EntryId,
    ) -> Result<CandidateSource<'_>, LdapError> {
        let candidates = self.filter_candidates(&spec.filter)?;
        let base_node = require_node(&self.inner, self.txn(), base)?;
        Ok(match spec.scope {
            Scope::Base => {
                let mut ids = RoaringBitmap::new();
                if candidates.is_none_or(|candidates| candidates.contains(base)) {
                    ids.insert(base);
                }
                CandidateSource::Ids(ids)
            }
            Scope::One => {
                let children = || -> Result<RoaringBitmap, LdapError> {
                    Ok(children_of(&self.inner, self.txn(), base)?
                        .into_iter()
                        .collect())
                };
                match candidates {
                    None => CandidateSource::Ids(children()?),
                    // Few candidates: check each one's parent instead of listing the children.
                    Some(candidates) if candidates.len() < base_node.child_count as u64 => {
                        let mut ids = RoaringBitmap::new();
                        for id in &candidates {
                            if crate::read::read_node(&self.inner, self.txn(), id)?
                                .is_some_and(|node| node.parent == base)
                            {
                                ids.insert(id);
                            }
                        }
                        CandidateSource::Ids(ids)
                    }
                    Some(candidates) => CandidateSource::Ids(candidates & children()?),
                }
            }
            Scope::Sub => {
                let everything = base_node.subtree_size as u64 == self.entry_count()?;
                match candidates {
                    None if everything => CandidateSource::Sequential {
                        next: 1,
                        rows: None,
                    },
                    None => CandidateSource::Ids(subtree_ids(&self.inner, self.txn(), base)?),
                    Some(candidates) if everything => CandidateSource::Ids(candidates),
                    // Like back-mdb: walking the subtree costs its size; checking ancestry
                    // costs candidates × depth. Walk only when the subtree is the smaller.
                    Some(candidates)
                        if (base_node.subtree_size as u64) < candidates.len().saturating_mul(4) =>
                    {
                        CandidateSource::Ids(
                            candidates & subtree_ids(&self.inner, self.txn(), base)?,
                        )
                    }
                    Some(candidates) => {
                        let mut ids = RoaringBitmap::new();
                        for id in &candidates {
                            if is_within(&self.inner, self.txn(), id, base)? {
                                ids.insert(id);
                            }
                        }
                        CandidateSource::Ids(ids)
                    }
                }
            }
        })
    }

    /// Runs a search; iterate the cursor for the matching entries in ID order.
    pub fn search<'a>(&'a self, spec: &'a SearchSpec) -> Result<SearchCursor<'a>, LdapError> {
        let base = self.dn_to_id(&spec.base)?;
        let source = self.scoped_candidates(spec, base)?;
        let filter_uses_entry_dn = self
            .inner
            .schema
            .attribute("entryDN")
            .is_some_and(|entry_dn| filter_mentions(&spec.filter, entry_dn));
        Ok(SearchCursor {
            read: self,
            spec,
            source,
            returned: 0,
            examined: 0,
            finished: false,
            filter_uses_entry_dn,
        })
    }

    /// The scope-intersected candidate set (before the exact filter test).
    pub fn search_candidates(&self, spec: &SearchSpec) -> Result<RoaringBitmap, LdapError> {
        let base = self.dn_to_id(&spec.base)?;
        Ok(match self.scoped_candidates(spec, base)? {
            CandidateSource::Ids(ids) => ids,
            CandidateSource::Sequential { .. } => subtree_ids(&self.inner, self.txn(), base)?,
        })
    }
}

impl<'a> SearchCursor<'a> {
    /// Skips every candidate up to and including `id` (paged results: a new read txn per page
    /// resumes after the last ID sent).
    pub fn resume_after(mut self, id: EntryId) -> SearchCursor<'a> {
        match &mut self.source {
            CandidateSource::Ids(ids) => {
                ids.remove_range(..=id);
            }
            CandidateSource::Sequential { next, rows } => {
                *next = (*next).max(id.saturating_add(1));
                *rows = None;
            }
        }
        if id == EntryId::MAX {
            self.finished = true;
        }
        self
    }

    /// Matching entries returned so far.
    pub fn returned(&self) -> usize {
        self.returned
    }

    fn next_candidate(&mut self) -> Result<Option<(EntryId, EntryRef<'a>)>, LdapError> {
        loop {
            let id = match &mut self.source {
                CandidateSource::Ids(ids) => match ids.min() {
                    None => return Ok(None),
                    Some(id) => {
                        ids.remove(id);
                        id
                    }
                },
                CandidateSource::Sequential { next, rows } => {
                    if rows.is_none() {
                        let start = layout::encode_id(*next);
                        let bounds: (Bound<&[u8]>, Bound<&[u8]>) =
                            (Bound::Included(&start[..]), Bound::Unbounded);
                        let read: &'a ReadTxn = self.read;
                        *rows = Some(
                            read.inner
                                .databases
                                .id2entry
                                .range(read.txn(), &bounds)
                                .map_err(lmdb_to_ldap)?,
                        );
                    }
                    let Some(row) = rows.as_mut().and_then(Iterator::next) else {
                        return Ok(None);
                    };
                    let (key, value) = row.map_err(lmdb_to_ldap)?;
                    let id = layout::decode_id(key).ok_or_else(|| corrupt("id2entry key"))?;
                    if id == EntryId::MAX {
                        self.finished = true;
                    }
                    let read: &'a ReadTxn = self.read;
                    return Ok(Some((id, read.entry_from_bytes(id, value)?)));
                }
            };
            // A candidate from an index may have been deleted only if the index is wrong;
            // skip silently rather than fail the search (check() reports it).
            if let Some(entry) = self.read.entry(id)? {
                return Ok(Some((id, entry)));
            }
        }
    }
}

impl<'a> Iterator for SearchCursor<'a> {
    type Item = Result<(EntryId, EntryRef<'a>), LdapError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.finished {
            let (id, entry) = match self.next_candidate() {
                Ok(Some(found)) => found,
                Ok(None) => {
                    self.finished = true;
                    return None;
                }
                Err(error) => {
                    self.finished = true;
                    return Some(Err(error));
                }
            };
            self.examined += 1;
            if self.spec.lookthrough_limit != 0 && self.examined > self.spec.lookthrough_limit {
                self.finished = true;
                return Some(Err(LdapError::new(
                    ResultCode::AdminLimitExceeded,
                    format!(
                        "search examined more than {} candidate entries",
                        self.spec.lookthrough_limit
                    ),
                )));
            }
            let entry = if self.filter_uses_entry_dn {
                entry.with_virtual_entry_dn()
            } else {
                entry
            };
            if self.spec.filter.evaluate(&entry).is_true() {
                if self.spec.size_limit != 0 && self.returned >= self.spec.size_limit {
                    self.finished = true;
                    return Some(Err(LdapError::new(
                        ResultCode::SizeLimitExceeded,
                        format!("more than {} entries match", self.spec.size_limit),
                    )));
                }
                self.returned += 1;
                return Some(Ok((id, entry)));
            }
        }
        None
    }
}
