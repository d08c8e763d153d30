//! Plain progress lines of a long pass over a set (for a log, a pipe, CI,
//! where no bar is drawn): when one is due and its text.

use std::time::{Duration, Instant};

/// What a pass counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes (shown in GiB and MiB/s).
    Bytes,
    /// Files.
    Files,
}

/// Most time between two plain progress lines.
pub const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// When to print a plain progress line: at the first report, each time
/// another tenth is done, and at least every `every` in between.
#[derive(Debug)]
pub struct ProgressLines {
    start: Instant,
    last: Instant,
    /// Tenths done at the last line printed (`None`: none printed yet).
    tenths: Option<u64>,
    every: Duration,
}

impl ProgressLines {
    /// Lines of a pass that started at `start`, at least every `every`.
    pub fn new(start: Instant, every: Duration) -> Self {
        ProgressLines {
            start,
            last: start,
            tenths: None,
            every,
        }
    }

    /// The line to print for `done` of `total` at `now`, if one is due.
    pub fn line(
        &mut self,
        what: &str,
        unit: Unit,
        done: u64,
        total: u64,
        now: Instant,
    ) -> Option<String> {
        if total == 0 {
            return None;
        }
        let done = done.min(total);
        let tenths = done * 10 / total;
        let due = match self.tenths {
            None => true,
            Some(t) => tenths > t || now.duration_since(self.last) >= self.every,
        };
        if !due {
            return None;
        }
        self.tenths = Some(tenths);
        self.last = now;
        let pct = 100.0 * done as f64 / total as f64;
        let secs = now.duration_since(self.start).as_secs_f64();
        let rate = done as f64 / secs.max(1e-9);
        let eta = if done > 0 && done < total && secs > 0.0 {
            format!(", eta {:.0} s", (total - done) as f64 / rate)
        } else {
            String::new()
        };
        Some(match unit {
            Unit::Bytes => format!(
                "{what}: {pct:.0} % ({:.2} of {:.2} GiB, {:.0} MiB/s{eta})",
                gib(done),
                gib(total),
                rate / 1048576.0
            ),
            Unit::Files => format!("{what}: {pct:.0} % ({done} of {total} files{eta})"),
        })
    }
}

/// Bytes in GiB.
pub fn gib(b: u64) -> f64 {
    b as f64 / 1073741824.0
}

#[cfg(test)]
mod tests {
    use super::{ProgressLines, Unit};
    use std::time::{Duration, Instant};

    /// Feeds `steps` of (done, seconds after the start) and returns the
    /// lines printed.
    fn lines(total: u64, steps: &[(u64, u64)]) -> Vec<String> {
        let t0 = Instant::now();
        let mut p = ProgressLines::new(t0, Duration::from_secs(10));
        steps
            .iter()
            .filter_map(|&(done, s)| {
                p.line(
                    "writing",
                    Unit::Bytes,
                    done,
                    total,
                    t0 + Duration::from_secs(s),
                )
            })
            .collect()
    }

    #[test]
    fn a_line_at_the_start_and_at_each_tenth() {
        let total = 1000 << 20;
        // 1 MiB steps, 100 MiB/s
        let steps: Vec<(u64, u64)> = (0..=1000u64).map(|i| (i << 20, i / 100)).collect();
        let l = lines(total, &steps);
        assert_eq!(l.len(), 11, "{l:#?}");
        assert!(
            l[0].starts_with("writing: 0 % (0.00 of 0.98 GiB"),
            "{}",
            l[0]
        );
        assert!(
            l[5].starts_with("writing: 50 % (0.49 of 0.98 GiB"),
            "{}",
            l[5]
        );
        assert!(l[5].contains("100 MiB/s, eta 5 s"), "{}", l[5]);
        assert!(l[10].starts_with("writing: 100 %"), "{}", l[10]);
        assert!(!l[10].contains("eta"), "{}", l[10]);
    }

    #[test]
    fn a_slow_pass_gets_a_line_every_ten_seconds_between_tenths() {
        // 1 % per 5 s: 10 % takes 50 s, so lines at 0, 10, 20, ... s
        let steps: Vec<(u64, u64)> = (0..=20u64).map(|i| (i, i * 5)).collect();
        let l = lines(100, &steps);
        assert_eq!(l.len(), 11, "{l:#?}");
        assert!(l[1].starts_with("writing: 2 %"), "{}", l[1]);
        assert!(l.iter().filter(|s| s.starts_with("writing: 10 %")).count() == 1);
    }

    #[test]
    fn nothing_to_do_prints_nothing_and_files_are_counted() {
        assert!(lines(0, &[(0, 0), (0, 1)]).is_empty());
        let t0 = Instant::now();
        let mut p = ProgressLines::new(t0, Duration::from_secs(10));
        let l = p
            .line("encoding", Unit::Files, 3, 4, t0 + Duration::from_secs(3))
            .unwrap();
        assert_eq!(l, "encoding: 75 % (3 of 4 files, eta 1 s)");
    }
}
