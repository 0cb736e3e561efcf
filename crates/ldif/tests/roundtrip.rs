//! Writer → parser round trips (proptest), the splitter and chunked source against the streaming
//! reader, and "never panics" properties for arbitrary input.

use lmdir_ldif::{
    needs_base64, parse_record, split_records, ChangeOperation, ChangeRecord, ChunkedRecordSource,
    Control, LdifReader, LdifRecord, LdifWriter, ModOp, Modification, ParseOptions, RecordBody,
    FOLD_COLUMN,
};
use proptest::prelude::*;

fn description() -> impl Strategy<Value = String> {
    "[a-zA-Z][a-zA-Z0-9-]{0,12}(;[a-zA-Z0-9-]{1,8}){0,2}".prop_filter("reserved words", |name| {
        let lowered = name.to_ascii_lowercase();
        lowered != "dn" && lowered != "changetype" && lowered != "control"
    })
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        "[ -~]{0,200}".prop_map(String::into_bytes),
        ".{0,90}".prop_map(String::into_bytes),
        " *[:<]?[a-z ]{0,100} *".prop_map(String::into_bytes),
    ]
}

fn dn() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{1,8}=[ -~]{0,150}", ".{0,120}"]
}

fn content_record() -> impl Strategy<Value = LdifRecord> {
    (dn(), prop::collection::vec((description(), value()), 1..12)).prop_map(|(dn, attributes)| {
        LdifRecord {
            line: 0,
            dn,
            body: RecordBody::Content(attributes),
        }
    })
}

fn modification() -> impl Strategy<Value = Modification> {
    (
        prop_oneof![
            Just(ModOp::Add),
            Just(ModOp::Delete),
            Just(ModOp::Replace),
            Just(ModOp::Increment)
        ],
        description(),
        prop::collection::vec(value(), 0..4),
    )
        .prop_map(|(operation, attribute, mut values)| {
            if operation == ModOp::Increment {
                values.truncate(1);
                if values.is_empty() {
                    values.push(b"1".to_vec());
                }
            }
            Modification {
                op: operation,
                description: attribute,
                values,
            }
        })
}

fn change_record() -> impl Strategy<Value = LdifRecord> {
    let control = (
        "[1-9][0-9]{0,3}(\\.[0-9]{1,4}){0,5}",
        any::<bool>(),
        prop::option::of(value()),
    )
        .prop_map(|(oid, criticality, value)| Control {
            oid,
            criticality,
            value,
        });
    let operation = prop_oneof![
        prop::collection::vec((description(), value()), 1..6).prop_map(ChangeOperation::Add),
        Just(ChangeOperation::Delete),
        prop::collection::vec(modification(), 0..5).prop_map(ChangeOperation::Modify),
        (
            dn().prop_filter("newrdn is not empty", |rdn| !rdn.is_empty()),
            any::<bool>(),
            prop::option::of(dn())
        )
            .prop_map(|(new_rdn, delete_old_rdn, new_superior)| {
                ChangeOperation::ModDn {
                    new_rdn,
                    delete_old_rdn,
                    new_superior,
                }
            }),
    ];
    (dn(), prop::collection::vec(control, 0..3), operation).prop_map(|(dn, controls, operation)| {
        LdifRecord {
            line: 0,
            dn,
            body: RecordBody::Change(ChangeRecord {
                controls,
                operation,
            }),
        }
    })
}

