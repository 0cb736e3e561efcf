//! Search: filter → index candidates → scope → exact filter test, in ID order, or, when the
//! store has inverted links, parents first (`treeorder`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound;

use heed::types::Bytes;
use heed::RoRange;

use lmdir_schema::{AttrId, CoveredAttribute, LdapError, MatchingRule, PreparedFilter, ResultCode};
use roaring::RoaringBitmap;

use crate::error::{lmdb_to_ldap, RawDatabase};
use crate::layout::{self, EntryId, IndexKinds, Node};
use crate::read::{children_of, corrupt, require_node, subtree_ids, EntryRef, ReadTxn};
use crate::treeorder::{ids_still_ahead_below, PositionFinder, TreePosition};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Base,
    One,
    Sub,
}

#[derive(Clone, Debug)]
pub struct SearchSpec {
    /// The base DN, normalized (`Schema::normalize_dn_str`) or as a client spelled it (then
    /// normalized on a miss); [`ReadTxn::search_from`] takes it resolved instead.
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

/// What a leaf filter is looked up by in the indexes.
enum LeafKeys<'f> {
    /// Postings of every key (AND) within each covered attribute (OR over attributes).
    Keys {
        covered: &'f [CoveredAttribute],
        kind: IndexKinds,
        keys: Vec<Vec<u8>>,
    },
    /// A substring assertion too short to form any gram.
    Unindexed,
    /// Not an equality, approximate or substring leaf.
    NotKeyed,
}

fn leaf_keys(filter: &PreparedFilter) -> LeafKeys<'_> {
    match filter {
        PreparedFilter::Equality {
            covered,
            normalized,
            ..
        }
        | PreparedFilter::Approx {
            covered,
            normalized,
            ..
        } => LeafKeys::Keys {
            covered,
            kind: IndexKinds::EQUALITY,
            keys: vec![layout::equality_key(normalized)],
        },
        PreparedFilter::Substrings {
            covered,
            initial,
            any,
            final_,
            ..
        } => {
            let any: Vec<&[u8]> = any.iter().map(Vec::as_slice).collect();
            match layout::substring_assertion_keys(initial.as_deref(), &any, final_.as_deref()) {
                None => LeafKeys::Unindexed,
                Some(keys) => LeafKeys::Keys {
                    covered,
                    kind: IndexKinds::SUBSTRING,
                    keys,
                },
            }
        }
        _ => LeafKeys::NotKeyed,
    }
}

/// One index key's posting chunks as stored (zero-copy), with their total ID count.
struct KeyPostings<'t> {
    id_count: u64,
    chunks: Vec<(u16, &'t [u8])>,
}

impl KeyPostings<'_> {
    fn decode(&self) -> Result<RoaringBitmap, LdapError> {
        let mut ids = RoaringBitmap::new();
        for (chunk, bytes) in &self.chunks {
            layout::decode_posting_chunk_into(bytes, *chunk, &mut ids)
                .map_err(|error| corrupt(error.to_string()))?;
        }
        Ok(ids)
    }

    /// Every chunk is in list form: candidates can be looked up in it without decoding.
    fn in_list_form(&self) -> bool {
        self.chunks
            .iter()
            .all(|(_, bytes)| layout::is_list_chunk(bytes))
    }

    /// Whether `id` is posted, by binary search in its list chunk (`in_list_form` holds);
    /// a chunk that cannot be searched keeps the ID (candidates may be a superset).
    fn list_contains(&self, id: EntryId) -> bool {
        let chunk = layout::chunk_of(id);
        self.chunks
            .iter()
            .find(|(number, _)| *number == chunk)
            .is_some_and(|(_, bytes)| {
                layout::list_chunk_contains(bytes, layout::low_half(id)).unwrap_or(true)
            })
    }
}

/// Testing one candidate against the filter (an entry read and a filter walk) costs about as
/// much as decoding this many posting IDs.
const CANDIDATE_TEST_COST_IN_DECODED_IDS: u64 = 64;
/// Below this many candidates, further narrowing is never worth an index read.
const CANDIDATES_FEW_ENOUGH: u64 = 4;

/// Whether intersecting `candidate_count` candidates with a posting list of about
/// `list_id_count` IDs costs less than testing the candidates it might remove.
fn worth_intersecting(candidate_count: u64, list_id_count: u64) -> bool {
    candidate_count > CANDIDATES_FEW_ENOUGH
        && list_id_count <= candidate_count.saturating_mul(CANDIDATE_TEST_COST_IN_DECODED_IDS)
}

/// Posting IDs the estimates in one read txn may decode (or look candidates up in) in all, to
/// intersect the shortest lists of their leaves (microseconds, however big the filter): a
/// substring assertion's grams each have hundreds of entries in a large directory while
/// together they match one, and only the intersection tells the server the search is small.
/// Beyond it an estimate is bounded by the posting headers alone.
const ESTIMATE_DECODED_IDS_MAX: u64 = 4096;
/// Leaves whose estimated candidates one memo keeps for the search that follows (all of them
/// together hold at most `ESTIMATE_DECODED_IDS_MAX` IDs).
const KEPT_LEAVES_MAX: usize = 8;
/// Ordered-index rows the range items of one search may read for its candidates, in all. Each
/// `>=`/`<=` item walks its range before the search's time limit and stop check apply: a filter
/// of 10,000 `(uidNumber>=0)` items read the whole index 10,000 times. Past it a range item
/// constrains nothing (its scope is examined with the exact test instead, under the search's
/// limits): what one wide range on a million entries reads, about a tenth of a second.
const CANDIDATE_RANGE_ROWS_MAX: u64 = 1 << 20;

