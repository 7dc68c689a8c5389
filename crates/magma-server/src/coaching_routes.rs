//! The coaching routes: `PUT`/`DELETE /v1/coaching/sessions/{run_id}` and
//! `POST /v1/coaching`, with the answers of magma-core's
//! `mount_coaching_routes`; and what `/v1/info` advertises of them.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Body;
use magma_protocol::AgentInfo;
use magma_protocol::coaching::{
    CoachingLog, CoachingSessionConfig, CoachingStatus, SpecializedCoachingRequest,
    SpecializedCoachingResponse,
};

use crate::access::{Ids, truncate};
use crate::agent::Agent;
use crate::body::{BoxError, json_body};
use crate::coaching::store::{HoldError, SessionAgent, Unavailable};
use crate::coaching::{CoachError, CoachingContext, OpenError};
use crate::context::RequestContext;
use crate::limits::{self, within};
use crate::reply::{Reply, bytes_response, detail, internal_error, invalid, over_budget};
use crate::state::Shared;
use crate::unwind::{catch_unwind, panic_message};

/// The `detail` of a `409`, as magma-core words it.
const CONFLICT: &str = "Coaching session already has a different configuration or is closing";
/// The `detail` of a `503` for a refused session, as magma-core words it.
const REFUSED: &str =
    "Unable to initialize LLM coaching; verify backend connectivity from the agent";
/// The `detail` of a `404` on `POST /v1/coaching`, as magma-core words it.
const UNKNOWN: &str = "Unknown or closing coaching session";
/// The `detail` of a `503` on `POST /v1/coaching` without a coach.
const UNAVAILABLE: &str = "Specialized coaching is unavailable";

/// The agent's `/v1/info`, with the coaching fields set from what it
/// implements: `specialized_coaching` = its coaching kinds,
/// `coaching_resume`, and `capabilities.coaching` (`true` with a coach;
/// `false`, if the agent wrote it, without one).
pub(crate) fn advertised<A: Agent>(agent: &A) -> AgentInfo {
    let mut info = agent.info();
    let kinds = agent.coaching_kinds();
    info.specialized_coaching = kinds.iter().map(|k| k.as_str().to_owned()).collect();
    info.coaching_resume = agent.coaching_resume();
    if !kinds.is_empty() || info.capabilities.contains_key("coaching") {
        info.capabilities.insert("coaching", !kinds.is_empty());
    }
    info
}

/// An empty `204`.
fn no_content() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

/// The run id of a session path's last segment, percent-decoded; `None`
/// (a `404`) when it is not UTF-8 once decoded.
pub(crate) fn run_id(segment: &str) -> Option<String> {
    magma_protocol::routes::decode_run_id(segment)
}

/// The agent as the session store reaches it: panics caught, and nothing
/// asked of an agent without a coach (magma-core keeps a session without a
/// worker: `POST` then answers 503).
struct StoreAgent<'a, A> {
    agent: &'a A,
    coach: bool,
}

impl<'a, A: Agent> StoreAgent<'a, A> {
    fn of(shared: &'a Shared<A>) -> Self {
        StoreAgent {
            agent: &shared.agent,
            coach: !shared.agent.coaching_kinds().is_empty(),
        }
    }
}

impl<A: Agent> SessionAgent for StoreAgent<'_, A> {
    async fn open(
        &self,
        run_id: Arc<str>,
        config: Arc<CoachingSessionConfig>,
    ) -> Result<(), CoachError> {
        if !self.coach {
            return Ok(());
        }
        let open = self.agent.open_coaching_session(&run_id, &config);
        match catch_unwind(Box::pin(open)).await {
            Ok(result) => result,
            Err(payload) => Err(format!(
                "the agent panicked opening the session: {}",
                panic_message(&*payload)
            )
            .into()),
        }
    }

    async fn close(&self, run_id: Arc<str>, config: Arc<CoachingSessionConfig>) {
        if !self.coach {
            return;
        }
        let closed = self.agent.close_coaching_session(&run_id, &config);
        if let Err(payload) = catch_unwind(Box::pin(closed)).await {
            tracing::error!(
                run_id = %run_id,
                panic = panic_message(&*payload),
                "the agent panicked closing a coaching session; it is removed"
            );
        }
    }
}

