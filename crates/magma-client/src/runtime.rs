//! The runtime thread: a tokio current-thread runtime driving one pooled
//! hyper client. Callers send jobs over a channel and block on the reply;
//! the thread ends, and is joined, when the last handle is dropped.

use std::error::Error as StdError;
use std::io;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::mpsc;

use crate::connect::{ConnectFailure, ConnectFailureKind, Connector};
use crate::error::{BoxError, Error, ErrorKind, TransportCause};
use crate::raw::RawResponse;

type Hyper = HyperClient<Connector, Full<Bytes>>;

pub(crate) type Reply = Result<RawResponse, Error>;

/// One call for the runtime thread.
pub(crate) struct Job {
    pub(crate) request: http::Request<Full<Bytes>>,
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) timeout: Duration,
    pub(crate) limit: u64,
    pub(crate) reply: std_mpsc::SyncSender<Reply>,
}

pub(crate) struct PoolOptions {
    pub(crate) idle_timeout: Duration,
    pub(crate) max_idle_per_host: usize,
}

/// Owns the runtime thread. Dropping it closes the job channel, which ends
/// the thread's loop, and joins the thread.
pub(crate) struct Runtime {
    jobs: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    pub(crate) fn start(connector: Connector, pool: PoolOptions) -> Result<Runtime, Error> {
        let (jobs_tx, mut jobs_rx) = mpsc::unbounded_channel::<Job>();
        let (ready_tx, ready_rx) = std_mpsc::sync_channel::<io::Result<()>>(1);
        let thread = std::thread::Builder::new()
            .name("magma-client-runtime".to_owned())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                rt.block_on(async move {
                    let hyper: Hyper = HyperClient::builder(TokioExecutor::new())
                        .pool_timer(TokioTimer::new())
                        .timer(TokioTimer::new())
                        .pool_idle_timeout(pool.idle_timeout)
                        .pool_max_idle_per_host(pool.max_idle_per_host)
                        .build(connector);
                    while let Some(job) = jobs_rx.recv().await {
                        tokio::spawn(run(hyper.clone(), job));
                    }
                });
                // Dropping the runtime here cancels anything still running;
                // nothing is, since every caller holds a handle while waiting.
            })
            .map_err(|e| Error::config(format!("cannot start the runtime thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Runtime {
                jobs: Some(jobs_tx),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(Error::config(format!("cannot build the tokio runtime: {e}")).with_source(e))
            }
            Err(_) => {
                let _ = thread.join();
                Err(Error::new(ErrorKind::RuntimeGone))
            }
        }
    }

    /// Sends a job and blocks until its reply.
    pub(crate) fn call(&self, job: Job, reply: std_mpsc::Receiver<Reply>) -> Reply {
        let (method, url) = (job.method.clone(), job.url.clone());
        let gone = || Error::new(ErrorKind::RuntimeGone).at(&method, &url);
        let Some(jobs) = &self.jobs else {
            return Err(gone());
        };
        if jobs.send(job).is_err() {
            return Err(gone());
        }
        reply.recv().unwrap_or_else(|_| Err(gone()))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            // The last handle is never dropped on the runtime thread itself
            // (jobs hold no handle), but never join ourselves regardless.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

async fn run(hyper: Hyper, job: Job) {
    let Job {
        request,
        method,
        url,
        timeout,
        limit,
        reply,
    } = job;
    let result = match tokio::time::timeout(timeout, exchange(&hyper, request, limit)).await {
        Ok(r) => r,
        Err(_elapsed) => Err(Error::new(ErrorKind::Timeout(timeout))),
    };
    if let Err(e) = &result {
        tracing::debug!(%method, %url, error = %e.kind(), "magma-client call failed");
    }
    // The caller may be gone only if it panicked; nothing to do then.
    let _ = reply.send(result.map_err(|e| e.at(&method, &url)));
}

async fn exchange(
    hyper: &Hyper,
    request: http::Request<Full<Bytes>>,
    limit: u64,
) -> Result<RawResponse, Error> {
    let https = request.uri().scheme_str() == Some("https");
    let response = hyper.request(request).await.map_err(|e| {
        let err: BoxError = e.into();
        if https && closed_without_close_notify(&*err) {
            let why = "the server closed the TLS connection without answering and without \
                       close_notify: it may require a client certificate (mutual TLS; see \
                       ClientBuilder::client_identity_files) or have refused this one";
            return Error::new(ErrorKind::Tls(why.to_owned())).with_source(err);
        }
        classify(err)
    })?;
    let (parts, body) = response.into_parts();
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        // Dropping the body closes the connection without reading the rest.
        return Err(Error::new(ErrorKind::BodyTooLarge { limit }));
    }
    let body = read_body(body, declared, limit).await?;
    Ok(RawResponse::new(parts.status, parts.headers, body))
}

