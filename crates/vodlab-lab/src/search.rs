//! Capacity search (thesis 4.4.3): raise the session rate step by step until
//! the failure criterion trips, then bisect between the highest rate that
//! passed and the lowest that failed ([`SearchMode::Bisect`]), or stop at
//! that first failing step ([`SearchMode::Additive`], the thesis's fixed
//! increments of load). Pure: the caller measures a rate (a real run, or a
//! simulated server in tests) and reports each outcome back.
//!
//! A run whose load generator was INVALID (late starts or sends, saturated
//! CPU, descriptors or ports exhausted: `client_valid == false`; on an
//! emulated drive also a drive that fell behind its model,
//! [`crate::compare::drive_fell_behind`]) can neither
//! pass nor fail: its point gets [`Verdict::Invalid`] and the search stops
//! there with [`Ending::ClientLimited`]; the answer is then a lower bound
//! taken from valid points only.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::stats::{mean_ci, MeanCi};

/// Invalid search settings.
#[derive(Debug, Error, PartialEq)]
pub enum SearchError {
    /// A setting is out of range.
    #[error("capacity search: {0}")]
    Invalid(String),
}

/// When a measured point counts as served.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Criterion {
    /// No measured session may fail (the thesis's maximum failure-free rate).
    NoFailures,
    /// At most this percentage of measured sessions may fail.
    MaxFailedPct {
        /// Percent of measured sessions.
        pct: f64,
    },
    /// Quality of experience: at most `stalled_pct` % of sessions stall (a
    /// failed session counts as stalled) and the 95th percentile start-up
    /// delay is at most `p95_startup_s`.
    Qoe {
        /// Percent of measured sessions with a stall or a failure.
        stalled_pct: f64,
        /// Seconds.
        p95_startup_s: f64,
    },
}

impl Criterion {
    /// Parses `none`, `failed:PCT` or `qoe:STALLED_PCT:P95_STARTUP_S`.
    pub fn parse(s: &str) -> Result<Self, SearchError> {
        let bad = |why: &str| SearchError::Invalid(format!("criterion `{s}`: {why}"));
        let num = |x: &str| {
            x.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(&format!("`{x}` is not a non-negative number")))
        };
        let parts: Vec<&str> = s.split(':').collect();
        let c = match parts.as_slice() {
            ["none" | "no-failures" | "strict"] => Self::NoFailures,
            ["failed", p] => Self::MaxFailedPct { pct: num(p)? },
            ["qoe", p, s] => Self::Qoe {
                stalled_pct: num(p)?,
                p95_startup_s: num(s)?,
            },
            _ => {
                return Err(bad(
                    "use `none`, `failed:PCT` or `qoe:STALLED_PCT:P95_STARTUP_S`",
                ))
            }
        };
        if let Self::MaxFailedPct { pct }
        | Self::Qoe {
            stalled_pct: pct, ..
        } = c
        {
            if pct > 100.0 {
                return Err(bad("a percentage cannot exceed 100"));
            }
        }
        Ok(c)
    }

    /// `Ok(())` when the outcome passes, else why it does not.
    pub fn judge(&self, o: &Outcome) -> Result<(), String> {
        if o.measured_sessions == 0 {
            return Err("no measured session finished".into());
        }
        let failed = o.failed_sessions + o.unfinished_sessions;
        let failed_pct =
            100.0 * failed as f64 / (o.measured_sessions + o.unfinished_sessions) as f64;
        match *self {
            Self::NoFailures if failed > 0 => Err(format!(
                "{} failed and {} unfinished session(s)",
                o.failed_sessions, o.unfinished_sessions
            )),
            Self::MaxFailedPct { pct } if failed_pct > pct => Err(format!(
                "{failed_pct:.2} % of sessions failed (limit {pct} %)"
            )),
            Self::Qoe {
                stalled_pct,
                p95_startup_s,
            } => {
                let total = (o.measured_sessions + o.unfinished_sessions) as f64;
                let bad =
                    (o.stalled_sessions + failed).min(o.measured_sessions + o.unfinished_sessions);
                let got = 100.0 * bad as f64 / total;
                if got > stalled_pct {
                    Err(format!(
                        "{got:.2} % of sessions stalled or failed (limit {stalled_pct} %)"
                    ))
                } else if o.p95_startup_s > p95_startup_s {
                    Err(format!(
                        "p95 start-up delay {:.2} s (limit {p95_startup_s} s)",
                        o.p95_startup_s
                    ))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for Criterion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoFailures => write!(f, "no failed session"),
            Self::MaxFailedPct { pct } => write!(f, "at most {pct} % failed sessions"),
            Self::Qoe {
                stalled_pct,
                p95_startup_s,
            } => write!(
                f,
                "at most {stalled_pct} % stalled sessions and p95 start-up <= {p95_startup_s} s"
            ),
        }
    }
}

/// What one run at a rate produced (the part the criterion and the summary need).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Sessions outside the ramps that ran to their end.
    pub measured_sessions: u64,
    /// Of those, failed.
    pub failed_sessions: u64,
    /// Sessions still running when the run was cut (count as failed).
    pub unfinished_sessions: u64,
    /// Measured sessions that stalled at least once.
    pub stalled_sessions: u64,
    /// 95th percentile start-up delay, s.
    pub p95_startup_s: f64,
    /// Delivered throughput over the measured window, bytes/s.
    pub throughput_bytes_per_s: f64,
    /// The lab's health verdict: false means the load generator could not
    /// keep up (or, on an emulated drive, the drive's emulation fell
    /// behind its model) and the point is not trustworthy.
    pub client_valid: bool,
    /// Why the client marked the run invalid.
    pub client_invalid_reasons: Vec<String>,
    /// Extra figures of the run (where its results are, disk throughput,
    /// server statistics, ...).
    #[serde(default)]
    pub extra: RunExtra,
}

