//! Dynamic groups (`[[dynlist]]`, OpenLDAP's dynlist overlay with `dynlist-attrset`): when an
//! entry of a rule's object class is read with its member attribute selected, the entries its
//! URL values (`ldap:///base??scope?filter`) find are listed as that attribute's values, after
//! any stored ones. Each URL is searched in the reader's own read txn with the reader's rights:
//! an entry the reader may not search and read, or that the filter (with the items the reader
//! may not search Undefined) does not match, is not listed. Bounded: at most
//! `DYNLIST_EXAMINED_MAX` candidates per entry read (adminLimitExceeded beyond) and
//! `DYNLIST_URLS_MAX` URLs. In-chain walks follow dynamic members too (`in_chain_links`).

use crate::result::{code, OperationError};
use lmdir_access::acl::{AccessPolicy, Subject};
use lmdir_schema::{AttrId, Filter, Schema};
use lmdir_store::{EntryRef, ReadTxn, Scope, SearchSpec};
use std::collections::HashMap;

/// Most candidate entries the URLs of one dynamic group examine when it is read.
const DYNLIST_EXAMINED_MAX: usize = 100_000;
/// Most URL values of one dynamic group evaluated.
const DYNLIST_URLS_MAX: usize = 64;
/// Nesting depth a URL's filter may have.
const URL_FILTER_DEPTH_MAX: usize = 32;

/// What dynamic groups are worked out with: the database's schema, access policy and rules
/// (`Database::dynlist_view`).
pub(crate) struct DynlistView {
    pub schema: std::sync::Arc<Schema>,
    /// The access policy the read started with (a reload may replace the live one).
    pub policy: std::sync::Arc<AccessPolicy>,
    /// The dynamic groups of the rules the read started with (`policy`'s own).
    pub groups: std::sync::Arc<Vec<DynamicGroup>>,
}

/// One `[[dynlist]]` rule resolved against the schema.
#[derive(Debug)]
pub(crate) struct DynamicGroup {
    /// The object class, normalized as objectClass values are (lowercased name).
    class: Vec<u8>,
    url_attr: AttrId,
    pub(crate) member_attr: AttrId,
    /// Where an entry lists the dynamic groups that find it (slapd's `+memberOf`).
    pub(crate) member_of_attr: Option<AttrId>,
}

/// Resolves the rules; an unknown class or attribute is an error naming it.
pub(crate) fn compile(
    rules: &[lmdir_config::DynlistRule],
    schema: &Schema,
) -> Result<Vec<DynamicGroup>, String> {
    rules
        .iter()
        .map(|rule| {
            let class = schema
                .normalize_value(
                    schema.object_class_attribute(),
                    rule.object_class.as_bytes(),
                )
                .ok()
                .filter(|_| schema.object_class(&rule.object_class).is_some())
                .ok_or_else(|| {
                    format!("[[dynlist]]: unknown object class {:?}", rule.object_class)
                })?;
            let attribute = |name: &str| {
                schema
                    .attribute(name)
                    .ok_or_else(|| format!("[[dynlist]]: unknown attribute {name:?}"))
            };
            let member_of_attr = match rule.member_of_attribute.as_str() {
                "" => None,
                name => Some(attribute(name)?),
            };
            Ok(DynamicGroup {
                class,
                url_attr: attribute(&rule.url_attribute)?,
                member_attr: attribute(&rule.member_attribute)?,
                member_of_attr,
            })
        })
        .collect()
}

/// Links the dynamic groups make for in-chain walks on `attr`, as `subject` sees them: for a
/// rule's member attribute, a member's normalized DN → the dynamic groups listing it; for
/// memberOf (rules listing member or uniqueMember), a dynamic group's normalized DN → its
/// members. Empty when no rule applies. Every dynamic group the subject may search and read
/// is evaluated once (each bounded as on a read).
pub(crate) fn in_chain_links(
    database: &DynlistView,
    read: &ReadTxn,
    subject: &Subject<'_>,
    attr: AttrId,
) -> Result<HashMap<Vec<u8>, Vec<lmdir_store::EntryId>>, OperationError> {
    let schema = &*database.schema;
    let member_of = schema.attribute("memberOf") == Some(attr);
    let group_attributes = [schema.attribute("member"), schema.attribute("uniqueMember")];
    let mut links: HashMap<Vec<u8>, Vec<lmdir_store::EntryId>> = HashMap::new();
    for rule in database.groups.iter() {
        let forward = member_of && group_attributes.contains(&Some(rule.member_attr));
        if rule.member_attr != attr && !forward {
            continue;
        }
        for (group, group_dn) in dynamic_groups(database, read, subject, rule)? {
            let Some(entry) = read.entry(group)? else {
                continue;
            };
            for (member, member_dn) in members(database, read, subject, rule, &entry)? {
                if forward {
                    let key = schema.normalize_value(attr, group_dn.as_bytes())?;
                    links.entry(key).or_default().push(member);
                } else {
                    let key = schema.normalize_value(attr, &member_dn)?;
                    links.entry(key).or_default().push(group);
                }
            }
        }
    }
    Ok(links)
}

