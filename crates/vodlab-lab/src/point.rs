//! How every point is run: its settings ([`PointSettings`]), the
//! [`Interrupter`] that stops runs, and why a point could not be measured
//! ([`RunnerError`]). Shared by the runner ([`crate::runner`]) and the client
//! processes of a spread point ([`crate::procs`]), which both use them.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use thiserror::Error;
use tokio::sync::watch;
use vodlab_client::load::LoadError;
use vodlab_workload::TimeCompression;

use crate::files::FileError;

/// Most client processes a point can be spread over.
pub const MAX_CLIENT_PROCESSES: u32 = 1024;

/// Why a point could not be measured.
#[derive(Debug, Error)]
pub enum RunnerError {
    /// The workload could not be loaded.
    #[error("loading the workload {}: {source}", path.display())]
    Workload {
        /// Its path.
        path: PathBuf,
        /// Why.
        source: LoadError,
    },
    /// The workload has no session.
    #[error("{}: no sessions", .0.display())]
    NoSessions(PathBuf),
    /// The runtime could not be built.
    #[error("starting the load runtime: {0}")]
    Runtime(std::io::Error),
    /// A point setting is out of its bounds (the error names the key).
    #[error("{0}")]
    Settings(String),
    /// A client process of a spread point could not be started, or none
    /// left results (`--client-processes`).
    #[error("client processes: {0}")]
    ClientProcess(String),
    /// A directory or file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The load client failed (not the server: its own I/O).
    #[error("the load client failed: {0}")]
    Client(std::io::Error),
    /// Ctrl-C before the run started.
    #[error("interrupted")]
    Interrupted,
    /// Ctrl-C during the run; its partial results were written.
    #[error("interrupted (this run's partial results are in {})", .0.display())]
    InterruptedRun(PathBuf),
    /// The server stopped answering during the run.
    #[error("the server stopped answering ({target}); results so far are in {}", dir.display())]
    ServerUnreachable {
        /// Target URL.
        target: String,
        /// The run's directory.
        dir: PathBuf,
    },
    /// A file of the search could not be written.
    #[error(transparent)]
    File(#[from] FileError),
}

/// How every point is run.
#[derive(Debug, Clone, PartialEq)]
pub struct PointSettings {
    /// Seconds of arrivals per point (a point starts rate x window sessions).
    pub window_s: f64,
    /// After the last arrival, wait at most this long for sessions to end.
    pub drain_s: f64,
    /// Pause between runs, s.
    pub pause_s: f64,
    /// Seed of the arrival schedule (repetition k uses seed + k).
    pub seed: u64,
    /// Keep the workload's ramp-up/ramp-down sessions out of the measurement.
    pub keep_ramps: bool,
    /// Pace requests as the scripts say.
    pub pacing: bool,
    /// Emulate client access links.
    pub shaping: bool,
    /// Fraction of responses whose bytes are checked.
    pub check_bytes: f64,
    /// A start or send later than this counts as late, ms (more than 1 %
    /// late makes a run INVALID).
    pub late_threshold_ms: f64,
    /// Write requests.csv for every run.
    pub requests_csv: bool,
    /// Protocol, TLS and HTTP/2 settings of every run.
    pub transport: vodlab_client::io::transport::TransportConfig,
    /// Client processes per point (`--client-processes`): 1 runs the load
    /// in this process; N > 1 runs N `vodlab run --shard I/N` children of
    /// [`Self::client_exe`] and merges their results (never more children
    /// than the point has sessions).
    pub client_processes: u32,
    /// The `vodlab` executable the children run (needed when
    /// `client_processes > 1`; the binary passes its own path).
    pub client_exe: Option<PathBuf>,
    /// Time compression k (`--time-compression`): the workload is replayed
    /// k times faster ([`compress_workload`](crate::runner::compress_workload)), a point at nominal rate R
    /// runs at R × k for window / k, drains for drain / k, and its outcome
    /// is converted back to nominal units (throughput / k, times × k), so
    /// the search and capacity.json stay nominal. The server and the drive
    /// must be given the same k.
    pub time_compression: TimeCompression,
}

impl PointSettings {
    /// Checks the settings this module adds to the search flags'
    /// (`client_processes`, `client_exe`).
    pub fn validate(&self) -> Result<(), RunnerError> {
        if !(1..=MAX_CLIENT_PROCESSES).contains(&self.client_processes) {
            return Err(RunnerError::Settings(format!(
                "client_processes (--client-processes) must be from 1 to {MAX_CLIENT_PROCESSES}, got {}",
                self.client_processes
            )));
        }
        if self.client_processes > 1 && !self.time_compression.is_none() {
            return Err(RunnerError::Settings(format!(
                "time_compression (--time-compression {}) with client_processes (--client-processes) > 1 is not supported: run the point in one process",
                self.time_compression.k()
            )));
        }
        if self.client_processes > 1 && self.client_exe.is_none() {
            return Err(RunnerError::Settings(
                "client_processes > 1 needs client_exe, the vodlab executable the client processes run".into(),
            ));
        }
        Ok(())
    }
}

impl Default for PointSettings {
    fn default() -> Self {
        Self {
            window_s: 60.0,
            drain_s: 120.0,
            pause_s: 2.0,
            seed: 1,
            keep_ramps: false,
            pacing: true,
            shaping: true,
            check_bytes: 0.01,
            late_threshold_ms: 10.0,
            requests_csv: false,
            transport: Default::default(),
            client_processes: 1,
            client_exe: None,
            time_compression: TimeCompression::NONE,
        }
    }
}

/// Stops the current run and every later one (Ctrl-C). Clones share the flag.
#[derive(Debug, Clone)]
pub struct Interrupter {
    flag: Arc<AtomicBool>,
    tx: Arc<watch::Sender<bool>>,
}

impl Default for Interrupter {
    fn default() -> Self {
        Self::new()
    }
}

impl Interrupter {
    /// Not yet interrupted.
    pub fn new() -> Self {
        Self {
            flag: Arc::new(AtomicBool::new(false)),
            tx: Arc::new(watch::channel(false).0),
        }
    }
    /// Interrupts: the run in progress stops and writes its results; later
    /// runs are refused.
    pub fn interrupt(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.tx.send_replace(true);
    }
    /// Whether [`Self::interrupt`] was called.
    pub fn is_interrupted(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
    /// A receiver that sees the interruption (for a run in progress).
    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

/// `e` and its causes joined by ": " (as anyhow's `{:#}` shows an error):
/// the message a search that stopped early records and prints.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s += ": ";
        s += &c.to_string();
        cause = c.source();
    }
    s
}
