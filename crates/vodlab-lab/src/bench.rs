//! `vodlab bench`'s work: the whole method in one command. Builds a small
//! workload, writes its file set to a temporary directory, starts the
//! embedded reference server, runs a short capacity search against it
//! (as root: compares servers on an emulated drive in a memory box), and
//! says the answer in one sentence.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use thiserror::Error;
use vodlab_server::{Config, Server};

use crate::capacity::{CapacityFile, SearchOutcome};
use crate::capacity_run::{mix_suffix, runner, Capacity, CapacityError};
use crate::compare::{CompareArgs, CompareFile};
use crate::diskd::DiskArgs;
use crate::hwbox::HwArgs;
use crate::point::Interrupter;
use crate::runner::{unix_now, SearchObserver};
use crate::settings::{within, within_int, SearchArgs, SearchDefaults, SettingsError};

/// Why a bench could not run.
#[derive(Debug, Error)]
pub enum BenchError {
    /// The settings are refused.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The settings are refused (the message says why).
    #[error("{0}")]
    Refused(String),
    /// A step (`vodlab gen`, `vodlab fileset create`) could not run.
    #[error("running {what}")]
    Step {
        /// The step.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A step failed.
    #[error("{what} failed ({status})")]
    StepFailed {
        /// The step.
        what: String,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// The embedded server did not start.
    #[error("starting the embedded vodlab serve")]
    Server(#[source] vodlab_server::StartError),
    /// The capacity search could not run.
    #[error(transparent)]
    Capacity(#[from] CapacityError),
    /// The emulated drive's profile is unknown.
    #[error(transparent)]
    Profile(#[from] vodlab_disk::ProfileError),
    /// A directory could not be made, or the runtime not built.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub use vodlab_server::settings::Io;

/// Arguments of `vodlab bench`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "cli", command(mut_args(bench_default)))]
pub struct BenchArgs {
    /// Workload preset (see `vodlab gen --list-presets`; as root on the
    /// emulated drive: youtube-2011-unchunked unless given).
    #[cfg_attr(feature = "cli", arg(long, default_value = "youtube-2011"))]
    pub preset: String,
    /// Scale of the preset's catalog (0.01 = 100 titles, about 1.3 GB of files).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.01))]
    pub scale: f64,
    /// Sessions in the workload (a point at rate R uses R x window of them;
    /// as root on the emulated drive: 360 unless given).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 10_000))]
    pub sessions: u32,
    /// Server I/O mode.
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = Io::Asap))]
    pub io: Io,
    /// Where the workload and file set go (default: a temporary directory,
    /// removed at the end).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR"))]
    pub work_dir: Option<PathBuf>,
    /// Output directory: capacity.json, points/, report.html.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: Option<PathBuf>,
    /// Replay with pacing and link emulation (realistic viewers, but every
    /// point then lasts as long as its sessions: raise --window and --drain).
    #[cfg_attr(feature = "cli", arg(long))]
    pub paced: bool,
    /// Run the cached smoke test (embedded server, file set in the page
    /// cache) even as root.
    #[cfg_attr(feature = "cli", arg(long))]
    pub cached: bool,
    /// As root: the emulated drive (`vodlab disk profiles`; default: the
    /// thesis's chapter-3 data disk).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "ch3-sas-10k", value_name = "PROFILE")
    )]
    pub disk: String,
    /// As root: the memory box, page cache included (default: the thesis's
    /// 8 GiB per 43.4 GB of requested titles, for the 200 titles that the
    /// default workload requests).
    #[cfg_attr(feature = "cli", arg(long, default_value = "490M", value_parser = crate::hwbox::parse_size, value_name = "SIZE"))]
    pub mem: u64,
    /// As root: the servers compared on the emulated drive.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_delimiter = ',', default_value = "vodlab-asap,nginx")
    )]
    pub servers: Vec<String>,
    /// Search settings (bench's defaults: unpaced sessions and [`CACHED`],
    /// or [`DISK`] as root).
    #[cfg_attr(feature = "cli", command(flatten))]
    pub search: SearchArgs,
}

/// bench's search settings where the flag is not given, without root (or
/// with `--cached`): unpaced sessions, short points.
pub const CACHED: SearchDefaults = SearchDefaults {
    window: 15.0,
    drain: 30.0,
    start: 4.0,
    precision: 0.15,
    ..SearchDefaults::CAPACITY
};

