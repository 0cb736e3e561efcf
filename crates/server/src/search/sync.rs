//! RFC 4533 sync searches (the provider side, as OpenLDAP's syncprov): every entry
//! carries a Sync State control and the SearchResultDone a Sync Done with the cookie of the
//! search's own snapshot (the contextCSN read in the same read transaction as the entries).
//! With a cookie and a session log that covers it (`lmdir_store::SessionLog`) the refresh is a
//! delete phase: entries changed since the cookie are sent whole (state add), then the
//! entryUUIDs of entries deleted or renamed out of the search since then as Sync Info
//! syncIdSets with refreshDeletes TRUE, then Sync Done with refreshDeletes TRUE (the consumer
//! deletes exactly those). A cookie older than the log is answered e-syncRefreshRequired (4096):
//! the consumer drops it and reloads; with reloadHint TRUE (the consumer accepts a reload, as
//! slapd's always does) it gets the present phase instead. Without a session log the refresh
//! is a present phase: changed entries whole, unchanged ones as `present` with no attributes; the consumer deletes
//! what was not mentioned (refreshDeletes FALSE). A consumer already up to date gets no entries
//! and refreshDeletes TRUE (nothing to delete).
//!
//! refreshAndPersist runs the same refresh and ends it with a Sync Info instead of the
//! SearchResultDone: refreshPresent (refreshDelete after a delete phase) with refreshDone
//! TRUE and the snapshot's cookie, as syncprov does; `persist.rs` streams the changes after it.

use crate::ber::{write_intermediate_response, EntryWriter, ResponseControl};
use crate::result::{code, OperationError};
use bytes::BytesMut;
use lmdir_schema::{AttrId, Schema};
use lmdir_store::{EntryId, LoggedKind, TREE_DEPTH_MAX};
use lmdir_store::{EntryRef, ReadTxn};
use lmdir_sync::messages::{
    E_SYNC_REFRESH_REQUIRED, SYNC_DONE_OID, SYNC_INFO_OID, SYNC_STATE_OID, UUID_BYTES,
};
use lmdir_sync::{
    ContextCsns, Cookie, Csn, SyncDone, SyncInfo, SyncMode, SyncRequest, SyncState, SyncStateKind,
};
use std::collections::HashSet;

/// UUIDs per syncIdSet message of a delete phase: ~20 KiB each, as slapd's present sets of
/// 256 are small; our own consumer accepts up to `SYNC_ID_SET_UUIDS_MAX` per message.
pub(super) const DELETE_PHASE_UUIDS_PER_MESSAGE: usize = 1024;
/// Most UUIDs one delete phase collects (16 bytes each: 16 MiB). Beyond, the refresh falls back
/// to a present phase, whose memory does not grow with the number of deletes.
pub(super) const DELETE_PHASE_UUIDS_MAX: usize = 1_048_576;
/// Most entries of renamed subtrees one delete phase looks at (slapd names only the renamed
/// entries themselves; a subtree moved out of the search needs its members named). Beyond,
/// the refresh falls back to a present phase, which walks only the search's own scope.
pub(super) const DELETE_PHASE_RENAMED_ENTRIES_MAX: u32 = 10_000;

type Uuid = [u8; UUID_BYTES];

/// What a refresh sends for each entry in scope.
pub(super) enum EntryState {
    /// The whole entry (changed since the consumer's cookie, or no cookie).
    Add(ResponseControl),
    /// Only the DN and the state: unchanged.
    Present(ResponseControl),
}

pub(super) struct SyncRefresh {
    /// The consumer's CSNs; None without a cookie (every entry is sent whole).
    known: Option<ContextCsns>,
    /// Some in a delete phase: the UUIDs to delete (filled by `collect_deletes`); entries not
    /// changed since the cookie are then not sent at all.
    deletes: Option<Vec<Uuid>>,
    /// The consumer already holds every change: nothing is sent.
    up_to_date: bool,
    reply_cookie: Vec<u8>,
    entry_uuid: Option<AttrId>,
    entry_csn: Option<AttrId>,
    /// refreshAndPersist: what the persist phase starts from.
    persist: Option<RefreshEnd>,
}

