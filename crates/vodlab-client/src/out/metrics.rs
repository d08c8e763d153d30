//! Bounded, mergeable statistics: HdrHistograms and fixed-width time bins,
//! never a sample per request.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::core::delivery::{DeliveryOut, Playback, MAX_RATIO_PERMILLE};
use crate::core::exchange::ErrorKind;
use crate::core::viewer::ViewerStats;
pub use crate::out::summary::{histogram, record, Summary};

/// Histogram of delivered/target ratios of rate windows, per mille
/// (0 ..= [`MAX_RATIO_PERMILLE`]; exact below 2048, i.e. to 0.1 % up to twice
/// the target).
pub fn ratio_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, u64::from(MAX_RATIO_PERMILLE), 3).expect("valid bounds")
}

/// Longest aggregate series kept, 100 ms windows (a week).
pub const MAX_AGGREGATE_WINDOWS: u64 = 7 * 86_400 * 10;

/// Quantiles at which [`cdf`] samples a distribution.
const CDF_QUANTILES: [f64; 56] = {
    let mut q = [0.0; 56];
    let mut i = 0;
    while i <= 50 {
        q[i] = i as f64 / 50.0;
        i += 1;
    }
    // a finer tail: 0.99, 0.995, 0.999, 0.9999, then the max again for a flat end
    q[50] = 0.99;
    q[51] = 0.995;
    q[52] = 0.999;
    q[53] = 0.9999;
    q[54] = 1.0;
    q[55] = 1.0;
    q
};

/// The distribution as `[quantile, value]` pairs (value divided by `scale`),
/// 2 % apart plus a finer tail: enough to draw a CDF, bounded in size.
pub fn cdf(h: &Histogram<u64>, scale: f64) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<[f64; 2]> = Vec::with_capacity(CDF_QUANTILES.len());
    let mut qs = CDF_QUANTILES.to_vec();
    qs.sort_by(f64::total_cmp);
    qs.dedup();
    for q in qs {
        let v = if q == 0.0 {
            h.min()
        } else {
            h.value_at_quantile(q)
        } as f64
            / scale;
        out.push([q, v]);
    }
    out
}

/// Figures for one client class (or all of them).
#[derive(Debug, Clone)]
pub struct ClassMetrics {
    /// Send to last byte, µs (measured sessions).
    pub response: Histogram<u64>,
    /// Send to first byte, µs.
    pub ttfb: Histogram<u64>,
    /// Scheduled send time to last byte, µs (no coordinated omission).
    pub from_schedule: Histogram<u64>,
    /// Session start to playback start, µs.
    pub startup: Histogram<u64>,
    /// Measured sessions.
    pub sessions: u64,
    /// Measured sessions that failed.
    pub failed: u64,
    /// Measured sessions with at least one stall.
    pub stalled_sessions: u64,
    /// Stalls in measured sessions.
    pub stalls: u64,
    /// Stall time in measured sessions, µs (an integer, so merging is exact).
    pub stall_us: u64,
    /// Completed requests of measured sessions.
    pub requests: u64,
    /// Body bytes of those requests.
    pub bytes: u64,
    /// Issue to the first `B` seconds of content, µs (completed requests
    /// with a known bit rate and at least `B` seconds of content).
    pub playback: Histogram<u64>,
    /// Completed requests without a known bit rate (no playback latency).
    pub playback_no_bitrate: u64,
    /// Completed requests with less than `B` seconds of content.
    pub playback_short: u64,
}

impl Default for ClassMetrics {
    fn default() -> Self {
        Self {
            response: histogram(),
            ttfb: histogram(),
            from_schedule: histogram(),
            startup: histogram(),
            sessions: 0,
            failed: 0,
            stalled_sessions: 0,
            stalls: 0,
            stall_us: 0,
            requests: 0,
            bytes: 0,
            playback: histogram(),
            playback_no_bitrate: 0,
            playback_short: 0,
        }
    }
}

impl ClassMetrics {
    /// Adds another's figures.
    pub fn merge(&mut self, o: &ClassMetrics) {
        self.response.add(&o.response).expect("same bounds");
        self.ttfb.add(&o.ttfb).expect("same bounds");
        self.from_schedule
            .add(&o.from_schedule)
            .expect("same bounds");
        self.startup.add(&o.startup).expect("same bounds");
        self.sessions += o.sessions;
        self.failed += o.failed;
        self.stalled_sessions += o.stalled_sessions;
        self.stalls += o.stalls;
        self.stall_us += o.stall_us;
        self.requests += o.requests;
        self.bytes += o.bytes;
        self.playback.add(&o.playback).expect("same bounds");
        self.playback_no_bitrate += o.playback_no_bitrate;
        self.playback_short += o.playback_short;
    }
}

