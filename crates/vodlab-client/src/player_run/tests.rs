//! Tests of `player_run.rs`.

use super::*;
use vodlab_manifest::{Level, SegmentRef};
use vodlab_workload::script::parse_script;

fn pres(ranges: bool) -> Presentation {
    let level = |id: &str, bw: u64| Level {
        id: id.into(),
        bandwidth_bps: bw,
        resolution: Some((640, 360)),
        init: Some(SegmentRef {
            url: format!("{id}/init.mp4"),
            range: None,
        }),
        segments: (0..5)
            .map(|i| SegmentRef {
                url: format!("{id}/{i:05}.m4s"),
                range: ranges.then_some((i * 1000, i * 1000 + 99 + i)),
            })
            .collect(),
    };
    Presentation {
        duration_s: 20.0,
        segment_s: 4.0,
        levels: vec![level("lo", 200_000), level("hi", 1_000_000)],
    }
}

#[test]
fn movie_sizes_come_from_ranges_or_bandwidth() {
    let m = movie_of(&pres(false), 3).unwrap();
    assert_eq!(m.segments(), 3);
    assert_eq!(m.bitrates_kbps, vec![200.0, 1000.0]);
    assert_eq!(m.segment_sizes_bits[0], vec![800_000.0, 4_000_000.0]);
    assert_eq!(m.segment_duration_ms, 4000.0);
    let m = movie_of(&pres(true), 99).unwrap();
    assert_eq!(m.segments(), 5);
    // segment 2: bytes 2000..=2101
    assert_eq!(m.segment_sizes_bits[2], vec![102.0 * 8.0, 102.0 * 8.0]);
    assert_eq!(m.resolutions.as_ref().unwrap()[1], "640x360");
}

#[test]
fn unplayable_presentations_name_the_problem() {
    let mut p = pres(false);
    p.levels[1].bandwidth_bps = 200_000;
    let e = movie_of(&p, 3).unwrap_err();
    assert!(e.to_string().contains("bitrates_kbps"), "{e}");
    let mut p = pres(false);
    p.levels[0].segments.clear();
    assert!(movie_of(&p, 3)
        .unwrap_err()
        .to_string()
        .contains("segments"));
    let mut p = pres(false);
    p.levels.clear();
    assert!(movie_of(&p, 3).unwrap_err().to_string().contains("levels"));
}

#[test]
fn urls_are_resolved_against_their_playlist() {
    let mut p = pres(false);
    absolutize(&mut p, &["/t1/lo.m3u8".into(), "/t1/x/hi.m3u8".into()]);
    assert_eq!(p.levels[0].segments[1].url, "/t1/lo/00001.m4s");
    assert_eq!(p.levels[1].init.as_ref().unwrap().url, "/t1/x/hi/init.mp4");
}

#[test]
fn viewing_time_sets_the_segment_count() {
    let s = parse_script("#@session request_s=2\n/a\n/b\n/c\n").unwrap();
    // 3 requests of 2 s = 6 s = 1.5 segments of 4 s, rounded up
    assert_eq!(segments_to_play(&s.sessions[0], 4.0), 2);
    assert_eq!(segments_to_play(&s.sessions[0], 2.0), 3);
    let s = parse_script("/a\n/b\n").unwrap();
    assert_eq!(segments_to_play(&s.sessions[0], 4.0), 2);
}

#[test]
fn signed_summaries_are_nearest_rank_over_both_signs() {
    let (mut pos, mut neg) = (
        crate::out::metrics::histogram(),
        crate::out::metrics::histogram(),
    );
    // -3, -2, -1, 0, 1, ..., 6 (ten values, in hundredths: exact below 2048)
    for v in [3u64, 2, 1] {
        neg.record(v * 100).unwrap();
    }
    for v in 0..=6u64 {
        pos.record(v * 100).unwrap();
    }
    let s = signed_summary(&pos, &neg, 1e2);
    assert_eq!(s.count, 10);
    assert_eq!((s.min, s.max), (-3.0, 6.0));
    // nearest rank: p25 is the 3rd value (-1), p50 the 5th (1), p90 the 9th (5)
    assert_eq!((s.p25, s.p50, s.p90), (-1.0, 1.0, 5.0));
    assert!((s.mean - 1.5).abs() < 1e-9, "{s:?}");
    assert_eq!(s.iqr, s.p75 - s.p25);
    // only negatives
    let s = signed_summary(&crate::out::metrics::histogram(), &neg, 1e2);
    assert_eq!((s.min, s.p50, s.max), (-3.0, -2.0, -1.0));
    assert_eq!(
        signed_summary(
            &crate::out::metrics::histogram(),
            &crate::out::metrics::histogram(),
            1.0
        )
        .count,
        0
    );
}

