//! The settings of a capacity search as the commands take them (`capacity`,
//! `compare` and `bench`): how each point is run and how the search
//! proceeds ([`SearchArgs`]), the defaults of each command
//! ([`SearchDefaults`]), the bounds of every number ([`bounds`]) and the
//! client's transport ([`TransportArgs`]). With the `cli` feature they are
//! the vodlab binary's flags.

use thiserror::Error;
use vodlab_workload::{TimeCompression, TimeCompressionError};

use crate::point::PointSettings;
use crate::search::{Criterion, SearchConfig, SearchError, Step};

/// The client's transport flags, as `vodlab run` takes them.
pub use vodlab_client::settings::TransportSettings as TransportArgs;

/// Why search settings were refused.
#[derive(Debug, Error)]
pub enum SettingsError {
    /// A number is outside its bound (the message names the flag and the
    /// bound).
    #[error("{0}")]
    Bound(String),
    /// A flag's value is not the number it should hold.
    #[error("{flag}: `{text}` is not a number")]
    NotANumber {
        /// The flag and its value, as the message names them.
        flag: String,
        /// The text that is not a number.
        text: String,
        /// Why.
        source: std::num::ParseFloatError,
    },
    /// A flag's value has the wrong form (the message says which).
    #[error("{0}")]
    Form(String),
    /// The search settings are inconsistent.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// `--time-compression` is out of its bounds.
    #[error(transparent)]
    TimeCompression(#[from] TimeCompressionError),
    /// The transport settings are refused.
    #[error(transparent)]
    Transport(#[from] vodlab_client::io::transport::TransportError),
    /// A transport flag is refused.
    #[error(transparent)]
    TransportFlag(#[from] vodlab_client::settings::SettingsError),
}

/// The largest time compression k shown to give the same answer as real
/// time on the machine vodlab is developed on (2 cores), on one kind of
/// point: a paced, drive-bound point on the emulated ch3-sas-10k drive with
/// 30 s of arrivals, three runs per k, agreed with k = 1 within 10 % at
/// k = 4 and not at k = 8 (docs/experiments.md, "Time compression on a
/// paced, drive-bound point"; scripts/experiments/time-compression-disk.sh).
/// On a steady point (240 s of arrivals, longer than a session lasts) k = 4
/// failed sessions at rates where k = 1 failed none, for ASAP and nginx
/// alike (docs/experiments.md, "Chapter 3 by the thesis's method"), so no
/// k > 1 is shown to agree there.
pub const LARGEST_SHOWN_K: f64 = 4.0;

/// The warning a search at time compression `k` prints, if any: beyond
/// [`LARGEST_SHOWN_K`] a loud warning (the figures were not shown to match
/// real time, and on a machine like the one measured they did not); for
/// any other k > 1 a note that a steady point's answer may be low.
pub fn time_compression_warning(k: f64) -> Option<String> {
    if k > LARGEST_SHOWN_K {
        return Some(format!(
            "WARNING: time compression k = {k} is beyond the largest k shown to agree with \
             real time ({LARGEST_SHOWN_K}, on a 2-core machine): at k = 8 a drive-bound point \
             failed 52-170 sessions per run where k = 1 failed 0-1, and the drive's read-ahead \
             cache flattered prefetching servers (docs/experiments.md, \"Time compression on a \
             paced, drive-bound point\"); check k against k = 1 on this machine \
             (scripts/experiments/time-compression-disk.sh) before trusting these figures"
        ));
    }
    (k > 1.0).then(|| {
        format!(
            "note: time compression k = {k} agreed with real time on a point with 30 s of \
             arrivals, but on a steady drive-bound point (arrivals for longer than a session \
             lasts) k = 4 failed sessions at rates k = 1 served without failure, for every \
             server measured (docs/experiments.md, \"Chapter 3 by the thesis's method\"): \
             read a failure-free rate found at k > 1 as a lower bound, and confirm the first \
             failing rate at k = 1"
        )
    })
}

/// How each point is run and how the search proceeds (shared by
/// `capacity`, `compare` and `bench`).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct SearchArgs {
    /// When a point passes: `none` (no failed session, the thesis's rule),
    /// `failed:PCT` (at most PCT % failed), or
    /// `qoe:STALLED_PCT:P95_STARTUP_S` (at most STALLED_PCT % of sessions
    /// stall or fail and the p95 start-up delay is at most P95_STARTUP_S).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "none", value_name = "RULE")
    )]
    pub criterion: String,
    /// First rate tried, sessions/s.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = SearchDefaults::CAPACITY.start, value_name = "SESSIONS_PER_S"))]
    pub start: f64,
    /// How the rate rises until a point fails: `xF` multiplies by F, `+D`
    /// adds D sessions/s (the thesis adds a fixed step).
    #[cfg_attr(feature = "cli", arg(long, default_value = "x2", value_name = "xF|+D"))]
    pub step: String,
    /// What happens at the first failing rate: `bisect` (default: bisect
    /// between the last passing and the first failing rate down to
    /// --precision), or `additive[:START:STEP]` (the thesis's fixed
    /// increments: START, START+STEP, ... and stop at the first failing
    /// step, answering the last passing one; START and STEP replace --start
    /// and --step; plain `additive` takes --start and a `--step +D`).
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "search",
            default_value = "bisect",
            value_name = "bisect|additive[:START:STEP]"
        )
    )]
    pub search_mode: String,
    /// Bisect until the bracket is narrower than this fraction of the rate.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = SearchDefaults::CAPACITY.precision, value_name = "FRACTION"))]
    pub precision: f64,
    /// Highest rate to try, sessions/s.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1000.0))]
    pub max_rate: f64,
    /// Lowest rate to try, sessions/s.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.01))]
    pub min_rate: f64,
    /// Runs per rate (a rate passes only if all pass); with 2 or more the
    /// summary gives means with 95 % confidence intervals.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1))]
    pub repeats: u32,
    /// Stop after this many rates.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = SearchDefaults::CAPACITY.max_points))]
    pub max_points: usize,
    /// Seconds of arrivals per point: a point starts rate x window sessions
    /// (the first ones of the workload, the same for every point).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = SearchDefaults::CAPACITY.window, value_name = "DURATION", value_parser = vodlab_units::seconds_arg))]
    pub window: f64,
    /// After the last arrival, wait at most this long for sessions to end;
    /// sessions still running then count as failed.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = SearchDefaults::CAPACITY.drain, value_name = "DURATION", value_parser = vodlab_units::seconds_arg))]
    pub drain: f64,
    /// Pause between points, seconds (lets the server close connections).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 2.0, value_name = "DURATION", value_parser = vodlab_units::seconds_arg))]
    pub pause: f64,
    /// Keep the workload's ramp-up/ramp-down sessions out of the measurement
    /// (default: every session of a point is measured). A point replays the
    /// shards as one script with one arrival process, so the ramps apply
    /// once, at its start and end.
    #[cfg_attr(feature = "cli", arg(long))]
    pub keep_ramps: bool,
    /// Do not emulate client access links.
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_shaping: bool,
    /// Ignore pacing: every request as soon as the previous completes.
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_pacing: bool,
    /// Fraction of responses whose bytes are checked against the file set.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value_t = 0.01, value_name = "FRACTION")
    )]
    pub check_bytes: f64,
    /// Write requests.csv for every run (per-request figures in the report).
    #[cfg_attr(feature = "cli", arg(long))]
    pub requests_csv: bool,
    /// Seed of the arrival schedules (repetition k uses seed + k).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1))]
    pub seed: u64,
    /// Client lateness threshold, ms (see `vodlab run --help`): a run with
    /// more than 1 % of its session starts or request sends later than this
    /// is INVALID, and an INVALID point ends the search (docs/experiments.md).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = SearchDefaults::CAPACITY.late_threshold_ms, value_name = "MS", value_parser = vodlab_units::millis_arg))]
    pub late_threshold_ms: f64,
    /// Spread each point over N local client processes, so the client is
    /// not the bottleneck on a machine with more cores: each point runs as
    /// N `vodlab run --shard I/N --start-at T` processes (the same sessions
    /// at the same offsets as one process) writing points/NN-.../shard-I,
    /// merged exactly into the point's results.json. A point never gets
    /// more processes than sessions. 1: the load runs in this process.
    /// E.g. `--client-processes 4` on an 8-core client (docs/scale-out.md,
    /// "Spreading a point over processes").
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1, value_name = "N"))]
    pub client_processes: u32,
    /// Time compression k: every point runs k times faster (the workload's
    /// pacing, think times, deadlines and link delays / k, bit rates and
    /// link rates x k, the arrival rate x k for window / k, the drain / k),
    /// and its figures are converted back to nominal units (rates are
    /// sessions/s of nominal time, throughput / k, times x k). Give the
    /// server the same k (`vodlab serve --time-compression K`; compare and
    /// bench do, and mount their emulated drive with it). 1: nominal time.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1.0, value_name = "K"))]
    pub time_compression: f64,
    /// No live progress of each run.
    #[cfg_attr(feature = "cli", arg(short, long))]
    pub quiet: bool,
    /// Print the search settings this command would run with (JSON) and
    /// exit (for tests: `--help`'s defaults against what runs).
    #[cfg_attr(feature = "cli", arg(long, hide = true))]
    pub print_settings: bool,
    /// Fail (exit 1) when the result's figure compares so: PATH OP VALUE
    /// over capacity.json (`compare`: over each server's row of
    /// compare.json), e.g. `answer.capacity<10`,
    /// `at_capacity.mean_viewers<100`; OP is > >= < <= == !=; repeatable;
    /// checked before the search (a typo is a usage error), named on stderr
    /// when breached.
    #[cfg_attr(feature = "cli", arg(long = "fail-on", value_name = "EXPR", value_parser = vodlab_client::out::thresholds::parse_rule))]
    pub fail_on: Vec<vodlab_client::out::thresholds::Rule>,
    /// The client's protocol, TLS and HTTP/2 settings.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub transport: TransportArgs,
}

