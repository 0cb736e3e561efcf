//! Access rules moved by `lmdir migrate`, against slapd: the same slapd.conf (or cn=config) rules
//! on a private slapd and, migrated, on an lmdir loaded with the same data; the same searches and
//! compares as anonymous, as users inside and outside the rules' subtrees and as group members;
//! the same answers. And what migrate must refuse: a rule it cannot translate without granting
//! more than slapd did (slapd shown to restrict, migrate shown to write nothing).

use crate::conformance;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use conformance::{answer, describe_difference, free_port, wait_until_up, Answer, SUFFIX};

const ROOT_DN: &str = conformance::ROOT_DN;
const ROOT_PASSWORD: &str = conformance::ROOT_PASSWORD;
const PASSWORD: &str = "userpw";
const PEOPLE: &str = "ou=People,dc=example,dc=com";
const STAFF: &str = "ou=Staff,ou=People,dc=example,dc=com";

fn person(uid: &str, parent: &str) -> String {
    format!(
        "dn: uid={uid},{parent}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n\
         title: title of {uid}\ntelephoneNumber: +1 555 0{}\ndescription: about {uid}\n\
         userPassword: {PASSWORD}\n\n",
        uid.len() * 111
    )
}

/// ann and bob one level below ou=People, cat two levels below (in ou=Staff), dan elsewhere;
/// groups whose class and member attribute differ from what their name suggests.
fn dataset() -> String {
    let mut ldif = format!(
        "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\n\
         dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: People\ndescription: all people\n\n\
         dn: {STAFF}\nobjectClass: organizationalUnit\nou: Staff\ndescription: the staff\n\
         telephoneNumber: +1 555 0999\n\n\
         dn: ou=Others,{SUFFIX}\nobjectClass: organizationalUnit\nou: Others\n\n\
         dn: ou=Groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: Groups\n\n"
    );
    ldif += &person("ann", PEOPLE);
    ldif += &person("bob", PEOPLE);
    ldif += &person("cat", STAFF);
    ldif += &person("dan", &format!("ou=Others,{SUFFIX}"));
    ldif += &format!(
        "dn: cn=mixed,ou=Groups,{SUFFIX}\nobjectClass: groupOfNames\nobjectClass: extensibleObject\n\
         cn: mixed\nmember: uid=ann,{PEOPLE}\nuniqueMember: uid=cat,{STAFF}\n\n\
         dn: cn=unique,ou=Groups,{SUFFIX}\nobjectClass: groupOfUniqueNames\n\
         objectClass: extensibleObject\ncn: unique\nuniqueMember: uid=bob,{PEOPLE}\n\
         uniqueMember: uid=dan,ou=Others,{SUFFIX}#'0101'B\n\
         member: uid=cat,{STAFF}\n\n\
         dn: cn=role,ou=Groups,{SUFFIX}\nobjectClass: organizationalRole\n\
         objectClass: extensibleObject\ncn: role\nmember: uid=dan,ou=Others,{SUFFIX}\n"
    );
    ldif
}

/// slapd.conf: Debian's schema, `global` rules, back-mdb on `root/openldap-db` with `rules`.
fn slapd_conf(root: &Path, global: &str, rules: &str) -> String {
    let mut text = String::new();
    for schema in ["core", "cosine", "inetorgperson", "nis"] {
        text += &format!("include /etc/ldap/schema/{schema}.schema\n");
    }
    text += &format!(
        "modulepath /usr/lib/ldap\nmoduleload back_mdb\npidfile {root}/slapd.pid\n\
         sizelimit unlimited\n{global}\n\
         database mdb\nsuffix \"{SUFFIX}\"\nrootdn \"{ROOT_DN}\"\nrootpw {ROOT_PASSWORD}\n\
         directory {root}/openldap-db\nmaxsize 1073741824\nindex objectClass eq\n{rules}",
        root = root.display()
    );
    text
}

use conformance::run_checked;

