//! The generated LDIF: deterministic, valid, and with the promised shape.

use std::collections::HashSet;

use base64::Engine;
use lmdir_gen::{generate, group_count, person_dn, ssha, PASSWORD};
use lmdir_ldif::{LdifReader, RecordBody};
use sha1::{Digest, Sha1};

fn output(people: u64, seed: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    generate(people, seed, &mut bytes).unwrap();
    bytes
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    assert_eq!(output(500, 7), output(500, 7));
    assert_ne!(output(500, 7), output(500, 8));
}

#[test]
fn output_parses_and_has_the_promised_shape() {
    let people = 1234;
    let bytes = output(people, 42);
    let records: Vec<_> = LdifReader::new(&bytes[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let groups = group_count(people);
    assert_eq!(groups, 13);
    assert_eq!(records.len() as u64, 3 + 8 + people + groups);
    assert_eq!(records[0].dn, "dc=example,dc=com");

    let mut dns = HashSet::new();
    let mut non_ascii_people = 0;
    let mut largest_group = 0;
    for record in &records {
        assert!(
            dns.insert(record.dn.to_ascii_lowercase()),
            "duplicate {}",
            record.dn
        );
        let RecordBody::Content(attributes) = &record.body else {
            panic!("content records only")
        };
        let values = |name: &str| -> Vec<&[u8]> {
            attributes
                .iter()
                .filter(|(description, _)| description == name)
                .map(|(_, value)| value.as_slice())
                .collect()
        };
        if record.dn.ends_with(",ou=People,dc=example,dc=com") {
            let uid = String::from_utf8(values("uid")[0].to_vec()).unwrap();
            let index: u64 = uid[1..].parse().unwrap();
            assert_eq!(record.dn, person_dn(index));
            assert_eq!(values("mail")[0], format!("{uid}@example.com").as_bytes());
            assert_eq!(
                values("uidNumber")[0],
                (10_000 + index).to_string().as_bytes()
            );
            for required in [
                "cn",
                "sn",
                "givenName",
                "gidNumber",
                "homeDirectory",
                "userPassword",
            ] {
                assert!(
                    !values(required).is_empty(),
                    "{} lacks {required}",
                    record.dn
                );
            }
            if attributes.iter().any(|(_, value)| !value.is_ascii()) {
                non_ascii_people += 1;
            }
            // The stored {SSHA} verifies against the known password.
            let stored = std::str::from_utf8(values("userPassword")[0]).unwrap();
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(stored.strip_prefix("{SSHA}").unwrap())
                .unwrap();
            let (digest, salt) = decoded.split_at(20);
            let mut hasher = Sha1::new();
            hasher.update(PASSWORD.as_bytes());
            hasher.update(salt);
            assert_eq!(hasher.finalize().as_slice(), digest);
            assert_eq!(ssha(PASSWORD.as_bytes(), salt), stored);
            // Values of one attribute are distinct (slapadd rejects duplicates).
            for name in ["cn", "mail", "telephoneNumber", "objectClass"] {
                let all = values(name);
                let distinct: HashSet<_> = all.iter().collect();
                assert_eq!(all.len(), distinct.len(), "{} {name}", record.dn);
            }
        }
        if record.dn.ends_with(",ou=Groups,dc=example,dc=com") {
            let members = values("member");
            assert!(!members.is_empty());
            let distinct: HashSet<_> = members.iter().collect();
            assert_eq!(
                distinct.len(),
                members.len(),
                "{} has duplicate members",
                record.dn
            );
            for member in members {
                assert!(dns.contains(&String::from_utf8_lossy(member).to_ascii_lowercase()));
            }
            largest_group = largest_group.max(values("member").len());
        }
    }
    assert!(
        non_ascii_people > people / 10,
        "{non_ascii_people} with UTF-8"
    );
    assert!(largest_group >= 1000, "largest group has {largest_group}");
}

#[test]
fn tiny_and_empty_directories() {
    let records: Vec<_> = LdifReader::new(&output(0, 1)[..])
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(records.len(), 11);
    let records: Vec<_> = LdifReader::new(&output(1, 1)[..])
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(records.len(), 13);
    let summary = generate(3, 9, std::io::sink()).unwrap();
    assert_eq!(summary.people, 3);
    assert_eq!(summary.groups, 1);
    assert_eq!(summary.group_members, 3);
    assert_eq!(summary.entries, 11 + 3 + 1);
    assert!(generate(lmdir_gen::PEOPLE_MAX + 1, 1, std::io::sink()).is_err());
}

/// Speed report (no assertion on time): `cargo test --release -p lmdir-gen -- --ignored --nocapture`.
#[test]
#[ignore]
fn speed_report() {
    let start = std::time::Instant::now();
    let mut counter = CountingSink(0);
    let summary = generate(200_000, 1, &mut counter).unwrap();
    println!(
        "200k people: {} entries, {} MB in {:.2} s",
        summary.entries,
        counter.0 / 1_000_000,
        start.elapsed().as_secs_f64()
    );
}

struct CountingSink(usize);

impl std::io::Write for CountingSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The large profile: a differently shaped directory for the benchmarks (issue: speed targets on
/// data shapes we did not tune for), deterministic and valid like the standard one.
#[test]
fn large_profile_has_long_descriptions_more_values_and_more_groups() {
    use lmdir_gen::{generate_profile, profile_group_count, Profile};
    let people = 990;
    let large = |seed| {
        let mut bytes = Vec::new();
        generate_profile(people, seed, Profile::Large, &mut bytes).unwrap();
        bytes
    };
    let bytes = large(3);
    assert_eq!(bytes, large(3));
    assert_ne!(bytes, large(4));
    let mut standard = Vec::new();
    generate_profile(people, 3, Profile::Standard, &mut standard).unwrap();
    assert_eq!(
        standard,
        output(people, 3),
        "generate is the standard profile"
    );

    let records: Vec<_> = LdifReader::new(&bytes[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let groups = profile_group_count(people, Profile::Large);
    assert_eq!(groups, 30);
    assert_eq!(records.len() as u64, 3 + 8 + people + groups);
    let (mut memberships, mut third_mails) = (0u64, 0u64);
    for record in &records {
        let RecordBody::Content(attributes) = &record.body else {
            panic!("content records only")
        };
        let count = |name: &str| attributes.iter().filter(|(d, _)| d == name).count();
        memberships += count("member") as u64;
        if !record.dn.ends_with(",ou=People,dc=example,dc=com") {
            continue;
        }
        let description = &attributes
            .iter()
            .find(|(d, _)| d == "description")
            .unwrap()
            .1;
        assert!(
            (190..=600).contains(&description.len()),
            "{}: description of {} bytes",
            record.dn,
            description.len()
        );
        assert!((2..=3).contains(&count("mail")), "{}", record.dn);
        assert!((2..=3).contains(&count("telephoneNumber")), "{}", record.dn);
        assert_eq!(count("postalAddress"), 1);
        third_mails += u64::from(count("mail") == 3);
    }
    assert!(memberships >= 2 * people, "{memberships} memberships");
    assert!((people / 4..=people * 3 / 4).contains(&third_mails));
}

/// The mixed profile: the third benchmark shape (issue 21), deterministic; people with names
/// beyond Latin-1, 1..=3 mails and phones, a photo on one in 50; hosts; groups of 2..=200.
#[test]
fn mixed_profile_has_hosts_photos_other_scripts_and_small_groups() {
    use lmdir_gen::{generate_profile, host_count, profile_group_count, Profile};
    let people = 1000;
    let mixed = |seed| {
        let mut bytes = Vec::new();
        let summary = generate_profile(people, seed, Profile::Mixed, &mut bytes).unwrap();
        (bytes, summary)
    };
    let (bytes, summary) = mixed(5);
    assert_eq!(bytes, mixed(5).0);
    assert_ne!(bytes, mixed(6).0);
    let records: Vec<_> = LdifReader::new(&bytes[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let groups = profile_group_count(people, Profile::Mixed);
    assert_eq!((groups, host_count(people)), (25, 250));
    assert_eq!(records.len() as u64, 3 + 8 + 1 + people + 250 + groups);
    assert_eq!(summary.entries, records.len() as u64);
    let (mut photos, mut beyond_latin1, mut hosts, mut members) = (0, 0, 0, 0u64);
    for record in &records {
        let RecordBody::Content(attributes) = &record.body else {
            panic!("content records only")
        };
        let values = |name: &str| -> Vec<&Vec<u8>> {
            attributes
                .iter()
                .filter(|(d, _)| d == name)
                .map(|(_, v)| v)
                .collect()
        };
        if record.dn.ends_with(",ou=People,dc=example,dc=com") {
            assert!((1..=3).contains(&values("mail").len()), "{}", record.dn);
            assert!((1..=3).contains(&values("telephoneNumber").len()));
            let cn = String::from_utf8(values("cn")[0].clone()).unwrap();
            beyond_latin1 += usize::from(cn.chars().any(|c| u32::from(c) > 0xff));
            if let Some(photo) = values("jpegPhoto").first() {
                assert!((2048..=6144).contains(&photo.len()));
                assert_eq!(&photo[..2], &[0xff, 0xd8]);
                photos += 1;
            }
        } else if record.dn.ends_with(",ou=Hosts,dc=example,dc=com") {
            assert_eq!(values("ipHostNumber").len(), 1);
            hosts += 1;
        } else if record.dn.ends_with(",ou=Groups,dc=example,dc=com") {
            let count = values("member").len() as u64;
            assert!((2..=200).contains(&count), "{}: {count}", record.dn);
            members += count;
        }
    }
    assert_eq!((photos, hosts), (20, 250));
    assert!(beyond_latin1 > 500, "{beyond_latin1}");
    assert_eq!(members, summary.group_members);
    // The LDIF carries them as base64 (values beyond ASCII and binary ones).
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("cn:: ") && text.contains("jpegPhoto:: "));
}
