//! The cn=Subschema entry (RFC 4512 §4.2), built from the loaded schema per search.

use crate::ber::EntryWriter;
use crate::context::{Database, OperationContext};
use crate::entry_read::Selection;
use crate::request::SearchRequest;
use crate::result::OperationError;
use crate::selection::AttributeSelection;
use bytes::BytesMut;
use ldap3_proto::proto::LdapSearchScope;
use lmdir_schema::{Filter, OwnedEntryView, PreparedFilter};

pub(super) fn subschema_search(
    context: &OperationContext,
    database: &Database,
    request: &SearchRequest,
    (selection, matched_values): (&AttributeSelection, Option<&[Filter]>),
    normalized_base: Option<&str>,
    filter: &mut Option<Result<PreparedFilter, OperationError>>,
) -> Option<Result<(BytesMut, u64), OperationError>> {
    if normalized_base? != "cn=subschema" {
        return None;
    }
    if request.scope != LdapSearchScope::Base {
        return Some(Ok((BytesMut::new(), 0)));
    }
    // One schema for the whole answer (a reload may extend the live one meanwhile).
    let schema = database.schema();
    let mut entry = schema.subschema_entry();
    for attribute in &mut entry.attributes {
        if attribute.description == "objectClasses"
            && schema
                .object_class(crate::rootdse::ROOT_DSE_OBJECT_CLASS)
                .is_none()
        {
            let definition = crate::rootdse::ROOT_DSE_OBJECT_CLASS_DEFINITION;
            attribute.values.push(definition.as_bytes().to_vec());
        }
    }
    // The schema is loaded when the server starts and extended by reloads: admin tools refresh
    // their cached copy when modifyTimestamp is newer than what they hold.
    let started = context.server.monitor.started();
    let extended = *database
        .schema_extended_at
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for (name, time) in [
        ("createTimestamp", started),
        ("modifyTimestamp", extended.unwrap_or(started)),
    ] {
        entry.attributes.push(lmdir_schema::Attribute {
            description: name.to_string(),
            values: vec![lmdir_store::timestamp_value(time)],
        });
    }
    let view = match OwnedEntryView::new(&schema, &entry) {
        Ok(view) => view,
        Err(error) => return Some(Err(error.into())),
    };
    let settings = &context.settings;
    let filter = match super::prepared_filter(database, settings, request, filter.take()) {
        Ok(filter) => filter,
        Err(error) => return Some(Err(error)),
    };
    if !filter.evaluate(&view).is_true() {
        return Some(Ok((BytesMut::new(), 0)));
    }
    let resolved =
        Selection::resolve(&schema, selection).with_matched_values(&schema, matched_values);
    let mut buffer = BytesMut::with_capacity(256 * 1024);
    let mut writer = EntryWriter::begin(&mut buffer, context.message_id, b"cn=Subschema");
    for attribute in &entry.attributes {
        let Some(attr) = schema.attribute(&attribute.description) else {
            continue;
        };
        // The subschema's schema attributes are operational; objectClass and cn are user ones.
        if !resolved.selects(&schema, attr, &[]) {
            continue;
        }
        resolved.write_built_attribute(
            &schema,
            &mut writer,
            (attr, &attribute.description),
            &attribute.values,
            request.typesonly,
        );
    }
    writer.finish(&[]);
    Some(Ok((buffer, 1)))
}
