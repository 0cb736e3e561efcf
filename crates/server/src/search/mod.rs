//! Search: one request in one read txn, filtered and returned as the subject may see it
//! (restricted filters, candidate filters, hidden bases answering as missing), sorted and paged
//! within bounds, on the connection's task when the index says it is small.

mod accesslog;
mod aliases;
mod built;
pub mod hidden;
mod in_chain;
mod monitor;
mod paging;
mod persist;
mod sort;
mod subschema;
mod sync;
mod vlv;

use crate::ber::ResponseControl;
use crate::context::{
    database_of, internal, no_such_object, Database, OperationContext, ServerContext,
};
use crate::controls::RequestControls;
use crate::entry_read::{
    check_read_assertion, disclosed_entry, write_stored_entry, Selection, Subordinates,
};
use crate::filter::{client_filter, client_filter_with_items};
use crate::identity::Identity;
use crate::request::SearchRequest;
use crate::result::{code, OperationError};
use crate::selection::AttributeSelection;
use crate::settings::ServerSettings;
use bytes::BytesMut;
use ldap3_proto::proto::{LdapDerefAliases, LdapSearchScope};
use lmdir_access::acl::{EntryAccess, Subject};
use lmdir_schema::{LdapError, PreparedFilter};
use lmdir_store::TreePosition;
use lmdir_store::{CandidateMemo, ReadTxn, Scope, SearchCursor, SearchSpec};
use paging::{paged_response_control, request_fingerprint, PageRequest};
use sort::{
    compare_sort_values, plan_sort, sort_response_control, sort_values, PlannedSortKey, SortBuffer,
    SortPlan,
};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Search output is handed to the connection in chunks of about this size. Each hand-off wakes
/// two threads; on a loaded machine fewer, larger ones preempt the reading client less (a full
/// scan through ldapsearch measured faster with 256 KiB than with 64 KiB).
const SEARCH_CHUNK_BYTES: usize = 256 * 1024;
/// The output buffer a search starts with: most searches return an entry or a few (an
/// equality search one of ~1 KiB), so the full chunk is reserved only once the first one fills.
const SEARCH_FIRST_BUFFER_BYTES: usize = 8 * 1024;

/// How a search ended (the SearchResultDone to send).
pub struct SearchDone {
    pub result: Result<(), OperationError>,
    pub entries_sent: u64,
    pub response_controls: Vec<ResponseControl>,
}

pub(super) fn scope_of(scope: &LdapSearchScope) -> Result<Scope, OperationError> {
    match scope {
        LdapSearchScope::Base => Ok(Scope::Base),
        LdapSearchScope::OneLevel => Ok(Scope::One),
        LdapSearchScope::Subtree => Ok(Scope::Sub),
        LdapSearchScope::Children => Err(OperationError::new(
            code::PROTOCOL_ERROR,
            "subordinate (children) scope is not supported",
        )),
    }
}

/// A search request as its connection first sees it: the filter converted and prepared once
/// (when it is small enough to do that on the connection's task), and whether the index says the
/// search is small. A small one runs on the connection's task, in the read transaction its
/// estimate used.
pub struct PreparedSearch {
    /// None: not converted yet (too big for the connection's task; the search converts it).
    filter: Option<Result<PreparedFilter, OperationError>>,
    /// The estimate's read transaction and what the estimate kept, only for a search that
    /// runs right away.
    read: Option<(ReadTxn, CandidateMemo)>,
    /// The base DN normalized (None: not yet): once per search, for the special bases, the
    /// estimate and the base check alike.
    normalized_base: Option<Result<String, OperationError>>,
    /// Run on the connection's task rather than the blocking pool.
    pub small: bool,
}

/// Most index candidates a search may have to run on the async task instead of the blocking
/// pool: small enough that it finishes in microseconds and never stalls other clients.
const INLINE_SEARCH_CANDIDATES_MAX: u64 = 16;

/// Most filter items (leaves plus substring pieces) a search may have to be considered for the
/// async task: deciding reads one posting header per item, and a big filter is never small.
const INLINE_SEARCH_FILTER_ITEMS_MAX: usize = 64;
/// Most bytes a search's filter (BER) may have to be considered for the async task: decoding
/// and normalizing it there must take microseconds.
const INLINE_SEARCH_FILTER_BYTES_MAX: usize = 4096;

impl PreparedSearch {
    /// Converts the filter (if small) and decides whether the search is known, from the index
    /// (posting headers, and a leaf's lists when they are short: see
    /// `ReadTxn::estimated_candidate_count`, which keeps those candidates for the search in the
    /// same txn), to examine at most `INLINE_SEARCH_CANDIDATES_MAX` entries; base-scope
    /// reads are when their filter is small too. Any doubt answers not small. The estimate reads only the items the
    /// subject may search everywhere (as the search itself), so which thread runs a search
    /// does not depend on hidden values.
    pub fn new(
        (server, settings): (&ServerContext, &ServerSettings),
        identity: &Identity,
        request: &SearchRequest,
    ) -> PreparedSearch {
        let base_scope = matches!(request.scope, LdapSearchScope::Base);
        // Small only once the filter is known to be: a base search's one entry is examined
        // at once, but a large filter's decoding and test are not (a base search with 10,000
        // items ran on the connection's task, which then read nothing: not its Abandon).
        let mut prepared = PreparedSearch {
            filter: None,
            read: None,
            normalized_base: None,
            small: false,
        };
        let Some(database) = database_of(server) else {
            // The root DSE and the monitor: one entry, tested as the filter's bytes allow.
            prepared.small =
                base_scope && request.filter.as_bytes().len() <= INLINE_SEARCH_FILTER_BYTES_MAX;
            return prepared;
        };
        prepared.normalized_base = Some(normalized_base(database, request));
        if request.filter.as_bytes().len() > INLINE_SEARCH_FILTER_BYTES_MAX {
            return prepared;
        }
        let decoded = client_filter_with_items(settings, &request.filter);
        let few_items =
            matches!(decoded, Ok((_, items)) if items <= INLINE_SEARCH_FILTER_ITEMS_MAX);
        let filter = decoded.map(|(filter, _)| database.schema().prepare_filter(&filter));
        // An in-chain item walks the directory before the search: never on this task.
        let in_chain = matches!(&filter, Ok(filter) if filter.has_unresolved_in_chain());
        if !few_items || in_chain {
            prepared.filter = Some(filter);
            return prepared;
        }
        // Dereferencing may move the search to another subtree, or several: not inline, unless
        // the snapshot holds no alias (then it is a search like any other).
        let dereferences = !matches!(request.aliases, LdapDerefAliases::Never);
        if base_scope {
            prepared.small = true;
        } else if let (Ok(filter), Some(Ok(base))) = (&filter, &prepared.normalized_base) {
            prepared.read = database.small_search_txn(identity, base, filter, dereferences);
            prepared.small = prepared.read.is_some();
        }
        prepared.filter = Some(filter);
        prepared
    }
}

impl Database {
    /// The read transaction the estimate used when the search is small, else None (also when
    /// it `dereferences` aliases and the snapshot may hold some).
    fn small_search_txn(
        &self,
        identity: &Identity,
        normalized_base: &str,
        filter: &PreparedFilter,
        dereferences: bool,
    ) -> Option<(ReadTxn, CandidateMemo)> {
        let read = self.store.read().ok()?;
        if dereferences && read.may_hold_aliases().unwrap_or(true) {
            return None;
        }
        let mut memo = CandidateMemo::default();
        let count = {
            let groups = self.groups(&read);
            let subject = self.subject(identity, &groups);
            let policy = self.policy();
            let subject_access = policy.for_subject_within(&subject, normalized_base);
            read.estimated_candidate_count(&subject_access.candidate_filter(filter), &mut memo)
        };
        matches!(count, Ok(Some(count)) if count <= INLINE_SEARCH_CANDIDATES_MAX)
            .then_some((read, memo))
    }
}