/// Figures of one run beyond what the criterion needs: filled by the point
/// runner (sessions, results directory, server statistics) and by `compare`
/// (box and device counters). Absent figures are left out of the file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunExtra {
    /// Sessions the point started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u64>,
    /// Wall-clock length of the run, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// Body bytes delivered during the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_bytes: Option<u64>,
    /// 99th percentile response time of measured sessions, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_p99_ms: Option<f64>,
    /// The run's directory (results.json, summary.txt, requests.csv),
    /// relative to the capacity.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<String>,
    /// `GET /vodlab/stats` of a `vodlab serve` target before the run (the
    /// server's own document, kept as it came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_stats_before: Option<serde_json::Value>,
    /// The same after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_stats_after: Option<serde_json::Value>,
    /// Bytes the box's cgroup read from the throttled device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Those bytes per second of the run, MB/s (10^6 bytes); without a box,
    /// the device's counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_mb_s: Option<f64>,
    /// Bytes read by the whole device per second of the run, MB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_mb_s: Option<f64>,
    /// Device busy time per read, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_ms_per_read: Option<f64>,
    /// Mean read size, KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_read_kib: Option<f64>,
    /// Disk bytes per delivered byte, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_miss_pct: Option<f64>,
    /// On an emulated drive: the share of the drive's response time, as
    /// the server's kernel saw it, that the emulation added (replies late
    /// after the model had served them; `vodlab_diskfs::Derived::reply_late_share`),
    /// percent. Over [`crate::compare::MAX_REPLY_LATE_PCT`] the run is
    /// INVALID: the machine did not keep up with the drive at this time
    /// compression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_reply_late_pct: Option<f64>,
    /// CPU time of the box's processes, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_s: Option<f64>,
    /// That per delivered gigabyte, s/GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_s_per_gb: Option<f64>,
    /// Peak memory of the box (page cache included), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub box_memory_peak_bytes: Option<u64>,
    /// Concurrent viewers: the time average of active sessions over the
    /// run's measured window (`capacity::add_viewer_figures`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_active_sessions: Option<f64>,
    /// Most sessions active at once in the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_active_sessions: Option<u64>,
}

/// How the stepping phase raises the rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "by", rename_all = "snake_case")]
pub enum Step {
    /// Add this many sessions/s (the thesis adds a fixed amount).
    Add(f64),
    /// Multiply by this factor (> 1): finds the bracket in few points when
    /// the capacity is unknown.
    Mul(f64),
}

/// What the search does once it has a passing and a failing rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// Bisect between the highest passing and the lowest failing rate until
    /// the bracket is within the precision.
    #[default]
    Bisect,
    /// The thesis's way: raise the load by a fixed increment ([`Step::Add`])
    /// and stop at the first step that fails; the answer is the last step
    /// that passed (the bracket is one increment wide, whatever the
    /// precision). When the first rate fails it steps down by the same
    /// increment until one passes.
    Additive,
}

