//! `vodlab compare`: one workload, several servers, each in the same box and
//! from a cold cache; a capacity search per server plus the sequential-read
//! bound, and the thesis's comparison table (docs/experiments.md). A row is
//! a server or a configuration of `vodlab serve` (`vodlab-asap:fixed:2M`),
//! and every server listens for the comparison's `--protocol`.

mod procs;
mod rows;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use vodlab_lab::compare::{add_box_figures, EmulatedDisk, COMPARE_FORMAT, COMPARE_VERSION};
use vodlab_lab::hwbox::{BoxSpec, HwBox};
use vodlab_lab::runner::unix_now;
use vodlab_lab::servers::{ServerSetup, ServerSpec};
use vodlab_lab::{
    Answer, CompareFile, Figures, ProfileInfo, Search, SearchOutcome, SeqRead, ServerRow, Stop,
};

use crate::boxcmd::{describe, DiskArgs, DiskDaemon, DiskSpec, HwArgs};
use crate::capacity::{self, Printer, SearchArgs};

/// Arguments of `vodlab compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A `vodlab gen` workload directory.
    pub workload: PathBuf,
    /// Its file set (`vodlab fileset create`), which every server serves.
    /// Not needed with --disk (the emulated drive presents the set).
    #[arg(long, value_name = "DIR", required_unless_present = "disk")]
    pub root: Option<PathBuf>,
    /// Rows to compare, comma-separated (repeatable): a server
    /// (vodlab-asap, vodlab-vanilla, nginx, apache2, lighttpd, or nghttpx in
    /// front of a `vodlab serve --io asap` backend) or a configuration of
    /// `vodlab serve --io asap`, `vodlab-asap:POLICY` (`nghttpx:POLICY` for
    /// its backend), with POLICY as `vodlab serve --prefetch-policy` takes
    /// it: `fixed:SIZE`
    /// (vodlab-asap:fixed:2M), `sqrt:SIZE,ref=KBPS` (square-root sizes,
    /// = fixed:SIZE,ref=KBPS), `auto[:KEY=VALUE,...]`, `first-grow:MAX`,
    /// `first-grow-sr:MAX`. Each row is its own server process and its own
    /// line of the table, named as given; a comma followed by KEY=VALUE
    /// continues the row before it. E.g. --servers
    /// vodlab-asap:fixed:2M,vodlab-asap:fixed:4M,vodlab-asap:auto,vodlab-vanilla,nginx
    #[arg(
        long,
        value_name = "ROW,...",
        default_value = "vodlab-asap,vodlab-vanilla,nginx,apache2,lighttpd"
    )]
    pub servers: Vec<String>,
    #[command(flatten)]
    pub hw: HwArgs,
    /// Emulated drive: every server reads the file set from a fresh
    /// `vodlab disk mount` before every run (cold drive, cold page cache);
    /// the disk figures are the drive model's.
    #[command(flatten)]
    pub disk: DiskArgs,
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
    /// Extra argument for every `vodlab serve` row (repeatable), e.g.
    /// --serve-arg=--helpers=2 (a row's policy goes in the row instead).
    #[arg(long = "serve-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub serve_args: Vec<String>,
    /// Skip the sequential-read bound (`vodlab fileset seqread` in the box).
    #[arg(long)]
    pub no_seqread: bool,
    /// Output directory: compare.json, summary.txt, one capacity directory per server.
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
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
    root: &Path,
    spec: Option<BoxSpec>,
    catalog: &vodlab_workload::construct::Catalog,
    out: &Path,
) -> anyhow::Result<SeqRead> {
    vodlab_fileset::cool(root, catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    let dev = vodlab_lab::Dev::of_path(root).ok();
    let d0 = dev.and_then(|d| d.stat().ok());
    let u0 = box_usage(&b)?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["fileset", "seqread"])
        .arg(&a.workload)
        .arg("--root")
        .arg(root)
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
    let specs = rows::parse(&a)?;
    check_row_rules(&a.search.fail_on, &specs)?;
    let (_, catalog) = crate::fileset::load(&a.workload)?;
    let disk = a.disk.spec(Some(&a.workload), a.search.time_compression)?;
    anyhow::ensure!(
        disk.is_some() || a.search.time_compression == 1.0,
        "--time-compression needs --disk (the io.max throttle's limits are not compressed)"
    );
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/compare-{}", unix_now() as u64)));
    std::fs::create_dir_all(&out)?;
    // with --disk: one mount point for every fresh mount, reachable by
    // servers that drop privileges
    let mnt_dir;
    let root = match (&disk, &a.root) {
        (Some(_), Some(_)) => {
            bail!("--root and --disk: give one (the emulated drive presents the file set)")
        }
        (Some(d), None) => {
            let p = vodlab_disk::Profile::resolve(&d.profile)?;
            eprintln!(
                "vodlab compare: emulated drive {} ({})",
                p.name, p.description
            );
            mnt_dir = tempfile::Builder::new()
                .prefix("vodlab-compare-")
                .tempdir()?;
            std::fs::set_permissions(mnt_dir.path(), std::fs::Permissions::from_mode(0o755))?;
            let m = mnt_dir.path().join("mnt");
            std::fs::create_dir(&m)?;
            m
        }
        (None, Some(r)) => {
            let v = vodlab_fileset::verify(r, &catalog, Some(8), 1, &mut |_, _| {}).with_context(
                || {
                    format!(
                        "{} is not this workload's file set (run `vodlab fileset create`)",
                        r.display()
                    )
                },
            )?;
            anyhow::ensure!(
                v.damaged.is_empty(),
                "{}: {} damaged file(s) in a sample of 8; run `vodlab fileset verify`",
                r.display(),
                v.damaged.len()
            );
            std::fs::canonicalize(r)?
        }
        (None, None) => bail!("give --root DIR (the file set) or --disk PROFILE"),
    };
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
    // every server listens for the protocol (TLS with this run's certificates)
    let proto = rows::Proto::new(&a, addr, &out)?;
    let started = unix_now();
    // an earlier compare of this workload in the same directory: keep its rows
    // (and its sequential bound) for the servers not run now
    let prior_path = out.join("compare.json");
    let prior: Option<CompareFile> = if prior_path.exists() {
        match CompareFile::read(&prior_path) {
            Ok(f)
                if f.workload == a.workload.display().to_string()
                    && f.protocol.as_deref().unwrap_or("h1") == proto.protocol.name() =>
            {
                Some(f)
            }
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
        let sspec = spec(&format!("vodlab-compare-{}-seqread", std::process::id()))?;
        let v = match &disk {
            Some(d) => seqread_disk(&a, d, &root, sspec, &out)?,
            None => seqread(&a, &root, sspec, &catalog, &out)?,
        };
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
        disk: match &disk {
            Some(d) => Some(EmulatedDisk {
                profile: d.profile.clone(),
                description: vodlab_disk::Profile::resolve(&d.profile)?.description,
                time_compression: d.time_compression,
                mount_args: d.extra.clone(),
            }),
            None => None,
        },
        criterion: cfg.criterion.to_string(),
        window_s: a.search.window,
        pacing: !a.search.no_pacing,
        shaping: !a.search.no_shaping,
        protocol: Some(proto.protocol.name().into()),
        seqread: seq,
        servers: Vec::new(),
        started_at_unix_s: started,
        duration_s: None,
    };
    for (i, row) in specs.iter().enumerate() {
        let name = row.label.as_str();
        let kind = row.kind;
        let dir = row.dir_name();
        let policy = rows::canonical_policy(row);
        let serve_args = if kind.is_vodlab() || kind.runs_asap() {
            a.serve_args.clone()
        } else {
            Vec::new()
        };
        if let Some(why) = kind.unsupported(proto.protocol) {
            eprintln!("vodlab compare: {name}: skipped: {why}");
            let r = rows::skipped(row, why);
            match rows.iter_mut().find(|x| x.server == name) {
                Some(x) => *x = r,
                None => rows.push(r),
            }
            continue;
        }
        let sdir = out.join(&dir);
        std::fs::create_dir_all(&sdir)?;
        eprintln!("vodlab compare: {name} over {}", proto.protocol);
        let bspec = spec(&format!("vodlab-compare-{}-{i}-{dir}", std::process::id()))?;
        let r = match &disk {
            Some(d) => one_server_disk(&a, row, &proto, d, &root, addr, &sdir, bspec, cfg.clone()),
            None => one_server(
                &a,
                row,
                &proto,
                &root,
                addr,
                &sdir,
                bspec,
                &catalog,
                cfg.clone(),
            ),
        };
        let row = match r {
            Ok((search, stop)) => ServerRow {
                server: name.into(),
                kind: Some(kind.name().into()),
                prefetch_policy: policy,
                serve_args,
                answer: search.answer(),
                outcome: SearchOutcome::of(&search, stop.as_ref()),
                at_capacity: search.best_point().map(Figures::of),
                at_overload: search.lowest_failed_point().map(Figures::of),
                error: stop.map(|(Stop::Interrupted(m) | Stop::Error(m))| m),
                capacity_json: format!("{dir}/capacity.json"),
            },
            Err(e) => {
                eprintln!("vodlab compare: {name}: {e:#}");
                ServerRow {
                    server: name.into(),
                    kind: Some(kind.name().into()),
                    prefetch_policy: policy,
                    serve_args,
                    answer: Answer::default(),
                    outcome: SearchOutcome::Error {
                        message: format!("{e:#}"),
                    },
                    at_capacity: None,
                    at_overload: None,
                    error: Some(format!("{e:#}")),
                    capacity_json: format!("{dir}/capacity.json"),
                }
            }
        };
        match rows.iter_mut().find(|r| r.server == name) {
            Some(r) => *r = row,
            None => rows.push(row),
        }
        // the table in the servers' usual order, configurations as given
        rows::sort(&mut rows, &specs);
        file.servers = rows.clone();
        file.write(&out.join("compare.json"))?;
    }
    rows::sort(&mut rows, &specs);
    file.servers = rows.clone();
    let mut text = summary(&file);
    match vodlab_lab::capacity::bitrate_mix(&a.workload) {
        Ok(mix) if !mix.is_empty() => {
            text += &format!("{}\n", vodlab_lab::capacity::mix_words(&mix))
        }
        Ok(_) => {}
        Err(e) => eprintln!("vodlab compare: no bit-rate mix: {e}"),
    }
    file.complete = true;
    file.duration_s = Some(unix_now() - started);
    file.write(&out.join("compare.json"))?;
    std::fs::write(out.join("summary.txt"), &text)?;
    print!("{text}");
    println!("  results: {}", out.join("compare.json").display());
    // --fail-on over each server's row that ran
    let mut breaches = Vec::new();
    for row in file.servers.iter().filter(|r| {
        !matches!(r.outcome, vodlab_lab::SearchOutcome::Skipped { .. }) && r.error.is_none()
    }) {
        let v = serde_json::to_value(row)?;
        for mut b in vodlab_client::out::thresholds::evaluate_all(&a.search.fail_on, &v)? {
            b.rule = format!("{} (server {})", b.rule, row.server);
            breaches.push(b);
        }
    }
    crate::exit::announce("compare", &breaches);
    Ok(crate::exit::of_breaches(&breaches))
}

/// Checks `--fail-on` rules before anything runs: a rule's first name must
/// be a field of a server's row of compare.json (`answer`, `at_capacity`,
/// …); the rest of its path is checked against each row after the runs,
/// since a row's figures depend on what its runs measured.
fn check_row_rules(
    rules: &[vodlab_client::out::thresholds::Rule],
    specs: &[vodlab_lab::servers::ServerSpec],
) -> anyhow::Result<()> {
    let Some(spec) = specs.first() else {
        return Ok(());
    };
    let row = serde_json::to_value(rows::skipped(spec, String::new()))?;
    // the optional sections too, absent from a skipped row
    let mut fields = vec!["at_capacity", "at_overload", "error"];
    fields.extend(
        row.as_object()
            .into_iter()
            .flat_map(|o| o.keys().map(String::as_str)),
    );
    vodlab_client::out::thresholds::check_before(rules, &row, &fields)?;
    Ok(())
}

fn summary(file: &CompareFile) -> String {
    let nginx = file.server("nginx").and_then(|r| r.answer.capacity);
    let bound = file.seqread.as_ref().map(|s| s.mb_s);
    let mut s = String::new();
    let w = file
        .servers
        .iter()
        .map(|r| r.server.len())
        .max()
        .unwrap_or(0)
        .max(15);
    s += &format!(
        "{:<w$} {:>12} {:>8} {:>8} {:>6} {:>7} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
        "server",
        "sessions/s",
        "x nginx",
        "viewers",
        "peak",
        "Gbit/s",
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
            (SearchOutcome::Skipped { reason }, _) => format!("  (skipped: {reason})"),
            (SearchOutcome::ClientLimited { rate, .. }, _) => {
                format!("  (load generator INVALID at {rate:.3}/s: a lower bound)")
            }
            (_, Some(e)) => format!("  (error: {e})"),
            _ => String::new(),
        };
        s += &format!(
            "{:<w$} {:>12} {:>8} {:>8} {:>6} {:>7} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}{}\n",
            r.server,
            cap,
            f(r.answer.capacity.zip(nginx).map(|(a, b)| a / b), 2),
            f(c.mean_active_sessions, 0),
            f(c.peak_active_sessions.map(|p| p as f64), 0),
            f(c.delivered_gbit_s, 2),
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
    if let Some(p) = &file.protocol {
        s += &format!("protocol: {p} (every server listened for it)\n");
    }
    if let Some(b) = bound {
        s += &format!(
            "sequential-read bound (vodlab fileset seqread, cold, same box): {b:.1} MB/s\n"
        );
    }
    match &file.disk {
        Some(d) => s += &format!(
            "figures at each server's highest failure-free rate (viewers: concurrent sessions, mean over the measured window; peak: most at once); disk = the emulated drive {} (model time, k = {}): its MB/s, mean read and service time per read, each run from a fresh mount\n",
            d.profile, d.time_compression
        ),
        None => s += "figures at each server's highest failure-free rate (viewers: concurrent sessions, mean over the measured window; peak: most at once); disk = reads charged to the box's cgroup\n",
    }
    s
}

#[allow(clippy::too_many_arguments)]
fn one_server(
    a: &CompareArgs,
    row: &ServerSpec,
    proto: &rows::Proto,
    root: &Path,
    addr: SocketAddr,
    sdir: &Path,
    spec: Option<BoxSpec>,
    catalog: &vodlab_workload::construct::Catalog,
    cfg: vodlab_lab::SearchConfig,
) -> anyhow::Result<(Search, Option<Stop>)> {
    let kind = row.kind;
    let setup = ServerSetup {
        kind,
        root: root.to_path_buf(),
        addr,
        workdir: sdir.join("server"),
        vodlab: std::env::current_exe()?,
        workers: a
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        vodlab_args: row
            .serve_args()
            .into_iter()
            .chain(a.serve_args.iter().cloned())
            .collect(),
        protocol: proto.protocol,
        tls: proto.tls.clone(),
        backend: rows::backend_addr(kind)?,
    };
    vodlab_fileset::cool(root, catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    let procs = RefCell::new(procs::Procs::start(&setup, b.as_ref(), &row.label)?);
    let mut runner = capacity::runner(&a.workload, &proto.target, false, &proto.search, sdir)?;
    if let Some(backend) = setup.backend {
        // a proxy's statistics are its vodlab serve backend's
        runner.stats_from(backend);
    }
    let mut search = Search::new(cfg)?;
    let dev = vodlab_lab::Dev::of_path(root).ok();
    let started = unix_now();
    let before = std::cell::Cell::new((None, None));
    let mut printer = Printer::new(&format!("  {:<15} ", row.label), &a.search);
    let res: anyhow::Result<Answer> = {
        runner.run_search(
            &mut search,
            &mut printer,
            || {
                procs.borrow_mut().check()?;
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
                vodlab_lab::capacity::add_viewer_figures(&mut o.extra, &m.results);
                Ok(())
            },
        )
    };
    drop(procs);
    let stop = runner.stop_of(&res.as_ref().map_err(|e| format!("{e:#}")));
    runner.write_capacity(&search, stop.as_ref(), Some(row.label.clone()), started)?;
    runner.finish();
    if let Some(mut b) = b {
        b.teardown()?;
    }
    Ok((search, stop))
}

/// The sequential-read bound on the emulated drive: `vodlab fileset seqread`
/// in the box through a fresh mount (cold drive, cold page cache); MB/s is
/// the drive's bytes over the command's time (model time: divided by k).
fn seqread_disk(
    a: &CompareArgs,
    d: &DiskSpec,
    mnt: &Path,
    spec: Option<BoxSpec>,
    out: &Path,
) -> anyhow::Result<SeqRead> {
    let b = spec.map(HwBox::create).transpose()?;
    let daemon = DiskDaemon::start(d, Some(mnt))?;
    let mut cmd = Command::new(std::env::current_exe()?);
    // --warm-cache: a fresh mount is cold, and evicting through it would
    // open every file (metadata reads the bound should not pay)
    cmd.args(["fileset", "seqread"])
        .arg(&a.workload)
        .arg("--root")
        .arg(mnt)
        .arg("--warm-cache");
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(b) = &b {
        b.command(&mut cmd);
    }
    let t = Instant::now();
    let o = cmd.output().context("running vodlab fileset seqread")?;
    let secs = t.elapsed().as_secs_f64();
    drop(b);
    let r = daemon.stop()?;
    anyhow::ensure!(
        o.status.success(),
        "vodlab fileset seqread through the emulated drive failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let printed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    std::fs::write(out.join("seqread.txt"), &printed)?;
    std::fs::write(
        out.join("seqread-disk.json"),
        serde_json::to_vec_pretty(&r)?,
    )?;
    let model_s = secs * d.time_compression;
    Ok(SeqRead {
        bytes_read: r.disk.bytes,
        seconds: model_s,
        mb_s: r.disk.bytes as f64 / 1e6 / model_s,
        output: printed,
    })
}

/// The disk figures of one run from the emulated drive's statistics over
/// it (the mount was fresh before the run): MB/s in model time, mean read,
/// mean service time per read, drive bytes per delivered byte.
fn add_disk_figures(e: &mut vodlab_lab::RunExtra, secs: f64, k: f64, r: &vodlab_diskfs::Report) {
    let model_s = (secs * k).max(1e-3);
    e.disk_bytes = Some(r.disk.bytes);
    e.disk_mb_s = Some(r.disk.bytes as f64 / 1e6 / model_s);
    e.device_mb_s = None;
    e.mean_read_kib = (r.disk.reads > 0).then(|| r.derived.mean_read_bytes / 1024.0);
    e.device_ms_per_read = (r.disk.reads > 0).then_some(r.derived.mean_service_ms);
    e.cache_miss_pct = e
        .delivered_bytes
        .filter(|d| *d > 0)
        .map(|d| 100.0 * r.disk.bytes as f64 / d as f64);
}

/// A server and its emulated drive, restarted before every run.
struct Live {
    server: Option<procs::Procs>,
    daemon: Option<DiskDaemon>,
}

impl Live {
    fn stop(&mut self) {
        if let Some(mut p) = self.server.take() {
            p.stop();
        }
        // the server's processes are gone: the unmount drops its pages
        self.daemon.take();
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One server's search on the emulated drive: before every run the server
/// is stopped, the drive unmounted (its page cache with it), mounted afresh
/// (cold model: head at its seed position, empty drive cache) and the
/// server started again in the same box.
#[allow(clippy::too_many_arguments)]
fn one_server_disk(
    a: &CompareArgs,
    row: &ServerSpec,
    proto: &rows::Proto,
    d: &DiskSpec,
    mnt: &Path,
    addr: SocketAddr,
    sdir: &Path,
    spec: Option<BoxSpec>,
    cfg: vodlab_lab::SearchConfig,
) -> anyhow::Result<(Search, Option<Stop>)> {
    let kind = row.kind;
    let setup = ServerSetup {
        kind,
        root: mnt.to_path_buf(),
        addr,
        workdir: sdir.join("server"),
        vodlab: std::env::current_exe()?,
        workers: a
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        // vodlab serve gets the experiment's k too (the peers have no
        // control intervals to compress)
        vodlab_args: row
            .serve_args()
            .into_iter()
            .chain(a.serve_args.iter().cloned())
            .chain(["--time-compression".into(), d.time_compression.to_string()])
            .collect(),
        protocol: proto.protocol,
        tls: proto.tls.clone(),
        backend: rows::backend_addr(kind)?,
    };
    let b = spec.map(HwBox::create).transpose()?;
    let live = RefCell::new(Live {
        server: None,
        daemon: None,
    });
    let restart = || -> anyhow::Result<()> {
        let mut l = live.borrow_mut();
        l.stop();
        l.daemon = Some(DiskDaemon::start(d, Some(mnt))?);
        l.server = Some(procs::Procs::start(&setup, b.as_ref(), &row.label)?);
        Ok(())
    };
    // up once before the runner asks whether the target is a vodlab serve
    restart()?;
    let mut runner = capacity::runner(&a.workload, &proto.target, false, &proto.search, sdir)?;
    if let Some(backend) = setup.backend {
        // a proxy's statistics are its vodlab serve backend's
        runner.stats_from(backend);
    }
    let mut search = Search::new(cfg)?;
    let started = unix_now();
    let before = std::cell::Cell::new(None);
    let mut printer = Printer::new(&format!("  {:<15} ", row.label), &a.search);
    let res: anyhow::Result<Answer> = runner.run_search(
        &mut search,
        &mut printer,
        || {
            restart()?;
            before.set(box_usage(&b)?);
            Ok(())
        },
        |m, o| {
            let mut l = live.borrow_mut();
            if let Some(p) = l.server.as_mut() {
                p.check()?;
            }
            let daemon = l.daemon.as_mut().context("no emulated drive")?;
            daemon.check()?;
            let r = daemon.report()?;
            let secs = m.results.duration_s;
            let usage = before.get().zip(box_usage(&b)?);
            add_box_figures(&mut o.extra, secs, None, usage);
            add_disk_figures(&mut o.extra, secs, d.time_compression, &r);
            vodlab_lab::capacity::add_viewer_figures(&mut o.extra, &m.results);
            if let Some(rel) = &o.extra.results {
                std::fs::write(
                    sdir.join(rel).join("disk.json"),
                    serde_json::to_vec_pretty(&r)?,
                )?;
            }
            Ok(())
        },
    );
    live.borrow_mut().stop();
    let stop = runner.stop_of(&res.as_ref().map_err(|e| format!("{e:#}")));
    runner.write_capacity(&search, stop.as_ref(), Some(row.label.clone()), started)?;
    runner.finish();
    if let Some(mut b) = b {
        b.teardown()?;
    }
    Ok((search, stop))
}
