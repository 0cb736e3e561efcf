//! The web console on the HTTP listener (`/`): server-rendered HTML, no JavaScript at all (a
//! CSP forbids scripts), one stylesheet served here. A person signs in with directory
//! credentials (a simple bind through `operations::bind`: the bind throttle and the password
//! policy apply), and every page then runs LDAP operations as that identity through
//! `directory.rs`, like SCIM: the console can do exactly what LDAP lets that identity do.
//!
//! Sessions: a random 256-bit id in a cookie (`HttpOnly`, `SameSite=Strict`, `Secure` and the
//! `__Host-` prefix over TLS), kept in memory, at most `sessions_max` (the least recently used
//! is dropped first), ending after `session_idle_seconds` without a request and 12 hours after
//! sign-in whatever happens, and at once when the account is deleted or locked or the password
//! it signed in with changes (`auth::may_still_act_as`); sign-out forgets it. Every form carries the session's CSRF token
//! (the sign-in form a token of its own, bound to a cookie), checked before anything is done.

mod pages;
pub mod status;

use super::auth::CredentialMark;
use super::directory::DirectoryClient;
use super::{respond, HttpRequest, HttpResponse, HttpState};
use crate::identity::Identity;
use hyper::header::HeaderValue;
use hyper::{Method, StatusCode};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest a session lives, however active.
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Console sessions one identity holds at once (a person with a few browsers and devices).
const SESSIONS_PER_IDENTITY_MAX: usize = 8;
const CSS: &str = include_str!("console.css");
const HTML_CONTENT_TYPE: &str = "text/html; charset=utf-8";
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

struct ConsoleSession {
    identity: Identity,
    /// What it signed in against: it ends when that changes (`auth::may_still_act_as`).
    mark: CredentialMark,
    csrf: String,
    /// Signed in with a reset password: only its change may run until it is changed.
    must_change_password: bool,
    created: Instant,
    last_seen: Instant,
}

/// A live session as `Sessions::find` gives it.
struct Found {
    identity: Identity,
    mark: CredentialMark,
    csrf: String,
    must_change_password: bool,
}

/// The signed-in sessions.
pub struct Sessions {
    by_id: Mutex<HashMap<String, ConsoleSession>>,
    maximum: usize,
    idle: Duration,
}

fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes
        .iter()
        .fold(String::with_capacity(64), |mut text, byte| {
            let _ = write!(text, "{byte:02x}");
            text
        })
}

