//! The HTTP/2 settings (`[h2]`, `vodlab serve --h2-*`): what the server
//! advertises, what a stream may queue, and the abuse limits, with their
//! defaults and `validate()`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::flood::FloodLimits;

/// Defaults of the HTTP/2 settings.
pub mod defaults {
    /// Initial stream window advertised (SETTINGS_INITIAL_WINDOW_SIZE), 16 MiB.
    pub const STREAM_WINDOW: u32 = 16 << 20;
    /// Connection window advertised (WINDOW_UPDATE on stream 0), 16 MiB.
    pub const CONNECTION_WINDOW: u32 = 16 << 20;
    /// SETTINGS_MAX_FRAME_SIZE advertised, 64 KiB.
    pub const MAX_FRAME_SIZE: u32 = 64 << 10;
    /// SETTINGS_MAX_CONCURRENT_STREAMS (nginx's default).
    pub const MAX_CONCURRENT_STREAMS: u32 = 128;
    /// SETTINGS_MAX_HEADER_LIST_SIZE, 16 KiB.
    pub const MAX_HEADER_LIST: u32 = 16 << 10;
    /// Bytes a stream may have queued in the h2 crate, 1 MiB.
    pub const SEND_BUFFER: u32 = 1 << 20;
    /// Streams reset by the client before they were accepted, at once (the
    /// h2 crate's default).
    pub const PENDING_ACCEPT_RESETS: usize = 20;
    /// Streams the server may reset for the client's protocol errors.
    pub const LOCAL_ERROR_RESETS: usize = 200;
    /// Body bytes read from the file per DATA write, 256 KiB (one of the
    /// server's pooled body buffers).
    pub const BODY_CHUNK: usize = crate::body_pool::BODY_BUFFER;
    /// Non-ACK SETTINGS frames per second.
    pub const SETTINGS_PER_S: u32 = 100;
    /// Non-ACK PING frames per second.
    pub const PINGS_PER_S: u32 = 100;
    /// WINDOW_UPDATE frames per second beyond those the client earned by
    /// the DATA it received (two per DATA frame) and the streams it opened
    /// (one per HEADERS): a reader at any rate and window size sends only
    /// earned ones (`crate::flood`).
    pub const WINDOW_UPDATES_PER_S: u32 = 1000;
    /// Small DATA frames per second (a VoD server takes no request
    /// bodies; at 1,000/s a reconnecting flood cost ~0.4 ms per connection).
    pub const SMALL_DATA_PER_S: u32 = 100;
    /// RST_STREAM frames per second.
    pub const RESETS_PER_S: u32 = 200;
    /// The first ban of an address whose connection was closed for abuse,
    /// ms (`crate::penalty`).
    pub const ABUSE_BAN_MS: u64 = 1_000;
    /// The longest ban, ms (the ban doubles with each abuse remembered).
    pub const ABUSE_MAX_BAN_MS: u64 = 300_000;
    /// How long an address stays remembered after its ban, ms.
    pub const ABUSE_PROBATION_MS: u64 = 60_000;
    /// New connections a second from an address on probation.
    pub const ABUSE_PROBATION_PER_S: u32 = 4;
    /// Addresses remembered at most.
    pub const ABUSE_TABLE: usize = 4_096;
}

