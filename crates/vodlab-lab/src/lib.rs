//! vodlab's experiments: the capacity search (pure, driven by any
//! measurement), confidence intervals, emulated hardware boxes on cgroups,
//! configurations for peer servers, and the HTML report.

pub mod hwbox;
pub mod report;
pub mod search;
pub mod servers;
pub mod stats;

pub use hwbox::{BoxError, BoxSpec, Cgroups, Dev, DeviceStat, HwBox, Profile, Usage, PROFILES};
pub use search::{
    Answer, Criterion, Ending, Outcome, Point, Search, SearchConfig, SearchError, Step,
};
pub use servers::{ServerError, ServerKind, ServerSetup};
pub use stats::{mean_ci, t_quantile, MeanCi};
