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
//! - `Appender::put`: heed marks writes through a cursor unsafe because a value read from the
//!   DB and still borrowed would be invalidated by the write. An `Appender` borrows its write
//!   txn mutably for its whole life and never reads, so no value of that txn can be borrowed
//!   while it writes; the key and value it writes come from the caller's memory.

use std::path::Path;

use heed::types::Bytes;
use heed::{Env, EnvFlags, EnvOpenOptions, PutFlags, RwIter, RwTxn, WithoutTls};

use crate::error::RawDatabase;

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

/// One long-lived write cursor on one DB, for writes in key order. `mdb_put` opens a cursor per
/// call and its APPEND walks from the root to the last leaf (`mdb_cursor_last`: a dirty-list
/// search per level); a cursor kept between APPENDs still points at the last leaf, so LMDB
/// finds each level "already in the right place" and the put is a leaf append. Cursors end
/// with their txn: the bulk writer drops its appender before each commit.
pub(crate) struct Appender<'t> {
    cursor: RwIter<'t, Bytes, Bytes>,
}

impl<'t> Appender<'t> {
    pub(crate) fn open(database: RawDatabase, txn: &'t mut RwTxn<'_>) -> heed::Result<Self> {
        Ok(Appender {
            cursor: database.iter_mut(txn)?,
        })
    }

    /// Writes `key` → `value`: APPEND when `append` (the key is above every key in the DB,
    /// else LMDB answers KEYEXIST), else an ordinary put (search, insert or overwrite).
    pub(crate) fn put(&mut self, append: bool, key: &[u8], value: &[u8]) -> heed::Result<()> {
        let flags = if append {
            PutFlags::APPEND
        } else {
            PutFlags::empty()
        };
        // SAFETY: see the module comment (the txn is borrowed mutably by this appender, which
        // never reads; `key` and `value` are not borrowed from this txn).
        unsafe {
            self.cursor
                .put_current_with_options::<Bytes>(flags, key, value)
        }
    }
}
