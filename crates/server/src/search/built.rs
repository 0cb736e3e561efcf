//! Searches of the trees the server builds rather than stores: cn=Monitor (`monitor.rs`, a
//! few dozen entries plus one per connection) and cn=accesslog (`accesslog.rs`, up to
//! `max_entries` records). They behave as an ordinary search does, as far as a client sees:
//! access is decided before any work, they run on the blocking pool, stop at the size limit
//! (sizeLimitExceeded with exactly that many entries), the time limit, Abandon and Cancel,
//! and stream their entries in `SEARCH_CHUNK_BYTES` chunks. The log is read one record at a
//! time and can be paged (its records are ordered by key: a sealed cookie names the next
//! one); the monitor refuses a critical paged control and ignores a non-critical one. Neither
//! is sorted (a critical sort or virtual list view answers unavailableCriticalExtension); the
//! assertion control is tested on the base and the Subentries control honoured.

use super::monitor::{in_scope, may_read_below};
use super::paging::{request_fingerprint, PageRequest};
use super::{scope_of, search_done, search_limits, ChunkSink, SearchDone, SearchLimits};
use super::{SEARCH_CHUNK_BYTES, SEARCH_FIRST_BUFFER_BYTES};
use crate::ber::EntryWriter;
use crate::context::{database_of, internal, no_such_object, Database, OperationContext};
use crate::controls::RequestControls;
use crate::entry_read::{check_read_assertion, Selection};
use crate::identity::Identity;
use crate::request::SearchRequest;
use crate::result::{code, OperationError};
use crate::selection::AttributeSelection;
use crate::settings::ServerSettings;
use bytes::BytesMut;
use lmdir_access::acl::{AccessPolicy, EntryAccess, Subject};
use lmdir_schema::{Entry, Filter, OwnedEntryView, PreparedFilter, Schema};
use lmdir_store::{Scope, TreePosition};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// Which tree the server builds for a search's base.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum BuiltTree {
    Monitor,
    Accesslog,
}

impl BuiltTree {
    /// The built tree `base` (normalized) lies in, if any (the log only when it is on).
    pub(super) fn of(database: &Database, base: Option<&str>) -> Option<BuiltTree> {
        let base = base?;
        if lmdir_schema::normalized_dn_is_within(base, lmdir_access::acl::MONITOR_NDN) {
            return Some(BuiltTree::Monitor);
        }
        let in_log = lmdir_schema::normalized_dn_is_within(base, lmdir_access::acl::ACCESSLOG_NDN);
        (in_log && database.accesslog().enabled).then_some(BuiltTree::Accesslog)
    }
}

/// One entry of a built tree: its DN as shown, the entry, and for a log record its key (the
/// position a paged search resumes at); None for the log's container and monitor entries.
pub(super) struct TreeItem {
    pub(super) key: Option<u64>,
    pub(super) shown_dn: String,
    pub(super) entry: Entry,
}

pub(super) type TreeItems<'r> = Box<dyn Iterator<Item = Result<TreeItem, OperationError>> + 'r>;

