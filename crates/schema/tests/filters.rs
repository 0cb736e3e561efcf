//! Filter parsing, string form, preparation and three-valued evaluation.

use lmdir_schema::{
    Attribute, Dn, Entry, Filter, OwnedEntryView, PreparedFilter, ResultCode, Schema, Tri,
};
use proptest::prelude::*;

const DEPTH_MAX: usize = 32;

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

fn babs() -> Entry {
    entry(
        "cn=Barbara Jensen,ou=Sales,dc=example,dc=com",
        &[
            ("objectClass", &["top", "inetOrgPerson", "posixAccount"]),
            ("cn", &["Barbara Jensen", "Babs Jensen"]),
            ("cn;lang-de", &["Bärbel Jensen"]),
            ("sn", &["Jensen"]),
            ("givenName", &["Barbara"]),
            ("uid", &["bjensen"]),
            ("uidNumber", &["1042"]),
            ("gidNumber", &["100"]),
            ("homeDirectory", &["/home/bjensen"]),
            ("mail", &["BJensen@Example.COM"]),
            ("telephoneNumber", &["+1 408 555 1862"]),
            ("manager", &["cn=Boss,ou=Sales,dc=example,dc=com"]),
            ("createTimestamp", &["20260315120000Z"]),
            ("jpegPhoto", &["\u{1}binary"]),
        ],
    )
}

fn evaluate(filter: &str) -> Tri {
    let schema = Schema::builtin();
    let prepared = schema.prepare_filter(&Filter::parse(filter, DEPTH_MAX).unwrap());
    prepared.evaluate(&OwnedEntryView::new(&schema, &babs()).unwrap())
}

#[test]
fn parse_gives_the_expected_tree() {
    let filter = Filter::parse(
        "(&(objectClass=person)(|(cn=Babs*)(!(sn=Smith))))",
        DEPTH_MAX,
    )
    .unwrap();
    let Filter::And(parts) = &filter else {
        panic!("not an And: {filter:?}")
    };
    assert_eq!(
        parts[0],
        Filter::Equality {
            description: "objectClass".into(),
            value: b"person".to_vec()
        }
    );
    let Filter::Or(alternatives) = &parts[1] else {
        panic!()
    };
    assert_eq!(
        alternatives[0],
        Filter::Substrings {
            description: "cn".into(),
            initial: Some(b"Babs".to_vec()),
            any: vec![],
            final_: None
        }
    );
    assert_eq!(
        Filter::parse("(cn=*a*b*c)", DEPTH_MAX).unwrap(),
        Filter::Substrings {
            description: "cn".into(),
            initial: None,
            any: vec![b"a".to_vec(), b"b".to_vec()],
            final_: Some(b"c".to_vec())
        }
    );
    assert_eq!(
        Filter::parse("(cn=*)", DEPTH_MAX).unwrap(),
        Filter::Present {
            description: "cn".into()
        }
    );
    assert_eq!(
        Filter::parse("cn=x", DEPTH_MAX).unwrap(),
        Filter::Equality {
            description: "cn".into(),
            value: b"x".to_vec()
        }
    );
    assert_eq!(
        Filter::parse("(cn=a\\2a\\28\\29\\5c\\00)", DEPTH_MAX).unwrap(),
        Filter::Equality {
            description: "cn".into(),
            value: b"a*()\\\0".to_vec()
        }
    );
    assert_eq!(
        Filter::parse("(cn:caseExactMatch:=Fred)", DEPTH_MAX).unwrap(),
        Filter::Extensible {
            rule: Some("caseExactMatch".into()),
            description: Some("cn".into()),
            value: b"Fred".to_vec(),
            dn_attributes: false
        }
    );
    assert_eq!(
        Filter::parse("(ou:dn:=Sales)", DEPTH_MAX).unwrap(),
        Filter::Extensible {
            rule: None,
            description: Some("ou".into()),
            value: b"Sales".to_vec(),
            dn_attributes: true
        }
    );
    assert_eq!(
        Filter::parse("(:dn:2.5.13.5:=John)", DEPTH_MAX).unwrap(),
        Filter::Extensible {
            rule: Some("2.5.13.5".into()),
            description: None,
            value: b"John".to_vec(),
            dn_attributes: true
        }
    );
    assert_eq!(
        Filter::parse("(&)", DEPTH_MAX).unwrap(),
        Filter::And(vec![])
    );
    assert_eq!(
        Filter::parse("(uidNumber>=1000)", DEPTH_MAX).unwrap(),
        Filter::GreaterOrEqual {
            description: "uidNumber".into(),
            value: b"1000".to_vec()
        }
    );
    assert_eq!(
        Filter::parse("(cn~=babs)", DEPTH_MAX).unwrap(),
        Filter::Approx {
            description: "cn".into(),
            value: b"babs".to_vec()
        }
    );
}

