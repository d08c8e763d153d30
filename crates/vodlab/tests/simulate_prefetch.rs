//! `vodlab simulate --prefetch` end to end: a CSV trace of chains with
//! heavy-tailed lengths (as the thesis's logs, Fig. 5.13) replayed against
//! every policy, and the orderings of thesis 5.6.3 that hold for any such
//! trace checked.

mod common;

use std::fmt::Write as _;

use common::{vodlab, vodlab_ok};

/// 3,000 sessions, one chain each; lengths Pareto with c = 0.543 above
/// 20 kB (deterministic quantiles, shuffled by a fixed permutation); paced
/// at 1.75 Mbit/s in 1 MB requests, sessions starting 1 s apart.
fn trace() -> String {
    let n = 3000u64;
    let mut s = String::from("start_s,end_s,session,file,offset,bytes,form,bitrate_kbps\n");
    for k in 0..n {
        let i = (k * 1543) % n; // a permutation of 0..n
        let u = (i as f64 + 0.5) / n as f64;
        let len = ((2e4 * u.powf(-1.0 / 0.543)) as u64).min(2_000_000_000);
        let (mut off, mut t) = (0u64, k as f64);
        while off < len {
            let b = (len - off).min(1_000_000);
            let _ = writeln!(s, "{t:.3},{:.3},s{k},/f{k},{off},{b},chunk,1750", t + 0.05);
            off += b;
            t += b as f64 * 8.0 / 1.75e6;
        }
    }
    s
}

#[test]
fn policies_order_as_in_the_thesis() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("trace.csv");
    std::fs::write(&log, trace()).unwrap();
    let out = d.path().join("sim");
    let text = vodlab_ok(&[
        "simulate",
        "--prefetch",
        "--log",
        log.to_str().unwrap(),
        "--sweep",
        "1MB,2MB,4MB,8MB,16MB,64MB",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(text.contains("3000 chains"), "{text}");
    let rows: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let get = |p: &str, size: u64, k: &str| -> f64 {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == p && r["size"] == size)
            .unwrap_or_else(|| panic!("{p} {size}"))[k]
            .as_f64()
            .unwrap()
    };
    let sizes = [
        1_000_000u64,
        2_000_000,
        4_000_000,
        8_000_000,
        16_000_000,
        64_000_000,
    ];
    let util = |p: &str| {
        sizes
            .iter()
            .map(|s| get(p, *s, "peak_utilisation"))
            .collect::<Vec<_>>()
    };
    // Fixed: small sizes pay seeks, large sizes pay transfer: an interior minimum
    let f = util("fixed");
    let (imin, _) = f
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .unwrap();
    assert!(imin > 0 && imin < sizes.len() - 1, "fixed {f:?}");
    for &s in &sizes[2..] {
        // First-Grow below Fixed at the same maximum, in utilisation and memory
        assert!(
            get("first-grow", s, "peak_utilisation") < get("fixed", s, "peak_utilisation"),
            "{s}"
        );
        assert!(
            get("first-grow", s, "peak_memory_bytes") < get("fixed", s, "peak_memory_bytes"),
            "{s}"
        );
    }
    // every chain's bytes were requested once
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 5 * sizes.len());
    // bad input is named
    let o = vodlab(&[
        "simulate",
        "--prefetch",
        "--log",
        log.to_str().unwrap(),
        "--policy",
        "fixed:7XB",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unit \"XB\""));
}

#[test]
fn a_netflix_workload_is_its_own_trace() {
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("nf");
    vodlab_ok(&[
        "gen",
        "--preset",
        "netflix-2014",
        "--sessions",
        "150",
        "-o",
        w.to_str().unwrap(),
    ]);
    let out = d.path().join("sim");
    let text = vodlab_ok(&[
        "simulate",
        "--prefetch",
        "--trace-workload",
        w.to_str().unwrap(),
        "--drives",
        "36",
        "--policy",
        "fixed:7MB",
        "--policy",
        "first-grow-sr:7MB",
        "--out",
        out.to_str().unwrap(),
    ]);
    let rows: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    // both policies saw the same chains and bytes: the workload's requests
    assert!(rows[0]["chains"].as_u64().unwrap() > 150, "{text}");
    assert_eq!(rows[0]["chains"], rows[1]["chains"]);
    assert_eq!(rows[0]["requested_bytes"], rows[1]["requested_bytes"]);
    // First-Grow-SR holds far less memory than a fixed 7 MB per chain
    assert!(rows[1]["peak_memory_bytes"].as_u64() < rows[0]["peak_memory_bytes"].as_u64());
}

