//! What the load examples share: the benchmark's index set (issue 3).

use std::collections::BTreeMap;

use lmdir_store::IndexKind;

/// The 19 indexed attributes of the benchmark, plus memberOf equality with `memberof`.
pub fn benchmark_indexes(
    profile: lmdir_gen::Profile,
    memberof: bool,
) -> BTreeMap<String, Vec<IndexKind>> {
    use IndexKind::*;
    let mut indexes = BTreeMap::new();
    indexes.insert("objectClass".to_string(), vec![Equality]);
    // bench/common.sh's INDEX_SET: the mixed profile has its own (sub on displayName, eq on
    // mobile and ipHostNumber, description eq only).
    let mixed = profile == lmdir_gen::Profile::Mixed;
    let substring: &[&str] = if mixed {
        &[
            "cn",
            "sn",
            "givenName",
            "displayName",
            "mail",
            "uid",
            "title",
            "telephoneNumber",
        ]
    } else {
        &[
            "cn",
            "sn",
            "givenName",
            "mail",
            "uid",
            "title",
            "description",
            "telephoneNumber",
        ]
    };
    for name in substring {
        indexes.insert(name.to_string(), vec![Equality, Substring]);
    }
    let equality: &[&str] = &[
        "uidNumber",
        "gidNumber",
        "employeeNumber",
        "departmentNumber",
        "postalCode",
        "l",
        "member",
        "manager",
        "ou",
    ];
    let mixed_equality: &[&str] = if mixed {
        &["mobile", "description", "ipHostNumber"]
    } else {
        &[]
    };
    for name in equality.iter().chain(mixed_equality) {
        indexes.insert(name.to_string(), vec![Equality]);
    }
    if memberof {
        indexes.insert("memberOf".to_string(), vec![Equality]);
    }
    indexes
}
