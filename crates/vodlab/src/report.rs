//! `vodlab report`: results into one self-contained HTML file with SVG figures.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use serde_json::Value;
use vodlab_client::Results;
use vodlab_lab::report::{
    analysis_section, capacity_section, compare_section, delivery_section, is_analysis,
    is_prefetch_sim, pacing_section, prefetch_sim_section, run_section, PacingManifest, PacingRun,
    Page,
};
use vodlab_lab::{CapacityFile, CompareFile};

/// Arguments of `vodlab report`.
#[derive(Debug, Args)]
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
    #[arg(required = true, value_name = "DIR|FILE")]
    pub inputs: Vec<PathBuf>,
    /// The HTML file to write, relative to the current directory (the
    /// inputs' directories are only read).
    #[arg(
        short = 'o',
        long = "out",
        alias = "output",
        value_name = "FILE",
        default_value = "report.html"
    )]
    pub output: PathBuf,
    /// Page title.
    #[arg(long, default_value = "vodlab report")]
    pub title: String,
    /// Most requests drawn in each per-request figure (evenly thinned).
    #[arg(long, default_value_t = 20_000)]
    pub max_dots: usize,
}

/// Finds the result file of a directory (or takes the file).
fn locate(input: &Path) -> anyhow::Result<PathBuf> {
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
    bail!(
        "{}: no pacing.json, compare.json, capacity.json or results.json (nor analysis.json) in it",
        input.display()
    )
}

/// Renders the inputs into a page (used by `report` and `bench`).
pub fn render(inputs: &[PathBuf], title: &str, max_dots: usize) -> anyhow::Result<String> {
    let mut page = Page::new(title);
    page.max_dots = max_dots;
    for input in inputs {
        let file = locate(input)?;
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", file.display()))?;
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let load = move |rel: &str| std::fs::read_to_string(dir.join(rel)).ok();
        let what = || file.display().to_string();
        // chapter 5's files: analysis.json (tagged since the tag was added,
        // told by its fields before) and simulate --prefetch's array of rows
        if is_prefetch_sim(&v) {
            prefetch_sim_section(&mut page, &what(), &text).with_context(|| {
                format!("{}: not a prefetch simulation this vodlab reads", what())
            })?;
            continue;
        }
        if is_analysis(&v) {
            analysis_section(&mut page, &what(), &text)
                .with_context(|| format!("{}: not an analysis.json this vodlab reads", what()))?;
            continue;
        }
        match v.get("format").and_then(Value::as_str) {
            Some("vodlab-compare") => {
                let cmp = CompareFile::from_json(&text).with_context(what)?;
                compare_section(&mut page, &cmp, &load)
            }
            Some("vodlab-capacity") => {
                let cap = CapacityFile::from_json(&text).with_context(what)?;
                capacity_section(&mut page, &cap, &load)
            }
            Some("vodlab-results") => {
                let r: Results = serde_json::from_value(v)
                    .with_context(|| format!("{}: not a results.json this vodlab reads", what()))?;
                page.section(&format!("Run {}", file.display()));
                let csv = load("requests.csv");
                run_section(&mut page, &r.workload, &r, csv.as_deref());
                if r.delivery.playback_latency_s.count > 0 || r.delivery.rate_windows > 0 {
                    let run = PacingRun::new(&r.workload, "run", &r.target, &r, csv, None);
                    delivery_section(&mut page, &format!("Delivery {}", file.display()), &[run]);
                }
            }
            Some("vodlab-pacing") => {
                let m = PacingManifest::from_json(&text).with_context(what)?;
                let mut runs = Vec::new();
                for mr in &m.runs {
                    let rel = format!("{}/results.json", mr.dir);
                    let Some(rt) = load(&rel) else {
                        eprintln!("report: {}: {rel} missing, run left out", what());
                        continue;
                    };
                    let r: Results = serde_json::from_str(&rt)
                        .with_context(|| format!("{}: {rel}", what()))?;
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
            other => bail!("{}: unknown format {:?} (expected vodlab-pacing, vodlab-compare, vodlab-capacity, vodlab-results, vodlab-analysis or a prefetch simulation's rows)", file.display(), other),
        }
    }
    Ok(page.finish())
}

/// Runs `vodlab report`: renders the inputs and writes the page to `-o`
/// (report.html in the current directory by default).
pub fn run(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let html = render(&a.inputs, &a.title, a.max_dots)?;
    let out = &a.output;
    std::fs::write(out, &html).with_context(|| format!("writing {}", out.display()))?;
    println!("report: {} ({} KiB)", out.display(), html.len() / 1024);
    Ok(ExitCode::SUCCESS)
}
