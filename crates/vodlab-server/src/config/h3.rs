//! The HTTP/3 settings (`[h3]`, `vodlab serve --h3*`): whether QUIC is
//! served beside the TCP listener, on which UDP port, and its limits, with
//! their defaults and `validate()`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{secs, ConfigError};

/// Defaults of the HTTP/3 settings.
pub mod defaults {
    use std::time::Duration;

    /// Bidirectional streams (requests) a connection may have open at once
    /// (QUIC `initial_max_streams_bidi`; quinn's default is also 100).
    pub const MAX_CONCURRENT_STREAMS: u32 = 100;
    /// Largest `max_concurrent_streams` accepted.
    pub const MAX_STREAMS_LIMIT: u32 = 10_000;
    /// A connection without packets for this long is closed (QUIC's
    /// `max_idle_timeout`, the smaller of both ends' wins).
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
    /// QUIC connections open at once; beyond it new ones are refused
    /// (CONNECTION_REFUSED) before any state is kept for them.
    pub const MAX_CONNECTIONS: usize = 10_000;
    /// QUIC handshakes in progress at once above which every new
    /// unvalidated Initial is answered with a Retry: a flood of Initials
    /// from spoofed addresses keeps at most this many handshakes' state
    /// (a real client pays one round trip, and only under such load).
    pub const RETRY_ABOVE: usize = 100;
}

/// HTTP/3 settings (`[h3]`; off unless `enabled`). HTTP/3 needs TLS 1.3:
/// the certificate is the TCP listener's (`[tls]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct H3Settings {
    /// Serve HTTP/3 over QUIC on UDP (`--h3`).
    pub enabled: bool,
    /// The UDP port (`--h3=PORT`); `None`: the TCP listener's port number.
    pub port: Option<u16>,
    /// Bidirectional streams a connection may have open at once
    /// (`--h3-max-concurrent-streams`); more wait for the client's credit.
    pub max_concurrent_streams: u32,
    /// Idle timeout of a QUIC connection (`--h3-idle-timeout`).
    #[serde(with = "secs")]
    pub idle_timeout: Duration,
    /// QUIC connections open at once (`--h3-max-connections`).
    pub max_connections: usize,
    /// Validate every client address with a Retry before accepting its
    /// connection (`--h3-retry`; costs one round trip). Without it, quinn
    /// still limits what it sends to an unvalidated address to three times
    /// what it received (RFC 9000 §8.1).
    pub retry: bool,
    /// Handshakes in progress at or above which new unvalidated
    /// connections get a Retry even without `retry`
    /// (`--h3-retry-above`): the load-dependent switch.
    pub retry_above: usize,
    /// Accept 0-RTT (`--h3-0rtt`): the session tickets the server issues
    /// allow early data, so a client resuming one may send its first
    /// requests before the handshake completes. Early data may be replayed
    /// by an attacker; the server only serves files (GET and HEAD).
    pub zero_rtt: bool,
}

impl Default for H3Settings {
    fn default() -> Self {
        Self {
            enabled: false,
            port: None,
            max_concurrent_streams: defaults::MAX_CONCURRENT_STREAMS,
            idle_timeout: defaults::IDLE_TIMEOUT,
            max_connections: defaults::MAX_CONNECTIONS,
            retry: false,
            retry_above: defaults::RETRY_ABOVE,
            zero_rtt: false,
        }
    }
}

impl H3Settings {
    /// Checks every value's range; `tls` is whether the server has a
    /// certificate (HTTP/3 cannot run without one).
    pub fn validate(&self, tls: bool) -> Result<(), ConfigError> {
        let range = |ok: bool, field, why| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Range { field, why })
            }
        };
        if !self.enabled {
            return Ok(());
        }
        range(
            tls,
            "h3",
            "HTTP/3 needs TLS: give --tls-cert and --tls-key, or --tls-self-signed",
        )?;
        range(
            (1..=defaults::MAX_STREAMS_LIMIT).contains(&self.max_concurrent_streams),
            "h3.max_concurrent_streams",
            "must be 1 to 10000",
        )?;
        range(
            !self.idle_timeout.is_zero() && self.idle_timeout <= Duration::from_secs(3600),
            "h3.idle_timeout",
            "must be > 0 and at most 3600 s",
        )?;
        range(
            self.max_connections > 0,
            "h3.max_connections",
            "must be > 0",
        )?;
        range(
            self.retry_above > 0,
            "h3.retry_above",
            "must be > 0 (--h3-retry validates every address)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h3_needs_tls_and_sane_limits() {
        let off = H3Settings::default();
        assert_eq!(off.validate(false), Ok(()), "off: nothing to check");
        let on = H3Settings {
            enabled: true,
            ..off
        };
        assert_eq!(on.validate(true), Ok(()));
        let e = on.validate(false).unwrap_err().to_string();
        assert!(
            e.contains("needs TLS") && e.contains("--tls-self-signed"),
            "{e}"
        );
        let zero = H3Settings {
            max_concurrent_streams: 0,
            ..on.clone()
        };
        assert!(zero
            .validate(true)
            .unwrap_err()
            .to_string()
            .contains("h3.max_concurrent_streams"));
        let retry = H3Settings {
            retry_above: 0,
            ..on.clone()
        };
        assert!(retry
            .validate(true)
            .unwrap_err()
            .to_string()
            .contains("h3.retry_above"));
        let idle = H3Settings {
            idle_timeout: Duration::ZERO,
            ..on
        };
        assert!(idle
            .validate(true)
            .unwrap_err()
            .to_string()
            .contains("h3.idle_timeout"));
    }
}
