//! The `llm-agent` binary, served on loopback next to an OpenAI-compatible
//! provider written in the test (`fake.rs`), called with magma-client and
//! probed with magma-validate's suite.

mod coach;
mod fake;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake::FakeProvider;
use magma_client::Client;
use magma_server::{AgentRequest, AgentResponse, Json, Object};

const BIN: &str = env!("CARGO_BIN_EXE_llm-agent");

/// A running `llm-agent` with its standard error collected.
struct AgentProcess {
    child: Child,
    url: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl AgentProcess {
    /// Starts the agent against `provider` with extra flags; waits until it
    /// listens (not until it is ready).
    fn start(provider: &FakeProvider, extra: &[&str]) -> AgentProcess {
        let mut cmd = Command::new(BIN);
        if !extra.contains(&"--max-retries") {
            cmd.args(["--max-retries", "0"]);
        }
        cmd.args(["--listen", "127.0.0.1:0", "--model", "fake-model"])
            .args(["--base-url", &provider.base_url()])
            .args(["--retry-backoff-ms", "10"])
            .args(extra)
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_MODEL")
            .env_remove("OPENAI_API_KEY")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn llm-agent");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let mut agent = AgentProcess {
            child,
            url: String::new(),
            log,
        };
        let line = agent.wait_for_log("listening on ");
        let url = line.split("listening on ").nth(1).unwrap();
        agent.url = url.split_whitespace().next().unwrap().to_owned();
        agent
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn wait_for_log(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(l) = self.log.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "llm-agent exited ({status}) before {needle:?}:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in 30 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn client(&self) -> Client {
        Client::builder(&self.url)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    }

    /// A ready agent's client.
    fn ready_client(&self) -> Client {
        let client = self.client();
        client
            .wait_ready(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("not ready: {e}\n{}", self.log()));
        client
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn request(text: &str) -> AgentRequest {
    AgentRequest::from_slice(text.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A one-input request with the given instruction, tools for robots `r1`
/// and `r2`, standing rules and a history of one exchange.
fn robot_request(
    kind: &str,
    content: &str,
    num_outputs: u64,
    inference_mode: bool,
) -> AgentRequest {
    let input = serde_json_free_input(kind, content, num_outputs, inference_mode);
    request(&format!(r#"{{"request_id": "t", "inputs": [{input}]}}"#))
}

fn serde_json_free_input(
    kind: &str,
    content: &str,
    num_outputs: u64,
    inference_mode: bool,
) -> String {
    let content = Json::from(content).to_json_string();
    format!(
        r#"{{"id": 1, "instruction": {{"type": "{kind}", "content": {content}}},
            "tools": [{{"name": "press_button", "description": "Press a button.",
                        "arguments": {{"id": {{"type": "str", "description": "Button."}}}}}}],
            "attributes": {{"known_robots": ["r1", "r2"], "robot_statuses": {{"r1": "FREE", "r2": "FREE"}}}},
            "memory": {{"memory_list": ["Never press sw9."], "steps": 1.0,
                        "history": [{{"author": "USER", "content": "Hi."}},
                                    {{"author": "MODEL", "content": "{{\"say\": \"Hello.\", \"action\": {{}}}}"}}]}},
            "num_outputs": {num_outputs},
            "extra_keys": {{"inference_mode": {inference_mode}}}}}"#
    )
}

fn memory_history(memory: &Object) -> Vec<Json> {
    memory
        .get("history")
        .and_then(Json::as_array)
        .expect("history")
        .to_vec()
}

fn step(r: &AgentResponse, i: usize) -> &Object {
    r.candidates()[i]
        .internal_steps
        .first()
        .expect("an internal step")
}

#[test]
fn version_and_help_name_the_agent_and_the_build() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    assert!(
        version.starts_with(&format!("llm-agent {} (", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert!(version.contains("features: cli, tls"), "{version}");
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--base-url",
        "--model",
        "--api-key",
        "OPENAI_BASE_URL",
        "--listen",
        "--tls-cert",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
}

#[test]
fn text_tool_calls_several_robots_rules_history_and_decoding() {
    let provider = FakeProvider::start(true);
    let agent = AgentProcess::start(&provider, &["--api-key", "sk-test", "--temperature", "0.5"]);
    let client = agent.ready_client();

    // A tool call; memory kept with two history entries appended.
    let req = robot_request("user", "Say hi.", 1, true);
    let r = client.respond(&req).unwrap();
    let c = &r.candidates()[0];
    let decision = c.outcome.decision().expect("completed");
    // Tools were offered: the fake provider calls the first one on the
    // first robot, `target_robot` is taken out of the arguments.
    assert_eq!(decision.say, "");
    assert_eq!(decision.tool_calls.len(), 1);
    let call = &decision.tool_calls[0];
    assert_eq!(
        (call.target_robot_name.as_str(), call.name.as_str()),
        ("r1", "press_button")
    );
    assert!(call.arguments.is_empty());
    assert_eq!(c.memory.get("steps").unwrap().to_json_string(), "1.0");
    assert_eq!(
        c.memory.get("memory_list").unwrap().to_json_string(),
        r#"["Never press sw9."]"#
    );
    let history = memory_history(&c.memory);
    assert_eq!(history.len(), 4);
    assert_eq!(
        history[2].to_json_string(),
        r#"{"author":"USER","content":"Say hi."}"#
    );
    assert_eq!(
        history[3].get("author").and_then(Json::as_str),
        Some("MODEL")
    );

    // What the provider was sent: rules and robots in the system message,
    // the history as messages, the tool with target_robot limited to the
    // known robots, deterministic decoding, the API key.
    let sent = provider.payloads().pop().unwrap();
    assert_eq!(sent.get("model").and_then(Json::as_str), Some("fake-model"));
    assert_eq!(sent.get("temperature").unwrap().to_json_string(), "0");
    assert_eq!(sent.get("seed").unwrap().to_json_string(), "0");
    let messages = sent.get("messages").and_then(Json::as_array).unwrap();
    let system = messages[0].get("content").and_then(Json::as_str).unwrap();
    assert!(system.contains("Never press sw9."), "{system}");
    assert!(system.contains("Robots: r1, r2."), "{system}");
    assert!(system.contains("- r1: FREE"), "{system}");
    let roles: Vec<&str> = messages
        .iter()
        .filter_map(|m| m.get("role").and_then(Json::as_str))
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(
        messages[3].get("content").and_then(Json::as_str),
        Some("Say hi.")
    );
    let tool = &sent.get("tools").and_then(Json::as_array).unwrap()[0];
    assert_eq!(
        tool.get("function")
            .unwrap()
            .get("parameters")
            .unwrap()
            .to_json_string(),
        r#"{"type":"object","properties":{"id":{"type":"string","description":"Button."},"target_robot":{"type":"string","description":"The robot that runs this tool.","enum":["r1","r2"]}},"required":["id","target_robot"]}"#
    );
    assert_eq!(
        provider
            .state
            .authorizations
            .lock()
            .unwrap()
            .last()
            .unwrap(),
        "Bearer sk-test"
    );

    // Sampling when inference_mode is false; one provider call per candidate.
    let before = provider.payloads().len();
    let r = client
        .respond(&robot_request("user", "#slow answer in text", 3, false))
        .unwrap();
    assert_eq!(provider.payloads().len(), before + 3);
    for (k, c) in r.candidates().iter().enumerate() {
        assert_eq!(c.outcome.decision().unwrap().say, "done slowly");
        assert_eq!(
            step(&r, k).get("id").and_then(Json::as_str),
            Some(&*format!("llm-{k}"))
        );
    }
    let sent = provider.payloads().pop().unwrap();
    assert_eq!(sent.get("temperature").unwrap().to_json_string(), "0.5");
    assert!(sent.get("seed").is_none());

    // Several robots: one call per robot, target_robot taken out of the
    // arguments; text and calls together are kept.
    let r = client
        .respond(&robot_request("env", "#both robots, please", 1, true))
        .unwrap();
    let decision = r.candidates()[0].outcome.decision().unwrap();
    assert_eq!(decision.say, "On it.");
    let calls: Vec<(String, String, String)> = decision
        .tool_calls
        .iter()
        .map(|t| {
            (
                t.target_robot_name.to_string(),
                t.name.to_string(),
                Json::Object(t.arguments.clone()).to_json_string(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("r1".into(), "press_button".into(), r#"{"id":"sw0"}"#.into()),
            ("r2".into(), "press_button".into(), r#"{"id":"sw0"}"#.into()),
        ]
    );
    // An env instruction is recorded as SYSTEM, the answer's action by robot.
    let history = memory_history(&r.candidates()[0].memory);
    assert_eq!(
        history[2].get("author").and_then(Json::as_str),
        Some("SYSTEM")
    );
    assert_eq!(
        history[3].get("content").and_then(Json::as_str),
        Some(
            r#"{"say":"On it.","action":{"r1":{"name":"press_button","arguments":{"id":"sw0"}},"r2":{"name":"press_button","arguments":{"id":"sw0"}}}}"#
        )
    );
    let sent = provider.payloads().pop().unwrap();
    let last = sent
        .get("messages")
        .and_then(Json::as_array)
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last.get("content").and_then(Json::as_str),
        Some("Environment feedback: #both robots, please")
    );
}

#[test]
fn provider_failures_and_malformed_output_become_error_candidates() {
    let provider = FakeProvider::start(true);
    let agent = AgentProcess::start(&provider, &[]);
    let client = agent.ready_client();
    for (marker, code, in_message) in [
        ("#429", "rate_limited", "429"),
        ("#500", "provider_status", "500"),
        ("#hangup", "transport_error", ""),
        ("#garbage", "invalid_response", "not JSON"),
        ("#badargs", "invalid_output", "not JSON"),
        ("#ghost", "invalid_output", "not one of the input's tools"),
        ("#stranger", "invalid_output", "not among the known robots"),
        ("#empty", "invalid_output", "neither text nor a tool call"),
    ] {
        let req = robot_request("user", marker, 2, true);
        let r = client
            .respond(&req)
            .unwrap_or_else(|e| panic!("{marker}: {e}"));
        for (k, c) in r.candidates().iter().enumerate() {
            let error = c
                .outcome
                .error()
                .unwrap_or_else(|| panic!("{marker}: not an error candidate: {c:?}"));
            assert_eq!(
                error.code.as_str(),
                code,
                "{marker}: {}",
                error.message.as_str()
            );
            assert!(
                error.message.contains(in_message),
                "{marker}: {}",
                error.message.as_str()
            );
            assert_eq!(error.component.as_deref(), Some("llm"));
            // The input's memory, unchanged.
            assert_eq!(c.memory, req.inputs()[0].memory, "{marker}");
            let step = step(&r, k);
            assert_eq!(
                step.get("error")
                    .and_then(|e| e.get("code"))
                    .and_then(Json::as_str),
                Some(code)
            );
            let prompt = step.get("full_prompt").and_then(Json::as_str).unwrap();
            assert!(prompt.contains(marker), "{marker}: {prompt}");
            if marker == "#garbage" {
                assert_eq!(
                    step.get("output_raw").and_then(Json::as_str),
                    Some("this is not json")
                );
            }
        }
    }
    // The server is unharmed and agent-specific problems are a 422.
    let bad = request(
        r#"{"request_id": "b", "inputs": [{"id": 0, "instruction": {"type": "user", "content": "x"},
            "memory": {"history": "not a list"}}]}"#,
    );
    let e = client.respond(&bad).unwrap_err();
    assert!(
        e.to_string()
            .contains("memory.history must be a list of objects"),
        "{e}"
    );
}

#[test]
fn retries_reach_the_provider_again_before_giving_up() {
    let provider = FakeProvider::start(true);
    let agent = AgentProcess::start(&provider, &["--max-retries", "2"]);
    let client = agent.ready_client();
    let before = provider.payloads().len();
    let r = client
        .respond(&robot_request("user", "#500", 1, true))
        .unwrap();
    assert_eq!(
        provider.payloads().len(),
        before + 3,
        "one call and two retries"
    );
    assert_eq!(step(&r, 0).get("attempts").unwrap().to_json_string(), "3");
    assert_eq!(
        step(&r, 0).get("http_status").unwrap().to_json_string(),
        "500"
    );
}

#[test]
fn provider_calls_are_bounded_by_the_concurrency_flag() {
    let provider = FakeProvider::start(true);
    let agent = AgentProcess::start(&provider, &["--concurrency", "2"]);
    let client = agent.ready_client();
    let started = Instant::now();
    let r = client
        .respond(&robot_request("user", "#slow", 6, false))
        .unwrap();
    assert_eq!(r.candidates().len(), 6);
    assert_eq!(provider.state.max_in_flight.load(Ordering::SeqCst), 2);
    // Six calls of 300 ms, two at a time: three rounds at least.
    assert!(
        started.elapsed() >= Duration::from_millis(850),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn health_answers_503_until_the_provider_answers_then_the_probe_passes() {
    let provider = FakeProvider::start(false);
    let agent = AgentProcess::start(&provider, &[]);
    let client = agent.client();
    // /v1/info answers at once; /health says 503 while the provider is silent.
    assert_eq!(client.info().unwrap().agent_id, "llm-agent");
    std::thread::sleep(Duration::from_millis(300));
    let e = client.health().unwrap_err();
    assert!(e.is_not_ready(), "{e}");
    assert!(e.to_string().contains("Models are not ready"), "{e}");
    provider.open_models();
    client.wait_ready(Duration::from_secs(30)).unwrap();

    // `#slow` makes the fake provider think 300 ms: the concurrency checks
    // have something to measure.
    let slow = magma_validator::probe::parse_slow_input(
        r##"{"id": 0, "instruction": {"type": "user", "content": "#slow"}}"##,
    )
    .unwrap();
    let config = magma_validator::probe::ProbeConfig::new(&agent.url).slow_input(slow);
    let report = magma_validator::probe::run(&config).expect("the probe runs");
    let failed: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status.as_str() == "fail")
        .map(|c| format!("{}: {}", c.name, c.reason))
        .collect();
    assert!(report.is_conformant(), "probe failures: {failed:#?}");
    assert!(report.summary.passed > 10, "{:?}", report.summary);
    // The behaviour checks pass: no hidden state, sampled branches,
    // deterministic inference_mode, served side by side.
    for name in [
        "state/hidden",
        "branches/identical",
        "concurrency/health-while-busy",
        "concurrency/parallel",
        "concurrency/memory-isolation",
    ] {
        let c = report.check(name).unwrap();
        assert_eq!(c.status.as_str(), "pass", "{c:#?}");
    }
}

#[test]
fn a_refused_api_key_stops_the_agent_with_status_1() {
    let provider = FakeProvider::start(true);
    *provider.state.models_status.lock().unwrap() = 401;
    let mut agent = AgentProcess::start(&provider, &["--api-key", "wrong"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = agent.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running:\n{}", agent.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1), "{}", agent.log());
    let log = agent.log();
    assert!(
        log.contains("start-up failed: the provider refused the API key (401"),
        "{log}"
    );
}

/// The operator is told when the provider goes down: the agent still answers
/// 200 with error candidates, and its log has a warning naming the code and
/// the provider's address (the one that refused) from the first request;
/// `/metrics` counts the error candidates by code.
#[test]
fn a_provider_that_goes_down_is_a_warning_with_its_address_and_a_metric() {
    let provider = FakeProvider::start(true);
    let base_url = provider.base_url();
    let address = format!("127.0.0.1:{}", provider.port);
    let mut agent = AgentProcess::start(&provider, &["--metrics"]);
    let client = agent.ready_client();
    drop(provider); // nothing listens there any more
    let r = client
        .respond(&robot_request("user", "hello", 2, true))
        .unwrap();
    for c in r.candidates() {
        let error = c.outcome.error().expect("an error candidate");
        assert_eq!(error.code.as_str(), "transport_error");
        assert!(
            error.message.contains(&format!(
                "connection refused (is the server at {address} running?)"
            )),
            "{}",
            error.message.as_str()
        );
        assert!(
            error.message.contains(&base_url),
            "{}",
            error.message.as_str()
        );
    }
    let line = agent.wait_for_log("error candidates:");
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("code=\"transport_error\""), "{line}");
    assert!(line.contains("count=2"), "{line}");
    assert!(line.contains(&base_url), "{line}");
    let metrics = client
        .execute(magma_client::RawRequest::get("/metrics"))
        .unwrap();
    let text = String::from_utf8_lossy(metrics.body());
    assert!(
        text.lines()
            .any(|l| l == r#"magma_error_candidates_total{code="transport_error"} 2"#),
        "{text}"
    );
}
