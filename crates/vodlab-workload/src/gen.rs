//! `vodlab gen`: its settings (deriving clap's `Args` with the `cli`
//! feature), the specification they give (a preset or a file, with the
//! overrides), constructing and writing the workload, and the statistics
//! table; the caller lists presets, times and prints.

use std::fmt::Write as _;
use std::path::PathBuf;

use thiserror::Error;

use crate::construct::try_construct;
use crate::limits::MAX_SHARDS;
use crate::output::{write_workload, Manifest};
use crate::{presets, BuildError, Overrides, Spec, SpecError, Stats, Workload};

/// Why `vodlab gen` made no workload.
#[derive(Debug, Error)]
pub enum GenError {
    /// Neither `--preset` nor `--spec`.
    #[error("give --preset NAME or --spec FILE (see --list-presets)")]
    NoSpec,
    /// The specification (or an override) is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// `--shards` out of range.
    #[error("--shards must be between 1 and {MAX_SHARDS}, got {0}")]
    Shards(u32),
    /// `--shards` cannot split the sessions into non-empty scripts.
    #[error("--shards {shards} cannot split {sessions} sessions into {shards} non-empty scripts")]
    ShardsSplit {
        /// The shards asked for.
        shards: u32,
        /// The sessions to split.
        sessions: u32,
    },
    /// The workload could not be written.
    #[error("writing the workload to {}", dir.display())]
    Write {
        /// The output directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: BuildError,
    },
}

/// Arguments of `vodlab gen`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct GenArgs {
    /// Built-in workload to construct (see --list-presets).
    #[cfg_attr(feature = "cli", arg(long, conflicts_with = "spec", required_unless_present_any = ["spec", "list_presets", "show_preset"]))]
    pub preset: Option<String>,
    /// Workload specification file (TOML, docs/workload-spec.md).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub spec: Option<PathBuf>,
    /// Output directory (created; an existing vodlab workload in it is replaced).
    #[cfg_attr(feature = "cli", arg(short = 'o', long = "out", alias = "output", value_name = "DIR", required_unless_present_any = ["list_presets", "show_preset", "check"]))]
    pub output: Option<PathBuf>,
    /// Seed of every random draw (overrides [measurement] seed).
    #[cfg_attr(feature = "cli", arg(long))]
    pub seed: Option<u64>,
    /// Number of sessions (overrides sessions.count).
    #[cfg_attr(feature = "cli", arg(long))]
    pub sessions: Option<u32>,
    /// Number of titles (overrides catalog.titles).
    #[cfg_attr(feature = "cli", arg(long))]
    pub titles: Option<u32>,
    /// Multiply titles, sessions, shard size and ramp lengths by this factor,
    /// keeping the workload's proportions (e.g. 0.1 for a quick run).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FACTOR"))]
    pub scale: Option<f64>,
    /// Split sessions into this many per-host scripts (default: from
    /// [measurement] shard_sessions; the YouTube presets use 12 like the papers).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N"))]
    pub shards: Option<u32>,
    /// Write into a non-empty directory that is not a vodlab workload.
    #[cfg_attr(feature = "cli", arg(long))]
    pub force: bool,
    /// Print statistics as JSON instead of a table.
    #[cfg_attr(feature = "cli", arg(long))]
    pub json: bool,
    /// List the built-in presets and exit.
    #[cfg_attr(feature = "cli", arg(long))]
    pub list_presets: bool,
    /// Print a preset's TOML (a starting point for your own spec) and exit.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME"))]
    pub show_preset: Option<String>,
    /// Check the specification with the overrides applied (every bound, the
    /// size estimate and the script layout) and exit without constructing or
    /// writing anything.
    #[cfg_attr(feature = "cli", arg(long))]
    pub check: bool,
}

/// The specification `a` names (`--preset` or `--spec`) with its overrides
/// applied, and its origin (`preset:NAME` or the file).
pub fn spec(a: &GenArgs) -> Result<(Spec, String), GenError> {
    let (mut spec, origin) = match (&a.preset, &a.spec) {
        (Some(p), _) => (presets::load(p)?, format!("preset:{p}")),
        (None, Some(f)) => (Spec::from_file(f)?, f.display().to_string()),
        (None, None) => return Err(GenError::NoSpec),
    };
    if a.shards.is_some() {
        // --shards replaces shard_sessions (set below from the final count),
        // so the bound on shards must not judge the spec's own shard size
        spec.measurement.shard_sessions = None;
    }
    spec.apply(
        &Overrides {
            seed: a.seed,
            sessions: a.sessions,
            titles: a.titles,
            scale: a.scale,
        },
        &origin,
    )?;
    if let Some(n) = a.shards {
        if !(1..=MAX_SHARDS).contains(&n) {
            return Err(GenError::Shards(n));
        }
        spec.measurement.shard_sessions = Some(spec.sessions.count.div_ceil(n).max(1));
        if spec.shard_count() != n {
            return Err(GenError::ShardsSplit {
                shards: n,
                sessions: spec.sessions.count,
            });
        }
    }
    Ok((spec, origin))
}

/// A workload constructed and written by [`generate`].
#[derive(Debug)]
pub struct Generated {
    /// Its specification.
    pub spec: Spec,
    /// The workload.
    pub workload: Workload,
    /// The manifest written.
    pub manifest: Manifest,
}