/// bench's search settings as root, on the emulated drive.
pub const DISK: SearchDefaults = SearchDefaults {
    window: 10.0,
    // unpaced sessions: a point passes when its backlog ends within the
    // drain, so a drain as long as the window makes the answer follow the
    // drive's throughput; with 30 s nginx's backlog of a 10 s window
    // finished at ASAP's rate (the same answer for both)
    drain: 10.0,
    max_points: 6,
    // client and servers share this machine's cores: a session start a few
    // tens of ms late does not change a disk-bound point, but at 10 ms one
    // late start in 40 made points INVALID here
    late_threshold_ms: 100.0,
    ..CACHED
};

/// `--help` of a search flag of bench whose default is bench's own: its
/// text and bench's two defaults (from [`CACHED`] and [`DISK`]) instead of
/// capacity's; every other flag as it is.
#[cfg(feature = "cli")]
fn bench_default(arg: clap::Arg) -> clap::Arg {
    let id = arg.get_id().as_str().to_string();
    let pick = |d: &SearchDefaults| match id.as_str() {
        "window" => Some(d.window.to_string()),
        "drain" => Some(d.drain.to_string()),
        "start" => Some(d.start.to_string()),
        "precision" => Some(d.precision.to_string()),
        "max_points" => Some(d.max_points.to_string()),
        "late_threshold_ms" => Some(d.late_threshold_ms.to_string()),
        _ => None,
    };
    let (Some(cached), Some(disk)) = (pick(&CACHED), pick(&DISK)) else {
        return arg;
    };
    let text = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    let help = format!("{text} [default: {cached}; as root on the emulated drive: {disk}]");
    arg.hide_default_value(true).help(help)
}

/// `exe gen` of the bench's preset, scale and sessions into `wl`.
fn gen_workload(
    exe: &Path,
    a: &BenchArgs,
    wl: &Path,
    obs: &mut dyn SearchObserver,
) -> Result<(), BenchError> {
    step(
        "vodlab gen",
        Command::new(exe)
            .args([
                "gen",
                "--preset",
                &a.preset,
                "--scale",
                &a.scale.to_string(),
                "--sessions",
                &a.sessions.to_string(),
                "-o",
            ])
            .arg(wl),
        obs,
    )?;
    Ok(())
}

fn step(what: &str, cmd: &mut Command, obs: &mut dyn SearchObserver) -> Result<String, BenchError> {
    let t = Instant::now();
    let o = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| BenchError::Step {
            what: what.to_string(),
            source,
        })?;
    if !o.status.success() {
        return Err(BenchError::StepFailed {
            what: what.to_string(),
            status: o.status,
        });
    }
    let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
    obs.note(&format!(
        "vodlab bench: {what} done in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    Ok(text)
}

/// Bounds of `--scale` (the workload preset's size factor; `vodlab gen`
/// then checks the counts it makes against its own limits).
pub const SCALE_BOUNDS: (f64, f64) = (1e-6, 1_000.0);

/// Checks bench's own numbers: `--scale` within [`SCALE_BOUNDS`],
/// `--sessions` from 1 to the workload limit.
fn check_bounds(a: &BenchArgs) -> Result<(), SettingsError> {
    within("--scale", a.scale, SCALE_BOUNDS.0, SCALE_BOUNDS.1)?;
    within_int(
        "--sessions",
        a.sessions.into(),
        1,
        vodlab_workload::limits::MAX_SESSIONS.into(),
    )?;
    Ok(())
}

/// What each kind of bench would run with (`--print-settings`), from the
/// same code that runs: `{"cached": ..., "disk": ...}`; `given` says
/// whether a flag was given.
pub fn settings_json(search: &SearchArgs, given: &dyn Fn(&str) -> bool) -> serde_json::Value {
    let mut cached = search.clone();
    CACHED.apply(&mut cached, given);
    let mut disk = search.clone();
    DISK.apply(&mut disk, given);
    serde_json::json!({
        "cached": SearchDefaults::of(&cached),
        "disk": SearchDefaults::of(&disk),
    })
}

/// Which bench runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The emulated-drive bench (root, `/dev/fuse` and fusermount3).
    Disk,
    /// The cached smoke test.
    Cached,
}

