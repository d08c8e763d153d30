//! Thesis chapter 4: the automatic prefetch size (`--prefetch-policy
//! auto`, a gradient descent on a score) and square-root-of-bit-rate sizes
//! (`ref=KBPS` on `fixed` or `auto`). Pure: every call gets `now`.
//!
//! **Score** [T1062–T1064]: per adjust interval, mspt (milliseconds per
//! 128 KiB the prefetch helpers read, from the reads they timed) × miss
//! ratio (bytes the helpers read ÷ bytes requested; above 1 when evicted
//! data is read again), stored per prefetch size. The reads are the
//! devices' totals when the server reports them (`on_device_reads`, every
//! read), else the connections' reports (`on_read_complete`, which miss
//! the reads of connections that went away).
//!
//! **Each interval** ([`Auto::on_tick`]), in the thesis's order [T1071–T1079]:
//! 1. the prefetcher busy less than `busy` of the interval → nothing (no
//!    score stored either: a light-load score favours too large a size);
//! 2. prefetch evictions above `evict` of the bytes requested (or
//!    prefetched, `evict_of`) and a known bit rate → the target jumps to
//!    mean(prefetch → eviction time) × bit rate, when that is smaller;
//! 3. else a gradient step between the neighbours p ± `step` (see
//!    [`gradient`]).
//!
//! **Gradual change** [T1097–T1103]: p moves linearly from where it was to
//! its target over `ramp` seconds (advanced at each tick), and the next
//! interval's measurement starts when p has reached the target, so a score
//! is the score of one size.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::controller::{
    read_size, ChainState, PrefetchController, PrefetchDecision, RequestInfo, SessionState,
};
use crate::defaults;

/// Bytes of one disk "transaction" of the mspt (128 KiB, [T1064]).
pub const TRANSACTION: f64 = 131_072.0;
/// Interval records kept for `/vodlab/stats`.
pub const RECORDS_KEPT: usize = 1024;

/// The SD-to-HD bit-rate ratio of the thesis's workloads (419 and 2,095
/// kbit/s [T1187]): the default low rate of [`Scaling::from_scale`].
pub const SD_HD_RATIO: f64 = 5.0;
/// Largest exponent of [`Scaling`].
pub const MAX_EXPONENT: f64 = 4.0;

/// Square-root (or another power) sizes per bit rate [T1131, T1163]:
/// p_b = p_ref · (b / b_ref)^exponent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scaling {
    /// b_ref, kbit/s: the bit rate whose size is the policy's size.
    pub reference_kbps: f64,
    /// 0.5 = square root (the thesis), 1 = proportional (Gill & Bathen),
    /// 0 = the same size for every rate.
    #[serde(default = "default_exponent")]
    pub exponent: f64,
}

fn default_exponent() -> f64 {
    defaults::SCALING_EXPONENT
}

impl Scaling {
    /// The size for bit rate `bps` (bits/s) when the reference rate's size
    /// is `p`; `p` itself when the rate is unknown.
    pub fn size(&self, p: f64, bps: Option<u64>) -> f64 {
        match bps {
            Some(b) if b > 0 => p * (b as f64 / (self.reference_kbps * 1000.0)).powf(self.exponent),
            _ => p,
        }
    }

    /// `scale=F[,low=KBPS]` (`--bitrate-scale F`): the SD-to-HD factor of
    /// the mixed experiment [T1280–T1284] set directly. The size at the low
    /// rate `low_kbps` (default: `reference_kbps` / [`SD_HD_RATIO`], the
    /// thesis's 419 of 2,095 kbit/s [T1187]) is F × the reference rate's,
    /// and the sizes of other rates interpolate linearly in log bit rate
    /// (and extrapolate beyond): the power law p_b = p_ref · (b / b_ref)^E
    /// with E = ln F / ln(low / ref). F = 1 gives every rate the same size;
    /// F = 0.45 at 1:5 is the square root (E ≈ 0.496), F = 0.2 proportional.
    pub fn from_scale(
        reference_kbps: f64,
        factor: f64,
        low_kbps: Option<f64>,
    ) -> Result<Self, String> {
        if !(factor.is_finite() && factor > 0.0 && factor <= 1.0) {
            return Err(format!("scale: `{factor}` must be > 0 and at most 1"));
        }
        let low = low_kbps.unwrap_or(reference_kbps / SD_HD_RATIO);
        if !(low.is_finite() && low > 0.0 && low < reference_kbps) {
            return Err(format!(
                "low: `{low}` kbit/s must be > 0 and below ref ({reference_kbps})"
            ));
        }
        let exponent = if factor == 1.0 {
            0.0
        } else {
            factor.ln() / (low / reference_kbps).ln()
        };
        if exponent > MAX_EXPONENT {
            return Err(format!(
                "scale: `{factor}` at low={low} kbit/s needs an exponent above {MAX_EXPONENT}"
            ));
        }
        let s = Self {
            reference_kbps,
            exponent,
        };
        s.validate()?;
        Ok(s)
    }