/// Constructs the workload of [`spec`] and writes it to `a.output` (which
/// clap requires unless listing, showing or checking).
pub fn generate(a: &GenArgs) -> Result<Generated, GenError> {
    let (spec, origin) = spec(a)?;
    let dir = a.output.as_ref().expect("clap requires -o");
    let workload = try_construct(&spec, &origin)?;
    let manifest = write_workload(dir, &workload, a.force).map_err(|source| GenError::Write {
        dir: dir.clone(),
        source,
    })?;
    Ok(Generated {
        spec,
        workload,
        manifest,
    })
}

/// When ramp-up and ramp-down exclude a shard's every session: the sessions
/// per shard and the sessions the ramps exclude.
pub fn unmeasured_shards(spec: &Spec) -> Option<(u32, u32)> {
    let per_shard = spec.sessions.count.div_ceil(spec.shard_count());
    let ramp = spec.measurement.ramp_up_sessions + spec.measurement.ramp_down_sessions;
    (ramp >= per_shard).then_some((per_shard, ramp))
}

/// The statistics of a constructed workload as the table `vodlab gen`
/// prints: one line a figure (indented two spaces), the thesis's marginals
/// beside a netflix workload's, the mixes last.
pub fn stats_table(s: &Stats) -> String {
    let mut out = String::new();
    let rows: Vec<(&str, String)> = vec![
        ("sessions", s.sessions.to_string()),
        ("titles in catalog", s.titles.to_string()),
        ("unique titles", s.unique_titles.to_string()),
        (
            "single-session titles",
            format!("{:.1} %", s.single_session_titles_pct),
        ),
        (
            "mean title duration",
            format!("{:.1} s", s.mean_title_duration_s),
        ),
        ("mean title size", format!("{:.1} MB", s.mean_title_size_mb)),
        (
            "mean session time",
            format!("{:.1} s", s.mean_session_time_s),
        ),
        (
            "requests per session",
            format!("{:.3}", s.requests_per_session),
        ),
        ("unique chunks requested", s.unique_chunks.to_string()),
        ("total chunks requested", s.total_chunks.to_string()),
        ("chunks viewed once", s.chunks_viewed_once.to_string()),
        ("bytes requested", format!("{:.2} GB", s.total_requested_gb)),
        (
            "file set",
            format!("{:.2} GB in {} files", s.catalog_size_gb, s.catalog_files),
        ),
        ("shards", s.shards.to_string()),
        ("measured sessions", s.measured_sessions.to_string()),
    ];
    let mut rows = rows;
    if let Some(n) = &s.netflix {
        // thesis chapter 5 marginals (docs/workload-spec.md, netflix model)
        let p = &n.parallel_pct;
        rows.extend([
            (
                "chunk / open requests",
                format!(
                    "{:.1} / {:.1} %  (thesis 98.7 / 1.3)",
                    n.chunk_requests_pct, n.open_requests_pct
                ),
            ),
            (
                "chunk / open bytes",
                format!(
                    "{:.1} / {:.1} %  (thesis 65.2 / 34.8)",
                    n.chunk_bytes_pct, n.open_bytes_pct
                ),
            ),
            (
                "files by parallel requests",
                format!(
                    "{:.1} / {:.1} / {:.1} / {:.1} / {:.1} / {:.1} %  (thesis 41.9 / 18.0 / 33.0 / 6.0 / 0.8 / 0.3)",
                    p[0], p[1], p[2], p[3], p[4], p[5]
                ),
            ),
            (
                "chains <= 1 MB / > 10 MB",
                format!(
                    "{:.1} / {:.1} %  (thesis > 60 / about 15)",
                    n.chains_le_1mb_pct, n.chains_gt_10mb_pct
                ),
            ),
            (
                "bytes in chains > 10 MB",
                format!("{:.1} %  (thesis > 90)", n.bytes_in_chains_gt_10mb_pct),
            ),
            (
                "chains from offset 0",
                format!("{:.1} %  (thesis about 24)", n.chains_from_zero_pct),
            ),
            (
                "sessions starting transient",
                format!("{:.1} %  (thesis > 97)", n.start_transient_pct),
            ),
            (
                "time transient / stable / inactive",
                format!(
                    "{:.1} / {:.1} / {:.1} %  (thesis 5.2 / 79.1 / 16.4)",
                    n.transient_time_pct, n.stable_time_pct, n.inactive_time_pct
                ),
            ),
            (
                "sessions < 40 s / with stable",
                format!(
                    "{:.1} / {:.1} %  (thesis 33 / 56)",
                    n.sessions_lt_40s_pct, n.sessions_with_stable_pct
                ),
            ),
            (
                "mean stable phase",
                format!("{:.0} s  (thesis 510)", n.mean_stable_phase_s),
            ),
        ]);
    }
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for (k, v) in rows {
        let _ = writeln!(out, "  {k:<w$}  {v:>14}");
    }
    let mix = |v: &[(String, u64)]| {
        v.iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "  {:<w$}  {}",
        "sessions per representation",
        mix(&s.sessions_per_representation)
    );
    let _ = writeln!(
        out,
        "  {:<w$}  {}",
        "sessions per client class",
        mix(&s.sessions_per_class)
    );
    out
}
