//! The [`Agent`] trait and what it returns besides candidates: readiness and
//! rejections.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::task::Poll;

use magma_protocol::coaching::{
    CoachingKind, CoachingSessionConfig, SpecializedCoachingRequest, SpecializedCoachingResponse,
};
use magma_protocol::{AgentInfo, AgentInput, AgentRequest, Candidate};

use crate::coaching::{CoachError, CoachingContext};
use crate::export::Exporter;

/// What an agent author implements: identity, readiness, and answers.
///
/// The server calls these methods; it never lets them write HTTP. It fills
/// `request_id`, `source_id`, `candidate_index` and the order of the
/// candidates itself and checks their number, so an agent cannot send a
/// malformed `200`.
///
/// Implement [`respond`](Agent::respond) to answer one input at a time (the
/// server runs the inputs of a request concurrently), or override
/// [`respond_batch`](Agent::respond_batch) as well to see a whole request at
/// once, for model batching. Methods take `&self` and may run concurrently,
/// across inputs and across requests (up to
/// [`Config::max_concurrent_inferences`](crate::Config::max_concurrent_inferences)):
/// guard mutable model state yourself, e.g. with a `tokio::sync::Mutex`.
///
/// What the server does with each outcome:
///
/// | the agent | the client gets |
/// |---|---|
/// | returns `Ok` with `num_outputs` candidates per input | `200`, the candidates in request order |
/// | returns an error candidate (`Candidate::new(memory, AgentError::new(..))`) | `200`, that candidate has `status: "error"` in its place |
/// | returns `Err(Rejection)` | `422 {"detail": "<your message>"}` |
/// | reports [`Readiness::NotReady`] | `503 {"detail": "<your reason>"}` on `/health` and `/v1/responses` |
/// | returns the wrong number of candidates | `500 {"detail": "..."}` naming the input and both counts |
/// | panics | `500 {"detail": "..."}`; the server keeps serving |
///
/// Inference code that blocks a thread (a CPU-bound model, a blocking client)
/// belongs in `tokio::task::spawn_blocking`, so that `/health` and
/// `/v1/info` keep answering while it runs.
pub trait Agent: Send + Sync + 'static {
    /// Identity and capabilities, served on `GET /v1/info`, whether or not
    /// the agent is ready. Called for every request to that path.
    fn info(&self) -> AgentInfo;

    /// Whether the agent can answer now. While it is not,
    /// `GET /health` and `POST /v1/responses` answer `503` with the reason as
    /// `detail`. The default is always ready; see [`ReadyFlag`] for a model
    /// that loads in the background.
    fn readiness(&self) -> Readiness {
        Readiness::Ready
    }

    /// The agent's dataset exporter, if it has one: what GEN's export
    /// (`python -m magma_gen.launch_export`) runs, locally and without
    /// HTTP, through the `export` subcommand of the binary
    /// [`cli::run`](crate::cli::run) builds (see [`Exporter`]). The default
    /// is none.
    fn exporter(&self) -> Option<&dyn Exporter> {
        None
    }

    /// Answers one input with exactly `input.num_outputs` candidates, in
    /// order (`candidate_index` 0, 1, ...).
    ///
    /// A candidate that fails is an error candidate in its place, carrying
    /// the memory the client should keep (usually `input.memory` unchanged).
    /// `Err` rejects the whole request with `422`: use it for inputs this
    /// agent refuses, not for model failures.
    ///
    /// The server has already checked the request, the
    /// [`max_candidates`](crate::Config::max_candidates) cap and that the
    /// candidates, each carrying the input's memory, fit in
    /// [`max_response_bytes`](crate::Config::max_response_bytes), so
    /// `num_outputs` fits in memory. An answer that still turns out larger
    /// than that limit (long decisions, grown memory) is replaced by a
    /// `500`; an agent that can tell in advance should reject the request
    /// instead ([`RequestContext::max_response_bytes`](crate::RequestContext::max_response_bytes)
    /// gives the limit). Candidates that return the input's memory unchanged
    /// (`input.memory.clone()`) share its text rather than copy it.
    fn respond(
        &self,
        input: &AgentInput,
    ) -> impl Future<Output = Result<Vec<Candidate>, Rejection>> + Send;

    /// Answers a whole request: one list of candidates per input, in request
    /// order, each with that input's `num_outputs` candidates.
    ///
    /// The default runs [`respond`](Agent::respond) for every input
    /// concurrently and returns the first rejection, in input order, if any.
    /// Override it to batch the inputs into one model call; `respond` is then
    /// never called by the server (it may delegate to this method with a
    /// one-input request, or return a rejection).
    fn respond_batch(
        &self,
        request: &AgentRequest,
    ) -> impl Future<Output = Result<Vec<Vec<Candidate>>, Rejection>> + Send {
        async move {
            let answers = join_all(request.inputs().iter().map(|i| self.respond(i))).await;
            answers.into_iter().collect()
        }
    }

    /// The coaching kinds [`coach`](Agent::coach) handles (GEN's repair
    /// loop, `POST /v1/coaching`). The default is none: the agent has no
    /// coach, and `POST /v1/coaching` answers `503`.
    ///
    /// The server advertises exactly these in `/v1/info`
    /// (`specialized_coaching`, and `capabilities.coaching` when there is
    /// at least one), whatever [`info`](Agent::info) says, and answers a
    /// request of another kind with `status: "error"`.
    fn coaching_kinds(&self) -> &[CoachingKind] {
        &[]
    }

    /// Whether [`respond`](Agent::respond) applies the correction payloads
    /// GEN re-injects in `extra_keys.coaching` (at least `replace_say`; see
    /// [`CoachingPayload`](magma_protocol::coaching::CoachingPayload)).
    /// The server advertises it as `coaching_resume` in `/v1/info`. The
    /// default is `false`.
    fn coaching_resume(&self) -> bool {
        false
    }

    /// Accepts a new coaching session (`PUT /v1/coaching/sessions/{run_id}`),
    /// e.g. by connecting to the LLM backends of `config`. `Err` refuses it:
    /// the client gets `503` and the error goes to the server log.
    ///
    /// Called once per session, only for agents with
    /// [`coaching_kinds`](Agent::coaching_kinds): the same configuration
    /// sent again is accepted without asking, a different one is a `409`.
    /// The default accepts every session.
    fn open_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> impl Future<Output = Result<(), CoachError>> + Send {
        let _ = (run_id, config);
        async { Ok(()) }
    }

    /// Answers a coaching request of a kind in
    /// [`coaching_kinds`](Agent::coaching_kinds), for the open session
    /// `context` describes.
    ///
    /// The server checks the answer with
    /// [`validate_request`](SpecializedCoachingResponse::validate_request):
    /// an `Err`, a panic, an answer that does not match the request or the
    /// inference timeout all reach the client as `200` with
    /// `status: "error"` and the reason, as magma-core does. Logs recorded
    /// with [`CoachingContext::log`] come first in the response's `logs`.
    /// Coaching requests take an inference slot
    /// ([`Config::max_concurrent_inferences`](crate::Config::max_concurrent_inferences))
    /// and run concurrently with each other and with inferences.
    ///
    /// The default answers `Err`: implement it together with
    /// `coaching_kinds`.
    fn coach(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> impl Future<Output = Result<SpecializedCoachingResponse, CoachError>> + Send {
        let _ = (request, context);
        async { Err("this agent has no coach".into()) }
    }

    /// Releases a session (`DELETE /v1/coaching/sessions/{run_id}`), after
    /// its requests in flight have finished. The default does nothing.
    fn close_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> impl Future<Output = ()> + Send {
        let _ = (run_id, config);
        async {}
    }
}

