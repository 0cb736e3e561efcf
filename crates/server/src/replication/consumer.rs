//! One task per `[[replication.consumer]]`: connect to the provider, bind, send the sync search
//! (Sync Request with the stored cookie, attributes `*` `+`, a critical ManageDsaIT as
//! OpenLDAP's consumer sends), and hand what arrives to the server's one writer in batches,
//! each with the cookie that covers it. refreshOnly polls every `interval_seconds`; any error
//! ends the session, is logged, and the consumer reconnects after `retry_seconds`.

use super::link::{result_code, Link, LinkError, Message, SessionError};
use crate::context::ServerContext;
use crate::controls::{Control, MANAGE_DSA_IT_OID};
use crate::identity::Identity;
use crate::replication_status::{
    ChangeCounts, ConsumerIdentity, ConsumerStatus, ConsumerTasks, RunningConsumer,
};
use crate::sync_apply::{CookieUpdate, SyncBatch, SyncChange, Uuid};
use crate::writer::{Update, WriteJob, WriteRequest};
use ldap3_proto::proto::{
    LdapDerefAliases, LdapFilter, LdapOp, LdapSearchRequest, LdapSearchResultEntry, LdapSearchScope,
};
use lmdir_config::{ConsumerConfig, SyncType};
use lmdir_schema::{Dn, Entry};
use lmdir_sync::messages::{E_SYNC_REFRESH_REQUIRED, SYNC_REQUEST_OID};
use lmdir_sync::{
    ContextCsns, Cookie, Csn, SyncDone, SyncInfo, SyncMode, SyncRequest, SyncState, SyncStateKind,
};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::{oneshot, watch};
use tracing::{info, warn};

/// Changes handed to the writer in one job (one transaction): big enough that a refresh of
/// many entries commits in few transactions, small enough that the writer's other work waits
/// little.
pub const SYNC_BATCH_CHANGES_MAX: usize = 256;
/// Bytes of provider messages held in one batch before it is written (so 256 huge entries do
/// not sit in memory at once).
pub const SYNC_BATCH_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Entries a present phase may name (16 bytes each in a hash set, ~100 MiB at the limit): a
/// provider announcing more is refused rather than growing the consumer without bound.
pub const PRESENT_UUIDS_MAX: usize = 4 * 1024 * 1024;
/// Writer time one batch may take: the end of a present phase lists the whole replicated
/// subtree, so it is far above a client write's budget (a read-only replica has no client
/// writes to delay).
pub const SYNC_BATCH_BUDGET_SECONDS: u64 = 300;
/// Attributes a provider returns with `+` that this server computes itself (never stored).
const COMPUTED_ATTRIBUTES: &[&str] = &[
    "entryDN",
    "subschemaSubentry",
    "hasSubordinates",
    "numSubordinates",
];

/// Starts one task per configured consumer; each ends when `shutdown` turns true (or a
/// reload removes it, `reconcile`). The tasks are kept in the server's `consumer_tasks`;
/// `stop_all` awaits them at shutdown.
pub fn start_consumers(server: &Arc<ServerContext>, shutdown: watch::Receiver<bool>) {
    tasks(server).shutdown = Some(shutdown);
    if server.database.is_none() {
        return;
    }
    for config in &server.settings().replication.consumer {
        start_one(server, config);
    }
}

fn tasks(server: &ServerContext) -> std::sync::MutexGuard<'_, ConsumerTasks> {
    server
        .consumer_tasks
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts the consumer `config` describes, stopped by its own signal or the server's.
fn start_one(server: &Arc<ServerContext>, config: &ConsumerConfig) {
    let Some(mut shutdown) = tasks(server).shutdown.clone() else {
        return;
    };
    let status = server
        .monitor
        .replication
        .register_consumer(ConsumerIdentity {
            rid: config.rid,
            provider: config.provider.clone(),
            search_base: config.search_base.clone(),
            sync_type: match config.sync_type {
                SyncType::RefreshOnly => "refreshOnly",
                SyncType::RefreshAndPersist => "refreshAndPersist",
            },
        });
    let consumer = Consumer {
        server: server.clone(),
        config: config.clone(),
        status,
    };
    let (stop, stopped) = watch::channel(false);
    let stop = Arc::new(stop);
    let forward = stop.clone();
    // The server's shutdown stops it too; this ends with the consumer (its receiver gone).
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.wait_for(|stopping| *stopping) => {
                let _ = forward.send(true);
            }
            _ = forward.closed() => {}
        }
    });
    let task = tokio::spawn(consumer.run(stopped));
    tasks(server).running.insert(
        config.rid,
        RunningConsumer {
            config: config.clone(),
            stop,
            task,
        },
    );
}

