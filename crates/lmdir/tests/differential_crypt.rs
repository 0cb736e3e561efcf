//! Differential: `{CRYPT}` userPassword values in every format Debian's libxcrypt makes
//! (`mkpasswd -m help` lists the methods; each hash is made here by `mkpasswd` with a random
//! password) are stored on slapd and lmdir alike, and simple binds with the right and a wrong
//! password answer the same. slapd's `{CRYPT}` (libxcrypt's crypt()) is the reference. Also
//! octets that are not UTF-8 (a Latin-1 client's): passwords bind and change, DNs are refused
//! invalidDNSyntax by every operation, on both servers alike.

use crate::conformance;

use conformance::{tool, Pair, SUFFIX};
use std::hash::BuildHasher;
use std::io::Write;
use std::process::{Command, Stdio};

/// The methods `mkpasswd -m help` lists (the first word of each line after the heading).
fn mkpasswd_methods() -> Result<Vec<String>, String> {
    let output = Command::new("mkpasswd")
        .args(["-m", "help"])
        .output()
        .map_err(|error| format!("mkpasswd is not installed (apt-get install whois): {error}"))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let methods: Vec<String> = text
        .lines()
        .skip_while(|line| !line.starts_with("Available methods"))
        .skip(1)
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect();
    if methods.is_empty() {
        return Err(format!("mkpasswd -m help listed no methods: {text}"));
    }
    Ok(methods)
}

