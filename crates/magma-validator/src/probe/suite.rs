//! The checks, in the order they run.

use std::time::{Duration, Instant};

use magma_client::RawRequest;
use magma_client::http::header::ALLOW;
use magma_client::http::{Method, StatusCode};
use magma_protocol::{
    AgentHealth, AgentInfo, AgentInstruction, AgentRequest, AgentResponse, Json, Object, Outcome,
};

use super::requests::{self, ROBOT};
use super::session::{
    Session, as_error, body_excerpt, content_type_finding, push_capped, transport_finding,
};
use super::{AgentIdentity, Check, CheckResult, ProbeConfig, ProbeError, ProbeReport};
use crate::check::issue_findings;
use crate::report::Finding;
use crate::{DocumentKind, lint};

const HEALTH_IMPACT: &str = "BENCH calls GET /health once at start-up and aborts on anything \
     but 2xx with a valid AgentHealth (it does not wait); GEN does not call /health";
const INFO_STATUS_IMPACT: &str = "BENCH and GEN call GET /v1/info at start-up: a non-2xx \
     answer stops both (GEN: RuntimeError with the body)";
const EMPTY_IMPACT: &str = "the contract accepts an empty batch and expects []: a client \
     with nothing waiting that sends one gets a failure, fatal for the run in BENCH and GEN";
const INVALID_2XX_IMPACT: &str = "the contract requires 422 for an invalid request: an agent \
     that answers 2xx guesses what a broken client meant, so the client's bug goes unnoticed \
     and its episode continues on made-up input";
const INVALID_5XX_IMPACT: &str = "a 5xx says the agent crashed: the client (GEN appends the \
     body to its error) is told the agent failed instead of what is wrong with its request";
const NOT_422_IMPACT: &str = "any 4xx stops the client, but 422 with {\"detail\": ...} is \
     what FastAPI agents and magma-server send, and what clients display";
const UNKNOWN_PATH_IMPACT: &str = "a consumer with a wrong base URL or path prefix must get an \
     error; an agent that answers 2xx on any path hides the misconfiguration";
const METHOD_IMPACT: &str = "405 with an Allow header tells a client it used the wrong \
     method; anything else hides the mistake or reports it as an agent crash";

const READY_PAUSE_MAX: Duration = Duration::from_millis(500);

