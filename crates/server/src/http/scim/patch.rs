//! PATCH (RFC 7644 §3.5.2) and `/Bulk` (§3.7). A PATCH is applied to the resource's JSON and
//! the difference written as one LDAP modify (a rename first when the naming value changes);
//! a Group's `members` operations become LDAP adds and deletes of `member` values instead
//! (permissive modify: adding a member twice or removing an absent one is no error), so a
//! group of any size is patched without reading its members.

use super::resource::{self, Kind};
use super::{
    find, finish, member_dns, read_back, to_resource, version_assertion, write_changes, Answer,
    Context, ScimError, Selection, Write,
};
use hyper::StatusCode;
use ldap3_proto::proto::LdapModifyType;
use lmdir_schema::Filter;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const BULK_RESPONSE_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:BulkResponse";
/// Most operations in one PATCH request.
const PATCH_OPERATIONS_MAX: usize = 1000;
/// Most values of one attribute a PATCH operation carries, and an attribute holds after it
/// (`members` excepted: they are LDAP adds and deletes, bounded by the resolutions a request
/// may make).
const VALUES_PER_ATTRIBUTE_MAX: usize = 1000;

fn too_many_values(key: &str) -> ScimError {
    ScimError::bad(
        "tooMany",
        format!("more than {VALUES_PER_ATTRIBUTE_MAX} values of '{key}'"),
    )
}

/// 400 tooMany when an array anywhere in `value` is longer than `VALUES_PER_ATTRIBUTE_MAX`.
fn check_values(key: &str, value: &Value) -> Result<(), ScimError> {
    match value {
        Value::Array(items) if items.len() > VALUES_PER_ATTRIBUTE_MAX => Err(too_many_values(key)),
        Value::Array(items) => items.iter().try_for_each(|item| check_values(key, item)),
        Value::Object(object) => object
            .iter()
            .try_for_each(|(key, item)| check_values(key, item)),
        _ => Ok(()),
    }
}

struct Operation {
    op: String,
    path: Option<String>,
    value: Option<Value>,
}

fn operations(body: &Map<String, Value>) -> Result<Vec<Operation>, ScimError> {
    let list = resource::get_key(body, "Operations")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ScimError::bad(
                "invalidSyntax",
                format!("a PATCH needs Operations ({PATCH_SCHEMA})"),
            )
        })?;
    if list.len() > PATCH_OPERATIONS_MAX {
        return Err(ScimError::bad(
            "tooMany",
            format!("more than {PATCH_OPERATIONS_MAX} operations"),
        ));
    }
    list.iter()
        .map(|item| {
            let op = item
                .get("op")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase)
                .filter(|op| ["add", "remove", "replace"].contains(&op.as_str()))
                .ok_or_else(|| {
                    ScimError::bad("invalidSyntax", "op must be add, remove or replace")
                })?;
            let path = item
                .get("path")
                .and_then(Value::as_str)
                .map(|path| resource::strip_schema(path).to_string())
                .filter(|path| !path.is_empty());
            if op == "remove" && path.is_none() {
                return Err(ScimError::bad("noTarget", "remove needs a path"));
            }
            Ok(Operation {
                op,
                path,
                value: item.get("value").cloned(),
            })
        })
        .collect()
}

fn is_members(path: &str) -> bool {
    path.get(..7)
        .is_some_and(|head| head.eq_ignore_ascii_case("members"))
}

