//! Routing and the three endpoints: every answer is JSON, every failure has
//! its status, and nothing the agent does can produce a malformed `200`.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ALLOW, CONNECTION, CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Body;
use magma_protocol::{AgentHealth, AgentRequest, AgentResponse, json};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::agent::{Agent, Readiness};
use crate::coaching::store::Store;
use crate::config::Config;
use crate::context::RequestContext;
use crate::forwarded::{TrustedProxy, client_ip};
use crate::limits;
use crate::unwind::{CatchUnwind, panic_message};

/// The error type of request bodies the handler accepts.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;

/// What every request handler shares.
pub(crate) struct Shared<A> {
    pub(crate) agent: A,
    pub(crate) prefix: Option<String>,
    pub(crate) max_body_bytes: u64,
    pub(crate) body_timeout: Duration,
    pub(crate) max_candidates: u64,
    pub(crate) max_response_bytes: u64,
    pub(crate) inference_timeout: Option<Duration>,
    pub(crate) inferences: Semaphore,
    /// The open coaching sessions.
    pub(crate) sessions: Store,
    /// The request-body bytes all connections may hold at once.
    pub(crate) body_budget: limits::BodyBudget,
    trusted_proxies: Vec<TrustedProxy>,
    /// The OpenAPI document served on `GET {prefix}/openapi.json`.
    openapi: Bytes,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<crate::Metrics>,
    /// The rate limit of the error-candidate warnings.
    error_candidates: crate::candidate_errors::ErrorCandidateLog,
}

/// The OpenAPI document of the contract, as `cargo xtask codegen` writes it.
const OPENAPI: &str = include_str!("../openapi.json");

/// [`OPENAPI`] with a `servers` entry for `prefix`, as FastAPI adds for its
/// `root_path`: clients generated from it call `{prefix}/v1/responses`.
fn openapi_document(prefix: Option<&str>) -> Bytes {
    let Some(prefix) = prefix else {
        return Bytes::from_static(OPENAPI.as_bytes());
    };
    let servers = json!([{ "url": prefix }]).to_json_string();
    // The document is an object: the member goes first.
    let body = OPENAPI.trim_start().strip_prefix('{').unwrap_or(OPENAPI);
    Bytes::from(format!("{{\n  \"servers\": {servers},{body}"))
}

impl<A> Shared<A> {
    /// Counts an inference that was not answered `200`.
    pub(crate) fn failed(&self, failure: Failure) {
        #[cfg(feature = "metrics")]
        if let Some(m) = &self.metrics {
            m.failure(failure);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = failure;
    }

    /// `config` must have been validated.
    pub(crate) fn new(agent: A, config: &Config) -> Shared<A> {
        let prefix = config.normalized_prefix();
        #[cfg(feature = "metrics")]
        if let Some(m) = &config.metrics {
            m.start_upkeep();
        }
        Shared {
            #[cfg(feature = "metrics")]
            metrics: config.metrics.clone(),
            agent,
            openapi: openapi_document(prefix.as_deref()),
            prefix,
            max_body_bytes: config.max_body_bytes,
            body_timeout: config.body_timeout,
            max_candidates: config.max_candidates,
            max_response_bytes: config.max_response_bytes,
            inference_timeout: config.inference_timeout,
            inferences: Semaphore::new(config.max_concurrent_inferences),
            sessions: Store::new(config),
            body_budget: limits::BodyBudget::new(config.max_total_body_bytes),
            trusted_proxies: config.trusted_proxies.clone(),
            error_candidates: crate::candidate_errors::ErrorCandidateLog::default(),
        }
    }
}

/// Which endpoint answered (the `route` label of the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(feature = "metrics"),
    allow(dead_code, reason = "read by the metrics")
)]
pub(crate) enum Route {
    Health,
    Info,
    Responses,
    OpenApi,
    Metrics,
    /// `/v1/coaching/sessions/{run_id}`.
    CoachingSession,
    /// `/v1/coaching`.
    Coaching,
    /// No route: a `404`.
    Unmatched,
}

impl Route {
    /// How many there are.
    #[cfg(feature = "metrics")]
    pub(crate) const COUNT: usize = 8;
}

/// Why an inference was not answered `200`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(feature = "metrics"),
    allow(dead_code, reason = "read by the metrics")
)]
pub(crate) enum Failure {
    Timeout,
    Panic,
    Miscount,
    Rejection,
    /// The answer passed the response-size limit while it was written.
    Oversized,
}

