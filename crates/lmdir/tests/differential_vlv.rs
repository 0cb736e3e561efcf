//! Virtual list view against OpenLDAP's sssvlv overlay: the same data and the same VLV requests
//! (as address books and UnboundID's `--virtualListView` browse; sent with the ldap3 client,
//! since ldapsearch's VLV mode asks for the next window on its standard input) give the same entries in the same order, the same target position and content count,
//! and the same result codes on both servers.

use crate::conformance;

use conformance::{normalize_dn, Extra, Pair, Setup, ROOT_DN, ROOT_PASSWORD, SUFFIX};
use ldap3::controls::RawControl;
use ldap3::{LdapConn, Scope, SearchEntry, SearchResult};

const PEOPLE: usize = 40;

/// People with unique uid and cn values (sssvlv breaks ties its own way; lmdir in ID order), in
/// an order that is neither the sort order nor its reverse.
fn dataset() -> String {
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,{SUFFIX}\nobjectClass: organizationalUnit\nou: People\n\n"
    );
    for index in 0..PEOPLE {
        let key = (index * 17) % PEOPLE;
        ldif += &format!(
            "dn: uid=p{key:03},ou=People,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: p{key:03}\n\
             cn: Person {:03}\nsn: S{key}\n\n",
            PEOPLE - key
        );
    }
    ldif
}

/// What a server answered to one VLV search: the result code, the DNs in order, and the VLV
/// response's (targetPosition, contentCount, virtualListViewResult); each server picks its own
/// context ID, which is left out.
#[derive(Debug, PartialEq, Eq)]
struct VlvAnswer {
    code: u32,
    dns: Vec<String>,
    vlv: Option<(i64, i64, i64)>,
}

/// One BER element.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut bytes = vec![tag];
    match content.len() {
        length @ 0..=127 => bytes.push(length as u8),
        length => {
            let length_bytes = (length as u32).to_be_bytes();
            let skip = length_bytes.iter().take_while(|byte| **byte == 0).count();
            bytes.push(0x80 | (4 - skip) as u8);
            bytes.extend_from_slice(&length_bytes[skip..]);
        }
    }
    bytes.extend_from_slice(content);
    bytes
}

fn integer(tag: u8, value: u32) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    let mut skip = bytes.iter().take_while(|byte| **byte == 0).count().min(3);
    if bytes[skip] & 0x80 != 0 {
        skip -= 1;
    }
    let content: Vec<u8> = if skip == 4 {
        vec![0]
    } else {
        bytes[skip..].to_vec()
    };
    tlv(tag, &content)
}

/// The sort control on one key (`-` first: reversed) with caseIgnoreOrderingMatch, as OpenLDAP's
/// schema gives cn no ORDERING rule of its own.
fn sort_control(key: &str) -> RawControl {
    let (attribute, reverse) = match key.strip_prefix('-') {
        Some(attribute) => (attribute, true),
        None => (key, false),
    };
    let mut fields = tlv(0x04, attribute.as_bytes());
    fields.extend(tlv(0x80, b"2.5.13.3"));
    if reverse {
        fields.extend(tlv(0x81, &[0xff]));
    }
    RawControl {
        ctype: "1.2.840.113556.1.4.473".to_string(),
        crit: true,
        val: Some(tlv(0x30, &tlv(0x30, &fields))),
    }
}

enum Target<'a> {
    Offset(u32, u32),
    Value(&'a str),
}

fn vlv_control(before: u32, after: u32, target: Target<'_>) -> RawControl {
    let mut fields = integer(0x02, before);
    fields.extend(integer(0x02, after));
    fields.extend(match target {
        Target::Offset(offset, count) => {
            let mut pair = integer(0x02, offset);
            pair.extend(integer(0x02, count));
            tlv(0xa0, &pair)
        }
        Target::Value(value) => tlv(0x81, value.as_bytes()),
    });
    RawControl {
        ctype: "2.16.840.1.113730.3.4.9".to_string(),
        crit: true,
        val: Some(tlv(0x30, &fields)),
    }
}

/// Simple paged results (RFC 2696), first page of `size`.
fn paged_control(size: u32) -> RawControl {
    let mut fields = integer(0x02, size);
    fields.extend(tlv(0x04, b""));
    RawControl {
        ctype: "1.2.840.113556.1.4.319".to_string(),
        crit: false,
        val: Some(tlv(0x30, &fields)),
    }
}

