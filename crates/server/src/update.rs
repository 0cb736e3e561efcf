//! Add, delete, modify and modify DN: static checks of the request, then submission to the
//! writer (which decides access, the assertion and the schema inside its transaction), with the
//! pre-/post-read controls around it.

use crate::ber::ResponseControl;
use crate::context::{
    database_of, internal, no_such_object, require_secure_write, submit, update_of, Database,
    OperationContext,
};
use crate::controls::{OperationClass, RequestControls};
use crate::entry_read::read_entry_control;
use crate::password::check_password_change;
use crate::ppolicy;
use crate::result::{code, OperationError};
use crate::settings::ServerSettings;
use crate::write_request::ReadImages;
use crate::writer::WriteRequest;
use ldap3_proto::proto::{LdapAddRequest, LdapModifyDNRequest, LdapModifyRequest, LdapModifyType};
use lmdir_access::password;
use lmdir_schema::{Dn, Entry, ModOp, Modification};
use std::sync::Arc;

/// The attribute lists of pre-read / post-read within `requested_attributes_max`, checked
/// before an update is written (a post-read refused after the write would report a failure
/// for a change that was made).
/// What every update does first: the database (noSuchObject without one), the transport and
/// replica checks, and its controls, parsed and within limits.
fn open_update<'c>(
    context: &'c OperationContext,
    dn: &str,
    class: crate::controls::OperationClass,
) -> Result<(&'c Database, RequestControls), OperationError> {
    let Some(database) = database_of(&context.server) else {
        return Err(no_such_object(dn));
    };
    require_secure_write(context)?;
    let controls = crate::controls::parse(&context.controls, class)?;
    read_controls_within_limits(context, &controls)?;
    if controls.transaction.is_some()
        && (controls.pre_read.is_some() || controls.post_read.is_some())
    {
        return Err(OperationError::new(
            code::UNWILLING_TO_PERFORM,
            "pre-read and post-read are not available inside a transaction",
        ));
    }
    Ok((database, controls))
}

fn read_controls_within_limits(
    context: &OperationContext,
    controls: &RequestControls,
) -> Result<(), OperationError> {
    for attributes in [&controls.pre_read, &controls.post_read]
        .into_iter()
        .flatten()
    {
        crate::selection::attribute_list_within_limits(&context.settings, attributes.len())?;
    }
    Ok(())
}

/// What became of an update: written (committed, with the snapshots the writer took for its
/// read entry controls), or queued in an LDAP transaction.
enum Submitted {
    Committed(Option<Arc<ReadImages>>),
    Queued,
}

impl Submitted {
    /// The writer's snapshot before (`after` false) or after the update, when it took one.
    fn snapshot(&self, after: bool) -> Option<lmdir_store::ReadTxn> {
        match self {
            Submitted::Committed(Some(images)) => images.take(after),
            _ => None,
        }
    }
}

/// Sends the update to the writer and waits for its commit, or queues it in the transaction
/// the request names (decided at End Transaction, with the transaction's other updates).
async fn submit_update(
    context: &OperationContext,
    database: &Database,
    controls: &RequestControls,
    request: WriteRequest,
) -> Result<Submitted, OperationError> {
    let request = crate::prehash::prehashed(context, database, request).await?;
    let mut update = update_of(context, controls, request)?;
    let images = ReadImages::wanted(controls.pre_read.is_some(), controls.post_read.is_some());
    update.read_images = images.clone();
    match &controls.transaction {
        Some(id) => {
            context.session.transactions.queue(
                id,
                context.message_id,
                update,
                context.settings.transaction_bytes_max,
            )?;
            Ok(Submitted::Queued)
        }
        None => submit(database, update)
            .await
            .map(|()| Submitted::Committed(images)),
    }
}

