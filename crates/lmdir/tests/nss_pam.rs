//! The NSS/PAM clients of issue 13 against lmdir's password policy, and against slapd's ppolicy
//! overlay on the same data as the reference: nslcd with libnss-ldapd and pam_ldap (Debian's
//! nss-pam-ldapd), then SSSD's LDAP provider with pam_sss. `getent` reads the LDAP users and
//! group; `pamtester` logs in with the right password, inside the expiry warning window, past
//! pwdMaxAge (a grace login), after three wrong passwords, and after an administrator's reset.
//! What each client shows must be what it shows with slapd (docs/compatibility.md).
//!
//! The daemons read fixed paths (/etc/nslcd.conf, /run/nslcd; /etc/sssd, /var/lib/sss) and
//! getent and pamtester find them through /etc/nsswitch.conf and /etc/pam.d:
//! `tests/nss_pam/session.sh` runs in a private mount (and pid) namespace where those paths are
//! bind mounts of the test's own files, so the host's configuration is never touched and the
//! daemon dies with the namespace.
//!
//! No step waits for time to pass: the rootdn writes the past into pwdChangedTime with Relax.
//!
//! Issue 22: both clients also resolve a posixGroup of 100,000 memberUid values (`getent
//! group`), with the same member list as against slapd.

use crate::conformance;

use conformance::{Extra, Pair, Setup, ROOT_DN, ROOT_PASSWORD, SUFFIX};
use ldap3::controls::RawControl;
use ldap3::{LdapConn, Mod, Scope, SearchEntry};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const RELAX_OID: &str = "1.3.6.1.4.1.4203.666.5.12";
/// The PAM service the test's own /etc/pam.d holds (the client's module for every stack).
const SERVICE: &str = "lmdir-nss-test";
const DAY_SECONDS: u64 = 86_400;
const MAX_AGE_SECONDS: u64 = 30 * DAY_SECONDS;
const EXPIRE_WARNING_SECONDS: u64 = 7 * DAY_SECONDS;
/// alice's password was set this long before the test: 3.5 days before it expires, inside the
/// warning window, so nslcd's whole-days message reads 3 whatever the seconds the test takes.
const WARNED_AGE_SECONDS: u64 = MAX_AGE_SECONDS - 3 * DAY_SECONDS - DAY_SECONDS / 2;
/// erin's password was set this long before the test: past pwdMaxAge, so her logins are grace
/// logins.
const EXPIRED_AGE_SECONDS: u64 = 2 * MAX_AGE_SECONDS;
const GRACE_LOGINS: u32 = 2;
/// What nslcd (pam_ldap) and SSSD (pam_sss) show for alice: whole days left.
const NSLCD_WARNING: &str = "Password will expire in 3 days";
const SSSD_WARNING: &str = "Your password will expire in 3 day(s).";
/// Hang guard for one whole session (daemon start, every step, stop); never reached normally.
const SESSION_SECONDS_MAX: u64 = 60;
/// Where the PAM and NSS modules are looked for (they live in the multiarch subdirectory).
const LIBRARY_DIRECTORIES: &[&str] = &["/lib", "/usr/lib", "/lib64", "/usr/lib64"];

/// A user: uid, uidNumber, login shell, password.
const USERS: &[(&str, u32, &str, &str)] = &[
    ("alice", 20001, "/bin/bash", "alice-password"),
    ("bob", 20002, "/bin/sh", "bob-password"),
    ("carol", 20003, "/bin/bash", "carol-password"),
    ("dave", 20004, "/bin/bash", "dave-password"),
    ("erin", 20005, "/bin/bash", "erin-password"),
];
const GROUP: &str = "ldapstaff";
const GROUP_NUMBER: u32 = 20000;
const RESET_PASSWORD: &str = "given-by-admin";
const CHOSEN_PASSWORD: &str = "chosen-by-carol";

