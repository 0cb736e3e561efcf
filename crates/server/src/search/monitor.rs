//! Searches under `cn=Monitor`: the live tree of `crate::monitor::monitor_tree`, built per
//! search (it is a few dozen entries plus one per open connection, so at most
//! `connections_max` + ~40). Access is the policy's, as for every entry: the rootdn reads it
//! all; anyone else only what an `[[access]]` rule naming `cn=Monitor` grants, since a rule
//! for "all entries" covers the directory, not the monitor (`lmdir_access::acl::MONITOR_NDN`).
//! An entry the subject may not read is left out; a base it may not read answers noSuchObject
//! as a missing one does.

use super::built::TreeItem;
use crate::context::no_such_object;
use crate::context::{Database, OperationContext, ServerContext};
use crate::monitor::{monitor_tree, MonitorEntry};
use crate::request::SearchRequest;
use crate::result::OperationError;
use lmdir_schema::Dn;
use lmdir_store::Scope;

/// The monitor's entries as a search shows them (built anew per search).
pub(super) fn monitor_items(server: &ServerContext) -> Result<Vec<TreeItem>, OperationError> {
    monitor_tree(&server.monitor, &server.monitor_state())
        .iter()
        .map(|monitor_entry| {
            Ok(TreeItem {
                key: None,
                shown_dn: monitor_entry.dn.clone(),
                entry: owned_entry(monitor_entry)?,
            })
        })
        .collect()
}

/// Ok when some entry at or below `base` (in a tree the server builds per search) may be read
/// by the search's subject; else the answer to a base that is not there, given before the
/// tree is built: building it costs what the tree holds (the access log: every record).
pub(super) fn may_read_below(
    context: &OperationContext,
    database: &Database,
    base: &str,
    request: &SearchRequest,
) -> Result<(), OperationError> {
    if database.may_read_below(&context.session.identity, base)? {
        Ok(())
    } else {
        Err(no_such_object(&request.base))
    }
}

fn owned_entry(monitor_entry: &MonitorEntry) -> Result<lmdir_schema::Entry, OperationError> {
    let mut entry = lmdir_schema::Entry::new(Dn::parse(&monitor_entry.dn)?);
    for (description, values) in &monitor_entry.attributes {
        entry.add_values(description, values.iter().cloned());
    }
    Ok(entry)
}

/// Whether `dn` (normalized) is in `scope` of `base` (normalized).
pub(super) fn in_scope(dn: &str, base: &str, scope: Scope) -> bool {
    match scope {
        Scope::Base => dn == base,
        Scope::Sub => lmdir_schema::normalized_dn_is_within(dn, base),
        // The parent after the first unescaped comma: `cn=a\,b,ou=p` is a child of `ou=p`.
        Scope::One => lmdir_schema::normalized_dn_parent(dn) == Some(base),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_level_scope_splits_at_the_first_unescaped_comma() {
        let base = "ou=p,dc=example";
        assert!(in_scope("cn=a,ou=p,dc=example", base, Scope::One));
        // The comma inside the RDN value is escaped: still a child of the base.
        assert!(in_scope("cn=a\\,b,ou=p,dc=example", base, Scope::One));
        // An RDN whose value ends in "\,ou=p" lies beside the base, not below it.
        assert!(!in_scope("cn=x\\,ou=p,dc=example", base, Scope::One));
        assert!(!in_scope("cn=x,cn=a,ou=p,dc=example", base, Scope::One));
        assert!(in_scope("cn=x,cn=a,ou=p,dc=example", base, Scope::Sub));
        assert!(!in_scope("cn=x\\,ou=p,dc=example", base, Scope::Sub));
    }
}
