//! Programs that `cargo xtask bench` runs from a release build of this crate
//! (`magma-bench ...`), so that they are measured optimised:
//!
//! - `floor --port P --response FILE`: the floor of the stack, a bare hyper 1
//!   HTTP/1.1 server on a tokio multi-thread runtime (as `magma-server`'s) that
//!   reads the whole body, runs a syntax-only `serde_json` pass over it
//!   (`IgnoredAny`) and answers 200 with the bytes of FILE (a response of the
//!   same size as `magma-server`'s for that body);
//! - `client --url URL --body FILE --calls N [--new-connection]`:
//!   `magma-client` calling `respond` N times in a row, printing one JSON line
//!   `{"calls":N,"secs":S}`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// `magma-bench`: one helper of `cargo xtask bench`.
#[derive(Debug, clap::Parser)]
#[command(name = "magma-bench", about = "helpers of `cargo xtask bench`")]
pub enum Helper {
    /// The bare-hyper floor server: answers every POST with a fixed body.
    Floor {
        /// Port on 127.0.0.1.
        #[arg(long)]
        port: u16,
        /// The file whose bytes every answer carries.
        #[arg(long)]
        response: PathBuf,
    },
    /// The magma-client loop: `calls` requests of a body file.
    Client {
        /// The agent's base URL.
        #[arg(long)]
        url: String,
        /// The request body file.
        #[arg(long)]
        body: PathBuf,
        /// How many calls.
        #[arg(long, default_value_t = 100)]
        calls: usize,
        /// A new connection for every call.
        #[arg(long)]
        new_connection: bool,
    },
}

/// Runs one helper.
pub fn run(helper: &Helper) -> Result<()> {
    match helper {
        Helper::Floor { port, response } => floor(*port, response.clone()),
        Helper::Client {
            url,
            body,
            calls,
            new_connection,
        } => client(url, body, *calls, *new_connection),
    }
}

fn floor(port: u16, response: PathBuf) -> Result<()> {
    let response = Bytes::from(
        std::fs::read(&response).with_context(|| format!("reading {}", response.display()))?,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let listener = tokio::net::TcpListener::bind(addr).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let response = response.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let response = response.clone();
                    async move { Ok::<_, hyper::Error>(answer(req, response).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

async fn answer(req: Request<Incoming>, response: Bytes) -> Response<Full<Bytes>> {
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return status(StatusCode::BAD_REQUEST),
    };
    if serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() {
        return status(StatusCode::UNPROCESSABLE_ENTITY);
    }
    let mut res = Response::new(Full::new(response));
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    res
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"{}")));
    *res.status_mut() = code;
    res
}

fn client(url: &str, body: &std::path::Path, calls: usize, new_connection: bool) -> Result<()> {
    let text = std::fs::read(body).with_context(|| format!("reading {}", body.display()))?;
    let request = magma_protocol::AgentRequest::from_slice(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", body.display()))?;
    let mut builder = magma_client::Client::builder(url).timeout(Duration::from_secs(60));
    if new_connection {
        builder = builder.pool_max_idle_per_host(0);
    }
    let client = builder.build()?;
    // One call outside the timing: runtime thread, first connection.
    client.respond(&request)?;
    let start = Instant::now();
    for _ in 0..calls {
        client.respond(&request)?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{{\"calls\":{calls},\"secs\":{secs}}}");
    Ok(())
}
