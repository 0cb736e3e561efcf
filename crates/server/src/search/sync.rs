//! RFC 4533 refreshOnly on a search (the provider side, as OpenLDAP's syncprov): every entry
//! carries a Sync State control and the SearchResultDone a Sync Done with the cookie of the
//! search's own snapshot (the contextCSN read in the same read transaction as the entries).
//! With a cookie the refresh is a present phase: entries changed since the consumer's CSN
//! for their server ID are sent whole (state add), unchanged ones as `present` with no
//! attributes; the consumer deletes what was not mentioned (refreshDeletes FALSE). A consumer
//! already up to date gets no entries and refreshDeletes TRUE (nothing to delete).
//!
//! refreshAndPersist runs the same refresh and ends it with a Sync Info instead of the
//! SearchResultDone: refreshPresent (or refreshDelete when nothing was sent) with refreshDone
//! TRUE and the snapshot's cookie, as syncprov does; `persist.rs` streams the changes after it.

use crate::ber::{write_intermediate_response, EntryWriter, ResponseControl};
use crate::result::{code, OperationError};
use bytes::BytesMut;
use lmdir_schema::{AttrId, Schema};
use lmdir_store::{EntryRef, ReadTxn};
use lmdir_sync::messages::{SYNC_DONE_OID, SYNC_INFO_OID, SYNC_STATE_OID};
use lmdir_sync::{
    ContextCsns, Cookie, Csn, SyncDone, SyncInfo, SyncMode, SyncRequest, SyncState, SyncStateKind,
};

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
    /// The refresh a Sync Request asks for, against the snapshot `read`.
    pub(super) fn start(
        request: &SyncRequest,
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
        let up_to_date = known
            .as_ref()
            .is_some_and(|known| context.status_of(known).is_up_to_date());
        let sid = (server_id != 0).then_some(server_id);
        Ok(SyncRefresh {
            known,
            up_to_date,
            reply_cookie: Cookie::reply_to(&consumer, sid, &context).to_bytes(),
            entry_uuid: schema.attribute("entryUUID"),
            entry_csn: schema.attribute("entryCSN"),
            persist: (request.mode == SyncMode::RefreshAndPersist).then(|| RefreshEnd {
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
    /// refreshDelete when the consumer was up to date (nothing to delete), both with
    /// refreshDone TRUE and the snapshot's cookie.
    pub(super) fn write_refresh_done(&self, buffer: &mut BytesMut, message_id: i32) {
        let cookie = Some(self.reply_cookie.clone());
        let info = match self.up_to_date {
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

    fn first_value<'e>(entry: &'e EntryRef<'_>, attr: Option<AttrId>) -> Option<&'e [u8]> {
        let attr = attr?;
        entry.values_of(attr).first().map(|(original, _)| *original)
    }

    /// The state of one entry in scope; None for an entry without entryUUID (it cannot be
    /// replicated: a consumer identifies entries by it).
    pub(super) fn state_of(&self, entry: &EntryRef<'_>) -> Option<EntryState> {
        let uuid = Self::first_value(entry, self.entry_uuid)
            .and_then(crate::replication::apply::uuid_bytes)?;
        let changed = match &self.known {
            None => true,
            Some(known) => Self::first_value(entry, self.entry_csn)
                .and_then(|text| Csn::parse(text).ok())
                .is_none_or(|csn| known.get(csn.sid()).is_none_or(|seen| csn > seen)),
        };
        let state = if changed {
            SyncStateKind::Add
        } else {
            SyncStateKind::Present
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
                    refresh_deletes: self.up_to_date,
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
