//! RFC 4533 replication. `consumer`: one task per `[[replication.consumer]]` pulling a subtree
//! from a provider (an unmodified OpenLDAP slapd with syncprov, or any RFC 4533 provider);
//! `apply`: what it received, applied by the server's one writer with the cookie in the same
//! transaction; `initial`: a fresh replica's first refresh through the bulk loader.

//! `merge`: per-attribute resolution of an entry changed on two multi-provider nodes.

pub(crate) mod apply;
pub mod consumer;
mod initial;
mod link;
mod merge;

pub use consumer::start_consumers;
