//! The coaching extension, as GEN drives it: open a session, repair
//! requests of each advertised kind, re-injection through `/v1/responses`
//! of a `replace_say` and of the agent's own proposals, close. Every check is
//! skipped when `/v1/info` advertises no coaching kind (the resume check: no
//! `coaching_resume`; the re-injection check: no corrected proposal).

use std::thread;
use std::time::{Duration, Instant};

use magma_client::http::header::{ACCEPT, HeaderValue};
use magma_client::http::{Method, StatusCode};
use magma_client::{RawRequest, RawResponse};
use magma_protocol::coaching::{
    CoachingProposal, SpecializedCoachingRequest, SpecializedCoachingResponse,
};
use magma_protocol::routes::{Endpoint, coaching_session_path as session_path};
use magma_protocol::{AgentInput, AgentOutput, AgentRequest, Json, Outcome, json};

use super::CheckDef;
use crate::probe::requests::{self, ROBOT};
use crate::probe::session::{Session, body_excerpt, transport_finding};
use crate::probe::{Check, CheckSeverity};
use crate::report::Finding;

pub(super) const CHECKS: &[CheckDef] = &[
    CheckDef::new(
        "coaching/open",
        "PUT /v1/coaching/sessions/{run_id} opens a session: 204",
        CheckSeverity::Fail,
        "GEN (RemoteCoaching, before generation starts)",
        open,
    ),
    CheckDef::new(
        "coaching/open-again",
        "the same configuration again is answered 204",
        CheckSeverity::Fail,
        "GEN (a PUT whose answer was lost, sent again)",
        open_again,
    ),
    CheckDef::new(
        "coaching/conflict",
        "another configuration for an open session is answered 409",
        CheckSeverity::Fail,
        "GEN (two runs with one run id)",
        conflict,
    ),
    CheckDef::new(
        "coaching/unknown-run",
        "POST /v1/coaching for a run without a session is answered 404",
        CheckSeverity::Fail,
        "GEN (requests after a session was closed)",
        unknown_run,
    ),
    CheckDef::new(
        "coaching/failure",
        "a GEN-shaped failure repair: 200, valid, matches its request",
        CheckSeverity::Fail,
        "GEN (diagnosis repairs)",
        failure,
    ),
    CheckDef::new(
        "coaching/suboptimal",
        "a GEN-shaped suboptimal repair: 200, valid, matches its request",
        CheckSeverity::Fail,
        "GEN (suboptimal repairs)",
        suboptimal,
    ),
    CheckDef::new(
        "coaching/format",
        "a GEN-shaped format repair: 200, valid, matches its request",
        CheckSeverity::Fail,
        "GEN (repairs of malformed answers)",
        format,
    ),
    CheckDef::new(
        "coaching/resume",
        "extra_keys.coaching replace_say through /v1/responses says that text",
        CheckSeverity::Fail,
        "GEN (text-only rewrites and every re-injected proposal)",
        resume,
    ),
    CheckDef::new(
        "coaching/reinject",
        "the agent's own proposals, re-injected as GEN does, get the decision each asks for",
        CheckSeverity::Fail,
        "GEN (every corrected repair is re-injected through /v1/responses)",
        reinject,
    ),
    CheckDef::new(
        "coaching/close-waits",
        "DELETE waits for the session's coaching request in flight",
        CheckSeverity::Fail,
        "GEN (shutdown while repairs run)",
        close_waits,
    ),
    CheckDef::new(
        "coaching/close",
        "DELETE closes the session: 204, then its requests are answered 404",
        CheckSeverity::Fail,
        "GEN (RemoteCoaching.close at shutdown)",
        close,
    ),
    CheckDef::new(
        "coaching/close-again",
        "DELETE of a closed session is answered 204",
        CheckSeverity::Fail,
        "GEN (close() after a failed open, or retried)",
        close_again,
    ),
];

const OPEN_IMPACT: &str = "GEN's RemoteCoaching constructor calls raise_for_status on the PUT: \
     any other answer deletes the session and raises RuntimeError, and the generation run does \
     not start";
const POST_IMPACT: &str = "GEN's RemoteCoaching.submit calls raise_for_status, then \
     SpecializedCoachingResponse.model_validate and validate_request: a failure there is \
     logged as a coaching transport error and the repair is abandoned, never retried";