/// The pre-read control as the writer's snapshot just before the update shows the entry;
/// `read_before` (read when the request was decided) when the writer took none.
async fn pre_image(
    context: &OperationContext,
    submitted: &Submitted,
    dn: &str,
    controls: &RequestControls,
    read_before: Option<ResponseControl>,
) -> Option<ResponseControl> {
    let snapshot = submitted.snapshot(false);
    let (Some(snapshot), Some(_)) = (snapshot, &read_before) else {
        return read_before;
    };
    let oid = crate::controls::PRE_READ_OID;
    let at = (dn.to_string(), Some(snapshot));
    // The change is committed: a failure here keeps the image read when it was decided.
    match read_entry_control_async(context, at, controls.pre_read.clone(), oid).await {
        Ok(Some(control)) => Some(control),
        _ => read_before,
    }
}

/// The pre-read decided before the update (as slapd's back-mdb: an entry the subject may not
/// read fails the operation only when the control is critical; else the control is left out).
async fn pre_read_before(
    context: &OperationContext,
    dn: &str,
    controls: &RequestControls,
) -> Result<Option<ResponseControl>, OperationError> {
    let oid = crate::controls::PRE_READ_OID;
    let at = (dn.to_string(), None);
    match read_entry_control_async(context, at, controls.pre_read.clone(), oid).await {
        Err(_) if !controls.pre_read_critical => Ok(None),
        outcome => outcome,
    }
}

/// A critical post-read the subject could not read fails the operation before the change
/// (an entry it may not read now); a non-critical one is answered after the commit or left
/// out. `dn`: the entry before the change (an add has nothing to read yet).
async fn check_post_read_before(
    context: &OperationContext,
    dn: &str,
    controls: &RequestControls,
) -> Result<(), OperationError> {
    if !controls.post_read_critical {
        return Ok(());
    }
    let oid = crate::controls::POST_READ_OID;
    let at = (dn.to_string(), None);
    read_entry_control_async(context, at, controls.post_read.clone(), oid)
        .await
        .map(drop)
}

/// The post-read after the commit: the change is made, so a control the subject may not read
/// is left out, never answered as the operation's failure (a client told an increment failed
/// would send it again).
async fn post_image(
    context: &OperationContext,
    at: (String, Option<lmdir_store::ReadTxn>),
    controls: &RequestControls,
) -> Option<ResponseControl> {
    let oid = crate::controls::POST_READ_OID;
    read_entry_control_async(context, at, controls.post_read.clone(), oid)
        .await
        .ok()
        .flatten()
}