/// Applies bench's own defaults where the user gave none (`given` says
/// whether a flag was given): sessions without pacing or link emulation
/// (each downloads as fast as the server lets it), short points; checks
/// the settings and says which bench runs (a note to `obs` says why not
/// the emulated drive's).
pub fn decide(
    a: &mut BenchArgs,
    given: &dyn Fn(&str) -> bool,
    obs: &mut dyn SearchObserver,
) -> Result<Kind, BenchError> {
    CACHED.apply(&mut a.search, given);
    if !a.paced {
        a.search.no_pacing = true;
        a.search.no_shaping = true;
    }
    check_bounds(a)?;
    a.search.config()?;
    if !a.cached {
        match disk_bench_possible() {
            Ok(()) if !a.search.fail_on.is_empty() => return Err(BenchError::Refused(
                "--fail-on: the emulated-drive bench compares servers; judge its compare.json with `vodlab compare --fail-on`, or give --cached to judge the cached bench's capacity.json".into()
            )),
            Ok(()) => return Ok(Kind::Disk),
            Err(why) => obs.note(&format!(
                "vodlab bench: {why}; so no emulated disk and no memory box (the thesis's experiment needs both): running the cached smoke test instead (the embedded server, its files in the page cache)"
            )),
        }
    }
    Ok(Kind::Cached)
}

/// The work directory: `--work-dir`, or a temporary one (removed when the
/// guard is dropped).
fn work_dir(a: &BenchArgs) -> Result<(PathBuf, Option<tempfile::TempDir>), BenchError> {
    Ok(match &a.work_dir {
        Some(d) => (d.clone(), None),
        None => {
            let tmp = tempfile::Builder::new().prefix("vodlab-bench-").tempdir()?;
            (tmp.path().to_path_buf(), Some(tmp))
        }
    })
}

/// The output directory (`--out`, default `vodlab-bench-TIME`), made.
fn out_dir(a: &BenchArgs) -> Result<PathBuf, BenchError> {
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("vodlab-bench-{}", unix_now() as u64)));
    std::fs::create_dir_all(&out)?;
    Ok(out)
}

/// A finished cached bench.
pub struct CachedRun {
    /// capacity.json as written.
    pub file: CapacityFile,
    /// The output directory.
    pub out: PathBuf,
    /// Why the search stopped early, if it did.
    pub stopped: Option<String>,
    /// The temporary work directory, removed when dropped.
    pub work: Option<tempfile::TempDir>,
}

/// The cached smoke test: the workload and its file set made with `exe`
/// (the vodlab binary), the embedded server started on them, a capacity
/// search against it (after [`decide`] said [`Kind::Cached`]).
pub fn run_cached(
    a: &BenchArgs,
    exe: &Path,
    interrupter: Interrupter,
    obs: &mut impl SearchObserver,
) -> Result<CachedRun, BenchError> {
    let cfg = a.search.config()?;
    let (work_dir, tmp) = work_dir(a)?;
    let out = out_dir(a)?;
    let wl = work_dir.join("workload");
    let root = work_dir.join("files");
    obs.note(&format!(
        "vodlab bench: {} at scale {} with {} sessions; work in {}",
        a.preset,
        a.scale,
        a.sessions,
        work_dir.display()
    ));
    gen_workload(exe, a, &wl, obs)?;
    let made = step(
        "vodlab fileset create",
        Command::new(exe)
            .args(["fileset", "create"])
            .arg(&wl)
            .arg("--root")
            .arg(&root),
        obs,
    )?;
    obs.note(&format!("  {}", made.lines().last().unwrap_or("")));

    let srt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut scfg = Config::new(root.clone());
    scfg.io = a.io.into();
    let server = srt
        .block_on(Server::start(
            scfg,
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        ))
        .map_err(BenchError::Server)?;
    let target = format!("http://{}", server.addr);
    obs.note(&format!(
        "vodlab bench: embedded server (io {:?}) on {target}",
        a.io
    ));
    let runner = runner(&wl, &target, false, &a.search, &out, exe, interrupter, obs)?;
    let done = Capacity::with_runner(
        runner,
        cfg,
        &a.search.fail_on,
        &wl,
        &out,
        Some(format!("vodlab serve --io {:?} (embedded)", a.io).to_lowercase()),
    )
    .run(obs)?;
    srt.block_on(server.shutdown());
    srt.shutdown_timeout(std::time::Duration::from_millis(200));
    Ok(CachedRun {
        file: done.file,
        out,
        stopped: done.stopped,
        work: tmp,
    })
}

/// The emulated-drive bench, ready for its comparison.
pub struct DiskBench {
    /// The comparison to run (`vodlab compare --disk`); the caller takes it.
    pub compare: Option<CompareArgs>,
    /// The workload directory.
    pub workload: PathBuf,
    /// The output directory.
    pub out: PathBuf,
    /// The emulated drive.
    pub profile: vodlab_disk::Profile,
    /// When the bench began.
    pub started: Instant,
    /// The workload's preset, scale and the memory box, as run.
    preset: String,
    scale: f64,
    mem: u64,
    /// The temporary work directory, removed when dropped.
    pub work: Option<tempfile::TempDir>,
}

