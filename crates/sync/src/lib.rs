//! RFC 4533 content synchronization: the Sync controls and messages, OpenLDAP's cookie and CSN
//! formats. Pure functions only (no I/O, no store, no server): every later part of replication
//! (provider, consumer, contextCSN upkeep) builds on these, and the fuzz targets exercise them.

pub mod cookie;
pub mod csn;
pub mod messages;

pub use cookie::{ContextCsns, Cookie, CookieError, CookieStatus};
pub use csn::{Csn, CsnError, CsnGenerator};
pub use messages::{
    DecodeError, SyncDone, SyncInfo, SyncMode, SyncRequest, SyncState, SyncStateKind,
};
