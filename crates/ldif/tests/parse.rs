//! Parsing: every accepted form and every error with its line number.

use std::io::Write;

use lmdir_ldif::{
    parse_record, parse_record_view, BodyView, ChangeOperation, Control, LdifReader, LdifRecord,
    ModOp, Modification, ParseOptions, RecordBody,
};

fn parse(text: &str) -> Result<LdifRecord, lmdir_ldif::LdifError> {
    parse_record(text.as_bytes(), 1, &ParseOptions::default())
}

fn content(record: &LdifRecord) -> Vec<(String, Vec<u8>)> {
    match &record.body {
        RecordBody::Content(attributes) => attributes.clone(),
        RecordBody::Change(change) => panic!("expected content, got {change:?}"),
    }
}

fn change(record: &LdifRecord) -> ChangeOperation {
    match &record.body {
        RecordBody::Change(change) => change.operation.clone(),
        RecordBody::Content(_) => panic!("expected a change record"),
    }
}

fn pair(description: &str, value: &[u8]) -> (String, Vec<u8>) {
    (description.to_string(), value.to_vec())
}

#[test]
fn plain_entry_with_options_and_utf8() {
    let record = parse("dn: cn=A,dc=x\ncn: A\ncn;lang-de: Ä\nobjectClass: person\n").unwrap();
    assert_eq!(record.line, 1);
    assert_eq!(record.dn, "cn=A,dc=x");
    assert_eq!(
        content(&record),
        vec![
            pair("cn", b"A"),
            pair("cn;lang-de", "Ä".as_bytes()),
            pair("objectClass", b"person")
        ]
    );
}

#[test]
fn version_comments_folding_and_crlf() {
    let text =
        "version: 1\r\n# a comment\r\n  folded into the comment\r\ndn: cn=Fol\r\n ded,dc=x\r\n\
                description: one \r\n two\r\n# inner comment\r\nsn:   leading fill\r\n";
    let record = parse(text).unwrap();
    assert_eq!(record.line, 4);
    assert_eq!(record.dn, "cn=Folded,dc=x");
    assert_eq!(
        content(&record),
        vec![pair("description", b"one two"), pair("sn", b"leading fill")]
    );
}

#[test]
fn base64_values_and_dn() {
    // "cn=Zoë,dc=x" and a value with a leading space and a NUL.
    let text = "dn:: Y249Wm/DqyxkYz14\nsn:: IGxlYWQAZXI=\nempty:\nempty2::\n";
    let record = parse(text).unwrap();
    assert_eq!(record.dn, "cn=Zoë,dc=x");
    assert_eq!(
        content(&record),
        vec![
            pair("sn", b" lead\0er"),
            pair("empty", b""),
            pair("empty2", b"")
        ]
    );
}

#[test]
fn view_borrows_plain_values() {
    let bytes = b"dn: cn=A\ncn: A\nsn:: Qg==\n";
    let view = parse_record_view(bytes, 7, &ParseOptions::default()).unwrap();
    assert_eq!(view.line, 7);
    assert!(matches!(view.dn, std::borrow::Cow::Borrowed(_)));
    let BodyView::Content(attributes) = &view.body else {
        panic!("content expected")
    };
    assert!(matches!(attributes[0].1, std::borrow::Cow::Borrowed(b"A")));
    assert!(matches!(attributes[1].1, std::borrow::Cow::Owned(_)));
    assert_eq!(attributes[1].1.as_ref(), b"B");
}

fn with_file_urls() -> ParseOptions {
    ParseOptions {
        allow_file_urls: true,
        ..ParseOptions::default()
    }
}

fn url_error(path: &str, options: &ParseOptions) -> lmdir_ldif::LdifError {
    let text = format!("dn: cn=A\ncn: A\njpegPhoto:< file://{path}\n");
    parse_record(text.as_bytes(), 1, options).expect_err("expected an error")
}