/// A synthetic session outcome `i` (some failed, some rebuffered).
fn outcome(i: u64) -> PlayerSessionOutcome {
    let class = ["a", "b", "c"][(i % 3) as usize].to_string();
    if i % 7 == 3 {
        return PlayerSessionOutcome {
            class,
            manifest_ms: 1.0,
            qoe: None,
            bitrates_kbps: vec![],
            error: Some(PlayerSessionError::SegmentStatus {
                path: "/t/x.m4s".into(),
                status: 404,
            }),
        };
    }
    let segs = 1 + (i % 9) as usize;
    let lo = (i % 4) as usize * segs / 4;
    let q = QoeSummary {
        segments: segs,
        startup_delay_ms: 10.0 + (i * 37 % 3000) as f64 * 0.7,
        rebuffer_count: (i % 5 == 0) as u32 * (1 + (i % 3) as u32),
        rebuffer_ms: if i % 5 == 0 { 123.4 + i as f64 } else { 0.0 },
        session_ms: segs as f64 * 4000.0 + 10.0,
        mean_bitrate_kbps: 235.0 + (i * 131 % 3000) as f64,
        time_average_bitrate_kbps: 200.0 + (i * 97 % 2900) as f64 * 0.9,
        time_per_level_ms: vec![lo as f64 * 4000.0, (segs - lo) as f64 * 4000.0],
        switches_up: (i % 4) as u32,
        switches_down: (i % 3) as u32,
        total_bitrate_change_kbps: 0.0,
        abandoned: (i % 6 == 0) as usize,
        yin_qoe: 0.0,
        // some negative scores (long stalls)
        yin_qoe_per_segment: 900.0 - (i * 211 % 4000) as f64,
    };
    PlayerSessionOutcome {
        class,
        manifest_ms: 0.5 + (i % 50) as f64 * 0.25,
        qoe: Some(q),
        bitrates_kbps: vec![235.0, 3000.0 + (i % 2) as f64],
        error: None,
    }
}

/// Through `metrics.json`: encoded, written as JSON, read and decoded.
fn through_json(a: &PlayersAgg) -> PlayersAgg {
    let text = serde_json::to_string(&a.dump().unwrap()).unwrap();
    PlayersAgg::of_dump(&serde_json::from_str(&text).unwrap()).unwrap()
}

proptest::proptest! {
    // each case encodes and adds 120 histograms of 22k buckets: slow in debug
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(12))]
    /// Two shards' aggregates, split any way and read back from their
    /// metrics.json, merge into exactly the aggregate of one process.
    #[test]
    fn shard_aggregates_merge_into_the_whole(n in 1u64..300, split in proptest::prelude::any::<u64>()) {
        let run = PlayerRun::new(PlayerKind::Hls, PlayerConfig::default());
        let (mut whole, mut a, mut b) = (PlayersAgg::new(&run), PlayersAgg::new(&run), PlayersAgg::new(&run));
        for i in 0..n {
            let o = outcome(i);
            whole.add(&o);
            if split >> (i % 64) & 1 == 1 { a.add(&o) } else { b.add(&o) }
        }
        let mut m = through_json(&a);
        m.merge(&through_json(&b)).unwrap();
        proptest::prop_assert!(m == whole);
        let r = merge_dumps([Some(&a.dump().unwrap()), Some(&b.dump().unwrap())]).unwrap().unwrap();
        proptest::prop_assert_eq!(r, whole.results());
    }
}

#[test]
fn merged_aggregates_keep_counts_and_refuse_other_settings() {
    let run = PlayerRun::new(PlayerKind::Dash, PlayerConfig::default());
    let mut a = PlayersAgg::new(&run);
    (0..40).for_each(|i| a.add(&outcome(i)));
    let r = a.results();
    let o = &r.overall;
    assert_eq!(o.sessions, 40);
    // i % 7 == 3: 3, 10, 17, 24, 31, 38
    assert_eq!(o.failed, 6);
    assert_eq!(r.errors.get("segment_status"), Some(&6));
    assert_eq!(o.startup_delay_ms.count, 34);
    let rebuffered: Vec<u64> = (0..40).filter(|i| i % 5 == 0 && i % 7 != 3).collect();
    assert_eq!(o.rebuffered_sessions, rebuffered.len() as u64);
    assert_eq!(
        o.rebuffer_events,
        rebuffered.iter().map(|i| 1 + i % 3).sum::<u64>()
    );
    let want_s: f64 = rebuffered.iter().map(|&i| 123.4 + i as f64).sum::<f64>() / 1e3;
    assert!(
        (o.rebuffer_time_s - want_s).abs() < 1e-6,
        "{}",
        o.rebuffer_time_s
    );
    // zero rebuffer time is recorded as zero
    assert_eq!(o.rebuffer_ms.min, 0.0);
    assert_eq!(o.rebuffer_count.max, 3.0);
    assert!(o.yin_qoe_per_segment.min < 0.0 && o.yin_qoe_per_segment.max > 0.0);
    // 3 significant digits
    let exact: Vec<f64> = (0..40u64)
        .filter(|i| i % 7 != 3)
        .map(|i| 235.0 + (i * 131 % 3000) as f64)
        .collect();
    let max = exact.iter().copied().fold(0.0, f64::max);
    assert!(
        (o.mean_bitrate_kbps.max - max).abs() <= max * 1e-3,
        "{} {max}",
        o.mean_bitrate_kbps.max
    );

    let other = PlayerRun::new(PlayerKind::Hls, PlayerConfig::default());
    let e = a.merge(&PlayersAgg::new(&other)).unwrap_err();
    assert!(e.to_string().contains("player settings differ"), "{e}");
    let d = a.dump().unwrap();
    let e = merge_dumps([Some(&d), None]).unwrap_err();
    assert!(e.to_string().contains("did not"), "{e}");
    assert_eq!(merge_dumps([None, None]).unwrap(), None);
}

