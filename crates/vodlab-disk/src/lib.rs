//! # vodlab-disk
//!
//! A sans-IO model of a storage drive for vodlab's emulated disk: a hard
//! disk with command overhead, a seek curve (settle + a·√d for short seeks,
//! linear to the full stroke), rotational latency from the platter's
//! modelled angular position, zoned transfer rates, an optional read-ahead
//! cache and a queue (FIFO, C-LOOK or a tagged queue); or an SSD/NVMe class
//! (per-I/O latency, bandwidth, parallelism).
//!
//! * [`Profile`] — a drive, from TOML; six are shipped ([`profile::builtin`]).
//! * [`Disk`] — the model: [`Disk::submit`] a [`Request`] at `now`,
//!   [`Disk::poll_completion`] at `now`, ask [`Disk::next_event_time`].
//!   Time compression k ([`DiskOptions::time_compression`]) divides every
//!   modelled time.
//! * [`Layout`] — a file set placed on the block space in creation order
//!   with a per-file metadata read.
//! * [`DiskStats`] — serde-serializable, mergeable statistics.
//!
//! Nothing here reads a clock or does I/O (except [`Profile::from_file`]).
//! See `docs/disk.md` for the model, the profiles' sources and calibration.

#![warn(missing_docs)]

pub mod error;
pub mod geometry;
mod hdd;
pub mod model;
pub mod placement;
pub mod profile;
pub mod stats;

pub use error::{DiskError, Problem, ProfileError};
pub use hdd::ServiceKind;
pub use model::{Completion, Disk, DiskOptions, Request, Scheduler, Token};
pub use placement::{FileExtent, Layout, LayoutBuilder, Origin, PlacementConfig};
pub use profile::{HddParams, Profile, Rotation, SsdParams, ZoneCurve};
pub use stats::{DiskStats, MicrosHistogram};