    /// Checks the values (`key` names the setting in errors).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.reference_kbps.is_finite()
            && self.reference_kbps > 0.0
            && self.reference_kbps <= defaults::MAX_BITRATE_KBPS)
        {
            return Err("ref: the reference bit rate must be > 0 and at most 1e9 kbit/s".into());
        }
        if !(self.exponent.is_finite() && (0.0..=MAX_EXPONENT).contains(&self.exponent)) {
            return Err("exp: the exponent must be 0 to 4".into());
        }
        Ok(())
    }
}

/// What the eviction ratio of `evict` is a ratio to (not stated in the
/// thesis; Table 4.1 reports Evicted/Requested).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictBase {
    /// Evicted bytes ÷ bytes requested in the interval (Table 4.1).
    #[default]
    Requested,
    /// Evicted bytes ÷ bytes the helpers read in the interval.
    Prefetched,
}

/// Parameters of the automatic prefetch size (Table 4.2 defaults, from
/// [`defaults`]); sizes in bytes (the thesis's MB is 2^20 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoConfig {
    /// start_size [T1083].
    pub start: u64,
    /// adjust_interval [T1085], seconds.
    #[serde(with = "crate::secs")]
    pub interval: Duration,
    /// step_size [T1087].
    pub step: u64,
    /// score_deflation_factor [T1089]: at a minimum every stored score but
    /// the current size's (just measured) is multiplied by 1 − this.
    pub deflation: f64,
    /// busy_threshold [T1091]: the fraction of the interval the helpers
    /// spent reading below which nothing is adjusted.
    pub busy: f64,
    /// evict_threshold [T1093]: evicted bytes ÷ `evict_of` above which the
    /// eviction time sets the size.
    pub evict: f64,
    /// The eviction ratio's denominator.
    pub evict_of: EvictBase,
    /// Seconds p takes to reach a new target (the gradual change).
    #[serde(with = "crate::secs")]
    pub ramp: Duration,
    /// Smallest size.
    pub min: u64,
    /// Largest size.
    pub max: u64,
    /// Square-root sizes: auto sizes the reference rate, the others follow.
    pub scaling: Option<Scaling>,
}

impl Default for AutoConfig {
    fn default() -> Self {
        Self {
            start: defaults::AUTO_START,
            interval: defaults::AUTO_INTERVAL,
            step: defaults::AUTO_STEP,
            deflation: defaults::AUTO_DEFLATION,
            busy: defaults::AUTO_BUSY,
            evict: defaults::AUTO_EVICT,
            evict_of: EvictBase::Requested,
            ramp: defaults::AUTO_RAMP,
            min: defaults::AUTO_MIN,
            max: defaults::AUTO_MAX,
            scaling: None,
        }
    }
}

/// Start sizes of the thesis's drives [T1213], bytes: (name, SD, HD).
pub const START_SIZES: [(&str, u64, u64); 2] = [
    ("wd10efrx", 3 << 20, 4 << 20),
    ("st1000dm003", 2 << 20, 3 << 20),
];

/// The start size of a preset `DRIVE-sd` / `DRIVE-hd` (e.g. `wd10efrx-hd`).
pub fn start_preset(name: &str) -> Option<u64> {
    let (drive, kind) = name.rsplit_once('-')?;
    let (_, sd, hd) = START_SIZES
        .iter()
        .find(|(d, _, _)| d.eq_ignore_ascii_case(drive))?;
    match kind.to_ascii_lowercase().as_str() {
        "sd" => Some(*sd),
        "hd" => Some(*hd),
        _ => None,
    }
}

