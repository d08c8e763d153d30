//! `vodlab analyze --fit-spec`: a workload specification fitted from a log.
//!
//! [`SpecFitter`] takes the same requests as the [`crate::Analyzer`] (one at
//! a time, in log order) and fits what a `vodlab gen` spec of the `paced`
//! session model needs:
//!
//! - **popularity**: sessions per title (the title of a session's main file,
//!   the file it read most bytes of), ranked by count; the Zipf exponent is
//!   the maximum-likelihood estimate over the catalog's ranks (the titles of
//!   the workload when known, else the titles seen); a least-squares slope
//!   of log count against log rank is reported beside it;
//! - **title durations**: per title, its largest file size (known from the
//!   workload) or the furthest byte seen in any of its files, over the
//!   file's bit rate;
//! - **viewing fraction** and **start position**: per session, the bytes of
//!   its main file over the file's size, and where a contiguous read of
//!   those bytes ending at the furthest byte read would have started;
//! - **request size**: the median seconds of content per chunk request
//!   (quantiles of bytes and seconds reported);
//! - **pacing**: chains lasting longer than `long_chain_s` are delivered at
//!   some multiple of their file's bit rate; the median multiple m gives
//!   `pacing_s = request_s / m`;
//! - **representations**: the bit rates of the sessions' main files, drawn
//!   by their share of sessions;
//! - **arrivals**: sessions per second of log (in the header, for `vodlab
//!   run --rate`: a spec has no arrival rate).
//!
//! Memory: per file and per title (the catalog), per open session, and one
//! (file, bytes, furthest byte) record per session whose file size is not
//! known when the session ends (none when the workload is given).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use vodlab_workload::spec::{
    CatalogSpec, ClientClass, Ladder, Layout, Measurement, Placement, Popularity, Representation,
    RepresentationChoice, Selection, SessionSpec, Spec, StartPosition, Storage,
};

mod hist;

use hist::{round_sig, LogHist};

use crate::chains::{Chain, ChainDetector, FileDone};
use crate::{key, Form, Request, Settings};

/// What is known of a file beyond the log (from a workload's catalog).
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    /// Title key ([`crate::key`] of the title's name).
    pub title: u64,
    /// Size in bytes.
    pub size: u64,
    /// Bit rate, kbit/s.
    pub bitrate_kbps: f64,
    /// Representation name.
    pub rep: String,
}

/// The fit could not produce a spec.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// Nothing to fit.
    #[error("no requests to fit a workload from")]
    Empty,
    /// The fitted spec does not validate (a bug; the message names the key).
    #[error("the fitted spec is not valid: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone)]
struct FileAcc {
    title: u64,
    info: Option<FileInfo>,
    bitrate_kbps: Option<f64>,
    /// One past the furthest byte seen.
    max_end: u64,
}

#[derive(Debug, Default)]
struct Visit {
    bytes: u64,
    max_end: u64,
    requests: u64,
}

#[derive(Debug, Default)]
struct SessionAcc {
    last_s: f64,
    files: HashMap<u64, Visit>,
}

/// A session whose file size was unknown when it ended.
#[derive(Debug)]
struct Pending {
    file: u64,
    bytes: u64,
    max_end: u64,
}

/// Streams requests into the statistics a spec is fitted from; see the
/// module docs.
#[derive(Debug)]
pub struct SpecFitter {
    settings: Settings,
    catalog_titles: Option<u32>,
    files: HashMap<u64, FileAcc>,
    sessions: HashMap<u64, SessionAcc>,
    swept_s: f64,
    detector: ChainDetector,
    done: Vec<Chain>,
    files_done: Vec<FileDone>,
    pending: Vec<Pending>,
    // results
    title_sessions: HashMap<u64, u64>,
    rep_sessions: BTreeMap<String, (f64, u64)>,
    viewing: LogHist,
    start: LogHist,
    chunk_bytes: LogHist,
    chunk_s: LogHist,
    pace: LogHist,
    long_chains: u64,
    chains: u64,
    requests: u64,
    session_count: u64,
    first_s: f64,
    last_s: f64,
}

