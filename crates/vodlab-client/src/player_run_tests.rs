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
fn summaries_are_exact_nearest_rank() {
    let v: Vec<f64> = (1..=100).map(f64::from).collect();
    let s = summarize(&v);
    assert_eq!(
        (s.count, s.min, s.p50, s.p90, s.max),
        (100, 1.0, 50.0, 90.0, 100.0)
    );
    assert_eq!(s.mean, 50.5);
    assert_eq!(summarize(&[]).count, 0);
}

#[test]
fn aggregate_counts_failures_by_name_and_time_by_rate() {
    let run = PlayerRun::new(PlayerKind::Dash, PlayerConfig::default());
    let mut a = PlayersAgg::new(&run);
    let movie = Movie::constant(4000.0, &[200.0, 1000.0], 3);
    let mut p = crate::player::Player::new(Arc::new(movie), run.config.clone()).unwrap();
    // play it in virtual time: every segment takes 100 ms
    let mut now = 0.0;
    loop {
        match p.poll_action(now) {
            Some(crate::player::Action::Fetch { .. }) => {
                now += 100.0;
                p.handle(now, crate::player::Event::Completed { timing: None });
            }
            Some(crate::player::Action::WaitUntil { until, .. }) => now = until,
            Some(crate::player::Action::Done { .. }) => break,
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
