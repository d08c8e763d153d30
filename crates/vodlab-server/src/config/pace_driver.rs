//! Where the user-mode pacer's driver runs (`--pace-driver`), and the
//! kernel-mode segment size (`--pace-mss`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Priority of a real-time driver when `rt` names none (1 = lowest
/// SCHED_FIFO priority; 10 keeps it below the kernel's threaded
/// interrupt handlers, which run at 50).
pub const DEFAULT_RT_PRIORITY: u8 = 10;
/// Highest SCHED_FIFO priority Linux accepts.
pub const MAX_RT_PRIORITY: u8 = 99;
/// Smallest `pace_mss` Linux accepts for `TCP_MAXSEG` (`TCP_MIN_MSS`).
pub const MIN_PACE_MSS: u32 = 88;
/// Largest `pace_mss` (`MAX_TCP_WINDOW`'s bound is larger; no link here has
/// a larger MTU).
pub const MAX_PACE_MSS: u32 = 65_535;

/// The thread that wakes up at the pacer's release times and writes the
/// due chunks (`--pace-driver task|thread|rt[:PRIO]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PaceDriver {
    /// A task on the server's tokio workers, woken by tokio's timer (1 ms
    /// wheel: a wake-up is rounded up to the next millisecond tick) and
    /// scheduled among the connection tasks. The first design.
    Task,
    /// A dedicated OS thread at normal priority that waits on a condition
    /// variable until the next release (a futex: the kernel's
    /// high-resolution timer) with 1 ns of timer slack.
    #[default]
    Thread,
    /// The dedicated thread under `SCHED_FIFO` at this priority (1–99):
    /// it runs ahead of every normal thread on its core as soon as its
    /// timer fires. Needs root or `CAP_SYS_NICE`; refused, the thread logs
    /// it and runs at normal priority (the statistics' `driver_policy`
    /// says which it got).
    Rt(u8),
}

impl PaceDriver {
    /// Whether the driver is a dedicated thread (`thread` or `rt`).
    pub fn is_thread(self) -> bool {
        !matches!(self, Self::Task)
    }

    /// The `SCHED_FIFO` priority asked for (`rt` only).
    pub fn rt_priority(self) -> Option<u8> {
        match self {
            Self::Rt(p) => Some(p),
            _ => None,
        }
    }
}

impl fmt::Display for PaceDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Task => f.write_str("task"),
            Self::Thread => f.write_str("thread"),
            Self::Rt(p) => write!(f, "rt:{p}"),
        }
    }
}

impl FromStr for PaceDriver {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        match t {
            "task" => return Ok(Self::Task),
            "thread" | "normal" => return Ok(Self::Thread),
            "rt" => return Ok(Self::Rt(DEFAULT_RT_PRIORITY)),
            _ => {}
        }
        let Some(p) = t.strip_prefix("rt:") else {
            return Err(format!("`{t}`: use task, thread or rt[:PRIO]"));
        };
        match p.parse::<u8>() {
            Ok(p) if (1..=MAX_RT_PRIORITY).contains(&p) => Ok(Self::Rt(p)),
            _ => Err(format!("`{t}`: the rt priority must be 1 to 99")),
        }
    }
}

impl TryFrom<String> for PaceDriver {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<PaceDriver> for String {
    fn from(d: PaceDriver) -> Self {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_parse_and_print_back() {
        assert_eq!("task".parse(), Ok(PaceDriver::Task));
        assert_eq!("thread".parse(), Ok(PaceDriver::Thread));
        assert_eq!("normal".parse(), Ok(PaceDriver::Thread));
        assert_eq!("rt".parse(), Ok(PaceDriver::Rt(DEFAULT_RT_PRIORITY)));
        assert_eq!("rt:99".parse(), Ok(PaceDriver::Rt(99)));
        for bad in ["rt:0", "rt:100", "rt:x", "fifo", ""] {
            assert!(bad.parse::<PaceDriver>().is_err(), "{bad}");
        }
        for d in [PaceDriver::Task, PaceDriver::Thread, PaceDriver::Rt(7)] {
            assert_eq!(d.to_string().parse(), Ok(d));
        }
        assert_eq!(PaceDriver::default(), PaceDriver::Thread);
        assert!(!PaceDriver::Task.is_thread());
        assert_eq!(PaceDriver::Rt(3).rt_priority(), Some(3));
    }
}

#[cfg(test)]
mod config_tests {
    use super::super::{Config, ConfigError};
    use super::*;

    #[test]
    fn the_driver_and_mss_keys_are_read_and_checked() {
        let c: Config =
            serde_json::from_str(r#"{"pace_driver": "rt:5", "pace_mss": 137}"#).unwrap();
        assert_eq!(c.pace_driver, PaceDriver::Rt(5));
        assert_eq!(c.pace_mss, Some(137));
        c.validate().unwrap();
        let back: Config = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(serde_json::from_str::<Config>(r#"{"pace_driver": "rt:0"}"#).is_err());
        assert_eq!(Config::default().pace_driver, PaceDriver::Thread);
        for bad in [87, 65_536] {
            let c = Config {
                pace_mss: Some(bad),
                ..Config::default()
            };
            assert!(
                matches!(
                    c.validate(),
                    Err(ConfigError::Range {
                        field: "pace_mss",
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }
}
