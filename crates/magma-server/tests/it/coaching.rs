//! The coaching routes over real sockets: every row of the route table,
//! the session state machine under concurrency, failing coaches, log
//! capture, `/v1/info`, and the demo agent's coach and `coaching_resume`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use magma_server::demo::DemoAgent;
use magma_server::magma_protocol::coaching::{
    CoachingKind, CoachingLog, CoachingProposal, CoachingSessionConfig, CoachingStatus,
    SpecializedCoachingRequest, SpecializedCoachingResponse,
};
use magma_server::{
    AgentDecision, AgentInfo, AgentInput, AgentOutput, AgentRequest, Candidate, CoachError,
    CoachingContext, Config, Json, Object, Outcome, Rejection, json,
};

use crate::support::{Reply, TestServer, check_response, send, within};

pub(crate) const SESSIONS: &str = "/v1/coaching/sessions/";

fn config(model: &str, capture_logs: bool) -> String {
    json!({
        "backends": {"gen": {"type": "openai", "endpoint": "http://127.0.0.1:9/v1",
                             "default_model": model}},
        "capture_logs": capture_logs
    })
    .to_json_string()
}

fn request(run_id: &str, request_id: &str, kind: &str, additional: Json) -> String {
    json!({
        "run_id": run_id,
        "request_id": request_id,
        "kind": kind,
        "stage": {"id": 1, "goal": "Press sw0.", "hint": "Use press_button."},
        "diagnosis": {"explanation": "Wrong button.", "expected_decision": "Press sw0 now."},
        "target_step_id": 4,
        "trajectory": [
            {"id": 4, "input": {"id": 0, "instruction": {"type": "user", "content": "Press sw0."}}}
        ],
        "reinjection_points": [
            {"id": "replacement", "input_step_id": 4},
            {"id": "recovery", "input": {"id": 1, "instruction": {"type": "env", "content": "{}"}}}
        ],
        "additional_info": additional
    })
    .to_json_string()
}

pub(crate) async fn put(server: &TestServer, path_id: &str, body: String) -> Reply {
    send(
        server.addr,
        Method::PUT,
        &format!("{SESSIONS}{path_id}"),
        &[("content-type", "application/json")],
        Bytes::from(body),
    )
    .await
}

pub(crate) async fn delete(server: &TestServer, path_id: &str) -> Reply {
    send(
        server.addr,
        Method::DELETE,
        &format!("{SESSIONS}{path_id}"),
        &[],
        Bytes::new(),
    )
    .await
}

pub(crate) async fn coach(server: &TestServer, body: &str) -> Reply {
    server.post_json("/v1/coaching", body.to_owned()).await
}

pub(crate) fn expect_204(reply: &Reply) {
    assert_eq!(reply.status.as_u16(), 204, "body: {}", reply.text());
    assert!(reply.body.is_empty());
}

/// A 200 answer, parsed and checked against its request as GEN does.
fn answered(body: &str, reply: &Reply) -> SpecializedCoachingResponse {
    reply.expect(200);
    let request = SpecializedCoachingRequest::from_slice(body.as_bytes()).expect("request");
    let response = SpecializedCoachingResponse::from_slice(&reply.body).expect("response");
    response
        .validate_request(&request)
        .expect("validate_request");
    response
}

/// A coach whose behaviour the request's `additional_info.mode` chooses;
/// it counts the requests running at once.
#[derive(Clone, Default)]
struct TestCoach {
    active: Arc<AtomicUsize>,
    max_active: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    /// When the last coach call returned, and when the last session was closed.
    finished_at: Arc<Mutex<Option<Instant>>>,
    closed_at: Arc<Mutex<Option<Instant>>>,
}

impl magma_server::Agent for TestCoach {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("test-coach", "1.0.0")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        if let Some(ms) = input.extra_keys.get("delay_ms").and_then(Json::as_number) {
            let ms = ms.as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(vec![Candidate::new(
            Object::new(),
            AgentDecision::say("ok"),
        )])
    }

    fn coaching_kinds(&self) -> &[CoachingKind] {
        &[CoachingKind::Failure, CoachingKind::Format]
    }

    async fn open_coaching_session(
        &self,
        _run_id: &str,
        config: &CoachingSessionConfig,
    ) -> Result<(), CoachError> {
        match config
            .backends()
            .iter()
            .any(|(_, b)| b.endpoint().contains("unreachable"))
        {
            true => Err("backend unreachable".into()),
            false => Ok(()),
        }
    }

