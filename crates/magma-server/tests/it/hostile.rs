//! Hostile clients on loopback that `limits.rs` and `tls.rs` do not already
//! cover: hundreds of garbage connections against the real binary (health and
//! resident memory afterwards), the connection cap under a flood, and over
//! TLS, plaintext, broken handshakes and untrusted client certificates
//! arriving while a trusted client is being served.
#![allow(clippy::print_stderr)] // the tests report what they measured

#[cfg(feature = "cli")]
use std::time::Duration;

#[cfg(any(feature = "cli", feature = "tls"))]
use magma_testkit::Rng;

/// The first bytes of a TLS 1.2/1.3 ClientHello record (record header,
/// handshake header, legacy version, part of the random): what a client
/// configured for `https://` sends to a clear-text port.
#[cfg(any(feature = "cli", feature = "tls"))]
const CLIENT_HELLO_START: &[u8] = &[
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x5a, 0x1b, 0x9c, 0x44, 0x10,
    0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
];

#[cfg(feature = "cli")]
pub(crate) mod binary_process {
    //! The release-shaped binary, started here (not through `binary::Binary`)
    //! because these tests read its `/proc/<pid>` entries.

    use std::net::SocketAddr;
    use std::process::Command;
    use std::time::Duration;

    use magma_testkit::process::{self, LoggedChild, listening_addr};

    use crate::binary::BIN;

    /// The binary, its address and its log.
    pub(crate) struct Proc {
        child: LoggedChild,
        pub(crate) addr: SocketAddr,
    }

    impl Proc {
        /// Starts the binary on 127.0.0.1 port 0, logging at `info` without
        /// the access log.
        pub(crate) fn start(args: &[&str]) -> Proc {
            Proc::start_with_log(args, "info,magma_server::access=off")
        }

        /// Starts the binary with `RUST_LOG=rust_log`, collecting its log.
        pub(crate) fn start_with_log(args: &[&str], rust_log: &str) -> Proc {
            // `MAGMA_SERVER_BIN` measures another build (the release
            // binary, for the figures of docs/security.md).
            let bin = std::env::var_os("MAGMA_SERVER_BIN").unwrap_or_else(|| BIN.into());
            let mut child = LoggedChild::spawn(
                "magma-server",
                Command::new(bin)
                    .args(["--listen", "127.0.0.1:0"])
                    .args(args)
                    .env("RUST_LOG", rust_log),
            );
            let line = child.wait_for_log("listening on ", Duration::from_secs(30));
            let addr = listening_addr(&line);
            Proc { child, addr }
        }

        /// Everything logged so far.
        pub(crate) fn log(&self) -> String {
            self.child.log()
        }

        /// Resident memory now, in KiB.
        pub(crate) fn rss_kib(&self) -> u64 {
            process::rss_kib(self.child.id()).expect("VmRSS in /proc/<pid>/status")
        }

        /// Peak resident memory since start, in KiB.
        pub(crate) fn peak_rss_kib(&self) -> u64 {
            process::peak_rss_kib(self.child.id()).expect("VmHWM in /proc/<pid>/status")
        }

        /// Open sockets (the listener included).
        pub(crate) fn sockets(&self) -> usize {
            process::sockets(self.child.id())
        }

        pub(crate) fn is_running(&mut self) -> bool {
            self.child.guard().is_running()
        }
    }
}

/// The garbage thrown by the 300 connections, one kind per connection in turn.
#[cfg(feature = "cli")]
fn garbage(i: usize, rng: &mut Rng) -> (&'static str, Vec<u8>) {
    match i % 6 {
        0 => ("tls-client-hello", CLIENT_HELLO_START.to_vec()),
        1 => {
            let mut line = b"GET /".to_vec();
            line.extend(std::iter::repeat_n(b'a', 20_000));
            line.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            ("20kB-request-line", line)
        }
        2 => {
            let mut bytes = rng.bytes(4096);
            bytes[0] = 0xff; // never a method by chance
            ("random-bytes", bytes)
        }
        3 => {
            // A request line that never ends: 20 kB with no line break.
            let mut line = b"POST /v1/responses?".to_vec();
            line.extend(std::iter::repeat_n(b'x', 20_000));
            ("20kB-unfinished-line", line)
        }
        4 => {
            // An HTTP/2 preface followed by random frames.
            let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            bytes.extend(rng.bytes(2048));
            ("h2-preface-then-garbage", bytes)
        }
        _ => {
            // 20 kB of header lines, then a body that lies about its length.
            let mut head = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n".to_vec();
            for n in 0..200 {
                head.extend_from_slice(format!("X-Junk-{n}: {}\r\n", "j".repeat(90)).as_bytes());
            }
            head.extend_from_slice(b"Content-Length: 5\r\n\r\n{\"request_id\": 1}");
            ("20kB-headers-bad-body", head)
        }
    }
}

