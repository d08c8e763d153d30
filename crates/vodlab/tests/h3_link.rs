//! The in-process link of `vodlab run --protocol h3` (a wrapper of the
//! session's UDP socket: the class's rate and delay, `--link-loss`,
//! `--link-jitter`) against `vodlab serve --h3`. Ground truth: the files'
//! bytes (`--check-bytes 1` and the rows against the files on disk), the
//! seeded loss model replayed over the datagrams the link counted, quinn's
//! own counts, and the time a rate-limited transfer must take.

mod common;
mod h3common;

use std::path::{Path, PathBuf};

use common::{assert_follows_schema, vodlab, vodlab_ok, wait_until};
use h3common::{check_against_files, rows, run_h3_with, serve_h3, stats};
use vodlab_client::core::link::datagrams::{losses, session_seed};

/// A one-session workload in `dir/w` (class `link`: `down`/`up` kbit/s,
/// `delay_ms` each way) whose session asks for a `secs`-second title from
/// its start in 0.5 MiB ranges (one per 10 s), its file written by
/// `vodlab fileset create` in `dir/root`.
fn link_workload(dir: &Path, secs: u32, down: u32, up: u32, delay_ms: u32) -> (PathBuf, PathBuf) {
    let spec = format!(
        r#"name = "h3-link"
[catalog]
titles = 1
median_duration_top = 1
placement = "random"
ladder = "nested"
popularity = {{ kind = "uniform" }}
storage = {{ layout = "single", pad_s = 10.0 }}
[catalog.duration]
kind = "constant"
value = {secs}.0
[[catalog.representations]]
name = "sd"
bitrate_kbps = 419.4304
share = 1.0
[sessions]
count = 1
request_s = 10.0
buffering_requests = 3
pacing_s = 0.0
timeout_s = 60.0
selection = "title_first"
representation = {{ kind = "fixed", name = "sd" }}
[sessions.viewing_fraction]
kind = "constant"
value = 1.0
[sessions.start]
kind = "beginning"
[[clients]]
name = "link"
share = 1.0
down_kbps = {down}.0
up_kbps = {up}.0
delay_ms = {delay_ms}.0
[measurement]
ramp_up_sessions = 0
ramp_down_sessions = 0
"#
    );
    let p = |p: &Path| p.to_str().unwrap().to_string();
    let spec_path = dir.join("spec.toml");
    std::fs::write(&spec_path, spec).unwrap();
    let (w, root) = (dir.join("w"), dir.join("root"));
    vodlab_ok(&[
        "gen",
        "--spec",
        &p(&spec_path),
        "--shards",
        "1",
        "--seed",
        "5",
        "-o",
        &p(&w),
    ]);
    vodlab_ok(&["fileset", "create", &p(&w), "--root", &p(&root)]);
    (w, root)
}

fn n(v: &serde_json::Value, path: &str) -> u64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_u64()
        .unwrap_or_else(|| panic!("{path}: {v}"))
}

