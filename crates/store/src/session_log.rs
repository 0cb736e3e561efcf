//! The provider's session log (OpenLDAP's `syncprov-sessionlog`, kept in LMDB instead of
//! memory): the deletes and renames a delete phase needs, written by the write transaction of
//! the change itself, so a crash never leaves the log ahead of or behind the data.
//!
//! Rows live in their own DB (`sessionlog`), keyed by a sequence number (u64 BE) in commit
//! order on this store. Not by CSN: with several server IDs, CSN order is not commit order (a
//! change replicated late carries an older CSN than the ones committed before it), and the
//! oldest rows must be the first ones a cursor meets so that trimming to the cap deletes from
//! the left edge of the B-tree. Each trimmed row raises the "floor" of its server ID in `meta`:
//! the newest change no longer in the log. A consumer's cookie is covered by the log when it
//! has seen every floor; when the log starts, the floor is the contextCSN (nothing before was
//! logged). `meta` also holds the cap; no cap row = no log.

use heed::RoTxn;
use lmdir_schema::{LdapError, ResultCode};
use lmdir_sync::{ContextCsns, Csn};

use crate::error::{lmdb_to_ldap, RawDatabase};
use crate::layout::EntryId;
use crate::read::corrupt;
use crate::store::{Inner, Store};
use crate::write::{WorkingAttribute, WriteTxn};
use crate::ReadTxn;

/// Most rows the log may be configured to keep (`[replication] session_log_entries`): each row
/// is ~80 bytes, so the log stays under a GiB.
pub const SESSION_LOG_ENTRIES_MAX: u64 = 10_000_000;

/// `meta` key of the log's cap (u64 BE); absent when there is no log.
const META_SESSION_LOG_ENTRIES: &[u8] = b"session_log_entries";
/// `meta` key of one server ID's floor: this prefix ‖ sid (u16 BE) → mark byte ‖ CSN text.
const META_SESSION_LOG_FLOOR_PREFIX: &[u8] = b"session_log_floor:";

const KIND_DELETE: u8 = b'D';
const KIND_RENAME: u8 = b'R';
const MARK_AT: u8 = 0;
const MARK_AFTER: u8 = 1;

fn floor_key(sid: u16) -> Vec<u8> {
    let mut key = META_SESSION_LOG_FLOOR_PREFIX.to_vec();
    key.extend_from_slice(&sid.to_be_bytes());
    key
}

/// What a logged change did to its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoggedKind {
    /// The entry is gone.
    Delete,
    /// The entry (with its subtree) has a new DN, maybe out of a consumer's scope.
    Rename,
}

/// Where a logged change stands in CSN order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoggedCsn {
    /// The change's own CSN: a consumer whose CSN for that server ID is at least this has
    /// seen it.
    At(Csn),
    /// A change without a CSN of its own (a delete a consumer applied for its provider),
    /// committed while this was the newest CSN: only a consumer with a newer CSN for that
    /// server ID has seen it.
    After(Csn),
}

impl LoggedCsn {
    pub fn csn(&self) -> Csn {
        match self {
            LoggedCsn::At(csn) | LoggedCsn::After(csn) => *csn,
        }
    }

    /// Order of "how late": at equal CSNs, After is later than At.
    fn rank(&self) -> (Csn, u8) {
        match self {
            LoggedCsn::At(csn) => (*csn, MARK_AT),
            LoggedCsn::After(csn) => (*csn, MARK_AFTER),
        }
    }

    /// Whether a consumer holding `known` has seen this change.
    pub fn seen_by(&self, known: &ContextCsns) -> bool {
        let Some(seen) = known.get(self.csn().sid()) else {
            return false;
        };
        match self {
            LoggedCsn::At(csn) => seen >= *csn,
            LoggedCsn::After(csn) => seen > *csn,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let (csn, mark) = self.rank();
        out.push(mark);
        out.extend_from_slice(csn.to_string().as_bytes());
    }

    fn decode(bytes: &[u8]) -> Option<LoggedCsn> {
        let (&mark, text) = bytes.split_first()?;
        let csn = Csn::parse(text).ok()?;
        match mark {
            MARK_AT => Some(LoggedCsn::At(csn)),
            MARK_AFTER => Some(LoggedCsn::After(csn)),
            _ => None,
        }
    }
}

/// One row of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedChange {
    pub kind: LoggedKind,
    /// The entry's ID (IDs are never reused: a renamed entry is found again by it).
    pub entry: EntryId,
    /// The entry's normalized entryUUID (text form).
    pub uuid: Vec<u8>,
    pub csn: LoggedCsn,
}