#[test]
fn bad_filters_are_rejected_with_a_reason() {
    for text in [
        "",
        "(",
        "(cn=a",
        "(cn=a))",
        "(=a)",
        "(cn=a\\2)",
        "(cn=a\\zz)",
        "(cn=a(b)",
        "(:=x)",
        "(cn:=)x",
        "(cn=a**b)",
        "(cn)",
        "((cn=a))",
        "(cn:dn:dn:x:=a)",
        "cn=a)",
        "\n",
        " ",
    ] {
        assert!(Filter::parse(text, DEPTH_MAX).is_err(), "{text} parsed");
    }
    let deep = format!("{}(cn=a){}", "(!".repeat(40), ")".repeat(40));
    let error = Filter::parse(&deep, DEPTH_MAX).unwrap_err();
    assert_eq!(error.code, ResultCode::AdminLimitExceeded);
    assert!(error.message.contains("nesting"), "{}", error.message);
    assert!(Filter::parse(&deep, 64).is_ok());
}

#[test]
fn limits_of_filters_built_elsewhere_are_checked_like_parsed_ones() {
    let mut deep = Filter::Present {
        description: "cn".into(),
    };
    for _ in 0..100_000 {
        deep = Filter::Not(Box::new(deep));
    }
    let error = deep.check_limits(DEPTH_MAX).unwrap_err();
    assert_eq!(error.code, ResultCode::AdminLimitExceeded);
    // Dismantle iteratively: dropping 100,000 nested boxes recursively could overflow the stack.
    let mut current = deep;
    while let Filter::Not(inner) = current {
        current = *inner;
    }
    let wide = Filter::Or(vec![
        Filter::Present {
            description: "cn".into()
        };
        lmdir_schema::FILTER_ITEMS_MAX
    ]);
    assert_eq!(
        wide.check_limits(DEPTH_MAX).unwrap_err().code,
        ResultCode::AdminLimitExceeded
    );
    for text in ["(&(cn=a)(|(sn=b)(!(uid=c))))", "(cn=a)", "(&)"] {
        Filter::parse(text, 3).unwrap().check_limits(3).unwrap();
    }
    let nested = Filter::parse("(!(!(!(cn=a))))", 3).unwrap();
    assert!(nested.check_limits(2).is_err());
    assert!(
        Filter::parse("(!(!(!(cn=a))))", 2).is_err(),
        "parse and check_limits agree on depth"
    );
}

#[test]
fn display_gives_rfc_4515_strings() {
    for text in [
        "(&(objectClass=person)(|(cn=Babs*)(!(sn=Smith))))",
        "(cn=*a*b*c)",
        "(cn=a\\2a\\28\\29\\5c\\00)",
        "(ou:dn:=Sales)",
        "(:dn:2.5.13.5:=John)",
        "(cn:caseExactMatch:=Fred)",
        "(uidNumber<=5)",
        "(cn~=x)",
        "(&)",
        "(|)",
        "(cn=*)",
        "(cn=Kraków)",
    ] {
        assert_eq!(Filter::parse(text, DEPTH_MAX).unwrap().to_string(), text);
    }
    let binary = Filter::Equality {
        description: "jpegPhoto".into(),
        value: vec![0xFF, b'a', 0x00],
    };
    assert_eq!(binary.to_string(), "(jpegPhoto=\\ffa\\00)");
}