/// Acceptance: 300 connections of garbage (TLS bytes on the clear port,
/// 20 kB request lines, random bytes, ...), all at once, leave the binary
/// healthy, serving valid requests, and under 64 MiB resident at its peak.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_300_connections_leaves_the_binary_healthy_and_under_64_mib() {
    use self::binary_process::Proc;
    use crate::support::{check_response, raw_exchange, send, user_request};

    let mut server = Proc::start(&["--header-timeout-secs", "2"]);
    let addr = server.addr;
    let before = server.rss_kib();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let tasks: Vec<_> = (0..300)
        .map(|i| {
            let (kind, payload) = garbage(i, &mut rng);
            tokio::spawn(async move { (kind, magma_testkit::http1::throw(addr, &payload).await) })
        })
        .collect();
    let mut answered = std::collections::BTreeMap::<String, usize>::new();
    for task in tasks {
        let (kind, got) = task.await.expect("garbage task");
        let text = String::from_utf8_lossy(&got);
        if let Some(status) = text.strip_prefix("HTTP/1.1 ").and_then(|s| s.get(..3)) {
            assert!(
                status.starts_with('4'),
                "{kind}: garbage answered with {status}: {text:.300}"
            );
            *answered.entry(format!("{kind} {status}")).or_default() += 1;
        } else {
            *answered.entry(format!("{kind} closed")).or_default() += 1;
        }
    }
    assert!(server.is_running(), "the server died under garbage");
    let (_, reply) = raw_exchange(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let request = user_request("after-garbage", "still there?", 2);
    let reply = send(
        addr,
        http::Method::POST,
        "/v1/responses",
        &[("content-type", "application/json")],
        bytes::Bytes::from(request.clone()),
    )
    .await;
    check_response(&request, &reply);
    let (after, peak) = (server.rss_kib(), server.peak_rss_kib());
    eprintln!(
        "garbage: 300 connections {answered:?}; RSS before {before} KiB, after {after} KiB, \
         peak {peak} KiB"
    );
    assert!(
        peak < 64 * 1024,
        "peak resident memory {peak} KiB >= 64 MiB"
    );
}