/// Closes the sessions idle for the idle timeout, as a `DELETE` would: the
/// agent releases each; each is logged and counted. With the shared store,
/// also gives the agent back its state of sessions closed on other
/// replicas. Run before every coaching route and every few seconds by the
/// server.
pub(crate) async fn expire_idle<A: Agent>(shared: &Shared<A>) {
    let swept = shared.sessions.sweep(std::time::Instant::now()).await;
    for e in &swept.expired {
        tracing::warn!(
            run_id = %e.run_id,
            idle_secs = e.idle.as_secs(),
            "coaching session closed after going without a request for the idle timeout \
             (--coaching-session-idle-secs); its run never sent DELETE"
        );
        #[cfg(feature = "metrics")]
        if let Some(m) = &shared.metrics {
            m.coaching_session_expired();
        }
    }
    let agent = StoreAgent::of(shared);
    for (run_id, config) in swept.release {
        agent.close(run_id, config).await;
    }
}

/// The `503` of a coaching route while the shared store cannot be reached.
fn store_unavailable(why: &Unavailable) -> Reply {
    let msg = format!(
        "Service Unavailable: the coaching session store (--coaching-store) cannot be reached \
         ({}); coaching answers 503 until it is back, inference is unaffected; retry",
        why.0
    );
    Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, &msg))
}

/// The run id of a session route's `segment`, after closing the idle
/// sessions (every session route does both first); `Err` is the `404` of a
/// run id that is not UTF-8.
async fn session_run_id<A: Agent>(shared: &Shared<A>, segment: &str) -> Result<String, Reply> {
    expire_idle(shared).await;
    run_id(segment).ok_or_else(|| Reply::new(detail(StatusCode::NOT_FOUND, "Not Found")))
}

/// `DELETE /v1/coaching/sessions/{segment}`: `204` once the session's
/// requests in flight have finished and the agent has released it.
pub(crate) async fn close_session<A: Agent>(shared: &Shared<A>, segment: &str) -> Reply {
    let run_id = match session_run_id(shared, segment).await {
        Ok(run_id) => run_id,
        Err(reply) => return reply,
    };
    match shared
        .sessions
        .close(&run_id, &StoreAgent::of(shared))
        .await
    {
        Ok(()) => Reply::new(no_content()),
        Err(why) => store_unavailable(&why),
    }
}

/// `PUT /v1/coaching/sessions/{segment}` with a `CoachingSessionConfig`.
pub(crate) async fn open_session<A, B>(shared: &Shared<A>, req: Request<B>, segment: &str) -> Reply
where
    A: Agent,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let run_id = match session_run_id(shared, segment).await {
        Ok(run_id) => run_id,
        Err(reply) => return reply,
    };
    let agent = StoreAgent::of(shared);
    // The share of the body budget is held until the request is answered.
    let (bytes, share) = match json_body(shared, req).await {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    let config = match limits::parse_body(bytes, CoachingSessionConfig::from_slice).await {
        Some(Ok(config)) => config,
        None => return Reply::new(internal_error()),
        Some(Err(e)) => {
            tracing::debug!(error = %e, "invalid CoachingSessionConfig; answered 422");
            return invalid(e, share, &shared.body_budget).await;
        }
    };
    let opened = shared.sessions.open(&run_id, config, &agent).await;
    match opened {
        Ok(()) => Reply::new(no_content()),
        Err(OpenError::Unavailable(why)) => store_unavailable(&why),
        Err(OpenError::Conflict) => Reply::new(detail(StatusCode::CONFLICT, CONFLICT)),
        Err(OpenError::OverBudget {
            needed,
            held,
            budget,
        }) => {
            tracing::warn!(
                run_id = %run_id,
                needed,
                held,
                budget,
                "coaching session byte budget reached; answered 503"
            );
            let msg = format!(
                "Service Unavailable: this session's configuration takes {needed} bytes and the \
                 open coaching sessions hold {held} of their {budget}-byte budget \
                 (--max-coaching-session-bytes); close finished sessions (DELETE) and retry"
            );
            Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, &msg))
        }
        Err(OpenError::Full(max)) => {
            tracing::warn!(max, "coaching session limit reached; answered 503");
            let msg = format!(
                "Service Unavailable: this server keeps at most {max} coaching sessions open \
                 (--max-coaching-sessions); close one (DELETE) and retry"
            );
            Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, &msg))
        }
        Err(OpenError::Refused(e)) => {
            tracing::warn!(run_id = %run_id, error = %e, "the agent refused a coaching session; answered 503");
            Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, REFUSED))
        }
    }
}