#[test]
fn equality_uses_the_attribute_rule_and_subtypes() {
    assert_eq!(evaluate("(cn=BABS   jensen)"), Tri::True);
    assert_eq!(evaluate("(commonName=babs jensen)"), Tri::True);
    assert_eq!(evaluate("(2.5.4.3=Babs Jensen)"), Tri::True);
    assert_eq!(evaluate("(cn=Nobody)"), Tri::False);
    // `name` covers cn, sn, givenName ...
    assert_eq!(evaluate("(name=jensen)"), Tri::True);
    assert_eq!(evaluate("(mail=bjensen@example.com)"), Tri::True);
    assert_eq!(evaluate("(telephoneNumber=+14085551862)"), Tri::True);
    assert_eq!(
        evaluate("(manager=CN=boss, OU=sales,dc=EXAMPLE,dc=com)"),
        Tri::True
    );
    assert_eq!(
        evaluate("(objectClass=PERSON)"),
        Tri::True,
        "superclasses match, as in OpenLDAP"
    );
    assert_eq!(evaluate("(objectClass=inetorgperson)"), Tri::True);
    assert_eq!(evaluate("(objectClass=2.16.840.1.113730.3.2.2)"), Tri::True);
    assert_eq!(evaluate("(uidNumber=1042)"), Tri::True);
    // A leading zero is invalid integer syntax (RFC 4517, OpenLDAP): Undefined, not a match.
    assert_eq!(evaluate("(uidNumber=01042)"), Tri::Undefined);
    assert_eq!(evaluate("(cn~=babs jensen)"), Tri::True);
}

#[test]
fn object_class_equality_covers_subclasses() {
    let schema = Schema::builtin();
    let only_subclass = entry(
        "uid=kim,dc=example,dc=com",
        &[
            ("objectClass", &["inetOrgPerson"]),
            ("uid", &["kim"]),
            ("cn", &["Kim"]),
            ("sn", &["Lee"]),
        ],
    );
    let view = OwnedEntryView::new(&schema, &only_subclass).unwrap();
    let evaluate_on = |text: &str| {
        schema
            .prepare_filter(&Filter::parse(text, DEPTH_MAX).unwrap())
            .evaluate(&view)
    };
    assert_eq!(evaluate_on("(objectClass=person)"), Tri::True);
    assert_eq!(evaluate_on("(objectclass=ORGANIZATIONALPERSON)"), Tri::True);
    assert_eq!(evaluate_on("(objectClass=2.5.6.6)"), Tri::True);
    assert_eq!(evaluate_on("(objectClass=top)"), Tri::True);
    assert_eq!(evaluate_on("(objectClass=inetOrgPerson)"), Tri::True);
    assert_eq!(evaluate_on("(objectClass=groupOfNames)"), Tri::False);
    assert_eq!(evaluate_on("(!(objectClass=person))"), Tri::False);
    assert_eq!(evaluate_on("(objectClass=noSuchClass)"), Tri::False);
    let PreparedFilter::Or(alternatives) =
        schema.prepare_filter(&Filter::parse("(objectClass=person)", DEPTH_MAX).unwrap())
    else {
        panic!("objectClass equality on a class with subclasses is an OR");
    };
    assert_eq!(
        alternatives.len(),
        5,
        "person, organizationalPerson, residentialPerson, inetOrgPerson, pilotPerson"
    );
}

#[test]
fn entry_dn_is_a_virtual_attribute() {
    assert_eq!(
        evaluate("(entryDN=CN=barbara jensen, ou=sales,dc=example,dc=com)"),
        Tri::True
    );
    assert_eq!(evaluate("(entryDN=*)"), Tri::True);
    assert_eq!(evaluate("(entryDN=ou=sales,dc=example,dc=com)"), Tri::False);
}

