//! Every integration test of this crate, one module per former test file, linked into one binary.
//! (One binary per file linked every dependency each time: gigabytes of a CI disk.)

mod common;

mod anonymous;
mod attacks_read;
mod attacks_store;
mod attacks_write;
mod compat_filters;
mod config_start;
mod console;
mod context_csn;
mod directory;
mod dynlist;
mod encoder_speed;
mod in_chain;
mod integrity;
mod large_groups;
mod limits;
mod matched_values;
mod monitoring;
mod password_schemes;
mod ppolicy;
mod protocol;
mod proxy_authz;
mod scim;
mod scim_conformance;
mod subentries;
mod sync_provider;
mod transactions;
