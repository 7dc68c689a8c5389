//! `magma-validate proxy` and `replay`: the real binary between a client
//! and real agents on loopback (magma-server's demo agent, the broken stub
//! agents of these tests), answers compared byte for byte with direct calls.

use std::process::Command;
use std::time::Duration;

use magma_client::{Client, RawRequest, RawResponse};
use magma_testkit::TempDir;
use magma_testkit::process::LoggedChild;
use magma_testkit::stub::{Reply, StubServer};
use magma_validator::magma_protocol::{AgentDecision, AgentRequest, AgentResponse, Candidate};
use serde_json::Value;

use crate::probe_live::RealServer;
use crate::support::{BIN, Fault, agent_server, code, run, stdout};

/// The proxy binary, running until [`Running::stop`].
pub(crate) struct Running {
    pub(crate) child: LoggedChild,
    pub(crate) url: String,
}

pub(crate) fn start(upstream: &str, extra: &[&str]) -> Running {
    let mut cmd = Command::new(BIN);
    cmd.args(["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0"])
        .args(extra);
    let mut child = LoggedChild::spawn("magma-validate proxy", &mut cmd);
    let line = child.wait_for_log("listening on", Duration::from_secs(20));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .expect("the proxy's URL")
        .to_owned();
    Running { child, url }
}

impl Running {
    /// SIGTERM, then the exit code and the log.
    pub(crate) fn stop(mut self) -> (i32, String) {
        let pid = self.child.guard().id().to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(killed.success());
        let status = self
            .child
            .guard()
            .child()
            .wait()
            .expect("wait for the proxy");
        // The log thread reads to the end of standard error.
        std::thread::sleep(Duration::from_millis(100));
        (status.code().expect("exit code"), self.child.log())
    }
}

pub(crate) fn client(url: &str) -> Client {
    Client::builder(url).build().expect("client")
}

pub(crate) const REQUEST: &str = r#"{"request_id":"r-1","inputs":[{"id":3,"instruction":{"type":"user","content":"hello"},"memory":{"token":"secret-value","n":1},"num_outputs":2}]}"#;

/// The BENCH-like calls: health, info, a response with two candidates.
fn bench_like(url: &str) -> Vec<RawResponse> {
    let c = client(url);
    vec![
        c.execute(RawRequest::get("/health")).expect("health"),
        c.execute(RawRequest::get("/v1/info")).expect("info"),
        c.execute(RawRequest::post("/v1/responses").json(REQUEST))
            .expect("responses"),
    ]
}

fn same(a: &[RawResponse], b: &[RawResponse]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.status(), y.status());
        assert_eq!(x.body(), y.body(), "bodies differ");
        assert_eq!(
            x.headers().get("content-type"),
            y.headers().get("content-type")
        );
    }
}

#[test]
fn answers_of_magma_server_pass_through_unchanged_and_are_recorded() {
    let server = RealServer::start_with(magma_server::Config::default());
    let dir = TempDir::new("proxy-demo");
    let record = dir.path().join("run.jsonl");
    let summary = dir.path().join("summary.json");
    let proxy = start(
        &server.url(),
        &[
            "--record",
            record.to_str().unwrap(),
            "--redact",
            "token",
            "--format",
            "json",
            "-o",
            summary.to_str().unwrap(),
        ],
    );
    let direct = bench_like(&server.url());
    let through = bench_like(&proxy.url);
    same(&direct, &through);
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 0, "{log}");
    assert!(!log.contains("[exchange"), "no finding expected:\n{log}");

    let summary: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(summary["exchanges"], 3, "{summary:#}");
    assert_eq!(summary["statuses"]["200"], 3, "{summary:#}");
    assert_eq!(summary["checks"]["response"]["checked"], 1, "{summary:#}");
    assert!(summary["latency_ms"]["max"].as_f64().unwrap() > 0.0);

    // The recording: three lines that `batch` accepts, memory key redacted.
    let text = std::fs::read_to_string(&record).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(!text.contains("secret-value"), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    let out = run(&["batch"], text.as_bytes());
    let verdicts: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(verdicts.len(), 3);
    assert!(
        verdicts.iter().all(|v| v.contains("accept")),
        "{verdicts:?}"
    );
}