impl LoggedChange {
    /// kind ‖ entry ID (u32 BE) ‖ UUID length (u8) ‖ UUID ‖ mark ‖ CSN text.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.push(match self.kind {
            LoggedKind::Delete => KIND_DELETE,
            LoggedKind::Rename => KIND_RENAME,
        });
        out.extend_from_slice(&self.entry.to_be_bytes());
        out.push(self.uuid.len() as u8);
        out.extend_from_slice(&self.uuid);
        self.csn.encode(&mut out);
        out
    }

    fn decode(bytes: &[u8]) -> Option<LoggedChange> {
        let (&kind, rest) = bytes.split_first()?;
        let kind = match kind {
            KIND_DELETE => LoggedKind::Delete,
            KIND_RENAME => LoggedKind::Rename,
            _ => return None,
        };
        let entry = EntryId::from_be_bytes(rest.get(..4)?.try_into().ok()?);
        let uuid_len = usize::from(*rest.get(4)?);
        let uuid = rest.get(5..5 + uuid_len)?.to_vec();
        let csn = LoggedCsn::decode(rest.get(5 + uuid_len..)?)?;
        Some(LoggedChange {
            kind,
            entry,
            uuid,
            csn,
        })
    }
}

/// The log's state as a read transaction sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionLog {
    pub entries_max: u64,
    pub rows: u64,
    /// Per server ID, the newest change no longer (or never) in the log.
    pub floor: Vec<LoggedCsn>,
}

impl SessionLog {
    /// Whether the log holds every delete and rename a consumer holding `known` has not seen:
    /// it has seen every floor.
    pub fn covers(&self, known: &ContextCsns) -> bool {
        self.floor.iter().all(|floor| floor.seen_by(known))
    }
}

fn stored_entries_max(inner: &Inner, txn: &RoTxn) -> Result<Option<u64>, LdapError> {
    let stored = inner
        .databases
        .meta
        .get(txn, META_SESSION_LOG_ENTRIES)
        .map_err(lmdb_to_ldap)?;
    stored
        .map(|bytes| {
            <[u8; 8]>::try_from(bytes)
                .map(u64::from_be_bytes)
                .map_err(|_| corrupt("meta session_log_entries is not a u64"))
        })
        .transpose()
}

fn stored_floor(inner: &Inner, txn: &RoTxn) -> Result<Vec<LoggedCsn>, LdapError> {
    let mut floor = Vec::new();
    for row in inner
        .databases
        .meta
        .prefix_iter(txn, META_SESSION_LOG_FLOOR_PREFIX)
        .map_err(lmdb_to_ldap)?
    {
        let (_, value) = row.map_err(lmdb_to_ldap)?;
        floor.push(
            LoggedCsn::decode(value).ok_or_else(|| corrupt("undecodable session log floor"))?,
        );
    }
    Ok(floor)
}

/// The log's state; None without a log.
fn session_log_state(inner: &Inner, txn: &RoTxn) -> Result<Option<SessionLog>, LdapError> {
    let (Some(database), Some(entries_max)) =
        (inner.databases.session_log, stored_entries_max(inner, txn)?)
    else {
        return Ok(None);
    };
    Ok(Some(SessionLog {
        entries_max,
        rows: database.len(txn).map_err(lmdb_to_ldap)?,
        floor: stored_floor(inner, txn)?,
    }))
}

impl ReadTxn {
    /// The session log as of this snapshot; None when this store keeps none.
    pub fn session_log(&self) -> Result<Option<SessionLog>, LdapError> {
        session_log_state(&self.inner, self.txn())
    }

    /// Visits, oldest first, every logged change a consumer holding `known` has not seen,
    /// until `visit` answers false. Reads at most the whole log (bounded by its cap).
    pub fn for_each_unseen_change(
        &self,
        known: &ContextCsns,
        visit: &mut dyn FnMut(LoggedChange) -> Result<bool, LdapError>,
    ) -> Result<(), LdapError> {
        let Some(database) = self.inner.databases.session_log else {
            return Ok(());
        };
        for row in database.iter(self.txn()).map_err(lmdb_to_ldap)? {
            let (key, value) = row.map_err(lmdb_to_ldap)?;
            let change = LoggedChange::decode(value)
                .ok_or_else(|| corrupt(format!("session log row {key:02x?} is undecodable")))?;
            if !change.csn.seen_by(known) && !visit(change)? {
                break;
            }
        }
        Ok(())
    }
}

impl Store {
    /// Keeps at most `entries` logged changes (0 = no log: rows and floor are dropped, so a
    /// log started later begins at the contextCSN of that time). Trims at once to a lowered
    /// cap. The server calls it at start with `[replication] session_log_entries`.
    pub fn set_session_log_entries(&self, entries: u64) -> Result<(), LdapError> {
        if entries > SESSION_LOG_ENTRIES_MAX {
            return Err(LdapError::new(
                ResultCode::UnwillingToPerform,
                format!("a session log keeps at most {SESSION_LOG_ENTRIES_MAX} changes"),
            ));
        }
        let mut txn = self.write()?;
        txn.configure_session_log(entries)?;
        txn.commit()
    }
}

