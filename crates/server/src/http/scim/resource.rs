//! The mapping between SCIM resources (User, Group) and directory entries, configured by
//! `[http.scim]` (docs/scim.md): which entries are Users and Groups, SCIM attribute ↔
//! directory attribute, and SCIM filters / sortBy → the directory's `Filter` and sort key.

use super::filter::{Expression, Operator};
use crate::http::directory::FoundEntry;
use lmdir_config::ScimConfig;
use lmdir_schema::Filter;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

pub const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
pub const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
/// draft-behera's "locked until an administrator unlocks it" value of pwdAccountLockedTime.
pub const PERMANENT_LOCK: &str = "000001010000Z";
/// The member value of a groupOfNames with no members (it requires one): the empty DN, never
/// shown as a member.
pub const NO_MEMBER: &str = "";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    User,
    Group,
}

impl Kind {
    pub fn schema(self) -> &'static str {
        match self {
            Kind::User => USER_SCHEMA,
            Kind::Group => GROUP_SCHEMA,
        }
    }

    pub fn endpoint(self) -> &'static str {
        match self {
            Kind::User => "Users",
            Kind::Group => "Groups",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::User => "User",
            Kind::Group => "Group",
        }
    }
}

/// The resolved mapping.
pub struct Mapping {
    pub users_base: String,
    pub groups_base: String,
    pub user_classes: Vec<String>,
    pub group_classes: Vec<String>,
    pub user: HashMap<String, String>,
    pub group: HashMap<String, String>,
    pub bulk_operations_max: usize,
    pub page_resources_max: usize,
}

impl Mapping {
    pub fn new(config: &ScimConfig, suffix: &str) -> Mapping {
        let base = |configured: &str, default: &str| {
            if configured.trim().is_empty() {
                format!("{default},{suffix}")
            } else {
                configured.to_string()
            }
        };
        Mapping {
            users_base: base(&config.users_base, "ou=People"),
            groups_base: base(&config.groups_base, "ou=Groups"),
            user_classes: config.user_object_classes.clone(),
            group_classes: config.group_object_classes.clone(),
            user: config.user_attributes.clone().into_iter().collect(),
            group: config.group_attributes.clone().into_iter().collect(),
            bulk_operations_max: config.bulk_operations_max as usize,
            page_resources_max: config.page_resources_max as usize,
        }
    }

    pub fn base(&self, kind: Kind) -> &str {
        match kind {
            Kind::User => &self.users_base,
            Kind::Group => &self.groups_base,
        }
    }

    fn attributes(&self, kind: Kind) -> &HashMap<String, String> {
        match kind {
            Kind::User => &self.user,
            Kind::Group => &self.group,
        }
    }

    /// The directory attribute of a SCIM attribute, if mapped.
    pub fn ldap(&self, kind: Kind, scim: &str) -> Option<&str> {
        self.attributes(kind).get(scim).map(String::as_str)
    }

    /// The object class whose entries are this kind's resources (the last one configured:
    /// the most specific, e.g. inetOrgPerson).
    pub fn class(&self, kind: Kind) -> &str {
        let classes = match kind {
            Kind::User => &self.user_classes,
            Kind::Group => &self.group_classes,
        };
        classes.last().map_or("top", String::as_str)
    }

    /// The attribute naming an entry (its RDN): userName's or the group's displayName's.
    pub fn naming(&self, kind: Kind) -> &str {
        match kind {
            Kind::User => self.ldap(kind, "userName").unwrap_or("uid"),
            Kind::Group => self.ldap(kind, "displayName").unwrap_or("cn"),
        }
    }

    /// Every directory attribute a resource is built from.
    pub fn read_attributes(&self, kind: Kind) -> Vec<String> {
        self.read_attributes_for(kind, |_| true)
    }

