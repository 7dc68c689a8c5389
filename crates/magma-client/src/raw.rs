//! The low-level call: any method, path, headers and body; status, headers
//! and body back, with the client's timeouts and size limit.

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use magma_protocol::Json;

/// A request as sent by [`Client::execute`](crate::Client::execute): nothing
/// is added but `Host`, `Content-Length` and, if absent, the client's
/// `User-Agent`. Used by tools that need to send what the typed methods
/// never would (invalid bodies, unknown paths, other methods).
///
/// ```
/// use magma_client::RawRequest;
/// use magma_client::http::{Method, header::CONTENT_TYPE, HeaderValue};
///
/// let req = RawRequest::new(Method::POST, "/v1/responses")
///     .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
///     .body(r#"{"request_id":"","inputs":[]}"#);
/// assert_eq!(req.path(), "/v1/responses");
/// ```
#[derive(Debug, Clone)]
pub struct RawRequest {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) timeout: Option<Duration>,
}

impl RawRequest {
    /// A request for `path`, which starts with `/` and is appended to the
    /// base URL (after its path prefix). It may carry a query string.
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        RawRequest {
            method,
            path: path.into(),
            headers: HeaderMap::new(),
            body: Bytes::new(),
            timeout: None,
        }
    }

    /// A `GET` for `path`.
    pub fn get(path: impl Into<String>) -> Self {
        RawRequest::new(Method::GET, path)
    }

    /// A `POST` for `path` (no body yet).
    pub fn post(path: impl Into<String>) -> Self {
        RawRequest::new(Method::POST, path)
    }

    /// Adds a header (repeated names are kept).
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.append(name, value);
        self
    }

    /// Sets the body, sent as is with its `Content-Length`.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body and `Content-Type: application/json`.
    pub fn json(mut self, body: impl Into<Bytes>) -> Self {
        self.headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        self.body = body.into();
        self
    }

    /// Overrides the client's request timeout for this call.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The path (after the base URL).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The headers to send.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The headers to send, to change.
    pub fn headers_mut(&mut self) -> &mut HeaderMap {
        &mut self.headers
    }

    /// The body to send.
    pub fn body_bytes(&self) -> &Bytes {
        &self.body
    }
}

/// An answer of any status, with its whole body (at most the size limit).
#[derive(Debug, Clone)]
pub struct RawResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl RawResponse {
    pub(crate) fn new(status: StatusCode, headers: HeaderMap, body: Bytes) -> Self {
        RawResponse {
            status,
            headers,
            body,
        }
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body, owned.
    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// The body parsed as JSON, as the reference's `json.loads` would (finite
    /// numbers only).
    pub fn json(&self) -> Result<Json, magma_protocol::Error> {
        Json::from_slice(&self.body)
    }

    /// The `Content-Type` header, if present and text.
    pub fn content_type(&self) -> Option<&str> {
        self.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn into_parts(self) -> (StatusCode, HeaderMap, Bytes) {
        (self.status, self.headers, self.body)
    }
}
