//! What one request may make the server hold: the response-size limit
//! before the agent runs and while its answer is written, and bounded `422`
//! error lists.

use magma_server::demo::DemoAgent;
use magma_server::{
    Agent, AgentDecision, AgentInfo, AgentInput, Candidate, Config, Json, Rejection, RequestContext,
};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{
    TestAgent, TestServer, build, check_response, h2_connect, raw_exchange, raw_read, read, send,
    slow_request, user_request, within,
};

fn limited(bytes: u64) -> Config {
    let mut c = Config::default();
    c.max_response_bytes = bytes;
    c
}

fn request_with_memory(id: &str, memory_bytes: usize, num_outputs: u64) -> String {
    format!(
        r#"{{"request_id":"{id}","inputs":[{{"id":0,"instruction":{{"type":"user","content":"go"}},"num_outputs":{num_outputs},"memory":{{"blob":"{}"}}}}]}}"#,
        "m".repeat(memory_bytes)
    )
}

/// The amplification of the issue, scaled down: memory times candidates
/// over the limit is refused before the agent runs, just under it answered.
#[tokio::test]
async fn memory_times_candidates_over_the_response_limit_is_422_before_the_agent() {
    let server = TestServer::with_config(DemoAgent::new(), limited(100_000)).await;
    let bomb = request_with_memory("amp", 10_000, 1024);
    let detail = server.respond(bomb).await.expect_detail(422);
    assert!(detail.contains("100000 bytes"), "{detail}");
    assert!(detail.contains("at least"), "{detail}");

    // Nine candidates of 10 kB memory fit: answered whole, memory intact.
    let fits = request_with_memory("fits", 10_000, 9);
    let reply = server.respond(fits.clone()).await;
    let response = check_response(&fits, &reply);
    assert_eq!(response.len(), 9);
    assert!(reply.body.len() < 100_000);
    let blob = response[8].memory.get("blob").and_then(Json::as_str);
    assert_eq!(blob.map(str::len), Some(10_000));
}

/// The demo agent refuses an answer its echoed content would make too
/// large, with a message that says so; the server's own estimate cannot
/// see content.
#[tokio::test]
async fn the_demo_agent_rejects_an_answer_over_the_limit() {
    let server = TestServer::with_config(DemoAgent::new(), limited(100_000)).await;
    let content = "c".repeat(5_000);
    let detail = server
        .respond(user_request("echo", &content, 64))
        .await
        .expect_detail(422);
    assert!(
        detail.contains("response limit of 100000 bytes"),
        "{detail}"
    );
    let ok = user_request("echo", &content, 8);
    let reply = server.respond(ok.clone()).await;
    assert_eq!(check_response(&ok, &reply).len(), 8);
}

/// An agent whose answer grows beyond what the request announced: the
/// server stops writing at the limit and answers 500 with a JSON detail.
#[derive(Clone)]
struct Verbose;

impl Agent for Verbose {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("verbose", "1.0.0")
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let limit = RequestContext::current()
            .and_then(|c| c.max_response_bytes())
            .ok_or_else(|| Rejection::new("no response limit in the context"))?;
        // Each candidate is a tenth of the limit: ten candidates pass it.
        let say = "v".repeat(usize::try_from(limit / 10).unwrap());
        let n = usize::try_from(input.num_outputs.get()).unwrap();
        Ok(vec![
            Candidate::new(
                input.memory.clone(),
                AgentDecision::say(say)
            );
            n
        ])
    }
}

#[tokio::test]
async fn an_agent_answer_over_the_limit_is_500_and_the_server_keeps_serving() {
    let server = TestServer::with_config(Verbose, limited(200_000)).await;
    let detail = server
        .respond(user_request("big", "x", 12))
        .await
        .expect_detail(500);
    assert!(
        detail.contains("response limit of 200000 bytes"),
        "{detail}"
    );
    let small = user_request("small", "x", 3);
    let reply = server.respond(small.clone()).await;
    assert_eq!(check_response(&small, &reply).len(), 3);
    server.get("/health").await.expect(200);
}