/// Counters per fixed-width time bin (all sessions, ramps included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bin {
    /// Requests completed in the bin.
    pub completed_requests: u64,
    /// Body bytes of requests completed in the bin.
    pub completed_bytes: u64,
    /// Sessions started.
    pub started: u64,
    /// Sessions that ended successfully.
    pub completed: u64,
    /// Sessions that failed.
    pub failed: u64,
}

/// Time-binned counters with a fixed bin width.
#[derive(Debug, Clone, PartialEq)]
pub struct Bins {
    /// Width of a bin in seconds.
    pub width_s: f64,
    /// The bins, from the run start.
    pub bins: Vec<Bin>,
}

impl Bins {
    /// Empty series.
    pub fn new(width_s: f64) -> Self {
        Self {
            width_s,
            bins: Vec::new(),
        }
    }

    /// The bin holding time `t_s`.
    pub fn at(&mut self, t_s: f64) -> &mut Bin {
        let i = (t_s.max(0.0) / self.width_s) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, Bin::default());
        }
        &mut self.bins[i]
    }

    /// Requests and bytes completed within `[from, to)`, pro-rating the edge bins.
    pub fn completed_between(&self, from: f64, to: f64) -> (f64, f64) {
        let (mut req, mut bytes) = (0.0, 0.0);
        for (i, b) in self.bins.iter().enumerate() {
            let lo = i as f64 * self.width_s;
            let hi = lo + self.width_s;
            let overlap = (hi.min(to) - lo.max(from)).max(0.0) / self.width_s;
            req += b.completed_requests as f64 * overlap;
            bytes += b.completed_bytes as f64 * overlap;
        }
        (req, bytes)
    }
}

impl Bins {
    /// Adds another series of the same width bin by bin.
    pub fn merge(&mut self, o: &Bins) {
        if self.bins.len() < o.bins.len() {
            self.bins.resize(o.bins.len(), Bin::default());
        }
        for (a, b) in self.bins.iter_mut().zip(&o.bins) {
            a.completed_requests += b.completed_requests;
            a.completed_bytes += b.completed_bytes;
            a.started += b.started;
            a.completed += b.completed;
            a.failed += b.failed;
        }
    }
}

/// Error counts by type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Errors(pub BTreeMap<ErrorKind, u64>);

impl Errors {
    /// Counts one.
    pub fn add(&mut self, k: ErrorKind) {
        *self.0.entry(k).or_default() += 1;
    }

    /// Count of one kind.
    pub fn get(&self, k: ErrorKind) -> u64 {
        self.0.get(&k).copied().unwrap_or(0)
    }
}

impl Errors {
    /// Adds another's counts.
    pub fn merge(&mut self, o: &Errors) {
        for (k, n) in &o.0 {
            *self.0.entry(*k).or_default() += n;
        }
    }
}

/// One ended request, as the executors report it (times in seconds from
/// the run start, durations in microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestSample {
    /// Index of the request in its session.
    pub request: u32,
    /// When its burst was due, s.
    pub scheduled_s: f64,
    /// When it was issued, s.
    pub sent_s: f64,
    /// How late its burst was issued (burst heads only), µs.
    pub send_lateness_us: Option<u64>,
    /// The completion, or the error kind.
    pub outcome: Result<SampleDone, ErrorKind>,
}

/// A completed request's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleDone {
    /// Completion, µs from the run start.
    pub done_us: u64,
    /// Issue to last byte, µs.
    pub response_us: u64,
    /// Time to first byte, µs.
    pub ttfb_us: u64,
    /// Due time to last byte, µs (free of coordinated omission).
    pub from_schedule_us: u64,
    /// Body bytes.
    pub bytes: u64,
    /// Status.
    pub status: u16,
    /// Playback latency (issue to the first `B` seconds of content).
    pub playback: Playback,
}

/// One ended session's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionSample {
    /// Start, s from the run start.
    pub start_s: f64,
    /// End, s from the run start.
    pub end_s: f64,
    /// The kind of its first failure.
    pub failure: Option<ErrorKind>,
    /// Requests never sent.
    pub skipped: u64,
    /// What its viewer saw.
    pub viewer: Option<ViewerStats>,
    /// Retries after the server closed an idle connection.
    pub reconnects: u64,
    /// Responses after which the server closed the connection.
    pub server_closes: u64,
}

