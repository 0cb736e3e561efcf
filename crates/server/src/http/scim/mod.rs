//! SCIM 2.0 (RFC 7643/7644) over the directory: `/Users` and `/Groups` (`resource.rs` maps
//! them), discovery (`discovery.rs`), filters (`filter.rs`), PATCH (`patch.rs`), `/Bulk`.
//! Every operation is an LDAP operation run as the authenticated identity (`directory.rs`):
//! what LDAP hides or refuses, SCIM hides (404, as missing) or refuses (403) the same way.

mod discovery;
pub mod filter;
mod patch;
pub mod resource;

use super::directory::{
    sort_control, vlv_control, vlv_response, DirectoryClient, FoundEntry, LdapFailure, Search,
};
use super::{respond, HttpRequest, HttpResponse, HttpState};
use hyper::{Method, StatusCode};
use ldap3_proto::proto::{LdapModifyType, LdapSearchScope};
use lmdir_schema::Filter;
use resource::{Kind, Mapping, Reference};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

pub const PREFIX: &str = "/scim/v2";
const SCIM_CONTENT_TYPE: &str = "application/scim+json";
const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
const LIST_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
/// Members (or groups) resolved in one request, each an LDAP read (a resource's, a page's,
/// a PATCH's or a PUT's together); past it the request is refused (400 tooMany) unless
/// `excludedAttributes=members` leaves them out (the console pages them) or a smaller page
/// asks for fewer.
const REFERENCES_RESOLVED_MAX: usize = 10_000;
/// Names in one `attributes` or `excludedAttributes` (400 tooMany beyond).
const ATTRIBUTE_NAMES_MAX: usize = 100;

/// The SCIM endpoint's configuration, resolved.
pub struct Scim {
    pub mapping: Mapping,
    /// `https://host:port/scim/v2`: the base of every `location` and `$ref`.
    pub location_base: String,
}

impl Scim {
    pub fn new(config: &lmdir_config::ScimConfig, suffix: &str, origin: &str) -> Scim {
        Scim {
            mapping: Mapping::new(config, suffix),
            location_base: format!("{origin}{PREFIX}"),
        }
    }

    /// The DN an HTTP Basic user name binds as: itself when it is a DN, else the User entry
    /// it names.
    pub fn user_dn(&self, user: &str) -> String {
        if user.contains('=') {
            return user.to_string();
        }
        format!(
            "{}={},{}",
            self.mapping.naming(Kind::User),
            resource::escape_rdn_value(user),
            self.mapping.users_base
        )
    }
}

/// An RFC 7644 §3.12 error.
#[derive(Debug)]
pub struct ScimError {
    pub status: StatusCode,
    pub scim_type: Option<&'static str>,
    pub detail: String,
    /// The LDAP result it answers, if it answers one.
    pub ldap_code: Option<u32>,
}

impl ScimError {
    pub fn new(
        status: StatusCode,
        scim_type: Option<&'static str>,
        detail: impl Into<String>,
    ) -> Self {
        ScimError {
            status,
            scim_type,
            detail: detail.into(),
            ldap_code: None,
        }
    }

    fn bad(scim_type: &'static str, detail: impl Into<String>) -> Self {
        ScimError::new(StatusCode::BAD_REQUEST, Some(scim_type), detail)
    }

    fn not_found() -> Self {
        ScimError::new(StatusCode::NOT_FOUND, None, "resource not found")
    }
}

/// The HTTP answer to a directory result: what LDAP refused, refused the same way.
impl From<LdapFailure> for ScimError {
    fn from(failure: LdapFailure) -> Self {
        let (status, scim_type) = match failure.code {
            32 => return ScimError::not_found(),
            50 | 13 => (StatusCode::FORBIDDEN, None),
            68 => (StatusCode::CONFLICT, Some("uniqueness")),
            122 => (StatusCode::PRECONDITION_FAILED, None),
            19 | 20 | 21 | 16 | 17 | 18 | 34 | 64 | 65 | 67 | 69 => {
                (StatusCode::BAD_REQUEST, Some("invalidValue"))
            }
            4 | 11 => (StatusCode::BAD_REQUEST, Some("tooMany")),
            49 | 48 | 8 => (StatusCode::UNAUTHORIZED, None),
            53 => (StatusCode::BAD_REQUEST, Some("mutability")),
            3 | 51 | 52 | 10 => (StatusCode::SERVICE_UNAVAILABLE, None),
            _ => {
                // Other (80) and the rest: the server's own failure, whose text (a store error,
                // a path, a setting) is for the log, not for the client.
                tracing::warn!("SCIM: LDAP {}: {}", failure.code, failure.message);
                return ScimError {
                    ldap_code: Some(failure.code),
                    ..ScimError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        None,
                        "the directory could not complete the request (the server's log says why)",
                    )
                };
            }
        };
        ScimError {
            ldap_code: Some(failure.code),
            ..ScimError::new(
                status,
                scim_type,
                format!("LDAP {}: {}", failure.code, failure.message),
            )
        }
    }
}

