//! The client metrics that judge a pacing server (Ma, Bartoš, Bhatia): playback
//! latency, download time, 100 ms rate windows against the paced target, and
//! the aggregate rate — in virtual time through the session driver (body
//! bytes told as `Event::Body` at chosen instants), merged as `RunMetrics`,
//! assembled into results; plus one end-to-end run against the paced test
//! server.
//!
//! The paper's numbers used here (seed 003, section 4): a 1 MB file at
//! 400 kbit/s (20 s), a 4 s client buffer (200 KB).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tokio::sync::watch;
use vodlab_client::core::delivery::{DeliveryOut, Playback, WindowRun};
use vodlab_client::core::driver::{Action, Completed, DriverConfig, Event, SessionDriver};
use vodlab_client::core::exchange::Response;
use vodlab_client::core::time::Time;
use vodlab_client::load::Shard;
use vodlab_client::out::metrics::{RequestSample, RunMetrics, SampleDone};
use vodlab_client::out::results::{delivery, Results};
use vodlab_client::testserver::{TestPace, TestServer, TestServerConfig};
use vodlab_client::{run, Arrivals, Live, LoadedWorkload, RunConfig};
use vodlab_workload::script::{parse_script, Session};

/// 1 MB (the paper's file).
const FILE: u64 = 1_000_000;

fn session(text: &str) -> Session {
    parse_script(text).unwrap().sessions.remove(0)
}

/// What one single-request session produced.
struct Outcome {
    done: Completed,
    issued: Time,
    delivery: DeliveryOut,
}

/// Runs a one-request session in virtual time: connected at once, the body
/// arriving as `reads` (seconds after the issue, bytes), the response
/// complete with the last read.
fn drive(s: &Session, cfg: DriverConfig, t0: Time, reads: &[(f64, u64)]) -> Outcome {
    // whole microseconds: window edges fall exactly where the test says
    let at = |x: f64| t0 + Duration::from_micros((x * 1e6).round() as u64);
    let mut d = SessionDriver::new(s, None, cfg, t0);
    let mut delivery = DeliveryOut::default();
    let mut record = None;
    let mut now = t0;
    let mut sent = false;
    for _ in 0..10 {
        while let Some(a) = d.poll_action(now) {
            match a {
                Action::Connect { conn } => d.handle(now, Event::Connected { conn }),
                Action::Send { conn, .. } => {
                    assert!(!sent);
                    sent = true;
                    for &(t, bytes) in reads {
                        now = at(t);
                        d.handle(now, Event::Body { conn, bytes });
                        // the executor takes figures as they come
                        d.take_delivery(&mut delivery);
                    }
                    let total: u64 = reads.iter().map(|r| r.1).sum();
                    let response = Response {
                        status: 200,
                        body_bytes: total,
                        header_bytes: 100,
                        content_range: None,
                        ttfb: Duration::from_millis(1),
                        keep_alive: true,
                        cmsd_dynamic: None,
                    };
                    d.handle(now, Event::Response { conn, response });
                }
                Action::Record(r) => record = Some(r),
                Action::Close { .. } => {}
                Action::Finished(_) => {
                    d.take_delivery(&mut delivery);
                    let r = record.expect("a record");
                    return Outcome {
                        done: r.result.expect("completed"),
                        issued: r.issued,
                        delivery,
                    };
                }
            }
        }
    }
    panic!("session did not finish")
}

/// `total` bytes in reads of `slice` every `every` s, the first at `from + every`.
fn steady(from: f64, total: u64, slice: u64, every: f64) -> Vec<(f64, u64)> {
    let n = total.div_ceil(slice);
    (1..=n)
        .map(|k| {
            let bytes = slice.min(total - (k - 1) * slice);
            (from + k as f64 * every, bytes)
        })
        .collect()
}

/// The windows as runs, equal neighbours joined (the driver joins only
/// within what the executor has not taken yet).
fn runs(out: &DeliveryOut) -> Vec<WindowRun> {
    let mut v: Vec<WindowRun> = Vec::new();
    for w in &out.windows {
        match v.last_mut() {
            Some(l) if (l.ratio_permille, l.within) == (w.ratio_permille, w.within) => {
                l.count += w.count
            }
            _ => v.push(*w),
        }
    }
    v
}

