//! `POST /v1/responses` with valid requests shaped like BENCH's and GEN's.

use magma_client::RawRequest;
use magma_client::http::Method;
use magma_protocol::routes::Endpoint;
use magma_protocol::{AgentInstruction, AgentRequest, AgentResponse, Json, Object, Outcome};

use super::CheckDef;
use crate::DocumentKind;
use crate::probe::requests::{self, ROBOT};
use crate::probe::session::{Session, body_excerpt, push_capped, transport_finding};
use crate::probe::{Check, CheckSeverity};
use crate::report::Finding;

pub(super) const CHECKS: &[CheckDef] = &[
    CheckDef::new(
        "empty-inputs",
        "inputs: [] is answered 200 []",
        CheckSeverity::Fail,
        "any client that sends an empty batch (magma-core 2.0.1 accepts it)",
        empty_inputs,
    ),
    CheckDef::new(
        "ordering",
        "the docs' ordering example: ids 7 (2 candidates) and 3 (1)",
        CheckSeverity::Fail,
        "BENCH and GEN (validate_request)",
        ordering,
    ),
    CheckDef::new(
        "bench-batch",
        "a BENCH-like batch: several inputs, inference_mode, tools",
        CheckSeverity::Fail,
        "BENCH",
        bench_batch,
    ),
    CheckDef::new(
        "gen-batch",
        "a GEN-like batch: 2 to 4 branches per input",
        CheckSeverity::Fail,
        "GEN",
        gen_batch,
    ),
    CheckDef::new(
        "env-feedback",
        "an env instruction with a JSON status and the previous memory",
        CheckSeverity::Fail,
        "BENCH and GEN (every step after a tool call)",
        env_feedback,
    ),
    CheckDef::new(
        "memory-round-trip",
        "memory sent back over several steps",
        CheckSeverity::Fail,
        "BENCH and GEN (every episode)",
        memory_round_trip,
    ),
    CheckDef::new(
        "unicode",
        "non-ASCII text, raw UTF-8 and \\u escapes",
        CheckSeverity::Fail,
        "BENCH and GEN (Python sends \\u escapes)",
        unicode,
    ),
    CheckDef::new(
        "large-request",
        "a request with a large memory",
        CheckSeverity::Fail,
        "BENCH and GEN (memory grows over an episode)",
        large_request,
    ),
    CheckDef::new(
        "content-type-missing",
        "a POST without Content-Type (as some clients send)",
        CheckSeverity::Warn,
        "none: BENCH and GEN always send application/json",
        no_content_type,
    ),
];

const EMPTY_IMPACT: &str = "magma-core 2.0.1 accepts an empty batch and expects []: a client \
     that sends one gets an HTTP error, which BENCH and GEN treat as fatal for the run";

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

fn empty_inputs(s: &mut Session, check: &mut Check) {
    let id = s.request_id("empty");
    let Ok(request) = AgentRequest::new(id, Vec::new()) else {
        return;
    };
    match s.post_json(Endpoint::Responses.path(), request.to_json_string()) {
        Err(e) => check.push(transport_finding(&e)),
        Ok(a) if !a.status().is_success() => check.push(
            Finding::error(
                "http",
                "http_status",
                format!("POST {}", Endpoint::Responses),
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
            s.observe_content_type(&Method::POST, Endpoint::Responses.path(), &a);
            let read = AgentResponse::check_candidate_count(a.body(), &request)
                .map_err(|m| check.push(crate::check::mismatch_finding(&m)))
                .and_then(|()| {
                    AgentResponse::from_slice(a.body())
                        .map_err(|e| push_capped(check, DocumentKind::Response, &e))
                });
            if let Ok(r) = read {
                match r.validate_request(&request) {
                    Err(m) => check.push(crate::check::mismatch_finding(&m)),
                    Ok(()) => check.verified(format!("{} []", a.status())),
                }
            }
        }
    }
}

fn ordering(s: &mut Session, check: &mut Check) {
    let id = s.request_id("ordering");
    if let Some(request) = requests::ordering(&id) {
        if let Some(r) = s.respond(check, &request) {
            check.verified(format!("{}: (7,0) (7,1) (3,0)", describe(&r)));
        }
    }
}

fn bench_batch(s: &mut Session, check: &mut Check) {
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
        if let Some(r) = s.respond(check, &request) {
            check.verified(describe(&r));
        }
    }
}

