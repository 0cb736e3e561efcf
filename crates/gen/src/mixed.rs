//! The `mixed` profile: a corporate directory of people, hosts and groups, shaped unlike the
//! other two — names and display names in several scripts (base64 in LDIF), one to three mails
//! and phones, a mobile number for some, a binary jpegPhoto of 2..=6 KiB on one person in 50,
//! many small groups (2..=200 members, one per 40 people) and one `device`/`ipHost` entry per
//! four people under `ou=Hosts`, each managed by a person.

use std::io::{self, BufWriter, Write};

use lmdir_ldif::LdifWriter;

use crate::{
    coprime_step, ssha, EntryValues, GenerateSummary, Random, DEPARTMENTS, FIRST_UID_NUMBER,
    GROUPS_DN, PASSWORD, PEOPLE_DN, SALT_BYTES,
};

pub const HOSTS_DN: &str = "ou=Hosts,dc=example,dc=com";
/// People per group, on average.
pub(crate) const PEOPLE_PER_GROUP: u64 = 40;
/// People per host.
pub const PEOPLE_PER_HOST: u64 = 4;
/// One person in this many has a jpegPhoto.
const PHOTO_EVERY: u64 = 50;
const PHOTO_BYTES_MIN: u64 = 2048;
const PHOTO_BYTES_SPAN: u64 = 4097;
const GROUP_MEMBERS_MIN: u64 = 2;
const GROUP_MEMBERS_SPAN: u64 = 199;

/// Given names and surnames with letters beyond Latin-1 (and other scripts), as (given, sur).
const GIVEN_NAMES: &[&str] = &[
    "Łukasz",
    "Małgorzata",
    "Şebnem",
    "Çağrı",
    "Ñusta",
    "Jiří",
    "Ærin",
    "Ђорђе",
    "Дмитрий",
    "Ελένη",
    "Νίκος",
    "Þóra",
    "Ōta",
    "Zoë",
    "Ahmet",
    "María",
    "Søren",
    "Ewa",
    "Ştefan",
    "Kateřina",
];

const SURNAMES: &[&str] = &[
    "Wałęsa",
    "Yılmaz",
    "Şahin",
    "Dvořák",
    "Ñahui",
    "Kowalczyk",
    "Петров",
    "Παπαδόπουλος",
    "Jóhannsdóttir",
    "Nørgaard",
    "Łęcki",
    "Öztürk",
    "García",
    "Müller",
    "Smith",
    "Ćosić",
];

const CITIES: &[(&str, &str)] = &[
    ("Łódź", "90-001"),
    ("İstanbul", "34000"),
    ("Brno", "602 00"),
    ("Αθήνα", "105 52"),
    ("Санкт-Петербург", "190000"),
    ("Cusco", "08000"),
    ("Aarhus", "8000"),
    ("Akureyri", "600"),
];

const TITLES: &[&str] = &[
    "Site Reliability Engineer",
    "Network Administrator",
    "Product Owner",
    "Data Scientist",
    "Technician",
    "Head of Operations",
    "Recruiter",
    "Designer",
];

const HOST_ROLES: &[&str] = &[
    "web", "db", "cache", "build", "mail", "ldap", "proxy", "worker",
];

/// Writes the mixed directory of `people` people (and its hosts and groups) to `writer`.
pub(crate) fn generate(people: u64, seed: u64, writer: impl Write) -> io::Result<GenerateSummary> {
    let mut writer = LdifWriter::new(BufWriter::with_capacity(1 << 20, writer));
    let mut random = Random(seed);
    let mut values = EntryValues {
        bytes: Vec::with_capacity(8192),
        spans: Vec::with_capacity(64),
    };
    let mut entries = crate::write_top_entries(&mut writer)?;
    writer.write_entry(
        HOSTS_DN,
        [
            ("objectClass", "top"),
            ("objectClass", "organizationalUnit"),
            ("ou", "Hosts"),
            ("description", "Servers and their addresses"),
        ],
    )?;
    entries += 1;
    for index in 0..people {
        values.clear();
        push_person(&mut values, &mut random, index);
        values.write(&mut writer, &crate::person_dn(index))?;
        entries += 1;
    }
    for host in 0..host_count(people) {
        values.clear();
        push_host(&mut values, &mut random, host, people);
        values.write(&mut writer, &format!("cn=host{host:06},{HOSTS_DN}"))?;
        entries += 1;
    }
    let groups = group_count(people);
    let mut group_members = 0;
    for group in 0..groups {
        values.clear();
        group_members += push_group(&mut values, &mut random, group, people);
        values.write(&mut writer, &format!("cn=team{group:05},{GROUPS_DN}"))?;
        entries += 1;
    }
    writer.flush()?;
    Ok(GenerateSummary {
        entries,
        people,
        groups,
        group_members,
    })
}

pub fn host_count(people: u64) -> u64 {
    people.div_ceil(PEOPLE_PER_HOST)
}

pub(crate) fn group_count(people: u64) -> u64 {
    if people == 0 {
        0
    } else {
        people.div_ceil(PEOPLE_PER_GROUP)
    }
}