impl WriteTxn<'_> {
    fn session_log_database(&self) -> Result<RawDatabase, LdapError> {
        self.inner
            .databases
            .session_log
            .ok_or_else(|| corrupt("the store has no sessionlog DB"))
    }

    fn configure_session_log(&mut self, entries: u64) -> Result<(), LdapError> {
        let database = self.session_log_database()?;
        let meta = self.inner.databases.meta;
        let running = stored_entries_max(self.inner, &self.txn)?.is_some();
        if entries == 0 {
            database.clear(&mut self.txn).map_err(lmdb_to_ldap)?;
            meta.delete(&mut self.txn, META_SESSION_LOG_ENTRIES)
                .map_err(lmdb_to_ldap)?;
            for csn in stored_floor(self.inner, &self.txn)? {
                meta.delete(&mut self.txn, &floor_key(csn.csn().sid()))
                    .map_err(lmdb_to_ldap)?;
            }
            return Ok(());
        }
        if !running {
            // Nothing before now was logged: a consumer must have seen the contextCSN.
            database.clear(&mut self.txn).map_err(lmdb_to_ldap)?;
            for csn in self.context_csn_values()? {
                self.raise_floor(LoggedCsn::At(csn))?;
            }
        }
        meta.put(
            &mut self.txn,
            META_SESSION_LOG_ENTRIES,
            &entries.to_be_bytes(),
        )
        .map_err(lmdb_to_ldap)?;
        self.trim_session_log(entries)
    }

    /// Raises the floor of `csn`'s server ID to it (never lowers it).
    fn raise_floor(&mut self, csn: LoggedCsn) -> Result<(), LdapError> {
        let meta = self.inner.databases.meta;
        let key = floor_key(csn.csn().sid());
        let stored = meta
            .get(&self.txn, &key)
            .map_err(lmdb_to_ldap)?
            .map(|bytes| LoggedCsn::decode(bytes).ok_or_else(|| corrupt("undecodable floor")))
            .transpose()?;
        if stored.is_some_and(|stored| stored.rank() >= csn.rank()) {
            return Ok(());
        }
        let mut value = Vec::new();
        csn.encode(&mut value);
        meta.put(&mut self.txn, &key, &value).map_err(lmdb_to_ldap)
    }

    /// Deletes the oldest rows while there are more than `entries`, raising the floor.
    fn trim_session_log(&mut self, entries: u64) -> Result<(), LdapError> {
        let database = self.session_log_database()?;
        let mut rows = database.len(&self.txn).map_err(lmdb_to_ldap)?;
        while rows > entries {
            let Some((key, value)) = database.first(&self.txn).map_err(lmdb_to_ldap)? else {
                break;
            };
            let (key, value) = (key.to_vec(), value.to_vec());
            let change = LoggedChange::decode(&value)
                .ok_or_else(|| corrupt(format!("session log row {key:02x?} is undecodable")))?;
            database.delete(&mut self.txn, &key).map_err(lmdb_to_ldap)?;
            self.raise_floor(change.csn)?;
            rows -= 1;
        }
        Ok(())
    }

    /// Appends one change (when the store keeps a log) and trims to the cap.
    fn append_logged(&mut self, change: LoggedChange) -> Result<(), LdapError> {
        let Some(entries) = stored_entries_max(self.inner, &self.txn)? else {
            return Ok(());
        };
        let database = self.session_log_database()?;
        let next = match database.last(&self.txn).map_err(lmdb_to_ldap)? {
            Some((key, _)) => <[u8; 8]>::try_from(key)
                .map(u64::from_be_bytes)
                .map_err(|_| corrupt("session log key is not a u64"))?
                .checked_add(1)
                .ok_or_else(|| corrupt("session log sequence exhausted"))?,
            None => 0,
        };
        database
            .put(&mut self.txn, &next.to_be_bytes(), &change.encode())
            .map_err(lmdb_to_ldap)?;
        self.trim_session_log(entries)
    }

    /// Logs the removal of entry `id` (before its rows go). `csn`: the delete's own CSN, or
    /// None for a delete applied for a provider (logged after the newest contextCSN).
    pub(crate) fn log_removal(&mut self, id: EntryId, csn: Option<Csn>) -> Result<(), LdapError> {
        if stored_entries_max(self.inner, &self.txn)?.is_none() {
            return Ok(());
        }
        let csn = match csn {
            Some(csn) => LoggedCsn::At(csn),
            // Without any contextCSN no consumer holds a cookie this delete could be after.
            None => match self.context_csn_values()?.into_iter().max() {
                Some(newest) => LoggedCsn::After(newest),
                None => return Ok(()),
            },
        };
        match self.entry_uuid_of(id) {
            Ok(Some(uuid)) => self.append_logged(LoggedChange {
                kind: LoggedKind::Delete,
                entry: id,
                uuid,
                csn,
            }),
            // No entryUUID: never replicated, nothing for a consumer to delete.
            Ok(None) => Ok(()),
            // An undecodable entry: its UUID is unknown, so no cookie before this delete is
            // covered any more (those consumers reload).
            Err(_) => self.raise_floor(csn),
        }
    }

    /// Logs the rename of entry `id` whose new values (stamped with its entryCSN) are
    /// `attributes`.
    pub(crate) fn log_rename(
        &mut self,
        id: EntryId,
        attributes: &[WorkingAttribute],
    ) -> Result<(), LdapError> {
        if stored_entries_max(self.inner, &self.txn)?.is_none() {
            return Ok(());
        }
        let schema = &self.inner.schema();
        let first_value = |name: &str| {
            let attr = schema.attribute(name)?;
            attributes
                .iter()
                .filter(|attribute| attribute.attr == attr)
                .find_map(|attribute| attribute.values.first())
                .cloned()
        };
        let uuid = first_value("entryUUID").map(|(_, normalized)| normalized);
        let csn = first_value("entryCSN").and_then(|(original, _)| Csn::parse(&original).ok());
        match (uuid, csn) {
            (Some(uuid), Some(csn)) => self.append_logged(LoggedChange {
                kind: LoggedKind::Rename,
                entry: id,
                uuid,
                csn: LoggedCsn::At(csn),
            }),
            // Without a CSN the rename cannot be placed: every cookie so far loses coverage.
            (Some(_), None) => {
                for csn in self.context_csn_values()? {
                    self.raise_floor(LoggedCsn::After(csn))?;
                }
                Ok(())
            }
            (None, _) => Ok(()),
        }
    }
}