#[test]
fn file_url_values() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"\x89PNG binary").unwrap();
    let path = file.path().to_str().unwrap().to_string();
    let text = format!("dn: cn=A\njpegPhoto:< file://{path}\n");
    let record = parse_record(text.as_bytes(), 1, &with_file_urls()).unwrap();
    assert_eq!(content(&record), vec![pair("jpegPhoto", b"\x89PNG binary")]);

    let options = with_file_urls();
    let error = parse_record(b"dn: cn=A\nphoto:< http://example.com/x\n", 1, &options);
    let error = error.unwrap_err();
    assert_eq!(error.line, 2);
    assert!(error.message.contains("only file:///path"), "{error}");
    let error = url_error("/nonexistent/lmdir/file", &options);
    assert_eq!(error.line, 3);
    assert!(error.message.contains("cannot open"), "{error}");
}

#[test]
fn file_urls_are_refused_unless_allowed() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"secret").unwrap();
    let path = file.path().to_str().unwrap();
    let error = url_error(path, &ParseOptions::default());
    assert_eq!(error.line, 3);
    assert!(error.message.contains("not allowed"), "{error}");
    assert!(!error.message.contains("secret"), "{error}");

    let options = ParseOptions {
        file_urls_refused_because: "--no-file-urls was given",
        ..ParseOptions::default()
    };
    let error = url_error(path, &options);
    assert!(
        error.message.ends_with(": --no-file-urls was given"),
        "{error}"
    );
}

#[test]
fn file_urls_read_regular_files_only() {
    let directory = tempfile::tempdir().unwrap();
    let error = url_error(directory.path().to_str().unwrap(), &with_file_urls());
    assert_eq!(error.line, 3);
    assert!(error.message.contains("is a directory"), "{error}");
    let error = url_error("/dev/null", &with_file_urls());
    assert!(error.message.contains("is a device"), "{error}");
    let error = url_error("/dev/zero", &with_file_urls());
    assert!(error.message.contains("is a device"), "{error}");
    // A FIFO with no writer: reading it would wait forever.
    let fifo = directory.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let error = url_error(fifo.to_str().unwrap(), &with_file_urls());
    assert!(error.message.contains("is a FIFO"), "{error}");
    // A symbolic link to a regular file is read as the file.
    let target = directory.path().join("target");
    std::fs::write(&target, b"through the link").unwrap();
    let link = directory.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let text = format!("dn: cn=A\ncn:< file://{}\n", link.display());
    let record = parse_record(text.as_bytes(), 1, &with_file_urls()).unwrap();
    assert_eq!(content(&record)[0].1, b"through the link");
}

#[test]
fn file_urls_of_a_record_are_held_to_one_total() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("six");
    std::fs::write(&path, b"123456").unwrap();
    let options = ParseOptions {
        url_record_bytes_max: 10,
        ..with_file_urls()
    };
    let url = format!("file://{}", path.display());
    let one = format!("dn: cn=A\ncn: A\nphoto:< {url}\n");
    assert!(parse_record(one.as_bytes(), 1, &options).is_ok());
    let two = format!("dn: cn=A\ncn: A\nphoto:< {url}\nphoto:< {url}\n");
    let error = parse_record(two.as_bytes(), 7, &options).unwrap_err();
    assert_eq!(error.line, 10);
    assert_eq!(error.dn.as_deref(), Some("cn=A"));
    assert!(error.message.contains("limit of 10 bytes"), "{error}");
    // The total is per record: the next record starts again from zero.
    assert!(parse_record(one.as_bytes(), 12, &options).is_ok());
}

#[test]
fn change_add_and_delete() {
    let record = parse("dn: cn=A,dc=x\nchangetype: add\ncn: A\nobjectClass: top\n").unwrap();
    assert_eq!(
        change(&record),
        ChangeOperation::Add(vec![pair("cn", b"A"), pair("objectClass", b"top")])
    );
    let record = parse("dn: cn=A,dc=x\nchangetype: delete\n").unwrap();
    assert_eq!(change(&record), ChangeOperation::Delete);
}