const CLOSE_IMPACT: &str = "GEN's RemoteCoaching.close calls raise_for_status on the DELETE: \
     another answer raises at the end of the run";

/// How long the probe's slow coaching request asks the coach to take
/// (`additional_info.delay_ms`), and when the DELETE is sent.
const SLOW_MS: u64 = 1500;
const DELETE_AFTER: Duration = Duration::from_millis(300);
/// How much earlier than the request's answer a waiting DELETE's answer may
/// arrive (both are written once the session is released).
const RACE: Duration = Duration::from_millis(250);

/// A session configuration like GEN's: one backend, `capture_logs: true`.
fn config(capture_logs: bool) -> Json {
    json!({
        "backends": {
            "coach": {
                "type": "openai",
                "endpoint": "http://127.0.0.1:9/v1",
                "default_model": "magma-validate-model",
                "headers": {},
                "timeout": 30.0,
                "max_retry": 3
            }
        },
        "capture_logs": capture_logs
    })
}

/// Skips the check unless `/v1/info` advertises coaching kinds.
fn advertised(s: &Session, check: &mut Check) -> bool {
    if !s.coaching.known {
        check.skip("skipped: /v1/info was not read, so the advertised coaching is unknown");
        return false;
    }
    if s.coaching.kinds.is_empty() {
        check.skip("skipped: /v1/info advertises no specialized_coaching kind");
        return false;
    }
    true
}

/// The probe's open session, or a skip.
fn open_session(s: &Session, check: &mut Check) -> Option<String> {
    if !advertised(s, check) {
        return None;
    }
    let run_id = s.coaching.run_id.clone();
    if run_id.is_none() {
        check.skip("skipped: no coaching session could be opened (see coaching/open)");
    }
    run_id
}

fn put(s: &Session, run_id: &str, config: &Json) -> Result<RawResponse, magma_client::Error> {
    s.call(
        RawRequest::new(Method::PUT, session_path(run_id))
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .json(config.to_json_string()),
    )
}

fn delete(s: &Session, run_id: &str) -> Result<RawResponse, magma_client::Error> {
    s.call(
        RawRequest::new(Method::DELETE, session_path(run_id))
            .header(ACCEPT, HeaderValue::from_static("application/json")),
    )
}

/// Checks a session route's answer is `204`; `false` with a finding if not.
fn expect_204(
    check: &mut Check,
    what: &str,
    answer: &Result<RawResponse, magma_client::Error>,
    impact: &str,
    fix: &str,
) -> bool {
    match answer {
        Err(e) => {
            check.push(transport_finding(e));
            false
        }
        Ok(a) if a.status().is_success() => true,
        Ok(a) => {
            check.push(
                Finding::error(
                    "coaching",
                    "http_status",
                    what,
                    format!("answered {}: {}", a.status(), body_excerpt(a)),
                )
                .with_impact(impact)
                .with_fix(fix),
            );
            false
        }
    }
}

fn open(s: &mut Session, check: &mut Check) {
    if !advertised(s, check) {
        return;
    }
    let run_id = s.request_id("coaching-run");
    let answer = put(s, &run_id, &config(true));
    if expect_204(
        check,
        &format!("PUT {}", Endpoint::CoachingSession),
        &answer,
        OPEN_IMPACT,
        "accept a CoachingSessionConfig with 204 (magma-core's mount_coaching_routes does)",
    ) {
        check.verified(format!("session {run_id} opened"));
        s.coaching.run_id = Some(run_id);
    }
}

fn open_again(s: &mut Session, check: &mut Check) {
    let Some(run_id) = open_session(s, check) else {
        return;
    };
    let answer = put(s, &run_id, &config(true));
    if expect_204(
        check,
        &format!("PUT {} (same configuration)", Endpoint::CoachingSession),
        &answer,
        "GEN deletes the session and stops the run when a PUT fails: a PUT sent again after a \
         lost answer (or by a retrying proxy) must find the session as it is",
        "answer the same configuration for an open session with 204, as magma-core does",
    ) {
        check.verified("the same configuration again: 204");
    }
}

