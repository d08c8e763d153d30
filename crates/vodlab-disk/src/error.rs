//! Typed errors of the disk model.

/// One problem found by validation, naming its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path (`hdd.average_seek_ms`).
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// Errors loading a drive profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
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
        /// The file (or `profile:NAME`).
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
    /// The values parsed but do not make a valid drive.
    #[error("{file}: invalid disk profile:\n{}", indent(.problems))]
    Invalid {
        /// The file (or `profile:NAME`).
        file: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
    /// Neither a shipped profile nor an existing file.
    #[error("unknown disk profile `{name}` (not a file either); shipped profiles: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// Comma-separated list of shipped profiles.
        known: String,
    },
}

fn indent(p: &[Problem]) -> String {
    p.iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Errors from the model or the placement helper.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiskError {
    /// A request of zero bytes or past the end of the drive.
    #[error("request {offset}+{len} is empty or past the drive's capacity {capacity}")]
    OutOfRange {
        /// Start address.
        offset: u64,
        /// Length in bytes.
        len: u64,
        /// Capacity of the drive.
        capacity: u64,
    },
    /// `now` went backwards.
    #[error("time went backwards: {now_ns} ns after {last_ns} ns")]
    TimeWentBackwards {
        /// The `now` given.
        now_ns: u128,
        /// The latest `now` seen before.
        last_ns: u128,
    },
    /// An option is out of its range.
    #[error("invalid option {key}: {reason}")]
    InvalidOption {
        /// The option.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The profile is not valid.
    #[error("invalid profile: {0:?}")]
    InvalidProfile(Vec<Problem>),
    /// The file set does not fit on the drive.
    #[error("file set of {needed} bytes does not fit on a drive of {capacity} bytes")]
    DoesNotFit {
        /// Bytes the layout needs.
        needed: u64,
        /// Capacity of the drive.
        capacity: u64,
    },
}