fn lmdir() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lmdir"))
}

/// `lmdir migrate --from <from> --out <out>` with `extra` arguments, not checked.
fn migrate(from: &Path, out: &Path, port: u16, extra: &[&str]) -> Output {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    lmdir()
        .arg("migrate")
        .arg("--from")
        .arg(from)
        .arg("--out")
        .arg(out)
        .arg("--directory")
        .arg(out.parent().unwrap().join("db"))
        .arg("--listen")
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(extra)
        .output()
        .unwrap()
}

/// A private slapd and, once `start_lmdir` ran, the lmdir migrated from its configuration.
struct Servers {
    root: tempfile::TempDir,
    slapd_port: u16,
    lmdir_port: u16,
    lmdir: Option<Child>,
    slapd: Option<Child>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        conformance::stop_children([self.lmdir.take(), self.slapd.take()]);
    }
}

impl Servers {
    /// slapd from `slapd.conf` with `rules`, loaded with `dataset()` by slapadd.
    fn slapd_conf(global: &str, rules: &str) -> (Servers, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("openldap-db")).unwrap();
        let conf = root.path().join("slapd.conf");
        std::fs::write(&conf, slapd_conf(root.path(), global, rules)).unwrap();
        let data = root.path().join("data.ldif");
        std::fs::write(&data, dataset()).unwrap();
        run_checked(
            Command::new("slapadd")
                .arg("-f")
                .arg(&conf)
                .arg("-l")
                .arg(&data),
        );
        let mut servers = Servers::new(root);
        servers.slapd = Some(conformance::start_slapd(&conf, servers.slapd_port, "stats"));
        (servers, conf)
    }

    /// slapd from a cn=config directory made by `slapadd -n0` of `slapd.conf`'s cn=config
    /// (`rules` in it) with the database's olcAccess values listed in reverse: the LDIF is
    /// returned, slapd put the values in their `{n}` order.
    fn cn_config_reversed(rules: &str) -> (Servers, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let path = |name: &str| root.path().join(name);
        std::fs::create_dir_all(path("openldap-db")).unwrap();
        std::fs::create_dir_all(path("made.d")).unwrap();
        std::fs::create_dir_all(path("slapd.d")).unwrap();
        std::fs::write(path("slapd.conf"), slapd_conf(root.path(), "", rules)).unwrap();
        std::fs::write(path("data.ldif"), dataset()).unwrap();
        let slaptest = Command::new("slaptest")
            .arg("-f")
            .arg(path("slapd.conf"))
            .arg("-F")
            .arg(path("made.d"))
            .output()
            .unwrap();
        assert!(slaptest.status.success() || path("made.d/cn=config.ldif").exists());
        let n0 = run_checked(
            Command::new("slapcat")
                .args(["-n0", "-F"])
                .arg(path("made.d")),
        );
        let reversed = reverse_access_values(&String::from_utf8_lossy(&n0.stdout));
        std::fs::write(path("config.ldif"), reversed).unwrap();
        let slapd_d = path("slapd.d");
        run_checked(
            Command::new("slapadd")
                .args(["-n0", "-F"])
                .arg(&slapd_d)
                .arg("-l")
                .arg(path("config.ldif")),
        );
        run_checked(
            Command::new("slapadd")
                .arg("-F")
                .arg(&slapd_d)
                .args(["-b", SUFFIX, "-l"])
                .arg(path("data.ldif")),
        );
        let mut servers = Servers::new(root);
        servers.slapd = Some(conformance::start_slapd(
            &slapd_d,
            servers.slapd_port,
            "stats",
        ));
        let config_ldif = servers.path("config.ldif");
        (servers, config_ldif)
    }

    fn new(root: tempfile::TempDir) -> Servers {
        Servers {
            root,
            slapd_port: free_port(),
            lmdir_port: free_port(),
            lmdir: None,
            slapd: None,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// Migrates `from` (which must succeed without flags), loads the data, serves.
    fn start_lmdir(&mut self, from: &Path) {
        let config = self.path("lmdir/lmdir.toml");
        let output = migrate(from, &config, self.lmdir_port, &[]);
        assert!(
            output.status.success(),
            "lmdir migrate refused: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        run_checked(
            lmdir()
                .arg("--config")
                .arg(&config)
                .arg("load")
                .arg(self.path("data.ldif")),
        );
        self.lmdir = Some(
            lmdir()
                .arg("--config")
                .arg(&config)
                .args(["serve", "--no-demo"])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(self.path("lmdir.log")).unwrap())
                .spawn()
                .unwrap(),
        );
        wait_until_up(self.lmdir_port);
    }
}

