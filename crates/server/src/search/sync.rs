//! RFC 4533 refreshOnly on a search (the provider side, as OpenLDAP's syncprov): every entry
//! carries a Sync State control and the SearchResultDone a Sync Done with the cookie of the
//! search's own snapshot (the contextCSN read in the same read transaction as the entries).
//! With a cookie the refresh is a present phase: entries changed since the consumer's CSN
//! for their server ID are sent whole (state add), unchanged ones as `present` with no
//! attributes; the consumer deletes what was not mentioned (refreshDeletes FALSE). A consumer
//! already up to date gets no entries and refreshDeletes TRUE (nothing to delete).

use crate::ber::{EntryWriter, ResponseControl};
use crate::result::{code, OperationError};
use bytes::BytesMut;
use lmdir_schema::{AttrId, Schema};
use lmdir_store::{EntryRef, ReadTxn};
use lmdir_sync::messages::{SYNC_DONE_OID, SYNC_STATE_OID};
use lmdir_sync::{
    ContextCsns, Cookie, Csn, SyncDone, SyncMode, SyncRequest, SyncState, SyncStateKind,
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
        if request.mode == SyncMode::RefreshAndPersist {
            return Err(unwilling("refreshAndPersist is not supported yet"));
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
        })
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
        let control = ResponseControl {
            oid: SYNC_STATE_OID.to_string(),
            criticality: false,
            value: Some(
                SyncState {
                    state,
                    entry_uuid: uuid,
                    cookie: None,
                }
                .encode(),
            ),
        };
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

/// A SearchResultEntry with no attributes: an unchanged entry of the present phase.
pub(super) fn write_present(
    buffer: &mut BytesMut,
    message_id: i32,
    dn: &str,
    control: &ResponseControl,
) {
    let writer = EntryWriter::begin(buffer, message_id, dn.as_bytes());
    writer.finish(std::slice::from_ref(control));
}
