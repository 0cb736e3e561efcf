//! TLS material: loading the configured PEM certificate chain and key into a rustls server
//! config (ring provider), and generating a self-signed pair for demos and tests.

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS certificate file {path}: {message}")]
    Certificate { path: PathBuf, message: String },
    #[error("TLS key file {path}: {message}")]
    Key { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error("writing demo TLS files in {path}: {message}")]
    Demo { path: PathBuf, message: String },
}

/// Builds a rustls server config from PEM files (certificate chain, then private key).
pub fn load_server_config(
    certificate_path: &Path,
    key_path: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    Ok(load_reloadable_server_config(certificate_path, key_path)?.0)
}

/// Builds a rustls server config whose certificate and key can be re-read from the same files
/// later ([`ReloadableCertificate::reload`]): the config is shared by every acceptor, so a
/// renewed certificate reaches new handshakes without touching listeners or connections.
pub fn load_reloadable_server_config(
    certificate_path: &Path,
    key_path: &Path,
) -> Result<(Arc<rustls::ServerConfig>, Arc<ReloadableCertificate>), TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificate = Arc::new(ReloadableCertificate {
        current: RwLock::new(Arc::new(load_certified_key(
            certificate_path,
            key_path,
            &provider,
        )?)),
        certificate_path: certificate_path.to_path_buf(),
        key_path: key_path.to_path_buf(),
        provider: provider.clone(),
    });
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Config(error.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(certificate.clone());
    Ok((Arc::new(config), certificate))
}

/// The certificate chain and key every TLS handshake presents, swappable while serving.
#[derive(Debug)]
pub struct ReloadableCertificate {
    current: RwLock<Arc<CertifiedKey>>,
    certificate_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ReloadableCertificate {
    /// Re-reads the certificate and key files; on any error the one in use stays in use.
    /// Connections already past their handshake keep the session they negotiated.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = load_certified_key(&self.certificate_path, &self.key_path, &self.provider)?;
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(fresh);
        Ok(())
    }

    /// The end-entity certificate now presented (DER), to tell which one is in use.
    pub fn end_entity_der(&self) -> Vec<u8> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .end_entity_cert()
            .map(|certificate| certificate.to_vec())
            .unwrap_or_default()
    }
}

impl ResolvesServerCert for ReloadableCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone(),
        )
    }
}

/// Reads a PEM certificate chain and its private key, checking that they belong together.
fn load_certified_key(
    certificate_path: &Path,
    key_path: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(certificate_path)
            .map_err(|error| TlsError::Certificate {
                path: certificate_path.to_path_buf(),
                message: error.to_string(),
            })?
            .collect::<Result<_, _>>()
            .map_err(|error| TlsError::Certificate {
                path: certificate_path.to_path_buf(),
                message: error.to_string(),
            })?;
    if certificates.is_empty() {
        return Err(TlsError::Certificate {
            path: certificate_path.to_path_buf(),
            message: "no CERTIFICATE block found".to_string(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|error| TlsError::Key {
        path: key_path.to_path_buf(),
        message: error.to_string(),
    })?;
    CertifiedKey::from_der(certificates, key, provider)
        .map_err(|error| TlsError::Config(error.to_string()))
}

/// Paths of a certificate/key pair written by [`ensure_demo_tls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoTlsFiles {
    pub certificate_path: PathBuf,
    pub key_path: PathBuf,
}

/// Makes sure `dir` holds `server.crt` and `server.key` (a self-signed certificate for localhost,
/// 127.0.0.1 and ::1); existing files are kept so clients that pinned the certificate keep working.
pub fn ensure_demo_tls(dir: &Path) -> Result<DemoTlsFiles, TlsError> {
    let files = DemoTlsFiles {
        certificate_path: dir.join("server.crt"),
        key_path: dir.join("server.key"),
    };
    if files.certificate_path.is_file() && files.key_path.is_file() {
        return Ok(files);
    }
    let demo_error = |message: String| TlsError::Demo {
        path: dir.to_path_buf(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(|error| demo_error(error.to_string()))?;
    let certified = rcgen::generate_simple_self_signed(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])
    .map_err(|error| demo_error(error.to_string()))?;
    std::fs::write(&files.certificate_path, certified.cert.pem())
        .map_err(|error| demo_error(error.to_string()))?;
    write_private_file(
        &files.key_path,
        certified.signing_key.serialize_pem().as_bytes(),
    )
    .map_err(|error| demo_error(error.to_string()))?;
    Ok(files)
}

/// Writes a file readable only by its owner (a private key).
fn write_private_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_pair_loads_and_is_kept_on_second_call() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = ensure_demo_tls(dir.path()).expect("generate");
        let first = std::fs::read(&files.certificate_path).expect("read cert");
        load_server_config(&files.certificate_path, &files.key_path).expect("load");
        let again = ensure_demo_tls(dir.path()).expect("second call");
        assert_eq!(std::fs::read(&again.certificate_path).expect("read"), first);
    }

    #[test]
    fn reload_presents_the_renewed_certificate_and_keeps_the_old_one_on_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = ensure_demo_tls(dir.path()).expect("generate");
        let (_, certificate) =
            load_reloadable_server_config(&files.certificate_path, &files.key_path).expect("load");
        let first = certificate.end_entity_der();
        assert!(!first.is_empty());
        // A renewal: a new pair written over the same paths.
        std::fs::remove_file(&files.certificate_path).expect("remove cert");
        std::fs::remove_file(&files.key_path).expect("remove key");
        ensure_demo_tls(dir.path()).expect("regenerate");
        certificate.reload().expect("reload");
        let renewed = certificate.end_entity_der();
        assert_ne!(renewed, first, "the renewed certificate is presented");
        std::fs::write(&files.key_path, "not a key").expect("break the key");
        assert!(certificate.reload().is_err());
        assert_eq!(
            certificate.end_entity_der(),
            renewed,
            "a bad file changes nothing"
        );
    }

    #[test]
    fn missing_key_file_names_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = ensure_demo_tls(dir.path()).expect("generate");
        let missing = dir.path().join("absent.key");
        let error = load_server_config(&files.certificate_path, &missing).unwrap_err();
        assert!(error.to_string().contains("absent.key"), "{error}");
    }
}
