//! HTTPS (feature `tls`): a CA made with rcgen in the test, a server
//! certificate for 127.0.0.1 signed by it, and client certificates for
//! mutual TLS.

use std::sync::Arc;

use magma_client::{Client, ErrorKind};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::support::{Options, TestServer, echo_agent, request, says};

/// A CA: its PEM certificate and what is needed to sign leaves with it.
pub(crate) struct Ca {
    pub(crate) pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A leaf certificate and its key, in PEM.
pub(crate) struct Leaf {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    pub(crate) fn leaf(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "magma test leaf");
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    pub(crate) fn server_leaf(&self) -> Leaf {
        self.leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    pub(crate) fn client_leaf(&self) -> Leaf {
        self.leaf(&["magma-bench"], ExtendedKeyUsagePurpose::ClientAuth)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server config for `leaf`; with `client_ca`, client certificates signed
/// by it are required.
fn server_config(leaf: &Leaf, client_ca: Option<&Ca>) -> Arc<rustls::ServerConfig> {
    let chain = vec![CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
                .unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots.into(),
                provider(),
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

fn https_server(leaf: &Leaf, client_ca: Option<&Ca>) -> TestServer {
    let options = Options {
        tls: Some(server_config(leaf, client_ca)),
        ..Options::default()
    };
    TestServer::start_with(options, echo_agent())
}

/// A fresh temporary directory for PEM files, removed on drop.
pub(crate) struct TempDir(std::path::PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "magma-client-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn https_with_a_trusted_ca_file_works_and_reuses_the_connection() {
    let ca = Ca::new("magma test CA");
    let server = https_server(&ca.server_leaf(), None);
    assert!(server.url().starts_with("https://127.0.0.1:"));
    let dir = TempDir::new("ca");
    let ca_file = dir.write("ca.pem", &ca.pem);

    let client = Client::builder(server.url())
        .ca_file(&ca_file)
        .build()
        .unwrap();
    client
        .wait_ready(std::time::Duration::from_secs(10))
        .unwrap();
    client.check_compatible().unwrap();
    for i in 0..5 {
        let response = client.respond(&request(&format!("tls-{i}"), 2, 2)).unwrap();
        assert_eq!(says(&response).len(), 4);
    }
    assert_eq!(server.accepted(), 1, "one TLS connection for all calls");

    // By host name too (the certificate names localhost), with only the CA
    // trusted.
    let by_name = format!(
        "https://localhost:{}",
        server.url().rsplit(':').next().unwrap()
    );
    let client = Client::builder(by_name)
        .webpki_roots(false)
        .ca_pem(ca.pem)
        .build()
        .unwrap();
    client.health().unwrap();
}

#[test]
fn an_untrusted_certificate_is_refused_with_a_clear_message() {
    let ca = Ca::new("magma test CA");
    let server = https_server(&ca.server_leaf(), None);

    // webpki roots only: the test CA is unknown.
    let client = Client::new(server.url()).unwrap();
    let err = client.health().unwrap_err();
    let ErrorKind::Tls(why) = err.kind() else {
        panic!("{err:?}")
    };
    assert!(why.contains("not trusted"), "{why}");
    assert!(why.contains("ca_file"), "{why}");
    assert!(
        err.to_string()
            .starts_with(&format!("GET {}/health: TLS failure", server.url()))
    );
    assert_eq!(server.requests().len(), 0);

    // Another CA is no better.
    let other = Ca::new("someone else");
    let client = Client::builder(server.url())
        .ca_pem(other.pem)
        .build()
        .unwrap();
    let err = client.respond(&request("r", 1, 1)).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Tls(w) if w.contains("not trusted")),
        "{err:?}"
    );
}

#[test]
fn a_certificate_for_another_name_is_refused() {
    let ca = Ca::new("magma test CA");
    let leaf = ca.leaf(&["agent.example"], ExtendedKeyUsagePurpose::ServerAuth);
    let server = https_server(&leaf, None);
    let client = Client::builder(server.url())
        .ca_pem(ca.pem)
        .build()
        .unwrap();
    let err = client.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Tls(w) if w.contains("not valid for this host")),
        "{err:?}"
    );
}

#[test]
fn https_to_a_plain_http_server_is_a_tls_error() {
    let server = TestServer::start(echo_agent());
    let url = server.url().replace("http://", "https://");
    let err = Client::new(url).unwrap().health().unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Tls(_)), "{err:?}");
}

#[test]
fn mutual_tls_with_and_without_a_client_certificate() {
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let server = https_server(&server_ca.server_leaf(), Some(&client_ca));

    let me = client_ca.client_leaf();
    let dir = TempDir::new("mtls");
    let (cert, key) = (
        dir.write("client.pem", &me.cert_pem),
        dir.write("client.key", &me.key_pem),
    );
    let client = Client::builder(server.url())
        .ca_pem(server_ca.pem.clone())
        .client_identity_files(&cert, &key)
        .build()
        .unwrap();
    client.health().unwrap();
    assert_eq!(
        says(&client.respond(&request("mtls", 1, 2)).unwrap()).len(),
        2
    );

    // No client certificate: the server refuses, and the error says so.
    let anonymous = Client::builder(server.url())
        .ca_pem(server_ca.pem.clone())
        .build()
        .unwrap();
    let err = anonymous.health().unwrap_err();
    let ErrorKind::Tls(why) = err.kind() else {
        panic!("{err:?}")
    };
    assert!(why.contains("client certificate"), "{why}");

    // A client certificate from a CA the server does not trust.
    let stranger = Ca::new("stranger CA").client_leaf();
    let wrong = Client::builder(server.url())
        .ca_pem(server_ca.pem)
        .client_identity_pem(stranger.cert_pem, stranger.key_pem)
        .build()
        .unwrap();
    let err = wrong.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Tls(w) if w.contains("client certificate")),
        "{err:?}"
    );
}

#[test]
fn a_tls_server_that_hangs_up_without_close_notify_points_at_client_certificates() {
    // What uvicorn (Python ssl, TLS 1.3) does to a client without the
    // certificate it requires: handshake done, then the socket is closed.
    let ca = Ca::new("magma test CA");
    let options = Options {
        tls: Some(server_config(&ca.server_leaf(), None)),
        hang_up: true,
        ..Options::default()
    };
    let server = TestServer::start_with(options, echo_agent());
    let client = Client::builder(server.url())
        .ca_pem(ca.pem)
        .build()
        .unwrap();
    let err = client.health().unwrap_err();
    let ErrorKind::Tls(why) = err.kind() else {
        panic!("{err:?}")
    };
    assert!(why.contains("client certificate"), "{why}");
    assert!(why.contains("without close_notify"), "{why}");
}

#[test]
fn unusable_tls_files_are_refused_at_build() {
    let dir = TempDir::new("bad");
    let missing = dir.0.join("missing.pem");
    let err = Client::builder("https://127.0.0.1:1")
        .ca_file(&missing)
        .build()
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("missing.pem")),
        "{err}"
    );

    let empty = dir.write("empty.pem", "not a certificate\n");
    let err = Client::builder("https://127.0.0.1:1")
        .ca_file(&empty)
        .build()
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("no CERTIFICATE")),
        "{err}"
    );

    let ca = Ca::new("magma test CA");
    let leaf = ca.client_leaf();
    let err = Client::builder("https://127.0.0.1:1")
        .client_identity_pem(leaf.cert_pem, "no key here")
        .build()
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("private key")),
        "{err}"
    );

    let err = Client::builder("https://127.0.0.1:1")
        .webpki_roots(false)
        .build()
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Config(m) if m.contains("no trusted roots")),
        "{err}"
    );
}
