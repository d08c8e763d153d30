//! TLS for `vodlab serve`: the settings ([`TlsSettings`]), the rustls
//! server configuration with ALPN `h2` and `http/1.1` ([`server_config`]),
//! and the TLS record size — a fixed maximum fragment
//! (`ServerConfig::max_fragment_size`) or nghttpx's dynamic sizing
//! ([`RecordSizer`]).
//!
//! **Dynamic record sizing** follows nghttpx (`Connection::get_tls_write_limit`
//! in `src/shrpx_connection.cc`, options `--tls-dyn-rec-warmup-threshold`,
//! default 1 MiB, and `--tls-dyn-rec-idletime`, default 1 s): each write
//! is limited to 1,300 bytes of plaintext (`SHRPX_SMALL_WRITE_LIMIT`) until
//! the connection has written the warm-up threshold; then writes (and so
//! records) are full size (16 KiB); a connection that has written nothing
//! for longer than the idle time starts over with small records. rustls has
//! no per-write record size, but it turns each plaintext write into its own
//! records of at most the maximum fragment, so the limit is applied the way
//! nghttpx applies it to `SSL_write`: by writing at most that many bytes per
//! call (`transport.rs` does). nghttpx measures idleness from the
//! moment its write buffer drained; here it is measured from the last write
//! (the rule of nghttpx's first versions, `t - tls.last_write_time > 1`),
//! which is the same whenever the server writes without pause.
//!
//! There is no kTLS on this kernel: bodies over TLS are read from the file
//! into a buffer and encrypted in user space (no `sendfile`); the cost is
//! documented in docs/serve.md.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;

pub use crate::config::tls::{defaults, TlsSettings};

impl TlsSettings {
    /// The record sizer of a new connection, when sizing is dynamic.
    pub fn sizer(&self, now: Instant) -> Option<RecordSizer> {
        self.dynamic_records
            .then(|| RecordSizer::new(self.dyn_warmup, self.dyn_idle, now))
    }
}

