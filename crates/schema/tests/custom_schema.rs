//! Loading OpenLDAP-format custom schema files on top of the built-in schema.

use lmdir_schema::{
    Attribute, Dn, Entry, MatchingRule, ObjectClassKind, ResultCode, Schema, Syntax,
};

const CUSTOM_SCHEMA: &str = r#"
# Example Corp. schema, written like the ones shipped with real deployments.
objectidentifier ExampleRoot 1.3.6.1.4.1.99999
objectidentifier ExampleAttributes ExampleRoot:1
objectidentifier ExampleClasses ExampleRoot:2

attributetype ( ExampleAttributes:1
    NAME ( 'exampleBadgeNumber' 'badge' )
    DESC 'Badge number of an employee'
    EQUALITY integerMatch
    ORDERING integerOrderingMatch
    SYNTAX 1.3.6.1.4.1.1466.115.121.1.27
    SINGLE-VALUE )

attributetype ( ExampleAttributes:2 NAME 'exampleNickname'
	DESC 'Nicknames; inherit caseIgnore rules from name'
	SUP name )

AttributeType ( ExampleAttributes:3 NAME 'exampleAccessToken'
    DESC 'Opaque token; it\27s binary'
    EQUALITY octetStringMatch
    SYNTAX 1.3.6.1.4.1.1466.115.121.1.40{256}
    X-ORIGIN ( 'Example' 'internal' ) )

attributetype ( 1.3.6.1.4.1.99999.1.4 NAME 'exampleLastSeen'
    EQUALITY generalizedTimeMatch ORDERING generalizedTimeOrderingMatch
    SYNTAX 1.3.6.1.4.1.1466.115.121.1.24 SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )

objectclass ( ExampleClasses:1 NAME 'exampleEmployee'
    DESC 'An employee of Example Corp.'
    SUP inetOrgPerson STRUCTURAL
    MUST exampleBadgeNumber
    MAY ( exampleNickname $ exampleAccessToken ) )

objectclass ( ExampleClasses:2 NAME 'exampleTagged' SUP top AUXILIARY
    MAY exampleNickname )
"#;

fn custom_schema() -> Schema {
    let mut schema = Schema::builtin();
    schema
        .load_schema_text(CUSTOM_SCHEMA, "example.schema")
        .unwrap();
    schema
}

#[test]
fn custom_definitions_resolve_macros_and_inheritance() {
    let schema = custom_schema();
    let badge = schema.attribute("BADGE").unwrap();
    assert_eq!(schema.attribute("exampleBadgeNumber"), Some(badge));
    assert_eq!(schema.attribute("1.3.6.1.4.1.99999.1.1"), Some(badge));
    let badge_type = schema.attribute_type(badge);
    assert_eq!(badge_type.name(), "exampleBadgeNumber");
    assert_eq!(
        badge_type.ordering,
        Some(MatchingRule::IntegerOrderingMatch)
    );
    assert_eq!(badge_type.syntax, Syntax::Integer);
    let nickname = schema.attribute("exampleNickname").unwrap();
    assert_eq!(
        schema.attribute_type(nickname).equality,
        Some(MatchingRule::CaseIgnoreMatch)
    );
    assert!(schema
        .subtypes(schema.attribute("name").unwrap())
        .contains(&nickname));
    let token = schema.attribute_type(schema.attribute("exampleAccessToken").unwrap());
    assert_eq!(token.syntax_length_max, Some(256));
    assert_eq!(
        token.description.as_deref(),
        Some("Opaque token; it's binary")
    );
    assert!(
        token
            .definition_string()
            .contains("X-ORIGIN ( 'Example' 'internal' )"),
        "{}",
        token.definition_string()
    );
    let last_seen = schema.attribute_type(schema.attribute("exampleLastSeen").unwrap());
    assert!(last_seen.is_operational() && last_seen.no_user_modification);
    let employee = schema.object_class_definition(schema.object_class("exampleEmployee").unwrap());
    assert_eq!(employee.oid, "1.3.6.1.4.1.99999.2.1");
    assert_eq!(employee.kind, ObjectClassKind::Structural);
    assert!(employee.all_must.contains(&schema.attribute("sn").unwrap()));
    assert_eq!(
        schema
            .object_class_definition(schema.object_class("exampleTagged").unwrap())
            .definition_string(),
        "( 1.3.6.1.4.1.99999.2.2 NAME 'exampleTagged' SUP top AUXILIARY MAY exampleNickname )"
    );
}

