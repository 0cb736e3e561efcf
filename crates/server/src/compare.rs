//! Compare (RFC 4511 §4.10) in one read transaction, as the subject sees the entry.

use crate::context::{database_of, internal, no_such_object, Database, OperationContext};
use crate::controls::RequestControls;
use crate::entry_read::{check_read_assertion, disclosed_entry};
use crate::identity::Identity;
use crate::result::{code, OperationError};
use crate::settings::ServerSettings;
use ldap3_proto::proto::LdapCompareRequest;
use lmdir_schema::AttrId;

pub async fn compare(
    context: &OperationContext,
    request: &LdapCompareRequest,
) -> Result<bool, OperationError> {
    let Some(_) = database_of(&context.server) else {
        return Err(no_such_object(&request.dn));
    };
    let controls =
        crate::controls::parse(&context.controls, crate::controls::OperationClass::Compare)?;
    let server = context.server.clone();
    let settings = context.settings.clone();
    let identity = context.session.identity.clone();
    let request = request.clone();
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        compare_entry(database, &settings, &identity, &request, &controls)
    })
    .await
    .map_err(internal)?
}

/// Compare (RFC 4511 §4.10) as the subject sees the entry: an entry it may not know of answers
/// as a missing one; only the asserted type's subtypes it may compare are compared (`name`
/// never matches a hidden `cn`); the assertion control sees hidden items as Undefined.
fn compare_entry(
    database: &Database,
    settings: &ServerSettings,
    identity: &Identity,
    request: &LdapCompareRequest,
    controls: &RequestControls,
) -> Result<bool, OperationError> {
    let description = database.schema().parse_description(&request.atype)?;
    let attr = description.attr;
    let asserted = database.schema().normalize_value(attr, &request.val)?;
    let normalized_dn = database.normalize_dn(&request.dn)?;
    let read = database.store.read().map_err(internal)?;
    let groups = database.groups(&read);
    let subject = database.subject(identity, &groups);
    let (_, entry) = disclosed_entry(database, &read, &subject, &request.dn, &normalized_dn)?;
    let policy = database.policy();
    let access = policy.for_entry(&subject, &normalized_dn, &entry);
    let comparable: Vec<AttrId> = database
        .schema()
        .subtypes(attr)
        .iter()
        .copied()
        .filter(|subtype| access.can_compare(*subtype))
        .collect();
    if comparable.is_empty() {
        return Err(OperationError::new(
            code::INSUFFICIENT_ACCESS_RIGHTS,
            format!("no compare access to {} of '{}'", request.atype, request.dn),
        ));
    }
    if let Some(assertion) = &controls.assertion {
        check_read_assertion(database, settings, &access, &entry, assertion)?;
    }
    let mut found_attribute = false;
    for attribute in entry.attributes() {
        if !comparable.contains(&attribute.attr()) {
            continue;
        }
        found_attribute = true;
        // One lookup for an out-of-line attribute (a large group's members).
        if attribute.contains_normalized(&asserted).map_err(internal)? {
            return Ok(true);
        }
    }
    if !found_attribute {
        return Err(OperationError::new(
            code::NO_SUCH_ATTRIBUTE,
            format!("'{}' has no {}", request.dn, request.atype),
        ));
    }
    Ok(false)
}