#[test]
fn options_narrow_the_match() {
    assert_eq!(
        evaluate("(cn=bärbel jensen)"),
        Tri::True,
        "cn covers cn;lang-de"
    );
    assert_eq!(evaluate("(cn;lang-de=BÄRBEL JENSEN)"), Tri::True);
    assert_eq!(evaluate("(cn;lang-de=babs jensen)"), Tri::False);
    assert_eq!(evaluate("(cn;lang-fr=*)"), Tri::False);
    assert_eq!(evaluate("(cn;lang-de=*)"), Tri::True);
}

#[test]
fn substrings_match_normalized_values() {
    assert_eq!(evaluate("(cn=babs*)"), Tri::True);
    assert_eq!(evaluate("(cn=*JENSEN)"), Tri::True);
    assert_eq!(evaluate("(cn=b*a*s*n)"), Tri::True);
    assert_eq!(evaluate("(cn=*arbara  jen*)"), Tri::True);
    assert_eq!(evaluate("(cn=babs*babs)"), Tri::False);
    assert_eq!(evaluate("(cn=jensen*)"), Tri::False);
    assert_eq!(evaluate("(telephoneNumber=*555-18*)"), Tri::True);
    assert_eq!(evaluate("(mail=*@EXAMPLE.com)"), Tri::True);
    // An overlapping initial and final must not both use the same characters.
    assert_eq!(evaluate("(sn=jens*sen)"), Tri::False);
    assert_eq!(evaluate("(sn=jen*sen)"), Tri::True);
}

#[test]
fn ordering_uses_ordering_keys() {
    assert_eq!(evaluate("(uidNumber>=1000)"), Tri::True);
    assert_eq!(evaluate("(uidNumber>=1043)"), Tri::False);
    assert_eq!(evaluate("(uidNumber<=1042)"), Tri::True);
    assert_eq!(evaluate("(uidNumber<=999)"), Tri::False);
    assert_eq!(evaluate("(uidNumber>=-5)"), Tri::True);
    assert_eq!(
        evaluate("(createTimestamp>=20260315130000+0100)"),
        Tri::True
    );
    assert_eq!(evaluate("(createTimestamp>=20260315120000.5Z)"), Tri::False);
    assert_eq!(evaluate("(createTimestamp<=2026031512Z)"), Tri::True);
    // cn has no ORDERING rule: Undefined.
    assert_eq!(evaluate("(cn>=a)"), Tri::Undefined);
}

#[test]
fn three_valued_logic() {
    assert_eq!(evaluate("(noSuchAttr=x)"), Tri::Undefined);
    assert_eq!(evaluate("(!(noSuchAttr=x))"), Tri::Undefined);
    assert_eq!(
        evaluate("(uidNumber=abc)"),
        Tri::Undefined,
        "invalid assertion value"
    );
    assert_eq!(
        evaluate("(jpegPhoto=x)"),
        Tri::Undefined,
        "no equality rule"
    );
    assert_eq!(
        evaluate("(cn=)"),
        Tri::Undefined,
        "empty is not a Directory String"
    );
    assert_eq!(evaluate("(!(cn=))"), Tri::Undefined);
    assert_eq!(
        evaluate("(hasSubordinates=true)"),
        Tri::Undefined,
        "Boolean is TRUE or FALSE"
    );
    assert_eq!(evaluate("(jpegPhoto=*)"), Tri::True);
    assert_eq!(
        evaluate("(&(cn=babs jensen)(noSuchAttr=x))"),
        Tri::Undefined
    );
    assert_eq!(evaluate("(&(cn=nobody)(noSuchAttr=x))"), Tri::False);
    assert_eq!(evaluate("(|(cn=babs jensen)(noSuchAttr=x))"), Tri::True);
    assert_eq!(evaluate("(|(cn=nobody)(noSuchAttr=x))"), Tri::Undefined);
    assert_eq!(evaluate("(&)"), Tri::True);
    assert_eq!(evaluate("(|)"), Tri::False);
    assert_eq!(evaluate("(!(&))"), Tri::False);
    let schema = Schema::builtin();
    assert_eq!(
        schema.prepare_filter(&Filter::parse("(&)", 4).unwrap()),
        PreparedFilter::True
    );
    assert_eq!(
        schema.prepare_filter(&Filter::parse("(|)", 4).unwrap()),
        PreparedFilter::False
    );
    assert_eq!(
        schema.prepare_filter(&Filter::parse("(foo=1)", 4).unwrap()),
        PreparedFilter::Undefined
    );
}