#[test]
fn entries_of_custom_classes_are_checked() {
    let schema = custom_schema();
    let mut entry = Entry {
        dn: Dn::parse("uid=kim,ou=people,dc=example,dc=com").unwrap(),
        attributes: vec![
            Attribute {
                description: "objectClass".into(),
                values: vec![b"exampleEmployee".to_vec(), b"exampleTagged".to_vec()],
            },
            Attribute {
                description: "uid".into(),
                values: vec![b"kim".to_vec()],
            },
            Attribute {
                description: "cn".into(),
                values: vec![b"Kim Lee".to_vec()],
            },
            Attribute {
                description: "sn".into(),
                values: vec![b"Lee".to_vec()],
            },
            Attribute {
                description: "badge".into(),
                values: vec![b"42".to_vec()],
            },
            Attribute {
                description: "exampleNickname".into(),
                values: vec![b"Kimmy".to_vec()],
            },
        ],
    };
    let checked = schema.check_and_normalize(&entry).unwrap();
    assert_eq!(
        schema
            .object_class_definition(checked.structural_object_class)
            .name(),
        "exampleEmployee"
    );
    let badge = checked
        .attributes
        .iter()
        .find(|attribute| attribute.description_string == "exampleBadgeNumber")
        .unwrap();
    assert_eq!(badge.values[0].1, b"42");
    entry
        .attributes
        .retain(|attribute| attribute.description != "badge");
    let error = schema.check_entry(&entry).unwrap_err();
    assert_eq!(error.code, ResultCode::ObjectClassViolation);
    assert_eq!(
        error.message,
        "object class 'exampleEmployee' requires attribute 'exampleBadgeNumber'"
    );
}

#[test]
fn schema_files_load_from_disk() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("example.schema");
    std::fs::write(&path, CUSTOM_SCHEMA).unwrap();
    let mut schema = Schema::builtin();
    schema.load_schema_file(&path).unwrap();
    assert!(schema.object_class("exampleEmployee").is_some());
    let missing = schema
        .load_schema_file(&directory.path().join("missing.schema"))
        .unwrap_err();
    assert!(missing.to_string().contains("missing.schema"), "{missing}");
}

#[test]
fn a_bad_schema_names_the_file_and_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("attributetype ( 1.2.3 NAME 'ok' SUP name )\n\nattributetype ( 1.2.4 NAME 'bad'\n    EQUALITY noSuchMatch SUP name )\n", 3, "unknown matching rule 'noSuchMatch'"),
        ("objectclass ( 1.2.5 NAME 'c' MUST noSuchAttribute )\n", 1, "MUST names unknown attribute type 'noSuchAttribute'"),
        ("# comment\nattributetype ( 1.2.6 NAME 'cn' SUP name )\n", 2, "'cn' is already defined"),
        ("attributetype ( 1.2.7 NAME 'x' SYNTAX 1.3.6.1.4.1.1466.115.121.1.15\n", 1, "missing closing ')'"),
        ("attributetype ( 1.2.8 NAME 'x' )\n", 1, "needs SYNTAX or SUP"),
        ("attributetype ( unknownMacro:1 NAME 'x' SUP name )\n", 1, "objectidentifier"),
        ("objectclass ( 1.2.9 NAME 'x' SUP posixAccount STRUCTURAL )\n", 1, "cannot inherit from AUXILIARY"),
        ("ditcontentrule ( 1.2.10 )\n", 1, "unknown schema keyword 'ditcontentrule'"),
        ("attributetype ( 1.2.11 NAME 'y' SUP name NO-USER-MODIFICATION )\n", 1, "requires an operational USAGE"),
        ("attributetype ( 1.2.12 NAME 'z' SUP name USAGE sometimes )\n", 1, "unknown USAGE"),
    ];
    for (text, line, fragment) in cases {
        let mut schema = Schema::builtin();
        let error = schema.load_schema_text(text, "bad.schema").unwrap_err();
        assert_eq!(error.source_name, "bad.schema");
        assert_eq!(error.line, *line, "{error}");
        assert!(error.message.contains(fragment), "{error} lacks {fragment}");
        assert!(error
            .to_string()
            .starts_with(&format!("bad.schema:{line}: ")));
    }
}

