//! The refint and unique overlays → `[integrity]`: `refint_attributes` (cn=config
//! `olcRefintAttribute`), `refint_nothing`, `refint_modifiersName` and `unique_uri`
//! (`olcUniqueURI`: `[strict ][ignore ]ldap:///base?attrs?sub`); what has no counterpart
//! (`strict`, `ignore`, a filter or another scope in the URI, the legacy `unique_base` /
//! `unique_attributes` / `unique_ignore` / `unique_strict`) is listed.

use super::Translator;
use crate::{Directive, NoteKind};

impl<'a> Translator<'a> {
    /// A refint or unique directive (keyword as `Directive::keyword` gives it); false when the
    /// keyword is neither.
    pub(super) fn integrity_directive(&mut self, keyword: &str, directive: &Directive) -> bool {
        match keyword {
            "refintattributes" | "refintattribute" => {
                for name in directive.arguments() {
                    for name in name.split([' ', ',']).filter(|name| !name.is_empty()) {
                        let known = self
                            .draft
                            .integrity
                            .referential_attributes
                            .iter()
                            .any(|listed| listed.eq_ignore_ascii_case(name));
                        if !known {
                            self.draft
                                .integrity
                                .referential_attributes
                                .push(name.to_string());
                        }
                    }
                }
            }
            "refintnothing" => {
                self.draft.integrity.referential_nothing = self.single(directive);
            }
            "refintmodifiersname" => {
                self.draft.integrity.referential_modifiers_name = self.single(directive);
            }
            "uniqueuri" => self.unique_uri(directive),
            "dynlistattrset" => self.dynlist_attrset(directive),
            "uniquebase" | "uniqueattributes" | "uniqueattribute" | "uniqueignore"
            | "uniquestrict" => self.note(
                directive,
                NoteKind::NotTranslated,
                "the unique overlay's legacy configuration: write a [[integrity.unique]] rule \
                 (base and attributes) by hand",
            ),
            _ => return false,
        }
        true
    }

    /// `dynlist-attrset <class> <url-attr> <member-attr>` → a `[[dynlist]]` rule. An URI
    /// restricting the groups, no member attribute (the found entries' attributes merged
    /// in), a mapped attribute (`a:b`) or more than one member attribute is listed; a
    /// `+memberOf` part becomes `member_of_attribute` (an `@class` of static groups is noted:
    /// lmdir's memberOf upkeep covers those).
    fn dynlist_attrset(&mut self, directive: &Directive) {
        let joined = directive.arguments().join(" ");
        let words: Vec<&str> = joined.split_whitespace().collect();
        let reason = match words.as_slice() {
            [_, uri, ..] if uri.to_ascii_lowercase().starts_with("ldap") => {
                Some("a URI restricting the dynamic groups has no lmdir counterpart")
            }
            [_, _] => Some(
                "dynlist without a member attribute (the found entries' attributes merged in) \
                 has no lmdir counterpart",
            ),
            [_, _, member] if member.contains(':') => {
                Some("a mapped member attribute has no lmdir counterpart")
            }
            [_, _, _] => None,
            _ => Some("lmdir's dynamic groups list one member attribute"),
        };
        if let Some(reason) = reason {
            self.note(directive, NoteKind::NotTranslated, reason);
            return;
        }
        let (member, member_of) = match words[2].split_once('+') {
            Some((member, member_of)) => (member, member_of),
            None => (words[2], ""),
        };
        let (member_of, static_class) = match member_of.split_once('@') {
            Some((member_of, class)) => (member_of, Some(class)),
            None => (member_of, None),
        };
        if static_class.is_some() {
            self.note(
                directive,
                NoteKind::Approximated,
                "static groups' memberOf comes from lmdir's memberOf upkeep ([database] memberof)",
            );
        }
        self.draft.dynlist.push(lmdir_config::DynlistRule {
            object_class: words[0].to_string(),
            url_attribute: words[1].to_string(),
            member_attribute: member.to_string(),
            member_of_attribute: member_of.to_string(),
        });
    }

