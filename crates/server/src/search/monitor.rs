//! Searches under `cn=Monitor`: the live tree of `crate::monitor::monitor_tree`, built per
//! search (it is a few dozen entries plus one per open connection, so at most
//! `connections_max` + ~40). Access is the policy's, as for every entry: the rootdn reads it
//! all; anyone else only what an `[[access]]` rule naming `cn=Monitor` grants, since a rule
//! for "all entries" covers the directory, not the monitor (`lmdir_access::acl::MONITOR_NDN`).
//! An entry the subject may not read is left out; a base it may not read answers noSuchObject
//! as a missing one does.

use super::scope_of;
use crate::ber::EntryWriter;
use crate::context::{internal, no_such_object};
use crate::context::{Database, OperationContext};
use crate::entry_read::Selection;
use crate::monitor::{monitor_tree, MonitorEntry};
use crate::request::SearchRequest;
use crate::result::OperationError;
use crate::selection::AttributeSelection;
use bytes::BytesMut;
use lmdir_schema::{Dn, Filter, OwnedEntryView, PreparedFilter};
use lmdir_store::Scope;

/// The search's answer when its base lies in the monitor tree, else None.
pub(super) fn monitor_search(
    context: &OperationContext,
    database: &Database,
    request: &SearchRequest,
    (selection, matched_values): (&AttributeSelection, Option<&[Filter]>),
    normalized_base: Option<&str>,
    filter: &mut Option<Result<PreparedFilter, OperationError>>,
) -> Option<Result<(BytesMut, u64), OperationError>> {
    let base = normalized_base?;
    if !lmdir_schema::normalized_dn_is_within(base, lmdir_access::acl::MONITOR_NDN) {
        return None;
    }
    if let Err(refused) = may_read_below(context, database, base, request) {
        return Some(Err(refused));
    }
    let tree = monitor_tree(&context.server.monitor, &context.server.monitor_state());
    let entries = tree
        .iter()
        .map(|monitor_entry| Ok((monitor_entry.dn.clone(), owned_entry(monitor_entry)?)))
        .collect::<Result<Vec<_>, OperationError>>();
    Some(entries.and_then(|entries| {
        answer(
            context,
            database,
            request,
            (selection, matched_values),
            (base, &entries),
            filter.take(),
        )
    }))
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

/// The entries of a tree the server builds per search (cn=Monitor, cn=accesslog), each with
/// its DN as shown, that are in the search's scope, disclosed to its subject and match its
/// filter; noSuchObject when the base is not among them (or not disclosed).
pub(super) fn answer(
    context: &OperationContext,
    database: &Database,
    request: &SearchRequest,
    (selection, matched_values): (&AttributeSelection, Option<&[Filter]>),
    (base, tree): (&str, &[(String, lmdir_schema::Entry)]),
    filter: Option<Result<PreparedFilter, OperationError>>,
) -> Result<(BytesMut, u64), OperationError> {
    let settings = &context.server.settings();
    let scope = scope_of(&request.scope)?;
    let prepared = super::prepared_filter(database, settings, request, filter)?;
    let read = database.store.read().map_err(internal)?;
    let groups = database.groups(&read);
    let identity = &context.session.identity;
    let subject = database.subject(identity, &groups);
    let resolved = Selection::resolve(&database.schema(), selection)
        .with_matched_values(&database.schema(), matched_values);
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    let (mut base_seen, mut sent) = (false, 0u64);
    for (shown_dn, entry) in tree {
        let normalized = database.schema().normalize_dn(&entry.dn)?;
        let view = OwnedEntryView::new(&database.schema(), entry)?;
        let policy = database.policy();
        let access = policy.for_entry(&subject, &normalized, &view);
        if !identity.is_rootdn && !access.can_read_entry() {
            continue;
        }
        base_seen |= normalized == base;
        if !in_scope(&normalized, base, scope)
            || !access.restrict_filter(&prepared).evaluate(&view).is_true()
        {
            continue;
        }
        let mut writer = EntryWriter::begin(&mut buffer, context.message_id, shown_dn.as_bytes());
        for attribute in &entry.attributes {
            let Some(attr) = database.schema().attribute(&attribute.description) else {
                continue;
            };
            let readable = identity.is_rootdn || access.can_read_attribute(attr);
            if !readable || !resolved.selects(&database.schema(), attr, &[]) {
                continue;
            }
            resolved.write_built_attribute(
                &database.schema(),
                &mut writer,
                (attr, &attribute.description),
                &attribute.values,
                request.typesonly,
            );
        }
        writer.finish(&[]);
        sent += 1;
    }
    if !base_seen {
        return Err(no_such_object(&request.base));
    }
    Ok((buffer, sent))
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
