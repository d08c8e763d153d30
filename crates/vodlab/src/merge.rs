//! `vodlab merge`: the results of a run split over processes (`vodlab run
//! --shard I/N`) put back together exactly (docs/scale-out.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use vodlab_client::shard::{self, Part};
use vodlab_client::{MetricsDump, Results};

/// Arguments of `vodlab merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Results directories of the shards (`vodlab run --shard I/N -o DIR`),
    /// each with results.json and metrics.json. A directory without them (a
    /// shard that died) makes the merged run incomplete and is named; if it
    /// holds a checkpoint.json (`run --checkpoint`), what the shard had
    /// measured until then is merged.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where to write the merged results.json and summary.txt (`--output`
    /// is an older name).
    #[arg(short = 'o', long = "out", alias = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Exit with status 1 when the merged run is invalid or incomplete.
    #[arg(long)]
    pub strict: bool,
}

fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> anyhow::Result<T> {
    let text = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("parsing {}", p.display()))
}

/// Reads one shard's directory; `None` when it holds no results (a shard
/// that died before writing them or a checkpoint). A shard that died
/// after a checkpoint (`vodlab run --checkpoint`) gives its last one: its
/// `stopped_by` is `checkpoint`, which makes the merged run incomplete.
fn read_part(dir: &Path) -> anyhow::Result<Option<Part>> {
    let (r, m) = (dir.join("results.json"), dir.join("metrics.json"));
    if !r.exists() && !m.exists() {
        let c = dir.join(vodlab_client::CHECKPOINT_FILE);
        if !c.exists() {
            return Ok(None);
        }
        let c = vodlab_client::Checkpoint::read(&c).map_err(anyhow::Error::msg)?;
        return Ok(Some(Part {
            label: format!(
                "{} (died; its checkpoint at {:.1} s)",
                dir.display(),
                c.results.duration_s
            ),
            results: c.results,
            dump: c.metrics,
        }));
    }
    anyhow::ensure!(
        m.exists(),
        "{} has results.json but no metrics.json: it was written by a vodlab older than `vodlab merge`",
        dir.display()
    );
    let results: Results = read_json(&r)?;
    let dump: MetricsDump = read_json(&m)?;
    anyhow::ensure!(
        dump.format == "vodlab-metrics" && dump.version == 1,
        "{}: not a vodlab-metrics version 1 file",
        m.display()
    );
    Ok(Some(Part {
        label: dir.display().to_string(),
        results,
        dump,
    }))
}

pub fn run(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for d in &a.dirs {
        anyhow::ensure!(d.is_dir(), "{} is not a directory", d.display());
        match read_part(d)? {
            Some(p) => parts.push(p),
            None => missing.push(d.display().to_string()),
        }
    }
    anyhow::ensure!(
        !parts.is_empty(),
        "none of the directories holds shard results (results.json + metrics.json)"
    );
    let merged = shard::merge(&parts, &missing)?;
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    crate::run::write_results(&a.output, &merged)?;
    let mut out = std::io::stdout().lock();
    out.write_all(merged.table().as_bytes())?;
    writeln!(
        out,
        "  results: {}",
        a.output.join("results.json").display()
    )?;
    if a.strict && !(merged.valid && merged.complete) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
