//! In-process access-link emulation.
//!
//! What is emulated (per session, from its client class):
//! - **downlink rate**: a token bucket on the client's reads, with a
//!   bounded socket receive buffer, so a server sending faster meets a full
//!   window and is slowed by TCP flow control, as by a slow access link
//!   (HTTP/1.1 bodies are read in batches of up to 500 ms of the link, each
//!   when the chunk-by-chunk reads would have ended it:
//!   `io::http::SHAPED_READ_INTERVAL`);
//! - **uplink rate**: a token bucket on the client's writes (requests are
//!   small, so this matters only for request bodies);
//! - **one-way delay**: a request leaves `delay` after the client issues it,
//!   and response bytes count as arrived `delay` after they are read.
//!
//! For QUIC ([`datagrams`]): the same rates and delay applied to each UDP
//! datagram, with jitter, random loss and a bounded bottleneck queue.
//!
//! What is not (TCP): the delay is applied above TCP, so the kernel still sees a
//! loopback round trip; congestion-window growth, the bandwidth-delay product
//! and losses are not emulated. Use network namespaces with netem/tbf for those.

use std::time::Duration;

use crate::core::time::Time;

pub mod datagrams;

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

/// A link's read chunk at `bytes_per_s`: about 10 ms of its bytes, at
/// least one 1,460-byte segment, at most 64 KiB (a [`TokenBucket`]'s size,
/// and the step a batched read's bytes are dated in).
pub fn chunk_bytes(bytes_per_s: f64) -> f64 {
    (bytes_per_s * 0.010).clamp(1460.0, 64.0 * 1024.0)
}

/// A link's bytes in `interval` at `bytes_per_s`, in whole `chunk`s, at
/// least one ([`TokenBucket::piece`]; a kernel-shaped link's batch).
pub fn whole_chunks(bytes_per_s: f64, chunk: usize, interval: Duration) -> usize {
    let chunk = chunk.max(1);
    ((bytes_per_s * interval.as_secs_f64()) as usize / chunk).max(1) * chunk
}

/// A token bucket measured in bytes; pure (time is passed in). Only the
/// spans between the times it is given matter: an executor may count them
/// from any epoch (the connection's own [`crate::core::time::Clock`]).
///
/// Reads may overdraw it: the caller reads up to [`TokenBucket::chunk`] bytes,
/// [`TokenBucket::consume`]s what it got, and before the next read waits
/// [`TokenBucket::wait`]. The long-run rate is exact; bursts are bounded by
/// `chunk`.
///
/// A reader may also take several chunks in one read
/// ([`TokenBucket::wait_for`]): it waits until the read that would have
/// carried the last of them chunk by chunk, so the batch ends exactly when
/// the chunk-by-chunk reads would have, with one read instead of several.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    tokens: f64,
    cap: f64,
    /// Tokens a batch being waited for may hold beyond `cap`
    /// ([`TokenBucket::wait_for`]; 0 otherwise): chunk-by-chunk reads
    /// would have spent them as they came, so the cap does not cut them.
    allow: f64,
    last: Time,
}

impl TokenBucket {
    /// A bucket of `bits_per_s`, starting full with about 10 ms of tokens.
    pub fn new(bits_per_s: f64, now: Time) -> Self {
        let rate = bits_per_s / 8.0;
        let cap = chunk_bytes(rate);
        Self {
            rate,
            tokens: cap,
            cap,
            allow: 0.0,
            last: now,
        }
    }

    fn refill(&mut self, now: Time) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.cap + self.allow);
        self.last = now;
    }

    /// Largest read to issue now.
    pub fn chunk(&self) -> usize {
        self.cap as usize
    }

    /// The rate, bytes per second.
    pub fn bytes_per_s(&self) -> f64 {
        self.rate
    }

    /// The largest batch to read at once when reads are spaced by about
    /// `interval`: the link's bytes in that time in whole chunks, at least
    /// one (whole chunks keep a batch's end on a chunk-by-chunk read's).
    pub fn piece(&self, interval: Duration) -> usize {
        whole_chunks(self.rate, self.chunk(), interval)
    }

    /// How long to wait at `now` before one read of `bytes` (chunks taken
    /// together): until the moment chunk-by-chunk reads ([`Self::wait`],
    /// [`Self::chunk`], [`Self::consume`]) would have issued the read that
    /// carries the last of these bytes. For `bytes <= chunk` this is
    /// [`Self::wait`]. [`Self::consume`] the bytes the read got.
    pub fn wait_for(&mut self, now: Time, bytes: usize) -> Duration {
        let chunk = self.chunk().max(1);
        // the chunk-by-chunk reads before the last one
        let before = (bytes.max(1).div_ceil(chunk) - 1) * chunk;
        // tokens until now are capped as always (an idle link's bucket
        // holds one chunk); from now on the batch's chunks accrue
        self.refill(now);
        self.allow = before as f64;
        let need = self.tokens - before as f64;
        if need > 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-need / self.rate + 1e-6)
        }
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
        self.allow = 0.0;
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

    /// Reads `total` bytes of a link that always has data, `batch` bytes
    /// at most per read; the time each read is issued.
    fn read_times(bits_per_s: f64, total: usize, batch: Option<usize>, idle: Duration) -> Vec<f64> {
        let t0 = Time::ZERO;
        let mut b = TokenBucket::new(bits_per_s, t0);
        // the bucket starts after an idle spell (full), as a player's next segment
        let mut now = t0 + idle;
        let (mut left, mut times) = (total, Vec::new());
        while left > 0 {
            let n = batch.unwrap_or(b.chunk()).min(left);
            now += b.wait_for(now, n);
            times.push((now - t0).as_secs_f64());
            b.consume(now, n);
            left -= n;
        }
        times
    }

    #[test]
    fn a_batched_read_ends_when_the_chunk_by_chunk_reads_would() {
        // 120 kbit/s: 1,460-byte chunks; a 25,000-byte segment
        for idle in [Duration::ZERO, Duration::from_secs(4)] {
            let one = read_times(120e3, 25_000, None, idle);
            let b = TokenBucket::new(120e3, Time::ZERO);
            let piece = b.piece(Duration::from_millis(500));
            assert_eq!(piece, 7_300);
            let batched = read_times(120e3, 25_000, Some(piece), idle);
            assert_eq!(one.len(), 18);
            assert_eq!(batched.len(), 4);
            // the last byte is read at the same moment (to the 1 µs steps)
            let (a, z) = (one.last().unwrap(), batched.last().unwrap());
            assert!((a - z).abs() < 1e-4, "{a} vs {z}");
            // and each batch ends with the chunk that would have ended it
            let mut at = 0;
            for (i, t) in batched.iter().enumerate() {
                at += if i + 1 < batched.len() {
                    piece
                } else {
                    25_000 - 3 * piece
                };
                let k = at.div_ceil(1460) - 1;
                assert!((one[k] - t).abs() < 1e-4, "batch {i}: {t} vs {}", one[k]);
            }
        }
        // a batch of one chunk or less waits as a plain read
        let mut a = TokenBucket::new(1e6, Time::ZERO);
        let mut b = a.clone();
        let now = Time::ZERO + Duration::from_millis(3);
        a.consume(now, 5_000);
        b.consume(now, 5_000);
        assert_eq!(a.wait(now), b.wait_for(now, 100));
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
