//! Thesis chapter 5's parts of the report: `vodlab analyze`'s
//! `analysis.json` (Tables 5.2–5.4 beside the thesis's, the chain-length
//! survival function with its piecewise power-law fit, the phase shares)
//! and `vodlab simulate --prefetch`'s `results.json` (peak drive
//! utilisation against peak memory, one curve per policy over a sweep's
//! sizes: the thesis's Figures 5.22–5.23).
//!
//! Both files are read through lenient mirrors of their fields, not the
//! writers' types: `vodlab-analyze`'s `Analysis` writes the last fit piece's
//! infinite upper bound as `null` (so it cannot read its own file back), the
//! simulator's row type lives in the binary crate, and the lab need not
//! depend on either. Missing fields default, so older files still load.

use serde::Deserialize;
use serde_json::Value;

use super::{grouped_bar_chart, loglog_chart, xy_chart, Page, Series, Style};

/// `format` of `analysis.json` (older files have none; see [`is_analysis`]).
pub use vodlab_analyze::logs::ANALYSIS_FORMAT;
/// `format` of a simulation written as an object `{format, rows}`; the
/// `results.json` of `vodlab simulate --prefetch` is a bare array of rows.
pub const PREFETCH_SIM_FORMAT: &str = "vodlab-prefetch-sim";

/// The thesis's published figures, copied from its chapter 5 (catalog
/// server, 24 h of March 2014) as gathered in the project's reference notes
/// (seeds-round2.md part B); [Tnnn] is the line of the thesis text. The
/// project does not read those notes at run time.
mod thesis {
    /// Table 5.2 [T1469–T1479], totals by form: (form, requests %, bytes %).
    pub const REQUESTS: [(&str, f64, f64); 3] = [
        ("chunk", 98.7, 65.2),
        ("open", 1.3, 34.8),
        ("total", 100.0, 100.0),
    ];
    /// Table 5.3 [T1485–T1489]: most concurrent requests to one file within
    /// one second, per file per session, % for 1, 2, 3, 4, 5, >= 6.
    pub const PARALLEL: [f64; 6] = [41.9, 18.0, 33.0, 6.0, 0.8, 0.3];
    /// Table 5.4 [T1508–T1518] by form: (form, chains %, requests/chain,
    /// MB/chain, nominal title s/chain). The total's 21.5 requests/chain is
    /// as printed; its rows give 28.5 (a typo in the thesis).
    pub const CHAINS: [(&str, f64, f64, f64, f64); 3] = [
        ("open", 31.5, 1.2, 15.5, 189.8),
        ("chunk", 68.5, 41.1, 13.4, 69.1),
        ("total", 100.0, 21.5, 14.1, 107.1),
    ];
    /// Time shares transient / stable / inactive, % [T1683].
    pub const PHASE_TIME: [f64; 3] = [5.2, 79.1, 16.4];
    /// Byte shares transient / stable, % [T1683].
    pub const PHASE_BYTES: [f64; 2] = [7.6, 92.4];
    /// The middle piece's c implied by d = 3.35 x at P = 0.45 [T1561].
    pub const MID_C: f64 = 0.543;
    /// d/x at P = 0.45 in the 1–200 MB piece [T1561].
    pub const MID_GROWTH: f64 = 3.35;
    /// Best (lowest) peak utilisation and memory per policy, as the text
    /// gives them [T1777–T1796]: (policy, what the thesis says).
    pub const BEST: [(&str, &str); 5] = [
        ("fixed", "57 % at 7 MB, 47 GB"),
        (
            "proportional",
            "above Fixed's best; at 7 MB 29 GB of memory",
        ),
        ("sqrt", "54 % at 8 MB; at 7 MB 31 GB of memory"),
        ("first-grow", "-5 % utilisation against Fixed at 47 GB"),
        (
            "first-grow-sr",
            "50 % at 16 MB, 52 GB; -48 % memory at 57 %",
        ),
    ];
}