/// HTTP/2 settings (`[h2]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct H2Settings {
    /// Accept h2c by prior knowledge on the plain port.
    pub h2c: bool,
    /// SETTINGS_INITIAL_WINDOW_SIZE (what a client may send per stream).
    pub stream_window: u32,
    /// The connection's receive window.
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE advertised (frames the client may send; the
    /// server's DATA frames follow the client's setting).
    pub max_frame_size: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE (also bounds CONTINUATION).
    pub max_header_list_size: u32,
    /// Bytes a stream may queue in the h2 crate.
    pub send_buffer: u32,
    /// Client-reset streams not yet accepted (rapid reset).
    pub max_pending_accept_resets: usize,
    /// Streams reset for client errors before GOAWAY.
    pub max_local_error_resets: usize,
    /// Non-ACK SETTINGS per second (0 = no limit).
    pub settings_per_s: u32,
    /// Non-ACK PING per second (0 = no limit).
    pub pings_per_s: u32,
    /// WINDOW_UPDATE per second beyond those earned by DATA received and
    /// streams opened (0 = no limit).
    pub window_updates_per_s: u32,
    /// Small DATA frames per second (0 = no limit).
    pub small_data_per_s: u32,
    /// RST_STREAM per second (0 = no limit).
    pub resets_per_s: u32,
    /// First ban, ms, of an address whose connection was closed for abuse:
    /// its new connections are closed at accept (0 = no penalty;
    /// `crate::penalty`).
    pub abuse_ban_ms: u64,
    /// Longest ban, ms (bans double with each abuse remembered).
    pub abuse_max_ban_ms: u64,
    /// How long an address stays remembered after its ban, ms.
    pub abuse_probation_ms: u64,
    /// New connections a second from an address on probation (0 = no limit).
    pub abuse_probation_per_s: u32,
    /// Addresses remembered at most.
    pub abuse_table: usize,
    /// Drop a banned address's packets at the listening socket with a BPF
    /// filter (`crate::synfilter`), so its attempts never become
    /// connections; off: they are accepted and reset.
    pub abuse_drop_syn: bool,
    /// New connections a second from one address before it is banned as
    /// abusive (`crate::conn_rate`; burst one second's worth); 0 = no limit.
    pub abuse_conn_rate: u32,
}

impl Default for H2Settings {
    fn default() -> Self {
        Self {
            h2c: true,
            stream_window: defaults::STREAM_WINDOW,
            connection_window: defaults::CONNECTION_WINDOW,
            max_frame_size: defaults::MAX_FRAME_SIZE,
            max_concurrent_streams: defaults::MAX_CONCURRENT_STREAMS,
            max_header_list_size: defaults::MAX_HEADER_LIST,
            send_buffer: defaults::SEND_BUFFER,
            max_pending_accept_resets: defaults::PENDING_ACCEPT_RESETS,
            max_local_error_resets: defaults::LOCAL_ERROR_RESETS,
            settings_per_s: defaults::SETTINGS_PER_S,
            pings_per_s: defaults::PINGS_PER_S,
            window_updates_per_s: defaults::WINDOW_UPDATES_PER_S,
            small_data_per_s: defaults::SMALL_DATA_PER_S,
            resets_per_s: defaults::RESETS_PER_S,
            abuse_ban_ms: defaults::ABUSE_BAN_MS,
            abuse_max_ban_ms: defaults::ABUSE_MAX_BAN_MS,
            abuse_probation_ms: defaults::ABUSE_PROBATION_MS,
            abuse_probation_per_s: defaults::ABUSE_PROBATION_PER_S,
            abuse_table: defaults::ABUSE_TABLE,
            abuse_drop_syn: true,
            abuse_conn_rate: 0,
        }
    }
}

