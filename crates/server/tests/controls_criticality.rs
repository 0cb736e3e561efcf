//! Request controls over the wire: criticality on every operation, sort that cannot be honoured,
//! malformed controls, no decoding by ldap3_proto; and the small client-compatibility items
//! (ldapi socket mode, root DSE class in cn=Subschema, cn=Subschema timestamps).

use crate::common;

use common::{person_dn, root, TestServer, ROOT_DN, ROOT_PASSWORD};
use ldap3::controls::RawControl;
use ldap3::exop::Exop;
use ldap3::{LdapConn, LdapResult, Mod, Scope, SearchEntry};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const SORT_REQUEST_OID: &str = "1.2.840.113556.1.4.473";
const SORT_RESPONSE_OID: &str = "1.2.840.113556.1.4.474";
const PAGED_RESULTS_OID: &str = "1.2.840.113556.1.4.319";
const ASSERTION_OID: &str = "1.3.6.1.1.12";
const PRE_READ_OID: &str = "1.3.6.1.1.13.1";
const POST_READ_OID: &str = "1.3.6.1.1.13.2";
const UNKNOWN_OID: &str = "1.3.6.1.4.1.99999.1";
const PEOPLE_BASE: &str = "ou=people,dc=example,dc=com";
const PEOPLE: usize = 300;

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    assert!(content.len() < 0x1_0000, "test values stay small");
    let mut out = vec![tag];
    if content.len() < 0x80 {
        out.push(content.len() as u8);
    } else {
        out.extend_from_slice(&[0x82, (content.len() >> 8) as u8, content.len() as u8]);
    }
    out.extend_from_slice(content);
    out
}

fn sequence(items: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &items.concat())
}

/// SortKeyList with one key: attribute, optional ordering rule.
fn sort_value(attribute: &str, ordering_rule: Option<&str>) -> Vec<u8> {
    let mut key = vec![tlv(0x04, attribute.as_bytes())];
    if let Some(rule) = ordering_rule {
        key.push(tlv(0x80, rule.as_bytes()));
    }
    sequence(&[sequence(&key)])
}

fn paged_value(size: u8) -> Vec<u8> {
    sequence(&[tlv(0x02, &[size]), tlv(0x04, b"")])
}

fn control(oid: &str, critical: bool, value: Option<Vec<u8>>) -> RawControl {
    RawControl {
        ctype: oid.to_string(),
        crit: critical,
        val: value,
    }
}

fn people_search(
    connection: &mut LdapConn,
    controls: Vec<RawControl>,
) -> (Vec<SearchEntry>, LdapResult) {
    let result = connection
        .with_controls(controls)
        .search(
            PEOPLE_BASE,
            Scope::OneLevel,
            "(objectClass=inetOrgPerson)",
            vec!["sn"],
        )
        .expect("search");
    let entries = result.0.into_iter().map(SearchEntry::construct).collect();
    (entries, result.1)
}

/// The sortResult code in a SortResult response control (RFC 2891 §1.2).
fn sort_result_code(result: &LdapResult) -> Option<u8> {
    let control = result
        .ctrls
        .iter()
        .find(|control| control.1.ctype == SORT_RESPONSE_OID)?;
    match control.1.val.as_deref()? {
        [0x30, _, 0x0a, 0x01, code, ..] => Some(*code),
        other => panic!("undecodable SortResult {other:02x?}"),
    }
}

