//! lmdir-access: the server's security decisions as a library: password schemes
//! ([`password`]) and access control ([`acl`]).

pub mod acl;
pub mod password;
