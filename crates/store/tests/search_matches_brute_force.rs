//! ≥10,000 entries written through `add`; ≥50 filters of every kind over every scope, each
//! compared with a brute-force evaluation over all entries.

use crate::common;

use common::*;
use lmdir_schema::{Filter, ResultCode};
use lmdir_store::{Scope, SearchSpec};

const FILTERS: &[&str] = &[
    "(uid=user42)",
    "(uid=USER4711)",
    "(cn=John Smith 0)",
    "(cn=kraków smith 4)",
    "(cn=KRAKÓW*)",
    "(cn=*müller*)",
    "(cn=*ller 2*)",
    "(cn=zo*)",
    "(cn=*9)",
    "(cn=*o*i*)",
    "(cn=a*e*9)",
    "(sn=smith)",
    "(sn=Sm*)",
    "(sn=*ia)",
    "(sn=*)",
    "(sn=O'Brien)",
    "(mail=user7@example.com)",
    "(mail=*@mail.test)",
    "(mail=user1*)",
    "(mail=*ser99*)",
    "(uidNumber=10005)",
    "(uidNumber>=19990)",
    "(uidNumber<=10020)",
    "(uidNumber>=10000000)",
    "(&(uidNumber>=10100)(uidNumber<=10120))",
    "(gidNumber>=505)",
    "(gidNumber<=500)",
    "(gidNumber=*)",
    "(telephoneNumber=*)",
    "(telephoneNumber=+1 555 0300)",
    "(telephoneNumber=+15550303)",
    "(description=*)",
    "(description=employee number 50)",
    "(description=*number 1*)",
    "(objectClass=posixAccount)",
    "(objectClass=organizationalUnit)",
    "(objectClass=*)",
    "(!(objectClass=posixAccount))",
    "(&(objectClass=inetOrgPerson)(uidNumber<=10100))",
    "(&(objectClass=inetOrgPerson)(!(gidNumber=503)))",
    "(|(uid=user1)(uid=user2)(cn=nobody))",
    "(|(sn=Lee)(telephoneNumber=*))",
    "(|(ou=dept3)(uid=user33))",
    "(&(|(sn=Jones)(sn=Brown))(mail=*.org))",
    "(!(|(sn=Jones)(sn=Brown)))",
    "(&(sn=smith)(!(cn=*1*)))",
    "(cn~=jane jones 11)",
    "(sn:caseExactMatch:=SMITH)",
    "(sn:caseExactMatch:=Smith)",
    "(ou:dn:=dept3)",
    "(:dn:2.5.13.2:=dept4)",
    "(uidNumber:integerOrderingMatch:=10003)",
    "(noSuchAttr=x)",
    "(!(noSuchAttr=x))",
    "(&)",
    "(|)",
    "(member=uid=user7,ou=dept7,ou=people,dc=example,dc=com)",
    "(member=UID=User57, OU=Dept7,ou=people,DC=example,dc=com)",
    "(cn=group1*)",
    "(&(objectClass=groupOfNames)(member=*))",
    "(givenName=ørjan)",
    "(givenName=*)",
    "(homeDirectory=/home/user5)",
    "(ou=people)",
    "(&(uid=user4*)(uidNumber>=14000)(uidNumber<=14010))",
];

fn bases() -> Vec<(String, Scope)> {
    let people = format!("ou=people,{SUFFIX}");
    let dept = format!("ou=dept3,ou=people,{SUFFIX}");
    let leaf = person_dn(13);
    let groups = format!("ou=groups,{SUFFIX}");
    let mut combinations = Vec::new();
    for base in [SUFFIX.to_string(), people, dept, leaf, groups] {
        for scope in [Scope::Base, Scope::One, Scope::Sub] {
            combinations.push((base.clone(), scope));
        }
    }
    combinations
}

