//! Shared test data: a deterministic directory and a brute-force search oracle.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lmdir_schema::{Dn, Entry, Filter, OwnedEntryView, Schema};
use lmdir_store::{IndexKind, Scope, SearchSpec, Store, StoreOptions, WriteContext};

pub const SUFFIX: &str = "dc=example,dc=com";

pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::builtin())
}

pub fn options() -> StoreOptions {
    use IndexKind::*;
    let mut indexes = BTreeMap::new();
    indexes.insert("objectClass".to_string(), vec![Equality]);
    indexes.insert("cn".to_string(), vec![Equality, Substring]);
    indexes.insert("sn".to_string(), vec![Equality, Substring, Presence]);
    indexes.insert("uid".to_string(), vec![Equality]);
    indexes.insert("mail".to_string(), vec![Equality, Substring]);
    indexes.insert("uidNumber".to_string(), vec![Equality, Ordered]);
    indexes.insert("gidNumber".to_string(), vec![Equality, Ordered, Presence]);
    indexes.insert("member".to_string(), vec![Equality]);
    indexes.insert("telephoneNumber".to_string(), vec![Presence, Equality]);
    indexes.insert("ou".to_string(), vec![Equality]);
    StoreOptions {
        suffix: SUFFIX.to_string(),
        indexes,
        sync: false,
        ..StoreOptions::default()
    }
}

pub fn open(directory: &Path) -> Store {
    Store::open(directory, options(), schema()).expect("store opens")
}

pub fn context() -> WriteContext {
    WriteContext {
        now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        ..WriteContext::new("cn=admin,dc=example,dc=com")
    }
}

pub fn entry(dn: &str, attributes: &[(&str, &str)]) -> Entry {
    let mut entry = Entry::new(Dn::parse(dn).expect("test DN parses"));
    for (description, value) in attributes {
        entry.add_values(description, [value.as_bytes().to_vec()]);
    }
    entry
}

const FIRST_NAMES: [&str; 10] = [
    "John", "Jane", "Zoë", "Łukasz", "Kraków", "Anna", "Ørjan", "Émile", "Bob", "Alice",
];
const LAST_NAMES: [&str; 10] = [
    "Smith", "Jones", "Müller", "Kowalski", "SMITH", "O'Brien", "Nguyen", "García", "Lee", "Brown",
];
const DOMAINS: [&str; 3] = ["example.org", "example.com", "mail.test"];
pub const DEPARTMENTS: u32 = 10;
pub const GROUPS: u32 = 50;

/// The suffix entry (`objectClass: domain`, `dc: example`), as most tests' first add.
pub fn suffix_entry() -> Entry {
    entry(SUFFIX, &[("objectClass", "domain"), ("dc", "example")])
}

pub fn person_dn(index: u32) -> String {
    format!(
        "uid=user{index},ou=dept{},ou=people,{SUFFIX}",
        index % DEPARTMENTS
    )
}

pub fn person(index: u32) -> Entry {
    let first = FIRST_NAMES[(index % 10) as usize];
    let last = LAST_NAMES[((index / 10) % 10) as usize];
    let mut attributes: Vec<(String, String)> = vec![
        ("objectClass".into(), "inetOrgPerson".into()),
        ("objectClass".into(), "posixAccount".into()),
        ("uid".into(), format!("user{index}")),
        ("cn".into(), format!("{first} {last} {index}")),
        ("sn".into(), last.into()),
        ("givenName".into(), first.into()),
        (
            "mail".into(),
            format!("user{index}@{}", DOMAINS[(index % 3) as usize]),
        ),
        ("uidNumber".into(), format!("{}", 10_000 + index)),
        ("gidNumber".into(), format!("{}", 500 + index % 7)),
        ("homeDirectory".into(), format!("/home/user{index}")),
    ];
    if index.is_multiple_of(3) {
        attributes.push(("telephoneNumber".into(), format!("+1 555 {index:04}")));
    }
    if index.is_multiple_of(5) {
        attributes.push(("description".into(), format!("Employee number {index}")));
    }
    let borrowed: Vec<(&str, &str)> = attributes
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    entry(&person_dn(index), &borrowed)
}

