//! How much of the LMDB environment is in use: the numbers `cn=Monitor` (OpenLDAP's
//! `olmMDB*` attributes) and the Prometheus metrics report, read without a write txn.

use crate::error::StoreError;
use crate::store::Store;

/// LMDB's two meta pages, counted in `pages_used` but in no DB.
const META_PAGES: u64 = 2;

/// One reading of the environment (each figure from LMDB itself, at one read txn).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnvironmentUsage {
    /// The map's size: the most the data file may grow to before the map is grown.
    pub map_size_bytes: u64,
    pub page_size_bytes: u64,
    /// Pages up to the last one written (`me_last_pgno + 1`): the data file's extent.
    pub pages_used: u64,
    /// Pages of `pages_used` that hold no DB's data: LMDB's free list (reused by later
    /// writes) and the free list's own pages.
    pub pages_free: u64,
    pub readers_max: u64,
    /// Reader slots in use, by this process and any other on the same environment.
    pub readers_used: u64,
    pub entries: u64,
}

impl EnvironmentUsage {
    /// Pages the map can hold (`olmMDBPagesMax`).
    pub fn pages_max(&self) -> u64 {
        self.map_size_bytes / self.page_size_bytes.max(1)
    }
}

impl Store {
    /// The directory holding the LMDB environment.
    pub fn directory(&self) -> &std::path::Path {
        self.inner.env.path()
    }

    /// Reads the environment's usage: LMDB's env info and every DB's page counts.
    pub fn environment_usage(&self) -> Result<EnvironmentUsage, StoreError> {
        let inner = &self.inner;
        let read = self.read()?;
        let info = inner.env.info();
        let main = inner.env.unnamed_database_stat();
        let databases = &inner.databases;
        let mut pages_in_databases = database_pages(&main);
        for database in [
            databases.meta,
            databases.id2entry,
            databases.id2node,
            databases.dn2id,
        ]
        .into_iter()
        .chain(inner.index_set().databases.values().copied())
        {
            pages_in_databases += database_pages(&database.stat(read.txn())?);
        }
        let pages_used = info.last_page_number as u64 + 1;
        Ok(EnvironmentUsage {
            map_size_bytes: info.map_size as u64,
            page_size_bytes: u64::from(main.page_size),
            pages_used,
            pages_free: pages_used.saturating_sub(pages_in_databases + META_PAGES),
            readers_max: u64::from(info.maximum_number_of_readers),
            readers_used: u64::from(info.number_of_readers),
            entries: read.entry_count()?,
        })
    }
}

fn database_pages(stat: &heed::DatabaseStat) -> u64 {
    (stat.branch_pages + stat.leaf_pages + stat.overflow_pages) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use lmdir_schema::{Dn, Entry, Schema};
    use std::sync::Arc;

    #[test]
    fn usage_counts_entries_readers_and_pages() {
        let directory = tempfile::tempdir().unwrap();
        let options = crate::StoreOptions {
            suffix: "dc=example,dc=com".to_string(),
            sync: false,
            ..crate::StoreOptions::default()
        };
        let store = Store::open(directory.path(), options, Arc::new(Schema::builtin())).unwrap();
        let empty = store.environment_usage().unwrap();
        assert_eq!(empty.entries, 0);
        assert!(empty.pages_max() > empty.pages_used);

        let mut txn = store.write().unwrap();
        let mut entry = Entry::new(Dn::parse("dc=example,dc=com").unwrap());
        entry.add_values("objectClass", [b"domain".to_vec()]);
        entry.add_values("dc", [b"example".to_vec()]);
        txn.add(&entry, &crate::WriteContext::new("cn=admin"))
            .unwrap();
        txn.commit().unwrap();

        let held = store.read().unwrap();
        let usage = store.environment_usage().unwrap();
        assert_eq!(usage.entries, 1);
        // `held` and the reading's own txn.
        assert!(usage.readers_used >= 2, "{usage:?}");
        assert!(usage.pages_used >= empty.pages_used);
        assert!(usage.pages_free < usage.pages_used);
        drop(held);
    }
}
