//! Unit tests of the player core, in virtual time.

use std::sync::Arc;

use super::abr::{quality_from_throughput, Bba, Bola, Context, Progress, ThroughputRule};
use super::estimate::Ewma;
use super::sim::{simulate, Period, Trace};
use super::*;

/// Sabre's Big Buck Bunny ladder, kbit/s (tests/data/sabre/movie.json).
const SABRE_LADDER: [f64; 10] = [
    230.0, 331.0, 477.0, 688.0, 991.0, 1427.0, 2056.0, 2962.0, 5027.0, 6000.0,
];
/// Pensieve's ladder, kbit/s (`sim/env.py`).
const PENSIEVE_LADDER: [f64; 6] = [300.0, 750.0, 1200.0, 1850.0, 2850.0, 4300.0];

fn trace(periods: &[(f64, f64)], latency_ms: f64) -> Trace {
    Trace {
        periods: periods
            .iter()
            .map(|&(d, bw)| Period {
                duration_ms: d,
                bandwidth_kbps: bw,
                latency_ms,
            })
            .collect(),
    }
}

fn ctx(movie: &Movie, index: usize, buffer_ms: f64, tput: f64) -> Context<'_> {
    Context {
        movie,
        index,
        buffer_ms,
        throughput_kbps: Some(tput),
        latency_ms: Some(0.0),
        max_buffer_ms: 25_000.0,
        now_ms: 0.0,
    }
}

fn cfg(abr: AbrRule) -> PlayerConfig {
    PlayerConfig {
        abr,
        ..PlayerConfig::default()
    }
}

// ---- estimator ----

#[test]
fn ewma_of_a_constant_is_the_constant() {
    let mut e = Ewma::new(&[3000.0, 8000.0], 3000.0);
    assert_eq!(e.throughput(), None);
    for _ in 0..5 {
        e.push(700.0, 4000.0, 20.0);
        assert!((e.throughput().unwrap() - 4000.0).abs() < 1e-9);
        assert!((e.latency().unwrap() - 20.0).abs() < 1e-9);
    }
}

#[test]
fn ewma_step_follows_the_fast_half_life() {
    // W0 ms at 10 000 kbit/s, then W ms at 1 000: the 3 s average is
    // (10000 (1 − ½^(W0/3000)) ½^(W/3000) + 1000 (1 − ½^(W/3000))) / (1 − ½^((W0+W)/3000)),
    // the 8 s one likewise, and the estimate the smaller.
    let mut e = Ewma::new(&[3000.0, 8000.0], 3000.0);
    e.push(20_000.0, 10_000.0, 0.0);
    e.push(6_000.0, 1_000.0, 0.0);
    let avg = |h: f64| {
        let (w0, w) = (20_000.0, 6_000.0);
        (10_000.0 * (1.0 - 0.5f64.powf(w0 / h)) * 0.5f64.powf(w / h)
            + 1_000.0 * (1.0 - 0.5f64.powf(w / h)))
            / (1.0 - 0.5f64.powf((w0 + w) / h))
    };
    let want = avg(3000.0).min(avg(8000.0));
    assert!(
        (e.throughput().unwrap() - want).abs() < 1e-6,
        "{e:?} vs {want}"
    );
    // two half-lives of the fast average: a quarter of the old rate is left
    assert!(e.throughput().unwrap() < 1_000.0 + 0.26 * 9_000.0);
}

// ---- throughput rule ----

#[test]
fn quality_from_throughput_counts_latency() {
    let m = Movie::constant(3000.0, &SABRE_LADDER, 10);
    // 3000 × 991 / 1000 = 2973 ≤ 3000 − 20? no: 2973 + 20 = 2993 ≤ 3000 yes
    assert_eq!(quality_from_throughput(&m, 1000.0, 20.0), 4);
    // 2973 + 30 > 3000: one lower
    assert_eq!(quality_from_throughput(&m, 1000.0, 30.0), 3);
    assert_eq!(quality_from_throughput(&m, 0.0, 0.0), 0);
    assert_eq!(quality_from_throughput(&m, 1e9, 0.0), 9);
}

#[test]
fn throughput_rule_uses_safety_factor_and_buffer_cap() {
    let m = Movie::constant(3000.0, &SABRE_LADDER, 10);
    let mut t = ThroughputRule::new(AbrParams::default());
    // 0.9 × 3400 = 3060 → 2962 (7); cap 0.9 × 20 000 × 3400 = 61.2 Mbit: no cap
    assert_eq!(t.decide(&ctx(&m, 5, 20_000.0, 3400.0)), 7);
    // cap factor now 0.81: 0.81 × 3000 ms × 3400 = 8.26 Mbit; level 4 needs
    // 991 × 3000 = 2.97 Mbit, level 5 4.28, 6 6.17, 7 8.886 > 8.26 → 6
    assert_eq!(t.decide(&ctx(&m, 6, 3000.0, 3400.0)), 6);
    let mut no_cap = ThroughputRule::new(AbrParams {
        insufficient_buffer_rule: false,
        ..AbrParams::default()
    });
    assert_eq!(no_cap.decide(&ctx(&m, 6, 0.0, 3400.0)), 7);
}