    /// The directory attributes of the SCIM attributes `wants` (given a top-level name,
    /// lowercase) and those every resource needs (its id, meta, name): a page of groups with
    /// `excludedAttributes=members` reads no member values (a group of 100,000 members held
    /// megabytes per resource in the answer's buffer before it was cut).
    pub fn read_attributes_for(&self, kind: Kind, wants: impl Fn(&str) -> bool) -> Vec<String> {
        let naming = self.naming(kind).to_string();
        let mut names: Vec<String> = self
            .attributes(kind)
            .iter()
            .filter(|(scim, ldap)| {
                let top = scim.split('.').next().unwrap_or(scim).to_ascii_lowercase();
                wants(&top) || **ldap == naming
            })
            .map(|(_, ldap)| ldap.clone())
            .collect();
        names.extend(
            [
                "objectClass",
                "entryUUID",
                "entryCSN",
                "createTimestamp",
                "modifyTimestamp",
            ]
            .map(str::to_string),
        );
        if kind == Kind::User {
            names.extend(["cn", "sn", "pwdAccountLockedTime"].map(str::to_string));
        }
        names
    }

    /// `id` → the kind's filter for that entry.
    pub fn id_filter(&self, kind: Kind, id: &str) -> Filter {
        Filter::And(vec![
            self.class_filter(kind),
            Filter::Equality {
                description: "entryUUID".to_string(),
                value: id.as_bytes().to_vec(),
            },
        ])
    }

    pub fn class_filter(&self, kind: Kind) -> Filter {
        Filter::Equality {
            description: "objectClass".to_string(),
            value: self.class(kind).as_bytes().to_vec(),
        }
    }

    /// The directory attribute a SCIM filter or sortBy path compares (None: not filterable).
    pub fn filter_attribute(&self, kind: Kind, path: &str) -> Option<String> {
        let path = strip_schema(path);
        let lower = path.to_ascii_lowercase();
        let fixed = match lower.as_str() {
            "id" => Some("entryUUID"),
            "meta.created" => Some("createTimestamp"),
            "meta.lastmodified" => Some("modifyTimestamp"),
            _ => None,
        };
        if let Some(fixed) = fixed {
            return Some(fixed.to_string());
        }
        let trimmed = lower
            .strip_suffix(".value")
            .filter(|base| ["emails", "phonenumbers", "members", "groups"].contains(base))
            .unwrap_or(&lower);
        self.attributes(kind)
            .iter()
            .find(|(scim, _)| scim.eq_ignore_ascii_case(trimmed))
            .map(|(_, ldap)| ldap.clone())
    }
}

/// `urn:...:User:userName` → `userName`.
pub fn strip_schema(path: &str) -> &str {
    for schema in [USER_SCHEMA, GROUP_SCHEMA] {
        if path.len() > schema.len()
            && path[..schema.len()].eq_ignore_ascii_case(schema)
            && path.as_bytes()[schema.len()] == b':'
        {
            return &path[schema.len() + 1..];
        }
    }
    path
}

/// A SCIM dateTime (`2024-01-02T03:04:05Z`) as generalized time; other text unchanged.
fn directory_value(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(text) => {
            let digits: String = text.chars().filter(char::is_ascii_digit).collect();
            let looks_like_time = text.len() >= 20 && text.as_bytes().get(10) == Some(&b'T');
            if looks_like_time && digits.len() >= 14 {
                Some(format!("{}Z", &digits[..14]).into_bytes())
            } else {
                Some(text.clone().into_bytes())
            }
        }
        Value::Number(number) => Some(number.to_string().into_bytes()),
        Value::Bool(flag) => Some(if *flag {
            b"TRUE".to_vec()
        } else {
            b"FALSE".to_vec()
        }),
        _ => None,
    }
}

/// Generalized time → SCIM dateTime.
pub fn scim_time(generalized: &str) -> Option<String> {
    let digits = generalized.get(..14)?;
    if !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(format!(
        "{}-{}-{}T{}:{}:{}Z",
        &digits[0..4],
        &digits[4..6],
        &digits[6..8],
        &digits[8..10],
        &digits[10..12],
        &digits[12..14]
    ))
}

