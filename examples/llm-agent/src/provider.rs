//! The model provider: any server that speaks OpenAI's chat completions
//! (`POST {base}/chat/completions`, `GET {base}/models`), as vLLM,
//! llama.cpp's server, Ollama and hosted providers do.
//!
//! Calls are blocking (magma-client) and run on a plain thread each, so the
//! server's runtime never waits on a provider.

use std::time::Duration;

use magma_client::http::StatusCode;
use magma_client::http::header::{
    AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER,
};
use magma_client::{Client, RawRequest, RawResponse};

/// Longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// A provider endpoint and how to call it.
#[derive(Debug, Clone)]
pub(crate) struct Provider {
    client: Client,
    authorization: Option<HeaderValue>,
    /// Further headers of every call (a coaching backend's `headers`).
    headers: Vec<(HeaderName, HeaderValue)>,
    max_retries: u32,
    backoff: Duration,
}

/// Why a provider call gave no usable body. `code` is the error candidate's
/// stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// One call to `/chat/completions`, retries included.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// The body of the successful answer, or why there is none.
    pub(crate) outcome: Result<String, Failure>,
    /// Attempts made (1 without retries).
    pub(crate) attempts: u32,
    /// The status of the last answer, if one came.
    pub(crate) http_status: Option<u16>,
    /// The body of the last answer, as text (lossy), if one came.
    pub(crate) raw: String,
}

/// What `GET /models` says about starting.
#[derive(Debug)]
pub(crate) enum Reachability {
    /// Listed (or the server has no model list): serve.
    Ready(String),
    /// The provider refuses us (401, 403): waiting will not help.
    Refused(String),
    /// Not yet (nothing listens, 5xx, 503 while a model loads): try again.
    NotYet(String),
}

impl Provider {
    /// A provider at `base_url` (e.g. `http://127.0.0.1:8000/v1`).
    pub(crate) fn new(
        base_url: &str,
        api_key: Option<&str>,
        timeout: Duration,
        max_retries: u32,
        backoff: Duration,
    ) -> Result<Provider, String> {
        let client = Client::builder(base_url)
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .max_response_bytes(16 << 20)
            .user_agent(concat!("magma-llm-agent/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("provider base URL {base_url:?}: {e}"))?;
        let authorization = match api_key.filter(|k| !k.is_empty()) {
            None => None,
            Some(key) => Some(
                HeaderValue::from_str(&format!("Bearer {key}"))
                    .map_err(|_| "the API key holds characters a header cannot carry")?,
            ),
        };
        Ok(Provider {
            client,
            authorization,
            headers: Vec::new(),
            max_retries,
            backoff,
        })
    }

    pub(crate) fn base_url(&self) -> &str {
        self.client.base_url()
    }

    /// The same provider, sending `headers` with every call too.
    pub(crate) fn with_headers(mut self, headers: &[(&str, &str)]) -> Result<Provider, String> {
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("header name {name:?} is not valid"))?;
            // Every call is JSON and says so already.
            if name == CONTENT_TYPE {
                continue;
            }
            let value = HeaderValue::from_str(value).map_err(|_| {
                format!("header {name}: the value holds characters a header cannot carry")
            })?;
            self.headers.push((name, value));
        }
        Ok(self)
    }

    fn authorized(&self, mut request: RawRequest) -> RawRequest {
        for (name, value) in &self.headers {
            request = request.header(name.clone(), value.clone());
        }
        if let Some(value) = &self.authorization {
            request = request.header(AUTHORIZATION, value.clone());
        }
        request
    }

    /// `GET /models`, once. Blocking.
    pub(crate) fn reachability(&self, model: &str) -> Reachability {
        let answer = match self
            .client
            .execute(self.authorized(RawRequest::get("/models")))
        {
            Ok(answer) => answer,
            Err(e) => return Reachability::NotYet(e.to_string()),
        };
        let status = answer.status();
        match status {
            s if s.is_success() => {
                let body = String::from_utf8_lossy(answer.body());
                if body.contains(&format!("\"{model}\"")) {
                    Reachability::Ready(format!("{model} is listed"))
                } else {
                    Reachability::Ready(format!(
                        "{model} is not in the provider's model list; calls may fail"
                    ))
                }
            }
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => Reachability::Ready(
                "the provider has no model list; its first answers will tell".to_owned(),
            ),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Reachability::Refused(format!(
                "the provider refused the API key ({status}): {}",
                excerpt(answer.body())
            )),
            _ => Reachability::NotYet(format!("{status}: {}", excerpt(answer.body()))),
        }
    }

    /// `POST /chat/completions` with `payload`, retrying transport
    /// failures, 429 and 5xx up to the configured number of times, with an
    /// exponential pause (or the provider's `Retry-After`, at most 8 s).
    /// Blocking.
    pub(crate) fn complete(&self, payload: &str) -> Exchange {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let request =
                self.authorized(RawRequest::post("/chat/completions").json(payload.to_owned()));
            let (failure, retry_after, status, raw) = match self.client.execute(request) {
                Err(e) => (
                    Failure::new("transport_error", e.to_string()),
                    None,
                    None,
                    String::new(),
                ),
                Ok(answer) => {
                    let raw = String::from_utf8_lossy(answer.body()).into_owned();
                    let status = answer.status();
                    if status.is_success() {
                        return Exchange {
                            outcome: Ok(raw.clone()),
                            attempts,
                            http_status: Some(status.as_u16()),
                            raw,
                        };
                    }
                    (
                        status_failure(&answer),
                        retry_after(&answer),
                        Some(status),
                        raw,
                    )
                }
            };
            let transient =
                status.is_none_or(|s| s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error());
            if !transient || attempts > self.max_retries {
                return Exchange {
                    outcome: Err(failure),
                    attempts,
                    http_status: status.map(|s| s.as_u16()),
                    raw,
                };
            }
            let exponential = self
                .backoff
                .saturating_mul(1 << (attempts - 1).min(16))
                .min(MAX_BACKOFF);
            let pause = retry_after.unwrap_or(exponential).min(MAX_BACKOFF);
            tracing::debug!(
                attempt = attempts,
                "provider call failed ({}); retrying in {pause:?}",
                failure.message
            );
            std::thread::sleep(pause);
        }
    }
}

fn status_failure(answer: &RawResponse) -> Failure {
    let status = answer.status();
    let code = if status == StatusCode::TOO_MANY_REQUESTS {
        "rate_limited"
    } else {
        "provider_status"
    };
    Failure::new(
        code,
        format!("the provider answered {status}: {}", excerpt(answer.body())),
    )
}

fn retry_after(answer: &RawResponse) -> Option<Duration> {
    let secs: u64 = answer
        .headers()
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs))
}

/// The start of a body, for messages: at most 300 characters.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}