/// Everything a run (or a part of it) measured: bounded, and mergeable so
/// per-task, per-process or per-host parts add up to exactly the whole.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetrics {
    /// A start or send later than this (µs) counts as late.
    pub late_threshold_us: u64,
    /// Measured sessions' figures per client class.
    pub classes: BTreeMap<String, ClassMetrics>,
    /// Time bins (100 ms) of every session.
    pub bins: Bins,
    /// First error of each failed session, by kind.
    pub errors: Errors,
    /// Session start lateness, µs.
    pub start_lateness: Histogram<u64>,
    /// Burst send lateness against the pacing target, µs.
    pub send_lateness: Histogram<u64>,
    /// Starts later than the threshold.
    pub late_starts: u64,
    /// Sends later than the threshold.
    pub late_sends: u64,
    /// Retries after the server closed an idle connection.
    pub reconnects: u64,
    /// Responses after which the server closed the connection.
    pub server_closes: u64,
    /// Requests skipped because their session failed.
    pub skipped_requests: u64,
    /// First measured session start, s.
    pub measured_from: Option<f64>,
    /// Last measured session end, s.
    pub measured_to: Option<f64>,
    /// Delivered/target ratio of every rate window of measured sessions'
    /// responses after their first `B` seconds, per mille.
    pub rate_ratio: Histogram<u64>,
    /// Those windows.
    pub rate_windows: u64,
    /// Those within ±5 % of the target.
    pub rate_windows_within: u64,
    /// Body bytes of every session per 100 ms window from the run start.
    pub delivered: Vec<u64>,
    /// Connections opened and their TLS handshakes.
    pub transport: TransportMetrics,
}

/// Connections a run opened: TCP connections (HTTP/2 streams of an open
/// connection are not counted), TLS handshakes, their times and resumptions.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportMetrics {
    /// TCP connections opened.
    pub connections: u64,
    /// TLS handshakes completed.
    pub tls_handshakes: u64,
    /// Of those, resumed from a session ticket.
    pub tls_resumed: u64,
    /// Handshake durations, µs (TCP connect excluded).
    pub tls_handshake: Histogram<u64>,
    /// QUIC's own figures of the h3 connections (none for TCP protocols).
    pub quic: crate::out::quic::QuicMetrics,
    /// The in-process QUIC links' counts (h3 sessions with a link).
    pub quic_link: crate::out::quic_link::QuicLinkMetrics,
}

impl Default for TransportMetrics {
    fn default() -> Self {
        Self {
            connections: 0,
            tls_handshakes: 0,
            tls_resumed: 0,
            tls_handshake: histogram(),
            quic: crate::out::quic::QuicMetrics::default(),
            quic_link: crate::out::quic_link::QuicLinkMetrics::default(),
        }
    }
}

impl TransportMetrics {
    /// A connection was opened.
    pub fn record(&mut self, o: &crate::io::transport::Opened) {
        self.connections += u64::from(o.new_connection);
        if let Some(d) = o.tls_handshake {
            self.tls_handshakes += 1;
            self.tls_resumed += u64::from(o.resumed);
            record(&mut self.tls_handshake, d.as_micros() as u64);
        }
    }

    /// Adds another part of the same run.
    pub fn merge(&mut self, o: &TransportMetrics) {
        self.connections += o.connections;
        self.tls_handshakes += o.tls_handshakes;
        self.tls_resumed += o.tls_resumed;
        self.tls_handshake
            .add(&o.tls_handshake)
            .expect("same bounds");
        self.quic.merge(&o.quic);
        self.quic_link.merge(&o.quic_link);
    }
}

impl RunMetrics {
    /// Empty, with the lateness threshold.
    pub fn new(late_threshold_us: u64) -> Self {
        Self {
            late_threshold_us,
            classes: BTreeMap::new(),
            bins: Bins::new(0.1),
            errors: Errors::default(),
            start_lateness: histogram(),
            send_lateness: histogram(),
            late_starts: 0,
            late_sends: 0,
            reconnects: 0,
            server_closes: 0,
            skipped_requests: 0,
            measured_from: None,
            measured_to: None,
            rate_ratio: ratio_histogram(),
            rate_windows: 0,
            rate_windows_within: 0,
            delivered: Vec::new(),
            transport: TransportMetrics::default(),
        }
    }

