//! Capacity search (thesis 4.4.3): raise the session rate step by step until
//! the failure criterion trips, then bisect between the highest rate that
//! passed and the lowest that failed. Pure: the caller measures a rate (a real
//! run, or a simulated server in tests) and reports each outcome back.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::stats::{mean_ci, MeanCi};

/// Invalid search settings.
#[derive(Debug, Error, PartialEq)]
pub enum SearchError {
    /// A setting is out of range.
    #[error("capacity search: {0}")]
    Invalid(String),
}

/// When a measured point counts as served.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Criterion {
    /// No measured session may fail (the thesis's maximum failure-free rate).
    NoFailures,
    /// At most this percentage of measured sessions may fail.
    MaxFailedPct {
        /// Percent of measured sessions.
        pct: f64,
    },
    /// Quality of experience: at most `stalled_pct` % of sessions stall (a
    /// failed session counts as stalled) and the 95th percentile start-up
    /// delay is at most `p95_startup_s`.
    Qoe {
        /// Percent of measured sessions with a stall or a failure.
        stalled_pct: f64,
        /// Seconds.
        p95_startup_s: f64,
    },
}

impl Criterion {
    /// Parses `none`, `failed:PCT` or `qoe:STALLED_PCT:P95_STARTUP_S`.
    pub fn parse(s: &str) -> Result<Self, SearchError> {
        let bad = |why: &str| SearchError::Invalid(format!("criterion `{s}`: {why}"));
        let num = |x: &str| {
            x.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(&format!("`{x}` is not a non-negative number")))
        };
        let parts: Vec<&str> = s.split(':').collect();
        let c = match parts.as_slice() {
            ["none" | "no-failures" | "strict"] => Self::NoFailures,
            ["failed", p] => Self::MaxFailedPct { pct: num(p)? },
            ["qoe", p, s] => Self::Qoe {
                stalled_pct: num(p)?,
                p95_startup_s: num(s)?,
            },
            _ => {
                return Err(bad(
                    "use `none`, `failed:PCT` or `qoe:STALLED_PCT:P95_STARTUP_S`",
                ))
            }
        };
        if let Self::MaxFailedPct { pct }
        | Self::Qoe {
            stalled_pct: pct, ..
        } = c
        {
            if pct > 100.0 {
                return Err(bad("a percentage cannot exceed 100"));
            }
        }
        Ok(c)
    }

    /// `Ok(())` when the outcome passes, else why it does not.
    pub fn judge(&self, o: &Outcome) -> Result<(), String> {
        if o.measured_sessions == 0 {
            return Err("no measured session finished".into());
        }
        let failed = o.failed_sessions + o.unfinished_sessions;
        let failed_pct =
            100.0 * failed as f64 / (o.measured_sessions + o.unfinished_sessions) as f64;
        match *self {
            Self::NoFailures if failed > 0 => Err(format!(
                "{} failed and {} unfinished session(s)",
                o.failed_sessions, o.unfinished_sessions
            )),
            Self::MaxFailedPct { pct } if failed_pct > pct => Err(format!(
                "{failed_pct:.2} % of sessions failed (limit {pct} %)"
            )),
            Self::Qoe {
                stalled_pct,
                p95_startup_s,
            } => {
                let total = (o.measured_sessions + o.unfinished_sessions) as f64;
                let bad =
                    (o.stalled_sessions + failed).min(o.measured_sessions + o.unfinished_sessions);
                let got = 100.0 * bad as f64 / total;
                if got > stalled_pct {
                    Err(format!(
                        "{got:.2} % of sessions stalled or failed (limit {stalled_pct} %)"
                    ))
                } else if o.p95_startup_s > p95_startup_s {
                    Err(format!(
                        "p95 start-up delay {:.2} s (limit {p95_startup_s} s)",
                        o.p95_startup_s
                    ))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for Criterion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoFailures => write!(f, "no failed session"),
            Self::MaxFailedPct { pct } => write!(f, "at most {pct} % failed sessions"),
            Self::Qoe {
                stalled_pct,
                p95_startup_s,
            } => write!(
                f,
                "at most {stalled_pct} % stalled sessions and p95 start-up <= {p95_startup_s} s"
            ),
        }
    }
}

/// What one run at a rate produced (the part the criterion and the summary need).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Sessions outside the ramps that ran to their end.
    pub measured_sessions: u64,
    /// Of those, failed.
    pub failed_sessions: u64,
    /// Sessions still running when the run was cut (count as failed).
    pub unfinished_sessions: u64,
    /// Measured sessions that stalled at least once.
    pub stalled_sessions: u64,
    /// 95th percentile start-up delay, s.
    pub p95_startup_s: f64,
    /// Delivered throughput over the measured window, bytes/s.
    pub throughput_bytes_per_s: f64,
    /// The client's health verdict: false means the load generator could
    /// not keep up and the point is not trustworthy.
    pub client_valid: bool,
    /// Why the client marked the run invalid.
    pub client_invalid_reasons: Vec<String>,
    /// Extra figures of the run (disk throughput, server statistics, ...).
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// How the stepping phase raises the rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "by", rename_all = "snake_case")]
pub enum Step {
    /// Add this many sessions/s (the thesis adds a fixed amount).
    Add(f64),
    /// Multiply by this factor (> 1): finds the bracket in few points when
    /// the capacity is unknown.
    Mul(f64),
}

/// Search settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    /// First rate tried, sessions/s.
    pub start: f64,
    /// Step of the raising phase (and, when the first rate fails, of lowering).
    pub step: Step,
    /// Stop bisecting when the bracket is narrower than this fraction of its
    /// lower end (0.05 = 5 %).
    pub precision: f64,
    /// Never try a rate above this.
    pub max_rate: f64,
    /// Never try a rate below this.
    pub min_rate: f64,
    /// Measure every rate this many times; a rate passes only if every
    /// repetition passes.
    pub repeats: u32,
    /// Stop after this many rates in all.
    pub max_points: usize,
    /// The criterion.
    pub criterion: Criterion,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            start: 1.0,
            step: Step::Mul(2.0),
            precision: 0.1,
            max_rate: 10_000.0,
            min_rate: 0.01,
            repeats: 1,
            max_points: 20,
            criterion: Criterion::NoFailures,
        }
    }
}