fn windows(out: &DeliveryOut) -> (u64, u64) {
    out.windows.iter().fold((0, 0), |(n, w), r| {
        let c = u64::from(r.count);
        (n + c, w + if r.within { c } else { 0 })
    })
}

fn paper_session() -> Session {
    session("#@session bitrate=400000\n/movie\n")
}

#[test]
fn bytes_at_exactly_the_rate_give_every_window_on_target() {
    let t0 = Time::ZERO;
    // 500 bytes every 10 ms: 50,000 B/s = 400 kbit/s, from the issue on
    let reads = steady(0.0, FILE, 500, 0.01);
    let o = drive(&paper_session(), DriverConfig::default(), t0, &reads);
    // the first 4 s (200,000 bytes) arrive with the read at 4.00 s
    assert_eq!(o.done.playback, Playback::After(Duration::from_secs(4)));
    assert_eq!(o.done.done - o.issued, Duration::from_secs(20));
    // windows (4.0, 4.1] .. (19.9, 20.0]: 160, all exactly on target
    assert_eq!(
        runs(&o.delivery),
        vec![WindowRun {
            ratio_permille: 1000,
            within: true,
            count: 160
        }]
    );
    let mut m = RunMetrics::new(10_000);
    m.record_delivery(true, &o.delivery);
    let classes = Default::default();
    let d = delivery(&m, &classes, 4.0, 1.0);
    assert_eq!(d.rate_windows, 160);
    assert_eq!(d.rate_windows_within_5pct_pct, 100.0);
    assert_eq!(
        (
            d.rate_deviation.p5,
            d.rate_deviation.p50,
            d.rate_deviation.p95
        ),
        (0.0, 0.0, 0.0)
    );
}

#[test]
fn a_burst_then_the_rate_gives_the_burst_latency_and_a_shorter_download() {
    let t0 = Time::ZERO;
    // four 50,000-byte reads 1 ms apart (the 4 s burst), then the rate
    let mut reads: Vec<(f64, u64)> = (1..=4).map(|k| (k as f64 * 0.001, 50_000)).collect();
    reads.extend(steady(0.004, FILE - 200_000, 500, 0.01));
    let o = drive(&paper_session(), DriverConfig::default(), t0, &reads);
    // the latency is when the 200,000th byte arrived
    assert_eq!(o.done.playback, Playback::After(Duration::from_millis(4)));
    // 800,000 bytes at 50,000 B/s after the burst: the paper's "about 16 s"
    assert_eq!(o.done.done - o.issued, Duration::from_millis(16_004));
    assert_eq!(o.done.bytes, FILE);
    let (n, within) = windows(&o.delivery);
    assert_eq!((n, within), (160, 160));
}