/// A leaf's index candidates, computed by its estimate, kept in the memo so the search in the
/// same snapshot does not read and decode the same posting lists again.
struct KeptCandidates {
    covered: Vec<CoveredAttribute>,
    keys: Vec<Vec<u8>>,
    candidates: RoaringBitmap,
}

/// What the estimates of one search decoded and kept, handed by its caller from the estimate
/// to the search ([`ReadTxn::search_from`]) in the same read txn: a plain value the caller
/// owns, so planning a search and running it share their work explicitly. Valid only with the
/// read txn (snapshot) it was filled in.
#[derive(Default)]
pub struct CandidateMemo {
    leaves: Vec<KeptCandidates>,
    /// Posting IDs decoded by estimates so far (at most `ESTIMATE_DECODED_IDS_MAX`).
    decoded_ids: u64,
    /// Ordered-index rows read for range candidates so far (`CANDIDATE_RANGE_ROWS_MAX`).
    range_rows: u64,
}

impl CandidateMemo {
    /// Candidates of a leaf an estimate kept.
    fn kept(&self, covered: &[CoveredAttribute], keys: &[Vec<u8>]) -> Option<&RoaringBitmap> {
        self.leaves
            .iter()
            .find(|kept| kept.covered == covered && kept.keys == keys)
            .map(|kept| &kept.candidates)
    }
}

/// Candidates a cursor examines between two calls of its stop check (`stop_when`): a scan
/// that matches nothing still notices a deadline or an abandon within microseconds.
const STOP_CHECK_INTERVAL_CANDIDATES: usize = 64;

/// A caller's reason to end a search early (a deadline passed, the client abandoned), asked
/// every `STOP_CHECK_INTERVAL_CANDIDATES` candidates.
pub type StopCheck<'a> = Box<dyn Fn() -> Option<LdapError> + 'a>;

/// Most matching entries a search holds back until their parent has been output (12 bytes
/// each: 12 MiB); beyond it the search ends with adminLimitExceeded. Only a store with
/// inverted links (child-first loads, subtrees moved under newer parents) holds any back.
pub const TREE_ORDER_DEFERRED_ENTRIES_MAX: usize = 1 << 20;

/// Parents-first ordering state of a search over a store with inverted links.
struct TreeOrdering<'a> {
    finder: PositionFinder,
    /// Matches that must wait for an ancestor with a higher ID (smallest position first).
    deferred: BinaryHeap<Reverse<TreePosition>>,
    /// The next match that needs no waiting, read ahead to compare with `deferred`.
    ahead: Option<(TreePosition, EntryRef<'a>)>,
    /// Candidates before this position were output by earlier pages.
    resume: Option<TreePosition>,
    /// IDs below the resumed-from position that may still be ahead, examined before the
    /// source (which then starts at that position's top ID).
    replay: RoaringBitmap,
}

/// Most IDs a sequential scan's id2node walk steps over one by one to reach the next returned
/// entry's node; farther, it seeks again (one B-tree descent, what a lookup per entry costs).
const NODE_WALK_STEPS_MAX: EntryId = 16;

/// The id2node rows of a sequential scan, walked beside id2entry: each returned entry's node
/// (its RDN and parent, for its DN) then costs a cursor step, not a B-tree descent (~1,400
/// instructions, 7% of a full scan's per entry).
#[derive(Default)]
struct NodeWalk<'a> {
    rows: Option<RoRange<'a, Bytes, Bytes>>,
    ahead: Option<(EntryId, Node<'a>)>,
}

impl<'a> NodeWalk<'a> {
    /// The node of `id` when the walk finds it; None leaves the caller to read it as usual
    /// (a damaged row is reported there, by the read that needs it).
    fn node_of(&mut self, read: &'a ReadTxn, id: EntryId) -> Option<Node<'a>> {
        let far = self
            .ahead
            .as_ref()
            .is_none_or(|(ahead, _)| *ahead > id || id - *ahead > NODE_WALK_STEPS_MAX);
        if self.rows.is_none() || far {
            let start = layout::encode_id(id);
            let bounds: (Bound<&[u8]>, Bound<&[u8]>) =
                (Bound::Included(&start[..]), Bound::Unbounded);
            self.rows = read.inner.databases.id2node.range(read.txn(), &bounds).ok();
            self.ahead = None;
        }
        loop {
            if let Some((ahead, node)) = &self.ahead {
                if *ahead == id {
                    return Some(*node);
                }
                if *ahead > id {
                    return None;
                }
            }
            let (key, value) = self.rows.as_mut()?.next()?.ok()?;
            self.ahead = Some((layout::decode_id(key)?, layout::decode_node(value)?));
        }
    }
}

/// A candidate ID and, from the sequential source, its id2entry value.
type Candidate<'a> = (EntryId, Option<&'a [u8]>);

