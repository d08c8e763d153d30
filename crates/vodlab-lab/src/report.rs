//! `vodlab report`: one self-contained HTML file with SVG figures (drawn with
//! plotters' SVG backend, no scripts, no fonts or styles fetched) from
//! results.json, capacity.json or compare.json files, and chapter 5's
//! analysis.json (`vodlab analyze`) and prefetch simulations ([`ch5`]).

use std::fmt::Write as _;

use plotters::prelude::*;

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
    /// Optional text drawn beside point `i` (e.g. the sweep's size).
    pub labels: Vec<String>,
    /// How this series is drawn, when not the chart's style.
    pub style: Option<Style>,
}

impl Series {
    /// A series without error bars.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            errors: Vec::new(),
            labels: Vec::new(),
            style: None,
        }
    }
    /// The same series drawn in `style` whatever the chart's.
    pub fn with_style(mut self, style: Style) -> Self {
        self.style = Some(style);
        self
    }
    /// The same series with `labels[i]` written beside point `i`.
    pub fn with_labels(mut self, labels: Vec<String>) -> Self {
        self.labels = labels;
        self
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
    xy_inner(
        title,
        x_desc,
        y_desc,
        series,
        style,
        log_x,
        false,
        y_from_zero,
    )
}

/// Line/scatter chart with both axes on log scales (e.g. a survival
/// function); points with x or y <= 0 are left out.
pub fn loglog_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    style: Style,
) -> String {
    let positive: Vec<Series> = series
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s
                .points
                .iter()
                .copied()
                .filter(|p| p.0 > 0.0 && p.1 > 0.0)
                .collect(),
            errors: Vec::new(),
            labels: Vec::new(),
            style: s.style,
        })
        .collect();
    xy_inner(title, x_desc, y_desc, &positive, style, true, true, false)
}

/// Tick labels of a log axis: only 1, 2 and 5 times a power of ten are
/// written (the other ticks would overlap), plain between 0.01 and 10^5,
/// else `2e6` style.
fn log_tick(v: &f64) -> String {
    if !(v.is_finite() && *v > 0.0) {
        return String::new();
    }
    let e = v.log10().floor();
    let m = (v / 10f64.powf(e) * 1e6).round() / 1e6;
    if ![1.0, 2.0, 5.0, 10.0].contains(&m) {
        return String::new();
    }
    if (0.01..1e5).contains(v) {
        let decimals = (-e).max(0.0) as usize;
        format!("{v:.decimals$}")
    } else {
        format!("{v:.0e}")
    }
}

