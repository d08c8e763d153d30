//! How many descriptors a run will hold at once, worked out from its
//! schedule before it starts, so a run that cannot fit under this
//! process's `RLIMIT_NOFILE` says so (and how many client processes it
//! takes) instead of failing the sessions beyond the limit.
//!
//! The figure is a lower bound of the peak: each session of this process
//! (its shard, its class) starts at its offset in the schedule and lasts at
//! least the sum of its script's waits (pacing intervals and think times;
//! responses take time too), holding one descriptor per connection it opens
//! (HTTP/2: one per connection group) for that time.

use vodlab_workload::script::{Session, Wait};

use super::{per_shard, runs_session};
use crate::config::RunConfig;
use crate::load::LoadedWorkload;

/// Descriptors a process holds besides its connections: the runtime's
/// epoll and wake-up descriptors, stdio, result and checkpoint files, the
/// monitor's /proc reads, with room to spare.
pub const BASE_DESCRIPTORS: u64 = 64;

/// What a run will hold at its busiest, at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorNeed {
    /// Sessions of this process running at once at the peak.
    pub peak_sessions: u64,
    /// Connections open at once at the peak.
    pub peak_connections: u64,
}

impl DescriptorNeed {
    /// Descriptors the process needs at the peak: its connections and
    /// [`BASE_DESCRIPTORS`].
    pub fn descriptors(&self) -> u64 {
        self.peak_connections + BASE_DESCRIPTORS
    }

    /// Processes that hold the peak's connections with each under `limit`
    /// descriptors (at least 1; each keeps [`BASE_DESCRIPTORS`] and a
    /// tenth of the rest spare for what the estimate does not see).
    pub fn processes_for(&self, limit: u64) -> u64 {
        let room = (limit.saturating_sub(BASE_DESCRIPTORS) * 9 / 10).max(1);
        self.peak_connections.div_ceil(room).max(1)
    }

    /// `Some(message)` when the need exceeds `limit`: the plain sentence
    /// `vodlab run` refuses to start with. `processes` is how many client
    /// processes the run is spread over already.
    pub fn refusal(&self, limit: u64, processes: u64) -> Option<String> {
        if self.descriptors() <= limit {
            return None;
        }
        let k = self.processes_for(limit) * processes.max(1);
        Some(format!(
            "{} sessions at once need about {} descriptors ({} connections and {} for the process); this process may hold {} (RLIMIT_NOFILE, raised to its hard limit); use --client-processes {} (or more --shard processes), each under the limit",
            self.peak_sessions,
            self.descriptors(),
            self.peak_connections,
            BASE_DESCRIPTORS,
            limit,
            k
        ))
    }
}

/// Connections a session opens: one per distinct connection index of its
/// script, or one per HTTP/2 connection group.
fn connections_of(s: &Session, cfg: &RunConfig) -> u64 {
    let n = s
        .requests
        .iter()
        .map(|r| r.conn as u64 + 1)
        .max()
        .unwrap_or(1);
    if cfg.transport.protocol.is_h2() {
        match cfg.transport.h2.streams_per_connection {
            0 => 1,
            k => n.div_ceil(k as u64),
        }
    } else {
        n
    }
}

/// The shortest time a session can last: the sum of its waits (none with
/// pacing off), s.
fn min_duration_s(s: &Session, cfg: &RunConfig) -> f64 {
    if !cfg.pacing {
        return 0.0;
    }
    s.requests
        .iter()
        .filter(|r| !r.burst)
        .map(|r| match r.wait {
            Wait::Pacing(p) => p,
            Wait::Think(t) => t,
            Wait::None => 0.0,
        })
        .sum()
}

/// The peak of what the run of `cfg` over `work` holds at once, from the
/// same schedule the engine follows (its offsets, per-shard caps, shard
/// and class filters). A `--duration` cap cuts sessions short.
pub fn descriptor_need(cfg: &RunConfig, work: &LoadedWorkload) -> DescriptorNeed {
    let shards = work.shards.len();
    let cap_s = cfg.max_duration.map_or(f64::INFINITY, |d| d.as_secs_f64());
    // (time, +/-sessions, +/-connections)
    let mut events: Vec<(f64, i64, i64)> = Vec::new();
    for k in 0..shards {
        let n = work.shards[k].sessions.len();
        let limit = match cfg.max_sessions {
            Some(m) => (m / shards + usize::from(k < m % shards)).min(n),
            None => n,
        };
        let offsets =
            per_shard(&cfg.arrivals, shards).offsets(cfg.seed.wrapping_add(k as u64 * 0x9e37_79b9));
        for (i, off) in offsets.take(limit).enumerate() {
            let start = off.as_secs_f64();
            if start >= cap_s {
                break;
            }
            if !runs_session(cfg, work, k, i) {
                continue;
            }
            // a session that cannot be read now fails when it starts; its
            // header alone counts one connection and no waits
            let whole = work.session(k, i);
            let s: &Session = match &whole {
                Ok(w) => w,
                Err(_) => &work.shards[k].sessions[i],
            };
            let c = connections_of(s, cfg) as i64;
            let end = (start + min_duration_s(s, cfg)).min(cap_s);
            events.push((start, 1, c));
            events.push((end, -1, -c));
        }
    }
    // at equal times an end comes before a start: a session that lasts no
    // time overlaps nothing
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut s, mut c, mut peak_s, mut peak_c) = (0i64, 0i64, 0i64, 0i64);
    for (_, ds, dc) in events {
        s += ds;
        c += dc;
        peak_s = peak_s.max(s);
        peak_c = peak_c.max(c);
    }
    DescriptorNeed {
        peak_sessions: peak_s as u64,
        peak_connections: peak_c as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_need_the_limit_and_the_processes() {
        let need = DescriptorNeed {
            peak_sessions: 30_000,
            peak_connections: 30_000,
        };
        assert_eq!(need.descriptors(), 30_064);
        assert!(need.refusal(40_000, 1).is_none());
        let m = need.refusal(20_000, 1).expect("over the limit");
        assert!(
            m.starts_with("30000 sessions at once need about 30064 descriptors"),
            "{m}"
        );
        assert!(m.contains("this process may hold 20000"), "{m}");
        // room per process: (20000 - 64) * 0.9 = 17942 -> 2 processes
        assert!(m.contains("use --client-processes 2 "), "{m}");
        // (1000 - 64) * 0.9 = 842 a process: 30000 / 842 -> 36
        assert_eq!(need.processes_for(1_000), 36);
        // a child of a run spread over 3 that is still over: 3 x 2
        assert!(need
            .refusal(20_000, 3)
            .unwrap()
            .contains("--client-processes 6 "));
    }
}