/// The UUIDs a filter compares `members`/`groups` values with (they are resolved to DNs first).
pub fn referenced_ids(expression: &Expression, ids: &mut Vec<String>) {
    match expression {
        Expression::And(left, right) | Expression::Or(left, right) => {
            referenced_ids(left, ids);
            referenced_ids(right, ids);
        }
        Expression::Not(inner) => referenced_ids(inner, ids),
        Expression::ValuePath { filter, .. } => referenced_ids(filter, ids),
        Expression::Compare { path, value, .. } => {
            let lower = strip_schema(path).to_ascii_lowercase();
            if lower.starts_with("members") || lower.starts_with("groups") {
                if let Value::String(id) = value {
                    ids.push(id.clone());
                }
            }
        }
    }
}

/// A SCIM filter as the directory's filter. `dns`: member/group ids resolved to DNs (an id
/// that names nothing the subject may see compares as a DN that exists nowhere).
pub fn translate(
    mapping: &Mapping,
    kind: Kind,
    expression: &Expression,
    dns: &HashMap<String, String>,
) -> Result<Filter, String> {
    // A chain `a or b or c` parses as nested pairs: flattened into one LDAP `or` (and `and`),
    // since 64 nested levels pass the server's `filter_depth_max` (a 500 before).
    let joined = |left: &Expression, right: &Expression, and: bool| {
        let mut items = Vec::new();
        for side in [left, right] {
            match (translate(mapping, kind, side, dns)?, and) {
                (Filter::And(inner), true) | (Filter::Or(inner), false) => items.extend(inner),
                (other, _) => items.push(other),
            }
        }
        Ok::<_, String>(items)
    };
    Ok(match expression {
        Expression::And(left, right) => Filter::And(joined(left, right, true)?),
        Expression::Or(left, right) => Filter::Or(joined(left, right, false)?),
        Expression::Not(inner) => Filter::Not(Box::new(translate(mapping, kind, inner, dns)?)),
        Expression::ValuePath { path, filter } => {
            // `emails[value co "x"]`: the element's sub-attribute is the attribute itself.
            let rebased = rebase(filter, path);
            translate(mapping, kind, &rebased, dns)?
        }
        Expression::Compare {
            path,
            operator,
            value,
        } => compare(mapping, kind, path, *operator, value, dns)?,
    })
}

fn rebase(expression: &Expression, prefix: &str) -> Expression {
    match expression {
        Expression::And(left, right) => Expression::And(
            Box::new(rebase(left, prefix)),
            Box::new(rebase(right, prefix)),
        ),
        Expression::Or(left, right) => Expression::Or(
            Box::new(rebase(left, prefix)),
            Box::new(rebase(right, prefix)),
        ),
        Expression::Not(inner) => Expression::Not(Box::new(rebase(inner, prefix))),
        Expression::ValuePath { path, filter } => Expression::ValuePath {
            path: format!("{prefix}.{path}"),
            filter: filter.clone(),
        },
        Expression::Compare {
            path,
            operator,
            value,
        } => Expression::Compare {
            path: format!("{prefix}.{path}"),
            operator: *operator,
            value: value.clone(),
        },
    }
}

fn compare(
    mapping: &Mapping,
    kind: Kind,
    path: &str,
    operator: Operator,
    value: &Value,
    dns: &HashMap<String, String>,
) -> Result<Filter, String> {
    let bare = strip_schema(path);
    if kind == Kind::User && bare.eq_ignore_ascii_case("active") {
        return active_filter(operator, value);
    }
    let description = mapping
        .filter_attribute(kind, bare)
        .ok_or_else(|| format!("'{bare}' cannot be filtered on"))?;
    let lower = bare.to_ascii_lowercase();
    let references = lower.starts_with("members") || lower.starts_with("groups");
    let value_bytes = || -> Result<Vec<u8>, String> {
        if references {
            let id = value.as_str().unwrap_or_default();
            return Ok(dns
                .get(id)
                .cloned()
                .unwrap_or_else(|| "cn=no such resource".to_string())
                .into_bytes());
        }
        directory_value(value).ok_or_else(|| format!("'{bare}' cannot be compared with null"))
    };
    let equality = |value: Vec<u8>| Filter::Equality {
        description: description.clone(),
        value,
    };
    let substrings = |initial, any: Vec<Vec<u8>>, final_| Filter::Substrings {
        description: description.clone(),
        initial,
        any,
        final_,
    };
    Ok(match operator {
        Operator::Pr => Filter::Present {
            description: description.clone(),
        },
        Operator::Eq => equality(value_bytes()?),
        Operator::Ne => Filter::Not(Box::new(equality(value_bytes()?))),
        Operator::Co => substrings(None, vec![value_bytes()?], None),
        Operator::Sw => substrings(Some(value_bytes()?), Vec::new(), None),
        Operator::Ew => substrings(None, Vec::new(), Some(value_bytes()?)),
        Operator::Ge => Filter::GreaterOrEqual {
            description: description.clone(),
            value: value_bytes()?,
        },
        Operator::Le => Filter::LessOrEqual {
            description: description.clone(),
            value: value_bytes()?,
        },
        Operator::Gt => Filter::And(vec![
            Filter::GreaterOrEqual {
                description: description.clone(),
                value: value_bytes()?,
            },
            Filter::Not(Box::new(equality(value_bytes()?))),
        ]),
        Operator::Lt => Filter::And(vec![
            Filter::LessOrEqual {
                description: description.clone(),
                value: value_bytes()?,
            },
            Filter::Not(Box::new(equality(value_bytes()?))),
        ]),
    })
}

