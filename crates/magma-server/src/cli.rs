//! The command-line front end: flags for every limit and for TLS, logging
//! through `tracing`, and shutdown on SIGINT/SIGTERM.
//!
//! One call runs an agent as a complete server program:
//!
//! ```no_run
//! # struct MyAgent;
//! # impl magma_server::Agent for MyAgent {
//! #     fn info(&self) -> magma_server::AgentInfo { magma_server::AgentInfo::new("a", "1") }
//! #     async fn respond(&self, _: &magma_server::AgentInput)
//! #         -> Result<Vec<magma_server::Candidate>, magma_server::Rejection> { Ok(vec![]) }
//! # }
//! fn main() -> std::process::ExitCode {
//!     magma_server::cli::run(MyAgent)
//! }
//! ```
//!
//! `--help` and `--version` name the agent (its [`AgentInfo`]'s `agent_id`
//! and `agent_version`) and say which features this build of the server has.
//! An agent whose model loads at start-up uses [`run_loading`]: the server
//! answers at once (`/v1/info`, and `503` on `/health`) while the loading runs.
//!
//! Programs with flags of their own embed [`ServerArgs`] with
//! `#[command(flatten)]` and call [`run_with`] or [`run_with_loading`].
//!
//! `<binary> export` runs the agent's [`Exporter`](crate::Exporter) instead
//! of serving (no socket, no runtime): [`run`] and [`run_loading`] do it
//! themselves; programs with their own parser call [`export_invocation`]
//! first. `export --describe` prints the exporter's identity and dataset
//! files as one JSON object; `export` reads `ExportExample`s as JSON lines
//! on standard input (or `--input FILE`) and writes one `ExportResult` line
//! per example line on standard output (see
//! [`serve_export`](crate::export::serve_export)).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser};

use crate::{Agent, AgentInfo, Config, Server};

mod startup;

pub use startup::{run_loading, run_with_loading};

/// Text for the end of `--help`: logging, `RUST_LOG`, exit status.
pub const AFTER_HELP: &str = "\
Every option can also be set by the environment variable shown with it (MAGMA_SERVER_*);
a flag on the command line wins over its variable.

Logging: one line per request on standard error (method, path, status, latency, request id),
as text or, with --log-format json, as JSON objects; set RUST_LOG to change what is logged,
e.g. RUST_LOG=magma_server=debug (default: info).
Request and response bodies, and so agent memory, are never logged at the default level.

Exit status: 0 after a shutdown on SIGINT or SIGTERM (130 when a second signal cut the drain
short); 1 if the server could not start
(address in use or not local, unreadable or mismatched TLS files, --coaching-store not
reachable); 2 for invalid flags or
environment variables (a malformed value or address, flags that do not go together).";

