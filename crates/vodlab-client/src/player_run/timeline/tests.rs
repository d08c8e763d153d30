//! Tests of `player_run/timeline.rs`: the sample, its merge, and timelines of
//! a player core driven in virtual time.

use std::sync::Arc;

use super::*;
use crate::core::player::{Action, Event, Movie, Player, PlayerConfig};

fn timeline(id: u64) -> SessionTimeline {
    let mut r = TimelineRecorder::new(id, "c", "t");
    r.player_end(&[], &[], Some(10.0));
    r.finish(&PlayerSessionOutcome {
        class: "c".into(),
        manifest_ms: 1.0,
        qoe: None,
        bitrates_kbps: vec![],
        error: None,
    })
}

#[test]
fn the_sample_is_the_n_smallest_distinct_ids() {
    let ids = [42u64, 7, 99, 7, 3, 1000, 5, 42, 1];
    assert_eq!(
        smallest_ids(ids, 4).into_iter().collect::<Vec<_>>(),
        vec![1, 3, 5, 7]
    );
    assert_eq!(smallest_ids(ids, 100).len(), 7);
    assert!(smallest_ids(ids, 0).is_empty());
}

#[test]
fn merged_samples_are_the_smallest_of_the_union_in_any_order() {
    // two shards, each keeping its own 3 smallest of its sessions: merged
    // in either order they give the run's 3 smallest
    let n = 3;
    let shard = |ids: &[u64]| {
        let mut m = BTreeMap::new();
        for &i in ids {
            keep_smallest(&mut m, timeline(i), n);
        }
        m
    };
    let a = shard(&[40, 2, 90, 17, 8]);
    let b = shard(&[5, 61, 3, 33]);
    assert_eq!(a.keys().copied().collect::<Vec<_>>(), vec![2, 8, 17]);
    for (x, y) in [(&a, &b), (&b, &a)] {
        let mut m = x.clone();
        for t in y.values() {
            keep_smallest(&mut m, t.clone(), n);
        }
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), vec![2, 3, 5]);
    }
    // a session already sampled keeps its first timeline
    let mut m = a.clone();
    let mut other = timeline(2);
    other.title = "other".into();
    keep_smallest(&mut m, other, n);
    assert_eq!(m[&2].title, "t");
    // none kept when the sample is off
    let mut m = BTreeMap::new();
    keep_smallest(&mut m, timeline(1), 0);
    assert!(m.is_empty());
}

#[test]
fn stalls_become_session_time_intervals() {
    // playback from 1.5 s; stalls at media 8 s (0.5 s) and 12 s (1 s):
    // the second begins after 12 s of media and the first stall
    let r = rebuffers_of(&[(8000.0, 500.0), (12000.0, 1000.0)], 1500.0);
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].start_s, r[0].duration_ms, r[0].media_s),
        (9.5, 500.0, 8.0)
    );
    assert_eq!(
        (r[1].start_s, r[1].duration_ms, r[1].media_s),
        (14.0, 1000.0, 12.0)
    );
    let many = vec![(0.0, 1.0); MAX_TIMELINE_EVENTS + 3];
    assert_eq!(rebuffers_of(&many, 0.0).len(), MAX_TIMELINE_EVENTS);
}

/// Drives a player over a link of `fast_kbps` until `slow_after_ms`, then
/// `slow_kbps` (no latency; a download's rate is the one at its start),
/// recording its timeline as the live executor does.
fn drive(fast_kbps: f64, slow_kbps: f64, slow_after_ms: f64) -> (Player, SessionTimeline) {
    let movie = Arc::new(Movie::constant(4000.0, &[200.0, 1000.0, 3000.0], 20));
    let cfg = PlayerConfig {
        abandon: false,
        ..PlayerConfig::default()
    };
    let mut p = Player::new(movie, cfg).unwrap();
    let mut rec = TimelineRecorder::new(7, "dsl", "t0001");
    // the manifest took 50 ms: the player starts then
    let mut now = 50.0;
    loop {
        match p.poll_action(now) {
            Some(Action::Fetch { bits, .. }) => {
                let kbps = if now < slow_after_ms {
                    fast_kbps
                } else {
                    slow_kbps
                };
                now += bits / kbps;
                p.handle(now, Event::Completed { timing: None });
                rec.segment(p.records().last().unwrap(), p.buffer_ms(), 4000.0);
            }
            Some(Action::WaitUntil { until, .. }) => now = until,
            Some(Action::Done { .. }) => break,
            Some(Action::Abandon { .. }) => unreachable!("abandonment is off"),
            None => now = p.poll_timeout().unwrap(),
        }
    }
    rec.player_end(p.abandoned(), p.stalls(), p.playback_start_ms());
    let o = PlayerSessionOutcome {
        class: "dsl".into(),
        manifest_ms: 50.0,
        qoe: Some(p.qoe()),
        bitrates_kbps: p.movie().bitrates_kbps.clone(),
        error: None,
    };
    (p, rec.finish(&o))
}

