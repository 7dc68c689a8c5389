//! `MagmaService` nested in an axum app (the `axum_app` example itself):
//! it passes the probe of `magma-validate probe`, and answers every error
//! case exactly as the standalone server does.

use std::net::SocketAddr;

use bytes::Bytes;
use http::Method;
use magma_server::Config;
use magma_server::demo::DemoAgent;
use magma_validator::probe::{self, ProbeConfig, Status};
use tokio::sync::oneshot;

use crate::support::{Reply, TestServer, check_response, send, user_request};

#[allow(dead_code, reason = "the example's `main` is not used here")]
#[path = "../../examples/axum_app.rs"]
mod axum_app;

/// The example's app on 127.0.0.1 port 0, served by `axum::serve` until
/// the sender is dropped.
async fn serve_example(config: Config) -> (SocketAddr, oneshot::Sender<()>) {
    let app = axum_app::app(config).expect("valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
            .expect("axum serve");
    });
    (addr, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_axum_example_passes_the_probe_under_its_prefix() {
    let (addr, _stop) = serve_example(Config::default()).await;
    let url = format!("http://{addr}/agent");
    // The probe's client blocks: run it on a plain thread, outside the runtime.
    let report = tokio::task::spawn_blocking(move || {
        std::thread::spawn(move || probe::run(&ProbeConfig::new(url)))
            .join()
            .expect("probe thread")
    })
    .await
    .unwrap()
    .expect("the probe reaches the agent");
    let failed: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status != Status::Pass)
        .map(|c| format!("{} ({:?}): {}", c.name, c.status, c.reason))
        .collect();
    assert!(failed.is_empty(), "checks not passed: {failed:#?}");
    assert!(report.is_conformant());
    // The checks that exercise limits and 4xx bodies are among them.
    for name in ["large-request", "unknown-path", "wrong-method"] {
        assert_eq!(
            report.check(name).map(|c| c.status),
            Some(Status::Pass),
            "{name}"
        );
    }
    let invalid = report
        .checks
        .iter()
        .filter(|c| c.name.starts_with("invalid-request/"))
        .count();
    assert!(invalid >= 5, "{invalid} invalid-request checks");
    assert!(report.summary.passed >= 20, "{:?}", report.summary);

    // The app's own route and middleware still work around the agent.
    let hello = send(addr, Method::GET, "/hello", &[], Bytes::new()).await;
    assert_eq!(hello.status, 200);
    assert!(
        hello.text().starts_with("hello from axum;"),
        "{}",
        hello.text()
    );
    assert_eq!(hello.header("x-served-by"), Some("axum-example"));
    let health = send(addr, Method::GET, "/agent/health", &[], Bytes::new()).await;
    assert_eq!(health.status, 200);
    assert_eq!(health.header("x-served-by"), Some("axum-example"));
}

/// Status, content type, `allow` and body of an answer: what must be the
/// same in both forms.
fn essence(reply: &Reply) -> (u16, Option<String>, Option<String>, String) {
    (
        reply.status.as_u16(),
        reply.header("content-type").map(str::to_owned),
        reply.header("allow").map(str::to_owned),
        reply.text().to_owned(),
    )
}

/// Method, path, headers, body.
type Case<'a> = (Method, &'a str, &'a [(&'a str, &'a str)], String);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_and_standalone_answer_every_case_alike() {
    let mut config = Config::default();
    config.max_body_bytes = 4096;
    config.max_candidates = 4;
    let standalone = TestServer::with_config(DemoAgent::new(), config.clone()).await;
    let (nested, _stop) = serve_example(config).await;

    let json = [("content-type", "application/json")];
    let big = user_request("big", &"x".repeat(5000), 1);
    let valid = user_request("ok-1", "hello", 2);
    let cases: Vec<Case<'_>> = vec![
        (Method::GET, "/health", &[], String::new()),
        (Method::GET, "/v1/info", &[], String::new()),
        (Method::GET, "/openapi.json", &[], String::new()),
        (Method::POST, "/v1/responses", &json, valid.clone()),
        (Method::POST, "/v1/responses", &json, "{not json".into()),
        (Method::POST, "/v1/responses", &json, String::new()),
        (Method::POST, "/v1/responses", &json, r#"{"request_id":"","inputs":[]}"#.into()),
        (Method::POST, "/v1/responses", &json, user_request("many", "x", 5)),
        (Method::POST, "/v1/responses", &[("content-type", "text/plain")], valid.clone()),
        (Method::POST, "/v1/responses", &json, big),
        (
            Method::POST,
            "/v1/responses",
            &json,
            r#"{"request_id":"d","inputs":[{"id":0,"instruction":{"type":"user","content":"x"},"extra_keys":{"delay_ms":"soon"}}]}"#.into(),
        ),
        (Method::GET, "/v1/responses", &[], String::new()),
        (Method::DELETE, "/health", &[], String::new()),
        (Method::GET, "/nope", &[], String::new()),
    ];
    for (method, path, headers, body) in cases {
        let a = send(
            standalone.addr,
            method.clone(),
            path,
            headers,
            Bytes::from(body.clone()),
        )
        .await;
        let nested_path = format!("/agent{path}");
        let b = send(
            nested,
            method.clone(),
            &nested_path,
            headers,
            Bytes::from(body),
        )
        .await;
        assert_eq!(essence(&a), essence(&b), "{method} {path}");
        assert_eq!(b.header("x-served-by"), Some("axum-example"));
        if path == "/v1/responses" && a.status == 200 {
            check_response(&valid, &b);
        }
    }
    standalone.stop().await;
}
