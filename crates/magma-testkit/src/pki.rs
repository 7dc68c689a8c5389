//! A test CA made with rcgen, the leaves it signs, and rustls
//! configurations for them (ring provider, as in the crates).

use std::sync::Arc;

pub use rcgen::ExtendedKeyUsagePurpose;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The names a server leaf is valid for.
pub const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// A CA: its PEM certificate and what is needed to sign leaves with it.
pub struct Ca {
    /// The CA certificate, PEM.
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca")
            .field("pem", &self.pem)
            .finish_non_exhaustive()
    }
}

/// A leaf certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

impl Ca {
    /// A self-signed CA with the common name `name`.
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("self-sign the CA");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `names` (subject alternative names) with one extended key
    /// usage, signed by this CA.
    pub fn leaf(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, "magma test leaf");
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).expect("sign the leaf");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A server leaf for [`SERVER_NAMES`].
    pub fn server_leaf(&self) -> Leaf {
        self.leaf(&SERVER_NAMES, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client leaf (for mutual TLS).
    pub fn client_leaf(&self) -> Leaf {
        self.leaf(&["client.test"], ExtendedKeyUsagePurpose::ClientAuth)
    }
}

impl Leaf {
    /// The certificate chain for rustls (the leaf alone).
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        vec![CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).expect("leaf PEM")]
    }

    /// The private key for rustls.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).expect("key PEM")
    }
}

/// The ring crypto provider, as the crates use it.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    crypto::provider()
}

/// The crates' provider, from `magma-client`'s own file (testkit is never published).
#[path = "../../magma-client/src/crypto.rs"]
mod crypto;

/// Every certificate of a PEM text, as a root store.
pub fn roots(pem: &[u8]) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.expect("CA PEM")).expect("add a root");
    }
    roots
}

/// A server configuration for `leaf` offering `alpn`; with `client_ca`,
/// client certificates signed by it are required.
pub fn server_config(
    leaf: &Leaf,
    client_ca: Option<&Ca>,
    alpn: &[&[u8]],
) -> Arc<rustls::ServerConfig> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots(ca.pem.as_bytes()).into(),
                provider(),
            )
            .build()
            .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(leaf.chain(), leaf.key())
        .expect("server certificate");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A client configuration trusting the certificates of `ca_pem`, offering
/// `alpn`, presenting `client` when given.
pub fn client_config(
    ca_pem: &[u8],
    alpn: &[&[u8]],
    client: Option<&Leaf>,
) -> Arc<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots(ca_pem));
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(leaf) => builder
            .with_client_auth_cert(leaf.chain(), leaf.key())
            .expect("client certificate"),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}
