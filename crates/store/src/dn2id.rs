//! Resolving DNs to entry IDs and back within a write transaction (back-mdb's dn2id.c).

use lmdir_schema::{Dn, LdapError, ResultCode};

use crate::layout::EntryId;
use crate::read::{lookup_rdns, DnLookup};
use crate::write::{ldap, WriteTxn};

impl WriteTxn<'_> {
    /// The deepest entry at or above `dn` as this transaction sees it (None when not even the
    /// naming context's entry is there): one point lookup per RDN, whatever `dn` names.
    pub fn deepest_existing(&self, dn: &Dn) -> Result<Option<EntryId>, LdapError> {
        let (_, lookup) = self.lookup(dn)?;
        Ok(lookup.deepest.map(|(id, _)| id))
    }

    /// The parent of entry `id` (0 for the naming context's entry; None when `id` is absent).
    pub fn parent_of(&self, id: EntryId) -> Result<Option<EntryId>, LdapError> {
        Ok(crate::read::read_node(self.inner, &self.txn, id)?.map(|node| node.parent))
    }

    pub(crate) fn lookup(&self, dn: &Dn) -> Result<(Vec<String>, DnLookup), LdapError> {
        let rdns = self.inner.normalize_rdns(dn)?;
        let lookup = lookup_rdns(self.inner, &self.txn, &rdns)?;
        Ok((rdns, lookup))
    }

    pub(crate) fn no_such_object(
        &self,
        dn: &Dn,
        lookup: &DnLookup,
    ) -> Result<LdapError, LdapError> {
        let mut error = ldap(ResultCode::NoSuchObject, format!("no such entry '{dn}'"));
        if let Some((ancestor, _)) = lookup.deepest {
            error =
                error.with_matched_dn(crate::read::dn_of(self.inner, &self.txn, ancestor, false)?);
        }
        Ok(error)
    }

    /// Finds an existing entry by DN or fails with noSuchObject (+ matched DN).
    pub(crate) fn existing(&self, dn: &Dn) -> Result<EntryId, LdapError> {
        let (_, lookup) = self.lookup(dn)?;
        match lookup.found {
            Some(id) => Ok(id),
            None => Err(self.no_such_object(dn, &lookup)?),
        }
    }

    /// The DN of an entry as this transaction sees it.
    pub fn dn_of(&self, id: EntryId) -> Result<String, LdapError> {
        crate::read::dn_of(self.inner, &self.txn, id, false)
    }

    /// The ID of a DN as this transaction sees it (noSuchObject with matched DN on a miss).
    pub fn dn_to_id(&self, dn: &str) -> Result<EntryId, LdapError> {
        self.existing(&Dn::parse(dn)?)
    }
}
