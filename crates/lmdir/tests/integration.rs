//! Every integration test of this crate, one module per former test file, linked into one binary.
//! (One binary per file linked every dependency each time: gigabytes of a CI disk.)

mod conformance;
mod mesh;
mod slapd_sync;
mod support;

mod accesslog;
mod cli;
mod cli_messages;
mod clients;
mod crash_safety;
mod differential;
mod differential_access;
mod differential_aliases;
mod differential_crypt;
mod differential_dynlist;
mod differential_glue;
mod differential_integrity;
mod differential_normalizer;
mod differential_parents;
mod differential_permissive;
mod differential_ppolicy;
mod differential_proxy_authz;
mod differential_scripts;
mod differential_subentries;
mod differential_transactions;
mod differential_unique;
mod differential_vlv;
mod glue_load;
mod hostile;
mod migrate;
mod nss_pam;
mod one_writer;
mod operations;
mod parents_first;
mod ppolicy_python;
mod reload;
mod replication_consumer;
mod replication_multi;
mod replication_provider;
mod scale_out;
mod serve_demo;
mod unboundid_tools;
