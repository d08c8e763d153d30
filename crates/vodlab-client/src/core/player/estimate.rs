//! Throughput and latency estimates: two exponentially weighted moving
//! averages with zero-bias correction, as dash.js (`ThroughputModel.js`) and
//! Sabre (`Ewma`) compute them.
//!
//! - Throughput: each sample weighs its transfer time; with half-life `h`
//!   ms the old value is multiplied by `0.5^(transfer_ms / h)`; each average
//!   is divided by `1 − 0.5^(total transfer ms / h)`; the estimate is the
//!   **smaller** of the averages.
//! - Latency: one sample per download, half-lives `h / segment_ms` samples,
//!   the same correction, the **larger** of the averages.

/// One throughput sample with the server's estimate mixed in, as dash.js
/// does with CMSD-Dynamic `etp` (`ThroughputHistory.push`, its setting
/// `streaming.cmsd.abr.etpWeightRatio`): `measured × (1 − w) + etp × w`
/// when the response carried an `etp` and `0 < w ≤ 1`; otherwise the
/// measured sample as it is. kbit/s in and out.
pub fn blend_etp(measured_kbps: f64, etp_kbps: Option<f64>, weight: f64) -> f64 {
    match etp_kbps {
        Some(etp) if weight > 0.0 && weight <= 1.0 && etp.is_finite() && etp >= 0.0 => {
            measured_kbps * (1.0 - weight) + etp * weight
        }
        _ => measured_kbps,
    }
}

/// The two-EWMA estimator (any number of half-lives; the usual two are 3 s
/// and 8 s).
#[derive(Debug, Clone)]
pub struct Ewma {
    half_life_ms: Vec<f64>,
    latency_half_life: Vec<f64>,
    tput: Vec<f64>,
    lat: Vec<f64>,
    weight_tput: f64,
    weight_lat: f64,
    throughput: Option<f64>,
    latency: Option<f64>,
}

impl Ewma {
    /// An estimator with the given half-lives (ms of transfer time); latency
    /// half-lives are these divided by `segment_ms` (in samples).
    pub fn new(half_life_ms: &[f64], segment_ms: f64) -> Self {
        Self {
            half_life_ms: half_life_ms.to_vec(),
            latency_half_life: half_life_ms.iter().map(|h| h / segment_ms).collect(),
            tput: vec![0.0; half_life_ms.len()],
            lat: vec![0.0; half_life_ms.len()],
            weight_tput: 0.0,
            weight_lat: 0.0,
            throughput: None,
            latency: None,
        }
    }

    /// Adds one completed download: its transfer time (ms, latency
    /// excluded), its throughput (kbit/s) and its latency (ms). A sample
    /// with no transfer time is ignored.
    pub fn push(&mut self, transfer_ms: f64, throughput_kbps: f64, latency_ms: f64) {
        if !(transfer_ms > 0.0 && throughput_kbps.is_finite()) {
            return;
        }
        for i in 0..self.half_life_ms.len() {
            let a = 0.5f64.powf(transfer_ms / self.half_life_ms[i]);
            self.tput[i] = a * self.tput[i] + (1.0 - a) * throughput_kbps;
            let a = 0.5f64.powf(1.0 / self.latency_half_life[i]);
            self.lat[i] = a * self.lat[i] + (1.0 - a) * latency_ms;
        }
        self.weight_tput += transfer_ms;
        self.weight_lat += 1.0;
        let mut t: Option<f64> = None;
        let mut l: Option<f64> = None;
        for i in 0..self.half_life_ms.len() {
            let z = 1.0 - 0.5f64.powf(self.weight_tput / self.half_life_ms[i]);
            let x = self.tput[i] / z;
            t = Some(t.map_or(x, |t| t.min(x)));
            let z = 1.0 - 0.5f64.powf(self.weight_lat / self.latency_half_life[i]);
            let y = self.lat[i] / z;
            l = Some(l.map_or(y, |l| l.max(y)));
        }
        self.throughput = t;
        self.latency = l;
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        (self.half_life_ms.capacity()
            + self.latency_half_life.capacity()
            + self.tput.capacity()
            + self.lat.capacity())
            * std::mem::size_of::<f64>()
    }

    /// The throughput estimate, kbit/s (none before the first sample).
    pub fn throughput(&self) -> Option<f64> {
        self.throughput
    }

    /// The latency estimate, ms (none before the first sample).
    pub fn latency(&self) -> Option<f64> {
        self.latency
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etp_is_mixed_in_by_its_weight_or_not_at_all() {
        // dash.js's rule: measured × (1 − w) + etp × w
        assert_eq!(blend_etp(8000.0, Some(1000.0), 0.5), 4500.0);
        assert_eq!(blend_etp(8000.0, Some(1000.0), 1.0), 1000.0);
        assert_eq!(blend_etp(8000.0, Some(1000.0), 0.25), 6250.0);
        // no etp, weight 0 (dash.js's default) or out of range: measured
        assert_eq!(blend_etp(8000.0, None, 0.5), 8000.0);
        assert_eq!(blend_etp(8000.0, Some(1000.0), 0.0), 8000.0);
        assert_eq!(blend_etp(8000.0, Some(1000.0), 1.5), 8000.0);
        assert_eq!(blend_etp(8000.0, Some(f64::NAN), 0.5), 8000.0);
    }

    #[test]
    fn a_constant_etp_at_weight_one_is_the_estimate() {
        // zero-bias correction: the average of equal samples is the sample
        let mut e = Ewma::new(&[3000.0, 8000.0], 4000.0);
        for measured in [50_000.0, 90_000.0, 20_000.0] {
            e.push(400.0, blend_etp(measured, Some(1200.0), 1.0), 2.0);
        }
        assert!((e.throughput().unwrap() - 1200.0).abs() < 1e-6);
    }
}