impl SpecFitter {
    /// A fitter using the analysis's chain window, long-chain threshold and
    /// session idle time.
    pub fn new(settings: &Settings) -> Self {
        SpecFitter {
            settings: settings.clone(),
            catalog_titles: None,
            files: HashMap::new(),
            sessions: HashMap::new(),
            swept_s: f64::NEG_INFINITY,
            detector: ChainDetector::new(settings.chain_window_s, settings.reorder_s),
            done: Vec::new(),
            files_done: Vec::new(),
            pending: Vec::new(),
            title_sessions: HashMap::new(),
            rep_sessions: BTreeMap::new(),
            viewing: LogHist::default(),
            start: LogHist::default(),
            chunk_bytes: LogHist::default(),
            chunk_s: LogHist::default(),
            pace: LogHist::default(),
            long_chains: 0,
            chains: 0,
            requests: 0,
            session_count: 0,
            first_s: f64::INFINITY,
            last_s: f64::NEG_INFINITY,
        }
    }

    /// The catalog has this many titles (from a workload): the popularity
    /// fit then counts titles never requested as rank positions with zero
    /// sessions.
    pub fn set_catalog_titles(&mut self, n: u32) {
        self.catalog_titles = Some(n);
    }

    /// Describes every file of a workload's catalog (keyed by `/` + its
    /// path, as a server logs it) and its title count. One file per title
    /// and bit rate only: a chunked catalog's files are chunks, not titles,
    /// so only the title count is taken from it.
    pub fn describe_catalog(&mut self, c: &vodlab_workload::construct::Catalog) {
        self.set_catalog_titles(c.titles.len() as u32);
        if c.layout != Layout::Single {
            return;
        }
        for t in &c.titles {
            for tr in &t.representations {
                let r = &c.representations[tr.rep];
                self.describe_file(
                    key(&format!("/{}", c.file_path(t, tr.rep, 0))),
                    FileInfo {
                        title: key(&t.name),
                        size: tr.content_bytes,
                        bitrate_kbps: r.bitrate_kbps,
                        rep: r.name.clone(),
                    },
                );
            }
        }
    }

    /// Describes a file (by its key) from a workload's catalog: its title,
    /// size, bit rate and representation name.
    pub fn describe_file(&mut self, file: u64, info: FileInfo) {
        self.files.insert(
            file,
            FileAcc {
                title: info.title,
                bitrate_kbps: Some(info.bitrate_kbps),
                info: Some(info),
                max_end: 0,
            },
        );
    }

    /// Adds one request of the log; `path` is its file's path (the title is
    /// its first component when the file was not described).
    pub fn push(&mut self, r: &Request, path: &str) {
        self.requests += 1;
        self.first_s = self.first_s.min(r.start_s);
        self.last_s = self.last_s.max(r.end_s);
        let f = self.files.entry(r.file).or_insert_with(|| {
            let p = path.trim_start_matches('/');
            let title_name = match p.split_once('/') {
                Some((t, _)) => t,
                None => p,
            };
            FileAcc {
                title: key(title_name),
                info: None,
                bitrate_kbps: None,
                max_end: 0,
            }
        });
        if f.bitrate_kbps.is_none() {
            f.bitrate_kbps = r.bitrate_kbps;
        }
        let end = r.offset + r.bytes;
        f.max_end = f.max_end.max(end);
        if let (Some(b), Form::Chunk) = (f.bitrate_kbps, r.form) {
            self.chunk_bytes.add(r.bytes as f64);
            self.chunk_s.add(r.bytes as f64 * 8.0 / (b * 1000.0));
        } else if r.form == Form::Chunk {
            self.chunk_bytes.add(r.bytes as f64);
        }
        let s = self.sessions.entry(r.session).or_default();
        s.last_s = s.last_s.max(r.end_s);
        let v = s.files.entry(r.file).or_default();
        v.bytes += r.bytes;
        v.max_end = v.max_end.max(end);
        v.requests += 1;

        self.detector
            .push(r, r.end_s, &mut self.done, &mut self.files_done);
        self.drain_chains();
        // sessions idle long enough are over (the analyzer's rule)
        let idle = self.settings.session_idle_s + self.settings.reorder_s;
        if r.end_s - self.swept_s > idle / 4.0 {
            self.swept_s = r.end_s;
            let over: Vec<u64> = self
                .sessions
                .iter()
                .filter(|(_, s)| r.end_s - s.last_s > idle)
                .map(|(k, _)| *k)
                .collect();
            for k in over {
                let s = self.sessions.remove(&k).expect("listed");
                self.close_session(s);
            }
        }
    }

