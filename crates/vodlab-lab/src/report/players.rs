//! The report's players part (`vodlab run --player` results): QoE
//! distributions per client class (a table and box plots from the
//! run's HdrHistogram summaries) and the rendition timelines of the
//! sampled sessions, one small step chart of bit rate over session time
//! each, its rebuffers shaded.

use plotters::prelude::*;
use vodlab_client::out::metrics::Summary;
use vodlab_client::player_run::{PlayerClassResults, PlayersResults, SessionTimeline};

use super::{bar_chart, box_chart, BoxStat, Page, PALETTE, W};

/// Most sample sessions drawn (the rest are in the table only).
pub const MAX_DRAWN: usize = 16;
/// Height of one session's timeline chart, px.
const TIMELINE_H: u32 = 170;
/// Shade of a rebuffer (crimson: none of the palette's line colours).
const REBUFFER: RGBColor = RGBColor(220, 20, 60);

/// A session's bit rate over session time as step points: each rendition
/// holds from its segment's request to the next request (the last to its
/// arrival).
pub fn steps(t: &SessionTimeline) -> Vec<(f64, f64)> {
    let mut pts = Vec::with_capacity(t.segments.len() * 2);
    for (i, s) in t.segments.iter().enumerate() {
        let end = t
            .segments
            .get(i + 1)
            .map_or(s.start_s + s.download_ms / 1e3, |n| n.start_s);
        pts.push((s.start_s, s.bitrate_kbps));
        pts.push((end, s.bitrate_kbps));
    }
    pts
}

/// One session's timeline chart: the bit rate it requested as steps, the
/// buffer level after each segment as grey dots (scaled so that
/// `top_buffer_s` is `top_kbps`), rebuffers as shaded intervals; `top_kbps`
/// is the y range shared by the charts of one run. No legend (it would
/// hide the lines of a chart this low): the page's text says what is what.
pub fn timeline_chart(
    t: &SessionTimeline,
    colour: RGBColor,
    top_kbps: f64,
    top_buffer_s: f64,
) -> String {
    let mut svg = String::new();
    let pts = steps(t);
    let end = pts
        .iter()
        .map(|p| p.0)
        .chain(t.rebuffers.iter().map(|r| r.start_s + r.duration_ms / 1e3))
        .fold(1e-3, f64::max);
    let y1 = top_kbps.max(1.0) * 1.1;
    let caption = format!(
        "session {} ({}, {}){}",
        t.session,
        t.class,
        t.title,
        t.error
            .as_ref()
            .map_or(String::new(), |e| format!(" failed: {e}"))
    );
    {
        let root = SVGBackend::with_string(&mut svg, (W, TIMELINE_H)).into_drawing_area();
        let _ = root.fill(&WHITE);
        if let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..end * 1.02, 0.0..y1)
        {
            let _ = chart
                .configure_mesh()
                .x_desc("session time, s")
                .y_desc("kbit/s")
                .y_labels(4)
                .light_line_style(RGBColor(235, 235, 235))
                .draw();
            let _ = chart.draw_series(t.rebuffers.iter().map(|r| {
                Rectangle::new(
                    [(r.start_s, 0.0), (r.start_s + r.duration_ms / 1e3, y1)],
                    REBUFFER.mix(0.3).filled(),
                )
            }));
            let _ = chart.draw_series(LineSeries::new(pts, colour.stroke_width(2)));
            if top_buffer_s > 0.0 {
                let grey = RGBColor(120, 120, 120);
                let _ = chart.draw_series(t.segments.iter().map(|s| {
                    Circle::new(
                        (
                            s.start_s + s.download_ms / 1e3,
                            s.buffer_after_s / top_buffer_s * top_kbps,
                        ),
                        2,
                        grey.filled(),
                    )
                }));
            }
        }
        let _ = root.present();
    }
    svg
}

/// A box of a per-class summary (quartiles, minimum, 99th percentile).
fn box_of(name: &str, s: &Summary) -> Option<BoxStat> {
    (s.count > 0).then(|| BoxStat {
        name: name.to_string(),
        low: s.min,
        q1: s.p25,
        median: s.p50,
        q3: s.p75,
        high: s.p99,
    })
}

/// One row of the per-class table.
fn class_row(name: &str, c: &PlayerClassResults) -> Vec<String> {
    let done = c.sessions - c.failed;
    vec![
        name.to_string(),
        c.sessions.to_string(),
        c.failed.to_string(),
        format!("{:.0}", c.startup_delay_ms.p50),
        format!("{:.0}", c.startup_delay_ms.p95),
        if done > 0 {
            format!("{:.1}", 100.0 * c.rebuffered_sessions as f64 / done as f64)
        } else {
            "-".into()
        },
        format!("{:.1}", c.rebuffer_time_s),
        format!("{:.2}", 100.0 * c.rebuffer_ratio.p95),
        format!("{:.0}", c.mean_bitrate_kbps.p25),
        format!("{:.0}", c.mean_bitrate_kbps.p50),
        format!("{:.0}", c.mean_bitrate_kbps.p90),
        format!("{:.2}", c.switches_up.mean + c.switches_down.mean),
        format!("{:.0}", c.yin_qoe_per_segment.p50),
    ]
}

