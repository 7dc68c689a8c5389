//! Listening, connections and graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use http::{Request, Version};
use hyper::body::Incoming;
use tokio::time::Instant;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::agent::Agent;
use crate::config::Config;
use crate::error::Error;
use crate::handler::handle;
use crate::state::Shared;

/// HTTP/2 keep-alive ping interval, and how long to wait for the answer.
const H2_KEEP_ALIVE: Duration = Duration::from_secs(20);
/// Largest HTTP/1.1 read buffer of a connection, so the longest request
/// head (hyper answers `431` past it): hyper's default (about 400 kB) made
/// 512 unfinished heads cost 200 MiB; at 64 KiB they cost 32 MiB. Bodies
/// are read through it in pieces of at most this size.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// HTTP/2 flow-control windows, per stream and per connection: what a peer
/// may send before the handler reads it (and counts it against the body
/// budget). hyper's default (1 MiB per connection) made 512 connections
/// able to park 512 MiB outside the budget.
pub(crate) const H2_WINDOW: u32 = 128 * 1024;
/// Pause after an accept error that is not about one connection (e.g. out
/// of file descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// A bound listening socket, ready to serve an [`Agent`].
///
/// ```no_run
/// # async fn run(agent: impl magma_server::Agent) -> Result<(), magma_server::Error> {
/// let server = magma_server::Server::bind("127.0.0.1:8080", Default::default()).await?;
/// println!("listening on {}", server.local_addr());
/// // Serve until the future completes; here: forever.
/// server.serve(agent, std::future::pending()).await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    config: Config,
}

impl Server {
    /// Checks `config` and listens on `addr` (`host:port`; port `0` picks a
    /// free port, see [`local_addr`](Server::local_addr)). Tries every
    /// address the host resolves to, in order.
    pub async fn bind(addr: &str, config: Config) -> Result<Server, Error> {
        config.validate()?;
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
            .await
            .map_err(|source| Error::Bind {
                addr: addr.to_owned(),
                source,
            })?
            .collect();
        let mut last_err = None;
        for a in &addrs {
            match TcpListener::bind(a).await {
                Ok(listener) => return Server::new(listener, config),
                Err(e) => last_err = Some(Error::bind(a, e)),
            }
        }
        Err(last_err.unwrap_or_else(|| Error::NoAddress(addr.to_owned())))
    }

    /// Serves on a socket that is already listening (socket activation,
    /// tests). Must be called within a Tokio runtime.
    pub fn from_listener(listener: std::net::TcpListener, config: Config) -> Result<Server, Error> {
        config.validate()?;
        listener.set_nonblocking(true).map_err(Error::Listener)?;
        let listener = TcpListener::from_std(listener).map_err(Error::Listener)?;
        Server::new(listener, config)
    }

    fn new(listener: TcpListener, config: Config) -> Result<Server, Error> {
        let local_addr = listener.local_addr().map_err(Error::Listener)?;
        Ok(Server {
            listener,
            local_addr,
            config,
        })
    }

    /// The address the server listens on (with the real port when bound to
    /// port `0`).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `true` if the server speaks HTTPS.
    pub fn is_tls(&self) -> bool {
        is_tls(&self.config)
    }

