//! dash.js 4.7.4's rules against cases worked by hand from its formulas
//! (the ladder of the dash-vod workload, 4 s segments).

use std::sync::Arc;

use super::bola::BolaState;
use super::history::ThroughputHistory;
use super::switches::SwitchHistory;
use super::*;
use crate::core::player::sim::{simulate, Period, Trace};
use crate::core::player::{Movie, PlayerConfig};

/// The dash-vod ladder, kbit/s.
const LADDER: [f64; 6] = [235.0, 750.0, 1750.0, 3000.0, 4300.0, 5800.0];
const SEG: f64 = 4000.0;

fn movie(segments: usize) -> Movie {
    Movie::constant(SEG, &LADDER, segments)
}

fn ctx(m: &Movie, buffer_ms: f64, now_ms: f64) -> Context<'_> {
    Context {
        movie: m,
        index: 0,
        buffer_ms,
        throughput_kbps: None,
        latency_ms: None,
        max_buffer_ms: 40_000.0,
        now_ms,
    }
}

fn close(a: f64, b: f64, eps: f64) -> bool {
    (a - b).abs() <= eps
}

#[test]
fn quality_for_bitrate_takes_the_latency_share_off() {
    // initialBitrate 1000 kbit/s: 750 fits, 1750 does not
    assert_eq!(quality_for_bitrate(&LADDER, SEG, 1000.0, None), 1);
    // 3150 × (1 − 100/4000) = 3071.25 ≥ 3000
    assert_eq!(quality_for_bitrate(&LADDER, SEG, 3150.0, Some(100.0)), 3);
    // 3050 × 0.975 = 2973.75 < 3000
    assert_eq!(quality_for_bitrate(&LADDER, SEG, 3050.0, Some(100.0)), 2);
    // a latency above a segment: the lowest level
    assert_eq!(quality_for_bitrate(&LADDER, SEG, 1e6, Some(4001.0)), 0);
    // a latency of 0 is JavaScript-false: no deduction
    assert_eq!(quality_for_bitrate(&LADDER, SEG, 5800.0, Some(0.0)), 5);
    // NaN and too little: level 0
    assert_eq!(quality_for_bitrate(&LADDER, SEG, f64::NAN, None), 0);
    assert_eq!(quality_for_bitrate(&LADDER, SEG, 100.0, None), 0);
}

#[test]
fn sliding_window_mean_widens_on_steps() {
    let mut h = ThroughputHistory::new();
    assert_eq!(h.average_throughput(), None);
    assert_eq!(h.average_latency(), None);
    // 10.4 ms and 999.6 ms are whole ms 10 and 1000: 1 000 000 / 1000
    h.push(10.4, 999.6, 1_000_000.0);
    assert_eq!(h.average_throughput(), Some(1000.0));
    assert_eq!(h.average_latency(), Some(10.0));
    for _ in 0..3 {
        h.push(10.0, 1000.0, 1_000_000.0);
    }
    // ×1.2 is no step: the last 4, (3 × 1000 + 1200) / 4
    let mut a = h.clone();
    a.push(30.0, 1000.0, 1_200_000.0);
    assert_eq!(a.average_throughput(), Some(1050.0));
    // latency: the last 4, (10 + 10 + 10 + 30) / 4
    assert_eq!(a.average_latency(), Some(15.0));
    // ×2 is a step: the window grows to 5, (4 × 1000 + 2000) / 5
    let mut b = h.clone();
    b.push(10.0, 1000.0, 2_000_000.0);
    assert_eq!(b.average_throughput(), Some(1200.0));
    // a 20 ms load is a cache hit, ignored once real samples exist
    b.push(1.0, 20.0, 1_000_000.0);
    assert_eq!(b.average_throughput(), Some(1200.0));
    assert_eq!(b.samples().count(), 5);
    // only 20 samples are kept
    for _ in 0..30 {
        b.push(10.0, 1000.0, 1_000_000.0);
    }
    assert_eq!(b.samples().count(), history::MAX_MEASUREMENTS);
}

#[test]
fn cached_samples_count_until_real_ones_come() {
    let mut h = ThroughputHistory::new();
    h.push(1.0, 10.0, 100_000.0); // 10 000 kbit/s from the cache
    assert_eq!(h.average_throughput(), Some(10_000.0));
    h.push(1.0, 10.0, 50_000.0);
    assert_eq!(h.average_throughput(), Some(7_500.0));
    // the first real sample clears them
    h.push(20.0, 2000.0, 2_000_000.0);
    assert_eq!(h.average_throughput(), Some(1000.0));
    assert_eq!(h.samples().count(), 1);
}