#[test]
fn stock_openldap_definitions_load_over_the_builtin_schema() {
    // As in OpenLDAP's core.schema: repeats of built-in definitions and rules lmdir lacks.
    let stock = r#"
attributetype ( 2.5.4.3 NAME ( 'cn' 'commonName' )
	DESC 'RFC4519: common name(s) for which the entity is known by'
	SUP name )
attributetype ( 2.5.4.29 NAME 'presentationAddress'
	DESC 'RFC2256: presentation address'
	EQUALITY presentationAddressMatch
	SYNTAX 1.3.6.1.4.1.1466.115.121.1.43 SINGLE-VALUE )
attributetype ( 2.5.4.38 NAME 'authorityRevocationList'
	DESC 'RFC2256: X.509 authority revocation list, use ;binary'
	SYNTAX 1.3.6.1.4.1.1466.115.121.1.9 )
objectclass ( 2.5.6.6 NAME 'person'
	DESC 'RFC2256: a person'
	SUP top STRUCTURAL
	MUST ( sn $ cn )
	MAY ( userPassword $ telephoneNumber $ seeAlso $ description ) )
objectclass ( 2.5.6.11 NAME 'applicationEntity'
	DESC 'RFC2256: an application entity'
	SUP top STRUCTURAL
	MUST ( presentationAddress $ cn )
	MAY ( seeAlso $ ou $ o $ l $ description ) )
"#;
    let mut schema = Schema::builtin();
    let before = schema.attribute_type_count();
    let error = schema.load_schema_text(stock, "core.schema").unwrap_err();
    // 2.5.6.11 is applicationProcess in the built-in schema: a different name is a real conflict.
    assert_eq!(error.line, 17, "{error}");
    assert!(error.message.contains("already defined"), "{error}");
    // Every attribute type above is built in: repeats add nothing.
    assert_eq!(schema.attribute_type_count(), before);
    let warnings = schema.warnings();
    // The repeats (cn, person...) are counted, not warned.
    assert!(
        !warnings.iter().any(|warning| warning.contains("'cn'")),
        "{warnings:?}"
    );
    assert!(schema.repeated_definitions() >= 2);
    assert!(
        warnings
            .iter()
            .any(|warning| warning.starts_with("core.schema:5: ")
                && warning.contains("'presentationAddressMatch' is not implemented")),
        "{warnings:?}"
    );
    // The only warning is the rule lmdir lacks; person (line 12) repeats the built-in.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let presentation = schema.attribute_type(schema.attribute("presentationAddress").unwrap());
    assert_eq!(presentation.equality, None);
    // A redefinition under another name is refused rather than silently merged.
    let mut fresh = Schema::builtin();
    let error = fresh
        .load_schema_text(
            "attributetype ( 2.5.4.3 NAME 'notCn' SUP name )",
            "x.schema",
        )
        .unwrap_err();
    assert!(
        error.message.contains("'2.5.4.3' is already defined"),
        "{error}"
    );
}
