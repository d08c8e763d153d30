//! The one table of prefetch policies (`vodlab serve --prefetch-policy`,
//! `vodlab simulate --policy`, lab's `vodlab-asap:POLICY` rows): their text
//! form (parse and display), their checks, and the controller each builds.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::chainpf::REFERENCE_BPS;
use crate::controller::{Fixed, PrefetchController};
use crate::defaults;

/// [`REFERENCE_BPS`] in kbit/s, as the policies' `ref=` writes it.
const REFERENCE_KBPS: f64 = REFERENCE_BPS as f64 / 1000.0;

/// A policy's `ref=KBPS` option: the bit rate its sizes are scaled around.
fn parse_ref(v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .map_err(|_| format!("ref: `{v}` is not a number"))
}

/// A size in bytes, in vodlab's one grammar ([`vodlab_units::parse_size`]:
/// `4096`, `256k`, `4M` = 4 MiB, `1.5G`, `4MB` = 4×10^6); the error names
/// the input and shows the grammar.
pub fn parse_size(s: &str) -> Result<u64, String> {
    vodlab_units::parse_size(s).map_err(|e| e.to_string())
}

/// A policy could not be read, or does not fit a setting.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("prefetch policy `{given}`: {why}")]
pub struct PolicyError {
    /// The text given.
    pub given: String,
    /// What is wrong with it.
    pub why: String,
}

/// The policy kinds, as the grammar names them, with what each does (the
/// `--help` of serve and simulate lists these).
pub const KINDS: [(&str, &str); 6] = [
    ("fixed:SIZE", "SIZE bytes from the request's offset on a miss, never less than the request"),
    ("proportional:SIZE", "SIZE at 2,000 kbit/s, proportional to the bit rate (Gill & Bathen); ref=KBPS moves the reference"),
    ("sqrt:SIZE", "SIZE at 2,000 kbit/s, scaled by the square root of the bit rate (thesis 4.4); ref=KBPS moves the reference"),
    ("auto[:KEY=VALUE,...]", "the automatic size of thesis chapter 4 (start, interval, step, deflation, busy, evict, evict_of, ramp, min, max, ref, exp)"),
    ("first-grow:MAX[,idle=SECS]", "per chain a first size from Table 5.6, then 3.35 x the chain so far, up to MAX (thesis 5.6.1); a chain idle 40 s (idle=) is forgotten"),
    ("first-grow-sr:MAX[,idle=SECS,ref=KBPS]", "First-Grow with MAX scaled by the square root of the bit rate over 2,000 kbit/s (ref=)"),
];

/// Which prefetch controller runs (`--prefetch-policy`, `--policy`):
/// - `fixed:SIZE` with SIZE in bytes or with a K, M or G suffix (powers of
///   1024, decimals allowed: `fixed:1.5M`);
/// - `fixed:SIZE,ref=KBPS[,exp=E]`: square-root sizes, SIZE for the bit rate
///   KBPS and SIZE·(b/KBPS)^E (E = 0.5) for a response of bit rate b;
/// - `fixed:SIZE,ref=KBPS,scale=F[,low=LOW]`: F × SIZE at the bit rate LOW
///   (default KBPS/5), log-linear in between
///   ([`crate::auto::Scaling::from_scale`]; shown as its `exp`);
/// - `auto[:key=value,...]`: the automatic size of thesis chapter 4
///   (keys in [`crate::auto::AutoConfig`]: `start`, `interval`, `step`,
///   `deflation`, `busy`, `evict`, `evict_of`, `ramp`, `min`, `max`, and
///   `ref`/`exp` to size the reference rate with the others following);
/// - `proportional:SIZE[,ref=KBPS]` and `sqrt:SIZE[,ref=KBPS]`: chapter 5's
///   names for `fixed:SIZE,ref=KBPS,exp=1` and `exp=0.5`, KBPS 2,000 unless
///   given (shown as the `fixed` form);
/// - `first-grow:MAX[,idle=SECS,ref=KBPS]` and `first-grow-sr:MAX[,...]`
///   (chapter 5; the chain window, 40 s, and First-Grow-SR's reference
///   rate, 2,000 kbit/s, are shown only when changed, as time compression
///   does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PolicySpec {
    /// [`crate::controller::Fixed`]: this many bytes from the request's
    /// offset, never less than the request.
    Fixed(u64),
    /// [`crate::auto::Scaled`]: a fixed size for the reference bit rate,
    /// scaled for the others.
    Scaled(u64, crate::auto::Scaling),
    /// [`crate::auto::Auto`]: the thesis's gradient descent.
    Auto(crate::auto::AutoConfig),
    /// [`crate::chainpf::FirstGrow`]: per chain, Table 5.6's first size,
    /// then 3.35 × the chain so far, up to `max` (thesis 5.6.1); with
    /// `square_root`, the maximum scales with √(b / 2,000 kbit/s)
    /// (First-Grow-SR).
    FirstGrow {
        /// Largest prefetch, bytes (at `reference_kbps` for First-Grow-SR).
        max: u64,
        /// First-Grow-SR.
        square_root: bool,
        /// A chain idle this long is forgotten (`idle=SECS`; 40 s, the
        /// thesis's chain window, divided by k under time compression).
        idle: Duration,
        /// The bit rate at which First-Grow-SR's maximum is `max`, kbit/s
        /// (`ref=KBPS`; 2,000, multiplied by k under time compression).
        reference_kbps: f64,
    },
}