/// Acceptance: the connection cap holds under a flood. 100 clients connect
/// at once and stall in their request head; the server never holds more
/// than `--max-connections` of them (counted from its open sockets), cuts
/// each at the header timeout, lets the queued ones in as others close, and
/// is healthy afterwards.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_holds_against_a_flood_of_stalled_clients() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use self::binary_process::Proc;
    use crate::support::raw_exchange;

    const CAP: usize = 16;
    let mut server = Proc::start(&["--max-connections", "16", "--header-timeout-secs", "1"]);
    let addr = server.addr;
    let idle = server.sockets();
    let mut flood = Vec::new();
    for _ in 0..100 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /health HTTP/1.1\r\nHo")
            .await
            .expect("write");
        flood.push(s);
    }
    // Sample the server's sockets while the flood drains through the cap:
    // 100 clients, 16 at a time, 1 s each, so about 7 s.
    let mut most = 0;
    let started = std::time::Instant::now();
    let drained = loop {
        let open = server.sockets().saturating_sub(idle);
        most = most.max(open);
        if started.elapsed() > Duration::from_secs(3) && open == 0 {
            break true;
        }
        if started.elapsed() > Duration::from_secs(25) {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "flood: at most {most} connections held at once (cap {CAP}), drained in {:?}",
        started.elapsed()
    );
    assert!(most <= CAP, "held {most} connections with a cap of {CAP}");
    assert!(
        most >= CAP / 2,
        "the flood never reached the server ({most})"
    );
    assert!(drained, "stalled connections were not all cut");
    // Every flooder was cut without an answer.
    for mut s in flood {
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        assert!(
            !String::from_utf8_lossy(&buf).contains(" 200 "),
            "a stalled head was answered"
        );
    }
    assert!(server.is_running());
    let (_, reply) = raw_exchange(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(reply.status, 200);
}

/// Acceptance 4, through the binary: an agent that hangs (the demo agent's
/// `delay_ms`, far past `--inference-timeout-secs`) gets a JSON 503 at the
/// deadline, never a 200, and the server keeps answering others, with the
/// slot freed.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_inference_is_cut_at_the_binarys_deadline_flag() {
    use self::binary_process::Proc;
    use crate::support::{check_response, send, slow_request, user_request};

    let server = Proc::start(&[
        "--inference-timeout-secs",
        "1",
        "--max-concurrent-inferences",
        "1",
    ]);
    let post = |body: String| {
        send(
            server.addr,
            http::Method::POST,
            "/v1/responses",
            &[("content-type", "application/json")],
            bytes::Bytes::from(body),
        )
    };
    let started = std::time::Instant::now();
    let hangs = tokio::spawn(post(slow_request("hangs", 60_000)));
    // Meanwhile health answers at once.
    let health = send(
        server.addr,
        http::Method::GET,
        "/health",
        &[],
        bytes::Bytes::new(),
    )
    .await;
    health.expect(200);
    let reply = hangs.await.unwrap();
    let waited = started.elapsed();
    let detail = reply.expect_detail(504);
    assert!(detail.contains("did not finish within"), "{detail}");
    assert!(detail.contains("1 s"), "{detail}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "answered after {waited:?}"
    );
    // The only inference slot is free again.
    let request = user_request("after-hang", "x", 1);
    check_response(&request, &post(request.clone()).await);
    assert!(
        server.log().contains("inference timed out"),
        "the timeout is logged:\n{}",
        server.log()
    );
}

/// What is logged never includes bodies, even at `debug` (where refusals are
/// explained): memory values, instruction contents and invalid input values
/// stay out of the log; request ids and locations may appear.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn even_at_debug_level_bodies_never_reach_the_log() {
    use self::binary_process::Proc;
    use crate::support::{check_response, send};

    let server = Proc::start_with_log(&[], "debug");
    let post = |body: String| {
        send(
            server.addr,
            http::Method::POST,
            "/v1/responses",
            &[("content-type", "application/json")],
            bytes::Bytes::from(body),
        )
    };
    let valid = r#"{"request_id":"debug-log-1","inputs":[{"id":0,"instruction":{"type":"user","content":"CONTENT-5eb1"},"memory":{"note":"MEMORY-91c0","n":[1,{"k":"NESTED-22d4"}]},"extra_keys":{"x":"EXTRA-0a7f"}}]}"#;
    check_response(valid, &post(valid.to_owned()).await);
    // Invalid in several ways, each next to a secret value.
    let invalids = [
        r#"{"request_id":"debug-log-2","inputs":[{"id":"BADID-3c3c","instruction":{"type":"user","content":"CONTENT-5eb1"}}]}"#,
        r#"{"request_id":"debug-log-3","inputs":[{"id":0,"instruction":{"type":"BADTYPE-77aa","content":"x"},"memory":{"note":"MEMORY-91c0"}}]}"#,
        r#"{"request_id":"debug-log-4","inputs":[{"id":0,"instruction":{"type":"user","content":"x"},"memory":{"note":"MEMORY-91c0","v":NaN}}]}"#,
        r#"{"request_id":"debug-log-5","inputs":[],"unknown":"UNKNOWN-4d4d"}"#,
        "{\"request_id\": \"debug-log-6\", \"MEMORY-91c0",
    ];
    for body in invalids {
        let reply = post(body.to_owned()).await;
        assert_eq!(reply.status.as_u16(), 422, "{}", reply.text());
    }
    // Wait for the last access line, then read the log.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.log().matches("status=422").count() < invalids.len()
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = server.log();
    assert!(
        log.contains("invalid AgentRequest"),
        "debug explains refusals:\n{log}"
    );
    for secret in [
        "CONTENT-5eb1",
        "MEMORY-91c0",
        "NESTED-22d4",
        "EXTRA-0a7f",
        "BADID-3c3c",
        "BADTYPE-77aa",
        "UNKNOWN-4d4d",
    ] {
        assert!(!log.contains(secret), "{secret} reached the log:\n{log}");
    }
}