/// `slapcat -n0` output with the olcAccess values of each entry in reverse order (continuation
/// lines unfolded).
fn reverse_access_values(ldif: &str) -> String {
    let unfolded = ldif.replace("\n ", "");
    let mut records = Vec::new();
    for record in unfolded.split("\n\n") {
        let lines: Vec<&str> = record.lines().collect();
        let is_access = |line: &&str| line.to_ascii_lowercase().starts_with("olcaccess:");
        let mut access: Vec<&str> = lines.iter().copied().filter(is_access).collect();
        access.reverse();
        let mut reordered = Vec::new();
        for line in &lines {
            if is_access(line) {
                reordered.push(access.remove(0));
            } else {
                reordered.push(line);
            }
        }
        records.push(reordered.join("\n"));
    }
    records.join("\n\n")
}

/// Who asks: a name for messages and the bind (None: anonymous).
type Identity = (&'static str, Option<String>);

fn identities() -> Vec<Identity> {
    let user = |uid: &str, parent: &str| Some(format!("uid={uid},{parent}"));
    vec![
        ("anonymous", None),
        ("ann", user("ann", PEOPLE)),
        ("bob", user("bob", PEOPLE)),
        ("cat", user("cat", STAFF)),
        ("dan", user("dan", &format!("ou=Others,{SUFFIX}"))),
    ]
}

fn bind_arguments(bind: &Option<String>) -> Vec<String> {
    match bind {
        Some(dn) => vec!["-D".into(), dn.clone(), "-w".into(), PASSWORD.into()],
        None => Vec::new(),
    }
}

fn search(port: u16, bind: &Option<String>, filter: &str, attributes: &[&str]) -> Answer {
    let output = Command::new("ldapsearch")
        .args(["-x", "-LLL", "-o", "ldif-wrap=no", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(bind_arguments(bind))
        .args(["-b", SUFFIX, "-s", "sub", filter])
        .args(attributes)
        .output()
        .unwrap();
    answer(output)
}

/// `ldapcompare`'s exit code: 6 true, 5 false, else the LDAP error.
fn compare(port: u16, bind: &Option<String>, dn: &str, assertion: &str) -> i32 {
    Command::new("ldapcompare")
        .args(["-x", "-H"])
        .arg(format!("ldap://127.0.0.1:{port}"))
        .args(bind_arguments(bind))
        .args([dn, assertion])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .code()
        .unwrap_or(-1)
}

/// Every identity's searches (`filter` returning `attributes`) and compares (`dn`,
/// `attribute:value`) on both servers: the differences, and how many entries slapd returned.
fn differences(
    servers: &Servers,
    searches: &[(&str, &[&str])],
    compares: &[(&str, &str)],
) -> (String, usize) {
    let mut failures = String::new();
    let mut returned = 0;
    for (who, bind) in identities() {
        for (filter, attributes) in searches {
            let slapd = search(servers.slapd_port, &bind, filter, attributes);
            let lmdir = search(servers.lmdir_port, &bind, filter, attributes);
            returned += slapd.entries.len();
            if slapd != lmdir {
                failures += &format!(
                    "as {who}: {filter} {attributes:?}\n{}",
                    describe_difference(&slapd, &lmdir)
                );
            }
        }
        for (dn, assertion) in compares {
            let slapd = compare(servers.slapd_port, &bind, dn, assertion);
            let lmdir = compare(servers.lmdir_port, &bind, dn, assertion);
            if slapd != lmdir {
                failures +=
                    &format!("as {who}: compare {dn} {assertion}: slapd {slapd} lmdir {lmdir}\n");
            }
        }
    }
    (failures, returned)
}

/// `access to * by * ssf=128 break`: over plain LDAP slapd gives nobody anything (the clause
/// does not match, the rule's implicit `by * none` decides). Taken as `by * break` the rule
/// vanished and everyone read everything; migrate now refuses it, writes nothing and names it,
/// and writes the (wider) config only when told to accept that.
#[test]
fn a_conditional_break_rule_is_refused_where_slapd_restricts() {
    if !conformance::tools_ready("a_conditional_break_rule_is_refused_where_slapd_restricts") {
        return;
    }
    let rules = "access to * by * ssf=128 break\naccess to * by * read\n";
    let (servers, conf) = Servers::slapd_conf("", rules);
    let ann = identities()[1].1.clone();
    for bind in [None, ann] {
        let slapd = search(servers.slapd_port, &bind, "(objectClass=*)", &["cn"]);
        assert!(slapd.entries.is_empty(), "slapd over plain LDAP: {slapd:?}");
    }

    let out = servers.path("lmdir/lmdir.toml");
    let refused = migrate(&conf, &out, servers.lmdir_port, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(!out.exists(), "a refused migration wrote {}", out.display());
    let line = slapd_conf(servers.root.path(), "", rules)
        .lines()
        .position(|line| line.contains("ssf=128"))
        .unwrap()
        + 1;
    assert!(
        stderr.contains(&format!(
            "slapd.conf:{line}: access to * by * ssf=128 break"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--accept-untranslated-access"), "{stderr}");

    let accepted = migrate(
        &conf,
        &out,
        servers.lmdir_port,
        &["--accept-untranslated-access"],
    );
    assert!(accepted.status.success());
    let config = lmdir_config::Config::load(&out).unwrap();
    assert_eq!(
        config.access.len(),
        1,
        "only `access to * by * read` is left"
    );
    assert!(String::from_utf8_lossy(&accepted.stderr).contains("NOT TRANSLATED"));
}

/// `dn.one` and `dn.children`, as targets (of attributes and of `entry`) and as requesters.
const SCOPE_RULES: &str = "\
access to dn.one=\"ou=People,dc=example,dc=com\" attrs=telephoneNumber
  by self read
  by dn.children=\"ou=Staff,ou=People,dc=example,dc=com\" read
  by * none
access to dn.children=\"ou=People,dc=example,dc=com\" attrs=description
  by dn.one=\"ou=People,dc=example,dc=com\" read
  by * none
access to dn.one=\"dc=example,dc=com\" attrs=entry
  by users read
  by * none
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
";

/// Before `one`/`children` existed, migrate left these rules out (now refused): the phones of
/// the people one level below ou=People, readable by themselves and the staff below ou=Staff;
/// descriptions below ou=People (not its own), readable by people one level below it; the
/// entries one level below the suffix hidden from anonymous.
#[test]
fn one_level_and_children_rules_answer_like_slapd() {
    if !conformance::tools_ready("one_level_and_children_rules_answer_like_slapd") {
        return;
    }
    let (mut servers, conf) = Servers::slapd_conf("", SCOPE_RULES);
    servers.start_lmdir(&conf);
    let searches: &[(&str, &[&str])] = &[
        ("(objectClass=*)", &["telephoneNumber", "description"]),
        ("(telephoneNumber=*)", &["1.1"]),
        ("(description=about*)", &["description"]),
        ("(ou=*)", &["ou"]),
    ];
    let compares = [
        (format!("uid=ann,{PEOPLE}"), "telephoneNumber:+1 555 0333"),
        (format!("uid=cat,{STAFF}"), "description:about cat"),
        (STAFF.to_string(), "telephoneNumber:+1 555 0999"),
        (format!("uid=bob,{PEOPLE}"), "description:about bob"),
    ];
    let compares: Vec<(&str, &str)> = compares
        .iter()
        .map(|(dn, assertion)| (dn.as_str(), *assertion))
        .collect();
    let (failures, returned) = differences(&servers, searches, &compares);
    assert!(
        failures.is_empty(),
        "lmdir answers differently:\n{failures}"
    );
    assert!(returned > 40, "only {returned} entries compared");
}

/// `ldapmodify`'s exit code (the LDAP result) for `ldif` sent as `bind`.
fn modify_code(port: u16, bind: &Option<String>, ldif: &str) -> i32 {
    conformance::ldap_change_code_with(port, "ldapmodify", &bind_arguments(bind), ldif)
}

/// slapd's `group=` (groupOfNames, member), and `group/<class>/<attribute>=`.
const GROUP_RULES: &str = "\
access to dn.subtree=\"ou=People,dc=example,dc=com\" attrs=title
  by group=\"cn=mixed,ou=Groups,dc=example,dc=com\" write
  by group/groupOfUniqueNames/uniqueMember=\"cn=unique,ou=Groups,dc=example,dc=com\" read
  by group=\"cn=role,ou=Groups,dc=example,dc=com\" read
  by group/organizationalRole/roleOccupant=\"cn=role,ou=Groups,dc=example,dc=com\" read
  by * none
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
";

/// Only ann (a `member` of the groupOfNames cn=mixed) may write titles, only bob (a
/// `uniqueMember` of the groupOfUniqueNames cn=unique) reads them besides her. cat is a
/// `uniqueMember` of cn=mixed and a `member` of cn=unique, dan a `member` of the
/// organizationalRole cn=role and a `uniqueMember` of cn=unique with a UID (`#'0101'B`):
/// slapd counts none of that. Migrated to lmdir's `group=` (member or uniqueMember, any class,
/// UIDs allowed), cat could write titles and dan read them.
#[test]
fn group_class_and_attribute_answer_like_slapd() {
    if !conformance::tools_ready("group_class_and_attribute_answer_like_slapd") {
        return;
    }
    let (mut servers, conf) = Servers::slapd_conf("", GROUP_RULES);
    servers.start_lmdir(&conf);
    let searches: &[(&str, &[&str])] = &[
        ("(objectClass=*)", &["title"]),
        ("(title=title*)", &["1.1"]),
    ];
    let compares = [(format!("uid=bob,{PEOPLE}"), "title:title of bob")];
    let compares: Vec<(&str, &str)> = compares
        .iter()
        .map(|(dn, assertion)| (dn.as_str(), *assertion))
        .collect();
    let (mut failures, returned) = differences(&servers, searches, &compares);
    // Writes go through the writer's own membership lookups (in its transaction). The value
    // written is the one there, so both servers keep the same data.
    let change =
        format!("dn: uid=bob,{PEOPLE}\nchangetype: modify\nreplace: title\ntitle: title of bob\n");
    let mut codes = Vec::new();
    for (who, bind) in identities().into_iter().skip(1) {
        let slapd = modify_code(servers.slapd_port, &bind, &change);
        let lmdir = modify_code(servers.lmdir_port, &bind, &change);
        codes.push((who, slapd));
        if slapd != lmdir {
            failures += &format!("as {who}: modify title: slapd {slapd} lmdir {lmdir}\n");
        }
    }
    assert!(
        failures.is_empty(),
        "lmdir answers differently:\n{failures}"
    );
    assert_eq!(codes, [("ann", 0), ("bob", 50), ("cat", 50), ("dan", 50)]);
    assert!(returned > 30, "only {returned} entries compared");
}

/// The olcAccess order that matters: the password and phone rules before `to *`.
const ORDERED_RULES: &str = "\
access to attrs=userPassword by self write by anonymous auth by * none
access to dn.one=\"ou=People,dc=example,dc=com\" attrs=telephoneNumber by self read by * none
access to * by users read by anonymous search
";

/// A cn=config LDIF listing olcAccess values out of their `{n}` order (`{2}to * ...` first):
/// slapd applies them by their numbers, and so does the migrated lmdir. Taken in file order,
/// `to * by users read` came first and every user read every password hash and phone.
#[test]
fn olcaccess_values_apply_in_prefix_order_like_slapd() {
    if !conformance::tools_ready("olcaccess_values_apply_in_prefix_order_like_slapd") {
        return;
    }
    let (mut servers, config_ldif) = Servers::cn_config_reversed(ORDERED_RULES);
    let text = std::fs::read_to_string(&config_ldif).unwrap();
    let first = text
        .find("olcAccess: {2}to *")
        .expect("the reversed values");
    assert!(first < text.find("olcAccess: {0}to attrs=userPassword").unwrap());
    servers.start_lmdir(&config_ldif);
    let searches: &[(&str, &[&str])] = &[
        (
            "(objectClass=*)",
            &["userPassword", "telephoneNumber", "cn"],
        ),
        ("(userPassword=*)", &["1.1"]),
        ("(telephoneNumber=*)", &["1.1"]),
    ];
    let compares = [(format!("uid=bob,{PEOPLE}"), "telephoneNumber:+1 555 0333")];
    let compares: Vec<(&str, &str)> = compares
        .iter()
        .map(|(dn, assertion)| (dn.as_str(), *assertion))
        .collect();
    let (failures, returned) = differences(&servers, searches, &compares);
    assert!(
        failures.is_empty(),
        "lmdir answers differently:\n{failures}"
    );
    assert!(returned > 40, "only {returned} entries compared");
}

/// A global rule keeping anonymous from the root DSE: slapd hides it (and, past the last global
/// rule, cn=Subschema from everyone); lmdir serves both to everyone, which migrate now says on
/// a line of its own instead of counting the rule as not needed.
#[test]
fn root_dse_restrictions_are_reported_where_slapd_hides_it() {
    if !conformance::tools_ready("root_dse_restrictions_are_reported_where_slapd_hides_it") {
        return;
    }
    let global = "access to dn.base=\"\" by users read by * none\n";
    let (servers, conf) = Servers::slapd_conf(global, "access to * by * read\n");
    let root_dse = |bind: &Option<String>, base: &str| {
        let output = Command::new("ldapsearch")
            .args(["-x", "-LLL", "-H"])
            .arg(format!("ldap://127.0.0.1:{}", servers.slapd_port))
            .args(bind_arguments(bind))
            .args(["-b", base, "-s", "base", "(objectClass=*)", "1.1"])
            .output()
            .unwrap();
        answer(output).entries.len()
    };
    let ann = identities()[1].1.clone();
    assert_eq!(root_dse(&None, ""), 0, "slapd shows anonymous the root DSE");
    assert_eq!(root_dse(&ann, ""), 1);
    assert_eq!(root_dse(&ann, "cn=Subschema"), 0);

    let out = servers.path("lmdir/lmdir.toml");
    let output = migrate(&conf, &out, servers.lmdir_port, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let line = slapd_conf(servers.root.path(), global, "")
        .lines()
        .position(|line| line.starts_with("access to dn.base=\"\""))
        .unwrap()
        + 1;
    let warning = stderr
        .lines()
        .find(|text| text.contains(&format!("slapd.conf:{line}: approximated")))
        .unwrap_or_else(|| panic!("no note for the root DSE rule: {stderr}"));
    assert!(
        warning.contains("slapd governs the root DSE and cn=Subschema")
            && warning.contains("lmdir serves the root DSE and cn=Subschema to everyone"),
        "{warning}"
    );
}
