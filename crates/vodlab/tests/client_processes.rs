//! `vodlab capacity --client-processes N`: each point spread over N `vodlab
//! run --shard I/N` processes and merged, against a `vodlab serve` started
//! by the test on loopback.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{vodlab, vodlab_ok, Running};

/// An unpaced youtube-2011 workload of 400 sessions in 2 script shards
/// (a point replays them as one arrival process), sparse files for it.
fn workload(dir: &Path) -> (PathBuf, PathBuf) {
    common::unpaced_workload(dir, "youtube-2011", 400, 40, 2, 3)
}

/// `vodlab capacity` arguments for a short search on loopback (`extra`
/// adds the window, the rates and the processes).
fn capacity_args(w: &Path, target: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "capacity",
        w.to_str().unwrap(),
        "--target",
        target,
        "--no-pacing",
        "--no-shaping",
        "--check-bytes",
        "0",
        "--drain",
        "15",
        "--pause",
        "0.2",
        "--quiet",
        // several processes and the server on 2 cores: late starts beyond
        // 10 ms would make a point INVALID; the spreading is under test
        "--late-threshold-ms",
        "1000",
        "-o",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn capacity_ok(args: &[String]) -> String {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    vodlab_ok(&a)
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The point directories of a search, in order.
fn points(out: &Path) -> Vec<PathBuf> {
    let mut p: Vec<PathBuf> = fs::read_dir(out.join("points"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    p.sort();
    p
}

/// A search with 3 client processes finds its answer; every point is 3
/// shard directories and a merged results.json whose counts are their sums.
#[test]
fn capacity_spreads_each_point_over_three_processes_and_merges_them() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path());
    let server = Running::start(&root, |_| {});
    let out = t.path().join("cap");
    let args = capacity_args(
        &w,
        &server.url(""),
        &out,
        &[
            "--client-processes",
            "3",
            "--window",
            "2",
            "--start",
            "3",
            "--max-points",
            "2",
        ],
    );
    capacity_ok(&args);
    let cap = json(&out.join("capacity.json"));
    assert_eq!(cap["complete"], true, "{cap}");
    // 3 and 6 sessions/s on an idle loopback server: both pass
    assert_eq!(cap["answer"]["capacity"], 6.0, "{}", cap["answer"]);
    let pts = points(&out);
    assert_eq!(pts.len(), 2);
    for p in &pts {
        let m = json(&p.join("results.json"));
        assert_eq!(
            m["valid"],
            true,
            "{}: {}",
            p.display(),
            m["invalid_reasons"]
        );
        assert_eq!(m["complete"], true, "{}", p.display());
        assert_eq!(m["merge"]["merged"], serde_json::json!([0, 1, 2]));
        let shards: Vec<serde_json::Value> = (0..3)
            .map(|i| json(&p.join(format!("shard-{i}")).join("results.json")))
            .collect();
        for (i, s) in shards.iter().enumerate() {
            assert_eq!(s["shard"]["index"], i, "{}", p.display());
            assert_eq!(s["shard"]["count"], 3);
            assert!(u(&s["started_sessions"]) > 0, "every shard ran sessions");
        }
        let total = |f: &dyn Fn(&serde_json::Value) -> u64| shards.iter().map(f).sum::<u64>();
        for f in [
            "scheduled_sessions",
            "started_sessions",
            "measured_sessions",
            "failed_sessions",
            "skipped_requests",
        ] {
            assert_eq!(u(&m[f]), total(&|s| u(&s[f])), "{f} of {}", p.display());
        }
        for f in ["completed_requests", "started", "completed", "failed"] {
            assert_eq!(
                common::interval_sum(&m, f),
                total(&|s| common::interval_sum(s, f)),
                "intervals.{f}"
            );
        }
        for (name, c) in m["classes"].as_object().unwrap() {
            for f in ["measured_sessions", "requests", "bytes"] {
                assert_eq!(
                    u(&c[f]),
                    total(&|s| s["classes"].get(name).map_or(0, |x| u(&x[f]))),
                    "class {name} {f}"
                );
            }
        }
        let bytes: u64 = m["classes"]
            .as_object()
            .unwrap()
            .values()
            .map(|c| u(&c["bytes"]))
            .sum();
        assert!(bytes > 0);
    }
    // the points' sessions: rate x window, as in process
    let started: Vec<u64> = pts
        .iter()
        .map(|p| u(&json(&p.join("results.json"))["started_sessions"]))
        .collect();
    assert_eq!(started, vec![6, 12]);
}

/// `requests.csv` rows of a point (one file, or one per shard): session id
/// -> the scheduled time of its first request, s from the point's start.
fn first_requests(files: &[PathBuf]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for f in files {
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for line in text.lines().skip(1) {
            let c: Vec<&str> = line.split(',').collect();
            if c[3] == "0" {
                let at: f64 = c[7].parse().unwrap();
                assert!(m.insert(c[0].to_string(), at).is_none(), "{line}");
            }
        }
    }
    m
}

/// One point at the same rate and seed in 1 and in 3 processes: the same
/// sessions (ids), each started at the same offset from the point's start.
#[test]
fn one_and_three_processes_run_the_same_sessions_at_the_same_offsets() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path());
    let server = Running::start(&root, |_| {});
    let run = |n: &str| {
        let out = t.path().join(format!("cap{n}"));
        let args = capacity_args(
            &w,
            &server.url(""),
            &out,
            &[
                "--client-processes",
                n,
                "--window",
                "2",
                "--start",
                "7",
                "--max-points",
                "1",
                "--seed",
                "11",
                "--requests-csv",
            ],
        );
        capacity_ok(&args);
        let p = points(&out).remove(0);
        (json(&p.join("results.json")), p)
    };
    let (one, p1) = run("1");
    let (three, p3) = run("3");
    assert_eq!(u(&one["measured_sessions"]), 14, "7/s for 2 s");
    assert_eq!(one["measured_sessions"], three["measured_sessions"]);
    assert_eq!(one["started_sessions"], three["started_sessions"]);
    assert_eq!(one["seed"], three["seed"]);
    assert_eq!(one["arrivals"], three["arrivals"]);
    assert!(one.get("merge").is_none() && three["merge"]["shards"] == 3);
    let a = first_requests(&[p1.join("requests.csv")]);
    let b = first_requests(
        &(0..3)
            .map(|i| p3.join(format!("shard-{i}/requests.csv")))
            .collect::<Vec<_>>(),
    );
    assert_eq!(a.len(), 14);
    // the point's own requests.csv joins the shards' (vodlab report reads it)
    let joined = first_requests(&[p3.join("requests.csv")]);
    assert_eq!(joined, b);
    let rows = |f: &Path| fs::read_to_string(f).unwrap().lines().count();
    assert_eq!(
        rows(&p3.join("requests.csv")),
        1 + (0..3)
            .map(|i| rows(&p3.join(format!("shard-{i}/requests.csv"))) - 1)
            .sum::<usize>()
    );
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "the same sessions"
    );
    // a first request is sent when its session starts: its offset plus the
    // start's lateness (the 1000 ms threshold above; on two loaded cores a
    // start is typically a few ms late)
    let worst = a
        .iter()
        .map(|(id, x)| (x - b[id]).abs())
        .fold(0.0f64, f64::max);
    eprintln!(
        "largest offset difference, 1 vs 3 processes: {:.1} ms",
        worst * 1e3
    );
    assert!(worst < 0.25, "offsets differ by up to {worst} s");
}