impl AutoConfig {
    /// Checks every parameter; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        let check = |ok: bool, why: &str| if ok { Ok(()) } else { Err(why.to_string()) };
        check(
            (4096..=defaults::MAX_PREFETCH_LIMIT).contains(&self.min),
            "min: must be 4 KiB to 1 GiB",
        )?;
        check(
            self.max >= self.min && self.max <= defaults::MAX_PREFETCH_LIMIT,
            "max: must be at least min and at most 1 GiB",
        )?;
        check(
            (self.min..=self.max).contains(&self.start),
            "start: must be between min and max",
        )?;
        check(
            self.step >= 4096 && self.step <= self.max - self.min.min(self.max),
            "step: must be at least 4 KiB and at most max - min",
        )?;
        check(
            self.interval >= Duration::from_secs(1),
            "interval: must be at least 1 s",
        )?;
        check(
            self.ramp <= self.interval,
            "ramp: must be at most the interval",
        )?;
        check(
            self.deflation.is_finite() && self.deflation > 0.0 && self.deflation < 1.0,
            "deflation: must be > 0 and < 1",
        )?;
        check(
            self.busy.is_finite() && (0.0..=1.0).contains(&self.busy),
            "busy: must be 0 to 1",
        )?;
        check(
            self.evict.is_finite() && self.evict > 0.0,
            "evict: must be > 0",
        )?;
        if let Some(s) = &self.scaling {
            s.validate()?;
        }
        Ok(())
    }
}

/// What an interval decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The prefetcher was busy less than the threshold: nothing changed.
    Inactive,
    /// Busy, but no read or no request in the interval: no score.
    NoData,
    /// Evictions over the threshold: the target jumped down.
    EvictionJump,
    /// A measured neighbour scored lower: move to it (larger).
    MoveLarger,
    /// A measured neighbour scored lower: move to it (smaller).
    MoveSmaller,
    /// An unmeasured neighbour to try (larger; also when neither is measured).
    TryLarger,
    /// An unmeasured neighbour to try (smaller).
    TrySmaller,
    /// Both neighbours scored higher or the same: hold and deflate the others.
    Minimum,
}

impl Decision {
    /// The snake_case name (as in the statistics).
    pub fn name(self) -> &'static str {
        match self {
            Decision::Inactive => "inactive",
            Decision::NoData => "no_data",
            Decision::EvictionJump => "eviction_jump",
            Decision::MoveLarger => "move_larger",
            Decision::MoveSmaller => "move_smaller",
            Decision::TryLarger => "try_larger",
            Decision::TrySmaller => "try_smaller",
            Decision::Minimum => "minimum",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One adjust interval, as logged (the thesis's Figures 4.3 and 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IntervalRecord {
    /// End of the interval, seconds since the controller's first call.
    pub t_s: f64,
    /// Size measured in the interval, bytes.
    pub p: u64,
    /// Target after the decision, bytes.
    pub target: u64,
    /// mspt × miss ratio (when both were measured).
    pub score: Option<f64>,
    /// Milliseconds per 128 KiB read.
    pub mspt: Option<f64>,
    /// Bytes read ÷ bytes requested.
    pub miss_ratio: Option<f64>,
    /// Fraction of the interval the helpers spent reading.
    pub busy: f64,
    /// Evicted bytes ÷ the `evict_of` bytes.
    pub evicted_ratio: f64,
    /// Evictions seen.
    pub evictions: u64,
    /// Mean time from prefetch to eviction, s.
    pub eviction_time_s: Option<f64>,
    /// Mean bit rate of the requests (byte-weighted), kbit/s.
    pub bitrate_kbps: Option<f64>,
    /// What was decided.
    pub decision: Decision,
}

/// A stored score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SizeScore {
    /// Prefetch size, bytes.
    pub bytes: u64,
    /// Its score (deflated since it was measured, if at a minimum).
    pub score: f64,
}

/// The controller's state for `/vodlab/stats` (`prefetch_auto`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutoView {
    /// p now (moving towards the target), bytes.
    pub current_bytes: u64,
    /// The target, bytes.
    pub target_bytes: u64,
    /// Whether p is still moving towards the target.
    pub ramping: bool,
    /// Stored scores, by size.
    pub scores: Vec<SizeScore>,
    /// Intervals evaluated.
    pub intervals: u64,
    /// Intervals that changed the target.
    pub decisions: u64,
    /// Intervals by decision.
    pub by_decision: BTreeMap<&'static str, u64>,
    /// The parameters.
    pub config: AutoConfig,
    /// The last intervals (at most [`RECORDS_KEPT`]), oldest first.
    pub log: Vec<IntervalRecord>,
}

