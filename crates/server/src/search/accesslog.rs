//! Searches under `cn=accesslog`: the audit trail's records (`crate::accesslog`), read from
//! the store in one read txn and answered as OpenLDAP's accesslog shows them: the container
//! `cn=accesslog` (auditContainer) and one entry per write, `reqStart=<time>,cn=accesslog`.
//! Access as for cn=Monitor: the rootdn, or whom an `[[access]]` rule naming cn=accesslog lets
//! read ("all entries" covers the directory only).

use super::SearchRequest;
use crate::context::{internal, Database, OperationContext};
use crate::result::OperationError;
use crate::selection::AttributeSelection;
use bytes::BytesMut;
use lmdir_schema::{Dn, Entry, Filter, PreparedFilter};

/// The search's answer when its base lies in cn=accesslog and the log is on, else None.
pub(super) fn accesslog_search(
    context: &OperationContext,
    database: &Database,
    request: &SearchRequest,
    requested: (&AttributeSelection, Option<&[Filter]>),
    normalized_base: Option<&str>,
    filter: &mut Option<Result<PreparedFilter, OperationError>>,
) -> Option<Result<(BytesMut, u64), OperationError>> {
    let base = normalized_base?;
    if !lmdir_schema::normalized_dn_is_within(base, lmdir_access::acl::ACCESSLOG_NDN)
        || !database.accesslog().enabled
    {
        return None;
    }
    if let Err(refused) = super::monitor::may_read_below(context, database, base, request) {
        return Some(Err(refused));
    }
    let tree = match log_tree(database) {
        Ok(tree) => tree,
        Err(error) => return Some(Err(error)),
    };
    Some(super::monitor::answer(
        context,
        database,
        request,
        requested,
        (base, &tree),
        filter.take(),
    ))
}

/// The container and every record, oldest first.
fn log_tree(database: &Database) -> Result<Vec<(String, Entry)>, OperationError> {
    let read = database.store.read().map_err(internal)?;
    let records = read.audit_records()?;
    let container_dn = crate::accesslog::ACCESSLOG_DN.to_string();
    let mut container = Entry::new(Dn::parse(&container_dn)?);
    container.add_values("objectClass", [b"auditContainer".to_vec()]);
    container.add_values("cn", [b"accesslog".to_vec()]);
    let mut tree = vec![(container_dn.clone(), container)];
    for (key, record) in records {
        let dn = format!(
            "reqStart={},{container_dn}",
            crate::accesslog::generalized_time(key)
        );
        let mut entry = Entry::new(Dn::parse(&dn)?);
        for (name, values) in record {
            entry.add_values(&name, values);
        }
        tree.push((dn, entry));
    }
    Ok(tree)
}