/// The 422 error-list bomb: the body lists the first 100 problems and
/// counts the rest, instead of one object per element of the request.
#[tokio::test]
async fn a_422_error_list_is_bounded_and_counts_the_rest() {
    let server = TestServer::start(DemoAgent::new()).await;
    let n = 200_000;
    let bomb = format!(
        r#"{{"request_id":"e","inputs":[{}]}}"#,
        vec!["0"; n].join(",")
    );
    let reply = server.respond(bomb.clone()).await;
    let json = reply.expect(422);
    let body = json.as_object().unwrap();
    assert_eq!(body.get("detail").unwrap().as_array().unwrap().len(), 100);
    let omitted = body.get("omitted_errors").unwrap().as_number().unwrap();
    assert_eq!(omitted.as_u64(), Some(n as u64 - 100));
    assert!(reply.body.len() < 20_000, "{} bytes", reply.body.len());
    assert!(reply.body.len() < bomb.len() / 10);
}

/// HTTP/2 is held to the HTTP/1.1 limits: an idle connection (one that only
/// answers PINGs) is closed after the header timeout instead of holding its
/// `max_connections` slot forever.
#[tokio::test]
async fn an_idle_http2_connection_is_closed_after_the_header_timeout() {
    let mut config = Config::default();
    config.header_timeout = std::time::Duration::from_millis(300);
    let server = TestServer::with_config(DemoAgent::new(), config).await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (mut h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    let uri = format!("http://{}/health", server.addr);
    let req = build(http::Method::GET, &uri, &[], bytes::Bytes::new());
    read(h2.send_request(req).await.unwrap()).await.expect(200);
    let started = std::time::Instant::now();
    within("the idle HTTP/2 connection to be closed", conn)
        .await
        .unwrap()
        .ok();
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(250),
        "{waited:?}"
    );
}

/// One HTTP/2 connection has at most `max_concurrent_streams` requests
/// (and so request bodies) at once.
#[tokio::test]
async fn http2_streams_per_connection_are_bounded() {
    let mut config = Config::default();
    config.max_concurrent_streams = 2;
    let agent = TestAgent::default();
    let stats = agent.stats.clone();
    let server = TestServer::with_config(agent, config).await;
    let mut h2 = h2_connect(server.addr).await;
    // One exchange first, so that the client has the server's SETTINGS and
    // queues streams past the limit (before it, they are refused).
    let health = format!("http://{}/health", server.addr);
    let req = build(http::Method::GET, &health, &[], bytes::Bytes::new());
    read(h2.send_request(req).await.unwrap()).await.expect(200);
    let uri = format!("http://{}/v1/responses", server.addr);
    let streams: Vec<_> = (0..6)
        .map(|i| {
            let mut h2 = h2.clone();
            let uri = uri.clone();
            tokio::spawn(async move {
                let request = slow_request(&format!("s{i}"), 150);
                let req = build(
                    http::Method::POST,
                    &uri,
                    &[("content-type", "application/json")],
                    bytes::Bytes::from(request.clone()),
                );
                let reply = read(h2.send_request(req).await.unwrap()).await;
                check_response(&request, &reply);
            })
        })
        .collect();
    within("6 streams over a 2-stream connection", async {
        for s in streams {
            s.await.unwrap();
        }
    })
    .await;
    assert_eq!(stats.started(), 6);
    assert!(stats.max_active() <= 2, "{} at once", stats.max_active());
}