#[test]
fn an_unreachable_upstream_is_a_502_with_a_json_detail() {
    let port = magma_testkit::stub::free_port();
    let proxy = start(&format!("http://{port}"), &[]);
    let answer = client(&proxy.url)
        .execute(RawRequest::post("/v1/responses").json(REQUEST))
        .expect("the proxy answers");
    assert_eq!(answer.status().as_u16(), 502);
    let body: Value = serde_json::from_slice(answer.body()).unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("could not be reached"),
        "{body}"
    );
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 1, "{log}");
    assert!(log.contains("upstream error upstream_unreachable"), "{log}");
}

/// What the client of a fault case sends to `POST /v1/responses`.
#[derive(Debug, Clone, Copy)]
enum Sent {
    /// [`REQUEST`]: one input, two candidates.
    Plain,
    /// `inputs: []`.
    NoInputs,
    /// BENCH's env input with tools, known robots and a `memory_list`.
    BenchLike,
    /// A request the reference refuses (a number as `request_id`).
    Invalid,
    /// A request whose memory holds a NaN (no consumer can send it).
    Nan,
}

impl Sent {
    fn body(self) -> String {
        match self {
            Sent::Plain => REQUEST.to_owned(),
            Sent::NoInputs => r#"{"request_id":"r-2","inputs":[]}"#.to_owned(),
            Sent::BenchLike => magma_testkit::fixtures::bench_like_request(1),
            Sent::Invalid => r#"{"request_id":5,"inputs":[]}"#.to_owned(),
            Sent::Nan => REQUEST.replace(r#""n":1"#, r#""n":NaN"#),
        }
    }
}

/// What the proxy says of an agent with `fault`: what the client sends,
/// the check and the code of the finding naming the fault, and the exit
/// code; `None` for the conformant agents.
fn expected(fault: Fault) -> Option<(Sent, &'static str, &'static str, i32)> {
    use Sent::*;
    let case = match fault {
        Fault::None | Fault::Slow => return None,
        Fault::ReversedCandidates => (Plain, "response", "candidates_mismatch", 1),
        Fault::MissingCandidate => (Plain, "response", "candidates_mismatch", 1),
        Fault::IndexFromOne => (Plain, "response", "candidates_mismatch", 1),
        Fault::RequestIdNotEchoed => (Plain, "response", "candidates_mismatch", 1),
        Fault::MemoryMissing => (Plain, "response", "missing", 1),
        Fault::MemoryNull => (Plain, "response", "dict_type", 1),
        Fault::NanInBody => (Plain, "response", "finite_number", 1),
        Fault::ObjectInsteadOfArray => (Plain, "response", "list_type", 1),
        Fault::HealthExtraField => (Plain, "health", "extra_forbidden", 1),
        Fault::InfoCoachingSessionVersion => (Plain, "info", "extra_forbidden", 1),
        Fault::InfoProtocol10 => (Plain, "info", "protocol_version", 0),
        Fault::InfoInferenceFalse => (Plain, "info", "inference_capability", 0),
        Fault::InfoServerError => (Plain, "info", "http_status", 1),
        Fault::ServerErrorOnEmptyInputs => (NoInputs, "response", "http_status", 1),
        Fault::SayWithToolCalls => (BenchLike, "response", "say_with_tool_calls", 0),
        Fault::EmptyDecision => (Plain, "response", "empty_decision", 0),
        Fault::MemoryListDropped => (BenchLike, "response", "memory_list_dropped", 0),
        Fault::AllErrorCandidates => (Plain, "response", "error_candidate", 0),
        Fault::TextPlainContentType => (Plain, "content_type", "content_type", 0),
        Fault::HealthUnavailable => (Plain, "health", "not_ready", 0),
        Fault::RequiresAuthorization => (Plain, "health", "http_status", 1),
        Fault::HangsOnPost => (Plain, "upstream", "upstream_timeout", 1),
        // A consumer that sends an invalid request is told so by a request
        // finding (an error: exit 1); the agent's answer to it is the
        // response finding.
        Fault::OkForInvalidRequests => (Invalid, "response", "accepted_invalid_request", 1),
        Fault::NanServerError => (Nan, "response", "server_error_on_invalid_request", 1),
    };
    Some(case)
}

/// Each broken agent of these tests (every [`Fault`] but `None` and
/// `Slow`, which are conformant): the finding naming its fault in the log,
/// the recording and the JUnit summary, and the exit code its severity
/// gives (1 for an error, 0 when there are warnings only).
#[test]
fn each_broken_agent_produces_a_finding_naming_its_fault() {
    let dir = TempDir::new("proxy-faults");
    for fault in Fault::ALL {
        let Some((sent, check, code, exit_code)) = expected(fault) else {
            continue;
        };
        let agent = agent_server(fault);
        let record = dir.path().join(format!("{fault:?}.jsonl"));
        let junit = dir.path().join(format!("{fault:?}.xml"));
        let proxy = start(
            &agent.url(),
            &[
                "--record",
                record.to_str().unwrap(),
                "--format",
                "junit",
                "-o",
                junit.to_str().unwrap(),
                "--timeout",
                "2",
            ],
        );
        let c = client(&proxy.url);
        let _ = c.execute(RawRequest::get("/health"));
        let _ = c.execute(RawRequest::get("/v1/info"));
        let _ = c.execute(RawRequest::post("/v1/responses").json(sent.body()));
        let (exit, log) = proxy.stop();
        assert_eq!(exit, exit_code, "{fault:?}: {log}");
        let line = format!("{check} ");
        let named: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with("[exchange ") && l.contains(&line) && l.contains(code))
            .collect();
        assert!(
            !named.is_empty(),
            "{fault:?}: no {check}/{code} line in\n{log}"
        );
        // Warnings only: the line says so.
        if exit_code == 0 {
            assert!(
                named.iter().all(|l| l.contains(" warning ")),
                "{fault:?}: {named:?}"
            );
        }
        let recorded = std::fs::read_to_string(&record).unwrap();
        assert!(
            recorded.lines().any(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f["check"] == check && f["code"].as_str().unwrap().contains(code))
            }),
            "{fault:?}: not recorded:\n{recorded}"
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        let doc = quick_junit::Report::deserialize_from_str(&xml).expect("valid JUnit XML");
        let suite = &doc.test_suites[0];
        let case = suite
            .test_cases
            .iter()
            .find(|c| c.name.as_str() == check)
            .unwrap_or_else(|| panic!("{fault:?}: no test case {check} in\n{xml}"));
        assert!(xml.contains(code), "{fault:?}: {xml}");
        let passed = matches!(case.status, quick_junit::TestCaseStatus::Success { .. });
        // Lints are warnings: the case passes and lists them. An error
        // fails the case of its check.
        let error_here = named.iter().any(|l| l.contains(" error "));
        assert_eq!(passed, !error_here, "{fault:?}: {xml}");
    }
}

