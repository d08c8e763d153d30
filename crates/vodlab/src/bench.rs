//! `vodlab bench`: the whole method in one command. Builds a small workload,
//! writes its file set to a temporary directory, starts the embedded
//! reference server, runs a short capacity search against it, prints the
//! answer and writes the HTML report.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use vodlab_lab::runner::unix_now;
use vodlab_lab::{Answer, Search, SearchOutcome};
use vodlab_server::{Config, IoMode, Server};

use crate::capacity::{self, Printer, SearchArgs};

/// Arguments of `vodlab bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Workload preset (see `vodlab gen --list-presets`).
    #[arg(long, default_value = "youtube-2011")]
    pub preset: String,
    /// Scale of the preset's catalog (0.01 = 100 titles, about 1.3 GB of files).
    #[arg(long, default_value_t = 0.01)]
    pub scale: f64,
    /// Sessions in the workload (a point at rate R uses R x window of them).
    #[arg(long, default_value_t = 10_000)]
    pub sessions: u32,
    /// Server I/O mode.
    #[arg(long, value_enum, default_value_t = crate::serve::Io::Asap)]
    pub io: crate::serve::Io,
    /// Where the workload and file set go (default: a temporary directory,
    /// removed at the end).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Output directory: capacity.json, points/, report.html.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Replay with pacing and link emulation (realistic viewers, but every
    /// point then lasts as long as its sessions: raise --window and --drain).
    #[arg(long)]
    pub paced: bool,
    /// Search settings (bench's defaults: unpaced sessions, 15 s per point).
    #[command(flatten)]
    pub search: SearchArgs,
}

fn step(what: &str, cmd: &mut Command) -> anyhow::Result<String> {
    let t = Instant::now();
    let o = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {what}"))?;
    if !o.status.success() {
        bail!("{what} failed ({})", o.status);
    }
    let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
    eprintln!(
        "vodlab bench: {what} done in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(text)
}

/// Bounds of `--scale` (the workload preset's size factor; `vodlab gen`
/// then checks the counts it makes against its own limits).
pub const SCALE_BOUNDS: (f64, f64) = (1e-6, 1_000.0);

/// Checks bench's own numbers: `--scale` within [`SCALE_BOUNDS`],
/// `--sessions` from 1 to the workload limit.
fn check_bounds(a: &BenchArgs) -> anyhow::Result<()> {
    crate::capacity::within("--scale", a.scale, SCALE_BOUNDS.0, SCALE_BOUNDS.1)?;
    crate::capacity::within_int(
        "--sessions",
        a.sessions.into(),
        1,
        vodlab_workload::limits::MAX_SESSIONS.into(),
    )?;
    Ok(())
}

pub fn run(mut a: BenchArgs) -> anyhow::Result<ExitCode> {
    // bench's own defaults where the user gave none: sessions without pacing
    // or link emulation (each downloads as fast as the server lets it), short points
    let given =
        |flag: &str| std::env::args().any(|x| x == flag || x.starts_with(&format!("{flag}=")));
    if !given("--window") {
        a.search.window = 15.0;
    }
    if !given("--drain") {
        a.search.drain = 30.0;
    }
    if !given("--start") {
        a.search.start = 4.0;
    }
    if !given("--precision") {
        a.search.precision = 0.15;
    }
    if !a.paced {
        a.search.no_pacing = true;
        a.search.no_shaping = true;
    }
    check_bounds(&a)?;
    let cfg = a.search.config()?;
    let exe = std::env::current_exe()?;
    let tmp;
    let work_dir = match &a.work_dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("vodlab-bench-").tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("vodlab-bench-{}", unix_now() as u64)));
    std::fs::create_dir_all(&out)?;
    let wl = work_dir.join("workload");
    let root = work_dir.join("files");
    eprintln!(
        "vodlab bench: {} at scale {} with {} sessions; work in {}",
        a.preset,
        a.scale,
        a.sessions,
        work_dir.display()
    );
    step(
        "vodlab gen",
        Command::new(&exe)
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
            .arg(&wl),
    )?;
    let made = step(
        "vodlab fileset create",
        Command::new(&exe)
            .args(["fileset", "create"])
            .arg(&wl)
            .arg("--root")
            .arg(&root),
    )?;
    eprintln!("  {}", made.lines().last().unwrap_or(""));

    let srt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut scfg = Config::new(root.clone());
    scfg.io = match a.io {
        crate::serve::Io::Asap => IoMode::Asap,
        crate::serve::Io::Vanilla => IoMode::Vanilla,
    };
    let server = srt
        .block_on(Server::start(scfg, "127.0.0.1:0".parse()?))
        .context("starting the embedded vodlab serve")?;
    let target = format!("http://{}", server.addr);
    eprintln!("vodlab bench: embedded server (io {:?}) on {target}", a.io);
    let mut runner = capacity::runner(&wl, &target, false, &a.search, &out)?;
    let mut search = Search::new(cfg)?;
    let started = unix_now();
    let mut printer = Printer::new("  ", &a.search);
    let res: anyhow::Result<Answer> =
        runner.run_search(&mut search, &mut printer, || Ok(()), |_, _| Ok(()));
    let stop = runner.stop_of(&res.as_ref().map_err(|e| format!("{e:#}")));
    let file = runner.write_capacity(
        &search,
        stop.as_ref(),
        Some(format!("vodlab serve --io {:?} (embedded)", a.io).to_lowercase()),
        started,
    )?;
    runner.finish();
    srt.block_on(server.shutdown());
    srt.shutdown_timeout(std::time::Duration::from_millis(200));
    let html = crate::report::render(std::slice::from_ref(&out), "vodlab bench", 20_000)?;
    std::fs::write(out.join("report.html"), html)?;
    print!("{}", capacity::table(&file));
    println!("{}", bench_answer(&file.answer, &file.outcome, &a));
    println!(
        "  results: {}\n  report:  {}",
        out.join("capacity.json").display(),
        out.join("report.html").display()
    );
    if let Err(e) = res {
        eprintln!("vodlab bench: stopped early: {e:#}");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// bench's answer in one sentence. The capacity always comes from a valid
/// point (the search never passes an INVALID one); when the load generator
/// limited the search the sentence says so and gives no number as "the"
/// answer, only the valid lower bound.
fn bench_answer(answer: &Answer, outcome: &SearchOutcome, a: &BenchArgs) -> String {
    let how = if a.search.no_pacing {
        "unpaced viewers, client and server sharing this machine's CPUs"
    } else {
        "paced viewers"
    };
    match outcome {
        SearchOutcome::ClientLimited { rate, .. } => format!(
            "no answer: the load generator limited this measurement (its runs at {rate:.1} new sessions/s were INVALID, so they neither passed nor failed); {}; {}",
            match answer.capacity {
                Some(c) => format!("the server passed every valid point up to {c:.1} new sessions/s of {} ({how}), a lower bound only", a.preset),
                None => "no valid point passed".to_string(),
            },
            vodlab_lab::capacity::CLIENT_LIMITED_ADVICE
        ),
        _ => {
            let bound = if matches!(outcome, SearchOutcome::Found) {
                ""
            } else {
                "at least "
            };
            format!(
                "answer: on this machine the embedded vodlab serve starts {} of {} ({how}) with no failed session",
                answer.capacity.map_or("fewer than the lowest rate tried".to_string(), |c| format!("{bound}{c:.1} new sessions/s")),
                a.preset,
            )
        }
    }
}