/// Every operation type with `extra` controls, in an order that keeps each one meaningful
/// (the add creates what modify, modrdn and delete then touch); returns each result code.
fn every_operation(server: &TestServer, extra: &RawControl) -> Vec<(&'static str, u32)> {
    let mut connection = root(server);
    let added = "uid=controls-added,ou=people,dc=example,dc=com";
    let renamed = "uid=controls-renamed,ou=people,dc=example,dc=com";
    let controls = || vec![extra.clone()];
    let mut codes = Vec::new();
    let rc = connection
        .with_controls(controls())
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .rc;
    codes.push(("bind", rc));
    // A refused bind leaves the connection anonymous: bind again without controls.
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("rootdn bind");
    let search = connection
        .with_controls(controls())
        .search(PEOPLE_BASE, Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search");
    codes.push(("search", search.1.rc));
    let root_dse = connection
        .with_controls(controls())
        .search("", Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("root DSE search");
    codes.push(("root DSE search", root_dse.1.rc));
    let compare = connection
        .with_controls(controls())
        .compare(&person_dn(1), "uid", "u0000001")
        .expect("compare");
    codes.push(("compare", compare.0.rc));
    let attributes = vec![
        ("objectClass", HashSet::from(["inetOrgPerson"])),
        ("uid", HashSet::from(["controls-added"])),
        ("cn", HashSet::from(["Added"])),
        ("sn", HashSet::from(["Added"])),
    ];
    let add = connection
        .with_controls(controls())
        .add(added, attributes)
        .expect("add");
    codes.push(("add", add.rc));
    let modify = connection
        .with_controls(controls())
        .modify(added, vec![Mod::Replace("sn", HashSet::from(["Changed"]))])
        .expect("modify");
    codes.push(("modify", modify.rc));
    let modrdn = connection
        .with_controls(controls())
        .modifydn(added, "uid=controls-renamed", true, None)
        .expect("modrdn");
    codes.push(("modrdn", modrdn.rc));
    let delete = connection
        .with_controls(controls())
        .delete(renamed)
        .expect("delete");
    codes.push(("delete", delete.rc));
    let whoami = connection
        .with_controls(controls())
        .extended(Exop {
            name: Some("1.3.6.1.4.1.4203.1.11.3".to_string()),
            val: None,
        })
        .expect("whoami");
    codes.push(("whoami", whoami.1.rc));
    // Cancel of a message ID that is not outstanding: noSuchOperation unless refused first.
    let cancel = connection
        .with_controls(controls())
        .extended(Exop {
            name: Some("1.3.6.1.1.8".to_string()),
            val: Some(sequence(&[tlv(0x02, &[0x7f])])),
        })
        .expect("cancel");
    codes.push(("cancel", cancel.1.rc));
    codes
}

#[test]
fn critical_unknown_control_is_refused_on_every_operation_and_non_critical_ignored() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let refused = every_operation(&server, &control(UNKNOWN_OID, true, None));
    for (operation, code) in &refused {
        assert_eq!(*code, 12, "{operation} with a critical unknown control");
    }
    // Nothing was applied: the add was refused, so the entry does not exist.
    let mut connection = root(&server);
    let probe = connection
        .search(
            "uid=controls-added,ou=people,dc=example,dc=com",
            Scope::Base,
            "(objectClass=*)",
            vec!["1.1"],
        )
        .expect("search");
    assert_eq!(probe.1.rc, 32, "the refused add wrote nothing");

    let ignored = every_operation(&server, &control(UNKNOWN_OID, false, None));
    let expected = [
        ("bind", 0),
        ("search", 0),
        ("root DSE search", 0),
        ("compare", 6),
        ("add", 0),
        ("modify", 0),
        ("modrdn", 0),
        ("delete", 0),
        ("whoami", 0),
        ("cancel", 119),
    ];
    assert_eq!(ignored, expected);
}

#[test]
fn critical_control_on_start_tls_is_refused_and_the_connection_stays_clear() {
    let server = TestServer::start(|_| {});
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    let start_tls = connection
        .with_controls(vec![control(UNKNOWN_OID, true, None)])
        .extended(Exop {
            name: Some("1.3.6.1.4.1.1466.20037".to_string()),
            val: None,
        })
        .expect("StartTLS");
    assert_eq!(start_tls.1.rc, 12);
    let root_dse = connection
        .search("", Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search in clear after the refusal");
    assert_eq!(root_dse.1.rc, 0);
}

#[test]
fn sort_that_cannot_be_honoured_fails_only_when_critical() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut connection = root(&server);
    let unknown_attribute = sort_value("noSuchAttributeAtAll", None);
    let unknown_rule = sort_value("sn", Some("noSuchOrderingMatch"));
    for value in [&unknown_attribute, &unknown_rule] {
        let (entries, result) = people_search(
            &mut connection,
            vec![control(SORT_REQUEST_OID, true, Some(value.clone()))],
        );
        assert_eq!(result.rc, 12, "critical sort that cannot be done");
        assert!(entries.is_empty());
    }
    // Non-critical: every entry, unsorted, and the reason in the sort response control.
    let (entries, result) = people_search(
        &mut connection,
        vec![control(SORT_REQUEST_OID, false, Some(unknown_attribute))],
    );
    assert_eq!(result.rc, 0);
    assert_eq!(entries.len(), PEOPLE);
    assert_eq!(sort_result_code(&result), Some(16), "noSuchAttribute");
    let (_, result) = people_search(
        &mut connection,
        vec![control(SORT_REQUEST_OID, false, Some(unknown_rule))],
    );
    assert_eq!(result.rc, 0);
    assert_eq!(sort_result_code(&result), Some(18), "inappropriateMatching");

    // A critical sort that can be done is done.
    let (entries, result) = people_search(
        &mut connection,
        vec![control(
            SORT_REQUEST_OID,
            true,
            Some(sort_value("sn", None)),
        )],
    );
    assert_eq!(result.rc, 0);
    assert_eq!(sort_result_code(&result), Some(0));
    assert_eq!(entries.len(), PEOPLE);
    let surnames: Vec<String> = entries
        .iter()
        .map(|entry| entry.attrs["sn"][0].to_lowercase())
        .collect();
    assert!(
        surnames.windows(2).all(|pair| pair[0] <= pair[1]),
        "sorted by sn"
    );
    // Without sorting the store returns ID order, which is not sn order here.
    let (unsorted, _) = people_search(&mut connection, Vec::new());
    let unsorted: Vec<String> = unsorted
        .iter()
        .map(|entry| entry.attrs["sn"][0].to_lowercase())
        .collect();
    assert_ne!(
        unsorted, surnames,
        "the sorted order differs from the stored order"
    );
}

#[test]
fn paged_results_outside_search_follows_its_criticality() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut connection = root(&server);
    let compare = |connection: &mut LdapConn, critical| {
        connection
            .with_controls(vec![control(
                PAGED_RESULTS_OID,
                critical,
                Some(paged_value(5)),
            )])
            .compare(&person_dn(2), "uid", "u0000002")
            .expect("compare")
            .0
            .rc
    };
    assert_eq!(compare(&mut connection, true), 12);
    assert_eq!(compare(&mut connection, false), 6, "ignored: compareTrue");
    // On a search, critical paging is honoured.
    let (entries, result) = people_search(
        &mut connection,
        vec![control(PAGED_RESULTS_OID, true, Some(paged_value(5)))],
    );
    assert_eq!(result.rc, 0);
    assert_eq!(entries.len(), 5);
}

