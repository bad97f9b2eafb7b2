//! TLS between agents and the master (protocol v1 over `https://`): the master proves
//! its identity with a certificate, agents check it against the cluster's CA, and —
//! with a client CA configured on the master — agents prove theirs too (mutual TLS).
//! The shared-secret bearer token is checked on top, so a leaked certificate alone
//! does not let anyone in, and the secret never crosses the network in clear.
//!
//! Certificates and keys are PEM files; rustls with the *ring* provider does the work.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
pub use rustls::{ClientConfig, ServerConfig};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file that cannot be read or holds nothing usable.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the combination (key not matching the certificate, ...).
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM file (a chain, or a CA bundle); at least one.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no certificate (PEM) in the file"));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error(path, e))
}

fn roots(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca)? {
        roots
            .add(c)
            .map_err(|e| file_error(ca, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// The master's side: its certificate chain and key, and, for mutual TLS, the CA
/// that agents' certificates must chain to.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                    .build()
                    .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(load_certs(cert)?, load_key(key)?)
        .map_err(|e| TlsError::Config(format!("{} with {}: {e}", cert.display(), key.display())))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// An agent's side: the CA the master's certificate must chain to, and the agent's
/// own certificate and key when the master asks for one.
pub fn client_config(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots(ca)?);
    let mut config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| {
                TlsError::Config(format!("{} with {}: {e}", cert.display(), key.display()))
            })?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Longest a TLS handshake may take on the master.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
