//! Absurd numbers on the flags of `vodlab bench`, `capacity` and `compare`
//! (issue 11): NaN, negative, 1e300, infinite and u64::MAX values are
//! refused at parse time with an error naming the flag (and, for numbers
//! that parse, its bound), never a panic in `Duration::from_secs_f64`, an
//! abort on an allocation, or a start of work. None of these commands gets
//! as far as reading its workload: the paths given do not exist.

mod common;

use std::process::Output;

use common::vodlab;

const ABSURD: [&str; 6] = ["nan", "-1", "1e300", "inf", "18446744073709551615", "0"];

/// A clean refusal: an exit code (no signal), no panic, no allocation
/// failure, and the flag named. Returns stderr.
fn refused(o: &Output, flag: &str) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "{flag} accepted: {stderr}");
    assert!(
        o.status.code().is_some(),
        "killed by a signal ({:?}): {stderr}",
        o.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("memory allocation"), "{stderr}");
    assert!(stderr.contains(flag), "{flag} not named: {stderr}");
    stderr
}

fn capacity(extra: &[&str]) -> Output {
    let mut args = vec![
        "capacity",
        "/nonexistent/workload",
        "--target",
        "http://127.0.0.1:9/",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    vodlab(&args)
}

fn compare(extra: &[&str]) -> Output {
    let mut args = vec![
        "compare",
        "/nonexistent/workload",
        "--root",
        "/nonexistent/files",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    vodlab(&args)
}

fn bench(extra: &[&str]) -> Output {
    let mut args = vec!["bench", "--work-dir", "/nonexistent/bench", "--quiet"];
    args.extend_from_slice(extra);
    vodlab(&args)
}

/// Every search flag, with a value inside its bound, so that a refusal
/// names the flag under test and nothing else.
const SEARCH_FLAGS: [&str; 11] = [
    "--start",
    "--min-rate",
    "--max-rate",
    "--precision",
    "--repeats",
    "--max-points",
    "--window",
    "--drain",
    "--pause",
    "--check-bytes",
    "--late-threshold-ms",
];

/// Values of a flag that are absurd for it (0 is fine for some).
fn absurd_for(flag: &str) -> Vec<&'static str> {
    let zero_ok = matches!(
        flag,
        "--drain" | "--pause" | "--check-bytes" | "--late-threshold-ms"
    );
    ABSURD
        .iter()
        .copied()
        .filter(|v| !(zero_ok && *v == "0"))
        .collect()
}

#[test]
fn capacity_refuses_absurd_search_numbers_naming_the_flag_and_bound() {
    for flag in SEARCH_FLAGS {
        for v in absurd_for(flag) {
            let arg = format!("{flag}={v}");
            let e = refused(&capacity(&[&arg]), flag);
            // a number that parses is judged against its bound, and the bound is printed
            if v.parse::<f64>().is_ok() && !e.contains("invalid value") {
                assert!(e.contains("must be"), "{arg}: {e}");
                assert!(e.contains("vodlab: error:"), "{arg}: {e}");
            }
        }
    }
    // the bound is in the message
    let e = refused(&capacity(&["--window=1e300"]), "--window");
    assert!(e.contains("from 0.1 to 86400"), "{e}");
    let e = refused(
        &capacity(&["--max-points=18446744073709551615"]),
        "--max-points",
    );
    assert!(e.contains("from 1 to 1000"), "{e}");
    for step in [
        "xnan", "x1e300", "x-1", "x1", "+nan", "+1e300", "+-1", "+0", "xinf",
    ] {
        let arg = format!("--step={step}");
        refused(&capacity(&[&arg]), "--step");
    }
}

#[test]
fn compare_refuses_absurd_search_numbers_and_workers() {
    // compare parses the same search flags before anything else
    for flag in ["--window", "--drain", "--start", "--precision"] {
        for v in absurd_for(flag) {
            let arg = format!("{flag}={v}");
            refused(&compare(&[&arg]), flag);
        }
    }
    for v in ["0", "-1", "nan", "18446744073709551615", "1000000"] {
        let arg = format!("--workers={v}");
        refused(&compare(&[&arg]), "--workers");
    }
}

#[test]
fn bench_refuses_absurd_scale_sessions_and_search_numbers() {
    for v in ABSURD {
        let arg = format!("--scale={v}");
        let e = refused(&bench(&[&arg]), "--scale");
        assert!(!e.contains("vodlab gen"), "refused only by gen: {e}");
    }
    for v in ["0", "-1", "nan", "4294967295", "18446744073709551615"] {
        let arg = format!("--sessions={v}");
        refused(&bench(&[&arg]), "--sessions");
    }
    for flag in ["--window", "--drain", "--repeats"] {
        for v in absurd_for(flag) {
            let arg = format!("{flag}={v}");
            refused(&bench(&[&arg]), flag);
        }
    }
    // nothing was started: the work directory was never created
    assert!(!std::path::Path::new("/nonexistent/bench").exists());
}
