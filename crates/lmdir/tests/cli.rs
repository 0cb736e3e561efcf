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
fn load_reads_file_urls_unless_told_no_file_urls() {
    let scratch = tempfile::tempdir().unwrap();
    let value = scratch.path().join("description.txt");
    std::fs::write(&value, "read from a file").unwrap();
    let ldif = scratch.path().join("urls.ldif");
    std::fs::write(
        &ldif,
        format!(
            "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n\
             dc: example\no: Example\ndescription:< file://{}\n",
            value.display()
        ),
    )
    .unwrap();
    let refusing = write_config(scratch.path(), "refusing");
    let output = lmdir(
        &refusing,
        &["load", "--no-file-urls", ldif.to_str().unwrap()],
    );
    assert!(!output.status.success());
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("line 6"), "{message}");
    assert!(message.contains("--no-file-urls"), "{message}");
    assert!(!message.contains("read from a file"), "{message}");
    // By default the operator's own file names files, as for slapadd.
    let reading = write_config(scratch.path(), "reading");
    success(lmdir(&reading, &["load", ldif.to_str().unwrap()]), "load");
    let exported = success(lmdir(&reading, &["export"]), "export");
    let exported = String::from_utf8_lossy(&exported);
    assert!(
        exported.contains("description: read from a file"),
        "{exported}"
    );
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

/// Issue 20: `lmdir load` keeps a value repeated byte for byte once (OpenLDAP's
/// test-whoami.ldif) and says so; `lmdir check` counts userPassword values by scheme and names
/// the entries whose values a bind cannot verify, as warnings that leave the exit status 0.
#[test]
fn load_keeps_repeats_once_and_check_accounts_for_password_schemes() {
    let scratch = tempfile::tempdir().unwrap();
    let config = write_config(scratch.path(), "db");
    let ldif = scratch.path().join("in.ldif");
    std::fs::write(
        &ldif,
        "dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: E\n\n\
         dn: cn=jaj,dc=example,dc=com\nobjectClass: person\ncn: jaj\nsn: jaj\n\
         userpassword:: amFq\nuserpassword:: amFq\n\n\
         dn: cn=yes,dc=example,dc=com\nobjectClass: person\ncn: yes\nsn: yes\n\
         userPassword: {CRYPT}$y$j9T$rn7WCwJvX9aYHQJeH2V8K1$AUivrvHRyalMx6mlVuqBem/Pep8qVzVfVfwNn7xAMgB\n\
         userPassword: {CRYPT}g2CyTOcD393jE\n\n\
         dn: cn=dovecot,dc=example,dc=com\nobjectClass: person\ncn: dovecot\nsn: d\n\
         userPassword: {BLF-CRYPT}$2y$05$abcdefghijklmnopqrstuuOQiyCxlgf/oeuTqixKmWdcYUh4Hjl0a\n\
         userPassword: {PLAIN-MD5}5ebe2294ecd0e0f08eab7690d2a6ee69\n\n\
         dn: cn=broken,dc=example,dc=com\nobjectClass: person\ncn: broken\nsn: b\n\
         userPassword: {CRYPT}$1$abc$def\n\
         userPassword: {CRYPT}$2b$31$uPN6O9HosABmx.Zxn4yXTuJHXn5J.USQDlvK4xOd3zpvo7wzyANmG\n",
    )
    .unwrap();
    let output = lmdir(&config, &["load", ldif.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&success(output, "load")).into_owned();
    assert!(stdout.contains("1 repeated values kept once"), "{stdout}");

    let output = lmdir(&config, &["check"]);
    let report = String::from_utf8_lossy(&success(output, "check")).into_owned();
    assert!(
        report.contains(
            "userPassword values by scheme: CLEARTEXT 1, CRYPT/bcrypt 2, CRYPT/descrypt 1, \
             CRYPT/md5crypt 1, CRYPT/yescrypt 1, PLAIN-MD5 1"
        ),
        "{report}"
    );
    for expected in [
        "warning: cn=dovecot,dc=example,dc=com: userPassword value #1 (PLAIN-MD5): unknown password scheme 'PLAIN-MD5'",
        "warning: cn=broken,dc=example,dc=com: userPassword value #0 (CRYPT/md5crypt): malformed",
        "warning: cn=broken,dc=example,dc=com: userPassword value #1 (CRYPT/bcrypt): CRYPT/bcrypt cost cost=31 exceeds the limit 13",
        "warning: 3 userPassword values cannot be verified by a bind",
        "check: clean",
    ] {
        assert!(report.contains(expected), "{expected}\n{report}");
    }
    assert!(
        !report.contains("$2b$31$"),
        "no hash in the report: {report}"
    );
}

#[test]
fn offline_search_resolves_in_chain_items() {
    let scratch = tempfile::tempdir().unwrap();
    let config = write_config(scratch.path(), "nested");
    let ldif = scratch.path().join("nested.ldif");
    let mut text = String::from(
        "dn: dc=example,dc=com\nobjectClass: domain\ndc: example\n\n\
         dn: ou=g,dc=example,dc=com\nobjectClass: organizationalUnit\nou: g\n\n\
         dn: uid=ann,ou=g,dc=example,dc=com\nobjectClass: account\nuid: ann\n\n",
    );
    text += "dn: cn=inner,ou=g,dc=example,dc=com\nobjectClass: groupOfNames\ncn: inner\n\
             member: uid=ann,ou=g,dc=example,dc=com\n\n\
             dn: cn=outer,ou=g,dc=example,dc=com\nobjectClass: groupOfNames\ncn: outer\n\
             member: cn=inner,ou=g,dc=example,dc=com\n\n";
    std::fs::write(&ldif, text).unwrap();
    success(lmdir(&config, &["load", ldif.to_str().unwrap()]), "load");
    let found = String::from_utf8(success(
        lmdir(
            &config,
            &[
                "search",
                "dc=example,dc=com",
                "(member:1.2.840.113556.1.4.1941:=uid=ann,ou=g,dc=example,dc=com)",
                "cn",
            ],
        ),
        "search",
    ))
    .unwrap();
    assert!(found.contains("dn: cn=inner,"), "{found}");
    assert!(found.contains("dn: cn=outer,"), "{found}");
    assert_eq!(found.matches("dn: ").count(), 2, "{found}");
}
