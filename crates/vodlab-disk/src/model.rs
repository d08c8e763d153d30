//! The sans-IO drive: requests go in with [`Disk::submit`], completions come
//! out of [`Disk::poll_completion`], and [`Disk::next_event_time`] says when
//! to poll next. `now` is always passed in (a [`Duration`] since an epoch the
//! caller chooses, e.g. the mount); the model never reads a clock.
//!
//! Model time is wall time × k (the time-compression factor): every modelled
//! duration is divided by k on the way out, so a run at k = 10 sees each
//! service time exactly a tenth as long (to the nanosecond of rounding).

use std::collections::VecDeque;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::DiskError;
use crate::hdd::{Hdd, ServiceKind};
use crate::profile::{Profile, Rotation, SsdParams};
use crate::stats::DiskStats;

/// Identifies a submitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Token(pub u64);

/// A read of `len` bytes at byte address `offset` of the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Byte address on the drive.
    pub offset: u64,
    /// Length in bytes (> 0).
    pub len: u64,
    /// The file it belongs to, if the caller wants it back in the completion.
    pub file: Option<u64>,
}

impl Request {
    /// A read with no file attached.
    pub fn new(offset: u64, len: u64) -> Request {
        Request {
            offset,
            len,
            file: None,
        }
    }
}

/// Order in which a hard disk takes queued requests. SSD-class drives always
/// take them in arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// Arrival order.
    #[default]
    Fifo,
    /// C-LOOK elevator: the lowest address at or above the head, else wrap
    /// to the lowest address queued.
    CLook,
    /// Tagged command queue: among the first `depth` requests in arrival
    /// order, the one with the shortest positioning time (overhead + seek +
    /// rotation); ties go to the earliest.
    Tagged {
        /// How many queued requests the drive sees.
        depth: usize,
    },
}

impl std::str::FromStr for Scheduler {
    type Err = DiskError;
    /// `fifo`, `clook` (or `c-look`), `tagged:N` (or `ncq:N`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DiskError::InvalidOption {
            key: "scheduler",
            reason: format!("`{s}`: expected fifo, clook or tagged:N (N ≥ 1)"),
        };
        match s {
            "fifo" => Ok(Scheduler::Fifo),
            "clook" | "c-look" => Ok(Scheduler::CLook),
            _ => {
                let n = s
                    .strip_prefix("tagged:")
                    .or_else(|| s.strip_prefix("ncq:"))
                    .ok_or_else(bad)?;
                let depth: usize = n.parse().map_err(|_| bad())?;
                if depth == 0 {
                    return Err(bad());
                }
                Ok(Scheduler::Tagged { depth })
            }
        }
    }
}

/// Options of one modelled drive that are not properties of the drive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DiskOptions {
    /// Queue discipline (hard disks only).
    pub scheduler: Scheduler,
    /// Time compression k ≥ 1 typically: all modelled times are divided by k.
    pub time_compression: f64,
    /// Seed of the platter's initial phase and the head's initial position.
    pub seed: u64,
    /// Overrides the profile's rotational-latency mode.
    pub rotation: Option<Rotation>,
}

impl Default for DiskOptions {
    fn default() -> Self {
        DiskOptions {
            scheduler: Scheduler::Fifo,
            time_compression: 1.0,
            seed: 0,
            rotation: None,
        }
    }
}

/// A finished request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The token [`Disk::submit`] returned.
    pub token: Token,
    /// The request.
    pub request: Request,
    /// When it was submitted (wall).
    pub submitted: Duration,
    /// When the drive began serving it (wall).
    pub started: Duration,
    /// When its data is ready (wall).
    pub finished: Duration,
    /// How it was served.
    pub kind: ServiceKind,
    /// Seek distance in bytes (0 without a seek).
    pub seek_distance: u64,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    token: Token,
    req: Request,
    arrival: f64,
}

#[derive(Debug, Clone, Copy)]
struct InService {
    q: Queued,
    start: f64,
    finish: f64,
    kind: ServiceKind,
    seek_distance: u64,
}

#[derive(Debug, Clone)]
struct Ssd {
    latency_ns: f64,
    /// bytes/ns
    bw: f64,
    slots: usize,
    link_free: f64,
}

#[derive(Debug, Clone)]
enum Engine {
    Hdd(Hdd),
    Ssd(Ssd),
}

/// A modelled drive (hard disk or SSD class) with its queue and statistics.
#[derive(Debug, Clone)]
pub struct Disk {
    engine: Engine,
    profile: Profile,
    opts: DiskOptions,
    capacity: u64,
    queue: Vec<Queued>,
    in_service: Vec<InService>,
    done: VecDeque<Completion>,
    next_token: u64,
    /// Latest `now` seen, model ns.
    last_now: f64,
    /// Latest completion processed, model ns.
    last_finish: f64,
    busy_until: f64,
    first_submit: Option<f64>,
    depth_t: f64,
    stats: DiskStats,
}