/// A reload's consumers: stops those gone or changed (by rid), starts those new or changed.
/// Returns the rids (stopped, started).
pub fn reconcile(server: &Arc<ServerContext>, wanted: &[ConsumerConfig]) -> (Vec<u16>, Vec<u16>) {
    let mut stopped = Vec::new();
    if server.database.is_none() {
        return (stopped, Vec::new());
    }
    {
        let mut tasks = tasks(server);
        let gone: Vec<u16> = tasks
            .running
            .iter()
            .filter(|(_, running)| !wanted.contains(&running.config))
            .map(|(rid, _)| *rid)
            .collect();
        for rid in gone {
            if let Some(running) = tasks.running.remove(&rid) {
                let _ = running.stop.send(true);
                server.monitor.replication.unregister_consumer(rid);
                stopped.push(rid);
            }
        }
    }
    let mut started = Vec::new();
    for config in wanted {
        if !tasks(server).running.contains_key(&config.rid) {
            start_one(server, config);
            started.push(config.rid);
        }
    }
    (stopped, started)
}

/// At shutdown (after the server's signal): waits for every consumer task to end.
pub async fn stop_all(server: &ServerContext) {
    let running: Vec<RunningConsumer> = std::mem::take(&mut tasks(server).running)
        .into_values()
        .collect();
    for consumer in running {
        let _ = consumer.stop.send(true);
        let _ = consumer.task.await;
    }
}

struct Consumer {
    server: Arc<ServerContext>,
    config: ConsumerConfig,
    /// What cn=Monitor and the metrics show of this consumer.
    status: Arc<ConsumerStatus>,
}

/// How a session ended without error.
enum Ending {
    /// refreshOnly: the poll is complete.
    Polled,
    /// e-syncRefreshRequired: the cookie is dropped, reload at once.
    Reload,
}

/// The session's progress through the refresh.
struct Progress {
    /// The cookie the search was sent with.
    request_cookie: Option<Vec<u8>>,
    /// During the refresh: every entry the provider mentioned (for the present phase);
    /// None once the refresh is over (persist mode).
    present: Option<HashSet<Uuid>>,
    pending: Vec<SyncChange>,
    pending_bytes: usize,
    cookie: CookieUpdate,
    applied: usize,
    /// UUIDs a delete phase named gone (syncIdSets with refreshDeletes), held until a cookie
    /// arrives: a multi-provider node deletes only what that cookie covers, so they must be
    /// written in the same batch as it, never flushed ahead of it.
    listed: Vec<Uuid>,
}

impl Progress {
    fn note_present(&mut self, uuid: Uuid) -> Result<(), SessionError> {
        if let Some(present) = &mut self.present {
            if present.len() >= PRESENT_UUIDS_MAX && !present.contains(&uuid) {
                return Err(LinkError::Limit(format!(
                    "the present phase names more than {PRESENT_UUIDS_MAX} entries"
                ))
                .into());
            }
            present.insert(uuid);
        }
        Ok(())
    }

    fn note_listed(&mut self, uuid: Uuid) -> Result<(), SessionError> {
        if self.listed.len() >= PRESENT_UUIDS_MAX {
            return Err(LinkError::Limit(format!(
                "the delete phase names more than {PRESENT_UUIDS_MAX} entries"
            ))
            .into());
        }
        self.listed.push(uuid);
        Ok(())
    }

    fn set_cookie(&mut self, cookie: Option<Vec<u8>>) {
        if cookie.is_some() && !self.listed.is_empty() {
            let listed = std::mem::take(&mut self.listed);
            self.pending.push(SyncChange::DeleteListed(listed));
        }
        if let Some(cookie) = cookie {
            self.cookie = CookieUpdate::Set(cookie);
        }
    }