/// The server's flags, shared by `magma-server` and by agent programs.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ServerArgs {
    /// Address to listen on, HOST:PORT (port 0 picks a free port, logged at start)
    #[arg(env = "MAGMA_SERVER_LISTEN", long, value_name = "ADDR", default_value = "127.0.0.1:8080",
          value_parser = listen_addr)]
    pub listen: String,

    /// Largest accepted request body, in bytes (or with a unit: 16MiB, 16MB, 512KiB); larger bodies get 413
    #[arg(env = "MAGMA_SERVER_MAX_BODY_BYTES", long, value_name = "BYTES", default_value_t = Config::DEFAULT_MAX_BODY_BYTES,
          value_parser = byte_size)]
    pub max_body_bytes: u64,

    /// Memory budget of the whole process for requests (counted twice: body and parsed) and answers, in bytes or with a unit (256MiB); past it, 503
    #[arg(env = "MAGMA_SERVER_MAX_TOTAL_BODY_BYTES", long, value_name = "BYTES", default_value_t = Config::DEFAULT_MAX_TOTAL_BODY_BYTES,
          value_parser = byte_size)]
    pub max_total_body_bytes: u64,

    /// Coaching sessions open at once; a PUT of a new one beyond it gets 503
    #[arg(env = "MAGMA_SERVER_MAX_COACHING_SESSIONS", long, value_name = "N", default_value_t = Config::DEFAULT_MAX_COACHING_SESSIONS,
          value_parser = positive_usize)]
    pub max_coaching_sessions: usize,

    /// Bytes all open coaching sessions may hold together (each counts its configuration's compact JSON); a PUT of a new one that does not fit gets 503
    #[arg(env = "MAGMA_SERVER_MAX_COACHING_SESSION_BYTES", long, value_name = "N", default_value_t = Config::DEFAULT_MAX_COACHING_SESSION_BYTES)]
    pub max_coaching_session_bytes: u64,

    /// Seconds a coaching session may go without a request before it is closed as if deleted (a crashed run never sends DELETE); 0: never
    #[arg(env = "MAGMA_SERVER_COACHING_SESSION_IDLE_SECS", long, value_name = "SECS", default_value_t = Config::DEFAULT_COACHING_SESSION_IDLE_TIMEOUT.as_secs())]
    pub coaching_session_idle_secs: u64,

    /// Share coaching sessions with every replica through Redis: redis://USER:PASSWORD@HOST:PORT/DB
    /// (all but the host optional), or rediss:// for TLS (requires the `redis` feature); the
    /// password may come from MAGMA_SERVER_COACHING_STORE_PASSWORD instead; unreachable at
    /// start-up, the server does not start [default: this process's memory]
    #[arg(env = "MAGMA_SERVER_COACHING_STORE", long, value_name = "URL", hide_env_values = true,
          value_parser = coaching_store_url)]
    pub coaching_store: Option<CoachingStoreUrl>,

    /// rediss:// --coaching-store: trust the CA certificates of this PEM file instead of the web roots
    #[arg(
        env = "MAGMA_SERVER_COACHING_STORE_CACERT",
        long,
        value_name = "PEM",
        requires = "coaching_store"
    )]
    pub coaching_store_cacert: Option<PathBuf>,

    /// Seconds a connection has to send a complete request head (also the idle keep-alive timeout)
    #[arg(env = "MAGMA_SERVER_HEADER_TIMEOUT_SECS", long, value_name = "SECS", default_value_t = Config::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,

    /// Seconds a client may leave the server's writes blocked (not reading its answer); then the connection is closed
    #[arg(env = "MAGMA_SERVER_WRITE_TIMEOUT_SECS", long, value_name = "SECS", default_value_t = Config::DEFAULT_WRITE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub write_timeout_secs: u64,

    /// Seconds allowed to receive a request body; 408 when exceeded
    #[arg(env = "MAGMA_SERVER_BODY_TIMEOUT_SECS", long, value_name = "SECS", default_value_t = Config::DEFAULT_BODY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_secs: u64,

    /// Open connections at most; further clients wait in the operating system's queue
    #[arg(env = "MAGMA_SERVER_MAX_CONNECTIONS", long, value_name = "N", default_value_t = Config::DEFAULT_MAX_CONNECTIONS,
          value_parser = positive_usize)]
    pub max_connections: usize,

    /// Requests one HTTP/2 connection may have open at once
    #[arg(env = "MAGMA_SERVER_MAX_CONCURRENT_STREAMS", long, value_name = "N", default_value_t = Config::DEFAULT_MAX_CONCURRENT_STREAMS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_streams: u32,

    /// Inferences running at once at most; further requests wait (health and info never do)
    #[arg(env = "MAGMA_SERVER_MAX_CONCURRENT_INFERENCES", long, value_name = "N", default_value_t = Config::DEFAULT_MAX_CONCURRENT_INFERENCES,
          value_parser = positive_usize)]
    pub max_concurrent_inferences: usize,

    /// Candidates one request may ask for (sum of num_outputs); more gets 422
    #[arg(env = "MAGMA_SERVER_MAX_CANDIDATES", long, value_name = "N", default_value_t = Config::DEFAULT_MAX_CANDIDATES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_candidates: u64,

    /// Largest answer of POST /v1/responses in bytes or with a unit (16MiB), at least 1024; a request whose answer would be larger gets 422, an agent answer that is larger 500
    #[arg(env = "MAGMA_SERVER_MAX_RESPONSE_BYTES", long, value_name = "BYTES", default_value_t = Config::DEFAULT_MAX_RESPONSE_BYTES,
          value_parser = response_bytes)]
    pub max_response_bytes: u64,

    /// Seconds allowed per inference, including the wait for a slot; 504 when exceeded [default: no limit]
    #[arg(env = "MAGMA_SERVER_INFERENCE_TIMEOUT_SECS", long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub inference_timeout_secs: Option<u64>,

    /// Seconds in-flight requests get to finish after SIGINT/SIGTERM before connections are cut
    #[arg(env = "MAGMA_SERVER_SHUTDOWN_GRACE_SECS", long, value_name = "SECS", default_value_t = Config::DEFAULT_SHUTDOWN_GRACE.as_secs())]
    pub shutdown_grace_secs: u64,

    /// Serve the endpoints under this path prefix, e.g. /agent (for proxies that keep the prefix)
    #[arg(env = "MAGMA_SERVER_PATH_PREFIX", long, value_name = "PREFIX", value_parser = path_prefix)]
    pub path_prefix: Option<String>,

    /// HTTPS: certificate chain, PEM, leaf first (requires the `tls` feature)
    #[arg(
        env = "MAGMA_SERVER_TLS_CERT",
        long,
        value_name = "PEM",
        requires = "tls_key",
        conflicts_with = "tls_self_signed"
    )]
    pub tls_cert: Option<PathBuf>,

    /// HTTPS: private key of --tls-cert, PEM (requires the `tls` feature)
    #[arg(
        env = "MAGMA_SERVER_TLS_KEY",
        long,
        value_name = "PEM",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// HTTPS: require client certificates signed by a CA in this PEM file (mutual TLS)
    #[arg(env = "MAGMA_SERVER_TLS_CLIENT_CA", long, value_name = "PEM")]
    pub tls_client_ca: Option<PathBuf>,

    /// HTTPS for development: use (or first generate) DIR/ca.pem, DIR/cert.pem and DIR/key.pem
    /// for localhost, 127.0.0.1, ::1 and the listen address; give DIR/ca.pem to clients
    #[arg(env = "MAGMA_SERVER_TLS_SELF_SIGNED", long, value_name = "DIR")]
    pub tls_self_signed: Option<PathBuf>,

    /// Seconds a TLS client has to complete its handshake
    #[arg(env = "MAGMA_SERVER_TLS_HANDSHAKE_TIMEOUT_SECS", long, value_name = "SECS", default_value_t = Config::DEFAULT_TLS_HANDSHAKE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub tls_handshake_timeout_secs: u64,

    /// Trust X-Forwarded-For and Forwarded from this proxy address or network (10.0.0.5,
    /// 10.0.0.0/8, fd00::/8) for the client address in the access log; repeatable, or
    /// comma-separated
    #[arg(env = "MAGMA_SERVER_TRUSTED_PROXIES", long = "trusted-proxy", value_name = "ADDR[/BITS]",
          value_delimiter = ',', value_parser = trusted_proxy)]
    pub trusted_proxies: Vec<crate::TrustedProxy>,

    /// Serve Prometheus metrics on GET /metrics (under --path-prefix): requests, latency,
    /// inferences, candidates; also what the agent records with the `metrics` macros
    /// (requires the `metrics` feature)
    #[arg(env = "MAGMA_SERVER_METRICS", long)]
    pub metrics: bool,

    /// Log format on standard error: `text` (one line per event) or `json` (one JSON object per
    /// event, with the span's fields, for log collectors)
    #[arg(env = "MAGMA_SERVER_LOG_FORMAT", long, value_name = "FORMAT", value_enum,
          default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The value of `--coaching-store`: a Redis URL, which may hold a password,
