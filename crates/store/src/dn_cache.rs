//! The DN tree as recent read txns found it, kept per thread across read txns: the IDs of
//! the DNs looked up (search bases, bind DNs and their parents) and the DNs of the entries
//! above returned ones.
//!
//! A search resolves its base (a `dn2id` read per RDN below the suffix) and builds each
//! returned entry's DN from its parents' nodes (an `id2node` read per level). Bases and
//! parents are few and rarely change, so a server answering one search per read txn re-read
//! the same rows for every search: a third of the tree reads of a uid search.
//!
//! **Validity.** Every write txn that removes or renames a DN (delete, modrdn, a bulk
//! writer) raises `Inner::tree_changed_at` to its own LMDB txn ID *before* it commits. A read
//! txn loads that value after its snapshot began (`TreeView`). A row observed in snapshot
//! `seen` holds in snapshot `now` when `seen <= now` and no DN changed after `seen`:
//! `tree_changed_at <= seen`. Any change a snapshot holds raised the value before its commit,
//! hence before the snapshot began, so the snapshot's load sees it. Adds change no existing
//! DN; an entry added after `seen` is never asked for by an older snapshot (`seen <= now`).
//!
//! **Bounds.** Direct-mapped slots (a slot holds one ID or one DN, replaced on collision), DNs
//! of at most `CACHED_DN_BYTES_MAX` bytes: a few hundred KiB per thread at most. A thread's
//! cache belongs to one store at a time (`Inner::cache_id`); another store's use empties it.

use std::cell::RefCell;

use crate::layout::EntryId;

/// Slots for entry DNs (parents of returned entries).
const DN_SLOTS: usize = 256;
/// Slots for resolved bases (normalized DN → ID).
const BASE_SLOTS: usize = 256;
/// Longest DN kept (each form): longer ones are rebuilt from the tree each time.
pub(crate) const CACHED_DN_BYTES_MAX: usize = 512;

/// What a read txn needs to use the cache: its store's cache, its snapshot, and the last DN
/// change it can know of.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TreeView {
    /// `Inner::cache_id`; 0 disables the cache (a read-only store: another process writes).
    pub cache_id: u64,
    /// The snapshot's LMDB txn ID.
    pub snapshot: u64,
    /// `Inner::tree_changed_at`, loaded after the snapshot began.
    pub tree_changed_at: u64,
}

impl TreeView {
    fn holds(&self, seen: u64) -> bool {
        self.cache_id != 0 && seen <= self.snapshot && self.tree_changed_at <= seen
    }
}

/// An entry's DN in both forms and its parent, as snapshot `seen` had them.
pub(crate) struct CachedDn {
    pub id: EntryId,
    pub parent: EntryId,
    pub original: String,
    pub normalized: String,
    seen: u64,
}

impl CachedDn {
    pub fn form(&self, normalized: bool) -> &str {
        if normalized {
            &self.normalized
        } else {
            &self.original
        }
    }
}

struct CachedBase {
    normalized: String,
    id: EntryId,
    seen: u64,
}

struct Cache {
    cache_id: u64,
    dns: Vec<Option<CachedDn>>,
    bases: Vec<Option<CachedBase>>,
}

impl Cache {
    /// This thread's cache, emptied first if another store used it last.
    fn for_store(&mut self, cache_id: u64) -> &mut Cache {
        if self.cache_id != cache_id {
            self.cache_id = cache_id;
            self.dns.iter_mut().for_each(|slot| *slot = None);
            self.bases.iter_mut().for_each(|slot| *slot = None);
        }
        self
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache {
        cache_id: 0,
        dns: (0..DN_SLOTS).map(|_| None).collect(),
        bases: (0..BASE_SLOTS).map(|_| None).collect(),
    });
}

fn dn_slot(id: EntryId) -> usize {
    id as usize % DN_SLOTS
}

fn base_slot(normalized: &str) -> usize {
    // The store's hash of bytes (index keys use it); the slot only picks what to replace.
    u64::from_be_bytes(crate::layout::hash_bytes(normalized.as_bytes())) as usize % BASE_SLOTS
}

/// Calls `use_dn` with the cached DN of `id` when `view`'s snapshot holds it.
pub(crate) fn with_dn<T>(
    view: &TreeView,
    id: EntryId,
    use_dn: impl FnOnce(&CachedDn) -> T,
) -> Option<T> {
    if view.cache_id == 0 {
        return None;
    }
    CACHE.with_borrow_mut(|cache| {
        let cache = cache.for_store(view.cache_id);
        match &cache.dns[dn_slot(id)] {
            Some(cached) if cached.id == id && view.holds(cached.seen) => Some(use_dn(cached)),
            _ => None,
        }
    })
}