#[cfg(feature = "tls")]
mod tls_hostile {
    //! Mutual TLS under attack, with a trusted client served at the same time.

    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    use magma_server::demo::DemoAgent;
    use magma_server::{Config, TlsConfig};
    use magma_testkit::TempDir;
    use magma_testkit::http1::throw;
    use magma_testkit::pki::{self, Ca, Leaf, SERVER_NAMES};
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio_rustls::TlsConnector;

    use super::{CLIENT_HELLO_START, Rng};
    use crate::support::{TestServer, within};

    /// A client configuration trusting `server_ca` (HTTP/1.1), presenting
    /// `cert` when given.
    fn client_config(server_ca: &[u8], cert: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
        pki::client_config(server_ca, &[b"http/1.1"], cert)
    }

    /// `GET /health` with `Connection: close` over a new TLS connection;
    /// the raw answer, or why there was none.
    async fn health_over_tls(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<String, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tls.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut got = Vec::new();
        tls.read_to_end(&mut got)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if got.is_empty() {
            return Err("closed without an answer".into());
        }
        Ok(String::from_utf8_lossy(&got).into_owned())
    }

    /// Acceptance: over mutual TLS, plaintext HTTP, broken handshakes
    /// (truncated, stalled, random), clients without a certificate and
    /// clients with an untrusted one are all refused, none gets an HTTP
    /// answer, and a trusted client served at the same time sees every one
    /// of its requests answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hostile_tls_clients_are_refused_while_a_trusted_client_is_served() {
        let dir = TempDir::new("server-hostile-tls");
        let names = SERVER_NAMES.map(str::to_owned);
        let (_, files) = TlsConfig::self_signed(dir.path(), &names, None).unwrap();
        let trusted_ca = Ca::new("trusted clients");
        let trusted_cert = trusted_ca.client_leaf();
        let ca_path = dir.write("client-ca.pem", &trusted_ca.pem);
        let mut config = Config::default();
        config.tls =
            Some(TlsConfig::from_pem_files(&files.cert, &files.key, Some(&ca_path)).unwrap());
        config.tls_handshake_timeout = Duration::from_millis(500);
        let server = TestServer::with_config(DemoAgent::new(), config).await;
        let addr = server.addr;
        let server_ca = std::fs::read(&files.ca_cert).unwrap();

        // The trusted client: 40 requests, one after the other, on new
        // connections, while the attack runs.
        let good = client_config(&server_ca, Some(&trusted_cert));
        let trusted = tokio::spawn(async move {
            let mut served = 0;
            for _ in 0..40 {
                let answer = health_over_tls(addr, Arc::clone(&good)).await;
                let answer = answer.unwrap_or_else(|e| panic!("trusted client refused: {e}"));
                assert!(answer.starts_with("HTTP/1.1 200"), "{answer:.200}");
                served += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            served
        });

        let mut attacks = Vec::new();
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for i in 0..60 {
            let config = match i % 6 {
                0 => None,
                1 => Some(client_config(&server_ca, None)),
                2 => Some(client_config(
                    &server_ca,
                    Some(&Ca::new("strangers").client_leaf()),
                )),
                _ => None,
            };
            let payload: Vec<u8> = match i % 6 {
                0 => b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
                3 => CLIENT_HELLO_START.to_vec(), // truncated, then stalled
                4 => {
                    let mut bytes = vec![0x16, 0x03, 0x03, 0x00, 0x40];
                    bytes.extend(rng.bytes(64)); // a record of random handshake bytes
                    bytes
                }
                5 => rng.bytes(1024),
                _ => Vec::new(),
            };
            attacks.push(tokio::spawn(async move {
                match config {
                    Some(config) => match health_over_tls(addr, config).await {
                        Ok(answer) => Err(format!("attack {i} was served: {answer:.200}")),
                        Err(_) => Ok(()),
                    },
                    None => {
                        let got = throw(addr, &payload).await;
                        if String::from_utf8_lossy(&got).contains("HTTP/") {
                            Err(format!("attack {i} got an HTTP answer"))
                        } else {
                            Ok(())
                        }
                    }
                }
            }));
        }
        for a in attacks {
            within("an attack to be refused", a)
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let served = within("the trusted client", trusted).await.unwrap();
        assert_eq!(served, 40);
    }
}
