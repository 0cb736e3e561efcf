//! Every integration test of this crate, one module per former test file, linked into one binary.
//! (One binary per file linked every dependency each time: gigabytes of a CI disk.)

mod custom_schema;
mod filters;
mod no_panic;
mod openldap_schema_files;
