//! Schema checking of entries (object classes, MUST/MAY, SINGLE-VALUE, syntax, duplicates,
//! naming) and applying modifications, with OpenLDAP-style messages.

use crate::entry::{Attribute, Entry, Modification};
use crate::error::{LdapError, ResultCode};
use crate::normalized_attributes::NormalizedAttributes;
use crate::normalized_dn::NormalizedDn;
use crate::schema::{AttrId, AttributeDescription, ObjectClassId, ObjectClassKind, Schema};

/// One attribute of a checked entry: resolved description, its canonical string
/// (`cn;lang-en`) and every value with its equality-normalized form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedAttribute {
    pub description: AttributeDescription,
    pub description_string: String,
    pub values: Vec<(Vec<u8>, Vec<u8>)>,
}

/// An entry that passed `Schema::check_and_normalize`: the loader and server store these
/// normalized values as they are, so each value is normalized exactly once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedEntry {
    pub normalized_dn: String,
    /// Attributes in first-appearance order; descriptions that differ only in case are merged.
    pub attributes: Vec<CheckedAttribute>,
    pub structural_object_class: ObjectClassId,
}

/// Index of the first value whose normalized form equals an earlier one's. Sorting keeps
/// this O(n log n) for groups with hundreds of thousands of members.
pub(crate) fn first_duplicate(values: &[(Vec<u8>, Vec<u8>)]) -> Option<usize> {
    first_duplicate_by(values, |(_, normalized)| normalized)
}