impl SearchConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), SearchError> {
        let bad = |m: String| Err(SearchError::Invalid(m));
        if !(self.min_rate > 0.0 && self.min_rate <= self.start && self.start <= self.max_rate) {
            return bad(format!(
                "need 0 < min rate ({}) <= start ({}) <= max rate ({})",
                self.min_rate, self.start, self.max_rate
            ));
        }
        match self.step {
            Step::Add(d) if !(d > 0.0 && d.is_finite()) => {
                return bad(format!("step +{d} must be > 0"))
            }
            Step::Mul(f) if !(f > 1.0 && f.is_finite()) => {
                return bad(format!("step x{f} must be > 1"))
            }
            _ => {}
        }
        if !(self.precision > 0.0 && self.precision < 1.0) {
            return bad(format!("precision {} must be in (0, 1)", self.precision));
        }
        if self.repeats == 0 || self.max_points == 0 {
            return bad("repeats and max points must be at least 1".into());
        }
        Ok(())
    }
}

/// The repetitions at one rate and their verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Offered session rate, sessions/s.
    pub rate: f64,
    /// Every repetition passed.
    pub passed: bool,
    /// Why not (first failing repetition's reason).
    pub reason: Option<String>,
    /// The repetitions, in order.
    pub runs: Vec<Outcome>,
}

impl Point {
    /// Throughput over the repetitions, bytes/s, with its 95 % interval.
    pub fn throughput(&self) -> Option<MeanCi> {
        mean_ci(
            &self
                .runs
                .iter()
                .map(|o| o.throughput_bytes_per_s)
                .collect::<Vec<_>>(),
        )
    }
    /// Percent of sessions failed (or unfinished) over the repetitions.
    pub fn failed_pct(&self) -> Option<MeanCi> {
        mean_ci(
            &self
                .runs
                .iter()
                .map(|o| {
                    let all = o.measured_sessions + o.unfinished_sessions;
                    if all == 0 {
                        100.0
                    } else {
                        100.0 * (o.failed_sessions + o.unfinished_sessions) as f64 / all as f64
                    }
                })
                .collect::<Vec<_>>(),
        )
    }
    /// A numeric extra figure over the repetitions.
    pub fn extra(&self, key: &str) -> Option<MeanCi> {
        let xs: Vec<f64> = self
            .runs
            .iter()
            .filter_map(|o| o.extra.get(key).and_then(|v| v.as_f64()))
            .collect();
        mean_ci(&xs)
    }
    /// Every repetition's client was healthy.
    pub fn client_valid(&self) -> bool {
        self.runs.iter().all(|o| o.client_valid)
    }
}

