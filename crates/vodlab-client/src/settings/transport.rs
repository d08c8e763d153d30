//! `--protocol`, `--ca`, `--insecure` and the HTTP/2 settings of `run`,
//! `capacity` and `compare`.

use std::path::PathBuf;

use super::{flag, SettingsError};
use crate::io::transport::{H2Settings, LinkImpairment, Protocol, TlsOptions, TransportConfig};

/// `--link-loss PCT` in parts per million (bounds are checked by
/// [`TransportConfig::validate`], this refuses what is not a number).
fn pct_to_ppm(pct: f64) -> Result<u32, SettingsError> {
    if !pct.is_finite() || pct < 0.0 {
        return Err(flag(format!(
            "--link-loss must be from 0 to 50 (%), got {pct}"
        )));
    }
    Ok((pct * 1e4).round().min(f64::from(u32::MAX)) as u32)
}

/// `--link-jitter` (ms) as a duration.
fn ms_to_duration(ms: f64) -> Result<std::time::Duration, SettingsError> {
    if !ms.is_finite() || !(0.0..=1e7).contains(&ms) {
        return Err(flag(format!(
            "--link-jitter must be from 0 to 10 s, got {ms} ms"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(ms / 1e3))
}

/// Protocol, TLS and HTTP/2 options of `run`, `capacity` and `compare`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct TransportSettings {
    /// `h1` (HTTP/1.1), `h2c` (HTTP/2 over TCP with prior knowledge),
    /// `https` (HTTP/1.1 over TLS), `h2` (HTTP/2 over TLS by ALPN) or `h3`
    /// (HTTP/3 over QUIC, UDP to the target's port; 0-RTT off unless
    /// --h3-0rtt; the
    /// classes' rates and delay apply to its datagrams, with --link-loss
    /// and --link-jitter).
    /// Default: h1 for an http:// target, h2 for https://. The same
    /// workload and seed send the same requests at the same times under
    /// every protocol.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PROTOCOL"))]
    pub protocol: Option<Protocol>,
    /// Trust only the certificates of this PEM file (TLS protocols).
    /// Default: the system's roots.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "FILE", conflicts_with = "insecure")
    )]
    pub ca: Option<PathBuf>,
    /// Do not check the server's certificate (test certificates only).
    #[cfg_attr(feature = "cli", arg(long))]
    pub insecure: bool,
    /// HTTP/2 stream window as h2load's -w: 2^N - 1 bytes (0 to 30).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 30, value_name = "N"))]
    pub h2_window_bits: u32,
    /// HTTP/2 connection window as h2load's -W: 2^N - 1 bytes (16 to 30).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 30, value_name = "N"))]
    pub h2_connection_window_bits: u32,
    /// Largest HTTP/2 frame the client accepts, bytes (16384 to 16777215;
    /// h2load's default).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value_t = 16_384, value_name = "BYTES")
    )]
    pub h2_max_frame_size: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS the client advertises.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 100, value_name = "N"))]
    pub h2_max_concurrent_streams: u32,
    /// A session's logical connections carried by one HTTP/2 connection
    /// (0: all of them, so a session's parallel connections become streams
    /// of one connection; 1: one HTTP/2 connection per HTTP/1.1 connection).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0, value_name = "N"))]
    pub h2_streams_per_connection: usize,
    /// Open connections from these local addresses in turn (comma-
    /// separated, the target's family), each with its own ephemeral port
    /// range towards the target: e.g. 127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4
    /// for more than ~28,000 connections to one loopback port. Default:
    /// the kernel's choice.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "ADDR,...", value_delimiter = ',')
    )]
    pub source_address: Vec<std::net::IpAddr>,
    /// Lose PCT % of the datagrams in each direction of every session's
    /// in-process QUIC link (--protocol h3 only; 0 to 50), seeded by
    /// --seed and the session: the same run loses the same datagrams.
    /// Applies with --no-shaping too (which turns off only the classes'
    /// rates and delay). E.g. `--protocol h3 --link-loss 2`. TCP's
    /// in-process shaping cannot drop packets: for loss under h1/h2 use
    /// `vodlab lab --loss-down/--loss-up` (docs/run.md).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.0, value_name = "PCT"))]
    pub link_loss: f64,
    /// Add a random delay of 0 to DURATION (uniform, bare = ms) to each
    /// datagram of the in-process QUIC link, in each direction, without
    /// reordering (--protocol h3 only; at most 10 s). E.g. `--link-jitter 5ms`.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.0, value_name = "DURATION", value_parser = vodlab_units::millis_arg))]
    pub link_jitter: f64,
    /// HTTP/3: send 0-RTT. A viewer's later QUIC connections to the same
    /// server (after the first ended: closed, timed out idle) resume a
    /// session ticket of an earlier one and carry their first requests
    /// before the handshake completes, if the ticket allows early data
    /// (`vodlab serve --h3-0rtt`'s do). The requests are GETs, which 0-RTT
    /// may replay. results.json counts the connections that sent 0-RTT and
    /// those whose 0-RTT the server accepted (`transport.quic`); a request
    /// lost with rejected 0-RTT is sent again on a new connection.
    #[cfg_attr(feature = "cli", arg(long = "h3-0rtt"))]
    pub h3_0rtt: bool,
}

impl TransportSettings {
    /// The transport settings for `target`, refusing a protocol its scheme
    /// cannot carry.
    pub fn config(&self, target: &str) -> Result<TransportConfig, SettingsError> {
        let tls_url = target.starts_with("https://");
        let protocol = self
            .protocol
            .unwrap_or(if tls_url { Protocol::H2 } else { Protocol::H1 });
        if protocol.is_tls() != tls_url {
            return Err(flag(format!(
                "--protocol {protocol} needs an {} target, got `{target}`",
                if protocol.is_tls() {
                    "https://"
                } else {
                    "http://"
                }
            )));
        }
        let bits = |f: &str, n: u32| {
            H2Settings::window_from_bits(n)
                .ok_or_else(|| flag(format!("{f} must be from 0 to 30, got {n}")))
        };
        let cfg = TransportConfig {
            protocol,
            tls: TlsOptions {
                ca: self.ca.clone(),
                insecure: self.insecure,
            },
            h2: H2Settings {
                stream_window: bits("--h2-window-bits", self.h2_window_bits)?,
                connection_window: bits(
                    "--h2-connection-window-bits",
                    self.h2_connection_window_bits,
                )?,
                max_frame_size: self.h2_max_frame_size,
                max_concurrent_streams: self.h2_max_concurrent_streams,
                streams_per_connection: self.h2_streams_per_connection,
            },
            source: self.source_address.clone(),
            link: LinkImpairment {
                loss_ppm: pct_to_ppm(self.link_loss)?,
                jitter: ms_to_duration(self.link_jitter)?,
            },
            h3_0rtt: self.h3_0rtt,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}