impl SearchMode {
    /// `bisect` or `additive`, as the file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bisect => "bisect",
            Self::Additive => "additive",
        }
    }
}

/// Parses `--search`: `bisect`, `additive` (with `start` and `step`, which
/// must then be an increment) or `additive:START:STEP` (its own start and
/// increment); gives the mode, the start and the step.
pub fn parse_mode(s: &str, start: f64, step: Step) -> Result<(SearchMode, f64, Step), SearchError> {
    let bad = |why: String| SearchError::Invalid(format!("--search `{s}`: {why}"));
    let num = |what: &str, x: &str| {
        x.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| bad(format!("{what} `{x}` is not a number above 0")))
    };
    let parts: Vec<&str> = s.trim().split(':').collect();
    match parts.as_slice() {
        ["bisect"] => Ok((SearchMode::Bisect, start, step)),
        ["additive"] => match step {
            Step::Add(_) => Ok((SearchMode::Additive, start, step)),
            Step::Mul(f) => Err(bad(format!(
                "the additive search adds a fixed increment; --step is x{f} (give --step +D or additive:START:STEP)"
            ))),
        },
        ["additive", a, d] => Ok((
            SearchMode::Additive,
            num("START", a)?,
            Step::Add(num("STEP", d)?),
        )),
        _ => Err(bad(
            "use `bisect`, `additive` or `additive:START:STEP` (e.g. additive:10:10)".into(),
        )),
    }
}

/// Search settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    /// Bisect after the first failure, or stop there (additive). Files
    /// written before the mode existed read as `bisect`.
    #[serde(default)]
    pub mode: SearchMode,
    /// First rate tried, sessions/s.
    pub start: f64,
    /// Step of the raising phase (and, when the first rate fails, of lowering).
    pub step: Step,
    /// Stop bisecting when the bracket is narrower than this fraction of its
    /// lower end (0.05 = 5 %).
    pub precision: f64,
    /// Never try a rate above this.
    pub max_rate: f64,
    /// Never try a rate below this.
    pub min_rate: f64,
    /// Measure every rate this many times; a rate passes only if every
    /// repetition passes.
    pub repeats: u32,
    /// Stop after this many rates in all.
    pub max_points: usize,
    /// The criterion.
    pub criterion: Criterion,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            mode: SearchMode::Bisect,
            start: 1.0,
            step: Step::Mul(2.0),
            precision: 0.1,
            max_rate: 10_000.0,
            min_rate: 0.01,
            repeats: 1,
            max_points: 20,
            criterion: Criterion::NoFailures,
        }
    }
}

impl SearchConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), SearchError> {
        let bad = |m: String| Err(SearchError::Invalid(m));
        if !(self.min_rate > 0.0 && self.min_rate <= self.start && self.start <= self.max_rate) {
            return bad(format!(
                "need 0 < min rate ({}) <= start ({}) <= max rate ({})",
                self.min_rate, self.start, self.max_rate
            ));
        }
        match self.step {
            Step::Add(d) if !(d > 0.0 && d.is_finite()) => {
                return bad(format!("step +{d} must be > 0"))
            }
            Step::Mul(f) if !(f > 1.0 && f.is_finite()) => {
                return bad(format!("step x{f} must be > 1"))
            }
            _ => {}
        }
        if self.mode == SearchMode::Additive && !matches!(self.step, Step::Add(_)) {
            return bad(
                "the additive search raises the rate by a fixed increment: its step must be +D"
                    .into(),
            );
        }
        if !(self.precision > 0.0 && self.precision < 1.0) {
            return bad(format!("precision {} must be in (0, 1)", self.precision));
        }
        if self.repeats == 0 || self.max_points == 0 {
            return bad("repeats and max points must be at least 1".into());
        }
        Ok(())
    }
}

/// What a settled rate showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every repetition met the criterion with a valid client.
    Pass,
    /// A repetition missed the criterion with a valid client.
    Fail,
    /// A repetition's load generator was INVALID: the point says nothing
    /// about the server (neither pass nor fail) and the search stops there.
    Invalid,
}

impl Verdict {
    /// `pass`, `FAIL` or `INVALID`, as tables print it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "FAIL",
            Self::Invalid => "INVALID",
        }
    }
}