/// For the rules listing dynamic groups in an attribute (`member_of_attr`): each entry some
/// dynamic group finds, as `subject` sees them → (that attribute, the group's DN) pairs.
pub(crate) fn member_of(
    database: &DynlistView,
    read: &ReadTxn,
    subject: &Subject<'_>,
) -> Result<HashMap<lmdir_store::EntryId, Vec<(AttrId, String)>>, OperationError> {
    let mut listed: HashMap<lmdir_store::EntryId, Vec<(AttrId, String)>> = HashMap::new();
    for rule in database.groups.iter() {
        let Some(member_of_attr) = rule.member_of_attr else {
            continue;
        };
        for (group, group_dn) in dynamic_groups(database, read, subject, rule)? {
            let Some(entry) = read.entry(group)? else {
                continue;
            };
            for (member, _) in members(database, read, subject, rule, &entry)? {
                listed
                    .entry(member)
                    .or_default()
                    .push((member_of_attr, group_dn.clone()));
            }
        }
    }
    Ok(listed)
}

/// The entries of a rule's class the subject may search and read, with their DNs.
fn dynamic_groups(
    database: &DynlistView,
    read: &ReadTxn,
    subject: &Subject<'_>,
    rule: &DynamicGroup,
) -> Result<Vec<(lmdir_store::EntryId, String)>, OperationError> {
    let schema = &*database.schema;
    let filter = schema.prepare_filter(&Filter::Equality {
        description: "objectClass".to_string(),
        value: rule.class.clone(),
    });
    let mut groups = Vec::new();
    for root in read.root_ids()? {
        let spec = SearchSpec {
            base: read.normalized_dn_of(root)?,
            scope: Scope::Sub,
            filter: filter.clone(),
            size_limit: 0,
            lookthrough_limit: DYNLIST_EXAMINED_MAX,
        };
        for result in read.search(&spec)? {
            let (id, group) = result?;
            let normalized = read.normalized_dn_of(id)?;
            let access = database.policy.for_entry(subject, &normalized, &group);
            if subject.is_rootdn || (access.can_search_entry() && access.can_read_entry()) {
                groups.push((id, read.dn_of(id)?));
            }
        }
    }
    Ok(groups)
}

/// The rule `entry` falls under (its objectClass values hold the rule's class).
pub(crate) fn rule_of<'r>(
    rules: &'r [DynamicGroup],
    schema: &Schema,
    entry: &EntryRef<'_>,
) -> Option<&'r DynamicGroup> {
    if rules.is_empty() {
        return None;
    }
    let classes = entry.values_of(schema.object_class_attribute());
    rules.iter().find(|rule| {
        classes
            .iter()
            .any(|(_, normalized)| normalized.as_ref() == rule.class.as_slice())
    })
}

/// The entries `entry`'s URLs find, as `subject` may see them, in the order found: each ID
/// with its DN.
pub(crate) fn members(
    database: &DynlistView,
    read: &ReadTxn,
    subject: &Subject<'_>,
    rule: &DynamicGroup,
    entry: &EntryRef<'_>,
) -> Result<Vec<(lmdir_store::EntryId, Vec<u8>)>, OperationError> {
    let mut found = Vec::new();
    let mut examined = 0usize;
    for (url, _) in entry.values_of(rule.url_attr).iter().take(DYNLIST_URLS_MAX) {
        let Some(query) = std::str::from_utf8(url).ok().and_then(parse_url) else {
            continue;
        };
        search_url(database, read, subject, &query, &mut examined, &mut found)?;
    }
    Ok(found)
}

