//! The TLS, HTTP/2 and HTTP/3 flags of `vodlab serve` and the settings
//! they give.

use std::path::PathBuf;

use super::{seconds, SettingsError};

/// TLS and HTTP/2 flags of `vodlab serve`. One port serves HTTP/1.1,
/// h2c (prior knowledge), and with a certificate TLS (h2 or http/1.1 by
/// ALPN).
#[derive(Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct ProtoArgs {
    /// PEM certificate chain: TLS on the listening port (with --tls-key).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE", requires = "tls_key"))]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE", requires = "tls_cert"))]
    pub tls_key: Option<PathBuf>,
    /// TLS with a certificate generated at start for localhost (rcgen).
    #[cfg_attr(feature = "cli", arg(long, conflicts_with = "tls_cert"))]
    pub tls_self_signed: bool,
    /// Write the generated certificate (PEM) here, for a client's --ca.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "FILE", requires = "tls_self_signed")
    )]
    pub tls_cert_out: Option<PathBuf>,
    /// Fixed maximum plaintext bytes per TLS record (512 B to 16K; default
    /// 16K, the protocol's maximum).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", value_parser = vodlab_units::parse_size))]
    pub tls_record_size: Option<u64>,
    /// nghttpx's dynamic TLS record sizing: 1,300-byte records until
    /// --tls-dyn-warmup bytes were written, again after --tls-dyn-idle
    /// seconds without writes.
    #[cfg_attr(feature = "cli", arg(long, conflicts_with = "tls_record_size"))]
    pub tls_dynamic_records: bool,
    /// Warm-up threshold of dynamic record sizing.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = crate::tls::defaults::DYN_WARMUP, value_parser = vodlab_units::parse_size))]
    pub tls_dyn_warmup: u64,
    /// Idle time after which dynamic record sizing starts over (a bare
    /// number is seconds).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = crate::tls::defaults::DYN_IDLE.as_secs_f64(), value_parser = vodlab_units::parse_seconds))]
    pub tls_dyn_idle: f64,
    /// Offer only http/1.1 in ALPN (no h2 over TLS).
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_h2: bool,
    /// Refuse h2c by prior knowledge on the plain port (answered as HTTP/1.1).
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_h2c: bool,
    /// HTTP/2 initial stream window advertised (a size).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = crate::h2::defaults::STREAM_WINDOW as u64, value_parser = vodlab_units::parse_size))]
    pub h2_stream_window: u64,
    /// HTTP/2 connection window advertised.
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = crate::h2::defaults::CONNECTION_WINDOW as u64, value_parser = vodlab_units::parse_size))]
    pub h2_connection_window: u64,
    /// HTTP/2 SETTINGS_MAX_FRAME_SIZE advertised (16K to 16M-1).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = crate::h2::defaults::MAX_FRAME_SIZE as u64, value_parser = vodlab_units::parse_size))]
    pub h2_max_frame_size: u64,
    /// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS (`--h2-max-streams` is an
    /// older name).
    #[cfg_attr(feature = "cli", arg(long = "h2-max-concurrent-streams", alias = "h2-max-streams", value_name = "N", default_value_t = crate::h2::defaults::MAX_CONCURRENT_STREAMS))]
    pub h2_max_streams: u32,
    /// First ban (a bare number is ms: 500, 2s) of an address whose HTTP/2 connection was closed for
    /// a flood: its new connections are reset at accept; the ban doubles
    /// with each abuse remembered (up to 300 s), then 60 s of probation at
    /// 4 new connections/s. 0 turns the per-address penalty off (e.g.
    /// clients behind one NAT address).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = crate::h2::defaults::ABUSE_BAN_MS, value_parser = vodlab_units::parse_millis))]
    pub h2_abuse_ban: u64,
    /// Where a banned address is refused: `syn` (default) drops its packets
    /// at the listening socket with a BPF filter, so its attempts never
    /// become connections and cost the server nothing; `accept` accepts and
    /// resets each one (counted in the statistics' `h2.refused_banned`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "WHERE", default_value = "syn", value_parser = ["syn", "accept"]))]
    pub h2_abuse_refuse: String,
    /// New connections a second from one address (IPv4 whole, IPv6 by /64;
    /// a burst of one second's worth) before the address is banned like a
    /// flood's (--h2-abuse-ban, and its SYNs dropped): the lever against a
    /// flood of bare connections. 0 (default) = no limit: load generators
    /// and NATs open many connections from one address. E.g. 200.
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", default_value_t = 0))]
    pub conn_rate_per_address: u32,
    /// HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE (also bounds CONTINUATION).
    #[cfg_attr(feature = "cli", arg(long, value_name = "SIZE", default_value_t = crate::h2::defaults::MAX_HEADER_LIST as u64, value_parser = vodlab_units::parse_size))]
    pub h2_max_header_list: u64,
    /// HTTP/3 over QUIC on UDP beside the TCP listener (needs --tls-cert
    /// or --tls-self-signed; ALPN h3). `--h3` alone: the TCP port's number;
    /// `--h3=PORT` another. h1/h2 responses then carry `Alt-Svc: h3=":PORT"`.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PORT", num_args = 0..=1, require_equals = true, default_missing_value = "0"))]
    pub h3: Option<u16>,
    /// HTTP/3: request streams a connection may have open at once (QUIC stream credit).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", default_value_t = crate::h3::defaults::MAX_CONCURRENT_STREAMS))]
    pub h3_max_concurrent_streams: u32,
    /// HTTP/3: QUIC idle timeout (a bare number is seconds).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DURATION", default_value_t = crate::h3::defaults::IDLE_TIMEOUT.as_secs_f64(), value_parser = vodlab_units::parse_seconds))]
    pub h3_idle_timeout: f64,
    /// HTTP/3: QUIC connections open at once; more are refused (CONNECTION_REFUSED).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", default_value_t = crate::h3::defaults::MAX_CONNECTIONS))]
    pub h3_max_connections: usize,
    /// HTTP/3: validate every client address with a QUIC Retry (one more
    /// round trip) before its connection is accepted.
    #[cfg_attr(feature = "cli", arg(long))]
    pub h3_retry: bool,
    /// HTTP/3: with this many QUIC handshakes in progress, new unvalidated
    /// connections get a Retry even without --h3-retry (an Initial flood
    /// from spoofed addresses then keeps no more state).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", default_value_t = crate::h3::defaults::RETRY_ABOVE))]
    pub h3_retry_above: usize,
    /// HTTP/3: accept 0-RTT from clients resuming a session ticket of an
    /// earlier connection (their first requests arrive before the
    /// handshake completes; early data can be replayed, and this server
    /// only serves files).
    #[cfg_attr(feature = "cli", arg(long = "h3-0rtt"))]
    pub h3_0rtt: bool,
}

