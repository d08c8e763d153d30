//! The pacing experiment's part of the report (Ma, Bartoš and Bhatia,
//! "Scalability of HTTP pacing with intelligent bursting"): per group of runs
//! (sessions × bottleneck) the paper's figures — sorted playback latencies,
//! sorted download start and end times, aggregate bandwidth over time — and
//! the pacing accuracy and the pacer's CPU cost.
//!
//! Input: `pacing.json`, written by `scripts/experiments/pacing.sh`, listing
//! the runs ([`PacingManifest`]); each run's `results.json` and `requests.csv`.
//! A single results.json with delivery data is drawn the same way (one run).

use serde::Deserialize;
use vodlab_client::out::results::Delivery;
use vodlab_client::Results;

use super::{bar_chart, xy_chart, Page, Series, Style};

/// Errors reading a pacing manifest.
#[derive(Debug, thiserror::Error)]
pub enum PacingError {
    /// Not JSON, or a field of the wrong type.
    #[error("pacing.json: {0}")]
    Json(#[from] serde_json::Error),
    /// A field with an impossible value.
    #[error("pacing.json: `{key}`: {msg}")]
    Invalid {
        /// The offending key.
        key: String,
        /// What is wrong with it.
        msg: String,
    },
}

/// `pacing.json`: the runs of one pacing experiment.
#[derive(Debug, Clone, Deserialize)]
pub struct PacingManifest {
    /// Always `vodlab-pacing`.
    pub format: String,
    /// Format version (1).
    #[serde(default = "one")]
    pub version: u32,
    /// `full`, `quick` or `smoke`.
    #[serde(default)]
    pub mode: String,
    /// Size of the one file, bytes.
    #[serde(default)]
    pub file_bytes: u64,
    /// Its bit rate, kbit/s.
    #[serde(default)]
    pub bitrate_kbps: f64,
    /// Client buffer B, seconds of content.
    #[serde(default)]
    pub buffer_s: f64,
    /// Server burst, seconds of content.
    #[serde(default)]
    pub burst_s: f64,
    /// The runs.
    #[serde(default)]
    pub runs: Vec<ManifestRun>,
}

fn one() -> u32 {
    1
}

/// One run of the manifest.
#[derive(Debug, Clone, Deserialize)]
pub struct ManifestRun {
    /// The group it is compared in (e.g. `100 sessions, 1gbit egress`).
    pub group: String,
    /// Sessions of the run.
    #[serde(default)]
    pub sessions: u64,
    /// The server's egress rate (tc units).
    #[serde(default)]
    pub egress: String,
    /// Configuration name (`unpaced`, `user-burst`, `nginx`, ...).
    pub config: String,
    /// Legend label.
    pub label: String,
    /// Directory of its results, relative to pacing.json.
    pub dir: String,
    /// CPU seconds of the server's processes when the clients finished.
    #[serde(default)]
    pub server_cpu_s: Option<f64>,
}

impl PacingManifest {
    /// Parses and validates `pacing.json`.
    pub fn from_json(text: &str) -> Result<Self, PacingError> {
        let m: Self = serde_json::from_str(text)?;
        m.validate()?;
        Ok(m)
    }