fn ldif() -> String {
    let mut text = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=policies,{SUFFIX}\nobjectClass: organizationalUnit\nou: policies\n\n\
         dn: ou=people,{SUFFIX}\nobjectClass: organizationalUnit\nou: people\n\n\
         dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n\n\
         dn: cn=default,ou=policies,{SUFFIX}\nobjectClass: organizationalRole\n\
         objectClass: pwdPolicy\ncn: default\npwdAttribute: userPassword\npwdMaxFailure: 3\n\
         pwdLockout: TRUE\npwdLockoutDuration: 3600\npwdMaxAge: {MAX_AGE_SECONDS}\n\
         pwdExpireWarning: {EXPIRE_WARNING_SECONDS}\npwdGraceAuthNLimit: {GRACE_LOGINS}\n\
         pwdMustChange: TRUE\n\n"
    );
    for (uid, number, shell, password) in USERS {
        text += &format!(
            "dn: uid={uid},ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\n\
             objectClass: posixAccount\nuid: {uid}\ncn: User {uid}\nsn: {uid}\n\
             uidNumber: {number}\ngidNumber: {GROUP_NUMBER}\nhomeDirectory: /home/{uid}\n\
             loginShell: {shell}\nuserPassword: {password}\n\n"
        );
    }
    text += &format!(
        "dn: cn={GROUP},ou=groups,{SUFFIX}\nobjectClass: posixGroup\ncn: {GROUP}\n\
         gidNumber: {GROUP_NUMBER}\nmemberUid: alice\nmemberUid: bob\n"
    );
    text
}

/// The ppolicy overlay on slapd (with `ppolicy_use_lockout`, as lmdir always answers a locked
/// account; docs/compatibility.md), the same default policy on lmdir.
fn extra() -> Extra<'static> {
    Extra {
        slapd_global: "moduleload ppolicy.la\n",
        slapd_database: "overlay ppolicy\n\
             ppolicy_default \"cn=default,ou=policies,dc=example,dc=com\"\n\
             ppolicy_use_lockout\n",
        lmdir_server: "",
        lmdir_database: "password_policy_default = \"cn=default,ou=policies,dc=example,dc=com\"\n",
    }
}

fn library_exists(relative: &str) -> bool {
    LIBRARY_DIRECTORIES.iter().any(|directory| {
        let Ok(entries) = std::fs::read_dir(directory) else {
            return false;
        };
        Path::new(directory).join(relative).exists()
            || entries
                .flatten()
                .any(|entry| entry.path().join(relative).exists())
    })
}

/// Why the test cannot run here, if it cannot (scripts/test.sh installs the packages; the test
/// environment runs as root, which a private mount namespace needs).
fn missing_prerequisite() -> Option<String> {
    if let Err(reason) = conformance::tools_available() {
        return Some(reason);
    }
    let packages = "apt-get install nslcd libnss-ldapd libpam-ldapd pamtester sssd-ldap";
    for tool in [
        "/usr/sbin/nslcd",
        "/usr/sbin/sssd",
        "/usr/bin/pamtester",
        "/usr/bin/setpriv",
        "/usr/bin/getent",
        "/etc/sssd",
        "/var/lib/sss",
        "/var/log/sssd",
    ] {
        if !Path::new(tool).exists() {
            return Some(format!("{tool} is not installed ({packages})"));
        }
    }
    for library in [
        "security/pam_ldap.so",
        "libnss_ldap.so.2",
        "security/pam_sss.so",
        "libnss_sss.so.2",
    ] {
        if !library_exists(library) {
            return Some(format!("{library} is not installed ({packages})"));
        }
    }
    let namespace = Command::new("unshare")
        .args(["--mount", "--pid", "--fork", "true"])
        .output();
    if !namespace.is_ok_and(|output| output.status.success()) {
        return Some("unshare --mount --pid cannot run here (needs root)".to_string());
    }
    None
}

fn user_dn(uid: &str) -> String {
    format!("uid={uid},ou=people,{SUFFIX}")
}

fn root(port: u16) -> LdapConn {
    let mut connection = LdapConn::new(&format!("ldap://127.0.0.1:{port}")).expect("connect");
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .expect("bind")
        .success()
        .expect("the rootdn binds");
    connection
}

/// The rootdn writes policy state (NO-USER-MODIFICATION attributes: with Relax).
fn set_state(port: u16, uid: &str, changes: Vec<Mod<&str>>) {
    root(port)
        .with_controls(RawControl {
            ctype: RELAX_OID.to_string(),
            crit: true,
            val: None,
        })
        .modify(&user_dn(uid), changes)
        .expect("modify")
        .success()
        .expect("state written");
}

