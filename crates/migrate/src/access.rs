//! `access to <what> by <who> <access> [<control>] ...` (slapd.access(5)) into lmdir
//! `[[access]]` rules, where lmdir's model means the same.
//!
//! Both evaluate rules in order, the first rule whose target matches decides, the first
//! matching clause in it wins, and no matching rule or clause means no access; the rootdn is
//! never checked. The database's rules come first, then the global (frontend) ones, as slapd
//! appends them. A rule whose last clause is `by * break` and whose target is everything (the
//! shape Debian's cn=config uses) is translated exactly by putting its other clauses first in
//! every later rule and in a final catch-all rule.

use lmdir_config::{AccessClause, AccessLevel, AccessRule, AccessTarget, Who};

use crate::{Directive, Note, NoteKind};

/// The translated rules, and a note for everything not translated one to one.
pub(crate) struct AccessTranslation {
    pub rules: Vec<AccessRule>,
    pub notes: Vec<Note>,
    /// The notes (also in `notes`) of what was left out where lmdir may then grant more than
    /// slapd did: every rule left out (the rules after it decide what it covered), and every
    /// clause left out whose requesters a later clause of its rule, or after a `by * break`
    /// rule a later rule, grants more. A clause left out where nothing later grants more only
    /// narrows access.
    pub widening: Vec<Note>,
}

/// The database's `access` directives, then the global ones (slapd appends those to every
/// database's). The global ones alone govern the root DSE and cn=Subschema in slapd: a rule
/// there that does not let everyone read them gets a note (lmdir serves both to everyone).
pub(crate) fn translate_access(
    database: &[&Directive],
    global: &[&Directive],
    suffix: &str,
) -> AccessTranslation {
    let directives: Vec<&Directive> = database.iter().chain(global).copied().collect();
    let shapes: Vec<Result<RuleShape, String>> = directives
        .iter()
        .map(|directive| parse_rule(directive.arguments(), suffix))
        .collect();
    let mut warnings = vec![None; database.len()];
    warnings.extend(crate::server_entries::reading_warnings(global));
    let mut translation = AccessTranslation {
        rules: Vec::new(),
        notes: Vec::new(),
        widening: Vec::new(),
    };
    // Clauses of earlier `to * ... by * break` rules, tried first in every later rule.
    let mut break_prefix: Vec<AccessClause> = Vec::new();
    for (index, directive) in directives.iter().enumerate() {
        let note = |kind, reason: String| Note {
            location: directive.location.clone(),
            directive: directive.text.clone(),
            kind,
            reason,
        };
        let warning = warnings[index]
            .take()
            .map(|reason| note(NoteKind::Approximated, reason));
        match &shapes[index] {
            Ok(RuleShape::OutsideSuffix(reason)) => {
                let not_needed = || note(NoteKind::NotNeeded, reason.clone());
                translation.notes.push(warning.unwrap_or_else(not_needed));
            }
            Ok(RuleShape::Rule(rule)) => {
                let later = &shapes[index + 1..];
                add_rule(rule, later, &note, &mut break_prefix, &mut translation);
                translation.notes.extend(warning);
            }
            Err(reason) => {
                let left_out = note(
                    NoteKind::NotTranslated,
                    format!("{reason}; the rule is left out, so the rules after it decide what it covered"),
                );
                translation.widening.push(left_out.clone());
                translation.notes.push(left_out);
                translation.notes.extend(warning);
            }
        }
    }
    if !break_prefix.is_empty() {
        translation.rules.push(AccessRule {
            to: AccessTarget::default(),
            by: break_prefix,
        });
    }
    translation
}

/// One translated rule: its notes, and the rule itself, or (a `by * break` rule) its clauses as
/// the ones later rules try first.
fn add_rule(
    parsed: &ParsedRule,
    later: &[Result<RuleShape, String>],
    note: &dyn Fn(NoteKind, String) -> Note,
    break_prefix: &mut Vec<AccessClause>,
    translation: &mut AccessTranslation,
) {
    let mut clauses = break_prefix.clone();
    for (clause, problem) in &parsed.clauses {
        if let Some(problem) = problem {
            let (reason, widens) = clause_outcome(problem, parsed, later);
            let clause_note = note(problem.kind, reason);
            if widens {
                translation.widening.push(clause_note.clone());
            }
            translation.notes.push(clause_note);
        }
        clauses.extend(clause.clone());
    }
    if parsed.ends_with_break {
        *break_prefix = clauses;
        return;
    }
    if clauses.is_empty() {
        // A rule with no clause denies everyone what it covers; keep that.
        clauses.push(AccessClause {
            who: Who::Anyone,
            access: AccessLevel::None,
        });
    }
    translation.rules.push(AccessRule {
        to: parsed.target.clone(),
        by: clauses,
    });
}

