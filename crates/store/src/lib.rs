//! lmdir-store: LMDB storage for lmdir (see ARCHITECTURE.md, "Store layout"): the on-disk
//! layout, the entry codec, the DN tree, exact posting-list indexes, search, single-entry
//! writes, and check / stat / export.

pub mod accesslog;
mod add;
mod admin;
pub mod attribute_state;
mod bulk;
mod change_recording;
pub mod changes;
pub mod codec;
pub mod context_csn;
mod csn_state;
mod delete;
mod dn2id;
mod dn_cache;
mod env;
mod error;
mod files;
mod in_chain;
mod index;
mod index_plan;
mod inversions;
pub mod layout;
mod live_index;
mod lock;
mod memberof;
mod memberof_replicated;
mod modify;
mod modrdn;
mod point_modify;
mod preparation_upgrade;
mod read;
mod reader_gate;
mod referrers;
mod replica;
mod rows;
mod search;
mod session_log;
mod store;
mod target_dn;
mod treeorder;
mod usage;
mod value_blocks;
mod working;
mod write;

pub use admin::{
    CheckReport, DatabaseDigest, DatabaseStat, IndexStat, Stat, CHECK_PROBLEMS_LISTED_MAX,
};
pub use bulk::{BulkWriter, BULK_COMMIT_EVERY_BYTES};
pub use changes::{
    Change, ChangeKind, CommittedChanges, PriorEntry, PriorNeeds, CHANGES_PER_TXN_MAX,
    PRIOR_ENTRY_BYTES_MAX,
};
pub use error::{RawDatabase, StoreError};
pub use files::{data_file_bytes, inspect_directory, replace_data_file, StoreDirectory};
pub use in_chain::{InChainBounds, InChainOutcome};
pub use index_plan::{IndexPlan, IndexedAttribute, KeySink};
pub use inversions::{inversion_key, META_INVERSIONS_TRACKED, META_INVERSION_PREFIX};
pub use layout::{EntryId, IndexKinds};
pub use live_index::IndexesAdded;
pub use lock::{DirectoryLock, LOCK_FILE_NAME};
pub use preparation_upgrade::PreparationChanges;
pub use read::{AttributeRef, AttributeValues, EntryRef, ReadTxn, TREE_DEPTH_MAX};
pub use referrers::DuplicateValue;
pub use replica::SubtreeMember;
pub use rows::{
    csn_at, precise_timestamp_value, timestamp_value, EntryRows, EntrySource, FreshValues,
    OperationalStamp, RowScratch, TreePlace,
};
pub use search::{CandidateMemo, Scope, SearchCursor, SearchSpec, TREE_ORDER_DEFERRED_ENTRIES_MAX};
pub use session_log::{LoggedChange, LoggedCsn, LoggedKind, SessionLog, SESSION_LOG_ENTRIES_MAX};
pub use store::{
    DescriptionInfo, DescriptionTable, IndexConfigChange, IndexKind, Store, StoreOptions,
    DATABASE_COUNT_MAX, MAP_SIZE_DEFAULT_BYTES,
};
pub use target_dn::TargetDn;
pub use treeorder::TreePosition;
pub use usage::EnvironmentUsage;
pub use write::{StoredEntry, WriteContext, WriteTxn};

#[cfg(test)]
mod tests {
    /// The server moves read txns between tasks and shares the store between threads.
    #[test]
    fn store_and_read_txn_are_thread_safe() {
        fn send_and_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_and_sync::<crate::Store>();
        send::<crate::ReadTxn>();
    }
}
