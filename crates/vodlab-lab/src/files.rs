//! What the typed experiment files share: their errors, the format/version
//! check and the writer.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

/// A capacity.json or compare.json that cannot be read or written.
#[derive(Debug, Error)]
pub enum FileError {
    /// Reading failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Writing failed (the file keeps its previous content unless the
    /// error says otherwise).
    #[error("{0}")]
    Write(#[from] vodlab_client::out::atomic::AtomicWriteError),
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    Json(serde_json::Error),
    /// JSON, but another file's (or no) `format`.
    #[error("format {found:?} where {expected:?} was expected")]
    Format {
        /// The format wanted.
        expected: &'static str,
        /// The format found (`None`: no `format` field).
        found: Option<String>,
    },
    /// A version this crate does not read.
    #[error("{format} format version {found} cannot be read: this vodlab reads versions 1 to {newest} (a newer vodlab wrote it; use that one)")]
    Version {
        /// The format.
        format: &'static str,
        /// The version found (0: none or not a number).
        found: u64,
        /// The newest version this crate reads.
        newest: u32,
    },
    /// The format and version are right but a field is missing or wrong.
    #[error("{format} format version {version}: {source}")]
    Shape {
        /// The format.
        format: &'static str,
        /// Its version.
        version: u32,
        /// What serde found.
        source: serde_json::Error,
    },
    /// One of the above in a named file.
    #[error("{}: {source}", path.display())]
    In {
        /// The file.
        path: PathBuf,
        /// The error.
        source: Box<FileError>,
    },
}

impl FileError {
    /// The error, naming the file it came from.
    pub fn at(self, path: &Path) -> Self {
        match self {
            e @ (Self::Io { .. } | Self::In { .. } | Self::Write(_)) => e,
            e => Self::In {
                path: path.to_path_buf(),
                source: Box::new(e),
            },
        }
    }
}

/// Checks `format` and that `version` is between 1 and `newest`; returns the version.
pub(crate) fn check_header(v: &Value, format: &'static str, newest: u32) -> Result<u32, FileError> {
    let found = v.get("format").and_then(Value::as_str);
    if found != Some(format) {
        return Err(FileError::Format {
            expected: format,
            found: found.map(str::to_string),
        });
    }
    let version = v.get("version").and_then(Value::as_u64).unwrap_or(0);
    if version == 0 || version > u64::from(newest) {
        return Err(FileError::Version {
            format,
            found: version,
            newest,
        });
    }
    Ok(version as u32)
}

/// Parses a versioned file: checks its `format` and `version` (up to
/// `newest`), lets `upgrade` fill in what later versions added to an older
/// one, then deserializes.
pub(crate) fn parse_versioned<T: serde::de::DeserializeOwned>(
    text: &str,
    format: &'static str,
    newest: u32,
    upgrade: fn(&mut Value, u32),
) -> Result<T, FileError> {
    let mut v: Value = serde_json::from_str(text).map_err(FileError::Json)?;
    let version = check_header(&v, format, newest)?;
    upgrade(&mut v, version);
    serde_json::from_value(v).map_err(|source| FileError::Shape {
        format,
        version,
        source,
    })
}

/// Reads a file and parses it with `parse`, errors naming the path.
pub(crate) fn read_with<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, FileError>,
) -> Result<T, FileError> {
    let text = std::fs::read_to_string(path).map_err(|source| FileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|e| e.at(path))
}

/// Writes `v` as pretty JSON with a final newline, atomically
/// ([`vodlab_client::out::atomic::write`]).
pub(crate) fn write_pretty(path: &Path, v: &impl Serialize) -> Result<(), FileError> {
    let mut text = serde_json::to_string_pretty(v).map_err(FileError::Json)?;
    text.push('\n');
    Ok(vodlab_client::out::atomic::write(path, text.as_bytes())?)
}

/// Writes `text` to `path` atomically ([`vodlab_client::out::atomic::write`]).
pub(crate) fn write_text(path: &Path, text: impl AsRef<[u8]>) -> Result<(), FileError> {
    Ok(vodlab_client::out::atomic::write(path, text.as_ref())?)
}
