//! What a reload replaces as one: the settings and the rules compiled from them (access,
//! limits, integrity, dynamic groups). Below the database (`context`) and the writer, which
//! both take them.

use std::sync::Arc;

use lmdir_access::acl::AccessPolicy;
use lmdir_schema::Schema;

use crate::settings::ServerSettings;

/// The database's rules, compiled against the schema: what a reload replaces with the
/// settings, as one (`Running`).
pub(crate) struct Rules {
    /// `[[access]]`: an operation takes it once and decides with it throughout; the writer
    /// takes it per batch.
    pub(crate) policy: Arc<AccessPolicy>,
    /// `[[limits]]`: search limits per identity.
    pub(crate) limits: crate::limits::IdentityLimits,
    /// `[integrity]` (refint, unique): the writer applies it in its txn, taken per batch.
    pub(crate) integrity: crate::integrity::Integrity,
    /// `[[dynlist]]` rules.
    pub(crate) dynlist: Arc<Vec<crate::dynlist::DynamicGroup>>,
}

impl Rules {
    /// `policy` and no other rule: a database before the server starts, and tests.
    pub(crate) fn with_policy(policy: AccessPolicy) -> Rules {
        Rules {
            policy: Arc::new(policy),
            limits: crate::limits::IdentityLimits::default(),
            integrity: crate::integrity::Integrity::default(),
            dynlist: Arc::default(),
        }
    }

    /// The rules `settings` names, compiled against `schema` (an unknown name is an error
    /// naming it), with `policy`.
    pub(crate) fn compile(
        policy: Arc<AccessPolicy>,
        settings: &ServerSettings,
        schema: &Schema,
    ) -> Result<Rules, String> {
        Ok(Rules {
            policy,
            limits: crate::limits::IdentityLimits::compile(&settings.limits, schema)
                .map_err(|problem| format!("[[limits]]: {problem}"))?,
            integrity: crate::integrity::Integrity::compile(
                &settings.integrity,
                schema,
                &settings.suffix,
            )?,
            dynlist: Arc::new(crate::dynlist::compile(&settings.dynlist, schema)?),
        })
    }
}

/// What an operation takes of the configuration (settings and rules), replaced whole by a
/// reload. Invariant: one store swaps all of it, so each read of the live configuration sees
/// all of one side: never the new settings with the old access rules (a dropped
/// `require_authentication` without the `by anonymous none` added with it), or the reverse.
/// An operation that reads it twice (the settings at dispatch, the policy when it runs) can
/// still straddle a reload: it does not hold one snapshot yet.
pub(crate) struct Running {
    pub(crate) settings: Arc<ServerSettings>,
    pub(crate) rules: Arc<Rules>,
}
