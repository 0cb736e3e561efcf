//! The only `unsafe` of the store: opening and growing the LMDB environment through heed.
//!
//! Opening is unsafe in heed because LMDB cannot protect against misuse it cannot see:
//! - `open`: the same environment must not be opened twice in one process (LMDB's lock file
//!   is per process) and the files must not be modified by non-LMDB code. `Store::open` is the
//!   only caller. A read-write `Store` holds the directory's writer lock (`lmdir.lock`) for
//!   its life, so no other process or `Store` writes the files meanwhile; a read-only `Store`
//!   opens with RDONLY and writes nothing.
//! - `resize`: no transaction of this process may be open while the map is resized (they
//!   hold pointers into the old mapping). `Store::write` calls it only while holding the writer
//!   lock (no write txn) and the reader gate closed with zero live read txns.

use std::path::Path;

use heed::{Env, EnvFlags, EnvOpenOptions, WithoutTls};

/// Opens the environment. `sync` false sets NO_SYNC (commits are durable only at OS flush).
/// No WRITE_MAP: the data file then grows only as pages are written, so a huge map size costs
/// only address space. `read_only` sets LMDB's RDONLY: no write txn can begin, so a reader
/// beside another process's writer can never write (it still registers in the reader table).
pub(crate) fn open_environment(
    directory: &Path,
    map_size_bytes: usize,
    database_count_max: u32,
    sync: bool,
    read_only: bool,
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
    if read_only {
        flags |= EnvFlags::READ_ONLY;
    }
    // SAFETY: see the module comment; flags are valid LMDB env flags.
    unsafe {
        options.flags(flags);
        options.open(directory)
    }
}

/// Grows the map. The caller guarantees no transaction of this process is open.
pub(crate) fn resize_environment(env: &Env<WithoutTls>, map_size_bytes: usize) -> heed::Result<()> {
    // SAFETY: see the module comment (writer lock held, reader gate closed with no readers).
    unsafe { env.resize(map_size_bytes) }
}