    /// Checks the fields: the format name, relative run directories.
    pub fn validate(&self) -> Result<(), PacingError> {
        let bad = |key: &str, msg: String| {
            Err(PacingError::Invalid {
                key: key.into(),
                msg,
            })
        };
        if self.format != "vodlab-pacing" {
            return bad(
                "format",
                format!("{:?}, expected \"vodlab-pacing\"", self.format),
            );
        }
        if self.version != 1 {
            return bad("version", format!("{}, this vodlab reads 1", self.version));
        }
        for (i, r) in self.runs.iter().enumerate() {
            if r.dir.is_empty() || r.dir.starts_with('/') || r.dir.split('/').any(|p| p == "..") {
                return bad(
                    &format!("runs[{i}].dir"),
                    format!("{:?}: must be a relative path inside the experiment", r.dir),
                );
            }
            if r.server_cpu_s.is_some_and(|c| !c.is_finite() || c < 0.0) {
                return bad(&format!("runs[{i}].server_cpu_s"), "must be >= 0".into());
            }
        }
        Ok(())
    }
}

/// One run, loaded.
pub struct PacingRun {
    /// Group it is compared in.
    pub group: String,
    /// Configuration name (`unpaced`, `user-burst`, `nginx`, ...).
    pub config: String,
    /// Legend label.
    pub label: String,
    /// Sessions its results.json says were started.
    pub started_sessions: u64,
    /// Measured sessions of its results.json.
    pub measured_sessions: u64,
    /// Failed ones among them.
    pub failed_sessions: u64,
    /// Its results.json's delivery metrics.
    pub delivery: Delivery,
    /// Its requests.csv, if written.
    pub requests_csv: Option<String>,
    /// CPU seconds of the server's processes, if measured.
    pub server_cpu_s: Option<f64>,
}

impl PacingRun {
    /// A run from its results.json (and requests.csv).
    pub fn new(
        group: &str,
        config: &str,
        label: &str,
        results: &Results,
        requests_csv: Option<String>,
        server_cpu_s: Option<f64>,
    ) -> Self {
        Self {
            group: group.into(),
            config: config.into(),
            label: label.into(),
            started_sessions: results.started_sessions,
            measured_sessions: results.measured_sessions,
            failed_sessions: results.failed_sessions,
            delivery: results.delivery.clone(),
            requests_csv,
            server_cpu_s,
        }
    }
}

/// One request's times from requests.csv, seconds from the run's start
/// (`playback` relative to its issue).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestTimes {
    /// Issue (`sent_s`).
    pub sent: f64,
    /// First byte (`sent_s` + `ttfb_ms`).
    pub first_byte: f64,
    /// Last byte (`sent_s` + `download_ms`).
    pub end: f64,
    /// Playback latency (`playback_ms`), if computed.
    pub playback: Option<f64>,
}

/// The completed requests of a requests.csv (rows without a download time,
/// i.e. failed ones, are left out; columns found by name).
pub fn request_times(csv: &str) -> Vec<RequestTimes> {
    let mut lines = csv.lines();
    let Some(head) = lines.next() else {
        return Vec::new();
    };
    let cols: Vec<&str> = head.split(',').collect();
    let col = |n: &str| cols.iter().position(|c| *c == n);
    let (Some(si), Some(ti), Some(di), pi, ei) = (
        col("sent_s"),
        col("ttfb_ms"),
        col("download_ms"),
        col("playback_ms"),
        col("error"),
    ) else {
        return Vec::new();
    };
    lines
        .filter_map(|l| {
            // error is the last column and may hold commas; the ones before it never do
            let f: Vec<&str> = l.split(',').collect();
            if ei.is_some_and(|e| f.get(e).is_some_and(|s| !s.is_empty())) {
                return None;
            }
            let num = |i: usize| f.get(i)?.parse::<f64>().ok();
            let sent = num(si)?;
            Some(RequestTimes {
                sent,
                first_byte: sent + num(ti)? / 1e3,
                end: sent + num(di)? / 1e3,
                playback: pi.and_then(num).map(|ms| ms / 1e3),
            })
        })
        .collect()
}

/// `(rank, value)` of values sorted ascending, thinned to at most `max` points
/// (the last one always kept, so the worst case shows).
pub fn sorted_curve(mut v: Vec<f64>, max: usize) -> Vec<(f64, f64)> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    let step = v.len().div_ceil(max.max(1)).max(1);
    let mut out: Vec<(f64, f64)> = v
        .iter()
        .enumerate()
        .step_by(step)
        .map(|(i, x)| (i as f64, *x))
        .collect();
    if let Some(last) = v.last() {
        if out.last().is_some_and(|p| p.0 as usize != v.len() - 1) {
            out.push(((v.len() - 1) as f64, *last));
        }
    }
    out
}

/// Whether a configuration paces with vodlab's own pacer (user or kernel mode).
fn is_vodlab_paced(config: &str) -> bool {
    config.starts_with("user") || config.starts_with("kernel")
}

