//! Loading OpenLDAP `.schema` text into a `Schema`: statement keywords, attribute types, object
//! classes, OID macros and LDAP syntaxes, and what happens when a definition names an OID or a
//! name that is already defined (repeat, override of a built-in, or conflict).

use std::path::Path;

use super::{
    AttrId, AttributeType, AttributeUsage, DeclaredFields, ObjectClass, ObjectClassId,
    ObjectClassKind, Schema, SchemaError, SCHEMA_DEFINITIONS_MAX, SCHEMA_STATEMENT_SIZE_BYTES_MAX,
};
use crate::matching::{MatchingRule, MatchingRuleKind};
use crate::schema_text::{parse_definition, resolve_oid, Definition};
use crate::syntax::{Syntax, KNOWN_SYNTAXES};

/// The source name of the built-in schema text in messages.
const BUILTIN_SOURCE_NAME: &str = "builtin.schema";

/// Where a definition was read, for messages naming both sides of a conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    /// `file:line`.
    pub(super) location: String,
    /// Part of the built-in schema (a configured file may override it).
    pub(super) builtin: bool,
}

/// An `ldapsyntax` definition read from schema text (OpenLDAP 2.5 form).
#[derive(Debug, Clone)]
pub(super) struct LoadedSyntax {
    pub(super) oid: String,
    /// The definition as written, published in cn=Subschema `ldapSyntaxes`.
    pub(super) definition: String,
    /// `X-SUBST`: the known syntax whose validation values of this one get.
    pub(super) substitute: Option<String>,
}

/// What a schema statement defines, from its keyword.
enum StatementKind {
    AttributeType,
    ObjectClass,
    ObjectIdentifier,
    LdapSyntax,
}

/// slapd matches `attribute…` keywords by their first nine letters (so `attributetype`, and the
/// `attributeype` typo Debian's dsee.schema carries, both define attribute types) and the other
/// schema keywords exactly; the LDIF attribute forms (`olcAttributeTypes:`) are accepted too.
fn statement_kind(keyword: &str) -> Option<StatementKind> {
    match keyword {
        "objectclass" | "objectclasses" | "olcobjectclasses" => Some(StatementKind::ObjectClass),
        "objectidentifier" | "olcobjectidentifier" => Some(StatementKind::ObjectIdentifier),
        "ldapsyntax" | "ldapsyntaxes" | "olcldapsyntaxes" => Some(StatementKind::LdapSyntax),
        "olcattributetypes" => Some(StatementKind::AttributeType),
        // A separate slapd directive, not a definition.
        "attributeoptions" => None,
        other if other.starts_with("attribute") => Some(StatementKind::AttributeType),
        _ => None,
    }
}

/// X.500 / RFC 4517 / RFC 4523 and slapd built-in matching rules that appear in stock schema
/// files but that lmdir does not implement (names and OIDs). An attribute naming one simply
/// lacks that rule.
const UNIMPLEMENTED_RULES: &[(&str, &str)] = &[
    ("octetStringSubstringsMatch", "2.5.13.19"),
    ("presentationAddressMatch", "2.5.13.22"),
    ("protocolInformationMatch", "2.5.13.24"),
    ("integerFirstComponentMatch", "2.5.13.29"),
    ("directoryStringFirstComponentMatch", "2.5.13.31"),
    ("wordMatch", "2.5.13.32"),
    ("keywordMatch", "2.5.13.33"),
    ("certificateExactMatch", "2.5.13.34"),
    ("certificateMatch", "2.5.13.35"),
    ("certificatePairExactMatch", "2.5.13.36"),
    ("certificatePairMatch", "2.5.13.37"),
    ("certificateListExactMatch", "2.5.13.38"),
    ("certificateListMatch", "2.5.13.39"),
    ("algorithmIdentifierMatch", "2.5.13.40"),
    ("attributeCertificateExactMatch", "2.5.13.45"),
    ("attributeCertificateMatch", "2.5.13.46"),
    ("directoryStringApproxMatch", "1.3.6.1.4.1.4203.666.4.4"),
    ("IA5StringApproxMatch", "1.3.6.1.4.1.4203.666.4.5"),
    ("dnOneLevelMatch", "1.3.6.1.4.1.4203.666.4.8"),
    ("dnSubtreeMatch", "1.3.6.1.4.1.4203.666.4.9"),
    ("dnSubordinateMatch", "1.3.6.1.4.1.4203.666.4.10"),
    ("dnSuperiorMatch", "1.3.6.1.4.1.4203.666.4.11"),
    ("authzMatch", "1.3.6.1.4.1.4203.666.4.12"),
    ("privateKeyMatch", "1.3.6.1.4.1.4203.666.4.13"),
    ("OpenLDAPaciMatch", "1.3.6.1.4.1.4203.666.4.2"),
    ("CSNSIDMatch", "1.3.6.1.4.1.4203.666.11.2.5"),
    ("rdnMatch", "1.2.36.79672281.1.13.3"),
];