    fn drain_chains(&mut self) {
        self.files_done.clear();
        for c in self.done.drain(..) {
            self.chains += 1;
            let d = c.duration_s();
            let rate = self.files.get(&c.file).and_then(|f| f.bitrate_kbps);
            if d > self.settings.long_chain_s {
                self.long_chains += 1;
                if let Some(b) = rate {
                    self.pace.add(c.bytes as f64 * 8.0 / 1000.0 / d / b);
                }
            }
        }
    }

    fn close_session(&mut self, s: SessionAcc) {
        let Some((&file, v)) = s
            .files
            .iter()
            .max_by_key(|(k, v)| (v.bytes, std::cmp::Reverse(**k)))
        else {
            return;
        };
        self.session_count += 1;
        // a session's last request is whole: it reads on average half a
        // request past where it stops viewing (the paced generator rounds
        // up to whole requests), so half a mean request is taken off
        let half = v.bytes / v.requests.max(1) / 2;
        let v = &Visit {
            bytes: v.bytes.saturating_sub(half),
            max_end: v.max_end,
            requests: v.requests,
        };
        let f = &self.files[&file];
        *self.title_sessions.entry(f.title).or_default() += 1;
        if let Some(b) = f.bitrate_kbps {
            let name = match &f.info {
                Some(i) => i.rep.clone(),
                None => rate_name(b),
            };
            self.rep_sessions.entry(name).or_insert((b, 0)).1 += 1;
        }
        match &f.info {
            Some(i) => {
                let (vf, st) = fractions(v.bytes, v.max_end, i.size);
                self.viewing.add(vf);
                self.start.add(st);
            }
            None => self.pending.push(Pending {
                file,
                bytes: v.bytes,
                max_end: v.max_end,
            }),
        }
    }

