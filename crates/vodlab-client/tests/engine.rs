//! Engine tests against the in-process test server with injected delays.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use vodlab_client::core::link::LinkSpec;
use vodlab_client::load::Shard;
use vodlab_client::testserver::{TestServer, TestServerConfig};
use vodlab_client::{run, Arrivals, Live, LoadedWorkload, Results, RunConfig, StopReason};
use vodlab_workload::script::parse_script;

fn workload(text: &str, classes: &[(&str, LinkSpec)], ramp: (usize, usize)) -> LoadedWorkload {
    LoadedWorkload {
        name: "test".into(),
        shards: vec![Shard {
            file: "test.vsl".into(),
            sessions: parse_script(text).unwrap().sessions,
            streamed: Vec::new(),
        }],
        classes: classes
            .iter()
            .map(|(n, l)| (n.to_string(), *l))
            .collect::<BTreeMap<_, _>>(),
        ramp_up: ramp.0,
        ramp_down: ramp.1,
        file_sizes: HashMap::new(),
        content_seed: None,
        compression: None,
    }
}

async fn go(
    server: &TestServer,
    w: LoadedWorkload,
    rate: f64,
    tweak: impl FnOnce(&mut RunConfig),
) -> Results {
    let mut cfg = RunConfig::new(
        server.addr,
        server.addr.to_string(),
        format!("http://{}", server.addr),
        Arrivals::Constant { rate },
    );
    cfg.interval_s = 1.0;
    tweak(&mut cfg);
    let (_tx, rx) = watch::channel(false);
    run(Arc::new(w), cfg, Arc::new(Live::default()), rx)
        .await
        .unwrap()
}