fn is_unimplemented_rule(name_or_oid: &str) -> bool {
    UNIMPLEMENTED_RULES
        .iter()
        .any(|(name, oid)| name.eq_ignore_ascii_case(name_or_oid) || *oid == name_or_oid)
}

/// The one id an OID and its names already denote, if any: Err names a key that denotes a
/// different definition (or a name of another definition than the OID's).
fn redefined_id(
    by_name: &super::NameMap<u32>,
    oid: &str,
    names: &[String],
) -> Result<Option<u32>, (String, u32)> {
    let by_oid = by_name.get(&oid.to_ascii_lowercase()).copied();
    for name in names {
        match (by_name.get(&name.to_ascii_lowercase()).copied(), by_oid) {
            (None, _) => {}
            (Some(found), Some(expected)) if found == expected => {}
            (Some(found), _) => return Err((name.clone(), found)),
        }
    }
    Ok(by_oid)
}

/// A redefinition must keep the existing primary name: giving an OID another name is a
/// conflict, not an override.
fn keeps_primary_name(
    names: &[String],
    existing_name: &str,
    origin: &Origin,
) -> Result<(), String> {
    if names
        .iter()
        .any(|name| name.eq_ignore_ascii_case(existing_name))
    {
        Ok(())
    } else {
        Err(format!(
            "is already defined at {} as '{existing_name}'",
            origin.location
        ))
    }
}

/// Fills what `child` does not declare (matching rules, syntax) from its SUP.
fn inherit_attribute_fields(child: &mut AttributeType, parent: &AttributeType) {
    if !child.declared.equality {
        child.equality = parent.equality;
    }
    if !child.declared.ordering {
        child.ordering = parent.ordering;
    }
    if !child.declared.substring {
        child.substring = parent.substring;
    }
    if !child.declared.syntax {
        child.syntax = parent.syntax;
        child.syntax_oid.clone_from(&parent.syntax_oid);
        child.syntax_length_max = parent.syntax_length_max;
    }
}

impl AttributeType {
    /// What differs in meaning for matching and checking (descriptions, extensions and syntax
    /// length bounds aside); empty = a repeat of such a definition changes nothing.
    fn differences(&self, other: &AttributeType) -> Vec<&'static str> {
        let lowered = |names: &[String]| -> Vec<String> {
            names.iter().map(|name| name.to_ascii_lowercase()).collect()
        };
        [
            ("NAME", lowered(&self.names) == lowered(&other.names)),
            ("SUP", self.sup == other.sup),
            ("EQUALITY", self.equality == other.equality),
            ("ORDERING", self.ordering == other.ordering),
            ("SUBSTR", self.substring == other.substring),
            ("SYNTAX", self.syntax_oid == other.syntax_oid),
            ("SINGLE-VALUE", self.single_value == other.single_value),
            ("COLLECTIVE", self.collective == other.collective),
            (
                "NO-USER-MODIFICATION",
                self.no_user_modification == other.no_user_modification,
            ),
            ("USAGE", self.usage == other.usage),
        ]
        .into_iter()
        .filter_map(|(field, same)| (!same).then_some(field))
        .collect()
    }
}