fn push_person(values: &mut EntryValues, random: &mut Random, index: u64) {
    let given_name = *random.pick(GIVEN_NAMES);
    let surname = *random.pick(SURNAMES);
    let department_number = random.below(DEPARTMENTS.len() as u64);
    let (city, postal_code) = *random.pick(CITIES);
    let salt: [u8; SALT_BYTES] = random.next_u64().to_le_bytes();
    for class in [
        "top",
        "person",
        "organizationalPerson",
        "inetOrgPerson",
        "posixAccount",
    ] {
        values.push("objectClass", class);
    }
    values.push_formatted("uid", format_args!("u{index:07}"));
    values.push_formatted("cn", format_args!("{given_name} {surname}"));
    values.push("sn", surname);
    values.push("givenName", given_name);
    values.push_formatted("displayName", format_args!("{surname}, {given_name}"));
    let mails = 1 + random.below(3);
    for (number, domain) in ["example.com", "example.org", "mail.example.net"]
        .iter()
        .enumerate()
        .take(mails as usize)
    {
        values.push_formatted("mail", format_args!("u{index:07}.{number}@{domain}"));
    }
    let phones = 1 + random.below(3);
    for number in 0..phones {
        values.push_formatted(
            "telephoneNumber",
            format_args!(
                "+48 12 {:03} {:02}{number}",
                random.below(1000),
                index % 100
            ),
        );
    }
    if random.chance(30) {
        values.push_formatted(
            "mobile",
            format_args!("+90 5{:02} {:07}", random.below(100), index),
        );
    }
    values.push("title", random.pick(TITLES));
    if index > 0 {
        values.push_formatted(
            "manager",
            format_args!("uid=u{:07},{PEOPLE_DN}", (index - 1) / 12),
        );
    }
    if random.chance(30) {
        values.push_formatted(
            "description",
            format_args!(
                "{given_name} ({}) — {city}",
                DEPARTMENTS[department_number as usize]
            ),
        );
    }
    values.push_formatted("employeeNumber", format_args!("E{index:08}"));
    values.push_formatted(
        "departmentNumber",
        format_args!("{}", department_number + 1),
    );
    values.push("postalCode", postal_code);
    values.push("l", city);
    values.push("ou", DEPARTMENTS[department_number as usize]);
    values.push_formatted("uidNumber", format_args!("{}", FIRST_UID_NUMBER + index));
    values.push_formatted(
        "gidNumber",
        format_args!("{}", FIRST_UID_NUMBER + department_number),
    );
    values.push_formatted("homeDirectory", format_args!("/home/u{index:07}"));
    values.push("userPassword", ssha(PASSWORD.as_bytes(), &salt));
    if index.is_multiple_of(PHOTO_EVERY) {
        push_photo(values, random);
    }
}

/// A jpegPhoto of 2..=6 KiB: a JPEG start-of-image marker, then random bytes.
fn push_photo(values: &mut EntryValues, random: &mut Random) {
    let size = PHOTO_BYTES_MIN + random.below(PHOTO_BYTES_SPAN);
    let start = values.bytes.len();
    values.bytes.extend_from_slice(&[0xff, 0xd8, 0xff, 0xe0]);
    while ((values.bytes.len() - start) as u64) < size {
        values
            .bytes
            .extend_from_slice(&random.next_u64().to_le_bytes());
    }
    values.bytes.truncate(start + size as usize);
    values.spans.push(("jpegPhoto", start, values.bytes.len()));
}

fn push_host(values: &mut EntryValues, random: &mut Random, host: u64, people: u64) {
    let role = random.pick(HOST_ROLES);
    for class in ["top", "device", "ipHost"] {
        values.push("objectClass", class);
    }
    values.push_formatted("cn", format_args!("host{host:06}"));
    values.push_formatted("cn", format_args!("{role}{host}.example.com"));
    values.push_formatted(
        "ipHostNumber",
        format_args!("10.{}.{}.{}", host >> 16 & 255, host >> 8 & 255, host & 255),
    );
    values.push_formatted("description", format_args!("{role} server {host}"));
    values.push_formatted("l", format_args!("rack {}", random.below(64)));
    if people > 0 {
        values.push_formatted(
            "manager",
            format_args!("uid=u{:07},{PEOPLE_DN}", random.below(people)),
        );
    }
}

/// A groupOfNames of 2..=200 distinct members; returns the count.
fn push_group(values: &mut EntryValues, random: &mut Random, group: u64, people: u64) -> u64 {
    let size = (GROUP_MEMBERS_MIN + random.below(GROUP_MEMBERS_SPAN)).min(people);
    let start = random.below(people);
    let step = coprime_step(people, random);
    values.push("objectClass", "top");
    values.push("objectClass", "groupOfNames");
    values.push_formatted("cn", format_args!("team{group:05}"));
    values.push_formatted("description", format_args!("Team {group} ({size} people)"));
    for member in 0..size {
        let person = (start + member * step) % people;
        values.push_formatted("member", format_args!("uid=u{person:07},{PEOPLE_DN}"));
    }
    size
}
