//! userPassword values from other systems (issue 20): every `{CRYPT}` format libxcrypt makes
//! binds, a `{SCHEME}` lmdir does not know is stored as given on add and modify, and
//! `password_hash_cleartext = false` keeps cleartext as slapd does without ppolicy_hash_cleartext.

use crate::common;

use common::{root, TestServer};
use ldap3::exop::PasswordModify;
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use std::collections::HashSet;

const SUFFIX: &str = "dc=example,dc=com";

/// `mkpasswd -m METHOD secret` (Debian 12 libxcrypt) for every method it lists, and `$2y$`.
const CRYPT_OF_SECRET: &[&str] = &[
    "{CRYPT}$y$j9T$rn7WCwJvX9aYHQJeH2V8K1$AUivrvHRyalMx6mlVuqBem/Pep8qVzVfVfwNn7xAMgB",
    "{CRYPT}$gy$j9T$Z2Weunx7Vmq91NyxOiyKe1$98KoOcpbke3PrJ7RpRDxkU98iTats/Cry1IoTiWcmQ3",
    "{CRYPT}$7$CU..../....HpHaLMQfOeiI2iFh/1QVz0$/fwPJ0ls25MfcODj7v.SshMJpp5uj7PtCmlnuddN848",
    "{CRYPT}$2b$05$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG",
    "{CRYPT}$2a$05$iGsbBRl0RREklrpdMqxkae.P9IzVcconfziesFqARZER/s0BNzuTe",
    "{CRYPT}$2y$05$abcdefghijklmnopqrstuuOQiyCxlgf/oeuTqixKmWdcYUh4Hjl0a",
    "{CRYPT}$6$Mzm5RrP8dm4nLiOg$.vuzRqVW6hvhhvjeAw.unMo8iktaNR586X5hpB6HNFPgaxl.ZWcw5YYnhj3v3XT/VdfHG3bwhSUqoXHHB/uAq/",
    "{CRYPT}$5$Z4pSgTlHDsXpwoQr$QCylZUc4D4dF4WDxFeTyhcSmJRwYFfHCBd8XaOJidwB",
    "{CRYPT}$md5,rounds=37856$zLVwGR12$$qwqbfdZ.vLi.ZfMgF1hj/.",
    "{CRYPT}$1$ZmFsP47X$SGrXijJDN/p/FnIJ1i/ZA0",
    "{CRYPT}_J9..OMeV1yqJwoDu4Xw",
    "{CRYPT}g2CyTOcD393jE",
    "{CRYPT}$3$$878d8014606cda29677a44efa1353fc7",
];

/// Dovecot's and others' schemes, kept byte for byte: Dovecot's crypt(3) aliases (the first
/// two, of "secret") are verified as `{CRYPT}`, the others are not known.
const FOREIGN_SCHEMES: &[&str] = &[
    "{SHA512-CRYPT}$6$Mzm5RrP8dm4nLiOg$.vuzRqVW6hvhhvjeAw.unMo8iktaNR586X5hpB6HNFPgaxl.ZWcw5YYnhj3v3XT/VdfHG3bwhSUqoXHHB/uAq/",
    "{BLF-CRYPT}$2y$05$abcdefghijklmnopqrstuuOQiyCxlgf/oeuTqixKmWdcYUh4Hjl0a",
    "{PLAIN-MD5}5ebe2294ecd0e0f08eab7690d2a6ee69",
    "{SHA256.HEX}2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b",
];

fn set<'a>(values: &[&'a str]) -> HashSet<&'a str> {
    values.iter().copied().collect()
}

fn owned(values: &[&str]) -> HashSet<String> {
    values.iter().map(|value| value.to_string()).collect()
}

fn add_suffix(root: &mut LdapConn) {
    root.add(
        SUFFIX,
        vec![
            ("objectClass", set(&["dcObject", "organization"])),
            ("dc", set(&["example"])),
            ("o", set(&["Example"])),
        ],
    )
    .expect("add")
    .success()
    .expect("suffix");
}

