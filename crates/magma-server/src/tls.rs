//! HTTPS with rustls and the `ring` provider: PEM files, mutual TLS, and a
//! self-signed development certificate.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A TLS server configuration: certificate chain, private key, optional
/// client CA, ALPN `h2` and `http/1.1`.
///
/// Built with rustls and the `ring` provider, passed explicitly: it never
/// installs or depends on a process-wide default provider.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    config: Arc<rustls::ServerConfig>,
    client_auth: bool,
}

/// The files of a development certificate made by
/// [`TlsConfig::self_signed`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SelfSignedFiles {
    /// The CA certificate to hand to clients (`--cacert`,
    /// `REQUESTS_CA_BUNDLE`, `curl --cacert`).
    pub ca_cert: PathBuf,
    /// The server's certificate, signed by that CA.
    pub cert: PathBuf,
    /// The server's private key (mode 0600 on Unix).
    pub key: PathBuf,
    /// `true` if the files were made now, `false` if existing ones were
    /// reused.
    pub generated: bool,
}

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The reason.
        #[source]
        source: io::Error,
    },
    /// A file is not the PEM expected.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// rustls refused the certificates or key (for example a key that does
    /// not match the certificate).
    #[error("invalid TLS configuration: {0}")]
    Config(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Generating the development certificate failed.
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(#[source] Box<dyn std::error::Error + Send + Sync>),
}

fn provider() -> Arc<CryptoProvider> {
    crate::crypto::provider()
}

/// A rustls refusal of a certificate and key, in words that say what the
/// user did (rustls' own reads `keys may not be consistent: KeyMismatch`).
fn plain_words(e: rustls::Error) -> Box<dyn std::error::Error + Send + Sync> {
    match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the private key does not belong to the certificate (its public key is not the \
             one in the first certificate of the chain); give the key the certificate was \
             made for"
                .into()
        }
        rustls::Error::InconsistentKeys(_) => {
            "cannot check that the private key belongs to the certificate (the key gives no \
             public key)"
                .into()
        }
        other => other.into(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })
}

pub(crate) fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: path.to_owned(),
            what: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_owned(),
            what: "no CERTIFICATE block found".into(),
        });
    }
    Ok(certs)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::Pem {
        path: path.to_owned(),
        what: format!("no usable private key ({e})"),
    })
}

impl TlsConfig {
    /// Serves the certificate chain in `cert` (PEM, leaf first) with the
    /// private key in `key` (PEM: PKCS#8, PKCS#1 or SEC1). With `client_ca`,
    /// every client must present a certificate signed by one of the CA
    /// certificates in that PEM file (mutual TLS); others are refused during
    /// the handshake.
    pub fn from_pem_files(
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
        client_ca: Option<&Path>,
    ) -> Result<TlsConfig, TlsError> {
        let chain = certs(cert.as_ref())?;
        let key = self::key(key.as_ref())?;
        let roots = match client_ca {
            None => None,
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for ca in certs(path)? {
                    roots.add(ca).map_err(|e| TlsError::Pem {
                        path: path.to_owned(),
                        what: format!("not a usable CA certificate ({e})"),
                    })?;
                }
                Some(roots)
            }
        };
        TlsConfig::build(chain, key, roots)
    }

    fn build(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        client_roots: Option<RootCertStore>,
    ) -> Result<TlsConfig, TlsError> {
        let provider = provider();
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.into()))?;
        let client_auth = client_roots.is_some();
        let builder = match client_roots {
            None => builder.with_no_client_auth(),
            Some(roots) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| TlsError::Config(e.into()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Config(plain_words(e)))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsConfig {
            config: Arc::new(config),
            client_auth,
        })
    }

    /// Uses a rustls configuration as it is (add ALPN `h2` and `http/1.1`
    /// yourself to offer HTTP/2).
    pub fn from_rustls(config: Arc<rustls::ServerConfig>) -> TlsConfig {
        TlsConfig {
            config,
            client_auth: false,
        }
    }

    /// `true` if clients must present a certificate (set by
    /// [`from_pem_files`](TlsConfig::from_pem_files) with a client CA).
    pub fn requires_client_certificate(&self) -> bool {
        self.client_auth
    }

    pub(crate) fn rustls_config(&self) -> Arc<rustls::ServerConfig> {
        Arc::clone(&self.config)
    }

    /// Development mode: makes sure `dir` holds a CA certificate
    /// (`ca.pem`), a server certificate it signed (`cert.pem`) valid for
    /// `names` (DNS names or IP addresses, e.g. `localhost`, `127.0.0.1`),
    /// and its key (`key.pem`), generating them if any is missing, and
    /// serves with them. Hand `ca.pem` to clients.
    ///
    /// Existing files are reused so that clients keep trusting the CA across
    /// restarts; delete the directory to start over (for example to add
    /// names). Not for production: the CA's key is not kept, and anyone who
    /// can read `key.pem` can impersonate the server.
    pub fn self_signed(
        dir: impl AsRef<Path>,
        names: &[String],
        client_ca: Option<&Path>,
    ) -> Result<(TlsConfig, SelfSignedFiles), TlsError> {
        let dir = dir.as_ref();
        let mut files = SelfSignedFiles {
            ca_cert: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            generated: false,
        };
        if !(files.ca_cert.is_file() && files.cert.is_file() && files.key.is_file()) {
            generate(dir, names, &files)?;
            files.generated = true;
        }
        let config = TlsConfig::from_pem_files(&files.cert, &files.key, client_ca)?;
        Ok((config, files))
    }
}