pub async fn patch(
    context: &Context<'_>,
    kind: Kind,
    id: &str,
    body: &Map<String, Value>,
    if_match: Option<&str>,
) -> Result<Answer, ScimError> {
    let mut operations = operations(body)?;
    let mut member_changes = Vec::new();
    if kind == Kind::Group {
        split_member_operations(&mut operations, &mut member_changes);
    }
    for operation in &operations {
        if let Some(value) = &operation.value {
            check_values(operation.path.as_deref().unwrap_or("value"), value)?;
        }
    }
    let entry = find(context, kind, id)
        .await?
        .ok_or_else(ScimError::not_found)?;
    super::check_version(&entry, if_match)?;
    super::check_writable(context, kind, &entry).await?;
    let without_references = Selection::without_references();
    let mut cache = HashMap::new();
    let before = to_resource(context, kind, &entry, &without_references, &mut cache);
    let before = before.await?.as_object().cloned().unwrap_or_default();
    let after = apply_all(before.clone(), operations).await?;
    let write = Write {
        kind,
        entry: &entry,
        before: &before,
        after: &after,
        members: None,
        by_value: true,
    };
    let dn = match write_patch(context, &write, &member_changes, if_match, false).await {
        // A removal left the group without members: again, with the empty DN added.
        Err(error)
            if error.ldap_code == Some(65)
                && member_changes.iter().any(|(op, ..)| op == "remove") =>
        {
            write_patch(context, &write, &member_changes, if_match, true).await?
        }
        written => written?,
    };
    read_back(context, kind, &dn).await
}

type MemberChange = (String, String, Option<Value>);

/// The PATCH's steps as one LDAP transaction: all of them are kept or none (before, a rename
/// stayed when a member id after it was unknown), If-Match asserted on the first.
async fn write_patch(
    context: &Context<'_>,
    write: &Write<'_>,
    member_changes: &[MemberChange],
    if_match: Option<&str>,
    none_left: bool,
) -> Result<String, ScimError> {
    context.client.begin().await?;
    let written = async {
        let mut guard = version_assertion(if_match);
        let dn = write_changes(context, write, &mut guard).await?;
        for (op, path, value) in member_changes {
            let change = MemberStep {
                op,
                path,
                value: value.as_ref(),
                none_left,
            };
            apply_members(context, &dn, &change, &mut guard).await?;
        }
        Ok(dn)
    }
    .await;
    finish(context, written).await
}

/// The operations applied in order to `resource`, off the reactor (each is bounded, but a
/// thousand filtered ones over a thousand values take a while).
async fn apply_all(
    mut resource: Map<String, Value>,
    operations: Vec<Operation>,
) -> Result<Map<String, Value>, ScimError> {
    tokio::task::spawn_blocking(move || {
        for operation in &operations {
            apply(&mut resource, operation)?;
        }
        Ok(resource)
    })
    .await
    .map_err(|_| ScimError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "PATCH failed"))?
}

/// Moves `members` operations (and `members` inside a path-less value) out of `operations`.
fn split_member_operations(operations: &mut Vec<Operation>, members: &mut Vec<MemberChange>) {
    let mut kept = Vec::new();
    for mut operation in operations.drain(..) {
        match &operation.path {
            Some(path) if is_members(path) => {
                members.push((operation.op.clone(), path.clone(), operation.value.take()));
            }
            None => {
                if let Some(Value::Object(object)) = &mut operation.value {
                    let key = object
                        .keys()
                        .find(|key| key.eq_ignore_ascii_case("members"))
                        .cloned();
                    if let Some(value) = key.and_then(|key| object.remove(&key)) {
                        members.push((operation.op.clone(), "members".to_string(), Some(value)));
                    }
                }
                kept.push(operation);
            }
            Some(_) => kept.push(operation),
        }
    }
    *operations = kept;
}

/// One `members` operation of a PATCH.
struct MemberStep<'a> {
    op: &'a str,
    path: &'a str,
    value: Option<&'a Value>,
    /// Removals may leave the group without members: the empty DN is added with them.
    none_left: bool,
}