/// Reads a whole body of at most `limit` bytes into one buffer, sized from
/// `Content-Length` when the answer declares it (already checked against the
/// limit), so a body is held once, not as its frames plus a copy. A body
/// that arrives in one frame is kept as it is.
async fn read_body<B>(mut body: B, declared: Option<u64>, limit: u64) -> Result<Bytes, Error>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let mut first: Option<Bytes> = None;
    let mut buf: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| classify(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let held = first.as_ref().map_or(buf.len(), Bytes::len);
        if (held as u64).saturating_add(data.len() as u64) > limit {
            return Err(Error::new(ErrorKind::BodyTooLarge { limit }));
        }
        match first.take() {
            None if buf.is_empty() => first = Some(data),
            None => buf.extend_from_slice(&data),
            Some(head) => {
                let size = declared
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(0)
                    .max(head.len() + data.len());
                buf.reserve_exact(size);
                buf.extend_from_slice(&head);
                buf.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(buf)))
}

/// Finds an error of type `T` in a source chain, looking inside `io::Error`
/// wrappers too (their `source()` skips the wrapped error).
fn find<'a, T: StdError + 'static>(mut e: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    loop {
        if let Some(t) = e.downcast_ref::<T>() {
            return Some(t);
        }
        if let Some(inner) = e.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            if let Some(t) = find::<T>(inner) {
                return Some(t);
            }
        }
        e = e.source()?;
    }
}

/// `true` if rustls saw the TCP connection end without a TLS `close_notify`
/// (an `UnexpectedEof` I/O error): what a server whose TLS stack refuses a
/// client certificate after the handshake (OpenSSL/Python `ssl`, TLS 1.3)
/// does instead of sending an alert.
fn closed_without_close_notify(err: &(dyn StdError + 'static)) -> bool {
    let mut e = Some(err);
    while let Some(cur) = e {
        if let Some(io) = cur.downcast_ref::<io::Error>() {
            if io.kind() == io::ErrorKind::UnexpectedEof && io.to_string().contains("close_notify")
            {
                return true;
            }
        }
        e = cur.source();
    }
    false
}

/// Turns a hyper/connector/body error into the client's error kind.
fn classify(err: BoxError) -> Error {
    let kind = kind_of(&*err);
    Error::new(kind).with_source(err)
}

fn kind_of(err: &(dyn StdError + 'static)) -> ErrorKind {
    if let Some(cf) = find::<ConnectFailure>(err) {
        return match cf.kind {
            ConnectFailureKind::Refused => ErrorKind::ConnectionRefused,
            ConnectFailureKind::Timeout(d) => ErrorKind::ConnectTimeout(d),
            ConnectFailureKind::Tls => ErrorKind::Tls(tls_words(cf)),
            ConnectFailureKind::Other => ErrorKind::Connect,
        };
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = find::<rustls::Error>(err) {
        return ErrorKind::Tls(crate::tls::describe(tls));
    }
    ErrorKind::Transport(transport_cause(err))
}

/// Names what failed on a connection that was made, from hyper's error
/// kinds and the I/O error under them (hyper's body decoder reports a cut
/// body as `UnexpectedEof` and a bad chunk size line as `InvalidData`).
fn transport_cause(err: &(dyn StdError + 'static)) -> TransportCause {
    let io_kind = find::<io::Error>(err).map(io::Error::kind);
    match io_kind {
        Some(io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted) => {
            return TransportCause::ConnectionReset;
        }
        Some(io::ErrorKind::TimedOut) => return TransportCause::TimedOut,
        _ => {}
    }
    if let Some(h) = find::<hyper::Error>(err) {
        // `is_parse_too_large` exists only with hyper's `server` feature;
        // the kind's text is hyper's fixed description of it.
        if h.is_parse() && h.to_string().contains("too large") {
            return TransportCause::HeadTooLarge;
        }
        if h.is_parse() || h.is_parse_status() {
            return TransportCause::MalformedHead;
        }
        if h.is_incomplete_message() {
            return TransportCause::ClosedBeforeAnswer;
        }
    }
    match io_kind {
        Some(io::ErrorKind::UnexpectedEof) => TransportCause::TruncatedBody,
        Some(io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput) => {
            TransportCause::BadChunkedEncoding
        }
        _ => TransportCause::Other,
    }
}

fn tls_words(cf: &ConnectFailure) -> String {
    #[cfg(feature = "tls")]
    if let Some(tls) = cf.source.as_ref().and_then(|e| find::<rustls::Error>(e)) {
        return crate::tls::describe(tls);
    }
    match &cf.source {
        Some(e) if e.kind() == io::ErrorKind::UnexpectedEof => format!(
            "the server closed the connection during the handshake (is it speaking TLS?): {e}"
        ),
        Some(e) => format!("handshake failed: {e}"),
        None => "handshake failed".to_owned(),
    }
}
