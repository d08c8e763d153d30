//! `vodlab simulate`: run the client's own player core in virtual time.
//!
//! Two modes: `--player`, one closed-loop ABR player
//! (vodlab_client::player) over a Sabre bandwidth trace and movie
//! (docs/abr.md); `--prefetch`, chapter 5's prefetch policies over an
//! access log's chains ([`crate::simulate_prefetch`], docs/simulate.md).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use vodlab_client::player::qoe::P1203Options;
use vodlab_client::player::sim::{run_player, SimOutcome, Trace};
use vodlab_client::player::{AbrParams, AbrRule, Movie, PlayerConfig};

/// Arguments of `vodlab simulate`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("mode").required(true).multiple(false))]
pub struct SimulateArgs {
    /// Mode: one ABR player over a bandwidth trace (prints one JSON line per
    /// segment, then one summary line).
    #[arg(long, group = "mode")]
    pub player: bool,
    /// Mode: chapter 5's trace-driven comparison of prefetch policies over
    /// an access log's chains (docs/simulate.md); see the prefetch options.
    #[arg(long, group = "mode")]
    pub prefetch: bool,
    /// Options of --prefetch.
    #[command(flatten)]
    pub prefetch_args: crate::simulate_prefetch::PrefetchSimArgs,
    /// ABR rule: throughput, bola, bba, dynamic, bolae (BOLA-E) or
    /// dynamicdash (BOLA-E/throughput, like dash.js's DYNAMIC).
    #[arg(long, default_value = "dynamic", value_name = "RULE", value_parser = parse_rule)]
    pub abr: AbrRule,
    /// Movie in Sabre's format: {segment_duration_ms, bitrates_kbps,
    /// segment_sizes_bits}.
    #[arg(long, value_name = "MOVIE.json", required_if_eq("player", "true"))]
    pub movie: Option<PathBuf>,
    /// Bandwidth trace in Sabre's format: [{duration_ms, bandwidth_kbps,
    /// latency_ms}, …], looped.
    #[arg(long, value_name = "TRACE.json", required_if_eq("player", "true"))]
    pub trace: Option<PathBuf>,
    /// Buffer capacity (a bare number is seconds; Sabre's -b).
    #[arg(long, default_value_t = 25.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub max_buffer: f64,
    /// Half-lives of the throughput EWMAs (bare numbers are seconds;
    /// Sabre's -hl).
    #[arg(long, value_delimiter = ',', default_value = "3,8", value_name = "DURATION,DURATION", value_parser = vodlab_units::parse_seconds)]
    pub half_life: Vec<f64>,
    /// Never abandon a download (Sabre's -noa).
    #[arg(long)]
    pub no_abandon: bool,
    /// After an abandonment fetch the level the rule suggested (Sabre at
    /// 09b03bb decides again instead).
    #[arg(long)]
    pub abandon_to_suggested: bool,
    /// Turn off the throughput rule's insufficient-buffer cap (Sabre's
    /// -noibr).
    #[arg(long)]
    pub no_insufficient_buffer_rule: bool,
    /// BOLA's γp (Sabre's -gp).
    #[arg(long, default_value_t = 5.0, value_name = "GP")]
    pub gamma_p: f64,
    /// BOLA-basic: fixed V, no abandonment (Sabre's -ab).
    #[arg(long)]
    pub bola_basic: bool,
    /// BBA reservoir (a bare number is seconds).
    #[arg(long, default_value_t = 5.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub reservoir: f64,
    /// BBA cushion (a bare number is seconds).
    #[arg(long, default_value_t = 10.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub cushion: f64,
    /// DYNAMIC's switch threshold, buffer level (a bare number is seconds).
    #[arg(long, default_value_t = 10.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    pub dynamic_threshold: f64,
    /// Multiply the trace's bandwidth by this (Sabre's -nm).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    pub network_multiplier: f64,
    /// Print only the summary line.
    #[arg(long)]
    pub summary_only: bool,
    /// Also write the session's ITU-T P.1203 mode-0 input JSON here.
    #[arg(long, value_name = "FILE")]
    pub p1203: Option<PathBuf>,
}

fn parse_rule(s: &str) -> Result<AbrRule, String> {
    s.parse()
        .map_err(|e: vodlab_client::player::PlayerError| e.to_string())
}

fn read(p: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
}

/// One line of output per segment.
#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(flatten)]
    seg: &'a vodlab_client::player::SegmentRecord,
    /// Abandoned attempts at this segment before it completed.
    abandoned_attempts: usize,
}

pub fn run(a: SimulateArgs) -> anyhow::Result<ExitCode> {
    if a.prefetch {
        if let Some(f) = &a.prefetch_args.replay_events {
            let alike = crate::simulate_prefetch::replay_events(&a.prefetch_args, f)?;
            return Ok(if alike {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        crate::simulate_prefetch::run(&a.prefetch_args)?;
        return Ok(ExitCode::SUCCESS);
    }
    anyhow::ensure!(a.player, "choose a mode: --player or --prefetch");
    let (Some(movie_path), Some(trace_path)) = (&a.movie, &a.trace) else {
        anyhow::bail!("--player needs --movie and --trace");
    };
    let movie = Movie::from_json(&read(movie_path)?)
        .with_context(|| format!("movie {}", movie_path.display()))?;
    let trace = Trace::from_json(&read(trace_path)?)
        .with_context(|| format!("trace {}", trace_path.display()))?;
    anyhow::ensure!(
        a.network_multiplier.is_finite() && a.network_multiplier > 0.0,
        "--network-multiplier must be positive"
    );
    let trace = trace.scaled(a.network_multiplier);
    let cfg = PlayerConfig {
        abr: a.abr,
        max_buffer_ms: a.max_buffer * 1000.0,
        half_life_ms: a.half_life.iter().map(|h| h * 1000.0).collect(),
        abandon: !a.no_abandon,
        apply_abandon_suggestion: a.abandon_to_suggested,
        params: AbrParams {
            insufficient_buffer_rule: !a.no_insufficient_buffer_rule,
            gamma_p: a.gamma_p,
            bola_basic: a.bola_basic,
            bba_reservoir_ms: a.reservoir * 1000.0,
            bba_cushion_ms: a.cushion * 1000.0,
            dynamic_threshold_ms: a.dynamic_threshold * 1000.0,
            ..AbrParams::default()
        },
        ..PlayerConfig::default()
    };
    let movie = Arc::new(movie);
    let player = run_player(movie, &trace, cfg.clone()).context("simulating")?;
    let out = SimOutcome {
        segments: player.records().to_vec(),
        abandoned: player.abandoned().to_vec(),
        qoe: player.qoe(),
    };
    let mut attempts: BTreeMap<usize, usize> = BTreeMap::new();
    for r in &out.abandoned {
        *attempts.entry(r.index).or_default() += 1;
    }
    let mut w = std::io::BufWriter::new(std::io::stdout().lock());
    if !a.summary_only {
        for s in &out.segments {
            let line = Line {
                seg: s,
                abandoned_attempts: attempts.get(&s.index).copied().unwrap_or(0),
            };
            serde_json::to_writer(&mut w, &line)?;
            writeln!(w)?;
        }
    }
    serde_json::to_writer(
        &mut w,
        &serde_json::json!({ "summary": out.qoe, "abr": a.abr.name(), "config": cfg }),
    )?;
    writeln!(w)?;
    w.flush()?;
    if let Some(p) = &a.p1203 {
        let v = player.p1203_input(&P1203Options::default());
        std::fs::write(p, serde_json::to_vec_pretty(&v)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