/// Compares without stopping at the first difference.
fn same_secret(left: &str, right: &str) -> bool {
    left.len() == right.len()
        && left
            .bytes()
            .zip(right.bytes())
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

impl Sessions {
    pub fn new(maximum: usize, idle: Duration) -> Sessions {
        Sessions {
            by_id: Mutex::new(HashMap::new()),
            maximum,
            idle,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ConsoleSession>> {
        self.by_id
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new session for `identity`: (id, CSRF token). One identity holds at most
    /// `SESSIONS_PER_IDENTITY_MAX`: past it its own least recently used goes, so signing in
    /// over and over never pushes other people's sessions out (it pushed every administrator
    /// out after 1,024 sign-ins). Past `maximum` in all, the least recently used goes.
    fn open(&self, identity: Identity, mark: CredentialMark, must_change_password: bool) -> String {
        let mut sessions = self.lock();
        let now = Instant::now();
        sessions.retain(|_, session| !self.expired(session, now));
        let own =
            |session: &ConsoleSession| session.identity.normalized_dn == identity.normalized_dn;
        while sessions.values().filter(|session| own(session)).count() >= SESSIONS_PER_IDENTITY_MAX
        {
            if !Self::drop_least_recent(&mut sessions, |session| own(session)) {
                break;
            }
        }
        while sessions.len() >= self.maximum {
            if !Self::drop_least_recent(&mut sessions, |_| true) {
                break;
            }
        }
        let id = random_token();
        sessions.insert(
            id.clone(),
            ConsoleSession {
                identity,
                mark,
                csrf: random_token(),
                must_change_password,
                created: now,
                last_seen: now,
            },
        );
        id
    }

    /// Drops the least recently used session `among` picks; false when it picks none.
    fn drop_least_recent(
        sessions: &mut HashMap<String, ConsoleSession>,
        among: impl Fn(&ConsoleSession) -> bool,
    ) -> bool {
        let oldest = sessions
            .iter()
            .filter(|(_, session)| among(session))
            .min_by_key(|(_, session)| session.last_seen)
            .map(|(id, _)| id.clone());
        oldest.is_some_and(|id| sessions.remove(&id).is_some())
    }

    fn expired(&self, session: &ConsoleSession, now: Instant) -> bool {
        now.duration_since(session.last_seen) > self.idle
            || now.duration_since(session.created) > SESSION_LIFETIME
    }

    /// The session of `id`, touched; None when unknown or expired (an expired one is
    /// forgotten).
    fn find(&self, id: &str) -> Option<Found> {
        let mut sessions = self.lock();
        let now = Instant::now();
        let session = sessions.get_mut(id)?;
        if self.expired(session, now) {
            sessions.remove(id);
            return None;
        }
        session.last_seen = now;
        Some(Found {
            identity: session.identity.clone(),
            mark: session.mark,
            csrf: session.csrf.clone(),
            must_change_password: session.must_change_password,
        })
    }

    /// The session changed its own password (`mark`: the new one's, None when it could not
    /// be read, which ends the session at its next request): the rest of the console opens
    /// and the session goes on, while the account's other sessions end.
    pub fn password_changed(&self, id: &str, mark: Option<CredentialMark>) {
        if let Some(session) = self.lock().get_mut(id) {
            session.must_change_password = false;
            if let Some(mark) = mark {
                session.mark = mark;
            }
        }
    }

    fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }
}

/// A signed-in request: its directory session and the CSRF token its forms carry.
pub struct Signed {
    /// The session's id (its cookie's value).
    pub id: String,
    pub client: DirectoryClient,
    pub csrf: String,
    pub form: HashMap<String, String>,
}

impl Signed {
    pub fn field(&self, name: &str) -> &str {
        self.form.get(name).map_or("", String::as_str)
    }
}

fn session_cookie_name(tls: bool) -> &'static str {
    if tls {
        "__Host-lmdir"
    } else {
        "lmdir_session"
    }
}

fn cookie(request: &HttpRequest, name: &str) -> Option<String> {
    request
        .headers
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
}

/// `max_age_seconds` None: a browser-session cookie (the session's idle and absolute expiry
/// are the server's to enforce, so an active session is not cut when a fixed Max-Age passes).
fn set_cookie(
    response: &mut HttpResponse,
    tls: bool,
    name: &str,
    value: &str,
    max_age_seconds: Option<u64>,
) {
    let secure = if tls { "; Secure" } else { "" };
    let max_age = max_age_seconds
        .map(|seconds| format!("; Max-Age={seconds}"))
        .unwrap_or_default();
    let text = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict{max_age}{secure}");
    if let Ok(value) = HeaderValue::from_str(&text) {
        response
            .headers_mut()
            .append(hyper::header::SET_COOKIE, value);
    }
}

/// The form a POST's body carries (empty for any other method): where its CSRF token must
/// be, never in the URL (which logs, history and Referer keep).
fn body_form(request: &HttpRequest) -> HashMap<String, String> {
    if request.method != Method::POST {
        return HashMap::new();
    }
    form_urlencoded::parse(&request.body).into_owned().collect()
}

/// The query's fields, and the body's over them on a POST.
pub fn form_of(request: &HttpRequest) -> HashMap<String, String> {
    let mut form: HashMap<String, String> = request.query.iter().cloned().collect();
    if request.method == Method::POST {
        form.extend(form_urlencoded::parse(&request.body).into_owned());
    }
    form
}

/// `&`, `<`, `>`, `"`, `'` escaped for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// A whole page: the navigation (when signed in), a notice, the body.
pub fn page(
    title: &str,
    signed: Option<&Signed>,
    notice: Option<&Notice>,
    body: &str,
) -> HttpResponse {
    let mut html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} · lmdir</title>\
         <link rel=\"stylesheet\" href=\"/console.css\"></head><body>",
        escape(title)
    );
    if let Some(signed) = signed {
        // The status page only for whom it opens (`status::may_see_status`).
        let status_link =
            if status::may_see_status(signed.client.server(), signed.client.identity()) {
                "<a href=\"/status\">Status</a>"
            } else {
                ""
            };
        let _ = write!(
            html,
            "<nav><a href=\"/me\">My account</a><a href=\"/users\">Users</a><a href=\"/groups\">Groups</a>\
             {status_link}<span class=\"who\">{}</span>\
             <form method=\"post\" action=\"/logout\">{}<button id=\"signout\">Sign out</button></form></nav>",
            escape(&signed.client.identity().dn),
            csrf_field(&signed.csrf)
        );
    }
    let _ = write!(html, "<main><h1>{}</h1>", escape(title));
    if let Some(notice) = notice {
        let class = if notice.error { "error" } else { "ok" };
        let _ = write!(
            html,
            "<p class=\"notice {class}\" id=\"notice\">{}</p>",
            escape(&notice.text)
        );
    }
    html.push_str(body);
    html.push_str("</main></body></html>");
    html_response(StatusCode::OK, html)
}