#[test]
fn throughput_abandonment_hand_worked() {
    let m = Movie::constant(3000.0, &SABRE_LADDER, 10);
    let t = ThroughputRule::new(AbrParams::default());
    // level 9 (18 Mbit) at 1000 kbit/s: 600 ms in, 580 kbit arrived after a
    // 20 ms latency; 17.42 Mbit left take 17 420 ms > 1.8 × 3000.
    let pr = Progress {
        quality: 9,
        size_bits: 18e6,
        downloaded_bits: 580_000.0,
        elapsed_ms: 600.0,
        ttfb_ms: 20.0,
    };
    // 0.9 × 1000 = 900 → 688 (3); 18e6 × 688 / 6000 = 2.064 Mbit < left
    assert_eq!(t.check_abandon(&m, &pr, 0.0), Some(3));
    // before the 500 ms grace: no
    let early = Progress {
        elapsed_ms: 400.0,
        downloaded_bits: 380_000.0,
        ..pr
    };
    assert_eq!(t.check_abandon(&m, &early, 0.0), None);
    // fast enough to finish within 5400 ms: no
    let fast = Progress {
        downloaded_bits: 3_480_000.0, // 6000 kbit/s
        ..pr
    };
    assert_eq!(t.check_abandon(&m, &fast, 0.0), None);
}

#[test]
fn throughput_rule_steps_down_within_its_ewma_response() {
    // 10 Mbit/s for 60 s, then 1 Mbit/s for long; no abandonment, so the
    // estimator alone drives the switch.
    let movie = Arc::new(Movie::constant(3000.0, &PENSIEVE_LADDER, 100));
    let tr = trace(&[(60_000.0, 10_000.0), (1e9, 1_000.0)], 0.0);
    let mut c = cfg(AbrRule::Throughput);
    c.abandon = false;
    c.params.insufficient_buffer_rule = false;
    let out = simulate(movie, &tr, c).unwrap();
    let segs = &out.segments;
    // before the step: the top level 0.9 × 10 000 allows, 4300 (5), after
    // the first estimate
    let pre: Vec<_> = segs
        .iter()
        .filter(|s| s.index > 0 && s.download_start_ms + s.download_ms <= 60_000.0)
        .collect();
    assert!(pre.len() > 5);
    assert!(pre.iter().all(|s| s.quality == 5), "{pre:?}");
    // after the step: transfer time at 1 Mbit/s accumulates; once 15 s of it
    // (5 fast half-lives) is in the estimate, est ≤ 1000 + 10 000/32 = 1313,
    // 0.9 × 1313 = 1181 < 1200: level ≤ 750 (1)
    let mut after_ms = 0.0;
    let mut switched = false;
    let mut prev = 5;
    for s in segs.iter().filter(|s| s.download_start_ms >= 60_000.0) {
        assert!(s.quality <= prev, "no switch up on a falling estimate");
        prev = s.quality;
        if after_ms >= 15_000.0 {
            assert!(s.quality <= 1, "{s:?} after {after_ms} ms at 1 Mbit/s");
            switched = true;
        }
        after_ms += s.download_ms - s.ttfb_ms;
    }
    assert!(switched);
    // and the down switch did not wait for the slow (8 s) average: the first
    // decision after the step already dropped below the top
    let first_after = segs
        .iter()
        .find(|s| s.download_start_ms >= 60_000.0 + 13_000.0)
        .unwrap();
    assert!(first_after.quality < 5, "{first_after:?}");
}

// ---- BOLA ----

#[test]
fn bola_decisions_match_its_utility_thresholds() {
    // Sabre's ladder, γp = 5, 25 s buffer, 3 s segments:
    // V = (25 000 − 3000) / (ln(6000/230) + 5) ≈ 2662.98 ms. BOLA prefers
    // level q+1 to q once buffer > V (γp + (b₊ u − b u₊) / (b₊ − b)).
    let m = Movie::constant(3000.0, &SABRE_LADDER, 199);
    let p = AbrParams::default();
    let bola = Bola::new(p, &m, 25_000.0);
    assert!((bola.vp() - 2_662.975_479_464_463_7).abs() < 1e-6);
    let u: Vec<f64> = SABRE_LADDER.iter().map(|b| (b / 230.0).ln()).collect();
    let b = SABRE_LADDER;
    for q in 0..9 {
        let th = bola.vp() * (5.0 + (b[q + 1] * u[q] - b[q] * u[q + 1]) / (b[q + 1] - b[q]));
        assert_eq!(
            bola.quality_from_buffer(&m, th - 1.0),
            q,
            "below threshold {q}"
        );
        assert_eq!(
            bola.quality_from_buffer(&m, th + 1.0),
            q + 1,
            "above threshold {q}"
        );
    }
    // hand-worked: 0 s → 0; 15 s → 5 (threshold 4→5 at 14 997.6 ms,
    // 5→6 at 15 969.2); 20 s → 9 (8→9 at 19 094.5)
    assert_eq!(bola.quality_from_buffer(&m, 0.0), 0);
    assert_eq!(bola.quality_from_buffer(&m, 15_000.0), 5);
    assert_eq!(bola.quality_from_buffer(&m, 20_000.0), 9);
}

