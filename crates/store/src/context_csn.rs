//! This server's change sequence numbers and the directory's `contextCSN` (RFC 4533 provider,
//! OpenLDAP's syncprov). Every change a write transaction makes takes its CSN from
//! [`WriteTxn::next_csn`], which also writes the new largest CSN of this server ID into `meta`
//! in the same transaction: the contextCSN (one value per server ID, shown on the suffix entry)
//! is always exactly the newest committed change, and a crash can never leave it ahead of or
//! behind the data. The generator resumes after the stored value, so a restart on a clock that
//! went backwards never reissues a CSN.

use lmdir_schema::{LdapError, ResultCode};
use lmdir_sync::{Csn, CsnGenerator};
use std::time::SystemTime;

use crate::csn_state::CsnState;
use crate::error::{lmdb_to_ldap, RawDatabase};
use crate::read::corrupt;
use crate::store::Store;
use crate::write::WriteTxn;
use crate::ReadTxn;
use heed::RoTxn;

/// `meta` key of the largest CSN of one server ID: this prefix ‖ sid (u16 BE).
const META_CONTEXT_CSN_PREFIX: &[u8] = b"context_csn:";

/// Whether a `meta` key holds a contextCSN.
pub(crate) fn is_context_csn_key(key: &[u8]) -> bool {
    key.starts_with(META_CONTEXT_CSN_PREFIX)
}

fn context_csn_key(sid: u16) -> Vec<u8> {
    let mut key = META_CONTEXT_CSN_PREFIX.to_vec();
    key.extend_from_slice(&sid.to_be_bytes());
    key
}

impl Store {
    /// The server ID (`[replication] server_id`, 0..=4095) in every CSN this store issues from
    /// now on; 0 without replication.
    pub fn set_server_id(&self, sid: u16) -> Result<(), LdapError> {
        CsnGenerator::new(sid).map_err(|error| {
            LdapError::new(
                ResultCode::UnwillingToPerform,
                format!("server ID: {error}"),
            )
        })?;
        let mut state = crate::lock::lock(&self.inner.csns);
        if state.sid != sid {
            *state = CsnState {
                sid,
                generator: None,
            };
        }
        Ok(())
    }

    /// The server ID set by `set_server_id`.
    pub fn server_id(&self) -> u16 {
        crate::lock::lock(&self.inner.csns).sid
    }
}

impl ReadTxn {
    /// The directory's contextCSN: the newest committed CSN of each server ID, by server ID.
    pub fn context_csns(&self) -> Result<Vec<Csn>, LdapError> {
        stored_context_csns(self.inner.databases.meta, self.txn())
    }
}

/// Every stored contextCSN, by server ID.
fn stored_context_csns(meta: RawDatabase, txn: &RoTxn) -> Result<Vec<Csn>, LdapError> {
    let mut csns = Vec::new();
    for row in meta
        .prefix_iter(txn, META_CONTEXT_CSN_PREFIX)
        .map_err(lmdb_to_ldap)?
    {
        let (_, value) = row.map_err(lmdb_to_ldap)?;
        csns.push(
            Csn::parse(value).map_err(|error| corrupt(format!("stored contextCSN: {error}")))?,
        );
    }
    Ok(csns)
}

impl crate::BulkWriter<'_> {
    /// Records `csn` as the contextCSN of its server ID in the load's transaction: the loader
    /// gives the newest CSN it stamped, so a consumer's cookie covers the loaded entries.
    pub fn set_context_csn(&mut self, csn: Csn) -> Result<(), crate::StoreError> {
        let meta = self.inner.databases.meta;
        meta.put(
            self.txn(),
            &context_csn_key(csn.sid()),
            csn.to_string().as_bytes(),
        )?;
        Ok(())
    }
}

impl WriteTxn<'_> {
    /// The contextCSN (every server ID's value) as this transaction sees it.
    pub(crate) fn context_csn_values(&self) -> Result<Vec<Csn>, LdapError> {
        stored_context_csns(self.inner.databases.meta, &self.txn)
    }

    /// The stored contextCSN of server ID `sid` as this transaction sees it.
    pub fn stored_context_csn(&self, sid: u16) -> Result<Option<Csn>, LdapError> {
        let stored = self
            .inner
            .databases
            .meta
            .get(&self.txn, &context_csn_key(sid))
            .map_err(lmdb_to_ldap)?;
        stored
            .map(|value| {
                Csn::parse(value).map_err(|error| corrupt(format!("stored contextCSN: {error}")))
            })
            .transpose()
    }

    /// The CSN of one change made now by this server, recorded as its contextCSN in this
    /// transaction. CSNs handed out to a transaction that is then aborted are simply unused.
    pub fn next_csn(&mut self, now: SystemTime) -> Result<Csn, LdapError> {
        let inner = self.inner;
        let mut state = crate::lock::lock(&inner.csns);
        let sid = state.sid;
        if state.generator.is_none() {
            let generator = match self.stored_context_csn(sid)? {
                Some(last) => CsnGenerator::resuming_after(sid, last),
                None => CsnGenerator::new(sid),
            };
            state.generator = Some(generator.map_err(|error| corrupt(error.to_string()))?);
        }
        let csn = state
            .generator
            .as_mut()
            .expect("made above")
            .next(now)
            .map_err(|error| LdapError::new(ResultCode::UnwillingToPerform, error.to_string()))?;
        drop(state);
        self.advance_context_csn(csn)?;
        Ok(csn)
    }

    /// Raises the contextCSN of `csn`'s server ID to `csn` (never lowers it): for changes this
    /// server issued, and for changes a provider issued that a consumer applies.
    pub fn advance_context_csn(&mut self, csn: Csn) -> Result<(), LdapError> {
        if self
            .stored_context_csn(csn.sid())?
            .is_some_and(|stored| stored >= csn)
        {
            return Ok(());
        }
        self.inner
            .databases
            .meta
            .put(
                &mut self.txn,
                &context_csn_key(csn.sid()),
                csn.to_string().as_bytes(),
            )
            .map_err(lmdb_to_ldap)
    }
}