/// pwdChangedTime `age_seconds` ago.
fn set_password_age(port: u16, uid: &str, age_seconds: u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let changed_at = UNIX_EPOCH + Duration::from_secs(now - age_seconds);
    let changed = String::from_utf8(lmdir_store::timestamp_value(changed_at)).expect("ASCII");
    set_state(
        port,
        uid,
        vec![Mod::Replace(
            "pwdChangedTime",
            HashSet::from([changed.as_str()]),
        )],
    );
}

/// alice's password set 26.5 days ago (inside the warning window), erin's past pwdMaxAge,
/// carol's reset by the administrator (pwdReset under pwdMustChange).
fn prepare_policy_state(port: u16) {
    set_password_age(port, "alice", WARNED_AGE_SECONDS);
    set_password_age(port, "erin", EXPIRED_AGE_SECONDS);
    reset_carol(port);
}

/// The administrator sets carol's password (Password Modify without the old one): pwdReset.
fn reset_carol(port: u16) {
    root(port)
        .extended(ldap3::exop::PasswordModify {
            user_id: Some(&user_dn("carol")),
            old_pass: None,
            new_pass: Some(RESET_PASSWORD),
        })
        .expect("exop")
        .1
        .success()
        .expect("administrator reset");
}

/// An operational attribute of a user as the rootdn reads it.
fn state_of(port: u16, uid: &str, attribute: &str) -> Vec<String> {
    let (entries, _) = root(port)
        .search(
            &user_dn(uid),
            Scope::Base,
            "(objectClass=*)",
            vec![attribute],
        )
        .expect("search")
        .success()
        .expect("the user is readable");
    let entry = SearchEntry::construct(entries.into_iter().next().expect("the user"));
    entry
        .attrs
        .into_iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(attribute))
        .map(|(_, values)| values)
        .unwrap_or_default()
}

fn password_of(uid: &str) -> &'static str {
    USERS
        .iter()
        .find(|user| user.0 == uid)
        .map(|user| user.3)
        .expect("a known user")
}

/// One step of a session: its name, what it reads on standard input, the command.
type Step = (String, String, String);

fn login(name: &str, uid: &str, password: &str, operations: &str) -> Step {
    (
        name.to_string(),
        password.to_string(),
        format!("pamtester {SERVICE} {uid} {operations}"),
    )
}

fn lookup(name: &str, arguments: &str) -> Step {
    (
        name.to_string(),
        String::new(),
        format!("getent {arguments}"),
    )
}

/// Lookups, a plain login, one inside the warning window, three wrong passwords then the right
/// one, a grace login past pwdMaxAge, and a login after an administrator's reset.
fn policy_steps() -> Vec<Step> {
    let mut steps = vec![
        lookup("passwd", "passwd alice dave"),
        lookup("passwd_by_number", "passwd 20002"),
        lookup("group", &format!("group {GROUP}")),
        login(
            "plain_login",
            "dave",
            password_of("dave"),
            "authenticate acct_mgmt",
        ),
        login(
            "warned_login",
            "alice",
            password_of("alice"),
            "authenticate acct_mgmt",
        ),
    ];
    for attempt in 1..=3 {
        steps.push(login(
            &format!("wrong_{attempt}"),
            "bob",
            "not-the-password",
            "authenticate",
        ));
    }
    steps.push(login(
        "locked_login",
        "bob",
        password_of("bob"),
        "authenticate acct_mgmt",
    ));
    steps.push(login(
        "grace_login",
        "erin",
        password_of("erin"),
        "authenticate acct_mgmt",
    ));
    steps.push(login(
        "reset_login",
        "carol",
        RESET_PASSWORD,
        "authenticate acct_mgmt",
    ));
    steps
}

/// After the reset: carol changes her password through PAM as herself (pamtester under her uid,
/// as `passwd` would run: as root pam_ldap would ask for the LDAP administrator's password),
/// then logs in with the new one without any demand.
fn change_steps() -> Vec<Step> {
    let carol = USERS.iter().find(|user| user.0 == "carol").expect("carol");
    vec![
        (
            "password_change".to_string(),
            format!("{RESET_PASSWORD}\\n{CHOSEN_PASSWORD}\\n{CHOSEN_PASSWORD}"),
            format!(
                "setpriv --reuid={} --regid={GROUP_NUMBER} --clear-groups \
                 pamtester {SERVICE} carol chauthtok",
                carol.1
            ),
        ),
        login(
            "login_after_change",
            "carol",
            CHOSEN_PASSWORD,
            "authenticate acct_mgmt",
        ),
    ]
}