#[test]
fn extensible_matching() {
    assert_eq!(evaluate("(cn:caseExactMatch:=Babs Jensen)"), Tri::True);
    assert_eq!(evaluate("(cn:caseExactMatch:=babs jensen)"), Tri::False);
    assert_eq!(evaluate("(sn:2.5.13.5:=Jensen)"), Tri::True);
    assert_eq!(evaluate("(cn:=BABS JENSEN)"), Tri::True);
    assert_eq!(
        evaluate("(:caseExactMatch:=Jensen)"),
        Tri::True,
        "attribute-less: any attribute of the rule's family"
    );
    assert_eq!(evaluate("(:caseExactMatch:=JENSEN)"), Tri::False);
    assert_eq!(evaluate("(ou:dn:=sales)"), Tri::True);
    assert_eq!(evaluate("(ou=sales)"), Tri::False, "ou is only in the DN");
    assert_eq!(evaluate("(ou:dn:=Marketing)"), Tri::False);
    assert_eq!(evaluate("(dc:dn:=EXAMPLE)"), Tri::True);
    assert_eq!(evaluate("(:dn:caseIgnoreMatch:=sales)"), Tri::True);
    // A rule of another family than the type's own tests the DN value as written.
    assert_eq!(evaluate("(:dn:caseExactMatch:=Sales)"), Tri::True);
    assert_eq!(evaluate("(:dn:caseExactMatch:=sales)"), Tri::False);
    assert_eq!(evaluate("(ou:dn:caseExactMatch:=Sales)"), Tri::True);
    assert_eq!(evaluate("(dc:dn:caseExactIA5Match:=example)"), Tri::True);
    assert_eq!(evaluate("(dc:dn:caseExactIA5Match:=EXAMPLE)"), Tri::False);
    assert_eq!(
        evaluate("(uidNumber:integerOrderingMatch:=2000)"),
        Tri::True,
        "ordering rule: value < assertion"
    );
    assert_eq!(
        evaluate("(uidNumber:integerOrderingMatch:=1000)"),
        Tri::False
    );
    assert_eq!(
        evaluate("(cn:caseIgnoreSubstringsMatch:=*jens*)"),
        Tri::True
    );
    assert_eq!(evaluate("(cn:noSuchMatch:=x)"), Tri::Undefined);
}

#[test]
fn language_range_options_match_the_tags_in_the_range() {
    // babs has cn;lang-de: Bärbel Jensen.
    assert_eq!(evaluate("(cn;lang-de=Bärbel Jensen)"), Tri::True);
    assert_eq!(evaluate("(cn;lang-de-=Bärbel Jensen)"), Tri::True);
    assert_eq!(evaluate("(name;lang-de-=Bärbel Jensen)"), Tri::True);
    assert_eq!(evaluate("(cn;lang-=Bärbel Jensen)"), Tri::True);
    assert_eq!(evaluate("(cn;lang-=Babs Jensen)"), Tri::False);
    assert_eq!(evaluate("(cn;lang-d-=Bärbel Jensen)"), Tri::False);
    assert_eq!(evaluate("(cn;lang-en-=Bärbel Jensen)"), Tri::False);
    assert_eq!(evaluate("(cn;lang-=*)"), Tri::True);
    assert_eq!(evaluate("(sn;lang-=*)"), Tri::False);
    let options = |text: &str| -> Vec<String> {
        text.split(';')
            .filter(|option| !option.is_empty())
            .map(str::to_string)
            .collect()
    };
    for (asked, present, expected) in [
        ("lang-en-", "lang-en-us", true),
        ("lang-en-", "lang-en", true),
        ("lang-en-", "lang-eng", false),
        ("lang-en-", "lang-en-gb;lang-en-us", true),
        ("lang-en-;binary", "binary;lang-en-gb", true),
        ("lang-en-;binary", "lang-en-gb", false),
        ("lang-", "lang-fr", true),
        ("lang-", "", false),
        ("lang-en", "lang-en-us", false),
        ("", "lang-en", true),
    ] {
        assert_eq!(
            lmdir_schema::options_match(&options(asked), &options(present)),
            expected,
            "{asked} in {present}"
        );
    }
}

