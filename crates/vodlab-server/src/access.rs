//! What the server writes down of each response: its count by kind, the
//! page-cache outcome of its range, and its access-log line.

use std::fmt;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use vodlab_cmcd::Cmcd;
use vodlab_http::server::Head;

use crate::plan::ResponsePlan;
use crate::state::{kind_index, State};

/// Whether a range was in the page cache when it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Probed resident: sent at once.
    Hit,
    /// Probed not resident (prefetched first, if the controller said so).
    Miss,
    /// Not probed (vanilla mode, or no file body).
    None,
}

impl fmt::Display for CacheOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::None => "-",
        })
    }
}

/// Counts a response by kind (and as an error when it is one: a refusal,
/// 4xx, or the server's own, 5xx).
pub(crate) fn count(st: &State, p: &ResponsePlan) {
    let c = &st.counters;
    c.kinds[kind_index(p.kind)].fetch_add(1, Ordering::Relaxed);
    if p.kind.is_error() {
        c.errors.fetch_add(1, Ordering::Relaxed);
        if p.status() >= 500 {
            c.server_errors.fetch_add(1, Ordering::Relaxed);
        } else {
            c.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Appends one access-log line (format in docs/serve.md): `sent` is the
/// file bytes sent and the page-cache outcome, `cmcd` the request's CMCD
/// (logged in its query form, `-` when empty, for `vodlab analyze`).
pub(crate) fn log_line(
    st: &State,
    conn: u64,
    head: &Head,
    p: &ResponsePlan,
    sent: (u64, CacheOutcome),
    took: Duration,
    cmcd: &Cmcd,
) {
    let Some(log) = &st.log else { return };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let session = head
        .header("x-vodlab-session")
        .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
        .map_or_else(|| format!("c{conn}"), str::to_string);
    let path = head.target.split('?').next().unwrap_or("");
    // the request's form, as `vodlab analyze` reads it
    let form = match head.header("range") {
        None => "whole",
        Some(v) if crate::request::open_ended_range(v) => "open",
        Some(_) => "chunk",
    };
    // percent-encoded: one field without spaces or quotes
    let cmcd = if cmcd.is_empty() {
        "-".to_string()
    } else {
        cmcd.to_query()
    };
    let line = format!(
        "{now:.6} {conn} {session} {path} {} {} {} {} {} {} {form} {cmcd}\n",
        p.offset,
        p.length,
        p.status(),
        sent.0,
        took.as_micros(),
        sent.1
    );
    let _ = log.lock().expect("lock").write_all(line.as_bytes());
}
