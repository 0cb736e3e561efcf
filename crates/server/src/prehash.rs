//! Cleartext passwords hashed before an update reaches the writer, when `password_hash` is a
//! slow scheme (PBKDF2, Argon2, crypt): on the blocking pool, through the verify gate (a core
//! and the memory the scheme needs), within the update's write budget. The writer then finds
//! `{SCHEME}` values (a Password Modify's marked `hashed`) and hashes nothing, so one user's
//! password changes no longer hold the single writer for tens of milliseconds each (under
//! Argon2, an update with many cleartext values held it for its whole one-second budget, and
//! every other write waited behind it).
//!
//! Access is still decided by the writer, inside its transaction, before anything is stored.
//! Hashing first costs an authenticated client no more than its own binds do (each verifies a
//! hash through the same gate); an anonymous request is left to the writer, which refuses it
//! before hashing, so no unauthenticated client can make the server hash.

use crate::context::{internal, password_scheme, Database, OperationContext};
use crate::result::{code, OperationError};
use crate::write_request::WriteRequest;
use lmdir_access::password::{self, Scheme};
use lmdir_schema::{AttrId, ModOp};
use std::time::Instant;

/// `request` with its cleartext passwords hashed, when that is done before the writer (a
/// bound identity, a slow `password_hash`); else `request` as it came.
pub(crate) async fn prehashed(
    context: &OperationContext,
    database: &Database,
    request: WriteRequest,
) -> Result<WriteRequest, OperationError> {
    if context.session.identity.dn.is_empty() {
        return Ok(request);
    }
    let scheme = password_scheme(context)?;
    let Some(password_attr) = database.schema().attribute("userPassword") else {
        return Ok(request);
    };
    let settings = context.server.settings();
    if !scheme.is_slow() || !has_cleartext(database, &request, password_attr, &settings) {
        return Ok(request);
    }
    let budget = settings.write_budget;
    let permit = context
        .server
        .verify_gate
        .enter(
            password::hash_memory_bytes(scheme),
            settings.password_verify_memory_bytes_max,
        )
        .await;
    let schema = database.schema();
    let hash_cleartext = settings.password_hash_cleartext;
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let deadline = Instant::now() + budget;
        let mut request = request;
        let mut hash_one = |value: &mut Vec<u8>| hash_within(scheme, value, deadline);
        for_each_cleartext(
            &schema,
            &mut request,
            password_attr,
            hash_cleartext,
            &mut hash_one,
        )?;
        if let WriteRequest::SetPassword { hashed, .. } = &mut request {
            *hashed = true;
        }
        Ok(request)
    })
    .await
    .map_err(internal)?
}

/// Whether `request` carries a password the writer would hash (what `for_each_cleartext`
/// would visit).
fn has_cleartext(
    database: &Database,
    request: &WriteRequest,
    password_attr: AttrId,
    settings: &crate::settings::ServerSettings,
) -> bool {
    let schema = database.schema();
    let is_password = |description: &str| {
        schema
            .parse_description(description)
            .is_ok_and(|parsed| parsed.attr == password_attr)
    };
    let any_cleartext = |values: &[Vec<u8>]| values.iter().any(|value| !password::is_hashed(value));
    let hash_cleartext = settings.password_hash_cleartext;
    match request {
        WriteRequest::SetPassword { hashed, .. } => !hashed,
        WriteRequest::Add(entry) if hash_cleartext => entry.attributes.iter().any(|attribute| {
            is_password(&attribute.description) && any_cleartext(&attribute.values)
        }),
        WriteRequest::Modify(_, modifications) if hash_cleartext => {
            modifications.iter().any(|modification| {
                matches!(modification.op, ModOp::Add | ModOp::Replace)
                    && is_password(&modification.description)
                    && any_cleartext(&modification.values)
            })
        }
        _ => false,
    }
}

/// Calls `hash_one` on each password value the writer would hash: an add's or a modify's
/// (add, replace) cleartext userPassword values under `password_hash_cleartext`, and a
/// Password Modify's new password whatever it looks like.
fn for_each_cleartext(
    schema: &lmdir_schema::Schema,
    request: &mut WriteRequest,
    password_attr: AttrId,
    hash_cleartext: bool,
    hash_one: &mut impl FnMut(&mut Vec<u8>) -> Result<(), OperationError>,
) -> Result<(), OperationError> {
    let is_password = |description: &str| {
        schema
            .parse_description(description)
            .is_ok_and(|parsed| parsed.attr == password_attr)
    };
    let mut cleartext = |values: &mut Vec<Vec<u8>>| -> Result<(), OperationError> {
        for value in values
            .iter_mut()
            .filter(|value| !password::is_hashed(value))
        {
            hash_one(value)?;
        }
        Ok(())
    };
    match request {
        WriteRequest::SetPassword {
            password, hashed, ..
        } if !*hashed => hash_one(password),
        WriteRequest::Add(entry) if hash_cleartext => {
            for attribute in &mut entry.attributes {
                if is_password(&attribute.description) {
                    cleartext(&mut attribute.values)?;
                }
            }
            Ok(())
        }
        WriteRequest::Modify(_, modifications) if hash_cleartext => {
            for modification in modifications {
                let adds = matches!(modification.op, ModOp::Add | ModOp::Replace);
                if adds && is_password(&modification.description) {
                    cleartext(&mut modification.values)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Hashes `value` in place with `scheme`, unless the deadline has passed (the update's write
/// budget: the same answer the writer gave when it hashed).
fn hash_within(
    scheme: Scheme,
    value: &mut Vec<u8>,
    deadline: Instant,
) -> Result<(), OperationError> {
    if Instant::now() > deadline {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            "the write exceeded its time budget while hashing passwords",
        ));
    }
    *value = password::hash(scheme, value).map_err(|error| match error {
        password::PasswordError::TooLong => {
            OperationError::new(code::CONSTRAINT_VIOLATION, error.to_string())
        }
        other => OperationError::new(code::OTHER, other.to_string()),
    })?;
    Ok(())
}