/// The pacer's CPU cost in percent of one core per 10,000 paced sessions:
/// (server CPU paced − server CPU unpaced, the same bytes delivered) divided by
/// the paced sessions' mean duration, scaled from `sessions` to 10,000.
pub fn pacer_cost_pct_per_10k(
    paced_cpu_s: f64,
    unpaced_cpu_s: f64,
    sessions: u64,
    mean_session_s: f64,
) -> Option<f64> {
    (sessions > 0 && mean_session_s > 0.0).then(|| {
        (paced_cpu_s - unpaced_cpu_s) / mean_session_s * 100.0 * 10_000.0 / sessions as f64
    })
}

/// Renders the runs of a pacing experiment (`pacing.json`), one part per
/// group (in first-appearance order), with the captions that tie each
/// figure to the pacing paper's.
pub fn pacing_section(page: &mut Page, title: &str, runs: &[PacingRun]) {
    sections(page, title, runs, true);
}

/// Renders the delivery figures of runs that are not the pacing paper's
/// experiment (one `results.json`): the same figures, captions without the
/// paper's figure numbers.
pub fn delivery_section(page: &mut Page, title: &str, runs: &[PacingRun]) {
    sections(page, title, runs, false);
}

fn sections(page: &mut Page, title: &str, runs: &[PacingRun], paper: bool) {
    page.section(title);
    let mut groups: Vec<&str> = Vec::new();
    for r in runs {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    for g in groups {
        let rs: Vec<&PacingRun> = runs.iter().filter(|r| r.group == g).collect();
        group_part(page, g, &rs, paper);
    }
}

fn group_part(page: &mut Page, group: &str, runs: &[&PacingRun], paper: bool) {
    let cite = |text: &str| {
        if paper {
            format!(" ({text})")
        } else {
            String::new()
        }
    };
    page.heading(group);
    let times: Vec<Vec<RequestTimes>> = runs
        .iter()
        .map(|r| {
            r.requests_csv
                .as_deref()
                .map(request_times)
                .unwrap_or_default()
        })
        .collect();
    let unpaced_cpu = runs
        .iter()
        .find(|r| r.config == "unpaced")
        .and_then(|r| r.server_cpu_s);
    let f2 = |x: f64| format!("{x:.2}");
    let rows: Vec<Vec<String>> = runs
        .iter()
        .zip(&times)
        .map(|(r, t)| {
            let d = &r.delivery;
            let last_end = t.iter().map(|x| x.end).fold(f64::NAN, f64::max);
            let cost = match (is_vodlab_paced(&r.config), r.server_cpu_s, unpaced_cpu) {
                (true, Some(p), Some(u)) => {
                    pacer_cost_pct_per_10k(p, u, r.measured_sessions, d.download_time_s.mean)
                        .map_or("-".into(), |c| format!("{c:.1}"))
                }
                _ => "-".into(),
            };
            vec![
                r.label.clone(),
                format!(
                    "{}/{} ({} started)",
                    r.measured_sessions - r.failed_sessions,
                    r.measured_sessions,
                    r.started_sessions
                ),
                f2(d.playback_latency_s.p50),
                f2(d.playback_latency_s.max),
                f2(d.download_time_s.p50),
                f2(d.download_time_s.max),
                if last_end.is_finite() {
                    f2(last_end)
                } else {
                    "-".into()
                },
                d.rate_windows.to_string(),
                format!("{:.1}", d.rate_windows_within_5pct_pct),
                format!(
                    "{:+.3} / {:+.3} / {:+.3}",
                    d.rate_deviation.p5, d.rate_deviation.p50, d.rate_deviation.p95
                ),
                r.server_cpu_s.map_or("-".into(), f2),
                cost,
            ]
        })
        .collect();
    page.table(
        &[
            "server",
            "sessions ok/measured",
            "playback p50 s",
            "playback max s",
            "download p50 s",
            "download max s",
            "last byte s",
            "100 ms windows",
            "within ±5 % %",
            "deviation p5/p50/p95",
            "server CPU s",
            "pacer cost % core per 10k",
        ],
        &rows,
    );
    let max = page.max_dots.max(2);
    let curves = |pick: &dyn Fn(&RequestTimes) -> Option<f64>| -> Vec<Series> {
        runs.iter()
            .zip(&times)
            .filter_map(|(r, t)| {
                let pts = sorted_curve(t.iter().filter_map(pick).collect(), max);
                (!pts.is_empty()).then(|| Series::new(r.label.as_str(), pts))
            })
            .collect()
    };
    let pl = curves(&|t| t.playback);
    if !pl.is_empty() {
        page.figure(
            &xy_chart(
                &format!("Playback latency, sorted ({group})"),
                "request (sorted)",
                "s from the connection attempt",
                &pl,
                Style::Line,
                false,
                true,
            ),
            &format!(
                "Time from the connection attempt until the first B seconds of content arrived, \
                 requests sorted from low to high{}.",
                cite("the paper's Figs. 2-3")
            ),
        );
    }
    let ends = curves(&|t| Some(t.end));
    if !ends.is_empty() {
        page.figure(
            &xy_chart(
                &format!("Download end, sorted ({group})"),
                "request (sorted)",
                "s from the start of the test",
                &ends,
                Style::Line,
                false,
                true,
            ),
            &format!(
                "Time of each download's last byte from the start of the test, sorted{}.",
                cite("the paper's Figs. 4-5, end times")
            ),
        );
        let starts = curves(&|t| Some(t.first_byte));
        page.figure(
            &xy_chart(
                &format!("Download start (first byte), sorted ({group})"),
                "request (sorted)",
                "s from the start of the test",
                &starts,
                Style::Line,
                false,
                true,
            ),
            &format!(
                "Time of each download's first byte from the start of the test, sorted{}.",
                cite(
                    "the paper's Figs. 4-5, start times; requests are issued 500 µs apart, so a \
                     server that makes connections wait shows here"
                )
            ),
        );
    }
    let agg = |paced: bool| -> Vec<Series> {
        runs.iter()
            .filter(|r| is_vodlab_paced(&r.config) == paced)
            .filter(|r| !r.delivery.aggregate_mbit_per_s.is_empty())
            .map(|r| {
                Series::new(
                    r.label.as_str(),
                    r.delivery
                        .aggregate_mbit_per_s
                        .iter()
                        .map(|&[t, v]| (t, v))
                        .collect(),
                )
            })
            .collect()
    };
    for (paced, which) in [(true, "paced"), (false, "unpaced and rate-limited")] {
        let s = agg(paced);
        if !s.is_empty() {
            page.figure(
                &xy_chart(
                    &format!("Aggregate bandwidth, {which} ({group})"),
                    "s from the start of the test",
                    "Mbit/s",
                    &s,
                    Style::Line,
                    false,
                    true,
                ),
                &format!(
                    "Body bytes received by all sessions per 100 ms window{}.",
                    cite("the paper's Figs. 6-7")
                ),
            );
        }
    }
    let acc: Vec<(String, f64)> = runs
        .iter()
        .filter(|r| r.delivery.rate_windows > 0)
        .map(|r| (r.label.clone(), r.delivery.rate_windows_within_5pct_pct))
        .collect();
    if !acc.is_empty() {
        page.figure(
            &bar_chart(
                &format!("Pacing accuracy ({group})"),
                "% of 100 ms windows within ±5 %",
                &acc,
                None,
            ),
            "Share of 100 ms windows after the first B seconds whose bytes are within ±5 % of \
             the paced target (K × bit rate). nginx's limit_rate 50k is 51,200 B/s, 2.4 % above \
             a 400 kbit/s target.",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "session,shard,class,request,path,range,measured,scheduled_s,sent_s,ttfb_ms,response_ms,bytes,status,playback_ms,download_ms,error\n\
        0,0,d,0,/v,,1,0,0.5,10,2000,1000,200,400,2000,\n\
        1,0,d,0,/v,,1,0,0.0,5,1000,1000,200,,1000,\n\
        2,0,d,0,/v,,1,0,0.1,5,,0,0,,,timeout\n";

    #[test]
    fn request_times_reads_columns_by_name_and_skips_failures() {
        let t = request_times(CSV);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].sent, 0.5);
        assert!((t[0].first_byte - 0.51).abs() < 1e-9);
        assert!((t[0].end - 2.5).abs() < 1e-9);
        assert_eq!(t[0].playback, Some(0.4));
        assert_eq!(t[1].playback, None);
        assert!(request_times("a,b\n1,2\n").is_empty());
        assert!(request_times("").is_empty());
    }

    #[test]
    fn sorted_curve_sorts_thins_and_keeps_the_worst() {
        let v: Vec<f64> = (0..1000).rev().map(f64::from).collect();
        let c = sorted_curve(v, 100);
        assert!(c.len() <= 101, "{}", c.len());
        assert_eq!(c[0], (0.0, 0.0));
        assert_eq!(*c.last().unwrap(), (999.0, 999.0));
        assert!(c.windows(2).all(|w| w[0].1 <= w[1].1));
        assert!(sorted_curve(vec![f64::NAN], 10).is_empty());
    }

    #[test]
    fn pacer_cost_scales_to_ten_thousand_sessions() {
        // 0.2 CPU-s more over 100 sessions lasting 20 s: 1 % of a core for 100
        // sessions, 100 % for 10,000
        let c = pacer_cost_pct_per_10k(1.2, 1.0, 100, 20.0).unwrap();
        assert!((c - 100.0).abs() < 1e-9, "{c}");
        assert!(pacer_cost_pct_per_10k(1.0, 1.0, 0, 20.0).is_none());
    }

    #[test]
    fn manifest_is_validated() {
        let ok = r#"{"format":"vodlab-pacing","version":1,"runs":[{"group":"g","config":"unpaced","label":"u","dir":"n100/unpaced","server_cpu_s":0.5}]}"#;
        assert_eq!(PacingManifest::from_json(ok).unwrap().runs.len(), 1);
        let e = PacingManifest::from_json(&ok.replace("n100/unpaced", "../x")).unwrap_err();
        assert!(e.to_string().contains("runs[0].dir"), "{e}");
        let e = PacingManifest::from_json(&ok.replace("vodlab-pacing", "x")).unwrap_err();
        assert!(e.to_string().contains("format"), "{e}");
        assert!(PacingManifest::from_json("{").is_err());
    }

    #[test]
    fn section_draws_the_papers_figures() {
        let delivery = Delivery {
            rate_windows: 10,
            rate_windows_within_5pct_pct: 90.0,
            aggregate_mbit_per_s: vec![[0.0, 1.0], [0.1, 2.0]],
            ..Delivery::default()
        };
        let run = |config: &str, cpu| PacingRun {
            group: "2 sessions".into(),
            config: config.into(),
            label: config.into(),
            started_sessions: 2,
            measured_sessions: 2,
            failed_sessions: 0,
            delivery: delivery.clone(),
            requests_csv: Some(CSV.into()),
            server_cpu_s: Some(cpu),
        };
        let mut page = Page::new("t");
        pacing_section(
            &mut page,
            "Pacing",
            &[run("unpaced", 1.0), run("user-burst", 1.5)],
        );
        let h = page.finish();
        for want in [
            "Playback latency, sorted",
            "Download end, sorted",
            "Download start (first byte)",
            "Aggregate bandwidth, paced",
            "Aggregate bandwidth, unpaced",
            "Pacing accuracy",
        ] {
            assert!(h.contains(want), "missing {want}");
        }
        assert!(h.contains("the paper's Figs. 2-3"));
        assert!(h.contains("request (sorted)") && !h.contains("session (sorted)"));
        // one run that is not the paper's experiment: the same figures,
        // without the paper's figure numbers
        let mut page = Page::new("t");
        delivery_section(&mut page, "Delivery", &[run("run", 1.0)]);
        let h = page.finish();
        assert!(h.contains("Playback latency, sorted"));
        assert!(
            !h.contains("the paper"),
            "paper captions in an unrelated run"
        );
    }
}