#[test]
fn subschema_attributes_match_by_the_oid_their_values_start_with() {
    let schema = Schema::builtin();
    let view = OwnedEntryView::new(&schema, &schema.subschema_entry()).unwrap();
    let evaluate_on = |text: &str| {
        schema
            .prepare_filter(&Filter::parse(text, DEPTH_MAX).unwrap())
            .evaluate(&view)
    };
    assert_eq!(evaluate_on("(objectClasses=2.5.6.0)"), Tri::True);
    assert_eq!(evaluate_on("(objectClasses=top)"), Tri::True);
    assert_eq!(evaluate_on("(objectClasses=pilotPerson)"), Tri::True);
    assert_eq!(evaluate_on("(attributeTypes=2.5.4.3)"), Tri::True);
    assert_eq!(evaluate_on("(attributeTypes=commonName)"), Tri::True);
    assert_eq!(evaluate_on("(matchingRules=caseExactMatch)"), Tri::True);
    assert_eq!(
        evaluate_on("(ldapSyntaxes=1.3.6.1.4.1.1466.115.121.1.27)"),
        Tri::True
    );
    assert_eq!(evaluate_on("(objectClasses=2.5.6.999)"), Tri::False);
    assert_eq!(evaluate_on("(objectClasses=2.5.4.3)"), Tri::False);
    assert_eq!(evaluate_on("(objectClasses=not an oid)"), Tri::Undefined);
}

#[test]
fn bitwise_rules_test_bits_of_integer_values() {
    // uidNumber 1042 = 0b100_0001_0010.
    let and = "1.2.840.113556.1.4.803";
    let or = "1.2.840.113556.1.4.804";
    assert_eq!(evaluate(&format!("(uidNumber:{and}:=2)")), Tri::True);
    assert_eq!(evaluate(&format!("(uidNumber:{and}:=18)")), Tri::True);
    assert_eq!(evaluate(&format!("(uidNumber:{and}:=1042)")), Tri::True);
    assert_eq!(evaluate(&format!("(uidNumber:{and}:=3)")), Tri::False);
    assert_eq!(evaluate(&format!("(uidNumber:{or}:=3)")), Tri::True);
    assert_eq!(evaluate(&format!("(uidNumber:{or}:=5)")), Tri::False);
    assert_eq!(evaluate("(uidNumber:integerBitAndMatch:=1024)"), Tri::True);
    assert_eq!(evaluate("(uidNumber:INTEGERBITORMATCH:=1)"), Tri::False);
    // Attribute-less: every INTEGER attribute (uidNumber, gidNumber 100 = 0b110_0100).
    assert_eq!(evaluate(&format!("(:{and}:=100)")), Tri::True);
    assert_eq!(evaluate(&format!("(!(:{and}:=101))")), Tri::True);
    // Assertions that are not 64-bit integers are Undefined.
    assert_eq!(
        evaluate(&format!("(uidNumber:{and}:=99999999999999999999)")),
        Tri::Undefined
    );
    assert_eq!(evaluate(&format!("(uidNumber:{and}:=two)")), Tri::Undefined);
    // Not an EQUALITY rule for an attribute type.
    let error = Schema::builtin()
        .load_schema_text(
            "attributetype ( 1.3.6.1.4.1.99999.30.1 NAME 'flags' EQUALITY integerBitAndMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 )",
            "flags.schema",
        )
        .unwrap_err();
    assert!(error.message.contains("is not a Equality rule"), "{error}");
}

