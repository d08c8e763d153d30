//! `vodlab report`: one self-contained HTML file with SVG figures (drawn with
//! plotters' SVG backend, no scripts, no fonts or styles fetched) from
//! results.json, capacity.json or compare.json files.

use std::fmt::Write as _;

use plotters::prelude::*;
use serde_json::Value;

/// Series colours (colour-blind safe, Okabe-Ito).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

const W: u32 = 720;
const H: u32 = 360;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn bounds(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-9 {
        hi = lo + lo.abs().max(1.0) * 0.1;
    }
    (lo, hi)
}

/// A named series of points.
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points.
    pub points: Vec<(f64, f64)>,
    /// Optional error bars: (x, low, high).
    pub errors: Vec<(f64, f64, f64)>,
}

impl Series {
    /// A series without error bars.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            errors: Vec::new(),
        }
    }
}

/// How a chart draws its series.
#[derive(Clone, Copy, PartialEq)]
pub enum Style {
    /// Lines with point markers.
    LinePoints,
    /// Lines only.
    Line,
    /// Dots only (many points).
    Dots,
}

/// Line/scatter chart; `log_x` draws x on a log scale (values must be > 0).
pub fn xy_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    style: Style,
    log_x: bool,
    y_from_zero: bool,
) -> String {
    let mut svg = String::new();
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (mut x0, x1) = bounds(all().map(|p| p.0));
    let (y0, mut y1) = bounds(
        all()
            .map(|p| p.1)
            .chain(series.iter().flat_map(|s| s.errors.iter().map(|e| e.2))),
    );
    let y0 = if y_from_zero { y0.min(0.0) } else { y0 };
    y1 += (y1 - y0) * 0.05;
    if log_x {
        x0 = x0.max(1e-3);
    }
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                let _ = chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .light_line_style(RGBColor(235, 235, 235))
                    .draw();
                for (i, s) in series.iter().enumerate() {
                    let c = PALETTE[i % PALETTE.len()];
                    let pts = s.points.clone();
                    let anno = match style {
                        Style::Dots => chart.draw_series(
                            pts.into_iter().map(move |p| Circle::new(p, 1, c.filled())),
                        ),
                        Style::Line => chart.draw_series(LineSeries::new(pts, c.stroke_width(2))),
                        Style::LinePoints => {
                            let _ = chart
                                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())));
                            chart.draw_series(LineSeries::new(pts, c.stroke_width(2)))
                        }
                    };
                    if let Ok(a) = anno {
                        a.label(s.name.clone()).legend(move |(x, y)| {
                            Rectangle::new([(x, y - 4), (x + 14, y + 4)], c.filled())
                        });
                    }
                    let _ = chart.draw_series(s.errors.iter().map(|&(x, lo, hi)| {
                        ErrorBar::new_vertical(x, lo, (lo + hi) / 2.0, hi, c.stroke_width(1), 6)
                    }));
                }
                if series.len() > 1 || !series.first().is_some_and(|s| s.name.is_empty()) {
                    let _ = chart
                        .configure_series_labels()
                        .position(SeriesLabelPosition::UpperLeft)
                        .background_style(WHITE.mix(0.85))
                        .border_style(RGBColor(180, 180, 180))
                        .draw();
                }
            }};
        }
        if log_x {
            if let Ok(c) = b.build_cartesian_2d((x0..x1 * 1.05).log_scale(), y0..y1) {
                draw!(c);
            }
        } else if let Ok(c) = b.build_cartesian_2d(x0..x1 + (x1 - x0) * 0.02, y0..y1) {
            draw!(c);
        }
        let _ = root.present();
    }
    svg
}

