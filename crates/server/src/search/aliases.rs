//! Alias dereferencing (a search's derefAliases), as OpenLDAP's back-mdb does it:
//!
//! - finding the base (`find`, `always`): while the base is an alias, its aliasedObjectName is
//!   followed; a missing target or a loop is aliasProblem (33) and a chain longer than
//!   `CHAIN_DEPTH_MAX` aliasDereferencingProblem (36), the matched DN the last alias followed;
//! - in searching (`search`, `always`), one-level and subtree: alias entries in scope are not
//!   returned; each one's target is searched instead (subtree: the target's subtree, whose own
//!   aliases are followed in turn; one-level: the target entry). An alias that cannot be
//!   followed is skipped; a search that is the base alias itself with `search` only returns it.
//!
//! Nothing hidden shows through an alias: an alias or target the subject may not know of
//! (no disclose on `entry`) is followed as a missing one, and every entry returned passes the
//! same access checks as any search's. Aliases in scope are found by `(objectClass=alias)`
//! through the store's search (the objectClass eq index, or a scan without it).

use crate::context::Database;
use crate::result::{code, OperationError};
use lmdir_access::acl::Subject;
use lmdir_schema::{AttrId, LdapError, ResultCode};
use lmdir_store::{CandidateMemo, EntryId, EntryRef, ReadTxn, Scope, SearchSpec};
use std::collections::HashSet;

/// Most aliases one chain follows before aliasDereferencingProblem: slapd's default
/// (`SLAPD_DEFAULT_MAXDEREFDEPTH`).
pub(super) const CHAIN_DEPTH_MAX: usize = 15;
/// Most alias entries a search dereferences in its scope before adminLimitExceeded: each
/// one adds a subtree to search, and a directory of aliases must not make one search
/// unbounded.
pub(super) const ALIASES_FOLLOWED_MAX: usize = 256;

/// What a search's derefAliases asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Deref {
    pub finding: bool,
    pub searching: bool,
}

impl Deref {
    pub(super) fn of(aliases: &ldap3_proto::proto::LdapDerefAliases) -> Deref {
        use ldap3_proto::proto::LdapDerefAliases;
        let (finding, searching) = match aliases {
            LdapDerefAliases::Never => (false, false),
            LdapDerefAliases::InSearching => (false, true),
            LdapDerefAliases::FindingBaseObj => (true, false),
            LdapDerefAliases::Always => (true, true),
        };
        Deref { finding, searching }
    }

    /// What dereferencing does in `read`'s snapshot: nothing when it holds no alias entry
    /// (`ReadTxn::may_hold_aliases`), so a client asking for it by default (JNDI's `always`)
    /// pays nothing per search or per entry there.
    pub(super) fn within(self, read: &ReadTxn) -> Result<Deref, OperationError> {
        let asks = self.finding || self.searching;
        Ok(match asks && !read.may_hold_aliases()? {
            true => Deref {
                finding: false,
                searching: false,
            },
            false => self,
        })
    }
}

/// Tells alias entries apart: the objectClass values hold `alias` (normalized: lowercased).
#[derive(Clone, Copy, Debug)]
pub(super) struct AliasTest {
    object_class: AttrId,
}

impl AliasTest {
    pub(super) fn new(schema: &lmdir_schema::Schema) -> AliasTest {
        AliasTest {
            object_class: schema.object_class_attribute(),
        }
    }

    pub(super) fn is_alias(&self, entry: &EntryRef<'_>) -> bool {
        entry
            .values_of(self.object_class)
            .iter()
            .any(|(_, normalized)| normalized.as_ref() == b"alias")
    }
}

/// Follows aliases in one read txn, as one subject may see the entries.
pub(super) struct Aliases<'a> {
    database: &'a Database,
    read: &'a ReadTxn,
    subject: &'a Subject<'a>,
    test: AliasTest,
}

/// Where a chain of aliases ends: the first entry that is not an alias, or why it cannot be
/// followed (an LDAP result to send when it was the base).
type ChainEnd = Result<EntryId, OperationError>;