/// A clause note's reason, and whether the clause was left out where a later clause of its
/// rule or (the rule ending in `by * break`, whose clauses go first in every later rule) a
/// later rule grants more than it did.
fn clause_outcome(
    problem: &ClauseNote,
    rule: &ParsedRule,
    later_rules: &[Result<RuleShape, String>],
) -> (String, bool) {
    let mut reason = problem.reason.clone();
    let Some((given, later_clause_grants_more)) = problem.dropped else {
        return (reason, false);
    };
    let later_rule_grant = if rule.ends_with_break {
        later_rules
            .iter()
            .filter_map(|shape| match shape {
                Ok(RuleShape::Rule(later)) => later.highest_grant(),
                _ => None,
            })
            .max()
            .filter(|level| *level > given)
    } else {
        None
    };
    if let Some(more) = later_rule_grant {
        reason += &format!(
            " (REVIEW: a later rule grants {}, more than slapd's {})",
            more.word(),
            given.word()
        );
    }
    (
        reason,
        later_clause_grants_more || later_rule_grant.is_some(),
    )
}

/// How a clause differs from slapd's, when it does.
struct ClauseNote {
    kind: NoteKind,
    reason: String,
    /// For a clause left out: the level it gave in slapd, and whether a later clause of the
    /// rule grants more.
    dropped: Option<(AccessLevel, bool)>,
}

enum RuleShape {
    /// The rule can match no entry of the database (the root DSE, the subschema entry, another
    /// database's tree); why.
    OutsideSuffix(String),
    Rule(ParsedRule),
}

struct ParsedRule {
    target: AccessTarget,
    /// Each clause translated (or `None`) with a note when it was not translated one to one.
    clauses: Vec<(Option<AccessClause>, Option<ClauseNote>)>,
    /// Whether the last clause was `by * break` (only accepted when the target is everything).
    ends_with_break: bool,
}

impl ParsedRule {
    /// The highest level one of its translated clauses grants.
    fn highest_grant(&self) -> Option<AccessLevel> {
        self.clauses
            .iter()
            .filter_map(|(clause, _)| clause.as_ref().map(|clause| clause.access))
            .max()
    }
}

fn parse_rule(words: &[String], suffix: &str) -> Result<RuleShape, String> {
    let Some(first) = words.first() else {
        return Err("empty access directive".to_string());
    };
    if !first.eq_ignore_ascii_case("to") {
        return Err(format!("expected `to` after access, found {first:?}"));
    }
    let by_position = words
        .iter()
        .position(|word| word.eq_ignore_ascii_case("by"))
        .unwrap_or(words.len());
    let target = match parse_target(&words[1..by_position], suffix)? {
        Some(target) => target,
        None => {
            return Ok(RuleShape::OutsideSuffix(format!(
                "applies only to entries outside the suffix {suffix:?} (the root DSE, the \
                 subschema entry or another database), which lmdir's rules do not govern"
            )))
        }
    };
    let clause_words = split_clauses(&words[by_position..])?;
    let mut parsed = Vec::new();
    let mut ends_with_break = false;
    for (index, words) in clause_words.iter().enumerate() {
        let clause = parse_clause(words)?;
        match clause.control {
            Control::Stop => {}
            Control::Break
                if index + 1 == clause_words.len()
                    && clause.is_bare_anyone_break()
                    && target == AccessTarget::default() =>
            {
                ends_with_break = true;
                continue;
            }
            Control::Break if clause.who_text == "*" && !clause.conditions.is_empty() => {
                return Err(format!(
                    "`by {}` passes only the requesters meeting {} on to the next rules (the others \
                     get slapd's implicit `by * none`), which lmdir's first-match rules cannot \
                     express",
                    words.join(" "),
                    clause.conditions.join(" ")
                ))
            }
            Control::Break | Control::Continue => {
                return Err(format!(
                    "`by {}` keeps evaluating further clauses or rules, which lmdir's first-match \
                     rules cannot express",
                    words.join(" ")
                ))
            }
        }
        parsed.push((words, clause));
    }
    let mut clauses = Vec::new();
    for (index, (words, clause)) in parsed.iter().enumerate() {
        let translated = match (&clause.who, &clause.level) {
            (Ok(who), Ok((access, approximation))) => (
                Some(AccessClause {
                    who: who.clone(),
                    access: *access,
                }),
                approximation.clone().map(|reason| ClauseNote {
                    kind: NoteKind::Approximated,
                    reason,
                    dropped: None,
                }),
            ),
            (Err(reason), _) | (_, Err(reason)) => {
                let mut text = format!(
                    "clause `by {}` left out: {reason}; whom it named now falls to the clauses \
                     after it",
                    words.join(" ")
                );
                let given = clause
                    .level
                    .as_ref()
                    .map_or(AccessLevel::None, |level| level.0);
                let later = later_grant_above(&parsed[index + 1..], given);
                if let Some(more) = later {
                    text += &format!(
                        " (REVIEW: a later clause grants {}, more than slapd's {})",
                        more.word(),
                        given.word()
                    );
                }
                let problem = ClauseNote {
                    kind: NoteKind::NotTranslated,
                    reason: text,
                    dropped: Some((given, later.is_some())),
                };
                (None, Some(problem))
            }
        };
        clauses.push(translated);
    }
    Ok(RuleShape::Rule(ParsedRule {
        target,
        clauses,
        ends_with_break,
    }))
}