#[test]
fn the_aggregate_series_sums_to_the_bytes_delivered() {
    let t0 = Time::ZERO;
    let mut reads: Vec<(f64, u64)> = (1..=4).map(|k| (k as f64 * 0.001, 50_000)).collect();
    reads.extend(steady(0.004, FILE - 200_000, 1_357, 0.0137));
    let o = drive(&paper_session(), DriverConfig::default(), t0, &reads);
    let sum: u64 = o.delivery.aggregate.iter().map(|a| a.1).sum();
    assert_eq!(sum, FILE);
    // one entry per 100 ms window with bytes, in order, the burst in window 0
    assert!(o.delivery.aggregate.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(o.delivery.aggregate[0] >= (0, 200_000));
    // and the results' series (Mbit/s per 100 ms) holds the same bytes
    let mut m = RunMetrics::new(10_000);
    m.record_delivery(true, &o.delivery);
    let d = delivery(&m, &Default::default(), 4.0, 1.0);
    let bytes: f64 = d
        .aggregate_mbit_per_s
        .iter()
        .map(|p| p[1] * 1e6 / 8.0 * d.aggregate_window_s)
        .sum();
    assert!((bytes - FILE as f64).abs() < 1e-3, "{bytes}");
    // the paced part runs at 1,357 bytes per 13.7 ms (0.792 Mbit/s)
    let rate = 1_357.0 / 0.0137 * 8.0 / 1e6;
    assert!(
        (d.aggregate_mbit_per_s[50][1] - rate).abs() < rate * 0.15,
        "{:?}",
        d.aggregate_mbit_per_s[50]
    );
}

#[test]
fn a_long_run_coarsens_the_aggregate_series() {
    let mut m = RunMetrics::new(10_000);
    // 10 minutes of 100 ms windows: 6,000 > 2,000 points
    let d = DeliveryOut {
        windows: vec![],
        aggregate: (0..6_000u64).map(|i| (i, 1_000)).collect(),
    };
    m.record_delivery(false, &d);
    let r = delivery(&m, &Default::default(), 4.0, 1.0);
    assert_eq!(r.aggregate_mbit_per_s.len(), 2_000);
    assert!((r.aggregate_window_s - 0.3).abs() < 1e-12);
    // 1,000 bytes per 100 ms is 0.08 Mbit/s whatever the width
    assert!(r
        .aggregate_mbit_per_s
        .iter()
        .all(|p| (p[1] - 0.08).abs() < 1e-9));
}

#[test]
fn a_stall_shows_as_empty_windows_and_the_target_follows_k() {
    let t0 = Time::ZERO;
    // burst, 2 s at the rate, a 1 s stall, then the rate again
    let mut reads: Vec<(f64, u64)> = vec![(0.001, 200_000)];
    reads.extend(steady(0.001, 100_000, 500, 0.01));
    reads.extend(steady(3.001, 100_000, 500, 0.01));
    let o = drive(&paper_session(), DriverConfig::default(), t0, &reads);
    let (n, within) = windows(&o.delivery);
    // 20 windows to 2.001 s, 10 empty ones to 3.001 s, 20 more to 5.001 s
    assert_eq!(n, 50);
    assert_eq!(within, 40);
    assert_eq!(
        runs(&o.delivery),
        vec![
            WindowRun {
                ratio_permille: 1000,
                within: true,
                count: 20
            },
            WindowRun {
                ratio_permille: 0,
                within: false,
                count: 10
            },
            WindowRun {
                ratio_permille: 1000,
                within: true,
                count: 20
            },
        ]
    );
    // in results: a deviation of -1 for a fifth of the windows
    let mut m = RunMetrics::new(10_000);
    m.record_delivery(true, &o.delivery);
    let d = delivery(&m, &Default::default(), 4.0, 1.0);
    assert_eq!(d.rate_windows_within_5pct_pct, 80.0);
    assert_eq!(
        (
            d.rate_deviation.min,
            d.rate_deviation.p5,
            d.rate_deviation.p50,
            d.rate_deviation.p95
        ),
        (-1.0, -1.0, 0.0, 0.0)
    );
    // judged against K = 2, the steady windows deliver half the target
    let cfg = DriverConfig {
        pace_target: 2.0,
        ..DriverConfig::default()
    };
    let o = drive(&paper_session(), cfg, t0, &steady(0.0, FILE, 500, 0.01));
    assert_eq!(
        runs(&o.delivery),
        vec![WindowRun {
            ratio_permille: 500,
            within: false,
            count: 160
        }]
    );
}

#[test]
fn no_bit_rate_or_a_short_response_leaves_the_latency_out() {
    let t0 = Time::ZERO;
    let o = drive(
        &session("/movie\n"),
        DriverConfig::default(),
        t0,
        &steady(0.0, FILE, 500, 0.01),
    );
    assert_eq!(o.done.playback, Playback::NoBitRate);
    assert!(o.delivery.windows.is_empty());
    assert_eq!(o.delivery.aggregate.iter().map(|a| a.1).sum::<u64>(), FILE);
    // 2 s of content with a 4 s buffer
    let o = drive(
        &paper_session(),
        DriverConfig::default(),
        t0,
        &steady(0.0, 100_000, 500, 0.01),
    );
    assert_eq!(o.done.playback, Playback::Short);
    // a CMCD br on the request wins over the session's bit rate: 200 kbit/s
    // makes the 4 s buffer 100,000 bytes
    let s = session("#@session bitrate=400000\n/movie headers=\"CMCD-Object: br=200\"\n");
    let o = drive(
        &s,
        DriverConfig::default(),
        t0,
        &steady(0.0, 100_000, 500, 0.01),
    );
    assert_eq!(o.done.playback, Playback::After(Duration::from_secs(2)));
}

#[test]
fn the_link_delay_shifts_arrivals() {
    let t0 = Time::ZERO;
    let cfg = DriverConfig {
        link_delay: Duration::from_millis(30),
        ..DriverConfig::default()
    };
    let s = paper_session();
    let mut d = SessionDriver::new(&s, None, cfg, t0);
    let mut now = t0;
    let mut out = DeliveryOut::default();
    let mut playback = None;
    for _ in 0..20 {
        while let Some(a) = d.poll_action(now) {
            match a {
                Action::Connect { conn } => d.handle(now, Event::Connected { conn }),
                Action::Send { conn, .. } => {
                    // the request left 30 ms after its issue; 200 KB read 10 ms later
                    now += Duration::from_millis(10);
                    d.handle(
                        now,
                        Event::Body {
                            conn,
                            bytes: 200_000,
                        },
                    );
                    let response = Response {
                        status: 200,
                        body_bytes: 200_000,
                        header_bytes: 100,
                        content_range: None,
                        ttfb: Duration::from_millis(10),
                        keep_alive: true,
                        cmsd_dynamic: None,
                    };
                    d.handle(now, Event::Response { conn, response });
                }
                Action::Record(r) => playback = Some(r.result.unwrap().playback),
                Action::Finished(_) => {
                    d.take_delivery(&mut out);
                    // 30 ms out, 10 ms on the server, 30 ms back
                    assert_eq!(playback, Some(Playback::After(Duration::from_millis(70))));
                    return;
                }
                Action::Close { .. } => {}
            }
        }
        now = d.poll_timeout().expect("a timer");
    }
    panic!("did not finish");
}

/// One session's figures as the engine reports them.
fn sample(o: &Outcome, t0: Time, i: u32) -> RequestSample {
    let us = |d: Duration| d.as_micros() as u64;
    RequestSample {
        request: 0,
        scheduled_s: f64::from(i) * 0.0005,
        sent_s: (o.issued - t0).as_secs_f64(),
        send_lateness_us: Some(0),
        outcome: Ok(SampleDone {
            done_us: us(o.done.done - t0),
            response_us: us(o.done.done - o.issued),
            ttfb_us: us(o.done.ttfb),
            from_schedule_us: us(o.done.done - o.issued),
            bytes: o.done.bytes,
            status: o.done.status,
            playback: o.done.playback,
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Sessions split between two parts, each part's metrics merged, equal
    /// the metrics of all of them in one.
    #[test]
    fn halves_merge_into_the_whole(
        sessions in proptest::collection::vec((0u64..3, 1u64..4_000, 1u64..40, 0u64..2_000), 1..12),
        split in any::<u64>(),
    ) {
        let t0 = Time::ZERO;
        let mut whole = RunMetrics::new(10_000);
        let mut a = RunMetrics::new(10_000);
        let mut b = RunMetrics::new(10_000);
        for (i, &(kind, slice, every_ms, start_ms)) in sessions.iter().enumerate() {
            let text = ["#@session bitrate=400000 class=a\n/m\n", "#@session bitrate=800000 class=b\n/m\n", "#@session class=a\n/m\n"][kind as usize];
            let s = session(text);
            let start = t0 + Duration::from_millis(start_ms);
            let cfg = DriverConfig { epoch: Some(t0), ..DriverConfig::default() };
            let reads = steady(0.0, 300_000, slice * 50, every_ms as f64 / 1000.0);
            let o = drive(&s, cfg, start, &reads);
            let class = s.header.class.as_deref().unwrap_or("default");
            let measured = i % 5 != 4;
            let r = sample(&o, t0, i as u32);
            for m in [&mut whole, if split >> (i % 64) & 1 == 1 { &mut a } else { &mut b }] {
                m.record_delivery(measured, &o.delivery);
                m.record_request(class, measured, &r);
            }
        }
        a.merge(&b);
        prop_assert!(a == whole);
        let total: u64 = whole.delivered.iter().sum();
        prop_assert_eq!(total, 300_000 * sessions.len() as u64);
    }
}

#[test]
fn older_results_without_delivery_figures_still_load() {
    let m = RunMetrics::new(10_000);
    let info = vodlab_client::out::results::RunInfo {
        target: "http://127.0.0.1:1".into(),
        workload: "w".into(),
        arrivals: Arrivals::Constant { rate: 1.0 },
        seed: 1,
        shaping: false,
        kernel_shaping: None,
        pacing: true,
        interval_s: 1.0,
        late_threshold: Duration::from_millis(10),
        scheduled_sessions: 0,
        started_sessions: 0,
        started_unix: 0.0,
        duration_s: 1.0,
        stopped_by: vodlab_client::StopReason::Finished,
        playback_buffer_s: 4.0,
        pace_target: 1.0,
    };
    let r = vodlab_client::out::results::assemble(&info, &m, &Default::default());
    let mut v = serde_json::to_value(&r).unwrap();
    v.as_object_mut().unwrap().remove("delivery").unwrap();
    let back: Results = serde_json::from_value(v).unwrap();
    assert_eq!(back.delivery, Default::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_against_a_paced_test_server() {
    // 80 kbit/s content (10,000 B/s), 1 s buffer; the server bursts 10,000
    // bytes then sends 20,000 B/s (K = 2): 30,000 bytes take about 1 s
    let server = TestServer::start(TestServerConfig {
        files: HashMap::from([("/m".to_string(), 30_000)]),
        pace: Some(TestPace {
            burst: 10_000,
            bytes_per_s: 20_000,
        }),
        ..Default::default()
    })
    .await;
    let w = LoadedWorkload {
        name: "t".into(),
        shards: vec![Shard {
            file: "t.vsl".into(),
            sessions: parse_script("#@session id=1 bitrate=80000 class=c\n/m timeout=30\n")
                .unwrap()
                .sessions,
            streamed: Vec::new(),
        }],
        classes: BTreeMap::new(),
        ..Default::default()
    };
    let mut cfg = RunConfig::new(
        server.addr,
        server.addr.to_string(),
        format!("http://{}", server.addr),
        Arrivals::Constant { rate: 10.0 },
    );
    cfg.playback_buffer = Duration::from_secs(1);
    cfg.pace_target = 2.0;
    let dir = tempfile::tempdir().unwrap();
    cfg.requests_csv = Some(dir.path().join("requests.csv"));
    let (_tx, rx) = watch::channel(false);
    let r = run(Arc::new(w), cfg, Arc::new(Live::default()), rx)
        .await
        .unwrap();
    let d = &r.delivery;
    assert_eq!(r.failed_sessions, 0, "{}", r.table());
    assert_eq!(d.playback_latency_s.count, 1, "{}", r.table());
    // the burst arrives at once: far below the 1 s a paced start would take
    assert!(d.playback_latency_s.max < 0.5, "{}", r.table());
    // 20,000 bytes at 20,000 B/s after the burst: about 1 s (timers, loaded CI)
    assert!((0.9..3.0).contains(&d.download_time_s.max), "{}", r.table());
    assert_eq!(r.classes["c"].playback_latency_s.count, 1);
    // every byte in the aggregate series
    let bytes: f64 = d
        .aggregate_mbit_per_s
        .iter()
        .map(|p| p[1] * 1e6 / 8.0 * d.aggregate_window_s)
        .sum();
    assert!((bytes - 30_000.0).abs() < 1e-3, "{bytes}");
    // some windows were judged (a loaded machine may blur their accuracy)
    assert!(d.rate_windows >= 5, "{}", r.table());
    let csv = std::fs::read_to_string(dir.path().join("requests.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|c| *c == name).unwrap();
    let playback_ms: f64 = row[col("playback_ms")].parse().unwrap();
    assert!((playback_ms / 1e3 - d.playback_latency_s.max).abs() < 0.01);
    assert_eq!(row[col("download_ms")], row[col("response_ms")]);
    // and the document validates against the schema
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/results.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let value = serde_json::to_value(&r).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}
