//! # vodlab-analyze
//!
//! Rebuilds what a video server's access log says about its viewers, as
//! chapter 5 of the thesis does for Netflix's logs: **chains** (contiguous
//! requests of one session to one file, in any order and on any connection,
//! each within a window of the neighbour it continues), **phases**
//! (transient clusters of short chains, stable long chains, inactive gaps)
//! and the distributions behind its Tables 5.2–5.4 and Figure 5.13, with a
//! piecewise power-law fit of the chain-length survival function.
//!
//! Everything is streaming: [`Analyzer::push`] takes one request at a time
//! in log order (completion order, roughly) and keeps only the chains and
//! sessions still open, so memory depends on the number of concurrent
//! sessions, not on the length of the log. Nothing here does I/O but [`logs`]
//! (`vodlab analyze` over files); the log parsers ([`parse`]) take one
//! line at a time.

#![warn(missing_docs)]

pub mod chains;
pub mod fit;
pub mod fitspec;
pub mod logs;
pub mod parse;
pub mod phases;
pub mod report;

pub use chains::{Chain, ChainDetector};
pub use parse::{LogFormat, ParseError};
pub use report::{Analysis, Analyzer};

use serde::{Deserialize, Serialize};

/// How a request asked for its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// A range with first and last byte (`bytes=A-B`).
    Chunk,
    /// Only the first byte (`bytes=A-`): the server sends until the client
    /// closes the connection or the file ends.
    Open,
    /// No range: the whole file.
    Whole,
}

impl Form {
    /// Name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Form::Chunk => "chunk",
            Form::Open => "open",
            Form::Whole => "whole",
        }
    }
}

/// One request of the log, as the analysis needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// When the request arrived, seconds (any epoch; the log's).
    pub start_s: f64,
    /// When its last byte was sent, seconds.
    pub end_s: f64,
    /// Session key (hash of the session id).
    pub session: u64,
    /// File key (hash of the path).
    pub file: u64,
    /// Connection number, when the log has one.
    pub conn: Option<u64>,
    /// First byte.
    pub offset: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Request form.
    pub form: Form,
    /// Nominal bit rate of the file, kbit/s, when known.
    pub bitrate_kbps: Option<f64>,
}

/// FNV-1a of a string: sessions and files are keyed by hash, so no table of
/// names grows with the log.
pub fn key(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Settings of the analysis; defaults are the thesis's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Two adjacent requests join a chain only when they arrive within this
    /// many seconds of each other (thesis: 40 s, the longest common pacing
    /// gap being 32 s [T1504]).
    pub chain_window_s: f64,
    /// How far out of arrival order the log may be, seconds: a log written
    /// at completion lists a long request after shorter ones that arrived
    /// later. Chains stay open this long past the window.
    pub reorder_s: f64,
    /// A chain lasting at most this long is short (transient); longer is a
    /// stable phase (thesis: 40 s [T1608]).
    pub long_chain_s: f64,
    /// Short chains closer than this (end to next start) form one transient
    /// phase (thesis: 10 s [T1608]).
    pub cluster_gap_s: f64,
    /// No request to any file for at least this long is an inactive phase
    /// (thesis: 40 s [T1671]).
    pub inactive_s: f64,
    /// A session with no request for this long is over (its phases are
    /// computed and its state dropped).
    pub session_idle_s: f64,
    /// Breakpoints (bytes) of the piecewise power-law fit of the chain-length
    /// survival function (thesis: 1 MB and 200 MB [T1547]).
    pub fit_breaks: Vec<f64>,
    /// Survival probability for the growth factor d/x = P^(-1/c) - 1
    /// (thesis: 0.45 [T1748]).
    pub survival_p: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            chain_window_s: 40.0,
            reorder_s: 120.0,
            long_chain_s: 40.0,
            cluster_gap_s: 10.0,
            inactive_s: 40.0,
            session_idle_s: 300.0,
            fit_breaks: vec![1e6, 2e8],
            survival_p: 0.45,
        }
    }
}

/// A setting out of its range.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{key}: {reason}")]
pub struct SettingsError {
    /// The setting.
    pub key: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl Settings {
    /// Checks every setting.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let pos = |key: &'static str, v: f64, max: f64| {
            if v.is_finite() && v > 0.0 && v <= max {
                Ok(())
            } else {
                Err(SettingsError {
                    key,
                    reason: format!("must be > 0 and at most {max}, got {v}"),
                })
            }
        };
        pos("chain_window_s", self.chain_window_s, 86_400.0)?;
        pos("reorder_s", self.reorder_s, 86_400.0)?;
        pos("long_chain_s", self.long_chain_s, 86_400.0)?;
        pos("cluster_gap_s", self.cluster_gap_s, 86_400.0)?;
        pos("inactive_s", self.inactive_s, 86_400.0)?;
        pos("session_idle_s", self.session_idle_s, 7.0 * 86_400.0)?;
        if self.session_idle_s < self.chain_window_s {
            return Err(SettingsError {
                key: "session_idle_s",
                reason: format!(
                    "must be at least chain_window_s ({}), got {}",
                    self.chain_window_s, self.session_idle_s
                ),
            });
        }
        if !(self.survival_p > 0.0 && self.survival_p < 1.0) {
            return Err(SettingsError {
                key: "survival_p",
                reason: format!("must be in (0, 1), got {}", self.survival_p),
            });
        }
        if self.fit_breaks.len() > 16
            || self
                .fit_breaks
                .iter()
                .any(|b| !(b.is_finite() && *b >= 1.0))
            || self.fit_breaks.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(SettingsError {
                key: "fit_breaks",
                reason: format!(
                    "must be at most 16 increasing byte counts >= 1, got {:?}",
                    self.fit_breaks
                ),
            });
        }
        Ok(())
    }
}
