//! Running the real `magma-validate` binary, and agents on 127.0.0.1 (stub
//! servers of the test kit, optionally over TLS): a correct one and
//! deliberately broken ones (one fault each).

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use magma_testkit::stub::{Options, Reply, StubServer};
use magma_validator::magma_protocol::{
    AgentDecision, AgentError, AgentInput, AgentRequest, AgentResponse, Candidate, Json,
    NonEmptyString, Object, ToolCall,
};
use serde_json::Value;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_magma-validate");

/// Runs the binary with `args`, feeding `stdin`.
pub(crate) fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start magma-validate");
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    // Write from another thread: the child may fill stdout before reading all of stdin.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait for magma-validate");
    writer.join().expect("stdin writer");
    out
}

pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One way an agent can be wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    ReversedCandidates,
    MissingCandidate,
    IndexFromOne,
    RequestIdNotEchoed,
    MemoryMissing,
    MemoryNull,
    NanInBody,
    ObjectInsteadOfArray,
    HealthExtraField,
    InfoCoachingSessionVersion,
    InfoProtocol10,
    InfoInferenceFalse,
    OkForInvalidRequests,
    ServerErrorOnEmptyInputs,
    HealthUnavailable,
    SayWithToolCalls,
    EmptyDecision,
    MemoryListDropped,
    TextPlainContentType,
    /// What a stock FastAPI agent does: 500 for NaN (it cannot render its 422).
    NanServerError,
    /// Every candidate is an error (a model provider refusing every call).
    AllErrorCandidates,
    /// `/v1/info` answers 500 (AgentInfo built with a removed field).
    InfoServerError,
    /// Every path answers 401 without `Authorization: Bearer s3cret`.
    RequiresAuthorization,
    /// Each POST /v1/responses takes 300 ms (a model behind it).
    Slow,
    /// Every POST is read and never answered (a hung model behind it).
    HangsOnPost,
}

impl Fault {
    /// Every fault, in declaration order (the tests that go through all of
    /// them match on each, so a new one does not compile until it has its case).
    pub(crate) const ALL: [Fault; 26] = [
        Fault::None,
        Fault::ReversedCandidates,
        Fault::MissingCandidate,
        Fault::IndexFromOne,
        Fault::RequestIdNotEchoed,
        Fault::MemoryMissing,
        Fault::MemoryNull,
        Fault::NanInBody,
        Fault::ObjectInsteadOfArray,
        Fault::HealthExtraField,
        Fault::InfoCoachingSessionVersion,
        Fault::InfoProtocol10,
        Fault::InfoInferenceFalse,
        Fault::OkForInvalidRequests,
        Fault::ServerErrorOnEmptyInputs,
        Fault::HealthUnavailable,
        Fault::SayWithToolCalls,
        Fault::EmptyDecision,
        Fault::MemoryListDropped,
        Fault::TextPlainContentType,
        Fault::NanServerError,
        Fault::AllErrorCandidates,
        Fault::InfoServerError,
        Fault::RequiresAuthorization,
        Fault::Slow,
        Fault::HangsOnPost,
    ];
}

/// The header `Fault::RequiresAuthorization` wants.
pub(crate) const AUTHORIZATION: &str = "Bearer s3cret";

/// `extra_keys.inference_mode` is `true`.
pub(crate) fn inference_mode(input: &AgentInput) -> bool {
    input.extra_keys.get("inference_mode") == Some(&Json::Bool(true))
}

/// The longest `extra_keys.delay_ms` of a request body's inputs.
pub(crate) fn delay_ms(body: &[u8]) -> Option<Duration> {
    let request = AgentRequest::from_slice(body).ok()?;
    request
        .inputs()
        .iter()
        .filter_map(|i| {
            i.extra_keys
                .get("delay_ms")
                .and_then(|d| d.as_number()?.as_u64())
        })
        .max()
        .map(Duration::from_millis)
}