impl PolicySpec {
    /// `first-grow:MAX` (`square_root` false) or `first-grow-sr:MAX` with
    /// the thesis's chain window and reference rate.
    pub fn first_grow(max: u64, square_root: bool) -> Self {
        PolicySpec::FirstGrow {
            max,
            square_root,
            idle: crate::chainpf::FIRST_GROW_IDLE,
            reference_kbps: REFERENCE_KBPS,
        }
    }

    /// The fixed size, when the policy has one (the statistics'
    /// `prefetch_bytes`).
    pub fn fixed_bytes(&self) -> Option<u64> {
        match self {
            PolicySpec::Fixed(n) | PolicySpec::Scaled(n, _) => Some(*n),
            PolicySpec::Auto(_) | PolicySpec::FirstGrow { .. } => None,
        }
    }

    /// Checks the policy's parameters.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            PolicySpec::Fixed(0) | PolicySpec::Scaled(0, _) => Err("fixed size must be > 0".into()),
            PolicySpec::Fixed(_) => Ok(()),
            PolicySpec::Scaled(_, s) => s.validate(),
            PolicySpec::Auto(a) => a.validate(),
            PolicySpec::FirstGrow { max: 0, .. } => Err("first-grow's maximum must be > 0".into()),
            PolicySpec::FirstGrow { idle, .. } if idle.is_zero() => {
                Err("first-grow's idle (chain window) must be > 0".into())
            }
            PolicySpec::FirstGrow { reference_kbps, .. }
                if !(reference_kbps.is_finite() && *reference_kbps > 0.0) =>
            {
                Err("first-grow's ref must be a bit rate > 0 (kbit/s)".into())
            }
            PolicySpec::FirstGrow { .. } => Ok(()),
        }
    }
}

impl PolicySpec {
    /// A fresh controller for this policy.
    pub fn build(&self) -> Box<dyn PrefetchController> {
        match *self {
            PolicySpec::Fixed(n) => Box::new(Fixed(n)),
            PolicySpec::Scaled(size, scaling) => Box::new(crate::auto::Scaled { size, scaling }),
            PolicySpec::Auto(cfg) => Box::new(crate::auto::Auto::new(cfg)),
            PolicySpec::FirstGrow {
                max,
                square_root,
                idle,
                reference_kbps,
            } => {
                let mut c = crate::chainpf::FirstGrow::new(max, square_root);
                c.idle = idle;
                c.reference_bps = (reference_kbps * 1000.0).round() as u64;
                Box::new(c)
            }
        }
    }

    /// The policy for a server that runs its clock `k` times faster than
    /// the content's (`time_compression`): bit rates ×k, the automatic
    /// size's intervals ÷k, First-Grow's chain window ÷k and its reference
    /// rate ×k (so First-Grow-SR's maximum for a compressed bit rate is the
    /// nominal one's). Sizes are never scaled.
    pub fn time_compressed(self, k: f64) -> Result<Self, PolicyError> {
        let div = |d: Duration| Duration::from_secs_f64(d.as_secs_f64() / k);
        Ok(match self {
            PolicySpec::Fixed(n) => PolicySpec::Fixed(n),
            PolicySpec::Scaled(n, mut s) => {
                s.reference_kbps *= k;
                PolicySpec::Scaled(n, s)
            }
            PolicySpec::Auto(mut a) => {
                a.interval = div(a.interval);
                a.ramp = div(a.ramp);
                if let Some(s) = &mut a.scaling {
                    s.reference_kbps *= k;
                }
                PolicySpec::Auto(a)
            }
            PolicySpec::FirstGrow {
                max,
                square_root,
                idle,
                reference_kbps,
            } => PolicySpec::FirstGrow {
                max,
                square_root,
                idle: div(idle),
                reference_kbps: reference_kbps * k,
            },
        })
    }
}

impl Default for PolicySpec {
    fn default() -> Self {
        PolicySpec::Fixed(defaults::PREFETCH_BYTES)
    }
}

