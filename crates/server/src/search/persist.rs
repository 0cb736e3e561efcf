//! The persist phase of a refreshAndPersist sync search (RFC 4533 §3.4, OpenLDAP's syncprov):
//! after the refresh, every change the writer commits is looked at as it is now, in a short
//! read transaction, and sent to the searcher when it concerns it: an entry in scope that the
//! filter matches and the subject may read is sent whole (state add or modify); one the
//! search returned just before the change (in scope, matching, readable: decided on the entry
//! as it was, which the change carries) and no longer returns, a deleted one among them, is
//! sent as a delete (its DN then and entryUUID only), as slapd's syncprov decides. Each
//! carries a cookie with the change's CSN.
//!
//! No read transaction is held while waiting. The search ends with e-syncRefreshRequired
//! (4096) when it fell more than the broadcast's bound behind, or has more than
//! `PERSIST_QUEUE_BYTES_MAX` of changes yet to take (also while its send waits for a client
//! that does not read), so the consumer refreshes;
//! with canceled on Cancel (Abandon, unbind and a closed connection abort its task), and with
//! unavailable at shutdown. The time limit does not apply to a persistent search (it never
//! ends on its own; slapd's replicator runs with `time=unlimited`); the size limit applies to
//! its refresh only.

use super::sync::{state_control, write_present, EntryState, RefreshEnd};
use super::{scope_of, SearchDone, SearchJob, SearchOutput, VisibleEntries};
use crate::context::{internal, Database, OperationContext};
use crate::controls::RequestControls;
use crate::entry_read::{Selection, Subordinates};
use crate::persist::{PersistLimits, PersistSubject, PersistTicket, Published, Refused};
use crate::result::{code, OperationError};
use crate::settings::ServerSettings;
use bytes::{Bytes, BytesMut};
use lmdir_store::{Change, ChangeKind, Scope};
use lmdir_sync::{SyncMode, SyncStateKind};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Most changes taken from the broadcast at once. They are turned into messages about 256 KiB
/// (`SEARCH_CHUNK_BYTES`) at a time, each round in one short read transaction, so a burst is
/// sent in a few large writes, no snapshot lives long and a round holds about one chunk.
const PERSIST_BATCH_CHANGES_MAX: usize = 256;
/// Most entries below a moved entry that a persistent search sends itself, when the move takes
/// them into or out of its scope (a consumer moves the entries it holds along with their
/// parent otherwise); a bigger move ends the search with e-syncRefreshRequired.
const PERSIST_MOVED_SUBTREE_ENTRIES_MAX: u32 = 10_000;
/// How often a waiting persistent search looks at its Cancel flag (RFC 3909 sets a flag; an
/// Abandon aborts the task at once). Not a deadline: only how soon a Cancel is noticed.
const PERSIST_CANCEL_CHECK_MILLISECONDS: u64 = 200;

/// A persistent search's subscription, taken before its refresh opens its snapshot.
pub(super) struct Subscription {
    ticket: PersistTicket,
    changes: broadcast::Receiver<Published>,
    stop: watch::Receiver<bool>,
    /// Set when the search has more than `PERSIST_QUEUE_BYTES_MAX` of changes yet to take.
    overrun: watch::Receiver<bool>,
}

/// Subscribes a refreshAndPersist search (None for any other search, or when this server is no
/// provider: the refresh refuses it then), within `persist_searches_max` less the reserve (the
/// rootdn and replicas may use it), the identity's share and the connection's; see
/// `persist_refusal` for the answers beyond.
pub(super) fn subscribe(
    context: &OperationContext,
    database: &Database,
    (request, controls): (&crate::request::SearchRequest, &RequestControls),
) -> Result<Option<Subscription>, OperationError> {
    let settings = &context.settings;
    let persistent = controls
        .sync
        .as_ref()
        .is_some_and(|sync| sync.mode == SyncMode::RefreshAndPersist);
    if !persistent || !settings.replication.provider {
        return Ok(None);
    }
    let replication = &settings.replication;
    let limits = PersistLimits {
        searches_max: replication.persist_searches_max as usize,
        per_identity_max: replication.persist_share_per_identity() as usize,
        reserved: replication.persist_reserve() as usize,
    };
    let identity = &context.session.identity;
    // What its changes' before-images must hold for this search to decide (`PriorNeeds`).
    let mut tested = lmdir_store::PriorNeeds::default();
    tested.add_filter(&super::prepared_filter(database, settings, request, None)?);
    let subject = PersistSubject {
        connection_id: context.session.connection_id,
        tested,
        identity: identity.normalized_dn.clone(),
        privileged: identity.is_rootdn || is_replica(database, replication, identity),
    };
    match database.persist.join(subject, limits) {
        Ok((ticket, changes, stop)) => Ok(Some(Subscription {
            overrun: ticket.backlog.overrun(),
            ticket,
            changes,
            stop,
        })),
        Err(refused) => Err(persist_refusal(refused)),
    }
}