fn conflict(s: &mut Session, check: &mut Check) {
    let Some(run_id) = open_session(s, check) else {
        return;
    };
    match put(s, &run_id, &config(false)) {
        Err(e) => check.push(transport_finding(&e)),
        Ok(a) if a.status() == StatusCode::CONFLICT => {
            check.verified("another configuration: 409");
        }
        Ok(a) => check.push(
            Finding::error(
                "coaching",
                "not_409",
                format!("PUT {} (another configuration)", Endpoint::CoachingSession),
                format!(
                    "answered {} to a different configuration of an open session: {}",
                    a.status(),
                    body_excerpt(&a)
                ),
            )
            .with_impact(
                "a second GEN run with the same run id would share (or silently replace) the \
                 first run's session and backends instead of failing at start-up",
            )
            .with_fix(
                "answer 409 when the session is open with a different configuration or is \
                 closing, as magma-core does",
            ),
        ),
    }
}

/// An input as JSON (as GEN's `model_dump(mode='json')` writes it).
fn input_json(input: &AgentInput) -> Json {
    serde_json::to_vec(input)
        .ok()
        .and_then(|bytes| Json::from_slice(&bytes).ok())
        .unwrap_or(Json::Null)
}

/// A coaching request shaped like GEN's `RemoteCoaching.submit`: a two-step
/// trajectory (a tool call, then a step that went wrong), the
/// `replacement` point and, for `failure`, a `recovery` point with an
/// explicit input.
fn gen_request(run_id: &str, request_id: &str, kind: &str, additional: Json) -> Json {
    let first = requests::bench_input(
        0,
        magma_protocol::AgentInstruction::user("Press sw0."),
        requests::initial_memory(),
    );
    let env = requests::env_status(ROBOT, "press_button", &magma_protocol::Object::new());
    let second = requests::bench_input(
        0,
        magma_protocol::AgentInstruction::env(env),
        requests::initial_memory(),
    );
    let call =
        json!({"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": ROBOT});
    let execution = |answer: &str| {
        json!({
            "diagnosable": true,
            "execution_results": [{"robot": ROBOT, "tool": "press_button", "result": "failure",
                                   "error_flag": "BAD_CALL", "message": "sw0 is out of reach"}],
            "input_type": "INSTRUCTION",
            "input_content": "Press sw0.",
            "answer": answer,
            "answer_data": {}
        })
    };
    let diagnosis = match kind {
        "format" => Json::Null,
        _ => json!({
            "explanation": "The robot pressed the wrong button.",
            "expected_decision": "Press sw0 with panda, then confirm to the user."
        }),
    };
    let mut points = vec![json!({"id": "replacement", "input_step_id": 2, "input": null})];
    if kind == "failure" {
        points.push(json!({"id": "recovery", "input_step_id": null, "input": input_json(&second)}));
    }
    json!({
        "run_id": run_id,
        "request_id": request_id,
        "kind": kind,
        "stage": {"id": 1, "goal": "Press sw0 and tell the user.", "hint": "Use press_button."},
        "active_errors": [{"code": "environment", "description": "panda: press_button failed", "details": {}}],
        "diagnosis": diagnosis,
        "target_step_id": 2,
        "trajectory": [
            {"id": 1, "input": input_json(&first), "output": {"say": "", "tool_calls": [call]},
             "error": null, "internal_steps": [], "execution": execution("press_button")},
            {"id": 2, "input": input_json(&second), "output": null,
             "error": {"code": "invalid_output", "message": "Model output must contain say or action",
                       "component": "commander"},
             "internal_steps": [{"id": "step-0", "component": "commander", "origin": "model",
                                 "full_prompt": "...", "input_elements": {}, "output_raw": "..."}],
             "execution": execution("")}
        ],
        "reinjection_points": (Json::Array(points)),
        "additional_info": additional
    })
}