#[test]
fn a_timeline_follows_the_player_and_its_stalls_end_at_arrivals() {
    // fast, then slower than the lowest rung: the player stalls
    let (p, t) = drive(8000.0, 150.0, 10_000.0);
    let q = p.qoe();
    assert_eq!(
        (t.session, t.class.as_str(), t.title.as_str()),
        (7, "dsl", "t0001")
    );
    assert_eq!(t.segments.len(), 20);
    assert!(!t.truncated);
    for (i, s) in t.segments.iter().enumerate() {
        assert_eq!(s.index, i);
        assert_eq!(s.media_s, i as f64 * 4.0);
        assert_eq!(s.level as u16, p.played()[i]);
        assert_eq!(s.bitrate_kbps, [200.0, 1000.0, 3000.0][s.level]);
        assert!(
            s.buffer_after_s >= 4.0 - 1e-9 && s.buffer_after_s <= 25.0 + 1e-9,
            "{s:?}"
        );
    }
    // the link's drop shows: a higher rung early, the lowest at the end
    assert!(
        t.segments[..5].iter().any(|s| s.level > 0),
        "{:?}",
        t.segments
    );
    assert_eq!(t.segments[19].level, 0, "{:?}", t.segments);
    // playback starts when segment 0 arrives, start-up as the QoE's
    let s0 = &t.segments[0];
    let arrival0 = s0.start_s + s0.download_ms / 1e3;
    assert!(
        (t.playback_start_s.unwrap() - arrival0).abs() < 1e-6,
        "{t:?}"
    );
    assert_eq!(
        t.startup_delay_ms,
        Some((q.startup_delay_ms * 1e3).round() / 1e3)
    );
    assert_eq!(t.manifest_ms, 50.0);
    // the rebuffers are the QoE's, and each ends when a segment arrives
    assert!(q.rebuffer_count > 0, "{q:?}");
    assert_eq!(t.rebuffers.len(), q.rebuffer_count as usize);
    let total: f64 = t.rebuffers.iter().map(|r| r.duration_ms).sum();
    assert!(
        (total - q.rebuffer_ms).abs() < 1e-2,
        "{total} vs {}",
        q.rebuffer_ms
    );
    for r in &t.rebuffers {
        let end = r.start_s + r.duration_ms / 1e3;
        assert!(
            t.segments
                .iter()
                .any(|s| (s.start_s + s.download_ms / 1e3 - end).abs() < 1e-5),
            "rebuffer {r:?} does not end at an arrival: {:?}",
            t.segments
        );
    }
    // a fast link: no rebuffer
    let (_, t) = drive(8000.0, 8000.0, 0.0);
    assert!(t.rebuffers.is_empty(), "{:?}", t.rebuffers);
}

#[test]
fn a_timeline_holds_at_most_its_cap() {
    let (p, _) = drive(8000.0, 8000.0, 0.0);
    let r0 = p.records()[0].clone();
    let mut rec = TimelineRecorder::new(1, "c", "t");
    for _ in 0..MAX_TIMELINE_SEGMENTS + 5 {
        rec.segment(&r0, 1000.0, 4000.0);
    }
    let many = vec![r0; MAX_TIMELINE_EVENTS + 1];
    rec.player_end(&many, &[], None);
    let t = rec.finish(&PlayerSessionOutcome {
        class: "c".into(),
        manifest_ms: 0.0,
        qoe: Some(p.qoe()),
        bitrates_kbps: vec![],
        error: Some(crate::player_run::PlayerSessionError::NoTitle),
    });
    assert_eq!(t.segments.len(), MAX_TIMELINE_SEGMENTS);
    assert_eq!(t.abandoned.len(), MAX_TIMELINE_EVENTS);
    assert!(t.truncated);
    // playback never started: no start-up delay
    assert_eq!(t.startup_delay_ms, None);
    assert_eq!(t.error.as_deref(), Some("no_title"));
}