/// The repetitions at one rate and their verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Offered session rate, sessions/s.
    pub rate: f64,
    /// The verdict.
    pub verdict: Verdict,
    /// `verdict == pass` (the only verdict field of format version 1).
    pub passed: bool,
    /// Why it did not pass: the first failing repetition's reason, or the
    /// client's invalid reasons.
    pub reason: Option<String>,
    /// The repetitions, in order.
    pub runs: Vec<Outcome>,
}

impl Point {
    /// Throughput over the repetitions, bytes/s, with its 95 % interval.
    pub fn throughput(&self) -> Option<MeanCi> {
        mean_ci(
            &self
                .runs
                .iter()
                .map(|o| o.throughput_bytes_per_s)
                .collect::<Vec<_>>(),
        )
    }
    /// Percent of sessions failed (or unfinished) over the repetitions.
    pub fn failed_pct(&self) -> Option<MeanCi> {
        mean_ci(
            &self
                .runs
                .iter()
                .map(|o| {
                    let all = o.measured_sessions + o.unfinished_sessions;
                    if all == 0 {
                        100.0
                    } else {
                        100.0 * (o.failed_sessions + o.unfinished_sessions) as f64 / all as f64
                    }
                })
                .collect::<Vec<_>>(),
        )
    }
    /// A figure over the repetitions that have it.
    pub fn mean_of(&self, figure: impl Fn(&Outcome) -> Option<f64>) -> Option<MeanCi> {
        let xs: Vec<f64> = self.runs.iter().filter_map(figure).collect();
        mean_ci(&xs)
    }
    /// Every repetition's client was healthy.
    pub fn client_valid(&self) -> bool {
        self.runs.iter().all(|o| o.client_valid)
    }
}

/// Why the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The bracket is within the precision (additive search: a step failed
    /// right after one that passed).
    Converged,
    /// Even the highest allowed rate passed: the capacity is at least that.
    AboveMaxRate,
    /// Even the lowest allowed rate failed.
    BelowMinRate,
    /// The point budget ran out before convergence.
    OutOfPoints,
    /// The load generator was INVALID at [`Answer::client_limited_at`]: no
    /// rate at or above it was judged.
    ClientLimited,
}

/// The search state: feed it outcomes, ask it for the next rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Search {
    /// Settings.
    pub config: SearchConfig,
    /// Every measured rate in order.
    pub points: Vec<Point>,
    /// The rate being repeated and its outcomes so far.
    #[serde(skip)]
    pending: Option<(f64, Vec<Outcome>)>,
}

/// The answer of a finished (or stopped) search; the default is a search
/// that answered nothing (a row skipped or failed before its first point).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Highest rate that passed, sessions/s (`None`: none passed).
    pub capacity: Option<f64>,
    /// Lowest rate that failed (`None`: none failed).
    pub lowest_failed: Option<f64>,
    /// Why the search ended (`None` while it is still running).
    pub ending: Option<Ending>,
    /// A rate passed above one that failed (noise or a non-monotone server).
    pub non_monotone: bool,
    /// The rate at which the load generator was INVALID (the search stopped
    /// there), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limited_at: Option<f64>,
}

impl Search {
    /// A new search; the settings must validate.
    pub fn new(config: SearchConfig) -> Result<Self, SearchError> {
        config.validate()?;
        Ok(Self {
            config,
            points: Vec::new(),
            pending: None,
        })
    }