fn add_person(root: &mut LdapConn, uid: &str, passwords: &[&str]) -> String {
    let dn = format!("uid={uid},{SUFFIX}");
    root.add(
        &dn,
        vec![
            ("objectClass", set(&["inetOrgPerson"])),
            ("uid", set(&[uid])),
            ("cn", set(&[uid])),
            ("sn", set(&[uid])),
            ("userPassword", set(passwords)),
        ],
    )
    .expect("add")
    .success()
    .expect("person");
    dn
}

fn stored_passwords(root: &mut LdapConn, dn: &str) -> HashSet<String> {
    let (entries, _) = root
        .search(dn, Scope::Base, "(objectClass=*)", vec!["userPassword"])
        .expect("search")
        .success()
        .expect("search");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("entry"));
    let text = entry.attrs.get("userPassword").cloned().unwrap_or_default();
    let binary = entry
        .bin_attrs
        .get("userPassword")
        .cloned()
        .unwrap_or_default();
    text.into_iter()
        .chain(
            binary
                .into_iter()
                .map(|value| String::from_utf8_lossy(&value).into_owned()),
        )
        .collect()
}

fn bind_code(server: &TestServer, dn: &str, password: &str) -> u32 {
    let mut connection = LdapConn::new(&server.ldap_url()).expect("connect");
    connection.simple_bind(dn, password).expect("bind").rc
}

#[test]
fn every_libxcrypt_format_binds_with_the_right_password_only() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    add_suffix(&mut root);
    for (index, stored) in CRYPT_OF_SECRET.iter().enumerate() {
        let dn = add_person(&mut root, &format!("crypt{index}"), &[stored]);
        assert_eq!(
            stored_passwords(&mut root, &dn),
            owned(&[stored]),
            "{stored}"
        );
        assert_eq!(bind_code(&server, &dn, "secret"), 0, "{stored}");
        assert_eq!(bind_code(&server, &dn, "Secret"), 49, "{stored}");
    }
}

#[test]
fn unknown_scheme_prefixes_are_stored_as_given_on_add_and_modify() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    add_suffix(&mut root);
    let dn = add_person(&mut root, "dovecot", &FOREIGN_SCHEMES[..2]);
    assert_eq!(
        stored_passwords(&mut root, &dn),
        owned(&FOREIGN_SCHEMES[..2])
    );
    root.modify(
        &dn,
        vec![Mod::Add("userPassword", set(&FOREIGN_SCHEMES[2..]))],
    )
    .expect("modify")
    .success()
    .expect("modify add");
    assert_eq!(stored_passwords(&mut root, &dn), owned(FOREIGN_SCHEMES));
    assert_eq!(bind_code(&server, &dn, "secret"), 0);
    assert_eq!(bind_code(&server, &dn, "Secret"), 49);
    // {PLAIN-MD5} is kept but not verified: with only it left, "secret" does not bind.
    root.modify(
        &dn,
        vec![Mod::Replace("userPassword", set(&FOREIGN_SCHEMES[2..3]))],
    )
    .expect("modify")
    .success()
    .expect("modify replace");
    assert_eq!(bind_code(&server, &dn, "secret"), 49);

    // Cleartext is still hashed by default, and a {CRYPT} value kept as given.
    let replaced = ["cleartext-pw", CRYPT_OF_SECRET[0]];
    root.modify(&dn, vec![Mod::Replace("userPassword", set(&replaced))])
        .expect("modify")
        .success()
        .expect("modify replace");
    let stored = stored_passwords(&mut root, &dn);
    assert!(stored.contains(CRYPT_OF_SECRET[0]), "{stored:?}");
    assert!(
        stored.iter().any(|value| value.starts_with("{SSHA}")),
        "{stored:?}"
    );
    assert!(!stored.contains("cleartext-pw"), "{stored:?}");
    assert_eq!(bind_code(&server, &dn, "cleartext-pw"), 0);
    assert_eq!(bind_code(&server, &dn, "secret"), 0);
}