/// The search's base DN normalized (once per thread and schema: `bases`).
fn normalized_base(database: &Database, request: &SearchRequest) -> Result<String, OperationError> {
    crate::bases::normalized_base(&database.schema(), &request.base).map_err(OperationError::from)
}

/// The filter of a search, converted now unless `PreparedSearch` did it already.
fn prepared_filter(
    database: &Database,
    settings: &ServerSettings,
    request: &SearchRequest,
    converted: Option<Result<PreparedFilter, OperationError>>,
) -> Result<PreparedFilter, OperationError> {
    let mut prepared = PreparedSearch {
        filter: converted,
        read: None,
        normalized_base: None,
        small: false,
    };
    prepared.take_filter(&database.schema(), settings, request)
}

impl PreparedSearch {
    /// The search's filter prepared against `schema`: the one converted on arrival, or
    /// converted now.
    pub(crate) fn take_filter(
        &mut self,
        schema: &lmdir_schema::Schema,
        settings: &ServerSettings,
        request: &SearchRequest,
    ) -> Result<PreparedFilter, OperationError> {
        match self.filter.take() {
            Some(filter) => filter,
            None => Ok(schema.prepare_filter(&client_filter(settings, &request.filter)?)),
        }
    }
}

pub async fn search(
    context: &OperationContext,
    request: &SearchRequest,
    controls: &RequestControls,
    selection: &AttributeSelection,
    prepared: Box<PreparedSearch>,
) -> Result<SearchDone, OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(&request.base));
    };
    let PreparedSearch {
        mut filter,
        read,
        normalized_base,
        small,
    } = *prepared;
    let normalized_base =
        normalized_base.unwrap_or_else(|| self::normalized_base(database, request));
    let base = normalized_base.as_deref().ok();
    let requested = (selection, controls.matched_values.as_deref());
    let subschema =
        subschema::subschema_search(context, database, request, requested, base, &mut filter);
    if let Some(result) = subschema {
        let (buffer, count) = result?;
        if count > 0 {
            context.sink.send(buffer.freeze()).await;
        }
        return Ok(SearchDone {
            result: Ok(()),
            entries_sent: count,
            response_controls: Vec::new(),
        });
    }
    if let (Some(tree), Some(base)) = (built::BuiltTree::of(database, base), base) {
        let asked = (request, controls, selection);
        return built::search_built_tree(context, database, asked, (tree, base), filter).await;
    }
    sync_deref_allowed(context, request, controls)?;
    // A persistent search subscribes to the changes before its refresh opens its snapshot (so
    // no change falls between), hence never in the estimate's earlier read txn.
    let subscription = persist::subscribe(context, database, (request, controls))?;
    // No sync search runs on the connection's task: its delete phase reads the session log
    // and renamed subtrees, however few entries its scope holds. A persistent search drops the
    // estimate's read txn here, before its subscription: kept (shadowed, not dropped) it lived
    // as long as the search, and LMDB reuses no page freed after the oldest reader's snapshot.
    let (read, small) = match (&subscription, &controls.sync) {
        (Some(_), _) => {
            drop(read);
            (None, false)
        }
        (None, Some(_)) => (read, false),
        (None, None) => (read, small),
    };
    // Boxed: a job is about a kilobyte, which each future it passes through would copy.
    let job_of = |filter, read, normalized_base| {
        Box::new(SearchJob {
            request: Cow::Borrowed(request),
            controls: Cow::Borrowed(controls),
            selection: Cow::Borrowed(selection),
            identity: Cow::Borrowed(&context.session.identity),
            message_id: context.message_id,
            connection_id: context.session.connection_id,
            cancelled: context.cancelled.clone(),
            filter,
            read,
            normalized_base,
        })
    };
    let follow = subscription
        .map(|subscription| (subscription, job_of(None, None, normalized_base.clone())));
    let (done, refresh_end) =
        run_job(context, job_of(filter, read, normalized_base), small).await?;
    match (follow, refresh_end) {
        (Some((subscription, job)), Some(end)) if done.result.is_ok() => {
            job.persist(context, database, subscription, end, done.entries_sent)
                .await
        }
        _ => Ok(done),
    }
}

/// A provider's sync search (RFC 4533) that dereferences aliases in searching (`search`,
/// `always`) is a protocolError (2) "illegal value for derefAliases", before anything else
/// (its base is not looked up, no persist slot is taken), as slapd's syncprov answers it:
/// a consumer could not follow entries reached through aliases. `find` is served.
fn sync_deref_allowed(
    context: &OperationContext,
    request: &SearchRequest,
    controls: &RequestControls,
) -> Result<(), OperationError> {
    let searching = matches!(
        request.aliases,
        LdapDerefAliases::InSearching | LdapDerefAliases::Always
    );
    if searching && controls.sync.is_some() && context.settings.replication.provider {
        return Err(OperationError::new(
            code::PROTOCOL_ERROR,
            "illegal value for derefAliases",
        ));
    }
    Ok(())
}

/// Runs a search's job: here when small, else on the blocking pool.
async fn run_job(
    context: &OperationContext,
    job: Box<SearchJob<'_>>,
    small: bool,
) -> Result<(SearchDone, Option<sync::RefreshEnd>), OperationError> {
    if small {
        let database = database_of(&context.server).expect("database present");
        // Few candidates: run on this task; a hop to the blocking pool and back would cost
        // more than the search (two thread wake-ups per operation on a busy server).
        let mut chunks = Vec::new();
        let done = job.run(database, &context.settings, &mut |chunk| {
            chunks.push(chunk);
            true
        });
        for chunk in chunks {
            if !context.sink.send(chunk).await {
                return Err(OperationError::new(code::OTHER, "connection closed"));
            }
        }
        return done;
    }
    let (server, settings) = (context.server.clone(), context.settings.clone());
    let sink = context.sink.clone();
    let job = Box::new(job.into_owned());
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        job.run(database, &settings, &mut |chunk| sink.send_blocking(chunk))
    })
    .await
    .map_err(internal)?
}

/// One search request with what it needs from its connection, run in one read txn. It
/// borrows the request from the operation while it runs on the connection's task, and owns a
/// copy only when it moves to the blocking pool.
struct SearchJob<'a> {
    request: Cow<'a, SearchRequest>,
    controls: Cow<'a, RequestControls>,
    selection: Cow<'a, AttributeSelection>,
    identity: Cow<'a, Identity>,
    message_id: i32,
    connection_id: u64,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
    filter: Option<Result<PreparedFilter, OperationError>>,
    read: Option<(ReadTxn, CandidateMemo)>,
    normalized_base: Result<String, OperationError>,
}

/// What a search resolved once at its start and its first steps read (`resolve_base`,
/// `resolve_in_chain`, `sync_refresh`): its database and settings, its read txn, its subject
/// and the limits that subject gets, and when it started.
#[derive(Clone, Copy)]
struct SearchContext<'s, 'g> {
    database: &'s Database,
    settings: &'s ServerSettings,
    read: &'s ReadTxn,
    subject: &'s Subject<'g>,
    effective: &'s crate::limits::EffectiveLimits,
    started: Instant,
}