/// Writes the records and returns the text plus each record with the line number its `dn:`
/// line gets.
fn write_all(records: &[LdifRecord], with_version: bool) -> (Vec<u8>, Vec<LdifRecord>) {
    let mut writer = LdifWriter::new(Vec::new());
    let mut expected = Vec::new();
    let mut line = 1;
    if with_version {
        writer.write_version().unwrap();
        line += 2;
    }
    for record in records {
        let before = writer.get_mut().len();
        writer.write_record(record).unwrap();
        let mut with_line = record.clone();
        with_line.line = line;
        expected.push(with_line);
        line += writer.get_mut()[before..]
            .iter()
            .filter(|&&byte| byte == b'\n')
            .count() as u64;
    }
    (writer.into_inner(), expected)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn content_round_trip(record in content_record()) {
        let (text, expected) = write_all(std::slice::from_ref(&record), false);
        for line in text.split(|&byte| byte == b'\n') {
            prop_assert!(line.len() <= FOLD_COLUMN, "line too long: {:?}", String::from_utf8_lossy(line));
        }
        let parsed = parse_record(&text, 1, &ParseOptions::default()).unwrap();
        prop_assert_eq!(&parsed, &expected[0]);
    }

    #[test]
    fn change_round_trip(record in change_record()) {
        let (text, expected) = write_all(std::slice::from_ref(&record), false);
        let parsed = parse_record(&text, 1, &ParseOptions::default())
            .map_err(|error| TestCaseError::fail(format!("{error}\n{}", String::from_utf8_lossy(&text))))?;
        prop_assert_eq!(&parsed, &expected[0]);
    }

    #[test]
    fn reader_splitter_and_chunks_agree(
        records in prop::collection::vec(prop_oneof![content_record(), change_record()], 0..8),
        with_version in any::<bool>(),
        chunk_bytes in 1usize..300,
        crlf in any::<bool>(),
    ) {
        let (mut text, expected) = write_all(&records, with_version);
        if crlf {
            // Every newline written is a line end (values with newlines are base64), so CRLF is
            // a plain substitution.
            let mut converted = Vec::with_capacity(text.len() * 2);
            for &byte in &text {
                if byte == b'\n' {
                    converted.push(b'\r');
                }
                converted.push(byte);
            }
            text = converted;
        }
        let options = ParseOptions::default();
        let streamed: Vec<LdifRecord> =
            LdifReader::new(&text[..]).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&streamed, &expected);

        let split = split_records(&text, 1, true);
        prop_assert_eq!(split.consumed_bytes, text.len());
        let from_split: Vec<LdifRecord> = split
            .records
            .iter()
            .map(|span| parse_record(&text[span.start..span.end], span.first_line, &options).unwrap())
            .collect();
        prop_assert_eq!(&from_split, &expected);

        let mut source = ChunkedRecordSource::with_chunk_bytes(&text[..], &options, chunk_bytes);
        let mut chunked = Vec::new();
        while let Some(batch) = source.next_batch().unwrap() {
            prop_assert!(!batch.is_empty());
            for result in batch.parse_all(&options) {
                chunked.push(result.unwrap());
            }
        }
        prop_assert_eq!(&chunked, &expected);
    }

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_record(&bytes, 1, &ParseOptions::default());
        let split = split_records(&bytes, 1, false);
        prop_assert!(split.consumed_bytes <= bytes.len());
        let mut previous_end = 0;
        for span in &split.records {
            prop_assert!(previous_end <= span.start && span.start < span.end && span.end <= split.consumed_bytes);
            previous_end = span.end;
        }
    }

    #[test]
    fn parse_never_panics_on_ldif_like_lines(
        lines in prop::collection::vec(prop_oneof![
            Just("dn: cn=A".to_string()), Just("dn::".to_string()), Just("changetype: modify".to_string()),
            Just("changetype: modrdn".to_string()), Just("changetype: add".to_string()),
            Just("changetype: delete".to_string()), Just("add: cn".to_string()), Just("increment: n".to_string()),
            Just("-".to_string()), Just("newrdn: cn=B".to_string()), Just("deleteoldrdn: 1".to_string()),
            Just("newsuperior:: ZGM9eA==".to_string()), Just("control: 1.2.3 true:: AA==".to_string()),
            Just("version: 1".to_string()), Just("".to_string()), Just(" ".to_string()),
            Just("#".to_string()), Just("cn:< file:///dev/null".to_string()),
            "[a-z:; <#-]{0,12}", "[ -~]{0,20}",
        ], 0..14),
    ) {
        let text = lines.join("\n");
        let _ = parse_record(text.as_bytes(), 1, &ParseOptions::default());
        let results: Vec<_> = LdifReader::new(text.as_bytes()).collect();
        let options = ParseOptions::default();
        let split = split_records(text.as_bytes(), 1, true);
        let from_split: Vec<_> = split.records.iter()
            .map(|span| parse_record(&text.as_bytes()[span.start..span.end], span.first_line, &options))
            .collect();
        prop_assert_eq!(results, from_split);
    }
}

