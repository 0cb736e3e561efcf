//! Crash safety of the real binary: `lmdir serve` is SIGKILLed at random moments while a client
//! writes (adds, modifies, modrdns); after each restart every acknowledged write must be there,
//! `lmdir check` must pass and the server must serve. Then `lmdir load` is killed mid-way: there
//! must be either no DB or one that `lmdir check` passes.

use crate::support;

use ldap3::{LdapConn, LdapConnSettings, Mod, Scope, SearchEntry};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{TestServer, ROOT_DN, ROOT_PASSWORD};

const PEOPLE_DN: &str = "ou=People,dc=example,dc=com";
const KILL_ROUNDS: u64 = 20;
const LOAD_KILL_ROUNDS: u64 = 3;
/// Seed of the kill moments and operation mix; printed so a failure can be replayed.
const SEED: u64 = 0x5eed_c0de;

/// Deterministic xorshift64* (no dependency), enough to pick kill moments and operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// What the model says about one written person (key = its number).
#[derive(Clone, Debug, PartialEq, Eq)]
struct PersonState {
    renamed: bool,
    description: String,
}

fn person_dn(key: u64, renamed: bool) -> String {
    if renamed {
        format!("uid=k{key}-moved,{PEOPLE_DN}")
    } else {
        format!("uid=k{key},{PEOPLE_DN}")
    }
}

/// One write and the state it leads to.
#[derive(Clone, Debug)]
struct Write {
    key: u64,
    after: PersonState,
}

/// Shared between the writer thread and the test: the acknowledged model and the write in flight.
#[derive(Default)]
struct Journal {
    acknowledged: BTreeMap<u64, PersonState>,
    in_flight: Option<Write>,
    acknowledged_count: usize,
}

fn connect_as_root(port: u16) -> Option<LdapConn> {
    let mut connection = LdapConn::with_settings(
        LdapConnSettings::new().set_conn_timeout(Duration::from_secs(5)),
        &format!("ldap://127.0.0.1:{port}"),
    )
    .ok()?;
    connection
        .simple_bind(ROOT_DN, ROOT_PASSWORD)
        .ok()?
        .success()
        .ok()?;
    Some(connection)
}

/// Writes until the server dies; records each write before sending and after its acknowledgement.
fn write_until_killed(port: u16, journal: Arc<Mutex<Journal>>, next_key: u64, seed: u64) {
    let Some(mut connection) = connect_as_root(port) else {
        return;
    };
    let mut rng = Rng(seed | 1);
    let mut next_key = next_key;
    let mut counter = 0u64;
    loop {
        counter += 1;
        let existing: Vec<(u64, PersonState)> = {
            let journal = journal.lock().unwrap();
            journal
                .acknowledged
                .iter()
                .map(|(key, state)| (*key, state.clone()))
                .collect()
        };
        let choice = if existing.is_empty() { 0 } else { rng.below(3) };
        let write;
        let outcome = match choice {
            1 | 2 => {
                let (key, state) = existing[rng.below(existing.len() as u64) as usize].clone();
                let dn = person_dn(key, state.renamed);
                if choice == 2 && !state.renamed {
                    write = Write {
                        key,
                        after: PersonState {
                            renamed: true,
                            ..state
                        },
                    };
                    journal.lock().unwrap().in_flight = Some(write.clone());
                    connection
                        .modifydn(&dn, &format!("uid=k{key}-moved"), true, None)
                        .and_then(|result| result.success())
                } else {
                    let description = format!("d{seed}-{counter}");
                    write = Write {
                        key,
                        after: PersonState {
                            description: description.clone(),
                            ..state
                        },
                    };
                    journal.lock().unwrap().in_flight = Some(write.clone());
                    connection
                        .modify(
                            &dn,
                            vec![Mod::Replace(
                                "description",
                                HashSet::from([description.as_str()]),
                            )],
                        )
                        .and_then(|result| result.success())
                }
            }
            _ => {
                let key = next_key;
                next_key += 1;
                let description = format!("d{seed}-{counter}");
                write = Write {
                    key,
                    after: PersonState {
                        renamed: false,
                        description: description.clone(),
                    },
                };
                journal.lock().unwrap().in_flight = Some(write.clone());
                let uid = format!("k{key}");
                connection
                    .add(
                        &person_dn(key, false),
                        vec![
                            ("objectClass", HashSet::from(["inetOrgPerson"])),
                            ("uid", HashSet::from([uid.as_str()])),
                            ("cn", HashSet::from([uid.as_str()])),
                            ("sn", HashSet::from(["crash"])),
                            ("description", HashSet::from([description.as_str()])),
                        ],
                    )
                    .and_then(|result| result.success())
            }
        };
        match outcome {
            Ok(_) => {
                let mut journal = journal.lock().unwrap();
                journal.acknowledged.insert(write.key, write.after);
                journal.in_flight = None;
                journal.acknowledged_count += 1;
            }
            // The server was killed (or refused): the write stays in flight, maybe applied.
            Err(_) => return,
        }
    }
}