fn first_duplicate_by<T>(items: &[T], key: impl Fn(&T) -> &[u8]) -> Option<usize> {
    /// Below this many values the quadratic scan is cheaper than sorting.
    const SORT_THRESHOLD: usize = 16;
    if items.len() <= SORT_THRESHOLD {
        return (1..items.len()).find(|index| {
            items[..*index]
                .iter()
                .any(|earlier| key(earlier) == key(&items[*index]))
        });
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_unstable_by(|left, right| {
        key(&items[*left])
            .cmp(key(&items[*right]))
            .then(left.cmp(right))
    });
    order
        .windows(2)
        .filter(|pair| key(&items[pair[0]]) == key(&items[pair[1]]))
        .map(|pair| pair[1])
        .min()
}

/// The OID of slapd's `glue` object class (a partial replica's placeholder entry).
pub const GLUE_OID: &str = "1.3.6.1.4.1.4203.666.3.4";

/// The normalized objectClass values that name `glue`: its name and its OID.
pub const GLUE_CLASS_VALUES: [&str; 2] = ["glue", GLUE_OID];

/// The normalized objectClass values that name `alias` (RFC 4512 2.6): its name and its OID.
pub const ALIAS_CLASS_VALUES: [&str; 2] = ["alias", "2.5.6.1"];

/// The normalized objectClass values that name `subentry` (RFC 3672 §2.4): its name and OID.
pub const SUBENTRY_CLASS_VALUES: [&str; 2] = ["subentry", "2.5.17.0"];

/// Whether a normalized objectClass value names `glue` (by name or OID), as slapd's
/// is_entry_glue tests an entry.
pub fn is_glue_class_value(normalized: &[u8]) -> bool {
    GLUE_CLASS_VALUES
        .iter()
        .any(|value| normalized == value.as_bytes())
}

fn violation(code: ResultCode, message: String) -> LdapError {
    LdapError::new(code, message)
}

impl Schema {
    /// Checks an entry against the schema (see `check_and_normalize`).
    pub fn check_entry(&self, entry: &Entry) -> Result<(), LdapError> {
        self.check_and_normalize(entry).map(|_| ())
    }

    /// Checks an entry and returns it normalized. Errors, in this order:
    /// undefinedAttributeType (unknown description), invalidAttributeSyntax (bad value),
    /// attributeOrValueExists (duplicate value per equality rule), constraintViolation (no
    /// values, or several on a SINGLE-VALUE type), objectClassViolation (no objectClass, unknown
    /// class, no or several unrelated structural classes, missing MUST, attribute not allowed),
    /// namingViolation (RDN value missing from the entry).
    pub fn check_and_normalize(&self, entry: &Entry) -> Result<CheckedEntry, LdapError> {
        let dn = self.normalized_dn(entry.dn.clone())?;
        self.check_and_normalize_at(entry, &dn)
    }

    /// `check_and_normalize` of an entry whose DN the caller has normalized already (`dn`, the
    /// normalization of `entry.dn`): the DN and its naming values are not normalized again.
    pub fn check_and_normalize_at(
        &self,
        entry: &Entry,
        dn: &NormalizedDn,
    ) -> Result<CheckedEntry, LdapError> {
        let attributes = self.normalize_attributes(&entry.attributes)?;
        self.check_normalized_at(attributes, dn)
    }

    /// The checks of `check_and_normalize_at` on attributes normalized already (by
    /// `normalize_attributes`, a modification of stored ones, ...): no value is normalized
    /// again. Duplicate values and SINGLE-VALUE are checked here.
    pub fn check_normalized_at(
        &self,
        attributes: NormalizedAttributes,
        dn: &NormalizedDn,
    ) -> Result<CheckedEntry, LdapError> {
        let attributes = attributes.into_vec();
        for attribute in &attributes {
            self.check_values(attribute)?;
        }
        let object_class_attr = self.object_class_attribute();
        let listed_classes = self.listed_object_classes(
            attributes
                .iter()
                .filter(|attribute| attribute.description.attr == object_class_attr)
                .flat_map(|attribute| {
                    attribute
                        .values
                        .iter()
                        .map(|(original, _)| original.as_slice())
                }),
        )?;
        let structural_object_class = self.structural_of_classes(&listed_classes)?;
        let mut all_classes: Vec<ObjectClassId> = Vec::new();
        for class in &listed_classes {
            for superclass in &self.object_class_definition(*class).superclasses {
                if !all_classes.contains(superclass) {
                    all_classes.push(*superclass);
                }
            }
        }
        let present = |attr: AttrId| {
            attributes
                .iter()
                .any(|attribute| attribute.description.attr == attr)
        };
        for class in &all_classes {
            let definition = self.object_class_definition(*class);
            for must in &definition.all_must {
                if !present(*must) {
                    return Err(violation(
                        ResultCode::ObjectClassViolation,
                        format!(
                            "object class '{}' requires attribute '{}'",
                            definition.name(),
                            self.attribute_type(*must).name()
                        ),
                    ));
                }
            }
        }
        let extensible = self
            .object_class("extensibleObject")
            .is_some_and(|id| all_classes.contains(&id));
        for attribute in &attributes {
            let attr = attribute.description.attr;
            let attribute_type = self.attribute_type(attr);
            if attribute_type.is_operational() || extensible {
                continue;
            }
            let allowed = all_classes.iter().any(|class| {
                let definition = self.object_class_definition(*class);
                definition
                    .all_must
                    .iter()
                    .chain(definition.all_may.iter())
                    .any(|allowed| self.is_subtype_of(attr, *allowed))
            });
            if !allowed {
                return Err(violation(
                    ResultCode::ObjectClassViolation,
                    format!("attribute '{}' not allowed", attribute.description_string),
                ));
            }
        }
        // As slapd's entry_schema_check: a glue entry (a partial replica's placeholder) need
        // not hold its RDN's values; every other check applies to it.
        let glue = self.object_class(GLUE_OID);
        if !listed_classes.iter().any(|class| Some(*class) == glue) {
            self.check_naming(dn, &attributes)?;
        }
        Ok(CheckedEntry {
            normalized_dn: dn.as_str().to_string(),
            attributes,
            structural_object_class,
        })
    }

    /// namingViolation unless every value of the DN's leaf RDN is among the entry's values.
    fn check_naming(
        &self,
        dn: &NormalizedDn,
        attributes: &[CheckedAttribute],
    ) -> Result<(), LdapError> {
        for (attr, normalized) in self.leaf_values(dn) {
            let found = attributes.iter().any(|attribute| {
                attribute.description.attr == attr
                    && attribute
                        .values
                        .iter()
                        .any(|(_, value)| *value == normalized)
            });
            if !found {
                return Err(violation(
                    ResultCode::NamingViolation,
                    format!(
                        "value of naming attribute '{}' is not present in entry",
                        self.attribute_type(attr).name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// attributeOrValueExists (a value twice per the equality rule), constraintViolation
    /// (several values of a SINGLE-VALUE type).
    fn check_values(&self, attribute: &CheckedAttribute) -> Result<(), LdapError> {
        if let Some(duplicate) = first_duplicate(&attribute.values) {
            return Err(violation(
                ResultCode::AttributeOrValueExists,
                format!(
                    "{}: value #{duplicate} provided more than once",
                    attribute.description_string
                ),
            ));
        }
        let attribute_type = self.attribute_type(attribute.description.attr);
        if attribute_type.single_value && attribute.values.len() > 1 {
            return Err(violation(
                ResultCode::ConstraintViolation,
                format!(
                    "attribute '{}' cannot have multiple values",
                    attribute.description_string
                ),
            ));
        }
        Ok(())
    }

    fn listed_object_classes<'a>(
        &self,
        values: impl Iterator<Item = &'a [u8]>,
    ) -> Result<Vec<ObjectClassId>, LdapError> {
        let mut classes = Vec::new();
        for value in values {
            let name = String::from_utf8_lossy(value);
            let id = self.object_class(&name).ok_or_else(|| {
                violation(
                    ResultCode::ObjectClassViolation,
                    format!("unrecognized objectClass '{name}'"),
                )
            })?;
            if !classes.contains(&id) {
                classes.push(id);
            }
        }
        if classes.is_empty() {
            return Err(violation(
                ResultCode::ObjectClassViolation,
                "no objectClass attribute".to_string(),
            ));
        }
        Ok(classes)
    }

    fn structural_of_classes(&self, classes: &[ObjectClassId]) -> Result<ObjectClassId, LdapError> {
        let structural: Vec<ObjectClassId> = classes
            .iter()
            .copied()
            .filter(|class| {
                self.object_class_definition(*class).kind == ObjectClassKind::Structural
            })
            .collect();
        if structural.is_empty() {
            return Err(violation(
                ResultCode::ObjectClassViolation,
                "no structural object class provided".to_string(),
            ));
        }
        // The structural class is the one every other listed structural class is a superclass of.
        structural
            .iter()
            .copied()
            .find(|candidate| {
                let superclasses = &self.object_class_definition(*candidate).superclasses;
                structural.iter().all(|other| superclasses.contains(other))
            })
            .ok_or_else(|| {
                let names: Vec<&str> = structural
                    .iter()
                    .map(|class| self.object_class_definition(*class).name())
                    .collect();
                violation(
                    ResultCode::ObjectClassViolation,
                    format!(
                        "invalid structural object class chain ({})",
                        names.join("/")
                    ),
                )
            })
    }

    /// The entry's structural object class (the most specific structural class listed).
    pub fn structural_object_class(&self, entry: &Entry) -> Result<ObjectClassId, LdapError> {
        let object_class_attr = self.object_class_attribute();
        let mut values: Vec<&[u8]> = Vec::new();
        for attribute in &entry.attributes {
            if self.parse_description(&attribute.description)?.attr == object_class_attr {
                values.extend(attribute.values.iter().map(Vec::as_slice));
            }
        }
        self.structural_object_class_of_values(values.into_iter())
    }

    /// The structural object class of an entry whose objectClass values are `values` (a
    /// writer that has them at hand need not build an `Entry` for this).
    pub fn structural_object_class_of_values<'a>(
        &self,
        values: impl Iterator<Item = &'a [u8]>,
    ) -> Result<ObjectClassId, LdapError> {
        let classes = self.listed_object_classes(values)?;
        self.structural_of_classes(&classes)
    }

    /// Refuses a client modification of a NO-USER-MODIFICATION attribute (constraintViolation,
    /// as OpenLDAP) or an unknown one (undefinedAttributeType).
    pub fn check_user_modification(&self, description: &str) -> Result<(), LdapError> {
        let parsed = self.parse_description(description)?;
        let attribute_type = self.attribute_type(parsed.attr);
        if attribute_type.no_user_modification {
            return Err(violation(
                ResultCode::ConstraintViolation,
                format!("{}: no user modification allowed", attribute_type.name()),
            ));
        }
        Ok(())
    }

    /// Applies one modification to an owned entry (RFC 4511 §4.6 semantics, RFC 4525 increment).
    /// Values are compared by the equality rule. Run `check_entry` after all modifications.
    pub fn apply_modification(
        &self,
        entry: &mut Entry,
        modification: &Modification,
    ) -> Result<(), LdapError> {
        self.apply_modification_with(entry, modification, false)
    }

    /// `apply_modification`, permissive when `permissive` (see
    /// `apply_normalized_modification`, which this runs on the entry's values normalized).
    pub fn apply_modification_with(
        &self,
        entry: &mut Entry,
        modification: &Modification,
        permissive: bool,
    ) -> Result<(), LdapError> {
        let mut attributes = self.normalize_attributes(&entry.attributes)?;
        self.apply_normalized_modification(&mut attributes, modification, permissive)?;
        entry.attributes = attributes
            .into_vec()
            .into_iter()
            .map(|attribute| Attribute {
                description: attribute.description_string,
                values: attribute
                    .values
                    .into_iter()
                    .map(|(original, _)| original)
                    .collect(),
            })
            .collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dn::Dn;
    use crate::entry::ModOp;

    fn entry(dn: &str, attributes: &[(&str, &[&str])]) -> Entry {
        Entry {
            dn: Dn::parse(dn).unwrap(),
            attributes: attributes
                .iter()
                .map(|(description, values)| Attribute {
                    description: description.to_string(),
                    values: values
                        .iter()
                        .map(|value| value.as_bytes().to_vec())
                        .collect(),
                })
                .collect(),
        }
    }

    fn person() -> Entry {
        entry(
            "cn=Barbara Jensen,ou=People,dc=example,dc=com",
            &[
                (
                    "objectClass",
                    &[
                        "top",
                        "person",
                        "organizationalPerson",
                        "inetOrgPerson",
                        "posixAccount",
                    ],
                ),
                ("cn", &["Barbara Jensen", "Babs Jensen"]),
                ("sn", &["Jensen"]),
                ("uid", &["bjensen"]),
                ("uidNumber", &["1000"]),
                ("gidNumber", &["1000"]),
                ("homeDirectory", &["/home/bjensen"]),
                ("mail", &["bjensen@example.com"]),
                ("cn;lang-de", &["Barbara"]),
                ("createTimestamp", &["20260101000000Z"]),
            ],
        )
    }

    fn error_of(entry: &Entry) -> LdapError {
        Schema::builtin().check_entry(entry).unwrap_err()
    }

    #[test]
    fn a_valid_entry_passes_and_is_normalized() {
        let schema = Schema::builtin();
        let checked = schema.check_and_normalize(&person()).unwrap();
        assert_eq!(
            checked.normalized_dn,
            "cn=barbara jensen,ou=people,dc=example,dc=com"
        );
        assert_eq!(
            schema
                .object_class_definition(checked.structural_object_class)
                .name(),
            "inetOrgPerson"
        );
        let cn = &checked.attributes[1];
        assert_eq!(cn.description_string, "cn");
        assert_eq!(
            cn.values[0],
            (b"Barbara Jensen".to_vec(), b"barbara jensen".to_vec())
        );
        assert!(checked
            .attributes
            .iter()
            .any(|attribute| attribute.description_string == "cn;lang-de"));
        let domain = entry(
            "dc=example,dc=com",
            &[("objectClass", &["domain"]), ("dc", &["example"])],
        );
        schema.check_entry(&domain).unwrap();
        let organization = entry(
            "o=Acme",
            &[
                ("objectClass", &["organization", "dcObject"]),
                ("o", &["Acme"]),
                ("dc", &["acme"]),
            ],
        );
        schema.check_entry(&organization).unwrap();
        let extensible = entry(
            "ou=x",
            &[
                ("objectClass", &["organizationalUnit", "extensibleObject"]),
                ("ou", &["x"]),
                ("uidNumber", &["5"]),
            ],
        );
        schema.check_entry(&extensible).unwrap();
    }

    #[test]
    fn each_violation_has_its_result_code_and_message() {
        let mut missing_sn = person();
        missing_sn
            .attributes
            .retain(|attribute| attribute.description != "sn");
        let error = error_of(&missing_sn);
        assert_eq!(error.code, ResultCode::ObjectClassViolation);
        assert_eq!(
            error.message,
            "object class 'person' requires attribute 'sn'"
        );

        let mut not_allowed = person();
        not_allowed.attributes.push(Attribute {
            description: "dc".into(),
            values: vec![b"x".to_vec()],
        });
        let error = error_of(&not_allowed);
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                ResultCode::ObjectClassViolation,
                "attribute 'dc' not allowed"
            )
        );

        let mut unknown_type = person();
        unknown_type.attributes.push(Attribute {
            description: "fooBar".into(),
            values: vec![b"x".to_vec()],
        });
        assert_eq!(
            error_of(&unknown_type).code,
            ResultCode::UndefinedAttributeType
        );

        let mut two_uid_numbers = person();
        two_uid_numbers.attributes[4].values.push(b"1001".to_vec());
        let error = error_of(&two_uid_numbers);
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                ResultCode::ConstraintViolation,
                "attribute 'uidNumber' cannot have multiple values"
            )
        );

        let mut bad_syntax = person();
        bad_syntax.attributes[4].values = vec![b"one".to_vec()];
        let error = error_of(&bad_syntax);
        assert_eq!(error.code, ResultCode::InvalidAttributeSyntax);
        assert!(
            error
                .message
                .starts_with("uidNumber: value #0 invalid per syntax"),
            "{}",
            error.message
        );

        let mut duplicate = person();
        duplicate.attributes[1]
            .values
            .push(b"BARBARA  jensen".to_vec());
        let error = error_of(&duplicate);
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                ResultCode::AttributeOrValueExists,
                "cn: value #2 provided more than once"
            )
        );

        let mut wrong_rdn = person();
        wrong_rdn.dn = Dn::parse("cn=Someone Else,dc=example,dc=com").unwrap();
        let error = error_of(&wrong_rdn);
        assert_eq!(error.code, ResultCode::NamingViolation);
        assert_eq!(
            error.message,
            "value of naming attribute 'cn' is not present in entry"
        );

        let no_class = entry("cn=x", &[("cn", &["x"])]);
        assert_eq!(error_of(&no_class).message, "no objectClass attribute");
        let unknown_class = entry(
            "cn=x",
            &[
                ("objectClass", &["person", "wizard"]),
                ("cn", &["x"]),
                ("sn", &["y"]),
            ],
        );
        assert_eq!(
            error_of(&unknown_class).message,
            "unrecognized objectClass 'wizard'"
        );
        let only_auxiliary = entry("dc=x", &[("objectClass", &["dcObject"]), ("dc", &["x"])]);
        assert_eq!(
            error_of(&only_auxiliary).message,
            "no structural object class provided"
        );
        let two_chains = entry(
            "cn=x",
            &[
                ("objectClass", &["person", "posixGroup"]),
                ("cn", &["x"]),
                ("sn", &["y"]),
                ("gidNumber", &["1"]),
            ],
        );
        let error = error_of(&two_chains);
        assert_eq!(error.code, ResultCode::ObjectClassViolation);
        assert!(
            error
                .message
                .starts_with("invalid structural object class chain"),
            "{}",
            error.message
        );
        let empty_values = entry(
            "cn=x",
            &[("objectClass", &["person"]), ("cn", &["x"]), ("sn", &[])],
        );
        assert_eq!(
            error_of(&empty_values).code,
            ResultCode::ConstraintViolation
        );
        assert_eq!(
            Schema::builtin()
                .check_user_modification("createTimestamp")
                .unwrap_err()
                .code,
            ResultCode::ConstraintViolation
        );
        Schema::builtin()
            .check_user_modification("cn;lang-en")
            .unwrap();
    }

    #[test]
    fn duplicates_are_found_in_large_groups() {
        let members: Vec<String> = (0..5000)
            .map(|index| format!("uid=user{index},dc=example"))
            .collect();
        let mut values: Vec<&str> = members.iter().map(String::as_str).collect();
        values.push("UID=USER17, DC=EXAMPLE");
        values.push("uid=user3,dc=example");
        let group = entry(
            "cn=big",
            &[
                ("objectClass", &["groupOfNames"]),
                ("cn", &["big"]),
                ("member", &values),
            ],
        );
        let error = error_of(&group);
        assert_eq!(error.code, ResultCode::AttributeOrValueExists);
        assert_eq!(error.message, "member: value #5000 provided more than once");
        values.truncate(5000);
        let group = entry(
            "cn=big",
            &[
                ("objectClass", &["groupOfNames"]),
                ("cn", &["big"]),
                ("member", &values),
            ],
        );
        Schema::builtin().check_entry(&group).unwrap();
        assert_eq!(
            first_duplicate_by(
                &[b"a".to_vec(), b"b".to_vec(), b"a".to_vec()],
                Vec::as_slice
            ),
            Some(2)
        );
        assert_eq!(first_duplicate_by::<Vec<u8>>(&[], Vec::as_slice), None);
    }

    #[test]
    fn structural_object_class_is_the_most_specific() {
        let schema = Schema::builtin();
        let class = schema.structural_object_class(&person()).unwrap();
        assert_eq!(
            schema.object_class_definition(class).name(),
            "inetOrgPerson"
        );
    }

    #[test]
    fn modifications_follow_rfc_4511() {
        let schema = Schema::builtin();
        let mut entry = person();
        let modify = |op, description: &str, values: &[&str]| Modification {
            op,
            description: description.to_string(),
            values: values
                .iter()
                .map(|value| value.as_bytes().to_vec())
                .collect(),
        };
        schema
            .apply_modification(
                &mut entry,
                &modify(ModOp::Add, "description", &["one", "two"]),
            )
            .unwrap();
        let error = schema
            .apply_modification(&mut entry, &modify(ModOp::Add, "description", &["ONE"]))
            .unwrap_err();
        assert_eq!(error.code, ResultCode::AttributeOrValueExists);
        schema
            .apply_modification(&mut entry, &modify(ModOp::Delete, "DESCRIPTION", &["Two"]))
            .unwrap();
        assert_eq!(
            entry.attribute("description").unwrap().values,
            vec![b"one".to_vec()]
        );
        let error = schema
            .apply_modification(
                &mut entry,
                &modify(ModOp::Delete, "description", &["three"]),
            )
            .unwrap_err();
        assert_eq!(error.code, ResultCode::NoSuchAttribute);
        schema
            .apply_modification(&mut entry, &modify(ModOp::Delete, "description", &[]))
            .unwrap();
        assert!(entry.attribute("description").is_none());
        let error = schema
            .apply_modification(&mut entry, &modify(ModOp::Delete, "description", &[]))
            .unwrap_err();
        assert_eq!(error.code, ResultCode::NoSuchAttribute);
        schema
            .apply_modification(
                &mut entry,
                &modify(ModOp::Replace, "mail", &["a@example.com", "b@example.com"]),
            )
            .unwrap();
        assert_eq!(entry.attribute("mail").unwrap().values.len(), 2);
        schema
            .apply_modification(&mut entry, &modify(ModOp::Replace, "mail", &[]))
            .unwrap();
        assert!(entry.attribute("mail").is_none());
        schema
            .apply_modification(&mut entry, &modify(ModOp::Increment, "uidNumber", &["-5"]))
            .unwrap();
        assert_eq!(
            entry.attribute("uidNumber").unwrap().values,
            vec![b"995".to_vec()]
        );
        let error = schema
            .apply_modification(&mut entry, &modify(ModOp::Increment, "cn", &["1"]))
            .unwrap_err();
        assert_eq!(error.code, ResultCode::ConstraintViolation);
        let error = schema
            .apply_modification(&mut entry, &modify(ModOp::Add, "uidNumber", &["x"]))
            .unwrap_err();
        assert_eq!(error.code, ResultCode::InvalidAttributeSyntax);
        schema.check_entry(&entry).unwrap();
    }

    #[test]
    fn a_glue_entry_is_exempt_from_the_naming_check_only() {
        // As slapadd and an LDAP add on slapd 2.5: a glue placeholder without its RDN's
        // values is accepted; its RDN attribute is not allowed by `glue` (65).
        let schema = Schema::builtin();
        for classes in [
            &["top", "glue"][..],
            &["glue"],
            &["1.3.6.1.4.1.4203.666.3.4"],
        ] {
            let glue = entry("ou=People,dc=example,dc=com", &[("objectClass", classes)]);
            schema.check_entry(&glue).unwrap();
        }
        let named = entry(
            "ou=People,dc=example,dc=com",
            &[("objectClass", &["top", "glue"]), ("ou", &["People"])],
        );
        let error = error_of(&named);
        assert_eq!(error.code, ResultCode::ObjectClassViolation);
        assert_eq!(error.message, "attribute 'ou' not allowed");
        let subentry = entry(
            "cn=syncrepl0,dc=example,dc=com",
            &[
                ("objectClass", &["top", "subentry", "syncConsumerSubentry"]),
                ("cn", &["syncrepl0"]),
                ("subtreeSpecification", &["{}"]),
                (
                    "syncreplCookie",
                    &["rid=000,csn=20200101000000.000000Z#000000#000#000000"],
                ),
            ],
        );
        schema.check_entry(&subentry).unwrap();
        assert!(is_glue_class_value(b"glue"));
        assert!(!is_glue_class_value(b"top"));
    }

    #[test]
    fn slapd_hidden_definitions_are_not_published() {
        let schema = Schema::builtin();
        let subschema = schema.subschema_entry();
        let published: Vec<&[u8]> = subschema
            .attributes
            .iter()
            .flat_map(|attribute| attribute.values.iter().map(Vec::as_slice))
            .collect();
        for oid in crate::schema::HIDDEN_FROM_SUBSCHEMA {
            let needle = format!("( {oid} ");
            assert!(!published
                .iter()
                .any(|value| value.starts_with(needle.as_bytes())));
        }
        assert!(schema.object_class("glue").is_some());
        assert!(schema.attribute("syncreplCookie").is_some());
    }
}
