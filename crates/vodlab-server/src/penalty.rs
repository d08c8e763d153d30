//! The per-address penalty of the accept path: an address whose HTTP/2
//! connections were closed for abuse (a flood: rapid reset, CONTINUATION,
//! SETTINGS, PING, WINDOW_UPDATE, small DATA, too many error resets) is
//! banned — its new connections are closed at accept, before any task,
//! TLS or HTTP/2 work — for a time that doubles with each abuse while it
//! is remembered (`ban`, 2 `ban`, 4 `ban`... up to `max_ban`). After a ban
//! the address is on probation for `probation`: its new connections pass
//! a token bucket of `probation_per_s` a second (burst the same), and
//! abuse there escalates the ban; a probation served without abuse
//! forgets the address. So an attacker that reconnects as fast as it can
//! costs the server one accept and close per attempt instead of a
//! connection's setup and its flood's detection.
//!
//! IPv4 addresses are keyed whole, IPv6 ones by their /64 (what one host
//! is usually given). The table is bounded: when it is full, forgotten
//! entries are dropped first, then the one whose last abuse is oldest.
//!
//! No I/O and no clock: `now` is passed in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The penalty's settings (from `[h2]`'s `abuse_*` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PenaltySettings {
    /// The first ban; zero turns the penalty off.
    pub ban: Duration,
    /// The longest ban.
    pub max_ban: Duration,
    /// How long an address stays remembered after its ban ends.
    pub probation: Duration,
    /// New connections a second on probation (0 = not limited).
    pub probation_per_s: u32,
    /// Addresses remembered at most.
    pub table: usize,
}

/// What the accept path does with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Served.
    Yes,
    /// Closed: the address is banned.
    Banned,
    /// Closed: the address is on probation and over its rate.
    Throttled,
}

#[derive(Debug, Clone)]
struct Entry {
    /// Abuses remembered (the ban doubles with each).
    strikes: u32,
    banned_until: Instant,
    /// The end of probation: the entry is forgotten after it.
    forget_at: Instant,
    last_abuse: Instant,
    tokens: f64,
    refilled: Instant,
}

/// Addresses closed for abuse, with their bans (see the module doc).
#[derive(Debug)]
pub struct PenaltyBox {
    cfg: PenaltySettings,
    table: HashMap<IpAddr, Entry>,
}

/// What [`PenaltyBox::abuse`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Banned {
    /// The ban given.
    pub ban: Duration,
    /// The address's abuses remembered, this one included.
    pub strikes: u32,
    /// An entry was evicted to make room.
    pub evicted: bool,
}

/// The table key of an address: IPv4 whole, IPv6 by its /64 (an
/// IPv4-mapped IPv6 address as its IPv4 one).
pub fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

impl PenaltyBox {
    /// An empty box.
    pub fn new(cfg: PenaltySettings) -> Self {
        Self {
            cfg,
            table: HashMap::new(),
        }
    }

    /// Whether the penalty is on.
    pub fn enabled(&self) -> bool {
        !self.cfg.ban.is_zero() && self.cfg.table > 0
    }

    /// Addresses remembered.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no address is remembered.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Addresses banned at `now`.
    pub fn banned(&self, now: Instant) -> usize {
        self.table.values().filter(|e| now < e.banned_until).count()
    }

    /// The keys ([`key`]) banned at `now`, and when the first of those bans
    /// ends (`None` when none is banned): what the listener's SYN filter
    /// ([`crate::synfilter`]) drops until then.
    pub fn banned_keys(&self, now: Instant) -> (Vec<IpAddr>, Option<Instant>) {
        let mut keys = Vec::new();
        let mut next: Option<Instant> = None;
        for (k, e) in &self.table {
            if now < e.banned_until {
                keys.push(*k);
                next = Some(next.map_or(e.banned_until, |n| n.min(e.banned_until)));
            }
        }
        keys.sort();
        (keys, next)
    }

