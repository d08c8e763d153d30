//! `vodlab compare`'s work: the settings checked, the file set (or the
//! emulated drive) made ready, the sequential-read bound, and one capacity
//! search per row with its server (and its drive) restarted as each row's
//! method needs; compare.json written after every row.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use vodlab_client::out::thresholds::{Breach, Rule};
use vodlab_workload::construct::Catalog;

use super::args::{CompareArgs, MAX_WORKERS};
use super::error::CompareError;
use super::procs::Procs;
use super::rows::{self, Proto};
use super::summary::summary;
use super::{
    add_box_figures, CompareFile, EmulatedDisk, Figures, ProfileInfo, SeqRead, ServerRow,
    COMPARE_FORMAT, COMPARE_VERSION,
};
use crate::capacity::{SearchOutcome, Stop};
use crate::capacity_run::runner;
use crate::diskd::{DiskDaemon, DiskSpec};
use crate::hwbox::{describe, BoxError, BoxSpec, HwBox, Usage};
use crate::point::error_chain;
use crate::point::Interrupter;
use crate::runner::{unix_now, PointRunner, SearchObserver};
use crate::search::{Answer, RunExtra, Search, SearchConfig};
use crate::servers::{ServerSetup, ServerSpec};
use crate::settings::within_int;

/// What `vodlab compare` tells while it runs: the search's notices and
/// runs, and which row's search runs now.
pub trait CompareObserver: SearchObserver {
    /// The search of the row labelled `label` begins.
    fn server(&mut self, _label: &str) {}
}

/// A comparison whose settings are checked, nothing run yet.
pub struct Compare {
    a: CompareArgs,
    cfg: SearchConfig,
    specs: Vec<ServerSpec>,
}

/// A finished comparison.
#[derive(Debug)]
pub struct CompareRun {
    /// compare.json as written.
    pub file: CompareFile,
    /// The table (summary.txt).
    pub text: String,
    /// The output directory.
    pub out: PathBuf,
}

/// The context a comparison runs in (from the binary).
struct Env<'a> {
    catalog: &'a Catalog,
    exe: &'a Path,
    interrupter: &'a dyn Fn() -> Interrupter,
}

impl Compare {
    /// Checks the settings: the search's, `--workers`, the rows of
    /// `--servers` and the `--fail-on` rules against a row's fields.
    pub fn check(a: CompareArgs) -> Result<Self, CompareError> {
        let cfg = a.search.config()?;
        if let Some(w) = a.workers {
            within_int("--workers", w as u64, 1, MAX_WORKERS)?;
        }
        let specs = rows::parse(&a)?;
        check_row_rules(&a.search.fail_on, &specs)?;
        Ok(Self { a, cfg, specs })
    }

    /// The settings.
    pub fn args(&self) -> &CompareArgs {
        &self.a
    }