/// so its `Debug` form shows only the scheme.
#[derive(Clone, PartialEq, Eq)]
pub struct CoachingStoreUrl(String);

impl CoachingStoreUrl {
    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for CoachingStoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = self.0.split_once("://").map_or("?", |(s, _)| s);
        write!(f, "CoachingStoreUrl({scheme}://<hidden>)")
    }
}

/// Any text: the URL is read when the server starts, so that a refused
/// value is never echoed (clap would print it, password and all).
fn coaching_store_url(s: &str) -> Result<CoachingStoreUrl, String> {
    Ok(CoachingStoreUrl(s.to_owned()))
}

/// The variable that may hold the password of `--coaching-store`.
pub const COACHING_STORE_PASSWORD_ENV: &str = "MAGMA_SERVER_COACHING_STORE_PASSWORD";

/// How [`run`] writes its logs (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum LogFormat {
    /// Human-readable lines (colored on a terminal).
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`
    /// and the current `span` with its fields (`request_id`...).
    Json,
}

/// `HOST:PORT`, `[IPv6]:PORT` or `IPv4:PORT`, port 0 to 65535; names are
/// resolved when binding.
fn listen_addr(s: &str) -> Result<String, String> {
    const EXPECTED: &str = "expected HOST:PORT, e.g. 127.0.0.1:8080, 0.0.0.0:8080, [::1]:8080 \
                            or localhost:8080";
    let Some((host, port)) = s.rsplit_once(':') else {
        if let Ok(port) = s.parse::<u16>() {
            return Err(format!(
                "a port alone; give the address too: 127.0.0.1:{port} (this machine only) \
                 or 0.0.0.0:{port} (every interface)"
            ));
        }
        return Err(format!("no port; {EXPECTED}"));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!("{port:?} is not a port (0 to 65535); {EXPECTED}"));
    }
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        !host.is_empty()
            && !host.contains(':')
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    };
    if !host_ok {
        return Err(format!(
            "{host:?} is not a host name or address; {EXPECTED}"
        ));
    }
    Ok(s.to_owned())
}

fn trusted_proxy(s: &str) -> Result<crate::TrustedProxy, String> {
    s.parse()
        .map_err(|e: crate::TrustedProxyError| e.to_string())
}

/// A plain URL path: no query, fragment or whitespace.
fn path_prefix(s: &str) -> Result<String, String> {
    if s.contains(['?', '#']) || s.chars().any(char::is_whitespace) {
        return Err("expected a plain URL path such as /agent (no '?', '#' or spaces)".into());
    }
    Ok(s.to_owned())
}

/// A number of bytes: `16777216`, or a number with a unit, binary (`KiB`,
/// `MiB`, `GiB`: powers of 1024) or decimal (`kB`/`KB`, `MB`, `GB`: powers of
/// 1000), upper or lower case, with or without a space; `B` alone is bytes.
pub(crate) fn byte_size(s: &str) -> Result<u64, String> {
    const EXAMPLE: &str = "expected a number of bytes, alone or with a unit: 16777216, 16MiB \
                           (16 x 1024 x 1024), 16MB (16 x 1000 x 1000), 512KiB, 1GiB";
    let text = s.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(format!("{s:?} does not start with a number; {EXAMPLE}"));
    }
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => return Err(format!("unknown unit {other:?} in {s:?}; {EXAMPLE}")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("{s:?} is too large for 64 bits; {EXAMPLE}"))
}

/// [`byte_size`], at least 1024.
fn response_bytes(s: &str) -> Result<u64, String> {
    match byte_size(s)? {
        n if n < 1024 => Err(format!("{n} bytes is below the minimum of 1024 (1KiB)")),
        n => Ok(n),
    }
}

fn positive_usize(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Why the server could not start from its flags. The message names the
/// flag (or its environment variable's flag) at fault and what was expected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// A TLS flag was given to a build without the `tls` feature.
    #[error(
        "--tls-cert, --tls-key, --tls-client-ca and --tls-self-signed need a build with TLS \
         support; rebuild with `--features tls` or terminate TLS in a reverse proxy"
    )]
    TlsUnavailable,
    /// `--metrics` in a build without the `metrics` feature.
    #[error(
        "--metrics needs a build with the `metrics` feature; rebuild with `--features metrics`"
    )]
    MetricsUnavailable,
    /// `--coaching-store` in a build without the `redis` feature.
    #[error(
        "--coaching-store needs a build with the `redis` feature; rebuild with `--features redis` \
         (or leave it out: one replica keeps its sessions in memory)"
    )]
    RedisUnavailable,
    /// `--coaching-store` is not a Redis URL, or its password is given twice.
    #[error("--coaching-store: {0}")]
    CoachingStoreUrl(String),
    /// The coaching session store could not be reached or used at start-up.
    #[error("--coaching-store {target}: {message}")]
    CoachingStore {
        /// The store, without credentials.
        target: String,
        /// What went wrong, and what to do.
        message: String,
    },
    /// `--tls-client-ca` without a certificate to serve.
    #[error("--tls-client-ca needs --tls-cert/--tls-key or --tls-self-signed")]
    ClientCaWithoutTls,
    /// Loading or generating the TLS material failed.
    #[cfg(feature = "tls")]
    #[error("{message}")]
    Tls {
        /// The flag and file at fault, and what was expected.
        message: String,
        /// What the TLS layer said.
        #[source]
        source: crate::TlsError,
    },
    /// The server could not listen on `--listen`.
    #[error("--listen {addr}: {}; {}", chain(source), listen_hint(source))]
    Listen {
        /// The value of `--listen`.
        addr: String,
        /// Why.
        #[source]
        source: crate::Error,
    },
}

impl CliError {
    /// The process exit status for this error: `2` for flags that cannot
    /// work together (a usage error, as for values `clap` refuses), `1`
    /// for a start-up failure (files, the address).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::TlsUnavailable
            | CliError::ClientCaWithoutTls
            | CliError::MetricsUnavailable
            | CliError::RedisUnavailable
            | CliError::CoachingStoreUrl(_) => 2,
            CliError::CoachingStore { .. } => 1,
            #[cfg(feature = "tls")]
            CliError::Tls { .. } => 1,
            CliError::Listen { .. } => 1,
        }
    }
}

/// What fits the reason a listening socket could not be opened.
fn listen_hint(e: &crate::Error) -> &'static str {
    let crate::Error::Bind { source, .. } = e else {
        return "expected a local address that is free";
    };
    match source.kind() {
        std::io::ErrorKind::AddrInUse => {
            "another process already listens there (is another server running on it?); \
             stop it or choose another port"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "that address is not one of this machine's; listen on 127.0.0.1 (this machine \
             only), 0.0.0.0 (every interface) or an address of one of its interfaces"
        }
        std::io::ErrorKind::PermissionDenied => {
            "ports below 1024 need privileges; choose a port from 1024 up (e.g. 8080)"
        }
        _ => "expected a local address that is free",
    }
}

/// Whether a Redis URL carries a password (`user:password@` or `:password@`).
#[cfg(feature = "redis")]
fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// A Redis URL without its user and password, for messages.
#[cfg(feature = "redis")]
fn url_without_credentials(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, path) = rest.split_at(cut);
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => "(not a URL)".to_owned(),
    }
}

/// `e` and its sources, joined by `: `.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

impl ServerArgs {
    /// The [`Config`] these flags describe; loads or generates TLS material.
    /// It has no coaching store yet: [`server`](ServerArgs::server)
    /// connects to `--coaching-store`.
    pub fn config(&self) -> Result<Config, CliError> {
        let secs = Duration::from_secs;
        let mut config = Config {
            max_body_bytes: self.max_body_bytes,
            header_timeout: secs(self.header_timeout_secs),
            write_timeout: secs(self.write_timeout_secs),
            body_timeout: secs(self.body_timeout_secs),
            max_connections: self.max_connections,
            max_concurrent_streams: self.max_concurrent_streams,
            max_concurrent_inferences: self.max_concurrent_inferences,
            max_candidates: self.max_candidates,
            max_response_bytes: self.max_response_bytes,
            max_total_body_bytes: self.max_total_body_bytes,
            max_coaching_sessions: self.max_coaching_sessions,
            max_coaching_session_bytes: self.max_coaching_session_bytes,
            coaching_session_idle_timeout: match self.coaching_session_idle_secs {
                0 => None,
                n => Some(secs(n)),
            },
            inference_timeout: self.inference_timeout_secs.map(secs),
            shutdown_grace: secs(self.shutdown_grace_secs),
            path_prefix: self.path_prefix.clone(),
            tls_handshake_timeout: secs(self.tls_handshake_timeout_secs),
            trusted_proxies: self.trusted_proxies.clone(),
            ..Config::default()
        };
        if self.metrics {
            #[cfg(feature = "metrics")]
            {
                let metrics = crate::Metrics::new();
                if metrics.install_global().is_err() {
                    tracing::warn!(
                        "a metrics recorder is already installed; /metrics shows the server's \
                         own metrics only"
                    );
                }
                config.metrics = Some(metrics);
            }
            #[cfg(not(feature = "metrics"))]
            return Err(CliError::MetricsUnavailable);
        }
        if self.coaching_store.is_some() && !cfg!(feature = "redis") {
            return Err(CliError::RedisUnavailable);
        }
        let wants_tls = self.tls_cert.is_some() || self.tls_self_signed.is_some();
        if self.tls_client_ca.is_some() && !wants_tls {
            return Err(CliError::ClientCaWithoutTls);
        }
        if wants_tls {
            self.add_tls(&mut config)?;
        }
        Ok(config)
    }

    /// Connects to `--coaching-store` (the password from the URL or from
    /// `password`, the variable's value).
    #[cfg(feature = "redis")]
    async fn coaching_store(
        &self,
        url: &CoachingStoreUrl,
        password: Option<String>,
    ) -> Result<crate::RedisStore, CliError> {
        use crate::RedisStoreError;
        let mut builder = crate::RedisStore::builder(url.as_str())
            .map_err(|e| CliError::CoachingStoreUrl(e.to_string()))?;
        if let Some(password) = password.filter(|p| !p.is_empty()) {
            if url_has_password(url.as_str()) {
                return Err(CliError::CoachingStoreUrl(format!(
                    "the URL has a password and {COACHING_STORE_PASSWORD_ENV} is set too; give \
                     it once"
                )));
            }
            builder = builder.password(password);
        }
        if let Some(ca) = &self.coaching_store_cacert {
            builder = builder.ca_file(ca);
        }
        let store = builder.connect().await.map_err(|e| match e {
            RedisStoreError::Connect { target, reason } => CliError::CoachingStore {
                target,
                message: format!(
                    "cannot reach the coaching session store: {reason}; start Redis there, or \
                     fix the URL (and its password, or {COACHING_STORE_PASSWORD_ENV})"
                ),
            },
            RedisStoreError::Version { target, version } => CliError::CoachingStore {
                target,
                message: format!(
                    "Redis {version} is too old; coaching sessions need Redis 5 or newer"
                ),
            },
            RedisStoreError::Tls(e) => CliError::CoachingStore {
                target: url_without_credentials(url.as_str()),
                message: format!("--coaching-store-cacert: {e}"),
            },
            other => CliError::CoachingStoreUrl(other.to_string()),
        })?;
        tracing::info!(
            store = store.target(),
            "coaching sessions are kept in Redis, shared with every replica that uses it"
        );
        Ok(store)
    }

    #[cfg(not(feature = "tls"))]
    fn add_tls(&self, _: &mut Config) -> Result<(), CliError> {
        Err(CliError::TlsUnavailable)
    }

    #[cfg(feature = "tls")]
    fn add_tls(&self, config: &mut Config) -> Result<(), CliError> {
        let client_ca = self.tls_client_ca.as_deref();
        let tls = match (&self.tls_cert, &self.tls_key, &self.tls_self_signed) {
            (Some(cert), Some(key), _) => crate::TlsConfig::from_pem_files(cert, key, client_ca)
                .map_err(|e| self.tls_error(e))?,
            (_, _, Some(dir)) => {
                let (tls, files) = crate::TlsConfig::self_signed(dir, &self.names(), client_ca)
                    .map_err(|e| self.tls_error(e))?;
                let what = if files.generated {
                    "generated"
                } else {
                    "reusing"
                };
                tracing::info!(
                    "self-signed TLS ({what}): give {} to clients (requests: REQUESTS_CA_BUNDLE; \
                     curl: --cacert)",
                    files.ca_cert.display()
                );
                tls
            }
            // clap's `requires` makes cert and key come together.
            _ => return Err(CliError::ClientCaWithoutTls),
        };
        config.tls = Some(tls);
        Ok(())
    }

    /// `e`, with the flag whose file is at fault and what it should hold.
    #[cfg(feature = "tls")]
    fn tls_error(&self, e: crate::TlsError) -> CliError {
        use crate::TlsError;
        let is = |flag: &Option<PathBuf>, path: &std::path::Path| flag.as_deref() == Some(path);
        let flag_of = |path: &std::path::Path| -> (&'static str, &'static str) {
            if is(&self.tls_client_ca, path) {
                (
                    "--tls-client-ca",
                    "a PEM file of CA certificates (BEGIN CERTIFICATE)",
                )
            } else if is(&self.tls_key, path) {
                ("--tls-key", "a PEM private key (PKCS#8, PKCS#1 or SEC1)")
            } else if is(&self.tls_cert, path) {
                (
                    "--tls-cert",
                    "a PEM certificate chain, leaf first (BEGIN CERTIFICATE)",
                )
            } else {
                (
                    "--tls-self-signed",
                    "a writable directory for ca.pem, cert.pem and key.pem, or one holding them",
                )
            }
        };
        let message = match &e {
            TlsError::Io { path, source } => {
                let (flag, expected) = flag_of(path);
                format!("{flag} {}: {source}; expected {expected}", path.display())
            }
            TlsError::Pem { path, what } => {
                let (flag, expected) = flag_of(path);
                format!("{flag} {}: {what}; expected {expected}", path.display())
            }
            TlsError::Config(why) => match (&self.tls_cert, &self.tls_key) {
                (Some(cert), Some(key)) => format!(
                    "--tls-cert {} and --tls-key {}: refused: {why}; expected the private key of \
                     the certificate's leaf",
                    cert.display(),
                    key.display()
                ),
                _ => format!("--tls-self-signed: the files were refused: {why}"),
            },
            TlsError::Generate(why) => {
                format!("--tls-self-signed: cannot generate the development certificate: {why}")
            }
            // A variant added later: its own message, without a flag.
            #[allow(unreachable_patterns, reason = "TlsError is non_exhaustive")]
            _ => e.to_string(),
        };
        CliError::Tls { message, source: e }
    }

    /// Names for the development certificate: the loopback names plus the
    /// host of `--listen` when it is a specific address or a name.
    #[cfg(feature = "tls")]
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let host = match self.listen.parse::<std::net::SocketAddr>() {
            Ok(addr) if !addr.ip().is_unspecified() => Some(addr.ip().to_string()),
            Ok(_) => None,
            Err(_) => self.listen.rsplit_once(':').map(|(h, _)| h.to_owned()),
        };
        if let Some(host) = host.filter(|h| !h.is_empty() && !names.contains(h)) {
            names.push(host);
        }
        names
    }
}

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A MAGMA agent server (Agent HTTP Contract, protocol 2.0)",
    after_help = AFTER_HELP
)]
struct DefaultCli {
    #[command(flatten)]
    server: ServerArgs,
}

/// Runs `agent` as a complete program: parses the process's flags
/// ([`ServerArgs`], each also read from its `MAGMA_SERVER_*` environment
/// variable), logs to standard error (`RUST_LOG`, default `info`;
/// `--log-format`), serves until SIGINT or SIGTERM, drains, and returns the
/// exit status: 0 after a shutdown, 1 if the server could not start
/// (address in use, unreadable or mismatched TLS files), 2 for invalid
/// flags.
///
/// `--help` and `--version` name the agent: its [`AgentInfo`]'s `agent_id`
/// and `agent_version` (see [`version_string`]).
pub fn run<A: Agent>(agent: A) -> ExitCode {
    if let Some(args) = export_invocation(&agent.info()) {
        return run_export(&agent, &args);
    }
    let args = parse_args_for(&agent.info());
    run_with(agent, args)
}

/// The flags of the process, parsed by a command named after the agent:
/// `--help` shows `agent_id`, `--version` prints
/// `<agent_id> <agent_version> (...)`. Exits on `--help`, `--version` and
/// invalid flags, as any `clap` program.
pub fn parse_args_for(info: &AgentInfo) -> ServerArgs {
    let command = command_for(info);
    let parsed = command
        .clone()
        .try_get_matches()
        .and_then(|m| DefaultCli::from_arg_matches(&m));
    match parsed {
        Ok(cli) => cli.server,
        Err(e) => exit_on_error(&command, e),
    }
}

/// Exits on a `clap` error of `command` as [`clap::Error::exit`] does, except
/// that a refused value that came from a `MAGMA_SERVER_*` environment variable
/// (not from the command line) names that variable: clap names only the flag,
/// which the user never typed. For programs with their own parser that
/// flatten [`ServerArgs`]:
/// `Cli::from_arg_matches(&m).unwrap_or_else(|e| cli::exit_on_error(&command, e))`.
pub fn exit_on_error(command: &clap::Command, error: clap::Error) -> ! {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(message) = from_environment(command, &error, &args, |name| {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    }) {
        #[allow(clippy::print_stderr, reason = "clap's own errors go there too")]
        {
            eprint!("{message}");
        }
        std::process::exit(2);
    }
    error.exit()
}

/// A value refused by `clap` that came from an environment variable, not
/// from the command line: clap's message with the variable named (clap names
/// only the flag, which the user never typed). `None` for other errors.
pub(crate) fn from_environment(
    command: &clap::Command,
    error: &clap::Error,
    args: &[String],
    var: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        error.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    let Some(ContextValue::String(shown)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let long = shown.split_whitespace().next()?.strip_prefix("--")?;
    let arg = command
        .get_arguments()
        .find(|a| a.get_long() == Some(long))?;
    let flag = format!("--{long}");
    if args
        .iter()
        .any(|a| *a == flag || a.starts_with(&format!("{flag}=")))
    {
        return None;
    }
    let name = arg.get_env()?.to_string_lossy().into_owned();
    let value = var(&name)?;
    let rendered = error.render().to_string();
    let (first, rest) = rendered.split_once('\n').unwrap_or((&rendered, ""));
    Some(format!(
        "{first}\n  (the value comes from the environment variable {name}={value:?}; \
         {flag} was not given)\n{rest}"
    ))
}

/// The `clap` command of [`parse_args_for`].
fn command_for(info: &AgentInfo) -> clap::Command {
    let name = if info.agent_id.trim().is_empty() {
        "magma-agent".to_owned()
    } else {
        info.agent_id.clone()
    };
    let version = if info.agent_version.trim().is_empty() {
        "(version unknown)"
    } else {
        &info.agent_version
    };
    DefaultCli::command()
        .name(name.clone())
        .bin_name(name.clone())
        .version(version_string(version))
        .about(format!(
            "The MAGMA agent {name}, served by magma-server (Agent HTTP Contract, protocol 2.0)"
        ))
}

/// What `--version` prints after the program's name: `version`, then the
/// server library's version and the optional features of this build, e.g.
/// `1.2.0 (magma-rs-server 0.1.0; features: cli, tls)`.
///
/// Programs with their own `clap` parser use it too:
/// `Cli::command().version(magma_server::cli::version_string(env!("CARGO_PKG_VERSION")))`.
pub fn version_string(version: &str) -> String {
    let features: Vec<&str> = [
        ("cli", cfg!(feature = "cli")),
        ("tls", cfg!(feature = "tls")),
        ("metrics", cfg!(feature = "metrics")),
        ("mimalloc", cfg!(feature = "mimalloc")),
        ("redis", cfg!(feature = "redis")),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(name, _)| *name)
    .collect();
    let tls = if cfg!(feature = "tls") {
        ""
    } else {
        "; no TLS"
    };
    format!(
        "{version} ({} {}; features: {}{tls})",
        env!("CARGO_PKG_NAME"),
        env!("CARGO_PKG_VERSION"),
        features.join(", ")
    )
}

/// Like [`run`], with flags the caller parsed (embed [`ServerArgs`] in your
/// own `clap` parser with `#[command(flatten)]`).
pub fn run_with<A: Agent>(agent: A, args: ServerArgs) -> ExitCode {
    serve_program(agent, args, None)
}