/// Whether `identity` is one of the replicas the config names (`replica_dns`, the consumers'
/// bind DNs): a few DNs, normalized when a persistent search starts.
fn is_replica(
    database: &Database,
    replication: &lmdir_config::ReplicationConfig,
    identity: &crate::identity::Identity,
) -> bool {
    !identity.normalized_dn.is_empty()
        && replication.replica_identities().any(|dn| {
            database
                .normalize_dn(dn)
                .is_ok_and(|normalized| normalized == identity.normalized_dn)
        })
}

/// The answer to a persistent search that may not start: busy (51) while the server's slots,
/// or all but the reserved ones, or the connection's are taken (it may succeed later);
/// adminLimitExceeded (11) when the identity runs its configured share (a limit on that
/// subject, as slapd answers its per-identity limits).
fn persist_refusal(refused: Refused) -> OperationError {
    match refused {
        Refused::ServerFull(limit) => OperationError::new(
            code::BUSY,
            format!("{limit} persistent sync searches are running (persist_searches_max)"),
        ),
        Refused::OnlyReservedLeft(reserved) => OperationError::new(
            code::BUSY,
            format!(
                "the free persistent sync search slots are the {reserved} reserved for the \
                 rootdn and replicas (persist_searches_reserved)"
            ),
        ),
        Refused::IdentityFull(limit) => OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!(
                "this identity runs {limit} persistent sync searches already \
                 (persist_searches_per_identity_max)"
            ),
        ),
        Refused::ConnectionFull => OperationError::new(
            code::BUSY,
            format!(
                "this connection runs {} persistent sync searches already",
                crate::persist::PERSIST_SEARCHES_PER_CONNECTION_MAX
            ),
        ),
    }
}

/// e-syncRefreshRequired (RFC 4533 §3.4): the consumer must refresh.
fn refresh_required(message: &str) -> OperationError {
    OperationError::new(
        lmdir_sync::messages::E_SYNC_REFRESH_REQUIRED,
        message.to_string(),
    )
}

/// The end of a search whose client reads too slowly: the changes kept for it are freed.
fn queue_full() -> OperationError {
    refresh_required(&format!(
        "more than {} MiB of changes are queued for this persistent search (its client reads \
         too slowly)",
        crate::persist::PERSIST_QUEUE_BYTES_MAX / (1024 * 1024)
    ))
}

/// What the persist loop waits for.
enum Next {
    Changes(Vec<(u64, Arc<Change>)>),
    End(OperationError),
}

impl Subscription {
    /// The next changes committed after the snapshot, as many as are already there (up to the
    /// batch bound), or why the search ends.
    async fn next(&mut self, cancelled: &std::sync::atomic::AtomicBool, snapshot_id: u64) -> Next {
        if *self.stop.borrow_and_update() {
            // Shutdown began before this search subscribed (or while it was sending).
            return Next::End(OperationError::new(
                code::UNAVAILABLE,
                "server shutting down",
            ));
        }
        let mut check =
            tokio::time::interval(Duration::from_millis(PERSIST_CANCEL_CHECK_MILLISECONDS));
        let first = loop {
            tokio::select! {
                biased;
                _ = self.stop.changed() => {
                    return Next::End(OperationError::new(code::UNAVAILABLE, "server shutting down"));
                }
                _ = self.overrun.wait_for(|overrun| *overrun) => return Next::End(queue_full()),
                item = self.changes.recv() => match Self::take_noted(&self.ticket.backlog, item.map_err(Into::into), snapshot_id) {
                    Ok(Some(change)) => break change,
                    Ok(None) => {}
                    Err(end) => return Next::End(end),
                },
                _ = check.tick() => {
                    if cancelled.load(Ordering::Acquire) {
                        return Next::End(OperationError::new(code::CANCELED, "canceled"));
                    }
                }
            }
        };
        let mut batch = vec![first];
        while batch.len() < PERSIST_BATCH_CHANGES_MAX {
            let item = self.changes.try_recv().map_err(Into::into);
            match Self::take_noted(&self.ticket.backlog, item, snapshot_id) {
                Ok(Some(change)) => batch.push(change),
                Ok(None) => {}
                Err(end) => return Next::End(end),
            }
            if self.changes.is_empty() {
                break;
            }
        }
        Next::Changes(batch)
    }

