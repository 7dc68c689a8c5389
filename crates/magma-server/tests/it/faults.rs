//! Failing candidates, panics and miscounts: never a malformed 200, never a
//! dead server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use magma_server::{
    Agent, AgentDecision, AgentInfo, AgentInput, AgentRequest, Candidate, CandidateStatus, Json,
    Rejection,
};

use crate::support::{TestAgent, TestServer, check_response, user_request};

#[tokio::test]
async fn a_failing_candidate_is_an_error_candidate_in_its_place_with_its_memory() {
    let server = TestServer::start(TestAgent::default()).await;
    let request = r#"{"request_id":"mixed","inputs":[
        {"id":0,"instruction":{"type":"user","content":"fine"},"memory":{"a":1},"num_outputs":2},
        {"id":1,"instruction":{"type":"user","content":"__error__"},"memory":{"b":[1,2]},"num_outputs":2},
        {"id":2,"instruction":{"type":"user","content":"fine too"},"memory":{"c":"x"}}]}"#;
    let response = check_response(request, &server.respond(request).await);
    let statuses: Vec<_> = response.iter().map(|c| (c.source_id, c.status())).collect();
    use CandidateStatus::{Completed, Error};
    assert_eq!(
        statuses,
        [
            (0, Completed),
            (0, Completed),
            (1, Error),
            (1, Error),
            (2, Completed)
        ]
    );
    let failed = &response[2];
    assert_eq!(
        Json::Object(failed.memory.clone()).to_json_string(),
        r#"{"b":[1,2]}"#
    );
    let error = failed.outcome.error().expect("error");
    assert_eq!(error.code.as_str(), "demo_error");
    assert_eq!(error.component.as_deref(), Some("demo"));
}

#[tokio::test]
async fn a_panic_is_a_json_500_and_the_server_keeps_serving() {
    let agent = TestAgent::default();
    let server = TestServer::start(agent.clone()).await;
    let reply = server.respond(user_request("boom", "panic", 1)).await;
    let detail = reply.expect_detail(500);
    assert!(detail.contains("Internal Server Error"), "{detail}");
    assert!(
        !detail.contains("asked to panic"),
        "the panic message stays in the log"
    );
    assert_eq!(reply.header("x-request-id"), Some("boom"));
    // A panic in one input of a batch fails that request only.
    let batch = r#"{"request_id":"b","inputs":[
        {"id":0,"instruction":{"type":"user","content":"fine"}},
        {"id":1,"instruction":{"type":"user","content":"panic"}}]}"#;
    server.respond(batch).await.expect_detail(500);
    // Still serving, repeatedly.
    for i in 0..3 {
        let request = user_request(&format!("after-{i}"), "hello", 1);
        check_response(&request, &server.respond(request.clone()).await);
    }
    server.get("/health").await.expect(200);
}

struct PanickyInfo;

impl Agent for PanickyInfo {
    fn info(&self) -> AgentInfo {
        panic!("info is broken")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let c = Candidate::new(input.memory.clone(), AgentDecision::say("ok"));
        Ok(vec![c; input.num_outputs.get() as usize])
    }
}

#[tokio::test]
async fn a_panic_outside_inference_is_a_json_500_too() {
    let server = TestServer::start(PanickyInfo).await;
    server.get("/v1/info").await.expect_detail(500);
    server.get("/health").await.expect(200);
    let request = user_request("ok", "x", 3);
    check_response(&request, &server.respond(request.clone()).await);
}

#[tokio::test]
async fn too_many_or_too_few_candidates_are_a_json_500_never_a_200() {
    let server = TestServer::start(TestAgent::default()).await;
    for (content, found) in [("one too many", 3), ("one too few", 1)] {
        let detail = server
            .respond(user_request("count", content, 2))
            .await
            .expect_detail(500);
        assert!(detail.contains("wrong number of candidates"), "{detail}");
        assert!(
            detail.contains(&format!("asked for 2 candidates, got {found}")),
            "{detail}"
        );
    }
}

/// Batches the whole request into one call; can be told to lose an input.
#[derive(Clone, Default)]
struct Batcher {
    batches: Arc<AtomicUsize>,
    single_calls: Arc<AtomicUsize>,
}

impl Agent for Batcher {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("batcher", "1")
    }

    async fn respond(&self, _: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        self.single_calls.fetch_add(1, Ordering::SeqCst);
        Err(Rejection::new("not used"))
    }

    async fn respond_batch(
        &self,
        request: &AgentRequest,
    ) -> Result<Vec<Vec<Candidate>>, Rejection> {
        self.batches.fetch_add(1, Ordering::SeqCst);
        let mut out: Vec<Vec<Candidate>> = request
            .inputs()
            .iter()
            .map(|input| {
                (0..input.num_outputs.get())
                    .map(|k| {
                        let say = format!("{}#{k}", input.instruction.content);
                        Candidate::new(input.memory.clone(), AgentDecision::say(say))
                    })
                    .collect()
            })
            .collect();
        if request.request_id() == "drop-one" {
            out.pop();
        }
        Ok(out)
    }
}

#[tokio::test]
async fn a_batching_agent_sees_whole_requests_and_the_server_orders_the_answers() {
    let agent = Batcher::default();
    let server = TestServer::start(agent.clone()).await;
    let request = r#"{"request_id":"batch","inputs":[
        {"id":5,"instruction":{"type":"user","content":"a"},"num_outputs":2},
        {"id":2,"instruction":{"type":"user","content":"b"}},
        {"id":9,"instruction":{"type":"env","content":"c"},"num_outputs":3}]}"#;
    let response = check_response(request, &server.respond(request).await);
    let says: Vec<String> = response
        .iter()
        .map(|c| c.outcome.decision().unwrap().say.clone())
        .collect();
    assert_eq!(says, ["a#0", "a#1", "b#0", "c#0", "c#1", "c#2"]);
    assert_eq!(agent.batches.load(Ordering::SeqCst), 1);
    assert_eq!(agent.single_calls.load(Ordering::SeqCst), 0);

    // An empty request is answered without bothering the agent.
    let empty = server.respond(r#"{"request_id":"none","inputs":[]}"#).await;
    assert_eq!(empty.expect(200).to_json_string(), "[]");
    assert_eq!(agent.batches.load(Ordering::SeqCst), 1);

    let lossy = request.replace("\"batch\"", "\"drop-one\"");
    let detail = server.respond(lossy).await.expect_detail(500);
    assert!(
        detail.contains("expected candidates for 3 inputs, got 2"),
        "{detail}"
    );
}
