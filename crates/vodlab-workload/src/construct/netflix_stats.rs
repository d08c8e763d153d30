//! The generator's own figures for a `netflix` workload, the analogues of
//! the thesis's chapter-5 marginals (Tables 5.2–5.3, chain lengths, phase
//! shares), computed from the nominal plans with the thesis's rules: a
//! chain is the generator's chain (contiguous requests of one file), long
//! when it lasts > 40 s (a stable phase), short chains closer than 10 s
//! form a transient phase, and no request for >= 40 s is an inactive phase
//! [T1608, T1671]. `vodlab analyze` recomputes them from logs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::netflix::{plan, Planned};
use super::*;
use crate::spec::RepKind;

/// Thesis thresholds [T1608, T1671].
const LONG_CHAIN_S: f64 = 40.0;
const CLUSTER_GAP_S: f64 = 10.0;
const INACTIVE_S: f64 = 40.0;

/// Chapter-5 figures of a `netflix` workload (in `stats.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetflixStats {
    /// Requests.
    pub requests: u64,
    /// Bytes of all requests (open-ended ones counted to `stop_after`).
    pub bytes: u64,
    /// Mean session duration (first request to last byte), seconds.
    pub mean_session_s: f64,
    /// Table 5.2: share of requests that are chunk (bounded range) requests, %.
    pub chunk_requests_pct: f64,
    /// Table 5.2: share of bytes sent for chunk requests, %.
    pub chunk_bytes_pct: f64,
    /// Table 5.2: share of requests that are open-ended, %.
    pub open_requests_pct: f64,
    /// Table 5.2: share of bytes sent for open-ended requests, %.
    pub open_bytes_pct: f64,
    /// Mean bytes of a chunk request [Table 5.2: 318 KB].
    pub mean_chunk_request_bytes: f64,
    /// Mean bytes of an open-ended request [Table 5.2: 13.4 MB].
    pub mean_open_request_bytes: f64,
    /// Share of bytes by kind: audio, video, combined, %.
    pub bytes_by_kind_pct: Vec<(String, f64)>,
    /// Table 5.3: most requests to one file within one second, per file
    /// per session: shares for 1, 2, 3, 4, 5 and >= 6, %.
    pub parallel_pct: Vec<f64>,
    /// Chains.
    pub chains: u64,
    /// Chains of at most 1 MB (10^6 bytes), % [T1524: > 60 %].
    pub chains_le_1mb_pct: f64,
    /// Chains longer than 10 MB, % [T1524: about 15 %].
    pub chains_gt_10mb_pct: f64,
    /// Bytes in chains longer than 10 MB, % [T1524: > 90 %].
    pub bytes_in_chains_gt_10mb_pct: f64,
    /// Chains that start at offset 0, % [T1533: about 24 %].
    pub chains_from_zero_pct: f64,
    /// Open-ended chains from offset 0 that are exactly 768 KiB, % [T1533: 84 %].
    pub open_from_zero_768k_pct: f64,
    /// Chunk chains from offset 0 shorter than 16 KiB, % [T1535: > 49 %].
    pub chunk_from_zero_lt_16k_pct: f64,
    /// Sessions that start with a transient phase, % [T1587: > 97 %].
    pub start_transient_pct: f64,
    /// Sessions shorter than 40 s, % [T1624: 33 %].
    pub sessions_lt_40s_pct: f64,
    /// Sessions with a stable phase, % [T1624: 56 %].
    pub sessions_with_stable_pct: f64,
    /// Time in transient phases, % of session time [T1683: 5.2 %].
    pub transient_time_pct: f64,
    /// Time in stable phases, % [T1683: 79.1 %].
    pub stable_time_pct: f64,
    /// Time in inactive phases, % [T1683: 16.4 %].
    pub inactive_time_pct: f64,
    /// Bytes in transient phases, % [T1683: 7.6 %].
    pub transient_bytes_pct: f64,
    /// Mean stable phase, seconds [T1648: 8.5 min].
    pub mean_stable_phase_s: f64,
    /// Transient phases per session [T1800: 4].
    pub transient_phases_per_session: f64,
}

