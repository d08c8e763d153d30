//! `vodlab analyze` round trip: a workload run against `vodlab serve` and
//! against nginx, analysed from each server's access log, gives back the
//! generator's chains (one per session here) and bytes.

mod common;

use std::path::Path;

use common::{results, run_unpaced, unpaced_workload, vodlab, vodlab_ok, Nginx, Running};

fn analysis(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("analysis.json")).unwrap()).unwrap()
}

/// Checks an analysis against the run's sessions; returns the bytes it saw.
fn check(a: &serde_json::Value, sessions: u64, what: &str) -> u64 {
    let total = a["chains"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(total["form"], "total");
    // every session reads one title sequentially, back to back: one chain
    assert_eq!(total["chains"].as_u64().unwrap(), sessions, "{what}: {a:#}");
    assert_eq!(
        a["phases"]["sessions"].as_u64().unwrap(),
        sessions,
        "{what}"
    );
    let req_bytes: u64 = a["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["bytes"].as_u64().unwrap())
        .sum();
    // the chains hold every byte of the requests
    let chain_bytes = total["mb_per_chain"].as_f64().unwrap() * 1e6 * sessions as f64;
    assert!(
        (chain_bytes - req_bytes as f64).abs() < 1.0 + 1e-9 * chain_bytes,
        "{what}"
    );
    let chunk = &a["requests"][0];
    assert_eq!(chunk["form"], "chunk");
    assert_eq!(
        chunk["requests_pct"].as_f64().unwrap(),
        100.0,
        "{what}: range requests"
    );
    // nominal title time from the workload's bit rate (419.4 kbit/s)
    let tt = total["title_s_per_chain"].as_f64().unwrap();
    let mb = total["mb_per_chain"].as_f64().unwrap();
    assert!(
        (tt - mb * 1e6 * 8.0 / 419_430.4).abs() < 0.01,
        "{what}: {tt} vs {mb} MB"
    );
    // unpaced sessions last far less than 40 s: all transient
    assert_eq!(
        a["phase_shares"]["start_transient_pct"].as_f64().unwrap(),
        100.0,
        "{what}"
    );
    assert_eq!(a["phases"]["stable_phases"].as_u64().unwrap(), 0, "{what}");
    req_bytes
}

#[test]
fn chains_from_vodlab_serve_and_nginx_logs_match_the_workload() {
    let d = tempfile::tempdir().unwrap();
    let (w, root) = unpaced_workload(d.path(), "youtube-2011-unchunked", 30, 40, 1, 5);
    let script = w.join("sessions/shard-00.vsl");
    let ws = w.to_str().unwrap();

    // vodlab serve
    let log = d.path().join("serve.log");
    let out = d.path().join("r-serve");
    {
        let s = Running::start(&root, |c| c.access_log = Some(log.clone()));
        run_unpaced(&script, s.addr.port(), &out);
    } // dropped: the log is flushed at shutdown
    let sessions = results(&out)["started_sessions"].as_u64().unwrap();
    assert_eq!(sessions, 30);
    let a_dir = d.path().join("a-serve");
    let text = vodlab_ok(&[
        "analyze",
        log.to_str().unwrap(),
        "--workload",
        ws,
        "-o",
        a_dir.to_str().unwrap(),
    ]);
    assert!(
        text.contains("requests by form (thesis Table 5.2)"),
        "{text}"
    );
    let bytes = check(&analysis(&a_dir), sessions, "vodlab serve");

    // nginx with the documented log_format
    let fmt = vodlab_ok(&["analyze", "--print-nginx-format"]);
    let nlog = d.path().join("nginx.log");
    let out = d.path().join("r-nginx");
    {
        let n = Nginx::start_log_format(&root, &nlog, fmt.trim());
        run_unpaced(&script, n.port, &out);
    }
    assert_eq!(
        results(&out)["started_sessions"].as_u64().unwrap(),
        sessions
    );
    let a_dir = d.path().join("a-nginx");
    vodlab_ok(&[
        "analyze",
        nlog.to_str().unwrap(),
        "--workload",
        ws,
        "-o",
        a_dir.to_str().unwrap(),
    ]);
    // the same requests and bytes in nginx's log
    assert_eq!(check(&analysis(&a_dir), sessions, "nginx"), bytes);
}

#[test]
fn bad_lines_are_named_and_skipped_or_fatal_with_strict() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("x.csv");
    std::fs::write(
        &log,
        "start_s,end_s,session,file,offset,bytes,form\n0,1,a,/f,0,100,chunk\n1,2,a,/f,100,zz,chunk\n2,3,a,/f,100,100,chunk\n",
    )
    .unwrap();
    let o = vodlab(&["analyze", log.to_str().unwrap()]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("line 3: bytes \"zz\" is not a number; skipped"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("2 requests, 1 skipped (headers, blank lines, error statuses), 1 unreadable"),
        "{out}"
    );
    let o = vodlab(&["analyze", log.to_str().unwrap(), "--strict"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 3"));
    let o = vodlab(&["analyze", log.to_str().unwrap(), "--survival-p", "1.5"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("survival_p: must be in (0, 1)"));
}
