//! `vodlab report` reads what the other commands write: `analyze`'s
//! analysis.json (a small log's too, whose flat fit piece has no finite
//! growth factor), `run`'s and `merge`'s results.json, `capacity`'s
//! capacity.json and `compare`'s compare.json, each made here at a tiny
//! scale, and writes report.html in the current directory (never beside
//! its inputs) unless `-o` says where. Also: an error names its OS error
//! once, and `fileset create` shows its progress when stderr is not a
//! terminal.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use common::{vodlab, vodlab_ok, Running};

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .expect("JSON")
}

fn text(o: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `vodlab report INPUT...` in `cwd` with no `-o`; asserts exit 0,
/// that it wrote `cwd/report.html` and nothing beside the inputs, and
/// returns the page.
fn report_here(cwd: &Path, inputs: &[&Path]) -> String {
    let out = cwd.join("report.html");
    assert!(!out.exists(), "{} left from before", out.display());
    let o = Command::new(env!("CARGO_BIN_EXE_vodlab"))
        .arg("report")
        .args(inputs)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for i in inputs {
        let dir = if i.is_dir() { i } else { i.parent().unwrap() };
        assert!(
            !dir.join("report.html").exists(),
            "report wrote into its input's directory {}",
            dir.display()
        );
    }
    let html = std::fs::read_to_string(&out).expect("report.html in the current directory");
    std::fs::remove_file(&out).unwrap();
    assert!(
        !html.contains("<script") && !html.contains("src=\"http"),
        "self-contained"
    );
    html
}

/// The run table's "measured (of started started)" cell of a results.json.
fn sessions_cell(r: &serde_json::Value) -> String {
    format!(
        "{} (of {} started)",
        r["measured_sessions"], r["started_sessions"]
    )
}

#[test]
fn analysis_of_a_small_log_renders_with_its_flat_fit_piece() {
    let d = tempfile::tempdir().unwrap();
    let cwd = d.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    // one chain of 100 kB and six of 30 MB: the survival function is flat
    // (6/7) from 1 MB to 30 MB, so the 1 MB..200 MB piece has c = 0 and an
    // infinite growth factor, which JSON writes as null
    let mut log = String::from("start_s,end_s,session,file,offset,bytes\n0,1,a,/a,0,100000\n");
    for i in 0..6 {
        log.push_str(&format!("{},{},s{i},/f{i},0,30000000\n", i + 1, i + 2));
    }
    let csv = d.path().join("small.csv");
    std::fs::write(&csv, log).unwrap();
    let a_dir = d.path().join("a");
    vodlab_ok(&[
        "analyze",
        csv.to_str().unwrap(),
        "-o",
        a_dir.to_str().unwrap(),
    ]);
    let a = json(&a_dir.join("analysis.json"));
    let mid = a["fit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["from"] == 1e6)
        .unwrap_or_else(|| panic!("no 1 MB piece: {a}"));
    assert!(mid["growth"].is_null(), "{mid}");
    assert_eq!(mid["c"], 0.0, "{mid}");

    // the directory and the file itself
    for input in [a_dir.clone(), a_dir.join("analysis.json")] {
        let html = report_here(&cwd, &[&input]);
        assert!(html.contains("Access-log analysis"), "{html}");
        assert!(html.contains("7 sessions, 7 chains"), "{html}");
        // the flat piece's row: c 0, no growth factor, r² 1
        assert!(
            html.contains("<td>0.0000</td><td>-</td>"),
            "flat piece row missing: {html}"
        );
        assert!(!html.contains("NaN") && !html.contains("inf<"), "{html}");
    }

    // -o still decides where
    let elsewhere = d.path().join("elsewhere.html");
    let o = vodlab(&[
        "report",
        a_dir.to_str().unwrap(),
        "-o",
        elsewhere.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read_to_string(&elsewhere)
        .unwrap()
        .contains("Access-log analysis"));
    assert!(!a_dir.join("report.html").exists());
}

/// A tiny workload (4 titles of 2 MB chunks, 40 sessions) and its real file
/// set; returns (workload, root). Checks that `fileset create`, with stderr
/// a pipe, printed plain progress lines.
fn tiny(dir: &Path) -> (PathBuf, PathBuf) {
    let w = dir.join("w");
    let root = dir.join("files");
    vodlab_ok(&[
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
    let o = vodlab(&[
        "fileset",
        "create",
        w.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("writing: ")).collect();
    // a line at the first report, then at each tenth, up to 100 %
    assert!(lines.len() >= 10, "{err}");
    assert!(
        lines.last().unwrap().starts_with("writing: 100 % ("),
        "{err}"
    );
    for pct in (10..=90).step_by(10) {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("writing: {pct} % "))),
            "no {pct} % line: {err}"
        );
    }
    (w, root)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `common::ONE_POINT` with every request's row written (the report
/// draws them): the arguments `capacity` and `compare` share here.
fn one_point() -> Vec<&'static str> {
    let mut v = common::ONE_POINT.to_vec();
    v.push("--requests-csv");
    v
}

#[test]
fn runs_merges_capacity_and_compare_render() {
    common::raise_nofile();
    let d = tempfile::tempdir().unwrap();
    let cwd = d.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let (w, root) = tiny(d.path());
    let ws = w.to_str().unwrap();
    let server = Running::start(&root, |_| {});
    let target = server.url("");
    let target = target.trim_end_matches('/');

    // two shard processes of one run: each is a run's results.json, and
    // merge makes one of them
    let start_at = format!("{:.3}", unix_now() + 2.0);
    let shards: Vec<PathBuf> = (0..2).map(|i| d.path().join(format!("s{i}"))).collect();
    let kids: Vec<_> = shards
        .iter()
        .enumerate()
        .map(|(i, out)| {
            Command::new(env!("CARGO_BIN_EXE_vodlab"))
                .args([
                    "run",
                    ws,
                    "--target",
                    target,
                    "--rate",
                    "20",
                    "--sessions",
                    "20",
                    "--arrivals",
                    "constant",
                    "--no-shaping",
                    "--no-pacing",
                    "--ramp-up",
                    "0",
                    "--ramp-down",
                    "0",
                    "--late-threshold-ms",
                    "1000",
                    "--requests-csv",
                    "--quiet",
                    "--shard",
                    &format!("{i}/2"),
                    "--start-at",
                    &start_at,
                    "-o",
                    out.to_str().unwrap(),
                ])
                .output()
                .unwrap()
        })
        .collect();
    for k in &kids {
        assert!(k.status.success(), "{}", text(k));
    }
    let run = json(&shards[0].join("results.json"));
    assert_eq!(run["format"], "vodlab-results");
    assert!(run["started_sessions"].as_u64().unwrap() > 0, "{run}");
    let html = report_here(&cwd, &[&shards[0]]);
    assert!(html.contains("run figures"), "{html}");
    assert!(html.contains(&sessions_cell(&run)), "{html}");

    let merged = d.path().join("merged");
    vodlab_ok(&[
        "merge",
        shards[0].to_str().unwrap(),
        shards[1].to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    let m = json(&merged.join("results.json"));
    let started: u64 = shards
        .iter()
        .map(|s| {
            json(&s.join("results.json"))["started_sessions"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(m["started_sessions"].as_u64().unwrap(), started);
    let html = report_here(&cwd, &[&merged]);
    assert!(html.contains(&sessions_cell(&m)), "{html}");

    // capacity: one point against the running server
    let cap_dir = d.path().join("cap");
    let mut args = vec!["capacity", ws, "--target", target];
    args.extend(one_point());
    args.extend(["-o", cap_dir.to_str().unwrap()]);
    vodlab_ok(&args);
    let cap = json(&cap_dir.join("capacity.json"));
    assert_eq!(cap["format"], "vodlab-capacity");
    assert_eq!(
        cap["search"]["points"].as_array().unwrap().len(),
        1,
        "{cap}"
    );
    let html = report_here(&cwd, &[&cap_dir.join("capacity.json")]);
    // no server name against a bare --target
    let server_name = cap["server"].as_str().unwrap_or("server");
    assert!(
        html.contains(&format!("Capacity of {server_name}")),
        "{html}"
    );
    assert!(html.contains("in send order"), "requests.csv read: {html}");
    drop(server);

    // compare: one row, vodlab serve started by compare itself
    let cmp_dir = d.path().join("cmp");
    let port = common::free_port().to_string();
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
    ];
    args.extend(one_point());
    args.extend(["-o", cmp_dir.to_str().unwrap()]);
    vodlab_ok(&args);
    let cmp = json(&cmp_dir.join("compare.json"));
    assert_eq!(cmp["format"], "vodlab-compare");
    assert!(cmp["servers"][0]["error"].is_null(), "{cmp}");
    // several inputs, one page
    let html = report_here(&cwd, &[&cmp_dir, &merged]);
    for want in ["Comparison", "Capacity of vodlab-vanilla", "run figures"] {
        assert!(html.contains(want), "report lacks {want}: {html}");
    }
}

#[test]
fn an_os_error_is_named_once() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing");
    let m = missing.to_str().unwrap();
    let root = d.path().join("root");
    let r = root.to_str().unwrap();
    // each error's message embeds its chained source (thiserror's
    // "{path}: {source}"), some under an anyhow context as well: `{:#}`
    // printed the OS error twice
    for args in [
        vec!["fileset", "create", m, "--root", r],
        vec!["capacity", m, "--target", "http://127.0.0.1:9"],
        vec!["script", "check", m],
    ] {
        let o = vodlab(&args);
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("vodlab: error: "))
            .unwrap_or_else(|| panic!("{args:?}: {err}"));
        assert_eq!(
            line.matches("No such file or directory (os error 2)")
                .count(),
            1,
            "{args:?}: {line}"
        );
        assert!(line.contains(m), "{args:?}: the path is named: {line}");
    }
}