impl Failure {
    /// How many there are.
    #[cfg(feature = "metrics")]
    pub(crate) const COUNT: usize = 5;
}

/// An answer plus what the access log needs.
pub(crate) struct Reply {
    response: Response<Full<Bytes>>,
    #[cfg_attr(
        not(feature = "metrics"),
        allow(dead_code, reason = "read by the metrics")
    )]
    route: Route,
    candidates: Option<usize>,
    /// Close the connection after answering (HTTP/1 only): the request body
    /// was not read to its end.
    close: bool,
}

impl Reply {
    pub(crate) fn new(response: Response<Full<Bytes>>) -> Reply {
        Reply {
            response,
            route: Route::Unmatched,
            candidates: None,
            close: false,
        }
    }

    fn at(mut self, route: Route) -> Reply {
        self.route = route;
        self
    }

    pub(crate) fn closing(mut self) -> Reply {
        self.close = true;
        self
    }
}

/// The coaching sessions' path, up to the run id.
const SESSIONS: &str = "/v1/coaching/sessions/";

pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// Longest request id written to logs and headers; longer ones are cut.
const MAX_LOGGED_ID: usize = 128;

pub(crate) fn json_response(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    bytes_response(status, Bytes::from(body))
}

pub(crate) fn bytes_response(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, JSON);
    r
}

/// `{"detail": "<message>"}` with `status`.
pub(crate) fn detail(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json_response(status, json!({ "detail": message }).to_json_string())
}

/// Handles one request; never fails and never panics (agent panics become
/// `500`). Runs in the request's span and writes the access log line.
/// `peer` is the connection's remote address, when known.
pub(crate) async fn handle<A, B>(
    shared: &Shared<A>,
    req: Request<B>,
    peer: Option<SocketAddr>,
) -> Result<Response<Full<Bytes>>, Infallible>
where
    A: Agent,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let header_id = header_request_id(req.headers());
    let client = peer.map(|p| match shared.trusted_proxies.is_empty() {
        true => p.ip(),
        false => client_ip(p.ip(), req.headers(), &shared.trusted_proxies),
    });
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let span = tracing::info_span!(
        "request",
        method = %method,
        path = %path,
        request_id = tracing::field::Empty,
        x_request_id = header_id.as_deref(),
    );
    let mut access = Access {
        start: Instant::now(),
        method,
        path,
        version: req.version(),
        peer,
        ids: Ids {
            body: OnceLock::new(),
            header: header_id,
            client,
            span,
        },
        answered: false,
    };
    let routed = route(shared, req, &access.ids).instrument(access.ids.span.clone());
    let reply = match CatchUnwind::new(routed).await {
        Ok(reply) => reply,
        Err(payload) => {
            tracing::error!(
                method = %access.method,
                path = %access.path,
                panic = panic_message(&*payload),
                "agent code panicked outside an inference; answered 500"
            );
            Reply::new(internal_error())
        }
    };
    #[cfg(feature = "metrics")]
    let route = reply.route;
    let response = access.finish(reply);
    #[cfg(feature = "metrics")]
    if let Some(m) = &shared.metrics {
        m.request(route, response.status().as_u16(), access.start.elapsed());
    }
    Ok(response)
}

/// A request's ids and span, as the handler fills them in.
pub(crate) struct Ids {
    /// The body's `request_id`, once parsed.
    pub(crate) body: OnceLock<String>,
    /// An accepted incoming `X-Request-Id`.
    pub(crate) header: Option<String>,
    /// The client's address, as far as the server knows it.
    pub(crate) client: Option<IpAddr>,
    pub(crate) span: tracing::Span,
}

impl Ids {
    pub(crate) fn set_body(&self, id: &str) {
        let _ = self.body.set(id.to_owned());
        self.span.record("request_id", id);
    }
}

/// An incoming `X-Request-Id` the server honours: 1 to [`MAX_LOGGED_ID`]
/// visible ASCII characters (what proxies generate: UUIDs, hex strings).
/// Anything else is ignored, as if absent.
fn header_request_id(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(&REQUEST_ID)?.as_bytes();
    let ok = !value.is_empty()
        && value.len() <= MAX_LOGGED_ID
        && value.iter().all(|b| (0x21..=0x7e).contains(b));
    // Visible ASCII is UTF-8.
    ok.then(|| String::from_utf8_lossy(value).into_owned())
}

