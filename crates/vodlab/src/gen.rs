//! `vodlab gen`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use vodlab_workload::construct::try_construct;
use vodlab_workload::limits::MAX_SHARDS;
use vodlab_workload::output::write_workload;
use vodlab_workload::{presets, Overrides, Spec, Stats};

/// Arguments of `vodlab gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Built-in workload to construct (see --list-presets).
    #[arg(long, conflicts_with = "spec", required_unless_present_any = ["spec", "list_presets", "show_preset"])]
    pub preset: Option<String>,
    /// Workload specification file (TOML, docs/workload-spec.md).
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// Output directory (created; an existing vodlab workload in it is replaced).
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR", required_unless_present_any = ["list_presets", "show_preset", "check"])]
    pub output: Option<PathBuf>,
    /// Seed of every random draw (overrides [measurement] seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Number of sessions (overrides sessions.count).
    #[arg(long)]
    pub sessions: Option<u32>,
    /// Number of titles (overrides catalog.titles).
    #[arg(long)]
    pub titles: Option<u32>,
    /// Multiply titles, sessions, shard size and ramp lengths by this factor,
    /// keeping the workload's proportions (e.g. 0.1 for a quick run).
    #[arg(long, value_name = "FACTOR")]
    pub scale: Option<f64>,
    /// Split sessions into this many per-host scripts (default: from
    /// [measurement] shard_sessions; the YouTube presets use 12 like the papers).
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// Write into a non-empty directory that is not a vodlab workload.
    #[arg(long)]
    pub force: bool,
    /// Print statistics as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// List the built-in presets and exit.
    #[arg(long)]
    pub list_presets: bool,
    /// Print a preset's TOML (a starting point for your own spec) and exit.
    #[arg(long, value_name = "NAME")]
    pub show_preset: Option<String>,
    /// Check the specification with the overrides applied (every bound, the
    /// size estimate and the script layout) and exit without constructing or
    /// writing anything.
    #[arg(long)]
    pub check: bool,
}

pub fn run(a: GenArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if a.list_presets {
        for p in presets::PRESETS {
            writeln!(out, "{:<24} {}", p.name, p.summary)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = &a.show_preset {
        presets::load(name)?;
        out.write_all(presets::source(name).expect("checked").as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let (mut spec, origin) = match (&a.preset, &a.spec) {
        (Some(p), _) => (presets::load(p)?, format!("preset:{p}")),
        (None, Some(f)) => (Spec::from_file(f)?, f.display().to_string()),
        (None, None) => anyhow::bail!("give --preset NAME or --spec FILE (see --list-presets)"),
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
        anyhow::ensure!(
            (1..=MAX_SHARDS).contains(&n),
            "--shards must be between 1 and {MAX_SHARDS}, got {n}"
        );
        spec.measurement.shard_sessions = Some(spec.sessions.count.div_ceil(n).max(1));
        anyhow::ensure!(
            spec.shard_count() == n,
            "--shards {n} cannot split {} sessions into {n} non-empty scripts",
            spec.sessions.count
        );
    }
    if a.check {
        writeln!(
            out,
            "workload {} (seed {}) is valid: {} sessions of {} titles in {} script file(s) of up to {} sessions",
            spec.name,
            spec.measurement.seed,
            spec.sessions.count,
            spec.catalog.titles,
            spec.shard_count(),
            spec.sessions.count.div_ceil(spec.shard_count())
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let dir = a.output.as_ref().expect("clap requires -o");
    let workload = try_construct(&spec, &origin)?;
    let manifest = write_workload(dir, &workload, a.force)
        .with_context(|| format!("writing the workload to {}", dir.display()))?;
    let elapsed = started.elapsed();

    let per_shard = spec.sessions.count.div_ceil(spec.shard_count());
    let ramp = spec.measurement.ramp_up_sessions + spec.measurement.ramp_down_sessions;
    if ramp >= per_shard {
        eprintln!(
            "vodlab: warning: each shard has about {per_shard} sessions but ramp-up + ramp-down exclude {ramp}: \
             no session would be measured; use --scale instead of --sessions, or fewer --shards"
        );
    }
    if a.json {
        serde_json::to_writer_pretty(&mut out, &workload.stats)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "workload {} (seed {}) written to {} in {:.0} ms: {} script file(s)",
            spec.name,
            spec.measurement.seed,
            dir.display(),
            elapsed.as_secs_f64() * 1000.0,
            manifest.shards.len()
        )?;
        print_table(&mut out, &workload.stats)?;
        if let Some(m) = &workload.catalog.manifests {
            let kinds: Vec<&str> = [(m.dash, "a DASH MPD"), (m.hls, "HLS playlists")]
                .iter()
                .filter(|k| k.0)
                .map(|k| k.1)
                .collect();
            writeln!(
                out,
                "  streaming manifests: {} per title and a {} B init segment per representation, written by `vodlab fileset create` (docs/formats.md)",
                kinds.join(" and "),
                m.init_bytes
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(out: &mut impl Write, s: &Stats) -> std::io::Result<()> {
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
        writeln!(out, "  {k:<w$}  {v:>14}")?;
    }
    let mix = |v: &[(String, u64)]| {
        v.iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(
        out,
        "  {:<w$}  {}",
        "sessions per representation",
        mix(&s.sessions_per_representation)
    )?;
    writeln!(
        out,
        "  {:<w$}  {}",
        "sessions per client class",
        mix(&s.sessions_per_class)
    )?;
    Ok(())
}
