//! Which stored entries a search never returns, whatever the subject's access: decided once
//! per search, as back-mdb's search loop decides them, before the access and filter tests.
//! - Glue entries (`glue.rs`) without ManageDsaIT; the walk still goes below them.
//! - Alias entries when aliases are dereferenced in searching (`aliases.rs`), but a base
//!   alias not dereferenced when finding it.
//! - Subentries (`objectClass: subentry`, RFC 3672) by the Subentries control: without it a
//!   one-level or subtree search skips them and a base search returns one; with it TRUE only
//!   subentries are returned, FALSE only ordinary entries, in every scope.
//!
//! Each class is tested only where the snapshot may hold it (`ReadTxn::may_hold_glue`,
//! `may_hold_subentries`; the alias test only when dereferencing, which already asked), so
//! a search of a directory without them pays nothing per entry. The server's searches
//! (`VisibleEntries`: unsorted, sorted, paged, VLV, sync and persistent alike) and the
//! offline `lmdir search` share this one decision.

use lmdir_schema::{EntryView, Filter, LdapError, PreparedFilter, Schema};
use lmdir_store::{EntryId, EntryRef, ReadTxn, Scope};

use super::aliases::AliasTest;

/// What a search does with subentries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubentryRule {
    /// Returned like any entry (a base search without the control, or a snapshot without
    /// subentries hiding them): nothing tested.
    Untested,
    /// Not returned.
    Hidden,
    /// The only entries returned (the control TRUE).
    Only,
}

impl SubentryRule {
    /// back-mdb's rule: a subentry is returned by a base search unless the control is FALSE,
    /// by a wider one only when it is TRUE; an ordinary entry whenever it is not TRUE.
    fn of(scope: Scope, control: Option<bool>) -> SubentryRule {
        match (control, scope) {
            (Some(true), _) => SubentryRule::Only,
            (None, Scope::Base) => SubentryRule::Untested,
            (Some(false), _) | (None, _) => SubentryRule::Hidden,
        }
    }
}

/// The entries one search skips (see the module's text).
pub struct HiddenEntries<'a> {
    schema: &'a Schema,
    /// Glue entries are skipped and the snapshot may hold some.
    glue: bool,
    /// Alias entries are skipped, but the one kept (a base alias not dereferenced when
    /// finding it).
    aliases: Option<(AliasTest, Option<EntryId>)>,
    subentries: SubentryRule,
    /// `(|(objectClass=subentry)(objectClass=2.5.17.0))`, prepared once when tested.
    subentry_test: Option<PreparedFilter>,
}

impl<'a> HiddenEntries<'a> {
    /// The entries a search of `scope` in `read` skips, with the Subentries control's value
    /// (None: not sent); glue is skipped until `showing_glue`, aliases kept until
    /// `skipping_aliases`.
    pub fn new(
        read: &'a ReadTxn,
        scope: Scope,
        subentries: Option<bool>,
    ) -> Result<HiddenEntries<'a>, LdapError> {
        let schema = read.schema();
        let mut rule = SubentryRule::of(scope, subentries);
        if rule == SubentryRule::Hidden && !read.may_hold_subentries()? {
            rule = SubentryRule::Untested;
        }
        let subentry_test = (rule != SubentryRule::Untested).then(|| subentry_filter(schema));
        Ok(HiddenEntries {
            schema,
            glue: read.may_hold_glue()?,
            aliases: None,
            subentries: rule,
            subentry_test,
        })
    }

    /// With ManageDsaIT (or offline, reading everything) glue entries are returned like any
    /// other, as back-mdb does.
    pub fn showing_glue(mut self, shown: bool) -> Self {
        self.glue &= !shown;
        self
    }

    /// Alias entries are skipped (aliases dereferenced in searching), but `kept`.
    pub(super) fn skipping_aliases(mut self, kept: Option<EntryId>) -> Self {
        self.aliases = Some((AliasTest::new(self.schema), kept));
        self
    }

    /// Whether the search skips the stored entry `id`.
    pub fn hides(&self, id: EntryId, entry: &EntryRef<'_>) -> bool {
        if self.glue && crate::glue::entry_is_glue(self.schema, entry) {
            return true;
        }
        if let Some((test, kept)) = &self.aliases {
            if *kept != Some(id) && test.is_alias(entry) {
                return true;
            }
        }
        self.hides_by_class(entry)
    }

    /// Whether the search skips an entry that is not in the store as `view` shows it (one as
    /// it was before a change, for a persistent search): by the subentry rule.
    pub fn hides_by_class(&self, view: &dyn EntryView) -> bool {
        let Some(test) = &self.subentry_test else {
            return false;
        };
        let subentry = test.evaluate(view).is_true();
        match self.subentries {
            SubentryRule::Untested => false,
            SubentryRule::Hidden => subentry,
            SubentryRule::Only => !subentry,
        }
    }
}

fn subentry_filter(schema: &Schema) -> PreparedFilter {
    let items = lmdir_schema::SUBENTRY_CLASS_VALUES
        .iter()
        .map(|value| Filter::Equality {
            description: "objectClass".to_string(),
            value: value.as_bytes().to_vec(),
        })
        .collect();
    schema.prepare_filter(&Filter::Or(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subentry_rule_is_back_mdbs() {
        use SubentryRule::{Hidden, Only, Untested};
        let cases = [
            (Scope::Base, None, Untested),
            (Scope::One, None, Hidden),
            (Scope::Sub, None, Hidden),
            (Scope::Base, Some(false), Hidden),
            (Scope::Sub, Some(false), Hidden),
            (Scope::Base, Some(true), Only),
            (Scope::One, Some(true), Only),
        ];
        for (scope, control, rule) in cases {
            assert_eq!(
                SubentryRule::of(scope, control),
                rule,
                "{scope:?} {control:?}"
            );
        }
    }
}
