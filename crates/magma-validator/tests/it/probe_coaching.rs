//! The probe's coaching checks: they pass the demo agent with coaching on
//! (run) and off (skipped), and fail, naming the fault, agents (stub
//! servers of the test kit) with one coaching fault each. The same fake without a
//! fault passes every coaching check, so each failure comes from its fault.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use magma_server::Config;
use magma_server::demo::DemoAgent;
use magma_testkit::stub::{Options, Recorded, Reply, StubServer};
use magma_validator::magma_protocol::coaching::{
    CoachingPayload, CoachingProposal, CoachingSessionConfig, ReplaceSay,
    SpecializedCoachingRequest, SpecializedCoachingResponse,
};
use magma_validator::magma_protocol::{
    AgentDecision, AgentError, AgentRequest, AgentResponse, Candidate, Json, Object,
};
use serde_json::Value;

use crate::probe_live::RealServer;
use crate::support::{check, findings, probe};

const COACHING_CHECKS: [&str; 12] = [
    "coaching/open",
    "coaching/open-again",
    "coaching/conflict",
    "coaching/unknown-run",
    "coaching/failure",
    "coaching/suboptimal",
    "coaching/format",
    "coaching/resume",
    "coaching/reinject",
    "coaching/close-waits",
    "coaching/close",
    "coaching/close-again",
];

/// One way a coaching agent can be wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// The same PUT again is a 409.
    PutNotIdempotent,
    /// POST /v1/coaching for a run without a session is coached (200).
    UnknownRunOk,
    /// DELETE answers at once, while requests of the session still run.
    DeleteDoesNotWait,
    /// Responses echo another request_id.
    BreaksValidateRequest,
    /// Advertises coaching_resume, answers as if extra_keys.coaching were absent.
    IgnoresReplaceSay,
    /// The coach wraps each payload in a `coaching` key (the demo's shape
    /// before it was fixed), so GEN re-injects `extra_keys.coaching.coaching`.
    WrapsProposals,
}

#[derive(Default)]
struct Session {
    config: Option<CoachingSessionConfig>,
    active: usize,
    closing: bool,
}

type Sessions = Arc<Mutex<HashMap<String, Session>>>;

fn json(status: u16, body: impl Into<String>) -> Reply {
    Reply::json(status, body.into())
}

