//! The in-process QUIC link's own counts of an h3 run
//! (`transport.quic_link` in `results.json`): what each session's link
//! ([`crate::io::transport::quic_link`]) passed, lost at random and
//! dropped from a full queue, per direction, summed over the sessions
//! that had one ([`QuicLinkMetrics`], merged exactly across shards) and
//! as the results show them ([`QuicLinkResults`]). Pure: no I/O.

use serde::{Deserialize, Serialize};

use crate::core::link::datagrams::DirectionCounts;
pub use crate::io::transport::quic_link::LinkCounts;
use crate::out::codec::ShardError;

/// The links' counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuicLinkMetrics {
    /// Sessions whose link was counted (at their end).
    pub links: u64,
    /// The uplinks' sums (the client's datagrams).
    pub up: DirectionCounts,
    /// The downlinks' sums (the server's datagrams).
    pub down: DirectionCounts,
}

impl QuicLinkMetrics {
    /// Adds one session's link.
    pub fn record(&mut self, c: &LinkCounts) {
        self.links += 1;
        self.up.add(&c.up);
        self.down.add(&c.down);
    }

    /// Adds another part of the same run.
    pub fn merge(&mut self, o: &QuicLinkMetrics) {
        self.links += o.links;
        self.up.add(&o.up);
        self.down.add(&o.down);
    }

    /// As a shard's dump keeps it: `[links, up × 6, down × 6]` (each
    /// direction in [`DirectionCounts::to_array`]'s order).
    pub fn dump(&self) -> Vec<u64> {
        let mut v = vec![self.links];
        v.extend(self.up.to_array());
        v.extend(self.down.to_array());
        v
    }

    /// From a shard's dump.
    pub fn from_dump(d: &[u64]) -> Result<Self, ShardError> {
        if d.len() != 13 {
            return Err(ShardError::Mismatch(format!(
                "transport.quic_link has {} values, not 13",
                d.len()
            )));
        }
        let six = |s: &[u64]| {
            let mut a = [0; 6];
            a.copy_from_slice(s);
            DirectionCounts::from_array(a)
        };
        Ok(Self {
            links: d[0],
            up: six(&d[1..7]),
            down: six(&d[7..13]),
        })
    }
}

/// The links' counts in `results.json` (`transport.quic_link`; h3 runs
/// whose sessions had a link: a rate, delay, jitter or loss).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuicLinkResults {
    /// Sessions whose link was counted.
    pub links: u64,
    /// The client's datagrams toward the server.
    pub up: DirectionCounts,
    /// The server's datagrams toward the client.
    pub down: DirectionCounts,
}

impl QuicLinkResults {
    /// From a run's metrics; `None` when no session had a link.
    pub fn of(m: &QuicLinkMetrics) -> Option<Self> {
        (m.links > 0).then_some(Self {
            links: m.links,
            up: m.up,
            down: m.down,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(k: u64) -> LinkCounts {
        let d = |o| DirectionCounts::from_array([10 * k + o, 1200, k, 1000 * k, o, 2 * o]);
        LinkCounts {
            up: d(1),
            down: d(2),
        }
    }

    #[test]
    fn links_sum_exactly_and_survive_a_dump() {
        let mut a = QuicLinkMetrics::default();
        assert_eq!(QuicLinkResults::of(&a), None, "no link: no section");
        a.record(&counts(1));
        let mut b = QuicLinkMetrics::default();
        b.record(&counts(2));
        b.record(&counts(3));
        a.merge(&b);
        let r = QuicLinkResults::of(&a).unwrap();
        assert_eq!(r.links, 3);
        assert_eq!(r.up.to_array(), [63, 3600, 6, 6000, 3, 6]);
        assert_eq!(r.down.to_array(), [66, 3600, 6, 6000, 6, 12]);
        assert_eq!(r.down.offered(), 66 + 6 + 6);
        let back = QuicLinkMetrics::from_dump(&a.dump()).unwrap();
        assert_eq!(back, a);
        let mut bad = a.dump();
        bad.pop();
        let e = QuicLinkMetrics::from_dump(&bad).unwrap_err().to_string();
        assert!(e.contains("not 13"), "{e}");
        let json = serde_json::to_value(r).unwrap();
        assert_eq!(json["down"]["queue_dropped_datagrams"], 6);
        assert_eq!(json["up"]["lost_bytes"], 6000);
    }
}