    /// The fitted spec, and what it was fitted from.
    pub fn finish(mut self) -> Result<Fitted, FitError> {
        self.detector.finish(&mut self.done, &mut self.files_done);
        self.drain_chains();
        let open: Vec<SessionAcc> = self.sessions.drain().map(|(_, s)| s).collect();
        for s in open {
            self.close_session(s);
        }
        if self.session_count == 0 {
            return Err(FitError::Empty);
        }
        for p in std::mem::take(&mut self.pending) {
            let size = self.files[&p.file].max_end;
            let (vf, st) = fractions(p.bytes, p.max_end, size);
            self.viewing.add(vf);
            self.start.add(st);
        }
        let mut notes = Vec::new();

        // popularity
        let mut counts: Vec<u64> = self.title_sessions.values().copied().collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let seen = counts.len() as u32;
        let titles = self.catalog_titles.unwrap_or(seen).max(seen).max(1);
        let alpha = zipf_mle(&counts, titles as usize);
        let alpha_ls = zipf_ls(&counts);
        notes.push(format!(
            "catalog.popularity: Zipf alpha {alpha:.3} by maximum likelihood over {titles} ranks \
             ({} sessions on {seen} titles; least squares of log count on log rank: {})",
            self.session_count,
            alpha_ls.map_or("n/a".into(), |a| format!("{a:.3}")),
        ));

        // title durations
        let mut per_title: HashMap<u64, f64> = HashMap::new();
        let mut estimated = false;
        for f in self.files.values() {
            let Some(b) = f.bitrate_kbps else { continue };
            let bytes = match &f.info {
                Some(i) => i.size,
                None => {
                    estimated = true;
                    f.max_end
                }
            };
            if bytes == 0 || (f.info.is_some() && !self.title_sessions.contains_key(&f.title)) {
                continue;
            }
            let d = bytes as f64 * 8.0 / (b * 1000.0);
            let e = per_title.entry(f.title).or_default();
            *e = e.max(d);
        }
        let mut durations = LogHist::default();
        for d in per_title.values() {
            durations.add(*d);
        }
        let rates_known = durations.n > 0;

        // the bit rate when the log has none: the median delivery rate of
        // long chains, in kbit/s
        let mut fallback_kbps = None;
        if !rates_known {
            fallback_kbps = Some(1000.0);
            notes.push(
                "no bit rates (give --workload or a CSV bitrate_kbps column): one 1,000 kbit/s \
                 representation is assumed, durations and request sizes are in its seconds"
                    .into(),
            );
            let kbps = 1000.0;
            for f in self.files.values() {
                if self.title_sessions.contains_key(&f.title) || f.max_end > 0 {
                    let d = f.max_end as f64 * 8.0 / (kbps * 1000.0);
                    let e = per_title.entry(f.title).or_default();
                    *e = e.max(d);
                }
            }
            for d in per_title.values() {
                durations.add(*d);
            }
        }
        notes.push(format!(
            "catalog.duration: {} titles' durations from {} (median {:.0} s)",
            durations.n,
            if estimated || !rates_known {
                "the furthest byte read of each file over its bit rate (a lower bound)"
            } else {
                "the workload's file sizes over their bit rates"
            },
            durations.quantile(0.5)
        ));
        let duration = durations.cdf(1.0, 1e6);

        // representations
        let mut reps: Vec<Representation> = Vec::new();
        let mut weights = BTreeMap::new();
        if let Some(kbps) = fallback_kbps {
            reps.push(Representation {
                name: rate_name(kbps),
                bitrate_kbps: kbps,
                share: 1.0,
                resolution: None,
                kind: Default::default(),
            });
            weights.insert(rate_name(kbps), 1.0);
        } else {
            let total: u64 = self.rep_sessions.values().map(|(_, n)| n).sum();
            let mut by_rate: Vec<(&String, &(f64, u64))> = self.rep_sessions.iter().collect();
            by_rate.sort_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
            for (name, (b, n)) in by_rate {
                reps.push(Representation {
                    name: name.clone(),
                    bitrate_kbps: *b,
                    share: 1.0,
                    resolution: None,
                    kind: Default::default(),
                });
                weights.insert(name.clone(), *n as f64 / total as f64);
            }
            let mut w = String::new();
            for (k, v) in &weights {
                let _ = write!(w, " {k} {:.1} %", v * 100.0);
            }
            notes.push(format!(
                "sessions.representation: the main file's bit rate of {total} sessions:{w}"
            ));
        }
        // shares must sum to 1 within 1e-6: put the rounding on the largest
        fix_sum(&mut weights);

        // request size and pacing
        let (request_s, size_note) = if self.chunk_s.n > 0 {
            (
                self.chunk_s.quantile(0.5),
                format!(
                    "sessions.request_s: median of {} chunk requests, seconds of content \
                     (p10 {:.2}, p90 {:.2} s; bytes p10 {:.0}, median {:.0}, p90 {:.0})",
                    self.chunk_s.n,
                    self.chunk_s.quantile(0.1),
                    self.chunk_s.quantile(0.9),
                    self.chunk_bytes.quantile(0.1),
                    self.chunk_bytes.quantile(0.5),
                    self.chunk_bytes.quantile(0.9)
                ),
            )
        } else if self.chunk_bytes.n > 0 {
            let kbps = fallback_kbps.unwrap_or(1000.0);
            (
                self.chunk_bytes.quantile(0.5) * 8.0 / (kbps * 1000.0),
                format!(
                    "sessions.request_s: median of {} chunk requests ({:.0} bytes) at the assumed rate",
                    self.chunk_bytes.n,
                    self.chunk_bytes.quantile(0.5)
                ),
            )
        } else {
            (
                2.0,
                "sessions.request_s: no chunk requests in the log; 2 s assumed".into(),
            )
        };
        notes.push(size_note);
        let request_s = round_sig(request_s.clamp(0.001, 600.0));
        let (pacing_s, pace_note) = if self.pace.n > 0 {
            let m = self.pace.quantile(0.5);
            (
                round_sig((request_s / m).clamp(0.0, 86_400.0)),
                format!(
                    "sessions.pacing_s: request_s / {m:.2}, the median delivery rate over the bit \
                     rate of {} chains longer than {} s (p10 {:.2}x, p90 {:.2}x); {} chains in all",
                    self.pace.n,
                    self.settings.long_chain_s,
                    self.pace.quantile(0.1),
                    self.pace.quantile(0.9),
                    self.chains
                ),
            )
        } else {
            (
                request_s,
                format!(
                    "sessions.pacing_s: no chain longer than {} s with a known bit rate ({} \
                     chains, {} long); real time (= request_s) assumed",
                    self.settings.long_chain_s, self.chains, self.long_chains
                ),
            )
        };
        notes.push(pace_note);
        notes.push(format!(
            "sessions.viewing_fraction and sessions.start: bytes of each session's main file over \
             its size ({} sessions; median viewing fraction {:.3}, median start {:.3})",
            self.viewing.n,
            self.viewing.quantile(0.5),
            self.start.quantile(0.5)
        ));
        let span = (self.last_s - self.first_s).max(0.0);
        let rate = if span > 0.0 {
            self.session_count as f64 / span
        } else {
            0.0
        };
        notes.push(format!(
            "arrivals: {} sessions over {span:.0} s of log, {rate:.4} sessions/s (vodlab run --rate {})",
            self.session_count,
            round_sig(rate)
        ));
        notes.push(
            "not fitted (defaults): buffering_requests, timeout_s, client classes (one \
             unshaped class), seed"
                .into(),
        );

        let spec = Spec {
            name: "fitted".into(),
            description: format!(
                "fitted by vodlab analyze --fit-spec from {} requests of {} sessions",
                self.requests, self.session_count
            ),
            catalog: CatalogSpec {
                titles,
                popularity: Popularity::Zipf {
                    alpha: round_sig(alpha),
                },
                duration,
                median_duration_top: 0,
                representations: reps,
                ladder: Ladder::Nested,
                storage: Storage {
                    layout: Layout::Single,
                    chunk_s: None,
                    pad_s: None,
                },
                placement: Placement::Random,
                manifests: None,
            },
            sessions: SessionSpec {
                count: self.session_count.min(2_000_000) as u32,
                viewing_fraction: self.viewing.cdf(0.0, 1.0),
                start: StartPosition::Fraction {
                    distribution: self.start.cdf(0.0, 1.0),
                },
                request_s,
                buffering_requests: 3,
                pacing_s: Some(pacing_s),
                timeout_s: 30.0,
                representation: RepresentationChoice::Mix { weights },
                selection: Selection::TitleFirst,
                min_requests: 1,
                model: Default::default(),
                netflix: None,
            },
            clients: vec![ClientClass {
                name: "log".into(),
                share: 1.0,
                down_kbps: 0.0,
                up_kbps: 0.0,
                delay_ms: 0.0,
            }],
            measurement: Measurement::default(),
        };
        spec.check("fitted spec")
            .map_err(|e| FitError::Invalid(e.to_string()))?;
        Ok(Fitted {
            spec,
            notes,
            alpha_mle: alpha,
            alpha_ls,
            sessions_per_s: rate,
        })
    }
}

