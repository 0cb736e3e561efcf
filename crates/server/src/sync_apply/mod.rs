//! What a provider sent, applied by the writer inside its transaction, together with the cookie
//! that covers it: a crash leaves both as they were before, or both after. `merge`: per-attribute
//! resolution of an entry changed on two multi-provider nodes.

#[cfg(test)]
mod memberof_tests;
mod merge;

use crate::replication_status::ChangeCounts;
use lmdir_schema::{Dn, Entry, LdapError, NormalizedDn, ResultCode};
use lmdir_store::{EntryId, TargetDn, WriteContext, WriteTxn};
use lmdir_sync::{ContextCsns, Cookie, Csn};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

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
    /// Named gone by a delete phase (a syncIdSet with refreshDeletes): on a multi-provider node
    /// deleted only when the batch's cookie covers the local entryCSN, as for a present phase
    /// (`covered`), so a change the provider had not seen when it deleted brings the entry back
    /// whichever phase the provider's session log chose.
    DeleteListed(Vec<Uuid>),
    /// End of a present phase: every local entry under `base` whose entryUUID is not in
    /// `present` is gone from the provider (on a multi-provider node: only those whose
    /// entryCSN the provider's cookie covers, see `covered`).
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
    /// The consumer's search base: the only subtree its changes touch. An entryUUID naming a
    /// local entry elsewhere (another consumer's, local data) is not the provider's to delete,
    /// move or overwrite.
    pub base: String,
    pub changes: Vec<SyncChange>,
    pub cookie: CookieUpdate,
    /// This server's own server ID (0: none): a provider's cookie never moves its contextCSN.
    pub server_id: u16,
    /// This server takes client writes too (multi-provider): an incoming entry loses to a
    /// local one with a later or equal entryCSN, and a present phase deletes only what the
    /// provider's cookie covers, as slapd's consumer does. A read-only replica applies what
    /// its one provider says (its only CSNs of its own are memberOf upkeep stamps, which
    /// must not shadow the provider's changes).
    pub resolve_conflicts: bool,
    /// What the batch did, set by each application of it (the writer may apply a batch again
    /// in a new transaction when a neighbour failed, so it is set, never added to); the
    /// consumer reads it once the commit is confirmed.
    pub applied: Arc<Mutex<ChangeCounts>>,
}

