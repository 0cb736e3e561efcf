//! Limits per client: how many connections one address holds, and how fast failed binds from
//! one address are answered (so a password-guessing loop slows down instead of running at full
//! speed, whatever the password policy). Both tables are bounded.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Who a per-client limit counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// An IPv4 address, or an IPv6 /64 (one host or site usually holds a whole /64, so counting
    /// single IPv6 addresses would let it step around every limit).
    Address(IpAddr),
    /// A local user over ldapi, by uid.
    LocalUser(u32),
}

impl ClientKey {
    pub fn of_ip(address: IpAddr) -> ClientKey {
        let address = match address {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                // ::1 is this host, kept whole so it counts as loopback.
                None if v6.is_loopback() => IpAddr::V6(v6),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    IpAddr::V6(Ipv6Addr::from(prefix))
                }
            },
            v4 => v4,
        };
        ClientKey::Address(address)
    }
}

impl ClientKey {
    /// The most connections this client may hold at once: a loopback address or a local user
    /// over ldapi (only this host's own services connect from there) gets `loopback_maximum`,
    /// any other address `maximum`.
    pub fn connections_maximum(&self, maximum: usize, loopback_maximum: usize) -> usize {
        match self {
            ClientKey::Address(address) if !address.is_loopback() => maximum,
            ClientKey::Address(_) | ClientKey::LocalUser(_) => loopback_maximum,
        }
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientKey::Address(IpAddr::V6(prefix)) => write!(formatter, "{prefix}/64"),
            ClientKey::Address(v4) => write!(formatter, "{v4}"),
            ClientKey::LocalUser(uid) => write!(formatter, "ldapi uid={uid}"),
        }
    }
}

/// Open connections per client (address, or local user over ldapi). Entries exist only while
/// connections do, so the table is bounded by `connections_max`.
#[derive(Default)]
pub struct AddressConnections {
    counts: Mutex<HashMap<ClientKey, usize>>,
}

/// One counted connection; uncounted on drop.
pub struct AddressSlot {
    table: Arc<AddressConnections>,
    key: ClientKey,
}

