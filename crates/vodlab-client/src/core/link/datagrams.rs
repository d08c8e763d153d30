//! One direction of an emulated access link for datagrams (QUIC's UDP):
//! a bottleneck queue drained at the link's rate (serialization delay),
//! then a one-way delay with bounded jitter, and random loss. Pure: `now`
//! is passed in, and every random choice is a seeded draw of the
//! datagram's index, so the same seed drops the same datagrams.
//!
//! For each datagram offered, in order:
//! 1. **loss**: datagram `k` (the `k`-th offered in this direction, from 0)
//!    is lost when [`draw`]`(seed, LOSS, k) < loss` — a function of the
//!    seed and the index only, so the drops over `n` datagrams are exactly
//!    [`losses`]`(seed, n, loss)` whatever the timing;
//! 2. **queue**: with a rate, a datagram that finds more than the queue's
//!    bytes waiting for the link is dropped at the tail (counted apart);
//! 3. **rate**: it is serialized after those waiting, `len × 8 / rate`;
//! 4. **delay and jitter**: it arrives `delay + jitter × draw(seed, JITTER,
//!    k)` after its serialization ends, but never before the datagram
//!    before it (no reordering: the link is one FIFO), so an arrival is
//!    always within `[end + delay, end + delay + jitter]`.

use std::time::Duration;

use crate::core::time::Time;

/// The draw stream of the loss decisions.
pub const LOSS: u64 = 1;
/// The draw stream of the jitter.
pub const JITTER: u64 = 2;

/// The default queue: 100 ms at the link's rate, between 32 KiB and 4 MiB
/// (a home router's buffer; large enough for a few windows of a slow link,
/// small enough that a sender filling it meets tail drops).
pub fn default_queue_bytes(rate_bps: f64) -> usize {
    ((rate_bps / 8.0 * 0.100) as usize).clamp(32 * 1024, 4 << 20)
}

/// The parameters of one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirectionSpec {
    /// Rate in bit/s (0: unlimited, no queue).
    pub rate_bps: f64,
    /// One-way delay.
    pub delay: Duration,
    /// Largest extra delay, drawn uniformly in `[0, jitter]` per datagram.
    pub jitter: Duration,
    /// Probability of losing a datagram, `0.0 ..< 1.0`.
    pub loss: f64,
    /// Bytes the queue holds beyond the datagram being serialized (with a
    /// rate only); see [`default_queue_bytes`].
    pub queue_bytes: usize,
    /// Seed of the loss and jitter draws.
    pub seed: u64,
}

impl DirectionSpec {
    /// True when the direction changes nothing (no rate, delay, jitter or
    /// loss): a datagram passes at once.
    pub fn is_transparent(&self) -> bool {
        self.rate_bps == 0.0 && self.delay.is_zero() && self.jitter.is_zero() && self.loss == 0.0
    }
}

/// What became of an offered datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It arrives at this time.
    Deliver(Time),
    /// Lost at random.
    Lost,
    /// Dropped at the tail of a full queue.
    QueueFull,
}

/// The counts of one direction (what `transport.quic_link` reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirectionCounts {
    /// Datagrams passed (delivered or to be delivered).
    pub passed_datagrams: u64,
    /// Their bytes (UDP payload).
    pub passed_bytes: u64,
    /// Datagrams lost at random.
    pub lost_datagrams: u64,
    /// Their bytes.
    pub lost_bytes: u64,
    /// Datagrams dropped by a full queue.
    pub queue_dropped_datagrams: u64,
    /// Their bytes.
    pub queue_dropped_bytes: u64,
}

impl DirectionCounts {
    /// Datagrams offered to the link: passed, lost and queue-dropped.
    pub fn offered(&self) -> u64 {
        self.passed_datagrams + self.lost_datagrams + self.queue_dropped_datagrams
    }

    /// The counts in a fixed order (passed, passed bytes, lost, lost bytes,
    /// queue-dropped, queue-dropped bytes), for sums and dumps.
    pub fn to_array(&self) -> [u64; 6] {
        [
            self.passed_datagrams,
            self.passed_bytes,
            self.lost_datagrams,
            self.lost_bytes,
            self.queue_dropped_datagrams,
            self.queue_dropped_bytes,
        ]
    }