/// How a search walks its candidates (`SearchJob::answer`): what it searches, which entries
/// it returns, where it stops, and the page it serves (None unpaged).
#[derive(Clone, Copy)]
struct SearchWalk<'w> {
    spec: &'w SearchSpec,
    visible: &'w VisibleEntries<'w>,
    limits: &'w SearchLimits,
    page: Option<&'w PageRequest>,
}

/// Where a search starts, resolved once: its base's entry ID in the search's read txn and what
/// the estimate kept of its candidates; consumed by the store's search. `extra`: the further
/// searches its aliases add (`aliases.rs`), each with its own root, walked after the base's.
struct SearchStart<'s> {
    base: lmdir_store::EntryId,
    memo: CandidateMemo,
    extra: &'s [(SearchSpec, lmdir_store::EntryId)],
}

/// The candidates of a search: the base's cursor, then those of the roots its aliases add
/// (disjoint subtrees, or single entries for a one-level search).
struct Walk<'r> {
    cursors: Vec<SearchCursor<'r>>,
    at: usize,
}

impl<'r> Iterator for Walk<'r> {
    type Item = Result<(lmdir_store::EntryId, lmdir_store::EntryRef<'r>), LdapError>;

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(cursor) = self.cursors.get_mut(self.at) {
            if let Some(item) = cursor.next() {
                return Some(item);
            }
            self.at += 1;
        }
        None
    }
}

/// A sink takes each chunk of encoded entries; false means the connection is gone.
type ChunkSink<'a> = dyn FnMut(bytes::Bytes) -> bool + 'a;
/// The size and time limits of a search: the client's, capped by the subject's (`[[limits]]` or
/// the server's; none for the rootdn); a paged search's size limit is its total over all pages.
/// 0 / zero = unlimited.
fn search_limits(
    effective: &crate::limits::EffectiveLimits,
    request: &SearchRequest,
    paged: bool,
) -> (u64, std::time::Duration) {
    let requested = u64::try_from(request.sizelimit.max(0)).unwrap_or(0);
    let configured = if paged {
        effective.paged_total
    } else {
        effective.size
    };
    let size_limit = match (requested, configured) {
        (0, limit) | (limit, 0) => limit,
        (requested, configured) => requested.min(configured),
    };
    let requested =
        std::time::Duration::from_secs(u64::try_from(request.timelimit.max(0)).unwrap_or(0));
    let configured = effective.time;
    let time_limit = match (requested.is_zero(), configured.is_zero()) {
        (true, _) => configured,
        (_, true) => requested,
        _ => requested.min(configured),
    };
    (size_limit, time_limit)
}

