//! Every integration test of this crate, one module per former test file, linked into one binary.
//! (One binary per file linked every dependency each time: gigabytes of a CI disk.)

mod acl_config_errors;
mod acl_from_config;
mod acl_groups;
mod acl_matrix;
mod acl_properties;
mod acl_scopes;
mod password;