/// The body of [`run_with`] and [`run_with_loading`]: `start`, if any, runs
/// once the socket is bound.
#[allow(
    clippy::print_stderr,
    reason = "the command-line front end reports to the terminal"
)]
fn serve_program<A: Agent>(
    agent: A,
    args: ServerArgs,
    start: Option<startup::Start<A>>,
) -> ExitCode {
    init_logging_as(args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(async move {
        let serve = async move {
            let server = match args.server().await {
                Ok(server) => server,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(e.exit_code());
                }
            };
            match start {
                None => {
                    server.serve(agent, shutdown_signal()).await;
                    ExitCode::SUCCESS
                }
                Some(start) => startup::serve(server, agent, start).await,
            }
        };
        tokio::select! {
            code = serve => code,
            () = second_signal() => {
                tracing::warn!(
                    "second shutdown signal; exiting without waiting for the remaining requests"
                );
                ExitCode::from(130)
            }
        }
    });
    // Stalled connections and long parses are not waited for.
    runtime.shutdown_background();
    code
}

impl ServerArgs {
    /// The configured server, listening on `--listen`, with its coaching
    /// store connected. Must be called within a Tokio runtime.
    pub async fn server(&self) -> Result<Server, CliError> {
        #[allow(unused_mut, reason = "the store is set with the `redis` feature")]
        let mut config = self.config()?;
        #[cfg(feature = "redis")]
        if let Some(url) = &self.coaching_store {
            config.coaching_store = Some(
                self.coaching_store(url, std::env::var(COACHING_STORE_PASSWORD_ENV).ok())
                    .await?,
            );
        }
        Server::bind(&self.listen, config)
            .await
            .map_err(|source| CliError::Listen {
                addr: self.listen.clone(),
                source,
            })
    }
}

