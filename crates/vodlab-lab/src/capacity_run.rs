//! `vodlab capacity`'s work (the search driven with real runs; the file it
//! writes is [`crate::capacity`]'s): the target resolved, a point runner for it,
//! the `--fail-on` rules checked against the file's shape, the search run
//! and capacity.json written with the workload's bit-rate mix; and the
//! summary of a capacity.json in words and as a table.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use thiserror::Error;
use vodlab_client::out::thresholds::{Rule, RuleError};
use vodlab_workload::construct::Catalog;

use crate::capacity::{
    add_viewer_figures, bitrate_mix, mix_words, rows, CapacityFile, RepShare, Viewers,
};
use crate::files::FileError;
use crate::point::{error_chain, Interrupter, RunnerError};
use crate::runner::{unix_now, PointRunner, SearchObserver, Target};
use crate::search::{Answer, Search, SearchConfig, SearchError};
use crate::settings::{SearchArgs, SettingsError};
use crate::stats::MeanCi;

/// Arguments of `vodlab capacity`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct CapacityArgs {
    /// A `vodlab gen` directory or a session script.
    pub workload: PathBuf,
    /// Server to load, `http://HOST:PORT` (loopback unless --allow-remote).
    #[cfg_attr(feature = "cli", arg(long, value_name = "URL"))]
    pub target: String,
    /// Cool this file set (drop it from the page cache) before every run, so
    /// each point starts cold (the server must run on this machine).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILESET_ROOT"))]
    pub cool: Option<PathBuf>,
    /// Output directory: capacity.json and points/NN-.../results.json.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: Option<PathBuf>,
    /// Allow a target that is not a loopback address.
    #[cfg_attr(feature = "cli", arg(long))]
    pub allow_remote: bool,
    /// How each point is run and how the search proceeds.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub search: SearchArgs,
}