/// What the access log line says about a request. Dropped without
/// [`finish`](Access::finish) (the client went away and hyper dropped the
/// handler), it logs that instead.
struct Access {
    start: Instant,
    method: Method,
    path: String,
    version: Version,
    peer: Option<SocketAddr>,
    ids: Ids,
    answered: bool,
}

impl Access {
    /// The client's address when a trusted proxy forwarded one other than
    /// its own.
    fn forwarded_client(&self) -> Option<IpAddr> {
        self.ids
            .client
            .filter(|c| self.peer.is_some_and(|p| p.ip() != *c))
    }

    fn finish(&mut self, reply: Reply) -> Response<Full<Bytes>> {
        self.answered = true;
        let Reply {
            mut response,
            candidates,
            close,
            ..
        } = reply;
        let id = self.ids.body.get_or_init(generated_id);
        // The caller's own id comes back when it sent one.
        let echoed = self.ids.header.as_deref().unwrap_or(id);
        response
            .headers_mut()
            .insert(REQUEST_ID, request_id_header(echoed));
        if close && self.version <= Version::HTTP_11 {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        tracing::info!(
            target: "magma_server::access",
            request_id = ?id,
            x_request_id = self.ids.header.as_deref(),
            method = %self.method,
            path = %self.path,
            version = ?self.version,
            status = response.status().as_u16(),
            latency_ms = %format_args!("{:.3}", self.start.elapsed().as_secs_f64() * 1000.0),
            candidates,
            peer = self.peer.map(tracing::field::display),
            client = self.forwarded_client().map(tracing::field::display),
            "request"
        );
        response
    }
}

/// At most this many abandoned requests are logged at `info` per second;
/// the others at `debug`, counted in the next `info` line's `suppressed`.
/// A client can cancel thousands of HTTP/2 streams a second: one line each
/// would let it fill the log.
const ABANDON_LOGS_PER_SEC: u32 = 10;

/// The rate limit of the abandon lines: the current one-second window, the
/// lines logged in it, and the lines sent to `debug` since the last `info`.
#[derive(Debug)]
struct AbandonWindow {
    start: Instant,
    logged: u32,
    suppressed: u64,
}

impl AbandonWindow {
    /// `Some(suppressed)` when a line at `now` goes to `info` (with the
    /// count of lines kept back since the previous one), `None` when it
    /// goes to `debug`.
    fn admit(&mut self, now: Instant) -> Option<u64> {
        if now.saturating_duration_since(self.start) >= Duration::from_secs(1) {
            self.start = now;
            self.logged = 0;
        }
        if self.logged < ABANDON_LOGS_PER_SEC {
            self.logged += 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

fn abandon_window() -> std::sync::MutexGuard<'static, AbandonWindow> {
    static WINDOW: OnceLock<std::sync::Mutex<AbandonWindow>> = OnceLock::new();
    WINDOW
        .get_or_init(|| {
            std::sync::Mutex::new(AbandonWindow {
                start: Instant::now(),
                logged: 0,
                suppressed: 0,
            })
        })
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Access {
    fn drop(&mut self) {
        if !self.answered {
            let id = self.ids.body.get_or_init(generated_id);
            let admitted = abandon_window().admit(Instant::now());
            let Some(suppressed) = admitted else {
                tracing::debug!(
                    target: "magma_server::access",
                    request_id = ?id,
                    method = %self.method,
                    path = %self.path,
                    "request abandoned (over the info rate of abandon lines)"
                );
                return;
            };
            tracing::info!(
                target: "magma_server::access",
                request_id = ?id,
                x_request_id = self.ids.header.as_deref(),
                method = %self.method,
                path = %self.path,
                version = ?self.version,
                latency_ms = %format_args!("{:.3}", self.start.elapsed().as_secs_f64() * 1000.0),
                peer = self.peer.map(tracing::field::display),
                client = self.forwarded_client().map(tracing::field::display),
                suppressed,
                "request abandoned: the client closed the connection before the answer"
            );
        }
    }
}

pub(crate) fn internal_error() -> Response<Full<Bytes>> {
    detail(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal Server Error: the agent failed unexpectedly; see the server log",
    )
}

async fn route<A, B>(shared: &Shared<A>, req: Request<B>, ids: &Ids) -> Reply
where
    A: Agent,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if req.version() == Version::HTTP_11 && !one_host(req.headers()) {
        return Reply::new(detail(
            StatusCode::BAD_REQUEST,
            "Bad Request: an HTTP/1.1 request must carry exactly one Host header",
        ))
        .closing();
    }
    let full = req.uri().path();
    let path = match &shared.prefix {
        None => Some(full),
        Some(prefix) => full
            .strip_prefix(prefix.as_str())
            .filter(|rest| rest.starts_with('/')),
    };
    let (route, allow) = match path {
        Some(p)
            if p.strip_prefix(SESSIONS)
                .is_some_and(|id| !id.is_empty() && !id.contains('/')) =>
        {
            (Route::CoachingSession, "PUT, DELETE")
        }
        Some("/v1/coaching") => (Route::Coaching, "POST"),
        Some("/health") => (Route::Health, "GET, HEAD"),
        Some("/v1/info") => (Route::Info, "GET, HEAD"),
        Some("/v1/responses") => (Route::Responses, "POST"),
        Some("/openapi.json") => (Route::OpenApi, "GET, HEAD"),
        #[cfg(feature = "metrics")]
        Some("/metrics") if shared.metrics.is_some() => (Route::Metrics, "GET, HEAD"),
        _ => return Reply::new(detail(StatusCode::NOT_FOUND, "Not Found")),
    };
    // `HEAD` is answered as `GET` on the `GET` routes; hyper sends the
    // head (with the `Content-Length` of the body) and drops the body.
    let method = match req.method() {
        &Method::HEAD => &Method::GET,
        other => other,
    };
    let reply = match (route, method) {
        (Route::Health, &Method::GET) => Reply::new(health(&shared.agent)),
        (Route::Info, &Method::GET) => Reply::new(json_response(
            StatusCode::OK,
            crate::coaching_routes::advertised(&shared.agent).to_json_string(),
        )),
        (Route::CoachingSession, &Method::PUT | &Method::DELETE) => {
            // The prefix matched above: the segment follows it.
            let segment = path.and_then(|p| p.strip_prefix(SESSIONS)).unwrap_or("");
            let segment = segment.to_owned();
            // The coaching routes and the `422` path are boxed: their
            // futures are larger than the common path's, and every
            // request's future (boxed by the connection, moved on each
            // await) would otherwise be as large as the largest branch.
            Box::pin(crate::coaching_routes::session(shared, req, &segment)).await
        }
        (Route::Coaching, &Method::POST) => {
            Box::pin(crate::coaching_routes::coaching(shared, req, ids)).await
        }
        (Route::Responses, &Method::POST) => responses(shared, req, ids).await,
        (Route::OpenApi, &Method::GET) => {
            let mut r = Response::new(Full::new(shared.openapi.clone()));
            r.headers_mut().insert(CONTENT_TYPE, JSON);
            Reply::new(r)
        }
        #[cfg(feature = "metrics")]
        (Route::Metrics, &Method::GET) => Reply::new(metrics_response(shared)),
        _ => {
            let mut r = detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static(allow));
            Reply::new(r)
        }
    };
    reply.at(route)
}

/// RFC 9112, section 3.2: an HTTP/1.1 request has exactly one `Host`.
fn one_host(headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(HOST).iter();
    hosts.next().is_some() && hosts.next().is_none()
}

/// The Prometheus text of the server's registry.
#[cfg(feature = "metrics")]
fn metrics_response<A>(shared: &Shared<A>) -> Response<Full<Bytes>> {
    let text = shared
        .metrics
        .as_ref()
        .map(|m| m.render())
        .unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(text)));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

fn health<A: Agent>(agent: &A) -> Response<Full<Bytes>> {
    match agent.readiness() {
        Readiness::Ready => json_response(StatusCode::OK, AgentHealth.to_json_string()),
        Readiness::NotReady(reason) => detail(StatusCode::SERVICE_UNAVAILABLE, &reason),
    }
}

/// `application/json` or `application/<anything>+json`, parameters allowed,
/// as FastAPI decides; a missing or empty header counts as JSON.
pub(crate) fn content_type_is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return true;
    };
    // The usual value, compared before any parsing.
    if value.as_bytes() == b"application/json" {
        return true;
    }
    let Ok(value) = value.to_str() else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    if essence.is_empty() {
        return true;
    }
    // Compared without case and without allocating: this runs per request.
    match essence.split_once('/') {
        Some((kind, sub)) if kind.eq_ignore_ascii_case("application") => {
            let suffix = sub.len().checked_sub(5).and_then(|at| sub.get(at..));
            sub.eq_ignore_ascii_case("json")
                || suffix.is_some_and(|s| s.eq_ignore_ascii_case("+json"))
        }
        _ => false,
    }
}

