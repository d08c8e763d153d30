//! The `youtube-2011` presets reproduce the published workload statistics
//! (thesis Table 3.3 / SYSTOR 2012 Table 3) for several seeds.
//!
//! Targets, copied from the thesis:
//! - mean title duration 258.7 s (within 2 %)
//! - unique titles 3,366 (within 3 %; expected 3,351 for Zipf 0.8, 10,000 titles, 7,200 draws)
//! - single-session titles 67.5 % (within 1.5 points)
//! - unique chunks 60,004 (0.5 MB) and 16,318 (2 MB) (within 5 %)
//! - requests per session: Table 3.3 gives 14.628 / 3.766, section 3.7.3 gives
//!   15.4 / 4.3; the make_zipf.c CDFs land near the second (within 7 %), and
//!   total chunks = sessions x requests per session.
//! - chunks viewed once 44,478 / 12,293 (within 6 %)

use vodlab_workload::construct::construct;
use vodlab_workload::{presets, Overrides};

const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

fn stats(preset: &str, seed: u64) -> vodlab_workload::Stats {
    let mut spec = presets::load(preset).unwrap();
    spec.apply(
        &Overrides {
            seed: Some(seed),
            ..Default::default()
        },
        preset,
    )
    .unwrap();
    construct(&spec).stats
}

fn within(got: f64, want: f64, rel: f64) -> bool {
    (got / want - 1.0).abs() <= rel
}

#[test]
fn youtube_2011_half_megabyte_requests_match_table_3_3() {
    for seed in SEEDS {
        let s = stats("youtube-2011", seed);
        let ctx = format!("seed {seed}: {s:#?}");
        assert_eq!(s.sessions, 7200, "{ctx}");
        assert!(within(s.mean_title_duration_s, 258.7, 0.02), "{ctx}");
        assert!(within(s.unique_titles as f64, 3366.0, 0.03), "{ctx}");
        assert!((s.single_session_titles_pct - 67.5).abs() <= 1.5, "{ctx}");
        assert!(within(s.mean_title_size_mb, 12.9, 0.03), "{ctx}");
        assert!(within(s.unique_chunks as f64, 60_004.0, 0.05), "{ctx}");
        assert!(
            within(s.requests_per_session, 15.4, 0.07)
                || within(s.requests_per_session, 14.628, 0.07),
            "{ctx}"
        );
        assert!(within(s.total_chunks as f64, 15.4 * 7200.0, 0.07), "{ctx}");
        assert!(
            (s.total_chunks as f64 - s.requests_per_session * 7200.0).abs() < 1.0,
            "{ctx}"
        );
        assert!(within(s.chunks_viewed_once as f64, 44_478.0, 0.06), "{ctx}");
        assert!(
            (s.mean_session_time_s - 10.0 * s.requests_per_session).abs() < 0.01,
            "{ctx}"
        );
    }
}

#[test]
fn youtube_2011_two_megabyte_requests_match_table_3_3() {
    for seed in SEEDS {
        let s = stats("youtube-2011-2mb", seed);
        let ctx = format!("seed {seed}: {s:#?}");
        assert!(within(s.unique_titles as f64, 3366.0, 0.03), "{ctx}");
        assert!(within(s.unique_chunks as f64, 16_318.0, 0.05), "{ctx}");
        assert!(
            within(s.requests_per_session, 4.3, 0.07)
                || within(s.requests_per_session, 3.766, 0.07),
            "{ctx}"
        );
        assert!(within(s.total_chunks as f64, 4.3 * 7200.0, 0.07), "{ctx}");
        assert!(within(s.chunks_viewed_once as f64, 12_293.0, 0.06), "{ctx}");
    }
}

#[test]
fn request_size_changes_requests_not_titles() {
    // Table 3.3: the first four rows are the same for both request sizes.
    let a = stats("youtube-2011", 9);
    let b = stats("youtube-2011-2mb", 9);
    assert_eq!(a.unique_titles, b.unique_titles);
    assert_eq!(a.single_session_titles_pct, b.single_session_titles_pct);
    assert_eq!(a.mean_title_duration_s, b.mean_title_duration_s);
    assert!(b.mean_session_time_s > a.mean_session_time_s);
}

#[test]
fn chapter_4_workloads_have_the_published_shape() {
    // thesis 4.4.3: SD 12,000 sessions, 69 % single-view titles, 2.1 views per title;
    // HD 4,000 sessions, 72 % single-view titles, 1.9 views per title.
    let sd = stats("youtube-2011-sd", 1);
    assert_eq!(sd.sessions, 12_000);
    assert!(
        (sd.single_session_titles_pct - 69.0).abs() <= 2.0,
        "{sd:#?}"
    );
    assert!((sd.mean_views_per_title - 2.1).abs() <= 0.15, "{sd:#?}");
    let hd = stats("youtube-2011-hd", 1);
    assert_eq!(hd.sessions, 4_000);
    assert!(
        (hd.single_session_titles_pct - 72.0).abs() <= 2.0,
        "{hd:#?}"
    );
    assert!((hd.mean_views_per_title - 1.9).abs() <= 0.15, "{hd:#?}");
    // 2.5 MB per 10 s: HD titles are 5x SD titles
    assert!(within(
        hd.mean_title_size_mb / sd.mean_title_size_mb,
        5.0,
        0.03
    ));
}