/// The thesis's experiment in miniature (root): a workload whose file set
/// lives only on an emulated drive, each server in a memory box from a cold
/// drive and cache before every point (`vodlab compare --disk`, which the
/// caller runs with [`DiskBench::compare`]); the workload is made here with
/// `exe` (after [`decide`] said [`Kind::Disk`]).
pub fn prepare_disk(
    mut a: BenchArgs,
    given: &dyn Fn(&str) -> bool,
    exe: &Path,
    obs: &mut dyn SearchObserver,
) -> Result<DiskBench, BenchError> {
    // the file set costs no disk space: a set several times the memory, so
    // the drive, not the cache, serves most of it
    if !given("--scale") {
        a.scale = 0.05;
    }
    // one file per title: with the default preset's 0.5 MB chunk files a
    // 4 MiB prefetch cannot reach past the file, and ASAP read like nginx
    // (docs/experiments.md, "Headline on the emulated disk")
    if !given("--preset") {
        a.preset = "youtube-2011-unchunked".into();
    }
    // 0.72 sessions per title, as the thesis's 7,200 over 10,000 titles
    if !given("--sessions") {
        a.sessions = 360;
    }
    DISK.apply(&mut a.search, given);
    check_bounds(&a)?;
    let profile = vodlab_disk::Profile::resolve(&a.disk)?;
    let (work_dir, tmp) = work_dir(&a)?;
    let out = out_dir(&a)?;
    let wl = work_dir.join("workload");
    obs.note(&format!(
        "vodlab bench: {} at scale {} with {} sessions on an emulated {} with {} MiB of memory; work in {}",
        a.preset,
        a.scale,
        a.sessions,
        profile.name,
        a.mem >> 20,
        work_dir.display()
    ));
    gen_workload(exe, &a, &wl, obs)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let started = Instant::now();
    let compare = CompareArgs {
        workload: wl.clone(),
        root: None,
        servers: a.servers.clone(),
        hw: HwArgs {
            mem: Some(a.mem),
            ..HwArgs::default()
        },
        disk: DiskArgs {
            disk: Some(a.disk.clone()),
            ..DiskArgs::default()
        },
        no_box: false,
        port,
        workers: None,
        serve_args: Vec::new(),
        // the bound reads the whole set once: minutes at this scale
        no_seqread: true,
        output: Some(out.clone()),
        search: a.search.clone(),
    };
    Ok(DiskBench {
        compare: Some(compare),
        workload: wl,
        out,
        profile,
        started,
        preset: a.preset,
        scale: a.scale,
        mem: a.mem,
        work: tmp,
    })
}

impl DiskBench {
    /// The bench's answer from the comparison's file, with the workload's
    /// bit-rate mix.
    pub fn answer(&self, file: &CompareFile) -> String {
        let mix = crate::capacity::bitrate_mix(&self.workload).unwrap_or_default();
        format!(
            "{}{}",
            disk_answer(file, &self.profile, self.mem, &self.preset, self.scale),
            mix_suffix(&mix)
        )
    }
}

/// bench's answer in one sentence. The capacity always comes from a valid
/// point (the search never passes an INVALID one); when the load generator
/// limited the search the sentence says so and gives no number as "the"
/// answer, only the valid lower bound.
pub fn bench_answer(file: &CapacityFile, a: &BenchArgs) -> String {
    let (answer, outcome) = (&file.answer, &file.outcome);
    let how = if a.search.no_pacing {
        "unpaced viewers, client and server sharing this machine's CPUs"
    } else {
        "paced viewers"
    };
    match outcome {
        SearchOutcome::ClientLimited { rate, .. } => format!(
            "no answer: the load generator limited this measurement (its runs at {rate:.1} new sessions/s were INVALID, so they neither passed nor failed); {}; {}",
            match (answer.capacity, &file.at_capacity) {
                // the lower bound in users' units too: the rate, the
                // viewers it kept and the bits, in one sentence
                (Some(_), Some(v)) => format!(
                    "with {} ({how}), vodlab serve ({}) served at least {}{} (a lower bound only)",
                    a.preset,
                    format!("{:?}", a.io).to_lowercase(),
                    v.sentence(),
                    mix_suffix(&file.bitrate_mix)
                ),
                (Some(c), None) => format!("the server passed every valid point up to {c:.1} new sessions/s of {} ({how}), a lower bound only", a.preset),
                (None, _) => "no valid point passed".to_string(),
            },
            crate::capacity::CLIENT_LIMITED_ADVICE
        ),
        _ => {
            let bound = if matches!(outcome, SearchOutcome::Found) {
                ""
            } else {
                "at least "
            };
            let server = format!("vodlab serve ({:?})", a.io).to_lowercase();
            match &file.at_capacity {
                // one sentence: the rate, the viewers it kept and the bits
                Some(v) => format!(
                    "answer: on this machine, with {} ({how}), {server} served {bound}{}{}",
                    a.preset,
                    v.sentence(),
                    mix_suffix(&file.bitrate_mix)
                ),
                None => format!(
                    "answer: on this machine {server} starts fewer than the lowest rate tried of {} ({how}) without a failed session",
                    a.preset
                ),
            }
        }
    }
}