/// The directory: suffix, two OUs, departments, groups, then `people` persons.
pub fn directory(people: u32) -> Vec<Entry> {
    let mut entries = vec![
        entry(
            SUFFIX,
            &[
                ("objectClass", "top"),
                ("objectClass", "dcObject"),
                ("objectClass", "organization"),
                ("dc", "example"),
                ("o", "Example"),
            ],
        ),
        entry(
            &format!("ou=people,{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", "people")],
        ),
        entry(
            &format!("ou=groups,{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", "groups")],
        ),
    ];
    for department in 0..DEPARTMENTS {
        let name = format!("dept{department}");
        entries.push(entry(
            &format!("ou={name},ou=people,{SUFFIX}"),
            &[("objectClass", "organizationalUnit"), ("ou", &name)],
        ));
    }
    for index in 0..people {
        entries.push(person(index));
    }
    for group in 0..GROUPS {
        let mut group_entry = entry(
            &format!("cn=group{group},ou=groups,{SUFFIX}"),
            &[
                ("objectClass", "groupOfNames"),
                ("cn", &format!("group{group}")),
            ],
        );
        let members: Vec<Vec<u8>> = (group..people)
            .step_by(GROUPS as usize * 7)
            .map(|index| person_dn(index).into_bytes())
            .collect();
        let members = if members.is_empty() {
            vec![format!("cn=nobody,{SUFFIX}").into_bytes()]
        } else {
            members
        };
        group_entry.add_values("member", members);
        entries.push(group_entry);
    }
    entries
}

/// Adds entries in transactions of `batch` adds.
pub fn add_all(store: &Store, entries: &[Entry], batch: usize) {
    // As an importer writes: exported entries carry their operational attributes back in.
    let context = WriteContext {
        relax: true,
        ..context()
    };
    for chunk in entries.chunks(batch) {
        let mut write = store.write().expect("write txn");
        for entry in chunk {
            write
                .add(entry, &context)
                .unwrap_or_else(|error| panic!("add '{}': {error}", entry.dn));
        }
        write.commit().expect("commit");
    }
}

/// Every stored entry, re-read as an owned entry with its normalized DN RDNs.
pub struct Oracle {
    pub schema: Arc<Schema>,
    /// (ID, normalized RDNs leaf first, original DN, view)
    pub entries: Vec<(u32, Vec<String>, String, OwnedEntryView)>,
}

impl Oracle {
    pub fn build(store: &Store) -> Oracle {
        let schema = store.schema().clone();
        let read = store.read().unwrap();
        let mut entries = Vec::new();
        for id in read.ids_parents_first().unwrap() {
            let dn_text = read.dn_of(id).unwrap();
            let dn = Dn::parse(&dn_text).unwrap();
            let rdns: Vec<String> = dn
                .rdns
                .iter()
                .map(|rdn| schema.normalize_rdn(rdn).unwrap())
                .collect();
            let owned = read.entry(id).unwrap().unwrap().to_entry(dn);
            entries.push((
                id,
                rdns,
                dn_text,
                OwnedEntryView::new(&schema, &owned).unwrap(),
            ));
        }
        entries.sort_by_key(|(id, ..)| *id);
        Oracle { schema, entries }
    }

    /// IDs matching (filter over every entry) ∧ (scope check by DN), in ID order.
    pub fn search(&self, base: &str, scope: Scope, filter: &str) -> Vec<u32> {
        let prepared = self
            .schema
            .prepare_filter(&Filter::parse(filter, 64).unwrap());
        let base_rdns: Vec<String> = Dn::parse(base)
            .unwrap()
            .rdns
            .iter()
            .map(|rdn| self.schema.normalize_rdn(rdn).unwrap())
            .collect();
        self.entries
            .iter()
            .filter(|(_, rdns, _, _)| {
                let within = rdns.len() >= base_rdns.len()
                    && rdns[rdns.len() - base_rdns.len()..] == base_rdns[..];
                within
                    && match scope {
                        Scope::Base => rdns.len() == base_rdns.len(),
                        Scope::One => rdns.len() == base_rdns.len() + 1,
                        Scope::Sub => true,
                    }
            })
            .filter(|(_, _, _, view)| prepared.evaluate(view).is_true())
            .map(|(id, ..)| *id)
            .collect()
    }
}

/// A search of `filter` under `base` (normalized), without limits.
pub fn search_spec(store: &Store, base: &str, scope: Scope, filter: &str) -> SearchSpec {
    SearchSpec {
        base: base.to_string(),
        scope,
        filter: store
            .schema()
            .prepare_filter(&Filter::parse(filter, 8).unwrap()),
        size_limit: 0,
        lookthrough_limit: 0,
    }
}

/// The IDs a store search of `filter` under `base` returns, in the order it returns them.
pub fn search_ids(store: &Store, base: &str, scope: Scope, filter: &str) -> Vec<u32> {
    let spec = search_spec(store, base, scope, filter);
    let read = store.read().unwrap();
    let ids = read
        .search(&spec)
        .unwrap()
        .map(|result| result.unwrap().0)
        .collect();
    ids
}
