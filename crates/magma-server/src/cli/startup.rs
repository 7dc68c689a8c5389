//! Start-up work (loading a model) that runs while the server already
//! answers: `/v1/info` at once, `503` on `/health` and `/v1/responses` until
//! the work is done.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use super::{ServerArgs, parse_args_for, serve_program, shutdown_signal};
use crate::coaching::{CoachError, CoachingContext};
use crate::{Agent, AgentInput, AgentRequest, Candidate, Readiness, ReadyFlag, Rejection, Server};
use magma_protocol::coaching::{
    CoachingKind, CoachingSessionConfig, SpecializedCoachingRequest, SpecializedCoachingResponse,
};

/// What `/health` says while the start-up work runs.
const STARTING: &str = "Models are not ready (the agent is starting)";

type StartFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The start-up work, its error type erased.
pub(super) struct Start<A>(Box<dyn FnOnce(Arc<A>) -> StartFuture + Send>);

impl<A: Agent> Start<A> {
    fn new<F, Fut, E>(load: F) -> Self
    where
        F: FnOnce(Arc<A>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        Start(Box::new(move |agent| {
            let work = load(agent);
            Box::pin(async move { work.await.map_err(|e| e.to_string()) })
        }))
    }
}

/// Runs `agent` like [`run`](super::run), with `load` running once the
/// socket is bound: until `load` returns `Ok`, `GET /health` and
/// `POST /v1/responses` answer `503 {"detail": "Models are not ready (the
/// agent is starting)"}` (then the agent's own [`readiness`](Agent::readiness)
/// applies), and `GET /v1/info` answers throughout.
///
/// `load` gets the agent behind an [`Arc`], to fill what it loads into it
/// (a `std::sync::OnceLock` field, say). If it returns `Err` (or panics),
/// the error is logged, the server shuts down gracefully and the program
/// exits with status 1, so that a supervisor sees the failure.
///
/// ```no_run
/// use std::sync::{Arc, OnceLock};
/// use magma_server::{Agent, AgentDecision, AgentInfo, AgentInput, Candidate, Rejection};
///
/// struct Model; // your weights, your provider client, ...
///
/// impl Model {
///     async fn load() -> Result<Model, String> {
///         Ok(Model) // read weights, warm up, connect ...
///     }
/// }
///
/// struct MyAgent {
///     model: OnceLock<Model>,
/// }
///
/// impl Agent for MyAgent {
///     fn info(&self) -> AgentInfo {
///         AgentInfo::new("my-agent", env!("CARGO_PKG_VERSION"))
///     }
///
///     async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
///         // Called only after the loading finished: the server answers 503 before.
///         let Some(_model) = self.model.get() else {
///             return Err(Rejection::new("the model is not loaded"));
///         };
///         Ok((0..input.num_outputs.get())
///             .map(|_| Candidate::new(input.memory.clone(), AgentDecision::say("Hello!")))
///             .collect())
///     }
/// }
///
/// fn main() -> std::process::ExitCode {
///     let agent = MyAgent { model: OnceLock::new() };
///     magma_server::cli::run_loading(agent, |agent: Arc<MyAgent>| async move {
///         let model = Model::load().await?;
///         let _ = agent.model.set(model);
///         Ok::<(), String>(())
///     })
/// }
/// ```
pub fn run_loading<A, F, Fut, E>(agent: A, load: F) -> ExitCode
where
    A: Agent,
    F: FnOnce(Arc<A>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    if let Some(args) = super::export_invocation(&agent.info()) {
        return super::run_export(&agent, &args);
    }
    let args = parse_args_for(&agent.info());
    run_with_loading(agent, args, load)
}

/// Like [`run_loading`], with flags the caller parsed.
pub fn run_with_loading<A, F, Fut, E>(agent: A, args: ServerArgs, load: F) -> ExitCode
where
    A: Agent,
    F: FnOnce(Arc<A>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    serve_program(agent, args, Some(Start::new(load)))
}

/// Serves `agent` behind a start-up gate while `start` runs; shuts down on
/// a signal, or when `start` fails (exit status 1).
pub(super) async fn serve<A: Agent>(server: Server, agent: A, start: Start<A>) -> ExitCode {
    let agent = Arc::new(agent);
    let gate = ReadyFlag::not_ready(STARTING);
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Result<(), String>>();
    let work = (start.0)(Arc::clone(&agent));
    let opened = gate.clone();
    let task = tokio::spawn(async move {
        tracing::info!("start-up: loading; /health answers 503 until it is done");
        let outcome = work.await;
        if outcome.is_ok() {
            opened.set_ready();
            tracing::info!("start-up finished; the agent's own readiness applies");
        }
        let _ = done_tx.send(outcome);
    });
    let failed = Arc::clone(&failure);
    let shutdown = async move {
        let start_failed = async {
            let why = match done_rx.await {
                Ok(Ok(())) => return std::future::pending::<()>().await,
                Ok(Err(e)) => e,
                Err(_) => "the start-up work panicked".to_owned(),
            };
            tracing::error!("start-up failed: {why}; shutting down");
            *failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
        };
        tokio::select! {
            () = shutdown_signal() => {}
            () = start_failed => {}
        }
    };
    server.serve(Gated { agent, gate }, shutdown).await;
    task.abort();
    let failed = failure
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    match failed {
        Some(_) => ExitCode::from(1),
        None => ExitCode::SUCCESS,
    }
}

/// The agent behind the start-up gate.
struct Gated<A> {
    agent: Arc<A>,
    gate: ReadyFlag,
}

impl<A: Agent> Agent for Gated<A> {
    fn info(&self) -> crate::AgentInfo {
        self.agent.info()
    }

    fn readiness(&self) -> Readiness {
        match self.gate.get() {
            Readiness::Ready => self.agent.readiness(),
            starting => starting,
        }
    }

    fn respond(
        &self,
        input: &AgentInput,
    ) -> impl Future<Output = Result<Vec<Candidate>, Rejection>> + Send {
        self.agent.respond(input)
    }

    fn respond_batch(
        &self,
        request: &AgentRequest,
    ) -> impl Future<Output = Result<Vec<Vec<Candidate>>, Rejection>> + Send {
        self.agent.respond_batch(request)
    }

    // The coaching extension passes the gate as it is: an agent served
    // with `run_with_loading` coaches as it would served directly.
    fn coaching_kinds(&self) -> &[CoachingKind] {
        self.agent.coaching_kinds()
    }

    fn coaching_resume(&self) -> bool {
        self.agent.coaching_resume()
    }

    fn open_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> impl Future<Output = Result<(), CoachError>> + Send {
        self.agent.open_coaching_session(run_id, config)
    }

    fn coach(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> impl Future<Output = Result<SpecializedCoachingResponse, CoachError>> + Send {
        self.agent.coach(request, context)
    }

    fn close_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> impl Future<Output = ()> + Send {
        self.agent.close_coaching_session(run_id, config)
    }
}