/// The highest level a translated later clause grants, when above `given`.
fn later_grant_above(later: &[(&Vec<String>, Clause)], given: AccessLevel) -> Option<AccessLevel> {
    later
        .iter()
        .filter(|(_, clause)| clause.who.is_ok())
        .filter_map(|(_, clause)| clause.level.as_ref().ok().map(|level| level.0))
        .max()
        .filter(|level| *level > given)
}

/// The `<what>` words; `None` when they can match no entry under the suffix.
fn parse_target(words: &[String], suffix: &str) -> Result<Option<AccessTarget>, String> {
    let mut target = AccessTarget::default();
    for word in words {
        if word == "*" {
            continue;
        }
        let Some((name, value)) = word.split_once('=') else {
            return Err(format!("unknown access target {word:?}"));
        };
        let (kind, style) = name.split_once('.').unwrap_or((name, ""));
        match kind.to_ascii_lowercase().as_str() {
            "dn" => {
                if !place_dn_target(&mut target, &style.to_ascii_lowercase(), value, suffix)? {
                    return Ok(None);
                }
            }
            // slapd accepts `filter=objectClass=person`; lmdir wants the RFC 4515 parentheses.
            "filter" if value.trim_start().starts_with('(') => {
                target.filter = Some(value.to_string())
            }
            "filter" => target.filter = Some(format!("({value})")),
            "attrs" | "attr" if style.is_empty() => {
                for attribute in value.split(',').map(str::trim) {
                    if attribute.starts_with(['@', '!']) {
                        return Err(format!(
                            "attrs={value}: object class sets ({attribute}) are not translated"
                        ));
                    }
                    target.attrs.push(attribute.to_string());
                }
            }
            _ => {
                return Err(format!(
                    "access target {word:?} (values, regex or other selectors) has no lmdir \
                     counterpart"
                ))
            }
        }
    }
    Ok(Some(target))
}

/// Sets the DN part of a target; false when the DN selects nothing under the suffix.
fn place_dn_target(
    target: &mut AccessTarget,
    style: &str,
    dn: &str,
    suffix_text: &str,
) -> Result<bool, String> {
    let normalized = loose_dn(dn);
    let suffix = loose_dn(suffix_text);
    let within = is_at_or_below(&normalized, &suffix);
    let above = is_at_or_below(&suffix, &normalized);
    match style {
        "" | "base" | "baseobject" | "exact" => {
            if !within {
                return Ok(false);
            }
            target.dn = Some(dn.to_string());
        }
        "sub" | "subtree" => {
            if !within && !above {
                return Ok(false);
            }
            // A subtree at or above the suffix holds every entry of the database.
            if within && normalized != suffix {
                target.subtree = Some(dn.to_string());
            }
        }
        "one" | "onelevel" => {
            if within {
                target.one = Some(dn.to_string());
            } else if loose_parent(&suffix) == Some(normalized.as_str()) {
                // Of the database's entries only the suffix is one level below the DN.
                target.dn = Some(suffix_text.to_string());
            } else {
                return Ok(false);
            }
        }
        "children" => {
            if within {
                target.children = Some(dn.to_string());
            } else if !above {
                return Ok(false);
            }
            // Strictly above the suffix: every entry of the database is below it.
        }
        other => {
            return Err(format!(
                "dn.{other}= targets are not translated (lmdir targets one entry, a subtree, \
                 one level or the entries below a DN)"
            ))
        }
    }
    Ok(true)
}

/// The parent of a `loose_dn` form (`""` for one RDN), `None` for the root; an escaped comma
/// (`\,`) does not separate RDNs.
pub(crate) fn loose_parent(dn: &str) -> Option<&str> {
    if dn.is_empty() {
        return None;
    }
    let mut backslashes = 0;
    for (index, character) in dn.char_indices() {
        match character {
            ',' if backslashes % 2 == 0 => return Some(&dn[index + 1..]),
            '\\' => {
                backslashes += 1;
                continue;
            }
            _ => {}
        }
        backslashes = 0;
    }
    Some("")
}