impl SearchJob<'_> {
    /// The job with its own copy of what it borrowed, for the blocking pool.
    fn into_owned(self) -> SearchJob<'static> {
        SearchJob {
            request: Cow::Owned(self.request.into_owned()),
            controls: Cow::Owned(self.controls.into_owned()),
            selection: Cow::Owned(self.selection.into_owned()),
            identity: Cow::Owned(self.identity.into_owned()),
            message_id: self.message_id,
            connection_id: self.connection_id,
            cancelled: self.cancelled,
            filter: self.filter,
            read: self.read,
            normalized_base: self.normalized_base,
        }
    }

    /// The sort keys, resolved (or why they cannot be used); more than `sort_keys_max` is
    /// adminLimitExceeded before anything is read, and a critical sort that cannot be done
    /// fails the search (RFC 2891 §2).
    fn sort_plan(
        &self,
        database: &Database,
        settings: &ServerSettings,
    ) -> Result<Option<SortPlan>, OperationError> {
        let plan = match &self.controls.sort {
            Some(keys) if keys.len() > settings.sort_keys_max => {
                return Err(OperationError::new(
                    code::ADMIN_LIMIT_EXCEEDED,
                    format!("more than {} sort keys", settings.sort_keys_max),
                ))
            }
            Some(keys) => plan_sort(&database.schema(), keys),
            None => return Ok(None),
        };
        if let (Err((result_code, attribute)), true) = (&plan, self.controls.sort_critical) {
            return Err(OperationError::new(
                code::UNAVAILABLE_CRITICAL_EXTENSION,
                format!(
                    "critical sort control: cannot sort by {attribute} (result code {result_code})"
                ),
            ));
        }
        Ok(Some(plan))
    }

    /// The requested attributes resolved against the schema, with the matched values control;
    /// a sync search sends stored values only (a consumer refuses computed ones).
    fn resolved_selection(&self, database: &Database) -> Selection {
        let selection = Selection::resolve(&database.schema(), &self.selection)
            .with_matched_values(&database.schema(), self.controls.matched_values.as_deref());
        match self.controls.sync {
            Some(_) => selection.stored_only(),
            None => selection,
        }
    }

    /// The base entry as the subject may see it (noSuchObject as a missing one otherwise),
    /// search access on it (as back-mdb: insufficientAccess when the base is disclosed but not
    /// searchable) and the assertion control on it (RFC 4528 §3); returns its entry ID.
    fn check_base(
        &self,
        database: &Database,
        settings: &ServerSettings,
        read: &ReadTxn,
        subject: &Subject<'_>,
        normalized_base: &str,
    ) -> Result<lmdir_store::EntryId, OperationError> {
        // Without an assertion to test on it, a base the subject may search needs only to
        // exist: when every entry in scope is searchable by the subject (decided from the
        // rules alone), its entry is not read. A missing base takes the general path, which
        // finds the matched DN.
        if self.controls.assertion.is_none() {
            if let Ok(id) = read.normalized_dn_to_id(normalized_base) {
                if database
                    .policy()
                    .for_subject_within(subject, normalized_base)
                    .can_search_every_entry()
                {
                    return Ok(id);
                }
            }
        }
        let (id, base_entry) =
            disclosed_entry(database, read, subject, &self.request.base, normalized_base)?;
        let policy = database.policy();
        let access = policy.for_entry(subject, normalized_base, &base_entry);
        if !access.can_search_entry() {
            return Err(OperationError::new(
                code::INSUFFICIENT_ACCESS_RIGHTS,
                "no search access to the base entry",
            ));
        }
        if let Some(assertion) = &self.controls.assertion {
            check_read_assertion(database, settings, &access, &base_entry, assertion)?;
        }
        Ok(id)
    }

    /// The base as `check_base` finds it, once dereferenced when the search asks for it
    /// (`aliases.rs`), and the further roots the aliases in its scope add when dereferencing
    /// in searching (none otherwise).
    fn resolve_base(
        &self,
        context: &SearchContext<'_, '_>,
        deref: aliases::Deref,
    ) -> Result<(String, lmdir_store::EntryId, Vec<lmdir_store::EntryId>), OperationError> {
        let SearchContext {
            database,
            settings,
            read,
            subject,
            effective,
            started,
        } = *context;
        let alias_reader = aliases::Aliases::new(database, read, subject);
        let mut normalized_base = self.normalized_base.clone()?;
        if deref.finding {
            if let Some(target) = alias_reader.deref_base(&normalized_base)? {
                normalized_base = target;
            }
        }
        let base = self.check_base(database, settings, read, subject, &normalized_base)?;
        let scope = scope_of(&self.request.scope)?;
        if !deref.searching || scope == Scope::Base {
            return Ok((normalized_base, base, Vec::new()));
        }
        let limits = self.time_limit_only(effective, started);
        let stop = || self.stop_reason(&limits);
        let lookthrough = usize::try_from(effective.lookthrough).unwrap_or(usize::MAX);
        let roots = alias_reader.scope_roots(base, scope, lookthrough, &stop)?;
        Ok((normalized_base, base, roots))
    }

    /// The entries this search skips (`hidden.rs`): glue without ManageDsaIT, aliases when
    /// dereferencing in searching (but a base alias not dereferenced when finding it, as
    /// back-mdb), subentries as the Subentries control asks.
    fn hidden_entries<'r>(
        &self,
        read: &'r ReadTxn,
        scope: Scope,
        deref: aliases::Deref,
        base: lmdir_store::EntryId,
    ) -> Result<hidden::HiddenEntries<'r>, OperationError> {
        let hidden = hidden::HiddenEntries::new(read, scope, self.controls.subentries)?
            .showing_glue(self.controls.manage_dsa_it);
        Ok(match deref.searching {
            true => hidden.skipping_aliases((!deref.finding).then_some(base)),
            false => hidden,
        })
    }

    /// The page a paged search asks for (None unpaged), or the answer to a page size of 0,
    /// which abandons the paged search (RFC 2696 §3). Pages bigger than `page_size` (OpenLDAP
    /// size.pr) are served at that size.
    fn page_request(
        &self,
        database: &Database,
        effective: &crate::limits::EffectiveLimits,
    ) -> Result<Result<Option<PageRequest>, SearchDone>, OperationError> {
        let Some((size, cookie)) = &self.controls.paged else {
            return Ok(Ok(None));
        };
        if *size == 0 {
            return Ok(Err(SearchDone {
                result: Ok(()),
                entries_sent: 0,
                response_controls: vec![paged_response_control(&[])],
            }));
        }
        let size = match i64::try_from(effective.page_size) {
            Ok(page_size) if page_size > 0 => (*size).min(page_size),
            _ => *size,
        };
        let fingerprint = request_fingerprint(
            &self.request,
            self.controls.sort.as_deref(),
            self.connection_id,
        );
        Ok(Ok(Some(database.open_cookie(fingerprint, size, cookie)?)))
    }

    /// Runs the search; a refreshAndPersist refresh also returns where its persist phase
    /// starts.
    fn run(
        mut self: Box<Self>,
        database: &Database,
        settings: &ServerSettings,
        sink: &mut ChunkSink<'_>,
    ) -> Result<(SearchDone, Option<sync::RefreshEnd>), OperationError> {
        let started = Instant::now();
        let scope = scope_of(&self.request.scope)?;
        let prepared = prepared_filter(database, settings, &self.request, self.filter.take())?;
        let (read, memo) = self.take_read(database)?;
        let groups = database.groups(&read);
        let subject = database.subject(&self.identity, &groups);
        let effective = database.limits_of(settings, &subject);
        let context = SearchContext {
            database,
            settings,
            read: &read,
            subject: &subject,
            effective: &effective,
            started,
        };
        let deref = aliases::Deref::of(&self.request.aliases).within(&read)?;
        let (normalized_base, base, extra_roots) = self.resolve_base(&context, deref)?;
        let sort_plan = self.sort_plan(database, settings)?;
        let page = match self.page_request(database, &effective)? {
            Ok(page) => page,
            Err(abandoned) => return Ok((abandoned, None)),
        };
        self.check_combination(&extra_roots, sort_plan.as_ref(), page.is_some())?;
        // Index candidates and the store's own test use only what the subject may search
        // everywhere: hidden values feed neither timing nor the look-through count.
        let policy = database.policy();
        // Aliases may lead anywhere: decisions for the base's subtree alone would not hold.
        let subject_access = match extra_roots.is_empty() {
            true => policy.for_subject_within(&subject, &normalized_base),
            false => policy.for_subject(&subject),
        };
        let (prepared, lookthrough) = self.resolve_in_chain(&context, prepared)?;
        let (store_filter, client_filter) = store_filter(&subject_access, prepared);
        let spec = search_spec(normalized_base, scope, store_filter, lookthrough);
        let extra = alias_searches(&read, &spec, &extra_roots)?;
        let start = SearchStart {
            base,
            memo,
            extra: &extra,
        };
        let mut output = SearchOutput::new(&self, &context, sink);
        let hidden = self.hidden_entries(&read, scope, deref, base)?;
        let visible = VisibleEntries::new(
            (database, &policy),
            (&read, hidden),
            &subject,
            &subject_access,
            client_filter.as_ref().unwrap_or(&spec.filter),
            client_filter.is_none(),
        );
        let paged_or_sorted = page.is_some() || sort_plan.is_some();
        let mut sync = self.sync_refresh(&context, &spec.base, paged_or_sorted)?;
        // Counted in cn=Monitor and `lmdir_sync_searches` while the refresh runs (a persistent
        // search keeps its own guard for as long as it streams).
        let _sync_running = self.sync_search_guard(database, sync.as_ref());
        let limits = self.walk_limits(&effective, page.is_some(), sync.as_ref(), started);
        if let Some(refresh) = sync.as_mut() {
            self.delete_phase(refresh, &visible, base, spec.scope, &limits)?;
        }
        let walk = SearchWalk {
            spec: &spec,
            visible: &visible,
            limits: &limits,
            page: page.as_ref(),
        };
        let (mut done, refresh_end) = self.answer(
            settings,
            &walk,
            start,
            sort_plan.as_ref(),
            sync.as_ref(),
            &mut output,
        )?;
        output.flush();
        if let Some(plan) = &sort_plan {
            done.response_controls.push(sort_response_control(plan));
        }
        Ok((done, refresh_end))
    }

    /// The read txn the estimate opened (with what it kept of the candidates), or a new one
    /// when the search was not estimated.
    fn take_read(
        &mut self,
        database: &Database,
    ) -> Result<(ReadTxn, CandidateMemo), OperationError> {
        Ok(match self.read.take() {
            Some(planned) => planned,
            None => (
                database.store.read().map_err(internal)?,
                CandidateMemo::default(),
            ),
        })
    }

    /// Refuses the controls that do not go together: several roots (aliases) with an
    /// unsorted paged or a sync search (`walks_several_roots`), a virtual list view without
    /// its sort or with paging (`vlv_prerequisites`).
    fn check_combination(
        &self,
        extra_roots: &[lmdir_store::EntryId],
        sort_plan: Option<&SortPlan>,
        paged: bool,
    ) -> Result<(), OperationError> {
        if !extra_roots.is_empty() {
            let sorted = matches!(sort_plan, Some(Ok(_)));
            self.walks_several_roots(paged && !sorted)?;
        }
        if self.controls.vlv.is_some() {
            vlv_prerequisites(paged, sort_plan)?;
        }
        Ok(())
    }

    /// The sync refresh the search's Sync Request asks for at `normalized_base` (the base
    /// alias's target when found: the persist phase follows it too; None without a Sync
    /// Request); refused when the search is also paged or sorted.
    fn sync_refresh(
        &self,
        context: &SearchContext<'_, '_>,
        normalized_base: &str,
        paged_or_sorted: bool,
    ) -> Result<Option<sync::SyncRefresh>, OperationError> {
        let Some(request) = &self.controls.sync else {
            return Ok(None);
        };
        if paged_or_sorted {
            return Err(OperationError::new(
                code::UNWILLING_TO_PERFORM,
                "a sync search is neither paged nor sorted",
            ));
        }
        let replication = &context.settings.replication;
        Ok(Some(sync::SyncRefresh::start(
            request,
            normalized_base,
            replication.provider,
            replication.server_id,
            context.read,
            &context.database.schema(),
        )?))
    }

    /// Counts a running sync refresh (by mode) until the guard drops; None when the search
    /// is no sync search.
    fn sync_search_guard(
        &self,
        database: &Database,
        sync: Option<&sync::SyncRefresh>,
    ) -> Option<crate::replication_status::SyncSearchGuard> {
        self.controls
            .sync
            .as_ref()
            .filter(|_| sync.is_some())
            .map(|request| {
                let mode = match request.mode {
                    lmdir_sync::SyncMode::RefreshOnly => "refreshOnly",
                    lmdir_sync::SyncMode::RefreshAndPersist => "refreshAndPersist",
                };
                database.monitor().replication.sync_search_started(mode)
            })
    }

    /// The size limit and deadline the walk over the candidates stops at. A persistent search
    /// never ends on its own: no time limit (its refresh included).
    fn walk_limits(
        &self,
        effective: &crate::limits::EffectiveLimits,
        paged: bool,
        sync: Option<&sync::SyncRefresh>,
        started: Instant,
    ) -> SearchLimits {
        let (size, time) = search_limits(effective, &self.request, paged);
        let persistent = sync.is_some_and(|sync| sync.persist_start().is_some());
        SearchLimits {
            size,
            deadline: (!time.is_zero() && !persistent).then(|| started + time),
        }
    }

    /// A sync refresh's delete phase reads the session log (up to its cap) and renamed
    /// subtrees: under the search's deadline and abandon, before any entry is sent. Nothing
    /// for a refresh without one.
    fn delete_phase(
        &self,
        refresh: &mut sync::SyncRefresh,
        visible: &VisibleEntries<'_>,
        base: lmdir_store::EntryId,
        scope: Scope,
        limits: &SearchLimits,
    ) -> Result<(), OperationError> {
        if !refresh.is_delete_phase() {
            return Ok(());
        }
        refresh.collect_deletes(
            visible.read,
            &sync::DeleteTests {
                visible: &|id| visible.returns(base, scope, id),
                readable: &|id| visible.readable(id),
                stop: &|| self.stop_reason(limits).map(Into::into),
            },
        )
    }

    /// Walks the candidates the way the search asks: sorted (a valid sort plan), as a sync
    /// refresh (with where its persist phase starts once the refresh succeeded), or plain.
    fn answer(
        &self,
        settings: &ServerSettings,
        walk: &SearchWalk<'_>,
        start: SearchStart<'_>,
        sort_plan: Option<&SortPlan>,
        sync: Option<&sync::SyncRefresh>,
        output: &mut SearchOutput<'_, '_>,
    ) -> Result<(SearchDone, Option<sync::RefreshEnd>), OperationError> {
        let SearchWalk {
            spec,
            visible,
            limits,
            page,
        } = *walk;
        if let Some(Ok(keys)) = sort_plan {
            let done =
                self.run_sorted(settings, spec, start, visible, keys, limits, page, output)?;
            return Ok((done, None));
        }
        let Some(sync) = sync else {
            let done = self.run_unsorted(spec, start, visible, limits, page, output)?;
            return Ok((done, None));
        };
        let done = self.run_sync(spec, start, visible, limits, sync, output)?;
        let refresh_end = match done.result.is_ok() {
            true => sync.persist_start(),
            false => None,
        };
        Ok((done, refresh_end))
    }
}

