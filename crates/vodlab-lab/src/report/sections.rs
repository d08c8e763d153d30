//! The report's sections, drawn from the typed files: a run's
//! [`Results`], a [`CapacityFile`] and a [`CompareFile`].

use vodlab_client::out::metrics::Summary;
use vodlab_client::Results;

use super::{bar_chart, box_chart, xy_chart, BoxStat, Page, Series, Style};
use crate::capacity::{CapacityFile, SearchOutcome};
use crate::compare::{CompareFile, Figures};
use crate::search::{Point, Verdict};
use crate::stats::MeanCi;

/// Renders one run's results.json (and its requests.csv, if given) into the page.
pub fn run_section(page: &mut Page, name: &str, r: &Results, requests_csv: Option<&str>) {
    page.heading(&format!("{name}: run figures"));
    if let Some(b) = r.banner() {
        for line in b.lines() {
            page.warn(&format!("{name}: {}", line.trim_start_matches("!! ")));
        }
    }
    let f = |x: f64| format!("{x:.2}");
    page.table(
        &[
            "measured sessions",
            "failed",
            "stalled",
            "throughput Mbit/s",
            "response p50 ms",
            "p99 ms",
            "start-up p50 s",
            "state",
        ],
        &[vec![
            format!(
                "{} (of {} started)",
                r.measured_sessions, r.started_sessions
            ),
            r.failed_sessions.to_string(),
            r.stalled_sessions.to_string(),
            f(r.throughput_mbit_per_s),
            f(r.response_time_ms.p50),
            f(r.response_time_ms.p99),
            f(r.startup_delay_s.p50),
            format!(
                "{}, {}",
                if r.complete { "complete" } else { "INCOMPLETE" },
                if r.valid { "valid" } else { "INVALID" }
            ),
        ]],
    );
    let cdfs: Vec<Series> = r
        .classes
        .iter()
        .filter_map(|(c, v)| {
            let pts: Vec<(f64, f64)> = v
                .response_time_cdf_ms
                .iter()
                .map(|&[q, ms]| (ms.max(1e-3), q))
                .collect();
            (!pts.is_empty()).then(|| Series::new(c.as_str(), pts))
        })
        .collect();
    if !cdfs.is_empty() {
        page.figure(
            &xy_chart(
                &format!("Response time CDF by client class ({name})"),
                "response time, ms (log)",
                "fraction of requests",
                &cdfs,
                Style::Line,
                true,
                true,
            ),
            "Send of the request to its last byte, measured sessions, per client class.",
        );
    }
    let boxes = |pick: fn(&vodlab_client::out::results::ClassResults) -> &Summary| -> Vec<BoxStat> {
        r.classes
            .iter()
            .filter_map(|(c, v)| {
                let s = pick(v);
                (s.count > 0).then(|| BoxStat {
                    name: c.to_string(),
                    low: s.min,
                    q1: s.p25,
                    median: s.p50,
                    q3: s.p75,
                    high: s.p99,
                })
            })
            .collect()
    };
    let rb = boxes(|c| &c.response_time_ms);
    if !rb.is_empty() {
        page.figure(
            &box_chart(
                &format!("Response time by client class ({name})"),
                "ms",
                &rb,
            ),
            "Box: quartiles; line: median; whiskers: minimum and 99th percentile.",
        );
    }
    let sb = boxes(|c| &c.startup_delay_s);
    if !sb.is_empty() {
        page.figure(&box_chart(&format!("Start-up delay by client class ({name})"), "s", &sb), "Session start to playback start (the viewer model's initial buffer). Box: quartiles; whiskers: minimum and 99th percentile.");
    }
    let stalls: Vec<(String, f64)> = r
        .classes
        .iter()
        .filter(|(_, v)| v.measured_sessions > 0)
        .map(|(c, v)| {
            (
                c.to_string(),
                100.0 * v.stalled_sessions as f64 / v.measured_sessions as f64,
            )
        })
        .collect();
    if !stalls.is_empty() {
        page.figure(
            &bar_chart(
                &format!("Sessions with a stall, by client class ({name})"),
                "% of measured sessions",
                &stalls,
                None,
            ),
            "A stall: the playout buffer ran dry after playback started.",
        );
    }
    let iv = &r.intervals;
    if !iv.is_empty() {
        let tp: Vec<(f64, f64)> = iv
            .iter()
            .map(|i| (i.t_s, i.throughput_bytes_per_s / 1e6))
            .collect();
        let act: Vec<(f64, f64)> = iv
            .iter()
            .map(|i| (i.t_s, i.active_sessions as f64))
            .collect();
        let fail: Vec<(f64, f64)> = iv.iter().map(|i| (i.t_s, i.failed as f64)).collect();
        page.figure(
            &xy_chart(
                &format!("Throughput over time ({name})"),
                "time, s",
                "MB/s",
                &[Series::new("", tp)],
                Style::Line,
                false,
                true,
            ),
            "Bytes of requests completed per interval.",
        );
        page.figure(
            &xy_chart(
                &format!("Sessions over time ({name})"),
                "time, s",
                "sessions",
                &[
                    Series::new("active", act),
                    Series::new("failed (per interval)", fail),
                ],
                Style::Line,
                false,
                true,
            ),
            "Most sessions active in each interval, and sessions that failed in it.",
        );
    }
    if let Some(p) = &r.players {
        super::players_section(page, name, p);
    }
    if let Some(csv) = requests_csv {
        let pts = request_order(csv, page.max_dots);
        if !pts.is_empty() {
            page.figure(
                &xy_chart(&format!("Response time of every request in send order ({name})"), "request (in order sent)", "response time, ms", &[Series::new("", pts)], Style::Dots, false, true),
                "As the thesis's Figure 3.7: each dot a request; a rising band means the server falls behind. Long runs are thinned to an evenly spaced subset (vodlab report --max-dots).",
            );
        }
    }
}