impl ObjectClass {
    /// What differs in meaning for checking (descriptions, extensions and the order and
    /// repetition of list members aside: stock files list some MAY attributes twice).
    fn differences(&self, other: &ObjectClass) -> Vec<&'static str> {
        let sorted = |ids: &[u32]| {
            let mut ids = ids.to_vec();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        let lowered = |names: &[String]| -> Vec<String> {
            names.iter().map(|name| name.to_ascii_lowercase()).collect()
        };
        [
            ("NAME", lowered(&self.names) == lowered(&other.names)),
            ("SUP", sorted(&self.sup) == sorted(&other.sup)),
            ("kind", self.kind == other.kind),
            ("MUST", sorted(&self.must) == sorted(&other.must)),
            ("MAY", sorted(&self.may) == sorted(&other.may)),
        ]
        .into_iter()
        .filter_map(|(field, same)| (!same).then_some(field))
        .collect()
    }
}

impl Schema {
    /// Reads an OpenLDAP `.schema` file and adds its definitions.
    pub fn load_schema_file(&mut self, path: &Path) -> Result<(), SchemaError> {
        let source_name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| SchemaError {
            source_name: source_name.clone(),
            line: 0,
            message: format!("cannot read: {error}"),
        })?;
        self.load_schema_text(&text, &source_name)
    }

    /// Adds the definitions of OpenLDAP `.schema` text: `attributetype`, `objectclass`,
    /// `objectidentifier` and `ldapsyntax` statements (keywords case-insensitive, `attribute…`
    /// by prefix as slapd does; `attributetypes:` / `olcAttributeTypes:` LDIF-style forms too),
    /// continuation lines starting with whitespace, `#` comments.
    ///
    /// A definition whose OID and names are already defined: the same meaning again is noted
    /// and skipped; a different one replaces a built-in definition (an override, noted in
    /// `warnings()`) and is an error naming both places when the existing one came from loaded
    /// text. On error the schema keeps the definitions before the failing statement.
    pub fn load_schema_text(&mut self, text: &str, source_name: &str) -> Result<(), SchemaError> {
        self.load_statements(text, source_name)
    }

    /// Loads lmdir's own schema text: its definitions are the built-in ones that configured
    /// files may override.
    pub(super) fn load_builtin_text(&mut self, text: &str) -> Result<(), SchemaError> {
        self.loading_builtin = true;
        let result = self.load_statements(text, BUILTIN_SOURCE_NAME);
        self.loading_builtin = false;
        result
    }

    fn load_statements(&mut self, text: &str, source_name: &str) -> Result<(), SchemaError> {
        for statement in crate::schema_text::statements(text) {
            let error = |message: String| SchemaError {
                source_name: source_name.to_string(),
                line: statement.line,
                message,
            };
            if statement.text.len() > SCHEMA_STATEMENT_SIZE_BYTES_MAX {
                return Err(error(format!(
                    "statement longer than {SCHEMA_STATEMENT_SIZE_BYTES_MAX} bytes"
                )));
            }
            self.current_location = format!("{source_name}:{}", statement.line);
            self.load_statement(&statement.text).map_err(error)?;
        }
        Ok(())
    }

    fn current_origin(&self) -> Origin {
        Origin {
            location: self.current_location.clone(),
            builtin: self.loading_builtin,
        }
    }

    fn load_statement(&mut self, statement: &str) -> Result<(), String> {
        let trimmed = statement.trim();
        let keyword_end = trimmed
            .find(|character: char| character.is_whitespace() || character == '(')
            .unwrap_or(trimmed.len());
        let keyword = trimmed[..keyword_end]
            .trim_end_matches(':')
            .to_ascii_lowercase();
        let rest = trimmed[keyword_end..].trim();
        if keyword.is_empty() {
            return Err("empty statement".to_string());
        }
        let Some(kind) = statement_kind(&keyword) else {
            return Err(format!("unknown schema keyword '{keyword}'"));
        };
        match kind {
            StatementKind::AttributeType => {
                let definition = parse_definition(rest, &self.oid_macros)?;
                self.add_attribute_type(definition)
            }
            StatementKind::ObjectClass => {
                let definition = parse_definition(rest, &self.oid_macros)?;
                self.add_object_class(definition)
            }
            StatementKind::LdapSyntax => {
                let definition = parse_definition(rest, &self.oid_macros)?;
                self.add_ldap_syntax(definition, rest)
            }
            StatementKind::ObjectIdentifier => {
                let mut words = rest.split_whitespace();
                let (Some(name), Some(value), None) = (words.next(), words.next(), words.next())
                else {
                    return Err("objectidentifier needs exactly a name and an OID".to_string());
                };
                let resolved = resolve_oid(value, &self.oid_macros)?;
                self.oid_macros.insert(name.to_ascii_lowercase(), resolved);
                Ok(())
            }
        }
    }

    /// An `ldapsyntax` definition: published in cn=Subschema; values of attributes using it are
    /// validated as its `X-SUBST` syntax, or not at all (as any syntax lmdir does not know).
    fn add_ldap_syntax(&mut self, definition: Definition, text: &str) -> Result<(), String> {
        let oid = definition.oid.clone();
        if KNOWN_SYNTAXES.iter().any(|(known, _, _)| *known == oid) {
            self.warn(format!(
                "LDAP syntax {oid} is built in; keeping the built-in definition"
            ));
            return Ok(());
        }
        if let Some(existing) = self.loaded_syntaxes.iter().find(|loaded| loaded.oid == oid) {
            if existing.definition == text {
                return Ok(());
            }
            return Err(format!("LDAP syntax {oid} is already defined differently"));
        }
        if self.loaded_syntaxes.len() >= SCHEMA_DEFINITIONS_MAX {
            return Err(format!("more than {SCHEMA_DEFINITIONS_MAX} LDAP syntaxes"));
        }
        let substitute = match definition.single("X-SUBST")? {
            Some(substitute) => Some(resolve_oid(&substitute, &self.oid_macros)?),
            None => None,
        };
        self.loaded_syntaxes.push(LoadedSyntax {
            oid,
            definition: text.to_string(),
            substitute,
        });
        Ok(())
    }

    /// The syntax values of a SYNTAX OID are validated as (a loaded syntax's X-SUBST first).
    fn syntax_of(&self, oid: &str) -> Syntax {
        let substitute = self
            .loaded_syntaxes
            .iter()
            .find(|loaded| loaded.oid == oid)
            .and_then(|loaded| loaded.substitute.as_deref());
        Syntax::from_oid(substitute.unwrap_or(oid))
    }

    fn add_attribute_type(&mut self, definition: Definition) -> Result<(), String> {
        let existing = redefined_id(&self.attribute_by_name, &definition.oid, &definition.names)
            .map_err(|(key, id)| {
                format!(
                    "attribute type '{key}' is already defined at {} (as '{}', {})",
                    self.attribute_origins[id as usize].location,
                    self.attribute_types[id as usize].name(),
                    self.attribute_types[id as usize].oid,
                )
            })?;
        let attribute_type = self.build_attribute_type(&definition)?;
        match existing {
            None => self.insert_attribute_type(attribute_type),
            Some(id) => self.redefine_attribute_type(id, attribute_type),
        }
    }

    fn matching_rule(
        &self,
        definition: &Definition,
        keyword: &str,
        kind: MatchingRuleKind,
    ) -> Result<Option<MatchingRule>, String> {
        let oid = &definition.oid;
        match definition.single(keyword)? {
            None => Ok(None),
            Some(name) if is_unimplemented_rule(&name) => Ok(None),
            Some(name) => {
                let rule = MatchingRule::by_name_or_oid(&name).ok_or_else(|| {
                    format!("attribute type '{oid}': unknown matching rule '{name}'")
                })?;
                if rule.kind() != kind {
                    return Err(format!(
                        "attribute type '{oid}': '{name}' is not a {kind:?} rule"
                    ));
                }
                Ok(Some(rule))
            }
        }
    }

    /// `SYNTAX oid{length}`: the OID (macros resolved) and the length bound.
    fn declared_syntax(
        &self,
        definition: &Definition,
    ) -> Result<(Option<String>, Option<u32>), String> {
        let oid = &definition.oid;
        let Some(text) = definition.single("SYNTAX")? else {
            return Ok((None, None));
        };
        let text = text.trim_matches('\'').to_string();
        let (oid_part, length) = match text.find('{') {
            Some(brace) => {
                let length = text[brace + 1..]
                    .trim_end_matches('}')
                    .parse::<u32>()
                    .map_err(|_| {
                        format!("attribute type '{oid}': bad syntax length in '{text}'")
                    })?;
                (text[..brace].to_string(), Some(length))
            }
            None => (text.clone(), None),
        };
        Ok((Some(resolve_oid(&oid_part, &self.oid_macros)?), length))
    }

    /// Resolves a definition against this schema (SUP, rules, syntax, inherited fields) without
    /// adding it. Notes matching rules lmdir does not implement.
    fn build_attribute_type(&mut self, definition: &Definition) -> Result<AttributeType, String> {
        let oid = definition.oid.clone();
        for keyword in ["EQUALITY", "ORDERING", "SUBSTR"] {
            if let Some(name) = definition.single(keyword)? {
                if is_unimplemented_rule(&name) {
                    self.warn(format!(
                        "attribute type '{oid}': matching rule '{name}' is not implemented; filters needing it are Undefined"
                    ));
                }
            }
        }
        let sup_name = definition.single("SUP")?;
        let sup = match &sup_name {
            Some(name) => Some(
                self.attribute(name)
                    .ok_or_else(|| format!("attribute type '{oid}': unknown SUP '{name}'"))?,
            ),
            None => None,
        };
        let equality = self.matching_rule(definition, "EQUALITY", MatchingRuleKind::Equality)?;
        let ordering = self.matching_rule(definition, "ORDERING", MatchingRuleKind::Ordering)?;
        let substring = self.matching_rule(definition, "SUBSTR", MatchingRuleKind::Substrings)?;
        let (syntax_oid, syntax_length_max) = self.declared_syntax(definition)?;
        if syntax_oid.is_none() && sup.is_none() {
            return Err(format!("attribute type '{oid}' needs SYNTAX or SUP"));
        }
        let usage = match definition
            .single("USAGE")?
            .map(|usage| usage.to_ascii_lowercase())
        {
            None => AttributeUsage::UserApplications,
            Some(usage) => match usage.as_str() {
                "userapplications" => AttributeUsage::UserApplications,
                "directoryoperation" => AttributeUsage::DirectoryOperation,
                "distributedoperation" => AttributeUsage::DistributedOperation,
                "dsaoperation" => AttributeUsage::DsaOperation,
                other => return Err(format!("attribute type '{oid}': unknown USAGE '{other}'")),
            },
        };
        let mut attribute_type = AttributeType {
            oid: oid.clone(),
            names: definition.names.clone(),
            description: definition.single("DESC")?,
            obsolete: definition.flag("OBSOLETE"),
            sup,
            equality,
            ordering,
            substring,
            syntax: syntax_oid
                .as_deref()
                .map(|syntax_oid| self.syntax_of(syntax_oid))
                .unwrap_or(Syntax::Unvalidated),
            syntax_oid,
            syntax_length_max,
            single_value: definition.flag("SINGLE-VALUE"),
            collective: definition.flag("COLLECTIVE"),
            no_user_modification: definition.flag("NO-USER-MODIFICATION"),
            usage,
            extensions: definition.extensions(),
            declared: DeclaredFields {
                equality: equality.is_some(),
                ordering: ordering.is_some(),
                substring: substring.is_some(),
                syntax: false,
            },
            sup_name,
        };
        attribute_type.declared.syntax = attribute_type.syntax_oid.is_some();
        if let Some(sup) = sup {
            inherit_attribute_fields(&mut attribute_type, &self.attribute_types[sup as usize]);
        }
        if attribute_type.no_user_modification
            && attribute_type.usage == AttributeUsage::UserApplications
        {
            return Err(format!(
                "attribute type '{oid}': NO-USER-MODIFICATION requires an operational USAGE"
            ));
        }
        Ok(attribute_type)
    }

    fn insert_attribute_type(&mut self, attribute_type: AttributeType) -> Result<(), String> {
        if self.attribute_types.len() >= SCHEMA_DEFINITIONS_MAX {
            return Err(format!(
                "more than {SCHEMA_DEFINITIONS_MAX} attribute types"
            ));
        }
        let id = self.attribute_types.len() as AttrId;
        let sup = attribute_type.sup;
        self.attribute_by_name
            .insert(attribute_type.oid.to_ascii_lowercase(), id);
        for name in &attribute_type.names {
            self.attribute_by_name.insert(name.to_ascii_lowercase(), id);
        }
        self.attribute_types.push(attribute_type);
        self.known = super::KnownAttributes::of(self);
        self.attribute_origins.push(self.current_origin());
        self.subtypes.push(vec![id]);
        self.add_to_ancestors(sup, &[id]);
        Ok(())
    }

    /// Registers `subtree` as subtypes of `ancestor` and each of its ancestors.
    fn add_to_ancestors(&mut self, mut ancestor: Option<AttrId>, subtree: &[AttrId]) {
        let mut depth = 0;
        while let Some(ancestor_id) = ancestor {
            self.subtypes[ancestor_id as usize].extend_from_slice(subtree);
            ancestor = self.attribute_types[ancestor_id as usize].sup;
            depth += 1;
            assert!(
                depth <= self.attribute_types.len(),
                "SUP chains are acyclic: redefinitions are checked for cycles"
            );
        }
    }

    /// A definition whose OID is already defined: a repeat with the same meaning is counted
    /// (`repeated_definitions`) and the first kept; a different one overrides a built-in
    /// definition (the caller checks and notes it) and is an error against one from a
    /// configured file.
    fn judge_redefinition(
        &mut self,
        label: &str,
        differences: &[&str],
        origin: &Origin,
    ) -> Result<Redefinition, String> {
        if differences.is_empty() {
            self.repeated_definitions += 1;
            return Ok(Redefinition::Repeat);
        }
        if !origin.builtin {
            return Err(format!(
                "{label} is already defined differently at {} ({} differ)",
                origin.location,
                differences.join(", ")
            ));
        }
        Ok(Redefinition::Override)
    }

    fn redefine_attribute_type(
        &mut self,
        id: AttrId,
        attribute_type: AttributeType,
    ) -> Result<(), String> {
        let existing = &self.attribute_types[id as usize];
        let origin = self.attribute_origins[id as usize].clone();
        keeps_primary_name(&attribute_type.names, existing.name(), &origin)
            .map_err(|error| format!("attribute type '{}' {error}", existing.oid))?;
        let label = format!("attribute type '{}' ({})", existing.name(), existing.oid);
        let differences = existing.differences(&attribute_type);
        if self.judge_redefinition(&label, &differences, &origin)? == Redefinition::Repeat {
            return Ok(());
        }
        if attribute_type
            .sup
            .is_some_and(|sup| self.is_subtype_of(sup, id))
        {
            return Err(format!("{label}: SUP would make a cycle"));
        }
        self.warn(format!(
            "{label} overrides the built-in definition at {} (its {} differ)",
            origin.location,
            differences.join(", ")
        ));
        self.replace_attribute_type(id, attribute_type);
        Ok(())
    }

    /// Puts a new definition in place of `id` (same id, so entries, classes and indexes keep
    /// referring to it) and re-resolves what its subtypes inherit.
    fn replace_attribute_type(&mut self, id: AttrId, attribute_type: AttributeType) {
        let subtree = self.subtypes[id as usize].clone();
        let old = std::mem::replace(&mut self.attribute_types[id as usize], attribute_type);
        self.attribute_origins[id as usize] = self.current_origin();
        for name in &old.names {
            self.attribute_by_name.remove(&name.to_ascii_lowercase());
        }
        let new_names = self.attribute_types[id as usize].names.clone();
        for name in new_names {
            self.attribute_by_name.insert(name.to_ascii_lowercase(), id);
        }
        self.known = super::KnownAttributes::of(self);
        let mut ancestor = old.sup;
        while let Some(ancestor_id) = ancestor {
            self.subtypes[ancestor_id as usize].retain(|member| !subtree.contains(member));
            ancestor = self.attribute_types[ancestor_id as usize].sup;
        }
        self.add_to_ancestors(self.attribute_types[id as usize].sup, &subtree);
        // Parents before children: order the subtree by depth below `id`.
        let depth_below = |schema: &Schema, mut member: AttrId| {
            let mut depth = 0usize;
            while member != id {
                member = schema.attribute_types[member as usize]
                    .sup
                    .expect("a subtype's chain reaches its ancestor");
                depth += 1;
            }
            depth
        };
        let mut ordered: Vec<(usize, AttrId)> = subtree
            .iter()
            .map(|member| (depth_below(self, *member), *member))
            .collect();
        ordered.sort_unstable();
        for (_, member) in ordered.into_iter().skip(1) {
            let sup = self.attribute_types[member as usize]
                .sup
                .expect("a subtype has a SUP");
            let parent = self.attribute_types[sup as usize].clone();
            inherit_attribute_fields(&mut self.attribute_types[member as usize], &parent);
        }
    }

    fn add_object_class(&mut self, definition: Definition) -> Result<(), String> {
        let existing = redefined_id(
            &self.object_class_by_name,
            &definition.oid,
            &definition.names,
        )
        .map_err(|(key, id)| {
            format!(
                "object class '{key}' is already defined at {} (as '{}', {})",
                self.object_class_origins[id as usize].location,
                self.object_classes[id as usize].name(),
                self.object_classes[id as usize].oid,
            )
        })?;
        let id = existing.unwrap_or(self.object_classes.len() as ObjectClassId);
        let object_class = self.build_object_class(&definition, id)?;
        match existing {
            None => self.insert_object_class(object_class),
            Some(id) => self.redefine_object_class(id, object_class),
        }
    }

    /// Resolves a definition (as class `id`) against this schema without adding it.
    fn build_object_class(
        &self,
        definition: &Definition,
        id: ObjectClassId,
    ) -> Result<ObjectClass, String> {
        let oid = definition.oid.clone();
        let sup_names = definition.list("SUP");
        let must_names = definition.list("MUST");
        let may_names = definition.list("MAY");
        let mut sup = Vec::new();
        for name in &sup_names {
            sup.push(
                self.object_class(name)
                    .ok_or_else(|| format!("object class '{oid}': unknown SUP '{name}'"))?,
            );
        }
        let resolve_attributes = |names: &[String], keyword: &str| -> Result<Vec<AttrId>, String> {
            names
                .iter()
                .map(|name| {
                    self.attribute(name).ok_or_else(|| {
                        format!(
                            "object class '{oid}': {keyword} names unknown attribute type '{name}'"
                        )
                    })
                })
                .collect()
        };
        let must = resolve_attributes(&must_names, "MUST")?;
        let may = resolve_attributes(&may_names, "MAY")?;
        let kinds = [
            (definition.flag("ABSTRACT"), ObjectClassKind::Abstract),
            (definition.flag("STRUCTURAL"), ObjectClassKind::Structural),
            (definition.flag("AUXILIARY"), ObjectClassKind::Auxiliary),
        ];
        let declared_kinds: Vec<ObjectClassKind> = kinds
            .iter()
            .filter(|(set, _)| *set)
            .map(|(_, kind)| *kind)
            .collect();
        let kind = match declared_kinds.as_slice() {
            [] => ObjectClassKind::Structural,
            [single] => *single,
            _ => {
                return Err(format!(
                    "object class '{oid}' has more than one of ABSTRACT/STRUCTURAL/AUXILIARY"
                ))
            }
        };
        let mut object_class = ObjectClass {
            oid,
            names: definition.names.clone(),
            description: definition.single("DESC")?,
            obsolete: definition.flag("OBSOLETE"),
            sup,
            kind,
            must,
            may,
            all_must: Vec::new(),
            all_may: Vec::new(),
            superclasses: Vec::new(),
            extensions: definition.extensions(),
            sup_names,
            must_names,
            may_names,
        };
        self.inherit_class_fields(&mut object_class, id)?;
        Ok(object_class)
    }

    /// Computes `superclasses`, `all_must` and `all_may` of class `id` from its own MUST/MAY
    /// and its superclasses' (already resolved), checking the kind rules of RFC 4512 §2.4.
    fn inherit_class_fields(
        &self,
        object_class: &mut ObjectClass,
        id: ObjectClassId,
    ) -> Result<(), String> {
        let kind = object_class.kind;
        let mut superclasses = vec![id];
        let mut all_must = object_class.must.clone();
        let mut all_may = object_class.may.clone();
        for parent_id in &object_class.sup {
            let parent = &self.object_classes[*parent_id as usize];
            if kind == ObjectClassKind::Structural && parent.kind == ObjectClassKind::Auxiliary
                || kind == ObjectClassKind::Auxiliary && parent.kind == ObjectClassKind::Structural
            {
                return Err(format!(
                    "object class '{}': {} class cannot inherit from {} class '{}'",
                    object_class.oid,
                    kind.keyword(),
                    parent.kind.keyword(),
                    parent.name()
                ));
            }
            for superclass in &parent.superclasses {
                if !superclasses.contains(superclass) {
                    superclasses.push(*superclass);
                }
            }
            all_must.extend(&parent.all_must);
            all_may.extend(&parent.all_may);
        }
        all_must.sort_unstable();
        all_must.dedup();
        all_may.sort_unstable();
        all_may.dedup();
        object_class.superclasses = superclasses;
        object_class.all_must = all_must;
        object_class.all_may = all_may;
        Ok(())
    }

    fn insert_object_class(&mut self, object_class: ObjectClass) -> Result<(), String> {
        if self.object_classes.len() >= SCHEMA_DEFINITIONS_MAX {
            return Err(format!("more than {SCHEMA_DEFINITIONS_MAX} object classes"));
        }
        let id = self.object_classes.len() as ObjectClassId;
        self.object_class_by_name
            .insert(object_class.oid.to_ascii_lowercase(), id);
        for name in &object_class.names {
            self.object_class_by_name
                .insert(name.to_ascii_lowercase(), id);
        }
        self.object_classes.push(object_class);
        self.object_class_origins.push(self.current_origin());
        Ok(())
    }

    fn redefine_object_class(
        &mut self,
        id: ObjectClassId,
        object_class: ObjectClass,
    ) -> Result<(), String> {
        let existing = &self.object_classes[id as usize];
        let origin = self.object_class_origins[id as usize].clone();
        keeps_primary_name(&object_class.names, existing.name(), &origin)
            .map_err(|error| format!("object class '{}' {error}", existing.oid))?;
        let label = format!("object class '{}' ({})", existing.name(), existing.oid);
        let differences = existing.differences(&object_class);
        if self.judge_redefinition(&label, &differences, &origin)? == Redefinition::Repeat {
            return Ok(());
        }
        if object_class.sup.iter().any(|sup| {
            self.object_classes[*sup as usize]
                .superclasses
                .contains(&id)
        }) {
            return Err(format!("{label}: SUP would make a cycle"));
        }
        self.replace_object_class(id, object_class)
            .map_err(|error| format!("{label}: the override breaks a subclass: {error}"))?;
        self.warn(format!(
            "{label} overrides the built-in definition at {} (its {} differ)",
            origin.location,
            differences.join(", ")
        ));
        Ok(())
    }

    /// Puts a new definition in place of class `id` and re-resolves the classes deriving from
    /// it. On error (a subclass whose kind no longer fits) the schema is left unchanged.
    fn replace_object_class(
        &mut self,
        id: ObjectClassId,
        object_class: ObjectClass,
    ) -> Result<(), String> {
        let dependents: Vec<ObjectClassId> = self
            .object_classes()
            .filter(|(candidate, class)| *candidate != id && class.superclasses.contains(&id))
            .map(|(candidate, _)| candidate)
            .collect();
        let old_names = self.object_classes[id as usize].names.clone();
        let mut updated = self.object_classes.clone();
        updated[id as usize] = object_class;
        let previous = std::mem::replace(&mut self.object_classes, updated);
        // Each pass resolves a class from its parents' current fields; a chain of n dependents
        // is stable after at most n + 1 passes.
        for _ in 0..=dependents.len() {
            let mut changed = false;
            for dependent in &dependents {
                let mut class = self.object_classes[*dependent as usize].clone();
                if let Err(error) = self.inherit_class_fields(&mut class, *dependent) {
                    self.object_classes = previous;
                    return Err(error);
                }
                if class != self.object_classes[*dependent as usize] {
                    self.object_classes[*dependent as usize] = class;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for name in &old_names {
            self.object_class_by_name.remove(&name.to_ascii_lowercase());
        }
        for name in self.object_classes[id as usize].names.clone() {
            self.object_class_by_name
                .insert(name.to_ascii_lowercase(), id);
        }
        self.object_class_origins[id as usize] = self.current_origin();
        Ok(())
    }
}

/// What a second definition of an OID does (see `judge_redefinition`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Redefinition {
    Repeat,
    Override,
}
