//! OpenLDAP's schema files work unchanged: every `.schema` file Debian's slapd package ships
//! loads on top of the built-in schema (as it does in slapd on top of core, cosine,
//! inetorgperson and nis), and a file redefining a built-in definition takes effect (the
//! rfc2307bis layout) instead of being ignored.

use std::path::{Path, PathBuf};

use lmdir_schema::{Attribute, Dn, Entry, ObjectClassKind, ResultCode, Schema, Syntax};

const DEBIAN_SCHEMA_DIRECTORY: &str = "/etc/ldap/schema";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The `.schema` files of Debian's slapd package, sorted; None (with the reason printed) when
/// slapd is not installed (scripts/test.sh installs it, so CI runs this).
fn debian_schema_files() -> Option<Vec<PathBuf>> {
    let Ok(directory) = std::fs::read_dir(DEBIAN_SCHEMA_DIRECTORY) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true and {DEBIAN_SCHEMA_DIRECTORY} is missing (apt-get install slapd)"
        );
        eprintln!("skipped: {DEBIAN_SCHEMA_DIRECTORY} is absent (apt-get install slapd)");
        return None;
    };
    let mut files: Vec<PathBuf> = directory
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "schema")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true and {DEBIAN_SCHEMA_DIRECTORY} holds no .schema file"
        );
        eprintln!("skipped: no .schema file in {DEBIAN_SCHEMA_DIRECTORY}");
        return None;
    }
    Some(files)
}

#[test]
fn every_debian_slapd_schema_file_loads_over_the_builtin_schema() {
    let Some(files) = debian_schema_files() else {
        return;
    };
    // Debian ships 15; more is fine, fewer means the package changed and this test should too.
    assert!(files.len() >= 15, "{files:?}");
    for file in &files {
        let mut schema = Schema::builtin();
        if let Err(error) = schema.load_schema_file(file) {
            panic!("{error}");
        }
    }
    // All of them together, in slapd's usual order: the four base files first.
    let base = ["core", "cosine", "inetorgperson", "nis"];
    let mut ordered: Vec<&PathBuf> = base
        .iter()
        .filter_map(|name| {
            files
                .iter()
                .find(|file| file.file_stem().is_some_and(|stem| stem == *name))
        })
        .collect();
    let rest: Vec<&PathBuf> = files
        .iter()
        .filter(|file| !ordered.contains(file))
        .collect();
    ordered.extend(rest);
    let mut schema = Schema::builtin();
    for file in ordered {
        if let Err(error) = schema.load_schema_file(file) {
            panic!("{error}");
        }
    }
    for class in [
        "pilotDSA",
        "OpenLDAPperson",
        "groupOfURLs",
        "pmiUser",
        "pilotPerson",
    ] {
        assert!(schema.object_class(class).is_some(), "{class} missing");
    }
}

#[test]
fn slapd_constructs_load_without_slapd_installed() {
    let mut schema = Schema::builtin();
    schema
        .load_schema_file(&fixture("slapd_constructs.schema"))
        .unwrap();
    let typo = schema
        .attribute("fixtureTypo")
        .expect("attributeype defines a type");
    assert_eq!(schema.attribute_type(typo).name(), "fixtureTypo");
    assert!(schema.attribute("fixtureUpper").is_some());
    // X-SUBST: the loaded syntax validates as INTEGER.
    let substituted = schema.attribute("fixtureSubstituted").unwrap();
    assert_eq!(schema.attribute_type(substituted).syntax, Syntax::Integer);
    assert_eq!(
        schema
            .normalize_value(substituted, b"12x")
            .unwrap_err()
            .code,
        ResultCode::InvalidAttributeSyntax
    );
    assert!(schema
        .ldap_syntaxes()
        .any(|definition| definition.contains("1.3.6.1.4.1.99999.10.3")));
    // authzMatch is known (the file loads) but not implemented: noted, and the type has no
    // equality rule.
    let authz = schema.attribute("fixtureAuthz").unwrap();
    assert_eq!(schema.attribute_type(authz).equality, None);
    assert!(schema
        .warnings()
        .iter()
        .any(|warning| warning.contains("'authzMatch' is not implemented")));
    for (class, superclass) in [
        ("fixtureDirectoryAgent", "applicationEntity"),
        ("fixturePilot", "person"),
        ("fixturePki", "pkiUser"),
    ] {
        let class = schema.object_class_definition(schema.object_class(class).unwrap());
        assert!(class
            .superclasses
            .contains(&schema.object_class(superclass).unwrap()));
    }
    // Other words are still refused, naming the line.
    let error = schema
        .load_schema_text("\nattribut ( 1.2.3 NAME 'x' SUP name )\n", "typo.schema")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "typo.schema:2: unknown schema keyword 'attribut'"
    );
}

fn group_entry(classes: &[&str]) -> Entry {
    let attribute = |description: &str, values: &[&str]| Attribute {
        description: description.to_string(),
        values: values
            .iter()
            .map(|value| value.as_bytes().to_vec())
            .collect(),
    };
    Entry {
        dn: Dn::parse("cn=admins,ou=groups,dc=example,dc=com").unwrap(),
        attributes: vec![
            attribute("objectClass", classes),
            attribute("cn", &["admins"]),
            attribute("gidNumber", &["500"]),
            attribute("member", &["uid=alice,ou=people,dc=example,dc=com"]),
            attribute("memberUid", &["alice"]),
        ],
    }
}