    /// Serves `agent` until `shutdown` completes, then shuts down gracefully:
    /// stops accepting (new connections are refused), lets in-flight requests
    /// finish and closes idle connections, and returns once every connection
    /// is closed or [`Config::shutdown_grace`] has passed (the remaining
    /// connections are then cut).
    ///
    /// Pass [`std::future::pending`] to serve forever.
    pub async fn serve<A: Agent>(self, agent: A, shutdown: impl Future<Output = ()>) {
        let Server {
            listener,
            local_addr,
            config,
        } = self;
        #[cfg(feature = "tls")]
        let tls = config
            .tls
            .as_ref()
            .map(|t| tokio_rustls::TlsAcceptor::from(t.rustls_config()));
        let shared = Arc::new(Shared::new(agent, &config));
        // Idle coaching sessions are closed every few seconds (and before
        // each coaching route), so a crashed run's session does not stay.
        let sweeper = shared.sessions.sweep_period().map(|period| {
            let weak = Arc::downgrade(&shared);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(shared) = weak.upgrade() else {
                        return;
                    };
                    crate::coaching_routes::expire_idle(&shared).await;
                }
            })
        });
        let builder = Arc::new(http_builder(&config));
        let connections = Arc::new(Semaphore::new(config.max_connections));
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let scheme = if is_tls(&config) { "https" } else { "http" };
        tracing::info!(
            max_body_bytes = config.max_body_bytes,
            max_connections = config.max_connections,
            max_concurrent_inferences = config.max_concurrent_inferences,
            "magma-server listening on {scheme}://{local_addr}"
        );
        tokio::pin!(shutdown);

        'accept: loop {
            // Reap finished connection tasks (their resources are already
            // released; this keeps the set small).
            while let Some(done) = tasks.try_join_next() {
                log_task_end(done);
            }
            let permit = tokio::select! {
                () = &mut shutdown => break 'accept,
                permit = Arc::clone(&connections).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break 'accept, // never closed
                },
            };
            let (stream, peer) = tokio::select! {
                () = &mut shutdown => break 'accept,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) if is_per_connection(&e) => continue 'accept,
                    Err(e) => {
                        tracing::error!(error = %e, "accept failed; retrying in 1 s");
                        tokio::select! {
                            () = &mut shutdown => break 'accept,
                            () = tokio::time::sleep(ACCEPT_BACKOFF) => continue 'accept,
                        }
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let conn = Conn {
                shared: Arc::clone(&shared),
                builder: Arc::clone(&builder),
                peer,
                header_timeout: config.header_timeout,
                write_timeout: config.write_timeout,
                stop: stop_rx.clone(),
                _permit: permit,
            };
            #[cfg(feature = "tls")]
            if let Some(acceptor) = &tls {
                let acceptor = acceptor.clone();
                let timeout = config.tls_handshake_timeout;
                tasks.spawn(conn.serve_tls(acceptor, stream, timeout));
                continue 'accept;
            }
            tasks.spawn(conn.serve(stream));
        }

        drop(listener);
        let _ = stop_tx.send(true);
        while let Some(done) = tasks.try_join_next() {
            log_task_end(done);
        }
        let open = tasks.len();
        tracing::info!(
            open_connections = open,
            "shutting down: no longer accepting connections"
        );
        let drained = tokio::time::timeout(config.shutdown_grace, async {
            while let Some(done) = tasks.join_next().await {
                log_task_end(done);
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                open_connections = tasks.len(),
                grace_secs = config.shutdown_grace.as_secs_f64(),
                "shutdown grace period over; closing the remaining connections"
            );
            tasks.shutdown().await;
        }
        if let Some(sweeper) = sweeper {
            sweeper.abort();
        }
        tracing::info!("shut down");
    }
}

fn is_tls(config: &Config) -> bool {
    #[cfg(feature = "tls")]
    {
        config.tls.is_some()
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = config;
        false
    }
}

fn http_builder(config: &Config) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The header timeout is the connection's idle timer (`serve_io`), armed
    // once per timeout period rather than once per request as hyper's is.
    builder
        .http1()
        .header_read_timeout(None)
        .keep_alive(true)
        .max_buf_size(MAX_HEAD_BYTES);
    // HTTP/2: at most `max_concurrent_streams` requests (and so bodies) at
    // once per connection, as HTTP/1.1 has one; the idle timer closes it as
    // it closes an HTTP/1.1 connection.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(config.max_concurrent_streams)
        .initial_stream_window_size(H2_WINDOW)
        .initial_connection_window_size(H2_WINDOW)
        .keep_alive_interval(H2_KEEP_ALIVE)
        .keep_alive_timeout(H2_KEEP_ALIVE);
    builder
}

fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    )
}

fn log_task_end(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        if e.is_panic() {
            tracing::error!(error = %e, "a connection task panicked");
        }
    }
}

/// One accepted connection and what serving it needs.
struct Conn<A> {
    shared: Arc<Shared<A>>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    peer: SocketAddr,
    header_timeout: Duration,
    write_timeout: Duration,
    stop: watch::Receiver<bool>,
    /// Held until the connection closes: counts it against
    /// `max_connections`.
    _permit: OwnedSemaphorePermit,
}