impl ProtoArgs {
    /// The TLS and HTTP/2 settings these flags give.
    pub fn settings(
        &self,
    ) -> Result<(crate::tls::TlsSettings, crate::h2::H2Settings), SettingsError> {
        let u32_of = |name: &'static str, value: u64| {
            u32::try_from(value).map_err(|source| SettingsError::TooLarge {
                name,
                value,
                source,
            })
        };
        let tls = crate::tls::TlsSettings {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            self_signed: self.tls_self_signed,
            self_signed_out: self.tls_cert_out.clone(),
            record_size: self.tls_record_size,
            dynamic_records: self.tls_dynamic_records,
            dyn_warmup: self.tls_dyn_warmup,
            dyn_idle: seconds("tls-dyn-idle", self.tls_dyn_idle)?,
            alpn_h2: !self.no_h2,
        };
        let h2 = crate::h2::H2Settings {
            h2c: !self.no_h2c,
            stream_window: u32_of("h2-stream-window", self.h2_stream_window)?,
            connection_window: u32_of("h2-connection-window", self.h2_connection_window)?,
            max_frame_size: u32_of("h2-max-frame-size", self.h2_max_frame_size)?,
            max_concurrent_streams: self.h2_max_streams,
            max_header_list_size: u32_of("h2-max-header-list", self.h2_max_header_list)?,
            abuse_ban_ms: self.h2_abuse_ban,
            abuse_max_ban_ms: crate::h2::defaults::ABUSE_MAX_BAN_MS.max(self.h2_abuse_ban),
            abuse_drop_syn: self.h2_abuse_refuse != "accept",
            abuse_conn_rate: self.conn_rate_per_address,
            ..crate::h2::H2Settings::default()
        };
        Ok((tls, h2))
    }

    /// The HTTP/3 settings these flags give (`--h3=0` or bare `--h3`: the
    /// TCP port's number).
    pub fn h3_settings(&self) -> Result<crate::h3::H3Settings, SettingsError> {
        Ok(crate::h3::H3Settings {
            enabled: self.h3.is_some(),
            port: self.h3.filter(|&p| p != 0),
            max_concurrent_streams: self.h3_max_concurrent_streams,
            idle_timeout: seconds("h3-idle-timeout", self.h3_idle_timeout)?,
            max_connections: self.h3_max_connections,
            retry: self.h3_retry,
            retry_above: self.h3_retry_above,
            zero_rtt: self.h3_0rtt,
        })
    }
}