/// An agent answering like the stub's correct one, with its say changed
/// for the input whose content is `changed`.
fn changed_agent(changed: &'static str) -> StubServer {
    StubServer::start(move |req| {
        if req.method == "POST" && req.path_only() == "/v1/responses" {
            let Ok(request) = AgentRequest::from_slice(&req.body) else {
                return Reply::json(422, r#"{"detail":"invalid"}"#);
            };
            let response = AgentResponse::build(&request, |input, _| {
                let content = &input.instruction.content;
                let say = if content == changed {
                    format!("OK: {content}")
                } else {
                    format!("ok: {content}")
                };
                Candidate::new(input.memory.clone(), AgentDecision::say(say))
            });
            return Reply::json(200, response.to_json_string());
        }
        crate::support::handle(Fault::None, &req.method, req.path_only(), &req.body)
    })
}

#[test]
fn replay_reports_no_difference_against_the_same_agent_and_one_against_a_changed_one() {
    let agent = agent_server(Fault::None);
    let dir = TempDir::new("proxy-replay");
    let record = dir.path().join("run.jsonl");
    let proxy = start(&agent.url(), &["--record", record.to_str().unwrap()]);
    let c = client(&proxy.url);
    for content in ["first", "second", "third"] {
        let body = format!(
            r#"{{"request_id":"r-{content}","inputs":[{{"id":1,"instruction":{{"type":"user","content":"{content}"}}}}]}}"#
        );
        let a = c
            .execute(RawRequest::post("/v1/responses").json(body))
            .unwrap();
        assert_eq!(a.status().as_u16(), 200);
    }
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 0, "{log}");
    let record = record.to_str().unwrap();

    let out = run(
        &[
            "replay",
            record,
            "--agent",
            &agent.url(),
            "--format",
            "json",
        ],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let exchanges = report["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 3, "{report:#}");
    assert!(
        exchanges
            .iter()
            .all(|e| e["differences"] == serde_json::json!([]))
    );

    let changed = changed_agent("second");
    let out = run(&["replay", record, "--agent", &changed.url()], b"");
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    let different: Vec<&str> = text.lines().filter(|l| l.contains("different:")).collect();
    assert_eq!(different.len(), 1, "{text}");
    assert!(
        different[0].contains(r#"say "OK: second", recorded "ok: second""#),
        "{text}"
    );
    assert!(
        text.contains("1 different, 0 with contract errors"),
        "{text}"
    );
}

/// HTTPS on both sides: magma-server behind TLS, the proxy listening with
/// TLS (a certificate of the same development CA); answers unchanged.
#[cfg(feature = "tls")]
#[test]
fn https_on_both_sides_passes_answers_unchanged() {
    let server_dir = TempDir::new("proxy-tls");
    let (tls, files) =
        magma_server::TlsConfig::self_signed(server_dir.path(), &["127.0.0.1".to_owned()], None)
            .expect("development certificate");
    let mut config = magma_server::Config::default();
    config.tls = Some(tls);
    let server = RealServer::start_with(config);
    assert!(server.url().starts_with("https://"));
    let ca = files.ca_cert.to_str().unwrap();
    let proxy = start(
        &server.url(),
        &[
            "--cacert",
            ca,
            "--tls-cert",
            files.cert.to_str().unwrap(),
            "--tls-key",
            files.key.to_str().unwrap(),
        ],
    );
    assert!(proxy.url.starts_with("https://"), "{}", proxy.url);
    let tls_client = |url: &str| {
        Client::builder(url)
            .ca_file(files.ca_cert.clone())
            .build()
            .expect("client")
    };
    let calls = |c: &Client| -> Vec<RawResponse> {
        vec![
            c.execute(RawRequest::get("/health")).expect("health"),
            c.execute(RawRequest::get("/v1/info")).expect("info"),
            c.execute(RawRequest::post("/v1/responses").json(REQUEST))
                .expect("responses"),
        ]
    };
    let direct = calls(&tls_client(&server.url()));
    let through = calls(&tls_client(&proxy.url));
    same(&direct, &through);
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 0, "{log}");

    // Without --cacert the upstream is not trusted: a 502 naming TLS.
    let proxy = start(&server.url(), &[]);
    let answer = client(&proxy.url)
        .execute(RawRequest::get("/health"))
        .unwrap();
    assert_eq!(answer.status().as_u16(), 502);
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 1);
    assert!(log.contains("upstream_unreachable"), "{log}");
}

/// GEN's coaching calls through the proxy against the demo coach: session,
/// coaching request, re-injected payloads (a right one, and one wrapped in
/// a `coaching` key, which the proxy flags), close; answers unchanged.
#[test]
fn coaching_calls_and_reinjected_payloads_are_checked() {
    let server = RealServer::start_with(magma_server::Config::default());
    let dir = TempDir::new("proxy-coaching");
    let record = dir.path().join("run.jsonl");
    let proxy = start(&server.url(), &["--record", record.to_str().unwrap()]);
    let coaching = magma_testkit::fixtures::gen_like_coaching_request(3);
    let run_id = serde_json::from_str::<Value>(&coaching).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = format!("/v1/coaching/sessions/{run_id}");
    let config = r#"{"backends":{"coach":{"type":"openai","endpoint":"http://127.0.0.1:9/v1","default_model":"m","headers":{},"timeout":30.0,"max_retry":3}},"capture_logs":true}"#;
    let reinjected = |payload: &str| {
        format!(
            r#"{{"request_id":"r-c","inputs":[{{"id":1,"instruction":{{"type":"user","content":"hi"}},"num_outputs":1,"extra_keys":{{"coaching":{payload}}}}}]}}"#
        )
    };
    let gen_calls = |url: &str| -> Vec<RawResponse> {
        let c = client(url);
        vec![
            c.execute(RawRequest::new(http::Method::PUT, session.clone()).json(config))
                .unwrap(),
            c.execute(RawRequest::post("/v1/coaching").json(coaching.clone()))
                .unwrap(),
            c.execute(
                RawRequest::post("/v1/responses")
                    .json(reinjected(r#"{"kind":"replace_say","text":"fixed"}"#)),
            )
            .unwrap(),
            c.execute(RawRequest::post("/v1/responses").json(reinjected(
                r#"{"coaching":{"kind":"replace_say","text":"fixed"}}"#,
            )))
            .unwrap(),
            c.execute(RawRequest::new(http::Method::DELETE, session.clone()))
                .unwrap(),
        ]
    };
    let through = gen_calls(&proxy.url);
    let direct = gen_calls(&server.url());
    same(&direct, &through);
    assert_eq!(through[0].status().as_u16(), 204);
    assert_eq!(through[1].status().as_u16(), 200);
    let (exit, log) = proxy.stop();
    // A warning (the wrapped payload) does not fail the run.
    assert_eq!(exit, 0, "{log}");
    let flagged: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("[exchange "))
        .collect();
    // The payload that does not read, and what the demo agent made of it:
    // an error candidate saying so.
    assert_eq!(flagged.len(), 2, "{log}");
    assert!(
        flagged[0].contains("reinjected_payload warning reinjected_payload"),
        "{log}"
    );
    assert!(
        flagged[1].contains("response warning error_candidate")
            && flagged[1].contains("invalid CoachingPayload"),
        "{log}"
    );
    let text = std::fs::read_to_string(&record).unwrap();
    // Lines are written as their checks end; the ids give the order of arrival.
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines.sort_by_key(|l| l["id"].as_u64().unwrap());
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "coaching_session",
            "coaching_exchange",
            "exchange",
            "exchange",
            "none"
        ]
    );
}

/// A recording that cannot be written (a full disk) is a proxy fault in
/// the log; the traffic goes on unchanged.
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_for_the_recording_does_not_stop_the_traffic() {
    let server = RealServer::start_with(magma_server::Config::default());
    let proxy = start(&server.url(), &["--record", "/dev/full"]);
    let direct = bench_like(&server.url());
    let through = bench_like(&proxy.url);
    same(&direct, &through);
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 0, "{log}");
    assert!(
        log.contains("proxy fault: cannot write the recording /dev/full"),
        "{log}"
    );
}