    /// The end of a present phase (RFC 4533 §3.4): what was not mentioned is gone. Not when
    /// the provider says nothing changed since our cookie (it then mentions nothing at all,
    /// as OpenLDAP's syncprov does: deleting everything would be wrong).
    fn end_present_phase(&mut self, base: &Dn, cookie: Option<Vec<u8>>, refresh_done: bool) {
        let changed = match (&self.request_cookie, &cookie) {
            (None, _) => true,
            (Some(sent), Some(received)) => provider_moved(sent, received),
            (Some(_), None) => false,
        };
        let present = if refresh_done {
            self.present.take()
        } else {
            self.present.replace(HashSet::new())
        };
        if let (true, Some(present)) = (changed, present) {
            self.pending.push(SyncChange::DeleteUnmentioned {
                base: base.clone(),
                present,
            });
        }
        self.set_cookie(cookie);
    }

    /// The end of a delete phase (RFC 4533 §3.4): the provider named what is gone. Except when
    /// the search was sent without a cookie: the provider then sends its whole content, and
    /// syncprov ends that with a delete phase naming nothing (it assumes an empty consumer),
    /// while this store may hold entries from an earlier refresh that was interrupted after
    /// some batches committed but before its cookie. What such a refresh did not mention is
    /// gone from the provider, exactly as at the end of a present phase.
    fn end_delete_phase(&mut self, base: &Dn, cookie: Option<Vec<u8>>, refresh_done: bool) {
        if self.request_cookie.is_none() {
            self.end_present_phase(base, cookie, refresh_done);
            return;
        }
        if refresh_done {
            self.present = None;
        }
        self.set_cookie(cookie);
    }

    fn must_flush(&self) -> bool {
        self.cookie != CookieUpdate::Keep
            || self.pending.len() >= SYNC_BATCH_CHANGES_MAX
            || self.pending_bytes >= SYNC_BATCH_BYTES_MAX
    }
}

/// Whether a provider's cookie holds a change the consumer's did not: a CSN newer than the
/// consumer's for its server ID, or of a server ID the consumer did not name. (Compared as
/// text when either does not parse.) The cookies differ in their `sid` field anyway, and on
/// a multi-provider node the consumer's carries CSNs the provider may not have.
fn provider_moved(sent: &[u8], received: &[u8]) -> bool {
    match (Cookie::parse(sent), Cookie::parse(received)) {
        (Ok(sent), Ok(received)) => received
            .csns()
            .iter()
            .any(|csn| sent.csns().get(csn.sid()).is_none_or(|held| csn > held)),
        _ => sent != received,
    }
}

impl Consumer {
    fn rid(&self) -> u16 {
        self.config.rid
    }