impl<'a> Aliases<'a> {
    pub(super) fn new(
        database: &'a Database,
        read: &'a ReadTxn,
        subject: &'a Subject<'a>,
    ) -> Aliases<'a> {
        Aliases {
            database,
            read,
            subject,
            test: AliasTest::new(&database.schema()),
        }
    }

    /// The entry of `normalized`, when it exists and the subject may know of it.
    fn disclosed(
        &self,
        normalized: &str,
    ) -> Result<Option<(EntryId, EntryRef<'a>)>, OperationError> {
        let id = match self.read.normalized_dn_to_id(normalized) {
            Ok(id) => id,
            Err(error) if error.code == ResultCode::NoSuchObject => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let Some(entry) = self.read.entry(id)? else {
            return Ok(None);
        };
        let policy = self.database.policy();
        let known = policy
            .for_entry(self.subject, normalized, &entry)
            .can_disclose_entry();
        Ok(known.then_some((id, entry)))
    }

    /// The base's target when the base is an alias the subject may know of (None: the base
    /// is searched as it is, missing or hidden ones answering as usual); Err is the result
    /// the search ends with.
    pub(super) fn deref_base(
        &self,
        normalized_base: &str,
    ) -> Result<Option<String>, OperationError> {
        let Some((id, entry)) = self.disclosed(normalized_base)? else {
            return Ok(None);
        };
        if !self.test.is_alias(&entry) {
            return Ok(None);
        }
        let target = self.follow(id, entry, None)??;
        Ok(Some(self.read.normalized_dn_of(target)?))
    }

    /// Follows the alias `id` to the first entry that is not one. `visited`: the aliases a
    /// search in scope has followed already, not followed again. The outer Err is a store
    /// failure, the inner one why this chain cannot be followed.
    fn follow(
        &self,
        mut id: EntryId,
        mut entry: EntryRef<'a>,
        mut visited: Option<&mut HashSet<EntryId>>,
    ) -> Result<ChainEnd, OperationError> {
        let mut chain = Vec::new();
        loop {
            let problem = |result_code, text: &str| -> Result<ChainEnd, OperationError> {
                let mut error = OperationError::new(result_code, text);
                error.matched_dn = self.read.dn_of(id)?;
                Ok(Err(error))
            };
            if chain.len() >= CHAIN_DEPTH_MAX {
                return problem(
                    code::ALIAS_DEREFERENCING_PROBLEM,
                    "maximum deref depth exceeded",
                );
            }
            if let Some(visited) = visited.as_deref_mut() {
                if !visited.insert(id) {
                    return problem(code::ALIAS_DEREFERENCING_PROBLEM, "alias already followed");
                }
            }
            if chain.contains(&id) {
                return problem(code::ALIAS_PROBLEM, "circular alias");
            }
            chain.push(id);
            let Some(target) = self.aliased_dn(&entry) else {
                return problem(code::ALIAS_PROBLEM, "alias aliasedObjectName is invalid");
            };
            // A target the subject may not know of is answered as a missing one.
            let Some((next, next_entry)) = self.disclosed(&target)? else {
                return problem(code::ALIAS_PROBLEM, "aliasedObject not found");
            };
            if !self.test.is_alias(&next_entry) {
                return Ok(Ok(next));
            }
            (id, entry) = (next, next_entry);
        }
    }

    /// The alias's aliasedObjectName, normalized (None: absent, several or not a DN).
    fn aliased_dn(&self, entry: &EntryRef<'_>) -> Option<String> {
        let schema = self.database.schema();
        let attribute = schema.attribute("aliasedObjectName")?;
        let values = entry.values_of(attribute);
        let [(original, _)] = values.as_slice() else {
            return None;
        };
        let text = std::str::from_utf8(original).ok()?;
        schema.normalize_dn_str(text).ok()
    }

    /// The entries a search in `scope` (one-level or subtree) at `base` also searches by
    /// following the aliases in its scope, bounded by `ALIASES_FOLLOWED_MAX` (else
    /// adminLimitExceeded) and `stop` (time limit, abandon): for a subtree search the roots of
    /// further subtrees, none within another or within the base; for a one-level search the
    /// targets that are not already children of the base.
    pub(super) fn scope_roots(
        &self,
        base: EntryId,
        scope: Scope,
        lookthrough: usize,
        stop: &dyn Fn() -> Option<LdapError>,
    ) -> Result<Vec<EntryId>, OperationError> {
        let schema = self.database.schema();
        let alias_filter = lmdir_schema::Filter::parse("(objectClass=alias)", 4)?;
        let alias_filter = schema.prepare_filter(&alias_filter);
        let mut visited = HashSet::new();
        let mut roots = vec![base];
        let mut followed = 0;
        let mut next = 0;
        while let Some(&root) = roots.get(next) {
            next += 1;
            let spec = SearchSpec {
                base: self.read.normalized_dn_of(root)?,
                scope: if scope == Scope::One {
                    Scope::One
                } else {
                    Scope::Sub
                },
                filter: alias_filter.clone(),
                size_limit: 0,
                lookthrough_limit: lookthrough,
            };
            for alias in self.aliases_in(&spec, root, base, stop)? {
                followed += 1;
                if followed > ALIASES_FOLLOWED_MAX {
                    return Err(OperationError::new(
                        code::ADMIN_LIMIT_EXCEEDED,
                        format!("more than {ALIASES_FOLLOWED_MAX} aliases to dereference"),
                    ));
                }
                let Some(entry) = self.read.entry(alias)? else {
                    continue;
                };
                if let Ok(target) = self.follow(alias, entry, Some(&mut visited))? {
                    if self.adds_to_scope(target, &roots, scope)? {
                        roots.push(target);
                    }
                }
            }
            if scope == Scope::One {
                break;
            }
        }
        let targets = roots.split_off(1);
        match scope {
            Scope::Sub => self.outermost(targets),
            _ => Ok(targets),
        }
    }

    /// The alias entries the subject may know of that `spec` finds, but the search's base.
    fn aliases_in(
        &self,
        spec: &SearchSpec,
        root: EntryId,
        base: EntryId,
        stop: &dyn Fn() -> Option<LdapError>,
    ) -> Result<Vec<EntryId>, OperationError> {
        let mut found = Vec::new();
        let cursor = self
            .read
            .search_from(spec, root, CandidateMemo::default())?
            .stop_when(stop);
        for item in cursor {
            let (id, entry) = item?;
            // The base itself is dereferenced only when finding it (as back-mdb).
            if id == base || !self.test.is_alias(&entry) {
                continue;
            }
            let normalized = self.read.normalized_dn_of(id)?;
            let policy = self.database.policy();
            if policy
                .for_entry(self.subject, &normalized, &entry)
                .can_disclose_entry()
            {
                found.push(id);
            }
        }
        Ok(found)
    }

    /// Whether `target` widens the search: not the base or a root already there; for a
    /// subtree, not within one; for one-level, not a child of the base.
    fn adds_to_scope(
        &self,
        target: EntryId,
        roots: &[EntryId],
        scope: Scope,
    ) -> Result<bool, OperationError> {
        if scope == Scope::One {
            let base = roots[0];
            return Ok(!roots.contains(&target) && self.read.parent_of(target)? != Some(base));
        }
        for root in roots {
            if self.read.is_within(target, *root)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `roots` less those within another of them (a later root may hold an earlier one).
    fn outermost(&self, roots: Vec<EntryId>) -> Result<Vec<EntryId>, OperationError> {
        let mut kept = Vec::with_capacity(roots.len());
        for (index, root) in roots.iter().enumerate() {
            let mut inner = false;
            for (other_index, other) in roots.iter().enumerate() {
                if other_index != index && self.read.is_within(*root, *other)? {
                    inner = true;
                    break;
                }
            }
            if !inner {
                kept.push(*root);
            }
        }
        Ok(kept)
    }
}