/// The search settings a command runs with where its flag is not given:
/// the one source of `--help`'s defaults and of what runs (`capacity` and
/// `compare` take [`SearchDefaults::CAPACITY`]; `bench` its own).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SearchDefaults {
    /// `--window`, s.
    pub window: f64,
    /// `--drain`, s.
    pub drain: f64,
    /// `--start`, sessions/s.
    pub start: f64,
    /// `--precision`.
    pub precision: f64,
    /// `--max-points`.
    pub max_points: usize,
    /// `--late-threshold-ms`.
    pub late_threshold_ms: f64,
}

impl SearchDefaults {
    /// `vodlab capacity` and `vodlab compare`.
    pub const CAPACITY: Self = Self {
        window: 60.0,
        drain: 120.0,
        start: 1.0,
        precision: 0.1,
        max_points: 12,
        late_threshold_ms: 10.0,
    };

    /// Sets each setting of `a` whose flag `given` says was not given.
    pub fn apply(&self, a: &mut SearchArgs, given: &dyn Fn(&str) -> bool) {
        if !given("--window") {
            a.window = self.window;
        }
        if !given("--drain") {
            a.drain = self.drain;
        }
        if !given("--start") {
            a.start = self.start;
        }
        if !given("--precision") {
            a.precision = self.precision;
        }
        if !given("--max-points") {
            a.max_points = self.max_points;
        }
        if !given("--late-threshold-ms") {
            a.late_threshold_ms = self.late_threshold_ms;
        }
    }