#[test]
fn change_modify_all_operations() {
    let text = "dn: cn=A,dc=x\nchangetype: modify\nadd: mail\nmail: a@x\nmail: b@x\n-\n\
                delete: description\n-\nreplace: sn;lang-en\nsn;lang-en: B\n-\n\
                increment: uidNumber\nuidNumber: 5\n";
    let record = parse(text).unwrap();
    assert_eq!(
        change(&record),
        ChangeOperation::Modify(vec![
            Modification {
                op: ModOp::Add,
                description: "mail".into(),
                values: vec![b"a@x".to_vec(), b"b@x".to_vec()]
            },
            Modification {
                op: ModOp::Delete,
                description: "description".into(),
                values: vec![]
            },
            Modification {
                op: ModOp::Replace,
                description: "sn;lang-en".into(),
                values: vec![b"B".to_vec()]
            },
            Modification {
                op: ModOp::Increment,
                description: "uidNumber".into(),
                values: vec![b"5".to_vec()]
            },
        ])
    );
}

#[test]
fn change_modrdn_and_moddn_with_controls() {
    let text =
        "dn: cn=A,dc=x\ncontrol: 1.2.840.113556.1.4.805 true\ncontrol: 1.3.6.1 false:: AAE=\n\
                control: 1.3.6.2: plain\nchangetype: modrdn\nnewrdn: cn=B\ndeleteoldrdn: 1\n";
    let record = parse(text).unwrap();
    let RecordBody::Change(change_record) = &record.body else {
        panic!("change expected")
    };
    assert_eq!(
        change_record.controls,
        vec![
            Control {
                oid: "1.2.840.113556.1.4.805".into(),
                criticality: true,
                value: None
            },
            Control {
                oid: "1.3.6.1".into(),
                criticality: false,
                value: Some(vec![0, 1])
            },
            Control {
                oid: "1.3.6.2".into(),
                criticality: false,
                value: Some(b"plain".to_vec())
            },
        ]
    );
    assert_eq!(
        change_record.operation,
        ChangeOperation::ModDn {
            new_rdn: "cn=B".into(),
            delete_old_rdn: true,
            new_superior: None
        }
    );
    let record = parse(
        "dn: cn=A,dc=x\nchangetype: moddn\nnewrdn:: Y249w4k=\ndeleteoldrdn: 0\nnewsuperior: dc=y\n",
    )
    .unwrap();
    assert_eq!(
        change(&record),
        ChangeOperation::ModDn {
            new_rdn: "cn=É".into(),
            delete_old_rdn: false,
            new_superior: Some("dc=y".into())
        }
    );
}

