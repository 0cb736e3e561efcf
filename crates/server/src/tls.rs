//! TLS material: loading the configured PEM certificate chain and key into a rustls server
//! config (ring provider), and generating a self-signed pair for demos and tests.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsError::Config(error.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .map_err(|error| TlsError::Config(error.to_string()))?;
    Ok(Arc::new(config))
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
    fn missing_key_file_names_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = ensure_demo_tls(dir.path()).expect("generate");
        let missing = dir.path().join("absent.key");
        let error = load_server_config(&files.certificate_path, &missing).unwrap_err();
        assert!(error.to_string().contains("absent.key"), "{error}");
    }
}
