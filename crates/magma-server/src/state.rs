//! What every request's handler shares: the agent, the limits of the
//! configuration, the inference slots, the coaching sessions, the memory
//! budget and the metrics.

use std::time::Duration;

use bytes::Bytes;
use magma_protocol::json;
use tokio::sync::Semaphore;

use crate::candidate_errors::ErrorCandidateLog;
use crate::coaching::store::Store;
use crate::config::Config;
use crate::forwarded::TrustedProxy;
use crate::limits;
use crate::reply::Failure;
use crate::routes::Route;

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
    pub(crate) trusted_proxies: Vec<TrustedProxy>,
    /// The OpenAPI document served on `GET {prefix}/openapi.json`.
    pub(crate) openapi: Bytes,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<crate::Metrics>,
    /// The rate limit of the error-candidate warnings.
    pub(crate) error_candidates: ErrorCandidateLog,
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

    /// `true` when every request's latency is recorded whatever the log
    /// level: the metrics are on.
    pub(crate) fn times_requests(&self) -> bool {
        #[cfg(feature = "metrics")]
        {
            self.metrics.is_some()
        }
        #[cfg(not(feature = "metrics"))]
        {
            false
        }
    }

    /// Whether this server answers on `route`: `/metrics` only when it has
    /// a registry.
    pub(crate) fn serves(&self, route: Route) -> bool {
        match route {
            #[cfg(feature = "metrics")]
            Route::Metrics => self.metrics.is_some(),
            _ => true,
        }
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
            error_candidates: ErrorCandidateLog::default(),
        }
    }
}
