//! The README's exit-status table, row by row, for `vodlab run` (and the
//! usage row for every subcommand): 0 ran and passed, 1 ran and a check
//! failed, 2 bad usage or input, 3 could not run, 4 a result file not
//! written, 130/143 interrupted
//! (tests/run_cli.rs). The server is the ground-truth server, whose
//! behaviour the test scripts.

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use vodlab_client::groundtruth::{Behaviour, GroundTruthServer, Site};

fn script_workload(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join("s.vsl");
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!("/f{i}.bin range=0-9999 timeout=5\n\n"));
    }
    fs::write(&p, s).unwrap();
    p
}

fn files(n: usize) -> HashMap<String, u64> {
    (0..n).map(|i| (format!("/f{i}.bin"), 10_000)).collect()
}

fn run(w: &Path, target: &str, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args(["run", w.to_str().unwrap(), "--target", target])
        .args([
            "--rate",
            "50",
            "--quiet",
            "--check-bytes",
            "0",
            "--no-shaping",
        ])
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn run_exits_by_the_table() {
    let t = tempfile::tempdir().unwrap();
    let w = script_workload(t.path(), 6);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let good = rt
        .block_on(GroundTruthServer::start(Site {
            files: files(6),
            ..Site::default()
        }))
        .unwrap();
    let url = format!("http://{}", good.addr);

    // 0: ran and passed
    let o = run(&w, &url, &t.path().join("ok"), &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // 0: on one runtime thread, the same six sessions
    let o = run(&w, &url, &t.path().join("one-thread"), &["--threads", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // 2: no thread at all is a usage error, named
    let o = run(&w, &url, &t.path().join("no-thread"), &["--threads", "0"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--threads"), "{}", stderr(&o));
    // 0: a rule that holds
    let o = run(
        &w,
        &url,
        &t.path().join("ok2"),
        &["--fail-on", "failed_sessions_pct>0"],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // 1: a rule that is breached, named on stderr, results written
    let out = t.path().join("breach");
    let o = run(
        &w,
        &url,
        &out,
        &[
            "--fail-on",
            "completed_requests<100",
            "--fail-on",
            "failed_sessions_pct>0",
        ],
    );
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--fail-on completed_requests<100: breached (the figure is 6)"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("failed_sessions_pct>0: breached"));
    assert!(out.join("results.json").exists());
    // 2: a rule naming no figure fails before anything runs
    let started = Instant::now();
    let o = run(
        &w,
        &url,
        &t.path().join("typo"),
        &["--fail-on", "failed_session_pct>1"],
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no figure `failed_session_pct`"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("failed_sessions_pct"),
        "lists what exists: {}",
        stderr(&o)
    );
    assert!(!t.path().join("typo").join("results.json").exists());
    assert!(started.elapsed() < Duration::from_secs(10));
    let o = run(&w, &url, &t.path().join("syntax"), &["--fail-on", "p99"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("expected PATH OP VALUE"));
    // 2: bad usage
    let o = run(&w, &url, &t.path().join("usage"), &["--no-such-flag"]);
    assert_eq!(code(&o), 2);

    // 1: every session failed (the server answers 500 to everything)
    let bad: HashMap<String, Behaviour> = (0..6)
        .map(|i| {
            (
                format!("/f{i}.bin"),
                Behaviour {
                    status: Some(500),
                    ..Behaviour::default()
                },
            )
        })
        .collect();
    let broken = rt
        .block_on(GroundTruthServer::start(Site {
            files: files(6),
            behaviours: bad,
            ..Site::default()
        }))
        .unwrap();
    let out = t.path().join("allfail");
    let o = run(&w, &format!("http://{}", broken.addr), &out, &[]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no session succeeded"),
        "{}",
        stderr(&o)
    );
    let summary = fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.starts_with("!! NO SESSION SUCCEEDED"), "{summary}");
    assert!(
        summary.contains("bad status 6"),
        "errors in words: {summary}"
    );

    // 4: ran, but results.json could not be written (something that is
    // not a file holds its name: the rename fails, as a full disk fails
    // the write, tests/results_survive.rs); it is named, the summary is
    // printed anyway, and what held the name is untouched
    let out = t.path().join("unwritable");
    fs::create_dir_all(out.join("results.json").join("kept")).unwrap();
    let o = run(&w, &url, &out, &[]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("replacing {}", out.join("results.json").display())),
        "{}",
        stderr(&o)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("run against"));
    assert!(out.join("results.json").join("kept").is_dir());
    // and for merge
    let merged = t.path().join("merged");
    fs::create_dir_all(merged.join("results.json")).unwrap();
    let o = common::vodlab(&[
        "merge",
        t.path().join("ok").to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("results.json"), "{}", stderr(&o));

    // 3: nothing listens there
    let port = common::free_port();
    let started = Instant::now();
    let o = run(
        &w,
        &format!("http://127.0.0.1:{port}"),
        &t.path().join("down"),
        &[],
    );
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot connect"), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Every subcommand exits 2 on a flag it does not know (clap's usage
/// error) and on a missing input file, never 0 or 1.
#[test]
fn usage_errors_exit_2_everywhere() {
    for sub in [
        "gen", "fileset", "run", "serve", "analyze", "simulate", "merge", "k8s", "lab", "disk",
        "bench", "capacity", "box", "compare", "report", "script",
    ] {
        let o = common::vodlab(&[sub, "--no-such-flag-anywhere"]);
        assert_eq!(code(&o), 2, "{sub}: {}", stderr(&o));
    }
    let o = common::vodlab(&["report", "/nonexistent/results.json"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

/// `--fail-on` on `capacity` (over capacity.json) and `compare` (over each
/// server's row): a breached rule exits 1 and is named, a rule that holds
/// exits 0, a rule naming no figure exits 2 before any search.
#[test]
fn capacity_and_compare_judge_their_results_with_fail_on() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path().join("w");
    let root = t.path().join("root");
    common::vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011-2mb",
        "--scale",
        "0.002",
        "--sessions",
        "40",
        "--titles",
        "4",
        "-o",
        w.to_str().unwrap(),
    ]);
    common::vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    let catalog: vodlab_workload::Catalog =
        serde_json::from_slice(&fs::read(w.join("catalog.json")).unwrap()).unwrap();
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(w.join("workload.json")).unwrap()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(GroundTruthServer::start(Site {
            seed: m["seed"].as_u64().unwrap(),
            files: catalog.files().map(|(p, n)| (format!("/{p}"), n)).collect(),
            ..Site::default()
        }))
        .unwrap();
    let target = format!("http://{}", server.addr);
    let ws = w.to_str().unwrap();
    let capacity = |out: &str, rule: &str| {
        let mut args = vec!["capacity", ws, "--target", &target, "--fail-on", rule];
        args.extend(common::ONE_POINT);
        let out = t.path().join(out);
        args.extend(["-o", out.to_str().unwrap()]);
        common::vodlab(&args)
    };
    // the one point passes: its capacity is 2 sessions/s
    let o = capacity("c-hold", "answer.capacity<1");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = capacity("c-breach", "answer.capacity<1000");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--fail-on answer.capacity<1000: breached (the figure is 2"),
        "{}",
        stderr(&o)
    );
    // 3: nothing listens there (refused before the search)
    let dead = format!("http://127.0.0.1:{}", common::free_port());
    let mut args = vec!["capacity", ws, "--target", &dead];
    args.extend(common::ONE_POINT);
    let down = t.path().join("c-down");
    args.extend(["-o", down.to_str().unwrap()]);
    let o = common::vodlab(&args);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot connect"), "{}", stderr(&o));
    // 4: the search ran, capacity.json could not be written
    fs::create_dir_all(t.path().join("c-unwritable").join("capacity.json")).unwrap();
    let o = capacity("c-unwritable", "answer.capacity<1");
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "replacing {}",
            t.path()
                .join("c-unwritable")
                .join("capacity.json")
                .display()
        )),
        "{}",
        stderr(&o)
    );
    let o = capacity("c-typo", "answer.capacty<1");
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no figure `answer.capacty`"),
        "{}",
        stderr(&o)
    );
    assert!(!t.path().join("c-typo").join("capacity.json").exists());
    drop(server);

    let port = common::free_port().to_string();
    let compare = |out: &str, rule: &str| {
        let mut args = vec![
            "compare",
            ws,
            "--root",
            root.to_str().unwrap(),
            "--port",
            &port,
            "--no-box",
            "--no-seqread",
            "--servers",
            "vodlab-vanilla",
            "--fail-on",
            rule,
        ];
        args.extend(common::ONE_POINT);
        let out = t.path().join(out);
        args.extend(["-o", out.to_str().unwrap()]);
        common::vodlab(&args)
    };
    let o = compare("cmp-typo", "atcapacity.rate<1");
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no figure `atcapacity`"),
        "{}",
        stderr(&o)
    );
    let o = compare("cmp-breach", "at_capacity.rate<1000");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--fail-on at_capacity.rate<1000 (server vodlab-vanilla): breached"),
        "{}",
        stderr(&o)
    );
}