/// The NSS/PAM client under test, as its config file configures it.
#[derive(Clone, Copy)]
enum Client {
    /// nslcd with these nslcd.conf lines added to the plain config (which keeps Debian's
    /// default `pam_authc_search BASE`: after the user's bind, nslcd reads the user's own entry
    /// on that connection).
    Nslcd(&'static str),
    /// SSSD's LDAP provider, without a credential cache, so every login reaches the server, and
    /// without TLS (loopback): SSSD then refuses every login unless
    /// `ldap_auth_disable_tls_never_use_in_production` is set, although its config validator
    /// calls that option unknown.
    Sssd,
}

impl Client {
    fn daemon(self) -> &'static str {
        match self {
            Client::Nslcd(_) => "nslcd",
            Client::Sssd => "sssd",
        }
    }

    /// The nsswitch.conf source and the PAM module of the client.
    fn modules(self) -> (&'static str, &'static str) {
        match self {
            Client::Nslcd(_) => ("ldap", "pam_ldap.so"),
            Client::Sssd => ("sss", "pam_sss.so"),
        }
    }

    /// The client's config file: name and text, for a server on `port`.
    fn config(self, port: u16) -> (&'static str, String) {
        match self {
            Client::Nslcd(extra) => (
                "nslcd.conf",
                format!(
                    "uid nslcd\ngid nslcd\nuri ldap://127.0.0.1:{port}/\nbase {SUFFIX}\n\
                     pam_authc_ppolicy yes\n{extra}"
                ),
            ),
            Client::Sssd => (
                "sssd.conf",
                format!(
                    "[sssd]\nservices = nss, pam\ndomains = LDAP\n\n[nss]\n\n[pam]\n\n\
                     [domain/LDAP]\nid_provider = ldap\nauth_provider = ldap\n\
                     access_provider = permit\nldap_uri = ldap://127.0.0.1:{port}\n\
                     ldap_search_base = {SUFFIX}\nldap_schema = rfc2307\n\
                     ldap_id_use_start_tls = false\n\
                     ldap_auth_disable_tls_never_use_in_production = true\n\
                     cache_credentials = false\n"
                ),
            ),
        }
    }
}

/// What one session showed: each step's exit code and output, and the daemon's log.
struct Transcript {
    steps: BTreeMap<String, (i32, String)>,
    daemon_log: String,
}

impl Transcript {
    fn step(&self, name: &str) -> &(i32, String) {
        self.steps
            .get(name)
            .unwrap_or_else(|| panic!("step {name} did not run:\n{}", self.daemon_log))
    }

    /// The lines where nslcd reports the password policy response and what it concluded (the
    /// connection ids removed): what the two servers must say alike. timeBeforeExpiration's
    /// seconds depend on the instant of the bind, so they are kept as the whole days nslcd
    /// shows the user (the test's half-day margin keeps that number fixed).
    fn nslcd_policy_lines(&self) -> Vec<String> {
        self.daemon_log
            .lines()
            .filter(|line| {
                line.contains("PASSWORDPOLICYRESPONSE")
                    || line.contains(": Account locked")
                    || line.contains(": Password must be changed")
            })
            .map(|line| {
                let line = line.split_once("> ").map_or(line, |(_, rest)| rest);
                match line
                    .split_once("password will expire in ")
                    .and_then(|(_, rest)| rest.strip_suffix(" seconds)"))
                    .and_then(|seconds| seconds.parse::<u64>().ok())
                {
                    Some(seconds) => {
                        format!("expiry warning: {} whole days", seconds / DAY_SECONDS)
                    }
                    None => line.to_string(),
                }
            })
            .collect()
    }
}

fn session_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nss_pam/session.sh")
}

/// Writes the client's config, nsswitch.conf, pam.d and the steps for a server on `port`.
fn write_session_files(directory: &Path, client: Client, port: u16, steps: &[Step]) {
    let (config_name, config) = client.config(port);
    std::fs::write(directory.join(config_name), config).expect("the client's config");
    let (source, module) = client.modules();
    std::fs::write(
        directory.join("nsswitch.conf"),
        format!("passwd: files {source}\ngroup: files {source}\nshadow: files {source}\n"),
    )
    .expect("nsswitch.conf");
    let pam = directory.join("pam.d");
    std::fs::create_dir_all(&pam).expect("pam.d");
    std::fs::write(
        pam.join(SERVICE),
        format!(
            "auth required {module}\naccount required {module}\n\
             password required {module}\nsession required {module}\n"
        ),
    )
    .expect("the PAM service");
    let steps: String = steps
        .iter()
        .map(|(name, input, command)| format!("{name}|{input}|{command}\n"))
        .collect();
    std::fs::write(directory.join("steps"), steps).expect("steps");
}