    /// From [`Self::to_array`]'s order.
    pub fn from_array(a: [u64; 6]) -> Self {
        Self {
            passed_datagrams: a[0],
            passed_bytes: a[1],
            lost_datagrams: a[2],
            lost_bytes: a[3],
            queue_dropped_datagrams: a[4],
            queue_dropped_bytes: a[5],
        }
    }

    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &DirectionCounts) {
        let mut a = self.to_array();
        for (x, y) in a.iter_mut().zip(o.to_array()) {
            *x += y;
        }
        *self = Self::from_array(a);
    }
}

/// splitmix64's output function: a bijection of `u64` that mixes every bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seeded draw of datagram `index` on `stream` ([`LOSS`], [`JITTER`]):
/// uniform in `[0, 1)`, a pure function of its arguments.
pub fn draw(seed: u64, stream: u64, index: u64) -> f64 {
    let z = mix(seed ^ mix(stream.wrapping_add(0x9e37_79b9_7f4a_7c15)))
        .wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (mix(z) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Whether datagram `index` is lost at probability `loss`.
pub fn is_lost(seed: u64, index: u64, loss: f64) -> bool {
    loss > 0.0 && draw(seed, LOSS, index) < loss
}

/// The datagrams among the first `n` offered that the seeded model loses.
pub fn losses(seed: u64, n: u64, loss: f64) -> u64 {
    (0..n).filter(|&k| is_lost(seed, k, loss)).count() as u64
}

/// The seed of one direction of one session's link: the run's seed, the
/// session (`shard`, `index`) and the direction (0 up, 1 down), mixed.
pub fn session_seed(run_seed: u64, shard: u64, index: u64, direction: u64) -> u64 {
    mix(mix(mix(run_seed ^ 0x5155_4943) ^ shard) ^ index.wrapping_mul(4).wrapping_add(direction))
}

/// One direction's state.
#[derive(Debug, Clone)]
pub struct Direction {
    spec: DirectionSpec,
    /// Bytes per second (0: unlimited).
    rate: f64,
    /// Datagrams offered so far (the next one's index).
    next: u64,
    /// When the link finishes serializing what it holds.
    busy_until: Time,
    /// The last arrival (none before it may arrive later: FIFO).
    last_arrival: Time,
    counts: DirectionCounts,
}

impl Direction {
    /// A direction of `spec`, idle at `now`.
    pub fn new(spec: DirectionSpec, now: Time) -> Self {
        Self {
            spec,
            rate: spec.rate_bps / 8.0,
            next: 0,
            busy_until: now,
            last_arrival: now,
            counts: DirectionCounts::default(),
        }
    }

    /// Its parameters.
    pub fn spec(&self) -> &DirectionSpec {
        &self.spec
    }

    /// Bytes waiting for the link at `now` (the one being serialized
    /// included).
    pub fn backlog(&self, now: Time) -> f64 {
        if self.rate <= 0.0 {
            return 0.0;
        }
        self.busy_until.saturating_duration_since(now).as_secs_f64() * self.rate
    }

    /// Offers a datagram of `len` bytes at `now`.
    pub fn offer(&mut self, now: Time, len: usize) -> Verdict {
        let k = self.next;
        self.next += 1;
        let n = len as u64;
        if is_lost(self.spec.seed, k, self.spec.loss) {
            self.counts.lost_datagrams += 1;
            self.counts.lost_bytes += n;
            return Verdict::Lost;
        }
        let end = if self.rate > 0.0 {
            let backlog = self.backlog(now);
            // a datagram that finds the link idle always fits
            if backlog > 0.0 && backlog + len as f64 > self.spec.queue_bytes as f64 {
                self.counts.queue_dropped_datagrams += 1;
                self.counts.queue_dropped_bytes += n;
                return Verdict::QueueFull;
            }
            let start = self.busy_until.max(now);
            self.busy_until = start + Duration::from_secs_f64(len as f64 / self.rate);
            self.busy_until
        } else {
            now
        };
        let jitter = if self.spec.jitter.is_zero() {
            Duration::ZERO
        } else {
            self.spec.jitter.mul_f64(draw(self.spec.seed, JITTER, k))
        };
        let at = (end + self.spec.delay + jitter).max(self.last_arrival);
        self.last_arrival = at;
        self.counts.passed_datagrams += 1;
        self.counts.passed_bytes += n;
        Verdict::Deliver(at)
    }

    /// The counts so far.
    pub fn counts(&self) -> DirectionCounts {
        self.counts
    }
}

#[cfg(test)]
mod tests;
