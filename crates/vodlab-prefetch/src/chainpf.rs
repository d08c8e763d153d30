//! Chapter 5's prefetch policies (thesis 5.6.1 [T1726–T1750]) as
//! controllers on [`PrefetchController`], so `vodlab serve` and the
//! trace-driven simulator ([`crate::sim`]) run the same objects:
//!
//! - Proportional and Square-Root: [`crate::auto::Scaled`] with the
//!   reference rate [`REFERENCE_BPS`] (2,000 kbit/s [T1772]) and exponent 1
//!   or 0.5;
//! - [`FirstGrow`]: per chain, a first prefetch sized by the chain's start
//!   (Table 5.6), then each next one 3.35 × the chain's length so far (the
//!   survival distance at P = 0.45), capped at a maximum; First-Grow-SR
//!   scales the maximum by √(b / ref).
//!
//! Chains of open-ended requests are told by [`RequestInfo::open_ended`]
//! (the request's `Range: bytes=A-`).
//!
//! A chain here is what the controller sees of one session and one file:
//! a request continues the chain when it starts inside what was requested
//! or prefetched so far; anything else starts a new chain.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::controller::{
    ChainState, PrefetchController, PrefetchDecision, RequestInfo, SessionState,
};

/// The thesis's reference bit rate for sizes of bit-rate-scaled policies:
/// 2,000 kbit/s [T1772].
pub const REFERENCE_BPS: u64 = 2_000_000;

/// Table 5.6 [T1740–T1744]: first prefetch of a chain starting at offset 0
/// with an open-ended request.
pub const FIRST_OPEN_AT_ZERO: u64 = 1_049_212;
/// Table 5.6: first prefetch of a chain starting at 0 with a chunk request.
pub const FIRST_CHUNK_AT_ZERO: u64 = 131_073;
/// Table 5.6: first prefetch of a chain starting after 0.
pub const FIRST_LATER: u64 = 2_936_037;
/// Growth factor: the survival distance d/x at P = 0.45 in the 1–200 MB
/// piece [T1561].
pub const GROWTH: f64 = 3.35;

fn scale(bitrate: Option<u64>, reference: u64, exponent: f64) -> f64 {
    match bitrate {
        Some(b) if b > 0 && reference > 0 => (b as f64 / reference as f64).powf(exponent),
        _ => 1.0,
    }
}

#[derive(Debug, Clone, Copy)]
struct Track {
    start: u64,
    /// End (exclusive) of what was requested or prefetched.
    frontier: u64,
    last: Instant,
}

/// Most chains First-Grow tracks; beyond it, chains idle longest are
/// forgotten (they restart with a first size).
pub const FIRST_GROW_CHAINS: usize = 65_536;
/// A chain idle this long is forgotten (the chain window of [T1504]).
pub const FIRST_GROW_IDLE: Duration = Duration::from_secs(40);

/// First-Grow and First-Grow-SR [T1734–T1750].
#[derive(Debug, Clone)]
pub struct FirstGrow {
    /// Largest prefetch, bytes (at the reference bit rate for SR).
    pub max: u64,
    /// Scale the maximum by √(b / reference) (First-Grow-SR).
    pub square_root: bool,
    /// Reference bit rate, bit/s.
    pub reference_bps: u64,
    /// Next size = growth × chain length so far.
    pub growth: f64,
    /// A chain idle this long is forgotten ([`FIRST_GROW_IDLE`], divided by
    /// k under time compression).
    pub idle: Duration,
    chains: HashMap<(String, u64), Track>,
}

impl FirstGrow {
    /// First-Grow (`square_root` false) or First-Grow-SR with the thesis's
    /// constants.
    pub fn new(max: u64, square_root: bool) -> Self {
        FirstGrow {
            max,
            square_root,
            reference_bps: REFERENCE_BPS,
            growth: GROWTH,
            idle: FIRST_GROW_IDLE,
            chains: HashMap::new(),
        }
    }

    /// The first size of a chain starting with `req` (Table 5.6).
    pub fn first_size(req: &RequestInfo<'_>) -> u64 {
        if req.offset > 0 {
            FIRST_LATER
        } else if req.open_ended {
            FIRST_OPEN_AT_ZERO
        } else {
            FIRST_CHUNK_AT_ZERO
        }
    }

