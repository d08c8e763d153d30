//! Trace-driven prefetch simulation over chains (thesis 5.6.2
//! [T1754–T1764]), running the server's own controllers through the
//! server's own [`PrefetchCore`], in virtual time, with every feedback the
//! live server gives them.
//!
//! **Viewers.** Each chain of the trace (one session reading one file
//! contiguously, as `vodlab analyze` finds them) is one viewer on one
//! connection, its bytes consumed uniformly over its duration:
//! - a chain of range requests (`requests` of them) asks for its bytes in
//!   ranges of ⌈bytes / requests⌉ (the last one shorter; fewer ranges when
//!   a chain has fewer bytes than requests squared), each when the viewer
//!   reaches its first byte
//!   and not before the previous one was served (a connection's requests
//!   follow each other, as on the server). Every range is probed against
//!   the page-cache model and decided by the core exactly as `serve` does
//!   ([`crate::core::prepare`], [`PrefetchCore::decide`]): hits read
//!   nothing, a miss reads the decision (its resident head skipped), and
//!   what the decision leaves of the range is read in `max_prefetch`
//!   pieces;
//! - a chain of one open-ended request is asked at its start and again
//!   whenever the previous read is used up, each time for the rest of the
//!   chain as an open-ended request, and the policy decides the read (as
//!   `serve` asks at an open-ended range's frontier: probed only, not
//!   accounted to the session again). Its reads are not looked at again,
//!   so an eviction of them is never found: evictions are a feature of
//!   chains of range requests here.
//!
//! **Drives.** Each read is one seek and its bytes on the file's drive, in
//! that drive's queue (one helper per device, as `serve`): it starts when
//! the drive is free and takes 1/`seeks_per_s` + bytes/
//! `transfer_bytes_per_s` (the thesis's Hitachi 5K3000, eq. 5.4). When it
//! completes the controller hears of it ([`PrefetchCore::read_done`]), and
//! every `tick_s` it is ticked with the drives' totals
//! ([`PrefetchCore::tick_devices`]), so `auto` measures, scores and moves
//! its size as on a live server.
//!
//! **Page cache.** By default (`page_cache: None`, the thesis) each chain
//! keeps what it read until it ends: nothing is shared between chains and
//! nothing is evicted. With `page_cache: Some(bytes)` the reads of all
//! chains share one least-recently-used cache of that size: a chain may
//! find another's data, and a prefetched range evicted before its use is
//! found missing by its session's next range, reported to the controller
//! ([`crate::controller::PrefetchController::on_evicted`]) and read again.
//!
//! **Next object** (`next_object: Some(cap)`, `vodlab serve
//! --prefetch-next-object`): when a chain's first range is served, the
//! session's next chain of another file (the next object it will ask for,
//! as a player's CMCD `nor` names it) has its first `cap` bytes from its
//! offset read into the page-cache model unless resident
//! ([`crate::next_object::decide`], as `serve` decides), on that file's
//! drive. The trace's own next object stands for `nor`: an announcement
//! that is always right (a player that switches rendition announces the
//! old one's next segment), so this is the most next-object prefetch can
//! do. As on the server the read is beside the policy: its controller is
//! not told of it, the drive's totals are.
//!
//! **Figures**, per `bucket_s` (60 s) bucket as the thesis:
//! - *disk*: utilisation = (bytes/s) / `transfer_bytes_per_s` + (seeks/s) /
//!   `seeks_per_s` per drive, at the reads' issue times; the peak over
//!   buckets and drives, and the mean;
//! - *memory*: a chain holds a buffer of its latest read's size from its
//!   first read until `hold_s` (40 s) after it ends; a bucket's memory is
//!   the sum of the largest buffer each chain held in it.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::controller::{clip, PrefetchController, SessionState};
use crate::core::{prepare, prepare_continuation, Ask, PrefetchCore};
use crate::defaults;

/// One chain of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SimChain {
    /// Session key.
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
    /// Requests the chain was made of (at least 1).
    pub requests: u32,
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