#[test]
fn an_rfc2307bis_file_overrides_the_builtin_nis_definitions() {
    let entry = group_entry(&["top", "groupOfNames", "posixGroup"]);
    let builtin = Schema::builtin();
    let refused = builtin.check_and_normalize(&entry).unwrap_err();
    assert_eq!(refused.code, ResultCode::ObjectClassViolation, "{refused}");

    let mut schema = Schema::builtin();
    schema
        .load_schema_file(&fixture("rfc2307bis_style.schema"))
        .unwrap();
    let posix_group = schema.object_class_definition(schema.object_class("posixGroup").unwrap());
    assert_eq!(posix_group.kind, ObjectClassKind::Auxiliary);
    schema.check_and_normalize(&entry).unwrap();
    // gecos became a Directory String: non-ASCII values are now valid.
    let gecos = schema.attribute("gecos").unwrap();
    assert!(builtin.normalize_value(gecos, "Zoë".as_bytes()).is_err());
    assert_eq!(
        schema
            .normalize_value(gecos, "Zoë  Smith".as_bytes())
            .unwrap(),
        "zoë smith".as_bytes()
    );
    // Each override is noted with both places; the unchanged posixAccount is a repeat, counted
    // and not warned.
    assert_eq!(schema.repeated_definitions(), 1);
    assert!(
        !schema
            .warnings()
            .iter()
            .any(|warning| warning.contains("posixAccount")),
        "{:?}",
        schema.warnings()
    );
    let warnings = schema.warnings();
    let source = fixture("rfc2307bis_style.schema").display().to_string();
    for (line, what) in [
        (4, "attribute type 'gecos' (1.3.6.1.1.1.1.2) overrides the built-in definition at builtin.schema:"),
        (15, "object class 'posixGroup' (1.3.6.1.1.1.2.2) overrides the built-in definition at builtin.schema:"),
    ] {
        let prefix = format!("{source}:{line}: {what}");
        assert!(
            warnings.iter().any(|warning| warning.starts_with(&prefix)),
            "{prefix} not in {warnings:?}"
        );
    }
    // The subschema entry publishes the new definition.
    let subschema = schema.subschema_entry();
    let classes = subschema.attribute("objectClasses").unwrap();
    assert!(classes.values.iter().any(|value| {
        let text = String::from_utf8_lossy(value);
        text.contains("'posixGroup'") && text.contains("AUXILIARY")
    }));
}

#[test]
fn two_configured_files_defining_one_oid_differently_is_an_error_naming_both() {
    let mut schema = Schema::builtin();
    schema
        .load_schema_text(
            "\nattributetype ( 1.3.6.1.4.1.99999.20.1 NAME 'siteCode'\n\tEQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )\n",
            "first.schema",
        )
        .unwrap();
    // The same definition again is a repeat, not an error.
    schema
        .load_schema_text(
            "attributetype ( 1.3.6.1.4.1.99999.20.1 NAME 'siteCode' EQUALITY caseIgnoreMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )",
            "again.schema",
        )
        .unwrap();
    let error = schema
        .load_schema_text(
            "# other\n\n\nattributetype ( 1.3.6.1.4.1.99999.20.1 NAME 'siteCode' EQUALITY caseExactMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )",
            "second.schema",
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "second.schema:4: attribute type 'siteCode' (1.3.6.1.4.1.99999.20.1) is already defined differently at first.schema:2 (EQUALITY differ)"
    );
    // Overriding a built-in twice: the second file conflicts with the first override.
    let mut schema = Schema::builtin();
    schema
        .load_schema_file(&fixture("rfc2307bis_style.schema"))
        .unwrap();
    let error = schema
        .load_schema_text(
            "objectclass ( 1.3.6.1.1.1.2.2 NAME 'posixGroup' SUP top STRUCTURAL MUST gidNumber )",
            "nis.schema",
        )
        .unwrap_err();
    assert!(
        error.message.contains("is already defined differently at")
            && error.message.contains("rfc2307bis_style.schema:15"),
        "{error}"
    );
}

#[test]
fn overriding_a_supertype_reresolves_what_its_subtypes_inherit() {
    let mut schema = Schema::builtin();
    let cn = schema.attribute("cn").unwrap();
    assert_eq!(
        schema.normalize_value(cn, b"Alice").unwrap(),
        b"alice".to_vec()
    );
    schema
        .load_schema_text(
            "attributetype ( 2.5.4.41 NAME 'name' EQUALITY caseExactMatch SUBSTR caseExactSubstringsMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )",
            "exact.schema",
        )
        .unwrap();
    assert_eq!(schema.attribute("cn"), Some(cn));
    assert_eq!(
        schema.normalize_value(cn, b"Alice").unwrap(),
        b"Alice".to_vec()
    );
    assert!(schema
        .subtypes(schema.attribute("name").unwrap())
        .contains(&cn));
    // A SUP that would make a cycle is refused.
    let error = Schema::builtin()
        .load_schema_text(
            "attributetype ( 2.5.4.41 NAME 'name' SUP cn )",
            "cycle.schema",
        )
        .unwrap_err();
    assert!(error.message.contains("cycle"), "{error}");
    // Renaming a built-in OID is a conflict, not an override.
    let error = schema
        .load_schema_text(
            "objectclass ( 2.5.6.6 NAME 'human' SUP top STRUCTURAL )",
            "x.schema",
        )
        .unwrap_err();
    assert!(error.message.contains("as 'person'"), "{error}");
}

#[test]
fn a_repeat_in_another_order_with_a_duplicate_member_is_not_an_override() {
    let mut schema = Schema::builtin();
    schema
        .load_schema_text(
            "objectclass ( 2.5.6.14 NAME 'device' SUP top STRUCTURAL MUST cn\n\tMAY ( l $ description $ serialNumber $ seeAlso $ owner $ ou $ o $ l ) )",
            "stock.schema",
        )
        .unwrap();
    assert_eq!(schema.warnings(), &[] as &[String]);
    assert_eq!(schema.repeated_definitions(), 1);
}
