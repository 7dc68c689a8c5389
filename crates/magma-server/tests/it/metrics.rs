//! The `metrics` feature: known traffic through real sockets, then a scrape
//! of `GET /metrics` with exact counts.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use magma_server::demo::DemoAgent;
use magma_server::{Config, Metrics};

use crate::support::{TestServer, send, slow_request, user_request, within};

/// `name{labels}` -> value, from the Prometheus text format.
fn scrape_text(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("line {l:?}"));
            let value = value.parse().unwrap_or_else(|_| panic!("value in {l:?}"));
            (series.to_owned(), value)
        })
        .collect()
}

async fn scrape(server: &TestServer, path: &str) -> BTreeMap<String, f64> {
    let reply = server.get(path).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    scrape_text(reply.text())
}

#[track_caller]
fn expect(metrics: &BTreeMap<String, f64>, series: &str, value: f64) {
    assert_eq!(
        metrics.get(series).copied(),
        Some(value),
        "{series}; all series:\n{metrics:#?}"
    );
}

fn with_metrics() -> Config {
    let mut config = Config::default();
    config.metrics = Some(Metrics::new());
    config
}

#[tokio::test]
async fn a_scrape_after_known_traffic_has_exact_counts() {
    let server = TestServer::with_config(DemoAgent::new(), with_metrics()).await;
    for _ in 0..3 {
        server.get("/health").await.expect(200);
    }
    server.get("/v1/info").await.expect(200);
    for id in ["m-1", "m-2"] {
        let body = user_request(id, "hello", 2);
        assert_eq!(server.respond(body).await.status, 200);
    }
    assert_eq!(
        server
            .respond(user_request("m-3", "__error__", 3))
            .await
            .status,
        200
    );
    assert_eq!(server.respond("{not json").await.status, 422);
    let refused = r#"{"request_id":"m-4","inputs":[{"id":0,"instruction":{"type":"user","content":"x"},"extra_keys":{"delay_ms":"soon"}}]}"#;
    assert_eq!(server.respond(refused).await.status, 422);
    server.get("/nope").await.expect_detail(404);
    let wrong = send(server.addr, Method::POST, "/health", &[], Bytes::new()).await;
    assert_eq!(wrong.status, 405);

    let m = scrape(&server, "/metrics").await;
    expect(
        &m,
        r#"magma_requests_total{route="/health",status="200"}"#,
        3.0,
    );
    expect(
        &m,
        r#"magma_requests_total{route="/health",status="405"}"#,
        1.0,
    );
    expect(
        &m,
        r#"magma_requests_total{route="/v1/info",status="200"}"#,
        1.0,
    );
    expect(
        &m,
        r#"magma_requests_total{route="/v1/responses",status="200"}"#,
        3.0,
    );
    expect(
        &m,
        r#"magma_requests_total{route="/v1/responses",status="422"}"#,
        2.0,
    );
    expect(
        &m,
        r#"magma_requests_total{route="unmatched",status="404"}"#,
        1.0,
    );
    expect(&m, r#"magma_candidates_total{status="completed"}"#, 4.0);
    expect(&m, r#"magma_candidates_total{status="error"}"#, 3.0);
    expect(
        &m,
        r#"magma_error_candidates_total{code="demo_error"}"#,
        3.0,
    );
    expect(
        &m,
        r#"magma_inference_failures_total{kind="rejection"}"#,
        1.0,
    );
    expect(&m, r#"magma_inference_failures_total{kind="timeout"}"#, 0.0);
    expect(
        &m,
        r#"magma_request_duration_seconds_count{route="/health"}"#,
        4.0,
    );
    expect(
        &m,
        r#"magma_request_duration_seconds_count{route="/v1/responses"}"#,
        5.0,
    );
    expect(
        &m,
        r#"magma_request_duration_seconds_count{route="/v1/info"}"#,
        1.0,
    );
    expect(
        &m,
        r#"magma_request_duration_seconds_bucket{route="/v1/info",le="+Inf"}"#,
        1.0,
    );
    expect(&m, "magma_inferences_running", 0.0);
    expect(&m, "magma_inferences_waiting", 0.0);
    // Only what happened: no series for statuses never answered.
    assert!(!m.keys().any(|k| k.contains(r#"status="500""#)), "{m:#?}");

    // The scrape itself is counted by the next one.
    let again = scrape(&server, "/metrics").await;
    expect(
        &again,
        r#"magma_requests_total{route="/metrics",status="200"}"#,
        1.0,
    );
    expect(
        &again,
        r#"magma_requests_total{route="/health",status="200"}"#,
        3.0,
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_and_waiting_inferences_and_timeouts_are_seen() {
    let mut config = with_metrics();
    config.max_concurrent_inferences = 1;
    config.inference_timeout = Some(Duration::from_millis(1500));
    config.path_prefix = Some("/agent".into());
    let server = TestServer::with_config(DemoAgent::new(), config).await;
    let addr = server.addr;
    let post = move |body: String| {
        send(
            addr,
            Method::POST,
            "/agent/v1/responses",
            &[("content-type", "application/json")],
            Bytes::from(body),
        )
    };
    // One takes the only slot and times out; the other waits for it.
    let hangs = tokio::spawn(post(slow_request("hangs", 60_000)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let queued = tokio::spawn(post(slow_request("queued", 10)));
    within("both inferences in", async {
        loop {
            let m = scrape(&server, "/agent/metrics").await;
            if m.get("magma_inferences_running") == Some(&1.0)
                && m.get("magma_inferences_waiting") == Some(&1.0)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(hangs.await.unwrap().status, 504);
    assert_eq!(queued.await.unwrap().status, 200);
    let m = scrape(&server, "/agent/metrics").await;
    expect(&m, "magma_inferences_running", 0.0);
    expect(&m, "magma_inferences_waiting", 0.0);
    expect(&m, r#"magma_inference_failures_total{kind="timeout"}"#, 1.0);
    expect(
        &m,
        r#"magma_requests_total{route="/v1/responses",status="504"}"#,
        1.0,
    );
    expect(
        &m,
        r#"magma_requests_total{route="/v1/responses",status="200"}"#,
        1.0,
    );
    expect(&m, r#"magma_candidates_total{status="completed"}"#, 1.0);
    // Not under the bare path.
    server.get("/metrics").await.expect_detail(404);
    server.stop().await;
}

#[tokio::test]
async fn without_metrics_configured_there_is_no_endpoint() {
    let server = TestServer::start(DemoAgent::new()).await;
    server.get("/metrics").await.expect_detail(404);
    server.stop().await;
}

#[cfg(feature = "cli")]
#[tokio::test]
async fn the_binary_serves_metrics_with_the_flag_or_its_variable() {
    use crate::binary::Binary;
    for (args, env) in [
        (&["--metrics"][..], &[][..]),
        (&[][..], &[("MAGMA_SERVER_METRICS", "true")][..]),
    ] {
        let bin = Binary::start_with_env(args, env, None).await;
        let get = |path: &'static str| send(bin.addr, Method::GET, path, &[], Bytes::new());
        get("/health").await.expect(200);
        let reply = get("/metrics").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let m = scrape_text(reply.text());
        expect(
            &m,
            r#"magma_requests_total{route="/health",status="200"}"#,
            1.0,
        );
    }
    let bin = Binary::start(&[], None).await;
    let reply = send(bin.addr, Method::GET, "/metrics", &[], Bytes::new()).await;
    assert_eq!(reply.status, 404);
}
