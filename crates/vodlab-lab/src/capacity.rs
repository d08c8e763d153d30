//! `capacity.json`: a capacity search with every run, typed
//! (schema: `docs/capacity.schema.json`).
//!
//! Version 2 added the search outcome (`outcome`), per-point and per-row
//! verdicts (`verdict`: pass, fail or invalid) and the client's lateness
//! threshold. Version 1 files (written before) still load: the reader
//! derives what they lack from what they have (a version-1 point either
//! passed or failed; its outcome follows from `answer.ending` and `error`).
//! Newer versions fail with an error naming the version.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::files::{parse_versioned, read_with, write_pretty, FileError};
use crate::search::{Answer, Ending, Point, RunExtra, Search, SearchMode, Verdict};
use crate::stats::MeanCi;
use vodlab_client::out::results::Results;

/// The `format` of a capacity.json.
pub const CAPACITY_FORMAT: &str = "vodlab-capacity";
/// The version this crate writes.
pub const CAPACITY_VERSION: u32 = 2;

/// How a search ended, as the file records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SearchOutcome {
    /// The bracket between the highest passing and the lowest failing rate
    /// is within the precision: the capacity was found.
    Found,
    /// Even the highest allowed rate passed: the capacity is at least that.
    AboveMaxRate,
    /// Even the lowest allowed rate failed.
    BelowMinRate,
    /// The point budget ran out before the bracket converged.
    OutOfPoints,
    /// The load generator was INVALID at `rate`: the point neither passed nor
    /// failed and the search stopped there; the capacity (if any) is a lower
    /// bound from the valid points below.
    ClientLimited {
        /// Offered sessions/s of the INVALID point.
        rate: f64,
        /// The client's reasons (late starts or sends, CPU, descriptors, ports).
        reasons: Vec<String>,
    },
    /// Ctrl-C: the search stopped with the points so far.
    Interrupted {
        /// What was stopped.
        message: String,
    },
    /// A run could not be measured (the server died, an I/O error, ...).
    Error {
        /// The error.
        message: String,
    },
    /// Not run: a `compare` row whose server cannot speak the comparison's
    /// protocol here (`reason` names what is missing).
    Skipped {
        /// Why it was not run.
        reason: String,
    },
}

/// Why a search stopped before its own end (the caller knows; the pure
/// search does not).
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// Ctrl-C.
    Interrupted(String),
    /// Any other error.
    Error(String),
}

impl SearchOutcome {
    /// The outcome of `search`, stopped early by `stop` if given (a search
    /// that reached its own end keeps that ending).
    pub fn of(search: &Search, stop: Option<&Stop>) -> Self {
        match search.answer().ending {
            Some(Ending::Converged) => Self::Found,
            Some(Ending::AboveMaxRate) => Self::AboveMaxRate,
            Some(Ending::BelowMinRate) => Self::BelowMinRate,
            Some(Ending::OutOfPoints) => Self::OutOfPoints,
            Some(Ending::ClientLimited) => {
                let p = search
                    .points
                    .iter()
                    .find(|p| p.verdict == Verdict::Invalid)
                    .expect("a client-limited search has an INVALID point");
                let mut reasons: Vec<String> = Vec::new();
                for r in p.runs.iter().flat_map(|o| &o.client_invalid_reasons) {
                    if !reasons.contains(r) {
                        reasons.push(r.clone());
                    }
                }
                Self::ClientLimited {
                    rate: p.rate,
                    reasons,
                }
            }
            None => match stop {
                Some(Stop::Interrupted(m)) => Self::Interrupted { message: m.clone() },
                Some(Stop::Error(m)) => Self::Error { message: m.clone() },
                None => Self::Error {
                    message: "the search stopped before its end".into(),
                },
            },
        }
    }

