//! Why a comparison could not run.

use std::path::PathBuf;

use thiserror::Error;
use vodlab_client::out::thresholds::RuleError;

use crate::capacity_run::CapacityError;
use crate::diskd::DiskdError;
use crate::files::FileError;
use crate::hwbox::BoxError;
use crate::point::RunnerError;
use crate::search::SearchError;
use crate::servers::ServerError;
use crate::settings::SettingsError;

/// Why a comparison could not run (a row's own failure is recorded in its
/// row instead).
#[derive(Debug, Error)]
pub enum CompareError {
    /// The search settings are refused.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The settings are refused (the message names the flags).
    #[error("{0}")]
    Refused(String),
    /// A row's prefetch policy is not one `vodlab serve` takes.
    #[error("compare row `{row}`")]
    Policy {
        /// The row as given.
        row: String,
        /// Why.
        source: vodlab_prefetch::PolicyError,
    },
    /// A `--fail-on` rule names no field of a row.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// A row's search could not be set up.
    #[error(transparent)]
    Capacity(#[from] CapacityError),
    /// A point could not be measured.
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// The search settings are inconsistent.
    #[error(transparent)]
    Search(#[from] SearchError),
    /// A server could not be configured or did not come up.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The workload's scripts could not be read (to see whether a row
    /// that serves whole files only can serve them).
    #[error("reading the workload's scripts")]
    Scripts(#[from] vodlab_workload::script::export::ScriptFileError),
    /// A process (a server, its backend, `vodlab fileset seqread`) could
    /// not be started.
    #[error("starting {what}")]
    Start {
        /// What.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A proxy row's backend did not come up.
    #[error("{label}'s backend")]
    Backend {
        /// The row.
        label: String,
        /// Why.
        source: ServerError,
    },
    /// No free port for a proxy row's backend.
    #[error("a port for the backend")]
    BackendPort(#[source] std::io::Error),
    /// A server (or its backend) exited during the search.
    #[error("{0}")]
    Exited(String),
    /// The box could not be made or read.
    #[error(transparent)]
    Box(#[from] BoxError),
    /// The emulated drive failed.
    #[error(transparent)]
    Disk(#[from] DiskdError),
    /// The emulated drive's profile is unknown.
    #[error(transparent)]
    Profile(#[from] vodlab_disk::ProfileError),
    /// `--root` is not the workload's file set.
    #[error("{} is not this workload's file set (run `vodlab fileset create`)", root.display())]
    NotTheFileSet {
        /// The root.
        root: PathBuf,
        /// Why.
        source: vodlab_fileset::FilesetError,
    },
    /// `--root` holds damaged files.
    #[error("{}: {damaged} damaged file(s) in a sample of 8; run `vodlab fileset verify`", root.display())]
    Damaged {
        /// The root.
        root: PathBuf,
        /// How many of the sample.
        damaged: usize,
    },
    /// The file set could not be cooled.
    #[error(transparent)]
    Fileset(#[from] vodlab_fileset::FilesetError),
    /// `vodlab fileset seqread` could not run.
    #[error("running vodlab fileset seqread")]
    Seqread(#[source] std::io::Error),
    /// `vodlab fileset seqread` failed (the message holds its output).
    #[error("{0}")]
    SeqreadFailed(String),
    /// A run's emulated drive is gone.
    #[error("no emulated drive")]
    NoDrive,
    /// A file could not be written.
    #[error(transparent)]
    File(#[from] FileError),
    /// A row could not be turned into JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A directory or file could not be made or written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
