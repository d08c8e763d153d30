//! The comparison table of a compare.json (summary.txt): each server's
//! failure-free rate, against the peer (nginx; over h3, where no Debian
//! web server speaks it, ngtcp2's example server) and the sequential-read
//! bound, with the figures at that rate.

use super::CompareFile;
use crate::capacity::SearchOutcome;

/// The table of `file`, one line per server, and what its figures mean.
pub fn summary(file: &CompareFile) -> String {
    let peer = if file.protocol.as_deref() == Some("h3") {
        "ngtcp2"
    } else {
        "nginx"
    };
    let nginx = file.server(peer).and_then(|r| r.answer.capacity);
    let bound = file.seqread.as_ref().map(|s| s.mb_s);
    let mut s = String::new();
    let w = file
        .servers
        .iter()
        .map(|r| r.server.len())
        .max()
        .unwrap_or(0)
        .max(15);
    s += &format!(
        "{:<w$} {:>12} {:>8} {:>8} {:>6} {:>7} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}\n",
        "server",
        "sessions/s",
        format!("x {peer}"),
        "viewers",
        "peak",
        "Gbit/s",
        "deliv MB/s",
        "disk MB/s",
        "of seq",
        "read KiB",
        "ms/read",
        "CPU s/GB"
    );
    let f = |x: Option<f64>, d: usize| x.map_or("-".to_string(), |v| format!("{v:.d$}"));
    for r in &file.servers {
        let c = r.at_capacity.clone().unwrap_or_default();
        let limited = matches!(r.outcome, SearchOutcome::ClientLimited { .. });
        let cap = match (r.answer.capacity, r.answer.lowest_failed) {
            (Some(c), _) if limited => format!(">={c:.3}"),
            (Some(c), _) => format!("{c:.3}"),
            (None, Some(f)) => format!("<{f:.3}"),
            _ => "-".into(),
        };
        let note = match (&r.outcome, &r.error) {
            (SearchOutcome::Skipped { reason }, _) => format!("  (skipped: {reason})"),
            (SearchOutcome::ClientLimited { rate, .. }, _) => {
                format!("  (load generator INVALID at {rate:.3}/s: a lower bound)")
            }
            (_, Some(e)) => format!("  (error: {e})"),
            _ => String::new(),
        };
        s += &format!(
            "{:<w$} {:>12} {:>8} {:>8} {:>6} {:>7} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9}{}\n",
            r.server,
            cap,
            f(r.answer.capacity.zip(nginx).map(|(a, b)| a / b), 2),
            f(c.mean_active_sessions, 0),
            f(c.peak_active_sessions.map(|p| p as f64), 0),
            f(c.delivered_gbit_s, 2),
            f(c.delivered_mb_s, 1),
            f(c.disk_mb_s, 1),
            f(c.disk_mb_s.zip(bound).map(|(d, b)| 100.0 * d / b), 0)
                + if c.disk_mb_s.is_some() && bound.is_some() {
                    "%"
                } else {
                    ""
                },
            f(c.mean_read_kib, 0),
            f(c.device_ms_per_read, 1),
            f(c.server_cpu_s_per_gb, 2),
            note,
        );
    }
    if let Some(p) = &file.protocol {
        s += &format!("protocol: {p} (every server listened for it)\n");
    }
    if let Some(b) = bound {
        s += &format!(
            "sequential-read bound (vodlab fileset seqread, cold, same box): {b:.1} MB/s\n"
        );
    }
    match &file.disk {
        Some(d) => s += &format!(
            "figures at each server's highest failure-free rate (viewers: concurrent sessions, mean over the measured window; peak: most at once); disk = the emulated drive {} (model time, k = {}): its MB/s, mean read and service time per read, each run from a fresh mount\n",
            d.profile, d.time_compression
        ),
        None => s += "figures at each server's highest failure-free rate (viewers: concurrent sessions, mean over the measured window; peak: most at once); disk = reads charged to the box's cgroup\n",
    }
    s
}