#[test]
fn a_drop_caps_the_next_eight_decisions() {
    let mut s = SwitchHistory::new();
    for _ in 0..5 {
        s.push(1, 1);
    }
    assert_eq!(s.max_index(), None);
    // 6 decisions from level 1, one a drop: 1/5 > 0.075, capped below 1
    s.push(1, 0);
    assert_eq!(s.max_index(), Some(0));
    // 7 decisions at level 0 later the drop is still among the last 8
    for _ in 0..7 {
        s.push(0, 0);
    }
    assert_eq!(s.max_index(), Some(0));
    // the 8th pushes it out: 8 at level 0 without a drop
    s.push(0, 0);
    assert_eq!(s.max_index(), None);
    // fewer than 6 decisions: the rule waits, even after a drop
    let mut t = SwitchHistory::new();
    t.push(3, 1);
    assert_eq!(t.max_index(), None);
    // a drop from level 2 with 6 counted at 0..=2: cap at 1
    for _ in 0..5 {
        t.push(0, 0);
    }
    t.push(2, 0);
    assert_eq!(t.max_index(), Some(1));
    t.reset();
    assert_eq!(t.max_index(), None);
}

#[test]
fn bola_is_scaled_to_22_seconds_for_six_levels() {
    let b = BolaState::new(&LADDER, SEG, STABLE_BUFFER_MS);
    // buffer max(12 s, 10 s + 2 s × 6) = 22 s; u_max = 1 + ln(5800/235)
    // = 4.20603; γp = 3.20603 / (22/10 − 1) = 2.67169; Vp = 10 s / γp
    assert!(close(b.gp(), 2.671_69, 1e-5), "{}", b.gp());
    assert!(close(b.vp(), 3742.95, 0.01), "{}", b.vp());
    // 240p's maximum buffer: Vp (1 + γp) = 13 742.95 ms
    assert!(close(b.max_buffer_for(0), 13_742.95, 0.01));
    // minimum buffers: 384p from 11 760.9 ms, 480p 15 708.1, 720p 18 433.6
    assert!(close(b.min_buffer_for(1), 11_760.90, 0.01));
    assert!(close(b.min_buffer_for(2), 15_708.05, 0.01));
    assert!(close(b.min_buffer_for(3), 18_433.58, 0.01));
    assert_eq!(b.min_buffer_for(0), 0.0);
    // so at dash.js's own 12 s target BOLA alone picks 384p
    for (buf, q) in [
        (11_000.0, 0),
        (11_700.0, 0),
        (11_800.0, 1),
        (12_000.0, 1),
        (16_000.0, 2),
        (20_000.0, 3),
        (26_000.0, 5),
    ] {
        assert_eq!(b.quality_from_buffer(buf), q, "buffer {buf}");
    }
}