#[derive(Debug, Clone, Copy)]
struct Span {
    start: f64,
    end: f64,
    bytes: u64,
}

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (100.0 * a / b * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

/// Computes the figures by planning every session again.
pub(super) fn compute(spec: &Spec, catalog: &Catalog, sessions: &[GenSession]) -> NetflixStats {
    let mut req = [(0u64, 0u64); 2]; // chunk, open
    let mut by_kind = [0u64; 3];
    let mut parallel = [0u64; 6];
    let (mut chains, mut le1, mut gt10, mut bytes_gt10, mut all_bytes) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut zero, mut open_zero, mut open_zero_768, mut chunk_zero, mut chunk_zero_16) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut start_transient, mut short_sessions, mut with_stable) = (0u64, 0u64, 0u64);
    let (mut session_s, mut transient_s, mut stable_s, mut inactive_s) = (0.0, 0.0, 0.0, 0.0);
    let mut stable_chain_s = 0.0;
    let (mut transient_b, mut stable_b, mut stable_n, mut transient_n) = (0u64, 0u64, 0u64, 0u64);
    let open768 = spec.sessions.netflix_spec().open_table_bytes;
    for g in sessions {
        let p = plan(spec, catalog, g);
        let t = &catalog.titles[g.title as usize];
        // per file: requests per second
        let mut per_sec: BTreeMap<(u16, u64), u32> = BTreeMap::new();
        let mut per_chain: BTreeMap<u32, (Planned, Span)> = BTreeMap::new();
        for q in &p.requests {
            req[q.open as usize].0 += 1;
            req[q.open as usize].1 += q.bytes;
            let kind = catalog.representations[t.representations[q.file as usize].rep].kind;
            by_kind[match kind {
                RepKind::Audio => 0,
                RepKind::Video => 1,
                RepKind::Combined => 2,
            }] += q.bytes;
            *per_sec.entry((q.file, q.t_ms / 1000)).or_default() += 1;
            let (s, e) = (q.t_ms as f64 / 1000.0, (q.t_ms + q.dur_ms) as f64 / 1000.0);
            per_chain
                .entry(q.chain)
                .and_modify(|(first, sp)| {
                    if q.offset < first.offset {
                        *first = *q;
                    }
                    sp.start = sp.start.min(s);
                    sp.end = sp.end.max(e);
                    sp.bytes += q.bytes;
                })
                .or_insert((
                    *q,
                    Span {
                        start: s,
                        end: e,
                        bytes: q.bytes,
                    },
                ));
        }
        let mut most: BTreeMap<u16, u32> = BTreeMap::new();
        for ((f, _), n) in per_sec {
            let m = most.entry(f).or_default();
            *m = (*m).max(n);
        }
        for (_, m) in most {
            parallel[(m.max(1) as usize - 1).min(5)] += 1;
        }
        let mut spans: Vec<Span> = Vec::with_capacity(per_chain.len());
        for (_, (first, sp)) in per_chain {
            chains += 1;
            all_bytes += sp.bytes;
            if sp.bytes <= 1_000_000 {
                le1 += 1;
            }
            if sp.bytes > 10_000_000 {
                gt10 += 1;
                bytes_gt10 += sp.bytes;
            }
            if first.offset == 0 {
                zero += 1;
                if first.open {
                    open_zero += 1;
                    if sp.bytes == open768 {
                        open_zero_768 += 1;
                    }
                } else {
                    chunk_zero += 1;
                    if sp.bytes < 16 * 1024 {
                        chunk_zero_16 += 1;
                    }
                }
            }
            spans.push(sp);
        }
        if spans.is_empty() {
            continue;
        }
        // phases, by the thesis's rules
        spans.sort_by(|a, b| a.start.total_cmp(&b.start));
        let first = spans[0].start;
        let last = spans.iter().map(|s| s.end).fold(f64::MIN, f64::max);
        let dur = (last - first).max(0.0);
        session_s += dur;
        if dur < LONG_CHAIN_S {
            short_sessions += 1;
        }
        let long = |s: &Span| s.end - s.start > LONG_CHAIN_S;
        let mut first_long = f64::INFINITY;
        let mut first_short = f64::INFINITY;
        let mut cluster: Option<(f64, f64)> = None;
        // stable time is the union of the long chains (audio beside video
        // is not twice the time; the thesis's shares add up to 100.7 %)
        let mut union: Option<(f64, f64)> = None;
        for s in &spans {
            if long(s) {
                stable_n += 1;
                stable_chain_s += s.end - s.start;
                stable_b += s.bytes;
                first_long = first_long.min(s.start);
                union = match union {
                    Some((a, b)) if s.start <= b => Some((a, b.max(s.end))),
                    Some((a, b)) => {
                        stable_s += b - a;
                        Some((s.start, s.end))
                    }
                    None => Some((s.start, s.end)),
                };
            } else {
                transient_b += s.bytes;
                first_short = first_short.min(s.start);
                cluster = match cluster {
                    Some((a, b)) if s.start - b < CLUSTER_GAP_S => Some((a, b.max(s.end))),
                    Some((a, b)) => {
                        transient_n += 1;
                        transient_s += b - a;
                        Some((s.start, s.end))
                    }
                    None => Some((s.start, s.end)),
                };
            }
        }
        if let Some((a, b)) = cluster {
            transient_n += 1;
            transient_s += b - a;
        }
        if let Some((a, b)) = union {
            stable_s += b - a;
        }
        if first_long.is_finite() {
            with_stable += 1;
        }
        if first_short <= first_long {
            start_transient += 1;
        }
        let mut covered = spans[0].end;
        for s in spans.iter().skip(1) {
            if s.start - covered >= INACTIVE_S {
                inactive_s += s.start - covered;
            }
            covered = covered.max(s.end);
        }
    }
    let nreq = (req[0].0 + req[1].0) as f64;
    let nbytes = (req[0].1 + req[1].1) as f64;
    let files: u64 = parallel.iter().sum();
    let ns = sessions.len() as f64;
    NetflixStats {
        requests: req[0].0 + req[1].0,
        bytes: req[0].1 + req[1].1,
        mean_session_s: if ns > 0.0 {
            (session_s / ns * 1000.0).round() / 1000.0
        } else {
            0.0
        },
        chunk_requests_pct: pct(req[0].0 as f64, nreq),
        chunk_bytes_pct: pct(req[0].1 as f64, nbytes),
        open_requests_pct: pct(req[1].0 as f64, nreq),
        open_bytes_pct: pct(req[1].1 as f64, nbytes),
        mean_chunk_request_bytes: (req[0].1 as f64 / req[0].0.max(1) as f64).round(),
        mean_open_request_bytes: (req[1].1 as f64 / req[1].0.max(1) as f64).round(),
        bytes_by_kind_pct: ["audio", "video", "combined"]
            .iter()
            .zip(by_kind)
            .map(|(k, b)| (k.to_string(), pct(b as f64, nbytes)))
            .collect(),
        parallel_pct: parallel
            .iter()
            .map(|&n| pct(n as f64, files as f64))
            .collect(),
        chains,
        chains_le_1mb_pct: pct(le1 as f64, chains as f64),
        chains_gt_10mb_pct: pct(gt10 as f64, chains as f64),
        bytes_in_chains_gt_10mb_pct: pct(bytes_gt10 as f64, all_bytes as f64),
        chains_from_zero_pct: pct(zero as f64, chains as f64),
        open_from_zero_768k_pct: pct(open_zero_768 as f64, open_zero as f64),
        chunk_from_zero_lt_16k_pct: pct(chunk_zero_16 as f64, chunk_zero as f64),
        start_transient_pct: pct(start_transient as f64, ns),
        sessions_lt_40s_pct: pct(short_sessions as f64, ns),
        sessions_with_stable_pct: pct(with_stable as f64, ns),
        transient_time_pct: pct(transient_s, session_s),
        stable_time_pct: pct(stable_s, session_s),
        inactive_time_pct: pct(inactive_s, session_s),
        transient_bytes_pct: pct(transient_b as f64, (transient_b + stable_b) as f64),
        mean_stable_phase_s: if stable_n > 0 {
            (stable_chain_s / stable_n as f64 * 10.0).round() / 10.0
        } else {
            0.0
        },
        transient_phases_per_session: if ns > 0.0 {
            (transient_n as f64 / ns * 1000.0).round() / 1000.0
        } else {
            0.0
        },
    }
}
