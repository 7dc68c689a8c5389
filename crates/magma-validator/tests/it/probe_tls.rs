//! HTTPS (feature `tls`): a CA made with rcgen in the test, a certificate
//! for 127.0.0.1 signed by it; the probe passes with `--cacert` and refuses
//! an untrusted certificate with a clear message (exit 2).

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use magma_server::{Config, TlsConfig};

use crate::probe_live::RealServer;
use crate::support::{AgentServer, Fault, TempDir, probe};

/// A CA and a server certificate for 127.0.0.1 signed by it.
struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn pki(ca_name: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(leaf.pem().as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap(),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Pki {
        ca_pem,
        server: Arc::new(config),
    }
}

#[test]
fn https_with_cacert_passes() {
    let pki = pki("magma-validator test CA");
    let server = AgentServer::start_with(Fault::None, Some(pki.server));
    let dir = TempDir::new("tls");
    let ca = dir.file("ca.pem", pki.ca_pem.as_bytes());
    let url = server.url();
    assert!(url.starts_with("https://"));
    let (exit, report, stderr) = probe(&url, &["--cacert", &ca]);
    assert_eq!(exit, 0, "{report:#} {stderr}");
    assert_eq!(report["summary"]["failed"], 0);
    assert_eq!(report["target"], url);
}

#[test]
fn https_with_an_untrusted_certificate_is_refused_clearly() {
    let trusted = pki("magma-validator test CA");
    let server = AgentServer::start_with(Fault::None, Some(trusted.server));
    let (exit, report, stderr) = probe(&server.url(), &[]);
    assert_eq!(exit, 2, "{report:#}");
    assert_eq!(report["stopped"]["kind"], "tls", "{report:#}");
    assert!(stderr.contains("not trusted"), "{stderr}");
    assert!(!stderr.contains("ClientBuilder"), "{stderr}");
    assert!(stderr.contains("--cacert"), "{stderr}");
    assert!(stderr.contains("BENCH and GEN"), "{stderr}");

    // Another CA than the one that signed the certificate: refused too.
    let other = pki("another CA");
    let dir = TempDir::new("tls-other");
    let ca = dir.file("other-ca.pem", other.ca_pem.as_bytes());
    let (exit, _, stderr) = probe(&server.url(), &["--cacert", &ca]);
    assert_eq!(exit, 2);
    assert!(stderr.contains("not trusted"), "{stderr}");

    // A CA file that cannot be read is a usage error as well.
    let (exit, _, stderr) = probe(&server.url(), &["--cacert", "/nonexistent/ca.pem"]);
    assert_eq!(exit, 2);
    assert!(stderr.contains("/nonexistent/ca.pem"), "{stderr}");
}

/// A client CA and a client certificate it signed, as PEM files in `dir`:
/// `(client CA, client certificate, client key)`.
fn client_identity(dir: &TempDir) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "magma-validator client CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "magma-validate in CI");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).unwrap();
    (
        dir.file("client-ca.pem", ca_pem.as_bytes()),
        dir.file("client.pem", cert.pem().as_bytes()),
        dir.file("client-key.pem", key.serialize_pem().as_bytes()),
    )
}

#[test]
fn mutual_tls_magma_server_with_and_without_a_client_certificate() {
    let dir = TempDir::new("mtls");
    let (client_ca, cert, key) = client_identity(&dir);
    let server_dir = TempDir::new("mtls-server");
    let (tls, files) = TlsConfig::self_signed(
        server_dir.path(),
        &["127.0.0.1".to_owned()],
        Some(std::path::Path::new(&client_ca)),
    )
    .expect("development certificate");
    assert!(tls.requires_client_certificate());
    let mut config = Config::default();
    config.tls = Some(tls);
    let server = RealServer::start_with(config);
    let url = server.url();
    let ca = files.ca_cert.display().to_string();

    let (exit, report, stderr) = probe(&url, &["--cacert", &ca, "--cert", &cert, "--key", &key]);
    assert_eq!(exit, 0, "{report:#} {stderr}");
    assert_eq!(report["summary"]["failed"], 0, "{report:#}");
    assert_eq!(report["agent"]["agent_id"], "magma-demo-agent");

    let (exit, report, stderr) = probe(&url, &["--cacert", &ca]);
    assert_eq!(exit, 2, "{report:#}");
    assert_eq!(report["stopped"]["kind"], "tls", "{report:#}");
    assert!(stderr.contains("client certificate"), "{stderr}");
    assert!(stderr.contains("--cert FILE --key FILE"), "{stderr}");
    assert!(!stderr.contains("--cacert"), "{stderr}");
    assert!(!stderr.contains("ClientBuilder"), "{stderr}");

    // --cert without --key is a usage error.
    let (exit, _, stderr) = probe(&url, &["--cacert", &ca, "--cert", &cert]);
    assert_eq!(exit, 2);
    assert!(stderr.contains("--key"), "{stderr}");
}
