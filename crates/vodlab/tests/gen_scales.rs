//! `vodlab gen` accepts every preset at every scale a user is likely to try
//! (0.001, 0.01, 0.1, 1), with the preset's session count and with ten times
//! it, and never writes more session scripts than the limit
//! (`vodlab_workload::limits::MAX_SHARDS`): an override of the scale or the
//! session count grows the shard size instead (docs/workload-spec.md,
//! "Command-line overrides").
//!
//! Cost: every default-count workload is written (well under a second each);
//! every ten-times workload is checked with `gen --check` (the same
//! validation, size estimate and shard layout, nothing constructed), and the
//! small-catalog ones (scales 0.001 and 0.01, where a scaled shard size of 1
//! to 10 sessions made thousands of scripts) are written too — except for
//! `netflix-2014`, whose ten-times workload (20,000 sessions of many parallel
//! requests) took 7 to 17 s and wrote about 1 GB of scripts per run here, so
//! only `--check` covers it.

mod common;

use std::path::Path;

use common::{vodlab, vodlab_ok};
use vodlab_workload::limits::MAX_SHARDS;

const SCALES: [&str; 4] = ["0.001", "0.01", "0.1", "1"];

/// The presets, from `gen --list-presets`.
fn presets() -> Vec<String> {
    vodlab_ok(&["gen", "--list-presets"])
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// `(sessions, scripts)` from `gen --check`'s sentence.
fn checked(args: &[&str]) -> (u32, u32) {
    let mut all = vec!["gen", "--check"];
    all.extend_from_slice(args);
    let out = vodlab_ok(&all);
    let words: Vec<&str> = out.split_whitespace().collect();
    let before = |w: &str| -> u32 {
        let i = words
            .iter()
            .position(|x| *x == w)
            .unwrap_or_else(|| panic!("no `{w}` in {out:?}"));
        words[i - 1].parse().unwrap_or_else(|_| panic!("{out:?}"))
    };
    (before("sessions"), before("script"))
}

/// Writes the workload and checks what was written against the request.
fn written(dir: &Path, args: &[&str], sessions: u32) {
    let mut all = vec!["gen", "--json", "-o", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = vodlab_ok(&all);
    let stats: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stats["sessions"], sessions as u64, "{args:?}");
    let scripts = std::fs::read_dir(dir.join("sessions")).unwrap().count() as u64;
    assert_eq!(stats["shards"], scripts, "{args:?}");
    assert!(
        (1..=MAX_SHARDS as u64).contains(&scripts),
        "{args:?}: {scripts} scripts"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_preset_at_every_scale_with_one_and_ten_times_its_sessions() {
    let t = tempfile::tempdir().unwrap();
    let presets = presets();
    assert!(presets.len() >= 9, "{presets:?}");
    for p in &presets {
        // the preset's own session count
        let (base, _) = checked(&["--preset", p]);
        let ten = (base * 10).to_string();
        for scale in SCALES {
            let dir = t.path().join(format!("{p}-{scale}"));
            let (n, scripts) = checked(&["--preset", p, "--scale", scale]);
            assert!((1..=MAX_SHARDS).contains(&scripts), "{p} {scale}");
            written(&dir, &["--preset", p, "--scale", scale], n);

            let args = ["--preset", p, "--scale", scale, "--sessions", &ten];
            let (n, scripts) = checked(&args);
            assert_eq!(n, base * 10, "{p} {scale}");
            assert!(
                (1..=MAX_SHARDS).contains(&scripts),
                "{p} {scale} x10: {scripts}"
            );
            if p != "netflix-2014" && ["0.001", "0.01"].contains(&scale) {
                written(&dir, &args, n);
            }
        }
    }
}

/// `vodlab bench`'s own workload (1/100 of youtube-2011 with 10,000
/// sessions), which the shard limit used to refuse.
#[test]
fn bench_workload_is_accepted() {
    let t = tempfile::tempdir().unwrap();
    let args = [
        "--preset",
        "youtube-2011",
        "--scale",
        "0.01",
        "--sessions",
        "10000",
    ];
    let (n, scripts) = checked(&args);
    assert_eq!(n, 10_000);
    assert_eq!(scripts, 10_000u32.div_ceil(10_000u32.div_ceil(MAX_SHARDS)));
    written(&t.path().join("w"), &args, n);
}

/// A spec file that itself asks for more scripts than the limit is refused
/// with the key and what to change.
#[test]
fn a_spec_with_too_many_scripts_says_what_to_change() {
    let t = tempfile::tempdir().unwrap();
    let text = vodlab_ok(&["gen", "--show-preset", "youtube-2011"])
        .replace("shard_sessions = 600", "shard_sessions = 1");
    let spec = t.path().join("s.toml");
    std::fs::write(&spec, text).unwrap();
    let out = vodlab(&["gen", "--check", "--spec", spec.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("measurement.shard_sessions") && err.contains("limit of 1024"),
        "{err}"
    );
}
