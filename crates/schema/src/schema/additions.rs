//! A running schema extended by a schema loaded anew (a configuration reload): allowed only
//! when the new one adds definitions and changes or removes none, so every attribute type and
//! object class keeps its ID and meaning and what was valid stays valid the same way.

use super::Schema;

/// The fields of two definition strings' tokens that differ, for an error message: the
/// keywords whose value differs (`NAME`, `SYNTAX`, `MUST`, ...), or `definition` when only
/// the order of tokens differs.
fn differing_fields(running: &str, fresh: &str) -> String {
    const KEYWORDS: [&str; 17] = [
        "NAME",
        "DESC",
        "OBSOLETE",
        "SUP",
        "EQUALITY",
        "ORDERING",
        "SUBSTR",
        "SYNTAX",
        "SINGLE-VALUE",
        "COLLECTIVE",
        "NO-USER-MODIFICATION",
        "USAGE",
        "ABSTRACT",
        "STRUCTURAL",
        "AUXILIARY",
        "MUST",
        "MAY",
    ];
    let field = |text: &str, keyword: &str| -> Option<String> {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        let start = tokens.iter().position(|token| *token == keyword)?;
        let rest = tokens[start + 1..]
            .iter()
            .take_while(|token| !KEYWORDS.contains(token) && !token.starts_with("X-"))
            .copied()
            .collect::<Vec<_>>();
        Some(rest.join(" "))
    };
    let differing: Vec<&str> = KEYWORDS
        .iter()
        .filter(|keyword| field(running, keyword) != field(fresh, keyword))
        .copied()
        .collect();
    match differing.is_empty() {
        true => "extensions".to_string(),
        false => differing.join(", "),
    }
}

impl Schema {
    /// What `fresh` changes or removes of this schema's definitions (attribute types, object
    /// classes, loaded syntaxes), one line each naming the definition and what differs; empty
    /// when `fresh` only adds.
    pub fn changes_in(&self, fresh: &Schema) -> Vec<String> {
        let mut problems = Vec::new();
        for (_, running) in self.attribute_types() {
            let label = format!("attribute type '{}' ({})", running.name(), running.oid);
            let Some(id) = fresh.attribute(&running.oid) else {
                problems.push(format!("{label} is no longer defined"));
                continue;
            };
            let (was, now) = (
                running.definition_string(),
                fresh.attribute_type(id).definition_string(),
            );
            if was != now {
                let fields = differing_fields(&was, &now);
                problems.push(format!("{label} changed ({fields} differ): {was} -> {now}"));
            }
        }
        for (_, running) in self.object_classes() {
            let label = format!("object class '{}' ({})", running.name(), running.oid);
            let Some(id) = fresh.object_class(&running.oid) else {
                problems.push(format!("{label} is no longer defined"));
                continue;
            };
            let (was, now) = (
                running.definition_string(),
                fresh.object_class_definition(id).definition_string(),
            );
            if was != now {
                let fields = differing_fields(&was, &now);
                problems.push(format!("{label} changed ({fields} differ): {was} -> {now}"));
            }
        }
        for running in &self.loaded_syntaxes {
            let same = fresh
                .loaded_syntaxes
                .iter()
                .find(|loaded| loaded.oid == running.oid);
            match same {
                None => problems.push(format!("ldapSyntax {} is no longer defined", running.oid)),
                Some(loaded) if loaded.definition != running.definition => problems.push(format!(
                    "ldapSyntax {} changed: {} -> {}",
                    running.oid, running.definition, loaded.definition
                )),
                Some(_) => {}
            }
        }
        problems
    }

