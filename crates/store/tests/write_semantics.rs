//! LDAP write semantics and result codes of add / delete / modify / modrdn.

use crate::common;

use common::*;
use lmdir_schema::{ModOp, Modification, ResultCode};

fn change(op: ModOp, description: &str, values: &[&str]) -> Modification {
    Modification {
        op,
        description: description.to_string(),
        values: values
            .iter()
            .map(|value| value.as_bytes().to_vec())
            .collect(),
    }
}

#[test]
fn writes_return_the_ldap_result_codes() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    add_all(&store, &directory_entries(), 100);
    let context = context();
    let alice = person_dn(9);
    let mut write = store.write().unwrap();

    // add
    let error = write.add(&person(9), &context).unwrap_err();
    assert_eq!(error.code, ResultCode::EntryAlreadyExists);
    let mut orphan = person(500);
    orphan.dn =
        lmdir_schema::Dn::parse(&format!("uid=user500,ou=nowhere,ou=people,{SUFFIX}")).unwrap();
    let error = write.add(&orphan, &context).unwrap_err();
    assert_eq!(error.code, ResultCode::NoSuchObject);
    assert_eq!(
        error.matched_dn.as_deref(),
        Some(format!("ou=people,{SUFFIX}").as_str())
    );
    let outside = entry(
        "o=elsewhere",
        &[("objectClass", "organization"), ("o", "elsewhere")],
    );
    assert_eq!(
        write.add(&outside, &context).unwrap_err().code,
        ResultCode::NoSuchObject
    );
    let no_sn = entry(
        &format!("cn=x,ou=people,{SUFFIX}"),
        &[("objectClass", "person"), ("cn", "x")],
    );
    assert_eq!(
        write.add(&no_sn, &context).unwrap_err().code,
        ResultCode::ObjectClassViolation
    );

    let long_name = "x".repeat(600);
    let long = entry(
        &format!("cn={long_name},ou=people,{SUFFIX}"),
        &[("objectClass", "person"), ("cn", &long_name), ("sn", "x")],
    );
    let error = write.add(&long, &context).unwrap_err();
    assert_eq!(error.code, ResultCode::ConstraintViolation);
    assert!(error.message.contains("exceeds the limit"), "{error}");

    // Operational attributes set on add.
    let id = write.dn_to_id(&alice).unwrap();
    let created = write.add(&person(600), &context).unwrap();
    assert!(created > id);

    // modify
    let cases: Vec<(Vec<Modification>, ResultCode)> = vec![
        (
            vec![change(ModOp::Delete, "telephoneNumber", &["+1 000"])],
            ResultCode::NoSuchAttribute,
        ),
        (
            vec![change(ModOp::Delete, "description", &[])],
            ResultCode::NoSuchAttribute,
        ),
        (
            vec![change(ModOp::Add, "sn", &["SMITH"])],
            ResultCode::AttributeOrValueExists,
        ),
        (
            vec![change(ModOp::Add, "uidNumber", &["5"])],
            ResultCode::ConstraintViolation,
        ),
        (
            vec![change(ModOp::Delete, "sn", &[])],
            ResultCode::ObjectClassViolation,
        ),
        (
            vec![change(
                ModOp::Replace,
                "entryUUID",
                &["00000000-0000-0000-0000-000000000000"],
            )],
            ResultCode::ConstraintViolation,
        ),
        (
            vec![change(ModOp::Delete, "uid", &["user9"])],
            ResultCode::NotAllowedOnRdn,
        ),
        (
            vec![change(ModOp::Replace, "uidNumber", &["not a number"])],
            ResultCode::InvalidAttributeSyntax,
        ),
    ];
    for (modifications, expected) in cases {
        match write.modify(&alice, &modifications, &context) {
            Ok(_) => panic!("{modifications:?} succeeded, expected {expected:?}"),
            Err(error) => assert_eq!(error.code, expected, "{modifications:?}: {error}"),
        }
    }
    // All or nothing: a failing second change leaves the first undone.
    let error = write
        .modify(
            &alice,
            &[
                change(ModOp::Replace, "description", &["kept?"]),
                change(ModOp::Add, "sn", &["smith"]),
            ],
            &context,
        )
        .unwrap_err();
    assert_eq!(error.code, ResultCode::AttributeOrValueExists);
    write
        .modify(
            &alice,
            &[
                change(ModOp::Increment, "uidNumber", &["-9"]),
                change(ModOp::Add, "description", &["ok"]),
            ],
            &context,
        )
        .unwrap();
    write.commit().unwrap();
    {
        let read = store.read().unwrap();
        let entry = read.entry(id).unwrap().unwrap();
        let schema = store.schema();
        assert_eq!(
            entry.values_of(schema.attribute("uidNumber").unwrap())[0].0,
            b"10000"
        );
        assert_eq!(
            entry
                .values_of(schema.attribute("description").unwrap())
                .len(),
            1
        );
        for operational in [
            "entryUUID",
            "entryCSN",
            "createTimestamp",
            "modifyTimestamp",
            "creatorsName",
            "modifiersName",
            "structuralObjectClass",
        ] {
            assert_eq!(
                entry
                    .values_of(schema.attribute(operational).unwrap())
                    .len(),
                1,
                "{operational}"
            );
        }
        assert_eq!(
            entry.values_of(schema.attribute("structuralObjectClass").unwrap())[0].0,
            b"inetOrgPerson"
        );
    }

    // delete / modrdn
    let mut write = store.write().unwrap();
    let department = format!("ou=dept9,ou=people,{SUFFIX}");
    assert_eq!(
        write.delete(&department).unwrap_err().code,
        ResultCode::NotAllowedOnNonLeaf
    );
    assert_eq!(
        write
            .delete(&format!("uid=ghost,{department}"))
            .unwrap_err()
            .code,
        ResultCode::NoSuchObject
    );
    let error = write
        .modrdn(&alice, "uid=user19", false, None, &context)
        .unwrap_err();
    assert_eq!(error.code, ResultCode::EntryAlreadyExists);
    let error = write
        .modrdn(
            &department,
            "ou=dept9",
            false,
            Some(&write.normalized_dn(&alice).unwrap()),
            &context,
        )
        .unwrap_err();
    assert_eq!(error.code, ResultCode::UnwillingToPerform);
    let error = write
        .modrdn(
            &alice,
            "uid=x",
            false,
            Some(&write.normalized_dn(&format!("ou=ghost,{SUFFIX}")).unwrap()),
            &context,
        )
        .unwrap_err();
    assert_eq!(error.code, ResultCode::NoSuchObject);
    // Rename keeping and dropping the old RDN value.
    write
        .modrdn(&alice, "uid=alice", false, None, &context)
        .unwrap();
    let renamed = format!("uid=alice,{department}");
    write
        .modrdn(
            &renamed,
            "uid=alice2",
            true,
            Some(&write.normalized_dn(&format!("ou=people,{SUFFIX}")).unwrap()),
            &context,
        )
        .unwrap();
    write.commit().unwrap();
    let read = store.read().unwrap();
    let moved = read
        .dn_to_id(&format!("uid=alice2,ou=people,{SUFFIX}"))
        .unwrap();
    assert_eq!(moved, id);
    assert_eq!(
        read.dn_of(id).unwrap(),
        format!("uid=alice2,ou=people,{SUFFIX}")
    );
    let uids: Vec<Vec<u8>> = read
        .entry(id)
        .unwrap()
        .unwrap()
        .values_of(store.schema().attribute("uid").unwrap())
        .iter()
        .map(|(original, _)| original.to_vec())
        .collect();
    assert_eq!(
        uids,
        vec![b"user9".to_vec(), b"alice".to_vec()]
            .into_iter()
            .filter(|uid| uid != b"alice")
            .chain([b"alice2".to_vec()])
            .collect::<Vec<_>>()
    );
    let people = read.dn_to_id(&format!("ou=people,{SUFFIX}")).unwrap();
    assert_eq!(read.num_subordinates(people).unwrap(), DEPARTMENTS + 1);
    assert!(store.check().unwrap().is_clean());
}

