//! The happy path: the typed calls, URL handling, headers, keep-alive, and
//! the low-level call.

use magma_client::http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use magma_client::http::{Method, StatusCode};
use magma_client::magma_protocol::{AgentInput, AgentInstruction, AgentRequest, Json, json};
use magma_client::{Client, RawRequest};

use crate::support::{StubServer, echo_agent, request, says};

#[test]
fn health_info_compat_and_respond_against_an_echo_agent() {
    let server = StubServer::start(echo_agent());
    let client = Client::new(server.url()).unwrap();

    client.health().unwrap();
    let info = client.info().unwrap();
    assert_eq!(
        (info.agent_id.as_str(), info.agent_version.as_str()),
        ("test-agent", "1.2.3")
    );
    assert_eq!(client.check_compatible().unwrap(), info);

    // Several inputs, several candidates each: returned in request order.
    let req = request("req-multi", 3, 2);
    let response = client.respond(&req).unwrap();
    assert_eq!(
        says(&response),
        [
            "echo: m0 #0",
            "echo: m0 #1",
            "echo: m1 #0",
            "echo: m1 #1",
            "echo: m2 #0",
            "echo: m2 #1"
        ]
    );
    for c in response.candidates() {
        assert_eq!(c.request_id.as_str(), "req-multi");
    }

    // An empty request gets an empty response.
    let empty = AgentRequest::new("req-empty", vec![]).unwrap();
    assert!(client.respond(&empty).unwrap().candidates().is_empty());
}

#[test]
fn memory_round_trips_losslessly_over_several_steps() {
    let server = StubServer::start(echo_agent());
    let client = Client::new(server.url()).unwrap();
    let Json::Object(mut memory) = json!({
        "memory_list": ["Always confirm."],
        "big": 123456789012345678901234567890u128,
        "float": 1.0,
        "nested": {"z": [1, {"é": "ü"}], "a": null}
    }) else {
        unreachable!()
    };
    for step in 1..=3 {
        let mut input = AgentInput::new(0, AgentInstruction::user(format!("step {step}")));
        input.memory = memory.clone();
        let req = AgentRequest::new(format!("req-{step}"), vec![input]).unwrap();
        let response = client.respond(&req).unwrap();
        let next = response.candidates()[0].memory.clone();
        assert_eq!(next.get("steps").and_then(|v| v.as_i64()), Some(step));
        for key in ["memory_list", "big", "float", "nested"] {
            assert_eq!(
                next.get(key),
                memory.get(key),
                "{key} changed at step {step}"
            );
        }
        memory = next;
    }
    let big = memory.get("big").unwrap().to_json_string();
    assert_eq!(big, "123456789012345678901234567890");
    assert_eq!(memory.get("float").unwrap().to_json_string(), "1.0");
}

#[test]
fn base_url_prefix_trailing_slash_and_headers() {
    let server = StubServer::start(echo_agent());
    let client = Client::new(format!("{}/agents/a1/", server.url())).unwrap();
    assert_eq!(client.base_url(), format!("{}/agents/a1", server.url()));
    assert_eq!(
        client.url("/health"),
        format!("{}/agents/a1/health", server.url())
    );
    client.health().unwrap();
    client.info().unwrap();
    client.respond(&request("r", 1, 1)).unwrap();

    let seen = server.requests();
    let paths: Vec<_> = seen
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        paths,
        [
            ("GET", "/agents/a1/health"),
            ("GET", "/agents/a1/v1/info"),
            ("POST", "/agents/a1/v1/responses")
        ]
    );
    let post = &seen[2];
    assert_eq!(post.headers[CONTENT_TYPE], "application/json");
    assert_eq!(
        post.headers["user-agent"],
        concat!("magma-client/", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        post.headers["content-length"],
        post.body.len().to_string().as_str()
    );
    // The body is exactly the request's JSON.
    assert_eq!(
        AgentRequest::from_slice(&post.body).unwrap(),
        request("r", 1, 1)
    );

    let custom = Client::builder(server.url())
        .user_agent("bench-rs/9")
        .build()
        .unwrap();
    custom.health().unwrap();
    assert_eq!(
        server.requests().last().unwrap().headers["user-agent"],
        "bench-rs/9"
    );
}

#[test]
fn keep_alive_serves_many_calls_over_one_connection() {
    let server = StubServer::start(echo_agent());
    let client = Client::new(server.url()).unwrap();
    for i in 0..10 {
        client.health().unwrap();
        client.info().unwrap();
        let response = client.respond(&request(&format!("ka-{i}"), 2, 1)).unwrap();
        assert_eq!(says(&response), ["echo: m0 #0", "echo: m1 #0"]);
    }
    assert_eq!(server.requests().len(), 30);
    assert_eq!(
        server.accepted(),
        1,
        "all 30 calls should share one TCP connection"
    );
}

#[test]
fn without_pooling_every_call_opens_a_connection_like_bench() {
    let server = StubServer::start(echo_agent());
    let client = Client::builder(server.url())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for _ in 0..5 {
        client.health().unwrap();
    }
    assert_eq!(server.accepted(), 5);
}

#[test]
fn execute_sends_anything_and_returns_any_status() {
    let server = StubServer::start(echo_agent());
    let client = Client::new(server.url()).unwrap();

    // An invalid request body: the agent's 422 comes back as a response.
    let bad = client
        .execute(RawRequest::post("/v1/responses").json(r#"{"request_id":"","inputs":[]}"#))
        .unwrap();
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let detail = bad.json().unwrap();
    let first = &detail.get("detail").unwrap().as_array().unwrap()[0];
    assert_eq!(
        first.get("type").unwrap().as_str(),
        Some("string_too_short")
    );
    assert_eq!(
        first.get("loc").unwrap().to_json_string(),
        r#"["body","request_id"]"#
    );

    // Unknown path, other method, custom header, query string.
    let missing = client.execute(RawRequest::get("/nope?x=1")).unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let del = client
        .execute(RawRequest::new(Method::DELETE, "/v1/responses").header(
            HeaderName::from_static("x-probe"),
            HeaderValue::from_static("1"),
        ))
        .unwrap();
    assert_eq!(del.status(), StatusCode::NOT_FOUND);
    let seen = server.requests();
    assert_eq!(seen[1].path, "/nope?x=1");
    assert_eq!(seen[2].method, "DELETE");
    assert_eq!(seen[2].headers["x-probe"], "1");
    assert!(seen[2].body.is_empty());
    assert_eq!(seen[0].headers[CONTENT_TYPE], "application/json");

    // A path must start with '/'.
    let err = client.execute(RawRequest::get("health")).unwrap_err();
    assert!(
        matches!(err.kind(), magma_client::ErrorKind::Config(_)),
        "{err}"
    );
}
