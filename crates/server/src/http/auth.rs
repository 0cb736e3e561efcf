//! Who an HTTP request runs as. `Authorization: Basic` is a simple bind (a DN, or a userName
//! turned into `<naming attribute>=<it>,<users base>`), through `operations::bind`: the bind
//! throttle, the password policy, the stats log. `Authorization: Bearer lmdir.<DN in
//! base64url>.<secret>` acts as that DN when the secret matches one of the entry's
//! `lmdirBearerToken` values (hashed, `{SHA256}`/`{SSHA256}` …, verified as userPassword values
//! are, under the same access rule: `auth` access for anonymous) — the check runs under the
//! same failed-bind throttle as a bind of that DN. A token is refused where a bind would be
//! refused or restricted (a locked account, a password reset under pwdMustChange, an expired
//! one, no TLS under `require_tls`), and never acts as the rootdn (one on the rootdn's own
//! entry is refused). Anything else is 401.

use super::directory::DirectoryClient;
use super::{HttpRequest, HttpState};
use crate::client_limits::ClientKey;
use crate::context::{database_of, ServerContext};
use crate::identity::Identity;
use crate::result::{code, OperationError};
use base64::Engine;
use tracing::info;

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

/// A `lmdir.<base64url DN>.<secret>` token's identity. Checked as a bind is: under the
/// failed-bind throttle of that DN and client, with the bind decoy verified when the DN holds
/// no token to match (so the delay does not tell which entries hold tokens), and one log line
/// per attempt naming the DN, the client and, when refused, why.
async fn bearer_identity(
    state: &HttpState,
    client: &DirectoryClient,
    token: &str,
) -> Result<Identity, Unauthenticated> {
    let session = client.session();
    let refuse = |dn: &str, reason: &str| {
        info!(
            "conn={} bearer token for dn=\"{}\" from {} refused: {reason}",
            session.connection_id,
            crate::log_text::escaped(dn),
            session.client
        );
        Unauthenticated
    };
    let rest = token.strip_prefix(BEARER_TOKEN_PREFIX);
    let Some((encoded_dn, secret)) = rest.and_then(|rest| rest.split_once('.')) else {
        return Err(refuse("", "not an lmdir token"));
    };
    let dn = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded_dn)
        .ok()
        .and_then(|dn| String::from_utf8(dn).ok())
        .ok_or_else(|| refuse("", "no DN in the token"))?;
    let server = &state.server;
    if server.settings().require_tls && !session.is_secure() {
        // A token is a credential as a password is: refused without TLS as a simple bind is
        // (the plain-http listener on loopback included).
        return Err(refuse(&dn, "require_tls and no TLS"));
    }
    let normalized = database_of(server).and_then(|database| database.normalize_dn(&dn).ok());
    let check = check_token(server, session.client, &dn, secret.as_bytes());
    match crate::password::throttled(server, session, &dn, normalized.as_deref(), check).await {
        Ok(identity) => {
            info!(
                "conn={} bearer token for dn=\"{}\" from {} accepted",
                session.connection_id,
                crate::log_text::escaped(&dn),
                session.client
            );
            Ok(identity)
        }
        Err(refusal) => Err(refuse(&dn, &refusal.message)),
    }
}

/// The identity `secret` authenticates as through `dn`'s tokens; refused (the error's message
/// says why, for the log) after as much work as a wrong secret for a token holder costs.
async fn check_token(
    server: &ServerContext,
    client: ClientKey,
    dn: &str,
    secret: &[u8],
) -> Result<Identity, OperationError> {
    let refused = |reason: &str| OperationError::new(code::INVALID_CREDENTIALS, reason);
    let candidate = token_candidate(server, dn)?;
    if candidate.stored.is_empty() {
        crate::password::verify_decoy(server, client, secret).await?;
        return Err(refused(candidate.refusal.unwrap_or(WRONG_TOKEN)));
    }
    let stored = candidate.stored;
    let matched = crate::password::any_password_matches(server, client, stored, secret, Some(dn));
    match (matched.await?, candidate.refusal, candidate.identity) {
        (true, None, Some(identity)) => Ok(identity),
        (true, Some(reason), _) => Err(refused(reason)),
        _ => Err(refused(WRONG_TOKEN)),
    }
}

/// What an HTTP sign-in (a console session) was authenticated against, so the session ends
/// when it changes: a digest of the rootpw for the rootdn, of the entry's userPassword values
/// for anyone else. Before, an administrator's reset, a change made elsewhere or a rootpw
/// rotation left every session signed in with the old password alive for up to 12 hours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CredentialMark(pub(crate) [u8; 32]);