/// The name of category `x` on a categorical axis (blank between categories).
fn category_label(names: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 0.01 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// One box of a box plot (values already summarised).
pub struct BoxStat {
    /// Category label.
    pub name: String,
    /// Lower whisker.
    pub low: f64,
    /// 25th percentile.
    pub q1: f64,
    /// Median.
    pub median: f64,
    /// 75th percentile.
    pub q3: f64,
    /// Upper whisker.
    pub high: f64,
}

/// A box plot, one box per category.
pub fn box_chart(title: &str, y_desc: &str, boxes: &[BoxStat]) -> String {
    let mut svg = String::new();
    let n = boxes.len().max(1);
    let (y0, mut y1) = bounds(boxes.iter().flat_map(|b| [b.low, b.high]));
    y1 += (y1 - y0) * 0.05;
    let names: Vec<String> = boxes.iter().map(|b| b.name.clone()).collect();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let _ = root.fill(&WHITE);
        if let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, y0.min(0.0)..y1)
        {
            let _ = chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(n + 1)
                .x_label_formatter(&|x| category_label(&names, *x))
                .y_desc(y_desc)
                .draw();
            for (i, b) in boxes.iter().enumerate() {
                let c = PALETTE[i % PALETTE.len()];
                let x = i as f64;
                let _ = chart.draw_series([Rectangle::new(
                    [(x - 0.25, b.q1), (x + 0.25, b.q3)],
                    c.mix(0.35).filled(),
                )]);
                let _ = chart.draw_series([Rectangle::new(
                    [(x - 0.25, b.q1), (x + 0.25, b.q3)],
                    c.stroke_width(2),
                )]);
                for seg in [
                    vec![(x - 0.25, b.median), (x + 0.25, b.median)],
                    vec![(x, b.q3), (x, b.high)],
                    vec![(x, b.q1), (x, b.low)],
                    vec![(x - 0.1, b.high), (x + 0.1, b.high)],
                    vec![(x - 0.1, b.low), (x + 0.1, b.low)],
                ] {
                    let _ = chart.draw_series([PathElement::new(seg, c.stroke_width(2))]);
                }
            }
        }
        let _ = root.present();
    }
    svg
}

/// A bar chart, one bar per category, with an optional horizontal reference line.
pub fn bar_chart(
    title: &str,
    y_desc: &str,
    bars: &[(String, f64)],
    reference: Option<(&str, f64)>,
) -> String {
    let mut svg = String::new();
    let n = bars.len().max(1);
    let (_, mut y1) = bounds(
        bars.iter()
            .map(|b| b.1)
            .chain(reference.map(|r| r.1))
            .chain([0.0]),
    );
    y1 *= 1.12;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let _ = root.fill(&WHITE);
        if let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0.0..y1)
        {
            let _ = chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(n + 1)
                .x_label_formatter(&|x| category_label(&names, *x))
                .y_desc(y_desc)
                .draw();
            for (i, (_, v)) in bars.iter().enumerate() {
                let c = PALETTE[i % PALETTE.len()];
                let x = i as f64;
                let _ = chart
                    .draw_series([Rectangle::new([(x - 0.3, 0.0), (x + 0.3, *v)], c.filled())]);
                let _ = chart.draw_series([Text::new(
                    format!("{v:.2}"),
                    (x - 0.12, *v + y1 * 0.02),
                    ("sans-serif", 13),
                )]);
            }
            if let Some((label, y)) = reference {
                let _ = chart.draw_series([PathElement::new(
                    vec![(-0.5, y), (n as f64 - 0.5, y)],
                    BLACK.stroke_width(2),
                )]);
                let _ = chart.draw_series([Text::new(
                    label.to_string(),
                    (-0.45, y + y1 * 0.02),
                    ("sans-serif", 13),
                )]);
            }
        }
        let _ = root.present();
    }
    svg
}

/// The HTML page under construction.
pub struct Page {
    /// Most requests drawn in a per-request figure.
    pub max_dots: usize,
    body: String,
    title: String,
    toc: Vec<(String, String)>,
}

