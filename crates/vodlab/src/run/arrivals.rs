//! `vodlab run`'s arrival flags: `--rate`, `--steps`, `--ramp-rate` and their
//! bounds, and the workload time compression applied to a schedule.

use anyhow::{bail, Context};
use vodlab_client::Arrivals;

use super::{ArrivalKind, RunArgs};

fn split_nums(s: &str, what: &str) -> anyhow::Result<Vec<f64>> {
    s.split(':')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .with_context(|| format!("{what}: `{x}` is not a number"))
        })
        .collect()
}

/// Longest `--duration` and step or ramp length, seconds (a week).
pub(crate) const MAX_RUN_S: f64 = 7.0 * 86_400.0;
/// Lowest and highest arrival rate, sessions per second.
pub(crate) const RATE_BOUNDS: (f64, f64) = (0.001, 1_000_000.0);
/// Bounds of `--interval`, seconds.
pub(crate) const INTERVAL_BOUNDS: (f64, f64) = (0.1, 3_600.0);
/// Highest `--late-threshold-ms`.
pub(crate) const MAX_LATE_THRESHOLD_MS: f64 = 60_000.0;
/// Highest `--ramp-up` / `--ramp-down`.
pub(crate) const MAX_RAMP: usize = 1_000_000_000;

/// `v` when it is a number in `lo..=hi`, else an error naming `what`.
pub(super) fn within(what: &str, v: f64, lo: f64, hi: f64) -> anyhow::Result<f64> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        bail!("{what} must be a number from {lo} to {hi}, got {v}")
    }
}

/// Checks every rate and length of an arrival process against the bounds
/// ([`RATE_BOUNDS`], [`MAX_RUN_S`]), so no schedule time overflows.
fn check_arrival_bounds(arr: &Arrivals) -> anyhow::Result<()> {
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

pub(super) fn arrivals(a: &RunArgs) -> anyhow::Result<Arrivals> {
    let arr = if let Some(steps) = &a.steps {
        let steps = steps
            .split(',')
            .map(|st| match split_nums(st, "--steps")?.as_slice() {
                [d, r] => Ok((*d, *r)),
                _ => bail!("--steps: `{st}` is not SECONDS:RATE"),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Arrivals::Steps { steps }
    } else if let Some(r) = &a.ramp_rate {
        match split_nums(r, "--ramp-rate")?.as_slice() {
            [from, to, over_s] => Arrivals::Ramp {
                from: *from,
                to: *to,
                over_s: *over_s,
            },
            _ => bail!("--ramp-rate: `{r}` is not FROM:TO:SECONDS"),
        }
    } else {
        let rate = a.rate.expect("clap requires --rate");
        match a.arrivals {
            ArrivalKind::Poisson => Arrivals::Poisson { rate },
            ArrivalKind::Constant => Arrivals::Constant { rate },
        }
    };
    arr.validate()
        .map_err(|e| anyhow::anyhow!("arrivals: {e}"))?;
    check_arrival_bounds(&arr)?;
    Ok(arr)
}

/// The environment variable `vodlab box --time-compression K` sets for its
/// command, the default of `run` and `serve`'s `--time-compression`.
pub(crate) const TIME_COMPRESSION_ENV: &str = "VODLAB_TIME_COMPRESSION";

/// `--time-compression`: the flag, else [`TIME_COMPRESSION_ENV`], else 1;
/// checked (an error names the flag or the variable).
pub(crate) fn time_compression(
    flag: Option<f64>,
) -> anyhow::Result<vodlab_workload::TimeCompression> {
    let k = match flag {
        Some(k) => k,
        None => match std::env::var(TIME_COMPRESSION_ENV) {
            Ok(v) => v.trim().parse::<f64>().with_context(|| {
                format!("{TIME_COMPRESSION_ENV}=`{v}` is not a number (the default of --time-compression)")
            })?,
            Err(_) => 1.0,
        },
    };
    Ok(vodlab_workload::TimeCompression::new(k)?)
}

/// An arrival process `tc` times faster: rates x k, step and ramp lengths / k.
pub(crate) fn compress_arrivals(arr: Arrivals, tc: vodlab_workload::TimeCompression) -> Arrivals {
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

pub(crate) use vodlab_units::{millis_arg, seconds_arg};