    async fn run(self, mut shutdown: watch::Receiver<bool>) {
        info!(
            "replication rid={:03} from {} ({:?}) started",
            self.rid(),
            self.config.provider,
            self.config.sync_type
        );
        loop {
            if *shutdown.borrow() {
                break;
            }
            let pause = tokio::select! {
                _ = shutdown.changed() => break,
                outcome = self.session() => match outcome {
                    Ok(Ending::Polled) => {
                        let pause = Duration::from_secs(self.config.interval_seconds);
                        self.status.polled(SystemTime::now() + pause);
                        pause
                    }
                    Ok(Ending::Reload) => Duration::ZERO,
                    Err(error) => {
                        warn!(
                            "replication rid={:03} from {}: {error}; retrying in {} s",
                            self.rid(),
                            self.config.provider,
                            self.config.retry_seconds
                        );
                        let pause = Duration::from_secs(self.config.retry_seconds);
                        self.status.failed(&error.to_string(), SystemTime::now() + pause);
                        pause
                    }
                },
            };
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
        self.status.stopped();
    }

    fn database(&self) -> Result<&crate::database::Database, SessionError> {
        self.server
            .database
            .as_ref()
            .ok_or_else(|| SessionError::Apply("no database".into()))
    }

    fn server_id(&self) -> u16 {
        self.server.settings().replication.server_id
    }

    fn multi_provider(&self) -> bool {
        self.server.settings().replication.is_multi_provider()
    }

    /// The cookie the sync search is sent with: none before the first complete refresh from
    /// this provider. A read-only replica sends the provider's last cookie back. A
    /// multi-provider node sends, as slapd's consumer does, its own server ID and its whole
    /// contextCSN (every server ID's newest CSN it holds, its own included, read in the same
    /// transaction): the provider then sends only entries changed after what this node
    /// already holds, so a change that came from here, or reached here through a third node,
    /// is not sent back (no echo).
    fn request_cookie(&self) -> Result<Option<Vec<u8>>, SessionError> {
        let store = self.database()?.store();
        let failed = |error: lmdir_schema::LdapError| SessionError::Apply(error.to_string());
        let read = store
            .read()
            .map_err(|error| SessionError::Apply(error.to_string()))?;
        let Some(stored) = read.sync_cookie(self.rid()).map_err(failed)? else {
            return Ok(None);
        };
        if !self.multi_provider() {
            return Ok(Some(stored));
        }
        let mut csns = ContextCsns::new();
        if let Ok(cookie) = Cookie::parse(&stored) {
            csns.merge_all(cookie.csns());
        }
        for csn in read.context_csns().map_err(failed)? {
            csns.merge(csn);
        }
        let cookie = Cookie::new(Some(self.rid()), Some(self.server_id()), csns, None)
            .map_err(|error| SessionError::Apply(error.to_string()))?;
        Ok(Some(cookie.to_bytes()))
    }

    /// A provider answering with this server's own server ID is this server itself (its URL
    /// is another name of this machine's listener: slapd then replicates from itself) or a
    /// peer misconfigured with the same ID; either way its changes must not be applied.
    fn check_provider_sid(&self, cookie: &CookieUpdate) -> Result<(), SessionError> {
        let CookieUpdate::Set(cookie) = cookie else {
            return Ok(());
        };
        let sid = Cookie::parse(cookie).ok().and_then(|cookie| cookie.sid());
        if self.server_id() != 0 && sid == Some(self.server_id()) {
            return Err(SessionError::Apply(format!(
                "the provider {} answers with this server's own server_id {}: it is this \
                 server itself or a peer with the same server_id; nothing applied",
                self.config.provider,
                self.server_id()
            )));
        }
        Ok(())
    }

    /// One connection: the sync search until the poll ends (refreshOnly) or an error.
    async fn session(&self) -> Result<Ending, SessionError> {
        let base = Dn::parse(&self.config.search_base)
            .map_err(|error| SessionError::Apply(error.to_string()))?;
        let cookie = self.request_cookie()?;
        self.status.connecting(cookie.as_deref());
        let mut link = Link::open(&self.config, consumer_pdu_bytes_max(&self.config)).await?;
        self.send_search(&mut link, cookie.clone()).await?;
        self.status
            .searching(&link.local_address, cookie.as_deref());
        let fresh = super::initial::applies(
            self.database()?,
            self.config.bulk_initial_refresh,
            cookie.as_deref(),
        )
        .map_err(SessionError::Apply)?;
        let mut progress = Progress {
            request_cookie: cookie,
            present: Some(HashSet::new()),
            pending: Vec::new(),
            pending_bytes: 0,
            cookie: CookieUpdate::Keep,
            applied: 0,
            listed: Vec::new(),
        };
        // An empty store without a cookie: the refresh's entries go to the bulk loader until
        // the first message that is not one (`initial.rs`).
        let mut bulk = match fresh {
            Some(claim) => Some(super::initial::BulkRefresh::start(self.database()?, claim)),
            None => None,
        };
        loop {
            let message = match link.buffered()? {
                Some(message) => message,
                None => {
                    // Nothing more at hand: write what we have before waiting (not while the
                    // bulk load holds the store's writer: the cookie waits for its end).
                    if bulk.is_none() {
                        self.flush(&mut progress).await?;
                    }
                    link.receive().await?
                }
            };
            progress.pending_bytes += link.last_frame_bytes;
            let (csn, cookie) = marks(&message);
            self.status.contact(csn, cookie);
            let message = match bulk.as_mut() {
                Some(load) => match self.bulk_entry(load, message, &base, &mut progress).await? {
                    None => continue,
                    Some(other) => {
                        self.end_bulk(bulk.take()).await?;
                        other
                    }
                },
                None => message,
            };
            if let Some(ending) = self.handle(message, &base, &mut progress)? {
                self.flush(&mut progress).await?;
                return ending;
            }
            if progress.must_flush() {
                self.flush(&mut progress).await?;
            }
        }
    }

    /// During a bulk refresh: an entry the refresh adds goes to the loader (None); any other
    /// message ends the bulk phase and is handed back to go the ordinary way.
    async fn bulk_entry(
        &self,
        load: &mut super::initial::BulkRefresh,
        message: Message,
        base: &Dn,
        progress: &mut Progress,
    ) -> Result<Option<Message>, SessionError> {
        let Message::Entry {
            entry,
            state: Some(state),
        } = message
        else {
            return Ok(Some(message));
        };
        match state.state {
            SyncStateKind::Add | SyncStateKind::Modify => {
                let uuid = state.entry_uuid;
                progress.note_present(uuid)?;
                let entry = self.to_entry(entry, &uuid, base)?;
                load.push(&entry).await?;
                // Held: written by the writer once the load has committed.
                progress.set_cookie(state.cookie);
                progress.pending_bytes = 0;
                Ok(None)
            }
            _ => Ok(Some(Message::Entry {
                entry,
                state: Some(state),
            })),
        }
    }

    /// Commits the bulk load (if one runs) before anything else is applied.
    async fn end_bulk(
        &self,
        bulk: Option<super::initial::BulkRefresh>,
    ) -> Result<(), SessionError> {
        let Some(load) = bulk else {
            return Ok(());
        };
        let (entries, seconds) = load.finish().await?;
        info!(
            "replication rid={:03}: the initial refresh bulk-loaded {entries} entries in {seconds:.2} s",
            self.rid()
        );
        self.status.committed(
            ChangeCounts {
                adds: entries,
                ..ChangeCounts::default()
            },
            &ContextCsns::new(),
        );
        Ok(())
    }

    async fn send_search(
        &self,
        link: &mut Link,
        cookie: Option<Vec<u8>>,
    ) -> Result<(), SessionError> {
        let mode = match self.config.sync_type {
            SyncType::RefreshOnly => SyncMode::RefreshOnly,
            SyncType::RefreshAndPersist => SyncMode::RefreshAndPersist,
        };
        let sync = SyncRequest {
            mode,
            cookie,
            reload_hint: false,
        };
        let search = LdapOp::SearchRequest(LdapSearchRequest {
            base: self.config.search_base.clone(),
            scope: LdapSearchScope::Subtree,
            aliases: LdapDerefAliases::Never,
            sizelimit: 0,
            timelimit: 0,
            typesonly: false,
            filter: LdapFilter::Present("objectClass".to_string()),
            // lmdirAttributeCSN by name: an lmdir provider sends its per-attribute change
            // state (merged in `apply`); slapd ignores a name it does not know.
            attrs: vec![
                "*".to_string(),
                "+".to_string(),
                lmdir_store::attribute_state::ATTRIBUTE_STATE.to_string(),
            ],
        });
        let controls = vec![
            // Critical: a server without sync must refuse, not answer a plain search whose
            // end we would take for an empty present phase.
            Control {
                oid: SYNC_REQUEST_OID.to_string(),
                critical: true,
                value: Some(sync.encode()),
            },
            Control {
                oid: MANAGE_DSA_IT_OID.to_string(),
                critical: true,
                value: None,
            },
        ];
        link.send(search, controls).await?;
        Ok(())
    }

    /// Takes in one message; `Some` when the session ends with it.
    fn handle(
        &self,
        message: Message,
        base: &Dn,
        progress: &mut Progress,
    ) -> Result<Option<Result<Ending, SessionError>>, SessionError> {
        match message {
            Message::Entry { entry, state } => {
                let state = state.ok_or_else(|| {
                    LinkError::Protocol(format!("entry '{}' without Sync State", entry.dn))
                })?;
                self.take_entry(entry, state, base, progress)?;
            }
            Message::Info(info) => self.take_info(info, base, progress)?,
            Message::Done { result, done } => {
                return Ok(Some(self.take_done(&result, done, base, progress)));
            }
            Message::Other(LdapOp::SearchResultReference(_)) => {}
            Message::Other(other) => {
                return Err(LinkError::Protocol(format!("an unexpected {other:?}")).into());
            }
        }
        Ok(None)
    }

    fn take_entry(
        &self,
        entry: LdapSearchResultEntry,
        state: SyncState,
        base: &Dn,
        progress: &mut Progress,
    ) -> Result<(), SessionError> {
        let uuid = state.entry_uuid;
        match state.state {
            SyncStateKind::Present => progress.note_present(uuid)?,
            SyncStateKind::Add | SyncStateKind::Modify => {
                progress.note_present(uuid)?;
                let entry = self.to_entry(entry, &uuid, base)?;
                progress.pending.push(SyncChange::Put { uuid, entry });
            }
            SyncStateKind::Delete => progress.pending.push(SyncChange::Delete(uuid)),
        }
        progress.set_cookie(state.cookie);
        Ok(())
    }

    fn take_info(
        &self,
        info: SyncInfo,
        base: &Dn,
        progress: &mut Progress,
    ) -> Result<(), SessionError> {
        match info {
            SyncInfo::NewCookie(cookie) => progress.set_cookie(Some(cookie)),
            SyncInfo::RefreshDelete {
                cookie,
                refresh_done,
            } => {
                progress.end_delete_phase(base, cookie, refresh_done);
                if refresh_done {
                    self.refresh_done(progress);
                }
            }
            SyncInfo::RefreshPresent {
                cookie,
                refresh_done,
            } => {
                progress.end_present_phase(base, cookie, refresh_done);
                if refresh_done {
                    self.refresh_done(progress);
                }
            }
            SyncInfo::SyncIdSet {
                cookie,
                refresh_deletes,
                uuids,
            } => {
                for uuid in uuids {
                    if refresh_deletes {
                        progress.note_listed(uuid)?;
                    } else {
                        progress.note_present(uuid)?;
                    }
                }
                progress.set_cookie(cookie);
            }
        }
        Ok(())
    }

    fn refresh_done(&self, progress: &Progress) {
        self.status.persisting();
        info!(
            "replication rid={:03}: refresh done ({} changes so far), persisting",
            self.rid(),
            progress.applied + progress.pending.len()
        );
    }

    fn take_done(
        &self,
        result: &ldap3_proto::proto::LdapResult,
        done: Option<SyncDone>,
        base: &Dn,
        progress: &mut Progress,
    ) -> Result<Ending, SessionError> {
        let code = result_code(result);
        if code == E_SYNC_REFRESH_REQUIRED {
            info!(
                "replication rid={:03}: the provider requires a full refresh; reloading",
                self.rid()
            );
            progress.pending.clear();
            progress.listed.clear();
            progress.cookie = CookieUpdate::Forget;
            self.status.reloading();
            return Ok(Ending::Reload);
        }
        if code != 0 {
            return Err(LinkError::Refused {
                what: "the sync search",
                code,
                message: result.message.clone(),
            }
            .into());
        }
        let done = done.ok_or_else(|| LinkError::Protocol("a result without Sync Done".into()))?;
        if done.refresh_deletes {
            progress.end_delete_phase(base, done.cookie, true);
        } else {
            progress.end_present_phase(base, done.cookie, true);
        }
        match self.config.sync_type {
            SyncType::RefreshOnly => Ok(Ending::Polled),
            SyncType::RefreshAndPersist => {
                Err(LinkError::Protocol("the end of the persistent search".into()).into())
            }
        }
    }

    /// The entry as the provider sent it, minus what this server computes; refused when it
    /// lies outside the replicated subtree (a provider writes nowhere else).
    fn to_entry(
        &self,
        sent: LdapSearchResultEntry,
        uuid: &Uuid,
        base: &Dn,
    ) -> Result<Entry, SessionError> {
        let schema = self.database()?.store().schema().clone();
        let invalid = |error: lmdir_schema::LdapError| {
            SessionError::Link(LinkError::Protocol(format!(
                "entry '{}': {}",
                sent.dn, error.message
            )))
        };
        let dn = Dn::parse(&sent.dn).map_err(invalid)?;
        let normalized = schema.normalize_dn(&dn).map_err(invalid)?;
        let normalized_base = schema.normalize_dn(base).map_err(invalid)?;
        if !lmdir_schema::normalized_dn_is_within(&normalized, &normalized_base) {
            return Err(LinkError::Protocol(format!(
                "entry '{}' outside the search base '{}'",
                sent.dn, self.config.search_base
            ))
            .into());
        }
        let mut entry = Entry::new(dn);
        for attribute in sent.attributes {
            // What a provider names an attribute goes into the loader's LDIF and the writer's
            // schema check: only a description's characters pass.
            if !lmdir_ldif::is_attribute_description(&attribute.atype) {
                return Err(LinkError::Protocol(format!(
                    "entry '{}': {:?} is not an attribute description",
                    sent.dn, attribute.atype
                ))
                .into());
            }
            let computed = COMPUTED_ATTRIBUTES
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&attribute.atype));
            if !computed {
                entry.add_values(&attribute.atype, attribute.vals);
            }
        }
        if !entry
            .attributes
            .iter()
            .any(|attribute| attribute.description.eq_ignore_ascii_case("entryUUID"))
        {
            let text = crate::sync_apply::uuid_text(uuid);
            entry.add_values("entryUUID", [text.into_bytes()]);
        }
        Ok(entry)
    }

    /// Hands the pending changes and cookie to the writer as one job and waits for its commit.
    async fn flush(&self, progress: &mut Progress) -> Result<(), SessionError> {
        let cookie = std::mem::replace(&mut progress.cookie, CookieUpdate::Keep);
        if progress.pending.is_empty() && cookie == CookieUpdate::Keep {
            self.status.flushed();
            return Ok(());
        }
        self.check_provider_sid(&cookie)?;
        let changes = std::mem::take(&mut progress.pending);
        progress.pending_bytes = 0;
        progress.applied += changes.len();
        let settings = &self.server.settings();
        let (reply, response) = oneshot::channel();
        let applied = Arc::new(Mutex::new(ChangeCounts::default()));
        let batch = SyncBatch {
            rid: self.rid(),
            base: self.config.search_base.clone(),
            changes,
            cookie,
            server_id: self.server_id(),
            resolve_conflicts: self.multi_provider(),
            applied: applied.clone(),
        };
        let covered = batch.csns();
        let job = WriteJob {
            update: Update {
                request: WriteRequest::Replicate(batch),
                identity: Identity {
                    dn: String::new(),
                    normalized_dn: String::new(),
                    is_rootdn: false,
                },
                assertion: None,
                relax: true,
                manage_dsa_it: true,
                permissive_modify: false,
                budget: Duration::from_secs(SYNC_BATCH_BUDGET_SECONDS),
                attribute_descriptions_per_entry_max: settings.attribute_descriptions_per_entry_max,
                password_scheme: lmdir_access::password::Scheme::Ssha,
                hash_cleartext: false,
                password_policy_default: String::new(),
                session: 0,
                received: SystemTime::now(),
                read_images: None,
            },
            reply,
        };
        self.database()?
            .submit(job)
            .await
            .map_err(|error| SessionError::Apply(error.message))?;
        match response.await {
            Ok(Ok(())) => {
                let counts = *applied.lock().unwrap_or_else(|poison| poison.into_inner());
                self.status.committed(counts, &covered);
                self.status.flushed();
                Ok(())
            }
            Ok(Err(error)) => Err(SessionError::Apply(format!(
                "result {}: {}",
                error.code.code(),
                error.message
            ))),
            Err(_) => Err(SessionError::Apply("the writer stopped".into())),
        }
    }
}

