//! `vodlab run --client-processes N`: one run spread over N child `vodlab
//! run --shard I/N` processes started together (a shared `--start-at`),
//! each under its own descriptor limit, their results merged exactly into
//! the run's results.json by the merge `vodlab merge` uses
//! ([`vodlab_client::out::shard::merge`], through
//! [`vodlab_lab::procs::run_children`], which `capacity --client-processes`
//! uses too: progress from the children's checkpoints, SIGTERM to them on
//! Ctrl-C, a hung child stopped, a child's trouble among the merged run's
//! invalid reasons). Each child's own results stay in `shard-I/`.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use vodlab_client::{Live, Results, ShardSpec};
use vodlab_lab::procs::{self, Children, MAX_CLIENT_PROCESSES};
use vodlab_lab::Interrupter;

use super::RunArgs;

/// Flags of the parent's command line a child does not get: the parent
/// spreads (`--client-processes`), writes the merged results (`--out`),
/// shows progress (`--quiet`) and judges (`--strict`, `--fail-on`).
/// `(flag, takes a value)`.
const PARENT_ONLY: [(&str, bool); 7] = [
    ("--client-processes", true),
    ("--out", true),
    ("--output", true),
    ("-o", true),
    ("--quiet", false),
    ("-q", false),
    ("--fail-on", true),
];

/// The child's arguments: the parent's `run` arguments (`argv` after the
/// program name) without [`PARENT_ONLY`] and `--strict`, then its shard,
/// the shared start (unless `--start-at` was given), its results directory.
pub(crate) fn child_args(
    argv: &[OsString],
    shard: ShardSpec,
    start_at_unix_s: Option<f64>,
    out: &Path,
) -> Vec<OsString> {
    let mut a = Vec::with_capacity(argv.len() + 8);
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy();
        if s == "--strict" {
            continue;
        }
        if let Some((flag, takes)) = PARENT_ONLY.iter().find(|(f, _)| {
            s == *f
                || (f.starts_with("--") && s.starts_with(&format!("{f}=")))
                || (*f == "-o" && s.starts_with("-o") && s.len() > 2 && !s.starts_with("--"))
        }) {
            // `--flag VALUE`: skip the value too; `--flag=VALUE`, `-oDIR`: one
            if *takes && s == *flag {
                it.next();
            }
            continue;
        }
        a.push(arg.clone());
    }
    let mut flag = |k: &str, v: &OsStr| {
        a.push(k.into());
        a.push(v.into());
    };
    flag("--shard", OsStr::new(&shard.to_string()));
    if let Some(t) = start_at_unix_s {
        flag("--start-at", OsStr::new(&format!("{t:.6}")));
    }
    flag("-o", out.as_os_str());
    // the parent checked the server once; N checks would add N connections
    a.push("--no-connect-check".into());
    a.push("--quiet".into());
    a
}

