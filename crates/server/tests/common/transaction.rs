//! LDAP transactions (RFC 5805) as a client drives them: Start Transaction, the
//! specification control on each queued update, End Transaction.
#![allow(dead_code)]

use ldap3::controls::RawControl;
use ldap3::exop::Exop;
use ldap3::LdapConn;

pub const START: &str = "1.3.6.1.1.21.1";
pub const SPECIFICATION: &str = "1.3.6.1.1.21.2";
pub const END: &str = "1.3.6.1.1.21.3";

/// Start Transaction's answer: the response (its value is the identifier) and the result.
pub fn start_request(connection: &mut LdapConn) -> ldap3::result::ExopResult {
    connection
        .extended(Exop {
            name: Some(START.to_string()),
            val: None,
        })
        .expect("start sent")
}

pub fn start(connection: &mut LdapConn) -> Vec<u8> {
    let result = start_request(connection);
    assert_eq!(result.1.rc, 0, "{:?}", result.1);
    result.0.val.expect("a transaction identifier")
}

pub fn in_transaction(id: &[u8]) -> RawControl {
    RawControl {
        ctype: SPECIFICATION.to_string(),
        crit: true,
        val: Some(id.to_vec()),
    }
}

/// EndTxnRequest ::= SEQUENCE { commit BOOLEAN DEFAULT TRUE, identifier OCTET STRING }.
pub fn end(connection: &mut LdapConn, id: &[u8], commit: bool) -> (u32, Option<Vec<u8>>) {
    let mut value = Vec::new();
    if !commit {
        value.extend_from_slice(&[0x01, 0x01, 0x00]);
    }
    value.extend_from_slice(&[0x04, u8::try_from(id.len()).unwrap()]);
    value.extend_from_slice(id);
    let mut request = vec![0x30, u8::try_from(value.len()).unwrap()];
    request.extend(value);
    let result = connection
        .extended(Exop {
            name: Some(END.to_string()),
            val: Some(request),
        })
        .expect("end sent");
    (result.1.rc, result.0.val)
}
