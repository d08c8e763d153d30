//! Delivery metrics that judge a pacing server (Ma, Bartoš, Bhatia, "Scalability
//! of HTTP pacing with intelligent bursting"), without I/O: every function
//! takes the arrival time of the bytes it is told about.
//!
//! - **Playback latency** of a response: from its issue (which is the
//!   connection attempt when the request opens a new connection, the driver
//!   connecting at the moment it issues; the issue itself on a reused
//!   connection) until the first `B` seconds of content (`B` × bit rate / 8
//!   bytes of body) have arrived. Not computed when the bit rate is unknown
//!   or the response holds less than `B` seconds.
//! - **Rate windows** of a response: after its first `B` seconds arrived
//!   (the end of the server's initial burst, or of the first `B` s when it
//!   does not burst), the body bytes of every full 100 ms window
//!   `(p + i·w, p + (i+1)·w]` compared with the paced target `K` × bit rate:
//!   deviation `(delivered − target) / target`. A read's bytes count at the
//!   instant of the read; the last, partial window is left out.
//! - **Aggregate rate**: body bytes of every session per 100 ms window of the
//!   run (`[k·w, (k+1)·w)` from the run's epoch), the paper's bandwidth plot.
//!
//! Accounting is O(1) per read with no allocation per read: windows that
//! pass without bytes are reported as one run of empty windows, and the
//! aggregate emits one entry per 100 ms a session received bytes in.

use std::time::Duration;

use crate::core::time::Time;

/// Width of a rate window (the 100 ms).
pub const RATE_WINDOW: Duration = Duration::from_millis(100);

/// Largest delivered/target ratio kept, in per-mille (1000 × the target);
/// larger ratios are clamped to it.
pub const MAX_RATIO_PERMILLE: u32 = 1_000_000;

/// Default client buffer `B` (the paper's 4 s).
pub const DEFAULT_PLAYBACK_BUFFER: Duration = Duration::from_secs(4);

/// The index of the 100 ms window `d` after the epoch falls in.
pub fn window_index(d: Duration) -> u64 {
    d.as_secs() * 10 + u64::from(d.subsec_nanos() / 100_000_000)
}

/// One or more consecutive rate windows with the same outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowRun {
    /// Delivered bytes over the target bytes, per mille, rounded (1000 = on
    /// target; deviation = ratio/1000 − 1).
    pub ratio_permille: u32,
    /// Delivered within ±5 % of the target (decided on the exact byte count).
    pub within: bool,
    /// Number of windows.
    pub count: u32,
}

/// Where a response's playback latency stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Playback {
    /// No bit rate known for the request: not computed.
    NoBitRate,
    /// The first `B` seconds have not arrived (the response holds less).
    Short,
    /// The first `B` seconds had arrived this long after the issue.
    After(Duration),
}

/// The bit rate of a request in bit/s: CMCD `br` (kbit/s, CTA-5004) of a
/// `CMCD-Object` or `CMCD` header line of the request or of its `CMCD` query
/// parameter, else the session's `bitrate=`.
pub fn request_bitrate(
    r: &vodlab_workload::script::Request,
    session_bps: Option<u64>,
) -> Option<u64> {
    // one CMCD parser for client and server (vodlab-cmcd); a bare `CMCD:`
    // header line, which some scripts carry, is read too
    let header = |name: &str| {
        r.headers.iter().find_map(|h| {
            h.split_once(':')
                .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim())
        })
    };
    let br = vodlab_cmcd::Cmcd::from_request(&r.path, header)
        .br
        .filter(|&k| k > 0)
        .or_else(|| header("cmcd").and_then(|v| vodlab_cmcd::Cmcd::parse(v).br))
        .filter(|&k| k > 0);
    if let Some(k) = br {
        return Some(k.saturating_mul(1000));
    }
    session_bps.filter(|&b| b > 0)
}

/// The delivery meter of one response (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResponseMeter {
    /// Body bytes of the first `B` seconds; 0 when the bit rate is unknown.
    need: u64,
    /// Bytes per window at the paced target.
    window_target: f64,
    issued: Time,
    received: u64,
    playback_at: Option<Time>,
    /// End of the current rate window (after the playback point).
    win_end: Time,
    win_bytes: u64,
}

