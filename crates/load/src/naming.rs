//! The values of an entry's own RDN that its record lacks, added as slapadd adds them.
//!
//! slapadd (with or without `-q`) runs `entry_schema_check` with `add_naming`: a value of the
//! leaf RDN missing from the record is added to the entry before the check, so
//! `dn: ou=People,...` with only `ou: Staff` is stored with both values. Both load paths and
//! both modes do the same here, so `--quick` never stores an entry that lacks its RDN value.
//! A glue entry is left as it is (slapd exempts glue from the naming check).

use lmdir_schema::{Dn, Schema};

/// The (description, value) pairs of the leaf RDN of `dn` that `pairs` lack (usually none:
/// found byte for byte, nothing is normalized).
pub(crate) fn missing_naming_values<'d>(
    schema: &Schema,
    dn: &'d Dn,
    pairs: &[(&str, &[u8])],
) -> Vec<(&'d str, &'d [u8])> {
    let Some(leaf) = dn.rdns.first() else {
        return Vec::new();
    };
    let missing: Vec<(&'d str, &'d [u8])> = leaf
        .avas
        .iter()
        .filter(|ava| !holds(schema, pairs, &ava.attr, &ava.value))
        .map(|ava| (ava.attr.as_str(), ava.value.as_slice()))
        .collect();
    if missing.is_empty() || is_glue(schema, pairs) {
        return Vec::new();
    }
    missing
}

/// Whether `pairs` hold `value` of `attribute` (equal bytes under the same name, else equal
/// under the attribute's equality rule, options aside as in the schema's naming check).
fn holds(schema: &Schema, pairs: &[(&str, &[u8])], attribute: &str, value: &[u8]) -> bool {
    let same_bytes = pairs.iter().any(|(description, candidate)| {
        base_type(description).eq_ignore_ascii_case(attribute) && *candidate == value
    });
    if same_bytes {
        return true;
    }
    // Unknown types and bad values are the store's to refuse, with its own message.
    let Some(attr) = schema.attribute(attribute) else {
        return true;
    };
    let Ok(normalized) = schema.normalize_value(attr, value) else {
        return true;
    };
    pairs.iter().any(|(description, candidate)| {
        schema.attribute(base_type(description)) == Some(attr)
            && schema
                .normalize_value(attr, candidate)
                .is_ok_and(|candidate| candidate == normalized)
    })
}

fn base_type(description: &str) -> &str {
    description.split(';').next().unwrap_or(description)
}

/// Whether the record lists the glue object class.
fn is_glue(schema: &Schema, pairs: &[(&str, &[u8])]) -> bool {
    let object_class = schema.object_class_attribute();
    pairs.iter().any(|(description, value)| {
        schema.attribute(base_type(description)) == Some(object_class)
            && lmdir_schema::GLUE_CLASS_VALUES
                .iter()
                .any(|glue| value.eq_ignore_ascii_case(glue.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing(dn: &str, pairs: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
        let schema = Schema::builtin();
        let dn = Dn::parse(dn).unwrap();
        missing_naming_values(&schema, &dn, pairs)
            .into_iter()
            .map(|(attribute, value)| (attribute.to_string(), value.to_vec()))
            .collect()
    }

    #[test]
    fn only_values_absent_under_the_equality_rule_are_missing() {
        let staff: &[(&str, &[u8])] = &[("objectClass", b"organizationalUnit"), ("ou", b"Staff")];
        assert_eq!(
            missing("ou=People,dc=example,dc=com", staff),
            vec![("ou".to_string(), b"People".to_vec())]
        );
        let people: &[(&str, &[u8])] = &[("OU", b"  PEOPLE ")];
        assert!(missing("ou=People,dc=example,dc=com", people).is_empty());
        let by_name: &[(&str, &[u8])] = &[("organizationalUnitName", b"people")];
        assert!(missing("OU=People,dc=example,dc=com", by_name).is_empty());
        let multi: &[(&str, &[u8])] = &[("cn", b"A")];
        assert_eq!(
            missing("cn=A+uid=a,dc=example,dc=com", multi),
            vec![("uid".to_string(), b"a".to_vec())]
        );
    }

    #[test]
    fn a_glue_entry_is_left_as_it_is() {
        let glue: &[(&str, &[u8])] = &[("objectClass", b"top"), ("objectClass", b"GLUE")];
        assert!(missing("ou=People,dc=example,dc=com", glue).is_empty());
    }
}