/// Queues a `members` operation: LDAP adds and deletes of `member` values.
async fn apply_members(
    context: &Context<'_>,
    dn: &str,
    step: &MemberStep<'_>,
    guard: &mut Option<Filter>,
) -> Result<(), ScimError> {
    let (op, path, value) = (step.op, step.path, step.value);
    let Some(member) = context.scim.mapping.ldap(Kind::Group, "members") else {
        return Ok(());
    };
    let filtered = path.contains('[');
    let ids = if filtered {
        let inner = path
            .split_once('[')
            .and_then(|(_, rest)| rest.rsplit_once(']'))
            .map(|(inner, _)| inner)
            .unwrap_or_default();
        member_filter_ids(inner)?
    } else {
        resource::reference_ids(value)
    };
    let dns = member_dns(context, &ids).await?;
    let empty = vec![resource::NO_MEMBER.as_bytes().to_vec()];
    let change = |op: LdapModifyType, values: Vec<Vec<u8>>| vec![(op, member.to_string(), values)];
    let changes = match (op, filtered) {
        ("remove", false) => change(LdapModifyType::Replace, empty.clone()),
        ("remove", true) if step.none_left => {
            let mut changes = change(LdapModifyType::Delete, dns);
            changes.push((LdapModifyType::Add, member.to_string(), empty.clone()));
            changes
        }
        ("remove", true) => change(LdapModifyType::Delete, dns),
        ("replace", false) if dns.is_empty() => change(LdapModifyType::Replace, empty.clone()),
        ("replace", false) => change(LdapModifyType::Replace, dns),
        _ if dns.is_empty() => return Ok(()),
        _ => {
            let mut changes = change(LdapModifyType::Add, dns);
            changes.push((LdapModifyType::Delete, member.to_string(), empty.clone()));
            changes
        }
    };
    let assertion = guard.take();
    Ok(context
        .client
        .modify_with(dn, changes, assertion.as_ref(), true)
        .await?)
}

/// The ids a `members[value eq "..."]` filter names (`or` of `eq` on value only).
fn member_filter_ids(text: &str) -> Result<Vec<String>, ScimError> {
    use super::filter::{parse, Expression, Operator};
    fn collect(expression: &Expression, ids: &mut Vec<String>) -> bool {
        match expression {
            Expression::Or(left, right) => collect(left, ids) && collect(right, ids),
            Expression::Compare {
                path,
                operator: Operator::Eq,
                value: Value::String(id),
            } if path.eq_ignore_ascii_case("value") => {
                ids.push(id.clone());
                true
            }
            _ => false,
        }
    }
    let expression = parse(text).map_err(|why| ScimError::bad("invalidFilter", why))?;
    let mut ids = Vec::new();
    if !collect(&expression, &mut ids) {
        return Err(ScimError::bad(
            "invalidFilter",
            "members filters compare value with eq",
        ));
    }
    Ok(ids)
}

/// Splits `attr[filter].sub` into its parts.
fn split_path(path: &str) -> Result<(String, Option<String>, Option<String>), ScimError> {
    if let Some((attribute, rest)) = path.split_once('[') {
        let (filter, after) = rest
            .rsplit_once(']')
            .ok_or_else(|| ScimError::bad("invalidPath", format!("'{path}': unclosed '['")))?;
        let sub = after
            .strip_prefix('.')
            .map(str::to_string)
            .filter(|sub| !sub.is_empty());
        return Ok((attribute.to_string(), Some(filter.to_string()), sub));
    }
    match path.split_once('.') {
        Some((attribute, sub)) => Ok((attribute.to_string(), None, Some(sub.to_string()))),
        None => Ok((path.to_string(), None, None)),
    }
}

fn key_in(object: &Map<String, Value>, name: &str) -> String {
    object
        .keys()
        .find(|key| key.eq_ignore_ascii_case(name))
        .cloned()
        .unwrap_or_else(|| name.to_string())
}

/// One operation on the resource's JSON.
fn apply(resource: &mut Map<String, Value>, operation: &Operation) -> Result<(), ScimError> {
    let Some(path) = &operation.path else {
        let Some(Value::Object(values)) = &operation.value else {
            return Err(ScimError::bad(
                "invalidValue",
                "an operation without path needs an object value",
            ));
        };
        for (key, value) in values {
            let inner = Operation {
                op: operation.op.clone(),
                path: Some(resource::strip_schema(key).to_string()),
                value: Some(value.clone()),
            };
            apply(resource, &inner)?;
        }
        return Ok(());
    };
    let (attribute, filter, sub) = split_path(path)?;
    let key = key_in(resource, &attribute);
    let value = operation.value.clone();
    match (filter, sub) {
        (None, None) => apply_attribute(resource, &key, &operation.op, value),
        (None, Some(sub)) => {
            let target = resource.entry(key.clone()).or_insert_with(|| json!({}));
            let Value::Object(object) = target else {
                return Err(ScimError::bad(
                    "invalidPath",
                    format!("'{path}' is not complex"),
                ));
            };
            let sub_key = key_in(object, &sub);
            apply_attribute(object, &sub_key, &operation.op, value)?;
            if object.is_empty() {
                resource.remove(&key);
            }
            Ok(())
        }
        (Some(filter), sub) => apply_filtered(resource, &key, &filter, sub.as_deref(), operation),
    }
}

