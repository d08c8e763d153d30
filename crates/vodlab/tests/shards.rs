//! `vodlab run --shard I/N` processes and `vodlab merge` against an
//! in-process `vodlab serve` on loopback.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{vodlab, vodlab_ok, Running};
use vodlab_client::out::metrics::{ClassMetrics, RunMetrics, Summary};
use vodlab_client::MetricsDump;

/// An unpaced youtube-2011 workload of `sessions` sessions in 2 script
/// shards, and sparse files for its catalog.
fn workload(dir: &Path, sessions: u32) -> (PathBuf, PathBuf) {
    common::unpaced_workload(dir, "youtube-2011", sessions, 60, 2, 3)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `vodlab run` of `w` against `target` at `rate`, extra flags appended.
fn run_cmd(w: &Path, target: &str, rate: &str, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vodlab"));
    c.args([
        "run",
        w.to_str().unwrap(),
        "--target",
        target,
        "--rate",
        rate,
    ])
    .args([
        "--arrivals",
        "constant",
        "--no-shaping",
        "--no-pacing",
        "--check-bytes",
        "0",
        "--interval",
        "1",
        "--ramp-up",
        "2",
        "--ramp-down",
        "1",
        // 4 processes and the server on 2 cores: late starts beyond 10 ms
        // (the default) would make a run INVALID; the merge is under test
        "--late-threshold-ms",
        "250",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

/// Starts shard `i` of 4 at `start_at`.
fn shard(w: &Path, target: &str, rate: &str, out: &Path, i: u32, start_at: &str) -> Child {
    run_cmd(
        w,
        target,
        rate,
        out,
        &["--shard", &format!("{i}/4"), "--start-at", start_at],
    )
    .spawn()
    .unwrap()
}

fn wait_ok(c: Child) {
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Asserts that `v` follows docs/results.schema.json.
fn assert_schema(v: &serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results.schema.json");
    let schema: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Exactness on what two real runs share (counts, bytes, sessions), start
/// skew with --start-at, and the merge's percentiles equal to histograms
/// added in process from the shards' metrics.json.
#[test]
fn four_shard_processes_merge_into_the_counts_and_bytes_of_one() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), 48);
    let server = Running::start(&root, |_| {});
    let target = server.url("");
    let one = t.path().join("one");
    wait_ok(run_cmd(&w, &target, "24", &one, &[]).spawn().unwrap());

    let start_at = format!("{:.3}", unix_now() + 3.0);
    let dirs: Vec<PathBuf> = (0..4).map(|i| t.path().join(format!("s{i}"))).collect();
    let kids: Vec<Child> = (0..4)
        .map(|i| shard(&w, &target, "24", &dirs[i], i as u32, &start_at))
        .collect();
    kids.into_iter().for_each(wait_ok);
    let merged = t.path().join("merged");
    let mut args = vec!["merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["-o", merged.to_str().unwrap(), "--strict"]);
    let text = vodlab_ok(&args);
    assert!(text.contains("merged 4 of 4 shard(s)"), "{text}");
    assert!(merged.join("summary.txt").exists());

    let a = common::results(&one);
    let m = common::results(&merged);
    assert_schema(&m);
    assert_schema(&common::results(&dirs[0]));
    assert_eq!(common::results(&dirs[3])["shard"]["index"], 3);
    assert_eq!(m["complete"], true, "{m}");
    assert_eq!(m["valid"], true, "{}", m["invalid_reasons"]);
    for f in [
        "scheduled_sessions",
        "started_sessions",
        "measured_sessions",
        "failed_sessions",
        "skipped_requests",
    ] {
        assert_eq!(m[f], a[f], "{f}");
    }
    assert_eq!(u(&a["started_sessions"]), 48);
    assert_eq!(u(&a["failed_sessions"]), 0);
    assert_eq!(m["errors"], a["errors"]);
    for (name, c) in a["classes"].as_object().unwrap() {
        for f in ["measured_sessions", "requests", "bytes"] {
            assert_eq!(m["classes"][name][f], c[f], "class {name} {f}");
        }
        assert!(u(&c["bytes"]) > 0);
    }
    // every session's completions, ramps included, over the whole series
    for f in ["completed_requests", "started", "completed", "failed"] {
        assert_eq!(
            common::interval_sum(&m, f),
            common::interval_sum(&a, f),
            "intervals.{f}"
        );
    }

    // start skew of the four processes (max - min of actual starts)
    let info = &m["merge"];
    let skew = info["start_skew_s"].as_f64().unwrap();
    eprintln!(
        "start skew of 4 local shard processes: {:.2} ms",
        skew * 1e3
    );
    assert!(skew <= 0.100, "skew {skew} s");
    assert_eq!(info["origin_skew_s"].as_f64().unwrap(), 0.0);
    assert_eq!(info["merged"], serde_json::json!([0, 1, 2, 3]));

    // the merge's percentiles are the shards' histograms added, exactly
    let mut whole = RunMetrics::new(10_000);
    for d in &dirs {
        let dump: MetricsDump =
            serde_json::from_slice(&fs::read(d.join("metrics.json")).unwrap()).unwrap();
        whole.merge(&dump.metrics(0.0).unwrap());
    }
    let mut overall = ClassMetrics::default();
    whole.classes.values().for_each(|c| overall.merge(c));
    let s = Summary::of(&overall.response, 1e3);
    let got: Summary = serde_json::from_value(m["response_time_ms"].clone()).unwrap();
    assert_eq!(got, s);
    assert!(s.count > 0);
    // and a one-process run's p50 is near (timing differs between two runs)
    let p50_one = a["response_time_ms"]["p50"].as_f64().unwrap();
    eprintln!(
        "response p50/p99/p99.9: one process {p50_one:.3}/{:.3}/{:.3} ms, merged {:.3}/{:.3}/{:.3} ms",
        a["response_time_ms"]["p99"], a["response_time_ms"]["p999"], s.p50, s.p99, s.p999
    );
}

/// A shard killed mid-run (SIGKILL: no results at all) and one stopped by
/// SIGTERM (incomplete results) make the merged run incomplete, naming both.
#[test]
fn a_killed_shard_and_a_stopped_one_make_the_merge_incomplete_and_are_named() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), 48);
    let server = Running::start(&root, |_| {});
    let target = server.url("");
    let start_at = format!("{:.3}", unix_now() + 2.0);
    let dirs: Vec<PathBuf> = (0..4).map(|i| t.path().join(format!("s{i}"))).collect();
    // 12 sessions per shard at 4/s: the run lasts about 12 s. Shard 1
    // checkpoints often (the test's signal that the run is under way);
    // shard 2, to be SIGKILLed, never does, so it leaves nothing however
    // late the kill comes (a shard's default is every 10 s)
    let mut kids: Vec<Option<Child>> = (0..4)
        .map(|i| {
            let shard_flag = format!("{i}/4");
            let mut extra = vec!["--shard", &shard_flag, "--start-at", &start_at];
            match i {
                1 => extra.extend(["--checkpoint", "0.2"]),
                2 => extra.extend(["--checkpoint", "0"]),
                _ => {}
            }
            Some(run_cmd(&w, &target, "4", &dirs[i], &extra).spawn().unwrap())
        })
        .collect();
    // stop them mid-run: once shard 1 has checkpointed a completed request
    // (bounded), not after a guessed time
    let ckpt = dirs[1].join("checkpoint.json");
    common::wait_until(
        "shard 1's checkpoint with a completed request",
        Duration::from_secs(30),
        || {
            std::fs::read(&ckpt)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| common::interval_sum(&v["results"], "completed_requests") > 0)
        },
    );
    let killed = kids[2].take().unwrap();
    let stopped = kids[1].take().unwrap();
    // SAFETY: signalling children this test started, by their PIDs
    unsafe {
        libc::kill(killed.id() as i32, libc::SIGKILL);
        libc::kill(stopped.id() as i32, libc::SIGTERM);
    }
    let k = killed.wait_with_output().unwrap();
    assert!(!k.status.success());
    let s = stopped.wait_with_output().unwrap();
    // stopped by SIGTERM, its results written: 128 + 15
    assert_eq!(
        s.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&s.stderr)
    );
    for c in kids.into_iter().flatten() {
        wait_ok(c);
    }
    assert!(!dirs[2].join("results.json").exists());
    assert_eq!(common::results(&dirs[1])["complete"], false);

    let merged = t.path().join("merged");
    let mut args = vec!["merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["-o", merged.to_str().unwrap(), "--strict"]);
    let o = vodlab(&args);
    assert_eq!(o.status.code(), Some(1), "--strict: incomplete exits 1");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("INCOMPLETE"), "{text}");
    let m = common::results(&merged);
    assert_schema(&m);
    assert_eq!(m["complete"], false);
    let info = &m["merge"];
    assert_eq!(info["missing"], serde_json::json!([2]));
    assert_eq!(info["merged"], serde_json::json!([0, 1, 3]));
    let reasons = info["incomplete_reasons"].to_string();
    assert!(reasons.contains("shard 2/4"), "{reasons}");
    assert!(
        reasons.contains("shard 1/4") && reasons.contains("Interrupted"),
        "{reasons}"
    );
    assert!(reasons.contains(dirs[2].to_str().unwrap()), "{reasons}");
    // what the living shards did is all there
    let started: u64 = [0, 1, 3]
        .iter()
        .map(|&i| u(&common::results(&dirs[i])["started_sessions"]))
        .sum();
    assert_eq!(u(&m["started_sessions"]), started);
}