/// A matching candidate with its position (when the search orders by tree position).
type Found<'a> = (EntryId, EntryRef<'a>, Option<TreePosition>);

/// The matching entries of a search: in ID order, or parents first when the store has
/// inverted links (see `treeorder`); either way each entry once, and `last_position` tells
/// where a next page resumes.
pub struct SearchCursor<'a> {
    read: &'a ReadTxn,
    spec: &'a SearchSpec,
    source: CandidateSource<'a>,
    returned: usize,
    examined: usize,
    undecodable: usize,
    /// No more entries (source exhausted and nothing deferred, or an error was returned).
    finished: bool,
    /// The candidate source is exhausted.
    source_done: bool,
    tree: Option<TreeOrdering<'a>>,
    last_position: Option<TreePosition>,
    /// The filter tests the virtual entryDN attribute: present it on candidates (computing a
    /// DN costs a parent walk, so only when asked).
    filter_uses_entry_dn: bool,
    stop: Option<StopCheck<'a>>,
    /// A sequential source's walk of id2node, for the DNs of the entries it returns.
    nodes: Option<NodeWalk<'a>>,
    /// Candidates' nodes the scope check read (the first `NODES_READ_KEPT_MAX`), for the
    /// DNs of those returned: not read again.
    nodes_read: Vec<(EntryId, Node<'a>)>,
}

/// Most candidate nodes a scope check keeps for the output (a search that checks more
/// candidates one by one reads the rest again, as it did all of them before).
const NODES_READ_KEPT_MAX: usize = 16;

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
        | PreparedFilter::Extensible { covered, .. }
        | PreparedFilter::InChain { covered, .. } => {
            covered.iter().any(|covered| covered.attr == attr)
        }
    }
}

impl ReadTxn {
    fn usable_kinds(&self, attr: AttrId) -> IndexKinds {
        self.indexes.usable.get(&attr).copied().unwrap_or_default()
    }

