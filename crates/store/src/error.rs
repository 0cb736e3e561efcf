//! The store's leaf types: its error, the LMDB error mapped to LDAP, and the raw DB handle.
//! Every other module may use this one; it uses none of them.

use heed::types::Bytes;
use heed::Database;
use lmdir_schema::{LdapError, ResultCode};

pub type RawDatabase = Database<'static, Bytes, Bytes>;

/// Each message includes the error it wraps, so none is also a `source()`: a caller printing
/// the chain (`lmdir`'s `{:#}`) would show it twice.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("LMDB: {0}")]
    Lmdb(heed::Error),
    #[error("{0}")]
    Ldap(LdapError),
    #[error("store format: {0}")]
    Format(String),
    #[error("configuration: {0}")]
    Config(String),
    #[error("I/O: {0}")]
    Io(std::io::Error),
    #[error(
        "the database in {directory} is already open for writing by another process ({holder}); \
         only one server, load or reindex may use it at a time (export, stat, check and search \
         work beside it)"
    )]
    Locked { directory: String, holder: String },
    #[error("the store is open read-only")]
    ReadOnly,
}

impl From<heed::Error> for StoreError {
    fn from(error: heed::Error) -> StoreError {
        StoreError::Lmdb(error)
    }
}

impl From<LdapError> for StoreError {
    fn from(error: LdapError) -> StoreError {
        StoreError::Ldap(error)
    }
}

impl From<std::io::Error> for StoreError {
    fn from(error: std::io::Error) -> StoreError {
        StoreError::Io(error)
    }
}

impl From<StoreError> for LdapError {
    fn from(error: StoreError) -> LdapError {
        match error {
            StoreError::Ldap(error) => error,
            other => LdapError::new(ResultCode::Other, other.to_string()),
        }
    }
}

pub(crate) fn lmdb_to_ldap(error: heed::Error) -> LdapError {
    LdapError::new(ResultCode::Other, format!("LMDB: {error}"))
}