impl<A: Agent> Conn<A> {
    #[cfg(feature = "tls")]
    async fn serve_tls(
        mut self,
        acceptor: tokio_rustls::TlsAcceptor,
        stream: TcpStream,
        timeout: Duration,
    ) {
        let stream = WriteTimeout::new(stream, self.write_timeout);
        let handshake = tokio::time::timeout(timeout, acceptor.accept(stream));
        let tls = tokio::select! {
            result = handshake => match result {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(peer = %self.peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(peer = %self.peer, "TLS handshake timed out");
                    return;
                }
            },
            _ = self.stop.wait_for(|stop| *stop) => return,
        };
        self.serve_io(tls).await;
    }

    async fn serve(self, stream: TcpStream) {
        let stream = WriteTimeout::new(stream, self.write_timeout);
        self.serve_io(stream).await;
    }

    async fn serve_io<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            shared,
            builder,
            peer,
            header_timeout,
            write_timeout: _,
            stop,
            _permit,
        } = self;
        let ctx = Arc::new(ConnContext {
            shared,
            peer,
            activity: Activity::new(),
        });
        let service = {
            let ctx = Arc::clone(&ctx);
            hyper::service::service_fn(move |req: Request<Incoming>| {
                // A clone of this connection's context, not of the server's
                // state: no counter shared with other connections.
                let ctx = Arc::clone(&ctx);
                async move {
                    let _answering = ctx.activity.begin(req.version());
                    handle(&ctx.shared, req, Some(ctx.peer)).await
                }
            })
        };
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        // The idle timer: no bytes before a first request (protocol
        // detection, a partial HTTP/2 preface), a slow request head, or a
        // quiet keep-alive connection. It fires `header_timeout` after the
        // connection opened; from then on it is moved to `header_timeout`
        // after the last request began or was answered, so that it fires at
        // most once per period however many requests the connection serves.
        let mut idle = IdleTimer::new(header_timeout);
        let mut idle_off = false;
        let mut stop = StopSignal::new(stop);
        let mut stopping = false;
        loop {
            // Polled in this order, without select!'s random start: the
            // connection first, as it is what wakes the task almost always.
            tokio::select! {
                biased;
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(peer = %peer, error = %e, "connection closed with an error");
                    }
                    return;
                }
                () = &mut idle, if !idle_off => match ctx.activity.idle_deadline(header_timeout) {
                    // HTTP/2 gets a GOAWAY and one more period to finish
                    // what it was sending (a peer that keeps its window shut
                    // never does); HTTP/1.1 is closed at once.
                    Idle::Expired if ctx.activity.is_http2() && !stopping => {
                        tracing::debug!(peer = %peer, "HTTP/2 connection idle for the header timeout; going away");
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                        idle.reset(Instant::now() + header_timeout);
                    }
                    Idle::Expired => {
                        tracing::debug!(peer = %peer, "no request within the header timeout; closing");
                        return;
                    }
                    Idle::Until(deadline) => idle.reset(deadline),
                    Idle::Never => idle_off = true,
                },
                () = &mut stop, if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// The idle timer as a connection's `select!` polls it: on every wake of the
/// connection. Polling a registered [`Sleep`](tokio::time::Sleep) again
/// costs a budget check, a clock-free state check and a waker comparison
/// each time; this polls it once after each reset (which registers this
/// task's waker with the timer) and afterwards only reads whether it has
/// fired, which the timer's wake-up makes true before it wakes the task.
struct IdleTimer {
    sleep: Pin<Box<tokio::time::Sleep>>,
    registered: bool,
}

impl IdleTimer {
    fn new(after: Duration) -> IdleTimer {
        IdleTimer {
            sleep: Box::pin(tokio::time::sleep(after)),
            registered: false,
        }
    }

    fn reset(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
        self.registered = false;
    }
}

impl Future for IdleTimer {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.registered && !this.sleep.is_elapsed() {
            return Poll::Pending;
        }
        let ready = this.sleep.as_mut().poll(cx);
        // Registered with this task's waker, which stays the same for the
        // task's whole life.
        this.registered = ready.is_pending();
        ready
    }
}

/// The shutdown signal as a connection's `select!` polls it: on every wake
/// of the connection (each read and each response). A `watch` future that
/// is waiting locks a mutex shared by all connections each time it is
/// polled; this one polls it only when the value changed or the task's waker
/// is not the one registered, and otherwise costs one atomic load.
struct StopSignal {
    rx: watch::Receiver<bool>,
    wait: Pin<Box<dyn Future<Output = ()> + Send>>,
    registered: Option<Waker>,
}