/// Every person under ou=People whose uid starts with `k`: key → state, as the server has them.
fn server_state(port: u16) -> BTreeMap<u64, PersonState> {
    let mut connection = connect_as_root(port).expect("connecting after restart");
    let (entries, _) = connection
        .search(
            PEOPLE_DN,
            Scope::OneLevel,
            "(uid=k*)",
            vec!["uid", "description"],
        )
        .expect("searching after restart")
        .success()
        .expect("search result after restart");
    let _ = connection.unbind();
    let mut state = BTreeMap::new();
    for entry in entries {
        let entry = SearchEntry::construct(entry);
        let uid = entry.attrs["uid"][0].clone();
        let renamed = uid.ends_with("-moved");
        let key: u64 = uid
            .trim_start_matches('k')
            .trim_end_matches("-moved")
            .parse()
            .unwrap_or_else(|_| panic!("unexpected uid {uid} in {}", entry.dn));
        assert_eq!(
            entry.dn.to_lowercase(),
            person_dn(key, renamed).to_lowercase()
        );
        let descriptions = entry.attrs.get("description").cloned().unwrap_or_default();
        assert_eq!(
            descriptions.len(),
            1,
            "{}: one description expected, got {descriptions:?}",
            entry.dn
        );
        let previous = state.insert(
            key,
            PersonState {
                renamed,
                description: descriptions[0].clone(),
            },
        );
        assert!(
            previous.is_none(),
            "person k{key} exists twice (old and new RDN)"
        );
    }
    state
}

#[test]
fn acknowledged_writes_survive_sigkill_of_the_server() {
    let mut server = TestServer::prepare("", 20);
    let mut rng = Rng(SEED);
    let mut journal_model: BTreeMap<u64, PersonState> = BTreeMap::new();
    let mut next_key = 0u64;
    let mut acknowledged_total = 0usize;
    println!("crash safety seed {SEED:#x}");
    for round in 0..KILL_ROUNDS {
        server.start();
        let journal = Arc::new(Mutex::new(Journal {
            acknowledged: journal_model.clone(),
            ..Journal::default()
        }));
        let writer = {
            let journal = journal.clone();
            let port = server.port;
            let seed = rng.next();
            let first_key = next_key;
            std::thread::spawn(move || write_until_killed(port, journal, first_key, seed))
        };
        let kill_after = Duration::from_millis(50 + rng.below(400));
        std::thread::sleep(kill_after);
        server.kill_hard();
        writer.join().expect("the writer thread panicked");
        let journal = std::mem::take(&mut *journal.lock().unwrap());
        acknowledged_total += journal.acknowledged_count;
        server.assert_check_clean(&format!("round {round} after SIGKILL"));

        server.start();
        let actual = server_state(server.port);
        let mut expected = journal.acknowledged.clone();
        // The write in flight at the kill may or may not have landed: both are right.
        if let Some(in_flight) = &journal.in_flight {
            if actual.get(&in_flight.key) == Some(&in_flight.after) {
                expected.insert(in_flight.key, in_flight.after.clone());
            }
        }
        assert_eq!(
            actual, expected,
            "round {round}: server state differs from the acknowledged writes (in flight: {:?})",
            journal.in_flight
        );
        println!(
            "round {round}: killed after {} ms, {} writes acknowledged, {} people, in flight {:?}",
            kill_after.as_millis(),
            journal.acknowledged_count,
            actual.len(),
            journal.in_flight.as_ref().map(|write| write.key)
        );
        next_key = actual
            .keys()
            .next_back()
            .map_or(next_key, |key| key + 1)
            .max(next_key + 1_000);
        journal_model = actual;
        server.kill_hard();
        server.assert_no_panic(&format!("round {round}"));
    }
    assert!(
        acknowledged_total > 0,
        "no write was acknowledged in any round"
    );
    server.start();
    server.assert_running("after all rounds");
    assert_eq!(server_state(server.port), journal_model);
    server.kill_hard();
    server.assert_check_clean("after all rounds");
}

#[test]
fn killed_load_leaves_no_database_or_a_sound_one() {
    let server = TestServer::prepare("", 0);
    let ldif = server.generate_ldif(20_000, 7);
    let database = server.database_directory();
    // One full load to learn how long it takes here.
    let started = Instant::now();
    let output = server.run_command(&["load".as_ref(), ldif.as_os_str()]);
    assert!(
        output.status.success(),
        "full load failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let full_load = started.elapsed();
    println!(
        "full load of 20,000 people: {:.2} s",
        full_load.as_secs_f64()
    );
    let mut rng = Rng(SEED ^ 0x10ad);
    for round in 0..LOAD_KILL_ROUNDS {
        std::fs::remove_dir_all(&database).expect("removing the previous database");
        let mut child = std::process::Command::new(support::lmdir_binary())
            .arg("--config")
            .arg(&server.config_path)
            .arg("load")
            .arg(&ldif)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawning lmdir load");
        let kill_after = full_load.mul_f64(0.1 + 0.8 * (rng.below(1000) as f64 / 1000.0));
        std::thread::sleep(kill_after);
        let _ = child.kill();
        let status = child.wait().expect("reaping lmdir load");
        let database_present = database.join("data.mdb").exists();
        println!(
            "load round {round}: killed after {} ms ({status}), database present: {database_present}",
            kill_after.as_millis()
        );
        if database_present {
            server.assert_check_clean(&format!("load round {round}"));
        }
        // A new load must succeed despite anything the killed one left behind.
        if database.exists() {
            std::fs::remove_dir_all(&database).expect("removing the database");
        }
        let output = server.run_command(&["load".as_ref(), ldif.as_os_str()]);
        assert!(
            output.status.success(),
            "load after a killed load failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        server.assert_check_clean(&format!("reload after load round {round}"));
    }
}