pub fn error_response(status: StatusCode, scim_type: Option<&str>, detail: &str) -> HttpResponse {
    let mut body = json!({
        "schemas": [ERROR_SCHEMA],
        "status": status.as_u16().to_string(),
        "detail": detail,
    });
    if let Some(scim_type) = scim_type {
        body["scimType"] = json!(scim_type);
    }
    respond(status, SCIM_CONTENT_TYPE, body.to_string())
}

/// The 401 answer (RFC 7644 §3.12 body, both schemes offered).
pub fn unauthorized() -> HttpResponse {
    let mut response = error_response(
        hyper::StatusCode::UNAUTHORIZED,
        None,
        "authentication required: HTTP Basic (a DN or userName and its password) or a bearer token",
    );
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Basic realm=\"lmdir\", Bearer realm=\"lmdir\""),
    );
    response
}

/// A successful answer.
pub struct Answer {
    pub status: StatusCode,
    pub body: Option<Value>,
}

impl Answer {
    fn ok(body: Value) -> Answer {
        Answer {
            status: StatusCode::OK,
            body: Some(body),
        }
    }
}

fn into_response(answer: Result<Answer, ScimError>) -> HttpResponse {
    match answer {
        Err(error) => error_response(error.status, error.scim_type, &error.detail),
        Ok(answer) => {
            let body = answer
                .body
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default();
            let mut response = respond(answer.status, SCIM_CONTENT_TYPE, body);
            let meta = answer.body.as_ref().and_then(|body| body.get("meta"));
            let headers = response.headers_mut();
            if let Some(version) = meta
                .and_then(|meta| meta.get("version"))
                .and_then(Value::as_str)
            {
                if let Ok(value) = version.parse() {
                    headers.insert(hyper::header::ETAG, value);
                }
            }
            if answer.status == StatusCode::CREATED {
                if let Some(location) = meta
                    .and_then(|meta| meta.get("location"))
                    .and_then(Value::as_str)
                {
                    if let Ok(value) = location.parse() {
                        headers.insert(hyper::header::LOCATION, value);
                    }
                }
            }
            response
        }
    }
}

/// Entry point for `/scim/v2/...` (`rest` is what follows the prefix), run as `client`
/// (authenticated from the request's head before its body was read).
pub async fn handle(
    state: &HttpState,
    request: &HttpRequest,
    rest: &str,
    client: DirectoryClient,
) -> HttpResponse {
    let scim = &state.scim;
    let segments: Vec<&str> = rest
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let kind_of = |segment: &str| match segment {
        "Users" => Some(Kind::User),
        "Groups" => Some(Kind::Group),
        _ => None,
    };
    let context = Context {
        scim,
        client: &client,
        state,
        references_left: AtomicUsize::new(REFERENCES_RESOLVED_MAX),
        in_bulk: false,
    };
    let answer = match (&request.method, segments.as_slice()) {
        (&Method::GET, ["ServiceProviderConfig"]) => {
            Ok(Answer::ok(discovery::service_provider_config(
                &scim.mapping,
                state.body_bytes_max,
                &scim.location_base,
            )))
        }
        (&Method::GET, ["Schemas"]) => Ok(Answer::ok(list_of(discovery::schemas(
            &scim.mapping,
            &scim.location_base,
        )))),
        (&Method::GET, ["Schemas", id]) => {
            one_of(discovery::schemas(&scim.mapping, &scim.location_base), id)
        }
        (&Method::GET, ["ResourceTypes"]) => Ok(Answer::ok(list_of(discovery::resource_types(
            &scim.location_base,
        )))),
        (&Method::GET, ["ResourceTypes", id]) => {
            one_of(discovery::resource_types(&scim.location_base), id)
        }
        (_, ["ServiceProviderConfig" | "Schemas" | "ResourceTypes", ..]) => Err(ScimError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            None,
            "discovery endpoints answer GET only",
        )),
        // Searching Users and Groups at once (RFC 7644 §3.4.3 at the root) is not offered.
        (&Method::POST, [".search"]) => Err(ScimError::new(
            StatusCode::NOT_IMPLEMENTED,
            None,
            "search /Users/.search or /Groups/.search",
        )),
        (&Method::POST, ["Bulk"]) => match json_body(request) {
            Ok(body) => patch::bulk(&context, &body).await,
            Err(error) => Err(error),
        },
        (method, [segment, rest @ ..]) => match kind_of(segment) {
            None => Err(ScimError::not_found()),
            Some(kind) => resource_request(&context, request, method, kind, rest).await,
        },
        _ => Err(ScimError::not_found()),
    };
    into_response(answer)
}

/// What a handler needs.
pub struct Context<'a> {
    pub scim: &'a Scim,
    pub client: &'a DirectoryClient,
    pub state: &'a HttpState,
    /// Member (or group) resolutions this request may still make (`REFERENCES_RESOLVED_MAX`).
    pub references_left: AtomicUsize,
    /// Inside `/Bulk`, whose answers carry only each resource's location and version.
    pub in_bulk: bool,
}