/// Reading a chapter 5 file failed.
#[derive(Debug, thiserror::Error)]
pub enum Ch5Error {
    /// Not JSON of the expected shape.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A simulation file with no rows.
    #[error("no simulation rows in it")]
    NoRows,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AnalysisFile {
    span_s: f64,
    settings: AnalysisSettings,
    requests: Vec<RequestRow>,
    parallel: Vec<ParallelRow>,
    chains: Vec<ChainRow>,
    lengths: Lengths,
    survival: Vec<(f64, f64)>,
    fit: Vec<Piece>,
    phases: Phases,
    phase_shares: Shares,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AnalysisSettings {
    chain_window_s: f64,
    long_chain_s: f64,
    cluster_gap_s: f64,
    inactive_s: f64,
    survival_p: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RequestRow {
    form: String,
    requests: u64,
    requests_pct: f64,
    bytes: u64,
    bytes_pct: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ParallelRow {
    connections: String,
    files: u64,
    pct: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ChainRow {
    form: String,
    chains: u64,
    chains_pct: f64,
    requests_per_chain: f64,
    mb_per_chain: f64,
    title_s_per_chain: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Lengths {
    chains_le_1mb_pct: f64,
    chains_gt_10mb_pct: f64,
    bytes_lt_1mb_pct: f64,
    bytes_gt_10mb_pct: f64,
    from_zero_pct: f64,
    open_from_zero_768k_pct: f64,
    chunk_from_zero_lt_16k_pct: f64,
    chunk_from_zero_lt_128k_pct: f64,
}

/// A fitted piece. `vodlab analyze` writes a figure it could not compute
/// (NaN, or an infinite growth factor when c <= 0) as `null`, which reads
/// back as NaN.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Piece {
    from: f64,
    /// `null` for the last piece (infinite).
    to: Option<f64>,
    #[serde(deserialize_with = "null_is_nan")]
    a: f64,
    #[serde(deserialize_with = "null_is_nan")]
    c: f64,
    points: u64,
    #[serde(deserialize_with = "null_is_nan")]
    r2: f64,
    #[serde(deserialize_with = "null_is_nan")]
    growth: f64,
}

/// `null` (a figure the writer could not compute) as NaN.
fn null_is_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// `x` formatted by `f`, or `-` when it is not a finite number.
fn finite(x: f64, f: impl Fn(f64) -> String) -> String {
    if x.is_finite() {
        f(x)
    } else {
        "-".into()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Phases {
    sessions: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Shares {
    transient_time_pct: f64,
    stable_time_pct: f64,
    inactive_time_pct: f64,
    transient_bytes_pct: f64,
    stable_bytes_pct: f64,
    start_transient_pct: f64,
    with_stable_pct: f64,
    shorter_than_long_pct: f64,
    transient_phases_per_session: f64,
}

/// One policy at one size, as `vodlab simulate --prefetch` writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SimRow {
    policy: String,
    size: u64,
    chains: u64,
    prefetches: u64,
    device_bytes: u64,
    wasted_bytes: u64,
    peak_utilisation: f64,
    mean_utilisation: f64,
    peak_memory_bytes: u64,
}

fn format_of(v: &Value) -> Option<&str> {
    v.get("format").and_then(Value::as_str)
}

/// Whether `v` is an `analysis.json`: its `format` says so, or (files
/// written before the tag) it has no `format` and has the analysis's fields.
pub fn is_analysis(v: &Value) -> bool {
    match format_of(v) {
        Some(f) => f == ANALYSIS_FORMAT,
        None => {
            v.is_object()
                && ["requests", "chains", "survival", "fit", "phase_shares"]
                    .iter()
                    .all(|k| v.get(k).is_some())
        }
    }
}

/// Whether `v` is a prefetch simulation: a non-empty array of rows with
/// `policy`, `size`, `peak_utilisation` and `peak_memory_bytes` (what
/// `vodlab simulate --prefetch --out` writes), or an object whose `format`
/// is [`PREFETCH_SIM_FORMAT`].
pub fn is_prefetch_sim(v: &Value) -> bool {
    match v {
        Value::Array(rows) => {
            !rows.is_empty()
                && rows.iter().all(|r| {
                    ["policy", "size", "peak_utilisation", "peak_memory_bytes"]
                        .iter()
                        .all(|k| r.get(k).is_some())
                })
        }
        _ => format_of(v) == Some(PREFETCH_SIM_FORMAT),
    }
}

fn f1(x: f64) -> String {
    format!("{x:.1}")
}

fn opt(x: Option<f64>, d: usize) -> String {
    x.map_or("-".into(), |x| format!("{x:.d$}"))
}

/// Renders an `analysis.json` (its text) into the page.
pub fn analysis_section(page: &mut Page, name: &str, text: &str) -> Result<(), Ch5Error> {
    let a: AnalysisFile = serde_json::from_str(text)?;
    let s = &a.settings;
    page.section(&format!("Access-log analysis {name}"));
    page.para(&format!(
        "{} sessions, {} chains over {:.0} s of log. Chain window {} s, long chain > {} s, transient clusters < {} s apart, inactive >= {} s (the thesis's 40/40/10/40 s). The thesis's figures are for Netflix's catalog server, 24 h of March 2014 (65 M requests, 2.3 M chains); it splits each form into audio, video and combined files, which a log without bit rates cannot, so only its totals by form are beside ours.",
        a.phases.sessions,
        a.chains.iter().find(|c| c.form == "total").map_or(0, |c| c.chains),
        a.span_s,
        s.chain_window_s,
        s.long_chain_s,
        s.cluster_gap_s,
        s.inactive_s,
    ));
    requests_table(page, &a);
    parallel_part(page, &a);
    chains_table(page, &a);
    survival_part(page, &a);
    phases_part(page, &a);
    Ok(())
}

fn requests_table(page: &mut Page, a: &AnalysisFile) {
    page.heading("Requests by form (thesis Table 5.2)");
    let th = |form: &str| thesis::REQUESTS.iter().find(|t| t.0 == form);
    let mut rows: Vec<Vec<String>> = a
        .requests
        .iter()
        .map(|r| {
            vec![
                r.form.clone(),
                r.requests.to_string(),
                f1(r.requests_pct),
                th(&r.form).map_or("-".into(), |t| f1(t.1)),
                format!("{:.3}", r.bytes as f64 / 1e9),
                f1(r.bytes_pct),
                th(&r.form).map_or("-".into(), |t| f1(t.2)),
            ]
        })
        .collect();
    let (n, b): (u64, u64) = a
        .requests
        .iter()
        .fold((0, 0), |s, r| (s.0 + r.requests, s.1 + r.bytes));
    rows.push(vec![
        "total".into(),
        n.to_string(),
        f1(100.0),
        f1(100.0),
        format!("{:.3}", b as f64 / 1e9),
        f1(100.0),
        f1(100.0),
    ]);
    page.table(
        &[
            "form",
            "requests",
            "%",
            "thesis %",
            "GB sent",
            "% of bytes",
            "thesis %",
        ],
        &rows,
    );
    page.para("chunk: a range with both ends; open: open-ended (first byte only; the client closes the connection); whole: no range (the thesis's logs have none).");
}

fn parallel_part(page: &mut Page, a: &AnalysisFile) {
    page.heading("Parallel connections per file (thesis Table 5.3)");
    let rows: Vec<Vec<String>> = a
        .parallel
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                p.connections.clone(),
                p.files.to_string(),
                f1(p.pct),
                thesis::PARALLEL.get(i).map_or("-".into(), |t| f1(*t)),
            ]
        })
        .collect();
    page.table(&["connections", "files", "%", "thesis %"], &rows);
    let cats: Vec<String> = a.parallel.iter().map(|p| p.connections.clone()).collect();
    let ours: Vec<f64> = a.parallel.iter().map(|p| p.pct).collect();
    let th: Vec<f64> = thesis::PARALLEL.iter().take(cats.len()).copied().collect();
    page.figure(
        &grouped_bar_chart(
            "Most requests to one file within 1 s, per file per session",
            "% of (session, file) pairs",
            &cats,
            &[("this log".into(), ours), ("thesis Table 5.3".into(), th)],
        ),
        "Table 5.3's analogue: for each file a session touched, the most of its requests that arrived within one second (parallel connections).",
    );
}

fn chains_table(page: &mut Page, a: &AnalysisFile) {
    page.heading("Chains by form of their first request (thesis Table 5.4)");
    let th = |form: &str| thesis::CHAINS.iter().find(|t| t.0 == form);
    let rows: Vec<Vec<String>> = a
        .chains
        .iter()
        .map(|c| {
            let t = th(&c.form);
            vec![
                c.form.clone(),
                c.chains.to_string(),
                f1(c.chains_pct),
                opt(t.map(|t| t.1), 1),
                f1(c.requests_per_chain),
                opt(t.map(|t| t.2), 1),
                format!("{:.2}", c.mb_per_chain),
                opt(t.map(|t| t.3), 1),
                opt(c.title_s_per_chain, 1),
                opt(t.map(|t| t.4), 1),
            ]
        })
        .collect();
    page.table(
        &[
            "form",
            "chains",
            "%",
            "thesis %",
            "requests/chain",
            "thesis",
            "MB/chain",
            "thesis",
            "title s/chain",
            "thesis",
        ],
        &rows,
    );
    page.para("MB = 10^6 B here (the thesis does not say which). Title s: nominal title time, bytes over the file's bit rate (only where the bit rate is known). The thesis's total of 21.5 requests per chain is as printed; its rows give 28.5.");
    let l = &a.lengths;
    page.table(
        &["chain lengths", "this log %", "thesis"],
        &[
            vec![
                "chains <= 1 MB".into(),
                f1(l.chains_le_1mb_pct),
                "> 60 %".into(),
            ],
            vec![
                "chains > 10 MB".into(),
                f1(l.chains_gt_10mb_pct),
                "about 15 %".into(),
            ],
            vec![
                "bytes in chains < 1 MB".into(),
                f1(l.bytes_lt_1mb_pct),
                "< 2 %".into(),
            ],
            vec![
                "bytes in chains > 10 MB".into(),
                f1(l.bytes_gt_10mb_pct),
                "> 90 %".into(),
            ],
            vec![
                "chains from offset 0".into(),
                f1(l.from_zero_pct),
                "about 24 %".into(),
            ],
            vec![
                "open-ended from 0, exactly 768 KiB".into(),
                f1(l.open_from_zero_768k_pct),
                "84 %".into(),
            ],
            vec![
                "chunk from 0, < 16 KiB".into(),
                f1(l.chunk_from_zero_lt_16k_pct),
                "> 49 %".into(),
            ],
            vec![
                "chunk from 0, < 128 KiB".into(),
                f1(l.chunk_from_zero_lt_128k_pct),
                "98 %".into(),
            ],
        ],
    );
}

fn survival_part(page: &mut Page, a: &AnalysisFile) {
    page.heading("Chain-length survival function (thesis Fig. 5.13)");
    let p = a.settings.survival_p;
    let xmax = a.survival.iter().map(|s| s.0).fold(0.0, f64::max);
    let mut series =
        vec![Series::new("this log, P(X >= x)", a.survival.clone()).with_style(Style::LinePoints)];
    // a piece without a line (null A or c) is in the table, not drawn
    for f in a.fit.iter().filter(|f| f.a.is_finite() && f.c.is_finite()) {
        let lo = f.from.max(a.survival.first().map_or(1.0, |s| s.0)).max(1.0);
        let hi = f.to.unwrap_or(xmax).min(xmax.max(lo));
        let pts: Vec<(f64, f64)> = (0..=16)
            .map(|k| {
                let x = lo * (hi / lo).powf(k as f64 / 16.0);
                (x, f.a * x.powf(-f.c))
            })
            .collect();
        series.push(
            Series::new(
                format!("fit {}: A = {:.3e}, c = {:.3}", span(f), f.a, f.c),
                pts,
            )
            .with_style(Style::Line),
        );
    }
    page.figure(
        &loglog_chart(
            "Chain-length survival function and its piecewise power-law fit",
            "chain length x, bytes (log)",
            "P(X >= x) (log)",
            &series,
            Style::LinePoints,
        ),
        "Dots: the share of chains at least x long (log-spaced bins). Lines: S(x) = A x^-c fitted by least squares on the log-log points of each piece (vodlab analyze --fit-breaks).",
    );
    let mut rows: Vec<Vec<String>> = a
        .fit
        .iter()
        .map(|f| {
            vec![
                span(f),
                finite(f.a, |x| format!("{x:.4e}")),
                finite(f.c, |x| format!("{x:.4}")),
                finite(f.growth, |x| format!("{x:.3}")),
                f.points.to_string(),
                finite(f.r2, |x| format!("{x:.4}")),
            ]
        })
        .collect();
    rows.push(vec![
        "thesis, 1 MB – 200 MB".into(),
        "in Fig. 5.13 only".into(),
        format!("{:.3} (derived)", thesis::MID_C),
        format!("{:.2}", thesis::MID_GROWTH),
        "-".into(),
        "-".into(),
    ]);
    page.table(
        &[
            "piece",
            "A",
            "c",
            &format!("d/x at P = {p}"),
            "points",
            "r²",
        ],
        &rows,
    );
    page.para(&format!("d/x = P^(-1/c) - 1: a chain x bytes long has probability P = {p} of growing by another d bytes (eqs 5.2–5.3). The thesis's 3.35 at P = 0.45 sets First-Grow's growth factor; c = 0.543 is what it implies."));
}

/// `1 MB – 200 MB` style bounds of a piece.
fn span(f: &Piece) -> String {
    let b = |x: f64| {
        if x <= 0.0 {
            "0".to_string()
        } else if x >= 1e6 {
            format!("{} MB", x / 1e6)
        } else {
            format!("{} kB", x / 1e3)
        }
    };
    format!("{} – {}", b(f.from), f.to.map_or("∞".to_string(), b))
}

fn phases_part(page: &mut Page, a: &AnalysisFile) {
    page.heading("Phases (thesis section 5.4.4)");
    let s = &a.phase_shares;
    let ours = vec![s.transient_time_pct, s.stable_time_pct, s.inactive_time_pct];
    page.figure(
        &grouped_bar_chart(
            "Share of session time by phase",
            "% of session time",
            &["transient".into(), "stable".into(), "inactive".into()],
            &[
                ("this log".into(), ours),
                ("thesis".into(), thesis::PHASE_TIME.to_vec()),
            ],
        ),
        "Transient: clusters of short chains less than the cluster gap apart; stable: each long chain; inactive: no request for the inactive time. The thesis's shares add up to 100.7 % (transient and stable phases overlap a little).",
    );
    page.table(
        &["phase measure", "this log", "thesis"],
        &[
            vec![
                "time transient %".into(),
                f1(s.transient_time_pct),
                f1(thesis::PHASE_TIME[0]),
            ],
            vec![
                "time stable %".into(),
                f1(s.stable_time_pct),
                f1(thesis::PHASE_TIME[1]),
            ],
            vec![
                "time inactive %".into(),
                f1(s.inactive_time_pct),
                f1(thesis::PHASE_TIME[2]),
            ],
            vec![
                "bytes transient %".into(),
                f1(s.transient_bytes_pct),
                f1(thesis::PHASE_BYTES[0]),
            ],
            vec![
                "bytes stable %".into(),
                f1(s.stable_bytes_pct),
                f1(thesis::PHASE_BYTES[1]),
            ],
            vec![
                "sessions starting transient %".into(),
                f1(s.start_transient_pct),
                "> 97".into(),
            ],
            vec![
                "sessions with a stable phase %".into(),
                f1(s.with_stable_pct),
                "56".into(),
            ],
            vec![
                "sessions shorter than a long chain %".into(),
                f1(s.shorter_than_long_pct),
                "33".into(),
            ],
            vec![
                "transient phases per session".into(),
                format!("{:.2}", s.transient_phases_per_session),
                "4 (chapter summary)".into(),
            ],
        ],
    );
}

/// `7 MB`, `512 kB`: a sweep size for labels.
fn size_label(b: u64) -> String {
    let x = b as f64;
    if x >= 1e6 {
        format!("{} MB", (x / 1e3).round() / 1e3)
    } else {
        format!("{} kB", (x / 1.0).round() / 1e3)
    }
}

/// Renders a prefetch simulation's `results.json` (its text) into the page.
pub fn prefetch_sim_section(page: &mut Page, name: &str, text: &str) -> Result<(), Ch5Error> {
    let v: Value = serde_json::from_str(text)?;
    let rows: Vec<SimRow> = match v {
        Value::Array(_) => serde_json::from_value(v)?,
        mut o => serde_json::from_value(o.get_mut("rows").map(Value::take).unwrap_or_default())?,
    };
    if rows.is_empty() {
        return Err(Ch5Error::NoRows);
    }
    page.section(&format!("Prefetch simulation {name}"));
    let mut policies: Vec<&str> = Vec::new();
    for r in &rows {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    page.para(&format!(
        "{} chains; {} policies at {} sizes. Drive utilisation = transfer time / transfer rate + seeks / seek rate per drive and 60 s bucket (the thesis's model); memory = prefetch buffers from a chain's first prefetch until 40 s after it ends. The thesis's numbers are for its 36-drive catalog server over a day; compare shapes and orderings, not values.",
        rows[0].chains,
        policies.len(),
        rows.len() / policies.len().max(1),
    ));
    let curve = |p: &str, x: fn(&SimRow) -> f64| -> Series {
        let mut rs: Vec<&SimRow> = rows.iter().filter(|r| r.policy == p).collect();
        rs.sort_by_key(|r| r.size);
        Series::new(
            p,
            rs.iter()
                .map(|r| (x(r), 100.0 * r.peak_utilisation))
                .collect(),
        )
        .with_labels(rs.iter().map(|r| size_label(r.size)).collect())
    };
    let by_mem: Vec<Series> = policies
        .iter()
        .map(|p| curve(p, |r| r.peak_memory_bytes as f64 / 1e9))
        .collect();
    let (lo, hi) = rows
        .iter()
        .map(|r| r.peak_memory_bytes as f64)
        .filter(|m| *m > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(l, h), m| (l.min(m), h.max(m)));
    page.figure(
        &xy_chart(
            "Peak drive utilisation against peak memory (thesis Figs 5.22–5.23)",
            if hi > 30.0 * lo { "peak prefetch memory, GB (log)" } else { "peak prefetch memory, GB" },
            "peak drive utilisation, %",
            &by_mem,
            Style::LinePoints,
            hi > 30.0 * lo,
            true,
        ),
        "One curve per policy over the sweep's sizes (labels: the size; for First-Grow the maximum; Proportional and Square-Root at 2,000 kbit/s). Lower and to the left is better; above 100 % the drives cannot keep up.",
    );
    let by_size: Vec<Series> = policies
        .iter()
        .map(|p| Series::new(*p, curve(p, |r| r.size as f64 / 1e6).points))
        .collect();
    if rows.len() > policies.len() {
        page.figure(
            &xy_chart(
                "Peak drive utilisation against prefetch size",
                "size, MB (log)",
                "peak drive utilisation, %",
                &by_size,
                Style::LinePoints,
                true,
                true,
            ),
            "Small sizes pay seeks, large sizes pay reading what no client asks for: Fixed's curve has an interior minimum (the thesis: 57 % at 7 MB).",
        );
    }
    page.table(
        &[
            "policy",
            "size MB",
            "peak util %",
            "mean util %",
            "peak memory GB",
            "device GB",
            "wasted GB",
            "prefetches",
            "chains",
        ],
        &rows
            .iter()
            .map(|r| {
                vec![
                    r.policy.clone(),
                    format!("{:.3}", r.size as f64 / 1e6),
                    f1(100.0 * r.peak_utilisation),
                    f1(100.0 * r.mean_utilisation),
                    format!("{:.3}", r.peak_memory_bytes as f64 / 1e9),
                    format!("{:.3}", r.device_bytes as f64 / 1e9),
                    format!("{:.3}", r.wasted_bytes as f64 / 1e9),
                    r.prefetches.to_string(),
                    r.chains.to_string(),
                ]
            })
            .collect::<Vec<_>>(),
    );
    let best: Vec<Vec<String>> = policies
        .iter()
        .filter_map(|p| {
            let r = rows
                .iter()
                .filter(|r| r.policy == *p)
                .min_by(|x, y| x.peak_utilisation.total_cmp(&y.peak_utilisation))?;
            Some(vec![
                p.to_string(),
                f1(100.0 * r.peak_utilisation),
                size_label(r.size),
                format!("{:.3}", r.peak_memory_bytes as f64 / 1e9),
                thesis::BEST
                    .iter()
                    .find(|t| t.0 == *p)
                    .map_or("-".into(), |t| t.1.to_string()),
            ])
        })
        .collect();
    page.table(
        &[
            "policy",
            "lowest peak util %",
            "at size",
            "its memory GB",
            "thesis (5.6.3)",
        ],
        &best,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_files_apart() {
        let old: Value = serde_json::json!({"requests": [], "chains": [], "survival": [], "fit": [], "phase_shares": {}});
        assert!(is_analysis(&old));
        assert!(is_analysis(&serde_json::json!({"format": ANALYSIS_FORMAT})));
        assert!(!is_analysis(
            &serde_json::json!({"format": "vodlab-results", "requests": [], "chains": [], "survival": [], "fit": [], "phase_shares": {}})
        ));
        let sim = serde_json::json!([{"policy": "fixed", "size": 7000000, "peak_utilisation": 0.5, "peak_memory_bytes": 10}]);
        assert!(is_prefetch_sim(&sim));
        assert!(!is_prefetch_sim(&serde_json::json!([])));
        assert!(!is_prefetch_sim(&serde_json::json!([{"policy": "fixed"}])));
        assert!(!is_prefetch_sim(&old));
    }

    #[test]
    fn draws_an_analysis_with_a_null_last_bound() {
        let text = r#"{"format":"vodlab-analysis","span_s":10,"settings":{"survival_p":0.45},
          "requests":[{"form":"chunk","requests":9,"requests_pct":90,"bytes":900,"bytes_pct":90}],
          "parallel":[{"connections":"1","files":3,"pct":75}],
          "chains":[{"form":"total","chains":4,"chains_pct":100,"requests_per_chain":2.5,"mb_per_chain":1.5,"title_s_per_chain":null}],
          "survival":[[1000,1.0],[10000,0.5],[100000,0.1]],
          "fit":[{"from":0,"to":null,"a":31.6,"c":0.5,"points":3,"r2":0.99,"growth":3.9}],
          "phase_shares":{"transient_time_pct":12.5}}"#;
        let mut p = Page::new("t");
        analysis_section(&mut p, "x", text).unwrap();
        let h = p.finish();
        assert!(h.matches("<svg").count() >= 3, "{h}");
        assert!(h.contains("3.1600e1") && h.contains("12.5") && h.contains("0 – ∞"));
    }

    #[test]
    fn reads_fit_figures_written_as_null() {
        // what analyze writes when a piece is flat (c = 0: infinite growth)
        // or has no line: null, read as not computed and shown as "-"
        let text = r#"{"format":"vodlab-analysis","span_s":1,"settings":{"survival_p":0.45},
          "survival":[[1000,1.0],[2000,1.0]],
          "fit":[{"from":0,"to":null,"a":1.0,"c":0.0,"points":2,"r2":1.0,"growth":null},
                 {"from":5000,"to":null,"a":null,"c":null,"points":0,"r2":null,"growth":null}]}"#;
        let mut p = Page::new("t");
        analysis_section(&mut p, "x", text).unwrap();
        let h = p.finish();
        assert!(
            h.contains("<td>1.0000e0</td><td>0.0000</td><td>-</td>"),
            "{h}"
        );
        assert!(
            h.contains("<td>-</td><td>-</td><td>-</td><td>0</td><td>-</td>"),
            "{h}"
        );
        assert!(!h.contains("NaN"), "{h}");
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(7_000_000), "7 MB");
        assert_eq!(size_label(1_500_000), "1.5 MB");
        assert_eq!(size_label(512_000), "512 kB");
    }
}
