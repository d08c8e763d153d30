//! `vodlab serve`: the flags and the server are the library's
//! ([`vodlab_server::settings`], [`vodlab_server::launch`]); this waits for
//! a signal and prints. `--workers N` runs N of it
//! ([`vodlab_server::workers`]: this forwards signals and writes the
//! merged statistics).

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use vodlab_server::workers::{Workers, WorkersEvent, WorkersObserver};

pub use vodlab_server::settings::ServeArgs;

/// Writes `v` to `path` as JSON, replaced atomically (a reader never sees
/// half a file).
pub(crate) fn write_json(path: &Path, v: &impl serde::Serialize) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(v)?;
    vodlab_client::out::atomic::write(path, &bytes)?;
    Ok(())
}

/// `vodlab serve`: one server, or `--workers N` of them.
pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(n) = a.workers {
        return run_workers(&a, n);
    }
    let cfg = a.config()?;
    let policy = cfg.prefetch_policy;
    let rt = vodlab_server::launch::runtime(a.threads)?;
    rt.block_on(async {
        let serving = vodlab_server::launch::start(&a, cfg, |msg| {
            eprintln!("vodlab serve: {msg}")
        })
        .await?;
        let server = &serving.server;
        let server_state = server.state.clone();
        let k = server.state.config().time_compression;
        if k != 1.0 {
            eprintln!("vodlab serve: time compression k = {k}: control intervals / k, bit rates x k");
        }
        let pacing = if a.pace > 0.0 {
            format!(
                ", paced {}x ({:?}, burst {} s, driver {})",
                a.pace, a.pace_mode, a.pace_burst, a.pace_driver
            )
        } else {
            String::new()
        };
        eprintln!(
            "vodlab serve: {} on {}://{} (io {:?}, prefetch policy {policy}, {} helper(s) per device{pacing}); stats at /vodlab/stats",
            a.root.display(),
            if a.proto.tls_cert.is_some() || a.proto.tls_self_signed { "http+https+h2" } else { "http+h2c" },
            server.addr,
            a.io,
            a.helpers
        );
        if let Some(h3) = server.h3_addr {
            eprintln!("vodlab serve: HTTP/3 (QUIC) on udp {h3}; Alt-Svc advertised on h1/h2 responses");
        }
        // `--stats-file`: the statistics every second (a `--workers`
        // parent merges its workers' files)
        let stats_writer = a.stats_file.clone().map(|path| {
            let st = server.state.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
                let mut said = false;
                loop {
                    tick.tick().await;
                    if let Err(e) = write_json(&path, &st.stats()) {
                        if !said {
                            eprintln!("vodlab serve: --stats-file {}: {e:#}", path.display());
                            said = true;
                        }
                    }
                }
            })
        });
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        eprintln!("vodlab serve: shutting down; finishing responses in flight");
        if let Some(t) = stats_writer {
            t.abort();
        }
        serving.shutdown().await;
        // the statistics at the end, with the responses finished above
        if let Some(path) = &a.stats_file {
            if let Err(e) = write_json(path, &server_state.stats()) {
                eprintln!("vodlab serve: --stats-file {}: {e:#}", path.display());
            }
        }
        eprintln!("vodlab serve: stopped");
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `vodlab serve --workers N`: the library's supervisor, SIGINT/SIGTERM
/// forwarded as its `stop`, its events printed, its merged statistics
/// written to the file.
fn run_workers(a: &ServeArgs, n: u32) -> anyhow::Result<ExitCode> {
    let workers = Workers::prepare(a, n)?;
    let exe = std::env::current_exe().context("finding this vodlab executable")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    crate::exit::on_stop_signals(move |_| flag.store(true, Ordering::Relaxed))?;
    let clean = workers.run(&exe, &argv, &stop, &mut Printer)?;
    eprintln!("vodlab serve: stopped");
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Prints the supervisor's events and writes its merged statistics.
struct Printer;

impl WorkersObserver for Printer {
    fn event(&mut self, _: &Workers, e: &WorkersEvent) {
        eprintln!("vodlab serve: {e}");
    }

    fn merged(&mut self, w: &Workers, merged: &serde_json::Value) {
        if let Err(e) = write_json(&w.out, merged) {
            eprintln!("vodlab serve: writing {}: {e:#}", w.out.display());
        }
    }
}