/// One URL's search, its matches the subject may see appended to `found`.
fn search_url(
    database: &DynlistView,
    read: &ReadTxn,
    subject: &Subject<'_>,
    query: &UrlQuery,
    examined: &mut usize,
    found: &mut Vec<(lmdir_store::EntryId, Vec<u8>)>,
) -> Result<(), OperationError> {
    let schema = &*database.schema;
    let (Ok(base), Ok(filter)) = (
        schema.normalize_dn_str(&query.base),
        Filter::parse(&query.filter, URL_FILTER_DEPTH_MAX),
    ) else {
        return Ok(());
    };
    let prepared = schema.prepare_filter(&filter);
    let subject_access = database.policy.for_subject_within(subject, &base);
    let spec = SearchSpec {
        base: base.clone(),
        scope: query.scope,
        filter: subject_access.candidate_filter(&prepared).into_owned(),
        size_limit: 0,
        lookthrough_limit: DYNLIST_EXAMINED_MAX.saturating_sub(*examined).max(1),
    };
    let cursor = match read.search(&spec) {
        Ok(cursor) => cursor,
        // A base that is not there lists nobody.
        Err(error) if error.code == lmdir_schema::ResultCode::NoSuchObject => return Ok(()),
        Err(error) => return Err(error.into()),
    };
    for result in cursor {
        let (id, member) = result.map_err(|error| {
            OperationError::new(
                code::ADMIN_LIMIT_EXCEEDED,
                format!("dynamic group members: {}", error.message),
            )
        })?;
        *examined += 1;
        if subject.is_rootdn {
            found.push((id, member.dn()?.into_bytes()));
            continue;
        }
        let normalized = read.normalized_dn_of(id)?;
        let access = database.policy.for_entry(subject, &normalized, &member);
        if access.can_search_entry()
            && access.can_read_entry()
            && access
                .restrict_filter(&prepared)
                .evaluate(&member)
                .is_true()
        {
            found.push((id, member.dn()?.into_bytes()));
        }
    }
    Ok(())
}

/// What a member URL asks for.
#[derive(Debug, PartialEq, Eq)]
struct UrlQuery {
    base: String,
    scope: Scope,
    filter: String,
}

/// `ldap:///base??scope?filter` (RFC 4516; the attributes part is not used, the scope is base
/// and the filter `(objectClass=*)` when left out). A URL naming a host is not followed.
fn parse_url(url: &str) -> Option<UrlQuery> {
    let rest = url.trim().strip_prefix("ldap:///").or_else(|| {
        url.trim()
            .get(..8)
            .filter(|prefix| prefix.eq_ignore_ascii_case("ldap:///"))
            .map(|_| &url.trim()[8..])
    })?;
    let parts: Vec<&str> = rest.split('?').collect();
    let scope = match parts
        .get(2)
        .copied()
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "" | "base" => Scope::Base,
        "one" => Scope::One,
        "sub" => Scope::Sub,
        _ => return None,
    };
    let filter = percent_decoded(parts.get(3).copied().unwrap_or_default());
    Some(UrlQuery {
        base: percent_decoded(parts.first().copied().unwrap_or_default()),
        scope,
        filter: if filter.is_empty() {
            "(objectClass=*)".to_string()
        } else {
            filter
        },
    })
}

/// `%2C` → `,` (RFC 4516 escapes); a bad escape leaves the text as written.
fn percent_decoded(text: &str) -> String {
    lmdir_config::percent_decoded(text).unwrap_or_else(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_urls() {
        assert_eq!(
            parse_url("ldap:///ou=People,dc=x??sub?(departmentNumber=7)"),
            Some(UrlQuery {
                base: "ou=People,dc=x".into(),
                scope: Scope::Sub,
                filter: "(departmentNumber=7)".into()
            })
        );
        assert_eq!(
            parse_url("LDAP:///dc=x??one?(cn=a%20b)"),
            Some(UrlQuery {
                base: "dc=x".into(),
                scope: Scope::One,
                filter: "(cn=a b)".into()
            })
        );
        assert_eq!(
            parse_url("ldap:///uid=a,dc=x"),
            Some(UrlQuery {
                base: "uid=a,dc=x".into(),
                scope: Scope::Base,
                filter: "(objectClass=*)".into()
            })
        );
        assert_eq!(parse_url("ldap://elsewhere/dc=x??sub"), None);
        assert_eq!(parse_url("ldap:///dc=x??children"), None);
    }
}
