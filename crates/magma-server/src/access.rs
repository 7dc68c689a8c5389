//! A request's ids (the body's `request_id`, an incoming `X-Request-Id`,
//! the client's address, the span) and its access log line, written when it
//! is answered or, rate-limited, when the client goes away first.

use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONNECTION, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Response, Uri, Version};
use http_body_util::Full;

use crate::forwarded::{TrustedProxy, client_ip};
use crate::reply::Reply;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// Longest request id written to logs and headers; longer ones are cut.
const MAX_LOGGED_ID: usize = 128;

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
fn header_request_id(value: Option<&HeaderValue>) -> Option<String> {
    let value = value?.as_bytes();
    let ok = !value.is_empty()
        && value.len() <= MAX_LOGGED_ID
        && value.iter().all(|b| (0x21..=0x7e).contains(b));
    // Visible ASCII is UTF-8.
    ok.then(|| String::from_utf8_lossy(value).into_owned())
}

/// What the access log line says about a request. Dropped without
/// [`finish`](Access::finish) (the client went away and hyper dropped the
/// handler), it logs that instead.
pub(crate) struct Access {
    /// When the request's head arrived, if anything reads its latency (the
    /// access log at `info`, the metrics): the clock is not read for
    /// nothing.
    start: Option<Instant>,
    method: Method,
    /// The request's URI: a shared copy of hyper's (no allocation), for
    /// the path in the log lines.
    uri: Uri,
    version: Version,
    peer: Option<SocketAddr>,
    ids: Ids,
    answered: bool,
}

impl Access {
    /// The access record of a request as it arrives, with its span.
    /// `x_request_id` is its first `X-Request-Id` header, if any; `peer` is
    /// the connection's remote address, when known; `timed`: the request's
    /// latency is needed whatever the log level (metrics).
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of a request's head, each once"
    )]
    pub(crate) fn new(
        method: &Method,
        uri: &Uri,
        version: Version,
        headers: &HeaderMap,
        x_request_id: Option<&HeaderValue>,
        peer: Option<SocketAddr>,
        trusted_proxies: &[TrustedProxy],
        timed: bool,
    ) -> Access {
        let header_id = header_request_id(x_request_id);
        let client = peer.map(|p| match trusted_proxies.is_empty() {
            true => p.ip(),
            false => client_ip(p.ip(), headers, trusted_proxies),
        });
        let method = method.clone();
        let uri = uri.clone();
        // The span and the panic line keep the dispatcher's target: filtering
        // out the access log (`magma_server::access`) must not drop them.
        let span = tracing::info_span!(
            target: "magma_server::handler",
            "request",
            method = %method,
            path = %uri.path(),
            request_id = tracing::field::Empty,
            x_request_id = header_id.as_deref(),
        );
        let logged = tracing::enabled!(target: "magma_server::access", tracing::Level::INFO);
        Access {
            start: (timed || logged).then(Instant::now),
            method,
            uri,
            version,
            peer,
            ids: Ids {
                body: OnceLock::new(),
                header: header_id,
                client,
                span,
            },
            answered: false,
        }
    }

    pub(crate) fn ids(&self) -> &Ids {
        &self.ids
    }

    /// Time since the request's head arrived.
    #[cfg(feature = "metrics")]
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Logs a panic of agent code outside an inference (answered `500`).
    pub(crate) fn panicked(&self, panic: &str) {
        tracing::error!(
            target: "magma_server::handler",
            method = %self.method,
            path = %self.uri.path(),
            panic,
            "agent code panicked outside an inference; answered 500"
        );
    }

    /// The client's address when a trusted proxy forwarded one other than
    /// its own.
    fn forwarded_client(&self) -> Option<IpAddr> {
        self.ids
            .client
            .filter(|c| self.peer.is_some_and(|p| p.ip() != *c))
    }

    pub(crate) fn finish(&mut self, reply: Reply) -> Response<Full<Bytes>> {
        self.answered = true;
        let (mut response, candidates, close) = reply.into_parts();
        if close && self.version <= Version::HTTP_11 {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        let id = self.ids.body.get_or_init(generated_id);
        tracing::info!(
            target: "magma_server::access",
            request_id = ?id,
            x_request_id = self.ids.header.as_deref(),
            method = %self.method,
            path = %self.uri.path(),
            version = ?self.version,
            status = response.status().as_u16(),
            latency_ms = %Latency(self.start),
            candidates,
            peer = self.peer.map(tracing::field::display),
            client = self.forwarded_client().map(tracing::field::display),
            "request"
        );
        // The caller's own id comes back when it sent one. The header takes
        // the id's own string: nothing reads it after this line.
        let echoed = match self.ids.header.take() {
            Some(header) => header,
            None => self.ids.body.take().unwrap_or_else(generated_id),
        };
        response
            .headers_mut()
            .insert(REQUEST_ID, request_id_header(echoed));
        response
    }
}

/// A latency in milliseconds for the log lines; `-` when the clock was not
/// read (nothing was to log it when the request came).
struct Latency(Option<Instant>);

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(start) => write!(f, "{:.3}", start.elapsed().as_secs_f64() * 1000.0),
            None => f.write_str("-"),
        }
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
                    path = %self.uri.path(),
                    "request abandoned (over the info rate of abandon lines)"
                );
                return;
            };
            tracing::info!(
                target: "magma_server::access",
                request_id = ?id,
                x_request_id = self.ids.header.as_deref(),
                method = %self.method,
                path = %self.uri.path(),
                version = ?self.version,
                latency_ms = %Latency(self.start),
                peer = self.peer.map(tracing::field::display),
                client = self.forwarded_client().map(tracing::field::display),
                suppressed,
                "request abandoned: the client closed the connection before the answer"
            );
        }
    }
}

/// `id` as a header value: as it is when it is visible ASCII (the usual
/// case), else with every byte outside `!`..`~` and every `%`
/// percent-escaped (`a\nb` gives `a%0Ab`), so that the header is always
/// there and says which id it was.
fn request_id_header(id: String) -> HeaderValue {
    let visible = |b: &u8| (0x21..=0x7e).contains(b);
    if id.bytes().all(|b| visible(&b)) {
        // The string becomes the header's bytes as it is, without a copy
        // (visible ASCII is always a valid value).
        return HeaderValue::from_maybe_shared(Bytes::from(id.into_bytes()))
            .unwrap_or_else(|_| HeaderValue::from_static("-"));
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

    #[test]
    fn ids_are_cut_on_a_character_boundary() {
        let long = "é".repeat(300);
        let cut = truncate(long);
        assert_eq!(cut.chars().count(), MAX_LOGGED_ID);
        assert_eq!(truncate("abc".into()), "abc");
    }

    #[test]
    fn request_ids_always_make_a_header() {
        assert_eq!(request_id_header("req-1_a.B".into()), "req-1_a.B");
        assert_eq!(request_id_header("a\nb\u{0}".into()), "a%0Ab%00");
        assert_eq!(request_id_header("50% é".into()), "50%25%20%C3%A9");
        assert_eq!(
            request_id_header("a%b".into()),
            "a%b",
            "visible ASCII is kept as it is"
        );
    }

    #[test]
    fn generated_ids_differ() {
        assert_ne!(generated_id(), generated_id());
    }
}
