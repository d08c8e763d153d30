//! The replay of a recorded event stream ([`crate::events`]) into a fresh
//! controller, through a fresh [`PrefetchCore`], compared decision for
//! decision with what was recorded.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;

use crate::controller::{PrefetchController, SessionState};
use crate::core::{prepare, prepare_continuation, Ask, PrefetchCore};
use crate::events::Event;

/// A recorded stream does not fit the core that replays it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("event {index}: {why}")]
pub struct ReplayError {
    /// 0-based index of the event.
    pub index: usize,
    /// What does not fit (a request's recorded probe answers against what
    /// the replayed session asks: the stream is not a core's own).
    pub why: String,
}

/// A decision the replay made differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// 0-based index of the event.
    pub index: usize,
    /// The recorded decision (`[offset, len]`), head and evicted bytes.
    pub recorded: (Option<[u64; 2]>, u64, Option<u64>),
    /// The replayed ones.
    pub replayed: (Option<[u64; 2]>, u64, Option<u64>),
}

/// What a replay found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Replay {
    /// Ranges decided.
    pub decisions: u64,
    /// Of them, prefetches.
    pub prefetches: u64,
    /// Reads completed, ticks and sessions ended fed.
    pub feedback: u64,
    /// Decisions that differ (empty when the controller decided alike).
    pub mismatches: Vec<Mismatch>,
    /// The automatic size's state at the end (`auto` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<crate::auto::AutoView>,
}

/// Feeds `events` to `controller` through a fresh [`PrefetchCore`] (see
/// the module note) and compares its decisions with the recorded ones.
pub fn replay(
    controller: Box<dyn PrefetchController>,
    events: &[Event],
) -> Result<Replay, ReplayError> {
    let mut core = PrefetchCore::new(controller);
    let base = Instant::now();
    let at = |t: u64| base + Duration::from_nanos(t);
    let mut sessions: HashMap<u64, SessionState> = HashMap::new();
    let mut out = Replay::default();
    for (index, e) in events.iter().enumerate() {
        match e {
            Event::Request {
                t_ns,
                conn,
                session,
                file,
                offset,
                length,
                file_size,
                bitrate_bps,
                open_ended,
                continuation,
                chain,
                probes,
                prefetch,
                head,
                evicted,
            } => {
                let s = sessions.entry(*conn).or_default();
                let mut answers = probes.iter().copied();
                let mut short = false;
                let mut answer = |_: u64, _: u64| {
                    answers.next().unwrap_or_else(|| {
                        short = true;
                        false
                    })
                };
                let probed = if *continuation {
                    prepare_continuation(*offset, *length, &mut answer)
                } else {
                    prepare(s, *file, *offset, *length, &mut answer)
                };
                if short || answers.next().is_some() {
                    return Err(ReplayError {
                        index,
                        why: format!(
                            "{} probe answers recorded, the session asked {}",
                            probes.len(),
                            probed.answers().len()
                        ),
                    });
                }
                let ask = Ask {
                    conn: *conn,
                    session,
                    file: *file,
                    offset: *offset,
                    length: *length,
                    file_size: *file_size,
                    bitrate_bps: *bitrate_bps,
                    open_ended: *open_ended,
                    continuation: *continuation,
                };
                let d = core.decide(at(*t_ns), &ask, &probed, s, chain.as_deref());
                let replayed = (d.decision.range(), d.head, d.evicted.map(|(b, _)| b));
                out.decisions += 1;
                out.prefetches += u64::from(replayed.0.is_some());
                let recorded = (*prefetch, *head, *evicted);
                if recorded != replayed {
                    out.mismatches.push(Mismatch {
                        index,
                        recorded,
                        replayed,
                    });
                }
            }
            Event::ReadDone {
                t_ns,
                conn,
                file,
                start,
                len,
                used,
                bytes,
                duration_ns,
            } => {
                let s = sessions.entry(*conn).or_default();
                core.read_done(
                    at(*t_ns),
                    *conn,
                    s,
                    *file,
                    *start,
                    *len,
                    *used,
                    *bytes,
                    Duration::from_nanos(*duration_ns),
                );
                out.feedback += 1;
            }
            Event::Tick {
                t_ns,
                device_bytes,
                device_busy_ns,
            } => {
                match device_bytes.zip(*device_busy_ns) {
                    Some((b, ns)) => core.tick_devices(at(*t_ns), b, Duration::from_nanos(ns)),
                    None => core.tick(at(*t_ns)),
                }
                out.feedback += 1;
            }
            Event::SessionEnd { t_ns, conn } => {
                if let Some(mut s) = sessions.remove(conn) {
                    core.end_session(at(*t_ns), *conn, &mut s);
                }
                out.feedback += 1;
            }
        }
    }
    out.auto = core.auto_view();
    Ok(out)
}
