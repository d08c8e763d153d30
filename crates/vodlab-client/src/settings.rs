//! The settings of `vodlab run` (its flags: [`RunSettings`], with the
//! players' [`PlayerSettings`] and the transport's [`TransportSettings`]),
//! their bounds, and their checked conversion into a [`crate::RunConfig`]'s
//! parts. With the `cli` feature they derive clap's `Args`: the doc
//! comments of the fields are `vodlab run --help`.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

mod arrivals;
mod player;
mod transport;

pub use arrivals::{
    compress_arrivals, INTERVAL_BOUNDS, MAX_LATE_THRESHOLD_MS, MAX_RAMP, MAX_RUN_S, RATE_BOUNDS,
};
pub use player::PlayerSettings;
pub use transport::TransportSettings;

/// Why a flag of `run` (or of a command sharing its settings) is unusable.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A value out of its bounds, or flags that do not go together.
    #[error("{0}")]
    Flag(String),
    /// A number flag's part is not a number.
    #[error("{what}: `{value}` is not a number")]
    NotANumber {
        /// The flag (and part).
        what: String,
        /// The text given.
        value: String,
        /// Why.
        #[source]
        source: std::num::ParseFloatError,
    },
    /// `--time-compression` out of its bounds.
    #[error(transparent)]
    TimeCompression(#[from] vodlab_workload::TimeCompressionSettingError),
    /// `--start-at` is neither RFC 3339 nor Unix seconds.
    #[error(
        "--start-at `{value}`: expected RFC 3339 in UTC (2025-01-31T12:00:00Z) or Unix seconds"
    )]
    StartAt {
        /// The text given.
        value: String,
        /// Why.
        #[source]
        source: humantime::TimestampError,
    },
    /// The transport settings are inconsistent.
    #[error(transparent)]
    Transport(#[from] crate::io::transport::TransportError),
    /// `--shard` is not `I/N`.
    #[error(transparent)]
    Shard(#[from] crate::out::shard::ShardError),
    /// A directory the settings need could not be made.
    #[error("creating {}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A [`SettingsError::Flag`] from a message.
pub(crate) fn flag(msg: impl Into<String>) -> SettingsError {
    SettingsError::Flag(msg.into())
}

/// `v` when it is a number in `lo..=hi`, else an error naming `what`.
pub fn within(what: &str, v: f64, lo: f64, hi: f64) -> Result<f64, SettingsError> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(flag(format!(
            "{what} must be a number from {lo} to {hi}, got {v}"
        )))
    }
}