impl StopSignal {
    fn new(rx: watch::Receiver<bool>) -> StopSignal {
        let mut waiting = rx.clone();
        StopSignal {
            rx,
            wait: Box::pin(async move {
                // An error means the server is gone: stop too.
                let _ = waiting.wait_for(|stop| *stop).await;
            }),
            registered: None,
        }
    }
}

impl Future for StopSignal {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let same_waker = this
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if same_waker && matches!(this.rx.has_changed(), Ok(false)) {
            return Poll::Pending;
        }
        this.registered = Some(cx.waker().clone());
        this.wait.as_mut().poll(cx)
    }
}

/// One connection's part of the server, shared by its requests' futures:
/// cloning it per request touches no counter that other connections use.
struct ConnContext<A> {
    shared: Arc<Shared<A>>,
    peer: SocketAddr,
    activity: Activity,
}

/// What a connection's requests tell its idle timer.
struct Activity {
    opened: Instant,
    /// Requests being answered (more than one only over HTTP/2).
    answering: AtomicUsize,
    /// When the last request was answered, in nanoseconds since `opened`.
    last: AtomicU64,
    /// A request came over HTTP/2.
    http2: AtomicBool,
}

/// What the idle timer does when it fires.
enum Idle {
    /// Nothing happened for the whole timeout: close the connection.
    Expired,
    /// Something did: fire again then.
    Until(Instant),
    /// Stop the timer.
    Never,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            answering: AtomicUsize::new(0),
            last: AtomicU64::new(0),
            http2: AtomicBool::new(false),
        }
    }

    fn since_opened(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A request has begun; the guard marks it answered when dropped, which
    /// also happens when the client goes away. The time is taken then only:
    /// while a request is being answered the timer does not count (see
    /// [`Activity::idle_deadline`]), so its start would never be read.
    fn begin(&self, version: Version) -> Answering<'_> {
        if version == Version::HTTP_2 {
            self.http2.store(true, Ordering::Relaxed);
        }
        self.answering.fetch_add(1, Ordering::Relaxed);
        Answering(self)
    }

    fn is_http2(&self) -> bool {
        self.http2.load(Ordering::Relaxed)
    }

    fn idle_deadline(&self, timeout: Duration) -> Idle {
        let now = Instant::now();
        let from = if self.answering.load(Ordering::Relaxed) > 0 {
            // Bodies and inferences have their own limits.
            now
        } else {
            self.opened + Duration::from_nanos(self.last.load(Ordering::Relaxed))
        };
        match from.checked_add(timeout) {
            Some(deadline) if deadline > now => Idle::Until(deadline),
            Some(_) => Idle::Expired,
            // Past any representable instant: never.
            None => Idle::Never,
        }
    }
}

/// A request being answered ([`Activity::begin`]).
struct Answering<'a>(&'a Activity);

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.0.last.store(self.0.since_opened(), Ordering::Relaxed);
        self.0.answering.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's socket whose writes fail (`TimedOut`) when they make no
/// progress for `limit`: a peer that stops reading its answers (its
/// receive window full) costs its connection, over HTTP/1.1 and HTTP/2
/// alike. The timer exists only while a write is blocked.
struct WriteTimeout<I> {
    io: I,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<I> WriteTimeout<I> {
    fn new(io: I, limit: Duration) -> WriteTimeout<I> {
        WriteTimeout {
            io,
            limit,
            stalled: None,
        }
    }

    /// What a write's `result` means with the timer: progress disarms it,
    /// a block arms it (once per stall), and a block past it is an error.
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if result.is_ready() {
            self.stalled = None;
            return result;
        }
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| {
            let deadline = Instant::now().checked_add(limit).unwrap_or_else(far_future);
            Box::pin(tokio::time::sleep_until(deadline))
        });
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the peer did not read for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// About thirty years from now: a deadline that never comes.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

impl<I: AsyncRead + Unpin> AsyncRead for WriteTimeout<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write(cx, buf);
        self.check(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.check(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_flush(cx);
        self.check(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_shutdown(cx);
        self.check(cx, result)
    }
}
