//! Bounds on every numeric input: specification keys, script keys and the
//! sizes a workload may grow to.
//!
//! Each bound is far above anything a real experiment needs and far below
//! what would overflow an integer or exhaust memory, so an absurd value is an
//! error naming the key and the bound instead of an abort. `docs/workload-spec.md`
//! and `docs/formats.md` list them.

/// Most titles in a catalog (`catalog.titles`, `--titles`).
pub const MAX_TITLES: u32 = 1_000_000;
/// Most sessions in a workload (`sessions.count`, `--sessions`).
pub const MAX_SESSIONS: u32 = 2_000_000;
/// Most representations in a ladder.
pub const MAX_REPRESENTATIONS: usize = 64;
/// Largest initialization segment (`catalog.manifests.init_bytes`): 16 MiB.
pub const MAX_INIT_BYTES: u64 = 16 << 20;
/// Most client classes.
pub const MAX_CLIENT_CLASSES: usize = 256;
/// Most shards (session-script files) a workload is split into.
pub const MAX_SHARDS: u32 = 1024;
/// Highest encoded bit rate, kbit/s (1 Gbit/s).
pub const MAX_BITRATE_KBPS: f64 = 1_000_000.0;
/// Highest client link rate, kbit/s (100 Gbit/s).
pub const MAX_LINK_KBPS: f64 = 100_000_000.0;
/// Longest one-way client delay, milliseconds (one minute).
pub const MAX_DELAY_MS: f64 = 60_000.0;
/// Shortest request, seconds of content (`sessions.request_s`).
pub const MIN_REQUEST_S: f64 = 0.001;
/// Longest request, seconds of content (`sessions.request_s`).
pub const MAX_REQUEST_S: f64 = 600.0;
/// Longest chunk file, seconds (`catalog.storage.chunk_s`).
pub const MAX_CHUNK_S: f64 = 3_600.0;
/// Longest time value anywhere else: timeouts, pacing, think times and
/// padding, in specifications and scripts (one day).
pub const MAX_SECONDS: f64 = 86_400.0;
/// Highest Zipf exponent.
pub const MAX_ZIPF_ALPHA: f64 = 100.0;
/// Highest `headroom` of the representation rule.
pub const MAX_HEADROOM: f64 = 1_000.0;
/// Most request units (padding included) of one title in one representation.
pub const MAX_TITLE_UNITS: u64 = 1_000_000;
/// Most request units (padding included) over the whole catalog, every
/// representation counted.
pub const MAX_CATALOG_UNITS: u64 = 50_000_000;
/// Most requests over all sessions of a workload.
pub const MAX_REQUESTS: u64 = 20_000_000;
/// Largest file set, bytes (1 PiB).
pub const MAX_FILESET_BYTES: u64 = 1 << 50;
/// Most connections one session may use (`conn=` is below this).
pub const MAX_CONNECTIONS_PER_SESSION: u32 = 64;
/// Largest byte offset or size in a script (`range=`, `size=`, a `Range`
/// header): 2^53 - 1, the largest integer a JSON number holds exactly.
pub const MAX_BYTE: u64 = (1 << 53) - 1;
/// Highest bit rate in a script's `#@session bitrate=`, bit/s.
pub const MAX_SCRIPT_BITRATE_BPS: u64 = 1_000_000_000_000;
/// Longest name that becomes a path or script text (workload, representation,
/// client class).
pub const MAX_NAME_LEN: usize = 64;

/// True when `name` is safe in a request path and in script text: 1 to
/// [`MAX_NAME_LEN`] characters from `A-Z a-z 0-9 _ . -`, not starting with `.`
/// (so never `.` or `..`).
pub fn is_path_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// True when `name` is safe as one token of script text: 1 to
/// [`MAX_NAME_LEN`] printable ASCII characters other than space, `=`, `#`,
/// quotes and backslash.
pub fn is_token_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"=#'\"\\".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_names() {
        for ok in ["sd", "720p", "a.b", "x_y-z"] {
            assert!(is_path_name(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a b",
            "a\nb",
            &"x".repeat(65),
        ] {
            assert!(!is_path_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn token_names() {
        assert!(is_token_name("3.5mbit"));
        assert!(is_token_name("DSL/2M"));
        for bad in ["", "a b", "a=b", "#a", "a\nb", "a'b", "é"] {
            assert!(!is_token_name(bad), "{bad:?}");
        }
    }
}
