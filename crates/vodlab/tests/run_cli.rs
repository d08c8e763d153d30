//! `vodlab run` from the command line against nginx on loopback.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{vodlab, vodlab_ok, Nginx};

fn small_workload(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let w = dir.join("w");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011",
        "--scale",
        "0.01",
        "--shards",
        "2",
        "-o",
        w.to_str().unwrap(),
    ]);
    let root = dir.join("root");
    common::sparse_fileset(&w, &root);
    (w, root)
}

#[test]
fn an_interrupted_run_writes_its_results_marked_incomplete() {
    interrupted_run_writes_incomplete_results(libc::SIGINT);
}

/// A supervisor, `timeout(1)` or a CI job stops a run with SIGTERM: the
/// results so far must be written as for Ctrl-C (before the fix the process
/// died with no results.json).
#[test]
fn a_run_stopped_by_sigterm_writes_its_results_marked_incomplete() {
    interrupted_run_writes_incomplete_results(libc::SIGTERM);
}

fn interrupted_run_writes_incomplete_results(signal: i32) {
    let t = tempfile::tempdir().unwrap();
    let (w, root) = small_workload(t.path());
    let nginx = Nginx::start(&root);
    let out = t.path().join("r");
    let child = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .args([
            "run",
            w.to_str().unwrap(),
            "--target",
            &format!("http://127.0.0.1:{}", nginx.port),
        ])
        .args([
            "--rate",
            "5",
            "--strict",
            "--interval",
            "1",
            "--check-bytes",
            "0",
            // a checkpoint every 0.2 s: the test's signal that the run is
            // under way (its signal handlers installed) and far enough along
            "--checkpoint",
            "0.2",
            "-o",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // interrupt it once it has started 5 sessions over 2 intervals (what the
    // results must show), not after a guessed time
    let ckpt = out.join(vodlab_client::CHECKPOINT_FILE);
    common::wait_until(
        "a checkpoint with 5 sessions started over 2 intervals",
        Duration::from_secs(30),
        || {
            std::fs::read(&ckpt)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|c| {
                    c["results"]["started_sessions"].as_u64() >= Some(5)
                        && c["results"]["intervals"].as_array().map_or(0, Vec::len) >= 2
                })
        },
    );
    // SAFETY: signalling the child we started, by its PID
    unsafe { libc::kill(child.id() as i32, signal) };
    let res = child.wait_with_output().unwrap();
    assert_eq!(
        res.status.code(),
        Some(128 + signal),
        "an interrupted run exits 128 + the signal, results written (signal {signal}): {}",
        String::from_utf8_lossy(&res.stderr)
    );
    let r: serde_json::Value = common::results(&out);
    assert_eq!(r["complete"], false);
    assert_eq!(r["stopped_by"], "interrupted");
    assert!(r["started_sessions"].as_u64().unwrap() >= 5, "{r}");
    assert!(r["intervals"].as_array().unwrap().len() >= 2);
    assert!(fs::read_to_string(out.join("summary.txt"))
        .unwrap()
        .contains("INCOMPLETE"));
}

#[test]
fn bad_options_are_named() {
    let t = tempfile::tempdir().unwrap();
    let (w, _) = small_workload(t.path());
    let w = w.to_str().unwrap();
    let err = |args: &[&str]| {
        let o = vodlab(args);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    assert!(
        err(&["run", w, "--target", "ftp://127.0.0.1:1", "--rate", "1"]).contains("only http://")
    );
    assert!(
        err(&["run", w, "--target", "http://127.0.0.1:1", "--rate", "0"])
            .contains("rate must be > 0")
    );
    assert!(err(&[
        "run",
        w,
        "--target",
        "http://127.0.0.1:1",
        "--steps",
        "10:1,x:2"
    ])
    .contains("`x` is not a number"));
    assert!(
        err(&["run", w, "--target", "http://192.0.2.1:80", "--rate", "1"])
            .contains("--allow-remote")
    );
    assert!(err(&[
        "run",
        "/nonexistent",
        "--target",
        "http://127.0.0.1:1",
        "--rate",
        "1"
    ])
    .contains("/nonexistent"));
}

/// A server that goes away after the run began (it accepted `run`'s first
/// connection, then stopped listening): the run ends as unreachable, writes
/// its results and exits 3 (could not run). A server that is not there at
/// all is refused before the run (exit 3, nothing written).
#[test]
fn a_refused_target_ends_the_run_with_results() {
    let t = tempfile::tempdir().unwrap();
    let (w, _) = small_workload(t.path());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // accept the first connection, then stop listening
    let gone = std::thread::spawn(move || {
        let first = listener.accept();
        drop(listener);
        first.map(drop)
    });
    let out = t.path().join("r");
    let target = format!("http://127.0.0.1:{port}");
    let o = vodlab(&[
        "run",
        w.to_str().unwrap(),
        "--target",
        &target,
        "--rate",
        "20",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ]);
    gone.join().unwrap().unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = common::results(&out);
    assert_eq!(r["stopped_by"], "server_unreachable");
    assert!(r["errors"]["refused"].as_u64().unwrap() >= 3);
    // nothing listens there now: refused before the run
    let never = t.path().join("never");
    let o = vodlab(&[
        "run",
        w.to_str().unwrap(),
        "--target",
        &target,
        "--rate",
        "20",
        "--quiet",
        "-o",
        never.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot connect"));
    assert!(!never.join("results.json").exists());
}

#[test]
fn bytes_from_a_real_file_set_are_checked() {
    let t = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = t.path().join("w");
    let spec = t.path().join("spec.toml");
    let text = vodlab_ok(&["gen", "--show-preset", "youtube-2011-unchunked"])
        .replace("pacing_s = 10.0", "pacing_s = 0.0");
    fs::write(&spec, text).unwrap();
    vodlab_ok(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "--titles",
        "12",
        "--sessions",
        "16",
        "--shards",
        "1",
        "-o",
        w.to_str().unwrap(),
    ]);
    let root = t.path().join("root");
    vodlab_ok(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    let nginx = Nginx::start(&root);
    let target = format!("http://127.0.0.1:{}", nginx.port);
    // (name, exit status: 1 when no session succeeded)
    let run = |name: &str, status: i32| -> serde_json::Value {
        let out = t.path().join(name);
        let o = vodlab(&[
            "run",
            w.to_str().unwrap(),
            "--target",
            &target,
            "--rate",
            "50",
            "--no-shaping",
            "--check-bytes",
            "1",
            "--ramp-up",
            "0",
            "--ramp-down",
            "0",
            "--requests-csv",
            "--quiet",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(status),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let errors: Vec<String> = fs::read_to_string(out.join("requests.csv"))
            .unwrap()
            .lines()
            .filter(|l| !l.ends_with(','))
            .skip(1)
            .take(3)
            .map(String::from)
            .collect();
        eprintln!("{name}: first failed requests: {errors:#?}");
        let r = common::results(&out);
        // --no-shaping outside a lab: nobody shaped the links
        assert_eq!(r["shaping_mode"], "off", "{name}");
        r
    };
    let r = run("clean", 0);
    assert_eq!(r["failed_sessions"], 0, "{r}");
    assert_eq!(r["errors"]["content_mismatch"], 0);
    // damage one byte near the start of every title file: sessions now fail with content_mismatch
    for e in fs::read_dir(&root).unwrap() {
        let dir = e.unwrap().path();
        if dir.is_dir() {
            let f = dir.join("sd.mp4");
            let mut b = fs::read(&f).unwrap();
            b[5000] ^= 0x55;
            fs::write(&f, b).unwrap();
        }
    }
    // every session meets a damaged file: none succeeds, the run fails
    let r = run("damaged", 1);
    assert_eq!(r["errors"]["content_mismatch"], r["failed_sessions"], "{r}");
    assert!(r["failed_sessions"].as_u64().unwrap() > 0);
}
