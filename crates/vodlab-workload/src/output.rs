//! Writing a constructed workload to a directory, and reading it back.
//!
//! Layout (see `docs/formats.md`):
//! `workload.json` (manifest), `spec.toml` (resolved spec), `catalog.json`,
//! `stats.json`, `sessions/shard-NN.vsl` (session scripts).

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::construct::Workload;
use crate::error::BuildError;
use crate::script::{parse_script_bytes, write_vodlab_session, ParseError, Script};

/// Name of the manifest that marks a directory as a vodlab workload.
pub const MANIFEST: &str = "workload.json";
/// Identifies the manifest format.
pub const FORMAT: &str = "vodlab-workload";

/// The manifest `workload.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT`].
    pub format: String,
    /// Manifest version (1).
    pub version: u32,
    /// Workload name.
    pub name: String,
    /// Seed used.
    pub seed: u64,
    /// Total sessions.
    pub sessions: u64,
    /// Total requests.
    pub requests: u64,
    /// Sessions not measured at the start of each shard.
    pub ramp_up_sessions: u32,
    /// Sessions not measured at the end of each shard.
    pub ramp_down_sessions: u32,
    /// Session scripts, one per shard (client host).
    pub shards: Vec<ShardFile>,
}

/// One shard's script file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardFile {
    /// Path relative to the workload directory.
    pub file: String,
    /// Sessions in it.
    pub sessions: u64,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes the workload into `dir`, creating it. A non-empty directory that is
/// not a vodlab workload is refused unless `force`. Returns the manifest.
pub fn write_workload(dir: &Path, w: &Workload, force: bool) -> Result<Manifest, BuildError> {
    if dir.exists() {
        let non_empty = fs::read_dir(dir).map_err(io(dir))?.next().is_some();
        if non_empty && !dir.join(MANIFEST).exists() && !force {
            return Err(BuildError::ForeignDirectory(dir.to_path_buf()));
        }
    }
    let sessions_dir = dir.join("sessions");
    if sessions_dir.exists() {
        for e in fs::read_dir(&sessions_dir).map_err(io(&sessions_dir))? {
            let p = e.map_err(io(&sessions_dir))?.path();
            if p.extension().is_some_and(|x| x == "vsl") {
                fs::remove_file(&p).map_err(io(&p))?;
            }
        }
    }
    fs::create_dir_all(&sessions_dir).map_err(io(&sessions_dir))?;

    let shards = w.stats.shards as usize;
    let mut texts = vec![String::new(); shards];
    let mut counts = vec![0u64; shards];
    for g in &w.sessions {
        let k = w.shard_of(g) as usize;
        if counts[k] > 0 {
            texts[k].push('\n');
        }
        counts[k] += 1;
        write_vodlab_session(&w.session(g), &mut texts[k]);
    }
    let width = shards.saturating_sub(1).to_string().len().max(2);
    let mut files = Vec::with_capacity(shards);
    for (k, text) in texts.into_iter().enumerate() {
        let rel = format!("sessions/shard-{k:0width$}.vsl");
        let path = dir.join(&rel);
        let header = format!(
            "# vodlab session script (docs/formats.md): workload {}, seed {}, shard {k} of {shards}\n\n",
            w.spec.name, w.spec.measurement.seed
        );
        fs::write(&path, header + &text).map_err(io(&path))?;
        files.push(ShardFile {
            file: rel,
            sessions: counts[k],
        });
    }

    let spec_text = toml::to_string_pretty(&w.spec).expect("spec serializes");
    let spec_path = dir.join("spec.toml");
    fs::write(
        &spec_path,
        format!("# resolved by vodlab gen: every default filled in\n{spec_text}"),
    )
    .map_err(io(&spec_path))?;
    write_json(&dir.join("catalog.json"), &w.catalog)?;
    write_json(&dir.join("stats.json"), &w.stats)?;
    let manifest = Manifest {
        format: FORMAT.to_string(),
        version: 1,
        name: w.spec.name.clone(),
        seed: w.spec.measurement.seed,
        sessions: w.stats.sessions,
        requests: w.stats.total_chunks,
        ramp_up_sessions: w.spec.measurement.ramp_up_sessions,
        ramp_down_sessions: w.spec.measurement.ramp_down_sessions,
        shards: files,
    };
    write_json(&dir.join(MANIFEST), &manifest)?;
    Ok(manifest)
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), BuildError> {
    let mut text = serde_json::to_string_pretty(v).expect("serializes");
    text.push('\n');
    fs::write(path, text).map_err(io(path))
}

/// Why a script or workload could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// I/O error.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Error.
        source: std::io::Error,
    },
    /// Syntax error in a script.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// Manifest missing or malformed.
    #[error("{path}: {reason}")]
    Manifest {
        /// File.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Reads and parses one session-script file (any accepted dialect); a byte
/// that is not UTF-8 is an error naming its line and column.
pub fn read_script_file(path: &Path) -> Result<Script, ReadError> {
    let bytes = fs::read(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_script_bytes(&bytes).map_err(|e| ReadError::Parse(e.in_file(path.display().to_string())))
}

/// Reads a workload directory's manifest.
pub fn read_manifest(dir: &Path) -> Result<Manifest, ReadError> {
    let path = dir.join(MANIFEST);
    let text = fs::read_to_string(&path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    let m: Manifest = serde_json::from_str(&text).map_err(|e| ReadError::Manifest {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if m.format != FORMAT || m.version != 1 {
        return Err(ReadError::Manifest {
            path,
            reason: format!(
                "format `{}` version {} is not {FORMAT} version 1",
                m.format, m.version
            ),
        });
    }
    Ok(m)
}

/// Reads every shard script of a workload directory, in shard order.
pub fn read_workload_scripts(dir: &Path) -> Result<Vec<(PathBuf, Script)>, ReadError> {
    let m = read_manifest(dir)?;
    m.shards
        .iter()
        .map(|s| {
            let p = dir.join(&s.file);
            read_script_file(&p).map(|script| (p, script))
        })
        .collect()
}
