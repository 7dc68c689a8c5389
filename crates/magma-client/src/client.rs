//! [`Client`] and [`ClientBuilder`].

use std::fmt;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, HeaderValue, USER_AGENT};
use http::{Method, StatusCode, Uri};
use http_body_util::Full;
use magma_protocol::routes::Endpoint;
use magma_protocol::{AgentHealth, AgentInfo, AgentRequest, AgentResponse};

use crate::connect::Connector;
use crate::error::{Error, ErrorKind, HttpStatus};
use crate::raw::{RawRequest, RawResponse};
use crate::runtime::{Job, PoolOptions, Runtime};

/// Default whole-call timeout: BENCH's `magma_agent_timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(360);
/// Default connect timeout (name resolution, TCP and TLS handshake).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default response body limit: 64 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;
/// Default time an idle keep-alive connection stays in the pool: below
/// uvicorn's 5 s keep-alive, so the client does not pick a connection the
/// server is about to close.
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(3);

const JSON: HeaderValue = HeaderValue::from_static("application/json");

fn default_user_agent() -> String {
    format!("magma-client/{}", env!("CARGO_PKG_VERSION"))
}

/// Returns an error if the current thread is inside a tokio runtime, where
/// blocking would stall that runtime (and deadlock if the agent runs on it).
fn ensure_blocking_allowed() -> Result<(), Error> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(Error::new(ErrorKind::InsideAsyncRuntime));
    }
    Ok(())
}

/// Configures a [`Client`]. Start with [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    base_url: String,
    timeout: Duration,
    connect_timeout: Duration,
    max_response_bytes: u64,
    user_agent: String,
    pool_idle_timeout: Duration,
    pool_max_idle_per_host: usize,
    #[cfg(feature = "tls")]
    tls: crate::tls::TlsOptions,
}

impl ClientBuilder {
    fn new(base_url: String) -> Self {
        ClientBuilder {
            base_url,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            user_agent: default_user_agent(),
            pool_idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT,
            pool_max_idle_per_host: usize::MAX,
            #[cfg(feature = "tls")]
            tls: crate::tls::TlsOptions::default(),
        }
    }

