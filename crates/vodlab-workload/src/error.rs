//! Error types of the workload crate.

use std::fmt;
use std::path::PathBuf;

/// One validation problem: where (a dotted key path) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Key path inside the specification, e.g. `catalog.duration.points[3]`.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

/// All problems found while validating a specification.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    /// Records a problem.
    pub fn push(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        self.0.push(Problem {
            path: path.into(),
            reason: reason.into(),
        });
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {}", p.path, p.reason)?;
        }
        Ok(())
    }
}

/// Why a workload specification could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax error or a key of the wrong type or name.
    #[error("{file}:{line}:{column}: {path}: {reason}")]
    Parse {
        /// The file (or `preset:NAME`).
        file: String,
        /// 1-based line, 0 when unknown.
        line: usize,
        /// 1-based column, 0 when unknown.
        column: usize,
        /// Key path of the offending value (`.` for the document root).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The values parsed but do not make a valid workload.
    #[error("{file}: invalid workload specification:\n{}", indent(.problems))]
    Invalid {
        /// The file (or `preset:NAME`).
        file: String,
        /// Every problem found.
        problems: Problems,
    },
    /// No preset of that name.
    #[error("unknown preset `{name}`; known presets: {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// Comma-separated list of preset names.
        known: String,
    },
}

fn indent(p: &Problems) -> String {
    p.0.iter()
        .map(|p| format!("  {}: {}", p.path, p.reason))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Errors while constructing or writing a workload.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The specification is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Writing an output file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The output directory holds files that are not a vodlab workload.
    #[error("{0}: directory is not empty and does not hold a vodlab workload; choose another or pass --force")]
    ForeignDirectory(PathBuf),
    /// Reading a workload directory failed.
    #[error("{path}: {reason}")]
    Workload {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}