/// Runs a read-entry control on the blocking pool, from the writer's `snapshot` when it took
/// one (else from the store now).
async fn read_entry_control_async(
    context: &OperationContext,
    (dn, snapshot): (String, Option<lmdir_store::ReadTxn>),
    attributes: Option<Vec<String>>,
    oid: &'static str,
) -> Result<Option<ResponseControl>, OperationError> {
    let Some(attributes) = attributes else {
        return Ok(None);
    };
    let server = context.server.clone();
    let identity = context.session.identity.clone();
    tokio::task::spawn_blocking(move || {
        let database = database_of(&server).expect("database present");
        let reader = (&identity, snapshot);
        match read_entry_control(database, reader, &dn, &attributes, oid) {
            Ok(control) => Ok(Some(control)),
            // After the update (post-read): an entry gone since (or out of the subject's
            // sight) has nothing to return, and the update's own answer stands.
            Err(error)
                if error.code == code::NO_SUCH_OBJECT && oid == crate::controls::POST_READ_OID =>
            {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    })
    .await
    .map_err(internal)?
}

/// description, values per attribute and descriptions per request bounded
/// (adminLimitExceeded), and a userPassword
/// given already hashed must carry a cost every later bind can afford (constraintViolation); a
/// userPassword value repeated in the request is attributeOrValueExists before any hashing.
fn check_request_attributes<'a>(
    database: &Database,
    settings: &ServerSettings,
    attributes: impl Iterator<Item = (&'a str, &'a [Vec<u8>], bool)>,
) -> Result<(), OperationError> {
    let mut descriptions = std::collections::HashSet::new();
    // `stores`: the values are added (add, modify add/replace), not only named for deletion.
    for (description, values, stores) in attributes {
        let options = description.matches(';').count();
        if options > settings.attribute_options_per_description_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "{description}: {options} options (limit {})",
                    settings.attribute_options_per_description_max
                ),
            ));
        }
        if values.len() > settings.values_per_attribute_per_request_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "{description}: {} values in one request (limit {})",
                    values.len(),
                    settings.values_per_attribute_per_request_max
                ),
            ));
        }
        descriptions.insert(description.to_ascii_lowercase());
        if descriptions.len() > settings.attribute_descriptions_per_entry_max {
            return Err(OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!(
                    "more than {} attribute descriptions in one request",
                    settings.attribute_descriptions_per_entry_max
                ),
            ));
        }
        let is_password = database.user_password.is_some_and(|password_attr| {
            database
                .schema()
                .parse_description(description)
                .is_ok_and(|parsed| parsed.attr == password_attr)
        });
        if is_password && stores {
            // Decided before cleartext is hashed (two hashes of one password differ by salt):
            // a repeated value is attributeOrValueExists, as for any other attribute.
            let mut seen = std::collections::HashSet::with_capacity(values.len());
            if let Some(index) = values
                .iter()
                .position(|value| !seen.insert(value.as_slice()))
            {
                return Err(OperationError::new(
                    code::ATTRIBUTE_OR_VALUE_EXISTS,
                    format!("{description}: value #{index} provided more than once"),
                ));
            }
            for value in values.iter().filter(|value| password::is_hashed(value)) {
                password::check_cost(value, &password::STORE_COST_LIMITS).map_err(|error| {
                    OperationError::new(
                        code::CONSTRAINT_VIOLATION,
                        format!("userPassword: {error}"),
                    )
                })?;
            }
        }
    }
    Ok(())
}

pub async fn add(
    context: &OperationContext,
    request: LdapAddRequest,
) -> Result<Vec<ResponseControl>, OperationError> {
    if request.attributes.is_empty() {
        // As slapd: an entry needs at least its object classes; an empty list is malformed.
        return Err(OperationError::new(
            code::PROTOCOL_ERROR,
            "an add request must carry the entry's attributes",
        ));
    }
    let request_dn = request.dn.clone();
    let (database, controls) = open_update(context, &request.dn, OperationClass::Update)?;
    check_request_attributes(
        database,
        &context.settings,
        request
            .attributes
            .iter()
            .map(|attribute| (attribute.atype.as_str(), attribute.vals.as_slice(), true)),
    )?;
    let dn = Dn::parse(&request.dn)?;
    let mut entry = Entry::new(dn);
    for attribute in request.attributes {
        entry.add_values(&attribute.atype, attribute.vals);
    }
    crate::password::check_added_password(context, database, &controls, &entry)?;
    // Nothing exists before an add: a pre-read control has nothing to return.
    let submitted = submit_update(context, database, &controls, WriteRequest::Add(entry)).await?;
    let post = post_image(context, (request_dn, submitted.snapshot(true)), &controls).await;
    Ok(post.into_iter().collect())
}

pub async fn delete(
    context: &OperationContext,
    dn: &str,
) -> Result<Vec<ResponseControl>, OperationError> {
    let (database, controls) = open_update(context, dn, OperationClass::Update)?;
    // Read now to decide the request, answered from the writer's snapshot just before it.
    let pre = pre_read_before(context, dn, &controls).await?;
    let submitted = submit_update(
        context,
        database,
        &controls,
        WriteRequest::Delete(dn.to_string()),
    )
    .await?;
    let pre = pre_image(context, &submitted, dn, &controls, pre).await;
    Ok(pre.into_iter().collect())
}

