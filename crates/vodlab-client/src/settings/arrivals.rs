//! `vodlab run`'s arrival flags: `--rate`, `--steps`, `--ramp-rate` and their
//! bounds, and the workload time compression applied to a schedule.

use vodlab_workload::TimeCompression;

use super::{flag, within, ArrivalKind, RunSettings, SettingsError};
use crate::Arrivals;

fn split_nums(s: &str, what: &str) -> Result<Vec<f64>, SettingsError> {
    s.split(':')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .map_err(|source| SettingsError::NotANumber {
                    what: what.into(),
                    value: x.into(),
                    source,
                })
        })
        .collect()
}

/// Longest `--duration` and step or ramp length, seconds (a week).
pub const MAX_RUN_S: f64 = 7.0 * 86_400.0;
/// Lowest and highest arrival rate, sessions per second.
pub const RATE_BOUNDS: (f64, f64) = (0.001, 1_000_000.0);
/// Bounds of `--interval`, seconds.
pub const INTERVAL_BOUNDS: (f64, f64) = (0.1, 3_600.0);
/// Highest `--late-threshold-ms`.
pub const MAX_LATE_THRESHOLD_MS: f64 = 60_000.0;
/// Highest `--ramp-up` / `--ramp-down`.
pub const MAX_RAMP: usize = 1_000_000_000;

/// Checks every rate and length of an arrival process against the bounds
/// ([`RATE_BOUNDS`], [`MAX_RUN_S`]), so no schedule time overflows.
fn check_arrival_bounds(arr: &Arrivals) -> Result<(), SettingsError> {
    let (lo, hi) = RATE_BOUNDS;
    match arr {
        Arrivals::Poisson { rate } | Arrivals::Constant { rate } => {
            within("--rate", *rate, lo, hi)?;
        }
        Arrivals::Steps { steps } => {
            for (i, (d, r)) in steps.iter().enumerate() {
                within(
                    &format!("--steps: step {} seconds", i + 1),
                    *d,
                    0.001,
                    MAX_RUN_S,
                )?;
                within(&format!("--steps: step {} rate", i + 1), *r, lo, hi)?;
            }
        }
        Arrivals::Ramp { from, to, over_s } => {
            within("--ramp-rate FROM", *from, lo, hi)?;
            within("--ramp-rate TO", *to, lo, hi)?;
            within("--ramp-rate SECONDS", *over_s, 0.001, MAX_RUN_S)?;
        }
    }
    Ok(())
}

pub(super) fn arrivals(a: &RunSettings) -> Result<Arrivals, SettingsError> {
    let arr = if let Some(steps) = &a.steps {
        let steps = steps
            .split(',')
            .map(|st| match split_nums(st, "--steps")?.as_slice() {
                [d, r] => Ok((*d, *r)),
                _ => Err(flag(format!("--steps: `{st}` is not SECONDS:RATE"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Arrivals::Steps { steps }
    } else if let Some(r) = &a.ramp_rate {
        match split_nums(r, "--ramp-rate")?.as_slice() {
            [from, to, over_s] => Arrivals::Ramp {
                from: *from,
                to: *to,
                over_s: *over_s,
            },
            _ => return Err(flag(format!("--ramp-rate: `{r}` is not FROM:TO:SECONDS"))),
        }
    } else {
        let rate = a.rate.expect("clap requires --rate");
        match a.arrivals {
            ArrivalKind::Poisson => Arrivals::Poisson { rate },
            ArrivalKind::Constant => Arrivals::Constant { rate },
        }
    };
    arr.validate().map_err(|e| flag(format!("arrivals: {e}")))?;
    check_arrival_bounds(&arr)?;
    Ok(arr)
}

/// An arrival process `tc` times faster: rates x k, step and ramp lengths / k.
pub fn compress_arrivals(arr: Arrivals, tc: TimeCompression) -> Arrivals {
    match arr {
        Arrivals::Poisson { rate } => Arrivals::Poisson {
            rate: tc.rate(rate),
        },
        Arrivals::Constant { rate } => Arrivals::Constant {
            rate: tc.rate(rate),
        },
        Arrivals::Steps { steps } => Arrivals::Steps {
            steps: steps
                .into_iter()
                .map(|(d, r)| (tc.seconds(d), tc.rate(r)))
                .collect(),
        },
        Arrivals::Ramp { from, to, over_s } => Arrivals::Ramp {
            from: tc.rate(from),
            to: tc.rate(to),
            over_s: tc.seconds(over_s),
        },
    }
}