/// A child's health line: whether its own results were valid (and why
/// not), its peak concurrent sessions, CPU, memory and send lateness.
fn health_line(i: u32, n: u32, dir: &Path) -> String {
    let r: Result<Results, String> = std::fs::read(dir.join("results.json"))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()));
    match r {
        Ok(r) => {
            let h = &r.health;
            let cpu_mean = if r.intervals.is_empty() {
                0.0
            } else {
                r.intervals.iter().map(|x| x.cpu_pct).sum::<f64>() / r.intervals.len() as f64
            };
            format!(
                "  client process {i}/{n}: {}; {} sessions at the peak, CPU mean {:.1} % max {:.1} % of a core, peak RSS {:.1} MiB, send lateness p99 {:.2} ms, {} descriptor errors{}",
                if r.valid { "valid" } else { "INVALID" },
                h.peak_active_sessions,
                cpu_mean,
                h.max_cpu_pct,
                h.peak_rss_mb,
                h.send_lateness_ms.p99,
                h.descriptor_errors,
                if r.valid {
                    String::new()
                } else {
                    format!(" ({})", r.invalid_reasons.join("; "))
                }
            )
        }
        Err(e) => format!("  client process {i}/{n}: no results ({e})"),
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Stops the children on SIGINT or SIGTERM (they write what they
/// measured); the last signal seen is the exit status.
fn on_signals(interrupter: Interrupter, seen: Arc<AtomicU8>) -> anyhow::Result<()> {
    crate::exit::on_stop_signals(move |sig| {
        seen.store(sig.status(), Ordering::Relaxed);
        eprintln!(
            "\nvodlab run: interrupted by {}; stopping the client processes, merging what they measured",
            sig.name()
        );
        interrupter.interrupt();
    })?;
    Ok(())
}

/// `vodlab run --client-processes N` (N > 1).
pub fn run(a: &RunArgs, n: u32) -> anyhow::Result<ExitCode> {
    if !(1..=MAX_CLIENT_PROCESSES).contains(&n) {
        anyhow::bail!("--client-processes must be from 1 to {MAX_CLIENT_PROCESSES}, got {n}");
    }
    let exe = std::env::current_exe().context("finding this vodlab executable")?;
    // the workload loads here once: a bad one is refused before any child,
    // and its load time sizes the lead the children get to load it too
    let t = Instant::now();
    let total = match (&a.workload, &a.timing_script) {
        (Some(w), None) => {
            let work = vodlab_client::LoadedWorkload::open(w)
                .with_context(|| format!("loading the workload {}", w.display()))?;
            let n = work.session_count();
            a.sessions.map_or(n, |s| s.min(n)) as u64
        }
        _ => a.clients as u64,
    };
    let load = t.elapsed();
    if !a.no_connect_check {
        let (hostport, _) =
            vodlab_client::config::parse_target(&a.target).map_err(|e| anyhow::anyhow!(e))?;
        use std::net::ToSocketAddrs;
        let addr = hostport
            .to_socket_addrs()
            .with_context(|| format!("resolving {hostport}"))?
            .next()
            .with_context(|| format!("{hostport} has no address"))?;
        super::reachable(&a.target, addr)?;
    }
    let out_dir = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("results/run-{}", unix_now() as u64)));
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as f64;
    let lead = procs::start_lead(load, (f64::from(n) / cores).ceil());
    // `--start-at` given: the children keep it; else they share ours
    let start_at = a
        .start_at
        .is_none()
        .then(|| unix_now() + lead.as_secs_f64());
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let args: Vec<(ShardSpec, Vec<OsString>, PathBuf)> = (0..n)
        .map(|index| {
            let spec = ShardSpec { index, count: n };
            let dir = out_dir.join(format!("shard-{index}"));
            (spec, child_args(&argv, spec, start_at, &dir), dir)
        })
        .collect();
    let dirs: Vec<PathBuf> = args.iter().map(|(_, _, d)| d.clone()).collect();
    if !a.quiet {
        eprintln!(
            "vodlab run: {total} sessions spread over {n} client processes (shards of {}), starting in {:.1} s; each child's results in {}/shard-I",
            exe.display(),
            lead.as_secs_f64(),
            out_dir.display()
        );
    }
    let interrupter = Interrupter::new();
    let seen = Arc::new(AtomicU8::new(0));
    on_signals(interrupter.clone(), seen.clone())?;
    let live = Arc::new(Live::default());
    let progress = (!a.quiet).then(|| super::spawn_progress(live.clone(), total));
    // a run without --duration lasts as its sessions do: no hang limit
    let hang_after = match a.duration {
        Some(d) => lead + Duration::from_secs_f64(d + (d * 0.1).max(procs::HANG_MARGIN_S)),
        None => Duration::from_secs(8 * 86_400),
    };
    let spread = procs::run_children(Children {
        exe: &exe,
        args,
        hang_after,
        interrupter: &interrupter,
        live: &live,
    });
    live.done.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let spread = spread?;
    if a.requests_csv {
        let p = out_dir.join("requests.csv");
        procs::join_requests_csv(&dirs, &p).with_context(|| format!("writing {}", p.display()))?;
    }
    let results = spread.results;
    let mut stdout = std::io::stdout().lock();
    let written = results.write(&out_dir);
    stdout.write_all(results.table().as_bytes())?;
    for (i, d) in dirs.iter().enumerate() {
        writeln!(stdout, "{}", health_line(i as u32, n, d))?;
    }
    written?;
    writeln!(
        stdout,
        "  results: {} (merged from {} client processes)",
        out_dir.join("results.json").display(),
        n
    )?;
    drop(stdout);
    super::judge(&results, &a.fail_on, a.strict, seen.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_child_gets_the_run_without_the_parents_flags() {
        let argv = os(&[
            "run",
            "w",
            "--target",
            "http://127.0.0.1:1",
            "--client-processes",
            "3",
            "--quiet",
            "-o",
            "out",
            "--strict",
            "--fail-on=sessions.failed>0",
            "--rate",
            "5",
            "--out=x",
            "-oy",
            "--client-processes=3",
        ]);
        let spec = ShardSpec { index: 1, count: 3 };
        let a = child_args(&argv, spec, Some(12.5), Path::new("out/shard-1"));
        assert_eq!(
            a,
            os(&[
                "run",
                "w",
                "--target",
                "http://127.0.0.1:1",
                "--rate",
                "5",
                "--shard",
                "1/3",
                "--start-at",
                "12.500000",
                "-o",
                "out/shard-1",
                "--no-connect-check",
                "--quiet",
            ])
        );
        // a start given by the user is kept, not replaced
        let a = child_args(
            &os(&["run", "w", "--start-at", "99"]),
            spec,
            None,
            Path::new("d"),
        );
        assert_eq!(a[2..4], os(&["--start-at", "99"])[..]);
        assert!(!a.iter().skip(4).any(|x| x == "--start-at"));
    }
}
