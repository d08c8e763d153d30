//! `vodlab simulate`: the client's own player core in virtual time.
//!
//! Two modes: `--player`, one closed-loop ABR player
//! ([`vodlab_client::core::player`]) over a Sabre bandwidth trace and movie
//! (docs/abr.md), run here ([`run_player`]); `--prefetch`, chapter 5's
//! prefetch policies over an access log's chains ([`crate::tracesim`],
//! docs/simulate.md).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use vodlab_client::core::player::qoe::P1203Options;
use vodlab_client::core::player::sim::{self, SimOutcome, Trace};
use vodlab_client::core::player::{AbrParams, AbrRule, Movie, Player, PlayerConfig, PlayerError};

use crate::tracesim::PrefetchSimArgs;

/// Arguments of `vodlab simulate`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(
    feature = "cli",
    command(group = clap::ArgGroup::new("mode").required(true).multiple(false))
)]
pub struct SimulateArgs {
    /// Mode: one ABR player over a bandwidth trace (prints one JSON line per
    /// segment, then one summary line).
    #[cfg_attr(feature = "cli", arg(long, group = "mode"))]
    pub player: bool,
    /// Mode: chapter 5's trace-driven comparison of prefetch policies over
    /// an access log's chains (docs/simulate.md); see the prefetch options.
    #[cfg_attr(feature = "cli", arg(long, group = "mode"))]
    pub prefetch: bool,
    /// Options of --prefetch.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub prefetch_args: PrefetchSimArgs,
    /// ABR rule: throughput, bola, bba, dynamic, bolae (BOLA-E) or
    /// dynamicdash (BOLA-E/throughput, like dash.js's DYNAMIC).
    #[cfg_attr(feature = "cli", arg(long, default_value = "dynamic", value_name = "RULE", value_parser = parse_rule))]
    pub abr: AbrRule,
    /// Movie in Sabre's format: {segment_duration_ms, bitrates_kbps,
    /// segment_sizes_bits}.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "MOVIE.json", required_if_eq("player", "true"))
    )]
    pub movie: Option<PathBuf>,
    /// Bandwidth trace in Sabre's format: [{duration_ms, bandwidth_kbps,
    /// latency_ms}, …], looped.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "TRACE.json", required_if_eq("player", "true"))
    )]
    pub trace: Option<PathBuf>,
    /// Buffer capacity (a bare number is seconds; Sabre's -b).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 25.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub max_buffer: f64,
    /// Half-lives of the throughput EWMAs (bare numbers are seconds;
    /// Sabre's -hl).
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ',', default_value = "3,8", value_name = "DURATION,DURATION", value_parser = vodlab_units::parse_seconds))]
    pub half_life: Vec<f64>,
    /// Never abandon a download (Sabre's -noa).
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_abandon: bool,
    /// After an abandonment fetch the level the rule suggested (Sabre at
    /// 09b03bb decides again instead).
    #[cfg_attr(feature = "cli", arg(long))]
    pub abandon_to_suggested: bool,
    /// Turn off the throughput rule's insufficient-buffer cap (Sabre's
    /// -noibr).
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_insufficient_buffer_rule: bool,
    /// BOLA's γp (Sabre's -gp).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 5.0, value_name = "GP"))]
    pub gamma_p: f64,
    /// BOLA-basic: fixed V, no abandonment (Sabre's -ab).
    #[cfg_attr(feature = "cli", arg(long))]
    pub bola_basic: bool,
    /// BBA reservoir (a bare number is seconds).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 5.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub reservoir: f64,
    /// BBA cushion (a bare number is seconds).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 10.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub cushion: f64,
    /// DYNAMIC's switch threshold, buffer level (a bare number is seconds).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 10.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub dynamic_threshold: f64,
    /// Multiply the trace's bandwidth by this (Sabre's -nm).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1.0, value_name = "X"))]
    pub network_multiplier: f64,
    /// Print only the summary line.
    #[cfg_attr(feature = "cli", arg(long))]
    pub summary_only: bool,
    /// Also write the session's ITU-T P.1203 mode-0 input JSON here.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub p1203: Option<PathBuf>,
}

/// Reads an ABR rule by name (`--abr`).
pub fn parse_rule(s: &str) -> Result<AbrRule, String> {
    s.parse().map_err(|e: PlayerError| e.to_string())
}