impl Context<'_> {
    /// What the resource a write answers with shows: all of it, its references with an
    /// allowance of their own (a written group is shown whole); in `/Bulk` no references.
    fn answer_selection(&self) -> Selection {
        if self.in_bulk {
            return Selection::without_references();
        }
        self.references_left
            .store(REFERENCES_RESOLVED_MAX, Ordering::Relaxed);
        Selection::default()
    }

    /// Takes `count` resolutions from the request's allowance: 400 tooMany past it, before
    /// any of them is made.
    fn resolve_allowance(&self, count: usize, advice: &str) -> Result<(), ScimError> {
        let taken =
            self.references_left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(count)
                });
        taken.map(|_| ()).map_err(|_| {
            ScimError::bad(
                "tooMany",
                format!("more than {REFERENCES_RESOLVED_MAX} members or groups in one request: {advice}"),
            )
        })
    }
}

async fn resource_request(
    context: &Context<'_>,
    request: &HttpRequest,
    method: &Method,
    kind: Kind,
    rest: &[&str],
) -> Result<Answer, ScimError> {
    let if_match = request.header("if-match").map(str::to_string);
    match (method, rest) {
        (&Method::GET, []) => {
            let parameters = ListParameters::from_query(request)?;
            list(context, kind, &parameters).await
        }
        (&Method::POST, [".search"]) => {
            let body = json_body(request)?;
            list(context, kind, &ListParameters::from_body(&body)?).await
        }
        (&Method::POST, []) => create(context, kind, &json_body(request)?).await,
        (&Method::GET, [id]) => {
            let selection = Selection::from_query(request)?;
            let entry = find(context, kind, id)
                .await?
                .ok_or_else(ScimError::not_found)?;
            let mut cache = HashMap::new();
            let value = to_resource(context, kind, &entry, &selection, &mut cache).await?;
            Ok(Answer::ok(value))
        }
        (&Method::PUT, [id]) => {
            replace(context, kind, id, &json_body(request)?, if_match.as_deref()).await
        }
        (&Method::PATCH, [id]) => {
            patch::patch(context, kind, id, &json_body(request)?, if_match.as_deref()).await
        }
        (&Method::DELETE, [id]) => remove(context, kind, id, if_match.as_deref()).await,
        _ => Err(ScimError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            None,
            "method not allowed here",
        )),
    }
}

/// Whether the request's Content-Type is one RFC 7644 §3.1 names for SCIM bodies
/// (`application/scim+json`, `application/json`; parameters such as charset aside).
fn is_scim_json(request: &HttpRequest) -> bool {
    let Some(content_type) = request.header(hyper::header::CONTENT_TYPE.as_str()) else {
        return false;
    };
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case(SCIM_CONTENT_TYPE)
        || essence.eq_ignore_ascii_case("application/json")
}

/// The request's JSON object: 415 unless its Content-Type says JSON, so that no browser form
/// (text/plain, urlencoded, multipart: what a cross-site page may send without asking) is
/// ever taken for one.
fn json_body(request: &HttpRequest) -> Result<Map<String, Value>, ScimError> {
    if !is_scim_json(request) {
        return Err(ScimError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            format!("the body must be {SCIM_CONTENT_TYPE} or application/json"),
        ));
    }
    match serde_json::from_slice::<Value>(&request.body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ScimError::bad(
            "invalidSyntax",
            "the body must be a JSON object",
        )),
        Err(error) => Err(ScimError::bad(
            "invalidSyntax",
            format!("the body is not JSON: {error}"),
        )),
    }
}

fn list_of(resources: Vec<Value>) -> Value {
    json!({
        "schemas": [LIST_SCHEMA],
        "totalResults": resources.len(),
        "startIndex": 1,
        "itemsPerPage": resources.len(),
        "Resources": resources,
    })
}

fn one_of(resources: Vec<Value>, id: &str) -> Result<Answer, ScimError> {
    resources
        .into_iter()
        .find(|resource| resource["id"].as_str() == Some(id))
        .map(Answer::ok)
        .ok_or_else(ScimError::not_found)
}

/// `attributes` / `excludedAttributes`: top-level names (schema URNs stripped, lowercase), at
/// most `ATTRIBUTE_NAMES_MAX` each, looked up in a set for each attribute of each resource.
#[derive(Default)]
pub struct Selection {
    only: Option<HashSet<String>>,
    excluded: HashSet<String>,
}

impl Selection {
    fn parse(text: Option<&str>) -> Result<HashSet<String>, ScimError> {
        let text = text.unwrap_or_default();
        if text.split(',').nth(ATTRIBUTE_NAMES_MAX).is_some() {
            return Err(ScimError::bad(
                "tooMany",
                format!("more than {ATTRIBUTE_NAMES_MAX} attribute names"),
            ));
        }
        Ok(text
            .split(',')
            .map(|name| resource::strip_schema(name.trim()))
            .map(|name| name.split('.').next().unwrap_or(name).to_ascii_lowercase())
            .filter(|name| !name.is_empty())
            .collect())
    }