    /// A directive's URIs, its keywords (`strict`, `ignore`) quoted with them or not. Several
    /// URIs in one directive are one slapo-unique domain (a value unique across all of
    /// them); lmdir keeps each URI's rule and says what differs. Any URI it cannot translate
    /// drops the whole directive, with the reason.
    fn unique_uri(&mut self, directive: &Directive) {
        let text = directive.arguments().join(" ");
        let uris: Vec<&str> = text.split_whitespace().collect();
        let parsed: Result<Vec<_>, String> = uris.iter().map(|uri| parse_unique_uri(uri)).collect();
        match parsed {
            Ok(rules) if rules.len() > 1 => {
                self.note(
                    directive,
                    NoteKind::Approximated,
                    format!(
                        "its {} URIs are one slapo-unique domain (a value unique across all \
                         of them); lmdir keeps a value unique within each URI's base, not \
                         across the bases",
                        rules.len()
                    ),
                );
                self.draft.integrity.unique.extend(rules);
            }
            Ok(rules) => self.draft.integrity.unique.extend(rules),
            Err(reason) => self.note(directive, NoteKind::NotTranslated, reason),
        }
    }
}

/// `ldap:///base?attr1,attr2?sub` → (base, attributes), or why it cannot be translated.
fn parse_unique_uri(value: &str) -> Result<(String, Vec<String>), String> {
    let uri = value.split_whitespace().next().unwrap_or_default();
    if matches!(uri.to_ascii_lowercase().as_str(), "strict" | "ignore") {
        return Err(format!(
            "`{uri}` (null values counted, or the attributes listed are the ones not checked) \
             has no lmdir counterpart"
        ));
    }
    let Some(rest) = uri
        .strip_prefix("ldap:///")
        .or_else(|| uri.strip_prefix("LDAP:///"))
    else {
        return Err(format!("{uri:?} is not an ldap:/// URI"));
    };
    let parts: Vec<&str> = rest.split('?').collect();
    let base = percent_decoded(parts.first().copied().unwrap_or_default());
    let attributes: Vec<String> = parts
        .get(1)
        .copied()
        .unwrap_or_default()
        .split(',')
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect();
    if attributes.is_empty() {
        return Err(
            "a unique URI without attributes (all attributes) has no lmdir counterpart".into(),
        );
    }
    let scope = parts.get(2).copied().unwrap_or_default();
    if !(scope.is_empty() || scope.eq_ignore_ascii_case("sub")) {
        return Err(format!(
            "scope {scope:?}: lmdir's unique rules cover a whole subtree"
        ));
    }
    if parts.get(3).is_some_and(|filter| !filter.is_empty()) {
        return Err("a filter in a unique URI has no lmdir counterpart".into());
    }
    Ok((base, attributes))
}

/// `%2C` → `,` (RFC 4516 escapes); a bad escape leaves the text as written.
fn percent_decoded(text: &str) -> String {
    lmdir_config::percent_decoded(text).unwrap_or_else(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_unique_uri;

    #[test]
    fn unique_uris() {
        assert_eq!(
            parse_unique_uri("ldap:///ou=People,dc=example,dc=com?uid,mail?sub"),
            Ok((
                "ou=People,dc=example,dc=com".to_string(),
                vec!["uid".to_string(), "mail".to_string()]
            ))
        );
        assert_eq!(
            parse_unique_uri("ldap:///ou=a%2Cb,dc=x?uid"),
            Ok(("ou=a,b,dc=x".to_string(), vec!["uid".to_string()]))
        );
        assert!(parse_unique_uri("ignore ldap:///dc=x?uid?sub").is_err());
        assert!(parse_unique_uri("ldap:///dc=x?uid?one").is_err());
        assert!(parse_unique_uri("ldap:///dc=x?uid?sub?(objectClass=person)").is_err());
        assert!(parse_unique_uri("ldap:///dc=x??sub").is_err());
    }
}
