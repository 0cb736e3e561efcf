//! memberOf upkeep: group add / modify / rename / delete and member rename / delete.

use crate::common;

use common::*;
use lmdir_schema::{ModOp, Modification};
use lmdir_store::{ReadTxn, Store};

fn memberof_of(read: &ReadTxn, dn: &str) -> Vec<String> {
    let id = read.dn_to_id(dn).unwrap();
    let attr = read.schema().attribute("memberOf").unwrap();
    let mut values: Vec<String> = read
        .entry(id)
        .unwrap()
        .unwrap()
        .values_of(attr)
        .iter()
        .map(|(original, _)| String::from_utf8(original.to_vec()).unwrap())
        .collect();
    values.sort();
    values
}

fn members_of(read: &ReadTxn, dn: &str) -> Vec<String> {
    let id = read.dn_to_id(dn).unwrap();
    let attr = read.schema().attribute("member").unwrap();
    let mut values: Vec<String> = read
        .entry(id)
        .unwrap()
        .unwrap()
        .values_of(attr)
        .iter()
        .map(|(_, normalized)| String::from_utf8(normalized.to_vec()).unwrap())
        .collect();
    values.sort();
    values
}

fn assert_clean(store: &Store) {
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn memberof_follows_groups_and_members() {
    let temporary = tempfile::tempdir().unwrap();
    let store = memberof_store(temporary.path());
    // Groups are added after their members (directory() adds groups last).
    add_all(&store, &directory(30), 100);
    let context = context();
    let user0 = person_dn(0);
    let user1 = person_dn(1);
    let group = format!("cn=team,ou=groups,{SUFFIX}");
    {
        let mut write = store.write().unwrap();
        let mut team = entry(&group, &[("objectClass", "groupOfNames"), ("cn", "team")]);
        team.add_values(
            "member",
            [
                user0.clone().into_bytes(),
                user1.to_uppercase().into_bytes(),
            ],
        );
        write.add(&team, &context).unwrap();
        write.commit().unwrap();
    }
    assert_clean(&store);
    {
        let read = store.read().unwrap();
        assert_eq!(
            memberof_of(&read, &user0),
            vec![format!("cn=group0,ou=groups,{SUFFIX}"), group.clone()]
        );
        assert!(memberof_of(&read, &user1).contains(&group));
    }

    // Modify: user1 leaves.
    let mut write = store.write().unwrap();
    let change = Modification {
        op: ModOp::Delete,
        description: "member".into(),
        values: vec![user1.clone().into_bytes()],
    };
    write.modify(&group, &[change], &context).unwrap();
    // Rename the group: members' memberOf follow.
    write
        .modrdn(&group, "cn=crew", true, None, &context)
        .unwrap();
    write.commit().unwrap();
    let crew = format!("cn=crew,ou=groups,{SUFFIX}");
    {
        let read = store.read().unwrap();
        assert!(!memberof_of(&read, &user1)
            .iter()
            .any(|dn| dn.contains("team") || dn.contains("crew")));
        assert_eq!(
            memberof_of(&read, &user0),
            vec![crew.clone(), format!("cn=group0,ou=groups,{SUFFIX}")]
        );
    }
    assert_clean(&store);

    // Rename the member: the group's member value follows; then delete it: removed.
    let mut write = store.write().unwrap();
    write
        .modrdn(&user0, "uid=zero", false, None, &context)
        .unwrap();
    write.commit().unwrap();
    let zero = user0.replacen("uid=user0", "uid=zero", 1);
    {
        let read = store.read().unwrap();
        let normalized_zero = store.schema().normalize_dn_str(&zero).unwrap();
        assert_eq!(members_of(&read, &crew), vec![normalized_zero]);
    }
    // crew lists user1 again: zero leaves it; group0 lists zero alone, and member is
    // required (groupOfNames): the value stays, as slapd's memberof leaves it.
    let mut write = store.write().unwrap();
    let back = Modification {
        op: ModOp::Add,
        description: "member".into(),
        values: vec![user1.clone().into_bytes()],
    };
    write.modify(&crew, &[back], &context).unwrap();
    write.delete(&zero).unwrap();
    write.commit().unwrap();
    {
        let read = store.read().unwrap();
        let normalize = |dn: &str| store.schema().normalize_dn_str(dn).unwrap();
        assert_eq!(members_of(&read, &crew), vec![normalize(&user1)]);
        assert_eq!(
            members_of(&read, &format!("cn=group0,ou=groups,{SUFFIX}")),
            vec![normalize(&zero)]
        );
    }
    assert_clean(&store);
    // Still a valid group: a schema-checked modify of it succeeds.
    let mut write = store.write().unwrap();
    let description = Modification {
        op: ModOp::Replace,
        description: "description".into(),
        values: vec![b"still a group".to_vec()],
    };
    write
        .modify(
            &format!("cn=group0,ou=groups,{SUFFIX}"),
            &[description],
            &context,
        )
        .unwrap();
    write.commit().unwrap();

    // Delete a group: memberOf removed from its members.
    let group1 = format!("cn=group1,ou=groups,{SUFFIX}");
    let mut write = store.write().unwrap();
    write.delete(&group1).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    assert!(!memberof_of(&read, &user1).contains(&group1));
    drop(read);
    assert_clean(&store);
}

/// Renaming a parent moves every entry below it: the groups listing them and the memberOf of
/// a moved group's members follow (OpenLDAP's test with ou=People renamed to ou=Toons), also
/// when a group and its members move together; a later delete leaves no stale member value.
#[test]
fn memberof_follows_a_renamed_subtree() {
    let temporary = tempfile::tempdir().unwrap();
    let store = memberof_store(temporary.path());
    add_all(&store, &directory(20), 100);
    let context = context();
    let team_unit = format!("ou=team,{SUFFIX}");
    let team_group = format!("cn=crew,{team_unit}");
    let team_member = format!("uid=cee,{team_unit}");
    {
        let mut write = store.write().unwrap();
        write
            .add(
                &entry(
                    &team_unit,
                    &[("objectClass", "organizationalUnit"), ("ou", "team")],
                ),
                &context,
            )
            .unwrap();
        let person = entry(
            &team_member,
            &[
                ("objectClass", "inetOrgPerson"),
                ("uid", "cee"),
                ("cn", "Cee"),
                ("sn", "Cee"),
            ],
        );
        write.add(&person, &context).unwrap();
        let mut crew = entry(
            &team_group,
            &[("objectClass", "groupOfNames"), ("cn", "crew")],
        );
        crew.add_values(
            "member",
            [team_member.clone().into_bytes(), person_dn(3).into_bytes()],
        );
        write.add(&crew, &context).unwrap();
        write.commit().unwrap();
    }
    // ou=people (holding ou=dept3 holding user3, a member of group0 and of crew) becomes
    // ou=toons: two levels below the renamed entry.
    let people = format!("ou=people,{SUFFIX}");
    let mut write = store.write().unwrap();
    write
        .modrdn(&people, "ou=toons", true, None, &context)
        .unwrap();
    // ou=team (the crew group and its member cee) moves below ou=groups.
    write
        .modrdn(
            &team_unit,
            "ou=squad",
            true,
            Some(&write.normalized_dn(&format!("ou=groups,{SUFFIX}")).unwrap()),
            &context,
        )
        .unwrap();
    write.commit().unwrap();
    let normalize = |dn: &str| store.schema().normalize_dn_str(dn).unwrap();
    let user3 = person_dn(3).replacen("ou=people", "ou=toons", 1);
    let crew = format!("cn=crew,ou=squad,ou=groups,{SUFFIX}");
    let cee = format!("uid=cee,ou=squad,ou=groups,{SUFFIX}");
    {
        let read = store.read().unwrap();
        assert_eq!(members_of(&read, &crew), {
            let mut expected = vec![normalize(&cee), normalize(&user3)];
            expected.sort();
            expected
        });
        assert_eq!(memberof_of(&read, &cee), vec![crew.clone()]);
        assert!(
            memberof_of(&read, &user3).contains(&crew),
            "{:?}",
            memberof_of(&read, &user3)
        );
        let stale = |values: Vec<String>| {
            values
                .iter()
                .any(|dn| dn.contains("ou=people") || dn.contains("ou=team,"))
        };
        assert!(!stale(members_of(&read, &crew)));
        for group in 0..1 {
            let group_dn = format!("cn=group{group},ou=groups,{SUFFIX}");
            assert!(!stale(members_of(&read, &group_dn)), "{group_dn}");
        }
    }
    assert_clean(&store);
    let mut write = store.write().unwrap();
    write.delete(&user3).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    assert_eq!(members_of(&read, &crew), vec![normalize(&cee)]);
    drop(read);
    assert_clean(&store);
}

/// Moving a unit of 300 members: each group naming them is rewritten once for the whole
/// subtree (one change record per group, not one per moved member: a group of 50,000 moved
/// members was rewritten 50,000 times), member and uniqueMember (with its `#'...'B`) follow
/// the new DNs, and every member keeps its memberOf.
#[test]
fn a_moved_unit_rewrites_each_group_once() {
    const PEOPLE: usize = 300;
    let temporary = tempfile::tempdir().unwrap();
    let store = memberof_store(temporary.path());
    add_all(&store, &directory(0), 100);
    let context = context();
    let unit = format!("ou=unit,{SUFFIX}");
    let member = |index: usize| format!("uid=m{index},{unit}");
    let all = format!("cn=all,ou=groups,{SUFFIX}");
    let unique = format!("cn=unique,ou=groups,{SUFFIX}");
    {
        let mut write = store.write().unwrap();
        let organizational = [("objectClass", "organizationalUnit"), ("ou", "unit")];
        write.add(&entry(&unit, &organizational), &context).unwrap();
        for index in 0..PEOPLE {
            let uid = format!("m{index}");
            let person = [
                ("objectClass", "inetOrgPerson"),
                ("uid", uid.as_str()),
                ("cn", uid.as_str()),
                ("sn", uid.as_str()),
            ];
            write
                .add(&entry(&member(index), &person), &context)
                .unwrap();
        }
        let mut group = entry(&all, &[("objectClass", "groupOfNames"), ("cn", "all")]);
        group.add_values("member", (0..PEOPLE).map(|i| member(i).into_bytes()));
        write.add(&group, &context).unwrap();
        let classes = [("objectClass", "groupOfUniqueNames"), ("cn", "unique")];
        let mut group = entry(&unique, &classes);
        let spelled = |i: usize| format!("{}#'0101'B", member(i)).into_bytes();
        group.add_values("uniqueMember", (0..PEOPLE).step_by(3).map(spelled));
        write.add(&group, &context).unwrap();
        write.commit().unwrap();
    }
    let mut write = store.write().unwrap();
    write.record_changes();
    let groups = write.normalized_dn(&format!("ou=groups,{SUFFIX}")).unwrap();
    write
        .modrdn(&unit, "ou=moved", true, Some(&groups), &context)
        .unwrap();
    let committed = write.commit_with_changes().unwrap();
    let moved = |index: usize| format!("uid=m{index},ou=moved,ou=groups,{SUFFIX}");
    let changed = |dn: &str| {
        let dn = store.schema().normalize_dn_str(dn).unwrap();
        committed
            .changes
            .iter()
            .filter(|change| store.schema().normalize_dn_str(&change.dn).unwrap() == dn)
            .count()
    };
    assert_eq!(changed(&all), 1, "one rewrite of the group for the subtree");
    assert_eq!(changed(&unique), 1);
    let read = store.read().unwrap();
    let normalize = |dn: &str| store.schema().normalize_dn_str(dn).unwrap();
    let mut expected: Vec<String> = (0..PEOPLE).map(|i| normalize(&moved(i))).collect();
    expected.sort();
    assert_eq!(members_of(&read, &all), expected);
    let unique_attr = read.schema().attribute("uniqueMember").unwrap();
    let id = read.dn_to_id(&unique).unwrap();
    let values: Vec<String> = read
        .entry(id)
        .unwrap()
        .unwrap()
        .values_of(unique_attr)
        .iter()
        .map(|(original, _)| String::from_utf8(original.to_vec()).unwrap())
        .collect();
    assert_eq!(values.len(), PEOPLE.div_ceil(3));
    assert!(
        values.iter().all(|value| value.contains("ou=moved")),
        "{values:?}"
    );
    assert_eq!(
        memberof_of(&read, &moved(0)),
        vec![all.clone(), unique.clone()]
    );
    assert_eq!(memberof_of(&read, &moved(1)), vec![all.clone()]);
    drop(read);
    assert_clean(&store);
}

/// A group listing one member under two uniqueMember spellings (`dn` and `dn#'0101'B`):
/// deleting either one (a point modify) leaves the member in the group, so its memberOf
/// stays; deleting the other too removes it.
#[test]
fn memberof_stays_while_another_unique_member_value_names_the_member() {
    let temporary = tempfile::tempdir().unwrap();
    let store = memberof_store(temporary.path());
    add_all(&store, &directory(10), 100);
    let context = context();
    let user = person_dn(2);
    let with_uid = format!("{user}#'0101'B");
    let group = format!("cn=uniq,ou=groups,{SUFFIX}");
    let mut write = store.write().unwrap();
    let mut uniq = entry(
        &group,
        &[("objectClass", "groupOfUniqueNames"), ("cn", "uniq")],
    );
    uniq.add_values(
        "uniqueMember",
        [
            user.clone().into_bytes(),
            with_uid.clone().into_bytes(),
            person_dn(3).into_bytes(),
        ],
    );
    write.add(&uniq, &context).unwrap();
    write.commit().unwrap();
    let delete = |value: &str| Modification {
        op: ModOp::Delete,
        description: "uniqueMember".into(),
        values: vec![value.as_bytes().to_vec()],
    };
    for (gone, still_member) in [(&with_uid, true), (&user, false)] {
        let mut write = store.write().unwrap();
        write.modify(&group, &[delete(gone)], &context).unwrap();
        write.commit().unwrap();
        let read = store.read().unwrap();
        assert_eq!(
            memberof_of(&read, &user).contains(&group),
            still_member,
            "after deleting {gone}"
        );
        drop(read);
        assert_clean(&store);
    }
    // The other order: the plain DN goes first.
    let mut write = store.write().unwrap();
    let add = Modification {
        op: ModOp::Add,
        description: "uniqueMember".into(),
        values: vec![user.clone().into_bytes(), with_uid.clone().into_bytes()],
    };
    write.modify(&group, &[add], &context).unwrap();
    write.modify(&group, &[delete(&user)], &context).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    assert!(memberof_of(&read, &user).contains(&group));
}

/// A group may list a DN before any entry holds it (a dangling member value). The entry added
/// there later, or moved there, has that group in its memberOf, as a replicated add finds it
/// (over the member equality index); a memberOf the add itself carries (Relax), naming a group
/// that lists the entry, stays. Without the index only the named groups count. (Before, a
/// client add or move kept only the request's memberOf, and a multi-provider peer applying the
/// same add differed for good.)
#[test]
fn memberof_of_an_added_or_moved_entry_names_the_groups_already_listing_it() {
    let late = format!("uid=late,ou=people,{SUFFIX}");
    let moved = format!("uid=moved,ou=people,{SUFFIX}");
    let (early, ahead) = (
        format!("cn=early,ou=groups,{SUFFIX}"),
        format!("cn=ahead,ou=groups,{SUFFIX}"),
    );
    let named = format!("cn=named,ou=groups,{SUFFIX}");
    for indexed in [true, false] {
        let temporary = tempfile::tempdir().unwrap();
        let mut options = options();
        options.memberof = true;
        if !indexed {
            options.indexes.remove("member");
        }
        let store = Store::open(temporary.path(), options, schema()).unwrap();
        add_all(&store, &directory(10), 100);
        let context = context();
        let mut write = store.write().unwrap();
        for (group, listed) in [(&early, &late), (&ahead, &moved), (&named, &late)] {
            let cn = group[3..].split(',').next().unwrap();
            let mut entry = entry(group, &[("objectClass", "groupOfNames"), ("cn", cn)]);
            entry.add_values("member", [listed.to_uppercase().into_bytes()]);
            write.add(&entry, &context).unwrap();
        }
        let person = entry(
            &late,
            &[
                ("objectClass", "inetOrgPerson"),
                ("uid", "late"),
                ("cn", "late"),
                ("sn", "late"),
                ("memberOf", &named),
            ],
        );
        // A memberOf in the request is the Relax Rules control's (a plain add is refused it);
        // it names a group listing the entry (one no group backs is refused: see
        // `a_client_memberof_unlike_the_groups_is_refused`).
        let relax = lmdir_store::WriteContext {
            relax: true,
            ..context.clone()
        };
        write.add(&person, &relax).unwrap();
        let people = write.normalized_dn(&format!("ou=people,{SUFFIX}")).unwrap();
        let before = {
            write.commit().unwrap();
            let read = store.read().unwrap();
            memberof_of(&read, &person_dn(2))
        };
        let mut write = store.write().unwrap();
        write
            .modrdn(&person_dn(2), "uid=moved", false, Some(&people), &context)
            .unwrap();
        write.commit().unwrap();
        let read = store.read().unwrap();
        let (mut added, mut on_move) = (vec![named.clone()], before.clone());
        if indexed {
            added.insert(0, early.clone());
            on_move.insert(0, ahead.clone());
        }
        assert_eq!(memberof_of(&read, &late), added, "indexed: {indexed}");
        assert_eq!(memberof_of(&read, &moved), on_move, "indexed: {indexed}");
        drop(read);
        assert_clean(&store);
    }
}

/// A client's memberOf (a Relax add or modify, the rootdn's) on a store that keeps memberOf must
/// be what the groups say: a value naming a group that does not list the entry (or no entry)
/// cannot be added, nor one naming a group that lists it removed; constraintViolation naming
/// the value, nothing written. Values that agree with the groups are taken. (A replicated
/// write sets memberOf from the receiving store's groups, so a kept disagreement left two
/// multi-provider nodes different for good; slapd 2.5 refuses memberOf from clients even
/// under Relax.)
#[test]
fn a_client_memberof_unlike_the_groups_is_refused() {
    let temporary = tempfile::tempdir().unwrap();
    let store = memberof_store(temporary.path());
    add_all(&store, &directory(10), 100);
    let (listing, other) = (
        format!("cn=listing,ou=groups,{SUFFIX}"),
        format!("cn=other,ou=groups,{SUFFIX}"),
    );
    // directory(10): person N is a member of groupN.
    let (member, outsider) = (person_dn(1), person_dn(2));
    let own = format!("cn=group1,ou=groups,{SUFFIX}");
    let relax = lmdir_store::WriteContext {
        relax: true,
        ..context()
    };
    let mut write = store.write().unwrap();
    for (group, listed) in [(&listing, &member), (&other, &person_dn(3))] {
        let cn = group[3..].split(',').next().unwrap();
        let mut entry = entry(group, &[("objectClass", "groupOfNames"), ("cn", cn)]);
        entry.add_values("member", [listed.clone().into_bytes()]);
        write.add(&entry, &relax).unwrap();
    }
    write.commit().unwrap();
    let memberof_change = |op, values: &[&String]| Modification {
        op,
        description: "memberOf".into(),
        values: values
            .iter()
            .map(|value| value.as_bytes().to_vec())
            .collect(),
    };
    let mut write = store.write().unwrap();
    let cases = [
        (&outsider, ModOp::Add, vec![&listing], &listing),
        (&member, ModOp::Add, vec![&other], &other),
        (&member, ModOp::Delete, vec![&listing], &listing),
        (&member, ModOp::Delete, vec![], &own),
        (&member, ModOp::Replace, vec![&own, &other], &other),
        (&member, ModOp::Replace, vec![&listing], &own),
    ];
    for (dn, op, values, named) in cases {
        let change = memberof_change(op, &values);
        let error = write.modify(dn, &[change], &relax).unwrap_err();
        let context = format!("{op:?} {values:?} on {dn}: {error:?}");
        assert_eq!(
            error.code,
            lmdir_schema::ResultCode::ConstraintViolation,
            "{context}"
        );
        assert!(error.message.contains(named.as_str()), "{context}");
    }
    let added_dn = format!("uid=added,ou=people,{SUFFIX}");
    let added = entry(
        &added_dn,
        &[
            ("objectClass", "inetOrgPerson"),
            ("uid", "added"),
            ("cn", "added"),
            ("sn", "added"),
            ("memberOf", &listing),
        ],
    );
    let error = write.add(&added, &relax).unwrap_err();
    assert_eq!(error.code, lmdir_schema::ResultCode::ConstraintViolation);
    assert!(error.message.contains(&listing), "{error:?}");
    // Without Relax, memberOf stays NO-USER-MODIFICATION, even where it agrees.
    let agreeing = memberof_change(ModOp::Add, &[&listing]);
    let error = write.modify(&member, &[agreeing], &context()).unwrap_err();
    assert!(error.message.contains("no user modification"), "{error:?}");
    // What agrees with the groups is taken: a replace with the same values, spelled
    // otherwise; memberOf keeps the groups' DNs as stored, as a peer's upkeep writes them.
    let keep = memberof_change(ModOp::Replace, &[&listing.to_uppercase(), &own]);
    write.modify(&member, &[keep], &relax).unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    assert_eq!(memberof_of(&read, &member), vec![own, listing.clone()]);
    assert!(!memberof_of(&read, &outsider).contains(&listing));
    assert_eq!(members_of(&read, &listing), vec![member.to_lowercase()]);
    assert!(read.dn_to_id(&added_dn).is_err());
    drop(read);
    assert_clean(&store);
}

/// A store at `path` keeping memberOf up, with the tests' indexes.
fn memberof_store(path: &std::path::Path) -> Store {
    let mut options = options();
    options.memberof = true;
    Store::open(path, options, schema()).unwrap()
}
