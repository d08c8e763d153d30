//! `vodlab gen` and `vodlab script` from the command line.

mod common;

use common::{vodlab, vodlab_ok};
use std::fs;
use std::path::Path;

fn read_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn same_spec_and_seed_give_byte_identical_output() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let b = t.path().join("b");
    let c = t.path().join("c");
    for d in [&a, &b] {
        vodlab_ok(&[
            "gen",
            "--preset",
            "youtube-2011",
            "--seed",
            "7",
            "-o",
            d.to_str().unwrap(),
        ]);
    }
    let (ta, tb) = (read_tree(&a), read_tree(&b));
    assert_eq!(
        ta.len(),
        4 + 12,
        "manifest, spec, catalog, stats and 12 shards"
    );
    assert!(ta == tb, "outputs differ");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011",
        "--seed",
        "8",
        "-o",
        c.to_str().unwrap(),
    ]);
    assert!(
        read_tree(&c) != ta,
        "a different seed must change the workload"
    );
}

#[test]
fn resolved_spec_regenerates_the_same_workload() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let b = t.path().join("b");
    vodlab_ok(&[
        "gen",
        "--preset",
        "cloudsuite-2016",
        "--scale",
        "0.05",
        "--seed",
        "3",
        "-o",
        a.to_str().unwrap(),
    ]);
    let spec = a.join("spec.toml");
    vodlab_ok(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "-o",
        b.to_str().unwrap(),
    ]);
    let strip = |v: Vec<(String, Vec<u8>)>| {
        v.into_iter()
            .filter(|(n, _)| n != "spec.toml")
            .collect::<Vec<_>>()
    };
    assert!(strip(read_tree(&a)) == strip(read_tree(&b)));
}

#[test]
fn stats_json_has_the_table_3_3_names() {
    let t = tempfile::tempdir().unwrap();
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011",
        "--scale",
        "0.1",
        "-o",
        t.path().to_str().unwrap(),
    ]);
    let stats: serde_json::Value =
        serde_json::from_slice(&fs::read(t.path().join("stats.json")).unwrap()).unwrap();
    for key in [
        "sessions",
        "unique_titles",
        "single_session_titles_pct",
        "mean_title_duration_s",
        "mean_title_size_mb",
        "mean_session_time_s",
        "requests_per_session",
        "unique_chunks",
        "total_chunks",
        "chunks_viewed_once",
    ] {
        assert!(stats[key].is_number(), "stats.json lacks {key}: {stats}");
    }
    assert_eq!(stats["sessions"], 720);
    assert_eq!(stats["titles"], 1000);
}

#[test]
fn shards_split_sessions_round_robin() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("w");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011",
        "--sessions",
        "100",
        "--shards",
        "4",
        "-o",
        d.to_str().unwrap(),
    ]);
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(d.join("workload.json")).unwrap()).unwrap();
    let shards = m["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 4);
    assert!(shards.iter().all(|s| s["sessions"] == 25));
    let s1 = fs::read_to_string(d.join("sessions/shard-01.vsl")).unwrap();
    assert!(s1.contains("#@session id=1 "));
    assert!(s1.contains("#@session id=5 "));
    let out = vodlab_ok(&["script", "check", d.to_str().unwrap()]);
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(out.contains("25 sessions"), "{out}");
}

#[test]
fn list_and_show_presets() {
    let out = vodlab_ok(&["gen", "--list-presets"]);
    for p in [
        "youtube-2011 ",
        "youtube-2011-2mb",
        "youtube-2011-unchunked",
        "youtube-2011-sd",
        "youtube-2011-hd",
        "youtube-2011-mixed",
        "cloudsuite-2016",
    ] {
        assert!(out.contains(p), "{p} missing from:\n{out}");
    }
    let toml = vodlab_ok(&["gen", "--show-preset", "youtube-2011"]);
    assert!(toml.contains("alpha = 0.8"));
}

#[test]
fn bad_spec_names_file_key_and_reason() {
    let t = tempfile::tempdir().unwrap();
    let spec = t.path().join("bad.toml");
    let good = vodlab_ok(&["gen", "--show-preset", "youtube-2011"]);
    fs::write(
        &spec,
        good.replace("[0.601, 244.0]", "")
            .replace("[0.597, 244.0]", "[0.597, 100.0]"),
    )
    .unwrap();
    let out = vodlab(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "-o",
        t.path().join("o").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml"), "{err}");
    assert!(
        err.contains("catalog.duration.points[12]: CDF not monotone: value 100 after 228"),
        "{err}"
    );
    assert!(
        !t.path().join("o").exists(),
        "nothing is written for an invalid spec"
    );

    fs::write(
        &spec,
        good.replace("[measurement]", "[measurement]\nwarmup = 3"),
    )
    .unwrap();
    let out = vodlab(&[
        "gen",
        "--spec",
        spec.to_str().unwrap(),
        "-o",
        t.path().join("o").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown field `warmup`") && err.contains("measurement"),
        "{err}"
    );
}

#[test]
fn refuses_a_foreign_directory() {
    let t = tempfile::tempdir().unwrap();
    fs::write(t.path().join("precious.txt"), "keep me").unwrap();
    let out = vodlab(&[
        "gen",
        "--preset",
        "youtube-2011",
        "--scale",
        "0.01",
        "-o",
        t.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert_eq!(
        fs::read_to_string(t.path().join("precious.txt")).unwrap(),
        "keep me"
    );
}

#[test]
fn script_check_reports_line_and_column() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("s.vsl");
    fs::write(&f, "/a timeout=10\n/b timeout=ten\n").unwrap();
    let out = vodlab(&["script", "check", f.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("s.vsl: line 2, column 4: `timeout=ten`"),
        "{err}"
    );
}

#[test]
fn export_reports_what_httperf_cannot_express() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("w");
    vodlab_ok(&[
        "gen",
        "--preset",
        "youtube-2011-unchunked",
        "--sessions",
        "10",
        "--shards",
        "1",
        "-o",
        d.to_str().unwrap(),
    ]);
    let out = vodlab(&[
        "script",
        "export",
        d.to_str().unwrap(),
        "--to",
        "httperf",
        "-o",
        t.path().join("x").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exported 0 of 10 sessions"), "{err}");
    assert!(
        err.contains("10 x session left out: range requests"),
        "{err}"
    );
}
