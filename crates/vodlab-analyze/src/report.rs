//! The streaming analyzer and what it reports: the analogues of Tables
//! 5.2 (requests by form), 5.3 (parallel requests per file), 5.4 (chains by
//! form), the chain-length shares and survival fit (Fig. 5.13), and the
//! phase shares [T1683].

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::chains::{Chain, ChainDetector, FileDone, KeyMap};
use crate::fit::{self, LengthHistogram, Piece};
use crate::phases::{PhaseTotals, Span};
use crate::{Form, Request, Settings, SettingsError};

const FORMS: [Form; 3] = [Form::Chunk, Form::Open, Form::Whole];

fn form_index(f: Form) -> usize {
    match f {
        Form::Chunk => 0,
        Form::Open => 1,
        Form::Whole => 2,
    }
}

#[derive(Debug, Default, Clone)]
struct ChainTally {
    chains: u64,
    requests: u64,
    bytes: u64,
    title_s: f64,
    with_rate: u64,
}

#[derive(Debug, Default)]
struct SessionAcc {
    last_arrival: f64,
    spans: Vec<Span>,
    /// Table 5.3 per file over the whole session: (file, most requests
    /// within one second).
    parallel: Vec<(u64, u32)>,
}

/// Streams requests into chains, sessions and tallies; see the crate docs.
#[derive(Debug)]
pub struct Analyzer {
    settings: Settings,
    detector: ChainDetector,
    sessions: KeyMap<u64, SessionAcc>,
    peak_sessions: usize,
    swept_s: f64,
    done: Vec<Chain>,
    files_done: Vec<FileDone>,
    requests: [(u64, u64); 3],
    chains: [ChainTally; 3],
    parallel: [u64; 6],
    lengths: LengthHistogram,
    from_zero: u64,
    open_from_zero: u64,
    open_from_zero_768k: u64,
    chunk_from_zero: u64,
    chunk_from_zero_lt_16k: u64,
    chunk_from_zero_lt_128k: u64,
    phases: PhaseTotals,
    first_s: f64,
    last_s: f64,
}

impl Analyzer {
    /// A new analyzer; the settings are validated.
    pub fn new(settings: Settings) -> Result<Self, SettingsError> {
        settings.validate()?;
        Ok(Analyzer {
            detector: ChainDetector::new(settings.chain_window_s, settings.reorder_s),
            settings,
            sessions: HashMap::default(),
            peak_sessions: 0,
            swept_s: f64::NEG_INFINITY,
            done: Vec::new(),
            files_done: Vec::new(),
            requests: [(0, 0); 3],
            chains: Default::default(),
            parallel: [0; 6],
            lengths: LengthHistogram::default(),
            from_zero: 0,
            open_from_zero: 0,
            open_from_zero_768k: 0,
            chunk_from_zero: 0,
            chunk_from_zero_lt_16k: 0,
            chunk_from_zero_lt_128k: 0,
            phases: PhaseTotals::default(),
            first_s: f64::INFINITY,
            last_s: f64::NEG_INFINITY,
        })
    }

    /// Adds one request, in log order.
    pub fn push(&mut self, r: &Request) {
        let now = r.end_s;
        self.first_s = self.first_s.min(r.start_s);
        self.last_s = self.last_s.max(r.end_s);
        let t = &mut self.requests[form_index(r.form)];
        t.0 += 1;
        t.1 += r.bytes;
        let s = self.sessions.entry(r.session).or_default();
        s.last_arrival = s.last_arrival.max(r.start_s);
        self.peak_sessions = self.peak_sessions.max(self.sessions.len());
        self.detector
            .push(r, now, &mut self.done, &mut self.files_done);
        self.drain();
        if now - self.swept_s >= 10.0 {
            self.swept_s = now;
            let before = now
                - self.settings.chain_window_s
                - self.settings.reorder_s
                - self.settings.session_idle_s;
            let settings = &self.settings;
            let phases = &mut self.phases;
            let parallel = &mut self.parallel;
            self.sessions.retain(|_, s| {
                if s.last_arrival < before {
                    phases.add_session(&mut s.spans, settings);
                    count_parallel(parallel, &s.parallel);
                    false
                } else {
                    true
                }
            });
        }
    }

