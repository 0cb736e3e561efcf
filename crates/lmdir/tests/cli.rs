//! The offline tools through the real binary: gen → load → export → load → export is byte-identical,
//! check is clean, search answers, and a bad config or LDIF is a clear error.

use std::path::Path;
use std::process::{Command, Output};

fn lmdir(config: &Path, arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lmdir"))
        .arg("--config")
        .arg(config)
        .args(arguments)
        .output()
        .unwrap()
}

fn write_config(directory: &Path, name: &str) -> std::path::PathBuf {
    let config = directory.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "[database]\nsuffix = \"dc=example,dc=com\"\ndirectory = \"{}\"\n\
             [database.index]\nobjectClass = [\"eq\"]\nuid = [\"eq\", \"sub\"]\nmail = [\"eq\", \"sub\"]\n\
             uidNumber = [\"eq\", \"ordered\"]\nmember = [\"eq\"]\nmemberOf = [\"eq\"]\n",
            directory.join(name).display()
        ),
    )
    .unwrap();
    config
}

fn success(output: Output, what: &str) -> Vec<u8> {
    assert!(
        output.status.success(),
        "{what} failed ({:?}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[test]
fn export_load_export_is_byte_identical_and_checks_clean() {
    let scratch = tempfile::tempdir().unwrap();
    let first = write_config(scratch.path(), "first");
    let second = write_config(scratch.path(), "second");
    let generated = success(lmdir(&first, &["gen", "600", "--seed", "7"]), "gen");
    let ldif = scratch.path().join("people.ldif");
    std::fs::write(&ldif, &generated).unwrap();

    success(lmdir(&first, &["load", ldif.to_str().unwrap()]), "load");
    let first_export = success(lmdir(&first, &["export"]), "export");
    let exported = scratch.path().join("export.ldif");
    std::fs::write(&exported, &first_export).unwrap();
    success(
        lmdir(&second, &["load", exported.to_str().unwrap()]),
        "load of the export",
    );
    let second_export = success(lmdir(&second, &["export"]), "second export");
    assert!(
        first_export.len() > generated.len(),
        "the export carries operational attributes"
    );
    assert!(
        first_export == second_export,
        "export → load → export changed the bytes"
    );

    for config in [&first, &second] {
        let report = String::from_utf8(success(lmdir(config, &["check"]), "check")).unwrap();
        assert!(report.contains("clean"), "{report}");
    }

    let found = String::from_utf8(success(
        lmdir(
            &second,
            &[
                "search",
                "ou=People,dc=example,dc=com",
                "(uid=u0000042)",
                "mail",
            ],
        ),
        "search",
    ))
    .unwrap();
    assert_eq!(found.matches("dn: ").count(), 1, "{found}");
    assert!(found.contains("mail: u0000042@example.com"), "{found}");
    assert!(
        !found.contains("cn:"),
        "only the requested attribute: {found}"
    );
}

#[test]
fn a_bad_config_names_its_file_line_and_key() {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("broken.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = [\"ldap://127.0.0.1:3389\"]\nsize_limit = \"lots\"\n",
    )
    .unwrap();
    let output = lmdir(&config, &["stat"]);
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("broken.toml"), "{message}");
    assert!(message.contains(":3"), "line number: {message}");
    assert!(message.contains("size_limit"), "key: {message}");
}

#[test]
fn a_bad_record_names_its_line_and_leaves_no_database() {
    let scratch = tempfile::tempdir().unwrap();
    let config = write_config(scratch.path(), "db");
    let ldif = scratch.path().join("bad.ldif");
    std::fs::write(
        &ldif,
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou People\n",
    )
    .unwrap();
    let output = lmdir(&config, &["load", ldif.to_str().unwrap()]);
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("line 9"), "{message}");
    assert!(message.contains("ou=People,dc=example,dc=com"), "{message}");
    let entries = std::fs::read_dir(scratch.path().join("db"))
        .map(|listing| listing.count())
        .unwrap_or(0);
    assert_eq!(entries, 0, "no half-loaded database is left behind");
}

