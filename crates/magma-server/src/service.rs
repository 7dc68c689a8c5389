//! The MAGMA routes as a `tower::Service`, for axum and other tower stacks.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Body;

use crate::agent::Agent;
use crate::body::BoxError;
use crate::config::Config;
use crate::error::Error;
use crate::handler::handle;
use crate::state::Shared;

/// The agent's routes (`/health`, `/v1/info`, `/v1/responses`,
/// `/openapi.json`) as a [`tower_service::Service`], to mount in an axum
/// `Router` (or any tower stack) next to your own routes and behind your
/// own middleware.
///
/// It answers exactly as [`Server`](crate::Server) does, from the same
/// handler: the same validation, `422`/`413`/`415`/`504` bodies, body size
/// and body time limits, inference slots, candidate cap, request span and
/// [`RequestContext`](crate::RequestContext). What belongs to the server
/// that accepts the connections is not its part: the header timeout,
/// [`max_connections`](Config::max_connections), TLS and graceful
/// shutdown are the host server's (`axum::serve`, hyper) to configure.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use magma_server::{Config, MagmaService, demo::DemoAgent};
///
/// let agent = MagmaService::new(DemoAgent::new(), Config::default())?;
/// let app = axum::Router::new()
///     .route("/hello", axum::routing::get(|| async { "hello" }))
///     // axum strips the prefix: the agent sees /health, /v1/responses...
///     .nest_service("/agent", agent);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, app).await?;
/// # Ok(()) }
/// ```
///
/// Under `nest_service` leave [`Config::path_prefix`] unset: the router
/// strips its prefix before the service sees the path. Set it instead when
/// the service gets the full path (`Router::fallback_service`, a bare
/// tower stack).
///
/// The access log and [`RequestContext::client_ip`](crate::RequestContext::client_ip)
/// show the client's address when the request carries a
/// [`std::net::SocketAddr`] extension (add one in a middleware; axum's own
/// `ConnectInfo` is a different type).
pub struct MagmaService<A> {
    shared: Arc<Shared<A>>,
}

impl<A: Agent> MagmaService<A> {
    /// The service for `agent` with the limits of `config` (checked as
    /// [`Server::bind`](crate::Server::bind) checks them).
    pub fn new(agent: A, config: Config) -> Result<MagmaService<A>, Error> {
        config.validate()?;
        Ok(MagmaService {
            shared: Arc::new(Shared::new(agent, &config)),
        })
    }
}

impl<A> Clone for MagmaService<A> {
    fn clone(&self) -> Self {
        MagmaService {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<A> fmt::Debug for MagmaService<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MagmaService")
            .field("prefix", &self.shared.prefix)
            .finish_non_exhaustive()
    }
}

impl<A, B> tower_service::Service<Request<B>> for MagmaService<A>
where
    A: Agent,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    /// Always ready: inferences wait for a slot inside the call, so that
    /// `/health` and `/v1/info` never wait behind them.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let peer = req.extensions().get::<SocketAddr>().copied();
            handle(&shared, req, peer).await
        })
    }
}