/// Runs `steps` through `client` pointed at the server on `port`.
fn run_session(client: Client, port: u16, steps: &[Step]) -> Transcript {
    let directory = tempfile::tempdir().expect("session directory");
    write_session_files(directory.path(), client, port, steps);
    let output = Command::new("timeout")
        .args(["--kill-after=5", &SESSION_SECONDS_MAX.to_string()])
        .args([
            "unshare",
            "--mount",
            "--pid",
            "--fork",
            "--kill-child",
            "--propagation",
            "private",
            "sh",
        ])
        .arg(session_script())
        .arg(client.daemon())
        .arg(directory.path())
        .output()
        .expect("running unshare");
    let daemon_log =
        std::fs::read_to_string(directory.path().join("daemon.log")).unwrap_or_default();
    assert!(
        output.status.success(),
        "the {} session failed ({}):\n{}{}\nlog:\n{daemon_log}",
        client.daemon(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let out = directory.path().join("out");
    let steps = steps
        .iter()
        .filter_map(|(name, _, _)| {
            let code = std::fs::read_to_string(out.join(format!("{name}.rc"))).ok()?;
            let text = std::fs::read_to_string(out.join(name)).ok()?;
            Some((
                name.clone(),
                (code.trim().parse().expect("an exit code"), text),
            ))
        })
        .collect();
    Transcript { steps, daemon_log }
}

/// A client's own texts for the policy's outcomes.
struct Shown {
    /// Inside pwdExpireWarning.
    warning: &'static str,
    /// The first grace login past pwdMaxAge.
    grace: &'static str,
    /// All of these for the login after an administrator's reset.
    reset: &'static [&'static str],
}

/// What the client must show against either server after `policy_steps`: the lookups, its
/// `shown` texts, and refusals after the wrong passwords and while locked.
fn assert_shown(server: &str, transcript: &Transcript, shown: &Shown) {
    let context = |name: &str| {
        format!(
            "{server}, step {name}: {:?}\nlog:\n{}",
            transcript.step(name),
            transcript.daemon_log
        )
    };
    let (code, text) = transcript.step("passwd");
    assert!(
        *code == 0
            && text.contains("alice:*:20001:20000:User alice:/home/alice:/bin/bash")
            && text.contains("dave:*:20004:20000:User dave:/home/dave:/bin/bash"),
        "{}",
        context("passwd")
    );
    let (code, text) = transcript.step("passwd_by_number");
    assert!(
        *code == 0 && text.contains("bob:*:20002:20000:User bob:/home/bob:/bin/sh"),
        "{}",
        context("passwd_by_number")
    );
    // The clients list memberUid values in no particular order.
    let (code, text) = transcript.step("group");
    let members = text
        .trim()
        .strip_prefix(&format!("{GROUP}:*:{GROUP_NUMBER}:"))
        .map(|members| members.split(',').collect::<HashSet<_>>());
    assert!(
        *code == 0 && members == Some(HashSet::from(["alice", "bob"])),
        "{}",
        context("group")
    );
    let (code, text) = transcript.step("plain_login");
    assert!(
        *code == 0 && text.contains("successfully authenticated") && !text.contains("expire"),
        "{}",
        context("plain_login")
    );
    let (code, text) = transcript.step("warned_login");
    assert!(
        *code == 0 && text.contains(shown.warning),
        "{}",
        context("warned_login")
    );
    for name in ["wrong_1", "wrong_2", "wrong_3", "locked_login"] {
        let (code, text) = transcript.step(name);
        assert!(
            *code != 0 && text.contains("Authentication failure"),
            "{}",
            context(name)
        );
    }
    let (code, text) = transcript.step("grace_login");
    assert!(
        *code == 0 && text.contains(shown.grace),
        "{}",
        context("grace_login")
    );
    let (code, text) = transcript.step("reset_login");
    assert!(
        *code != 0 && shown.reset.iter().all(|part| text.contains(part)),
        "{}",
        context("reset_login")
    );
}

/// nslcd as Debian configures it: the warning, refusals for the reset user's login and password
/// change (nslcd's search of the user's own entry is refused by the reset restriction), and
/// nslcd's log naming the lockout and the reset from the response control.
fn assert_nslcd_shown(server: &str, transcript: &Transcript) {
    assert_shown(
        server,
        transcript,
        &Shown {
            warning: NSLCD_WARNING,
            grace: "Password expired, 1 grace logins left",
            reset: &["Authentication failure"],
        },
    );
    let (code, text) = transcript.step("password_change_refused");
    assert!(
        *code != 0 && text.contains("Authentication failure"),
        "{server}: {text:?} ({code})\nnslcd:\n{}",
        transcript.daemon_log
    );
    let policy = transcript.nslcd_policy_lines();
    for line in [
        format!("{}: Account locked", user_dn("bob")),
        format!("{}: Password must be changed", user_dn("carol")),
    ] {
        assert!(
            policy.contains(&line),
            "{server}: nslcd did not log {line:?}:\n{}",
            transcript.daemon_log
        );
    }
}

/// With `pam_authc_search NONE` nslcd trusts the bind alone, so the reset user authenticates
/// and pam_ldap's account stage demands a new password (PAM_NEW_AUTHTOK_REQD) with nslcd's text
/// for changeAfterReset.
fn assert_nslcd_change_required(server: &str, transcript: &Transcript) {
    let (code, text) = transcript.step("reset_login");
    assert!(
        *code != 0
            && text.contains("successfully authenticated")
            && text.contains("Password must be changed")
            && text.contains("Authentication token is no longer valid; new one required"),
        "{server}: {text:?} ({code})\nnslcd:\n{}",
        transcript.daemon_log
    );
}

/// The reset user's change through PAM succeeded (the server cleared pwdReset), and the new
/// password logs in with no demand.
fn assert_changed(server: &str, port: u16, transcript: &Transcript) {
    for (name, shown) in [
        (
            "password_change",
            "authentication token altered successfully",
        ),
        ("login_after_change", "successfully authenticated"),
    ] {
        let (code, text) = transcript.step(name);
        assert!(
            *code == 0
                && text.contains(shown)
                && !text.contains("must")
                && !text.contains("xpired"),
            "{server}, step {name}: {text:?} ({code})\nlog:\n{}",
            transcript.daemon_log
        );
    }
    assert!(
        state_of(port, "carol", "pwdReset").is_empty(),
        "{server}: pwdReset is still set after carol's change"
    );
}

/// SSSD: its own texts for the warning and for the reset (PAM_NEW_AUTHTOK_REQD).
fn assert_sssd_shown(server: &str, transcript: &Transcript) {
    assert_shown(
        server,
        transcript,
        &Shown {
            warning: SSSD_WARNING,
            grace: "Your password has expired. You have 1 grace login(s) remaining.",
            reset: &[
                "successfully authenticated",
                "Password expired. Change your password now.",
                "Authentication token is no longer valid; new one required",
            ],
        },
    );
}

/// Between two clients: the rootdn unlocks bob as in OpenLDAP, by deleting pwdAccountLockedTime
/// (and the failure times, so the next client starts from none), gives erin her grace logins
/// back, and resets carol's password again (the client before changed it).
fn restore_policy_state(port: u16) {
    set_state(
        port,
        "bob",
        vec![
            Mod::Delete("pwdAccountLockedTime", HashSet::new()),
            Mod::Delete("pwdFailureTime", HashSet::new()),
        ],
    );
    set_state(
        port,
        "erin",
        vec![Mod::Delete("pwdGraceUseTime", HashSet::new())],
    );
    reset_carol(port);
}

fn assert_locked(server: &str, port: u16, client: &str) {
    assert_eq!(
        state_of(port, "bob", "pwdAccountLockedTime").len(),
        1,
        "{server}: bob is not locked after {client}'s wrong passwords"
    );
}

/// Every client's sessions against the server on `port`, in order: nslcd, nslcd without its
/// search, SSSD.
fn run_clients(server: &str, port: u16) -> Vec<Transcript> {
    prepare_policy_state(port);
    // With Debian's `pam_authc_search BASE`, the reset user cannot change the password through
    // PAM either: the check of the old one is the same refused read.
    let mut nslcd_steps = policy_steps();
    let mut refused_change = change_steps().remove(0);
    refused_change.0 = "password_change_refused".to_string();
    nslcd_steps.push(refused_change);
    let nslcd = run_session(Client::Nslcd(""), port, &nslcd_steps);
    assert_nslcd_shown(server, &nslcd);
    assert_locked(server, port, "nslcd");
    let mut reset_steps: Vec<Step> = policy_steps()
        .into_iter()
        .filter(|step| step.0 == "reset_login")
        .collect();
    reset_steps.extend(change_steps());
    let no_search = run_session(Client::Nslcd("pam_authc_search NONE\n"), port, &reset_steps);
    assert_nslcd_change_required(server, &no_search);
    assert_changed(server, port, &no_search);
    restore_policy_state(port);
    let mut sssd_steps = policy_steps();
    sssd_steps.extend(change_steps());
    let sssd = run_session(Client::Sssd, port, &sssd_steps);
    assert_sssd_shown(server, &sssd);
    assert_changed(server, port, &sssd);
    assert_locked(server, port, "SSSD");
    vec![nslcd, no_search, sssd]
}

#[test]
fn nslcd_pam_ldap_and_sssd_show_the_password_policy() {
    if let Some(reason) = missing_prerequisite() {
        if std::env::var_os("CI").is_some() {
            panic!("{reason}");
        }
        eprintln!("SKIPPING the nslcd/SSSD test: {reason}");
        return;
    }
    let pair = Pair::start_configured(&ldif(), Setup::Plain, &extra());
    let slapd = run_clients("slapd", pair.openldap_port);
    let lmdir = run_clients("lmdir", pair.lmdir_port);
    for (theirs, ours) in slapd.iter().zip(&lmdir) {
        assert_eq!(
            theirs.steps, ours.steps,
            "getent/pamtester show something else with lmdir than with slapd"
        );
    }
    assert_eq!(
        slapd[0].nslcd_policy_lines(),
        lmdir[0].nslcd_policy_lines(),
        "nslcd reads lmdir's password policy responses otherwise than slapd's"
    );
}

/// Members of the large group (issue 22: SSSD or nslcd resolves a 100,000-member group).
const LARGE_GROUP_MEMBERS: usize = 100_000;

/// One posixGroup of `LARGE_GROUP_MEMBERS` memberUid values.
fn large_group_ldif() -> String {
    let mut text = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n\n\
         dn: cn=bigstaff,ou=groups,{SUFFIX}\nobjectClass: posixGroup\ncn: bigstaff\n\
         gidNumber: 30000\n"
    );
    for member in 0..LARGE_GROUP_MEMBERS {
        text += &format!("memberUid: m{member:06}\n");
    }
    text
}

