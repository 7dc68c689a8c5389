//! rustls client configuration (ring provider, passed explicitly) and plain
//! words for TLS failures.

use std::path::PathBuf;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{AlertDescription, CertificateError, RootCertStore};

use crate::error::Error;

/// A PEM document given inline or as a file to read at build time.
#[derive(Debug, Clone)]
pub(crate) enum Pem {
    Bytes(Vec<u8>),
    File(PathBuf),
}

impl Pem {
    fn read(&self, what: &str) -> Result<Vec<u8>, Error> {
        match self {
            Pem::Bytes(b) => Ok(b.clone()),
            Pem::File(p) => std::fs::read(p).map_err(|e| {
                Error::config(format!("cannot read {what} {}: {e}", p.display())).with_source(e)
            }),
        }
    }

    fn name(&self, what: &str) -> String {
        match self {
            Pem::Bytes(_) => format!("{what} (PEM data)"),
            Pem::File(p) => format!("{what} {}", p.display()),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct TlsOptions {
    pub(crate) webpki_roots: bool,
    pub(crate) cas: Vec<Pem>,
    pub(crate) identity: Option<(Pem, Pem)>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            webpki_roots: true,
            cas: Vec::new(),
            identity: None,
        }
    }
}

impl TlsOptions {
    pub(crate) fn build(&self) -> Result<rustls::ClientConfig, Error> {
        let mut roots = RootCertStore::empty();
        if self.webpki_roots {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        for ca in &self.cas {
            let pem = ca.read("CA file")?;
            let mut found = 0usize;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| {
                    Error::config(format!("{}: invalid PEM: {e}", ca.name("CA file")))
                })?;
                roots.add(cert).map_err(|e| {
                    Error::config(format!("{}: unusable certificate: {e}", ca.name("CA file")))
                        .with_source(e)
                })?;
                found += 1;
            }
            if found == 0 {
                return Err(Error::config(format!(
                    "{}: no CERTIFICATE found",
                    ca.name("CA file")
                )));
            }
        }
        if roots.is_empty() {
            return Err(Error::config(
                "no trusted roots: webpki roots are off and no CA file was given",
            ));
        }

        let provider = crate::crypto::provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config(format!("TLS: {e}")).with_source(e))?
            .with_root_certificates(roots);
        let mut config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let cert_pem = cert.read("client certificate")?;
                let key_pem = key.read("client key")?;
                let chain = CertificateDer::pem_slice_iter(&cert_pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| {
                        Error::config(format!(
                            "{}: invalid PEM: {e}",
                            cert.name("client certificate")
                        ))
                    })?;
                if chain.is_empty() {
                    return Err(Error::config(format!(
                        "{}: no CERTIFICATE found",
                        cert.name("client certificate")
                    )));
                }
                let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
                    Error::config(format!(
                        "{}: no usable private key: {e}",
                        key.name("client key")
                    ))
                })?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    Error::config(format!("client certificate and key do not fit: {e}"))
                        .with_source(e)
                })?
            }
        };
        // HTTP/1.1 only: what FastAPI/uvicorn agents and magma-server speak.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Plain words for a rustls failure seen during or right after the
/// handshake.
pub(crate) fn describe(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => "the server's certificate is not trusted: \
                 it is not signed by a known CA (self-signed or private CA?); trust the CA \
                 with ClientBuilder::ca_file (--cacert)"
                .to_owned(),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!("the server's certificate is not valid for this host name: {e}")
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                format!("the server's certificate has expired: {e}")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                format!("the server's certificate is not valid yet: {e}")
            }
            _ => format!("the server's certificate was refused: {e}"),
        },
        rustls::Error::AlertReceived(alert) => match alert {
            AlertDescription::CertificateRequired => "the server requires a client \
                 certificate (mutual TLS); set one with ClientBuilder::client_identity_files"
                .to_owned(),
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateUnknown
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::AccessDenied => {
                format!("the server refused the client certificate (alert {alert:?})")
            }
            AlertDescription::HandshakeFailure => format!(
                "the server ended the handshake (alert {alert:?}): no common protocol or \
                 cipher, or it requires a client certificate"
            ),
            _ => format!("the server sent a fatal alert: {alert:?}"),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            format!("the server did not answer with TLS (plain HTTP on an https URL?): {e}")
        }
        _ => e.to_string(),
    }
}
