//! The only `unsafe` of the store: opening the LMDB environment through heed.
//!
//! Opening is unsafe in heed because LMDB cannot protect against misuse it cannot see:
//! - `open`: the same environment must not be opened twice in one process (LMDB's lock file
//!   is per process) and the files must not be modified by non-LMDB code. `Store::open` is the
//!   only caller; it is the owner of the directory for the life of the `Store`.

use std::path::Path;

use heed::{Env, EnvFlags, EnvOpenOptions, WithoutTls};

/// Opens the environment. `sync` false sets NO_SYNC (commits are durable only at OS flush).
/// No WRITE_MAP: the data file then grows only as pages are written, so a huge map size costs
/// only address space.
pub(crate) fn open_environment(
    directory: &Path,
    map_size_bytes: usize,
    database_count_max: u32,
    sync: bool,
) -> heed::Result<Env<WithoutTls>> {
    let mut options = EnvOpenOptions::new().read_txn_without_tls();
    options
        .map_size(map_size_bytes)
        .max_dbs(database_count_max)
        .max_readers(1024);
    let mut flags = EnvFlags::NO_READ_AHEAD;
    if !sync {
        flags |= EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC;
    }
    // SAFETY: see the module comment; flags are valid LMDB env flags.
    unsafe {
        options.flags(flags);
        options.open(directory)
    }
}