impl Disk {
    /// A drive of the given profile, idle, at time zero.
    pub fn new(profile: &Profile, opts: DiskOptions) -> Result<Disk, DiskError> {
        profile.validate().map_err(DiskError::InvalidProfile)?;
        let k = opts.time_compression;
        if !(k.is_finite() && k > 0.0) {
            return Err(DiskError::InvalidOption {
                key: "time_compression",
                reason: format!("must be finite and > 0, got {k}"),
            });
        }
        if let Scheduler::Tagged { depth: 0 } = opts.scheduler {
            return Err(DiskError::InvalidOption {
                key: "scheduler",
                reason: "tagged queue depth must be ≥ 1".into(),
            });
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(opts.seed);
        let capacity = profile.capacity_bytes();
        let engine = match (&profile.hdd, &profile.ssd) {
            (Some(h), _) => {
                let phase: f64 = rng.random();
                let head = rng.random_range(0..capacity);
                Engine::Hdd(Hdd::new(
                    h,
                    opts.rotation.unwrap_or(h.rotation),
                    phase,
                    head,
                ))
            }
            (
                _,
                Some(SsdParams {
                    read_latency_us,
                    bandwidth_mb_s,
                    parallelism,
                    ..
                }),
            ) => Engine::Ssd(Ssd {
                latency_ns: read_latency_us * 1e3,
                bw: bandwidth_mb_s * 1e-3,
                slots: *parallelism as usize,
                link_free: 0.0,
            }),
            _ => unreachable!("validated"),
        };
        Ok(Disk {
            engine,
            profile: profile.clone(),
            opts,
            capacity,
            queue: Vec::new(),
            in_service: Vec::new(),
            done: VecDeque::new(),
            next_token: 0,
            last_now: 0.0,
            last_finish: 0.0,
            busy_until: 0.0,
            first_submit: None,
            depth_t: 0.0,
            stats: DiskStats::default(),
        })
    }

    /// The profile this drive was built from.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The options this drive was built with.
    pub fn options(&self) -> &DiskOptions {
        &self.opts
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Requests queued and not yet in service.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Requests in service (≤ 1 for a hard disk).
    pub fn in_service(&self) -> usize {
        self.in_service.len()
    }

    /// Submits a read at `now`. The request may start at once or later;
    /// poll for its completion.
    pub fn submit(&mut self, now: Duration, req: Request) -> Result<Token, DiskError> {
        if req.len == 0
            || req
                .offset
                .checked_add(req.len)
                .is_none_or(|e| e > self.capacity)
        {
            return Err(DiskError::OutOfRange {
                offset: req.offset,
                len: req.len,
                capacity: self.capacity,
            });
        }
        let t = self.model_now(now)?;
        self.advance(t, false);
        self.set_now(t);
        if self.first_submit.is_none() {
            self.first_submit = Some(t);
            self.depth_t = t;
        }
        self.depth_mark(t);
        let token = Token(self.next_token);
        self.next_token += 1;
        self.queue.push(Queued {
            token,
            req,
            arrival: t,
        });
        self.stats.submitted += 1;
        self.stats.max_depth = self.stats.max_depth.max(self.depth() as u64);
        Ok(token)
    }

    /// The next completion due at or before `now`, if any (in order of
    /// completion).
    pub fn poll_completion(&mut self, now: Duration) -> Result<Option<Completion>, DiskError> {
        self.advance_to(now)?;
        Ok(self.done.pop_front())
    }

    /// Processes every event up to and including `now` (completions become
    /// available to [`Disk::poll_completion`]).
    pub fn advance_to(&mut self, now: Duration) -> Result<(), DiskError> {
        let t = self.model_now(now)?;
        self.advance(t, true);
        self.set_now(t);
        Ok(())
    }

    /// When something next happens (a completion or the start of a queued
    /// request), wall time; `None` when idle and nothing is queued. It may be
    /// at or before the latest `now` (poll at once).
    pub fn next_event_time(&self) -> Option<Duration> {
        if !self.done.is_empty() {
            return Some(self.to_wall(self.last_now));
        }
        self.next_event().map(|(t, _)| self.to_wall(t))
    }

    /// Statistics as of the latest `now` seen.
    pub fn stats(&self) -> DiskStats {
        let mut s = self.stats.clone();
        if let Some(t0) = self.first_submit {
            s.elapsed_ns = (self.last_now - t0).max(0.0);
            s.depth_area += self.depth() as f64 * (self.last_now - self.depth_t).max(0.0);
        }
        s.busy_ns -= (self.busy_until - self.last_now).max(0.0);
        s.busy_ns = s.busy_ns.max(0.0);
        s
    }

    fn slots(&self) -> usize {
        match &self.engine {
            Engine::Hdd(_) => 1,
            Engine::Ssd(s) => s.slots,
        }
    }

    fn depth(&self) -> usize {
        self.queue.len() + self.in_service.len()
    }

    fn model_now(&self, now: Duration) -> Result<f64, DiskError> {
        let t = now.as_nanos() as f64 * self.opts.time_compression;
        if t < self.last_now {
            return Err(DiskError::TimeWentBackwards {
                now_ns: now.as_nanos(),
                last_ns: (self.last_now / self.opts.time_compression) as u128,
            });
        }
        Ok(t)
    }

    fn set_now(&mut self, t: f64) {
        self.last_now = self.last_now.max(t);
    }

    fn to_wall(&self, t: f64) -> Duration {
        let ns = (t / self.opts.time_compression).ceil().max(0.0);
        Duration::from_nanos(ns as u64)
    }

    fn depth_mark(&mut self, t: f64) {
        if self.first_submit.is_some() && t > self.depth_t {
            self.stats.depth_area += self.depth() as f64 * (t - self.depth_t);
            self.depth_t = t;
        }
    }

    /// The earliest pending event: `(time, true)` for a completion,
    /// `(time, false)` for a dispatch.
    fn next_event(&self) -> Option<(f64, bool)> {
        let fin = self
            .in_service
            .iter()
            .map(|s| s.finish)
            .min_by(f64::total_cmp);
        let disp = (!self.queue.is_empty() && self.in_service.len() < self.slots())
            .then(|| self.last_finish.max(self.queue[0].arrival));
        match (fin, disp) {
            (Some(f), Some(d)) if d < f => Some((d, false)),
            (Some(f), _) => Some((f, true)),
            (None, Some(d)) => Some((d, false)),
            (None, None) => None,
        }
    }

    fn advance(&mut self, now: f64, inclusive: bool) {
        while let Some((t, is_finish)) = self.next_event() {
            if t > now || (t == now && !inclusive) {
                break;
            }
            if is_finish {
                self.finish_one(t);
            } else {
                self.dispatch(t);
            }
        }
    }

    fn finish_one(&mut self, t: f64) {
        let i = self
            .in_service
            .iter()
            .enumerate()
            .filter(|(_, s)| s.finish == t)
            .min_by_key(|(_, s)| s.q.token)
            .map(|(i, _)| i)
            .expect("a request finishing at t");
        self.depth_mark(t);
        let s = self.in_service.swap_remove(i);
        self.last_finish = self.last_finish.max(t);
        let st = &mut self.stats;
        st.reads += 1;
        st.bytes += s.q.req.len;
        if s.seek_distance > 0 {
            st.seeks += 1;
            st.seek_distance_bytes += s.seek_distance as u128;
        }
        match s.kind {
            ServiceKind::Sequential => st.sequential += 1,
            ServiceKind::CacheHit => st.cache_hits += 1,
            _ => {}
        }
        st.service_us.record_ns(s.finish - s.start);
        st.response_us.record_ns(s.finish - s.q.arrival);
        let c = Completion {
            token: s.q.token,
            request: s.q.req,
            submitted: self.to_wall(s.q.arrival),
            started: self.to_wall(s.start),
            finished: self.to_wall(s.finish),
            kind: s.kind,
            seek_distance: s.seek_distance,
        };
        self.done.push_back(c);
    }

    fn dispatch(&mut self, t: f64) {
        // The queue is in arrival order; those arrived by `t` are a prefix.
        let eligible = self.queue.iter().take_while(|q| q.arrival <= t).count();
        debug_assert!(eligible > 0);
        let eps = self.opts.time_compression;
        let (idx, start, finish, kind, seek_distance) = match &mut self.engine {
            Engine::Ssd(s) => {
                let q = &self.queue[0];
                let lat_end = t + s.latency_ns;
                let finish = s.link_free.max(lat_end) + q.req.len as f64 / s.bw;
                s.link_free = finish;
                (0, t, finish, ServiceKind::Flash, 0)
            }
            Engine::Hdd(h) => {
                let idx = match self.opts.scheduler {
                    Scheduler::Fifo => 0,
                    Scheduler::CLook => {
                        let head = h.head();
                        let cands = &self.queue[..eligible];
                        let up = cands
                            .iter()
                            .enumerate()
                            .filter(|(_, q)| q.req.offset >= head)
                            .min_by_key(|(i, q)| (q.req.offset, *i));
                        up.or_else(|| {
                            cands
                                .iter()
                                .enumerate()
                                .min_by_key(|(i, q)| (q.req.offset, *i))
                        })
                        .map(|(i, _)| i)
                        .expect("non-empty")
                    }
                    Scheduler::Tagged { depth } => {
                        let n = eligible.min(depth);
                        let mut best = 0;
                        let mut best_pos = f64::INFINITY;
                        for (i, q) in self.queue[..n].iter().enumerate() {
                            let p = h.plan(q.req.offset, q.req.len, t, eps).positioning;
                            if p < best_pos {
                                best_pos = p;
                                best = i;
                            }
                        }
                        best
                    }
                };
                let q = &self.queue[idx];
                let plan = h.plan(q.req.offset, q.req.len, t, eps);
                h.commit(&plan);
                (idx, t, plan.finish, plan.kind, plan.seek_distance)
            }
        };
        self.depth_mark(t);
        let q = self.queue.remove(idx);
        self.stats.busy_ns += (finish - start.max(self.busy_until)).max(0.0);
        self.busy_until = self.busy_until.max(finish);
        self.in_service.push(InService {
            q,
            start,
            finish,
            kind,
            seek_distance,
        });
    }
}