#[test]
fn every_error_names_its_line() {
    let cases: &[(&str, u64, &str)] = &[
        ("cn: A\n", 1, "must start with \"dn:\""),
        ("# only a comment\n", 1, "no \"dn:\" line"),
        ("version: 2\ndn: cn=A\ncn: A\n", 1, "unsupported LDIF version"),
        ("dn: cn=A\n", 1, "no attributes"),
        (" dn: cn=A\ncn: A\n", 1, "no line to continue"),
        ("dn: cn=A\ncn A\n", 2, "no ':'"),
        ("dn: cn=A\nc n: A\n", 2, "not a valid attribute description"),
        ("dn: cn=A\ncn;: A\n", 2, "not a valid attribute description"),
        ("dn: cn=A\n-cn: A\n", 2, "not a valid attribute description"),
        ("dn: cn=A\ncn:: !!!!\n", 2, "invalid base64"),
        ("dn:: //79\ncn: A\n", 1, "not valid UTF-8"),
        ("dn: cn=A\ncn: A\ndn: cn=B\n", 3, "second \"dn:\""),
        ("dn: cn=A\ncn: A\n\ncn: B\n", 4, "blank line ended the record"),
        ("dn: cn=A\ncontrol: 1.2.3\ncn: A\n", 3, "followed by \"changetype:\""),
        ("dn: cn=A\ncontrol: 1.2.3\n", 2, "followed by \"changetype:\""),
        ("dn: cn=A\ncontrol: abc\nchangetype: delete\n", 2, "not a numeric OID"),
        ("dn: cn=A\ncontrol: 1.2 maybe\nchangetype: delete\n", 2, "expected true, false"),
        ("dn: cn=A\nchangetype: rename\n", 2, "unknown changetype"),
        ("dn: cn=A\nchangetype: add\n", 2, "at least one attribute"),
        ("dn: cn=A\nchangetype: delete\ncn: A\n", 3, "no lines after"),
        ("dn: cn=A\nchangetype: modify\nput: cn\n", 3, "expected add:, delete:"),
        ("dn: cn=A\nchangetype: modify\nadd: cn\nsn: B\n-\n", 4, "inside the \"add: cn\" block"),
        ("dn: cn=A\nchangetype: modify\nadd:: Y24=\n", 3, "must name an attribute"),
        ("dn: cn=A\nchangetype: modify\nincrement: n\nn: 1\nn: 2\n-\n", 3, "exactly one value"),
        ("dn: cn=A\nchangetype: modrdn\n", 2, "missing \"newrdn:\""),
        ("dn: cn=A\nchangetype: modrdn\nnewrdn: cn=B\n", 3, "missing \"deleteoldrdn:\""),
        ("dn: cn=A\nchangetype: modrdn\nnewrdn:\ndeleteoldrdn: 1\n", 3, "newrdn is empty"),
        ("dn: cn=A\nchangetype: modrdn\nnewrdn: cn=B\ndeleteoldrdn: yes\n", 4, "0 or 1"),
        ("dn: cn=A\nchangetype: modrdn\nnewrdn: cn=B\nsn: x\n", 4, "expected \"deleteoldrdn:\""),
        (
            "dn: cn=A\nchangetype: modrdn\nnewrdn: cn=B\ndeleteoldrdn: 1\nfoo: bar\n",
            5,
            "expected \"newsuperior:\"",
        ),
        (
            "dn: cn=A\nchangetype: modrdn\nnewrdn: cn=B\ndeleteoldrdn: 1\nnewsuperior: dc=x\nx: y\n",
            6,
            "unexpected line after",
        ),
    ];
    for (text, line, message) in cases {
        let error = parse(text).expect_err(text);
        assert_eq!(error.line, *line, "{text:?}: {error}");
        assert!(
            error.message.contains(message),
            "{text:?}: {error} should contain {message:?}"
        );
    }
}

#[test]
fn error_display_names_line_and_dn() {
    let error = parse("dn: cn=A,dc=x\ncn: A\nbad line\n").unwrap_err();
    assert_eq!(error.dn.as_deref(), Some("cn=A,dc=x"));
    assert!(error
        .to_string()
        .starts_with("line 3 (dn: cn=A,dc=x): expected \"attribute: value\""));
    let error = parse_record(b"\n\nx\n", 10, &ParseOptions::default()).unwrap_err();
    assert_eq!(error.dn, None);
    assert!(error.to_string().starts_with("line 12: "), "{error}");
}

#[test]
fn error_display_escapes_control_characters() {
    let error = lmdir_ldif::LdifError::new(4, Some("cn=\x1b[2Jx".into()), "bad \"a\rb\x07\u{9b}\"");
    let shown = error.to_string();
    assert_eq!(
        shown,
        "line 4 (dn: cn=\\x1b[2Jx): bad \"a\\x0db\\x07\\x9b\""
    );
    assert!(!shown.chars().any(char::is_control), "{shown:?}");
    // Text without control characters is shown as it is (UTF-8 and backslashes included).
    assert_eq!(lmdir_ldif::escape_control("cn=Zoë\\,x"), "cn=Zoë\\,x");
}