    /// One index key's posting chunks, borrowed from the map, with their total ID count read
    /// from the chunk headers (nothing decoded yet).
    fn key_postings(
        &self,
        database: RawDatabase,
        key: &[u8],
    ) -> Result<KeyPostings<'_>, LdapError> {
        let mut postings = KeyPostings {
            id_count: 0,
            chunks: Vec::new(),
        };
        for row in database
            .prefix_iter(self.txn(), key)
            .map_err(lmdb_to_ldap)?
        {
            let (full_key, value) = row.map_err(lmdb_to_ldap)?;
            // Only exact key + 2-byte chunk: a longer key sharing the prefix is another key.
            if full_key.len() != key.len() + 2 {
                continue;
            }
            let (_, chunk) =
                layout::split_index_key(full_key).ok_or_else(|| corrupt("short index key"))?;
            postings.id_count += layout::posting_chunk_id_count(value)
                .map_err(|error| corrupt(error.to_string()))?
                as u64;
            postings.chunks.push((chunk, value));
        }
        Ok(postings)
    }

    /// The index DB of each covered attribute, or None when any covered attribute lacks the
    /// index kind (then the leaf is unindexed).
    fn covered_databases(
        &self,
        covered: &[CoveredAttribute],
        kind: IndexKinds,
    ) -> Option<Vec<RawDatabase>> {
        covered
            .iter()
            .map(|attribute| {
                if !attribute.stored_form_usable
                    || !self.usable_kinds(attribute.attr).contains(kind)
                {
                    return None;
                }
                self.indexes.databases.get(&attribute.attr).copied()
            })
            .collect()
    }

    /// IDs posted under every one of `keys` (AND) in one index DB, or `Err(bound)` (an upper
    /// bound of them) when decoding or looking up the next list would take `decoded` (IDs
    /// decoded plus candidates looked up) past `decoded_ids_max`.
    ///
    /// Keys are intersected smallest posting list first. A list in list form with more IDs
    /// than there are candidates is not decoded: each candidate is looked up in it (binary
    /// search), which costs less than decoding it and far less than testing a candidate. Other
    /// lists are decoded only while the candidates are not so few that testing each against
    /// the filter costs less than decoding the list: candidates only need to be a superset,
    /// since every candidate is tested.
    fn intersect_keys(
        &self,
        database: RawDatabase,
        keys: &[Vec<u8>],
        decoded: &mut u64,
        decoded_ids_max: u64,
    ) -> Result<Result<RoaringBitmap, u64>, LdapError> {
        let mut lists = keys
            .iter()
            .map(|key| self.key_postings(database, key))
            .collect::<Result<Vec<_>, _>>()?;
        lists.sort_by_key(|postings| postings.id_count);
        let mut within: Option<RoaringBitmap> = None;
        for postings in &lists {
            if let Some(candidates) = &mut within {
                if candidates.is_empty() {
                    break;
                }
                if candidates.len() <= postings.id_count && postings.in_list_form() {
                    let after = decoded.saturating_add(candidates.len());
                    if after > decoded_ids_max {
                        return Ok(Err(candidates.len()));
                    }
                    *decoded = after;
                    candidates.retain(|id| postings.list_contains(id));
                    continue;
                }
                // Lists come smallest first: a later one may still be looked up.
                if !worth_intersecting(candidates.len(), postings.id_count) {
                    continue;
                }
            }
            let after = decoded.saturating_add(postings.id_count);
            if after > decoded_ids_max {
                return Ok(Err(within.map_or(postings.id_count, |ids| ids.len())));
            }
            *decoded = after;
            let ids = postings.decode()?;
            within = Some(match within {
                None => ids,
                Some(previous) => previous & ids,
            });
        }
        Ok(Ok(within.unwrap_or_default()))
    }

    /// IDs posted under every one of `keys` (AND) in each covered attribute, unioned over the
    /// attributes; None when any covered attribute lacks the index. `Err(bound)`: decoding
    /// would have taken `decoded` past `decoded_ids_max` posting IDs; `bound` is an upper
    /// bound of the candidates (from what was intersected, else from the posting headers).
    fn union_over_covered(
        &self,
        covered: &[CoveredAttribute],
        kind: IndexKinds,
        keys: &[Vec<u8>],
        decoded: &mut u64,
        decoded_ids_max: u64,
    ) -> Result<Option<Result<RoaringBitmap, u64>>, LdapError> {
        let Some(databases) = self.covered_databases(covered, kind) else {
            return Ok(None);
        };
        let mut union = RoaringBitmap::new();
        let mut budget = decoded_ids_max;
        let mut beyond_budget: Option<u64> = None;
        for database in databases {
            match self.intersect_keys(database, keys, decoded, budget)? {
                Ok(ids) => union |= ids,
                Err(bound) => {
                    beyond_budget = Some(beyond_budget.unwrap_or(0).saturating_add(bound));
                    // The other attributes' bounds from their headers alone.
                    budget = *decoded;
                }
            }
        }
        Ok(Some(match beyond_budget {
            None => Ok(union),
            Some(bound) => Err(bound.saturating_add(union.len())),
        }))
    }

    /// The index candidates of an equality, approximate, substring or presence leaf (None:
    /// an attribute it covers lacks the index), reusing what its estimate in this txn kept.
    fn leaf_candidates(
        &self,
        covered: &[CoveredAttribute],
        kind: IndexKinds,
        keys: &[Vec<u8>],
        memo: &CandidateMemo,
    ) -> Result<Option<RoaringBitmap>, LdapError> {
        if let Some(kept) = memo.kept(covered, keys) {
            return Ok(Some(kept.clone()));
        }
        Ok(
            match self.union_over_covered(covered, kind, keys, &mut 0, u64::MAX)? {
                Some(Ok(ids)) => Some(ids),
                // Only a decode budget stops early, and there is none here; unconstrained by
                // the index is correct anyway (every candidate is tested).
                Some(Err(_)) | None => None,
            },
        )
    }

    /// An upper bound of a keyed leaf's index candidates: exact when the smallest posting
    /// lists fit what is left of this txn's `ESTIMATE_DECODED_IDS_MAX` (then kept for the
    /// search, the snapshot never changes), else from the headers.
    fn estimated_leaf_count(
        &self,
        covered: &[CoveredAttribute],
        kind: IndexKinds,
        keys: Vec<Vec<u8>>,
        memo: &mut CandidateMemo,
    ) -> Result<Option<u64>, LdapError> {
        if let Some(candidates) = memo.kept(covered, &keys) {
            return Ok(Some(candidates.len()));
        }
        let estimate = self.union_over_covered(
            covered,
            kind,
            &keys,
            &mut memo.decoded_ids,
            ESTIMATE_DECODED_IDS_MAX,
        )?;
        Ok(match estimate {
            None => None,
            Some(Ok(ids)) => {
                let count = ids.len();
                if memo.leaves.len() < KEPT_LEAVES_MAX {
                    memo.leaves.push(KeptCandidates {
                        covered: covered.to_vec(),
                        keys,
                        candidates: ids,
                    });
                }
                Some(count)
            }
            Some(Err(bound)) => Some(bound),
        })
    }

    /// An upper bound of a filter's index candidates from posting headers, and from the
    /// smallest lists of a leaf when they are short (at most `ESTIMATE_DECODED_IDS_MAX` IDs
    /// decoded per read txn; the candidates found are kept for a search in it): for ordering
    /// the parts of an AND, and for the server to tell a search that finishes in microseconds.
    /// None when not cheaply known.
    pub fn estimated_candidate_count(
        &self,
        filter: &PreparedFilter,
        memo: &mut CandidateMemo,
    ) -> Result<Option<u64>, LdapError> {
        match filter {
            PreparedFilter::False | PreparedFilter::Undefined => Ok(Some(0)),
            // Unresolved, the chain is not known (never a small search).
            PreparedFilter::InChain { members, .. } => {
                Ok(members.as_ref().map(|members| members.len() as u64))
            }
            PreparedFilter::And(parts) => {
                let mut smallest: Option<u64> = None;
                for part in parts {
                    if let Some(count) = self.estimated_candidate_count(part, memo)? {
                        smallest = Some(smallest.map_or(count, |known| known.min(count)));
                    }
                }
                Ok(smallest)
            }
            PreparedFilter::Or(parts) => {
                let mut total = 0u64;
                for part in parts {
                    match self.estimated_candidate_count(part, memo)? {
                        Some(count) => total = total.saturating_add(count),
                        None => return Ok(None),
                    }
                }
                Ok(Some(total))
            }
            leaf => match leaf_keys(leaf) {
                LeafKeys::Keys {
                    covered,
                    kind,
                    keys,
                } => self.estimated_leaf_count(covered, kind, keys, memo),
                LeafKeys::Unindexed | LeafKeys::NotKeyed => Ok(None),
            },
        }
    }

    /// The candidates of a `>=` (`greater`) or `<=` item from the ordered index; None when no
    /// usable index covers it, or when reading its range would take the search past
    /// `CANDIDATE_RANGE_ROWS_MAX` rows (counted in `memo`).
    fn ordered_candidates(
        &self,
        covered: &[CoveredAttribute],
        rule: MatchingRule,
        key: &[u8],
        greater: bool,
        memo: &mut CandidateMemo,
    ) -> Result<Option<RoaringBitmap>, LdapError> {
        let mut union = RoaringBitmap::new();
        let encoded = layout::ordered_key(key);
        for attribute in covered {
            let ordering = self.schema().attribute_type(attribute.attr).ordering;
            if !attribute.stored_form_usable
                || ordering != Some(rule)
                || !self
                    .usable_kinds(attribute.attr)
                    .contains(IndexKinds::ORDERED)
            {
                return Ok(None);
            }
            let Some(database) = self.indexes.databases.get(&attribute.attr) else {
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
                if memo.range_rows >= CANDIDATE_RANGE_ROWS_MAX {
                    return Ok(None);
                }
                memo.range_rows += 1;
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
        self.filter_candidates_with(filter, &mut CandidateMemo::default())
    }

    /// As [`ReadTxn::filter_candidates`], reusing (and adding to) what estimates kept in `memo`.
    fn filter_candidates_with(
        &self,
        filter: &PreparedFilter,
        memo: &mut CandidateMemo,
    ) -> Result<Option<RoaringBitmap>, LdapError> {
        Ok(match filter {
            PreparedFilter::True => None,
            // Nothing can evaluate to True.
            PreparedFilter::False | PreparedFilter::Undefined => Some(RoaringBitmap::new()),
            PreparedFilter::And(filters) => {
                // Most selective part first (by posting headers), so that e.g.
                // (&(objectClass=posixAccount)(uid=jdoe)) never decodes objectClass's list.
                let mut ordered = Vec::with_capacity(filters.len());
                for filter in filters {
                    let estimate = if filters.len() > 1 {
                        self.estimated_candidate_count(filter, memo)?
                    } else {
                        None
                    };
                    ordered.push((estimate, filter));
                }
                // Known estimates ascending, unknown ones last.
                ordered.sort_by_key(|(estimate, _)| estimate.unwrap_or(u64::MAX));
                let mut result: Option<RoaringBitmap> = None;
                for (estimate, filter) in ordered {
                    if let Some(candidates) = &result {
                        let worth = match estimate {
                            Some(list_id_count) => {
                                worth_intersecting(candidates.len(), list_id_count)
                            }
                            None => candidates.len() > CANDIDATES_FEW_ENOUGH,
                        };
                        if !worth {
                            break;
                        }
                    }
                    if let Some(ids) = self.filter_candidates_with(filter, memo)? {
                        result = Some(match result {
                            None => ids,
                            Some(previous) => previous & ids,
                        });
                    }
                }
                result
            }
            PreparedFilter::Or(filters) => {
                let mut union = RoaringBitmap::new();
                for filter in filters {
                    match self.filter_candidates_with(filter, memo)? {
                        Some(ids) => union |= ids,
                        None => return Ok(None),
                    }
                }
                Some(union)
            }
            PreparedFilter::Not(_) => None,
            PreparedFilter::Equality { .. }
            | PreparedFilter::Approx { .. }
            | PreparedFilter::Substrings { .. } => match leaf_keys(filter) {
                LeafKeys::Keys {
                    covered,
                    kind,
                    keys,
                } => self.leaf_candidates(covered, kind, &keys, memo)?,
                LeafKeys::Unindexed | LeafKeys::NotKeyed => None,
            },
            PreparedFilter::GreaterOrEqual {
                covered, rule, key, ..
            } => self.ordered_candidates(covered, *rule, key, true, memo)?,
            PreparedFilter::LessOrEqual {
                covered, rule, key, ..
            } => self.ordered_candidates(covered, *rule, key, false, memo)?,
            PreparedFilter::Present { covered, .. } => {
                let covered: Vec<CoveredAttribute> = covered
                    .iter()
                    .map(|attr| CoveredAttribute {
                        attr: *attr,
                        stored_form_usable: true,
                    })
                    .collect();
                self.leaf_candidates(
                    &covered,
                    IndexKinds::PRESENCE,
                    &[layout::presence_key()],
                    memo,
                )?
            }
            PreparedFilter::Extensible { .. } => None,
            // The resolved closure is the exact set; unresolved, nothing can be True.
            PreparedFilter::InChain { members, .. } => Some(match members {
                Some(members) => RoaringBitmap::from_sorted_iter(members.ids().iter().copied())
                    .map_err(|_| corrupt("in-chain IDs out of order"))?,
                None => RoaringBitmap::new(),
            }),
        })
    }

    /// Resolves the candidates of a search within its scope. Returns the source to iterate.
    fn scoped_candidates<'t>(
        &'t self,
        spec: &SearchSpec,
        base: EntryId,
        memo: &mut CandidateMemo,
        nodes_read: &mut Vec<(EntryId, Node<'t>)>,
    ) -> Result<CandidateSource<'t>, LdapError> {
        // A base search examines one entry, which the exact test decides: the indexes could
        // only tell less, and a large filter's candidates cost far more than that test.
        let candidates = match spec.scope {
            Scope::Base => None,
            Scope::One | Scope::Sub => self.filter_candidates_with(&spec.filter, memo)?,
        };
        if let Some(few) = candidates.as_ref().filter(|candidates| {
            spec.scope != Scope::Base && candidates.len() <= NODES_READ_KEPT_MAX as u64
        }) {
            return Ok(CandidateSource::Ids(
                self.each_within_scope(spec.scope, base, few, nodes_read)?,
            ));
        }
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
                        CandidateSource::Ids(self.each_within_scope(
                            Scope::One,
                            base,
                            &candidates,
                            nodes_read,
                        )?)
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
                    Some(candidates) => CandidateSource::Ids(self.each_within_scope(
                        Scope::Sub,
                        base,
                        &candidates,
                        nodes_read,
                    )?),
                }
            }
        })
    }

    /// The `candidates` within one-level or subtree `scope` of `base`, checked one by one: each
    /// one's own node decides (its parent; its ancestry, through the DN cache), and the first
    /// `NODES_READ_KEPT_MAX` are kept for the output, which needs them for the DN anyway. It
    /// needs no node of the base: with at most `NODES_READ_KEPT_MAX` candidates the base's
    /// child and subtree counts, which choose between checking candidates and listing the
    /// base's children or subtree, are not read (an authrate or uid search has one candidate,
    /// and the base read was one more B-tree descent, ~1.7k of its ~47k instructions).
    fn each_within_scope<'t>(
        &'t self,
        scope: Scope,
        base: EntryId,
        candidates: &RoaringBitmap,
        nodes_read: &mut Vec<(EntryId, Node<'t>)>,
    ) -> Result<RoaringBitmap, LdapError> {
        let mut ids = RoaringBitmap::new();
        for id in candidates {
            let node = match scope {
                Scope::One => crate::read::read_node(&self.inner, self.txn(), id)?
                    .filter(|node| node.parent == base),
                Scope::Sub => self.node_if_within(id, base)?,
                Scope::Base => unreachable!("a base search has no candidate set"),
            };
            if let Some(node) = node {
                ids.insert(id);
                if nodes_read.len() < NODES_READ_KEPT_MAX {
                    nodes_read.push((id, node));
                }
            }
        }
        Ok(ids)
    }

    /// Runs a search; iterate the cursor for the matching entries in ID order.
    pub fn search<'a>(&'a self, spec: &'a SearchSpec) -> Result<SearchCursor<'a>, LdapError> {
        let base = self.normalized_dn_to_id(&spec.base)?;
        self.search_from(spec, base, CandidateMemo::default())
    }

    /// Runs a search whose base the caller has already resolved to `base` (the entry
    /// `spec.base` names in this txn), with what its estimates kept in `memo` (this txn's).
    pub fn search_from<'a>(
        &'a self,
        spec: &'a SearchSpec,
        base: EntryId,
        mut memo: CandidateMemo,
    ) -> Result<SearchCursor<'a>, LdapError> {
        let mut nodes_read = Vec::new();
        let source = self.scoped_candidates(spec, base, &mut memo, &mut nodes_read)?;
        let filter_uses_entry_dn = self
            .schema()
            .known_attributes()
            .entry_dn
            .is_some_and(|entry_dn| filter_mentions(&spec.filter, entry_dn));
        // Only a subtree output can hold an entry and its parent (a base search has one entry,
        // a one-level search siblings), and only an inverted link can put the child first.
        let tree = (spec.scope == Scope::Sub && self.has_inverted_links()?).then(|| TreeOrdering {
            finder: PositionFinder::default(),
            deferred: BinaryHeap::new(),
            ahead: None,
            resume: None,
            replay: RoaringBitmap::new(),
        });
        let nodes = matches!(source, CandidateSource::Sequential { .. }).then(NodeWalk::default);
        Ok(SearchCursor {
            read: self,
            spec,
            source,
            nodes,
            returned: 0,
            examined: 0,
            undecodable: 0,
            finished: false,
            source_done: false,
            tree,
            last_position: None,
            filter_uses_entry_dn,
            stop: None,
            nodes_read,
        })
    }

    /// The scope-intersected candidate set (before the exact filter test).
    pub fn search_candidates(&self, spec: &SearchSpec) -> Result<RoaringBitmap, LdapError> {
        let base = self.normalized_dn_to_id(&spec.base)?;
        Ok(
            match self.scoped_candidates(
                spec,
                base,
                &mut CandidateMemo::default(),
                &mut Vec::new(),
            )? {
                CandidateSource::Ids(ids) => ids,
                CandidateSource::Sequential { .. } => subtree_ids(&self.inner, self.txn(), base)?,
            },
        )
    }
}

