//! `[integrity]`: referential integrity of DN-valued attributes (OpenLDAP's refint overlay) and
//! attribute uniqueness (OpenLDAP's unique overlay), both decided by the writer inside its
//! transaction. Names are checked here for shape; the server checks them against the schema
//! when it starts (an unknown attribute, or a referential one whose values are not DNs, is a
//! config error there).

use serde::Deserialize;

use crate::{check_dn, is_attribute_name, problem, KeyStep, Problem};

/// Most attributes `referential_attributes` may name, and most unique rules.
pub const INTEGRITY_ITEMS_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IntegrityConfig {
    /// DN-valued attributes whose values follow a delete (removed) or rename (rewritten) of the
    /// entry they name, in every entry (OpenLDAP's `refint_attributes`); empty = off.
    pub referential_attributes: Vec<String>,
    /// The value put in an attribute whose last value a delete removes (`refint_nothing`);
    /// empty = none (the attribute goes, or stays as it was where the schema requires it).
    pub referential_nothing: String,
    /// The modifiersName of the entries referential integrity changes (`refint_modifiersName`).
    pub referential_modifiers_name: String,
    /// `[[integrity.unique]]` rules (OpenLDAP's `unique_uri`).
    pub unique: Vec<UniqueRule>,
}

impl Default for IntegrityConfig {
    fn default() -> Self {
        IntegrityConfig {
            referential_attributes: Vec::new(),
            referential_nothing: String::new(),
            referential_modifiers_name: "cn=Referential Integrity Overlay".to_string(),
            unique: Vec::new(),
        }
    }
}

/// Values of `attributes` are unique among the entries at or below `base` (every one of
/// the attributes on its own, as `ldap:///base?uid,mail?sub` in the unique overlay).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UniqueRule {
    /// The subtree; empty = the database suffix.
    #[serde(default)]
    pub base: String,
    pub attributes: Vec<String>,
}

impl IntegrityConfig {
    pub(crate) fn validate(&self) -> Result<(), Problem> {
        use KeyStep::{Index, Key};
        let at = |key: &'static str| vec![Key("integrity"), Key(key)];
        check_names(&self.referential_attributes, at("referential_attributes"))?;
        if !self.referential_nothing.is_empty() {
            check_dn(&self.referential_nothing)
                .map_err(|message| problem(at("referential_nothing"), message))?;
        }
        if !self.referential_modifiers_name.is_empty() {
            check_dn(&self.referential_modifiers_name)
                .map_err(|message| problem(at("referential_modifiers_name"), message))?;
        }
        if self.unique.len() > INTEGRITY_ITEMS_MAX {
            return Err(problem(
                at("unique"),
                format!("more than {INTEGRITY_ITEMS_MAX} unique rules"),
            ));
        }
        for (index, rule) in self.unique.iter().enumerate() {
            let path =
                |key: &'static str| vec![Key("integrity"), Key("unique"), Index(index), Key(key)];
            if !rule.base.is_empty() {
                check_dn(&rule.base).map_err(|message| problem(path("base"), message))?;
            }
            if rule.attributes.is_empty() {
                return Err(problem(
                    path("attributes"),
                    "a unique rule names attributes",
                ));
            }
            check_names(&rule.attributes, path("attributes"))?;
        }
        Ok(())
    }
}

fn check_names(names: &[String], path: Vec<KeyStep>) -> Result<(), Problem> {
    if names.len() > INTEGRITY_ITEMS_MAX {
        return Err(problem(
            path,
            format!("more than {INTEGRITY_ITEMS_MAX} attributes"),
        ));
    }
    match names.iter().find(|name| !is_attribute_name(name)) {
        Some(name) => Err(problem(path, format!("{name:?} is not an attribute name"))),
        None => Ok(()),
    }
}

/// Most `[[dynlist]]` rules.
pub const DYNLIST_RULES_MAX: usize = 16;

/// One `[[dynlist]]` rule (OpenLDAP's `dynlist-attrset <class> <url-attr> <member-attr>`):
/// entries of `object_class` list as `member_attribute` the DNs their `url_attribute` URLs
/// (`ldap:///base??scope?filter`) find, searched with the reader's rights.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynlistRule {
    pub object_class: String,
    #[serde(default = "default_url_attribute")]
    pub url_attribute: String,
    #[serde(default = "default_member_attribute")]
    pub member_attribute: String,
    /// Also list the dynamic groups an entry is found by as this attribute's values (slapd's
    /// `member+memberOf`); empty = not.
    #[serde(default)]
    pub member_of_attribute: String,
}

fn default_url_attribute() -> String {
    "memberURL".to_string()
}

fn default_member_attribute() -> String {
    "member".to_string()
}

pub(crate) fn validate_dynlist(rules: &[DynlistRule]) -> Result<(), Problem> {
    use KeyStep::{Index, Key};
    if rules.len() > DYNLIST_RULES_MAX {
        return Err(problem(
            vec![Key("dynlist")],
            format!("more than {DYNLIST_RULES_MAX} dynlist rules"),
        ));
    }
    for (index, rule) in rules.iter().enumerate() {
        for (key, name) in [
            ("object_class", &rule.object_class),
            ("url_attribute", &rule.url_attribute),
            ("member_attribute", &rule.member_attribute),
            ("member_of_attribute", &rule.member_of_attribute),
        ] {
            let optional_empty = key == "member_of_attribute" && name.is_empty();
            if !optional_empty && !is_attribute_name(name) {
                return Err(problem(
                    vec![Key("dynlist"), Index(index), Key(key)],
                    format!("{name:?} is not a name"),
                ));
            }
        }
    }
    Ok(())
}
