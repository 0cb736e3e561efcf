//! Exclusion: the per-directory writer lock between processes, and the one policy for
//! poisoned locks inside a process.
//!
//! Description numbers are allocated from each process's memory, so two writers on one
//! directory would hand out the same number for different descriptions and overwrite each
//! other's `meta` rows. Every read-write open therefore takes an exclusive advisory lock
//! (`flock`, through `File::try_lock`) on `lmdir.lock` in the directory and keeps it for the
//! life of the `Store`; the kernel releases it when the process ends, however it ends.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::StoreError;

/// The lock file every read-write open locks, in the store directory.
pub const LOCK_FILE_NAME: &str = "lmdir.lock";
/// Bytes of the holder's description read back for the refusal message (pid and command).
const HOLDER_TEXT_BYTES_MAX: u64 = 512;
/// How long a busy lock is retried before the open is refused. A `flock` belongs to the open
/// file, and a child forked by any thread of the holder's process keeps the file open until it
/// execs (milliseconds for a process with a large heap): a lock its holder has released can
/// still be busy for that long. A real holder (a server, a load) holds it far longer.
const BUSY_RETRY_MILLISECONDS_MAX: u64 = 250;
/// The pause between two tries of a busy lock.
const BUSY_RETRY_STEP_MILLISECONDS: u64 = 5;

/// Held for the life of a read-write `Store` (and by the bulk loader for a whole load):
/// dropping it closes the file, which releases the lock.
pub struct DirectoryLock {
    _file: File,
}

impl DirectoryLock {
    /// Takes the directory's writer lock, or says who holds it.
    pub fn acquire(directory: &Path) -> Result<DirectoryLock, StoreError> {
        let path = directory.join(LOCK_FILE_NAME);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        if !try_lock_within_grace(&file)? {
            return Err(StoreError::Locked {
                directory: directory.display().to_string(),
                holder: holder_text(&mut file),
            });
        }
        // Only the holder writes the file, so the refusal message can name the process.
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        let command: Vec<String> = std::env::args().collect();
        write!(file, "pid {}: {}", std::process::id(), command.join(" "))?;
        file.flush()?;
        Ok(DirectoryLock { _file: file })
    }
}

/// Takes the lock, retrying a busy one for `BUSY_RETRY_MILLISECONDS_MAX`; false if still busy.
fn try_lock_within_grace(file: &File) -> Result<bool, StoreError> {
    let mut retries_left = BUSY_RETRY_MILLISECONDS_MAX / BUSY_RETRY_STEP_MILLISECONDS;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(TryLockError::WouldBlock) if retries_left == 0 => return Ok(false),
            Err(TryLockError::WouldBlock) => {
                retries_left -= 1;
                std::thread::sleep(std::time::Duration::from_millis(
                    BUSY_RETRY_STEP_MILLISECONDS,
                ));
            }
            Err(TryLockError::Error(error)) => return Err(error.into()),
        }
    }
}

fn holder_text(file: &mut File) -> String {
    let mut text = String::new();
    let read = file
        .take(HOLDER_TEXT_BYTES_MAX)
        .read_to_string(&mut text)
        .is_ok();
    if read && !text.trim().is_empty() {
        text.trim().to_string()
    } else {
        "process unknown".to_string()
    }
}

// Poisoned locks: every value these locks guard is replaced by one assignment (an `Arc` swap,
// a count, a map), so a thread that panicked while holding one cannot have left it half
// written. The store therefore recovers the guard everywhere instead of spreading the panic
// to every later reader.

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use lmdir_schema::{Dn, Entry, Filter, Schema};

    use crate::{IndexKind, Scope, SearchSpec, Store, StoreOptions, WriteContext};

    fn entry(dn: &str, attributes: &[(&str, &str)]) -> Entry {
        let mut entry = Entry::new(Dn::parse(dn).unwrap());
        for (description, value) in attributes {
            entry.add_values(description, [value.as_bytes().to_vec()]);
        }
        entry
    }

    /// Panics on another thread while holding the lock `hold` takes.
    fn poison(store: &Store, hold: fn(&Store)) {
        let store = store.clone();
        let outcome = std::thread::spawn(move || hold(&store)).join();
        assert!(outcome.is_err(), "the holder panicked");
    }

    /// One policy: a panic under any store lock leaves later reads and writes working.
    #[test]
    fn poisoned_locks_are_recovered_everywhere() {
        let temporary = tempfile::tempdir().unwrap();
        let indexes = BTreeMap::from([("ou".to_string(), vec![IndexKind::Equality])]);
        let options = StoreOptions {
            suffix: "dc=example,dc=com".into(),
            indexes,
            sync: false,
            ..StoreOptions::default()
        };
        let store = Store::open(temporary.path(), options, Arc::new(Schema::builtin())).unwrap();
        let context = WriteContext::new("cn=admin,dc=example,dc=com");
        let mut write = store.write().unwrap();
        let top = [("objectClass", "domain"), ("dc", "example")];
        write
            .add(&entry("dc=example,dc=com", &top), &context)
            .unwrap();
        write.commit().unwrap();

        poison(&store, |store| {
            let _guard = store.inner.descriptions.write();
            panic!("under the description lock");
        });
        poison(&store, |store| {
            let _guard = store.inner.indexes.write();
            panic!("under the index lock");
        });
        poison(&store, |store| {
            let _guard = store.inner.index_config_change.write();
            panic!("under the index change lock");
        });
        poison(&store, |store| {
            let _guard = store.inner.descriptions_persisted.lock();
            panic!("under the persisted count");
        });
        poison(&store, |store| {
            let _guard = store.write();
            panic!("under the writer lock");
        });
        assert!(store.inner.descriptions.is_poisoned());
        assert!(store.inner.writer.is_poisoned());

        let configured: Vec<_> = store.inner.index_set().configured.keys().copied().collect();
        let mut write = store.write().unwrap();
        let unit = [("objectClass", "organizationalUnit"), ("ou", "people")];
        let unit_dn = "ou=people,dc=example,dc=com";
        write.add(&entry(unit_dn, &unit), &context).unwrap();
        write.mark_indexes_built(&configured);
        write.commit().unwrap();
        store.reload_descriptions().unwrap();
        assert!(store.index_config_change().is_none());
        assert!(!store.descriptions().is_empty());
        let read = store.read().unwrap();
        let spec = SearchSpec {
            base: "dc=example,dc=com".into(),
            scope: Scope::Sub,
            filter: read
                .schema()
                .prepare_filter(&Filter::parse("(ou=people)", 8).unwrap()),
            size_limit: 0,
            lookthrough_limit: 0,
        };
        let found: Vec<_> = read
            .search(&spec)
            .unwrap()
            .map(|item| item.unwrap().0)
            .collect();
        assert_eq!(found, vec![read.dn_to_id(unit_dn).unwrap()]);
    }
}