    fn of(only: Option<&str>, excluded: Option<&str>) -> Result<Selection, ScimError> {
        let only = Selection::parse(only)?;
        Ok(Selection {
            only: (!only.is_empty()).then_some(only),
            excluded: Selection::parse(excluded)?,
        })
    }

    /// Everything but the references (members, groups): what a write compares.
    fn without_references() -> Selection {
        Selection {
            only: None,
            excluded: ["members", "groups"].map(str::to_string).into(),
        }
    }

    fn from_query(request: &HttpRequest) -> Result<Selection, ScimError> {
        Selection::of(
            request.query_value("attributes"),
            request.query_value("excludedAttributes"),
        )
    }

    fn wants(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        if ["id", "schemas", "meta"].contains(&name.as_str()) {
            return true;
        }
        if self.excluded.contains(&name) {
            return false;
        }
        self.only.as_ref().is_none_or(|only| only.contains(&name))
    }

    fn apply(&self, value: &mut Value) {
        if let Some(object) = value.as_object_mut() {
            object.retain(|key, _| self.wants(key));
        }
    }
}

/// The entry of `id` (None: no such resource, or one the subject may not see).
pub async fn find(
    context: &Context<'_>,
    kind: Kind,
    id: &str,
) -> Result<Option<FoundEntry>, ScimError> {
    if uuid_text(id).is_none() {
        return Ok(None);
    }
    let mapping = &context.scim.mapping;
    let filter = mapping.id_filter(kind, id);
    let outcome = context
        .client
        .search(Search {
            base: mapping.base(kind),
            scope: LdapSearchScope::Subtree,
            filter: &filter,
            attributes: mapping.read_attributes(kind),
            size_limit: 2,
            controls: Vec::new(),
        })
        .await;
    match outcome {
        Ok(outcome) => Ok(outcome.entries.into_iter().next()),
        Err(failure) if failure.code == 32 => Ok(None),
        Err(failure) => Err(failure.into()),
    }
}

fn uuid_text(id: &str) -> Option<()> {
    let bytes = id.as_bytes();
    let hex_positions_ok = bytes.len() == 36
        && bytes.iter().enumerate().all(|(index, byte)| {
            if [8, 13, 18, 23].contains(&index) {
                *byte == b'-'
            } else {
                byte.is_ascii_hexdigit()
            }
        });
    hex_positions_ok.then_some(())
}

/// The DN of the resource `id` (a User or a Group), as the subject may see it.
pub async fn dn_of_id(context: &Context<'_>, id: &str) -> Result<Option<String>, ScimError> {
    for kind in [Kind::User, Kind::Group] {
        if let Some(entry) = find(context, kind, id).await? {
            return Ok(Some(entry.dn));
        }
    }
    Ok(None)
}

/// A DN as a reference (None: not a resource the subject may see).
async fn reference_of(
    context: &Context<'_>,
    dn: &str,
    cache: &mut HashMap<String, Option<Reference>>,
) -> Result<Option<Reference>, ScimError> {
    if let Some(known) = cache.get(dn) {
        return Ok(known.clone());
    }
    let mapping = &context.scim.mapping;
    let attributes = [
        "entryUUID",
        "objectClass",
        mapping.naming(Kind::User),
        mapping.naming(Kind::Group),
        "displayName",
    ]
    .map(str::to_string)
    .to_vec();
    let entry = context.client.read(dn, attributes).await?;
    let reference = entry.and_then(|entry| {
        let id = entry.first_text("entryUUID")?;
        let is = |kind: Kind| {
            entry
                .values("objectClass")
                .any(|class| class.eq_ignore_ascii_case(mapping.class(kind).as_bytes()))
        };
        let kind = if is(Kind::Group) {
            Kind::Group
        } else if is(Kind::User) {
            Kind::User
        } else {
            return None;
        };
        let display = entry
            .first_text("displayName")
            .or_else(|| entry.first_text(mapping.naming(kind)));
        Some(Reference { id, display, kind })
    });
    cache.insert(dn.to_string(), reference.clone());
    Ok(reference)
}

const REFERENCES_ADVICE: &str =
    "ask with excludedAttributes=members (groups for Users) or for fewer resources (count)";

/// The DNs of the members (a User: groups) of `entry` the selection asks to see resolved.
fn reference_dns(
    context: &Context<'_>,
    kind: Kind,
    entry: &FoundEntry,
    selection: &Selection,
) -> Option<Vec<String>> {
    let key = match kind {
        Kind::User => "groups",
        Kind::Group => "members",
    };
    let ldap = context.scim.mapping.ldap(kind, key)?;
    selection.wants(key).then(|| {
        entry
            .values(ldap)
            .map(|dn| String::from_utf8_lossy(dn).into_owned())
            .filter(|dn| dn != resource::NO_MEMBER)
            .collect()
    })
}

