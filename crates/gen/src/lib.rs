//! lmdir-gen: deterministic synthetic directories for demos, tests and benchmarks.
//!
//! `generate(people, seed, writer)` streams LDIF for `dc=example,dc=com`: the suffix entry,
//! `ou=People`, `ou=Groups`, a few department units, `people` inetOrgPerson + posixAccount
//! entries `uid=u0000000,ou=People,dc=example,dc=com`..., then about `people / 100`
//! groupOfNames groups (some with thousands of members). Every person's password is
//! `PASSWORD`, stored as `{SSHA}` with a per-entry salt. The same `(people, seed)` always gives
//! byte-identical output. The schema needed is OpenLDAP's core, cosine, inetorgperson and nis.

use std::io::{self, BufWriter, Write};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use lmdir_ldif::LdifWriter;
use sha1::{Digest, Sha1};

pub const SUFFIX: &str = "dc=example,dc=com";
pub const PEOPLE_DN: &str = "ou=People,dc=example,dc=com";
pub const GROUPS_DN: &str = "ou=Groups,dc=example,dc=com";
/// The cleartext password of every generated person.
pub const PASSWORD: &str = "password";
/// First `uidNumber`; person `i` has `FIRST_UID_NUMBER + i`.
pub const FIRST_UID_NUMBER: u64 = 10_000;
/// Most people an output may hold: `uid` values have 7 digits.
pub const PEOPLE_MAX: u64 = 10_000_000;
/// Salt bytes in each `{SSHA}` value.
pub const SALT_BYTES: usize = 8;

pub const DEPARTMENTS: &[&str] = &[
    "Engineering",
    "Sales",
    "Marketing",
    "Finance",
    "Support",
    "Operations",
    "Research",
    "Legal",
];

const GIVEN_NAMES: &[&str] = &[
    "Alice",
    "Bob",
    "Carol",
    "David",
    "Eve",
    "Frank",
    "Grace",
    "Heidi",
    "Ivan",
    "Judy",
    "Mallory",
    "Niaj",
    "Olivia",
    "Peggy",
    "Rupert",
    "Sybil",
    "Trent",
    "Victor",
    "Walter",
    "Yolanda",
    "Zoë",
    "José",
    "Łukasz",
    "Søren",
    "Ana",
    "Björn",
    "François",
    "Jürgen",
    "Małgorzata",
    "Renée",
    "Ngọc",
    "Даша",
    "Mei",
    "Hiroshi",
    "Aiko",
    "Ömer",
];

const SURNAMES: &[&str] = &[
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Wilson",
    "Anderson",
    "Taylor",
    "Thomas",
    "Moore",
    "Jackson",
    "Müller",
    "Kowalski",
    "Nguyễn",
    "Øster",
    "Ångström",
    "Đorđević",
    "Schröder",
    "Núñez",
    "Dubois",
    "Ivanova",
    "Tanaka",
    "Sato",
    "O'Brien",
    "Van der Berg",
];

const CITIES: &[(&str, &str)] = &[
    ("Kraków", "30-001"),
    ("Zürich", "8001"),
    ("São Paulo", "01000-000"),
    ("München", "80331"),
    ("Reykjavík", "101"),
    ("New York", "10001"),
    ("London", "EC1A 1BB"),
    ("Paris", "75001"),
    ("Москва", "101000"),
    ("東京", "100-0001"),
    ("Montréal", "H2X 1Y4"),
    ("Berlin", "10115"),
];

const TITLES: &[&str] = &[
    "Engineer",
    "Senior Engineer",
    "Staff Engineer",
    "Manager",
    "Director",
    "Analyst",
    "Accountant",
    "Sales Representative",
    "Support Specialist",
    "Researcher",
    "Counsel",
    "Intern",
];

const SHELLS: &[&str] = &["/bin/bash", "/bin/zsh", "/bin/sh", "/usr/bin/fish"];

/// The `uid` of person `index`: `u` and 7 zero-padded digits.
pub fn person_uid(index: u64) -> String {
    format!("u{index:07}")
}

/// The DN of person `index`.
pub fn person_dn(index: u64) -> String {
    format!("uid=u{index:07},{PEOPLE_DN}")
}

/// How many groups `generate` writes for `people` people.
pub fn group_count(people: u64) -> u64 {
    if people == 0 {
        0
    } else {
        people.div_ceil(100)
    }
}