#[test]
fn the_mechanical_drive_model_replays_the_prefetches() {
    let d = tempfile::tempdir().unwrap();
    let w = d.path().join("nf");
    vodlab_ok(&[
        "gen",
        "--preset",
        "netflix-2014",
        "--sessions",
        "60",
        "-o",
        w.to_str().unwrap(),
    ]);
    let out = d.path().join("sim");
    let args = |disk: &str| {
        vec![
            "simulate".to_string(),
            "--prefetch".into(),
            "--trace-workload".into(),
            w.to_str().unwrap().into(),
            // the preset's 1,000 titles are about 18 TB: 12 drives of 3 TB
            "--drives".into(),
            "12".into(),
            "--policy".into(),
            "fixed:1MB".into(),
            "--policy".into(),
            "fixed:64MB".into(),
            "--disk".into(),
            disk.into(),
            "--out".into(),
            out.to_str().unwrap().into(),
            // reads as large as the policy's (serve's default cap is 16 MiB)
            "--max-prefetch".into(),
            "64MB".into(),
        ]
    };
    let a = args("mechanical");
    let text = vodlab_ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(text.contains("mechanical model (hitachi-5k3000)"), "{text}");
    let rows: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    for r in rows {
        let m = &r["mechanical"];
        // every prefetch became one read of the model, none lost
        assert_eq!(m["reads"], r["prefetches"], "{r}");
        assert_eq!(m["unplaced"], 0, "{r}");
        let (peak, mean) = (
            m["peak_utilisation"].as_f64().unwrap(),
            m["mean_utilisation"].as_f64().unwrap(),
        );
        assert!(peak > 0.0 && peak <= 1.0 && mean <= peak, "{r}");
    }
    // 64 MB reads take far longer to serve than 1 MB reads
    let svc = |i: usize| rows[i]["mechanical"]["mean_service_ms"].as_f64().unwrap();
    assert!(svc(1) > 10.0 * svc(0), "{} {}", svc(0), svc(1));
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.contains(",mech_peak_utilisation,mech_mean_utilisation,"),
        "{header}"
    );
    assert!(header.ends_with(",spec"), "{header}");
    // the linear model alone has no mechanical figures
    let a = args("linear");
    vodlab_ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let rows: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert!(rows[0].get("mechanical").is_none());
    // a profile that does not exist, and a log without the workload, are named
    let mut a = args("mechanical:no-such-drive");
    a.truncate(12);
    let o = vodlab(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no-such-drive"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let log = d.path().join("t.csv");
    std::fs::write(
        &log,
        "start_s,end_s,session,file,offset,bytes,form,bitrate_kbps\n0,1,s,/f,0,1000,chunk,1750\n",
    )
    .unwrap();
    let o = vodlab(&[
        "simulate",
        "--prefetch",
        "--log",
        log.to_str().unwrap(),
        "--policy",
        "fixed:1MB",
        "--disk",
        "mechanical",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--workload"));
}

/// `--prefetch-next-object`: three viewers each play four segment files of
/// 500,000 bytes, one request each, 4 s apart (a file per segment, as DASH
/// serves them). Without it every segment misses; with it each viewer's
/// segments after its first are read while the previous one plays (the
/// trace's next chain standing for CMCD `nor`): 9 next-object reads of
/// 500,000 bytes, 9 of 12 ranges resident, and the drive reads each
/// segment once either way. A log does not give file sizes: at the default
/// size (4M) each next-object read takes 4 MiB, counted as waste beyond
/// the 500,000 bytes its segment's viewer read.
#[test]
fn next_object_prefetch_reads_each_sessions_next_segment_ahead() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("segments.csv");
    let mut s = String::from("start_s,end_s,session,file,offset,bytes,form,bitrate_kbps\n");
    for v in 0..3 {
        for k in 0..4 {
            let t = v as f64 * 100.0 + k as f64 * 4.0;
            let _ = writeln!(
                s,
                "{t:.3},{:.3},s{v},/v{v}/seg{k}.m4s,0,500000,chunk,1000",
                t + 0.05
            );
        }
    }
    std::fs::write(&log, s).unwrap();
    let run = |name: &str, extra: &[&str]| {
        let out = d.path().join(name);
        let mut a = vec![
            "simulate",
            "--prefetch",
            "--log",
            log.to_str().unwrap(),
            "--policy",
            "fixed:500000",
            "--page-cache",
            "1G",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        let text = vodlab_ok(&a);
        let rows: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
        let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
        (text, rows[0].clone(), csv)
    };
    let (text, off, _) = run("off", &[]);
    assert!(text.contains("12 chains"), "{text}");
    assert!(!text.contains("next objs"), "{text}");
    assert_eq!(
        (off["decisions"].as_u64(), off["hits"].as_u64()),
        (Some(12), Some(0))
    );
    assert_eq!(off["next_object_reads"], 0);
    let (text, on, csv) = run("on", &["--prefetch-next-object=500000"]);
    assert!(
        text.contains("next object: each session's next object's first 500000 read"),
        "{text}"
    );
    assert!(text.contains("75.0%"), "the hit share in the table: {text}");
    assert_eq!(
        (on["decisions"].as_u64(), on["hits"].as_u64()),
        (Some(12), Some(9)),
        "{on}"
    );
    assert_eq!(on["next_object_reads"], 9);
    assert_eq!(on["next_object_bytes"], 9 * 500_000);
    assert_eq!(on["device_bytes"], off["device_bytes"]);
    assert_eq!(on["device_bytes"], 12 * 500_000);
    assert_eq!(on["prefetches"], 12);
    let header = csv.lines().next().unwrap();
    assert!(
        header.ends_with(",next_object_reads,next_object_bytes,spec"),
        "{header}"
    );
    assert!(
        csv.lines().nth(1).unwrap().contains(",9,4500000,\""),
        "{csv}"
    );
    let (_, big, _) = run("default", &["--prefetch-next-object"]);
    assert_eq!(big["hits"], 9);
    assert_eq!(big["next_object_bytes"], 9 * (4 << 20));
    assert_eq!(big["wasted_bytes"], 9 * ((4 << 20) - 500_000), "{big}");
    // a size of nothing is refused, naming the flag
    let o = vodlab(&[
        "simulate",
        "--prefetch",
        "--log",
        log.to_str().unwrap(),
        "--policy",
        "fixed:1M",
        "--prefetch-next-object=0",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("next object"), "{e}");
}