    /// Runs the comparison of the workload whose catalog is `catalog`;
    /// `exe` is the vodlab binary (servers, `fileset seqread`, `disk
    /// mount`, client processes), `interrupter` gives what stops the
    /// searches (asked for when the first search is set up).
    pub fn run(
        self,
        catalog: &Catalog,
        exe: &Path,
        interrupter: &dyn Fn() -> Interrupter,
        obs: &mut impl CompareObserver,
    ) -> Result<CompareRun, CompareError> {
        let Self { a, cfg, specs } = self;
        let env = Env {
            catalog,
            exe,
            interrupter,
        };
        let disk = a.disk.spec(Some(&a.workload), a.search.time_compression)?;
        if disk.is_none() && a.search.time_compression != 1.0 {
            return Err(CompareError::Refused(
                "--time-compression needs --disk (the io.max throttle's limits are not compressed)"
                    .into(),
            ));
        }
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
                return Err(CompareError::Refused(
                    "--root and --disk: give one (the emulated drive presents the file set)".into(),
                ))
            }
            (Some(d), None) => {
                let p = vodlab_disk::Profile::resolve(&d.profile)?;
                obs.note(&format!(
                    "vodlab compare: emulated drive {} ({})",
                    p.name, p.description
                ));
                if let Some(w) =
                    crate::settings::time_compression_warning(a.search.time_compression)
                {
                    obs.note(&w);
                }
                mnt_dir = tempfile::Builder::new()
                    .prefix("vodlab-compare-")
                    .tempdir()?;
                std::fs::set_permissions(mnt_dir.path(), std::fs::Permissions::from_mode(0o755))?;
                let m = mnt_dir.path().join("mnt");
                std::fs::create_dir(&m)?;
                m
            }
            (None, Some(r)) => {
                let v = vodlab_fileset::verify(r, catalog, Some(8), 1, &mut |_, _| {}).map_err(
                    |source| CompareError::NotTheFileSet {
                        root: r.clone(),
                        source,
                    },
                )?;
                if !v.damaged.is_empty() {
                    return Err(CompareError::Damaged {
                        root: r.clone(),
                        damaged: v.damaged.len(),
                    });
                }
                std::fs::canonicalize(r)?
            }
            (None, None) => {
                return Err(CompareError::Refused(
                    "give --root DIR (the file set) or --disk PROFILE".into(),
                ))
            }
        };
        let spec = |name: &str| -> Result<Option<BoxSpec>, CompareError> {
            if a.no_box {
                Ok(None)
            } else {
                Ok(Some(a.hw.spec(name, &root)?))
            }
        };
        // fail early (not after an hour of runs) if the box cannot be made
        if let Some(s) = spec(&format!("vodlab-compare-{}-check", std::process::id()))? {
            let b = HwBox::create(s)?;
            obs.note(&format!("vodlab compare: box {}", describe(&b)));
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], a.port));
        // every server listens for the protocol (TLS with this run's certificates)
        let proto = Proto::new(&a, addr, &out)?;
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
                    obs.note(&format!(
                        "vodlab compare: not keeping the earlier rows: {e}"
                    ));
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
            obs.note(&format!(
                "vodlab compare: keeping the earlier rows of {} in {}",
                rows.iter()
                    .map(|r| r.server.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                out.join("compare.json").display()
            ));
        }
        let seq = if a.no_seqread {
            prior.as_ref().and_then(|f| f.seqread.clone())
        } else {
            obs.note(
                "vodlab compare: sequential-read bound (vodlab fileset seqread, cold, in the box) ...",
            );
            let sspec = spec(&format!("vodlab-compare-{}-seqread", std::process::id()))?;
            let v = match &disk {
                Some(d) => seqread_disk(&a, &env, d, &root, sspec, &out)?,
                None => seqread(&a, &env, &root, sspec, &out)?,
            };
            obs.note(&format!(
                "vodlab compare: sequential bound {:.1} MB/s",
                v.mb_s
            ));
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
        // a row that answers no Range (ngtcp2) serves only a workload of
        // whole files: its ranged requests are counted once, if it is run
        let ranged = if specs
            .iter()
            .any(|r| r.kind.whole_files_only() && r.kind.unsupported(proto.protocol).is_none())
        {
            vodlab_workload::script::export::load(&a.workload)?
                .iter()
                .map(|(_, s)| vodlab_workload::script::export::Summary::of(s).ranged)
                .sum()
        } else {
            0
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
            let unsupported = kind.unsupported(proto.protocol).or_else(|| {
                (kind.whole_files_only() && ranged > 0).then(|| {
                    format!(
                        "{} answers no Range request, and {ranged} of this workload's requests \
                         are byte ranges (a chunked workload of whole files suits it, e.g. \
                         the youtube-2011 preset)",
                        kind.name()
                    )
                })
            });
            if let Some(why) = unsupported {
                obs.note(&format!("vodlab compare: {name}: skipped: {why}"));
                let r = rows::skipped(row, why);
                match rows.iter_mut().find(|x| x.server == name) {
                    Some(x) => *x = r,
                    None => rows.push(r),
                }
                continue;
            }
            let sdir = out.join(&dir);
            std::fs::create_dir_all(&sdir)?;
            obs.note(&format!("vodlab compare: {name} over {}", proto.protocol));
            let bspec = spec(&format!("vodlab-compare-{}-{i}-{dir}", std::process::id()))?;
            obs.server(&row.label);
            let r = match &disk {
                Some(d) => one_server_disk(
                    &a,
                    &env,
                    row,
                    &proto,
                    d,
                    &root,
                    addr,
                    &sdir,
                    bspec,
                    cfg.clone(),
                    obs,
                ),
                None => one_server(
                    &a,
                    &env,
                    row,
                    &proto,
                    &root,
                    addr,
                    &sdir,
                    bspec,
                    cfg.clone(),
                    obs,
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
                    let e = error_chain(&e);
                    obs.note(&format!("vodlab compare: {name}: {e}"));
                    ServerRow {
                        server: name.into(),
                        kind: Some(kind.name().into()),
                        prefetch_policy: policy,
                        serve_args,
                        answer: Answer::default(),
                        outcome: SearchOutcome::Error { message: e.clone() },
                        at_capacity: None,
                        at_overload: None,
                        error: Some(e),
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
        match crate::capacity::bitrate_mix(&a.workload) {
            Ok(mix) if !mix.is_empty() => {
                text += &format!("{}\n", crate::capacity::mix_words(&mix))
            }
            Ok(_) => {}
            Err(e) => obs.note(&format!("vodlab compare: no bit-rate mix: {e}")),
        }
        file.complete = true;
        file.duration_s = Some(unix_now() - started);
        file.write(&out.join("compare.json"))?;
        crate::files::write_text(&out.join("summary.txt"), &text)?;
        Ok(CompareRun { file, text, out })
    }
}

/// `--fail-on` over each server's row that ran (a breach names its
/// server).
pub fn breaches(file: &CompareFile, rules: &[Rule]) -> Result<Vec<Breach>, CompareError> {
    let mut breaches = Vec::new();
    for row in file
        .servers
        .iter()
        .filter(|r| !matches!(r.outcome, SearchOutcome::Skipped { .. }) && r.error.is_none())
    {
        let v = serde_json::to_value(row)?;
        for mut b in vodlab_client::out::thresholds::evaluate_all(rules, &v)? {
            b.rule = format!("{} (server {})", b.rule, row.server);
            breaches.push(b);
        }
    }
    Ok(breaches)
}

/// Checks `--fail-on` rules before anything runs: a rule's first name must
/// be a field of a server's row of compare.json (`answer`, `at_capacity`,
/// …); the rest of its path is checked against each row after the runs,
/// since a row's figures depend on what its runs measured.
fn check_row_rules(rules: &[Rule], specs: &[ServerSpec]) -> Result<(), CompareError> {
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

fn box_usage(b: &Option<HwBox>) -> Result<Option<Usage>, BoxError> {
    b.as_ref().map(HwBox::usage).transpose()
}

fn seqread(
    a: &CompareArgs,
    env: &Env,
    root: &Path,
    spec: Option<BoxSpec>,
    out: &Path,
) -> Result<SeqRead, CompareError> {
    vodlab_fileset::cool(root, env.catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    let dev = crate::hwbox::Dev::of_path(root).ok();
    let d0 = dev.and_then(|d| d.stat().ok());
    let u0 = box_usage(&b)?;
    let (o, secs) = timed_seqread(a, env, root, b.as_ref(), Stdio::null())?;
    if !o.status.success() {
        return Err(CompareError::SeqreadFailed(format!(
            "vodlab fileset seqread failed: {}",
            String::from_utf8_lossy(&o.stdout)
        )));
    }
    let printed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    crate::files::write_text(&out.join("seqread.txt"), &printed)?;
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

/// The server of `row` as `kind` runs it: its root, address, working
/// directory and arguments.
#[allow(clippy::too_many_arguments)]
fn setup(
    a: &CompareArgs,
    env: &Env,
    row: &ServerSpec,
    proto: &Proto,
    root: &Path,
    addr: SocketAddr,
    sdir: &Path,
    extra: Vec<String>,
) -> Result<ServerSetup, CompareError> {
    Ok(ServerSetup {
        kind: row.kind,
        root: root.to_path_buf(),
        addr,
        workdir: sdir.join("server"),
        vodlab: env.exe.to_path_buf(),
        workers: a
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        vodlab_args: row
            .serve_args()
            .into_iter()
            .chain(a.serve_args.iter().cloned())
            .chain(extra)
            .collect(),
        protocol: proto.protocol,
        tls: proto.tls.clone(),
        backend: rows::backend_addr(row.kind)?,
    })
}

#[allow(clippy::too_many_arguments)]
fn one_server(
    a: &CompareArgs,
    env: &Env,
    row: &ServerSpec,
    proto: &Proto,
    root: &Path,
    addr: SocketAddr,
    sdir: &Path,
    spec: Option<BoxSpec>,
    cfg: SearchConfig,
    obs: &mut impl SearchObserver,
) -> Result<(Search, Option<Stop>), CompareError> {
    let setup = setup(a, env, row, proto, root, addr, sdir, Vec::new())?;
    vodlab_fileset::cool(root, env.catalog)?;
    let b = spec.map(HwBox::create).transpose()?;
    let procs = RefCell::new(Procs::start(&setup, b.as_ref(), &row.label)?);
    let mut runner = row_runner(a, env, proto, sdir, setup.backend, obs)?;
    let mut search = Search::new(cfg)?;
    let dev = crate::hwbox::Dev::of_path(root).ok();
    let started = unix_now();
    let before = Cell::new((None, None));
    let res: Result<Answer, CompareError> = runner.run_search(
        &mut search,
        obs,
        || {
            procs.borrow_mut().check()?;
            vodlab_fileset::cool(root, env.catalog)?;
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
            crate::capacity::add_viewer_figures(&mut o.extra, &m.results);
            Ok(())
        },
    );
    drop(procs);
    finish_row(runner, search, res, row, started, b)
}

/// The sequential-read bound on the emulated drive: `vodlab fileset seqread`
/// in the box through a fresh mount (cold drive, cold page cache); MB/s is
/// the drive's bytes over the command's time (model time: divided by k).
fn seqread_disk(
    a: &CompareArgs,
    env: &Env,
    d: &DiskSpec,
    mnt: &Path,
    spec: Option<BoxSpec>,
    out: &Path,
) -> Result<SeqRead, CompareError> {
    let b = spec.map(HwBox::create).transpose()?;
    let daemon = DiskDaemon::start(d, Some(mnt), env.exe)?;
    // --warm-cache: a fresh mount is cold, and evicting through it would
    // open every file (metadata reads the bound should not pay)
    let (o, secs) = timed_seqread(a, env, mnt, b.as_ref(), Stdio::piped())?;
    drop(b);
    let r = daemon.stop()?;
    if !o.status.success() {
        return Err(CompareError::SeqreadFailed(format!(
            "vodlab fileset seqread through the emulated drive failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )));
    }
    let printed = String::from_utf8_lossy(&o.stdout).trim().to_string();
    crate::files::write_text(&out.join("seqread.txt"), &printed)?;
    crate::files::write_text(
        &out.join("seqread-disk.json"),
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
fn add_disk_figures(e: &mut RunExtra, secs: f64, k: f64, r: &vodlab_diskfs::Report) {
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
    e.drive_reply_late_pct = Some(100.0 * r.derived.reply_late_share);
}

/// A server and its emulated drive, restarted before every run.
struct Live {
    server: Option<Procs>,
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
    env: &Env,
    row: &ServerSpec,
    proto: &Proto,
    d: &DiskSpec,
    mnt: &Path,
    addr: SocketAddr,
    sdir: &Path,
    spec: Option<BoxSpec>,
    cfg: SearchConfig,
    obs: &mut impl SearchObserver,
) -> Result<(Search, Option<Stop>), CompareError> {
    // vodlab serve gets the experiment's k too (the peers have no
    // control intervals to compress)
    let k = vec!["--time-compression".into(), d.time_compression.to_string()];
    let setup = setup(a, env, row, proto, mnt, addr, sdir, k)?;
    let b = spec.map(HwBox::create).transpose()?;
    let live = RefCell::new(Live {
        server: None,
        daemon: None,
    });
    let restart = || -> Result<(), CompareError> {
        let mut l = live.borrow_mut();
        l.stop();
        l.daemon = Some(DiskDaemon::start(d, Some(mnt), env.exe)?);
        l.server = Some(Procs::start(&setup, b.as_ref(), &row.label)?);
        Ok(())
    };
    // up once before the runner asks whether the target is a vodlab serve
    restart()?;
    let mut runner = row_runner(a, env, proto, sdir, setup.backend, obs)?;
    let mut search = Search::new(cfg)?;
    let started = unix_now();
    let before = Cell::new(None);
    let res: Result<Answer, CompareError> = runner.run_search(
        &mut search,
        obs,
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
            let daemon = l.daemon.as_mut().ok_or(CompareError::NoDrive)?;
            daemon.check()?;
            let r = daemon.report()?;
            let secs = m.results.duration_s;
            let usage = before.get().zip(box_usage(&b)?);
            add_box_figures(&mut o.extra, secs, None, usage);
            add_disk_figures(&mut o.extra, secs, d.time_compression, &r);
            // a drive emulated late measured a slower drive than the profile
            if let Some(why) =
                super::drive_fell_behind(r.derived.reply_late_share, d.time_compression)
            {
                o.client_valid = false;
                o.client_invalid_reasons.push(why);
            }
            crate::capacity::add_viewer_figures(&mut o.extra, &m.results);
            if let Some(rel) = &o.extra.results {
                crate::files::write_text(
                    &sdir.join(rel).join("disk.json"),
                    serde_json::to_vec_pretty(&r)?,
                )?;
            }
            Ok(())
        },
    );
    live.borrow_mut().stop();
    finish_row(runner, search, res, row, started, b)
}

/// The point runner of one row's search, against the row's target; a
/// proxy's statistics are read from its `vodlab serve` backend.
fn row_runner(
    a: &CompareArgs,
    env: &Env,
    proto: &Proto,
    sdir: &Path,
    backend: Option<SocketAddr>,
    obs: &mut impl SearchObserver,
) -> Result<PointRunner, CompareError> {
    let mut runner = runner(
        &a.workload,
        &proto.target,
        false,
        &proto.search,
        sdir,
        env.exe,
        (env.interrupter)(),
        obs,
    )?;
    if let Some(backend) = backend {
        runner.stats_from(backend);
    }
    Ok(runner)
}

/// Ends one row's search: its capacity.json (with why it stopped, if it
/// stopped early) and the box torn down.
fn finish_row(
    runner: PointRunner,
    search: Search,
    res: Result<Answer, CompareError>,
    row: &ServerSpec,
    started: f64,
    b: Option<HwBox>,
) -> Result<(Search, Option<Stop>), CompareError> {
    let res = res.map_err(|e| error_chain(&e));
    let stop = runner.stop_of(&res);
    runner.write_capacity(&search, stop.as_ref(), Some(row.label.clone()), started)?;
    runner.finish();
    if let Some(mut b) = b {
        b.teardown()?;
    }
    Ok((search, stop))
}

/// Runs `vodlab fileset seqread --warm-cache` over `root` (in the box, if
/// any) and times it: its output and the seconds it took.
fn timed_seqread(
    a: &CompareArgs,
    env: &Env,
    root: &Path,
    b: Option<&HwBox>,
    stderr: Stdio,
) -> Result<(std::process::Output, f64), CompareError> {
    let mut cmd = Command::new(env.exe);
    cmd.args(["fileset", "seqread"])
        .arg(&a.workload)
        .arg("--root")
        .arg(root)
        .arg("--warm-cache");
    cmd.stdout(Stdio::piped()).stderr(stderr);
    if let Some(b) = b {
        b.command(&mut cmd);
    }
    let t = Instant::now();
    let o = cmd.output().map_err(CompareError::Seqread)?;
    Ok((o, t.elapsed().as_secs_f64()))
}
