//! In-process access-link emulation.
//!
//! What is emulated (per session, from its client class):
//! - **downlink rate**: a token bucket on the client's reads, with a small
//!   socket receive buffer, so a server sending faster meets a full window
//!   and is slowed by TCP flow control, as by a slow access link;
//! - **uplink rate**: a token bucket on the client's writes (requests are
//!   small, so this matters only for request bodies);
//! - **one-way delay**: a request leaves `delay` after the client issues it,
//!   and response bytes count as arrived `delay` after they are read.
//!
//! What is not: the delay is applied above TCP, so the kernel still sees a
//! loopback round trip; congestion-window growth, the bandwidth-delay product
//! and losses are not emulated. Use network namespaces with netem/tbf for those.

use std::time::Duration;

use crate::core::time::Time;

/// Link parameters of a client class.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkSpec {
    /// Downlink in bit/s (0 = unlimited).
    pub down_bps: f64,
    /// Uplink in bit/s (0 = unlimited).
    pub up_bps: f64,
    /// One-way delay.
    pub delay: Duration,
}

impl LinkSpec {
    /// True when nothing is emulated.
    pub fn is_unlimited(&self) -> bool {
        self.down_bps == 0.0 && self.up_bps == 0.0 && self.delay.is_zero()
    }

    /// Socket receive buffer to request for a shaped downlink: about 20 ms
    /// at the link rate, between 8 and 256 KiB.
    pub fn recv_buffer(&self) -> Option<u32> {
        (self.down_bps > 0.0)
            .then(|| ((self.down_bps / 8.0 * 0.020) as u32).clamp(8 * 1024, 256 * 1024))
    }
}

/// A token bucket measured in bytes; pure (time is passed in). Only the
/// spans between the times it is given matter: an executor may count them
/// from any epoch (the connection's own [`crate::core::time::Clock`]).
///
/// Reads may overdraw it: the caller reads up to [`TokenBucket::chunk`] bytes,
/// [`TokenBucket::consume`]s what it got, and before the next read waits
/// [`TokenBucket::wait`]. The long-run rate is exact; bursts are bounded by
/// `chunk`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    tokens: f64,
    cap: f64,
    last: Time,
}

impl TokenBucket {
    /// A bucket of `bits_per_s`, starting full with about 10 ms of tokens.
    pub fn new(bits_per_s: f64, now: Time) -> Self {
        let rate = bits_per_s / 8.0;
        let cap = (rate * 0.010).clamp(1460.0, 64.0 * 1024.0);
        Self {
            rate,
            tokens: cap,
            cap,
            last: now,
        }
    }

    fn refill(&mut self, now: Time) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.cap);
        self.last = now;
    }

    /// Largest read to issue now.
    pub fn chunk(&self) -> usize {
        self.cap as usize
    }

    /// How long to wait at `now` before reading again (zero when tokens remain).
    pub fn wait(&mut self, now: Time) -> Duration {
        self.refill(now);
        if self.tokens > 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate + 1e-6)
        }
    }

    /// Takes `bytes` tokens at `now` (may go negative).
    pub fn consume(&mut self, now: Time, bytes: usize) {
        self.refill(now);
        self.tokens -= bytes as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_paces_to_its_rate() {
        // 1 Mbit/s = 125,000 B/s: 524,288 bytes take about 4.19 s of virtual time
        let t0 = Time::ZERO;
        let mut now = t0;
        let mut b = TokenBucket::new(1e6, now);
        let mut left = 524_288usize;
        while left > 0 {
            now += b.wait(now);
            let n = b.chunk().min(left);
            b.consume(now, n);
            left -= n;
        }
        let secs = (now - t0).as_secs_f64();
        assert!((secs - 4.194).abs() < 0.05, "{secs}");
    }

    #[test]
    fn recv_buffer_is_small_for_slow_links() {
        let l = LinkSpec {
            down_bps: 1e6,
            ..Default::default()
        };
        assert_eq!(l.recv_buffer(), Some(8 * 1024));
        assert_eq!(LinkSpec::default().recv_buffer(), None);
    }
}
