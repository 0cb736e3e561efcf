//! The root DSE and cn=Subschema: slapd governs them with the global `access` rules alone (the
//! database's never apply to them, and with no global rule at all everyone reads them); lmdir
//! serves both to everyone. A global rule that keeps some requester from reading one of them
//! gets a visible note saying so, instead of the "not needed" count.

use lmdir_config::AccessLevel;

use crate::access::{is_at_or_below, loose_dn, loose_parent, parse_clause, split_clauses, Control};
use crate::Directive;

/// The entries (loose DN, name for messages).
const SERVER_ENTRIES: [(&str, &str); 2] = [("", "the root DSE"), ("cn=subschema", "cn=Subschema")];

/// How much of an entry a rule's `<what>` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// The entry and all its attributes.
    All,
    /// Maybe, or only some attributes (a filter, `attrs=`, a regex).
    Partly,
}

/// What a rule's clauses give whoever asks, as far as reading goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Everyone gets read or more, and evaluation stops.
    Everyone,
    /// Someone gets less than read (a clause, or the implicit `by * none`).
    Restricted,
    /// Nobody is restricted here, but some requesters go on to the next rules (`break`).
    PassedOn,
}

/// For each global directive, the note for the server entries it keeps some requester from
/// reading in slapd (None: it keeps nobody from reading them, or it is never reached for them).
pub(crate) fn reading_warnings(global: &[&Directive]) -> Vec<Option<String>> {
    let mut restricted: Vec<Vec<&str>> = vec![Vec::new(); global.len()];
    for (entry, name) in SERVER_ENTRIES {
        let entry = &loose_dn(entry);
        let mut decided = false;
        for (index, directive) in global.iter().enumerate() {
            let Some(reach) = reach(directive.arguments(), entry) else {
                continue;
            };
            let reading = reading(directive.arguments());
            if reading == Reading::Restricted {
                restricted[index].push(name);
            }
            if reach == Reach::All && reading != Reading::PassedOn {
                decided = true;
                break;
            }
        }
        // Past the last global rule, slapd's implicit `access to * by * none`.
        if !decided && !global.is_empty() && !restricted[global.len() - 1].contains(&name) {
            restricted[global.len() - 1].push(name);
        }
    }
    restricted
        .into_iter()
        .map(|names| (!names.is_empty()).then(|| warning(&names)))
        .collect()
}

fn warning(names: &[&str]) -> String {
    format!(
        "slapd governs {} with the global access rules only, and under this one (or slapd's \
         implicit `by * none` after the last) some requesters may not read it; lmdir serves the \
         root DSE and cn=Subschema to everyone (naming contexts, supported controls and \
         extensions, the schema)",
        names.join(" and ")
    )
}

/// Whether a rule's `<what>` selects the entry (loose DN), and how much of it.
fn reach(words: &[String], entry: &str) -> Option<Reach> {
    let mut reach = Reach::All;
    let what = words
        .iter()
        .skip(1)
        .take_while(|word| !word.eq_ignore_ascii_case("by"));
    for word in what {
        if word == "*" {
            continue;
        }
        let Some((name, value)) = word.split_once('=') else {
            reach = Reach::Partly;
            continue;
        };
        let (kind, style) = name.split_once('.').unwrap_or((name, ""));
        if !kind.eq_ignore_ascii_case("dn") {
            reach = Reach::Partly;
            continue;
        }
        let dn = loose_dn(value);
        let selected = match style.to_ascii_lowercase().as_str() {
            "" | "base" | "baseobject" | "exact" => entry == dn,
            "sub" | "subtree" => is_at_or_below(entry, &dn),
            "one" | "onelevel" => loose_parent(entry) == Some(dn.as_str()),
            "children" => entry != dn && is_at_or_below(entry, &dn),
            // A regex or another style: it may select the entry.
            _ => {
                reach = Reach::Partly;
                true
            }
        };
        if !selected {
            return None;
        }
    }
    Some(reach)
}

/// What a rule's clauses give as far as reading goes (an unreadable clause restricts).
fn reading(words: &[String]) -> Reading {
    let by = words
        .iter()
        .position(|word| word.eq_ignore_ascii_case("by"))
        .unwrap_or(words.len());
    let Ok(clause_words) = split_clauses(&words[by..]) else {
        return Reading::Restricted;
    };
    let mut passed_on = false;
    for words in &clause_words {
        let Ok(clause) = parse_clause(words) else {
            return Reading::Restricted;
        };
        let everyone = clause.who_text == "*" && clause.conditions.is_empty();
        if clause.control != Control::Stop {
            passed_on = true;
            if everyone {
                return Reading::PassedOn;
            }
            continue;
        }
        let reads = matches!(&clause.level, Ok((level, _)) if *level >= AccessLevel::Read);
        if !reads {
            return Reading::Restricted;
        }
        if everyone {
            return if passed_on {
                Reading::PassedOn
            } else {
                Reading::Everyone
            };
        }
    }
    Reading::Restricted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::tests::directives;

    /// Which of the rules (1-based) get a note, and for which entries.
    fn warned(lines: &[&str]) -> Vec<(usize, bool, bool)> {
        let list = directives(lines);
        let references: Vec<&Directive> = list.iter().collect();
        reading_warnings(&references)
            .into_iter()
            .enumerate()
            .filter_map(|(index, warning)| {
                warning.map(|text| {
                    (
                        index + 1,
                        text.starts_with("slapd governs the root DSE"),
                        text.contains("cn=Subschema with"),
                    )
                })
            })
            .collect()
    }

    #[test]
    fn rules_keeping_someone_from_reading_the_server_entries_are_named() {
        // Debian's frontend: everyone reads both.
        assert!(warned(&[
            "access to * by dn.exact=gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth manage by * break",
            "access to dn.exact=\"\" by * read",
            "access to dn.base=\"cn=Subschema\" by * read",
        ])
        .is_empty());
        // No global rule at all: slapd's default read.
        assert!(warned(&[]).is_empty());
        // Rules on the entries themselves.
        assert_eq!(
            warned(&[
                "access to dn.base=\"\" by users read by * none",
                "access to dn.base=\"cn=Subschema\" by * search",
                "access to * by * read",
            ]),
            vec![(1, true, false), (2, false, true)]
        );
        // A catch-all that is not for everyone covers both.
        assert_eq!(
            warned(&["access to * by users read"]),
            vec![(1, true, true)]
        );
        // Only namingContexts readable: the rest of the root DSE falls to the implicit none.
        assert_eq!(
            warned(&[
                "access to dn.base=\"\" attrs=namingContexts by * read",
                "access to dn.base=\"cn=Subschema\" by * read",
            ]),
            vec![(2, true, false)]
        );
        // `by users read break`: anonymous meets the rule's implicit none (users go on).
        assert_eq!(
            warned(&[
                "access to * by users read break",
                "access to dn.one=\"\" by * read",
            ]),
            vec![(1, true, true)]
        );
        // cn=Subschema is one level below the root, the root DSE is not: it falls to the
        // implicit none after the last rule.
        assert_eq!(
            warned(&["access to * by * break", "access to dn.one=\"\" by * read",]),
            vec![(2, true, false)]
        );
    }
}