/// Where a refresh left a refreshAndPersist search: its snapshot (the LMDB transaction ID and
/// the contextCSN read in it) and how to build the cookies of the changes that follow.
#[derive(Clone, Debug)]
pub(super) struct RefreshEnd {
    /// The base the refresh searched, normalized: the target of a base alias dereferenced in
    /// finding (slapd's syncprov keeps the found entry's DN as the persist phase's base).
    pub(super) base: String,
    pub(super) snapshot_id: u64,
    pub(super) context: ContextCsns,
    pub(super) consumer: Cookie,
    pub(super) sid: Option<u16>,
}

impl RefreshEnd {
    /// The cookie of a change that stamped `csn`: that CSN alone, as syncprov sends it
    /// (OpenLDAP's consumer compares the cookie's first CSN with what it holds for that CSN's
    /// server ID, and merges it in).
    pub(super) fn advance(&mut self, csn: Csn) -> Vec<u8> {
        self.context.merge(csn);
        let mut single = ContextCsns::new();
        single.merge(csn);
        Cookie::reply_to(&self.consumer, self.sid, &single).to_bytes()
    }
}

/// A Sync State control (RFC 4533 §2.3).
pub(super) fn state_control(
    state: SyncStateKind,
    entry_uuid: [u8; 16],
    cookie: Option<Vec<u8>>,
) -> ResponseControl {
    ResponseControl {
        oid: SYNC_STATE_OID.to_string(),
        criticality: false,
        value: Some(
            SyncState {
                state,
                entry_uuid,
                cookie,
            }
            .encode(),
        ),
    }
}

fn unwilling(message: &str) -> OperationError {
    OperationError::new(code::UNWILLING_TO_PERFORM, message)
}

impl SyncRefresh {
    /// The refresh a Sync Request asks for at `base` (normalized, aliases found), against the
    /// snapshot `read`.
    pub(super) fn start(
        request: &SyncRequest,
        base: &str,
        provider: bool,
        server_id: u16,
        read: &ReadTxn,
        schema: &Schema,
    ) -> Result<SyncRefresh, OperationError> {
        if !provider {
            return Err(unwilling(
                "this server is not a replication provider ([replication] provider)",
            ));
        }
        let mut context = ContextCsns::new();
        for csn in read.context_csns()? {
            context.merge(csn);
        }
        let consumer = match &request.cookie {
            Some(text) => Cookie::parse(text).map_err(|error| {
                OperationError::new(code::PROTOCOL_ERROR, format!("sync cookie: {error}"))
            })?,
            None => Cookie::default(),
        };
        let known = request
            .cookie
            .as_ref()
            .filter(|_| !request.reload_hint || !consumer.csns().is_empty())
            .map(|_| consumer.csns().clone())
            .filter(|csns| !csns.is_empty());
        let mut up_to_date = known
            .as_ref()
            .is_some_and(|known| context.status_of(known).is_up_to_date());
        let deletes = match (&known, read.session_log()?) {
            (Some(known), Some(log)) if log.covers(known) => Some(Vec::new()),
            // A consumer that accepts a reload (reloadHint TRUE, as slapd's syncrepl always
            // sends) gets the present phase, as slapd's syncprov answers a cookie older than
            // its session log (even when its CSNs look current: a delete applied for our
            // provider moves no contextCSN); one that does not is told to reload.
            (Some(_), Some(_)) if request.reload_hint => {
                up_to_date = false;
                None
            }
            (Some(_), Some(_)) => {
                return Err(OperationError::new(
                    E_SYNC_REFRESH_REQUIRED,
                    "the cookie is older than the session log: reload",
                ));
            }
            _ => None,
        };
        let sid = (server_id != 0).then_some(server_id);
        Ok(SyncRefresh {
            known,
            deletes,
            up_to_date,
            reply_cookie: Cookie::reply_to(&consumer, sid, &context).to_bytes(),
            entry_uuid: schema.attribute("entryUUID"),
            entry_csn: schema.attribute("entryCSN"),
            persist: (request.mode == SyncMode::RefreshAndPersist).then(|| RefreshEnd {
                base: base.to_string(),
                snapshot_id: read.snapshot_id(),
                context,
                consumer,
                sid,
            }),
        })
    }