    /// The settings `a` runs with.
    pub fn of(a: &SearchArgs) -> Self {
        Self {
            window: a.window,
            drain: a.drain,
            start: a.start,
            precision: a.precision,
            max_points: a.max_points,
            late_threshold_ms: a.late_threshold_ms,
        }
    }
}

/// Bounds of the search flags, checked at parse time (docs/experiments.md).
pub mod bounds {
    /// Lowest and highest arrival rate, and highest `--late-threshold-ms`:
    /// `vodlab run`'s own.
    pub use vodlab_client::settings::{MAX_LATE_THRESHOLD_MS, RATE_BOUNDS};
    /// Highest `--step xF` factor.
    pub const MAX_STEP_FACTOR: f64 = 1_000.0;
    /// Bounds of `--precision`.
    pub const PRECISION: (f64, f64) = (0.001, 0.9);
    /// Most `--repeats`.
    pub const MAX_REPEATS: u64 = 100;
    /// Most `--client-processes`.
    pub use crate::point::MAX_CLIENT_PROCESSES;
    /// Most `--max-points`.
    pub const MAX_POINTS: u64 = 1_000;
    /// Bounds of `--window`, seconds (a day at most).
    pub const WINDOW_S: (f64, f64) = (0.1, 86_400.0);
    /// Longest `--drain`, seconds.
    pub const MAX_DRAIN_S: f64 = 86_400.0;
    /// Longest `--pause`, seconds.
    pub const MAX_PAUSE_S: f64 = 3_600.0;
}

/// `v` when it is a number in `lo..=hi`, else an error naming the flag and
/// the bound (NaN and infinities are outside every bound).
pub fn within(flag: &str, v: f64, lo: f64, hi: f64) -> Result<f64, SettingsError> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(SettingsError::Bound(format!(
            "{flag} must be a number from {lo} to {hi}, got {v}"
        )))
    }
}

/// `v` when it is in `lo..=hi`, else an error naming the flag and the bound.
pub fn within_int(flag: &str, v: u64, lo: u64, hi: u64) -> Result<u64, SettingsError> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(SettingsError::Bound(format!(
            "{flag} must be from {lo} to {hi}, got {v}"
        )))
    }
}