impl SyncBatch {
    /// The CSNs this batch covers once committed: its entries' entryCSN and its cookie's.
    pub(crate) fn csns(&self) -> ContextCsns {
        let mut csns = ContextCsns::new();
        for change in &self.changes {
            if let SyncChange::Put { entry, .. } = change {
                if let Some(csn) = sent_csn(entry) {
                    csns.merge(csn);
                }
            }
        }
        if let CookieUpdate::Set(cookie) = &self.cookie {
            if let Ok(cookie) = Cookie::parse(cookie) {
                csns.merge_all(cookie.csns());
            }
        }
        csns
    }
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
pub(crate) fn apply(txn: &mut WriteTxn<'_>, batch: &SyncBatch) -> Result<ChangeCounts, LdapError> {
    txn.set_applying_replicated(true);
    let result = apply_changes(txn, batch);
    // The transaction goes on with other jobs of the group commit: client writes again.
    txn.set_applying_replicated(false);
    let counts = result?;
    *batch
        .applied
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = counts;
    Ok(counts)
}

fn apply_changes(txn: &mut WriteTxn<'_>, batch: &SyncBatch) -> Result<ChangeCounts, LdapError> {
    // The provider's values as sent: its operational attributes kept (relax, replicated) and no
    // schema check (OpenLDAP's consumer default, `schemachecking=off`): the provider checked.
    let context = WriteContext {
        relax: true,
        replicated: true,
        skip_schema_check: true,
        ..WriteContext::new(String::new())
    };
    let cookie_csns = match &batch.cookie {
        CookieUpdate::Set(cookie) => Cookie::parse(cookie).ok().map(|c| c.csns().clone()),
        _ => None,
    };
    let base = txn.schema().normalized_dn(Dn::parse(&batch.base)?)?;
    let replicated = Replicated {
        rid: batch.rid,
        base: base.as_str(),
    };
    let mut applied = ChangeCounts::default();
    for change in &batch.changes {
        match change {
            SyncChange::Put { uuid, entry } => {
                let target = Target {
                    area: &replicated,
                    uuid,
                    entry,
                    resolve_conflicts: batch.resolve_conflicts,
                };
                match put(txn, &target, &context, &mut applied.conflicts)? {
                    Some(Put::Added) => applied.adds += 1,
                    Some(Put::Modified) => applied.modifies += 1,
                    Some(Put::Renamed) => applied.renames += 1,
                    None => applied.kept += 1,
                }
            }
            SyncChange::Delete(uuid) => {
                // As slapd's consumer: an explicit delete carries no CSN of its own and is
                // applied whatever the local entry's entryCSN (syncrepl_entry's delete case).
                if let Some(id) = replicated.entry_by_uuid(txn, uuid)? {
                    let dn = txn.dn_of(id)?;
                    applied.deletes += delete_below(txn, dn.as_str(), |_, _| true)?;
                }
            }
            SyncChange::DeleteListed(uuids) => {
                // Written with the cookie that ended the phase (the consumer holds them until
                // one arrives), so `covering` is what the provider had seen.
                let covering = cookie_csns.as_ref().filter(|_| batch.resolve_conflicts);
                for uuid in uuids {
                    if let Some(id) = replicated.entry_by_uuid(txn, uuid)? {
                        let dn = txn.dn_of(id)?;
                        applied.deletes +=
                            delete_below(txn, dn.as_str(), |_, csn| covered(covering, csn))?;
                    }
                }
            }
            SyncChange::DeleteUnmentioned { base, present } => {
                let covering = batch
                    .resolve_conflicts
                    .then(|| cookie_csns.clone().unwrap_or_default());
                let deleted = delete_below(txn, base, |uuid, csn| {
                    let mentioned = uuid
                        .and_then(uuid_bytes)
                        .is_some_and(|uuid| present.contains(&uuid));
                    !mentioned && covered(covering.as_ref(), csn)
                })?;
                applied.deletes += deleted;
            }
        }
    }
    match &batch.cookie {
        CookieUpdate::Keep => {}
        CookieUpdate::Set(cookie) => {
            let kept = merged_cookie(txn.sync_cookie(batch.rid)?.as_deref(), cookie);
            txn.set_sync_cookie(batch.rid, Some(&kept))?;
            advance_from_cookie(txn, cookie_csns.as_ref(), batch.server_id)?;
        }
        CookieUpdate::Forget => txn.set_sync_cookie(batch.rid, None)?,
    }
    Ok(applied)
}

/// The cookie to keep once `received` is applied: its CSNs merged, per server ID, with those
/// of the cookie kept before (as slapd's consumer merges them). A provider's persist phase
/// names only the CSN of the change it sends; kept alone, the other server IDs' CSNs were
/// lost, and the next session's cookie no longer covered them: the provider sent them all
/// again, or asked for a full reload. A cookie that does not parse is kept as received.
fn merged_cookie(stored: Option<&[u8]>, received: &[u8]) -> Vec<u8> {
    let (Ok(new), Some(Ok(old))) = (Cookie::parse(received), stored.map(Cookie::parse)) else {
        return received.to_vec();
    };
    let mut csns = new.csns().clone();
    csns.merge_all(old.csns());
    match Cookie::new(new.rid(), new.sid(), csns, new.delcsn()) {
        Ok(merged) => merged.to_bytes(),
        Err(_) => received.to_vec(),
    }
}

/// Whether a present phase's cookie covers a local entry the provider did not mention, so
/// that its absence there means it was deleted (slapd's nonpresent_callback): its entryCSN is
/// at or below the cookie's CSN for the same server ID. An entry the provider has not seen yet
/// (written here, or pulled from a third node, after the provider's contextCSN for that server
/// ID) stays. An entry without a CSN is covered. Without `covering` (a read-only replica)
/// everything unmentioned is gone.
fn covered(covering: Option<&ContextCsns>, csn: Option<Csn>) -> bool {
    match (covering, csn) {
        (None, _) | (_, None) => true,
        (Some(covering), Some(csn)) => covering.get(csn.sid()).is_some_and(|seen| csn <= seen),
    }
}

/// The contextCSN follows the provider's cookie once everything it covers is applied (in this
/// same transaction): this node's own provider then answers with a cookie covering the changes
/// pulled, and never re-stamps them. This server's own server ID is left alone: only its own
/// writes move it, and a provider's older view of it must not make the CSN generator and the
/// stored contextCSN disagree.
fn advance_from_cookie(
    txn: &mut WriteTxn<'_>,
    csns: Option<&ContextCsns>,
    server_id: u16,
) -> Result<(), LdapError> {
    for csn in csns.into_iter().flat_map(ContextCsns::iter) {
        if server_id == 0 || csn.sid() != server_id {
            txn.advance_context_csn(csn)?;
        }
    }
    Ok(())
}

/// The entryCSN a provider sent with an entry.
fn sent_csn(entry: &Entry) -> Option<Csn> {
    entry
        .attributes
        .iter()
        .filter(|attribute| attribute.description.eq_ignore_ascii_case("entryCSN"))
        .flat_map(|attribute| &attribute.values)
        .find_map(|value| Csn::parse(value).ok())
}

/// Whether the local entry `id` is at least as new as `incoming` (the later change wins, per
/// entry, as slapd's dn_callback: an equal CSN is the same change arriving again).
fn local_wins(txn: &WriteTxn<'_>, id: EntryId, incoming: Option<Csn>) -> Result<bool, LdapError> {
    let held = txn.entry_csn_of(id)?;
    Ok(matches!((incoming, held), (Some(incoming), Some(held)) if incoming <= held))
}

/// Whether this node already held the version of `entry` a provider sends, though it holds
/// no such entry now: its entryCSN is at or below this node's contextCSN for the same server
/// ID, which only moves once every change up to it is here. The entry was deleted here since;
/// a provider that has not seen the delete yet (a first full refresh, a stale peer) must not
/// bring it back. A change this node has not seen (a modify made elsewhere after the delete)
/// is newer and is added.
fn seen_before(txn: &WriteTxn<'_>, entry: &Entry) -> Result<bool, LdapError> {
    let Some(incoming) = sent_csn(entry) else {
        return Ok(false);
    };
    Ok(txn
        .stored_context_csn(incoming.sid())?
        .is_some_and(|held| incoming <= held))
}

/// What `put` did to the local entry.
enum Put {
    Added,
    Modified,
    Renamed,
}

/// The subtree one consumer replicates.
struct Replicated<'a> {
    rid: u16,
    /// Its search base, normalized.
    base: &'a str,
}

