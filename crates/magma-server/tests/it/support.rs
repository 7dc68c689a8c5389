//! A real server on 127.0.0.1 port 0, real clients (hyper's and raw
//! sockets), and agents that misbehave on request.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use magma_server::demo::DemoAgent;
use magma_server::{
    Agent, AgentInfo, AgentInput, AgentRequest, AgentResponse, Candidate, Config, Json, Readiness,
    ReadyFlag, Rejection, Server,
};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Upper bound for anything a test waits on, so a bug fails instead of
/// hanging. Generous: only reached when something is wrong.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

pub(crate) async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// A server running in the test's runtime; shut down on drop.
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    pub(crate) async fn start<A: Agent>(agent: A) -> TestServer {
        TestServer::with_config(agent, Config::default()).await
    }

    pub(crate) async fn with_config<A: Agent>(agent: A, config: Config) -> TestServer {
        let server = Server::bind("127.0.0.1:0", config).await.expect("bind");
        let addr = server.local_addr();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(agent, async move {
            let _ = rx.await;
        }));
        TestServer {
            addr,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Signals shutdown and waits for `serve` to return.
    pub(crate) async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            within("serve to return", task)
                .await
                .expect("serve panicked");
        }
    }

    pub(crate) async fn get(&self, path: &str) -> Reply {
        send(self.addr, Method::GET, path, &[], Bytes::new()).await
    }

    /// `POST` with `Content-Type: application/json`, as `requests` does.
    pub(crate) async fn post_json(&self, path: &str, body: impl Into<Bytes>) -> Reply {
        send(
            self.addr,
            Method::POST,
            path,
            &[("content-type", "application/json")],
            body.into(),
        )
        .await
    }

    pub(crate) async fn respond(&self, body: impl Into<Bytes>) -> Reply {
        self.post_json("/v1/responses", body).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// A response, read whole.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) version: http::Version,
    pub(crate) body: Bytes,
}

impl Reply {
    pub(crate) fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("utf-8 body")
    }

    pub(crate) fn json(&self) -> Json {
        Json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ascii header"))
    }

    /// Asserts `status` and a JSON content type; returns the body as JSON.
    pub(crate) fn expect(&self, status: u16) -> Json {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{self:?}"
        );
        self.json()
    }

    /// Asserts `status` with a string `detail`; returns it.
    pub(crate) fn expect_detail(&self, status: u16) -> String {
        let json = self.expect(status);
        let obj = json.as_object().expect("object body");
        assert_eq!(obj.len(), 1, "only `detail`: {json}");
        obj.get("detail")
            .and_then(Json::as_str)
            .expect("string detail")
            .to_owned()
    }
}

/// One request on a new HTTP/1.1 connection (as Python `requests` without a
/// session does).
pub(crate) async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Reply {
    within("an HTTP/1.1 exchange", async {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        let req = build(method, &format!("http://{addr}{path}"), headers, body);
        read(sender.send_request(req).await.expect("response")).await
    })
    .await
}

pub(crate) fn build(
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Request<Full<Bytes>> {
    let mut b = Request::builder().method(method).uri(uri);
    // As every HTTP/1.1 client sends it (hyper's connection-level client
    // does not); a test can give its own.
    let authority = uri
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.authority().cloned());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        let host = authority.as_ref().map_or("localhost", |a| a.as_str());
        b = b.header("host", host);
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(body)).expect("request")
}

pub(crate) async fn read(resp: http::Response<hyper::body::Incoming>) -> Reply {
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("response body").to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        version: parts.version,
        body,
    }
}

/// An HTTP/2 connection with prior knowledge (no TLS, no upgrade).
pub(crate) async fn h2_connect(
    addr: SocketAddr,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    sender
}

// Raw HTTP/1.1 exchanges come from the test kit.
pub(crate) use magma_testkit::http1::{exchange as raw_exchange, read_reply as raw_read};

/// Waits until the server closes the connection; panics if it sends
/// anything instead.
pub(crate) async fn expect_closed(stream: &mut TcpStream) {
    let mut chunk = [0u8; 1024];
    let read = within(
        "the server to close the connection",
        stream.read(&mut chunk),
    )
    .await;
    if let Ok(n @ 1..) = read {
        panic!(
            "unexpected bytes: {:?}",
            String::from_utf8_lossy(&chunk[..n])
        );
    }
}

/// A one-input user request.
pub(crate) fn user_request(id: &str, content: &str, num_outputs: u64) -> String {
    format!(
        r#"{{"request_id":{id:?},"inputs":[{{"id":0,"instruction":{{"type":"user","content":{content:?}}},"num_outputs":{num_outputs}}}]}}"#
    )
}

/// A request whose single input waits `delay_ms` in the demo agent.
pub(crate) fn slow_request(id: &str, delay_ms: u64) -> String {
    format!(
        r#"{{"request_id":{id:?},"inputs":[{{"id":0,"instruction":{{"type":"user","content":"slow"}},"extra_keys":{{"delay_ms":{delay_ms}}}}}]}}"#
    )
}

/// Parses a 200 body as the consumers do and checks it against the request.
pub(crate) fn check_response(request: &str, reply: &Reply) -> AgentResponse {
    assert_eq!(reply.status, StatusCode::OK, "body: {}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let request = AgentRequest::from_slice(request.as_bytes()).expect("valid request");
    let response = AgentResponse::from_slice(&reply.body)
        .unwrap_or_else(|e| panic!("invalid AgentResponse ({e}): {}", reply.text()));
    response
        .validate_request(&request)
        .expect("candidates match the request");
    response
}

/// The demo agent plus misbehaviour chosen by the instruction content,
/// readiness, and counters of concurrent inferences.
#[derive(Clone, Default)]
pub(crate) struct TestAgent {
    pub(crate) ready: ReadyFlag,
    pub(crate) stats: Arc<Stats>,
}

#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) started: AtomicUsize,
    pub(crate) active: AtomicUsize,
    pub(crate) max_active: AtomicUsize,
}

impl Stats {
    pub(crate) fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }

    pub(crate) fn max_active(&self) -> usize {
        self.max_active.load(Ordering::SeqCst)
    }

    /// Waits until `n` inferences have started.
    pub(crate) async fn wait_started(&self, n: usize) {
        within("inferences to start", async {
            while self.started() < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }
}

struct Active<'a>(&'a Stats);

impl<'a> Active<'a> {
    fn enter(stats: &'a Stats) -> Self {
        let now = stats.active.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_active.fetch_max(now, Ordering::SeqCst);
        stats.started.fetch_add(1, Ordering::SeqCst);
        Active(stats)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl TestAgent {
    pub(crate) fn not_ready(reason: &str) -> Self {
        TestAgent {
            ready: ReadyFlag::not_ready(reason),
            ..Default::default()
        }
    }
}

impl Agent for TestAgent {
    fn info(&self) -> AgentInfo {
        AgentInfo::new("test-agent", "1.2.3")
    }

    fn readiness(&self) -> Readiness {
        self.ready.get()
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let _active = Active::enter(&self.stats);
        let mut candidates = DemoAgent::new().respond(input).await?;
        match input.instruction.content.as_str() {
            "panic" => panic!("the test agent was asked to panic"),
            "reject" => return Err(Rejection::new("this agent refuses to answer \"reject\"")),
            "one too many" => candidates.push(candidates[0].clone()),
            "one too few" => {
                candidates.pop();
            }
            _ => {}
        }
        Ok(candidates)
    }
}
