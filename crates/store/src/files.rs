//! The store's files in its directory, for tools that build a store elsewhere and move it in
//! (the bulk loader): only this module and the store name them.

use std::path::Path;

use crate::layout::{DATA_FILE_NAME, LMDB_LOCK_FILE_NAME};
use crate::lock::LOCK_FILE_NAME;

/// What an existing directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDirectory {
    /// Nothing of a store's data (at most its lock files).
    Empty,
    /// A store's data file (and perhaps its lock files).
    Store,
    /// A file that is no store's: the name of the first one met.
    Foreign(String),
}

/// Looks at `directory`'s files.
pub fn inspect_directory(directory: &Path) -> std::io::Result<StoreDirectory> {
    let mut holds_data = false;
    for item in std::fs::read_dir(directory)? {
        let name = item?.file_name();
        if name == DATA_FILE_NAME {
            holds_data = true;
        } else if name != LMDB_LOCK_FILE_NAME && name != LOCK_FILE_NAME {
            return Ok(StoreDirectory::Foreign(name.to_string_lossy().into_owned()));
        }
    }
    Ok(if holds_data {
        StoreDirectory::Store
    } else {
        StoreDirectory::Empty
    })
}

/// Moves the data file built in `staging` over `directory`'s (atomic: a reader of the old file
/// keeps its mapping). The old reader table belongs to the old data file and is removed; LMDB
/// makes a new one. The caller holds `directory`'s writer lock and syncs the directory.
pub fn replace_data_file(staging: &Path, directory: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(directory.join(LMDB_LOCK_FILE_NAME)) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    std::fs::rename(data_file_path(staging), data_file_path(directory))
}

/// Where `directory`'s LMDB data file is.
pub(crate) fn data_file_path(directory: &Path) -> std::path::PathBuf {
    directory.join(DATA_FILE_NAME)
}

/// The size of `directory`'s data file in bytes (0 when absent).
pub fn data_file_bytes(directory: &Path) -> u64 {
    std::fs::metadata(data_file_path(directory))
        .map(|metadata| metadata.len())
        .unwrap_or(0)
}