/// Why the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The bracket is within the precision.
    Converged,
    /// Even the highest allowed rate passed: the capacity is at least that.
    AboveMaxRate,
    /// Even the lowest allowed rate failed.
    BelowMinRate,
    /// The point budget ran out before convergence.
    OutOfPoints,
}

/// The search state: feed it outcomes, ask it for the next rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Search {
    /// Settings.
    pub config: SearchConfig,
    /// Every measured rate in order.
    pub points: Vec<Point>,
    /// The rate being repeated and its outcomes so far.
    #[serde(skip)]
    pending: Option<(f64, Vec<Outcome>)>,
}

/// The answer of a finished (or stopped) search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Highest rate that passed, sessions/s (`None`: none passed).
    pub capacity: Option<f64>,
    /// Lowest rate that failed (`None`: none failed).
    pub lowest_failed: Option<f64>,
    /// Why the search ended (`None` while it is still running).
    pub ending: Option<Ending>,
    /// A rate passed above one that failed (noise or a non-monotone server).
    pub non_monotone: bool,
}

impl Search {
    /// A new search; the settings must validate.
    pub fn new(config: SearchConfig) -> Result<Self, SearchError> {
        config.validate()?;
        Ok(Self {
            config,
            points: Vec::new(),
            pending: None,
        })
    }

