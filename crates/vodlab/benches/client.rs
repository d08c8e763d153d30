//! Load-client benchmark against real peers, measured in the same run on this
//! machine (run with `cargo bench -p vodlab --bench client`; needs nginx,
//! h2load and httperf, see scripts/install-test-deps.sh):
//!
//! (a) request throughput with pacing and shaping off, vodlab vs
//!     `h2load --h1` with the same number of connections, against nginx serving
//!     a cached 0.5 MiB file; the median ratio of several rounds is printed;
//! (b) 10,000 concurrent paced sessions of small chunks in one process,
//!     shaped and unshaped: peak sessions, send lateness p99, CPU per 1,000
//!     sessions and the process's RSS per concurrent session (steady: the
//!     median reading while all run; peak), medians of BENCH_B_ROUNDS;
//! (c) httperf given the same sessions, to show the limit it hits.
//!
//! Environment: BENCH_ROUNDS (default 5), BENCH_CONNS (16), BENCH_REQUESTS
//! (32000), BENCH_SESSIONS (10000). BENCH_BASELINE_BIN: another `vodlab`
//! binary (e.g. built from an earlier commit) measured in the same rounds
//! beside this one, for before/after figures from one run. BENCH_PARTS:
//! which of a, b, c to run (default `abc`). BENCH_B_ROUNDS: rounds of (b)
//! (default 3); BENCH_B_MODES: `shaped`, `unshaped` or both (default).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use vodlab_testkit::{
    env_count, median, require, results, rss_per_session, run_unpaced_at, vodlab_at_ok,
    vodlab_rss_sampled, Nginx,
};

