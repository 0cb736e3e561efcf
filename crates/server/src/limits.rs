//! Per-identity search limits: the `[[limits]]` rules (OpenLDAP's `limits` directive), so a
//! service account can page through the whole directory while anonymous keeps the server's
//! limits.

use std::time::Duration;

use lmdir_access::acl::{Subject, SubjectSelector};
use lmdir_config::{Limit, LimitsRule};
use lmdir_schema::Schema;

use crate::settings::ServerSettings;

/// The `[[limits]]` rules in config order, each `who` parsed against the schema.
#[derive(Debug, Clone, Default)]
pub struct IdentityLimits {
    rules: Vec<(SubjectSelector, LimitsRule)>,
}

/// The limits one search runs under; 0 / zero = unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EffectiveLimits {
    /// Entries of one (unpaged) search.
    pub size: u64,
    pub time: Duration,
    /// Candidates the store examines.
    pub lookthrough: u64,
    /// Entries over all pages of one paged search.
    pub paged_total: u64,
    /// Largest page honoured.
    pub page_size: u64,
}

impl EffectiveLimits {
    const UNLIMITED: EffectiveLimits = EffectiveLimits {
        size: 0,
        time: Duration::ZERO,
        lookthrough: 0,
        paged_total: 0,
        page_size: 0,
    };
}

impl IdentityLimits {
    /// Parses the rules' `who` (DNs normalized with the schema); errors name the rule.
    pub fn compile(rules: &[LimitsRule], schema: &Schema) -> Result<IdentityLimits, String> {
        let rules = rules
            .iter()
            .enumerate()
            .map(|(index, rule)| {
                // The config's `Who` displays as the config word, which the selector parses.
                SubjectSelector::parse(&rule.who.to_string(), schema)
                    .map(|selector| (selector, rule.clone()))
                    .map_err(|reason| format!("limits[{index}].who: {reason}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(IdentityLimits { rules })
    }

    /// The subject's limits: the first rule whose `who` matches, its absent keys the server's;
    /// none for the rootdn.
    pub(crate) fn resolve(
        &self,
        settings: &ServerSettings,
        subject: &Subject<'_>,
    ) -> EffectiveLimits {
        if subject.is_rootdn {
            return EffectiveLimits::UNLIMITED;
        }
        let rule = self
            .rules
            .iter()
            .find(|(who, _)| who.matches(subject))
            .map(|(_, rule)| rule);
        let pick = |key: fn(&LimitsRule) -> Option<Limit>, default: u64| {
            rule.and_then(key).map_or(default, Limit::zero_unlimited)
        };
        let size = pick(|rule| rule.size, settings.size_limit);
        EffectiveLimits {
            size,
            time: rule
                .and_then(|rule| rule.time_seconds)
                .map_or(settings.time_limit, |limit| {
                    Duration::from_secs(limit.zero_unlimited())
                }),
            lookthrough: pick(|rule| rule.lookthrough, settings.lookthrough_limit),
            // As OpenLDAP's size.prtotal: without its own value a paged search gets the size
            // limit as a total, so paging never escapes it.
            paged_total: pick(|rule| rule.paged_total, size),
            page_size: pick(|rule| rule.page_size, 0),
        }
    }
}