/// (request index in send order, response ms) from a requests.csv, at most
/// `max` points (every k-th), errors left out.
pub fn request_order(csv: &str, max: usize) -> Vec<(f64, f64)> {
    let mut lines = csv.lines();
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = head.split(',').collect();
    let (Some(si), Some(ri)) = (
        cols.iter().position(|c| *c == "sent_s"),
        cols.iter().position(|c| *c == "response_ms"),
    ) else {
        return Vec::new();
    };
    let mut v: Vec<(f64, f64)> = lines
        .filter_map(|l| {
            // the path and range columns never contain commas (URL paths are percent-encoded)
            let f: Vec<&str> = l.split(',').collect();
            Some((f.get(si)?.parse().ok()?, f.get(ri)?.parse().ok()?))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let step = v.len().div_ceil(max.max(1)).max(1);
    v.iter()
        .enumerate()
        .step_by(step)
        .map(|(i, p)| (i as f64, p.1))
        .collect()
}

fn ci(c: Option<MeanCi>) -> String {
    match c {
        Some(MeanCi {
            mean,
            half_width: Some(h),
            ..
        }) => format!("{mean:.2} ± {h:.2}"),
        Some(c) => format!("{:.2}", c.mean),
        None => "-".into(),
    }
}

/// Renders a capacity.json into the page. `load(rel)` returns a file next to
/// it (results.json / requests.csv of the points) as text.
pub fn capacity_section(
    page: &mut Page,
    cap: &CapacityFile,
    load: &dyn Fn(&str) -> Option<String>,
) {
    let server = cap.server.as_deref().unwrap_or("server");
    page.section(&format!("Capacity of {server}"));
    let a = &cap.answer;
    page.para(&format!(
        "Workload {}, target {}, criterion: {}; {} s of arrivals per point, pacing {}, link emulation {}. Answer: highest passing rate {} sessions/s, lowest failing {}; outcome: {}.",
        cap.workload,
        cap.target,
        cap.criterion,
        cap.window_s,
        if cap.pacing { "on" } else { "off" },
        if cap.shaping { "on" } else { "off" },
        a.capacity.map_or("none".into(), |x| format!("{x:.3}")),
        a.lowest_failed.map_or("none".into(), |x| format!("{x:.3}")),
        cap.outcome.kind(),
    ));
    if let SearchOutcome::ClientLimited { .. } = cap.outcome {
        page.para(&cap.answer_line());
    }
    // a point whose figures say nothing about the server, or a search with
    // no answer, is a banner, not a cell to be found
    if a.capacity.is_none() {
        page.warn(&format!(
            "Capacity of {server}: no rate passed ({})",
            cap.outcome.kind()
        ));
    }
    for r in cap
        .rows
        .iter()
        .filter(|r| r.verdict == Verdict::Invalid || !r.client_valid)
    {
        page.warn(&format!(
            "Capacity of {server}: the point at {:.3} sessions/s is INVALID{}",
            r.rate,
            r.reason
                .as_deref()
                .map_or(String::new(), |x| format!(": {x}"))
        ));
    }
    let mut sorted = cap.rows.clone();
    sorted.sort_by(|x, y| x.rate.total_cmp(&y.rate));
    page.table(
        &[
            "rate, sessions/s",
            "verdict",
            "runs",
            "delivered MB/s (95 % CI)",
            "failed % (95 % CI)",
            "client",
            "reason",
        ],
        &cap.rows
            .iter()
            .map(|r| {
                vec![
                    format!("{:.3}", r.rate),
                    r.verdict.label().into(),
                    r.runs.to_string(),
                    ci(r.delivered_mb_s),
                    ci(r.failed_pct),
                    if r.client_valid { "ok" } else { "invalid" }.into(),
                    r.reason.clone().unwrap_or_default(),
                ]
            })
            .collect::<Vec<_>>(),
    );
    let mut tp = Series::new("delivered", Vec::new());
    let mut fp = Series::new("failed or unfinished", Vec::new());
    // an INVALID point's figures say nothing about the server: left out
    for r in sorted.iter().filter(|r| r.verdict != Verdict::Invalid) {
        if let Some(m) = r.delivered_mb_s {
            tp.points.push((r.rate, m.mean));
            if let Some(h) = m.half_width {
                tp.errors.push((r.rate, m.mean - h, m.mean + h));
            }
        }
        if let Some(m) = r.failed_pct {
            fp.points.push((r.rate, m.mean));
        }
    }
    // disk throughput per point, when the search ran in a box
    let mut disk = Series::new("read from disk", Vec::new());
    let mut d: Vec<(f64, f64)> = cap
        .search
        .points
        .iter()
        .filter(|p| p.verdict != Verdict::Invalid)
        .filter_map(|p| Some((p.rate, p.mean_of(|o| o.extra.disk_mb_s)?.mean)))
        .collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0));
    disk.points = d;
    let mut tps = vec![tp];
    if !disk.points.is_empty() {
        tps.push(disk);
    }
    page.figure(&xy_chart(&format!("Throughput against offered load ({server})"), "offered load, sessions/s", "MB/s", &tps, Style::LinePoints, false, true), "Delivered: bytes over the measured window (error bars: 95 % t-interval when a rate was repeated). Read from disk: bytes the box's cgroup read from the throttled device per second of the run. Points whose client was INVALID are left out.");
    page.figure(&xy_chart(&format!("Failed sessions against offered load ({server})"), "offered load, sessions/s", "% of sessions", &[fp], Style::LinePoints, false, true), "Sessions that failed (a request missed its deadline or errored) or were still running at the drain limit.");
    // run figures of the highest passing and the lowest failing point
    let best: Option<&Point> = cap.search.best_point();
    let worst: Option<&Point> = cap.search.lowest_failed_point();
    for (label, p) in [
        ("highest passing rate", best),
        ("lowest failing rate", worst),
    ] {
        let Some(p) = p else { continue };
        let Some(rel) = p.runs.first().and_then(|o| o.extra.results.as_deref()) else {
            continue;
        };
        let Some(text) = load(&format!("{rel}/results.json")) else {
            continue;
        };
        let name = format!("{server}, {label} {:.3}/s", p.rate);
        match serde_json::from_str::<Results>(&text) {
            Ok(r) => {
                let csv = load(&format!("{rel}/requests.csv"));
                run_section(page, &name, &r, csv.as_deref());
            }
            Err(e) => page.para(&format!(
                "{name}: {rel}/results.json could not be read ({e})"
            )),
        }
    }
}