fn files(list: &[(&str, u64)]) -> HashMap<String, u64> {
    list.iter().map(|(p, n)| (p.to_string(), *n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_slower_than_its_timeout_fails_the_session_and_skips_the_rest() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/a", 1000), ("/slow", 1000), ("/c", 1000), ("/d", 1000)]),
        delays: [("/slow".to_string(), Duration::from_millis(1500))].into(),
        ..Default::default()
    })
    .await;
    let w = workload(
        "/a timeout=5\n/slow timeout=0.3\n/c timeout=5\n/d timeout=5\n",
        &[],
        (0, 0),
    );
    let r = go(&server, w, 1.0, |_| {}).await;
    assert_eq!(r.failed_sessions, 1, "{}", r.table());
    assert_eq!(r.errors["timeout"], 1);
    assert_eq!(r.skipped_requests, 2);
    assert_eq!(r.response_time_ms.count, 1, "only /a completed");
    let seen: Vec<String> = server
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(
        seen,
        vec!["/a", "/slow"],
        "the rest of the session is never sent"
    );
    assert!(r.complete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_intervals_hold_and_buffering_goes_back_to_back() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/v", 10_000)]),
        ..Default::default()
    })
    .await;
    let w = workload(
        "#@session id=42\n/v range=0-999\n/v range=1000-1999\n/v range=2000-2999 pacing=0.4\n/v range=3000-3999 pacing=0.4\n/v range=4000- pacing=0.4\n",
        &[],
        (0, 0),
    );
    let r = go(&server, w, 1.0, |_| {}).await;
    assert_eq!(r.failed_sessions, 0, "{}", r.table());
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    assert!(
        seen.iter().all(|s| s.session.as_deref() == Some("42")),
        "X-Vodlab-Session on every request"
    );
    assert_eq!(
        seen[4].range.as_deref(),
        Some("bytes=4000-"),
        "open-ended range"
    );
    let gap = |i: usize| (seen[i].at - seen[i - 1].at).as_secs_f64();
    assert!(gap(1) < 0.05, "buffering requests back to back: {}", gap(1));
    for i in 2..5 {
        assert!((gap(i) - 0.4).abs() < 0.06, "pacing gap {i}: {}", gap(i));
    }
    assert_eq!(r.completed_bytes, 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ramp_sessions_are_excluded() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/x", 100)]),
        ..Default::default()
    })
    .await;
    let text: String = (0..10)
        .map(|i| format!("#@session id={i}\n/x\n\n"))
        .collect();
    let w = workload(&text, &[], (3, 2));
    let r = go(&server, w, 50.0, |_| {}).await;
    assert_eq!(r.started_sessions, 10);
    assert_eq!(r.measured_sessions, 5, "{}", r.table());
    assert_eq!(r.response_time_ms.count, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_megabit_class_receives_half_a_megabyte_in_about_four_seconds() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/chunk", 524_288)]),
        ..Default::default()
    })
    .await;
    let slow = LinkSpec {
        down_bps: 1e6,
        up_bps: 1e6,
        delay: Duration::ZERO,
    };
    let w = workload(
        "#@session id=1 class=slow\n/chunk timeout=30\n",
        &[("slow", slow)],
        (0, 0),
    );
    let r = go(&server, w, 1.0, |_| {}).await;
    let secs = r.response_time_ms.p50 / 1000.0;
    // 524,288 bytes at 125,000 bytes/s = 4.19 s
    assert!(
        (secs / 4.194 - 1.0).abs() < 0.10,
        "took {secs} s\n{}",
        r.table()
    );
    assert_eq!(r.classes["slow"].bytes, 524_288);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_is_added_both_ways() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/x", 100)]),
        ..Default::default()
    })
    .await;
    let far = LinkSpec {
        delay: Duration::from_millis(100),
        ..Default::default()
    };
    let w = workload("#@session class=far\n/x\n", &[("far", far)], (0, 0));
    let r = go(&server, w, 1.0, |_| {}).await;
    assert!((r.ttfb_ms.p50 - 200.0).abs() < 40.0, "{}", r.table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_chunk_is_a_stall() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/c0", 10), ("/c1", 10), ("/c2", 10), ("/c3", 10)]),
        // two buffering chunks, playback from ~0: chunk 2 is asked for at 0.3 s, needed at
        // 0.6 s, and arrives at ~1.2 s: one stall of ~0.6 s; chunk 3 is then in time
        delays: [("/c2".to_string(), Duration::from_millis(900))].into(),
        ..Default::default()
    })
    .await;
    let w = workload(
        "#@session id=1 request_s=0.3\n/c0 timeout=5\n/c1 timeout=5\n/c2 timeout=5 pacing=0.3\n/c3 timeout=5 pacing=0.3\n",
        &[],
        (0, 0),
    );
    let r = go(&server, w, 1.0, |_| {}).await;
    assert_eq!(r.failed_sessions, 0);
    assert_eq!(r.stalls, 1, "{}", r.table());
    // the exact stall arithmetic is asserted in virtual time
    // (tests/driver.rs); over real sockets on a loaded machine, the plumbing
    assert!((r.stall_time_s - 0.6).abs() < 0.25, "{}", r.stall_time_s);
    assert!(r.startup_delay_s.p50 < 0.05);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_status_and_length_are_errors_of_their_own_type() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/ok", 100)]),
        ..Default::default()
    })
    .await;
    let mut w = workload("/missing\n\n/ok\n", &[], (0, 0));
    w.file_sizes.insert("/ok".into(), 99);
    let r = go(&server, w, 20.0, |_| {}).await;
    assert_eq!(r.errors["bad_status"], 1, "{}", r.table());
    assert_eq!(r.errors["content_mismatch"], 1);
    assert_eq!(r.failed_sessions, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_server_closes_is_reopened() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/x", 100)]),
        close_after_each: true,
        ..Default::default()
    })
    .await;
    let w = workload("/x\n/x\n/x\n", &[], (0, 0));
    let r = go(&server, w, 1.0, |_| {}).await;
    assert_eq!(r.failed_sessions, 0, "{}", r.table());
    assert_eq!(r.server_closes, 3);
    assert_eq!(
        server
            .connections
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_ends_the_run_incomplete_with_results() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/x", 100)]),
        ..Default::default()
    })
    .await;
    let addr = server.addr;
    drop(server); // nothing listens any more ...
                  // ... once its aborted task has dropped the listener: wait for a refusal
    let t0 = std::time::Instant::now();
    loop {
        match tokio::net::TcpStream::connect(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            _ => {}
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the dropped server still listens"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text: String = (0..1000)
        .map(|i| format!("#@session id={i}\n/x\n\n"))
        .collect();
    let w = workload(&text, &[], (0, 0));
    let mut cfg = RunConfig::new(
        addr,
        addr.to_string(),
        format!("http://{addr}"),
        Arrivals::Constant { rate: 20.0 },
    );
    cfg.unreachable_after = Duration::from_millis(500);
    cfg.interval_s = 0.5;
    let (_tx, rx) = watch::channel(false);
    let r = run(Arc::new(w), cfg, Arc::new(Live::default()), rx)
        .await
        .unwrap();
    assert_eq!(r.stopped_by, StopReason::ServerUnreachable, "{}", r.table());
    assert!(!r.complete);
    assert!(r.errors["refused"] >= 3);
    assert!(r.started_sessions < 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_json_validates_against_its_schema() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/a", 1000)]),
        ..Default::default()
    })
    .await;
    let w = workload(
        "#@session id=1 class=c request_s=1\n/a timeout=5\n/a timeout=5\n",
        &[("c", LinkSpec::default())],
        (0, 0),
    );
    let r = go(&server, w, 1.0, |_| {}).await;
    let value = serde_json::to_value(&r).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/results.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    for key in [
        "complete",
        "valid",
        "measured_sessions",
        "failed_sessions",
        "completed_requests",
        "completed_bytes",
        "throughput_bytes_per_s",
    ] {
        assert!(value.get(key).is_some(), "{key}");
    }
    for q in ["p25", "p50", "p75", "p99"] {
        assert!(value["response_time_ms"][q].is_number());
    }
    // the run emulated its links itself
    assert_eq!(value["shaping_mode"], "in_process");
    assert!(value.get("kernel_shaping_rate").is_none());
    // other tools read it back typed, losing nothing
    let text = serde_json::to_string(&r).unwrap();
    let back: Results = serde_json::from_str(&text).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), value);
    assert_eq!(back.measured_sessions, r.measured_sessions);
    // and a broken document does not validate
    let mut broken = value.clone();
    broken["complete"] = serde_json::json!("yes");
    assert!(!validator.is_valid(&broken));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_carry_cmcd_with_the_bit_rate_and_the_buffer_length() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/v", 400_000)]),
        ..TestServerConfig::default()
    })
    .await;
    // 800 kbit/s, 4 s of content per request: two buffering requests, then
    // one every 2 s, so the buffer grows by 2 s per request after start-up
    let text = "#@session bitrate=800000 request_s=4\n/v range=0-399999\n/v range=0-399999\n/v range=0-399999 pacing=2\n/v range=0-399999 pacing=2\n";
    let w = workload(text, &[], (0, 0));
    go(&server, w, 10.0, |c| c.shaping = false).await;
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    for s in &seen {
        assert_eq!(s.cmcd.0.as_deref(), Some("br=800,d=4000,ot=v"), "{s:?}");
    }
    let bl: Vec<u64> = seen
        .iter()
        .map(|s| {
            s.cmcd
                .1
                .as_deref()
                .unwrap()
                .strip_prefix("bl=")
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    // nothing buffered at the first request; 8 s of content at start-up,
    // about 6 s left 2 s later (+4 arrived, 2 played => ~10 s at the fourth)
    assert_eq!(bl[0], 0);
    assert!(bl[2] >= 5_500 && bl[2] <= 6_500, "{bl:?}");
    assert!(bl[3] >= 7_500 && bl[3] <= 8_500, "{bl:?}");

    // --no-cmcd
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/v", 400_000)]),
        ..TestServerConfig::default()
    })
    .await;
    let w = workload(text, &[], (0, 0));
    go(&server, w, 10.0, |c| {
        c.shaping = false;
        c.cmcd = false
    })
    .await;
    assert!(server
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|s| s.cmcd == (None, None)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_ended_reads_stop_after_n_bytes_and_read_kbps_paces_the_body() {
    let server = TestServer::start(TestServerConfig {
        files: files(&[("/v", 4_000_000), ("/a", 100_000)]),
        ..TestServerConfig::default()
    })
    .await;
    // an open-ended read ended after 1 MB, then the next request on the same
    // connection (which had to be closed), then 100 kB read at 800 kbit/s
    let text =
        "/v range=1000- stop_after=1000000\n/v range=0-999\n/a range=0-99999 read_kbps=800\n";
    let w = workload(text, &[], (0, 0));
    let r = go(&server, w, 10.0, |c| c.shaping = false).await;
    assert_eq!(r.failed_sessions, 0, "{:?}", r.errors);
    assert_eq!(r.completed_bytes, 1_000_000 + 1000 + 100_000);
    // the cut connection was not reused
    assert_eq!(
        server
            .connections
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // 100 kB at 800 kbit/s take at least 1 s (the reads are spaced)
    assert!(r.response_time_ms.max >= 950.0, "{:?}", r.response_time_ms);
}
