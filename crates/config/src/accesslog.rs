//! `[accesslog]`: the audit trail of accepted writes, kept as OpenLDAP's accesslog overlay
//! keeps it (records under `cn=accesslog`, `logops writes`, `logsuccess TRUE`), bounded by age
//! and count.

use serde::Deserialize;

use crate::{problem, KeyStep, Problem};

/// Most records `max_entries` may keep (each is a few hundred bytes in LMDB).
pub const ACCESSLOG_ENTRIES_MAX: u64 = 10_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccesslogConfig {
    /// Record every accepted add, modify, delete and modrdn, in the write's transaction.
    pub enabled: bool,
    /// Records older than this are purged as writes come (OpenLDAP's logpurge age); 0 = none
    /// purged by age.
    pub max_age_seconds: u64,
    /// Most records kept: the oldest go first (1..=ACCESSLOG_ENTRIES_MAX).
    pub max_entries: u64,
    /// Also record the values a write replaces (reqOld): a delete's whole entry, a modify's
    /// old values of the attributes it changed (OpenLDAP's `logold (objectClass=*)`).
    pub log_old: bool,
}

impl Default for AccesslogConfig {
    fn default() -> Self {
        AccesslogConfig {
            enabled: false,
            max_age_seconds: 7 * 86_400,
            max_entries: 100_000,
            log_old: false,
        }
    }
}

impl AccesslogConfig {
    pub(crate) fn validate(&self) -> Result<(), Problem> {
        if !(1..=ACCESSLOG_ENTRIES_MAX).contains(&self.max_entries) {
            return Err(problem(
                vec![KeyStep::Key("accesslog"), KeyStep::Key("max_entries")],
                format!("must be 1..={ACCESSLOG_ENTRIES_MAX}"),
            ));
        }
        Ok(())
    }
}
