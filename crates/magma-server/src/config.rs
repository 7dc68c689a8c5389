//! Limits and options, with their defaults.

use std::time::Duration;

use crate::Error;

/// Server limits and options. [`Config::default`] gives safe defaults; change
/// fields as needed:
///
/// ```
/// use std::time::Duration;
/// let mut config = magma_server::Config::default();
/// config.max_body_bytes = 4 << 20;
/// config.inference_timeout = Some(Duration::from_secs(300));
/// ```
///
/// Every limit has a command-line flag in the `cli` front end, e.g.
/// `--max-body-bytes`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Largest accepted request body, in bytes (default 16 MiB). A larger
    /// `Content-Length` is answered `413` before the body is read; a body
    /// without one (chunked, HTTP/2) is cut off at the limit, also `413`.
    pub max_body_bytes: u64,
    /// Time a connection has to deliver a complete request head: from
    /// accept (or the end of the TLS handshake) to the first request, and on
    /// HTTP/1.1 keep-alive from the previous answer (writing it counts) to
    /// the next request head (default 30 s). The connection is closed when
    /// it runs out; a request being answered is never cut by it.
    pub header_timeout: Duration,
    /// Time a client may leave the server's writes blocked (default 30 s):
    /// when the connection's socket accepts no byte of a pending answer for
    /// this long (a peer that stopped reading, over HTTP/1.1 or HTTP/2,
    /// plain or TLS), the connection is closed and what it held is freed.
    pub write_timeout: Duration,
    /// Time allowed to receive a request body once its head arrived
    /// (default 60 s); `408` when it runs out.
    pub body_timeout: Duration,
    /// Open connections at most (default 512). When reached, the server stops
    /// accepting until one closes; the operating system queues the rest.
    pub max_connections: usize,
    /// Requests one HTTP/2 connection may have open at once (default 16;
    /// HTTP/1.1 has one). With [`max_body_bytes`](Config::max_body_bytes) it
    /// bounds the request bodies one connection can make the server hold.
    pub max_concurrent_streams: u32,
    /// Inferences (`POST /v1/responses` handled by the agent) running at
    /// once, at most (default 64). Further requests wait for a slot;
    /// `/health` and `/v1/info` never wait.
    pub max_concurrent_inferences: usize,
    /// Candidates one request may ask for, summed over its inputs'
    /// `num_outputs` (default 1024). More is answered `422` with a string
    /// `detail` before the agent is called.
    pub max_candidates: u64,
    /// Largest `200` body of `POST /v1/responses`, in bytes (default
    /// 16 MiB). A request whose answer would be larger when every candidate
    /// carries its input's memory (as the contract asks) is answered `422`
    /// with a string `detail` before the agent is called; an agent answer
    /// that turns out larger while it is written is answered `500` with a
    /// JSON `detail`. Agents can read it from
    /// [`RequestContext::max_response_bytes`](crate::RequestContext::max_response_bytes).
    pub max_response_bytes: u64,
    /// The memory budget for requests and answers of the whole process,
    /// summed over every connection and HTTP/2 stream (default 256 MiB).
    /// A request body's bytes count from their arrival, twice once the body
    /// is complete (the parsed request is about as large again), until its
    /// request is answered; an answer of `POST /v1/responses` counts from
    /// before the agent runs (its size as
    /// [`max_response_bytes`](Config::max_response_bytes) estimates it) until
    /// it has been written to the client. A request that needs bytes the
    /// budget does not have waits up to one second for others to finish,
    /// then gets `503` with a JSON `detail` and `Retry-After: 1` (the
    /// connection is closed when its body was not read to the end). At
    /// least `2 x max_body_bytes + max_response_bytes`.
    pub max_total_body_bytes: u64,
    /// Coaching sessions open at once, at most (default 1024). A `PUT` of a
    /// new session beyond it is answered `503` with a JSON `detail`.
    pub max_coaching_sessions: usize,
    /// Bytes all open coaching sessions may hold together (default 64 MiB):
    /// each session counts its configuration's compact JSON length and its
    /// run id. A `PUT` of a new session that does not fit is answered `503`
    /// with a JSON `detail`. At least `max_body_bytes`, so that one session
    /// of the largest accepted body fits.
    pub max_coaching_session_bytes: u64,
    /// How long a coaching session may go without a request before it is
    /// closed as if `DELETE`d (default 1 hour; `None`: never). A run that
    /// crashed never sends its `DELETE`; its session would otherwise stay
    /// for the life of the process. A session with a request in flight is
    /// never idle.
    pub coaching_session_idle_timeout: Option<Duration>,
    /// Where coaching sessions live (default: `None`, this process's
    /// memory). With a [`RedisStore`](crate::RedisStore), every replica
    /// configured with the same store answers every coaching route: a
    /// session opened on one is found, and closed, on all. The limits above
    /// then count the sessions of the whole store (give every replica the
    /// same ones), and each replica keeps its agent's state of the sessions
    /// it served within the same byte budget.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub coaching_store: Option<crate::RedisStore>,
    /// Time allowed for an inference, including the wait for a slot
    /// (default: none). When it runs out the agent's work is dropped and the
    /// client gets `504` with a JSON `detail`.
    pub inference_timeout: Option<Duration>,
    /// After a shutdown signal, time given to in-flight requests before the
    /// remaining connections are closed (default 30 s).
    pub shutdown_grace: Duration,
    /// A path prefix the endpoints live under, e.g. `/agent` serves
    /// `/agent/health` (default: none). Useful behind a reverse proxy that
    /// forwards the prefix instead of stripping it.
    pub path_prefix: Option<String>,
    /// Time a TLS client has to complete its handshake (default 10 s).
    pub tls_handshake_timeout: Duration,
    /// Reverse proxies whose `Forwarded` / `X-Forwarded-For` headers name
    /// the client (default: none, and those headers are ignored). For a
    /// request from one of them, the access log's `client` field and
    /// [`RequestContext::client_ip`](crate::RequestContext::client_ip) give
    /// the nearest forwarded address that is not itself a trusted proxy.
    pub trusted_proxies: Vec<crate::TrustedProxy>,
    /// Record metrics into this registry and serve them on
    /// `GET {path_prefix}/metrics` (default: none, and `/metrics` is `404`).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub metrics: Option<crate::Metrics>,
    /// Serve HTTPS with this configuration (default: plain HTTP).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub tls: Option<crate::TlsConfig>,
}

