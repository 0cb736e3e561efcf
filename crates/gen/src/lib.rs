//! lmdir-gen: deterministic synthetic directories for demos, tests and benchmarks.
//!
//! `generate(people, seed, writer)` streams LDIF for `dc=example,dc=com`: the suffix entry,
//! `ou=People`, `ou=Groups`, a few department units, `people` inetOrgPerson + posixAccount
//! entries `uid=u0000000,ou=People,dc=example,dc=com`..., then about `people / 100`
//! groupOfNames groups (some with thousands of members). Every person's password is
//! `PASSWORD`, stored as `{SSHA}` with a per-entry salt. The same `(people, seed)` always gives
//! byte-identical output. The schema needed is OpenLDAP's core, cosine, inetorgperson and nis.

use std::io::{self, BufWriter, Write};

mod mixed;
pub use mixed::{host_count, HOSTS_DN, PEOPLE_PER_HOST};

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

const STREETS: &[&str] = &[
    "Main Street",
    "High Street",
    "Station Road",
    "Church Lane",
    "Rue de la Paix",
    "Hauptstraße",
    "Calle Mayor",
    "ul. Floriańska",
    "Maple Avenue",
    "Harbour View",
    "Bahnhofstrasse",
    "Via Roma",
];

/// Words of the large profile's descriptions (ASCII, so a cut never splits a character).
const WORDS: &[&str] = &[
    "responsible",
    "for",
    "the",
    "quarterly",
    "planning",
    "of",
    "regional",
    "accounts",
    "and",
    "customer",
    "onboarding",
    "projects",
    "in",
    "close",
    "cooperation",
    "with",
    "engineering",
    "teams",
    "across",
    "several",
    "sites",
    "maintains",
    "internal",
    "tooling",
    "documentation",
    "reviews",
    "budgets",
    "mentors",
    "new",
    "colleagues",
    "coordinates",
    "vendor",
    "contracts",
    "security",
    "audits",
    "release",
    "schedules",
    "on-call",
    "rotation",
    "travels",
    "often",
    "speaks",
    "German",
    "French",
    "Spanish",
    "Japanese",
    "prefers",
    "email",
    "over",
    "phone",
    "calls",
    "available",
    "mornings",
    "building",
    "floor",
    "desk",
    "near",
    "the",
    "kitchen",
    "previously",
    "worked",
    "at",
    "a",
    "startup",
    "university",
    "hospital",
    "bank",
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

/// How many groups `generate` writes for `people` people in the standard profile.
pub fn group_count(people: u64) -> u64 {
    profile_group_count(people, Profile::Standard)
}

/// How many groups `generate_profile` writes for `people` people in `profile`.
pub fn profile_group_count(people: u64, profile: Profile) -> u64 {
    if people == 0 {
        0
    } else {
        people.div_ceil(profile.people_per_group())
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

/// The shape of the generated people and groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// ~680 bytes of LDIF per person (~730 per entry with the groups), one short description,
    /// mostly single mail and phone values, about 1.5 groups per person: the shape the first
    /// benchmarks were tuned on.
    #[default]
    Standard,
    /// ~1,210 bytes of LDIF per person (~1,340 per entry with the groups): descriptions of
    /// 200..=600 characters, 2..=3 mail and telephoneNumber values, a postalAddress, and three
    /// times as many groups (about three per person): a shape nothing was tuned for.
    Large,
    /// People, hosts and groups (`mixed.rs`): names and display names in several scripts, 1..=3
    /// mails and phones, some mobiles, a 2..=6 KiB jpegPhoto on one person in 50, groups of
    /// 2..=200 members (one per 40 people) and one ipHost per 4 people: a third shape, with
    /// its own index set in the benchmarks.
    Mixed,
}

impl Profile {
    /// `standard` or `large`.
    pub fn parse(text: &str) -> Option<Profile> {
        match text {
            "standard" => Some(Profile::Standard),
            "large" => Some(Profile::Large),
            "mixed" => Some(Profile::Mixed),
            _ => None,
        }
    }

    /// People per group, on average: the divisor of `group_count`.
    fn people_per_group(self) -> u64 {
        match self {
            Profile::Standard => 100,
            Profile::Large => 33,
            Profile::Mixed => mixed::PEOPLE_PER_GROUP,
        }
    }
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

/// Writes the whole synthetic directory (standard profile) as LDIF to `writer`.
pub fn generate(people: u64, seed: u64, writer: impl Write) -> io::Result<GenerateSummary> {
    generate_profile(people, seed, Profile::Standard, writer)
}

/// Writes the whole synthetic directory of `profile` as LDIF to `writer` (buffered internally).
pub fn generate_profile(
    people: u64,
    seed: u64,
    profile: Profile,
    writer: impl Write,
) -> io::Result<GenerateSummary> {
    if people > PEOPLE_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{people} people asked for; at most {PEOPLE_MAX} (uid has 7 digits)"),
        ));
    }
    if profile == Profile::Mixed {
        return mixed::generate(people, seed, writer);
    }
    let mut writer = LdifWriter::new(BufWriter::with_capacity(1 << 20, writer));
    let mut random = Random(seed);
    let mut values = EntryValues {
        bytes: Vec::with_capacity(4096),
        spans: Vec::with_capacity(64),
    };
    let mut entries = write_top_entries(&mut writer)?;
    let mut dn = String::with_capacity(64);
    for index in 0..people {
        values.clear();
        push_person(&mut values, &mut random, index, profile);
        dn.clear();
        dn.push_str("uid=");
        dn.push_str(&person_uid(index));
        dn.push(',');
        dn.push_str(PEOPLE_DN);
        values.write(&mut writer, &dn)?;
        entries += 1;
    }
    let groups = profile_group_count(people, profile);
    let mut group_members = 0u64;
    for group in 0..groups {
        values.clear();
        group_members += push_group(&mut values, &mut random, group, people);
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

/// The suffix, `ou=People`, `ou=Groups` and the department units; returns how many entries.
pub(crate) fn write_top_entries<W: Write>(writer: &mut LdifWriter<W>) -> io::Result<u64> {
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
    }
    Ok(3 + DEPARTMENTS.len() as u64)
}

/// Person `index`'s attributes. The standard profile's random draws come first and in a fixed
/// order, so its output never changes when the large profile grows.
fn push_person(values: &mut EntryValues, random: &mut Random, index: u64, profile: Profile) {
    let given_name = *random.pick(GIVEN_NAMES);
    let surname = *random.pick(SURNAMES);
    let department_number = random.below(DEPARTMENTS.len() as u64);
    let department = DEPARTMENTS[department_number as usize];
    let (city, postal_code) = *random.pick(CITIES);
    let salt: [u8; SALT_BYTES] = random.next_u64().to_le_bytes();
    let large = profile == Profile::Large;

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
    if random.chance(10) || large {
        values.push_formatted("mail", format_args!("u{index:07}.alt@example.org"));
    }
    values.push_formatted(
        "telephoneNumber",
        format_args!("+1 555 {:03} {:04}", random.below(1000), index % 10_000),
    );
    if random.chance(20) || large {
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
    if large {
        push_long_description(values, random, department);
    } else {
        values.push_formatted(
            "description",
            format_args!("{given_name} works in {department} from {city}"),
        );
    }
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
    if large {
        push_large_extras(values, random, index, (city, postal_code));
    }
}

/// The large profile's third mail and phone (for half the people) and a postal address.
fn push_large_extras(
    values: &mut EntryValues,
    random: &mut Random,
    index: u64,
    (city, postal_code): (&str, &str),
) {
    if random.chance(50) {
        values.push_formatted("mail", format_args!("u{index:07}@lists.example.net"));
        values.push_formatted(
            "telephoneNumber",
            format_args!("+49 30 {:05} {:03}", random.below(100_000), index % 1000),
        );
    }
    let house = 1 + random.below(400);
    let street = random.pick(STREETS);
    values.push_formatted(
        "postalAddress",
        format_args!("Example Corporation${house} {street}${postal_code} {city}"),
    );
}

/// A description of 200..=600 ASCII characters: the department, then random words.
fn push_long_description(values: &mut EntryValues, random: &mut Random, department: &str) {
    const LENGTH_MIN_BYTES: u64 = 200;
    const LENGTH_SPAN_BYTES: u64 = 401;
    let start = values.bytes.len();
    let target = LENGTH_MIN_BYTES + random.below(LENGTH_SPAN_BYTES);
    // ASCII only (department names are), so the value stays plain text in LDIF, as most long
    // free-text descriptions in real directories are.
    let _ = write!(values.bytes, "Works in {department}.");
    while ((values.bytes.len() - start) as u64) < target {
        values.bytes.push(b' ');
        values
            .bytes
            .extend_from_slice(random.pick(WORDS).as_bytes());
    }
    values.bytes.truncate(start + target as usize);
    // A trailing space would make the LDIF value base64; the opening is shorter than any target.
    while values.bytes.last() == Some(&b' ') {
        values.bytes.pop();
    }
    debug_assert!(std::str::from_utf8(&values.bytes[start..]).is_ok());
    values
        .spans
        .push(("description", start, values.bytes.len()));
}

/// Group `group`'s attributes; returns its member count. Every 50th group is large (1,000 to
/// 5,000 members), the rest have 2 to 100.
fn push_group(values: &mut EntryValues, random: &mut Random, group: u64, people: u64) -> u64 {
    let wanted = if group.is_multiple_of(50) {
        1000 + random.below(4001)
    } else {
        2 + random.below(99)
    };
    let size = wanted.min(people);
    let start = random.below(people);
    let step = coprime_step(people, random);
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
    size
}

/// A step in `1..modulus` coprime with `modulus` (1 if none is found quickly), so that walking
/// `start + k * step (mod modulus)` visits distinct values.
pub(crate) fn coprime_step(modulus: u64, random: &mut Random) -> u64 {
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
