//! `--prefetch-log FILE.csv`: the automatic prefetch size's intervals as
//! CSV, one row per adjust interval (what the thesis's Figures 4.3 and 4.4
//! plot), header first, flushed after every row. Fed from the controller's
//! state ([`AutoView`]): each call writes the intervals not written yet.

use std::io::{self, Write};

use crate::auto::{AutoView, IntervalRecord};

/// The header line's columns, in order.
pub const COLUMNS: [&str; 12] = [
    "t_s",
    "p_bytes",
    "target_bytes",
    "score",
    "mspt",
    "miss_ratio",
    "busy",
    "evicted_ratio",
    "evictions",
    "eviction_time_s",
    "bitrate_kbps",
    "decision",
];

/// Writes interval records as CSV rows (see the module note).
#[derive(Debug)]
pub struct IntervalCsv<W: Write> {
    out: W,
    /// Intervals written so far (the controller's `intervals` count).
    written: u64,
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| x.to_string())
}

/// One record as a CSV row (no newline); an unmeasured value is empty.
pub fn row(r: &IntervalRecord) -> String {
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{}",
        r.t_s,
        r.p,
        r.target,
        opt(r.score),
        opt(r.mspt),
        opt(r.miss_ratio),
        r.busy,
        r.evicted_ratio,
        r.evictions,
        opt(r.eviction_time_s),
        opt(r.bitrate_kbps),
        r.decision.name()
    )
}

impl<W: Write> IntervalCsv<W> {
    /// Writes the header and flushes.
    pub fn new(mut out: W) -> io::Result<Self> {
        writeln!(out, "{}", COLUMNS.join(","))?;
        out.flush()?;
        Ok(Self { out, written: 0 })
    }

    /// Writes the intervals of `view` not written yet, flushing after each;
    /// returns how many. Intervals no longer in the view's log (more than
    /// [`crate::auto::RECORDS_KEPT`] since the last call) are skipped.
    pub fn write_new(&mut self, view: &AutoView) -> io::Result<usize> {
        let new = view.intervals.saturating_sub(self.written);
        let kept = view.log.len() as u64;
        let rows = &view.log[(kept - new.min(kept)) as usize..];
        for r in rows {
            writeln!(self.out, "{}", row(r))?;
            self.out.flush()?;
        }
        self.written = view.intervals;
        Ok(rows.len())
    }

    /// The writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::auto::{Auto, AutoConfig};
    use crate::controller::PrefetchController;

    #[test]
    fn one_row_per_interval_in_virtual_time() {
        let cfg = AutoConfig {
            interval: Duration::from_secs(10),
            ramp: Duration::ZERO,
            busy: 0.5,
            ..AutoConfig::default()
        };
        let mut a = Auto::new(cfg);
        let t0 = Instant::now();
        let mut csv = IntervalCsv::new(Vec::new()).unwrap();
        let mut total = 0;
        for s in 0..=35u64 {
            let now = t0 + Duration::from_secs(s);
            if s > 0 {
                // busy 80 %: 0.8 s of reads per second, 1 MiB read per 2 MiB requested
                a.on_device_reads(now, 1 << 20, Duration::from_millis(800));
                let req = crate::controller::RequestInfo {
                    session: "s",
                    file: 1,
                    offset: 0,
                    length: 2 << 20,
                    file_size: 1 << 40,
                    bitrate_bps: Some(419_430),
                    resident: true,
                    open_ended: false,
                };
                let mut st = crate::controller::SessionState::default();
                a.on_request(now, &req, &mut st, None);
            }
            a.on_tick(now);
            total += csv.write_new(&a.view()).unwrap();
            // nothing twice
            assert_eq!(csv.write_new(&a.view()).unwrap(), 0);
        }
        assert_eq!(total as u64, a.view().intervals);
        assert_eq!(total, 3, "intervals end at 10, 20 and 30 s");
        let text = String::from_utf8(csv.into_inner()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], COLUMNS.join(","));
        assert_eq!(lines.len(), 4);
        for l in &lines[1..] {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), COLUMNS.len(), "{l}");
            let busy: f64 = f[6].parse().unwrap();
            assert!((busy - 0.8).abs() < 1e-9, "{l}");
            let miss: f64 = f[5].parse().unwrap();
            assert!((miss - 0.5).abs() < 1e-9, "{l}");
            let (score, mspt): (f64, f64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
            assert!((score - mspt * miss).abs() < 1e-9, "{l}");
            // 0.8 s per MiB = 100 ms per 128 KiB
            assert!((mspt - 100.0).abs() < 1e-6, "{l}");
        }
        // the first interval found no neighbour measured: it tries the larger size
        assert!(lines[1].ends_with(",try_larger"), "{}", lines[1]);
        let p: u64 = lines[1].split(',').nth(1).unwrap().parse().unwrap();
        let target: u64 = lines[1].split(',').nth(2).unwrap().parse().unwrap();
        assert_eq!(target, p + cfg.step);
    }

    #[test]
    fn unmeasured_values_are_empty_fields() {
        let mut a = Auto::new(AutoConfig {
            interval: Duration::from_secs(1),
            ..AutoConfig::default()
        });
        let t0 = Instant::now();
        a.on_tick(t0);
        a.on_tick(t0 + Duration::from_secs(1));
        let v = a.view();
        assert_eq!(v.intervals, 1);
        let r = row(&v.log[0]);
        // idle: inactive, no score, mspt, miss ratio, eviction time or rate
        assert!(r.ends_with(",inactive"), "{r}");
        let f: Vec<&str> = r.split(',').collect();
        assert_eq!((f[3], f[4], f[5], f[9], f[10]), ("", "", "", "", ""));
    }
}
