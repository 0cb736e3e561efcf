//! `/ServiceProviderConfig`, `/Schemas` and `/ResourceTypes` (RFC 7643 §5-7): what this server
//! supports, and the attributes it maps (only those: a client that fills every published
//! attribute gets every one of them back).

use super::resource::{Kind, Mapping, GROUP_SCHEMA, USER_SCHEMA};
use serde_json::{json, Value};

fn attribute(name: &str, kind: &str, multi: bool, mutability: &str, returned: &str) -> Value {
    json!({
        "name": name,
        "type": kind,
        "multiValued": multi,
        "description": name,
        "required": false,
        "caseExact": false,
        "mutability": mutability,
        "returned": returned,
        "uniqueness": "none",
    })
}

fn complex(name: &str, multi: bool, mutability: &str, sub: Vec<Value>) -> Value {
    let mut value = attribute(name, "complex", multi, mutability, "default");
    value["subAttributes"] = Value::Array(sub);
    value
}

fn string(name: &str) -> Value {
    attribute(name, "string", false, "readWrite", "default")
}

fn reference_sub(types: &[&str], mutability: &str, described: bool) -> Vec<Value> {
    let mut reference = attribute("$ref", "reference", false, mutability, "default");
    reference["referenceTypes"] = json!(types);
    let mut sub = vec![
        attribute("value", "string", false, mutability, "default"),
        reference,
    ];
    if described {
        sub.push(attribute("display", "string", false, "readOnly", "default"));
        sub.push(attribute("type", "string", false, "readOnly", "default"));
    }
    sub
}

fn user_attributes(mapping: &Mapping) -> Vec<Value> {
    let mapped = |scim: &str| mapping.ldap(Kind::User, scim).is_some();
    let mut attributes = Vec::new();
    let mut user_name = string("userName");
    user_name["required"] = json!(true);
    user_name["uniqueness"] = json!("server");
    attributes.push(user_name);
    let name_parts: Vec<Value> = [
        ("name.givenName", "givenName"),
        ("name.familyName", "familyName"),
        ("name.formatted", "formatted"),
    ]
    .iter()
    .filter(|(scim, _)| mapped(scim))
    .map(|(_, sub)| string(sub))
    .collect();
    if !name_parts.is_empty() {
        attributes.push(complex("name", false, "readWrite", name_parts));
    }
    for simple in ["displayName", "title"] {
        if mapped(simple) {
            attributes.push(string(simple));
        }
    }
    for multi in ["emails", "phoneNumbers"] {
        if mapped(multi) {
            attributes.push(complex(multi, true, "readWrite", vec![string("value")]));
        }
    }
    attributes.push(attribute(
        "active",
        "boolean",
        false,
        "readWrite",
        "default",
    ));
    attributes.push(attribute("password", "string", false, "writeOnly", "never"));
    if mapped("groups") {
        attributes.push(complex(
            "groups",
            true,
            "readOnly",
            reference_sub(&["Group"], "readOnly", true),
        ));
    }
    attributes
}

fn group_attributes(mapping: &Mapping) -> Vec<Value> {
    let mut display_name = string("displayName");
    display_name["required"] = json!(true);
    let mut attributes = vec![display_name];
    if mapping.ldap(Kind::Group, "members").is_some() {
        attributes.push(complex(
            "members",
            true,
            "readWrite",
            reference_sub(&["User", "Group"], "immutable", false),
        ));
    }
    attributes
}

pub fn schemas(mapping: &Mapping, location_base: &str) -> Vec<Value> {
    [
        (
            USER_SCHEMA,
            "User",
            "User Account",
            user_attributes(mapping),
        ),
        (GROUP_SCHEMA, "Group", "Group", group_attributes(mapping)),
    ]
    .into_iter()
    .map(|(id, name, description, attributes)| {
        json!({
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Schema"],
            "id": id,
            "name": name,
            "description": description,
            "attributes": attributes,
            "meta": {"resourceType": "Schema", "location": format!("{location_base}/Schemas/{id}")},
        })
    })
    .collect()
}

pub fn resource_types(location_base: &str) -> Vec<Value> {
    [Kind::User, Kind::Group]
        .into_iter()
        .map(|kind| {
            json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
                "id": kind.name(),
                "name": kind.name(),
                "endpoint": format!("/{}", kind.endpoint()),
                "description": kind.name(),
                "schema": kind.schema(),
                "schemaExtensions": [],
                "meta": {
                    "resourceType": "ResourceType",
                    "location": format!("{location_base}/ResourceTypes/{}", kind.name()),
                },
            })
        })
        .collect()
}

pub fn service_provider_config(
    mapping: &Mapping,
    body_bytes_max: usize,
    location_base: &str,
) -> Value {
    json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
        "documentationUri": "https://github.com/lmdir/lmdir/blob/main/docs/scim.md",
        "patch": {"supported": true},
        "bulk": {
            "supported": true,
            "maxOperations": mapping.bulk_operations_max,
            "maxPayloadSize": body_bytes_max,
        },
        "filter": {"supported": true, "maxResults": mapping.page_resources_max},
        "changePassword": {"supported": true},
        "sort": {"supported": true},
        "etag": {"supported": true},
        "authenticationSchemes": [
            {
                "type": "oauthbearertoken",
                "name": "Bearer token",
                "description": "lmdir.<DN in base64url>.<secret>, its hash stored in the entry's lmdirBearerToken",
                "primary": true,
            },
            {
                "type": "httpbasic",
                "name": "HTTP Basic",
                "description": "A DN or userName and its directory password (a simple bind)",
            },
        ],
        "meta": {
            "resourceType": "ServiceProviderConfig",
            "location": format!("{location_base}/ServiceProviderConfig"),
        },
    })
}
