//! The player core against the Sabre ABR simulator: Sabre's movie, its 20
//! traces and its per-segment decisions for `throughput`, `bola`,
//! `dynamic`, `bolae` and `dynamicdash` (tests/data/sabre/README.md says
//! where they come from).
//!
//! The target: ≥ 99 % of segments at the same quality per rule and
//! stall totals within 5 %. docs/abr.md reports the measured agreement.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use vodlab_client::core::player::sim::{simulate, Trace};
use vodlab_client::core::player::{AbrRule, Movie, PlayerConfig};

#[derive(Debug, Deserialize)]
struct Run {
    qualities: Vec<usize>,
    rebuffer_ms: f64,
    rebuffer_events: u32,
    abandoned: usize,
}

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sabre")
}

fn oracle() -> BTreeMap<String, BTreeMap<String, Run>> {
    let text = std::fs::read_to_string(data().join("oracle.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn movie() -> Arc<Movie> {
    let text = std::fs::read_to_string(data().join("movie.json")).unwrap();
    Arc::new(Movie::from_json(&text).unwrap())
}

fn trace(name: &str) -> Trace {
    let text = std::fs::read_to_string(data().join(format!("traces/{name}.json"))).unwrap();
    Trace::from_json(&text).unwrap()
}

/// Per-rule agreement: (same-quality segments, all segments, our stall ms,
/// Sabre's stall ms), and a line per trace.
struct Agreement {
    same: usize,
    total: usize,
    ours_ms: f64,
    sabre_ms: f64,
    lines: Vec<String>,
}

fn agreement(rule: AbrRule) -> Agreement {
    let oracle = oracle();
    let movie = movie();
    let runs = &oracle[rule.name()];
    assert_eq!(runs.len(), 20, "oracle has 20 traces for {rule}");
    let mut a = Agreement {
        same: 0,
        total: 0,
        ours_ms: 0.0,
        sabre_ms: 0.0,
        lines: Vec::new(),
    };
    for (name, run) in runs {
        let cfg = PlayerConfig {
            abr: rule,
            ..PlayerConfig::default()
        };
        let out = simulate(movie.clone(), &trace(name), cfg).unwrap();
        let ours: Vec<usize> = out.segments.iter().map(|s| s.quality).collect();
        assert_eq!(
            ours.len(),
            run.qualities.len(),
            "{rule} {name}: segment count"
        );
        let same = ours
            .iter()
            .zip(&run.qualities)
            .filter(|(a, b)| a == b)
            .count();
        let first_diff = ours.iter().zip(&run.qualities).position(|(a, b)| a != b);
        // Sabre counts a stall only when its buffer runs dry *during* a
        // playout step; a buffer drained exactly to 0 by one abandoned
        // attempt and then stalled through the next ones is never counted
        // (hd_fs_trace0008 under `throughput`: segments 125 and 182). vodlab
        // counts every episode, so it may count more, never fewer.
        assert!(
            out.qoe.rebuffer_count >= run.rebuffer_events,
            "{rule} {name}: {} stalls, Sabre {}",
            out.qoe.rebuffer_count,
            run.rebuffer_events
        );
        assert_eq!(
            out.qoe.abandoned, run.abandoned,
            "{rule} {name}: abandoned attempts"
        );
        a.same += same;
        a.total += ours.len();
        a.ours_ms += out.qoe.rebuffer_ms;
        a.sabre_ms += run.rebuffer_ms;
        a.lines.push(format!(
            "{rule} {name}: same {same}/{} first diff {first_diff:?}; stall {:.1} vs {:.1} ms; \
             events {} vs {}; abandoned {} vs {}",
            ours.len(),
            out.qoe.rebuffer_ms,
            run.rebuffer_ms,
            out.qoe.rebuffer_count,
            run.rebuffer_events,
            out.qoe.abandoned,
            run.abandoned
        ));
    }
    for l in &a.lines {
        eprintln!("{l}");
    }
    eprintln!(
        "{rule}: {:.2} % same quality ({}/{}); stall total {:.1} ms vs Sabre {:.1} ms ({:+.2} %)",
        100.0 * a.same as f64 / a.total as f64,
        a.same,
        a.total,
        a.ours_ms,
        a.sabre_ms,
        100.0 * (a.ours_ms - a.sabre_ms) / a.sabre_ms
    );
    a
}

fn check(rule: AbrRule) {
    let a = agreement(rule);
    let frac = a.same as f64 / a.total as f64;
    assert!(
        frac >= 0.99,
        "{rule}: only {:.2} % same quality",
        100.0 * frac
    );
    let rel = (a.ours_ms - a.sabre_ms).abs() / a.sabre_ms.max(1.0);
    assert!(
        rel <= 0.05,
        "{rule}: stall totals differ by {:.2} %",
        100.0 * rel
    );
}

#[test]
fn sabre_throughput_agrees() {
    check(AbrRule::Throughput);
}

#[test]
fn sabre_bola_agrees() {
    check(AbrRule::Bola);
}

#[test]
fn sabre_dynamic_agrees() {
    check(AbrRule::Dynamic);
}

#[test]
fn sabre_bolae_agrees() {
    check(AbrRule::Bolae);
}

#[test]
fn sabre_dynamicdash_agrees() {
    check(AbrRule::Dynamicdash);
}