impl UtilModel {
    /// The time one read of `bytes` takes: a seek and the transfer.
    pub fn service(&self, bytes: u64) -> Duration {
        Duration::from_secs_f64(1.0 / self.seeks_per_s + bytes as f64 / self.transfer_bytes_per_s)
    }
}

/// Simulation settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Bucket length, seconds (thesis: 60).
    pub bucket_s: f64,
    /// A chain's buffer is freed this long after it ends (thesis: 40 s).
    pub hold_s: f64,
    /// The drive model.
    pub model: UtilModel,
    /// The shared page cache's size, bytes; `None`: each chain keeps its
    /// own reads until it ends (the thesis; see the module note).
    pub page_cache: Option<u64>,
    /// Time between the controller's ticks, seconds (the server's 1 s).
    pub tick_s: f64,
    /// Most bytes one read reads (the server's `max_prefetch`).
    pub max_prefetch: u64,
    /// Next-object prefetch's size, bytes (`vodlab serve
    /// --prefetch-next-object`); `None`: off. See the module note.
    pub next_object: Option<u64>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bucket_s: 60.0,
            hold_s: 40.0,
            model: UtilModel::default(),
            page_cache: None,
            tick_s: defaults::TICK.as_secs_f64(),
            max_prefetch: defaults::MAX_PREFETCH,
            next_object: None,
        }
    }
}

impl SimConfig {
    /// Checks the values; the error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.bucket_s.is_finite() && self.bucket_s > 0.0) {
            return Err("bucket: must be > 0 s".into());
        }
        if !(self.hold_s.is_finite() && self.hold_s >= 0.0) {
            return Err("hold: must be >= 0 s".into());
        }
        if !(self.tick_s.is_finite() && self.tick_s >= 0.001) {
            return Err("tick: must be at least 1 ms".into());
        }
        if !(self.model.transfer_bytes_per_s.is_finite()
            && self.model.transfer_bytes_per_s > 0.0
            && self.model.seeks_per_s.is_finite()
            && self.model.seeks_per_s > 0.0)
        {
            return Err("the drive's transfer and seek rates must be > 0".into());
        }
        if !(4096..=defaults::MAX_PREFETCH_LIMIT).contains(&self.max_prefetch) {
            return Err("max_prefetch: must be 4 KiB to 1 GiB".into());
        }
        if self.page_cache == Some(0) {
            return Err("page cache: must be > 0 bytes".into());
        }
        if self.next_object == Some(0) {
            return Err("next object: must be > 0 bytes".into());
        }
        Ok(())
    }
}

/// What one policy did over the trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// Chains simulated.
    pub chains: u64,
    /// Device reads (= seeks).
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
    /// Buckets with any read or any held buffer (idle gaps not counted).
    pub buckets: u64,
    /// Ranges the core decided (requests, and open-ended continuations).
    #[serde(default)]
    pub decisions: u64,
    /// Of them, found resident.
    #[serde(default)]
    pub hits: u64,
    /// Prefetched ranges found evicted when their session asked for them
    /// (reported to the controller).
    #[serde(default)]
    pub evictions: u64,
    /// Bytes of those.
    #[serde(default)]
    pub evicted_bytes: u64,
    /// Largest shared page cache use, bytes (0 without one).
    #[serde(default)]
    pub peak_cache_bytes: u64,
    /// Longest wait of a range for its reads (queueing on the drive and
    /// the read), seconds: a viewer waits this long at worst.
    #[serde(default)]
    pub max_wait_s: f64,
    /// Next-object reads issued (included in `prefetches`).
    #[serde(default)]
    pub next_object_reads: u64,
    /// Bytes of those (included in `device_bytes`).
    #[serde(default)]
    pub next_object_bytes: u64,
    /// The automatic size at the end, bytes (`auto` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_final_bytes: Option<u64>,
    /// The automatic size's adjust intervals evaluated (`auto` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_intervals: Option<u64>,
}

/// One device read a policy made, for a drive model that needs the reads
/// themselves (`vodlab simulate --disk mechanical`).
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

fn ns(t_s: f64) -> u64 {
    (t_s.max(0.0) * 1e9).round() as u64
}

