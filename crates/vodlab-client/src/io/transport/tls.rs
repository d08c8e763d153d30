//! TLS client settings (rustls with the `ring` provider): trust roots from
//! `--ca FILE` (PEM) or the system bundle, or no verification at all with
//! `--insecure`; ALPN per protocol; a session-ticket store per viewer, so a
//! viewer's later connections resume its own TLS sessions (a browser's
//! behaviour; one store shared by every viewer would resume sessions no
//! real viewer holds).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::TransportError;

/// Where the server's certificate is checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Trust only the certificates of this PEM file (`--ca`).
    pub ca: Option<PathBuf>,
    /// Accept any certificate (`--insecure`; test certificates only).
    pub insecure: bool,
}

/// Debian's bundle of trusted roots, used when neither `--ca` nor
/// `--insecure` is given.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Tickets a viewer keeps (a session opens few connections).
const TICKETS_PER_VIEWER: usize = 8;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(path: &Path) -> Result<RootCertStore, TransportError> {
    let bad = |detail: String| TransportError::Ca {
        path: path.to_path_buf(),
        detail,
    };
    let mut store = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))?;
    for c in certs {
        let c = c.map_err(|e| bad(e.to_string()))?;
        store.add(c).map_err(|e| bad(e.to_string()))?;
    }
    if store.is_empty() {
        return Err(bad("no certificate in the file".into()));
    }
    Ok(store)
}

/// The run's TLS client configuration offering `alpn` (one per run; each
/// viewer takes a copy with its own ticket store, [`per_viewer`]).
pub fn client_config(opts: &TlsOptions, alpn: &[&[u8]]) -> Result<ClientConfig, TransportError> {
    let p = provider();
    let builder = ClientConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::Tls(e.to_string()))?;
    let mut cfg = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(p)))
            .with_no_client_auth()
    } else {
        let path = opts
            .ca
            .clone()
            .unwrap_or_else(|| PathBuf::from(SYSTEM_BUNDLE));
        builder
            .with_root_certificates(roots(&path)?)
            .with_no_client_auth()
    };
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Ok(cfg)
}

/// A viewer's copy of the run's configuration, with its own ticket store.
pub fn per_viewer(base: &ClientConfig) -> Arc<ClientConfig> {
    let mut c = base.clone();
    c.resumption = Resumption::in_memory_sessions(TICKETS_PER_VIEWER);
    Arc::new(c)
}

/// The name the certificate is checked against: the host of `--target`
/// without its port (a DNS name or an IP address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, TransportError> {
    let bare = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        host.rsplit_once(':')
            .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
            .map_or(host, |(h, _)| h)
    };
    ServerName::try_from(bare.to_string())
        .map_err(|_| TransportError::Tls(format!("`{bare}` is not a valid TLS server name")))
}

/// `--insecure`: signatures are still checked (the handshake must be sound),
/// the certificate chain and name are not.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_drop_the_port() {
        assert_eq!(
            server_name("localhost:8443").unwrap(),
            ServerName::try_from("localhost").unwrap()
        );
        assert!(matches!(
            server_name("127.0.0.1:443").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]:443").unwrap(),
            ServerName::IpAddress(_)
        ));
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty.pem");
        std::fs::write(&p, "not a certificate\n").unwrap();
        let opts = TlsOptions {
            ca: Some(p.clone()),
            insecure: false,
        };
        let e = client_config(&opts, &[b"h2"]).unwrap_err().to_string();
        assert!(e.contains("empty.pem"), "{e}");
    }
}