    fn best_pass(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.verdict == Verdict::Pass)
            .map(|p| p.rate)
            .reduce(f64::max)
    }

    fn lowest_fail(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.verdict == Verdict::Fail)
            .map(|p| p.rate)
            .reduce(f64::min)
    }

    /// The rate of the first point whose client was INVALID.
    pub fn client_limited_at(&self) -> Option<f64> {
        self.points
            .iter()
            .find(|p| p.verdict == Verdict::Invalid)
            .map(|p| p.rate)
    }

    /// The highest passing point (valid client by construction).
    pub fn best_point(&self) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| p.verdict == Verdict::Pass)
            .max_by(|x, y| x.rate.total_cmp(&y.rate))
    }

    /// The lowest failing point.
    pub fn lowest_failed_point(&self) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| p.verdict == Verdict::Fail)
            .min_by(|x, y| x.rate.total_cmp(&y.rate))
    }

    /// The rate to measure next (the same rate until its repetitions are
    /// in), or `None` when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        self.decide().0
    }

    /// Which repetition of the next rate is due (0-based).
    pub fn next_repeat(&self) -> u32 {
        self.pending.as_ref().map_or(0, |(_, v)| v.len() as u32)
    }

    fn decide(&self) -> (Option<f64>, Option<Ending>) {
        let c = &self.config;
        if let Some((rate, _)) = &self.pending {
            return (Some(*rate), None);
        }
        // an INVALID client ends the search: above this rate the generator
        // cannot be trusted, and bisecting below it would climb back to it
        if self.client_limited_at().is_some() {
            return (None, Some(Ending::ClientLimited));
        }
        let (lo, hi) = (self.best_pass(), self.lowest_fail());
        let next = match (lo, hi) {
            (None, None) => c.start,
            (Some(lo), None) => {
                if lo >= c.max_rate {
                    return (None, Some(Ending::AboveMaxRate));
                }
                match c.step {
                    Step::Add(d) => lo + d,
                    Step::Mul(f) => lo * f,
                }
                .min(c.max_rate)
            }
            (None, Some(hi)) => {
                if hi <= c.min_rate {
                    return (None, Some(Ending::BelowMinRate));
                }
                match c.step {
                    Step::Add(d) => hi - d,
                    Step::Mul(f) => hi / f,
                }
                .max(c.min_rate)
            }
            // additive: the first failing step (or, stepping down, the first
            // passing one) ends it; the bracket is one increment wide
            (Some(_), Some(_)) if c.mode == SearchMode::Additive => {
                return (None, Some(Ending::Converged));
            }
            (Some(lo), Some(hi)) => {
                if hi <= lo || (hi - lo) <= c.precision * lo {
                    return (None, Some(Ending::Converged));
                }
                (lo + hi) / 2.0
            }
        };
        if self.points.len() >= c.max_points {
            return (None, Some(Ending::OutOfPoints));
        }
        (Some(next), None)
    }

    /// How one repetition counts: INVALID when its client was, else the
    /// criterion's verdict (with the reason when it is not a pass).
    pub fn judge(&self, o: &Outcome) -> (Verdict, Option<String>) {
        if !o.client_valid {
            let why = if o.client_invalid_reasons.is_empty() {
                "the load generator marked the run invalid".to_string()
            } else {
                o.client_invalid_reasons.join("; ")
            };
            return (Verdict::Invalid, Some(format!("client INVALID: {why}")));
        }
        match self.config.criterion.judge(o) {
            Ok(()) => (Verdict::Pass, None),
            Err(r) => (Verdict::Fail, Some(r)),
        }
    }

    /// Records the outcome of one repetition at `rate` (which must be
    /// `next_rate()`). A failing or INVALID repetition settles the rate at
    /// once (the remaining repetitions would not change the verdict);
    /// otherwise the rate is settled after `repeats` passing ones.
    pub fn record(&mut self, rate: f64, outcome: Outcome) {
        debug_assert_eq!(
            Some(rate),
            self.next_rate(),
            "record the rate next_rate() gave"
        );
        let (verdict, reason) = self.judge(&outcome);
        let (_, runs) = self.pending.get_or_insert_with(|| (rate, Vec::new()));
        runs.push(outcome);
        let settled = verdict != Verdict::Pass || runs.len() as u32 >= self.config.repeats;
        if settled {
            let (rate, runs) = self.pending.take().expect("pending was set above");
            self.points.push(Point {
                rate,
                verdict,
                passed: verdict == Verdict::Pass,
                reason,
                runs,
            });
        }
    }

    /// The answer so far (final once `next_rate()` is `None`).
    pub fn answer(&self) -> Answer {
        let (capacity, lowest_failed) = (self.best_pass(), self.lowest_fail());
        Answer {
            capacity,
            lowest_failed,
            ending: self.decide().1,
            non_monotone: matches!((capacity, lowest_failed), (Some(a), Some(b)) if a >= b),
            client_limited_at: self.client_limited_at(),
        }
    }

    /// Drives the whole search: `measure(rate, repeat)` runs one repetition.
    /// Stops early (keeping every point so far) when `measure` fails.
    pub fn run<E>(
        &mut self,
        mut measure: impl FnMut(f64, u32) -> Result<Outcome, E>,
    ) -> Result<Answer, E> {
        while let Some(rate) = self.next_rate() {
            let o = measure(rate, self.next_repeat())?;
            self.record(rate, o);
        }
        Ok(self.answer())
    }
}

#[cfg(test)]
mod tests;