#[test]
fn dn_avas_keep_their_original_spelling_beside_the_normalized_form() {
    let schema = Schema::builtin();
    let mut seen = Vec::new();
    schema.for_each_dn_ava_of("CN=A\\,B+sn=C,DC=Example", &mut |attr, value| {
        seen.push((
            schema.attribute_type(attr).name().to_string(),
            String::from_utf8(value.original.to_vec()).unwrap(),
            String::from_utf8(value.normalized.to_vec()).unwrap(),
        ));
        true
    });
    let expected = [
        ("cn", "A,B", "a,b"),
        ("sn", "C", "c"),
        ("dc", "Example", "example"),
    ];
    assert_eq!(
        seen,
        expected
            .iter()
            .map(|(name, original, normalized)| (
                name.to_string(),
                original.to_string(),
                normalized.to_string()
            ))
            .collect::<Vec<_>>()
    );
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(b'*'),
            Just(b'('),
            Just(b')'),
            Just(b'\\'),
            Just(0u8),
            Just(0xFFu8),
            b'a'..=b'e'
        ],
        0..6,
    )
}

fn non_empty_value() -> impl Strategy<Value = Vec<u8>> {
    value_strategy().prop_filter("non-empty", |value| !value.is_empty())
}

fn description_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cn".to_string()),
        Just("sn;lang-en".to_string()),
        Just("2.5.4.3".to_string()),
        Just("uidNumber".to_string())
    ]
}

fn filter_strategy() -> impl Strategy<Value = Filter> {
    let leaf = prop_oneof![
        (description_strategy(), value_strategy())
            .prop_map(|(description, value)| Filter::Equality { description, value }),
        (description_strategy(), value_strategy())
            .prop_map(|(description, value)| Filter::GreaterOrEqual { description, value }),
        (description_strategy(), value_strategy())
            .prop_map(|(description, value)| Filter::LessOrEqual { description, value }),
        (description_strategy(), value_strategy())
            .prop_map(|(description, value)| Filter::Approx { description, value }),
        description_strategy().prop_map(|description| Filter::Present { description }),
        (
            description_strategy(),
            proptest::option::of(non_empty_value()),
            proptest::collection::vec(non_empty_value(), 0..3),
            proptest::option::of(non_empty_value())
        )
            .prop_filter("at least one piece", |(_, initial, any, final_)| initial
                .is_some()
                || !any.is_empty()
                || final_.is_some())
            .prop_map(|(description, initial, any, final_)| Filter::Substrings {
                description,
                initial,
                any,
                final_
            }),
        (
            proptest::option::of(Just("caseExactMatch".to_string())),
            proptest::option::of(description_strategy()),
            value_strategy(),
            any::<bool>()
        )
            .prop_filter("attribute or rule", |(rule, description, _, _)| rule
                .is_some()
                || description.is_some())
            .prop_map(
                |(rule, description, value, dn_attributes)| Filter::Extensible {
                    rule,
                    description,
                    value,
                    dn_attributes
                }
            ),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Filter::And),
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Filter::Or),
            inner.prop_map(|filter| Filter::Not(Box::new(filter))),
        ]
    })
}

proptest! {
    #[test]
    fn display_then_parse_round_trips(filter in filter_strategy()) {
        let text = filter.to_string();
        prop_assert_eq!(Filter::parse(&text, DEPTH_MAX).unwrap(), filter);
    }

    #[test]
    fn not_inverts_definite_results(filter in filter_strategy()) {
        let schema = Schema::builtin();
        let view = OwnedEntryView::new(&schema, &babs()).unwrap();
        let result = schema.prepare_filter(&filter).evaluate(&view);
        let negated = schema.prepare_filter(&Filter::Not(Box::new(filter))).evaluate(&view);
        prop_assert_eq!(negated, result.not());
    }
}