#[test]
fn bad_control_values_answer_protocol_error_and_the_connection_continues() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut connection = root(&server);
    let bad = [
        control(SORT_REQUEST_OID, false, Some(vec![0x30, 0x03, 0x04, 0x01])),
        control(SORT_REQUEST_OID, false, Some(sequence(&[]))),
        control(PAGED_RESULTS_OID, false, Some(b"not BER".to_vec())),
        control(ASSERTION_OID, true, None),
        // The same control twice.
        control(SORT_REQUEST_OID, false, Some(sort_value("sn", None))),
    ];
    for (index, value) in bad.iter().enumerate() {
        let mut controls = vec![value.clone()];
        if index == bad.len() - 1 {
            controls.push(value.clone());
        }
        let (entries, result) = people_search(&mut connection, controls);
        assert_eq!(result.rc, 2, "protocolError for {value:?}");
        assert!(entries.is_empty());
    }
    let (entries, result) = people_search(&mut connection, Vec::new());
    assert_eq!(
        (result.rc, entries.len()),
        (0, PEOPLE),
        "same connection still works"
    );
}

#[test]
fn too_many_controls_or_read_attributes_exceed_admin_limits() {
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut connection = root(&server);
    let many = vec![control(UNKNOWN_OID, false, None); 33];
    let (_, result) = people_search(&mut connection, many);
    assert_eq!(result.rc, 11, "more than 32 controls");
    let attributes: Vec<Vec<u8>> = (0..257).map(|_| tlv(0x04, b"cn")).collect();
    let pre_read = control(PRE_READ_OID, true, Some(sequence(&attributes)));
    let modify = connection
        .with_controls(vec![pre_read])
        .modify(
            &person_dn(3),
            vec![Mod::Replace("description", HashSet::from(["x"]))],
        )
        .expect("modify");
    assert_eq!(modify.rc, 11, "more than 256 pre-read attributes");
}

/// Reads everything the server sends until it closes; a hang guard, not a timing assertion.
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => received.extend_from_slice(&chunk[..count]),
            Err(error) => panic!("server did not close the connection: {error}"),
        }
    }
    received
}