/// Sends a coaching request and checks status, body and
/// `validate_request`. `None` when the answer cannot be used.
fn post_coaching(
    s: &mut Session,
    check: &mut Check,
    request: &SpecializedCoachingRequest,
) -> Option<SpecializedCoachingResponse> {
    let answer = match s.post_json(Endpoint::Coaching.path(), request.to_json_string()) {
        Ok(a) => a,
        Err(e) => {
            check.push(transport_finding(&e));
            return None;
        }
    };
    if !answer.status().is_success() {
        check.push(
            Finding::error(
                "coaching",
                "http_status",
                format!("POST {}", Endpoint::Coaching),
                format!("answered {}: {}", answer.status(), body_excerpt(&answer)),
            )
            .with_impact(POST_IMPACT)
            .with_fix(
                "answer 200 with a SpecializedCoachingResponse; a coach that fails answers \
                 status \"error\" with the reason, not an HTTP error",
            ),
        );
        return None;
    }
    s.observe_content_type(&Method::POST, Endpoint::Coaching.path(), &answer);
    let response = match SpecializedCoachingResponse::from_slice(answer.body()) {
        Ok(r) => r,
        Err(e) => {
            check.push(
                Finding::error("coaching_response", "invalid", "", e.to_string())
                    .with_impact(POST_IMPACT)
                    .with_fix("answer a SpecializedCoachingResponse of magma-core 2.0.1"),
            );
            return None;
        }
    };
    if let Err(e) = response.validate_request(request) {
        check.push(
            Finding::error("coaching_exchange", "validate_request", "", e.to_string())
                .with_impact(POST_IMPACT)
                .with_fix(
                    "echo the request_id and propose only for the request's reinjection \
                     point ids",
                ),
        );
        return None;
    }
    Some(response)
}

fn repair(s: &mut Session, check: &mut Check, kind: &str) {
    let Some(run_id) = open_session(s, check) else {
        return;
    };
    if !s.coaching.kinds.iter().any(|k| k == kind) {
        check.skip(format!(
            "skipped: {} does not advertise `{kind}`",
            Endpoint::Info
        ));
        return;
    }
    let request_id = s.request_id("coaching");
    let body = gen_request(&run_id, &request_id, kind, json!({}));
    let request = match SpecializedCoachingRequest::from_json(body) {
        Ok(r) => r,
        // The probe's own request is valid; a failure here is the probe's bug.
        Err(e) => {
            check.push(Finding::error(
                "coaching_request",
                "probe",
                "",
                e.to_string(),
            ));
            return;
        }
    };
    if let Some(response) = post_coaching(s, check, &request) {
        let status = response.status().as_str();
        let proposals = response.proposals().len();
        check.extend(crate::lint::coaching_response(&response));
        check.verified(format!(
            "status {status}, {proposals} proposal(s), {} log(s)",
            response.logs().len()
        ));
        for proposal in response.proposals() {
            s.coaching
                .proposals
                .push((request.clone(), proposal.clone()));
        }
    }
}

fn failure(s: &mut Session, check: &mut Check) {
    repair(s, check, "failure");
}

fn suboptimal(s: &mut Session, check: &mut Check) {
    repair(s, check, "suboptimal");
}

fn format(s: &mut Session, check: &mut Check) {
    repair(s, check, "format");
}

fn resume(s: &mut Session, check: &mut Check) {
    if !s.coaching.known {
        check.skip("skipped: /v1/info was not read");
        return;
    }
    if !s.coaching.resume {
        check.skip("skipped: /v1/info does not advertise coaching_resume");
        return;
    }
    let id = s.request_id("resume");
    let text = format!("Coached answer {id}: sw0 is pressed.");
    let mut input = requests::bench_input(
        0,
        magma_protocol::AgentInstruction::user("Press sw0."),
        requests::initial_memory(),
    );
    input.extra_keys = match json!({"coaching": {"kind": "replace_say", "text": (text.as_str())}}) {
        Json::Object(o) => o,
        _ => return,
    };
    let Ok(request) = AgentRequest::new(id, vec![input]) else {
        return;
    };
    let Some(response) = s.respond(check, &request) else {
        return;
    };
    let Some(candidate) = response.candidates().first() else {
        return;
    };
    let said = match &candidate.outcome {
        Outcome::Completed(decision) if decision.tool_calls.is_empty() => {
            Some(decision.say.as_str())
        }
        _ => None,
    };
    if said == Some(text.as_str()) {
        check.verified("the candidate says exactly the replace_say text");
        return;
    }
    let got = match &candidate.outcome {
        Outcome::Completed(d) => format!(
            "a decision saying {:?} with {} tool call(s)",
            d.say,
            d.tool_calls.len()
        ),
        Outcome::Error(e) => format!("an error candidate ({}: {})", e.code, e.message),
    };
    check.push(
        Finding::error(
            "response",
            "coaching_ignored",
            "[0].output",
            format!("extra_keys.coaching asked to say {text:?}; the agent answered {got}"),
        )
        .with_impact(
            "the agent advertises coaching_resume, so GEN re-injects its text-only rewrites \
             and every corrected proposal through /v1/responses and records the answer as the \
             coached step: an agent that ignores the payload records its own answer instead",
        )
        .with_fix(
            "when extra_keys.coaching is {\"kind\": \"replace_say\", \"text\": T}, answer a \
             completed candidate saying exactly T with no tool calls, without calling the \
             model; or stop advertising coaching_resume",
        ),
    );
}