/// What the store searches: the base and scope, the filter it tests itself and the
/// look-through the search has left (0 = unlimited).
fn search_spec(
    normalized_base: String,
    scope: Scope,
    store_filter: PreparedFilter,
    lookthrough: u64,
) -> SearchSpec {
    SearchSpec {
        base: normalized_base,
        scope,
        filter: store_filter,
        // The server counts returned entries itself (`SearchLimits::size`, over all pages):
        // the store's own count serves the offline `lmdir search`.
        size_limit: 0,
        lookthrough_limit: usize::try_from(lookthrough).unwrap_or(usize::MAX),
    }
}

/// One step of a search's walk over its candidates (`SearchJob::next_visible`).
enum Step<'r, 'v, 'a> {
    /// The next entry the subject gets back, with the subject's access to it (borrowed when
    /// every entry gives the same: no copy per entry).
    Visible(
        lmdir_store::EntryId,
        lmdir_store::EntryRef<'r>,
        Cow<'v, EntryAccess<'a>>,
    ),
    /// The walk is over: Ok when the candidates ran out, else why it stopped.
    End(Result<(), OperationError>),
}

/// The searches of the roots a search's aliases add (`aliases::Aliases::scope_roots`): the
/// search's own filter and look-through, the target's subtree (`spec` a subtree search) or
/// the target alone (a one-level one).
fn alias_searches(
    read: &ReadTxn,
    spec: &SearchSpec,
    roots: &[lmdir_store::EntryId],
) -> Result<Vec<(SearchSpec, lmdir_store::EntryId)>, OperationError> {
    let scope = match spec.scope {
        Scope::Sub => Scope::Sub,
        _ => Scope::Base,
    };
    roots
        .iter()
        .map(|root| {
            let search = SearchSpec {
                base: read.normalized_dn_of(*root)?,
                scope,
                filter: spec.filter.clone(),
                size_limit: 0,
                lookthrough_limit: spec.lookthrough_limit,
            };
            Ok((search, *root))
        })
        .collect()
}

/// The filter the store tests on every candidate (what the subject may search everywhere) and,
/// when that differs, the client's own filter; when it is the client's filter itself, it is
/// moved to the store rather than copied (None second).
fn store_filter(
    subject_access: &lmdir_access::acl::SubjectAccess<'_>,
    prepared: PreparedFilter,
) -> (PreparedFilter, Option<PreparedFilter>) {
    let widened = match subject_access.candidate_filter(&prepared) {
        Cow::Borrowed(_) => None,
        Cow::Owned(widened) => Some(widened),
    };
    match widened {
        None => (prepared, None),
        Some(widened) => (widened, Some(prepared)),
    }
}

/// A search's size limit (0 = none) and when its time runs out.
struct SearchLimits {
    size: u64,
    deadline: Option<Instant>,
}

impl SearchLimits {
    /// Why a walk must stop now: abandoned or cancelled (`cancelled` set), or past its time.
    fn stop_reason(&self, cancelled: &AtomicBool) -> Option<LdapError> {
        if cancelled.load(Ordering::Acquire) {
            return Some(LdapError::new(
                lmdir_schema::ResultCode::Canceled,
                "abandoned",
            ));
        }
        let late = self
            .deadline
            .is_some_and(|deadline| Instant::now() > deadline);
        late.then(|| {
            LdapError::new(
                lmdir_schema::ResultCode::TimeLimitExceeded,
                "time limit exceeded",
            )
        })
    }
}

/// Decides which stored entries a subject gets back from a search.
struct VisibleEntries<'a> {
    database: &'a Database,
    /// The access policy the search took when it started.
    policy: &'a lmdir_access::acl::AccessPolicy,
    read: &'a ReadTxn,
    subject: &'a Subject<'a>,
    prepared: &'a lmdir_schema::PreparedFilter,
    /// The store tested `prepared` itself on each entry it returns.
    store_tested: bool,
    /// Set when every entry below the base gives the subject the same access (the rootdn's,
    /// or a policy whose rules do not look at the entry): decided once, not per entry.
    uniform: Option<UniformAccess<'a>>,
    /// The glue, alias and subentries the search skips whatever the access (`hidden.rs`).
    hidden: hidden::HiddenEntries<'a>,
}

