//! The directory data behind the server: entry search, compare, updates and password checks.
//! Until the store crate is wired in, the server runs without a database: the root DSE lists no
//! naming context and every entry operation answers noSuchObject, as for any DN outside all
//! naming contexts.

use crate::controls::RequestControls;
use crate::operations::{OperationContext, SearchDone};
use crate::result::{code, OperationError};
use crate::selection::AttributeSelection;
use crate::server::ServerContext;
use ldap3_proto::proto::{
    LdapAddRequest, LdapCompareRequest, LdapExtendedRequest, LdapModifyDNRequest,
    LdapModifyRequest, LdapSearchRequest,
};

/// No database implementation exists yet in this build (uninhabited).
pub enum Database {}

impl Database {
    pub async fn close(&self) {
        match *self {}
    }
}

fn no_such_object(dn: &str) -> OperationError {
    OperationError::new(
        code::NO_SUCH_OBJECT,
        format!("'{dn}' is not within any naming context of this server"),
    )
}

/// DN equality for configured DNs (rootdn): case-insensitive, spaces around separators ignored.
pub fn same_dn(_server: &ServerContext, left: &str, right: &str) -> bool {
    fn simple_normalize(dn: &str) -> String {
        dn.split(',')
            .map(|rdn| {
                rdn.split('=')
                    .map(|part| part.trim().to_lowercase())
                    .collect::<Vec<_>>()
                    .join("=")
            })
            .collect::<Vec<_>>()
            .join(",")
    }
    simple_normalize(left) == simple_normalize(right)
}

/// Checks a presented password against a stored value (cleartext compare, constant time in the
/// length of the presented value).
pub fn password_matches(stored: &[u8], presented: &[u8]) -> bool {
    if stored.len() != presented.len() {
        return false;
    }
    stored
        .iter()
        .zip(presented)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

pub async fn bind_entry(
    _server: &ServerContext,
    _dn: &str,
    _password: &[u8],
) -> Result<crate::connection::Identity, OperationError> {
    // Unknown DN: invalidCredentials, never revealing whether the entry exists.
    Err(OperationError::new(code::INVALID_CREDENTIALS, ""))
}

pub async fn search(
    context: &OperationContext,
    request: &LdapSearchRequest,
    _controls: &RequestControls,
    _selection: &AttributeSelection,
) -> Result<SearchDone, OperationError> {
    match &context.server.database {
        None => Err(no_such_object(&request.base)),
        Some(database) => match *database {},
    }
}

pub async fn compare(
    context: &OperationContext,
    request: &LdapCompareRequest,
) -> Result<bool, OperationError> {
    match &context.server.database {
        None => Err(no_such_object(&request.dn)),
        Some(database) => match *database {},
    }
}

pub async fn add(
    context: &OperationContext,
    request: LdapAddRequest,
) -> Result<(), OperationError> {
    match &context.server.database {
        None => Err(no_such_object(&request.dn)),
        Some(database) => match *database {},
    }
}

pub async fn delete(context: &OperationContext, dn: &str) -> Result<(), OperationError> {
    match &context.server.database {
        None => Err(no_such_object(dn)),
        Some(database) => match *database {},
    }
}

pub async fn modify(
    context: &OperationContext,
    request: LdapModifyRequest,
) -> Result<(), OperationError> {
    match &context.server.database {
        None => Err(no_such_object(&request.dn)),
        Some(database) => match *database {},
    }
}

pub async fn modify_dn(
    context: &OperationContext,
    request: LdapModifyDNRequest,
) -> Result<(), OperationError> {
    match &context.server.database {
        None => Err(no_such_object(&request.dn)),
        Some(database) => match *database {},
    }
}

pub async fn password_modify(
    context: &OperationContext,
    _request: &LdapExtendedRequest,
) -> Result<(Option<String>, Option<Vec<u8>>), OperationError> {
    match &context.server.database {
        None => Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "no database holds passwords on this server",
        )),
        Some(database) => match *database {},
    }
}
