//! `vodlab run`: the library runs it ([`vodlab_client::command::run`]);
//! here are the plan and live progress on stderr, the signals that stop
//! it, the printed summary and the exit status.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vodlab_client::command::{Plan, RunError, RunObserver, Stop};
use vodlab_client::{Live, Results};

pub use vodlab_client::settings::RunSettings as RunArgs;

mod spread;

/// A library error with its exit status: [`RunError::CouldNotRun`] is
/// [`crate::exit::could_not_run`] (3); [`RunError::NotWritten`] is
/// [`crate::exit::NOT_WRITTEN`] (4), found by `status_of` in its chain,
/// and its summary is printed first: what was measured is not lost from
/// sight.
fn status(e: RunError) -> anyhow::Error {
    match e {
        RunError::CouldNotRun(msg) => crate::exit::could_not_run(msg),
        RunError::NotWritten { ref results, .. } => {
            let _ = std::io::stdout()
                .lock()
                .write_all(results.table().as_bytes());
            e.into()
        }
        e => e.into(),
    }
}

/// Opens (and closes) one TCP connection to `addr`: a server that is not
/// there is [`crate::exit::CouldNotRun`] (exit status 3) before anything
/// is measured.
pub(crate) fn reachable(target: &str, addr: SocketAddr) -> anyhow::Result<()> {
    vodlab_client::command::reachable(target, addr).map_err(status)
}

/// What `vodlab run` shows: the plan and progress (unless `--quiet`);
/// SIGINT and SIGTERM stop the run, and the last one seen is the exit
/// status.
struct Shell {
    quiet: bool,
    progress: Option<JoinHandle<()>>,
    signalled: Arc<AtomicU8>,
}

impl RunObserver for Shell {
    fn ready(&mut self, p: &Plan<'_>) {
        if self.quiet {
            return;
        }
        let cfg = p.config;
        let part = cfg
            .shard
            .map_or_else(String::new, |s| format!(", running shard {s} of them"));
        eprintln!(
            "vodlab run: {} {} from {} ({} script shard(s){part}) against {} ({}, {}); open files limit {}{}",
            p.sessions,
            cfg.player.as_ref().map_or_else(
                || "sessions".to_string(),
                |pl| format!("{} players ({})", pl.kind, pl.config.abr)
            ),
            p.source.display(),
            p.work.shards.len(),
            cfg.target,
            cfg.addr,
            cfg.transport.protocol,
            p.nofile,
            p.need.map_or_else(String::new, |n| format!(
                " (about {} needed at the peak: {} sessions at once)",
                n.descriptors(),
                n.peak_sessions
            )),
        );
        let tc = p.time_compression;
        if !tc.is_none() {
            eprintln!(
                "vodlab run: time compression k = {}: the workload runs {} times faster (give the server and the drive the same k); results are in wall-clock time",
                tc.k(),
                tc.k()
            );
        }
        if let Some(at) = cfg.start_at {
            let wait = at
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            eprintln!(
                "vodlab run: starting at {} (in {:.1} s)",
                humantime::format_rfc3339_millis(at),
                wait.as_secs_f64()
            );
        }
    }

    fn started(&mut self, live: &Arc<Live>, sessions: u64, stop: &Stop) -> std::io::Result<()> {
        // SIGINT (Ctrl-C) and SIGTERM (kill, a supervisor, a CI timeout) both
        // stop the run; the results so far are written, marked incomplete
        let (seen, stop) = (self.signalled.clone(), stop.clone());
        let mut first = true;
        crate::exit::on_stop_signals(move |sig| {
            // the first one stops the run; later ones change nothing
            if std::mem::take(&mut first) {
                seen.store(sig.status(), Ordering::Relaxed);
                eprintln!(
                    "\nvodlab run: interrupted by {}; writing the results so far",
                    sig.name()
                );
                stop.stop();
            }
        })?;
        if !self.quiet {
            self.progress = Some(spawn_progress(live.clone(), sessions));
        }
        Ok(())
    }

    fn finished(&mut self) {
        if let Some(p) = self.progress.take() {
            let _ = p.join();
        }
    }
}

/// `vodlab run`: runs, prints the summary, judges.
pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(n) = a.client_processes.filter(|&n| n != 1) {
        return spread::run(&a, n);
    }
    let mut shell = Shell {
        quiet: a.quiet,
        progress: None,
        signalled: Arc::new(AtomicU8::new(0)),
    };
    let ran = vodlab_client::command::run(&a, &mut shell).map_err(status)?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(ran.results.table().as_bytes())?;
    writeln!(
        stdout,
        "  results: {}",
        ran.dir.join("results.json").display()
    )?;
    judge(
        &ran.results,
        &a.fail_on,
        a.strict,
        shell.signalled.load(Ordering::Relaxed),
    )
}

/// The exit status of a run that wrote its results (README "Exit
/// statuses"): 130/143 when a signal stopped it; 3 when the server could
/// not be reached; 1 when no session succeeded, a `--fail-on` rule was
/// breached, or (`--strict`) the results are invalid or incomplete; else 0.
pub(crate) fn judge(
    results: &Results,
    rules: &[vodlab_client::out::thresholds::Rule],
    strict: bool,
    signal: u8,
) -> anyhow::Result<ExitCode> {
    use crate::exit;
    let breaches = exit::judge("run", rules, results)?;
    if signal != 0 {
        return Ok(ExitCode::from(signal));
    }
    if results.stopped_by == vodlab_client::StopReason::ServerUnreachable {
        eprintln!("vodlab run: could not run: the server stopped accepting connections");
        return Ok(ExitCode::from(exit::COULD_NOT_RUN));
    }
    if results.no_session_succeeded() {
        eprintln!("vodlab run: failed: no session succeeded");
        return Ok(ExitCode::from(exit::CHECK_FAILED));
    }
    if !breaches.is_empty() || (strict && !(results.valid && results.complete)) {
        return Ok(ExitCode::from(exit::CHECK_FAILED));
    }
    Ok(ExitCode::from(exit::OK))
}

/// Live progress on stderr: a status line on a terminal, a line every 10 s otherwise.
pub(crate) fn spawn_progress(live: Arc<Live>, total: u64) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let tty = std::io::stderr().is_terminal();
        let bar = indicatif::ProgressBar::new(total);
        if tty {
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} sessions started | {msg}",
                )
                .expect("template")
                .progress_chars("=> "),
            );
        } else {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let start = Instant::now();
        let (mut last_bytes, mut last_t, mut last_print) = (0u64, start, start);
        while !live.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            let now = Instant::now();
            if now.duration_since(last_t) < Duration::from_secs(1) {
                continue;
            }
            let bytes = live.bytes.load(Ordering::Relaxed);
            let rate =
                (bytes - last_bytes) as f64 / now.duration_since(last_t).as_secs_f64() / 1048576.0;
            last_bytes = bytes;
            last_t = now;
            let started = live.started.load(Ordering::Relaxed);
            let msg = format!(
                "{} active, {} done, {} failed, {:.1} MB/s",
                live.active.load(Ordering::Relaxed),
                live.completed.load(Ordering::Relaxed),
                live.failed.load(Ordering::Relaxed),
                rate
            );
            if tty {
                bar.set_position(started);
                bar.set_message(msg);
            } else if now.duration_since(last_print) >= Duration::from_secs(10) {
                last_print = now;
                eprintln!(
                    "[{:>6.0} s] {started}/{total} sessions started, {msg}",
                    now.duration_since(start).as_secs_f64()
                );
            }
        }
        bar.finish_and_clear();
    })
}