/// What one interval measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Window {
    requested: u64,
    /// Reads reported by connections (`on_read_complete`).
    device_bytes: u64,
    read_time: Duration,
    /// Reads reported by the devices (`on_device_reads`), all of them.
    helper_bytes: u64,
    helper_time: Duration,
    evicted: u64,
    evictions: u64,
    eviction_time: Duration,
    rate_bytes: f64,
    rated_bytes: u64,
}

/// The gradient rule [T1071] on stored scores: `s` the current size's
/// score, `smaller`/`larger` the neighbours' (`None`: not measured;
/// `Some(f64::INFINITY)` for a neighbour outside [min, max]).
pub fn gradient(s: f64, smaller: Option<f64>, larger: Option<f64>) -> Decision {
    match (smaller, larger) {
        // a lower neighbour: towards it; both lower: the lower, a tie grows
        (Some(a), Some(b)) if a < s && b < s => {
            if a < b {
                Decision::MoveSmaller
            } else {
                Decision::MoveLarger
            }
        }
        (Some(a), _) if a < s => Decision::MoveSmaller,
        (_, Some(b)) if b < s => Decision::MoveLarger,
        // the smaller one is worse (or the same) and the larger unmeasured: try it
        (Some(_), None) => Decision::TryLarger,
        (None, Some(_)) => Decision::TrySmaller,
        (None, None) => Decision::TryLarger,
        (Some(_), Some(_)) => Decision::Minimum,
    }
}

/// The automatic prefetch size (see the module note).
#[derive(Debug, Clone)]
pub struct Auto {
    cfg: AutoConfig,
    /// p now, bytes (fractional while ramping).
    p: f64,
    target: u64,
    /// Where the ramp started and when.
    ramp_from: f64,
    ramp_at: Option<Instant>,
    scores: BTreeMap<u64, f64>,
    window: Window,
    /// When the interval being measured began (None: not yet).
    since: Option<Instant>,
    t0: Option<Instant>,
    intervals: u64,
    decisions: u64,
    by_decision: BTreeMap<&'static str, u64>,
    log: VecDeque<IntervalRecord>,
    /// Whether the server reports the devices' reads (then they, not the
    /// connections' reports, give busy, mspt and the miss ratio).
    device_fed: bool,
}

impl Auto {
    /// A controller at `cfg.start` (the configuration is assumed valid).
    pub fn new(cfg: AutoConfig) -> Self {
        Self {
            cfg,
            p: cfg.start as f64,
            target: cfg.start,
            ramp_from: cfg.start as f64,
            ramp_at: None,
            scores: BTreeMap::new(),
            window: Window::default(),
            since: None,
            t0: None,
            intervals: 0,
            decisions: 0,
            by_decision: BTreeMap::new(),
            log: VecDeque::new(),
            device_fed: false,
        }
    }

    /// p now, bytes.
    pub fn current(&self) -> u64 {
        self.p.round() as u64
    }

    /// The target, bytes.
    pub fn target(&self) -> u64 {
        self.target
    }

    /// The stored score of a size.
    pub fn score(&self, size: u64) -> Option<f64> {
        self.scores.get(&size).copied()
    }

