//! `vodlab report` on chapter 5's outputs: `vodlab analyze -o` (Tables
//! 5.2–5.4, the survival fit, phase shares) and `vodlab simulate --prefetch
//! --sweep --out` (utilisation against memory per policy). Each report must
//! carry the figures (SVG) and the numbers of the JSON it was drawn from.

mod common;

use std::fmt::Write as _;
use std::path::Path;

use common::vodlab_ok;
use serde_json::Value;

/// A small CSV log: 30 sessions 7 s apart, each a transient phase (short
/// chains to three files from offset 0, two of them fetched over parallel
/// connections), then a long chain at 1,750 kbit/s in 500 kB chunk
/// requests, a 60 s pause and more of it; every third session's long chain
/// opens with an open-ended request. Lines in completion order.
fn log() -> String {
    let mut rows: Vec<(f64, String)> = Vec::new();
    let mut push = |s: f64, e: f64, sess: u32, file: &str, off: u64, b: u64, form: &str| {
        rows.push((
            e,
            format!("{s:.3},{e:.3},s{sess},{file},{off},{b},{form},1750"),
        ));
    };
    for k in 0..30u32 {
        let t0 = k as f64 * 7.0;
        // transient: offset tables and probes at three rates, in parallel
        for (i, f) in ["/t{k}/235.mp4", "/t{k}/1050.mp4", "/t{k}/3000.mp4"]
            .iter()
            .enumerate()
        {
            let f = f.replace("{k}", &k.to_string());
            let t = t0 + i as f64 * 1.5;
            push(t, t + 0.2, k, &f, 0, 20_000, "chunk");
            push(t + 0.1, t + 0.3, k, &f, 20_000, 20_000, "chunk");
            if i < 2 {
                push(t + 0.2, t + 0.4, k, &f, 40_000, 30_000, "chunk");
            }
        }
        // stable: one long chain, paced, with a pause in the middle
        let file = format!("/t{k}/1750.mp4");
        let (mut off, mut t) = (0u64, t0 + 5.0);
        let n = 40 + (k as u64 % 5) * 10;
        for j in 0..n {
            let b = 500_000u64;
            let form = if j == 0 && k % 3 == 0 {
                "open"
            } else {
                "chunk"
            };
            push(t, t + 0.3, k, &file, off, b, form);
            off += b;
            t += if j == n / 2 {
                60.0
            } else {
                b as f64 * 8.0 / 1.75e6
            };
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut s = String::from("start_s,end_s,session,file,offset,bytes,form,bitrate_kbps\n");
    for (_, r) in rows {
        let _ = writeln!(s, "{r}");
    }
    s
}

fn json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn report(input: &Path) -> String {
    let out = input.join("report.html");
    let text = vodlab_ok(&[
        "report",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(text.contains("report:"), "{text}");
    std::fs::read_to_string(out).unwrap()
}

fn cell(v: impl std::fmt::Display) -> String {
    format!("<td>{v}</td>")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

#[test]
fn analyze_output_is_drawn_with_the_thesis_beside_it() {
    let d = tempfile::tempdir().unwrap();
    let log_path = d.path().join("log.csv");
    std::fs::write(&log_path, log()).unwrap();
    let out = d.path().join("an");
    vodlab_ok(&[
        "analyze",
        log_path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let a = json(&out.join("analysis.json"));
    assert_eq!(a["format"], "vodlab-analysis");
    let html = report(&out);
    // figures: Table 5.3 bars, the survival function, the phase bars
    assert!(html.matches("<svg").count() >= 3, "{html}");
    assert!(html.contains("Chain-length survival function"));
    // Table 5.2: every form's requests and shares, as in the JSON
    for r in a["requests"].as_array().unwrap() {
        assert!(html.contains(&cell(&r["requests"])), "{r}");
        assert!(
            html.contains(&cell(format!("{:.1}", f(&r["bytes_pct"])))),
            "{r}"
        );
    }
    // the thesis's figures beside ours (Tables 5.2, 5.3, 5.4, phases)
    for t in [
        "98.7", "34.8", "41.9", "33.0", "68.5", "189.8", "79.1", "16.4",
    ] {
        assert!(html.contains(&cell(t)), "thesis {t}");
    }
    // Table 5.3 and 5.4
    for p in a["parallel"].as_array().unwrap() {
        assert!(html.contains(&cell(&p["files"])), "{p}");
    }
    let total = a["chains"].as_array().unwrap().last().unwrap();
    assert_eq!(total["form"], "total");
    assert!(total["chains"].as_u64().unwrap() >= 30, "{a:#}");
    assert!(html.contains(&cell(&total["chains"])));
    assert!(html.contains(&cell(format!("{:.1}", f(&total["requests_per_chain"])))));
    // the fit: A, c and d/x of every piece, and a line for it in the figure
    let fit = a["fit"].as_array().unwrap();
    assert!(!fit.is_empty(), "{a:#}");
    for p in fit {
        assert!(html.contains(&cell(format!("{:.4e}", f(&p["a"])))), "{p}");
        assert!(html.contains(&cell(format!("{:.4}", f(&p["c"])))), "{p}");
        assert!(
            html.contains(&cell(format!("{:.3}", f(&p["growth"])))),
            "{p}"
        );
        assert!(
            html.contains(&format!("c = {:.3}", f(&p["c"]))),
            "legend {p}"
        );
    }
    // phase shares
    let s = &a["phase_shares"];
    for k in ["transient_time_pct", "stable_time_pct", "inactive_time_pct"] {
        assert!(html.contains(&cell(format!("{:.1}", f(&s[k])))), "{k}");
    }
    assert!(f(&s["stable_time_pct"]) > 0.0, "{s}");

    // an analysis.json written before the format tag still renders
    let old = d.path().join("old");
    std::fs::create_dir_all(&old).unwrap();
    let mut untagged = a.clone();
    untagged.as_object_mut().unwrap().remove("format");
    std::fs::write(old.join("analysis.json"), untagged.to_string()).unwrap();
    let html_old = report(&old);
    assert!(html_old.contains(&cell(&total["chains"])));
}

#[test]
fn a_prefetch_sweep_is_drawn_as_utilisation_against_memory() {
    let d = tempfile::tempdir().unwrap();
    let log_path = d.path().join("log.csv");
    std::fs::write(&log_path, log()).unwrap();
    let out = d.path().join("sim");
    vodlab_ok(&[
        "simulate",
        "--prefetch",
        "--log",
        log_path.to_str().unwrap(),
        "--sweep",
        "1MB,4MB,16MB",
        "--out",
        out.to_str().unwrap(),
    ]);
    let rows = json(&out.join("results.json"));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 15);
    let html = report(&out);
    assert!(html.contains("Prefetch simulation"), "{html}");
    assert!(html.matches("<svg").count() >= 2);
    // every policy a curve (its legend entry, an SVG text of its own line)
    // and every size a label beside each policy's point (5 policies)
    for p in [
        "fixed",
        "proportional",
        "sqrt",
        "first-grow",
        "first-grow-sr",
    ] {
        assert!(html.contains(&format!(">\n{p}\n</text>")), "{p}");
    }
    for l in ["1 MB", "4 MB", "16 MB"] {
        let n = html.matches(&format!(">\n {l}\n</text>")).count();
        assert_eq!(n, 5, "point label {l}");
    }
    // the table: every row's peak utilisation and memory
    for r in rows {
        assert!(
            html.contains(&cell(format!("{:.1}", 100.0 * f(&r["peak_utilisation"])))),
            "{r}"
        );
        assert!(
            html.contains(&cell(format!(
                "{:.3}",
                r["peak_memory_bytes"].as_u64().unwrap() as f64 / 1e9
            ))),
            "{r}"
        );
    }
    // the thesis's best beside ours
    assert!(html.contains("57 % at 7 MB, 47 GB"));
}
