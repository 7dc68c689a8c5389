//! The `magma-server` binary as users run it: flags, logs, signals.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{check_response, expect_closed, raw_exchange, send, slow_request, within};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_magma-server");

/// A running `magma-server` process with its standard error collected.
pub(crate) struct Binary {
    child: Child,
    pub(crate) addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Binary {
    /// Starts the binary on 127.0.0.1 port 0 with `args` and `rust_log`
    /// (`None`: the default filter) and waits for its "listening" line.
    pub(crate) async fn start(args: &[&str], rust_log: Option<&str>) -> Binary {
        let mut cmd = Command::new(BIN);
        cmd.args(["--listen", "127.0.0.1:0"]).args(args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match rust_log {
            Some(filter) => cmd.env("RUST_LOG", filter),
            None => cmd.env_remove("RUST_LOG"),
        };
        let mut child = cmd.spawn().expect("spawn magma-server");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let mut binary = Binary {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            log,
        };
        let line = binary.wait_for_log("listening on ").await;
        let url = line
            .split("listening on ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        let host_port = url.split("://").nth(1).unwrap();
        binary.addr = host_port
            .parse()
            .unwrap_or_else(|_| panic!("address in {line:?}"));
        binary
    }

    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits for a log line containing `needle`; returns it.
    pub(crate) async fn wait_for_log(&mut self, needle: &str) -> String {
        within(&format!("log line {needle:?}"), async {
            loop {
                if let Some(line) = self.log.lock().unwrap().iter().find(|l| l.contains(needle)) {
                    return line.clone();
                }
                if let Ok(Some(status)) = self.child.try_wait() {
                    panic!(
                        "magma-server exited ({status}) before logging {needle:?}:\n{}",
                        self.log()
                    );
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }

    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    pub(crate) async fn wait_exit(&mut self) -> ExitStatus {
        within("magma-server to exit", async {
            loop {
                if let Some(status) = self.child.try_wait().expect("try_wait") {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn help() -> String {
    let out = Command::new(BIN)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn help_documents_every_flag() {
    let help = help();
    let mut flags = vec![
        "--listen",
        "--max-body-bytes",
        "--header-timeout-secs",
        "--body-timeout-secs",
        "--max-connections",
        "--max-concurrent-inferences",
        "--max-candidates",
        "--inference-timeout-secs",
        "--shutdown-grace-secs",
        "--path-prefix",
        "--tls-cert",
        "--tls-key",
        "--tls-client-ca",
        "--tls-self-signed",
        "--tls-handshake-timeout-secs",
        "--help",
        "--version",
    ];
    for flag in &flags {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
    // ... and nothing undocumented here.
    flags.sort_by_key(|f| std::cmp::Reverse(f.len()));
    let mut rest = help.clone();
    for flag in &flags {
        rest = rest.replace(flag, "");
    }
    let unknown: Vec<&str> = rest
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .collect();
    assert!(
        unknown.is_empty(),
        "flags not listed in this test: {unknown:?}"
    );
    for default in [
        "127.0.0.1:8080",
        "16777216",
        "[default: 30]",
        "[default: 512]",
        "RUST_LOG",
    ] {
        assert!(help.contains(default), "{default} missing from --help");
    }
    assert!(help.contains("demo agent"));
}

#[test]
fn version_says_which_features_the_build_has() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    assert!(
        version.starts_with(&format!("magma-server {} (", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert_eq!(
        version.contains("features: cli, tls"),
        cfg!(feature = "tls"),
        "{version}"
    );
    assert_eq!(
        version.contains("no TLS"),
        !cfg!(feature = "tls"),
        "{version}"
    );
}

#[test]
fn bad_flags_exit_2_and_a_busy_port_exits_1() {
    let out = Command::new(BIN)
        .args(["--max-connections", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(BIN)
        .args(["--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen on"));
}

#[cfg(not(feature = "tls"))]
#[test]
fn tls_flags_without_the_tls_feature_explain_themselves() {
    let out = Command::new(BIN)
        .args(["--tls-self-signed", "/nonexistent"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--features tls"));
}

#[tokio::test]
async fn logs_have_a_line_per_request_with_its_id_and_never_the_memory() {
    let mut bin = Binary::start(&[], None).await;
    let secret = "SECRET-MEMORY-7f3a";
    let request = format!(
        r#"{{"request_id":"log-check-1","inputs":[{{"id":0,"instruction":{{"type":"user","content":"hi"}},"memory":{{"note":"{secret}"}}}}]}}"#
    );
    let reply = send(
        bin.addr,
        Method::POST,
        "/v1/responses",
        &[("content-type", "application/json")],
        Bytes::from(request.clone()),
    )
    .await;
    check_response(&request, &reply);
    // An invalid body that contains the secret, and a plain health check.
    let invalid = format!(r#"{{"request_id":"x","inputs":[],"memory":"{secret}"}}"#);
    let reply = send(
        bin.addr,
        Method::POST,
        "/v1/responses",
        &[],
        Bytes::from(invalid),
    )
    .await;
    assert_eq!(reply.status.as_u16(), 422);
    send(bin.addr, Method::GET, "/health", &[], Bytes::new())
        .await
        .expect(200);
    bin.wait_for_log("path=/health").await;
    bin.signal("TERM");
    assert!(bin.wait_exit().await.success());
    let log = bin.log();
    let line = log
        .lines()
        .find(|l| l.contains("log-check-1"))
        .expect("access line");
    for part in [
        "method=POST",
        "path=/v1/responses",
        "status=200",
        "latency_ms=",
        "INFO",
    ] {
        assert!(line.contains(part), "{part} missing in {line}");
    }
    let invalid_line = log
        .lines()
        .find(|l| l.contains("status=422"))
        .expect("422 access line");
    assert!(
        invalid_line.contains("request_id=\"srv-"),
        "generated id: {invalid_line}"
    );
    assert!(!log.contains(secret), "memory leaked into the log:\n{log}");
}

/// Starts a slow request on its own connection and returns the connection
/// once the server has begun the inference (seen in the debug log).
async fn start_slow(bin: &mut Binary, id: &str, delay_ms: u64) -> TcpStream {
    let body = slow_request(id, delay_ms);
    let head = format!(
        "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(bin.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    bin.wait_for_log(&format!("inference started request_id=\"{id}\""))
        .await;
    stream
}

#[tokio::test]
async fn sigterm_drains_in_flight_requests_refuses_new_ones_and_exits_0() {
    let mut bin = Binary::start(
        &["--shutdown-grace-secs", "30"],
        Some("info,magma_server=debug"),
    )
    .await;
    let mut in_flight = start_slow(&mut bin, "drain-me", 3000).await;
    // An idle keep-alive connection must not hold the shutdown up.
    let (mut idle, reply) =
        raw_exchange(bin.addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(reply.status, 200);

    bin.signal("TERM");
    bin.wait_for_log("no longer accepting connections").await;
    let refused = TcpStream::connect(bin.addr).await;
    assert!(
        refused.is_err(),
        "a new connection was accepted during shutdown"
    );
    expect_closed(&mut idle).await;

    let reply = crate::support::raw_read(&mut in_flight).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.body.contains("\"request_id\":\"drain-me\""));
    let status = bin.wait_exit().await;
    assert_eq!(status.code(), Some(0), "log:\n{}", bin.log());
    assert!(bin.log().contains("SIGTERM received"));
}

#[tokio::test]
async fn sigint_with_a_request_longer_than_the_grace_exits_0_after_the_grace() {
    let mut bin = Binary::start(
        &["--shutdown-grace-secs", "1"],
        Some("info,magma_server=debug"),
    )
    .await;
    // 60 s: far longer than the wait below allows, so exiting proves the
    // grace period cut it.
    let mut in_flight = start_slow(&mut bin, "too-slow", 60_000).await;
    bin.signal("INT");
    let status = bin.wait_exit().await;
    assert_eq!(status.code(), Some(0), "log:\n{}", bin.log());
    assert!(bin.log().contains("SIGINT received"));
    assert!(bin.log().contains("grace period over"));
    // The cut request got no answer.
    let mut rest = Vec::new();
    let _ = within("the cut connection", in_flight.read_to_end(&mut rest)).await;
    assert!(!String::from_utf8_lossy(&rest).contains("200 OK"));
}

#[tokio::test]
async fn a_request_abandoned_by_its_client_is_logged_and_its_inference_dropped() {
    let mut bin = Binary::start(&[], Some("info,magma_server=debug")).await;
    let stream = start_slow(&mut bin, "abandon-me", 60_000).await;
    drop(stream);
    let line = bin.wait_for_log("request abandoned").await;
    assert!(line.contains("request_id=\"abandon-me\""), "{line}");
    // The dropped inference does not delay the shutdown (grace is 30 s,
    // the inference 60 s; `wait_exit` allows 30 s).
    bin.signal("TERM");
    assert_eq!(bin.wait_exit().await.code(), Some(0));
    assert!(!bin.log().contains("grace period over"), "{}", bin.log());
}
