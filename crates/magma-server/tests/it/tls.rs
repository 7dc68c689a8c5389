//! HTTPS over real TLS on loopback: self-signed development mode, ALPN for
//! HTTP/2 and HTTP/1.1, mutual TLS, handshake timeout, and the binary's TLS
//! flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use magma_server::demo::DemoAgent;
use magma_server::{Config, TlsConfig};
use magma_testkit::TempDir;
use magma_testkit::pki::{Ca, SERVER_NAMES, client_config};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::support::{
    Reply, TestServer, build, check_response, expect_closed, read, user_request, within,
};

fn names() -> Vec<String> {
    SERVER_NAMES.map(str::to_owned).to_vec()
}

/// Connects with TLS; `Err` if the handshake fails.
async fn connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    TlsConnector::from(config).connect(name, tcp).await
}

/// One request over a TLS connection speaking what ALPN chose; `Err` if the
/// connection or the exchange fails.
async fn https(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    method: Method,
    path: &str,
    body: &str,
) -> Result<Reply, String> {
    within("an HTTPS exchange", async {
        let tls = connect(addr, config)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let headers = [("content-type", "application/json")];
        let req = build(
            method,
            &format!("https://localhost{path}"),
            &headers,
            Bytes::from(body.to_owned()),
        );
        let resp = if h2 {
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| format!("h2: {e}"))?;
            tokio::spawn(conn);
            sender.send_request(req).await
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| format!("h1: {e}"))?;
            tokio::spawn(conn);
            sender.send_request(req).await
        };
        Ok(read(resp.map_err(|e| format!("exchange: {e}"))?).await)
    })
    .await
}

async fn tls_server(tls: TlsConfig, f: impl FnOnce(&mut Config)) -> TestServer {
    let mut config = Config::default();
    config.tls = Some(tls);
    f(&mut config);
    TestServer::with_config(DemoAgent::new(), config).await
}

#[tokio::test]
async fn self_signed_https_with_alpn_h2_and_http1() {
    let dir = TempDir::new("self-signed");
    let (tls, files) = TlsConfig::self_signed(dir.path(), &names(), None).unwrap();
    assert!(files.generated && files.ca_cert.is_file());
    let server = tls_server(tls, |_| {}).await;
    let ca = std::fs::read(&files.ca_cert).unwrap();
    let request = user_request("tls", "secure", 2);
    for (alpn, version) in [
        (&b"h2"[..], Version::HTTP_2),
        (&b"http/1.1"[..], Version::HTTP_11),
    ] {
        let config = client_config(&ca, &[alpn], None);
        let health = https(server.addr, config.clone(), Method::GET, "/health", "")
            .await
            .unwrap();
        assert_eq!(health.version, version);
        health.expect(200);
        let reply = https(server.addr, config, Method::POST, "/v1/responses", &request)
            .await
            .unwrap();
        assert_eq!(reply.version, version);
        check_response(&request, &reply);
    }
    // A client that does not trust the CA is refused.
    let stranger = Ca::new("someone else");
    let config = client_config(stranger.pem.as_bytes(), &[b"http/1.1"], None);
    let refused = https(server.addr, config, Method::GET, "/health", "").await;
    assert!(refused.is_err(), "{refused:?}");
    // Plain HTTP to the TLS port gets no HTTP answer.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = within(
        "plain HTTP on TLS",
        tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut buf),
    )
    .await;
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
}

fn write_client_ca(dir: &TempDir, ca: &Ca) -> PathBuf {
    dir.write("client-ca.pem", &ca.pem)
}

#[tokio::test]
async fn mutual_tls_serves_trusted_clients_only() {
    let dir = TempDir::new("mtls");
    let (_, files) = TlsConfig::self_signed(dir.path(), &names(), None).unwrap();
    let client_ca = Ca::new("trusted clients");
    let ca_path = write_client_ca(&dir, &client_ca);
    let tls = TlsConfig::from_pem_files(&files.cert, &files.key, Some(&ca_path)).unwrap();
    assert!(tls.requires_client_certificate());
    let server = tls_server(tls, |_| {}).await;
    let server_ca = std::fs::read(&files.ca_cert).unwrap();

    for alpn in [&b"h2"[..], b"http/1.1"] {
        let anonymous = client_config(&server_ca, &[alpn], None);
        let r = https(server.addr, anonymous, Method::GET, "/health", "").await;
        assert!(r.is_err(), "served a client without a certificate: {r:?}");

        let untrusted = client_config(&server_ca, &[alpn], Some(&Ca::new("other").client_leaf()));
        let r = https(server.addr, untrusted, Method::GET, "/health", "").await;
        assert!(r.is_err(), "served an untrusted client: {r:?}");

        let trusted = client_config(&server_ca, &[alpn], Some(&client_ca.client_leaf()));
        let request = user_request("mtls", "hi", 1);
        let reply = https(
            server.addr,
            trusted,
            Method::POST,
            "/v1/responses",
            &request,
        )
        .await;
        check_response(&request, &reply.unwrap());
    }
}