/// The SCIM resource of an entry (members or groups resolved unless left out).
pub async fn to_resource(
    context: &Context<'_>,
    kind: Kind,
    entry: &FoundEntry,
    selection: &Selection,
    cache: &mut HashMap<String, Option<Reference>>,
) -> Result<Value, ScimError> {
    let mapping = &context.scim.mapping;
    let mut references = Vec::new();
    if let Some(dns) = reference_dns(context, kind, entry, selection) {
        let unresolved = dns.iter().filter(|dn| !cache.contains_key(*dn)).count();
        context.resolve_allowance(unresolved, REFERENCES_ADVICE)?;
        for dn in dns {
            if let Some(reference) = reference_of(context, &dn, cache).await? {
                references.push(reference);
            }
        }
    }
    let mut value = resource::resource(
        mapping,
        kind,
        entry,
        &references,
        &context.scim.location_base,
    );
    selection.apply(&mut value);
    Ok(value)
}

/// What a list asks for.
pub struct ListParameters {
    filter: Option<String>,
    sort_by: Option<String>,
    descending: bool,
    start_index: u32,
    count: Option<u32>,
    selection: Selection,
}

impl ListParameters {
    fn from_query(request: &HttpRequest) -> Result<ListParameters, ScimError> {
        let number = |name: &str| {
            request
                .query_value(name)
                .and_then(|value| value.trim().parse::<i64>().ok())
        };
        Ok(ListParameters {
            filter: request.query_value("filter").map(str::to_string),
            sort_by: request.query_value("sortBy").map(str::to_string),
            descending: request
                .query_value("sortOrder")
                .is_some_and(|order| order.eq_ignore_ascii_case("descending")),
            start_index: number("startIndex")
                .unwrap_or(1)
                .clamp(1, i64::from(i32::MAX)) as u32,
            count: number("count").map(|count| count.clamp(0, i64::from(i32::MAX)) as u32),
            selection: Selection::from_query(request)?,
        })
    }

    fn from_body(body: &Map<String, Value>) -> Result<ListParameters, ScimError> {
        let text = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_string);
        let number = |name: &str| body.get(name).and_then(Value::as_i64);
        let names = |name: &str| {
            body.get(name).and_then(Value::as_array).map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        let selection = Selection::of(
            names("attributes").as_deref(),
            names("excludedAttributes").as_deref(),
        )?;
        Ok(ListParameters {
            filter: text("filter"),
            sort_by: text("sortBy"),
            descending: text("sortOrder")
                .is_some_and(|order| order.eq_ignore_ascii_case("descending")),
            start_index: number("startIndex")
                .unwrap_or(1)
                .clamp(1, i64::from(i32::MAX)) as u32,
            count: number("count").map(|count| count.clamp(0, i64::from(i32::MAX)) as u32),
            selection,
        })
    }
}

/// A SCIM filter as the directory filter of `kind` (its class ANDed in).
pub async fn directory_filter(
    context: &Context<'_>,
    kind: Kind,
    text: Option<&str>,
) -> Result<Filter, ScimError> {
    let mapping = &context.scim.mapping;
    let Some(text) = text.filter(|text| !text.trim().is_empty()) else {
        return Ok(mapping.class_filter(kind));
    };
    let expression = filter::parse(text).map_err(|why| ScimError::bad("invalidFilter", why))?;
    let mut ids = Vec::new();
    resource::referenced_ids(&expression, &mut ids);
    let mut dns = HashMap::new();
    for id in ids {
        if let Some(dn) = dn_of_id(context, &id).await? {
            dns.insert(id, dn);
        }
    }
    let translated = resource::translate(mapping, kind, &expression, &dns)
        .map_err(|why| ScimError::bad("invalidFilter", why))?;
    Ok(Filter::And(vec![mapping.class_filter(kind), translated]))
}

