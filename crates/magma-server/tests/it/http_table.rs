//! Every row of the HTTP table in DESIGN.md, over real loopback sockets.

use bytes::Bytes;
use http::Method;
use magma_server::Json;
use magma_server::demo::DemoAgent;

use crate::support::{TestAgent, TestServer, check_response, send, user_request};

#[tokio::test]
async fn health_when_ready_is_200_status_ready() {
    let server = TestServer::start(DemoAgent::new()).await;
    let body = server.get("/health").await.expect(200);
    assert_eq!(body.to_json_string(), r#"{"status":"ready"}"#);
}

#[tokio::test]
async fn info_is_served_with_every_field() {
    let server = TestServer::start(DemoAgent::new()).await;
    let body = server.get("/v1/info").await.expect(200);
    let info = magma_server::AgentInfo::from_json(body.clone()).expect("valid AgentInfo");
    info.check_compatible()
        .expect("protocol 2.0 with inference");
    assert_eq!(info.agent_id, "magma-demo-agent");
    let keys: Vec<&str> = body.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "protocol_version",
            "agent_id",
            "agent_version",
            "specialized_coaching",
            "coaching_resume",
            "coaching_unavailable_reason",
            "capabilities"
        ]
    );
}

#[tokio::test]
async fn not_ready_is_503_on_health_and_responses_while_info_answers() {
    let agent = TestAgent::not_ready("Models are not ready");
    let server = TestServer::start(agent.clone()).await;
    let request = user_request("r-ready", "hello", 1);

    assert_eq!(
        server.get("/health").await.expect_detail(503),
        "Models are not ready"
    );
    assert_eq!(
        server.respond(request.clone()).await.expect_detail(503),
        "Models are not ready"
    );
    let empty = server.respond(r#"{"request_id":"e","inputs":[]}"#).await;
    assert_eq!(empty.expect_detail(503), "Models are not ready");
    assert_eq!(
        agent.stats.started(),
        0,
        "the agent must not be called while not ready"
    );
    server.get("/v1/info").await.expect(200);

    agent.ready.set_ready();
    server.get("/health").await.expect(200);
    check_response(&request, &server.respond(request.clone()).await);

    agent.ready.set_not_ready("reloading weights");
    assert_eq!(
        server.get("/health").await.expect_detail(503),
        "reloading weights"
    );
}

#[tokio::test]
async fn an_invalid_body_is_422_even_when_not_ready() {
    let server = TestServer::start(TestAgent::not_ready("loading")).await;
    let body = server.respond("{").await.expect(422);
    assert!(
        body.get("detail").and_then(Json::as_array).is_some(),
        "{body}"
    );
}

#[tokio::test]
async fn a_valid_request_is_200_with_a_json_array_in_order() {
    let server = TestServer::start(DemoAgent::new()).await;
    let request = r#"{"request_id":"r-ok","inputs":[
        {"id":7,"instruction":{"type":"user","content":"first"},"num_outputs":2},
        {"id":-3,"instruction":{"type":"user","content":"second"}}]}"#;
    let reply = server.respond(request).await;
    let response = check_response(request, &reply);
    let keys: Vec<(i64, u64)> = response
        .iter()
        .map(|c| (c.source_id, c.candidate_index))
        .collect();
    assert_eq!(keys, [(7, 0), (7, 1), (-3, 0)]);
    assert!(reply.text().starts_with('['));
    assert_eq!(reply.header("x-request-id"), Some("r-ok"));
}