fn directory_entries() -> Vec<lmdir_schema::Entry> {
    directory(40)
}

/// A modify re-keys only the attribute types whose values changed. A type's postings come from
/// all its descriptions: a value shared by `cn` and `cn;lang-en` keeps its `cn` postings when
/// one of the two drops it, and an unchanged type (`sn`) keeps its postings as they were.
#[test]
fn a_modify_keeps_the_postings_of_a_value_another_description_still_holds() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    add_all(&store, &directory_entries(), 100);
    let context = context();
    let dn = format!("cn=Shared Name,ou=people,{SUFFIX}");
    let shared = entry(
        &dn,
        &[
            ("objectClass", "person"),
            ("cn", "Shared Name"),
            ("cn;lang-en", "Shared Name"),
            ("cn;lang-en", "English Name"),
            ("sn", "Keeper"),
        ],
    );
    let mut write = store.write().unwrap();
    write.add(&shared, &context).unwrap();
    write
        .modify(
            dn.as_str(),
            &[change(ModOp::Delete, "cn;lang-en", &["Shared Name"])],
            &context,
        )
        .unwrap();
    write
        .modify(
            dn.as_str(),
            &[change(ModOp::Replace, "description", &["changed alone"])],
            &context,
        )
        .unwrap();
    write.commit().unwrap();
    let report = store.check().unwrap();
    assert!(report.is_clean(), "{report}");
    let id = store.read().unwrap().dn_to_id(&dn).unwrap();
    let oracle = Oracle::build(&store);
    let people = format!("ou=people,{SUFFIX}");
    for filter in [
        "(cn=Shared Name)",
        "(cn=English Name)",
        "(cn=*hared*)",
        "(sn=Keeper)",
        "(sn=*)",
    ] {
        let found = search_ids(&store, &people, lmdir_store::Scope::Sub, filter);
        assert!(found.contains(&id), "{filter}");
        assert_eq!(
            found,
            oracle.search(&people, lmdir_store::Scope::Sub, filter)
        );
    }
}