#[test]
fn aggregate_counts_failures_by_name_and_time_by_rate() {
    let run = PlayerRun::new(PlayerKind::Dash, PlayerConfig::default());
    let mut a = PlayersAgg::new(&run);
    let movie = Movie::constant(4000.0, &[200.0, 1000.0], 3);
    let mut p = crate::core::player::Player::new(Arc::new(movie), run.config.clone()).unwrap();
    // play it in virtual time: every segment takes 100 ms
    let mut now = 0.0;
    loop {
        match p.poll_action(now) {
            Some(crate::core::player::Action::Fetch { .. }) => {
                now += 100.0;
                p.handle(now, crate::core::player::Event::Completed { timing: None });
            }
            Some(crate::core::player::Action::WaitUntil { until, .. }) => now = until,
            Some(crate::core::player::Action::Done { .. }) => break,
            _ => unreachable!(),
        }
    }
    let ok = PlayerSessionOutcome {
        class: "fast".into(),
        manifest_ms: 3.0,
        qoe: Some(p.qoe()),
        bitrates_kbps: vec![200.0, 1000.0],
        error: None,
    };
    a.add(&ok);
    a.add(&PlayerSessionOutcome {
        class: "slow".into(),
        manifest_ms: 0.0,
        qoe: None,
        bitrates_kbps: vec![],
        error: Some(PlayerSessionError::ManifestStatus {
            path: "/t/manifest.mpd".into(),
            status: 404,
        }),
    });
    let r = a.results();
    assert_eq!(r.overall.sessions, 2);
    assert_eq!(r.overall.failed, 1);
    assert_eq!(r.errors.get("manifest_status"), Some(&1));
    assert_eq!(r.classes["fast"].startup_delay_ms.count, 1);
    assert_eq!(r.classes["slow"].startup_delay_ms.count, 0);
    let secs: f64 = r.overall.time_per_bitrate.values().map(|t| t.seconds).sum();
    assert!((secs - 12.0).abs() < 1e-9, "{secs}");
    assert_eq!(r.overall.segments, 3);
}

/// A sampled session's timeline: one segment at `level`.
fn one_segment_timeline(id: u64, level: usize) -> SessionTimeline {
    let mut t = TimelineRecorder::new(id, "a", &format!("t{id}"));
    let rec = crate::core::player::SegmentRecord {
        index: 0,
        quality: level,
        bitrate_kbps: [200.0, 1000.0][level],
        throughput_estimate_kbps: None,
        latency_estimate_ms: None,
        full_buffer_wait_ms: 0.0,
        abr_delay_ms: 0.0,
        download_start_ms: 12.0,
        buffer_ms_before: 0.0,
        ttfb_ms: 1.0,
        download_ms: 30.0,
        rebuffer_ms: 0.0,
        downloaded_bits: 1.0,
        abandoned_to: None,
    };
    t.segment(&rec, 4000.0, 4000.0);
    t.player_end(&[], &[(4000.0, 250.0)], Some(42.0));
    t.finish(&outcome(id))
}

