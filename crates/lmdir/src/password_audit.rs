//! `lmdir check`'s account of stored passwords: userPassword values counted by scheme, and the
//! entries whose values no bind can verify (unknown scheme, malformed value, cost over the
//! bound). These are warnings, not damage: a Dovecot `{BLF-CRYPT}` or a foreign hash is kept on
//! purpose, so the exit status stays the store check's.

use std::collections::BTreeMap;
use std::fmt;

use anyhow::Result;
use lmdir_access::password;
use lmdir_store::Store;

/// Unverifiable values listed one per line; the count covers all.
const UNVERIFIABLE_LISTED_MAX: usize = 1000;

#[derive(Debug, Default)]
pub struct PasswordAudit {
    /// Values per scheme label (`password::scheme_label`).
    by_scheme: BTreeMap<String, u64>,
    /// `dn: value #i (SCHEME): why`, at most `UNVERIFIABLE_LISTED_MAX`.
    unverifiable: Vec<String>,
    unverifiable_count: u64,
}

/// Reads every entry's userPassword values under one read txn.
pub fn audit(store: &Store) -> Result<PasswordAudit> {
    let mut audit = PasswordAudit::default();
    let read = store.read()?;
    let Some(attr) = read.schema().attribute("userPassword") else {
        return Ok(audit);
    };
    for id in read.ids_parents_first()? {
        let Some(entry) = read.entry(id)? else {
            continue;
        };
        let values = entry.values_of(attr);
        if values.is_empty() {
            continue;
        }
        let dn = read.dn_of(id)?;
        for (index, (stored, _)) in values.iter().enumerate() {
            let label = password::scheme_label(stored);
            if let Err(error) = password::check_verifiable(stored) {
                audit.unverifiable_count += 1;
                if audit.unverifiable.len() < UNVERIFIABLE_LISTED_MAX {
                    audit.unverifiable.push(format!(
                        "{dn}: userPassword value #{index} ({label}): {error}"
                    ));
                }
            }
            *audit.by_scheme.entry(label).or_default() += 1;
        }
    }
    Ok(audit)
}

impl fmt::Display for PasswordAudit {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.by_scheme.is_empty() {
            return writeln!(formatter, "userPassword values by scheme: none stored");
        }
        let counts: Vec<String> = self
            .by_scheme
            .iter()
            .map(|(label, count)| format!("{label} {count}"))
            .collect();
        writeln!(
            formatter,
            "userPassword values by scheme: {}",
            counts.join(", ")
        )?;
        for line in &self.unverifiable {
            writeln!(formatter, "warning: {line}")?;
        }
        if self.unverifiable_count > 0 {
            writeln!(
                formatter,
                "warning: {} userPassword values cannot be verified by a bind (kept as stored; \
                 not database damage)",
                self.unverifiable_count
            )?;
        }
        Ok(())
    }
}
