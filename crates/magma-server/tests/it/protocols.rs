//! HTTP/1.1 keep-alive and HTTP/2 with prior knowledge, in clear text.

use bytes::Bytes;
use http::{Method, Version};
use hyper_util::rt::TokioIo;
use magma_server::demo::DemoAgent;
use tokio::net::TcpStream;

use crate::support::{TestServer, build, check_response, h2_connect, read, slow_request, within};

#[tokio::test]
async fn http1_keep_alive_serves_several_requests_on_one_connection() {
    let server = TestServer::start(DemoAgent::new()).await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let uri = format!("http://{}", server.addr);
    for i in 0..4 {
        sender.ready().await.expect("connection still open");
        let request = crate::support::user_request(&format!("ka-{i}"), "again", 1);
        let req = build(
            Method::POST,
            &format!("{uri}/v1/responses"),
            &[("content-type", "application/json")],
            Bytes::from(request.clone()),
        );
        let reply = within("keep-alive response", async {
            read(sender.send_request(req).await.unwrap()).await
        })
        .await;
        assert_eq!(reply.version, Version::HTTP_11);
        assert_eq!(
            reply.header("connection"),
            None,
            "the server must not close"
        );
        check_response(&request, &reply);
        let req = build(Method::GET, &format!("{uri}/health"), &[], Bytes::new());
        let reply = within("keep-alive health", async {
            read(sender.send_request(req).await.unwrap()).await
        })
        .await;
        reply.expect(200);
    }
    // Eight exchanges on one socket, and it is still open.
    assert!(!conn.is_finished());
}

#[tokio::test]
async fn http2_prior_knowledge_with_concurrent_streams() {
    let server = TestServer::start(DemoAgent::new()).await;
    let h2 = h2_connect(server.addr).await;
    let uri = format!("http://{}", server.addr);
    let streams: Vec<_> = (0..6)
        .map(|i| {
            let mut h2 = h2.clone();
            let uri = uri.clone();
            tokio::spawn(async move {
                let request = slow_request(&format!("h2-{i}"), 100);
                let req = build(
                    Method::POST,
                    &format!("{uri}/v1/responses"),
                    &[("content-type", "application/json")],
                    Bytes::from(request.clone()),
                );
                let reply = read(h2.send_request(req).await.unwrap()).await;
                assert_eq!(reply.version, Version::HTTP_2);
                check_response(&request, &reply);
            })
        })
        .collect();
    within("6 HTTP/2 streams", async {
        for s in streams {
            s.await.unwrap();
        }
    })
    .await;
    let mut h2 = h2;
    let req = build(Method::GET, &format!("{uri}/v1/info"), &[], Bytes::new());
    let reply = read(h2.send_request(req).await.unwrap()).await;
    assert_eq!(reply.version, Version::HTTP_2);
    reply.expect(200);
}