/// The limits: a body over `--max-body-bytes` is a 413 that never reaches
/// the agent; a request that finds the memory budget in use for a second
/// is a 503; both with a JSON `detail`, both counted under `proxy`.
#[test]
fn body_limit_and_memory_budget() {
    let agent = agent_server(Fault::HangsOnPost);
    let proxy = start(
        &agent.url(),
        &[
            "--max-body-bytes",
            "1024",
            "--max-total-body-bytes",
            "4096",
            "--timeout",
            "3",
        ],
    );
    let c = client(&proxy.url);
    let big = format!(r#"{{"request_id":"{}","inputs":[]}}"#, "x".repeat(2000));
    let answer = c
        .execute(RawRequest::post("/v1/responses").json(big))
        .unwrap();
    assert_eq!(answer.status().as_u16(), 413);
    let body: Value = serde_json::from_slice(answer.body()).unwrap();
    assert!(body["detail"].as_str().unwrap().contains("1024"), "{body}");
    assert_eq!(
        agent.requests().len(),
        0,
        "a refused body reached the agent"
    );

    // 600 bytes, counted twice, and as much for its answer: the whole
    // budget, held while the agent hangs.
    let held = format!(r#"{{"request_id":"{}","inputs":[]}}"#, "y".repeat(570));
    let url = proxy.url.clone();
    let first = std::thread::spawn(move || {
        client(&url)
            .execute(RawRequest::post("/v1/responses").json(held))
            .map(|a| a.status().as_u16())
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while agent.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first request never arrived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let answer = c
        .execute(RawRequest::post("/v1/responses").json(REQUEST))
        .unwrap();
    assert_eq!(answer.status().as_u16(), 503);
    let body: Value = serde_json::from_slice(answer.body()).unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("memory budget"),
        "{body}"
    );
    // The hung request ends at --timeout with a 504.
    assert_eq!(first.join().unwrap().unwrap(), 504);
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 1, "{log}");
    assert!(log.contains("request_body"), "{log}");
    assert!(log.contains("memory budget"), "{log}");
    assert!(log.contains("upstream_timeout"), "{log}");
}

/// `--metrics-listen`: the counters for Prometheus at `GET /metrics`, on a
/// listener of their own (the agent's paths are all forwarded), as the
/// exchanges are checked; an address that cannot be bound stops the proxy
/// at start-up naming the flag.
#[test]
fn metrics_for_prometheus_count_exchanges_checks_findings_and_latency() {
    let agent = agent_server(Fault::MemoryMissing);
    let mut proxy = start(&agent.url(), &["--metrics-listen", "127.0.0.1:0"]);
    let line = proxy
        .child
        .wait_for_log("metrics at", Duration::from_secs(10));
    let metrics_url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the metrics URL")
        .to_owned();
    let c = client(&proxy.url);
    assert_eq!(c.execute(RawRequest::get("/health")).unwrap().status(), 200);
    // Each answer drops the memory of both its candidates.
    for _ in 0..3 {
        let _ = c.execute(RawRequest::post("/v1/responses").json(REQUEST));
    }
    // /metrics on the proxy's own address is the agent's business.
    let forwarded = c.execute(RawRequest::get("/metrics")).unwrap();
    assert_eq!(forwarded.status().as_u16(), 404);
    let base = metrics_url.trim_end_matches("/metrics").to_owned();
    let m = client(&base);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let answer = m.execute(RawRequest::get("/metrics")).unwrap();
        assert_eq!(answer.status().as_u16(), 200);
        assert!(
            answer
                .headers()
                .get("content-type")
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("text/plain; version=0.0.4"),
            "{:?}",
            answer.headers()
        );
        let text = String::from_utf8(answer.body().to_vec()).unwrap();
        // Counted once checked, just after each answer.
        if text.contains("magma_proxy_exchanges_total 5") {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for line in [
        "magma_proxy_answers_total{status=\"200\"} 4",
        "magma_proxy_answers_total{status=\"404\"} 1",
        "magma_proxy_checks_total{check=\"health\",result=\"passed\"} 1",
        "magma_proxy_checks_total{check=\"response\",result=\"failed\"} 3",
        "magma_proxy_findings_total{check=\"response\",severity=\"error\",code=\"missing\"} 6",
        "magma_proxy_latency_seconds_count 5",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    let not_found = m.execute(RawRequest::get("/v1/info")).unwrap();
    assert_eq!(not_found.status().as_u16(), 404);
    let (exit, _) = proxy.stop();
    assert_eq!(exit, 1);

    let out = run(
        &[
            "proxy",
            "--upstream",
            &agent.url(),
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "256.0.0.1:9",
        ],
        b"",
    );
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--metrics-listen 256.0.0.1:9"), "{err}");
}