fn html_response(status: StatusCode, html: String) -> HttpResponse {
    let mut response = respond(status, HTML_CONTENT_TYPE, html);
    response
        .headers_mut()
        .insert("content-security-policy", HeaderValue::from_static(CSP));
    response
}

pub fn csrf_field(token: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        escape(token)
    )
}

/// A message shown above a page.
pub struct Notice {
    pub text: String,
    pub error: bool,
}

impl Notice {
    pub fn ok(text: impl Into<String>) -> Option<Notice> {
        Some(Notice {
            text: text.into(),
            error: false,
        })
    }

    pub fn error(text: impl Into<String>) -> Option<Notice> {
        Some(Notice {
            text: text.into(),
            error: true,
        })
    }
}

pub fn redirect(location: &str) -> HttpResponse {
    let mut response = respond(StatusCode::SEE_OTHER, "text/plain", "");
    if let Ok(value) = HeaderValue::from_str(location) {
        response
            .headers_mut()
            .insert(hyper::header::LOCATION, value);
    }
    response
}

/// The most a request without a live session may send: a sign-in form (user name or DN,
/// password and token) fits many times over.
pub const SIGN_IN_BODY_BYTES_MAX: usize = 16 * 1024;

/// How much of `request`'s body is read: `body_bytes_max` for a live session's request,
/// `SIGN_IN_BODY_BYTES_MAX` for anyone else's (decided from the head, before reading).
pub fn body_allowance_bytes(state: &HttpState, request: &HttpRequest) -> usize {
    let id = cookie(request, session_cookie_name(state.tls)).unwrap_or_default();
    if state.console.find(&id).is_some() {
        state.body_bytes_max
    } else {
        SIGN_IN_BODY_BYTES_MAX.min(state.body_bytes_max)
    }
}

/// Entry point for every path outside `/scim/v2/`.
pub async fn handle(state: &HttpState, request: &HttpRequest) -> HttpResponse {
    match (&request.method, request.path.as_str()) {
        (&Method::GET, "/console.css") => {
            let mut response = respond(StatusCode::OK, "text/css; charset=utf-8", CSS);
            response.headers_mut().insert(
                hyper::header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=3600"),
            );
            response
        }
        (&Method::GET, "/") => redirect("/me"),
        (&Method::GET, "/favicon.ico") => respond(StatusCode::NOT_FOUND, "text/plain", ""),
        (&Method::GET, "/login") => login_page(request, None),
        (&Method::POST, "/login") => login(state, request).await,
        (&Method::POST, "/logout") => logout(state, request),
        _ => match signed_in(state, request) {
            Err(response) => *response,
            Ok(signed) => pages::route(state, request, signed).await,
        },
    }
}

/// The request's session, with the CSRF token checked on a POST; otherwise the answer
/// (the sign-in page, or 403 for a POST without the right token).
fn signed_in(state: &HttpState, request: &HttpRequest) -> Result<Signed, Box<HttpResponse>> {
    let id = cookie(request, session_cookie_name(state.tls)).unwrap_or_default();
    let ended = || {
        Box::new(if request.method == Method::GET {
            redirect("/login")
        } else {
            forbidden("Your session has ended: sign in again.")
        })
    };
    let Some(Found {
        identity,
        mark,
        csrf,
        must_change_password: must_change,
    }) = state.console.find(&id)
    else {
        return Err(ended());
    };
    // An account deleted or locked since it signed in (an administrator's lock, SCIM's
    // `active: false`), or whose password (the rootdn: rootpw) changed since, ends its
    // sessions, as it refuses its binds and its tokens.
    if !super::auth::may_still_act_as(&state.server, &identity, mark) {
        state.console.close(&id);
        return Err(ended());
    }
    let form = form_of(request);
    if request.method != Method::GET {
        let body = body_form(request);
        let sent = body.get("csrf").map_or("", String::as_str);
        if !same_secret(sent, &csrf) {
            return Err(Box::new(forbidden(
                "The form's security token is missing or wrong: reload the page.",
            )));
        }
    }
    let allowed = matches!(request.path.as_str(), "/me" | "/me/password" | "/logout");
    if must_change && !allowed {
        return Err(Box::new(redirect("/me")));
    }
    let mut client = DirectoryClient::new(&state.server, request.peer, request.tls);
    client.assume(identity);
    // As on an LDAP connection: dispatch refuses everything but the password change.
    client.set_must_change_password(must_change);
    Ok(Signed {
        id,
        client,
        csrf,
        form,
    })
}

fn forbidden(text: &str) -> HttpResponse {
    let mut response = page(
        "Refused",
        None,
        Notice::error(text).as_ref(),
        "<p><a href=\"/login\">Sign in</a></p>",
    );
    *response.status_mut() = StatusCode::FORBIDDEN;
    response
}