    fn drain(&mut self) {
        for c in self.done.drain(..) {
            let t = &mut self.chains[form_index(c.form)];
            t.chains += 1;
            t.requests += c.requests as u64;
            t.bytes += c.bytes;
            if let Some(tt) = c.title_time_s() {
                t.title_s += tt;
                t.with_rate += 1;
            }
            self.lengths.record(c.bytes);
            if c.offset == 0 {
                self.from_zero += 1;
                match c.form {
                    Form::Open => {
                        self.open_from_zero += 1;
                        if c.bytes == 768 * 1024 {
                            self.open_from_zero_768k += 1;
                        }
                    }
                    Form::Chunk => {
                        self.chunk_from_zero += 1;
                        if c.bytes < 16 * 1024 {
                            self.chunk_from_zero_lt_16k += 1;
                        }
                        if c.bytes < 128 * 1024 {
                            self.chunk_from_zero_lt_128k += 1;
                        }
                    }
                    Form::Whole => {}
                }
            }
            self.sessions
                .entry(c.session)
                .or_default()
                .spans
                .push(Span {
                    start_s: c.start_s,
                    end_s: c.end_s,
                    bytes: c.bytes,
                });
        }
        for f in self.files_done.drain(..) {
            let acc = self.sessions.entry(f.session).or_default();
            match acc.parallel.iter_mut().find(|(file, _)| *file == f.file) {
                Some((_, m)) => *m = (*m).max(f.max_parallel),
                None => acc.parallel.push((f.file, f.max_parallel)),
            }
        }
    }

    /// Ends the log and computes the analysis.
    pub fn finish(mut self) -> Analysis {
        self.detector.finish(&mut self.done, &mut self.files_done);
        self.drain();
        for (_, mut s) in self.sessions.drain() {
            self.phases.add_session(&mut s.spans, &self.settings);
            count_parallel(&mut self.parallel, &s.parallel);
        }
        let pct = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
        let all_req: u64 = self.requests.iter().map(|r| r.0).sum();
        let all_bytes: u64 = self.requests.iter().map(|r| r.1).sum();
        let requests = FORMS
            .iter()
            .zip(self.requests)
            .map(|(f, (n, b))| RequestRow {
                form: f.name().into(),
                requests: n,
                requests_pct: pct(n as f64, all_req as f64),
                bytes: b,
                bytes_pct: pct(b as f64, all_bytes as f64),
            })
            .collect();
        let all_chains: u64 = self.chains.iter().map(|c| c.chains).sum();
        let row = |name: &str, t: &ChainTally| ChainRow {
            form: name.into(),
            chains: t.chains,
            chains_pct: pct(t.chains as f64, all_chains as f64),
            requests_per_chain: t.requests as f64 / t.chains.max(1) as f64,
            mb_per_chain: t.bytes as f64 / 1e6 / t.chains.max(1) as f64,
            title_s_per_chain: (t.with_rate > 0).then(|| t.title_s / t.with_rate as f64),
        };
        let mut chains: Vec<ChainRow> = FORMS
            .iter()
            .zip(&self.chains)
            .map(|(f, t)| row(f.name(), t))
            .collect();
        let total = self.chains.iter().fold(ChainTally::default(), |mut a, t| {
            a.chains += t.chains;
            a.requests += t.requests;
            a.bytes += t.bytes;
            a.title_s += t.title_s;
            a.with_rate += t.with_rate;
            a
        });
        chains.push(row("total", &total));
        let files: u64 = self.parallel.iter().sum();
        let parallel = ["1", "2", "3", "4", "5", ">=6"]
            .iter()
            .zip(self.parallel)
            .map(|(l, n)| ParallelRow {
                connections: l.to_string(),
                files: n,
                pct: pct(n as f64, files as f64),
            })
            .collect();
        let (le_1mb, bytes_le_1mb) = self.lengths.share_at_most(1e6);
        let (le_10mb, bytes_le_10mb) = self.lengths.share_at_most(1e7);
        let lengths = LengthShares {
            chains_le_1mb_pct: 100.0 * le_1mb,
            chains_gt_10mb_pct: 100.0 * (1.0 - le_10mb),
            bytes_lt_1mb_pct: 100.0 * bytes_le_1mb,
            bytes_gt_10mb_pct: 100.0 * (1.0 - bytes_le_10mb),
            from_zero_pct: pct(self.from_zero as f64, all_chains as f64),
            open_from_zero_768k_pct: pct(
                self.open_from_zero_768k as f64,
                self.open_from_zero as f64,
            ),
            chunk_from_zero_lt_16k_pct: pct(
                self.chunk_from_zero_lt_16k as f64,
                self.chunk_from_zero as f64,
            ),
            chunk_from_zero_lt_128k_pct: pct(
                self.chunk_from_zero_lt_128k as f64,
                self.chunk_from_zero as f64,
            ),
        };
        let p = &self.phases;
        let phase_bytes = (p.transient_bytes + p.stable_bytes) as f64;
        let phase_shares = PhaseShares {
            transient_time_pct: pct(p.transient_s, p.session_s),
            stable_time_pct: pct(p.stable_s, p.session_s),
            inactive_time_pct: pct(p.inactive_s, p.session_s),
            transient_bytes_pct: pct(p.transient_bytes as f64, phase_bytes),
            stable_bytes_pct: pct(p.stable_bytes as f64, phase_bytes),
            start_transient_pct: pct(p.start_transient as f64, p.sessions as f64),
            with_stable_pct: pct(p.with_stable as f64, p.sessions as f64),
            shorter_than_long_pct: pct(p.shorter_than_long as f64, p.sessions as f64),
            transient_phases_per_session: p.transient_phases as f64 / p.sessions.max(1) as f64,
        };
        Analysis {
            fit: fit::fit(
                &self.lengths,
                &self.settings.fit_breaks,
                self.settings.survival_p,
            ),
            survival: self.lengths.survival(),
            settings: self.settings,
            span_s: (self.last_s - self.first_s).max(0.0),
            requests,
            parallel,
            chains,
            lengths,
            histogram: self.lengths,
            phases: self.phases.clone(),
            phase_shares,
            peak_open_chains: self.detector.peak_open_chains() as u64,
            peak_sessions: self.peak_sessions as u64,
        }
    }
}