/// `active` compared: the absence (or presence) of the password policy's lock.
fn active_filter(operator: Operator, value: &Value) -> Result<Filter, String> {
    let locked = Filter::Present {
        description: "pwdAccountLockedTime".to_string(),
    };
    match (operator, value) {
        (Operator::Eq, Value::Bool(true)) | (Operator::Ne, Value::Bool(false)) => {
            Ok(Filter::Not(Box::new(locked)))
        }
        (Operator::Eq, Value::Bool(false)) | (Operator::Ne, Value::Bool(true)) => Ok(locked),
        (Operator::Pr, _) => Ok(Filter::Present {
            description: "objectClass".to_string(),
        }),
        _ => Err("active compares only with eq/ne true or false".to_string()),
    }
}

/// A reference to another resource, as a User's `groups` or a Group's `members` show it.
#[derive(Debug, Clone)]
pub struct Reference {
    pub id: String,
    pub display: Option<String>,
    pub kind: Kind,
}

/// The resource of an entry (as the subject read it). `references`: the entry's members or
/// groups already resolved (hidden ones left out).
pub fn resource(
    mapping: &Mapping,
    kind: Kind,
    entry: &FoundEntry,
    references: &[Reference],
    location_base: &str,
) -> Value {
    let text = |scim: &str| {
        mapping
            .ldap(kind, scim)
            .and_then(|ldap| entry.first_text(ldap))
    };
    let id = entry.first_text("entryUUID").unwrap_or_default();
    let mut object = Map::new();
    object.insert("schemas".into(), json!([kind.schema()]));
    object.insert("id".into(), json!(id));
    let mut put = |key: &str, value: Option<String>| {
        if let Some(value) = value {
            object.insert(key.into(), Value::String(value));
        }
    };
    put("externalId", text("externalId"));
    put("displayName", text("displayName"));
    match kind {
        Kind::User => user_fields(mapping, entry, &mut object),
        Kind::Group => {
            if !references.is_empty() {
                object.insert(
                    "members".into(),
                    reference_list(references, location_base, false),
                );
            }
        }
    }
    if kind == Kind::User && !references.is_empty() {
        object.insert(
            "groups".into(),
            reference_list(references, location_base, true),
        );
    }
    let mut meta = Map::new();
    meta.insert("resourceType".into(), json!(kind.name()));
    if let Some(created) = entry
        .first_text("createTimestamp")
        .and_then(|t| scim_time(&t))
    {
        meta.insert("created".into(), json!(created));
    }
    if let Some(modified) = entry
        .first_text("modifyTimestamp")
        .and_then(|t| scim_time(&t))
    {
        meta.insert("lastModified".into(), json!(modified));
    }
    meta.insert(
        "location".into(),
        json!(format!("{location_base}/{}/{id}", kind.endpoint())),
    );
    if let Some(version) = entry.first_text("entryCSN") {
        meta.insert("version".into(), json!(etag(&version)));
    }
    object.insert("meta".into(), Value::Object(meta));
    Value::Object(object)
}