/// Why the emulated-disk bench cannot run here, if it cannot.
pub fn disk_bench_possible() -> Result<(), String> {
    if !crate::hwbox::is_root() {
        return Err(
            "not root: cannot create a cgroup memory box or mount the emulated disk".into(),
        );
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        return Err("no /dev/fuse: cannot mount the emulated disk".into());
    }
    let has_fusermount = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| d.join(vodlab_diskfs::sys::FUSERMOUNT).exists())
    });
    if !has_fusermount {
        return Err(format!(
            "no {} (Debian: fuse3): cannot mount the emulated disk",
            vodlab_diskfs::sys::FUSERMOUNT
        ));
    }
    Ok(())
}

fn server_label(name: &str) -> &str {
    match name {
        "vodlab-asap" => "vodlab serve (ASAP)",
        "vodlab-vanilla" => "vodlab serve (vanilla)",
        n => n,
    }
}

/// The sentence of the emulated-disk bench: each server's failure-free
/// rate, and ASAP against nginx.
pub fn disk_answer(
    file: &CompareFile,
    profile: &vodlab_disk::Profile,
    mem: u64,
    preset: &str,
    scale: f64,
) -> String {
    let rpm = profile
        .hdd
        .as_ref()
        .map(|h| format!("{} rpm disk", group_thousands(h.rpm as u64)))
        .unwrap_or_else(|| "drive".into());
    let cap = |name: &str| -> Option<(String, Option<f64>)> {
        let r = file.server(name)?;
        let limited = matches!(r.outcome, SearchOutcome::ClientLimited { .. });
        let above = !matches!(r.outcome, SearchOutcome::Found) && r.answer.capacity.is_some();
        Some(match (r.answer.capacity, r.answer.lowest_failed) {
            (Some(c), _) if limited => (
                format!("at least {c:.1} new sessions/s (the load generator limited the search)"),
                Some(c),
            ),
            (Some(c), _) if above => (format!("at least {c:.1} new sessions/s"), Some(c)),
            (Some(c), _) => (format!("{c:.1} new sessions/s"), Some(c)),
            (None, Some(f)) => (format!("fewer than {f:.1} new sessions/s"), None),
            _ => (
                format!("no answer ({})", r.error.as_deref().unwrap_or("no point")),
                None,
            ),
        })
    };
    let mut parts = Vec::new();
    for r in &file.servers {
        if let Some((t, _)) = cap(&r.server) {
            // the viewers and bits at that rate, where a point passed
            let users = r
                .at_capacity
                .as_ref()
                .and_then(|f| {
                    let m = f.mean_active_sessions?;
                    let peak = f
                        .peak_active_sessions
                        .map_or(String::new(), |p| format!(" (peak {p})"));
                    Some(format!(
                        ": {m:.0} concurrent viewers on average{peak}, {:.2} Gbit/s delivered",
                        f.delivered_gbit_s?
                    ))
                })
                .unwrap_or_default();
            parts.push(format!("{} {t}{users}", server_label(&r.server)));
        }
    }
    let mut s = format!(
        "answer: on an emulated {rpm} ({}) with {} of memory, from a cold cache, {} of {preset} at scale {scale}, without a failed session: {}",
        profile.name,
        if mem >= 1 << 30 { format!("{:.0} GiB", mem as f64 / (1u64 << 30) as f64) } else { format!("{} MiB", mem >> 20) },
        "unpaced viewers",
        parts.join("; ")
    );
    if let (Some((_, Some(x))), Some((_, Some(z)))) = (cap("vodlab-asap"), cap("nginx")) {
        s += &format!(
            " (ASAP / nginx = {:.2}x; the thesis measured 2.33x on a real disk)",
            x / z
        );
    }
    s
}

fn group_thousands(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