/// What `generate` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerateSummary {
    pub entries: u64,
    pub people: u64,
    pub groups: u64,
    /// Member values over all groups.
    pub group_members: u64,
}

/// SplitMix64: a tiny PRNG defined here so the output never changes with a dependency's version
/// or the platform.
#[derive(Debug, Clone)]
struct Random(u64);

impl Random {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        mixed ^ (mixed >> 31)
    }

    /// A value in `0..bound` (`bound` > 0); the modulo bias is irrelevant for synthetic data.
    fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        self.next_u64() % bound
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The attribute values of one entry, kept in one reused byte buffer (no allocation per value).
struct EntryValues {
    bytes: Vec<u8>,
    spans: Vec<(&'static str, usize, usize)>,
}

impl EntryValues {
    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    fn push(&mut self, description: &'static str, value: impl AsRef<[u8]>) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(value.as_ref());
        self.spans.push((description, start, self.bytes.len()));
    }

    fn push_formatted(&mut self, description: &'static str, arguments: std::fmt::Arguments<'_>) {
        let start = self.bytes.len();
        // Writing to a Vec cannot fail.
        let _ = self.bytes.write_fmt(arguments);
        self.spans.push((description, start, self.bytes.len()));
    }

    fn write<W: Write>(&self, writer: &mut LdifWriter<W>, dn: &str) -> io::Result<()> {
        writer.write_entry(
            dn,
            self.spans
                .iter()
                .map(|&(description, start, end)| (description, &self.bytes[start..end])),
        )
    }
}

/// `{SSHA}` of `PASSWORD` with `salt`: base64(SHA-1(password ‖ salt) ‖ salt), as OpenLDAP.
pub fn ssha(password: &[u8], salt: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(password);
    hasher.update(salt);
    let mut digest_and_salt = hasher.finalize().to_vec();
    digest_and_salt.extend_from_slice(salt);
    format!("{{SSHA}}{}", STANDARD.encode(digest_and_salt))
}

/// Writes the whole synthetic directory as LDIF to `writer` (buffered internally).
pub fn generate(people: u64, seed: u64, writer: impl Write) -> io::Result<GenerateSummary> {
    if people > PEOPLE_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{people} people asked for; at most {PEOPLE_MAX} (uid has 7 digits)"),
        ));
    }
    let mut writer = LdifWriter::new(BufWriter::with_capacity(1 << 20, writer));
    let mut random = Random(seed);
    let mut values = EntryValues {
        bytes: Vec::with_capacity(4096),
        spans: Vec::with_capacity(64),
    };
    let mut entries = 0u64;

    writer.write_entry(
        SUFFIX,
        [
            ("objectClass", "top"),
            ("objectClass", "dcObject"),
            ("objectClass", "organization"),
            ("dc", "example"),
            ("o", "Example Corporation"),
            ("description", "Synthetic directory written by lmdir-gen"),
        ],
    )?;
    for (dn, ou, description) in [
        (PEOPLE_DN, "People", "Every person"),
        (GROUPS_DN, "Groups", "Groups of people"),
    ] {
        writer.write_entry(
            dn,
            [
                ("objectClass", "top"),
                ("objectClass", "organizationalUnit"),
                ("ou", ou),
                ("description", description),
            ],
        )?;
    }
    entries += 3;
    for department in DEPARTMENTS {
        writer.write_entry(
            &format!("ou={department},{SUFFIX}"),
            [
                ("objectClass", "top"),
                ("objectClass", "organizationalUnit"),
                ("ou", department),
                ("description", &format!("The {department} department")),
            ],
        )?;
        entries += 1;
    }

    let mut dn = String::with_capacity(64);
    let mut salt = [0u8; SALT_BYTES];
    for index in 0..people {
        values.clear();
        let given_name = *random.pick(GIVEN_NAMES);
        let surname = *random.pick(SURNAMES);
        let department_number = random.below(DEPARTMENTS.len() as u64);
        let department = DEPARTMENTS[department_number as usize];
        let (city, postal_code) = *random.pick(CITIES);
        for chunk in salt.chunks_mut(8) {
            let random_bytes = random.next_u64().to_le_bytes();
            chunk.copy_from_slice(&random_bytes[..chunk.len()]);
        }

        values.push("objectClass", "top");
        values.push("objectClass", "person");
        values.push("objectClass", "organizationalPerson");
        values.push("objectClass", "inetOrgPerson");
        values.push("objectClass", "posixAccount");
        values.push_formatted("uid", format_args!("u{index:07}"));
        values.push_formatted("cn", format_args!("{given_name} {surname}"));
        if random.chance(5) {
            values.push_formatted("cn", format_args!("{given_name} {surname} {index}"));
        }
        values.push("sn", surname);
        values.push("givenName", given_name);
        values.push_formatted("mail", format_args!("u{index:07}@example.com"));
        if random.chance(10) {
            values.push_formatted("mail", format_args!("u{index:07}.alt@example.org"));
        }
        values.push_formatted(
            "telephoneNumber",
            format_args!("+1 555 {:03} {:04}", random.below(1000), index % 10_000),
        );
        if random.chance(20) {
            values.push_formatted(
                "telephoneNumber",
                format_args!("+44 20 {:04} {:04}", random.below(10_000), index % 10_000),
            );
        }
        values.push("title", random.pick(TITLES));
        if index > 0 {
            // A tree of managers with fan-out 8: the manager is always an earlier entry.
            values.push_formatted(
                "manager",
                format_args!("uid=u{:07},{PEOPLE_DN}", (index - 1) / 8),
            );
        }
        values.push_formatted(
            "description",
            format_args!("{given_name} works in {department} from {city}"),
        );
        values.push_formatted("employeeNumber", format_args!("{index}"));
        values.push_formatted(
            "departmentNumber",
            format_args!("{}", department_number + 1),
        );
        values.push("postalCode", postal_code);
        values.push("l", city);
        values.push("ou", department);
        values.push_formatted("uidNumber", format_args!("{}", FIRST_UID_NUMBER + index));
        values.push_formatted(
            "gidNumber",
            format_args!("{}", FIRST_UID_NUMBER + department_number),
        );
        values.push_formatted("homeDirectory", format_args!("/home/u{index:07}"));
        values.push("loginShell", random.pick(SHELLS));
        values.push("userPassword", ssha(PASSWORD.as_bytes(), &salt));

        dn.clear();
        dn.push_str("uid=");
        dn.push_str(&person_uid(index));
        dn.push(',');
        dn.push_str(PEOPLE_DN);
        values.write(&mut writer, &dn)?;
        entries += 1;
    }

    let groups = group_count(people);
    let mut group_members = 0u64;
    for group in 0..groups {
        values.clear();
        // Every 50th group is large (1,000 to 5,000 members), the rest have 2 to 100.
        let wanted = if group % 50 == 0 {
            1000 + random.below(4001)
        } else {
            2 + random.below(99)
        };
        let size = wanted.min(people);
        let start = random.below(people);
        let step = coprime_step(people, &mut random);
        values.push("objectClass", "top");
        values.push("objectClass", "groupOfNames");
        values.push_formatted("cn", format_args!("group{group:05}"));
        values.push_formatted(
            "description",
            format_args!("Synthetic group {group} with {size} members"),
        );
        values.push_formatted("owner", format_args!("uid=u{start:07},{PEOPLE_DN}"));
        for member in 0..size {
            // Distinct members: `step` is coprime with `people`, so `size <= people` steps never
            // revisit an index.
            let person = (start + member * step) % people;
            values.push_formatted("member", format_args!("uid=u{person:07},{PEOPLE_DN}"));
        }
        group_members += size;
        dn.clear();
        dn.push_str(&format!("cn=group{group:05},{GROUPS_DN}"));
        values.write(&mut writer, &dn)?;
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

/// A step in `1..modulus` coprime with `modulus` (1 if none is found quickly), so that walking
/// `start + k * step (mod modulus)` visits distinct values.
fn coprime_step(modulus: u64, random: &mut Random) -> u64 {
    const ATTEMPTS_MAX: u32 = 16;
    if modulus <= 2 {
        return 1;
    }
    for _ in 0..ATTEMPTS_MAX {
        let candidate = 1 + random.below(modulus - 1);
        if greatest_common_divisor(candidate, modulus) == 1 {
            return candidate;
        }
    }
    1
}

fn greatest_common_divisor(mut left: u64, mut right: u64) -> u64 {
    while right != 0 {
        (left, right) = (right, left % right);
    }
    left
}
