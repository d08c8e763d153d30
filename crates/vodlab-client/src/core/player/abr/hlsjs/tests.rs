//! hls.js 1.7.4's rules against cases worked by hand from its formulas
//! (the dash-vod ladder, 4 s fragments), in virtual time.

use std::sync::Arc;

use super::estimator::{BandwidthEstimator, Ewma};
use super::*;
use crate::core::player::sim::{simulate, Period, Trace};
use crate::core::player::{Movie, PlayerConfig, PlayerProfile};

/// The dash-vod ladder, kbit/s.
const LADDER: [f64; 6] = [235.0, 750.0, 1750.0, 3000.0, 4300.0, 5800.0];
const SEG: f64 = 4000.0;

fn movie(segments: usize) -> Movie {
    Movie::constant(SEG, &LADDER, segments)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

fn ctx(m: &Movie, buffer_ms: f64) -> Context<'_> {
    Context {
        movie: m,
        index: 1,
        buffer_ms,
        throughput_kbps: None,
        latency_ms: None,
        max_buffer_ms: 30_000.0,
        now_ms: 0.0,
    }
}

/// A state that loaded one fragment of `level` whose sample makes the
/// estimate exactly `kbps` (one sample: the zero-bias correction gives the
/// sample back), with a TTFB of 50 ms.
fn loaded_once(m: &Movie, level: usize, kbps: f64) -> HlsJs {
    let mut h = HlsJs::new(m);
    h.fragment_loading(0, level);
    // 1 s after the first byte: kbps × 1000 bits
    h.fragment_loaded(level, 50.0, 1050.0, kbps * 1000.0);
    assert!(
        close(h.estimate_kbps(), kbps, 1e-12),
        "{}",
        h.estimate_kbps()
    );
    h
}

/// The EWMA's closed form: Σ v_k (1 − a^w_k) a^(W_after_k) / (1 − a^W).
fn ewma_closed_form(half_life: f64, samples: &[(f64, f64)]) -> f64 {
    let total: f64 = samples.iter().map(|s| s.0).sum();
    let mut later = total;
    let mut sum = 0.0;
    for &(w, v) in samples {
        later -= w;
        sum += v * (1.0 - 0.5f64.powf(w / half_life)) * 0.5f64.powf(later / half_life);
    }
    sum / (1.0 - 0.5f64.powf(total / half_life))
}

#[test]
fn each_ewma_is_the_zero_bias_corrected_formula() {
    let samples = [(1.0, 2e6), (0.5, 1e6), (2.0, 4e6), (0.25, 3e6)];
    for h in [3.0, 9.0] {
        let mut e = Ewma::new(h);
        for (k, &(w, v)) in samples.iter().enumerate() {
            e.sample(w, v);
            let want = ewma_closed_form(h, &samples[..=k]);
            assert!(close(e.estimate(), want, 1e-12), "{h} {k}");
        }
        assert_eq!(e.total_weight(), 3.75);
    }
}

#[test]
fn the_estimate_is_the_smaller_ewma_of_bits_over_seconds() {
    let mut b = BandwidthEstimator::new(9.0, 3.0, 500_000.0);
    // nothing yet: abrEwmaDefaultEstimate and the 100 ms default TTFB
    assert!(!b.can_estimate());
    assert_eq!(b.estimate_bps(), 500_000.0);
    assert_eq!(b.estimate_ttfb_ms(), 100.0);
    // 250 kB in 1 s: 2 Mbit/s in both averages
    b.sample(1000.0, 250_000.0);
    assert!(b.can_estimate());
    assert!(close(b.estimate_bps(), 2e6, 1e-12));
    // 62.5 kB in 0.5 s: 1 Mbit/s; the fast (3 s) average falls further
    b.sample(500.0, 62_500.0);
    let fast = ewma_closed_form(3.0, &[(1.0, 2e6), (0.5, 1e6)]);
    let slow = ewma_closed_form(9.0, &[(1.0, 2e6), (0.5, 1e6)]);
    assert!(fast < slow);
    assert!(close(b.estimate_bps(), fast, 1e-12), "{}", b.estimate_bps());
    // 1 MB in 1 s: 8 Mbit/s; now the slow one is the smaller
    b.sample(1000.0, 1_000_000.0);
    let xs = [(1.0, 2e6), (0.5, 1e6), (1.0, 8e6)];
    let (fast, slow) = (ewma_closed_form(3.0, &xs), ewma_closed_form(9.0, &xs));
    assert!(slow < fast);
    assert!(close(b.estimate_bps(), slow, 1e-12));
    assert_eq!(b.averages_bps().0.min(b.averages_bps().1), b.estimate_bps());
    // a sample lasts at least min(50 ms, bytes / 100000): 10 MB in 10 ms
    // counts as 50 ms
    let mut c = BandwidthEstimator::new(9.0, 3.0, 500_000.0);
    c.sample(10.0, 10_000_000.0);
    assert!(close(c.estimate_bps(), 8e7 / 0.05, 1e-12));
    // no bytes: no sample
    c.sample(1000.0, 0.0);
    assert!(close(c.estimate_bps(), 8e7 / 0.05, 1e-12));
}