impl<A: Agent> Agent for Arc<A> {
    fn info(&self) -> AgentInfo {
        (**self).info()
    }

    fn readiness(&self) -> Readiness {
        (**self).readiness()
    }

    fn respond(
        &self,
        input: &AgentInput,
    ) -> impl Future<Output = Result<Vec<Candidate>, Rejection>> + Send {
        (**self).respond(input)
    }

    fn respond_batch(
        &self,
        request: &AgentRequest,
    ) -> impl Future<Output = Result<Vec<Vec<Candidate>>, Rejection>> + Send {
        (**self).respond_batch(request)
    }

    fn coaching_kinds(&self) -> &[CoachingKind] {
        (**self).coaching_kinds()
    }

    fn coaching_resume(&self) -> bool {
        (**self).coaching_resume()
    }

    fn open_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> impl Future<Output = Result<(), CoachError>> + Send {
        (**self).open_coaching_session(run_id, config)
    }

    fn coach(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> impl Future<Output = Result<SpecializedCoachingResponse, CoachError>> + Send {
        (**self).coach(request, context)
    }

    fn close_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> impl Future<Output = ()> + Send {
        (**self).close_coaching_session(run_id, config)
    }
}

/// Polls every future until all are done; outputs in input order.
async fn join_all<F: Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut slots: Vec<Slot<F>> = futures.map(|f| Slot::Running(Box::pin(f))).collect();
    poll_fn(|cx| {
        let mut pending = false;
        for slot in &mut slots {
            if let Slot::Running(f) = slot {
                match f.as_mut().poll(cx) {
                    Poll::Ready(out) => *slot = Slot::Done(Some(out)),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    slots
        .into_iter()
        .map(|s| match s {
            Slot::Done(Some(out)) => out,
            // poll_fn only returns once every slot is Done.
            Slot::Running(_) | Slot::Done(None) => unreachable!("join_all slot not finished"),
        })
        .collect()
}

enum Slot<F: Future> {
    Running(Pin<Box<F>>),
    Done(Option<F::Output>),
}

/// Whether an agent can answer inferences now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Readiness {
    /// `GET /health` answers `200 {"status":"ready"}`.
    Ready,
    /// `GET /health` and `POST /v1/responses` answer `503` with this reason
    /// as `detail`, e.g. `"Models are not ready"`.
    NotReady(String),
}

impl Readiness {
    /// `true` for [`Readiness::Ready`].
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }
}

/// A shared, cloneable readiness switch for agents whose model loads after
/// the server starts.
///
/// Keep one clone in the agent (return [`get`](ReadyFlag::get) from
/// [`Agent::readiness`]) and hand another to the code that loads the model,
/// which calls [`set_ready`](ReadyFlag::set_ready) when done.
///
/// ```
/// use magma_server::{ReadyFlag, Readiness};
///
/// let flag = ReadyFlag::not_ready("Models are not ready");
/// let loader = flag.clone();
/// assert_eq!(flag.get(), Readiness::NotReady("Models are not ready".into()));
/// loader.set_ready();
/// assert!(flag.get().is_ready());
/// ```
#[derive(Debug, Clone)]
pub struct ReadyFlag(Arc<RwLock<Readiness>>);

impl ReadyFlag {
    /// A flag that starts ready.
    pub fn ready() -> Self {
        ReadyFlag(Arc::new(RwLock::new(Readiness::Ready)))
    }

    /// A flag that starts not ready, with the reason clients will see.
    pub fn not_ready(reason: impl Into<String>) -> Self {
        ReadyFlag(Arc::new(RwLock::new(Readiness::NotReady(reason.into()))))
    }

    /// The current state.
    pub fn get(&self) -> Readiness {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Marks the agent ready, for every clone.
    pub fn set_ready(&self) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Readiness::Ready;
    }

    /// Marks the agent not ready (again), with the reason clients will see.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) =
            Readiness::NotReady(reason.into());
    }
}

impl Default for ReadyFlag {
    /// Ready.
    fn default() -> Self {
        ReadyFlag::ready()
    }
}

/// An agent-specific refusal of a request, answered
/// `422 {"detail": "<detail>"}` (a string, as FastAPI agents send for their
/// own checks).
///
/// For requests the protocol itself forbids, the server already answers the
/// FastAPI list-shaped `422` before the agent is called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Rejection {
    detail: String,
}

impl Rejection {
    /// A rejection with the message clients will see.
    pub fn new(detail: impl Into<String>) -> Self {
        Rejection {
            detail: detail.into(),
        }
    }

    /// The message.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn join_all_keeps_input_order_whatever_finishes_first() {
        let delays = [30u64, 0, 10];
        let futs = delays.iter().enumerate().map(|(i, d)| async move {
            tokio::time::sleep(std::time::Duration::from_millis(*d)).await;
            i
        });
        assert_eq!(join_all(futs).await, vec![0, 1, 2]);
    }

    #[tokio::test]
    async fn join_all_of_nothing_is_empty() {
        let none: Vec<std::future::Ready<u8>> = Vec::new();
        assert!(join_all(none.into_iter()).await.is_empty());
    }

    #[test]
    fn ready_flag_is_shared_between_clones() {
        let a = ReadyFlag::not_ready("loading");
        let b = a.clone();
        assert!(!a.get().is_ready());
        b.set_ready();
        assert!(a.get().is_ready());
        a.set_not_ready("reloading");
        assert_eq!(b.get(), Readiness::NotReady("reloading".into()));
    }
}