    /// The interval records kept, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &IntervalRecord> {
        self.log.iter()
    }

    /// The state for the statistics.
    pub fn view(&self) -> AutoView {
        AutoView {
            current_bytes: self.current(),
            target_bytes: self.target,
            ramping: self.ramp_at.is_some(),
            scores: self
                .scores
                .iter()
                .map(|(&bytes, &score)| SizeScore { bytes, score })
                .collect(),
            intervals: self.intervals,
            decisions: self.decisions,
            by_decision: self.by_decision.clone(),
            config: self.cfg,
            log: self.log.iter().copied().collect(),
        }
    }

    /// The size for a request of bit rate `bps` now.
    pub fn size_for(&self, bps: Option<u64>) -> u64 {
        let p = match &self.cfg.scaling {
            Some(s) => s.size(self.p, bps),
            None => self.p,
        };
        (p.round() as u64).max(4096)
    }

    fn set_target(&mut self, now: Instant, target: u64) {
        let t = target.clamp(self.cfg.min, self.cfg.max);
        if t == self.target {
            return;
        }
        self.target = t;
        self.ramp_from = self.p;
        self.ramp_at = Some(now);
        self.decisions += 1;
    }

    /// Advances the ramp; true when p is at the target.
    fn advance(&mut self, now: Instant) -> bool {
        let Some(at) = self.ramp_at else {
            return true;
        };
        let ramp = self.cfg.ramp.as_secs_f64();
        let f = if ramp > 0.0 {
            (now.saturating_duration_since(at).as_secs_f64() / ramp).min(1.0)
        } else {
            1.0
        };
        self.p = self.ramp_from + (self.target as f64 - self.ramp_from) * f;
        if f >= 1.0 {
            self.p = self.target as f64;
            self.ramp_at = None;
            return true;
        }
        false
    }

    /// The rounded size a target jump goes to (the step grid).
    fn on_grid(&self, bytes: f64) -> u64 {
        let step = self.cfg.step as f64;
        ((bytes / step).round() * step) as u64
    }

    /// Ends an interval of length `elapsed` at `now`: measures, decides.
    fn evaluate(&mut self, now: Instant, elapsed: Duration) {
        let mut w = std::mem::take(&mut self.window);
        if self.device_fed {
            // every read the helpers did, those of connections gone included
            w.device_bytes = w.helper_bytes;
            w.read_time = w.helper_time;
        }
        let p = self.target;
        let secs = elapsed.as_secs_f64().max(1e-9);
        let busy = (w.read_time.as_secs_f64() / secs).min(1.0);
        let mspt = (w.device_bytes > 0)
            .then(|| w.read_time.as_secs_f64() * 1e3 / (w.device_bytes as f64 / TRANSACTION));
        let miss = (w.requested > 0).then(|| w.device_bytes as f64 / w.requested as f64);
        let score = mspt.zip(miss).map(|(a, b)| a * b);
        let base = match self.cfg.evict_of {
            EvictBase::Requested => w.requested,
            EvictBase::Prefetched => w.device_bytes,
        };
        let evicted_ratio = if base > 0 {
            w.evicted as f64 / base as f64
        } else {
            0.0
        };
        let eviction_time =
            (w.evictions > 0).then(|| w.eviction_time.as_secs_f64() / w.evictions as f64);
        let rate_bps = (w.rated_bytes > 0).then(|| w.rate_bytes / w.rated_bytes as f64);
        let decision = if busy < self.cfg.busy {
            Decision::Inactive
        } else if let Some(s) = score {
            self.scores.insert(p, s);
            self.decide(now, p, s, evicted_ratio, eviction_time, rate_bps)
        } else {
            Decision::NoData
        };
        self.intervals += 1;
        *self.by_decision.entry(decision.name()).or_default() += 1;
        if self.log.len() >= RECORDS_KEPT {
            self.log.pop_front();
        }
        let t0 = *self.t0.get_or_insert(now);
        self.log.push_back(IntervalRecord {
            t_s: now.saturating_duration_since(t0).as_secs_f64(),
            p,
            target: self.target,
            score,
            mspt,
            miss_ratio: miss,
            busy,
            evicted_ratio,
            evictions: w.evictions,
            eviction_time_s: eviction_time,
            bitrate_kbps: rate_bps.map(|b| b / 1000.0),
            decision,
        });
    }

    fn decide(
        &mut self,
        now: Instant,
        p: u64,
        s: f64,
        evicted_ratio: f64,
        eviction_time: Option<f64>,
        rate_bps: Option<f64>,
    ) -> Decision {
        // heavy memory pressure: p = eviction time × bit rate [T1079]
        if evicted_ratio > self.cfg.evict {
            let rate = match &self.cfg.scaling {
                // the reference rate's size; the others follow it
                Some(sc) => Some(sc.reference_kbps * 1000.0),
                None => rate_bps,
            };
            if let Some((t, b)) = eviction_time.zip(rate) {
                let jump = self.on_grid(t * b / 8.0).clamp(self.cfg.min, self.cfg.max);
                if jump < p {
                    self.set_target(now, jump);
                    return Decision::EvictionJump;
                }
            }
        }
        let step = self.cfg.step;
        let neighbour = |size: Option<u64>| match size {
            Some(n) if (self.cfg.min..=self.cfg.max).contains(&n) => self.scores.get(&n).copied(),
            _ => Some(f64::INFINITY),
        };
        let smaller = neighbour(p.checked_sub(step));
        let larger = neighbour(p.checked_add(step));
        let d = gradient(s, smaller, larger);
        match d {
            Decision::MoveLarger | Decision::TryLarger => self.set_target(now, p + step),
            Decision::MoveSmaller | Decision::TrySmaller => self.set_target(now, p - step),
            Decision::Minimum => {
                let keep = 1.0 - self.cfg.deflation;
                for (size, v) in self.scores.iter_mut() {
                    if *size != p {
                        *v *= keep;
                    }
                }
            }
            _ => {}
        }
        d
    }
}