#[test]
fn malformed_controls_sequence_closes_the_connection_with_a_notice() {
    let server = TestServer::start(|_| {});
    let malformed = [
        // A control that is not a SEQUENCE.
        tlv(0xa0, &tlv(0x04, b"1.2.3")),
        // A critical control whose length runs past the message: never silently dropped.
        vec![
            0xa0, 0x0a, 0x30, 0x08, 0x04, 0x03, b'1', b'.', b'2', 0x01, 0x01,
        ],
        // A fourth field in a control.
        tlv(
            0xa0,
            &sequence(&[
                tlv(0x04, b"1.2.3"),
                tlv(0x01, &[0xff]),
                tlv(0x04, b""),
                tlv(0x04, b""),
            ]),
        ),
    ];
    for controls in malformed {
        // LDAPMessage { 1, delRequest "x", controls }
        let message = sequence(&[tlv(0x02, &[1]), tlv(0x4a, b"x"), controls]);
        let mut stream = TcpStream::connect(server.ldap_address()).expect("connect");
        stream.write_all(&message).expect("write");
        let received = read_until_closed(&mut stream);
        let notice = b"1.3.6.1.4.1.1466.20036";
        assert!(
            received
                .windows(notice.len())
                .any(|window| window == notice),
            "a Notice of Disconnection for {message:02x?}"
        );
    }
}

#[test]
fn supported_controls_do_not_warn() {
    let log = crate::captured_logs();
    let server = TestServer::start_populated(PEOPLE, Vec::new(), |_| {});
    let mut connection = root(&server);
    let assertion = tlv(0x87, b"objectClass");
    let attributes = sequence(&[tlv(0x04, b"description")]);
    let modify = connection
        .with_controls(vec![
            control(ASSERTION_OID, true, Some(assertion)),
            control(PRE_READ_OID, false, Some(attributes.clone())),
            control(POST_READ_OID, false, Some(attributes)),
        ])
        .modify(
            &person_dn(4),
            vec![Mod::Replace("description", HashSet::from(["warned?"]))],
        )
        .expect("modify");
    assert_eq!(modify.rc, 0);
    let (entries, result) = people_search(
        &mut connection,
        vec![
            control(SORT_REQUEST_OID, false, Some(sort_value("sn", None))),
            control(PAGED_RESULTS_OID, false, Some(paged_value(3))),
            control(UNKNOWN_OID, false, None),
        ],
    );
    assert_eq!((result.rc, entries.len()), (0, 3));
    let text = String::from_utf8_lossy(&log.lock().expect("log lock")).into_owned();
    let this_modify = format!("MOD dn=\"{}\"", person_dn(4));
    assert!(
        text.contains(&this_modify),
        "the capture sees this server's log: {text}"
    );
    assert!(
        !text.contains("Unsupported control"),
        "ldap3_proto decoded a control: {text}"
    );
    assert!(!text.contains("ldap3_proto"), "ldap3_proto logged: {text}");
}

#[test]
fn ldapi_socket_takes_the_configured_mode() {
    use std::os::unix::fs::PermissionsExt;
    let mode_of = |server: &TestServer| {
        std::fs::metadata(server.ldapi_path())
            .expect("socket")
            .permissions()
            .mode()
            & 0o777
    };
    let default = TestServer::start(|_| {});
    assert_eq!(mode_of(&default), 0o777, "as slapd, whatever the umask");
    let restricted = TestServer::start(|settings| settings.ldapi_mode = 0o700);
    assert_eq!(mode_of(&restricted), 0o700);
    let mut connection = LdapConn::new(&restricted.ldapi_url()).expect("the owner connects");
    let root_dse = connection
        .search("", Scope::Base, "(objectClass=*)", vec!["1.1"])
        .expect("search over ldapi");
    assert_eq!(root_dse.1.rc, 0);
}

fn subschema(connection: &mut LdapConn, attributes: Vec<&str>) -> SearchEntry {
    let (entries, _) = connection
        .search(
            "cn=Subschema",
            Scope::Base,
            "(objectClass=subschema)",
            attributes,
        )
        .expect("search")
        .success()
        .expect("subschema search");
    SearchEntry::construct(entries.into_iter().next().expect("cn=Subschema"))
}