impl<'a> SearchCursor<'a> {
    /// Skips every candidate up to and including the entry `id` (paged results: a new read
    /// txn per page resumes after the last entry sent).
    pub fn resume_after(mut self, id: EntryId) -> SearchCursor<'a> {
        if self.tree.is_none() {
            if id == EntryId::MAX {
                self.finished = true;
                return self;
            }
            return self.resume_from(TreePosition::in_id_order(id + 1));
        }
        let position = PositionFinder::default()
            .position(&self.read.inner, self.read.txn(), id)
            .ok()
            .flatten()
            // An entry deleted since: its ID-order place is the best guess.
            .unwrap_or(TreePosition::in_id_order(id));
        // The next position after it (the ID is the last field of the order).
        self.resume_from(TreePosition {
            id: position.id.saturating_add(1),
            ..position
        })
    }

    /// Skips every candidate before `position` (paged results: the position of the first
    /// entry not sent, from `last_position`, carried in the cookie).
    pub fn resume_from(mut self, position: TreePosition) -> SearchCursor<'a> {
        let Some(tree) = &mut self.tree else {
            // ID order: positions are IDs.
            match &mut self.source {
                CandidateSource::Ids(ids) => {
                    ids.remove_range(..position.top);
                }
                CandidateSource::Sequential { next, rows } => {
                    *next = (*next).max(position.top);
                    *rows = None;
                }
            }
            return self;
        };
        tree.resume = Some(position);
        // Only IDs below an inverted link can still be ahead of the position while lower than
        // its top; without the record (an old DB opened read-only) every candidate is checked.
        let ahead = match self.read.inversions_tracked() {
            Ok(true) => ids_still_ahead_below(self.read, position),
            Ok(false) => return self,
            Err(error) => Err(error),
        };
        let Ok(ahead) = ahead else {
            // Checking every candidate is always correct, only slower.
            return self;
        };
        match &mut self.source {
            CandidateSource::Ids(ids) => {
                let mut below = ids.clone();
                below.remove_range(position.top..);
                tree.replay = below & ahead;
                ids.remove_range(..position.top);
            }
            CandidateSource::Sequential { next, rows } => {
                // The sequential source covers the subtree being everything: every ID.
                tree.replay = ahead;
                tree.replay.remove_range(position.top..);
                *next = (*next).max(position.top);
                *rows = None;
            }
        }
        self
    }

    /// Where the entry last returned stands: a page that ends before it resumes from here.
    pub fn last_position(&self) -> Option<TreePosition> {
        self.last_position
    }

    /// Ends the search with `check`'s error once it gives one; asked between candidates,
    /// matching or not, so the caller's limits hold even while nothing matches.
    pub fn stop_when(mut self, check: impl Fn() -> Option<LdapError> + 'a) -> SearchCursor<'a> {
        self.stop = Some(Box::new(check));
        self
    }

    /// Matching entries returned so far.
    pub fn returned(&self) -> usize {
        self.returned
    }

    /// The next candidate ID in ID order (the replayed ones first), None when exhausted; for
    /// the sequential source also its id2entry value.
    fn next_candidate_id(&mut self) -> Result<Option<Candidate<'a>>, LdapError> {
        if let Some(id) = self.tree.as_mut().and_then(|tree| {
            let id = tree.replay.min()?;
            tree.replay.remove(id);
            Some(id)
        }) {
            return Ok(Some((id, None)));
        }
        match &mut self.source {
            CandidateSource::Ids(ids) => Ok(ids.min().map(|id| {
                ids.remove(id);
                (id, None)
            })),
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
                    self.source_done = true;
                }
                Ok(Some((id, Some(value))))
            }
        }
    }

    /// The candidate's tree position when the search orders by it; Err(()) when the
    /// candidate is to be skipped (before the resumed-from position, or without a node).
    fn candidate_position(
        &mut self,
        id: EntryId,
    ) -> Result<Result<Option<TreePosition>, ()>, LdapError> {
        let Some(tree) = &mut self.tree else {
            return Ok(Ok(None));
        };
        Ok(
            match tree
                .finder
                .position(&self.read.inner, self.read.txn(), id)?
            {
                None => Err(()),
                Some(position) if tree.resume.is_some_and(|resume| position < resume) => Err(()),
                Some(position) => Ok(Some(position)),
            },
        )
    }

    fn next_candidate(&mut self) -> Result<Option<Found<'a>>, LdapError> {
        loop {
            let Some((id, value)) = self.next_candidate_id()? else {
                return Ok(None);
            };
            // Positions first: a candidate an earlier page sent costs no entry read.
            let Ok(position) = self.candidate_position(id)? else {
                continue;
            };
            let value = match value {
                Some(value) => Some(value),
                // A candidate from an index may have been deleted only if the index is wrong;
                // skip silently rather than fail the search (check() reports it).
                None => {
                    let read: &'a ReadTxn = self.read;
                    read.inner
                        .databases
                        .id2entry
                        .get(read.txn(), &layout::encode_id(id))
                        .map_err(lmdb_to_ldap)?
                }
            };
            if let Some(entry) = value.and_then(|value| self.decoded_or_skipped(id, value)) {
                return Ok(Some((id, entry, position)));
            }
        }
    }

    /// The decoded entry, or None (logged) when it cannot be decoded: one damaged entry must
    /// not end every search that meets it. `lmdir check` names it; the rootdn can delete it.
    fn decoded_or_skipped(&mut self, id: EntryId, value: &'a [u8]) -> Option<EntryRef<'a>> {
        let read: &'a ReadTxn = self.read;
        match read.entry_from_bytes(id, value) {
            Ok(entry) => Some(entry),
            Err(error) => {
                self.undecodable += 1;
                // Counted as examined too: the lookthrough limit bounds the work either way.
                self.examined += 1;
                tracing::error!(
                    entry = id,
                    "search skips an undecodable entry (run `lmdir check`): {}",
                    error.message
                );
                None
            }
        }
    }

    /// Candidates skipped because they could not be decoded.
    pub fn undecodable(&self) -> usize {
        self.undecodable
    }
}

