//! `magma-validate proxy`: a reverse proxy in front of an agent that
//! forwards every exchange unchanged and checks it, and `replay`, which
//! sends a recording's requests to another agent.
//!
//! The listening side is HTTP/1.1 (hyper on a one-thread tokio runtime,
//! HTTPS with `--tls-cert`/`--tls-key`); the upstream side is
//! [`magma_client`] with the probe's TLS flags, called from a bounded pool
//! of threads. Validation and recording run after the answer is on its
//! way, on a thread of their own, so they add no latency to what the
//! consumer sees, and a fault of theirs never reaches it.
//!
//! Threads and memory: each kind of large buffer is allocated on one
//! thread only (request bodies on the listening thread, answers on
//! magma-client's runtime thread, what the checks parse on the check
//! thread), and the call threads hold none. The system allocator keeps
//! freed memory per thread (glibc's arenas): spread over many threads, the
//! memory a budget lets one exchange hold at a time was kept once per
//! thread; on one thread per kind it is kept once.

mod inspect;
mod metrics;
mod pool;
mod record;
mod replay;
mod summary;

use std::convert::Infallible;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use magma_client::{Client, ErrorKind, RawRequest};
use pool::{Call, CallPool, Called, Refused};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, watch};

pub use record::{Body, Digest, RecordedExchange, RecordedFinding};
pub use replay::{
    ReplayConfig, ReplayError, ReplayExchange, ReplayReport, replay, replay_human, replay_json,
};
pub use summary::{
    CheckCount, FindingCount, Percentiles, ProxySummary, summary_human, summary_json, summary_junit,
};

use inspect::{Checked, Route, inspect};
use summary::Stats;

/// Default largest request body forwarded: magma-server's default
/// `max_body_bytes` (16 MiB).
pub const DEFAULT_MAX_BODY_BYTES: u64 = 16 << 20;
/// Default memory budget of the bodies held at once: magma-server's
/// default `max_total_body_bytes` (256 MiB).
pub const DEFAULT_MAX_TOTAL_BODY_BYTES: u64 = 256 << 20;
/// How long a request waits for room in the budget before its `503`, as
/// magma-server waits.
const BUDGET_WAIT: Duration = Duration::from_secs(1);
/// The budget counts in units of this many bytes (a semaphore's permits).
const UNIT: u64 = 1024;
/// The largest buffer given at once to a request body of unknown length;
/// past it the buffer grows as it fills.
const MAX_UNKNOWN_LENGTH_BUFFER: usize = 64 << 20;

/// Default size over which `--record` writes a body's digest instead of
/// its text (1 MiB).
pub const DEFAULT_RECORD_BODY_LIMIT: usize = 1 << 20;
/// Default number of upstream calls under way at once (threads of the call
/// pool): magma-server's default `max_concurrent_inferences`.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 64;
/// Default number of requests waiting for a call thread before `503`.
pub const DEFAULT_MAX_QUEUED_CALLS: usize = 256;

/// How the proxy runs. Start with [`ProxyConfig::new`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The agent's base URL (`http://` or `https://`, with an optional prefix).
    pub upstream: String,
    /// The address to listen on, e.g. `127.0.0.1:8890` (port 0 picks one).
    pub listen: String,
    /// PEM CA certificates to trust for an `https` upstream.
    pub cacert: Option<PathBuf>,
    /// PEM client certificate and key for an upstream behind mutual TLS.
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// PEM certificate chain and key: listen with HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Seconds one upstream call may take, its wait for a call thread
    /// included (then `504`).
    pub timeout: Duration,
    /// Upstream calls under way at once: the threads of the call pool. At
    /// least 1.
    pub max_concurrent_calls: usize,
    /// Requests that wait for a call thread when all are busy; past them,
    /// `503` with a JSON `detail`.
    pub max_queued_calls: usize,
    /// Largest request body forwarded (larger: `413`).
    pub max_body_bytes: u64,
    /// Largest answer body read from the upstream (larger: `502`).
    pub max_response_bytes: u64,
    /// Memory budget of the bodies held at once, each counted twice (its
    /// bytes and what checking it parses), as magma-server counts requests.
    /// A request takes its share and as much again for its answer before it
    /// is read, and gets `503` if that does not fit within a second; an
    /// answer larger than that share is forwarded in any case, and checked
    /// only if the rest fits (otherwise a proxy fault is logged). At least
    /// `4 x max_body_bytes`.
    pub max_total_body_bytes: u64,
    /// Write every exchange to this file as a JSON line.
    pub record: Option<PathBuf>,
    /// Bodies over this size are recorded by SHA-256 digest.
    pub record_body_limit: usize,
    /// Memory keys whose values are never written to the recording.
    pub redact: Vec<String>,
    /// Stop after this long (otherwise at SIGINT or SIGTERM).
    pub duration: Option<Duration>,
    /// Serve the counters for Prometheus at `GET /metrics` on this address
    /// (plain HTTP, a listener of its own); none by default.
    pub metrics_listen: Option<String>,
}

