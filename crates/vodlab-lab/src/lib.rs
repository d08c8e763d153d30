//! vodlab's experiments: the capacity search (pure, driven by any
//! measurement), the point runner that measures it with real load runs, the
//! typed `capacity.json` and `compare.json` files, confidence intervals,
//! emulated hardware boxes on cgroups, configurations for peer servers, and
//! the HTML report.

#![warn(missing_docs)]

pub mod bench;
pub mod capacity;
pub mod capacity_run;
pub mod compare;
pub mod diskd;
pub mod files;
pub mod hwbox;
pub mod k8s;
pub mod netlab;
pub mod point;
pub mod procs;
pub mod record;
pub mod report;
pub mod runner;
pub mod search;
pub mod servers;
pub mod settings;
pub mod simulate;
pub mod stats;
pub mod tracesim;

pub use capacity::{CapacityFile, CapacityMeta, Row, SearchOutcome, Stop};
pub use compare::{CompareFile, Figures, ProfileInfo, SeqRead, ServerRow};
pub use files::FileError;
pub use hwbox::{BoxError, BoxSpec, Cgroups, Dev, DeviceStat, HwBox, Profile, Usage, PROFILES};
pub use point::{Interrupter, PointSettings, RunnerError};
pub use runner::{Measured, PointRunner, RunObserver, SearchObserver, Target};
pub use search::{
    Answer, Criterion, Ending, Outcome, Point, RunExtra, Search, SearchConfig, SearchError,
    SearchMode, Step, Verdict,
};
pub use servers::{ServerError, ServerKind, ServerSetup};
pub use stats::{mean_ci, t_quantile, MeanCi};