/// The search of a built tree: access first (a base the subject may read nothing below
/// answers noSuchObject as a missing one, before the tree is read), then the controls these
/// trees cannot serve, then the walk on the blocking pool.
pub(super) async fn search_built_tree(
    context: &OperationContext,
    database: &Database,
    (request, controls, selection): (&SearchRequest, &RequestControls, &AttributeSelection),
    (tree, base): (BuiltTree, &str),
    filter: Option<Result<PreparedFilter, OperationError>>,
) -> Result<SearchDone, OperationError> {
    may_read_below(context, database, base, request)?;
    refuse_controls(tree, controls)?;
    let job = TreeSearch {
        tree,
        request: request.clone(),
        selection: selection.clone(),
        matched_values: controls.matched_values.clone(),
        assertion: controls.assertion.clone(),
        subentries: controls.subentries,
        // The monitor ignores a non-critical paged control: one answer, the size limit applied.
        paged: controls
            .paged
            .clone()
            .filter(|_| tree == BuiltTree::Accesslog),
        identity: context.session.identity.clone(),
        message_id: context.message_id,
        connection_id: context.session.connection_id,
        cancelled: context.cancelled.clone(),
        base: base.to_string(),
        filter,
    };
    let server = context.server.clone();
    let settings = context.settings.clone();
    let sink = context.sink.clone();
    let unsorted = unsorted_response(controls);
    let mut done = tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        let mut send = |chunk| sink.send_blocking(chunk);
        match tree {
            BuiltTree::Monitor => {
                let entries = super::monitor::monitor_items(&server)?;
                job.run(database, &settings, entries, &mut send)
            }
            BuiltTree::Accesslog => job.run(database, &settings, Vec::new(), &mut send),
        }
    })
    .await
    .map_err(internal)??;
    done.response_controls.extend(unsorted);
    Ok(done)
}

/// A sync search of a built tree is refused (it has no CSNs nor session log to serve one),
/// and so is a critical paged control on the monitor (built anew per search, it has no
/// stable order to resume in). These trees are not sorted: a critical sort or virtual list
/// view answers unavailableCriticalExtension (RFC 2891 §1.1, as slapd answers for a database
/// without sssvlv); a non-critical one is ignored (the sort with a sortResult saying so).
fn refuse_controls(tree: BuiltTree, controls: &RequestControls) -> Result<(), OperationError> {
    let unsorted = |what: &str| {
        Err(OperationError::new(
            code::UNAVAILABLE_CRITICAL_EXTENSION,
            format!("{what} of {tree:?} is not supported"),
        ))
    };
    if controls.sort.is_some() && controls.sort_critical {
        return unsorted("a sorted search");
    }
    if controls.vlv.is_some() && controls.vlv_critical {
        return unsorted("a virtual list view");
    }
    let refused = match (tree, &controls.sync, controls.paged_critical) {
        (_, Some(_), _) => "a sync search",
        (BuiltTree::Monitor, None, true) if controls.paged.is_some() => "paged results",
        _ => return Ok(()),
    };
    Err(OperationError::new(
        code::UNWILLING_TO_PERFORM,
        format!("{refused} of {tree:?} is not supported"),
    ))
}

/// The sortResult of a non-critical sort these trees ignore: unwillingToPerform (RFC 2891
/// §1.2 lets the server return the entries unsorted and say so).
fn unsorted_response(controls: &RequestControls) -> Option<super::ResponseControl> {
    controls.sort.as_ref()?;
    Some(super::sort::sort_response_control(&Err((
        code::UNWILLING_TO_PERFORM,
        String::new(),
    ))))
}

/// What a built tree's search needs of its connection, owned (it runs on the blocking pool).
struct TreeSearch {
    tree: BuiltTree,
    request: SearchRequest,
    selection: AttributeSelection,
    matched_values: Option<Vec<Filter>>,
    /// The assertion control's filter (RFC 4528), tested on the base before anything is sent.
    assertion: Option<crate::filter::RawFilter>,
    /// The Subentries control (RFC 3672): these trees hold no subentry, so `Some(true)`
    /// returns nothing.
    subentries: Option<bool>,
    paged: Option<(i64, Vec<u8>)>,
    identity: Identity,
    message_id: i32,
    connection_id: u64,
    cancelled: Arc<AtomicBool>,
    /// The base, normalized.
    base: String,
    filter: Option<Result<PreparedFilter, OperationError>>,
}