#[allow(clippy::too_many_arguments)]
fn xy_inner(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    style: Style,
    log_x: bool,
    log_y: bool,
    y_from_zero: bool,
) -> String {
    let mut svg = String::new();
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (mut x0, x1) = bounds(all().map(|p| p.0));
    let (mut y0, mut y1) = bounds(
        all()
            .map(|p| p.1)
            .chain(series.iter().flat_map(|s| s.errors.iter().map(|e| e.2))),
    );
    if log_y {
        y0 = y0.max(1e-12);
        y1 *= 1.3;
    } else {
        if y_from_zero {
            y0 = y0.min(0.0);
        }
        y1 += (y1 - y0) * 0.05;
    }
    if log_x {
        x0 = x0.max(1e-3);
    }
    // labelled points: room on the right for the last labels and on top
    // for the legend, which would otherwise hide the first points
    let labelled = series.iter().any(|s| !s.labels.is_empty());
    let (x_pad, x_log_pad) = if labelled { (0.12, 1.3) } else { (0.02, 1.05) };
    if labelled && !log_y {
        y1 += (y1 - y0) * 0.4;
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
                let mut mesh = chart.configure_mesh();
                mesh.x_desc(x_desc)
                    .y_desc(y_desc)
                    .light_line_style(RGBColor(235, 235, 235));
                if log_x {
                    mesh.x_label_formatter(&log_tick);
                }
                if log_y {
                    mesh.y_label_formatter(&log_tick);
                }
                let _ = mesh.draw();
                for (i, s) in series.iter().enumerate() {
                    let c = PALETTE[i % PALETTE.len()];
                    let pts = s.points.clone();
                    let _ = chart.draw_series(s.points.iter().zip(&s.labels).map(|(p, l)| {
                        Text::new(
                            format!(" {l}"),
                            *p,
                            ("sans-serif", 12).into_font().color(&c),
                        )
                    }));
                    let anno = match s.style.unwrap_or(style) {
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
        if log_x && log_y {
            if let Ok(c) =
                b.build_cartesian_2d((x0..x1 * x_log_pad).log_scale(), (y0..y1).log_scale())
            {
                draw!(c);
            }
        } else if log_x {
            if let Ok(c) = b.build_cartesian_2d((x0..x1 * x_log_pad).log_scale(), y0..y1) {
                draw!(c);
            }
        } else if let Ok(c) = b.build_cartesian_2d(x0..x1 + (x1 - x0) * x_pad, y0..y1) {
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

/// Bars in groups: one group per category, one bar (and legend entry) per
/// series, e.g. ours beside the thesis's.
pub fn grouped_bar_chart(
    title: &str,
    y_desc: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
) -> String {
    let mut svg = String::new();
    let n = categories.len().max(1);
    let (_, mut y1) = bounds(series.iter().flat_map(|s| s.1.iter().copied()).chain([0.0]));
    y1 *= 1.15;
    let width = 0.8 / series.len().max(1) as f64;
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
                .x_label_formatter(&|x| category_label(categories, *x))
                .y_desc(y_desc)
                .draw();
            for (g, (name, vals)) in series.iter().enumerate() {
                let c = PALETTE[g % PALETTE.len()];
                let left = |i: usize| i as f64 - 0.4 + g as f64 * width;
                let bars = vals.iter().enumerate().take(n).map(|(i, v)| {
                    Rectangle::new([(left(i), 0.0), (left(i) + width * 0.92, *v)], c.filled())
                });
                if let Ok(a) = chart.draw_series(bars) {
                    a.label(name.clone()).legend(move |(x, y)| {
                        Rectangle::new([(x, y - 4), (x + 14, y + 4)], c.filled())
                    });
                }
                let _ = chart.draw_series(vals.iter().enumerate().take(n).map(|(i, v)| {
                    Text::new(
                        format!("{v:.1}"),
                        (left(i), *v + y1 * 0.02),
                        ("sans-serif", 11),
                    )
                }));
            }
            let _ = chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .draw();
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
    warnings: Vec<String>,
}

impl Page {
    /// An empty page.
    pub fn new(title: &str) -> Self {
        Self {
            max_dots: 20_000,
            body: String::new(),
            title: title.to_string(),
            toc: Vec::new(),
            warnings: Vec::new(),
        }
    }
    /// A warning that must not be missed (an incomplete or invalid run, a
    /// run in which no session succeeded): a banner where it occurs and
    /// again at the top of the page.
    pub fn warn(&mut self, text: &str) {
        let _ = writeln!(self.body, "<p class=\"warn\">{}</p>", esc(text));
        self.warnings.push(text.to_string());
    }
    /// The warnings given so far.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
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
        for w in &self.warnings {
            let _ = write!(toc, "<p class=\"warn\">{}</p>", esc(w));
        }
        for (id, t) in &self.toc {
            let _ = write!(toc, "<li><a href=\"#{id}\">{}</a></li>", esc(t));
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>\
             body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}\
             table{{border-collapse:collapse;margin:1em 0;font-size:14px}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
             th{{background:#f3f3f3}}td:first-child,th:first-child{{text-align:left}}figure{{margin:1em 0}}\
             figcaption{{font-size:13px;color:#555;max-width:720px}}svg{{max-width:100%;height:auto}}\
             .warn{{background:#fde8e8;border:2px solid #c0392b;color:#7b1d13;padding:8px 12px;font-weight:bold}}\
             </style></head><body>\n<h1>{t}</h1>\n<ul>{toc}</ul>\n{b}\n<p style=\"color:#888;font-size:12px\">Rendered by vodlab report; self-contained, no network needed.</p></body></html>\n",
            t = esc(&self.title),
            b = self.body
        )
    }
}

pub mod ch5;
mod inputs;
pub mod pacing;
pub mod players;
mod sections;
pub use ch5::{analysis_section, is_analysis, is_prefetch_sim, prefetch_sim_section};
pub use inputs::{locate, render, ReportArgs, ReportError};
pub use pacing::{delivery_section, pacing_section, PacingManifest, PacingRun};
pub use players::players_section;
pub use sections::{capacity_section, compare_section, request_order, run_section};

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
        assert_eq!(
            ["0.01", "0.2", "", "5", "100", "", "1e6", "2e7"],
            [0.01, 0.2, 0.3, 5.0, 100.0, 300.0, 1e6, 2e7].map(|v| log_tick(&v))
        );
        let ll = loglog_chart(
            "ccdf",
            "B",
            "P",
            &[Series::new("s", vec![(1e3, 1.0), (1e6, 0.01), (0.0, 0.5)])],
            Style::Line,
        );
        assert!(ll.contains("1e6") && ll.contains("0.1"), "{ll}");
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

    /// An incomplete, invalid or all-failed run is a banner at the top of
    /// the page, not a `valid true` cell (the issue's finding 5).
    #[test]
    fn a_run_that_must_not_be_read_as_an_answer_is_a_banner_at_the_top() {
        let mut v = vodlab_client::out::results::shape(&["dsl".to_string()]);
        v["workload"] = "w".into();
        v["valid"] = true.into();
        v["invalid_reasons"] = serde_json::json!([]);
        let clean: vodlab_client::Results = serde_json::from_value(v.clone()).unwrap();
        let mut p = Page::new("r");
        run_section(&mut p, "w", &clean, None);
        let html = p.finish();
        assert!(
            !html.contains("class=\"warn\""),
            "a clean run has no banner"
        );
        assert!(html.contains("complete, valid"));

        v["complete"] = false.into();
        v["stopped_by"] = "interrupted".into();
        v["started_sessions"] = 20.into();
        v["measured_sessions"] = 2.into();
        let r: vodlab_client::Results = serde_json::from_value(v.clone()).unwrap();
        let mut p = Page::new("r");
        p.section("first");
        run_section(&mut p, "w", &r, None);
        let html = p.finish();
        let banner = html
            .find("INCOMPLETE: the run stopped early (interrupted)")
            .unwrap();
        let toc = html.find("<a href=\"#s0\">").unwrap();
        assert!(banner < toc, "the banner comes before the contents");
        assert!(html.contains("INCOMPLETE, valid"));
        assert!(html.contains("2 (of 20 started)"));

        v["complete"] = true.into();
        v["intervals"] = serde_json::json!([{ "t_s": 0.0, "throughput_bytes_per_s": 0.0,
            "completed_requests": 0, "active_sessions": 3, "started": 3, "completed": 0,
            "failed": 3, "cpu_pct": 0.0 }]);
        v["started_sessions"] = 3.into();
        let r: vodlab_client::Results = serde_json::from_value(v).unwrap();
        let mut p = Page::new("r");
        run_section(&mut p, "w", &r, None);
        assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
        assert!(p.warnings()[0].contains("NO SESSION SUCCEEDED: 3 of 3 started sessions failed"));
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