/// The sign-in form's token cookie: `__Host-` over TLS, as the session's, so a sibling
/// subdomain cannot plant one and sign a browser in to the attacker's account.
fn login_cookie_name(tls: bool) -> &'static str {
    if tls {
        "__Host-lmdir_login"
    } else {
        "lmdir_login"
    }
}

fn login_page(request: &HttpRequest, notice: Option<Notice>) -> HttpResponse {
    // The token stays while its cookie lives: another tab's (or the favicon's) visit to the
    // sign-in page does not invalidate the form already shown.
    let token = cookie(request, login_cookie_name(request.tls))
        .filter(|token| token.len() == 64 && token.bytes().all(|byte| byte.is_ascii_hexdigit()))
        .unwrap_or_else(random_token);
    let body = format!(
        "<form method=\"post\" action=\"/login\" class=\"card\">{}\
         <label>User name or DN <input name=\"user\" id=\"user\" autocomplete=\"username\" required></label>\
         <label>Password <input name=\"password\" id=\"password\" type=\"password\" autocomplete=\"current-password\" required></label>\
         <button id=\"signin\">Sign in</button></form>",
        csrf_field(&token)
    );
    let mut response = page("Sign in", None, notice.as_ref(), &body);
    let name = login_cookie_name(request.tls);
    set_cookie(&mut response, request.tls, name, &token, Some(3600));
    response
}

async fn login(state: &HttpState, request: &HttpRequest) -> HttpResponse {
    let form = body_form(request);
    let expected = cookie(request, login_cookie_name(request.tls)).unwrap_or_default();
    let sent = form.get("csrf").map_or("", String::as_str);
    if expected.is_empty() || !same_secret(sent, &expected) {
        return forbidden(
            "The sign-in form's security token is missing or wrong: reload the page.",
        );
    }
    let user = form.get("user").map_or("", |user| user.trim());
    let password = form.get("password").map_or("", String::as_str);
    if user.is_empty() || password.is_empty() {
        return login_page(request, Notice::error("Give a user name and a password."));
    }
    let mut client = DirectoryClient::new(&state.server, request.peer, request.tls);
    let dn = state.scim.user_dn(user);
    // Taken before the bind: a password changed between the two ends the session at once
    // instead of being missed.
    let mark = super::auth::credential_mark(&state.server, &dn);
    let bound = client.bind(&dn, password).await;
    let (must_change, mark) = match (bound, mark) {
        (Ok(must_change), Some(mark)) => (must_change, mark),
        _ => {
            return login_page(
                request,
                Notice::error("Wrong user name or password, or the account is locked."),
            )
        }
    };
    let id = state
        .console
        .open(client.identity().clone(), mark, must_change);
    let mut response = redirect("/me");
    set_cookie(
        &mut response,
        request.tls,
        session_cookie_name(state.tls),
        &id,
        None,
    );
    let name = login_cookie_name(request.tls);
    set_cookie(&mut response, request.tls, name, "", Some(0));
    response
}

fn logout(state: &HttpState, request: &HttpRequest) -> HttpResponse {
    match signed_in(state, request) {
        Err(response) => *response,
        Ok(_) => {
            if let Some(id) = cookie(request, session_cookie_name(state.tls)) {
                state.console.close(&id);
            }
            let mut response = redirect("/login");
            set_cookie(
                &mut response,
                request.tls,
                session_cookie_name(state.tls),
                "",
                Some(0),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARK: CredentialMark = CredentialMark([0; 32]);

    fn identity(dn: &str) -> Identity {
        Identity {
            dn: dn.to_string(),
            normalized_dn: dn.to_string(),
            is_rootdn: false,
        }
    }

    #[test]
    fn signing_in_over_and_over_drops_only_ones_own_sessions() {
        let sessions = Sessions::new(16, Duration::from_secs(900));
        let admin = sessions.open(identity("cn=admin"), MARK, false);
        let others: Vec<String> = (0..100)
            .map(|_| sessions.open(identity("uid=mallory"), MARK, false))
            .collect();
        assert!(
            sessions.find(&admin).is_some(),
            "the administrator was pushed out"
        );
        let kept = others
            .iter()
            .filter(|id| sessions.find(id).is_some())
            .count();
        assert_eq!(kept, SESSIONS_PER_IDENTITY_MAX);
        // The newest are the ones kept.
        assert!(sessions.find(others.last().unwrap()).is_some());
        // Past the whole cap the least recently used goes, whoever holds it.
        let many: Vec<String> = (0..16)
            .map(|index| sessions.open(identity(&format!("uid=user{index}")), MARK, false))
            .collect();
        assert_eq!(sessions.count(), 16);
        assert!(sessions.find(many.last().unwrap()).is_some());
    }
}