#[test]
fn ttfb_samples_are_floored_at_5_ms_and_weighted_by_a_bell() {
    let mut b = BandwidthEstimator::new(9.0, 3.0, 500_000.0);
    b.sample_ttfb(200.0);
    assert!(close(b.estimate_ttfb_ms(), 200.0, 1e-12));
    b.sample_ttfb(2.0);
    // weights √2·e^(−0.02) and √2·e^(−0.000002), values 200 and 5
    let w1 = std::f64::consts::SQRT_2 * (-0.02f64).exp();
    let w2 = std::f64::consts::SQRT_2 * (-0.000002f64).exp();
    let want = ewma_closed_form(9.0, &[(w1, 200.0), (w2, 5.0)]);
    assert!(close(b.estimate_ttfb_ms(), want, 1e-12));
}

#[test]
fn the_start_level_is_the_highest_within_the_default_estimate() {
    // the first listed level (235 kbit/s) is below 500 kbit/s: the start
    // estimate stays 500 kbit/s, and only 240p is at or under it
    let m = movie(15);
    let h = HlsJs::new(&m);
    assert_eq!(h.estimate_kbps(), 500.0);
    assert_eq!(h.start_level(0.0), 0);
    assert_eq!(h.next_level(0.0), 0);
    // a ladder with levels under 500 kbit/s: 400 kbit/s, whose 1 s
    // fragment (no playlist loaded yet) loads in 0.1 + 0.8 + 0.1 s < 4 s
    let low = Movie::constant(SEG, &[100.0, 200.0, 400.0, 800.0], 15);
    assert_eq!(HlsJs::new(&low).start_level(0.0), 2);
    // a first level above 500 kbit/s raises the start estimate to it
    let high = Movie::constant(SEG, &[1000.0, 2000.0, 4000.0], 15);
    let h = HlsJs::new(&high);
    assert_eq!(h.estimate_kbps(), 1000.0);
    assert_eq!(h.start_level(0.0), 0);
    // ...at most 5 Mbit/s
    let huge = Movie::constant(SEG, &[8000.0, 16000.0], 15);
    assert_eq!(HlsJs::new(&huge).estimate_kbps(), 5000.0);
}

#[test]
fn switching_up_needs_the_level_under_0_7_of_the_estimate() {
    let m = movie(15);
    // from 750 kbit/s with 20 s buffered: 0.7 × 2400 = 1680 < 1750 keeps
    // 384p (0.95 × 2400 ≥ 750)...
    let mut h = loaded_once(&m, 1, 2400.0);
    assert_eq!(h.decide(&ctx(&m, 20_000.0)), 1);
    // ...0.7 × 2600 = 1820 ≥ 1750 takes 480p (its fragment, playlist not
    // loaded: 0.05 + 7 Mbit / 1.82 Mbit/s + 0.05 = 3.95 s < 20 s)
    let mut h = loaded_once(&m, 1, 2600.0);
    assert_eq!(h.decide(&ctx(&m, 20_000.0)), 2);
    // 0.7 × 8300 = 5810 ≥ 5800: straight to the top
    let mut h = loaded_once(&m, 1, 8300.0);
    assert_eq!(h.decide(&ctx(&m, 20_000.0)), 5);
}