impl H2Settings {
    /// Checks the settings against RFC 9113's ranges, naming the bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let range = |ok: bool, field, why| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Range { field, why })
            }
        };
        const MAX_WINDOW: u32 = (1 << 31) - 1;
        range(
            (1..=MAX_WINDOW).contains(&self.stream_window),
            "h2.stream_window",
            "must be 1 to 2^31-1",
        )?;
        range(
            (65_535..=MAX_WINDOW).contains(&self.connection_window),
            "h2.connection_window",
            "must be 65535 to 2^31-1",
        )?;
        range(
            (16_384..=16_777_215).contains(&self.max_frame_size),
            "h2.max_frame_size",
            "must be 16384 to 16777215 (RFC 9113 §6.5.2)",
        )?;
        range(
            self.max_concurrent_streams > 0,
            "h2.max_concurrent_streams",
            "must be > 0",
        )?;
        range(
            self.max_header_list_size >= 1024,
            "h2.max_header_list_size",
            "must be at least 1024",
        )?;
        range(
            self.send_buffer >= 16_384,
            "h2.send_buffer",
            "must be at least 16 KiB",
        )?;
        range(
            self.max_pending_accept_resets > 0,
            "h2.max_pending_accept_resets",
            "must be > 0",
        )?;
        range(
            self.abuse_ban_ms == 0 || self.abuse_max_ban_ms >= self.abuse_ban_ms,
            "h2.abuse_max_ban_ms",
            "must be at least h2.abuse_ban_ms",
        )?;
        range(
            self.abuse_ban_ms == 0 || self.abuse_table > 0,
            "h2.abuse_table",
            "must be > 0 while h2.abuse_ban_ms is set",
        )
    }

    /// The per-address penalty's settings.
    pub fn penalty(&self) -> crate::penalty::PenaltySettings {
        crate::penalty::PenaltySettings {
            ban: Duration::from_millis(self.abuse_ban_ms),
            max_ban: Duration::from_millis(self.abuse_max_ban_ms),
            probation: Duration::from_millis(self.abuse_probation_ms),
            probation_per_s: self.abuse_probation_per_s,
            table: self.abuse_table,
        }
    }

    /// The frame-rate limits.
    pub fn flood_limits(&self) -> FloodLimits {
        FloodLimits {
            settings: self.settings_per_s,
            pings: self.pings_per_s,
            window_updates: self.window_updates_per_s,
            small_data: self.small_data_per_s,
            resets: self.resets_per_s,
            // the list limit and 1 KiB (HEADERS padding, table-size
            // updates): an encoder that picks the shorter string form spends
            // fewer bytes on a field than the list counts for it (name, value
            // and 32), so a longer block is a list over the limit, refused
            // by the h2 crate anyway — and decoding it is what costs
            header_block: self.max_header_list_size.saturating_add(1024),
        }
    }

    pub(crate) fn builder(&self) -> h2::server::Builder {
        let mut b = h2::server::Builder::new();
        b.initial_window_size(self.stream_window)
            .initial_connection_window_size(self.connection_window)
            .max_frame_size(self.max_frame_size)
            .max_concurrent_streams(self.max_concurrent_streams)
            .max_header_list_size(self.max_header_list_size)
            .max_send_buffer_size(self.send_buffer as usize)
            .max_pending_accept_reset_streams(self.max_pending_accept_resets)
            .max_local_error_reset_streams(Some(self.max_local_error_resets));
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_by_name() {
        assert_eq!(H2Settings::default().validate(), Ok(()));
        let field = |f: fn(&mut H2Settings)| {
            let mut s = H2Settings::default();
            f(&mut s);
            match s.validate() {
                Err(ConfigError::Range { field, .. }) => field,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(field(|s| s.max_frame_size = 1000), "h2.max_frame_size");
        assert_eq!(field(|s| s.max_frame_size = 1 << 24), "h2.max_frame_size");
        assert_eq!(field(|s| s.stream_window = 0), "h2.stream_window");
        assert_eq!(field(|s| s.stream_window = 1 << 31), "h2.stream_window");
        assert_eq!(field(|s| s.connection_window = 100), "h2.connection_window");
        assert_eq!(
            field(|s| s.max_concurrent_streams = 0),
            "h2.max_concurrent_streams"
        );
        assert_eq!(field(|s| s.abuse_max_ban_ms = 10), "h2.abuse_max_ban_ms");
        assert_eq!(field(|s| s.abuse_table = 0), "h2.abuse_table");
        let mut off = H2Settings {
            abuse_ban_ms: 0,
            abuse_table: 0,
            ..H2Settings::default()
        };
        assert_eq!(off.validate(), Ok(()), "no table needed without a ban");
        off.abuse_ban_ms = 5;
        assert!(off.validate().is_err());
    }
}