    /// refreshAndPersist: where the persist phase starts (None for refreshOnly).
    pub(super) fn persist_start(&self) -> Option<RefreshEnd> {
        self.persist.clone()
    }

    /// The Sync Info ending a refreshAndPersist refresh: refreshPresent after a present phase,
    /// refreshDelete after a delete phase or when the consumer was up to date (nothing to
    /// delete), both with refreshDone TRUE and the snapshot's cookie (as `done_control`).
    pub(super) fn write_refresh_done(&self, buffer: &mut BytesMut, message_id: i32) {
        let cookie = Some(self.reply_cookie.clone());
        let info = match self.up_to_date || self.deletes.is_some() {
            true => SyncInfo::RefreshDelete {
                cookie,
                refresh_done: true,
            },
            false => SyncInfo::RefreshPresent {
                cookie,
                refresh_done: true,
            },
        };
        write_intermediate_response(buffer, message_id, SYNC_INFO_OID, &info.encode());
    }

    pub(super) fn sends_entries(&self) -> bool {
        !self.up_to_date
    }

    /// Whether this refresh is a delete phase (until `collect_deletes` falls back).
    pub(super) fn is_delete_phase(&self) -> bool {
        self.deletes.is_some()
    }

    /// The delete phase's UUIDs (empty outside one).
    pub(super) fn deletes(&self) -> &[Uuid] {
        self.deletes.as_deref().unwrap_or_default()
    }

    /// Collects, for a delete phase, the UUIDs of the entries deleted or renamed out of this
    /// search since the cookie (`tests` says which entries the search returns and the
    /// requester may see, and when to stop: abandoned or out of time). Falls back to a present
    /// phase when a renamed entry that is visible has children (they may have moved into the
    /// search unchanged, and only a present phase sends unchanged entries), when a renamed
    /// subtree holds an entry the requester may not see (never named: only a present phase
    /// tells the consumer about it without naming it), past `DELETE_PHASE_RENAMED_ENTRIES_MAX`
    /// entries of renamed subtrees or past `DELETE_PHASE_UUIDS_MAX`.
    pub(super) fn collect_deletes(
        &mut self,
        read: &ReadTxn,
        tests: &DeleteTests<'_>,
    ) -> Result<(), OperationError> {
        let (Some(known), Some(_)) = (&self.known, &self.deletes) else {
            return Ok(());
        };
        let mut collector = DeleteCollector {
            read,
            tests,
            uuid_attr: self.entry_uuid,
            uuids: Vec::new(),
            seen: HashSet::new(),
            walked: 0,
            fall_back: false,
        };
        let mut failure = None;
        read.for_each_unseen_change(known, &mut |change| {
            let kept = match (tests.stop)() {
                Some(stop) => Err(stop),
                None => match change.kind {
                    LoggedKind::Delete => collector.deleted(&change.uuid),
                    LoggedKind::Rename => collector.renamed(change.entry),
                },
            };
            kept.or_else(|error| {
                failure = Some(error);
                Ok(false)
            })
        })?;
        if let Some(error) = failure {
            return Err(error);
        }
        if collector.fall_back {
            self.deletes = None;
            self.up_to_date = false;
        } else {
            self.deletes = Some(collector.uuids);
        }
        Ok(())
    }