#[test]
fn bola_finite_and_upward_limit() {
    let m = Movie::constant(3000.0, &SABRE_LADDER, 199);
    let p = AbrParams::default();
    // in mid-movie with a fast link: the buffer decides
    let mut bola = Bola::new(p, &m, 25_000.0);
    assert_eq!(bola.decide(&ctx(&m, 100, 20_000.0, 1e6)), 9);
    // a slow estimate limits a step up to one above what it allows:
    // 1000 kbit/s allows 991 (4) → 5
    let mut bola = Bola::new(p, &m, 25_000.0);
    assert_eq!(bola.decide(&ctx(&m, 100, 20_000.0, 1000.0)), 5);
    // ...and keeps the previous level if that is already above
    assert_eq!(bola.decide(&ctx(&m, 101, 21_000.0, 500.0)), 5);
    // BOLA-FINITE: at segment 2 the buffer target is max(2/2, 3) × 3 s = 9 s,
    // V = 6000 / (u_max + 5) ≈ 726.27; 6 s of buffer is then top quality
    let mut bola = Bola::new(p, &m, 25_000.0);
    assert_eq!(bola.decide(&ctx(&m, 2, 6_000.0, 1e6)), 9);
    assert!((bola.vp() - 6000.0 / (u_max() + 5.0)).abs() < 1e-9);
    // BOLA-basic keeps the full-buffer V
    let mut basic = Bola::new(
        AbrParams {
            bola_basic: true,
            ..p
        },
        &m,
        25_000.0,
    );
    assert_eq!(basic.decide(&ctx(&m, 2, 6_000.0, 1e6)), 0);
}

fn u_max() -> f64 {
    (6000.0f64 / 230.0).ln()
}

#[test]
fn bola_abandons_for_a_better_score_per_remaining_bit() {
    let m = Movie::constant(3000.0, &SABRE_LADDER, 199);
    let mut bola = Bola::new(AbrParams::default(), &m, 25_000.0);
    let pr = Progress {
        quality: 9,
        size_bits: 18e6,
        downloaded_bits: 1e6,
        elapsed_ms: 1000.0,
        ttfb_ms: 20.0,
    };
    // buffer 5 s: level 9's score (V (5 + u9) − 5000) / 17e6 is beaten by a
    // smaller level's (V (5 + u_q) − 5000) / (18e6 b_q / 6000)
    let to = bola.check_abandon(&m, &pr, 5_000.0).unwrap();
    let v = bola.vp();
    let u = |q: usize| (SABRE_LADDER[q] / 230.0).ln();
    let score = |q: usize, size: f64| (v * (5.0 + u(q)) - 5000.0) / size;
    let best = (0..9)
        .filter(|&q| 18e6 * SABRE_LADDER[q] / 6000.0 < 17e6)
        .max_by(|&a, &b| {
            score(a, 18e6 * SABRE_LADDER[a] / 6000.0)
                .total_cmp(&score(b, 18e6 * SABRE_LADDER[b] / 6000.0))
        })
        .unwrap();
    assert_eq!(to, best);
    // with a nearly full buffer BOLA keeps going
    assert_eq!(bola.check_abandon(&m, &pr, 21_000.0), None);
}

// ---- BBA ----

#[test]
fn bba_follows_its_buffer_map() {
    let m = Movie::constant(4000.0, &PENSIEVE_LADDER, 50);
    let mut b = Bba::new(AbrParams::default());
    // reservoir 5 s, cushion 10 s: f(B) = 300 + 4000 (B − 5 s) / 10 s
    assert_eq!(b.rate_map(&m, 10_000.0), 2300.0);
    assert_eq!(b.decide(&ctx(&m, 1, 4_000.0, 0.0)), 0, "in the reservoir");
    // from 0, f(10 s) = 2300 ≥ 750: the highest rate below 2300 is 1850 (3)
    assert_eq!(b.decide(&ctx(&m, 2, 10_000.0, 0.0)), 3);
    // f(10.5 s) = 2500: between 1200 and 2850, stay at 3
    assert_eq!(b.decide(&ctx(&m, 3, 10_500.0, 0.0)), 3);
    // f(7 s) = 1100 ≤ 1200: the lowest rate above 1100 is 1200 (2)
    assert_eq!(b.decide(&ctx(&m, 4, 7_000.0, 0.0)), 2);
    // past reservoir + cushion: the top
    assert_eq!(b.decide(&ctx(&m, 5, 15_000.0, 0.0)), 5);
    assert_eq!(b.decide(&ctx(&m, 6, 5_000.0, 0.0)), 0);
}

#[test]
fn bba_session_keeps_to_the_map() {
    // every decision of a BBA session lies between the rates around f(B)
    let movie = Arc::new(Movie::constant(4000.0, &PENSIEVE_LADDER, 60));
    let tr = trace(&[(20_000.0, 3_000.0), (20_000.0, 800.0)], 40.0);
    let out = simulate(movie.clone(), &tr, cfg(AbrRule::Bba)).unwrap();
    let b = Bba::new(AbrParams::default());
    for s in &out.segments[1..] {
        let f = b.rate_map(&movie, s.buffer_ms_before);
        let r = s.bitrate_kbps;
        if s.buffer_ms_before <= 5_000.0 {
            assert_eq!(s.quality, 0, "{s:?}");
        } else if s.buffer_ms_before >= 15_000.0 {
            assert_eq!(s.quality, 5, "{s:?}");
        } else {
            // never more than one rung away from the map
            let lo = PENSIEVE_LADDER.iter().rposition(|x| *x <= f).unwrap_or(0);
            let hi = PENSIEVE_LADDER.iter().position(|x| *x >= f).unwrap_or(5);
            assert!(
                s.quality + 1 >= lo && s.quality <= hi + 1,
                "{s:?}: f = {f}, rate {r}"
            );
        }
    }
    assert!(out.segments.iter().any(|s| s.quality >= 3));
}

// ---- player and buffer ----