fn apply_attribute(
    object: &mut Map<String, Value>,
    key: &str,
    op: &str,
    value: Option<Value>,
) -> Result<(), ScimError> {
    match op {
        "remove" => {
            object.remove(key);
        }
        "add" => match (object.get_mut(key), value) {
            (Some(Value::Array(existing)), Some(Value::Array(added))) => {
                merge_values(key, existing, added)?;
            }
            (Some(Value::Object(existing)), Some(Value::Object(added))) => existing.extend(added),
            (_, Some(value)) => {
                object.insert(key.to_string(), value);
            }
            (_, None) => return Err(ScimError::bad("invalidValue", "add needs a value")),
        },
        _ => match value {
            Some(Value::Null) | None => {
                object.remove(key);
            }
            Some(value) => {
                object.insert(key.to_string(), value);
            }
        },
    }
    Ok(())
}

/// `added` appended to `existing` but for the values it holds already (compared as their
/// JSON text, in a set: linear), within `VALUES_PER_ATTRIBUTE_MAX`.
fn merge_values(key: &str, existing: &mut Vec<Value>, added: Vec<Value>) -> Result<(), ScimError> {
    let mut seen: HashSet<String> = existing.iter().map(Value::to_string).collect();
    for item in added {
        if seen.insert(item.to_string()) {
            if existing.len() == VALUES_PER_ATTRIBUTE_MAX {
                return Err(too_many_values(key));
            }
            existing.push(item);
        }
    }
    Ok(())
}

fn apply_filtered(
    resource: &mut Map<String, Value>,
    key: &str,
    filter: &str,
    sub: Option<&str>,
    operation: &Operation,
) -> Result<(), ScimError> {
    let expression =
        super::filter::parse(filter).map_err(|why| ScimError::bad("invalidFilter", why))?;
    let Some(Value::Array(items)) = resource.get_mut(key) else {
        return Err(ScimError::bad(
            "noTarget",
            format!("'{key}' has no values to filter"),
        ));
    };
    // Each filtered operation tests every value: bounded as the values an operation may leave.
    if items.len() > VALUES_PER_ATTRIBUTE_MAX {
        return Err(too_many_values(key));
    }
    let matching: Vec<usize> = (0..items.len())
        .filter(|index| super::filter::matches_json(&expression, &items[*index]))
        .collect();
    if matching.is_empty() && operation.op != "add" {
        return Err(ScimError::bad(
            "noTarget",
            format!("no value of '{key}' matches the filter"),
        ));
    }
    for index in matching.iter().rev() {
        match (operation.op.as_str(), sub) {
            ("remove", None) => {
                items.remove(*index);
            }
            (_, None) => items[*index] = operation.value.clone().unwrap_or(Value::Null),
            (op, Some(sub)) => {
                if let Value::Object(object) = &mut items[*index] {
                    let sub_key = key_in(object, sub);
                    apply_attribute(object, &sub_key, op, operation.value.clone())?;
                }
            }
        }
    }
    if items.is_empty() {
        resource.remove(key);
    }
    Ok(())
}