#[tokio::test]
async fn a_client_that_stalls_the_handshake_is_dropped_and_others_are_served() {
    let dir = TempDir::new("handshake");
    let (tls, files) = TlsConfig::self_signed(dir.path(), &names(), None).unwrap();
    let server = tls_server(tls, |c| {
        c.tls_handshake_timeout = Duration::from_millis(300)
    })
    .await;
    // Several silent clients at once: the handshake runs in each
    // connection's task, so none blocks the accept loop.
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(TcpStream::connect(server.addr).await.unwrap());
    }
    let ca = std::fs::read(&files.ca_cert).unwrap();
    let config = client_config(&ca, &[b"http/1.1"], None);
    https(server.addr, config, Method::GET, "/health", "")
        .await
        .unwrap()
        .expect(200);
    for mut s in silent {
        expect_closed(&mut s).await;
    }
}

#[cfg(feature = "cli")]
#[tokio::test]
async fn the_binary_serves_https_from_flags() {
    use crate::binary::Binary;
    let dir = TempDir::new("binary");
    let dev = dir.path().join("dev-tls");
    let bin = Binary::start(&["--tls-self-signed", dev.to_str().unwrap()], None).await;
    assert!(bin.log().contains("listening on https://"));
    assert!(
        bin.log().contains("ca.pem"),
        "the log tells where the CA is"
    );
    let ca = std::fs::read(dev.join("ca.pem")).unwrap();
    let config = client_config(&ca, &[b"h2", b"http/1.1"], None);
    let reply = https(bin.addr, config, Method::GET, "/v1/info", "")
        .await
        .unwrap();
    assert_eq!(reply.version, Version::HTTP_2);
    reply.expect(200);
    drop(bin);

    // --tls-cert/--tls-key/--tls-client-ca: mutual TLS from the command line.
    let client_ca = Ca::new("cli clients");
    let ca_path = write_client_ca(&dir, &client_ca);
    let args = [
        "--tls-cert".to_owned(),
        dev.join("cert.pem").display().to_string(),
        "--tls-key".to_owned(),
        dev.join("key.pem").display().to_string(),
        "--tls-client-ca".to_owned(),
        ca_path.display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bin = Binary::start(&args, None).await;
    let anonymous = client_config(&ca, &[b"http/1.1"], None);
    assert!(
        https(bin.addr, anonymous, Method::GET, "/health", "")
            .await
            .is_err()
    );
    let trusted = client_config(&ca, &[b"http/1.1"], Some(&client_ca.client_leaf()));
    https(bin.addr, trusted, Method::GET, "/health", "")
        .await
        .unwrap()
        .expect(200);
    drop(bin);
}

/// The provider is built from ring's parts (`src/crypto.rs`, not rustls's
/// deprecated `ring::default_provider`): X25519 is chosen when offered, and
/// P-384, the last group on its list, still completes a handshake.
#[tokio::test]
async fn the_server_prefers_x25519_and_accepts_p384() {
    let dir = TempDir::new("kx-groups");
    let (tls, files) = TlsConfig::self_signed(dir.path(), &names(), None).unwrap();
    let server = tls_server(tls, |_| {}).await;
    let ca = std::fs::read(&files.ca_cert).unwrap();
    let stream = connect(server.addr, client_config(&ca, &[b"http/1.1"], None))
        .await
        .unwrap();
    let group = stream.get_ref().1.negotiated_key_exchange_group().unwrap();
    assert_eq!(group.name(), rustls::NamedGroup::X25519);

    let mut provider = (*magma_testkit::pki::provider()).clone();
    provider.kx_groups = vec![rustls::crypto::ring::kx_group::SECP384R1];
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(
            rustls::pki_types::pem::PemObject::from_pem_slice(&ca)
                .expect("the CA certificate parses"),
        )
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let stream = connect(server.addr, Arc::new(config)).await.unwrap();
    let group = stream.get_ref().1.negotiated_key_exchange_group().unwrap();
    assert_eq!(group.name(), rustls::NamedGroup::secp384r1);
}

/// `magma-server` and `magma-client` build their provider from one file,
/// kept identical in both crates (each publishes alone).
#[test]
fn the_server_and_client_providers_are_the_same_file() {
    let server = include_str!("../../src/crypto.rs");
    let client = include_str!("../../../magma-client/src/crypto.rs");
    assert!(
        server == client,
        "crates/magma-server/src/crypto.rs and crates/magma-client/src/crypto.rs differ: copy one onto the other"
    );
}