impl ResponseMeter {
    /// A meter for a response issued at `issued`, its content at
    /// `bitrate_bps` (`None`: unknown), a client buffer of `buffer` and a
    /// paced target of `pace_target` × the bit rate.
    pub fn new(bitrate_bps: Option<u64>, buffer: Duration, pace_target: f64, issued: Time) -> Self {
        let bps = bitrate_bps.unwrap_or(0) as f64;
        let need = (bps * buffer.as_secs_f64() / 8.0).ceil().max(0.0) as u64;
        let need = if bps > 0.0 { need.max(1) } else { 0 };
        Self {
            need,
            window_target: pace_target.max(0.0) * bps * RATE_WINDOW.as_secs_f64() / 8.0,
            issued,
            received: 0,
            playback_at: None,
            win_end: issued,
            win_bytes: 0,
        }
    }

    /// Body bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The playback latency as it stands.
    pub fn playback(&self) -> Playback {
        match (self.need, self.playback_at) {
            (0, _) => Playback::NoBitRate,
            (_, None) => Playback::Short,
            (_, Some(t)) => Playback::After(t.saturating_duration_since(self.issued)),
        }
    }

    /// `n` body bytes arrived at `t` (times of one response never decrease);
    /// finished windows are appended to `out`.
    #[inline]
    pub fn on_body(&mut self, t: Time, n: u64, out: &mut Vec<WindowRun>) {
        self.received += n;
        if self.need == 0 {
            return;
        }
        if self.playback_at.is_none() {
            if self.received >= self.need {
                // bytes of the read that completed the buffer belong to the burst
                self.playback_at = Some(t);
                self.win_end = t + RATE_WINDOW;
                self.win_bytes = 0;
            }
            return;
        }
        if t > self.win_end {
            self.close_windows(t, out);
        }
        self.win_bytes += n;
    }

    /// The response ended at `t` (its last byte): a window ending exactly at
    /// `t` is complete and reported; a partial one is dropped.
    pub fn finish(&mut self, t: Time, out: &mut Vec<WindowRun>) {
        if self.playback_at.is_none() || self.window_target <= 0.0 {
            return;
        }
        if t > self.win_end {
            self.close_windows(t, out);
        }
        if t == self.win_end {
            self.emit(self.win_bytes, 1, out);
            self.win_bytes = 0;
            self.win_end += RATE_WINDOW;
        }
    }

    /// Closes the current window and every empty one before the window
    /// holding `t` (> `win_end`), in O(1).
    fn close_windows(&mut self, t: Time, out: &mut Vec<WindowRun>) {
        self.emit(self.win_bytes, 1, out);
        self.win_bytes = 0;
        let w = RATE_WINDOW.as_nanos() as u64;
        let d = (t - self.win_end).as_nanos().min(u128::from(u64::MAX / 2)) as u64;
        let ahead = d.div_ceil(w); // t is in the `ahead`-th window after win_end
        let empty = ahead - 1;
        if empty > 0 {
            self.emit(0, empty.min(u64::from(u32::MAX)) as u32, out);
        }
        self.win_end += Duration::from_nanos(ahead.saturating_mul(w));
    }

    fn emit(&self, bytes: u64, count: u32, out: &mut Vec<WindowRun>) {
        if self.window_target <= 0.0 {
            return;
        }
        let ratio = bytes as f64 / self.window_target;
        let permille = (ratio * 1000.0).round().min(f64::from(MAX_RATIO_PERMILLE)) as u32;
        let within = (bytes as f64 - self.window_target).abs() <= 0.05 * self.window_target;
        match out.last_mut() {
            Some(last) if last.ratio_permille == permille && last.within == within => {
                last.count = last.count.saturating_add(count);
            }
            _ => out.push(WindowRun {
                ratio_permille: permille,
                within,
                count,
            }),
        }
    }
}

/// Body bytes of one session per 100 ms window of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggregateMeter {
    epoch: Time,
    index: u64,
    bytes: u64,
}

impl AggregateMeter {
    /// Windows count from `epoch` (the run's start).
    pub fn new(epoch: Time) -> Self {
        Self {
            epoch,
            index: 0,
            bytes: 0,
        }
    }