/// Renders a run's `players` results into the page.
pub fn players_section(page: &mut Page, name: &str, p: &PlayersResults) {
    page.heading(&format!(
        "{name}: Closed-loop players ({}, {} rule, buffer {} s)",
        p.player, p.abr, p.max_buffer_s
    ));
    let mut rows = vec![class_row("all", &p.overall)];
    rows.extend(p.classes.iter().map(|(k, c)| class_row(k, c)));
    page.table(
        &[
            "client class",
            "sessions",
            "failed",
            "start-up p50 ms",
            "p95 ms",
            "rebuffered %",
            "rebuffer s (all)",
            "rebuffer ratio p95 %",
            "mean bit rate p25 kbit/s",
            "p50",
            "p90",
            "switches/session",
            "Yin QoE/segment p50",
        ],
        &rows,
    );
    if !p.errors.is_empty() {
        let e: Vec<String> = p.errors.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        page.para(&format!("Failed sessions by error: {}.", e.join(", ")));
    }
    let boxes = |pick: fn(&PlayerClassResults) -> &Summary| -> Vec<BoxStat> {
        p.classes
            .iter()
            .filter_map(|(k, c)| box_of(k, pick(c)))
            .collect()
    };
    let br = boxes(|c| &c.mean_bitrate_kbps);
    if !br.is_empty() {
        page.figure(
            &box_chart(
                &format!("Sessions' mean bit rate by client class ({name})"),
                "kbit/s",
                &br,
            ),
            "Mean nominal bit rate of the segments each completed session played. Box: quartiles; line: median; whiskers: minimum and 99th percentile (HdrHistograms, 3 significant digits).",
        );
    }
    let su = boxes(|c| &c.startup_delay_ms);
    if !su.is_empty() {
        page.figure(
            &box_chart(
                &format!("Player start-up delay by client class ({name})"),
                "ms",
                &su,
            ),
            "First segment request to playback start (the manifest fetch not included). Box: quartiles; whiskers: minimum and 99th percentile.",
        );
    }
    let rb: Vec<(String, f64)> = p
        .classes
        .iter()
        .filter(|(_, c)| c.sessions > c.failed)
        .map(|(k, c)| {
            (
                k.clone(),
                100.0 * c.rebuffered_sessions as f64 / (c.sessions - c.failed) as f64,
            )
        })
        .collect();
    if !rb.is_empty() {
        page.figure(
            &bar_chart(
                &format!("Player sessions that rebuffered, by client class ({name})"),
                "% of completed sessions",
                &rb,
                None,
            ),
            "A rebuffer: the playout buffer ran dry after playback started.",
        );
    }
    timelines_part(page, name, p);
}

/// The sample sessions' table and timeline charts.
fn timelines_part(page: &mut Page, name: &str, p: &PlayersResults) {
    if p.timelines.is_empty() {
        if p.timeline_sample == 0 {
            page.para("No rendition timelines were kept (--player-timelines 0).");
        }
        return;
    }
    page.heading(&format!("{name}: Bit rate over time of sample sessions"));
    let top = p
        .timelines
        .iter()
        .flat_map(|t| t.segments.iter().map(|s| s.bitrate_kbps))
        .fold(0.0, f64::max);
    page.para(&format!(
        "The {} sessions with the smallest ids of the {} sampled (--player-timelines); the first {} are drawn. Coloured line: the rendition's bit rate from each segment's request to the next; grey dots: the buffer level once the segment arrived, on the same axis scaled so that the top rung ({:.0} kbit/s) stands for the buffer capacity ({} s); shaded: rebuffers. Session time includes the manifest fetch.",
        p.timelines.len(),
        p.timeline_sample,
        p.timelines.len().min(MAX_DRAWN),
        top,
        p.max_buffer_s,
    ));
    let rows: Vec<Vec<String>> = p
        .timelines
        .iter()
        .map(|t| {
            let n = t.segments.len();
            let mean = t.segments.iter().map(|s| s.bitrate_kbps).sum::<f64>() / n.max(1) as f64;
            let switches = t
                .segments
                .windows(2)
                .filter(|w| w[0].level != w[1].level)
                .count();
            let stall_ms = t.rebuffers.iter().fold(0.0, |a, r| a + r.duration_ms);
            vec![
                t.session.to_string(),
                t.class.clone(),
                t.title.clone(),
                t.startup_delay_ms
                    .map_or("-".into(), |ms| format!("{ms:.0}")),
                n.to_string(),
                format!("{mean:.0}"),
                switches.to_string(),
                t.abandoned.len().to_string(),
                format!("{} ({:.0} ms)", t.rebuffers.len(), stall_ms),
                t.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    page.table(
        &[
            "session",
            "class",
            "title",
            "start-up ms",
            "segments",
            "mean kbit/s",
            "switches",
            "abandoned",
            "rebuffers",
            "error",
        ],
        &rows,
    );
    for (i, t) in p.timelines.iter().take(MAX_DRAWN).enumerate() {
        let svg = timeline_chart(t, PALETTE[i % PALETTE.len()], top, p.max_buffer_s);
        page.figure(
            &svg,
            &format!(
                "Session {}: {} segments, {} rebuffers{}.",
                t.session,
                t.segments.len(),
                t.rebuffers.len(),
                if t.truncated {
                    " (timeline truncated at its cap)"
                } else {
                    ""
                }
            ),
        );
    }
}

#[cfg(test)]
mod tests;
