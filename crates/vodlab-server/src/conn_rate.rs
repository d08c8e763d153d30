//! New connections a second per address (`--conn-rate-per-address`): a
//! token bucket per address (keyed as the penalty keys them: IPv4 whole,
//! IPv6 by /64), `rate` a second with a burst of one second's worth. An
//! address over its rate is reported to the penalty ([`crate::penalty`])
//! as abuse: banned, and with the SYN filter dropped in the kernel. This
//! is the lever against a flood of bare connections (connect, perhaps a
//! preface, close), which no per-connection limit sees: each costs the
//! server ~45 µs of accept and setup (docs/benchmarks.md). Off by default:
//! load generators and NATs open many connections from one address.
//!
//! The table is bounded ([`TABLE`]): when full, addresses that have used
//! at most one connection's worth of their bucket (as good as new ones)
//! are dropped first, then the one with the most tokens left, so an
//! address near its limit is never the one forgotten. No I/O and no clock: `now` is passed in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// Addresses tracked at most.
pub const TABLE: usize = 16_384;

/// The per-address buckets.
#[derive(Debug)]
pub struct ConnRate {
    rate: f64,
    table: HashMap<IpAddr, (f64, Instant)>,
}

impl ConnRate {
    /// `rate` new connections a second per address (burst: `rate`).
    pub fn new(rate: u32) -> Self {
        Self {
            rate: f64::from(rate.max(1)),
            table: HashMap::new(),
        }
    }

    /// Addresses tracked now.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no address is tracked.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Takes a token for a new connection from `ip` at `now`; false when
    /// the address is over its rate.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> bool {
        let k = crate::penalty::key(ip);
        if !self.table.contains_key(&k) && self.table.len() >= TABLE {
            self.evict(now);
        }
        let rate = self.rate;
        let (tokens, last) = self.table.entry(k).or_insert((rate, now));
        let since = now.saturating_duration_since(*last).as_secs_f64();
        *tokens = (*tokens + since * rate).min(rate);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Makes room: drops every address that has used at most one
    /// connection's worth of its bucket (as good as new), then, if none did,
    /// the one with the most tokens; an address near its limit stays.
    fn evict(&mut self, now: Instant) {
        let rate = self.rate;
        let current = |(t, last): &(f64, Instant)| {
            (t + now.saturating_duration_since(*last).as_secs_f64() * rate).min(rate)
        };
        self.table.retain(|_, v| current(v) < rate - 1.0);
        if self.table.len() >= TABLE {
            let most = self
                .table
                .iter()
                .max_by(|a, b| current(a.1).total_cmp(&current(b.1)))
                .map(|(k, _)| *k);
            if let Some(k) = most {
                self.table.remove(&k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn v4(d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, d))
    }

    #[test]
    fn a_burst_of_one_second_then_the_rate() {
        let mut c = ConnRate::new(10);
        let t = Instant::now();
        let ok = (0..15).filter(|_| c.admit(v4(2), t)).count();
        assert_eq!(ok, 10, "the burst is one second's worth");
        // another address has its own bucket
        assert!(c.admit(v4(3), t));
        // 0.5 s later: 5 more
        let later = t + Duration::from_millis(500);
        let ok = (0..10).filter(|_| c.admit(v4(2), later)).count();
        assert_eq!(ok, 5);
        // at the rate, every connection passes
        let mut now = later + Duration::from_secs(2);
        for _ in 0..100 {
            assert!(c.admit(v4(2), now));
            now += Duration::from_millis(100);
        }
    }

    #[test]
    fn the_table_is_bounded_and_keeps_the_busy_addresses() {
        let mut c = ConnRate::new(2);
        let t = Instant::now();
        // the attacker drains its bucket
        assert!(c.admit(v4(2), t) && c.admit(v4(2), t) && !c.admit(v4(2), t));
        // a full table of one-connection addresses
        for i in 0..TABLE as u32 {
            c.admit(
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)),
                t + Duration::from_millis(1),
            );
        }
        assert!(c.len() <= TABLE);
        // the attacker is still remembered, still over its rate
        assert!(!c.admit(v4(2), t + Duration::from_millis(2)));
    }
}
