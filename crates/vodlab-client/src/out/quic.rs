//! QUIC's own figures of an h3 run (`transport.quic` in `results.json`):
//! what quinn counted on each of the client's QUIC connections
//! ([`QuicFigures`], taken from `quinn::Connection::stats()` when the
//! session ends), summed and distributed over connections
//! ([`QuicMetrics`], mergeable), as the results show them
//! ([`QuicResults`]) and as a shard's dump keeps them ([`QuicDump`]).
//! Pure: no I/O.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use crate::io::transport::QuicFigures;
use crate::out::codec::{decode_histogram, encode_histogram, ShardError};
use crate::out::summary::{histogram, record, Summary};

/// QUIC figures of a run: sums over its connections, and the distributions
/// of their round-trip times and congestion windows.
#[derive(Debug, Clone, PartialEq)]
pub struct QuicMetrics {
    /// QUIC connections whose figures were taken.
    pub connections: u64,
    /// Of those, connections with a packet declared lost.
    pub connections_with_loss: u64,
    /// Sums over the connections (`packets_sent` .. `stream_frames_sent`,
    /// then `zero_rtt_attempted` and `zero_rtt_accepted`, of
    /// [`QuicFigures`], in that order).
    pub sums: [u64; 9],
    /// Smoothed RTT per connection, µs.
    pub rtt: Histogram<u64>,
    /// Congestion window per connection, bytes.
    pub cwnd: Histogram<u64>,
}

impl Default for QuicMetrics {
    fn default() -> Self {
        Self {
            connections: 0,
            connections_with_loss: 0,
            sums: [0; 9],
            rtt: histogram(),
            cwnd: histogram(),
        }
    }
}

impl QuicMetrics {
    /// Adds one connection's figures.
    pub fn record(&mut self, f: &QuicFigures) {
        self.connections += 1;
        self.connections_with_loss += u64::from(f.packets_lost > 0);
        for (s, c) in self.sums.iter_mut().zip(f.counts()) {
            *s += c;
        }
        record(&mut self.rtt, f.rtt.as_micros() as u64);
        record(&mut self.cwnd, f.cwnd);
    }

    /// Adds another part of the same run.
    pub fn merge(&mut self, o: &QuicMetrics) {
        self.connections += o.connections;
        self.connections_with_loss += o.connections_with_loss;
        for (s, c) in self.sums.iter_mut().zip(o.sums) {
            *s += c;
        }
        self.rtt.add(&o.rtt).expect("same bounds");
        self.cwnd.add(&o.cwnd).expect("same bounds");
    }

    /// As a shard's dump keeps it.
    pub fn dump(&self) -> Result<QuicDump, ShardError> {
        let mut counts = vec![self.connections, self.connections_with_loss];
        counts.extend(self.sums);
        Ok(QuicDump {
            counts,
            rtt: encode_histogram("quic.rtt", &self.rtt)?,
            cwnd: encode_histogram("quic.cwnd", &self.cwnd)?,
        })
    }

    /// From a shard's dump (one written before 0-RTT was counted has 9
    /// values: its 0-RTT counts are 0).
    pub fn from_dump(d: &QuicDump) -> Result<Self, ShardError> {
        if d.counts.len() != 9 && d.counts.len() != 11 {
            return Err(ShardError::Mismatch(format!(
                "transport.quic.counts has {} values, not 11 (or 9)",
                d.counts.len()
            )));
        }
        let mut sums = [0; 9];
        sums[..d.counts.len() - 2].copy_from_slice(&d.counts[2..]);
        Ok(Self {
            connections: d.counts[0],
            connections_with_loss: d.counts[1],
            sums,
            rtt: decode_histogram("quic.rtt", &d.rtt)?,
            cwnd: decode_histogram("quic.cwnd", &d.cwnd)?,
        })
    }
}

/// [`QuicMetrics`] in a shard's dump.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuicDump {
    /// `[connections, connections_with_loss, packets_sent, packets_lost,
    /// lost_bytes, congestion_events, datagrams_received, bytes_received,
    /// stream_frames_sent, zero_rtt_attempted, zero_rtt_accepted]`.
    pub counts: Vec<u64>,
    /// RTTs, µs (V2, base64).
    pub rtt: String,
    /// Congestion windows, bytes (V2, base64).
    pub cwnd: String,
}