/// A page of resources: sorted by the server (sortBy, else the naming attribute) and cut by
/// a virtual list view at startIndex, so each page is one search and totalResults is exact.
async fn list(
    context: &Context<'_>,
    kind: Kind,
    parameters: &ListParameters,
) -> Result<Answer, ScimError> {
    let mapping = &context.scim.mapping;
    let filter = directory_filter(context, kind, parameters.filter.as_deref()).await?;
    let sort_attribute = match &parameters.sort_by {
        Some(path) => mapping
            .filter_attribute(kind, path)
            .ok_or_else(|| ScimError::bad("invalidValue", format!("cannot sort by '{path}'")))?,
        None => mapping.naming(kind).to_string(),
    };
    let count = parameters
        .count
        .unwrap_or(mapping.page_resources_max as u32)
        .min(mapping.page_resources_max as u32);
    let controls = vec![
        sort_control(&sort_attribute, parameters.descending),
        vlv_control(parameters.start_index, count.saturating_sub(1)),
    ];
    let outcome = context
        .client
        .search(Search {
            base: mapping.base(kind),
            scope: LdapSearchScope::Subtree,
            filter: &filter,
            attributes: mapping.read_attributes_for(kind, |name| parameters.selection.wants(name)),
            size_limit: 0,
            controls,
        })
        .await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(failure) if failure.code == 32 => Default::default(),
        Err(failure) => return Err(failure.into()),
    };
    let total =
        vlv_response(&outcome.controls).map_or(outcome.entries.len() as i64, |(_, total, _)| total);
    let page = &outcome.entries[..outcome.entries.len().min(count as usize)];
    // The page's references counted before any is resolved: refused whole, not half-way.
    let distinct: HashSet<String> = page
        .iter()
        .filter_map(|entry| reference_dns(context, kind, entry, &parameters.selection))
        .flatten()
        .collect();
    if distinct.len() > context.references_left.load(Ordering::Relaxed) {
        context.resolve_allowance(distinct.len(), REFERENCES_ADVICE)?;
    }
    let mut resources = Vec::new();
    let mut cache = HashMap::new();
    for entry in page {
        resources.push(to_resource(context, kind, entry, &parameters.selection, &mut cache).await?);
    }
    Ok(Answer::ok(json!({
        "schemas": [LIST_SCHEMA],
        "totalResults": total.max(0),
        "startIndex": parameters.start_index,
        "itemsPerPage": resources.len(),
        "Resources": resources,
    })))
}

/// The DNs of `ids` (400 when one names nothing the subject may see).
pub async fn member_dns(context: &Context<'_>, ids: &[String]) -> Result<Vec<Vec<u8>>, ScimError> {
    context.resolve_allowance(ids.len(), "send the members in smaller requests")?;
    let mut dns = Vec::with_capacity(ids.len());
    for id in ids {
        let dn = dn_of_id(context, id)
            .await?
            .ok_or_else(|| ScimError::bad("invalidValue", format!("no resource with id '{id}'")))?;
        dns.push(dn.into_bytes());
    }
    Ok(dns)
}

fn password_of(object: &Map<String, Value>) -> Option<Vec<u8>> {
    resource::get_key(object, "password")
        .and_then(Value::as_str)
        .map(|password| password.as_bytes().to_vec())
}

/// The entry a POST creates: its DN and attributes (members resolved to DNs).
async fn new_entry(
    context: &Context<'_>,
    kind: Kind,
    object: &Map<String, Value>,
) -> Result<FoundEntry, ScimError> {
    let mapping = &context.scim.mapping;
    let naming_key = if kind == Kind::User {
        "userName"
    } else {
        "displayName"
    };
    let name = resource::naming_value(kind, object).ok_or_else(|| {
        ScimError::bad(
            "invalidValue",
            format!("{} needs a {naming_key}", kind.name()),
        )
    })?;
    let naming = mapping.naming(kind);
    let dn = format!(
        "{naming}={},{}",
        resource::escape_rdn_value(&name),
        mapping.base(kind)
    );
    let classes = match kind {
        Kind::User => &mapping.user_classes,
        Kind::Group => &mapping.group_classes,
    };
    let classes = classes
        .iter()
        .map(|class| class.as_bytes().to_vec())
        .collect();
    let mut attributes: Vec<(String, Vec<Vec<u8>>)> = vec![
        ("objectClass".to_string(), classes),
        (naming.to_string(), vec![name.into_bytes()]),
    ];
    attributes.extend(
        resource::directory_values(mapping, kind, object, None)
            .into_iter()
            .filter(|(_, values)| !values.is_empty()),
    );
    if let (Kind::User, Some(password)) = (kind, password_of(object)) {
        attributes.push(("userPassword".to_string(), vec![password]));
    }
    if let (Kind::Group, Some(member)) = (kind, mapping.ldap(kind, "members")) {
        let ids = resource::reference_ids(resource::get_key(object, "members"));
        let mut dns = member_dns(context, &ids).await?;
        if dns.is_empty() {
            dns.push(resource::NO_MEMBER.as_bytes().to_vec());
        }
        attributes.push((member.to_string(), dns));
    }
    Ok(FoundEntry { dn, attributes })
}

async fn create(
    context: &Context<'_>,
    kind: Kind,
    object: &Map<String, Value>,
) -> Result<Answer, ScimError> {
    let entry = new_entry(context, kind, object).await?;
    let dn = entry.dn.clone();
    context.client.add(entry).await?;
    let mapping = &context.scim.mapping;
    let entry = context
        .client
        .read(&dn, mapping.read_attributes(kind))
        .await?
        .ok_or_else(|| {
            ScimError::new(
                StatusCode::CREATED,
                None,
                "created, but not readable by this identity",
            )
        })?;
    let mut cache = HashMap::new();
    let value = to_resource(
        context,
        kind,
        &entry,
        &context.answer_selection(),
        &mut cache,
    )
    .await?;
    Ok(Answer {
        status: StatusCode::CREATED,
        body: Some(value),
    })
}