pub(crate) enum BodyError {
    TooLarge,
    TimedOut,
    Read,
    /// The process-wide body budget stayed full.
    OverBudget,
}

/// `fut` with a time limit, counted from the call. The timer is armed only
/// when the first poll does not finish `fut`: a body that arrived with its
/// head, or an agent that answers at once, costs a clock read instead of a
/// timer entry. `Err(())` when the limit passed.
pub(crate) async fn within<F: Future>(limit: Duration, fut: F) -> Result<F::Output, ()> {
    // `None`: a limit past any representable instant, which never comes.
    let deadline = tokio::time::Instant::now().checked_add(limit);
    let mut fut = std::pin::pin!(fut);
    let first = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
    match (first, deadline) {
        (Poll::Ready(out), _) => Ok(out),
        (Poll::Pending, Some(deadline)) => {
            tokio::time::timeout_at(deadline, fut).await.map_err(|_| ())
        }
        (Poll::Pending, None) => Ok(fut.await),
    }
}

/// The body, at most `limit` bytes, within `timeout`; every byte is taken
/// from the process-wide budget as it arrives and held by the returned
/// share.
pub(crate) async fn read_body<B>(
    body: B,
    limit: u64,
    timeout: Duration,
    budget: &limits::BodyBudget,
) -> Result<(Bytes, limits::BudgetShare), BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut share = budget.share();
    let read = async {
        let mut body = std::pin::pin!(body);
        let hint = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
        let mut out: Vec<u8> = Vec::new();
        let mut first: Option<Bytes> = None;
        loop {
            // The frame's error type need not be `Send`: not kept across
            // the budget's wait.
            let data = match body.frame().await {
                None => break,
                Some(Err(_)) => return Err(BodyError::Read),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
            };
            let held = out.len() + first.as_ref().map_or(0, Bytes::len);
            if held.saturating_add(data.len()) > limit {
                return Err(BodyError::TooLarge);
            }
            if !share.take(data.len()).await {
                return Err(BodyError::OverBudget);
            }
            // The usual body comes in one frame: kept as it is, not copied.
            match first.take() {
                None if out.is_empty() => first = Some(data),
                None => out.extend_from_slice(&data),
                Some(f) => {
                    out.reserve_exact(hint.min(limit).max(f.len() + data.len()) - out.len());
                    out.extend_from_slice(&f);
                    out.extend_from_slice(&data);
                }
            }
        }
        Ok(match first {
            Some(f) => f,
            None => Bytes::from(out),
        })
    };
    match within(timeout, read).await {
        Err(()) => Err(BodyError::TimedOut),
        Ok(Err(e)) => Err(e),
        Ok(Ok(bytes)) => Ok((bytes, share)),
    }
}