#[test]
fn timelines_go_through_metrics_json_and_merge_to_the_smallest_ids() {
    let mut run = PlayerRun::new(PlayerKind::Dash, PlayerConfig::default());
    run.timelines = 3;
    let (mut a, mut b) = (PlayersAgg::new(&run), PlayersAgg::new(&run));
    for id in [40, 9, 77, 12] {
        a.add_timeline(one_segment_timeline(id, 0));
    }
    for id in [5, 60, 11] {
        b.add_timeline(one_segment_timeline(id, 1));
    }
    let ids = |r: &PlayersResults| r.timelines.iter().map(|t| t.session).collect::<Vec<_>>();
    assert_eq!(ids(&a.results()), vec![9, 12, 40]);
    let table = a.results().table();
    assert!(
        table.contains("rendition timelines of sessions 9, 12, 40 in results.json"),
        "{table}"
    );
    assert_eq!(a.results().timeline_sample, 3);
    let (da, db) = (a.dump().unwrap(), b.dump().unwrap());
    // in either order: the 3 smallest of the union, by id
    for r in [
        merge_dumps([Some(&da), Some(&db)]).unwrap().unwrap(),
        merge_dumps([Some(&db), Some(&da)]).unwrap().unwrap(),
    ] {
        assert_eq!(ids(&r), vec![5, 9, 11]);
        assert_eq!(r.timelines[0].segments[0].level, 1);
        assert_eq!(r.timelines[1].segments[0].level, 0);
        // the stall at media 4 s after playback began at 42 ms
        assert_eq!(r.timelines[0].rebuffers[0].start_s, 4.042);
    }
    // exactly through the JSON text
    assert_eq!(through_json(&a), a);
    // shards sampling different numbers are different runs
    let mut other = run.clone();
    other.timelines = 4;
    let e = merge_dumps([Some(&da), Some(&PlayersAgg::new(&other).dump().unwrap())]).unwrap_err();
    assert!(e.to_string().contains("player settings differ"), "{e}");
    // off: nothing kept
    run.timelines = 0;
    let mut off = PlayersAgg::new(&run);
    off.add_timeline(one_segment_timeline(1, 0));
    assert!(off.results().timelines.is_empty());
    // a metrics.json of a vodlab before timelines reads as a sample of 0
    let mut v = serde_json::to_value(&da).unwrap();
    v["settings"].as_object_mut().unwrap().remove("timelines");
    v.as_object_mut().unwrap().remove("timelines");
    let old: PlayersDump = serde_json::from_value(v).unwrap();
    assert_eq!(old.settings.timelines, 0);
    assert!(old.timelines.is_empty());
}

#[test]
fn the_shared_sample_is_read_once_and_checked() {
    let mut run = PlayerRun::new(PlayerKind::Dash, PlayerConfig::default());
    run.timelines = 2;
    let s = PlayersShared::new(&run);
    assert!(s.sampled(7, || [30u64, 7, 3, 99]));
    assert!(s.sampled(3, || -> Vec<u64> { unreachable!("read once") }));
    assert!(!s.sampled(30, Vec::<u64>::new));
    run.timelines = 0;
    assert!(!PlayersShared::new(&run).sampled(1, || [1u64]));
    run.timelines = MAX_TIMELINES + 1;
    let e = run.validate().unwrap_err();
    assert!(e.contains("--player-timelines"), "{e}");
}

#[test]
fn rebuffer_ratios_are_stall_time_over_stall_and_played_time() {
    let run = PlayerRun::new(PlayerKind::Dash, PlayerConfig::default());
    let mut a = PlayersAgg::new(&run);
    let ids: Vec<u64> = (0..40).filter(|i| i % 7 != 3).collect();
    ids.iter().for_each(|&i| a.add(&outcome(i)));
    let want: Vec<f64> = ids
        .iter()
        .map(|&i| {
            let q = outcome(i).qoe.unwrap();
            let played = q.segments as f64 * 4000.0;
            q.rebuffer_ms / (played + q.rebuffer_ms)
        })
        .collect();
    assert_eq!(rebuffer_ratio(&outcome(5).qoe.unwrap()), want[4]);
    let r = a.results().overall.rebuffer_ratio;
    assert_eq!(r.count, ids.len() as u64);
    assert_eq!(r.min, 0.0);
    let max = want.iter().copied().fold(0.0, f64::max);
    // parts per million, 3 significant digits
    assert!(
        max > 0.001 && (r.max - max).abs() <= max * 1e-3 + 1e-6,
        "{} {max}",
        r.max
    );
    // a metrics.json written before the ratio reads with it empty
    let mut d = a.dump().unwrap();
    d.overall.hists.remove("rebuffer_ratio_ppm");
    let old = PlayersAgg::of_dump(&d).unwrap().results();
    assert_eq!(old.overall.rebuffer_ratio.count, 0);
    assert_eq!(old.overall.sessions, a.results().overall.sessions);
    // any other histogram missing is an error naming it
    d.overall.hists.remove("startup_us");
    let e = PlayersAgg::of_dump(&d).unwrap_err();
    assert!(e.to_string().contains("players.overall.startup_us"), "{e}");
}
