//! Hostile input never panics: every parser and normalizer returns a value or a clear error.

use lmdir_schema::{Dn, Filter, OwnedEntryView, Schema};
use proptest::prelude::*;

/// Strings made mostly of the characters the parsers treat specially.
fn tricky_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            proptest::sample::select(vec![
                "=", ",", "+", ";", "\\", "#", "\"", " ", "(", ")", "*", "&", "|", "!", ":", "~",
                ">", "<", "'", "$", "{", "}", "B", "0", "1", "a", "cn", "dn", "Z", "-", ".", "é",
                "\u{0}", "2a", "04", "\n", "\t",
            ])
            .prop_map(str::to_string),
            "\\PC{0,3}",
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn dn_parsing_and_normalization_never_panic(text in tricky_text()) {
        let schema = Schema::builtin_shared();
        if let Ok(dn) = Dn::parse(&text) {
            let _ = schema.normalize_dn(&dn);
            let _ = Dn::parse(&dn.to_string()).expect("the string form of a parsed DN parses");
        }
    }

    #[test]
    fn filter_parsing_preparing_and_evaluating_never_panic(text in tricky_text()) {
        let schema = Schema::builtin_shared();
        if let Ok(filter) = Filter::parse(&text, 16) {
            let reparsed = Filter::parse(&filter.to_string(), 16).expect("the string form of a parsed filter parses");
            prop_assert_eq!(&reparsed, &filter);
            let entry = lmdir_schema::Entry {
                dn: Dn::parse("cn=a b,dc=x").unwrap(),
                attributes: vec![
                    lmdir_schema::Attribute { description: "objectClass".into(), values: vec![b"person".to_vec()] },
                    lmdir_schema::Attribute { description: "cn".into(), values: vec![b"a b".to_vec()] },
                    lmdir_schema::Attribute { description: "sn".into(), values: vec![b"b".to_vec()] },
                ],
            };
            let view = OwnedEntryView::new(schema, &entry).unwrap();
            let _ = schema.prepare_filter(&filter).evaluate(&view);
        }
    }

    #[test]
    fn normalizing_any_bytes_for_any_attribute_never_panics(value in proptest::collection::vec(any::<u8>(), 0..24), text in tricky_text()) {
        let schema = Schema::builtin_shared();
        for (attr, _) in schema.attribute_types() {
            let _ = schema.normalize_value(attr, &value);
            let _ = schema.normalize_value(attr, text.as_bytes());
        }
    }

    #[test]
    fn schema_text_never_panics(text in tricky_text(), keyword in proptest::sample::select(vec!["attributetype", "objectclass", "objectidentifier", ""])) {
        let mut schema = Schema::builtin();
        let _ = schema.load_schema_text(&format!("{keyword} ( 1.2.3.4 {text}"), "fuzz.schema");
        let _ = schema.load_schema_text(&format!("{keyword} {text}"), "fuzz.schema");
        let _ = schema.parse_description(&text);
    }
}