pub(crate) fn too_large(limit: u64) -> Reply {
    Reply::new(detail(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("Request body is larger than the server's limit of {limit} bytes"),
    ))
    .closing()
}

/// FastAPI's answer to an empty body: the body is a required field.
pub(crate) fn missing_body() -> Response<Full<Bytes>> {
    let body = json!({"detail": [{
        "type": "missing",
        "loc": ["body"],
        "msg": "Field required",
        "input": null
    }]});
    json_response(StatusCode::UNPROCESSABLE_ENTITY, body.to_json_string())
}

/// The body of a request that must carry JSON: checked for its content
/// type, read within the size and time limits, not empty; or the answer.
pub(crate) async fn json_body<A, B>(
    shared: &Shared<A>,
    req: Request<B>,
) -> Result<(Bytes, limits::BudgetShare), Reply>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if !content_type_is_json(req.headers()) {
        return Err(Reply::new(detail(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: the body must be application/json",
        ))
        .closing());
    }
    let limit = shared.max_body_bytes;
    if req.body().size_hint().lower() > limit {
        return Err(too_large(limit));
    }
    let budget = &shared.body_budget;
    let (bytes, share) = match read_body(req.into_body(), limit, shared.body_timeout, budget).await
    {
        Ok(read) => read,
        Err(BodyError::TooLarge) => return Err(too_large(limit)),
        Err(BodyError::OverBudget) => return Err(over_budget(budget).closing()),
        Err(BodyError::TimedOut) => {
            return Err(Reply::new(detail(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the request body did not arrive in time",
            ))
            .closing());
        }
        Err(BodyError::Read) => {
            return Err(Reply::new(detail(
                StatusCode::BAD_REQUEST,
                "Bad Request: the request body could not be read",
            ))
            .closing());
        }
    };
    if bytes.is_empty() {
        return Err(Reply::new(missing_body()));
    }
    // The parsed request is about as large as its body again (the body is
    // dropped once parsed): its bytes are counted before the parse.
    let mut share = share;
    if !share.take(bytes.len()).await {
        return Err(over_budget(budget));
    }
    Ok((bytes, share))
}