    /// The longest a whole call may take: connecting, sending, the agent's
    /// work and reading the body. Default [`DEFAULT_TIMEOUT`] (360 s, as
    /// BENCH). Must be > 0.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest connecting may take (name resolution, TCP, TLS
    /// handshake). Default [`DEFAULT_CONNECT_TIMEOUT`] (30 s). Must be > 0.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The largest response body accepted, in bytes; larger ones fail with
    /// [`ErrorKind::BodyTooLarge`] without being read to the end. Default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`] (64 MiB).
    pub fn max_response_bytes(mut self, limit: u64) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// The `User-Agent` header. Default `magma-client/<version>`.
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// How long an idle keep-alive connection is kept for reuse. Default
    /// [`DEFAULT_POOL_IDLE_TIMEOUT`] (3 s).
    pub fn pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }

    /// How many idle connections are kept; `0` opens a new connection for
    /// every call, as BENCH and GEN do. Default unlimited.
    pub fn pool_max_idle_per_host(mut self, max: usize) -> Self {
        self.pool_max_idle_per_host = max;
        self
    }

    /// Whether the bundled Mozilla roots (webpki-roots) are trusted. Default
    /// `true`; turn off to trust only the CA files given.
    #[cfg(feature = "tls")]
    pub fn webpki_roots(mut self, enabled: bool) -> Self {
        self.tls.webpki_roots = enabled;
        self
    }

    /// Also trusts the CA certificates in this PEM file (read at
    /// [`build`](Self::build)), for agents with a self-signed or private-CA
    /// certificate. May be called several times.
    #[cfg(feature = "tls")]
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.cas.push(crate::tls::Pem::File(path.into()));
        self
    }

    /// Also trusts the CA certificates in this PEM text.
    #[cfg(feature = "tls")]
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.cas.push(crate::tls::Pem::Bytes(pem.into()));
        self
    }

    /// Presents this client certificate (PEM chain, leaf first) and private
    /// key (PEM, PKCS#8, PKCS#1 or SEC1) to servers that ask for one (mutual
    /// TLS). Read at [`build`](Self::build).
    #[cfg(feature = "tls")]
    pub fn client_identity_files(
        mut self,
        cert_chain: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.identity = Some((
            crate::tls::Pem::File(cert_chain.into()),
            crate::tls::Pem::File(key.into()),
        ));
        self
    }

    /// Like [`client_identity_files`](Self::client_identity_files), from
    /// PEM text.
    #[cfg(feature = "tls")]
    pub fn client_identity_pem(
        mut self,
        cert_chain: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.identity = Some((
            crate::tls::Pem::Bytes(cert_chain.into()),
            crate::tls::Pem::Bytes(key.into()),
        ));
        self
    }

    /// Checks the settings, reads TLS files, and starts the client's runtime
    /// thread. Fails with [`ErrorKind::Config`].
    pub fn build(self) -> Result<Client, Error> {
        let base = BaseUrl::parse(&self.base_url)?;
        if self.timeout.is_zero() {
            return Err(Error::config(
                "the request timeout must be greater than zero",
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err(Error::config(
                "the connect timeout must be greater than zero",
            ));
        }
        let user_agent = HeaderValue::from_str(&self.user_agent)
            .map_err(|_| Error::config(format!("invalid user agent {:?}", self.user_agent)))?;

        #[cfg(feature = "tls")]
        let tls = if base.https {
            Some(tokio_rustls::TlsConnector::from(Arc::new(
                self.tls.build()?,
            )))
        } else {
            None
        };
        #[cfg(not(feature = "tls"))]
        if base.https {
            return Err(Error::config(format!(
                "{} is an https URL: enable the `tls` feature of magma-client",
                base.display
            )));
        }

        let connector = Connector {
            connect_timeout: self.connect_timeout,
            #[cfg(feature = "tls")]
            tls,
        };
        let runtime = Runtime::start(
            connector,
            PoolOptions {
                idle_timeout: self.pool_idle_timeout,
                max_idle_per_host: self.pool_max_idle_per_host,
            },
        )?;
        Ok(Client {
            inner: Arc::new(Inner {
                base,
                timeout: self.timeout,
                connect_timeout: self.connect_timeout,
                max_response_bytes: self.max_response_bytes,
                user_agent,
                runtime,
            }),
        })
    }
}

/// The base URL, split once: scheme and authority, and a path prefix without
/// a trailing `/` (`https://host/prefix/` -> `https://host` + `/prefix`).
#[derive(Debug)]
struct BaseUrl {
    https: bool,
    /// `scheme://authority` + prefix, what paths are appended to.
    display: String,
}

impl BaseUrl {
    fn parse(url: &str) -> Result<BaseUrl, Error> {
        let trimmed = url.trim();
        let uri: Uri = trimmed
            .parse()
            .map_err(|e| Error::config(format!("invalid base URL {url:?}: {e}")).with_source(e))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => {
                return Err(Error::config(format!(
                    "invalid base URL {url:?}: scheme {other:?} is not http or https"
                )));
            }
            None => {
                return Err(Error::config(format!(
                    "invalid base URL {url:?}: give a scheme, e.g. http://{trimmed}"
                )));
            }
        };
        let Some(authority) = uri.authority() else {
            return Err(Error::config(format!("invalid base URL {url:?}: no host")));
        };
        if authority.as_str().contains('@') {
            return Err(Error::config(format!(
                "invalid base URL {url:?}: credentials in the URL are not supported"
            )));
        }
        if uri.query().is_some() {
            return Err(Error::config(format!(
                "invalid base URL {url:?}: a query string is not allowed"
            )));
        }
        let prefix = uri.path().trim_end_matches('/');
        let scheme = if https { "https" } else { "http" };
        Ok(BaseUrl {
            https,
            display: format!("{scheme}://{authority}{prefix}"),
        })
    }
}