/// The flags of `<binary> export`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ExportArgs {
    /// Print the exporter's identity and dataset files as one JSON object
    /// (`{"agent_id", "agent_version", "filenames"}`) and exit.
    #[arg(long)]
    pub describe: bool,
    /// Read the examples from FILE instead of standard input.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// The export options, a JSON object (what GEN's `--options` file holds).
    #[arg(long, value_name = "JSON")]
    pub options: Option<String>,
    /// Examples handed to the exporter at a time.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub batch_size: usize,
}

#[derive(Debug, Parser)]
struct ExportCli {
    #[command(flatten)]
    export: ExportArgs,
}

/// If the process was started as `<binary> export ...`, its export flags
/// (exits on `--help` and invalid flags, as any `clap` program); `None`
/// otherwise.
pub fn export_invocation(info: &AgentInfo) -> Option<ExportArgs> {
    let mut args = std::env::args_os();
    let program = args.next()?;
    let first = args.next()?;
    if first != "export" {
        return None;
    }
    let name = if info.agent_id.trim().is_empty() {
        "magma-agent".to_owned()
    } else {
        info.agent_id.clone()
    };
    let command = ExportCli::command()
        .name(format!("{name} export"))
        .bin_name(format!(
            "{} export",
            std::path::Path::new(&program).display()
        ))
        .about(
            "Renders GEN's export examples (JSON lines on standard input) into this agent's \
             datasets (ExportResult JSON lines on standard output), without HTTP",
        );
    match ExportCli::from_arg_matches(
        &command.get_matches_from(std::iter::once(program).chain(args)),
    ) {
        Ok(cli) => Some(cli.export),
        Err(e) => e.exit(),
    }
}

