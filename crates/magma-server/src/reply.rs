//! What every route answers with: [`Reply`], JSON bodies, and the error
//! answers the routes share (`{"detail": ...}`, `413`, FastAPI's `422`s,
//! `500`, the memory budget's `503`).

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::Full;
use magma_protocol::json;

use crate::limits;
use crate::routes::Route;

/// An answer plus what the access log and the metrics need.
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

    /// The reply of a route (the dispatcher sets it).
    pub(crate) fn at(mut self, route: Route) -> Reply {
        self.route = route;
        self
    }

    pub(crate) fn closing(mut self) -> Reply {
        self.close = true;
        self
    }

    /// The reply carries `n` candidates (for the access log).
    pub(crate) fn with_candidates(mut self, n: usize) -> Reply {
        self.candidates = Some(n);
        self
    }

    #[cfg(feature = "metrics")]
    pub(crate) fn route(&self) -> Route {
        self.route
    }

    /// The response, the candidate count and whether to close.
    pub(crate) fn into_parts(self) -> (Response<Full<Bytes>>, Option<usize>, bool) {
        (self.response, self.candidates, self.close)
    }
}

/// Why an inference was not answered `200` (the metrics' `kind` label).
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

#[cfg(feature = "metrics")]
impl Failure {
    /// Every kind, in the order of their discriminants (the metrics index
    /// their counters by `kind as usize`).
    pub(crate) const ALL: [Failure; 5] = [
        Failure::Timeout,
        Failure::Panic,
        Failure::Miscount,
        Failure::Rejection,
        Failure::Oversized,
    ];

    /// How many there are.
    pub(crate) const COUNT: usize = Failure::ALL.len();
}

pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");

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

pub(crate) fn internal_error() -> Response<Full<Bytes>> {
    detail(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal Server Error: the agent failed unexpectedly; see the server log",
    )
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
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    reply
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

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use super::*;

    #[test]
    fn failure_kinds_are_listed_in_discriminant_order() {
        for (i, kind) in Failure::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i, "{kind:?}");
        }
    }
}