/// The `422` of a body that did not validate; its text (which echoes parts
/// of the request: each `missing` error the whole object it is missing
/// from, so it may be a few times the body) is written, for a long body,
/// on the blocking pool one at a time with the long parses, so that a long
/// one holds neither a runtime worker nor more than one core. It keeps the
/// request's share of the budget until it has been sent, and takes the
/// bytes by which it is longer than that share before it is written
/// (waiting up to 1 s, then `503`: from the error's length hint, exact for
/// the long inputs) and any shortfall of the hint once it is, so that what
/// `422` bodies hold stays within the budget.
pub(crate) async fn invalid(
    e: magma_protocol::Error,
    mut share: limits::BudgetShare,
    budget: &limits::BodyBudget,
) -> Reply {
    if !share
        .take(e.fastapi_len_hint().saturating_sub(share.held()))
        .await
    {
        return over_budget(budget);
    }
    // The share holds the body twice: a long body's `422` may be long.
    let text = if share.held() < 2 * limits::PARSE_OFF_RUNTIME_BYTES {
        Some(e.to_fastapi_string())
    } else {
        limits::off_runtime(move || e.to_fastapi_string()).await
    };
    match text {
        Some(text) => {
            if !share.take(text.len().saturating_sub(share.held())).await {
                return over_budget(budget);
            }
            let body = limits::held_text(text, share);
            Reply::new(bytes_response(StatusCode::UNPROCESSABLE_ENTITY, body))
        }
        None => Reply::new(internal_error()),
    }
}

/// `503` with `Retry-After: 1`: the process-wide budget stayed full.
pub(crate) fn over_budget(budget: &limits::BodyBudget) -> Reply {
    tracing::warn!(
        budget = budget.total(),
        "the memory budget for requests and answers stayed full; answered 503"
    );
    let msg = format!(
        "Service Unavailable: the server holds its limit of {} bytes of requests and answers \
         (all clients together); retry later",
        budget.total()
    );
    let mut reply = Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, &msg));
    reply
        .response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    reply
}