    /// `take`, noting in the search's backlog how far it has taken the broadcast.
    fn take_noted(
        backlog: &crate::persist::Backlog,
        item: Result<Published, RecvError>,
        snapshot_id: u64,
    ) -> Result<Option<(u64, Arc<Change>)>, OperationError> {
        if let Ok(Published::Change { end_bytes, .. }) = &item {
            backlog.took(*end_bytes);
        }
        Self::take(item, snapshot_id)
    }

    /// Whether the search is past its queue bound: ended at once, whatever it was doing.
    async fn overran(&mut self) {
        let _ = self.overrun.wait_for(|overrun| *overrun).await;
    }

    /// One broadcast item: a change after the snapshot, nothing (already in the snapshot, or
    /// nothing waiting), or the end (fell behind, overflowed, closed).
    fn take(
        item: Result<Published, RecvError>,
        snapshot_id: u64,
    ) -> Result<Option<(u64, Arc<Change>)>, OperationError> {
        match item {
            Ok(Published::Change { txn_id, change, .. }) if txn_id > snapshot_id => {
                Ok(Some((txn_id, change)))
            }
            Ok(Published::Change { .. }) => Ok(None),
            Ok(Published::Overflow { txn_id }) if txn_id > snapshot_id => Err(refresh_required(
                "a transaction changed more entries than a persistent search follows",
            )),
            Ok(Published::Overflow { .. }) => Ok(None),
            Err(RecvError::Empty) => Ok(None),
            Err(RecvError::Lagged) => Err(refresh_required(
                "this persistent search fell too far behind the changes",
            )),
            Err(RecvError::Closed) => Err(OperationError::new(
                code::UNAVAILABLE,
                "server shutting down",
            )),
        }
    }
}

/// The broadcast's receive errors, from `recv` and `try_recv` alike.
enum RecvError {
    Empty,
    Lagged,
    Closed,
}

impl From<broadcast::error::RecvError> for RecvError {
    fn from(error: broadcast::error::RecvError) -> Self {
        match error {
            broadcast::error::RecvError::Lagged(_) => RecvError::Lagged,
            broadcast::error::RecvError::Closed => RecvError::Closed,
        }
    }
}

impl From<broadcast::error::TryRecvError> for RecvError {
    fn from(error: broadcast::error::TryRecvError) -> Self {
        match error {
            broadcast::error::TryRecvError::Empty => RecvError::Empty,
            broadcast::error::TryRecvError::Lagged(_) => RecvError::Lagged,
            broadcast::error::TryRecvError::Closed => RecvError::Closed,
        }
    }
}

