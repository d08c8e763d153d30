//! Scripts on disk, as `vodlab script check|export` handles them: the
//! scripts of a file or of every shard of a workload directory ([`load`]),
//! their figures ([`Summary`]), and their export to another tool's syntax
//! as files ([`export`], [`ExportFormat`]).

use std::fs;
use std::path::{Path, PathBuf};

use super::{
    export_cloudsuite, export_h2load, export_httperf, write_vodlab, ExportReport, Script, Wait,
};
use crate::output::{read_manifest, read_script_file, read_workload_scripts, ReadError};

/// Export targets.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ExportFormat {
    /// vodlab's own format (lossless).
    Vodlab,
    /// httperf --wsesslog (stock httperf 0.9).
    Httperf,
    /// CloudSuite videoperf --videosesslog.
    Cloudsuite,
    /// h2load --timing-script-file (one session).
    H2load,
}

/// Why scripts could not be loaded or exported.
#[derive(Debug, thiserror::Error)]
pub enum ScriptFileError {
    /// A script or the workload's manifest could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A directory without a workload manifest.
    #[error("{} is a directory but not a `vodlab gen` workload", path.display())]
    NotAWorkload {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: ReadError,
    },
    /// The h2load export's session is not there.
    #[error("no session {id} in {}", input.display())]
    NoSession {
        /// The id (or position) asked for; 0 for the first.
        id: u64,
        /// The input.
        input: PathBuf,
    },
    /// An output file or directory could not be written.
    #[error("{action} {}", path.display())]
    Write {
        /// `writing`, `creating`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Scripts of a file or of every shard of a workload directory.
pub fn load(input: &Path) -> Result<Vec<(PathBuf, Script)>, ScriptFileError> {
    if input.is_dir() {
        read_manifest(input).map_err(|source| ScriptFileError::NotAWorkload {
            path: input.into(),
            source,
        })?;
        Ok(read_workload_scripts(input)?)
    } else {
        Ok(vec![(input.to_path_buf(), read_script_file(input)?)])
    }
}

/// The figures `vodlab script check` prints of a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Sessions.
    pub sessions: usize,
    /// Requests.
    pub requests: usize,
    /// Requests of a byte range.
    pub ranged: usize,
    /// Paced requests.
    pub paced: usize,
    /// Most connections of a session.
    pub connections: u32,
}

impl Summary {
    /// The figures of `s`.
    pub fn of(s: &Script) -> Self {
        let requests = || s.sessions.iter().flat_map(|x| &x.requests);
        Self {
            sessions: s.sessions.len(),
            requests: s.request_count(),
            ranged: requests().filter(|r| r.range.is_some()).count(),
            paced: requests()
                .filter(|r| matches!(r.wait, Wait::Pacing(_)))
                .count(),
            connections: requests().map(|r| r.conn).max().map_or(0, |c| c + 1),
        }
    }
}

fn convert(s: &Script, to: ExportFormat) -> (String, ExportReport) {
    match to {
        ExportFormat::Vodlab => {
            let text = write_vodlab(s);
            let rep = ExportReport {
                sessions_in: s.sessions.len(),
                sessions_out: s.sessions.len(),
                requests_out: s.request_count(),
                ..Default::default()
            };
            (text, rep)
        }
        ExportFormat::Httperf => export_httperf(s),
        ExportFormat::Cloudsuite => export_cloudsuite(s),
        ExportFormat::H2load => unreachable!("h2load exports one session"),
    }
}

fn write(path: &Path, text: String) -> Result<(), ScriptFileError> {
    fs::write(path, text).map_err(|source| ScriptFileError::Write {
        action: "writing",
        path: path.into(),
        source,
    })
}

/// Exports the scripts of `input` (a file or a workload directory) to
/// `to`'s syntax: into the file `output` (for a script file, or for
/// h2load: session `session` by its id or, without ids, its position;
/// default the first), or one file per shard into the directory `output`
/// (for a workload directory). `written` is told each file written, with
/// what the target could not express.
pub fn export(
    input: &Path,
    to: ExportFormat,
    output: &Path,
    session: Option<u64>,
    mut written: impl FnMut(&Path, &ExportReport),
) -> Result<(), ScriptFileError> {
    let scripts = load(input)?;
    if let ExportFormat::H2load = to {
        let all = scripts.iter().flat_map(|(_, s)| s.sessions.iter());
        let chosen = match session {
            None => all.clone().next(),
            Some(id) => all.clone().find(|s| s.header.id == Some(id)).or_else(|| {
                all.clone()
                    .filter(|s| s.header.id.is_none())
                    .nth(id as usize)
            }),
        }
        .ok_or_else(|| ScriptFileError::NoSession {
            id: session.unwrap_or(0),
            input: input.into(),
        })?;
        let (text, rep) = export_h2load(chosen);
        write(output, text)?;
        written(output, &rep);
        return Ok(());
    }
    if input.is_dir() {
        fs::create_dir_all(output).map_err(|source| ScriptFileError::Write {
            action: "creating",
            path: output.into(),
            source,
        })?;
        for (path, s) in &scripts {
            let name = path.file_name().expect("shard file name");
            let dest = output.join(Path::new(name).with_extension(match to {
                ExportFormat::Httperf => "wsesslog",
                ExportFormat::Cloudsuite => "videosesslog",
                _ => "vsl",
            }));
            let (text, rep) = convert(s, to);
            write(&dest, text)?;
            written(&dest, &rep);
        }
    } else {
        let (text, rep) = convert(&scripts[0].1, to);
        write(output, text)?;
        written(output, &rep);
    }
    Ok(())
}
