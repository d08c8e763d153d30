//! What multiple of its bit rate a paced response is sent at
//! (`--pace-policy`), from the server's K and what the client reported in
//! CMCD. Pure.
//!
//! - `fixed` (the default): K × the response's bit rate, K = `--pace`
//!   (the pacing paper's r_i; `fixed:K` sets K).
//! - `cmcd`: the client's requested maximum throughput `rtp` when it sends
//!   one (the rate, not only a cap), else K × the bit rate.
//! - `sammy`: Sammy's rule (Spang et al., SIGCOMM 2023; the demo's
//!   description in `servers-round2.md`): a multiple of the ladder's *top*
//!   bit rate (CMCD `tb`, else the response's `br`) that falls linearly
//!   with the client's buffer (CMCD `bl`) from `empty` (3.0) with an empty
//!   buffer to `full` (1.5) at `full_buffer` seconds (12, dash.js's
//!   default stable buffer time) and above. A client that sends no `bl`
//!   is treated as empty (the faster rate: never slower than a client
//!   that reported it). `sammy:EMPTY,FULL,SECONDS` sets the three.
//!
//! The result is the session's factor of its *content* bit rate (rate /
//! `br`), so the pacer's buffer estimate (content seconds sent) still
//! counts in the content's rate. An `rtp` still caps the rate under every
//! policy (the pacer's `max_rate`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How a paced response's rate is chosen (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "policy")]
pub enum PacePolicy {
    /// K × the bit rate.
    #[default]
    Fixed,
    /// CMCD `rtp` when sent, else K × the bit rate.
    Cmcd,
    /// Sammy's buffer-dependent multiple of the top bit rate.
    Sammy(SammyRule),
}

/// Sammy's rule's three numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SammyRule {
    /// The multiple of the top bit rate with an empty buffer.
    pub empty: f64,
    /// The multiple at `full_buffer` seconds of buffer and above.
    pub full: f64,
    /// Buffer (s) at which the multiple reaches `full`.
    pub full_buffer: f64,
}

impl Default for SammyRule {
    fn default() -> Self {
        Self {
            empty: 3.0,
            full: 1.5,
            full_buffer: 12.0,
        }
    }
}

/// What the policy reads of a response: its content bit rate and the
/// client's reports, bytes per second and seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reports {
    /// The response's content bit rate (B/s).
    pub bitrate: f64,
    /// CMCD `tb`, the ladder's top bit rate (B/s).
    pub top: Option<f64>,
    /// CMCD `bl`, the client's buffer (s).
    pub buffer: Option<f64>,
    /// CMCD `rtp`, the requested maximum throughput (B/s).
    pub requested: Option<f64>,
}

impl PacePolicy {
    /// The session's factor of its content bit rate, given the server's
    /// `k` (`--pace`).
    pub fn factor(&self, k: f64, r: &Reports) -> f64 {
        let br = r.bitrate.max(f64::MIN_POSITIVE);
        match self {
            Self::Fixed => k,
            Self::Cmcd => r.requested.filter(|v| *v > 0.0).map_or(k, |rtp| rtp / br),
            Self::Sammy(s) => {
                let fill = (r.buffer.unwrap_or(0.0) / s.full_buffer).clamp(0.0, 1.0);
                let m = s.empty + (s.full - s.empty) * fill;
                m * r.top.filter(|t| *t > 0.0).unwrap_or(br) / br
            }
        }
    }

    /// Checks the numbers of a Sammy rule.
    pub fn validate(&self) -> Result<(), &'static str> {
        if let Self::Sammy(s) = self {
            let ok = |v: f64| v.is_finite() && v > 0.0 && v <= 1000.0;
            if !(ok(s.empty) && ok(s.full) && ok(s.full_buffer)) {
                return Err("sammy's multiples and full buffer must be > 0 and at most 1000");
            }
        }
        Ok(())
    }
}

impl fmt::Display for PacePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed => write!(f, "fixed"),
            Self::Cmcd => write!(f, "cmcd"),
            Self::Sammy(s) => write!(f, "sammy:{},{},{}", s.empty, s.full, s.full_buffer),
        }
    }
}

/// `--pace-policy` as given: the policy, and the K of `fixed:K`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PolicyArg {
    /// The policy.
    pub policy: PacePolicy,
    /// `fixed:K`'s K (it sets `--pace`).
    pub k: Option<f64>,
}