    /// Delivery figures of a session (rate windows count for measured
    /// sessions only; the aggregate counts every session).
    pub fn record_delivery(&mut self, measured: bool, d: &DeliveryOut) {
        if measured {
            for w in &d.windows {
                let n = u64::from(w.count);
                let _ = self.rate_ratio.record_n(u64::from(w.ratio_permille), n);
                self.rate_windows += n;
                self.rate_windows_within += if w.within { n } else { 0 };
            }
        }
        for &(i, bytes) in &d.aggregate {
            if i >= MAX_AGGREGATE_WINDOWS {
                continue;
            }
            let i = i as usize;
            if self.delivered.len() <= i {
                self.delivered.resize(i + 1, 0);
            }
            self.delivered[i] += bytes;
        }
    }

    fn class(&mut self, class: &str) -> &mut ClassMetrics {
        if !self.classes.contains_key(class) {
            self.classes
                .insert(class.to_string(), ClassMetrics::default());
        }
        self.classes.get_mut(class).expect("inserted")
    }

    /// A session started at `t_s`, `lateness_us` behind its schedule.
    pub fn record_start(&mut self, t_s: f64, lateness_us: u64) {
        record(&mut self.start_lateness, lateness_us);
        self.late_starts += u64::from(lateness_us > self.late_threshold_us);
        self.bins.at(t_s).started += 1;
    }

    /// A request of a session of `class` ended.
    pub fn record_request(&mut self, class: &str, measured: bool, r: &RequestSample) {
        if let Some(l) = r.send_lateness_us {
            record(&mut self.send_lateness, l);
            self.late_sends += u64::from(l > self.late_threshold_us);
        }
        let Ok(d) = r.outcome else { return };
        let b = self.bins.at(d.done_us as f64 / 1e6);
        b.completed_requests += 1;
        b.completed_bytes += d.bytes;
        if measured {
            let m = self.class(class);
            record(&mut m.response, d.response_us);
            record(&mut m.ttfb, d.ttfb_us);
            record(&mut m.from_schedule, d.from_schedule_us);
            m.requests += 1;
            m.bytes += d.bytes;
            match d.playback {
                Playback::After(t) => record(&mut m.playback, t.as_micros() as u64),
                Playback::NoBitRate => m.playback_no_bitrate += 1,
                Playback::Short => m.playback_short += 1,
            }
        }
    }

    /// A session of `class` ended.
    pub fn record_session(&mut self, class: &str, measured: bool, s: &SessionSample) {
        let b = self.bins.at(s.end_s);
        if s.failure.is_some() {
            b.failed += 1;
        } else {
            b.completed += 1;
        }
        self.skipped_requests += s.skipped;
        self.reconnects += s.reconnects;
        self.server_closes += s.server_closes;
        if let Some(k) = s.failure {
            self.errors.add(k);
        }
        if measured {
            self.measured_from = Some(self.measured_from.map_or(s.start_s, |x| x.min(s.start_s)));
            self.measured_to = Some(self.measured_to.map_or(s.end_s, |x| x.max(s.end_s)));
            let m = self.class(class);
            m.sessions += 1;
            m.failed += u64::from(s.failure.is_some());
            if let Some(v) = s.viewer {
                if let Some(t) = v.startup_s {
                    record(&mut m.startup, (t * 1e6) as u64);
                }
                m.stalls += u64::from(v.stalls);
                m.stalled_sessions += u64::from(v.stalls > 0);
                m.stall_us += (v.stall_s * 1e6).round() as u64;
            }
        }
    }

    /// Adds another part of the same run (same threshold and bin width).
    pub fn merge(&mut self, o: &RunMetrics) {
        for (k, m) in &o.classes {
            self.class(k).merge(m);
        }
        self.bins.merge(&o.bins);
        self.errors.merge(&o.errors);
        self.start_lateness
            .add(&o.start_lateness)
            .expect("same bounds");
        self.send_lateness
            .add(&o.send_lateness)
            .expect("same bounds");
        self.late_starts += o.late_starts;
        self.late_sends += o.late_sends;
        self.reconnects += o.reconnects;
        self.server_closes += o.server_closes;
        self.skipped_requests += o.skipped_requests;
        self.measured_from = min_opt(self.measured_from, o.measured_from, f64::min);
        self.measured_to = min_opt(self.measured_to, o.measured_to, f64::max);
        self.rate_ratio.add(&o.rate_ratio).expect("same bounds");
        self.rate_windows += o.rate_windows;
        self.rate_windows_within += o.rate_windows_within;
        if self.delivered.len() < o.delivered.len() {
            self.delivered.resize(o.delivered.len(), 0);
        }
        for (a, b) in self.delivered.iter_mut().zip(&o.delivered) {
            *a += b;
        }
        self.transport.merge(&o.transport);
    }
}