async fn responses<A, B>(shared: &Shared<A>, req: Request<B>, ids: &Ids) -> Reply
where
    A: Agent,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    // The share of the body budget is held until the request is answered.
    let (bytes, share) = match json_body(shared, req).await {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    let request = match limits::parse_body(bytes, AgentRequest::from_slice).await {
        Some(Ok(request)) => request,
        Some(Err(e)) => {
            tracing::debug!(error = %e, "invalid AgentRequest; answered 422");
            // Boxed: see `route`.
            return Box::pin(invalid(e, share, &shared.body_budget)).await;
        }
        None => return Reply::new(internal_error()),
    };
    let _share = share;
    let id = truncate(request.request_id().to_owned());
    ids.set_body(&id);
    let wanted = request.expected_candidates();
    if wanted > u128::from(shared.max_candidates) {
        let msg = format!(
            "The request asks for {wanted} candidates in total (the sum of num_outputs); \
             this server answers at most {} per request",
            shared.max_candidates
        );
        return Reply::new(detail(StatusCode::UNPROCESSABLE_ENTITY, &msg));
    }
    let expected = limits::expected_answer_bytes(&request);
    if expected > u128::from(shared.max_response_bytes) {
        let msg = format!(
            "The answer to this request would be at least {expected} bytes (every candidate \
             carries its input's memory); this server answers at most {} bytes per request",
            shared.max_response_bytes
        );
        return Reply::new(detail(StatusCode::UNPROCESSABLE_ENTITY, &msg));
    }
    if let Readiness::NotReady(reason) = shared.agent.readiness() {
        return Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, &reason));
    }
    // The answer's bytes come from the same budget: what the answer is
    // known to need before the agent runs, the rest once it is written.
    let mut answer_share = shared.body_budget.share();
    if !answer_share
        .take(usize::try_from(expected).unwrap_or(usize::MAX))
        .await
    {
        return over_budget(&shared.body_budget);
    }
    if request.inputs().is_empty() {
        // Nothing to ask the agent: a batch model may not expect empty batches.
        return Reply {
            candidates: Some(0),
            ..Reply::new(json_response(StatusCode::OK, "[]".into()))
        };
    }
    // The context owns the id from here on; the logs below borrow it.
    let context = RequestContext::new(id, ids.header.clone(), ids.client, ids.span.clone())
        .with_max_response_bytes(shared.max_response_bytes);
    let id = context.request_id();
    tracing::debug!(
        request_id = ?id,
        inputs = request.inputs().len(),
        candidates = wanted as u64,
        "inference started"
    );
    let inference = async {
        #[cfg(feature = "metrics")]
        let waiting = shared.metrics.as_ref().map(crate::Metrics::waiting);
        // The semaphore lives as long as `shared` and is never closed.
        let _slot = shared.inferences.acquire().await;
        #[cfg(feature = "metrics")]
        let _running = {
            drop(waiting);
            shared.metrics.as_ref().map(crate::Metrics::running)
        };
        CatchUnwind::new(context.clone().scope(shared.agent.respond_batch(&request))).await
    };
    let outcome = match shared.inference_timeout {
        None => inference.await,
        Some(limit) => match within(limit, inference).await {
            Ok(outcome) => outcome,
            Err(()) => {
                tracing::warn!(request_id = ?id, "inference timed out; answered 504");
                shared.failed(Failure::Timeout);
                let msg = format!(
                    "Gateway Timeout: the inference did not finish within the server's \
                     inference timeout of {} s and was stopped",
                    limit.as_secs_f64()
                );
                return Reply::new(detail(StatusCode::GATEWAY_TIMEOUT, &msg));
            }
        },
    };
    let per_input = match outcome {
        Ok(Ok(per_input)) => per_input,
        Ok(Err(rejection)) => {
            shared.failed(Failure::Rejection);
            return Reply::new(detail(StatusCode::UNPROCESSABLE_ENTITY, rejection.detail()));
        }
        Err(payload) => {
            shared.failed(Failure::Panic);
            tracing::error!(
                request_id = ?id,
                panic = panic_message(&*payload),
                "the agent panicked during an inference; answered 500"
            );
            return Reply::new(internal_error());
        }
    };
    match AgentResponse::assemble(&request, per_input) {
        Ok(response) => {
            let n = response.len();
            let by_code = crate::candidate_errors::by_code(&response);
            #[cfg(feature = "metrics")]
            if let Some(m) = &shared.metrics {
                let errors: u64 = by_code.iter().map(|c| c.count).sum();
                m.candidates(n as u64 - errors, errors);
                for c in &by_code {
                    m.error_candidates(c.code, c.count);
                }
            }
            let now = Instant::now();
            for c in &by_code {
                let Some(kept_back) = shared.error_candidates.admit(c.code, c.count, now) else {
                    continue;
                };
                tracing::warn!(
                    request_id = ?id,
                    code = c.code,
                    count = c.count,
                    of = n,
                    component = c.component,
                    message = c.first_message,
                    kept_back,
                    "error candidates: the agent answered {} of {n} candidates with error code {:?} (at most one such line per code every {} s; kept_back counts those since the last)",
                    c.count,
                    c.code,
                    crate::candidate_errors::WARN_EVERY.as_secs()
                );
            }
            let limit = shared.max_response_bytes;
            match limits::answer_body(response.into_candidates(), limit, answer_share).await {
                Ok(body) => Reply {
                    candidates: Some(n),
                    ..Reply::new(bytes_response(StatusCode::OK, body))
                },
                Err(limits::WriteError::OverBudget) => over_budget(&shared.body_budget),
                Err(limits::WriteError::Oversized { at_least }) => {
                    shared.failed(Failure::Oversized);
                    tracing::error!(
                        request_id = ?id,
                        at_least,
                        limit,
                        "the agent's answer is larger than the response limit; answered 500"
                    );
                    let msg = format!(
                        "Internal Server Error: the agent's answer is larger than the server's \
                         response limit of {limit} bytes (at least {at_least} bytes)"
                    );
                    Reply::new(detail(StatusCode::INTERNAL_SERVER_ERROR, &msg))
                }
            }
        }
        Err(e) => {
            shared.failed(Failure::Miscount);
            tracing::error!(
                request_id = ?id,
                error = %e,
                "the agent returned the wrong number of candidates; answered 500"
            );
            let msg = format!(
                "Internal Server Error: the agent returned the wrong number of candidates ({e})"
            );
            Reply::new(detail(StatusCode::INTERNAL_SERVER_ERROR, &msg))
        }
    }
}