impl FromStr for PolicyArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let num = |v: &str, what: &str| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| format!("--pace-policy {s}: {what} {v:?} is not a number > 0"))
        };
        let (name, rest) = s.split_once(':').unwrap_or((s, ""));
        let arg = match (name, rest) {
            ("fixed", "") => PolicyArg {
                policy: PacePolicy::Fixed,
                k: None,
            },
            ("fixed", k) => PolicyArg {
                policy: PacePolicy::Fixed,
                k: Some(num(k, "K")?),
            },
            ("cmcd", "") => PolicyArg {
                policy: PacePolicy::Cmcd,
                k: None,
            },
            ("sammy", "") => PolicyArg {
                policy: PacePolicy::Sammy(SammyRule::default()),
                k: None,
            },
            ("sammy", v) => {
                let p: Vec<&str> = v.split(',').collect();
                let [e, f, b] = p[..] else {
                    return Err(format!(
                        "--pace-policy {s}: give sammy:EMPTY,FULL,SECONDS, e.g. sammy:3,1.5,12"
                    ));
                };
                PolicyArg {
                    policy: PacePolicy::Sammy(SammyRule {
                        empty: num(e, "EMPTY")?,
                        full: num(f, "FULL")?,
                        full_buffer: num(b, "SECONDS")?,
                    }),
                    k: None,
                }
            }
            _ => {
                return Err(format!(
                "--pace-policy {s}: give fixed, fixed:K, cmcd, sammy or sammy:EMPTY,FULL,SECONDS"
            ))
            }
        };
        arg.policy
            .validate()
            .map_err(|e| format!("--pace-policy {s}: {e}"))?;
        Ok(arg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(bitrate: f64, top: Option<f64>, buffer: Option<f64>, requested: Option<f64>) -> Reports {
        Reports {
            bitrate,
            top,
            buffer,
            requested,
        }
    }

    #[test]
    fn sammy_falls_with_the_buffer_from_the_top_bit_rate() {
        let s = PacePolicy::Sammy(SammyRule::default());
        // empty: 3 x top; a rung at half the top rate gets 6 x its own rate
        assert_eq!(
            s.factor(1.0, &r(1000.0, Some(1000.0), Some(0.0), None)),
            3.0
        );
        assert_eq!(s.factor(1.0, &r(500.0, Some(1000.0), Some(0.0), None)), 6.0);
        // half full: 2.25; full and beyond: 1.5
        assert_eq!(
            s.factor(1.0, &r(1000.0, Some(1000.0), Some(6.0), None)),
            2.25
        );
        assert_eq!(
            s.factor(1.0, &r(1000.0, Some(1000.0), Some(12.0), None)),
            1.5
        );
        assert_eq!(
            s.factor(1.0, &r(1000.0, Some(1000.0), Some(60.0), None)),
            1.5
        );
        // no tb: the response's own rate is the top; no bl: empty
        assert_eq!(s.factor(1.0, &r(1000.0, None, None, None)), 3.0);
    }

    #[test]
    fn cmcd_paces_at_rtp_and_fixed_at_k() {
        assert_eq!(
            PacePolicy::Cmcd.factor(1.2, &r(1000.0, None, None, Some(2500.0))),
            2.5
        );
        assert_eq!(
            PacePolicy::Cmcd.factor(1.2, &r(1000.0, None, None, None)),
            1.2
        );
        assert_eq!(
            PacePolicy::Fixed.factor(1.2, &r(1000.0, Some(9e9), Some(0.0), Some(1.0))),
            1.2
        );
    }

    #[test]
    fn the_flag_parses_and_names_what_is_wrong() {
        let p = |s: &str| s.parse::<PolicyArg>();
        assert_eq!(p("fixed").unwrap().policy, PacePolicy::Fixed);
        assert_eq!(p("fixed:1.5").unwrap().k, Some(1.5));
        assert_eq!(p("cmcd").unwrap().policy, PacePolicy::Cmcd);
        assert_eq!(
            p("sammy").unwrap().policy,
            PacePolicy::Sammy(SammyRule::default())
        );
        let s = p("sammy:2.8,1.6,3.2").unwrap().policy;
        assert_eq!(
            s,
            PacePolicy::Sammy(SammyRule {
                empty: 2.8,
                full: 1.6,
                full_buffer: 3.2
            })
        );
        assert_eq!(s.to_string(), "sammy:2.8,1.6,3.2");
        assert!(p("fixed:0").unwrap_err().contains("K \"0\""));
        assert!(p("sammy:3,1.5").unwrap_err().contains("EMPTY,FULL,SECONDS"));
        assert!(p("sammy:3,x,12").unwrap_err().contains("FULL \"x\""));
        assert!(p("bbr").unwrap_err().contains("give fixed"));
    }
}