fn first_tool(input: &AgentInput) -> String {
    input
        .tool_names()
        .into_iter()
        .next()
        .unwrap_or_else(|| "cancel_current_action".to_owned())
}

fn decision(fault: Fault, input: &AgentInput, k: u64) -> AgentDecision {
    match fault {
        Fault::EmptyDecision => AgentDecision::default(),
        Fault::SayWithToolCalls => {
            let robot = input
                .known_robots()
                .first()
                .copied()
                .unwrap_or("panda")
                .to_owned();
            AgentDecision {
                say: "On it!".to_owned(),
                tool_calls: vec![ToolCall {
                    name: NonEmptyString::new(first_tool(input)).unwrap(),
                    arguments: Object::new(),
                    target_robot_name: NonEmptyString::new(robot).unwrap(),
                }],
            }
        }
        // Branches sample (a model would), unless inference_mode is true.
        _ if k > 0 && !inference_mode(input) => {
            AgentDecision::say(format!("ok: {} (branch {k})", input.instruction.content))
        }
        _ => AgentDecision::say(format!("ok: {}", input.instruction.content)),
    }
}

fn responses(fault: Fault, body: &[u8]) -> Reply {
    let request = match AgentRequest::from_slice(body) {
        Ok(r) => r,
        Err(_) if fault == Fault::OkForInvalidRequests => return Reply::json(200, "[]"),
        Err(_)
            if fault == Fault::NanServerError && String::from_utf8_lossy(body).contains("NaN") =>
        {
            return Reply::json(500, "Internal Server Error")
                .content_type("text/plain; charset=utf-8");
        }
        Err(e) => return Reply::json(422, e.to_fastapi_body().to_json_string()),
    };
    if request.inputs().is_empty() && fault == Fault::ServerErrorOnEmptyInputs {
        return Reply::json(500, "Internal Server Error").content_type("text/plain");
    }
    let response = AgentResponse::build(&request, |input, k| {
        if fault == Fault::AllErrorCandidates {
            let code = if k == 0 {
                "upstream_401"
            } else {
                "invalid_output"
            };
            return Candidate::new(
                input.memory.clone(),
                AgentError::new(code, "the model provider refused the call"),
            );
        }
        Candidate::new(input.memory.clone(), decision(fault, input, k))
    });
    let mut v: Value = serde_json::from_str(&response.to_json_string()).unwrap();
    let items = v.as_array_mut().unwrap();
    match fault {
        Fault::ReversedCandidates => items.reverse(),
        Fault::MissingCandidate => {
            items.pop();
        }
        Fault::IndexFromOne => {
            for c in items.iter_mut() {
                c["candidate_index"] = Value::from(c["candidate_index"].as_u64().unwrap() + 1);
            }
        }
        Fault::RequestIdNotEchoed => {
            for c in items.iter_mut() {
                c["request_id"] = Value::from("agent-made-this-up");
            }
        }
        Fault::MemoryMissing => {
            for c in items.iter_mut() {
                c.as_object_mut().unwrap().remove("memory");
            }
        }
        Fault::MemoryNull => {
            for c in items.iter_mut() {
                c["memory"] = Value::Null;
            }
        }
        Fault::NanInBody => {
            for c in items.iter_mut() {
                c["memory"]["score"] = Value::from("__NAN__");
            }
        }
        Fault::MemoryListDropped => {
            for c in items.iter_mut() {
                c["memory"].as_object_mut().unwrap().remove("memory_list");
            }
        }
        _ => {}
    }
    if fault == Fault::ObjectInsteadOfArray {
        v = items
            .first()
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
    }
    let text = serde_json::to_string(&v)
        .unwrap()
        .replace("\"__NAN__\"", "NaN");
    Reply::json(200, text)
}