#[test]
fn staying_or_going_down_uses_0_95_of_the_estimate() {
    let m = movie(15);
    // at 720p: 0.95 × 3200 = 3040 ≥ 3000 stays (fetch 0.05 + 12/3.04 =
    // 4.0 s < 20 s); 0.95 × 3100 = 2945 < 3000 goes down to 480p
    let mut h = loaded_once(&m, 3, 3200.0);
    assert_eq!(h.decide(&ctx(&m, 20_000.0)), 3);
    let mut h = loaded_once(&m, 3, 3100.0);
    assert_eq!(h.decide(&ctx(&m, 20_000.0)), 2);
}

#[test]
fn a_short_buffer_picks_a_level_that_loads_before_it_runs_out() {
    let m = movie(15);
    let h = loaded_once(&m, 3, 3200.0);
    // 2 s buffered: 720p's fragment takes 3.99 s; 384p's (playlist not
    // loaded) 0.05 + 3 / 3.04 + 0.05 = 1.09 s < 2 s; 480p's 2.4 s does not
    assert_eq!(h.next_level(2000.0), 1);
    // nothing buffered: within maxStarvationDelay (min(4 s, 4 s)): 480p's
    // 0.05 + 7 / 3.04 + 0.05 = 2.4 s < 4 s; 720p's 3.99 s < 4 s too
    assert_eq!(h.next_level(0.0), 3);
}

/// A fragment of 720p (12 Mbit) in flight, `loaded` bits after `elapsed`
/// ms (first byte at 50 ms), with `buffer_ms` buffered.
fn progress(loaded: f64, elapsed: f64) -> Progress {
    Progress {
        quality: 3,
        size_bits: 12e6,
        downloaded_bits: loaded,
        elapsed_ms: elapsed,
        ttfb_ms: 50.0,
    }
}

#[test]
fn emergency_switch_down_fires_when_the_fragment_would_starve_the_buffer() {
    let m = movie(15);
    let mut h = loaded_once(&m, 3, 3200.0);
    h.fragment_loading(1, 3);
    // before half the fragment's duration: not looked at
    assert_eq!(
        h.check_abandon(1900.0, 1, &progress(1.9e6, 1900.0), 3000.0),
        None
    );
    // 2 Mbit after 2.1 s (0.976 Mbit/s since the first byte): the other
    // 10 Mbit take 10.25 s, more than the 12 s buffered? no: nothing
    assert_eq!(
        h.check_abandon(2100.0, 1, &progress(2e6, 2100.0), 12_000.0),
        None
    );
    assert_eq!(h.forced_level(), None);
    // 8 s buffered: 10.25 s > 8 s. 480p would take 0.05 + 7 / 0.976 +
    // 0.05 = 7.27 s, not under min(8, 4.05); 384p 3.17 s is: the next
    // level is 384p; finishing takes over twice that, so the request is
    // aborted at once and the player goes to 240p with the estimator
    // reset to its bit rate
    let mut a = h.clone();
    assert_eq!(
        a.check_abandon(2100.0, 1, &progress(2e6, 2100.0), 8000.0),
        Some(0)
    );
    assert_eq!(a.forced_level(), Some(0));
    assert_eq!(a.estimate_kbps(), 235.0);
    assert!(!a.estimator().can_estimate());
    // once declared, no second decision for the fragment
    assert_eq!(
        a.check_abandon(2200.0, 1, &progress(2.1e6, 2200.0), 7900.0),
        None
    );
    // the fragment refetched at 240p clears the forced level
    a.fragment_loading(1, 0);
    a.fragment_loaded(0, 50.0, 500.0, 940_000.0);
    assert_eq!(a.forced_level(), None);
    assert_eq!(a.last_loaded(), Some(0));
    // 3 s buffered: no lower level above 240p loads within 3 s, so the
    // next fragment is forced to 240p, and hls.js aborts only for a level
    // above 0: the request goes on
    let mut b = h.clone();
    assert_eq!(
        b.check_abandon(2100.0, 1, &progress(2e6, 2100.0), 3000.0),
        None
    );
    assert_eq!(b.forced_level(), Some(0));
    assert_eq!(b.next_level(3000.0), 0);
}