impl ProxyConfig {
    /// A proxy from `listen` to `upstream` with the defaults.
    pub fn new(upstream: impl Into<String>, listen: impl Into<String>) -> ProxyConfig {
        ProxyConfig {
            upstream: upstream.into(),
            listen: listen.into(),
            cacert: None,
            client_identity: None,
            tls: None,
            timeout: magma_client::DEFAULT_TIMEOUT,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_queued_calls: DEFAULT_MAX_QUEUED_CALLS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_response_bytes: magma_client::DEFAULT_MAX_RESPONSE_BYTES,
            max_total_body_bytes: DEFAULT_MAX_TOTAL_BODY_BYTES,
            record: None,
            record_body_limit: DEFAULT_RECORD_BODY_LIMIT,
            redact: Vec::new(),
            duration: None,
            metrics_listen: None,
        }
    }
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The upstream URL or its TLS files are not usable.
    #[error("upstream {url}: {why}")]
    Upstream {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// The listening address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The metrics address (`--metrics-listen`) cannot be bound.
    #[error("--metrics-listen {addr}: cannot listen: {source}")]
    MetricsListen {
        /// The address.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The listening certificate or key cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// The recording file cannot be created.
    #[error("cannot create the recording {path}: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The limits do not fit together.
    #[error("{0}")]
    Limits(String),
    /// The runtime cannot start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// A line of the proxy's log: where it listens, a finding, a proxy fault.
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

/// A bound proxy, ready to [`run`](Proxy::run).
#[allow(missing_debug_implementations)] // holds a runtime and a listener
pub struct Proxy {
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    local_addr: SocketAddr,
    metrics: Option<(TcpListener, SocketAddr)>,
    shared: Arc<Shared>,
    checking: Arc<Checking>,
    config: ProxyConfig,
    writer: Option<std::thread::JoinHandle<()>>,
    checker: Option<std::thread::JoinHandle<()>>,
    #[cfg(feature = "tls")]
    acceptor: Option<tokio_rustls::TlsAcceptor>,
}

/// What the connections share.
struct Shared {
    config: ProxyConfig,
    next_id: AtomicU64,
    budget: Arc<tokio::sync::Semaphore>,
    calls: CallPool,
    /// The check thread's queue (closed at the end of [`Proxy::run`]). What
    /// waits in it holds its share of the budget, which bounds it.
    checks: Mutex<Option<mpsc::Sender<Done>>>,
    log: LogFn,
}

/// What the check thread uses.
struct Checking {
    config: ProxyConfig,
    stats: Mutex<Stats>,
    record: Mutex<Option<mpsc::Sender<String>>>,
    log: LogFn,
}

/// Budget units for `bytes` held twice (the bytes and their parse).
fn units(bytes: u64) -> u32 {
    u32::try_from(bytes.saturating_mul(2).div_ceil(UNIT)).unwrap_or(u32::MAX)
}

impl Proxy {
    /// Checks the configuration, opens the recording and binds the address.
    pub fn bind(config: ProxyConfig, log: LogFn) -> Result<Proxy, ProxyError> {
        let upstream_err = |why: String| ProxyError::Upstream {
            url: config.upstream.clone(),
            why,
        };
        let mut builder = Client::builder(config.upstream.clone())
            .timeout(config.timeout)
            .max_response_bytes(config.max_response_bytes);
        if let Some(ca) = &config.cacert {
            builder = builder.ca_file(ca.clone());
        }
        if let Some((cert, key)) = &config.client_identity {
            builder = builder.client_identity_files(cert.clone(), key.clone());
        }
        let client = builder.build().map_err(|e| upstream_err(e.to_string()))?;
        if config.max_concurrent_calls == 0 {
            return Err(ProxyError::Limits(
                "--max-concurrent-calls must be at least 1".to_owned(),
            ));
        }
        if config.max_total_body_bytes < config.max_body_bytes.saturating_mul(4) {
            return Err(ProxyError::Limits(
                "--max-total-body-bytes must be at least 4 x --max-body-bytes (a request and \
                 its answer, each counted twice)"
                    .to_owned(),
            ));
        }
        let budget_units = usize::try_from(config.max_total_body_bytes / UNIT)
            .unwrap_or(usize::MAX)
            .min(tokio::sync::Semaphore::MAX_PERMITS);
        if u64::from(units(config.max_body_bytes)) * 2 > budget_units as u64 {
            return Err(ProxyError::Limits(
                "--max-total-body-bytes is too large for the budget's counter".to_owned(),
            ));
        }
        #[cfg(feature = "tls")]
        let acceptor = match &config.tls {
            Some((cert, key)) => Some(tls::acceptor(cert, key)?),
            None => None,
        };
        #[cfg(not(feature = "tls"))]
        if config.tls.is_some() {
            return Err(ProxyError::Tls(
                "this build has no TLS (feature `tls`)".to_owned(),
            ));
        }
        let (record_tx, writer) = match &config.record {
            Some(path) => {
                let file = File::create(path).map_err(|source| ProxyError::Record {
                    path: path.clone(),
                    source,
                })?;
                let (tx, rx) = mpsc::channel::<String>();
                let log2 = Arc::clone(&log);
                let path = path.clone();
                let handle = std::thread::spawn(move || write_records(file, &path, &rx, &log2));
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        // One thread reads every request body (see the module's docs).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ProxyError::Runtime)?;
        let listener = runtime
            .block_on(TcpListener::bind(&config.listen))
            .map_err(|source| ProxyError::Listen {
                addr: config.listen.clone(),
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| ProxyError::Listen {
            addr: config.listen.clone(),
            source,
        })?;
        let metrics = match &config.metrics_listen {
            Some(addr) => {
                let err = |source| ProxyError::MetricsListen {
                    addr: addr.clone(),
                    source,
                };
                let listener = runtime.block_on(TcpListener::bind(addr)).map_err(err)?;
                let bound = listener.local_addr().map_err(err)?;
                Some((listener, bound))
            }
            None => None,
        };
        let checking = Arc::new(Checking {
            config: config.clone(),
            stats: Mutex::new(Stats::default()),
            record: Mutex::new(record_tx),
            log: Arc::clone(&log),
        });
        let (checks_tx, checks_rx) = mpsc::channel::<Done>();
        let checker = {
            let checking = Arc::clone(&checking);
            std::thread::Builder::new()
                .name("magma-proxy-check".to_owned())
                .spawn(move || check_all(&checking, &checks_rx))
                .map_err(ProxyError::Runtime)?
        };
        let shared = Arc::new(Shared {
            config: config.clone(),
            next_id: AtomicU64::new(1),
            budget: Arc::new(tokio::sync::Semaphore::new(budget_units)),
            calls: CallPool::new(client, config.max_concurrent_calls, config.max_queued_calls),
            checks: Mutex::new(Some(checks_tx)),
            log,
        });
        Ok(Proxy {
            runtime,
            listener,
            local_addr,
            metrics,
            shared,
            checking,
            config,
            writer,
            checker: Some(checker),
            #[cfg(feature = "tls")]
            acceptor,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The proxy's base URL (`http://` or `https://` and the bound address).
    pub fn url(&self) -> String {
        let scheme = if self.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.local_addr)
    }

    /// The address of `GET /metrics`, when `metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|(_, addr)| *addr)
    }

    /// Serves until SIGINT, SIGTERM or the configured duration; then lets
    /// the exchanges under way finish and returns the summary.
    pub fn run(self) -> ProxySummary {
        let Proxy {
            runtime,
            listener,
            metrics,
            shared,
            checking,
            config,
            writer,
            checker,
            #[cfg(feature = "tls")]
            acceptor,
            ..
        } = self;
        let started = Instant::now();
        let (stop_tx, stop_rx) = watch::channel(false);
        let active = Arc::new(AtomicUsize::new(0));
        runtime.block_on(async {
            if let Some((listener, _)) = metrics {
                let serving = metrics::serve(listener, Arc::clone(&checking), started, stop_rx.clone());
                tokio::spawn(serving);
            }
            let stop = stop_signal(config.duration);
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    accepted = listener.accept() => {
                        let (tcp, _) = match accepted {
                            Ok(pair) => pair,
                            Err(e) => {
                                (shared.log)(&format!("proxy fault: accept: {e}"));
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            }
                        };
                        let _ = tcp.set_nodelay(true);
                        let shared = Arc::clone(&shared);
                        let stop_rx = stop_rx.clone();
                        let active = Arc::clone(&active);
                        active.fetch_add(1, Ordering::SeqCst);
                        #[cfg(feature = "tls")]
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            #[cfg(feature = "tls")]
                            if let Some(acceptor) = acceptor {
                                match acceptor.accept(tcp).await {
                                    Ok(tls) => serve(tls, shared, stop_rx).await,
                                    Err(e) => (shared.log)(&format!("TLS handshake with a client failed: {e}")),
                                }
                                active.fetch_sub(1, Ordering::SeqCst);
                                return;
                            }
                            serve(tcp, shared, stop_rx).await;
                            active.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                }
            }
            drop(listener);
            let _ = stop_tx.send(true);
            // Exchanges under way finish (up to the upstream timeout).
            let limit = Instant::now() + config.timeout + Duration::from_secs(1);
            while active.load(Ordering::SeqCst) > 0 && Instant::now() < limit {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        runtime.shutdown_timeout(Duration::from_secs(1));
        // The call threads end once their calls have (each within its
        // deadline); the check thread once it has checked what is queued.
        shared.calls.close();
        if let Ok(mut tx) = shared.checks.lock() {
            tx.take();
        }
        if let Some(c) = checker {
            let _ = c.join();
        }
        // Close the recording: the writer ends when its channel does.
        if let Ok(mut tx) = checking.record.lock() {
            tx.take();
        }
        if let Some(w) = writer {
            let _ = w.join();
        }
        let stats = std::mem::take(
            &mut *checking
                .stats
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut summary = stats.finish(started.elapsed().as_secs_f64());
        summary.upstream.clone_from(&config.upstream);
        summary
    }
}

/// Resolves at SIGINT, SIGTERM or after `duration`.
async fn stop_signal(duration: Option<Duration>) {
    let after = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = after => {}
        () = term => {}
        r = tokio::signal::ctrl_c() => {
            if r.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

async fn serve<I>(io: I, shared: Arc<Shared>, stop: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        async move { Ok::<_, Infallible>(handle(req, shared).await) }
    });
    serve_until_stopped(io, svc, stop).await;
}

/// Serves one HTTP/1.1 connection with `svc` (keep-alive) until it ends,
/// or until `stop` turns true: then it finishes the exchange under way and
/// closes.
async fn serve_until_stopped<I, S, B>(io: I, svc: S, mut stop: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let stopped = tokio::select! {
        _ = conn.as_mut() => false,
        r = stop.wait_for(|s| *s) => r.is_ok(),
    };
    if stopped {
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    }
}

/// Headers of one hop only, never forwarded (RFC 9110 section 7.6.1), and
/// those the client or hyper set again (`host`, `content-length`).
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

fn forwardable(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !hop_by_hop(name) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// An answer body that holds its share of the memory budget until hyper
/// has written it (and the checks are done with it).
struct HeldBody {
    inner: Full<Bytes>,
    _held: Option<Arc<OwnedSemaphorePermit>>,
}

impl HeldBody {
    fn new(bytes: Bytes, held: Option<Arc<OwnedSemaphorePermit>>) -> HeldBody {
        HeldBody {
            inner: Full::new(bytes),
            _held: held,
        }
    }
}

impl hyper::body::Body for HeldBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn detail(status: StatusCode, text: &str) -> Response<HeldBody> {
    let body = serde_json::json!({ "detail": text }).to_string();
    let mut resp = Response::new(HeldBody::new(Bytes::from(body), None));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

enum ReadError {
    TooLarge,
    Body(hyper::Error),
}

/// Reads a request body into one buffer, sized by `Content-Length` when it
/// is given (no second copy of a large body), at most `limit` bytes.
///
/// A body of unknown length (chunked) gets a buffer of the whole limit at
/// once (of which only what is written becomes resident), not one that
/// doubles as it fills: the buffers it would outgrow and free on the way
/// are holes the allocator keeps. The budget has reserved the limit for
/// such a body already; a body much shorter than its buffer is copied
/// into one of its size.
async fn read_body(
    mut body: Incoming,
    declared: Option<u64>,
    limit: usize,
) -> Result<Bytes, ReadError> {
    let capacity = declared.map_or(limit.min(MAX_UNKNOWN_LENGTH_BUFFER), |n| {
        usize::try_from(n).unwrap_or(limit).min(limit)
    });
    let mut buf = bytes::BytesMut::with_capacity(capacity);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ReadError::Body)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(ReadError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    if buf.len() < buf.capacity() / 2 {
        return Ok(Bytes::copy_from_slice(&buf));
    }
    Ok(buf.freeze())
}

/// Answers the proxy gives itself before anything is forwarded (`413`,
/// `400`, `503`): logged, counted under the check `proxy`, recorded.
#[expect(
    clippy::too_many_arguments,
    reason = "the exchange's own fields, passed once from three places"
)]
fn refuse(
    shared: &Arc<Shared>,
    id: u64,
    method: &http::Method,
    path: String,
    started: (Instant, u64),
    status: StatusCode,
    code: &str,
    text: &str,
) -> Response<HeldBody> {
    (shared.log)(&format!("[exchange {id}] {method} {path}: {text}"));
    let finding = Checked {
        check: "proxy",
        finding: crate::Finding::error("http", code, "", text.to_owned()),
    };
    finish(
        shared,
        Done {
            id,
            method: method.to_string(),
            path,
            request: Bytes::new(),
            status: status.as_u16(),
            content_type: None,
            answer: Bytes::new(),
            started_ms: started.1,
            latency: started.0.elapsed(),
            forwarded: false,
            checked: true,
            extra: vec![finding],
            _held: None,
        },
    );
    detail(status, text)
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Response<HeldBody> {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let started_ms = now_ms();
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let max_body = shared.config.max_body_bytes;
    let limit = usize::try_from(max_body).unwrap_or(usize::MAX);
    let started_at = (started, started_ms);
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let too_large = format!("request body over the proxy's limit of {limit} bytes");
    if declared.is_some_and(|n| n > max_body) {
        return refuse(
            &shared,
            id,
            &method,
            path,
            started_at,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_body",
            &too_large,
        );
    }
    // The request's share, and as much again for its answer (unknown until
    // it is read; settled then).
    let want = units(declared.unwrap_or(max_body)).saturating_mul(2);
    let budget = Arc::clone(&shared.budget);
    let Ok(Ok(mut held)) = tokio::time::timeout(BUDGET_WAIT, budget.acquire_many_owned(want)).await
    else {
        return refuse(
            &shared,
            id,
            &method,
            path,
            started_at,
            StatusCode::SERVICE_UNAVAILABLE,
            "memory_budget",
            "the proxy's memory budget (--max-total-body-bytes) is in use; retry",
        );
    };
    let body = match read_body(body, declared, limit).await {
        Ok(b) => b,
        Err(ReadError::TooLarge) => {
            return refuse(
                &shared,
                id,
                &method,
                path,
                started_at,
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_body",
                &too_large,
            );
        }
        Err(ReadError::Body(e)) => {
            return refuse(
                &shared,
                id,
                &method,
                path,
                started_at,
                StatusCode::BAD_REQUEST,
                "request_body",
                &format!("cannot read the request body: {e}"),
            );
        }
    };
    // A body without Content-Length reserved for the whole limit: give back the rest.
    let request_units = units(body.len() as u64) as usize;
    let need = request_units * 2;
    if held.num_permits() > need {
        drop(held.split(held.num_permits() - need));
    }
    let mut raw = RawRequest::new(method.clone(), path.clone()).body(body.clone());
    *raw.headers_mut() = forwardable(&parts.headers);
    // magma-client blocks on its own runtime: the call waits on a thread of
    // the pool, and `--timeout` counts from here, its wait included.
    let timeout = shared.config.timeout;
    let deadline = Instant::now() + timeout;
    let (reply, rx) = tokio::sync::oneshot::channel();
    let call = Call {
        request: raw,
        deadline,
        reply,
    };
    match shared.calls.submit(call) {
        Ok(()) => {}
        Err(refused) => {
            let text = match refused {
                Refused::Full => format!(
                    "the proxy's {} upstream calls (--max-concurrent-calls) are all under way \
                     and {} more wait (--max-queued-calls); retry",
                    shared.config.max_concurrent_calls, shared.config.max_queued_calls
                ),
                Refused::Closed => "the proxy is stopping".to_owned(),
                Refused::NoThread => {
                    "the proxy cannot start a thread for the upstream call; retry".to_owned()
                }
            };
            return refuse(
                &shared,
                id,
                &method,
                path,
                started_at,
                StatusCode::SERVICE_UNAVAILABLE,
                "call_queue",
                &text,
            );
        }
    }
    let mut checked = true;
    let mut kept = None;
    let result = match tokio::time::timeout_at(deadline.into(), rx).await {
        Ok(Ok(called)) => Some(called),
        Ok(Err(_)) => None,
        Err(_) => Some(Called::Expired),
    };
    let (response, status, content_type, answer, extra) = match result {
        Some(Called::Answer(answer)) => {
            let status = answer.status();
            let content_type = answer
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let headers = forwardable(answer.headers());
            let bytes = answer.into_body();
            // The answer is in memory already: it is forwarded whatever the
            // budget says, and checked only if its share fits.
            let need = request_units + units(bytes.len() as u64) as usize;
            let have = held.num_permits();
            if have > need {
                drop(held.split(have - need));
            } else if have < need {
                let more = u32::try_from(need - have).unwrap_or(u32::MAX);
                match Arc::clone(&shared.budget).try_acquire_many_owned(more) {
                    Ok(more) => held.merge(more),
                    Err(_) => checked = false,
                }
            }
            let held = Arc::new(held);
            kept = Some(Arc::clone(&held));
            let mut resp = Response::new(HeldBody::new(bytes.clone(), Some(held)));
            *resp.status_mut() = status;
            *resp.headers_mut() = headers;
            (resp, status, content_type, bytes, Vec::new())
        }
        Some(failed @ (Called::Failed(_) | Called::Expired)) => {
            let (status, code, why) = match &failed {
                Called::Failed(e) => match e.kind() {
                    ErrorKind::Timeout(_) => (
                        StatusCode::GATEWAY_TIMEOUT,
                        "upstream_timeout",
                        timed_out(timeout),
                    ),
                    ErrorKind::BodyTooLarge { .. } => {
                        (StatusCode::BAD_GATEWAY, "body_too_large", e.to_string())
                    }
                    _ => (
                        StatusCode::BAD_GATEWAY,
                        "upstream_unreachable",
                        e.to_string(),
                    ),
                },
                _ => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    timed_out(timeout),
                ),
            };
            let text = format!("magma-validate proxy: the agent could not be reached: {why}");
            let finding = Checked {
                check: "upstream",
                finding: crate::Finding::error("http", code, "", why)
                    .with_impact("the consumer gets no answer from the agent for this exchange")
                    .with_fix(if code == "upstream_timeout" {
                        "make the agent answer sooner, or raise --timeout (and \
                         --max-concurrent-calls when calls wait for a thread)"
                    } else {
                        "start the agent, or fix --upstream and its TLS flags"
                    }),
            };
            (
                detail(status, &text),
                status,
                None,
                Bytes::new(),
                vec![finding],
            )
        }
        None => {
            let text = "magma-validate proxy: internal fault before the agent answered";
            (
                detail(StatusCode::BAD_GATEWAY, text),
                StatusCode::BAD_GATEWAY,
                None,
                Bytes::new(),
                Vec::new(),
            )
        }
    };
    let forwarded = extra.is_empty();
    finish(
        &shared,
        Done {
            id,
            method: method.to_string(),
            path,
            request: body,
            status: status.as_u16(),
            content_type,
            answer,
            started_ms,
            latency: started.elapsed(),
            forwarded,
            checked,
            extra,
            _held: kept,
        },
    );
    response
}

fn timed_out(timeout: Duration) -> String {
    format!(
        "no answer within --timeout ({:.1} s, the wait for a call thread included)",
        timeout.as_secs_f64()
    )
}

/// An exchange whose answer is on its way, to check and record.
struct Done {
    id: u64,
    method: String,
    path: String,
    request: Bytes,
    status: u16,
    content_type: Option<String>,
    answer: Bytes,
    started_ms: u64,
    latency: Duration,
    forwarded: bool,
    /// `false` when the answer's share of the budget did not fit.
    checked: bool,
    extra: Vec<Checked>,
    /// The budget share, released once the checks are done (and hyper has
    /// written the answer).
    _held: Option<Arc<OwnedSemaphorePermit>>,
}

/// Hands an exchange to the check thread, off the connection's task.
fn finish(shared: &Shared, done: Done) {
    let sent = match shared.checks.lock() {
        Ok(guard) => guard.as_ref().map(|tx| tx.send(done).is_ok()),
        Err(_) => None,
    };
    if sent != Some(true) {
        (shared.log)("proxy fault: an exchange was not checked (the proxy is stopping)");
    }
}

/// The check thread: checks and records each exchange in turn; a panic
/// there is a proxy fault in the log, never a change to the traffic.
fn check_all(checking: &Checking, rx: &mpsc::Receiver<Done>) {
    for done in rx {
        let id = done.id;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_and_record(checking, done)
        }));
        if outcome.is_err() {
            (checking.log)(&format!(
                "proxy fault: checking exchange {id} panicked; the traffic went on"
            ));
        }
    }
}

fn check_and_record(shared: &Checking, done: Done) {
    let route = Route::of(&done.method, &done.path);
    if !done.checked {
        let text = format!(
            "exchange {} forwarded unchecked: its answer ({} bytes) did not fit in the memory \
             budget (--max-total-body-bytes)",
            done.id,
            done.answer.len()
        );
        (shared.log)(&format!("proxy fault: {text}"));
        if let Ok(mut stats) = shared.stats.lock() {
            stats.summary.proxy_faults.push(text);
        }
    }
    let mut inspection = if done.forwarded && done.checked {
        inspect(
            route,
            &done.request,
            done.status,
            done.content_type.as_deref(),
            &done.answer,
        )
    } else {
        inspect::Inspection {
            kind: "none",
            checks: Vec::new(),
            findings: Vec::new(),
        }
    };
    for c in &done.extra {
        inspection.checks.push(c.check);
    }
    inspection.findings.extend(done.extra.iter().cloned());
    for c in &inspection.findings {
        let f = &c.finding;
        let at = if f.location.is_empty() {
            String::new()
        } else {
            format!(" at {}", f.location)
        };
        (shared.log)(&format!(
            "[exchange {}] {} {} -> {}: {} {} {}{at}: {}",
            done.id,
            done.method,
            done.path,
            done.status,
            c.check,
            f.severity.as_str(),
            f.code,
            f.message
        ));
    }
    let latency_ms = done.latency.as_secs_f64() * 1000.0;
    if let Ok(mut stats) = shared.stats.lock() {
        stats.add(
            done.id,
            done.status,
            done.forwarded.then_some(latency_ms),
            &inspection.checks,
            &inspection.findings,
        );
    }
    let tx = match shared.record.lock() {
        Ok(guard) => guard.clone(),
        Err(_) => None,
    };
    if let Some(tx) = tx {
        let line = record_line(&shared.config, &done, &inspection, latency_ms);
        let _ = tx.send(line);
    }
}

fn record_line(
    config: &ProxyConfig,
    done: &Done,
    inspection: &inspect::Inspection,
    latency_ms: f64,
) -> String {
    let limit = config.record_body_limit;
    let mut redacted = Vec::new();
    let mut digests = Vec::new();
    let mut text = |field: &str, bytes: &[u8]| {
        record::body_text(
            field,
            bytes,
            limit,
            &config.redact,
            &mut redacted,
            &mut digests,
        )
    };
    let kind = inspection.kind;
    let (doc, request, request_body, answer_body) = match kind {
        "exchange" | "coaching_exchange" => (
            text("doc", &done.answer),
            text("request", &done.request),
            None,
            None,
        ),
        "request" | "coaching_request" | "coaching_session" => (
            text("doc", &done.request),
            None,
            None,
            Some(Body {
                text: text("answer_body", &done.answer),
            }),
        ),
        "health" | "info" => (text("doc", &done.answer), None, None, None),
        _ => (
            None,
            None,
            (!done.request.is_empty()).then(|| Body {
                text: text("request_body", &done.request),
            }),
            Some(Body {
                text: text("answer_body", &done.answer),
            }),
        ),
    };
    let line = RecordedExchange {
        id: done.id,
        kind: kind.to_owned(),
        doc,
        request,
        method: done.method.clone(),
        path: done.path.clone(),
        request_body,
        answer_body,
        status: done.status,
        started_ms: done.started_ms,
        latency_ms,
        redacted,
        digests,
        findings: inspection
            .findings
            .iter()
            .map(|c| RecordedFinding::new(c.check, &c.finding))
            .collect(),
    };
    serde_json::to_string(&line).unwrap_or_default()
}

/// The recording's writer thread: a line per exchange, flushed as written.
/// A write error (a full disk) is logged once per error kind; the traffic
/// and the checks go on.
fn write_records(file: File, path: &std::path::Path, rx: &mpsc::Receiver<String>, log: &LogFn) {
    let mut out = BufWriter::new(file);
    let mut failing = false;
    for line in rx {
        let result = out
            .write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        match result {
            Ok(()) => failing = false,
            Err(e) if !failing => {
                failing = true;
                log(&format!(
                    "proxy fault: cannot write the recording {}: {e}; exchanges go on unrecorded",
                    path.display()
                ));
            }
            Err(_) => {}
        }
    }
}

#[cfg(feature = "tls")]
mod tls {
    use std::path::Path;
    use std::sync::Arc;

    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    use super::ProxyError;

    pub(super) fn acceptor(
        cert: &Path,
        key: &Path,
    ) -> Result<tokio_rustls::TlsAcceptor, ProxyError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .and_then(Iterator::collect)
            .map_err(|e| ProxyError::Tls(format!("{}: {e}", cert.display())))?;
        if certs.is_empty() {
            return Err(ProxyError::Tls(format!(
                "{}: no certificate in the file",
                cert.display()
            )));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| ProxyError::Tls(format!("{}: {e}", key.display())))?;
        // The client's provider (ring's parts, named explicitly): the
        // deprecated `ring::default_provider` is not used anywhere.
        let provider = magma_client::crypto_provider();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ProxyError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| ProxyError::Tls(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}