#[test]
fn base64_exactly_when_required() {
    assert!(!needs_base64(b""));
    assert!(!needs_base64(b"plain value: with <colon>"));
    assert!(needs_base64(b" leading space"));
    assert!(needs_base64(b":leading colon"));
    assert!(needs_base64(b"<leading angle"));
    assert!(needs_base64(b"trailing space "));
    assert!(needs_base64("Kraków".as_bytes()));
    assert!(needs_base64(b"line\nbreak"));
    assert!(needs_base64(b"carriage\rreturn"));
    assert!(needs_base64(b"nul\0byte"));
    let mut writer = LdifWriter::new(Vec::new());
    writer
        .write_entry("cn=Zoë,dc=x", [("cn", "Zoë".as_bytes()), ("sn", b"plain")])
        .unwrap();
    assert_eq!(
        String::from_utf8(writer.into_inner()).unwrap(),
        "dn:: Y249Wm/DqyxkYz14\ncn:: Wm/Dqw==\nsn: plain\n\n"
    );
}

#[test]
fn folds_at_76_columns() {
    let value = "x".repeat(200);
    let mut text = Vec::new();
    lmdir_ldif::write_entry(&mut text, "cn=A", [("description", value.as_bytes())]).unwrap();
    let text = String::from_utf8(text).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1].len(), 76);
    assert!(lines[2].starts_with(' ') && lines[2].len() == 76);
    assert!(lines[3].starts_with(' ') && lines[3].len() < 76);
    assert_eq!(lines[4], "");
}

