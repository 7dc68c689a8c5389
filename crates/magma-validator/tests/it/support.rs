//! Running the real `magma-validate` binary, and agent servers on
//! 127.0.0.1: a correct one and deliberately broken ones (one fault each),
//! written directly on hyper, optionally over TLS.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use magma_validator::magma_protocol::{
    AgentDecision, AgentError, AgentInput, AgentRequest, AgentResponse, Candidate, NonEmptyString,
    Object, ToolCall,
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

/// A file in a fresh temporary directory, removed with the directory when
/// dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "magma-validator-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub(crate) fn path(&self) -> &std::path::Path {
        &self.0
    }

    pub(crate) fn file(&self, name: &str, contents: &[u8]) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write temp file");
        path.display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

/// The header `Fault::RequiresAuthorization` wants.
pub(crate) const AUTHORIZATION: &str = "Bearer s3cret";

struct Reply {
    status: u16,
    content_type: &'static str,
    body: String,
    allow: Option<&'static str>,
}

impl Reply {
    fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: body.into(),
            allow: None,
        }
    }
}

fn first_tool(input: &AgentInput) -> String {
    input
        .tool_names()
        .into_iter()
        .next()
        .unwrap_or_else(|| "cancel_current_action".to_owned())
}

fn decision(fault: Fault, input: &AgentInput) -> AgentDecision {
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
            return Reply {
                status: 500,
                content_type: "text/plain; charset=utf-8",
                body: "Internal Server Error".to_owned(),
                allow: None,
            };
        }
        Err(e) => return Reply::json(422, e.to_fastapi_body().to_json_string()),
    };
    if request.inputs().is_empty() && fault == Fault::ServerErrorOnEmptyInputs {
        return Reply {
            status: 500,
            content_type: "text/plain",
            body: "Internal Server Error".to_owned(),
            allow: None,
        };
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
        Candidate::new(input.memory.clone(), decision(fault, input))
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

fn handle(fault: Fault, method: &Method, path: &str, body: &[u8]) -> Reply {
    let mut reply = match (method, path) {
        (&Method::GET, "/v1/info") if fault == Fault::InfoServerError => Reply {
            status: 500,
            content_type: "text/plain; charset=utf-8",
            body: "Internal Server Error".to_owned(),
            allow: None,
        },
        (&Method::GET, "/health") => match fault {
            Fault::HealthUnavailable => Reply::json(503, r#"{"detail":"Models are not ready"}"#),
            Fault::HealthExtraField => Reply::json(200, r#"{"status":"ready","uptime_s":12}"#),
            _ => Reply::json(200, r#"{"status":"ready"}"#),
        },
        (&Method::GET, "/v1/info") => Reply::json(200, info(fault)),
        (&Method::POST, "/v1/responses") => responses(fault, body),
        (_, "/health" | "/v1/info") => Reply {
            allow: Some("GET"),
            ..Reply::json(405, r#"{"detail":"Method Not Allowed"}"#)
        },
        (_, "/v1/responses") => Reply {
            allow: Some("POST"),
            ..Reply::json(405, r#"{"detail":"Method Not Allowed"}"#)
        },
        _ => Reply::json(404, r#"{"detail":"Not Found"}"#),
    };
    if fault == Fault::TextPlainContentType {
        reply.content_type = "text/plain; charset=utf-8";
    }
    reply
}

/// A server on 127.0.0.1 with its own thread and runtime; stopped on drop.
pub(crate) struct AgentServer {
    pub(crate) addr: SocketAddr,
    https: bool,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl AgentServer {
    pub(crate) fn start(fault: Fault) -> AgentServer {
        AgentServer::start_with(fault, None)
    }

    pub(crate) fn start_with(fault: Fault, tls: Option<Arc<rustls::ServerConfig>>) -> AgentServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let https = tls.is_some();
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    let stream = tokio::select! {
                        _ = &mut stop_rx => break,
                        accepted = listener.accept() => match accepted {
                            Ok((s, _)) => s,
                            Err(_) => continue,
                        },
                    };
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let service =
                            service_fn(move |req: Request<hyper::body::Incoming>| async move {
                                let (parts, body) = req.into_parts();
                                let body = body
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let authorized = parts
                                    .headers
                                    .get("authorization")
                                    .is_some_and(|v| v == AUTHORIZATION);
                                let reply = if fault == Fault::RequiresAuthorization && !authorized
                                {
                                    Reply::json(401, r#"{"detail":"Not authenticated"}"#)
                                } else {
                                    if fault == Fault::HangsOnPost && parts.method == Method::POST {
                                        std::future::pending::<()>().await;
                                    }
                                    if fault == Fault::Slow && parts.method == Method::POST {
                                        tokio::time::sleep(std::time::Duration::from_millis(300))
                                            .await;
                                    }
                                    handle(fault, &parts.method, parts.uri.path(), &body)
                                };
                                let mut builder = Response::builder()
                                    .status(StatusCode::from_u16(reply.status).unwrap())
                                    .header("content-type", reply.content_type);
                                if let Some(allow) = reply.allow {
                                    builder = builder.header("allow", allow);
                                }
                                Ok::<_, Infallible>(
                                    builder.body(Full::new(Bytes::from(reply.body))).unwrap(),
                                )
                            });
                        let http = hyper::server::conn::http1::Builder::new();
                        match acceptor {
                            Some(acceptor) => {
                                if let Ok(tls) = acceptor.accept(stream).await {
                                    let _ = http.serve_connection(TokioIo::new(tls), service).await;
                                }
                            }
                            None => {
                                let _ = http.serve_connection(TokioIo::new(stream), service).await;
                            }
                        }
                    });
                }
            });
        });
        AgentServer {
            addr,
            https,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }
}

impl Drop for AgentServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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
