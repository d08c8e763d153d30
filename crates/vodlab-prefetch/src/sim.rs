//! Trace-driven prefetch simulation over chains (thesis 5.6.2
//! [T1754–T1764]), running the server's own [`PrefetchController`]s in
//! virtual time.
//!
//! Each chain of the trace (one session reading one file contiguously, as
//! `vodlab analyze` finds them) gets the policy on its own: its bytes are
//! consumed uniformly over its duration, and a prefetch fires at the chain's
//! start and whenever the previous one is used up (the thesis does not say
//! when prefetches fire; this is its simplest reading). Per 60 s bucket:
//!
//! - **disk**: each prefetch is one seek and its bytes on the file's drive;
//!   utilisation = (bytes/s) / `transfer_bytes_per_s` + (seeks/s) /
//!   `seeks_per_s` (the thesis's 125.5 MB/s and 39.4 seeks/s of the
//!   Hitachi 5K3000, eq. 5.4), the peak over buckets and drives reported;
//! - **memory**: a chain holds a buffer of its current prefetch size from
//!   its first prefetch until `hold_s` (40 s) after it ends; a bucket's
//!   memory is the sum of the largest buffer each chain held in it, the
//!   peak over buckets reported. No eviction, unbounded memory, as in the
//!   thesis.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::controller::{clip, PrefetchController, RequestInfo, SessionState};

/// One chain of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SimChain {
    /// Session key (chains of one session share controller state).
    pub session: u64,
    /// File key.
    pub file: u64,
    /// Drive holding the file.
    pub drive: u32,
    /// File size, bytes (prefetches are clipped at it).
    pub file_size: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub bytes: u64,
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Nominal bit rate, bit/s, when known.
    pub bitrate_bps: Option<u64>,
    /// Whether the chain starts with an open-ended request.
    pub open_ended: bool,
}

/// The disk utilisation model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UtilModel {
    /// Sequential transfer rate, bytes/s (thesis: 125.5 MB/s [T1760]).
    pub transfer_bytes_per_s: f64,
    /// Seek rate with no transfer, seeks/s (thesis: 39.4, eq. 5.4).
    pub seeks_per_s: f64,
}

impl Default for UtilModel {
    fn default() -> Self {
        // Hitachi Deskstar 5K3000: 125.5 MB/s 2 MB sequential, 48.4 MB/s
        // 2 MB random, so s_max = 24.2 x 125.5 / 77.1 = 39.4 seeks/s [T1760-T1764]
        UtilModel {
            transfer_bytes_per_s: 125.5e6,
            seeks_per_s: 24.2 * 125.5 / (125.5 - 48.4),
        }
    }
}

/// Simulation settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Bucket length, seconds (thesis: 60).
    pub bucket_s: f64,
    /// A chain's buffer is freed this long after it ends (thesis: 40 s).
    pub hold_s: f64,
    /// The drive model.
    pub model: UtilModel,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bucket_s: 60.0,
            hold_s: 40.0,
            model: UtilModel::default(),
        }
    }
}

/// What one policy did over the trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// Chains simulated.
    pub chains: u64,
    /// Prefetches (= seeks).
    pub prefetches: u64,
    /// Bytes the chains requested.
    pub requested_bytes: u64,
    /// Bytes read from the drives.
    pub device_bytes: u64,
    /// Bytes read beyond the end of their chain.
    pub wasted_bytes: u64,
    /// Peak utilisation of any drive in any bucket (1.0 = 100 %).
    pub peak_utilisation: f64,
    /// Mean utilisation over buckets and drives with any load.
    pub mean_utilisation: f64,
    /// Peak prefetch-buffer memory over buckets, bytes.
    pub peak_memory_bytes: u64,
    /// Mean prefetch-buffer memory over buckets with any, bytes.
    #[serde(default)]
    pub mean_memory_bytes: u64,
    /// Buckets the trace covered.
    pub buckets: u64,
}

/// One device read a policy made (a prefetch), for a drive model that
/// needs the reads themselves (`vodlab simulate --disk mechanical`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceRead {
    /// When it was issued, seconds (the trace's time).
    pub t_s: f64,
    /// Drive holding the file.
    pub drive: u32,
    /// File key.
    pub file: u64,
    /// First byte within the file.
    pub offset: u64,
    /// Bytes.
    pub bytes: u64,
}

#[derive(Debug, Default, Clone)]
struct Bucket {
    /// Per drive: bytes, seeks.
    drives: Vec<(u64, u64)>,
    memory: u64,
}

/// One policy's simulation; feed it chains with [`TraceSim::add`].
pub struct TraceSim {
    cfg: SimConfig,
    controller: Box<dyn PrefetchController>,
    base: Instant,
    /// Bucket numbers are small integers: FxHash (`rustc-hash`) instead of
    /// SipHash, looked up once per prefetch and held bucket.
    buckets: rustc_hash::FxHashMap<i64, Bucket>,
    result: SimResult,
    /// Per-chain scratch: bucket → largest buffer.
    held: Vec<(i64, u64)>,
    session: String,
    /// Device reads kept for [`TraceSim::take_reads`], when asked for.
    reads: Option<Vec<DeviceRead>>,
}