#[test]
fn a_lossy_link_loses_the_seeded_datagrams_and_every_byte_still_arrives() {
    let t = tempfile::tempdir().unwrap();
    // 12 ranges of 0.5 MiB: ~4,500 datagrams down, ~500 up
    let (w, root) = link_workload(t.path(), 120, 10_000, 10_000, 0);
    let (mut serve, port, ca) = serve_h3(t.path(), &root, &[]);
    let out = t.path().join("lossy");
    // --no-shaping: the class's rate and delay off, the loss on
    let r = run_h3_with(
        &w,
        &out,
        port,
        &ca,
        // no connection check: the session's is the server's one connection
        &[
            "--no-shaping",
            "--link-loss",
            "2",
            "--seed",
            "7",
            "--no-connect-check",
        ],
    );
    let rows = rows(&out);
    check_against_files(&rows, &root, &r);
    assert_eq!(rows.len(), 12);
    assert_follows_schema("results.schema.json", &r);
    let l = &r["transport"]["quic_link"];
    eprintln!("transport.quic_link: {l}");
    assert_eq!(n(l, "links"), 1, "{l}");
    // the drops are exactly what the seeded model draws over the datagrams
    // the link was offered (session 0 of shard 0; up is direction 0)
    for (dir, d) in [("up", 0), ("down", 1)] {
        let offered =
            n(l, &format!("{dir}.passed_datagrams")) + n(l, &format!("{dir}.lost_datagrams"));
        let lost = n(l, &format!("{dir}.lost_datagrams"));
        assert!(lost > 0, "{dir}: nothing lost at 2 %: {l}");
        assert_eq!(
            lost,
            losses(session_seed(7, 0, 0, d), offered, 0.02),
            "{dir}: {l}"
        );
        // ≈ 2 %: within 5 standard deviations of the binomial
        let (o, p) = (offered as f64, 0.02);
        let sigma = (o * p * (1.0 - p)).sqrt();
        assert!(
            (lost as f64 - o * p).abs() < 5.0 * sigma + 1.0,
            "{dir}: {l}"
        );
        assert_eq!(
            n(l, &format!("{dir}.queue_dropped_datagrams")),
            0,
            "no rate: no queue"
        );
    }
    let q = &r["transport"]["quic"];
    // quinn received every datagram the downlink passed (taken just before
    // the link's counts: a few may arrive between the two readings)
    let (passed, received) = (n(l, "down.passed_datagrams"), n(q, "datagrams_received"));
    assert!(received <= passed && passed <= received + 4, "{q} {l}");
    assert!(n(l, "down.passed_bytes") >= n(&r, "completed_bytes"));
    // quinn declared lost the client's packets the uplink dropped. A
    // dropped datagram holds one packet, but a handshake datagram may
    // coalesce two (Initial and Handshake): at most 2 more than the drops;
    // the last ACK-only packets of a connection are never acknowledged,
    // so their drops are never declared: at most 2 fewer. FIFO delivery
    // (no reordering) makes no spurious loss.
    let (declared, dropped) = (n(q, "packets_lost"), n(l, "up.lost_datagrams"));
    assert!(declared > 0, "{q}");
    assert!(
        declared <= dropped + 2 && declared + 2 >= dropped,
        "quinn declared {declared} lost, the uplink dropped {dropped}"
    );
    // summary.txt prints the link's counts
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    let line = format!(
        "QUIC link: down {passed} datagrams passed, {} lost, 0 queue-dropped; up {} passed, {dropped} lost, 0 queue-dropped (1 sessions)",
        n(l, "down.lost_datagrams"),
        n(l, "up.passed_datagrams"),
    );
    assert!(summary.contains(&line), "{line} in {summary}");
    // the server sent every body (its h3 counters), retransmissions apart
    let st = stats(port, &ca);
    assert_eq!(st["h3"]["requests"], 12, "{st}");
    // the server's own QUIC figures, taken when its connection ended (the
    // client's CONNECTION_CLOSE, or the idle timeout if the uplink dropped
    // that): every datagram it sent was offered to the client's downlink,
    // but the few sent after the client read the link's counts (its last
    // ACKs); and it declared lost the packets the downlink dropped, within
    // the same ±2 as the client's side above, and up to 2 more dropped late
    // (in its last flight, unacknowledged when the client closed)
    wait_until(
        "the server's QUIC connection ended",
        std::time::Duration::from_secs(40),
        || stats(port, &ca)["h3"]["open_connections"] == 0,
    );
    let h = &stats(port, &ca)["h3"];
    eprintln!("server h3: {h}");
    let offered = n(l, "down.passed_datagrams") + n(l, "down.lost_datagrams");
    let sent = n(h, "datagrams_sent");
    assert!(
        offered <= sent && sent <= offered + 4,
        "server sent {sent}, the downlink saw {offered}"
    );
    assert!(
        n(h, "udp_bytes_sent") >= n(l, "down.passed_bytes"),
        "{h} {l}"
    );
    assert!(
        n(h, "packets_sent") >= sent,
        "a datagram holds a packet at least: {h}"
    );
    let (declared, dropped) = (n(h, "packets_lost"), n(l, "down.lost_datagrams"));
    assert!(
        declared <= dropped + 2 && declared + 4 >= dropped,
        "the server declared {declared} lost, the downlink dropped {dropped}"
    );
    assert!(serve.stop());
}

