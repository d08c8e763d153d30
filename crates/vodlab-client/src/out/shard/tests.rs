//! Tests of the shard split and the exact merge.

use super::*;
use crate::core::delivery::{DeliveryOut, Playback, WindowRun};
use crate::core::viewer::ViewerStats;
use crate::out::metrics::{RequestSample, SampleDone, SessionSample};
use std::time::Duration;

#[test]
fn shard_specs_parse_and_refuse_nonsense() {
    assert_eq!(
        ShardSpec::parse("2/4").unwrap(),
        ShardSpec { index: 2, count: 4 }
    );
    for bad in ["4/4", "1", "a/2", "0/0", "-1/3", "1/70000", "1/2/3"] {
        assert!(ShardSpec::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_session_belongs_to_exactly_one_shard() {
    for (s, n) in [
        (1usize, 4u32),
        (2, 4),
        (4, 4),
        (6, 4),
        (8, 4),
        (3, 1),
        (5, 7),
    ] {
        let specs: Vec<ShardSpec> = (0..n).map(|index| ShardSpec { index, count: n }).collect();
        let mut per = vec![0usize; n as usize];
        for k in 0..s {
            for i in 0..100 {
                let owners: Vec<_> = specs.iter().filter(|p| p.owns(k, i, s)).collect();
                assert_eq!(owners.len(), 1, "S={s} N={n} k={k} i={i}");
                per[owners[0].index as usize] += 1;
            }
        }
        // balanced to within one session per script shard
        let (lo, hi) = (per.iter().min().unwrap(), per.iter().max().unwrap());
        assert!(hi - lo <= s, "S={s} N={n}: {per:?}");
    }
    // N divides S: whole script shards, k mod N
    let p = ShardSpec { index: 1, count: 4 };
    assert!((0..50).all(|i| p.owns(5, i, 8) && !p.owns(4, i, 8)));
}

/// A deterministic stream of one session's samples (session `i` of
/// script shard `k`), as the engine would report them.
fn feed(m: &mut RunMetrics, k: usize, i: usize) {
    let n = (k * 1000 + i) as u64;
    let class = ["adsl", "cable", "fiber"][(n % 3) as usize];
    let measured = i >= 2;
    let start = i as f64 * 0.731 + k as f64 * 0.05;
    m.record_start(start, n * 7_919 % 9_000);
    for j in 0..(3 + n % 5) {
        let ok = (n + j) % 13 != 0;
        let done_us = ((start + 0.4 * j as f64) * 1e6) as u64 + n % 977;
        let r = RequestSample {
            request: j as u32,
            scheduled_s: start + 0.4 * j as f64,
            sent_s: start + 0.4 * j as f64 + 0.001,
            send_lateness_us: (j > 0).then_some((n * 31 + j * 17) % 9_000),
            outcome: if ok {
                Ok(SampleDone {
                    done_us,
                    // spread over 5 decades so the percentiles move
                    response_us: 50 + (n * 104_729 + j * 7_717) % 9_000_000,
                    ttfb_us: 20 + (n * 6_151 + j) % 400_000,
                    from_schedule_us: 90 + (n * 3_571 + j * 13) % 9_500_000,
                    bytes: 1 + (n * 1_000_003 + j) % 5_000_000,
                    status: 206,
                    playback: if j % 2 == 0 {
                        Playback::After(Duration::from_micros(n * 919 % 4_000_000))
                    } else {
                        Playback::Short
                    },
                })
            } else {
                Err(ErrorKind::Timeout)
            },
        };
        m.record_request(class, measured, &r);
    }
    m.record_delivery(
        measured,
        &DeliveryOut {
            windows: vec![WindowRun {
                ratio_permille: (n * 37 % 2_200) as u32,
                within: n % 2 == 0,
                count: (n % 4 + 1) as u32,
            }],
            aggregate: vec![((start * 10.0) as u64, n * 1_000 + 7)],
        },
    );
    m.record_session(
        class,
        measured,
        &SessionSample {
            start_s: start,
            end_s: start + 3.0 + (n % 7) as f64,
            failure: (n % 13 == 0).then_some(ErrorKind::Timeout),
            skipped: n % 3,
            viewer: Some(ViewerStats {
                startup_s: Some(0.05 + (n % 11) as f64 * 0.17),
                stalls: (n % 3) as u32,
                stall_s: (n % 3) as f64 * 0.77,
                played_s: 30.0,
            }),
            reconnects: n % 2,
            server_closes: n % 5,
        },
    );
    // an h3 session's QUIC connection
    m.transport.quic.record(&crate::out::quic::QuicFigures {
        packets_sent: 50 + n % 97,
        packets_lost: n % 4,
        lost_bytes: (n % 4) * 1_200,
        congestion_events: n % 2,
        datagrams_received: 400 + n % 31,
        bytes_received: 500_000 + n * 7,
        stream_frames_sent: 3 + n % 5,
        rtt: Duration::from_micros(200 + n * 6_151 % 90_000),
        cwnd: 12_000 + n * 1_013 % 500_000,
        zero_rtt_attempted: n % 3 != 0,
        zero_rtt_accepted: n % 3 == 1,
    });
    // and its in-process link's counts
    let d = |k: u64| {
        crate::core::link::datagrams::DirectionCounts::from_array([
            400 + k * n % 31,
            500_000 + n * 7,
            n % 9,
            (n % 9) * 1_250,
            n % 3,
            (n % 3) * 1_250,
        ])
    };
    m.transport
        .quic_link
        .record(&crate::out::quic_link::LinkCounts {
            up: d(1),
            down: d(5),
        });
}

fn info(started: u64, stopped_by: StopReason) -> RunInfo {
    RunInfo {
        target: "http://127.0.0.1:8080".into(),
        workload: "w".into(),
        arrivals: crate::core::schedule::Arrivals::Poisson { rate: 10.0 },
        seed: 1,
        shaping: true,
        kernel_shaping: None,
        pacing: true,
        interval_s: 1.0,
        late_threshold: Duration::from_millis(10),
        scheduled_sessions: started,
        started_sessions: started,
        started_unix: 1_700_000_000.0,
        duration_s: 60.0,
        stopped_by,
        playback_buffer_s: 4.0,
        pace_target: 1.0,
    }
}

fn mon() -> Monitor {
    Monitor {
        active_peak: vec![3; 60],
        cpu_pct: vec![20.0; 60],
        peak_active: 3,
        cpus: Some(2),
        peak_rss_mb: Some(30.0),
    }
}

/// Shard `spec`'s part: its sessions' samples, written to JSON and read
/// back as `vodlab merge` does.
fn part(spec: ShardSpec, s: usize, per: usize, origin: f64, stop: StopReason) -> Part {
    let mut m = RunMetrics::new(10_000);
    let mut n = 0;
    for k in 0..s {
        for i in 0..per {
            if spec.owns(k, i, s) {
                feed(&mut m, k, i);
                n += 1;
            }
        }
    }
    let mut inf = info(n, stop);
    inf.started_unix = origin;
    let dump = MetricsDump::new(
        &DumpInfo {
            shard: Some(spec),
            origin_unix_s: origin,
            actual_start_unix_s: origin + 0.001 * f64::from(spec.index),
        },
        &inf,
        &m,
        &mon(),
        2,
        30.0,
    )
    .unwrap();
    let results = results::assemble(&inf, &m, &mon());
    let json = serde_json::to_string(&dump).unwrap();
    let rjson = serde_json::to_string(&results).unwrap();
    Part {
        label: format!("shard-{}", spec.index),
        results: serde_json::from_str(&rjson).unwrap(),
        dump: serde_json::from_str(&json).unwrap(),
    }
}

#[test]
fn a_dump_reads_back_into_the_same_metrics() {
    let mut m = RunMetrics::new(10_000);
    for i in 0..40 {
        feed(&mut m, i % 3, i);
    }
    let inf = info(40, StopReason::Finished);
    let d = DumpInfo {
        shard: None,
        origin_unix_s: 5.0,
        actual_start_unix_s: 5.0,
    };
    let dump = MetricsDump::new(&d, &inf, &m, &mon(), 2, 1.0).unwrap();
    let back: MetricsDump = serde_json::from_str(&serde_json::to_string(&dump).unwrap()).unwrap();
    assert!(back.metrics(0.0).unwrap() == m);
}

#[test]
fn four_shards_merge_into_exactly_the_one_process_results() {
    let (s, per) = (2, 150);
    let mut whole = RunMetrics::new(10_000);
    for k in 0..s {
        for i in 0..per {
            feed(&mut whole, k, i);
        }
    }
    let parts: Vec<Part> = (0..4)
        .map(|index| {
            part(
                ShardSpec { index, count: 4 },
                s,
                per,
                1_700_000_000.0,
                StopReason::Finished,
            )
        })
        .collect();
    let merged = merge(&parts, &[]).unwrap();
    let mut one_mon = mon();
    // four processes side by side: their active sessions add up
    one_mon.active_peak = vec![12; 60];
    one_mon.peak_active = 12;
    let one = results::assemble(
        &info((s * per) as u64, StopReason::Finished),
        &whole,
        &one_mon,
    );
    assert!(merged.complete && merged.valid, "{}", merged.table());
    assert_eq!(merged.measured_sessions, one.measured_sessions);
    assert_eq!(merged.started_sessions, one.started_sessions);
    assert_eq!(merged.failed_sessions, one.failed_sessions);
    assert_eq!(merged.completed_requests, one.completed_requests);
    assert_eq!(merged.completed_bytes, one.completed_bytes);
    assert_eq!(merged.skipped_requests, one.skipped_requests);
    assert_eq!(merged.errors, one.errors);
    // histograms added, so every percentile is the one-process one exactly
    for (a, b) in [
        (&merged.response_time_ms, &one.response_time_ms),
        (&merged.ttfb_ms, &one.ttfb_ms),
        (
            &merged.latency_from_schedule_ms,
            &one.latency_from_schedule_ms,
        ),
        (&merged.startup_delay_s, &one.startup_delay_s),
        (
            &merged.health.send_lateness_ms,
            &one.health.send_lateness_ms,
        ),
    ] {
        assert_eq!(a, b);
        assert!(a.p999 > a.p50, "the fixture spreads the values: {a:?}");
    }
    for (name, c) in &one.classes {
        let m = &merged.classes[name];
        assert_eq!(
            (m.requests, m.bytes, m.stalls),
            (c.requests, c.bytes, c.stalls)
        );
        assert_eq!(m.response_time_ms, c.response_time_ms);
        assert_eq!(m.response_time_cdf_ms, c.response_time_cdf_ms);
    }
    assert_eq!(merged.delivery, one.delivery);
    // QUIC's figures: sums added, per-connection distributions merged exactly
    let q = merged.transport.quic.as_ref().expect("transport.quic");
    assert_eq!(Some(q), one.transport.quic.as_ref());
    assert_eq!(q.connections, (s * per) as u64);
    assert!(q.rtt_ms.p99 > q.rtt_ms.p50 && q.cwnd_bytes.p99 > q.cwnd_bytes.p50);
    // the QUIC links' counts: sums, exactly
    let l = merged.transport.quic_link.expect("transport.quic_link");
    assert_eq!(Some(l), one.transport.quic_link);
    assert_eq!(l.links, (s * per) as u64);
    assert!(l.down.lost_datagrams > 0 && l.up.queue_dropped_datagrams > 0);
    let series = |r: &Results| {
        r.intervals
            .iter()
            .map(|i| {
                (
                    i.completed_requests,
                    i.started,
                    i.completed,
                    i.failed,
                    i.active_sessions,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(series(&merged), series(&one));
    let m = merged.merge.as_ref().unwrap();
    assert_eq!(m.merged, vec![0, 1, 2, 3]);
    assert!((m.start_skew_s - 0.003).abs() < 1e-6, "{}", m.start_skew_s);
    // whereas averaging the shards' p99s would not give the p99
    let avg = parts
        .iter()
        .map(|p| p.results.response_time_ms.p99)
        .sum::<f64>()
        / 4.0;
    assert_ne!(avg, one.response_time_ms.p99);
}

#[test]
fn a_missing_or_stopped_shard_makes_the_merge_incomplete_and_is_named() {
    let o = 1_700_000_000.0;
    let p = |i, stop| part(ShardSpec { index: i, count: 4 }, 1, 40, o, stop);
    let parts = vec![
        p(0, StopReason::Finished),
        p(1, StopReason::Finished),
        p(3, StopReason::Finished),
    ];
    let r = merge(&parts, &["out/shard-2".into()]).unwrap();
    assert!(!r.complete);
    assert_eq!(r.stopped_by, StopReason::ShardMissing);
    let m = r.merge.as_ref().unwrap();
    assert_eq!(m.missing, vec![2]);
    assert!(
        m.incomplete_reasons.iter().any(|x| x.contains("shard 2/4")),
        "{m:?}"
    );
    assert!(r.table().contains("shard 2/4"), "{}", r.table());

    let parts = vec![
        p(0, StopReason::Finished),
        p(1, StopReason::Interrupted),
        p(2, StopReason::Finished),
        p(3, StopReason::Finished),
    ];
    let r = merge(&parts, &[]).unwrap();
    assert!(!r.complete);
    assert_eq!(r.stopped_by, StopReason::Interrupted);
    assert!(r.merge.as_ref().unwrap().incomplete_reasons[0].contains("shard 1/4 (shard-1)"));
}

#[test]
fn an_invalid_shard_makes_the_merge_invalid_and_is_named() {
    let o = 1_700_000_000.0;
    let mut parts: Vec<Part> = (0..2)
        .map(|i| {
            part(
                ShardSpec { index: i, count: 2 },
                1,
                40,
                o,
                StopReason::Finished,
            )
        })
        .collect();
    parts[1].results.valid = false;
    parts[1].results.invalid_reasons = vec!["the client ran out of local ports 3 times".into()];
    let r = merge(&parts, &[]).unwrap();
    assert!(!r.valid);
    assert!(
        r.invalid_reasons
            .iter()
            .any(|x| x.contains("shard 1/2") && x.contains("local ports")),
        "{:?}",
        r.invalid_reasons
    );
}

#[test]
fn series_are_aligned_by_wall_clock_and_shards_of_other_runs_refused() {
    let o = 1_700_000_000.0;
    let a = part(
        ShardSpec { index: 0, count: 2 },
        1,
        30,
        o,
        StopReason::Finished,
    );
    let b = part(
        ShardSpec { index: 1, count: 2 },
        1,
        30,
        o + 2.0,
        StopReason::Finished,
    );
    let alone = merge(std::slice::from_ref(&a), &[]).unwrap();
    let both = merge(&[a.clone(), b.clone()], &[]).unwrap();
    let mb = b.dump.metrics(0.0).unwrap();
    // b's first bin lands 2 s (20 bins, 2 intervals) after a's origin
    let first_b = mb.bins.bins.iter().position(|x| x.started > 0).unwrap();
    let started: u64 = both.intervals.iter().map(|i| i.started).sum();
    assert_eq!(started, 30);
    let shifted = b.dump.metrics(2.0).unwrap();
    assert_eq!(
        shifted.bins.bins.iter().position(|x| x.started > 0),
        Some(first_b + 20)
    );
    assert_eq!(both.started_at_unix_s, o);
    assert!((both.merge.as_ref().unwrap().origin_skew_s - 2.0).abs() < 1e-9);
    assert!(both.duration_s > alone.duration_s);
    let mut c = b.clone();
    c.results.seed = 7;
    assert!(merge(&[a.clone(), c], &[]).is_err());
    assert!(merge(&[a.clone(), a], &[])
        .unwrap_err()
        .to_string()
        .contains("both hold shard 0/2"));
}
