//! The client's error: what failed ([`ErrorKind`]) and on which call.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use magma_protocol::{CandidateMismatch, IncompatibleAgent, Json};

pub(crate) type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Why a call failed. Every variant names one thing a tool author can act
/// on; see `docs/client.md` for what to do with each.
///
/// New variants may be added; match with a wildcard arm.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Nothing accepts connections at the agent's address (the agent is not
    /// started yet, or the port is wrong).
    ConnectionRefused,
    /// The connection could not be made for another reason: the host name
    /// does not resolve, the network is unreachable, the connection was
    /// reset during set-up.
    Connect,
    /// Connecting (name resolution, TCP and, for `https`, the TLS handshake)
    /// took longer than the connect timeout.
    ConnectTimeout(Duration),
    /// The whole call (connecting, sending, waiting for the agent, reading
    /// the body) took longer than the request timeout. The agent may still
    /// be working on it.
    Timeout(Duration),
    /// The TLS handshake failed. The text says why in plain words (an
    /// untrusted or mismatched server certificate, a client certificate the
    /// server requires or refuses, a server that does not speak TLS).
    Tls(String),
    /// The agent answered `503 Service Unavailable`: it is up but not ready
    /// (models still loading). Waiting helps; see
    /// [`Client::wait_ready`](crate::Client::wait_ready).
    NotReady(HttpStatus),
    /// The agent (or a gateway in front of it) answered
    /// `504 Gateway Timeout`: it gave up on the call after its own time
    /// limit, e.g. `magma-server --inference-timeout-secs`. The work may
    /// have been done in part; re-sending a `POST` repeats all of it and
    /// usually times out again, so it is not retried
    /// ([`Error::is_transient`] is `false` for a `POST`).
    InferenceTimeout(HttpStatus),
    /// The agent answered with another non-2xx status. For a `422` the
    /// decoded `detail` says what the agent refused.
    Status(HttpStatus),
    /// The agent answered 2xx, but the body is not a valid document of the
    /// contract. The error lists every problem with its location
    /// (`[0].source_id`).
    InvalidBody(magma_protocol::Error),
    /// The response is valid but its candidates do not match the request:
    /// wrong order, wrong count or wrong `request_id`.
    CandidateMismatch(CandidateMismatch),
    /// `/v1/info` is valid but the agent is not one BENCH would run: protocol
    /// not `2.0`, or `capabilities.inference` not `true`.
    Incompatible(IncompatibleAgent),
    /// `POST /v1/coaching` answered `404`: the request's `run_id` has no
    /// open coaching session on the agent (never opened, or closing).
    UnknownSession(HttpStatus),
    /// `PUT /v1/coaching/sessions/{run_id}` answered `409`: the session is
    /// open with a different configuration, or closing.
    SessionConflict(HttpStatus),
    /// A coaching route answered `503`: the agent refused the session (its
    /// LLM backends are unreachable from it) or has no coach.
    CoachingUnavailable(HttpStatus),
    /// The coaching response is a valid document but does not answer the
    /// request (`validate_request`): another `request_id`, or a proposal
    /// for a reinjection point the request does not have.
    CoachingMismatch(magma_protocol::Error),
    /// The response body is larger than the configured limit; the rest was
    /// not read.
    BodyTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The connection failed after it was made; the cause says how (an
    /// answer head too large or not HTTP, broken chunked encoding, a body
    /// cut short, a reset). Not retried.
    Transport(TransportCause),
    /// A blocking method was called from inside an async runtime (a tokio
    /// task or `block_on`, including `spawn_blocking` threads, which carry
    /// the runtime's context). Nothing was sent. Call the client from a
    /// plain thread instead.
    InsideAsyncRuntime,
    /// The client cannot be built or the call cannot be made as asked: a bad
    /// URL, an unreadable CA file, `https` without the `tls` feature, an
    /// invalid header.
    Config(String),
    /// The client's runtime thread is gone (it panicked). Build a new client.
    RuntimeGone,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::ConnectionRefused => {
                f.write_str("connection refused (is the server running?)")
            }
            ErrorKind::Connect => f.write_str("could not connect"),
            ErrorKind::ConnectTimeout(d) => {
                write!(f, "connect timeout: no connection within {}", secs(*d))
            }
            ErrorKind::Timeout(d) => {
                write!(f, "timeout: the call did not complete within {}", secs(*d))
            }
            ErrorKind::Tls(why) => write!(f, "TLS failure: {why}"),
            ErrorKind::NotReady(s) => write!(f, "agent not ready: {s}"),
            ErrorKind::InferenceTimeout(s) => write!(f, "timeout: the server gave up: {s}"),
            ErrorKind::Status(s) => write!(f, "{s}"),
            ErrorKind::InvalidBody(e) => write!(f, "invalid response body: {e}"),
            ErrorKind::CandidateMismatch(m) => write!(f, "{m}"),
            ErrorKind::Incompatible(e) => write!(f, "incompatible agent: {e}"),
            ErrorKind::UnknownSession(s) => write!(f, "unknown or closing coaching session: {s}"),
            ErrorKind::SessionConflict(s) => write!(f, "coaching session conflict: {s}"),
            ErrorKind::CoachingUnavailable(s) => write!(f, "coaching unavailable: {s}"),
            ErrorKind::CoachingMismatch(e) => {
                write!(f, "the coaching response does not answer the request: {e}")
            }
            ErrorKind::BodyTooLarge { limit } => {
                write!(f, "response body larger than the limit of {limit} bytes")
            }
            ErrorKind::Transport(cause) => {
                write!(f, "connection failed during the exchange: {cause}")
            }
            ErrorKind::InsideAsyncRuntime => f.write_str(
                "blocking client called from inside an async runtime; \
                 call it from a plain thread (std::thread::spawn)",
            ),
            ErrorKind::Config(why) => write!(f, "invalid client configuration: {why}"),
            ErrorKind::RuntimeGone => f.write_str("the client's runtime thread stopped"),
        }
    }
}