/// Why the player simulation could not run.
#[derive(Debug, Error)]
pub enum SimulateError {
    /// Flags that do not go together, or a value out of range.
    #[error("{0}")]
    Settings(String),
    /// A file could not be read or written; `what` says which and how.
    #[error("{what}")]
    Io {
        /// The step and the path.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The movie, the trace or the simulation refused; `what` says which.
    #[error("{what}")]
    Player {
        /// The movie or trace (and its path), or the simulation.
        what: String,
        /// The error.
        #[source]
        source: PlayerError,
    },
    /// A result could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

fn read(p: &Path) -> Result<String, SimulateError> {
    std::fs::read_to_string(p).map_err(|source| SimulateError::Io {
        what: format!("reading {}", p.display()),
        source,
    })
}

fn player_err(what: impl Into<String>) -> impl FnOnce(PlayerError) -> SimulateError {
    let what = what.into();
    move |source| SimulateError::Player { what, source }
}

/// One line of output per segment.
#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(flatten)]
    seg: &'a vodlab_client::core::player::SegmentRecord,
    /// Abandoned attempts at this segment before it completed.
    abandoned_attempts: usize,
}

/// What one simulated player did.
pub struct PlayerRun {
    /// The player at the end of the movie.
    pub player: Player,
    /// Its records and QoE.
    pub outcome: SimOutcome,
    /// The configuration it ran with.
    pub config: PlayerConfig,
}

impl SimulateArgs {
    /// The player's configuration from the flags.
    pub fn player_config(&self) -> PlayerConfig {
        PlayerConfig {
            abr: self.abr,
            max_buffer_ms: self.max_buffer * 1000.0,
            half_life_ms: self.half_life.iter().map(|h| h * 1000.0).collect(),
            abandon: !self.no_abandon,
            apply_abandon_suggestion: self.abandon_to_suggested,
            params: AbrParams {
                insufficient_buffer_rule: !self.no_insufficient_buffer_rule,
                gamma_p: self.gamma_p,
                bola_basic: self.bola_basic,
                bba_reservoir_ms: self.reservoir * 1000.0,
                bba_cushion_ms: self.cushion * 1000.0,
                dynamic_threshold_ms: self.dynamic_threshold * 1000.0,
                ..AbrParams::default()
            },
            ..PlayerConfig::default()
        }
    }
}

/// `vodlab simulate --player`: reads the movie and trace and runs one
/// player over them in virtual time.
pub fn run_player(a: &SimulateArgs) -> Result<PlayerRun, SimulateError> {
    if !a.player {
        return Err(SimulateError::Settings(
            "choose a mode: --player or --prefetch".into(),
        ));
    }
    let (Some(movie_path), Some(trace_path)) = (&a.movie, &a.trace) else {
        return Err(SimulateError::Settings(
            "--player needs --movie and --trace".into(),
        ));
    };
    let movie = Movie::from_json(&read(movie_path)?)
        .map_err(player_err(format!("movie {}", movie_path.display())))?;
    let trace = Trace::from_json(&read(trace_path)?)
        .map_err(player_err(format!("trace {}", trace_path.display())))?;
    if !(a.network_multiplier.is_finite() && a.network_multiplier > 0.0) {
        return Err(SimulateError::Settings(
            "--network-multiplier must be positive".into(),
        ));
    }
    let trace = trace.scaled(a.network_multiplier);
    let config = a.player_config();
    let player = sim::run_player(Arc::new(movie), &trace, config.clone())
        .map_err(player_err("simulating"))?;
    let outcome = SimOutcome {
        segments: player.records().to_vec(),
        abandoned: player.abandoned().to_vec(),
        qoe: player.qoe(),
    };
    Ok(PlayerRun {
        player,
        outcome,
        config,
    })
}

impl PlayerRun {
    /// Writes one JSON line per segment (unless `summary_only`), then the
    /// summary line.
    pub fn write_lines(&self, w: &mut impl Write, summary_only: bool) -> std::io::Result<()> {
        let out = &self.outcome;
        let mut attempts: BTreeMap<usize, usize> = BTreeMap::new();
        for r in &out.abandoned {
            *attempts.entry(r.index).or_default() += 1;
        }
        if !summary_only {
            for s in &out.segments {
                let line = Line {
                    seg: s,
                    abandoned_attempts: attempts.get(&s.index).copied().unwrap_or(0),
                };
                serde_json::to_writer(&mut *w, &line)?;
                writeln!(w)?;
            }
        }
        serde_json::to_writer(
            &mut *w,
            &serde_json::json!({ "summary": out.qoe, "abr": self.config.abr.name(), "config": self.config }),
        )?;
        writeln!(w)
    }

    /// Writes the session's ITU-T P.1203 mode-0 input JSON to `p`.
    pub fn write_p1203(&self, p: &Path) -> Result<(), SimulateError> {
        let v = self.player.p1203_input(&P1203Options::default());
        std::fs::write(p, serde_json::to_vec_pretty(&v)?).map_err(|source| SimulateError::Io {
            what: format!("writing {}", p.display()),
            source,
        })
    }
}