/// The access every entry of a search gives its subject, and what follows from it once.
struct UniformAccess<'a> {
    access: EntryAccess<'a>,
    /// The subject may search and read the entries at all.
    returns_entries: bool,
    /// The filter as the subject may evaluate it here; None when that is the filter the
    /// store already tested (nothing restricted), so the entry needs no second test.
    restricted: Option<lmdir_schema::PreparedFilter>,
}

impl<'a> VisibleEntries<'a> {
    fn new(
        (database, policy): (&'a Database, &'a lmdir_access::acl::AccessPolicy),
        (read, hidden): (&'a ReadTxn, hidden::HiddenEntries<'a>),
        subject: &'a Subject<'a>,
        subject_access: &lmdir_access::acl::SubjectAccess<'a>,
        prepared: &'a lmdir_schema::PreparedFilter,
        store_tested: bool,
    ) -> VisibleEntries<'a> {
        let uniform = subject_access.uniform_entry_access().map(|access| {
            let restricted = match access.restrict_filter(prepared) {
                Cow::Borrowed(_) if store_tested => None,
                restricted => Some(restricted.into_owned()),
            };
            UniformAccess {
                returns_entries: access.can_search_entry() && access.can_read_entry(),
                access,
                restricted,
            }
        });
        VisibleEntries {
            database,
            policy,
            read,
            subject,
            prepared,
            store_tested,
            uniform,
            hidden,
        }
    }

    /// Whether the existing entry `id` is returned by a search of `scope` at `base_id` (the
    /// scope, the subject's access and the whole filter), for a sync delete phase.
    fn returns(
        &self,
        base_id: lmdir_store::EntryId,
        scope: lmdir_store::Scope,
        id: lmdir_store::EntryId,
    ) -> Result<bool, OperationError> {
        let in_scope = match scope {
            lmdir_store::Scope::Base => id == base_id,
            lmdir_store::Scope::One => self.read.parent_of(id)? == Some(base_id),
            lmdir_store::Scope::Sub => self.read.is_within(id, base_id)?,
        };
        let Some(entry) = self.read.entry(id)?.filter(|_| in_scope) else {
            return Ok(false);
        };
        // `access` leaves the filter to the store's cursor when the store tested it; this
        // entry did not come from the cursor.
        if self.store_tested && !self.prepared.evaluate(&entry).is_true() {
            return Ok(false);
        }
        Ok(self.access(id, &entry)?.is_some())
    }

    /// Whether the subject may search and read the existing entry `id` where it is now,
    /// whatever the search's scope and filter (for a sync delete phase).
    fn readable(&self, id: lmdir_store::EntryId) -> Result<bool, OperationError> {
        let Some(entry) = self.read.entry(id)? else {
            return Ok(false);
        };
        let normalized_dn = self.read.normalized_dn_of(id)?;
        Ok(self.may_read(&normalized_dn, &entry))
    }

    /// Whether the search returns `view` at `normalized_dn` (in its scope: the caller checks)
    /// by access and filter alone: for an entry as it was before a change, which did not come
    /// from the store's cursor.
    fn returned_as(&self, normalized_dn: &str, view: &dyn lmdir_schema::EntryView) -> bool {
        if self.hidden.hides_by_class(view) {
            return false;
        }
        if let Some(uniform) = &self.uniform {
            let filter = uniform.restricted.as_ref().unwrap_or(self.prepared);
            return uniform.returns_entries && filter.evaluate(view).is_true();
        }
        let access = self.policy.for_entry(self.subject, normalized_dn, view);
        access.can_search_entry()
            && access.can_read_entry()
            && access
                .restrict_filter(self.prepared)
                .evaluate(view)
                .is_true()
    }

    /// Whether the subject may search and read `entry` at `normalized_dn`, decided by the
    /// rules on that entry (never by the access uniform below the base: the entry may be
    /// elsewhere).
    fn may_read(&self, normalized_dn: &str, entry: &dyn lmdir_schema::EntryView) -> bool {
        let access = self.policy.for_entry(self.subject, normalized_dn, entry);
        access.can_search_entry() && access.can_read_entry()
    }

    /// The subject's access to an entry the store found, when the entry is returned: the
    /// subject may search and read it and the filter, with the items it may not search there
    /// Undefined, is True.
    fn access(
        &self,
        id: lmdir_store::EntryId,
        entry: &lmdir_store::EntryRef<'_>,
    ) -> Result<Option<Cow<'_, EntryAccess<'a>>>, OperationError> {
        if self.hidden.hides(id, entry) {
            return Ok(None);
        }
        if let Some(uniform) = &self.uniform {
            let matches = uniform.returns_entries
                && uniform
                    .restricted
                    .as_ref()
                    .is_none_or(|restricted| restricted.evaluate(entry).is_true());
            return Ok(matches.then_some(Cow::Borrowed(&uniform.access)));
        }
        let normalized_dn = self.read.normalized_dn_of(id)?;
        let access = self.policy.for_entry(self.subject, &normalized_dn, entry);
        if !access.can_search_entry() || !access.can_read_entry() {
            return Ok(None);
        }
        let matches = match access.restrict_filter(self.prepared) {
            Cow::Borrowed(_) if self.store_tested => true,
            restricted => restricted.evaluate(entry).is_true(),
        };
        Ok(matches.then_some(Cow::Owned(access)))
    }
}

/// Encodes returned entries into chunks for the connection.
struct SearchOutput<'a, 'sink> {
    job: &'a SearchJob<'a>,
    database: &'a Database,
    subordinates: Subordinates<'a>,
    selection: Selection,
    buffer: BytesMut,
    sink: &'a mut ChunkSink<'sink>,
    sent: u64,
}

impl<'a, 'sink> SearchOutput<'a, 'sink> {
    /// The output of `job`'s search, nothing sent yet: the attributes it selects and the
    /// subordinates it answers as its subject sees them.
    fn new(
        job: &'a SearchJob<'a>,
        context: &SearchContext<'a, '_>,
        sink: &'a mut ChunkSink<'sink>,
    ) -> Self {
        let database = context.database;
        SearchOutput {
            job,
            database,
            subordinates: Subordinates::new(database, context.read, context.subject),
            selection: job.resolved_selection(database),
            buffer: BytesMut::with_capacity(SEARCH_FIRST_BUFFER_BYTES),
            sink,
            sent: 0,
        }
    }

    /// Hands what is left in the buffer to the sink.
    fn flush(&mut self) {
        if !self.buffer.is_empty() {
            (self.sink)(self.buffer.split().freeze());
        }
    }
}

impl SearchOutput<'_, '_> {
    fn emit(
        &mut self,
        id: lmdir_store::EntryId,
        entry: &lmdir_store::EntryRef<'_>,
        access: &EntryAccess<'_>,
    ) -> Result<(), OperationError> {
        self.emit_with(id, entry, access, None)
    }

    /// `sync`: the entry's state in a sync refresh (a present state sends no attributes).
    fn emit_with(
        &mut self,
        id: lmdir_store::EntryId,
        entry: &lmdir_store::EntryRef<'_>,
        access: &EntryAccess<'_>,
        sync: Option<sync::EntryState>,
    ) -> Result<(), OperationError> {
        // The entry's own DN: a sequential scan found its node along the way (no lookup).
        let dn = entry.dn()?;
        let controls = match sync {
            Some(sync::EntryState::Present(control)) => {
                sync::write_present(&mut self.buffer, self.job.message_id, &dn, &control);
                return self.count_sent();
            }
            Some(sync::EntryState::Add(control)) => vec![control],
            None => Vec::new(),
        };
        write_stored_entry(
            &mut self.buffer,
            self.job.message_id,
            &self.database.schema(),
            &self.subordinates,
            id,
            entry,
            &dn,
            &self.selection,
            Some(access),
            self.job.request.typesonly,
            &controls,
        )?;
        self.count_sent()
    }