fn gen_batch(s: &mut Session, check: &mut Check) {
    let id = s.request_id("gen");
    let inputs = vec![
        requests::gen_input(0, "Press sw0.", 2),
        requests::gen_input(1, "What can you do?", 3),
        requests::gen_input(2, "Move the panda next to sw1.", 4),
    ];
    if let Ok(request) = AgentRequest::new(id, inputs) {
        if let Some(r) = s.respond(check, &request) {
            check.verified(describe(&r));
        }
    }
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

fn env_feedback(s: &mut Session, check: &mut Check) {
    let id = s.request_id("env1");
    let first = requests::bench_input(
        0,
        AgentInstruction::user("Press sw0."),
        requests::initial_memory(),
    );
    let Ok(request) = AgentRequest::new(id, vec![first]) else {
        return;
    };
    check.context("user step");
    let Some(r) = s.respond(check, &request) else {
        return;
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
        return;
    };
    if let Some(r) = s.respond(check, &request) {
        check.verified(format!(
            "user step, then env feedback on {robot}'s {tool} with the returned memory: {}",
            describe(&r)
        ));
    }
}

fn memory_round_trip(s: &mut Session, check: &mut Check) {
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
            return;
        };
        let failed_before = check.failed();
        check.context(format!("step {step}"));
        let Some(r) = s.respond(check, &request) else {
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
            return;
        };
        let Some(c) = r.candidates().first() else {
            return;
        };
        memory = c.memory.clone();
    }
    check.verified(format!(
        "{steps} steps, each sending back the memory returned by the previous one"
    ));
}

fn unicode(s: &mut Session, check: &mut Check) {
    let text = "Appuie sur « sw0 » — 按下按钮 🤖 ça va? \u{2028}";
    for (variant, escaped) in [("raw UTF-8", false), ("\\u escapes as Python sends", true)] {
        let id = s.request_id("unicode");
        let mut input =
            requests::bench_input(0, AgentInstruction::user(text), requests::initial_memory());
        input.memory.insert("note", Json::from("mémoire 記憶 🧠"));
        let Ok(request) = AgentRequest::new(id, vec![input]) else {
            return;
        };
        check.context(variant);
        let body = request.to_json_string();
        let body = if escaped {
            requests::ascii_escaped(&body)
        } else {
            body
        };
        if let Some(r) = s.respond_with(check, &request, body) {
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
}

fn large_request(s: &mut Session, check: &mut Check) {
    let bytes = s.config.large_request_bytes;
    let id = s.request_id("large");
    let Some(request) = requests::large(&id, bytes) else {
        return;
    };
    let body = request.to_json_string();
    let size = body.len();
    if let Some(r) = s.respond_with(check, &request, body) {
        check.verified(format!("{size} bytes accepted: {}", describe(&r)));
    }
}

fn no_content_type(s: &mut Session, check: &mut Check) {
    let id = s.request_id("noct");
    let Ok(request) = AgentRequest::new(id, vec![requests::user(0, "Say hello.")]) else {
        return;
    };
    match s.call(RawRequest::post(Endpoint::Responses.path()).body(request.to_json_string())) {
        Err(e) => check.push(transport_finding(&e)),
        // `from_slice_for`: an answer with more candidates than asked is
        // refused before any is built.
        Ok(a) if a.status().is_success() => match AgentResponse::from_slice_for(a.body(), &request)
        {
            Ok(r) => {
                check.verified(format!("{} {}", a.status(), describe(&r)));
            }
            _ => check.push(
                Finding::warning(
                    "response",
                    "content_type_missing",
                    format!("POST {}", Endpoint::Responses),
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
                format!("POST {}", Endpoint::Responses),
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
            .with_fix(
                if crate::probe::session::is_miscount(a.status().as_u16(), a.body()) {
                    crate::probe::session::MISCOUNT_FIX
                } else {
                    "accept the body as JSON, or answer 415"
                },
            ),
        ),
    }
}