fn modification_of(change: ldap3_proto::proto::LdapModify) -> Modification {
    let op = match change.operation {
        LdapModifyType::Add => ModOp::Add,
        LdapModifyType::Delete => ModOp::Delete,
        LdapModifyType::Replace => ModOp::Replace,
        LdapModifyType::Increment => ModOp::Increment,
    };
    Modification {
        op,
        description: change.modification.atype,
        values: change.modification.vals,
    }
}

pub async fn modify(
    context: &OperationContext,
    request: LdapModifyRequest,
) -> Result<Vec<ResponseControl>, OperationError> {
    let (database, controls) = open_update(context, &request.dn, OperationClass::Modify)?;
    let mut modifications: Vec<Modification> =
        request.changes.into_iter().map(modification_of).collect();
    let password_changes = modifications
        .iter()
        .filter(|change| database.is_user_password(&change.description));
    let changes_password = password_changes.clone().next().is_some();
    let new_passwords: Vec<&[u8]> = password_changes
        .clone()
        .filter(|change| matches!(change.op, ModOp::Add | ModOp::Replace))
        .flat_map(|change| change.values.iter().map(Vec::as_slice))
        .collect();
    // The request's counts and sizes first: the policy's history check verifies each new
    // password, so how many there may be is decided before.
    check_request_attributes(
        database,
        &context.settings,
        modifications.iter().map(|change| {
            let stores = matches!(change.op, ModOp::Add | ModOp::Replace);
            (
                change.description.as_str(),
                change.values.as_slice(),
                stores,
            )
        }),
    )?;
    if !new_passwords.is_empty() {
        let change = ppolicy::PasswordChange {
            by_self: context.session.identity.normalized_dn
                == database.normalize_dn(&request.dn).unwrap_or_default(),
            old_supplied: password_changes
                .filter(|change| change.op == ModOp::Delete)
                .any(|change| !change.values.is_empty()),
            new_passwords,
        };
        check_password_change(context, database, &controls, &request.dn, &change).await?;
    }
    crate::password::resolve_deleted_password(
        context,
        database,
        &controls,
        &request.dn,
        &mut modifications,
    )
    .await?;
    let pre = pre_read_before(context, &request.dn, &controls).await?;
    check_post_read_before(context, &request.dn, &controls).await?;
    let submitted = submit_update(
        context,
        database,
        &controls,
        WriteRequest::Modify(request.dn.clone(), modifications),
    )
    .await?;
    // Queued in a transaction, the password is not changed yet.
    if changes_password && matches!(submitted, Submitted::Committed(_)) {
        crate::password::password_changed(context);
    }
    let pre = pre_image(context, &submitted, &request.dn, &controls, pre).await;
    let post = post_image(context, (request.dn, submitted.snapshot(true)), &controls).await;
    Ok(pre.into_iter().chain(post).collect())
}

pub async fn modify_dn(
    context: &OperationContext,
    request: LdapModifyDNRequest,
) -> Result<Vec<ResponseControl>, OperationError> {
    let (database, controls) = open_update(context, &request.dn, OperationClass::Update)?;
    let old_dn = request.dn.clone();
    let pre = pre_read_before(context, &old_dn, &controls).await?;
    check_post_read_before(context, &old_dn, &controls).await?;
    let new_dn = {
        let parent = match &request.new_superior {
            Some(superior) => superior.clone(),
            None => Dn::parse(&request.dn)?
                .parent()
                .map(|parent| parent.to_string())
                .unwrap_or_default(),
        };
        if parent.is_empty() {
            request.newrdn.clone()
        } else {
            format!("{},{parent}", request.newrdn)
        }
    };
    let submitted = submit_update(
        context,
        database,
        &controls,
        WriteRequest::ModifyDn {
            dn: request.dn,
            new_rdn: request.newrdn,
            delete_old_rdn: request.deleteoldrdn,
            new_superior: request.new_superior,
        },
    )
    .await?;
    let pre = pre_image(context, &submitted, &old_dn, &controls, pre).await;
    let post = post_image(context, (new_dn, submitted.snapshot(true)), &controls).await;
    Ok(pre.into_iter().chain(post).collect())
}