#[test]
fn full_buffer_waits_and_buffer_identities() {
    let movie = Arc::new(Movie::constant(3000.0, &SABRE_LADDER, 80));
    let tr = trace(&[(10_000.0, 20_000.0), (10_000.0, 600.0)], 20.0);
    let mut c = cfg(AbrRule::Bola);
    c.abandon = false;
    let out = simulate(movie, &tr, c).unwrap();
    let segs = &out.segments;
    assert_eq!(segs.len(), 80);
    let mut stall = 0.0;
    for w in segs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        // a request starts after the previous one, any full-buffer wait included
        let want = a.download_start_ms + a.download_ms + b.full_buffer_wait_ms;
        assert!((b.download_start_ms - want).abs() < 1e-6, "{b:?}");
        // never more than max_buffer − segment when a request starts
        assert!(b.buffer_ms_before <= 22_000.0 + 1e-6);
        if b.full_buffer_wait_ms > 0.0 {
            assert!((b.buffer_ms_before - 22_000.0).abs() < 1e-6);
        }
        // stalls: whatever the download takes beyond the buffer
        let st = (b.download_ms - b.buffer_ms_before).max(0.0);
        assert!((b.rebuffer_ms - st).abs() < 1e-6, "{b:?}");
        stall += st;
    }
    assert!(segs.iter().any(|s| s.full_buffer_wait_ms > 0.0));
    assert!((out.qoe.rebuffer_ms - stall).abs() < 1e-6);
    assert_eq!(out.qoe.startup_delay_ms, segs[0].download_ms);
}

#[test]
fn stalls_are_counted_once_per_episode() {
    // a long outage after start: the buffer runs dry once
    let movie = Arc::new(Movie::constant(2000.0, &[500.0, 1000.0], 30));
    let tr = trace(&[(5_000.0, 5_000.0), (40_000.0, 0.0), (1e9, 5_000.0)], 0.0);
    let mut c = cfg(AbrRule::Throughput);
    c.abandon = false;
    let out = simulate(movie, &tr, c).unwrap();
    assert_eq!(out.qoe.rebuffer_count, 1, "{:?}", out.qoe);
    assert!(out.qoe.rebuffer_ms > 10_000.0);
}

#[test]
fn qoe_from_records() {
    let movie = Arc::new(Movie::constant(4000.0, &PENSIEVE_LADDER, 30));
    let tr = trace(&[(15_000.0, 6_000.0), (15_000.0, 900.0)], 30.0);
    let out = simulate(movie, &tr, cfg(AbrRule::Dynamic)).unwrap();
    let q = &out.qoe;
    let s = &out.segments;
    assert_eq!(q.segments, 30);
    let ups = s.windows(2).filter(|w| w[1].quality > w[0].quality).count() as u32;
    let downs = s.windows(2).filter(|w| w[1].quality < w[0].quality).count() as u32;
    assert_eq!((q.switches_up, q.switches_down), (ups, downs));
    assert!(ups + downs > 0);
    assert_eq!(q.time_per_level_ms.iter().sum::<f64>(), 30.0 * 4000.0);
    let sum: f64 = s.iter().map(|r| r.bitrate_kbps).sum();
    let change: f64 = s
        .windows(2)
        .map(|w| (w[1].bitrate_kbps - w[0].bitrate_kbps).abs())
        .sum();
    let yin = sum - change - 3.0 * q.rebuffer_ms - 3.0 * q.startup_delay_ms;
    assert!((q.yin_qoe - yin).abs() < 1e-6);
    assert!((q.mean_bitrate_kbps - sum / 30.0).abs() < 1e-9);
    // session = start-up + media + stalls
    assert!((q.session_ms - (q.startup_delay_ms + 120_000.0 + q.rebuffer_ms)).abs() < 1e-6);
    assert!((q.time_average_bitrate_kbps - sum * 4000.0 / q.session_ms).abs() < 1e-9);
}

#[test]
fn p1203_input_has_segments_and_stalls() {
    let movie = Arc::new(Movie::constant(2000.0, &[500.0, 1000.0], 30));
    let tr = trace(&[(5_000.0, 5_000.0), (40_000.0, 0.0), (1e9, 5_000.0)], 0.0);
    let mut c = cfg(AbrRule::Throughput);
    c.abandon = false;
    let p = sim::run_player(movie, &tr, c).unwrap();
    let v = p.p1203_input(&qoe::P1203Options::default());
    let video = v["I13"]["segments"].as_array().unwrap();
    assert_eq!(video.len(), 30);
    assert_eq!(video[3]["start"], 6.0);
    assert_eq!(video[3]["duration"], 2.0);
    assert_eq!(video[3]["resolution"], qoe::DEFAULT_RESOLUTION);
    assert_eq!(v["I11"]["segments"].as_array().unwrap().len(), 30);
    assert_eq!(v["IGen"]["viewingDistance"], "150cm");
    assert_eq!(v["I23"]["streamId"], v["I13"]["streamId"]);
    let st = v["I23"]["stalling"].as_array().unwrap();
    assert_eq!(st.len(), 2, "initial loading and one stall: {st:?}");
    assert_eq!(st[0][0], 0.0);
    let (pos, dur) = (st[1][0].as_f64().unwrap(), st[1][1].as_f64().unwrap());
    assert!(pos > 5.0 && pos < 60.0, "{pos}");
    assert!((dur * 1000.0 - p.qoe().rebuffer_ms).abs() < 1e-6);
}