/// A size as the policy syntax writes it (the largest exact binary unit,
/// which [`parse_size`] reads back).
fn fmt_size(n: u64) -> String {
    vodlab_units::format_size(n)
}

fn fmt_scaling(f: &mut fmt::Formatter<'_>, s: &crate::auto::Scaling) -> fmt::Result {
    write!(f, "ref={}", s.reference_kbps)?;
    if s.exponent != defaults::SCALING_EXPONENT {
        write!(f, ",exp={}", s.exponent)?;
    }
    Ok(())
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySpec::Fixed(n) => write!(f, "fixed:{}", fmt_size(*n)),
            PolicySpec::Scaled(n, s) => {
                write!(f, "fixed:{},", fmt_size(*n))?;
                fmt_scaling(f, s)
            }
            PolicySpec::FirstGrow {
                max,
                square_root,
                idle,
                reference_kbps,
            } => {
                let sr = if *square_root { "-sr" } else { "" };
                write!(f, "first-grow{sr}:{}", fmt_size(*max))?;
                if *idle != crate::chainpf::FIRST_GROW_IDLE {
                    write!(f, ",idle={}", idle.as_secs_f64())?;
                }
                if *reference_kbps != REFERENCE_KBPS {
                    write!(f, ",ref={reference_kbps}")?;
                }
                Ok(())
            }
            PolicySpec::Auto(a) => {
                let d = crate::auto::AutoConfig::default();
                let mut parts = Vec::new();
                if a.start != d.start {
                    parts.push(format!("start={}", fmt_size(a.start)));
                }
                if a.interval != d.interval {
                    parts.push(format!("interval={}", a.interval.as_secs_f64()));
                }
                if a.step != d.step {
                    parts.push(format!("step={}", fmt_size(a.step)));
                }
                if a.deflation != d.deflation {
                    parts.push(format!("deflation={}", a.deflation));
                }
                if a.busy != d.busy {
                    parts.push(format!("busy={}", a.busy));
                }
                if a.evict != d.evict {
                    parts.push(format!("evict={}", a.evict));
                }
                if a.evict_of != d.evict_of {
                    parts.push("evict_of=prefetched".to_string());
                }
                if a.ramp != d.ramp {
                    parts.push(format!("ramp={}", a.ramp.as_secs_f64()));
                }
                if a.min != d.min {
                    parts.push(format!("min={}", fmt_size(a.min)));
                }
                if a.max != d.max {
                    parts.push(format!("max={}", fmt_size(a.max)));
                }
                f.write_str("auto")?;
                let mut sep = ":";
                for p in &parts {
                    write!(f, "{sep}{p}")?;
                    sep = ",";
                }
                if let Some(s) = &a.scaling {
                    f.write_str(sep)?;
                    fmt_scaling(f, s)?;
                }
                Ok(())
            }
        }
    }
}

/// Reads `key=value` options of a policy into an [`crate::auto::AutoConfig`]
/// (all keys) or only the scaling keys (`scaling_only`).
fn policy_options(
    opts: &[&str],
    auto: &mut crate::auto::AutoConfig,
    scaling_only: bool,
) -> Result<(), String> {
    let mut reference = None;
    let mut exponent = defaults::SCALING_EXPONENT;
    let (mut scale, mut low) = (None, None);
    for o in opts {
        let (k, v) = o
            .split_once('=')
            .ok_or_else(|| format!("`{o}`: expected key=value"))?;
        let (k, v) = (k.trim(), v.trim());
        let num = || -> Result<f64, String> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{k}: `{v}` is not a number"))
        };
        let secs = || -> Result<Duration, String> {
            vodlab_units::parse_duration(v).map_err(|e| format!("{k}: {e}"))
        };
        let size = || parse_size(v).map_err(|e| format!("{k}: {e}"));
        match k {
            "ref" => reference = Some(num()?),
            "exp" => exponent = num()?,
            "scale" => scale = Some(num()?),
            "low" => low = Some(num()?),
            _ if scaling_only => {
                return Err(format!(
                    "unknown key `{k}` (fixed takes ref, exp, scale and low)"
                ))
            }
            "start" => {
                auto.start = match crate::auto::start_preset(v) {
                    Some(n) => n,
                    None => size()?,
                }
            }
            "interval" => auto.interval = secs()?,
            "step" => auto.step = size()?,
            "deflation" => auto.deflation = num()?,
            "busy" => auto.busy = num()?,
            "evict" => auto.evict = num()?,
            "evict_of" => {
                auto.evict_of = match v {
                    "requested" => crate::auto::EvictBase::Requested,
                    "prefetched" => crate::auto::EvictBase::Prefetched,
                    _ => return Err(format!("evict_of: `{v}` (requested or prefetched)")),
                }
            }
            "ramp" => auto.ramp = secs()?,
            "min" => auto.min = size()?,
            "max" => auto.max = size()?,
            _ => return Err(format!("unknown key `{k}`")),
        }
    }
    if scale.is_none() && low.is_some() {
        return Err("low: needs scale=F".into());
    }
    match reference {
        Some(_) if scale.is_some() && exponent != defaults::SCALING_EXPONENT => {
            return Err("scale: give scale or exp, not both".into())
        }
        Some(reference_kbps) if scale.is_some() => {
            let factor = scale.unwrap_or_default();
            auto.scaling = Some(crate::auto::Scaling::from_scale(
                reference_kbps,
                factor,
                low,
            )?)
        }
        None if scale.is_some() => return Err("scale: needs ref=KBPS".into()),
        Some(reference_kbps) => {
            auto.scaling = Some(crate::auto::Scaling {
                reference_kbps,
                exponent,
            })
        }
        None if exponent != defaults::SCALING_EXPONENT => return Err("exp: needs ref=KBPS".into()),
        None => {}
    }
    Ok(())
}

