//! Searches under `cn=accesslog`: the audit trail's records (`crate::accesslog`), read from
//! the store one at a time in the search's read txn (`built.rs` walks them) and shown as
//! OpenLDAP's accesslog shows them: the container `cn=accesslog` (auditContainer) and one
//! entry per write, `reqStart=<time>,cn=accesslog`, oldest first. Access as for cn=Monitor:
//! the rootdn, or whom an `[[access]]` rule naming cn=accesslog lets read ("all entries"
//! covers the directory only).

use super::built::{TreeItem, TreeItems};
use crate::result::OperationError;
use lmdir_schema::{Dn, Entry};
use lmdir_store::ReadTxn;

/// The container, then the records from key `from_key` on (None: from the first), each
/// decoded only when the walk reaches it.
pub(super) fn log_items(
    read: &ReadTxn,
    from_key: Option<u64>,
) -> Result<TreeItems<'_>, OperationError> {
    let container_dn = crate::accesslog::ACCESSLOG_DN.to_string();
    let mut container = Entry::new(Dn::parse(&container_dn)?);
    container.add_values("objectClass", [b"auditContainer".to_vec()]);
    container.add_values("cn", [b"accesslog".to_vec()]);
    let container = TreeItem {
        key: None,
        shown_dn: container_dn,
        entry: container,
    };
    let records = read
        .audit_records_from(from_key.unwrap_or(0))?
        .map(|record| {
            let (key, record) = record?;
            record_item(key, record)
        });
    Ok(Box::new(std::iter::once(Ok(container)).chain(records)))
}

/// A record as an entry below the container, named by its start time.
fn record_item(
    key: u64,
    record: lmdir_store::accesslog::AuditRecord,
) -> Result<TreeItem, OperationError> {
    let dn = format!(
        "reqStart={},{}",
        crate::accesslog::generalized_time(key),
        crate::accesslog::ACCESSLOG_DN
    );
    let mut entry = Entry::new(Dn::parse(&dn)?);
    for (name, values) in record {
        entry.add_values(&name, values);
    }
    Ok(TreeItem {
        key: Some(key),
        shown_dn: dn,
        entry,
    })
}
