//! Certificates for a comparison over TLS: a throw-away CA and a leaf for
//! localhost, 127.0.0.1 and ::1 signed by it (rcgen, ECDSA P-256), written
//! to the comparison's directory; every server gets the leaf, the client
//! trusts only the CA (a self-signed leaf would not do: webpki refuses a CA
//! certificate used as an end entity).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::ServerError;

/// Where the generated certificate files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate (PEM), for the client's `--ca`.
    pub ca: PathBuf,
    /// The leaf certificate (PEM), for the servers.
    pub cert: PathBuf,
    /// The leaf's private key (PEM, PKCS#8).
    pub key: PathBuf,
}

impl TlsFiles {
    /// Generates a CA and a leaf into `dir` (`ca.pem`, `cert.pem`,
    /// `key.pem`), named by absolute paths.
    pub fn generate(dir: &Path) -> Result<Self, ServerError> {
        Self::generate_pinned(dir).map(|(files, _)| files)
    }

    /// As [`TlsFiles::generate`], with the leaf's public-key pin: the
    /// base64 of the SHA-256 of its SubjectPublicKeyInfo (DER), as
    /// Chromium's `--ignore-certificate-errors-spki-list` takes it (HPKP's
    /// pin-sha256 form).
    pub fn generate_pinned(dir: &Path) -> Result<(Self, String), ServerError> {
        let gen = |e: rcgen::Error| ServerError::Certificate(e.to_string());
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |err| ServerError::Io { path, err }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        // absolute: servers resolve relative paths against their own roots
        let dir = &std::fs::canonicalize(dir).map_err(io(dir))?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(gen)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "vodlab compare CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().map_err(gen)?;
        let ca_cert = ca.self_signed(&ca_key).map_err(gen)?;
        let mut leaf = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ])
        .map_err(gen)?;
        leaf.is_ca = IsCa::ExplicitNoCa;
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = KeyPair::generate().map_err(gen)?;
        let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).map_err(gen)?;
        let pin = spki_pin(&leaf_key.public_key_der());
        let files = Self {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        for (p, text) in [
            (&files.ca, ca_cert.pem()),
            (&files.cert, leaf_cert.pem()),
            (&files.key, leaf_key.serialize_pem()),
        ] {
            std::fs::write(p, text).map_err(io(p))?;
        }
        Ok((files, pin))
    }
}

/// The pin of a SubjectPublicKeyInfo (DER): base64 of its SHA-256.
pub fn spki_pin(spki_der: &[u8]) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki_der);
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_and_a_leaf_signed_by_it() {
        let d = tempfile::tempdir().unwrap();
        let f = TlsFiles::generate(d.path()).unwrap();
        let ca = std::fs::read_to_string(&f.ca).unwrap();
        let cert = std::fs::read_to_string(&f.cert).unwrap();
        let key = std::fs::read_to_string(&f.key).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(key.contains("PRIVATE KEY"));
        assert_ne!(ca, cert);
        assert!(f.cert.is_absolute() && f.key.is_absolute() && f.ca.is_absolute());
    }

    /// The pin is of the leaf's key: the SPKI inside cert.pem hashes to it
    /// (found by its bytes in the certificate's DER), and it has the
    /// base64 form of 32 bytes.
    #[test]
    fn the_pin_is_the_leafs_spki_hash() {
        use rustls_pki_types::pem::PemObject;
        let d = tempfile::tempdir().unwrap();
        let (f, pin) = TlsFiles::generate_pinned(d.path()).unwrap();
        assert_eq!(pin.len(), 44, "{pin}");
        let der = rustls_pki_types::CertificateDer::from_pem_file(&f.cert).unwrap();
        let key = std::fs::read_to_string(&f.key).unwrap();
        let kp = KeyPair::from_pem(&key).unwrap();
        let spki = kp.public_key_der();
        assert!(
            der.windows(spki.len()).any(|w| w == spki.as_slice()),
            "the leaf's certificate carries its key's SPKI"
        );
        assert_eq!(spki_pin(&spki), pin);
        // known answer: SHA-256 of the empty input
        assert_eq!(
            spki_pin(b""),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }
}