impl Replicated<'_> {
    /// The local entry holding entryUUID `uuid`, anywhere, and whether it lies in this
    /// consumer's subtree (its normalized DN).
    fn holder(&self, txn: &WriteTxn<'_>, uuid: &Uuid) -> Result<Option<Holder>, LdapError> {
        let Some(id) = txn.entry_id_by_uuid(&uuid_text(uuid))? else {
            return Ok(None);
        };
        let dn = txn.normalized_dn_of(id)?;
        let within = lmdir_schema::normalized_dn_is_within(&dn, self.base);
        Ok(Some(Holder { id, dn, within }))
    }

    /// The local entry holding entryUUID `uuid`, when it lies in this consumer's subtree
    /// (as slapd's consumer looks an entryUUID up below its searchbase): a delete naming one
    /// elsewhere deletes nothing.
    fn entry_by_uuid(&self, txn: &WriteTxn<'_>, uuid: &Uuid) -> Result<Option<EntryId>, LdapError> {
        let holder = self.holder(txn, uuid)?;
        Ok(holder
            .filter(|holder| holder.within)
            .map(|holder| holder.id))
    }

    /// The local entry holding `uuid` for an entry the provider sent (None: none holds it);
    /// refused when one outside the subtree holds it: it is not the provider's to move in and
    /// overwrite, and a second entry with the same entryUUID would break the lookup by UUID.
    fn entry_to_update(
        &self,
        txn: &WriteTxn<'_>,
        uuid: &Uuid,
    ) -> Result<Option<EntryId>, LdapError> {
        let Some(holder) = self.holder(txn, uuid)? else {
            return Ok(None);
        };
        if !holder.within {
            return Err(LdapError::new(
                ResultCode::ConstraintViolation,
                format!(
                    "replication rid={:03}: entryUUID {} is held by '{}', outside the \
                     replicated subtree '{}'",
                    self.rid,
                    uuid_text(uuid),
                    holder.dn,
                    self.base
                ),
            ));
        }
        Ok(Some(holder.id))
    }
}