    /// The outcome of a version-1 capacity file or compare row (which had
    /// none): from `answer.ending` and `error`.
    pub(crate) fn from_v1(v: &Value) -> Self {
        let error = v.get("error").and_then(Value::as_str).map(str::to_string);
        match v.pointer("/answer/ending").and_then(Value::as_str) {
            Some("converged") => Self::Found,
            Some("above_max_rate") => Self::AboveMaxRate,
            Some("below_min_rate") => Self::BelowMinRate,
            Some("out_of_points") => Self::OutOfPoints,
            _ => match error {
                Some(m) if m.starts_with("interrupted") => Self::Interrupted { message: m },
                Some(m) => Self::Error { message: m },
                None => Self::Error {
                    message: "the search stopped before its end".into(),
                },
            },
        }
    }

    /// The kind as the file spells it (`found`, `client_limited`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Found => "found",
            Self::AboveMaxRate => "above_max_rate",
            Self::BelowMinRate => "below_min_rate",
            Self::OutOfPoints => "out_of_points",
            Self::ClientLimited { .. } => "client_limited",
            Self::Interrupted { .. } => "interrupted",
            Self::Error { .. } => "error",
            Self::Skipped { .. } => "skipped",
        }
    }

    /// The search ran to its own end (not interrupted or cut by an error).
    pub fn is_complete(&self) -> bool {
        !matches!(self, Self::Interrupted { .. } | Self::Error { .. })
    }
}

/// A point's summary (means with 95 % intervals over its runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Offered sessions/s.
    pub rate: f64,
    /// Pass, fail, or invalid (the client could not keep up).
    pub verdict: Verdict,
    /// `verdict == pass`.
    pub passed: bool,
    /// Why not.
    pub reason: Option<String>,
    /// Runs.
    pub runs: usize,
    /// Delivered MB/s (10^6 bytes).
    pub delivered_mb_s: Option<MeanCi>,
    /// Failed or unfinished sessions, percent.
    pub failed_pct: Option<MeanCi>,
    /// Every run's client was healthy.
    pub client_valid: bool,
}

/// Summary rows of a search, one per point in the order measured.
pub fn rows(search: &Search) -> Vec<Row> {
    search
        .points
        .iter()
        .map(|p| Row {
            rate: p.rate,
            verdict: p.verdict,
            passed: p.passed,
            reason: p.reason.clone(),
            runs: p.runs.len(),
            delivered_mb_s: p.throughput().map(|c| scale_ci(c, 1e-6)),
            failed_pct: p.failed_pct(),
            client_valid: p.client_valid(),
        })
        .collect()
}

/// Scales a mean and interval by `k`.
pub fn scale_ci(c: MeanCi, k: f64) -> MeanCi {
    MeanCi {
        n: c.n,
        mean: c.mean * k,
        sd: c.sd * k,
        half_width: c.half_width.map(|h| h * k),
    }
}

/// Everything `capacity.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityFile {
    /// `"vodlab-capacity"`.
    pub format: String,
    /// 2 (a version-1 file keeps its 1 when read).
    pub version: u32,
    /// The search ran to its end (not interrupted or cut by an error).
    pub complete: bool,
    /// Why it did not, if it did not.
    pub error: Option<String>,
    /// How the search ended.
    pub outcome: SearchOutcome,
    /// Workload name.
    pub workload: String,
    /// Target URL.
    pub target: String,
    /// Server label (compare/bench) or null.
    pub server: Option<String>,
    /// The rule, in words.
    pub criterion: String,
    /// Seconds of arrivals per point.
    pub window_s: f64,
    /// Drain limit per point, s.
    pub drain_s: f64,
    /// Pacing was on.
    pub pacing: bool,
    /// Link emulation was on.
    pub shaping: bool,
    /// The client's lateness threshold, ms (not in version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_threshold_ms: Option<f64>,
    /// Client processes each point ran in (`--client-processes`; absent in
    /// files written before it: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_processes: Option<u32>,
    /// Time compression k of every point (`--time-compression`; absent: 1):
    /// rates and figures here are nominal, each point's results.json is in
    /// wall-clock time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_compression: Option<f64>,
    /// Settings and every point with its runs.
    pub search: Search,
    /// The answer.
    pub answer: Answer,
    /// Summary rows, one per point.
    pub rows: Vec<Row>,
    /// The answer in viewers' units: concurrent viewers and delivered
    /// Gbit/s at the highest failure-free point (absent when no point
    /// passed, and in files written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_capacity: Option<Viewers>,
    /// The workload's bit-rate mix (absent in files written before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bitrate_mix: Vec<RepShare>,
    /// Wall-clock start, Unix seconds.
    pub started_at_unix_s: f64,
    /// Length of the whole search, s.
    pub duration_s: f64,
}