    fn first_value<'e>(entry: &'e EntryRef<'_>, attr: Option<AttrId>) -> Option<&'e [u8]> {
        let attr = attr?;
        entry.values_of(attr).first().map(|(original, _)| *original)
    }

    /// The state of one entry in scope; None for an entry without entryUUID (it cannot be
    /// replicated: a consumer identifies entries by it).
    pub(super) fn state_of(&self, entry: &EntryRef<'_>) -> Option<EntryState> {
        let uuid =
            Self::first_value(entry, self.entry_uuid).and_then(crate::sync_apply::uuid_bytes)?;
        let changed = match &self.known {
            None => true,
            Some(known) => Self::first_value(entry, self.entry_csn)
                .and_then(|text| Csn::parse(text).ok())
                .is_none_or(|csn| known.get(csn.sid()).is_none_or(|seen| csn > seen)),
        };
        let state = match (changed, &self.deletes) {
            (true, _) => SyncStateKind::Add,
            // A delete phase sends only what changed.
            (false, Some(_)) => return None,
            (false, None) => SyncStateKind::Present,
        };
        let control = state_control(state, uuid, None);
        Some(match state {
            SyncStateKind::Add => EntryState::Add(control),
            _ => EntryState::Present(control),
        })
    }

    /// The Sync Done of the SearchResultDone.
    pub(super) fn done_control(&self) -> ResponseControl {
        ResponseControl {
            oid: SYNC_DONE_OID.to_string(),
            criticality: false,
            value: Some(
                SyncDone {
                    cookie: Some(self.reply_cookie.clone()),
                    refresh_deletes: self.up_to_date || self.deletes.is_some(),
                }
                .encode(),
            ),
        }
    }
}

/// A SearchResultEntry with no attributes: an unchanged entry of the present phase, or a
/// deleted one (delete state) in the persist phase.
pub(super) fn write_present(
    buffer: &mut BytesMut,
    message_id: i32,
    dn: &str,
    control: &ResponseControl,
) {
    let writer = EntryWriter::begin(buffer, message_id, dn.as_bytes());
    writer.finish(std::slice::from_ref(control));
}

/// What a delete phase asks of its search about an existing entry, and when it must stop.
pub(super) struct DeleteTests<'a> {
    /// The entry is returned by the search (scope, filter and access).
    pub(super) visible: &'a dyn Fn(EntryId) -> Result<bool, OperationError>,
    /// The requester may search and read the entry where it is now (whatever the search).
    pub(super) readable: &'a dyn Fn(EntryId) -> Result<bool, OperationError>,
    /// Why the search must stop now (abandoned, out of time), if it must.
    pub(super) stop: &'a dyn Fn() -> Option<OperationError>,
}

/// Gathers a delete phase's UUIDs, each once.
struct DeleteCollector<'a> {
    read: &'a ReadTxn,
    tests: &'a DeleteTests<'a>,
    uuid_attr: Option<AttrId>,
    uuids: Vec<Uuid>,
    seen: HashSet<Uuid>,
    /// Entries of renamed subtrees looked at so far (`DELETE_PHASE_RENAMED_ENTRIES_MAX`).
    walked: u32,
    fall_back: bool,
}