/// back-mdb's parent refusals (add.c, modrdn.c): no add below a subentry (65) or an alias
/// (33), the classes named by name or by OID; no move below an alias (a move below a
/// subentry, a rename in place below an alias, and a "move" to the alias the entry is
/// already below are not refused); a replicated add or move goes where its provider put it.
#[test]
fn adds_and_moves_below_aliases_and_subentries_are_refused_as_back_mdb_refuses_them() {
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    let alias = |cn: &str, class: &str| {
        entry(
            &format!("cn={cn},{SUFFIX}"),
            &[
                ("objectClass", class),
                ("objectClass", "extensibleObject"),
                ("cn", cn),
                ("aliasedObjectName", SUFFIX),
            ],
        )
    };
    let subentry = |cn: &str, class: &str| {
        entry(
            &format!("cn={cn},{SUFFIX}"),
            &[
                ("objectClass", "top"),
                ("objectClass", class),
                ("cn", cn),
                ("subtreeSpecification", "{}"),
            ],
        )
    };
    let role = |dn: String| {
        let cn = dn[3..dn.find(',').unwrap()].to_string();
        entry(&dn, &[("objectClass", "organizationalRole"), ("cn", &cn)])
    };
    add_all(
        &store,
        &[
            suffix_entry(),
            alias("a", "alias"),
            alias("a2", "2.5.6.1"),
            subentry("s", "subentry"),
            subentry("s2", "2.5.17.0"),
            role(format!("cn=m,{SUFFIX}")),
        ],
        10,
    );
    let context = context();
    let mut write = store.write().unwrap();
    for (parent, code, text) in [
        ("a", ResultCode::AliasProblem, "parent is an alias"),
        ("a2", ResultCode::AliasProblem, "parent is an alias"),
        (
            "s",
            ResultCode::ObjectClassViolation,
            "parent is a subentry",
        ),
        (
            "s2",
            ResultCode::ObjectClassViolation,
            "parent is a subentry",
        ),
    ] {
        let error = write
            .add(&role(format!("cn=x,cn={parent},{SUFFIX}")), &context)
            .unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (code, text),
            "{parent}"
        );
    }
    let superior = |write: &lmdir_store::WriteTxn<'_>, cn: &str| {
        write.normalized_dn(&format!("cn={cn},{SUFFIX}")).unwrap()
    };
    let m = format!("cn=m,{SUFFIX}");
    for parent in ["a", "a2"] {
        let error = write
            .modrdn(&m, "cn=m", false, Some(&superior(&write, parent)), &context)
            .unwrap_err();
        assert_eq!(error.code, ResultCode::AliasProblem, "{parent}");
        assert_eq!(error.message, "new superior is an alias");
    }
    write
        .modrdn(&m, "cn=m", false, Some(&superior(&write, "s")), &context)
        .unwrap();
    let replicated = lmdir_store::WriteContext {
        replicated: true,
        relax: true,
        ..context.clone()
    };
    write
        .add(&role(format!("cn=r,cn=a,{SUFFIX}")), &replicated)
        .unwrap();
    write
        .add(&role(format!("cn=r,cn=s,{SUFFIX}")), &replicated)
        .unwrap();
    let r = format!("cn=r,cn=a,{SUFFIX}");
    write.modrdn(&r, "cn=r2", false, None, &context).unwrap();
    let r2 = format!("cn=r2,cn=a,{SUFFIX}");
    write
        .modrdn(&r2, "cn=r", false, Some(&superior(&write, "a")), &context)
        .unwrap();
    let moved = format!("cn=m,cn=s,{SUFFIX}");
    write
        .modrdn(
            &moved,
            "cn=m",
            false,
            Some(&superior(&write, "a2")),
            &replicated,
        )
        .unwrap();
    write.commit().unwrap();
}