    async fn coach(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> Result<SpecializedCoachingResponse, CoachError> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        let _leave = Leave(&self.active);
        let info = request.additional_info();
        if let Some(ms) = info.get("delay_ms").and_then(Json::as_number) {
            let ms = ms.as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        *self.finished_at.lock().unwrap() = Some(Instant::now());
        let id = request.request_id();
        let backends: Vec<&str> = context.config().backends().keys().collect();
        context.log(format!("captured: backends {}", backends.join(",")));
        let proposal = |point: &str| {
            let mut keys = Object::new();
            keys.insert("coaching", json!({"kind": "replace_say", "text": "fixed"}));
            keys.insert("backends", Json::from(backends.join(",")));
            CoachingProposal::raw(point, keys)
        };
        let own_log = || CoachingLog::new("failure", "own log").expect("log");
        match info.get("mode").and_then(Json::as_str).unwrap_or("") {
            "panic" => panic!("coach exploded"),
            "fail" => Err("the backend said no".into()),
            "wrong_id" => Ok(SpecializedCoachingResponse::corrected(
                "another-id",
                vec![proposal("replacement")],
            )?),
            "unknown_point" => Ok(SpecializedCoachingResponse::corrected(
                id,
                vec![proposal("nowhere")],
            )?),
            "big" => {
                // An answer of about `bytes` bytes.
                let n = info.get("bytes").and_then(Json::as_number);
                let n = n.and_then(|n| n.as_u64()).unwrap_or(0) as usize;
                let mut keys = Object::new();
                keys.insert("text", Json::from("b".repeat(n)));
                Ok(SpecializedCoachingResponse::corrected(
                    id,
                    vec![CoachingProposal::raw("replacement", keys)],
                )?)
            }
            "abandon" => Ok(SpecializedCoachingResponse::abandoned(id, "cannot fix")?
                .with_logs(vec![own_log()])),
            "context" => {
                let ctx = magma_server::RequestContext::current().expect("a request context");
                let mut keys = Object::new();
                keys.insert("request_id", Json::from(ctx.request_id()));
                keys.insert("run_id", Json::from(context.run_id()));
                Ok(SpecializedCoachingResponse::corrected(
                    id,
                    vec![CoachingProposal::raw("replacement", keys)],
                )?)
            }
            _ => Ok(SpecializedCoachingResponse::corrected(
                id,
                vec![proposal("replacement"), proposal("recovery")],
            )?
            .with_logs(vec![own_log()])),
        }
    }

    async fn close_coaching_session(&self, _run_id: &str, _config: &CoachingSessionConfig) {
        *self.closed_at.lock().unwrap() = Some(Instant::now());
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn info_advertises_what_the_agent_implements() {
    let server = TestServer::start(DemoAgent::new()).await;
    let info = server.get("/v1/info").await.expect(200);
    assert_eq!(
        info.get("specialized_coaching").unwrap().to_json_string(),
        r#"["failure","suboptimal","format"]"#
    );
    assert_eq!(info.get("coaching_resume"), Some(&Json::Bool(true)));
    let caps = info.get("capabilities").unwrap();
    assert_eq!(caps.get("coaching"), Some(&Json::Bool(true)));
    assert_eq!(caps.get("inference"), Some(&Json::Bool(true)));

    let off = TestServer::start(DemoAgent::new().without_coaching()).await;
    let info = off.get("/v1/info").await.expect(200);
    assert_eq!(
        info.get("specialized_coaching").unwrap().to_json_string(),
        "[]"
    );
    assert_eq!(info.get("coaching_resume"), Some(&Json::Bool(false)));
    assert_eq!(info.get("capabilities").unwrap().get("coaching"), None);

    // Written by hand in info() without a coach: not advertised.
    struct Boastful;
    impl magma_server::Agent for Boastful {
        fn info(&self) -> AgentInfo {
            let mut info = AgentInfo::new("boastful", "1");
            info.specialized_coaching = vec!["failure".into()];
            info.coaching_resume = true;
            info.capabilities.insert("coaching", true);
            info
        }
        async fn respond(&self, _: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
            Ok(Vec::new())
        }
    }
    let boastful = TestServer::start(Boastful).await;
    let info = boastful.get("/v1/info").await.expect(200);
    assert_eq!(
        info.get("specialized_coaching").unwrap().to_json_string(),
        "[]"
    );
    assert_eq!(info.get("coaching_resume"), Some(&Json::Bool(false)));
    assert_eq!(
        info.get("capabilities").unwrap().get("coaching"),
        Some(&Json::Bool(false))
    );
}

#[tokio::test]
async fn put_is_idempotent_and_conflicts_answer_409() {
    let server = TestServer::start(TestCoach::default()).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let detail = put(&server, "run-1", config("other", true))
        .await
        .expect_detail(409);
    assert_eq!(
        detail,
        "Coaching session already has a different configuration or is closing"
    );
    put(&server, "run-1", config("m", false))
        .await
        .expect_detail(409);
    // Another run id is another session.
    expect_204(&put(&server, "run-2", config("other", true)).await);
}

#[tokio::test]
async fn invalid_session_bodies_are_422_in_fastapis_shape() {
    let server = TestServer::start(TestCoach::default()).await;
    let reply = put(&server, "run-1", r#"{"backends": {}}"#.to_owned()).await;
    let body = reply.expect(422);
    let detail = body.get("detail").and_then(Json::as_array).expect("a list");
    let loc = detail[0].get("loc").and_then(Json::as_array).expect("loc");
    assert_eq!(loc[0], Json::from("body"));
    let reply = put(&server, "run-1", "not json".to_owned()).await;
    reply.expect(422);
    let reply = put(&server, "run-1", String::new()).await;
    reply.expect(422);
    // Nothing was opened.
    let body = request("run-1", "r1", "failure", json!({}));
    coach(&server, &body).await.expect_detail(404);
}

#[tokio::test]
async fn a_coach_that_refuses_the_session_answers_503() {
    let server = TestServer::start(TestCoach::default()).await;
    let body = config("m", true).replace("127.0.0.1:9", "unreachable");
    let detail = put(&server, "run-1", body).await.expect_detail(503);
    assert_eq!(
        detail,
        "Unable to initialize LLM coaching; verify backend connectivity from the agent"
    );
    let body = request("run-1", "r1", "failure", json!({}));
    coach(&server, &body).await.expect_detail(404);
}

#[tokio::test]
async fn post_answers_200_with_captured_logs_first_and_the_backends_reach_the_coach() {
    let server = TestServer::start(TestCoach::default()).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let body = request("run-1", "r1", "failure", json!({}));
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Corrected);
    assert_eq!(response.proposals().len(), 2);
    let keys = &response.proposals()[0].extra_keys;
    assert_eq!(keys.get("backends"), Some(&Json::from("gen")));
    let logs: Vec<&str> = response.logs().iter().map(CoachingLog::content).collect();
    // Captured first, then the coach's own; corrected with a capture: no summary.
    assert_eq!(logs, ["captured: backends gen", "own log"]);
    assert!(
        response
            .logs()
            .iter()
            .all(|l| l.coaching_type() == "failure")
    );
}

#[tokio::test]
async fn without_capture_logs_only_the_coachs_own_logs_come_back() {
    let server = TestServer::start(TestCoach::default()).await;
    expect_204(&put(&server, "run-1", config("m", false)).await);
    let body = request("run-1", "r1", "failure", json!({}));
    let response = answered(&body, &coach(&server, &body).await);
    let logs: Vec<&str> = response.logs().iter().map(CoachingLog::content).collect();
    assert_eq!(logs, ["own log"]);
    let body = request("run-1", "r2", "failure", json!({"mode": "fail"}));
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Error);
    assert!(response.logs().is_empty());
}

#[tokio::test]
async fn failing_panicking_and_inconsistent_coaches_answer_status_error() {
    let server = TestServer::start(TestCoach::default()).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    for (mode, reason) in [
        ("fail", "the backend said no"),
        ("panic", "coach exploded"),
        ("wrong_id", "request_id"),
        ("unknown_point", "Unknown reinjection point"),
    ] {
        let body = request(
            "run-1",
            &format!("req-{mode}"),
            "failure",
            json!({"mode": mode}),
        );
        let reply = coach(&server, &body).await;
        let response = answered(&body, &reply);
        assert_eq!(response.status(), CoachingStatus::Error, "{mode}");
        let got = response.reason().unwrap_or_default();
        assert!(got.contains(reason), "{mode}: {got}");
        assert!(response.proposals().is_empty());
        // magma-core's Markdown summary, with the reason.
        let summary = response.logs().last().expect("a log").content();
        assert!(
            summary.starts_with("# Coaching error\n\nRun: run-1\n"),
            "{summary}"
        );
        assert!(
            summary.contains(&format!("Request: req-{mode}\nNode: 4\n\n")),
            "{summary}"
        );
        assert!(summary.contains(got), "{summary}");
    }
    // Still serving, on every route.
    server.get("/health").await.expect(200);
    let body = request("run-1", "after", "failure", json!({}));
    assert_eq!(
        answered(&body, &coach(&server, &body).await).status(),
        CoachingStatus::Corrected
    );
}

#[tokio::test]
async fn abandoned_answers_carry_the_summary_after_the_captured_logs() {
    let server = TestServer::start(TestCoach::default()).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let body = request("run-1", "r1", "failure", json!({"mode": "abandon"}));
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Abandoned);
    let logs: Vec<&str> = response.logs().iter().map(CoachingLog::content).collect();
    assert_eq!(logs.len(), 3, "{logs:?}");
    assert_eq!(logs[0], "captured: backends gen");
    assert_eq!(
        logs[1],
        "# Coaching abandoned\n\nRun: run-1\nRequest: r1\nNode: 4\n\ncannot fix\n"
    );
    assert_eq!(logs[2], "own log");
}

#[tokio::test]
async fn a_kind_the_coach_does_not_handle_is_status_error() {
    let server = TestServer::start(TestCoach::default()).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let body = request("run-1", "r1", "suboptimal", json!({}));
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Error);
    assert!(response.reason().unwrap().contains("suboptimal"));
}