#[test]
fn every_filter_and_scope_matches_brute_force() {
    assert!(FILTERS.len() >= 50);
    let directory = tempfile::tempdir().unwrap();
    let store = open(directory.path());
    let entries = directory_entries();
    assert!(entries.len() >= 10_000);
    let started = std::time::Instant::now();
    add_all(&store, &entries, 2_000);
    eprintln!("added {} entries in {:?}", entries.len(), started.elapsed());
    let oracle = Oracle::build(&store);
    eprintln!("oracle built at {:?}", started.elapsed());
    assert_eq!(oracle.entries.len(), entries.len());
    let combinations = bases();
    let read = store.read().unwrap();
    let mut nonempty = 0;
    for (index, filter_text) in FILTERS.iter().enumerate() {
        let prepared = store
            .schema()
            .prepare_filter(&Filter::parse(filter_text, 64).unwrap());
        // Every filter over the whole tree, plus three other (base, scope) pairs in rotation so
        // every pair is exercised by many filters.
        let mut chosen = vec![(SUFFIX.to_string(), Scope::Sub)];
        for offset in 0..3 {
            chosen.push(combinations[(index * 3 + offset) % combinations.len()].clone());
        }
        for (base, scope) in chosen {
            let spec = SearchSpec {
                base: base.clone(),
                scope,
                filter: prepared.clone(),
                size_limit: 0,
                lookthrough_limit: 0,
            };
            let found: Vec<u32> = read
                .search(&spec)
                .unwrap()
                .map(|result| result.unwrap().0)
                .collect();
            let expected = oracle.search(&base, scope, filter_text);
            assert_eq!(
                found, expected,
                "filter {filter_text} base '{base}' scope {scope:?}"
            );
            // Candidates are always a superset of the matches.
            let candidates = read.search_candidates(&spec).unwrap();
            assert!(
                expected.iter().all(|id| candidates.contains(*id)),
                "candidates of {filter_text} miss a match"
            );
            if !found.is_empty() {
                nonempty += 1;
            }
        }
    }
    eprintln!("searches compared at {:?}", started.elapsed());
    // The filter set is not degenerate.
    assert!(nonempty > 100, "only {nonempty} searches found anything");

    // Indexes narrow: an indexed equality does not examine the whole tree.
    let spec = SearchSpec {
        base: SUFFIX.to_string(),
        scope: Scope::Sub,
        filter: store
            .schema()
            .prepare_filter(&Filter::parse("(uid=user42)", 8).unwrap()),
        size_limit: 0,
        lookthrough_limit: 1,
    };
    assert_eq!(read.search(&spec).unwrap().count(), 1);
    assert_eq!(read.search_candidates(&spec).unwrap().len(), 1);

    // Limits.
    let mut limited = spec.clone();
    limited.filter = store
        .schema()
        .prepare_filter(&Filter::parse("(sn=smith)", 8).unwrap());
    limited.lookthrough_limit = 0;
    limited.size_limit = 5;
    let results: Vec<_> = read.search(&limited).unwrap().collect();
    assert_eq!(results.len(), 6);
    assert!(results[..5].iter().all(Result::is_ok));
    assert_eq!(
        results[5].as_ref().unwrap_err().code,
        ResultCode::SizeLimitExceeded
    );
    limited.size_limit = 0;
    limited.lookthrough_limit = 10;
    let error = read
        .search(&limited)
        .unwrap()
        .find_map(Result::err)
        .unwrap();
    assert_eq!(error.code, ResultCode::AdminLimitExceeded);

    // Paging: resuming after the last ID of each page gives the same sequence, for an indexed
    // filter (bitmap candidates) and an unindexed one (sequential id2entry walk).
    for (filter_text, page_size) in [("(sn=smith)", 7), ("(givenName=anna)", 97)] {
        let all_spec = SearchSpec {
            size_limit: 0,
            lookthrough_limit: 0,
            filter: store
                .schema()
                .prepare_filter(&Filter::parse(filter_text, 8).unwrap()),
            ..limited.clone()
        };
        let mut paged = Vec::new();
        loop {
            let page_read = store.read().unwrap();
            let mut cursor = page_read.search(&all_spec).unwrap();
            if let Some(last) = paged.last() {
                cursor = cursor.resume_after(*last);
            }
            let page: Vec<u32> = cursor
                .take(page_size)
                .map(|result| result.unwrap().0)
                .collect();
            if page.is_empty() {
                break;
            }
            paged.extend(page);
        }
        let expected = oracle.search(SUFFIX, Scope::Sub, filter_text);
        assert!(expected.len() > page_size);
        assert_eq!(paged, expected, "{filter_text}");
    }

    // A missing base reports the deepest existing ancestor.
    let error = read
        .dn_to_id(&format!("uid=ghost,ou=dept3,ou=people,{SUFFIX}"))
        .unwrap_err();
    assert_eq!(error.code, ResultCode::NoSuchObject);
    assert_eq!(
        error.matched_dn.as_deref(),
        Some(format!("ou=dept3,ou=people,{SUFFIX}").as_str())
    );
}

fn directory_entries() -> Vec<lmdir_schema::Entry> {
    directory(10_000)
}
