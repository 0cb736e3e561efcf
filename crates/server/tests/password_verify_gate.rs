//! Many binds at once against memory-hard password hashes: the server's verify gate runs at
//! most one per core, within `password_verify_memory_bytes_max`. Before it, 100 concurrent
//! binds of an entry holding `mkpasswd -m scrypt`'s hash (64 MiB each) took the server to
//! 6.5 GB, and 512 (the blocking threads) would have taken 32 GB; any person who may write
//! their own userPassword can store such a hash. Its own test binary: the check reads the
//! process's peak memory, which other tests running beside it would move.

mod common;

use common::{bind, person_dn, root, TestServer, PERSON_PASSWORD};
use ldap3::Mod;
use std::collections::HashSet;

/// `mkpasswd -m scrypt secret` (libxcrypt's default: N = 2^14, r = 32, p = 1: 64 MiB).
const SCRYPT_SECRET: &str =
    "{CRYPT}$7$CU..../....TAlTQpwtZxLkJrQgbfT/C1$89mRo3L5bBO9mKQvRcBlfEMJv/ZT5nIBaM.QA2RcBkD";
const MIB: u64 = 1 << 20;
const BINDS: usize = 24;

/// The process's peak resident memory (VmHWM), bytes.
fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

#[test]
fn concurrent_binds_to_memory_hard_hashes_stay_within_the_budget() {
    let server = TestServer::start_populated(2, Vec::new(), |settings| {
        settings.password_verify_memory_bytes_max = 128 * MIB;
    });
    let mut admin = root(&server);
    admin
        .modify(
            &person_dn(0),
            vec![Mod::Replace("userPassword", HashSet::from([SCRYPT_SECRET]))],
        )
        .expect("modify sent")
        .success()
        .expect("the scrypt hash is stored as given");
    // One bind first: the server's own peak before the burst includes one verification.
    drop(bind(&server, &person_dn(0), PERSON_PASSWORD));
    let before_bytes = peak_resident_bytes();
    std::thread::scope(|scope| {
        let binds: Vec<_> = (0..BINDS)
            .map(|_| scope.spawn(|| drop(bind(&server, &person_dn(0), PERSON_PASSWORD))))
            .collect();
        for handle in binds {
            handle.join().expect("every bind succeeds");
        }
    });
    let grown_bytes = peak_resident_bytes().saturating_sub(before_bytes);
    println!(
        "{BINDS} concurrent scrypt binds: peak grew by {} MiB",
        grown_bytes / MIB
    );
    // Two at once at most (two 64 MiB verifications fill the 128 MiB budget); all 24 at once
    // would need 1.5 GiB.
    assert!(
        grown_bytes < 8 * 64 * MIB,
        "the peak grew by {} MiB",
        grown_bytes / MIB
    );
}