fn info(fault: Fault) -> String {
    let mut info = serde_json::json!({
        "protocol_version": "2.0",
        "agent_id": "fake-agent",
        "agent_version": "0.0.1",
        "specialized_coaching": [],
        "coaching_resume": false,
        "coaching_unavailable_reason": null,
        "capabilities": {"inference": true, "coaching": false}
    });
    match fault {
        Fault::InfoCoachingSessionVersion => info["coaching_session_version"] = Value::from("1"),
        Fault::InfoProtocol10 => info["protocol_version"] = Value::from("1.0"),
        Fault::InfoInferenceFalse => info["capabilities"]["inference"] = Value::from(false),
        _ => {}
    }
    info.to_string()
}

pub(crate) fn handle(fault: Fault, method: &str, path: &str, body: &[u8]) -> Reply {
    let mut reply = match (method, path) {
        ("GET", "/v1/info") if fault == Fault::InfoServerError => {
            Reply::json(500, "Internal Server Error").content_type("text/plain; charset=utf-8")
        }
        ("GET", "/health") => match fault {
            Fault::HealthUnavailable => Reply::json(503, r#"{"detail":"Models are not ready"}"#),
            Fault::HealthExtraField => Reply::json(200, r#"{"status":"ready","uptime_s":12}"#),
            _ => Reply::json(200, r#"{"status":"ready"}"#),
        },
        ("GET", "/v1/info") => Reply::json(200, info(fault)),
        ("POST", "/v1/responses") => responses(fault, body),
        (_, "/health" | "/v1/info") => {
            Reply::json(405, r#"{"detail":"Method Not Allowed"}"#).header("allow", "GET")
        }
        (_, "/v1/responses") => {
            Reply::json(405, r#"{"detail":"Method Not Allowed"}"#).header("allow", "POST")
        }
        _ => Reply::json(404, r#"{"detail":"Not Found"}"#),
    };
    if fault == Fault::TextPlainContentType {
        reply = reply.content_type("text/plain; charset=utf-8");
    }
    reply
}

/// An agent with `fault` on 127.0.0.1 (a stub server of the test kit).
pub(crate) fn agent_server(fault: Fault) -> StubServer {
    agent_server_with(fault, None)
}

/// [`agent_server`], over TLS when `tls` is given.
pub(crate) fn agent_server_with(
    fault: Fault,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> StubServer {
    let options = Options {
        tls,
        ..Options::default()
    };
    StubServer::start_with(options, move |req| {
        let authorized = req.header("authorization") == Some(AUTHORIZATION);
        if fault == Fault::RequiresAuthorization && !authorized {
            return Reply::json(401, r#"{"detail":"Not authenticated"}"#);
        }
        let reply = handle(fault, &req.method, req.path_only(), &req.body);
        match fault {
            Fault::Slow if req.method == "POST" => reply.after(Duration::from_millis(300)),
            // Longer than any test runs: the stub server drops it on stop.
            Fault::HangsOnPost if req.method == "POST" => reply.after(Duration::from_secs(3600)),
            // A model's latency on request (`extra_keys.delay_ms`), as the
            // demo agent imitates it: the concurrency checks measure that.
            _ if req.method == "POST" => match delay_ms(&req.body) {
                Some(delay) => reply.after(delay),
                None => reply,
            },
            _ => reply,
        }
    })
}

/// Runs `magma-validate probe URL --format json` with short timeouts; returns
/// the exit code and the parsed report (`Null` when nothing was printed).
pub(crate) fn probe(url: &str, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec![
        "probe",
        url,
        "--format",
        "json",
        "--timeout",
        "10",
        "--ready-timeout",
        "0.5",
    ];
    args.extend_from_slice(extra);
    let out = run(&args, b"");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (code(&out), report, stderr(&out))
}

/// The check named `name` of a probe report.
pub(crate) fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name} in {report:#}"))
}

/// `(code, location, message)` of a check's findings.
pub(crate) fn findings(check: &Value) -> Vec<(String, String, String)> {
    check["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["code"].as_str().unwrap_or_default().to_owned(),
                f["location"].as_str().unwrap_or_default().to_owned(),
                f["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}