    /// `n` bytes arrived at `t`; a window the session has left is appended
    /// to `out` as `(window index, bytes)`.
    #[inline]
    pub fn on_body(&mut self, t: Time, n: u64, out: &mut Vec<(u64, u64)>) {
        let i = window_index(t.saturating_duration_since(self.epoch));
        if i != self.index {
            self.flush(out);
            self.index = i;
        }
        self.bytes += n;
    }

    /// Appends the current window's bytes, if any.
    pub fn flush(&mut self, out: &mut Vec<(u64, u64)>) {
        if self.bytes > 0 {
            out.push((self.index, self.bytes));
            self.bytes = 0;
        }
    }
}

/// What a session's meters produced since the executor last took it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryOut {
    /// Finished rate windows of measured responses.
    pub windows: Vec<WindowRun>,
    /// `(100 ms window index from the run's epoch, body bytes)`.
    pub aggregate: Vec<(u64, u64)>,
}

impl DeliveryOut {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.windows.len() + self.aggregate.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves everything of `o` to the end of this one.
    pub fn append(&mut self, o: &mut DeliveryOut) {
        self.windows.append(&mut o.windows);
        self.aggregate.append(&mut o.aggregate);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_index_is_100ms() {
        assert_eq!(window_index(Duration::from_millis(99)), 0);
        assert_eq!(window_index(Duration::from_millis(100)), 1);
        assert_eq!(window_index(Duration::from_millis(12_345)), 123);
    }

    #[test]
    fn empty_windows_are_one_run() {
        let t0 = Time::ZERO;
        // 8 kbit/s: 100 bytes per window, buffer 1 s = 1000 bytes
        let mut m = ResponseMeter::new(Some(8000), Duration::from_secs(1), 1.0, t0);
        let mut out = Vec::new();
        m.on_body(t0 + Duration::from_millis(10), 1000, &mut out);
        assert!(matches!(m.playback(), Playback::After(d) if d == Duration::from_millis(10)));
        m.on_body(t0 + Duration::from_millis(110), 100, &mut out); // window 0, on target
                                                                   // windows (110, 210] .. (410, 510] empty, (510, 610] partial
        m.on_body(t0 + Duration::from_millis(555), 50, &mut out);
        assert_eq!(
            out,
            vec![
                WindowRun {
                    ratio_permille: 1000,
                    within: true,
                    count: 1
                },
                WindowRun {
                    ratio_permille: 0,
                    within: false,
                    count: 4
                },
            ]
        );
        m.finish(t0 + Duration::from_millis(555), &mut out);
        assert_eq!(out.len(), 2, "the partial last window is dropped");
    }

    #[test]
    fn cmcd_bit_rate_wins_over_the_session() {
        let mut r = vodlab_workload::script::Request::get("/v");
        assert_eq!(request_bitrate(&r, Some(400_000)), Some(400_000));
        r.headers.push("CMCD-Object: d=4004,br=3200,ot=v".into());
        assert_eq!(request_bitrate(&r, Some(400_000)), Some(3_200_000));
        let q = vodlab_workload::script::Request::get("/v?CMCD=bl%3D21300%2Cbr%3D800");
        assert_eq!(request_bitrate(&q, None), Some(800_000));
        // a header beats the query; br in another CMCD header, or in a bare
        // `CMCD:` line, counts; br=0 falls back to the session's rate
        let mut h = q.clone();
        h.headers.push("CMCD-Request: br=1200,bl=300".into());
        assert_eq!(request_bitrate(&h, None), Some(1_200_000));
        let mut bare = vodlab_workload::script::Request::get("/v");
        bare.headers.push("cmcd: br=500".into());
        assert_eq!(request_bitrate(&bare, None), Some(500_000));
        let mut zero = vodlab_workload::script::Request::get("/v");
        zero.headers.push("CMCD-Object: br=0".into());
        assert_eq!(request_bitrate(&zero, Some(400_000)), Some(400_000));
        assert_eq!(
            request_bitrate(&vodlab_workload::script::Request::get("/v"), None),
            None
        );
    }
}
