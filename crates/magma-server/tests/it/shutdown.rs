//! Graceful shutdown in process (the binary's signals are in `binary`).

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use magma_server::Config;
use tokio::net::TcpStream;

use crate::support::{TestAgent, TestServer, check_response, send, slow_request, within};

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish_and_refuses_new_connections() {
    let agent = TestAgent::default();
    let mut config = Config::default();
    config.shutdown_grace = Duration::from_secs(30);
    let server = TestServer::with_config(agent.clone(), config).await;
    let addr = server.addr;
    let request = slow_request("in-flight", 1000);
    let in_flight = tokio::spawn({
        let request = request.clone();
        async move {
            let headers = [("content-type", "application/json")];
            send(
                addr,
                Method::POST,
                "/v1/responses",
                &headers,
                Bytes::from(request),
            )
            .await
        }
    });
    agent.stats.wait_started(1).await;
    let stopped = tokio::spawn(server.stop());
    // The listener closes right away; poll until connecting is refused.
    within("new connections to be refused", async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        !in_flight.is_finished(),
        "the slow request ended before the refusal was seen"
    );
    check_response(&request, &in_flight.await.unwrap());
    within("serve to return", stopped).await.unwrap();
}

#[tokio::test]
async fn the_grace_period_bounds_the_shutdown() {
    let agent = TestAgent::default();
    let mut config = Config::default();
    config.shutdown_grace = Duration::from_millis(200);
    let server = TestServer::with_config(agent.clone(), config).await;
    let addr = server.addr;
    let in_flight = tokio::spawn(async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = crate::support::build(
            Method::POST,
            "/v1/responses",
            &[],
            Bytes::from(slow_request("cut", 60_000)),
        );
        sender.send_request(req).await.map(|r| r.status())
    });
    agent.stats.wait_started(1).await;
    // `stop` returns long before the 60 s inference would end (`within`
    // allows 30 s), and the request is cut rather than answered.
    server.stop().await;
    let outcome = within("the cut request", in_flight).await.unwrap();
    assert!(outcome.is_err(), "the request was answered: {outcome:?}");
}
