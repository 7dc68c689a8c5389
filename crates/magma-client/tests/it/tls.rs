//! HTTPS (feature `tls`): a CA made in the test (the test kit), a server
//! certificate for 127.0.0.1 signed by it, and client certificates for
//! mutual TLS.

use std::sync::Arc;

use magma_client::{Client, ErrorKind};
use magma_testkit::TempDir;
use magma_testkit::pki::{self, Ca, ExtendedKeyUsagePurpose, Leaf};

use crate::support::{Options, StubServer, echo_agent, request, says};

/// A server config for `leaf` (HTTP/1.1); with `client_ca`, client
/// certificates signed by it are required.
fn server_config(leaf: &Leaf, client_ca: Option<&Ca>) -> Arc<rustls::ServerConfig> {
    pki::server_config(leaf, client_ca, &[b"http/1.1"])
}

fn https_server(leaf: &Leaf, client_ca: Option<&Ca>) -> StubServer {
    let options = Options {
        tls: Some(server_config(leaf, client_ca)),
        ..Options::default()
    };
    StubServer::start_with(options, echo_agent())
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
    let server = StubServer::start(echo_agent());
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
    let server = StubServer::start_with(options, echo_agent());
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
    let missing = dir.path().join("missing.pem");
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