/// A DN of the config in the form DNs are compared in: normalized by the built-in schema's
/// matching rules (attribute names or OIDs, case, escapes like `\2C` or `\,`, spaces and the
/// order of a multi-valued RDN's parts all compare as slapd compares them). A DN naming an
/// attribute the built-in schema lacks falls back to `loose_dn_text`.
pub(crate) fn loose_dn(dn: &str) -> String {
    lmdir_schema::Schema::builtin_shared()
        .normalize_dn_str(dn.trim())
        .unwrap_or_else(|_| loose_dn_text(dn))
}

/// Lowercased, without spaces around separators.
fn loose_dn_text(dn: &str) -> String {
    dn.split(',')
        .map(|rdn| rdn.split('=').map(str::trim).collect::<Vec<_>>().join("="))
        .collect::<Vec<_>>()
        .join(",")
        .to_lowercase()
}

pub(crate) fn is_at_or_below(dn: &str, ancestor: &str) -> bool {
    ancestor.is_empty() || dn == ancestor || dn.ends_with(&format!(",{ancestor}"))
}

/// The words of each `by` clause (without the `by`).
pub(crate) fn split_clauses(words: &[String]) -> Result<Vec<Vec<String>>, String> {
    let mut clauses: Vec<Vec<String>> = Vec::new();
    for word in words {
        if word.eq_ignore_ascii_case("by") {
            clauses.push(Vec::new());
        } else if let Some(clause) = clauses.last_mut() {
            clause.push(word.clone());
        }
    }
    if clauses.is_empty() || clauses.iter().any(Vec::is_empty) {
        return Err("every access rule needs `by <who> <access>` clauses".to_string());
    }
    Ok(clauses)
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Control {
    Stop,
    Continue,
    Break,
}

pub(crate) struct Clause {
    pub(crate) who_text: String,
    /// Words between the who and the access level (`ssf=128`, `peername.ip=…`).
    pub(crate) conditions: Vec<String>,
    /// The access word as written, when given.
    level_word: Option<String>,
    who: Result<Who, String>,
    /// The level, with the reason when it only approximates slapd's.
    pub(crate) level: Result<(AccessLevel, Option<String>), String>,
    pub(crate) control: Control,
}

pub(crate) fn parse_clause(words: &[String]) -> Result<Clause, String> {
    let who_text = words[0].clone();
    let mut rest = &words[1..];
    let mut conditions = Vec::new();
    while let Some(word) = rest.first() {
        if is_access_word(word) || is_control_word(word) {
            break;
        }
        conditions.push(word.clone());
        rest = &rest[1..];
    }
    // slapd: no access given means none (`+0`).
    let (level, level_word, rest) = match rest.first() {
        Some(word) if is_access_word(word) => (parse_level(word), Some(word.clone()), &rest[1..]),
        _ => (Ok((AccessLevel::None, None)), None, rest),
    };
    let control = match rest.first().map(|word| word.to_ascii_lowercase()) {
        None => Control::Stop,
        Some(word) if word == "stop" => Control::Stop,
        Some(word) if word == "continue" => Control::Continue,
        Some(word) if word == "break" => Control::Break,
        Some(word) => return Err(format!("unexpected {word:?} in `by {}`", words.join(" "))),
    };
    if rest.len() > 1 {
        return Err(format!("unexpected words in `by {}`", words.join(" ")));
    }
    let who = if conditions.is_empty() {
        parse_who(&who_text)
    } else {
        Err(format!(
            "the extra conditions {} cannot be tested by lmdir",
            conditions.join(" ")
        ))
    };
    Ok(Clause {
        who_text,
        conditions,
        level_word,
        who,
        level,
        control,
    })
}

impl Clause {
    /// `by * break` (also `by * +0 break`, as cn=config writes it): everyone, no condition, no
    /// privilege given, go on with the next rule. Any condition (`by * ssf=128 break`) makes
    /// the clause match only some requesters, the others meeting the rule's implicit `by *
    /// none`: that restriction is not the plain pass-through translated here.
    fn is_bare_anyone_break(&self) -> bool {
        let no_privilege = self.level_word.as_deref().is_none_or(|word| {
            ["none", "+0", "=0", "-0"]
                .iter()
                .any(|none| word.eq_ignore_ascii_case(none))
        });
        self.who_text == "*"
            && self.conditions.is_empty()
            && no_privilege
            && self.control == Control::Break
    }
}

const LEVEL_WORDS: &[&str] = &[
    "none", "disclose", "auth", "compare", "search", "read", "write", "add", "delete", "manage",
];

fn is_access_word(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    let level = lower.strip_prefix("self").unwrap_or(&lower);
    LEVEL_WORDS.contains(&level) || lower.starts_with(['=', '+', '-'])
}

fn is_control_word(word: &str) -> bool {
    ["stop", "continue", "break"]
        .iter()
        .any(|control| word.eq_ignore_ascii_case(control))
}

pub(crate) fn parse_level(word: &str) -> Result<(AccessLevel, Option<String>), String> {
    let lower = word.to_ascii_lowercase();
    if lower.starts_with("self") {
        return Err(format!(
            "{word}: levels limited to the requester's own DN as value are not translated"
        ));
    }
    let level = match lower.as_str() {
        "none" => AccessLevel::None,
        "auth" => AccessLevel::Auth,
        "compare" => AccessLevel::Compare,
        "search" => AccessLevel::Search,
        "read" => AccessLevel::Read,
        "write" => AccessLevel::Write,
        "disclose" => {
            return Ok((
                AccessLevel::None,
                Some("lmdir has no disclose level: translated as none (the entry's existence is not disclosed in errors)".to_string()),
            ))
        }
        "manage" => {
            return Ok((
                AccessLevel::Write,
                Some("lmdir has no manage level: translated as write (no Relax control or manageDIT rights)".to_string()),
            ))
        }
        _ => match privilege_set_level(&lower) {
            Some(level) => level,
            None => {
                return Err(format!(
                    "{word}: partial privileges (add, delete, +/- or =set not equal to a level) \
                     are not translated"
                ))
            }
        },
    };
    Ok((level, None))
}

/// `=rscxd` is `read`: an exact privilege set that equals one of the levels (slapd.access(5):
/// each level's privileges include the lower levels'; `w` is `a` plus `z`).
fn privilege_set_level(word: &str) -> Option<AccessLevel> {
    let set = word.strip_prefix('=')?;
    if set == "0" {
        return Some(AccessLevel::None);
    }
    let mut letters: Vec<char> = set.replace('w', "az").chars().collect();
    letters.sort_unstable();
    letters.dedup();
    let letters: String = letters.into_iter().collect();
    let levels = [
        ("dx", AccessLevel::Auth),
        ("cdx", AccessLevel::Compare),
        ("cdsx", AccessLevel::Search),
        ("cdrsx", AccessLevel::Read),
        ("acdrsxz", AccessLevel::Write),
    ];
    levels
        .iter()
        .find(|(set, _)| *set == letters)
        .map(|(_, level)| *level)
}

fn parse_who(text: &str) -> Result<Who, String> {
    match text.to_ascii_lowercase().as_str() {
        "*" => return Ok(Who::Anyone),
        "anonymous" => return Ok(Who::Anonymous),
        "users" => return Ok(Who::Users),
        "self" => return Ok(Who::SelfEntry),
        _ => {}
    }
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!("who {text:?} has no lmdir counterpart"));
    };
    let lower = name.to_ascii_lowercase();
    if value.trim().is_empty() {
        return Err(format!(
            "who {text:?} names the empty DN (the anonymous identity)"
        ));
    }
    if let Some(style) = lower.strip_prefix("dn") {
        return match style.strip_prefix('.').unwrap_or(style) {
            "" | "base" | "baseobject" | "exact" => Ok(Who::Dn(value.to_string())),
            "sub" | "subtree" => Ok(Who::DnSubtree(value.to_string())),
            "one" | "onelevel" => Ok(Who::DnOne(value.to_string())),
            "children" => Ok(Who::DnChildren(value.to_string())),
            other => Err(format!("who dn.{other}= has no lmdir counterpart")),
        };
    }
    if lower.starts_with("group") {
        return group_who(name, value);
    }
    Err(format!("who {name}= has no lmdir counterpart"))
}

