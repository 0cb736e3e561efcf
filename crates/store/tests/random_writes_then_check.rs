//! A random sequence of ≥1,000 adds / modifies / modrdns / deletes (some transactions aborted)
//! keeps the store exact: `check()` is clean and searches match brute force. Then deliberate
//! index corruption through raw LMDB is reported by name.

use crate::common;

use common::*;
use lmdir_schema::{ModOp, Modification, ResultCode};
use lmdir_store::{layout, Scope};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn modification(op: ModOp, description: &str, values: &[&str]) -> Modification {
    Modification {
        op,
        description: description.to_string(),
        values: values
            .iter()
            .map(|value| value.as_bytes().to_vec())
            .collect(),
    }
}

#[derive(Clone)]
struct Model {
    people: Vec<u32>,
    departments: Vec<u32>,
    next_person: u32,
}

#[test]
fn random_writes_keep_every_structure_exact() {
    let temporary = tempfile::tempdir().unwrap();
    let store = open(temporary.path());
    add_all(&store, &directory(300), 500);
    let context = context();
    let mut random = StdRng::seed_from_u64(2026);
    let (mut model, groups_id) = {
        let read = store.read().unwrap();
        let people_id = read.dn_to_id(&format!("ou=people,{SUFFIX}")).unwrap();
        let departments = read.children(people_id).unwrap();
        let people = departments
            .iter()
            .flat_map(|department| read.children(*department).unwrap())
            .collect();
        (
            Model {
                people,
                departments,
                next_person: 300,
            },
            read.dn_to_id(&format!("ou=groups,{SUFFIX}")).unwrap(),
        )
    };
    let mut operations = 0;
    let mut counts = [0usize; 6];
    while operations < 1_200 {
        let snapshot = model.clone();
        let mut write = store.write().unwrap();
        for _ in 0..40 {
            operations += 1;
            let choice = random.random_range(0..100);
            if choice < 30 || model.people.len() < 20 {
                let department = model.departments[random.random_range(0..model.departments.len())];
                let index = model.next_person;
                model.next_person += 1;
                let mut entry = person(index);
                let parent = write.dn_of(department).unwrap();
                entry.dn = lmdir_schema::Dn::parse(&format!("uid=user{index},{parent}")).unwrap();
                let id = write.add(&entry, &context).unwrap();
                model.people.push(id);
                counts[0] += 1;
            } else if choice < 60 {
                let id = model.people[random.random_range(0..model.people.len())];
                let dn = write.dn_of(id).unwrap();
                let changes = match random.random_range(0..5) {
                    0 => vec![modification(
                        ModOp::Replace,
                        "description",
                        &[&format!("changed {operations}")],
                    )],
                    1 => vec![modification(
                        ModOp::Add,
                        "telephoneNumber",
                        &[&format!("+1 777 {operations:04}")],
                    )],
                    2 => vec![modification(ModOp::Delete, "description", &[])],
                    3 => vec![modification(ModOp::Increment, "uidNumber", &["7"])],
                    _ => vec![
                        modification(ModOp::Replace, "sn", &["Renamed"]),
                        modification(
                            ModOp::Add,
                            "mail",
                            &[&format!("extra{operations}@example.org")],
                        ),
                    ],
                };
                match write.modify(&dn, &changes, &context) {
                    Ok(_) => counts[1] += 1,
                    // Deleting an absent description or adding an existing phone is refused.
                    Err(error) => assert!(
                        matches!(
                            error.code,
                            ResultCode::NoSuchAttribute | ResultCode::AttributeOrValueExists
                        ),
                        "modify {dn}: {error}"
                    ),
                }
            } else if choice < 75 {
                let id = model.people[random.random_range(0..model.people.len())];
                let dn = write.dn_of(id).unwrap();
                let new_rdn = format!("uid=renamed{operations}");
                let new_superior = if random.random_bool(0.5) {
                    let department =
                        model.departments[random.random_range(0..model.departments.len())];
                    Some(write.dn_of(department).unwrap())
                } else {
                    None
                };
                write
                    .modrdn(
                        &dn,
                        &new_rdn,
                        random.random_bool(0.5),
                        new_superior
                            .map(|superior| write.normalized_dn(&superior).unwrap())
                            .as_ref(),
                        &context,
                    )
                    .unwrap();
                counts[2] += 1;
            } else if choice < 78 {
                // Move a whole department between ou=people and ou=groups.
                let department = model.departments[random.random_range(0..model.departments.len())];
                let dn = write.dn_of(department).unwrap();
                let rdn = dn.split(',').next().unwrap().to_string();
                let target = if dn.contains("ou=groups") {
                    format!("ou=people,{SUFFIX}")
                } else {
                    write.dn_of(groups_id).unwrap()
                };
                write
                    .modrdn(
                        &dn,
                        &rdn,
                        false,
                        Some(&write.normalized_dn(&target).unwrap()),
                        &context,
                    )
                    .unwrap();
                let error = write.delete(
                    &dn.replace("ou=people", "ou=groups")
                        .replace("ou=groups,ou=groups", "ou=groups"),
                );
                assert!(error.is_err());
                counts[3] += 1;
            } else if choice < 98 {
                let position = random.random_range(0..model.people.len());
                let id = model.people.swap_remove(position);
                let dn = write.dn_of(id).unwrap();
                write.delete(&dn).unwrap();
                counts[4] += 1;
            } else {
                let department = model.departments[random.random_range(0..model.departments.len())];
                let dn = write.dn_of(department).unwrap();
                if write.num_subordinates(department).unwrap() > 0 {
                    assert_eq!(
                        write.delete(&dn).unwrap_err().code,
                        ResultCode::NotAllowedOnNonLeaf
                    );
                }
                counts[5] += 1;
            }
        }
        if random.random_bool(0.15) {
            drop(write);
            model = snapshot;
        } else {
            write.commit().unwrap();
        }
    }
    assert!(
        counts.iter().all(|count| *count > 0),
        "every kind of operation ran: {counts:?}"
    );

    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
    assert!(report.postings_checked > 10_000);

    // Searches still match brute force after all the churn.
    let oracle = Oracle::build(&store);
    for filter_text in [
        "(sn=renamed)",
        "(uid=renamed*)",
        "(telephoneNumber=*)",
        "(uidNumber>=10290)",
        "(cn=*smith*)",
        "(mail=extra*)",
    ] {
        for (base, scope) in [
            (SUFFIX.to_string(), Scope::Sub),
            (format!("ou=groups,{SUFFIX}"), Scope::Sub),
            (format!("ou=people,{SUFFIX}"), Scope::One),
        ] {
            assert_eq!(
                search_ids(&store, &base, scope, filter_text),
                oracle.search(&base, scope, filter_text),
                "{filter_text} {base} {scope:?}"
            );
        }
    }

    // Corruption 1: drop one ID from the uid equality posting of a known entry.
    let uid = store.schema().attribute("uid").unwrap();
    let uid_index = store.index_database(uid).unwrap();
    let victim = model.people[0];
    let victim_dn = store.read().unwrap().dn_of(victim).unwrap();
    let victim_uid = {
        let read = store.read().unwrap();
        let entry = read.entry(victim).unwrap().unwrap();
        entry.values_of(uid)[0].1.to_vec()
    };
    let mut key = Vec::new();
    layout::index_key_with_chunk(
        &layout::equality_key(&victim_uid),
        layout::chunk_of(victim),
        &mut key,
    );
    let original_chunk = {
        let mut raw = store.env().write_txn().unwrap();
        let original = uid_index
            .get(&raw, &key)
            .unwrap()
            .expect("posting present")
            .to_vec();
        let mut changed = Vec::new();
        let change = layout::change_posting_chunk(
            Some(&original),
            layout::low_half(victim),
            false,
            &mut changed,
        )
        .unwrap();
        match change {
            layout::ChunkChange::Empty => {
                uid_index.delete(&mut raw, &key).unwrap();
            }
            layout::ChunkChange::Written => uid_index.put(&mut raw, &key, &changed).unwrap(),
            layout::ChunkChange::Unchanged => panic!("victim was not posted"),
        }
        raw.commit().unwrap();
        original
    };
    let report = store.check().unwrap();
    assert!(!report.is_clean());
    let expected = format!("index uid eq: entry {victim} '{victim_dn}' missing from key");
    assert!(
        report
            .problems
            .iter()
            .any(|problem| problem.starts_with(&expected)),
        "{report}\nexpected: {expected}"
    );

    // Corruption 2: restore it, then post a bogus ID under the sn equality key "smith".
    {
        let mut raw = store.env().write_txn().unwrap();
        uid_index.put(&mut raw, &key, &original_chunk).unwrap();
        raw.commit().unwrap();
    }
    assert!(store.check().unwrap().is_clean());
    let sn = store.schema().attribute("sn").unwrap();
    let sn_index = store.index_database(sn).unwrap();
    let bogus = *model
        .people
        .iter()
        .find(|id| {
            let read = store.read().unwrap();
            let entry = read.entry(**id).unwrap().unwrap();
            entry
                .values_of(sn)
                .iter()
                .all(|(_, normalized)| normalized.as_ref() != b"smith")
        })
        .unwrap();
    let bogus_dn = store.read().unwrap().dn_of(bogus).unwrap();
    let mut sn_key = Vec::new();
    layout::index_key_with_chunk(
        &layout::equality_key(b"smith"),
        layout::chunk_of(bogus),
        &mut sn_key,
    );
    {
        let mut raw = store.env().write_txn().unwrap();
        let existing = sn_index.get(&raw, &sn_key).unwrap().map(<[u8]>::to_vec);
        let mut changed = Vec::new();
        assert_eq!(
            layout::change_posting_chunk(
                existing.as_deref(),
                layout::low_half(bogus),
                true,
                &mut changed
            )
            .unwrap(),
            layout::ChunkChange::Written
        );
        sn_index.put(&mut raw, &sn_key, &changed).unwrap();
        raw.commit().unwrap();
    }
    let report = store.check().unwrap();
    let expected = format!("index sn eq: entry {bogus} '{bogus_dn}' posted under key");
    assert!(
        report
            .problems
            .iter()
            .any(|problem| problem.starts_with(&expected)),
        "{report}\nexpected: {expected}"
    );
    assert_eq!(report.problems.len(), 1, "{report}");
}