/// How a connection failed after it was made ([`ErrorKind::Transport`]).
///
/// New causes may be added; match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportCause {
    /// The answer's head (status line and headers) is larger than the
    /// client reads: about 400 kB, or more than 100 header fields.
    HeadTooLarge,
    /// The answer's head is not HTTP/1.1: a bad status line, an invalid
    /// header, a `Content-Length` that is not a number.
    MalformedHead,
    /// The connection closed before an answer's head was complete (often:
    /// the agent closed it without answering).
    ClosedBeforeAnswer,
    /// The body's chunked encoding is broken (a bad chunk size line).
    BadChunkedEncoding,
    /// The connection closed before the body was complete: fewer bytes
    /// than `Content-Length`, or no last chunk.
    TruncatedBody,
    /// The peer reset the connection (TCP RST).
    ConnectionReset,
    /// The operating system gave up on the connection (TCP timeout).
    TimedOut,
    /// Another failure; the error's source has the details.
    Other,
}

impl TransportCause {
    /// A stable name: `head_too_large`, `malformed_head`,
    /// `closed_before_answer`, `bad_chunked_encoding`, `truncated_body`,
    /// `connection_reset`, `timed_out`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportCause::HeadTooLarge => "head_too_large",
            TransportCause::MalformedHead => "malformed_head",
            TransportCause::ClosedBeforeAnswer => "closed_before_answer",
            TransportCause::BadChunkedEncoding => "bad_chunked_encoding",
            TransportCause::TruncatedBody => "truncated_body",
            TransportCause::ConnectionReset => "connection_reset",
            TransportCause::TimedOut => "timed_out",
            TransportCause::Other => "other",
        }
    }
}

impl fmt::Display for TransportCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportCause::HeadTooLarge => {
                "the answer's head (status line and headers) is too large"
            }
            TransportCause::MalformedHead => "the answer's head is not valid HTTP/1.1",
            TransportCause::ClosedBeforeAnswer => "the connection closed before an answer",
            TransportCause::BadChunkedEncoding => "the body's chunked encoding is invalid",
            TransportCause::TruncatedBody => "the connection closed before the body was complete",
            TransportCause::ConnectionReset => "the connection was reset",
            TransportCause::TimedOut => "the connection timed out",
            TransportCause::Other => "the connection failed",
        })
    }
}

/// The `host:port` (or `host`) of a URL, as written in it.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// A non-2xx answer: status, headers, the raw body and its decoded `detail`.
///
/// FastAPI agents answer errors with `{"detail": ...}`: a string for
/// agent-specific refusals (`{"detail":"Models are not ready"}`), a list of
/// `{"type","loc","msg","input"}` entries for invalid requests (422).
#[derive(Debug, Clone)]
pub struct HttpStatus {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    detail: Option<Json>,
}