#[test]
fn without_loss_nothing_is_dropped_and_without_a_link_there_is_no_wrapper() {
    let t = tempfile::tempdir().unwrap();
    let (w, root) = link_workload(t.path(), 60, 10_000, 10_000, 0);
    let (mut serve, port, ca) = serve_h3(t.path(), &root, &[]);
    // 0 % loss, 2 ms of jitter: the link is in the path and drops nothing
    let out = t.path().join("zero");
    let r = run_h3_with(
        &w,
        &out,
        port,
        &ca,
        &["--no-shaping", "--link-loss", "0", "--link-jitter", "2ms"],
    );
    check_against_files(&rows(&out), &root, &r);
    let l = &r["transport"]["quic_link"];
    assert_eq!(n(l, "links"), 1, "{r}");
    for k in [
        "up.lost_datagrams",
        "down.lost_datagrams",
        "up.queue_dropped_datagrams",
        "down.queue_dropped_datagrams",
    ] {
        assert_eq!(n(l, k), 0, "{k}: {l}");
    }
    assert!(n(l, "down.passed_datagrams") > 1000, "{l}");
    assert_eq!(n(&r["transport"]["quic"], "packets_lost"), 0, "{r}");
    // no rate, delay, jitter or loss: quinn's own socket, no link counted
    let out = t.path().join("none");
    let r = run_h3_with(&w, &out, port, &ca, &["--no-shaping"]);
    check_against_files(&rows(&out), &root, &r);
    assert!(r["transport"]["quic"].is_object(), "{r}");
    assert!(r["transport"].get("quic_link").is_none(), "{r}");
    assert!(serve.stop());
}

#[test]
fn a_four_megabit_class_takes_bytes_over_rate_and_its_delay_is_in_the_rtt() {
    let t = tempfile::tempdir().unwrap();
    // 4 ranges of 0.5 MiB through 4 Mbit/s: 2,097,152 × 8 / 4e6 = 4.19 s;
    // 10 ms each way
    let (w, root) = link_workload(t.path(), 40, 4_000, 4_000, 10);
    let (mut serve, port, ca) = serve_h3(t.path(), &root, &[]);
    let out = t.path().join("slow");
    let r = run_h3_with(&w, &out, port, &ca, &["--seed", "3"]);
    let rows = rows(&out);
    check_against_files(&rows, &root, &r);
    // from the first request sent to the last response's end
    let text = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let (mut first, mut last) = (f64::MAX, 0.0f64);
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (sent, took): (f64, f64) = (f[8].parse().unwrap(), f[10].parse().unwrap());
        first = first.min(sent);
        last = last.max(sent + took / 1e3);
    }
    let bytes = n(&r, "completed_bytes");
    assert_eq!(bytes, 2_097_152);
    let want = bytes as f64 * 8.0 / 4e6;
    let took = last - first;
    eprintln!("{bytes} bytes in {took:.3} s at 4 Mbit/s (bytes/rate {want:.3} s)");
    // the TCP shaping tests' tolerance (engine.rs, a 1 Mbit/s class): 10 %
    assert!(
        (took / want - 1.0).abs() < 0.10,
        "took {took} s for {want} s"
    );
    // every RTT sample has both delays: the smoothed RTT cannot be below
    let rtt = r["transport"]["quic"]["rtt_ms"]["min"].as_f64().unwrap();
    assert!(rtt >= 20.0, "RTT {rtt} ms under 2 × 10 ms");
    // the server filled the 100 ms queue and met tail drops (its own
    // congestion control's business: the client saw every byte)
    let l = &r["transport"]["quic_link"];
    assert_eq!(n(l, "down.lost_datagrams"), 0, "{l}");
    assert!(n(l, "down.passed_bytes") >= bytes, "{l}");
    assert!(serve.stop());
}

#[test]
fn link_flags_are_refused_where_they_cannot_apply() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s.vsl");
    std::fs::write(&s, "#@session id=0\n/a\n").unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec!["run", s.to_str().unwrap(), "--rate", "1"];
        a.extend_from_slice(extra);
        let o = vodlab(&a);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: a usage error");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // TCP cannot drop packets in-process: the error says where loss is
    let e = run(&[
        "--target",
        "https://127.0.0.1:9",
        "--protocol",
        "h2",
        "--link-loss",
        "1",
    ]);
    assert!(
        e.contains("cannot drop a packet") && e.contains("--loss-down"),
        "{e}"
    );
    let e = run(&["--target", "http://127.0.0.1:9", "--link-jitter", "5"]);
    assert!(e.contains("--protocol h3"), "{e}");
    let h3 = ["--target", "https://127.0.0.1:9", "--protocol", "h3"];
    let e = run(&[&h3[..], &["--link-loss", "60"]].concat());
    assert!(e.contains("--link-loss must be from 0 to 50"), "{e}");
    let e = run(&[&h3[..], &["--link-loss=-1"]].concat());
    assert!(e.contains("--link-loss must be from 0 to 50"), "{e}");
    let e = run(&[&h3[..], &["--link-jitter", "11s"]].concat());
    assert!(e.contains("--link-jitter must be"), "{e}");
}
