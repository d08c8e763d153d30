//! Tests of the report's players part.

use super::*;
use vodlab_client::player_run::{TimelineRebuffer, TimelineSegment};

fn timeline(id: u64, rebuffer: bool) -> SessionTimeline {
    let seg = |i: usize, level: usize, start_s: f64| TimelineSegment {
        index: i,
        media_s: i as f64 * 4.0,
        start_s,
        download_ms: 200.0,
        level,
        bitrate_kbps: [235.0, 750.0, 1750.0][level],
        buffer_after_s: 4.0 + i as f64,
    };
    SessionTimeline {
        session: id,
        class: "dsl".into(),
        title: "t0002".into(),
        manifest_ms: 2.0,
        startup_delay_ms: Some(200.0),
        playback_start_s: Some(0.202),
        error: None,
        segments: vec![seg(0, 0, 0.002), seg(1, 2, 0.3), seg(2, 1, 4.0)],
        abandoned: vec![],
        rebuffers: if rebuffer {
            vec![TimelineRebuffer {
                start_s: 3.5,
                duration_ms: 700.0,
                media_s: 4.0,
            }]
        } else {
            vec![]
        },
        truncated: false,
    }
}

#[test]
fn steps_hold_each_rendition_until_the_next_request() {
    let t = timeline(1, false);
    assert_eq!(
        steps(&t),
        vec![
            (0.002, 235.0),
            (0.3, 235.0),
            (0.3, 1750.0),
            (4.0, 1750.0),
            (4.0, 750.0),
            (4.2, 750.0)
        ]
    );
    assert!(steps(&SessionTimeline {
        segments: vec![],
        ..t
    })
    .is_empty());
}

#[test]
fn a_timeline_chart_names_its_session_and_shades_rebuffers() {
    let with = timeline_chart(&timeline(17, true), PALETTE[0], 1750.0, 25.0);
    assert!(with.contains("<svg") && with.contains("session 17 (dsl, t0002)"));
    let without = timeline_chart(&timeline(18, false), PALETTE[0], 1750.0, 25.0);
    // the rebuffer shade is one more filled rectangle than without it
    let rects = |s: &str| s.matches("<rect").count();
    assert!(rects(&with) > rects(&without), "{with}");
}

#[test]
fn the_players_section_has_classes_and_sample_sessions() {
    let mut p: PlayersResults = serde_json::from_value(serde_json::json!({
        "player": "dash", "abr": "bola", "max_buffer_s": 25.0, "abandon": true,
        "overall": class(), "classes": {"dsl": class(), "fibre": class()},
        "errors": {"segment_status": 1}, "p1203_write_errors": 0,
        "timeline_sample": 8,
    }))
    .unwrap();
    p.timelines = vec![timeline(3, true), timeline(9, false)];
    let mut page = Page::new("r");
    players_section(&mut page, "run", &p);
    let h = page.finish();
    assert!(h.contains("Closed-loop players (dash, bola rule"));
    assert!(h.contains("Bit rate over time of sample sessions"));
    assert!(h.contains("session 3 (dsl") && h.contains("session 9 (dsl"));
    assert!(h.contains("segment_status: 1"));
    // session 9 had no rebuffer: no negative zero in its row
    assert!(
        h.contains("<td>0 (0 ms)</td>") && !h.contains("-0 ms"),
        "{h}"
    );
    assert!(h.contains("fibre"));
    // without a sample: the distributions, no timeline part
    p.timelines.clear();
    p.timeline_sample = 0;
    let mut page = Page::new("r");
    players_section(&mut page, "run", &p);
    let h = page.finish();
    assert!(h.contains("Closed-loop players") && !h.contains("Bit rate over time"));
    assert!(h.contains("--player-timelines 0"));
}

/// A class's results as JSON (every summary the same).
fn class() -> serde_json::Value {
    let s = serde_json::json!({"count": 4, "min": 1.0, "mean": 2.0, "p25": 1.0, "p50": 2.0,
        "p75": 3.0, "p90": 3.5, "p95": 3.8, "p99": 4.0, "p999": 4.0, "max": 4.0, "iqr": 2.0});
    serde_json::json!({
        "sessions": 5, "failed": 1, "segments": 12, "abandoned": 0, "rebuffered_sessions": 1,
        "manifest_ms": s, "startup_delay_ms": s, "rebuffer_count": s, "rebuffer_ms": s,
        "mean_bitrate_kbps": s, "time_average_bitrate_kbps": s, "switches_up": s,
        "switches_down": s, "yin_qoe_per_segment": s, "time_per_bitrate": {},
    })
}