/// Adds a finished session's files to Table 5.3's bins.
fn count_parallel(bins: &mut [u64; 6], files: &[(u64, u32)]) {
    for &(_, m) in files {
        bins[(m.max(1) as usize - 1).min(5)] += 1;
    }
}

/// Table 5.2's analogue: requests and bytes by form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    /// `chunk`, `open` or `whole`.
    pub form: String,
    /// Requests.
    pub requests: u64,
    /// Share of requests, %.
    pub requests_pct: f64,
    /// Bytes sent.
    pub bytes: u64,
    /// Share of bytes, %.
    pub bytes_pct: f64,
}

/// Table 5.3's analogue: most requests to one file within one second, per
/// file per session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParallelRow {
    /// `1` … `5`, `>=6`.
    pub connections: String,
    /// (session, file) pairs.
    pub files: u64,
    /// Share, %.
    pub pct: f64,
}

/// Table 5.4's analogue: chains by the form of their first request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainRow {
    /// `chunk`, `open`, `whole` or `total`.
    pub form: String,
    /// Chains.
    pub chains: u64,
    /// Share of chains, %.
    pub chains_pct: f64,
    /// Mean requests per chain.
    pub requests_per_chain: f64,
    /// Mean MB (10^6 B) per chain.
    pub mb_per_chain: f64,
    /// Mean nominal title time per chain, seconds (chains whose file's bit
    /// rate is known).
    pub title_s_per_chain: Option<f64>,
}

