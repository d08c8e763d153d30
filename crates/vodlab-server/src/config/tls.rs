//! TLS settings (`[tls]`): values and their checks; the TLS machinery
//! that uses them is `crate::tls`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{secs, ConfigError};

/// Defaults of the TLS settings.
pub mod defaults {
    use std::time::Duration;

    /// Plaintext bytes per write while a connection warms up (nghttpx's
    /// `SHRPX_SMALL_WRITE_LIMIT`).
    pub const SMALL_RECORD: usize = 1300;
    /// Bytes a connection writes in small records before full-size ones
    /// (nghttpx's `--tls-dyn-rec-warmup-threshold` default, 1 MiB).
    pub const DYN_WARMUP: u64 = 1 << 20;
    /// Idle time after which records are small again (nghttpx's
    /// `--tls-dyn-rec-idletime` default, 1 s).
    pub const DYN_IDLE: Duration = Duration::from_secs(1);
    /// Largest TLS record plaintext (RFC 8446 §5.1).
    pub const MAX_RECORD: u64 = 16384;
    /// Smallest `record_size` accepted.
    pub const MIN_RECORD: u64 = 512;
}

/// TLS settings (`[tls]`; off unless a certificate or `self_signed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// PEM certificate chain (`--tls-cert`).
    pub cert: Option<PathBuf>,
    /// PEM private key (`--tls-key`).
    pub key: Option<PathBuf>,
    /// Generate a self-signed certificate for `localhost` and 127.0.0.1 at
    /// start (`--tls-self-signed`, rcgen).
    pub self_signed: bool,
    /// Where to write the generated certificate (PEM), for clients' `--ca`.
    pub self_signed_out: Option<PathBuf>,
    /// Fixed maximum plaintext bytes per TLS record (`--tls-record-size`;
    /// `None` = 16 KiB, the protocol's maximum).
    pub record_size: Option<u64>,
    /// nghttpx's dynamic record sizing (`--tls-dynamic-records`): small
    /// records until `dyn_warmup` bytes were written, again after
    /// `dyn_idle` without writes.
    pub dynamic_records: bool,
    /// Warm-up threshold of dynamic sizing, bytes.
    pub dyn_warmup: u64,
    /// Idle time that resets dynamic sizing.
    #[serde(with = "secs")]
    pub dyn_idle: Duration,
    /// Offer `h2` in ALPN (else only `http/1.1`).
    pub alpn_h2: bool,
}

impl Default for TlsSettings {
    fn default() -> Self {
        Self {
            cert: None,
            key: None,
            self_signed: false,
            self_signed_out: None,
            record_size: None,
            dynamic_records: false,
            dyn_warmup: defaults::DYN_WARMUP,
            dyn_idle: defaults::DYN_IDLE,
            alpn_h2: true,
        }
    }
}

impl TlsSettings {
    /// Whether the server speaks TLS at all.
    pub fn enabled(&self) -> bool {
        self.self_signed || self.cert.is_some()
    }

    /// Checks the settings, naming the bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let range = |ok: bool, field, why| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Range { field, why })
            }
        };
        range(
            self.cert.is_some() == self.key.is_some(),
            "tls.cert",
            "tls.cert and tls.key go together",
        )?;
        range(
            !(self.self_signed && self.cert.is_some()),
            "tls.self_signed",
            "either a certificate or self_signed, not both",
        )?;
        range(
            self.record_size
                .is_none_or(|n| (defaults::MIN_RECORD..=defaults::MAX_RECORD).contains(&n)),
            "tls.record_size",
            "must be 512 to 16384 bytes",
        )?;
        range(
            !(self.dynamic_records && self.record_size.is_some()),
            "tls.dynamic_records",
            "dynamic record sizing and a fixed record size exclude each other",
        )?;
        range(
            !self.dynamic_records || self.dyn_warmup > 0,
            "tls.dyn_warmup",
            "must be > 0 with dynamic records",
        )
    }
}