/// QUIC's figures in `results.json` (`transport.quic`, h3 runs only):
/// sums over the run's QUIC connections and per-connection distributions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicResults {
    /// QUIC connections whose figures were taken (at their session's end).
    pub connections: u64,
    /// Packets the client sent.
    pub packets_sent: u64,
    /// Of those, declared lost.
    pub packets_lost: u64,
    /// Bytes of the lost packets.
    pub lost_bytes: u64,
    /// Congestion events of the client's controller.
    pub congestion_events: u64,
    /// Connections with a packet declared lost.
    pub connections_with_loss: u64,
    /// UDP datagrams the client received.
    pub datagrams_received: u64,
    /// Bytes of those datagrams.
    pub bytes_received: u64,
    /// STREAM frames the client sent.
    pub stream_frames_sent: u64,
    /// Connections that sent 0-RTT (`--h3-0rtt`, with a ticket allowing
    /// early data); 0 in files from before it was counted.
    #[serde(default)]
    pub zero_rtt_attempted: u64,
    /// Of those, connections whose 0-RTT the server accepted.
    #[serde(default)]
    pub zero_rtt_accepted: u64,
    /// Smoothed RTT per connection at its end, ms.
    pub rtt_ms: Summary,
    /// The client's congestion window per connection at its end, bytes.
    pub cwnd_bytes: Summary,
}

impl QuicResults {
    /// From a run's metrics; `None` when no QUIC connection was measured.
    pub fn of(m: &QuicMetrics) -> Option<Self> {
        if m.connections == 0 {
            return None;
        }
        let [packets_sent, packets_lost, lost_bytes, congestion_events, datagrams_received, bytes_received, stream_frames_sent, zero_rtt_attempted, zero_rtt_accepted] =
            m.sums;
        Some(Self {
            connections: m.connections,
            packets_sent,
            packets_lost,
            lost_bytes,
            congestion_events,
            connections_with_loss: m.connections_with_loss,
            datagrams_received,
            bytes_received,
            stream_frames_sent,
            zero_rtt_attempted,
            zero_rtt_accepted,
            rtt_ms: Summary::of(&m.rtt, 1e3),
            cwnd_bytes: Summary::of(&m.cwnd, 1.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(lost: u64, rtt_ms: u64, cwnd: u64) -> QuicFigures {
        QuicFigures {
            packets_sent: 100,
            packets_lost: lost,
            lost_bytes: lost * 1200,
            congestion_events: u64::from(lost > 0),
            datagrams_received: 900,
            bytes_received: 1_000_000,
            stream_frames_sent: 10,
            rtt: std::time::Duration::from_millis(rtt_ms),
            cwnd,
            zero_rtt_attempted: lost == 0,
            zero_rtt_accepted: false,
        }
    }

    #[test]
    fn connections_sum_and_distribute_and_survive_a_dump() {
        let mut a = QuicMetrics::default();
        assert_eq!(QuicResults::of(&a), None, "no QUIC: no section");
        a.record(&figures(0, 10, 12_000));
        let mut b = QuicMetrics::default();
        b.record(&figures(3, 30, 24_000));
        a.merge(&b);
        let r = QuicResults::of(&a).unwrap();
        assert_eq!(
            (r.connections, r.packets_sent, r.packets_lost, r.lost_bytes),
            (2, 200, 3, 3600)
        );
        assert_eq!((r.congestion_events, r.connections_with_loss), (1, 1));
        assert_eq!(
            (r.datagrams_received, r.bytes_received, r.stream_frames_sent),
            (1800, 2_000_000, 20)
        );
        assert_eq!((r.zero_rtt_attempted, r.zero_rtt_accepted), (1, 0));
        assert_eq!((r.rtt_ms.count, r.rtt_ms.min), (2, 10.0));
        assert!((r.rtt_ms.max - 30.0).abs() < 0.1, "{:?}", r.rtt_ms);
        assert!(
            (r.cwnd_bytes.max - 24_000.0).abs() < 24.0,
            "{:?}",
            r.cwnd_bytes
        );
        let back = QuicMetrics::from_dump(&a.dump().unwrap()).unwrap();
        assert_eq!(back, a);
        // a dump from before 0-RTT was counted: its counts are 0
        let mut old = a.dump().unwrap();
        old.counts.truncate(9);
        let back = QuicMetrics::from_dump(&old).unwrap();
        assert_eq!(back.sums[..7], a.sums[..7]);
        assert_eq!(back.sums[7..], [0, 0]);
        let mut bad = a.dump().unwrap();
        bad.counts.pop();
        assert!(QuicMetrics::from_dump(&bad)
            .unwrap_err()
            .to_string()
            .contains("not 11"));
    }
}