/// What a failure-free point delivered, in viewers' units: how many viewers
/// watched at once and how many bits reached them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Viewers {
    /// New sessions/s of the point.
    pub rate: f64,
    /// Runs the figures are over.
    pub runs: usize,
    /// Concurrent viewers: the time average of active sessions over each
    /// run's measured window, mean over the runs (`None`: runs written
    /// before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_active_sessions: Option<f64>,
    /// Most sessions active at once in any run's measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_active_sessions: Option<u64>,
    /// Delivered Gbit/s (10^9 bit/s): the throughput over the measured
    /// window, mean over the runs.
    pub delivered_gbit_s: f64,
}

impl Viewers {
    /// The figures of a point's runs (`None` for a point without runs).
    pub fn of(p: &Point) -> Option<Self> {
        let tput = p.throughput()?;
        Some(Self {
            rate: p.rate,
            runs: p.runs.len(),
            mean_active_sessions: p.mean_of(|o| o.extra.mean_active_sessions).map(|c| c.mean),
            peak_active_sessions: p
                .runs
                .iter()
                .filter_map(|o| o.extra.peak_active_sessions)
                .max(),
            delivered_gbit_s: tput.mean * 8.0 / 1e9,
        })
    }

    /// `12.0 new sessions/s without a failed session: 96 concurrent viewers
    /// on average (peak 110), 0.41 Gbit/s delivered` (the part after the
    /// server's name).
    pub fn sentence(&self) -> String {
        let viewers = match (self.mean_active_sessions, self.peak_active_sessions) {
            (Some(m), Some(p)) => format!("{m:.0} concurrent viewers on average (peak {p})"),
            (Some(m), None) => format!("{m:.0} concurrent viewers on average"),
            _ => "concurrent viewers not recorded".to_string(),
        };
        format!(
            "{:.1} new sessions/s without a failed session: {viewers}, {:.2} Gbit/s delivered",
            self.rate, self.delivered_gbit_s
        )
    }
}

/// One representation's share of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepShare {
    /// Representation name.
    pub name: String,
    /// Its bit rate, kbit/s.
    pub bitrate_kbps: f64,
    /// Percent of the workload's sessions.
    pub sessions_pct: f64,
    /// Percent of its requests (`None`: the workload's stats.json does not
    /// say, as for the netflix session model, whose sessions switch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_pct: Option<f64>,
    /// Percent of its requested bytes (`None` likewise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_pct: Option<f64>,
}