/// The entryCSN and cookie a provider message carries, for the consumer's status.
fn marks(message: &Message) -> (Option<Csn>, Option<&[u8]>) {
    match message {
        Message::Entry { entry, state } => {
            let csn = entry
                .attributes
                .iter()
                .find(|attribute| attribute.atype.eq_ignore_ascii_case("entryCSN"))
                .and_then(|attribute| attribute.vals.first())
                .and_then(|value| Csn::parse(value).ok());
            let cookie = state.as_ref().and_then(|state| state.cookie.as_deref());
            (csn, cookie)
        }
        Message::Info(info) => (None, info_cookie(info)),
        Message::Done { done, .. } => (None, done.as_ref().and_then(|d| d.cookie.as_deref())),
        Message::Other(_) => (None, None),
    }
}

fn info_cookie(info: &SyncInfo) -> Option<&[u8]> {
    match info {
        SyncInfo::NewCookie(cookie) => Some(cookie),
        SyncInfo::RefreshDelete { cookie, .. }
        | SyncInfo::RefreshPresent { cookie, .. }
        | SyncInfo::SyncIdSet { cookie, .. } => cookie.as_deref(),
    }
}

/// The largest message this consumer takes from its provider (`pdu_bytes_max` of the consumer,
/// bounded by the config check to at most 2 GiB).
fn consumer_pdu_bytes_max(config: &ConsumerConfig) -> usize {
    usize::try_from(config.pdu_bytes_max).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(request_cookie: Option<&[u8]>) -> Progress {
        Progress {
            request_cookie: request_cookie.map(<[u8]>::to_vec),
            present: Some(HashSet::from([[7u8; 16]])),
            pending: Vec::new(),
            pending_bytes: 0,
            cookie: CookieUpdate::Keep,
            applied: 0,
            listed: Vec::new(),
        }
    }

    #[test]
    fn a_provider_moved_only_when_its_cookie_holds_a_newer_csn() {
        let ours = b"rid=002,sid=001,csn=20260101000000.000000Z#000000#001#000000;\
                     20260101000000.000000Z#000000#002#000000";
        let same = b"rid=002,sid=002,csn=20260101000000.000000Z#000000#002#000000";
        let newer = b"rid=002,sid=002,csn=20260102000000.000000Z#000000#002#000000";
        let other_sid = b"rid=002,sid=002,csn=20200101000000.000000Z#000000#003#000000";
        assert!(
            !provider_moved(ours, same),
            "behind us on sid 1, equal on sid 2"
        );
        assert!(provider_moved(ours, newer));
        assert!(provider_moved(ours, other_sid), "a server ID we never saw");
        assert!(provider_moved(b"x", b"y"), "unparsable: compared as text");
        assert!(!provider_moved(b"x", b"x"));
    }

    #[test]
    fn a_delete_phase_after_a_search_without_cookie_removes_what_it_did_not_mention() {
        let base = Dn::parse("dc=example,dc=com").unwrap();
        let mut first = progress(None);
        first.end_delete_phase(&base, Some(b"csn".to_vec()), true);
        assert!(matches!(
            first.pending.as_slice(),
            [SyncChange::DeleteUnmentioned { present, .. }] if present.contains(&[7u8; 16])
        ));
        assert_eq!(first.cookie, CookieUpdate::Set(b"csn".to_vec()));

        let mut resumed = progress(Some(b"old"));
        resumed.end_delete_phase(&base, Some(b"csn".to_vec()), true);
        assert!(resumed.pending.is_empty(), "the provider named the deletes");
        assert!(resumed.present.is_none());
        assert_eq!(resumed.cookie, CookieUpdate::Set(b"csn".to_vec()));
    }

    #[test]
    fn a_delete_phase_is_held_until_the_cookie_that_ends_it() {
        let base = Dn::parse("dc=example,dc=com").unwrap();
        let mut resumed = progress(Some(b"old"));
        resumed.note_listed([1u8; 16]).unwrap();
        resumed.note_listed([2u8; 16]).unwrap();
        resumed.set_cookie(None);
        assert!(
            resumed.pending.is_empty(),
            "nothing to flush ahead of the cookie"
        );
        resumed.end_delete_phase(&base, Some(b"csn".to_vec()), true);
        assert!(matches!(
            resumed.pending.as_slice(),
            [SyncChange::DeleteListed(uuids)] if uuids == &vec![[1u8; 16], [2u8; 16]]
        ));
        assert_eq!(resumed.cookie, CookieUpdate::Set(b"csn".to_vec()));
    }
}