#[test]
fn a_live_executor_drives_it_with_now_alone() {
    // no Timing: elapsed and time to first byte come from `now`
    let movie = Arc::new(Movie::constant(2000.0, &[500.0, 1000.0, 2000.0], 3));
    let mut p = Player::new(movie, cfg(AbrRule::Throughput)).unwrap();
    let t0 = 1000.0;
    let Some(Action::Fetch {
        index: 0,
        quality: 0,
        bits,
        bytes,
    }) = p.poll_action(t0)
    else {
        panic!("first fetch")
    };
    assert_eq!((bits, bytes), (1_000_000.0, 125_000));
    assert_eq!(p.poll_action(t0), None, "one download at a time");
    p.handle(t0 + 10.0, Event::Sent);
    p.handle(
        t0 + 60.0,
        Event::Progress {
            received_bits: 10_000.0,
            timing: None,
        },
    );
    p.handle(t0 + 260.0, Event::Completed { timing: None });
    let r = &p.records()[0];
    assert_eq!(
        (r.download_start_ms, r.ttfb_ms, r.download_ms),
        (t0 + 10.0, 50.0, 250.0)
    );
    // 1 Mbit in 200 ms of transfer: 5000 kbit/s
    assert!((p.throughput_estimate().unwrap() - 5000.0).abs() < 1e-9);
    let Some(Action::Fetch { index: 1, .. }) = p.poll_action(t0 + 260.0) else {
        panic!("second fetch")
    };
    p.handle(
        t0 + 300.0,
        Event::Failed {
            reason: "404".into(),
        },
    );
    assert!(p.is_finished());
    assert!(matches!(
        p.error(),
        Some(PlayerError::SegmentFailed { index: 1, .. })
    ));
    assert_eq!(p.poll_action(t0 + 400.0), None);
}