/// `mkpasswd -m method --stdin` of `password`.
fn mkpasswd(method: &str, password: &[u8]) -> String {
    let mut child = Command::new("mkpasswd")
        .args(["-m", method, "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("mkpasswd");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(password)
        .expect("write");
    let output = child.wait_with_output().expect("mkpasswd");
    assert!(output.status.success(), "mkpasswd -m {method}");
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// A random printable password of 6 to 21 characters, no spaces (mkpasswd reads one line).
fn random_password() -> String {
    const ALPHABET: &[u8] =
        b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!#%&*+-.:=?@^_~";
    let state = std::collections::hash_map::RandomState::new();
    let length = 6 + (state.hash_one(0u8) % 16) as usize;
    (0..length)
        .map(|index| ALPHABET[(state.hash_one(index + 1) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

fn whoami(port: u16, dn: &str, password: &str) -> i32 {
    tool(port, "ldapwhoami", &["-D", dn, "-w", password]).0
}

#[test]
fn crypt_binds_match_openldap_for_every_mkpasswd_method() {
    let methods = conformance::tools_available().and_then(|()| mkpasswd_methods());
    let methods = match methods {
        Ok(methods) => methods,
        Err(reason) if std::env::var_os("CI").is_some() => panic!("{reason}"),
        Err(reason) => {
            eprintln!("skipping the crypt differential: {reason}");
            return;
        }
    };
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: E\n\n"
    );
    let mut accounts = Vec::new();
    for method in &methods {
        let password = random_password();
        let hash = mkpasswd(method, password.as_bytes());
        let dn = format!("cn={method},{SUFFIX}");
        ldif += &format!(
            "dn: {dn}\nobjectClass: person\ncn: {method}\nsn: {method}\nuserPassword: {{CRYPT}}{hash}\n\n"
        );
        accounts.push((method.clone(), dn, password, hash));
    }
    // A value neither server can verify: both refuse, lmdir logs why.
    let broken = format!("cn=broken,{SUFFIX}");
    ldif += &format!(
        "dn: {broken}\nobjectClass: person\ncn: broken\nsn: b\nuserPassword: {{CRYPT}}$1$abc$def\n\n"
    );
    // Dovecot's alias of {CRYPT}: a documented difference (slapd does not know the scheme).
    let dovecot = format!("cn=dovecot,{SUFFIX}");
    let dovecot_password = random_password();
    ldif += &format!(
        "dn: {dovecot}\nobjectClass: person\ncn: dovecot\nsn: d\nuserPassword: {{SHA512-CRYPT}}{}\n\n",
        mkpasswd("sha512crypt", dovecot_password.as_bytes())
    );
    let pair = Pair::start(&ldif);
    let mut differences = Vec::new();
    for (method, dn, password, hash) in &accounts {
        let wrong = format!("{password}x");
        for (label, presented) in [("right", password.as_str()), ("wrong", wrong.as_str())] {
            let openldap = whoami(pair.openldap_port, dn, presented);
            let lmdir = whoami(pair.lmdir_port, dn, presented);
            if openldap != lmdir {
                differences.push(format!(
                    "{method} ({hash}), {label} password {presented:?}: OpenLDAP {openldap}, lmdir {lmdir}"
                ));
            }
        }
        // The reference itself takes the right password: the comparison means something.
        assert_eq!(
            whoami(pair.openldap_port, dn, password),
            0,
            "slapd, {method}"
        );
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    assert_eq!(whoami(pair.openldap_port, &dovecot, &dovecot_password), 49);
    assert_eq!(whoami(pair.lmdir_port, &dovecot, &dovecot_password), 0);
    assert_eq!(whoami(pair.lmdir_port, &dovecot, "wrong"), 49);
    assert_eq!(whoami(pair.openldap_port, &broken, "secret"), 49);
    assert_eq!(whoami(pair.lmdir_port, &broken, "secret"), 49);
    // The log is written in batches: wait (generously) for the bind's warning to reach it.
    let logged = |log: &str| {
        log.lines().any(|line| {
            line.contains("cannot be verified")
                && line.contains(&broken)
                && line.contains("CRYPT/md5crypt")
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut log = pair.lmdir_log();
    while !logged(&log) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        log = pair.lmdir_log();
    }
    assert!(logged(&log), "{log}");
    assert!(!log.contains("$1$abc$def"), "the hash stays out of the log");
}

/// `tool` with raw-octet arguments (a Latin-1 password is not UTF-8): its exit code.
fn tool_octets(port: u16, tool: &str, arguments: &[&[u8]]) -> i32 {
    use std::os::unix::ffi::OsStrExt;
    Command::new(tool)
        .args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(
            arguments
                .iter()
                .map(|argument| std::ffi::OsStr::from_bytes(argument)),
        )
        .output()
        .unwrap_or_else(|error| panic!("{tool}: {error}"))
        .status
        .code()
        .unwrap_or(-1)
}

#[test]
fn latin1_passwords_bind_and_change_as_on_openldap() {
    if !conformance::tools_ready("the Latin-1 password differential") {
        return;
    }
    // Octets a client in a Latin-1 locale sends for "café-Pa55": not UTF-8.
    let latin1: &[u8] = b"caf\xe9-Pa55";
    let dn = format!("cn=latin1,{SUFFIX}");
    let ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: E\n\n\
         dn: {dn}\nobjectClass: person\ncn: latin1\nsn: l\nuserPassword: {{CRYPT}}{}\n\n",
        mkpasswd("sha512crypt", latin1)
    );
    let pair = Pair::start(&ldif);
    let new: &[u8] = b"n\xe9w-\xd8\xff";
    for (server, port) in pair.ports() {
        let whoami = |password: &[u8]| {
            tool_octets(port, "ldapwhoami", &[b"-D", dn.as_bytes(), b"-w", password])
        };
        assert_eq!(whoami(latin1), 0, "{server}: the Latin-1 password");
        assert_eq!(whoami(b"caf\xe8-Pa55"), 49, "{server}: a wrong one");
        // The rootdn sets a new Latin-1 password (hashed by each server's default scheme).
        let root: [&[u8]; 7] = [
            b"-D",
            conformance::ROOT_DN.as_bytes(),
            b"-w",
            conformance::ROOT_PASSWORD.as_bytes(),
            b"-s",
            new,
            dn.as_bytes(),
        ];
        assert_eq!(
            tool_octets(port, "ldappasswd", &root),
            0,
            "{server}: ldappasswd"
        );
        assert_eq!(whoami(new), 0, "{server}: the new Latin-1 password");
        assert_eq!(whoami(latin1), 49, "{server}: the old one");
    }
    // A bind name that is not UTF-8 (a Latin-1 "cn=José"): the same answer from both.
    let latin1_name: &[u8] = b"cn=Jos\xe9,dc=example,dc=com";
    let answers: Vec<i32> = pair
        .ports()
        .iter()
        .map(|(_, port)| tool_octets(*port, "ldapwhoami", &[b"-D", latin1_name, b"-w", b"x"]))
        .collect();
    assert_eq!(answers, [34, 34], "OpenLDAP, lmdir: invalidDNSyntax");
}

/// `tool` as the rootdn with raw-octet arguments and `stdin`: its exit code.
fn root_tool_octets(port: u16, tool: &str, arguments: &[&[u8]], stdin: &[u8]) -> i32 {
    use std::os::unix::ffi::OsStrExt;
    let mut child = Command::new(tool)
        .args(["-x", "-H", &format!("ldap://127.0.0.1:{port}")])
        .args(["-D", conformance::ROOT_DN, "-w", conformance::ROOT_PASSWORD])
        .args(
            arguments
                .iter()
                .map(|argument| std::ffi::OsStr::from_bytes(argument)),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("{tool}: {error}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write");
    child.wait().expect(tool).code().unwrap_or(-1)
}

#[test]
fn latin1_names_are_answered_by_every_operation_as_on_openldap() {
    use base64::Engine;
    if !conformance::tools_ready("the Latin-1 DN differential") {
        return;
    }
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: E\n\n\
         dn: cn=a,{SUFFIX}\nobjectClass: person\ncn: a\nsn: a\n\n"
    );
    let pair = Pair::start(&ldif);
    // A Latin-1 "cn=José": lmdir ended the connection on each of these (protocolError).
    let dn: &[u8] = b"cn=Jos\xe9,dc=example,dc=com";
    let add = format!(
        "dn:: {}\nchangetype: add\nobjectClass: person\ncn: x\nsn: y\n",
        encode(dn)
    );
    let modify = format!(
        "dn:: {}\nchangetype: modify\nreplace: sn\nsn: z\n",
        encode(dn)
    );
    let modrdn = format!(
        "dn: cn=a,{SUFFIX}\nchangetype: modrdn\nnewrdn:: {}\ndeleteoldrdn: 1\n",
        encode(b"cn=Jos\xe9")
    );
    let mut answers = Vec::new();
    for (server, port) in pair.ports() {
        let codes = [
            root_tool_octets(port, "ldapmodify", &[], add.as_bytes()),
            root_tool_octets(port, "ldapmodify", &[], modify.as_bytes()),
            root_tool_octets(port, "ldapmodify", &[], modrdn.as_bytes()),
            root_tool_octets(port, "ldapdelete", &[dn], b""),
            root_tool_octets(port, "ldapcompare", &[dn, b"cn:x"], b""),
            root_tool_octets(port, "ldapsearch", &[b"-b", dn, b"(cn=*)"], b""),
            // Not DNs: a compared attribute (undefinedAttributeType), a requested one (ignored).
            root_tool_octets(port, "ldapcompare", &[SUFFIX.as_bytes(), b"caf\xe9:x"], b""),
            root_tool_octets(
                port,
                "ldapsearch",
                &[b"-b", SUFFIX.as_bytes(), b"(objectClass=*)", b"caf\xe9"],
                b"",
            ),
        ];
        answers.push((server, codes));
    }
    for (server, codes) in &answers {
        assert_eq!(
            codes,
            &[34, 34, 34, 34, 34, 34, 17, 0],
            "{server}: add, modify, modrdn, delete, compare, search; compare and search attributes"
        );
    }
}

/// Both servers holding only the suffix entry, when slapd and ldap-utils are here for `what`.
fn suffix_only_pair(what: &str) -> Option<Pair> {
    if !conformance::tools_ready(what) {
        return None;
    }
    Some(Pair::start(&format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: E\n\n"
    )))
}

/// A BER element with a short definite length (contents under 128 bytes).
fn short_tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    assert!(content.len() < 128, "short form only");
    [&[tag, content.len() as u8][..], content].concat()
}

/// The result code of a subtree search of the suffix with the BER filter `filter` (raw: no
/// ldap-utils client sends a filter naming `café`), asking for no attributes.
fn raw_search_code(port: u16, filter: &[u8]) -> u8 {
    use std::io::{Read, Write};
    let fields = [
        short_tlv(0x04, SUFFIX.as_bytes()),
        short_tlv(0x0a, &[2]),
        short_tlv(0x0a, &[0]),
        short_tlv(0x02, &[0]),
        short_tlv(0x02, &[0]),
        short_tlv(0x01, &[0]),
        filter.to_vec(),
        short_tlv(0x30, &short_tlv(0x04, b"1.1")),
    ]
    .concat();
    let request = short_tlv(
        0x30,
        &[short_tlv(0x02, &[1]), short_tlv(0x63, &fields)].concat(),
    );
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("hang guard");
    stream.write_all(&request).expect("send");
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // SearchResultDone of message 1 (no entries match): 30 LL 02 01 01 65 LL 0a 01 CODE.
        if let Some(at) = received.windows(3).position(|w| w == [0x02, 0x01, 0x01]) {
            let rest = &received[at + 3..];
            if rest.len() >= 5 && rest[0] == 0x65 && rest[2] == 0x0a {
                return rest[4];
            }
        }
        let read = stream.read(&mut chunk).expect("an answer");
        assert!(read > 0, "the connection was closed without an answer");
        received.extend_from_slice(&chunk[..read]);
    }
}

#[test]
fn filters_naming_inappropriate_attributes_match_nothing_as_on_openldap() {
    let Some(pair) = suffix_only_pair("the inappropriate filter names differential") else {
        return;
    };
    let equality = |name: &[u8]| {
        short_tlv(
            0xa3,
            &[short_tlv(0x04, name), short_tlv(0x04, b"x")].concat(),
        )
    };
    // A Latin-1 name, a UTF-8 one, a space, `_` (which both accept), and under NOT: slapd
    // answers each success with no entries (the item Undefined); lmdir answered protocolError.
    let filters = [
        equality(b"caf\xe9"),
        equality("café".as_bytes()),
        equality(b"c n"),
        equality(b"a_b"),
        short_tlv(0xa2, &equality(b"caf\xe9")),
        short_tlv(0x87, b"caf\xe9"),
    ];
    for (server, port) in pair.ports() {
        let codes: Vec<u8> = filters
            .iter()
            .map(|filter| raw_search_code(port, filter))
            .collect();
        assert_eq!(codes, [0; 6], "{server}");
    }
}

/// The header of the BER element at the start of `bytes`: (header length, content length),
/// None until enough bytes are there.
fn ber_header(bytes: &[u8]) -> Option<(usize, usize)> {
    let first = *bytes.get(1)?;
    if first < 0x80 {
        return Some((2, usize::from(first)));
    }
    let count = usize::from(first & 0x7f);
    let length = bytes.get(2..2 + count)?;
    Some((
        2 + count,
        length
            .iter()
            .fold(0, |value, byte| value << 8 | usize::from(*byte)),
    ))
}

/// Sends each request (message IDs 2..) after a bind as the rootdn (message 1), on one
/// connection, and returns each answer's result code; 255 once the server has closed it.
fn raw_result_codes(port: u16, requests: &[Vec<u8>]) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("hang guard");
    let bind = [
        short_tlv(0x02, &[3]),
        short_tlv(0x04, conformance::ROOT_DN.as_bytes()),
        short_tlv(0x80, conformance::ROOT_PASSWORD.as_bytes()),
    ]
    .concat();
    let mut received = Vec::new();
    let mut next_answer = |stream: &mut std::net::TcpStream| -> Option<u8> {
        loop {
            if let Some((header, length)) = ber_header(&received) {
                if received.len() >= header + length {
                    let message: Vec<u8> = received.drain(..header + length).collect();
                    // 30 .. { 02 01 id } { TAG .. { 0a 01 CODE } ... }
                    let id_end = header + 3;
                    let (op_header, _) = ber_header(&message[id_end..])?;
                    return message.get(id_end + op_header + 2).copied();
                }
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(read) => received.extend_from_slice(&chunk[..read]),
            }
        }
    };
    let message = |id: u8, operation: &[u8]| {
        short_tlv(0x30, &[short_tlv(0x02, &[id]), operation.to_vec()].concat())
    };
    stream
        .write_all(&message(1, &short_tlv(0x60, &bind)))
        .expect("bind");
    assert_eq!(next_answer(&mut stream), Some(0), "the rootdn's bind");
    let mut codes = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        let id = u8::try_from(index + 2).expect("a few requests");
        let _ = stream.write_all(&message(id, request));
        codes.push(next_answer(&mut stream).unwrap_or(255));
    }
    codes
}

#[test]
fn attribute_types_and_sasl_names_that_are_not_utf8_answer_as_on_openldap() {
    let Some(pair) = suffix_only_pair("the raw non-UTF-8 requests differential") else {
        return;
    };
    let attribute = |kind: &[u8], value: &[u8]| {
        short_tlv(
            0x30,
            &[
                short_tlv(0x04, kind),
                short_tlv(0x31, &short_tlv(0x04, value)),
            ]
            .concat(),
        )
    };
    let entry = format!("cn=zz,{SUFFIX}");
    let attributes = [
        attribute(b"objectClass", b"person"),
        attribute(b"cn", b"zz"),
        attribute(b"sn", b"zz"),
        attribute(b"caf\xe9", b"v"),
    ]
    .concat();
    // Add and modify naming a Latin-1 attribute type: undefinedAttributeType (17); a SASL
    // bind named by a Latin-1 DN: invalidDNSyntax (34). lmdir ended the connection on each.
    let add = short_tlv(
        0x68,
        &[
            short_tlv(0x04, entry.as_bytes()),
            short_tlv(0x30, &attributes),
        ]
        .concat(),
    );
    let change = short_tlv(
        0x30,
        &[short_tlv(0x0a, &[2]), attribute(b"caf\xe9", b"v")].concat(),
    );
    let modify = short_tlv(
        0x66,
        &[short_tlv(0x04, SUFFIX.as_bytes()), short_tlv(0x30, &change)].concat(),
    );
    let sasl = short_tlv(
        0x60,
        &[
            short_tlv(0x02, &[3]),
            short_tlv(0x04, b"cn=Jos\xe9"),
            short_tlv(0xa3, &short_tlv(0x04, b"EXTERNAL")),
        ]
        .concat(),
    );
    for (server, port) in pair.ports() {
        let codes = raw_result_codes(port, &[add.clone(), modify.clone(), sasl.clone()]);
        assert_eq!(codes, [17, 17, 34], "{server}: add, modify, SASL bind");
    }
}
