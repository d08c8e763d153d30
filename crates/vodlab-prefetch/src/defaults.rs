//! The default of every prefetch setting, in one place: `vodlab serve`'s
//! configuration and CLI, and `vodlab simulate`, read these.

use std::time::Duration;

/// Bytes a `fixed` prefetch reads (4 MiB).
pub const PREFETCH_BYTES: u64 = 4 << 20;
/// Most bytes one prefetch reads (16 MiB): a larger decision, or a larger
/// range, is read in prefetches of this size, one at a time per connection.
pub const MAX_PREFETCH: u64 = 16 << 20;
/// Largest `max_prefetch` a server accepts (1 GiB).
pub const MAX_PREFETCH_LIMIT: u64 = 1 << 30;
/// Time between the prefetch controller's ticks.
pub const TICK: Duration = Duration::from_secs(1);
/// Largest bit rate a policy or a server accepts, kbit/s (1 Tbit/s).
pub const MAX_BITRATE_KBPS: f64 = 1e9;

// --- automatic prefetch size (thesis ch. 4, Table 4.2; crate::auto) ---
/// start_size: 4 MiB, the WD Red HD start and the HD demo run's
/// [T1213, T1116] (per drive: `start=wd10efrx-sd` etc.).
pub const AUTO_START: u64 = 4 << 20;
/// adjust_interval: 180 s [T1217].
pub const AUTO_INTERVAL: Duration = Duration::from_secs(180);
/// step_size: 0.5 MB [T1218] (MB = 2^20 bytes, [T1187]).
pub const AUTO_STEP: u64 = 512 << 10;
/// score_deflation_factor: 5 % [T1219].
pub const AUTO_DEFLATION: f64 = 0.05;
/// busy_threshold: 60 % [T1220].
pub const AUTO_BUSY: f64 = 0.6;
/// evict_threshold: 5 % [T1221].
pub const AUTO_EVICT: f64 = 0.05;
/// Time p takes to reach a new target (not stated in the thesis: one
/// third of the adjust interval).
pub const AUTO_RAMP: Duration = Duration::from_secs(60);
/// Smallest automatic size (one step).
pub const AUTO_MIN: u64 = 512 << 10;
/// Largest automatic size (16 MiB, `max_prefetch`'s default; the
/// thesis's sizes reach 12 MB).
pub const AUTO_MAX: u64 = 16 << 20;
/// Exponent of bit-rate scaling: square root [T1163].
pub const SCALING_EXPONENT: f64 = 0.5;