#[test]
fn chunked_source_reports_oversize_record_and_read_errors() {
    let options = ParseOptions {
        record_bytes_max: 64,
        ..ParseOptions::default()
    };
    let mut text = b"dn: cn=A\ncn: A\n\n".to_vec();
    text.extend_from_slice(b"dn: cn=B\ndescription: ");
    text.extend_from_slice(&[b'x'; 100]);
    text.extend_from_slice(b"\n\ndn: cn=C\ncn: C\n");
    let mut source = ChunkedRecordSource::with_chunk_bytes(&text[..], &options, 16);
    let first = source.next_batch().unwrap().unwrap();
    assert_eq!(first.len(), 1);
    let error = source.next_batch().unwrap_err();
    assert_eq!(error.line, 4);
    assert!(error.message.contains("limit of 64 bytes"), "{error}");
    assert_eq!(source.next_batch().unwrap(), None);

    struct FailingReader;
    impl std::io::Read for FailingReader {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    let error = ChunkedRecordSource::new(FailingReader, &options)
        .next_batch()
        .unwrap_err();
    assert_eq!(error.line, 1);
    assert!(error.message.contains("disk on fire"));
}

#[test]
fn split_carries_incomplete_tail() {
    let text = b"# c\n\ndn: cn=A\ncn: A\n\ndn: cn=B\ncn: B\n";
    let split = split_records(text, 10, false);
    assert_eq!(split.records.len(), 1);
    assert_eq!(split.records[0].first_line, 12);
    assert_eq!(
        &text[split.records[0].start..split.records[0].end],
        b"dn: cn=A\ncn: A\n"
    );
    assert_eq!(&text[split.consumed_bytes..], b"dn: cn=B\ncn: B\n");
    assert_eq!(split.next_line, 15);
    let split = split_records(text, 10, true);
    assert_eq!(split.records.len(), 2);
    assert_eq!(split.consumed_bytes, text.len());
    assert_eq!(split.next_line, 17);
}

/// This thread's CPU time (Linux `/proc/thread-self/schedstat`), falling back to wall time, so
/// the report means something on a busy machine.
struct ThreadClock {
    wall: std::time::Instant,
    cpu_nanoseconds: Option<u64>,
}

impl ThreadClock {
    fn cpu_now() -> Option<u64> {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    fn now() -> Self {
        ThreadClock {
            wall: std::time::Instant::now(),
            cpu_nanoseconds: Self::cpu_now(),
        }
    }

    fn elapsed(&self) -> std::time::Duration {
        match (self.cpu_nanoseconds, Self::cpu_now()) {
            (Some(start), Some(now)) => std::time::Duration::from_nanos(now - start),
            _ => self.wall.elapsed(),
        }
    }
}

/// Throughput of split + parse on generated plain-ASCII entries. Prints MB/s, asserts only
/// correctness. Run with `cargo test --release -p lmdir-ldif -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput_report() {
    let mut writer = LdifWriter::new(Vec::new());
    let mut index = 0u64;
    while writer.get_mut().len() < 100 * 1024 * 1024 {
        let uid = format!("u{index:07}");
        writer
            .write_entry(
                &format!("uid={uid},ou=People,dc=example,dc=com"),
                [
                    ("objectClass", "inetOrgPerson".to_string()),
                    ("objectClass", "posixAccount".to_string()),
                    ("uid", uid.clone()),
                    ("cn", format!("Person Number {index}")),
                    ("sn", format!("Number{index}")),
                    ("givenName", "Person".to_string()),
                    ("mail", format!("{uid}@example.com")),
                    ("telephoneNumber", format!("+1 555 {index:07}")),
                    ("title", "Engineer".to_string()),
                    ("uidNumber", format!("{}", 10000 + index)),
                    ("gidNumber", "10000".to_string()),
                    ("homeDirectory", format!("/home/{uid}")),
                    (
                        "description",
                        "A synthetic person for throughput measurement".to_string(),
                    ),
                ],
            )
            .unwrap();
        index += 1;
    }
    let text = writer.into_inner();
    let options = ParseOptions::default();
    let start = ThreadClock::now();
    let split = split_records(&text, 1, true);
    let split_seconds = start.elapsed().as_secs_f64();
    let mut values = 0usize;
    for span in &split.records {
        let view =
            lmdir_ldif::parse_record_view(&text[span.start..span.end], span.first_line, &options)
                .unwrap();
        if let lmdir_ldif::BodyView::Content(attributes) = view.body {
            values += attributes.len();
        }
    }
    let view_seconds = start.elapsed().as_secs_f64();
    let mut owned_values = 0usize;
    for span in &split.records {
        let record = parse_record(&text[span.start..span.end], span.first_line, &options).unwrap();
        if let RecordBody::Content(attributes) = record.body {
            owned_values += attributes.len();
        }
    }
    let owned_seconds = start.elapsed().as_secs_f64() - view_seconds;
    assert_eq!(split.records.len() as u64, index);
    assert_eq!(values, owned_values);
    let megabytes = text.len() as f64 / 1e6;
    println!(
        "{megabytes:.0} MB, {index} entries: split {:.0} MB/s, split+parse_record_view {:.0} MB/s, \
         parse_record (owned) {:.0} MB/s",
        megabytes / split_seconds,
        megabytes / view_seconds,
        megabytes / owned_seconds
    );
}

/// An attribute description is written raw, so one holding a newline, ':' or '<' would make
/// the line read as another: `description:< file:///etc/x\ndescription` became a file URL
/// when a replica's first refresh wrote a provider's names to the loader. The writer refuses
/// such a name and writes nothing of the record.
#[test]
fn a_name_that_is_no_attribute_description_is_refused_unwritten() {
    use lmdir_ldif::{is_attribute_description, LdifWriter};
    for good in [
        "cn",
        "cn;lang-en",
        "2.5.4.3",
        "userCertificate;binary",
        "x-Y-1",
    ] {
        assert!(is_attribute_description(good), "{good}");
    }
    for bad in [
        "",
        "description:< file:///etc/lmdir/lmdir.toml\ndescription",
        "cn:",
        "cn x",
        ";lang-en",
        "-cn",
        "cn\r",
        "ćn",
    ] {
        assert!(!is_attribute_description(bad), "{bad:?}");
        let mut writer = LdifWriter::new(Vec::new());
        let error = writer
            .write_entry(
                "cn=x,dc=example,dc=com",
                [("cn", &b"x"[..]), (bad, &b"v"[..])],
            )
            .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{bad:?}");
        assert!(writer.into_inner().is_empty(), "{bad:?}: nothing written");
    }
}
