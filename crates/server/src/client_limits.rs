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

impl fmt::Display for ClientKey {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientKey::Address(IpAddr::V6(prefix)) => write!(formatter, "{prefix}/64"),
            ClientKey::Address(v4) => write!(formatter, "{v4}"),
            ClientKey::LocalUser(uid) => write!(formatter, "ldapi uid={uid}"),
        }
    }
}

/// Open connections per address. Entries exist only while connections do, so the table is
/// bounded by `connections_max`.
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

/// Clients whose bind failures are tracked one by one; beyond this, new clients share one
/// bucket (about 40 bytes an entry: at most a few MiB, and an attacker cycling through many
/// addresses throttles only the addresses that are not yet tracked, together).
pub const BIND_THROTTLE_CLIENTS_MAX: usize = 65_536;
/// The longest a throttled bind waits: bounds how far parallel connections of one address can
/// push its debt.
pub const BIND_THROTTLE_DELAY_MAX: Duration = Duration::from_secs(60);

/// A token bucket per client: `burst` failures are free, then one per `interval`. A bind from a
/// client with no token waits for the next one (success or not, so the delay tells nothing
/// about the password) and reserves it.
pub struct BindThrottle {
    burst: f64,
    interval: Duration,
    buckets: Mutex<Buckets>,
}

struct Buckets {
    by_client: HashMap<ClientKey, Bucket>,
    /// Shared by the clients that find the table full.
    overflow: Bucket,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// What `BindThrottle::admit` decided for one bind.
#[derive(Debug, Clone, Copy)]
pub struct BindTicket {
    /// How long to wait before checking the password.
    pub delay: Duration,
    /// A token was reserved (charged up front) for this bind.
    charged: bool,
}

impl BindThrottle {
    /// `interval` zero disables throttling.
    pub fn new(burst: u32, interval: Duration) -> BindThrottle {
        BindThrottle {
            burst: f64::from(burst.max(1)),
            interval,
            buckets: Mutex::new(Buckets {
                by_client: HashMap::new(),
                overflow: Bucket {
                    tokens: f64::from(burst.max(1)),
                    updated: Instant::now(),
                },
            }),
        }
    }

    /// Before a password is checked: the wait this client's bind owes, reserving its token.
    pub fn admit(&self, client: ClientKey) -> BindTicket {
        let free = BindTicket {
            delay: Duration::ZERO,
            charged: false,
        };
        if self.interval.is_zero() {
            return free;
        }
        let now = Instant::now();
        let mut buckets = self.lock();
        let Some(bucket) = self.bucket(&mut buckets, client, now, false) else {
            return free;
        };
        if bucket.tokens >= 1.0 {
            return free;
        }
        let debt_max = BIND_THROTTLE_DELAY_MAX.as_secs_f64() / self.interval.as_secs_f64();
        let waits_for = (1.0 - bucket.tokens).min(debt_max);
        // A bind at the debt limit still waits the longest delay but pushes the debt no further.
        if 1.0 - bucket.tokens < debt_max {
            bucket.tokens -= 1.0;
        }
        BindTicket {
            delay: self.interval.mul_f64(waits_for),
            charged: true,
        }
    }