/// Why TLS could not be set up.
#[derive(Debug, Error)]
pub enum TlsError {
    /// The certificate or key file.
    #[error("{path}: {why}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// rcgen could not make a certificate.
    #[error("self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the key or a setting.
    #[error("rustls: {0}")]
    Rustls(#[from] rustls::Error),
    /// Writing the generated certificate.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The ALPN protocols offered, most preferred first.
pub fn alpn(s: &TlsSettings) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    if s.alpn_h2 {
        v.push(b"h2".to_vec());
    }
    v.push(b"http/1.1".to_vec());
    v
}

/// How long a generated certificate is valid from its start: a year, under
/// the 398 days that browsers (and testssl.sh) accept for a leaf certificate;
/// rcgen's default runs to the year 4096, which testssl.sh rates HIGH.
pub const SELF_SIGNED_VALIDITY: time::Duration = time::Duration::days(365);

/// How far before its generation a generated certificate starts: a day, for
/// clients whose clocks lag the server's.
pub const SELF_SIGNED_BACKDATE: time::Duration = time::Duration::days(1);

/// The parameters of the certificate `--tls-self-signed` generates at `now`:
/// for `localhost`, 127.0.0.1 and ::1, valid from [`SELF_SIGNED_BACKDATE`]
/// before `now` for [`SELF_SIGNED_VALIDITY`].
pub fn self_signed_params(now: time::OffsetDateTime) -> Result<rcgen::CertificateParams, TlsError> {
    let mut p = rcgen::CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    p.not_before = now - SELF_SIGNED_BACKDATE;
    p.not_after = p.not_before + SELF_SIGNED_VALIDITY;
    Ok(p)
}

/// The rustls server configuration: certificate (loaded or generated),
/// ALPN, the fixed record size. ring as the crypto provider, chosen
/// explicitly so that another crate enabling a second provider does not
/// make the default ambiguous.
pub fn server_config(s: &TlsSettings) -> Result<Arc<ServerConfig>, TlsError> {
    let (certs, key) = match (&s.cert, &s.key) {
        (Some(c), Some(k)) => {
            let file_err = |path: &PathBuf| {
                let path = path.clone();
                move |e: rustls_pki_types::pem::Error| TlsError::File {
                    path,
                    why: e.to_string(),
                }
            };
            let certs = CertificateDer::pem_file_iter(c)
                .map_err(file_err(c))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(file_err(c))?;
            if certs.is_empty() {
                return Err(TlsError::File {
                    path: c.clone(),
                    why: "no certificate in the file".into(),
                });
            }
            let key = PrivateKeyDer::from_pem_file(k).map_err(file_err(k))?;
            (certs, key)
        }
        _ => {
            let key_pair = rcgen::KeyPair::generate()?;
            let cert =
                self_signed_params(time::OffsetDateTime::now_utc())?.self_signed(&key_pair)?;
            if let Some(out) = &s.self_signed_out {
                std::fs::write(out, cert.pem())?;
            }
            let key =
                PrivateKeyDer::try_from(key_pair.serialize_der()).map_err(|e| TlsError::File {
                    path: PathBuf::from("(generated)"),
                    why: e.to_string(),
                })?;
            (vec![cert.der().clone()], key)
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = alpn(s);
    // rustls counts the 5-byte record header in the fragment size
    cfg.max_fragment_size = s.record_size.map(|n| n as usize + 5);
    Ok(Arc::new(cfg))
}

/// nghttpx's dynamic TLS record sizing, without I/O: how many plaintext
/// bytes the next write may carry ([`RecordSizer::limit`]) and what was
/// written ([`RecordSizer::wrote`]). Every method takes `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSizer {
    warmup: u64,
    idle: Duration,
    written: u64,
    last_write: Instant,
    /// Writes limited to small records (for the statistics).
    pub small_writes: u64,
}

impl RecordSizer {
    /// A connection that has written nothing yet (small records first).
    pub fn new(warmup: u64, idle: Duration, now: Instant) -> Self {
        Self {
            warmup,
            idle,
            written: 0,
            last_write: now,
            small_writes: 0,
        }
    }

    /// Most plaintext bytes of the next write: [`defaults::SMALL_RECORD`]
    /// until the warm-up threshold is written, and again (the count
    /// restarting) after more than the idle time without writes; else
    /// `usize::MAX` (rustls cuts full 16 KiB records).
    pub fn limit(&mut self, now: Instant) -> usize {
        if now.saturating_duration_since(self.last_write) > self.idle {
            self.written = 0;
        }
        if self.written >= self.warmup {
            usize::MAX
        } else {
            defaults::SMALL_RECORD
        }
    }

    /// Records a write of `n` plaintext bytes at `now`.
    pub fn wrote(&mut self, n: usize, now: Instant) {
        if self.written < self.warmup {
            self.written += n as u64;
            self.small_writes += 1;
        }
        self.last_write = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigError;

    #[test]
    fn records_grow_after_the_warmup_and_shrink_after_idle() {
        let t0 = Instant::now();
        let mut s = RecordSizer::new(10_000, Duration::from_secs(1), t0);
        let mut t = t0;
        let mut sent = 0u64;
        // small writes until 10,000 bytes are out
        while sent < 10_000 {
            let n = s.limit(t);
            assert_eq!(n, defaults::SMALL_RECORD, "after {sent} bytes");
            s.wrote(n, t);
            sent += n as u64;
            t += Duration::from_millis(10);
        }
        assert_eq!(s.limit(t), usize::MAX);
        s.wrote(1 << 20, t);
        // a pause of exactly the idle time keeps full records; longer resets them
        t += Duration::from_secs(1);
        assert_eq!(s.limit(t), usize::MAX);
        s.wrote(100, t);
        t += Duration::from_millis(1001);
        assert_eq!(s.limit(t), defaults::SMALL_RECORD);
        s.wrote(1300, t);
        assert_eq!(s.limit(t), defaults::SMALL_RECORD, "the count restarted");
    }

    #[test]
    fn settings_are_checked_by_name() {
        let field = |f: fn(&mut TlsSettings)| {
            let mut s = TlsSettings::default();
            f(&mut s);
            match s.validate() {
                Err(ConfigError::Range { field, .. }) => field,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(TlsSettings::default().validate(), Ok(()));
        assert!(!TlsSettings::default().enabled());
        assert_eq!(field(|s| s.cert = Some("c".into())), "tls.cert");
        assert_eq!(
            field(|s| {
                s.cert = Some("c".into());
                s.key = Some("k".into());
                s.self_signed = true;
            }),
            "tls.self_signed"
        );
        assert_eq!(field(|s| s.record_size = Some(100)), "tls.record_size");
        assert_eq!(field(|s| s.record_size = Some(16385)), "tls.record_size");
        assert_eq!(
            field(|s| {
                s.record_size = Some(4096);
                s.dynamic_records = true;
            }),
            "tls.dynamic_records"
        );
    }

    #[test]
    fn a_self_signed_config_offers_h2_then_http11() {
        let s = TlsSettings {
            self_signed: true,
            record_size: Some(4096),
            ..TlsSettings::default()
        };
        let c = server_config(&s).unwrap();
        assert_eq!(c.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert_eq!(c.max_fragment_size, Some(4101));
        let s = TlsSettings {
            alpn_h2: false,
            ..s
        };
        assert_eq!(alpn(&s), vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_generated_certificate_is_valid_for_a_year_from_yesterday() {
        let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let p = self_signed_params(now).unwrap();
        assert_eq!(now - p.not_before, time::Duration::days(1));
        assert_eq!(p.not_after - p.not_before, time::Duration::days(365));
        assert!(p.not_after - p.not_before <= time::Duration::days(398));
        let names: Vec<String> = p
            .subject_alt_names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names[0].contains("localhost"), "{names:?}");
    }
}