/// A shard that checkpoints (`--checkpoint 1`) and is then SIGKILLed
/// leaves checkpoint.json: the merge takes what it had measured, marks the
/// run incomplete and names it; a shard that finishes removes its own.
#[test]
fn a_killed_shard_with_checkpoints_contributes_what_it_measured() {
    common::raise_nofile();
    let t = tempfile::tempdir().unwrap();
    let (w, root) = workload(t.path(), 24);
    let server = Running::start(&root, |_| {});
    let target = server.url("");
    let start_at = format!("{:.3}", unix_now() + 1.0);
    let dirs: Vec<PathBuf> = (0..2).map(|i| t.path().join(format!("s{i}"))).collect();
    // 12 sessions per shard at 2/s: each lasts about 6 s
    let kids: Vec<Child> = (0..2)
        .map(|i| {
            run_cmd(
                &w,
                &target,
                "2",
                &dirs[i],
                &[
                    "--shard",
                    &format!("{i}/2"),
                    "--start-at",
                    &start_at,
                    "--checkpoint",
                    "0.5",
                ],
            )
            .spawn()
            .unwrap()
        })
        .collect();
    let mut kids = kids.into_iter();
    let (done, killed) = (kids.next().unwrap(), kids.next().unwrap());
    // kill shard 1 once it has checkpointed a completed request (bounded)
    let ckpt = dirs[1].join("checkpoint.json");
    let measured = || {
        std::fs::read(&ckpt)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| common::interval_sum(&v["results"], "completed_requests") > 0)
    };
    common::wait_until(
        "a checkpoint with a completed request",
        Duration::from_secs(20),
        measured,
    );
    // SAFETY: signalling a child this test started, by its PID
    unsafe {
        libc::kill(killed.id() as i32, libc::SIGKILL);
    }
    assert!(!killed.wait_with_output().unwrap().status.success());
    wait_ok(done);
    assert!(!dirs[1].join("results.json").exists());
    assert!(
        !dirs[0].join("checkpoint.json").exists(),
        "a finished shard removes its checkpoint"
    );
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&ckpt).unwrap()).unwrap();
    assert_eq!(c["format"], "vodlab-checkpoint");
    assert_eq!(c["results"]["stopped_by"], "checkpoint");
    assert_schema(&c["results"]);
    let dead_requests = common::interval_sum(&c["results"], "completed_requests");
    let dead_started = u(&c["results"]["started_sessions"]);

    let merged = t.path().join("merged");
    let o = vodlab(&[
        "merge",
        dirs[0].to_str().unwrap(),
        dirs[1].to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = common::results(&merged);
    assert_schema(&m);
    assert_eq!(m["complete"], false);
    assert_eq!(m["merge"]["merged"], serde_json::json!([0, 1]));
    let reasons = m["merge"]["incomplete_reasons"].to_string();
    assert!(
        reasons.contains("shard 1/2") && reasons.contains("died; its checkpoint"),
        "{reasons}"
    );
    let live = common::results(&dirs[0]);
    assert_eq!(
        common::interval_sum(&m, "completed_requests"),
        common::interval_sum(&live, "completed_requests") + dead_requests
    );
    assert_eq!(
        u(&m["started_sessions"]),
        u(&live["started_sessions"]) + dead_started
    );
}

#[test]
fn shard_and_start_at_are_checked() {
    let t = tempfile::tempdir().unwrap();
    let (w, _) = workload(t.path(), 8);
    let err = |extra: &[&str]| {
        let mut args = vec![
            "run",
            w.to_str().unwrap(),
            "--target",
            "http://127.0.0.1:1",
            "--rate",
            "1",
        ];
        args.extend(extra);
        let o = vodlab(&args);
        assert_eq!(o.status.code(), Some(2));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    assert!(err(&["--shard", "4/4"]).contains("--shard `4/4`"));
    assert!(err(&["--start-at", "1000"]).contains("in the past"));
    assert!(err(&["--start-at", "noon"]).contains("RFC 3339"));
    let help = vodlab_ok(&["merge", "--help"]);
    assert!(help.contains("vodlab merge results/s0"), "{help}");
    let empty = t.path().join("empty");
    fs::create_dir_all(&empty).unwrap();
    let o = vodlab(&[
        "merge",
        empty.to_str().unwrap(),
        "-o",
        t.path().join("m").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}
