//! The answer in viewers' units (`vodlab capacity`, `bench`, `compare`):
//! concurrent viewers and delivered Gbit/s at the failure-free point,
//! checked against ground truth from a workload whose sessions have known
//! durations and sizes.

mod common;

use std::path::Path;

use common::{sparse_fileset, vodlab_ok, Running};

/// Every session: 8 requests of 0.5 s of content, the first at its start
/// and each later one 0.5 s after the previous (`buffering_requests = 1`,
/// `pacing_s = 0.5`), so it lasts 3.5 s plus its last response. Two
/// representations (400 and 1,600 kbit/s), half the sessions each.
const SPEC: &str = r#"
name = "known-durations"

[catalog]
titles = 20
popularity = { kind = "zipf", alpha = 0.8 }
duration = { kind = "constant", value = 4.0 }
storage = { layout = "single" }

[[catalog.representations]]
name = "lo"
bitrate_kbps = 400.0

[[catalog.representations]]
name = "hi"
bitrate_kbps = 1600.0

[sessions]
count = 60
request_s = 0.5
buffering_requests = 1
pacing_s = 0.5
timeout_s = 10.0
viewing_fraction = { kind = "constant", value = 1.0 }
representation = { kind = "mix", weights = { lo = 0.5, hi = 0.5 } }

[[clients]]
name = "lan"
share = 1.0
down_kbps = 0.0
"#;
/// Requests per session and the paced part of a session, s.
const REQUESTS: u64 = 8;
const PACED_S: f64 = 3.5;
/// The point: 4 new sessions/s for 15 s = the workload's 60 sessions.
const RATE: f64 = 4.0;
const WINDOW_S: f64 = 15.0;

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

#[test]
fn capacity_reports_viewers_and_gbit_s_that_match_littles_law() {
    let d = tempfile::tempdir().unwrap();
    let spec = d.path().join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let w = d.path().join("w");
    let root = d.path().join("root");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "-o",
        w.to_str().unwrap(),
    ]);
    sparse_fileset(&w, &root);
    let server = Running::start(&root, |_| {});
    let out = d.path().join("out");
    let stdout = vodlab_ok(&[
        "capacity",
        w.to_str().unwrap(),
        "--target",
        &server.url(""),
        "--start",
        &RATE.to_string(),
        "--max-points",
        "1",
        "--window",
        &WINDOW_S.to_string(),
        "--drain",
        "10",
        "--no-shaping",
        // sparse files hold zeros, not the workload's content
        "--check-bytes",
        "0",
        // a shared test machine: a late start must not make the point INVALID
        "--late-threshold-ms",
        "1000",
        "--quiet",
        "-o",
        out.to_str().unwrap(),
    ]);
    let cap = json(&out.join("capacity.json"));
    let point = &cap["search"]["points"][0];
    assert_eq!(point["verdict"], "pass", "{cap}");
    let run = &point["runs"][0]["extra"];
    let r = json(
        &out.join(run["results"].as_str().unwrap())
            .join("results.json"),
    );
    let n = r["measured_sessions"].as_u64().unwrap();
    assert_eq!(n, (RATE * WINDOW_S) as u64, "every session measured");
    assert_eq!(r["failed_sessions"], 0);
    let win = r["measured_window_s"].as_array().unwrap();
    let t = win[1].as_f64().unwrap() - win[0].as_f64().unwrap();

    // Little's law over the measured window (first start to last end, which
    // holds every session): the time average of active sessions is
    // sessions x mean duration / window. A session lasts the paced 3.5 s
    // plus its last response (at most the slowest response of the run).
    let slowest_s = r["response_time_ms"]["max"].as_f64().unwrap() / 1e3;
    let lo = n as f64 * PACED_S / t;
    let hi = n as f64 * (PACED_S + slowest_s) / t;
    let at = &cap["at_capacity"];
    let mean = at["mean_active_sessions"].as_f64().unwrap();
    // The figure samples active sessions at the 1 s interval boundaries: a
    // 3.5 s session counts at 3 or 4 of them, each with probability 1/2
    // (Poisson arrivals at random phases), so the error of the sum is
    // binomial: SD 0.5 x sqrt(60) = 3.9 boundary counts of 210, 1.8 %.
    // 10 % is more than 5 SD; averaging the per-interval peaks instead (one
    // more boundary per session, about +29 %) or counting ends as starts
    // would fail it.
    assert!(
        mean >= 0.9 * lo && mean <= 1.1 * hi,
        "mean concurrency {mean:.2}, Little's law {lo:.2}..{hi:.2} ({n} sessions over {t:.2} s)"
    );
    // in steady state Little's law is rate x duration = 14; the window's
    // average is lower by the ramp up and down: 15 s of arrivals over t s
    assert!(mean < RATE * (PACED_S + slowest_s), "{mean}");
    let peak = at["peak_active_sessions"].as_u64().unwrap();
    assert!(
        peak as f64 >= mean && peak <= n,
        "peak {peak}, mean {mean:.2}, {n} sessions"
    );
    assert_eq!(run["mean_active_sessions"].as_f64().unwrap(), mean);
    assert_eq!(run["peak_active_sessions"].as_u64().unwrap(), peak);

    // Gbit/s from the workload's own byte counts: the point played every
    // session, all of which lie inside the window; the client pro-rates its
    // 0.1 s edge bins, losing at most the few requests that complete there
    // (about 2 of 480), so 3 % holds.
    let stats = json(&w.join("stats.json"));
    let catalog = json(&w.join("catalog.json"));
    let bytes: u64 = stats["bytes_per_representation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x[1].as_u64().unwrap())
        .sum();
    let per_request = |i: usize| {
        catalog["representations"][i]["request_bytes"]
            .as_u64()
            .unwrap()
    };
    let sessions_of = |i: usize| stats["sessions_per_representation"][i][1].as_u64().unwrap();
    assert_eq!(
        bytes,
        REQUESTS * (sessions_of(0) * per_request(0) + sessions_of(1) * per_request(1)),
        "stats.json's bytes are the sessions' requests"
    );
    let truth = bytes as f64 * 8.0 / t / 1e9;
    let gbit = at["delivered_gbit_s"].as_f64().unwrap();
    assert!(
        (gbit - truth).abs() <= 0.03 * truth,
        "{gbit} Gbit/s delivered, {truth} from the workload's bytes over {t:.2} s"
    );

    // the mix: each session requests 8 x 0.5 s, so hi's share of bytes is
    // 4 x its sessions over (4 x hi + lo) sessions
    let mix = cap["bitrate_mix"].as_array().unwrap();
    assert_eq!(mix.len(), 2, "{mix:?}");
    let (s_lo, s_hi) = (sessions_of(0) as f64, sessions_of(1) as f64);
    assert!(s_lo > 0.0 && s_hi > 0.0);
    let hi_bytes_pct = mix[1]["bytes_pct"].as_f64().unwrap();
    assert!(
        (hi_bytes_pct - 100.0 * 4.0 * s_hi / (4.0 * s_hi + s_lo)).abs() < 0.01,
        "{mix:?}"
    );
    assert_eq!(mix[1]["bitrate_kbps"], 1600.0);

    // the same figures on stdout, in users' units
    let line = stdout
        .lines()
        .find(|l| l.starts_with("in viewers:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains(&format!(
            "{RATE:.1} new sessions/s without a failed session"
        )) && line.contains(&format!(
            "{mean:.0} concurrent viewers on average (peak {peak})"
        )) && line.contains(&format!("{gbit:.2} Gbit/s delivered"))
            && line.contains("1600 kbit/s"),
        "{line}"
    );
}

