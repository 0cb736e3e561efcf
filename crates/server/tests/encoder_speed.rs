//! Measures the direct SearchResultEntry encoder against ldap3_proto's on a typical 12-attribute
//! person entry and prints the numbers (`cargo test --release -p lmdir-server --test
//! integration encoder_speed:: -- --nocapture`). Equality of the bytes is asserted; timings never are.

use bytes::BytesMut;
use ldap3_proto::proto::{LdapMsg, LdapOp, LdapPartialAttribute, LdapSearchResultEntry};
use ldap3_proto::LdapCodec;
use lmdir_server::ber::EntryWriter;
use std::time::Instant;
use tokio_util::codec::Encoder;

/// Attribute name and values.
type AttributeValues = (String, Vec<Vec<u8>>);

fn person() -> (String, Vec<AttributeValues>) {
    let attributes = [
        (
            "objectClass",
            vec![
                "top",
                "person",
                "organizationalPerson",
                "inetOrgPerson",
                "posixAccount",
            ],
        ),
        ("uid", vec!["u0001234"]),
        ("cn", vec!["Zofia Kowalska"]),
        ("sn", vec!["Kowalska"]),
        ("givenName", vec!["Zofia"]),
        (
            "mail",
            vec!["u0001234@example.com", "zofia.kowalska@example.com"],
        ),
        ("telephoneNumber", vec!["+48 12 345 67 89"]),
        ("title", vec!["Senior Engineer"]),
        ("l", vec!["Kraków"]),
        ("uidNumber", vec!["11234"]),
        ("gidNumber", vec!["10000"]),
        ("homeDirectory", vec!["/home/u0001234"]),
    ];
    (
        "uid=u0001234,ou=People,dc=example,dc=com".to_string(),
        attributes
            .iter()
            .map(|(name, values)| {
                (
                    name.to_string(),
                    values
                        .iter()
                        .map(|value| value.as_bytes().to_vec())
                        .collect(),
                )
            })
            .collect(),
    )
}

#[test]
fn direct_encoder_matches_and_is_measured_against_ldap3_proto() {
    let (dn, attributes) = person();
    let rounds = 20_000;

    let mut reference = BytesMut::new();
    let started = Instant::now();
    for round in 0..rounds {
        reference.clear();
        let message = LdapMsg::new(
            round,
            LdapOp::SearchResultEntry(LdapSearchResultEntry {
                dn: dn.clone(),
                attributes: attributes
                    .iter()
                    .map(|(name, values)| LdapPartialAttribute {
                        atype: name.clone(),
                        vals: values.clone(),
                    })
                    .collect(),
            }),
        );
        LdapCodec::default()
            .encode(message, &mut reference)
            .expect("encode");
    }
    let reference_elapsed = started.elapsed();

    let mut own = BytesMut::new();
    let started = Instant::now();
    for round in 0..rounds {
        own.clear();
        let mut writer = EntryWriter::begin(&mut own, round, dn.as_bytes());
        for (name, values) in &attributes {
            writer.attribute(name.as_bytes(), values.iter().map(Vec::as_slice));
        }
        writer.finish(&[]);
    }
    let own_elapsed = started.elapsed();

    assert_eq!(own, reference, "identical bytes for the last round");
    let per_entry = |elapsed: std::time::Duration| elapsed.as_nanos() / rounds as u128;
    println!(
        "SearchResultEntry of {} bytes: ldap3_proto {} ns/entry, direct {} ns/entry",
        own.len(),
        per_entry(reference_elapsed),
        per_entry(own_elapsed)
    );
}
