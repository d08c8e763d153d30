//! Service-time physics of one hard-disk request, given the drive's state
//! when service begins. Pure functions of model time (ns).

use crate::geometry::{SeekCurve, Zones};
use crate::profile::{HddParams, Rotation};

/// How a request was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceKind {
    /// Command overhead + seek + rotational latency + transfer.
    Positioned,
    /// Continued the previous media read (or the drive's read-ahead stream):
    /// transfer only, or a rotational wait when it came after the stream
    /// had stopped.
    Sequential,
    /// Entirely from the drive's read-ahead cache: overhead + interface
    /// transfer.
    CacheHit,
    /// Solid-state drive: latency + bandwidth.
    Flash,
}

/// The drive's media stream: the last media read ended at `end` at time
/// `t_end`; with a read-ahead segment the head keeps reading into the cache
/// until `limit`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stream {
    pub end: u64,
    pub t_end: f64,
    pub limit: u64,
}

/// The outcome of planning one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Plan {
    pub finish: f64,
    pub kind: ServiceKind,
    /// Seek distance, bytes (0 when no seek).
    pub seek_distance: u64,
    /// Time before the first byte moves: overhead + seek + rotation, ns.
    pub positioning: f64,
    pub stream: Stream,
}

/// Static parameters and mutable head/stream state of a hard disk.
#[derive(Debug, Clone)]
pub(crate) struct Hdd {
    pub zones: Zones,
    pub seek: SeekCurve,
    pub rev_ns: f64,
    pub phase_ns: f64,
    pub overhead_ns: f64,
    /// bytes/ns
    pub iface: f64,
    pub seg_bytes: u64,
    pub rotation: Rotation,
    pub capacity: u64,
    pub head: u64,
    pub stream: Option<Stream>,
}

impl Hdd {
    pub fn new(h: &HddParams, rotation: Rotation, phase_frac: f64, head: u64) -> Hdd {
        let rev_ns = 60e9 / h.rpm;
        Hdd {
            zones: Zones::new(h),
            seek: SeekCurve::fit(h).expect("validated profile"),
            rev_ns,
            phase_ns: phase_frac * rev_ns,
            overhead_ns: h.command_overhead_ms * 1e6,
            iface: h.interface_mb_s * 1e-3,
            seg_bytes: h.cache_segment_kib * 1024,
            rotation,
            capacity: h.capacity_bytes,
            head: head.min(h.capacity_bytes.saturating_sub(1)),
            stream: None,
        }
    }

    /// Wait from `t` until address `a` is under the head.
    fn rot_wait(&self, a: u64, t: f64) -> f64 {
        match self.rotation {
            Rotation::Expected => self.rev_ns / 2.0,
            Rotation::Modelled => {
                (self.zones.tau(a as f64) - (t + self.phase_ns)).rem_euclid(self.rev_ns)
            }
        }
    }

    fn limit(&self, b: u64) -> u64 {
        b.saturating_add(self.seg_bytes).min(self.capacity)
    }

    /// Plans `[a, a + len)` with service starting at `t_s`; `eps` is the
    /// slack (one wall nanosecond in model time) under which a request
    /// counts as queued before the previous one finished.
    pub fn plan(&self, a: u64, len: u64, t_s: f64, eps: f64) -> Plan {
        let b = a + len;
        let z = &self.zones;
        if let Some(s) = self.stream.filter(|s| s.end <= a && a <= s.limit) {
            let t_full = s.t_end + z.transfer_ns(s.end, s.limit);
            let t_b = s.t_end + z.transfer_ns(s.end, b);
            let running = t_s <= t_full + eps;
            if b <= s.limit {
                if t_b <= t_s {
                    // Already in the cache.
                    let finish = t_s + self.overhead_ns + len as f64 / self.iface;
                    let limit = if running {
                        s.limit.max(self.limit(b))
                    } else {
                        s.limit
                    };
                    return Plan {
                        finish,
                        kind: ServiceKind::CacheHit,
                        seek_distance: 0,
                        positioning: self.overhead_ns,
                        stream: Stream { limit, ..s },
                    };
                }
                // The stream is on its way to `b`: the data moves as it arrives.
                return Plan {
                    finish: t_b,
                    kind: ServiceKind::Sequential,
                    seek_distance: 0,
                    positioning: (t_b - t_s - z.transfer_ns(a, b)).max(0.0),
                    stream: Stream {
                        end: b,
                        t_end: t_b,
                        limit: self.limit(b),
                    },
                };
            }
            if running {
                // Queued in time: the head keeps streaming.
                return Plan {
                    finish: t_b.max(t_s),
                    kind: ServiceKind::Sequential,
                    seek_distance: 0,
                    positioning: (t_b - t_s - z.transfer_ns(a, b)).max(0.0),
                    stream: Stream {
                        end: b,
                        t_end: t_b.max(t_s),
                        limit: self.limit(b),
                    },
                };
            }
            // The stream stopped at `limit` before this request came: the
            // head is still on that track; wait for the sector to come round.
            let from = a.max(s.limit);
            let ready = t_s + self.overhead_ns;
            let wait = self.rot_wait(from, ready);
            let finish = ready + wait + z.transfer_ns(from, b);
            return Plan {
                finish,
                kind: ServiceKind::Sequential,
                seek_distance: 0,
                positioning: self.overhead_ns + wait,
                stream: Stream {
                    end: b,
                    t_end: finish,
                    limit: self.limit(b),
                },
            };
        }
        let head = self.stream.map_or(self.head, |s| s.end);
        let d = a.abs_diff(head);
        let track = z.rate(a as f64) * self.rev_ns;
        let (seek, seek_distance) = if (d as f64) < track {
            (0.0, 0)
        } else {
            (self.seek.time_ns(d as f64 / self.capacity as f64), d)
        };
        let ready = t_s + self.overhead_ns + seek;
        let wait = self.rot_wait(a, ready);
        let finish = ready + wait + z.transfer_ns(a, b);
        Plan {
            finish,
            kind: ServiceKind::Positioned,
            seek_distance,
            positioning: self.overhead_ns + seek + wait,
            stream: Stream {
                end: b,
                t_end: finish,
                limit: self.limit(b),
            },
        }
    }

    /// Commits a plan: the head and stream move.
    pub fn commit(&mut self, p: &Plan) {
        self.stream = Some(p.stream);
        self.head = p.stream.end;
    }

    /// Current head position (end of the last media read).
    pub fn head(&self) -> u64 {
        self.stream.map_or(self.head, |s| s.end)
    }
}