#[test]
fn steady_bola_spends_its_placeholder_before_pausing() {
    let mut b = BolaState::new(&LADDER, SEG, STABLE_BUFFER_MS);
    // STARTUP: the safe throughput's level (300 → 240p), placeholder
    // seeded to 240p's minimum (0); no segment yet: still STARTUP
    assert_eq!(b.decide(0.0, 12_500.0, 300.0, None), (0, 0.0));
    assert!(!b.is_steady());
    // a segment of 240p requested at 0, finished at 500, 12 s buffered
    b.segment_loaded(5, 0, 0.0, 500.0, 12_000.0);
    assert_eq!(b.placeholder_ms(), 0.0);
    // a segment and a buffer over one: STEADY from the next decision
    assert_eq!(b.decide(600.0, 12_400.0, 300.0, None), (0, 0.0));
    assert!(b.is_steady());
    // 2100 ms since the last segment finished: placeholder 2100; buffer
    // + placeholder 13 100 ms picks 384p, but the throughput's level is
    // 240p and the last was 240p: 240p; under 240p's 13 742.95 ms: no pause
    assert_eq!(b.decide(2600.0, 11_000.0, 300.0, None), (0, 0.0));
    assert!(close(b.placeholder_ms(), 2100.0, 1e-9));
    // 3000 ms since the last decision: placeholder 5100, effective 18 100
    // (480p by BOLA, 240p by the limits); 18 100 − 13 742.95 = 4357.05 of
    // excess comes out of the placeholder: 742.95 left, no pause
    assert_eq!(b.decide(5600.0, 13_000.0, 300.0, None), (0, 0.0));
    assert!(close(b.placeholder_ms(), 742.95, 0.01));
    // 1000 ms later: placeholder 1742.95, effective 16 242.95, excess
    // 2500: the placeholder is spent and the rest, 757.05 ms, is a pause
    let (q, delay) = b.decide(6600.0, 14_500.0, 300.0, None);
    assert_eq!(q, 0);
    assert!(close(delay, 757.05, 0.01), "{delay}");
    assert_eq!(b.placeholder_ms(), 0.0);
    // with 800 kbit/s (384p by throughput) BOLA may go one level above
    // the last only as far as the throughput's level: buffer 20 s asks
    // for 720p, 384p is taken
    let (q, _) = b.decide(6700.0, 20_000.0, 800.0, None);
    assert_eq!(q, 1);
    // a replacement (segment 5 again) adds its duration to the placeholder
    let before = b.placeholder_ms();
    b.segment_loaded(5, 1, 6700.0, 7000.0, 1000.0);
    assert!(close(b.placeholder_ms(), before * 0.99 + SEG, 1e-9));
    // a stall zeroes it
    b.buffer_empty();
    assert_eq!(b.placeholder_ms(), 0.0);
}

/// A DashJs with `n` segments of `kbps` loaded (50 ms to first byte).
fn loaded(m: &Movie, kbps: f64, n: usize) -> DashJs {
    let mut d = DashJs::new(m);
    for i in 0..n {
        d.segment_loaded(
            i,
            1,
            0.0,
            50.0,
            3050.0,
            3000.0 * kbps,
            4000.0,
            8000.0,
            false,
            None,
        );
    }
    d
}

#[test]
fn the_servers_etp_enters_each_throughput_sample_by_its_weight() {
    // 1,000,000 bits over 1,000 ms: 1,000 kbit/s measured; etp 3,000
    let mut h = ThroughputHistory::new();
    h.push_with_etp(10.0, 1000.0, 1_000_000.0, Some(3000.0), 0.5);
    h.push_with_etp(10.0, 1000.0, 1_000_000.0, Some(3000.0), 1.0);
    // weight 0 (dash.js's default) or no etp: measured only
    h.push_with_etp(10.0, 1000.0, 1_000_000.0, Some(3000.0), 0.0);
    h.push_with_etp(10.0, 1000.0, 1_000_000.0, None, 1.0);
    assert_eq!(
        h.samples().collect::<Vec<_>>(),
        [2000.0, 3000.0, 1000.0, 1000.0]
    );
}

#[test]
fn a_low_etp_lowers_the_rules_throughput_average() {
    let m = movie(15);
    // measured 4,000 kbit/s on every segment; the server says 700
    let run = |etp: Option<(f64, f64)>| {
        let mut d = DashJs::new(&m);
        for i in 0..6 {
            d.segment_loaded(
                i,
                1,
                0.0,
                50.0,
                3050.0,
                3000.0 * 4000.0,
                4000.0,
                8000.0,
                false,
                etp,
            );
        }
        d.history.average_throughput().unwrap()
    };
    assert_eq!(run(None), 4000.0);
    assert_eq!(run(Some((700.0, 1.0))), 700.0);
    assert_eq!(run(Some((700.0, 0.5))), 2350.0);
}

#[test]
fn a_full_buffer_is_checked_every_500_ms() {
    let m = movie(15);
    let d = DashJs::new(&m);
    assert_eq!(d.schedule_wait_ms(11_999.0), 0.0);
    // 12 s is not below the target: the next check, 500 ms later
    assert_eq!(d.schedule_wait_ms(12_000.0), 500.0);
    // 15.2 s: 11.7 s after 7 checks
    assert_eq!(d.schedule_wait_ms(15_200.0), 3500.0);
}