/// The search flags whose defaults differ between commands, with the key
/// `--print-settings` names them by.
const SETTINGS: [(&str, &str); 6] = [
    ("--window", "window"),
    ("--drain", "drain"),
    ("--start", "start"),
    ("--precision", "precision"),
    ("--max-points", "max_points"),
    ("--late-threshold-ms", "late_threshold_ms"),
];

/// The text of `flag`'s entry in a `--help` page, on one line.
fn entry(help: &str, flag: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in help.lines() {
        let t = line.trim_start();
        if t.starts_with('-') {
            inside = t.split([' ', ',', '=']).any(|w| w == flag);
        }
        if inside {
            out.push(' ');
            out.push_str(t);
        }
    }
    assert!(!out.is_empty(), "no {flag} in help:\n{help}");
    out
}

/// The number after `label` in `text` (up to `]` or `;`).
fn number_after(text: &str, label: &str) -> f64 {
    let i = text
        .find(label)
        .unwrap_or_else(|| panic!("no `{label}` in {text:?}"));
    let rest = &text[i + label.len()..];
    let end = rest.find([']', ';']).unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("`{label}` not followed by a number in {text:?}"))
}

#[test]
fn help_shows_the_defaults_each_command_runs_with() {
    // capacity: clap's own default is what runs
    let help = vodlab_ok(&["capacity", "--help"]);
    let runs: serde_json::Value = serde_json::from_str(&vodlab_ok(&[
        "capacity",
        "/nonexistent",
        "--target",
        "http://127.0.0.1:1",
        "--print-settings",
    ]))
    .unwrap();
    for (flag, key) in SETTINGS {
        let shown = number_after(&entry(&help, flag), "[default: ");
        assert_eq!(shown, runs[key].as_f64().unwrap(), "capacity {flag}");
    }
    // bench: its own two sets, cached (not root, or --cached) and root's
    // emulated drive, both in --help
    let help = vodlab_ok(&["bench", "--help"]);
    let runs: serde_json::Value =
        serde_json::from_str(&vodlab_ok(&["bench", "--print-settings"])).unwrap();
    let mut differs = 0;
    for (flag, key) in SETTINGS {
        let e = entry(&help, flag);
        let cached = number_after(&e, "[default: ");
        let disk = number_after(&e, "as root on the emulated drive: ");
        assert_eq!(
            cached,
            runs["cached"][key].as_f64().unwrap(),
            "bench {flag}"
        );
        assert_eq!(
            disk,
            runs["disk"][key].as_f64().unwrap(),
            "bench {flag} (root)"
        );
        assert_eq!(e.matches("[default:").count(), 1, "one default shown: {e}");
        differs += usize::from(
            cached
                != number_after(
                    &entry(&vodlab_ok(&["capacity", "--help"]), flag),
                    "[default: ",
                ),
        );
    }
    assert!(differs >= 4, "bench's defaults are its own, not capacity's");
    // a flag given on the command line wins over both
    let runs: serde_json::Value =
        serde_json::from_str(&vodlab_ok(&["bench", "--window", "7", "--print-settings"])).unwrap();
    assert_eq!(runs["cached"]["window"], 7.0);
    assert_eq!(runs["disk"]["window"], 7.0);
}