#[test]
fn waits_are_reported_as_actions_and_timeouts() {
    let movie = Arc::new(Movie::constant(1000.0, &[100.0], 10));
    let mut c = cfg(AbrRule::Throughput);
    c.max_buffer_ms = 2000.0;
    let mut p = Player::new(movie, c).unwrap();
    let mut now = 0.0;
    let mut waits = 0;
    loop {
        match p.poll_action(now) {
            Some(Action::Fetch { .. }) => {
                now += 10.0;
                p.handle(now, Event::Completed { timing: None });
            }
            Some(Action::WaitUntil { until, wait_ms }) => {
                assert_eq!(until, now + wait_ms);
                waits += 1;
                assert_eq!(p.poll_timeout(), Some(until));
                assert_eq!(p.poll_action(now), None, "not before the wait ends");
                now = until;
            }
            Some(Action::Done { ends_at }) => {
                assert!(ends_at > now);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(waits >= 7, "{waits}");
    // the buffer never held more than max_buffer − segment at a request
    assert!(p
        .records()
        .iter()
        .all(|r| r.buffer_ms_before <= 1000.0 + 1e-9));
    assert_eq!(p.qoe().rebuffer_count, 0);
}

#[test]
fn abandon_to_suggested_fetches_the_suggestion() {
    let movie = Arc::new(Movie::constant(3000.0, &SABRE_LADDER, 40));
    let tr = trace(&[(30_000.0, 30_000.0), (30_000.0, 400.0)], 20.0);
    let mut c = cfg(AbrRule::Throughput);
    c.apply_abandon_suggestion = true;
    let p = sim::run_player(movie, &tr, c).unwrap();
    assert!(!p.abandoned().is_empty());
    for a in p.abandoned() {
        // the next attempt at that segment is at the suggested level
        let next = p
            .abandoned()
            .iter()
            .chain(p.records())
            .filter(|r| r.index == a.index && r.download_start_ms > a.download_start_ms)
            .min_by(|x, y| x.download_start_ms.total_cmp(&y.download_start_ms))
            .unwrap();
        assert_eq!(Some(next.quality), a.abandoned_to);
    }
}

// ---- validation ----

#[test]
fn bad_inputs_name_their_key() {
    let key = |e: PlayerError| match e {
        PlayerError::Invalid { key, .. } => key,
        other => panic!("{other:?}"),
    };
    let mut m = Movie::constant(3000.0, &[300.0, 200.0], 2);
    assert_eq!(key(m.validate().unwrap_err()), "bitrates_kbps");
    m = Movie::constant(3000.0, &[300.0, 400.0], 2);
    m.segment_sizes_bits[1].pop();
    assert_eq!(key(m.validate().unwrap_err()), "segment_sizes_bits");
    m = Movie::constant(0.0, &[300.0], 2);
    assert_eq!(key(m.validate().unwrap_err()), "segment_duration_ms");
    assert!(matches!(
        Movie::from_json("{").unwrap_err(),
        PlayerError::Parse { what: "movie", .. }
    ));
    let t = trace(&[(1000.0, 0.0)], 0.0);
    assert_eq!(key(t.validate().unwrap_err()), "bandwidth_kbps");
    let t = trace(&[(0.0, 10.0)], 0.0);
    assert_eq!(key(t.validate().unwrap_err()), "duration_ms");
    let movie = Movie::constant(3000.0, &[300.0], 2);
    let mut c = PlayerConfig {
        max_buffer_ms: 2000.0,
        ..PlayerConfig::default()
    };
    assert_eq!(key(c.validate(&movie).unwrap_err()), "max_buffer_ms");
    c = PlayerConfig {
        half_life_ms: vec![],
        ..PlayerConfig::default()
    };
    assert_eq!(key(c.validate(&movie).unwrap_err()), "half_life_ms");
    c = PlayerConfig::default();
    c.params.safety_factor = 1.5;
    assert_eq!(key(c.validate(&movie).unwrap_err()), "safety_factor");
    assert_eq!(key("mpc".parse::<AbrRule>().unwrap_err()), "abr");
    assert_eq!("bba".parse::<AbrRule>().unwrap(), AbrRule::Bba);
}

#[test]
fn without_records_the_qoe_is_the_same() {
    let movie = Arc::new(Movie::constant(3000.0, &SABRE_LADDER, 60));
    let tr = trace(&[(20_000.0, 8_000.0), (20_000.0, 700.0)], 20.0);
    let full = sim::run_player(movie.clone(), &tr, cfg(AbrRule::Dynamic)).unwrap();
    let lean_cfg = PlayerConfig {
        keep_records: false,
        ..cfg(AbrRule::Dynamic)
    };
    let lean = sim::run_player(movie, &tr, lean_cfg).unwrap();
    assert!(lean.records().is_empty() && lean.abandoned().is_empty());
    assert!(!full.abandoned().is_empty(), "the trace makes it abandon");
    assert_eq!(lean.qoe(), full.qoe());
    let o = qoe::P1203Options::default();
    assert_eq!(lean.p1203_input(&o), full.p1203_input(&o));
    let q: Vec<u16> = full.records().iter().map(|r| r.quality as u16).collect();
    assert_eq!(lean.played(), &q[..]);
}

#[test]
fn abandonment_checks_can_be_spaced_for_per_read_progress() {
    // one Progress per 100 bits, at 100 kbit/s (1 ms apart): with Sabre's
    // spacing the throughput rule checks only every 50 ms *and* 12 000 bits,
    // i.e. every 120 ms here
    let movie = Arc::new(Movie::constant(3000.0, &SABRE_LADDER, 5));
    let run = |bits: f64, ms: f64| {
        let c = PlayerConfig {
            abr: AbrRule::Throughput,
            abandon_check_min_bits: bits,
            abandon_check_min_ms: ms,
            ..PlayerConfig::default()
        };
        let mut p = Player::new(movie.clone(), c).unwrap();
        let mut now = 0.0;
        let Some(Action::Fetch { bits: b0, .. }) = p.poll_action(now) else {
            panic!()
        };
        // segment 0 arrives fast: a high estimate
        let elapsed_ms = (b0 / 100_000.0).ceil() + 1.0;
        now += elapsed_ms;
        let timing = Some(Timing {
            elapsed_ms,
            ttfb_ms: 1.0,
        });
        p.handle(now, Event::Completed { timing });
        let Some(Action::Fetch { quality, bits, .. }) = p.poll_action(now) else {
            panic!()
        };
        assert!(quality >= 8, "{quality}");
        let start = now;
        let mut got = 0.0;
        while got < bits {
            got += 100.0;
            now += 1.0;
            p.handle(
                now,
                Event::Progress {
                    received_bits: got,
                    timing: None,
                },
            );
            if let Some(Action::Abandon { .. }) = p.poll_action(now) {
                return now - start;
            }
        }
        panic!("never abandoned")
    };
    let every = run(0.0, 0.0);
    let spaced = run(12_000.0, 50.0);
    // both wait for the 500 ms grace: checking at every read abandons at
    // 500 ms, checking every 120 ms at the first check after it, 600 ms
    assert_eq!(every, 500.0);
    assert_eq!(spaced, 600.0);
}

// ---- BOLA-E ----

#[test]
fn bolae_constants_and_first_decision() {
    use super::abr::bolae::BolaE;
    // Sabre's movie, 25 s buffer: target max(10 + 2 × 10, 25) = 30 s,
    // γp = ln(6000/230) / (30/10 − 1) ≈ 1.6307, V = 10 000 / γp ≈ 6132.27
    let m = Movie::constant(3000.0, &SABRE_LADDER, 199);
    let mut b = BolaE::new(AbrParams::default(), &m, 25_000.0);
    let (gp, vp) = b.gp_vp();
    assert!((gp - (6000.0f64 / 230.0).ln() / 2.0).abs() < 1e-12);
    assert!((vp - 10_000.0 / gp).abs() < 1e-9);
    assert!((gp - 1.6307).abs() < 1e-4 && (vp - 6132.27).abs() < 0.01);
    // no estimate yet: stays at the last level
    let mut c = ctx(&m, 1, 3000.0, 1000.0);
    c.throughput_kbps = None;
    assert_eq!(b.decide(&c), (0, 0.0));
    // the first decision is the throughput's (1000 → 991, level 4), and the
    // placeholder makes BOLA agree: buffer + placeholder = the level's
    // minimum buffer
    let (q, delay) = b.decide(&ctx(&m, 1, 3000.0, 1000.0));
    assert_eq!((q, delay), (4, 0.0));
    let min4 = b.min_buffer_for_quality(&m, 4);
    assert!((b.placeholder_ms() - (min4 - 3000.0)).abs() < 1e-9);
    // a full-buffer wait goes into the placeholder
    let ph = b.placeholder_ms();
    b.report_delay(700.0);
    assert_eq!(b.placeholder_ms(), ph + 700.0);

    // with a slow estimate and a deep buffer BOLA-E steps up at most one
    // level above the throughput's (4 + 1 = 5) and asks to pause for the
    // buffer above that level's maximum, V (u_5 + γp), once the placeholder
    // is used up: 40 000 − V (ln(1427/230) + 1 + γp)
    b.report_delay(-700.0);
    let (q, delay) = b.decide(&ctx(&m, 20, 40_000.0, 1000.0));
    assert_eq!(q, 5);
    let want = 40_000.0 - vp * ((1427.0f64 / 230.0).ln() + 1.0 + gp);
    assert!((delay - want).abs() < 1e-6, "{delay} vs {want}");
    assert_eq!(b.placeholder_ms(), 0.0);
}

#[test]
fn a_lean_player_stays_small() {
    // the scale target is ≤ 64 KiB per player; a lean player over a
    // 199-segment movie with many abandoned attempts holds a few hundred
    // bytes beyond its struct; a recording one holds a record per download
    // and attempt (it can pass 64 KiB: players at scale run lean)
    let movie = Arc::new(Movie::constant(3000.0, &SABRE_LADDER, 199));
    let tr = trace(&[(20_000.0, 9_000.0), (10_000.0, 600.0)], 20.0);
    let lean = sim::run_player(
        movie.clone(),
        &tr,
        PlayerConfig {
            keep_records: false,
            ..cfg(AbrRule::Throughput)
        },
    )
    .unwrap();
    let full = sim::run_player(movie, &tr, cfg(AbrRule::Throughput)).unwrap();
    assert!(full.abandoned().len() > 20, "{}", full.abandoned().len());
    let (l, f) = (lean.memory_bytes(), full.memory_bytes());
    assert!(l < 4096, "lean player: {l} bytes");
    let recs = full.records().len() + full.abandoned().len();
    assert!(
        f >= l + recs * 100,
        "recording player: {f} bytes for {recs} records"
    );
    eprintln!(
        "lean {l} B; recording {f} B for {recs} records of {} B",
        std::mem::size_of::<SegmentRecord>()
    );
}

#[test]
fn every_rule_plays_a_one_level_movie_and_a_one_segment_movie() {
    let tr = trace(&[(1_000.0, 2_000.0), (500.0, 0.0)], 0.0);
    for rule in AbrRule::ALL {
        for movie in [
            Movie::constant(2000.0, &[800.0], 12),
            Movie::constant(2000.0, &PENSIEVE_LADDER, 1),
        ] {
            let n = movie.segments();
            let out = simulate(Arc::new(movie), &tr, cfg(rule)).unwrap();
            assert_eq!(out.segments.len(), n, "{rule}");
            assert_eq!(out.segments[0].quality, 0, "{rule}");
            assert!(out.qoe.session_ms.is_finite() && out.qoe.yin_qoe.is_finite());
        }
    }
}

#[test]
fn a_bitrate_cap_lowers_the_choice_and_lifting_it_restores_it() {
    // a fast link (each 1 s segment arrives in 10 ms): the throughput rule
    // climbs to the top level; a cap of 1500 kbit/s holds it at 1000, a cap
    // below the lowest level at the lowest; no cap, the top again
    let rates = [500.0, 1000.0, 2000.0, 4000.0];
    let movie = Arc::new(Movie::constant(1000.0, &rates, 40));
    let mut c = cfg(AbrRule::Throughput);
    c.max_buffer_ms = 1e9;
    let mut p = Player::new(movie, c).unwrap();
    let mut now = 0.0;
    let next = |p: &mut Player, now: &mut f64| -> usize {
        let Some(Action::Fetch { quality, .. }) = p.poll_action(*now) else {
            panic!("a fetch");
        };
        *now += 10.0;
        let timing = Some(Timing {
            elapsed_ms: 10.0,
            ttfb_ms: 1.0,
        });
        p.handle(*now, Event::Completed { timing });
        quality
    };
    let free: Vec<usize> = (0..8).map(|_| next(&mut p, &mut now)).collect();
    assert_eq!(*free.last().unwrap(), 3, "uncapped: the top level {free:?}");
    p.cap_bitrate(Some(1500.0));
    assert_eq!(p.bitrate_cap(), Some(1500.0));
    for _ in 0..5 {
        assert_eq!(next(&mut p, &mut now), 1, "capped at 1500 kbit/s");
    }
    p.cap_bitrate(Some(100.0));
    assert_eq!(next(&mut p, &mut now), 0, "below every level: the lowest");
    p.cap_bitrate(None);
    let lifted: Vec<usize> = (0..5).map(|_| next(&mut p, &mut now)).collect();
    assert_eq!(
        *lifted.last().unwrap(),
        3,
        "lifted: the top again {lifted:?}"
    );
    // the records say what was fetched
    assert!(p.records()[8..13].iter().all(|r| r.quality == 1));
}

#[test]
fn a_servers_etp_pulls_the_estimate_and_the_choice_by_its_weight() {
    // a fast link (each 1 s segment of the top level, 4000 kbit, arrives in
    // 9 ms of transfer: ~440 Mbit/s measured); the server says etp = 1500
    let rates = [500.0, 1000.0, 2000.0, 4000.0];
    let movie = Arc::new(Movie::constant(1000.0, &rates, 40));
    let run = |weight: f64, etp: Option<f64>| {
        let mut c = cfg(AbrRule::Throughput);
        c.max_buffer_ms = 1e9;
        c.etp_weight = weight;
        let mut p = Player::new(movie.clone(), c).unwrap();
        let mut now = 0.0;
        let mut got = Vec::new();
        for _ in 0..8 {
            let Some(Action::Fetch { quality, .. }) = p.poll_action(now) else {
                panic!("a fetch");
            };
            p.report_server_etp(etp);
            now += 10.0;
            let timing = Some(Timing {
                elapsed_ms: 10.0,
                ttfb_ms: 1.0,
            });
            p.handle(now, Event::Completed { timing });
            got.push(quality);
        }
        (got, p.throughput_estimate().unwrap())
    };
    // weight 1: every sample is the etp, so is the estimate; the rule
    // picks the highest level within 0.9 × 1500 (1000 kbit/s)
    let (q, est) = run(1.0, Some(1500.0));
    assert!((est - 1500.0).abs() < 1e-6, "{est}");
    assert!(q[1..].iter().all(|&l| l == 1), "{q:?}");
    // weight 0 (dash.js's default), or no etp sent: measured only, the top
    let (q, est) = run(0.0, Some(1500.0));
    assert_eq!(*q.last().unwrap(), 3, "{q:?}");
    assert!(est > 100_000.0, "{est}");
    let (q0, _) = run(1.0, None);
    assert_eq!(q0, q);
    // weight 0.5: half of each measured sample plus half the etp
    // (a level of R kbit/s: R × 1000 bits in 9 ms), so the estimate lies
    // between the mixed samples of the lowest and the top level
    let (_, free) = run(0.0, Some(1500.0));
    let (_, est) = run(0.5, Some(1500.0));
    let each = |kbps: f64| 0.5 * kbps * 1000.0 / 9.0 + 0.5 * 1500.0;
    assert!(
        est >= each(500.0) * 0.999 && est <= each(4000.0) * 1.001,
        "{est}"
    );
    assert!(est < free, "{est} {free}");
    // the setting is checked
    let mut c = cfg(AbrRule::Throughput);
    c.etp_weight = 1.5;
    let e = Player::new(movie.clone(), c).unwrap_err().to_string();
    assert!(e.contains("etp_weight"), "{e}");
}

#[test]
fn a_viewer_that_leaves_after_its_segments_is_counted_until_its_buffer_is_played() {
    // 10 segments of 1 s at 100 kbit/s, each downloaded in 10 ms: the
    // viewer came for 4 and leaves when the 4th arrives, holding ~4 s
    let movie = Arc::new(Movie::constant(1000.0, &[100.0], 10));
    let mut p = Player::new(movie, cfg(AbrRule::Throughput)).unwrap();
    let mut now = 0.0;
    while p.played().len() < 4 {
        let Some(Action::Fetch { .. }) = p.poll_action(now) else {
            panic!("a fetch")
        };
        now += 10.0;
        p.handle(now, Event::Completed { timing: None });
    }
    p.leave(now);
    let q = p.qoe();
    assert_eq!(q.segments, 4);
    assert_eq!(q.rebuffer_count, 0);
    // session = start-up + the 4 s it watched, not the 40 ms of downloads
    assert!(
        (q.session_ms - (q.startup_delay_ms + 4000.0)).abs() < 1e-6,
        "{q:?}"
    );
    // the time-average bit rate cannot exceed the only rendition's
    assert!(q.time_average_bitrate_kbps <= 100.0, "{q:?}");
    assert_eq!(p.poll_action(now + 5000.0), None, "done");
}

/// A live executor's loop over a 120 kbit/s link in virtual time (the
/// bench's players: 4 s segments, an 8 s buffer, progress per 1,460-byte
/// read): every timer it sets is a refill the player asked for, one per
/// segment once the buffer is full, and a wake before that instant gets
/// nothing to do.
#[test]
fn a_waiting_player_wakes_once_per_refill() {
    let movie = Arc::new(Movie::constant(
        4_000.0,
        &[50.0, 75.0, 100.0, 150.0, 200.0],
        20,
    ));
    let config = PlayerConfig {
        max_buffer_ms: 8_000.0,
        keep_records: false,
        abandon_check_min_bits: 12_000.0,
        abandon_check_min_ms: 50.0,
        ..cfg(AbrRule::Dynamic)
    };
    let mut p = Player::new(movie, config).unwrap();
    let (mut now, mut timers, mut refills, mut fetches) = (0.0, 0, 0, 0);
    let mut last_wait = None;
    loop {
        match p.poll_action(now) {
            None => {
                // the executor sleeps to the player's next instant
                let t = p
                    .poll_timeout()
                    .expect("a player with nothing to do names a time");
                assert!(t > now, "a timer for now would be a busy loop");
                now = t;
                timers += 1;
            }
            Some(Action::WaitUntil { until, wait_ms }) => {
                assert!(wait_ms > 0.0 && (until - now - wait_ms).abs() < 1e-9);
                // the timer is for the instant the buffer drains to the
                // refill point, and the player says so if asked again
                assert_eq!(p.poll_timeout(), Some(until));
                assert_eq!(p.poll_action(until - 1.0), None);
                last_wait = Some(until);
                now = until;
                timers += 1;
                refills += 1;
            }
            Some(Action::Fetch { bits, .. }) => {
                if let Some(w) = last_wait.take() {
                    assert_eq!(now, w, "the fetch leaves at the refill instant");
                }
                fetches += 1;
                let mut got = 0.0;
                while got < bits {
                    got = (got + 11_680.0).min(bits);
                    now += 11_680.0 / 120.0;
                    p.handle(
                        now,
                        Event::Progress {
                            received_bits: got,
                            timing: None,
                        },
                    );
                    assert!(!matches!(p.poll_action(now), Some(Action::Abandon { .. })));
                }
                p.handle(now, Event::Completed { timing: None });
            }
            Some(Action::Abandon { .. }) => unreachable!("checked at each read"),
            Some(Action::Done { .. }) => break,
        }
    }
    assert_eq!(fetches, 20);
    // every timer was a refill: no polling wake-ups
    assert_eq!(timers, refills);
    // after the first segments filled the buffer, one refill per segment
    assert!(refills >= 20 - 3, "{refills} refills for 20 segments");
    assert_eq!(p.qoe().rebuffer_count, 0);
}
