//! The settings of `vodlab analyze` (its flags) and the bit rates a
//! workload's catalog gives.

use std::collections::HashMap;
use std::path::PathBuf;

use vodlab_workload::construct::Catalog;

use crate::{key, Settings};

/// Log formats on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum FormatArg {
    /// Tell from the first line of each file.
    Auto,
    /// `vodlab serve --access-log`.
    Vodlab,
    /// nginx with `log_format vodlab_analyze` (see --print-nginx-format).
    Nginx,
    /// CSV with a header line.
    Csv,
}

/// Arguments of `vodlab analyze`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct AnalyzeArgs {
    /// Access logs, in time order when several (`-` reads standard input).
    #[cfg_attr(
        feature = "cli",
        arg(value_name = "LOG", required_unless_present = "print_nginx_format")
    )]
    pub logs: Vec<PathBuf>,
    /// Log format.
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value = "auto"))]
    pub format: FormatArg,
    /// A `vodlab gen` workload directory whose catalog gives each file's bit
    /// rate (for the nominal title time of chains).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR"))]
    pub workload: Option<PathBuf>,
    /// Write analysis.json and summary.txt here (`--output` is an older
    /// name).
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: Option<PathBuf>,
    /// Adjacent requests join a chain when they arrive within this long of
    /// each other (thesis: 40 s). Durations here: 500ms, 40s, 5m; a bare
    /// number is seconds.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub chain_window: Option<f64>,
    /// How far out of arrival order the log may be.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub reorder: Option<f64>,
    /// A chain lasting longer than this is a stable phase (thesis: 40).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub long_chain: Option<f64>,
    /// Short chains closer than this form one transient phase (thesis: 10).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub cluster_gap: Option<f64>,
    /// No request for this long is an inactive phase (thesis: 40).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub inactive: Option<f64>,
    /// A session with no request for this long is over (default 300 s; at
    /// least --chain-window).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub session_idle: Option<f64>,
    /// Breakpoints of the survival fit, sizes comma-separated (thesis:
    /// 1e6,2e8 = 1MB,200MB).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE,SIZE,...", value_delimiter = ',', value_parser = size_f64))]
    pub fit_breaks: Option<Vec<f64>>,
    /// Survival probability P of the growth factor d/x (thesis: 0.45).
    #[cfg_attr(feature = "cli", arg(long, value_name = "P"))]
    pub survival_p: Option<f64>,
    /// Stop at the first line that cannot be read (default: report up to 10,
    /// count the rest, and go on).
    #[cfg_attr(feature = "cli", arg(long))]
    pub strict: bool,
    /// Also write a workload spec fitted from the log to this TOML file
    /// (Zipf exponent, duration, viewing-fraction and start CDFs, request
    /// size, pacing, bit rates; docs/analyze.md). `vodlab gen --spec` reads it.
    #[cfg_attr(feature = "cli", arg(long, value_name = "OUT.toml"))]
    pub fit_spec: Option<PathBuf>,
    /// Print the nginx `log_format` line this command reads, and exit.
    #[cfg_attr(feature = "cli", arg(long))]
    pub print_nginx_format: bool,
}

/// A size ([`vodlab_units::parse_size`]: `1e6`, `1MB`, `200MB`, `4M`) as
/// bytes in an `f64`.
pub fn size_f64(s: &str) -> Result<f64, vodlab_units::UnitError> {
    vodlab_units::parse_size(s).map(|b| b as f64)
}

impl AnalyzeArgs {
    /// The analysis's settings: the defaults, with the flags given.
    pub fn settings(&self) -> Settings {
        let a = self;
        let mut s = Settings::default();
        let set = |v: Option<f64>, f: &mut f64| {
            if let Some(v) = v {
                *f = v;
            }
        };
        set(a.chain_window, &mut s.chain_window_s);
        set(a.reorder, &mut s.reorder_s);
        set(a.long_chain, &mut s.long_chain_s);
        set(a.cluster_gap, &mut s.cluster_gap_s);
        set(a.inactive, &mut s.inactive_s);
        set(a.survival_p, &mut s.survival_p);
        set(a.session_idle, &mut s.session_idle_s);
        if let Some(b) = &a.fit_breaks {
            s.fit_breaks = b.clone();
        }
        s
    }
}

/// File key → bit rate (kbit/s) from a workload's catalog.
pub fn bitrates(c: &Catalog) -> HashMap<u64, f64> {
    let mut out = HashMap::new();
    for t in &c.titles {
        for tr in &t.representations {
            let b = c.representations[tr.rep].bitrate_kbps;
            for chunk in 0..tr.files {
                out.insert(key(&format!("/{}", c.file_path(t, tr.rep, chunk))), b);
            }
        }
    }
    out
}
