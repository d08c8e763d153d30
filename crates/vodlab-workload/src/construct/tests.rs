//! Tests of `construct.rs`.

use super::*;
use crate::presets;
use crate::spec::size::round_ms;

#[test]
fn largest_remainder_sums() {
    assert_eq!(largest_remainder(10, &[0.5, 0.25, 0.25]), vec![5, 3, 2]);
    assert_eq!(largest_remainder(3, &[1.0 / 3.0; 3]), vec![1, 1, 1]);
    assert_eq!(
        largest_remainder(28000, &[20.0 / 28.0, 8.0 / 28.0]),
        vec![20000, 8000]
    );
}

#[test]
fn chunked_requests_name_whole_files() {
    let w = construct(&presets::load("youtube-2011").unwrap());
    let s = w.session(&w.sessions[0]);
    assert!(s.requests.iter().all(|r| r.range.is_none()));
    assert!(
        s.requests[0].path.ends_with("/sd/00000.m4s"),
        "{}",
        s.requests[0].path
    );
    assert_eq!(s.requests[0].wait, Wait::None);
    if s.requests.len() > 3 {
        assert_eq!(s.requests[3].wait, Wait::Pacing(10.0));
    }
}

#[test]
fn chunk_files_are_padded_to_the_same_space() {
    let a = build_catalog(&presets::load("youtube-2011").unwrap());
    let b = build_catalog(&presets::load("youtube-2011-2mb").unwrap());
    let c = build_catalog(&presets::load("youtube-2011-unchunked").unwrap());
    for ((x, y), z) in a.titles.iter().zip(&b.titles).zip(&c.titles) {
        assert_eq!(
            x.representations[0].stored_bytes,
            y.representations[0].stored_bytes
        );
        assert_eq!(
            x.representations[0].stored_bytes,
            z.representations[0].stored_bytes
        );
        assert_eq!(x.rank, y.rank);
        assert_eq!(x.duration_s, z.duration_s);
    }
    assert_eq!(a.representations[0].request_bytes, 524_288);
    assert_eq!(b.representations[0].chunk_bytes, 2 * 1024 * 1024);
}

#[test]
fn range_requests_tile_the_file() {
    let w = construct(&presets::load("youtube-2011-unchunked").unwrap());
    let g = w.sessions.iter().find(|g| g.requests > 4).unwrap();
    let s = w.session(g);
    for (k, r) in s.requests.iter().enumerate() {
        let range = r.range.unwrap();
        assert_eq!(range.start, k as u64 * 524_288);
        assert_eq!(range.len(), Some(524_288));
    }
}

#[test]
fn two_most_popular_titles_get_the_median_duration() {
    let spec = presets::load("youtube-2011").unwrap();
    let c = build_catalog(&spec);
    let med = round_ms(spec.catalog.duration.median());
    let top: Vec<f64> = c
        .titles
        .iter()
        .filter(|t| t.rank <= 2)
        .map(|t| t.duration_s)
        .collect();
    assert_eq!(top, vec![med, med]);
}

#[test]
fn cloudsuite_720p_on_a_fifth_of_titles_and_sessions_only_where_it_exists() {
    let w = construct(&presets::load("cloudsuite-2016").unwrap());
    let with_720 = w
        .catalog
        .titles
        .iter()
        .filter(|t| t.representations.iter().any(|tr| tr.rep == 3))
        .count();
    assert_eq!(with_720, 1600);
    let per: Vec<u64> = w
        .stats
        .sessions_per_representation
        .iter()
        .map(|x| x.1)
        .collect();
    let total: u64 = per.iter().sum();
    for (got, want) in per.iter().zip([0.1, 0.3, 0.4, 0.2]) {
        let share = *got as f64 / total as f64;
        assert!((share - want).abs() < 0.02, "{per:?}");
    }
    // the bandwidth mix of Table I
    let classes: Vec<u64> = w.stats.sessions_per_class.iter().map(|x| x.1).collect();
    for (got, want) in classes.iter().zip([0.19, 0.20, 0.34, 0.27]) {
        assert!(
            (*got as f64 / total as f64 - want).abs() < 0.02,
            "{classes:?}"
        );
    }
}

#[test]
fn mixed_preset_partitions_sd_and_hd() {
    let w = construct(&presets::load("youtube-2011-mixed").unwrap());
    let sd = w
        .catalog
        .titles
        .iter()
        .filter(|t| t.representations[0].rep == 0)
        .count();
    assert_eq!(sd, 20_000);
    assert!(w
        .catalog
        .titles
        .iter()
        .all(|t| t.representations.len() == 1));
    let per: Vec<u64> = w
        .stats
        .sessions_per_representation
        .iter()
        .map(|x| x.1)
        .collect();
    assert!((per[0] as f64 / 8000.0 - 0.5).abs() < 0.03, "{per:?}");
}

#[test]
fn rule_picks_highest_that_fits() {
    let reps: Vec<RepInfo> = [400.0, 1000.0, 2500.0]
        .iter()
        .map(|&b| RepInfo {
            name: String::new(),
            bitrate_kbps: b,
            request_bytes: 1,
            chunk_bytes: 0,
            resolution: None,
            kind: Default::default(),
        })
        .collect();
    assert_eq!(rule_choice(&reps, 2000.0, 0.8), 1);
    assert_eq!(rule_choice(&reps, 100.0, 0.8), 0);
    assert_eq!(rule_choice(&reps, 0.0, 0.8), 2);
}

#[test]
fn catalog_stream_is_independent_of_session_count() {
    let mut spec = presets::load("youtube-2011").unwrap();
    let a = build_catalog(&spec);
    spec.sessions.count = 10;
    assert_eq!(a, build_catalog(&spec));
}