/// `/Bulk`: each operation in order, `bulkId:` references replaced by the ids created before.
pub async fn bulk(context: &Context<'_>, body: &Map<String, Value>) -> Result<Answer, ScimError> {
    let context = &Context {
        scim: context.scim,
        client: context.client,
        state: context.state,
        references_left: AtomicUsize::new(context.references_left.load(Ordering::Relaxed)),
        in_bulk: true,
    };
    let list = resource::get_key(body, "Operations")
        .and_then(Value::as_array)
        .ok_or_else(|| ScimError::bad("invalidSyntax", "a bulk request needs Operations"))?;
    let maximum = context.scim.mapping.bulk_operations_max;
    if list.len() > maximum {
        return Err(ScimError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            format!("more than {maximum} operations in one bulk request"),
        ));
    }
    let fail_on_errors = resource::get_key(body, "failOnErrors").and_then(Value::as_u64);
    let mut created: HashMap<String, String> = HashMap::new();
    let mut results = Vec::new();
    let mut errors = 0u64;
    for item in list {
        if fail_on_errors.is_some_and(|limit| errors >= limit) {
            break;
        }
        let result = bulk_operation(context, item, &created).await;
        let method = item
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let bulk_id = item.get("bulkId").and_then(Value::as_str);
        let mut out = json!({"method": method});
        if let Some(bulk_id) = bulk_id {
            out["bulkId"] = json!(bulk_id);
        }
        match result {
            Ok(answer) => {
                out["status"] = json!(answer.status.as_u16().to_string());
                if let Some(meta) = answer.body.as_ref().and_then(|body| body.get("meta")) {
                    out["location"] = meta["location"].clone();
                    out["version"] = meta["version"].clone();
                }
                if let (Some(bulk_id), Some(id)) = (
                    bulk_id,
                    answer.body.as_ref().and_then(|body| body["id"].as_str()),
                ) {
                    created.insert(bulk_id.to_string(), id.to_string());
                }
            }
            Err(error) => {
                errors += 1;
                out["status"] = json!(error.status.as_u16().to_string());
                out["response"] = json!({
                    "schemas": [super::ERROR_SCHEMA],
                    "status": error.status.as_u16().to_string(),
                    "scimType": error.scim_type,
                    "detail": error.detail,
                });
            }
        }
        results.push(out);
    }
    Ok(Answer::ok(
        json!({"schemas": [BULK_RESPONSE_SCHEMA], "Operations": results}),
    ))
}

fn resolve_bulk_ids(value: &mut Value, created: &HashMap<String, String>) {
    match value {
        Value::String(text) => {
            if let Some(id) = text
                .strip_prefix("bulkId:")
                .and_then(|bulk_id| created.get(bulk_id))
            {
                *text = id.clone();
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| resolve_bulk_ids(item, created)),
        Value::Object(object) => object
            .values_mut()
            .for_each(|item| resolve_bulk_ids(item, created)),
        _ => {}
    }
}

async fn bulk_operation(
    context: &Context<'_>,
    item: &Value,
    created: &HashMap<String, String>,
) -> Result<Answer, ScimError> {
    let method = item
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_uppercase();
    let mut path = item
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut data = item.get("data").cloned().unwrap_or(Value::Null);
    resolve_bulk_ids(&mut data, created);
    if let Some((head, bulk_id)) = path.rsplit_once("/bulkId:") {
        let id = created
            .get(bulk_id)
            .ok_or_else(|| ScimError::bad("invalidValue", format!("unknown bulkId '{bulk_id}'")))?;
        path = format!("{head}/{id}");
    }
    let version = item.get("version").and_then(Value::as_str);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let kind = match segments.first() {
        Some(&"Users") => Kind::User,
        Some(&"Groups") => Kind::Group,
        _ => {
            return Err(ScimError::bad(
                "invalidPath",
                format!("'{path}' is not /Users or /Groups"),
            ))
        }
    };
    let object = || {
        data.as_object()
            .cloned()
            .ok_or_else(|| ScimError::bad("invalidSyntax", "data must be an object"))
    };
    match (method.as_str(), segments.get(1)) {
        ("POST", None) => super::create(context, kind, &object()?).await,
        ("PUT", Some(id)) => super::replace(context, kind, id, &object()?, version).await,
        ("PATCH", Some(id)) => patch(context, kind, id, &object()?, version).await,
        ("DELETE", Some(id)) => super::remove(context, kind, id, version).await,
        _ => Err(ScimError::bad(
            "invalidSyntax",
            format!("{method} {path} is not a bulk operation"),
        )),
    }
}