/// The local entry holding an entryUUID: its ID, normalized DN, and whether that lies in the
/// consumer's subtree.
struct Holder {
    id: EntryId,
    dn: String,
    within: bool,
}

/// One entry a provider sent, and how to settle it with the local one.
struct Target<'a> {
    area: &'a Replicated<'a>,
    uuid: &'a Uuid,
    entry: &'a Entry,
    resolve_conflicts: bool,
}

/// A multi-provider node's entry that carries per-attribute state, found here by entryUUID
/// under the same DN: merged per attribute (`merge`) instead of whole by entryCSN. Each
/// same-attribute conflict is counted into `conflicts` and logged with both CSNs. None when
/// the merge changes nothing here.
fn merge_into(
    txn: &mut WriteTxn<'_>,
    id: EntryId,
    target: &Target<'_>,
    context: &WriteContext,
    conflicts: &mut u64,
) -> Result<Option<Put>, LdapError> {
    let schema = txn.schema().clone();
    // memberOf kept up here is this node's fact (the replace below sets it from the groups
    // here): left out of the merge and of the comparisons, or a provider's different memberOf
    // would look like a change of this node's, get a CSN, and be sent back and forth.
    let mut local = txn.owned_entry(id)?;
    let mut incoming = std::borrow::Cow::Borrowed(target.entry);
    if txn.keeps_memberof() {
        local = merge::without_memberof(&schema, &local).into_owned();
        incoming = merge::without_memberof(&schema, target.entry);
    }
    let merged = merge::merge(&schema, &local, &incoming);
    for conflict in &merged.conflicts {
        tracing::warn!(
            "replication rid={:03}: conflict on '{}' attribute {}: kept the change {}, \
             discarded the concurrent change {}",
            target.area.rid,
            target.entry.dn,
            conflict.description,
            conflict.kept,
            conflict.discarded
        );
    }
    *conflicts += merged.conflicts.len() as u64;
    let mut entry = merged.entry;
    if merge::same_content(&schema, &local, &entry) {
        return Ok(None);
    }
    if !merge::same_data(&schema, &entry, &incoming) {
        let csn = txn.next_csn(std::time::SystemTime::now())?;
        merge::set_entry_csn(&mut entry, csn);
    }
    txn.replace_entry(id, &entry, context)
        .map(|_| Some(Put::Modified))
}

/// An added or modified entry: found by entryUUID (renamed when the provider's DN differs),
/// else by DN (it takes the provider's entryUUID), else added. With `resolve_conflicts` a
/// local entry with a later or equal entryCSN wins and nothing is written (None); that also
/// settles two nodes adding the same DN with different entryUUIDs: each keeps or takes the
/// one with the later CSN, so all pick the same winner.
fn put(
    txn: &mut WriteTxn<'_>,
    target: &Target<'_>,
    context: &WriteContext,
    conflicts: &mut u64,
) -> Result<Option<Put>, LdapError> {
    let (entry, resolve_conflicts) = (target.entry, target.resolve_conflicts);
    let by_uuid = target.area.entry_to_update(txn, target.uuid)?;
    // The entry's DN, normalized once for every use below.
    let dn = txn.schema().normalized_dn(entry.dn.clone())?;
    let by_dn = txn.entry_by_dn(&dn)?.map(|stored| stored.id);
    if let (Some(id), Some(holder), true) = (by_uuid, by_dn, resolve_conflicts) {
        if id == holder && merge::has_state(entry) {
            return merge_into(txn, id, target, context, conflicts);
        }
    }
    if resolve_conflicts {
        let incoming = sent_csn(entry);
        for local in [by_uuid, by_dn].into_iter().flatten() {
            if local_wins(txn, local, incoming)? {
                return Ok(None);
            }
        }
    }
    let (id, done) = match (by_uuid, by_dn) {
        (None, None) if resolve_conflicts && seen_before(txn, entry)? => return Ok(None),
        (None, None) => {
            return txn
                .add_normalized(entry, &dn, context)
                .map(|_| Some(Put::Added))
        }
        (Some(id), Some(holder)) if id == holder => (id, Put::Modified),
        (None, Some(holder)) => (holder, Put::Modified),
        (Some(id), holder) => {
            if holder.is_some() {
                // Another local entry holds the name the provider gave this one: the
                // provider's view wins (the other one is gone or renamed there).
                delete_below(txn, &dn, |_, _| true)?;
            }
            rename(txn, id, &dn, context)?;
            (id, Put::Renamed)
        }
    };
    txn.replace_entry(id, entry, context).map(|_| Some(done))
}