impl FromStr for PolicySpec {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, PolicyError> {
        let bad = |why: String| PolicyError {
            given: s.to_string(),
            why,
        };
        let (name, arg) = s.trim().split_once(':').unwrap_or((s.trim(), ""));
        let mut opts: Vec<&str> = arg.split(',').filter(|o| !o.trim().is_empty()).collect();
        let spec = match name {
            "fixed" => {
                if opts.is_empty() || opts[0].contains('=') {
                    return Err(bad("`fixed` needs a size (e.g. fixed:4M)".into()));
                }
                let n = parse_size(opts.remove(0)).map_err(bad)?;
                let mut a = crate::auto::AutoConfig::default();
                policy_options(&opts, &mut a, true).map_err(bad)?;
                match a.scaling {
                    Some(sc) => PolicySpec::Scaled(n, sc),
                    None => PolicySpec::Fixed(n),
                }
            }
            "proportional" | "sqrt" => {
                if opts.is_empty() || opts[0].contains('=') {
                    return Err(bad(format!("`{name}` needs a size (e.g. {name}:4M)")));
                }
                let n = parse_size(opts.remove(0)).map_err(bad)?;
                let exponent = if name == "sqrt" { 0.5 } else { 1.0 };
                let mut reference_kbps = REFERENCE_KBPS;
                for o in &opts {
                    match o.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                        Some(("ref", v)) => reference_kbps = parse_ref(v).map_err(bad)?,
                        _ => {
                            return Err(bad(format!(
                                "`{o}`: {name} takes only ref=KBPS (its exponent is {exponent})"
                            )))
                        }
                    }
                }
                PolicySpec::Scaled(
                    n,
                    crate::auto::Scaling {
                        reference_kbps,
                        exponent,
                    },
                )
            }
            "auto" => {
                let mut a = crate::auto::AutoConfig::default();
                policy_options(&opts, &mut a, false).map_err(bad)?;
                PolicySpec::Auto(a)
            }
            "first-grow" | "first-grow-sr" => {
                if opts.is_empty() || opts[0].contains('=') {
                    return Err(bad(format!(
                        "`{name}` takes its maximum, then idle=SECS and ref=KBPS if wanted (e.g. {name}:16M)"
                    )));
                }
                let max = parse_size(opts.remove(0)).map_err(bad)?;
                let (mut idle, mut reference_kbps) =
                    (crate::chainpf::FIRST_GROW_IDLE, REFERENCE_KBPS);
                for o in &opts {
                    match o.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                        Some(("idle", v)) => {
                            idle = vodlab_units::parse_duration(v)
                                .map_err(|e| bad(format!("idle: {e}")))?
                        }
                        Some(("ref", v)) => reference_kbps = parse_ref(v).map_err(bad)?,
                        _ => {
                            return Err(bad(format!(
                                "`{o}`: {name} takes idle=SECS and ref=KBPS after its maximum"
                            )))
                        }
                    }
                }
                PolicySpec::FirstGrow {
                    max,
                    square_root: name == "first-grow-sr",
                    idle,
                    reference_kbps,
                }
            }
            _ => {
                return Err(bad(format!(
                    "unknown policy `{name}` (known: fixed:SIZE, e.g. fixed:4M; fixed:SIZE,ref=KBPS; proportional:SIZE; sqrt:SIZE; auto; first-grow:MAX; first-grow-sr:MAX)"
                )))
            }
        };
        spec.validate().map_err(bad)?;
        Ok(spec)
    }
}

impl Serialize for PolicySpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PolicySpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
