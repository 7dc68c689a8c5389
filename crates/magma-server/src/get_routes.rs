//! The routes that only read: `GET /health` (readiness), `GET /v1/info`
//! (what the agent is and does), `GET /openapi.json` and, with a registry,
//! `GET /metrics`.

use http::header::CONTENT_TYPE;
use http::{Response, StatusCode};
use http_body_util::Full;
use magma_protocol::AgentHealth;

use crate::agent::{Agent, Readiness};
use crate::coaching_routes::advertised;
use crate::reply::{JSON, Reply, detail, json_response};
use crate::state::Shared;

/// `GET /health`: `200 {"status":"ready"}`, or `503` with the reason.
pub(crate) fn health<A: Agent>(shared: &Shared<A>) -> Reply {
    Reply::new(match shared.agent.readiness() {
        Readiness::Ready => json_response(StatusCode::OK, AgentHealth.to_json_string()),
        Readiness::NotReady(reason) => detail(StatusCode::SERVICE_UNAVAILABLE, &reason),
    })
}

/// `GET /v1/info`: the agent's, with what it advertises of coaching.
pub(crate) fn info<A: Agent>(shared: &Shared<A>) -> Reply {
    Reply::new(json_response(
        StatusCode::OK,
        advertised(&shared.agent).to_json_string(),
    ))
}

/// `GET /openapi.json`: the document, built once.
pub(crate) fn openapi<A>(shared: &Shared<A>) -> Reply {
    let mut r = Response::new(Full::new(shared.openapi.clone()));
    r.headers_mut().insert(CONTENT_TYPE, JSON);
    Reply::new(r)
}

/// `GET /metrics`: the Prometheus text of the server's registry.
#[cfg(feature = "metrics")]
pub(crate) fn metrics<A>(shared: &Shared<A>) -> Reply {
    let text = shared
        .metrics
        .as_ref()
        .map(|m| m.render())
        .unwrap_or_default();
    let mut r = Response::new(Full::new(bytes::Bytes::from(text)));
    r.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Reply::new(r)
}