impl PrefetchController for Auto {
    fn on_request(
        &mut self,
        now: Instant,
        req: &RequestInfo<'_>,
        _session: &mut SessionState,
        _chain: Option<&mut ChainState>,
    ) -> PrefetchDecision {
        self.t0.get_or_insert(now);
        // an open-ended request asks for the rest of the file, and is asked
        // again at its frontier for each read: a miss counts the bytes of
        // one read (what the viewer gets from this ask, at most the rest),
        // not the rest each time; a hit sends the whole rest at once
        let asked = if req.open_ended && !req.resident {
            self.size_for(req.bitrate_bps).min(req.length)
        } else {
            req.length
        };
        self.window.requested += asked;
        if let Some(b) = req.bitrate_bps.filter(|&b| b > 0) {
            self.window.rate_bytes += b as f64 * asked as f64;
            self.window.rated_bytes += asked;
        }
        read_size(self.size_for(req.bitrate_bps), req)
    }

    fn on_read_complete(&mut self, _now: Instant, bytes: u64, duration: Duration) {
        self.window.device_bytes += bytes;
        self.window.read_time += duration;
    }

    fn on_device_reads(&mut self, _now: Instant, bytes: u64, busy: Duration) {
        self.device_fed = true;
        self.window.helper_bytes += bytes;
        self.window.helper_time += busy;
    }

    fn on_evicted(&mut self, _now: Instant, bytes: u64, unused_for: Duration) {
        self.window.evicted += bytes;
        self.window.evictions += 1;
        self.window.eviction_time += unused_for;
    }

    fn on_tick(&mut self, now: Instant) {
        self.t0.get_or_insert(now);
        if !self.advance(now) {
            return;
        }
        match self.since {
            // p has just settled (or this is the first tick): measure from now
            None => {
                self.since = Some(now);
                self.window = Window::default();
            }
            Some(since) => {
                let elapsed = now.saturating_duration_since(since);
                if elapsed >= self.cfg.interval {
                    self.evaluate(now, elapsed);
                    // a new target: measure once p is there
                    self.since = if self.ramp_at.is_some() {
                        None
                    } else {
                        Some(now)
                    };
                }
            }
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// A size per bit rate around a fixed reference size (`fixed:SIZE,ref=KBPS`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaled {
    /// The reference rate's size, bytes.
    pub size: u64,
    /// How the other rates' sizes follow.
    pub scaling: Scaling,
}

impl PrefetchController for Scaled {
    fn on_request(
        &mut self,
        _now: Instant,
        req: &RequestInfo<'_>,
        _session: &mut SessionState,
        _chain: Option<&mut ChainState>,
    ) -> PrefetchDecision {
        let n = (self.scaling.size(self.size as f64, req.bitrate_bps).round() as u64).max(4096);
        read_size(n, req)
    }

    fn on_read_complete(&mut self, _now: Instant, _bytes: u64, _duration: Duration) {}

    fn on_evicted(&mut self, _now: Instant, _bytes: u64, _unused_for: Duration) {}

    fn on_tick(&mut self, _now: Instant) {}
}

#[cfg(test)]
mod tests;