/// `getent group bigstaff` through the client: the member count and a digest of the sorted
/// member list (the list itself is 1 MB).
fn large_group_steps() -> Vec<Step> {
    let members = "getent group bigstaff | cut -d: -f4 | tr ',' '\\n'";
    let step = |name: &str, command: String| (name.to_string(), String::new(), command);
    vec![
        step("large_group_count", format!("{members} | wc -l")),
        step("large_group_digest", format!("{members} | sort | md5sum")),
        step(
            "large_group_gid",
            "getent group bigstaff | cut -d: -f1-3".to_string(),
        ),
    ]
}

#[test]
fn nslcd_and_sssd_resolve_a_group_of_100000_members_as_with_slapd() {
    if let Some(reason) = missing_prerequisite() {
        if std::env::var_os("CI").is_some() {
            panic!("{reason}");
        }
        eprintln!("SKIPPING the large group test: {reason}");
        return;
    }
    let pair = Pair::start(&large_group_ldif());
    let sessions: Vec<Transcript> = [pair.openldap_port, pair.lmdir_port]
        .into_iter()
        .map(|port| run_session(Client::Nslcd(""), port, &large_group_steps()))
        .collect();
    let (slapd, lmdir) = (&sessions[0], &sessions[1]);
    assert_eq!(
        lmdir.step("large_group_count"),
        &(0, format!("{LARGE_GROUP_MEMBERS}\n")),
        "{}",
        lmdir.daemon_log
    );
    assert_eq!(lmdir.step("large_group_gid").1, "bigstaff:*:30000\n");
    assert_eq!(
        slapd.steps, lmdir.steps,
        "getent shows another group with lmdir"
    );
}