#[test]
fn an_emergency_abort_can_wait_for_the_lower_levels_load_time() {
    let m = movie(15);
    let mut h = loaded_once(&m, 3, 3200.0);
    h.fragment_loading(1, 3);
    // 4 Mbit after 2.1 s (1.951 Mbit/s): 8 Mbit left take 4.1 s > 3.9 s
    // buffered; 480p loads in 0.05 + 7 / 1.951 + 0.05 = 3.69 s < 3.9 s,
    // and 4.1 s is not over twice that: abort after 3.69 s if still
    // loading. findBestLevel at 480p's bit rate within the 3.9 s buffered
    // then prefers 384p (480p's fragment at its own rate takes 4 s + TTFB)
    assert_eq!(
        h.check_abandon(2100.0, 1, &progress(4e6, 2100.0), 3900.0),
        None
    );
    assert_eq!(h.forced_level(), Some(1));
    assert_eq!(
        h.check_abandon(5700.0, 1, &progress(10e6, 5700.0), 300.0),
        None
    );
    // at 2.1 + 3.69 s it is still loading: aborted, to 240p
    assert_eq!(
        h.check_abandon(5800.0, 1, &progress(10.2e6, 5800.0), 200.0),
        Some(0)
    );
    assert_eq!(h.forced_level(), Some(0));
    assert_eq!(h.estimate_kbps(), 235.0);
}

#[test]
fn the_buffer_target_is_60_mb_of_the_level_between_30_s_and_600_s() {
    assert!(close(
        max_buffer_length_ms(5800.0),
        480e6 / 5.8e6 * 1000.0,
        1e-12
    ));
    assert_eq!(max_buffer_length_ms(235.0), 600_000.0);
    assert_eq!(max_buffer_length_ms(20_000.0), 30_000.0);
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
fn the_profile_starts_low_then_climbs_and_fills_an_83_s_buffer() {
    let m = Arc::new(movie(200));
    let cfg = PlayerConfig::hlsjs();
    assert_eq!(cfg.profile, PlayerProfile::Hlsjs);
    let out = simulate(m, &trace(&[(1e7, 10_000.0)]), cfg).unwrap();
    let s = &out.segments;
    // 240p first; its 94 ms of transfer at 10 Mbit/s make the estimate
    // 10 Mbit/s: 0.7 × 10 = 7 Mbit/s ≥ 5.8, and 1080p-hi's fragment loads
    // in 0.02 + 23.2 / 7 + 0.02 = 3.35 s < the 4 s buffered
    assert_eq!(s[0].quality, 0);
    assert_eq!(s[1].quality, 5);
    assert!(s[2..].iter().all(|x| x.quality == 5));
    // requests leave below 82.76 s buffered, at the first 100 ms tick
    let target = max_buffer_length_ms(5800.0);
    let most = s.iter().map(|x| x.buffer_ms_before).fold(0.0, f64::max);
    assert!((target - 100.0 - 1e-6..target).contains(&most), "{most}");
    let waited: Vec<_> = s.iter().filter(|x| x.full_buffer_wait_ms > 0.0).collect();
    assert!(!waited.is_empty());
    for x in waited {
        let k = x.full_buffer_wait_ms / 100.0;
        assert!(close(k, k.round(), 1e-9), "{x:?}");
    }
    assert_eq!(out.qoe.rebuffer_count, 0);
}

#[test]
fn a_collapsing_link_aborts_to_240p_and_refetches_the_fragment() {
    let m = Arc::new(movie(30));
    // 10 Mbit/s for 6 s (the top level by then), then 600 kbit/s
    let out = simulate(
        m,
        &trace(&[(6_000.0, 10_000.0), (1e7, 600.0)]),
        PlayerConfig::hlsjs(),
    )
    .unwrap();
    assert!(!out.abandoned.is_empty(), "{:#?}", out.segments);
    for a in &out.abandoned {
        assert_eq!(a.abandoned_to, Some(0), "{a:?}");
        // the same fragment is loaded again at 240p
        let again = out.segments.iter().find(|s| s.index == a.index).unwrap();
        assert_eq!(again.quality, 0);
    }
    // the player settles below the link
    let last = out.segments.last().unwrap();
    assert!(LADDER[last.quality] < 600.0, "{last:?}");
}

#[test]
fn the_profile_name_parses() {
    assert_eq!(
        "hlsjs".parse::<PlayerProfile>().unwrap(),
        PlayerProfile::Hlsjs
    );
    assert_eq!(PlayerProfile::Hlsjs.to_string(), "hlsjs");
}
