//! When a burst of a session script is due: the pacing rule
//! ([`send_target`]) and what a late paced request does ([`LatePacing`]).
//! Pure; the session driver ([`crate::core::driver`]) applies it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use vodlab_workload::script::Wait;

use crate::core::time::Time;

/// What a paced request does when its slot has passed (the previous
/// response took longer than the pacing interval), named after tokio's
/// missed-tick behaviours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatePacing {
    /// The interval counts from when the previous burst was actually sent:
    /// a late send shifts every later one (httperf's and the thesis's rule;
    /// the default).
    #[default]
    Delay,
    /// The interval counts from when the previous burst was *due*: late
    /// sends catch up, back to back, until the schedule is met again.
    Burst,
    /// Sends stay on the original grid of slots: a late request goes at the
    /// first slot after the previous response completed (missed slots are
    /// skipped, never caught up).
    Skip,
}

impl std::str::FromStr for LatePacing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "delay" => Ok(Self::Delay),
            "burst" => Ok(Self::Burst),
            "skip" => Ok(Self::Skip),
            _ => Err(format!(
                "unknown late-pacing behaviour `{s}` (delay, burst or skip)"
            )),
        }
    }
}

/// When the previous burst was due, went and ended, for [`send_target`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Previous {
    /// Its slot on the pacing schedule, before waiting for earlier
    /// responses (`None` before the first burst).
    pub slot: Option<Time>,
    /// When it was actually sent.
    pub start: Option<Time>,
    /// When its last response completed (the session start before the first).
    pub done: Time,
}

/// When a burst is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// When it may be sent.
    pub at: Time,
    /// Its slot on the pacing schedule (what the next paced burst counts
    /// from under [`LatePacing::Burst`] and [`LatePacing::Skip`]).
    pub slot: Time,
    /// When the session's own schedule wanted it sent, before waiting for a
    /// late response and before skipping missed slots: what *latency from
    /// schedule* counts from (wrk2's rule, free of coordinated omission).
    /// Paced: the slot its wait gives (under [`LatePacing::Skip`] the first
    /// grid slot it missed, not the later one it went at); a think time:
    /// that long after the previous burst completed; no wait, or pacing
    /// off: the previous burst's completion.
    pub on_schedule: Time,
}

/// When the head of a burst may be sent: its wait applied to the previous
/// burst (pure; `pacing = false` ignores waits).
///
/// - `Wait::None`: as soon as the previous burst completed.
/// - `Wait::Think(t)`: `t` after the previous burst completed.
/// - `Wait::Pacing(p)`: `p` after the previous burst's send ([`LatePacing::Delay`])
///   or slot ([`LatePacing::Burst`]), but never before it completed; or the
///   first slot of the grid at or after its completion ([`LatePacing::Skip`]).
///   A first paced burst waits `p` from the previous completion.
pub fn send_target(wait: Wait, prev: Previous, pacing: bool, late: LatePacing) -> Target {
    let at = |t: Time| Target {
        at: t,
        slot: t,
        on_schedule: t,
    };
    if !pacing {
        return at(prev.done);
    }
    match wait {
        Wait::None => at(prev.done),
        Wait::Think(t) => at(add(prev.done, span(t))),
        Wait::Pacing(p) => {
            let (Some(start), Some(slot)) = (prev.start, prev.slot) else {
                return at(add(prev.done, span(p)));
            };
            match late {
                LatePacing::Delay => {
                    let slot = add(start, span(p));
                    Target {
                        at: slot.max(prev.done),
                        slot,
                        on_schedule: slot,
                    }
                }
                LatePacing::Burst => {
                    let slot = add(slot, span(p));
                    Target {
                        at: slot.max(prev.done),
                        slot,
                        on_schedule: slot,
                    }
                }
                LatePacing::Skip => {
                    let missed = add(slot, span(p));
                    let mut next = missed;
                    if next < prev.done && p > 0.0 {
                        let behind = (prev.done - next).as_secs_f64();
                        next = add(next, span((behind / p).ceil() * p));
                    }
                    let t = next.max(prev.done);
                    Target {
                        at: t,
                        slot: t,
                        on_schedule: missed,
                    }
                }
            }
        }
    }
}

/// The longest wait: about a century (absurd and non-finite waits and
/// deadlines saturate at it).
pub(crate) const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);

/// A wait of the script as a span. The script writes waits as f64 seconds
/// (`vodlab_workload`'s `Wait`, and the skip rule's catch-up is computed on
/// those f64 seconds): this is where they become [`Duration`]s. Negative
/// and NaN waits are zero, non-finite or absurd ones [`FAR`].
pub(crate) fn span(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(FAR)
}

/// `t + d`, saturating at [`FAR`] for absurd waits.
pub(crate) fn add(t: Time, d: Duration) -> Time {
    t.checked_add(d.min(FAR))
        .unwrap_or_else(|| t + Duration::from_secs(86_400))
}