/// A resident range of the page-cache model.
#[derive(Debug, Clone, Copy)]
struct Block {
    scope: u64,
    file: u64,
    start: u64,
    end: u64,
    used: u64,
}

/// The page-cache model: resident ranges per (scope, file), least recently
/// used first out when a capacity is set.
#[derive(Debug, Default)]
struct Cache {
    cap: Option<u64>,
    blocks: Vec<Option<Block>>,
    free: Vec<usize>,
    by_key: FxHashMap<(u64, u64), Vec<usize>>,
    lru: BTreeSet<(u64, usize)>,
    total: u64,
    peak: u64,
    /// Scratch for a probe's blocks (no allocation per probe).
    hit: Vec<(u64, u64, usize)>,
    /// Scratch for an insert's uncovered pieces.
    pieces: Vec<(u64, u64)>,
}

impl Cache {
    fn probe(&mut self, scope: u64, file: u64, a: u64, n: u64, now: u64) -> bool {
        let Some(ids) = self.by_key.get(&(scope, file)) else {
            return false;
        };
        let mut hit = std::mem::take(&mut self.hit);
        hit.clear();
        hit.extend(
            ids.iter()
                .filter_map(|&i| self.blocks[i].map(|b| (b.start, b.end, i)))
                .filter(|&(s, e, _)| s < a + n && e > a),
        );
        hit.sort_unstable();
        let mut at = a;
        for &(s, e, _) in &hit {
            if s > at {
                break;
            }
            at = at.max(e);
        }
        let covered = at >= a + n;
        if covered && self.cap.is_some() {
            for &(_, _, i) in &hit {
                let b = self.blocks[i].as_mut().expect("live");
                self.lru.remove(&(b.used, i));
                b.used = now;
                self.lru.insert((now, i));
            }
        }
        self.hit = hit;
        covered
    }

    /// A read of `b` completed: its bytes not resident already become
    /// blocks of their own (a page is cached once, however often read); the
    /// blocks it overlaps count as used now.
    fn insert(&mut self, b: Block) {
        let mut hit = std::mem::take(&mut self.hit);
        hit.clear();
        if let Some(ids) = self.by_key.get(&(b.scope, b.file)) {
            hit.extend(
                ids.iter()
                    .filter_map(|&i| self.blocks[i].map(|x| (x.start, x.end, i)))
                    .filter(|&(s, e, _)| s < b.end && e > b.start),
            );
        }
        hit.sort_unstable();
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces.clear();
        let mut at = b.start;
        for &(s, e, i) in &hit {
            if s > at {
                pieces.push((at, s.min(b.end)));
            }
            at = at.max(e);
            if self.cap.is_some() {
                let x = self.blocks[i].as_mut().expect("live");
                self.lru.remove(&(x.used, i));
                x.used = b.used;
                self.lru.insert((b.used, i));
            }
        }
        if at < b.end {
            pieces.push((at, b.end));
        }
        self.hit = hit;
        for &(start, end) in &pieces {
            self.insert_block(Block { start, end, ..b });
        }
        self.pieces = pieces;
    }

    fn insert_block(&mut self, b: Block) {
        let i = match self.free.pop() {
            Some(i) => {
                self.blocks[i] = Some(b);
                i
            }
            None => {
                self.blocks.push(Some(b));
                self.blocks.len() - 1
            }
        };
        self.by_key.entry((b.scope, b.file)).or_default().push(i);
        self.total += b.end - b.start;
        if let Some(cap) = self.cap {
            self.lru.insert((b.used, i));
            while self.total > cap {
                let Some((_, j)) = self.lru.pop_first() else {
                    break;
                };
                self.remove(j);
            }
            self.peak = self.peak.max(self.total);
        }
    }

    fn remove(&mut self, i: usize) {
        if let Some(b) = self.blocks[i].take() {
            self.total -= b.end - b.start;
            if let Some(ids) = self.by_key.get_mut(&(b.scope, b.file)) {
                ids.retain(|&j| j != i);
                if ids.is_empty() {
                    self.by_key.remove(&(b.scope, b.file));
                }
            }
            self.free.push(i);
        }
    }

