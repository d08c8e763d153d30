//! `vodlab simulate --player` from the command line, on Sabre's movie and
//! traces (tests/data/sabre).

mod common;

use std::path::PathBuf;

use common::{vodlab, vodlab_ok};

fn data(p: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sabre")
        .join(p)
        .display()
        .to_string()
}

fn lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect()
}

#[test]
fn one_line_per_segment_then_a_summary_matching_sabre() {
    let (movie, trace) = (data("movie.json"), data("traces/hd_fs_trace0000.json"));
    let out = vodlab_ok(&[
        "simulate", "--player", "--abr", "bola", "--movie", &movie, "--trace", &trace,
    ]);
    let v = lines(&out);
    assert_eq!(v.len(), 200, "199 segments and a summary");
    for (i, s) in v[..199].iter().enumerate() {
        assert_eq!(s["index"], i);
        for k in [
            "quality",
            "bitrate_kbps",
            "download_start_ms",
            "download_ms",
            "buffer_ms_before",
            "rebuffer_ms",
            "abandoned_attempts",
        ] {
            assert!(!s[k].is_null(), "segment {i} lacks {k}");
        }
    }
    // Sabre's bola decisions on this trace
    let oracle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("oracle.json")).unwrap()).unwrap();
    let want = &oracle["bola"]["hd_fs_trace0000"]["qualities"];
    let got: Vec<_> = v[..199].iter().map(|s| s["quality"].clone()).collect();
    assert_eq!(&serde_json::Value::from(got), want);
    let sum = &v[199]["summary"];
    assert_eq!(sum["segments"], 199);
    assert_eq!(
        sum["abandoned"],
        oracle["bola"]["hd_fs_trace0000"]["abandoned"]
    );
    let per_seg: usize = v[..199]
        .iter()
        .map(|s| s["abandoned_attempts"].as_u64().unwrap() as usize)
        .sum();
    assert_eq!(Some(per_seg as u64), sum["abandoned"].as_u64());
    assert_eq!(v[199]["abr"], "bola");
}

#[test]
fn options_reach_the_player() {
    let (movie, trace) = (data("movie.json"), data("traces/sd_fs_trace0003.json"));
    let dir = tempfile::tempdir().unwrap();
    let p1203 = dir.path().join("p1203.json");
    let out = vodlab_ok(&[
        "simulate",
        "--player",
        "--abr",
        "throughput",
        "--movie",
        &movie,
        "--trace",
        &trace,
        "--no-abandon",
        "--max-buffer",
        "12",
        "--half-life",
        "2,5",
        "--summary-only",
        "--p1203",
        p1203.to_str().unwrap(),
    ]);
    let v = lines(&out);
    assert_eq!(v.len(), 1, "--summary-only");
    assert_eq!(v[0]["summary"]["abandoned"], 0);
    assert_eq!(v[0]["config"]["max_buffer_ms"], 12000.0);
    assert_eq!(
        v[0]["config"]["half_life_ms"],
        serde_json::json!([2000.0, 5000.0])
    );
    let p: serde_json::Value = serde_json::from_slice(&std::fs::read(&p1203).unwrap()).unwrap();
    assert_eq!(p["I13"]["segments"].as_array().unwrap().len(), 199);
    assert!(p["I23"]["stalling"].is_array());
    // the buffer cap holds: no request starts above 12 − 3 s
    let full = vodlab_ok(&[
        "simulate",
        "--player",
        "--abr",
        "bba",
        "--movie",
        &movie,
        "--trace",
        &trace,
        "--max-buffer",
        "12",
    ]);
    for s in lines(&full).iter().take(199) {
        assert!(
            s["buffer_ms_before"].as_f64().unwrap() <= 9000.0 + 1e-6,
            "{s}"
        );
    }
}

#[test]
fn mistakes_are_named() {
    let movie = data("movie.json");
    let trace = data("traces/hd_fs_trace0000.json");
    let no_mode = vodlab(&["simulate", "--movie", &movie, "--trace", &trace]);
    assert!(!no_mode.status.success());
    assert!(String::from_utf8_lossy(&no_mode.stderr).contains("--player"));
    let bad_rule = vodlab(&[
        "simulate", "--player", "--abr", "mpc", "--movie", &movie, "--trace", &trace,
    ]);
    assert!(!bad_rule.status.success());
    assert!(String::from_utf8_lossy(&bad_rule.stderr).contains("unknown rule"));
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.json");
    std::fs::write(
        &t,
        r#"[{"duration_ms": 1000, "bandwidth_kbps": 0, "latency_ms": 10}]"#,
    )
    .unwrap();
    let dead = vodlab(&[
        "simulate",
        "--player",
        "--movie",
        &movie,
        "--trace",
        t.to_str().unwrap(),
    ]);
    assert!(!dead.status.success());
    assert!(String::from_utf8_lossy(&dead.stderr).contains("bandwidth_kbps"));
    let help = vodlab_ok(&["simulate", "--help"]);
    assert!(help.contains("Examples:") && help.contains("--abr"));
}
