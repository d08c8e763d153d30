//! `vodlab compare`: one workload, several servers, each in the same box and
//! from a cold cache; a capacity search per server plus the sequential-read
//! bound, and the thesis's comparison table (docs/experiments.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use vodlab_lab::compare::{add_box_figures, COMPARE_FORMAT, COMPARE_VERSION};
use vodlab_lab::hwbox::{BoxSpec, HwBox};
use vodlab_lab::runner::unix_now;
use vodlab_lab::servers::{self, ServerKind, ServerSetup};
use vodlab_lab::{
    Answer, CompareFile, Figures, ProfileInfo, Search, SearchOutcome, SeqRead, ServerRow, Stop,
};

use crate::boxcmd::{describe, HwArgs};
use crate::capacity::{self, Printer, SearchArgs};

/// Arguments of `vodlab compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A `vodlab gen` workload directory.
    pub workload: PathBuf,
    /// Its file set (`vodlab fileset create`), which every server serves.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
    /// Servers to compare, comma-separated, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "vodlab-asap,vodlab-vanilla,nginx,apache2,lighttpd"
    )]
    pub servers: Vec<String>,
    #[command(flatten)]
    pub hw: HwArgs,
    /// Run without a box (no root needed; the disk figures then come from
    /// the device's counters, shared with every other process).
    #[arg(long)]
    pub no_box: bool,
    /// Loopback port the servers listen on.
    #[arg(long, default_value_t = 18480)]
    pub port: u16,
    /// Worker processes for nginx / Apache (default: CPU count).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Extra argument for `vodlab serve` (repeatable), e.g. --serve-arg=--prefetch=2M.
    #[arg(long = "serve-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub serve_args: Vec<String>,
    /// Skip the sequential-read bound (`vodlab fileset seqread` in the box).
    #[arg(long)]
    pub no_seqread: bool,
    /// Output directory: compare.json, summary.txt, one capacity directory per server.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub search: SearchArgs,
}

fn box_usage(b: &Option<HwBox>) -> anyhow::Result<Option<vodlab_lab::Usage>> {
    Ok(match b {
        Some(b) => Some(b.usage()?),
        None => None,
    })
}