impl SearchArgs {
    /// The search settings these arguments describe; every number is
    /// checked against its bound ([`bounds`]) first.
    pub fn config(&self) -> Result<SearchConfig, SettingsError> {
        use bounds::*;
        let (lo, hi) = RATE_BOUNDS;
        for (flag, v) in [
            ("--start", self.start),
            ("--min-rate", self.min_rate),
            ("--max-rate", self.max_rate),
        ] {
            within(flag, v, lo, hi).map_err(|e| {
                SettingsError::Bound(format!(
                    "{e} (and the rates need 0 < min rate <= start <= max rate)"
                ))
            })?;
        }
        within("--precision", self.precision, PRECISION.0, PRECISION.1)?;
        within_int("--repeats", self.repeats.into(), 1, MAX_REPEATS)?;
        within_int("--max-points", self.max_points as u64, 1, MAX_POINTS)?;
        within("--window", self.window, WINDOW_S.0, WINDOW_S.1)?;
        within("--drain", self.drain, 0.0, MAX_DRAIN_S)?;
        within("--pause", self.pause, 0.0, MAX_PAUSE_S)?;
        within("--check-bytes", self.check_bytes, 0.0, 1.0)?;
        within_int(
            "--client-processes",
            self.client_processes.into(),
            1,
            MAX_CLIENT_PROCESSES.into(),
        )?;
        within(
            "--late-threshold-ms",
            self.late_threshold_ms,
            0.0,
            MAX_LATE_THRESHOLD_MS,
        )?;
        TimeCompression::new(self.time_compression)?;
        let number = |text: &str| {
            text.parse::<f64>()
                .map_err(|source| SettingsError::NotANumber {
                    flag: format!("--step `{}`", self.step),
                    text: text.to_string(),
                    source,
                })
        };
        let step = if let Some(f) = self.step.strip_prefix(['x', '*']) {
            let f = number(f)?;
            if !(f > 1.0 && f <= MAX_STEP_FACTOR) {
                return Err(SettingsError::Form(format!(
                    "--step `{}`: step x{f} must be > 1 and at most {MAX_STEP_FACTOR}",
                    self.step
                )));
            }
            Step::Mul(f)
        } else if let Some(d) = self.step.strip_prefix('+') {
            let d = number(d)?;
            within(&format!("--step `{}`: the increment", self.step), d, lo, hi)?;
            Step::Add(d)
        } else {
            return Err(SettingsError::Form(format!(
                "--step `{}`: use xF (multiply, e.g. x2) or +D (add, e.g. +0.5)",
                self.step
            )));
        };
        let (mode, start, step) = crate::search::parse_mode(&self.search_mode, self.start, step)?;
        if let (Some((_, args)), Step::Add(d)) = (self.search_mode.split_once(':'), step) {
            let flag = format!("--search `{}`", self.search_mode);
            within(&format!("{flag}: START ({args})"), start, lo, hi)?;
            within(&format!("{flag}: STEP ({args})"), d, lo, hi)?;
        }
        let cfg = SearchConfig {
            mode,
            start,
            step,
            precision: self.precision,
            max_rate: self.max_rate,
            min_rate: self.min_rate,
            repeats: self.repeats,
            max_points: self.max_points,
            criterion: Criterion::parse(&self.criterion)?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// How every point is run.
    pub fn settings(&self) -> PointSettings {
        PointSettings {
            window_s: self.window,
            drain_s: self.drain,
            pause_s: self.pause,
            seed: self.seed,
            keep_ramps: self.keep_ramps,
            pacing: !self.no_pacing,
            shaping: !self.no_shaping,
            check_bytes: self.check_bytes,
            late_threshold_ms: self.late_threshold_ms,
            requests_csv: self.requests_csv,
            transport: Default::default(),
            client_processes: self.client_processes,
            client_exe: None,
            // checked by `config`
            time_compression: TimeCompression::new(self.time_compression).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod time_compression_tests {
    use super::*;

    #[test]
    fn a_k_beyond_the_largest_shown_is_warned_about_and_any_k_above_1_noted() {
        assert_eq!(time_compression_warning(1.0), None);
        assert_eq!(time_compression_warning(0.5), None);
        let n = time_compression_warning(LARGEST_SHOWN_K).expect("k = 4");
        assert!(
            n.starts_with("note") && n.contains("k = 4") && n.contains("lower bound"),
            "{n}"
        );
        let w = time_compression_warning(8.0).expect("k = 8");
        assert!(w.starts_with("WARNING") && w.contains("k = 8"), "{w}");
    }
}