/// Runs this package's `vodlab` and asserts success, returning stdout.
fn vodlab_ok(args: &[&str]) -> String {
    vodlab_at_ok(Path::new(env!("CARGO_BIN_EXE_vodlab")), args)
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn h2load_rps(h2load: &Path, port: u16, conns: usize, requests: usize) -> f64 {
    let out = Command::new(h2load)
        // as many threads as vodlab's runtime has workers
        .args([
            "--h1",
            "-t",
            &threads().to_string(),
            "-c",
            &conns.to_string(),
            "-n",
            &requests.to_string(),
        ])
        .arg(format!("http://127.0.0.1:{port}/c.bin"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("finished in"))
        .unwrap_or_else(|| panic!("{text}"));
    // finished in 1.23s, 3250.00 req/s, 1.59GB/s
    let rps = line
        .split(", ")
        .nth(1)
        .and_then(|x| x.split(' ').next())
        .unwrap();
    assert!(text.contains(&format!("{requests} succeeded")), "{text}");
    rps.parse().unwrap()
}

fn vodlab_rps(bin: &Path, script: &Path, port: u16, conns: usize, out: &Path) -> f64 {
    let (r, secs) = run_unpaced_at(bin, script, port, out);
    assert_eq!(r["started_sessions"].as_u64().unwrap() as usize, conns);
    r["completed_requests"].as_f64().unwrap() / secs
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo test --benches asks for a list
    }
    let h2load = require("h2load", "nghttp2-client");
    let httperf = require("httperf", "httperf");
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    fs::create_dir_all(&root).unwrap();
    // (b)'s workload and its file set first: `fileset create` wants an empty root
    let sessions = env_count("BENCH_SESSIONS", 10_000);
    let spec = t.path().join("many.toml");
    fs::write(
        &spec,
        format!(
            r#"name = "bench-many"
[catalog]
titles = 1000
popularity = {{ kind = "zipf", alpha = 0.8 }}
duration = {{ kind = "constant", value = 60.0 }}
representations = [{{ name = "lo", bitrate_kbps = 26.2144 }}]   # 16 KiB per 5 s
storage = {{ layout = "single" }}
[sessions]
count = {sessions}
viewing_fraction = {{ kind = "constant", value = 1.0 }}
request_s = 5.0
buffering_requests = 1
pacing_s = 5.0
timeout_s = 10.0
representation = {{ kind = "fixed", name = "lo" }}
[[clients]]
name = "dsl"
share = 1.0
down_kbps = 2000.0
up_kbps = 500.0
delay_ms = 20.0
"#
        ),
    )
    .unwrap();
    let w = t.path().join("many");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "-o",
        w.to_str().unwrap(),
    ]);
    // the file set's real content, so the client's sampled byte checks pass
    // (dummy bytes failed 1,166 of 10,000 sessions with content_mismatch)
    vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    fs::write(root.join("c.bin"), vec![7u8; 524_288]).unwrap();
    let nginx = Nginx::start(&root);

    // (a) throughput, pacing and shaping off
    let (rounds, conns, requests) = (
        env_count("BENCH_ROUNDS", 5),
        env_count("BENCH_CONNS", 16),
        env_count("BENCH_REQUESTS", 32000),
    );
    let per = requests / conns;
    let script = t.path().join("a.vsl");
    let mut text = String::new();
    for i in 0..conns {
        text.push_str(&format!("#@session id={i}\n"));
        for _ in 0..per {
            text.push_str("/c.bin\n");
        }
        text.push('\n');
    }
    fs::write(&script, text).unwrap();
    let parts = std::env::var("BENCH_PARTS").unwrap_or_else(|_| "abc".into());
    let mut bins: Vec<(&str, PathBuf)> =
        vec![("this", PathBuf::from(env!("CARGO_BIN_EXE_vodlab")))];
    if let Ok(b) = std::env::var("BENCH_BASELINE_BIN") {
        bins.push(("baseline", PathBuf::from(b)));
    }
    let mut theirs = Vec::new();
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); bins.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); bins.len()];
    let rounds = if parts.contains('a') {
        h2load_rps(&h2load, nginx.port, conns, conns * per); // warm the page cache
        rounds
    } else {
        0
    };
    for round in 0..rounds {
        let h = h2load_rps(&h2load, nginx.port, conns, conns * per);
        theirs.push(h);
        for (k, (name, bin)) in bins.iter().enumerate() {
            let v = vodlab_rps(
                bin,
                &script,
                nginx.port,
                conns,
                &t.path().join(format!("a{round}-{name}")),
            );
            println!(
                "(a) round {round}: vodlab ({name}) {v:.0} req/s, h2load --h1 {h:.0} req/s, ratio {:.3}",
                v / h
            );
            ours[k].push(v);
            ratios[k].push(v / h);
        }
    }
    for (k, (name, _)) in bins.iter().enumerate().filter(|_| rounds > 0) {
        println!(
            "(a) {conns} connections, {} threads each, {} x 0.5 MiB: median vodlab ({name}) {:.0} req/s, h2load {:.0} req/s, median ratio {:.3} (target >= 0.90)",
            threads(),
            conns * per,
            median(ours[k].clone()),
            median(theirs.clone()),
            median(ratios[k].clone())
        );
    }

    // (b) many concurrent paced sessions of small chunks, shaped and
    // unshaped, alternating the builds within each round; memory is the
    // whole process's RSS over the concurrent sessions (what a user's
    // machine pays), steady and peak
    let rate = (sessions / 5).max(1); // all started within 5 s; each lasts 60 s
    let b_rounds = if parts.contains('b') {
        env_count("BENCH_B_ROUNDS", 3)
    } else {
        0
    };
    let modes: Vec<(&str, bool)> = match std::env::var("BENCH_B_MODES").as_deref() {
        Ok("shaped") => vec![("shaped", true)],
        Ok("unshaped") => vec![("unshaped", false)],
        _ => vec![("shaped", true), ("unshaped", false)],
    };
    // (mode, build) -> per-round (steady KiB, peak KiB, CPU % per 1,000:
    // peak interval, steady-window mean)
    let mut mem: Vec<Vec<Vec<RoundFigures>>> = vec![vec![Vec::new(); bins.len()]; modes.len()];
    for round in 0..b_rounds {
        for (m, (mode, shaped)) in modes.iter().enumerate() {
            for (k, (name, bin)) in bins.iter().enumerate() {
                let out = t.path().join(format!("b{round}-{mode}-{name}"));
                let target = format!("http://127.0.0.1:{}", nginx.port);
                let rate = rate.to_string();
                let mut args = vec![
                    "run",
                    w.to_str().unwrap(),
                    "--target",
                    &target,
                    "--rate",
                    &rate,
                    "--quiet",
                    "-o",
                    out.to_str().unwrap(),
                ];
                if !shaped {
                    args.push("--no-shaping");
                }
                let (_, samples) =
                    vodlab_rss_sampled(bin, &args, std::time::Duration::from_millis(500));
                let r = results(&out);
                let rss = rss_per_session(&samples, &r);
                let h = &r["health"];
                let peak = rss.sessions;
                let cpu_per_1000 = h["max_cpu_pct"].as_f64().unwrap() / peak * 1000.0;
                // the mean over the steady window: the intervals with at
                // least 95 % of the peak sessions running
                let steady_cpu = steady_cpu_per_1000(&r);
                let steady = rss.steady_kib.unwrap_or(f64::NAN);
                println!(
                    "(b) round {round} {mode} vodlab ({name}): {sessions} paced sessions (2 Mbit/s, 20 ms{}), peak {peak} concurrent, {} failed; send lateness p99 {:.2} ms (target < 5), start lateness p99 {:.2} ms; CPU max {:.0} % of {} cores ({cpu_per_1000:.2} % per 1000 sessions; steady-window mean {steady_cpu:.2} % per 1000); process RSS per concurrent session: steady {steady:.1} KiB, peak {:.1} KiB (target <= 16); valid {}",
                    if *shaped { "" } else { " in the script; not emulated" },
                    r["failed_sessions"],
                    h["send_lateness_ms"]["p99"].as_f64().unwrap(),
                    h["start_lateness_ms"]["p99"].as_f64().unwrap(),
                    h["max_cpu_pct"].as_f64().unwrap(),
                    h["cpus"],
                    rss.peak_kib,
                    r["valid"],
                );
                mem[m][k].push((steady, rss.peak_kib, cpu_per_1000, steady_cpu));
                let errors: Vec<String> = r["errors"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(_, n)| n.as_u64() != Some(0))
                            .map(|(k, n)| format!("{k} {n}"))
                            .collect()
                    })
                    .unwrap_or_default();
                let cpu: Vec<String> = r["intervals"]
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .map(|i| format!("{:.0}", i["cpu_pct"].as_f64().unwrap_or(0.0)))
                            .collect()
                    })
                    .unwrap_or_default();
                println!(
                    "    CPU % per {} s interval: {}",
                    r["interval_s"],
                    cpu.join(" ")
                );
                println!(
                    "    errors: {}; invalid: {}",
                    if errors.is_empty() {
                        "none".into()
                    } else {
                        errors.join(", ")
                    },
                    r["invalid_reasons"]
                );
            }
        }
    }
    for (m, (mode, _)) in modes.iter().enumerate().filter(|_| b_rounds > 0) {
        for (k, (name, _)) in bins.iter().enumerate() {
            let v = &mem[m][k];
            println!(
                "(b) {mode}, vodlab ({name}), median of {} rounds: process RSS per concurrent session steady {:.1} KiB, peak {:.1} KiB (target <= 16); CPU per 1000 sessions: max interval {:.2} %, steady-window mean {:.2} % (target <= 1.5 shaped)",
                v.len(),
                median(v.iter().map(|x| x.0).collect()),
                median(v.iter().map(|x| x.1).collect()),
                median(v.iter().map(|x| x.2).collect()),
                median(v.iter().map(|x| x.3).collect()),
            );
        }
    }

    if !parts.contains('c') {
        return;
    }
    // (c) httperf with the same sessions (no shaping: httperf has none)
    // the workload's range requests cannot be exported to httperf (no Range
    // header): give it whole-file chunks of the same size and timing instead
    // stock httperf holds at most 1,000 session templates and cycles through them
    let mut text = String::new();
    fs::write(root.join("s.bin"), vec![2u8; 16_384]).unwrap();
    for _ in 0..sessions.min(1000) {
        text.push_str("/s.bin think=5\n".repeat(11).as_str());
        text.push_str("/s.bin\n\n");
    }
    let log = t.path().join("many.wsesslog");
    fs::write(&log, text).unwrap();
    let started = std::time::Instant::now();
    let o = Command::new(&httperf)
        .args([
            "--server",
            "127.0.0.1",
            "--port",
            &nginx.port.to_string(),
            "--hog",
        ])
        .arg(format!("--wsesslog={sessions},0,{}", log.display()))
        .args(["--rate", &rate.to_string(), "--timeout", "10"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    let pick = |p: &str| {
        text.lines()
            .find(|l| l.starts_with(p))
            .unwrap_or("")
            .to_string()
    };
    println!(
        "(c) httperf, same sessions unshaped, {:.0} s:\n    {}\n    {}\n    {}\n    {}\n    {}",
        started.elapsed().as_secs_f64(),
        pick("httperf: warning"),
        pick("Total:"),
        pick("Session rate"),
        pick("Errors: total"),
        pick("Errors: fd-unavail")
    );
}

/// One round's figures of part (b): process RSS per concurrent session
/// (steady, peak; KiB), CPU % of a core per 1,000 sessions (peak interval,
/// steady-window mean).
type RoundFigures = (f64, f64, f64, f64);

/// CPU % of a core per 1,000 sessions, the mean over the steady window of
/// a run's results: the intervals in which at least 95 % of the peak
/// concurrent sessions ran (NaN when there are none).
fn steady_cpu_per_1000(r: &serde_json::Value) -> f64 {
    let iv: Vec<(f64, f64)> = r["intervals"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|i| {
                    (
                        i["active_sessions"].as_f64().unwrap_or(0.0),
                        i["cpu_pct"].as_f64().unwrap_or(0.0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let peak = iv.iter().map(|x| x.0).fold(0.0, f64::max);
    let steady: Vec<&(f64, f64)> = iv
        .iter()
        .filter(|x| peak > 0.0 && x.0 >= 0.95 * peak)
        .collect();
    if steady.is_empty() {
        return f64::NAN;
    }
    let mean_cpu = steady.iter().map(|x| x.1).sum::<f64>() / steady.len() as f64;
    let mean_sessions = steady.iter().map(|x| x.0).sum::<f64>() / steady.len() as f64;
    mean_cpu / mean_sessions * 1000.0
}
