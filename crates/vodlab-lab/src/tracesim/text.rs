//! What `vodlab simulate --prefetch` prints: a run's table and a replay's
//! comparison, as text (the binary prints it).

use std::fmt::Write as _;

use vodlab_prefetch::replay::Replay;
use vodlab_prefetch::PolicySpec;

use super::{TraceRun, TraceSettings};

impl TraceRun {
    /// The table of the run over `s`: a line of totals, notes, a header and
    /// a line per policy, each ending in a newline.
    pub fn table(&self, s: &TraceSettings) -> String {
        let (lines, secs, rows) = (self.lines, self.secs, &self.rows);
        let max_prefetch = s.sim.max_prefetch;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{lines} log lines, {} chains, {} policies in {secs:.2} s ({:.0} lines/s)",
            rows.first().map_or(0, |r| r.result.chains),
            rows.len(),
            lines as f64 / secs.max(1e-9)
        );
        if let Some(p) = rows.iter().find(|r| r.size > max_prefetch) {
            let _ = writeln!(
                out,
                "  note: {} reads at most --max-prefetch {} per read, as serve does; raise it to read whole {} prefetches",
                p.spec,
                vodlab_units::format_size(max_prefetch),
                vodlab_units::format_size(p.size)
            );
        }
        if let Some(p) = &self.mechanical {
            let _ = writeln!(
                out,
                "  utilisation: linear model (thesis) and mechanical model ({}), busiest drive in its busiest {} s bucket",
                p,
                s.sim.bucket_s
            );
        }
        if let Some(n) = s.sim.next_object {
            let _ = writeln!(
                out,
                "  next object: each session's next object's first {} read beside the policy (hit %: ranges found resident)",
                vodlab_units::format_size(n)
            );
        }
        let next_head = if s.sim.next_object.is_some() {
            format!(" {:>9} {:>9} {:>6}", "next objs", "next GB", "hit %")
        } else {
            String::new()
        };
        let mech_head = if self.mechanical.is_some() {
            format!(" {:>9} {:>9} {:>8}", "mech peak", "mech mean", "svc ms")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {:<14} {:>10}  {:>9} {:>9} {:>11} {:>11} {:>12} {:>10} {:>9} {:>8}{mech_head}{next_head}",
            "policy",
            "size MB",
            "peak util",
            "mean util",
            "peak mem GB",
            "mean mem GB",
            "device GB",
            "prefetches",
            "evictions",
            "end MB"
        );
        for r in rows {
            let mech = match &r.mechanical {
                Some(m) => format!(
                    " {:>8.1}% {:>8.1}% {:>8.2}",
                    100.0 * m.peak_utilisation,
                    100.0 * m.mean_utilisation,
                    m.mean_service_ms
                ),
                None => String::new(),
            };
            let next = if s.sim.next_object.is_some() {
                format!(
                    " {:>9} {:>9.3} {:>5.1}%",
                    r.result.next_object_reads,
                    r.result.next_object_bytes as f64 / 1e9,
                    100.0 * r.result.hits as f64 / r.result.decisions.max(1) as f64
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {:<14} {:>10.3}  {:>8.1}% {:>8.1}% {:>11.3} {:>11.3} {:>12.3} {:>10} {:>9} {:>8}{mech}{next}",
                r.policy,
                r.size as f64 / 1e6,
                100.0 * r.result.peak_utilisation,
                100.0 * r.result.mean_utilisation,
                r.result.peak_memory_bytes as f64 / 1e9,
                r.result.mean_memory_bytes as f64 / 1e9,
                r.result.device_bytes as f64 / 1e9,
                r.result.prefetches,
                r.result.evictions,
                // where auto's size ended; the others' is their size
                r.result
                    .auto_final_bytes
                    .map_or_else(|| "-".to_string(), |b| format!("{:.3}", b as f64 / 1e6))
            );
        }
        out
    }
}

/// What a replay of `n` events of the file `name` under `spec` found: a
/// line of counts, then "every decision alike" or the first ten that
/// differ, each line ending in a newline.
pub fn replay_text(name: &str, n: usize, spec: &PolicySpec, r: &Replay) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{name}: {n} events; {} ranges decided ({} prefetches), {} feedback events; policy {spec}",
        r.decisions, r.prefetches, r.feedback
    );
    if r.mismatches.is_empty() {
        let _ = writeln!(out, "every decision alike");
    } else {
        let _ = writeln!(out, "{} decisions differ; the first:", r.mismatches.len());
        for m in r.mismatches.iter().take(10) {
            let _ = writeln!(
                out,
                "  event {}: recorded prefetch {:?} head {} evicted {:?}; replayed prefetch {:?} head {} evicted {:?}",
                m.index, m.recorded.0, m.recorded.1, m.recorded.2, m.replayed.0, m.replayed.1, m.replayed.2
            );
        }
    }
    out
}
