//! The prefetch controller's inputs as a stream of events, and its replay.
//!
//! A [`PrefetchCore`] with a recorder (`vodlab serve --prefetch-events
//! FILE`) writes one [`Event`] per call, as JSON lines (format:
//! `docs/prefetch-events.schema.json`): every range decided (what was
//! asked, the page cache's answers, the decision), every prefetch read
//! completed, every tick (with the devices' totals), every session ended.
//! Times are nanoseconds since the server started.
//!
//! [`crate::replay::replay`] feeds such a stream to a fresh controller of the same policy
//! through the same core, keeping one session state per connection as the
//! server did, and compares each decision with the recorded one: a live
//! server and the simulator's controller decide alike, decision for
//! decision, when the replay finds no mismatch.

use std::io::BufRead;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One input of the prefetch core (see the module note).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A range was decided.
    Request {
        /// Nanoseconds since the start.
        t_ns: u64,
        /// The connection.
        conn: u64,
        /// The session's name.
        session: String,
        /// The file's key.
        file: u64,
        /// First byte.
        offset: u64,
        /// Bytes.
        length: u64,
        /// The file's size.
        file_size: u64,
        /// The content's bit rate, bits/s.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bitrate_bps: Option<u64>,
        /// The request was open-ended.
        #[serde(default)]
        open_ended: bool,
        /// The rest of an open-ended range asked again at its frontier
        /// (probed only, not accounted again).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        continuation: bool,
        /// The chain's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chain: Option<String>,
        /// The page cache's answers, in the order asked: the range, then
        /// (on a miss that overlaps the session's prefetches) the overlap.
        probes: Vec<bool>,
        /// What was decided: `[offset, len]` to prefetch, or none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefetch: Option<[u64; 2]>,
        /// Bytes at the range's start known to be resident.
        #[serde(default)]
        head: u64,
        /// Bytes reported evicted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evicted: Option<u64>,
    },
    /// A prefetch read completed.
    ReadDone {
        /// Nanoseconds since the start.
        t_ns: u64,
        /// The connection.
        conn: u64,
        /// The file's key.
        file: u64,
        /// First byte prefetched.
        start: u64,
        /// Bytes prefetched.
        len: u64,
        /// Bytes of it the request that caused it covers.
        used: u64,
        /// Bytes the helper read.
        bytes: u64,
        /// Time the read took, ns.
        duration_ns: u64,
    },
    /// The periodic tick.
    Tick {
        /// Nanoseconds since the start.
        t_ns: u64,
        /// The devices' total bytes read, when the server knows them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device_bytes: Option<u64>,
        /// The devices' total time spent reading, ns.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device_busy_ns: Option<u64>,
    },
    /// A connection ended.
    SessionEnd {
        /// Nanoseconds since the start.
        t_ns: u64,
        /// The connection.
        conn: u64,
    },
}

impl Event {
    /// Its time, ns since the start.
    pub fn t_ns(&self) -> u64 {
        match self {
            Event::Request { t_ns, .. }
            | Event::ReadDone { t_ns, .. }
            | Event::Tick { t_ns, .. }
            | Event::SessionEnd { t_ns, .. } => *t_ns,
        }
    }
}

/// A stream of events could not be read.
#[derive(Debug, Error)]
pub enum EventsError {
    /// Reading failed.
    #[error("reading the events: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not an event.
    #[error("line {line}: {why}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

/// Reads JSON-lines events; blank lines are skipped, anything else that is
/// not an event is an error naming its line.
pub fn read_events(r: impl BufRead) -> Result<Vec<Event>, EventsError> {
    let mut out = Vec::new();
    for (i, line) in r.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|e| EventsError::Line {
            line: i + 1,
            why: e.to_string(),
        })?);
    }
    Ok(out)
}