/// Runs `agent`'s exporter as [`ExportArgs`] say: exit status 0 when every
/// line was answered (even with `error` results), 1 when the agent has no
/// exporter or the input cannot be read or the output written, 2 for
/// invalid options.
#[allow(
    clippy::print_stderr,
    clippy::print_stdout,
    reason = "the command-line front end reports to the terminal"
)]
pub fn run_export<A: Agent>(agent: &A, args: &ExportArgs) -> ExitCode {
    use std::io::Write;
    let info = agent.info();
    let Some(exporter) = agent.exporter() else {
        eprintln!(
            "error: the agent {} {} has no exporter",
            info.agent_id, info.agent_version
        );
        return ExitCode::from(1);
    };
    if args.describe {
        let mut out = std::io::stdout().lock();
        let text = crate::export::describe(&info, exporter);
        return match writeln!(out, "{text}").and_then(|()| out.flush()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: cannot write to standard output: {e}");
                ExitCode::from(1)
            }
        };
    }
    let options = match args
        .options
        .as_deref()
        .map(|t| crate::Json::from_slice(t.as_bytes()))
    {
        None => crate::Object::new(),
        Some(Ok(crate::Json::Object(o))) => o,
        Some(Ok(_)) => {
            eprintln!("error: --options must be a JSON object");
            return ExitCode::from(2);
        }
        Some(Err(e)) => {
            eprintln!("error: --options is not valid JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let input: Box<dyn std::io::BufRead> = match &args.input {
        None => Box::new(std::io::stdin().lock()),
        Some(path) => match std::fs::File::open(path) {
            Ok(file) => Box::new(std::io::BufReader::new(file)),
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", path.display());
                return ExitCode::from(1);
            }
        },
    };
    let output = std::io::BufWriter::new(std::io::stdout().lock());
    match crate::export::serve_export(exporter, input, output, &options, args.batch_size) {
        Ok(summary) => {
            eprintln!(
                "exported {} examples ({} errors)",
                summary.examples, summary.errors
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: export stopped: {e}");
            ExitCode::from(1)
        }
    }
}

/// Installs a `tracing` subscriber writing text to standard error,
/// filtered by `RUST_LOG` (default `info`). Does nothing if one is already
/// installed.
pub fn init_logging() {
    init_logging_as(LogFormat::Text);
}

/// [`init_logging`] in the given format.
pub fn init_logging_as(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
    };
}