/// `POST /v1/coaching`.
pub(crate) async fn coaching<A, B>(shared: &Shared<A>, req: Request<B>, ids: &Ids) -> Reply
where
    A: Agent,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    // The share of the body budget is held until the request is answered.
    let (bytes, mut share) = match json_body(shared, req).await {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    let request = match limits::parse_body(bytes, SpecializedCoachingRequest::from_slice).await {
        Some(Ok(request)) => request,
        None => return Reply::new(internal_error()),
        Some(Err(e)) => {
            tracing::debug!(error = %e, "invalid SpecializedCoachingRequest; answered 422");
            return invalid(e, share, &shared.body_budget).await;
        }
    };
    let id = truncate(request.request_id().to_owned());
    ids.set_body(&id);
    expire_idle(shared).await;
    let held = match shared
        .sessions
        .hold(request.run_id(), &StoreAgent::of(shared))
        .await
    {
        Ok(Some(held)) => held,
        Ok(None) => return Reply::new(detail(StatusCode::NOT_FOUND, UNKNOWN)),
        Err(HoldError::Unavailable(why)) => return store_unavailable(&why),
        Err(HoldError::Refused(e)) => {
            tracing::warn!(run_id = %request.run_id(), error = %e, "the agent refused to prepare a stored coaching session; answered 503");
            return Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, REFUSED));
        }
        Err(HoldError::OverBudget {
            needed,
            held,
            budget,
        }) => {
            let msg = format!(
                "Service Unavailable: this session's configuration takes {needed} bytes and the \
                 sessions in use on this replica hold {held} of their {budget}-byte budget \
                 (--max-coaching-session-bytes); retry"
            );
            return Reply::new(detail(StatusCode::SERVICE_UNAVAILABLE, &msg));
        }
    };
    let kinds = shared.agent.coaching_kinds();
    if kinds.is_empty() {
        let reason = shared.agent.info().coaching_unavailable_reason;
        let reason = reason.filter(|r| !r.is_empty());
        return Reply::new(detail(
            StatusCode::SERVICE_UNAVAILABLE,
            reason.as_deref().unwrap_or(UNAVAILABLE),
        ));
    }
    let kind = request.kind();
    let context = CoachingContext::new(Arc::clone(held.run_id()), Arc::clone(held.config()), kind);
    let answer = if kinds.contains(&kind) {
        coach(shared, &request, &context, ids, id).await
    } else {
        Err(format!(
            "this agent does not coach `{}` requests (it handles: {})",
            kind.as_str(),
            kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let response = match answer {
        Ok(response) => response,
        Err(reason) => match SpecializedCoachingResponse::error(request.request_id(), reason) {
            Ok(response) => response,
            Err(e) => {
                tracing::error!(error = %e, "could not build a coaching error response; answered 500");
                return Reply::new(internal_error());
            }
        },
    };
    let response = with_logs(&request, &context, response);
    drop(held);
    let body = response.to_json_string();
    drop(response);
    if body.len() as u64 > shared.max_response_bytes {
        tracing::error!(
            bytes = body.len(),
            limit = shared.max_response_bytes,
            "the coach's answer is larger than the response limit; answered 500"
        );
        let msg = format!(
            "Internal Server Error: the coach's answer is larger than the server's response \
             limit of {} bytes ({} bytes)",
            shared.max_response_bytes,
            body.len()
        );
        return Reply::new(detail(StatusCode::INTERNAL_SERVER_ERROR, &msg));
    }
    // The answer's text joins the request's share of the memory budget and
    // stays counted until hyper has written it (or dropped it with its
    // connection), as an inference answer does.
    drop(request);
    if !share.take(body.len()).await {
        return over_budget(&shared.body_budget);
    }
    Reply::new(bytes_response(
        StatusCode::OK,
        limits::held_text(body, share),
    ))
}

/// Runs the agent's coach on `request`: its answer once it passes
/// `validate_request`, or the reason of a `status: "error"` answer.
async fn coach<A: Agent>(
    shared: &Shared<A>,
    request: &SpecializedCoachingRequest,
    context: &CoachingContext,
    ids: &Ids,
    id: String,
) -> Result<SpecializedCoachingResponse, String> {
    let scope = RequestContext::new(id, ids.header.clone(), ids.client, ids.span.clone());
    let run = std::pin::pin!(async {
        // The semaphore lives as long as `shared` and is never closed.
        let _slot = shared.inferences.acquire().await;
        catch_unwind(Box::pin(
            scope.clone().scope(shared.agent.coach(request, context)),
        ))
        .await
    });
    let outcome = match shared.inference_timeout {
        None => run.await,
        Some(limit) => match within(limit, run).await {
            Ok(outcome) => outcome,
            Err(()) => {
                tracing::warn!(request_id = ?scope.request_id(), "coaching timed out; answered status error");
                return Err(format!(
                    "the coach did not finish within the server's inference timeout of {} s",
                    limit.as_secs_f64()
                ));
            }
        },
    };
    match outcome {
        Ok(Ok(response)) => match response.validate_request(request) {
            Ok(()) => Ok(response),
            Err(e) => {
                tracing::warn!(error = %e, "the coach's answer does not match its request; answered status error");
                Err(e.to_string())
            }
        },
        Ok(Err(e)) => {
            let reason = e.to_string();
            Err(match reason.is_empty() {
                true => "the coach failed".to_owned(),
                false => reason,
            })
        }
        Err(payload) => {
            let message = panic_message(&*payload);
            tracing::error!(request_id = ?scope.request_id(), panic = message, "the coach panicked; answered status error");
            Err(format!("the coach panicked: {message}"))
        }
    }
}

/// `response` with the captured logs first and, when the session captures
/// logs and the status is not `corrected` or nothing was captured,
/// magma-core's Markdown summary among them.
fn with_logs(
    request: &SpecializedCoachingRequest,
    context: &CoachingContext,
    response: SpecializedCoachingResponse,
) -> SpecializedCoachingResponse {
    let mut logs = context.take_captured();
    if context.captures() && (response.status() != CoachingStatus::Corrected || logs.is_empty()) {
        let content = format!(
            "# Coaching {}\n\nRun: {}\nRequest: {}\nNode: {}\n\n{}\n",
            response.status().as_str(),
            request.run_id(),
            request.request_id(),
            request.target_step_id(),
            response.reason().unwrap_or("Completed"),
        );
        if let Ok(log) = CoachingLog::new(request.kind().as_str(), content) {
            logs.push(log);
        }
    }
    if logs.is_empty() {
        return response;
    }
    logs.extend(response.logs().iter().cloned());
    response.with_logs(logs)
}
