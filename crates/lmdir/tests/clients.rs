//! Real clients against a real lmdir: python-ldap and ldap3 scripts (`tests/clients/item*.py`),
//! one per numbered item of issue 10 (schema files, rfc2307bis, extended filters and renames,
//! bitwise rules, Password Modify, critical sort, small client habits, per-identity limits), run
//! against one server whose config is what such a deployment would write. The scripts replay LDAP
//! traffic of SSSD and nslcd (SSSD's paged enumeration, nslcd's Password Modify); the daemons
//! themselves run in `nss_pam.rs`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{Settings, TestServer, ROOT_DN, ROOT_PASSWORD, SUFFIX};

/// Users generated for the enumeration item: more than SSSD's page size (1000) and than the
/// default size limit (500), as in the issue.
const USERS: usize = 2000;
const PYTHON: &str = "/usr/bin/python3";
const DEBIAN_SCHEMA_DIRECTORY: &str = "/etc/ldap/schema";
/// Debian's schema files a deployment adds to slapd's core/cosine/inetorgperson base (nis.schema
/// is swapped for rfc2307bis, as SSSD/nslcd deployments do).
const DEBIAN_SCHEMA_FILES: &[&str] = &[
    "collective",
    "corba",
    "dsee",
    "duaconf",
    "dyngroup",
    "java",
    "misc",
    "msuser",
    "namedobject",
    "openldap",
    "pmi",
];

fn clients_directory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Why the clients cannot run here, if they cannot (scripts/test.sh installs all of it).
fn missing_prerequisite() -> Option<String> {
    let modules = Command::new(PYTHON)
        .args(["-c", "import ldap, ldap3"])
        .output();
    if !modules.is_ok_and(|output| output.status.success()) {
        return Some(format!(
            "{PYTHON} lacks python-ldap or ldap3 (apt-get install python3-ldap python3-ldap3)"
        ));
    }
    if !Path::new(DEBIAN_SCHEMA_DIRECTORY)
        .join("msuser.schema")
        .exists()
    {
        return Some(format!(
            "{DEBIAN_SCHEMA_DIRECTORY} lacks Debian's schema files (apt-get install slapd)"
        ));
    }
    None
}

/// The directory every script starts from: units, a helpdesk group, a service account and
/// `USERS` POSIX users. Scripts add what their item needs.
fn dataset() -> String {
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=people,{SUFFIX}\nobjectClass: organizationalUnit\nou: people\n\n\
         dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n\n\
         dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services\n\n\
         dn: uid=sssd,ou=services,{SUFFIX}\nobjectClass: account\nobjectClass: simpleSecurityObject\n\
         uid: sssd\nuserPassword: sssd-secret\n\n\
         dn: uid=helper,ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: helper\ncn: Help Er\n\
         sn: Er\nuserPassword: helper-secret\n\n\
         dn: cn=helpdesk,ou=groups,{SUFFIX}\nobjectClass: groupOfNames\ncn: helpdesk\n\
         member: uid=helper,ou=people,{SUFFIX}\n"
    );
    for index in 0..USERS {
        ldif += &format!(
            "\ndn: uid=user{index:04},ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\n\
             objectClass: posixAccount\nuid: user{index:04}\ncn: User {index}\nsn: {index}\n\
             uidNumber: {}\ngidNumber: 10000\nhomeDirectory: /home/user{index:04}\n\
             userPassword: pw-user{index:04}\n",
            10000 + index
        );
    }
    ldif
}

/// `[database]` lines and the access and limits tables of the deployment under test.
fn database_settings() -> String {
    let mut files: Vec<String> = DEBIAN_SCHEMA_FILES
        .iter()
        .map(|name| format!("\"{DEBIAN_SCHEMA_DIRECTORY}/{name}.schema\""))
        .collect();
    let rfc2307bis = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schema/tests/fixtures/rfc2307bis_style.schema");
    files.push(format!("\"{}\"", rfc2307bis.display()));
    format!(
        "schema_files = [{}]\n\n\
         [[access]]\nto = {{ attrs = [\"userPassword\"] }}\n\
         by = [ {{ who = \"self\", access = \"write\" }}, \
         {{ who = \"group=cn=helpdesk,ou=groups,{SUFFIX}\", access = \"write\" }}, \
         {{ who = \"*\", access = \"auth\" }} ]\n\n\
         [[access]]\nto = {{}}\nby = [ {{ who = \"*\", access = \"read\" }} ]\n\n\
         [[limits]]\nwho = \"dn=uid=sssd,ou=services,{SUFFIX}\"\nsize = \"unlimited\"\n\
         paged_total = \"unlimited\"\n",
        files.join(", ")
    )
}

/// Runs one client script; its output when it fails.
fn run_script(server: &TestServer, ldapi: &Path, script: &Path) -> Result<(), String> {
    let output = Command::new(PYTHON)
        .arg(script)
        .env("PYTHONPATH", clients_directory())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("LMDIR_URL", format!("ldap://127.0.0.1:{}", server.port))
        .env("LMDIR_LDAPI_PATH", ldapi)
        .env("LMDIR_BASE", SUFFIX)
        .env("LMDIR_ROOT_DN", ROOT_DN)
        .env("LMDIR_ROOT_PASSWORD", ROOT_PASSWORD)
        .env("LMDIR_USERS", USERS.to_string())
        .output()
        .map_err(|error| format!("{}: {error}", script.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} ({}):\n{}{}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[test]
fn python_ldap_and_ldap3_clients_work_for_every_issue_10_item() {
    if let Some(reason) = missing_prerequisite() {
        if std::env::var_os("CI").is_some() {
            panic!("{reason}");
        }
        eprintln!("SKIPPING the client tests: {reason}");
        return;
    }
    // The socket's directory is traversable by others: the ldapi item connects as nobody too.
    let socket_directory = tempfile::tempdir().expect("socket directory");
    std::fs::set_permissions(
        socket_directory.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("opening the socket directory");
    let ldapi = socket_directory.path().join("ldapi");
    let database = database_settings();
    let mut server = TestServer::prepare_with(
        &Settings {
            listen_extra: vec![format!("ldapi://{}", ldapi.display())],
            server: "size_limit = 500",
            database: &database,
        },
        0,
    );
    let ldif_path = server.directory.path().join("clients.ldif");
    std::fs::write(&ldif_path, dataset()).expect("writing the data");
    let load = server.run_command(&["load".as_ref(), ldif_path.as_os_str()]);
    assert!(
        load.status.success(),
        "lmdir load: {}",
        String::from_utf8_lossy(&load.stderr)
    );
    server.start();

    let mut scripts: Vec<PathBuf> = std::fs::read_dir(clients_directory())
        .expect("tests/clients")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("item") && name.ends_with(".py"))
        })
        .collect();
    scripts.sort();
    assert_eq!(
        scripts.len(),
        8,
        "one script per numbered item: {scripts:?}"
    );
    let failures: Vec<String> = scripts
        .iter()
        .filter_map(|script| run_script(&server, &ldapi, script).err())
        .collect();
    server.assert_running("after the client scripts");
    let logs = server.logs();
    assert!(
        !logs.contains("Unsupported control"),
        "a supported control was logged as unsupported:\n{logs}"
    );
    assert!(
        failures.is_empty(),
        "{} of {} client scripts failed:\n{}\nserver log:\n{logs}",
        failures.len(),
        scripts.len(),
        failures.join("\n")
    );
}
