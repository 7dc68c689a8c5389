//! Stub servers on 127.0.0.1, each on its own thread (and runtime), stopped
//! when dropped: [`StubServer`], a hyper HTTP/1.1 server whose answers a
//! closure chooses, and [`RawServer`], a TCP server that writes bytes
//! verbatim (answers hyper would not send).

use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The method, e.g. `POST`.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Recorded {
    /// The path without the query.
    pub fn path_only(&self) -> &str {
        self.path.split('?').next().unwrap_or("")
    }

    /// The value of header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What the server answers: a status, headers, a body, after a delay.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header (none when empty).
    pub content_type: String,
    /// Further headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// How long to wait before answering.
    pub delay: Duration,
}

impl Reply {
    /// An answer without a body or `Content-Type` (e.g. `204`).
    pub fn empty(status: u16) -> Reply {
        Reply {
            content_type: String::new(),
            ..Reply::json(status, Vec::new())
        }
    }

    /// A JSON answer (`Content-Type: application/json`).
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            content_type: "application/json".to_owned(),
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// The same answer, sent after `delay`.
    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// The same answer with another `Content-Type`.
    pub fn content_type(mut self, value: &str) -> Reply {
        value.clone_into(&mut self.content_type);
        self
    }

    /// The same answer with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// The answer to come, for handlers that wait (see [`StubServer::start_async`]).
pub type ReplyFuture = Pin<Box<dyn Future<Output = Reply> + Send>>;

type Handler = Arc<dyn Fn(Recorded) -> ReplyFuture + Send + Sync>;

/// How a [`StubServer`] listens.
#[derive(Debug, Default)]
pub struct Options {
    /// Listen here instead of a fresh port.
    pub addr: Option<SocketAddr>,
    /// Serve HTTPS with this configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Read the first bytes of each connection, then drop it without an
    /// answer (and, over TLS, without `close_notify`).
    pub hang_up: bool,
}

/// A hyper HTTP/1.1 server with keep-alive; every request is recorded and
/// answered by the handler.
#[derive(Debug)]
pub struct StubServer {
    addr: SocketAddr,
    https: bool,
    accepted: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    _background: Background,
}

impl StubServer {
    /// Plain HTTP on a fresh port.
    pub fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> StubServer {
        StubServer::start_with(Options::default(), handler)
    }

    /// With [`Options`].
    pub fn start_with(
        options: Options,
        handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> StubServer {
        StubServer::start_async(options, move |rec| {
            let reply = handler(&rec);
            Box::pin(async move { reply })
        })
    }

    /// With a handler that may wait (for other requests, timers) before it
    /// answers; requests are served concurrently on the server's runtime.
    pub fn start_async(
        options: Options,
        handler: impl Fn(Recorded) -> ReplyFuture + Send + Sync + 'static,
    ) -> StubServer {
        let handler: Handler = Arc::new(handler);
        let listener = StdListener::bind(options.addr.unwrap_or(([127, 0, 0, 1], 0).into()))
            .expect("bind the stub server");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("local address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let tls = options.tls.map(tokio_rustls::TlsAcceptor::from);
        let https = tls.is_some();
        let hang_up = options.hang_up;
        let (acc, reqs) = (accepted.clone(), requests.clone());
        let background = Background::spawn(move |mut stop| async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            loop {
                let stream = tokio::select! {
                    _ = &mut stop => break,
                    r = listener.accept() => match r {
                        Ok((s, _)) => s,
                        Err(_) => continue,
                    },
                };
                acc.fetch_add(1, Ordering::SeqCst);
                let (handler, reqs, tls) = (handler.clone(), reqs.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(tls) => {
                            if let Ok(s) = tls.accept(stream).await {
                                connection(s, hang_up, handler, reqs).await;
                            }
                        }
                        None => connection(stream, hang_up, handler, reqs).await,
                    }
                });
            }
        });
        StubServer {
            addr,
            https,
            accepted,
            requests,
            _background: background,
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` or `https://ADDR`.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("requests lock").clone()
    }
}

/// A future that runs on its own thread and current-thread runtime until
/// dropped: dropping sends the stop signal, then joins the thread (and
/// re-raises its panic unless the test is already panicking).
#[derive(Debug)]
pub struct Background {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Resolves when the [`Background`] that was given it is dropped.
pub type Stop = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Background {
    /// Runs `task(stop)` on a new thread; `stop` resolves on drop.
    pub fn spawn<F, Fut>(task: F) -> Background
    where
        F: FnOnce(Stop) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let stop: Stop = Box::pin(async move {
            let _ = stop_rx.await;
        });
        let thread = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("background runtime")
                .block_on(task(stop));
        });
        Background {
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let result = t.join();
            if !std::thread::panicking() {
                result.expect("background thread panicked");
            }
        }
    }
}

async fn connection<S>(stream: S, hang_up: bool, handler: Handler, reqs: Arc<Mutex<Vec<Recorded>>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if hang_up {
        use tokio::io::AsyncReadExt;
        let mut stream = stream;
        let mut buf = [0u8; 1024];
        let _ = stream.read(&mut buf).await;
        return;
    }
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
            reqs.lock().expect("requests lock").push(rec.clone());
            let reply = handler(rec).await;
            if !reply.delay.is_zero() {
                tokio::time::sleep(reply.delay).await;
            }
            let mut response = http::Response::builder().status(reply.status);
            if !reply.content_type.is_empty() {
                response = response.header("content-type", reply.content_type);
            }
            for (name, value) in reply.headers {
                response = response.header(name, value);
            }
            let response = response
                .body(Full::new(Bytes::from(reply.body)))
                .expect("a valid stub reply");
            Ok::<_, Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// A raw TCP server: reads one request per connection (head and a
/// `Content-Length` body), counts it, writes `answer` verbatim (if any) and
/// closes.
#[derive(Debug)]
pub struct RawServer {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RawServer {
    /// Starts on a fresh port.
    pub fn start(answer: Option<Vec<u8>>) -> RawServer {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind the raw server");
        let addr = listener.local_addr().expect("local address");
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (reqs, stopping) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                if crate::http1::read_message(&mut stream).is_some() {
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

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests read so far.
    pub fn requests(&self) -> usize {
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

/// An address on 127.0.0.1 where nothing listens (bound, then released).
pub fn free_port() -> SocketAddr {
    let l = StdListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local address")
}
