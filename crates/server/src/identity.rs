//! Who an operation runs as: the bound DN (as given and normalized) and whether it is the
//! rootdn. A leaf: the writer, access control and every operation take it.

/// Authentication state of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// The bound DN as given at bind (original form); empty = anonymous.
    pub dn: String,
    /// The bound DN normalized (access control, self checks); empty = anonymous.
    pub normalized_dn: String,
    pub is_rootdn: bool,
}

/// The base of the identities SASL EXTERNAL over ldapi gives local users
/// (`gidNumber=<gid>+uidNumber=<uid>,cn=peercred,cn=external,cn=auth`, as slapd).
pub(crate) const PEERCRED_BASE: &str = "cn=peercred,cn=external,cn=auth";

/// The attribute of an entry naming whom that entry may act as (`authz_policy` to/any/all).
pub(crate) const AUTHZ_TO: &str = "authzTo";
