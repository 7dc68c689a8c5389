//! The coach (GEN's repair loop) and re-injected inputs, against the fake
//! provider standing in for the session's model backend.

use magma_client::RawRequest;
use magma_client::http::StatusCode;
use magma_server::{AgentRequest, Json};
use serde_json::{Value, json};

use crate::fake::FakeProvider;
use crate::{AgentProcess, serde_json_free_input};

/// Opens the coaching session `run` whose one backend is `endpoint`.
fn open_session(client: &magma_client::Client, run: &str, endpoint: &str) {
    let config = json!({
        "backends": {"coach": {
            "type": "openai",
            "endpoint": endpoint,
            "default_model": "coach-model",
            "headers": {"Content-type": "application/json", "X-Run": run},
            "timeout": 5.0,
            "max_retry": 0,
        }},
        "capture_logs": true,
    });
    let put = RawRequest::new(
        magma_client::http::Method::PUT,
        format!("/v1/coaching/sessions/{run}"),
    )
    .json(config.to_string());
    let answer = client.execute(put).unwrap();
    assert_eq!(
        answer.status(),
        StatusCode::NO_CONTENT,
        "{:?}",
        answer.body()
    );
}

/// A failure repair of a step whose call pressed `sw9`, with one
/// replacement point at that step.
fn failure_request(run: &str, content: &str) -> Value {
    let input = input(content, 1);
    json!({
        "run_id": run,
        "request_id": "repair-1",
        "kind": "failure",
        "stage": {"id": 0, "goal": "Press sw1.", "hint": null},
        "active_errors": [{"code": "environment", "description": "sw9 does not exist", "details": {}}],
        "target_step_id": 3,
        "trajectory": [{
            "id": 3,
            "input": input,
            "output": {"say": "", "tool_calls": [
                {"name": "press_button", "arguments": {"id": "sw9"}, "target_robot_name": "r1"}]},
            "error": null,
            "internal_steps": [],
            "execution": {"execution_results": [
                {"robot": "r1", "tool": "press_button", "result": false, "error_flag": true,
                 "message": "No objects corresponding to id = sw9."}]},
        }],
        "reinjection_points": [{"id": "replacement", "input_step_id": 3, "input": null}],
        "additional_info": {},
    })
}

fn coach(client: &magma_client::Client, request: &Value) -> Value {
    let post = RawRequest::post("/v1/coaching").json(request.to_string());
    let answer = client.execute(post).unwrap();
    assert_eq!(answer.status(), StatusCode::OK, "{:?}", answer.body());
    serde_json::from_slice(answer.body()).unwrap()
}

/// The tests' one robot input (see `serde_json_free_input`).
fn input(content: &str, num_outputs: u64) -> Value {
    serde_json::from_str(&serde_json_free_input("user", content, num_outputs, false)).unwrap()
}

/// A one-input request of `input` with `extra_keys.coaching` set to `payload`.
fn reinjection(mut input: Value, payload: Value) -> AgentRequest {
    input["extra_keys"]["coaching"] = payload;
    let text = json!({"request_id": "again", "inputs": [input]}).to_string();
    AgentRequest::from_slice(text.as_bytes()).unwrap()
}

fn payloads(provider: &FakeProvider) -> Vec<Value> {
    provider
        .payloads()
        .iter()
        .map(|p| serde_json::from_str(&p.to_json_string()).unwrap())
        .collect()
}