    /// Whether a new connection from `ip` is served at `now`.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> Admit {
        let k = key(ip);
        let Some(e) = self.table.get_mut(&k) else {
            return Admit::Yes;
        };
        if now < e.banned_until {
            return Admit::Banned;
        }
        if now >= e.forget_at {
            self.table.remove(&k);
            return Admit::Yes;
        }
        let rate = f64::from(self.cfg.probation_per_s);
        if rate == 0.0 {
            return Admit::Yes;
        }
        let since = now.saturating_duration_since(e.refilled).as_secs_f64();
        e.tokens = (e.tokens + since * rate).min(rate);
        e.refilled = now;
        if e.tokens >= 1.0 {
            e.tokens -= 1.0;
            Admit::Yes
        } else {
            Admit::Throttled
        }
    }

    /// Notes that a connection from `ip` was closed for abuse at `now` and
    /// bans the address: `ban` doubled for each abuse it is remembered
    /// for, at most `max_ban`. `None` when the penalty is off.
    pub fn abuse(&mut self, ip: IpAddr, now: Instant) -> Option<Banned> {
        if !self.enabled() {
            return None;
        }
        let k = key(ip);
        let mut evicted = false;
        if !self.table.contains_key(&k) && self.table.len() >= self.cfg.table {
            self.table.retain(|_, e| now < e.forget_at);
            if self.table.len() >= self.cfg.table {
                let oldest = self
                    .table
                    .iter()
                    .min_by_key(|(_, e)| e.last_abuse)
                    .map(|(k, _)| *k);
                if let Some(o) = oldest {
                    self.table.remove(&o);
                    evicted = true;
                }
            }
        }
        let cfg = self.cfg;
        let e = self.table.entry(k).or_insert(Entry {
            strikes: 0,
            banned_until: now,
            forget_at: now,
            last_abuse: now,
            tokens: 0.0,
            refilled: now,
        });
        if now >= e.forget_at {
            e.strikes = 0;
        }
        e.strikes = e.strikes.saturating_add(1);
        let shift = (e.strikes - 1).min(30);
        let ban = cfg
            .ban
            .checked_mul(1 << shift)
            .unwrap_or(cfg.max_ban)
            .min(cfg.max_ban.max(cfg.ban));
        // connections already open when the ban began may still be caught
        // abusing: a ban never shortens
        e.banned_until = e.banned_until.max(now + ban);
        e.forget_at = e.banned_until + cfg.probation;
        e.last_abuse = now;
        // probation starts with an empty bucket
        e.tokens = 0.0;
        e.refilled = e.banned_until;
        Some(Banned {
            ban,
            strikes: e.strikes,
            evicted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn cfg() -> PenaltySettings {
        PenaltySettings {
            ban: Duration::from_secs(1),
            max_ban: Duration::from_secs(8),
            probation: Duration::from_secs(10),
            probation_per_s: 2,
            table: 3,
        }
    }
    fn v4(d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, d))
    }
    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    #[test]
    fn an_abusive_address_is_banned_and_another_is_not() {
        let t = Instant::now();
        let mut b = PenaltyBox::new(cfg());
        assert_eq!(b.admit(v4(2), t), Admit::Yes);
        let got = b.abuse(v4(2), t).unwrap();
        assert_eq!((got.ban, got.strikes), (s(1.0), 1));
        assert_eq!(b.admit(v4(2), t + s(0.5)), Admit::Banned);
        assert_eq!(b.admit(v4(1), t + s(0.5)), Admit::Yes);
        assert_eq!(b.banned(t + s(0.5)), 1);
        assert_eq!(b.banned(t + s(1.0)), 0);
    }

    #[test]
    fn bans_double_while_remembered_up_to_the_maximum() {
        let t = Instant::now();
        let mut b = PenaltyBox::new(cfg());
        let mut now = t;
        let mut bans = vec![];
        for _ in 0..6 {
            let got = b.abuse(v4(2), now).unwrap();
            bans.push(got.ban.as_secs());
            // the attacker comes back as its ban ends and abuses again
            now += got.ban;
            assert_eq!(b.admit(v4(2), now - s(0.001)), Admit::Banned);
        }
        assert_eq!(bans, [1, 2, 4, 8, 8, 8]);
    }

    #[test]
    fn probation_limits_the_rate_and_a_quiet_probation_forgets() {
        let t = Instant::now();
        let mut b = PenaltyBox::new(cfg());
        b.abuse(v4(2), t);
        // the ban ends at t+1; the bucket starts empty and fills at 2/s
        assert_eq!(b.admit(v4(2), t + s(1.0)), Admit::Throttled);
        assert_eq!(b.admit(v4(2), t + s(1.5)), Admit::Yes);
        assert_eq!(b.admit(v4(2), t + s(1.5)), Admit::Throttled);
        let served = (0..100)
            .filter(|i| b.admit(v4(2), t + s(2.0 + *i as f64 * 0.01)) == Admit::Yes)
            .count();
        assert_eq!(served, 2, "under 1 s at 2/s");
        // probation (10 s after the ban) served: forgotten, strikes reset
        assert_eq!(b.admit(v4(2), t + s(11.5)), Admit::Yes);
        assert!(b.is_empty());
        assert_eq!(b.abuse(v4(2), t + s(12.0)).unwrap().strikes, 1);
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_oldest_abuser() {
        let t = Instant::now();
        let mut b = PenaltyBox::new(cfg());
        for d in 1..=3 {
            assert!(!b.abuse(v4(d), t + s(d as f64)).unwrap().evicted);
        }
        let got = b.abuse(v4(9), t + s(5.0)).unwrap();
        assert!(got.evicted);
        assert_eq!(b.len(), 3);
        assert_eq!(b.admit(v4(1), t + s(5.1)), Admit::Yes, "evicted");
        assert_eq!(b.admit(v4(9), t + s(5.1)), Admit::Banned);
        // forgotten entries go first
        let later = t + s(100.0);
        assert!(!b.abuse(v4(7), later).unwrap().evicted);
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn ipv6_is_keyed_by_its_64_and_mapped_v4_as_v4() {
        let t = Instant::now();
        let mut b = PenaltyBox::new(cfg());
        let a: IpAddr = "2001:db8:1:2::5".parse::<Ipv6Addr>().unwrap().into();
        let same: IpAddr = "2001:db8:1:2:ffff::9".parse::<Ipv6Addr>().unwrap().into();
        let other: IpAddr = "2001:db8:1:3::5".parse::<Ipv6Addr>().unwrap().into();
        b.abuse(a, t);
        assert_eq!(b.admit(same, t), Admit::Banned);
        assert_eq!(b.admit(other, t), Admit::Yes);
        let mapped: IpAddr = "::ffff:127.0.0.2".parse::<Ipv6Addr>().unwrap().into();
        b.abuse(mapped, t);
        assert_eq!(b.admit(v4(2), t), Admit::Banned);
    }

    #[test]
    fn banned_keys_list_the_bans_in_force_and_the_first_end() {
        let mut b = PenaltyBox::new(cfg());
        let t = Instant::now();
        assert_eq!(b.banned_keys(t), (vec![], None));
        b.abuse(v4(3), t);
        b.abuse(v4(2), t + s(0.5));
        let v6: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
        b.abuse(v6, t + s(0.7));
        let (keys, next) = b.banned_keys(t + s(0.8));
        assert_eq!(keys, vec![v4(2), v4(3), key(v6)]);
        assert_eq!(next, Some(t + cfg().ban));
        // v4(3)'s ban has ended: it is on probation, not banned
        let (keys, next) = b.banned_keys(t + cfg().ban);
        assert_eq!(keys, vec![v4(2), key(v6)]);
        assert_eq!(next, Some(t + s(0.5) + cfg().ban));
    }

    #[test]
    fn off_when_the_ban_is_zero() {
        let mut b = PenaltyBox::new(PenaltySettings {
            ban: Duration::ZERO,
            ..cfg()
        });
        let t = Instant::now();
        assert_eq!(b.abuse(v4(2), t), None);
        assert_eq!(b.admit(v4(2), t), Admit::Yes);
    }
}