/// (viewing fraction, start fraction) of `bytes` read ending at `max_end`
/// of a file of `size` bytes.
fn fractions(bytes: u64, max_end: u64, size: u64) -> (f64, f64) {
    if size == 0 {
        return (0.0, 0.0);
    }
    let vf = (bytes as f64 / size as f64).clamp(0.0, 1.0);
    let st = (max_end.saturating_sub(bytes) as f64 / size as f64).clamp(0.0, 1.0);
    (vf, st)
}

fn rate_name(kbps: f64) -> String {
    let r = (kbps * 1000.0).round() / 1000.0;
    format!("r{r}")
}

fn fix_sum(w: &mut BTreeMap<String, f64>) {
    let sum: f64 = w.values().sum();
    if let Some((_, v)) = w.iter_mut().max_by(|a, b| a.1.total_cmp(b.1)) {
        *v += 1.0 - sum;
    }
}

/// Maximum-likelihood Zipf exponent of `counts` (sorted descending, rank
/// r = index + 1) over `n` ranks (ranks past the counts have none): solves
/// Σ c_r ln r / Σ c_r = Σ r^-a ln r / Σ r^-a by bisection on [0, 10].
pub fn zipf_mle(counts: &[u64], n: usize) -> f64 {
    let total: u64 = counts.iter().sum();
    let n = n.max(counts.len());
    if total == 0 || n < 2 {
        return 0.0;
    }
    let observed: f64 = counts
        .iter()
        .enumerate()
        .map(|(i, c)| *c as f64 * ((i + 1) as f64).ln())
        .sum::<f64>()
        / total as f64;
    let model = |a: f64| {
        let (mut z, mut l) = (0.0, 0.0);
        for r in 1..=n {
            let lr = (r as f64).ln();
            let w = (-a * lr).exp();
            z += w;
            l += w * lr;
        }
        l / z
    };
    // the model's mean log rank falls as a grows
    let (mut lo, mut hi) = (0.0, 10.0);
    if model(lo) <= observed {
        return 0.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if model(mid) > observed {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Least-squares slope of log count against log rank (negated) over the
/// ranks with a count; `None` with fewer than 3.
pub fn zipf_ls(counts: &[u64]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(i, c)| (((i + 1) as f64).ln(), (*c as f64).ln()))
        .collect();
    if pts.len() < 3 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    (sxx > 0.0).then(|| -sxy / sxx)
}

/// A fitted spec and what it was fitted from.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The spec (validated).
    pub spec: Spec,
    /// One line per fitted key: what it was fitted from how much data.
    pub notes: Vec<String>,
    /// The Zipf exponent by maximum likelihood.
    pub alpha_mle: f64,
    /// The least-squares exponent, when there were at least 3 titles.
    pub alpha_ls: Option<f64>,
    /// Sessions per second of log.
    pub sessions_per_s: f64,
}

impl Fitted {
    /// The spec as TOML, headed by the notes as comments.
    pub fn to_toml(&self) -> String {
        let mut out = String::from(
            "# vodlab workload specification (docs/workload-spec.md), fitted from a log by\n\
             # `vodlab analyze --fit-spec` (docs/analyze.md). What each key was fitted from:\n",
        );
        for n in &self.notes {
            out.push_str("# - ");
            out.push_str(n);
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&toml::to_string(&self.spec).expect("a spec serializes"));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_mle_recovers_the_exponent_of_expected_counts() {
        for a in [0.0, 0.5, 0.8, 1.2] {
            let counts: Vec<u64> = (1..=500)
                .map(|r| (1e6 * (r as f64).powf(-a)).round() as u64)
                .collect();
            let got = zipf_mle(&counts, 500);
            assert!((got - a).abs() < 0.01, "{a}: {got}");
            let ls = zipf_ls(&counts).unwrap();
            assert!((ls - a).abs() < 0.01, "{a}: {ls}");
        }
    }

    #[test]
    fn unseen_ranks_lower_the_likelihood_of_a_flat_law() {
        // the same counts over a larger catalog mean a steeper law
        let counts = [100, 50, 33, 25, 20];
        assert!(zipf_mle(&counts, 50) > zipf_mle(&counts, 5));
    }
}