/// The bit-rate mix of the `vodlab gen` workload in `dir`, from its
/// catalog.json (names and bit rates) and stats.json (counts); the
/// representations no session requests are left out.
pub fn bitrate_mix(dir: &Path) -> Result<Vec<RepShare>, FileError> {
    #[derive(Deserialize)]
    struct Rep {
        name: String,
        bitrate_kbps: f64,
    }
    #[derive(Deserialize)]
    struct Catalog {
        representations: Vec<Rep>,
    }
    #[derive(Deserialize)]
    struct Stats {
        sessions_per_representation: Vec<(String, u64)>,
        #[serde(default)]
        requests_per_representation: Vec<(String, u64)>,
        #[serde(default)]
        bytes_per_representation: Vec<(String, u64)>,
    }
    fn json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, FileError> {
        let text = std::fs::read(path).map_err(|source| FileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_slice(&text).map_err(|e| FileError::In {
            path: path.to_path_buf(),
            source: Box::new(FileError::Json(e)),
        })
    }
    let cat: Catalog = json(&dir.join("catalog.json"))?;
    let st: Stats = json(&dir.join("stats.json"))?;
    let pct = |v: &[(String, u64)], name: &str| -> Option<f64> {
        let total: u64 = v.iter().map(|x| x.1).sum();
        let n = v.iter().find(|x| x.0 == name)?.1;
        (total > 0).then(|| 100.0 * n as f64 / total as f64)
    };
    Ok(cat
        .representations
        .iter()
        .filter_map(|r| {
            let sessions_pct = pct(&st.sessions_per_representation, &r.name)?;
            (sessions_pct > 0.0).then(|| RepShare {
                name: r.name.clone(),
                bitrate_kbps: r.bitrate_kbps,
                sessions_pct,
                requests_pct: pct(&st.requests_per_representation, &r.name),
                bytes_pct: pct(&st.bytes_per_representation, &r.name),
            })
        })
        .collect())
}

/// `bit rates by share of bytes: 419 kbit/s 60 %, 2097 kbit/s 40 %` (of
/// sessions where the workload does not give bytes).
pub fn mix_words(mix: &[RepShare]) -> String {
    let by_bytes = mix.iter().all(|r| r.bytes_pct.is_some());
    let parts: Vec<String> = mix
        .iter()
        .map(|r| {
            let share = if by_bytes {
                r.bytes_pct.unwrap_or(0.0)
            } else {
                r.sessions_pct
            };
            format!("{:.0} kbit/s {share:.0} %", r.bitrate_kbps)
        })
        .collect();
    format!(
        "bit rates by share of {}: {}",
        if by_bytes { "bytes" } else { "sessions" },
        parts.join(", ")
    )
}

/// Concurrency of a run over its measured window: (time average of active
/// sessions, most at once).
///
/// The average is exact at the interval boundaries and sampled between
/// them: sessions started minus sessions ended before each boundary in the
/// window, times the interval width, over the window's length. Every
/// session's start and end fall in the interval that holds them, so each
/// session counts at the boundaries it spans: in expectation (arrival times
/// at random phases to the boundaries) its duration over the width, and the
/// sum is the integral of active sessions. The peak is the most of those
/// counts and of the monitor's per-interval peaks (samples at most 1 s
/// apart), so a peak shorter than the sampling can be missed.
pub fn concurrency(r: &Results) -> Option<(f64, u64)> {
    let [from, to] = r.measured_window_s;
    let w = r.interval_s;
    if !(to > from && w > 0.0) || r.intervals.is_empty() {
        return None;
    }
    let mut active: i64 = 0;
    let mut area = 0.0;
    let mut peak = 0u64;
    for iv in &r.intervals {
        let (lo, hi) = (iv.t_s, iv.t_s + w);
        if (from..=to).contains(&lo) {
            area += active.max(0) as f64 * w;
            peak = peak.max(active.max(0) as u64);
        }
        if hi > from && lo <= to {
            peak = peak.max(iv.active_sessions);
        }
        active += iv.started as i64 - (iv.completed + iv.failed) as i64;
    }
    Some((area / (to - from), peak))
}

/// Adds a run's concurrency ([`concurrency`]) to its figures.
pub fn add_viewer_figures(e: &mut RunExtra, r: &Results) {
    if let Some((mean, peak)) = concurrency(r) {
        e.mean_active_sessions = Some(mean);
        e.peak_active_sessions = Some(peak);
    }
}

/// What a capacity.json says besides the search itself.
#[derive(Debug, Clone, Default)]
pub struct CapacityMeta {
    /// Workload name.
    pub workload: String,
    /// Target URL.
    pub target: String,
    /// Server label.
    pub server: Option<String>,
    /// Seconds of arrivals per point.
    pub window_s: f64,
    /// Drain limit per point, s.
    pub drain_s: f64,
    /// Pacing was on.
    pub pacing: bool,
    /// Link emulation was on.
    pub shaping: bool,
    /// The client's lateness threshold, ms.
    pub late_threshold_ms: Option<f64>,
    /// Client processes per point (`--client-processes`).
    pub client_processes: Option<u32>,
    /// Time compression k (`None` for 1).
    pub time_compression: Option<f64>,
    /// Wall-clock start, Unix seconds.
    pub started_at_unix_s: f64,
}

impl CapacityFile {
    /// The file of `search` (stopped early by `stop`, if given), `now` being
    /// the Unix time it is written.
    pub fn new(search: &Search, stop: Option<&Stop>, meta: CapacityMeta, now: f64) -> Self {
        let outcome = SearchOutcome::of(search, stop);
        let error = match (&outcome, stop) {
            (SearchOutcome::Interrupted { message } | SearchOutcome::Error { message }, _) => {
                Some(message.clone())
            }
            // a search that ended by itself after an error cannot happen (the
            // error ends it), but keep any message given
            (_, Some(Stop::Error(m) | Stop::Interrupted(m))) => Some(m.clone()),
            _ => None,
        };
        Self {
            format: CAPACITY_FORMAT.into(),
            version: CAPACITY_VERSION,
            complete: outcome.is_complete(),
            error,
            outcome,
            workload: meta.workload,
            target: meta.target,
            server: meta.server,
            criterion: search.config.criterion.to_string(),
            window_s: meta.window_s,
            drain_s: meta.drain_s,
            pacing: meta.pacing,
            shaping: meta.shaping,
            late_threshold_ms: meta.late_threshold_ms,
            client_processes: meta.client_processes,
            time_compression: meta.time_compression,
            search: search.clone(),
            answer: search.answer(),
            rows: rows(search),
            at_capacity: search.best_point().and_then(Viewers::of),
            bitrate_mix: Vec::new(),
            started_at_unix_s: meta.started_at_unix_s,
            duration_s: now - meta.started_at_unix_s,
        }
    }

    /// Parses a capacity.json of version 1 or 2.
    pub fn from_json(text: &str) -> Result<Self, FileError> {
        parse_versioned(text, CAPACITY_FORMAT, CAPACITY_VERSION, |v, version| {
            if version == 1 {
                upgrade_v1(v);
            }
        })
    }

    /// Reads a capacity.json.
    pub fn read(path: &Path) -> Result<Self, FileError> {
        read_with(path, Self::from_json)
    }

    /// Writes it (pretty JSON and a newline).
    pub fn write(&self, path: &Path) -> Result<(), FileError> {
        write_pretty(path, self)
    }

    /// The answer in one sentence.
    pub fn answer_line(&self) -> String {
        answer_line(
            &self.criterion,
            &self.answer,
            &self.outcome,
            self.search.config.mode,
        )
    }
}

/// Fills in what version 2 added, from what version 1 has.
fn upgrade_v1(v: &mut Value) {
    let verdict = |x: &mut Value| {
        let passed = x.get("passed").and_then(Value::as_bool).unwrap_or(false);
        if let Some(o) = x.as_object_mut() {
            o.entry("verdict")
                .or_insert_with(|| if passed { "pass" } else { "fail" }.into());
        }
    };
    if let Some(points) = v
        .pointer_mut("/search/points")
        .and_then(Value::as_array_mut)
    {
        points.iter_mut().for_each(verdict);
    }
    if let Some(rows) = v.get_mut("rows").and_then(Value::as_array_mut) {
        rows.iter_mut().for_each(verdict);
    }
    if v.get("outcome").is_none() {
        let outcome = SearchOutcome::from_v1(v);
        if let (Some(o), Ok(x)) = (v.as_object_mut(), serde_json::to_value(outcome)) {
            o.insert("outcome".into(), x);
        }
    }
}

/// The advice when the load generator limited a search.
pub const CLIENT_LIMITED_ADVICE: &str = "to measure higher, give the load generator more room: fewer sessions per client process and more client hosts (or the server on another machine than the client)";

/// The answer in one sentence (with a newline), from the criterion in words,
/// the answer, the outcome and the search's mode.
pub fn answer_line(
    criterion: &str,
    a: &Answer,
    outcome: &SearchOutcome,
    mode: SearchMode,
) -> String {
    let ending = match outcome {
        // an additive search does not bisect: its bracket is one step
        SearchOutcome::Found if mode == SearchMode::Additive => {
            "additive search: the next step failed".to_string()
        }
        SearchOutcome::Found => "converged".to_string(),
        SearchOutcome::AboveMaxRate => {
            "capacity is at least the maximum rate tried (raise --max-rate)".into()
        }
        SearchOutcome::BelowMinRate => "even the lowest rate failed (lower --min-rate)".into(),
        SearchOutcome::OutOfPoints => {
            "out of points before converging (raise --max-points)".into()
        }
        SearchOutcome::ClientLimited { rate, reasons } => format!(
            "LIMITED BY THE LOAD GENERATOR at {rate:.3} sessions/s: the client was INVALID there ({}), so that point neither passed nor failed and the search stopped; {CLIENT_LIMITED_ADVICE}",
            if reasons.is_empty() { "no reason given".to_string() } else { reasons.join("; ") }
        ),
        SearchOutcome::Interrupted { .. } => "interrupted".into(),
        SearchOutcome::Error { message } => format!("search stopped early: {message}"),
        SearchOutcome::Skipped { reason } => format!("not run: {reason}"),
    };
    let mono = if a.non_monotone {
        "; WARNING: a rate passed above one that failed (noisy; try --repeats)"
    } else {
        ""
    };
    match (a.capacity, a.lowest_failed, outcome) {
        (None, None, SearchOutcome::ClientLimited { .. }) => {
            format!("capacity ({criterion}): no answer; {ending}\n")
        }
        (Some(c), Some(f), _) => format!(
            "capacity ({criterion}): {c:.3} sessions/s (failed at {f:.3}); {ending}{mono}\n"
        ),
        (Some(c), None, _) => {
            format!("capacity ({criterion}): at least {c:.3} sessions/s; {ending}\n")
        }
        (None, Some(f), _) => {
            format!("capacity ({criterion}): below {f:.3} sessions/s; {ending}\n")
        }
        (None, None, _) => format!("capacity: no point measured; {ending}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_says_how_an_additive_search_ended() {
        let a = Answer {
            capacity: Some(30.0),
            lowest_failed: Some(40.0),
            ending: Some(Ending::Converged),
            non_monotone: false,
            client_limited_at: None,
        };
        let bisect = answer_line("c", &a, &SearchOutcome::Found, SearchMode::Bisect);
        assert!(
            bisect.contains("30.000 sessions/s (failed at 40.000); converged"),
            "{bisect}"
        );
        let add = answer_line("c", &a, &SearchOutcome::Found, SearchMode::Additive);
        assert!(
            add.contains("(failed at 40.000); additive search: the next step failed"),
            "{add}"
        );
        let skipped = SearchOutcome::Skipped {
            reason: "no TLS".into(),
        };
        let none = Answer {
            capacity: None,
            lowest_failed: None,
            ending: None,
            ..a
        };
        let s = answer_line("c", &none, &skipped, SearchMode::Bisect);
        assert!(s.contains("not run: no TLS"), "{s}");
        assert_eq!(skipped.kind(), "skipped");
    }
}