#[test]
fn the_start_and_the_insufficient_buffer_rule() {
    let m = movie(15);
    let mut d = DashJs::new(&m);
    // initialBitrate 1000 kbit/s: 384p
    assert_eq!(d.quality(), 1);
    // segment 0: 1000 kbit/s, latency 50 ms
    d.segment_loaded(
        0,
        1,
        0.0,
        50.0,
        3050.0,
        3_000_000.0,
        0.0,
        4000.0,
        false,
        None,
    );
    // segment 1 with 4 s buffered: the throughput rule's 900 × (1 −
    // 50/4000) = 888.75 → 384p; the insufficient-buffer rule still ignores
    // (one of its two segments left)
    let x = d.decide(&ctx(&m, 4000.0, 3050.0));
    assert_eq!(
        x,
        Decision {
            quality: 1,
            delay_ms: 0.0,
            changed: false
        }
    );
    d.segment_loaded(
        1,
        1,
        3050.0,
        50.0,
        6100.0,
        3_000_000.0,
        1000.0,
        5000.0,
        false,
        None,
    );
    // 5 s buffered: 1000 × 5/4 × 0.5 = 625, × 0.9875 = 617.2 → 240p wins
    // over the throughput rule's 384p: dash.js's drop at 1 Mbit/s
    let x = d.decide(&ctx(&m, 5000.0, 6100.0));
    assert_eq!(x.quality, 0);
    assert!(x.changed);
    assert_eq!(d.buffer_target_ms(), STABLE_BUFFER_MS);
    // an empty buffer (< 0.3 s): the lowest level
    let mut e = loaded(&m, 10_000.0, 3);
    assert_eq!(e.decide(&ctx(&m, 200.0, 0.0)).quality, 0);
}

#[test]
fn dynamic_switches_at_12_and_6_seconds_and_the_top_keeps_30() {
    let m = movie(15);
    let mut d = loaded(&m, 10_000.0, 3);
    // throughput below 12 s: 9000 × 0.9875 → 5800; the buffer rule's
    // 10 000 × 3 × 0.5 → 5800
    let x = d.decide(&ctx(&m, 12_000.0, 0.0));
    assert_eq!(x.quality, 5);
    assert!(!d.uses_bola());
    assert_eq!(d.buffer_target_ms(), TOP_QUALITY_BUFFER_MS);
    // above 12 s BOLA takes over (STARTUP: the throughput's level)...
    d.decide(&ctx(&m, 12_100.0, 100.0));
    assert!(d.uses_bola());
    assert!(d.bola().is_some());
    // ...and keeps it down to 6 s
    d.decide(&ctx(&m, 6_100.0, 200.0));
    assert!(d.uses_bola());
    d.decide(&ctx(&m, 5_900.0, 300.0));
    assert!(!d.uses_bola());
}

#[test]
fn abandon_requests_rule_hand_worked() {
    let m = movie(15);
    let mut d = DashJs::new(&m);
    // 384p (3 000 000 bits) arriving at 200 kbit/s from 100 ms on
    let pr = |elapsed: f64| Progress {
        quality: 1,
        size_bits: 3_000_000.0,
        downloaded_bits: 200.0 * (elapsed - 100.0),
        elapsed_ms: elapsed,
        ttfb_ms: 100.0,
    };
    // more than 12 s buffered: never
    let mut full = d.clone();
    for e in [200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0] {
        assert_eq!(full.check_abandon(3, &pr(e), 12_500.0), None);
    }
    // samples at 100..500 ms after the first byte: 5 samples, but 500 ms
    // is not past the grace time
    for e in [200.0, 300.0, 400.0, 500.0, 600.0] {
        assert_eq!(d.check_abandon(3, &pr(e), 3000.0), None, "{e}");
    }
    // 600 ms: mean 200 kbit/s, 3e6 / 200 = 15 s ≥ 1.8 × 4 s; 0.9 × 200 →
    // 240p, 3e6 × 235/750 = 940 000 bits < 2 880 000 left: abandon to 240p
    assert_eq!(d.check_abandon(3, &pr(700.0), 3000.0), Some(0));
    // once per segment
    assert_eq!(d.check_abandon(3, &pr(800.0), 3000.0), None);
    // a segment that would arrive within 1.8 durations is kept: 2 Mbit/s
    let mut fast = DashJs::new(&m);
    for e in [200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0] {
        let p = Progress {
            downloaded_bits: 2000.0 * (e - 100.0),
            ..pr(e)
        };
        assert_eq!(fast.check_abandon(3, &p, 3000.0), None);
    }
    // after the abandonment: 240p, no up-switch for 10 s
    d.abandoned(700.0, 0, 3000.0);
    assert_eq!(d.quality(), 0);
    assert!(d.abandon_load(10_699.0));
    assert!(!d.abandon_load(10_700.0));
    d.segment_loaded(
        3,
        0,
        700.0,
        50.0,
        1000.0,
        10_000.0 * 250.0,
        3000.0,
        7000.0,
        false,
        None,
    );
    d.segment_loaded(
        4,
        0,
        1000.0,
        50.0,
        1300.0,
        10_000.0 * 250.0,
        6000.0,
        10_000.0,
        false,
        None,
    );
    // 10 000 kbit/s measured, but the throughput rule is off until 10 700
    let x = d.decide(&ctx(&m, 8000.0, 2000.0));
    assert_eq!((x.quality, x.changed), (0, false));
    let x = d.decide(&ctx(&m, 8000.0, 10_700.0));
    assert!(x.changed && x.quality > 0, "{x:?}");
}