    /// This schema with what `fresh` adds: existing definitions keep their IDs (entries,
    /// indexes, access rules and limits compiled against this schema stay valid), new ones
    /// follow in `fresh`'s order. Err lists what `fresh` changes or removes (`changes_in`).
    pub fn extended_by(&self, fresh: &Schema) -> Result<Schema, Vec<String>> {
        let problems = self.changes_in(fresh);
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut extended = self.clone();
        let source = "reload";
        let mut added = |keyword: &str, definition: &str| -> Result<(), Vec<String>> {
            extended
                .load_schema_text(&format!("{keyword} {definition}"), source)
                .map_err(|error| vec![format!("adding {definition}: {error}")])
        };
        for loaded in &fresh.loaded_syntaxes {
            if !self.loaded_syntaxes.iter().any(|had| had.oid == loaded.oid) {
                added("ldapsyntax", &loaded.definition)?;
            }
        }
        for (_, attribute_type) in fresh.attribute_types() {
            if self.attribute(&attribute_type.oid).is_none() {
                added("attributetype", &attribute_type.definition_string())?;
            }
        }
        for (_, object_class) in fresh.object_classes() {
            if self.object_class(&object_class.oid).is_none() {
                added("objectclass", &object_class.definition_string())?;
            }
        }
        let left = fresh.changes_in(&extended);
        let counts = |schema: &Schema| {
            (
                schema.attribute_type_count(),
                schema.object_classes().count(),
                schema.loaded_syntaxes.len(),
            )
        };
        if !left.is_empty() || counts(fresh) != counts(&extended) {
            return Err(left
                .into_iter()
                .chain(["the extended schema differs from the file's".to_string()])
                .collect());
        }
        extended.warnings.clear();
        Ok(extended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "attributetype ( 1.3.6.1.4.1.99999.1.1 NAME 'exampleColour' \
        EQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )";
    const ADDED: &str = "attributetype ( 1.3.6.1.4.1.99999.1.2 NAME 'exampleShade' \
        SUP exampleColour )\n\
        ldapsyntax ( 1.3.6.1.4.1.99999.3.1 DESC 'a count' \
        X-SUBST '1.3.6.1.4.1.1466.115.121.1.27' )\n\
        attributetype ( 1.3.6.1.4.1.99999.1.4 NAME 'exampleCount' \
        EQUALITY integerMatch SYNTAX 1.3.6.1.4.1.99999.3.1 )\n\
        objectclass ( 1.3.6.1.4.1.99999.2.1 NAME 'exampleShaded' AUXILIARY \
        MAY ( exampleShade $ exampleColour $ exampleCount ) )";

    fn loaded(texts: &[&str]) -> Schema {
        let mut schema = Schema::builtin();
        for (index, text) in texts.iter().enumerate() {
            schema
                .load_schema_text(text, &format!("file{index}"))
                .expect("test schema loads");
        }
        schema
    }

    #[test]
    fn additions_keep_every_id_and_add_in_order() {
        let running = loaded(&[BASE]);
        // The new file comes first: the fresh schema numbers the definitions differently.
        let first = "attributetype ( 1.3.6.1.4.1.99999.1.3 NAME 'exampleFirst' \
            SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )";
        let fresh = loaded(&[first, BASE, ADDED]);
        assert_ne!(
            fresh.attribute("exampleColour"),
            running.attribute("exampleColour")
        );
        let extended = running.extended_by(&fresh).expect("only additions");
        for (id, attribute_type) in running.attribute_types() {
            assert_eq!(extended.attribute_type(id), attribute_type);
        }
        let shade = extended.attribute("exampleShade").expect("added");
        assert!(shade as usize >= running.attribute_type_count());
        let colour = extended.attribute("exampleColour").expect("kept");
        assert_eq!(extended.attribute_type(shade).sup, Some(colour));
        let class = extended.object_class("exampleShaded").expect("added");
        assert_eq!(
            extended.object_class_definition(class).may.len(),
            3,
            "MAY resolved against the extended schema"
        );
        assert!(extended.changes_in(&fresh).is_empty());
        assert_eq!(
            extended.ldap_syntaxes().count(),
            running.ldap_syntaxes().count() + 1
        );
        let count = extended.attribute("exampleCount").expect("added");
        assert!(extended.normalize_value(count, b"12").is_ok());
        assert!(
            extended.normalize_value(count, b"twelve").is_err(),
            "validated by the added syntax's substitute"
        );
    }

    #[test]
    fn a_changed_or_removed_definition_is_refused_and_named() {
        let running = loaded(&[BASE, ADDED]);
        let changed = BASE.replace(
            "1.3.6.1.4.1.1466.115.121.1.15",
            "1.3.6.1.4.1.1466.115.121.1.27",
        );
        let fresh = loaded(&[&changed]);
        let problems = running.extended_by(&fresh).expect_err("a change");
        assert!(
            problems
                .iter()
                .any(|line| line.contains("'exampleColour'") && line.contains("SYNTAX differ")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|line| line.contains("'exampleShaded'") && line.contains("no longer defined")),
            "{problems:?}"
        );
    }

    #[test]
    fn the_same_schema_again_is_no_change() {
        let running = loaded(&[BASE, ADDED]);
        let extended = running.extended_by(&loaded(&[BASE, ADDED])).expect("same");
        assert_eq!(
            extended.attribute_type_count(),
            running.attribute_type_count()
        );
    }
}