    /// Forgets a chain's own reads (per-chain mode).
    fn drop_scope(&mut self, scope: u64, file: u64) {
        if let Some(ids) = self.by_key.remove(&(scope, file)) {
            for i in ids {
                if let Some(b) = self.blocks[i].take() {
                    self.total -= b.end - b.start;
                    self.free.push(i);
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The chain's next range is asked.
    Ask(u32),
    /// A read completed.
    Done(u32),
    /// The controller's tick.
    Tick,
}

/// A read in flight.
#[derive(Debug, Clone, Copy)]
struct Read {
    chain: u32,
    start: u64,
    len: u64,
    /// Bytes of it inside the range that caused it.
    used: u64,
    service: Duration,
    /// A next-object read for `chain` (not its own: no range waits for
    /// it and its controller is not told).
    next_object: bool,
}

/// A chain's state while it runs.
#[derive(Debug, Default)]
struct Run {
    session: SessionState,
    /// The next byte to ask for.
    pos: u64,
    /// Ranges asked so far.
    asked: u32,
    /// Reads in flight.
    pending: u32,
    /// When the range being served was asked, ns.
    asked_at: u64,
    /// The latest read's issue time and size (the memory figure).
    last: Option<(f64, u64)>,
    /// Bucket → largest buffer held in it.
    held: Vec<(i64, u64)>,
    /// The chain has finished.
    done: bool,
}

/// Simulates one policy's `controller` over `chains` (any order) with
/// `cfg`; returns what it did and, with `keep_reads`, every device read in
/// issue order.
pub fn simulate(
    cfg: &SimConfig,
    controller: Box<dyn PrefetchController>,
    chains: &[SimChain],
    keep_reads: bool,
) -> (SimResult, Vec<DeviceRead>) {
    Sim::new(cfg, controller, chains, keep_reads).run()
}

/// As [`simulate`], recording every call the core gets as an
/// [`crate::events::Event`] (connection = the chain's index), as
/// `vodlab serve --prefetch-events` does on a live server.
pub fn simulate_recorded(
    cfg: &SimConfig,
    controller: Box<dyn PrefetchController>,
    chains: &[SimChain],
    sink: Box<dyn FnMut(&crate::events::Event) + Send>,
) -> SimResult {
    let mut sim = Sim::new(cfg, controller, chains, false);
    let epoch = sim.base;
    sim.core.record(epoch, sink);
    sim.run().0
}

struct Sim<'c> {
    cfg: SimConfig,
    core: PrefetchCore,
    chains: &'c [SimChain],
    runs: Vec<Run>,
    base: Instant,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    reads: Vec<Read>,
    free_reads: Vec<u32>,
    drive_free: Vec<u64>,
    device_total: (u64, Duration),
    cache: Cache,
    buckets: FxHashMap<i64, Bucket>,
    result: SimResult,
    kept: Option<Vec<DeviceRead>>,
    names: Vec<String>,
    live: usize,
    /// Scratch for an ask's reads (no allocation per ask).
    pending_reads: Vec<(u64, u64)>,
    /// Per chain, the session's next chain of another file (with
    /// `next_object` only).
    next_of: Vec<Option<u32>>,
}

impl<'c> Sim<'c> {
    fn new(
        cfg: &SimConfig,
        controller: Box<dyn PrefetchController>,
        chains: &'c [SimChain],
        keep_reads: bool,
    ) -> Self {
        Sim {
            cfg: *cfg,
            core: PrefetchCore::new(controller),
            chains,
            runs: Vec::new(),
            base: Instant::now(),
            heap: BinaryHeap::new(),
            seq: 0,
            reads: Vec::new(),
            free_reads: Vec::new(),
            drive_free: Vec::new(),
            device_total: (0, Duration::ZERO),
            cache: Cache {
                cap: cfg.page_cache,
                ..Cache::default()
            },
            buckets: FxHashMap::default(),
            result: SimResult::default(),
            kept: keep_reads.then(Vec::new),
            names: Vec::new(),
            live: 0,
            pending_reads: Vec::new(),
            next_of: Vec::new(),
        }
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }

    fn at(&self, t: u64) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    fn bucket(&self, t_s: f64) -> i64 {
        (t_s / self.cfg.bucket_s).floor() as i64
    }

    /// The scope of a chain's reads in the page cache.
    fn scope(&self, chain: u32) -> u64 {
        match self.cfg.page_cache {
            None => chain as u64 + 1,
            Some(_) => 0,
        }
    }

    /// When chain `c` reaches byte `pos`, ns.
    fn time_of(c: &SimChain, pos: u64) -> u64 {
        let dur = (c.end_s - c.start_s).max(0.0);
        let f = (pos.saturating_sub(c.offset)) as f64 / c.bytes.max(1) as f64;
        ns(c.start_s + dur * f.min(1.0))
    }

    fn open(c: &SimChain) -> bool {
        c.open_ended && c.requests <= 1
    }

    fn run(mut self) -> (SimResult, Vec<DeviceRead>) {
        let mut first = u64::MAX;
        self.runs = (0..self.chains.len()).map(|_| Run::default()).collect();
        self.names = self
            .chains
            .iter()
            .map(|c| format!("{:x}", c.session))
            .collect();
        for (i, c) in self.chains.iter().enumerate() {
            if c.bytes == 0 {
                continue;
            }
            self.result.chains += 1;
            self.result.requested_bytes += c.bytes;
            self.runs[i].pos = c.offset;
            let t = ns(c.start_s);
            first = first.min(t);
            self.live += 1;
            self.push(t, Ev::Ask(i as u32));
        }
        if self.cfg.next_object.is_some() {
            self.next_of = next_chains(self.chains);
        }
        if first != u64::MAX {
            self.push(first, Ev::Tick);
        }
        let tick = ns(self.cfg.tick_s).max(1);
        while let Some(Reverse((t, _, ev))) = self.heap.pop() {
            match ev {
                Ev::Ask(i) => self.ask(t, i),
                Ev::Done(r) => self.done(t, r),
                Ev::Tick => {
                    let (b, busy) = self.device_total;
                    self.core.tick_devices(self.at(t), b, busy);
                    if self.live > 0 {
                        self.push(t + tick, Ev::Tick);
                    }
                }
            }
        }
        self.finish()
    }

    /// Asks the chain's next range, decides and issues its reads.
    fn ask(&mut self, t: u64, i: u32) {
        let c = &self.chains[i as usize];
        let now = self.at(t);
        let end = c.offset + c.bytes;
        let scope = self.scope(i);
        let run = &mut self.runs[i as usize];
        let a = run.pos;
        let len = if Self::open(c) {
            end - a
        } else {
            let per = c.bytes.div_ceil(c.requests.max(1) as u64);
            per.min(end - a)
        };
        run.asked += 1;
        run.asked_at = t;
        let cache = &mut self.cache;
        // an open-ended chain asked again at its frontier: probed only, as
        // serve asks it (not accounted to the session again)
        let continuation = Self::open(c) && a != c.offset;
        let probe = |o, n| cache.probe(scope, c.file, o, n, t);
        let probed = if continuation {
            prepare_continuation(a, len, probe)
        } else {
            prepare(&mut run.session, c.file, a, len, probe)
        };
        let ask = Ask {
            conn: i as u64,
            session: &self.names[i as usize],
            file: c.file,
            offset: a,
            length: len,
            file_size: c.file_size.max(end),
            bitrate_bps: c.bitrate_bps,
            open_ended: c.open_ended && (Self::open(c) || a == c.offset),
            continuation,
        };
        let d = self.core.decide(now, &ask, &probed, &mut run.session, None);
        self.result.decisions += 1;
        if probed.resident {
            self.result.hits += 1;
        }
        if let Some((b, _)) = d.evicted {
            self.result.evictions += 1;
            self.result.evicted_bytes += b;
        }
        let bound = self.cfg.max_prefetch;
        let size = c.file_size.max(end);
        let mut reads = std::mem::take(&mut self.pending_reads);
        reads.clear();
        if Self::open(c) {
            // an open-ended stream: the policy's read, else the next piece
            let (o, n) = clip(d.decision, size)
                .filter(|&(o, _)| o == a)
                .unwrap_or((a, (end - a).min(bound)));
            if !probed.resident {
                reads.push((o, n.min(bound)));
            }
            run.pos = if probed.resident {
                end
            } else {
                o + n.min(bound)
            };
        } else {
            if !probed.resident {
                let mut ready = a + d.head;
                if let Some((o, n)) = clip(d.decision, size) {
                    let n = n.min(bound);
                    reads.push((o, n));
                    if o <= ready {
                        ready = ready.max(o + n);
                    }
                }
                while ready < a + len {
                    let n = (a + len - ready).min(bound);
                    reads.push((ready, n));
                    ready += n;
                }
            }
            run.pos = a + len;
        }
        for &(o, n) in &reads {
            self.issue(t, i, o, n, a, a + len);
        }
        self.pending_reads = reads;
        if self.runs[i as usize].pending == 0 {
            self.next(t, i);
        }
    }

    /// With next-object prefetch, chain `i`'s first range names its
    /// session's next object: once it is served, the next object's first
    /// bytes are read unless resident.
    fn next_object(&mut self, t: u64, i: u32) {
        let (Some(cap), Some(Some(j))) = (self.cfg.next_object, self.next_of.get(i as usize))
        else {
            return;
        };
        let j = *j;
        let c = &self.chains[j as usize];
        let scope = self.scope(j);
        let cache = &mut self.cache;
        let size = c.file_size.max(c.offset + c.bytes);
        let d = crate::next_object::decide(size, Some((c.offset, None)), cap, |o, n| {
            cache.probe(scope, c.file, o, n, t)
        });
        if let crate::next_object::NextRead::Read { offset, len } = d {
            self.result.next_object_reads += 1;
            self.result.next_object_bytes += len;
            self.issue_read(t, j, offset, len, None);
        }
    }

    /// Issues a read of `[o, o + n)` for chain `i`, whose range is
    /// `[a, b)`.
    fn issue(&mut self, t: u64, i: u32, o: u64, n: u64, a: u64, b: u64) {
        self.issue_read(t, i, o, n, Some((a, b)));
    }

    /// Issues a read of `[o, o + n)` of chain `i`'s file: for its range
    /// `[a, b)`, or (`None`) a next-object read ahead of its start.
    fn issue_read(&mut self, t: u64, i: u32, o: u64, n: u64, range: Option<(u64, u64)>) {
        let c = &self.chains[i as usize];
        let end = c.offset + c.bytes;
        let t_s = t as f64 / 1e9;
        self.result.prefetches += 1;
        self.result.device_bytes += n;
        self.result.wasted_bytes += (o + n).saturating_sub(end.max(o));
        let drive = c.drive as usize;
        let bk = self.bucket(t_s);
        let e = self.buckets.entry(bk).or_default();
        if e.drives.len() <= drive {
            e.drives.resize(drive + 1, (0, 0));
        }
        e.drives[drive].0 += n;
        e.drives[drive].1 += 1;
        if let Some(k) = self.kept.as_mut() {
            k.push(DeviceRead {
                t_s,
                drive: c.drive,
                file: c.file,
                offset: o,
                bytes: n,
            });
        }
        // the memory figure: the chain holds its latest read's size
        let last = self.runs[i as usize].last.replace((t_s, n));
        if let Some((t0, size)) = last {
            self.hold(i, t0, t_s, size);
        }
        if self.drive_free.len() <= drive {
            self.drive_free.resize(drive + 1, 0);
        }
        let service = self.cfg.model.service(n);
        let start = t.max(self.drive_free[drive]);
        let done = start + service.as_nanos() as u64;
        self.drive_free[drive] = done;
        let read = Read {
            chain: i,
            start: o,
            len: n,
            used: range.map_or(0, |(a, b)| (o + n).min(b).saturating_sub(o.max(a))),
            service,
            next_object: range.is_none(),
        };
        let r = match self.free_reads.pop() {
            Some(r) => {
                self.reads[r as usize] = read;
                r
            }
            None => {
                self.reads.push(read);
                (self.reads.len() - 1) as u32
            }
        };
        if range.is_some() {
            self.runs[i as usize].pending += 1;
        }
        self.push(done, Ev::Done(r));
    }

    fn hold(&mut self, i: u32, from: f64, to: f64, size: u64) {
        let (a, b) = (self.bucket(from), self.bucket(to.max(from)));
        let held = &mut self.runs[i as usize].held;
        for k in a..=b {
            match held.iter_mut().find(|(bk, _)| *bk == k) {
                Some((_, m)) => *m = (*m).max(size),
                None => held.push((k, size)),
            }
        }
    }

    /// A read completed.
    fn done(&mut self, t: u64, r: u32) {
        let rd = self.reads[r as usize];
        self.free_reads.push(r);
        let i = rd.chain;
        let c = &self.chains[i as usize];
        self.device_total.0 += rd.len;
        self.device_total.1 += rd.service;
        if rd.next_object && self.runs[i as usize].done && self.cfg.page_cache.is_none() {
            // its chain came and went before it was read: its own cache
            // scope is gone, and nobody else can find it there
            return;
        }
        self.cache.insert(Block {
            scope: self.scope(i),
            file: c.file,
            start: rd.start,
            end: rd.start + rd.len,
            used: t,
        });
        self.result.peak_cache_bytes = self.cache.peak;
        if rd.next_object {
            return;
        }
        let now = self.at(t);
        let run = &mut self.runs[i as usize];
        self.core.read_done(
            now,
            i as u64,
            &mut run.session,
            c.file,
            rd.start,
            rd.len,
            rd.used,
            rd.len,
            rd.service,
        );
        run.pending -= 1;
        if run.pending == 0 {
            let wait = (t - run.asked_at) as f64 / 1e9;
            self.result.max_wait_s = self.result.max_wait_s.max(wait);
            self.next(t, i);
        }
    }

    /// The chain's range is served at `t`: ask the next one, or end.
    fn next(&mut self, t: u64, i: u32) {
        if self.runs[i as usize].asked == 1 && !self.runs[i as usize].done {
            // as serve queues it: once the response naming it is sent
            self.next_object(t, i);
        }
        let c = &self.chains[i as usize];
        let end = c.offset + c.bytes;
        let now = self.at(t);
        let run = &mut self.runs[i as usize];
        if run.done {
            return;
        }
        if run.pos < end {
            let due = Self::time_of(c, run.pos);
            self.push(due.max(t), Ev::Ask(i));
            return;
        }
        run.done = true;
        self.live -= 1;
        self.core.end_session(now, i as u64, &mut run.session);
        if let Some((t0, size)) = run.last.take() {
            let to = c.end_s + self.cfg.hold_s;
            self.hold(i, t0, to, size);
        }
        let held = std::mem::take(&mut self.runs[i as usize].held);
        for (k, m) in held {
            self.buckets.entry(k).or_default().memory += m;
        }
        if self.cfg.page_cache.is_none() {
            self.cache.drop_scope(self.scope(i), c.file);
        }
    }

    fn finish(self) -> (SimResult, Vec<DeviceRead>) {
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
        if let Some(v) = self.core.auto_view() {
            r.auto_final_bytes = Some(v.current_bytes);
            r.auto_intervals = Some(v.intervals);
        }
        (r, self.kept.unwrap_or_default())
    }
}

/// Per chain, the index of its session's next chain (by start) when that
/// one reads another file: the next object a player would name.
fn next_chains(chains: &[SimChain]) -> Vec<Option<u32>> {
    let mut order: Vec<u32> = (0..chains.len() as u32)
        .filter(|&i| chains[i as usize].bytes > 0)
        .collect();
    order.sort_by(|&x, &y| {
        let (a, b) = (&chains[x as usize], &chains[y as usize]);
        a.session
            .cmp(&b.session)
            .then(a.start_s.total_cmp(&b.start_s))
            .then(x.cmp(&y))
    });
    let mut next = vec![None; chains.len()];
    for w in order.windows(2) {
        let (a, b) = (&chains[w[0] as usize], &chains[w[1] as usize]);
        if a.session == b.session && a.file != b.file {
            next[w[0] as usize] = Some(w[1]);
        }
    }
    next
}

#[cfg(test)]
mod tests;