pub(super) fn run(config: &ProbeConfig) -> Result<ProbeReport, ProbeError> {
    let mut s = Session::new(config)?;
    let mut checks = Vec::new();
    let (first, ready) = health(&mut s, "health", true)?;
    checks.push(first);
    let (info, agent) = info(&mut s);
    checks.push(info);

    type Step = fn(&mut Session) -> CheckResult;
    let inference: [(&str, &'static str, Step); 9] = [
        (
            "empty-inputs",
            "inputs: [] is answered 200 []",
            empty_inputs,
        ),
        (
            "ordering",
            "the docs' ordering example: ids 7 (2 candidates) and 3 (1)",
            ordering,
        ),
        (
            "bench-batch",
            "a BENCH-like batch: several inputs, inference_mode, tools",
            bench_batch,
        ),
        (
            "gen-batch",
            "a GEN-like batch: 2 to 4 branches per input",
            gen_batch,
        ),
        (
            "env-feedback",
            "an env instruction with a JSON status and the previous memory",
            env_feedback,
        ),
        (
            "memory-round-trip",
            "memory sent back over several steps",
            memory_round_trip,
        ),
        (
            "unicode",
            "non-ASCII text, raw UTF-8 and \\u escapes",
            unicode,
        ),
        (
            "large-request",
            "a request with a large memory",
            large_request,
        ),
        (
            "content-type-missing",
            "a POST without Content-Type (as some clients send)",
            no_content_type,
        ),
    ];
    for (name, title, step) in inference {
        if ready {
            checks.push(step(&mut s));
        } else {
            checks.push(Check::new(name, title).skip("skipped: GET /health never answered ready"));
        }
    }
    for (name, what, body) in requests::invalid_bodies() {
        checks.push(invalid_request(&mut s, name, what, body));
    }
    checks.push(unknown_path(&mut s));
    checks.push(wrong_method(&mut s));
    checks.push(health(&mut s, "health-after", false)?.0);
    checks.push(content_types(&s));
    Ok(ProbeReport::new(s.base_url().to_owned(), agent, checks))
}

/// `GET /health`; with `wait`, keeps trying while nothing listens or the
/// agent answers 503, up to the ready timeout.
fn health(s: &mut Session, name: &str, wait: bool) -> Result<(CheckResult, bool), ProbeError> {
    let mut check = Check::new(
        name,
        if wait {
            "GET /health answers 200 {\"status\":\"ready\"}"
        } else {
            "still healthy after the suite"
        },
    );
    let started = Instant::now();
    let deadline = started
        + if wait {
            s.config.ready_timeout
        } else {
            Duration::ZERO
        };
    let mut pause = Duration::from_millis(50);
    let mut attempts = 0u32;
    let answer = loop {
        attempts += 1;
        let now = Instant::now();
        match s.get("/health") {
            Err(e) if wait && matches!(e.kind(), magma_client::ErrorKind::Tls(_)) => {
                let why = match e.kind() {
                    // The client's advice names its own API; the probe's error gives the flag.
                    magma_client::ErrorKind::Tls(why) => why
                        .split("; trust the CA with")
                        .next()
                        .unwrap_or(why)
                        .to_owned(),
                    _ => e.to_string(),
                };
                return Err(ProbeError::Tls(why));
            }
            Err(e) if wait && matches!(e.kind(), magma_client::ErrorKind::Transport) => {
                // Connected, but no HTTP answer at all: nothing can be checked.
                let hint = if s.base_url().starts_with("http://") {
                    " (if the agent serves HTTPS, use an https:// URL)"
                } else {
                    ""
                };
                return Err(ProbeError::Unreachable(format!(
                    "no HTTP answer: {e}{hint}"
                )));
            }
            Err(e) if wait && e.is_connect() => {
                if now >= deadline {
                    return Err(ProbeError::Unreachable(format!(
                        "{e} (tried for {:.1} s; raise --ready-timeout if the agent starts slowly)",
                        started.elapsed().as_secs_f64()
                    )));
                }
            }
            Err(e) => {
                check.push(transport_finding(&e));
                return Ok((check.finish(), false));
            }
            Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE && now < deadline => {}
            Ok(r) => break r,
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(READY_PAUSE_MAX);
    };
    let waited = started.elapsed().as_secs_f64();
    if answer.status() == StatusCode::SERVICE_UNAVAILABLE {
        let message = if wait {
            format!(
                "still 503 after {waited:.1} s and {attempts} attempts: {}",
                body_excerpt(&answer)
            )
        } else {
            format!("503 at the end of the suite: {}", body_excerpt(&answer))
        };
        check.push(
            Finding::error("health", "not_ready", "GET /health", message)
                .with_impact(HEALTH_IMPACT)
                .with_fix(
                    "answer 200 {\"status\":\"ready\"} once the models are loaded; if loading \
                     takes long, raise --ready-timeout",
                ),
        );
        return Ok((check.finish(), false));
    }
    if !answer.status().is_success() {
        check.push(
            Finding::error(
                "health",
                "http_status",
                "GET /health",
                format!("answered {}: {}", answer.status(), body_excerpt(&answer)),
            )
            .with_impact(HEALTH_IMPACT)
            .with_fix("serve GET /health: 200 {\"status\":\"ready\"}, 503 while loading"),
        );
        // Not a "not ready" answer: the other endpoints may still work.
        return Ok((check.finish(), true));
    }
    s.observe_content_type(&Method::GET, "/health", &answer);
    check.extend(lint::duplicate_keys("health", answer.body()));
    match AgentHealth::from_slice(answer.body()) {
        Ok(_) => check.verified(format!(
            "{} {}{}",
            answer.status(),
            String::from_utf8_lossy(answer.body()).trim(),
            if attempts > 1 {
                format!(" after {waited:.1} s and {attempts} attempts")
            } else {
                String::new()
            }
        )),
        Err(e) => push_capped(&mut check, issue_findings(DocumentKind::Health, &e)),
    }
    // An invalid body still means the agent is up: go on with the suite.
    Ok((check.finish(), true))
}

fn info(s: &mut Session) -> (CheckResult, Option<AgentIdentity>) {
    let mut check = Check::new(
        "info",
        "GET /v1/info: strict fields, protocol_version 2.0, inference capability",
    );
    let answer = match s.get("/v1/info") {
        Ok(a) => a,
        Err(e) => {
            check.push(transport_finding(&e));
            return (check.finish(), None);
        }
    };
    if !answer.status().is_success() {
        check.push(
            Finding::error(
                "info",
                "http_status",
                "GET /v1/info",
                format!("answered {}: {}", answer.status(), body_excerpt(&answer)),
            )
            .with_impact(INFO_STATUS_IMPACT)
            .with_fix("serve GET /v1/info with 200 at all times, even while models load"),
        );
        return (check.finish(), None);
    }
    s.observe_content_type(&Method::GET, "/v1/info", &answer);
    check.extend(lint::duplicate_keys("info", answer.body()));
    let info = match AgentInfo::from_slice(answer.body()) {
        Ok(info) => info,
        Err(e) => {
            push_capped(&mut check, issue_findings(DocumentKind::Info, &e));
            return (check.finish(), None);
        }
    };
    // What BENCH requires of a valid info is a failure here.
    check.extend(lint::info(&info).into_iter().map(as_error));
    check.verified(format!(
        "{} {}, protocol {}, inference true",
        info.agent_id, info.agent_version, info.protocol_version
    ));
    let identity = AgentIdentity {
        agent_id: info.agent_id,
        agent_version: info.agent_version,
        protocol_version: info.protocol_version,
    };
    (check.finish(), Some(identity))
}

fn describe(response: &AgentResponse) -> String {
    let completed = response
        .candidates()
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Completed(_)))
        .count();
    let n = response.candidates().len();
    let noun = if n == 1 { "candidate" } else { "candidates" };
    format!("{n} {noun} in order ({completed} completed)")
}

