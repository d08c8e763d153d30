//! The pacing experiment end to end, in small (`scripts/experiments/pacing.sh
//! --smoke`): 20 one-request sessions of a 200 KB file at 800 kbit/s, 500 µs
//! apart, through `vodlab lab run` with a 100 Mbit/s server egress, served by
//! `vodlab serve` unpaced and paced (user mode, 0.5 s burst). The paced
//! delivery's 100 ms windows after the burst are mostly within ±5 % of the
//! bit rate; the unpaced server's are not. Needs root (network namespaces);
//! without it the test says so and checks nothing. About 15 s.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use vodlab_lab::hwbox::is_root;

fn delivery(dir: &Path) -> Value {
    let p = dir.join("results.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number: {x}"))
}

#[test]
fn paced_windows_are_within_5pct_and_unpaced_ones_are_not() {
    if !is_root() {
        eprintln!("not root: the pacing experiment needs network namespaces; nothing checked");
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let o = Command::new("bash")
        .arg(repo.join("scripts/experiments/pacing.sh"))
        .arg("--smoke")
        .arg(&out)
        .env("VODLAB", env!("CARGO_BIN_EXE_vodlab"))
        .env("WORK", work.path().join("work"))
        .env("LAB_NAME", "tpace")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err}");
    let group = out.join("n20-100mbit");
    let paced = delivery(&group.join("user-burst"));
    let unpaced = delivery(&group.join("unpaced"));
    for r in [&paced, &unpaced] {
        assert_eq!(num(r, &["measured_sessions"]), 20.0);
        assert_eq!(num(r, &["failed_sessions"]), 0.0);
    }
    let within = |r: &Value| num(r, &["delivery", "rate_windows_within_5pct_pct"]);
    let windows = |r: &Value| num(r, &["delivery", "rate_windows"]);
    // paced: 150 KB after the 0.5 s burst at 100 KB/s = 1.5 s, ~14 full windows
    // per session; 1460 B chunks put 6 or 7 in a window (-12 % or +2 %), so
    // about 85 % of windows can be within ±5 % at best
    assert!(windows(&paced) >= 200.0, "{}", windows(&paced));
    assert!(
        within(&paced) >= 60.0,
        "paced within ±5 %: {}",
        within(&paced)
    );
    // unpaced: 200 KB at the session's share of 100 Mbit/s, several × the bit rate
    assert!(
        windows(&unpaced) > 0.0,
        "the unpaced run must have judged windows"
    );
    assert!(
        within(&unpaced) <= 10.0,
        "unpaced within ±5 %: {}",
        within(&unpaced)
    );
    // the burst brings playback forward, and the download ends when pacing says
    let dl = num(&paced, &["delivery", "download_time_s", "p50"]);
    assert!(
        (1.3..=2.0).contains(&dl),
        "paced download p50 {dl} s, expected ~1.5"
    );
    let dl_unpaced = num(&unpaced, &["delivery", "download_time_s", "p50"]);
    assert!(dl_unpaced < 1.0, "unpaced download p50 {dl_unpaced} s");
    assert!(o.status.success(), "pacing.sh --smoke failed: {err}");
    assert!(out.join("pacing.json").is_file());
}