impl TreeSearch {
    /// Walks the tree (`monitor`: the monitor's entries; the log is read here) in one read
    /// txn, under the subject's limits.
    fn run(
        mut self,
        database: &Database,
        settings: &ServerSettings,
        monitor: Vec<TreeItem>,
        sink: &mut ChunkSink<'_>,
    ) -> Result<SearchDone, OperationError> {
        let started = Instant::now();
        let schema = database.schema();
        let scope = scope_of(&self.request.scope)?;
        let filter = self.filter.take();
        let prepared = super::prepared_filter(database, settings, &self.request, filter)?;
        let read = database.store.read().map_err(internal)?;
        let groups = database.groups(&read);
        let subject = database.subject(&self.identity, &groups);
        let effective = database.limits_of(settings, &subject);
        let page = match self.page_request(database, &effective)? {
            Ok(page) => page,
            Err(ended) => return Ok(ended),
        };
        let (size, time) = search_limits(&effective, &self.request, page.is_some());
        let policy = database.policy();
        let walk = TreeWalk {
            job: &self,
            schema: &schema,
            subject: &subject,
            policy: &policy,
            prepared: &prepared,
            selection: Selection::resolve(&schema, &self.selection)
                .with_matched_values(&schema, self.matched_values.as_deref()),
            scope,
            limits: SearchLimits {
                size,
                deadline: (!time.is_zero()).then(|| started + time),
            },
            page,
            database,
            settings,
        };
        match self.tree {
            BuiltTree::Monitor => {
                let base_seen = walk.base_disclosed(&monitor)?;
                walk.answer(Box::new(monitor.into_iter().map(Ok)), base_seen, sink)
            }
            BuiltTree::Accesslog => {
                let resume = walk.page.as_ref().and_then(|page| page.resume);
                let resumed = super::accesslog::KeyRange {
                    from: resume.map_or(0, key_of_position),
                    before: None,
                };
                let keys = super::accesslog::search_keys(&schema, &prepared, &self.base);
                let items = super::accesslog::log_items(&read, keys.within(resumed))?;
                walk.answer(items, false, sink)
            }
        }
    }

    /// The page a paged search of the log asks for (None unpaged), or the answer to a page
    /// size of 0, which ends the paged search (RFC 2696 §3); pages are capped at the
    /// subject's `page_size`, as for an ordinary search.
    fn page_request(
        &self,
        database: &Database,
        effective: &crate::limits::EffectiveLimits,
    ) -> Result<Result<Option<PageRequest>, SearchDone>, OperationError> {
        let Some((size, cookie)) = &self.paged else {
            return Ok(Ok(None));
        };
        if *size <= 0 {
            return Ok(Err(search_done(Ok(()), 0, Some(Vec::new()))));
        }
        let size = match i64::try_from(effective.page_size) {
            Ok(page_size) if page_size > 0 => (*size).min(page_size),
            _ => *size,
        };
        let fingerprint = log_fingerprint(&self.request, self.connection_id);
        Ok(Ok(Some(database.open_cookie(fingerprint, size, cookie)?)))
    }
}

/// A paged search of the log's fingerprint: the ordinary one (connection, base, scope,
/// filter, attributes, size limit) under its own label, so that no cookie of a directory
/// search opens a page of the log or the other way round.
fn log_fingerprint(request: &SearchRequest, connection_id: u64) -> [u8; 32] {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(b"lmdir accesslog page\0");
    hash.update(request_fingerprint(request, None, connection_id));
    hash.finalize().into()
}

/// Depth marking a cookie position as a log key (no directory position has this depth).
const LOG_POSITION_DEPTH: u32 = u32::MAX;

/// The cookie position of a log record's key (its two halves in `top` and `id`).
fn position_of_key(key: u64) -> TreePosition {
    TreePosition {
        top: (key >> 32) as u32,
        depth: LOG_POSITION_DEPTH,
        id: key as u32,
    }
}

/// The log key a cookie position names (sealed by `position_of_key`, so always one).
fn key_of_position(position: TreePosition) -> u64 {
    (u64::from(position.top) << 32) | u64::from(position.id)
}

