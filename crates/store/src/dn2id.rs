//! Resolving DNs to entry IDs and back within a write transaction (back-mdb's dn2id.c).

use std::borrow::Cow;

use lmdir_schema::{LdapError, NormalizedDn, ResultCode};

use crate::layout::EntryId;
use crate::read::{lookup_rdns, DnLookup};
use crate::target_dn::TargetDn;
use crate::write::{ldap, WriteTxn};

impl WriteTxn<'_> {
    /// `dn` as a [`NormalizedDn`] (borrowed when it is one already).
    pub(crate) fn target<'a, T: TargetDn + ?Sized>(
        &self,
        dn: &'a T,
    ) -> Result<Cow<'a, NormalizedDn>, LdapError> {
        dn.normalized(&self.inner.schema())
    }

    /// The deepest entry at or above `dn` as this transaction sees it (None when not even the
    /// naming context's entry is there): one point lookup per RDN, whatever `dn` names.
    pub fn deepest_existing<T: TargetDn + ?Sized>(
        &self,
        dn: &T,
    ) -> Result<Option<EntryId>, LdapError> {
        let lookup = self.lookup(&*self.target(dn)?)?;
        Ok(lookup.deepest.map(|(id, _)| id))
    }

    /// The parent of entry `id` (0 for the naming context's entry; None when `id` is absent).
    pub fn parent_of(&self, id: EntryId) -> Result<Option<EntryId>, LdapError> {
        Ok(crate::read::read_node(self.inner, &self.txn, id)?.map(|node| node.parent))
    }

    /// Walks the tree along the RDNs `dn` was normalized to (never normalizing again).
    pub(crate) fn lookup(&self, dn: &NormalizedDn) -> Result<DnLookup, LdapError> {
        lookup_rdns(self.inner, &self.txn, dn.rdns())
    }

    /// Walks the tree along a normalized DN's text (a stored link: neither parsed nor
    /// normalized again).
    pub(crate) fn lookup_normalized_text(&self, normalized: &str) -> Result<DnLookup, LdapError> {
        let rdns = lmdir_schema::split_rdns(normalized);
        if rdns.len() > lmdir_schema::DN_RDN_COUNT_MAX {
            return Ok(DnLookup {
                found: None,
                deepest: None,
            });
        }
        lookup_rdns(self.inner, &self.txn, &rdns)
    }

    pub(crate) fn no_such_object(
        &self,
        dn: &NormalizedDn,
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
    pub(crate) fn existing(&self, dn: &NormalizedDn) -> Result<EntryId, LdapError> {
        let lookup = self.lookup(dn)?;
        match lookup.found {
            Some(id) => Ok(id),
            None => Err(self.no_such_object(dn, &lookup)?),
        }
    }

    /// The DN of an entry as this transaction sees it.
    pub fn dn_of(&self, id: EntryId) -> Result<String, LdapError> {
        crate::read::dn_of(self.inner, &self.txn, id, false)
    }

    /// The normalized DN of an entry as this transaction sees it.
    pub fn normalized_dn_of(&self, id: EntryId) -> Result<String, LdapError> {
        crate::read::dn_of(self.inner, &self.txn, id, true)
    }

    /// The ID of a DN as this transaction sees it (noSuchObject with matched DN on a miss).
    pub fn dn_to_id<T: TargetDn + ?Sized>(&self, dn: &T) -> Result<EntryId, LdapError> {
        self.existing(&*self.target(dn)?)
    }

    /// Parses and normalizes a DN once with this txn's schema.
    pub fn normalized_dn(&self, dn: &str) -> Result<NormalizedDn, LdapError> {
        self.inner.schema().parse_normalized_dn(dn)
    }
}