impl SearchJob<'_> {
    /// Streams the changes after the refresh until the search ends; returns how it ended.
    pub(super) async fn persist(
        self,
        context: &OperationContext,
        database: &Database,
        mut subscription: Subscription,
        mut end: RefreshEnd,
        entries_before: u64,
    ) -> Result<SearchDone, OperationError> {
        let settings = &context.settings;
        let mut sent = entries_before;
        let mut batch = VecDeque::new();
        loop {
            if batch.is_empty() {
                match subscription.next(&self.cancelled, end.snapshot_id).await {
                    Next::Changes(changes) => batch.extend(changes),
                    Next::End(error) => {
                        return Ok(SearchDone {
                            result: Err(error),
                            entries_sent: sent,
                            response_controls: Vec::new(),
                        })
                    }
                }
            }
            // A batch's in-chain items and dynamic groups walk the directory: off the runtime's
            // other tasks, which would otherwise wait for every persistent search's batch.
            let (chunks, count) = crate::context::blocking_here(|| {
                self.persist_batch(database, settings, &mut batch, &mut end)
            })?;
            for chunk in chunks {
                // A client that does not read holds this send: the bound ends the search anyway.
                tokio::select! {
                    biased;
                    _ = subscription.overran() => {
                        return Ok(SearchDone {
                            result: Err(queue_full()),
                            entries_sent: sent,
                            response_controls: Vec::new(),
                        });
                    }
                    delivered = context.sink.send(chunk) => if !delivered {
                        return Err(OperationError::new(code::OTHER, "connection closed"));
                    },
                }
            }
            sent += count;
        }
    }

    /// The messages for a batch of changes, read in one short read transaction.
    fn persist_batch(
        &self,
        database: &Database,
        settings: &ServerSettings,
        batch: &mut VecDeque<(u64, Arc<Change>)>,
        end: &mut RefreshEnd,
    ) -> Result<(Vec<Bytes>, u64), OperationError> {
        let scope = scope_of(&self.request.scope)?;
        // The refresh's base: a base alias found is followed here as well.
        let base = end.base.clone();
        let mut prepared = super::prepared_filter(database, settings, &self.request, None)?;
        let read = database.store.read().map_err(internal)?;
        let groups = database.groups(&read);
        let subject = database.subject(&self.identity, &groups);
        // In-chain items: the chains as this batch's snapshot holds them.
        let lookthrough = database.limits_of(settings, &subject).lookthrough;
        // The walk stops when the search is abandoned (its look-through bounds it otherwise).
        let abandoned = || self.abandoned();
        super::in_chain::resolve(
            database,
            &read,
            &subject,
            &mut prepared,
            lookthrough,
            &abandoned,
        )?;
        let policy = database.policy();
        let subject_access = policy.for_subject_within(&subject, &base);
        // Changed entries do not come from a store cursor: `access` tests the whole filter.
        let hidden = super::hidden::HiddenEntries::new(&read, scope, self.controls.subentries)?
            .showing_glue(self.controls.manage_dsa_it);
        let visible = VisibleEntries::new(
            (database, &policy),
            (&read, hidden),
            &subject,
            &subject_access,
            &prepared,
            false,
        );
        let mut chunks = Vec::new();
        let produced = std::cell::Cell::new(0usize);
        let mut sink = |chunk: Bytes| {
            produced.set(produced.get() + chunk.len());
            chunks.push(chunk);
            true
        };
        let mut output = SearchOutput {
            job: self,
            database,
            subordinates: Subordinates::new(database, &read, &subject),
            selection: Selection::resolve(&database.schema(), &self.selection)
                .with_matched_values(&database.schema(), self.controls.matched_values.as_deref())
                .stored_only(),
            buffer: BytesMut::with_capacity(super::SEARCH_FIRST_BUFFER_BYTES),
            sink: &mut sink,
            sent: 0,
        };
        let place = Place { base, scope };
        // Bounded output per round: the rest of the batch waits for the next one.
        while produced.get() + output.buffer.len() < super::SEARCH_CHUNK_BYTES {
            let Some((_, change)) = batch.pop_front() else {
                break;
            };
            let Some(uuid) = change.entry_uuid else {
                continue;
            };
            let cookie = change.csn.map(|csn| end.advance(csn));
            send_change(&visible, &place, &change, uuid, cookie.clone(), &mut output)?;
            if change.kind == ChangeKind::ModRdn {
                send_moved_descendants(&visible, &place, &change, cookie, &mut output)?;
            }
        }
        let count = output.sent;
        if !output.buffer.is_empty() {
            let rest = output.buffer.split().freeze();
            (output.sink)(rest);
        }
        Ok((chunks, count))
    }
}

/// The search's base (normalized) and scope.
struct Place {
    base: String,
    scope: Scope,
}

impl Place {
    fn holds(&self, normalized_dn: &str) -> bool {
        super::monitor::in_scope(normalized_dn, &self.base, self.scope)
    }
}