/// (targetPosition, contentCount, virtualListViewResult) of a VirtualListViewResponse value.
fn vlv_response(value: &[u8]) -> (i64, i64, i64) {
    let mut numbers = Vec::new();
    let mut rest = &value[2..];
    while numbers.len() < 3 {
        let length = usize::from(rest[1]);
        let number = rest[2..2 + length]
            .iter()
            .fold(0i64, |total, byte| (total << 8) | i64::from(*byte));
        numbers.push(number);
        rest = &rest[2 + length..];
    }
    (numbers[0], numbers[1], numbers[2])
}

fn vlv_search(port: u16, controls: Vec<RawControl>) -> VlvAnswer {
    let mut connection = LdapConn::new(&format!("ldap://127.0.0.1:{port}")).expect("connect");
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("bind succeeds");
    let SearchResult(entries, result) = connection
        .with_controls(controls)
        .search(
            &format!("ou=People,{SUFFIX}"),
            Scope::OneLevel,
            "(uid=*)",
            vec!["1.1"],
        )
        .expect("search");
    let _ = connection.unbind();
    VlvAnswer {
        code: result.rc,
        dns: entries
            .into_iter()
            .map(|entry| normalize_dn(&SearchEntry::construct(entry).dn))
            .collect(),
        vlv: result
            .ctrls
            .iter()
            .find(|control| control.1.ctype == "2.16.840.1.113730.3.4.10")
            .and_then(|control| control.1.val.as_deref())
            .map(vlv_response),
    }
}

#[test]
fn virtual_list_views_answer_as_slapd_sssvlv() {
    if !conformance::tools_ready("the VLV differential suite") {
        return;
    }
    let extra = Extra {
        slapd_global: "moduleload sssvlv\n",
        slapd_database: "overlay sssvlv\n",
        lmdir_server: "",
        lmdir_database: "",
    };
    let pair = Pair::start_configured(&dataset(), Setup::Plain, &extra);
    use Target::{Offset, Value};
    let cases: Vec<(&str, Vec<RawControl>)> = vec![
        (
            "first five",
            vec![sort_control("cn"), vlv_control(0, 4, Offset(1, 0))],
        ),
        (
            "middle",
            vec![sort_control("cn"), vlv_control(2, 2, Offset(20, 0))],
        ),
        (
            "last by offset = count",
            vec![sort_control("cn"), vlv_control(3, 3, Offset(40, 40))],
        ),
        (
            "scaled",
            vec![sort_control("cn"), vlv_control(1, 1, Offset(30, 80))],
        ),
        (
            "0/0 is the last",
            vec![sort_control("cn"), vlv_control(0, 0, Offset(0, 0))],
        ),
        (
            "before past the start",
            vec![sort_control("cn"), vlv_control(5, 0, Offset(3, 0))],
        ),
        (
            "after past the end",
            vec![sort_control("cn"), vlv_control(0, 1000, Offset(1, 0))],
        ),
        (
            "reversed",
            vec![sort_control("-cn"), vlv_control(1, 2, Offset(10, 0))],
        ),
        (
            "by value",
            vec![sort_control("cn"), vlv_control(2, 2, Value("Person 017"))],
        ),
        (
            "by value between",
            vec![sort_control("cn"), vlv_control(2, 2, Value("person 0175"))],
        ),
        (
            "by value past the end",
            vec![sort_control("cn"), vlv_control(3, 1, Value("zzz"))],
        ),
        (
            "by value past the end, none before",
            vec![sort_control("cn"), vlv_control(0, 0, Value("zzz"))],
        ),
        (
            "by value reversed",
            vec![sort_control("-cn"), vlv_control(1, 1, Value("Person 010"))],
        ),
        (
            "offset beyond the list",
            vec![sort_control("cn"), vlv_control(0, 0, Offset(41, 0))],
        ),
        (
            "offset beyond the count",
            vec![sort_control("cn"), vlv_control(0, 0, Offset(90, 80))],
        ),
        ("no sort control", vec![vlv_control(0, 4, Offset(1, 0))]),
        (
            "paged results too",
            vec![
                sort_control("cn"),
                vlv_control(0, 4, Offset(1, 0)),
                paged_control(5),
            ],
        ),
    ];
    let mut differences = Vec::new();
    for (name, controls) in &cases {
        let openldap = vlv_search(pair.openldap_port, controls.clone());
        let lmdir = vlv_search(pair.lmdir_port, controls.clone());
        if openldap != lmdir {
            differences.push(format!(
                "{name}\n  OpenLDAP: {openldap:?}\n  lmdir:    {lmdir:?}"
            ));
        }
    }
    // The comparison is not vacuous: windows came back with the response control.
    let first = vlv_search(pair.lmdir_port, cases[0].1.clone());
    assert_eq!(first.dns.len(), 5, "{first:?}");
    assert_eq!(first.vlv, Some((1, 40, 0)), "{first:?}");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