/// Completes on the second SIGINT or SIGTERM (the first starts the drain).
async fn second_signal() {
    signal_received().await;
    signal_received().await;
}

/// Completes on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let name = signal_received().await;
    tracing::info!("{name} received; shutting down");
}

/// Which of SIGINT or SIGTERM arrived first, from now on.
async fn signal_received() -> &'static str {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => "SIGINT",
        () = terminate => "SIGTERM",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_is_consistent() {
        DefaultCli::command().debug_assert();
    }

    #[test]
    fn version_and_help_name_the_agent_and_the_build() {
        let info = AgentInfo::new("my-agent", "1.2.3");
        let e = command_for(&info)
            .try_get_matches_from(["anything", "--version"])
            .unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion);
        let version = e.to_string();
        assert!(
            version.starts_with(&format!(
                "my-agent 1.2.3 (magma-rs-server {}; features: cli",
                env!("CARGO_PKG_VERSION")
            )),
            "{version}"
        );
        assert_eq!(version.contains("tls"), cfg!(feature = "tls"), "{version}");
        let help = command_for(&info)
            .try_get_matches_from(["anything", "--help"])
            .unwrap_err()
            .to_string();
        assert!(help.contains("The MAGMA agent my-agent"), "{help}");
        assert!(help.contains("Usage: my-agent [OPTIONS]"), "{help}");
        // The flags are those of `magma-server`.
        let args = DefaultCli::from_arg_matches(
            &command_for(&info)
                .try_get_matches_from(["my-agent", "--listen", "127.0.0.1:9"])
                .unwrap(),
        )
        .unwrap()
        .server;
        assert_eq!(args.listen, "127.0.0.1:9");
        // No name or version: still a usable command.
        let e = command_for(&AgentInfo::new("", ""))
            .try_get_matches_from(["x", "--version"])
            .unwrap_err();
        assert!(e.to_string().starts_with("magma-agent (version unknown) ("));
    }

    #[test]
    fn defaults_match_config_defaults() {
        let args = DefaultCli::try_parse_from(["x"]).unwrap().server;
        assert_eq!(args.listen, "127.0.0.1:8080");
        let c = args.config().unwrap();
        let d = Config::default();
        assert_eq!(c.max_body_bytes, d.max_body_bytes);
        assert_eq!(c.header_timeout, d.header_timeout);
        assert_eq!(c.write_timeout, d.write_timeout);
        assert_eq!(c.body_timeout, d.body_timeout);
        assert_eq!(c.max_connections, d.max_connections);
        assert_eq!(c.max_concurrent_inferences, d.max_concurrent_inferences);
        assert_eq!(c.max_candidates, d.max_candidates);
        assert_eq!(c.max_response_bytes, d.max_response_bytes);
        assert_eq!(c.max_total_body_bytes, d.max_total_body_bytes);
        assert_eq!(c.max_coaching_sessions, d.max_coaching_sessions);
        assert_eq!(c.max_coaching_session_bytes, d.max_coaching_session_bytes);
        assert_eq!(
            c.coaching_session_idle_timeout,
            d.coaching_session_idle_timeout
        );
        assert_eq!(c.max_concurrent_streams, d.max_concurrent_streams);
        assert_eq!(c.inference_timeout, d.inference_timeout);
        assert_eq!(c.shutdown_grace, d.shutdown_grace);
        assert_eq!(c.tls_handshake_timeout, d.tls_handshake_timeout);
    }

    #[test]
    fn zero_limits_and_lone_tls_flags_are_refused() {
        assert!(DefaultCli::try_parse_from(["x", "--max-connections", "0"]).is_err());
        assert!(DefaultCli::try_parse_from(["x", "--header-timeout-secs", "0"]).is_err());
        assert!(DefaultCli::try_parse_from(["x", "--tls-cert", "c.pem"]).is_err());
        let args = DefaultCli::try_parse_from(["x", "--tls-client-ca", "ca.pem"])
            .unwrap()
            .server;
        assert!(matches!(args.config(), Err(CliError::ClientCaWithoutTls)));
    }

    #[test]
    fn the_store_urls_password_is_never_in_debug_output() {
        let args = DefaultCli::try_parse_from(["x", "--coaching-store", "redis://:hunter2@h:1/0"])
            .unwrap()
            .server;
        let shown = format!("{args:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("redis://<hidden>"),
            "{shown}"
        );
        assert_eq!(
            args.coaching_store.as_ref().map(CoachingStoreUrl::as_str),
            Some("redis://:hunter2@h:1/0")
        );
    }

    #[cfg(feature = "redis")]
    #[test]
    fn store_urls_are_shown_without_credentials() {
        assert!(url_has_password("redis://:pw@h"));
        assert!(url_has_password("rediss://user:pw@h:1/2"));
        assert!(!url_has_password("redis://user@h"));
        assert!(!url_has_password("redis://h:1/0"));
        assert_eq!(
            url_without_credentials("rediss://u:pw@h:1/2"),
            "rediss://h:1/2"
        );
        assert_eq!(url_without_credentials("nonsense:pw"), "(not a URL)");
    }

    #[cfg(not(feature = "redis"))]
    #[test]
    fn a_coaching_store_without_the_feature_says_how_to_get_it() {
        let args = DefaultCli::try_parse_from(["x", "--coaching-store", "redis://h"])
            .unwrap()
            .server;
        let e = args.config().unwrap_err();
        assert!(matches!(e, CliError::RedisUnavailable));
        assert!(e.to_string().contains("--features redis"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_flags_without_the_feature_say_how_to_get_it() {
        let args = DefaultCli::try_parse_from(["x", "--tls-self-signed", "d"])
            .unwrap()
            .server;
        let e = args.config().unwrap_err();
        assert!(matches!(e, CliError::TlsUnavailable));
        assert!(e.to_string().contains("--features tls"));
    }
}