    fn count_sent(&mut self) -> Result<(), OperationError> {
        self.sent += 1;
        self.flush_if_full()
    }

    /// Hands the buffer to the connection once it holds a chunk.
    fn flush_if_full(&mut self) -> Result<(), OperationError> {
        if self.buffer.len() >= SEARCH_CHUNK_BYTES {
            if !(self.sink)(self.buffer.split().freeze()) {
                return Err(OperationError::new(code::OTHER, "connection closed"));
            }
            // A big result: the next chunks are written without growing step by step.
            self.buffer.reserve(SEARCH_CHUNK_BYTES + 4096);
        }
        Ok(())
    }
}

/// The SearchResultDone of a search that may be paged: the cookie (if paged) as its control.
fn search_done(
    result: Result<(), OperationError>,
    entries_sent: u64,
    cookie: Option<Vec<u8>>,
) -> SearchDone {
    SearchDone {
        result,
        entries_sent,
        response_controls: cookie
            .map(|cookie| vec![paged_response_control(&cookie)])
            .unwrap_or_default(),
    }
}

impl SearchJob<'_> {
    /// A sync refresh (RFC 4533 refreshOnly): every visible entry with its Sync State, under
    /// the same limits and access as any search, then the Sync Done.
    fn run_sync(
        &self,
        spec: &SearchSpec,
        start: SearchStart<'_>,
        visible: &VisibleEntries<'_>,
        limits: &SearchLimits,
        sync: &sync::SyncRefresh,
        output: &mut SearchOutput<'_, '_>,
    ) -> Result<SearchDone, OperationError> {
        let mut result = Ok(());
        if sync.sends_entries() {
            let mut cursor = self.walk(visible.read, spec, start, limits, None)?;
            loop {
                let (id, entry, access) = match self.next_visible(&mut cursor, visible, limits)? {
                    Step::Visible(id, entry, access) => (id, entry, access),
                    Step::End(end) => {
                        result = end;
                        break;
                    }
                };
                let Some(state) = sync.state_of(&entry) else {
                    continue;
                };
                if limits.size > 0 && output.sent >= limits.size {
                    result = Err(OperationError::new(
                        code::SIZE_LIMIT_EXCEEDED,
                        "size limit exceeded",
                    ));
                    break;
                }
                output.emit_with(id, &entry, &access, Some(state))?;
            }
        }
        if result.is_ok() {
            for info in sync::delete_phase_messages(sync.deletes()) {
                sync::write_sync_info(&mut output.buffer, self.message_id, &info);
                output.flush_if_full()?;
            }
        }
        let mut done = search_done(result, output.sent, None);
        match (&done.result, sync.persist_start()) {
            (Err(_), _) => {}
            // refreshAndPersist: the refresh ends with a Sync Info; the search goes on.
            (Ok(()), Some(_)) => sync.write_refresh_done(&mut output.buffer, self.message_id),
            (Ok(()), None) => done.response_controls.push(sync.done_control()),
        }
        Ok(done)
    }

    /// The next candidate the subject gets back, or why the walk ends: the candidates ran
    /// out (Ok), the search was abandoned or ran out of time, or the store failed (Err). The
    /// one loop head of unsorted, sorted and sync searches.
    fn next_visible<'r, 'v, 'a>(
        &self,
        cursor: &mut Walk<'r>,
        visible: &'v VisibleEntries<'a>,
        limits: &SearchLimits,
    ) -> Result<Step<'r, 'v, 'a>, OperationError> {
        for item in cursor.by_ref() {
            if let Some(stop) = self.stop_reason(limits) {
                return Ok(Step::End(Err(stop.into())));
            }
            let (id, entry) = match item {
                Ok(found) => found,
                Err(error) => return Ok(Step::End(Err(error.into()))),
            };
            if let Some(access) = visible.access(id, &entry)? {
                return Ok(Step::Visible(id, entry, access));
            }
        }
        Ok(Step::End(Ok(())))
    }

    /// Why the search must stop now, if it must: abandoned / cancelled, or past its time.
    /// Asked between returned entries and, by the store, between examined candidates.
    /// The filter with its in-chain items resolved (`in_chain.rs`) and the look-through the
    /// search has left (0 = unlimited), the walks counted against it and the time limit.
    fn resolve_in_chain(
        &self,
        context: &SearchContext<'_, '_>,
        mut prepared: PreparedFilter,
    ) -> Result<(PreparedFilter, u64), OperationError> {
        let SearchContext {
            database,
            read,
            subject,
            effective,
            started,
            ..
        } = *context;
        if !prepared.has_unresolved_in_chain() {
            return Ok((prepared, effective.lookthrough));
        }
        let limits = self.time_limit_only(effective, started);
        let stop = || self.stop_reason(&limits);
        let examined = in_chain::resolve(
            database,
            read,
            subject,
            &mut prepared,
            effective.lookthrough,
            &stop,
        )?;
        let lookthrough = match effective.lookthrough {
            0 => 0,
            limit => limit.saturating_sub(examined).max(1),
        };
        Ok((prepared, lookthrough))
    }

    /// The search's time limit alone (no size limit), for the walks before its own.
    fn time_limit_only(
        &self,
        effective: &crate::limits::EffectiveLimits,
        started: Instant,
    ) -> SearchLimits {
        let paged = self.controls.paged.is_some();
        let (_, time) = search_limits(effective, &self.request, paged);
        SearchLimits {
            size: 0,
            deadline: (!time.is_zero()).then(|| started + time),
        }
    }

    /// Refuses what a search walking several roots (aliases dereferenced in searching that
    /// lead out of its scope) cannot do: an unsorted paged search's cookie holds one position
    /// in one cursor, a sync refresh's state one scope.
    fn walks_several_roots(&self, unsorted_paged: bool) -> Result<(), OperationError> {
        let refused = match (unsorted_paged, &self.controls.sync) {
            (true, _) => "paged results",
            (false, Some(_)) => "a sync search",
            (false, None) => return Ok(()),
        };
        Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            format!("{refused} with aliases dereferenced in searching out of the base's scope"),
        ))
    }

    /// The walk over a search's candidates: the base's cursor (resumed at `resume`, a
    /// page's start), then those of the roots its aliases add; each asks `stop_reason`.
    fn walk<'r>(
        &'r self,
        read: &'r ReadTxn,
        spec: &'r SearchSpec,
        start: SearchStart<'r>,
        limits: &'r SearchLimits,
        resume: Option<TreePosition>,
    ) -> Result<Walk<'r>, OperationError> {
        let mut first = read
            .search_from(spec, start.base, start.memo)?
            .stop_when(|| self.stop_reason(limits));
        if let Some(position) = resume {
            first = first.resume_from(position);
        }
        let mut cursors = vec![first];
        for (search, root) in start.extra {
            let cursor = read
                .search_from(search, *root, CandidateMemo::default())?
                .stop_when(|| self.stop_reason(limits));
            cursors.push(cursor);
        }
        Ok(Walk { cursors, at: 0 })
    }

    fn stop_reason(&self, limits: &SearchLimits) -> Option<LdapError> {
        limits.stop_reason(&self.cancelled)
    }

    /// Canceled when the search was abandoned (or cancelled), else None.
    fn abandoned(&self) -> Option<LdapError> {
        self.cancelled
            .load(Ordering::Acquire)
            .then(|| LdapError::new(lmdir_schema::ResultCode::Canceled, "abandoned"))
    }

    #[allow(clippy::too_many_arguments)]
    fn run_unsorted(
        &self,
        spec: &SearchSpec,
        start: SearchStart<'_>,
        visible: &VisibleEntries<'_>,
        limits: &SearchLimits,
        page: Option<&PageRequest>,
        output: &mut SearchOutput<'_, '_>,
    ) -> Result<SearchDone, OperationError> {
        let sent_before = page.map_or(0, |page| page.sent_before);
        let resume = page.and_then(|page| page.resume);
        let mut cursor = self.walk(visible.read, spec, start, limits, resume)?;
        let mut cookie = page.map(|_| Vec::new());
        let mut result = Ok(());
        loop {
            let (id, entry, access) = match self.next_visible(&mut cursor, visible, limits)? {
                Step::Visible(id, entry, access) => (id, entry, access),
                Step::End(end) => {
                    result = end;
                    break;
                }
            };
            // The size limit counts every page of a paged search (the cookie carries the count).
            if limits.size > 0 && sent_before + output.sent >= limits.size {
                result = Err(OperationError::new(
                    code::SIZE_LIMIT_EXCEEDED,
                    "size limit exceeded",
                ));
                break;
            }
            if let Some(page) = page {
                if output.sent == page.size {
                    let total = sent_before + output.sent;
                    // The next page starts with this entry, from its place in the order.
                    // Paged: one cursor (`walks_several_roots`).
                    let resume = cursor.cursors[0]
                        .last_position()
                        .unwrap_or(TreePosition::in_id_order(id));
                    cookie = Some(
                        visible
                            .database
                            .seal_cookie(&page.fingerprint, resume, total),
                    );
                    break;
                }
            }
            output.emit(id, &entry, &access)?;
        }
        Ok(search_done(result, output.sent, cookie))
    }

    /// Sorting needs the whole result. A sorted search pages through the sorted order, so its
    /// cookie holds a position there rather than the last ID sent.
    #[allow(clippy::too_many_arguments)]
    fn run_sorted(
        &self,
        settings: &ServerSettings,
        spec: &SearchSpec,
        start: SearchStart<'_>,
        visible: &VisibleEntries<'_>,
        keys: &[PlannedSortKey],
        limits: &SearchLimits,
        page: Option<&PageRequest>,
        output: &mut SearchOutput<'_, '_>,
    ) -> Result<SearchDone, OperationError> {
        let mut sorted = SortBuffer::new(&visible.database.sort_bytes_in_use);
        let mut cursor = self.walk(visible.read, spec, start, limits, None)?;
        loop {
            match self.next_visible(&mut cursor, visible, limits)? {
                Step::Visible(id, entry, access) => {
                    sorted.push(
                        sort_values(&entry, keys, &access),
                        id,
                        (settings.sort_bytes_max, settings.sort_bytes_total_max),
                    )?;
                }
                Step::End(Ok(())) => break,
                Step::End(Err(stop)) => {
                    return Ok(search_done(Err(stop), 0, page.map(|_| Vec::new())))
                }
            }
        }
        // Stable: equal keys keep ID order, so pages of a sorted search do not overlap.
        sorted
            .entries
            .sort_by(|(left, _), (right, _)| compare_sort_values(keys, left, right));
        if let Some(request) = &self.controls.vlv {
            return self.send_vlv_window(request, &sorted, keys, visible, limits, output);
        }
        let total = sorted.entries.len();
        let start = page
            .and_then(|page| page.resume)
            .map_or(0, |position| position.id as usize)
            .min(total);
        let mut end = total;
        let mut cookie = page.map(|_| Vec::new());
        if let Some(page) = page {
            let page_end = start.saturating_add(usize::try_from(page.size).unwrap_or(usize::MAX));
            if page_end < end {
                end = page_end;
                cookie = Some(visible.database.seal_cookie(
                    &page.fingerprint,
                    TreePosition::in_id_order(end as u32),
                    end as u64,
                ));
            }
        }
        // The size limit counts positions in sorted order, across all pages (RFC 2891: sort,
        // then return).
        let mut result = Ok(());
        let size_limit = usize::try_from(limits.size).unwrap_or(usize::MAX);
        if size_limit > 0 && end > size_limit {
            end = size_limit.max(start);
            cookie = cookie.map(|_| Vec::new());
            result = Err(OperationError::new(
                code::SIZE_LIMIT_EXCEEDED,
                "size limit exceeded",
            ));
        }
        for (_, id) in &sorted.entries[start..end] {
            let Some(entry) = visible.read.entry(*id)? else {
                continue;
            };
            if let Some(access) = visible.access(*id, &entry)? {
                output.emit(*id, &entry, &access)?;
            }
        }
        Ok(search_done(result, output.sent, cookie))
    }

    /// A virtual list view's window of the sorted result, with its response control. The size
    /// limit counts the window's entries.
    fn send_vlv_window(
        &self,
        request: &crate::controls::VlvRequest,
        sorted: &SortBuffer<'_>,
        keys: &[PlannedSortKey],
        visible: &VisibleEntries<'_>,
        limits: &SearchLimits,
        output: &mut SearchOutput<'_, '_>,
    ) -> Result<SearchDone, OperationError> {
        let total = sorted.entries.len();
        let first_key = |index: usize| sorted.entries[index].0[0].as_deref();
        let schema = &visible.database.schema();
        let window = vlv::window(request, total, &keys[0], schema, first_key)
            .map_err(|result| vlv::refusal(result, total, "virtual list view not possible"))?;
        let mut end = window.end;
        let mut result = Ok(());
        let size_limit = usize::try_from(limits.size).unwrap_or(usize::MAX);
        if size_limit > 0 && end - window.start > size_limit {
            end = window.start + size_limit;
            result = Err(OperationError::new(
                code::SIZE_LIMIT_EXCEEDED,
                "size limit exceeded",
            ));
        }
        for (_, id) in &sorted.entries[window.start..end] {
            let Some(entry) = visible.read.entry(*id)? else {
                continue;
            };
            if let Some(access) = visible.access(*id, &entry)? {
                output.emit(*id, &entry, &access)?;
            }
        }
        let mut done = search_done(result, output.sent, None);
        let control =
            vlv::response_control(window.target_position, total, vlv::vlv_result::SUCCESS);
        done.response_controls.push(control);
        Ok(done)
    }
}

/// A virtual list view needs a usable sort and no paging (sssvlv's answers: LDAP_VLV_ERROR with
/// sortControlMissing; unwillingToPerform with paged results).
fn vlv_prerequisites(paged: bool, sort_plan: Option<&SortPlan>) -> Result<(), OperationError> {
    if paged {
        return Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "virtual list view is incompatible with paged results",
        ));
    }
    match sort_plan {
        None => Err(vlv::refusal(
            vlv::vlv_result::SORT_CONTROL_MISSING,
            0,
            "a sort control is required with a virtual list view",
        )),
        Some(Err((_, attribute))) => Err(vlv::refusal(
            vlv::vlv_result::INAPPROPRIATE_MATCHING,
            0,
            &format!("cannot sort by {attribute} for a virtual list view"),
        )),
        Some(Ok(_)) => Ok(()),
    }
}
