//! A slapcat export of an OpenLDAP partial replica through the real binary: its glue
//! placeholders (`objectClass: top`, `glue`, no RDN value, as slapd's syncrepl creates them) and
//! syncrepl's bookkeeping subentries load, with and without --quick, are exported as stored
//! (as slapcat writes them) and check clean; a glue entry holding its RDN value is refused with
//! slapd's own message (slapadd: "(65) attribute 'ou' not allowed").

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lmdir(config: &Path, arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lmdir"))
        .arg("--config")
        .arg(config)
        .args(arguments)
        .output()
        .unwrap()
}

fn write_config(directory: &Path, name: &str) -> PathBuf {
    let config = directory.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "[database]\nsuffix = \"dc=example,dc=com\"\ndirectory = \"{}\"\n\
             [database.index]\nobjectClass = [\"eq\"]\n",
            directory.join(name).display()
        ),
    )
    .unwrap();
    config
}

fn success(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({:?}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Operational attributes as slapcat writes them after each entry.
fn stamped(record: &str, n: u32) -> String {
    format!(
        "{record}entryUUID: 38c3dc46-8452-1041-967c-3d07311e15{n:02}\n\
         creatorsName: cn=admin,dc=example,dc=com\ncreateTimestamp: 20261204171643Z\n\
         entryCSN: 20261204171643.5736{n:02}Z#000000#000#000000\n\
         modifiersName: cn=admin,dc=example,dc=com\nmodifyTimestamp: 20261204171643Z\n\n"
    )
}

/// A consumer that replicated only `ou=Staff,ou=People` and one group: ou=People and
/// ou=Groups exist only as glue; an older consumer's syncConsumerSubentry and a provider's
/// syncProviderSubentry (slapadd 2.5 accepts both, as written here).
fn partial_replica_export() -> String {
    let records = [
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n\
         o: Example\nstructuralObjectClass: organization\n\
         contextCSN: 20261204171643.573699Z#000000#000#000000\n",
        "dn: ou=People,dc=example,dc=com\nobjectClass: top\nobjectClass: glue\n\
         structuralObjectClass: glue\n",
        "dn: ou=Staff,ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: Staff\n\
         structuralObjectClass: organizationalUnit\n",
        "dn: uid=p1,ou=Staff,ou=People,dc=example,dc=com\nobjectClass: inetOrgPerson\nuid: p1\n\
         cn: P One\nsn: One\nstructuralObjectClass: inetOrgPerson\n",
        "dn: ou=Groups,dc=example,dc=com\nobjectClass: top\nobjectClass: glue\n\
         structuralObjectClass: glue\n",
        "dn: cn=g1,ou=Groups,dc=example,dc=com\nobjectClass: groupOfNames\ncn: g1\n\
         member: uid=p1,ou=Staff,ou=People,dc=example,dc=com\n\
         structuralObjectClass: groupOfNames\n",
        "dn: cn=syncrepl0,dc=example,dc=com\nobjectClass: top\nobjectClass: subentry\n\
         objectClass: syncConsumerSubentry\nstructuralObjectClass: subentry\ncn: syncrepl0\n\
         subtreeSpecification: {}\n\
         syncreplCookie: rid=000,csn=20261204171643.573699Z#000000#000#000000\n",
        "dn: cn=ldapsync,dc=example,dc=com\nobjectClass: top\nobjectClass: subentry\n\
         objectClass: syncProviderSubentry\nstructuralObjectClass: subentry\ncn: ldapsync\n\
         subtreeSpecification: {}\ncontextCSN: 20261204171643.573699Z#000000#000#000000\n",
    ];
    (0u32..)
        .zip(records)
        .map(|(n, record)| stamped(record, n))
        .collect()
}

#[test]
fn a_partial_replica_export_loads_exports_and_checks_clean() {
    let scratch = tempfile::tempdir().unwrap();
    let ldif = scratch.path().join("replica.ldif");
    std::fs::write(&ldif, partial_replica_export()).unwrap();
    for (name, quick) in [("checked", false), ("quick", true)] {
        let config = write_config(scratch.path(), name);
        let mut arguments = vec!["load", ldif.to_str().unwrap()];
        if quick {
            arguments.push("--quick");
        }
        success(lmdir(&config, &arguments), &format!("load ({name})"));
        let export = success(lmdir(&config, &["export"]), "export");
        assert_eq!(
            export
                .lines()
                .filter(|line| line.starts_with("dn: "))
                .count(),
            8
        );
        for expected in [
            "dn: ou=People,dc=example,dc=com\nobjectClass: top\nobjectClass: glue\n\
             structuralObjectClass: glue\n",
            "dn: ou=Groups,dc=example,dc=com\nobjectClass: top\nobjectClass: glue\n",
            "objectClass: syncConsumerSubentry\n",
            "syncreplCookie: rid=000,csn=20261204171643.573699Z#000000#000#000000\n",
            "objectClass: syncProviderSubentry\n",
        ] {
            assert!(
                export.contains(expected),
                "{name}: no {expected:?} in\n{export}"
            );
        }
        let report = success(lmdir(&config, &["check"]), "check");
        assert!(report.contains("clean"), "{report}");
        // The export loads again, as slapcat's output into slapadd.
        let again = scratch.path().join(format!("{name}-export.ldif"));
        std::fs::write(&again, &export).unwrap();
        let second = write_config(scratch.path(), &format!("{name}-again"));
        success(lmdir(&second, &["load", again.to_str().unwrap()]), "reload");
        assert_eq!(success(lmdir(&second, &["export"]), "export"), export);
    }
}

#[test]
fn a_glue_entry_holding_its_rdn_value_is_refused_as_slapadd_refuses_it() {
    let scratch = tempfile::tempdir().unwrap();
    let ldif = scratch.path().join("named-glue.ldif");
    std::fs::write(
        &ldif,
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n\
         o: Example\n\n\
         dn: ou=People,dc=example,dc=com\nobjectClass: top\nobjectClass: glue\n\
         structuralObjectClass: glue\nou: People\n\n",
    )
    .unwrap();
    let config = write_config(scratch.path(), "named");
    let output = lmdir(&config, &["load", ldif.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ou=People,dc=example,dc=com"), "{stderr}");
    assert!(stderr.contains("attribute 'ou' not allowed"), "{stderr}");
}
