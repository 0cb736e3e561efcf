//! RFC 4533 replication. `consumer`: one task per `[[replication.consumer]]` pulling a subtree
//! from a provider (an unmodified OpenLDAP slapd with syncprov, or any RFC 4533 provider);
//! what it receives is applied by the server's one writer through `crate::sync_apply`;
//! `initial`: a fresh replica's first refresh through the bulk loader.

pub mod consumer;
mod initial;
mod link;

pub use consumer::start_consumers;