const REINJECT_IMPACT: &str = "GEN re-injects every proposal of a corrected repair: it sends \
     the point's input again with extra_keys.coaching set to the proposal's extra_keys, \
     unchanged (AgentCoachingManager._create_injected_node), num_outputs 1, and records the \
     answer as the coached step; an error candidate or another decision loses the repair";

/// The input GEN sends for `proposal`: the point's input, its `extra_keys`
/// kept and `extra_keys["coaching"]` set to the proposal's `extra_keys`,
/// `num_outputs` 1, `id` the position in the batch
/// (`BaseAgentManager._send_coaching_pending`).
fn reinjected(
    request: &SpecializedCoachingRequest,
    proposal: &CoachingProposal,
    id: i64,
) -> Option<AgentInput> {
    let point = request
        .reinjection_points()
        .iter()
        .find(|p| p.id() == proposal.reinjection_point_id)?;
    let mut input = request.point_input(point)?.clone();
    input.id = id;
    input.num_outputs = 1.try_into().ok()?;
    input
        .extra_keys
        .insert("coaching", Json::Object(proposal.extra_keys.clone()));
    Some(input)
}

/// Judges the candidate GEN got back for `proposal`; `true` when it is
/// the decision the payload asks for.
fn judge(
    check: &mut Check,
    at: &str,
    proposal: &CoachingProposal,
    candidate: &AgentOutput,
) -> bool {
    let sent = crate::report::shorten(
        &Json::Object(proposal.extra_keys.clone()).to_json_string(),
        120,
    );
    let got = match &candidate.outcome {
        Outcome::Completed(d) => format!(
            "a decision saying {:?} with {} tool call(s)",
            d.say,
            d.tool_calls.len()
        ),
        Outcome::Error(e) => format!("an error candidate ({}: {})", e.code, e.message),
    };
    let payload = proposal.payload();
    let wrong = match (&payload, &candidate.outcome) {
        (Ok(p), Outcome::Completed(d)) => match p.decision() {
            Some(asked) if asked != *d => Some(format!(
                "its {} payload asks for a decision saying {:?} with {} tool call(s); the \
                 agent answered {got}",
                p.kind(),
                asked.say,
                asked.tool_calls.len()
            )),
            _ => None,
        },
        (Ok(p), Outcome::Error(_)) => Some(format!("its {} payload came back as {got}", p.kind())),
        (Err(e), Outcome::Error(_)) => Some(format!(
            "it is not a payload ({} at {}), and the agent answered {got}",
            e.first().message(),
            e.first().location()
        )),
        // The agent reads its own odd shape: the lint warns, GEN's loop works.
        (Err(_), Outcome::Completed(_)) => None,
    };
    let Some(wrong) = wrong else {
        return true;
    };
    let wrapped =
        proposal.extra_keys.get("kind").is_none() && proposal.extra_keys.get("coaching").is_some();
    let fix = if wrapped {
        "the proposal wraps its payload in a \"coaching\" key, so GEN sent \
         extra_keys.coaching = {\"coaching\": {...}}: make the proposal's extra_keys the \
         payload itself ({\"kind\": \"replace_say\", \"text\": ...} or {\"kind\": \
         \"replace_decision\", \"decision\": {...}}), which the agent then finds at \
         extra_keys.coaching (in Rust: CoachingProposal::new(point, payload))"
    } else {
        "answer an input whose extra_keys.coaching holds one of the agent's proposals with \
         exactly the decision it asks for (replace_say: that text and no tool call; \
         replace_decision: that decision), without calling the model"
    };
    check.push(
        Finding::error(
            "response",
            "proposal_not_applied",
            at,
            format!(
                "GEN re-injected proposal {:?} as extra_keys.coaching = {sent}: {wrong}",
                proposal.reinjection_point_id
            ),
        )
        .with_impact(REINJECT_IMPACT)
        .with_fix(fix),
    );
    false
}

