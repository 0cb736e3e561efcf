//! Files that hold password hashes or credentials (`lmdir export FILE`, `lmdir migrate --out`):
//! owner-only (0600) whatever the umask, and never readable by others for a moment: the mode is
//! given when the file is created, and an existing file is made private before it is emptied
//! and written (its old contents were already as readable as they were).

use std::fs::{File, OpenOptions, Permissions};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of a file holding secrets: the live database's (`data.mdb` is 0600).
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Opens `path` for writing from its start, created 0600, or an existing regular file made
/// 0600 (when others could read it) and then truncated. A device or pipe (`/dev/stdout`) is
/// written as it is.
pub fn create(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)?;
    let metadata = file.metadata()?;
    if metadata.is_file() {
        if metadata.permissions().mode() & 0o077 != 0 {
            file.set_permissions(Permissions::from_mode(PRIVATE_FILE_MODE))?;
        }
        file.set_len(0)?;
    }
    Ok(file)
}

/// Writes `contents` to `path` as `create` opens it.
pub fn write(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = create(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_or_existing_file_ends_private_and_holds_only_the_new_contents() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("secret.ldif");
        write(&path, b"first contents, longer").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        write(&path, b"second").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
    }
}
