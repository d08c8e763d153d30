//! # vodlab-workload
//!
//! The workload side of vodlab: a TOML workload specification ([`spec`]),
//! the distributions it uses ([`dist`]), built-in presets that reproduce
//! published workloads ([`presets`]), deterministic construction of a catalog,
//! sessions and statistics ([`construct`]), the bounds on every input
//! ([`limits`]), the session-script formats
//! ([`script`]), the on-disk workload directory ([`output`]) and time
//! compression of a workload ([`timescale`]); [`gen`] is `vodlab gen`'s
//! settings and work.
//!
//! Nothing here touches the network or the clock; files are read and written
//! only by [`spec::Spec::from_file`] and the [`output`] module.

#![warn(missing_docs)]

pub mod construct;
pub mod content;
pub mod dist;
pub mod error;
pub mod gen;
pub mod limits;
pub mod output;
pub mod presets;
pub mod script;
pub mod spec;
pub mod timescale;

pub use construct::{construct, try_construct, Catalog, Stats, Workload};
pub use error::{BuildError, SpecError};
pub use spec::{Overrides, Spec};
pub use timescale::{
    TimeCompression, TimeCompressionError, TimeCompressionSettingError, TIME_COMPRESSION_ENV,
};