/// `If-Match: W/"<entryCSN>"` as an assertion on the entry (decided in the writer's txn).
pub fn version_assertion(if_match: Option<&str>) -> Option<Filter> {
    let tag = if_match?.trim();
    if tag == "*" {
        return None;
    }
    let csn = tag.trim_start_matches("W/").trim_matches('"');
    Some(Filter::Equality {
        description: "entryCSN".to_string(),
        value: csn.as_bytes().to_vec(),
    })
}

/// 412 when `If-Match` names another version than the entry's now (the writer checks it again
/// in its transaction, through the assertion control, for a change racing this one).
pub fn check_version(entry: &FoundEntry, if_match: Option<&str>) -> Result<(), ScimError> {
    let Some(Filter::Equality { value, .. }) = version_assertion(if_match) else {
        return Ok(());
    };
    let current = entry.first_text("entryCSN").unwrap_or_default();
    if current.as_bytes() == value.as_slice() {
        Ok(())
    } else {
        Err(ScimError::new(
            StatusCode::PRECONDITION_FAILED,
            None,
            "the resource changed since that version (If-Match)",
        ))
    }
}

/// What a PUT or PATCH writes over an entry.
pub struct Write<'a> {
    pub kind: Kind,
    pub entry: &'a FoundEntry,
    /// The resource as read (references left out), and as it is to be.
    pub before: &'a Map<String, Value>,
    pub after: &'a Map<String, Value>,
    /// The members' DNs a PUT sets (None: members untouched).
    pub members: Option<&'a [Vec<u8>]>,
    /// PATCH: a multi-valued attribute (emails, phoneNumbers) changes by its values (LDAP Add
    /// and Delete under permissive modify), so values added meanwhile over LDAP are kept; a
    /// PUT, which states them all, replaces them.
    pub by_value: bool,
}

/// Queues `write` in the client's transaction (`begin`): a rename when the naming value
/// changed, then one modify of every changed attribute (and the password, and the members
/// when given). `guard`, If-Match's assertion, goes on the first step queued: the steps
/// apply in one writer transaction, so what it asserts holds for all of them.
pub async fn write_changes(
    context: &Context<'_>,
    write: &Write<'_>,
    guard: &mut Option<Filter>,
) -> Result<String, ScimError> {
    let mapping = &context.scim.mapping;
    let kind = write.kind;
    let mut dn = write.entry.dn.clone();
    let new_name = resource::naming_value(kind, write.after)
        .ok_or_else(|| ScimError::bad("invalidValue", "the naming attribute may not be removed"))?;
    if resource::naming_value(kind, write.before).as_deref() != Some(new_name.as_str()) {
        let rdn = format!(
            "{}={}",
            mapping.naming(kind),
            resource::escape_rdn_value(&new_name)
        );
        context
            .client
            .rename(&dn, &rdn, guard.take().as_ref())
            .await?;
        // After the first unescaped comma: a name may hold one ("cn=Sales\, EMEA,...").
        let parent = lmdir_schema::normalized_dn_parent(&dn).unwrap_or_default();
        dn = format!("{rdn},{parent}");
    }
    let (changes, permissive) = modify_changes(mapping, write);
    if !changes.is_empty() {
        let assertion = guard.take();
        context
            .client
            .modify_with(&dn, changes, assertion.as_ref(), permissive)
            .await?;
    }
    Ok(dn)
}

type Change = (LdapModifyType, String, Vec<Vec<u8>>);

/// The modify `write` makes, and whether it needs permissive modify (values added and
/// deleted one by one).
fn modify_changes(mapping: &Mapping, write: &Write<'_>) -> (Vec<Change>, bool) {
    let kind = write.kind;
    let before_values = resource::directory_values(mapping, kind, write.before, None);
    let by_value: Vec<&str> = ["emails", "phoneNumbers"]
        .iter()
        .filter(|_| write.by_value)
        .filter_map(|key| mapping.ldap(kind, key))
        .collect();
    let mut permissive = false;
    let mut changes = Vec::new();
    for (attribute, values) in
        resource::directory_values(mapping, kind, write.after, Some(write.before))
    {
        let before = before_values
            .iter()
            .find(|(name, _)| *name == attribute)
            .map_or(&[][..], |(_, values)| values.as_slice());
        let diff = by_value
            .contains(&attribute.as_str())
            .then(|| value_changes(&attribute, before, &values))
            .flatten();
        match diff {
            Some(diff) => {
                permissive = true;
                changes.extend(diff);
            }
            None => changes.push((LdapModifyType::Replace, attribute, values)),
        }
    }
    if let Some(password) = password_of(write.after).filter(|_| kind == Kind::User) {
        changes.push((
            LdapModifyType::Replace,
            "userPassword".to_string(),
            vec![password],
        ));
    }
    if let (Some(dns), Some(member)) = (write.members, mapping.ldap(kind, "members")) {
        let mut dns = dns.to_vec();
        if dns.is_empty() {
            dns.push(resource::NO_MEMBER.as_bytes().to_vec());
        }
        changes.push((LdapModifyType::Replace, member.to_string(), dns));
    }
    (changes, permissive)
}