    /// After the check: a failure costs a token (unless reserved), a success gets its
    /// reservation back.
    pub fn settle(&self, client: ClientKey, ticket: BindTicket, succeeded: bool) {
        if self.interval.is_zero() || succeeded != ticket.charged {
            return;
        }
        let now = Instant::now();
        let mut buckets = self.lock();
        if let Some(bucket) = self.bucket(&mut buckets, client, now, !succeeded) {
            bucket.tokens = if succeeded {
                (bucket.tokens + 1.0).min(self.burst)
            } else {
                bucket.tokens - 1.0
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The client's bucket refilled to `now`. A client without one gets one only when `create`
    /// (a failure to record): one that never failed owes nothing.
    fn bucket<'a>(
        &self,
        buckets: &'a mut Buckets,
        client: ClientKey,
        now: Instant,
        create: bool,
    ) -> Option<&'a mut Bucket> {
        let full = Bucket {
            tokens: self.burst,
            updated: now,
        };
        if create
            && !buckets.by_client.contains_key(&client)
            && buckets.by_client.len() >= BIND_THROTTLE_CLIENTS_MAX
        {
            self.forget_refilled(&mut buckets.by_client, now);
        }
        let has_room = buckets.by_client.len() < BIND_THROTTLE_CLIENTS_MAX;
        let bucket = if buckets.by_client.contains_key(&client) || (create && has_room) {
            buckets.by_client.entry(client).or_insert(full)
        } else if !has_room {
            &mut buckets.overflow
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
    fn forget_refilled(&self, by_client: &mut HashMap<ClientKey, Bucket>, now: Instant) {
        let interval_seconds = self.interval.as_secs_f64();
        by_client.retain(|_, bucket| {
            let refill =
                now.saturating_duration_since(bucket.updated).as_secs_f64() / interval_seconds;
            bucket.tokens + refill < self.burst
        });
    }

    /// Clients currently tracked (tests).
    pub fn tracked_clients(&self) -> usize {
        self.lock().by_client.len()
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
    fn connection_slots_are_capped_per_address_and_released_on_drop() {
        let table = Arc::new(AddressConnections::default());
        let first = table.enter(client(1), 2).unwrap();
        let _second = table.enter(client(1), 2).unwrap();
        assert!(table.enter(client(1), 2).is_none());
        assert!(table.enter(client(2), 2).is_some());
        drop(first);
        assert!(table.enter(client(1), 2).is_some());
    }

    #[test]
    fn failures_past_the_burst_owe_one_interval_each_and_successes_are_refunded() {
        let throttle = BindThrottle::new(3, Duration::from_secs(10));
        for _ in 0..3 {
            let ticket = throttle.admit(client(1));
            assert!(ticket.delay.is_zero());
            throttle.settle(client(1), ticket, false);
        }
        // Each further bind reserves the next token: the waits grow by one interval each.
        let fourth = throttle.admit(client(1));
        let fifth = throttle.admit(client(1));
        assert!(fourth.delay > Duration::from_secs(9));
        assert!(fifth.delay > Duration::from_secs(19));
        // Another client is not affected.
        assert!(throttle.admit(client(2)).delay.is_zero());
        // A success gives its reservation back; the next waiter owes less.
        throttle.settle(client(1), fifth, true);
        let after_refund = throttle.admit(client(1)).delay;
        assert!(after_refund > Duration::from_secs(19) && after_refund < Duration::from_secs(25));
    }

    #[test]
    fn waits_stop_growing_at_the_delay_max() {
        let throttle = BindThrottle::new(1, Duration::from_secs(10));
        let ticket = throttle.admit(client(1));
        throttle.settle(client(1), ticket, false);
        let longest = (0..100)
            .map(|_| throttle.admit(client(1)).delay)
            .max()
            .unwrap();
        assert!(longest <= BIND_THROTTLE_DELAY_MAX);
        assert!(longest > BIND_THROTTLE_DELAY_MAX - Duration::from_secs(11));
    }

    #[test]
    fn a_full_table_sends_new_clients_to_the_shared_bucket() {
        let throttle = BindThrottle::new(1, Duration::from_secs(3600));
        for index in 0..BIND_THROTTLE_CLIENTS_MAX as u32 {
            let key = ClientKey::LocalUser(index);
            let ticket = throttle.admit(key);
            throttle.settle(key, ticket, false);
        }
        assert_eq!(throttle.tracked_clients(), BIND_THROTTLE_CLIENTS_MAX);
        let newcomer = ClientKey::LocalUser(u32::MAX);
        let ticket = throttle.admit(newcomer);
        throttle.settle(newcomer, ticket, false);
        assert_eq!(throttle.tracked_clients(), BIND_THROTTLE_CLIENTS_MAX);
        // The shared bucket (burst 1) is now empty: the next newcomer waits.
        assert!(!throttle
            .admit(ClientKey::LocalUser(u32::MAX - 1))
            .delay
            .is_zero());
    }

    #[test]
    fn no_interval_means_no_throttling() {
        let throttle = BindThrottle::new(1, Duration::ZERO);
        for _ in 0..10 {
            let ticket = throttle.admit(client(1));
            assert!(ticket.delay.is_zero());
            throttle.settle(client(1), ticket, false);
        }
        assert_eq!(throttle.tracked_clients(), 0);
    }
}