/// `id` as a header value: as it is when it is visible ASCII (the usual
/// case), else with every byte outside `!`..`~` and every `%`
/// percent-escaped (`a\nb` gives `a%0Ab`), so that the header is always
/// there and says which id it was.
fn request_id_header(id: &str) -> HeaderValue {
    let visible = |b: &u8| (0x21..=0x7e).contains(b);
    if let Some(v) = id
        .bytes()
        .all(|b| visible(&b))
        .then(|| HeaderValue::from_str(id).ok())
        .flatten()
    {
        return v;
    }
    let mut escaped = String::with_capacity(id.len() * 3);
    for b in id.bytes() {
        if visible(&b) && b != b'%' {
            escaped.push(char::from(b));
        } else {
            escaped.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::from_str(&escaped).unwrap_or_else(|_| HeaderValue::from_static("-"))
}

/// Cuts an id to [`MAX_LOGGED_ID`] characters.
pub(crate) fn truncate(mut id: String) -> String {
    // No more bytes than the limit: no more characters either.
    if id.len() <= MAX_LOGGED_ID {
        return id;
    }
    if let Some((cut, _)) = id.char_indices().nth(MAX_LOGGED_ID) {
        id.truncate(cut);
    }
    id
}

/// `srv-<process seed>-<counter>`, unique within the process and unlikely to
/// repeat across processes.
fn generated_id() -> String {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| RandomState::new().hash_one(std::process::id()));
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("srv-{:08x}-{n}", seed as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4500 cancellations in one second give 10 `info` lines; the next
    /// second's first line counts the 4490 kept back.
    #[test]
    fn abandon_lines_are_rate_limited_and_counted() {
        let t0 = Instant::now();
        let mut w = AbandonWindow {
            start: t0,
            logged: 0,
            suppressed: 0,
        };
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let admitted: Vec<Option<u64>> = (0..4500u64).map(|i| w.admit(at(i / 5))).collect();
        let info = admitted.iter().filter(|a| a.is_some()).count();
        assert_eq!(info, ABANDON_LOGS_PER_SEC as usize);
        assert!(admitted[..10].iter().all(|a| *a == Some(0)));
        assert_eq!(w.admit(at(1000)), Some(4490));
        assert_eq!(w.admit(at(1001)), Some(0));
    }

    fn headers(ct: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(ct) = ct {
            h.insert(CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
        }
        h
    }

    #[test]
    fn json_content_types_are_recognized_as_fastapi_does() {
        for ok in [
            None,
            Some(""),
            Some("application/json"),
            Some("Application/JSON"),
            Some("application/json; charset=utf-8"),
            Some("application/vnd.magma+json"),
            Some("application/problem+json;charset=UTF-8"),
        ] {
            assert!(content_type_is_json(&headers(ok)), "{ok:?}");
        }
        for bad in [
            "text/plain",
            "text/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "json",
        ] {
            assert!(!content_type_is_json(&headers(Some(bad))), "{bad}");
        }
    }

    #[test]
    fn ids_are_cut_on_a_character_boundary() {
        let long = "é".repeat(300);
        let cut = truncate(long);
        assert_eq!(cut.chars().count(), MAX_LOGGED_ID);
        assert_eq!(truncate("abc".into()), "abc");
    }

    #[test]
    fn request_ids_always_make_a_header() {
        assert_eq!(request_id_header("req-1_a.B"), "req-1_a.B");
        assert_eq!(request_id_header("a\nb\u{0}"), "a%0Ab%00");
        assert_eq!(request_id_header("50% é"), "50%25%20%C3%A9");
        assert_eq!(
            request_id_header("a%b"),
            "a%b",
            "visible ASCII is kept as it is"
        );
    }

    #[test]
    fn generated_ids_differ() {
        assert_ne!(generated_id(), generated_id());
    }
}