/// `before` made `after` by deleting and adding values, when that leaves them in `after`'s
/// order (the primary value first); None when only a Replace does.
fn value_changes(attribute: &str, before: &[Vec<u8>], after: &[Vec<u8>]) -> Option<Vec<Change>> {
    let after_set: HashSet<&Vec<u8>> = after.iter().collect();
    let before_set: HashSet<&Vec<u8>> = before.iter().collect();
    let removed: Vec<Vec<u8>> = before
        .iter()
        .filter(|value| !after_set.contains(value))
        .cloned()
        .collect();
    let added: Vec<Vec<u8>> = after
        .iter()
        .filter(|value| !before_set.contains(value))
        .cloned()
        .collect();
    let kept = before.iter().filter(|value| after_set.contains(value));
    if !kept.chain(added.iter()).eq(after.iter()) {
        return None;
    }
    let mut changes = Vec::new();
    if !removed.is_empty() {
        changes.push((LdapModifyType::Delete, attribute.to_string(), removed));
    }
    if !added.is_empty() {
        changes.push((LdapModifyType::Add, attribute.to_string(), added));
    }
    Some(changes)
}

/// Ends the transaction `begin` opened: committed when `written` is Ok (the first failing
/// step then answers for all, none kept), dropped with everything queued otherwise.
pub async fn finish<T>(
    context: &Context<'_>,
    written: Result<T, ScimError>,
) -> Result<T, ScimError> {
    match written {
        Ok(value) => {
            context.client.commit().await?;
            Ok(value)
        }
        Err(error) => {
            context.client.abandon();
            Err(error)
        }
    }
}

/// The resource read back after a write.
pub async fn read_back(context: &Context<'_>, kind: Kind, dn: &str) -> Result<Answer, ScimError> {
    let mapping = &context.scim.mapping;
    let entry = context
        .client
        .read(dn, mapping.read_attributes(kind))
        .await?
        .ok_or_else(ScimError::not_found)?;
    let mut cache = HashMap::new();
    Ok(Answer::ok(
        to_resource(
            context,
            kind,
            &entry,
            &context.answer_selection(),
            &mut cache,
        )
        .await?,
    ))
}

async fn replace(
    context: &Context<'_>,
    kind: Kind,
    id: &str,
    object: &Map<String, Value>,
    if_match: Option<&str>,
) -> Result<Answer, ScimError> {
    let entry = find(context, kind, id)
        .await?
        .ok_or_else(ScimError::not_found)?;
    check_version(&entry, if_match)?;
    check_writable(context, kind, &entry).await?;
    let before = to_resource(
        context,
        kind,
        &entry,
        &Selection::without_references(),
        &mut HashMap::new(),
    )
    .await?;
    let before = before.as_object().cloned().unwrap_or_default();
    let members = match kind {
        Kind::Group => Some(
            member_dns(
                context,
                &resource::reference_ids(resource::get_key(object, "members")),
            )
            .await?,
        ),
        Kind::User => None,
    };
    let write = Write {
        kind,
        entry: &entry,
        before: &before,
        after: object,
        members: members.as_deref(),
        by_value: false,
    };
    context.client.begin().await?;
    let mut guard = version_assertion(if_match);
    let written = write_changes(context, &write, &mut guard).await;
    let dn = finish(context, written).await?;
    read_back(context, kind, &dn).await
}

/// 403 before a PUT's or PATCH's work (reading the resource, resolving members, applying
/// operations) when the subject may write none of the resource's attributes: that work would
/// end in the same refusal. A resource the subject may not see stays a 404.
pub(super) async fn check_writable(
    context: &Context<'_>,
    kind: Kind,
    entry: &FoundEntry,
) -> Result<(), ScimError> {
    let attributes = context.scim.mapping.read_attributes(kind);
    match context.client.may_write_some(&entry.dn, attributes).await? {
        true => Ok(()),
        false => Err(ScimError::new(
            StatusCode::FORBIDDEN,
            None,
            "no write access to this resource",
        )),
    }
}

async fn remove(
    context: &Context<'_>,
    kind: Kind,
    id: &str,
    if_match: Option<&str>,
) -> Result<Answer, ScimError> {
    let entry = find(context, kind, id)
        .await?
        .ok_or_else(ScimError::not_found)?;
    check_version(&entry, if_match)?;
    context
        .client
        .delete(&entry.dn, version_assertion(if_match).as_ref())
        .await?;
    Ok(Answer {
        status: StatusCode::NO_CONTENT,
        body: None,
    })
}