pub fn etag(csn: &str) -> String {
    format!("W/\"{csn}\"")
}

fn user_fields(mapping: &Mapping, entry: &FoundEntry, object: &mut Map<String, Value>) {
    let kind = Kind::User;
    let text = |scim: &str| {
        mapping
            .ldap(kind, scim)
            .and_then(|ldap| entry.first_text(ldap))
    };
    let user_name = text("userName").unwrap_or_default();
    object.insert("userName".into(), json!(user_name));
    // cn and sn are required by person: written as userName when the resource has none, and
    // read back as absent when they are exactly that filler.
    let not_filler = |value: Option<String>| value.filter(|value| *value != user_name);
    let mut name = Map::new();
    for (key, value) in [
        ("givenName", text("name.givenName")),
        ("familyName", not_filler(text("name.familyName"))),
        ("formatted", not_filler(text("name.formatted"))),
    ] {
        if let Some(value) = value {
            name.insert(key.into(), json!(value));
        }
    }
    if !name.is_empty() {
        object.insert("name".into(), Value::Object(name));
    }
    if let Some(title) = text("title") {
        object.insert("title".into(), json!(title));
    }
    for (scim, key) in [("emails", "emails"), ("phoneNumbers", "phoneNumbers")] {
        let Some(ldap) = mapping.ldap(kind, scim) else {
            continue;
        };
        let values: Vec<Value> = entry
            .values(ldap)
            .map(|value| json!({"value": String::from_utf8_lossy(value)}))
            .collect();
        if !values.is_empty() {
            object.insert(key.into(), Value::Array(values));
        }
    }
    let locked = entry.values("pwdAccountLockedTime").next().is_some();
    object.insert("active".into(), json!(!locked));
}

/// `described`: with `type` and `display` (a User's read-only `groups`); a Group's writable
/// `members` give back exactly what a client writes (value and $ref).
fn reference_list(references: &[Reference], location_base: &str, described: bool) -> Value {
    Value::Array(
        references
            .iter()
            .map(|reference| {
                let mut item = json!({
                    "value": reference.id,
                    "$ref": format!("{location_base}/{}/{}", reference.kind.endpoint(), reference.id),
                });
                if described {
                    item["type"] = json!(reference.kind.name());
                    if let Some(display) = &reference.display {
                        item["display"] = json!(display);
                    }
                }
                item
            })
            .collect(),
    )
}

/// The values of a SCIM string attribute (`key` in `object`) or of a multi-valued one's
/// `value` sub-attributes.
fn strings_at(object: &Map<String, Value>, key: &str) -> Vec<Vec<u8>> {
    let found = object
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
        .map(|(_, value)| value);
    match found {
        Some(Value::String(text)) => vec![text.clone().into_bytes()],
        Some(Value::Array(items)) => {
            let mut values: Vec<(bool, Vec<u8>)> = items
                .iter()
                .filter_map(|item| {
                    let value = item
                        .get("value")
                        .and_then(Value::as_str)
                        .or(item.as_str())?;
                    let primary = item
                        .get("primary")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    Some((primary, value.as_bytes().to_vec()))
                })
                .collect();
            // The primary value first (it is the one shown first).
            values.sort_by_key(|(primary, _)| !primary);
            let mut seen = std::collections::HashSet::new();
            values
                .into_iter()
                .map(|(_, value)| value)
                .filter(|value| seen.insert(value.to_ascii_lowercase()))
                .collect()
        }
        _ => Vec::new(),
    }
}

pub fn get_key<'v>(object: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    object
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(key))
        .map(|(_, value)| value)
}