#[test]
fn limits_are_errors() {
    let options = ParseOptions {
        values_max: 2,
        ..ParseOptions::default()
    };
    let error = parse_record(b"dn: cn=A\na: 1\nb: 2\nc: 3\n", 1, &options).unwrap_err();
    assert_eq!(error.line, 4);
    assert!(error.message.contains("limit of 2 values"));

    let options = ParseOptions {
        line_bytes_max: 10,
        ..ParseOptions::default()
    };
    let error = parse_record(b"dn: cn=A\ncn: 0123456789\n", 1, &options).unwrap_err();
    assert_eq!(error.line, 2);
    assert!(error.message.contains("limit of 10 bytes"));
    let error = parse_record(b"dn: cn=A\ncn: 01\n 23456789\n", 1, &options).unwrap_err();
    assert_eq!(error.line, 2);
    assert!(error.message.contains("folded line"));

    let options = ParseOptions {
        record_bytes_max: 8,
        ..ParseOptions::default()
    };
    let error = parse_record(b"dn: cn=A\ncn: A\n", 5, &options).unwrap_err();
    assert_eq!(error.line, 5);
    assert!(error.message.contains("limit of 8 bytes"));
}

#[test]
fn reader_streams_records_and_recovers_after_a_bad_one() {
    let text = "version: 1\n\n# header comment\n#\n\ndn: cn=A\ncn: A\n\n\n\
                dn: cn=B\nbroken\n\ndn: cn=C\r\ncn: C\r\n\r\ndn: cn=D\ncn: D";
    let results: Vec<_> = LdifReader::new(text.as_bytes()).collect();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0].as_ref().unwrap().dn, "cn=A");
    assert_eq!(results[0].as_ref().unwrap().line, 6);
    assert_eq!(results[1].as_ref().unwrap_err().line, 11);
    assert_eq!(results[2].as_ref().unwrap().dn, "cn=C");
    assert_eq!(results[2].as_ref().unwrap().line, 13);
    assert_eq!(results[3].as_ref().unwrap().dn, "cn=D");
    assert_eq!(
        content(results[3].as_ref().unwrap()),
        vec![pair("cn", b"D")]
    );
}

#[test]
fn reader_stops_on_oversize_record() {
    let options = ParseOptions {
        record_bytes_max: 20,
        ..ParseOptions::default()
    };
    let text =
        "dn: cn=A\ncn: A\n\ndn: cn=B\ndescription: far too long for the limit\n\ndn: cn=C\ncn: C\n";
    let results: Vec<_> = LdifReader::with_options(text.as_bytes(), options).collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    let error = results[1].as_ref().unwrap_err();
    assert_eq!(error.line, 4);
    assert!(error.message.contains("limit of 20 bytes"));
}

#[test]
fn reader_reports_bad_version_block() {
    let results: Vec<_> = LdifReader::new(&b"version: 3\n\ndn: cn=A\ncn: A\n"[..]).collect();
    assert_eq!(results.len(), 2);
    let error = results[0].as_ref().unwrap_err();
    assert_eq!(error.line, 1);
    assert!(error.message.contains("unsupported LDIF version"));
    assert!(results[1].is_ok());
}

#[test]
fn stray_continuation_after_a_blank_line_is_reported_not_skipped() {
    let text = "dn: cn=A\ncn: A\n\n continued\n\n# comment\n folded comment\n\ndn: cn=B\ncn: B\n";
    let results: Vec<_> = LdifReader::new(text.as_bytes()).collect();
    assert_eq!(results.len(), 3);
    let error = results[1].as_ref().unwrap_err();
    assert_eq!(error.line, 4);
    assert!(error.message.contains("no line to continue"), "{error}");
    assert_eq!(results[2].as_ref().unwrap().dn, "cn=B");
    let split = lmdir_ldif::split_records(text.as_bytes(), 1, true);
    assert_eq!(split.records.len(), 3);
}