/// Keeps the DN of `id` as `view`'s snapshot has it.
pub(crate) fn keep_dn(
    view: &TreeView,
    id: EntryId,
    parent: EntryId,
    original: &str,
    normalized: &str,
) {
    let too_long = original.len().max(normalized.len()) > CACHED_DN_BYTES_MAX;
    if view.cache_id == 0 || too_long || view.tree_changed_at > view.snapshot {
        return;
    }
    CACHE.with_borrow_mut(|cache| {
        let cache = cache.for_store(view.cache_id);
        cache.dns[dn_slot(id)] = Some(CachedDn {
            id,
            parent,
            original: original.to_string(),
            normalized: normalized.to_string(),
            seen: view.snapshot,
        });
    });
}

/// The ID of the entry named `normalized` when the cache holds it for `view`'s snapshot.
pub(crate) fn base_id(view: &TreeView, normalized: &str) -> Option<EntryId> {
    if view.cache_id == 0 {
        return None;
    }
    CACHE.with_borrow_mut(|cache| {
        let cache = cache.for_store(view.cache_id);
        match &cache.bases[base_slot(normalized)] {
            Some(cached) if cached.normalized == normalized && view.holds(cached.seen) => {
                Some(cached.id)
            }
            _ => None,
        }
    })
}

/// Keeps `normalized` → `id` as `view`'s snapshot has it.
pub(crate) fn keep_base(view: &TreeView, normalized: &str, id: EntryId) {
    if view.cache_id == 0
        || normalized.len() > CACHED_DN_BYTES_MAX
        || view.tree_changed_at > view.snapshot
    {
        return;
    }
    CACHE.with_borrow_mut(|cache| {
        let cache = cache.for_store(view.cache_id);
        cache.bases[base_slot(normalized)] = Some(CachedBase {
            normalized: normalized.to_string(),
            id,
            seen: view.snapshot,
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(snapshot: u64, tree_changed_at: u64) -> TreeView {
        TreeView {
            cache_id: 7,
            snapshot,
            tree_changed_at,
        }
    }

    #[test]
    fn a_row_holds_from_its_snapshot_until_the_tree_changes() {
        keep_base(&view(10, 3), "ou=a", 5);
        assert_eq!(base_id(&view(10, 3), "ou=a"), Some(5));
        assert_eq!(base_id(&view(12, 3), "ou=a"), Some(5), "a later snapshot");
        assert_eq!(base_id(&view(9, 3), "ou=a"), None, "an earlier snapshot");
        assert_eq!(base_id(&view(12, 11), "ou=a"), None, "a DN changed since");
        assert_eq!(base_id(&view(12, 3), "ou=b"), None);
        keep_dn(&view(10, 3), 42, 5, "cn=X,ou=a", "cn=x,ou=a");
        assert_eq!(
            with_dn(&view(11, 10), 42, |dn| (
                dn.parent,
                dn.form(false).to_string()
            )),
            Some((5, "cn=X,ou=a".to_string()))
        );
        assert_eq!(with_dn(&view(11, 11), 42, |dn| dn.parent), None);
    }

    #[test]
    fn another_store_empties_the_thread_cache_and_read_only_stores_skip_it() {
        keep_base(&view(10, 3), "ou=a", 5);
        let other = TreeView {
            cache_id: 8,
            ..view(10, 3)
        };
        assert_eq!(base_id(&other, "ou=a"), None);
        assert_eq!(
            base_id(&view(10, 3), "ou=a"),
            None,
            "emptied by the other store"
        );
        let read_only = TreeView {
            cache_id: 0,
            ..view(10, 3)
        };
        keep_base(&read_only, "ou=a", 5);
        assert_eq!(base_id(&read_only, "ou=a"), None);
    }

    #[test]
    fn a_snapshot_behind_a_pending_change_keeps_nothing() {
        keep_base(&view(10, 11), "ou=c", 6);
        assert_eq!(base_id(&view(12, 11), "ou=c"), None);
        keep_dn(&view(10, 11), 43, 5, "cn=Y", "cn=y");
        assert_eq!(with_dn(&view(12, 11), 43, |dn| dn.id), None);
    }
}