/// Why a capacity search could not run or finish.
#[derive(Debug, Error)]
pub enum CapacityError {
    /// The settings are refused.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// `--target` is not a URL this client can load.
    #[error("{0}")]
    Target(String),
    /// The target's host could not be resolved.
    #[error("resolving {hostport}")]
    Resolve {
        /// `HOST:PORT`.
        hostport: String,
        /// Why.
        source: std::io::Error,
    },
    /// The target's host has no address.
    #[error("{0} has no address")]
    NoAddress(String),
    /// The target is not loopback and `--allow-remote` was not given.
    #[error("--target {target} resolves to {ip}, not a loopback address; pass --allow-remote to load a remote server")]
    NotLoopback {
        /// The URL.
        target: String,
        /// Its address.
        ip: std::net::IpAddr,
    },
    /// A point could not be measured.
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// The search settings are inconsistent.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// A `--fail-on` rule names no figure of the result.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// The file set could not be cooled before a run.
    #[error("cooling {}", root.display())]
    Cool {
        /// The file set's root.
        root: PathBuf,
        /// Why.
        source: vodlab_fileset::FilesetError,
    },
    /// capacity.json could not be written.
    #[error(transparent)]
    File(#[from] FileError),
    /// A result could not be turned into JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Resolves `target` (an http or https URL) and checks it is loopback unless allowed.
pub fn resolve_target(target: &str, allow_remote: bool) -> Result<Target, CapacityError> {
    let (hostport, host) =
        vodlab_client::config::parse_target(target).map_err(CapacityError::Target)?;
    let addr: SocketAddr = hostport
        .to_socket_addrs()
        .map_err(|source| CapacityError::Resolve {
            hostport: hostport.clone(),
            source,
        })?
        .next()
        .ok_or_else(|| CapacityError::NoAddress(hostport.clone()))?;
    if !allow_remote && !vodlab_client::config::is_loopback(addr.ip()) {
        return Err(CapacityError::NotLoopback {
            target: target.to_string(),
            ip: addr.ip(),
        });
    }
    Ok(Target {
        addr,
        host,
        url: target.to_string(),
    })
}

/// A runner for `target` with these search arguments, writing under `out`;
/// a point spread over client processes runs `exe` (the vodlab binary) as
/// `vodlab run --shard I/N`.
#[allow(clippy::too_many_arguments)]
pub fn runner(
    workload: &Path,
    target: &str,
    allow_remote: bool,
    args: &SearchArgs,
    out: &Path,
    exe: &Path,
    interrupter: Interrupter,
    obs: &mut dyn SearchObserver,
) -> Result<PointRunner, CapacityError> {
    let t = resolve_target(target, allow_remote)?;
    let mut settings = args.settings();
    settings.transport = args
        .transport
        .config(target)
        .map_err(crate::settings::SettingsError::from)?;
    if settings.client_processes > 1 {
        // the children are this very binary, `vodlab run --shard I/N`
        settings.client_exe = Some(exe.to_path_buf());
        obs.note(&format!(
            "vodlab: each point runs as up to {n} client processes (`vodlab run --shard I/{n}`), their results merged",
            n = settings.client_processes
        ));
    }
    vodlab_client::config::raise_nofile();
    Ok(PointRunner::new(workload, t, settings, out, interrupter)?)
}

/// Checks `--fail-on` rules against the shape of a capacity.json before
/// anything runs: a path that names no figure is a
/// usage error, not a wasted search.
pub fn check_rules(rules: &[Rule], mut shape: CapacityFile) -> Result<(), CapacityError> {
    // the figures a finished search adds, present so their names are known
    shape.at_capacity.get_or_insert(Viewers {
        rate: 0.0,
        runs: 0,
        mean_active_sessions: Some(0.0),
        peak_active_sessions: Some(0),
        delivered_gbit_s: 0.0,
    });
    vodlab_client::out::thresholds::check_before(rules, &serde_json::to_value(shape)?, &[])?;
    Ok(())
}

/// Records the bit-rate mix of the workload in `workload` in `file` and
/// rewrites `out/capacity.json` with it; a workload without a readable
/// catalog.json and stats.json (not made by `vodlab gen`) keeps the file as
/// it is, with a warning (a note to `obs`).
pub fn with_mix(
    mut file: CapacityFile,
    workload: &Path,
    out: &Path,
    obs: &mut dyn SearchObserver,
) -> Result<CapacityFile, FileError> {
    match bitrate_mix(workload) {
        Ok(mix) => {
            file.bitrate_mix = mix;
            file.write(&out.join("capacity.json"))?;
        }
        Err(e) => obs.note(&format!("vodlab: no bit-rate mix in capacity.json: {e}")),
    }
    Ok(file)
}

/// A finished (or early stopped) search.
#[derive(Debug)]
pub struct CapacityRun {
    /// capacity.json as written.
    pub file: CapacityFile,
    /// The output directory.
    pub out: PathBuf,
    /// Why the search stopped early (the error and its causes), if it did.
    pub stopped: Option<String>,
}

/// A capacity search ready to run: its runner is up, nothing ran yet.
pub struct Capacity {
    runner: PointRunner,
    cfg: SearchConfig,
    rules: Vec<Rule>,
    workload: PathBuf,
    out: PathBuf,
    cool: Option<(PathBuf, Catalog)>,
    server: Option<String>,
    intro: Option<String>,
}

impl Capacity {
    /// `vodlab capacity`'s search: the settings checked, the output
    /// directory chosen (default `results/capacity-TIME`), the runner made
    /// for the target. `cool` is the workload's catalog when `--cool` was
    /// given; `exe` the vodlab binary (for `--client-processes`).
    pub fn prepare(
        a: &CapacityArgs,
        cool: Option<Catalog>,
        exe: &Path,
        interrupter: Interrupter,
        obs: &mut dyn SearchObserver,
    ) -> Result<Self, CapacityError> {
        let cfg = a.search.config()?;
        let out = a
            .output
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("results/capacity-{}", unix_now() as u64)));
        let runner = runner(
            &a.workload,
            &a.target,
            a.allow_remote,
            &a.search,
            &out,
            exe,
            interrupter,
            obs,
        )?;
        let intro = format!(
            "vodlab capacity: {} against {}; criterion: {}; {} s of arrivals per point, drain {} s; output {}",
            runner.workload_name(),
            a.target,
            cfg.criterion,
            a.search.window,
            a.search.drain,
            out.display()
        );
        Ok(Self {
            runner,
            cfg,
            rules: a.search.fail_on.clone(),
            workload: a.workload.clone(),
            out,
            cool: a.cool.clone().zip(cool),
            server: None,
            intro: Some(intro),
        })
    }