/// The directory attributes (attribute → values, empty = none) a resource's writable SCIM
/// attributes map to, the naming value and members/groups excepted. `changed`: only the SCIM
/// attributes whose value differs from `before` (None: all of them).
pub fn directory_values(
    mapping: &Mapping,
    kind: Kind,
    object: &Map<String, Value>,
    before: Option<&Map<String, Value>>,
) -> Vec<(String, Vec<Vec<u8>>)> {
    let differs = |key: &str| match before {
        None => true,
        Some(before) => get_key(before, key) != get_key(object, key),
    };
    let mut out = Vec::new();
    let mut push = |scim: &str, values: Vec<Vec<u8>>| {
        if let Some(ldap) = mapping.ldap(kind, scim) {
            out.push((ldap.to_string(), values));
        }
    };
    if differs("externalId") {
        push("externalId", strings_at(object, "externalId"));
    }
    if kind == Kind::Group {
        return out;
    }
    let user_name = strings_at(object, "userName")
        .into_iter()
        .next()
        .unwrap_or_default();
    for key in ["displayName", "title", "emails", "phoneNumbers"] {
        if differs(key) {
            push(key, strings_at(object, key));
        }
    }
    if differs("name") || differs("userName") {
        let name = get_key(object, "name")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let or_user_name = |values: Vec<Vec<u8>>| {
            if values.is_empty() {
                vec![user_name.clone()]
            } else {
                values
            }
        };
        push("name.givenName", strings_at(&name, "givenName"));
        push(
            "name.familyName",
            or_user_name(strings_at(&name, "familyName")),
        );
        push(
            "name.formatted",
            or_user_name(strings_at(&name, "formatted")),
        );
    }
    // A resource that says nothing of `active` (a PUT without it, a PATCH removing it) leaves
    // the lock as it is: taking a missing value as true cleared an administrator's lockout.
    let active = get_key(object, "active").and_then(Value::as_bool);
    if let (true, Some(active)) = (differs("active"), active) {
        let lock = if active {
            Vec::new()
        } else {
            vec![PERMANENT_LOCK.as_bytes().to_vec()]
        };
        out.push(("pwdAccountLockedTime".to_string(), lock));
    }
    out
}

/// The naming value (userName / displayName) of a resource.
pub fn naming_value(kind: Kind, object: &Map<String, Value>) -> Option<String> {
    let key = match kind {
        Kind::User => "userName",
        Kind::Group => "displayName",
    };
    get_key(object, key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|name| !name.trim().is_empty())
}

/// The ids of a Group's `members` (or a value list of references).
pub fn reference_ids(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| item.get("value").and_then(Value::as_str).or(item.as_str()))
            .map(str::to_string)
            .collect(),
        Some(Value::Object(item)) => item
            .get("value")
            .and_then(Value::as_str)
            .map(|id| vec![id.to_string()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// `value` escaped for a DN's attribute value (RFC 4514), by the schema's one escaper (it
/// counted the value's characters once per character: a 1 MiB userName held a runtime
/// worker for 50 s before any access check).
pub fn escape_rdn_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    lmdir_schema::escape_value(value.as_bytes(), &mut out);
    out
}

#[cfg(test)]
mod read_attributes_tests {
    use super::*;

    #[test]
    fn a_page_without_members_reads_no_member_values() {
        let config = lmdir_config::ScimConfig::default();
        let mapping = Mapping::new(&config, "dc=example,dc=com");
        let all = mapping.read_attributes(Kind::Group);
        assert!(all.iter().any(|name| name == "member"), "{all:?}");
        let without = mapping.read_attributes_for(Kind::Group, |name| name != "members");
        assert!(!without.iter().any(|name| name == "member"), "{without:?}");
        // What every resource needs stays: its name (cn), id and meta.
        for needed in ["cn", "entryUUID", "entryCSN", "modifyTimestamp"] {
            assert!(
                without.iter().any(|name| name == needed),
                "{needed}: {without:?}"
            );
        }
    }
}

#[cfg(test)]
mod escape_tests {
    use super::escape_rdn_value;

    #[test]
    fn names_are_escaped_as_rfc_4514_says_in_one_pass() {
        assert_eq!(escape_rdn_value("Sales, EMEA"), "Sales\\, EMEA");
        assert_eq!(escape_rdn_value(" #a=b+c "), "\\ #a\\=b\\+c\\ ");
        assert_eq!(escape_rdn_value("#x"), "\\#x");
        assert_eq!(escape_rdn_value("Łukasz\0"), "Łukasz\\00");
        // A long name is escaped in one pass over its bytes (it was one per character).
        let long = "a,".repeat(1 << 19);
        assert_eq!(escape_rdn_value(&long).len(), long.len() * 3 / 2);
    }
}