#[test]
fn cleartext_is_kept_when_password_hash_cleartext_is_off() {
    let server = TestServer::start_with_database(|settings| {
        settings.password_hash_cleartext = false;
    });
    let mut root = root(&server);
    add_suffix(&mut root);
    let dn = add_person(&mut root, "digest", &["cram-md5-needs-me"]);
    assert_eq!(
        stored_passwords(&mut root, &dn),
        owned(&["cram-md5-needs-me"])
    );
    assert_eq!(bind_code(&server, &dn, "cram-md5-needs-me"), 0);
    root.modify(&dn, vec![Mod::Replace("userPassword", set(&["second-pw"]))])
        .expect("modify")
        .success()
        .expect("modify replace");
    assert_eq!(stored_passwords(&mut root, &dn), owned(&["second-pw"]));
    // Password Modify hashes its new password whatever the setting, as slapd does.
    root.extended(PasswordModify {
        user_id: Some(&dn),
        old_pass: None,
        new_pass: Some("third-pw"),
    })
    .expect("passwd")
    .success()
    .expect("passwd");
    let stored = stored_passwords(&mut root, &dn);
    assert!(
        stored.iter().all(|value| value.starts_with("{SSHA}")),
        "{stored:?}"
    );
    assert_eq!(bind_code(&server, &dn, "third-pw"), 0);
}

/// The loader keeps a byte-identical repeated value once (as slapadd); a client's add that
/// repeats a value stays attributeOrValueExists (20), as RFC 4511 says and slapd answers.
#[test]
fn a_repeated_value_over_ldap_stays_attribute_or_value_exists() {
    let server = TestServer::start_with_database(|_| {});
    let mut root = root(&server);
    add_suffix(&mut root);
    let ldif = format!(
        "dn: cn=jaj,{SUFFIX}\nobjectClass: person\ncn: jaj\nsn: jaj\n\
         userpassword:: amFq\nuserpassword:: amFq\n"
    );
    let file = server.directory.path().join("repeat.ldif");
    std::fs::write(&file, ldif).expect("write");
    let url = server.ldap_url();
    let arguments = [
        "-x",
        "-H",
        &url,
        "-D",
        common::ROOT_DN,
        "-w",
        common::ROOT_PASSWORD,
        "-f",
        file.to_str().expect("path"),
    ];
    let Some(output) = common::ldap_tool("ldapadd", &arguments) else {
        assert!(std::env::var_os("CI").is_none(), "ldapadd is missing");
        return;
    };
    assert_eq!(
        output.status.code(),
        Some(20),
        "{}",
        common::text(&output.stderr)
    );
}

/// A BER element with a definite length (short or two-byte long form).
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut element = vec![tag];
    match u16::try_from(content.len()).expect("under 64 KiB") {
        short @ 0..=127 => element.push(short as u8),
        long => {
            element.push(0x82);
            element.extend_from_slice(&long.to_be_bytes());
        }
    }
    element.extend_from_slice(content);
    element
}

/// One LDAPMessage: message ID `id` and the operation element `operation`.
fn message(id: u8, operation: Vec<u8>) -> Vec<u8> {
    tlv(0x30, &[tlv(0x02, &[id]), operation].concat())
}

/// A simple bind with `password` as raw octets (the ldap3 client takes only text).
fn octet_bind(id: u8, dn: &[u8], password: &[u8]) -> Vec<u8> {
    let fields = [tlv(0x02, &[3]), tlv(0x04, dn), tlv(0x80, password)].concat();
    message(id, tlv(0x60, &fields))
}

/// A Password Modify of the bound entry's own password, both passwords raw octets.
fn octet_password_modify(id: u8, old: &[u8], new: &[u8]) -> Vec<u8> {
    let value = tlv(0x30, &[tlv(0x81, old), tlv(0x82, new)].concat());
    let fields = [tlv(0x80, b"1.3.6.1.4.1.4203.1.11.1"), tlv(0x81, &value)].concat();
    message(id, tlv(0x77, &fields))
}