impl AddressConnections {
    /// Counts a connection from `key` in, or None when it already has `maximum`.
    pub fn enter(self: &Arc<Self>, key: ClientKey, maximum: usize) -> Option<AddressSlot> {
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = counts.entry(key).or_insert(0);
        if *count >= maximum {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            table: self.clone(),
            key,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self
            .table
            .counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

/// Keys each throttle table tracks one by one; beyond this, new clients share one bucket in the
/// address table (about 40 bytes an entry: at most a few MiB, and an attacker cycling through
/// many addresses throttles only the addresses that are not yet tracked, together), and new
/// accounts go without an account bucket (their address's budget still applies).
pub const BIND_THROTTLE_CLIENTS_MAX: usize = 65_536;
/// The longest a throttled bind waits: bounds how far parallel connections of one address can
/// push its debt.
pub const BIND_THROTTLE_DELAY_MAX: Duration = Duration::from_secs(60);

/// Failed-bind throttling, two token buckets deep: one per (client, bind DN) with a small
/// burst, so guessing one account is slowed at once, and one per client with a much larger
/// budget, so guessing many accounts from one address is slowed too, while the other users
/// behind a shared client (a mail server, a web application, SSSD) never wait for one user's
/// typing. A bind with no token in either waits for the next one (success or not, so the delay
/// tells nothing about the password) and reserves it.
pub struct BindThrottle {
    accounts: TokenTable<AccountKey>,
    clients: TokenTable<ClientKey>,
    /// Bind DNs are hashed with a per-process random key: fixed-size table keys whatever the
    /// DN's length, and collisions nobody can aim for.
    dn_hasher: std::collections::hash_map::RandomState,
}

/// A (client, bind DN) pair, the DN as a keyed hash of its normalized form.
type AccountKey = (ClientKey, u64);

/// What `BindThrottle::admit` decided for one bind.
#[derive(Debug, Clone, Copy)]
pub struct BindTicket {
    /// How long to wait before checking the password.
    pub delay: Duration,
    account: AccountKey,
    /// A token was reserved (charged up front) in the account's bucket / the client's.
    account_charged: bool,
    client_charged: bool,
}

impl BindThrottle {
    /// `account_*`: per client and bind DN; `client_*`: per client, all DNs. An interval of
    /// zero disables that table.
    pub fn new(
        (account_burst, account_interval): (u32, Duration),
        (client_burst, client_interval): (u32, Duration),
    ) -> BindThrottle {
        BindThrottle {
            accounts: TokenTable::new(account_burst, account_interval, false),
            clients: TokenTable::new(client_burst, client_interval, true),
            dn_hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Before a password is checked: the wait a bind as `normalized_dn` from `client` owes,
    /// reserving its tokens.
    pub fn admit(&self, client: ClientKey, normalized_dn: &str) -> BindTicket {
        use std::hash::BuildHasher;
        let account = (client, self.dn_hasher.hash_one(normalized_dn));
        let (account_delay, account_charged) = self.accounts.admit(account);
        let (client_delay, client_charged) = self.clients.admit(client);
        BindTicket {
            delay: account_delay.max(client_delay),
            account,
            account_charged,
            client_charged,
        }
    }

    /// After the check: a failure costs a token in both tables (unless reserved), a success
    /// gets its reservations back.
    pub fn settle(&self, ticket: BindTicket, succeeded: bool) {
        self.accounts
            .settle(ticket.account, ticket.account_charged, succeeded);
        self.clients
            .settle(ticket.account.0, ticket.client_charged, succeeded);
    }

    /// Accounts and clients currently tracked (tests).
    pub fn tracked(&self) -> (usize, usize) {
        (self.accounts.tracked(), self.clients.tracked())
    }
}

/// A token bucket per key: `burst` failures are free, then one per `interval`.
struct TokenTable<K> {
    burst: f64,
    interval: Duration,
    buckets: Mutex<Buckets<K>>,
}

struct Buckets<K> {
    by_key: HashMap<K, Bucket>,
    /// Shared by the keys that find the table full; None: those go unthrottled by this table.
    overflow: Option<Bucket>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl<K: std::hash::Hash + Eq + Copy> TokenTable<K> {
    fn new(burst: u32, interval: Duration, shared_overflow: bool) -> TokenTable<K> {
        let burst = f64::from(burst.max(1));
        TokenTable {
            burst,
            interval,
            buckets: Mutex::new(Buckets {
                by_key: HashMap::new(),
                overflow: shared_overflow.then(|| Bucket {
                    tokens: burst,
                    updated: Instant::now(),
                }),
            }),
        }
    }

    /// The wait a bind of `key` owes, and whether it reserved a token for it.
    fn admit(&self, key: K) -> (Duration, bool) {
        if self.interval.is_zero() {
            return (Duration::ZERO, false);
        }
        let now = Instant::now();
        let mut buckets = self.lock();
        let Some(bucket) = self.bucket(&mut buckets, key, now, false) else {
            return (Duration::ZERO, false);
        };
        if bucket.tokens >= 1.0 {
            return (Duration::ZERO, false);
        }
        let debt_max = BIND_THROTTLE_DELAY_MAX.as_secs_f64() / self.interval.as_secs_f64();
        let waits_for = (1.0 - bucket.tokens).min(debt_max);
        // A bind at the debt limit still waits the longest delay but pushes the debt no further.
        if 1.0 - bucket.tokens < debt_max {
            bucket.tokens -= 1.0;
        }
        (self.interval.mul_f64(waits_for), true)
    }

    /// A failure costs a token (unless reserved), a success gets its reservation back.
    fn settle(&self, key: K, charged: bool, succeeded: bool) {
        if self.interval.is_zero() || succeeded != charged {
            return;
        }
        let now = Instant::now();
        let mut buckets = self.lock();
        if let Some(bucket) = self.bucket(&mut buckets, key, now, !succeeded) {
            bucket.tokens = if succeeded {
                (bucket.tokens + 1.0).min(self.burst)
            } else {
                bucket.tokens - 1.0
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets<K>> {
        self.buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The key's bucket refilled to `now`. A key without one gets one only when `create` (a
    /// failure to record): one that never failed owes nothing.
    fn bucket<'a>(
        &self,
        buckets: &'a mut Buckets<K>,
        key: K,
        now: Instant,
        create: bool,
    ) -> Option<&'a mut Bucket> {
        let full = Bucket {
            tokens: self.burst,
            updated: now,
        };
        if create
            && !buckets.by_key.contains_key(&key)
            && buckets.by_key.len() >= BIND_THROTTLE_CLIENTS_MAX
        {
            self.forget_refilled(&mut buckets.by_key, now);
        }
        let has_room = buckets.by_key.len() < BIND_THROTTLE_CLIENTS_MAX;
        let bucket = if buckets.by_key.contains_key(&key) || (create && has_room) {
            buckets.by_key.entry(key).or_insert(full)
        } else if !has_room {
            buckets.overflow.as_mut()?
        } else {
            return None;
        };
        let refill = now.saturating_duration_since(bucket.updated).as_secs_f64()
            / self.interval.as_secs_f64();
        bucket.tokens = (bucket.tokens + refill).min(self.burst);
        bucket.updated = now;
        Some(bucket)
    }

    /// Drops the buckets that have refilled completely: they hold nothing a fresh one would not.
    fn forget_refilled(&self, by_key: &mut HashMap<K, Bucket>, now: Instant) {
        let interval_seconds = self.interval.as_secs_f64();
        by_key.retain(|_, bucket| {
            let refill =
                now.saturating_duration_since(bucket.updated).as_secs_f64() / interval_seconds;
            bucket.tokens + refill < self.burst
        });
    }

    fn tracked(&self) -> usize {
        self.lock().by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn client(last: u8) -> ClientKey {
        ClientKey::of_ip(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let two: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ClientKey::of_ip(one), ClientKey::of_ip(two));
        assert_ne!(ClientKey::of_ip(one), ClientKey::of_ip(other));
        assert_eq!(ClientKey::of_ip(one).to_string(), "2001:db8:1:2::/64");
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(ClientKey::of_ip(mapped), client(7));
    }

    #[test]
    fn loopback_clients_get_the_loopback_cap_and_others_the_address_cap() {
        let loopback = |text: &str| ClientKey::of_ip(text.parse().unwrap());
        for local in ["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(
                loopback(local).connections_maximum(64, 1024),
                1024,
                "{local}"
            );
        }
        for remote in ["192.0.2.1", "10.0.0.1", "2001:db8::1", "::2"] {
            assert_eq!(
                loopback(remote).connections_maximum(64, 1024),
                64,
                "{remote}"
            );
        }
        assert_eq!(ClientKey::LocalUser(0).connections_maximum(64, 1024), 1024);
    }

    #[test]
    fn connection_slots_are_capped_per_address_and_released_on_drop() {
        let table = Arc::new(AddressConnections::default());
        let first = table.enter(client(1), 2).unwrap();
        let _second = table.enter(client(1), 2).unwrap();
        assert!(table.enter(client(1), 2).is_none());
        assert!(table.enter(client(2), 2).is_some());
        drop(first);
        assert!(table.enter(client(1), 2).is_some());
    }

    /// A throttle with only the per-account table (the address budget off).
    fn per_account(burst: u32, interval: Duration) -> BindThrottle {
        BindThrottle::new((burst, interval), (1, Duration::ZERO))
    }

    const DN: &str = "uid=a,dc=example,dc=com";

    #[test]
    fn failures_past_the_burst_owe_one_interval_each_and_successes_are_refunded() {
        let throttle = per_account(3, Duration::from_secs(10));
        for _ in 0..3 {
            let ticket = throttle.admit(client(1), DN);
            assert!(ticket.delay.is_zero());
            throttle.settle(ticket, false);
        }
        // Each further bind reserves the next token: the waits grow by one interval each.
        let fourth = throttle.admit(client(1), DN);
        let fifth = throttle.admit(client(1), DN);
        assert!(fourth.delay > Duration::from_secs(9));
        assert!(fifth.delay > Duration::from_secs(19));
        // Another client is not affected, nor another DN through the same client.
        assert!(throttle.admit(client(2), DN).delay.is_zero());
        assert!(throttle
            .admit(client(1), "uid=b,dc=example,dc=com")
            .delay
            .is_zero());
        // A success gives its reservation back; the next waiter owes less.
        throttle.settle(fifth, true);
        let after_refund = throttle.admit(client(1), DN).delay;
        assert!(after_refund > Duration::from_secs(19) && after_refund < Duration::from_secs(25));
    }

    #[test]
    fn guessing_many_accounts_from_one_address_spends_its_budget() {
        let throttle =
            BindThrottle::new((5, Duration::from_secs(10)), (4, Duration::from_secs(10)));
        for index in 0..4 {
            let ticket = throttle.admit(client(1), &format!("uid={index},dc=example,dc=com"));
            assert!(ticket.delay.is_zero());
            throttle.settle(ticket, false);
        }
        // A fifth account, never guessed at, waits: the address spent its budget.
        assert!(
            throttle.admit(client(1), "uid=new,dc=example,dc=com").delay > Duration::from_secs(9)
        );
        assert!(throttle
            .admit(client(2), "uid=new,dc=example,dc=com")
            .delay
            .is_zero());
    }

    #[test]
    fn waits_stop_growing_at_the_delay_max() {
        let throttle = per_account(1, Duration::from_secs(10));
        let ticket = throttle.admit(client(1), DN);
        throttle.settle(ticket, false);
        let longest = (0..100)
            .map(|_| throttle.admit(client(1), DN).delay)
            .max()
            .unwrap();
        assert!(longest <= BIND_THROTTLE_DELAY_MAX);
        assert!(longest > BIND_THROTTLE_DELAY_MAX - Duration::from_secs(11));
    }

    #[test]
    fn full_tables_stay_bounded_and_fall_back_to_the_shared_address_bucket() {
        let throttle = BindThrottle::new(
            (1, Duration::from_secs(3600)),
            (1, Duration::from_secs(3600)),
        );
        for index in 0..BIND_THROTTLE_CLIENTS_MAX as u32 {
            let key = ClientKey::LocalUser(index);
            let ticket = throttle.admit(key, DN);
            throttle.settle(ticket, false);
        }
        assert_eq!(
            throttle.tracked(),
            (BIND_THROTTLE_CLIENTS_MAX, BIND_THROTTLE_CLIENTS_MAX)
        );
        // Many DNs from one tracked client add no account past the cap.
        for index in 0..1000 {
            let ticket = throttle.admit(ClientKey::LocalUser(7), &format!("uid={index}"));
            throttle.settle(ticket, false);
        }
        assert_eq!(
            throttle.tracked(),
            (BIND_THROTTLE_CLIENTS_MAX, BIND_THROTTLE_CLIENTS_MAX)
        );
        let newcomer = ClientKey::LocalUser(u32::MAX);
        let ticket = throttle.admit(newcomer, DN);
        throttle.settle(ticket, false);
        // The shared address bucket (burst 1) is now empty: the next newcomer waits.
        assert!(!throttle
            .admit(ClientKey::LocalUser(u32::MAX - 1), DN)
            .delay
            .is_zero());
    }

    #[test]
    fn no_interval_means_no_throttling() {
        let throttle = BindThrottle::new((1, Duration::ZERO), (1, Duration::ZERO));
        for _ in 0..10 {
            let ticket = throttle.admit(client(1), DN);
            assert!(ticket.delay.is_zero());
            throttle.settle(ticket, false);
        }
        assert_eq!(throttle.tracked(), (0, 0));
    }
}