#[tokio::test]
async fn unknown_runs_are_404_and_agents_without_a_coach_503() {
    let server = TestServer::start(TestCoach::default()).await;
    let body = request("never-opened", "r1", "failure", json!({}));
    assert_eq!(
        coach(&server, &body).await.expect_detail(404),
        "Unknown or closing coaching session"
    );
    // An invalid request is 422 before the session is looked up.
    let reply = coach(&server, r#"{"run_id": "x"}"#).await;
    reply.expect(422);

    let off = TestServer::start(DemoAgent::new().without_coaching()).await;
    expect_204(&put(&off, "run-1", config("m", true)).await);
    let body = request("run-1", "r1", "failure", json!({}));
    assert_eq!(
        coach(&off, &body).await.expect_detail(503),
        "Specialized coaching is unavailable"
    );
    coach(&off, &request("other", "r2", "failure", json!({})))
        .await
        .expect_detail(404);
    expect_204(&delete(&off, "run-1").await);
}

#[tokio::test]
async fn delete_is_204_always_and_closes_the_session() {
    let agent = TestCoach::default();
    let server = TestServer::start(agent.clone()).await;
    expect_204(&delete(&server, "never-opened").await);
    expect_204(&put(&server, "run-1", config("m", true)).await);
    expect_204(&delete(&server, "run-1").await);
    assert_eq!(agent.closed.load(Ordering::SeqCst), 1);
    let body = request("run-1", "r1", "failure", json!({}));
    coach(&server, &body).await.expect_detail(404);
    expect_204(&delete(&server, "run-1").await);
    // Reopened with another configuration: a new session.
    expect_204(&put(&server, "run-1", config("other", true)).await);
    answered(&body, &coach(&server, &body).await);
}

/// DELETE while a slow request runs: the request finishes with 200, the
/// DELETE answers after it; meanwhile the session is closing: a PUT (same
/// or other configuration) is 409 and a new request 404.
#[tokio::test]
async fn delete_waits_for_the_requests_in_flight() {
    let agent = TestCoach::default();
    let server = Arc::new(TestServer::start(agent.clone()).await);
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let slow = request("run-1", "slow", "failure", json!({"delay_ms": 700}));
    let started = Instant::now();
    let post = tokio::spawn({
        let server = Arc::clone(&server);
        let slow = slow.clone();
        async move {
            let reply = coach(&server, &slow).await;
            (reply, Instant::now())
        }
    });
    within("the coach to start", async {
        while agent.active.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let deleting = tokio::spawn({
        let server = Arc::clone(&server);
        async move {
            let reply = delete(&server, "run-1").await;
            (reply, Instant::now())
        }
    });
    // The DELETE has marked the session closing once the same
    // configuration conflicts.
    within("the session to be closing", async {
        loop {
            let reply = put(&server, "run-1", config("m", true)).await;
            if reply.status.as_u16() == 409 {
                break;
            }
            expect_204(&reply);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    put(&server, "run-1", config("other", true))
        .await
        .expect_detail(409);
    let other = request("run-1", "late", "failure", json!({}));
    coach(&server, &other).await.expect_detail(404);
    assert_eq!(
        agent.closed.load(Ordering::SeqCst),
        0,
        "closed while a request ran"
    );

    let (post_reply, _) = within("the slow request", post).await.unwrap();
    let (delete_reply, delete_done) = within("the DELETE", deleting).await.unwrap();
    let response = answered(&slow, &post_reply);
    assert_eq!(response.status(), CoachingStatus::Corrected);
    expect_204(&delete_reply);
    // The agent released the session after the coach had answered, and the
    // DELETE was answered after that. (Its answer and the request's are
    // written once the request lets go of the session: on the client's
    // side either may arrive first.)
    let finished = agent
        .finished_at
        .lock()
        .unwrap()
        .expect("the coach finished");
    let closed = agent
        .closed_at
        .lock()
        .unwrap()
        .expect("the session was closed");
    assert!(closed >= finished, "closed before the coach finished");
    assert!(
        delete_done >= finished,
        "DELETE answered before the request finished"
    );
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(agent.closed.load(Ordering::SeqCst), 1);
    expect_204(&put(&server, "run-1", config("other", true)).await);
}

#[tokio::test]
async fn run_ids_are_percent_decoded() {
    let agent = TestCoach::default();
    let server = TestServer::start(agent.clone()).await;
    let run_id = "run/1 été?#%";
    let encoded = "run%2F1%20%C3%A9t%C3%A9%3F%23%25";
    expect_204(&put(&server, encoded, config("m", true)).await);
    let body = request(run_id, "r1", "failure", json!({"mode": "context"}));
    let response = answered(&body, &coach(&server, &body).await);
    let keys = &response.proposals()[0].extra_keys;
    assert_eq!(keys.get("run_id"), Some(&Json::from(run_id)));
    assert_eq!(keys.get("request_id"), Some(&Json::from("r1")));
    // The same id, encoded otherwise (lower-case hex, a raw character).
    expect_204(
        &put(
            &server,
            "run%2f1%20%c3%a9t%c3%a9%3F%23%25",
            config("m", true),
        )
        .await,
    );
    expect_204(&delete(&server, encoded).await);
    coach(&server, &body).await.expect_detail(404);
    // Bytes that are not UTF-8 once decoded, an empty id, a nested path: 404.
    put(&server, "%FF", config("m", true))
        .await
        .expect_detail(404);
    put(&server, "", config("m", true)).await.expect_detail(404);
    put(&server, "a/b", config("m", true))
        .await
        .expect_detail(404);
    let wrong = send(
        server.addr,
        Method::GET,
        &format!("{SESSIONS}x"),
        &[],
        Bytes::new(),
    )
    .await;
    wrong.expect_detail(405);
    assert_eq!(wrong.header("allow"), Some("PUT, DELETE"));
    let wrong = server.get("/v1/coaching").await;
    wrong.expect_detail(405);
    assert_eq!(wrong.header("allow"), Some("POST"));
}

#[tokio::test]
async fn coaching_runs_concurrently_with_itself_and_with_inferences_within_the_limits() {
    let agent = TestCoach::default();
    let server = Arc::new(TestServer::start(agent.clone()).await);
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let mut tasks = Vec::new();
    for i in 0..3 {
        let server = Arc::clone(&server);
        tasks.push(tokio::spawn(async move {
            let body = request(
                "run-1",
                &format!("r{i}"),
                "failure",
                json!({"delay_ms": 300}),
            );
            answered(&body, &coach(&server, &body).await).status()
        }));
    }
    // An inference is answered while the coaching requests run.
    within("the coach to start", async {
        while agent.active.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let inference =
        r#"{"request_id":"i","inputs":[{"id":0,"instruction":{"type":"user","content":"hi"}}]}"#;
    check_response(inference, &server.respond(inference).await);
    assert!(
        agent.active.load(Ordering::SeqCst) > 0,
        "answered while coaching ran"
    );
    for t in tasks {
        assert_eq!(
            within("a coaching request", t).await.unwrap(),
            CoachingStatus::Corrected
        );
    }
    assert_eq!(agent.max_active.load(Ordering::SeqCst), 3);

    // One inference slot: coaching requests take it in turn.
    let mut config_one = Config::default();
    config_one.max_concurrent_inferences = 1;
    let agent = TestCoach::default();
    let server = Arc::new(TestServer::with_config(agent.clone(), config_one).await);
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let mut tasks = Vec::new();
    for i in 0..3 {
        let server = Arc::clone(&server);
        tasks.push(tokio::spawn(async move {
            let body = request(
                "run-1",
                &format!("r{i}"),
                "failure",
                json!({"delay_ms": 50}),
            );
            answered(&body, &coach(&server, &body).await).status()
        }));
    }
    for t in tasks {
        assert_eq!(
            within("a coaching request", t).await.unwrap(),
            CoachingStatus::Corrected
        );
    }
    assert_eq!(agent.max_active.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_inference_timeout_stops_a_slow_coach_with_status_error() {
    let mut cfg = Config::default();
    cfg.inference_timeout = Some(Duration::from_millis(200));
    let agent = TestCoach::default();
    let server = TestServer::with_config(agent.clone(), cfg).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let body = request("run-1", "r1", "failure", json!({"delay_ms": 5000}));
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Error);
    assert!(
        response.reason().unwrap().contains("timeout"),
        "{:?}",
        response.reason()
    );
    assert_eq!(
        agent.active.load(Ordering::SeqCst),
        0,
        "the coach was stopped"
    );
    // The session is free: DELETE does not wait for the stopped request.
    expect_204(&delete(&server, "run-1").await);
}

#[tokio::test]
async fn graceful_shutdown_lets_a_coaching_request_finish() {
    let agent = TestCoach::default();
    let server = TestServer::start(agent.clone()).await;
    let addr = server.addr;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let body = request("run-1", "r1", "failure", json!({"delay_ms": 400}));
    let post = tokio::spawn({
        let body = body.clone();
        async move {
            send(
                addr,
                Method::POST,
                "/v1/coaching",
                &[("content-type", "application/json")],
                Bytes::from(body),
            )
            .await
        }
    });
    within("the coach to start", async {
        while agent.active.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    server.stop().await;
    let reply = within("the request", post).await.unwrap();
    assert_eq!(answered(&body, &reply).status(), CoachingStatus::Corrected);
}

// ---------------------------------------------------------------------------------------
// The demo agent.

#[tokio::test]
async fn the_demo_coach_corrects_each_kind_and_abandons_when_it_cannot() {
    let server = TestServer::start(DemoAgent::new()).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    // Each proposal's extra_keys is the payload itself: GEN re-injects it as
    // extra_keys.coaching (never wrapped in a `coaching` key of its own).
    let expectations = [
        (
            "failure",
            "replace_say",
            ["Press sw0 now.", "Press sw0 now."],
        ),
        (
            "suboptimal",
            "replace_say",
            ["Press sw0 now.", "Press sw0 now."],
        ),
        (
            "format",
            "replace_decision",
            ["echo: Press sw0.", "echo: {}"],
        ),
    ];
    for (kind, payload_kind, texts) in expectations {
        let body = request("run-1", kind, kind, json!({}));
        let response = answered(&body, &coach(&server, &body).await);
        assert_eq!(response.status(), CoachingStatus::Corrected, "{kind}");
        let said: Vec<String> = response
            .proposals()
            .iter()
            .map(|p| {
                assert_eq!(p.extra_keys.get("coaching"), None, "{kind}: wrapped");
                let payload = p.payload().expect("a payload the agent reads back");
                assert_eq!(payload.kind(), payload_kind, "{kind}");
                payload.decision().expect("a decision").say
            })
            .collect();
        assert_eq!(said, texts, "{kind}");
        assert!(response.logs()[0].content().starts_with("# Demo coach"));
    }
    // No diagnosis, no hint: abandoned, with the reason and the summary.
    let body = request("run-1", "bare", "failure", json!({}))
        .replace(r#""hint":"Use press_button.""#, r#""hint":null"#)
        .replace(
            r#""diagnosis":{"explanation":"Wrong button.","expected_decision":"Press sw0 now."},"#,
            "",
        );
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Abandoned, "{body}");
    assert!(response.reason().unwrap().contains("diagnosis"));
    assert!(
        response
            .logs()
            .iter()
            .any(|l| l.content().starts_with("# Coaching abandoned"))
    );
    // A bad delay is an error answer, not an HTTP error.
    let body = request("run-1", "bad", "format", json!({"delay_ms": "soon"}));
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Error);
    assert!(response.reason().unwrap().contains("delay_ms"));
}

/// GEN's re-injection (`AgentCoachingManager._create_injected_node`, then
/// `BaseAgentManager._send_coaching_pending`): the point's input, its
/// `extra_keys` kept and `extra_keys["coaching"]` set to the proposal's
/// `extra_keys`, `num_outputs` 1, ids the batch positions. The Python side
/// drives GEN's own functions (`cargo xtask interop`); this is the same loop
/// in the server's tests, one by one and batched.
#[tokio::test]
async fn the_demo_answers_its_own_proposals_reinjected_as_gen_does() {
    let server = TestServer::start(DemoAgent::new()).await;
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let mut reinjected = Vec::new();
    for kind in ["failure", "suboptimal", "format"] {
        let body = request("run-1", kind, kind, json!({}));
        let request = SpecializedCoachingRequest::from_slice(body.as_bytes()).unwrap();
        let response = answered(&body, &coach(&server, &body).await);
        for proposal in response.proposals() {
            let point = request
                .reinjection_points()
                .iter()
                .find(|p| p.id() == proposal.reinjection_point_id)
                .unwrap();
            let mut input = request.point_input(point).unwrap().clone();
            input.extra_keys.insert("delay_ms", Json::from(0u64));
            input
                .extra_keys
                .insert("coaching", Json::Object(proposal.extra_keys.clone()));
            input.num_outputs = 1.try_into().unwrap();
            let asked = proposal.payload().unwrap().decision().unwrap();
            reinjected.push((kind, input, asked));
        }
    }
    assert_eq!(reinjected.len(), 6, "two points in each request");
    let check = |kind: &str, candidate: &AgentOutput, asked: &AgentDecision| {
        assert_eq!(
            candidate.outcome,
            Outcome::Completed(asked.clone()),
            "{kind}: the proposed decision"
        );
    };
    // One by one.
    for (i, (kind, input, asked)) in reinjected.iter().enumerate() {
        let mut input = input.clone();
        input.id = 0;
        let request = AgentRequest::new(format!("one-{i}"), vec![input]).unwrap();
        let body = request.to_json_string();
        let response = check_response(&body, &server.respond(body.clone()).await);
        check(kind, &response[0], asked);
    }
    // Batched, as GEN sends its pending coached nodes.
    let inputs = reinjected
        .iter()
        .enumerate()
        .map(|(i, (_, input, _))| {
            let mut input = input.clone();
            input.id = i as i64;
            input
        })
        .collect();
    let request = AgentRequest::new("batch", inputs).unwrap();
    let body = request.to_json_string();
    let response = check_response(&body, &server.respond(body.clone()).await);
    for (candidate, (kind, _, asked)) in response.iter().zip(&reinjected) {
        check(kind, candidate, asked);
    }
}

#[tokio::test]
async fn the_demo_applies_coaching_payloads_through_responses() {
    let server = TestServer::start(DemoAgent::new()).await;
    let input = |coaching: &str| {
        format!(
            r#"{{"request_id":"c","inputs":[{{"id":3,"instruction":{{"type":"user","content":"Press sw0."}},
            "memory":{{"memory_list":["x"],"steps":1}},"extra_keys":{{"coaching":{coaching}}}}}]}}"#
        )
    };
    let body = input(r#"{"kind":"replace_say","text":"Coached text."}"#);
    let response = check_response(&body, &server.respond(body.clone()).await);
    assert_eq!(
        response[0].outcome,
        Outcome::Completed(AgentDecision::say("Coached text."))
    );
    assert_eq!(response[0].memory.get("steps"), Some(&Json::from(2u64)));

    let body = input(
        r#"{"kind":"replace_decision","decision":{"say":"","tool_calls":[
            {"name":"press_button","arguments":{"id":"sw0"},"target_robot_name":"panda"}]}}"#,
    );
    let response = check_response(&body, &server.respond(body.clone()).await);
    let Outcome::Completed(d) = &response[0].outcome else {
        panic!("not completed: {:?}", response[0].outcome)
    };
    assert_eq!(d.say, "");
    assert_eq!(d.tool_calls.len(), 1);
    assert_eq!(d.tool_calls[0].name.as_str(), "press_button");
    assert_eq!(d.tool_calls[0].target_robot_name.as_str(), "panda");
    assert_eq!(
        d.tool_calls[0].arguments.get("id"),
        Some(&Json::from("sw0"))
    );

    for bad in [
        r#"{"kind":"replace_say","text":""}"#,
        r#"{"kind":"replace_decision","decision":{"say":"","tool_calls":[]}}"#,
        r#"{"kind":"rewrite","text":"x"}"#,
        r#""just text""#,
    ] {
        let body = input(bad);
        let response = check_response(&body, &server.respond(body.clone()).await);
        let Outcome::Error(e) = &response[0].outcome else {
            panic!("{bad}: not an error: {:?}", response[0].outcome)
        };
        assert_eq!(e.code.as_str(), "invalid_output", "{bad}");
        assert_eq!(
            Json::Object(response[0].memory.clone()).to_json_string(),
            r#"{"memory_list":["x"],"steps":1}"#,
            "{bad}: memory kept"
        );
    }

    // Without coaching the payload is one more extra key.
    let off = TestServer::start(DemoAgent::new().without_coaching()).await;
    let body = input(r#"{"kind":"replace_say","text":"Coached text."}"#);
    let response = check_response(&body, &off.respond(body.clone()).await);
    assert_eq!(
        response[0].outcome,
        Outcome::Completed(AgentDecision::say("echo: Press sw0."))
    );
}

#[tokio::test]
async fn the_demo_coachs_delay_is_waited_without_blocking_other_requests() {
    let server = Arc::new(TestServer::start(DemoAgent::new()).await);
    expect_204(&put(&server, "run-1", config("m", true)).await);
    let body = request("run-1", "slow", "format", json!({"delay_ms": 300}));
    let started = Instant::now();
    let slow = tokio::spawn({
        let server = Arc::clone(&server);
        let body = body.clone();
        async move { coach(&server, &body).await }
    });
    server.get("/health").await.expect(200);
    let reply = within("the slow coach", slow).await.unwrap();
    assert_eq!(answered(&body, &reply).status(), CoachingStatus::Corrected);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

/// Sessions cannot grow without bound: a new session past
/// `max_coaching_sessions` is 503 with a detail that says why; the same
/// session again is not a new one, and closing one makes room.
#[tokio::test]
async fn sessions_past_the_limit_are_503_until_one_closes() {
    let mut c = Config::default();
    c.max_coaching_sessions = 2;
    let server = TestServer::with_config(DemoAgent::new(), c).await;
    expect_204(&put(&server, "a", config("m", false)).await);
    expect_204(&put(&server, "b", config("m", false)).await);
    let detail = put(&server, "c", config("m", false))
        .await
        .expect_detail(503);
    assert!(detail.contains("at most 2 coaching sessions"), "{detail}");
    // The open session again: idempotent, not a third session.
    expect_204(&put(&server, "a", config("m", false)).await);
    expect_204(&delete(&server, "a").await);
    expect_204(&put(&server, "c", config("m", false)).await);
}

/// A coaching answer takes its bytes from the memory budget that request
/// bodies and inference answers share (`--max-total-body-bytes`): with the
/// budget held by unfinished bodies, a 30 kB answer that does not fit is
/// `503` with `Retry-After`, and it is answered once they are gone.
#[tokio::test]
async fn a_coaching_answer_takes_its_bytes_from_the_memory_budget() {
    use tokio::io::AsyncWriteExt;
    let mut c = Config::default();
    c.max_body_bytes = 64 * 1024;
    c.max_response_bytes = 64 * 1024;
    // The least the configuration allows: 2 x body + response.
    c.max_total_body_bytes = 3 * 64 * 1024;
    let server = TestServer::with_config(TestCoach::default(), c).await;
    expect_204(&put(&server, "run-b", config("m", false)).await);
    let body = request(
        "run-b",
        "rb",
        "failure",
        json!({"mode": "big", "bytes": 30_000}),
    );
    // Without holders the answer fits.
    let response = answered(&body, &coach(&server, &body).await);
    assert_eq!(response.status(), CoachingStatus::Corrected);
    // Three bodies of 63,000 of their 64,000 bytes hold 189,000 of the
    // 196,608 bytes; the coaching request's own share leaves no room for
    // its answer.
    let mut holders = Vec::new();
    for _ in 0..3 {
        let mut holder = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect");
        let head = "POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
                    Content-Length: 64000\r\n\r\n";
        holder.write_all(head.as_bytes()).await.expect("write");
        holder.write_all(&[b' '; 63_000]).await.expect("write");
        holders.push(holder);
    }
    let refused = within("a 503 once the holders' bytes are read", async {
        loop {
            let reply = coach(&server, &body).await;
            if reply.status.as_u16() == 503 {
                return reply;
            }
            answered(&body, &reply);
        }
    })
    .await;
    assert!(
        refused.text().contains("bytes of requests and answers"),
        "{}",
        refused.text()
    );
    assert_eq!(
        refused.headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    // The holders go away, their shares are given back, the answer fits.
    drop(holders);
    within("a 200 once the holders are gone", async {
        loop {
            let reply = coach(&server, &body).await;
            if reply.status.as_u16() == 200 {
                answered(&body, &reply);
                return;
            }
            assert_eq!(reply.status.as_u16(), 503, "{}", reply.text());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Sessions bounded in bytes and in idle time (issue 34).

#[tokio::test]
async fn sessions_past_the_byte_budget_are_refused_and_deleting_frees_their_bytes() {
    let agent = TestCoach::default();
    let mut settings = Config::default();
    settings.max_body_bytes = 4096;
    settings.max_total_body_bytes = 3 * 4096 + Config::DEFAULT_MAX_RESPONSE_BYTES;
    settings.max_coaching_session_bytes = 4096;
    let server = TestServer::with_config(agent.clone(), settings).await;
    // A config of about 1.5 KiB: two fit in 4 KiB, the third does not.
    let headers: String = (0..12)
        .map(|i| format!(r#""x-h{i}":"{}""#, "v".repeat(100)))
        .collect::<Vec<_>>()
        .join(",");
    let body = format!(
        r#"{{"backends":{{"gen":{{"type":"openai","endpoint":"http://127.0.0.1:9/v1","default_model":"m","headers":{{{headers}}}}}}},"capture_logs":true}}"#
    );
    expect_204(&put(&server, "run-1", body.clone()).await);
    expect_204(&put(&server, "run-2", body.clone()).await);
    // The same configuration again costs nothing more.
    expect_204(&put(&server, "run-2", body.clone()).await);
    let refused = put(&server, "run-3", body.clone()).await;
    assert_eq!(refused.status.as_u16(), 503, "{}", refused.text());
    let detail = refused.text();
    assert!(
        detail.contains("--max-coaching-session-bytes") && detail.contains("4096-byte budget"),
        "{detail}"
    );
    expect_204(&delete(&server, "run-1").await);
    expect_204(&put(&server, "run-3", body).await);
}

#[tokio::test]
async fn an_idle_session_is_closed_as_if_deleted_and_a_busy_one_is_not() {
    let agent = TestCoach::default();
    let mut settings = Config::default();
    settings.coaching_session_idle_timeout = Some(Duration::from_secs(1));
    let server = TestServer::with_config(agent.clone(), settings).await;
    expect_204(&put(&server, "idle", config("m", true)).await);
    expect_204(&put(&server, "busy", config("m", true)).await);
    // A request of the busy session runs past the idle timeout.
    let slow = request("busy", "slow", "format", json!({"delay_ms": 2500}));
    let slow = {
        let server = &server;
        async move { coach(server, &slow).await }
    };
    let (reply, ()) = tokio::join!(slow, tokio::time::sleep(Duration::from_millis(1500)));
    reply.expect(200);
    // The idle one is gone, closed by the server (the agent was told); the busy
    // one was in use until just now (a second of margin) and is still there.
    let gone = coach(&server, &request("idle", "late", "format", json!({}))).await;
    assert_eq!(gone.status.as_u16(), 404, "{}", gone.text());
    assert!(agent.closed.load(Ordering::SeqCst) >= 1);
    let alive = coach(&server, &request("busy", "again", "format", json!({}))).await;
    alive.expect(200);
}
