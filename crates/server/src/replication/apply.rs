//! What a provider sent, applied by the writer inside its transaction, together with the cookie
//! that covers it: a crash leaves both as they were before, or both after.

use lmdir_schema::{Dn, Entry, LdapError, ResultCode};
use lmdir_store::{EntryId, WriteContext, WriteTxn};
use std::collections::HashSet;

/// An entryUUID as the Sync State control carries it.
pub(crate) type Uuid = [u8; 16];

/// One change from the provider.
#[derive(Debug)]
pub(crate) enum SyncChange {
    /// Added or modified: the entry as the provider sent it (its entryUUID, entryCSN,
    /// timestamps and names included), found locally by `uuid` (renamed if its DN changed).
    Put { uuid: Uuid, entry: Entry },
    /// Deleted on the provider (with everything below it locally: the provider could not have
    /// deleted a parent before its children).
    Delete(Uuid),
    /// End of a present phase: every local entry under `base` whose entryUUID is not in
    /// `present` is gone from the provider.
    DeleteUnmentioned { base: Dn, present: HashSet<Uuid> },
}

/// What happens to the consumer's stored cookie in the same transaction.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CookieUpdate {
    Keep,
    Set(Vec<u8>),
    /// e-syncRefreshRequired: the next session reloads everything.
    Forget,
}

/// Changes and the cookie that covers them, for one writer job.
#[derive(Debug)]
pub(crate) struct SyncBatch {
    pub rid: u16,
    pub changes: Vec<SyncChange>,
    pub cookie: CookieUpdate,
}

/// `8-4-4-4-12` lowercase hex, entryUUID's text form.
pub(crate) fn uuid_text(uuid: &Uuid) -> String {
    let hex: String = uuid.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The 16 bytes of an entryUUID text value (hyphens ignored); None if it is not one.
pub(crate) fn uuid_bytes(text: &[u8]) -> Option<Uuid> {
    lmdir_store::changes::uuid_bytes(text)
}

/// Applies a batch in the writer's transaction (the caller commits).
pub(crate) fn apply(txn: &mut WriteTxn<'_>, batch: &SyncBatch) -> Result<(), LdapError> {
    // The provider's values as sent: its operational attributes kept (relax, replicated) and no
    // schema check (OpenLDAP's consumer default, `schemachecking=off`): the provider checked.
    let context = WriteContext {
        relax: true,
        replicated: true,
        skip_schema_check: true,
        ..WriteContext::new(String::new())
    };
    for change in &batch.changes {
        match change {
            SyncChange::Put { uuid, entry } => put(txn, uuid, entry, &context)?,
            SyncChange::Delete(uuid) => {
                if let Some(id) = txn.entry_id_by_uuid(&uuid_text(uuid))? {
                    let dn = Dn::parse(&txn.dn_of(id)?)?;
                    delete_below(txn, &dn, |_| true)?;
                }
            }
            SyncChange::DeleteUnmentioned { base, present } => {
                delete_below(txn, base, |uuid| {
                    !uuid
                        .and_then(uuid_bytes)
                        .is_some_and(|uuid| present.contains(&uuid))
                })?;
            }
        }
    }
    match &batch.cookie {
        CookieUpdate::Keep => Ok(()),
        CookieUpdate::Set(cookie) => txn.set_sync_cookie(batch.rid, Some(cookie)),
        CookieUpdate::Forget => txn.set_sync_cookie(batch.rid, None),
    }
}

/// An added or modified entry: found by entryUUID (renamed when the provider's DN differs),
/// else by DN (it takes the provider's entryUUID), else added.
fn put(
    txn: &mut WriteTxn<'_>,
    uuid: &Uuid,
    entry: &Entry,
    context: &WriteContext,
) -> Result<(), LdapError> {
    let by_uuid = txn.entry_id_by_uuid(&uuid_text(uuid))?;
    let by_dn = txn.entry_by_dn(&entry.dn)?.map(|stored| stored.id);
    let id = match (by_uuid, by_dn) {
        (None, None) => return txn.add(entry, context).map(drop),
        (Some(id), Some(holder)) if id == holder => id,
        (None, Some(holder)) => holder,
        (Some(id), holder) => {
            if holder.is_some() {
                // Another local entry holds the name the provider gave this one: the
                // provider's view wins (the other one is gone or renamed there).
                delete_below(txn, &entry.dn, |_| true)?;
            }
            rename(txn, id, &entry.dn, context)?;
            id
        }
    };
    txn.replace_entry(id, entry, context).map(drop)
}

fn rename(
    txn: &mut WriteTxn<'_>,
    id: EntryId,
    new_dn: &Dn,
    context: &WriteContext,
) -> Result<(), LdapError> {
    let (Some(new_rdn), Some(new_superior)) = (new_dn.rdns.first(), new_dn.parent()) else {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            format!("cannot rename an entry to '{new_dn}'"),
        ));
    };
    let old_dn = txn.dn_of(id)?;
    // The old RDN value stays: the entry's replacement right after sets the values as sent.
    txn.modrdn(
        &old_dn,
        &new_rdn.to_string(),
        false,
        Some(&new_superior.to_string()),
        context,
    )
    .map(drop)
}

/// Deletes the entries of the subtree at `base` that `doomed` picks (given each one's
/// normalized entryUUID), deepest first so that every delete is of a leaf.
fn delete_below(
    txn: &mut WriteTxn<'_>,
    base: &Dn,
    doomed: impl Fn(Option<&[u8]>) -> bool,
) -> Result<(), LdapError> {
    let mut members = txn.subtree_members(base)?;
    members.sort_by_key(|(_, depth, _)| std::cmp::Reverse(*depth));
    for (id, _, uuid) in members {
        if doomed(uuid.as_deref()) {
            let dn = txn.dn_of(id)?;
            txn.delete_replicated(&dn)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_and_bytes_round_trip() {
        let uuid: Uuid = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        let text = uuid_text(&uuid);
        assert_eq!(text, "12345678-9abc-def0-0123-456789abcdef");
        assert_eq!(uuid_bytes(text.as_bytes()), Some(uuid));
        assert_eq!(uuid_bytes(text.to_uppercase().as_bytes()), Some(uuid));
        assert_eq!(uuid_bytes(b"12345678"), None);
        assert_eq!(uuid_bytes(b"zz345678-9abc-def0-0123-456789abcdef"), None);
    }
}
