//! `--time-compression K` end to end: a paced session replayed at k = 10
//! takes a tenth of its nominal time (flag and `VODLAB_TIME_COMPRESSION`),
//! `vodlab box --time-compression` hands k to the drive and the command,
//! and bad factors are refused naming the flag.

mod common;

use std::process::Command;

use common::{results, vodlab, vodlab_ok, Running};

/// One session, four requests 8 s apart (24 s of pacing, nominal), with
/// 5 s deadlines.
const SCRIPT: &str = "#@session id=1 bitrate=419430 request_s=8\n\
/a.bin timeout=5\n\
/a.bin timeout=5 pacing=8\n\
/a.bin timeout=5 pacing=8\n\
/a.bin timeout=5 pacing=8\n";

fn run(script: &std::path::Path, port: u16, out: &std::path::Path, env: bool) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vodlab"));
    c.args([
        "run",
        script.to_str().unwrap(),
        "--target",
        &format!("http://127.0.0.1:{port}"),
        "--rate",
        "1",
        "--no-shaping",
        "--check-bytes",
        "0",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ]);
    if env {
        c.env("VODLAB_TIME_COMPRESSION", "10");
    } else {
        c.args(["--time-compression", "10"]);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_paced_session_at_k_10_takes_a_tenth_of_its_nominal_time() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("a.bin"), vec![7u8; 100_000]).unwrap();
    let script = d.path().join("s.vsl");
    std::fs::write(&script, SCRIPT).unwrap();
    let s = Running::start(&root, |_| {});
    for (env, name) in [(false, "flag"), (true, "env")] {
        let out = d.path().join(name);
        run(&script, s.addr.port(), &out, env);
        let r = results(&out);
        assert_eq!(r["failed_sessions"], 0, "{r}");
        assert_eq!(r["completed_requests"], 4, "{r}");
        // three pacing gaps of 0.8 s at k = 10; 24 s at k = 1
        let secs = r["duration_s"].as_f64().unwrap();
        assert!(
            (2.4..12.0).contains(&secs),
            "{name}: {secs} s (nominal 24 s, compressed 2.4 s)"
        );
    }
}

#[test]
fn bad_factors_are_refused_naming_the_flag() {
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("s.vsl");
    std::fs::write(&script, SCRIPT).unwrap();
    let err = |args: &[&str]| {
        let o = vodlab(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let s = script.to_str().unwrap();
    for k in ["0", "-1", "nan", "1001"] {
        let flag = format!("--time-compression={k}");
        let e = err(&[
            "run",
            s,
            "--target",
            "http://127.0.0.1:9",
            "--rate",
            "1",
            &flag,
        ]);
        assert!(e.contains("--time-compression"), "run {k}: {e}");
        let e = err(&["serve", "--root", ".", "--listen", "127.0.0.1:0", &flag]);
        assert!(e.contains("time_compression"), "serve {k}: {e}");
    }
    let e = err(&[
        "serve",
        "--root",
        ".",
        "--listen",
        "127.0.0.1:0",
        "--time-compression",
        "10",
        "--prefetch-policy",
        "first-grow:16M,idle=0",
    ]);
    assert!(e.contains("first-grow") && e.contains("idle"), "{e}");
    let e = err(&[
        "capacity",
        s,
        "--target",
        "http://127.0.0.1:9",
        "--time-compression",
        "2000",
    ]);
    assert!(e.contains("--time-compression"), "{e}");
}

#[test]
fn box_gives_k_to_the_drive_and_to_the_command() {
    // SAFETY: no arguments, cannot fail
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/fuse").exists() {
        eprintln!("not root or no /dev/fuse: vodlab box --disk cannot run here");
        return;
    }
    common::require("fusermount3", "fuse3");
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("w");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011-2mb",
        "--scale",
        "0.002",
        "--sessions",
        "5",
        "-o",
        w.to_str().unwrap(),
    ]);
    let o = vodlab(&[
        "box",
        "--disk",
        "hitachi-5k3000",
        "--mem",
        "256M",
        "--workload",
        w.to_str().unwrap(),
        "--name",
        "vodlab-test-tc-box",
        "--time-compression",
        "10",
        "--",
        "sh",
        "-c",
        "echo \"k=$VODLAB_TIME_COMPRESSION arg={k}\"",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("k=10 arg=10"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // the drive's statistics line names the drive's k
    assert!(err.contains("(k = 10)"), "{err}");
}