/// Sends `request` and reads the result code of the answer; None once the server has closed
/// the connection.
fn exchange(
    stream: &mut std::net::TcpStream,
    received: &mut bytes::BytesMut,
    request: &[u8],
) -> Option<u32> {
    use ldap3_proto::proto::LdapOp;
    use std::io::{Read, Write};
    use tokio_util::codec::Decoder;
    stream.write_all(request).ok()?;
    let mut codec = ldap3_proto::LdapCodec::default();
    loop {
        if let Some(answer) = codec.decode(received).expect("a well-formed answer") {
            return match answer.op {
                LdapOp::BindResponse(response) => Some(response.res.code as u32),
                LdapOp::ExtendedResponse(response) => Some(response.res.code as u32),
                LdapOp::DelResponse(result) => Some(result.code as u32),
                // A Notice of Disconnection: the connection ends.
                _ => None,
            };
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(count) => received.extend_from_slice(&chunk[..count]),
        }
    }
}

#[test]
fn passwords_are_octets_and_dns_text_on_one_connection() {
    // A Latin-1 "café" (63 61 66 e9), as clients in a Latin-1 locale send it and slapd takes
    // it: ldap3_proto's String refused the bind and the connection (a pooled one, with other
    // users' operations) was ended; a Password Modify answered protocolError.
    let own_password = common::rule_by(
        common::attributes(&["entry", "userPassword"]),
        &[
            (
                lmdir_config::Who::SelfEntry,
                lmdir_config::AccessLevel::Write,
            ),
            (lmdir_config::Who::Anyone, lmdir_config::AccessLevel::Auth),
        ],
    );
    let server = TestServer::start_populated(3, vec![own_password], |_| {});
    let dn = common::person_dn(0);
    let latin1: &[u8] = b"caf\xe9";
    root(&server)
        .modify(
            &dn,
            vec![Mod::Replace(&b"userPassword"[..], HashSet::from([latin1]))],
        )
        .expect("modify sent")
        .success()
        .expect("a Latin-1 password is stored (hashed)");
    let mut stream = std::net::TcpStream::connect(server.ldap_address()).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("hang guard");
    let mut received = bytes::BytesMut::new();
    let mut ask = |request: Vec<u8>| exchange(&mut stream, &mut received, &request);
    assert_eq!(
        ask(octet_bind(1, dn.as_bytes(), b"caf\xe8")),
        Some(49),
        "a wrong one"
    );
    assert_eq!(
        ask(octet_bind(2, dn.as_bytes(), latin1)),
        Some(0),
        "the right one"
    );
    let new: &[u8] = b"n\xe9w-pass\xff";
    assert_eq!(ask(octet_password_modify(3, latin1, new)), Some(0));
    assert_eq!(
        ask(octet_bind(4, dn.as_bytes(), latin1)),
        Some(49),
        "the old one"
    );
    assert_eq!(
        ask(octet_bind(5, dn.as_bytes(), new)),
        Some(0),
        "the new one"
    );
    // A name that is not UTF-8 is invalidDNSyntax, as slapd answers it; the connection stays.
    let latin1_name = b"cn=Jos\xe9,dc=example,dc=com";
    assert_eq!(
        ask(octet_bind(6, latin1_name, b"x")),
        Some(34),
        "a Latin-1 name"
    );
    assert_eq!(
        ask(octet_bind(7, dn.as_bytes(), new)),
        Some(0),
        "still connected"
    );
    // So is a delete naming one (every operation naming a DN: the differential shows them).
    assert_eq!(
        ask(message(8, tlv(0x4a, latin1_name))),
        Some(34),
        "a delete"
    );
    assert_eq!(
        ask(octet_bind(9, dn.as_bytes(), new)),
        Some(0),
        "still connected"
    );
}