fn seqread(
    a: &CompareArgs,
    spec: Option<BoxSpec>,
    catalog: &vodlab_workload::construct::Catalog,
    out: &Path,
) -> anyhow::Result<SeqRead> {
    vodlab_fileset::cool(&a.root, catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    let dev = vodlab_lab::Dev::of_path(&a.root).ok();
    let d0 = dev.and_then(|d| d.stat().ok());
    let u0 = box_usage(&b)?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["fileset", "seqread"])
        .arg(&a.workload)
        .arg("--root")
        .arg(&a.root)
        .arg("--warm-cache");
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    if let Some(b) = &b {
        b.command(&mut cmd);
    }
    let t = Instant::now();
    let o = cmd.output().context("running vodlab fileset seqread")?;
    let secs = t.elapsed().as_secs_f64();
    anyhow::ensure!(
        o.status.success(),
        "vodlab fileset seqread failed: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let printed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    std::fs::write(out.join("seqread.txt"), &printed)?;
    let u1 = box_usage(&b)?;
    let dev_read = match (dev.and_then(|d| d.stat().ok()), d0) {
        (Some(a), Some(b)) => a.since(&b).read_bytes,
        _ => 0,
    };
    let read = match (u0, u1) {
        (Some(a), Some(b)) => b.read_bytes - a.read_bytes,
        _ => dev_read,
    };
    Ok(SeqRead {
        bytes_read: read,
        seconds: secs,
        mb_s: read as f64 / 1e6 / secs,
        output: printed,
    })
}

/// Most `--workers` of a compared server.
pub const MAX_WORKERS: u64 = 1_024;

pub fn run(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let cfg = a.search.config()?;
    if let Some(w) = a.workers {
        crate::capacity::within_int("--workers", w as u64, 1, MAX_WORKERS)?;
    }
    let kinds = a
        .servers
        .iter()
        .map(|s| ServerKind::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    anyhow::ensure!(!kinds.is_empty(), "--servers: name at least one server");
    let (_, catalog) = crate::fileset::load(&a.workload)?;
    let v = vodlab_fileset::verify(&a.root, &catalog, Some(8), 1, &mut |_, _| {}).with_context(
        || {
            format!(
                "{} is not this workload's file set (run `vodlab fileset create`)",
                a.root.display()
            )
        },
    )?;
    anyhow::ensure!(
        v.damaged.is_empty(),
        "{}: {} damaged file(s) in a sample of 8; run `vodlab fileset verify`",
        a.root.display(),
        v.damaged.len()
    );
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/compare-{}", unix_now() as u64)));
    std::fs::create_dir_all(&out)?;
    let root = std::fs::canonicalize(&a.root)?;
    let spec = |name: &str| -> anyhow::Result<Option<BoxSpec>> {
        if a.no_box {
            Ok(None)
        } else {
            Ok(Some(a.hw.spec(name, &root)?))
        }
    };
    // fail early (not after an hour of runs) if the box cannot be made
    if let Some(s) = spec(&format!("vodlab-compare-{}-check", std::process::id()))? {
        let b = HwBox::create(s)?;
        eprintln!("vodlab compare: box {}", describe(&b));
    }
    let addr: SocketAddr = format!("127.0.0.1:{}", a.port).parse()?;
    let started = unix_now();
    // an earlier compare of this workload in the same directory: keep its rows
    // (and its sequential bound) for the servers not run now
    let prior_path = out.join("compare.json");
    let prior: Option<CompareFile> = if prior_path.exists() {
        match CompareFile::read(&prior_path) {
            Ok(f) if f.workload == a.workload.display().to_string() => Some(f),
            Ok(_) => None,
            Err(e) => {
                eprintln!("vodlab compare: not keeping the earlier rows: {e}");
                None
            }
        }
    } else {
        None
    };
    let mut rows: Vec<ServerRow> = prior
        .as_ref()
        .map(|f| f.servers.clone())
        .unwrap_or_default();
    if !rows.is_empty() {
        eprintln!(
            "vodlab compare: keeping the earlier rows of {} in {}",
            rows.iter()
                .map(|r| r.server.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            out.join("compare.json").display()
        );
    }
    let seq = if a.no_seqread {
        prior.as_ref().and_then(|f| f.seqread.clone())
    } else {
        eprintln!(
            "vodlab compare: sequential-read bound (vodlab fileset seqread, cold, in the box) ..."
        );
        let v = seqread(
            &a,
            spec(&format!("vodlab-compare-{}-seqread", std::process::id()))?,
            &catalog,
            &out,
        )?;
        eprintln!("vodlab compare: sequential bound {:.1} MB/s", v.mb_s);
        Some(v)
    };
    let mut file = CompareFile {
        format: COMPARE_FORMAT.into(),
        version: COMPARE_VERSION,
        complete: false,
        workload: a.workload.display().to_string(),
        root: root.display().to_string(),
        hw_box: spec("vodlab-compare")?,
        profile: a.hw.profile()?.map(ProfileInfo::from),
        criterion: cfg.criterion.to_string(),
        window_s: a.search.window,
        pacing: !a.search.no_pacing,
        shaping: !a.search.no_shaping,
        seqread: seq,
        servers: Vec::new(),
        started_at_unix_s: started,
        duration_s: None,
    };
    for kind in kinds {
        let name = kind.name();
        let sdir = out.join(name);
        std::fs::create_dir_all(&sdir)?;
        eprintln!("vodlab compare: {name}");
        let r = one_server(
            &a,
            kind,
            &root,
            addr,
            &sdir,
            spec(&format!("vodlab-compare-{}-{name}", std::process::id()))?,
            &catalog,
            cfg.clone(),
        );
        let row = match r {
            Ok((search, stop)) => ServerRow {
                server: name.into(),
                answer: search.answer(),
                outcome: SearchOutcome::of(&search, stop.as_ref()),
                at_capacity: search.best_point().map(Figures::of),
                at_overload: search.lowest_failed_point().map(Figures::of),
                error: stop.map(|(Stop::Interrupted(m) | Stop::Error(m))| m),
                capacity_json: format!("{name}/capacity.json"),
            },
            Err(e) => {
                eprintln!("vodlab compare: {name}: {e:#}");
                ServerRow {
                    server: name.into(),
                    answer: Answer {
                        capacity: None,
                        lowest_failed: None,
                        ending: None,
                        non_monotone: false,
                        client_limited_at: None,
                    },
                    outcome: SearchOutcome::Error {
                        message: format!("{e:#}"),
                    },
                    at_capacity: None,
                    at_overload: None,
                    error: Some(format!("{e:#}")),
                    capacity_json: format!("{name}/capacity.json"),
                }
            }
        };
        match rows.iter_mut().find(|r| r.server == name) {
            Some(r) => *r = row,
            None => rows.push(row),
        }
        // the table in the servers' usual order
        rows.sort_by_key(|r| ServerKind::ALL.iter().position(|k| k.name() == r.server));
        file.servers = rows.clone();
        file.write(&out.join("compare.json"))?;
    }
    let text = summary(&file);
    file.complete = true;
    file.duration_s = Some(unix_now() - started);
    file.write(&out.join("compare.json"))?;
    std::fs::write(out.join("summary.txt"), &text)?;
    print!("{text}");
    println!("  results: {}", out.join("compare.json").display());
    Ok(ExitCode::SUCCESS)
}

fn summary(file: &CompareFile) -> String {
    let nginx = file.server("nginx").and_then(|r| r.answer.capacity);
    let bound = file.seqread.as_ref().map(|s| s.mb_s);
    let mut s = String::new();
    s += &format!(
        "{:<15} {:>12} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
        "server",
        "sessions/s",
        "x nginx",
        "deliv MB/s",
        "disk MB/s",
        "of seq",
        "read KiB",
        "ms/read",
        "CPU s/GB"
    );
    let f = |x: Option<f64>, d: usize| x.map_or("-".to_string(), |v| format!("{v:.d$}"));
    for r in &file.servers {
        let c = r.at_capacity.clone().unwrap_or_default();
        let limited = matches!(r.outcome, SearchOutcome::ClientLimited { .. });
        let cap = match (r.answer.capacity, r.answer.lowest_failed) {
            (Some(c), _) if limited => format!(">={c:.3}"),
            (Some(c), _) => format!("{c:.3}"),
            (None, Some(f)) => format!("<{f:.3}"),
            _ => "-".into(),
        };
        let note = match (&r.outcome, &r.error) {
            (SearchOutcome::ClientLimited { rate, .. }, _) => {
                format!("  (load generator INVALID at {rate:.3}/s: a lower bound)")
            }
            (_, Some(e)) => format!("  (error: {e})"),
            _ => String::new(),
        };
        s += &format!(
            "{:<15} {:>12} {:>8} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}{}\n",
            r.server,
            cap,
            f(r.answer.capacity.zip(nginx).map(|(a, b)| a / b), 2),
            f(c.delivered_mb_s, 1),
            f(c.disk_mb_s, 1),
            f(c.disk_mb_s.zip(bound).map(|(d, b)| 100.0 * d / b), 0)
                + if c.disk_mb_s.is_some() && bound.is_some() {
                    "%"
                } else {
                    ""
                },
            f(c.mean_read_kib, 0),
            f(c.device_ms_per_read, 1),
            f(c.server_cpu_s_per_gb, 2),
            note,
        );
    }
    if let Some(b) = bound {
        s += &format!(
            "sequential-read bound (vodlab fileset seqread, cold, same box): {b:.1} MB/s\n"
        );
    }
    s += "figures at each server's highest failure-free rate; disk = reads charged to the box's cgroup\n";
    s
}

#[allow(clippy::too_many_arguments)]
fn one_server(
    a: &CompareArgs,
    kind: ServerKind,
    root: &Path,
    addr: SocketAddr,
    sdir: &Path,
    spec: Option<BoxSpec>,
    catalog: &vodlab_workload::construct::Catalog,
    cfg: vodlab_lab::SearchConfig,
) -> anyhow::Result<(Search, Option<Stop>)> {
    let setup = ServerSetup {
        kind,
        root: root.to_path_buf(),
        addr,
        workdir: sdir.join("server"),
        vodlab: std::env::current_exe()?,
        workers: a
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        vodlab_args: a.serve_args.clone(),
    };
    let mut cmd = servers::command(&setup)?;
    vodlab_fileset::cool(root, catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    if let Some(b) = &b {
        b.command(&mut cmd);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", kind.name()))?;
    struct Stop<'a>(&'a mut std::process::Child);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            servers::stop(self.0, Duration::from_secs(10));
        }
    }
    let guard = Stop(&mut child);
    servers::wait_listening(&setup, guard.0, Duration::from_secs(15))?;
    let target = format!("http://{addr}");
    let mut runner = capacity::runner(&a.workload, &target, false, &a.search, sdir)?;
    let mut search = Search::new(cfg)?;
    let dev = vodlab_lab::Dev::of_path(root).ok();
    let started = unix_now();
    let before = std::cell::Cell::new((None, None));
    let mut printer = Printer::new(&format!("  {:<15}", kind.name()), &a.search);
    let res: anyhow::Result<Answer> = {
        let child_ref = &mut *guard.0;
        runner.run_search(
            &mut search,
            &mut printer,
            || {
                if let Some(st) = child_ref.try_wait()? {
                    bail!(
                        "{} exited ({st}); see {}",
                        kind.name(),
                        setup.workdir.display()
                    );
                }
                vodlab_fileset::cool(root, catalog)?;
                before.set((box_usage(&b)?, dev.and_then(|d| d.stat().ok())));
                Ok(())
            },
            |m, o| {
                let (u0, d0) = before.get();
                let device = match (dev.and_then(|d| d.stat().ok()), d0) {
                    (Some(x), Some(y)) => Some(x.since(&y)),
                    _ => None,
                };
                let usage = u0.zip(box_usage(&b)?);
                add_box_figures(&mut o.extra, m.results.duration_s, device, usage);
                Ok(())
            },
        )
    };
    drop(guard);
    let stop = runner.stop_of(&res.as_ref().map_err(|e| format!("{e:#}")));
    runner.write_capacity(&search, stop.as_ref(), Some(kind.name().into()), started)?;
    runner.finish();
    if let Some(mut b) = b {
        b.teardown()?;
    }
    Ok((search, stop))
}