/// The flag is checked, documented with an example, and on every command
/// that runs points.
#[test]
fn the_flag_is_checked_and_documented() {
    let help = vodlab_ok(&["capacity", "--help"]);
    assert!(help.contains("--client-processes <N>"), "{help}");
    assert!(help.contains("--client-processes 4"), "an example: {help}");
    for cmd in ["compare", "bench"] {
        let h = vodlab_ok(&[cmd, "--help"]);
        assert!(h.contains("--client-processes"), "{cmd}: {h}");
    }
    let run = vodlab_ok(&["run", "--help"]);
    assert!(run.contains("--one-arrival-process"), "{run}");
    let t = tempfile::tempdir().unwrap();
    let (w, _) = workload(t.path());
    for bad in ["0", "1025", "x"] {
        let o = vodlab(&[
            "capacity",
            w.to_str().unwrap(),
            "--target",
            "http://127.0.0.1:1",
            "--client-processes",
            bad,
        ]);
        assert!(!o.status.success(), "{bad}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("--client-processes"), "{bad}: {e}");
    }
}

/// The child processes of `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let mut kids = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so after ')'
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = rest.split(' ').nth(1).unwrap().parse().unwrap();
        if ppid == pid {
            kids.push(p);
        }
    }
    kids
}

/// SIGTERM to a search stops its client processes and reports the point
/// interrupted, with the shards' partial results merged.
#[test]
fn sigterm_stops_the_client_processes_and_the_point_is_interrupted() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path());
    let server = Running::start(&root, |_| {});
    let out = t.path().join("cap");
    // 2 sessions/s for 60 s: a point far longer than the test waits
    let args = capacity_args(
        &w,
        &server.url(""),
        &out,
        &[
            "--client-processes",
            "2",
            "--start",
            "2",
            "--window",
            "60",
            "--max-points",
            "1",
        ],
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = c.id();
    let mut kids = Vec::new();
    common::wait_until("two client processes", Duration::from_secs(20), || {
        if let Some(st) = c.try_wait().unwrap() {
            let mut e = String::new();
            std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut e).unwrap();
            panic!("capacity ended early ({st}): {e}");
        }
        kids = children_of(pid);
        kids.len() == 2
    });
    // the children have started sessions: each opens its own connection
    // (h1), so two more accepted connections than when the children
    // appeared are two sessions at least (the search's own statistics
    // fetches come before it starts the children, which then wait for T)
    let before = server.server().state.stats().connections;
    common::wait_until("two sessions started", Duration::from_secs(20), || {
        server.server().state.stats().connections >= before + 2
    });
    let dir = out.join("points/01-rate-2.0000-run-1");
    // SAFETY: signalling the process this test started, by its PID
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let mut code = None;
    common::wait_until("capacity to stop", Duration::from_secs(20), || {
        code = c.try_wait().unwrap();
        code.is_some()
    });
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // stopped by SIGTERM: 128 + 15 (README "Exit statuses")
    assert_eq!(code.unwrap().code(), Some(143), "stopped early: {err}");
    for k in &kids {
        let gone = fs::read_to_string(format!("/proc/{k}/stat"))
            .map_or(true, |s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'));
        assert!(gone, "client process {k} still running");
    }
    let cap = json(&out.join("capacity.json"));
    assert_eq!(cap["outcome"]["kind"], "interrupted", "{}", cap["outcome"]);
    let m = json(&dir.join("results.json"));
    assert_eq!(m["complete"], false);
    assert_eq!(m["merge"]["merged"], serde_json::json!([0, 1]), "{m}");
    // stopped by the search, not by a fault of their own
    let why = m["invalid_reasons"].to_string();
    assert!(!why.contains("was interrupted"), "{why}");
    for i in 0..2 {
        let s = json(&dir.join(format!("shard-{i}/results.json")));
        assert_eq!(s["stopped_by"], "interrupted");
    }
    assert!(u(&m["started_sessions"]) >= 2, "{}", m["started_sessions"]);
}