impl DeleteCollector<'_> {
    /// Adds one UUID; false (stop) once the phase would hold too many.
    fn push(&mut self, uuid: Uuid) -> bool {
        if self.seen.insert(uuid) {
            self.uuids.push(uuid);
        }
        if self.uuids.len() > DELETE_PHASE_UUIDS_MAX {
            self.fall_back = true;
        }
        !self.fall_back
    }

    /// Ends the delete phase: the refresh is a present phase.
    fn fall_back(&mut self) -> bool {
        self.fall_back = true;
        false
    }

    /// A deleted entry, unless an entry with its entryUUID is in the search now: deleted, then
    /// brought back with the same entryUUID by a replicated change (multi-provider); the
    /// consumer holds or gets it as it is now, and naming it gone would delete it there.
    fn deleted(&mut self, uuid_text: &[u8]) -> Result<bool, OperationError> {
        let Some(uuid) = crate::sync_apply::uuid_bytes(uuid_text) else {
            return Ok(true);
        };
        let now = match std::str::from_utf8(uuid_text) {
            Ok(text) => self.read.entry_id_by_uuid(text)?,
            Err(_) => None,
        };
        if let Some(id) = now {
            if (self.tests.visible)(id)? {
                return Ok(true);
            }
        }
        Ok(self.push(uuid))
    }

    /// A renamed entry (with its subtree, which moved along): every member that exists, is
    /// not returned by the search any more and that the requester may see is deleted on the
    /// consumer. A deleted one has its own row. The walk is bounded, checks the stop, and
    /// falls back to a present phase rather than name an entry the requester may not see.
    fn renamed(&mut self, top: EntryId) -> Result<bool, OperationError> {
        if self.read.entry(top)?.is_none() {
            return Ok(true);
        }
        if (self.tests.visible)(top)? && self.read.has_subordinates(top)? {
            return Ok(self.fall_back());
        }
        self.walked = self.walked.saturating_add(self.read.subtree_size(top)?);
        if self.walked > DELETE_PHASE_RENAMED_ENTRIES_MAX {
            return Ok(self.fall_back());
        }
        let mut stack = vec![(top, 0usize)];
        while let Some((id, depth)) = stack.pop() {
            if let Some(stop) = (self.tests.stop)() {
                return Err(stop);
            }
            if depth > TREE_DEPTH_MAX {
                return Err(OperationError::new(
                    code::OTHER,
                    "the DN tree is deeper than the store allows",
                ));
            }
            if !(self.tests.visible)(id)? && !self.moved_out(id)? {
                return Ok(false);
            }
            for child in self.read.children(id)? {
                stack.push((child, depth + 1));
            }
        }
        Ok(true)
    }

    /// A member of a renamed subtree the search does not return: named when the requester
    /// may see it; else the phase falls back (false).
    fn moved_out(&mut self, id: EntryId) -> Result<bool, OperationError> {
        if !(self.tests.readable)(id)? {
            return Ok(self.fall_back());
        }
        let uuid = match self.read.entry(id)? {
            Some(entry) => SyncRefresh::first_value(&entry, self.uuid_attr)
                .and_then(crate::sync_apply::uuid_bytes),
            None => None,
        };
        Ok(uuid.is_none_or(|uuid| self.push(uuid)))
    }
}

/// One Sync Info intermediate response (RFC 4533 §2.5) of the search `message_id`.
pub(super) fn write_sync_info(buffer: &mut BytesMut, message_id: i32, info: &SyncInfo) {
    use crate::ber::{tag, BerWriter};
    /// [APPLICATION 25] IntermediateResponse, constructed.
    const INTERMEDIATE_RESPONSE: u8 = 0x79;
    const RESPONSE_NAME: u8 = 0x80;
    const RESPONSE_VALUE: u8 = 0x81;
    let mut writer = BerWriter::new(buffer);
    writer.open(tag::SEQUENCE);
    writer.integer(tag::INTEGER, i64::from(message_id));
    writer.open(INTERMEDIATE_RESPONSE);
    writer.primitive(RESPONSE_NAME, SYNC_INFO_OID.as_bytes());
    writer.primitive(RESPONSE_VALUE, &info.encode());
    writer.close();
    writer.close();
}

/// The syncIdSet messages of a delete phase, `DELETE_PHASE_UUIDS_PER_MESSAGE` UUIDs each.
pub(super) fn delete_phase_messages(uuids: &[Uuid]) -> impl Iterator<Item = SyncInfo> + '_ {
    uuids
        .chunks(DELETE_PHASE_UUIDS_PER_MESSAGE)
        .map(|chunk| SyncInfo::SyncIdSet {
            cookie: None,
            refresh_deletes: true,
            uuids: chunk.to_vec(),
        })
}