/// Arguments of `vodlab run`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RunSettings {
    /// A `vodlab gen` directory (all shards, client classes, ramps) or one
    /// session script (vodlab, httperf wsesslog or CloudSuite videosesslog).
    #[cfg_attr(feature = "cli", arg(required_unless_present = "timing_script"))]
    pub workload: Option<PathBuf>,
    /// Server to load, `http://HOST:PORT`. Only loopback addresses unless
    /// --allow-remote.
    #[cfg_attr(feature = "cli", arg(long, value_name = "URL"))]
    pub target: String,
    /// Aggregate session arrival rate, sessions per second (split evenly over
    /// the workload's shards, each with its own seeded schedule).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SESSIONS_PER_S", required_unless_present_any = ["steps", "ramp_rate", "timing_script"]))]
    pub rate: Option<f64>,
    /// Arrival process for --rate.
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = ArrivalKind::Poisson))]
    pub arrivals: ArrivalKind,
    /// Poisson arrivals at stepped rates: `SECONDS:RATE,SECONDS:RATE,...`
    /// (the last step lasts until the sessions run out).
    #[cfg_attr(feature = "cli", arg(long, value_name = "STEPS", conflicts_with_all = ["rate", "ramp_rate"]))]
    pub steps: Option<String>,
    /// Poisson arrivals at a rate ramped linearly: `FROM:TO:SECONDS`.
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "ramp-rate",
            value_name = "FROM:TO:SECONDS",
            conflicts_with = "rate"
        )
    )]
    pub ramp_rate: Option<String>,
    /// Results directory (results.json, summary.txt, requests.csv).
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: Option<PathBuf>,
    /// Seed of the arrival schedules.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = crate::config::DEFAULT_SEED))]
    pub seed: u64,
    /// Width of the per-interval series in results.json, seconds.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = crate::config::DEFAULT_INTERVAL_S, value_name = "DURATION", value_parser = vodlab_units::seconds_arg))]
    pub interval: f64,
    /// Start at most this many sessions (spread over shards).
    #[cfg_attr(feature = "cli", arg(long))]
    pub sessions: Option<usize>,
    /// Stop after this long (seconds, or `10m`, `1h`; results marked
    /// incomplete).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::seconds_arg))]
    pub duration: Option<f64>,
    /// Override the workload's per-shard ramp-up (sessions not measured).
    #[cfg_attr(feature = "cli", arg(long))]
    pub ramp_up: Option<usize>,
    /// Override the workload's per-shard ramp-down.
    #[cfg_attr(feature = "cli", arg(long))]
    pub ramp_down: Option<usize>,
    /// Do not emulate the client classes' access links (rate and delay);
    /// --link-loss and --link-jitter (h3) still apply.
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_shaping: bool,
    /// Ignore pacing and think times: every request as soon as the previous completes.
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_pacing: bool,
    /// Send no CMCD. By default a request of a session that knows its bit
    /// rate carries CMCD headers (CTA-5004: `CMCD-Object: br,d,ot`,
    /// `CMCD-Request: bl` from the session's playout buffer, `CMCD-Session:
    /// sid`), as dash.js and hls.js can send it, and a closed-loop player's
    /// requests carry its own state (`--cmcd` says how and lists the keys);
    /// `vodlab serve` paces and sizes prefetches by it.
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_cmcd: bool,
    /// What a paced request does when its slot has passed because the
    /// previous response was slow: `delay` (count the interval from the late
    /// send, httperf's and the thesis's rule), `burst` (catch up with the
    /// original schedule) or `skip` (wait for the next slot of the schedule).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "delay", value_name = "BEHAVIOUR")
    )]
    pub late_pacing: crate::LatePacing,
    /// Also write requests.csv, one row per request.
    #[cfg_attr(feature = "cli", arg(long))]
    pub requests_csv: bool,
    /// A session start or request send later than this (ms) counts as late;
    /// more than 1 % late makes the results invalid.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = crate::config::DEFAULT_LATE_THRESHOLD_MS as f64, value_name = "MS", value_parser = vodlab_units::millis_arg))]
    pub late_threshold_ms: f64,
    /// Fraction of requests whose bytes are checked against the content of a
    /// file set written by `vodlab fileset create` (a `vodlab gen` workload
    /// only); 0 turns the check off, e.g. for a server with other content.
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value_t = 0.01, value_name = "FRACTION")
    )]
    pub check_bytes: f64,
    /// Client buffer B of the playback latency: seconds of content (at the
    /// request's CMCD `br` or the session's `bitrate=`) that must arrive
    /// before playback could start (the pacing paper's 4 s).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = crate::core::delivery::DEFAULT_PLAYBACK_BUFFER.as_secs_f64(), value_name = "DURATION", value_parser = vodlab_units::seconds_arg))]
    pub playback_buffer: f64,
    /// Paced target as a multiple K of the content's bit rate: each 100 ms
    /// window after the first B seconds is judged against K × bit rate (set
    /// it to the server's `--pace`).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = crate::config::DEFAULT_PACE_TARGET, value_name = "K"))]
    pub pace_target: f64,
    /// Run only shard I of N (I from 0) of the workload's sessions, as one of
    /// N processes whose results `vodlab merge` combines exactly. Session i of
    /// script shard k (of S) is number i*S+k; this process runs the numbers
    /// equal to I mod N, each at the offset it has in the one-process
    /// schedule (docs/scale-out.md). Give every process the same --rate,
    /// --seed and workload.
    #[cfg_attr(feature = "cli", arg(long, value_name = "I/N"))]
    pub shard: Option<String>,
    /// Replay the workload's script shards as one script with one arrival
    /// process at --rate (their sessions in shard order), as a point of
    /// `vodlab capacity` does, instead of one schedule per script shard at
    /// rate / S. `capacity --client-processes N` gives it to its children.
    #[cfg_attr(feature = "cli", arg(long))]
    pub one_arrival_process: bool,
    /// Start at this wall-clock time (RFC 3339 in UTC, e.g.
    /// 2025-01-31T12:00:00Z, or Unix seconds): offset 0 of every schedule,
    /// shared by the processes of a split run. A time more than a second in
    /// the past is refused. Default: at once.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RFC3339|UNIX_SECONDS"))]
    pub start_at: Option<String>,
    /// Run only the sessions of this client class of the workload (e.g.
    /// 3.5mbit); the others keep their places in the schedule but are not
    /// started. For a lab host whose kernel shapes one class's link
    /// (`vodlab lab run --flow-down`, docs/lab.md); combines with --shard.
    #[cfg_attr(feature = "cli", arg(long, value_name = "CLASS"))]
    pub only_class: Option<String>,
    /// Write checkpoint.json (the results so far, exact for `vodlab merge`)
    /// every this many seconds, so a process killed mid-run (SIGKILL, the
    /// OOM killer, a lost pod) leaves what it measured; replaced atomically
    /// (a kill or a full disk leaves the last one whole); removed once the
    /// run has written its results. 0: never. Default: 10 with --shard,
    /// else 0.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::seconds_arg))]
    pub checkpoint: Option<f64>,
    /// Time compression k: replay the workload k times faster (pacing,
    /// think times, deadlines and link delays / k; session bit rates, CMCD
    /// `br`, `read_kbps` and link rates x k; --rate, --steps and
    /// --ramp-rate rates x k and their seconds / k; --duration and
    /// --playback-buffer / k). Bytes are unchanged; results.json is in
    /// wall-clock (compressed) time. Give the server and the emulated drive
    /// the same k. Default: $VODLAB_TIME_COMPRESSION (set by `vodlab box
    /// --time-compression`), else 1.
    #[cfg_attr(feature = "cli", arg(long, value_name = "K"))]
    pub time_compression: Option<f64>,
    /// Exit with status 1 when the results are invalid (the client could
    /// not keep its schedule) or incomplete, besides the checks that always
    /// apply (no session succeeded; `--fail-on`).
    #[cfg_attr(feature = "cli", arg(long))]
    pub strict: bool,
    /// Skip the one connection `run` opens before its schedule to check
    /// that the server is there (a parent that checked already: capacity's
    /// client processes).
    #[cfg_attr(feature = "cli", arg(long, hide = true))]
    pub no_connect_check: bool,
    /// `--fail-on` rules checked against the results.
    #[cfg_attr(feature = "cli", arg(long = "fail-on", value_name = "EXPR", value_parser = crate::out::thresholds::parse_rule, help = crate::out::thresholds::FAIL_ON_HELP))]
    pub fail_on: Vec<crate::out::thresholds::Rule>,
    /// Allow a target that is not a loopback address.
    #[cfg_attr(feature = "cli", arg(long))]
    pub allow_remote: bool,
    /// No live progress.
    #[cfg_attr(feature = "cli", arg(short, long))]
    pub quiet: bool,
    /// Spread the run over N child processes of this binary, started
    /// together (`--shard I/N` with a shared `--start-at`), each under the
    /// open files limit, their results merged exactly into this run's
    /// results.json (as `vodlab merge` merges them; each child's own
    /// results stay in `shard-I/`). A child that fails, hangs or writes no
    /// results makes the merged run INVALID, named. For more sessions at
    /// once than one process may hold descriptors for.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", conflicts_with = "shard"))]
    pub client_processes: Option<u32>,
    /// Worker threads of the client's runtime (default: one per CPU). Many
    /// slow sessions cost less on fewer threads: 10,000 paced, shaped
    /// sessions took 22 % less CPU on one thread than on two here, with
    /// half the context switches (docs/benchmarks.md); a fast unpaced run
    /// wants them all. With --client-processes, per process.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024)))]
    pub threads: Option<u16>,
    /// Protocol, TLS and HTTP/2 options.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub transport: TransportSettings,
    /// Replay an h2load timing script instead of a workload: one request a
    /// line, `offset_ms<TAB>URI`; every client runs it (see --clients,
    /// --stagger).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE", conflicts_with_all = ["workload", "rate", "steps", "ramp_rate"]))]
    pub timing_script: Option<PathBuf>,
    /// Clients replaying the timing script.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = 1,
            requires = "timing_script",
            value_name = "N"
        )
    )]
    pub clients: usize,
    /// Milliseconds between the starts of consecutive timing-script clients.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            default_value_t = 0.0,
            requires = "timing_script",
            value_name = "MS"
        )
    )]
    pub stagger: f64,
    /// Closed-loop players.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub player: PlayerSettings,
}

