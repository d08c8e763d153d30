//! `vodlab report`'s inputs: the settings, finding the result file of a
//! directory, and rendering the files into one page ([`render`]).

use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;
use vodlab_client::Results;

use super::{
    analysis_section, capacity_section, compare_section, delivery_section, is_analysis,
    is_prefetch_sim, pacing_section, prefetch_sim_section, run_section, PacingManifest, PacingRun,
    Page,
};
use crate::{CapacityFile, CompareFile};

/// Arguments of `vodlab report`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct ReportArgs {
    /// Result directories or files: pacing.json, compare.json, capacity.json,
    /// results.json or analysis.json (a directory holding one of them, in that
    /// order), as `vodlab run`, `merge`, `capacity`, `compare`, `bench`,
    /// `analyze` and `simulate --prefetch` write them. results.json is a run's
    /// (`vodlab run -o`, or `vodlab merge -o`'s merged shards) or a prefetch
    /// simulation's (`vodlab simulate --prefetch --out`: utilisation against
    /// memory per policy, thesis Figs 5.22-5.23); analysis.json is `vodlab
    /// analyze -o`'s (Tables 5.2-5.4 beside the thesis's, the chain-length
    /// survival fit, phase shares). Several inputs give one page with a part
    /// for each.
    #[cfg_attr(feature = "cli", arg(required = true, value_name = "DIR|FILE"))]
    pub inputs: Vec<PathBuf>,
    /// The HTML file to write, relative to the current directory (the
    /// inputs' directories are only read).
    #[cfg_attr(
        feature = "cli",
        arg(
            short = 'o',
            long = "out",
            alias = "output",
            value_name = "FILE",
            default_value = "report.html"
        )
    )]
    pub output: PathBuf,
    /// Page title.
    #[cfg_attr(feature = "cli", arg(long, default_value = "vodlab report"))]
    pub title: String,
    /// Most requests drawn in each per-request figure (evenly thinned).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 20_000))]
    pub max_dots: usize,
}

/// Why a report could not be rendered.
#[derive(Debug, Error)]
pub enum ReportError {
    /// An input is not a result this vodlab reads (the message says which).
    #[error("{0}")]
    Input(String),
    /// A file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file's content is not what its kind holds; `what` names it.
    #[error("{what}")]
    Invalid {
        /// The file (and what it was read as).
        what: String,
        /// What was wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn invalid<E: std::error::Error + Send + Sync + 'static>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> ReportError {
    let what = what.into();
    move |e| ReportError::Invalid {
        what,
        source: Box::new(e),
    }
}

/// Finds the result file of a directory (or takes the file).
pub fn locate(input: &Path) -> Result<PathBuf, ReportError> {
    if input.is_file() {
        return Ok(input.to_path_buf());
    }
    for f in [
        "pacing.json",
        "compare.json",
        "capacity.json",
        "results.json",
        "analysis.json",
    ] {
        let p = input.join(f);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(ReportError::Input(format!(
        "{}: no pacing.json, compare.json, capacity.json or results.json (nor analysis.json) in it",
        input.display()
    )))
}

/// Renders the inputs into a page (used by `report` and `bench`); `warn`
/// hears of what is left out (a pacing run whose results.json is missing).
pub fn render(
    inputs: &[PathBuf],
    title: &str,
    max_dots: usize,
    warn: &mut dyn FnMut(String),
) -> Result<String, ReportError> {
    let mut page = Page::new(title);
    page.max_dots = max_dots;
    for input in inputs {
        let file = locate(input)?;
        let text = std::fs::read_to_string(&file).map_err(|source| ReportError::Read {
            path: file.display().to_string(),
            source,
        })?;
        let v: Value = serde_json::from_str(&text)
            .map_err(invalid(format!("{}: not JSON", file.display())))?;
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let load = move |rel: &str| std::fs::read_to_string(dir.join(rel)).ok();
        let what = || file.display().to_string();
        // chapter 5's files: analysis.json (tagged since the tag was added,
        // told by its fields before) and simulate --prefetch's array of rows
        if is_prefetch_sim(&v) {
            prefetch_sim_section(&mut page, &what(), &text).map_err(invalid(format!(
                "{}: not a prefetch simulation this vodlab reads",
                what()
            )))?;
            continue;
        }
        if is_analysis(&v) {
            analysis_section(&mut page, &what(), &text).map_err(invalid(format!(
                "{}: not an analysis.json this vodlab reads",
                what()
            )))?;
            continue;
        }
        match v.get("format").and_then(Value::as_str) {
            Some("vodlab-compare") => {
                let cmp = CompareFile::from_json(&text).map_err(invalid(what()))?;
                compare_section(&mut page, &cmp, &load)
            }
            Some("vodlab-capacity") => {
                let cap = CapacityFile::from_json(&text).map_err(invalid(what()))?;
                capacity_section(&mut page, &cap, &load)
            }
            Some("vodlab-results") => {
                let r: Results = serde_json::from_value(v).map_err(invalid(format!(
                    "{}: not a results.json this vodlab reads",
                    what()
                )))?;
                page.section(&format!("Run {}", file.display()));
                let csv = load("requests.csv");
                run_section(&mut page, &r.workload, &r, csv.as_deref());
                if r.delivery.playback_latency_s.count > 0 || r.delivery.rate_windows > 0 {
                    let run = PacingRun::new(&r.workload, "run", &r.target, &r, csv, None);
                    delivery_section(&mut page, &format!("Delivery {}", file.display()), &[run]);
                }
            }
            Some("vodlab-pacing") => {
                let m = PacingManifest::from_json(&text).map_err(invalid(what()))?;
                let mut runs = Vec::new();
                for mr in &m.runs {
                    let rel = format!("{}/results.json", mr.dir);
                    let Some(rt) = load(&rel) else {
                        warn(format!("report: {}: {rel} missing, run left out", what()));
                        continue;
                    };
                    let r: Results = serde_json::from_str(&rt)
                        .map_err(invalid(format!("{}: {rel}", what())))?;
                    let csv = load(&format!("{}/requests.csv", mr.dir));
                    runs.push(PacingRun::new(
                        &mr.group,
                        &mr.config,
                        &mr.label,
                        &r,
                        csv,
                        mr.server_cpu_s,
                    ));
                }
                pacing_section(
                    &mut page,
                    &format!(
                        "Pacing experiment {} ({} B at {} kbit/s, buffer {} s, burst {} s)",
                        file.display(),
                        m.file_bytes,
                        m.bitrate_kbps,
                        m.buffer_s,
                        m.burst_s
                    ),
                    &runs,
                );
            }
            other => return Err(ReportError::Input(format!("{}: unknown format {:?} (expected vodlab-pacing, vodlab-compare, vodlab-capacity, vodlab-results, vodlab-analysis or a prefetch simulation's rows)", file.display(), other))),
        }
    }
    Ok(page.finish())
}