/// Writes what one change means to this search, if anything: the entry whole when the search
/// returns it now; else a delete naming it as it was, when the search returned it just before
/// the change (`Change::before`: its filter and the searcher's access, as slapd's syncprov
/// decides before the write), so an entry hidden from the searcher, or one that never
/// matched, is never named.
fn send_change(
    visible: &VisibleEntries<'_>,
    place: &Place,
    change: &Change,
    uuid: [u8; 16],
    cookie: Option<Vec<u8>>,
    output: &mut SearchOutput<'_, '_>,
) -> Result<(), OperationError> {
    let database = visible.database;
    let normalize = |dn: &str| database.normalize_dn(dn).unwrap_or_default();
    let entry = match change.kind {
        ChangeKind::Delete => None,
        _ => visible.read.entry(change.id)?,
    };
    if let Some(entry) = &entry {
        let dn = visible.read.dn_of(change.id)?;
        if place.holds(&normalize(&dn)) {
            if let Some(access) = visible.access(change.id, entry)? {
                let state = match change.kind {
                    ChangeKind::Add => SyncStateKind::Add,
                    _ => SyncStateKind::Modify,
                };
                let control = state_control(state, uuid, cookie);
                return output.emit_with(change.id, entry, &access, Some(EntryState::Add(control)));
            }
        }
    }
    // Not returned now. An add the search does not return was never sent (deleted since, its
    // delete's own record decides).
    if change.kind == ChangeKind::Add {
        return Ok(());
    }
    match returned_before(visible, place, change) {
        Some(true) => {
            let before = change.before.as_ref().map(|prior| prior.dn.as_str());
            write_delete(output, before.unwrap_or(&change.dn), uuid, cookie)
        }
        Some(false) => Ok(()),
        None => unknown_before(
            visible,
            place,
            change,
            entry.as_ref(),
            (uuid, cookie),
            output,
        ),
    }
}

/// Whether the search returned the changed entry just before the change (at its DN then, as
/// it was); None when the change does not carry it (too large: `PRIOR_ENTRY_BYTES_MAX`).
fn returned_before(visible: &VisibleEntries<'_>, place: &Place, change: &Change) -> Option<bool> {
    let prior = change.before.as_ref()?;
    let schema = visible.database.schema();
    let Ok(normalized) = schema.parse_normalized_dn(&prior.dn) else {
        return Some(false);
    };
    if !place.holds(normalized.as_str()) {
        return Some(false);
    }
    let view = schema.normalized_entry_view(&normalized, &prior.attributes);
    Some(visible.returned_as(normalized.as_str(), &view))
}

/// A change whose entry before it is not known (too large to carry): a modify of an entry
/// still in scope is sent as a delete when the searcher may read the entry now (the consumer
/// ignores a UUID it does not hold); a delete or move of one that was in scope ends the search
/// with e-syncRefreshRequired (the consumer refreshes, and nothing hidden is named).
fn unknown_before(
    visible: &VisibleEntries<'_>,
    place: &Place,
    change: &Change,
    entry: Option<&lmdir_store::EntryRef<'_>>,
    (uuid, cookie): ([u8; 16], Option<Vec<u8>>),
    output: &mut SearchOutput<'_, '_>,
) -> Result<(), OperationError> {
    let database = visible.database;
    let normalize = |dn: &str| database.normalize_dn(dn).unwrap_or_default();
    let normalized = normalize(&change.dn);
    if let (ChangeKind::Modify, Some(entry)) = (change.kind, entry) {
        if place.holds(&normalized) && visible.may_read(&normalized, entry) {
            return write_delete(output, &change.dn, uuid, cookie);
        }
        return Ok(());
    }
    let before = normalize(change.old_dn.as_deref().unwrap_or(&change.dn));
    if place.holds(&before) {
        return Err(refresh_required(
            "an entry too large to follow left a persistent search",
        ));
    }
    Ok(())
}

