//! Statistics of a modelled drive: counts, seek distances, busy time, queue
//! depth and HdrHistograms of service and response times. All times are
//! **model time** (wall time × the compression factor k), so runs at
//! different k compare directly. Serde-serializable and mergeable.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Highest value a histogram records, µs (one hour).
const HIST_MAX_US: u64 = 3_600_000_000;

/// An HdrHistogram of microseconds (1 µs to 1 h, 3 significant digits) that
/// serializes as its recorded `[value, count]` pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct MicrosHistogram(pub Histogram<u64>);

impl Default for MicrosHistogram {
    fn default() -> Self {
        MicrosHistogram(Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("valid bounds"))
    }
}

impl MicrosHistogram {
    /// Records a duration given in nanoseconds (clamped to the bounds).
    pub fn record_ns(&mut self, ns: f64) {
        let us = (ns / 1000.0).round().clamp(1.0, HIST_MAX_US as f64) as u64;
        self.0.saturating_record(us);
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &MicrosHistogram) {
        self.0.add(&other.0).expect("same bounds");
    }
}

#[derive(Serialize, Deserialize)]
struct HistRepr {
    /// `[value_us, count]` of every non-empty bucket.
    buckets: Vec<(u64, u64)>,
    /// Convenience summary (ignored when reading back).
    #[serde(default, skip_deserializing)]
    mean_us: f64,
    #[serde(default, skip_deserializing)]
    p50_us: u64,
    #[serde(default, skip_deserializing)]
    p99_us: u64,
    #[serde(default, skip_deserializing)]
    max_us: u64,
}

impl Serialize for MicrosHistogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let h = &self.0;
        HistRepr {
            buckets: h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for MicrosHistogram {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = HistRepr::deserialize(d)?;
        let mut h = MicrosHistogram::default();
        for (v, c) in r.buckets {
            h.0.record_n(v.clamp(1, HIST_MAX_US), c)
                .map_err(serde::de::Error::custom)?;
        }
        Ok(h)
    }
}

/// Counters and distributions of one drive (or, merged, of several).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskStats {
    /// Requests submitted.
    pub submitted: u64,
    /// Requests completed.
    pub reads: u64,
    /// Bytes of completed requests.
    pub bytes: u64,
    /// Completed requests that needed a seek (distance ≥ one track).
    pub seeks: u64,
    /// Sum of those seeks' distances, bytes.
    pub seek_distance_bytes: u128,
    /// Completed requests that continued the previous media read (transfer
    /// only, or a rotational wait when they came too late without cache).
    pub sequential: u64,
    /// Completed requests served entirely from the drive's read-ahead cache.
    pub cache_hits: u64,
    /// Time with at least one request in service, model ns.
    pub busy_ns: f64,
    /// Observed time span (from the first submission to the latest `now`),
    /// model ns.
    pub elapsed_ns: f64,
    /// ∫ (queued + in service) dt, model ns · requests.
    pub depth_area: f64,
    /// Highest number of requests queued or in service at once.
    pub max_depth: u64,
    /// Service time (start of service to completion), µs.
    pub service_us: MicrosHistogram,
    /// Response time (submission to completion), µs.
    pub response_us: MicrosHistogram,
}

impl DiskStats {
    /// Mean seek distance over requests that seeked, bytes (0 without seeks).
    pub fn mean_seek_distance(&self) -> f64 {
        if self.seeks == 0 {
            0.0
        } else {
            self.seek_distance_bytes as f64 / self.seeks as f64
        }
    }

    /// Fraction of the observed time the drive was busy.
    pub fn busy_fraction(&self) -> f64 {
        if self.elapsed_ns <= 0.0 {
            0.0
        } else {
            (self.busy_ns / self.elapsed_ns).min(1.0)
        }
    }

    /// Time-averaged number of requests queued or in service.
    pub fn mean_depth(&self) -> f64 {
        if self.elapsed_ns <= 0.0 {
            0.0
        } else {
            self.depth_area / self.elapsed_ns
        }
    }

    /// Throughput of completed requests over the observed time, MB/s (10⁶).
    pub fn throughput_mb_s(&self) -> f64 {
        if self.elapsed_ns <= 0.0 {
            0.0
        } else {
            self.bytes as f64 / self.elapsed_ns * 1e3
        }
    }

    /// Adds another drive's (or another interval's) statistics: counts,
    /// times and histograms add, `max_depth` takes the maximum. Busy and
    /// depth fractions of the result are averages weighted by time.
    pub fn merge(&mut self, o: &DiskStats) {
        self.submitted += o.submitted;
        self.reads += o.reads;
        self.bytes += o.bytes;
        self.seeks += o.seeks;
        self.seek_distance_bytes += o.seek_distance_bytes;
        self.sequential += o.sequential;
        self.cache_hits += o.cache_hits;
        self.busy_ns += o.busy_ns;
        self.elapsed_ns += o.elapsed_ns;
        self.depth_area += o.depth_area;
        self.max_depth = self.max_depth.max(o.max_depth);
        self.service_us.merge(&o.service_us);
        self.response_us.merge(&o.response_us);
    }
}