#[test]
fn root_dse_object_classes_are_defined_in_the_subschema() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    let (entries, _) = connection
        .search("", Scope::Base, "(objectClass=*)", vec!["objectClass"])
        .expect("search")
        .success()
        .expect("root DSE");
    let root = SearchEntry::construct(entries.into_iter().next().expect("root DSE"));
    let classes = &root.attrs["objectClass"];
    assert!(classes.len() >= 2, "{classes:?}");
    let definitions = subschema(&mut connection, vec!["objectClasses"]).attrs["objectClasses"]
        .iter()
        .map(|definition| definition.to_lowercase())
        .collect::<Vec<_>>();
    for class in classes {
        let quoted = format!("'{}'", class.to_lowercase());
        assert!(
            definitions
                .iter()
                .any(|definition| definition.contains(&quoted)),
            "root DSE class {class} is not in cn=Subschema"
        );
    }
}

#[test]
fn subschema_has_create_and_modify_timestamps() {
    let server = TestServer::start_with_database(|_| {});
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    let by_name = subschema(&mut connection, vec!["createTimestamp", "modifyTimestamp"]);
    let operational = subschema(&mut connection, vec!["+"]);
    for entry in [&by_name, &operational] {
        for name in ["createTimestamp", "modifyTimestamp"] {
            let values = &entry.attrs[name];
            assert_eq!(values.len(), 1, "{name}: {values:?}");
            let value = &values[0];
            assert!(
                value.len() == 15
                    && value.ends_with('Z')
                    && value[..14].bytes().all(|b| b.is_ascii_digit()),
                "{name} is GeneralizedTime: {value}"
            );
        }
    }
    assert!(
        !subschema(&mut connection, Vec::new())
            .attrs
            .contains_key("modifyTimestamp"),
        "operational: not returned without being asked for"
    );
    // What admin tools send to decide whether their cached schema is stale.
    let (newer, _) = connection
        .search(
            "cn=Subschema",
            Scope::Base,
            "(modifyTimestamp>=20000101000000Z)",
            vec!["1.1"],
        )
        .expect("search")
        .success()
        .expect("filter on modifyTimestamp");
    assert_eq!(newer.len(), 1);
}

/// A read entry control on an entry the subject may write but not read: as slapd's back-mdb,
/// a non-critical one is left out and the change made; a critical one fails the operation
/// before the change. Before, a non-critical pre-read failed the modify, and a post-read failed
/// it after the change was committed (a client told its increment failed sends it again).
#[test]
fn read_entry_controls_on_an_unreadable_entry_follow_their_criticality() {
    use lmdir_config::{AccessLevel, AccessTarget, Who};
    let rules = vec![
        common::own_password_rule(),
        common::grant(
            common::attributes(&["description"]),
            Who::Users,
            AccessLevel::Write,
        ),
        common::grant(AccessTarget::default(), Who::Users, AccessLevel::Search),
    ];
    let server = TestServer::start_populated(5, rules, |_| {});
    let target = person_dn(2);
    let mut writer = common::bind(&server, &person_dn(1), common::PERSON_PASSWORD);
    let control = |oid: &str, critical: bool| RawControl {
        ctype: oid.to_string(),
        crit: critical,
        // SEQUENCE OF AttributeDescription: "description".
        val: Some(b"\x30\x0d\x04\x0bdescription".to_vec()),
    };
    let mut modify = |control: RawControl, value: &str| {
        writer
            .with_controls(control)
            .modify(&target, vec![Mod::Replace("description", [value].into())])
            .expect("modify")
    };
    let description = |server: &TestServer| {
        let (entries, _) = root(server)
            .search(&target, Scope::Base, "(objectClass=*)", vec!["description"])
            .expect("search")
            .success()
            .expect("found");
        SearchEntry::construct(entries.into_iter().next().expect("entry")).attrs["description"]
            .clone()
    };
    for (oid, name) in [("1.3.6.1.1.13.1", "pre"), ("1.3.6.1.1.13.2", "post")] {
        let left_out = modify(control(oid, false), &format!("{name}, not critical"));
        assert_eq!(left_out.rc, 0, "{name}: {left_out:?}");
        assert!(left_out.ctrls.is_empty(), "{name}: {left_out:?}");
        assert_eq!(description(&server), [format!("{name}, not critical")]);
        let refused = modify(control(oid, true), &format!("{name}, critical"));
        assert_eq!(refused.rc, 50, "{name}: {refused:?}");
        assert_eq!(description(&server), [format!("{name}, not critical")]);
    }
}