impl HttpStatus {
    pub(crate) fn new(status: StatusCode, headers: HeaderMap, body: Bytes) -> Self {
        let detail = Json::from_slice(&body)
            .ok()
            .and_then(|v| v.as_object().and_then(|o| o.get("detail").cloned()));
        HttpStatus {
            status,
            headers,
            body,
            detail,
        }
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// `true` for `503 Service Unavailable`, the reference agents' "models
    /// are not ready".
    pub fn is_not_ready(&self) -> bool {
        self.status == StatusCode::SERVICE_UNAVAILABLE
    }

    /// The response headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The raw body, as received (up to the size limit).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The `detail` member of a JSON object body, if there is one.
    pub fn detail(&self) -> Option<&Json> {
        self.detail.as_ref()
    }

    /// `detail` in words: a string detail as is; a FastAPI validation list
    /// as `loc: msg` entries joined by `"; "` (`body.inputs.0.id: Input
    /// should be a valid integer`); any other detail as compact JSON.
    pub fn detail_message(&self) -> Option<String> {
        let detail = self.detail.as_ref()?;
        Some(match detail {
            Json::String(s) => s.clone(),
            Json::Array(items) => items
                .iter()
                .map(describe_entry)
                .collect::<Vec<_>>()
                .join("; "),
            other => other.to_json_string(),
        })
    }
}

fn describe_entry(entry: &Json) -> String {
    let loc = entry.get("loc").and_then(Json::as_array).map(|segs| {
        segs.iter()
            .map(|s| match s {
                Json::String(k) => k.clone(),
                other => other.to_json_string(),
            })
            .collect::<Vec<_>>()
            .join(".")
    });
    match (loc, entry.get("msg").and_then(Json::as_str)) {
        (Some(loc), Some(msg)) => format!("{loc}: {msg}"),
        (None, Some(msg)) => msg.to_owned(),
        _ => entry.to_json_string(),
    }
}

/// At most [`SHOWN_CHARS`] characters of `text`, control characters escaped.
fn shown(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == SHOWN_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// How much of an agent's error text `Display` shows; the whole body stays
/// available through [`HttpStatus::body`].
const SHOWN_CHARS: usize = 200;

impl fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}", self.status)?;
        // What the agent sent is shown cut short and with control characters
        // escaped: an agent must not be able to flood or forge a tool's logs.
        if let Some(d) = self.detail_message() {
            return write!(f, ": {}", shown(&d));
        }
        if !self.body.is_empty() {
            write!(f, ": {}", shown(String::from_utf8_lossy(&self.body).trim()))?;
        }
        Ok(())
    }
}