fn empty_inputs(s: &mut Session) -> CheckResult {
    let mut check = Check::new("empty-inputs", "inputs: [] is answered 200 []");
    let id = s.request_id("empty");
    let Ok(request) = AgentRequest::new(id, Vec::new()) else {
        return check.finish();
    };
    match s.post_json("/v1/responses", request.to_json_string()) {
        Err(e) => check.push(transport_finding(&e)),
        Ok(a) if !a.status().is_success() => check.push(
            Finding::error(
                "http",
                "http_status",
                "POST /v1/responses",
                format!(
                    "answered {} to a request with no inputs: {}",
                    a.status(),
                    body_excerpt(&a)
                ),
            )
            .with_impact(EMPTY_IMPACT)
            .with_fix("answer {\"inputs\": []} with 200 and []"),
        ),
        Ok(a) => {
            s.observe_content_type(&Method::POST, "/v1/responses", &a);
            match AgentResponse::from_slice(a.body()) {
                Err(e) => push_capped(&mut check, issue_findings(DocumentKind::Response, &e)),
                Ok(r) => match r.validate_request(&request) {
                    Err(m) => check.push(crate::check::mismatch_finding(&m)),
                    Ok(()) => check.verified(format!("{} []", a.status())),
                },
            }
        }
    }
    check.finish()
}

fn ordering(s: &mut Session) -> CheckResult {
    let mut check = Check::new(
        "ordering",
        "the docs' ordering example: ids 7 (2 candidates) and 3 (1)",
    );
    let id = s.request_id("ordering");
    if let Some(request) = requests::ordering(&id) {
        if let Some(r) = s.respond(&mut check, &request) {
            check.verified(format!("{}: (7,0) (7,1) (3,0)", describe(&r)));
        }
    }
    check.finish()
}