impl Config {
    /// Default [`max_body_bytes`](Config::max_body_bytes): 16 MiB.
    pub const DEFAULT_MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;
    /// Default [`header_timeout`](Config::header_timeout): 30 s.
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default [`write_timeout`](Config::write_timeout): 30 s.
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default [`body_timeout`](Config::body_timeout): 60 s.
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);
    /// Default [`max_connections`](Config::max_connections): 512.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
    /// Default [`max_concurrent_streams`](Config::max_concurrent_streams): 16.
    pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 16;
    /// Default [`max_concurrent_inferences`](Config::max_concurrent_inferences): 64.
    pub const DEFAULT_MAX_CONCURRENT_INFERENCES: usize = 64;
    /// Default [`max_candidates`](Config::max_candidates): 1024.
    pub const DEFAULT_MAX_CANDIDATES: u64 = 1024;
    /// Default [`max_response_bytes`](Config::max_response_bytes): 16 MiB.
    pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;
    /// Default [`max_total_body_bytes`](Config::max_total_body_bytes): 256 MiB.
    pub const DEFAULT_MAX_TOTAL_BODY_BYTES: u64 = 256 * 1024 * 1024;
    /// Default [`max_coaching_sessions`](Config::max_coaching_sessions): 1024.
    pub const DEFAULT_MAX_COACHING_SESSIONS: usize = 1024;
    /// Default [`max_coaching_session_bytes`](Config::max_coaching_session_bytes): 64 MiB.
    pub const DEFAULT_MAX_COACHING_SESSION_BYTES: u64 = 64 * 1024 * 1024;
    /// Default [`coaching_session_idle_timeout`](Config::coaching_session_idle_timeout): 1 hour.
    pub const DEFAULT_COACHING_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
    /// Default [`shutdown_grace`](Config::shutdown_grace): 30 s.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
    /// Default [`tls_handshake_timeout`](Config::tls_handshake_timeout): 10 s.
    pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    /// The prefix, normalized: `None` for no prefix, else `/a/b` with no
    /// trailing slash.
    pub(crate) fn normalized_prefix(&self) -> Option<String> {
        let p = self.path_prefix.as_deref()?.trim_end_matches('/');
        if p.is_empty() {
            return None;
        }
        Some(if p.starts_with('/') {
            p.to_owned()
        } else {
            format!("/{p}")
        })
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        let bad = |what: &str| Err(Error::InvalidConfig(what.to_owned()));
        if self.max_connections == 0 {
            return bad("max_connections must be at least 1");
        }
        if self.max_concurrent_streams == 0 {
            return bad("max_concurrent_streams must be at least 1");
        }
        if self.max_concurrent_inferences == 0 {
            return bad("max_concurrent_inferences must be at least 1");
        }
        if self.max_concurrent_inferences > tokio::sync::Semaphore::MAX_PERMITS
            || self.max_connections > tokio::sync::Semaphore::MAX_PERMITS
        {
            return bad("max_connections and max_concurrent_inferences must be below 2^61");
        }
        // One request of the largest size, parsed, and the largest answer
        // must fit, or such a request could never be served.
        let one = self
            .max_body_bytes
            .saturating_mul(2)
            .saturating_add(self.max_response_bytes);
        if self.max_total_body_bytes < one {
            return bad(
                "max_total_body_bytes must be at least 2 x max_body_bytes + max_response_bytes",
            );
        }
        if self.max_total_body_bytes > tokio::sync::Semaphore::MAX_PERMITS as u64 {
            return bad("max_total_body_bytes must be below 2^61");
        }
        if self.max_coaching_sessions == 0 {
            return bad("max_coaching_sessions must be at least 1");
        }
        if self.max_coaching_session_bytes < self.max_body_bytes {
            return bad(
                "max_coaching_session_bytes must be at least max_body_bytes, so that a session \
                 of the largest accepted body fits",
            );
        }
        if self.coaching_session_idle_timeout == Some(Duration::ZERO) {
            return bad("coaching_session_idle_timeout must be above zero (None: never)");
        }
        if self.max_candidates == 0 {
            return bad("max_candidates must be at least 1");
        }
        if self.max_response_bytes < 1024 {
            return bad("max_response_bytes must be at least 1024");
        }
        if self.header_timeout.is_zero()
            || self.write_timeout.is_zero()
            || self.body_timeout.is_zero()
            || self.tls_handshake_timeout.is_zero()
            || self.inference_timeout.is_some_and(|t| t.is_zero())
        {
            return bad("timeouts must be longer than zero");
        }
        if let Some(p) = &self.path_prefix {
            if p.contains(['?', '#']) || p.chars().any(char::is_whitespace) {
                return bad("path_prefix must be a plain URL path such as /agent");
            }
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_body_bytes: Config::DEFAULT_MAX_BODY_BYTES,
            header_timeout: Config::DEFAULT_HEADER_TIMEOUT,
            write_timeout: Config::DEFAULT_WRITE_TIMEOUT,
            body_timeout: Config::DEFAULT_BODY_TIMEOUT,
            max_connections: Config::DEFAULT_MAX_CONNECTIONS,
            max_concurrent_streams: Config::DEFAULT_MAX_CONCURRENT_STREAMS,
            max_concurrent_inferences: Config::DEFAULT_MAX_CONCURRENT_INFERENCES,
            max_candidates: Config::DEFAULT_MAX_CANDIDATES,
            max_response_bytes: Config::DEFAULT_MAX_RESPONSE_BYTES,
            max_total_body_bytes: Config::DEFAULT_MAX_TOTAL_BODY_BYTES,
            max_coaching_sessions: Config::DEFAULT_MAX_COACHING_SESSIONS,
            max_coaching_session_bytes: Config::DEFAULT_MAX_COACHING_SESSION_BYTES,
            coaching_session_idle_timeout: Some(Config::DEFAULT_COACHING_SESSION_IDLE_TIMEOUT),
            #[cfg(feature = "redis")]
            coaching_store: None,
            inference_timeout: None,
            shutdown_grace: Config::DEFAULT_SHUTDOWN_GRACE,
            path_prefix: None,
            tls_handshake_timeout: Config::DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            trusted_proxies: Vec::new(),
            #[cfg(feature = "metrics")]
            metrics: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_normalized() {
        let mut c = Config::default();
        for (given, want) in [
            (None, None),
            (Some("/"), None),
            (Some(""), None),
            (Some("/agent"), Some("/agent")),
            (Some("/agent/"), Some("/agent")),
            (Some("agent/v2/"), Some("/agent/v2")),
        ] {
            c.path_prefix = given.map(str::to_owned);
            assert_eq!(c.normalized_prefix().as_deref(), want, "{given:?}");
        }
    }

    #[test]
    fn zero_limits_are_refused() {
        let mut c = Config::default();
        assert!(c.validate().is_ok());
        c.max_connections = 0;
        assert!(matches!(c.validate(), Err(Error::InvalidConfig(_))));
        let c = Config {
            inference_timeout: Some(Duration::ZERO),
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            path_prefix: Some("/a?b".into()),
            ..Config::default()
        };
        assert!(c.validate().is_err());
    }
}
