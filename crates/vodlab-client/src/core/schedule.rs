//! Session arrival schedules: pure iterators of start offsets, separate from
//! execution (the engine only sleeps until each offset).

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};

/// How sessions arrive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrivals {
    /// Poisson process: exponential gaps with mean `1 / rate`.
    Poisson {
        /// Sessions per second.
        rate: f64,
    },
    /// Evenly spaced, `1 / rate` apart.
    Constant {
        /// Sessions per second.
        rate: f64,
    },
    /// Poisson at a rate that changes in steps: each `(seconds, rate)` step
    /// lasts that long; the last step lasts until the sessions run out.
    Steps {
        /// `(duration in seconds, sessions per second)` steps.
        steps: Vec<(f64, f64)>,
    },
    /// Poisson at a rate rising (or falling) linearly from `from` to `to` over
    /// `over_s` seconds, then staying at `to`.
    Ramp {
        /// Starting rate.
        from: f64,
        /// Final rate.
        to: f64,
        /// Seconds of the ramp.
        over_s: f64,
    },
}

impl Arrivals {
    /// Checks rates and durations.
    pub fn validate(&self) -> Result<(), String> {
        let ok = |r: f64| r.is_finite() && r > 0.0;
        match self {
            Arrivals::Poisson { rate } | Arrivals::Constant { rate } if !ok(*rate) => {
                Err(format!("rate must be > 0 sessions/s, got {rate}"))
            }
            Arrivals::Steps { steps } if steps.is_empty() => Err("no steps".into()),
            Arrivals::Steps { steps } => {
                for (i, (d, r)) in steps.iter().enumerate() {
                    if !(d.is_finite() && *d > 0.0 && ok(*r)) {
                        return Err(format!(
                            "step {}: duration and rate must be > 0, got {d} s at {r}/s",
                            i + 1
                        ));
                    }
                }
                Ok(())
            }
            Arrivals::Ramp { from, to, over_s } => {
                if !(ok(*from) && ok(*to) && over_s.is_finite() && *over_s > 0.0) {
                    Err(format!("ramp needs rates > 0 and a duration > 0, got {from}/s to {to}/s over {over_s} s"))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    /// Rate in effect `t` after the run's start (sessions per second).
    pub fn rate_at(&self, t: Duration) -> f64 {
        self.rate_at_s(t.as_secs_f64())
    }

    /// [`Self::rate_at`] on f64 seconds: the schedule sums its gaps as f64
    /// seconds (rates and the `steps`/`over_s` settings are f64 figures of
    /// the configuration) and turns the sum into a [`Duration`] only when it
    /// hands out an offset, so thinning compares on that same sum.
    fn rate_at_s(&self, t: f64) -> f64 {
        match self {
            Arrivals::Poisson { rate } | Arrivals::Constant { rate } => *rate,
            Arrivals::Steps { steps } => {
                let mut end = 0.0;
                for (d, r) in steps {
                    end += d;
                    if t < end {
                        return *r;
                    }
                }
                steps.last().map_or(1.0, |s| s.1)
            }
            Arrivals::Ramp { from, to, over_s } => {
                if t >= *over_s {
                    *to
                } else {
                    from + (to - from) * t / over_s
                }
            }
        }
    }

    /// The highest rate anywhere in the schedule (for thinning).
    fn max_rate(&self) -> f64 {
        match self {
            Arrivals::Poisson { rate } | Arrivals::Constant { rate } => *rate,
            Arrivals::Steps { steps } => steps.iter().map(|s| s.1).fold(0.0, f64::max),
            Arrivals::Ramp { from, to, .. } => from.max(*to),
        }
    }

    /// An iterator of start offsets for this schedule and seed.
    pub fn offsets(&self, seed: u64) -> Schedule {
        Schedule {
            arrivals: self.clone(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            t: 0.0,
            first: true,
        }
    }
}

/// Start offsets from the beginning of the run, non-decreasing; infinite.
#[derive(Debug, Clone)]
pub struct Schedule {
    arrivals: Arrivals,
    rng: ChaCha8Rng,
    t: f64,
    first: bool,
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.first {
            // the first session starts at once, as httperf's does
            self.first = false;
            return Some(Duration::ZERO);
        }
        match &self.arrivals {
            Arrivals::Constant { rate } => self.t += 1.0 / rate,
            Arrivals::Poisson { rate } => {
                self.t += Exp::new(*rate).expect("validated").sample(&mut self.rng)
            }
            other => {
                // non-homogeneous Poisson by thinning (Lewis & Shedler)
                let max = other.max_rate();
                let exp = Exp::new(max).expect("validated");
                loop {
                    self.t += exp.sample(&mut self.rng);
                    let u: f64 = rand::Rng::random(&mut self.rng);
                    if u * max <= other.rate_at_s(self.t) {
                        break;
                    }
                }
            }
        }
        Some(Duration::from_secs_f64(self.t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(a: &Arrivals, n: usize, seed: u64) -> Vec<f64> {
        let v: Vec<f64> = a
            .offsets(seed)
            .take(n + 1)
            .map(|d| d.as_secs_f64())
            .collect();
        v.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn poisson_gaps_have_the_right_mean_and_variance() {
        let rate = 20.0;
        for seed in [1, 2, 3] {
            let g = gaps(&Arrivals::Poisson { rate }, 100_000, seed);
            let n = g.len() as f64;
            let mean = g.iter().sum::<f64>() / n;
            let var = g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            // exponential: mean 1/rate, variance 1/rate^2
            assert!((mean * rate - 1.0).abs() < 0.01, "mean {mean}");
            assert!((var * rate * rate - 1.0).abs() < 0.03, "variance {var}");
            // and counts per second are Poisson: index of dispersion ~ 1
            let offs: Vec<f64> = Arrivals::Poisson { rate }
                .offsets(seed)
                .take(100_000)
                .map(|d| d.as_secs_f64())
                .collect();
            let secs = offs.last().unwrap().floor() as usize;
            let mut counts = vec![0f64; secs];
            for o in offs {
                if (o as usize) < secs {
                    counts[o as usize] += 1.0;
                }
            }
            let m = counts.iter().sum::<f64>() / secs as f64;
            let v = counts.iter().map(|c| (c - m).powi(2)).sum::<f64>() / (secs as f64 - 1.0);
            assert!((v / m - 1.0).abs() < 0.1, "dispersion {}", v / m);
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let a = Arrivals::Poisson { rate: 5.0 };
        let x: Vec<_> = a.offsets(9).take(50).collect();
        let y: Vec<_> = a.offsets(9).take(50).collect();
        assert_eq!(x, y);
        assert_ne!(x, a.offsets(10).take(50).collect::<Vec<_>>());
    }

    #[test]
    fn constant_is_evenly_spaced() {
        let g = gaps(&Arrivals::Constant { rate: 4.0 }, 10, 0);
        assert!(g.iter().all(|x| (x - 0.25).abs() < 1e-9));
    }

    #[test]
    fn steps_change_the_rate() {
        let a = Arrivals::Steps {
            steps: vec![(100.0, 2.0), (100.0, 20.0)],
        };
        let offs: Vec<f64> = a.offsets(1).take(3000).map(|d| d.as_secs_f64()).collect();
        let first = offs.iter().filter(|&&t| t < 100.0).count() as f64;
        let second = offs
            .iter()
            .filter(|&&t| (100.0..200.0).contains(&t))
            .count() as f64;
        assert!((first / 200.0 - 1.0).abs() < 0.2, "{first}");
        assert!((second / 2000.0 - 1.0).abs() < 0.1, "{second}");
        assert!(a.validate().is_ok());
        assert!(Arrivals::Poisson { rate: 0.0 }.validate().is_err());
    }

    #[test]
    fn ramp_rises_linearly() {
        let a = Arrivals::Ramp {
            from: 1.0,
            to: 21.0,
            over_s: 100.0,
        };
        assert_eq!(a.rate_at(Duration::from_secs(50)), 11.0);
        let offs: Vec<f64> = a.offsets(2).take(5000).map(|d| d.as_secs_f64()).collect();
        let n = offs.iter().filter(|&&t| t < 100.0).count() as f64;
        // integral of the rate over the ramp: 100 * (1 + 21) / 2 = 1100
        assert!((n / 1100.0 - 1.0).abs() < 0.1, "{n}");
    }
}
