//! Test servers on 127.0.0.1: a configurable hyper server (status, body,
//! delay per request; counts accepted TCP connections; optional TLS) and a
//! raw TCP server for answers hyper would not send.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use magma_client::magma_protocol::{
    AgentDecision, AgentInfo, AgentInput, AgentInstruction, AgentRequest, AgentResponse, Candidate,
    Json,
};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// What the server answers.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
    pub(crate) delay: Duration,
}

impl Reply {
    pub(crate) fn json(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    pub(crate) fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Default)]
pub(crate) struct Options {
    /// Listen here instead of a fresh port.
    pub(crate) addr: Option<SocketAddr>,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// Read the first bytes of each connection, then drop it without an
    /// answer (and, over TLS, without `close_notify`).
    pub(crate) hang_up: bool,
}

/// A hyper HTTP/1.1 server with keep-alive on its own thread and runtime.
pub(crate) struct TestServer {
    addr: SocketAddr,
    https: bool,
    accepted: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    pub(crate) fn start(
        handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> TestServer {
        TestServer::start_with(Options::default(), handler)
    }

    pub(crate) fn start_with(
        options: Options,
        handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> TestServer {
        let handler: Handler = Arc::new(handler);
        let listener = StdListener::bind(options.addr.unwrap_or(([127, 0, 0, 1], 0).into()))
            .expect("bind test server");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        #[cfg(feature = "tls")]
        let tls = options.tls.map(tokio_rustls::TlsAcceptor::from);
        #[cfg(feature = "tls")]
        let https = tls.is_some();
        #[cfg(not(feature = "tls"))]
        let https = false;
        let hang_up = options.hang_up;
        let (acc, reqs) = (accepted.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let stream = tokio::select! {
                        _ = &mut stop_rx => break,
                        r = listener.accept() => match r {
                            Ok((s, _)) => s,
                            Err(_) => continue,
                        },
                    };
                    acc.fetch_add(1, Ordering::SeqCst);
                    let (handler, reqs) = (handler.clone(), reqs.clone());
                    #[cfg(feature = "tls")]
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        #[cfg(feature = "tls")]
                        if let Some(tls) = tls {
                            if let Ok(s) = tls.accept(stream).await {
                                if hang_up {
                                    drop_after_first_read(s).await;
                                } else {
                                    serve(TokioIo::new(s), handler, reqs).await;
                                }
                            }
                            return;
                        }
                        if hang_up {
                            drop_after_first_read(stream).await;
                        } else {
                            serve(TokioIo::new(stream), handler, reqs).await;
                        }
                    });
                }
            });
        });
        TestServer {
            addr,
            https,
            accepted,
            requests,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// TCP connections accepted so far.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let result = t.join();
            if !std::thread::panicking() {
                result.expect("test server thread panicked");
            }
        }
    }
}

async fn drop_after_first_read<S: tokio::io::AsyncRead + Unpin>(mut stream: S) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    let _ = stream.read(&mut buf).await;
}

async fn serve<I>(io: TokioIo<I>, handler: Handler, reqs: Arc<Mutex<Vec<Recorded>>>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let (handler, reqs) = (handler.clone(), reqs.clone());
        async move {
            let (parts, body) = req.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let rec = Recorded {
                method: parts.method.to_string(),
                path: parts
                    .uri
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                headers: parts.headers,
                body,
            };
            reqs.lock().unwrap().push(rec.clone());
            let reply = handler(&rec);
            if !reply.delay.is_zero() {
                tokio::time::sleep(reply.delay).await;
            }
            let response = http::Response::builder()
                .status(reply.status)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(reply.body)))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service)
        .await;
}

/// A raw TCP server: reads one request per connection (headers and a
/// `Content-Length` body), counts it, writes `answer` verbatim (if any) and
/// closes.
pub(crate) struct RawServer {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RawServer {
    pub(crate) fn start(answer: Option<Vec<u8>>) -> RawServer {
        let listener = StdListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (reqs, stopping) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                if read_request(&mut stream) {
                    reqs.fetch_add(1, Ordering::SeqCst);
                    if let Some(answer) = &answer {
                        let _ = stream.write_all(answer);
                        let _ = stream.flush();
                    }
                }
                // Dropping the stream closes the connection.
            }
        });
        RawServer {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(crate) fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = StdStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_request(stream: &mut StdStream) -> bool {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while data.len() < end + 4 + len {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => data.extend_from_slice(&buf[..n]),
                }
            }
            return true;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
pub(crate) fn free_port() -> SocketAddr {
    let l = StdListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

// ---------------------------------------------------------------------------
// A small echo agent and ways to spoil its answers.

pub(crate) fn info_json() -> String {
    AgentInfo::new("test-agent", "1.2.3").to_json_string()
}

/// The correct echo answer to a request: each candidate says
/// `echo: <content> #k` and returns the input memory with `steps` + 1.
pub(crate) fn echo_response(request: &AgentRequest) -> AgentResponse {
    AgentResponse::build(request, |input, k| {
        let mut memory = input.memory.clone();
        let steps = memory.get("steps").and_then(Json::as_i64).unwrap_or(0);
        memory.insert("steps", Json::from(steps + 1));
        Candidate::new(
            memory,
            AgentDecision::say(format!("echo: {} #{k}", input.instruction.content)),
        )
    })
}

/// An agent that answers health, info and responses correctly, letting
/// `spoil` rewrite the candidates array of each response.
pub(crate) fn agent(
    spoil: impl Fn(&mut Vec<Json>) + Send + Sync + 'static,
) -> impl Fn(&Recorded) -> Reply {
    move |rec: &Recorded| match (rec.method.as_str(), rec.path.as_str()) {
        ("GET", p) if p.ends_with("/health") => Reply::json(200, r#"{"status":"ready"}"#),
        ("GET", p) if p.ends_with("/v1/info") => Reply::json(200, info_json()),
        ("POST", p) if p.ends_with("/v1/responses") => match AgentRequest::from_slice(&rec.body) {
            Ok(request) => {
                let text = echo_response(&request).to_json_string();
                let mut value = Json::from_slice(text.as_bytes()).unwrap();
                if let Json::Array(items) = &mut value {
                    spoil(items);
                }
                Reply::json(200, value.to_json_string())
            }
            Err(e) => Reply::json(422, e.to_fastapi_body().to_json_string()),
        },
        _ => Reply::json(404, r#"{"detail":"Not Found"}"#),
    }
}

/// The echo agent, answering correctly.
pub(crate) fn echo_agent() -> impl Fn(&Recorded) -> Reply {
    agent(|_| {})
}

/// A request with `inputs` user instructions (ids 10, 11, ...), each asking
/// for `n` candidates.
pub(crate) fn request(id: &str, inputs: usize, n: u64) -> AgentRequest {
    let inputs = (0..inputs)
        .map(|i| {
            let mut input = AgentInput::new(10 + i as i64, AgentInstruction::user(format!("m{i}")));
            input.num_outputs = std::num::NonZeroU64::new(n).unwrap();
            input
        })
        .collect();
    AgentRequest::new(id, inputs).unwrap()
}

/// The `say` of every candidate, in order.
pub(crate) fn says(response: &AgentResponse) -> Vec<String> {
    response
        .candidates()
        .iter()
        .map(|c| {
            c.outcome
                .decision()
                .map(|d| d.say.clone())
                .unwrap_or_default()
        })
        .collect()
}
