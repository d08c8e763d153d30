//! A shard's results directory on disk: `metrics.json` written
//! ([`MetricsDump::write`]), and `vodlab merge`'s reading of the shards'
//! directories ([`read_part`]) and merge of them ([`merge_dirs`]).

use std::path::{Path, PathBuf};

use super::{merge, MetricsDump, Part, ShardError};
use crate::out::results::{write_file, Results, WriteError};

/// Arguments of `vodlab merge`.
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct MergeSettings {
    /// Results directories of the shards (`vodlab run --shard I/N -o DIR`),
    /// each with results.json and metrics.json. A directory without them (a
    /// shard that died) makes the merged run incomplete and is named; if it
    /// holds a checkpoint.json (`run --checkpoint`), what the shard had
    /// measured until then is merged.
    #[cfg_attr(feature = "cli", arg(required = true, value_name = "DIR"))]
    pub dirs: Vec<PathBuf>,
    /// Where to write the merged results.json and summary.txt (`--output`
    /// is an older name).
    #[cfg_attr(
        feature = "cli",
        arg(short = 'o', long = "out", alias = "output", value_name = "DIR")
    )]
    pub output: PathBuf,
    /// Exit with status 1 when the merged run is invalid or incomplete.
    #[cfg_attr(feature = "cli", arg(long))]
    pub strict: bool,
}

/// Why shard directories could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A path given is not a directory.
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// None of the directories holds results.
    #[error("none of the directories holds shard results (results.json + metrics.json)")]
    NoResults,
    /// A directory holds results.json but no metrics.json.
    #[error("{} has results.json but no metrics.json: it was written by a vodlab older than `vodlab merge`", .0.display())]
    NoMetrics(PathBuf),
    /// A metrics.json of another format or version.
    #[error("{}: not a vodlab-metrics version 1 file", .0.display())]
    NotMetrics(PathBuf),
    /// A checkpoint could not be read.
    #[error("{0}")]
    Checkpoint(String),
    /// A file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be parsed.
    #[error("parsing {}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The parts do not merge.
    #[error(transparent)]
    Merge(#[from] ShardError),
    /// The output directory could not be made.
    #[error("creating {}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The merged results could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl MetricsDump {
    /// Writes `metrics.json` into `dir`: the exact state `vodlab merge`
    /// combines.
    pub fn write(&self, dir: &Path) -> Result<(), WriteError> {
        let mut text = serde_json::to_string(self)?;
        text.push('\n');
        write_file(dir.join("metrics.json"), &text)
    }
}

fn read_json<T: serde::de::DeserializeOwned>(p: &Path) -> Result<T, MergeError> {
    let text = std::fs::read(p).map_err(|source| MergeError::Read {
        path: p.into(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|source| MergeError::Parse {
        path: p.into(),
        source,
    })
}

/// Reads one shard's directory; `None` when it holds no results (a shard
/// that died before writing them or a checkpoint). A shard that died
/// after a checkpoint (`vodlab run --checkpoint`) gives its last one: its
/// `stopped_by` is `checkpoint`, which makes the merged run incomplete.
pub fn read_part(dir: &Path) -> Result<Option<Part>, MergeError> {
    let (r, m) = (dir.join("results.json"), dir.join("metrics.json"));
    if !r.exists() && !m.exists() {
        let c = dir.join(crate::CHECKPOINT_FILE);
        if !c.exists() {
            return Ok(None);
        }
        let c = crate::Checkpoint::read(&c).map_err(MergeError::Checkpoint)?;
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
    if !m.exists() {
        return Err(MergeError::NoMetrics(dir.into()));
    }
    let results: Results = read_json(&r)?;
    let dump: MetricsDump = read_json(&m)?;
    if !(dump.format == "vodlab-metrics" && dump.version == 1) {
        return Err(MergeError::NotMetrics(m));
    }
    Ok(Some(Part {
        label: dir.display().to_string(),
        results,
        dump,
    }))
}

/// `vodlab merge`: reads the shards' results directories, merges them
/// exactly ([`merge`]; a directory without results makes the merged run
/// incomplete and is named) and writes the merged results.json and
/// summary.txt into the output directory.
pub fn merge_dirs(a: &MergeSettings) -> Result<Results, MergeError> {
    let (dirs, output) = (&a.dirs, a.output.as_path());
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for d in dirs {
        if !d.is_dir() {
            return Err(MergeError::NotADirectory(d.clone()));
        }
        match read_part(d)? {
            Some(p) => parts.push(p),
            None => missing.push(d.display().to_string()),
        }
    }
    if parts.is_empty() {
        return Err(MergeError::NoResults);
    }
    let merged = merge(&parts, &missing)?;
    std::fs::create_dir_all(output).map_err(|source| MergeError::Create {
        path: output.into(),
        source,
    })?;
    merged.write(output)?;
    Ok(merged)
}
