//! memberOf upkeep: group add / modify / rename / delete and member rename / delete.

mod common;

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
    let mut options = options();
    options.memberof = true;
    let store = Store::open(temporary.path(), options, schema()).unwrap();
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
    let mut write = store.write().unwrap();
    write.delete(&zero).unwrap();
    write.commit().unwrap();
    {
        let read = store.read().unwrap();
        assert!(members_of(&read, &crew).is_empty());
        assert!(!members_of(&read, &format!("cn=group0,ou=groups,{SUFFIX}"))
            .iter()
            .any(|dn| dn.contains("zero")));
    }
    assert_clean(&store);

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