fn bench_batch(s: &mut Session) -> CheckResult {
    let mut check = Check::new(
        "bench-batch",
        "a BENCH-like batch: several inputs, inference_mode, tools",
    );
    let id = s.request_id("bench");
    let env = requests::env_status(ROBOT, "press_button", &object_of(r#"{"id": "sw0"}"#));
    let inputs = vec![
        requests::bench_input(
            0,
            AgentInstruction::user("Press sw0."),
            requests::initial_memory(),
        ),
        requests::bench_input(1, AgentInstruction::env(env), requests::initial_memory()),
        requests::bench_input(
            2,
            AgentInstruction::user("Bring the rover to the dock, then report."),
            requests::initial_memory(),
        ),
    ];
    if let Ok(request) = AgentRequest::new(id, inputs) {
        if let Some(r) = s.respond(&mut check, &request) {
            check.verified(describe(&r));
        }
    }
    check.finish()
}

fn gen_batch(s: &mut Session) -> CheckResult {
    let mut check = Check::new("gen-batch", "a GEN-like batch: 2 to 4 branches per input");
    let id = s.request_id("gen");
    let inputs = vec![
        requests::gen_input(0, "Press sw0.", 2),
        requests::gen_input(1, "What can you do?", 3),
        requests::gen_input(2, "Move the panda next to sw1.", 4),
    ];
    if let Ok(request) = AgentRequest::new(id, inputs) {
        if let Some(r) = s.respond(&mut check, &request) {
            check.verified(describe(&r));
        }
    }
    check.finish()
}

fn object_of(text: &str) -> Object {
    match Json::from_slice(text.as_bytes()) {
        Ok(Json::Object(o)) => o,
        _ => Object::new(),
    }
}

/// The first candidate's memory and first tool call (robot, name,
/// arguments), if any.
fn first_call(r: &AgentResponse) -> (Object, Option<(String, String, Object)>) {
    let Some(c) = r.candidates().first() else {
        return (Object::new(), None);
    };
    let call = c
        .outcome
        .decision()
        .and_then(|d| d.tool_calls.first())
        .map(|t| {
            (
                t.target_robot_name.to_string(),
                t.name.to_string(),
                t.arguments.clone(),
            )
        });
    (c.memory.clone(), call)
}

fn env_feedback(s: &mut Session) -> CheckResult {
    let mut check = Check::new(
        "env-feedback",
        "an env instruction with a JSON status and the previous memory",
    );
    let id = s.request_id("env1");
    let first = requests::bench_input(
        0,
        AgentInstruction::user("Press sw0."),
        requests::initial_memory(),
    );
    let Ok(request) = AgentRequest::new(id, vec![first]) else {
        return check.finish();
    };
    check.context("user step");
    let Some(r) = s.respond(&mut check, &request) else {
        return check.finish();
    };
    let (memory, call) = first_call(&r);
    let (robot, tool, args) = call.unwrap_or_else(|| {
        (
            ROBOT.to_owned(),
            "press_button".to_owned(),
            object_of(r#"{"id": "sw0"}"#),
        )
    });
    let status = requests::env_status(&robot, &tool, &args);
    let id = s.request_id("env2");
    let second = requests::bench_input(0, AgentInstruction::env(status), memory);
    check.context("env step");
    let Ok(request) = AgentRequest::new(id, vec![second]) else {
        return check.finish();
    };
    if let Some(r) = s.respond(&mut check, &request) {
        check.verified(format!(
            "user step, then env feedback on {robot}'s {tool} with the returned memory: {}",
            describe(&r)
        ));
    }
    check.finish()
}

fn memory_round_trip(s: &mut Session) -> CheckResult {
    let mut check = Check::new("memory-round-trip", "memory sent back over several steps");
    let steps = s.config.memory_steps.max(2);
    let mut memory = requests::initial_memory();
    for step in 0..steps {
        let instruction = if step % 2 == 0 {
            AgentInstruction::user(format!("Step {step}: press sw0."))
        } else {
            AgentInstruction::env(requests::env_status(
                ROBOT,
                "press_button",
                &object_of(r#"{"id": "sw0"}"#),
            ))
        };
        let id = s.request_id("memory");
        let input = requests::bench_input(0, instruction, memory.clone());
        let Ok(request) = AgentRequest::new(id, vec![input]) else {
            return check.finish();
        };
        let failed_before = check.failed();
        check.context(format!("step {step}"));
        let Some(r) = s.respond(&mut check, &request) else {
            if step > 0 && !failed_before {
                check.push(
                    Finding::error(
                        "exchange",
                        "memory_refused",
                        "",
                        format!(
                            "this step failed, and its memory is exactly what step {} returned",
                            step - 1
                        ),
                    )
                    .with_impact(
                        "BENCH and GEN send back exactly the memory a candidate returned: \
                         an agent that cannot take its own memory fails the run at the \
                         second step of every episode",
                    )
                    .with_fix("accept every memory your agent returns"),
                );
            }
            return check.finish();
        };
        let Some(c) = r.candidates().first() else {
            return check.finish();
        };
        memory = c.memory.clone();
    }
    check.verified(format!(
        "{steps} steps, each sending back the memory returned by the previous one"
    ));
    check.finish()
}

fn unicode(s: &mut Session) -> CheckResult {
    let mut check = Check::new("unicode", "non-ASCII text, raw UTF-8 and \\u escapes");
    let text = "Appuie sur « sw0 » — 按下按钮 🤖 ça va? \u{2028}";
    for (variant, escaped) in [("raw UTF-8", false), ("\\u escapes as Python sends", true)] {
        let id = s.request_id("unicode");
        let mut input =
            requests::bench_input(0, AgentInstruction::user(text), requests::initial_memory());
        input.memory.insert("note", Json::from("mémoire 記憶 🧠"));
        let Ok(request) = AgentRequest::new(id, vec![input]) else {
            return check.finish();
        };
        check.context(variant);
        let body = request.to_json_string();
        let body = if escaped {
            requests::ascii_escaped(&body)
        } else {
            body
        };
        if let Some(r) = s.respond_with(&mut check, &request, body) {
            let mangled = r.candidates().iter().any(|c| {
                c.outcome
                    .decision()
                    .is_some_and(|d| d.say.contains('\u{FFFD}'))
            });
            if mangled {
                check.push(
                    Finding::warning(
                        "response",
                        "unicode_replaced",
                        "[0].output.say",
                        "the answer holds U+FFFD replacement characters",
                    )
                    .with_impact(
                        "text reaches BENCH's judge and GEN's dataset with characters lost",
                    )
                    .with_fix("decode request bodies as UTF-8 and keep strings as they are"),
                );
            } else {
                check.verified(format!("{variant}: {}", describe(&r)));
            }
        }
    }
    check.finish()
}

fn large_request(s: &mut Session) -> CheckResult {
    let mut check = Check::new("large-request", "a request with a large memory");
    let bytes = s.config.large_request_bytes;
    let id = s.request_id("large");
    let Some(request) = requests::large(&id, bytes) else {
        return check.finish();
    };
    let body = request.to_json_string();
    let size = body.len();
    if let Some(r) = s.respond_with(&mut check, &request, body) {
        check.verified(format!("{size} bytes accepted: {}", describe(&r)));
    }
    check.finish()
}

fn no_content_type(s: &mut Session) -> CheckResult {
    let mut check = Check::new(
        "content-type-missing",
        "a POST without Content-Type (as some clients send)",
    );
    let id = s.request_id("noct");
    let Ok(request) = AgentRequest::new(id, vec![requests::user(0, "Say hello.")]) else {
        return check.finish();
    };
    match s.call(RawRequest::post("/v1/responses").body(request.to_json_string())) {
        Err(e) => check.push(transport_finding(&e)),
        Ok(a) if a.status().is_success() => match AgentResponse::from_slice(a.body()) {
            Ok(r) if r.validate_request(&request).is_ok() => {
                check.verified(format!("{} {}", a.status(), describe(&r)));
            }
            _ => check.push(
                Finding::warning(
                    "response",
                    "content_type_missing",
                    "POST /v1/responses",
                    "answered 2xx to a request without Content-Type, but not with a \
                         valid matching response",
                )
                .with_impact(
                    "BENCH and GEN always send Content-Type: application/json; other \
                         clients may not",
                )
                .with_fix("treat a request without Content-Type as JSON, or refuse it with 415"),
            ),
        },
        Ok(a) if a.status().is_client_error() => check.verified(format!(
            "{} (refused; BENCH and GEN always send application/json)",
            a.status()
        )),
        Ok(a) => check.push(
            Finding::warning(
                "http",
                "http_status",
                "POST /v1/responses",
                format!(
                    "answered {} to a request without Content-Type: {}",
                    a.status(),
                    body_excerpt(&a)
                ),
            )
            .with_impact(
                "BENCH and GEN always send application/json and are not affected; a client \
                 that omits the header sees an agent crash instead of a clear refusal",
            )
            .with_fix("accept the body as JSON, or answer 415"),
        ),
    }
    check.finish()
}

fn invalid_request(s: &mut Session, name: &str, what: &str, body: String) -> CheckResult {
    let mut check = Check::new(
        format!("invalid-request/{name}"),
        "an invalid request is answered 4xx (422 expected)",
    );
    let answer = match s.post_json("/v1/responses", body) {
        Ok(a) => a,
        Err(e) => {
            check.push(transport_finding(&e));
            return check.finish();
        }
    };
    let status = answer.status();
    if status == StatusCode::UNPROCESSABLE_ENTITY {
        check.verified(format!("{what}: 422"));
    } else if status.is_client_error() {
        check.push(
            Finding::warning(
                "http",
                "not_422",
                "POST /v1/responses",
                format!(
                    "{what}: answered {status}, 4xx but not 422: {}",
                    body_excerpt(&answer)
                ),
            )
            .with_impact(NOT_422_IMPACT)
            .with_fix("answer invalid requests with 422 {\"detail\": [...]}"),
        );
    } else if status.is_success() {
        check.push(
            Finding::error(
                "http",
                "accepted_invalid_request",
                "POST /v1/responses",
                format!("{what}: answered {status}: {}", body_excerpt(&answer)),
            )
            .with_impact(INVALID_2XX_IMPACT)
            .with_fix(
                "validate every request as magma-core 2.0.1 does and answer 422 \
                 {\"detail\": [...]} (magma-server does this)",
            ),
        );
    } else {
        let fix = if name == "nan" {
            "answer 422 for NaN and Infinity too (FastAPI fails rendering its 422 for NaN \
             and sends 500; refuse NaN before echoing the input)"
        } else {
            "validate the request before running the agent and answer 422 {\"detail\": [...]}"
        };
        check.push(
            Finding::error(
                "http",
                "server_error_on_invalid_request",
                "POST /v1/responses",
                format!("{what}: answered {status}: {}", body_excerpt(&answer)),
            )
            .with_impact(INVALID_5XX_IMPACT)
            .with_fix(fix),
        );
    }
    check.finish()
}

fn unknown_path(s: &mut Session) -> CheckResult {
    let mut check = Check::new("unknown-path", "an unknown path is answered 404");
    let path = "/v1/magma-validate-no-such-path";
    match s.get(path) {
        Err(e) => check.push(transport_finding(&e)),
        Ok(a) if a.status() == StatusCode::NOT_FOUND => {
            check.verified(format!("GET {path}: 404"));
        }
        Ok(a) if a.status().is_client_error() => check.push(
            Finding::warning(
                "http",
                "not_404",
                format!("GET {path}"),
                format!("answered {}, 4xx but not 404", a.status()),
            )
            .with_impact(UNKNOWN_PATH_IMPACT)
            .with_fix("answer unknown paths with 404"),
        ),
        Ok(a) => check.push(
            Finding::error(
                "http",
                "http_status",
                format!("GET {path}"),
                format!(
                    "answered {} to an unknown path: {}",
                    a.status(),
                    body_excerpt(&a)
                ),
            )
            .with_impact(UNKNOWN_PATH_IMPACT)
            .with_fix("answer unknown paths with 404"),
        ),
    }
    check.finish()
}

fn wrong_method(s: &mut Session) -> CheckResult {
    let mut check = Check::new("wrong-method", "a wrong method is answered 405 with Allow");
    for (method, path) in [(Method::GET, "/v1/responses"), (Method::POST, "/health")] {
        let where_ = format!("{method} {path}");
        match s.call(RawRequest::new(method.clone(), path)) {
            Err(e) => check.push(transport_finding(&e)),
            Ok(a) if a.status() == StatusCode::METHOD_NOT_ALLOWED => {
                if a.headers().contains_key(ALLOW) {
                    check.verified(format!("{where_}: 405"));
                } else {
                    check.push(
                        Finding::warning(
                            "http",
                            "allow_header",
                            where_.clone(),
                            "405 without an Allow header",
                        )
                        .with_impact(METHOD_IMPACT)
                        .with_fix("send Allow with the methods the path supports"),
                    );
                }
            }
            Ok(a) if a.status().is_client_error() => check.push(
                Finding::warning(
                    "http",
                    "not_405",
                    where_.clone(),
                    format!("answered {}, 4xx but not 405", a.status()),
                )
                .with_impact(METHOD_IMPACT)
                .with_fix("answer a known path with the wrong method with 405 and Allow"),
            ),
            Ok(a) => check.push(
                Finding::error(
                    "http",
                    "http_status",
                    where_.clone(),
                    format!(
                        "answered {} to a wrong method: {}",
                        a.status(),
                        body_excerpt(&a)
                    ),
                )
                .with_impact(METHOD_IMPACT)
                .with_fix("answer a known path with the wrong method with 405 and Allow"),
            ),
        }
    }
    check.finish()
}

fn content_types(s: &Session) -> CheckResult {
    let mut check = Check::new(
        "content-type",
        "2xx JSON answers carry Content-Type: application/json",
    );
    if s.json_answers == 0 {
        return check.skip("skipped: no 2xx JSON answer to look at");
    }
    if s.content_types.is_empty() {
        check.verified(format!(
            "{} JSON answers, all application/json",
            s.json_answers
        ));
    } else {
        check.push(content_type_finding(&s.content_types));
    }
    check.finish()
}
