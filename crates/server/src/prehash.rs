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
//! hash through the same gate); an anonymous request is left to the writer, which decides
//! access before it hashes, so no unauthenticated client makes the server hash for nothing.

use crate::context::{internal, password_scheme, Database, OperationContext};
use crate::result::OperationError;
use crate::write_request::{hash_password_within, WriteRequest};
use lmdir_access::password;
use lmdir_schema::LdapError;
use std::time::Instant;

/// `request` with its cleartext passwords hashed, when that is done before the writer (a
/// bound identity, a slow `password_hash`); else `request` as it came.
pub(crate) async fn prehashed(
    context: &OperationContext,
    database: &Database,
    mut request: WriteRequest,
) -> Result<WriteRequest, OperationError> {
    let scheme = password_scheme(&context.server)?;
    if context.session.identity.dn.is_empty() || !scheme.is_slow() {
        return Ok(request);
    }
    let schema = database.schema();
    let Some(password_attr) = schema.attribute("userPassword") else {
        return Ok(request);
    };
    let settings = &context.settings;
    let hash_cleartext = settings.password_hash_cleartext;
    // Whether there is anything to hash: the walk stops at the first value, changing nothing.
    let has_cleartext = request
        .for_each_password_to_hash(&schema, password_attr, hash_cleartext, &mut |_| Err(()))
        .is_err();
    if !has_cleartext {
        return Ok(request);
    }
    let write_budget = settings.write_budget;
    let hash_all = move || {
        // The budget counts from here: waiting at the gate is not the update's own cost.
        let deadline = Instant::now() + write_budget;
        request.for_each_password_to_hash(
            &schema,
            password_attr,
            hash_cleartext,
            &mut |value| hash_password_within(scheme, value, deadline),
        )?;
        if let WriteRequest::SetPassword { hashed, .. } = &mut request {
            *hashed = true;
        }
        Ok::<_, LdapError>(request)
    };
    let memory_bytes = password::hash_memory_bytes(scheme);
    let budget_bytes = settings.password_verify_memory_bytes_max;
    let gate = &context.server.verify_gate;
    let client = Some(context.session.client);
    gate.run_blocking(client, memory_bytes, budget_bytes, hash_all)
        .await
        .map_err(internal)?
        .map_err(OperationError::from)
}