    fn best_pass(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.passed)
            .map(|p| p.rate)
            .reduce(f64::max)
    }

    fn lowest_fail(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| !p.passed)
            .map(|p| p.rate)
            .reduce(f64::min)
    }

    /// The rate to measure next (the same rate until its repetitions are
    /// in), or `None` when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        self.decide().0
    }

    /// Which repetition of the next rate is due (0-based).
    pub fn next_repeat(&self) -> u32 {
        self.pending.as_ref().map_or(0, |(_, v)| v.len() as u32)
    }

    fn decide(&self) -> (Option<f64>, Option<Ending>) {
        let c = &self.config;
        if let Some((rate, _)) = &self.pending {
            return (Some(*rate), None);
        }
        let (lo, hi) = (self.best_pass(), self.lowest_fail());
        let next = match (lo, hi) {
            (None, None) => c.start,
            (Some(lo), None) => {
                if lo >= c.max_rate {
                    return (None, Some(Ending::AboveMaxRate));
                }
                match c.step {
                    Step::Add(d) => lo + d,
                    Step::Mul(f) => lo * f,
                }
                .min(c.max_rate)
            }
            (None, Some(hi)) => {
                if hi <= c.min_rate {
                    return (None, Some(Ending::BelowMinRate));
                }
                match c.step {
                    Step::Add(d) => hi - d,
                    Step::Mul(f) => hi / f,
                }
                .max(c.min_rate)
            }
            (Some(lo), Some(hi)) => {
                if hi <= lo || (hi - lo) <= c.precision * lo {
                    return (None, Some(Ending::Converged));
                }
                (lo + hi) / 2.0
            }
        };
        if self.points.len() >= c.max_points {
            return (None, Some(Ending::OutOfPoints));
        }
        (Some(next), None)
    }

    /// Records the outcome of one repetition at `rate` (which must be
    /// `next_rate()`). A failing repetition settles the rate at once (the
    /// remaining repetitions would not change the verdict); otherwise the
    /// rate is settled after `repeats` passing ones.
    pub fn record(&mut self, rate: f64, outcome: Outcome) {
        debug_assert_eq!(
            Some(rate),
            self.next_rate(),
            "record the rate next_rate() gave"
        );
        let (_, runs) = self.pending.get_or_insert_with(|| (rate, Vec::new()));
        let verdict = self.config.criterion.judge(&outcome);
        runs.push(outcome);
        let settled = verdict.is_err() || runs.len() as u32 >= self.config.repeats;
        if settled {
            let (rate, runs) = self.pending.take().expect("pending was set above");
            self.points.push(Point {
                rate,
                passed: verdict.is_ok(),
                reason: verdict.err(),
                runs,
            });
        }
    }

    /// The answer so far (final once `next_rate()` is `None`).
    pub fn answer(&self) -> Answer {
        let (capacity, lowest_failed) = (self.best_pass(), self.lowest_fail());
        Answer {
            capacity,
            lowest_failed,
            ending: self.decide().1,
            non_monotone: matches!((capacity, lowest_failed), (Some(a), Some(b)) if a >= b),
        }
    }

    /// Drives the whole search: `measure(rate, repeat)` runs one repetition.
    /// Stops early (keeping every point so far) when `measure` fails.
    pub fn run<E>(
        &mut self,
        mut measure: impl FnMut(f64, u32) -> Result<Outcome, E>,
    ) -> Result<Answer, E> {
        while let Some(rate) = self.next_rate() {
            let o = measure(rate, self.next_repeat())?;
            self.record(rate, o);
        }
        Ok(self.answer())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A simulated server: sessions fail when the rate exceeds its capacity;
    /// `noise` flips the verdict of rates within that fraction of the capacity.
    fn outcome(rate: f64, capacity: f64) -> Outcome {
        let over = rate > capacity;
        Outcome {
            measured_sessions: 100,
            failed_sessions: if over {
                ((rate - capacity) * 10.0).ceil() as u64
            } else {
                0
            },
            throughput_bytes_per_s: rate.min(capacity) * 1e6,
            client_valid: true,
            ..Default::default()
        }
    }

    fn search(cfg: SearchConfig, capacity: f64) -> (Search, Answer) {
        let mut s = Search::new(cfg).unwrap();
        let a = s.run(|r, _| Ok::<_, ()>(outcome(r, capacity))).unwrap();
        (s, a)
    }

    #[test]
    fn doubles_then_bisects() {
        let cfg = SearchConfig {
            start: 1.0,
            precision: 0.05,
            ..Default::default()
        };
        let (s, a) = search(cfg, 11.0);
        let rates: Vec<f64> = s.points.iter().map(|p| p.rate).collect();
        assert_eq!(&rates[..5], &[1.0, 2.0, 4.0, 8.0, 16.0]);
        assert_eq!(rates[5], 12.0);
        assert_eq!(rates[6], 10.0);
        assert_eq!(a.ending, Some(Ending::Converged));
        let (lo, hi) = (a.capacity.unwrap(), a.lowest_failed.unwrap());
        assert!(lo <= 11.0 && 11.0 < hi && hi - lo <= 0.05 * lo, "{lo} {hi}");
        assert!(!a.non_monotone);
    }

    #[test]
    fn additive_steps_like_the_thesis() {
        let cfg = SearchConfig {
            start: 2.0,
            step: Step::Add(2.0),
            precision: 0.2,
            ..Default::default()
        };
        let (s, a) = search(cfg, 7.0);
        let rates: Vec<f64> = s.points.iter().map(|p| p.rate).collect();
        assert_eq!(rates, vec![2.0, 4.0, 6.0, 8.0, 7.0]);
        assert_eq!(a.capacity, Some(7.0));
        assert_eq!(a.lowest_failed, Some(8.0));
    }

    #[test]
    fn first_rate_failing_searches_down() {
        let cfg = SearchConfig {
            start: 10.0,
            precision: 0.1,
            ..Default::default()
        };
        let (s, a) = search(cfg, 1.5);
        assert_eq!(s.points[0].rate, 10.0);
        assert!(!s.points[0].passed);
        assert_eq!(s.points[1].rate, 5.0);
        assert_eq!(a.ending, Some(Ending::Converged));
        assert!(a.capacity.unwrap() <= 1.5 && a.lowest_failed.unwrap() > 1.5);
    }

    #[test]
    fn bounds_and_budget_end_the_search() {
        let cfg = SearchConfig {
            start: 1.0,
            max_rate: 5.0,
            ..Default::default()
        };
        let (s, a) = search(cfg, 100.0);
        assert_eq!(a.ending, Some(Ending::AboveMaxRate));
        assert_eq!(a.capacity, Some(5.0));
        assert_eq!(s.points.last().unwrap().rate, 5.0);

        let cfg = SearchConfig {
            start: 1.0,
            min_rate: 0.25,
            ..Default::default()
        };
        let (_, a) = search(cfg, 0.1);
        assert_eq!(a.ending, Some(Ending::BelowMinRate));
        assert_eq!(a.capacity, None);

        let cfg = SearchConfig {
            start: 1.0,
            precision: 0.001,
            max_points: 6,
            ..Default::default()
        };
        let (s, a) = search(cfg, 3.3);
        assert_eq!(s.points.len(), 6);
        assert_eq!(a.ending, Some(Ending::OutOfPoints));
    }

    #[test]
    fn repeats_and_early_failure() {
        let cfg = SearchConfig {
            start: 1.0,
            repeats: 3,
            precision: 0.3,
            ..Default::default()
        };
        let mut calls = Vec::new();
        let mut s = Search::new(cfg).unwrap();
        s.run(|r, k| {
            calls.push((r, k));
            // the second repetition at 4 fails: no third one is run
            let cap = if r == 4.0 && k == 1 { 3.0 } else { 5.0 };
            Ok::<_, ()>(outcome(r, cap))
        })
        .unwrap();
        assert_eq!(&calls[..3], &[(1.0, 0), (1.0, 1), (1.0, 2)]);
        let p4 = s.points.iter().find(|p| p.rate == 4.0).unwrap();
        assert_eq!(p4.runs.len(), 2);
        assert!(!p4.passed);
        let p1 = &s.points[0];
        let tp = p1.throughput().unwrap();
        assert_eq!(tp.n, 3);
        assert_eq!(tp.half_width, Some(0.0));
        assert_eq!(p1.failed_pct().unwrap().mean, 0.0);
    }

    #[test]
    fn measure_errors_keep_the_points() {
        let mut s = Search::new(SearchConfig::default()).unwrap();
        let r = s.run(|r, _| {
            if r > 3.0 {
                Err("server died")
            } else {
                Ok(outcome(r, 10.0))
            }
        });
        assert_eq!(r, Err("server died"));
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.answer().capacity, Some(2.0));
    }

    #[test]
    fn criteria() {
        let ok = Outcome {
            measured_sessions: 200,
            client_valid: true,
            ..Default::default()
        };
        let c = Criterion::parse("none").unwrap();
        assert!(c.judge(&ok).is_ok());
        let one = Outcome {
            failed_sessions: 1,
            ..ok.clone()
        };
        assert!(c.judge(&one).unwrap_err().contains("1 failed"));
        let cut = Outcome {
            unfinished_sessions: 1,
            ..ok.clone()
        };
        assert!(c.judge(&cut).is_err());
        assert!(c.judge(&Outcome::default()).is_err());

        let c = Criterion::parse("failed:1").unwrap();
        assert!(c
            .judge(&Outcome {
                failed_sessions: 2,
                ..ok.clone()
            })
            .is_ok());
        assert!(c
            .judge(&Outcome {
                failed_sessions: 3,
                ..ok.clone()
            })
            .is_err());

        let c = Criterion::parse("qoe:5:2.5").unwrap();
        assert_eq!(
            c,
            Criterion::Qoe {
                stalled_pct: 5.0,
                p95_startup_s: 2.5
            }
        );
        assert!(c
            .judge(&Outcome {
                stalled_sessions: 10,
                p95_startup_s: 2.0,
                ..ok.clone()
            })
            .is_ok());
        assert!(c
            .judge(&Outcome {
                stalled_sessions: 11,
                ..ok.clone()
            })
            .is_err());
        assert!(c
            .judge(&Outcome {
                p95_startup_s: 2.6,
                ..ok.clone()
            })
            .unwrap_err()
            .contains("p95"));

        for bad in [
            "",
            "failed",
            "failed:x",
            "failed:101",
            "qoe:1",
            "qoe:-1:2",
            "maybe",
        ] {
            assert!(Criterion::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn invalid_settings() {
        for cfg in [
            SearchConfig {
                start: 0.0,
                ..Default::default()
            },
            SearchConfig {
                step: Step::Mul(1.0),
                ..Default::default()
            },
            SearchConfig {
                step: Step::Add(0.0),
                ..Default::default()
            },
            SearchConfig {
                precision: 0.0,
                ..Default::default()
            },
            SearchConfig {
                repeats: 0,
                ..Default::default()
            },
            SearchConfig {
                start: 20_000.0,
                ..Default::default()
            },
        ] {
            assert!(Search::new(cfg).is_err());
        }
    }

    proptest! {
        /// For any monotone server the answer brackets its capacity within
        /// the precision, with a bounded number of points.
        #[test]
        fn brackets_any_capacity(cap in 0.02f64..5000.0, start in 0.05f64..100.0, mul in 1.2f64..4.0, prec in 0.01f64..0.5) {
            let cfg = SearchConfig { start, step: Step::Mul(mul), precision: prec, max_points: 200, ..Default::default() };
            let (s, a) = search(cfg, cap);
            prop_assert_eq!(a.ending, Some(Ending::Converged));
            let (lo, hi) = (a.capacity.unwrap(), a.lowest_failed.unwrap());
            prop_assert!(lo <= cap && cap < hi);
            prop_assert!(hi - lo <= prec * lo + 1e-9);
            prop_assert!(s.points.len() < 60);
        }
    }
}