/// RFC 9112: an HTTP/1.1 request with no `Host`, or two, is `400`; HTTP/1.0
/// needs none.
#[tokio::test]
async fn host_rules_of_http_1_1() {
    let server = TestServer::start(DemoAgent::new()).await;
    for head in [
        "GET /health HTTP/1.1\r\n\r\n",
        "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ] {
        let (_, reply) = raw_exchange(server.addr, head.as_bytes()).await;
        assert_eq!(reply.status, 400, "{head:?}: {reply:?}");
        assert!(reply.body.contains("Host"), "{}", reply.body);
        assert!(
            reply
                .head
                .to_ascii_lowercase()
                .contains("x-request-id: srv-")
        );
    }
    let (_, reply) = raw_exchange(server.addr, b"GET /health HTTP/1.0\r\n\r\n").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let (_, reply) = raw_exchange(server.addr, b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n").await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

/// `HEAD` is answered on the `GET` routes: the head of the `GET` answer,
/// without its body.
#[tokio::test]
async fn head_is_answered_on_the_get_routes() {
    let server = TestServer::start(DemoAgent::new()).await;
    for path in ["/health", "/v1/info", "/openapi.json"] {
        let get = server.get(path).await;
        let head = send(
            server.addr,
            http::Method::HEAD,
            path,
            &[],
            bytes::Bytes::new(),
        )
        .await;
        assert_eq!(head.status.as_u16(), 200, "{path}");
        assert!(head.body.is_empty(), "{path}");
        assert_eq!(head.header("content-type"), Some("application/json"));
        assert_eq!(
            head.header("content-length"),
            Some(get.body.len().to_string().as_str()),
            "{path}"
        );
    }
    let reply = send(
        server.addr,
        http::Method::HEAD,
        "/v1/responses",
        &[],
        bytes::Bytes::new(),
    )
    .await;
    assert_eq!(reply.status.as_u16(), 405);
    assert_eq!(reply.header("allow"), Some("POST"));
}

/// A body `request_id` that cannot be a header value as it is (control
/// characters, non-ASCII) is echoed percent-escaped: the header is always
/// there.
#[tokio::test]
async fn x_request_id_is_always_present() {
    let server = TestServer::start(DemoAgent::new()).await;
    let request = user_request("a\nb é", "x", 1);
    let reply = server.respond(request.clone()).await;
    check_response(&request, &reply);
    assert_eq!(reply.header("x-request-id"), Some("a%0Ab%20%C3%A9"));
}

/// The budget is shared by all connections: while one client holds part
/// of it with an unfinished body, another client's request, whose body,
/// parsed request and answer do not fit beside it, waits, then gets 503
/// with `Retry-After`; once the first request is answered, its bytes are
/// given back.
#[tokio::test]
async fn bodies_of_all_connections_share_one_budget() {
    let mut c = Config::default();
    c.max_body_bytes = 64 * 1024;
    c.max_response_bytes = 64 * 1024;
    c.max_total_body_bytes = 200_000;
    let server = TestServer::with_config(DemoAgent::new(), c).await;
    let body = user_request("big", &"x".repeat(59_000), 1);
    let head = |len: usize| {
        format!(
            "POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
             Content-Length: {len}\r\n\r\n"
        )
    };
    // The holder: all of its body but the last byte.
    let mut holder = TcpStream::connect(server.addr).await.expect("connect");
    holder
        .write_all(head(body.len()).as_bytes())
        .await
        .expect("write");
    holder
        .write_all(&body.as_bytes()[..body.len() - 1])
        .await
        .expect("write");
    let full = format!("{}{body}", head(body.len()));
    // Once the server has read the holder's bytes, the next body of the
    // same size cannot fit (until then it may still be answered).
    let refused = within("a 503 from the full budget", async {
        loop {
            let (_, reply) = raw_exchange(server.addr, full.as_bytes()).await;
            if reply.status == 503 {
                return reply;
            }
            assert_eq!(reply.status, 200, "{reply:?}");
        }
    })
    .await;
    assert!(
        refused
            .body
            .contains("limit of 200000 bytes of requests and answers"),
        "{refused:?}"
    );
    assert!(
        refused.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused:?}"
    );
    // The holder finishes and is answered; its share is given back.
    holder
        .write_all(&body.as_bytes()[body.len() - 1..])
        .await
        .expect("write");
    assert_eq!(raw_read(&mut holder).await.status, 200);
    let (_, reply) = raw_exchange(server.addr, full.as_bytes()).await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

/// A `422` longer than what its request already holds takes the
/// difference from the same budget before it is written: the body
/// `{"zzz":"x..."}` as an input echoes the input three times (two `missing`
/// errors, one `extra_forbidden`), so its `422` is three times the body
/// where the request holds it twice. Alone it fits and is answered whole;
/// beside a holder that leaves room for the parse but not for the longer
/// `422`, it is `503`; once the holder is answered, `422` again.
#[tokio::test]
async fn a_422_longer_than_its_body_is_charged_to_the_budget() {
    let mut c = Config::default();
    c.max_body_bytes = 64 * 1024;
    c.max_response_bytes = 64 * 1024;
    c.max_total_body_bytes = 200_000;
    let server = TestServer::with_config(DemoAgent::new(), c).await;
    let echo = format!(
        r#"{{"request_id":"echo","inputs":[{{"zzz":"{}"}}]}}"#,
        "x".repeat(55_000)
    );
    let head = |len: usize| {
        format!(
            "POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
             Content-Length: {len}\r\n\r\n"
        )
    };
    let invalid = format!("{}{echo}", head(echo.len()));
    // Alone: the whole `422`, longer than twice the body.
    let (_, alone) = raw_exchange(server.addr, invalid.as_bytes()).await;
    assert_eq!(alone.status, 422, "{alone:?}");
    assert!(alone.body.len() > 2 * echo.len(), "{}", alone.body.len());
    assert_eq!(alone.body.matches("xxxxxxxxxx\"").count(), 3);
    assert!(alone.body.contains(r#""type":"extra_forbidden""#));
    // A holder of 59 kB: the body and the parse (2 x 55 kB) fit beside
    // it, the third 55 kB of the `422` does not.
    let body = user_request("big", &"x".repeat(59_000), 1);
    let mut holder = TcpStream::connect(server.addr).await.expect("connect");
    holder
        .write_all(head(body.len()).as_bytes())
        .await
        .expect("write");
    holder
        .write_all(&body.as_bytes()[..body.len() - 1])
        .await
        .expect("write");
    let refused = within("a 503 for the 422 that does not fit", async {
        loop {
            let (_, reply) = raw_exchange(server.addr, invalid.as_bytes()).await;
            if reply.status == 503 {
                return reply;
            }
            assert_eq!(reply.status, 422, "{reply:?}");
        }
    })
    .await;
    assert!(
        refused
            .body
            .contains("limit of 200000 bytes of requests and answers"),
        "{refused:?}"
    );
    assert!(
        refused.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused:?}"
    );
    holder
        .write_all(&body.as_bytes()[body.len() - 1..])
        .await
        .expect("write");
    assert_eq!(raw_read(&mut holder).await.status, 200);
    // The holder's share and the refused request's are given back.
    let (_, again) = raw_exchange(server.addr, invalid.as_bytes()).await;
    assert_eq!(again.status, 422, "{again:?}");
    assert_eq!(again.body, alone.body);
}

/// HTTP/2 streams take from the same budget as HTTP/1.1 bodies.
#[tokio::test]
async fn http2_streams_count_against_the_same_budget() {
    let mut c = Config::default();
    c.max_body_bytes = 64 * 1024;
    c.max_response_bytes = 64 * 1024;
    c.max_total_body_bytes = 200_000;
    let server = TestServer::with_config(DemoAgent::new(), c).await;
    let body = user_request("big", &"x".repeat(59_000), 1);
    // An HTTP/2 stream holding all of its body but the last byte.
    let stream = TcpStream::connect(server.addr).await.expect("connect");
    let (mut h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(2);
    let req = http::Request::post(format!("http://{}/v1/responses", server.addr))
        .header("content-type", "application/json")
        .body(ChannelBody(rx))
        .expect("request");
    let pending = tokio::spawn(async move { h2.send_request(req).await });
    tx.send(bytes::Bytes::copy_from_slice(
        &body.as_bytes()[..body.len() - 1],
    ))
    .await
    .expect("send");
    let full = format!(
        "POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    within("a 503 from the full budget", async {
        loop {
            let (_, reply) = raw_exchange(server.addr, full.as_bytes()).await;
            if reply.status == 503 {
                return;
            }
            assert_eq!(reply.status, 200, "{reply:?}");
        }
    })
    .await;
    tx.send(bytes::Bytes::copy_from_slice(
        &body.as_bytes()[body.len() - 1..],
    ))
    .await
    .expect("send");
    drop(tx);
    let resp = within("the HTTP/2 answer", pending)
        .await
        .expect("join")
        .expect("response");
    assert_eq!(read(resp).await.status, 200);
}

/// A request body whose frames a test sends one at a time.
struct ChannelBody(tokio::sync::mpsc::Receiver<bytes::Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|data| data.map(|d| Ok(hyper::body::Frame::data(d))))
    }
}

/// A peer that keeps its HTTP/2 flow-control window at zero cannot make the
/// server hold its answer forever: the connection gets a `GOAWAY` after the
/// header timeout and is dropped one period later, with the answer it was
/// holding; the server keeps serving.
#[tokio::test]
async fn an_http2_peer_with_a_shut_window_is_dropped() {
    let mut c = Config::default();
    c.header_timeout = std::time::Duration::from_secs(1);
    let server = TestServer::with_config(DemoAgent::new(), c).await;
    let tcp = TcpStream::connect(server.addr).await.expect("connect");
    let (mut client, conn) = h2::client::Builder::new()
        .initial_window_size(0)
        .initial_connection_window_size(65_535)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .expect("h2 handshake");
    let conn = tokio::spawn(conn);
    let req = http::Request::get(format!("http://{}/openapi.json", server.addr))
        .body(())
        .expect("request");
    let (response, _) = client.send_request(req, true).expect("send");
    let response = within("the response head", response)
        .await
        .expect("response head");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    // The window is shut: no byte of the body can come; the server ends the
    // connection (a GOAWAY, then a close) instead of waiting for ever.
    let ended = within("the server to drop the connection", async {
        loop {
            match body.data().await {
                Some(Ok(chunk)) => assert!(chunk.is_empty(), "data through a shut window"),
                Some(Err(e)) => break Err::<(), _>(e),
                None => break Ok(()),
            }
        }
    })
    .await;
    assert!(
        ended.is_err(),
        "the body ended normally through a shut window"
    );
    within("the client connection to end", conn)
        .await
        .expect("join")
        .ok();
    let reply = server.get("/health").await;
    assert_eq!(reply.status, 200);
}

/// A client that asks for a large answer and then stops reading is
/// dropped after the write timeout (its answer freed), and the server
/// keeps serving.
#[tokio::test]
async fn a_peer_that_stops_reading_is_dropped_after_the_write_timeout() {
    let mut c = Config::default();
    c.write_timeout = std::time::Duration::from_secs(1);
    let server = TestServer::with_config(DemoAgent::new(), c).await;
    // 15 candidates of 1 MiB memory: a 15 MiB answer, more than the
    // loopback socket buffers take without the client reading.
    let body = request_with_memory("stall", 1024 * 1024 - 200, 15);
    let head = format!(
        "POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stalled = TcpStream::connect(server.addr).await.expect("connect");
    stalled.write_all(head.as_bytes()).await.expect("write");
    stalled.write_all(body.as_bytes()).await.expect("write");
    // Not reading for well over the write timeout.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let (_, reply) = raw_exchange(server.addr, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert_eq!(reply.status, 200);
    // Now read: the answer stops short of its length, the connection cut.
    let mut got = Vec::new();
    let read = within("the cut connection's end", async {
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            match stalled.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    });
    read.await;
    let text = String::from_utf8_lossy(&got[..got.len().min(4096)]).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text:?}");
    let length: usize = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_owned)
        })
        .expect("content-length")
        .trim()
        .parse()
        .expect("a number");
    let head_len = text.find("\r\n\r\n").expect("end of head") + 4;
    assert!(
        got.len() - head_len < length,
        "the whole answer ({length} bytes) arrived although the client did not read"
    );
}
