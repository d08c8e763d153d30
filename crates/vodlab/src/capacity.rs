//! `vodlab capacity`: the highest session rate a server sustains, found by
//! stepping the rate up until the criterion trips and then bisecting; every
//! point is a real `vodlab run` (docs/experiments.md). The search, the point
//! runner, capacity.json and the settings are `vodlab_lab`'s
//! ([`vodlab_lab::capacity_run::Capacity`]); this module parses the arguments,
//! handles signals and prints.

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use vodlab_client::Live;
use vodlab_lab::capacity_run::{table, viewers_line, Capacity};
use vodlab_lab::settings::SearchDefaults;
use vodlab_lab::{Interrupter, Outcome, RunObserver, SearchObserver, Verdict};

pub use vodlab_lab::capacity_run::CapacityArgs;

/// The process's one interrupter: Ctrl-C or SIGTERM stops the run in
/// progress (it writes its results) and every later one, in every runner,
/// so the servers, boxes and disk daemons a search started are stopped by
/// their guards rather than left running (SIGTERM's default action would
/// end the process without running them).
pub fn interrupter() -> Interrupter {
    static ONE: OnceLock<Interrupter> = OnceLock::new();
    ONE.get_or_init(|| {
        let i = Interrupter::new();
        let on_signal = i.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a signal runtime");
            let got = rt.block_on(async {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
                tokio::select! {
                    r = tokio::signal::ctrl_c() => r.map(|_| crate::exit::INTERRUPTED),
                    _ = term.recv() => Ok(crate::exit::TERMINATED),
                }
            });
            if let Ok(code) = got {
                SIGNALLED.store(code, std::sync::atomic::Ordering::Relaxed);
                eprintln!(
                    "\nvodlab: interrupted; finishing this run's results and ending the search"
                );
                on_signal.interrupt();
            }
        });
        i
    })
    .clone()
}

/// Progress of each run on stderr (unless quiet), one line per judged run,
/// and the search's notices.
pub struct Printer {
    /// Prefix of every line (the server's name in compare).
    pub label: String,
    /// Runs per rate.
    pub repeats: u32,
    /// No live progress.
    pub quiet: bool,
    progress: Option<std::thread::JoinHandle<()>>,
}

impl Printer {
    /// A printer for a search of `repeats` runs per rate.
    pub fn new(label: &str, args: &vodlab_lab::settings::SearchArgs) -> Self {
        Self {
            label: label.to_string(),
            repeats: args.repeats,
            quiet: args.quiet,
            progress: None,
        }
    }
}

impl RunObserver for Printer {
    fn started(&mut self, live: &Arc<Live>, sessions: u64) {
        if !self.quiet {
            self.progress = Some(crate::run::spawn_progress(live.clone(), sessions));
        }
    }
    fn finished(&mut self) {
        if let Some(p) = self.progress.take() {
            let _ = p.join();
        }
    }
    fn judged(&mut self, rate: f64, repeat: u32, o: &Outcome, v: Verdict, why: Option<&str>) {
        print_point(&self.label, rate, repeat, self.repeats, o, v, why);
    }
}

impl SearchObserver for Printer {
    fn note(&mut self, line: &str) {
        eprintln!("{line}");
    }
}

/// One line per settled repetition on stderr.
pub fn print_point(
    label: &str,
    rate: f64,
    repeat: u32,
    repeats: u32,
    o: &Outcome,
    v: Verdict,
    why: Option<&str>,
) {
    eprintln!(
        "{label}rate {rate:.3}/s run {}/{repeats}: {} | {} sessions, {} failed, {} unfinished, {} stalled | {:.1} MB/s delivered | client {}",
        repeat + 1,
        match (v, why) {
            (Verdict::Pass, _) => "PASS".to_string(),
            (Verdict::Fail, Some(r)) => format!("FAIL ({r})"),
            (Verdict::Fail, None) => "FAIL".to_string(),
            (Verdict::Invalid, _) => "INVALID (neither pass nor fail: the load generator, or the emulated drive, could not keep up)".to_string(),
        },
        o.measured_sessions,
        o.failed_sessions,
        o.unfinished_sessions,
        o.stalled_sessions,
        o.throughput_bytes_per_s / 1e6,
        if o.client_valid { "ok".to_string() } else { format!("INVALID: {}", o.client_invalid_reasons.join("; ")) },
    );
}

pub fn run(a: CapacityArgs) -> anyhow::Result<ExitCode> {
    if a.search.print_settings {
        println!("{}", serde_json::to_string(&SearchDefaults::of(&a.search))?);
        return Ok(ExitCode::SUCCESS);
    }
    a.search.config()?;
    let cool = match &a.cool {
        Some(_) => {
            let (_, catalog) = crate::fileset::load(&a.workload)
                .context("--cool needs a `vodlab gen` workload directory")?;
            Some(catalog)
        }
        None => None,
    };
    if let Some(w) = vodlab_lab::settings::time_compression_warning(a.search.time_compression) {
        eprintln!("vodlab capacity: {w}");
    }
    let mut printer = Printer::new("", &a.search);
    let exe = std::env::current_exe()?;
    let cap = Capacity::prepare(&a, cool, &exe, interrupter(), &mut printer)?;
    crate::run::reachable(&a.target, cap.addr())?;
    let done = cap.run(&mut printer)?;
    print!("{}", table(&done.file));
    if let Some(v) = viewers_line(&done.file) {
        println!("{v}");
    }
    println!("  results: {}", done.out.join("capacity.json").display());
    let breaches = crate::exit::judge("capacity", &a.search.fail_on, &done.file)?;
    if let Some(e) = done.stopped {
        eprintln!("vodlab capacity: stopped early: {e}");
        return Ok(ExitCode::from(stopped_early_status()));
    }
    Ok(crate::exit::of_breaches(&breaches))
}

/// The exit status of the signal that stopped the search: 130 for
/// SIGINT, 143 for SIGTERM (README "Exit statuses").
static SIGNALLED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The exit status of a search that stopped early: 130 (SIGINT) or 143
/// (SIGTERM) when a signal stopped it, else 1.
pub fn stopped_early_status() -> u8 {
    if !interrupter().is_interrupted() {
        return crate::exit::CHECK_FAILED;
    }
    match SIGNALLED.load(std::sync::atomic::Ordering::Relaxed) {
        // a cancel from inside, not a signal
        0 => crate::exit::INTERRUPTED,
        code => code,
    }
}