/// The entries below a moved one whose move took them into the search's scope (sent whole,
/// when visible) or out of it (sent as deletes, when readable).
fn send_moved_descendants(
    visible: &VisibleEntries<'_>,
    place: &Place,
    change: &Change,
    cookie: Option<Vec<u8>>,
    output: &mut SearchOutput<'_, '_>,
) -> Result<(), OperationError> {
    let read = visible.read;
    let (Some(old_top), Some(_)) = (change.old_dn.as_deref(), read.entry(change.id)?) else {
        return Ok(());
    };
    let below = read.subtree_size(change.id)?.saturating_sub(1);
    if below == 0 {
        return Ok(());
    }
    if below > PERSIST_MOVED_SUBTREE_ENTRIES_MAX {
        return Err(refresh_required(
            "a moved subtree is larger than a persistent search follows",
        ));
    }
    let database = visible.database;
    let normalize = |dn: &str| database.normalize_dn(dn).unwrap_or_default();
    let new_top = read.dn_of(change.id)?;
    let uuid_attr = database.schema().attribute("entryUUID");
    let mut pending = read.children(change.id)?;
    while let Some(id) = pending.pop() {
        pending.extend(read.children(id)?);
        let dn = read.dn_of(id)?;
        let Some(prefix) = dn.strip_suffix(new_top.as_str()) else {
            continue;
        };
        let old_dn = format!("{prefix}{old_top}");
        let (before, after) = (
            place.holds(&normalize(&old_dn)),
            place.holds(&normalize(&dn)),
        );
        let Some(entry) = read.entry(id)? else {
            continue;
        };
        let uuid = uuid_attr
            .and_then(|attr| entry.values_of(attr).first().map(|(value, _)| *value))
            .and_then(lmdir_store::changes::uuid_bytes);
        let Some(uuid) = uuid else {
            continue;
        };
        match (before, after) {
            (false, true) => {
                if let Some(access) = visible.access(id, &entry)? {
                    let control = state_control(SyncStateKind::Add, uuid, cookie.clone());
                    output.emit_with(id, &entry, &access, Some(EntryState::Add(control)))?;
                }
            }
            // Unchanged but for its DN: returned before the move at its old DN.
            (true, false) if visible.returned_as(&normalize(&old_dn), &entry) => {
                write_delete(output, &old_dn, uuid, cookie.clone())?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn write_delete(
    output: &mut SearchOutput<'_, '_>,
    dn: &str,
    uuid: [u8; 16],
    cookie: Option<Vec<u8>>,
) -> Result<(), OperationError> {
    let control = state_control(SyncStateKind::Delete, uuid, cookie);
    write_present(&mut output.buffer, output.job.message_id, dn, &control);
    output.count_sent()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(txn_id: u64) -> Published {
        Published::Change {
            txn_id,
            end_bytes: 0,
            change: Arc::new(Change {
                kind: ChangeKind::Modify,
                id: 7,
                entry_uuid: Some([1; 16]),
                csn: None,
                dn: "cn=x".to_string(),
                old_dn: None,
                before: None,
            }),
        }
    }

    #[test]
    fn a_lagging_or_overflowed_subscriber_must_refresh_and_the_snapshot_is_skipped() {
        let refresh = lmdir_sync::messages::E_SYNC_REFRESH_REQUIRED;
        let take = |item, snapshot| Subscription::take(item, snapshot);
        assert!(
            matches!(take(Ok(change(5)), 5), Ok(None)),
            "in the snapshot"
        );
        assert!(matches!(take(Ok(change(6)), 5), Ok(Some((6, _)))));
        let lagged = take(Err(RecvError::Lagged), 5).unwrap_err();
        assert_eq!(lagged.code, refresh);
        let overflow = take(Ok(Published::Overflow { txn_id: 6 }), 5).unwrap_err();
        assert_eq!(overflow.code, refresh);
        assert!(matches!(
            take(Ok(Published::Overflow { txn_id: 5 }), 5),
            Ok(None)
        ));
        assert_eq!(
            take(Err(RecvError::Closed), 5).unwrap_err().code,
            code::UNAVAILABLE
        );
    }

    /// The real broadcast: a receiver further behind than its capacity is told it lagged.
    #[test]
    fn the_bounded_broadcast_reports_a_lagging_receiver() {
        let hub = Arc::new(crate::persist::PersistHub::default());
        hub.enable();
        let limits = PersistLimits {
            searches_max: 1,
            per_identity_max: 1,
            reserved: 0,
        };
        let subject = |connection_id| PersistSubject {
            connection_id,
            tested: Default::default(),
            identity: String::new(),
            privileged: false,
        };
        let Ok((_ticket, mut changes, _stop)) = hub.join(subject(1), limits) else {
            panic!("joined");
        };
        assert!(matches!(
            hub.join(subject(2), limits),
            Err(Refused::ServerFull(1))
        ));
        for txn_id in 0..=crate::persist::PERSIST_QUEUE_CHANGES_MAX as u64 {
            hub.publish(lmdir_store::CommittedChanges {
                txn_id,
                changes: vec![match change(txn_id) {
                    Published::Change { change, .. } => (*change).clone(),
                    Published::Overflow { .. } => unreachable!(),
                }],
                overflowed: false,
            });
        }
        let item = changes.try_recv().map_err(RecvError::from);
        assert_eq!(
            Subscription::take(item, 0).unwrap_err().code,
            lmdir_sync::messages::E_SYNC_REFRESH_REQUIRED
        );
    }
}