#[test]
fn coach_asks_the_session_backend_and_proposes_the_decision_it_then_applies() {
    let own = FakeProvider::start(true);
    let backend = FakeProvider::start(true);
    let agent = AgentProcess::start(&own, &[]);
    let client = agent.ready_client();

    let info = client.info().unwrap();
    assert_eq!(
        info.specialized_coaching,
        ["failure", "suboptimal", "format"].map(String::from)
    );
    assert!(info.coaching_resume);

    open_session(
        &client,
        "run-1",
        &format!("{}/chat/completions", backend.base_url()),
    );
    let answer = coach(&client, &failure_request("run-1", "Press sw1."));
    assert_eq!(answer["status"], "corrected", "{answer}");
    let proposals = answer["proposals"].as_array().unwrap();
    assert_eq!(proposals.len(), 1);
    assert_eq!(proposals[0]["reinjection_point_id"], "replacement");
    // The payload itself, not wrapped in a `coaching` key.
    let payload = &proposals[0]["extra_keys"];
    assert_eq!(
        payload,
        &json!({"kind": "replace_decision", "decision": {"say": "", "tool_calls": [
            {"name": "press_button", "arguments": {}, "target_robot_name": "r1"}]}}),
    );
    // The captured log holds the prompt and the backend's answer.
    let logs = answer["logs"].as_array().unwrap();
    assert!(
        logs.iter()
            .any(|l| l["content"].as_str().unwrap().contains("# llm-agent coach")),
        "{answer}"
    );

    // The session's backend was asked, with its model and the rejection;
    // the agent's own provider was not.
    assert!(own.payloads().is_empty());
    let asked = payloads(&backend);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["model"], "coach-model");
    assert_eq!(asked[0]["temperature"], json!(0));
    let system = asked[0]["messages"][0]["content"].as_str().unwrap();
    for needle in [
        "An earlier answer to this situation was rejected (failure repair)",
        "Goal of the stage: Press sw1.",
        "Error (environment): sw9 does not exist",
        "The rejected answer: called press_button({\"id\":\"sw9\"}) on r1",
        "What its execution reported: No objects corresponding to id = sw9.",
    ] {
        assert!(system.contains(needle), "{needle:?} not in {system}");
    }

    // GEN re-injects the proposal: both candidates are exactly that
    // decision, without a model call.
    let request = reinjection(input("Press sw1.", 2), payload.clone());
    let response = client.respond(&request).unwrap();
    assert_eq!(response.candidates().len(), 2);
    for candidate in response.candidates() {
        let decision = candidate.outcome.decision().expect("a completed candidate");
        assert_eq!(decision.say, "");
        assert_eq!(decision.tool_calls.len(), 1);
        assert_eq!(decision.tool_calls[0].name.as_str(), "press_button");
        assert_eq!(decision.tool_calls[0].target_robot_name.as_str(), "r1");
        let history = candidate
            .memory
            .get("history")
            .and_then(Json::as_array)
            .unwrap();
        assert_eq!(history.len(), 4, "two entries appended");
        let origin = candidate.internal_steps[0]
            .get("origin")
            .and_then(Json::as_str);
        assert_eq!(origin, Some("coaching"));
    }
    assert!(
        own.payloads().is_empty(),
        "a re-injected input calls no model"
    );
    assert_eq!(backend.payloads().len(), 1);

    // A payload that is not one gives an invalid_output error candidate.
    let wrapped = json!({"coaching": {"kind": "replace_say", "text": "hi"}});
    let request = reinjection(input("Press sw1.", 1), wrapped);
    let response = client.respond(&request).unwrap();
    let error = response.candidates()[0]
        .outcome
        .error()
        .expect("an error candidate");
    assert_eq!(error.code, "invalid_output");
    assert!(
        error.message.contains("invalid coaching payload"),
        "{}",
        error.message
    );
}

#[test]
fn backend_failures_become_error_or_abandoned_with_a_reason() {
    let own = FakeProvider::start(true);
    let backend = FakeProvider::start(true);
    let agent = AgentProcess::start(&own, &[]);
    let client = agent.ready_client();
    open_session(
        &client,
        "run-2",
        &format!("{}/chat/completions", backend.base_url()),
    );

    // The backend answers 500: error.
    let answer = coach(&client, &failure_request("run-2", "Press sw1 #500"));
    assert_eq!(answer["status"], "error", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(
        reason.contains("the session's backend coach failed (provider_status)"),
        "{reason}"
    );
    assert!(answer["proposals"].as_array().unwrap().is_empty());

    // The backend's answer is not a decision: abandoned.
    let answer = coach(&client, &failure_request("run-2", "Press sw1 #garbage"));
    assert_eq!(answer["status"], "abandoned", "{answer}");
    assert!(
        answer["reason"]
            .as_str()
            .unwrap()
            .contains("no usable decision"),
        "{answer}"
    );

    // Nothing listens at the backend: error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    open_session(
        &client,
        "run-3",
        &format!("http://127.0.0.1:{port}/v1/chat/completions"),
    );
    let answer = coach(&client, &failure_request("run-3", "Press sw1."));
    assert_eq!(answer["status"], "error", "{answer}");
    assert!(
        answer["reason"]
            .as_str()
            .unwrap()
            .contains("transport_error"),
        "{answer}"
    );
}
