//! What the load examples share: the benchmark's index set (issue 3).

use std::collections::BTreeMap;

use lmdir_store::IndexKind;

/// The 19 indexed attributes of the benchmark, plus memberOf equality with `memberof`.
pub fn benchmark_indexes(memberof: bool) -> BTreeMap<String, Vec<IndexKind>> {
    use IndexKind::*;
    let mut indexes = BTreeMap::new();
    indexes.insert("objectClass".to_string(), vec![Equality]);
    for name in [
        "cn",
        "sn",
        "givenName",
        "mail",
        "uid",
        "title",
        "description",
        "telephoneNumber",
    ] {
        indexes.insert(name.to_string(), vec![Equality, Substring]);
    }
    for name in [
        "uidNumber",
        "gidNumber",
        "employeeNumber",
        "departmentNumber",
        "postalCode",
        "l",
        "member",
        "manager",
        "ou",
    ] {
        indexes.insert(name.to_string(), vec![Equality]);
    }
    if memberof {
        indexes.insert("memberOf".to_string(), vec![Equality]);
    }
    indexes
}