impl Page {
    /// An empty page.
    pub fn new(title: &str) -> Self {
        Self {
            max_dots: 20_000,
            body: String::new(),
            title: title.to_string(),
            toc: Vec::new(),
        }
    }
    /// A section heading (listed in the contents).
    pub fn section(&mut self, title: &str) {
        let id = format!("s{}", self.toc.len());
        let _ = writeln!(self.body, "<h2 id=\"{id}\">{}</h2>", esc(title));
        self.toc.push((id, title.to_string()));
    }
    /// A minor heading.
    pub fn heading(&mut self, title: &str) {
        let _ = writeln!(self.body, "<h3>{}</h3>", esc(title));
    }
    /// A paragraph of text.
    pub fn para(&mut self, text: &str) {
        let _ = writeln!(self.body, "<p>{}</p>", esc(text));
    }
    /// A figure (SVG) with a caption.
    pub fn figure(&mut self, svg: &str, caption: &str) {
        let svg = svg
            .trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
            .trim();
        let _ = writeln!(
            self.body,
            "<figure>{svg}<figcaption>{}</figcaption></figure>",
            esc(caption)
        );
    }
    /// A table; cells are escaped.
    pub fn table(&mut self, head: &[&str], rows: &[Vec<String>]) {
        self.body += "<table><thead><tr>";
        for h in head {
            let _ = write!(self.body, "<th>{}</th>", esc(h));
        }
        self.body += "</tr></thead><tbody>";
        for r in rows {
            self.body += "<tr>";
            for c in r {
                let _ = write!(self.body, "<td>{}</td>", esc(c));
            }
            self.body += "</tr>";
        }
        self.body += "</tbody></table>\n";
    }
    /// The finished HTML document.
    pub fn finish(self) -> String {
        let mut toc = String::new();
        for (id, t) in &self.toc {
            let _ = write!(toc, "<li><a href=\"#{id}\">{}</a></li>", esc(t));
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>\
             body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}\
             table{{border-collapse:collapse;margin:1em 0;font-size:14px}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
             th{{background:#f3f3f3}}td:first-child,th:first-child{{text-align:left}}figure{{margin:1em 0}}\
             figcaption{{font-size:13px;color:#555;max-width:720px}}svg{{max-width:100%;height:auto}}\
             </style></head><body>\n<h1>{t}</h1>\n<ul>{toc}</ul>\n{b}\n<p style=\"color:#888;font-size:12px\">Rendered by vodlab report; self-contained, no network needed.</p></body></html>\n",
            t = esc(&self.title),
            b = self.body
        )
    }
}

/// A number from a JSON path (`a.b.c`).
pub fn num(v: &Value, path: &str) -> Option<f64> {
    path.split('.').try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// Renders one run's results.json (and its requests.csv, if given) into the page.
pub fn run_section(page: &mut Page, name: &str, r: &Value, requests_csv: Option<&str>) {
    page.heading(&format!("{name}: run figures"));
    let f = |p: &str| num(r, p).map_or("-".into(), |x| format!("{x:.2}"));
    page.table(
        &[
            "measured sessions",
            "failed",
            "stalled",
            "throughput Mbit/s",
            "response p50 ms",
            "p99 ms",
            "start-up p50 s",
            "valid",
        ],
        &[vec![
            f("measured_sessions"),
            f("failed_sessions"),
            f("stalled_sessions"),
            f("throughput_mbit_per_s"),
            f("response_time_ms.p50"),
            f("response_time_ms.p99"),
            f("startup_delay_s.p50"),
            r.get("valid").map_or("-".into(), |v| v.to_string()),
        ]],
    );
    let classes: Vec<(&String, &Value)> = r
        .get("classes")
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    let cdfs: Vec<Series> = classes
        .iter()
        .filter_map(|(c, v)| {
            let pts: Vec<(f64, f64)> = v
                .get("response_time_cdf_ms")?
                .as_array()?
                .iter()
                .filter_map(|p| Some((p.get(1)?.as_f64()?.max(1e-3), p.get(0)?.as_f64()?)))
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
    let boxes = |key: &str| -> Vec<BoxStat> {
        classes
            .iter()
            .filter_map(|(c, v)| {
                let s = v.get(key)?;
                (num(s, "count")? > 0.0).then(|| BoxStat {
                    name: c.to_string(),
                    low: num(s, "min").unwrap_or(0.0),
                    q1: num(s, "p25").unwrap_or(0.0),
                    median: num(s, "p50").unwrap_or(0.0),
                    q3: num(s, "p75").unwrap_or(0.0),
                    high: num(s, "p99").unwrap_or(0.0),
                })
            })
            .collect()
    };
    let rb = boxes("response_time_ms");
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
    let sb = boxes("startup_delay_s");
    if !sb.is_empty() {
        page.figure(&box_chart(&format!("Start-up delay by client class ({name})"), "s", &sb), "Session start to playback start (the viewer model's initial buffer). Box: quartiles; whiskers: minimum and 99th percentile.");
    }
    let stalls: Vec<(String, f64)> = classes
        .iter()
        .filter_map(|(c, v)| {
            let m = num(v, "measured_sessions")?;
            (m > 0.0).then(|| {
                (
                    c.to_string(),
                    100.0 * num(v, "stalled_sessions").unwrap_or(0.0) / m,
                )
            })
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
    if let Some(iv) = r.get("intervals").and_then(Value::as_array) {
        let tp: Vec<(f64, f64)> = iv
            .iter()
            .filter_map(|i| Some((num(i, "t_s")?, num(i, "throughput_bytes_per_s")? / 1e6)))
            .collect();
        let act: Vec<(f64, f64)> = iv
            .iter()
            .filter_map(|i| Some((num(i, "t_s")?, num(i, "active_sessions")?)))
            .collect();
        let fail: Vec<(f64, f64)> = iv
            .iter()
            .filter_map(|i| Some((num(i, "t_s")?, num(i, "failed")?)))
            .collect();
        if !tp.is_empty() {
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

/// Renders a capacity.json into the page. `load(rel)` returns a file next to
/// it (results.json / requests.csv of the points) as text.
pub fn capacity_section(page: &mut Page, cap: &Value, load: &dyn Fn(&str) -> Option<String>) {
    let server = cap
        .get("server")
        .and_then(Value::as_str)
        .unwrap_or("server");
    let criterion = cap.get("criterion").and_then(Value::as_str).unwrap_or("");
    page.section(&format!("Capacity of {server}"));
    let a = &cap["answer"];
    page.para(&format!(
        "Workload {}, target {}, criterion: {criterion}; {} s of arrivals per point, pacing {}, link emulation {}. Answer: highest passing rate {} sessions/s, lowest failing {}; ending: {}.",
        cap["workload"].as_str().unwrap_or("?"),
        cap["target"].as_str().unwrap_or("?"),
        num(cap, "window_s").unwrap_or(0.0),
        if cap["pacing"].as_bool().unwrap_or(true) { "on" } else { "off" },
        if cap["shaping"].as_bool().unwrap_or(true) { "on" } else { "off" },
        num(a, "capacity").map_or("none".into(), |x| format!("{x:.3}")),
        num(a, "lowest_failed").map_or("none".into(), |x| format!("{x:.3}")),
        a["ending"].as_str().unwrap_or("stopped early"),
    ));
    let rows = cap["rows"].as_array().cloned().unwrap_or_default();
    let mut sorted = rows.clone();
    sorted.sort_by(|x, y| {
        num(x, "rate")
            .unwrap_or(0.0)
            .total_cmp(&num(y, "rate").unwrap_or(0.0))
    });
    let ci = |v: &Value| match (num(v, "mean"), num(v, "half_width")) {
        (Some(m), Some(h)) => format!("{m:.2} ± {h:.2}"),
        (Some(m), None) => format!("{m:.2}"),
        _ => "-".into(),
    };
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
        &rows
            .iter()
            .map(|r| {
                vec![
                    num(r, "rate").map_or("-".into(), |x| format!("{x:.3}")),
                    if r["passed"].as_bool().unwrap_or(false) {
                        "pass".into()
                    } else {
                        "FAIL".into()
                    },
                    num(r, "runs").map_or("-".into(), |x| format!("{x:.0}")),
                    ci(&r["delivered_mb_s"]),
                    ci(&r["failed_pct"]),
                    if r["client_valid"].as_bool().unwrap_or(false) {
                        "ok".into()
                    } else {
                        "invalid".into()
                    },
                    r["reason"].as_str().unwrap_or("").to_string(),
                ]
            })
            .collect::<Vec<_>>(),
    );
    let mut tp = Series::new("delivered", Vec::new());
    let mut fp = Series::new("failed or unfinished", Vec::new());
    for r in &sorted {
        let x = num(r, "rate").unwrap_or(0.0);
        if let Some(m) = num(&r["delivered_mb_s"], "mean") {
            tp.points.push((x, m));
            if let Some(h) = num(&r["delivered_mb_s"], "half_width") {
                tp.errors.push((x, m - h, m + h));
            }
        }
        if let Some(m) = num(&r["failed_pct"], "mean") {
            fp.points.push((x, m));
        }
    }
    // disk throughput per point, when the search ran in a box
    let mut disk = Series::new("read from disk", Vec::new());
    if let Some(points) = cap.pointer("/search/points").and_then(Value::as_array) {
        let mut d: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| {
                let runs = p["runs"].as_array()?;
                let xs: Vec<f64> = runs
                    .iter()
                    .filter_map(|o| num(&o["extra"], "disk_mb_s"))
                    .collect();
                (!xs.is_empty()).then(|| {
                    (
                        num(p, "rate").unwrap_or(0.0),
                        xs.iter().sum::<f64>() / xs.len() as f64,
                    )
                })
            })
            .collect();
        d.sort_by(|a, b| a.0.total_cmp(&b.0));
        disk.points = d;
    }
    let mut tps = vec![tp];
    if !disk.points.is_empty() {
        tps.push(disk);
    }
    page.figure(&xy_chart(&format!("Throughput against offered load ({server})"), "offered load, sessions/s", "MB/s", &tps, Style::LinePoints, false, true), "Delivered: bytes over the measured window (error bars: 95 % t-interval when a rate was repeated). Read from disk: bytes the box's cgroup read from the throttled device per second of the run.");
    page.figure(&xy_chart(&format!("Failed sessions against offered load ({server})"), "offered load, sessions/s", "% of sessions", &[fp], Style::LinePoints, false, true), "Sessions that failed (a request missed its deadline or errored) or were still running at the drain limit.");
    // run figures of the highest passing and the lowest failing point
    let points = cap
        .pointer("/search/points")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let best = points
        .iter()
        .filter(|p| p["passed"].as_bool() == Some(true))
        .max_by(|x, y| {
            num(x, "rate")
                .unwrap_or(0.0)
                .total_cmp(&num(y, "rate").unwrap_or(0.0))
        });
    let worst = points
        .iter()
        .filter(|p| p["passed"].as_bool() == Some(false))
        .min_by(|x, y| {
            num(x, "rate")
                .unwrap_or(0.0)
                .total_cmp(&num(y, "rate").unwrap_or(0.0))
        });
    for (label, p) in [
        ("highest passing rate", best),
        ("lowest failing rate", worst),
    ] {
        let Some(p) = p else { continue };
        let Some(rel) = p.pointer("/runs/0/extra/results").and_then(Value::as_str) else {
            continue;
        };
        let Some(text) = load(&format!("{rel}/results.json")) else {
            continue;
        };
        let Ok(r) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let csv = load(&format!("{rel}/requests.csv"));
        run_section(
            page,
            &format!("{server}, {label} {:.3}/s", num(p, "rate").unwrap_or(0.0)),
            &r,
            csv.as_deref(),
        );
    }
}

/// Renders a compare.json (and each server's capacity.json through `load`).
pub fn compare_section(page: &mut Page, cmp: &Value, load: &dyn Fn(&str) -> Option<String>) {
    page.section("Comparison");
    let servers = cmp["servers"].as_array().cloned().unwrap_or_default();
    let seq = num(cmp, "seqread.mb_s");
    let b = &cmp["box"];
    page.para(&format!(
        "Workload {}; every server in the same box ({}), cold cache before every point; criterion: {}; pacing {}, link emulation {}.{}",
        cmp["workload"].as_str().unwrap_or("?"),
        if b.is_null() {
            "no box".to_string()
        } else {
            format!(
                "memory {} MiB incl. page cache, reads {} MB/s and {} IOPS, read-ahead {} KiB",
                num(b, "mem_bytes").map_or("unlimited".into(), |m| format!("{:.0}", m / 1048576.0)),
                num(b, "read_bps").map_or("unlimited".into(), |m| format!("{:.1}", m / 1e6)),
                num(b, "read_iops").map_or("unlimited".into(), |m| format!("{m:.0}")),
                num(b, "readahead_kb").map_or("unchanged".into(), |m| format!("{m:.0}")),
            )
        },
        cmp["criterion"].as_str().unwrap_or(""),
        if cmp["pacing"].as_bool().unwrap_or(true) { "on" } else { "off" },
        if cmp["shaping"].as_bool().unwrap_or(true) { "on" } else { "off" },
        seq.map_or(String::new(), |s| format!(" Sequential-read bound (vodlab fileset seqread in the same box): {s:.1} MB/s.")),
    ));
    let nginx = servers
        .iter()
        .find(|s| s["server"] == "nginx")
        .and_then(|s| num(s, "answer.capacity"));
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
        &servers
            .iter()
            .map(|s| {
                let c = &s["at_capacity"];
                let cap = num(s, "answer.capacity");
                vec![
                    s["server"].as_str().unwrap_or("?").to_string(),
                    match (cap, num(s, "answer.lowest_failed")) {
                        (Some(c), _) => format!("{c:.3}"),
                        (None, Some(l)) => format!("< {l:.3}"),
                        _ => "-".into(),
                    },
                    f(cap.zip(nginx).map(|(a, b)| a / b), 2),
                    f(num(c, "delivered_mb_s"), 1),
                    f(num(c, "disk_mb_s"), 1),
                    f(num(c, "disk_mb_s").zip(seq).map(|(d, s)| 100.0 * d / s), 0),
                    f(num(c, "mean_read_kib"), 0),
                    f(num(c, "device_ms_per_read"), 2),
                    f(num(c, "server_cpu_s_per_gb"), 2),
                    s["error"].as_str().unwrap_or("").to_string(),
                ]
            })
            .collect::<Vec<_>>(),
    );
    let bars: Vec<(String, f64)> = servers
        .iter()
        .map(|s| {
            (
                s["server"].as_str().unwrap_or("?").to_string(),
                num(s, "answer.capacity").unwrap_or(0.0),
            )
        })
        .collect();
    page.figure(
        &bar_chart("Failure-free session rate", "sessions/s", &bars, None),
        "Highest rate at which no session failed (the thesis's maximum failure-free rate).",
    );
    let disk: Vec<(String, f64)> = servers
        .iter()
        .map(|s| {
            let v = num(&s["at_capacity"], "disk_mb_s")
                .or_else(|| num(&s["at_overload"], "disk_mb_s"))
                .unwrap_or(0.0);
            (s["server"].as_str().unwrap_or("?").to_string(), v)
        })
        .collect();
    page.figure(&bar_chart("Disk throughput at the failure-free rate", "MB/s", &disk, seq.map(|s| ("sequential-read bound", s))), "Bytes read from the throttled device by the server's cgroup per second; the line is vodlab fileset seqread in the same box.");
    let overload: Vec<(String, f64)> = servers
        .iter()
        .filter_map(|s| {
            Some((
                s["server"].as_str()?.to_string(),
                num(&s["at_overload"], "disk_mb_s")?,
            ))
        })
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
    for s in &servers {
        let Some(rel) = s["capacity_json"].as_str() else {
            continue;
        };
        let Some(text) = load(rel) else { continue };
        let Ok(cap) = serde_json::from_str::<Value>(&text) else {
            continue;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_svg_with_labels() {
        let s = xy_chart(
            "T <1>",
            "x",
            "y",
            &[Series::new("a&b", vec![(1.0, 2.0), (2.0, 3.0)])],
            Style::LinePoints,
            false,
            true,
        );
        assert!(s.contains("<svg") && s.contains("</svg>"), "{s}");
        assert!(s.contains("a&amp;b") || s.contains("a&b"));
        let l = xy_chart(
            "cdf",
            "ms",
            "q",
            &[Series::new("c", vec![(0.5, 0.0), (500.0, 1.0)])],
            Style::Line,
            true,
            true,
        );
        assert!(l.contains("<polyline") || l.contains("<path"));
        let b = box_chart(
            "b",
            "ms",
            &[BoxStat {
                name: "dsl".into(),
                low: 1.0,
                q1: 2.0,
                median: 3.0,
                q3: 4.0,
                high: 9.0,
            }],
        );
        assert!(b.contains("dsl"));
        let bar = bar_chart("r", "x", &[("nginx".into(), 1.5)], Some(("bound", 2.0)));
        assert!(bar.contains("nginx") && bar.contains("bound"));
        // empty input still draws an (empty) chart rather than failing
        assert!(xy_chart("e", "x", "y", &[], Style::Line, false, true).contains("<svg"));
    }

    #[test]
    fn request_order_sorts_and_thins() {
        let csv = "session,shard,class,request,path,range,measured,scheduled_s,sent_s,ttfb_ms,response_ms,bytes,status,error\n\
                   0,0,c,0,/a,,1,0,2.0,1,20,10,200,\n0,0,c,1,/b,,1,0,1.0,1,10,10,200,\n0,0,c,2,/c,,1,0,3.0,1,30,10,200,\n";
        assert_eq!(
            request_order(csv, 10),
            vec![(0.0, 10.0), (1.0, 20.0), (2.0, 30.0)]
        );
        assert_eq!(request_order(csv, 2).len(), 2);
        assert!(request_order("nonsense", 5).is_empty());
    }

    #[test]
    fn page_is_self_contained() {
        let mut p = Page::new("x");
        p.section("S");
        p.table(&["a"], &[vec!["<b>".into()]]);
        let h = p.finish();
        assert!(h.contains("&lt;b&gt;"));
        assert!(!h.contains("http://") && !h.contains("https://") && !h.contains("<script"));
    }
}
