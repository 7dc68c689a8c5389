//! What an agent can know about the request it is answering.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;

tokio::task_local! {
    static CURRENT: RequestContext;
}

/// The request an inference belongs to: its ids, the client's address and
/// its `tracing` span.
///
/// The server sets it for the whole call of
/// [`Agent::respond_batch`](crate::Agent::respond_batch), and so for every
/// [`Agent::respond`](crate::Agent::respond) the default `respond_batch`
/// runs; [`RequestContext::current`] reads it from anywhere in that call:
///
/// ```
/// use magma_server::{Agent, AgentDecision, AgentInfo, AgentInput, Candidate, Rejection, RequestContext};
///
/// struct Logged;
///
/// impl Agent for Logged {
///     fn info(&self) -> AgentInfo { AgentInfo::new("logged", "1.0.0") }
///
///     async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
///         // Already inside the request's span: this event carries its request id.
///         tracing::info!(input = input.id, "answering");
///         let id = RequestContext::current().map(|c| c.request_id().to_owned());
///         let say = AgentDecision::say(format!("request {}", id.unwrap_or_default()));
///         Ok(vec![Candidate::new(input.memory.clone(), say); input.num_outputs.get() as usize])
///     }
/// }
/// ```
///
/// Work moved to another task or thread leaves both the span and the
/// context behind; take them along with
/// [`tracing::Instrument::instrument`]`(ctx.span().clone())` and
/// [`RequestContext::scope`].
#[derive(Debug, Clone)]
pub struct RequestContext(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    request_id: String,
    header_id: Option<String>,
    client: Option<IpAddr>,
    span: tracing::Span,
    max_response_bytes: Option<u64>,
}

impl RequestContext {
    pub(crate) fn new(
        request_id: String,
        header_id: Option<String>,
        client: Option<IpAddr>,
        span: tracing::Span,
    ) -> RequestContext {
        RequestContext(Arc::new(Inner {
            request_id,
            header_id,
            client,
            span,
            max_response_bytes: None,
        }))
    }

    /// The server's response-size limit, set before the context is shared.
    pub(crate) fn with_max_response_bytes(mut self, limit: u64) -> RequestContext {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.max_response_bytes = Some(limit);
        }
        self
    }

    /// The largest answer the server sends for this request, in bytes
    /// ([`Config::max_response_bytes`](crate::Config::max_response_bytes));
    /// a longer answer is replaced by a `500`. An agent whose answer would
    /// pass it can reject the request instead, with a message that says why.
    /// `None` outside a server's inference.
    pub fn max_response_bytes(&self) -> Option<u64> {
        self.0.max_response_bytes
    }

    /// The context of the inference this code runs in, or `None` outside
    /// one (in [`Agent::info`](crate::Agent::info), in a spawned task not
    /// given the context with [`scope`](RequestContext::scope)).
    pub fn current() -> Option<RequestContext> {
        CURRENT.try_with(RequestContext::clone).ok()
    }

    /// The body's `request_id` (cut to 128 characters).
    pub fn request_id(&self) -> &str {
        &self.0.request_id
    }

    /// The incoming `X-Request-Id` header, when the client or a proxy sent
    /// one the server accepted (1 to 128 visible ASCII characters); the
    /// response echoes it.
    pub fn x_request_id(&self) -> Option<&str> {
        self.0.header_id.as_deref()
    }

    /// The client's IP address: the connection's peer, or the address a
    /// trusted proxy forwarded ([`Config::trusted_proxies`](crate::Config::trusted_proxies)).
    /// `None` when the server was not told (a [`MagmaService`](crate::MagmaService)
    /// whose requests carry no `SocketAddr` extension).
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.0.client
    }

    /// The request's span (`request`, with `method`, `path`, `request_id`
    /// and `x_request_id`), entered while the agent runs.
    pub fn span(&self) -> &tracing::Span {
        &self.0.span
    }

    /// Runs `future` with this context as [`current`](RequestContext::current),
    /// e.g. in a task the agent spawns.
    pub fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self, future)
    }
}
