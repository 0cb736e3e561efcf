//! Who an HTTP request runs as. `Authorization: Basic` is a simple bind (a DN, or a userName
//! turned into `<naming attribute>=<it>,<users base>`), through `operations::bind`: the bind
//! throttle, the password policy, the stats log. `Authorization: Bearer lmdir.<DN in
//! base64url>.<secret>` acts as that DN when the secret matches one of the entry's
//! `lmdirBearerToken` values (hashed, `{SHA256}`/`{SSHA256}` …, verified as userPassword values
//! are, under the same access rule: `auth` access for anonymous) — the check runs under the
//! same failed-bind throttle as a bind of that DN. A token never acts as the rootdn (one on
//! the rootdn's own entry is refused). Anything else is 401.

use super::directory::DirectoryClient;
use super::{HttpRequest, HttpState};
use crate::context::database_of;
use crate::identity::Identity;
use crate::result::{code, OperationError};
use base64::Engine;

/// Longest Authorization header value considered (a longer one is refused unread).
const AUTHORIZATION_BYTES_MAX: usize = 8192;
/// The attribute holding hashed bearer tokens.
pub const BEARER_TOKEN_ATTRIBUTE: &str = "lmdirBearerToken";
/// Bearer tokens start with this.
pub const BEARER_TOKEN_PREFIX: &str = "lmdir.";

/// Why a request is not authenticated (answered 401, with the same text whatever the cause
/// so nothing tells a wrong password from an unknown user).
pub struct Unauthenticated;

/// An authenticated directory session for `request`.
pub async fn authenticate(
    state: &HttpState,
    request: &HttpRequest,
) -> Result<DirectoryClient, Unauthenticated> {
    let header = request.header("authorization").ok_or(Unauthenticated)?;
    if header.len() > AUTHORIZATION_BYTES_MAX {
        return Err(Unauthenticated);
    }
    let (scheme, credentials) = header.split_once(' ').ok_or(Unauthenticated)?;
    let mut client = DirectoryClient::new(&state.server, request.peer, request.tls);
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(credentials.trim())
            .map_err(|_| Unauthenticated)?;
        let decoded = String::from_utf8(decoded).map_err(|_| Unauthenticated)?;
        let (user, password) = decoded.split_once(':').ok_or(Unauthenticated)?;
        if user.is_empty() || password.is_empty() {
            // An empty password would be an anonymous (unauthenticated) bind.
            return Err(Unauthenticated);
        }
        let dn = state.scim.user_dn(user);
        let must_change = client
            .bind(&dn, password)
            .await
            .map_err(|_| Unauthenticated)?;
        if must_change {
            // A reset password opens nothing but its own change, which SCIM does not offer.
            return Err(Unauthenticated);
        }
        return Ok(client);
    }
    if scheme.eq_ignore_ascii_case("bearer") {
        let identity = bearer_identity(state, &client, credentials.trim()).await?;
        client.assume(identity);
        return Ok(client);
    }
    Err(Unauthenticated)
}

/// A `lmdir.<base64url DN>.<secret>` token's identity.
async fn bearer_identity(
    state: &HttpState,
    client: &DirectoryClient,
    token: &str,
) -> Result<Identity, Unauthenticated> {
    let rest = token
        .strip_prefix(BEARER_TOKEN_PREFIX)
        .ok_or(Unauthenticated)?;
    let (encoded_dn, secret) = rest.split_once('.').ok_or(Unauthenticated)?;
    let dn = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded_dn)
        .ok()
        .and_then(|dn| String::from_utf8(dn).ok())
        .ok_or(Unauthenticated)?;
    let server = &state.server;
    let secret = secret.as_bytes().to_vec();
    let normalized = database_of(server).and_then(|database| database.normalize_dn(&dn).ok());
    let throttle_key = normalized.as_deref();
    let peer = client.session().client;
    let checked = crate::password::throttled(server, client.session(), &dn, throttle_key, async {
        let (identity, stored) = token_hashes(server, &dn)?;
        let matching =
            crate::password::any_password_matches(server, peer, stored, &secret, Some(&dn));
        if matching.await? {
            Ok(identity)
        } else {
            Err(OperationError::new(code::INVALID_CREDENTIALS, ""))
        }
    })
    .await;
    checked.map_err(|_| Unauthenticated)
}

/// Whether an identity authenticated earlier (a console session) may still act: the rootdn
/// always; an entry while it exists and its password policy does not hold it locked.
pub fn may_still_act_as(server: &crate::context::ServerContext, identity: &Identity) -> bool {
    if identity.is_rootdn {
        return true;
    }
    let Some(database) = database_of(server) else {
        return false;
    };
    let Ok(read) = database.store.read() else {
        return false;
    };
    let Ok(id) = read.normalized_dn_to_id(&identity.normalized_dn) else {
        return false;
    };
    match read.entry(id) {
        Ok(Some(entry)) => !database.account_locked(server, &read, &entry),
        _ => false,
    }
}

/// The identity of `dn` and its stored token hashes (those anonymous may authenticate with).
fn token_hashes(
    server: &crate::context::ServerContext,
    dn: &str,
) -> Result<(Identity, Vec<Vec<u8>>), OperationError> {
    let invalid = || OperationError::new(code::INVALID_CREDENTIALS, "");
    let database = database_of(server).ok_or_else(invalid)?;
    let normalized = database.normalize_dn(dn).map_err(|_| invalid())?;
    let attribute = database
        .schema()
        .attribute(BEARER_TOKEN_ATTRIBUTE)
        .ok_or_else(invalid)?;
    if database.policy().is_rootdn(&normalized) {
        // The rootdn's entry (Debian makes `cn=admin,<suffix>` one) holds tokens whoever may
        // write it put there: a token never acts as the rootdn, past every rule and policy.
        tracing::warn!(
            "bearer token for dn=\"{}\" refused: it names the rootdn, which no token acts as",
            crate::log_text::escaped(dn)
        );
        return Err(invalid());
    }
    let read = database.store.read().map_err(crate::context::internal)?;
    let id = read
        .normalized_dn_to_id(&normalized)
        .map_err(|_| invalid())?;
    let entry = read
        .entry(id)
        .map_err(OperationError::from)?
        .ok_or_else(invalid)?;
    let groups = database.groups(&read);
    let anonymous = Identity::default();
    let subject = database.subject(&anonymous, &groups);
    if !database
        .policy()
        .for_entry(&subject, &normalized, &entry)
        .can_authenticate_with(attribute)
    {
        return Err(invalid());
    }
    // A locked account (its policy's lockout, or SCIM's `active: false`) is locked for its
    // tokens too, as for its password: before, a deactivated user's token kept working.
    if database.account_locked(server, &read, &entry) {
        return Err(invalid());
    }
    let values_max = server.settings().bind_password_values_max;
    let stored = entry
        .values_of(attribute)
        .iter()
        .take(values_max)
        .map(|(stored, _)| stored.to_vec())
        .collect();
    let identity = Identity {
        dn: dn.to_string(),
        is_rootdn: false,
        normalized_dn: normalized,
    };
    Ok((identity, stored))
}