fn reinject(s: &mut Session, check: &mut Check) {
    if !advertised(s, check) {
        return;
    }
    let proposals = std::mem::take(&mut s.coaching.proposals);
    if proposals.is_empty() {
        check.skip("skipped: no coaching check got a corrected proposal to re-inject");
        return;
    }
    let inputs: Vec<AgentInput> = proposals
        .iter()
        .enumerate()
        .filter_map(|(i, (request, p))| reinjected(request, p, i64::try_from(i).ok()?))
        .collect();
    if inputs.len() != proposals.len() {
        check.push(Finding::error(
            "coaching_response",
            "probe",
            "",
            "a proposal names a point without an input (validate_request passed)".to_owned(),
        ));
        return;
    }
    let mut applied = 0;
    // One by one, as GEN sends a single pending coached node ...
    for (i, (input, (_, proposal))) in inputs.iter().zip(&proposals).enumerate() {
        let mut input = input.clone();
        input.id = 0;
        let Ok(request) = AgentRequest::new(s.request_id("reinject"), vec![input]) else {
            return;
        };
        let Some(response) = s.respond(check, &request) else {
            return;
        };
        let Some(candidate) = response.candidates().first() else {
            return;
        };
        applied += usize::from(judge(
            check,
            &format!("proposal {i} alone: [0]"),
            proposal,
            candidate,
        ));
    }
    // ... and batched, as it sends several at once (ids are batch positions).
    let Ok(request) = AgentRequest::new(s.request_id("reinject-batch"), inputs) else {
        return;
    };
    let Some(response) = s.respond(check, &request) else {
        return;
    };
    for (i, (candidate, (_, proposal))) in response.candidates().iter().zip(&proposals).enumerate()
    {
        applied += usize::from(judge(check, &format!("batch: [{i}]"), proposal, candidate));
    }
    // An error candidate here is reported as the proposal it lost, with the
    // fix that fits; the generic error_candidate lint would only repeat it.
    if applied < 2 * proposals.len() {
        check.drop_code("error_candidate");
    }
    if applied == 2 * proposals.len() {
        check.verified(format!(
            "{} proposal(s) re-injected one by one and in one batch: each answered with the \
             decision it asks for",
            proposals.len()
        ));
    }
}

fn close_waits(s: &mut Session, check: &mut Check) {
    if !advertised(s, check) {
        return;
    }
    let run_id = s.request_id("coaching-drain");
    let answer = put(s, &run_id, &config(true));
    if !expect_204(
        check,
        &format!("PUT {}", Endpoint::CoachingSession),
        &answer,
        OPEN_IMPACT,
        "accept a CoachingSessionConfig with 204",
    ) {
        return;
    }
    let kind = s.coaching.kinds[0].clone();
    let request_id = s.request_id("coaching-slow");
    let body = gen_request(&run_id, &request_id, &kind, json!({"delay_ms": SLOW_MS}));
    let Ok(request) = SpecializedCoachingRequest::from_json(body) else {
        return;
    };
    let session: &Session = s;
    let (post, post_done, delete_sent, delete_answer, delete_done) = thread::scope(|scope| {
        let slow = scope.spawn(|| {
            let answer = session.post_json(Endpoint::Coaching.path(), request.to_json_string());
            (answer, Instant::now())
        });
        thread::sleep(DELETE_AFTER);
        let sent = Instant::now();
        let deleted = delete(session, &run_id);
        let deleted_at = Instant::now();
        match slow.join() {
            Ok((post, done)) => (Some(post), done, sent, deleted, deleted_at),
            Err(_) => (None, Instant::now(), sent, deleted, deleted_at),
        }
    });
    let Some(post) = post else {
        return;
    };
    if !expect_204(
        check,
        &format!("DELETE {}", Endpoint::CoachingSession),
        &delete_answer,
        CLOSE_IMPACT,
        "answer DELETE with 204",
    ) {
        return;
    }
    match &post {
        Err(e) => {
            check.push(transport_finding(e));
            return;
        }
        Ok(a) if !a.status().is_success() => {
            check.push(
                Finding::error(
                    "coaching",
                    "http_status",
                    format!("POST {} (in flight during DELETE)", Endpoint::Coaching),
                    format!("answered {}: {}", a.status(), body_excerpt(a)),
                )
                .with_impact(POST_IMPACT)
                .with_fix(
                    "finish the requests a session has started before closing it; answer them \
                     200",
                ),
            );
            return;
        }
        Ok(_) => {}
    }
    if post_done <= delete_sent {
        check.skip(format!(
            "skipped: the coaching request finished before the DELETE was sent, {} ms after it \
             (the agent does not take additional_info.delay_ms as a delay), so there was \
             nothing in flight to wait for",
            DELETE_AFTER.as_millis()
        ));
        return;
    }
    // The request releases its session just before its answer is written:
    // a waiting DELETE may be answered a moment before that answer arrives.
    // One that does not wait answers about SLOW_MS - DELETE_AFTER early.
    if delete_done + RACE < post_done {
        check.push(
            Finding::error(
                "coaching",
                "delete_did_not_wait",
                format!("DELETE {}", Endpoint::CoachingSession),
                format!(
                    "DELETE answered {:?} before the session's coaching request in flight \
                     finished",
                    post_done.duration_since(delete_done)
                ),
            )
            .with_impact(
                "GEN closes the session at shutdown while repairs may still run: an agent \
                 that releases the session (and its backends) before they finish fails or \
                 loses those repairs",
            )
            .with_fix(
                "mark the session closing, wait for its active requests, then release it and \
                 answer 204, as magma-core's CoachingSessions.close does",
            ),
        );
        return;
    }
    check.verified("DELETE answered after the request in flight (200) finished");
}