/// slapd's `group[/<objectClass>[/<attribute>]][.exact]=<DN>` (for `access` and `limits`):
/// lmdir's `group/<objectClass>/<attribute>=<DN>`, the defaults groupOfNames and member
/// filled in. lmdir's bare `group=` accepts member or uniqueMember on any entry: more than
/// slapd, so it is never written.
pub(crate) fn group_who(name: &str, value: &str) -> Result<Who, String> {
    let rest = &name["group".len()..];
    // The style follows the last dot; an OID's dots (`group/2.5.6.9/member`) are no style.
    let (path, style) = match rest.rsplit_once('.') {
        Some((path, style)) if style.chars().all(|c| c.is_ascii_alphabetic()) => (path, style),
        _ => (rest, ""),
    };
    if !matches!(style.to_ascii_lowercase().as_str(), "" | "exact" | "base") {
        return Err(format!(
            "who {name}=: the {style} style (substitutions) has no lmdir counterpart"
        ));
    }
    let mut parts = path.split('/').skip(1);
    let object_class = parts.next().unwrap_or("groupOfNames");
    let attribute = parts.next().unwrap_or("member");
    if !path.is_empty() && !path.starts_with('/') || parts.next().is_some() {
        return Err(format!("who {name}= has no lmdir counterpart"));
    }
    if object_class.is_empty() || attribute.is_empty() {
        return Err(format!("who {name}=: an empty object class or attribute"));
    }
    // A labeledURI subtype makes slapd evaluate a dynamic group (groupOfURLs' memberURL).
    if ["memberurl", "labeleduri"].contains(&attribute.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "who {name}=: dynamic groups (URL member attributes) are not evaluated by lmdir's \
             access rules"
        ));
    }
    Ok(Who::GroupOf {
        object_class: object_class.to_string(),
        attribute: attribute.to_string(),
        dn: value.to_string(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::conf::split_words;
    use crate::Location;

    /// One directive per line, as a slapd.conf file "t" reads.
    pub(crate) fn directives(lines: &[&str]) -> Vec<Directive> {
        lines
            .iter()
            .enumerate()
            .map(|(index, line)| Directive {
                location: Location {
                    file: "t".into(),
                    line: index as u64 + 1,
                },
                words: split_words(line).unwrap(),
                text: line.to_string(),
            })
            .collect()
    }

    fn run(lines: &[&str]) -> AccessTranslation {
        let list = directives(lines);
        let references: Vec<&Directive> = list.iter().collect();
        translate_access(&references, &[], "dc=example,dc=com")
    }

    fn clause(who: Who, access: AccessLevel) -> AccessClause {
        AccessClause { who, access }
    }

    #[test]
    fn debian_rules_translate_exactly() {
        let peercred = "gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth";
        let translation = run(&[
            "access to attrs=userPassword by self write by anonymous auth by * none",
            "access to attrs=shadowLastChange by self write by * read",
            "access to * by * read",
            &format!("access to * by dn.exact={peercred} manage by * break"),
            "access to dn.exact=\"\" by * read",
            "access to dn.base=\"cn=Subschema\" by * read",
        ]);
        assert_eq!(translation.rules.len(), 4, "{:?}", translation.rules);
        assert_eq!(translation.rules[0].to.attrs, vec!["userPassword"]);
        assert_eq!(
            translation.rules[0].by,
            vec![
                clause(Who::SelfEntry, AccessLevel::Write),
                clause(Who::Anonymous, AccessLevel::Auth),
                clause(Who::Anyone, AccessLevel::None)
            ]
        );
        assert_eq!(translation.rules[2].to, AccessTarget::default());
        // The break rule has no later rule under the suffix: it becomes the final catch-all.
        assert_eq!(
            translation.rules[3].by,
            vec![clause(Who::Dn(peercred.into()), AccessLevel::Write)]
        );
        let kinds: Vec<(u64, NoteKind)> = translation
            .notes
            .iter()
            .map(|note| (note.location.line, note.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (4, NoteKind::Approximated),
                (5, NoteKind::NotNeeded),
                (6, NoteKind::NotNeeded)
            ]
        );
    }

    #[test]
    fn break_clauses_go_first_in_later_rules() {
        let translation = run(&[
            "access to * by group=\"cn=admins,dc=example,dc=com\" write by * break",
            "access to dn.subtree=\"ou=people,dc=example,dc=com\" filter=(objectClass=person) by users read",
        ]);
        assert_eq!(translation.rules.len(), 2);
        let group = clause(
            Who::GroupOf {
                object_class: "groupOfNames".into(),
                attribute: "member".into(),
                dn: "cn=admins,dc=example,dc=com".into(),
            },
            AccessLevel::Write,
        );
        assert_eq!(
            translation.rules[0].by,
            vec![group.clone(), clause(Who::Users, AccessLevel::Read)]
        );
        assert_eq!(
            translation.rules[0].to.subtree.as_deref(),
            Some("ou=people,dc=example,dc=com")
        );
        assert_eq!(translation.rules[1].by, vec![group]);
        assert!(translation.notes.is_empty());
    }

    /// Everything left out is listed; what may then grant more than slapd (a rule left out,
    /// a clause whose requesters a later clause grants more) is also in `widening`, which
    /// `lmdir migrate` refuses. Before, these rules were left out with a note only: rule 1's
    /// entries fell to later rules, rule 3's `users` got search where slapd gave them
    /// (partial) read and write.
    #[test]
    fn untranslatable_parts_are_listed_and_widening_ones_flagged() {
        let translation = run(&[
            "access to dn.regex=\"^uid=.*\" by * read",
            "access to dn.level{2}=\"ou=x,dc=example,dc=com\" by * read",
            "access to * by dn.regex=\"^uid=a\" write by ssf=128 users read by users =rw by * search",
            "access to attrs=@inetOrgPerson by * read",
            "access to * by users read continue by * none",
            "access to * by users read break by * none",
        ]);
        assert_eq!(translation.rules.len(), 1);
        assert_eq!(
            translation.rules[0].by,
            vec![clause(Who::Anyone, AccessLevel::Search)]
        );
        let lines = |notes: &[Note]| -> Vec<(u64, NoteKind)> {
            notes
                .iter()
                .map(|note| (note.location.line, note.kind))
                .collect()
        };
        let not_translated = |line| (line, NoteKind::NotTranslated);
        assert_eq!(
            lines(&translation.notes),
            [1, 2, 3, 3, 3, 4, 5, 6].map(not_translated).to_vec()
        );
        assert!(translation.notes[3].reason.contains("ssf=128"));
        assert!(!translation.notes[2].reason.contains("REVIEW"));
        assert!(translation.notes[4]
            .reason
            .contains("REVIEW: a later clause grants search"));
        assert!(translation.notes[6].reason.contains("continue"));
        assert!(translation.notes[7].reason.contains("break"));
        // The regex and ssf clauses gave write and read: `by * search` narrows them, a note.
        assert_eq!(
            translation.widening,
            [0, 1, 4, 5, 6, 7].map(|index| translation.notes[index].clone())
        );
    }

    /// In a rule ending `by * break`, a clause left out sends its requesters on to the later
    /// rules: what they grant decides whether that widens.
    #[test]
    fn a_clause_left_out_of_a_break_rule_widens_when_a_later_rule_grants_more() {
        let translation = run(&[
            "access to * by dn.regex=\"^cn=backup\" read by * break",
            "access to attrs=userPassword by self write by * auth",
            "access to * by users search",
        ]);
        assert_eq!(translation.notes.len(), 1);
        assert!(translation.notes[0]
            .reason
            .contains("REVIEW: a later rule grants write"));
        assert_eq!(translation.widening, translation.notes);
        let narrowing = run(&[
            "access to * by dn.regex=\"^cn=backup\" write by * break",
            "access to * by users read",
        ]);
        assert_eq!(narrowing.notes.len(), 1);
        assert!(narrowing.widening.is_empty());
    }

    /// A final `by * <condition> break` is no pass-through: requesters not meeting the
    /// condition get none from the rule. Taken as `by * break`, its restriction vanished.
    #[test]
    fn conditional_final_break_is_not_a_pass_through() {
        let translation = run(&[
            "access to * by * ssf=128 break",
            "access to * by * peername.ip=127.0.0.1 break",
            "access to * by * dn.subtree=\"ou=people,dc=example,dc=com\" break",
            "access to * by * read break",
            "access to * by * +0 break",
            "access to * by users read",
        ]);
        let lines: Vec<(u64, NoteKind)> = translation
            .notes
            .iter()
            .map(|note| (note.location.line, note.kind))
            .collect();
        let not_translated = |line| (line, NoteKind::NotTranslated);
        assert_eq!(lines, [1, 2, 3, 4].map(not_translated).to_vec());
        assert!(
            translation.notes[0].reason.contains("ssf=128"),
            "{:?}",
            translation.notes[0]
        );
        assert!(translation.notes[2].reason.contains("dn.subtree="));
        // `by * +0 break` (cn=config's spelling of `by * break`) still passes everyone on.
        assert_eq!(translation.rules.len(), 1);
        assert_eq!(
            translation.rules[0].by,
            vec![clause(Who::Users, AccessLevel::Read)]
        );
    }

    /// slapd's `dn.one` and `dn.children`, as targets and requesters; above the suffix they
    /// become what they select of the database (the suffix entry, every entry, or nothing).
    #[test]
    fn one_level_and_children_translate() {
        let people = "ou=people,dc=example,dc=com";
        let translation = run(&[
            &format!("access to dn.one=\"{people}\" attrs=telephoneNumber by self read by dn.children=\"ou=staff,{people}\" read by * none"),
            &format!("access to dn.children=\"{people}\" by dn.one=\"{people}\" read by dn.onelevel=\"ou=x,dc=example,dc=com\" search"),
            "access to dn.onelevel=\"dc=com\" by * read",
            "access to dn.children=\"dc=com\" by * search",
            "access to dn.one=\"o=other\" by * write",
            "access to dn.children=\"dc=example,dc=com\" by * compare",
        ]);
        assert_eq!(translation.rules.len(), 5, "{:?}", translation.rules);
        assert_eq!(translation.rules[0].to.one.as_deref(), Some(people));
        assert_eq!(
            translation.rules[0].by,
            vec![
                clause(Who::SelfEntry, AccessLevel::Read),
                clause(
                    Who::DnChildren(format!("ou=staff,{people}")),
                    AccessLevel::Read
                ),
                clause(Who::Anyone, AccessLevel::None),
            ]
        );
        assert_eq!(translation.rules[1].to.children.as_deref(), Some(people));
        assert_eq!(
            translation.rules[1].by,
            vec![
                clause(Who::DnOne(people.into()), AccessLevel::Read),
                clause(
                    Who::DnOne("ou=x,dc=example,dc=com".into()),
                    AccessLevel::Search
                ),
            ]
        );
        // Of the database, only the suffix is one level below dc=com.
        assert_eq!(
            translation.rules[2].to,
            AccessTarget {
                dn: Some("dc=example,dc=com".into()),
                ..AccessTarget::default()
            }
        );
        assert_eq!(translation.rules[3].to, AccessTarget::default());
        assert_eq!(
            translation.rules[4].to.children.as_deref(),
            Some("dc=example,dc=com")
        );
        let kinds: Vec<(u64, NoteKind)> = translation
            .notes
            .iter()
            .map(|note| (note.location.line, note.kind))
            .collect();
        assert_eq!(kinds, vec![(5, NoteKind::NotNeeded)]);
        assert_eq!(loose_parent("cn=a\\,b,dc=x"), Some("dc=x"));
        assert_eq!(loose_parent("dc=x"), Some(""));
        assert_eq!(loose_parent(""), None);
    }

    /// slapd's `group=` is `group/groupOfNames/member=`: only a groupOfNames entry's `member`
    /// values count. Mapped to lmdir's `group=` (member or uniqueMember, any class), the
    /// members of a groupOfUniqueNames or a role with `member` values were granted too.
    #[test]
    fn group_clauses_keep_slapds_class_and_attribute() {
        let group = |object_class: &str, attribute: &str| Who::GroupOf {
            object_class: object_class.into(),
            attribute: attribute.into(),
            dn: "cn=g,dc=example,dc=com".into(),
        };
        for (text, who) in [
            ("group", group("groupOfNames", "member")),
            ("group.exact", group("groupOfNames", "member")),
            (
                "group/groupOfUniqueNames",
                group("groupOfUniqueNames", "member"),
            ),
            (
                "group/groupOfUniqueNames/uniqueMember",
                group("groupOfUniqueNames", "uniqueMember"),
            ),
            (
                "group/groupOfNames/member.exact",
                group("groupOfNames", "member"),
            ),
            (
                "group/organizationalRole/roleOccupant",
                group("organizationalRole", "roleOccupant"),
            ),
            ("group/2.5.6.9/2.5.4.31", group("2.5.6.9", "2.5.4.31")),
        ] {
            assert_eq!(
                parse_who(&format!("{text}=cn=g,dc=example,dc=com")),
                Ok(who),
                "{text}"
            );
        }
        for text in [
            "group.expand",
            "group/groupOfURLs/memberURL",
            "groupx",
            "group/a/b/c",
        ] {
            assert!(
                parse_who(&format!("{text}=cn=g,dc=example,dc=com")).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn privilege_sets_equal_to_a_level() {
        assert_eq!(privilege_set_level("=rscxd"), Some(AccessLevel::Read));
        assert_eq!(privilege_set_level("=wrscxd"), Some(AccessLevel::Write));
        assert_eq!(privilege_set_level("=xd"), Some(AccessLevel::Auth));
        assert_eq!(privilege_set_level("=0"), Some(AccessLevel::None));
        assert_eq!(privilege_set_level("=rsc"), None);
        assert_eq!(privilege_set_level("+rscxd"), None);
        let translation = run(&["access to * by users =rscxd by * =rsc"]);
        assert_eq!(
            translation.rules[0].by,
            vec![clause(Who::Users, AccessLevel::Read)]
        );
        assert_eq!(translation.notes.len(), 1);
    }

    #[test]
    fn whole_database_targets_and_bare_filters() {
        let translation = run(&[
            "access to dn.subtree=\"dc=Example, dc=com\" filter=objectClass=person by * read",
            "access to dn.subtree=\"dc=com\" by dn.exact=\"\" read by * search",
            "access to dn.subtree=\"o=elsewhere\" by * write",
        ]);
        assert_eq!(translation.rules.len(), 2);
        assert_eq!(translation.rules[0].to.subtree, None);
        assert_eq!(
            translation.rules[0].to.filter.as_deref(),
            Some("(objectClass=person)")
        );
        assert_eq!(translation.rules[1].to, AccessTarget::default());
        assert_eq!(
            translation.rules[1].by,
            vec![clause(Who::Anyone, AccessLevel::Search)]
        );
        let kinds: Vec<NoteKind> = translation.notes.iter().map(|note| note.kind).collect();
        assert_eq!(kinds, vec![NoteKind::NotTranslated, NoteKind::NotNeeded]);
    }
}