impl TraceSim {
    /// A simulation of `controller`; virtual time t seconds is `base + t`.
    pub fn new(cfg: SimConfig, controller: Box<dyn PrefetchController>, base: Instant) -> Self {
        TraceSim {
            cfg,
            controller,
            base,
            buckets: HashMap::default(),
            result: SimResult::default(),
            held: Vec::new(),
            session: String::new(),
            reads: None,
        }
    }

    /// Keeps every device read (prefetch) from now on, in the order the
    /// chains are added (not time order), for [`TraceSim::take_reads`].
    pub fn keep_reads(&mut self) {
        self.reads.get_or_insert_with(Vec::new);
    }

    /// The device reads kept so far (empty unless [`TraceSim::keep_reads`]).
    pub fn take_reads(&mut self) -> Vec<DeviceRead> {
        self.reads.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn bucket(&self, t: f64) -> i64 {
        (t / self.cfg.bucket_s).floor() as i64
    }

    fn at(&self, t: f64) -> Instant {
        self.base + Duration::from_secs_f64(t.max(0.0))
    }

    fn hold(&mut self, from: f64, to: f64, size: u64) {
        let (a, b) = (self.bucket(from), self.bucket(to.max(from)));
        for k in a..=b {
            match self.held.iter_mut().find(|(bk, _)| *bk == k) {
                Some((_, m)) => *m = (*m).max(size),
                None => self.held.push((k, size)),
            }
        }
    }

    /// Simulates one chain.
    pub fn add(&mut self, c: &SimChain) {
        if c.bytes == 0 {
            return;
        }
        use std::fmt::Write as _;
        self.session.clear();
        let _ = write!(self.session, "{:x}", c.session);
        self.result.chains += 1;
        self.result.requested_bytes += c.bytes;
        let end = c.offset + c.bytes;
        let dur = (c.end_s - c.start_s).max(0.0);
        let mut pos = c.offset;
        let mut state = SessionState::default();
        let mut last: Option<(f64, u64)> = None;
        self.held.clear();
        while pos < end {
            let t = c.start_s + dur * (pos - c.offset) as f64 / c.bytes as f64;
            let first = pos == c.offset;
            // what the server would see: a miss at `pos`; the chain's first
            // request keeps its form (open-ended or chunk). The length is
            // nominal (1 byte): the policy's size is what is read
            let req = RequestInfo {
                session: &self.session,
                file: c.file,
                offset: pos,
                length: 1,
                file_size: c.file_size.max(end),
                bitrate_bps: c.bitrate_bps,
                resident: false,
                open_ended: first && c.open_ended,
            };
            let decision = self
                .controller
                .on_request(self.at(t), &req, &mut state, None);
            let (off, n) = match clip(decision, c.file_size.max(end)) {
                Some((o, n)) if o == pos => (o, n),
                // a controller that prefetches nothing: the chain is read
                // in one device read per request; count one read to the end
                _ => (pos, end - pos),
            };
            state.account(c.file, off, n.min(end - off));
            self.result.prefetches += 1;
            self.result.device_bytes += n;
            if off + n > end {
                self.result.wasted_bytes += off + n - end;
            }
            let b = self.bucket(t);
            let drive = c.drive as usize;
            let bk = self.buckets.entry(b).or_default();
            if bk.drives.len() <= drive {
                bk.drives.resize(drive + 1, (0, 0));
            }
            bk.drives[drive].0 += n;
            bk.drives[drive].1 += 1;
            if let Some(r) = self.reads.as_mut() {
                r.push(DeviceRead {
                    t_s: t,
                    drive: c.drive,
                    file: c.file,
                    offset: off,
                    bytes: n,
                });
            }
            if let Some((t0, size)) = last {
                self.hold(t0, t, size);
            }
            last = Some((t, n));
            pos = off + n;
        }
        if let Some((t0, size)) = last {
            self.hold(t0, c.end_s + self.cfg.hold_s, size);
        }
        for &(k, m) in &self.held {
            self.buckets.entry(k).or_default().memory += m;
        }
    }

    /// The result over every chain added.
    pub fn finish(self) -> SimResult {
        let mut r = self.result;
        let m = self.cfg.model;
        let (mut sum, mut n) = (0.0, 0u64);
        let (mut mem_sum, mut mem_n) = (0u128, 0u64);
        for b in self.buckets.values() {
            r.peak_memory_bytes = r.peak_memory_bytes.max(b.memory);
            if b.memory > 0 {
                mem_sum += b.memory as u128;
                mem_n += 1;
            }
            for &(bytes, seeks) in &b.drives {
                if bytes == 0 && seeks == 0 {
                    continue;
                }
                let u = bytes as f64 / self.cfg.bucket_s / m.transfer_bytes_per_s
                    + seeks as f64 / self.cfg.bucket_s / m.seeks_per_s;
                r.peak_utilisation = r.peak_utilisation.max(u);
                sum += u;
                n += 1;
            }
        }
        r.mean_utilisation = if n > 0 { sum / n as f64 } else { 0.0 };
        r.mean_memory_bytes = (mem_sum / mem_n.max(1) as u128) as u64;
        r.buckets = self.buckets.len() as u64;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chainpf::FirstGrow;
    use crate::controller::Fixed;

    fn chain(session: u64, start: f64, bytes: u64, dur: f64) -> SimChain {
        SimChain {
            session,
            file: session,
            drive: 0,
            file_size: 1 << 40,
            offset: 0,
            bytes,
            start_s: start,
            end_s: start + dur,
            bitrate_bps: Some(2_000_000),
            open_ended: false,
        }
    }

    #[test]
    fn kept_reads_are_the_prefetches() {
        let mut s = TraceSim::new(
            SimConfig::default(),
            Box::new(Fixed(4_000_000)),
            Instant::now(),
        );
        s.add(&chain(1, 0.0, 10_000_000, 100.0));
        assert!(s.take_reads().is_empty(), "not kept unless asked");
        s.keep_reads();
        s.add(&chain(2, 10.0, 10_000_000, 100.0));
        let r = s.take_reads();
        let at: Vec<(f64, u64, u64)> = r.iter().map(|d| (d.t_s, d.offset, d.bytes)).collect();
        assert_eq!(
            at,
            vec![
                (10.0, 0, 4_000_000),
                (50.0, 4_000_000, 4_000_000),
                (90.0, 8_000_000, 4_000_000)
            ]
        );
        assert!(r.iter().all(|d| d.file == 2 && d.drive == 0));
        assert!(s.take_reads().is_empty(), "taken");
    }

    #[test]
    fn the_thesis_seek_rate() {
        let m = UtilModel::default();
        assert!((m.seeks_per_s - 39.4).abs() < 0.05, "{}", m.seeks_per_s);
    }

    #[test]
    fn fixed_prefetches_count_seeks_bytes_waste_and_memory() {
        let mut s = TraceSim::new(
            SimConfig::default(),
            Box::new(Fixed(4_000_000)),
            Instant::now(),
        );
        // 10 MB over 100 s: prefetches at 0, 40 and 80 s of 4 MB each
        s.add(&chain(1, 0.0, 10_000_000, 100.0));
        let r = s.finish();
        assert_eq!(r.prefetches, 3);
        assert_eq!(r.device_bytes, 12_000_000);
        assert_eq!(r.wasted_bytes, 2_000_000);
        // buckets [0,60): two prefetches, 8 MB; [60,120): one, 4 MB
        let want = 8e6 / 60.0 / 125.5e6 + 2.0 / 60.0 / UtilModel::default().seeks_per_s;
        assert!((r.peak_utilisation - want).abs() < 1e-9, "{r:?}");
        // the 4 MB buffer is held from 0 to 140 s: buckets 0, 1 and 2
        assert_eq!(r.peak_memory_bytes, 4_000_000);
        assert_eq!(r.mean_memory_bytes, 4_000_000);
        assert_eq!(r.buckets, 3);
    }

    #[test]
    fn concurrent_chains_add_memory_and_a_larger_size_means_fewer_seeks() {
        let run = |size: u64| {
            let mut s = TraceSim::new(SimConfig::default(), Box::new(Fixed(size)), Instant::now());
            for k in 0..10 {
                s.add(&chain(k, k as f64, 50_000_000, 50.0));
            }
            s.finish()
        };
        let (small, large) = (run(1_000_000), run(16_000_000));
        assert_eq!(small.peak_memory_bytes, 10 * 1_000_000);
        assert_eq!(large.peak_memory_bytes, 10 * 16_000_000);
        assert!(large.prefetches < small.prefetches);
        assert!(large.wasted_bytes > small.wasted_bytes);
    }

    #[test]
    fn first_grow_seeks_less_than_its_first_size_and_uses_less_memory_than_fixed_at_its_max() {
        let mut fg = TraceSim::new(
            SimConfig::default(),
            Box::new(FirstGrow::new(16_000_000, false)),
            Instant::now(),
        );
        let mut fx = TraceSim::new(
            SimConfig::default(),
            Box::new(Fixed(16_000_000)),
            Instant::now(),
        );
        // many short chains and a few long ones, as in the thesis's logs
        for k in 0..200u64 {
            let c = if k % 10 == 0 {
                chain(k, k as f64, 200_000_000, 400.0)
            } else {
                chain(k, k as f64, 300_000, 5.0)
            };
            fg.add(&c);
            fx.add(&c);
        }
        let (fg, fx) = (fg.finish(), fx.finish());
        assert!(fg.wasted_bytes < fx.wasted_bytes / 10, "{fg:?} {fx:?}");
        assert!(fg.peak_memory_bytes < fx.peak_memory_bytes, "{fg:?} {fx:?}");
        assert!(fg.peak_utilisation < fx.peak_utilisation, "{fg:?} {fx:?}");
    }
}