#[tokio::test]
async fn empty_inputs_are_answered_with_an_empty_array() {
    let server = TestServer::start(DemoAgent::new()).await;
    let reply = server
        .respond(r#"{"request_id":"empty","inputs":[]}"#)
        .await;
    assert_eq!(reply.expect(200).to_json_string(), "[]");
}

/// Asserts a FastAPI-shaped 422 and returns its first entry.
fn fastapi_422(reply: &crate::support::Reply) -> Json {
    let body = reply.expect(422);
    let detail = body
        .get("detail")
        .and_then(Json::as_array)
        .expect("detail list");
    assert!(!detail.is_empty());
    for entry in detail {
        let keys: Vec<&str> = entry.as_object().expect("entry object").keys().collect();
        assert_eq!(&keys[..4], ["type", "loc", "msg", "input"], "{entry}");
        let loc = entry.get("loc").and_then(Json::as_array).expect("loc list");
        assert_eq!(loc[0].as_str(), Some("body"), "{entry}");
    }
    detail[0].clone()
}

#[tokio::test]
async fn malformed_json_is_a_fastapi_422() {
    let server = TestServer::start(DemoAgent::new()).await;
    for body in [
        "{",
        "not json",
        r#"{"request_id":"x","inputs":[]} trailing"#,
        "[1,]",
    ] {
        let entry = fastapi_422(&server.respond(body).await);
        assert_eq!(
            entry.get("type").and_then(Json::as_str),
            Some("json_invalid"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn an_empty_body_is_the_missing_body_422() {
    let server = TestServer::start(DemoAgent::new()).await;
    let entry = fastapi_422(&server.respond("").await);
    assert_eq!(
        entry.to_json_string(),
        r#"{"type":"missing","loc":["body"],"msg":"Field required","input":null}"#
    );
}

#[tokio::test]
async fn invalid_requests_are_fastapi_422_with_locations() {
    let server = TestServer::start(DemoAgent::new()).await;
    let cases = [
        (r#"{"inputs":[]}"#, "missing", r#"["body","request_id"]"#),
        (
            r#"{"request_id":"x","inputs":[{"id":1.0,"instruction":{"type":"user","content":""}}]}"#,
            "int_type",
            r#"["body","inputs",0,"id"]"#,
        ),
        (
            r#"{"request_id":"x","inputs":[{"id":1,"instruction":{"type":"user","content":"","x":1}}]}"#,
            "extra_forbidden",
            r#"["body","inputs",0,"instruction","x"]"#,
        ),
        (
            r#"{"request_id":"x","inputs":[{"id":1,"instruction":{"type":"user","content":""},"num_outputs":0}]}"#,
            "greater_than",
            r#"["body","inputs",0,"num_outputs"]"#,
        ),
        ("[]", "model_type", r#"["body"]"#),
    ];
    for (body, kind, loc) in cases {
        let entry = fastapi_422(&server.respond(body).await);
        assert_eq!(
            entry.get("type").and_then(Json::as_str),
            Some(kind),
            "{body}"
        );
        assert_eq!(entry.get("loc").unwrap().to_json_string(), loc, "{body}");
    }
}

#[tokio::test]
async fn duplicate_input_ids_are_a_value_error_at_the_body() {
    let server = TestServer::start(DemoAgent::new()).await;
    let body = r#"{"request_id":"x","inputs":[
        {"id":1,"instruction":{"type":"user","content":""}},
        {"id":1,"instruction":{"type":"user","content":""}}]}"#;
    let entry = fastapi_422(&server.respond(body).await);
    assert_eq!(
        entry.get("type").and_then(Json::as_str),
        Some("value_error")
    );
}

#[tokio::test]
async fn nan_and_infinities_are_422_never_500() {
    let server = TestServer::start(DemoAgent::new()).await;
    for bad in ["NaN", "Infinity", "-Infinity", "1e400"] {
        let body = format!(
            r#"{{"request_id":"x","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{{"v":[{bad}]}}}}]}}"#
        );
        let entry = fastapi_422(&server.respond(body).await);
        assert_eq!(
            entry.get("type").and_then(Json::as_str),
            Some("finite_number"),
            "{bad}"
        );
        assert_eq!(
            entry.get("loc").unwrap().to_json_string(),
            r#"["body","inputs",0,"memory","v",0]"#
        );
    }
}

#[tokio::test]
async fn an_agent_rejection_is_422_with_a_string_detail() {
    let server = TestServer::start(TestAgent::default()).await;
    let detail = server
        .respond(user_request("r", "reject", 1))
        .await
        .expect_detail(422);
    assert_eq!(detail, "this agent refuses to answer \"reject\"");
    // The demo agent's own checks are rejections too.
    let server = TestServer::start(DemoAgent::new()).await;
    let body = r#"{"request_id":"x","inputs":[{"id":1,"instruction":{"type":"user","content":""},"extra_keys":{"delay_ms":"soon"}}]}"#;
    assert!(
        server
            .respond(body)
            .await
            .expect_detail(422)
            .contains("delay_ms")
    );
}

#[tokio::test]
async fn content_types() {
    let server = TestServer::start(DemoAgent::new()).await;
    let request = user_request("ct", "x", 1);
    let post = async |ct: Option<&'static str>| {
        let headers: Vec<(&str, &str)> = ct.map(|c| ("content-type", c)).into_iter().collect();
        send(
            server.addr,
            Method::POST,
            "/v1/responses",
            &headers,
            Bytes::from(request.clone()),
        )
        .await
    };
    for ok in [
        None,
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("application/vnd.magma.request+json"),
    ] {
        check_response(&request, &post(ok).await);
    }
    for bad in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=b",
    ] {
        let detail = post(Some(bad)).await.expect_detail(415);
        assert!(detail.contains("application/json"), "{detail}");
    }
}

#[tokio::test]
async fn unknown_paths_are_404_json() {
    let server = TestServer::start(DemoAgent::new()).await;
    for path in [
        "/",
        "/v1",
        "/v1/response",
        "/health/",
        "/v2/responses",
        "/v1/coaching/sessions",
        "/v1/coaching/sessions/",
        "/v1/coaching/sessions/a/b",
    ] {
        assert_eq!(
            server.get(path).await.expect_detail(404),
            "Not Found",
            "{path}"
        );
    }
}

#[tokio::test]
async fn wrong_methods_are_405_with_allow() {
    let server = TestServer::start(DemoAgent::new()).await;
    let cases = [
        (Method::POST, "/health", "GET, HEAD"),
        (Method::DELETE, "/v1/info", "GET, HEAD"),
        (Method::GET, "/v1/responses", "POST"),
        (Method::PUT, "/v1/responses", "POST"),
    ];
    for (method, path, allow) in cases {
        let reply = send(server.addr, method.clone(), path, &[], Bytes::new()).await;
        assert_eq!(
            reply.expect_detail(405),
            "Method Not Allowed",
            "{method} {path}"
        );
        assert_eq!(reply.header("allow"), Some(allow), "{method} {path}");
    }
}

#[tokio::test]
async fn a_path_prefix_moves_every_endpoint() {
    let mut config = magma_server::Config::default();
    config.path_prefix = Some("/agents/demo/".into());
    let server = TestServer::with_config(DemoAgent::new(), config).await;
    server.get("/agents/demo/health").await.expect(200);
    server.get("/agents/demo/v1/info").await.expect(200);
    let request = user_request("p", "x", 1);
    check_response(
        &request,
        &server
            .post_json("/agents/demo/v1/responses", request.clone())
            .await,
    );
    server.get("/health").await.expect_detail(404);
    server.get("/agents/demohealth").await.expect_detail(404);
}

/// The OpenAPI document `cargo xtask codegen` writes under `docs/`.
fn generated_openapi() -> Json {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    let text = std::fs::read(path).expect("docs/openapi.json");
    Json::from_slice(&text).expect("valid JSON")
}

#[tokio::test]
async fn the_openapi_document_is_served_as_generated() {
    let server = TestServer::start(DemoAgent::new()).await;
    let reply = server.get("/openapi.json").await;
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let served = reply.expect(200);
    assert_eq!(served, generated_openapi());
    assert!(served.as_object().unwrap().get("servers").is_none());
    let reply = send(
        server.addr,
        Method::POST,
        "/openapi.json",
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(reply.expect_detail(405), "Method Not Allowed");
    assert_eq!(reply.header("allow"), Some("GET, HEAD"));
}

#[tokio::test]
async fn under_a_path_prefix_the_openapi_document_names_it_as_its_server() {
    let mut config = magma_server::Config::default();
    config.path_prefix = Some("/agents/demo/".into());
    let server = TestServer::with_config(DemoAgent::new(), config).await;
    server.get("/openapi.json").await.expect_detail(404);
    let served = server.get("/agents/demo/openapi.json").await.expect(200);
    let mut served = served.as_object().unwrap().clone();
    assert_eq!(
        served.get("servers").map(Json::to_json_string).as_deref(),
        Some(r#"[{"url":"/agents/demo"}]"#)
    );
    // Apart from `servers`, the same document.
    served.remove("servers");
    assert_eq!(Json::Object(served), generated_openapi());
}