fn rename(
    txn: &mut WriteTxn<'_>,
    id: EntryId,
    new_dn: &NormalizedDn,
    context: &WriteContext,
) -> Result<(), LdapError> {
    let (Some(new_rdn), Some(new_superior)) = (new_dn.dn().rdns.first(), new_dn.parent()) else {
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
        Some(&new_superior),
        context,
    )
    .map(drop)
}

/// Deletes the entries of the subtree at `base` that `doomed` picks (given each one's
/// normalized entryUUID and entryCSN), deepest first so that every delete is of a leaf; an
/// entry that still has children (some were kept) is kept too. Returns how many it deleted.
fn delete_below(
    txn: &mut WriteTxn<'_>,
    base: &(impl TargetDn + ?Sized),
    doomed: impl Fn(Option<&[u8]>, Option<Csn>) -> bool,
) -> Result<u64, LdapError> {
    let mut members = txn.subtree_members(base)?;
    members.sort_by_key(|(_, depth, _)| std::cmp::Reverse(*depth));
    let mut deleted = 0;
    for (id, _, uuid) in members {
        if doomed(uuid.as_deref(), txn.entry_csn_of(id)?) && txn.num_subordinates(id)? == 0 {
            let dn = txn.dn_of(id)?;
            txn.delete_replicated(&dn)?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_phase_deletes_only_what_the_cookie_covers() {
        let csn = |text: &str| Csn::parse(text.as_bytes()).unwrap();
        let mut covering = ContextCsns::new();
        covering.merge(csn("20260101000000.000000Z#000000#001#000000"));
        let older = csn("20251231000000.000000Z#000000#001#000000");
        let newer = csn("20260102000000.000000Z#000000#001#000000");
        let other_sid = csn("20200101000000.000000Z#000000#002#000000");
        assert!(covered(Some(&covering), Some(older)));
        assert!(covered(
            Some(&covering),
            Some(csn("20260101000000.000000Z#000000#001#000000"))
        ));
        assert!(!covered(Some(&covering), Some(newer)), "not seen there yet");
        assert!(
            !covered(Some(&covering), Some(other_sid)),
            "sid unknown there"
        );
        assert!(covered(Some(&covering), None), "no CSN: as slapd, covered");
        assert!(covered(None, Some(newer)), "a read-only replica deletes");
    }

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

    const SUFFIX: &str = "dc=example,dc=com";
    const BASE: &str = "ou=people,dc=example,dc=com";

    pub(super) fn entry(dn: &str, attributes: &[(&str, &str)]) -> Entry {
        let mut entry = Entry::new(Dn::parse(dn).unwrap());
        for (description, value) in attributes {
            entry.add_values(description, [value.as_bytes().to_vec()]);
        }
        entry
    }

    /// A store of the built-in schema at `directory` with `options`, holding `entries`,
    /// added in order by the rootdn.
    pub(super) fn store_holding(
        directory: &std::path::Path,
        options: lmdir_store::StoreOptions,
        entries: &[Entry],
    ) -> lmdir_store::Store {
        let schema = Arc::new(lmdir_schema::Schema::builtin());
        let store = lmdir_store::Store::open(directory, options, schema).unwrap();
        let context = WriteContext::new("cn=admin,dc=example,dc=com");
        let mut txn = store.write().unwrap();
        for added in entries {
            txn.add(added, &context).unwrap();
        }
        txn.commit().unwrap();
        store
    }

    /// A store holding the suffix, the replicated `ou=people` and `cn=local` beside it (local
    /// data, or another consumer's); the entryUUID of `cn=local`.
    fn store_with_local_entry(directory: &std::path::Path) -> (lmdir_store::Store, Uuid) {
        let options = lmdir_store::StoreOptions {
            suffix: SUFFIX.to_string(),
            sync: false,
            indexes: [(
                "entryUUID".to_string(),
                vec![lmdir_store::IndexKind::Equality],
            )]
            .into(),
            ..lmdir_store::StoreOptions::default()
        };
        let store = store_holding(
            directory,
            options,
            &[
                entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")]),
                entry(
                    BASE,
                    &[("objectClass", "organizationalUnit"), ("ou", "people")],
                ),
                entry(
                    "cn=local,dc=example,dc=com",
                    &[("objectClass", "device"), ("cn", "local")],
                ),
            ],
        );
        let txn = store.write().unwrap();
        let members = txn.subtree_members("cn=local,dc=example,dc=com").unwrap();
        let uuid = members[0].2.clone().expect("an entryUUID");
        drop(txn);
        (store, uuid_bytes(&uuid).unwrap())
    }

    fn batch(changes: Vec<SyncChange>) -> SyncBatch {
        SyncBatch {
            rid: 1,
            base: BASE.to_string(),
            changes,
            cookie: CookieUpdate::Keep,
            server_id: 0,
            resolve_conflicts: false,
            applied: Arc::default(),
        }
    }

    fn exists(store: &lmdir_store::Store, dn: &str) -> bool {
        store.read().unwrap().dn_to_id(dn).is_ok()
    }

    #[test]
    fn a_provider_touches_nothing_outside_the_replicated_subtree() {
        let directory = tempfile::tempdir().unwrap();
        let (store, local) = store_with_local_entry(directory.path());
        let local_dn = "cn=local,dc=example,dc=com";
        // A delete, and a delete phase, naming the entryUUID of an entry outside the base
        // delete nothing (before: the entry and everything below it were gone).
        for change in [
            SyncChange::Delete(local),
            SyncChange::DeleteListed(vec![local]),
        ] {
            let mut txn = store.write().unwrap();
            let counts = apply(&mut txn, &batch(vec![change])).unwrap();
            txn.commit().unwrap();
            assert_eq!(counts.deletes, 0);
            assert!(exists(&store, local_dn));
        }
        // An entry sent with that entryUUID is refused: moving the local entry into the base
        // and overwriting it is not the provider's to do.
        let moved = entry(
            "cn=local,ou=people,dc=example,dc=com",
            &[("objectClass", "device"), ("cn", "local")],
        );
        let mut txn = store.write().unwrap();
        let put = SyncChange::Put {
            uuid: local,
            entry: moved,
        };
        let refused = apply(&mut txn, &batch(vec![put])).unwrap_err();
        drop(txn);
        assert!(
            refused.message.contains("outside the replicated subtree"),
            "{refused:?}"
        );
        assert!(exists(&store, local_dn));
        assert!(!exists(&store, "cn=local,ou=people,dc=example,dc=com"));
    }

    #[test]
    fn a_cookie_naming_one_server_id_keeps_the_others() {
        let directory = tempfile::tempdir().unwrap();
        let (store, _) = store_with_local_entry(directory.path());
        let both = b"rid=001,csn=20260101000000.000000Z#000000#001#000000;\
                     20260101000000.000000Z#000000#002#000000";
        let later_one = b"rid=001,csn=20260102000000.000000Z#000000#001#000000";
        for cookie in [&both[..], &later_one[..]] {
            let mut txn = store.write().unwrap();
            let mut update = batch(Vec::new());
            update.cookie = CookieUpdate::Set(cookie.to_vec());
            apply(&mut txn, &update).unwrap();
            txn.commit().unwrap();
        }
        let kept = store.read().unwrap().sync_cookie(1).unwrap().unwrap();
        let kept = Cookie::parse(&kept).unwrap();
        let csn = |text: &str| Csn::parse(text.as_bytes()).unwrap();
        assert_eq!(
            kept.csns().get(1),
            Some(csn("20260102000000.000000Z#000000#001#000000"))
        );
        assert_eq!(
            kept.csns().get(2),
            Some(csn("20260101000000.000000Z#000000#002#000000")),
            "server ID 2's CSN was lost"
        );
        assert_eq!(kept.rid(), Some(1));
    }
}