/// Chain-length shares [T1524, T1533–T1535].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LengthShares {
    /// Chains of at most 1 MB, %.
    pub chains_le_1mb_pct: f64,
    /// Chains over 10 MB, %.
    pub chains_gt_10mb_pct: f64,
    /// Bytes in chains under 1 MB, %.
    pub bytes_lt_1mb_pct: f64,
    /// Bytes in chains over 10 MB, %.
    pub bytes_gt_10mb_pct: f64,
    /// Chains starting at offset 0, %.
    pub from_zero_pct: f64,
    /// Open-ended chains from 0 that are exactly 768 KiB, %.
    pub open_from_zero_768k_pct: f64,
    /// Chunk chains from 0 under 16 KiB, %.
    pub chunk_from_zero_lt_16k_pct: f64,
    /// Chunk chains from 0 under 128 KiB, %.
    pub chunk_from_zero_lt_128k_pct: f64,
}

/// Phase shares [T1587–T1683].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseShares {
    /// Session time in transient phases, %.
    pub transient_time_pct: f64,
    /// In stable phases, %.
    pub stable_time_pct: f64,
    /// In inactive phases, %.
    pub inactive_time_pct: f64,
    /// Bytes in transient phases, %.
    pub transient_bytes_pct: f64,
    /// Bytes in stable phases, %.
    pub stable_bytes_pct: f64,
    /// Sessions starting with a transient phase, %.
    pub start_transient_pct: f64,
    /// Sessions with a stable phase, %.
    pub with_stable_pct: f64,
    /// Sessions shorter than a long chain, %.
    pub shorter_than_long_pct: f64,
    /// Transient phases per session.
    pub transient_phases_per_session: f64,
}

/// Everything `vodlab analyze` reports (`analysis.json`, docs/analyze.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// The settings used.
    pub settings: Settings,
    /// First arrival to last completion, seconds.
    pub span_s: f64,
    /// Table 5.2.
    pub requests: Vec<RequestRow>,
    /// Table 5.3.
    pub parallel: Vec<ParallelRow>,
    /// Table 5.4 (last row: total).
    pub chains: Vec<ChainRow>,
    /// Length shares.
    pub lengths: LengthShares,
    /// Survival function points (bytes, P(X >= x)).
    pub survival: Vec<(f64, f64)>,
    /// Piecewise power-law fit.
    pub fit: Vec<Piece>,
    /// Chain-length histogram (log bins, mergeable).
    pub histogram: LengthHistogram,
    /// Phase totals.
    pub phases: PhaseTotals,
    /// Phase shares.
    pub phase_shares: PhaseShares,
    /// Most chains open at once (the analyzer's memory).
    pub peak_open_chains: u64,
    /// Most sessions held at once.
    pub peak_sessions: u64,
}