fn min_opt(a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl PartialEq for ClassMetrics {
    fn eq(&self, o: &Self) -> bool {
        self.response == o.response
            && self.ttfb == o.ttfb
            && self.from_schedule == o.from_schedule
            && self.startup == o.startup
            && (
                self.sessions,
                self.failed,
                self.stalled_sessions,
                self.stalls,
            ) == (o.sessions, o.failed, o.stalled_sessions, o.stalls)
            && (self.requests, self.bytes) == (o.requests, o.bytes)
            && self.stall_us == o.stall_us
            && self.playback == o.playback
            && (self.playback_no_bitrate, self.playback_short)
                == (o.playback_no_bitrate, o.playback_short)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    fn req(i: u64, ok: bool) -> RequestSample {
        RequestSample {
            request: i as u32,
            scheduled_s: i as f64 * 0.37,
            sent_s: i as f64 * 0.37 + 0.01,
            send_lateness_us: (i % 3 == 0).then_some(i * 7919 % 20_000),
            outcome: if ok {
                Ok(SampleDone {
                    done_us: i * 370_000 + 5_000 + i % 1000,
                    response_us: 1_000 + i * 977 % 3_000_000,
                    ttfb_us: 100 + i * 31 % 50_000,
                    from_schedule_us: 2_000 + i * 1_013 % 3_000_000,
                    bytes: 1 + i * 104_729 % 4_000_000,
                    status: 206,
                    playback: match i % 3 {
                        0 => Playback::NoBitRate,
                        1 => Playback::Short,
                        _ => {
                            Playback::After(std::time::Duration::from_micros(i * 7_717 % 5_000_000))
                        }
                    },
                })
            } else {
                Err(ErrorKind::ALL[(i % 10) as usize])
            },
        }
    }

    fn sess(i: u64) -> SessionSample {
        SessionSample {
            start_s: i as f64 * 0.5,
            end_s: i as f64 * 0.5 + 30.0 + (i % 7) as f64,
            failure: (i % 5 == 0).then_some(ErrorKind::Timeout),
            skipped: i % 4,
            viewer: Some(ViewerStats {
                startup_s: Some(0.1 + (i % 9) as f64 * 0.25),
                stalls: (i % 3) as u32,
                stall_s: (i % 3) as f64 * 1.3,
                played_s: 30.0,
            }),
            reconnects: i % 2,
            server_closes: i % 3,
        }
    }

    fn feed(m: &mut RunMetrics, i: u64, ok_mask: u64) {
        let class = ["a", "b", "c"][(i % 3) as usize];
        let measured = i % 11 != 0;
        m.record_start(i as f64 * 0.5, i * 131 % 30_000);
        m.record_request(class, measured, &req(i, ok_mask >> (i % 64) & 1 == 1));
        if i % 4 == 0 {
            m.record_session(class, measured, &sess(i));
        }
        let w = crate::core::delivery::WindowRun {
            ratio_permille: (i * 37 % 2_500) as u32,
            within: i % 2 == 0,
            count: (i % 5 + 1) as u32,
        };
        let d = DeliveryOut {
            windows: vec![w],
            aggregate: vec![(i % 97, i * 1_000 + 1)],
        };
        m.record_delivery(measured, &d);
    }

    proptest! {
        /// Two halves of one run, split any way, merge into exactly the whole.
        #[test]
        fn halves_merge_into_the_whole(n in 1u64..400, split in any::<u64>(), ok_mask in any::<u64>()) {
            let mut whole = RunMetrics::new(10_000);
            let mut a = RunMetrics::new(10_000);
            let mut b = RunMetrics::new(10_000);
            for i in 0..n {
                feed(&mut whole, i, ok_mask);
                if split >> (i % 64) & 1 == 1 { feed(&mut a, i, ok_mask) } else { feed(&mut b, i, ok_mask) }
            }
            a.merge(&b);
            prop_assert!(a == whole);
        }
    }

    #[test]
    fn bins_prorate_edges() {
        let mut b = Bins::new(1.0);
        b.at(0.5).completed_bytes = 100;
        b.at(1.5).completed_bytes = 100;
        b.at(2.5).completed_bytes = 100;
        let (_, bytes) = b.completed_between(0.5, 2.5);
        assert!((bytes - 200.0).abs() < 1e-9);
    }

    #[test]
    fn summary_quartiles() {
        let mut h = histogram();
        for v in 1..=1000u64 {
            record(&mut h, v * 1000);
        }
        let s = Summary::of(&h, 1000.0);
        assert!((s.p50 - 500.0).abs() < 1.0, "{s:?}");
        assert!((s.iqr - 500.0).abs() < 2.0, "{s:?}");
    }
}
