//! Every extended operation lmdir answers, in one table: the root DSE's supportedExtension is
//! made from it, and `operations::extended` dispatches on it, so an operation is advertised
//! exactly when it is answered.

use crate::controls::{CANCEL_OID, START_TLS_OID};
use ldap3_proto::proto::{OID_PASSWORD_MODIFY, OID_WHOAMI};

/// Start Transaction (RFC 5805), handled in `transaction`.
pub const TRANSACTION_START_OID: &str = "1.3.6.1.1.21.1";
/// End Transaction (RFC 5805), handled in `transaction`.
pub const TRANSACTION_END_OID: &str = "1.3.6.1.1.21.3";

/// Which extended operation a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extension {
    /// Who am I? (RFC 4532).
    WhoAmI,
    /// Cancel (RFC 3909): answered by the connection, which knows its operations.
    Cancel,
    /// StartTLS (RFC 4511 §4.14): answered by the connection, which owns the socket.
    StartTls,
    /// Password Modify (RFC 3062).
    PasswordModify,
    /// Start Transaction (RFC 5805).
    StartTransaction,
    /// End Transaction (RFC 5805).
    EndTransaction,
}

/// What an extended operation needs of the server to be offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    Database,
    Tls,
}

pub struct RegisteredExtension {
    pub oid: &'static str,
    pub extension: Extension,
    pub needs: Needs,
}

pub const REGISTRY: &[RegisteredExtension] = &[
    RegisteredExtension {
        oid: OID_WHOAMI,
        extension: Extension::WhoAmI,
        needs: Needs::Nothing,
    },
    RegisteredExtension {
        oid: CANCEL_OID,
        extension: Extension::Cancel,
        needs: Needs::Nothing,
    },
    RegisteredExtension {
        oid: START_TLS_OID,
        extension: Extension::StartTls,
        needs: Needs::Tls,
    },
    RegisteredExtension {
        oid: OID_PASSWORD_MODIFY,
        extension: Extension::PasswordModify,
        needs: Needs::Database,
    },
    RegisteredExtension {
        oid: TRANSACTION_START_OID,
        extension: Extension::StartTransaction,
        needs: Needs::Database,
    },
    RegisteredExtension {
        oid: TRANSACTION_END_OID,
        extension: Extension::EndTransaction,
        needs: Needs::Database,
    },
];

/// The extended operation named `oid`, if lmdir answers it on a server with what it has.
pub fn lookup(oid: &str, has_database: bool, has_tls: bool) -> Option<Extension> {
    REGISTRY
        .iter()
        .find(|registered| registered.oid == oid && offered(registered, has_database, has_tls))
        .map(|registered| registered.extension)
}

fn offered(registered: &RegisteredExtension, has_database: bool, has_tls: bool) -> bool {
    match registered.needs {
        Needs::Nothing => true,
        Needs::Database => has_database,
        Needs::Tls => has_tls,
    }
}

/// The root DSE's supportedExtension: every OID `lookup` answers.
pub fn supported_oids(has_database: bool, has_tls: bool) -> impl Iterator<Item = &'static str> {
    REGISTRY
        .iter()
        .filter(move |registered| offered(registered, has_database, has_tls))
        .map(|registered| registered.oid)
}