/// `lmdir check`'s view of the log: rows decode, at most the cap, floors decode.
pub(crate) fn check_session_log(read: &ReadTxn) -> Result<Vec<String>, LdapError> {
    let inner = &read.inner;
    let mut problems = Vec::new();
    let Some(database) = inner.databases.session_log else {
        return Ok(problems);
    };
    let entries_max = stored_entries_max(inner, read.txn())?;
    if let Err(error) = stored_floor(inner, read.txn()) {
        problems.push(format!("meta: {}", error.message));
    }
    let mut rows = 0u64;
    for row in database.iter(read.txn()).map_err(lmdb_to_ldap)? {
        let (key, value) = row.map_err(lmdb_to_ldap)?;
        rows += 1;
        if key.len() != 8 || LoggedChange::decode(value).is_none() {
            problems.push(format!("sessionlog: row {key:02x?} is undecodable"));
        }
    }
    match entries_max {
        None if rows > 0 => problems.push(format!(
            "sessionlog: {rows} rows but meta has no session_log_entries"
        )),
        Some(max) if rows > max => {
            problems.push(format!("sessionlog: {rows} rows, above its cap of {max}"))
        }
        _ => {}
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csn(text: &str) -> Csn {
        Csn::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn rows_round_trip() {
        let change = LoggedChange {
            kind: LoggedKind::Rename,
            entry: 0x0102_0304,
            uuid: b"12345678-9abc-def0-0123-456789abcdef".to_vec(),
            csn: LoggedCsn::After(csn("20261122230000.000001Z#000002#001#000000")),
        };
        assert_eq!(LoggedChange::decode(&change.encode()), Some(change.clone()));
        let mut truncated = change.encode();
        truncated.truncate(10);
        assert_eq!(LoggedChange::decode(&truncated), None);
    }

    #[test]
    fn seen_by_distinguishes_at_and_after() {
        let c1 = csn("20261122230000.000001Z#000000#001#000000");
        let c2 = csn("20261122230000.000002Z#000000#001#000000");
        let mut known = ContextCsns::new();
        known.merge(c1);
        assert!(LoggedCsn::At(c1).seen_by(&known));
        assert!(!LoggedCsn::After(c1).seen_by(&known));
        assert!(!LoggedCsn::At(c2).seen_by(&known));
        let other_sid = csn("20261122230000.000001Z#000000#002#000000");
        assert!(!LoggedCsn::At(other_sid).seen_by(&known), "unknown SID");
        assert!(LoggedCsn::After(c1).rank() > LoggedCsn::At(c1).rank());
    }
}