/// A failed call: the [`ErrorKind`], and the method and URL it was made on.
///
/// `Display` reads `GET http://host:8888/health: connection refused (is the
/// server at host:8888 running?)`; the underlying I/O, hyper or rustls error, if any, is
/// the [`source`](std::error::Error::source).
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    method: Option<Method>,
    url: Option<String>,
    source: Option<BoxError>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                method: None,
                url: None,
                source: None,
            }),
        }
    }

    pub(crate) fn config(why: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config(why.into()))
    }

    pub(crate) fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.inner.source = Some(source.into());
        self
    }

    pub(crate) fn at(mut self, method: &Method, url: &str) -> Self {
        self.inner.method = Some(method.clone());
        self.inner.url = Some(url.to_owned());
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.inner.kind
    }

    /// What went wrong, owned.
    pub fn into_kind(self) -> ErrorKind {
        self.inner.kind
    }

    /// The full URL of the call, if the error belongs to one.
    pub fn url(&self) -> Option<&str> {
        self.inner.url.as_deref()
    }

    /// The HTTP method of the call, if the error belongs to one.
    pub fn method(&self) -> Option<&Method> {
        self.inner.method.as_ref()
    }

    /// The non-2xx answer, for [`ErrorKind::NotReady`],
    /// [`ErrorKind::InferenceTimeout`] and [`ErrorKind::Status`].
    pub fn http_status(&self) -> Option<&HttpStatus> {
        match &self.inner.kind {
            ErrorKind::NotReady(s)
            | ErrorKind::InferenceTimeout(s)
            | ErrorKind::Status(s)
            | ErrorKind::UnknownSession(s)
            | ErrorKind::SessionConflict(s)
            | ErrorKind::CoachingUnavailable(s) => Some(s),
            _ => None,
        }
    }

    /// `true` if the agent said `503`: up, but not ready.
    pub fn is_not_ready(&self) -> bool {
        matches!(self.inner.kind, ErrorKind::NotReady(_))
    }

    /// `true` for every timeout: connecting, the whole call, and the
    /// agent's own `504` ([`ErrorKind::InferenceTimeout`]).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self.inner.kind,
            ErrorKind::Timeout(_) | ErrorKind::ConnectTimeout(_) | ErrorKind::InferenceTimeout(_)
        )
    }

    /// `true` if no connection could be made (refused, failed or timed out
    /// while connecting; TLS failures are separate).
    pub fn is_connect(&self) -> bool {
        matches!(
            self.inner.kind,
            ErrorKind::ConnectionRefused | ErrorKind::Connect | ErrorKind::ConnectTimeout(_)
        )
    }

    /// `true` if waiting may help: the agent is starting (refused, not ready,
    /// a gateway in front of it answering 502, or 504 to a `GET`) or did not
    /// answer in time. [`Client::wait_ready`](crate::Client::wait_ready)
    /// keeps polling on exactly these.
    ///
    /// A `504` to a `POST` is not transient: the agent ran the inference up
    /// to its limit, and the same request would run as long again. Whether
    /// any failed `POST` may be re-sent is the caller's decision; see
    /// `docs/client.md`.
    pub fn is_transient(&self) -> bool {
        match &self.inner.kind {
            ErrorKind::InferenceTimeout(_) => self.inner.method.as_ref() == Some(&Method::GET),
            ErrorKind::ConnectionRefused
            | ErrorKind::Connect
            | ErrorKind::ConnectTimeout(_)
            | ErrorKind::Timeout(_)
            | ErrorKind::Transport(_)
            | ErrorKind::NotReady(_) => true,
            ErrorKind::Status(s) => s.status() == StatusCode::BAD_GATEWAY,
            _ => false,
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.inner.kind);
        if let Some(m) = &self.inner.method {
            d.field("method", m);
        }
        if let Some(u) = &self.inner.url {
            d.field("url", u);
        }
        if let Some(s) = &self.inner.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(m) = &self.inner.method {
            write!(f, "{m} ")?;
        }
        let Some(u) = &self.inner.url else {
            return write!(f, "{}", self.inner.kind);
        };
        match &self.inner.kind {
            // Name the server that was tried: the client also calls model providers and
            // proxies, not only agents.
            ErrorKind::ConnectionRefused => write!(
                f,
                "{u}: connection refused (is the server at {} running?)",
                authority(u)
            ),
            kind => write!(f, "{u}: {kind}"),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.inner.kind {
            ErrorKind::InvalidBody(e) => Some(e),
            ErrorKind::CandidateMismatch(e) => Some(e),
            ErrorKind::CoachingMismatch(e) => Some(e),
            ErrorKind::Incompatible(e) => Some(e),
            _ => self
                .inner
                .source
                .as_deref()
                .map(|e| e as &(dyn StdError + 'static)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_error_text_is_shown_short_and_escaped() {
        let flood = format!(
            "{}\nERROR forged log line{}",
            "x".repeat(10),
            "y".repeat(5000)
        );
        let body = Json::from(vec![]).to_json_string();
        assert_eq!(body, "[]");
        let detail = magma_protocol::json!({ "detail": flood.as_str() }).to_json_string();
        let status = HttpStatus::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            HeaderMap::new(),
            detail.into(),
        );
        let shown = status.to_string();
        assert!(!shown.contains('\n'), "{shown}");
        assert!(shown.contains("\\nERROR forged"), "{shown}");
        assert!(shown.ends_with("..."), "{shown}");
        assert!(
            shown.chars().count() < 260,
            "{} chars",
            shown.chars().count()
        );
        // The body is all still there for whoever needs it.
        assert!(status.body().len() > 5000);
        let raw = HttpStatus::new(
            StatusCode::BAD_GATEWAY,
            HeaderMap::new(),
            Bytes::from_static(b"<html>\r\nbad</html>"),
        );
        assert_eq!(
            raw.to_string(),
            "HTTP 502 Bad Gateway: <html>\\r\\nbad</html>"
        );
    }
}