#[test]
fn a_schema_file_overriding_a_builtin_definition_is_logged_and_takes_effect() {
    let scratch = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schema/tests/fixtures/rfc2307bis_style.schema");
    let config = scratch.path().join("bis.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nsuffix = \"dc=example,dc=com\"\ndirectory = \"{}\"\nschema_files = [\"{}\"]\n",
            scratch.path().join("bis").display(),
            fixture.display()
        ),
    )
    .unwrap();
    let ldif = scratch.path().join("groups.ldif");
    std::fs::write(
        &ldif,
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: cn=admins,dc=example,dc=com\nobjectClass: groupOfNames\nobjectClass: posixGroup\n\
         cn: admins\ngidNumber: 500\nmember: cn=admins,dc=example,dc=com\n",
    )
    .unwrap();
    let output = lmdir(&config, &["load", ldif.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "load failed: {stderr}");
    assert!(
        stderr.contains("object class 'posixGroup' (1.3.6.1.1.1.2.2) overrides the built-in definition at builtin.schema:"),
        "{stderr}"
    );
}

/// `lmdir ARGS` run under umask 022 (the usual login umask), as `sh` sets it.
fn lmdir_umask_022(config: &Path, arguments: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("umask 022 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_lmdir"))
        .arg("--config")
        .arg(config)
        .args(arguments)
        .output()
        .unwrap()
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Issue 19 item 8: a backup, an export and a migrated config hold password hashes (or
/// rootpw): each is created 0600 like the live database, whatever the umask, and an export
/// over an existing world-readable file leaves it 0600 too.
#[test]
fn files_holding_password_hashes_are_created_owner_only_under_umask_022() {
    let scratch = tempfile::tempdir().unwrap();
    let config = write_config(scratch.path(), "db");
    let generated = success(lmdir(&config, &["gen", "50", "--seed", "3"]), "gen");
    let ldif = scratch.path().join("people.ldif");
    std::fs::write(&ldif, &generated).unwrap();
    success(lmdir(&config, &["load", ldif.to_str().unwrap()]), "load");
    assert_eq!(mode_of(&scratch.path().join("db/data.mdb")), 0o600);

    let backup = scratch.path().join("backup");
    success(
        lmdir_umask_022(&config, &["backup", backup.to_str().unwrap()]),
        "backup",
    );
    assert_eq!(mode_of(&backup.join("data.mdb")), 0o600, "backup data.mdb");

    let exported = scratch.path().join("export.ldif");
    success(
        lmdir_umask_022(&config, &["export", exported.to_str().unwrap()]),
        "export",
    );
    assert_eq!(mode_of(&exported), 0o600, "new export");
    assert!(std::fs::read_to_string(&exported)
        .unwrap()
        .contains("userPassword"));
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exported, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    success(
        lmdir_umask_022(&config, &["export", exported.to_str().unwrap()]),
        "export over an existing file",
    );
    assert_eq!(mode_of(&exported), 0o600, "export over a 0644 file");

    let slapd_conf = scratch.path().join("slapd.conf");
    std::fs::write(
        &slapd_conf,
        "database mdb\nsuffix \"dc=example,dc=com\"\nrootdn \"cn=admin,dc=example,dc=com\"\n\
         rootpw {SSHA}aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\ndirectory /var/lib/ldap\n",
    )
    .unwrap();
    let migrated = scratch.path().join("migrated/lmdir.toml");
    std::fs::create_dir_all(migrated.parent().unwrap()).unwrap();
    success(
        lmdir_umask_022(
            &config,
            &[
                "migrate",
                "--from",
                slapd_conf.to_str().unwrap(),
                "--out",
                migrated.to_str().unwrap(),
            ],
        ),
        "migrate",
    );
    assert!(std::fs::read_to_string(&migrated)
        .unwrap()
        .contains("rootpw"));
    assert_eq!(mode_of(&migrated), 0o600, "migrated config");
}