fn fig(f: Option<&Figures>, pick: fn(&Figures) -> Option<f64>) -> Option<f64> {
    f.and_then(pick)
}

/// Renders a compare.json (and each server's capacity.json through `load`).
pub fn compare_section(page: &mut Page, cmp: &CompareFile, load: &dyn Fn(&str) -> Option<String>) {
    page.section("Comparison");
    let seq = cmp.seqread.as_ref().map(|s| s.mb_s);
    page.para(&format!(
        "Workload {}; every server in the same box ({}), cold cache before every point; criterion: {}; pacing {}, link emulation {}.{}",
        cmp.workload,
        match &cmp.hw_box {
            None => "no box".to_string(),
            Some(b) => format!(
                "memory {} MiB incl. page cache, reads {} MB/s and {} IOPS, read-ahead {} KiB",
                b.mem_bytes.map_or("unlimited".into(), |m| format!("{:.0}", m as f64 / 1048576.0)),
                b.read_bps.map_or("unlimited".into(), |m| format!("{:.1}", m as f64 / 1e6)),
                b.read_iops.map_or("unlimited".into(), |m| format!("{m}")),
                b.readahead_kb.map_or("unchanged".into(), |m| format!("{m}")),
            ),
        },
        cmp.criterion,
        if cmp.pacing { "on" } else { "off" },
        if cmp.shaping { "on" } else { "off" },
        seq.map_or(String::new(), |s| format!(" Sequential-read bound (vodlab fileset seqread in the same box): {s:.1} MB/s.")),
    ));
    let nginx = cmp.server("nginx").and_then(|s| s.answer.capacity);
    let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
    page.table(
        &[
            "server",
            "failure-free sessions/s",
            "× nginx",
            "delivered MB/s",
            "disk MB/s",
            "% of sequential",
            "mean read KiB",
            "device ms/read",
            "server CPU s/GB",
            "note",
        ],
        &cmp.servers
            .iter()
            .map(|s| {
                let c = s.at_capacity.as_ref();
                let cap = s.answer.capacity;
                let disk = fig(c, |f| f.disk_mb_s);
                let note = match (&s.outcome, &s.error) {
                    (SearchOutcome::ClientLimited { rate, .. }, _) => {
                        format!("load generator INVALID at {rate:.3}/s: a lower bound")
                    }
                    (_, Some(e)) => e.clone(),
                    _ => String::new(),
                };
                vec![
                    s.server.clone(),
                    match (cap, s.answer.lowest_failed, &s.outcome) {
                        (Some(c), _, SearchOutcome::ClientLimited { .. }) => format!("≥ {c:.3}"),
                        (Some(c), _, _) => format!("{c:.3}"),
                        (None, Some(l), _) => format!("< {l:.3}"),
                        _ => "-".into(),
                    },
                    f(cap.zip(nginx).map(|(a, b)| a / b), 2),
                    f(fig(c, |f| f.delivered_mb_s), 1),
                    f(disk, 1),
                    f(disk.zip(seq).map(|(d, s)| 100.0 * d / s), 0),
                    f(fig(c, |f| f.mean_read_kib), 0),
                    f(fig(c, |f| f.device_ms_per_read), 2),
                    f(fig(c, |f| f.server_cpu_s_per_gb), 2),
                    note,
                ]
            })
            .collect::<Vec<_>>(),
    );
    let bars: Vec<(String, f64)> = cmp
        .servers
        .iter()
        .map(|s| (s.server.clone(), s.answer.capacity.unwrap_or(0.0)))
        .collect();
    page.figure(
        &bar_chart("Failure-free session rate", "sessions/s", &bars, None),
        "Highest rate at which no session failed (the thesis's maximum failure-free rate).",
    );
    let disk: Vec<(String, f64)> = cmp
        .servers
        .iter()
        .map(|s| {
            let v = fig(s.at_capacity.as_ref(), |f| f.disk_mb_s)
                .or_else(|| fig(s.at_overload.as_ref(), |f| f.disk_mb_s))
                .unwrap_or(0.0);
            (s.server.clone(), v)
        })
        .collect();
    page.figure(&bar_chart("Disk throughput at the failure-free rate", "MB/s", &disk, seq.map(|s| ("sequential-read bound", s))), "Bytes read from the throttled device by the server's cgroup per second; the line is vodlab fileset seqread in the same box.");
    let overload: Vec<(String, f64)> = cmp
        .servers
        .iter()
        .filter_map(|s| Some((s.server.clone(), s.at_overload.as_ref()?.disk_mb_s?)))
        .collect();
    if !overload.is_empty() {
        page.figure(
            &bar_chart(
                "Disk throughput at the lowest failing rate (overload)",
                "MB/s",
                &overload,
                seq.map(|s| ("sequential-read bound", s)),
            ),
            "The most each server pulled from the disk when overloaded.",
        );
    }
    for s in &cmp.servers {
        let rel = s.capacity_json.as_str();
        let Some(text) = load(rel) else { continue };
        let cap = match CapacityFile::from_json(&text) {
            Ok(c) => c,
            Err(e) => {
                page.para(&format!("{}: {rel} could not be read ({e})", s.server));
                continue;
            }
        };
        let base = rel.rsplit_once('/').map_or("", |x| x.0).to_string();
        let sub = |p: &str| {
            load(&if base.is_empty() {
                p.to_string()
            } else {
                format!("{base}/{p}")
            })
        };
        capacity_section(page, &cap, &sub);
    }
}