fn generate(dir: &Path, names: &[String], files: &SelfSignedFiles) -> Result<(), TlsError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let gen_err = |e: rcgen::Error| TlsError::Generate(Box::new(e));

    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "magma-server development CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(gen_err)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(gen_err)?;

    let mut leaf = CertificateParams::new(names.to_vec()).map_err(gen_err)?;
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name
        .push(DnType::CommonName, "magma-server");
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    let leaf_key = KeyPair::generate().map_err(gen_err)?;
    let issuer = Issuer::new(ca, ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(gen_err)?;

    fs::create_dir_all(dir).map_err(|source| TlsError::Io {
        path: dir.to_owned(),
        source,
    })?;
    write(&files.key, leaf_key.serialize_pem().as_bytes(), true)?;
    write(&files.cert, leaf_cert.pem().as_bytes(), false)?;
    write(&files.ca_cert, ca_cert.pem().as_bytes(), false)?;
    Ok(())
}

fn write(path: &Path, contents: &[u8], private: bool) -> Result<(), TlsError> {
    use std::io::Write;
    let err = |source| TlsError::Io {
        path: path.to_owned(),
        source,
    };
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options.open(path).map_err(err)?;
    file.write_all(contents).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "magma-server-tls-unit-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn self_signed_generates_once_then_reuses() {
        let dir = temp_dir("reuse");
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let (_, first) = TlsConfig::self_signed(&dir, &names, None).unwrap();
        assert!(first.generated);
        let ca = fs::read(&first.ca_cert).unwrap();
        let (_, second) = TlsConfig::self_signed(&dir, &names, None).unwrap();
        assert!(!second.generated);
        assert_eq!(fs::read(&second.ca_cert).unwrap(), ca);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&first.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "key readable by others: {mode:o}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_and_empty_files_name_the_file() {
        let dir = temp_dir("errors");
        fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("nope.pem");
        let e = TlsConfig::from_pem_files(&missing, &missing, None).unwrap_err();
        assert!(matches!(e, TlsError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("nope.pem"), "{e}");
        let empty = dir.join("empty.pem");
        fs::write(&empty, "").unwrap();
        let e = TlsConfig::from_pem_files(&empty, &empty, None).unwrap_err();
        assert!(matches!(e, TlsError::Pem { .. }), "{e:?}");
        assert!(e.to_string().contains("empty.pem"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_key_that_does_not_match_the_certificate_is_refused() {
        let dir = temp_dir("mismatch");
        let (_, a) = TlsConfig::self_signed(dir.join("a"), &["localhost".into()], None).unwrap();
        let (_, b) = TlsConfig::self_signed(dir.join("b"), &["localhost".into()], None).unwrap();
        let e = TlsConfig::from_pem_files(&a.cert, &b.key, None).unwrap_err();
        assert!(matches!(e, TlsError::Config(_)), "{e:?}");
        assert!(
            e.to_string()
                .contains("the private key does not belong to the certificate"),
            "{e}"
        );
        assert!(!e.to_string().contains("KeyMismatch"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