fn trace(periods: &[(f64, f64)]) -> Trace {
    Trace {
        periods: periods
            .iter()
            .map(|&(d, bw)| Period {
                duration_ms: d,
                bandwidth_kbps: bw,
                latency_ms: 20.0,
            })
            .collect(),
    }
}

#[test]
fn the_profile_starts_at_384p_and_keeps_dashjs_buffer_targets() {
    let m = Arc::new(movie(30));
    // 1200 kbit/s: never the top level, so never more than 12 s buffered
    let out = simulate(m.clone(), &trace(&[(1e6, 1200.0)]), PlayerConfig::dashjs()).unwrap();
    assert_eq!(out.segments[0].quality, 1);
    assert!(out.segments.iter().all(|s| s.buffer_ms_before < 12_000.0));
    // a full buffer is checked every 500 ms: the request leaves at the
    // first check below 12 s
    let waited: Vec<_> = out
        .segments
        .iter()
        .filter(|s| s.full_buffer_wait_ms > 0.0)
        .collect();
    assert!(!waited.is_empty());
    for s in waited {
        assert!(s.buffer_ms_before >= 11_500.0 - 1e-6, "{s:?}");
        let k = s.full_buffer_wait_ms / 500.0;
        assert!(close(k, k.round(), 1e-6), "{s:?}");
    }
    // 50 Mbit/s: the top level from segment 1 and a 30 s target
    let out = simulate(m, &trace(&[(1e6, 50_000.0)]), PlayerConfig::dashjs()).unwrap();
    assert_eq!(out.segments[0].quality, 1);
    assert!(out.segments[1..].iter().all(|s| s.quality == 5));
    let most = out
        .segments
        .iter()
        .map(|s| s.buffer_ms_before)
        .fold(0.0, f64::max);
    assert!((29_500.0 - 1e-6..30_000.0).contains(&most), "{most}");
}

#[test]
fn an_up_switch_refetches_buffered_segments() {
    let m = Arc::new(movie(30));
    // slow until the buffer is full of 240p, then fast
    let tr = trace(&[(40_000.0, 700.0), (1e6, 5_000.0)]);
    let out = simulate(m, &tr, PlayerConfig::dashjs()).unwrap();
    let segs = &out.segments;
    // some segment was fetched twice, the second time at a higher level,
    // and the replacement starts 1.5 segments or more ahead of the playhead
    let twice: Vec<_> = segs
        .iter()
        .enumerate()
        .filter(|(k, s)| segs[..*k].iter().any(|p| p.index == s.index))
        .collect();
    assert!(!twice.is_empty(), "{segs:#?}");
    for (k, s) in &twice {
        let first = segs[..*k].iter().find(|p| p.index == s.index).unwrap();
        assert!(s.quality > first.quality, "{first:?} then {s:?}");
    }
    // the played levels are the replacements'
    assert_eq!(out.qoe.segments, 30);
    let last = |i: usize| segs.iter().rev().find(|s| s.index == i).unwrap().quality;
    let mean: f64 = (0..30).map(|i| LADDER[last(i)]).sum::<f64>() / 30.0;
    assert!(
        close(out.qoe.mean_bitrate_kbps, mean, 1e-6),
        "{} {mean}",
        out.qoe.mean_bitrate_kbps
    );
}