fn close(s: &mut Session, check: &mut Check) {
    let Some(run_id) = open_session(s, check) else {
        return;
    };
    let answer = delete(s, &run_id);
    if !expect_204(
        check,
        &format!("DELETE {}", Endpoint::CoachingSession),
        &answer,
        CLOSE_IMPACT,
        "answer DELETE with 204 once the session's requests have finished",
    ) {
        return;
    }
    check.verified("DELETE: 204");
    unknown_run_of(s, check, &run_id, "the closed session");
}

fn close_again(s: &mut Session, check: &mut Check) {
    let Some(run_id) = open_session(s, check) else {
        return;
    };
    let answer = delete(s, &run_id);
    if expect_204(
        check,
        &format!("DELETE {} (closed)", Endpoint::CoachingSession),
        &answer,
        "GEN's close() after a failed PUT deletes a session that may not exist, and raises \
         on anything but 2xx",
        "answer DELETE with 204 for any run id, known or not, as magma-core does",
    ) {
        check.verified("DELETE of a closed session: 204");
    }
}

fn unknown_run(s: &mut Session, check: &mut Check) {
    if !advertised(s, check) {
        return;
    }
    let run_id = s.request_id("coaching-no-session");
    unknown_run_of(s, check, &run_id, "a run that was never opened");
}

/// `POST /v1/coaching` for `run_id`, which has no open session: `404`.
fn unknown_run_of(s: &mut Session, check: &mut Check, run_id: &str, what: &str) {
    let kind = s.coaching.kinds[0].clone();
    let request_id = s.request_id("coaching");
    let Ok(request) =
        SpecializedCoachingRequest::from_json(gen_request(run_id, &request_id, &kind, json!({})))
    else {
        return;
    };
    match s.post_json(Endpoint::Coaching.path(), request.to_json_string()) {
        Err(e) => check.push(transport_finding(&e)),
        Ok(a) if a.status() == StatusCode::NOT_FOUND => {
            check.verified(format!("POST {} for {what}: 404", Endpoint::Coaching));
        }
        Ok(a) => check.push(
            Finding::error(
                "coaching",
                "not_404",
                format!("POST {}", Endpoint::Coaching),
                format!(
                    "answered {} to a request for {what}: {}",
                    a.status(),
                    body_excerpt(&a)
                ),
            )
            .with_impact(
                "a request for a run without a session has no backends and no configuration: \
                 GEN expects 404 (magma-core's answer) and abandons the repair, where a 200 \
                 coaches outside any session",
            )
            .with_fix("answer 404 {\"detail\": \"Unknown or closing coaching session\"}"),
        ),
    }
}
