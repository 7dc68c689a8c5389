//! HTTPS (feature `tls`): a CA made in the test (the test kit), a certificate
//! for 127.0.0.1 signed by it; the probe passes with `--cacert` and refuses
//! an untrusted certificate with a clear message (exit 2).

use std::sync::Arc;

use magma_testkit::TempDir;
use magma_testkit::pki::{self, Ca};

use magma_server::{Config, TlsConfig};

use crate::probe_live::RealServer;
use crate::support::{Fault, agent_server_with, probe};

/// A CA and a server certificate for 127.0.0.1 signed by it.
struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn pki(ca_name: &str) -> Pki {
    let ca = Ca::new(ca_name);
    Pki {
        server: pki::server_config(&ca.server_leaf(), None, &[b"http/1.1"]),
        ca_pem: ca.pem,
    }
}

#[test]
fn https_with_cacert_passes() {
    let pki = pki("magma-validator test CA");
    let server = agent_server_with(Fault::None, Some(pki.server));
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
    let server = agent_server_with(Fault::None, Some(trusted.server));
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
    let ca = Ca::new("magma-validator client CA");
    let leaf = ca.client_leaf();
    (
        dir.file("client-ca.pem", &ca.pem),
        dir.file("client.pem", &leaf.cert_pem),
        dir.file("client-key.pem", &leaf.key_pem),
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