fn rootpw_mark(server: &ServerContext) -> CredentialMark {
    use sha2::{Digest, Sha256};
    let rootpw = server.settings().rootpw.clone();
    let mut digest = Sha256::new();
    digest.update(b"rootpw");
    digest.update(rootpw.as_bytes());
    CredentialMark(digest.finalize().into())
}

/// `dn`'s mark now (None: no database, an invalid DN, no such entry). A sign-in takes it
/// before its bind, so a change between the two ends the session rather than being missed.
pub fn credential_mark(server: &ServerContext, dn: &str) -> Option<CredentialMark> {
    let database = database_of(server)?;
    let normalized = database.normalize_dn(dn).ok()?;
    if !server.settings().rootpw.is_empty() && database.policy().is_rootdn(&normalized) {
        return Some(rootpw_mark(server));
    }
    let read = database.store.read().ok()?;
    let id = read.normalized_dn_to_id(&normalized).ok()?;
    let entry = read.entry(id).ok()??;
    Some(CredentialMark(database.password_digest(&entry)))
}

/// Whether an identity signed in earlier with `mark` (a console session) may still act: the
/// rootdn while the rootpw is the one it signed in with; an entry while it exists, its
/// password policy does not hold it locked and its userPassword values are those it signed
/// in against.
pub fn may_still_act_as(server: &ServerContext, identity: &Identity, mark: CredentialMark) -> bool {
    if identity.is_rootdn {
        return !server.settings().rootpw.is_empty() && rootpw_mark(server) == mark;
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
        Ok(Some(entry)) => {
            !database.account_locked(server, &read, &entry)
                && CredentialMark(database.password_digest(&entry)) == mark
        }
        _ => false,
    }
}

/// Why a token is refused when nothing more is known (logged; the client sees 401 alone).
const WRONG_TOKEN: &str = "invalid credentials";

/// What a token naming `dn` is checked against.
#[derive(Default)]
struct TokenCandidate {
    identity: Option<Identity>,
    /// The entry's token hashes anonymous may authenticate with (at most
    /// `bind_password_values_max`); empty: nothing to match, the decoy is verified instead.
    stored: Vec<Vec<u8>>,
    /// Set when the token is refused whatever its secret; its values are still verified, so
    /// the refusal takes a wrong secret's time (as a locked account's bind does).
    refusal: Option<&'static str>,
}

/// `dn`'s token hashes and whether its account may act through them now.
fn token_candidate(server: &ServerContext, dn: &str) -> Result<TokenCandidate, OperationError> {
    let nothing = |reason| TokenCandidate {
        refusal: Some(reason),
        ..TokenCandidate::default()
    };
    let Some(database) = database_of(server) else {
        return Ok(nothing(WRONG_TOKEN));
    };
    let (Ok(normalized), Some(attribute)) = (
        database.normalize_dn(dn),
        database.schema().attribute(BEARER_TOKEN_ATTRIBUTE),
    ) else {
        return Ok(nothing(WRONG_TOKEN));
    };
    if database.policy().is_rootdn(&normalized) {
        // The rootdn's entry (Debian makes `cn=admin,<suffix>` one) holds tokens whoever may
        // write it put there: a token never acts as the rootdn, past every rule and policy.
        return Ok(nothing("it names the rootdn, which no token acts as"));
    }
    let read = database.store.read().map_err(crate::context::internal)?;
    let Ok(id) = read.normalized_dn_to_id(&normalized) else {
        return Ok(nothing(WRONG_TOKEN));
    };
    let Some(entry) = read.entry(id).map_err(OperationError::from)? else {
        return Ok(nothing(WRONG_TOKEN));
    };
    let groups = database.groups(&read);
    let anonymous = Identity::default();
    let subject = database.subject(&anonymous, &groups);
    let policy = database.policy();
    if !policy
        .for_entry(&subject, &normalized, &entry)
        .can_authenticate_with(attribute)
    {
        return Ok(nothing(WRONG_TOKEN));
    }
    // An account a bind would refuse or restrict is refused to its tokens too: locked (its
    // policy's lockout, SCIM's `active: false`), reset by an administrator under
    // pwdMustChange, or expired. Before, such accounts' tokens kept reading and writing.
    let refusal = database
        .account_refuses_tokens(server, &read, &entry)
        .then_some("the account is locked, its password reset or expired");
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
    Ok(TokenCandidate {
        identity: Some(identity),
        stored,
        refusal,
    })
}