    /// A search with `runner` (made by [`runner`] for `workload`, writing
    /// under `out`), labelled `server` in capacity.json.
    pub fn with_runner(
        runner: PointRunner,
        cfg: SearchConfig,
        rules: &[Rule],
        workload: &Path,
        out: &Path,
        server: Option<String>,
    ) -> Self {
        Self {
            runner,
            cfg,
            rules: rules.to_vec(),
            workload: workload.to_path_buf(),
            out: out.to_path_buf(),
            cool: None,
            server,
            intro: None,
        }
    }

    /// The target's address.
    pub fn addr(&self) -> SocketAddr {
        self.runner.addr()
    }

    /// Checks the `--fail-on` rules, runs the search (cooling the file set
    /// before every run with `--cool`) and writes capacity.json with the
    /// workload's bit-rate mix. A search stopped by an error or an
    /// interruption still writes its file and says why in
    /// [`CapacityRun::stopped`].
    pub fn run(self, obs: &mut impl SearchObserver) -> Result<CapacityRun, CapacityError> {
        let Self {
            mut runner,
            cfg,
            rules,
            workload,
            out,
            cool,
            server,
            intro,
        } = self;
        let mut search = Search::new(cfg)?;
        check_rules(&rules, runner.capacity_file(&search, None, None, 0.0))?;
        if let Some(line) = intro {
            obs.note(&line);
        }
        let started = unix_now();
        let res: Result<Answer, CapacityError> = runner.run_search(
            &mut search,
            obs,
            || {
                if let Some((root, catalog)) = &cool {
                    vodlab_fileset::cool(root, catalog).map_err(|source| CapacityError::Cool {
                        root: root.clone(),
                        source,
                    })?;
                }
                Ok(())
            },
            |m, o| {
                add_viewer_figures(&mut o.extra, &m.results);
                Ok(())
            },
        );
        let res = res.map_err(|e| error_chain(&e));
        let stop = runner.stop_of(&res);
        let file = runner.write_capacity(&search, stop.as_ref(), server, started)?;
        runner.finish();
        let file = with_mix(file, &workload, &out, obs)?;
        Ok(CapacityRun {
            file,
            out,
            stopped: res.err(),
        })
    }
}

/// `12.3` or `12.3 ± 0.4`.
pub fn fmt_ci(c: Option<MeanCi>, digits: usize) -> String {
    match c {
        None => "-".into(),
        Some(c) => match c.half_width {
            Some(h) => format!("{:.*} ± {:.*}", digits, c.mean, digits, h),
            None => format!("{:.*}", digits, c.mean),
        },
    }
}

/// The answer in viewers' units: `at the highest failure-free rate, 12.0
/// new sessions/s without a failed session: 96 concurrent viewers on
/// average (peak 110), 0.41 Gbit/s delivered (bit rates by share of bytes:
/// ...)`; `None` when no point passed.
pub fn viewers_line(file: &CapacityFile) -> Option<String> {
    let v = file.at_capacity.as_ref()?;
    Some(format!(
        "in viewers: {}{}",
        v.sentence(),
        mix_suffix(&file.bitrate_mix)
    ))
}

/// ` (bit rates by share of bytes: ...)`, or nothing without a mix.
pub fn mix_suffix(mix: &[RepShare]) -> String {
    if mix.is_empty() {
        String::new()
    } else {
        format!(" ({})", mix_words(mix))
    }
}

/// The summary table and the answer in words.
pub fn table(file: &CapacityFile) -> String {
    let mut s = String::new();
    s += &format!(
        "{:>10}  {:>7}  {:>4}  {:>16}  {:>14}  {}\n",
        "rate/s", "verdict", "runs", "delivered MB/s", "failed %", "client"
    );
    for r in rows(&file.search) {
        s += &format!(
            "{:>10.3}  {:>7}  {:>4}  {:>16}  {:>14}  {}\n",
            r.rate,
            r.verdict.label(),
            r.runs,
            fmt_ci(r.delivered_mb_s, 1),
            fmt_ci(r.failed_pct, 2),
            if r.client_valid { "ok" } else { "INVALID" }
        );
    }
    s += &file.answer_line();
    s
}
