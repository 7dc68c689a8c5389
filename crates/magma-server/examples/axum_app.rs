//! An axum application that serves a MAGMA agent under `/agent`, next to a
//! route of its own, behind a middleware of its own.
//!
//! Run: cargo run -p magma-rs-server --example axum_app -- 127.0.0.1:8888
//! Then: magma-validate probe http://127.0.0.1:8888/agent
//!       curl -i 127.0.0.1:8888/hello
//!
//! The agent keeps every behaviour and limit of the standalone server
//! (`magma_server::Server`); the connection-level ones (header timeout,
//! connection limit, TLS, graceful shutdown) are axum's to configure here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use magma_server::demo::DemoAgent;
use magma_server::{Config, MagmaService};

/// Requests the middleware has seen; served on `/hello`.
#[derive(Clone, Default)]
pub(crate) struct Counter(Arc<AtomicU64>);

/// The application: `GET /hello` of its own, the agent under `/agent`, and
/// a middleware over both that counts requests and marks each answer with
/// `x-served-by: axum-example`.
pub(crate) fn app(agent_config: Config) -> Result<Router, magma_server::Error> {
    let counter = Counter::default();
    let agent = MagmaService::new(DemoAgent::new(), agent_config)?;
    Ok(Router::new()
        .route("/hello", get(hello))
        .nest_service("/agent", agent)
        .layer(middleware::from_fn_with_state(counter.clone(), mark))
        .with_state(counter))
}

async fn hello(State(counter): State<Counter>) -> String {
    format!(
        "hello from axum; {} requests so far\n",
        counter.0.load(Ordering::Relaxed)
    )
}

async fn mark(State(counter): State<Counter>, request: Request, next: Next) -> Response {
    counter.0.fetch_add(1, Ordering::Relaxed);
    let mut response = next.run(request).await;
    response
        .headers_mut()
        .insert("x-served-by", HeaderValue::from_static("axum-example"));
    response
}

#[allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program reports to the terminal"
)]
#[tokio::main]
async fn main() -> std::process::ExitCode {
    magma_server::cli::init_logging();
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8888".into());
    let app = match app(Config::default()) {
        Ok(app) => app,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match listener.local_addr() {
        Ok(local) => println!("listening on http://{local} (agent under /agent)"),
        Err(e) => eprintln!("error: {e}"),
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        eprintln!("error: {e}");
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::SUCCESS
}
