//! The settings of `vodlab compare` (with the `cli` feature, its flags).

use std::path::PathBuf;

use crate::diskd::DiskArgs;
use crate::hwbox::HwArgs;
use crate::settings::SearchArgs;

/// Arguments of `vodlab compare`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct CompareArgs {
    /// A `vodlab gen` workload directory.
    pub workload: PathBuf,
    /// Its file set (`vodlab fileset create`), which every server serves.
    /// Not needed with --disk (the emulated drive presents the set).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "DIR", required_unless_present = "disk")
    )]
    pub root: Option<PathBuf>,
    /// Rows to compare, comma-separated (repeatable): a server
    /// (vodlab-asap, vodlab-vanilla, nginx, apache2, lighttpd, nghttpx in
    /// front of a `vodlab serve --io asap` backend, or ngtcp2: ngtcp2's
    /// example HTTP/3 server, whole files only) or a configuration of
    /// `vodlab serve --io asap`, `vodlab-asap:POLICY` (`nghttpx:POLICY` for
    /// its backend), with POLICY as `vodlab serve --prefetch-policy` takes
    /// it: `fixed:SIZE`
    /// (vodlab-asap:fixed:2M), `sqrt:SIZE,ref=KBPS` (square-root sizes,
    /// = fixed:SIZE,ref=KBPS), `auto[:KEY=VALUE,...]`, `first-grow:MAX`,
    /// `first-grow-sr:MAX`. Each row is its own server process and its own
    /// line of the table, named as given; a comma followed by KEY=VALUE
    /// continues the row before it. E.g. --servers
    /// vodlab-asap:fixed:2M,vodlab-asap:fixed:4M,vodlab-asap:auto,vodlab-vanilla,nginx.
    /// Default: vodlab-asap,vodlab-vanilla,nginx,apache2,lighttpd; with
    /// --protocol h3 vodlab-asap,vodlab-vanilla,ngtcp2, and the Debian
    /// servers as rows that say why they cannot (none of them speaks h3).
    #[cfg_attr(feature = "cli", arg(long, value_name = "ROW,..."))]
    pub servers: Vec<String>,
    /// The box's limits.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub hw: HwArgs,
    /// Emulated drive: every server reads the file set from a fresh
    /// `vodlab disk mount` before every run (cold drive, cold page cache);
    /// the disk figures are the drive model's.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub disk: DiskArgs,
    /// Run without a box (no root needed; the disk figures then come from
    /// the device's counters, shared with every other process).
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_box: bool,
    /// Loopback port the servers listen on.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 18480))]
    pub port: u16,
    /// Worker processes for nginx / Apache (default: CPU count).
    #[cfg_attr(feature = "cli", arg(long))]
    pub workers: Option<usize>,
    /// Extra argument for every `vodlab serve` row (repeatable), e.g.
    /// --serve-arg=--helpers=2 (a row's policy goes in the row instead).
    #[cfg_attr(
        feature = "cli",
        arg(long = "serve-arg", value_name = "ARG", allow_hyphen_values = true)
    )]
    pub serve_args: Vec<String>,
    /// Skip the sequential-read bound (`vodlab fileset seqread` in the box).
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_seqread: bool,
    /// Output directory: compare.json, summary.txt, one capacity directory per server.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: Option<PathBuf>,
    /// How each point is run and how each server's search proceeds.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub search: SearchArgs,
}

/// Most `--workers` of a compared server.
pub const MAX_WORKERS: u64 = 1_024;