/// Arrival processes for a fixed rate.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ArrivalKind {
    /// Exponential gaps (the papers' choice).
    Poisson,
    /// Evenly spaced.
    Constant,
}

impl RunSettings {
    /// The arrival process of `--rate`/`--arrivals`, `--steps` or
    /// `--ramp-rate`, checked against the bounds (not yet compressed).
    pub fn arrivals(&self) -> Result<crate::Arrivals, SettingsError> {
        arrivals::arrivals(self)
    }
}

/// Parses `--start-at`: RFC 3339 (UTC) or Unix seconds; refuses a time more
/// than a second before `now`, or more than a week after it.
pub fn parse_start_at(s: &str, now: SystemTime) -> Result<SystemTime, SettingsError> {
    let t = if let Ok(secs) = s.trim().parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(flag(format!(
                "--start-at `{s}`: Unix seconds must be a number >= 0"
            )));
        }
        std::time::UNIX_EPOCH + Duration::from_secs_f64(secs)
    } else {
        humantime::parse_rfc3339_weak(s.trim()).map_err(|source| SettingsError::StartAt {
            value: s.into(),
            source,
        })?
    };
    if let Err(e) = t.duration_since(now) {
        let past = e.duration().as_secs_f64();
        if past > 1.0 {
            return Err(flag(format!(
                "--start-at `{s}` is {past:.1} s in the past (at most 1 s is accepted; pick a time far enough ahead for every process to be ready)"
            )));
        }
    } else if let Ok(ahead) = t.duration_since(now) {
        if ahead.as_secs_f64() > MAX_RUN_S {
            return Err(flag(format!("--start-at `{s}` is more than a week ahead")));
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests;
