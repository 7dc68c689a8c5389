//! The `magma-server` binary as users run it: flags, logs, signals.

use std::net::SocketAddr;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use magma_testkit::process::{LoggedChild, listening_addr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{check_response, expect_closed, raw_exchange, send, slow_request, within};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_magma-server");

/// A running `magma-server` process with its standard error collected.
pub(crate) struct Binary {
    proc: LoggedChild,
    pub(crate) addr: SocketAddr,
}

impl Binary {
    /// Starts the binary on 127.0.0.1 port 0 with `args` and `rust_log`
    /// (`None`: the default filter) and waits for its "listening" line.
    pub(crate) async fn start(args: &[&str], rust_log: Option<&str>) -> Binary {
        Binary::start_with_env(args, &[], rust_log).await
    }

    /// [`start`](Binary::start) with environment variables.
    pub(crate) async fn start_with_env(
        args: &[&str],
        env: &[(&str, &str)],
        rust_log: Option<&str>,
    ) -> Binary {
        let mut cmd = Command::new(BIN);
        cmd.args(["--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied());
        match rust_log {
            Some(filter) => cmd.env("RUST_LOG", filter),
            None => cmd.env_remove("RUST_LOG"),
        };
        let mut binary = Binary {
            proc: LoggedChild::spawn("magma-server", &mut cmd),
            addr: "0.0.0.0:0".parse().unwrap(),
        };
        let line = binary.wait_for_log("listening on ").await;
        binary.addr = listening_addr(&line);
        binary
    }

    pub(crate) fn log(&self) -> String {
        self.proc.log()
    }

    /// Waits for a log line containing `needle`; returns it.
    pub(crate) async fn wait_for_log(&mut self, needle: &str) -> String {
        within(&format!("log line {needle:?}"), async {
            loop {
                if let Some(line) = self.proc.find(needle) {
                    return line;
                }
                self.proc.assert_running(needle);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
    }

    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.proc.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    pub(crate) async fn wait_exit(&mut self) -> ExitStatus {
        within("magma-server to exit", async {
            loop {
                if let Some(status) = self.proc.exited() {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
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
        "--write-timeout-secs",
        "--body-timeout-secs",
        "--max-connections",
        "--max-concurrent-inferences",
        "--max-candidates",
        "--max-response-bytes",
        "--max-concurrent-streams",
        "--max-total-body-bytes",
        "--max-coaching-sessions",
        "--max-coaching-session-bytes",
        "--coaching-session-idle-secs",
        "--coaching-store",
        "--coaching-store-cacert",
        "--inference-timeout-secs",
        "--shutdown-grace-secs",
        "--path-prefix",
        "--tls-cert",
        "--tls-key",
        "--tls-client-ca",
        "--tls-self-signed",
        "--tls-handshake-timeout-secs",
        "--log-format",
        "--metrics",
        "--trusted-proxy",
        "--no-coaching",
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
    // Every option but --help and --version has its environment variable.
    for flag in flags
        .iter()
        .filter(|f| !matches!(**f, "--help" | "--version"))
    {
        let name = match *flag {
            // A list: one variable, comma-separated.
            "--trusted-proxy" => "TRUSTED_PROXIES".to_owned(),
            f => f.trim_start_matches('-').replace('-', "_").to_uppercase(),
        };
        // The store's URL may hold a password: its value is never shown.
        let shown = if *flag == "--coaching-store" { "" } else { "=" };
        let env = format!("[env: MAGMA_SERVER_{name}{shown}]");
        assert!(help.contains(&env), "{env} missing from --help");
    }
}

/// Runs the binary to its exit with `args` and `env`; (status, stderr).
fn exits(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run magma-server");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[track_caller]
fn assert_exit(args: &[&str], env: &[(&str, &str)], code: i32, says: &[&str]) {
    let (status, stderr) = exits(args, env);
    assert_eq!(status, Some(code), "{args:?} {env:?}: {stderr}");
    for s in says {
        assert!(
            stderr.contains(s),
            "{args:?} {env:?}: {s:?} not in:\n{stderr}"
        );
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_flag_values_exit_2_naming_the_flag_and_what_was_expected() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--max-connections", "0"],
            &["--max-connections", "at least 1"],
        ),
        (
            &["--max-body-bytes", "lots"],
            &["--max-body-bytes", "does not start with a number", "16MiB"],
        ),
        (
            &["--max-body-bytes", "16XB"],
            &[
                "--max-body-bytes",
                "unknown unit \"xb\"",
                "16MiB (16 x 1024 x 1024)",
            ],
        ),
        (
            &["--max-response-bytes", "1000"],
            &["--max-response-bytes", "below the minimum of 1024"],
        ),
        (
            &["--header-timeout-secs", "0"],
            &["--header-timeout-secs", "1.."],
        ),
        (
            &["--listen", "8081"],
            &["--listen", "a port alone", "127.0.0.1:8081", "0.0.0.0:8081"],
        ),
        (
            &["--listen", "localhost"],
            &["--listen", "no port", "expected HOST:PORT"],
        ),
        (
            &["--listen", "127.0.0.1:99999"],
            &["--listen", "not a port", "expected HOST:PORT"],
        ),
        (
            &["--listen", "exa mple:80"],
            &["--listen", "not a host", "expected HOST:PORT"],
        ),
        (
            &["--listen", "[::1:80"],
            &["--listen", "expected HOST:PORT"],
        ),
        (
            &["--path-prefix", "/a?b"],
            &["--path-prefix", "plain URL path"],
        ),
        (&["--log-format", "xml"], &["--log-format", "text", "json"]),
        (&["--tls-cert", "c.pem"], &["--tls-key"]),
        (
            &["--tls-client-ca", "ca.pem"],
            &["--tls-client-ca needs --tls-cert"],
        ),
        (&["--no-such-flag"], &["--no-such-flag"]),
        (
            &["--trusted-proxy", "10.0.0.0/40"],
            &["--trusted-proxy", "expected e.g. 10.0.0.5"],
        ),
    ];
    for (args, says) in cases {
        assert_exit(args, &[], 2, says);
    }
}

#[test]
fn environment_variables_are_checked_like_flags() {
    assert_exit(
        &[],
        &[("MAGMA_SERVER_MAX_CONNECTIONS", "0")],
        2,
        &["--max-connections", "at least 1"],
    );
    assert_exit(
        &[],
        &[("MAGMA_SERVER_LISTEN", "localhost")],
        2,
        &["--listen", "expected HOST:PORT"],
    );
}

/// A value from the environment is refused naming the variable (the user
/// never typed the flag clap names); sizes take units.
#[test]
fn a_refused_environment_value_names_its_variable() {
    assert_exit(
        &[],
        &[("MAGMA_SERVER_MAX_BODY_BYTES", "16XB")],
        2,
        &[
            "--max-body-bytes",
            "environment variable MAGMA_SERVER_MAX_BODY_BYTES=\"16XB\"",
            "--max-body-bytes was not given",
            "16MiB",
        ],
    );
    // Given on the command line, the flag is what is named, without the note.
    let (status, stderr) = exits(
        &["--max-body-bytes", "16XB"],
        &[("MAGMA_SERVER_MAX_BODY_BYTES", "1")],
    );
    assert_eq!(status, Some(2), "{stderr}");
    assert!(!stderr.contains("environment variable"), "{stderr}");
}

#[tokio::test]
async fn sizes_with_units_are_accepted() {
    let mut bin = Binary::start_with_env(
        &["--max-total-body-bytes", "1GiB"],
        &[("MAGMA_SERVER_MAX_BODY_BYTES", "16MB")],
        Some("info"),
    )
    .await;
    let line = bin.wait_for_log("listening on").await;
    assert!(line.contains("max_body_bytes=16000000"), "{line}");
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
fn an_address_in_use_exits_1_naming_listen() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert_exit(
        &["--listen", &addr],
        &[],
        1,
        &[
            &format!("--listen {addr}"),
            "cannot listen on",
            "in use",
            "another process already listens there",
        ],
    );
}

#[test]
fn an_address_that_is_not_local_exits_1_naming_listen() {
    // TEST-NET-3: a valid address no interface of this machine has.
    assert_exit(
        &["--listen", "203.0.113.7:8080"],
        &[],
        1,
        &[
            "--listen 203.0.113.7:8080",
            "cannot listen on",
            "not one of this machine's",
            "127.0.0.1",
        ],
    );
}

/// PEM files for the TLS start-up cases, in a fresh directory.
#[cfg(feature = "tls")]
struct Pems {
    dir: std::path::PathBuf,
}

#[cfg(feature = "tls")]
impl Pems {
    fn new(name: &str) -> Pems {
        let dir = std::env::temp_dir().join(format!("magma-bin-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["a", "b"] {
            magma_server::TlsConfig::self_signed(dir.join(sub), &["localhost".into()], None)
                .expect("generate");
        }
        std::fs::write(dir.join("garbage.pem"), "not a certificate\n").unwrap();
        Pems { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

#[cfg(feature = "tls")]
impl Drop for Pems {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(feature = "tls")]
#[test]
fn unreadable_or_mismatched_tls_files_exit_1_naming_the_flag() {
    let p = Pems::new("startup");
    let (cert, key, other_key) = (
        p.path("a/cert.pem"),
        p.path("a/key.pem"),
        p.path("b/key.pem"),
    );
    let (missing, garbage) = (p.path("missing.pem"), p.path("garbage.pem"));
    let listen = ["--listen", "127.0.0.1:0"];
    let with = |extra: &[&'static str], rest: Vec<&str>| -> Vec<String> {
        listen
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .chain(rest.into_iter().map(str::to_owned))
            .collect()
    };
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            with(&[], vec!["--tls-cert", &missing, "--tls-key", &key]),
            vec![
                format!("--tls-cert {missing}"),
                "No such file".into(),
                "expected a PEM certificate chain".into(),
            ],
        ),
        (
            with(&[], vec!["--tls-cert", &cert, "--tls-key", &missing]),
            vec![
                format!("--tls-key {missing}"),
                "expected a PEM private key".into(),
            ],
        ),
        (
            with(&[], vec!["--tls-cert", &garbage, "--tls-key", &key]),
            vec![format!("--tls-cert {garbage}"), "no CERTIFICATE".into()],
        ),
        (
            with(&[], vec!["--tls-cert", &cert, "--tls-key", &garbage]),
            vec![
                format!("--tls-key {garbage}"),
                "no usable private key".into(),
            ],
        ),
        (
            with(&[], vec!["--tls-cert", &cert, "--tls-key", &other_key]),
            vec![
                format!("--tls-cert {cert} and --tls-key {other_key}"),
                "the private key does not belong to the certificate".into(),
                "expected the private key of the certificate".into(),
            ],
        ),
        (
            with(
                &[],
                vec![
                    "--tls-cert",
                    &cert,
                    "--tls-key",
                    &key,
                    "--tls-client-ca",
                    &missing,
                ],
            ),
            vec![
                format!("--tls-client-ca {missing}"),
                "expected a PEM file of CA certificates".into(),
            ],
        ),
        (
            with(&[], vec!["--tls-self-signed", &p.path("garbage.pem")]),
            vec!["--tls-self-signed".into()],
        ),
    ];
    for (args, says) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let says: Vec<&str> = says.iter().map(String::as_str).collect();
        assert_exit(&args, &[], 1, &says);
    }
}

#[cfg(not(feature = "metrics"))]
#[test]
fn metrics_without_the_metrics_feature_exits_2_and_says_how_to_get_it() {
    assert_exit(&["--metrics"], &[], 2, &["--metrics", "--features metrics"]);
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
async fn environment_variables_configure_the_server_and_flags_win() {
    let bin = Binary::start_with_env(
        &["--path-prefix", "/from-flag"],
        &[
            ("MAGMA_SERVER_PATH_PREFIX", "/from-env"),
            ("MAGMA_SERVER_MAX_BODY_BYTES", "100"),
        ],
        None,
    )
    .await;
    let get = |path: &'static str| send(bin.addr, Method::GET, path, &[], Bytes::new());
    assert_eq!(get("/from-flag/health").await.status, 200);
    assert_eq!(get("/from-env/health").await.status, 404);
    // The body limit came from the environment.
    let big = crate::support::user_request("env-limit", &"x".repeat(200), 1);
    let reply = send(
        bin.addr,
        Method::POST,
        "/from-flag/v1/responses",
        &[("content-type", "application/json")],
        Bytes::from(big),
    )
    .await;
    assert_eq!(reply.status, 413, "{}", reply.text());
}

#[tokio::test]
async fn json_logs_are_one_object_per_line_with_the_request_ids() {
    let bin = Binary::start(&["--log-format", "json"], None).await;
    let request = crate::support::user_request("json-log-1", "hi", 1);
    let reply = send(
        bin.addr,
        Method::POST,
        "/v1/responses",
        &[
            ("content-type", "application/json"),
            ("x-request-id", "edge-77"),
        ],
        Bytes::from(request.clone()),
    )
    .await;
    check_response(&request, &reply);
    let mut bin = bin;
    let line = bin.wait_for_log("json-log-1").await;
    let event = magma_server::Json::from_slice(line.as_bytes())
        .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
    let event = event.as_object().expect("object");
    assert_eq!(event.get_str("level"), Some("INFO"), "{line}");
    assert_eq!(
        event.get_str("target"),
        Some("magma_server::access"),
        "{line}"
    );
    let fields = event
        .get("fields")
        .and_then(|f| f.as_object())
        .expect("fields");
    assert_eq!(
        fields.get("status").map(|s| s.to_json_string()).as_deref(),
        Some("200")
    );
    assert_eq!(fields.get_str("x_request_id"), Some("edge-77"), "{line}");
    assert!(
        fields.get_str("request_id").unwrap().contains("json-log-1"),
        "{line}"
    );
    // Every line is JSON, the start-up line included.
    for line in bin.log().lines() {
        assert!(
            magma_server::Json::from_slice(line.as_bytes()).is_ok(),
            "{line}"
        );
    }
}

#[tokio::test]
async fn the_access_log_shows_the_client_a_trusted_proxy_forwarded() {
    let mut bin = Binary::start_with_env(
        &[],
        &[("MAGMA_SERVER_TRUSTED_PROXIES", "10.0.0.0/8,127.0.0.1")],
        None,
    )
    .await;
    let reply = send(
        bin.addr,
        Method::GET,
        "/health",
        &[
            ("x-forwarded-for", "203.0.113.9, 10.1.1.1"),
            ("x-request-id", "via-proxy"),
        ],
        Bytes::new(),
    )
    .await;
    assert_eq!(reply.status, 200);
    let line = bin.wait_for_log("via-proxy").await;
    assert!(line.contains("client=203.0.113.9"), "{line}");
    assert!(line.contains("peer=127.0.0.1:"), "{line}");
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

/// A second SIGTERM during the drain exits at once (status 130), however
/// long the grace period and the request in flight.
#[tokio::test]
async fn a_second_sigterm_exits_at_once() {
    let mut bin = Binary::start(
        &["--shutdown-grace-secs", "60"],
        Some("info,magma_server=debug"),
    )
    .await;
    let _in_flight = start_slow(&mut bin, "stalled", 50_000).await;
    bin.signal("TERM");
    bin.wait_for_log("no longer accepting connections").await;
    let started = std::time::Instant::now();
    bin.signal("TERM");
    let status = bin.wait_exit().await;
    assert_eq!(status.code(), Some(130), "log:\n{}", bin.log());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(bin.log().contains("second shutdown signal"));
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

#[tokio::test]
async fn the_demo_coaches_unless_no_coaching() {
    let advertised = |body: magma_server::Json| {
        (
            body.get("specialized_coaching").unwrap().to_json_string(),
            body.get("coaching_resume").cloned(),
        )
    };
    let on = Binary::start(&[], None).await;
    let info = send(on.addr, Method::GET, "/v1/info", &[], Bytes::new()).await;
    assert_eq!(
        advertised(info.expect(200)),
        (
            r#"["failure","suboptimal","format"]"#.to_owned(),
            Some(magma_server::Json::Bool(true))
        )
    );
    for off in [
        Binary::start(&["--no-coaching"], None).await,
        Binary::start_with_env(&[], &[("MAGMA_SERVER_NO_COACHING", "true")], None).await,
    ] {
        let info = send(off.addr, Method::GET, "/v1/info", &[], Bytes::new()).await;
        assert_eq!(
            advertised(info.expect(200)),
            ("[]".to_owned(), Some(magma_server::Json::Bool(false)))
        );
    }
}
