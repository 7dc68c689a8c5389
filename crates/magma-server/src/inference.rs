//! `POST /v1/responses`: the request read and checked, the agent run within
//! its slot and time limit, and its candidates assembled into an answer
//! that cannot be a malformed `200`.

use std::future::Future;
use std::time::Instant;

use bytes::Bytes;
use http::{Request, StatusCode};
use hyper::body::Body;
use magma_protocol::{AgentRequest, AgentResponse};

use crate::access::{Ids, truncate};
use crate::agent::{Agent, Readiness};
use crate::body::{BoxError, json_head, read_json};
use crate::context::RequestContext;
use crate::limits::{self, within};
use crate::reply::{
    Failure, Reply, bytes_response, detail, internal_error, invalid, json_response, over_budget,
};
use crate::state::Shared;
use crate::unwind::{catch_unwind, panic_message};

/// `POST /v1/responses`: what the request's head decides, at once; the
/// rest in the future returned, which holds the body, not the request.
/// `json`: its content type is JSON (the dispatcher read the headers).
pub(crate) fn responses<'a, A, B>(
    shared: &'a Shared<A>,
    req: Request<B>,
    json: bool,
    ids: &'a Ids,
) -> impl Future<Output = Reply> + Send + 'a
where
    A: Agent,
    B: Body<Data = Bytes> + Send + 'a,
    B::Error: Into<BoxError>,
{
    let head = json_head(shared, req, json);
    async move {
        match head {
            Ok(body) => answer(shared, body, ids).await,
            Err(reply) => *reply,
        }
    }
}

/// The rest of [`responses`]: the body read and parsed, the agent asked,
/// the answer written.
async fn answer<A, B>(shared: &Shared<A>, body: B, ids: &Ids) -> Reply
where
    A: Agent,
    B: Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    // The share of the body budget is held until the request is answered.
    let (bytes, share) = match read_json(shared, body).await {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    let request = match limits::parse_body(bytes, AgentRequest::from_slice).await {
        Some(Ok(request)) => request,
        Some(Err(e)) => {
            tracing::debug!(error = %e, "invalid AgentRequest; answered 422");
            // Boxed: see the dispatcher (`handler::route`).
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
        return Reply::new(json_response(StatusCode::OK, "[]".into())).with_candidates(0);
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
    let inference = std::pin::pin!(async {
        #[cfg(feature = "metrics")]
        let waiting = shared.metrics.as_ref().map(crate::Metrics::waiting);
        // The semaphore lives as long as `shared` and is never closed. A
        // free slot is taken without the waiting future (its queue entry).
        let _slot = match shared.inferences.try_acquire() {
            Ok(slot) => Some(slot),
            Err(_) => shared.inferences.acquire().await.ok(),
        };
        #[cfg(feature = "metrics")]
        let _running = {
            drop(waiting);
            shared.metrics.as_ref().map(crate::Metrics::running)
        };
        // Pinned in this future: the agent's future is small next to the
        // route's, and a box of its own would be one more allocation.
        let answering = std::pin::pin!(context.clone().scope(shared.agent.respond_batch(&request)));
        catch_unwind(answering).await
    });
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
    // The answer is written straight from the agent's lists: the counts
    // checked as `AgentResponse::assemble` checks them, no output built.
    if let Err(e) = AgentResponse::check_counts(&request, &per_input) {
        shared.failed(Failure::Miscount);
        tracing::error!(
            request_id = ?id,
            error = %e,
            "the agent returned the wrong number of candidates; answered 500"
        );
        let msg = format!(
            "Internal Server Error: the agent returned the wrong number of candidates ({e})"
        );
        return Reply::new(detail(StatusCode::INTERNAL_SERVER_ERROR, &msg));
    }
    let n: usize = per_input.iter().map(Vec::len).sum();
    let by_code = crate::candidate_errors::by_code(&per_input);
    #[cfg(feature = "metrics")]
    if let Some(m) = &shared.metrics {
        let errors: u64 = by_code.iter().map(|c| c.count).sum();
        m.candidates(n as u64 - errors, errors);
        for c in &by_code {
            m.error_candidates(c.code, c.count);
        }
    }
    // The clock is read only for an answer with error candidates.
    if !by_code.is_empty() {
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
    }
    let limit = shared.max_response_bytes;
    match limits::answer_body(&request, per_input, limit, answer_share).await {
        Ok(body) => Reply::new(bytes_response(StatusCode::OK, body)).with_candidates(n),
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