async fn handle(fault: Fault, sessions: Sessions, req: Recorded) -> Reply {
    let (method, path, body) = (req.method.as_str(), req.path_only(), &req.body);
    if let Some(id) = path.strip_prefix("/v1/coaching/sessions/") {
        // The probe's run ids need no percent-decoding.
        let id = id.to_owned();
        if method == "PUT" {
            let config = match CoachingSessionConfig::from_slice(body) {
                Ok(c) => c,
                Err(e) => return json(422, e.to_fastapi_body().to_json_string()),
            };
            let mut map = sessions.lock().unwrap();
            if let Some(s) = map.get(&id) {
                let same = s.config.as_ref() == Some(&config);
                if s.closing || !same || fault == Fault::PutNotIdempotent {
                    return json(409, r#"{"detail":"conflict"}"#);
                }
                return Reply::empty(204);
            }
            map.insert(
                id,
                Session {
                    config: Some(config),
                    ..Session::default()
                },
            );
            return Reply::empty(204);
        }
        if method == "DELETE" {
            {
                let mut map = sessions.lock().unwrap();
                match map.get_mut(&id) {
                    None => return Reply::empty(204),
                    Some(s) => s.closing = true,
                }
            }
            if fault != Fault::DeleteDoesNotWait {
                loop {
                    let active = sessions.lock().unwrap().get(&id).map_or(0, |s| s.active);
                    if active == 0 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            sessions.lock().unwrap().remove(&id);
            return Reply::empty(204);
        }
        return json(405, r#"{"detail":"Method Not Allowed"}"#);
    }
    match (method, path) {
        ("GET", "/health") => json(200, r#"{"status":"ready"}"#),
        ("GET", "/v1/info") => json(
            200,
            r#"{"protocol_version":"2.0","agent_id":"fake-coach","agent_version":"0.0.1",
               "specialized_coaching":["failure","suboptimal","format"],"coaching_resume":true,
               "coaching_unavailable_reason":null,"capabilities":{"inference":true,"coaching":true}}"#,
        ),
        ("POST", "/v1/coaching") => {
            let request = match SpecializedCoachingRequest::from_slice(body) {
                Ok(r) => r,
                Err(e) => return json(422, e.to_fastapi_body().to_json_string()),
            };
            let run = request.run_id().to_owned();
            let known = {
                let mut map = sessions.lock().unwrap();
                match map.get_mut(&run).filter(|s| !s.closing) {
                    Some(s) => {
                        s.active += 1;
                        true
                    }
                    None => false,
                }
            };
            if !known && fault != Fault::UnknownRunOk {
                return json(404, r#"{"detail":"Unknown or closing coaching session"}"#);
            }
            if let Some(ms) = request
                .additional_info()
                .get("delay_ms")
                .and_then(Json::as_number)
                .and_then(|n| n.as_u64())
            {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if known {
                if let Some(s) = sessions.lock().unwrap().get_mut(&run) {
                    s.active -= 1;
                }
            }
            let id = match fault {
                Fault::BreaksValidateRequest => "made-up-id",
                _ => request.request_id(),
            };
            let proposals = request
                .reinjection_points()
                .iter()
                .map(|p| {
                    let payload = ReplaceSay::new("fixed").unwrap();
                    if fault == Fault::WrapsProposals {
                        let mut keys = Object::new();
                        keys.insert("coaching", Json::Object(payload.to_object()));
                        return CoachingProposal::raw(p.id(), keys);
                    }
                    CoachingProposal::new(p.id(), payload)
                })
                .collect();
            let response = SpecializedCoachingResponse::corrected(id, proposals).unwrap();
            json(200, response.to_json_string())
        }
        ("POST", "/v1/responses") => {
            let request = match AgentRequest::from_slice(body) {
                Ok(r) => r,
                Err(e) => return json(422, e.to_fastapi_body().to_json_string()),
            };
            let response = AgentResponse::build(&request, |input, _| {
                let ordinary = || AgentDecision::say(format!("ok: {}", input.instruction.content));
                let coached = CoachingPayload::from_extra_keys(&input.extra_keys);
                let decision = match coached {
                    _ if fault == Fault::IgnoresReplaceSay => ordinary(),
                    None => ordinary(),
                    Some(Ok(CoachingPayload::ReplaceSay(say))) => {
                        AgentDecision::say(say.text.as_str())
                    }
                    Some(Ok(CoachingPayload::ReplaceDecision(decision))) => decision,
                    // A payload this agent cannot read: an error candidate,
                    // as full-history and the demo answer.
                    Some(Ok(other)) => {
                        let e = AgentError::new("invalid_output", other.kind().to_owned());
                        return Candidate::new(input.memory.clone(), e);
                    }
                    Some(Err(e)) => {
                        let e = AgentError::new("invalid_output", e.to_string());
                        return Candidate::new(input.memory.clone(), e);
                    }
                };
                Candidate::new(input.memory.clone(), decision)
            });
            json(200, response.to_json_string())
        }
        (_, "/health" | "/v1/info" | "/v1/responses" | "/v1/coaching") => {
            json(405, r#"{"detail":"Method Not Allowed"}"#)
        }
        _ => json(404, r#"{"detail":"Not Found"}"#),
    }
}

/// A fake coaching agent on 127.0.0.1 (a stub server of the test kit whose
/// handler waits: DELETE for the session's requests in flight).
fn fake_coach(fault: Fault) -> StubServer {
    let sessions: Sessions = Arc::default();
    StubServer::start_async(Options::default(), move |req| {
        Box::pin(handle(fault, Arc::clone(&sessions), req))
    })
}

fn probe_fake(fault: Fault) -> (i32, Value) {
    let server = fake_coach(fault);
    let (code, report, stderr) = probe(&server.url(), &[]);
    assert!(
        report.is_object(),
        "{fault:?}: no JSON report (exit {code}): {stderr}"
    );
    (code, report)
}

/// Exit 1, check `name` failed with a finding `code` whose message or
/// impact mentions `needle`; every other coaching check passed.
fn assert_fails(fault: Fault, name: &str, code: &str, needle: &str) {
    let (exit, report) = probe_fake(fault);
    assert_eq!(exit, 1, "{fault:?} should fail the probe: {report:#}");
    let c = check(&report, name);
    assert_eq!(c["status"], "fail", "{fault:?}: {name} should fail: {c:#}");
    let found = findings(c)
        .into_iter()
        .any(|(k, loc, msg)| k == code && (loc.contains(needle) || msg.contains(needle)));
    assert!(
        found,
        "{fault:?}: {name} should report {code} mentioning {needle:?}: {c:#}"
    );
    let impact = c["findings"][0]["impact"].as_str().unwrap_or_default();
    assert!(
        impact.contains("GEN"),
        "{fault:?}: the finding names the GEN step: {c:#}"
    );
}

#[test]
fn the_fake_coach_without_a_fault_passes_every_coaching_check() {
    let (exit, report) = probe_fake(Fault::None);
    assert_eq!(exit, 0, "{report:#}");
    assert_eq!(report["summary"]["failed"], 0, "{report:#}");
    for name in COACHING_CHECKS {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report:#}");
    }
}

#[test]
fn the_demo_agent_passes_with_coaching_on_and_off() {
    let server = RealServer::start_with(Config::default());
    let (exit, report, stderr) = probe(&server.url(), &[]);
    assert_eq!(exit, 0, "{report:#} {stderr}");
    for name in COACHING_CHECKS {
        assert_eq!(check(&report, name)["status"], "pass", "{name}: {report:#}");
    }

    let server = RealServer::start_demo(DemoAgent::new().without_coaching(), Config::default());
    let (exit, report, stderr) = probe(&server.url(), &[]);
    assert_eq!(exit, 0, "{report:#} {stderr}");
    assert_eq!(report["summary"]["failed"], 0, "{report:#}");
    assert_eq!(report["summary"]["warnings"], 0, "{report:#}");
    for name in COACHING_CHECKS {
        let c = check(&report, name);
        assert_eq!(c["status"], "skip", "{name}: {c:#}");
        assert!(c["reason"].as_str().unwrap().contains("advertise"), "{c:#}");
    }
}

#[test]
fn a_put_that_is_not_idempotent() {
    assert_fails(
        Fault::PutNotIdempotent,
        "coaching/open-again",
        "http_status",
        "409",
    );
}

#[test]
fn an_unknown_run_answered_200() {
    assert_fails(
        Fault::UnknownRunOk,
        "coaching/unknown-run",
        "not_404",
        "200",
    );
    let (_, report) = probe_fake(Fault::UnknownRunOk);
    assert_eq!(check(&report, "coaching/close")["status"], "fail");
}

#[test]
fn a_delete_that_does_not_wait() {
    assert_fails(
        Fault::DeleteDoesNotWait,
        "coaching/close-waits",
        "delete_did_not_wait",
        "before the session's coaching request",
    );
}

#[test]
fn responses_that_break_validate_request() {
    let (exit, report) = probe_fake(Fault::BreaksValidateRequest);
    assert_eq!(exit, 1, "{report:#}");
    for kind in ["coaching/failure", "coaching/suboptimal", "coaching/format"] {
        let c = check(&report, kind);
        assert_eq!(c["status"], "fail", "{kind}: {c:#}");
        assert!(
            findings(c)
                .iter()
                .any(|(code, _, msg)| code == "validate_request" && msg.contains("request_id")),
            "{kind}: {c:#}"
        );
    }
}

#[test]
fn coaching_resume_advertised_but_replace_say_ignored() {
    assert_fails(
        Fault::IgnoresReplaceSay,
        "coaching/resume",
        "coaching_ignored",
        "extra_keys.coaching asked to say",
    );
}

#[test]
fn proposals_wrapped_in_a_coaching_key_fail_the_reinjection() {
    assert_fails(
        Fault::WrapsProposals,
        "coaching/reinject",
        "proposal_not_applied",
        "extra_keys.coaching = {\"coaching\":",
    );
    let (_, report) = probe_fake(Fault::WrapsProposals);
    let c = check(&report, "coaching/reinject");
    let fix = c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "proposal_not_applied")
        .and_then(|f| f["fix"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        fix.contains("so GEN sent extra_keys.coaching = {\"coaching\": {...}}")
            && fix.contains("payload itself"),
        "the fix says what GEN sends: {c:#}"
    );
    // Every repair check warns on the wrapped proposals it got.
    for kind in ["coaching/failure", "coaching/suboptimal", "coaching/format"] {
        let c = check(&report, kind);
        assert!(
            findings(c)
                .iter()
                .any(|(code, _, msg)| code == "proposal_payload" && msg.contains("wraps")),
            "{kind}: {c:#}"
        );
    }
}