impl<'a> SearchCursor<'a> {
    /// The next candidate that matches the filter, in ID order; None once the source is
    /// exhausted. Counts examined candidates and applies the stop check and lookthrough limit.
    fn next_match(&mut self) -> Option<Result<Found<'a>, LdapError>> {
        while !self.source_done {
            let (id, entry, position) = match self.next_candidate() {
                Ok(Some(found)) => found,
                Ok(None) => {
                    self.source_done = true;
                    return None;
                }
                Err(error) => return Some(Err(error)),
            };
            self.examined += 1;
            if self.examined.is_multiple_of(STOP_CHECK_INTERVAL_CANDIDATES) {
                if let Some(error) = self.stop.as_ref().and_then(|check| check()) {
                    return Some(Err(error));
                }
            }
            if self.spec.lookthrough_limit != 0 && self.examined > self.spec.lookthrough_limit {
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
                let read: &'a ReadTxn = self.read;
                let known = || {
                    let found = self.nodes_read.iter().find(|(known, _)| *known == id);
                    found.map(|(_, node)| *node)
                };
                let entry = match self
                    .nodes
                    .as_mut()
                    .and_then(|nodes| nodes.node_of(read, id))
                    .or_else(known)
                {
                    Some(node) => entry.with_node(node),
                    None => entry,
                };
                return Some(Ok((id, entry, position)));
            }
        }
        None
    }

    /// The next match in tree-position order: matches come in ID order, and one whose
    /// position's top is above its own ID waits (as its position only) until every match
    /// before it has gone out. A waiting match is read again when its turn comes.
    fn next_in_tree_order(&mut self) -> Option<Result<Found<'a>, LdapError>> {
        loop {
            let tree = self.tree.as_ref()?;
            if tree.ahead.is_none() && !self.source_done {
                let (id, entry, position) = match self.next_match() {
                    // Exhausted: what waits goes out next.
                    None => continue,
                    Some(Ok(found)) => found,
                    Some(Err(error)) => return Some(Err(error)),
                };
                let position = position.unwrap_or(TreePosition::in_id_order(id));
                let tree = self.tree.as_mut()?;
                if position.top > id {
                    if tree.deferred.len() >= TREE_ORDER_DEFERRED_ENTRIES_MAX {
                        return Some(Err(LdapError::new(
                            ResultCode::AdminLimitExceeded,
                            format!(
                                "more than {TREE_ORDER_DEFERRED_ENTRIES_MAX} matching entries \
                                 wait for a parent with a higher entry ID"
                            ),
                        )));
                    }
                    tree.deferred.push(Reverse(position));
                } else {
                    tree.ahead = Some((position, entry));
                }
                continue;
            }
            let tree = self.tree.as_mut()?;
            let waiting_first = match (tree.deferred.peek(), &tree.ahead) {
                (None, _) => false,
                (Some(Reverse(waiting)), Some((ahead, _))) => waiting < ahead,
                (Some(_), None) => true,
            };
            if !waiting_first {
                let (position, entry) = tree.ahead.take()?;
                return Some(Ok((position.id, entry, Some(position))));
            }
            let Reverse(position) = tree.deferred.pop()?;
            match self.read.entry(position.id) {
                Ok(Some(entry)) => {
                    let entry = if self.filter_uses_entry_dn {
                        entry.with_virtual_entry_dn()
                    } else {
                        entry
                    };
                    return Some(Ok((position.id, entry, Some(position))));
                }
                // Read and decoded a moment ago in this same snapshot.
                Ok(None) => continue,
                Err(error) => return Some(Err(error)),
            }
        }
    }
}

impl<'a> Iterator for SearchCursor<'a> {
    type Item = Result<(EntryId, EntryRef<'a>), LdapError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let found = if self.tree.is_some() {
            self.next_in_tree_order()
        } else {
            self.next_match()
        };
        let (id, entry, position) = match found {
            None => {
                self.finished = true;
                return None;
            }
            Some(Err(error)) => {
                self.finished = true;
                return Some(Err(error));
            }
            Some(Ok(found)) => found,
        };
        if self.spec.size_limit != 0 && self.returned >= self.spec.size_limit {
            self.finished = true;
            return Some(Err(LdapError::new(
                ResultCode::SizeLimitExceeded,
                format!("more than {} entries match", self.spec.size_limit),
            )));
        }
        self.returned += 1;
        self.last_position = Some(position.unwrap_or(TreePosition::in_id_order(id)));
        Some(Ok((id, entry)))
    }
}
