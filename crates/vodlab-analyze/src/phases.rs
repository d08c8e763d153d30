//! Phases of a session [T1577–T1683]: a long chain (lasting more than
//! `long_chain_s`) is a stable phase; short chains whose gaps (one's end to
//! the next one's start) are under `cluster_gap_s` form one transient phase;
//! a time with no request for at least `inactive_s` is an inactive phase.

use serde::{Deserialize, Serialize};

use crate::Settings;

/// What phases need of a chain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Bytes.
    pub bytes: u64,
}

/// Phase totals over sessions; merge by adding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTotals {
    /// Sessions.
    pub sessions: u64,
    /// Sessions whose first phase is transient.
    pub start_transient: u64,
    /// Sessions with at least one stable phase.
    pub with_stable: u64,
    /// Sessions shorter than `long_chain_s` (no stable phase possible).
    pub shorter_than_long: u64,
    /// Transient phases.
    pub transient_phases: u64,
    /// Stable phases.
    pub stable_phases: u64,
    /// Inactive phases.
    pub inactive_phases: u64,
    /// Session time (first request to last byte), seconds.
    pub session_s: f64,
    /// Time in transient phases, seconds.
    pub transient_s: f64,
    /// Time in stable phases (the union of the long chains), seconds.
    pub stable_s: f64,
    /// Summed durations of the long chains, seconds (the mean stable phase
    /// is this over `stable_phases`).
    #[serde(default)]
    pub stable_chain_s: f64,
    /// Time in inactive phases, seconds.
    pub inactive_s: f64,
    /// Bytes in transient phases.
    pub transient_bytes: u64,
    /// Bytes in stable phases.
    pub stable_bytes: u64,
}

impl PhaseTotals {
    /// Adds one session's chains (any order).
    pub fn add_session(&mut self, spans: &mut [Span], s: &Settings) {
        if spans.is_empty() {
            return;
        }
        spans.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        self.sessions += 1;
        let first = spans[0].start_s;
        let last = spans.iter().map(|c| c.end_s).fold(f64::MIN, f64::max);
        let dur = (last - first).max(0.0);
        self.session_s += dur;
        if dur < s.long_chain_s {
            self.shorter_than_long += 1;
        }
        let is_long = |c: &Span| c.end_s - c.start_s > s.long_chain_s;
        // stable phases; their time is the union of the long chains (an
        // audio chain beside a video chain is not twice the time: the
        // thesis's time shares add up to 100.7 % [T1683])
        let mut any_stable = false;
        let mut union: Option<(f64, f64)> = None;
        for c in spans.iter().filter(|c| is_long(c)) {
            any_stable = true;
            self.stable_phases += 1;
            self.stable_chain_s += c.end_s - c.start_s;
            self.stable_bytes += c.bytes;
            union = match union {
                Some((a, b)) if c.start_s <= b => Some((a, b.max(c.end_s))),
                Some((a, b)) => {
                    self.stable_s += b - a;
                    Some((c.start_s, c.end_s))
                }
                None => Some((c.start_s, c.end_s)),
            };
        }
        if let Some((a, b)) = union {
            self.stable_s += b - a;
        }
        if any_stable {
            self.with_stable += 1;
        }
        // transient clusters of short chains
        let mut cluster: Option<(f64, f64)> = None;
        let mut first_short_start = f64::INFINITY;
        for c in spans.iter().filter(|c| !is_long(c)) {
            first_short_start = first_short_start.min(c.start_s);
            self.transient_bytes += c.bytes;
            cluster = match cluster {
                Some((a, b)) if c.start_s - b < s.cluster_gap_s => Some((a, b.max(c.end_s))),
                Some((a, b)) => {
                    self.transient_phases += 1;
                    self.transient_s += b - a;
                    Some((c.start_s, c.end_s))
                }
                None => Some((c.start_s, c.end_s)),
            };
        }
        if let Some((a, b)) = cluster {
            self.transient_phases += 1;
            self.transient_s += b - a;
        }
        let first_long_start = spans
            .iter()
            .filter(|c| is_long(c))
            .map(|c| c.start_s)
            .fold(f64::INFINITY, f64::min);
        if first_short_start <= first_long_start {
            self.start_transient += 1;
        }
        // inactive: gaps of the union of chain intervals
        let mut covered_to = spans[0].end_s;
        for c in spans.iter().skip(1) {
            let gap = c.start_s - covered_to;
            if gap >= s.inactive_s {
                self.inactive_phases += 1;
                self.inactive_s += gap;
            }
            covered_to = covered_to.max(c.end_s);
        }
    }

    /// Adds another total.
    pub fn merge(&mut self, o: &PhaseTotals) {
        self.sessions += o.sessions;
        self.start_transient += o.start_transient;
        self.with_stable += o.with_stable;
        self.shorter_than_long += o.shorter_than_long;
        self.transient_phases += o.transient_phases;
        self.stable_phases += o.stable_phases;
        self.inactive_phases += o.inactive_phases;
        self.session_s += o.session_s;
        self.transient_s += o.transient_s;
        self.stable_s += o.stable_s;
        self.stable_chain_s += o.stable_chain_s;
        self.inactive_s += o.inactive_s;
        self.transient_bytes += o.transient_bytes;
        self.stable_bytes += o.stable_bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(a: f64, b: f64, bytes: u64) -> Span {
        Span {
            start_s: a,
            end_s: b,
            bytes,
        }
    }

    #[test]
    fn a_typical_session_transient_stable_inactive_stable() {
        let s = Settings::default();
        let mut t = PhaseTotals::default();
        // probing: three short chains 2 s apart, then a 300 s stable chain,
        // a 100 s pause, another stable chain
        let mut spans = vec![
            span(0.0, 3.0, 10),
            span(5.0, 6.0, 10),
            span(8.0, 12.0, 10),
            span(12.0, 312.0, 1000),
            span(412.0, 512.0, 500),
        ];
        t.add_session(&mut spans, &s);
        assert_eq!((t.sessions, t.start_transient, t.with_stable), (1, 1, 1));
        assert_eq!(
            (t.transient_phases, t.stable_phases, t.inactive_phases),
            (1, 2, 1)
        );
        assert_eq!(t.transient_s, 12.0);
        assert_eq!(t.stable_s, 400.0);
        assert_eq!(t.inactive_s, 100.0);
        assert_eq!(t.session_s, 512.0);
        assert_eq!((t.transient_bytes, t.stable_bytes), (30, 1500));
    }

    #[test]
    fn short_chains_further_apart_than_the_gap_are_separate_transients() {
        let s = Settings::default();
        let mut t = PhaseTotals::default();
        t.add_session(
            &mut [span(0.0, 1.0, 1), span(11.5, 12.0, 1), span(30.0, 31.0, 1)],
            &s,
        );
        assert_eq!(t.transient_phases, 3);
        assert_eq!(t.shorter_than_long, 1);
        assert_eq!(t.with_stable, 0);
        // a session starting with a long chain does not start transient
        let mut t = PhaseTotals::default();
        t.add_session(&mut [span(0.0, 100.0, 1), span(50.0, 51.0, 1)], &s);
        assert_eq!(t.start_transient, 0);
    }
}
