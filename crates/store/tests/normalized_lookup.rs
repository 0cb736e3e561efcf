//! `normalized_dn_to_id` (a DN normalized once, looked up without parsing it again) finds what
//! `dn_to_id` finds, escapes and multi-valued RDNs included, and misses the same way.

use crate::common;

use common::*;

/// DNs whose normalized form has escaped commas, escaped pluses and multi-valued RDNs.
fn awkward_entries() -> Vec<lmdir_schema::Entry> {
    let person = |dn: &str, cn: &str, sn: &str| {
        entry(dn, &[("objectClass", "person"), ("cn", cn), ("sn", sn)])
    };
    vec![
        person(
            &format!("cn=Smith\\, John,ou=people,{SUFFIX}"),
            "Smith, John",
            "Smith",
        ),
        person(&format!("cn=A\\+B+sn=Lee,ou=people,{SUFFIX}"), "A+B", "Lee"),
        person(
            &format!("CN = Ünïcode  Name ,ou=people,{SUFFIX}"),
            "Ünïcode Name",
            "Name",
        ),
    ]
}

#[test]
fn normalized_lookup_finds_what_dn_to_id_finds() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(20), 100);
    add_all(&store, &awkward_entries(), 10);
    let schema = store.schema().clone();
    let read = store.read().unwrap();
    let mut dns: Vec<String> = (0..20).map(person_dn).collect();
    dns.extend(awkward_entries().iter().map(|entry| entry.dn.to_string()));
    dns.push(SUFFIX.to_string());
    dns.push(format!("ou=people,{SUFFIX}"));
    for dn in &dns {
        let expected = read.dn_to_id(dn).unwrap();
        let normalized = schema.normalize_dn_str(dn).unwrap();
        // A fresh txn each time: the last-found cache must not answer for the lookup itself.
        let fresh = store.read().unwrap();
        assert_eq!(
            fresh.normalized_dn_to_id(&normalized).unwrap(),
            expected,
            "{dn}"
        );
        // A DN that is not normalized still finds its entry (through the general path).
        let fresh = store.read().unwrap();
        let shouted = dn.to_uppercase();
        assert_eq!(
            fresh.normalized_dn_to_id(&shouted).unwrap(),
            expected,
            "{shouted}"
        );
    }
}

#[test]
fn normalized_lookup_misses_as_dn_to_id_does() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(5), 100);
    let schema = store.schema().clone();
    for dn in [
        format!("uid=nobody,ou=dept1,ou=people,{SUFFIX}"),
        format!("uid=a,uid=b,ou=people,{SUFFIX}"),
        "dc=elsewhere,dc=org".to_string(),
        String::new(),
    ] {
        let normalized = schema.normalize_dn_str(&dn).unwrap();
        let expected = store.read().unwrap().dn_to_id(&normalized).unwrap_err();
        let got = store
            .read()
            .unwrap()
            .normalized_dn_to_id(&normalized)
            .unwrap_err();
        assert_eq!(
            (got.code, &got.message, &got.matched_dn),
            (expected.code, &expected.message, &expected.matched_dn),
            "{dn}"
        );
    }
}