/// A blocking client for one MAGMA agent.
///
/// Cheap to clone (clones share one connection pool and one runtime thread)
/// and usable from many threads at once. The runtime thread stops when the
/// last clone is dropped. Every method blocks the calling thread; called
/// from inside an async runtime they return
/// [`ErrorKind::InsideAsyncRuntime`] at once.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    base: BaseUrl,
    timeout: Duration,
    connect_timeout: Duration,
    max_response_bytes: u64,
    user_agent: HeaderValue,
    runtime: Runtime,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.base.display)
            .field("timeout", &self.inner.timeout)
            .field("connect_timeout", &self.inner.connect_timeout)
            .field("max_response_bytes", &self.inner.max_response_bytes)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the agent at `base_url` with the default settings.
    pub fn new(base_url: impl Into<String>) -> Result<Client, Error> {
        Client::builder(base_url).build()
    }

    /// A builder for the agent at `base_url` (`http://host:8888`,
    /// `https://host/prefix`; a trailing `/` is ignored).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(base_url.into())
    }

    /// The normalized base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.inner.base.display
    }

    /// The full URL of `path` (`/v1/info` -> `http://host:8888/v1/info`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.inner.base.display)
    }

    /// The whole-call timeout.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.inner.connect_timeout
    }

    /// The response body limit in bytes.
    pub fn max_response_bytes(&self) -> u64 {
        self.inner.max_response_bytes
    }

    /// `GET /health`: `Ok` only for a 2xx answer with a valid
    /// `AgentHealth` body. A 503 is [`ErrorKind::NotReady`], a 504
    /// [`ErrorKind::InferenceTimeout`].
    pub fn health(&self) -> Result<AgentHealth, Error> {
        self.health_within(self.inner.timeout)
    }

    fn health_within(&self, timeout: Duration) -> Result<AgentHealth, Error> {
        let req = RawRequest::get(Endpoint::Health.path())
            .header(ACCEPT, JSON)
            .timeout(timeout);
        self.typed(req, AgentHealth::from_slice)
    }

    /// `GET /v1/info`, parsed strictly (unknown fields are refused, as the
    /// reference does).
    pub fn info(&self) -> Result<AgentInfo, Error> {
        self.typed(
            RawRequest::get(Endpoint::Info.path()).header(ACCEPT, JSON),
            AgentInfo::from_slice,
        )
    }

    /// `GET /v1/info` and BENCH's check: `protocol_version` `"2.0"` and
    /// `capabilities.inference` `true`, else [`ErrorKind::Incompatible`].
    /// BENCH calls [`health`](Self::health) first; so should a tool that
    /// wants the same start-up.
    pub fn check_compatible(&self) -> Result<AgentInfo, Error> {
        let info = self.info()?;
        info.check_compatible().map_err(|e| {
            Error::new(ErrorKind::Incompatible(e))
                .at(&Method::GET, &self.url(Endpoint::Info.path()))
        })?;
        Ok(info)
    }

    /// Polls `GET /health` until the agent is ready or `timeout` has passed.
    ///
    /// Keeps waiting while the agent is starting: connection refused or
    /// failed, 503 (not ready), 502/504 from a gateway, a timed-out or
    /// broken attempt ([`Error::is_transient`]). Backs off from 50 ms to
    /// 1 s between attempts; no attempt outlives the deadline. Any other
    /// error (404, an invalid body, TLS) is returned at once. On timeout,
    /// returns the last attempt's error.
    pub fn wait_ready(&self, timeout: Duration) -> Result<AgentHealth, Error> {
        ensure_blocking_allowed()?;
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(50);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let attempt = remaining
                .min(self.inner.timeout)
                .max(Duration::from_millis(10));
            let err = match self.health_within(attempt) {
                Ok(health) => return Ok(health),
                Err(e) if e.is_transient() => e,
                Err(e) => return Err(e),
            };
            tracing::debug!(error = %err, "agent not ready yet");
            let now = Instant::now();
            if now >= deadline {
                return Err(err);
            }
            std::thread::sleep(pause.min(deadline - now));
            if Instant::now() >= deadline {
                return Err(err);
            }
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// `POST /v1/responses` with `Content-Type: application/json`.
    ///
    /// The body is parsed strictly ([`ErrorKind::InvalidBody`], with the
    /// location of every problem) and checked against the request with
    /// `validate_request` ([`ErrorKind::CandidateMismatch`]): an `Ok`
    /// response has, in order, `num_outputs` candidates for each input,
    /// each echoing the `request_id`. Never retried.
    ///
    /// A body holding more candidates than the request asks for (the sum
    /// of its `num_outputs`) is refused as a `CandidateMismatch` before any
    /// candidate is built ([`AgentResponse::from_slice_for`]): many small
    /// candidates cannot cost more than the request asked for
    /// (`docs/security.md` says what an answer can still cost).
    pub fn respond(&self, request: &AgentRequest) -> Result<AgentResponse, Error> {
        let req = RawRequest::post(Endpoint::Responses.path())
            .header(ACCEPT, JSON)
            .json(Bytes::from(request.to_json_string()));
        let url = self.url(Endpoint::Responses.path());
        let body = self.body_of(req, not_2xx)?;
        let at = |kind| Error::new(kind).at(&Method::POST, &url);
        AgentResponse::check_candidate_count(&body, request)
            .map_err(|m| at(ErrorKind::CandidateMismatch(m)))?;
        let response =
            AgentResponse::from_slice(&body).map_err(|e| at(ErrorKind::InvalidBody(e)))?;
        drop(body);
        response
            .validate_request(request)
            .map_err(|m| at(ErrorKind::CandidateMismatch(m)))?;
        Ok(response)
    }

    /// Sends any request and returns the answer whatever its status: only
    /// transport failures, timeouts and the size limit are errors. For
    /// tools such as conformance probes.
    pub fn execute(&self, request: RawRequest) -> Result<RawResponse, Error> {
        ensure_blocking_allowed()?;
        let RawRequest {
            method,
            path,
            mut headers,
            body,
            timeout,
        } = request;
        let url = self.url(&path);
        if !path.starts_with('/') {
            return Err(
                Error::config(format!("path {path:?} must start with '/'")).at(&method, &url)
            );
        }
        let uri: Uri = url.parse().map_err(|e: http::uri::InvalidUri| {
            Error::config(format!("invalid URL {url:?}: {e}"))
                .with_source(e)
                .at(&method, &url)
        })?;
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, self.inner.user_agent.clone());
        }
        let mut builder = http::Request::builder().method(method.clone()).uri(uri);
        if let Some(h) = builder.headers_mut() {
            *h = headers;
        }
        let request = builder.body(Full::new(body)).map_err(|e| {
            Error::config(format!("invalid request: {e}"))
                .with_source(e)
                .at(&method, &url)
        })?;
        let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
        let job = Job {
            request,
            method,
            url,
            timeout: timeout.unwrap_or(self.inner.timeout),
            limit: self.inner.max_response_bytes,
            reply: reply_tx,
        };
        self.inner.runtime.call(job, reply_rx)
    }

    /// Executes, requires 2xx, and parses the body with `parse`.
    fn typed<T>(
        &self,
        request: RawRequest,
        parse: fn(&[u8]) -> Result<T, magma_protocol::Error>,
    ) -> Result<T, Error> {
        self.typed_with(request, parse, not_2xx)
    }

    /// [`typed`](Self::typed) with the route's own reading of non-2xx
    /// statuses.
    pub(crate) fn typed_with<T>(
        &self,
        request: RawRequest,
        parse: fn(&[u8]) -> Result<T, magma_protocol::Error>,
        failed: fn(HttpStatus) -> ErrorKind,
    ) -> Result<T, Error> {
        let method = request.method.clone();
        let url = self.url(&request.path);
        let body = self.body_of(request, failed)?;
        parse(&body).map_err(|e| Error::new(ErrorKind::InvalidBody(e)).at(&method, &url))
    }

    /// Executes and requires 2xx: the body, else the error `failed` makes of
    /// the status.
    fn body_of(
        &self,
        request: RawRequest,
        failed: fn(HttpStatus) -> ErrorKind,
    ) -> Result<Bytes, Error> {
        let method = request.method.clone();
        let url = self.url(&request.path);
        let response = self.execute(request)?;
        let (status, headers, body) = response.into_parts();
        if !status.is_success() {
            let kind = failed(HttpStatus::new(status, headers, body));
            return Err(Error::new(kind).at(&method, &url));
        }
        Ok(body)
    }
}

/// How most routes read a non-2xx status.
fn not_2xx(s: HttpStatus) -> ErrorKind {
    match s.status() {
        StatusCode::SERVICE_UNAVAILABLE => ErrorKind::NotReady(s),
        StatusCode::GATEWAY_TIMEOUT => ErrorKind::InferenceTimeout(s),
        _ => ErrorKind::Status(s),
    }
}

#[cfg(test)]
mod tests;
