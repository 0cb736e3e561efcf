//! python-ldap (`ldap.controls.ppolicy`, Debian's python3-ldap) decoding lmdir's password policy
//! response control: lockout, expiry warning, grace login and changeAfterReset, through
//! tests/clients/ppolicy.py against the real binary. The accounts' past (pwdChangedTime) is
//! written by the rootdn with Relax: nothing waits for time to pass.

use crate::support;

use ldap3::controls::RawControl;
use ldap3::{LdapConn, Mod};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};
use support::{TestServer, ROOT_DN, ROOT_PASSWORD, SUFFIX};

const PYTHON: &str = "/usr/bin/python3";
const RELAX_OID: &str = "1.3.6.1.4.1.4203.666.5.12";
const PASSWORD: &str = "first-password";
const DAY_SECONDS: u64 = 86_400;

fn set<'a>(items: &[&'a str]) -> HashSet<&'a str> {
    items.iter().copied().collect()
}

fn people() -> String {
    format!("ou=people,{SUFFIX}")
}

fn user_dn(uid: &str) -> String {
    format!("uid={uid},{}", people())
}

fn ago(seconds: u64) -> String {
    let at = SystemTime::now() - Duration::from_secs(seconds);
    String::from_utf8(lmdir_store::timestamp_value(at)).expect("ASCII")
}

fn python_ldap_available() -> Result<(), String> {
    let found = Command::new(PYTHON)
        .args(["-c", "import ldap.controls.ppolicy"])
        .status()
        .is_ok_and(|status| status.success());
    if found {
        Ok(())
    } else {
        Err("python3-ldap is not installed (scripts/test.sh installs it)".to_string())
    }
}

/// The suffix, one policy with lockout, expiry, grace logins and must-change, and four users.
fn populate(admin: &mut LdapConn) {
    let add = |admin: &mut LdapConn, dn: &str, attributes: Vec<(&str, HashSet<&str>)>| {
        admin
            .add(dn, attributes)
            .expect("add")
            .success()
            .unwrap_or_else(|error| panic!("adding {dn}: {error}"));
    };
    add(
        admin,
        SUFFIX,
        vec![
            ("objectClass", set(&["dcObject", "organization"])),
            ("dc", set(&["example"])),
            ("o", set(&["Example"])),
        ],
    );
    for ou in ["policies", "people"] {
        add(
            admin,
            &format!("ou={ou},{SUFFIX}"),
            vec![
                ("objectClass", set(&["organizationalUnit"])),
                ("ou", set(&[ou])),
            ],
        );
    }
    let max_age = DAY_SECONDS.to_string();
    add(
        admin,
        &format!("cn=default,ou=policies,{SUFFIX}"),
        vec![
            ("objectClass", set(&["organizationalRole", "pwdPolicy"])),
            ("cn", set(&["default"])),
            ("pwdAttribute", set(&["userPassword"])),
            ("pwdMaxFailure", set(&["3"])),
            ("pwdLockout", set(&["TRUE"])),
            ("pwdMaxAge", set(&[max_age.as_str()])),
            ("pwdExpireWarning", set(&["7200"])),
            ("pwdGraceAuthNLimit", set(&["2"])),
            ("pwdMustChange", set(&["TRUE"])),
        ],
    );
    for uid in ["locked", "warned", "graced", "reset"] {
        add(
            admin,
            &user_dn(uid),
            vec![
                ("objectClass", set(&["inetOrgPerson"])),
                ("uid", set(&[uid])),
                ("cn", set(&[uid])),
                ("sn", set(&[uid])),
                ("userPassword", set(&[PASSWORD])),
            ],
        );
    }
}

/// Writes each account's past: an hour before expiry, two days past it, an administrator reset.
fn set_the_past(admin: &mut LdapConn) {
    let relax = RawControl {
        ctype: RELAX_OID.to_string(),
        crit: true,
        val: None,
    };
    for (uid, age) in [("warned", DAY_SECONDS - 3600), ("graced", 2 * DAY_SECONDS)] {
        let changed = ago(age);
        admin
            .with_controls(relax.clone())
            .modify(
                &user_dn(uid),
                vec![Mod::Replace("pwdChangedTime", set(&[changed.as_str()]))],
            )
            .expect("modify")
            .success()
            .expect("pwdChangedTime written");
    }
    admin
        .modify(
            &user_dn("reset"),
            vec![Mod::Replace("userPassword", set(&["given-by-admin"]))],
        )
        .expect("modify")
        .success()
        .expect("administrator reset");
}

#[test]
fn python_ldap_decodes_the_password_policy_control() {
    if let Err(reason) = python_ldap_available() {
        if std::env::var_os("CI").is_some() {
            panic!("{reason}");
        }
        eprintln!("skipping: {reason}");
        return;
    }
    let mut server = TestServer::prepare("", 0);
    let mut config = std::fs::read_to_string(&server.config_path).expect("config");
    // [database] is the config's last table.
    config += &format!("password_policy_default = \"cn=default,ou=policies,{SUFFIX}\"\n");
    std::fs::write(&server.config_path, config).expect("config");
    server.start();
    let url = format!("ldap://127.0.0.1:{}", server.port);
    let mut admin = LdapConn::new(&url).expect("connect");
    admin
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("the rootdn binds");
    populate(&mut admin);
    set_the_past(&mut admin);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ppolicy.py");
    let output = Command::new(PYTHON)
        .arg(&script)
        .args([url.as_str(), people().as_str()])
        .output()
        .expect("running the python-ldap client");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let step = |name: &str| &results[name];
    let control = |name: &str, field: &str| step(name)["control"][field].clone();

    for attempt in 1..=3 {
        assert_eq!(step(&format!("wrong password {attempt}"))["result"], 49);
    }
    // accountLocked (1), invalidCredentials like slapd.
    assert_eq!(step("locked")["result"], 49, "{results}");
    assert_eq!(control("locked", "error"), 1, "{results}");
    // An hour before expiry (the warning window is two): seconds left as python-ldap reads them.
    assert_eq!(step("expiry warning")["result"], 0, "{results}");
    let left = control("expiry warning", "timeBeforeExpiration")
        .as_u64()
        .unwrap_or_else(|| panic!("no timeBeforeExpiration: {results}"));
    assert!((1..=3600).contains(&left), "{results}");
    // Expired with two grace logins: this one leaves one.
    assert_eq!(step("grace login")["result"], 0, "{results}");
    assert_eq!(
        control("grace login", "graceAuthNsRemaining"),
        1,
        "{results}"
    );
    // changeAfterReset (2), and the connection may do nothing but the change.
    assert_eq!(step("change after reset")["result"], 0, "{results}");
    assert_eq!(control("change after reset", "error"), 2, "{results}");
    assert_eq!(step("restricted search")["result"], 50, "{results}");
    server.assert_no_panic("after the python-ldap client");
}