impl Analysis {
    /// Human-readable tables.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let p = &self.phases;
        let _ = writeln!(
            o,
            "{} sessions, {} chains over {:.0} s of log (at most {} chains and {} sessions held at once)",
            p.sessions,
            self.chains.last().map_or(0, |c| c.chains),
            self.span_s,
            self.peak_open_chains,
            self.peak_sessions
        );
        let _ = writeln!(o, "\nrequests by form (thesis Table 5.2)\n  form      requests       %          bytes       %");
        for r in &self.requests {
            let _ = writeln!(
                o,
                "  {:<6} {:>11} {:>7.1} {:>14} {:>7.1}",
                r.form, r.requests, r.requests_pct, r.bytes, r.bytes_pct
            );
        }
        let _ = writeln!(
            o,
            "\nmost requests to one file within 1 s, per file per session (Table 5.3)"
        );
        for r in &self.parallel {
            let _ = writeln!(
                o,
                "  {:>4}  {:>10} files  {:>5.1} %",
                r.connections, r.files, r.pct
            );
        }
        let _ = writeln!(o, "\nchains by form (Table 5.4)\n  form        chains      %  reqs/chain  MB/chain  title s/chain");
        for c in &self.chains {
            let _ = writeln!(
                o,
                "  {:<6} {:>11} {:>6.1} {:>11.1} {:>9.2} {:>14}",
                c.form,
                c.chains,
                c.chains_pct,
                c.requests_per_chain,
                c.mb_per_chain,
                c.title_s_per_chain
                    .map_or("-".into(), |t| format!("{t:.1}"))
            );
        }
        let l = &self.lengths;
        let _ = writeln!(
            o,
            "\nchain lengths: {:.1} % <= 1 MB, {:.1} % > 10 MB; bytes: {:.1} % in chains < 1 MB, {:.1} % in chains > 10 MB",
            l.chains_le_1mb_pct, l.chains_gt_10mb_pct, l.bytes_lt_1mb_pct, l.bytes_gt_10mb_pct
        );
        let _ = writeln!(
            o,
            "offset 0: {:.1} % of chains; open-ended from 0 exactly 768 KiB {:.1} %; chunk from 0 < 16 KiB {:.1} %, < 128 KiB {:.1} %",
            l.from_zero_pct, l.open_from_zero_768k_pct, l.chunk_from_zero_lt_16k_pct, l.chunk_from_zero_lt_128k_pct
        );
        let _ = writeln!(
            o,
            "\nsurvival fit S(x) = A x^-c (x in bytes; growth d/x for P = {})",
            self.settings.survival_p
        );
        for f in &self.fit {
            let _ = writeln!(
                o,
                "  {:>10.3e} .. {:<10.3e}  A = {:.4e}  c = {:.4}  d/x = {:.3}  ({} points, r² {:.4})",
                f.from, f.to, f.a, f.c, f.growth, f.points, f.r2
            );
        }
        let s = &self.phase_shares;
        let _ = writeln!(
            o,
            "\nphases: time transient {:.1} % / stable {:.1} % / inactive {:.1} %; bytes transient {:.1} % / stable {:.1} %",
            s.transient_time_pct, s.stable_time_pct, s.inactive_time_pct, s.transient_bytes_pct, s.stable_bytes_pct
        );
        let _ = writeln!(
            o,
            "sessions: {:.1} % start transient, {:.1} % have a stable phase, {:.1} % shorter than a long chain; {:.2} transient phases per session",
            s.start_transient_pct, s.with_stable_pct, s.shorter_than_long_pct, s.transient_phases_per_session
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: f64, file: u64, offset: u64) -> Request {
        Request {
            start_s: t,
            end_s: t + 0.1,
            session: 1,
            file,
            conn: None,
            offset,
            bytes: 100,
            form: Form::Chunk,
            bitrate_kbps: None,
        }
    }

    #[test]
    fn table_5_3_counts_a_file_once_per_session_even_across_long_gaps() {
        let mut a = Analyzer::new(Settings::default()).unwrap();
        // file 1: three requests in one second, then back 200 s later
        // (past the chain window and reorder allowance) with one request
        for (t, off) in [(0.1, 0), (0.2, 100), (0.3, 200), (200.0, 300)] {
            a.push(&req(t, 1, off));
        }
        // file 2 in between, one request a second
        for k in 0..3 {
            a.push(&req(10.0 + k as f64, 2, k * 100));
        }
        let r = a.finish();
        let files: Vec<u64> = r.parallel.iter().map(|p| p.files).collect();
        assert_eq!(files, vec![1, 0, 1, 0, 0, 0], "{:?}", r.parallel);
        assert_eq!(r.phases.sessions, 1);
    }

    #[test]
    fn an_analysis_reads_back_from_its_own_json() {
        let mut a = Analyzer::new(Settings::default()).unwrap();
        // 400 sessions of one chain each, 1 to 400 requests of 1 MB: chain
        // lengths across every piece of the fit, the last one unbounded
        let mut t = 0.0;
        for session in 0..400u64 {
            for k in 0..=session {
                a.push(&Request {
                    start_s: t,
                    end_s: t + 0.01,
                    session,
                    file: 7,
                    conn: None,
                    offset: k * 1_000_000,
                    bytes: 1_000_000,
                    form: Form::Chunk,
                    bitrate_kbps: None,
                });
                t += 0.01;
            }
            t += 100.0;
        }
        let r = a.finish();
        let text = serde_json::to_string(&r).unwrap();
        // the last survival piece ends at infinity, written as null
        let back: Analysis = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(back.requests, r.requests);
        assert_eq!(back.parallel, r.parallel);
        assert_eq!(back.fit.len(), r.fit.len());
        assert_eq!(back.fit.last().map(|p| p.to), Some(f64::INFINITY));
    }
}