/// One built tree's walk: who searches, what, within which limits and page.
struct TreeWalk<'w> {
    job: &'w TreeSearch,
    schema: &'w Schema,
    subject: &'w Subject<'w>,
    policy: &'w AccessPolicy,
    prepared: &'w PreparedFilter,
    selection: Selection,
    scope: Scope,
    limits: SearchLimits,
    page: Option<PageRequest>,
    /// Seals the next page's cookie; prepares the assertion's filter.
    database: &'w Database,
    settings: &'w ServerSettings,
}

/// Where a walk stands: the output not yet handed over, what it sent, how it ends.
struct TreeOutput {
    buffer: BytesMut,
    sent: u64,
    result: Result<(), OperationError>,
    cookie: Option<Vec<u8>>,
}

impl TreeWalk<'_> {
    /// The normalized DN of `item` and the subject's access to it, when the subject may
    /// read it (the rootdn reads every entry); None when it is hidden.
    fn disclosed(
        &self,
        item: &TreeItem,
    ) -> Result<Option<(String, OwnedEntryView, EntryAccess<'_>)>, OperationError> {
        let normalized = self.schema.normalize_dn(&item.entry.dn)?;
        let view = OwnedEntryView::new(self.schema, &item.entry)?;
        let access = self.policy.for_entry(self.subject, &normalized, &view);
        if !self.job.identity.is_rootdn && !access.can_read_entry() {
            return Ok(None);
        }
        Ok(Some((normalized, view, access)))
    }

    /// Whether the base is among `items` and disclosed to the subject (the monitor's entries
    /// are not in parents-first order, so this is asked before any is sent), with the
    /// assertion control tested on it. Only the base's access is computed here: `answer`
    /// decides every item's as it walks them.
    fn base_disclosed(&self, items: &[TreeItem]) -> Result<bool, OperationError> {
        for item in items {
            if self.schema.normalize_dn(&item.entry.dn)? != self.job.base {
                continue;
            }
            let Some((_, view, access)) = self.disclosed(item)? else {
                return Ok(false);
            };
            self.check_assertion(&view, &access)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Sends the entries of `items` in the search's scope that the subject may read and that
    /// match its filter, none before the base is seen (`base_seen`: known already): in the
    /// log, the container comes first and records are leaves, so an entry in scope never
    /// precedes its base. noSuchObject when the base is not there (or hidden).
    fn answer(
        &self,
        items: TreeItems<'_>,
        base_seen: bool,
        sink: &mut ChunkSink<'_>,
    ) -> Result<SearchDone, OperationError> {
        let mut output = TreeOutput {
            buffer: BytesMut::with_capacity(SEARCH_FIRST_BUFFER_BYTES),
            sent: 0,
            result: Ok(()),
            cookie: self.page.as_ref().map(|_| Vec::new()),
        };
        // A base known already had the assertion tested where it was found.
        let (mut base_seen, assertion_tested) = (base_seen, base_seen);
        for item in items {
            if let Some(stop) = self.limits.stop_reason(&self.job.cancelled) {
                output.result = Err(stop.into());
                break;
            }
            let item = item?;
            let Some((normalized, view, access)) = self.disclosed(&item)? else {
                continue;
            };
            let is_base = normalized == self.job.base;
            if is_base && !assertion_tested {
                self.check_assertion(&view, &access)?;
            }
            base_seen |= is_base;
            let wanted = base_seen
                && self.job.subentries != Some(true)
                && in_scope(&normalized, &self.job.base, self.scope)
                && !self.resumed_past(&item)
                && access
                    .restrict_filter(self.prepared)
                    .evaluate(&view)
                    .is_true();
            if wanted && !self.send(&item, &access, &mut output, sink)? {
                break;
            }
            // Nothing below a base-scope base is wanted, and log records are leaves.
            if is_base && (self.scope == Scope::Base || item.key.is_some()) {
                break;
            }
        }
        if output.result.is_ok() && !base_seen {
            return Err(no_such_object(&self.job.request.base));
        }
        if !output.buffer.is_empty() && !sink(output.buffer.split().freeze()) {
            return Err(OperationError::new(code::OTHER, "connection closed"));
        }
        Ok(search_done(output.result, output.sent, output.cookie))
    }

    /// The assertion control on the base (RFC 4528 §3): assertionFailed unless its filter,
    /// restricted to what the subject may read of the base, holds. Nothing in scope comes
    /// before the base (`answer`), so nothing has been sent when it fails.
    fn check_assertion(
        &self,
        base: &OwnedEntryView,
        access: &EntryAccess<'_>,
    ) -> Result<(), OperationError> {
        match &self.job.assertion {
            Some(assertion) => {
                check_read_assertion(self.database, self.settings, access, base, assertion)
            }
            None => Ok(()),
        }
    }

    /// A later page of the log does not send the container again (it came with the first).
    fn resumed_past(&self, item: &TreeItem) -> bool {
        item.key.is_none() && self.page.as_ref().is_some_and(|page| page.resume.is_some())
    }

    /// Sends `item` unless the size limit or the page is reached first (then false: the walk
    /// ends, with sizeLimitExceeded or the next page's cookie).
    fn send(
        &self,
        item: &TreeItem,
        access: &EntryAccess<'_>,
        output: &mut TreeOutput,
        sink: &mut ChunkSink<'_>,
    ) -> Result<bool, OperationError> {
        let sent_before = self.page.as_ref().map_or(0, |page| page.sent_before);
        // The size limit counts every page of a paged search (the cookie carries the count).
        if self.limits.size > 0 && sent_before + output.sent >= self.limits.size {
            output.result = Err(OperationError::new(
                code::SIZE_LIMIT_EXCEEDED,
                "size limit exceeded",
            ));
            output.cookie = output.cookie.take().map(|_| Vec::new());
            return Ok(false);
        }
        if let Some(page) = &self.page {
            if output.sent == page.size {
                let resume = position_of_key(item.key.unwrap_or(0));
                let total = sent_before + output.sent;
                output.cookie = Some(self.database.seal_cookie(&page.fingerprint, resume, total));
                return Ok(false);
            }
        }
        self.write_entry(item, access, &mut output.buffer);
        output.sent += 1;
        if output.buffer.len() >= SEARCH_CHUNK_BYTES {
            if !sink(output.buffer.split().freeze()) {
                return Err(OperationError::new(code::OTHER, "connection closed"));
            }
            output.buffer.reserve(SEARCH_CHUNK_BYTES + 4096);
        }
        Ok(true)
    }

    /// One SearchResultEntry: the attributes the subject may read and the search selects.
    fn write_entry(&self, item: &TreeItem, access: &EntryAccess<'_>, buffer: &mut BytesMut) {
        let job = self.job;
        let mut writer = EntryWriter::begin(buffer, job.message_id, item.shown_dn.as_bytes());
        for attribute in &item.entry.attributes {
            let Some(attr) = self.schema.attribute(&attribute.description) else {
                continue;
            };
            let readable = job.identity.is_rootdn || access.can_read_attribute(attr);
            if !readable || !self.selection.selects(self.schema, attr, &[]) {
                continue;
            }
            self.selection.write_built_attribute(
                self.schema,
                &mut writer,
                (attr, &attribute.description),
                &attribute.values,
                job.request.typesonly,
            );
        }
        writer.finish(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_key_survives_its_cookie_position() {
        for key in [
            0,
            1,
            u64::from(u32::MAX),
            1 << 32,
            1_764_943_422_123_456,
            u64::MAX,
        ] {
            let position = position_of_key(key);
            let bytes = position.to_bytes();
            let back = TreePosition::from_bytes(&bytes).expect("12 bytes");
            assert_eq!(key_of_position(back), key);
        }
    }
}