    fn cap(&self, req: &RequestInfo<'_>) -> u64 {
        if self.square_root {
            (self.max as f64 * scale(req.bitrate_bps, self.reference_bps, 0.5)).round() as u64
        } else {
            self.max
        }
    }

    fn forget_idle(&mut self, now: Instant) {
        if self.chains.len() >= FIRST_GROW_CHAINS {
            let idle = self.idle;
            self.chains
                .retain(|_, t| now.saturating_duration_since(t.last) < idle);
            if self.chains.len() >= FIRST_GROW_CHAINS {
                self.chains.clear();
            }
        }
    }
}

impl PrefetchController for FirstGrow {
    fn on_request(
        &mut self,
        now: Instant,
        req: &RequestInfo<'_>,
        _session: &mut SessionState,
        _chain: Option<&mut ChainState>,
    ) -> PrefetchDecision {
        let key = (req.session.to_string(), req.file);
        let end = req.offset + req.length;
        let cap = self.cap(req).max(1);
        let known = self.chains.get(&key).copied().filter(|t| {
            req.offset >= t.start
                && req.offset <= t.frontier
                && now.saturating_duration_since(t.last) <= self.idle
        });
        let (start, frontier, size) = match known {
            Some(t) => {
                let so_far = req.offset - t.start;
                let size = ((self.growth * so_far as f64) as u64).clamp(1, cap);
                (t.start, t.frontier.max(end), size)
            }
            None => {
                self.forget_idle(now);
                (req.offset, end, Self::first_size(req).min(cap))
            }
        };
        // the size is the policy's, even under a longer request: an
        // open-ended request asks for the rest of the file
        let decision = if req.resident {
            PrefetchDecision::None
        } else {
            PrefetchDecision::Prefetch {
                offset: req.offset,
                len: size,
            }
        };
        let frontier = match decision {
            PrefetchDecision::Prefetch { offset, len } => frontier.max(offset + len),
            PrefetchDecision::None => frontier,
        };
        self.chains.insert(
            key,
            Track {
                start,
                frontier,
                last: now,
            },
        );
        decision
    }
    fn on_read_complete(&mut self, _now: Instant, _bytes: u64, _duration: Duration) {}
    fn on_evicted(&mut self, _now: Instant, _bytes: u64, _unused_for: Duration) {}
    fn on_tick(&mut self, now: Instant) {
        let idle = self.idle;
        self.chains
            .retain(|_, t| now.saturating_duration_since(t.last) <= idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(offset: u64, length: u64, size: u64, br: Option<u64>) -> RequestInfo<'static> {
        RequestInfo {
            session: "s",
            file: 1,
            offset,
            length,
            file_size: size,
            bitrate_bps: br,
            resident: false,
            // the tests' open-ended requests ask for the rest of the file
            open_ended: offset + length >= size,
        }
    }

    fn len(d: PrefetchDecision) -> u64 {
        match d {
            PrefetchDecision::Prefetch { len, .. } => len,
            PrefetchDecision::None => 0,
        }
    }

    #[test]
    fn first_grow_first_sizes_are_table_5_6() {
        let t = Instant::now();
        let mut s = SessionState::default();
        let big = 1 << 40;
        for (r, want) in [
            (req(0, big, big, None), 1_049_212),          // open-ended from 0
            (req(0, 1000, big, None), 131_073),           // chunk from 0
            (req(5_000_000, 1000, big, None), 2_936_037), // later
        ] {
            let mut fg = FirstGrow::new(64 << 20, false);
            assert_eq!(len(fg.on_request(t, &r, &mut s, None)), want);
        }
    }

    #[test]
    fn first_grow_grows_by_3_35_times_the_chain_so_far_up_to_the_maximum() {
        let t = Instant::now();
        let mut s = SessionState::default();
        let size = 1u64 << 40;
        let mut fg = FirstGrow::new(20_000_000, false);
        let first = len(fg.on_request(t, &req(0, 1000, size, None), &mut s, None));
        assert_eq!(first, 131_073);
        // the next miss at the end of the first prefetch: chain so far 131,073
        let d = fg.on_request(t, &req(first, 1000, size, None), &mut s, None);
        assert_eq!(len(d), (3.35 * 131_073.0) as u64);
        let mut pos = first + len(d);
        let mut sizes = vec![];
        for _ in 0..6 {
            let l = len(fg.on_request(t, &req(pos, 1000, size, None), &mut s, None));
            sizes.push(l);
            pos += l;
        }
        // geometric growth (factor 4.35 in position) until the cap
        assert_eq!(*sizes.last().unwrap(), 20_000_000);
        assert!(sizes.windows(2).all(|w| w[1] >= w[0]));
        // a hit inside the prefetched range prefetches nothing but keeps the chain
        let mut hit = req(pos - 10, 5, size, None);
        hit.resident = true;
        assert_eq!(fg.on_request(t, &hit, &mut s, None), PrefetchDecision::None);
        // a jump elsewhere starts a new chain with the later-offset size
        assert_eq!(
            len(fg.on_request(t, &req(pos + 50_000_000, 1000, size, None), &mut s, None)),
            2_936_037
        );
    }

    /// The decisions of a policy over one chain at nominal times (seconds)
    /// `at` / `k` and bit rate 8,000 kbit/s × `k`: a chain that grows,
    /// pauses 30 s (kept) and then 50 s (forgotten by the 40 s window).
    fn chain_under(policy: &crate::policy::PolicySpec, k: f64) -> Vec<u64> {
        let mut c = policy.build();
        let (t0, mut s, size) = (Instant::now(), SessionState::default(), 1u64 << 40);
        let mut pos = 0;
        let mut out = vec![];
        for at in [0.0, 1.0, 2.0, 3.0, 33.0, 34.0, 84.0, 85.0] {
            let br = Some((8_000_000.0 * k) as u64);
            let now = t0 + Duration::from_secs_f64(at / k);
            let l = len(c.on_request(now, &req(pos, 1000, size, br), &mut s, None));
            out.push(l);
            pos += l.max(1000);
        }
        out
    }

    #[test]
    fn a_time_compressed_first_grow_decides_as_the_nominal_one() {
        use crate::policy::PolicySpec;
        for text in ["first-grow:16M", "first-grow-sr:4M"] {
            let nominal: PolicySpec = text.parse().unwrap();
            let want = chain_under(&nominal, 1.0);
            // kept across the 30 s pause (grown), a new chain after 50 s
            assert_ne!(want[4], FIRST_LATER, "{text}: {want:?}");
            assert_eq!(want[6], FIRST_LATER, "{text}: {want:?}");
            for k in [4.0, 10.0] {
                let compressed = nominal.time_compressed(k).unwrap();
                assert_eq!(chain_under(&compressed, k), want, "{compressed} at k = {k}");
                // the nominal settings under a compressed load decide
                // otherwise: the 5 s pause keeps the chain
                assert_ne!(
                    chain_under(&nominal, k),
                    want,
                    "{text} uncompressed at k = {k}"
                );
            }
        }
        // First-Grow-SR's cap follows the reference: at 8,000 kbit/s it is
        // twice 4M, nominal and compressed alike
        let sr: PolicySpec = "first-grow-sr:4M".parse().unwrap();
        assert_eq!(chain_under(&sr, 1.0).iter().max(), Some(&(8 << 20)));
    }

    #[test]
    fn first_grow_sr_scales_the_maximum_by_the_square_root_of_the_bit_rate() {
        let t = Instant::now();
        let mut s = SessionState::default();
        let size = 1u64 << 40;
        // at 8,000 kbit/s the cap doubles: sqrt(8000/2000) = 2
        let mut fg = FirstGrow::new(4_000_000, true);
        let mut pos = 0;
        let mut last = 0;
        for _ in 0..12 {
            last = len(fg.on_request(t, &req(pos, 1000, size, Some(8_000_000)), &mut s, None));
            pos += last;
        }
        assert_eq!(last, 8_000_000);
        // and the first size is capped by a small maximum
        let mut fg = FirstGrow::new(100_000, true);
        assert_eq!(
            len(fg.on_request(t, &req(0, 1000, size, Some(500_000)), &mut s, None)),
            50_000
        );
    }
}
